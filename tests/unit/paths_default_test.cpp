// Paths follow MAD probing (daemon/app.h): a node that probes peers over MAD gets their paths
// traced without a second switch; UDP-only probing, an explicit `paths: {enabled: ...}` and a
// --[no-]collector.paths flag are left as they are.

#include "collectors/registry.h"
#include "config/config.h"
#include "daemon/app.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace ibfabric {
namespace {

bool paths_enabled(const std::string& yaml, const std::map<std::string, bool>& flags = {}) {
  auto config = parse_config(yaml, "test.yaml", collector_defaults());
  for (auto& c : config.collectors) {
    if (auto it = flags.find(c.name); it != flags.end()) c.enabled = it->second;
  }
  follow_mad_probes_with_paths(config, flags);
  for (const auto& c : config.collectors) {
    if (c.name == "paths") return c.enabled;
  }
  ADD_FAILURE() << "no paths collector";
  return false;
}

TEST(PathsDefault, MadTargetsTurnPathsOn) {
  EXPECT_TRUE(
      paths_enabled("collectors:\n  probe:\n    enabled: true\n    targets: [{lid: 13}]\n"));
  EXPECT_TRUE(paths_enabled(
      "collectors:\n  probe:\n    enabled: true\n    targets: [{name: \"gpu-node-02 mlx5_0\"}]\n"));
  EXPECT_TRUE(paths_enabled("collectors:\n  probe:\n    enabled: true\n    discover: true\n"));
}

TEST(PathsDefault, OtherwiseLeftAsConfigured) {
  EXPECT_FALSE(paths_enabled(""));  // no probing
  EXPECT_FALSE(paths_enabled(
      "collectors:\n  probe:\n    enabled: true\n    targets: [{address: \"10.0.0.2:10917\"}]\n"));
  EXPECT_FALSE(paths_enabled("collectors:\n  probe:\n    enabled: false\n    discover: true\n"));
  EXPECT_FALSE(
      paths_enabled("collectors:\n  probe:\n    enabled: true\n    discover: true\n  paths:\n    "
                    "enabled: false\n"));
  EXPECT_FALSE(paths_enabled("collectors:\n  probe:\n    enabled: true\n    discover: true\n",
                             {{"paths", false}}));
  EXPECT_TRUE(paths_enabled(
      "collectors:\n  probe:\n    enabled: true\n    discover: true\n    targets: []\n"));
}

}  // namespace
}  // namespace ibfabric
