#include "collectors/pods/pods_collector.h"

namespace ibfabric::pods {

CollectResult PodsCollector::collect_blocking() {
  try {
    return PodsRun(config_, state_).run();
  } catch (const std::exception& e) {
    // Only allocation failure or a programming error gets here.
    return CollectResult{MetricFamilies{}, false, std::string("pods: ") + e.what()};
  }
}

CollectorSpec spec() {
  return CollectorSpec{
      "pods", true, std::chrono::seconds(15),
      [](CollectorContext& context, ConfigSection& section) -> std::unique_ptr<Collector> {
        PodsConfig config;
        config.sysfs_root = context.sysfs_root;
        config.procfs_root = context.procfs_root;
        config.kubelet = kubelet::read_options(section);
        config.gpu_resources =
            section.has("gpu_resources")
                ? section.get_string_list("gpu_resources")
                : std::vector<std::string>{"nvidia.com/gpu", "nvidia.com/gpu.shared",
                                           "nvidia.com/mig-*"};
        config.efa_resources = section.has("efa_resources")
                                   ? section.get_string_list("efa_resources")
                                   : std::vector<std::string>{"vpc.amazonaws.com/efa"};
        std::set<std::string> seen;
        for (auto& entry : section.get_section_list("rdma_shared_resources")) {
          SharedResource shared;
          if (!entry.has("resource") || !entry.has("devices")) {
            entry.fail(entry.has("resource") ? "devices" : "resource",
                       "every rdma_shared_resources entry gives resource and devices");
          }
          shared.resource = entry.get_string("resource", "");
          if (shared.resource.empty()) entry.fail("resource", "a resource name");
          if (!seen.insert(shared.resource).second) {
            entry.fail("resource", "listed twice in rdma_shared_resources");
          }
          shared.devices = entry.get_string_list("devices");
          if (shared.devices.empty()) {
            entry.fail("devices", "at least one RDMA device, net interface or PCI address");
          }
          entry.finish();
          config.rdma_shared.push_back(std::move(shared));
        }
        section.finish();
        return std::make_unique<PodsCollector>(std::move(config));
      }};
}

}  // namespace ibfabric::pods
