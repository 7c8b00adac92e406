#pragma once
// The `ports` collector: for every local InfiniBand CA port, its PortInfo and PMA counters,
// and the same for the port at the other end of its cable (found by a one-hop directed route),
// with the peer's identity. Everything goes through the shared MAD engine.
// Metrics are documented in docs/collectors.md, "Collector `ports`".

#include "collectors/collect_with_ports.h"
#include "collectors/collector.h"
#include "core/state_store.h"
#include "mad/attributes.h"
#include "mad/engine.h"
#include "mad/fan_out.h"
#include "mad/port_listing.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
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
//   keep_unread: 10m         how long a side whose queries were lost keeps its last values
CollectorSpec spec();

struct PortsConfig {
  std::vector<std::string> devices;
  bool peers = true;
  bool error_details = true;
  std::chrono::nanoseconds link_memory = std::chrono::hours(24);
  // How long the values of one side of a port whose queries were lost (timed out, or any
  // failure) are still reported from the last read. 0: not at all.
  std::chrono::nanoseconds keep_unread = std::chrono::minutes(10);
};

class PortsCollector final : public Collector {
 public:
  // `lister` lists the local ports, off the loop (default: libibumad's, of config.devices), within
  // `listing_deadline`.
  PortsCollector(boost::asio::io_context& io,
                 std::function<std::shared_ptr<mad::Engine>()> engine_factory, PortsConfig config,
                 std::shared_ptr<const NodeNameMap> names, mad::PortListing::Lister lister = {},
                 std::chrono::nanoseconds listing_deadline = mad::PortListing::kDefaultDeadline,
                 std::string state_directory = "");
  void collect(Done done) override;
  bool prepare_mad() override { return true; }

  // Failed queries per (device, port, side, attribute).
  using ErrorKey = std::tuple<std::string, int, std::string, std::string>;

  using TimePoint = std::chrono::steady_clock::time_point;

  // What one side of one link gave in a pass, and when each part was read; between passes,
  // the memory of that side (a part lost in a pass is taken from it for keep_unread).
  struct Side {
    std::optional<mad::PortInfo> port_info;
    std::uint16_t pma_lid = 0;  // the LID the PMA was asked at (a switch's port-0 LID)
    int pma_port = 0;
    std::optional<mad::PmaCapabilities> caps;
    std::vector<std::uint8_t> basic;     // PortCounters data, empty when not read
    std::vector<std::uint8_t> extended;  // PortCountersExtended data
    // PortRcvErrorDetails and PortXmitDiscardDetails data (mad::detail_attributes() order),
    // empty when not read.
    std::vector<std::vector<std::uint8_t>> details;
    // The peer's identity.
    std::optional<std::uint64_t> node_guid;
    int node_type = 0;
    int entered_port = 0;  // NodeInfo.LocalPortNum: the port the SMP entered the peer through
    std::optional<std::string> node_description;
    std::optional<std::uint32_t> switch_capability_mask;  // PortInfo of a switch's port 0
    TimePoint port_info_at, switch_port0_at, caps_at, basic_at, extended_at;
    std::vector<TimePoint> details_at;
    // A query of this side failed in this pass.
    bool lost = false;
    // The oldest part taken from memory in this pass.
    std::optional<TimePoint> stale_since;
  };

 private:
  friend class Pass;

  // The far end of a local port's cable as last seen, so that a cable that went down is still
  // named by what was plugged in (the alert fires exactly when the far end stops answering).
  struct RememberedPeer {
    std::uint64_t local_guid = 0;  // the local CA's node GUID (the state file checks it)
    std::uint64_t subnet = 0;      // the local port's GID prefix (so does it)
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
  std::map<std::tuple<std::string, int, std::string>, Side> memory_;  // (device, port, side)
  // Link memory across restarts: read at the first collection, applied to the ports it lists.
  state::StateStore state_;
  bool state_loaded_ = false;
  std::optional<state::State> pending_state_;
  mad::QueryErrors<ErrorKey> errors_;
};

}  // namespace ibfabric::ports
