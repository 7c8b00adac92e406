#pragma once
// One collection of the `sriov` collector (SriovRun) and what it keeps from collection to
// collection (SriovState, owned by the SriovCollector): sysfs read, one netlink dump, the
// kubelet asked, joined into the collection's metrics, with the error bookkeeping in the state.
// Metrics: docs/collectors.md, "Collector `sriov`".

#include "collectors/collector.h"
#include "core/metrics.h"
#include "kubelet/kubelet_watch.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ibfabric::sriov {

struct PfLink;
struct PfInventory;

// What the collector reads, from its keys (spec() reads them with their defaults; netlink and
// netlink_timeout configure the NetlinkDump it is given).
struct SriovConfig {
  std::string sysfs_root;  // --sysfs-root: /sys, or a fixture tree in tests
  kubelet::Options kubelet;
};

// Returns the links with VFs or throws NetlinkError.
using NetlinkDump = std::function<std::vector<PfLink>()>;

// What lives across collections: error counters and what was logged last, so that a problem is
// logged when it starts and when it ends, not on every collection.
struct SriovState {
  // Since start, per PF name: exported as ibfabric_sriov_read_errors_total.
  std::map<std::string, std::uint64_t> read_errors;
  std::uint64_t netlink_errors = 0;
  // Paths that are bad right now: logged when they turn bad and when they recover.
  std::set<std::string> bad_files;
  std::string last_netlink_error;
  // The kubelet's socket, its failed calls since start (ibfabric_sriov_kubelet_errors_total)
  // and what was logged about it.
  kubelet::Watch kubelet{"sriov"};
};

class SriovRun {
 public:
  SriovRun(const SriovConfig& config, const NetlinkDump& dump, SriovState& state)
      : config_(config), dump_(dump), s_(state) {}
  // Reads sysfs and runs one netlink dump (bounded by netlink_timeout).
  CollectResult run();

 private:
  // Adds the pod series of the VFs in `pfs` (and the kubelet's health) to `out`.
  void add_pods(MetricsBuilder& out, const std::vector<PfInventory>& pfs);

  const SriovConfig& config_;
  const NetlinkDump& dump_;
  SriovState& s_;
};

}  // namespace ibfabric::sriov
