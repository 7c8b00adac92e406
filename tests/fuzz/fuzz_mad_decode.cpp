// libFuzzer target: what the daemon does with a MAD answer's bytes, which come from whatever
// node answered on the fabric. The input is the whole answer as umad_recv() delivers it; its
// management class (octet 1) picks the data offset as in mad::Response. The probe collector's
// decoders (ping answers, SA NodeRecord tables) run on it, then the ports collector's on the
// attribute data when it is as long as the collector requires (64 octets for SMP attributes,
// IB_PC_DATA_SZ for PMA ones), as collectors/ports does.

#include "collectors/probe/mad_ping.h"
#include "mad/attributes.h"
#include "mad/engine.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mad = ibfabric::mad;

namespace probe = ibfabric::probe;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  mad::Response r;
  r.status = mad::Status::ok;
  r.mad.assign(data, data + size);
  const std::uint8_t* attr = r.data();
  std::size_t attr_size = r.data_size();
  if ((attr == nullptr) != (attr_size == 0)) __builtin_trap();
  if (attr_size > size) __builtin_trap();

  (void)r.get(IB_PORT_LID_F);
  (void)r.get(IB_PC_ERR_SYM_F);
  (void)r.get64(IB_PC_EXT_XMT_BYTES_F);
  (void)r.get64(IB_NODE_GUID_F);
  (void)r.get_string(IB_NODE_DESC_F);
  // The probe collector's: an answer to a ping, an SA NodeRecord table.
  (void)probe::decode_ping_hold(attr, attr_size);
  for (const auto& rec : probe::decode_node_records(data, size)) {
    if (rec.lid == 0 || rec.description.size() > 64) __builtin_trap();
  }

  if (attr_size < IB_SMP_DATA_SIZE) return 0;
  // The collector copies the attribute data out of the response (attribute_data()).
  std::vector<std::uint8_t> copy(attr, attr + attr_size);
  auto pi = mad::decode_port_info(copy.data());
  (void)mad::state_name(pi.state);
  (void)mad::phys_state_name(pi.phys_state);
  (void)mad::width_name(pi.width_active);
  (void)mad::width_names(pi.width_supported);
  (void)mad::active_speed_name(pi);
  (void)mad::enabled_speed_names(pi);
  (void)mad::supported_speed_names(pi);
  (void)mad::lanes(pi.width_active);
  (void)mad::lane_gbps(pi);
  (void)mad::mtu_bytes(pi.neighbor_mtu);
  (void)mad::mtu_bytes(pi.mtu_capability);

  if (attr_size < IB_PC_DATA_SZ) return 0;
  auto caps = mad::decode_class_port_info(copy.data());
  // The same answer as PortCounters and as PortCountersExtended, alone and together.
  (void)mad::needs_port_counters(caps);
  (void)mad::merge_counters(caps, copy.data(), nullptr);
  (void)mad::merge_counters(caps, nullptr, copy.data());
  for (const auto& v : mad::merge_counters(caps, copy.data(), copy.data())) {
    if (v.def == nullptr || !(v.value >= 0)) __builtin_trap();
  }
  return 0;
}
