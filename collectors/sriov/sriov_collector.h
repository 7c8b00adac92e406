#pragma once
// The `sriov` collector: every SR-IOV physical function under the sysfs root with its VFs —
// what sysfs says (counts, PCI addresses, GUIDs, link policy, which net/RDMA device each VF
// became) joined with what rtnetlink says (per-VF traffic counters, link state, trust, spoof
// check). Every collection rebuilds everything from both sources: VFs that disappear leave no
// series behind. Metrics are documented in docs/collectors.md, "Collector `sriov`".

#include "collectors/collector.h"

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

// name "sriov", enabled by default, every 15s. Its keys are read in spec() and documented in
// docs/configuration.md, "Collector `sriov`" (tests/unit/config_keys_test.cpp ties the two).
// A BlockingCollector: sysfs reads, the dump and the kubelet call run on a worker thread.
CollectorSpec spec();

// Where the kubelet's pod-resources socket is; an empty path: never ask.
struct KubeletOptions {
  std::string socket;
  std::chrono::milliseconds timeout{2000};
};

class SriovCollector final : public BlockingCollector {
 public:
  // Returns the links with VFs or throws NetlinkError; the live kernel unless a test says so.
  using NetlinkDump = std::function<std::vector<PfLink>()>;

  // `dump` empty: no netlink values at all.
  SriovCollector(std::string sysfs_root, NetlinkDump dump, KubeletOptions kubelet = {});

  // Reads sysfs and runs one netlink dump (bounded by netlink_timeout), on a worker thread.
  CollectResult collect_blocking() override;

 private:
  CollectResult run();
  // Adds the pod series of the VFs in `pfs` (and the kubelet's health) to `out`.
  void add_pods(MetricsBuilder& out, const std::vector<PfInventory>& pfs);

  std::string sysfs_root_;
  NetlinkDump dump_;
  // Since start, per PF name: exported as ibfabric_sriov_read_errors_total.
  std::map<std::string, std::uint64_t> read_errors_;
  std::uint64_t netlink_errors_ = 0;
  // Paths that are bad right now: logged when they turn bad and when they recover.
  std::set<std::string> bad_files_;
  std::string last_netlink_error_;

  KubeletOptions kubelet_;
  // Since start, per reason: ibfabric_sriov_kubelet_errors_total.
  std::map<std::string, std::uint64_t> kubelet_errors_;
  bool kubelet_socket_seen_ = false;
  // "" while the kubelet answers; else the reason of the failure logged last.
  std::string last_kubelet_reason_;
};

}  // namespace ibfabric::sriov
