#include "localize/probe_plan.h"

#include <algorithm>

namespace ibfabric::localize {

std::map<std::uint64_t, std::vector<std::uint64_t>> probe_plan(
    const std::vector<std::vector<std::uint64_t>>& jobs) {
  std::map<std::uint64_t, std::vector<std::uint64_t>> plan;
  for (auto hosts : jobs) {
    std::sort(hosts.begin(), hosts.end());
    hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
    if (hosts.size() < 2) continue;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      auto& peers = plan[hosts[i]];
      auto next = hosts[(i + 1) % hosts.size()];
      if (std::find(peers.begin(), peers.end(), next) == peers.end()) peers.push_back(next);
    }
  }
  return plan;
}

}  // namespace ibfabric::localize
