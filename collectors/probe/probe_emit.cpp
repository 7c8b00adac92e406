// What a probe collection reports: the collector's problems, the responder's counts, and each
// peer's round trips, losses and spikes since the last collection. The probing itself (timers,
// sockets, MADs, answers) is probe_run.cpp's.
#include "collectors/probe/probe_run.h"

namespace ibfabric::probe {

void ProbeRun::fill(MetricsBuilder& out, CollectResult& result) {
  std::vector<std::string> problems = errors_;
  problems.insert(problems.end(), mad_errors_.begin(), mad_errors_.end());
  problems.insert(problems.end(), send_errors_.begin(), send_errors_.end());
  if (!responder_error_.empty()) problems.push_back(responder_error_);
  send_errors_.clear();
  for (const auto& e : problems) {
    result.success = false;
    result.error += (result.error.empty() ? "" : "; ") + e;
  }
  const char* responder_help = "Probe requests this daemon's responders answered.";
  out.counter("ibfabric_probe_responder_requests_total", responder_help, {{"transport", "udp"}},
              static_cast<double>(responder_requests_));
  if (service_) {
    out.counter("ibfabric_probe_responder_requests_total", responder_help, {{"transport", "mad"}},
                static_cast<double>(service_->answered()));
    out.counter("ibfabric_probe_responder_dropped_total",
                "Probe requests the MAD responder left unanswered (over "
                "mad_responder_max_per_second).",
                {{"transport", "mad"}}, static_cast<double>(service_->dropped()));
  }
  if (auto self = node_labels()) {
    out.info("ibfabric_probe_node_info",
             "This node as probes and alerts name it: the CA of the port it probes from "
             "(node-name-map, else NodeDescription, else GUID), or its host name without "
             "InfiniBand.",
             *self);
  }
  out.gauge("ibfabric_probe_interval_seconds",
            "Time between two probes to one peer, after the max_probes_per_second cap.", {},
            std::chrono::duration<double>(interval_).count());
  out.gauge("ibfabric_probe_peers", "Peers this node probes, after the max_peers subset.", {},
            static_cast<double>(peers_.size()));
  if (!config_.plan_url.empty()) {
    out.gauge("ibfabric_probe_plan_peers",
              "Peers probed because ibfabric-localize's probe plan gave them (the training jobs "
              "this node runs), within max_peers.",
              {}, static_cast<double>(planned_));
    out.gauge("ibfabric_probe_plan_up",
              "1 when the last ask for the probe plan (plan_url) answered; its peers are kept "
              "while it does not.",
              {}, plan_up_.value_or(false) ? 1 : 0);
  }
  out.gauge("ibfabric_probe_targets_unresolved",
            "Configured MAD targets the subnet administrator does not know (a host that went "
            "away, or a wrong name or GUID): not probed, and no failure of this collector.",
            {}, static_cast<double>(unresolved_.size()));
  for (const auto& peer : peers_) {
    const auto& s = peer->stats;
    Labels l{{"peer", peer->name}, {"transport", peer->mad ? "mad" : "udp"}};
    out.counter("ibfabric_probe_sent_total", "Probes sent to the peer.", l,
                static_cast<double>(s.sent()));
    out.counter("ibfabric_probe_received_total", "Probe replies received in time.", l,
                static_cast<double>(s.received()));
    out.counter("ibfabric_probe_lost_total", "Probes without a reply within the timeout.", l,
                static_cast<double>(s.lost()));
    if (peer->mad) {
      const char* failed_help =
          "MAD probes that failed at this daemon, by reason: port_error (its port broke under "
          "them), mad_status (the answer carried a MAD status). Not counted in sent or lost.";
      for (auto [reason, n] : {std::pair{"port_error", peer->port_errors},
                               std::pair{"mad_status", peer->mad_statuses}}) {
        Labels f = l;
        f.emplace_back("reason", reason);
        out.counter("ibfabric_probe_failed_total", failed_help, f, static_cast<double>(n));
      }
    }
    out.counter("ibfabric_probe_spikes_total",
                "Probes whose RTT exceeded spike_multiplier x the peer's rolling baseline "
                "median and the absolute spike_floor.",
                l, static_cast<double>(s.spikes()));
    out.counter("ibfabric_probe_host_spikes_total",
                "Of the spikes, those the responder's hold time explains: the RTT minus the "
                "time the responder held the probe was no spike (a paused or busy remote "
                "host, not the network).",
                l, static_cast<double>(s.host_spikes()));
    const auto& bounds = rtt_buckets();
    out.histogram("ibfabric_probe_rtt_seconds", "Round-trip time of answered probes.", l, bounds,
                  s.bucket_counts(), s.received(), s.sum());
    out.histogram("ibfabric_probe_network_rtt_seconds",
                  "Round-trip time minus the time the responder held the probe: the "
                  "network's share (answers that carry the hold time only).",
                  l, bounds, s.network_bucket_counts(), s.network_count(), s.network_sum());
    if (auto v = s.last_rtt()) {
      out.gauge("ibfabric_probe_last_rtt_seconds", "RTT of the latest answered probe.", l, *v);
    }
    if (auto v = s.last_network()) {
      out.gauge("ibfabric_probe_last_network_rtt_seconds",
                "RTT minus responder hold time of the latest answered probe.", l, *v);
    }
    const char* window_help = "RTT over the latest `window` answered probes, by statistic.";
    for (auto [stat, q] : {std::pair{"p50", 0.5}, std::pair{"p99", 0.99}}) {
      if (auto v = s.percentile(q)) {
        Labels w = l;
        w.emplace_back("stat", stat);
        out.gauge("ibfabric_probe_rtt_window_seconds", window_help, w, *v);
      }
    }
    if (auto v = s.max()) {
      Labels w = l;
      w.emplace_back("stat", "max");
      out.gauge("ibfabric_probe_rtt_window_seconds", window_help, w, *v);
    }
    out.gauge("ibfabric_probe_jitter_seconds",
              "RFC 3550 jitter of consecutive RTTs: J += (|D| - J) / 16.", l, s.jitter());
    if (auto v = s.baseline()) {
      out.gauge("ibfabric_probe_baseline_rtt_seconds",
                "Median RTT of the peer's recent non-spike probes, the spike rule's baseline.", l,
                *v);
    }
  }
}

}  // namespace ibfabric::probe
