#include "collectors/fabric/fabric_model.h"
#include "collectors/mad/attributes.h"
#include "collectors/metrics.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(t.links().size(), 5u);
  EXPECT_EQ(t.count(IB_NODE_SWITCH), 2u);
  EXPECT_EQ(t.count(IB_NODE_CA), 2u);
  auto sw = t.switches();
  ASSERT_EQ(sw.size(), 2u);
  EXPECT_EQ(sw[0]->guid, 0xau);
  EXPECT_EQ(sw[1]->guid, 0xbu);
}

TEST(FabricTopology, LaterAnswerForAPortReplacesEarlier) {
  Topology t;
  t.add_link(0xa, 1, 0xb, 1);
  t.add_link(0xa, 1, 0xc, 4);
  ASSERT_EQ(t.links().size(), 1u);
  EXPECT_EQ(t.links().begin()->second.remote_guid, 0xcu);
  EXPECT_EQ(t.links().begin()->second.remote_port, 4);
}

TEST(FabricLabels, GuidsAsZeroXAndSixteenLowercaseHexDigits) {
  EXPECT_EQ(hex_guid(0x0002C90200400001ull), "0x0002c90200400001");
  EXPECT_EQ(hex_guid(0), "0x0000000000000000");
  EXPECT_EQ(hex_guid(0xFEDCBA9876543210ull), "0xfedcba9876543210");
  EXPECT_STREQ(mad::node_type_name(IB_NODE_SWITCH), "switch");
  EXPECT_STREQ(mad::node_type_name(IB_NODE_CA), "CA");
}

}  // namespace
}  // namespace ibfabric::fabric
