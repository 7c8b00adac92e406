#pragma once
// The `sriov` collector: every SR-IOV physical function under the sysfs root with its VFs —
// what sysfs says (counts, PCI addresses, GUIDs, link policy, which net/RDMA device each VF
// became) joined with what rtnetlink says (per-VF traffic counters, link state, trust, spoof
// check). Every collection rebuilds everything from both sources: VFs that disappear leave no
// series behind. Metrics are documented in docs/collectors.md, "Collector `sriov`".

#include "collectors/collector.h"
#include "collectors/sriov/sriov_run.h"

namespace ibfabric::sriov {

// name "sriov", enabled by default, every 15s. Its keys are read in spec() and documented in
// docs/configuration.md, "Collector `sriov`" (tests/unit/config_keys_test.cpp ties the two).
// A BlockingCollector: sysfs reads, the dump and the kubelet call run on a worker thread.
CollectorSpec spec();

class SriovCollector final : public BlockingCollector {
 public:
  using NetlinkDump = sriov::NetlinkDump;

  // `dump` (netlink and netlink_timeout made into the call; empty: no netlink values at all) is
  // the tests' seam: the live kernel unless a test says so.
  SriovCollector(SriovConfig config, NetlinkDump dump);

  // One SriovRun, on the collector's worker thread (sriov_run.h).
  CollectResult collect_blocking() override;

 private:
  SriovConfig config_;
  NetlinkDump dump_;
  SriovState state_;
};

}  // namespace ibfabric::sriov
