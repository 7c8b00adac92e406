// The fabric's node and cable info families (collectors/fabric/topology_info.*): made and
// compressed a part at a time on a thread of their own, they must read as the samples made
// whole do (docs/design.md, "Memory of the fabric sweep").

#include "collectors/fabric/topology_info.h"
#include "exporters/prometheus/render.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <chrono>
#include <memory>
#include <string>

namespace ibfabric::fabric {
namespace {

constexpr std::uint64_t kSwitch = 0x0002c90200400000ull;
constexpr std::uint64_t kHost = 0x0002c90300000000ull;

std::string text_of(MetricFamilies families) {
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->families = std::move(families);
  return render_text({snapshot}, {});
}

// Three switches cabled in a line, two hosts on each (one of them named by the node-name-map,
// a name and a description with a character the exposition escapes), and a cable the link memory
// keeps after discovery stopped seeing it.
TopologyInfo fabric(int shard, int shards) {
  auto t = std::make_shared<Topology>();
  auto names = std::make_shared<const NodeNameMap>(
      NodeNameMap::parse("0x0002c90300000101 \"rack-1 host\\a\"\n", "names"));
  for (int s = 1; s <= 3; ++s) {
    t->add_node(kSwitch + s, IB_NODE_SWITCH, 8, {});
    t->find(kSwitch + s)->description = "leaf-" + std::to_string(s);
    for (int h = 0; h < 2; ++h) {
      std::uint64_t host = kHost + 0x100 * s + h;
      t->add_node(host, IB_NODE_CA, 1, {});
      t->find(host)->description =
          "host-" + std::to_string(s) + "-" + std::to_string(h) + (h ? " mlx5_0\\x" : " mlx5_0");
      t->add_link(kSwitch + s, 3 + h, host, 1);
      t->add_link(host, 1, kSwitch + s, 3 + h);
    }
    if (s > 1) {
      t->add_link(kSwitch + s, 1, kSwitch + s - 1, 2);
      t->add_link(kSwitch + s - 1, 2, kSwitch + s, 1);
    }
  }
  TopologyInfo info;
  auto now = std::chrono::steady_clock::now();
  Topology before = *t;
  before.add_link(kSwitch + 3, 7, kHost + 0x999, 1);  // unplugged since
  info.links.remember(before, *names, now - std::chrono::minutes(1), std::chrono::hours(1));
  info.links.remember(*t, *names, now, std::chrono::hours(1));
  info.topology = t;
  info.names = names;
  info.shard = shard;
  info.shards = shards;
  return info;
}

TEST(TopologyInfo, CompressedPartByPartReadsAsTheSamplesMadeWhole) {
  for (auto [shard, shards] : {std::pair{0, 1}, std::pair{0, 2}, std::pair{1, 2}}) {
    SCOPED_TRACE("shard " + std::to_string(shard) + " of " + std::to_string(shards));
    auto info = fabric(shard, shards);
    auto samples = topology_info_samples(info);
    auto want = text_of(samples);
    if (shards == 1) {
      ASSERT_EQ(samples.size(), 2u);
      EXPECT_EQ(samples[0].samples.size(), 9u);   // 3 switches, 6 hosts
      EXPECT_EQ(samples[1].samples.size(), 11u);  // 6 host cables, 2x2 switch ends, 1 kept
      EXPECT_NE(want.find("remote_node_name=\"rack-1 host\\\\a\""), std::string::npos) << want;
      EXPECT_NE(want.find("port=\"7\""), std::string::npos) << "the cable kept";
    }
    for (std::size_t part :
         {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{10}, kTopologyInfoPart}) {
      SCOPED_TRACE("part " + std::to_string(part));
      auto compressed = topology_info_compressed(info, part);
      ASSERT_EQ(compressed.size(), samples.size());
      for (std::size_t f = 0; f < compressed.size(); ++f) {
        EXPECT_EQ(compressed[f].name, samples[f].name);
        ASSERT_TRUE(compressed[f].text);
        EXPECT_TRUE(compressed[f].samples.empty());
      }
      EXPECT_EQ(text_of(compressed), want);
    }
  }
}

}  // namespace
}  // namespace ibfabric::fabric
