// The fabric's node and cable info families (collectors/fabric/topology_info.*): made and
// compressed a part at a time on a thread of their own, they must read as the samples made
// whole do (docs/design.md, "Memory of the fabric sweep"); and the link memory they show.

#include "collectors/fabric/topology_info.h"
#include "exporters/prometheus/render.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace ibfabric::fabric {
namespace {

constexpr std::uint64_t kSwitch = 0x0002c90200400000ull;
constexpr std::uint64_t kHost = 0x0002c90300000000ull;
constexpr std::uint64_t kSubnetPrefixForTest = 0xfe80000000000000ull;

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

// The link memory (collectors/fabric/link_memory.*): what a discovery sees replaces what was
// remembered of the same switch end; a cable not seen keeps its time and its far end's name
// until `keep` has passed; a state file's records add only the ends not known, and the names
// known stay; a name nothing refers to any more goes.
TEST(LinkMemory, RemembersRestoresAndForgetsAsDiscoverySees) {
  using std::chrono::minutes;
  const auto keep = std::chrono::duration_cast<LinkMemory::Duration>(minutes(10));
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t leaf = kSwitch + 1, a = kHost + 1, b = kHost + 2, c = kHost + 3;
  NodeNameMap names;
  auto topology = [&](std::uint64_t on_port_1, const std::string& name,
                      const std::string& leaf_name = "leaf-1") {
    Topology t;
    t.add_node(leaf, IB_NODE_SWITCH, 4, {});
    t.find(leaf)->description = leaf_name;
    t.add_node(on_port_1, IB_NODE_CA, 1, {});
    t.find(on_port_1)->description = name;
    t.add_link(leaf, 1, on_port_1, 1);
    return t;
  };
  LinkMemory memory;
  memory.remember(topology(a, "host-a", "leaf-0"), names, t0, keep);
  // The leaf was renamed; port 1 now holds b; port 2's far end (c) was never found by a
  // discovery: its name is the GUID's.
  auto second = topology(b, "host-b");
  second.add_link(leaf, 2, c, 1);
  memory.remember(second, names, t0 + minutes(1), keep);
  ASSERT_EQ(memory.size(), 2u);
  EXPECT_EQ(memory.links()[0].remote_guid, b);
  EXPECT_EQ(memory.links()[0].remote_type, IB_NODE_CA);
  EXPECT_EQ(memory.links()[1].remote_type, 0);
  EXPECT_EQ(memory.name(leaf), "leaf-1") << "the name seen last";
  EXPECT_EQ(memory.name(b), "host-b");
  EXPECT_EQ(memory.name(c), names.name(c, ""));
  EXPECT_EQ(memory.name(a), "") << "nothing refers to a any more";

  // A state file: port 1 (known: stays b), port 3 (added, with its names), a record too old,
  // and port 3 twice (the first wins).
  auto record = [&](int port, std::uint64_t remote, const std::string& name) {
    return state::LinkRecord{kSubnetPrefixForTest, "", leaf,       port, remote, 1,
                             IB_NODE_CA,           0,  "leaf-one", name};
  };
  std::vector<state::LinkRecord> records{record(1, a, "host-a-old"), record(3, a, "host-a-old"),
                                         record(3, c, "host-c-old"), record(4, c, "too old")};
  std::vector<LinkMemory::TimePoint> seen{t0, t0, t0, t0 - minutes(20)};
  EXPECT_EQ(memory.restore(records, seen, t0 + minutes(2), keep), 1u);
  ASSERT_EQ(memory.size(), 3u);
  EXPECT_EQ(memory.links()[0].remote_guid, b);
  EXPECT_EQ(memory.links()[2].port, 3);
  EXPECT_EQ(memory.links()[2].remote_guid, a);
  EXPECT_EQ(memory.name(leaf), "leaf-1") << "a name known stays";
  EXPECT_EQ(memory.name(a), "host-a-old");

  // Past `keep` from when each was last seen, a cable not seen again goes, and its names.
  memory.remember(topology(b, "host-b"), names, t0 + minutes(10) + std::chrono::seconds(30), keep);
  ASSERT_EQ(memory.size(), 2u) << "port 3 (seen at t0) went; port 2 (t0 + 1 min) stays";
  EXPECT_EQ(memory.links()[1].port, 2);
  EXPECT_EQ(memory.name(a), "");
  EXPECT_EQ(memory.name(c), names.name(c, ""));
}

}  // namespace
}  // namespace ibfabric::fabric
