#include "localize/late.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace ibfabric::localize {
namespace {

// Its pairs' probes; of a congested port, its blast radius (the hosts of the pairs it delays).
void fill_counts(const Evidence& e, Verdict& v) {
  std::vector<bool> seen(e.hosts.size(), false);
  for (std::uint32_t p : v.pairs) {
    const Pair& pair = e.pairs[p];
    v.sent += pair.sent;
    v.lost += pair.lost;
    v.late += pair.late;
    if (v.suspects.front().kind != Kind::congestion) continue;
    for (HostId h : {pair.prober, pair.peer}) {
      if (!seen[h]) {
        seen[h] = true;
        v.blast_radius.push_back(h);
      }
    }
  }
}

// The hosts (with trouble of their own or without: `troubled`) that `late` says are late.
// Each late pair's culprit is the host of the two whose pairs are late more often (both when
// equal); a host is late when it is the culprit of enough pairs and late probes, more than
// min_late_rate of its probes, half or more of its pairs late, and late_over_others times as
// often as the pairs it is no part of (a stall of the whole machine names nobody).
void late_hosts(const Evidence& e, const Options& o, std::vector<Verdict>& out,
                const std::vector<double>& late, bool troubled) {
  const auto& pairs = e.pairs;
  const std::size_t hosts = e.hosts.size();
  std::vector<double> h_sent(hosts, 0), h_late(hosts, 0);
  double all_sent = 0, all_late = 0;
  std::vector<std::vector<std::uint32_t>> pairs_of(hosts);
  for (std::uint32_t p = 0; p < pairs.size(); ++p) {
    const Pair& pair = pairs[p];
    if (pair.sent <= 0 || pair.peer == pair.prober) continue;
    all_sent += pair.sent;
    all_late += late[p];
    for (HostId h : {pair.prober, pair.peer}) {
      h_sent[h] += pair.sent;
      h_late[h] += late[p];
      pairs_of[h].push_back(p);
    }
  }
  auto ratio = [&](HostId h) { return h_sent[h] > 0 ? h_late[h] / h_sent[h] : 0; };
  std::vector<std::vector<std::uint32_t>> culprit_of(hosts);
  std::vector<double> explained(hosts, 0);
  for (std::uint32_t p = 0; p < pairs.size(); ++p) {
    const Pair& pair = pairs[p];
    if (late[p] <= 0 || pair.sent <= 0 || pair.peer == pair.prober) continue;
    double top = std::max(ratio(pair.prober), ratio(pair.peer));
    for (HostId h : {pair.prober, pair.peer}) {
      if (ratio(h) >= top * 0.999) {
        culprit_of[h].push_back(p);
        explained[h] += late[p];
      }
    }
  }
  for (HostId h = 0; h < hosts; ++h) {
    if (own_trouble(e.hosts[h], o) != troubled) continue;
    const auto& mine = culprit_of[h];
    if (static_cast<double>(mine.size()) < o.min_late_pairs || explained[h] < o.min_late) {
      continue;
    }
    if (ratio(h) <= o.min_late_rate) continue;
    auto late_pairs = std::count_if(pairs_of[h].begin(), pairs_of[h].end(),
                                    [&](std::uint32_t p) { return late[p] > 0; });
    if (2 * static_cast<std::size_t>(late_pairs) < pairs_of[h].size()) continue;
    double others_sent = all_sent - h_sent[h], others_late = all_late - h_late[h];
    double others = others_sent > 0 ? others_late / others_sent : 0;
    if (ratio(h) <= o.late_over_others * others) continue;
    Verdict v;
    v.cause = "late";
    Suspect s;
    s.kind = Kind::host;
    s.host = h;
    v.suspects.push_back(s);
    v.pairs = mine;
    fill_counts(e, v);
    v.rate = ratio(h);
    v.blast_radius = {h};
    v.settled = troubled;
    v.why = troubled ? "most of its pairs are late, far more than the rest of the fabric, and "
                       "its own daemon shows trouble"
                     : "most of its pairs are late, far more than the rest of the fabric";
    out.push_back(std::move(v));
  }
}

}  // namespace

void late_verdicts(const Evidence& e, const Options& o, std::vector<Verdict>& out) {
  const auto& pairs = e.pairs;
  const auto links = static_cast<LinkId>(e.cables.size() * 2);
  // Congestion first: per late pair, the congested ports it crosses and its culprit among
  // them (the one that waits the most; a share of time ranks before ticks per word).
  std::vector<std::optional<LinkId>> congestion_culprit(pairs.size());
  std::map<LinkId, const PortWait*> congested_links;
  if (!e.congested.empty()) {
    for (LinkId l = 0; l < links; ++l) {
      const Cable& cable = e.cables[cable_of(l)];
      const PortRef& sender = a_to_b(l) ? cable.a : cable.b;
      auto it = e.congested.find(sender);
      if (it != e.congested.end()) congested_links[l] = &it->second;
    }
  }
  std::map<LinkId, double> link_sent, link_late, culprit_late;
  std::map<LinkId, std::vector<std::uint32_t>> culprit_pairs;
  if (!congested_links.empty()) {
    for (std::uint32_t p = 0; p < pairs.size(); ++p) {
      const Pair& pair = pairs[p];
      std::optional<LinkId> best;
      for (LinkId l : pair.path) {
        auto it = congested_links.find(l);
        if (it == congested_links.end()) continue;
        link_sent[l] += pair.sent;
        link_late[l] += pair.late;
        if (pair.late <= 0) continue;
        if (!best) {
          best = l;
          continue;
        }
        const PortWait& a = *it->second;
        const PortWait& b = *congested_links[*best];
        if ((a.share && !b.share) || (a.share == b.share && a.value > b.value)) best = l;
      }
      if (best) {
        congestion_culprit[p] = best;
        culprit_late[*best] += pair.late;
        culprit_pairs[*best].push_back(p);
      }
    }
  }
  std::set<LinkId> congestion_named;
  for (const auto& [l, late] : culprit_late) {
    if (late < o.min_late || link_sent[l] <= 0 || link_late[l] / link_sent[l] <= 0.01) continue;
    congestion_named.insert(l);
    Verdict v;
    v.cause = "congestion";
    Suspect s;
    s.kind = Kind::congestion;
    s.cable = cable_of(l);
    s.a_to_b = a_to_b(l);
    v.suspects.push_back(s);
    v.pairs = culprit_pairs[l];
    fill_counts(e, v);
    v.rate = v.sent > 0 ? v.late / v.sent : 0;
    v.why = "the pairs crossing it are late while it waits to send";
    v.settled = true;  // its own PortXmitWait
    out.push_back(std::move(v));
  }
  // Late hosts: a host with trouble of its own is judged on all its late probes; one without,
  // on those no named congestion explains (incast into a host, or a few stray spikes beside
  // the congestion that delays the rest, make no late host).
  std::vector<double> all(pairs.size()), unexplained(pairs.size());
  for (std::uint32_t p = 0; p < pairs.size(); ++p) {
    all[p] = pairs[p].late;
    bool congested = congestion_culprit[p] && congestion_named.count(*congestion_culprit[p]);
    unexplained[p] = congested ? 0 : pairs[p].late;
  }
  late_hosts(e, o, out, all, true);
  late_hosts(e, o, out, unexplained, false);
}

// One verdict per host: a host named for loss and for being late (a long stall does both)
// is one culprit.
void merge_host_verdicts(std::vector<Verdict>& out) {
  std::map<HostId, std::size_t> single;
  std::vector<Verdict> merged;
  for (auto& v : out) {
    bool lone_host = v.suspects.size() == 1 && v.suspects.front().kind != Kind::cable &&
                     v.suspects.front().kind != Kind::congestion;
    if (!lone_host) {
      merged.push_back(std::move(v));
      continue;
    }
    HostId h = v.suspects.front().host;
    auto it = single.find(h);
    if (it == single.end()) {
      single[h] = merged.size();
      merged.push_back(std::move(v));
      continue;
    }
    Verdict& into = merged[it->second];
    into.cause = "loss and late";
    into.suspects.front().kind = Kind::host;
    std::set<std::uint32_t> pairs(into.pairs.begin(), into.pairs.end());
    pairs.insert(v.pairs.begin(), v.pairs.end());
    into.pairs.assign(pairs.begin(), pairs.end());
    into.why = "its pairs are late and lose, and its own daemon shows trouble";
    into.settled = into.settled || v.settled;
  }
  out = std::move(merged);
}

}  // namespace ibfabric::localize
