#pragma once
// One run of the `ports` collector (PortsRun) and what it keeps from run to run (PortsState,
// owned by the PortsCollector). The collector lists the local ports and builds a PortsRun per
// collection; the run reads and updates the state. What it asks is ports_run.cpp's, what it
// makes of the answers (series, memory, state file) ports_emit.cpp's. Metrics:
// docs/collectors.md, "Collector `ports`".

#include "collectors/collector.h"
#include "collectors/fan_out.h"
#include "core/metrics.h"
#include "core/node_names.h"
#include "ib/state_store.h"
#include "mad/attributes.h"
#include "mad/engine.h"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ibfabric::ports {

struct PortsConfig;

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

// Failed queries per (device, port, side, attribute).
using ErrorKey = std::tuple<std::string, int, std::string, std::string>;

// What the collector keeps across runs: link memory, the last values of each side (for
// keep_unread), the state file, the error counters.
struct PortsState {
  PortsState(boost::asio::io_context& io, std::string state_directory)
      : store(io, std::move(state_directory), "ports") {}

  std::map<std::pair<std::string, int>, RememberedPeer> peers_seen;  // (device, port)
  std::map<std::string, std::string> local_descriptions;             // device -> NodeDescription
  std::map<std::tuple<std::string, int, std::string>, Side> memory;  // (device, port, side)
  // NodeInfo VendorID and DeviceID by node GUID, for the PortXmitWait tick: the peer's from
  // every run's NodeInfo, the local CA's asked once.
  std::map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> device_ids;
  // Link memory across restarts: read at the first collection, applied to the ports it lists.
  state::StateStore store;
  std::optional<state::State> pending_state;
  QueryErrors<ErrorKey> errors{"ports"};
};

// One collection: every query in flight at once, metrics built when the last one is back.
// Made with std::make_shared, then start().
class PortsRun : public FanOut {
 public:
  PortsRun(mad::ClientHandle& mad, const PortsConfig& config, const NodeNameMap& names,
           PortsState& state, Collector::Done done, std::vector<mad::LocalPort> ports);

  void start();

 private:
  struct Link {
    mad::LocalPort local_port;
    Side local;
    Side peer;
    bool local_answered = false;
    bool peer_asked = false;
    std::uint64_t subnet = 0;  // GID prefix of the local port (its PortInfo)
    std::string local_error;
    std::optional<std::string> local_description;
  };
  enum class Which { local, peer };
  Side& side(std::size_t i, Which w);
  static const char* side_label(Which w) { return w == Which::local ? "local" : "peer"; }

  void ask(std::size_t i, Which w, const char* attribute, mad::Request req,
           std::function<void(const mad::Response&)> on_ok, std::function<void()> on_fail = {});
  void query_local(std::size_t i);
  void query_peer(std::size_t i);
  void query_pma(std::size_t i, Which w, std::uint16_t lid, int port);

  void recall(const Link& link, Side& s, Which w, TimePoint now);
  void remember(const Link& link, const Side& s, Which w, TimePoint now);
  void emit_side(MetricsBuilder& out, const Link& link, const Side& s, Which w, TimePoint now);
  void emit_peer(MetricsBuilder& out, const Link& link, TimePoint now);
  void emit_tick(MetricsBuilder& out, const Link& link, const Side& s, Which w, const Labels& l);
  void restore_state();
  void save_state();
  void settled() override;

  const PortsConfig& config_;
  const NodeNameMap& names_;
  PortsState& s_;
  Collector::Done done_;
  std::vector<Link> links_;
  bool any_answer_ = false;
};

}  // namespace ibfabric::ports
