// The fabric collector's sweep (collectors/fabric/sweep_run.*) on a fat tree simulated at the
// MAD engine (fake_fabric.h), whose switch PMAs answer with the capabilities and counters a test
// sets, lose what a test says, and count the requests in flight per destination. Documented
// behaviour: docs/collectors.md, "Collector `fabric`" ("The series budget", "Sweep") and
// docs/design.md ("Memory of the fabric sweep", "A lossy fabric is not a down fabric").

#include "fabric_test_support.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

namespace ibfabric::fabric_test {
namespace {

using fabric::FabricConfig;

constexpr std::uint16_t kExtended = mad::kPmExtWidthSupported;  // PortCountersExtended, all

class FabricSweep : public ::testing::Test {
 protected:
  void TearDown() override { settle(io_); }
  // Every switch's PMA answers ClassPortInfo with `mask` (and `mask2`).
  static void capabilities(const FatTree& tree, std::uint16_t mask, std::uint32_t mask2 = 0) {
    for (Guid sw : tree.switches()) tree.fabric->pma_capabilities(sw, mask, mask2);
  }
  // PortXmitData (in 4-octet words) of a port in PortCountersExtended.
  static void extended_data(const FatTree& tree, Guid sw, int port, std::uint64_t words) {
    tree.fabric->pma_counter(sw, port, IB_GSI_PORT_COUNTERS_EXT, IB_PC_EXT_XMT_BYTES_F, words);
  }
  boost::asio::io_context io_;
};

// Every port of every switch, its counters from the attribute its PMA's capabilities name
// (PortCounters; PortCountersExtended for the data counters with bit 9 or 10; the error counters
// too with CapabilityMask2 bit 1, and then no PortCounters asked), the optional counters only
// when their bit is set, and a 32-bit counter pegged at its maximum flagged.
TEST_F(FabricSweep, EveryPortsCountersComeFromTheAttributeItsPmaNames) {
  FatTree tree(io_, 2, 4, 2);
  struct Pma {
    Guid sw;
    std::uint16_t mask;
    std::uint32_t mask2;
  };
  const std::vector<Pma> pmas{
      {FatTree::spine(0), 0, 0},
      {FatTree::spine(1), kExtended | mad::kPmXmitWaitSupported, 0},
      {FatTree::leaf(0), mad::kPmExtWidthNoIetf | mad::kPmQp1DropSupported,
       mad::kPm2AdditionalExtCounters},
      {FatTree::leaf(1), mad::kPmExtWidthNoIetf | mad::kPmQp1DropSupported,
       mad::kPm2AdditionalExtCounters},
      // leaves 3 and 4 answer ClassPortInfo with zeros: PortCounters only
  };
  for (const auto& pma : pmas) tree.fabric->pma_capabilities(pma.sw, pma.mask, pma.mask2);
  auto switches = tree.switches();
  for (std::size_t i = 0; i < switches.size(); ++i) {
    Guid sw = switches[i];
    for (int p = 1; p <= tree.ports_of(sw); ++p) {
      auto n = static_cast<std::uint32_t>(100 * i + p);  // a value of its own per port
      auto& f = *tree.fabric;
      f.pma_counter(sw, p, IB_GSI_PORT_COUNTERS, IB_PC_ERR_SYM_F, n);
      f.pma_counter(sw, p, IB_GSI_PORT_COUNTERS, IB_PC_XMT_BYTES_F, 1000 + n);
      f.pma_counter(sw, p, IB_GSI_PORT_COUNTERS, IB_PC_XMT_WAIT_F, 2000 + n);
      f.pma_counter(sw, p, IB_GSI_PORT_COUNTERS, IB_PC_QP1_DROP_F, 3000 + n);
      f.pma_counter(sw, p, IB_GSI_PORT_COUNTERS_EXT, IB_PC_EXT_ERR_SYM_F, 10000 + n);
      f.pma_counter(sw, p, IB_GSI_PORT_COUNTERS_EXT, IB_PC_EXT_XMT_BYTES_F, (1ull << 40) + n);
      f.pma_counter(sw, p, IB_GSI_PORT_COUNTERS_EXT, IB_PC_EXT_XMT_WAIT_F, 20000 + n);
      f.pma_counter(sw, p, IB_GSI_PORT_COUNTERS_EXT, IB_PC_EXT_QP1_DROP_F, 30000 + n);
      f.pma_counter(sw, p, IB_GSI_PORT_COUNTERS_EXT, IB_PC_EXT_XMT_UPKTS_F, 40000 + n);
    }
  }
  tree.fabric->pma_counter(FatTree::spine(0), 1, IB_GSI_PORT_COUNTERS, IB_PC_XMT_BYTES_F,
                           0xffffffffu);

  auto collector = make_collector(io_, tree);
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  const auto& m = c.metrics;
  EXPECT_EQ(m.value("ibfabric_fabric_ports_swept"), tree.switch_ports());
  EXPECT_EQ(m.value("ibfabric_fabric_ports_failed"), 0);
  for (std::size_t i = 0; i < switches.size(); ++i) {
    Guid sw = switches[i];
    SCOPED_TRACE(hex(sw));
    mad::PmaCapabilities caps;
    for (const auto& pma : pmas) {
      if (pma.sw == sw) caps = {pma.mask, pma.mask2};
    }
    EXPECT_EQ(m.value("ibfabric_fabric_switch_pma_capability_mask", {{"node_guid", hex(sw)}}),
              caps.mask);
    auto lid = "lid " + std::to_string(tree.lid_of(sw));
    auto asked = [&](std::uint16_t attribute) {
      auto all = sent(*tree.fabric, FakeFabric::pma(attribute));
      return std::count_if(all.begin(), all.end(),
                           [&](const auto& r) { return r.destination == lid; });
    };
    EXPECT_EQ(asked(CLASS_PORT_INFO), 1);
    EXPECT_EQ(asked(IB_GSI_PORT_COUNTERS), caps.extended_errors() ? 0 : tree.ports_of(sw));
    EXPECT_EQ(asked(IB_GSI_PORT_COUNTERS_EXT), caps.extended() ? tree.ports_of(sw) : 0);
    for (int p = 1; p <= tree.ports_of(sw); ++p) {
      SCOPED_TRACE("port " + std::to_string(p));
      double n = 100.0 * static_cast<double>(i) + p;
      auto port = [&](const std::string& name) {
        return m.port("ibfabric_fabric_port_" + name, sw, p);
      };
      EXPECT_EQ(port("symbol_errors_total"), caps.extended_errors() ? 10000 + n : n);
      if (caps.extended()) {
        EXPECT_EQ(port("transmit_bytes_total"), 4 * (std::ldexp(1.0, 40) + n));
      } else if (sw == FatTree::spine(0) && p == 1) {
        EXPECT_EQ(port("transmit_bytes_total"), 4.0 * 0xffffffffu);
      } else {
        EXPECT_EQ(port("transmit_bytes_total"), 4 * (1000 + n));
      }
      if (caps.xmit_wait()) {
        EXPECT_EQ(port("transmit_wait_ticks_total"), 2000 + n);
      } else {
        EXPECT_FALSE(port("transmit_wait_ticks_total"));
      }
      if (caps.qp1_dropped()) {
        EXPECT_EQ(port("qp1_dropped_total"), 30000 + n);
      } else {
        EXPECT_FALSE(port("qp1_dropped_total"));
      }
      if (caps.extended_ietf()) {
        EXPECT_EQ(port("unicast_transmit_packets_total"), 40000 + n);
      } else {
        EXPECT_FALSE(port("unicast_transmit_packets_total"));
      }
    }
  }
  auto saturated = m.all("ibfabric_fabric_port_counters_saturated");
  ASSERT_EQ(saturated.size(), 1u);
  EXPECT_EQ(saturated[0].labels["node_guid"], hex(FatTree::spine(0)));
  EXPECT_EQ(saturated[0].labels["port"], "1");
  EXPECT_EQ(saturated[0].labels["counter"], "PortXmitData");
}

// ClassPortInfo is asked once per switch per discovery; the sweep right after a discovery uses
// the PortInfo the discovery read, the next asks every port's by LID.
TEST_F(FabricSweep, ClassPortInfoOncePerDiscoveryPortInfoFromADiscoveryJustRun) {
  FatTree tree(io_, 2, 4, 2);
  capabilities(tree, kExtended);
  FabricConfig config;
  config.rediscover_every = 2;
  auto collector = make_collector(io_, tree, config);
  struct Expect {
    double discoveries;
    std::size_t class_port_infos, port_infos_by_lid;
  };
  const auto switches = static_cast<std::size_t>(tree.switches().size());
  const auto ports = static_cast<std::size_t>(tree.switch_ports());
  for (auto e : {Expect{1, switches, 0}, Expect{1, 0, ports}, Expect{2, switches, 0}}) {
    tree.fabric->clear_requests();
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    SCOPED_TRACE("collection with " + std::to_string(e.discoveries) + " discoveries");
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_discoveries_total"), e.discoveries);
    EXPECT_EQ(sent(*tree.fabric, FakeFabric::pma(CLASS_PORT_INFO)).size(), e.class_port_infos);
    auto port_infos = sent(*tree.fabric, FakeFabric::smp(IB_ATTR_PORT_INFO));
    auto by_lid = std::count_if(port_infos.begin(), port_infos.end(),
                                [](const auto& r) { return r.destination.starts_with("lid"); });
    EXPECT_EQ(static_cast<std::size_t>(by_lid), e.port_infos_by_lid);
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_swept"), tree.switch_ports());
    for (Guid sw : tree.switches()) {
      for (int p = 1; p <= tree.ports_of(sw); ++p) {
        EXPECT_TRUE(c.metrics.port("ibfabric_fabric_port_state", sw, p)) << hex(sw) << " " << p;
      }
    }
  }
}

// The series budget (`counters`) filters what is exported, not what is asked: a list keeps
// only the counters it names (and the PortInfo gauges), errors_and_traffic leaves out the
// unicast and multicast packet counts; the sweep asks the same MADs either way.
TEST_F(FabricSweep, TheSeriesBudgetFiltersWhatIsExportedNotWhatIsAsked) {
  FatTree tree(io_, 1, 2, 2);
  capabilities(tree, kExtended | mad::kPmXmitWaitSupported);
  auto counters_of = [](const Exposition& m) {
    std::set<std::string> out;
    for (const auto& name : m.names()) {
      if (name.starts_with("ibfabric_fabric_port_") && name.ends_with("_total")) {
        out.insert(name.substr(21, name.size() - 21 - 6));
      }
    }
    return out;
  };
  std::set<std::string> every;
  double mads_of_all = 0;
  {
    auto collector = make_collector(io_, tree);
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    every = counters_of(c.metrics);
    mads_of_all = *c.metrics.value("ibfabric_fabric_sweep_mads");
  }
  EXPECT_TRUE(every.count("unicast_transmit_packets")) << "a fabric that shows no budget";
  EXPECT_EQ(every.size(), 21u);  // the 22 but QP1Dropped (its capability bit is not set)

  FabricConfig list;
  list.counters = {"symbol_errors", "transmit_bytes"};
  FabricConfig errors_and_traffic;
  errors_and_traffic.counters = fabric::errors_and_traffic_counters();
  for (const auto& config : {list, errors_and_traffic}) {
    auto collector = make_collector(io_, tree, config);
    tree.fabric->clear_requests();
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    auto exported = counters_of(c.metrics);
    std::set<std::string> expected;
    for (const auto& name : every) {
      if (config.counters.count(name)) expected.insert(name);
    }
    EXPECT_EQ(exported, expected);
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_sweep_mads"), mads_of_all);
    EXPECT_EQ(sent(*tree.fabric, FakeFabric::pma(IB_GSI_PORT_COUNTERS)).size(),
              static_cast<std::size_t>(tree.switch_ports()));
    EXPECT_EQ(sent(*tree.fabric, FakeFabric::pma(IB_GSI_PORT_COUNTERS_EXT)).size(),
              static_cast<std::size_t>(tree.switch_ports()));
    EXPECT_EQ(c.metrics.port("ibfabric_fabric_port_state", FatTree::leaf(0), 1), 4);
  }
  EXPECT_FALSE(errors_and_traffic.counters.count("unicast_transmit_packets"));
  EXPECT_TRUE(errors_and_traffic.counters.count("receive_bytes"));
}

// What one PortXmitWait tick is, per switch, from its NodeInfo VendorID and DeviceID
// (ib/transmit_wait_tick.h) or the configuration; only where XmitWait is read and exported.
TEST_F(FabricSweep, EachSwitchsPortXmitWaitTickComesFromItsDevice) {
  FatTree tree(io_, 2, 2, 1);
  auto& f = *tree.fabric;
  f.add({FatTree::spine(0), IB_NODE_SWITCH, 2, "spine-1", 1, 0x0002c9, 0xd2f2});  // Quantum-2
  f.add({FatTree::spine(1), IB_NODE_SWITCH, 2, "spine-2", 2, 0x0002c9, 0xcf08});  // Switch-IB 2
  f.add({FatTree::leaf(1), IB_NODE_SWITCH, tree.leaf_ports, "leaf-2", 102, 0x0002c9, 0xd2f1});
  capabilities(tree, mad::kPmXmitWaitSupported);
  auto tick = [](const Exposition& m, Guid sw, const char* per) {
    return m.value("ibfabric_fabric_node_transmit_wait_tick_bytes",
                   {{"node_guid", hex(sw)}, {"per", per}});
  };
  FabricConfig config;
  config.transmit_wait_ticks = {{0x0002c9, 0xd2f1, 16, false}};
  {
    auto collector = make_collector(io_, tree, config);
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    EXPECT_EQ(tick(c.metrics, FatTree::spine(0), "port"), 8);
    EXPECT_EQ(tick(c.metrics, FatTree::spine(1), "lane"), 32);
    EXPECT_EQ(tick(c.metrics, FatTree::leaf(1), "port"), 16);
    EXPECT_EQ(c.metrics.all("ibfabric_fabric_node_transmit_wait_tick_bytes").size(), 3u)
        << "leaf-1 (DeviceID 0) has no tick";
  }
  config.counters = {"symbol_errors"};
  {
    auto collector = make_collector(io_, tree, config);
    auto c = collect(io_, *collector);
    EXPECT_TRUE(c.metrics.all("ibfabric_fabric_node_transmit_wait_tick_bytes").empty())
        << "no tick where PortXmitWait is not in the series budget";
  }
  capabilities(tree, 0);
  {
    auto collector = make_collector(io_, tree);
    auto c = collect(io_, *collector);
    EXPECT_TRUE(c.metrics.all("ibfabric_fabric_node_transmit_wait_tick_bytes").empty())
        << "no tick where the PMA has no PortXmitWait";
  }
}

// error_details: PortRcvErrorDetails and PortXmitDiscardDetails of every switch port, as
// counters of their own; a PMA that rejects one costs only its series (counted, the port not
// failed). Off (the default): neither is asked.
TEST_F(FabricSweep, ErrorDetailsAreReadWhenOn) {
  FatTree tree(io_, 1, 2, 1);
  capabilities(tree, kExtended);
  for (Guid sw : tree.switches()) {
    for (int p = 1; p <= tree.ports_of(sw); ++p) {
      tree.fabric->pma_counter(sw, p, IB_GSI_PORT_RCV_ERROR_DETAILS, IB_PC_RCV_LOCAL_PHY_ERR_F,
                               10 + p);
      tree.fabric->pma_counter(sw, p, IB_GSI_PORT_XMIT_DISCARD_DETAILS, IB_PC_XMT_NEIGH_MTU_DISC_F,
                               20 + p);
    }
  }
  tree.fabric->reject_pma(FatTree::leaf(1), IB_GSI_PORT_XMIT_DISCARD_DETAILS);
  {
    auto collector = make_collector(io_, tree);
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success);
    EXPECT_TRUE(sent(*tree.fabric, FakeFabric::pma(IB_GSI_PORT_RCV_ERROR_DETAILS)).empty());
    EXPECT_TRUE(sent(*tree.fabric, FakeFabric::pma(IB_GSI_PORT_XMIT_DISCARD_DETAILS)).empty());
    EXPECT_FALSE(c.metrics.port("ibfabric_fabric_port_receive_local_physical_errors_total",
                                FatTree::leaf(0), 1));
  }
  FabricConfig config;
  config.error_details = true;
  auto collector = make_collector(io_, tree, config);
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  const auto& m = c.metrics;
  EXPECT_EQ(m.value("ibfabric_fabric_ports_failed"), 0);
  EXPECT_EQ(m.value("ibfabric_fabric_query_errors_total",
                    {{"phase", "sweep"}, {"attribute", "port_xmit_discard_details"}}),
            tree.ports_of(FatTree::leaf(1)));
  for (Guid sw : tree.switches()) {
    for (int p = 1; p <= tree.ports_of(sw); ++p) {
      SCOPED_TRACE(hex(sw) + " port " + std::to_string(p));
      EXPECT_EQ(m.port("ibfabric_fabric_port_receive_local_physical_errors_total", sw, p), 10 + p);
      EXPECT_EQ(m.port("ibfabric_fabric_port_receive_looping_errors_total", sw, p), 0);
      auto mtu = m.port("ibfabric_fabric_port_transmit_neighbor_mtu_discards_total", sw, p);
      if (sw == FatTree::leaf(1)) {
        EXPECT_FALSE(mtu);
      } else {
        EXPECT_EQ(mtu, 20 + p);
      }
    }
  }
}

// vl_transmit_wait, off (the default): PortVLXmitWaitCounters is not asked and no per-VL series
// is exported, though the PMA would answer it.
TEST_F(FabricSweep, VlTransmitWaitIsOffByDefault) {
  FatTree tree(io_, 1, 2, 1);
  capabilities(tree, kExtended);
  tree.fabric->oper_vls(FatTree::leaf(0), 4);
  tree.fabric->pma_counter(FatTree::leaf(0), 1, IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS,
                           IB_PC_PORT_VL_XMIT_WAIT0_F, 7);
  auto collector = make_collector(io_, tree);
  for (int sweep = 0; sweep < 2; ++sweep) {
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_swept"), tree.switch_ports());
    EXPECT_TRUE(c.metrics.all("ibfabric_fabric_port_vl_transmit_wait_ticks_total").empty());
  }
  EXPECT_TRUE(sent(*tree.fabric, FakeFabric::pma(IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS)).empty());
  EXPECT_FALSE(sent(*tree.fabric, FakeFabric::pma(IB_GSI_PORT_COUNTERS_EXT)).empty());
}

// PortVLXmitWait<vl> of a port in the fake's PMA.
void vl_wait(const FatTree& tree, Guid sw, int port, int vl, std::uint64_t ticks) {
  tree.fabric->pma_counter(sw, port, IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS,
                           static_cast<MAD_FIELDS>(IB_PC_PORT_VL_XMIT_WAIT0_F + vl), ticks);
}
// Every VL (0..15) of every switch port waited a count of its own: 1000 x port + vl + 1 (so a
// VL that is not exported would show).
void vl_waits(const FatTree& tree) {
  for (Guid sw : tree.switches()) {
    for (int p = 1; p <= tree.ports_of(sw); ++p) {
      for (int vl = 0; vl < 16; ++vl) vl_wait(tree, sw, p, vl, 1000u * p + vl + 1);
    }
  }
}
// The exported VLs of a switch port: vl -> ticks.
std::map<int, double> vl_series(const Exposition& m, Guid sw, int port) {
  std::map<int, double> out;
  for (const auto& s : m.all("ibfabric_fabric_port_vl_transmit_wait_ticks_total",
                             {{"node_guid", hex(sw)}, {"port", std::to_string(port)}})) {
    auto vl = std::stoi(s.labels.at("vl"));
    EXPECT_FALSE(out.count(vl)) << "VL " << vl << " twice";
    out[vl] = s.value;
  }
  return out;
}

// vl_transmit_wait: true: one PortVLXmitWaitCounters Get per switch port (its PortSelect the
// port), and a series for each of the port's operational data VLs, from its PortInfo's
// OperationalVLs (1: VL0, 2: VL0-1, 3: VL0-3, 4: VL0-7, 5: VL0-14; 0: none), in the sweep
// right after a discovery (PortInfo from the discovery) and in the next (PortInfo by LID); a
// value pegged at 0xffff is flagged in counters_saturated, on an exported VL only. A port whose
// OperationalVLs grows after the first sweep of a topology gets its new VLs too.
TEST_F(FabricSweep, VlTransmitWaitExportsEachPortsOperationalVls) {
  FatTree tree(io_, 1, 2, 1);  // leaves of 4 ports: spine, host, 2 empty
  capabilities(tree, kExtended);
  auto& f = *tree.fabric;
  for (Guid sw : tree.switches()) f.oper_vls(sw, 4);  // VL0-7
  const Guid leaf = FatTree::leaf(0);
  f.oper_vls(leaf, 1, 1);              // VL0
  f.oper_vls(leaf, 2, 2);              // VL0-1
  f.oper_vls(leaf, 3, 3);              // VL0-3
  f.oper_vls(leaf, 0, 4);              // not set
  f.oper_vls(FatTree::leaf(1), 5, 2);  // VL0-14
  vl_waits(tree);
  vl_wait(tree, leaf, 2, 1, 0xffff);               // pegged, exported
  vl_wait(tree, leaf, 1, 5, 0xffff);               // pegged, but VL 5 is not leaf port 1's
  vl_wait(tree, FatTree::leaf(1), 2, 14, 0xffff);  // pegged, VL 14 of a 15-VL port
  std::map<std::pair<Guid, int>, int> vls;         // (switch, port) -> data VLs
  for (Guid sw : tree.switches()) {
    for (int p = 1; p <= tree.ports_of(sw); ++p) vls[{sw, p}] = 8;
  }
  vls[{leaf, 1}] = 1;
  vls[{leaf, 2}] = 2;
  vls[{leaf, 3}] = 4;
  vls[{leaf, 4}] = 0;
  vls[{FatTree::leaf(1), 2}] = 15;

  FabricConfig config;
  config.vl_transmit_wait = true;
  auto collector = make_collector(io_, tree, config);
  for (const char* sweep : {"after a discovery", "PortInfo by LID"}) {
    SCOPED_TRACE(sweep);
    tree.fabric->clear_requests();
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    const auto& m = c.metrics;
    EXPECT_EQ(m.value("ibfabric_fabric_ports_swept"), tree.switch_ports());
    EXPECT_EQ(m.value("ibfabric_fabric_ports_failed"), 0);
    auto asked = sent(f, FakeFabric::pma(IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS));
    EXPECT_EQ(asked.size(), static_cast<std::size_t>(tree.switch_ports()));
    std::set<std::pair<std::string, int>> selected;
    for (const auto& r : asked) selected.insert({r.destination, r.port});
    EXPECT_EQ(selected.size(), asked.size()) << "a port asked twice, or with the wrong PortSelect";
    std::size_t series = 0;
    for (const auto& [end, n] : vls) {
      SCOPED_TRACE(hex(end.first) + " port " + std::to_string(end.second));
      std::map<int, double> want;
      for (int vl = 0; vl < n; ++vl) want[vl] = 1000.0 * end.second + vl + 1;
      if (end == std::pair{leaf, 2}) want[1] = 0xffff;
      if (end == std::pair{FatTree::leaf(1), 2}) want[14] = 0xffff;
      EXPECT_EQ(vl_series(m, end.first, end.second), want);
      series += want.size();
    }
    EXPECT_EQ(m.all("ibfabric_fabric_port_vl_transmit_wait_ticks_total").size(), series);
    // A per-VL series has no label set of its own: it points to its port's, the one the port's
    // other series share, and carries its VL as a number (MetricFamily::number_label), so that
    // it costs what the port's other series cost.
    std::set<const LabelSet*> port_sets;
    for (const auto& family : c.result.metrics) {
      if (family.name != "ibfabric_fabric_port_transmit_bytes_total") continue;
      for (const auto& s : family.samples) port_sets.insert(s.labels);
    }
    EXPECT_EQ(port_sets.size(), static_cast<std::size_t>(tree.switch_ports()));
    for (const auto& family : c.result.metrics) {
      if (family.name != "ibfabric_fabric_port_vl_transmit_wait_ticks_total") continue;
      EXPECT_EQ(family.number_label, "vl");
      ASSERT_EQ(family.numbers.size(), family.samples.size());
      for (const auto& s : family.samples) EXPECT_TRUE(port_sets.contains(s.labels));
    }
    auto saturated = m.all("ibfabric_fabric_port_counters_saturated");
    std::set<std::tuple<std::string, std::string, std::string>> flagged;
    for (auto& s : saturated) {
      flagged.insert({s.labels["node_guid"], s.labels["port"], s.labels["counter"]});
      EXPECT_EQ(s.value, 1);
    }
    EXPECT_EQ(flagged, (std::set<std::tuple<std::string, std::string, std::string>>{
                           {hex(leaf), "2", "PortVLXmitWait1"},
                           {hex(FatTree::leaf(1)), "2", "PortVLXmitWait14"}}));
    EXPECT_EQ(saturated.size(), 2u);
  }
  f.oper_vls(leaf, 4, 1);  // VL0-7 now: VLs the label cache has no set for
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  std::map<int, double> want;
  for (int vl = 0; vl < 8; ++vl) want[vl] = 1000.0 + vl + 1;
  want[5] = 0xffff;
  EXPECT_EQ(vl_series(c.metrics, leaf, 1), want);
  EXPECT_TRUE(
      c.metrics.value("ibfabric_fabric_port_counters_saturated",
                      {{"node_guid", hex(leaf)}, {"port", "1"}, {"counter", "PortVLXmitWait5"}}));
}

// A PMA that rejects PortVLXmitWaitCounters (MAD status) costs only the per-VL series of its
// ports: counted under attribute "port_vl_xmit_wait_counters", the ports not failed, every
// other series of theirs there; the other switches' per-VL series are there too.
TEST_F(FabricSweep, ARejectedVlXmitWaitCostsOnlyItsSeries) {
  FatTree tree(io_, 1, 2, 1);
  capabilities(tree, kExtended);
  for (Guid sw : tree.switches()) tree.fabric->oper_vls(sw, 2);
  vl_waits(tree);
  const Guid rejecting = FatTree::leaf(1);
  tree.fabric->reject_pma(rejecting, IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS);
  FabricConfig config;
  config.vl_transmit_wait = true;
  auto collector = make_collector(io_, tree, config);
  for (int sweep = 1; sweep <= 2; ++sweep) {
    SCOPED_TRACE("sweep " + std::to_string(sweep));
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    const auto& m = c.metrics;
    EXPECT_EQ(m.value("ibfabric_fabric_ports_failed"), 0);
    EXPECT_EQ(m.value("ibfabric_fabric_ports_swept"), tree.switch_ports());
    EXPECT_EQ(m.value("ibfabric_fabric_ports_stale"), 0);
    EXPECT_EQ(m.value("ibfabric_fabric_query_errors_total",
                      {{"phase", "sweep"}, {"attribute", "port_vl_xmit_wait_counters"}}),
              sweep * tree.ports_of(rejecting));
    for (Guid sw : tree.switches()) {
      for (int p = 1; p <= tree.ports_of(sw); ++p) {
        SCOPED_TRACE(hex(sw) + " port " + std::to_string(p));
        EXPECT_EQ(vl_series(m, sw, p).size(), sw == rejecting ? 0u : 2u);
        EXPECT_TRUE(m.port("ibfabric_fabric_port_state", sw, p));
        EXPECT_TRUE(m.port("ibfabric_fabric_port_transmit_bytes_total", sw, p));
        EXPECT_FALSE(m.port("ibfabric_fabric_port_stale_seconds", sw, p));
      }
    }
  }
}

// A lost PortVLXmitWaitCounters query is a lost part of the port (keep_unread): the port is
// failed and stale, its per-VL series keep the values last read, with their age, the timeout is
// counted for its switch, and its other series are current; once it answers, it is current
// again. Past keep_unread (here shorter than a sweep) the per-VL series go, the rest stays.
TEST_F(FabricSweep, ALostVlXmitWaitKeepsItsLastValuesWithinKeepUnread) {
  const Guid leaf = FatTree::leaf(0);
  for (auto keep :
       {std::chrono::nanoseconds{std::chrono::minutes(10)}, std::chrono::nanoseconds{1}}) {
    SCOPED_TRACE("keep_unread " + std::to_string(keep.count()) + "ns");
    FatTree tree(io_, 1, 2, 2);
    capabilities(tree, kExtended);
    for (Guid sw : tree.switches()) tree.fabric->oper_vls(sw, 2);
    vl_waits(tree);
    FabricConfig config;
    config.vl_transmit_wait = true;
    config.keep_unread = keep;
    auto collector = make_collector(io_, tree, config);
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    const std::map<int, double> first{{0, 3001}, {1, 3002}};
    EXPECT_EQ(vl_series(c.metrics, leaf, 3), first);

    vl_wait(tree, leaf, 3, 0, 5);
    vl_wait(tree, leaf, 2, 0, 6);
    extended_data(tree, leaf, 3, 77);
    tree.fabric->lose(leaf, 100, 3, FakeFabric::pma(IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS));
    c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    const auto& m = c.metrics;
    EXPECT_EQ(m.value("ibfabric_fabric_ports_failed"), 1);
    EXPECT_EQ(m.value("ibfabric_fabric_query_errors_total",
                      {{"phase", "sweep"}, {"attribute", "port_vl_xmit_wait_counters"}}),
              1);
    EXPECT_EQ(m.value("ibfabric_fabric_switch_timeouts_total", {{"node_guid", hex(leaf)}}), 1);
    EXPECT_EQ(m.port("ibfabric_fabric_port_transmit_bytes_total", leaf, 3), 4 * 77);
    EXPECT_EQ(vl_series(m, leaf, 2), (std::map<int, double>{{0, 6}, {1, 2002}}));
    if (keep.count() > 1) {
      EXPECT_EQ(vl_series(m, leaf, 3), first);
      EXPECT_TRUE(m.port("ibfabric_fabric_port_stale_seconds", leaf, 3));
      EXPECT_EQ(m.all("ibfabric_fabric_port_stale_seconds").size(), 1u);
      EXPECT_EQ(m.value("ibfabric_fabric_ports_stale"), 1);
    } else {
      EXPECT_TRUE(vl_series(m, leaf, 3).empty());
      EXPECT_TRUE(m.all("ibfabric_fabric_port_stale_seconds").empty());
      EXPECT_EQ(m.value("ibfabric_fabric_ports_stale"), 0);
    }
    EXPECT_EQ(m.port("ibfabric_fabric_port_state", leaf, 3), 4);

    tree.fabric->lose(leaf, 0, 3, FakeFabric::pma(IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS));
    c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    EXPECT_EQ(vl_series(c.metrics, leaf, 3), (std::map<int, double>{{0, 5}, {1, 3002}}));
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_failed"), 0);
    EXPECT_TRUE(c.metrics.all("ibfabric_fabric_port_stale_seconds").empty());
  }
}

// A large result is compressed part by part while the sweep goes on (FabricConfig::
// seal_samples; docs/design.md, "Memory of the fabric sweep"): here after every switch, each
// family with samples. The exposition is the one the samples give, line for line, after a
// discovery and in a steady sweep, per-VL sets (which extend the port's) and error details
// included, and each compressed family is one valid gzip text (its parts' CRC-32 combined).
TEST_F(FabricSweep, AResultCompressedPartByPartReadsAsItsSamples) {
  FatTree tree(io_, 2, 4, 2);
  capabilities(tree, kExtended | mad::kPmXmitWaitSupported);
  for (Guid sw : tree.switches()) tree.fabric->oper_vls(sw, 4);  // VL0-7
  vl_waits(tree);
  for (Guid sw : tree.switches()) {
    for (int p = 1; p <= tree.ports_of(sw); ++p) extended_data(tree, sw, p, 1000u * p + sw % 97);
  }
  FabricConfig config;
  config.vl_transmit_wait = true;
  config.error_details = true;
  auto whole = make_collector(io_, tree, config);
  config.seal_samples = 1;
  auto sealed = make_collector(io_, tree, config);
  // Sample lines only, without the values that move between two collections.
  auto lines = [](const Collected& c) {
    std::vector<std::string> out;
    std::istringstream in(c.metrics.text());
    for (std::string line; std::getline(in, line);) {
      if (line.find("duration_seconds") == std::string::npos &&
          line.find("timestamp_seconds") == std::string::npos) {
        out.push_back(line);
      }
    }
    return out;
  };
  for (const char* sweep : {"after a discovery", "steady"}) {
    SCOPED_TRACE(sweep);
    auto a = collect(io_, *whole);
    auto b = collect(io_, *sealed);
    ASSERT_TRUE(a.result.success && b.result.success) << a.result.error << b.result.error;
    EXPECT_EQ(b.metrics.value("ibfabric_fabric_ports_swept"), tree.switch_ports());
    EXPECT_EQ(a.metrics.all("ibfabric_fabric_port_vl_transmit_wait_ticks_total").size(),
              8u * static_cast<std::size_t>(tree.switch_ports()));
    auto want = lines(a);
    auto got = lines(b);
    EXPECT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < want.size() && k < got.size(); ++k) {
      ASSERT_EQ(got[k], want[k]) << "line " << k;
    }
    // The per-port families went as text, and only in the sealed collector's result.
    std::size_t texts = 0;
    for (const auto& family : b.result.metrics) {
      if (!family.name.starts_with("ibfabric_fabric_port_")) continue;
      ASSERT_TRUE(family.text) << family.name;
      EXPECT_TRUE(family.samples.empty()) << family.name;
      ++texts;
      // A gzip member of the text alone: zlib checks its CRC-32 and length.
      std::string gz("\x1f\x8b\x08\0\0\0\0\0\0\xff", 10);
      gz += family.text->deflated;
      gz += std::string("\x03\0", 2);
      for (std::uint64_t v : {std::uint64_t{family.text->crc}, family.text->length}) {
        for (int octet = 0; octet < 4; ++octet) gz += static_cast<char>((v >> (8 * octet)) & 0xff);
      }
      z_stream z{};
      ASSERT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
      z.next_in = reinterpret_cast<Bytef*>(gz.data());
      z.avail_in = static_cast<uInt>(gz.size());
      std::string text(family.text->length + 1, '\0');
      z.next_out = reinterpret_cast<Bytef*>(text.data());
      z.avail_out = static_cast<uInt>(text.size());
      EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END) << family.name << ": " << (z.msg ? z.msg : "");
      EXPECT_EQ(z.total_out, family.text->length) << family.name;
      inflateEnd(&z);
      text.resize(z.total_out);
      EXPECT_EQ(text.rfind("# HELP " + family.name + " ", 0), 0u) << family.name;
      EXPECT_EQ(text.find("# HELP", 1), std::string::npos) << family.name;  // one header
    }
    EXPECT_GE(texts, 20u);
    for (const auto& family : a.result.metrics) {  // the default: no part at this size
      EXPECT_FALSE(family.text && family.name.starts_with("ibfabric_fabric_port_")) << family.name;
    }
  }
}

// A port's label set names its switch and number only, so a rediscovery that finds the same
// switches with as many ports keeps the sets: the snapshot shown and the next sweep share them
// (docs/design.md, "Memory of the fabric sweep"), and the series stay the same. A switch gone
// from the fabric makes new sets.
TEST_F(FabricSweep, ARediscoveryOfTheSameSwitchesKeepsTheirPortsLabelSets) {
  FatTree tree(io_, 2, 3, 2);
  FabricConfig config;
  config.rediscover_every = 1;
  config.link_memory = std::chrono::nanoseconds{1};
  auto collector = make_collector(io_, tree, config);
  // Every port's set in this result's port_state family, by its text.
  auto sets = [](const Collected& c) {
    std::map<std::string, const LabelSet*> out;
    for (const auto& family : c.result.metrics) {
      if (family.name != "ibfabric_fabric_port_state") continue;
      for (const auto& sample : family.samples) out[sample.labels->text()] = sample.labels;
    }
    return out;
  };
  auto first = collect(io_, *collector);
  auto second = collect(io_, *collector);
  ASSERT_TRUE(first.result.success && second.result.success);
  auto before = sets(first);
  ASSERT_EQ(before.size(), static_cast<std::size_t>(tree.switch_ports()));
  EXPECT_EQ(sets(second), before) << "the same sets, not copies";
  // Spine 2 unplugged from every leaf: discovery no longer reaches it.
  for (int l = 0; l < tree.leaves; ++l) tree.fabric->unplug(FatTree::leaf(l), 2);
  auto third = collect(io_, *collector);
  ASSERT_TRUE(third.result.success) << third.result.error;
  auto after = sets(third);
  EXPECT_EQ(after.size(), before.size() - static_cast<std::size_t>(tree.leaves));
  for (const auto& [text, set] : after) {
    ASSERT_TRUE(before.contains(text)) << text;
    EXPECT_NE(set, before.at(text)) << text << ": a set of the last topology's cache";
  }
}

// The query windows (docs/design.md, "Memory of the fabric sweep"; the documented figures, not
// SweepRun's constants), as the engine sees them: at most 16 switches have queries out at once,
// and a switch's next port is asked only while fewer than 12 of its queries are out (a port's
// queries go together, so at most 11 + a port's queries are). On 20 switches of up to 36 ports
// both windows fill.
TEST_F(FabricSweep, QueryWindowsBoundWhatIsOutPerSwitchAndHowManySwitches) {
  FatTree tree(io_, 4, 16, 1, 31);
  ASSERT_EQ(tree.leaf_ports, 36);
  capabilities(tree, kExtended);
  ASSERT_GT(tree.switches().size(), 16u);
  for (int optional : {0, 2, 3}) {
    SCOPED_TRACE(std::to_string(optional) + " optional attributes");
    FabricConfig config;
    config.error_details = optional >= 2;
    config.vl_transmit_wait = optional == 3;
    auto collector = make_collector(io_, tree, config);
    ASSERT_TRUE(collect(io_, *collector).result.success);
    // The second collection: a sweep alone, PortInfo by LID: 3 queries a port (5 with details,
    // 6 with PortVLXmitWaitCounters too).
    tree.fabric->clear_requests();
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_swept"), tree.switch_ports());
    const int per_port = 3 + optional;
    int widest = 0;
    for (Guid sw : tree.switches()) {
      int peak = tree.fabric->peak_in_flight("lid " + std::to_string(tree.lid_of(sw)));
      EXPECT_LE(peak, 11 + per_port) << hex(sw);
      widest = std::max(widest, peak);
    }
    EXPECT_GE(widest, 12) << "the window was never full";
    EXPECT_EQ(tree.fabric->peak_destinations(), 16);
  }
}

// A switch with nothing to ask (no routable LID) is passed over: the next takes its place in
// the window, which still holds 16 switches with queries out.
TEST_F(FabricSweep, ASwitchWithNothingToAskLeavesItsPlaceInTheWindow) {
  FatTree tree(io_, 4, 16, 1, 31);
  capabilities(tree, kExtended);
  tree.fabric->add({FatTree::leaf(0), IB_NODE_SWITCH, tree.leaf_ports, "leaf-1", 0});  // first
  auto collector = make_collector(io_, tree);
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_switches_swept"), 19);
  EXPECT_EQ(tree.fabric->peak_lid_destinations(), 16);
}

// An SA slower than the switches (an SM building a large fabric's table): a switch whose
// counters are all in and that waits for the table only gives its place in the window to the
// next, so the counters of every switch are asked before the table is in, not only those of the
// first 16; meanwhile no more than 16 switches have queries out at once. Every port whose link
// is up gets its PortInfo from the table.
TEST_F(FabricSweep, ASwitchWaitingOnlyForTheSaTableGivesItsPlaceToTheNext) {
  FatTree tree(io_, 4, 36, 1);  // 40 switches
  capabilities(tree, kExtended);
  const Guid sm = FatTree::host(1, 0);
  tree.fabric->run_sm(sm, {sm + 1, 1, 15, 3, true});
  tree.fabric->master_sm_lid(1101);
  auto collector = make_collector(io_, tree);
  ASSERT_TRUE(collect(io_, *collector).result.success);  // discovery, and its PortInfo
  tree.fabric->sa_tables_last = true;
  tree.fabric->clear_requests();
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_swept"), tree.switch_ports());
  ASSERT_GT(tree.fabric->requests_before_tables, 0u);
  std::set<std::string> counted_before_table;
  std::size_t port_info_smps = 0;
  for (std::size_t k = 0; k < tree.fabric->requests().size(); ++k) {
    const auto& r = tree.fabric->requests()[k];
    if (r.mgmt_class == mad::kPerfMgt && r.attribute == IB_GSI_PORT_COUNTERS_EXT &&
        k < tree.fabric->requests_before_tables) {
      counted_before_table.insert(r.destination);
    }
    if (r.attribute == IB_ATTR_PORT_INFO) ++port_info_smps;
  }
  EXPECT_EQ(counted_before_table.size(), 40u);
  // The leaves' spare ports (2 each, link not up) are asked by SMP; no other port is.
  EXPECT_EQ(port_info_smps, 36u * 2);
  EXPECT_EQ(tree.fabric->peak_lid_destinations_before_tables, 16 + 1);  // and the SA
}

// keep_unread: a port whose queries are lost keeps the values it was last read with, with its
// age in port_stale_seconds, counted stale and failed; only the lost parts are taken from
// memory; the timeouts are counted per switch; once it answers, it is current again.
TEST_F(FabricSweep, ALostPortKeepsItsLastValuesWithTheirAge) {
  FatTree tree(io_, 1, 2, 2);
  capabilities(tree, kExtended);
  const Guid leaf = FatTree::leaf(0);
  extended_data(tree, leaf, 3, 1000);
  extended_data(tree, leaf, 4, 1000);
  auto collector = make_collector(io_, tree);
  const auto first_read = std::chrono::steady_clock::now();
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success);
  EXPECT_EQ(c.metrics.port("ibfabric_fabric_port_transmit_bytes_total", leaf, 3), 4000);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_switch_timeouts_total", {{"node_guid", hex(leaf)}}),
            0);

  extended_data(tree, leaf, 3, 2000);
  extended_data(tree, leaf, 4, 2000);
  tree.fabric->lose(leaf, 100, 3);  // PortInfo, PortCounters, PortCountersExtended of port 3
  c = collect(io_, *collector);
  const double since_first_read =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - first_read).count();
  ASSERT_TRUE(c.result.success) << c.result.error;
  const auto& m = c.metrics;
  EXPECT_EQ(m.port("ibfabric_fabric_port_state", leaf, 3), 4);
  EXPECT_EQ(m.port("ibfabric_fabric_port_transmit_bytes_total", leaf, 3), 4000);
  EXPECT_EQ(m.port("ibfabric_fabric_port_symbol_errors_total", leaf, 3), 0);
  auto age = m.port("ibfabric_fabric_port_stale_seconds", leaf, 3);
  ASSERT_TRUE(age);
  // The time since it was read in the first sweep: after that sweep began, before now.
  EXPECT_GT(*age, 0);
  EXPECT_LE(*age, since_first_read);
  EXPECT_EQ(m.port("ibfabric_fabric_port_transmit_bytes_total", leaf, 4), 8000);
  EXPECT_EQ(m.all("ibfabric_fabric_port_stale_seconds").size(), 1u);
  EXPECT_EQ(m.value("ibfabric_fabric_ports_stale"), 1);
  EXPECT_EQ(m.value("ibfabric_fabric_ports_failed"), 1);
  EXPECT_EQ(m.value("ibfabric_fabric_ports_swept"), tree.switch_ports() - 1);
  EXPECT_EQ(m.value("ibfabric_fabric_switch_timeouts_total", {{"node_guid", hex(leaf)}}), 3);
  for (const char* attribute : {"port_info", "port_counters", "port_counters_extended"}) {
    EXPECT_EQ(m.value("ibfabric_fabric_query_errors_total",
                      {{"phase", "sweep"}, {"attribute", attribute}}),
              1)
        << attribute;
  }

  c = collect(io_, *collector);  // still lost: older
  ASSERT_TRUE(c.result.success) << c.result.error;
  auto older = c.metrics.port("ibfabric_fabric_port_stale_seconds", leaf, 3);
  ASSERT_TRUE(older);
  EXPECT_GT(*older, *age);
  EXPECT_EQ(c.metrics.port("ibfabric_fabric_port_transmit_bytes_total", leaf, 3), 4000);

  // Only PortCountersExtended lost: the state and the PortCounters values are current, the data
  // counters kept.
  tree.fabric->lose(leaf, 0, 3);
  tree.fabric->lose(leaf, 100, 3, FakeFabric::pma(IB_GSI_PORT_COUNTERS_EXT));
  tree.fabric->pma_counter(leaf, 3, IB_GSI_PORT_COUNTERS, IB_PC_ERR_SYM_F, 5);
  extended_data(tree, leaf, 3, 3000);
  c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.port("ibfabric_fabric_port_symbol_errors_total", leaf, 3), 5);
  EXPECT_EQ(c.metrics.port("ibfabric_fabric_port_transmit_bytes_total", leaf, 3), 4000);
  EXPECT_TRUE(c.metrics.port("ibfabric_fabric_port_stale_seconds", leaf, 3));

  tree.fabric->lose(leaf, 0, 3, FakeFabric::pma(IB_GSI_PORT_COUNTERS_EXT));
  c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.port("ibfabric_fabric_port_transmit_bytes_total", leaf, 3), 12000);
  EXPECT_TRUE(c.metrics.all("ibfabric_fabric_port_stale_seconds").empty());
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_stale"), 0);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_failed"), 0);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_switch_timeouts_total", {{"node_guid", hex(leaf)}}),
            3 + 3 + 1);
}

// Past keep_unread the values of a lost port go (here keep_unread is shorter than the time
// between two sweeps); keep_unread: 0 keeps nothing. The port is failed, not stale.
TEST_F(FabricSweep, PastKeepUnreadALostPortsValuesGo) {
  for (auto keep : {std::chrono::nanoseconds{1}, std::chrono::nanoseconds{0}}) {
    SCOPED_TRACE("keep_unread " + std::to_string(keep.count()) + "ns");
    FatTree tree(io_, 1, 2, 2);
    capabilities(tree, kExtended);
    const Guid leaf = FatTree::leaf(0);
    FabricConfig config;
    config.keep_unread = keep;
    auto collector = make_collector(io_, tree, config);
    ASSERT_TRUE(collect(io_, *collector).result.success);
    tree.fabric->lose(leaf, 100, 3);
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    EXPECT_FALSE(c.metrics.port("ibfabric_fabric_port_state", leaf, 3));
    EXPECT_FALSE(c.metrics.port("ibfabric_fabric_port_transmit_bytes_total", leaf, 3));
    EXPECT_TRUE(c.metrics.all("ibfabric_fabric_port_stale_seconds").empty());
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_stale"), 0);
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_failed"), 1);
    EXPECT_EQ(c.metrics.port("ibfabric_fabric_port_state", leaf, 2), 4);
  }
}

// A sweep in which no switch answers anything is a failed collection, not a lossy cable: it
// takes nothing from memory and publishes only what it read; the next collection rediscovers.
TEST_F(FabricSweep, ASweepInWhichNoSwitchAnswersTakesNothingFromMemory) {
  FatTree tree(io_, 1, 2, 2);
  capabilities(tree, kExtended);
  auto collector = make_collector(io_, tree);
  ASSERT_TRUE(collect(io_, *collector).result.success);
  for (Guid sw : tree.switches()) tree.fabric->stop(sw);
  auto c = collect(io_, *collector);
  EXPECT_FALSE(c.result.success);
  EXPECT_EQ(c.result.error, "no switch of this shard answered");
  EXPECT_TRUE(c.metrics.all("ibfabric_fabric_port_state").empty());
  EXPECT_TRUE(c.metrics.all("ibfabric_fabric_port_stale_seconds").empty());
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_stale"), 0);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_failed"), tree.switch_ports());
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_switches_swept"), 0);
  for (Guid sw : tree.switches()) tree.fabric->stop(sw, false);
  c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_discoveries_total"), 2);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_swept"), tree.switch_ports());
}

// A switch that stops answering while the rest of the fabric answers: its ports keep their
// values (stale), its timeouts are counted, and the next collection discovers again, which
// keeps the switch it could not reach.
TEST_F(FabricSweep, ASwitchThatStopsAnsweringIsKeptAndLookedForAgain) {
  FatTree tree(io_, 1, 2, 2);
  capabilities(tree, kExtended);
  const Guid leaf = FatTree::leaf(1);
  FabricConfig config;
  config.rediscover_every = 100;
  auto collector = make_collector(io_, tree, config);
  ASSERT_TRUE(collect(io_, *collector).result.success);
  tree.fabric->stop(leaf);
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  const int ports = tree.ports_of(leaf);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_discoveries_total"), 1);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_switches_swept"), 2);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_stale"), ports);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_switch_timeouts_total", {{"node_guid", hex(leaf)}}),
            3 * ports);
  for (int p = 1; p <= ports; ++p) {
    EXPECT_EQ(c.metrics.port("ibfabric_fabric_port_state", leaf, p), p <= 3 ? 4 : 1) << p;
    EXPECT_TRUE(c.metrics.port("ibfabric_fabric_port_stale_seconds", leaf, p)) << p;
  }
  c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_discoveries_total"), 2);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_nodes", {{"node_type", "switch"}}), 3);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_nodes", {{"node_type", "CA"}}), 4);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_stale"), ports);
}

// A lost ClassPortInfo (asked once per discovery) is replaced by the capabilities the switch
// answered last, so the port counters are still asked and exported; a switch that never
// answered it has no counters (its ports failed).
TEST_F(FabricSweep, ALostClassPortInfoUsesTheCapabilitiesLastAnswered) {
  FatTree tree(io_, 1, 2, 1);
  capabilities(tree, kExtended);
  const Guid leaf = FatTree::leaf(0);
  FabricConfig config;
  config.rediscover_every = 1;
  auto collector = make_collector(io_, tree, config);
  ASSERT_TRUE(collect(io_, *collector).result.success);
  tree.fabric->lose(leaf, 100, std::nullopt, FakeFabric::pma(CLASS_PORT_INFO));
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_query_errors_total",
                            {{"phase", "sweep"}, {"attribute", "class_port_info"}}),
            1);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_failed"), 0);
  EXPECT_EQ(
      c.metrics.value("ibfabric_fabric_switch_pma_capability_mask", {{"node_guid", hex(leaf)}}),
      kExtended);
  for (int p = 1; p <= tree.ports_of(leaf); ++p) {
    EXPECT_EQ(c.metrics.port("ibfabric_fabric_port_unicast_transmit_packets_total", leaf, p), 0);
  }

  auto fresh = make_collector(io_, tree, config);
  c = collect(io_, *fresh);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_failed"), tree.ports_of(leaf));
  EXPECT_FALSE(
      c.metrics.value("ibfabric_fabric_switch_pma_capability_mask", {{"node_guid", hex(leaf)}}));
  for (int p = 1; p <= tree.ports_of(leaf); ++p) {
    EXPECT_FALSE(c.metrics.port("ibfabric_fabric_port_symbol_errors_total", leaf, p));
  }
  EXPECT_TRUE(c.metrics.port("ibfabric_fabric_port_symbol_errors_total", FatTree::leaf(1), 1));
}

// A PMA that rejects a query (a MAD status) answered it: the failure is counted under its
// attribute, not as a timeout of the switch, as a lost query is.
TEST_F(FabricSweep, ARejectedQueryIsNotCountedAsATimeout) {
  FatTree tree(io_, 1, 2, 1);
  capabilities(tree, kExtended);
  const Guid rejecting = FatTree::leaf(1), lossy = FatTree::leaf(0);
  tree.fabric->reject_pma(rejecting, IB_GSI_PORT_COUNTERS_EXT);
  tree.fabric->lose(lossy, 100, 1, FakeFabric::pma(IB_GSI_PORT_COUNTERS_EXT));
  auto collector = make_collector(io_, tree);
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  const auto& m = c.metrics;
  EXPECT_EQ(m.value("ibfabric_fabric_query_errors_total",
                    {{"phase", "sweep"}, {"attribute", "port_counters_extended"}}),
            tree.ports_of(rejecting) + 1);
  EXPECT_EQ(m.value("ibfabric_fabric_switch_timeouts_total", {{"node_guid", hex(rejecting)}}), 0);
  EXPECT_EQ(m.value("ibfabric_fabric_switch_timeouts_total", {{"node_guid", hex(lossy)}}), 1);
}

// A switch whose PMA has never answered ClassPortInfo is asked no counters, but its ports'
// PortInfo is read all the same: right after a discovery the discovery's (an answer of the switch
// in this collection, so a fabric whose PMAs answer nothing does not fail the collection), then
// the SA's records and, for a port whose link is not up, its own SMP.
TEST_F(FabricSweep, ASwitchWhosePmaNeverAnsweredStillHasItsPortsPortInfo) {
  FatTree tree(io_, 1, 2, 1);
  const Guid sm = FatTree::host(1, 0);
  tree.fabric->run_sm(sm, {sm + 1, 1, 15, 3, true});
  tree.fabric->master_sm_lid(1101);
  for (Guid sw : tree.switches()) {
    tree.fabric->lose(sw, 100, std::nullopt, FakeFabric::pma(CLASS_PORT_INFO));
  }
  FabricConfig config;
  config.keep_unread = 0s;  // nothing from memory: what is reported is read in the collection
  config.rediscover_every = 100;
  auto collector = make_collector(io_, tree, config);
  for (const char* collection : {"right after a discovery", "a steady sweep"}) {
    SCOPED_TRACE(collection);
    tree.fabric->port_info_record_tables = 0;
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    const auto& m = c.metrics;
    EXPECT_EQ(m.value("ibfabric_fabric_discoveries_total"), 1);
    if (collection[0] == 'r') {
      EXPECT_EQ(m.value("ibfabric_fabric_switches_swept"), 3);
    } else {
      EXPECT_EQ(tree.fabric->port_info_record_tables, 1);
    }
    EXPECT_EQ(m.value("ibfabric_fabric_ports_failed"), tree.switch_ports());
    for (Guid sw : tree.switches()) {
      for (int p = 1; p <= tree.ports_of(sw); ++p) {
        EXPECT_EQ(m.port("ibfabric_fabric_port_state", sw, p), p <= 2 ? 4 : 1) << hex(sw) << p;
        EXPECT_FALSE(m.port("ibfabric_fabric_port_symbol_errors_total", sw, p)) << hex(sw) << p;
      }
    }
  }
}

// A switch that has lost its LID (rebooted, the SM has not given it one again) is asked nothing,
// and finishes before any switch of the sweep has answered: held back until one does, it then
// keeps its ports' last values for keep_unread, as a switch that answers nothing does.
TEST_F(FabricSweep, ASwitchThatLostItsLidKeepsItsPortsLastValues) {
  FatTree tree(io_, 1, 2, 1);
  capabilities(tree, kExtended);
  const Guid leaf = FatTree::leaf(0);  // the first switch the sweep starts
  FabricConfig config;
  config.rediscover_every = 1;
  auto collector = make_collector(io_, tree, config);
  auto first = collect(io_, *collector);
  ASSERT_TRUE(first.result.success);
  tree.fabric->add({leaf, IB_NODE_SWITCH, tree.leaf_ports, "leaf-1", 0});
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  const auto& m = c.metrics;
  EXPECT_EQ(m.value("ibfabric_fabric_switch_lid", {{"node_guid", hex(leaf)}}), 0);
  EXPECT_EQ(m.value("ibfabric_fabric_ports_stale"), tree.ports_of(leaf));
  for (int p = 1; p <= tree.ports_of(leaf); ++p) {
    EXPECT_EQ(m.port("ibfabric_fabric_port_state", leaf, p), p <= 2 ? 4 : 1) << p;
    EXPECT_TRUE(m.port("ibfabric_fabric_port_stale_seconds", leaf, p)) << p;
    // Its counters too, read by what its PMA said it has.
    for (const char* counter : {"ibfabric_fabric_port_transmit_bytes_total",
                                "ibfabric_fabric_port_symbol_errors_total"}) {
      const auto before = first.metrics.port(counter, leaf, p);
      ASSERT_TRUE(before) << counter << " port " << p;
      EXPECT_EQ(m.port(counter, leaf, p), before) << counter << " port " << p;
    }
  }
}

// A shard that holds no switch sweeps nothing: it does not ask the SA's PortInfoRecord table
// (the whole fabric's), and the collection does not fail.
TEST_F(FabricSweep, AShardWithNoSwitchAsksNoSaTable) {
  FatTree tree(io_, 1, 2, 1);
  const Guid sm = FatTree::host(1, 0);
  tree.fabric->run_sm(sm, {sm + 1, 1, 15, 3, true});
  tree.fabric->master_sm_lid(1101);
  constexpr int kShards = 8;
  int empty = -1;
  for (int shard = 0; shard < kShards && empty < 0; ++shard) {
    auto switches = tree.switches();
    if (std::none_of(switches.begin(), switches.end(),
                     [&](Guid sw) { return fabric::in_shard(sw, shard, kShards); })) {
      empty = shard;
    }
  }
  ASSERT_GE(empty, 0);
  FabricConfig config;
  config.shards = kShards;
  config.shard = empty;
  config.rediscover_every = 100;
  auto collector = make_collector(io_, tree, config);
  ASSERT_TRUE(collect(io_, *collector).result.success);
  tree.fabric->clear_requests();
  auto c = collect(io_, *collector);  // a steady sweep
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_switches_swept"), 0);
  EXPECT_EQ(tree.fabric->port_info_record_tables, 0);
  EXPECT_TRUE(tree.fabric->requests().empty());
}

// A switch the SM has given no routable LID is not asked by LID: its ports fail, counted under
// attribute "lid".
TEST_F(FabricSweep, ASwitchWithoutARoutableLidIsCountedFailed) {
  FatTree tree(io_, 1, 2, 1);
  capabilities(tree, kExtended);
  const Guid leaf = FatTree::leaf(1);
  tree.fabric->add({leaf, IB_NODE_SWITCH, tree.leaf_ports, "leaf-2", 0});
  auto collector = make_collector(io_, tree);
  auto c = collect(io_, *collector);
  ASSERT_TRUE(c.result.success) << c.result.error;
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_query_errors_total",
                            {{"phase", "sweep"}, {"attribute", "lid"}}),
            1);
  EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_failed"), tree.ports_of(leaf));
  EXPECT_FALSE(c.metrics.port("ibfabric_fabric_port_symbol_errors_total", leaf, 1));
  EXPECT_TRUE(c.metrics.port("ibfabric_fabric_port_symbol_errors_total", FatTree::leaf(0), 1));
}

// Link memory: a cable that went down is still named in link_info (its switch port DOWN) for
// link_memory after discovery last saw it; with a link_memory shorter than a sweep, it is not.
TEST_F(FabricSweep, LinkMemoryNamesACableThatWentDown) {
  for (auto memory :
       {std::chrono::nanoseconds{std::chrono::hours(24)}, std::chrono::nanoseconds{1}}) {
    SCOPED_TRACE("link_memory " + std::to_string(memory.count()) + "ns");
    FatTree tree(io_, 1, 2, 2);
    const Guid leaf = FatTree::leaf(1);
    FabricConfig config;
    config.rediscover_every = 1;
    config.link_memory = memory;
    auto collector = make_collector(io_, tree, config);
    ASSERT_TRUE(collect(io_, *collector).result.success);
    tree.fabric->unplug(leaf, 2);  // host-2-1
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    EXPECT_EQ(c.metrics.port("ibfabric_fabric_port_state", leaf, 2), 1);
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_nodes", {{"node_type", "CA"}}), 3);
    auto link =
        c.metrics.all("ibfabric_fabric_link_info", {{"node_guid", hex(leaf)}, {"port", "2"}});
    if (memory.count() > 1) {
      ASSERT_EQ(link.size(), 1u);
      EXPECT_EQ(link[0].labels["remote_node_name"], "host-2-1 mlx5_0");
      EXPECT_EQ(link[0].labels["remote_node_guid"], hex(FatTree::host(1, 0)));
    } else {
      EXPECT_TRUE(link.empty());
    }
    EXPECT_EQ(c.metrics.all("ibfabric_fabric_link_info", {{"node_guid", hex(leaf)}, {"port", "3"}})
                  .size(),
              1u);
  }
}

}  // namespace
}  // namespace ibfabric::fabric_test
