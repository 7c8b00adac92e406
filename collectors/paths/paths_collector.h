#pragma once
// The `paths` collector: the route of every probe through the fabric, as `ibtracert` finds it.
// For each peer the `probe` collector probes whose InfiniBand port (LID) is known, it follows
// the switches' linear forwarding tables hop by hop with directed-route SMPs: the probe's leg
// (this node -> peer, by the peer's LID) and the answer's (peer -> this node, by this node's
// LID, from the peer's leaf on). It exports every cable of both legs as an info series, so that
// rules can join per-pair loss and spikes with the cables the pairs cross (localization).
// What it learns is cached across runs (LFT blocks are shared by 64 LIDs, switches by many
// peers) and verified when the SM shows activity; MADs per run are bounded.
// Metrics and keys: docs/collectors.md, "Collector `paths`".

#include "collectors/collector.h"

#include <chrono>
#include <cstdint>

namespace ibfabric::paths {

struct PathsConfig {
  // Every path is traced again from scratch (nodes and tables re-read) at least this often.
  std::chrono::nanoseconds refresh = std::chrono::hours(1);
  // The forwarding-table blocks the paths use are read again when the master SM's activity
  // count has moved, at most this often.
  std::chrono::nanoseconds verify_every = std::chrono::minutes(1);
  int max_mads_per_run = 1000;
  int max_hops = 32;  // cables per leg
};

// name "paths", off by default, every 30s. Keys: refresh, verify_every, max_mads_per_run,
// max_hops.
CollectorSpec spec();

// One cable as a leg crosses it: from the sending node's port to the receiving node's port.
struct Hop {
  std::uint64_t from_guid = 0;
  int from_port = 0;
  int from_type = 0;  // IB_NODE_CA, IB_NODE_SWITCH, IB_NODE_ROUTER
  std::uint64_t to_guid = 0;
  int to_port = 0;
  int to_type = 0;
  bool operator==(const Hop&) const = default;
};

// The cable of a hop named as ibfabric_fabric_link_info{cable_end="a"} names it: the "a" end is
// the switch end of a cable between a switch and anything else, else the end with the lower
// GUID, then port. a_to_b: the hop's packets leave the a end.
struct CableEnds {
  std::uint64_t a_guid = 0;
  int a_port = 0;
  std::uint64_t b_guid = 0;
  int b_port = 0;
  bool a_to_b = true;
};
CableEnds cable_ends(const Hop& hop);

}  // namespace ibfabric::paths
