// Probe statistics and wire format on fixed inputs: every expected value below is worked out by
// hand from the inputs.

#include "collectors/probe/probe_stats.h"
#include "collectors/probe/probe_collector.h"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <set>

namespace ibfabric::probe {
namespace {

using std::chrono::microseconds;

SpikeRule rule(double multiplier, microseconds floor, std::size_t baseline_min = 4) {
  SpikeRule r;
  r.multiplier = multiplier;
  r.floor = floor;
  r.baseline_window = 8;
  r.baseline_min = baseline_min;
  return r;
}

TEST(ProbeStats, PercentilesAreNearestRankOverTheWindow) {
  PeerStats s(rule(5, microseconds(1000)), 10);
  for (int us : {50, 10, 40, 20, 30}) s.add(microseconds(us), std::nullopt);
  EXPECT_DOUBLE_EQ(*s.percentile(0.5), 30e-6);   // rank ceil(2.5) = 3 of 10,20,30,40,50
  EXPECT_DOUBLE_EQ(*s.percentile(0.99), 50e-6);  // rank 5
  EXPECT_DOUBLE_EQ(*s.max(), 50e-6);
  // The window keeps the latest 10: after 10 more at 100 us, the old ones are gone.
  for (int i = 0; i < 10; ++i) s.add(microseconds(100), std::nullopt);
  EXPECT_DOUBLE_EQ(*s.percentile(0.5), 100e-6);
  EXPECT_DOUBLE_EQ(*s.max(), 100e-6);
}

TEST(ProbeStats, JitterIsRfc3550OverConsecutiveRtts) {
  PeerStats s(rule(5, microseconds(1000)), 10);
  s.add(microseconds(100), std::nullopt);
  EXPECT_DOUBLE_EQ(s.jitter(), 0);
  s.add(microseconds(116), std::nullopt);  // |D| = 16 us: J = 0 + (16 - 0) / 16 = 1 us
  EXPECT_NEAR(s.jitter(), 1e-6, 1e-15);
  s.add(microseconds(100), std::nullopt);  // |D| = 16 us: J = 1 + (16 - 1) / 16 = 1.9375 us
  EXPECT_NEAR(s.jitter(), 1.9375e-6, 1e-15);
  s.add(microseconds(100), std::nullopt);  // |D| = 0: J = 1.9375 - 1.9375 / 16
  EXPECT_NEAR(s.jitter(), 1.9375e-6 * 15 / 16, 1e-15);
}

TEST(ProbeStats, ASpikeIsAboveBothTheMultipleOfTheBaselineAndTheFloor) {
  PeerStats s(rule(5, microseconds(300)), 100);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(s.add(microseconds(50), std::nullopt));
  EXPECT_DOUBLE_EQ(*s.baseline(), 50e-6);
  EXPECT_FALSE(s.add(microseconds(240), std::nullopt));  // 4.8x: below the multiple
  EXPECT_FALSE(s.add(microseconds(290), std::nullopt));  // 5.8x but below the 300 us floor
  EXPECT_TRUE(s.add(microseconds(5000), std::nullopt));  // 100x and above the floor
  EXPECT_EQ(s.spikes(), 1u);
  // The spike stayed out of the baseline: 50,50,50,50,240,290 -> median (rank 3) 50 us.
  EXPECT_DOUBLE_EQ(*s.baseline(), 50e-6);
  EXPECT_TRUE(s.add(microseconds(5000), std::nullopt));  // so a second one still counts
  EXPECT_EQ(s.spikes(), 2u);
}

TEST(ProbeStats, ASpikeTheHoldTimeExplainsIsTheHostsNotTheNetworks) {
  PeerStats s(rule(5, microseconds(300)), 100);
  for (int i = 0; i < 4; ++i) s.add(microseconds(50), microseconds(40));
  // 5 ms round trip, 4.96 ms of it held by the responder: network 40 us, no spike there.
  EXPECT_TRUE(s.add(microseconds(5000), microseconds(40)));
  EXPECT_EQ(s.host_spikes(), 1u);
  // 5 ms with only 1 ms held: the network's 4 ms is itself 80x the 50 us baseline.
  EXPECT_TRUE(s.add(microseconds(5000), microseconds(4000)));
  // No hold time (a stock ibping -S): never the host's.
  EXPECT_TRUE(s.add(microseconds(5000), std::nullopt));
  // Network 260 us: 5.2x the baseline but below the 300 us floor, so not a network spike.
  EXPECT_TRUE(s.add(microseconds(5000), microseconds(260)));
  EXPECT_EQ(s.spikes(), 4u);
  EXPECT_EQ(s.host_spikes(), 2u);
}

TEST(ProbeStats, NoVerdictBeforeTheBaselineHasEnoughSamples) {
  PeerStats s(rule(5, microseconds(10), 4), 100);
  s.add(microseconds(10), std::nullopt);
  EXPECT_FALSE(s.add(microseconds(10000), std::nullopt));  // only 1 in the baseline
  EXPECT_EQ(s.spikes(), 0u);
}

TEST(ProbeStats, HistogramsAreCumulativeAndNetworkTimeIsSeparate) {
  PeerStats s(rule(5, microseconds(1000)), 10);
  s.add(microseconds(3), microseconds(1));  // le 5e-6 and up; network le 1e-6 and up
  s.add(microseconds(150), std::nullopt);   // le 2e-4 and up; no network figure
  const auto& bounds = rtt_buckets();
  ASSERT_EQ(bounds.size(), 16u);
  EXPECT_DOUBLE_EQ(bounds.front(), 1e-6);
  EXPECT_DOUBLE_EQ(bounds.back(), 0.1);
  const auto& b = s.bucket_counts();
  EXPECT_EQ(b[0], 0u);  // le 1 us
  EXPECT_EQ(b[2], 1u);  // le 5 us
  EXPECT_EQ(b[6], 1u);  // le 100 us
  EXPECT_EQ(b[7], 2u);  // le 200 us
  EXPECT_EQ(b[15], 2u);
  EXPECT_EQ(s.received(), 2u);
  EXPECT_DOUBLE_EQ(s.sum(), 153e-6);
  EXPECT_EQ(s.network_count(), 1u);
  EXPECT_EQ(s.network_bucket_counts()[0], 1u);
  EXPECT_DOUBLE_EQ(*s.last_network(), 1e-6);
}

TEST(ProbeWire, EncodesAndDecodesBigEndian) {
  std::array<std::uint8_t, kHeaderBytes> bytes{};
  encode(Message{true, 0x01020304, 0x1122334455667788ull, 1500}, bytes.data());
  EXPECT_EQ(bytes[0], 'I');
  EXPECT_EQ(bytes[5], 2);
  EXPECT_EQ(bytes[8], 0x01);
  EXPECT_EQ(bytes[11], 0x04);
  EXPECT_EQ(bytes[12], 0x11);
  EXPECT_EQ(bytes[27], 1500 & 0xff);
  auto m = decode(bytes.data(), bytes.size());
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->reply);
  EXPECT_EQ(m->sequence, 0x01020304u);
  EXPECT_EQ(m->token, 0x1122334455667788ull);
  EXPECT_EQ(m->hold_ns, 1500u);
}

TEST(ProbeWire, RefusesWhatIsNotAProbe) {
  std::array<std::uint8_t, kHeaderBytes> bytes{};
  encode(Message{}, bytes.data());
  EXPECT_FALSE(decode(bytes.data(), kHeaderBytes - 1));  // short
  auto bad = bytes;
  bad[0] = 'X';
  EXPECT_FALSE(decode(bad.data(), bad.size()));  // magic
  bad = bytes;
  bad[4] = 2;
  EXPECT_FALSE(decode(bad.data(), bad.size()));  // version
  bad = bytes;
  bad[5] = 7;
  EXPECT_FALSE(decode(bad.data(), bad.size()));  // type
}

TEST(ProbePeers, ASubsetIsStableAndDiffersBetweenNodes) {
  std::vector<TargetConfig> all;
  for (int i = 0; i < 100; ++i) {
    TargetConfig t;
    t.name = "node-" + std::to_string(i);
    t.address = "10.0.0.1:1";
    all.push_back(t);
  }
  auto a1 = choose_peers("node-a", all, 8);
  auto a2 = choose_peers("node-a", all, 8);
  auto b = choose_peers("node-b", all, 8);
  ASSERT_EQ(a1.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(a1[i].name, a2[i].name);
  int same = 0;
  for (const auto& x : a1) {
    for (const auto& y : b) same += x.name == y.name;
  }
  EXPECT_LT(same, 8);
  EXPECT_EQ(choose_peers("node-a", all, 200).size(), 100u);  // fewer than the cap: all
}

TEST(ProbePeers, RotationProbesEveryCandidateOnceInCeilNOverMaxPeersSlots) {
  std::vector<TargetConfig> all;
  for (int i = 0; i < 30; ++i) {
    TargetConfig t;
    t.name = "node-" + std::to_string(i);
    all.push_back(t);
  }
  // 30 candidates, 8 a slot: slots 7..10 (4 = ceil(30 / 8)) cover all 30.
  std::map<std::string, int> seen;
  for (std::uint64_t slot = 7; slot < 11; ++slot) {
    auto chosen = choose_peers("node-a", all, 8, slot);
    ASSERT_EQ(chosen.size(), 8u);
    std::set<std::string> distinct;
    for (const auto& t : chosen) distinct.insert(t.name);
    EXPECT_EQ(distinct.size(), 8u) << "slot " << slot;
    for (const auto& name : distinct) ++seen[name];
  }
  EXPECT_EQ(seen.size(), 30u);
  // The next slot moves on: it is not the previous one.
  auto s1 = choose_peers("node-a", all, 8, 1), s2 = choose_peers("node-a", all, 8, 2);
  EXPECT_NE(s1[0].name, s2[0].name);
  EXPECT_EQ(rotation_slot(std::chrono::seconds(0), std::chrono::system_clock::now()), 0u);
  auto t = std::chrono::system_clock::time_point(std::chrono::minutes(25));
  EXPECT_EQ(rotation_slot(std::chrono::minutes(10), t), 2u);
}

}  // namespace
}  // namespace ibfabric::probe
