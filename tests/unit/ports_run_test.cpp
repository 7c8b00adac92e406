// The `ports` collector's run (collectors/ports/ports_run.*) driven through the fake subnet of
// fake_fabric.h: this host's port on a leaf switch, the PMAs of both ends answering the
// counters each test sets. What is checked is what docs/collectors.md, "Collector `ports`",
// documents: both sides' PortInfo and counters (PortCounters or PortCountersExtended by the
// PMA's capability mask, the saturation of 32-bit values, the error details), a side whose
// queries are lost (keep_unread; the local PortInfo alone, the far end's NodeDescription), the
// far end named after its link went down (link_memory) or replaced when re-cabled, a host at
// the far end, `peers: false`, and a node with no InfiniBand port. The simulator tests
// (tests/integration/test_ports.py, test_lossy_fabric.py) stay the end-to-end truth.
//
// No clock is injected (the code has none at its edge): keep_unread and link_memory are set to
// an hour (not within the test) or to 1 ns (always past by the next run).

#include "collector_test_support.h"
#include "collectors/ports/ports_collector.h"
#include "fake_fabric.h"
#include "mad/attributes.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric::ports {
namespace {

using namespace std::chrono_literals;
using test_support::FakeFabric;
using test_support::samples;
using test_support::value;

constexpr std::uint64_t kLeaf = 0x0002c90200400001ull;
constexpr std::uint64_t kHostA = 0x0002c90300000a00ull;  // the daemon's node
constexpr std::uint16_t kLeafLid = 1, kLidA = 2, kSmLid = 7;
constexpr int kLeafPort = 5;  // host-a's cable ends there

class PortsRunTest : public ::testing::Test {
 protected:
  PortsRunTest() : fabric_(std::make_shared<FakeFabric>(io_, kHostA)) {
    fabric_->add({kLeaf, IB_NODE_SWITCH, 8, "leaf-01", kLeafLid});
    fabric_->add({kHostA, IB_NODE_CA, 1, "host-a mlx5_0", kLidA});
    fabric_->cable(kHostA, 1, kLeaf, kLeafPort);
    fabric_->master_sm_lid(kSmLid);
  }

  std::unique_ptr<PortsCollector> collector(PortsConfig config = {}) {
    return collector(config, {test_support::ib_port(kHostA)});
  }
  std::unique_ptr<PortsCollector> collector(PortsConfig config, std::vector<mad::LocalPort> ports) {
    return std::make_unique<PortsCollector>(
        io_, [f = fabric_] { return f; }, config, std::make_shared<const NodeNameMap>(),
        [ports] { return ports; });
  }

  CollectResult collect(Collector& c) { return test_support::collect_on(io_, c); }
  MetricFamilies run(Collector& c) { return test_support::metrics_on(io_, c); }

  boost::asio::io_context io_;
  std::shared_ptr<FakeFabric> fabric_;
};

Labels side(const char* s) { return {{"device", "mlx5_0"}, {"port", "1"}, {"side", s}}; }
Labels with(Labels l, const std::string& name, const std::string& v) {
  l.emplace_back(name, v);
  return l;
}

std::optional<double> saturated(const MetricFamilies& m, const char* s, const char* counter) {
  return value(m, "ibfabric_ports_counters_saturated", with(side(s), "counter", counter));
}

TEST_F(PortsRunTest, BothSidesPortInfoAndIdentity) {
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_ports_state", side("local")), 4);
  EXPECT_EQ(value(m, "ibfabric_ports_physical_state", side("local")), 5);
  EXPECT_EQ(value(m, "ibfabric_ports_lid", side("local")), kLidA);
  EXPECT_EQ(value(m, "ibfabric_ports_sm_lid", side("local")), kSmLid);
  EXPECT_EQ(value(m, "ibfabric_ports_state", side("peer")), 4);
  // A switch peer's LID is its port 0's, which its PMA answers at.
  EXPECT_EQ(value(m, "ibfabric_ports_lid", side("peer")), kLeafLid);
  EXPECT_FALSE(value(m, "ibfabric_ports_sm_lid", side("peer")));
  auto info = test_support::info(m, "ibfabric_ports_info", side("local"));
  EXPECT_EQ(info["state"], "ACTIVE");
  EXPECT_EQ(info["physical_state"], "LinkUp");
  auto peer = test_support::info(m, "ibfabric_ports_peer_info", {{"device", "mlx5_0"}});
  EXPECT_EQ(peer["node_guid"], hex_guid(kHostA));
  EXPECT_EQ(peer["node_name"], "host-a mlx5_0");
  EXPECT_EQ(peer["peer_node_guid"], hex_guid(kLeaf));
  EXPECT_EQ(peer["peer_port"], std::to_string(kLeafPort));
  EXPECT_EQ(peer["peer_node_type"], "switch");
  EXPECT_EQ(peer["peer_node_description"], "leaf-01");
  EXPECT_EQ(peer["peer_node_name"], "leaf-01");
  EXPECT_TRUE(samples(m, "ibfabric_ports_query_errors_total").empty());
  EXPECT_TRUE(samples(m, "ibfabric_ports_stale_seconds").empty());
  // The PMA of each side asked at its LID, for its own port.
  EXPECT_EQ(fabric_->count_asked(IB_GSI_PORT_COUNTERS, kHostA), 1u);
  EXPECT_EQ(fabric_->count_asked(IB_GSI_PORT_COUNTERS, kLeaf), 1u);
}

// A PMA without PortCountersExtended (capability mask 0): everything from the 32-bit
// PortCounters, each value with its saturation flag.
TEST_F(PortsRunTest, CountersFromPortCountersCarryTheirSaturation) {
  fabric_->pma_counter(kHostA, 1, IB_GSI_PORT_COUNTERS, IB_PC_XMT_BYTES_F, 0xffffffffu);
  fabric_->pma_counter(kHostA, 1, IB_GSI_PORT_COUNTERS, IB_PC_ERR_RCV_F, 12);
  fabric_->pma_counter(kHostA, 1, IB_GSI_PORT_COUNTERS, IB_PC_ERR_SYM_F, 0xffff);
  fabric_->pma_counter(kLeaf, kLeafPort, IB_GSI_PORT_COUNTERS, IB_PC_LINK_DOWNED_F, 3);
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_ports_pma_capability_mask", side("local")), 0);
  EXPECT_EQ(value(m, "ibfabric_ports_transmit_bytes_total", side("local")), 4.0 * 0xffffffffu);
  EXPECT_EQ(saturated(m, "local", "PortXmitData"), 1);
  EXPECT_EQ(value(m, "ibfabric_ports_receive_errors_total", side("local")), 12);
  EXPECT_EQ(saturated(m, "local", "PortRcvErrors"), 0);
  EXPECT_EQ(value(m, "ibfabric_ports_symbol_errors_total", side("local")), 0xffff);
  EXPECT_EQ(saturated(m, "local", "SymbolErrorCounter"), 1);  // a 16-bit field
  EXPECT_EQ(value(m, "ibfabric_ports_link_downed_total", side("peer")), 3);
  EXPECT_EQ(value(m, "ibfabric_ports_link_downed_total", side("local")), 0);
  EXPECT_EQ(saturated(m, "peer", "LinkDownedCounter"), 0);
  // Without mask bit 9 there are no unicast/multicast counters, nor PortCountersExtended reads.
  EXPECT_FALSE(value(m, "ibfabric_ports_unicast_transmit_packets_total", side("local")));
  EXPECT_EQ(fabric_->count_asked(IB_GSI_PORT_COUNTERS_EXT), 0u);
}

// Each side's PortXmitWait tick, from its device's NodeInfo: a Quantum-2 leaf's is known (8 bytes
// of the port), a ConnectX-7's only from the configuration; the local CA's NodeInfo is asked
// once, the peer's with every run (it is how the far end is found).
TEST_F(PortsRunTest, EachSidesPortXmitWaitTickComesFromItsDevice) {
  fabric_->add({kLeaf, IB_NODE_SWITCH, 8, "leaf-01", kLeafLid, 0x0002c9, 0xd2f2});
  fabric_->add({kHostA, IB_NODE_CA, 1, "host-a mlx5_0", kLidA, 0x0002c9, 0x1021});
  fabric_->pma_capabilities(kLeaf, mad::kPmXmitWaitSupported);
  fabric_->pma_capabilities(kHostA, mad::kPmXmitWaitSupported);
  fabric_->pma_counter(kLeaf, kLeafPort, IB_GSI_PORT_COUNTERS, IB_PC_XMT_WAIT_F, 1000);
  auto tick = [](const MetricFamilies& m, const char* s, const char* per) {
    return value(m, "ibfabric_ports_transmit_wait_tick_bytes", with(side(s), "per", per));
  };
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_ports_transmit_wait_ticks_total", side("peer")), 1000);
  EXPECT_EQ(tick(m, "peer", "port"), 8);
  EXPECT_TRUE(value(m, "ibfabric_ports_transmit_wait_ticks_total", side("local")));
  EXPECT_TRUE(samples(m, "ibfabric_ports_transmit_wait_tick_bytes").size() == 1)
      << "no tick for the ConnectX-7: no public source gives it";
  run(*c);
  EXPECT_EQ(fabric_->count_asked(IB_ATTR_NODE_INFO, kHostA), 1u);
  EXPECT_EQ(fabric_->count_asked(IB_ATTR_NODE_INFO, kLeaf), 2u);

  PortsConfig config;
  config.transmit_wait_ticks = {{0x0002c9, 0x1021, 32, true}, {0x0002c9, 0xd2f2, 16, false}};
  auto configured = collector(config);
  m = run(*configured);
  EXPECT_EQ(tick(m, "local", "lane"), 32);
  EXPECT_EQ(tick(m, "peer", "port"), 16) << "the configuration wins over the built-in table";
  // No XmitWait counter (capability bit 12 clear), no tick.
  fabric_->pma_capabilities(kLeaf, 0);
  m = run(*configured);
  EXPECT_FALSE(tick(m, "peer", "port"));
}

// Mask bit 9: data counters from the 64-bit PortCountersExtended (no saturation flag), error
// counters still from PortCounters; with CapabilityMask2 bit 1 the errors are extended too.
TEST_F(PortsRunTest, CountersFromPortCountersExtendedByCapabilityMask) {
  fabric_->pma_capabilities(kLeaf, mad::kPmExtWidthSupported);
  fabric_->pma_capabilities(kHostA, mad::kPmExtWidthSupported, mad::kPm2AdditionalExtCounters);
  constexpr std::uint64_t kWords = 5'000'000'000ull;  // past 32 bits
  fabric_->pma_counter(kLeaf, kLeafPort, IB_GSI_PORT_COUNTERS_EXT, IB_PC_EXT_XMT_BYTES_F, kWords);
  fabric_->pma_counter(kLeaf, kLeafPort, IB_GSI_PORT_COUNTERS, IB_PC_XMT_BYTES_F, 7);
  fabric_->pma_counter(kLeaf, kLeafPort, IB_GSI_PORT_COUNTERS, IB_PC_ERR_SYM_F, 9);
  fabric_->pma_counter(kLeaf, kLeafPort, IB_GSI_PORT_COUNTERS_EXT, IB_PC_EXT_XMT_UPKTS_F, 11);
  fabric_->pma_counter(kHostA, 1, IB_GSI_PORT_COUNTERS_EXT, IB_PC_EXT_ERR_SYM_F, 70000);
  fabric_->pma_counter(kHostA, 1, IB_GSI_PORT_COUNTERS, IB_PC_ERR_SYM_F, 5);
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_ports_pma_capability_mask", side("peer")), 0x200);
  EXPECT_EQ(value(m, "ibfabric_ports_transmit_bytes_total", side("peer")), 4.0 * kWords);
  EXPECT_FALSE(saturated(m, "peer", "PortXmitData"));
  EXPECT_EQ(value(m, "ibfabric_ports_unicast_transmit_packets_total", side("peer")), 11);
  EXPECT_EQ(value(m, "ibfabric_ports_symbol_errors_total", side("peer")), 9);
  EXPECT_EQ(saturated(m, "peer", "SymbolErrorCounter"), 0);
  // Errors in the extended set: 64-bit, no PortCounters read at all.
  EXPECT_EQ(value(m, "ibfabric_ports_symbol_errors_total", side("local")), 70000);
  EXPECT_TRUE(samples(m, "ibfabric_ports_counters_saturated", side("local")).empty());
  EXPECT_EQ(fabric_->count_asked(IB_GSI_PORT_COUNTERS, kHostA), 0u);
}

// PortRcvErrorDetails and PortXmitDiscardDetails of both ends (error_details: true), for each
// end's own port.
TEST_F(PortsRunTest, ErrorDetailsOfBothEnds) {
  fabric_->pma_counter(kHostA, 1, IB_GSI_PORT_RCV_ERROR_DETAILS, IB_PC_RCV_LOCAL_PHY_ERR_F, 4);
  fabric_->pma_counter(kLeaf, kLeafPort, IB_GSI_PORT_XMIT_DISCARD_DETAILS, IB_PC_XMT_INACT_DISC_F,
                       2);
  fabric_->pma_counter(kLeaf, kLeafPort + 1, IB_GSI_PORT_XMIT_DISCARD_DETAILS,
                       IB_PC_XMT_INACT_DISC_F, 99);  // another port of the switch
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_ports_receive_local_physical_errors_total", side("local")), 4);
  EXPECT_EQ(value(m, "ibfabric_ports_transmit_inactive_discards_total", side("peer")), 2);
  EXPECT_EQ(value(m, "ibfabric_ports_transmit_inactive_discards_total", side("local")), 0);

  PortsConfig config;
  config.error_details = false;
  auto without = collector(config);
  m = run(*without);
  EXPECT_FALSE(value(m, "ibfabric_ports_receive_local_physical_errors_total", side("local")));
}

// A peer that stops answering keeps its last values for keep_unread, with their age; the
// failed queries are counted.
TEST_F(PortsRunTest, APeerThatStopsAnsweringKeepsItsValuesForKeepUnread) {
  fabric_->pma_counter(kLeaf, kLeafPort, IB_GSI_PORT_COUNTERS, IB_PC_ERR_SYM_F, 9);
  PortsConfig config;
  config.keep_unread = 1h;
  auto c = collector(config);
  const auto first_read = std::chrono::steady_clock::now();
  run(*c);
  fabric_->silence(kLeaf);
  auto m = run(*c);
  const double since_first_read =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - first_read).count();
  EXPECT_EQ(value(m, "ibfabric_ports_state", side("peer")), 4);
  EXPECT_EQ(value(m, "ibfabric_ports_lid", side("peer")), kLeafLid);
  EXPECT_EQ(value(m, "ibfabric_ports_symbol_errors_total", side("peer")), 9);
  auto stale = value(m, "ibfabric_ports_stale_seconds", side("peer"));
  ASSERT_TRUE(stale);
  // The time since the first run read it: after that run began, before now.
  EXPECT_GT(*stale, 0);
  EXPECT_LE(*stale, since_first_read);
  EXPECT_FALSE(value(m, "ibfabric_ports_stale_seconds", side("local")));
  EXPECT_EQ(
      value(m, "ibfabric_ports_query_errors_total", with(side("peer"), "attribute", "node_info")),
      1);
  // It answers again: current values, no age.
  fabric_->silence(kLeaf, false);
  fabric_->pma_counter(kLeaf, kLeafPort, IB_GSI_PORT_COUNTERS, IB_PC_ERR_SYM_F, 10);
  m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_ports_symbol_errors_total", side("peer")), 10);
  EXPECT_FALSE(value(m, "ibfabric_ports_stale_seconds", side("peer")));
}

// Past keep_unread the values go (the far end stays named: link memory).
TEST_F(PortsRunTest, PastKeepUnreadALostSidesValuesGo) {
  PortsConfig config;
  config.keep_unread = 1ns;
  auto c = collector(config);
  run(*c);
  fabric_->silence(kLeaf);
  auto m = run(*c);
  EXPECT_FALSE(value(m, "ibfabric_ports_state", side("peer")));
  EXPECT_FALSE(value(m, "ibfabric_ports_symbol_errors_total", side("peer")));
  EXPECT_FALSE(value(m, "ibfabric_ports_stale_seconds", side("peer")));
  EXPECT_EQ(value(m, "ibfabric_ports_state", side("local")), 4);
  EXPECT_EQ(samples(m, "ibfabric_ports_peer_info").size(), 1u);
}

// The link goes down: the peer is not asked and its series go, but who was at the far end is
// still named for link_memory.
TEST_F(PortsRunTest, TheFarEndIsNamedAfterTheLinkGoesDown) {
  for (auto memory : {std::chrono::nanoseconds(24h), std::chrono::nanoseconds(1ns)}) {
    SCOPED_TRACE(memory == 1ns ? "link_memory 1ns" : "link_memory 24h");
    fabric_->cable(kHostA, 1, kLeaf, kLeafPort);
    PortsConfig config;
    config.link_memory = memory;
    auto c = collector(config);
    run(*c);
    fabric_->unplug(kHostA, 1);
    auto asked = fabric_->count_asked(IB_ATTR_NODE_INFO);
    auto m = run(*c);
    EXPECT_EQ(value(m, "ibfabric_ports_physical_state", side("local")), 2);  // Polling
    EXPECT_EQ(value(m, "ibfabric_ports_state", side("local")), 1);           // Down
    EXPECT_FALSE(value(m, "ibfabric_ports_state", side("peer")));
    EXPECT_EQ(fabric_->count_asked(IB_ATTR_NODE_INFO), asked) << "the peer was asked";
    auto peers = samples(m, "ibfabric_ports_peer_info");
    if (memory == 1ns) {
      EXPECT_TRUE(peers.empty());
      continue;
    }
    ASSERT_EQ(peers.size(), 1u);
    auto peer = test_support::label_map(*peers[0]);
    EXPECT_EQ(peer["peer_node_guid"], hex_guid(kLeaf));
    EXPECT_EQ(peer["peer_port"], std::to_string(kLeafPort));
    EXPECT_EQ(peer["peer_node_description"], "leaf-01");
  }
}

// No query answered at all (the local port is gone): the run fails, with no port series.
TEST_F(PortsRunTest, NoAnswerAtAllFailsTheRun) {
  fabric_->silence(kHostA);
  auto c = collector();
  auto r = collect(*c);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.error, "no local port answered its mad::PortInfo query");
  EXPECT_FALSE(value(r.metrics, "ibfabric_ports_state", side("local")));
  EXPECT_EQ(value(r.metrics, "ibfabric_ports_query_errors_total",
                  with(side("local"), "attribute", "port_info")),
            1);
}

// No InfiniBand port (a RoCE-only or IB-less node): nothing to collect, and no failure.
TEST_F(PortsRunTest, NoInfinibandPortIsNothingToCollectNotAFailure) {
  auto c = collector({}, {});
  auto r = collect(*c);
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_TRUE(samples(r.metrics, "ibfabric_ports_state").empty());
  EXPECT_TRUE(fabric_->requests().empty());
}

// peers: false: the local port only; the far end is neither asked nor named.
TEST_F(PortsRunTest, WithoutPeersOnlyTheLocalPortIsAsked) {
  PortsConfig config;
  config.peers = false;
  auto c = collector(config);
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_ports_state", side("local")), 4);
  EXPECT_FALSE(value(m, "ibfabric_ports_state", side("peer")));
  EXPECT_TRUE(samples(m, "ibfabric_ports_peer_info").empty());
  ASSERT_FALSE(fabric_->asked.empty());
  for (const auto& a : fabric_->asked) {
    EXPECT_EQ(a.node, kHostA) << "attribute 0x" << std::hex << a.attr_id << " asked of a peer";
  }
  EXPECT_EQ(fabric_->count_asked(IB_GSI_PORT_COUNTERS, kHostA), 1u);
}

// The local PortInfo lost in one run: the port is read as it was last read (within
// keep_unread): its counters and its peer are still asked, the run does not fail, and the
// PortInfo's values carry their age. Past keep_unread nothing goes on from it.
TEST_F(PortsRunTest, ALostLocalPortInfoGoesOnAsLastRead) {
  const auto local_port_info = FakeFabric::smp(IB_ATTR_PORT_INFO);
  for (auto keep : {std::chrono::nanoseconds(1h), std::chrono::nanoseconds(1ns)}) {
    SCOPED_TRACE(keep == 1ns ? "keep_unread 1ns" : "keep_unread 1h");
    fabric_->lose(kHostA, 0, 1, local_port_info);
    PortsConfig config;
    config.keep_unread = keep;
    auto c = collector(config);
    run(*c);
    fabric_->lose(kHostA, 100, 1, local_port_info);
    const auto counters = fabric_->count_asked(IB_GSI_PORT_COUNTERS, kHostA);
    const auto peer = fabric_->count_asked(IB_ATTR_NODE_INFO, kLeaf);
    auto r = collect(*c);
    EXPECT_TRUE(r.success) << r.error;  // other answers came: a lossy fabric, not a failed source
    EXPECT_EQ(value(r.metrics, "ibfabric_ports_query_errors_total",
                    with(side("local"), "attribute", "port_info")),
              1);
    if (keep == 1ns) {
      EXPECT_FALSE(value(r.metrics, "ibfabric_ports_state", side("local")));
      EXPECT_EQ(fabric_->count_asked(IB_GSI_PORT_COUNTERS, kHostA), counters);
      EXPECT_EQ(fabric_->count_asked(IB_ATTR_NODE_INFO, kLeaf), peer);
      continue;
    }
    EXPECT_EQ(value(r.metrics, "ibfabric_ports_state", side("local")), 4);
    EXPECT_EQ(value(r.metrics, "ibfabric_ports_lid", side("local")), kLidA);
    EXPECT_TRUE(value(r.metrics, "ibfabric_ports_stale_seconds", side("local")));
    EXPECT_EQ(fabric_->count_asked(IB_GSI_PORT_COUNTERS, kHostA), counters + 1);
    EXPECT_EQ(fabric_->count_asked(IB_ATTR_NODE_INFO, kLeaf), peer + 1);
    EXPECT_EQ(value(r.metrics, "ibfabric_ports_state", side("peer")), 4);
    EXPECT_EQ(samples(r.metrics, "ibfabric_ports_peer_info").size(), 1u);
  }
}

// A host cabled straight to another host (no switch): the peer's PMA is asked at the LID of
// the peer's own port, and no switch port 0 is asked.
TEST_F(PortsRunTest, AHostAtTheFarEndIsAskedAtItsOwnPortsLid) {
  constexpr std::uint64_t kHostB = 0x0002c90300000b00ull;
  constexpr std::uint16_t kLidB = 3;
  fabric_->add({kHostB, IB_NODE_CA, 1, "host-b mlx5_0", kLidB});
  fabric_->unplug(kHostA, 1);
  fabric_->cable(kHostA, 1, kHostB, 1);
  fabric_->pma_counter(kHostB, 1, IB_GSI_PORT_COUNTERS, IB_PC_ERR_SYM_F, 7);
  auto c = collector();
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_ports_lid", side("peer")), kLidB);
  EXPECT_EQ(value(m, "ibfabric_ports_symbol_errors_total", side("peer")), 7);
  EXPECT_EQ(fabric_->count_asked(IB_GSI_PORT_COUNTERS, kHostB), 1u);
  EXPECT_EQ(fabric_->count_asked(IB_GSI_PORT_COUNTERS, kLeaf), 0u);
  auto peer = test_support::info(m, "ibfabric_ports_peer_info", {{"device", "mlx5_0"}});
  EXPECT_EQ(peer["peer_node_type"], "CA");
  EXPECT_EQ(peer["peer_node_guid"], hex_guid(kHostB));
  EXPECT_EQ(peer["peer_port"], "1");
  for (const auto& sent : fabric_->requests()) {
    EXPECT_FALSE(sent.attribute == IB_ATTR_PORT_INFO && sent.port == 0)
        << "a port 0 PortInfo was asked of " << sent.destination;
  }
}

// Re-cabled to another switch: the new far end is named at once, the old one not beside it.
TEST_F(PortsRunTest, ANewFarEndReplacesTheOld) {
  constexpr std::uint64_t kLeaf2 = 0x0002c90200400002ull;
  fabric_->add({kLeaf2, IB_NODE_SWITCH, 8, "leaf-02", 4});
  auto c = collector();
  run(*c);
  fabric_->unplug(kHostA, 1);
  fabric_->cable(kHostA, 1, kLeaf2, 3);
  auto m = run(*c);
  auto peers = samples(m, "ibfabric_ports_peer_info");
  ASSERT_EQ(peers.size(), 1u);
  auto peer = test_support::label_map(*peers[0]);
  EXPECT_EQ(peer["peer_node_guid"], hex_guid(kLeaf2));
  EXPECT_EQ(peer["peer_port"], "3");
  EXPECT_EQ(peer["peer_node_name"], "leaf-02");
  EXPECT_EQ(value(m, "ibfabric_ports_lid", side("peer")), 4);
}

// The far end's NodeDescription lost: the name last read of the same node stays (a lost MAD
// must not rename the far end and change its series' labels).
TEST_F(PortsRunTest, ALostNodeDescriptionOfTheFarEndKeepsItsName) {
  auto c = collector();
  run(*c);
  fabric_->lose(kLeaf, 100, std::nullopt, FakeFabric::smp(IB_ATTR_NODE_DESC));
  auto m = run(*c);
  EXPECT_EQ(value(m, "ibfabric_ports_query_errors_total",
                  with(side("peer"), "attribute", "node_description")),
            1);
  auto peer = test_support::info(m, "ibfabric_ports_peer_info", {{"device", "mlx5_0"}});
  EXPECT_EQ(peer["peer_node_description"], "leaf-01");
  EXPECT_EQ(peer["peer_node_name"], "leaf-01");
  EXPECT_EQ(peer["peer_port"], std::to_string(kLeafPort));
}

}  // namespace
}  // namespace ibfabric::ports
