#include "localizer/verdict_series.h"

#include "core/metrics.h"

#include <cmath>
#include <map>
#include <set>

namespace ibfabric::localizer {

// --- verdicts as series ---------------------------------------------------------------------

namespace {

using localize::Evidence;
using localize::Kind;
using localize::Suspect;
using localize::Verdict;

std::string port_name(const std::string& node, std::uint32_t port) {
  return node + " port " + std::to_string(port);
}

}  // namespace

std::string display_name(const localize::Evidence& e, const localize::Suspect& s) {
  const auto& hosts = e.hosts;
  switch (s.kind) {
    case localize::Kind::cable: {
      const auto& c = e.cables[s.cable];
      return port_name(c.a_name, c.a.port) + " <-> " + port_name(c.b_name, c.b.port);
    }
    case localize::Kind::congestion: {
      const auto& c = e.cables[s.cable];
      return s.a_to_b
                 ? port_name(c.a_name, c.a.port) + " (to " + port_name(c.b_name, c.b.port) + ")"
                 : port_name(c.b_name, c.b.port) + " (to " + port_name(c.a_name, c.a.port) + ")";
    }
    case localize::Kind::host:
      return "host " + hosts[s.host].name;
    case localize::Kind::responder:
      return hosts[s.host].name + "'s responder";
    case localize::Kind::prober:
      return hosts[s.host].name + "'s prober";
  }
  return "";
}

namespace {

// The culprit's labels, as the alerts name it: a cable or a congested port by both ends
// (node_* the a end, or the sending port), a host by its node.
Labels identity(const Evidence& e, const Suspect& s) {
  if (s.kind == Kind::cable || s.kind == Kind::congestion) {
    const auto& c = e.cables[s.cable];
    bool a_first = s.kind == Kind::cable || s.a_to_b;
    const auto& near = a_first ? c.a : c.b;
    const auto& far = a_first ? c.b : c.a;
    return {{"kind", s.kind == Kind::cable ? "cable" : "congestion"},
            {"node_guid", hex_guid(near.guid)},
            {"port", std::to_string(near.port)},
            {"node_name", a_first ? c.a_name : c.b_name},
            {"remote_node_guid", hex_guid(far.guid)},
            {"remote_port", std::to_string(far.port)},
            {"remote_node_name", a_first ? c.b_name : c.a_name}};
  }
  return {{"kind", "host"},
          {"node_guid", hex_guid(e.hosts[s.host].guid)},
          {"node_name", e.hosts[s.host].name}};
}

std::string listed(const std::vector<std::string>& items, std::size_t most) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < most; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > most) out += ", and " + std::to_string(items.size() - most) + " more";
  return out.empty() ? "none" : out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}
std::string percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%%", whole > 0 ? 100 * part / whole : 0.0);
  return buf;
}

// What the engineer reads first: the numbers behind the verdict, in words.
std::string evidence_text(const Evidence& e, const Verdict& v) {
  const Suspect& s = v.suspects.front();
  std::string out;
  if (s.kind == Kind::cable) {
    const auto& c = e.cables[s.cable];
    std::string each;
    for (int d = 0; d < 2; ++d) {
      if (!s.directions[static_cast<std::size_t>(d)]) continue;
      auto link = localize::link_of(s.cable, d == 0);
      double sent = 0, lost = 0;
      for (const auto& pair : e.pairs) {
        if (std::find(pair.path.begin(), pair.path.end(), link) == pair.path.end()) continue;
        sent += pair.sent;
        lost += pair.lost;
      }
      each += std::string(each.empty() ? "" : "; ") + "packets " +
              (d == 0 ? c.a_name + " -> " + c.b_name : c.b_name + " -> " + c.a_name) + ": " +
              number(lost) + " of " + number(sent) + " probes lost (" + percent(lost, sent) + ")";
    }
    out = "In the last minute " + each + ". Counters in 10 minutes:";
    bool any = false;
    for (auto [node, port] : {std::pair{c.a_name, c.a}, std::pair{c.b_name, c.b}}) {
      auto it = e.counters.find(port);
      if (it == e.counters.end()) continue;
      out += std::string(any ? ";" : "") + " " + port_name(node, port.port) + " (" +
             it->second.source + "): " + number(it->second.errors) + " errors, " +
             number(it->second.discards) + " discards";
      any = true;
    }
    return out + (any ? "." : " none counted at either end.");
  }
  if (s.kind == Kind::congestion) {
    const auto& c = e.cables[s.cable];
    auto it = e.congested.find(s.a_to_b ? c.a : c.b);
    out = number(v.late) + " of " + number(v.sent) +
          " probes of its pairs were late in the last "
          "minute";
    if (it != e.congested.end()) {
      char buf[64];
      if (it->second.share) {
        std::snprintf(buf, sizeof buf, "waited to send %.3g%% of the time", 100 * it->second.value);
      } else {
        std::snprintf(buf, sizeof buf, "waited %.1f PortXmitWait ticks per word sent",
                      it->second.value);
      }
      out += std::string("; it ") + buf + " over the last 5 minutes";
    }
    return out + ".";
  }
  const localize::Host& h = e.hosts[s.host];
  double sent[2] = {0, 0}, lost[2] = {0, 0}, late[2] = {0, 0}, pairs[2] = {0, 0};
  for (const auto& pair : e.pairs) {
    for (int role = 0; role < 2; ++role) {
      if ((role == 0 ? pair.peer : pair.prober) != s.host) continue;
      sent[role] += pair.sent;
      lost[role] += pair.lost;
      late[role] += pair.late;
      ++pairs[role];
    }
  }
  for (int role = 0; role < 2; ++role) {
    out += std::string(role ? "; its own probes: " : "In the last minute, answers to it: ") +
           number(late[role]) + " late, " + number(lost[role]) + " lost of " + number(sent[role]) +
           " (" + number(pairs[role]) + " pairs)";
  }
  char stall[32];
  std::snprintf(stall, sizeof stall, "%.1fs", h.loop_stall_seconds);
  out += std::string(". Its daemon: event loop stalled ") + stall + " in the minute, " +
         number(h.responder_dropped) + " probes left unanswered, " + number(h.local_failures) +
         " probes failed locally" + (h.daemon_down ? ", down (not answering scrapes)" : "") + ".";
  return out;
}

// The jobs whose nodes are in a verdict's blast radius (the hosts whose probed paths cross its
// culprit), most hurt first: by the number of their nodes in it, then by name.
std::vector<std::pair<std::uint32_t, std::size_t>> jobs_hurt(const query::Reading& r,
                                                             const Verdict& v) {
  std::map<std::uint32_t, std::size_t> nodes;
  for (auto h : v.blast_radius) {
    if (h >= r.host_jobs.size()) continue;
    for (auto j : r.host_jobs[h]) ++nodes[j];
  }
  std::vector<std::pair<std::uint32_t, std::size_t>> out(nodes.begin(), nodes.end());
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) {
    return std::tie(b.second, r.jobs[a.first]) < std::tie(a.second, r.jobs[b.first]);
  });
  return out;
}

void add_verdict(MetricsBuilder& out, const query::Reading& r, const Verdict& v) {
  const Evidence& e = r.evidence;
  const Suspect& culprit = v.suspects.front();
  Labels id = identity(e, culprit);
  out.gauge("ibfabric_localize_suspect",
            "A culprit the localizer names (both of the last two evaluations held it): a cable, "
            "a host or a congested port; value: the probe pairs it explains.",
            id, static_cast<double>(v.pairs.size()));
  std::vector<std::string> equal, pairs, radius;
  for (std::size_t i = 1; i < v.suspects.size(); ++i)
    equal.push_back(display_name(e, v.suspects[i]));
  std::vector<std::uint32_t> sorted = v.pairs;
  std::sort(sorted.begin(), sorted.end(), [&](std::uint32_t a, std::uint32_t b) {
    const auto& x = e.pairs[a];
    const auto& y = e.pairs[b];
    return std::tie(e.hosts[x.prober].name, e.hosts[x.peer].name) <
           std::tie(e.hosts[y.prober].name, e.hosts[y.peer].name);
  });
  for (auto p : sorted) {
    pairs.push_back(e.hosts[e.pairs[p].prober].name + " -> " + e.hosts[e.pairs[p].peer].name);
  }
  for (auto h : v.blast_radius) radius.push_back(e.hosts[h].name);
  std::sort(radius.begin(), radius.end());
  Labels info = id;
  info.emplace_back("cause", v.cause);
  info.emplace_back("why", v.why);
  info.emplace_back("evidence", evidence_text(e, v));
  info.emplace_back("pairs", listed(pairs, 6));
  info.emplace_back("equally_suspect", listed(equal, 8));
  info.emplace_back("blast_radius", listed(radius, 8));
  info.emplace_back("lacking", v.lacking.empty() ? "none" : v.lacking);
  std::vector<std::string> jobs;
  auto hurt = jobs_hurt(r, v);
  for (const auto& [j, n] : hurt) {
    jobs.push_back(r.jobs[j].first + "/" + r.jobs[j].second + " (" + std::to_string(n) +
                   (n == 1 ? " node)" : " nodes)"));
  }
  info.emplace_back("jobs", listed(jobs, 8));
  out.info("ibfabric_localize_suspect_info",
           "Why a suspect is named: its cause (loss, late, congestion), the reason, its evidence "
           "in words (probes each way, both ends' counters, its daemon's own trouble), the pairs "
           "it explains (prober -> peer), what the probes cannot tell it from, the hosts "
           "whose probed paths cross it, the evidence it was made without (lacking), and the "
           "training jobs on those hosts, most hurt first (jobs).",
           info);
  for (const auto& [j, n] : hurt) {
    Labels l = id;
    l.emplace_back("namespace", r.jobs[j].first);
    l.emplace_back("job_name", r.jobs[j].second);
    out.gauge("ibfabric_localize_suspect_job",
              "The training jobs a named culprit hurts (ibfabric:job_node): value, how many of "
              "the job's nodes are among the hosts whose probed paths cross it.",
              l, static_cast<double>(n));
  }
  for (auto [what, value] :
       {std::pair{"sent", v.sent}, std::pair{"lost", v.lost}, std::pair{"late", v.late}}) {
    Labels l = id;
    l.emplace_back("what", what);
    out.gauge("ibfabric_localize_suspect_probes",
              "Probes of the pairs a named suspect explains (a cable: of all pairs crossing its "
              "losing direction) in the last minute, by what became of them.",
              l, value);
  }
}

// The pairs no culprit named in the last 10 minutes explains, with what the probe alerts read:
// loss over the window, jitter over 500 us, more than 5 spikes in 10 minutes. Only pairs that
// show one (a healthy fabric serves none). Labelled as the daemons label a pair, but for job and
// instance (the localizer's own target labels take those): probe_job, probe_instance.
void add_unexplained_pairs(MetricsBuilder& out, const EvaluationReport& r) {
  out.declare("ibfabric_localize_pair_unexplained_loss_ratio",
              "Probe pairs that lost probes in the evidence window that no culprit named in the "
              "last 10 minutes explains: the share lost (IbfabricProbeLoss).",
              prometheus::MetricType::Gauge);
  out.declare("ibfabric_localize_pair_unexplained_jitter_seconds",
              "Probe pairs whose RTT jitter is above 500 us that no culprit named in the last 10 "
              "minutes explains (IbfabricProbeJitterHigh).",
              prometheus::MetricType::Gauge);
  out.declare("ibfabric_localize_pair_unexplained_rtt_spikes",
              "Probe pairs with more than 5 RTT spikes in 10 minutes that no culprit named in the "
              "last 10 minutes explains: the spikes (IbfabricProbeRttSpikes).",
              prometheus::MetricType::Gauge);
  if (!r.evaluated) return;
  for (const auto& [p, s] : r.reading.symptoms) {
    if (s.placed >= 0 && r.explained[static_cast<std::size_t>(s.placed)]) continue;
    Labels l{{"probe_job", p.job},
             {"probe_instance", p.instance},
             {"peer", p.peer},
             {"transport", p.transport},
             {"prober_name", s.prober_name.empty() ? p.instance : s.prober_name},
             {"peer_name", s.peer_name.empty() ? p.peer : s.peer_name}};
    if (s.lost > 0 && s.sent > 0) {
      out.gauge("ibfabric_localize_pair_unexplained_loss_ratio", "", l, s.lost / s.sent);
    }
    if (s.jitter_seconds >= 0) {
      out.gauge("ibfabric_localize_pair_unexplained_jitter_seconds", "", l, s.jitter_seconds);
    }
    if (s.spikes_10m >= 0)
      out.gauge("ibfabric_localize_pair_unexplained_rtt_spikes", "", l, s.spikes_10m);
  }
}

}  // namespace

void add_evaluation_metrics(MetricsBuilder& out, const EvaluationReport& r) {
  out.gauge("ibfabric_localize_up",
            "1 when the last evaluation made verdicts: its probe evidence read and fresh, the "
            "hosts and paths known; 0 when not (no verdict then; the log says why).",
            {}, r.evaluated ? 1 : 0);
  out.gauge("ibfabric_localize_store_up",
            "1 when the store answered the last evaluation's probe queries; 0 when it refused "
            "the connection, timed out, or answered an error or something that is not its "
            "API's JSON.",
            {}, r.reading.probes_read ? 1 : 0);
  out.gauge("ibfabric_localize_last_evaluation_timestamp_seconds",
            "The time the last evaluation's evidence is of (Unix seconds).", {}, r.at);
  out.gauge("ibfabric_localize_evaluation_duration_seconds",
            "Wall time of the last evaluation: reading the evidence and attributing it.", {},
            r.read_seconds + r.attribution_seconds);
  out.gauge("ibfabric_localize_attribution_duration_seconds",
            "Wall time of the last evaluation's attribution alone.", {}, r.attribution_seconds);
  out.declare("ibfabric_localize_evidence_age_seconds",
              "Age of each part of the evidence the last evaluation used: probes, the newest "
              "probe sample in the store; the others (hosts, paths, daemons, counters, "
              "congestion, symptoms), their oldest answer in use, kept from an earlier "
              "evaluation when a query failed or was not due.",
              prometheus::MetricType::Gauge);
  out.declare("ibfabric_localize_evidence_usable",
              "1 when a part of the evidence was read and is young enough to be used (its "
              "maximum age: docs/design.md); 0 when verdicts are made without it or withheld.",
              prometheus::MetricType::Gauge);
  for (std::size_t i = 0; i < query::kParts; ++i) {
    const auto& part = r.reading.parts[i];
    Labels l{{"evidence", query::part_name(static_cast<query::Part>(i))}};
    double age = i == static_cast<std::size_t>(query::Part::probes) ? r.evidence_age : part.age;
    if (age >= 0) out.gauge("ibfabric_localize_evidence_age_seconds", "", l, age);
    out.gauge("ibfabric_localize_evidence_usable", "", l, part.usable ? 1 : 0);
  }
  for (const auto& [query, seconds] : r.reading.query_seconds) {
    out.gauge("ibfabric_localize_query_duration_seconds",
              "Wall time of each query's last answer (paths: all batches of one read together).",
              {{"query", query}}, seconds);
  }
  for (const auto& [query, n] : r.reading.query_series) {
    out.gauge("ibfabric_localize_query_series", "Series each query's last answer held.",
              {{"query", query}}, n);
  }
  for (const auto& [query, n] : r.reading.query_bytes) {
    out.gauge("ibfabric_localize_query_response_bytes",
              "Size of each query's last answer (--query.max-response-bytes bounds it).",
              {{"query", query}}, n);
  }
  out.declare("ibfabric_localize_query_failures_total",
              "Queries that failed since start, by query and reason: timeout, connection "
              "(refused, reset, TLS), http (an error status or the store's error), malformed "
              "(not the API's JSON), too_large, auth (refused credentials, unreadable secret).",
              prometheus::MetricType::Counter);
  for (const auto& [key, n] : r.reading.failures_total) {
    out.counter("ibfabric_localize_query_failures_total", "",
                {{"query", key.first}, {"reason", key.second}}, n);
  }
  out.declare("ibfabric_localize_invalid_values_total",
              "Values the store answered that are not numbers (NaN, infinities), dropped since "
              "start, by query.",
              prometheus::MetricType::Counter);
  for (const auto& [query, n] : r.reading.invalid_values_total) {
    out.counter("ibfabric_localize_invalid_values_total", "", {{"query", query}}, n);
  }
  out.gauge("ibfabric_localize_queries_running",
            "Queries asked and not answered when the last evaluation ended: refreshes running on "
            "past its budget, or waiting for their turn (--query.max-concurrency).",
            {}, static_cast<double>(r.reading.refreshes_running));
  const auto& e = r.reading.evidence;
  out.gauge("ibfabric_localize_pairs",
            "Probed pairs of the last evaluation: placed (prober, peer and path known), "
            "unplaced (no verdict can use them), incomplete (the store lacks their lost or "
            "late series), or link_down (their path crosses a cable down in the window: its "
            "port-down alert names it).",
            {{"state", "placed"}}, static_cast<double>(e.pairs.size()));
  out.gauge("ibfabric_localize_pairs", "", {{"state", "unplaced"}},
            static_cast<double>(r.reading.pairs_unplaced));
  out.gauge("ibfabric_localize_pairs", "", {{"state", "incomplete"}},
            static_cast<double>(r.reading.pairs_incomplete));
  out.gauge("ibfabric_localize_pairs", "", {{"state", "link_down"}},
            static_cast<double>(r.reading.pairs_link_down));
  out.gauge("ibfabric_localize_hosts", "Hosts in the last evaluation's evidence.", {},
            static_cast<double>(e.hosts.size()));
  out.gauge("ibfabric_localize_cables", "Cables the traced paths cross.", {},
            static_cast<double>(e.cables.size()));
  out.gauge("ibfabric_localize_path_daemons_read",
            "Daemons whose paths the last evaluation read again (their path trace marker moved).",
            {}, static_cast<double>(r.reading.path_instances_read));
  out.gauge("ibfabric_localize_probe_plan_hosts",
            "Hosts the probe plan (/probe-plan) gives peers: the hosts of jobs on more than one "
            "node.",
            {}, static_cast<double>(r.plan_hosts));
  out.gauge("ibfabric_localize_probe_plan_jobs",
            "Jobs on more than one node whose hosts the probe plan makes a ring of probed pairs.",
            {}, static_cast<double>(r.plan_jobs));
  out.declare("ibfabric_localize_suspect", "", prometheus::MetricType::Gauge);
  out.declare("ibfabric_localize_withheld_info",
              "A suspect made but not named: evidence it needs is too old to use (lacking); "
              "named again once that evidence is.",
              prometheus::MetricType::Gauge);
  // The verdicts of this evaluation, or those kept from the last one that made any.
  const EvaluationReport& made = r.kept ? *r.kept : r;
  if (made.evaluated) {
    out.gauge("ibfabric_localize_verdicts_age_seconds",
              "How old the evidence of the verdicts served is: 0 when the last evaluation made "
              "them; after a failed one, those of the last that did not fail (kept for up to "
              "three evaluation intervals).",
              {}, r.at - made.at);
  }
  add_unexplained_pairs(out, made);
  if (!made.evaluated) return;
  const auto& m = made.reading.evidence;
  for (const auto& v : made.verdicts) add_verdict(out, made.reading, v);
  for (const auto& v : made.withheld) {
    Labels l = identity(m, v.suspects.front());
    l.emplace_back("cause", v.cause);
    l.emplace_back("lacking", v.lacking);
    out.info("ibfabric_localize_withheld_info", "", l);
  }
}

}  // namespace ibfabric::localizer
