// The MADs a steady fabric sweep sends, counted per swept switch port, with the default
// configuration and with each opt-in, against what docs/design.md ("What each sweep asks")
// states. A change that asks one more MAD of every port (or of every switch, or per sweep) fails
// here. The fabric is simulated at the MAD engine (fake_fabric.h): its SA answers the
// PortInfoRecord table at the master SM's LID, as opensm does.

#include "fabric_test_support.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ibfabric::fabric_test {
namespace {

using fabric::FabricConfig;

// The PMAs of the two kinds the statement distinguishes: one that carries every counter in
// PortCountersExtended (CapabilityMask2 AdditionalExtCounters: NVIDIA's switches), and one whose
// error counters are only in PortCounters (ibsim's, and older switches').
constexpr std::uint16_t kExtended = mad::kPmExtWidthSupported | mad::kPmXmitWaitSupported;
constexpr std::uint32_t kAllInExtended = mad::kPm2AdditionalExtCounters;

// What one sweep sent, by kind.
struct Sent {
  std::size_t total = 0;
  std::size_t port_info_smps = 0;  // SMP PortInfo by LID
  std::size_t sa_tables = 0;       // SA GetTable PortInfoRecord
  std::size_t class_port_infos = 0;
  std::map<std::uint16_t, std::size_t> pma;  // PMA Gets by attribute, ClassPortInfo aside
};

Sent count(const FakeFabric& fabric) {
  Sent s;
  for (const auto& r : fabric.requests()) {
    ++s.total;
    if (r.mgmt_class == mad::kSubnAdm && r.attribute == IB_SA_ATTR_PORTINFORECORD) {
      ++s.sa_tables;
    } else if (r.mgmt_class == mad::kPerfMgt && r.attribute == CLASS_PORT_INFO) {
      ++s.class_port_infos;
    } else if (r.mgmt_class == mad::kPerfMgt) {
      ++s.pma[r.attribute];
    } else if (r.attribute == IB_ATTR_PORT_INFO && r.destination.starts_with("lid")) {
      ++s.port_info_smps;
    }
  }
  return s;
}

class FabricSweepMads : public ::testing::Test {
 protected:
  void TearDown() override { settle(io_); }

  // A fat tree whose master SM runs on a host of the second leaf (its LID in every port's
  // PortInfo.MasterSMLID), every switch's PMA with `mask` and `mask2`.
  std::unique_ptr<FatTree> tree(std::uint16_t mask, std::uint32_t mask2) {
    auto t = std::make_unique<FatTree>(io_, 2, 4, 3);
    Guid sm = FatTree::host(1, 0);
    t->fabric->run_sm(sm, {sm + 1, 1, 15, 3, true});
    t->fabric->master_sm_lid(static_cast<std::uint16_t>(1001 + 100));
    for (Guid sw : t->switches()) t->fabric->pma_capabilities(sw, mask, mask2);
    return t;
  }

  // Switch ports whose link is not up: the leaves' spare ports (FatTree's `spare`, 2).
  static std::size_t not_up(const FatTree& t) {
    return static_cast<std::size_t>(t.leaves * (t.leaf_ports - t.spines - t.hosts));
  }

  // The requests of the third collection: a discovery, the sweep right after it, then a steady
  // sweep (the topology cached), which is counted.
  Sent steady_sweep(const FatTree& t, FabricConfig config, double* sweep_mads = nullptr) {
    config.rediscover_every = 1000;
    auto collector = make_collector(io_, t, std::move(config));
    for (int i = 0; i < 2; ++i) {
      auto c = collect(io_, *collector);
      EXPECT_TRUE(c.result.success) << c.result.error;
    }
    t.fabric->clear_requests();
    t.fabric->port_info_record_tables = 0;
    auto c = collect(io_, *collector);
    EXPECT_TRUE(c.result.success) << c.result.error;
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_swept"), t.switch_ports());
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_failed"), 0);
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_discoveries_total"), 1);
    if (sweep_mads) *sweep_mads = c.metrics.value("ibfabric_fabric_sweep_mads").value_or(-1);
    return count(*t.fabric);
  }

  boost::asio::io_context io_;
};

struct Case {
  const char* name;
  bool error_details, vl_transmit_wait;
  bool all_in_extended;  // the PMA's CapabilityMask2 has AdditionalExtCounters
  std::size_t per_port;  // MADs per swept port, as docs/design.md states
};

// The statement of docs/design.md, "What each sweep asks": of every swept port, a steady sweep
// asks PortCountersExtended alone where the PMA carries every counter there, PortCounters and
// PortCountersExtended where it does not; error_details adds PortRcvErrorDetails and
// PortXmitDiscardDetails, vl_transmit_wait adds PortVLXmitWaitCounters. PortInfo comes from one
// SA PortInfoRecord table per sweep, but for a port whose link is not up (its own SMP);
// ClassPortInfo from the discovery's sweep: nothing else.
TEST_F(FabricSweepMads, ASteadySweepAsksExactlyWhatTheDesignStates) {
  const Case cases[] = {
      {"defaults, every counter in PortCountersExtended", false, false, true, 1},
      {"defaults, error counters in PortCounters only", false, false, false, 2},
      {"error_details", true, false, true, 3},
      {"error_details, error counters in PortCounters only", true, false, false, 4},
      {"vl_transmit_wait", false, true, true, 2},
      {"vl_transmit_wait, error counters in PortCounters only", false, true, false, 3},
      {"error_details and vl_transmit_wait", true, true, true, 4},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto t = tree(kExtended, c.all_in_extended ? kAllInExtended : 0);
    FabricConfig config;
    config.error_details = c.error_details;
    config.vl_transmit_wait = c.vl_transmit_wait;
    double sweep_mads = 0;
    auto s = steady_sweep(*t, config, &sweep_mads);
    const auto ports = static_cast<std::size_t>(t->switch_ports());
    // The whole count: per port, one PortInfo SMP per port whose link is not up, and the one SA
    // table per sweep.
    ASSERT_GT(not_up(*t), 0u);
    EXPECT_EQ(s.total, c.per_port * ports + not_up(*t) + 1);
    EXPECT_EQ(sweep_mads, static_cast<double>(s.total));
    EXPECT_EQ(s.sa_tables, 1u);
    EXPECT_EQ(t->fabric->port_info_record_tables, 1);
    EXPECT_EQ(s.port_info_smps, not_up(*t));
    EXPECT_EQ(s.class_port_infos, 0u);
    std::map<std::uint16_t, std::size_t> want{{IB_GSI_PORT_COUNTERS_EXT, ports}};
    if (!c.all_in_extended) want[IB_GSI_PORT_COUNTERS] = ports;
    if (c.error_details) {
      want[IB_GSI_PORT_RCV_ERROR_DETAILS] = ports;
      want[IB_GSI_PORT_XMIT_DISCARD_DETAILS] = ports;
    }
    if (c.vl_transmit_wait) want[IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS] = ports;
    EXPECT_EQ(s.pma, want);
  }
}

// Where the SA gives no table (no SM LID in the local PortInfo, an SA that does not answer), each
// port's PortInfo is its own SMP, one more MAD a port; where the table is cut short (the
// simulator's shim carries only the first RMPP segment), only the ports without a record get
// one. The values are the same either way.
TEST_F(FabricSweepMads, APortTheSaHasNoRecordOfIsAskedByAnSmp) {
  for (std::string missing : {"no SM LID", "no answer", "table cut short"}) {
    SCOPED_TRACE(missing);
    auto t = tree(kExtended, kAllInExtended);
    const auto ports = static_cast<std::size_t>(t->switch_ports());
    std::size_t without_record = ports;
    if (missing == "no SM LID") {
      t->fabric->master_sm_lid(0);
    } else if (missing == "no answer") {
      t->fabric->sm(FatTree::host(1, 0)).answers = false;  // the SA's queries time out
    } else {
      // Records in GUID order: the first leaf's (port 0 and every port) come first; its spare
      // ports, not up, are asked by SMP all the same.
      t->fabric->cut_port_info_records(1 + static_cast<std::size_t>(t->leaf_ports));
      without_record = ports - static_cast<std::size_t>(t->spines + t->hosts);
    }
    auto s = steady_sweep(*t, {});
    // The SA that did not answer the sweep before is not asked in this one (the next test).
    const std::size_t sa = missing == "table cut short" ? 1 : 0;
    EXPECT_EQ(s.sa_tables, sa);
    EXPECT_EQ(s.port_info_smps, without_record);
    EXPECT_EQ(s.total, ports + without_record + sa);
  }
}

// A table that gave no record the sweep could use (here one cut before its first record) is not
// asked for in the next SweepRun::kSweepsWithoutTable steady sweeps, which ask each port's SMP
// instead; the one after asks again, and once a table gives records, every sweep asks for it.
TEST_F(FabricSweepMads, ATableThatGaveNoRecordIsNotAskedForInTheNextNineSweeps) {
  auto t = tree(kExtended, kAllInExtended);
  const auto ports = static_cast<std::size_t>(t->switch_ports());
  t->fabric->cut_port_info_records(0);
  FabricConfig config;
  config.rediscover_every = 1000;
  auto collector = make_collector(io_, *t, config);
  ASSERT_TRUE(collect(io_, *collector).result.success);  // the discovery's sweep: no table
  std::vector<std::size_t> tables, smps;
  for (int sweep = 1; sweep <= 12; ++sweep) {
    if (sweep == 11) t->fabric->cut_port_info_records(1000000);  // the SA mended
    t->fabric->clear_requests();
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    EXPECT_EQ(c.metrics.value("ibfabric_fabric_ports_swept"), t->switch_ports());
    auto s = count(*t->fabric);
    tables.push_back(s.sa_tables);
    smps.push_back(s.port_info_smps);
  }
  EXPECT_EQ(tables, (std::vector<std::size_t>{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}));
  const std::size_t by_table = not_up(*t);  // what a whole table leaves to the SMPs
  EXPECT_EQ(smps, (std::vector<std::size_t>{ports, ports, ports, ports, ports, ports, ports, ports,
                                            ports, ports, by_table, by_table}));
}

// The PortInfo a record gives is the port's: the same state, width, speed and VLs as its own SMP
// answers, so that the exposition does not change with where it came from.
TEST_F(FabricSweepMads, TheSaRecordsGiveTheSameValuesAsEachPortsSmp) {
  std::map<std::string, double> by_sa, by_smp;
  for (bool sa : {true, false}) {
    auto t = tree(kExtended, kAllInExtended);
    if (!sa) t->fabric->master_sm_lid(0);
    t->fabric->oper_vls(FatTree::leaf(2), 3);
    FabricConfig config;
    config.rediscover_every = 1000;
    config.vl_transmit_wait = true;
    auto collector = make_collector(io_, *t, config);
    ASSERT_TRUE(collect(io_, *collector).result.success);
    t->fabric->unplug(FatTree::leaf(1), 1);  // a port down since the discovery
    ASSERT_TRUE(collect(io_, *collector).result.success);
    auto c = collect(io_, *collector);
    ASSERT_TRUE(c.result.success) << c.result.error;
    EXPECT_EQ(t->fabric->port_info_record_tables, sa ? 2 : 0);  // two steady sweeps
    auto& out = sa ? by_sa : by_smp;
    for (const auto& name : {"ibfabric_fabric_port_state", "ibfabric_fabric_port_physical_state",
                             "ibfabric_fabric_port_link_width_lanes",
                             "ibfabric_fabric_port_link_speed_lane_bytes_per_second",
                             "ibfabric_fabric_port_effective_rate_bytes_per_second",
                             "ibfabric_fabric_port_vl_transmit_wait_ticks_total"}) {
      for (const auto& series : c.metrics.all(name)) {
        std::string key = name;
        for (const auto& [k, v] : series.labels) key += "," + k + "=" + v;
        out[key] = series.value;
      }
    }
  }
  EXPECT_FALSE(by_sa.empty());
  EXPECT_EQ(by_sa, by_smp);
  auto down = "ibfabric_fabric_port_state,node_guid=" + hex(FatTree::leaf(1)) + ",port=1";
  EXPECT_EQ(by_sa[down], 1);  // Down, as the SA's record says, not the discovery's Active
}

}  // namespace
}  // namespace ibfabric::fabric_test
