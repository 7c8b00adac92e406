#include "collectors/fabric/fabric_model.h"
#include "core/metrics.h"
#include "mad/attributes.h"

#include <gtest/gtest.h>

#include <random>

#include <vector>

namespace ibfabric::fabric {
namespace {

// Expected values computed with an independent FNV-1a implementation (Python) over the GUID's
// big-endian octets; they pin the shard assignment across versions and hosts.
TEST(FabricShardHash, MatchesFnv1aOverBigEndianGuid) {
  EXPECT_EQ(stable_guid_hash(0), 0xa8c7f832281a39c5ull);
  EXPECT_EQ(stable_guid_hash(0x0002c90200400001ull), 0xbcea2c7054fef38bull);
  EXPECT_EQ(stable_guid_hash(0xe41d2d0300c0ffeeull), 0x6b38ac33f625a96bull);
  EXPECT_EQ(stable_guid_hash(0xffffffffffffffffull), 0x8cf51a8bfca3883dull);
}

TEST(FabricShardHash, EveryGuidInExactlyOneShard) {
  for (std::uint64_t g = 0x0002c90200400000ull; g < 0x0002c90200400000ull + 500; ++g) {
    int owners = 0;
    for (int k = 0; k < 3; ++k) owners += in_shard(g, k, 3);
    EXPECT_EQ(owners, 1) << g;
    EXPECT_TRUE(in_shard(g, 0, 1));
  }
}

TEST(FabricShardHash, SequentialGuidsSpreadOverShards) {
  // Switch GUIDs of one vendor differ in their last octets only; a modulo of the raw GUID
  // would be fine for them, but a hash must not be worse.
  std::vector<int> per_shard(4, 0);
  for (std::uint64_t g = 0; g < 1000; ++g) {
    for (int k = 0; k < 4; ++k) per_shard[k] += in_shard(0x0002c90200400000ull + g, k, 4);
  }
  for (int n : per_shard) {
    EXPECT_GT(n, 200);
    EXPECT_LT(n, 300);
  }
}

TEST(FabricTopology, SecondRouteToKnownNodeAddsNoNode) {
  Topology t;
  EXPECT_TRUE(t.add_node(0x10, IB_NODE_SWITCH, 36, {1}));
  EXPECT_FALSE(t.add_node(0x10, IB_NODE_CA, 1, {1, 2, 3}));
  ASSERT_NE(t.find(0x10), nullptr);
  EXPECT_EQ(t.find(0x10)->type, IB_NODE_SWITCH);
  EXPECT_EQ(t.find(0x10)->route, (std::vector<std::uint8_t>{1}));
  EXPECT_EQ(t.find(0x99), nullptr);
}

TEST(FabricTopology, CountsEachCableOnce) {
  Topology t;
  t.add_node(0x1, IB_NODE_CA, 1, {});
  t.add_node(0xa, IB_NODE_SWITCH, 8, {1});
  t.add_node(0xb, IB_NODE_SWITCH, 8, {1, 5});
  t.add_node(0x2, IB_NODE_CA, 1, {1, 5, 3});
  // CA 1 port 1 <-> switch a port 2; a port 5 <-> b port 7 (seen from both ends, twice);
  // b port 3 <-> CA 2 port 1 (seen from the switch only).
  t.add_link(0x1, 1, 0xa, 2);
  t.add_link(0xa, 2, 0x1, 1);
  t.add_link(0xa, 5, 0xb, 7);
  t.add_link(0xb, 7, 0xa, 5);
  t.add_link(0xb, 7, 0xa, 5);
  t.add_link(0xb, 3, 0x2, 1);
  EXPECT_EQ(t.cable_count(), 3u);
  EXPECT_EQ(t.link_count(), 5u);
  EXPECT_EQ(t.count(IB_NODE_SWITCH), 2u);
  EXPECT_EQ(t.count(IB_NODE_CA), 2u);
  auto sw = t.switches();
  ASSERT_EQ(sw.size(), 2u);
  EXPECT_EQ(sw[0]->guid, 0xau);
  EXPECT_EQ(sw[1]->guid, 0xbu);
}

TEST(FabricTopology, LaterAnswerForAPortReplacesEarlier) {
  Topology t;
  t.add_node(0xa, IB_NODE_SWITCH, 8, {});
  t.add_link(0xa, 1, 0xb, 1);
  t.add_link(0xa, 1, 0xc, 4);
  ASSERT_EQ(t.link_count(), 1u);
  ASSERT_NE(t.link(0xa, 1), nullptr);
  EXPECT_EQ(t.link(0xa, 1)->remote_guid, 0xcu);
  EXPECT_EQ(t.link(0xa, 1)->remote_port, 4);
  EXPECT_EQ(t.link(0xa, 2), nullptr);
  // A port past the node's NumPorts is recorded all the same; port 0 and a node not added are
  // not.
  t.add_link(0xa, 9, 0xd, 1);
  ASSERT_NE(t.link(0xa, 9), nullptr);
  EXPECT_EQ(t.link(0xa, 9)->remote_guid, 0xdu);
  t.add_link(0xa, 0, 0xd, 2);
  EXPECT_EQ(t.link_count(), 2u);
  EXPECT_THROW(t.add_link(0xb, 1, 0xa, 1), std::logic_error);
}

// Cable ends come in GUID then port order, whatever order they were recorded in (the link
// memory merges them in that order).
TEST(FabricTopology, CableEndsComeSortedByGuidThenPort) {
  Topology t;
  for (std::uint64_t guid : {0xbull, 0x1ull, 0xaull}) t.add_node(guid, IB_NODE_SWITCH, 4, {});
  t.add_link(0xb, 3, 0xa, 1);
  t.add_link(0xa, 2, 0x1, 4);
  t.add_link(0xb, 1, 0x1, 1);
  t.add_link(0x1, 4, 0xa, 2);
  t.add_link(0xa, 1, 0xb, 3);
  std::vector<std::pair<std::uint64_t, int>> ends;
  t.for_each_link(
      [&](std::uint64_t guid, int port, const Link&) { ends.emplace_back(guid, port); });
  EXPECT_EQ(ends, (std::vector<std::pair<std::uint64_t, int>>{
                      {0x1, 4}, {0xa, 1}, {0xa, 2}, {0xb, 1}, {0xb, 3}}));
}

// A fabric: local CA 1 on leaf a port 1; leaves a, b each cabled to spines s, t (ports 10, 11
// of the leaves, 1 and 2 of the spines); CA 2 on leaf b port 1.
Topology small_fat_tree() {
  Topology t;
  t.add_node(0x1, IB_NODE_CA, 1, {});
  t.add_node(0xa, IB_NODE_SWITCH, 12, {1});
  t.add_node(0xb, IB_NODE_SWITCH, 12, {1, 10, 2});
  t.add_node(0x5, IB_NODE_SWITCH, 4, {1, 10});
  t.add_node(0x7, IB_NODE_SWITCH, 4, {1, 11});
  t.add_node(0x2, IB_NODE_CA, 1, {1, 10, 2, 1});
  auto cable = [&](std::uint64_t g, int p, std::uint64_t rg, int rp) {
    t.add_link(g, p, rg, rp);
    t.add_link(rg, rp, g, p);
  };
  cable(0x1, 1, 0xa, 1);
  cable(0xa, 10, 0x5, 1);
  cable(0xa, 11, 0x7, 1);
  cable(0xb, 10, 0x5, 2);
  cable(0xb, 11, 0x7, 2);
  cable(0xb, 1, 0x2, 1);
  for (auto guid : {0xaull, 0xbull, 0x5ull, 0x7ull}) {
    auto* n = t.find(guid);
    n->description = "switch " + std::to_string(guid);
    n->description_read = true;
    n->lid = static_cast<std::uint16_t>(guid);
    n->port0_capability_mask = 0x4000;
  }
  return t;
}

mad::PortInfo port_info(int phys_state) {
  mad::PortInfo pi{};
  pi.phys_state = phys_state;
  pi.state = phys_state == kPhysLinkUp ? 4 : 1;
  return pi;
}

bool always(std::uint64_t) { return true; }

TEST(FabricTopology, AnUnansweredDescriptionOrLidIsTakenFromThePreviousDiscovery) {
  auto previous = small_fat_tree();
  Topology now;
  now.add_node(0xa, IB_NODE_SWITCH, 12, {1});
  now.add_node(0xb, IB_NODE_SWITCH, 12, {1, 10, 2});
  now.find(0xb)->description = "renamed";
  now.find(0xb)->description_read = true;
  now.find(0xb)->lid = 99;
  now.find(0xb)->port0_capability_mask = 0;
  now.fill_unanswered(previous);
  EXPECT_EQ(now.find(0xa)->description, "switch 10");
  EXPECT_TRUE(now.find(0xa)->description_read);
  EXPECT_EQ(now.find(0xa)->lid, 0xa);
  EXPECT_EQ(now.find(0xa)->port0_capability_mask, 0x4000u);
  // What was answered stays, even when it changed.
  EXPECT_EQ(now.find(0xb)->description, "renamed");
  EXPECT_EQ(now.find(0xb)->lid, 99);
}

TEST(FabricTopology, ALossyDiscoveryKeepsWhatItMissed) {
  auto previous = small_fat_tree();
  // Spine 7 and leaf b were not reached (their NodeInfo lost), nor CA 2 behind b; the ports
  // through which they would have been asked were read, up.
  Topology now;
  now.add_node(0x1, IB_NODE_CA, 1, {});
  now.add_node(0xa, IB_NODE_SWITCH, 12, {1});
  now.add_node(0x5, IB_NODE_SWITCH, 4, {1, 10});
  now.add_link(0x1, 1, 0xa, 1);
  now.add_link(0xa, 1, 0x1, 1);
  now.add_link(0xa, 10, 0x5, 1);
  now.add_link(0x5, 1, 0xa, 10);
  now.find(0xa)->port_info[10] = port_info(kPhysLinkUp);  // port 11
  now.find(0x5)->port_info[1] = port_info(kPhysLinkUp);   // port 2
  now.carry_missed(previous, always);
  for (auto guid : {0x1ull, 0xaull, 0xbull, 0x5ull, 0x7ull, 0x2ull}) {
    ASSERT_NE(now.find(guid), nullptr) << guid;
  }
  EXPECT_FALSE(now.find(0xa)->carried);
  EXPECT_TRUE(now.find(0xb)->carried);
  EXPECT_TRUE(now.find(0x7)->carried);
  EXPECT_TRUE(now.find(0x2)->carried);
  // A carried switch keeps its LID and description, but no PortInfo: the sweep asks.
  EXPECT_EQ(now.find(0xb)->lid, 0xb);
  EXPECT_EQ(now.find(0xb)->description, "switch 11");
  EXPECT_EQ(now.find(0xb)->port_info.size(), 12u);
  for (const auto& pi : now.find(0xb)->port_info) EXPECT_FALSE(pi);
  EXPECT_EQ(now.link_count(), previous.link_count());
  EXPECT_EQ(now.cable_count(), 6u);
  ASSERT_NE(now.link(0xa, 10), nullptr);
  ASSERT_NE(now.link(0xa, 11), nullptr);
  ASSERT_NE(now.link(0xb, 10), nullptr);
  EXPECT_FALSE(now.link(0xa, 10)->carried);
  EXPECT_TRUE(now.link(0xa, 11)->carried);
  EXPECT_TRUE(now.link(0xb, 10)->carried);
}

TEST(FabricTopology, ACablePortReadDownIsNotKept) {
  auto previous = small_fat_tree();
  // Leaf b's port 1 reads Polling: CA 2 was unplugged, and a lost query elsewhere.
  Topology now = small_fat_tree();
  now.carry_missed(Topology{}, always);  // nothing to carry from an empty past
  EXPECT_EQ(now.link_count(), previous.link_count());
  Topology lossy;
  for (const auto& [guid, node] : previous.nodes()) {
    if (guid == 0x2) continue;
    lossy.add_node(guid, node.type, node.num_ports, node.route);
  }
  previous.for_each_link([&](std::uint64_t guid, int port, const Link& link) {
    if (guid == 0x2 || link.remote_guid == 0x2) return;
    lossy.add_link(guid, port, link.remote_guid, link.remote_port);
  });
  lossy.find(0xb)->port_info[0] = port_info(2);
  lossy.carry_missed(previous, always);
  EXPECT_EQ(lossy.find(0x2), nullptr);
  EXPECT_EQ(lossy.link(0xb, 1), nullptr);
  EXPECT_EQ(lossy.link(0x2, 1), nullptr);
}

TEST(FabricTopology, ANodeNotSeenRecentlyOrCabledElsewhereIsNotKept) {
  auto previous = small_fat_tree();
  Topology now;
  now.add_node(0x1, IB_NODE_CA, 1, {});
  now.add_node(0xa, IB_NODE_SWITCH, 12, {1});
  now.add_node(0x5, IB_NODE_SWITCH, 4, {1, 10});
  now.add_node(0x9, IB_NODE_SWITCH, 4, {1, 11});
  // Leaf a's port 11 now leads to a new spine 9: spine 7 is not carried through it.
  now.add_link(0xa, 11, 0x9, 1);
  now.add_link(0x9, 1, 0xa, 11);
  now.carry_missed(previous, [](std::uint64_t guid) { return guid != 0xb; });
  EXPECT_EQ(now.find(0xb), nullptr);  // not seen for too long
  EXPECT_EQ(now.find(0x2), nullptr);  // its only cable leads to b
  EXPECT_EQ(now.find(0x7), nullptr);  // a's port 11 is cabled elsewhere, b is gone
  ASSERT_NE(now.link(0xa, 11), nullptr);
  EXPECT_EQ(now.link(0xa, 11)->remote_guid, 0x9u);
  EXPECT_FALSE(now.link(0xa, 11)->carried);
  // Leaf a port 10 <-> spine 5 port 1 was lost in this discovery, both ends found: kept.
  ASSERT_NE(now.link(0xa, 10), nullptr);
  ASSERT_NE(now.link(0x5, 1), nullptr);
  EXPECT_TRUE(now.link(0xa, 10)->carried);
  EXPECT_TRUE(now.link(0x5, 1)->carried);
}

// A node kept from the previous discovery keeps the cables that are kept, not all it had: spine
// 7's cable to leaf a is gone (a's port 11 reads down now), its cable to the missed leaf b stays.
TEST(FabricTopology, ANodeKeptKeepsOnlyTheCablesKept) {
  auto previous = small_fat_tree();
  Topology now;
  now.add_node(0x1, IB_NODE_CA, 1, {});
  now.add_node(0xa, IB_NODE_SWITCH, 12, {1});
  now.add_link(0x1, 1, 0xa, 1);
  now.add_link(0xa, 1, 0x1, 1);
  now.find(0xa)->port_info[10] = port_info(2);  // port 11: Polling
  now.carry_missed(previous, always);
  ASSERT_NE(now.find(0x7), nullptr);
  EXPECT_TRUE(now.find(0x7)->carried);
  EXPECT_EQ(now.link(0x7, 1), nullptr);
  EXPECT_EQ(now.link(0xa, 11), nullptr);
  ASSERT_NE(now.link(0x7, 2), nullptr);
  EXPECT_EQ(now.link(0x7, 2)->remote_guid, 0xbu);
  EXPECT_TRUE(now.link(0x7, 2)->carried);
}

TEST(FabricLabels, GuidsAsZeroXAndSixteenLowercaseHexDigits) {
  EXPECT_EQ(hex_guid(0x0002C90200400001ull), "0x0002c90200400001");
  EXPECT_EQ(hex_guid(0), "0x0000000000000000");
  EXPECT_EQ(hex_guid(0xFEDCBA9876543210ull), "0xfedcba9876543210");
  EXPECT_STREQ(mad::node_type_name(IB_NODE_SWITCH), "switch");
  EXPECT_STREQ(mad::node_type_name(IB_NODE_CA), "CA");
}

// The memory of last values packs an attribute without its zero octets and gives back every
// covered octet as it was, zeros after them up to the attribute's size, whatever the pattern.
TEST(PackedOctets, RoundTripKeepsEveryCoveredOctetAndDropsTheZeros) {
  std::mt19937 random(7);
  for (std::size_t covered : {0u, 1u, 7u, 8u, 9u, 44u, 184u}) {
    for (int zeros_in_8 : {0, 4, 7, 8}) {
      std::vector<std::uint8_t> data(192);
      for (auto& octet : data) {
        bool zero = static_cast<int>(random() % 8) < zeros_in_8;
        octet = zero ? 0 : static_cast<std::uint8_t>(1 + random() % 255);
      }
      std::vector<std::uint8_t> packed{0xee};  // what the buffer held before is left alone
      pack_octets(data.data(), covered, packed);
      std::size_t nonzero = 0;
      for (std::size_t i = 0; i < covered; ++i) nonzero += data[i] != 0;
      ASSERT_EQ(packed.size(), 1 + (covered + 7) / 8 + nonzero) << covered;
      EXPECT_EQ(packed[0], 0xee);
      EXPECT_EQ(packed_size(packed.data() + 1, covered), packed.size() - 1);
      std::vector<std::uint8_t> back{1, 2, 3};
      unpack_octets(packed.data() + 1, covered, data.size(), back);
      ASSERT_EQ(back.size(), data.size());
      for (std::size_t i = 0; i < data.size(); ++i) {
        ASSERT_EQ(back[i], i < covered ? data[i] : 0) << "octet " << i << " of " << covered;
      }
    }
  }
}

}  // namespace
}  // namespace ibfabric::fabric
