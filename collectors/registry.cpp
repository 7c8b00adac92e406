#include "collectors/registry.h"
// Every collector's header and its spec(), in the order of the one list in
// collectors/CMakeLists.txt (generated from it).
#include "collectors/registry_list.h"

#include <vector>

namespace ibfabric {

std::span<const CollectorSpec> collector_specs() {
  static const std::vector<CollectorSpec> specs{IBFABRIC_COLLECTOR_SPECS};
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
