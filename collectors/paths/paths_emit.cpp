// What a paths run reports: each probed peer's two legs (their hops as cables, or why a leg
// is untraced), how old each path is, and the run's own counts. The tracing is paths_run.cpp's.
#include "collectors/paths/paths_run.h"

namespace ibfabric::paths {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

constexpr const char* kHopInfoHelp =
    "A cable the leg's packets cross, in order (hop 1 at the sender), named by its two ends as "
    "ibfabric_fabric_link_info{cable_end=\"a\"} names them (node_* the a end, remote_* the b "
    "end); direction: which end sends.";

}  // namespace

std::string PathsRun::name(std::uint64_t guid) const {
  auto it = s_.descriptions.find(guid);
  return names_.name(guid, it == s_.descriptions.end() ? "" : it->second);
}

void PathsRun::emit_leg(MetricsBuilder& out, const PeerKey& key, const char* leg_name,
                        const LegState& leg, const PeerPath& path) {
  const auto& [peer, transport] = key;
  Labels leg_labels{{"peer", peer}, {"transport", transport}, {"leg", leg_name}};
  if (!leg.failure.empty()) {
    Labels l = leg_labels;
    l.emplace_back("reason", leg.failure);
    out.gauge("ibfabric_path_untraced",
              "Present (1) while the latest trace of the leg failed, with the reason; the "
              "cables of its last good trace stay exported.",
              l, 1);
  }
  if (leg.hops.empty()) return;
  out.gauge("ibfabric_path_hops", "Cables the leg crosses (ibfabric_path_hop_info series).",
            leg_labels, static_cast<double>(leg.hops.size()));
  out.gauge("ibfabric_path_age_seconds",
            "Seconds since the exported route of the leg was traced or confirmed.", leg_labels,
            seconds(now_ - path.confirmed));
  for (std::size_t i = 0; i < leg.hops.size(); ++i) {
    auto cable = cable_ends(leg.hops[i]);
    Labels l = leg_labels;
    l.emplace_back("hop", std::to_string(i + 1));
    l.emplace_back("node_guid", hex_guid(cable.a_guid));
    l.emplace_back("port", std::to_string(cable.a_port));
    l.emplace_back("node_name", name(cable.a_guid));
    l.emplace_back("remote_node_guid", hex_guid(cable.b_guid));
    l.emplace_back("remote_port", std::to_string(cable.b_port));
    l.emplace_back("remote_node_name", name(cable.b_guid));
    l.emplace_back("direction", cable.a_to_b ? "a_to_b" : "b_to_a");
    out.info("ibfabric_path_hop_info", kHopInfoHelp, l);
  }
}

void PathsRun::settled() {
  MetricsBuilder out;
  CollectResult result;
  int mads = asked();
  s_.mads += static_cast<std::uint64_t>(mads);
  s_.last_run_mads = mads;
  std::map<std::string, int> states{{"traced", 0}, {"untraced", 0}, {"pending", 0}};
  out.declare("ibfabric_path_hop_info", kHopInfoHelp, prometheus::MetricType::Gauge);
  for (const auto& [key, path] : s_.paths) {
    emit_leg(out, key, "to_peer", path.to_peer, path);
    emit_leg(out, key, "from_peer", path.from_peer, path);
    if (!path.to_peer.hops.empty()) {
      // The node the probes reach, so that rules can hold a host to account for its pairs
      // whatever name the probe target gives it.
      auto peer_guid = path.to_peer.hops.back().to_guid;
      out.info("ibfabric_path_peer_info",
               "The node a probed peer's port belongs to (the end of the leg to_peer), named "
               "as every node is: node-name-map, else NodeDescription, else GUID.",
               {{"peer", key.first},
                {"transport", key.second},
                {"peer_node_guid", hex_guid(peer_guid)},
                {"peer_node_name", name(peer_guid)}});
    }
    if (!path.to_peer.failure.empty() || !path.from_peer.failure.empty()) {
      ++states["untraced"];
    } else if (path.to_peer.hops.empty()) {
      ++states["pending"];
    } else {
      ++states["traced"];
    }
  }
  states["unplaced"] = unplaced_;
  for (const auto& [state, n] : states) {
    out.gauge("ibfabric_path_peers",
              "Probed peers by the state of their path: traced, untraced (the latest trace "
              "failed), pending (not traced yet: the MAD budget ran out) or unplaced (no "
              "InfiniBand LID known, e.g. a UDP target that names none).",
              {{"state", state}}, n);
  }
  for (const auto& [cause, n] : s_.traces) {
    out.counter("ibfabric_path_traces_total",
                "Traces of a peer's path, by cause: new (a new peer), route_change (a "
                "forwarding-table block it used changed), hop_lost (one no longer answered), "
                "sm_change, local_change, refresh, retry (the last attempt failed).",
                {{"cause", cause}}, static_cast<double>(n));
  }
  out.counter("ibfabric_path_mads_total", "SMPs the paths collector has sent.", {},
              static_cast<double>(s_.mads));
  out.gauge("ibfabric_path_run_mads", "SMPs the last run sent (max_mads_per_run bounds it).", {},
            mads);
  out.gauge("ibfabric_path_cached_tables",
            "Forwarding-table blocks (64 LIDs each) cached from the switches.", {},
            static_cast<double>(s_.lft.size()));
  out.declare("ibfabric_path_query_errors_total",
              "SMPs of the paths collector that failed, by attribute.",
              prometheus::MetricType::Counter);
  for (const auto& [attribute, n] : s_.errors.counts()) {
    out.counter("ibfabric_path_query_errors_total",
                "SMPs of the paths collector that failed, by attribute.",
                {{"attribute", std::string(attribute)}}, static_cast<double>(n));
  }
  if (!local_error_.empty()) {
    result.success = false;
    result.error = local_error_;
  }
  result.metrics = std::move(out).take();
  auto done = std::move(done_);
  done(std::move(result));
}

}  // namespace ibfabric::paths
