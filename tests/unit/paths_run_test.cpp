// The `paths` collector's run (collectors/paths/paths_run.*) driven through the fake subnet of
// fake_fabric.h: a small fat tree whose forwarding tables, master SM and faults each test sets
// as an SM (or a fault) would leave them. The collector sends its real SMPs and decodes real
// answers; what is checked is what docs/collectors.md, "Collector `paths`", documents: the
// traced legs, every reason a leg is untraced, and the rules that trace a path again.
// The simulator tests (tests/integration/test_paths.py) stay the end-to-end truth.
//
// No clock is injected (the code has none at its edge): the time rules are driven by their
// keys, 0 (every run) or an hour (not within the test).

#include "collector_test_support.h"
#include "collectors/paths/paths_collector.h"
#include "collectors/peer_directory.h"
#include "collectors/registry.h"
#include "daemon/app.h"
#include "fake_fabric.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric::paths {
namespace {

using namespace std::chrono_literals;
using test_support::FakeFabric;
using test_support::samples;
using test_support::value;

constexpr std::uint64_t kLeaf1 = 0x0002c90200001001ull;
constexpr std::uint64_t kLeaf2 = 0x0002c90200001002ull;
constexpr std::uint64_t kSpine1 = 0x0002c90200002001ull;
constexpr std::uint64_t kSpine2 = 0x0002c90200002002ull;
constexpr std::uint64_t kHostA = 0x0002c90300000a00ull;  // the daemon's node
constexpr std::uint64_t kHostB = 0x0002c90300000b00ull;
constexpr std::uint64_t kHostC = 0x0002c90300000c00ull;
constexpr std::uint64_t kHostD = 0x0002c90300000d00ull;
constexpr std::uint16_t kLidA = 10, kLidB = 11, kLidC = 12, kLidD = 13;
constexpr std::uint64_t kMasterGuid = kHostD + 1;  // the SM runs on host-d

// Two leaves and two spines. Leaf ports 1-2: hosts (a, b on leaf-1; c, d on leaf-2); leaf
// ports 3 and 4: spine-1 and spine-2, whose ports 1 and 2 go to leaf-1 and leaf-2. Routes as
// an SM would program them: up through spine-1, except to host-d (spine-2).
struct FatTree {
  explicit FatTree(boost::asio::io_context& io) : fabric(std::make_shared<FakeFabric>(io, kHostA)) {
    fabric->add({kLeaf1, IB_NODE_SWITCH, 4, "leaf-1", 1});
    fabric->add({kLeaf2, IB_NODE_SWITCH, 4, "leaf-2", 2});
    fabric->add({kSpine1, IB_NODE_SWITCH, 2, "spine-1", 3});
    fabric->add({kSpine2, IB_NODE_SWITCH, 2, "spine-2", 4});
    fabric->add({kHostA, IB_NODE_CA, 1, "host-a mlx5_0", kLidA});
    fabric->add({kHostB, IB_NODE_CA, 1, "host-b mlx5_0", kLidB});
    fabric->add({kHostC, IB_NODE_CA, 1, "host-c mlx5_0", kLidC});
    fabric->add({kHostD, IB_NODE_CA, 1, "host-d mlx5_0", kLidD});
    fabric->cable(kLeaf1, 1, kHostA, 1);
    fabric->cable(kLeaf1, 2, kHostB, 1);
    fabric->cable(kLeaf2, 1, kHostC, 1);
    fabric->cable(kLeaf2, 2, kHostD, 1);
    fabric->cable(kLeaf1, 3, kSpine1, 1);
    fabric->cable(kLeaf1, 4, kSpine2, 1);
    fabric->cable(kLeaf2, 3, kSpine1, 2);
    fabric->cable(kLeaf2, 4, kSpine2, 2);
    route_host(kLidA, 1, 3);
    route_host(kLidB, 2, 3);
    route_host(kLidC, 3, 1);
    route_host(kLidD, 4, 2);
    fabric->run_sm(kHostD, {kMasterGuid, 100, 10, 3, true});
    fabric->master_sm_lid(kLidD);
  }
  // A host LID: out of `leaf1_port` at leaf-1 and `leaf2_port` at leaf-2; the spines send it
  // down to its leaf.
  void route_host(std::uint16_t lid, int leaf1_port, int leaf2_port) {
    fabric->forward(kLeaf1, lid, leaf1_port);
    fabric->forward(kLeaf2, lid, leaf2_port);
    int down = leaf1_port <= 2 ? 1 : 2;
    fabric->forward(kSpine1, lid, down);
    fabric->forward(kSpine2, lid, down);
  }
  std::shared_ptr<FakeFabric> fabric;
};

class PathsRunTest : public ::testing::Test {
 protected:
  PathsRunTest() {
    publish({{"host-b", "mad", kLidB}, {"host-c", "mad", kLidC}, {"udp-only", "udp", 0}});
  }

  void publish(std::vector<probe::ProbedPeer> peers) { context_.probe_peers->publish(peers); }

  std::unique_ptr<PathsCollector> collector(PathsConfig config = {}) {
    return std::make_unique<PathsCollector>(context_, config);
  }

  CollectResult collect(Collector& c) { return test_support::collect_on(io_, c); }
  // The same, expected to succeed; its metrics, and the LFT blocks it read.
  MetricFamilies run(Collector& c) {
    auto before = tree_.fabric->count_asked(IB_ATTR_LINEARFORWTBL);
    auto r = collect(c);
    EXPECT_TRUE(r.success) << r.error;
    lft_reads_ = tree_.fabric->count_asked(IB_ATTR_LINEARFORWTBL) - before;
    return std::move(r.metrics);
  }

  boost::asio::io_context io_;
  FatTree tree_{io_};
  // As the daemon builds it: with the channel from the probe collector.
  CollectorContext context_ = daemon_collector_context(io_, [f = tree_.fabric] { return f; });
  std::size_t lft_reads_ = 0;
};

std::string guid(std::uint64_t g) { return hex_guid(g); }

// The cables of a leg in hop order, each "a_guid:port-b_guid:port direction".
std::vector<std::string> hops(const MetricFamilies& m, const std::string& peer,
                              const std::string& leg) {
  std::map<int, std::string> by_hop;
  for (const auto* s : samples(m, "ibfabric_path_hop_info", {{"peer", peer}, {"leg", leg}})) {
    auto l = test_support::label_map(*s);
    by_hop[std::stoi(l["hop"])] = l["node_guid"] + ":" + l["port"] + "-" + l["remote_node_guid"] +
                                  ":" + l["remote_port"] + " " + l["direction"];
  }
  std::vector<std::string> out;
  for (const auto& [hop, cable] : by_hop) out.push_back(cable);
  return out;
}

std::string cable(std::uint64_t a, int a_port, std::uint64_t b, int b_port, const char* dir) {
  return guid(a) + ":" + std::to_string(a_port) + "-" + guid(b) + ":" + std::to_string(b_port) +
         " " + dir;
}

double peers_in(const MetricFamilies& m, const std::string& state) {
  return value(m, "ibfabric_path_peers", {{"state", state}}).value_or(-1);
}

double traces(const MetricFamilies& m, const std::string& cause) {
  return value(m, "ibfabric_path_traces_total", {{"cause", cause}}).value_or(0);
}

std::optional<double> untraced(const MetricFamilies& m, const std::string& peer,
                               const std::string& leg, const std::string& reason) {
  return value(m, "ibfabric_path_untraced", {{"peer", peer}, {"leg", leg}, {"reason", reason}});
}

// host-c's legs through spine-1, as the tables of FatTree route them.
const std::vector<std::string> kToC = {
    cable(kLeaf1, 1, kHostA, 1, "b_to_a"), cable(kLeaf1, 3, kSpine1, 1, "a_to_b"),
    cable(kLeaf2, 3, kSpine1, 2, "b_to_a"), cable(kLeaf2, 1, kHostC, 1, "a_to_b")};
const std::vector<std::string> kFromC = {
    cable(kLeaf2, 1, kHostC, 1, "b_to_a"), cable(kLeaf2, 3, kSpine1, 2, "a_to_b"),
    cable(kLeaf1, 3, kSpine1, 1, "b_to_a"), cable(kLeaf1, 1, kHostA, 1, "a_to_b")};

TEST_F(PathsRunTest, TracesBothLegsOfEveryPlacedPeer) {
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(hops(m, "host-c", "to_peer"), kToC);
  EXPECT_EQ(hops(m, "host-c", "from_peer"), kFromC);
  EXPECT_EQ(hops(m, "host-b", "to_peer"), (std::vector<std::string>{
                                              cable(kLeaf1, 1, kHostA, 1, "b_to_a"),
                                              cable(kLeaf1, 2, kHostB, 1, "a_to_b"),
                                          }));
  EXPECT_EQ(hops(m, "host-b", "from_peer"), (std::vector<std::string>{
                                                cable(kLeaf1, 2, kHostB, 1, "b_to_a"),
                                                cable(kLeaf1, 1, kHostA, 1, "a_to_b"),
                                            }));
  EXPECT_EQ(value(m, "ibfabric_path_hops", {{"peer", "host-c"}, {"leg", "to_peer"}}), 4);
  EXPECT_EQ(value(m, "ibfabric_path_hops", {{"peer", "host-b"}, {"leg", "from_peer"}}), 2);
  // Both ends named by their NodeDescription (no node-name-map here).
  auto first = test_support::info(m, "ibfabric_path_hop_info",
                                  {{"peer", "host-c"}, {"leg", "to_peer"}, {"hop", "2"}});
  EXPECT_EQ(first["node_name"], "leaf-1");
  EXPECT_EQ(first["remote_node_name"], "spine-1");
  EXPECT_EQ(first["transport"], "mad");
  auto peer = test_support::info(m, "ibfabric_path_peer_info", {{"peer", "host-c"}});
  EXPECT_EQ(peer["peer_node_guid"], guid(kHostC));
  EXPECT_EQ(peer["peer_node_name"], "host-c mlx5_0");
  EXPECT_EQ(peer["transport"], "mad");
  EXPECT_EQ(peers_in(m, "traced"), 2);
  EXPECT_EQ(peers_in(m, "untraced"), 0);
  EXPECT_EQ(peers_in(m, "pending"), 0);
  EXPECT_EQ(peers_in(m, "unplaced"), 1);  // the UDP peer that names no LID
  EXPECT_EQ(traces(m, "new"), 2);
  EXPECT_TRUE(samples(m, "ibfabric_path_untraced").empty());
  // leaf-1, leaf-2 and spine-1 hold block 0 of every LID here.
  EXPECT_EQ(value(m, "ibfabric_path_cached_tables", {}), 3);
}

// A forwarding-table block that two peers' traces need is read once, and a node once.
// The channel from probe to paths is the daemon's: built from the registry with the daemon's
// context, the paths collector traces the peers the probe collector probes; built with a
// context the daemon did not wire, it hears of none.
TEST_F(PathsRunTest, TracesWhatTheProbeCollectorProbesThroughTheDaemonsChannel) {
  auto build = [](CollectorContext& context, const char* name, const char* yaml) {
    ConfigSection section(YAML::Load(yaml), "test.yaml", std::string("collectors.") + name);
    return find_collector_spec(name)->create(context, section);
  };
  const char* probe_yaml = "targets: [{lid: 12}]\nudp_listen: \"\"\nmad_responder: false\n";
  CollectorContext unwired{io_, "", [f = tree_.fabric] { return f; }};
  for (CollectorContext* context : {&unwired, &context_}) {
    auto probe = build(*context, "probe", probe_yaml);
    auto paths = build(*context, "paths", "");
    // One probe collection publishes its peers (its port listing fails here: no HCA). Its
    // timers keep the loop busy, so it runs until that collection ends, and the prober stops
    // before the paths run.
    bool collected = false;
    probe->collect([&](CollectResult) { collected = true; });
    io_.restart();
    for (int i = 0; i < 100 && !collected; ++i) io_.run_one_for(100ms);
    ASSERT_TRUE(collected);
    probe.reset();
    io_.restart();
    io_.poll();
    auto m = run(*paths);
    if (context == &unwired) {
      EXPECT_TRUE(samples(m, "ibfabric_path_hop_info").empty());
    } else {
      EXPECT_EQ(hops(m, "lid 12", "to_peer"), kToC);  // lid 12 is host-c
    }
  }
}

TEST_F(PathsRunTest, ABlockSharedByTwoPeersIsAskedOnce) {
  publish({{"host-c", "mad", kLidC}, {"host-d", "mad", kLidD}});
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(peers_in(m, "traced"), 2);
  EXPECT_EQ(tree_.fabric->count_asked(IB_ATTR_LINEARFORWTBL, kLeaf1), 1u);
  EXPECT_EQ(tree_.fabric->count_asked(IB_ATTR_LINEARFORWTBL, kLeaf2), 1u);
  EXPECT_EQ(tree_.fabric->count_asked(IB_ATTR_LINEARFORWTBL, kSpine1), 1u);
  EXPECT_EQ(tree_.fabric->count_asked(IB_ATTR_LINEARFORWTBL, kSpine2), 1u);
  EXPECT_EQ(tree_.fabric->count_asked(IB_ATTR_NODE_DESC, kLeaf2), 1u);
  EXPECT_EQ(value(m, "ibfabric_path_cached_tables", {}), 4);
  // A run with nothing stale asks no table and no node again.
  auto asked = tree_.fabric->asked.size();
  m = run(*c);
  EXPECT_EQ(lft_reads_, 0u);
  EXPECT_EQ(tree_.fabric->asked.size() - asked, 3u);  // local NodeInfo, PortInfo; SMInfo
  EXPECT_EQ(traces(m, "new"), 2);
}

// --- Every reason a leg is untraced ----------------------------------------------------------

TEST_F(PathsRunTest, ALidNoTableRoutesIsNoRoute) {
  publish({{"host-b", "mad", kLidB}, {"nobody", "mad", 14}});
  test_support::LogCapture log;
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(untraced(m, "nobody", "to_peer", "no_route"), 1);
  EXPECT_EQ(untraced(m, "nobody", "from_peer", "no_route"), 1);
  EXPECT_TRUE(hops(m, "nobody", "to_peer").empty());
  EXPECT_EQ(peers_in(m, "untraced"), 1);
  EXPECT_EQ(peers_in(m, "traced"), 1);
  auto lines = log.take();
  EXPECT_EQ(test_support::count_containing(
                lines,
                "paths: cannot trace peer=\"nobody\" transport=mad leg=to_peer "
                "reason=no_route detail=\"switch 0x0002c90200001001 has no port for LID "
                "14\""),
            1u);
  // Logged when the reason starts, not at every run.
  m = run(*c);
  EXPECT_EQ(untraced(m, "nobody", "to_peer", "no_route"), 1);
  EXPECT_EQ(test_support::count_containing(log.take(), "cannot trace"), 0u);
}

TEST_F(PathsRunTest, ASwitchThatDoesNotAnswerIsNoAnswer) {
  tree_.fabric->silence(kSpine1);
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(untraced(m, "host-c", "to_peer", "no_answer"), 1);
  EXPECT_EQ(untraced(m, "host-c", "from_peer", "no_answer"), 1);
  EXPECT_EQ(peers_in(m, "traced"), 1);  // host-b does not cross spine-1
  EXPECT_EQ(value(m, "ibfabric_path_query_errors_total", {{"attribute", "node_info"}}), 1);
}

TEST_F(PathsRunTest, ALegLongerThanMaxHopsIsHopLimit) {
  PathsConfig config;
  config.max_hops = 3;
  auto c = collector(config);
  auto m = run(*c);
  EXPECT_EQ(untraced(m, "host-c", "to_peer", "hop_limit"), 1);  // 4 cables
  EXPECT_EQ(hops(m, "host-b", "to_peer").size(), 2u);           // 2 cables: traced
  EXPECT_EQ(peers_in(m, "traced"), 1);
}

TEST_F(PathsRunTest, ARoutingLoopIsLoop) {
  tree_.fabric->forward(kSpine1, kLidC, 1);  // back down to leaf-1, which sends it up again
  test_support::LogCapture log;
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(untraced(m, "host-c", "to_peer", "loop"), 1);
  EXPECT_EQ(test_support::count_containing(
                log.take(), "reason=loop detail=\"switch 0x0002c90200001001 reached twice\""),
            1u);
}

TEST_F(PathsRunTest, ALidThatLeadsToAnotherNodeIsWrongDestination) {
  tree_.fabric->forward(kLeaf2, kLidC, 2);  // host-c's LID goes to host-d
  test_support::LogCapture log;
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(untraced(m, "host-c", "to_peer", "wrong_destination"), 1);
  EXPECT_EQ(test_support::count_containing(
                log.take(), "detail=\"LID 12 led to node 0x0002c90300000d00 port 1 (LID 13)\""),
            1u);
}

TEST_F(PathsRunTest, ALidATableGivesToTheSwitchItselfIsWrongDestination) {
  tree_.fabric->forward(kLeaf2, kLidC, 0);
  test_support::LogCapture log;
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(untraced(m, "host-c", "to_peer", "wrong_destination"), 1);
  EXPECT_EQ(test_support::count_containing(log.take(),
                                           "detail=\"LID 12 is switch 0x0002c90200001002 itself\""),
            1u);
}

// A CA owns its base LID and the 2^LMC after it: a peer known by its second LID is traced.
TEST_F(PathsRunTest, ALidWithinTheLmcRangeIsTheCasOwn) {
  tree_.fabric->lmc(kHostC, 1);
  tree_.route_host(kLidC + 1, 3, 1);  // LID 13 is host-c's second LID; host-d has none here
  tree_.fabric->add({kHostD, IB_NODE_CA, 1, "host-d mlx5_0", 14});
  tree_.fabric->master_sm_lid(14);
  publish({{"host-c", "mad", kLidC + 1}});
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(peers_in(m, "traced"), 1);
  EXPECT_EQ(hops(m, "host-c", "to_peer"), kToC);
}

// Over max_mads_per_run, a leg is not a failure: the peer is pending and traced in a later
// run, new peers first.
TEST_F(PathsRunTest, WhatTheBudgetLeavesIsDeferredToALaterRun) {
  PathsConfig config;
  config.max_mads_per_run = 10;
  auto c = collector(config);
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_path_run_mads", {}), 10);
  EXPECT_GE(peers_in(m, "pending"), 1);
  EXPECT_EQ(peers_in(m, "untraced"), 0);
  EXPECT_TRUE(samples(m, "ibfabric_path_untraced").empty());
  int runs = 1;
  while (peers_in(m, "traced") < 2 && runs < 10) {
    m = run(*c);
    ++runs;
    EXPECT_LE(value(m, "ibfabric_path_run_mads", {}), 10);
    EXPECT_EQ(peers_in(m, "untraced"), 0);
  }
  EXPECT_EQ(peers_in(m, "traced"), 2) << "after " << runs << " runs";
  EXPECT_GT(runs, 1);
  EXPECT_EQ(traces(m, "new"), 2);  // a deferred attempt is not a trace
  EXPECT_EQ(hops(m, "host-c", "from_peer"), kFromC);
}

// A peer never traced goes before a path traced again: under a budget that leaves two queries
// after this node's and the verification's, the new peer's query is asked before the stale
// path's, which waits for a later run.
TEST_F(PathsRunTest, ANewPeerGoesBeforeAPathTracedAgain) {
  constexpr std::uint16_t kLidC2 = 70;  // in the tables' second block
  tree_.fabric->add({kHostC, IB_NODE_CA, 1, "host-c mlx5_0", kLidC2});
  tree_.route_host(kLidC2, 3, 1);
  publish({{"a-peer", "mad", kLidB}});  // sorts first
  PathsConfig config;
  config.verify_every = 0s;
  config.max_mads_per_run = 6;  // this node's 3, a verification's 1, then 2
  auto c = collector(config);
  MetricFamilies m;
  for (int runs = 0; runs < 10 && peers_in(m, "traced") < 1; ++runs) m = run(*c);
  ASSERT_EQ(peers_in(m, "traced"), 1);
  // leaf-1's block 0 changes (a new LID in it): a-peer's path is stale (route_change), the
  // nodes are read again; host-c is new.
  tree_.fabric->forward(kLeaf1, 14, 3);
  tree_.fabric->sm(kHostD).activity += 1;
  publish({{"a-peer", "mad", kLidB}, {"host-c", "mad", kLidC2}});
  const auto before = tree_.fabric->asked.size();
  m = run(*c);
  ASSERT_EQ(tree_.fabric->asked.size() - before, 6u);
  // The 5th: NodeInfo of leaf-1, which both traces need; the 6th: host-c's table block.
  EXPECT_EQ(tree_.fabric->asked.back().attr_id, IB_ATTR_LINEARFORWTBL);
  EXPECT_EQ(tree_.fabric->asked.back().attr_mod, 1u) << "host-c's block, not a-peer's next node";
  EXPECT_EQ(traces(m, "route_change"), 0);
}

// --- When a path is traced again -------------------------------------------------------------

// A new master SM (another GUID at MasterSMLID): everything is forgotten and traced again.
TEST_F(PathsRunTest, ANewMasterSmTracesEverythingAgain) {
  auto c = collector();
  run(*c);
  auto m = run(*c);  // the same SM: nothing to do
  EXPECT_EQ(lft_reads_, 0u);
  EXPECT_EQ(traces(m, "sm_change"), 0);
  test_support::LogCapture log;
  tree_.fabric->sm(kHostD).guid = kHostB + 1;
  m = run(*c);
  EXPECT_EQ(traces(m, "sm_change"), 2);
  EXPECT_EQ(lft_reads_, 3u);  // the cache was forgotten
  EXPECT_EQ(peers_in(m, "traced"), 2);
  EXPECT_EQ(test_support::count_containing(
                log.take(), "paths: the master SM changed; tracing every path again"),
            1u);
}

// The tables in use are read again only when the master's ActCount moved since the last
// verification: a block that changed makes its paths (only those) stale, route_change.
TEST_F(PathsRunTest, TablesAreVerifiedWhenTheSmsActivityCountMoved) {
  PathsConfig config;
  config.verify_every = 0s;
  auto c = collector(config);
  run(*c);
  // leaf-2 now sends host-a's LID up through spine-2 (only host-c's answer leg uses leaf-2).
  tree_.fabric->forward(kLeaf2, kLidA, 4);
  auto m = run(*c);
  EXPECT_EQ(lft_reads_, 0u) << "verified without SM activity";
  EXPECT_EQ(hops(m, "host-c", "from_peer"), kFromC);
  test_support::LogCapture log;
  tree_.fabric->sm(kHostD).activity += 7;
  m = run(*c);
  EXPECT_EQ(traces(m, "route_change"), 1);
  EXPECT_EQ(hops(m, "host-c", "from_peer"),
            (std::vector<std::string>{
                cable(kLeaf2, 1, kHostC, 1, "b_to_a"), cable(kLeaf2, 4, kSpine2, 2, "a_to_b"),
                cable(kLeaf1, 4, kSpine2, 1, "b_to_a"), cable(kLeaf1, 1, kHostA, 1, "a_to_b")}));
  EXPECT_EQ(hops(m, "host-c", "to_peer"), kToC);
  EXPECT_EQ(
      test_support::count_containing(
          log.take(), "paths: route changed peer=\"host-c\" transport=mad leg=from_peer cables=4"),
      1u);
  // The same activity count again: nothing is read.
  m = run(*c);
  EXPECT_EQ(lft_reads_, 0u);
  EXPECT_EQ(traces(m, "route_change"), 1);
}

// Not more often than verify_every, however active the SM.
TEST_F(PathsRunTest, TablesAreVerifiedAtMostEveryVerifyEvery) {
  PathsConfig config;
  config.verify_every = 1h;
  auto c = collector(config);
  run(*c);
  tree_.fabric->forward(kLeaf2, kLidA, 4);
  tree_.fabric->sm(kHostD).activity += 7;
  auto m = run(*c);
  EXPECT_EQ(lft_reads_, 0u);
  EXPECT_EQ(traces(m, "route_change"), 0);
  EXPECT_EQ(hops(m, "host-c", "from_peer"), kFromC);
}

// A block that no longer answers at verification makes its paths stale (hop_lost); the leg
// keeps the cables of its last good trace while it fails, and is traced again once the switch
// answers (retry).
TEST_F(PathsRunTest, ABlockThatNoLongerAnswersIsHopLostThenRetried) {
  PathsConfig config;
  config.verify_every = 0s;
  auto c = collector(config);
  run(*c);
  tree_.fabric->silence(kSpine1);
  tree_.fabric->sm(kHostD).activity += 1;
  test_support::LogCapture log;
  auto m = run(*c);
  EXPECT_EQ(traces(m, "hop_lost"), 1);
  EXPECT_EQ(untraced(m, "host-c", "to_peer", "no_answer"), 1);
  EXPECT_EQ(hops(m, "host-c", "to_peer"), kToC) << "the last good trace is kept";
  EXPECT_EQ(peers_in(m, "untraced"), 1);
  EXPECT_EQ(peers_in(m, "traced"), 1);
  log.take();

  tree_.fabric->silence(kSpine1, false);
  m = run(*c);  // no SM activity: the failed path is traced anyway
  EXPECT_EQ(traces(m, "retry"), 1);
  EXPECT_FALSE(untraced(m, "host-c", "to_peer", "no_answer"));
  EXPECT_EQ(peers_in(m, "traced"), 2);
  EXPECT_EQ(test_support::count_containing(
                log.take(), "paths: traced again peer=\"host-c\" transport=mad leg=to_peer"),
            1u);
}

// A path already to be traced again keeps the cause it has when one of its blocks changes: a
// path failing since a switch stopped answering its table is a retry, not a route_change.
TEST_F(PathsRunTest, AChangedBlockDoesNotRenameTheCauseOfAPathAlreadyStale) {
  PathsConfig config;
  config.verify_every = 0s;
  auto c = collector(config);
  run(*c);
  tree_.fabric->lose(kSpine1, 100, std::nullopt, FakeFabric::smp(IB_ATTR_LINEARFORWTBL));
  tree_.fabric->sm(kHostD).activity += 1;
  auto m = run(*c);
  ASSERT_EQ(traces(m, "hop_lost"), 1);
  ASSERT_EQ(untraced(m, "host-c", "to_peer", "no_answer"), 1);
  tree_.fabric->forward(kLeaf2, 14, 3);  // leaf-2's block 0, on host-c's last good path, changes
  tree_.fabric->sm(kHostD).activity += 1;
  const auto leaf2_reads = tree_.fabric->count_asked(IB_ATTR_LINEARFORWTBL, kLeaf2);
  m = run(*c);
  EXPECT_EQ(tree_.fabric->count_asked(IB_ATTR_LINEARFORWTBL, kLeaf2), leaf2_reads + 1)
      << "verified";
  EXPECT_EQ(traces(m, "route_change"), 0);
  EXPECT_EQ(traces(m, "retry"), 1);
}

// A failed attempt reads the blocks it used again at the retry (they may have been read before
// the SM programmed them).
TEST_F(PathsRunTest, ARetryReadsTheBlocksOfTheFailedAttemptAgain) {
  tree_.fabric->forward(kSpine1, kLidC, 0xff);  // not programmed yet
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(untraced(m, "host-c", "to_peer", "no_route"), 1);
  tree_.route_host(kLidC, 3, 1);
  m = run(*c);
  EXPECT_EQ(traces(m, "retry"), 1);
  EXPECT_EQ(hops(m, "host-c", "to_peer"), kToC);
  EXPECT_EQ(hops(m, "host-c", "from_peer"), kFromC);
}

// This node's LID changed: everything traced again, the answer legs to the new LID.
TEST_F(PathsRunTest, ANewLocalLidTracesEverythingAgain) {
  auto c = collector();
  run(*c);
  constexpr std::uint16_t kNewLidA = 20;
  tree_.fabric->add({kHostA, IB_NODE_CA, 1, "host-a mlx5_0", kNewLidA});
  tree_.route_host(kNewLidA, 1, 4);  // from leaf-2 up through spine-2 now
  test_support::LogCapture log;
  auto m = run(*c);
  EXPECT_EQ(traces(m, "local_change"), 2);
  EXPECT_EQ(hops(m, "host-c", "from_peer"),
            (std::vector<std::string>{
                cable(kLeaf2, 1, kHostC, 1, "b_to_a"), cable(kLeaf2, 4, kSpine2, 2, "a_to_b"),
                cable(kLeaf1, 4, kSpine2, 1, "b_to_a"), cable(kLeaf1, 1, kHostA, 1, "a_to_b")}));
  EXPECT_EQ(
      test_support::count_containing(log.take(), "paths: this node's port changed; tracing again"),
      1u);
}

// Every `refresh`, every path is traced again from scratch (nodes and tables read again).
TEST_F(PathsRunTest, EveryRefreshTracesEverythingFromScratch) {
  PathsConfig config;
  config.refresh = 0s;
  auto c = collector(config);
  run(*c);
  auto nodes = tree_.fabric->count_asked(IB_ATTR_NODE_INFO);
  auto m = run(*c);
  EXPECT_EQ(traces(m, "refresh"), 2);
  EXPECT_EQ(lft_reads_, 3u);
  EXPECT_GT(tree_.fabric->count_asked(IB_ATTR_NODE_INFO) - nodes, 2u);
}

// A peer whose LID changed is a new peer.
TEST_F(PathsRunTest, APeerWhoseLidChangedIsNew) {
  auto c = collector();
  run(*c);
  publish({{"host-b", "mad", kLidB}, {"host-c", "mad", kLidD}});
  auto m = run(*c);
  EXPECT_EQ(traces(m, "new"), 3);
  EXPECT_EQ(
      test_support::info(m, "ibfabric_path_peer_info", {{"peer", "host-c"}})["peer_node_guid"],
      guid(kHostD));
}

// No LID on the local port (no SM yet) fails the run.
TEST_F(PathsRunTest, ALocalPortWithoutALidFailsTheRun) {
  tree_.fabric->add({kHostA, IB_NODE_CA, 1, "host-a mlx5_0", 0});
  auto c = collector();
  auto r = collect(*c);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.error, "the local port has no LID yet (is a Subnet Manager running?)");
  // Its other metrics are kept: the SMPs it sent (NodeInfo, PortInfo, SMInfo).
  EXPECT_EQ(value(r.metrics, "ibfabric_path_mads_total", {}), 3);
}

// A switch that answers NodeInfo but not its forwarding table, and a peer's port that does not
// answer PortInfo: each leg is no_answer, with what did not answer in the log.
TEST_F(PathsRunTest, ATableOrAPeersPortInfoNotAnsweredIsNoAnswer) {
  tree_.fabric->lose(kSpine1, 100, std::nullopt, FakeFabric::smp(IB_ATTR_LINEARFORWTBL));
  tree_.fabric->lose(kHostB, 100, std::nullopt, FakeFabric::smp(IB_ATTR_PORT_INFO));
  test_support::LogCapture log;
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(untraced(m, "host-c", "to_peer", "no_answer"), 1);
  EXPECT_EQ(untraced(m, "host-b", "to_peer", "no_answer"), 1);
  auto lines = log.take();
  EXPECT_EQ(test_support::count_containing(
                lines, "detail=\"switch 0x0002c90200002001 did not answer LinearForwardingTable\""),
            1u);
  EXPECT_EQ(test_support::count_containing(
                lines, "detail=\"node 0x0002c90300000b00 did not answer PortInfo\""),
            1u);
}

// The daemon's node must be a CA (a switch's own port 0 leads nowhere a probe goes).
TEST_F(PathsRunTest, ALocalNodeThatIsNotACaFailsTheRun) {
  tree_.fabric->add({kHostA, IB_NODE_SWITCH, 1, "host-a", kLidA});
  auto c = collector();
  auto r = collect(*c);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.error, "the local port has no LID yet (is a Subnet Manager running?)");
  EXPECT_TRUE(samples(r.metrics, "ibfabric_path_hop_info").empty());
}

// The local node, or its port, not answering fails the run, with the reason.
TEST_F(PathsRunTest, ALocalNodeOrPortThatDoesNotAnswerFailsTheRun) {
  {
    tree_.fabric->silence(kHostA);
    auto c = collector();
    auto r = collect(*c);
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.error, "the local node did not answer NodeInfo");
    tree_.fabric->silence(kHostA, false);
  }
  tree_.fabric->lose(kHostA, 100, 1, FakeFabric::smp(IB_ATTR_PORT_INFO));
  auto c = collector();
  auto r = collect(*c);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.error, "the local port did not answer PortInfo");
}

// No MasterSMLID in the local PortInfo (no SM has programmed it): no SMInfo is asked, and the
// paths are traced all the same.
TEST_F(PathsRunTest, WithoutAnSmLidNoSmInfoIsAsked) {
  tree_.fabric->master_sm_lid(0);
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(peers_in(m, "traced"), 2);
  for (const auto& r : tree_.fabric->requests()) {
    EXPECT_NE(r.attribute, IB_ATTR_SMINFO) << r.destination;
  }
}

// An SM that does not answer SMInfo leaves the paths traced.
TEST_F(PathsRunTest, AnSmThatDoesNotAnswerLeavesThePathsTraced) {
  tree_.fabric->sm(kHostD).answers = false;
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_path_query_errors_total", {{"attribute", "sm_info"}}), 1);
  EXPECT_EQ(peers_in(m, "traced"), 2);
  EXPECT_EQ(hops(m, "host-c", "to_peer"), kToC);
}

// Without an SM's ActCount to go by, the tables in use are read again every verify_every.
TEST_F(PathsRunTest, WithoutAnSmAnsweringTheTablesAreVerifiedEveryVerifyEvery) {
  tree_.fabric->sm(kHostD).answers = false;
  PathsConfig config;
  config.verify_every = 0s;
  auto c = collector(config);
  run(*c);
  tree_.fabric->forward(kLeaf2, kLidA, 4);  // as in TablesAreVerifiedWhenTheSmsActivityCountMoved
  auto m = run(*c);
  EXPECT_EQ(lft_reads_, 4u);  // the 3 blocks in use, then spine-2's on the new route
  EXPECT_EQ(traces(m, "route_change"), 1);
}

// A peer the probe collector no longer probes is forgotten: its series go.
TEST_F(PathsRunTest, APeerNoLongerProbedIsForgotten) {
  auto c = collector();
  auto m = run(*c);
  ASSERT_EQ(hops(m, "host-c", "to_peer"), kToC);
  publish({{"host-b", "mad", kLidB}});
  m = run(*c);
  EXPECT_TRUE(hops(m, "host-c", "to_peer").empty());
  EXPECT_TRUE(samples(m, "ibfabric_path_peer_info", {{"peer", "host-c"}}).empty());
  EXPECT_EQ(peers_in(m, "traced"), 1);
}

// Two hosts cabled back to back (the SM on the peer): each leg is the one cable, the answer's
// leg ending at this node without a switch's table to read.
TEST_F(PathsRunTest, TwoCasCabledBackToBackAreOneCableEachWay) {
  constexpr std::uint64_t kHostE = 0x0002c90300000e00ull;
  constexpr std::uint16_t kLidE = 15;
  tree_.fabric->unplug(kLeaf1, 1);
  tree_.fabric->add({kHostE, IB_NODE_CA, 1, "host-e mlx5_0", kLidE});
  tree_.fabric->cable(kHostA, 1, kHostE, 1);
  tree_.fabric->stop_sm(kHostD);
  tree_.fabric->run_sm(kHostE, {kHostE + 1, 100, 10, 3, true});
  tree_.fabric->master_sm_lid(kLidE);
  publish({{"host-e", "mad", kLidE}});
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(peers_in(m, "traced"), 1);
  EXPECT_EQ(hops(m, "host-e", "to_peer"),
            (std::vector<std::string>{cable(kHostA, 1, kHostE, 1, "a_to_b")}));
  EXPECT_EQ(hops(m, "host-e", "from_peer"),
            (std::vector<std::string>{cable(kHostA, 1, kHostE, 1, "b_to_a")}));
  EXPECT_EQ(lft_reads_, 0u);
}

// The answer's leg must end at this node: a LID two ports hold (an SM handed out a LID a port
// still had) that leads the answers to another node is wrong_destination.
TEST_F(PathsRunTest, ThisNodesLidLeadingToAnotherNodeIsWrongDestination) {
  tree_.fabric->add({kHostB, IB_NODE_CA, 1, "host-b mlx5_0", kLidA});
  tree_.fabric->forward(kLeaf1, kLidA, 2);  // leaf-1 sends this node's LID to host-b
  publish({{"host-c", "mad", kLidC}});
  test_support::LogCapture log;
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(hops(m, "host-c", "to_peer"), kToC);
  EXPECT_EQ(untraced(m, "host-c", "from_peer", "wrong_destination"), 1);
  EXPECT_FALSE(untraced(m, "host-c", "to_peer", "wrong_destination"));
  EXPECT_EQ(test_support::count_containing(
                log.take(), "detail=\"this node's LID led to node 0x0002c90300000b00\""),
            1u);
}

// A node two traces reach by the same route at once is asked once: the second waits for the
// first's answer.
TEST_F(PathsRunTest, ANodeTwoTracesReachAtOnceIsAskedOnce) {
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(peers_in(m, "traced"), 2);
  auto node_infos = std::count_if(
      tree_.fabric->requests().begin(), tree_.fabric->requests().end(), [](const auto& r) {
        return r.attribute == IB_ATTR_NODE_INFO && r.destination == "route 0,1";
      });
  EXPECT_EQ(node_infos, 1);
}

// A verification the MAD budget cuts short loses no hop: the blocks it could not read stay
// cached and their paths traced (they are read at a later verification).
TEST_F(PathsRunTest, AVerificationTheBudgetCutsShortLosesNoHop) {
  PathsConfig config;
  config.verify_every = 0s;
  config.max_mads_per_run = 5;  // this node's 3, then 2 of the 3 blocks in use
  auto c = collector(config);
  auto m = run(*c);
  for (int runs = 1; peers_in(m, "traced") < 2 && runs < 30; ++runs) m = run(*c);
  ASSERT_EQ(peers_in(m, "traced"), 2);
  ASSERT_EQ(value(m, "ibfabric_path_cached_tables", {}), 3);
  tree_.fabric->sm(kHostD).activity += 1;
  m = run(*c);
  EXPECT_EQ(lft_reads_, 2u);
  EXPECT_EQ(value(m, "ibfabric_path_cached_tables", {}), 3);
  EXPECT_EQ(traces(m, "hop_lost"), 0);
  m = run(*c);
  EXPECT_EQ(lft_reads_, 0u) << "nothing stale";
  EXPECT_EQ(traces(m, "hop_lost"), 0);
}

}  // namespace
}  // namespace ibfabric::paths
