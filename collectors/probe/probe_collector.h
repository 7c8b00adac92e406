#pragma once
// The `probe` collector: active RTT probes to peers over UDP and over MAD (ibping's class, see
// mad_ping.h), responders that answer both, and per-peer statistics (histograms, windowed
// percentiles, jitter, spikes).
//
// Wire format (UDP payload, big-endian), request and reply alike:
//   0  "IBFP"  4  version (1)  5  type (1 request, 2 reply)  6  reserved (2)
//   8  sequence number (4)  12  prober token (8)  20  responder hold time in ns (8)  28  padding
// The responder copies the request, sets type 2, and writes how long the probe spent inside
// it (receive to send, CLOCK_MONOTONIC) so that the prober can tell host delay from network
// delay. Metrics and keys: docs/collectors.md, "Collector `probe`".

#include "collectors/collector.h"
#include "collectors/probe/probe_stats.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric::probe {

// A peer to probe. An entry with `address` is probed over UDP; any other over MAD (ibping's
// class), by `lid`, by port `guid`, or by node description (`name` alone), the last two
// resolved through the SA. A UDP entry may name the peer's InfiniBand port by `lid` or `guid`
// too: probes still go to the address, and the paths collector traces the route to that port.
struct TargetConfig {
  std::string name;              // the `peer` label; default: the address, LID or GUID
  std::string address;           // UDP: IP:PORT or [IPv6]:PORT
  std::uint16_t lid = 0;         // MAD; UDP: the peer's IB port
  std::uint64_t guid = 0;        // MAD: a port GUID; UDP: the peer's IB port
  std::string node_description;  // MAD: a node description, matched whole
  bool mad() const { return address.empty(); }
};

struct ProbeConfig {
  std::string udp_listen = ":10917";  // the UDP responder; "" = none
  bool mad_responder = true;          // answer ibping-compatible MAD probes
  double mad_responder_max_per_second = 1000;
  std::vector<TargetConfig> targets;
  bool discover = false;  // every CA port the SA knows (but this node's) is a MAD target
  std::chrono::nanoseconds resolve_interval = std::chrono::minutes(5);  // SA lookups
  std::chrono::nanoseconds probe_interval = std::chrono::seconds(1);    // per peer
  std::chrono::nanoseconds timeout = std::chrono::seconds(1);
  std::size_t payload_bytes = 64;  // UDP
  std::size_t max_peers = 64;
  // With more candidates than max_peers: 0 keeps one stable subset; else the subset moves on
  // by max_peers candidates every rotate_every (wall clock, so nodes rotate together), and
  // every candidate is probed once every ceil(candidates / max_peers) periods.
  std::chrono::nanoseconds rotate_every{0};
  double max_probes_per_second = 100;  // over all peers
  // ibfabric-localize's probe plan (http[s]://HOST:PORT/probe-plan; "" none): the peers of the
  // training jobs this node runs, probed first within max_peers, asked every plan_interval.
  std::string plan_url;
  std::chrono::nanoseconds plan_interval = std::chrono::seconds(30);
  std::size_t window = 1024;  // RTTs behind the percentiles
  SpikeRule spike;
};

// The wire format, exposed for tests.
constexpr std::size_t kHeaderBytes = 28;
struct Message {
  bool reply = false;
  std::uint32_t sequence = 0;
  std::uint64_t token = 0;
  std::uint64_t hold_ns = 0;
};
std::optional<Message> decode(const std::uint8_t* data, std::size_t size);
void encode(const Message& m, std::uint8_t* data);  // writes kHeaderBytes

// The peers one node probes when there are more than `max_peers`: a window of `max_peers`
// candidates in an order of this node's own (FNV-1a of "self|peer" sorted), so that N nodes do
// not make N^2 probes and every node picks a different subset. Rotation `slot` k starts the
// window at k * max_peers (cyclically); slot 0 is the stable subset.
std::vector<TargetConfig> choose_peers(const std::string& self, std::vector<TargetConfig> targets,
                                       std::size_t max_peers, std::uint64_t slot = 0);
// The rotation slot at `now`: 0 without rotation, else the number of whole periods since the
// epoch.
std::uint64_t rotation_slot(std::chrono::nanoseconds rotate_every,
                            std::chrono::system_clock::time_point now);

CollectorSpec spec();

}  // namespace ibfabric::probe
