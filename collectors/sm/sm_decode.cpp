#include "collectors/sm/sm_decode.h"

#include <cstdio>

namespace ibfabric::sm {

const char* state_name(int state) {
  switch (state) {
    case kNotActive:
      return "not_active";
    case kDiscovering:
      return "discovering";
    case kStandby:
      return "standby";
    case kMaster:
      return "master";
    default:
      return "unknown";
  }
}

SmInfo decode_sm_info(const std::uint8_t* data) {
  // mad_get_field takes a non-const buffer but does not write to it.
  auto* d = const_cast<std::uint8_t*>(data);
  SmInfo info;
  info.guid = mad_get_field64(d, 0, IB_SMINFO_GUID_F);
  info.activity_count = mad_get_field(d, 0, IB_SMINFO_ACT_F);
  info.priority = static_cast<int>(mad_get_field(d, 0, IB_SMINFO_PRIO_F));
  info.state = static_cast<int>(mad_get_field(d, 0, IB_SMINFO_STATE_F));
  return info;
}

namespace {

// SMInfoRecord (IBA vol 1, 15.2.5.13): RID = LID (16 bits) and 16 reserved bits, then the
// SMInfo attribute. libibmad's field table has no SMInfoRecord fields, so the record's LID is
// read here as the big-endian word it is.
constexpr std::size_t kRecordSmInfoOffset = 4;

std::uint16_t record_lid(const std::uint8_t* record) {
  return static_cast<std::uint16_t>((record[0] << 8) | record[1]);
}

}  // namespace

std::vector<SmInfoRecord> decode_sm_info_records(const std::uint8_t* mad, std::size_t size) {
  std::vector<SmInfoRecord> records;
  if (mad == nullptr || size <= IB_SA_DATA_OFFS) return records;
  // AttributeOffset counts 8-octet words; 0 means the table is empty.
  std::size_t stride = 8u * mad_get_field(const_cast<std::uint8_t*>(mad), 0, IB_SA_ATTROFFS_F);
  if (stride < kRecordSmInfoOffset + kSmInfoSize) return records;
  for (std::size_t at = IB_SA_DATA_OFFS; at + stride <= size; at += stride) {
    const std::uint8_t* record = mad + at;
    SmInfoRecord r{record_lid(record), decode_sm_info(record + kRecordSmInfoOffset)};
    if (r.lid == 0 || r.info.guid == 0) continue;
    records.push_back(r);
  }
  return records;
}

void MasterTracker::observe(const std::optional<SmInfo>& at_port_sm_lid) {
  if (at_port_sm_lid && at_port_sm_lid->state == kMaster) {
    const SmInfo& seen = *at_port_sm_lid;
    if (master_ && master_->guid != seen.guid) {
      ++changes_;
      stalled_ = 0;
    } else if (master_ && master_->activity_count == seen.activity_count) {
      ++stalled_;
    } else {
      stalled_ = 0;
    }
    master_ = seen;
  } else if (master_) {
    ++stalled_;
  }
}

}  // namespace ibfabric::sm
