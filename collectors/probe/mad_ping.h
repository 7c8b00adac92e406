#pragma once
// MAD probes, compatible with infiniband-diags' ibping: a Get of vendor class 0x32 with the
// OpenIB OUI (0x001405), attribute 0. The answer's 216-byte data area carries the responder's
// "hostname.domainname" (NUL-terminated, as `ibping -S` sends it, and what stock `ibping`
// prints), and ibfabricd's responder adds how long it held the probe, at data offsets
//   160  "IBFH"  164  version (1)  165  reserved (3)  168  hold time in ns (8, big-endian)
// An answer without that marker (from `ibping -S`) gives a round-trip time only.

#include "mad/engine.h"

#include <infiniband/mad.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric::probe {

constexpr std::uint8_t kPingClass = IB_VENDOR_OPENIB_PING_CLASS;
constexpr std::uint32_t kPingOui = IB_OPENIB_OUI;
constexpr std::size_t kPingDataSize = IB_VENDOR_RANGE2_DATA_SIZE;  // 216
// Inside the first 224 bytes of the MAD: the simulator's shim delivers no more than that.
constexpr std::size_t kHoldOffset = 160;

// The data of an answer: `host` (cut to fit before the marker) and the hold time.
std::vector<std::uint8_t> encode_ping_answer(const std::string& host,
                                             std::chrono::nanoseconds hold);
// The hold time in an answer's data, nullopt when it carries none (stock ibping -S).
std::optional<std::chrono::nanoseconds> decode_ping_hold(const std::uint8_t* data,
                                                         std::size_t size);
// What ibping -S answers with: "hostname.domainname", or "hostname" without a domain.
std::string ping_host_name();

// One record of the SA's NodeRecord table (one per port of every node that has a LID).
struct NodeRecord {
  std::uint16_t lid = 0;
  int node_type = 0;  // 1 CA, 2 switch, 3 router
  std::uint64_t node_guid = 0;
  std::uint64_t port_guid = 0;
  int port = 0;
  std::string description;
};
// SA GetTable of NodeRecords whose port GUID is `port_guid`, or whose node description is
// `description`, or (both empty) every NodeRecord.
mad::Request node_record_query(std::uint64_t port_guid, const std::string& description);
// Decodes an RMPP-reassembled GetTableResp (the whole MAD buffer as the engine returns it).
// Records with LID 0 are left out; a short or garbled buffer gives fewer records, never a read
// past `size`.
std::vector<NodeRecord> decode_node_records(const std::uint8_t* mad, std::size_t size);

}  // namespace ibfabric::probe
