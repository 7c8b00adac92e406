#pragma once
// Which pod holds which device, from the kubelet's pod-resources API (v1 PodResourcesLister
// List, gRPC over the kubelet's Unix socket). One synchronous call bounded by its own deadline:
// the `sriov` and `pods` collectors make it during their collections (through kubelet::Watch,
// kubelet_watch.h). The proto types stay in the .cpp.

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace ibfabric::kubelet {

// One device id of one container's device plugin resource.
struct DeviceAssignment {
  std::string namespace_name;
  std::string pod;
  std::string container;
  std::string resource;   // "openshift.io/mlnxnics"
  std::string device_id;  // the SR-IOV device plugin's are PCI addresses, "0000:af:00.2"
};

// A List call that did not give an answer. `reason` is the label value of the collectors'
// kubelet error counters (ibfabric_sriov_kubelet_errors_total and the pods collector's):
// one of kKubeletErrorReasons.
class KubeletError : public std::runtime_error {
 public:
  KubeletError(std::string reason, const std::string& what)
      : std::runtime_error(what), reason_(std::move(reason)) {}
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

//   timeout      no answer within the deadline (a kubelet that hangs, a socket nobody serves)
//   permission_denied  the daemon may not connect to the socket (no write access to it)
//   unavailable  no gRPC connection (refused, not an HTTP/2 peer)
//   unimplemented the kubelet has no v1 List (an old kubelet, or the API turned off)
//   malformed    an answer that is not a ListPodResourcesResponse
//   other        any other gRPC status the kubelet returned
inline constexpr const char* kKubeletErrorReasons[] = {
    "timeout", "permission_denied", "unavailable", "unimplemented", "malformed", "other"};

// Calls List on the socket at `socket_path` (absolute) and flattens the answer into one entry
// per device id. Throws KubeletError. A fresh channel per call: a kubelet that restarts
// re-creates its socket, and a call every 15 s does not need a kept connection.
std::vector<DeviceAssignment> list_pod_devices(const std::string& socket_path,
                                               std::chrono::milliseconds timeout);

}  // namespace ibfabric::kubelet
