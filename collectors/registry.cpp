#include "collectors/registry.h"
#include "collectors/fabric/fabric_collector.h"
#include "collectors/paths/paths_collector.h"
#include "collectors/ports/ports_collector.h"
#include "collectors/probe/probe_collector.h"
#include "collectors/sm/sm_collector.h"
#include "collectors/sriov/sriov_collector.h"
#include "collectors/sysfs/sysfs_collector.h"

#include <vector>

namespace ibfabric {

std::span<const CollectorSpec> collector_specs() {
  // Adding a collector: its folder, and one line here.
  // One line per collector:
  // clang-format off
  static const std::vector<CollectorSpec> specs{
      sysfs::spec(),
      ports::spec(),
      sm::spec(),
      sriov::spec(),
      fabric::spec(),
      probe::spec(),
      paths::spec(),
  };
  // clang-format on
  return specs;
}

const CollectorSpec* find_collector_spec(std::string_view name) {
  for (const auto& spec : collector_specs()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::vector<CollectorDefaults> collector_defaults() {
  std::vector<CollectorDefaults> out;
  for (const auto& spec : collector_specs()) {
    out.push_back({std::string(spec.name), spec.enabled_by_default, spec.default_interval});
  }
  return out;
}

}  // namespace ibfabric
