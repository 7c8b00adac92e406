#pragma once
// Decoding of SMInfo (SMP attribute 0x20) and the SA's SMInfoRecord table, and the derived
// per-port view the `sm` collector keeps between polls: master changes and a stalled activity
// count. Field offsets come from libibmad's field table (IB_SMINFO_*).

#include <infiniband/mad.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric::sm {

// SMInfo.SMState (IBA vol 1, 14.2.5.13).
enum SmInfoState : int {
  kNotActive = 0,
  kDiscovering = 1,
  kStandby = 2,
  kMaster = 3,
};
// "not_active", "discovering", "standby", "master"; "unknown" for anything else.
const char* state_name(int state);

struct SmInfo {
  std::uint64_t guid = 0;
  std::uint32_t activity_count = 0;
  int priority = 0;
  int state = 0;
  bool operator==(const SmInfo&) const = default;
};

// Octets of the SMInfo attribute (libibmad has no name for it).
constexpr std::size_t kSmInfoSize = 24;

// `data`: the SMInfo attribute (at least kSmInfoSize octets).
SmInfo decode_sm_info(const std::uint8_t* data);

struct SmInfoRecord {
  std::uint16_t lid = 0;
  SmInfo info;
  bool operator==(const SmInfoRecord&) const = default;
};

// The records of an SA GetTableResp for SMInfoRecord: `mad` is the whole answer (the SA
// header's AttributeOffset gives the record size). Slots with LID 0 or GUID 0 are padding of
// the last MAD and are left out; so is a trailing partial record.
std::vector<SmInfoRecord> decode_sm_info_records(const std::uint8_t* mad, std::size_t size);

// What one local port has seen of its master SM over successive polls.
//
// observe() takes what the SM the port points at (PortInfo.MasterSMLID) answered to SMInfo in
// one poll, or nullopt when it did not answer. A master whose GUID differs from the last master
// seen is a master change (failover or handover); the first master seen is not. The activity
// count of a healthy SM keeps moving; every poll since it was last seen moving (same master,
// same count, or no answer / not in master state) adds one to stalled_polls. A new master or a
// moved count resets it. Until a first master is seen nothing stalls.
class MasterTracker {
 public:
  void observe(const std::optional<SmInfo>& at_port_sm_lid);
  std::uint64_t master_changes() const { return changes_; }
  std::uint64_t stalled_polls() const { return stalled_; }
  const std::optional<SmInfo>& last_master() const { return master_; }

 private:
  std::optional<SmInfo> master_;
  std::uint64_t changes_ = 0;
  std::uint64_t stalled_ = 0;
};

}  // namespace ibfabric::sm
