#include "collectors/probe/mad_ping.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace ibfabric::probe {
namespace {

constexpr std::uint8_t kHoldMagic[4] = {'I', 'B', 'F', 'H'};
// NodeRecord: LID (2), reserved (2), NodeInfo (40), NodeDescription (64).
constexpr std::size_t kNodeRecordSize = 108;

std::uint8_t* mutable_bytes(const std::uint8_t* p) { return const_cast<std::uint8_t*>(p); }

}  // namespace

std::vector<std::uint8_t> encode_ping_answer(const std::string& host,
                                             std::chrono::nanoseconds hold) {
  std::vector<std::uint8_t> data(kPingDataSize, 0);
  std::memcpy(data.data(), host.data(), std::min(host.size(), kHoldOffset - 1));
  std::copy(kHoldMagic, kHoldMagic + 4, data.begin() + kHoldOffset);
  data[kHoldOffset + 4] = 1;
  auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, hold.count()));
  for (int i = 7; i >= 0; --i, ns >>= 8) data[kHoldOffset + 8 + i] = ns & 0xff;
  return data;
}

std::optional<std::chrono::nanoseconds> decode_ping_hold(const std::uint8_t* data,
                                                         std::size_t size) {
  if (data == nullptr || size < kPingDataSize) return std::nullopt;
  if (!std::equal(kHoldMagic, kHoldMagic + 4, data + kHoldOffset) || data[kHoldOffset + 4] != 1) {
    return std::nullopt;
  }
  std::uint64_t ns = 0;
  for (int i = 0; i < 8; ++i) ns = (ns << 8) | data[kHoldOffset + 8 + i];
  if (ns > static_cast<std::uint64_t>(std::chrono::nanoseconds(std::chrono::seconds(60)).count())) {
    return std::nullopt;  // not a hold time a responder could have meant
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}

std::string ping_host_name() {
  char host[kHoldOffset] = {};
  if (::gethostname(host, sizeof host - 1) < 0) std::strcpy(host, "?hostname?");
  std::string name = host;
  char domain[kHoldOffset] = {};
  if (::getdomainname(domain, sizeof domain - 1) == 0 && domain[0] != '\0') {
    name += std::string(".") + domain;
  }
  return name;
}

mad::Request node_record_query(std::uint64_t port_guid, const std::string& description) {
  // NodeRecord component mask bits (IBA 15.2.5.2): PortGUID 8, NodeDescription 14.
  constexpr std::uint64_t kPortGuidBit = 1ull << 8;
  constexpr std::uint64_t kNodeDescriptionBit = 1ull << 14;
  mad::Request req;
  req.mgmt_class = mad::kSubnAdm;
  req.method = IB_MAD_METHOD_GET_TABLE;
  req.attr_id = IB_SA_ATTR_NODERECORD;  // to lid 0: the engine asks the port's SM LID
  if (port_guid != 0) {
    req.set64(IB_SA_NR_PORT_GUID_F, port_guid);
    req.sa_component_mask = kPortGuidBit;
  } else if (!description.empty()) {
    req.payload.resize(IB_MAD_SIZE, 0);
    char text[IB_SMP_DATA_SIZE] = {};
    std::memcpy(text, description.data(), std::min(description.size(), sizeof text));
    mad_encode_field(req.payload.data(), IB_SA_NR_NODEDESC_F, text);
    req.sa_component_mask = kNodeDescriptionBit;
  }
  return req;
}

std::vector<NodeRecord> decode_node_records(const std::uint8_t* mad, std::size_t size) {
  std::vector<NodeRecord> records;
  if (mad == nullptr || size <= IB_SA_DATA_OFFS) return records;
  // AttributeOffset counts 8-octet words; 0 means the table is empty.
  std::size_t stride = 8u * mad_get_field(mutable_bytes(mad), 0, IB_SA_ATTROFFS_F);
  if (stride < kNodeRecordSize) return records;
  for (std::size_t at = IB_SA_DATA_OFFS; at + stride <= size; at += stride) {
    auto* record = mutable_bytes(mad + at);
    NodeRecord r;
    r.lid = static_cast<std::uint16_t>(mad_get_field(record, 0, IB_SA_NR_LID_F));
    if (r.lid == 0) continue;
    r.node_type = static_cast<int>(mad_get_field(record, 0, IB_SA_NR_TYPE_F));
    r.node_guid = mad_get_field64(record, 0, IB_SA_NR_GUID_F);
    r.port_guid = mad_get_field64(record, 0, IB_SA_NR_PORT_GUID_F);
    r.port = static_cast<int>(mad_get_field(record, 0, IB_SA_NR_LOCAL_PORT_F));
    char desc[IB_SMP_DATA_SIZE + 1] = {};
    mad_decode_field(record, IB_SA_NR_NODEDESC_F, desc);
    desc[IB_SMP_DATA_SIZE] = '\0';
    r.description.assign(desc, strnlen(desc, IB_SMP_DATA_SIZE));
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace ibfabric::probe
