#pragma once
// One run of the `paths` collector (PathsRun) and what it keeps from run to run (PathsState,
// owned by the PathsCollector). The collector builds a PathsRun per collection; the run reads
// and updates the state. Behaviour, metrics and keys: docs/collectors.md, "Collector `paths`".

#include "collectors/collector.h"
#include "collectors/fan_out.h"
#include "collectors/peer_directory.h"
#include "core/metrics.h"
#include "core/node_names.h"
#include "mad/attributes.h"
#include "mad/engine.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ibfabric::paths {

struct PathsConfig;

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

using Clock = std::chrono::steady_clock;
using Route = std::vector<std::uint8_t>;  // directed route: outgoing ports from the local node
using BlockKey = std::pair<std::uint64_t, std::uint32_t>;  // (switch GUID, LFT block)
using PeerKey = std::pair<std::string, std::string>;       // (peer, transport)

struct LegState {
  std::vector<Hop> hops;  // of the last good trace; empty: never traced
  std::string failure;    // reason the latest attempt failed; "" when it worked
  std::string detail;     // for the log line
};

struct PeerPath {
  std::uint16_t lid = 0;
  LegState to_peer, from_peer;
  std::set<BlockKey> blocks;      // forwarding-table blocks the legs were traced through
  Clock::time_point confirmed{};  // last trace or verification that found it unchanged
  bool stale = true;
  std::string cause = "new";  // why it is traced next
};

struct LftBlock {
  Route route;  // how the switch was reached
  std::array<std::uint8_t, mad::kLftBlockLids> ports{};
};

// What the collector learns across runs: this node and its master SM as last seen, the paths,
// and the cache of what the traces read (LFT blocks are shared by 64 LIDs, switches by many
// peers), plus the counters it exports since start.
struct PathsState {
  QueryErrors<std::string_view> errors{"paths"};  // by attribute

  // This node, as the last run found it.
  std::uint64_t local_guid = 0;
  int local_port = 0;
  std::uint16_t local_lid = 0;
  // The master SM, as the last run found it (guid 0: not known).
  std::uint64_t sm_guid = 0;
  std::optional<std::uint32_t> verified_activity;  // its ActCount at the last verification
  Clock::time_point verified_at{}, refreshed_at{};

  std::map<PeerKey, PeerPath> paths;
  std::map<BlockKey, LftBlock> lft;
  std::map<Route, mad::NodeInfo> nodes;
  std::map<std::pair<Route, int>, std::pair<std::uint16_t, int>> port_lids;  // (lid, lmc)
  std::map<std::uint64_t, std::string> descriptions;
  std::map<std::string, std::uint64_t> traces;  // by cause
  std::uint64_t mads = 0;
  int last_run_mads = 0;

  void forget_topology() {
    lft.clear();
    nodes.clear();
    port_lids.clear();
  }
  void all_stale(const char* cause) {
    for (auto& [key, path] : paths) {
      path.stale = true;
      path.cause = cause;
    }
  }
};

// One collection: this node's port, the master SM, verification of the tables in use, then the
// traces of new and stale paths, all through one fan-out; the snapshot is built when the last
// query has settled. Made with std::make_shared, then start().
class PathsRun : public FanOut {
 public:
  PathsRun(mad::ClientHandle& mad, const PathsConfig& config, PathsState& state,
           const probe::PeerDirectory& peers, const NodeNameMap& names, Collector::Done done);

  void start();

 private:
  using NodeCallback = std::function<void(const std::optional<mad::NodeInfo>&, const char*)>;
  using LftCallback = std::function<void(const LftBlock*, const char*)>;
  using LidCallback =
      std::function<void(std::optional<std::pair<std::uint16_t, int>>, const char*)>;
  struct Trace;  // one peer's trace in progress
  using TracePtr = std::shared_ptr<Trace>;

  bool ask_budgeted(const char* attribute, mad::Request request,
                    std::function<void(const mad::Response&)> on_ok,
                    std::function<void(const char* reason)> on_fail);

  // This node and its SM.
  void ask_local();
  void ask_sm();

  // What to trace.
  void plan(std::optional<std::pair<std::uint64_t, std::uint32_t>> sm);
  void update_peers();
  void verify_tables();
  void changed(const BlockKey& key, const char* cause);
  void verified();

  // Tracing.
  void trace_stale();
  void trace(const PeerKey& key);
  void start_leg(const TracePtr& t, bool forward);
  void next_node(const TracePtr& t, std::uint8_t out);
  void at_switch(const TracePtr& t, std::uint64_t guid);
  void check_destination(const TracePtr& t, const mad::NodeInfo& node);
  void arrived(const TracePtr& t, std::uint64_t guid, Route route);
  void fail(const TracePtr& t, const char* reason, std::string detail);
  void finish(const TracePtr& t);

  // Cached queries.
  void node_at(const Route& route, NodeCallback cb);
  void lft(const BlockKey& key, const Route& route, LftCallback cb);
  void port_lid(const Route& route, int port, LidCallback cb);
  void describe(std::uint64_t guid, const Route& route);

  // The snapshot.
  std::string name(std::uint64_t guid) const;
  void emit_leg(MetricsBuilder& out, const PeerKey& key, const char* leg_name, const LegState& leg,
                const PeerPath& path);
  void settled() override;

  static constexpr int fabric_max_route = 63;  // hops a directed route can hold

  const PathsConfig& config_;
  PathsState& s_;
  const probe::PeerDirectory& peers_;
  const NodeNameMap& names_;
  Collector::Done done_;
  Clock::time_point now_;
  std::optional<mad::NodeInfo> local_;
  std::uint16_t local_lid_ = 0, sm_lid_ = 0;
  std::string local_error_;
  int unplaced_ = 0;
  int verifying_ = 0;
  std::map<Route, std::vector<NodeCallback>> node_waiting_;
  std::map<BlockKey, std::vector<LftCallback>> lft_waiting_;
  std::set<std::uint64_t> described_;
};

}  // namespace ibfabric::paths
