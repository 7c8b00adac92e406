#pragma once
// The `ports` collector: for every local InfiniBand CA port, its PortInfo and PMA counters,
// and the same for the port at the other end of its cable (found by a one-hop directed route),
// with the peer's identity. Everything goes through the shared MAD engine.
// Metrics are documented in docs/collectors.md, "Collector `ports`".

#include "collectors/collector.h"
#include "collectors/mad/engine.h"
#include "collectors/mad/fan_out.h"
#include "collectors/mad/port_listing.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace ibfabric::ports {

// name "ports", enabled by default, every 15s. Config keys (besides enabled and interval):
//   devices: [mlx5_0, ...]   only these CAs (default: all)
//   peers: true              also read the port on the other end of each link
//   error_details: true      PortRcvErrorDetails and PortXmitDiscardDetails of both ends
//   link_memory: 24h         how long the far end of a cable is remembered once it is gone
CollectorSpec spec();

struct PortsConfig {
  std::vector<std::string> devices;
  bool peers = true;
  bool error_details = true;
  std::chrono::nanoseconds link_memory = std::chrono::hours(24);
};

class PortsCollector final : public Collector {
 public:
  // `lister` lists the local ports, off the loop (default: libibumad's, of config.devices), within
  // `listing_deadline`.
  PortsCollector(boost::asio::io_context& io,
                 std::function<std::shared_ptr<mad::Engine>()> engine_factory, PortsConfig config,
                 std::shared_ptr<const NodeNameMap> names, mad::PortListing::Lister lister = {},
                 std::chrono::nanoseconds listing_deadline = mad::PortListing::kDefaultDeadline);
  void collect(Done done) override;

  // Failed queries per (device, port, side, attribute).
  using ErrorKey = std::tuple<std::string, int, std::string, std::string>;

 private:
  friend class Pass;
  // The far end of a local port's cable as last seen, so that a cable that went down is still
  // named by what was plugged in (the alert fires exactly when the far end stops answering).
  struct RememberedPeer {
    std::uint64_t guid = 0;
    int port = 0;
    int type = 0;
    std::string description;
    std::chrono::steady_clock::time_point seen;
  };

  mad::ClientHandle mad_;
  PortsConfig config_;
  mad::PortListing listing_;
  std::shared_ptr<const NodeNameMap> names_;
  std::map<std::pair<std::string, int>, RememberedPeer> peers_seen_;  // (device, port)
  std::map<std::string, std::string> local_descriptions_;             // device -> NodeDescription
  mad::QueryErrors<ErrorKey> errors_;
};

}  // namespace ibfabric::ports
