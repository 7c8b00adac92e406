#pragma once
// A synthetic 3-level fat tree with seeded faults and the scoring of the localizer's verdicts
// against them: one generator for the randomized test (tests/unit/localize_random_test.cpp) and
// the benchmark at scale (bench/localize_scale.cpp), so both judge the library alike.
//
// Hosts hang off leaves; each leaf of a pod has one uplink to each of the pod's aggregation
// switches; aggregation switch j of every pod has one uplink to each core switch of group j.
// Routes are deterministic by destination, as a subnet manager's LFTs route: up to the lowest
// common level through the switch the destination's index picks, then down.
//
// Random draws come from a splitmix64 stream of our own, not from <random>'s distributions
// (whose draws differ between standard libraries): a seed replays the same scenario in any build.

#include "localize/evidence.h"
#include "localize/localizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace ibfabric::localize::synthetic {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  std::uint32_t below(std::uint32_t n) {
    return static_cast<std::uint32_t>(((next() >> 32) * n) >> 32);
  }
  bool chance(double p) { return uniform() < p; }
  // Counted draw by draw: n is at most a window's probes of one pair.
  std::uint32_t binomial(std::uint32_t n, double p) {
    if (p <= 0) return 0;
    std::uint32_t k = 0;
    for (std::uint32_t i = 0; i < n; ++i) k += chance(p) ? 1 : 0;
    return k;
  }

 private:
  std::uint64_t state_;
};

// The seed of scenario `index` of a run seeded `seed` (each replayable alone).
inline std::uint64_t scenario_seed(std::uint64_t seed, std::uint64_t index) {
  Rng rng(seed * 0x2545f4914f6cdd1dULL + index + 1);
  rng.next();
  return rng.next();
}

struct Shape {
  std::uint32_t hosts = 1024;
  std::uint32_t hosts_per_leaf = 40;
  std::uint32_t leaves_per_pod = 16;
  std::uint32_t aggs_per_pod = 8;    // a leaf's uplinks
  std::uint32_t cores_per_agg = 16;  // an aggregation switch's uplinks
};

enum class Tier : std::uint8_t { host, leaf_agg, agg_core };

inline const char* tier_name(Tier tier) {
  switch (tier) {
    case Tier::host:
      return "host cable";
    case Tier::leaf_agg:
      return "leaf-aggregation";
    case Tier::agg_core:
      return "aggregation-core";
  }
  return "?";
}

// Cables are numbered host cables first (cable h is host h's), then leaf uplinks, then
// aggregation uplinks. A host cable's `a` is its leaf's port, a switch cable's `a` the lower
// switch's (lower GUIDs below): a_to_b is down on host cables, up on the others.
class FatTree {
 public:
  explicit FatTree(const Shape& shape) : shape_(shape) {
    const std::uint32_t h = shape.hosts, hpl = shape.hosts_per_leaf, lpp = shape.leaves_per_pod;
    const std::uint32_t aggs = shape.aggs_per_pod, cores = shape.cores_per_agg;
    leaves_ = (h + hpl - 1) / hpl;
    pods_ = (leaves_ + lpp - 1) / lpp;
    char name[64];
    auto switch_name = [&](const char* kind, std::uint32_t i, std::uint32_t j) {
      std::snprintf(name, sizeof name, "%s-%03u-%02u", kind, i, j);
      return std::string(name);
    };
    auto leaf_guid = [](std::uint32_t leaf) { return 0x0200000000000000ULL + leaf; };
    auto agg_guid = [&](std::uint32_t pod, std::uint32_t j) {
      return 0x0300000000000000ULL + pod * aggs + j;
    };
    auto core_guid = [&](std::uint32_t j, std::uint32_t k) {
      return 0x0400000000000000ULL + j * cores + k;
    };
    hosts_.resize(h);
    for (std::uint32_t i = 0; i < h; ++i) {
      std::snprintf(name, sizeof name, "node-%06u", i);
      hosts_[i].guid = 0x0100000000000000ULL + i;
      hosts_[i].name = name;
      const std::uint32_t leaf = i / hpl;
      cables_.push_back(Cable{{leaf_guid(leaf), i % hpl + 1},
                              {hosts_[i].guid, 1},
                              switch_name("leaf", leaf / lpp, leaf % lpp),
                              hosts_[i].name});
    }
    for (std::uint32_t leaf = 0; leaf < leaves_; ++leaf) {
      for (std::uint32_t j = 0; j < aggs; ++j) {
        const std::uint32_t pod = leaf / lpp;
        cables_.push_back(Cable{{leaf_guid(leaf), hpl + 1 + j},
                                {agg_guid(pod, j), leaf % lpp + 1},
                                switch_name("leaf", pod, leaf % lpp),
                                switch_name("agg", pod, j)});
      }
    }
    for (std::uint32_t pod = 0; pod < pods_; ++pod) {
      for (std::uint32_t j = 0; j < aggs; ++j) {
        for (std::uint32_t k = 0; k < cores; ++k) {
          cables_.push_back(Cable{{agg_guid(pod, j), lpp + 1 + k},
                                  {core_guid(j, k), pod + 1},
                                  switch_name("agg", pod, j),
                                  switch_name("core", j, k)});
        }
      }
    }
  }

  const Shape& shape() const { return shape_; }
  std::uint32_t leaves() const { return leaves_; }
  std::uint32_t pods() const { return pods_; }
  std::uint32_t switches() const {
    return leaves_ + pods_ * shape_.aggs_per_pod + shape_.aggs_per_pod * shape_.cores_per_agg;
  }
  const std::vector<Host>& hosts() const { return hosts_; }
  const std::vector<Cable>& cables() const { return cables_; }
  std::uint32_t links() const { return static_cast<std::uint32_t>(cables_.size() * 2); }

  CableId host_cable(HostId host) const { return host; }
  CableId leaf_up(std::uint32_t leaf, std::uint32_t j) const {
    return shape_.hosts + leaf * shape_.aggs_per_pod + j;
  }
  CableId agg_up(std::uint32_t pod, std::uint32_t j, std::uint32_t k) const {
    return shape_.hosts + leaves_ * shape_.aggs_per_pod +
           (pod * shape_.aggs_per_pod + j) * shape_.cores_per_agg + k;
  }
  Tier tier(CableId cable) const {
    if (cable < shape_.hosts) return Tier::host;
    return cable < shape_.hosts + leaves_ * shape_.aggs_per_pod ? Tier::leaf_agg : Tier::agg_core;
  }
  // A random cable of a tier.
  CableId random_cable(Tier tier, Rng& rng) const {
    const std::uint32_t first_leaf_up = shape_.hosts;
    const std::uint32_t first_agg_up = first_leaf_up + leaves_ * shape_.aggs_per_pod;
    switch (tier) {
      case Tier::host:
        return rng.below(shape_.hosts);
      case Tier::leaf_agg:
        return first_leaf_up + rng.below(first_agg_up - first_leaf_up);
      case Tier::agg_core:
        return first_agg_up + rng.below(static_cast<std::uint32_t>(cables_.size()) - first_agg_up);
    }
    return 0;
  }

  // One leg, from -> to, appended to `out`.
  void route(HostId from, HostId to, std::vector<LinkId>& out) const {
    const std::uint32_t aggs = shape_.aggs_per_pod, cores = shape_.cores_per_agg;
    const std::uint32_t leaf_from = from / shape_.hosts_per_leaf;
    const std::uint32_t leaf_to = to / shape_.hosts_per_leaf;
    out.push_back(link_of(host_cable(from), false));
    if (leaf_from != leaf_to) {
      const std::uint32_t j = to % aggs;
      out.push_back(link_of(leaf_up(leaf_from, j), true));
      const std::uint32_t pod_from = leaf_from / shape_.leaves_per_pod;
      const std::uint32_t pod_to = leaf_to / shape_.leaves_per_pod;
      if (pod_from != pod_to) {
        const std::uint32_t k = (to / aggs) % cores;
        out.push_back(link_of(agg_up(pod_from, j, k), true));
        out.push_back(link_of(agg_up(pod_to, j, k), false));
      }
      out.push_back(link_of(leaf_up(leaf_to, j), false));
    }
    out.push_back(link_of(host_cable(to), true));
  }

  std::string link_name(LinkId link) const {
    const Cable& c = cables_[cable_of(link)];
    return a_to_b(link) ? c.a_name + " -> " + c.b_name : c.b_name + " -> " + c.a_name;
  }

 private:
  Shape shape_;
  std::uint32_t leaves_ = 0, pods_ = 0;
  std::vector<Host> hosts_;
  std::vector<Cable> cables_;
};

struct Settings {
  std::uint32_t peers = 3;
  std::uint32_t probes = 60;  // a pair's probes over the window
  double window_seconds = 60;
  std::uint32_t min_faults = 1, max_faults = 3;
  double counter_probability = 0.8;  // a lossy cable's receiving port counts errors
  // Background noise, as hosts give it: a pair's chance of one stray lost, one stray late
  // probe; the share of cables with a few stray errors at one end.
  double noise_lost = 0.005;
  double noise_late = 0.01;
  double noise_counters = 0.001;
};

// Every host probes `peers` others, drawn from `seed`; each pair's path is its probe's leg then
// its answer's.
inline std::vector<Pair> make_pairs(const FatTree& tree, const Settings& settings,
                                    std::uint64_t seed) {
  Rng rng(seed);
  const std::uint32_t n = tree.shape().hosts;
  const std::uint32_t peers = std::min(settings.peers, n - 1);
  std::vector<Pair> pairs;
  pairs.reserve(static_cast<std::size_t>(n) * peers);
  std::vector<HostId> chosen;
  for (HostId prober = 0; prober < n; ++prober) {
    chosen.clear();
    while (chosen.size() < peers) {
      const HostId peer = rng.below(n);
      if (peer == prober || std::find(chosen.begin(), chosen.end(), peer) != chosen.end()) continue;
      chosen.push_back(peer);
      Pair& pair = pairs.emplace_back();
      pair.prober = prober;
      pair.peer = peer;
      pair.key = tree.hosts()[prober].name + ">" + tree.hosts()[peer].name;
      pair.sent = settings.probes;
      pair.path.reserve(12);
      tree.route(prober, peer, pair.path);
      tree.route(peer, prober, pair.path);
    }
  }
  return pairs;
}

enum class FaultKind : std::uint8_t { loss, stall, local_failure, congestion };

inline const char* fault_kind_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::loss:
      return "loss";
    case FaultKind::stall:
      return "stall";
    case FaultKind::local_failure:
      return "local failure";
    case FaultKind::congestion:
      return "congestion";
  }
  return "?";
}

struct Fault {
  FaultKind kind = FaultKind::loss;
  LinkId link = 0;  // loss: the direction that drops; congestion: the one its port sends into
  HostId host = 0;  // stall, local_failure
  // loss: drop probability; stall: seconds stalled; local_failure: share of its probes that
  // fail; congestion: share of the crossing probes made late.
  double rate = 0;
  // What the draw gave.
  std::uint32_t pairs = 0;    // pairs it touches
  double sent = 0;            // their probes
  double expected_lost = 0;   // loss: its rate times the probes crossing it
  double lost = 0, late = 0;  // probes it dropped, made late (local_failure: failed locally)
  std::uint32_t late_pairs = 0;
};

inline std::string describe(const FatTree& tree, const Fault& f) {
  char buf[160];
  switch (f.kind) {
    case FaultKind::loss:
      std::snprintf(buf, sizeof buf, "loss %.0f%% on %s (%s): %.0f lost of %.0f expected, %u pairs",
                    f.rate * 100, tree.link_name(f.link).c_str(),
                    tier_name(tree.tier(cable_of(f.link))), f.lost, f.expected_lost, f.pairs);
      break;
    case FaultKind::stall:
      std::snprintf(buf, sizeof buf, "stall %.1f s of %s: %.0f late in %u of %u pairs", f.rate,
                    tree.hosts()[f.host].name.c_str(), f.late, f.late_pairs, f.pairs);
      break;
    case FaultKind::local_failure:
      std::snprintf(buf, sizeof buf, "local failures of %s: %.0f of its probes",
                    tree.hosts()[f.host].name.c_str(), f.lost);
      break;
    case FaultKind::congestion:
      std::snprintf(buf, sizeof buf,
                    "congestion %.0f%% late on %s (%s): %.0f late in %u of %u pairs", f.rate * 100,
                    tree.link_name(f.link).c_str(), tier_name(tree.tier(cable_of(f.link))), f.late,
                    f.late_pairs, f.pairs);
      break;
  }
  return buf;
}

struct Scenario {
  Evidence evidence;
  std::vector<Fault> faults;
};

// One to three faults of random kinds, each on its own cable or host. A loss picks its tier
// first (host cables would otherwise be most of the draws, and each is its host's twin).
inline std::vector<Fault> draw_faults(const FatTree& tree, const Settings& settings, Rng& rng) {
  static constexpr double kLossRates[] = {0.01, 0.02, 0.03, 0.05, 0.10, 0.20, 0.30};
  const std::uint32_t count =
      settings.min_faults + rng.below(settings.max_faults - settings.min_faults + 1);
  std::vector<Fault> faults;
  std::vector<CableId> used_cables;
  std::vector<HostId> used_hosts;
  while (faults.size() < count) {
    Fault f;
    const std::uint32_t draw = rng.below(6);
    if (draw < 3 || draw == 5) {
      const Tier tier = static_cast<Tier>(rng.below(3));
      const CableId cable = tree.random_cable(tier, rng);
      if (std::find(used_cables.begin(), used_cables.end(), cable) != used_cables.end()) continue;
      if (draw < 3) {
        f.kind = FaultKind::loss;
        f.link = link_of(cable, rng.chance(0.5));
        f.rate = kLossRates[rng.below(std::size(kLossRates))];
      } else {
        // A switch's sending port: on a host cable only the leaf's (a -> b).
        f.kind = FaultKind::congestion;
        f.link = link_of(cable, tier == Tier::host || rng.chance(0.5));
        f.rate = std::round(rng.uniform(0.05, 0.30) * 100) / 100;
      }
      used_cables.push_back(cable);
    } else {
      const HostId host = rng.below(tree.shape().hosts);
      if (std::find(used_hosts.begin(), used_hosts.end(), host) != used_hosts.end()) continue;
      f.kind = draw == 3 ? FaultKind::stall : FaultKind::local_failure;
      f.host = host;
      f.rate = draw == 3 ? std::round(rng.uniform(1, 10) * 10) / 10
                         : std::round(rng.uniform(0.05, 0.5) * 100) / 100;
      used_hosts.push_back(host);
    }
    faults.push_back(f);
  }
  return faults;
}

// One window of evidence with `faults` in it (their outcome fields are filled in).
inline Scenario apply_faults(const FatTree& tree, std::vector<Pair> pairs, const Settings& settings,
                             std::vector<Fault> faults, Rng& rng) {
  Scenario s;
  Evidence& e = s.evidence;
  e.hosts = tree.hosts();
  e.cables = tree.cables();
  auto receiving = [&](LinkId l) -> const PortRef& {
    return a_to_b(l) ? e.cables[cable_of(l)].b : e.cables[cable_of(l)].a;
  };
  auto sending = [&](LinkId l) -> const PortRef& {
    return a_to_b(l) ? e.cables[cable_of(l)].a : e.cables[cable_of(l)].b;
  };
  for (Fault& f : faults) {
    f.pairs = 0;
    f.sent = f.expected_lost = f.lost = f.late = 0;
    f.late_pairs = 0;
    if (f.kind == FaultKind::stall) e.hosts[f.host].loop_stall_seconds = f.rate;
    if (f.kind == FaultKind::congestion)
      e.congested[sending(f.link)] = PortWait{std::min(0.9, f.rate * 2), true};
    // ibsim counts a drop in the receiving port's PortRcvErrors; real traffic drops more than
    // the probes, hence more errors than lost probes.
    if (f.kind == FaultKind::loss && rng.chance(settings.counter_probability)) {
      PortCounters& c = e.counters[receiving(f.link)];
      c.errors += std::round(f.rate * 10000);
      c.source = "fabric sweep";
    }
  }
  std::vector<std::uint32_t> late_here(faults.size());
  for (Pair& p : pairs) {
    for (Fault& f : faults) {
      if (f.kind != FaultKind::local_failure || f.host != p.prober) continue;
      // Its own probes that failed at its port: not sent, never lost.
      const double failed = std::round(f.rate * p.sent);
      p.sent -= failed;
      f.lost += failed;
      e.hosts[f.host].local_failures += failed;
      ++f.pairs;
    }
    // The probe leg then the answer leg: a probe one fault drops never reaches the next.
    auto survivors = static_cast<std::uint32_t>(p.sent);
    for (LinkId l : p.path) {
      for (Fault& f : faults) {
        if (f.kind != FaultKind::loss || f.link != l) continue;
        f.sent += p.sent;
        f.expected_lost += p.sent * f.rate;
        const std::uint32_t dropped = rng.binomial(survivors, f.rate);
        survivors -= dropped;
        f.lost += dropped;
        ++f.pairs;
      }
    }
    std::uint32_t late = 0;
    std::fill(late_here.begin(), late_here.end(), 0);
    for (std::size_t i = 0; i < faults.size(); ++i) {
      Fault& f = faults[i];
      double share = 0;
      if (f.kind == FaultKind::stall && (p.prober == f.host || p.peer == f.host)) {
        share = f.rate / settings.window_seconds;  // the probes that fell into a stall
      } else if (f.kind == FaultKind::congestion &&
                 std::find(p.path.begin(), p.path.end(), f.link) != p.path.end()) {
        share = f.rate;
      } else {
        continue;
      }
      ++f.pairs;
      f.sent += p.sent;
      late_here[i] = rng.binomial(survivors, share);
      late += late_here[i];
    }
    late = std::min(late, survivors);
    for (std::size_t i = 0; i < faults.size(); ++i) {
      faults[i].late += late_here[i];
      faults[i].late_pairs += late_here[i] > 0 ? 1 : 0;
    }
    std::uint32_t lost = static_cast<std::uint32_t>(p.sent) - survivors;
    if (survivors > late && rng.chance(settings.noise_lost)) {
      ++lost;
      --survivors;
    }
    if (survivors > late && rng.chance(settings.noise_late)) ++late;
    p.lost = lost;
    p.late = late;
  }
  const auto cables = static_cast<std::uint32_t>(e.cables.size());
  const auto noisy = static_cast<std::uint32_t>(std::round(cables * settings.noise_counters));
  for (std::uint32_t i = 0; i < noisy; ++i) {
    const LinkId l = rng.below(cables * 2);
    PortCounters& c = e.counters[receiving(l)];
    c.errors += 1 + rng.below(5);
    c.source = "fabric sweep";
  }
  e.pairs = std::move(pairs);
  s.faults = std::move(faults);
  return s;
}

// Scenario `index` of a run seeded `seed`: its faults, then its window (`pairs` from the same
// seed, make_pairs).
inline Scenario make_scenario(const FatTree& tree, std::vector<Pair> pairs,
                              const Settings& settings, std::uint64_t seed, std::uint32_t index) {
  Rng rng(scenario_seed(seed, index));
  std::vector<Fault> faults = draw_faults(tree, settings, rng);
  return apply_faults(tree, std::move(pairs), settings, std::move(faults), rng);
}

// --- scoring ------------------------------------------------------------------------------

// Which pairs each component's probes cross, built once per set of pairs.
class PairIndex {
 public:
  PairIndex(const FatTree& tree, const std::vector<Pair>& pairs) {
    by_link_ = build(tree.links(), pairs, [](const Pair& p, auto&& add) {
      for (LinkId l : p.path) add(l);
    });
    by_prober_ = build(tree.shape().hosts, pairs, [](const Pair& p, auto&& add) { add(p.prober); });
    by_peer_ = build(tree.shape().hosts, pairs, [](const Pair& p, auto&& add) { add(p.peer); });
  }
  struct Span {
    const std::uint32_t *begin_, *end_;
    const std::uint32_t* begin() const { return begin_; }
    const std::uint32_t* end() const { return end_; }
    std::size_t size() const { return end_ - begin_; }
  };
  Span link(LinkId l) const { return by_link_.of(l); }
  Span prober(HostId h) const { return by_prober_.of(h); }
  Span peer(HostId h) const { return by_peer_.of(h); }

 private:
  struct Csr {
    std::vector<std::uint32_t> offsets, items;
    Span of(std::uint32_t i) const {
      return {items.data() + offsets[i], items.data() + offsets[i + 1]};
    }
  };
  template <typename Each>
  static Csr build(std::uint32_t n, const std::vector<Pair>& pairs, Each each) {
    Csr csr;
    csr.offsets.assign(n + 1, 0);
    for (const Pair& p : pairs) each(p, [&](std::uint32_t i) { ++csr.offsets[i + 1]; });
    for (std::uint32_t i = 0; i < n; ++i) csr.offsets[i + 1] += csr.offsets[i];
    csr.items.resize(csr.offsets[n]);
    std::vector<std::uint32_t> next(csr.offsets.begin(), csr.offsets.end() - 1);
    for (std::uint32_t k = 0; k < pairs.size(); ++k) {
      // A path crosses a link at most once a leg; a pair counts once.
      each(pairs[k], [&](std::uint32_t i) {
        if (next[i] == csr.offsets[i] || csr.items[next[i] - 1] != k) csr.items[next[i]++] = k;
      });
    }
    // Compact the slots left by pairs counted once instead of twice.
    std::uint32_t out = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint32_t begin = csr.offsets[i], end = next[i];
      csr.offsets[i] = out;
      for (std::uint32_t j = begin; j < end; ++j) csr.items[out++] = csr.items[j];
    }
    csr.offsets[n] = out;
    csr.items.resize(out);
    return csr;
  }
  Csr by_link_, by_prober_, by_peer_;
};

// What a verdict names, one direction or one role at a time.
struct Component {
  enum class Type : std::uint8_t { link, host, responder, prober, congestion } type;
  std::uint32_t id;  // a LinkId (link, congestion) or a HostId
  bool operator==(const Component&) const = default;
};

inline std::vector<Component> components_of(const Suspect& s) {
  using T = Component::Type;
  switch (s.kind) {
    case Kind::cable: {
      std::vector<Component> out;
      for (bool dir : {true, false}) {
        const std::size_t i = dir ? 0 : 1;
        if (i < s.directions.size() && s.directions[i])
          out.push_back({T::link, link_of(s.cable, dir)});
      }
      if (out.empty()) {  // no direction given: the cable as a whole
        out = {{T::link, link_of(s.cable, true)}, {T::link, link_of(s.cable, false)}};
      }
      return out;
    }
    case Kind::host:
      return {{T::host, s.host}};
    case Kind::responder:
      return {{T::responder, s.host}};
    case Kind::prober:
      return {{T::prober, s.host}};
    case Kind::congestion:
      return {{T::congestion, link_of(s.cable, s.a_to_b)}};
  }
  return {};
}

inline Component component_of(const Fault& f) {
  using T = Component::Type;
  switch (f.kind) {
    case FaultKind::loss:
      return {T::link, f.link};
    case FaultKind::congestion:
      return {T::congestion, f.link};
    case FaultKind::stall:
      return {T::host, f.host};
    case FaultKind::local_failure:
      return {T::prober, f.host};
  }
  return {T::link, 0};
}

inline bool is_host(Component c) {
  using T = Component::Type;
  return c.type == T::host || c.type == T::responder || c.type == T::prober;
}

// Names the fault itself: the lossy direction, the congested port, or its host in any role.
inline bool matches(Component c, const Fault& f) {
  const Component truth = component_of(f);
  if (is_host(truth)) return is_host(c) && c.id == truth.id;
  return c == truth;
}

// The pairs a component's fault would touch (sorted).
inline std::vector<std::uint32_t> touched(const PairIndex& index, Component c) {
  using T = Component::Type;
  auto copy = [](PairIndex::Span s) { return std::vector<std::uint32_t>(s.begin(), s.end()); };
  switch (c.type) {
    case T::link:
    case T::congestion:
      return copy(index.link(c.id));
    case T::responder:
      return copy(index.peer(c.id));
    case T::prober:
      return copy(index.prober(c.id));
    case T::host: {
      std::vector<std::uint32_t> out;
      auto a = index.prober(c.id), b = index.peer(c.id);
      std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
      return out;
    }
  }
  return {};
}

// A component indistinguishable from a fault carries exactly the same pairs, or exactly the
// same symptomatic pairs (lossy for a loss, late for a stall or congestion): a host and its own
// cable, say. Only a component that could show that symptom qualifies: a cable for loss, a
// congested port for lateness, a host for either; a daemon's own failures show none.
inline bool indistinguishable(const Evidence& e, const PairIndex& index, Component c,
                              const Fault& f) {
  using T = Component::Type;
  if (matches(c, f)) return false;
  const bool loss = f.kind == FaultKind::loss;
  const bool late = f.kind == FaultKind::stall || f.kind == FaultKind::congestion;
  if (c.type == T::link && !loss) return false;
  if (c.type == T::congestion && !late) return false;
  const std::vector<std::uint32_t> mine = touched(index, c), its = touched(index, component_of(f));
  if (!its.empty() && mine == its) return true;
  if (!loss && !late) return false;
  auto symptomatic = [&](const std::vector<std::uint32_t>& pairs) {
    std::vector<std::uint32_t> out;
    for (std::uint32_t k : pairs) {
      if (loss ? e.pairs[k].lost > 0 : e.pairs[k].late > 0) out.push_back(k);
    }
    return out;
  };
  const std::vector<std::uint32_t> its_bad = symptomatic(its);
  return !its_bad.empty() && symptomatic(mine) == its_bad;
}

// Why the probes cannot show a fault ("" when they can).
inline std::string unobservable(const Fault& f, const Options& o) {
  switch (f.kind) {
    case FaultKind::loss:
      if (f.pairs == 0) return "no pair crosses it";
      if (f.expected_lost < o.min_lost) return "expected lost under min_lost";
      if (f.lost < o.min_lost) return "lost under min_lost (drawn)";
      if (f.lost <= o.min_loss_rate * f.sent) return "loss rate under min_loss_rate (drawn)";
      return "";
    case FaultKind::stall:
    case FaultKind::congestion:
      if (f.pairs == 0) return "no pair crosses it";
      if (f.late < o.min_late || f.late_pairs < o.min_late_pairs) return "late under min_late";
      if (f.late <= o.min_late_rate * f.sent) return "late share under min_late_rate";
      return "";
    case FaultKind::local_failure:
      return "no probe symptom (its own evidence only)";
  }
  return "";
}

enum class Outcome : std::uint8_t { alone, in_set, missed };

struct FaultScore {
  std::string unobservable;  // "" when observable
  bool distinguishable = false;
  Outcome outcome = Outcome::missed;
  bool lookalike_named = false;  // missed, but something indistinguishable was named
  bool settled = false;          // named by a settled verdict (Verdict::settled)
};

struct ScenarioScore {
  std::vector<FaultScore> faults;
  std::vector<std::string> bystanders;
  // Of them, in a settled verdict (Verdict::settled): named half an interval after it was found,
  // before what is still to come (counters, more probes) could have cleared it.
  std::uint32_t settled_bystanders = 0;
  std::uint32_t lookalikes = 0;  // named components indistinguishable from a fault
  bool clean() const {
    if (!bystanders.empty()) return false;
    for (const FaultScore& f : faults) {
      if (f.unobservable.empty() && f.outcome == Outcome::missed) return false;
    }
    return true;
  }
};

inline std::string describe(const FatTree& tree, Component c) {
  using T = Component::Type;
  switch (c.type) {
    case T::link:
      return "cable " + tree.link_name(c.id);
    case T::congestion:
      return "congestion " + tree.link_name(c.id);
    case T::host:
      return "host " + tree.hosts()[c.id].name;
    case T::responder:
      return "responder " + tree.hosts()[c.id].name;
    case T::prober:
      return "prober " + tree.hosts()[c.id].name;
  }
  return "?";
}

inline ScenarioScore score(const FatTree& tree, const Scenario& s, const PairIndex& index,
                           const std::vector<Verdict>& verdicts, const Options& options) {
  using T = Component::Type;
  const Evidence& e = s.evidence;
  ScenarioScore out;
  for (const Fault& f : s.faults) {
    FaultScore fs;
    fs.unobservable = unobservable(f, options);
    // Distinguishable: observable, and no other candidate on a symptomatic pair's path (or on
    // any touched pair's, for the same-pairs test) is indistinguishable from it.
    if (fs.unobservable.empty()) {
      fs.distinguishable = true;
      std::vector<std::uint32_t> probe_pairs;
      const std::vector<std::uint32_t> its = touched(index, component_of(f));
      if (!its.empty()) probe_pairs.push_back(its.front());
      for (std::uint32_t k : its) {
        const Pair& p = e.pairs[k];
        if (f.kind == FaultKind::loss ? p.lost > 0 : p.late > 0) {
          probe_pairs.push_back(k);
          break;
        }
      }
      for (std::uint32_t k : probe_pairs) {
        const Pair& p = e.pairs[k];
        std::vector<Component> candidates;
        for (LinkId l : p.path) {
          candidates.push_back({T::link, l});
          const PortRef& sender = a_to_b(l) ? e.cables[cable_of(l)].a : e.cables[cable_of(l)].b;
          if (e.congested.count(sender)) candidates.push_back({T::congestion, l});
        }
        for (HostId h : {p.prober, p.peer}) {
          for (T t : {T::host, T::responder, T::prober}) candidates.push_back({t, h});
        }
        for (Component c : candidates) {
          if (indistinguishable(e, index, c, f)) fs.distinguishable = false;
        }
      }
    }
    out.faults.push_back(fs);
  }
  for (std::size_t v = 0; v < verdicts.size(); ++v) {
    const Verdict& verdict = verdicts[v];
    for (const Suspect& suspect : verdict.suspects) {
      bool any_match = false;
      for (Component c : components_of(suspect)) {
        bool fault = false, alike = false;
        for (std::size_t i = 0; i < s.faults.size(); ++i) {
          if (matches(c, s.faults[i])) {
            fault = any_match = true;
          } else if (indistinguishable(e, index, c, s.faults[i])) {
            alike = true;
            out.faults[i].lookalike_named = true;
          }
        }
        if (fault) continue;
        if (alike) {
          ++out.lookalikes;
        } else {
          out.bystanders.push_back(describe(tree, c) + " (verdict " + std::to_string(v) + ", " +
                                   verdict.cause + ", " + std::to_string(verdict.suspects.size()) +
                                   " suspect(s)" + (verdict.settled ? ", settled" : "") + ")");
          out.settled_bystanders += verdict.settled ? 1 : 0;
        }
      }
      if (!any_match) continue;
      for (std::size_t i = 0; i < s.faults.size(); ++i) {
        bool hit = false;
        for (Component c : components_of(suspect)) hit = hit || matches(c, s.faults[i]);
        if (!hit) continue;
        out.faults[i].settled = out.faults[i].settled || verdict.settled;
        const Outcome o = verdict.suspects.size() == 1 ? Outcome::alone : Outcome::in_set;
        if (out.faults[i].outcome == Outcome::missed || o == Outcome::alone) {
          out.faults[i].outcome = o;
        }
      }
    }
  }
  return out;
}

}  // namespace ibfabric::localize::synthetic
