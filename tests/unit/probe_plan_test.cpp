// The probe plan (localize/probe_plan.h): every multi-node job's hosts a ring of probed pairs.
#include "localize/probe_plan.h"

#include <gtest/gtest.h>

#include <set>

namespace ibfabric::localize {
namespace {

TEST(ProbePlan, EachJobsHostsAreARingInTheOrderOfTheirGuids) {
  auto plan = probe_plan({{30, 10, 20}, {40}, {20, 50, 20}});
  EXPECT_EQ(plan, (std::map<std::uint64_t, std::vector<std::uint64_t>>{
                      {10, {20}}, {20, {30, 50}}, {30, {10}}, {50, {20}}}));
  // A pair two jobs share is planned once.
  EXPECT_EQ(probe_plan({{1, 2}, {2, 1}}),
            (std::map<std::uint64_t, std::vector<std::uint64_t>>{{1, {2}}, {2, {1}}}));
  EXPECT_TRUE(probe_plan({}).empty());
}

// Issue 50's size: 1,024 hosts running 32-node jobs. Every job's hosts probe each other in one
// cycle (each reaches every other along planned pairs), and a host of one job is given one peer:
// no more probes than its max_peers already allows.
TEST(ProbePlan, ThirtyTwoJobsOfThirtyTwoNodesOnAThousandHosts) {
  std::vector<std::vector<std::uint64_t>> jobs(32);
  for (std::uint64_t h = 0; h < 1024; ++h) jobs[(h * 7) % 32].push_back(0x1000 + h * 13 % 1024);
  auto plan = probe_plan(jobs);
  EXPECT_EQ(plan.size(), 1024u);
  for (const auto& [host, peers] : plan) EXPECT_EQ(peers.size(), 1u) << host;
  for (const auto& hosts : jobs) {
    std::set<std::uint64_t> members(hosts.begin(), hosts.end()), seen;
    auto at = hosts.front();
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      seen.insert(at);
      at = plan.at(at).front();
      EXPECT_TRUE(members.count(at)) << "a planned peer outside the job";
    }
    EXPECT_EQ(seen, members);  // one cycle through the whole job
  }
}

}  // namespace
}  // namespace ibfabric::localize
