// The fabric collector's link memory (collectors/fabric/link_memory.*): the cables discovery
// saw, kept for link_memory and restored from the state file (docs/design.md, "Memory of the
// fabric sweep" and "State that survives a restart").

#include "collectors/fabric/link_memory.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <chrono>
#include <string>
#include <vector>

namespace ibfabric::fabric {
namespace {

constexpr std::uint64_t kSwitch = 0x0002c90200400000ull;
constexpr std::uint64_t kHost = 0x0002c90300000000ull;
constexpr std::uint64_t kSubnetPrefixForTest = 0xfe80000000000000ull;

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
