#pragma once
// What the localizer reads: one snapshot of evidence over a window (a minute), assembled by
// whoever has it (ibfabric-localize from a Prometheus-compatible query API, the tests and the
// benchmarks from fabrics of their own). Plain values, indexes into the vectors; no I/O.

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ibfabric::localize {

using HostId = std::uint32_t;   // index into Evidence::hosts
using CableId = std::uint32_t;  // index into Evidence::cables
// A cable in one direction: cable * 2, +1 for b -> a.
using LinkId = std::uint32_t;

inline LinkId link_of(CableId cable, bool a_to_b) { return cable * 2 + (a_to_b ? 0 : 1); }
inline CableId cable_of(LinkId link) { return link / 2; }
inline bool a_to_b(LinkId link) { return link % 2 == 0; }

// A port of a node, as the collectors label it (node_guid, port).
struct PortRef {
  std::uint64_t guid = 0;
  std::uint32_t port = 0;
  auto operator<=>(const PortRef&) const = default;
};

// A cable by its two ends, as the paths collector names them: `a` the switch end of a host's
// cable, else the lower (GUID, port).
struct Cable {
  PortRef a, b;
  std::string a_name, b_name;  // the nodes' names (node-name-map, NodeDescription or GUID)
};

// A host: a node that probes, answers probes, or both; with what its own daemon says of itself
// over the window. None of this is network loss: a daemon that cannot send (its port, its MAD
// layer) or that stalls is evidence about its host.
struct Host {
  std::uint64_t guid = 0;
  std::string name;
  double loop_stall_seconds = 0;  // its event loop stalled this long in all
  double responder_dropped = 0;   // probes its responder left unanswered (over its rate cap)
  double local_failures = 0;      // its own probes that failed locally (port error, MAD status)
  bool daemon_down = false;       // its daemon does not answer scrapes
};

// A probed pair: a prober's probes to one peer over the window, and the path they take (both
// legs: the probe's and the answer's cables, each in its direction).
struct Pair {
  HostId prober = 0, peer = 0;
  std::string key;  // how the source names the pair (its labels), carried into the verdicts
  double sent = 0;  // probes that went out (local failures excluded)
  double lost = 0;  // of those, unanswered within the timeout
  double late = 0;  // of those, answered but spiking above the peer's baseline
  std::vector<LinkId> path;  // empty: not traced (the pair is no evidence for any cable)
};

// Counters of a port over the last 10 minutes, from whoever reads it.
struct PortCounters {
  double errors = 0;    // symbol errors, link error recoveries, link downed, receive errors
  double discards = 0;  // transmit discards
  std::string source;   // "fabric sweep", "its own daemon", "the daemon at its far end"
};

// A sending port that waits (ibfabric:port_congested:rate5m): how much, and in which unit.
struct PortWait {
  double value = 0;
  bool share = true;  // true: share of the time; false: XmitWait ticks per word (tick unknown)
};

// Evidence its source could not give fresh enough (docs/design.md, "Partial evidence"): the
// attribution runs without it, and each verdict says which of it bears on it.
struct Lacking {
  bool counters = false;    // Evidence::counters: what decides between a cable and its host
  bool congestion = false;  // Evidence::congested: what tells congestion from a late host
  bool daemons = false;     // Host's own trouble (stalls, responder drops, local failures, down)
  bool any() const { return counters || congestion || daemons; }
};

struct Evidence {
  std::vector<Host> hosts;
  std::vector<Cable> cables;
  std::vector<Pair> pairs;
  std::map<PortRef, PortCounters> counters;  // ports that counted errors or discards
  std::map<PortRef, PortWait> congested;     // sending ports that wait
  Lacking lacking;
};

}  // namespace ibfabric::localize
