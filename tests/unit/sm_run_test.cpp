// The `sm` collector's run (collectors/sm/sm_run.*) driven through the fake subnet of
// fake_fabric.h: this host on a leaf switch with two SMs on two other hosts, a master and a
// standby, whose SMInfo (and the master's SA table) each test sets as the SMs would answer.
// What is checked is what docs/collectors.md, "Collector `sm`", documents: the master the port
// points at, every SM of the subnet, a stalled activity count, a failover, and failures. The
// SMInfo decoding and the master tracker on their own are in sm_decode_test.cpp; the simulator
// tests (tests/integration/test_sm.py) stay the end-to-end truth.

#include "collector_test_support.h"
#include "collectors/sm/sm_collector.h"
#include "fake_fabric.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric::sm {
namespace {

using test_support::FakeFabric;
using test_support::samples;
using test_support::value;

constexpr std::uint64_t kLeaf = 0x0002c90200400001ull;
constexpr std::uint64_t kHostA = 0x0002c90300000a00ull;  // the daemon's node
constexpr std::uint64_t kHostB = 0x0002c90300000b00ull;  // the master SM's
constexpr std::uint64_t kHostC = 0x0002c90300000c00ull;  // the standby's
constexpr std::uint16_t kLidA = 2, kLidB = 3, kLidC = 4;
constexpr std::uint64_t kMasterGuid = kHostB + 1, kStandbyGuid = kHostC + 1;  // port GUIDs

const Labels kPort{{"device", "mlx5_0"}, {"port", "1"}};

Labels with(Labels l, const std::string& name, const std::string& v) {
  l.emplace_back(name, v);
  return l;
}

class SmRunTest : public ::testing::Test {
 protected:
  SmRunTest() : fabric_(std::make_shared<FakeFabric>(io_, kHostA)) {
    fabric_->add({kLeaf, IB_NODE_SWITCH, 8, "leaf-01", 1});
    fabric_->add({kHostA, IB_NODE_CA, 1, "host-a mlx5_0", kLidA});
    fabric_->add({kHostB, IB_NODE_CA, 1, "host-b mlx5_0", kLidB});
    fabric_->add({kHostC, IB_NODE_CA, 1, "host-c mlx5_0", kLidC});
    fabric_->cable(kLeaf, 1, kHostA, 1);
    fabric_->cable(kLeaf, 2, kHostB, 1);
    fabric_->cable(kLeaf, 3, kHostC, 1);
    fabric_->run_sm(kHostB, {kMasterGuid, 1000, 10, 3, true});
    fabric_->run_sm(kHostC, {kStandbyGuid, 500, 5, 2, true});
    fabric_->master_sm_lid(kLidB);
  }

  std::unique_ptr<SmCollector> collector(
      bool subnet = true,
      std::shared_ptr<const NodeNameMap> names = std::make_shared<const NodeNameMap>()) {
    mad::LocalPort port;
    port.ca = "mlx5_0";
    port.port = 1;
    port.node_guid = kHostA;
    port.link_layer = "InfiniBand";
    return std::make_unique<SmCollector>(
        io_, [f = fabric_] { return f; }, SmConfig{{}, subnet}, std::move(names),
        [port] { return std::vector<mad::LocalPort>{port}; });
  }

  CollectResult collect(Collector& c) { return test_support::collect_on(io_, c); }
  MetricFamilies run(Collector& c) { return test_support::metrics_on(io_, c); }

  boost::asio::io_context io_;
  std::shared_ptr<FakeFabric> fabric_;
};

double stalled(const MetricFamilies& m) {
  return value(m, "ibfabric_sm_activity_stalled_polls", kPort).value_or(-1);
}

TEST_F(SmRunTest, TheMasterThePortPointsAt) {
  auto c = collector(false);
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_sm_port_sm_lid", kPort), kLidB);
  EXPECT_EQ(value(m, "ibfabric_sm_master_up", kPort), 1);
  auto info = test_support::info(m, "ibfabric_sm_master_info", kPort);
  EXPECT_EQ(info["guid"], hex_guid(kMasterGuid));
  EXPECT_EQ(info["lid"], std::to_string(kLidB));
  EXPECT_EQ(info["state"], "master");
  EXPECT_EQ(info["node_name"], "host-b mlx5_0");  // NodeDescription: no node-name-map here
  EXPECT_EQ(value(m, "ibfabric_sm_master_state", kPort), 3);
  EXPECT_EQ(value(m, "ibfabric_sm_master_priority", kPort), 10);
  EXPECT_EQ(value(m, "ibfabric_sm_master_activity", kPort), 1000);
  EXPECT_EQ(value(m, "ibfabric_sm_master_changes_total", kPort), 0);
  EXPECT_EQ(stalled(m), 0);
  // subnet: false asks the SA nothing and lists no SM.
  EXPECT_EQ(fabric_->count_asked(IB_SA_ATTR_SMINFORECORD), 0u);
  EXPECT_FALSE(value(m, "ibfabric_sm_sa_up", kPort));
  EXPECT_TRUE(samples(m, "ibfabric_sm_subnet_sm_info").empty());
  EXPECT_TRUE(samples(m, "ibfabric_sm_query_errors_total").empty());
}

// subnet: true: the SA's table, then SMInfo from each SM it lists.
TEST_F(SmRunTest, EverySmOfTheSubnet) {
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_sm_sa_up", kPort), 1);
  auto standby = test_support::info(m, "ibfabric_sm_subnet_sm_info",
                                    with(kPort, "guid", hex_guid(kStandbyGuid)));
  EXPECT_EQ(standby["lid"], std::to_string(kLidC));
  EXPECT_EQ(standby["state"], "standby");
  EXPECT_EQ(standby["node_name"], "host-c mlx5_0");
  auto master = test_support::info(m, "ibfabric_sm_subnet_sm_info",
                                   with(kPort, "guid", hex_guid(kMasterGuid)));
  EXPECT_EQ(master["state"], "master");
  Labels sl = with(with(kPort, "guid", hex_guid(kStandbyGuid)), "lid", std::to_string(kLidC));
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sm_responding", sl), 1);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sm_state", sl), 2);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sm_priority", sl), 5);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sm_activity", sl), 500);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sms", with(kPort, "state", "master")), 1);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sms", with(kPort, "state", "standby")), 1);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sms", with(kPort, "state", "not_active")), 0);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sms", with(kPort, "state", "discovering")), 0);
  // The standby answered first hand (its own SMInfo, not only the SA's record of it).
  EXPECT_EQ(fabric_->count_asked(IB_ATTR_SMINFO, kHostC), 1u);
}

// The same master with the same ActCount poll after poll: stalled_polls counts them; a moving
// count resets it; a master that stops answering counts too, and fails the run.
TEST_F(SmRunTest, AStalledActivityCountIsCounted) {
  auto c = collector(false);
  EXPECT_EQ(stalled(run(*c)), 0);
  EXPECT_EQ(stalled(run(*c)), 1);
  EXPECT_EQ(stalled(run(*c)), 2);
  fabric_->sm(kHostB).activity += 3;
  EXPECT_EQ(stalled(run(*c)), 0);

  fabric_->sm(kHostB).answers = false;  // stopped
  auto r = collect(*c);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.error,
            "device=mlx5_0 port=1: the SM the port points at (lid 3) did not answer SMInfo: "
            "timeout (no SM answers at this node)");
  EXPECT_EQ(stalled(r.metrics), 1);
  EXPECT_EQ(value(r.metrics, "ibfabric_sm_master_up", kPort), 0);
  EXPECT_FALSE(value(r.metrics, "ibfabric_sm_master_state", kPort));
  EXPECT_EQ(value(r.metrics, "ibfabric_sm_port_sm_lid", kPort), kLidB);  // still published
  EXPECT_EQ(
      value(r.metrics, "ibfabric_sm_query_errors_total", with(kPort, "query", "sm_info_master")),
      1);
}

// Failover: the standby takes over and the ports point at it; counted once, with the master
// shown as the new one. The old master, which the new SA's table no longer lists, is forgotten:
// when that SA stops answering too, only the SMs it listed are asked directly.
TEST_F(SmRunTest, AFailoverIsCountedOnce) {
  auto c = collector();
  run(*c);
  fabric_->stop_sm(kHostB);
  fabric_->sm(kHostC).state = 3;
  fabric_->master_sm_lid(kLidC);
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_sm_master_changes_total", kPort), 1);
  auto info = test_support::info(m, "ibfabric_sm_master_info", kPort);
  EXPECT_EQ(info["guid"], hex_guid(kStandbyGuid));
  EXPECT_EQ(info["lid"], std::to_string(kLidC));
  EXPECT_EQ(value(m, "ibfabric_sm_port_sm_lid", kPort), kLidC);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sms", with(kPort, "state", "master")), 1);
  EXPECT_TRUE(
      samples(m, "ibfabric_sm_subnet_sm_responding", {{"guid", hex_guid(kMasterGuid)}}).empty());
  m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_sm_master_changes_total", kPort), 1);

  fabric_->sm(kHostC).answers = false;
  auto r = collect(*c);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(value(r.metrics, "ibfabric_sm_sa_up", kPort), 0);
  EXPECT_EQ(value(r.metrics, "ibfabric_sm_subnet_sm_responding",
                  with(with(kPort, "guid", hex_guid(kStandbyGuid)), "lid", std::to_string(kLidC))),
            0);
  EXPECT_TRUE(
      samples(r.metrics, "ibfabric_sm_subnet_sm_responding", {{"guid", hex_guid(kMasterGuid)}})
          .empty())
      << "an SM the last SA table did not list is still asked";
  EXPECT_EQ(fabric_->count_asked(IB_ATTR_SMINFO, kHostB), 1u);  // only before the failover
}

// The master (and with it the SA) stops answering: the SMs seen before are asked directly;
// the standby still answers, the master is listed as not responding; the run fails.
TEST_F(SmRunTest, WithoutTheSaTheSmsSeenBeforeAreAskedDirectly) {
  auto c = collector();
  run(*c);
  fabric_->sm(kHostB).answers = false;
  auto r = collect(*c);
  EXPECT_FALSE(r.success);
  const auto& m = r.metrics;
  EXPECT_EQ(value(m, "ibfabric_sm_sa_up", kPort), 0);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sm_responding",
                  with(with(kPort, "guid", hex_guid(kStandbyGuid)), "lid", std::to_string(kLidC))),
            1);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sm_responding",
                  with(with(kPort, "guid", hex_guid(kMasterGuid)), "lid", std::to_string(kLidB))),
            0);
  // Nothing read about the master in this poll: no state series for it.
  EXPECT_TRUE(samples(m, "ibfabric_sm_subnet_sm_state", {{"guid", hex_guid(kMasterGuid)}}).empty());
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sms", with(kPort, "state", "standby")), 1);
  EXPECT_EQ(value(m, "ibfabric_sm_subnet_sms", with(kPort, "state", "master")), 0);
  EXPECT_EQ(value(m, "ibfabric_sm_query_errors_total", with(kPort, "query", "sm_info_record")), 1);
  EXPECT_NE(r.error.find("the SA at lid 3 did not answer the SMInfoRecord table"),
            std::string::npos)
      << r.error;
}

// Each SM is counted in the state it answers: not_active and discovering too, and two masters
// at once (a split subnet) as two.
TEST_F(SmRunTest, EverySmIsCountedInItsState) {
  auto c = collector();
  auto count = [](const MetricFamilies& m, const char* state) {
    return value(m, "ibfabric_sm_subnet_sms", with(kPort, "state", state)).value_or(-1);
  };
  for (int state : {0, 1}) {
    fabric_->sm(kHostC).state = state;
    auto m = run(*c);
    EXPECT_EQ(count(m, state == 0 ? "not_active" : "discovering"), 1) << state;
    EXPECT_EQ(count(m, "standby"), 0) << state;
    EXPECT_EQ(count(m, "master"), 1) << state;
  }
  fabric_->sm(kHostC).state = 3;
  auto m = run(*c);
  EXPECT_EQ(count(m, "master"), 2);
  EXPECT_EQ(test_support::info(m, "ibfabric_sm_subnet_sm_info",
                               with(kPort, "guid", hex_guid(kStandbyGuid)))["state"],
            "master");
}

// An SM's name: the node-name-map's before its NodeDescription; when its NodeDescription is
// not answered, the name last read (a failure costs only the name, and not even that).
TEST_F(SmRunTest, AnSmIsNamedByTheMapElseItsDescriptionElseAsLastSeen) {
  auto mapped = collector(false, std::make_shared<const NodeNameMap>(NodeNameMap::parse(
                                     hex_guid(kHostB) + " \"sm-primary\"\n", "map.txt")));
  EXPECT_EQ(test_support::info(run(*mapped), "ibfabric_sm_master_info", kPort)["node_name"],
            "sm-primary");

  auto c = collector(false);
  EXPECT_EQ(test_support::info(run(*c), "ibfabric_sm_master_info", kPort)["node_name"],
            "host-b mlx5_0");
  fabric_->lose(kHostB, 100, std::nullopt, FakeFabric::smp(IB_ATTR_NODE_DESC));
  auto r = collect(*c);
  EXPECT_EQ(test_support::info(r.metrics, "ibfabric_sm_master_info", kPort)["node_name"],
            "host-b mlx5_0");
  EXPECT_EQ(
      value(r.metrics, "ibfabric_sm_query_errors_total", with(kPort, "query", "node_description")),
      1);
}

// A port no SM has configured (MasterSMLID 0) has nobody to ask: not a failure.
TEST_F(SmRunTest, APortWithoutAnSmHasNobodyToAsk) {
  fabric_->master_sm_lid(0);
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_sm_port_sm_lid", kPort), 0);
  EXPECT_FALSE(value(m, "ibfabric_sm_master_up", kPort));
  EXPECT_FALSE(value(m, "ibfabric_sm_sa_up", kPort));
  EXPECT_EQ(stalled(m), 0);
  EXPECT_EQ(fabric_->count_asked(IB_ATTR_SMINFO), 0u);
}

// The local port does not answer its PortInfo: the run fails, naming the port.
TEST_F(SmRunTest, ALocalPortThatDoesNotAnswerFailsTheRun) {
  fabric_->silence(kHostA);
  auto c = collector();
  auto r = collect(*c);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.error, "device=mlx5_0 port=1: PortInfo of the local port failed: timeout");
  EXPECT_FALSE(value(r.metrics, "ibfabric_sm_port_sm_lid", kPort));
  EXPECT_EQ(value(r.metrics, "ibfabric_sm_query_errors_total", with(kPort, "query", "port_info")),
            1);
}

}  // namespace
}  // namespace ibfabric::sm
