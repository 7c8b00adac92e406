#include "mad/attributes.h"

#include "ib/link_rate.h"

#include <gtest/gtest.h>

#include <array>
#include <map>

namespace ibfabric::mad {
namespace {

// Big enough for any attribute here: PMA data areas are 192 octets (IB_PC_DATA_SZ).
using Data = std::array<std::uint8_t, IB_PC_DATA_SZ>;

// PortInfo as an NDR HCA port would answer it, encoded by libibmad.
Data ndr_port_info() {
  Data d{};
  mad_set_field(d.data(), 0, IB_PORT_LID_F, 0x2a);
  mad_set_field(d.data(), 0, IB_PORT_SMLID_F, 1);
  mad_set_field(d.data(), 0, IB_PORT_LMC_F, 2);
  mad_set_field(d.data(), 0, IB_PORT_LOCAL_PORT_F, 1);
  mad_set_field(d.data(), 0, IB_PORT_STATE_F, 4);
  mad_set_field(d.data(), 0, IB_PORT_PHYS_STATE_F, 5);
  mad_set_field(d.data(), 0, IB_PORT_CAPMASK_F, kPortCapExtendedSpeeds | 0x2);
  mad_set_field(d.data(), 0, IB_PORT_LINK_WIDTH_ACTIVE_F, 2);      // 4X
  mad_set_field(d.data(), 0, IB_PORT_LINK_WIDTH_ENABLED_F, 3);     // 1X,4X
  mad_set_field(d.data(), 0, IB_PORT_LINK_WIDTH_SUPPORTED_F, 19);  // 1X,2X,4X
  mad_set_field(d.data(), 0, IB_PORT_LINK_SPEED_ACTIVE_F, 4);
  mad_set_field(d.data(), 0, IB_PORT_LINK_SPEED_ENABLED_F, 7);
  mad_set_field(d.data(), 0, IB_PORT_LINK_SPEED_SUPPORTED_F, 7);
  mad_set_field(d.data(), 0, IB_PORT_LINK_SPEED_EXT_ACTIVE_F, 8);  // NDR
  mad_set_field(d.data(), 0, IB_PORT_LINK_SPEED_EXT_ENABLED_F, 15);
  mad_set_field(d.data(), 0, IB_PORT_LINK_SPEED_EXT_SUPPORTED_F, 15);
  mad_set_field(d.data(), 0, IB_PORT_NEIGHBOR_MTU_F, 5);
  mad_set_field(d.data(), 0, IB_PORT_MTU_CAP_F, 5);
  return d;
}

TEST(PortInfoDecode, NdrPort) {
  auto d = ndr_port_info();
  auto pi = decode_port_info(d.data());
  EXPECT_EQ(pi.lid, 0x2a);
  EXPECT_EQ(pi.sm_lid, 1);
  EXPECT_EQ(pi.lmc, 2);
  EXPECT_EQ(pi.state, 4);
  EXPECT_EQ(pi.phys_state, 5);
  EXPECT_TRUE(pi.extended_speeds);
  EXPECT_EQ(width_name(pi.width_active), "4X");
  EXPECT_EQ(lanes(pi.width_active), 4);
  EXPECT_EQ(width_names(pi.width_enabled), "1X,4X");
  EXPECT_EQ(width_names(pi.width_supported), "1X,2X,4X");
  EXPECT_EQ(active_speed_name(pi), "NDR");
  EXPECT_DOUBLE_EQ(lane_gbps(pi), 100);
  EXPECT_EQ(enabled_speed_names(pi), "SDR,DDR,QDR,FDR,EDR,HDR,NDR");
  EXPECT_EQ(mtu_bytes(pi.neighbor_mtu), 4096);
  EXPECT_STREQ(state_name(pi.state), "ACTIVE");
  EXPECT_STREQ(phys_state_name(pi.phys_state), "LinkUp");
  // 4 lanes x 100 Gb/s of data after FEC (106.25 Gb/s signalling): 400 Gb/s.
  EXPECT_DOUBLE_EQ(link_rate::effective_bytes_per_second(pi).value(), 50e9);
}

TEST(PortInfoDecode, ExtendedSpeedFieldsIgnoredWithoutCapability) {
  auto d = ndr_port_info();
  mad_set_field(d.data(), 0, IB_PORT_CAPMASK_F, 0x2);
  auto pi = decode_port_info(d.data());
  EXPECT_FALSE(pi.extended_speeds);
  EXPECT_EQ(active_speed_name(pi), "QDR");
  EXPECT_DOUBLE_EQ(lane_gbps(pi), 10);
  // 4X QDR: 40 Gb/s signalling, 8b/10b leaves 32 Gb/s.
  EXPECT_DOUBLE_EQ(link_rate::effective_bytes_per_second(pi).value(), 4e9);
  EXPECT_EQ(supported_speed_names(pi), "SDR,DDR,QDR");
  // A switch port: the capability comes from port 0 and is applied by the caller.
  pi.extended_speeds = true;
  EXPECT_EQ(active_speed_name(pi), "NDR");
}

TEST(PortInfoDecode, DownPort) {
  auto d = ndr_port_info();
  mad_set_field(d.data(), 0, IB_PORT_STATE_F, 1);
  mad_set_field(d.data(), 0, IB_PORT_PHYS_STATE_F, 2);
  mad_set_field(d.data(), 0, IB_PORT_LINK_WIDTH_ACTIVE_F, 0);
  auto pi = decode_port_info(d.data());
  EXPECT_STREQ(state_name(pi.state), "DOWN");
  EXPECT_STREQ(phys_state_name(pi.phys_state), "Polling");
  EXPECT_EQ(width_name(pi.width_active), "");
  EXPECT_EQ(lanes(pi.width_active), 0);
  EXPECT_FALSE(link_rate::effective_bytes_per_second(pi).has_value());  // no width: no rate
}

TEST(ClassPortInfoDecode, CapabilityBits) {
  Data d{};
  mad_set_field(d.data(), 0, IB_CPI_CAPMASK_F, 0x1200);  // what ibsim's PMA answers
  auto caps = decode_class_port_info(d.data());
  EXPECT_EQ(caps.mask, 0x1200);
  EXPECT_TRUE(caps.extended());
  EXPECT_TRUE(caps.extended_ietf());
  EXPECT_FALSE(caps.extended_errors());
  EXPECT_TRUE(caps.xmit_wait());
  EXPECT_TRUE(needs_port_counters(caps));

  mad_set_field(d.data(), 0, IB_CPI_CAPMASK2_F, kPm2AdditionalExtCounters);
  caps = decode_class_port_info(d.data());
  EXPECT_TRUE(caps.extended_errors());
  EXPECT_FALSE(needs_port_counters(caps));
}

std::map<std::string, CounterValue> by_name(const std::vector<CounterValue>& values) {
  std::map<std::string, CounterValue> out;
  for (const auto& v : values) out[std::string(v.def->pma_name)] = v;
  return out;
}

TEST(FieldMax, FollowsLibibmadWidths) {
  EXPECT_EQ(field_max(IB_PC_ERR_SYM_F), 0xffffu);
  EXPECT_EQ(field_max(IB_PC_LINK_DOWNED_F), 0xffu);
  EXPECT_EQ(field_max(IB_PC_ERR_LOCALINTEG_F), 0xfu);
  EXPECT_EQ(field_max(IB_PC_XMT_BYTES_F), 0xffffffffu);
}

TEST(Counters, ExtendedDataAndBasicErrorsWithSaturation) {
  PmaCapabilities caps{0x1200, 0};
  Data basic{}, ext{};
  mad_set_field(basic.data(), 0, IB_PC_ERR_SYM_F, 0xffff);  // pegged
  mad_set_field(basic.data(), 0, IB_PC_LINK_DOWNED_F, 3);
  mad_set_field(basic.data(), 0, IB_PC_XMT_WAIT_F, 77);
  mad_set_field(basic.data(), 0, IB_PC_XMT_BYTES_F, 0xffffffff);  // ignored: extended wins
  mad_set_field64(ext.data(), 0, IB_PC_EXT_XMT_BYTES_F, (1ULL << 40) + 5);
  mad_set_field64(ext.data(), 0, IB_PC_EXT_RCV_PKTS_F, (1ULL << 33) + 1);
  mad_set_field64(ext.data(), 0, IB_PC_EXT_XMT_UPKTS_F, 9);
  auto v = by_name(merge_counters(caps, basic.data(), ext.data()));

  EXPECT_DOUBLE_EQ(v["SymbolErrorCounter"].value, 0xffff);
  EXPECT_EQ(v["SymbolErrorCounter"].saturated, std::optional<bool>(true));
  EXPECT_EQ(v["LinkDownedCounter"].value, 3);
  EXPECT_EQ(v["LinkDownedCounter"].saturated, std::optional<bool>(false));
  EXPECT_EQ(v["PortXmitWait"].value, 77);
  EXPECT_DOUBLE_EQ(v["PortXmitData"].value, 4.0 * ((1ULL << 40) + 5));
  EXPECT_FALSE(v["PortXmitData"].saturated.has_value());
  EXPECT_DOUBLE_EQ(v["PortRcvPkts"].value, static_cast<double>((1ULL << 33) + 1));
  EXPECT_EQ(v["PortUnicastXmitPkts"].value, 9);
  EXPECT_EQ(v.count("QP1Dropped"), 0u);  // capability bit 15 not set
}

TEST(Counters, BasicOnlyMakesDataSaturationVisible) {
  PmaCapabilities caps{0, 0};
  Data basic{};
  mad_set_field(basic.data(), 0, IB_PC_XMT_BYTES_F, 0xffffffff);
  mad_set_field(basic.data(), 0, IB_PC_RCV_BYTES_F, 10);
  auto v = by_name(merge_counters(caps, basic.data(), nullptr));
  EXPECT_DOUBLE_EQ(v["PortXmitData"].value, 4.0 * 0xffffffffu);
  EXPECT_EQ(v["PortXmitData"].saturated, std::optional<bool>(true));
  EXPECT_EQ(v["PortRcvData"].value, 40);
  EXPECT_EQ(v["PortRcvData"].saturated, std::optional<bool>(false));
  EXPECT_EQ(v.count("PortUnicastXmitPkts"), 0u);
  EXPECT_EQ(v.count("PortXmitWait"), 0u);  // not supported without bit 12
}

TEST(Counters, NoIetfHasNoUnicastMulticast) {
  PmaCapabilities caps{kPmExtWidthNoIetf, 0};
  Data basic{}, ext{};
  auto v = by_name(merge_counters(caps, basic.data(), ext.data()));
  EXPECT_EQ(v.count("PortXmitData"), 1u);
  EXPECT_FALSE(v["PortXmitData"].saturated.has_value());
  EXPECT_EQ(v.count("PortUnicastXmitPkts"), 0u);
}

TEST(Counters, AdditionalExtendedCountersReplaceBasicErrors) {
  PmaCapabilities caps{kPmExtWidthSupported | kPmXmitWaitSupported, kPm2AdditionalExtCounters};
  Data ext{};
  mad_set_field64(ext.data(), 0, IB_PC_EXT_ERR_SYM_F, (1ULL << 36));
  mad_set_field64(ext.data(), 0, IB_PC_EXT_XMT_WAIT_F, (1ULL << 35));
  auto v = by_name(merge_counters(caps, nullptr, ext.data()));
  EXPECT_DOUBLE_EQ(v["SymbolErrorCounter"].value, static_cast<double>(1ULL << 36));
  EXPECT_FALSE(v["SymbolErrorCounter"].saturated.has_value());
  EXPECT_DOUBLE_EQ(v["PortXmitWait"].value, static_cast<double>(1ULL << 35));
}

// What the fabric collector keeps of an answer between sweeps (the octets the decoders read,
// the rest zeroed) holds every field the counter decoders read, as the whole answer does.
TEST(Counters, TheOctetsKeptHoldEveryFieldTheDecodersRead) {
  Data basic{}, ext{};
  for (std::size_t i = 0; i < basic.size(); ++i) {
    basic[i] = static_cast<std::uint8_t>(0x5a + 7 * i);  // no zero octet
    ext[i] = static_cast<std::uint8_t>(0xa5 + 13 * i) | 1;
  }
  auto kept = [](const Data& whole, std::size_t octets) {
    Data d{};
    std::copy(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(octets), d.begin());
    return d;
  };
  EXPECT_LT(port_counters_octets(), basic.size());
  EXPECT_LT(port_counters_extended_octets(), ext.size());
  Data basic_kept = kept(basic, port_counters_octets());
  Data ext_kept = kept(ext, port_counters_extended_octets());
  // Raw fields, not merge_counters' doubles: those lose the low octets of a 64-bit field.
  for (const auto& def : counter_defs()) {
    if (def.basic != IB_NO_FIELD) {
      EXPECT_EQ(mad_get_field(basic.data(), 0, def.basic),
                mad_get_field(basic_kept.data(), 0, def.basic))
          << def.pma_name;
    }
    EXPECT_EQ(mad_get_field64(ext.data(), 0, def.extended),
              mad_get_field64(ext_kept.data(), 0, def.extended))
        << def.pma_name;
  }
  // PortVLXmitWaitCounters: the 16 counters end at octet 36 (4 + 16 x 2).
  EXPECT_EQ(port_vl_xmit_wait_octets(), 36u);
  Data vl_kept = kept(basic, port_vl_xmit_wait_octets());
  for (int vl = 0; vl < kVlXmitWaitCounters; ++vl) {
    EXPECT_EQ(vl_xmit_wait(basic.data(), vl), vl_xmit_wait(vl_kept.data(), vl)) << vl;
  }
  for (std::size_t a = 0; a < detail_attributes().size(); ++a) {
    EXPECT_LT(detail_octets(a), basic.size());
    for (const auto& def : detail_attributes()[a].counters) {
      Data part = kept(basic, detail_octets(a));
      EXPECT_EQ(mad_get_field(basic.data(), 0, def.field), mad_get_field(part.data(), 0, def.field))
          << def.pma_name;
    }
  }
}

// OperationalVLs (PortInfo, 4 bits) and the data VLs it enables: VL 0 .. n-1.
TEST(PortInfoDecode, OperationalVls) {
  auto d = ndr_port_info();
  for (int oper : {0, 1, 2, 3, 4, 5, 6, 15}) {
    mad_set_field(d.data(), 0, IB_PORT_OPER_VLS_F, static_cast<std::uint32_t>(oper));
    auto pi = decode_port_info(d.data());
    EXPECT_EQ(pi.oper_vls, oper);
    EXPECT_EQ(mtu_bytes(pi.mtu_capability), 4096) << "the octet it shares";
  }
  const std::map<int, int> vls{{0, 0}, {1, 1}, {2, 2}, {3, 4}, {4, 8}, {5, 15}, {6, 0}, {15, 0}};
  for (auto [oper, n] : vls) EXPECT_EQ(operational_data_vls(oper), n) << oper;
}

// PortVLXmitWaitCounters: each VL's 16-bit counter where libibmad's field table puts it.
TEST(VlXmitWait, EachVlsCounter) {
  Data d{};
  for (int vl = 0; vl < kVlXmitWaitCounters; ++vl) {
    mad_set_field(d.data(), 0, static_cast<MAD_FIELDS>(IB_PC_PORT_VL_XMIT_WAIT0_F + vl),
                  static_cast<std::uint32_t>(vl == 9 ? 0xffff : 100 + vl));
  }
  for (int vl = 0; vl < kVlXmitWaitCounters; ++vl) {
    EXPECT_EQ(vl_xmit_wait(d.data(), vl), vl == 9 ? kVlXmitWaitMax : 100 + vl) << vl;
  }
  EXPECT_EQ(mad_get_field(d.data(), 0, IB_PC_PORT_VL_XMIT_WAIT15_F), 115u);
  EXPECT_EQ(vl_xmit_wait_name(3), "PortVLXmitWait3");
}

TEST(Counters, MissingAttributeCostsOnlyItsValues) {
  PmaCapabilities caps{0x1200, 0};
  Data basic{};
  mad_set_field(basic.data(), 0, IB_PC_ERR_SYM_F, 5);
  auto v = by_name(merge_counters(caps, basic.data(), nullptr));  // extended timed out
  EXPECT_EQ(v["SymbolErrorCounter"].value, 5);
  EXPECT_EQ(v.count("PortXmitData"), 0u);
  auto w = by_name(merge_counters(caps, nullptr, nullptr));
  EXPECT_TRUE(w.empty());
}

TEST(Attributes, RoutableLids) {
  EXPECT_FALSE(routable_lid(0));
  EXPECT_TRUE(routable_lid(1));
  EXPECT_TRUE(routable_lid(0xbfff));
  EXPECT_FALSE(routable_lid(0xc000));
  EXPECT_FALSE(routable_lid(0xffff));
}

}  // namespace
}  // namespace ibfabric::mad
