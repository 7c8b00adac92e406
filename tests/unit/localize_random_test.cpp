// The localizer on random seeded scenarios of a small synthetic fat tree (the generator and the
// scoring of tests/unit/synthetic_fabric.h, as bench/localize_scale.cpp runs them at scale): no
// bystander ever, and every culprit the probes can see named, alone or in its equally-suspect
// set. A failure prints the command that replays its scenario in the benchmark.

#include "localize/localizer.h"
#include "synthetic_fabric.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace ibfabric::localize::synthetic {
namespace {

// 512 hosts: 32 leaves of 16, 8 pods of 4 leaves, 4 aggregation switches a pod, 4 cores each.
Shape small_shape() {
  Shape shape;
  shape.hosts = 512;
  shape.hosts_per_leaf = 16;
  shape.leaves_per_pod = 4;
  shape.aggs_per_pod = 4;
  shape.cores_per_agg = 4;
  return shape;
}

std::string replay(std::uint64_t seed, const Settings& settings) {
  return "bench: localize_scale --hosts 512 --hosts-per-leaf 16 --leaves-per-pod 4 --aggs 4 "
         "--cores-per-agg 4 --probes " +
         std::to_string(settings.probes) + " --seed " + std::to_string(seed) +
         " --only 0 --verbose";
}

TEST(LocalizeRandom, NoBystanderAndEveryObservableCulpritNamed) {
  const FatTree tree(small_shape());
  const Options options;
  std::uint32_t observable = 0, distinguishable = 0, losses_seen = 0, lates_seen = 0;
  // Seeds 1-10 probe once a second, 11-20 ten times a second (the window's 60 and 600 probes).
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Settings settings;
    settings.probes = seed <= 10 ? 60 : 600;
    const std::vector<Pair> pairs = make_pairs(tree, settings, seed);
    const PairIndex index(tree, pairs);
    const Scenario s = make_scenario(tree, pairs, settings, seed, 0);  // the bench's --only 0
    const ScenarioScore sc = score(tree, s, index, localize(s.evidence, options), options);

    for (const std::string& b : sc.bystanders) {
      ADD_FAILURE() << "seed " << seed << ": bystander " << b << "; " << replay(seed, settings);
    }
    for (std::size_t k = 0; k < s.faults.size(); ++k) {
      const FaultScore& fs = sc.faults[k];
      if (!fs.unobservable.empty()) continue;
      ++observable;
      distinguishable += fs.distinguishable ? 1 : 0;
      losses_seen += s.faults[k].kind == FaultKind::loss ? 1 : 0;
      lates_seen += s.faults[k].kind != FaultKind::loss ? 1 : 0;
      EXPECT_NE(fs.outcome, Outcome::missed)
          << "seed " << seed << ": missed " << describe(tree, s.faults[k])
          << (fs.lookalike_named ? " (a look-alike was named instead)" : "") << "; "
          << replay(seed, settings);
    }
  }
  std::printf("20 seeds: %u culprits observable (%u losses, %u late), %u distinguishable\n",
              observable, losses_seen, lates_seen, distinguishable);
  // The seeds must exercise something: culprits of both symptoms the probes can see, some of
  // them distinguishable (35, 30, 21 and 14 when written).
  EXPECT_GE(observable, 30u);
  EXPECT_GE(distinguishable, 25u);
  EXPECT_GE(losses_seen, 15u);
  EXPECT_GE(lates_seen, 10u);
}

// Scenarios of the benchmark at 1,024 hosts (its default fabric, 60 probes a pair unless said)
// in which the localizer once named a bystander or missed a culprit it could see, one of each
// way it did; each replays with `localize_scale --hosts 1024 --seed S --only I --verbose`
// (`--probes 600` where said).
TEST(LocalizeRandom, ScenariosThatFoundFaults) {
  struct Case {
    std::uint64_t seed;
    std::uint32_t index;
    const char* what;
    std::uint32_t probes = 60;
    bool may_miss = false;  // a culprit under the floors of one window: no bystander is asked
  };
  const Case cases[] = {
      {7, 77,
       "a 30 % leaf uplink contradicted by one of its 27 pairs (6 lost of 60), its loss "
       "named as a prober's"},
      {1, 68, "a host late in a pair crossing a congested port and by one stray late probe"},
      {11, 5,
       "a host cable's 2 % loss taken by its responder, dropped for the cable's counters, "
       "and named as nothing"},
      {3, 54,
       "a downlink carrying a host cable's loss and two pairs of another fault, named "
       "instead of the host cable"},
      {23, 59,
       "a host cable's 2 % loss (5 probes, no counters) and one stray loss of another pair, "
       "named as the aggregation-core path they share",
       60, true},
      {23, 86,
       "a host cable with counters and an aggregation-core path carrying its pairs and a "
       "pair of another fault, the path named",
       60},
      {196, 13,
       "a host whose pairs carried most of an aggregation-core cable's loss, named before "
       "the cable and kept beside it"},
      {111, 45,
       "a host named instead of the leaf downlink with counters that all its pairs cross, "
       "3.3 nats of fit apart"},
      {153, 97, "a host named instead of the aggregation-core cable with counters, 2.2 nats apart"},
      {162, 36,
       "a host cable grouped with a cable whose reverse direction was named (a rule tried "
       "on the way)"},
      {69, 63,
       "a 3 % downlink under a 30 % host cable thrown out by the host cable's pairs, whose "
       "refitted rate took its share (600 probes)",
       600},
  };
  Shape shape;
  shape.hosts = 1024;
  const FatTree tree(shape);
  const Options options;
  for (const Case& c : cases) {
    Settings settings;
    settings.probes = c.probes;
    const std::vector<Pair> pairs = make_pairs(tree, settings, c.seed);
    const PairIndex index(tree, pairs);
    const Scenario s = make_scenario(tree, pairs, settings, c.seed, c.index);
    const ScenarioScore sc = score(tree, s, index, localize(s.evidence, options), options);
    std::string problems;
    for (const std::string& b : sc.bystanders) problems += "\n  bystander " + b;
    for (std::size_t k = 0; k < s.faults.size() && !c.may_miss; ++k) {
      if (sc.faults[k].unobservable.empty() && sc.faults[k].outcome == Outcome::missed) {
        problems += "\n  missed " + describe(tree, s.faults[k]);
      }
    }
    EXPECT_TRUE(problems.empty()) << "--seed " << c.seed << " --only " << c.index << " (" << c.what
                                  << "):" << problems;
  }
}

// Before the counters arrive (none drawn), a settled verdict, confirmed half an interval after
// it was found, names no bystander: scenarios in which a rule once settled a host cable's loss
// as the aggregation-core path its pairs and one pair of another fault share (replay with
// `localize_scale --hosts 1024 --counter-probability 0 --seed S --only I --verbose`).
TEST(LocalizeRandom, SettledVerdictsNameNoBystanderBeforeTheCounters) {
  Shape shape;
  shape.hosts = 1024;
  const FatTree tree(shape);
  const Options options;
  Settings settings;
  settings.counter_probability = 0;
  std::size_t settled = 0;
  for (auto [seed, index] : {std::pair{23u, 86u}, {55u, 68u}, {56u, 68u}}) {
    const std::vector<Pair> pairs = make_pairs(tree, settings, seed);
    const PairIndex index_of(tree, pairs);
    const Scenario s = make_scenario(tree, pairs, settings, seed, index);
    const std::vector<Verdict> verdicts = localize(s.evidence, options);
    const ScenarioScore sc = score(tree, s, index_of, verdicts, options);
    EXPECT_EQ(sc.settled_bystanders, 0u) << "--seed " << seed << " --only " << index;
    const auto n = static_cast<std::size_t>(std::count_if(
        verdicts.begin(), verdicts.end(), [](const Verdict& v) { return v.settled; }));
    std::printf("--seed %u --only %u: %zu verdicts, %zu settled\n", seed, index, verdicts.size(),
                n);
    settled += n;
  }
  EXPECT_GT(settled, 0u);  // the scenarios still settle what they can (2 when written)
}

// The same seed gives the same window (every scenario of the benchmark replays from its seed).
TEST(LocalizeRandom, ScenarioReplaysFromItsSeed) {
  const FatTree tree(small_shape());
  const Settings settings;
  auto build = [&](std::uint64_t seed) {
    return make_scenario(tree, make_pairs(tree, settings, seed), settings, seed, 3);
  };
  const Scenario a = build(7), b = build(7), c = build(8);
  ASSERT_EQ(a.evidence.pairs.size(), b.evidence.pairs.size());
  for (std::size_t k = 0; k < a.evidence.pairs.size(); ++k) {
    EXPECT_EQ(a.evidence.pairs[k].path, b.evidence.pairs[k].path);
    EXPECT_EQ(a.evidence.pairs[k].lost, b.evidence.pairs[k].lost);
    EXPECT_EQ(a.evidence.pairs[k].late, b.evidence.pairs[k].late);
  }
  ASSERT_EQ(a.faults.size(), b.faults.size());
  for (std::size_t i = 0; i < a.faults.size(); ++i)
    EXPECT_EQ(describe(tree, a.faults[i]), describe(tree, b.faults[i]));
  bool differs = a.faults.size() != c.faults.size();
  for (std::size_t i = 0; !differs && i < a.faults.size(); ++i) {
    differs = describe(tree, a.faults[i]) != describe(tree, c.faults[i]);
  }
  EXPECT_TRUE(differs);
}

// Routes go up to the lowest common level and down, through the switch the destination picks.
TEST(LocalizeRandom, RoutesUpAndDownByDestination) {
  const FatTree tree(small_shape());
  std::vector<LinkId> leg;
  tree.route(0, 1, leg);  // the same leaf
  EXPECT_EQ(leg, (std::vector<LinkId>{link_of(0, false), link_of(1, true)}));
  leg.clear();
  tree.route(0, 17, leg);  // the next leaf of pod 0: through aggregation switch 17 % 4
  EXPECT_EQ(leg, (std::vector<LinkId>{link_of(0, false), link_of(tree.leaf_up(0, 1), true),
                                      link_of(tree.leaf_up(1, 1), false), link_of(17, true)}));
  leg.clear();
  tree.route(0, 100, leg);  // leaf 6 of pod 1: through core (100 / 4) % 4 of group 100 % 4
  EXPECT_EQ(leg, (std::vector<LinkId>{link_of(0, false), link_of(tree.leaf_up(0, 0), true),
                                      link_of(tree.agg_up(0, 0, 1), true),
                                      link_of(tree.agg_up(1, 0, 1), false),
                                      link_of(tree.leaf_up(6, 0), false), link_of(100, true)}));
  EXPECT_EQ(tree.cables()[0].a_name, "leaf-000-00");
  EXPECT_EQ(tree.cables()[0].b_name, "node-000000");
}

// The scorer itself, on verdicts written by hand: it must be able to fail.
class Scorer : public ::testing::Test {
 protected:
  Scorer() : tree_(small_shape()), pairs_(make_pairs(tree_, quiet(), 5)), index_(tree_, pairs_) {
    Fault loss;  // 30 % into host 5: about a hundred lost probes over its pairs
    loss.kind = FaultKind::loss;
    loss.link = link_of(tree_.host_cable(5), true);
    loss.rate = 0.3;
    Fault stall;
    stall.kind = FaultKind::stall;
    stall.host = 300;
    stall.rate = 6;
    Rng rng(1);
    scenario_ = apply_faults(tree_, pairs_, quiet(), {loss, stall}, rng);
  }
  static Settings quiet() {
    Settings s;
    s.noise_lost = s.noise_late = s.noise_counters = 0;
    return s;
  }
  static Suspect cable(CableId c, bool a_to_b) {
    Suspect s;
    s.kind = Kind::cable;
    s.cable = c;
    s.directions = {a_to_b, !a_to_b};
    return s;
  }
  static Suspect whole_cable(CableId c) {
    Suspect s;
    s.kind = Kind::cable;
    s.cable = c;
    return s;
  }
  static Suspect host(HostId h, Kind kind = Kind::host) {
    Suspect s;
    s.kind = kind;
    s.host = h;
    return s;
  }
  ScenarioScore score_of(std::vector<std::vector<Suspect>> named) {
    std::vector<Verdict> verdicts;
    for (auto& suspects : named) {
      Verdict& v = verdicts.emplace_back();
      v.suspects = std::move(suspects);
    }
    return score(tree_, scenario_, index_, verdicts, Options{});
  }
  FatTree tree_;
  std::vector<Pair> pairs_;
  PairIndex index_;
  Scenario scenario_;
};

TEST_F(Scorer, BothFaultsObservableTheCableTwinnedWithItsHost) {
  const ScenarioScore sc = score_of({});
  ASSERT_EQ(sc.faults.size(), 2u);
  EXPECT_EQ(sc.faults[0].unobservable, "");
  EXPECT_FALSE(sc.faults[0].distinguishable);  // host 5 carries exactly its cable's pairs
  EXPECT_EQ(sc.faults[1].unobservable, "");
  EXPECT_EQ(sc.faults[0].outcome, Outcome::missed);
  EXPECT_EQ(sc.faults[1].outcome, Outcome::missed);
  EXPECT_FALSE(sc.clean());
}

TEST_F(Scorer, NamedAloneAndInASet) {
  ScenarioScore sc = score_of({{cable(5, true)}, {host(300, Kind::responder)}});
  EXPECT_EQ(sc.faults[0].outcome, Outcome::alone);
  EXPECT_EQ(sc.faults[1].outcome, Outcome::alone);
  EXPECT_TRUE(sc.bystanders.empty());
  EXPECT_TRUE(sc.clean());
  sc = score_of({{host(5), cable(5, true)}, {host(300)}});
  EXPECT_EQ(sc.faults[0].outcome, Outcome::in_set);
  EXPECT_EQ(sc.lookalikes, 1u);  // host 5, the cable's twin
  EXPECT_TRUE(sc.clean());
}

TEST_F(Scorer, ALookAlikeAloneMissesTheCulpritButIsNoBystander) {
  const ScenarioScore sc = score_of({{host(5)}, {host(300)}});
  EXPECT_EQ(sc.faults[0].outcome, Outcome::missed);
  EXPECT_TRUE(sc.faults[0].lookalike_named);
  EXPECT_TRUE(sc.bystanders.empty());
  EXPECT_FALSE(sc.clean());
}

TEST_F(Scorer, AnythingElseIsABystander) {
  // A leaf uplink that none of host 5's pairs crosses; the stalled host's cable (a cable shows
  // no lateness); a cable direction the fault does not lose in (leaf's uplink down, carrying
  // other pairs).
  CableId other = 0;
  for (CableId c = tree_.leaf_up(0, 0); c < tree_.cables().size(); ++c) {
    if (index_.link(link_of(c, true)).size() > 0 &&
        std::none_of(
            index_.link(link_of(c, true)).begin(), index_.link(link_of(c, true)).end(),
            [&](std::uint32_t k) { return pairs_[k].prober == 5 || pairs_[k].peer == 5; })) {
      other = c;
      break;
    }
  }
  ASSERT_NE(other, 0u);
  ScenarioScore sc = score_of({{cable(5, true), cable(other, true)}, {host(300)}});
  EXPECT_EQ(sc.faults[0].outcome, Outcome::in_set);
  ASSERT_EQ(sc.bystanders.size(), 1u);
  EXPECT_NE(sc.bystanders[0].find(tree_.cables()[other].a_name), std::string::npos);
  EXPECT_FALSE(sc.clean());
  sc = score_of({{cable(5, true)}, {whole_cable(300)}, {host(300)}});
  EXPECT_EQ(sc.bystanders.size(), 2u);  // cable 300 in both directions (none given: both)
  sc = score_of({{cable(5, true)}, {host(300)}, {host(301)}});
  EXPECT_EQ(sc.bystanders.size(), 1u);
}

}  // namespace
}  // namespace ibfabric::localize::synthetic
