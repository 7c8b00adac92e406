#pragma once
// The fabric collector's link memory (`link_memory`): the cables discovery saw, by their switch
// end, and who was at the far end, so that a cable that went down is still named by what was
// plugged in there. Kept flat: a sorted vector of 32-octet records and one name per node, where
// a map entry per cable holding both names cost 136 octets (6.8 MB at 50,000 switch ports).

#include "collectors/fabric/fabric_model.h"
#include "core/node_names.h"
#include "ib/state_file.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ibfabric::fabric {

struct RememberedLink {
  using TimePoint = std::chrono::steady_clock::time_point;
  std::uint64_t guid = 0;  // the switch end
  std::uint64_t remote_guid = 0;
  TimePoint seen;  // when a discovery last saw it
  std::uint8_t port = 0;
  std::uint8_t remote_port = 0;
  std::uint8_t remote_type = 0;  // IB_NODE_*; 0 unknown

  std::pair<std::uint64_t, int> end() const { return {guid, port}; }
};

class LinkMemory {
 public:
  using TimePoint = RememberedLink::TimePoint;
  using Duration = std::chrono::steady_clock::duration;

  // Sorted by switch end (GUID, then port).
  const std::vector<RememberedLink>& links() const { return links_; }
  std::size_t size() const { return links_.size(); }
  // The name of a node at either end of a remembered cable ("" when there is none).
  const std::string& name(std::uint64_t guid) const;

  // Every cable of `topology` at a switch that its discovery saw is remembered as seen `now`,
  // under the names `names` gives; a cable remembered and not seen keeps its time and names,
  // and goes once it has not been seen for `keep`.
  void remember(const Topology& topology, const NodeNameMap& names, TimePoint now, Duration keep);

  // Cables of a state file (their `seen` already on the steady clock, in `seen`), those not
  // seen for `keep` left out; a cable remembered already is newer and stays as it is. Returns
  // how many were added.
  std::size_t restore(const std::vector<state::LinkRecord>& records,
                      const std::vector<TimePoint>& seen, TimePoint now, Duration keep);

 private:
  // Replaces the records and keeps the names of the nodes they name: `names` first, then those
  // still in names_ (the first name of a GUID wins).
  void replace(std::vector<RememberedLink> links,
               std::vector<std::pair<std::uint64_t, std::string>> names);

  std::vector<RememberedLink> links_;
  std::vector<std::pair<std::uint64_t, std::string>> names_;  // sorted by GUID
};

}  // namespace ibfabric::fabric
