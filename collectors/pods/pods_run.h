#pragma once
// One collection of the `pods` collector (PodsRun) and what it keeps from collection to
// collection (PodsState, owned by the PodsCollector): the node's RDMA devices and GPUs read
// (node_inventory.h), the kubelet asked which pod holds which device, and every device a pod
// holds tied to the local RDMA ports it uses. Metrics: docs/collectors.md, "Collector `pods`".

#include "collectors/collector.h"
#include "core/metrics.h"
#include "kubelet/kubelet_watch.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace ibfabric::pods {

struct NodeInventory;

// A resource of the RDMA shared device plugin and the devices its pods share: RDMA device
// names, net interface names or PCI addresses of this node (the plugin's device ids, "0" to
// rdmaHcaMax-1, name none of them).
struct SharedResource {
  std::string resource;              // "rdma/hca_shared_devices_a"
  std::vector<std::string> devices;  // "mlx5_0", "ibp26s0", "0000:1a:00.0"
};

// What the collector reads, from its keys (spec() reads them with their defaults).
struct PodsConfig {
  std::string sysfs_root;   // --sysfs-root
  std::string procfs_root;  // --procfs-root
  kubelet::Options kubelet;
  // Resource names whose device ids are the NVIDIA device plugin's (GPU UUIDs or indexes); an
  // entry ending in '*' matches every name it begins ("nvidia.com/mig-*").
  std::vector<std::string> gpu_resources;
  // Resource names whose device ids are EFA devices (AWS's EFA device plugin).
  std::vector<std::string> efa_resources;
  std::vector<SharedResource> rdma_shared;
};

// What lives across collections.
struct PodsState {
  kubelet::Watch kubelet{"pods"};
  // Files that were there but garbled or unreadable, counted on every collection since start:
  // ibfabric_pods_read_errors_total.
  std::uint64_t read_errors = 0;
  // What is bad right now and was logged: files, references of rdma_shared_resources, device
  // ids that could not be tied to a port. Logged when they turn bad, and again when they
  // turn bad after having been good.
  std::set<std::string> bad_files;
  std::set<std::string> bad_references;
  std::set<std::string> unmapped;
};

class PodsRun {
 public:
  PodsRun(const PodsConfig& config, PodsState& state) : config_(config), s_(state) {}
  CollectResult run();

 private:
  // The pod series, when the kubelet answers, and the kubelet's health.
  void add_pods(MetricsBuilder& out, const NodeInventory& inventory);

  const PodsConfig& config_;
  PodsState& s_;
};

}  // namespace ibfabric::pods
