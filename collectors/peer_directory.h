#pragma once
// The peers the `probe` collector probes now, for the `paths` collector, which traces their
// routes. Shared through the CollectorContext, so it outlives both collectors across reloads.
// Loop thread only: both collectors run on the io_context.

#include <cstdint>
#include <string>
#include <vector>

namespace ibfabric::probe {

struct ProbedPeer {
  std::string name;       // the probe series' `peer` label
  std::string transport;  // "mad" or "udp": their `transport` label
  // The peer's InfiniBand port (its base LID), 0 when unknown: a UDP target that names no IB
  // port, or a MAD target the SA has not resolved yet. Such a peer cannot be placed.
  std::uint16_t lid = 0;
  bool operator==(const ProbedPeer&) const = default;
};

class PeerDirectory {
 public:
  void publish(std::vector<ProbedPeer> peers) { peers_ = std::move(peers); }
  const std::vector<ProbedPeer>& peers() const { return peers_; }

 private:
  std::vector<ProbedPeer> peers_;
};

}  // namespace ibfabric::probe
