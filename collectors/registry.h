#pragma once
// The registered collectors (collectors/registry.cpp: one line per collector). Above every
// collector: the daemon and the tests ask here, never a collector.

#include "collectors/collector.h"
#include "config/config.h"

#include <span>
#include <string_view>
#include <vector>

namespace ibfabric {

std::span<const CollectorSpec> collector_specs();
const CollectorSpec* find_collector_spec(std::string_view name);
// What the config parser needs to know of each registered collector (config/config.h).
std::vector<CollectorDefaults> collector_defaults();

}  // namespace ibfabric
