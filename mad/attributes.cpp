#include "mad/attributes.h"

#include <array>
#include <cstdio>

namespace ibfabric::mad {
namespace {

// libibmad's getters take a non-const buffer even for reading.
std::uint8_t* bytes(const std::uint8_t* p) { return const_cast<std::uint8_t*>(p); }

int get(const std::uint8_t* data, enum MAD_FIELDS f) {
  return static_cast<int>(mad_get_field(bytes(data), 0, f));
}

struct SpeedBit {
  int bit;
  const char* name;
  double lane_gbps;
};
constexpr std::array<SpeedBit, 3> kBaseSpeeds{{{1, "SDR", 2.5}, {2, "DDR", 5}, {4, "QDR", 10}}};
constexpr std::array<SpeedBit, 4> kExtSpeeds{
    {{1, "FDR", 14}, {2, "EDR", 25}, {4, "HDR", 50}, {8, "NDR", 100}}};

struct WidthBit {
  int bit;
  const char* name;
  int lanes;
};
constexpr std::array<WidthBit, 5> kWidths{
    {{1, "1X", 1}, {16, "2X", 2}, {2, "4X", 4}, {4, "8X", 8}, {8, "12X", 12}}};

std::string speed_names(int base, int ext, bool ext_valid) {
  std::string out;
  auto add = [&](const char* n) {
    if (!out.empty()) out += ',';
    out += n;
  };
  for (const auto& s : kBaseSpeeds) {
    if (base & s.bit) add(s.name);
  }
  if (ext_valid) {
    for (const auto& s : kExtSpeeds) {
      if (ext & s.bit) add(s.name);
    }
  }
  return out;
}

using K = CounterDef::Kind;

}  // namespace

NodeInfo decode_node_info(const std::uint8_t* data) {
  NodeInfo n;
  n.guid = mad_get_field64(bytes(data), 0, IB_NODE_GUID_F);
  n.port_guid = mad_get_field64(bytes(data), 0, IB_NODE_PORT_GUID_F);
  n.type = get(data, IB_NODE_TYPE_F);
  n.num_ports = get(data, IB_NODE_NPORTS_F);
  n.local_port = get(data, IB_NODE_LOCAL_PORT_F);
  n.vendor_id = static_cast<std::uint32_t>(get(data, IB_NODE_VENDORID_F));
  n.device_id = static_cast<std::uint32_t>(get(data, IB_NODE_DEVID_F));
  return n;
}

const char* node_type_name(int type) {
  switch (type) {
    case IB_NODE_CA:
      return "CA";
    case IB_NODE_SWITCH:
      return "switch";
    case IB_NODE_ROUTER:
      return "router";
    default:
      return "unknown";
  }
}

PortInfo decode_port_info(const std::uint8_t* d) {
  // Every field below is at most 8 bits wide.
  auto octet = [d](enum MAD_FIELDS field) { return static_cast<std::uint8_t>(get(d, field)); };
  PortInfo pi;
  pi.lid = static_cast<std::uint16_t>(get(d, IB_PORT_LID_F));
  pi.sm_lid = static_cast<std::uint16_t>(get(d, IB_PORT_SMLID_F));
  pi.lmc = octet(IB_PORT_LMC_F);
  pi.local_port = octet(IB_PORT_LOCAL_PORT_F);
  pi.state = octet(IB_PORT_STATE_F);
  pi.phys_state = octet(IB_PORT_PHYS_STATE_F);
  pi.capability_mask = mad_get_field(bytes(d), 0, IB_PORT_CAPMASK_F);
  pi.width_active = octet(IB_PORT_LINK_WIDTH_ACTIVE_F);
  pi.width_enabled = octet(IB_PORT_LINK_WIDTH_ENABLED_F);
  pi.width_supported = octet(IB_PORT_LINK_WIDTH_SUPPORTED_F);
  pi.speed_active = octet(IB_PORT_LINK_SPEED_ACTIVE_F);
  pi.speed_enabled = octet(IB_PORT_LINK_SPEED_ENABLED_F);
  pi.speed_supported = octet(IB_PORT_LINK_SPEED_SUPPORTED_F);
  pi.extended_speeds = (pi.capability_mask & kPortCapExtendedSpeeds) != 0;
  pi.speed_ext_active = octet(IB_PORT_LINK_SPEED_EXT_ACTIVE_F);
  pi.speed_ext_enabled = octet(IB_PORT_LINK_SPEED_EXT_ENABLED_F);
  pi.speed_ext_supported = octet(IB_PORT_LINK_SPEED_EXT_SUPPORTED_F);
  pi.neighbor_mtu = octet(IB_PORT_NEIGHBOR_MTU_F);
  pi.mtu_capability = octet(IB_PORT_MTU_CAP_F) & 0xf;
  pi.oper_vls = octet(IB_PORT_OPER_VLS_F) & 0xf;
  return pi;
}

void for_each_port_info_record(const std::uint8_t* mad, std::size_t size,
                               const std::function<void(const PortInfoRecord&)>& each) {
  if (mad == nullptr || size <= IB_SA_DATA_OFFS) return;
  // AttributeOffset counts 8-octet words; 0 means the table is empty.
  std::size_t stride = 8u * static_cast<std::size_t>(get(mad, IB_SA_ATTROFFS_F));
  if (stride < kPortInfoRecordSize - 4) return;  // at least RID and PortInfo
  for (std::size_t at = IB_SA_DATA_OFFS; at + stride <= size; at += stride) {
    const std::uint8_t* record = mad + at;
    PortInfoRecord r;
    r.lid = static_cast<std::uint16_t>(record[0] << 8 | record[1]);
    r.port = record[2];
    r.info = decode_port_info(record + 4);
    each(r);
  }
}

int operational_data_vls(int oper_vls) {
  switch (oper_vls) {
    case 1:
      return 1;
    case 2:
      return 2;
    case 3:
      return 4;
    case 4:
      return 8;
    case 5:
      return 15;
    default:
      return 0;
  }
}

const char* state_name(int state) {
  switch (state) {
    case 0:
      return "NOP";
    case 1:
      return "DOWN";
    case 2:
      return "INIT";
    case 3:
      return "ARMED";
    case 4:
      return "ACTIVE";
    case 5:
      return "ACTIVE_DEFER";
    default:
      return "unknown";
  }
}

const char* phys_state_name(int state) {
  switch (state) {
    case 1:
      return "Sleep";
    case 2:
      return "Polling";
    case 3:
      return "Disabled";
    case 4:
      return "PortConfigurationTraining";
    case 5:
      return "LinkUp";
    case 6:
      return "LinkErrorRecovery";
    case 7:
      return "PhyTest";
    default:
      return "unknown";
  }
}

std::string width_name(int width_bits) {
  for (const auto& w : kWidths) {
    if (width_bits == w.bit) return w.name;
  }
  return "";
}

std::string width_names(int width_bits) {
  std::string out;
  for (const auto& w : kWidths) {
    if (width_bits & w.bit) {
      if (!out.empty()) out += ',';
      out += w.name;
    }
  }
  return out;
}

int lanes(int width_bits) {
  for (const auto& w : kWidths) {
    if (width_bits == w.bit) return w.lanes;
  }
  return 0;
}

std::string active_speed_name(const PortInfo& pi) {
  if (pi.extended_speeds && pi.speed_ext_active != 0) {
    for (const auto& s : kExtSpeeds) {
      if (pi.speed_ext_active == s.bit) return s.name;
    }
    return "";
  }
  for (const auto& s : kBaseSpeeds) {
    if (pi.speed_active == s.bit) return s.name;
  }
  return "";
}

std::string enabled_speed_names(const PortInfo& pi) {
  return speed_names(pi.speed_enabled, pi.speed_ext_enabled, pi.extended_speeds);
}

std::string supported_speed_names(const PortInfo& pi) {
  return speed_names(pi.speed_supported, pi.speed_ext_supported, pi.extended_speeds);
}

double lane_gbps(const PortInfo& pi) {
  if (pi.extended_speeds && pi.speed_ext_active != 0) {
    for (const auto& s : kExtSpeeds) {
      if (pi.speed_ext_active == s.bit) return s.lane_gbps;
    }
    return 0;
  }
  for (const auto& s : kBaseSpeeds) {
    if (pi.speed_active == s.bit) return s.lane_gbps;
  }
  return 0;
}

int mtu_bytes(int mtu_code) { return (mtu_code >= 1 && mtu_code <= 5) ? (128 << mtu_code) : 0; }

PmaCapabilities decode_class_port_info(const std::uint8_t* d) {
  PmaCapabilities c;
  c.mask = static_cast<std::uint16_t>(mad_get_field(bytes(d), 0, IB_CPI_CAPMASK_F));
  c.mask2 = mad_get_field(bytes(d), 0, IB_CPI_CAPMASK2_F);
  return c;
}

const std::vector<CounterDef>& counter_defs() {
  static const std::vector<CounterDef> defs{
      {"symbol_errors_total", "SymbolErrorCounter",
       "Minor link errors detected on one or more physical lanes.", IB_PC_ERR_SYM_F,
       IB_PC_EXT_ERR_SYM_F, 1, K::error},
      {"link_error_recoveries_total", "LinkErrorRecoveryCounter",
       "Times the link error recovery process completed successfully.", IB_PC_LINK_RECOVERS_F,
       IB_PC_EXT_LINK_RECOVERS_F, 1, K::error},
      {"link_downed_total", "LinkDownedCounter",
       "Times the link error recovery process failed and the link went down.", IB_PC_LINK_DOWNED_F,
       IB_PC_EXT_LINK_DOWNED_F, 1, K::error},
      {"receive_errors_total", "PortRcvErrors", "Packets received with an error.", IB_PC_ERR_RCV_F,
       IB_PC_EXT_ERR_RCV_F, 1, K::error},
      {"receive_remote_physical_errors_total", "PortRcvRemotePhysicalErrors",
       "Packets received marked with the EBP delimiter.", IB_PC_ERR_PHYSRCV_F,
       IB_PC_EXT_ERR_PHYSRCV_F, 1, K::error},
      {"receive_switch_relay_errors_total", "PortRcvSwitchRelayErrors",
       "Packets received that could not be forwarded.", IB_PC_ERR_SWITCH_REL_F,
       IB_PC_EXT_ERR_SWITCH_REL_F, 1, K::error},
      {"transmit_discards_total", "PortXmitDiscards",
       "Outbound packets discarded because the port was down or congested.", IB_PC_XMT_DISCARDS_F,
       IB_PC_EXT_XMT_DISCARDS_F, 1, K::error},
      {"transmit_constraint_errors_total", "PortXmitConstraintErrors",
       "Outbound packets not sent because of partition or raw-packet constraints.",
       IB_PC_ERR_XMTCONSTR_F, IB_PC_EXT_ERR_XMTCONSTR_F, 1, K::error},
      {"receive_constraint_errors_total", "PortRcvConstraintErrors",
       "Inbound packets discarded because of partition or raw-packet constraints.",
       IB_PC_ERR_RCVCONSTR_F, IB_PC_EXT_ERR_RCVCONSTR_F, 1, K::error},
      {"local_link_integrity_errors_total", "LocalLinkIntegrityErrors",
       "Times local physical errors exceeded the LocalPhyErrors threshold.", IB_PC_ERR_LOCALINTEG_F,
       IB_PC_EXT_ERR_LOCALINTEG_F, 1, K::error},
      {"excessive_buffer_overrun_errors_total", "ExcessiveBufferOverrunErrors",
       "Times OverrunErrors consecutive flow control update periods each had a buffer overrun.",
       IB_PC_ERR_EXCESS_OVR_F, IB_PC_EXT_ERR_EXCESS_OVR_F, 1, K::error},
      {"vl15_dropped_total", "VL15Dropped",
       "Incoming VL15 (subnet management) packets dropped for lack of buffers.",
       IB_PC_VL15_DROPPED_F, IB_PC_EXT_VL15_DROPPED_F, 1, K::error},
      {"qp1_dropped_total", "QP1Dropped", "Incoming QP1 (GSI) packets dropped.", IB_PC_QP1_DROP_F,
       IB_PC_EXT_QP1_DROP_F, 1, K::qp1_dropped},
      {"transmit_wait_ticks_total", "PortXmitWait",
       "Ticks during which the port had data to send but sent none (a congestion signal).",
       IB_PC_XMT_WAIT_F, IB_PC_EXT_XMT_WAIT_F, 1, K::xmit_wait},
      {"transmit_bytes_total", "PortXmitData",
       "Bytes transmitted on all VLs, excluding link packets (PortXmitData counts 4-octet "
       "words; multiplied by 4).",
       IB_PC_XMT_BYTES_F, IB_PC_EXT_XMT_BYTES_F, 4, K::data},
      {"receive_bytes_total", "PortRcvData",
       "Bytes received on all VLs, excluding link packets (PortRcvData counts 4-octet words; "
       "multiplied by 4).",
       IB_PC_RCV_BYTES_F, IB_PC_EXT_RCV_BYTES_F, 4, K::data},
      {"transmit_packets_total", "PortXmitPkts",
       "Packets transmitted on all VLs, including packets with errors.", IB_PC_XMT_PKTS_F,
       IB_PC_EXT_XMT_PKTS_F, 1, K::data},
      {"receive_packets_total", "PortRcvPkts",
       "Packets received on all VLs, including packets with errors.", IB_PC_RCV_PKTS_F,
       IB_PC_EXT_RCV_PKTS_F, 1, K::data},
      {"unicast_transmit_packets_total", "PortUnicastXmitPkts", "Unicast packets transmitted.",
       IB_NO_FIELD, IB_PC_EXT_XMT_UPKTS_F, 1, K::ietf},
      {"unicast_receive_packets_total", "PortUnicastRcvPkts", "Unicast packets received.",
       IB_NO_FIELD, IB_PC_EXT_RCV_UPKTS_F, 1, K::ietf},
      {"multicast_transmit_packets_total", "PortMulticastXmitPkts",
       "Multicast packets transmitted.", IB_NO_FIELD, IB_PC_EXT_XMT_MPKTS_F, 1, K::ietf},
      {"multicast_receive_packets_total", "PortMulticastRcvPkts", "Multicast packets received.",
       IB_NO_FIELD, IB_PC_EXT_RCV_MPKTS_F, 1, K::ietf},
  };
  return defs;
}

bool needs_port_counters(const PmaCapabilities& caps) { return !caps.extended_errors(); }

std::uint64_t field_max(enum MAD_FIELDS field) {
  std::array<std::uint8_t, IB_MAD_SIZE> buf{};
  mad_set_field(buf.data(), 0, field, 0xffffffffu);
  return mad_get_field(buf.data(), 0, field);
}

std::vector<CounterValue> merge_counters(const PmaCapabilities& caps, const std::uint8_t* basic,
                                         const std::uint8_t* extended) {
  std::vector<CounterValue> out;
  for (const auto& def : counter_defs()) {
    if (def.kind == K::xmit_wait && !caps.xmit_wait()) continue;
    if (def.kind == K::qp1_dropped && !caps.qp1_dropped()) continue;
    bool from_extended = false;
    switch (def.kind) {
      case K::data:
        from_extended = caps.extended();
        break;
      case K::ietf:
        if (!caps.extended_ietf()) continue;
        from_extended = true;
        break;
      case K::error:
      case K::xmit_wait:
      case K::qp1_dropped:
        from_extended = caps.extended_errors();
        break;
    }
    CounterValue v;
    v.def = &def;
    if (from_extended) {
      if (!extended) continue;
      v.value = static_cast<double>(mad_get_field64(bytes(extended), 0, def.extended)) * def.scale;
    } else {
      if (!basic || def.basic == IB_NO_FIELD) continue;
      std::uint32_t raw = mad_get_field(bytes(basic), 0, def.basic);
      v.value = static_cast<double>(raw) * def.scale;
      v.saturated = raw >= field_max(def.basic);
    }
    out.push_back(v);
  }
  return out;
}

const std::vector<DetailAttribute>& detail_attributes() {
  static const std::vector<DetailAttribute> attributes{
      {IB_GSI_PORT_RCV_ERROR_DETAILS,
       "port_rcv_error_details",
       {
           {"receive_local_physical_errors_total", "PortLocalPhysicalErrors",
            "Received packets with a physical error: bad CRC, bad length, a lane error "
            "(part of PortRcvErrors).",
            IB_PC_RCV_LOCAL_PHY_ERR_F},
           {"receive_malformed_packet_errors_total", "PortMalformedPktErrors",
            "Received packets that were malformed (part of PortRcvErrors).",
            IB_PC_RCV_MALFORMED_PKT_ERR_F},
           {"receive_buffer_overrun_errors_total", "PortBufferOverrunErrors",
            "Received packets dropped because the receive buffer overran (part of "
            "PortRcvErrors).",
            IB_PC_RCV_BUF_OVR_ERR_F},
           {"receive_dlid_mapping_errors_total", "PortDLIDMappingErrors",
            "Received packets whose DLID the switch could not forward (part of PortRcvErrors).",
            IB_PC_RCV_DLID_MAP_ERR_F},
           {"receive_vl_mapping_errors_total", "PortVLMappingErrors",
            "Received packets dropped for an SL to VL mapping error (part of PortRcvErrors).",
            IB_PC_RCV_VL_MAP_ERR_F},
           {"receive_looping_errors_total", "PortLoopingErrors",
            "Received packets dropped because they would leave through the port they came in "
            "(a routing loop; part of PortRcvErrors).",
            IB_PC_RCV_LOOPING_ERR_F},
       }},
      {IB_GSI_PORT_XMIT_DISCARD_DETAILS,
       "port_xmit_discard_details",
       {
           {"transmit_inactive_discards_total", "PortInactiveDiscards",
            "Outbound packets discarded because the port was not active (part of "
            "PortXmitDiscards).",
            IB_PC_XMT_INACT_DISC_F},
           {"transmit_neighbor_mtu_discards_total", "PortNeighborMTUDiscards",
            "Outbound packets discarded because they exceeded the neighbor's MTU (part of "
            "PortXmitDiscards).",
            IB_PC_XMT_NEIGH_MTU_DISC_F},
           {"transmit_switch_lifetime_limit_discards_total", "PortSwLifetimeLimitDiscards",
            "Outbound packets discarded because they outlived the switch lifetime limit "
            "(part of PortXmitDiscards).",
            IB_PC_XMT_SW_LIFE_DISC_F},
           {"transmit_switch_hol_lifetime_limit_discards_total", "PortSwHOQLifetimeLimitDiscards",
            "Outbound packets discarded because they waited at the head of the queue past its "
            "lifetime limit: a stalled downstream (part of PortXmitDiscards).",
            IB_PC_XMT_SW_HOL_DISC_F},
       }},
  };
  return attributes;
}

void add_detail_counters(MetricsBuilder& out, std::string_view prefix, const Labels& labels,
                         const std::vector<std::vector<std::uint8_t>>& details,
                         const std::function<bool(std::string_view metric)>& keep) {
  const auto& attributes = detail_attributes();
  for (std::size_t a = 0; a < details.size() && a < attributes.size(); ++a) {
    if (details[a].size() < IB_PC_DATA_SZ) continue;
    for (const auto& def : attributes[a].counters) {
      if (keep && !keep(def.metric)) continue;
      std::string name(prefix);
      name += def.metric;
      std::string help(def.help);
      help += " (";
      help += def.pma_name;
      help += ")";
      out.counter(name, help, labels,
                  static_cast<double>(mad_get_field(bytes(details[a].data()), 0, def.field)));
    }
  }
}

namespace {
// One past the last octet any of `fields` covers: each is set to all ones in a zeroed buffer.
template <class Fields, class Set>
std::size_t octets_covered(const Fields& fields, Set set) {
  std::size_t end = 0;
  for (auto field : fields) {
    if (field == IB_NO_FIELD) continue;
    std::array<std::uint8_t, IB_PC_DATA_SZ> buffer{};
    set(buffer.data(), field);
    for (std::size_t i = buffer.size(); i > end; --i) {
      if (buffer[i - 1]) {
        end = i;
        break;
      }
    }
  }
  return end;
}
void set_ones32(std::uint8_t* b, MAD_FIELDS f) { mad_set_field(b, 0, f, 0xffffffffu); }
void set_ones64(std::uint8_t* b, MAD_FIELDS f) { mad_set_field64(b, 0, f, ~std::uint64_t{0}); }

std::size_t counter_octets(enum MAD_FIELDS CounterDef::*field,
                           void (*set)(std::uint8_t*, MAD_FIELDS)) {
  std::vector<MAD_FIELDS> fields;
  for (const auto& def : counter_defs()) fields.push_back(def.*field);
  return octets_covered(fields, set);
}
}  // namespace

std::size_t port_counters_octets() {
  static const std::size_t octets = counter_octets(&CounterDef::basic, set_ones32);
  return octets;
}

std::size_t port_counters_extended_octets() {
  static const std::size_t octets = counter_octets(&CounterDef::extended, set_ones64);
  return octets;
}

std::uint16_t vl_xmit_wait(const std::uint8_t* data, int vl) {
  if (vl < 0 || vl >= kVlXmitWaitCounters) return 0;
  auto field = static_cast<MAD_FIELDS>(IB_PC_PORT_VL_XMIT_WAIT0_F + vl);
  return static_cast<std::uint16_t>(mad_get_field(bytes(data), 0, field));
}

std::string vl_xmit_wait_name(int vl) { return "PortVLXmitWait" + std::to_string(vl); }

std::size_t port_vl_xmit_wait_octets() {
  static const std::size_t octets = [] {
    std::vector<MAD_FIELDS> fields;
    for (int vl = 0; vl < kVlXmitWaitCounters; ++vl) {
      fields.push_back(static_cast<MAD_FIELDS>(IB_PC_PORT_VL_XMIT_WAIT0_F + vl));
    }
    return octets_covered(fields, set_ones32);
  }();
  return octets;
}

std::size_t detail_octets(std::size_t a) {
  static const std::vector<std::size_t> octets = [] {
    std::vector<std::size_t> out;
    for (const auto& attribute : detail_attributes()) {
      std::vector<MAD_FIELDS> fields;
      for (const auto& def : attribute.counters) fields.push_back(def.field);
      out.push_back(octets_covered(fields, set_ones32));
    }
    return out;
  }();
  return a < octets.size() ? octets[a] : IB_PC_DATA_SZ;
}

std::size_t attribute_size(std::uint8_t mgmt_class) {
  return mgmt_class == IB_PERFORMANCE_CLASS ? IB_PC_DATA_SZ : IB_SMP_DATA_SIZE;
}

}  // namespace ibfabric::mad
