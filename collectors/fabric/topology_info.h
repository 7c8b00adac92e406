#pragma once
// The fabric's node and cable info families (ibfabric_fabric_node_info, _link_info): the
// longest label text of the exposition (12.5 MB at 50,000 switch ports) and the same in every
// sweep's snapshot until the topology or the link memory changes, so the label cache holds them
// compressed (docs/design.md, "Memory of the fabric sweep"). They are made from a read-only
// copy of what they show, on a thread of their own, and compressed a part at a time as they are
// made: made whole first, their samples were the daemon's peak after each discovery.

#include "collectors/fabric/fabric_model.h"
#include "collectors/fabric/link_memory.h"
#include "core/metrics.h"
#include "core/node_names.h"

#include <cstddef>
#include <memory>

namespace ibfabric::fabric {

struct TopologyInfo {
  std::shared_ptr<const Topology> topology;
  LinkMemory links;  // a copy: the loop's goes on changing
  std::shared_ptr<const NodeNameMap> names;
  int shard = 0;
  int shards = 1;
};

// The families as samples (on the loop, when no thread can be started).
MetricFamilies topology_info_samples(const TopologyInfo& info);

// The same families as their compressed text (MetricFamily::text), made and compressed at most
// `part_samples` samples at a time; the text is the samples' text.
MetricFamilies topology_info_compressed(const TopologyInfo& info, std::size_t part_samples);

// Samples per part: a cable's info sample holds 214-219 octets of label text on the simulator's
// fat trees (docs/design.md), so under 0.5 MB of label text at a time.
inline constexpr std::size_t kTopologyInfoPart = 2048;

}  // namespace ibfabric::fabric
