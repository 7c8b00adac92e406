// The localizer on the scenarios the PromQL attribution was tested on (they were promtool cases
// of dashboards/alerts; each is here with what it must name, written by hand, never derived),
// plus the cases the rules got wrong: a host beside a large fault whose few extra losses lift
// its rate (bench/localization.py 4/full), and a daemon failing locally beside a real fault.
//
// The fabric is a small two-level fat tree (3 leaves, 2 spines, 2 hosts per leaf) routed as a
// subnet manager's linear forwarding tables route it: by destination, a host's traffic to another
// leaf going up through spine (host index mod 2). Evidence is one minute: 100 probes a pair
// every 10 s, a pair whose probe or answer crosses a dropping cable direction losing its share.

#include "localize/localizer.h"
#include "localize/confirmer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ibfabric::localize {
namespace {

constexpr int kLeaves = 3, kSpines = 2, kHostsPerLeaf = 2;
constexpr double kProbes = 100;  // a pair, every 10 s
constexpr double kSamples = 6;   // in the minute

struct Hop {
  std::string from;
  int from_port;
  std::string to;
  int to_port;
  auto operator<=>(const Hop&) const = default;
};

std::string host_name(int i) { return "h" + std::to_string(i); }
int host_index(const std::string& h) { return std::stoi(h.substr(1)) - 1; }
int leaf_of(const std::string& h) { return host_index(h) / kHostsPerLeaf + 1; }
int host_port(const std::string& h) { return host_index(h) % kHostsPerLeaf + 1; }
std::string leaf(int i) { return "leaf-" + std::to_string(i); }
std::string spine(int i) { return "spine-" + std::to_string(i); }

std::vector<Hop> route(const std::string& src, const std::string& dst) {
  int ls = leaf_of(src), ld = leaf_of(dst);
  std::vector<Hop> hops{{src, 1, leaf(ls), host_port(src)}};
  if (ls != ld) {
    int s = host_index(dst) % kSpines + 1;
    hops.push_back({leaf(ls), kHostsPerLeaf + s, spine(s), ls});
    hops.push_back({spine(s), ld, leaf(ld), kHostsPerLeaf + s});
  }
  hops.push_back({leaf(ld), host_port(dst), dst, 1});
  return hops;
}

Hop uplink(int l, int s) { return {leaf(l), kHostsPerLeaf + s, spine(s), l}; }
Hop downlink(int s, int l) { return {spine(s), l, leaf(l), kHostsPerLeaf + s}; }
Hop into_host(const std::string& h) { return {leaf(leaf_of(h)), host_port(h), h, 1}; }

using PairName = std::pair<std::string, std::string>;

std::vector<PairName> mesh(const std::vector<std::string>& hosts) {
  std::vector<PairName> out;
  for (const auto& a : hosts) {
    for (const auto& b : hosts) {
      if (a != b) out.emplace_back(a, b);
    }
  }
  return out;
}

std::vector<std::string> all_hosts() {
  std::vector<std::string> out;
  for (int i = 1; i <= kLeaves * kHostsPerLeaf; ++i) out.push_back(host_name(i));
  return out;
}

struct Scenario {
  std::vector<PairName> pairs = mesh(all_hosts());
  std::map<Hop, double> dropping;                    // a cable direction: share of packets lost
  std::set<std::string> stalled;                     // short pauses: answers late
  std::set<std::string> long_stalled;                // pauses past the timeout: late and lost
  std::map<std::string, double> dropping_responder;  // share of probes left unanswered
  std::map<PairName, double> lossy_pairs;            // more lost a sample
  std::map<PairName, double> late_pairs;             // late a sample
  std::map<PairName, double> lucky_pairs;            // lost a sample instead of what the faults say
  std::vector<std::tuple<std::string, int, std::string>> port_errors;  // node, port, what
  std::map<std::string, double> local_failures;  // a host's daemon failing locally, a minute
  std::map<Hop, double> congested;               // share of time the sending port waits
  std::set<std::string> tick_unknown;            // switches whose ports wait in ticks per word
  bool everyone_late = false;
  double spikes = 2;        // late a sample, of a pair crossing a congested port
  double probes = kProbes;  // a pair, a sample
};

class Fabric {
 public:
  explicit Fabric(const Scenario& s) {
    for (int i = 1; i <= kLeaves; ++i) guids_[leaf(i)] = 0x0002c90300a00000ULL + i;
    for (int i = 1; i <= kSpines; ++i) guids_[spine(i)] = 0x0002c90300b00000ULL + i;
    for (const auto& h : all_hosts()) {
      guids_[h] = 0x0002c90300c00000ULL + host_index(h) + 1;
      Host host;
      host.guid = guids_[h];
      host.name = h;
      ids_[h] = static_cast<HostId>(e.hosts.size());
      e.hosts.push_back(host);
    }
    for (const auto& [prober, peer] : s.pairs) {
      Pair pair;
      pair.prober = ids_[prober];
      pair.peer = ids_[peer];
      pair.key = prober + " -> " + peer;
      auto crossed = route(prober, peer);
      auto back = route(peer, prober);
      crossed.insert(crossed.end(), back.begin(), back.end());
      double kept = 1;
      for (const auto& hop : crossed) {
        pair.path.push_back(link(hop));
        auto d = s.dropping.find(hop);
        if (d != s.dropping.end()) kept *= 1 - d->second;
      }
      auto r = s.dropping_responder.find(peer);
      if (r != s.dropping_responder.end()) kept *= 1 - r->second;
      double lost =
          std::round(s.probes * (1 - kept)) + value(s.lossy_pairs, PairName{prober, peer});
      if (s.lucky_pairs.count({prober, peer})) lost = s.lucky_pairs.at({prober, peer});
      double late = value(s.late_pairs, PairName{prober, peer});
      if (s.stalled.count(peer) || s.long_stalled.count(peer)) late += 3;
      if (s.stalled.count(prober) || s.long_stalled.count(prober)) late += 1;
      if (s.long_stalled.count(peer)) lost += 5;
      if (s.everyone_late) late += 1;
      for (const auto& [hop, share] : s.congested) {
        if (std::find(crossed.begin(), crossed.end(), hop) != crossed.end()) {
          late += s.spikes;
          break;
        }
      }
      pair.sent = s.probes * kSamples;
      pair.lost = lost * kSamples;
      pair.late = late * kSamples;
      e.pairs.push_back(std::move(pair));
    }
    for (auto& host : e.hosts) {
      if (s.long_stalled.count(host.name)) {
        host.loop_stall_seconds = 2.0 * kSamples;
      } else if (s.stalled.count(host.name)) {
        host.loop_stall_seconds = 1.2 * kSamples;
      }
      auto r = s.dropping_responder.find(host.name);
      if (r != s.dropping_responder.end()) {
        double probers = 0;
        for (const auto& [prober, peer] : s.pairs) probers += peer == host.name;
        host.responder_dropped = std::round(kProbes * r->second) * probers * kSamples;
      }
      host.local_failures = value(s.local_failures, host.name);
    }
    for (const auto& [node, port, what] : s.port_errors) {
      auto& c = e.counters[{guids_[node], static_cast<std::uint32_t>(port)}];
      c.source = "test";
      (what == "transmit_discards" ? c.discards : c.errors) += 30 * kSamples;
    }
    for (const auto& [hop, share] : s.congested) {
      PortRef sender{guids_[hop.from], static_cast<std::uint32_t>(hop.from_port)};
      if (s.tick_unknown.count(hop.from)) {
        e.congested[sender] = {2.0, false};  // 2 ticks per word sent
      } else if (share > 0.1) {              // what ibfabric:port_congested:rate5m keeps
        e.congested[sender] = {share, true};
      }
    }
  }

  Evidence e;

 private:
  template <class M, class K>
  static double value(const M& map, const K& key) {
    auto it = map.find(key);
    return it == map.end() ? 0 : it->second;
  }
  bool is_switch(const std::string& node) const { return node[0] != 'h'; }

  // As the paths collector names a hop's cable: the a end is the switch end of a host's cable,
  // else the lower (GUID, port).
  LinkId link(const Hop& hop) {
    bool fs = is_switch(hop.from), ts = is_switch(hop.to);
    PortRef from{guids_[hop.from], static_cast<std::uint32_t>(hop.from_port)};
    PortRef to{guids_[hop.to], static_cast<std::uint32_t>(hop.to_port)};
    bool from_is_a = fs != ts ? fs : from < to;
    Cable c{from_is_a ? from : to, from_is_a ? to : from, from_is_a ? hop.from : hop.to,
            from_is_a ? hop.to : hop.from};
    auto key = std::make_pair(c.a, c.b);
    auto it = cables_.find(key);
    CableId id;
    if (it == cables_.end()) {
      id = static_cast<CableId>(e.cables.size());
      cables_[key] = id;
      e.cables.push_back(c);
    } else {
      id = it->second;
    }
    return link_of(id, from_is_a);
  }

  std::map<std::string, std::uint64_t> guids_;
  std::map<std::string, HostId> ids_;
  std::map<std::pair<PortRef, PortRef>, CableId> cables_;
};

// A suspect as the tests name it: "cable leaf-2:3 spine-1:2" (ends in name order), "host h3",
// "congestion spine-1:2" (the sending port).
std::string named(const Evidence& e, const Suspect& s) {
  switch (s.kind) {
    case Kind::cable: {
      const Cable& c = e.cables[s.cable];
      auto a = c.a_name + ":" + std::to_string(c.a.port);
      auto b = c.b_name + ":" + std::to_string(c.b.port);
      return "cable " + std::min(a, b) + " " + std::max(a, b);
    }
    case Kind::congestion: {
      const Cable& c = e.cables[s.cable];
      return "congestion " + (s.a_to_b ? c.a_name + ":" + std::to_string(c.a.port)
                                       : c.b_name + ":" + std::to_string(c.b.port));
    }
    default:
      return "host " + e.hosts[s.host].name;
  }
}

std::string cable(const std::string& a, int ap, const std::string& b, int bp) {
  auto x = a + ":" + std::to_string(ap), y = b + ":" + std::to_string(bp);
  return "cable " + std::min(x, y) + " " + std::max(x, y);
}
std::string congestion(const Hop& hop) {
  return "congestion " + hop.from + ":" + std::to_string(hop.from_port);
}
std::string host(const std::string& h) { return "host " + h; }

// Each verdict as the set of what it names.
using Named = std::set<std::set<std::string>>;

Named verdicts(const Scenario& s) {
  Fabric f(s);
  Named out;
  for (const auto& v : localize(f.e)) {
    std::set<std::string> names;
    for (const auto& suspect : v.suspects) names.insert(named(f.e, suspect));
    out.insert(names);
  }
  return out;
}

std::vector<std::tuple<std::string, int, std::string>> host_errors(const std::string& h) {
  return {{h, 1, "receive_errors"}};
}

TEST(Localizer, FaultyLeafUplinkIsNamedNotTheHostsBehindIt) {
  Scenario s;
  s.dropping = {{downlink(1, 2), 0.3}};
  s.port_errors = {{"leaf-2", 3, "receive_errors"}};
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-2", 3, "spine-1", 2)}}));
}

TEST(Localizer, LossNothingElseExplainsIsNotPinnedOnAnyone) {
  Scenario s;
  s.dropping = {{downlink(1, 2), 0.3}};
  s.lossy_pairs = {{{"h2", "h5"}, 30}};
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-2", 3, "spine-1", 2)}}));
}

TEST(Localizer, HostCableWithCountersIsTheCable) {
  Scenario s;
  s.dropping = {{into_host("h3"), 0.3}};
  s.port_errors = host_errors("h3");
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-2", 1, "h3", 1)}}));
}

TEST(Localizer, HostCableWithoutCountersIsOneVerdictNamingBoth) {
  Scenario s;
  s.dropping = {{into_host("h3"), 0.3}};
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-2", 1, "h3", 1), host("h3")}}));
}

TEST(Localizer, SmallLossesAreNamed) {
  Scenario s;
  s.dropping = {{into_host("h5"), 0.02}};
  s.port_errors = host_errors("h5");
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-3", 1, "h5", 1)}}));
  Scenario up;
  up.dropping = {{downlink(2, 3), 0.02}};
  up.port_errors = {{"leaf-3", 4, "receive_errors"}};
  EXPECT_EQ(verdicts(up), (Named{{cable("leaf-3", 4, "spine-2", 3)}}));
}

TEST(Localizer, StalledHostIsNamedNoCable) {
  Scenario s;
  s.stalled = {"h4"};
  EXPECT_EQ(verdicts(s), (Named{{host("h4")}}));
  // The demo's sparse probing: three hosts probe each other, a fourth probes them.
  Scenario sparse;
  sparse.pairs = mesh({"h1", "h3", "h5"});
  for (const auto* peer : {"h1", "h3", "h5"}) sparse.pairs.emplace_back("h2", peer);
  sparse.stalled = {"h3"};
  EXPECT_EQ(verdicts(sparse), (Named{{host("h3")}}));
  // Longer than the probe timeout: lost as well as late, still the host alone.
  Scenario longer;
  longer.long_stalled = {"h4"};
  EXPECT_EQ(verdicts(longer), (Named{{host("h4")}}));
}

TEST(Localizer, ResponderLossWhileTheCableCountsErrorsNamesNobodyYet) {
  // 3 % into h3's port while the loss builds up: so far only probes to h3 lost it, so the
  // probes point at h3 as responder, but its port counts the errors and h3 has no trouble.
  Scenario s;
  for (const auto& p : all_hosts()) {
    if (p != "h3") s.lossy_pairs[{p, "h3"}] = 3;
  }
  s.port_errors = host_errors("h3");
  EXPECT_EQ(verdicts(s), Named{});
}

TEST(Localizer, ResponderThatDropsIsNamed) {
  Scenario s;
  s.dropping_responder = {{"h2", 0.2}};
  EXPECT_EQ(verdicts(s), (Named{{host("h2")}}));
}

TEST(Localizer, TwoFaultsAtOnce) {
  Scenario s;
  s.dropping = {{downlink(2, 3), 0.3}, {into_host("h1"), 0.3}};
  s.port_errors = {{"leaf-3", 4, "receive_errors"}, {"h1", 1, "receive_errors"}};
  EXPECT_EQ(verdicts(s),
            (Named{{cable("leaf-3", 4, "spine-2", 3)}, {cable("leaf-1", 1, "h1", 1)}}));
}

TEST(Localizer, BigAndSmallFaultSharingPairs) {
  Scenario s;
  s.dropping = {{downlink(1, 2), 0.3}, {into_host("h1"), 0.03}};
  s.port_errors = {{"leaf-2", 3, "receive_errors"}, {"h1", 1, "receive_errors"}};
  EXPECT_EQ(verdicts(s),
            (Named{{cable("leaf-2", 3, "spine-1", 2)}, {cable("leaf-1", 1, "h1", 1)}}));
  // h2's pairs cross both: most of its loss is the uplink's, its own rate h3's.
  Scenario t;
  t.dropping = {{uplink(3, 2), 0.3}, {into_host("h3"), 0.03}};
  t.port_errors = {{"spine-2", 3, "receive_errors"}, {"h3", 1, "receive_errors"}};
  EXPECT_EQ(verdicts(t),
            (Named{{cable("leaf-3", 4, "spine-2", 3)}, {cable("leaf-2", 1, "h3", 1)}}));
}

TEST(Localizer, ALuckyPairDoesNotClearItsCable) {
  // h5 -> h6 loses a third of what the fault says (6 in the minute where 18 were due).
  Scenario s;
  s.dropping = {{uplink(1, 1), 0.3}, {into_host("h5"), 0.03}};
  s.lucky_pairs = {{{"h5", "h6"}, 1}};
  s.port_errors = {{"spine-1", 1, "receive_errors"}, {"h5", 1, "receive_errors"}};
  EXPECT_EQ(verdicts(s),
            (Named{{cable("leaf-1", 3, "spine-1", 1)}, {cable("leaf-3", 1, "h5", 1)}}));
}

TEST(Localizer, FaultyCableAndStalledHost) {
  Scenario s;
  s.dropping = {{downlink(1, 2), 0.3}};
  s.stalled = {"h6"};
  s.port_errors = {{"leaf-2", 3, "receive_errors"}};
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-2", 3, "spine-1", 2)}, {host("h6")}}));
}

TEST(Localizer, NothingNamedWithoutEvidence) {
  Scenario uncrossed;  // a cable no pair crosses
  uncrossed.pairs = mesh({"h1", "h2", "h3"});
  uncrossed.dropping = {{into_host("h6"), 0.3}};
  uncrossed.port_errors = {{"leaf-3", 2, "receive_errors"}};
  EXPECT_EQ(verdicts(uncrossed), Named{});
  Scenario unexplained;  // h3's probes to h1 cross the same cables cleanly
  unexplained.lossy_pairs = {{{"h1", "h3"}, 30}};
  EXPECT_EQ(verdicts(unexplained), Named{});
}

TEST(Localizer, OnePairOnlyNamesItsWholePathAsOneSet) {
  Scenario s;
  s.pairs = {{"h1", "h3"}};
  s.dropping = {{into_host("h3"), 0.3}};
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-1", 1, "h1", 1), cable("leaf-1", 3, "spine-1", 1),
                                 cable("leaf-2", 3, "spine-1", 2), cable("leaf-2", 1, "h3", 1),
                                 host("h1"), host("h3")}}));
  s.port_errors = host_errors("h3");  // that evidence names its cable alone
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-2", 1, "h3", 1)}}));
}

TEST(Localizer, BusyMachinesNameNobody) {
  Scenario scattered;
  scattered.late_pairs = {{{"h1", "h2"}, 1}, {{"h5", "h3"}, 1}};
  EXPECT_EQ(verdicts(scattered), Named{});
  Scenario busy;  // three of h2's ten pairs late
  busy.late_pairs = {{{"h1", "h2"}, 1}, {{"h2", "h5"}, 1}, {{"h4", "h2"}, 1}};
  EXPECT_EQ(verdicts(busy), Named{});
  Scenario busier;  // all of h2's pairs, 0.5 % of the time
  for (const auto& p : mesh(all_hosts())) {
    if (p.first == "h2" || p.second == "h2") busier.late_pairs[p] = 0.5;
  }
  EXPECT_EQ(verdicts(busier), Named{});
  Scenario everyone;
  everyone.everyone_late = true;
  EXPECT_EQ(verdicts(everyone), Named{});
}

TEST(Localizer, CongestedPortIsNamedForTheSpikes) {
  Scenario spine;
  spine.congested = {{downlink(1, 2), 0.41}};
  EXPECT_EQ(verdicts(spine), (Named{{congestion(downlink(1, 2))}}));
  Scenario incast;  // every pair of h3 late: the port, not h3
  incast.congested = {{into_host("h3"), 0.6}};
  EXPECT_EQ(verdicts(incast), (Named{{congestion(into_host("h3"))}}));
  Scenario ticks;
  ticks.congested = {{downlink(1, 2), 0.41}};
  ticks.tick_unknown = {"spine-1"};
  EXPECT_EQ(verdicts(ticks), (Named{{congestion(downlink(1, 2))}}));
  Scenario quiet;  // congested but its pairs are not late
  quiet.congested = {{downlink(1, 2), 0.41}};
  quiet.spikes = 0;
  EXPECT_EQ(verdicts(quiet), Named{});
  Scenario barely;  // waits 5 %: not congestion; every late pair is h3's
  barely.congested = {{downlink(1, 2), 0.05}};
  EXPECT_EQ(verdicts(barely), (Named{{host("h3")}}));
}

TEST(Localizer, CongestionBesideOtherFaults) {
  Scenario cable_too;
  cable_too.congested = {{downlink(1, 2), 0.41}};
  cable_too.dropping = {{into_host("h5"), 0.3}};
  cable_too.port_errors = host_errors("h5");
  EXPECT_EQ(verdicts(cable_too),
            (Named{{congestion(downlink(1, 2))}, {cable("leaf-3", 1, "h5", 1)}}));
  Scenario stall;
  stall.congested = {{downlink(1, 2), 0.41}};
  stall.stalled = {"h6"};
  EXPECT_EQ(verdicts(stall), (Named{{congestion(downlink(1, 2))}, {host("h6")}}));
  Scenario incast_stall;  // its own stalls name h3 beside the port
  incast_stall.congested = {{into_host("h3"), 0.6}};
  incast_stall.stalled = {"h3"};
  EXPECT_EQ(verdicts(incast_stall), (Named{{congestion(into_host("h3"))}, {host("h3")}}));
}

TEST(Localizer, SparseProbingNamesTheCableNotAOnePairResponder) {
  // bench/localization.py seed 28, 4/sparse: h4 -> h1 loses twice the others' share, and h1
  // answers no other prober.
  Scenario s;
  s.pairs = {{"h1", "h3"}, {"h3", "h5"}, {"h4", "h1"}, {"h1", "h2"},
             {"h1", "h6"}, {"h5", "h6"}, {"h6", "h2"}, {"h2", "h4"}};
  s.dropping = {{uplink(2, 1), 0.02}};
  s.lossy_pairs = {{{"h4", "h1"}, 2}};
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-2", 3, "spine-1", 2)}}));
}

TEST(Localizer, SparseProbingTwoFaultsOnePairCrosses) {
  Scenario s;
  s.pairs = {{"h1", "h6"}, {"h4", "h6"}, {"h6", "h4"}, {"h5", "h3"},
             {"h3", "h5"}, {"h2", "h1"}, {"h3", "h4"}};
  s.dropping = {{into_host("h6"), 0.05}, {uplink(3, 1), 0.05}};
  s.port_errors = {{"h6", 1, "receive_errors"}, {"spine-1", 3, "receive_errors"}};
  EXPECT_EQ(verdicts(s),
            (Named{{cable("leaf-3", 2, "h6", 1)}, {cable("leaf-3", 3, "spine-1", 3)}}));
}

// The rules named node-005 and its cable beside a 30 % spine drop: half its pairs crossed the
// spine, and a few lost probes on two others lifted its median past 0.5 %.
TEST(Localizer, HostBesideABigFaultWithAFewStrayLossesIsNoCulprit) {
  Scenario s;
  s.dropping = {{downlink(1, 2), 0.3}};
  s.port_errors = {{"leaf-2", 3, "receive_errors"}};
  s.lossy_pairs = {{{"h1", "h2"}, 1}, {{"h2", "h1"}, 1}};  // h1's pairs on its own leaf
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-2", 3, "spine-1", 2)}}));
}

// Host noise: a few stray losses on the handful of pairs of one host look like a 1 % fault on
// its cable. Without evidence of its own (its cable's counters, its daemon's trouble) it needs
// min_lost_host lost probes, not min_lost; with its port counting errors, 5 are enough.
TEST(Localizer, AFewStrayLossesOfOneHostAreNamedOnlyWithEvidenceOfItsOwn) {
  Scenario s;
  s.probes = 10;  // a probe a second: 60 a pair in the minute
  s.pairs = {{"h3", "h1"}, {"h3", "h5"}, {"h2", "h3"}, {"h4", "h3"}};
  // Lost in the minute: 1, 2, 1 and 1 (a sample's share of it).
  s.lossy_pairs = {{{"h3", "h1"}, 1 / kSamples},
                   {{"h3", "h5"}, 2 / kSamples},
                   {{"h2", "h3"}, 1 / kSamples},
                   {{"h4", "h3"}, 1 / kSamples}};
  EXPECT_EQ(verdicts(s), Named{});
  s.lossy_pairs[{"h4", "h3"}] = 2 / kSamples;  // 6 lost: as many as min_lost_host asks for
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-2", 1, "h3", 1), host("h3")}}));
  s.lossy_pairs[{"h4", "h3"}] = 1 / kSamples;
  s.port_errors = host_errors("h3");
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-2", 1, "h3", 1)}}));
}

// A daemon whose own port fails its probes beside a real fault: its failures (trouble of its
// own, not loss: the prober keeps them out of sent and lost, probe_run_test.cpp) do not make its
// host a culprit, and the real fault is still named alone.
TEST(Localizer, DaemonFailingLocallyBesideAFaultIsNotNamed) {
  Scenario s;
  s.dropping = {{downlink(2, 3), 0.3}};
  s.port_errors = {{"leaf-3", 4, "receive_errors"}};
  s.local_failures = {{"h1", 240}};
  EXPECT_EQ(verdicts(s), (Named{{cable("leaf-3", 4, "spine-2", 3)}}));
}

// Partial evidence (docs/design.md, "Partial evidence, never silence"): what a source could not
// give fresh is missing from the evidence, and each verdict says which of it bears on it.
TEST(Localizer, WithoutCountersACableIsNamedWithItsHostAndSaysSo) {
  Scenario s;
  s.dropping = {{into_host("h3"), 0.3}};
  s.port_errors = host_errors("h3");
  Fabric f(s);
  f.e.counters.clear();
  f.e.lacking.counters = true;
  auto v = localize(f.e);
  ASSERT_EQ(v.size(), 1u);
  std::set<std::string> names;
  for (const auto& suspect : v[0].suspects) names.insert(named(f.e, suspect));
  EXPECT_EQ(names, (std::set<std::string>{cable("leaf-2", 1, "h3", 1), host("h3")}));
  EXPECT_EQ(v[0].suspects.front().kind, Kind::cable);  // the culprit, h3 beside it
  EXPECT_EQ(v[0].lacking, "counters");
  EXPECT_FALSE(v[0].withheld);
  // A host's verdict lacks its daemon's evidence where that is missing.
  Scenario stall;
  stall.stalled = {"h4"};
  Fabric g(stall);
  g.e.lacking.daemons = true;
  v = localize(g.e);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(named(g.e, v[0].suspects.front()), host("h4"));
  EXPECT_EQ(v[0].lacking, "daemons");
}

TEST(Localizer, WithoutCongestionALateHostIsWithheld) {
  // Incast into h3: with its port's waiting known, the port is named; without it h3 would be
  // named late for what the port does, so that verdict is made but withheld.
  Scenario incast;
  incast.congested = {{into_host("h3"), 0.6}};
  Fabric f(incast);
  f.e.congested.clear();
  f.e.lacking.congestion = true;
  auto v = localize(f.e);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(named(f.e, v[0].suspects.front()), host("h3"));
  EXPECT_EQ(v[0].cause, "late");
  EXPECT_EQ(v[0].lacking, "congestion");
  EXPECT_TRUE(v[0].withheld);
  // A cable's loss needs no congestion evidence: named, and not said to lack it.
  Scenario lossy;
  lossy.dropping = {{downlink(1, 2), 0.3}};
  lossy.port_errors = {{"leaf-2", 3, "receive_errors"}};
  Fabric g(lossy);
  g.e.lacking.congestion = true;
  v = localize(g.e);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].lacking, "");
  EXPECT_FALSE(v[0].withheld);
}

// Named only what two evaluations in a row hold (evaluations every 10 s).
TEST(Localizer, ConfirmerNamesWhatTwoEvaluationsHold) {
  Scenario s;
  s.stalled = {"h4"};
  Fabric f(s);
  Confirmer confirmer(10);
  EXPECT_TRUE(confirmer.confirm(f.e, localize(f.e), 0).empty());
  auto second = confirmer.confirm(f.e, localize(f.e), 10);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(named(f.e, second.front().suspects.front()), host("h4"));
  Scenario clean;
  Fabric g(clean);
  EXPECT_TRUE(confirmer.confirm(g.e, localize(g.e), 20).empty());
  EXPECT_TRUE(confirmer.confirm(f.e, localize(f.e), 30).empty());  // held once again, not twice
}

// A settled suspect (evidence of its own: its daemon stalls, counters at a cable's end; or a
// cable every other component its lossy pairs cross fits far worse) is named at the evaluation
// half an interval after it was found; one that is not waits until it has been held a whole
// interval, and a suspect already named stays named.
TEST(Localizer, ConfirmerNamesASettledSuspectEarly) {
  Scenario stall;
  stall.stalled = {"h4"};
  Fabric f(stall);
  Confirmer confirmer(10);
  EXPECT_TRUE(confirmer.confirm(f.e, localize(f.e), 0).empty());
  EXPECT_TRUE(confirmer.pending());  // the next evaluation half an interval later
  EXPECT_EQ(confirmer.confirm(f.e, localize(f.e), 5).size(), 1u);
  EXPECT_FALSE(confirmer.pending());  // nothing left to confirm

  Scenario counted;
  counted.dropping = {{downlink(1, 2), 0.3}};
  counted.port_errors = {{"leaf-2", 3, "receive_errors"}};
  Fabric g(counted);
  Confirmer with_counters(10);
  EXPECT_TRUE(with_counters.confirm(g.e, localize(g.e), 0).empty());
  EXPECT_EQ(with_counters.confirm(g.e, localize(g.e), 5).size(), 1u);

  // A host's cable without counters is one verdict with the host: the counters still to come
  // decide between them, so it waits a whole interval.
  Scenario uncounted;
  uncounted.dropping = {{into_host("h3"), 0.3}};
  Fabric h(uncounted);
  Confirmer without(10);
  EXPECT_TRUE(without.confirm(h.e, localize(h.e), 0).empty());
  EXPECT_TRUE(without.confirm(h.e, localize(h.e), 5).empty());  // waits, still held
  EXPECT_TRUE(without.pending());
  auto named_now = without.confirm(h.e, localize(h.e), 10);
  ASSERT_EQ(named_now.size(), 1u);
  EXPECT_FALSE(named_now.front().settled);
  EXPECT_EQ(without.confirm(h.e, localize(h.e), 15).size(), 1u);  // named: stays named

  // The downlink into h3's leaf without counters: its lossy pairs are h3's other-leaf ones,
  // which h3's own cable carries too. At 30 % the clean pair h3 has on its own leaf already
  // rules that cable out (by far more than its counters could move it): settled. At 1 % it
  // does not yet: it waits.
  for (double rate : {0.3, 0.01}) {
    Scenario down;
    down.dropping = {{downlink(1, 2), rate}};
    Fabric d(down);
    auto found = localize(d.e);
    ASSERT_EQ(found.size(), 1u) << rate;
    EXPECT_EQ(named(d.e, found.front().suspects.front()), cable("leaf-2", 3, "spine-1", 2));
    EXPECT_EQ(found.front().suspects.size(), 1u) << rate;
    EXPECT_EQ(found.front().settled, rate > 0.1) << rate;
  }

  // Found unsettled (1 %, the first look), settled by the evaluation half an interval later
  // (30 %: the fault grew, or the window has more of it): named then, 5 s after it was found.
  {
    Scenario weak, strong;
    weak.dropping = {{downlink(1, 2), 0.01}};
    strong.dropping = {{downlink(1, 2), 0.3}};
    Fabric w(weak), st(strong);
    Confirmer growing(10);
    EXPECT_TRUE(growing.confirm(w.e, localize(w.e), 0).empty());
    EXPECT_TRUE(growing.pending());
    EXPECT_EQ(growing.confirm(st.e, localize(st.e), 5).size(), 1u);
  }

  // A suspect first found at a half-interval evaluation (beside one named there) waits a whole
  // interval from then: not named at 10 s, named at 15 s.
  {
    Scenario both = stall;
    both.dropping = {{into_host("h3"), 0.3}};
    Fabric b(both);
    Confirmer later(10);
    EXPECT_TRUE(later.confirm(f.e, localize(f.e), 0).empty());
    auto at5 = later.confirm(b.e, localize(b.e), 5);
    ASSERT_EQ(at5.size(), 1u);
    EXPECT_EQ(named(b.e, at5.front().suspects.front()), host("h4"));
    EXPECT_TRUE(later.pending());
    EXPECT_EQ(later.confirm(b.e, localize(b.e), 10).size(), 1u);  // h4 only
    EXPECT_EQ(later.confirm(b.e, localize(b.e), 15).size(), 2u);  // and h3's cable
  }

  // A leaf uplink without counters whose lossy pairs are several hosts': settled.
  Scenario spread;
  spread.dropping = {{uplink(1, 1), 0.3}};
  Fabric u(spread);
  auto found = localize(u.e);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(named(u.e, found.front().suspects.front()), cable("leaf-1", 3, "spine-1", 1));
  EXPECT_TRUE(found.front().settled);
  Confirmer uplinks(10);
  EXPECT_TRUE(uplinks.confirm(u.e, found, 0).empty());
  EXPECT_TRUE(uplinks.pending());
  EXPECT_EQ(uplinks.confirm(u.e, localize(u.e), 5).size(), 1u);
}

// What a verdict carries: the pairs it explains and the hosts whose paths cross it.
TEST(Localizer, VerdictCarriesItsPairsAndBlastRadius) {
  Scenario s;
  s.dropping = {{downlink(1, 2), 0.3}};
  s.port_errors = {{"leaf-2", 3, "receive_errors"}};
  Fabric f(s);
  auto v = localize(f.e);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].cause, "loss");
  EXPECT_EQ(v[0].pairs.size(), 8u);  // h3's with the hosts of leaves 1 and 3, both ways
  EXPECT_EQ(v[0].lost, 8 * 30 * kSamples);
  EXPECT_EQ(v[0].sent, 8 * kProbes * kSamples);
  EXPECT_NEAR(v[0].rate, 0.3, 0.001);
  EXPECT_EQ(v[0].blast_radius.size(), 6u);  // every host's pairs cross it one way or the other
  ASSERT_EQ(v[0].suspects[0].directions.size(), 2u);
  const Cable& c = f.e.cables[v[0].suspects[0].cable];
  // spine-1 -> leaf-2 drops: leaf-2 is the a end (lower GUID), so b -> a.
  EXPECT_EQ(c.a_name, "leaf-2");
  EXPECT_FALSE(v[0].suspects[0].directions[0]);
  EXPECT_TRUE(v[0].suspects[0].directions[1]);
}

}  // namespace
}  // namespace ibfabric::localize
