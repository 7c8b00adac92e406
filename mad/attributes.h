#pragma once
// Decoding of the IB attributes more than one collector reads: NodeInfo, PortInfo and
// LinearForwardingTable (SMP), ClassPortInfo, PortCounters and PortCountersExtended (PMA).
// Offsets and widths come from libibmad's field table; this file only says which field means
// what. Every function takes the attribute data (the MAD from its class's data offset on): 64
// octets for SMP attributes, the PMA's whole 192-octet data area (IB_PC_DATA_SZ) for PMA
// attributes; the caller checks the length.

#include "core/metrics.h"

#include <infiniband/mad.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ibfabric::mad {

// A unicast LID (1-0xbfff): one that can be asked by LID. 0 is "none yet", 0xc000 and up are
// multicast or permissive.
inline bool routable_lid(std::uint16_t lid) {
  return lid >= IB_MIN_UCAST_LID && lid <= IB_MAX_UCAST_LID;
}

// The attribute data an answer of `mgmt_class` must carry: the PMA's whole data area (192
// octets; the extended error counters of PortCountersExtended lie past the first 64), else an
// SMP attribute (64).
std::size_t attribute_size(std::uint8_t mgmt_class);

// Attribute ids, node types and management classes are libibmad's names (<infiniband/mad.h>:
// CLASS_PORT_INFO, IB_GSI_PORT_COUNTERS, IB_NODE_SWITCH, ...). libibmad names none of the bits
// below (opensm's iba/ib_types.h does, but is not a library header), so they are ours.

// ClassPortInfo.CapabilityMask / CapabilityMask2 bits of the PerfMgt class (IBA vol 1, 16.1.2).
constexpr std::uint16_t kPmAllPortSelect = 1u << 8;
constexpr std::uint16_t kPmExtWidthSupported = 1u << 9;  // PortCountersExtended, all fields
constexpr std::uint16_t kPmExtWidthNoIetf = 1u << 10;    // PortCountersExtended, no uni/multicast
constexpr std::uint16_t kPmXmitWaitSupported = 1u << 12;
constexpr std::uint16_t kPmQp1DropSupported = 1u << 15;
constexpr std::uint32_t kPm2AdditionalExtCounters = 1u << 1;  // error counters in the extended set

// PortInfo.CapabilityMask bit: LinkSpeedExt* fields are valid.
constexpr std::uint32_t kPortCapExtendedSpeeds = 1u << 14;

// Octets, not ints: a swept switch port keeps one in the topology and one in the memory of
// last values (28 octets with its optional, 76 with ints).
struct PortInfo {
  std::uint16_t lid = 0;
  std::uint16_t sm_lid = 0;
  std::uint8_t lmc = 0;
  std::uint8_t local_port = 0;
  std::uint8_t state = 0;  // 1 Down, 2 Init, 3 Armed, 4 Active
  // 1 Sleep, 2 Polling, 3 Disabled, 4 Training, 5 LinkUp, 6 ErrorRecovery
  std::uint8_t phys_state = 0;
  std::uint32_t capability_mask = 0;
  std::uint8_t width_active = 0;  // bit masks as in PortInfo: 1 1X, 2 4X, 4 8X, 8 12X, 16 2X
  std::uint8_t width_enabled = 0;
  std::uint8_t width_supported = 0;
  std::uint8_t speed_active = 0;  // 1 SDR, 2 DDR, 4 QDR
  std::uint8_t speed_enabled = 0;
  std::uint8_t speed_supported = 0;
  // Capability bit 14: the LinkSpeedExt* fields below are valid. A switch's external ports
  // carry no capability mask; for them it comes from the switch's port 0.
  bool extended_speeds = false;
  // 1 FDR, 2 EDR, 4 HDR, 8 NDR (raw; used only if extended_speeds)
  std::uint8_t speed_ext_active = 0;
  std::uint8_t speed_ext_enabled = 0;
  std::uint8_t speed_ext_supported = 0;
  std::uint8_t neighbor_mtu = 0;  // 1 256, 2 512, 3 1024, 4 2048, 5 4096
  // Two 4-bit fields in one octet, so that OperationalVLs costs no memory per port.
  std::uint8_t mtu_capability : 4 = 0;
  // OperationalVLs: 1 VL0, 2 VL0-1, 3 VL0-3, 4 VL0-7, 5 VL0-14 (operational_data_vls()).
  std::uint8_t oper_vls : 4 = 0;
};
static_assert(sizeof(PortInfo) <= 24, "a swept switch port keeps two of these");

// How many data VLs PortInfo.OperationalVLs enables (VL 0 .. n-1): 1, 2, 4, 8 or 15; 0 for 0
// (not set, as on a port that is down) and for the reserved values.
int operational_data_vls(int oper_vls);

PortInfo decode_port_info(const std::uint8_t* data);

// One record of the SA's PortInfoRecord table (attribute 0x12): EndPortLID, PortNum, Options,
// then the port's PortInfo as the SM last read it (octets 4-67 of the 72-octet record).
struct PortInfoRecord {
  std::uint16_t lid = 0;  // EndPortLID: a switch's LID for each of its ports
  int port = 0;
  PortInfo info;
};
constexpr std::size_t kPortInfoRecordSize = 72;
// Calls `each` with every record of an SA GetTableResp as the engine returns it (the whole MAD
// buffer; an RMPP-reassembled table is as long as its records), decoded one at a time (a table
// of 50,000 ports is not held decoded). Only whole records are read: a table cut short (the
// simulator's shim carries no RMPP: its first segment only) gives those it holds.
void for_each_port_info_record(const std::uint8_t* mad, std::size_t size,
                               const std::function<void(const PortInfoRecord&)>& each);

struct NodeInfo {
  std::uint64_t guid = 0;
  std::uint64_t port_guid = 0;
  int type = 0;        // IB_NODE_CA, IB_NODE_SWITCH, IB_NODE_ROUTER
  int num_ports = 0;   // external ports (a switch's port 0 not counted)
  int local_port = 0;  // LocalPortNum: the port the SMP entered the node by
  std::uint32_t vendor_id = 0;
  std::uint32_t device_id = 0;
};

NodeInfo decode_node_info(const std::uint8_t* data);

// LinearForwardingTable (SMP attribute 0x19): block `lid / kLftBlockLids`, attribute modifier
// the block number, one egress port per LID. kLftNoRoute: the switch has no route to that LID.
constexpr int kLftBlockLids = 64;
constexpr int kLftNoRoute = 0xff;
inline std::uint32_t lft_block(std::uint16_t lid) { return lid / kLftBlockLids; }
inline int lft_port(const std::uint8_t* block, std::uint16_t lid) {
  return block[lid % kLftBlockLids];
}

// NodeInfo.NodeType: "CA", "switch", "router", else "unknown".
const char* node_type_name(int type);

const char* state_name(int state);       // "ACTIVE"
const char* phys_state_name(int state);  // "LinkUp"
// "4X"; "" for 0 or an unknown bit.
std::string width_name(int width_bits);
// Comma-separated names of every set bit: "1X,4X".
std::string width_names(int width_bits);
// The active speed's name: the extended one when valid and set ("NDR"), else "SDR"/"DDR"/"QDR".
std::string active_speed_name(const PortInfo& pi);
// Every speed in the enabled/supported masks, base then extended: "SDR,DDR,QDR,FDR,EDR,HDR".
std::string enabled_speed_names(const PortInfo& pi);
std::string supported_speed_names(const PortInfo& pi);
int lanes(int width_bits);  // 4 for 4X, 0 when unknown
// Nominal signalling rate per lane in Gb/s, as the kernel prints it (SDR 2.5 ... NDR 100).
double lane_gbps(const PortInfo& pi);
int mtu_bytes(int mtu_code);  // 0 when unknown

struct PmaCapabilities {
  std::uint16_t mask = 0;
  std::uint32_t mask2 = 0;
  bool extended() const { return (mask & (kPmExtWidthSupported | kPmExtWidthNoIetf)) != 0; }
  bool extended_ietf() const { return (mask & kPmExtWidthSupported) != 0; }
  bool extended_errors() const { return extended() && (mask2 & kPm2AdditionalExtCounters) != 0; }
  bool xmit_wait() const { return (mask & kPmXmitWaitSupported) != 0; }
  bool qp1_dropped() const { return (mask & kPmQp1DropSupported) != 0; }
};

PmaCapabilities decode_class_port_info(const std::uint8_t* data);

// One PMA counter as the collector exports it.
struct CounterDef {
  std::string_view metric;    // without the ibfabric_ports_ prefix
  std::string_view pma_name;  // the name perfquery prints
  std::string_view help;
  enum MAD_FIELDS basic;     // PortCounters field; IB_NO_FIELD when not in PortCounters
  enum MAD_FIELDS extended;  // PortCountersExtended field; IB_NO_FIELD when not there
  double scale;              // PortXmitData/PortRcvData count 4-octet words
  enum class Kind { error, data, ietf, xmit_wait, qp1_dropped } kind;
};
const std::vector<CounterDef>& counter_defs();

struct CounterValue {
  const CounterDef* def = nullptr;
  double value = 0;               // in base units (bytes for the data counters)
  std::optional<bool> saturated;  // set for values from 32-bit PortCounters: pegged at max
};

// Which counters to take from where, given the capabilities: PortCounters always carries the
// error counters unless the extended set has them too.
bool needs_port_counters(const PmaCapabilities& caps);

// Values from PortCounters (basic) and PortCountersExtended (extended, may be null) for a
// port with `caps`: the 64-bit value where the extended set has the counter, else the basic
// one with its saturation flag. A counter the port does not support is left out; so is any
// whose source attribute is null.
std::vector<CounterValue> merge_counters(const PmaCapabilities& caps, const std::uint8_t* basic,
                                         const std::uint8_t* extended);

// PortRcvErrorDetails and PortXmitDiscardDetails (IBA vol 1, 16.1.4.3-4): why a port counts
// receive errors and transmit discards. 16-bit counters, read with perfquery -E / -D.
struct DetailDef {
  std::string_view metric;    // without the collector's prefix
  std::string_view pma_name;  // the name perfquery prints
  std::string_view help;
  enum MAD_FIELDS field;
};
struct DetailAttribute {
  std::uint16_t attribute;  // IB_GSI_PORT_RCV_ERROR_DETAILS or IB_GSI_PORT_XMIT_DISCARD_DETAILS
  const char* name;         // for error counting: "port_rcv_error_details"
  std::vector<DetailDef> counters;
};
const std::vector<DetailAttribute>& detail_attributes();

// PortVLXmitWaitCounters (PMA attribute IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS, 0x1C; perfquery
// --vlxmitcounters): PortXmitWait of each VL, 16 bits each, which stop at all ones like every
// PMA counter; PortSelect as in PortCounters (IB_PC_PORT_SELECT_F).
constexpr int kVlXmitWaitCounters = 16;  // VL 0..15
constexpr std::uint16_t kVlXmitWaitMax = 0xffff;
std::uint16_t vl_xmit_wait(const std::uint8_t* data, int vl);
// "PortVLXmitWait3": the name perfquery prints.
std::string vl_xmit_wait_name(int vl);
// Octets of an answer the counters cover (the rest is reserved).
std::size_t port_vl_xmit_wait_octets();

// How many leading octets of an answer the counter definitions read: of PortCounters,
// PortCountersExtended, and detail_attributes()[a]. The rest is reserved (and from ibsim,
// not even zero), so it is not worth keeping between sweeps.
std::size_t port_counters_octets();
std::size_t port_counters_extended_octets();
std::size_t detail_octets(std::size_t a);

// Adds the counters of `details` (detail_attributes() order; an empty entry was not read) as
// counters named `prefix` + metric, with `labels`; only those `keep` accepts, if given.
void add_detail_counters(MetricsBuilder& out, std::string_view prefix, const Labels& labels,
                         const std::vector<std::vector<std::uint8_t>>& details,
                         const std::function<bool(std::string_view metric)>& keep = {});

// The maximum a field of PortCounters can hold (libibmad's field width): 0xffff for
// SymbolErrorCounter, 0xffffffff for PortXmitData.
std::uint64_t field_max(enum MAD_FIELDS field);

}  // namespace ibfabric::mad
