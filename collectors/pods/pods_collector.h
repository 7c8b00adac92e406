#pragma once
// The `pods` collector: which pod uses which local RDMA port. It asks the kubelet's
// pod-resources API which container of which pod holds which device, and ties each device to
// the ports of this node it uses: an SR-IOV VF (the VF's RDMA device and its PF's), a whole HCA
// or EFA device handed to the pod, a shared HCA (the RDMA shared device plugin), a GPU (the
// HCA ports nearest to it in the PCIe tree, as NCCL would choose them). Metrics are documented
// in docs/collectors.md, "Collector `pods`".

#include "collectors/collector.h"
#include "collectors/pods/pods_run.h"

namespace ibfabric::pods {

// name "pods", enabled by default, every 15s. Its keys are read in spec() and documented in
// docs/configuration.md, "Collector `pods`" (tests/unit/config_keys_test.cpp ties the two).
// A BlockingCollector: sysfs and procfs reads and the kubelet call run on a worker thread.
CollectorSpec spec();

class PodsCollector final : public BlockingCollector {
 public:
  explicit PodsCollector(PodsConfig config) : config_(std::move(config)) {}

  // One PodsRun, on the collector's worker thread (pods_run.h).
  CollectResult collect_blocking() override;

 private:
  PodsConfig config_;
  PodsState state_;
};

}  // namespace ibfabric::pods
