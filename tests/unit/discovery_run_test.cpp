// The fabric collector's discovery (collectors/fabric/discovery_run.*, and what the collector
// does with the topology it finds) on a fat tree simulated at the MAD engine
// (fake_fabric.h): the edge the collector talks to, answering directed-route SMPs the way a
// subnet does. Documented behaviour: docs/collectors.md, "Collector `fabric`", "Discovery" and
// "Sharding". The pure parts (Topology::fill_unanswered, carry_missed, the shard hash) are in
// fabric_model_test.cpp; the restore rules of the state file in state_store_test.cpp.

#include "collectors/fabric/discovery_run.h"
#include "collectors/fabric/fabric_model.h"
#include "fabric_test_support.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <algorithm>
#include <set>

namespace ibfabric::fabric_test {
namespace {

using fabric::FabricConfig;

class FabricDiscovery : public ::testing::Test {
 protected:
  void TearDown() override { settle(io_); }

  // What one DiscoveryRun, driven directly, found, and how many of its queries failed.
  struct Discovered {
    std::shared_ptr<fabric::Topology> topology;
    int failed = -1;
  };
  // One DiscoveryRun over `tree`, run to its end (the state it is given outlives the test's
  // loop, so that a run that never ends leaves nothing dangling).
  Discovered discover(const FatTree& tree, FabricConfig config = {}) {
    kept_ = std::make_unique<fabric::FabricState>(io_, tree.engine(), std::move(config),
                                                  std::make_shared<const NodeNameMap>(), "");
    EXPECT_NE(kept_->mad.engine(), nullptr);
    auto found = std::make_shared<Discovered>();
    auto run = std::make_shared<fabric::DiscoveryRun>(
        *kept_, [found](std::shared_ptr<fabric::Topology> t, int failed) {
          found->topology = std::move(t);
          found->failed = failed;
        });
    run->start();
    run.reset();  // its queries hold it
    EXPECT_TRUE(run_until(io_, [&] { return found->topology != nullptr; }))
        << "the discovery never ended";
    return *found;
  }

  boost::asio::io_context io_;
  std::unique_ptr<fabric::FabricState> kept_;
};

// One DiscoveryRun, driven directly: every switch with its LID, description and the PortInfo of
// every port; every CA; every cable from both ends; the local CA left only through the
// engine's default port (its second port is cabled too, and never asked about).
TEST_F(FabricDiscovery, ARunFindsEverySwitchCaAndCableOfAFatTree) {
  FatTree tree(io_, 2, 4, 2);
  const Guid local = FatTree::host(0, 0);
  tree.fabric->add({local, IB_NODE_CA, 2, "host-1-1 mlx5_0", 1001});
  tree.fabric->cable(FatTree::leaf(3), 5, local, 2);  // a spare port of leaf 4

  const auto run = discover(tree);
  const auto& found = run.topology;
  ASSERT_NE(found, nullptr);

  EXPECT_EQ(run.failed, 0);
  EXPECT_EQ(found->count(IB_NODE_SWITCH), 6u);
  EXPECT_EQ(found->count(IB_NODE_CA), 8u);
  EXPECT_EQ(found->subnet_prefix, test_support::kSubnetPrefix);
  ASSERT_NE(found->find(local), nullptr);
  EXPECT_TRUE(found->find(local)->route.empty());
  for (Guid sw : tree.switches()) {
    SCOPED_TRACE(hex(sw));
    const auto* node = found->find(sw);
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(node->type, IB_NODE_SWITCH);
    EXPECT_EQ(node->num_ports, tree.ports_of(sw));
    EXPECT_EQ(node->lid, tree.lid_of(sw));
    EXPECT_TRUE(node->description_read);
    EXPECT_EQ(node->description.substr(0, 5), sw >= FatTree::kSpine ? "spine" : "leaf-");
    ASSERT_EQ(node->port_info.size(), static_cast<std::size_t>(tree.ports_of(sw)));
    for (int p = 1; p <= tree.ports_of(sw); ++p) {
      ASSERT_TRUE(node->port_info[p - 1]) << "port " << p;
      bool cabled = found->link(sw, p) != nullptr;
      EXPECT_EQ(node->port_info[p - 1]->state, cabled ? 4 : 1) << "port " << p;
    }
  }
  EXPECT_EQ(found->find(FatTree::leaf(0))->route, std::vector<std::uint8_t>{1});
  // Every cable from both ends.
  auto far_end = [&](Guid guid, int port) -> std::pair<Guid, int> {
    const fabric::Link* link = found->link(guid, port);
    if (!link) return {0, 0};
    return {link->remote_guid, link->remote_port};
  };
  for (int l = 0; l < 4; ++l) {
    for (int s = 0; s < 2; ++s) {
      EXPECT_EQ(far_end(FatTree::leaf(l), s + 1), std::pair(FatTree::spine(s), l + 1));
      EXPECT_EQ(far_end(FatTree::spine(s), l + 1), std::pair(FatTree::leaf(l), s + 1));
    }
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(far_end(FatTree::leaf(l), 3 + h), std::pair(FatTree::host(l, h), 1));
      EXPECT_EQ(far_end(FatTree::host(l, h), 1), std::pair(FatTree::leaf(l), 3 + h));
    }
  }
  // The local CA's second cable is seen from the leaf's side only.
  EXPECT_EQ(far_end(FatTree::leaf(3), 5), std::pair(local, 2));
  EXPECT_EQ(found->cable_count(), 17u);
  for (const auto& r : sent(*tree.fabric, FakeFabric::smp(IB_ATTR_PORT_INFO))) {
    EXPECT_FALSE(r.destination == "route 0" && r.port == 2)
        << "the local CA's port 2 asked about: only the default port leads out";
  }
}

// A node reached a second way (a leaf, from the second spine) only records the cable it was
// reached by: it is asked its NodeDescription and PortInfos once, by the route it was first
// reached by.
TEST_F(FabricDiscovery, ANodeReachedASecondWayIsNotExploredAgain) {
  FatTree tree(io_, 2, 4, 2);
  const auto run = discover(tree);
  ASSERT_NE(run.topology, nullptr);
  EXPECT_EQ(run.failed, 0);
  std::size_t reached_again = 0;
  for (Guid sw : tree.switches()) {
    SCOPED_TRACE(hex(sw));
    reached_again += tree.fabric->count_asked(IB_ATTR_NODE_INFO, sw) > 1;
    EXPECT_EQ(tree.fabric->count_asked(IB_ATTR_NODE_DESC, sw), 1u);
    EXPECT_EQ(tree.fabric->count_asked(IB_ATTR_PORT_INFO, sw),
              static_cast<std::size_t>(tree.ports_of(sw)) + 1);  // port 0 too
  }
  EXPECT_GT(reached_again, 0u) << "no node was reached a second way: the case tests nothing";
  EXPECT_EQ(run.topology->cable_count(), 16u);
}

// No NodeInfo goes out through a port whose far end is known: not back through the port a
// node was entered by, and not across a cable the node at the far end already asked through.
// Each cable is crossed by one NodeInfo, and the daemon's own node is asked once.
TEST_F(FabricDiscovery, NoNodeInfoCrossesACableWhoseFarEndIsKnown) {
  FatTree tree(io_, 2, 4, 2);
  const auto run = discover(tree);
  ASSERT_NE(run.topology, nullptr);
  EXPECT_EQ(run.failed, 0);
  EXPECT_EQ(tree.fabric->count_asked(IB_ATTR_NODE_INFO, FatTree::host(0, 0)), 1u);
  EXPECT_EQ(tree.fabric->count_asked(IB_ATTR_NODE_INFO), run.topology->cable_count() + 1);
}

// A CA other than the daemon's own is a leaf of the search, even with a second cable into the
// fabric: it is asked no PortInfo (and so nothing is asked through it, which needs a port read
// as up).
TEST_F(FabricDiscovery, ACaOtherThanTheLocalOneIsNotExplored) {
  FatTree tree(io_, 2, 4, 2);
  const Guid dual = FatTree::host(1, 0);
  tree.fabric->add({dual, IB_NODE_CA, 2, "host-2-1 mlx5_0", 1101});
  tree.fabric->cable(FatTree::leaf(2), 5, dual, 2);  // a spare port of leaf 3
  const auto run = discover(tree);
  ASSERT_NE(run.topology, nullptr);
  EXPECT_EQ(run.failed, 0);
  EXPECT_EQ(run.topology->count(IB_NODE_CA), 8u);
  for (int l = 0; l < 4; ++l) {
    for (int h = 0; h < 2; ++h) {
      if (l == 0 && h == 0) continue;  // the daemon's node
      EXPECT_EQ(tree.fabric->count_asked(IB_ATTR_PORT_INFO, FatTree::host(l, h)), 0u)
          << FatTree::host_name(l, h);
    }
  }
  // Its second cable is seen from the leaf's side.
  const fabric::Link* link = run.topology->link(FatTree::leaf(2), 5);
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->remote_guid, dual);
  EXPECT_EQ(link->remote_port, 2);
}

// A switch's LID and CapabilityMask are its port 0's (the only port that carries them); a
// switch whose port 0 PortInfo is lost has neither, and the loss is counted.
TEST_F(FabricDiscovery, ASwitchsLidAndCapabilityMaskComeFromItsPortZero) {
  FatTree tree(io_, 2, 4, 2);
  for (Guid sw : tree.switches()) tree.fabric->capability_mask(sw, mad::kPortCapExtendedSpeeds);
  tree.fabric->lose(FatTree::leaf(2), 100, 0, FakeFabric::smp(IB_ATTR_PORT_INFO));
  const auto run = discover(tree);
  ASSERT_NE(run.topology, nullptr);
  EXPECT_EQ(run.failed, 1);
  for (Guid sw : tree.switches()) {
    SCOPED_TRACE(hex(sw));
    const auto* node = run.topology->find(sw);
    ASSERT_NE(node, nullptr);
    if (sw == FatTree::leaf(2)) {
      EXPECT_EQ(node->lid, 0);
      EXPECT_FALSE(node->port0_capability_mask);
    } else {
      EXPECT_EQ(node->lid, tree.lid_of(sw));
      EXPECT_EQ(node->port0_capability_mask, mad::kPortCapExtendedSpeeds);
    }
  }
}

// DiscoveryRun's bound on its PortInfo queries out at once (kPortInfosOut, private).
constexpr int kPortInfosOut = 256;

// A fat tree one level of which has many more switch ports than kPortInfosOut: 30 leaves of 28
// ports (24 hosts each) behind 2 spines.
FatTree wide_tree(boost::asio::io_context& io) { return FatTree(io, 2, 30, 24); }

// The PortInfo queries of a level wait for room: fewer than kPortInfosOut of the discovery's
// queries are out when one is handed to the engine. Those not paced (a NodeInfo through a port
// just read, a switch's NodeDescription and port 0 PortInfo) add at most one per switch.
TEST_F(FabricDiscovery, PortInfoQueriesWaitForRoom) {
  auto tree = wide_tree(io_);
  const auto run = discover(tree);
  ASSERT_NE(run.topology, nullptr);
  EXPECT_EQ(run.failed, 0);
  EXPECT_EQ(run.topology->count(IB_NODE_SWITCH), 32u);
  EXPECT_EQ(run.topology->count(IB_NODE_CA), 30u * 24);
  for (Guid sw : tree.switches()) {
    const auto& infos = run.topology->find(sw)->port_info;
    EXPECT_EQ(std::count_if(infos.begin(), infos.end(), [](const auto& i) { return i; }),
              tree.ports_of(sw))
        << hex(sw);
  }
  ASSERT_GT(tree.switch_ports(), 2 * kPortInfosOut);
  EXPECT_LE(tree.fabric->peak_total_in_flight(), kPortInfosOut + 32);
}

// A query that fails gives its room on to the PortInfo queries waiting: when every leaf drops
// its PortInfo SMPs, each of their ports is still asked once, and every loss counted.
TEST_F(FabricDiscovery, ALostQueryGivesItsRoomToThoseWaiting) {
  auto tree = wide_tree(io_);
  for (int l = 1; l < tree.leaves; ++l) {
    tree.fabric->lose(FatTree::leaf(l), 100, std::nullopt, FakeFabric::smp(IB_ATTR_PORT_INFO));
  }
  const auto run = discover(tree);
  ASSERT_NE(run.topology, nullptr);
  const int lost = (tree.leaves - 1) * (tree.leaf_ports + 1);  // port 0 too
  ASSERT_GT(lost, kPortInfosOut);
  EXPECT_EQ(run.failed, lost);
  EXPECT_EQ(run.topology->count(IB_NODE_SWITCH), 32u);
  // Every switch's ports and port 0, and the daemon's own port.
  EXPECT_EQ(sent(*tree.fabric, FakeFabric::smp(IB_ATTR_PORT_INFO)).size(),
            static_cast<std::size_t>(tree.switch_ports() + 32 + 1));
}

// What the collector exports of a discovery: every node with its type, description and name,
// every cabled switch port with both ends named (`cable_end` a at the switch end of a host
// cable and at the lower GUID of a switch-to-switch one), the counts of the whole fabric.
TEST_F(FabricDiscovery, NodesAndCablesAreReportedNamedByBothEnds) {
  FatTree tree(io_, 2, 4, 2);
  auto collector = make_collector(io_, tree);
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  const auto& m = c.metrics;

  EXPECT_EQ(m.value("ibfabric_fabric_nodes", {{"node_type", "switch"}}), 6);
  EXPECT_EQ(m.value("ibfabric_fabric_nodes", {{"node_type", "CA"}}), 8);
  EXPECT_EQ(m.value("ibfabric_fabric_links"), 16);
  EXPECT_EQ(m.value("ibfabric_fabric_discoveries_total"), 1);
  EXPECT_EQ(m.all("ibfabric_fabric_node_info").size(), 14u);
  for (Guid sw : tree.switches()) {
    auto info = m.all("ibfabric_fabric_node_info", {{"node_guid", hex(sw)}});
    ASSERT_EQ(info.size(), 1u) << hex(sw);
    EXPECT_EQ(info[0].labels["node_type"], "switch");
    EXPECT_EQ(info[0].labels["node_name"], info[0].labels["node_description"]);
    EXPECT_EQ(m.value("ibfabric_fabric_switch_lid", {{"node_guid", hex(sw)}}), tree.lid_of(sw));
  }
  auto host = m.all("ibfabric_fabric_node_info", {{"node_guid", hex(FatTree::host(2, 1))}});
  ASSERT_EQ(host.size(), 1u);
  EXPECT_EQ(host[0].labels["node_type"], "CA");
  EXPECT_EQ(host[0].labels["node_description"], "host-3-2 mlx5_0");

  // 8 switch-to-switch cables from both ends, 8 host cables from the switch end.
  EXPECT_EQ(m.all("ibfabric_fabric_link_info").size(), 24u);
  EXPECT_EQ(m.all("ibfabric_fabric_link_info", {{"cable_end", "a"}}).size(), 16u);
  auto up =
      m.all("ibfabric_fabric_link_info", {{"node_guid", hex(FatTree::leaf(2))}, {"port", "2"}});
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].labels["cable_end"], "a");  // the leaf's GUID is the lower
  EXPECT_EQ(up[0].labels["node_name"], "leaf-3");
  EXPECT_EQ(up[0].labels["remote_node_guid"], hex(FatTree::spine(1)));
  EXPECT_EQ(up[0].labels["remote_port"], "3");
  EXPECT_EQ(up[0].labels["remote_node_type"], "switch");
  EXPECT_EQ(up[0].labels["remote_node_name"], "spine-2");
  auto down =
      m.all("ibfabric_fabric_link_info", {{"node_guid", hex(FatTree::spine(1))}, {"port", "3"}});
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].labels["cable_end"], "b");
  EXPECT_EQ(down[0].labels["node_name"], "spine-2");
  EXPECT_EQ(down[0].labels["remote_node_name"], "leaf-3");
  auto to_host =
      m.all("ibfabric_fabric_link_info", {{"node_guid", hex(FatTree::leaf(2))}, {"port", "4"}});
  ASSERT_EQ(to_host.size(), 1u);
  EXPECT_EQ(to_host[0].labels["cable_end"], "a");
  EXPECT_EQ(to_host[0].labels["remote_node_type"], "CA");
  EXPECT_EQ(to_host[0].labels["remote_node_name"], "host-3-2 mlx5_0");
  EXPECT_EQ(to_host[0].labels["remote_port"], "1");
  EXPECT_TRUE(
      m.all("ibfabric_fabric_link_info", {{"node_guid", hex(FatTree::leaf(2))}, {"port", "5"}})
          .empty())
      << "an empty port has no link_info";
}

// A discovery that loses queries forgets nothing it should not: a spine whose NodeInfo is lost
// stays in the topology (and is swept), a leaf whose NodeDescription is lost keeps its
// description; both losses are counted.
TEST_F(FabricDiscovery, ALossyDiscoveryKeepsTheSwitchesItMissed) {
  FatTree tree(io_, 2, 4, 2);
  FabricConfig config;
  config.rediscover_every = 1;
  auto collector = make_collector(io_, tree, config);
  ASSERT_TRUE(collect(io_, *collector).result.success);

  tree.fabric->lose(FatTree::spine(1), 100, std::nullopt, FakeFabric::smp(IB_ATTR_NODE_INFO));
  tree.fabric->lose(FatTree::leaf(1), 100, std::nullopt, FakeFabric::smp(IB_ATTR_NODE_DESC));
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  const auto& m = c.metrics;
  EXPECT_EQ(m.value("ibfabric_fabric_discoveries_total"), 2);
  EXPECT_GT(*m.value("ibfabric_fabric_query_errors_total",
                     {{"phase", "discovery"}, {"attribute", "node_info"}}),
            0);
  EXPECT_EQ(m.value("ibfabric_fabric_query_errors_total",
                    {{"phase", "discovery"}, {"attribute", "node_description"}}),
            1);
  EXPECT_EQ(m.value("ibfabric_fabric_nodes", {{"node_type", "switch"}}), 6);
  EXPECT_EQ(m.value("ibfabric_fabric_links"), 16);
  auto spine = m.all("ibfabric_fabric_node_info", {{"node_guid", hex(FatTree::spine(1))}});
  ASSERT_EQ(spine.size(), 1u) << "the spine whose NodeInfo was lost is gone";
  EXPECT_EQ(spine[0].labels["node_name"], "spine-2");
  auto leaf = m.all("ibfabric_fabric_node_info", {{"node_guid", hex(FatTree::leaf(1))}});
  ASSERT_EQ(leaf.size(), 1u);
  EXPECT_EQ(leaf[0].labels["node_description"], "leaf-2");
  // The kept spine is swept by its LID as usual: its ports are read, not stale.
  EXPECT_EQ(m.value("ibfabric_fabric_switches_swept"), 6);
  for (int p = 1; p <= 4; ++p) {
    EXPECT_EQ(m.port("ibfabric_fabric_port_state", FatTree::spine(1), p), 4) << p;
  }
  EXPECT_EQ(m.value("ibfabric_fabric_ports_stale"), 0);
  EXPECT_EQ(m.value("ibfabric_fabric_switch_lid", {{"node_guid", hex(FatTree::spine(1))}}), 2);
}

// keep_unread: 0 turns the keeping off, and a switch not seen for keep_unread (here shorter than
// a collection) is not kept either: what a lossy discovery missed is then gone.
TEST_F(FabricDiscovery, ALossyDiscoveryKeepsNothingNotSeenForKeepUnread) {
  for (auto keep : {std::chrono::nanoseconds{0}, std::chrono::nanoseconds{1}}) {
    SCOPED_TRACE("keep_unread " + std::to_string(keep.count()) + "ns");
    FatTree tree(io_, 2, 4, 2);
    FabricConfig config;
    config.rediscover_every = 1;
    config.keep_unread = keep;
    auto collector = make_collector(io_, tree, config);
    ASSERT_TRUE(collect(io_, *collector).result.success);
    tree.fabric->lose(FatTree::spine(1), 100, std::nullopt, FakeFabric::smp(IB_ATTR_NODE_INFO));
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_nodes", {{"node_type", "switch"}}), 5);
    EXPECT_TRUE(c.metrics.all("ibfabric_fabric_node_info", {{"node_guid", hex(FatTree::spine(1))}})
                    .empty());
    EXPECT_FALSE(c.metrics.port("ibfabric_fabric_port_state", FatTree::spine(1), 1));
  }
}

// A discovery in which every query answered is the truth: a spine whose cables were all
// unplugged is dropped at once.
TEST_F(FabricDiscovery, ASwitchALosslessDiscoveryDoesNotFindIsDropped) {
  FatTree tree(io_, 2, 4, 2);
  FabricConfig config;
  config.rediscover_every = 1;
  auto collector = make_collector(io_, tree, config);
  ASSERT_TRUE(collect(io_, *collector).result.success);
  for (int l = 0; l < 4; ++l) tree.fabric->unplug(FatTree::leaf(l), 2);
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_nodes", {{"node_type", "switch"}}), 5);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_links"), 12);
  EXPECT_TRUE(
      c.metrics.all("ibfabric_fabric_node_info", {{"node_guid", hex(FatTree::spine(1))}}).empty());
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_swept"), 4 * 6 + 4);
}

// Sharding: two daemons (shards: 2) discover the same fabric; each reports the node_info of the
// nodes whose GUID hashes to it and the switches (their ports, cables, LIDs) of its shard, and
// asks the PMA of no other switch; together they cover every node and port once.
TEST_F(FabricDiscovery, TwoShardsReportDisjointHalvesOfTheFabric) {
  FatTree tree(io_, 2, 4, 2);
  std::vector<Guid> all_nodes = tree.switches();
  for (int l = 0; l < 4; ++l) {
    for (int h = 0; h < 2; ++h) all_nodes.push_back(FatTree::host(l, h));
  }
  std::map<Guid, int> reported;  // node -> times its node_info was reported
  double ports_swept = 0;
  for (int shard = 0; shard < 2; ++shard) {
    SCOPED_TRACE("shard " + std::to_string(shard));
    FabricConfig config;
    config.shards = 2;
    config.shard = shard;
    auto collector = make_collector(io_, tree, config);
    tree.fabric->clear_requests();
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    const auto& m = c.metrics;
    EXPECT_EQ(
        m.value("ibfabric_fabric_shard_info", {{"shard", std::to_string(shard)}, {"shards", "2"}}),
        1);
    EXPECT_EQ(m.value("ibfabric_fabric_nodes", {{"node_type", "switch"}}), 6);  // whole fabric
    int mine = 0;
    for (Guid guid : all_nodes) {
      bool in = fabric::in_shard(guid, shard, 2);
      auto info = m.all("ibfabric_fabric_node_info", {{"node_guid", hex(guid)}});
      EXPECT_EQ(info.size(), in ? 1u : 0u) << hex(guid);
      reported[guid] += static_cast<int>(info.size());
      if (guid >= FatTree::kHost) continue;
      mine += in;
      auto lid = m.value("ibfabric_fabric_switch_lid", {{"node_guid", hex(guid)}});
      EXPECT_EQ(lid.has_value(), in) << hex(guid);
      for (int p = 1; p <= tree.ports_of(guid); ++p) {
        EXPECT_EQ(m.port("ibfabric_fabric_port_state", guid, p).has_value(), in)
            << hex(guid) << " port " << p;
      }
      EXPECT_EQ(m.all("ibfabric_fabric_link_info", {{"node_guid", hex(guid)}}).empty(), !in);
      auto pma = std::count_if(tree.fabric->requests().begin(), tree.fabric->requests().end(),
                               [&](const auto& r) {
                                 return r.mgmt_class == mad::kPerfMgt &&
                                        r.destination == "lid " + std::to_string(tree.lid_of(guid));
                               });
      EXPECT_EQ(pma > 0, in) << hex(guid) << ": PMA queries " << pma;
    }
    EXPECT_GT(mine, 0) << "this test needs switches in both shards";
    EXPECT_EQ(m.value("ibfabric_fabric_switches_swept"), mine);
    ports_swept += *m.value("ibfabric_fabric_ports_swept");
  }
  for (Guid guid : all_nodes) EXPECT_EQ(reported[guid], 1) << hex(guid);
  EXPECT_EQ(ports_swept, tree.switch_ports());
}

// max_hops bounds the directed routes: from the daemon's host, 1 hop reaches its leaf, 2 the
// spines and the leaf's other host, 3 the other leaves, 4 every host. No longer route is sent.
TEST_F(FabricDiscovery, MaxHopsBoundsTheSearch) {
  FatTree tree(io_, 2, 4, 2);
  struct Expect {
    int max_hops;
    double switches, cas;
  };
  for (auto e : {Expect{1, 1, 1}, Expect{2, 3, 2}, Expect{3, 6, 2}, Expect{4, 6, 8}}) {
    SCOPED_TRACE("max_hops " + std::to_string(e.max_hops));
    FabricConfig config;
    config.max_hops = e.max_hops;
    auto collector = make_collector(io_, tree, config);
    tree.fabric->clear_requests();
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_nodes", {{"node_type", "switch"}}), e.switches);
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_nodes", {{"node_type", "CA"}}), e.cas);
    for (const auto& r : tree.fabric->requests()) {
      if (!r.destination.starts_with("route")) continue;
      auto hops = std::count(r.destination.begin(), r.destination.end(), ',');
      EXPECT_LE(hops, e.max_hops) << r.destination;
    }
  }
}

// Discovery runs on the first collection, then every `rediscover_every` sweeps.
TEST_F(FabricDiscovery, RunsEveryRediscoverEverySweeps) {
  FatTree tree(io_, 1, 2, 1);
  FabricConfig config;
  config.rediscover_every = 2;
  auto collector = make_collector(io_, tree, config);
  std::vector<double> discoveries;
  for (int i = 0; i < 5; ++i) {
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    discoveries.push_back(*c.metrics.value("ibfabric_fabric_discoveries_total"));
  }
  EXPECT_EQ(discoveries, (std::vector<double>{1, 1, 2, 2, 3}));
}

// A discovery that reaches no node: the first fails the collection; a later one keeps the
// topology it had and lets the sweep decide. A discovery that finds no switch (the local cable
// is down) fails the collection.
TEST_F(FabricDiscovery, ADiscoveryThatReachesNothingKeepsTheLastTopology) {
  {
    FatTree tree(io_, 1, 2, 1);
    tree.fabric->lose(FatTree::host(0, 0), 100, std::nullopt, FakeFabric::smp(IB_ATTR_NODE_INFO));
    auto collector = make_collector(io_, tree);
    auto c = collect(io_, *collector);
    EXPECT_FALSE(c.result.success);
    EXPECT_EQ(c.result.error, "discovery failed: the local node did not answer NodeInfo");
  }
  {
    FatTree tree(io_, 1, 2, 1);
    tree.fabric->unplug(FatTree::host(0, 0), 1);
    auto collector = make_collector(io_, tree);
    auto c = collect(io_, *collector);
    EXPECT_FALSE(c.result.success);
    EXPECT_EQ(c.result.error, "discovery found no switch (is the local port's link down?)");
  }
  FatTree tree(io_, 1, 2, 1);
  FabricConfig config;
  config.rediscover_every = 1;
  auto collector = make_collector(io_, tree, config);
  ASSERT_TRUE(collect(io_, *collector).result.success);
  tree.fabric->lose(FatTree::host(0, 0), 100, std::nullopt, FakeFabric::smp(IB_ATTR_NODE_INFO));
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_discoveries_total"), 2);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_nodes", {{"node_type", "switch"}}), 3);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_switches_swept"), 3);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_swept"), 1 * 2 + 2 * 4);
  EXPECT_EQ(c.metrics.all("ibfabric_fabric_node_info").size(), 5u);
}

}  // namespace
}  // namespace ibfabric::fabric_test
