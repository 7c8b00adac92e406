#pragma once
// What every collector that asks the kubelet does around the List call (pod_resources.h): its
// two keys (`kubelet_socket`, `kubelet_timeout`), looking for the socket on every collection,
// and counting and logging a failed call. Shared by the `sriov` and `pods` collectors, which
// export the result under their own names (ibfabric_<collector>_kubelet_up and
// ibfabric_<collector>_kubelet_errors_total).

#include "config/config_section.h"
#include "kubelet/pod_resources.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ibfabric::kubelet {

// Where the kubelet's pod-resources socket is; an empty path: never ask.
struct Options {
  std::string socket;
  std::chrono::milliseconds timeout{2000};
};

// Reads `kubelet_socket` (an absolute path, or "" to turn the lookup off; default the
// kubelet's own path) and `kubelet_timeout` (at most 10s and shorter than the collector's
// interval; default 2s or half the interval, whichever is shorter) from a collector's section.
Options read_options(ConfigSection& section);

// What one look at the kubelet found.
struct Answer {
  bool socket_exists = false;  // false: no kubelet on this node, nothing to export
  bool up = false;             // the List call answered
  std::vector<DeviceAssignment> devices;
};

// Lives across a collector's collections. Logs with `log_prefix` ("sriov"): the socket found
// and gone (info, once each), a call failing (warn, when its reason starts or changes) and
// working again (info, once).
class Watch {
 public:
  explicit Watch(std::string log_prefix) : prefix_(std::move(log_prefix)) {}

  // Looks for the socket and, when it exists, calls List with the options' deadline.
  Answer ask(const Options& options);

  // Failed calls since the watch was made, by reason: every one of kKubeletErrorReasons.
  std::map<std::string, std::uint64_t> errors() const;

 private:
  std::string prefix_;
  std::map<std::string, std::uint64_t> errors_;
  bool socket_seen_ = false;
  // "" while the kubelet answers; else the reason of the failure logged last.
  std::string last_reason_;
};

}  // namespace ibfabric::kubelet
