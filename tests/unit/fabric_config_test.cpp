#include "collectors/fabric/fabric_collector.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <boost/asio/io_context.hpp>

#include <optional>
#include <set>

namespace ibfabric::fabric {
namespace {

std::unique_ptr<Collector> make(const std::string& yaml) {
  boost::asio::io_context io;
  CollectorContext context{io, "/nonexistent", {}};
  ConfigSection section(yaml.empty() ? YAML::Node() : YAML::Load(yaml), "test.yaml",
                        "collectors.fabric");
  return spec().create(context, section);
}

TEST(FabricSpec, OffByDefaultEveryMinute) {
  auto s = spec();
  EXPECT_EQ(s.name, "fabric");
  EXPECT_FALSE(s.enabled_by_default);
  EXPECT_EQ(s.default_interval, std::chrono::seconds(60));
}

TEST(FabricSpec, AcceptsItsKeys) {
  EXPECT_NE(make(""), nullptr);
  EXPECT_NE(make("shards: 4\nshard: 3\nrediscover_every: 1\nmax_hops: 8\n"), nullptr);
}

TEST(FabricSpec, CountersBudgetIsAllAKnownSetOrAListOfKnownNames) {
  EXPECT_NE(make("counters: all\nerror_details: true\nlink_memory: 1h\n"), nullptr);
  EXPECT_NE(make("counters: errors_and_traffic\n"), nullptr);
  EXPECT_NE(make("counters: [symbol_errors, receive_bytes, receive_local_physical_errors]\n"),
            nullptr);
  try {
    make("counters: [symbol_errors, recieve_bytes]\n");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("recieve_bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("receive_bytes"), std::string::npos) << m;  // the known names are listed
    EXPECT_NE(m.find("test.yaml:1"), std::string::npos) << m;
  }
  EXPECT_THROW(make("counters: some\n"), ConfigError);
  EXPECT_THROW(make("counters: []\n"), ConfigError);
}

TEST(FabricSpec, ErrorsAndTrafficLeavesOutOnlyTheUnicastAndMulticastCounts) {
  auto all = known_counters();
  auto budget = errors_and_traffic_counters();
  std::set<std::string> left_out;
  for (const auto& name : all) {
    if (!budget.count(name)) left_out.insert(name);
  }
  EXPECT_EQ(left_out,
            (std::set<std::string>{"unicast_transmit_packets", "unicast_receive_packets",
                                   "multicast_transmit_packets", "multicast_receive_packets"}));
  EXPECT_EQ(all.size(), 32u);  // 22 PMA counters and 10 error details
}

TEST(FabricSpec, ShardMustBeBelowShards) {
  try {
    make("shards: 2\nshard: 2\n");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("shard"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test.yaml"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make("shards: 0\n"), ConfigError);
  EXPECT_THROW(make("max_hops: 64\n"), ConfigError);
  EXPECT_THROW(make("rediscover_every: 0\n"), ConfigError);
  EXPECT_THROW(make("shard_count: 2\n"), ConfigError);
}

TEST(FabricCollector, WithoutAnEngineFailsTheCollectionWithoutThrowing) {
  auto c = make("");
  std::optional<CollectResult> result;
  c->collect([&](CollectResult r) { result = std::move(r); });
  ASSERT_TRUE(result);
  EXPECT_FALSE(result->success);
  EXPECT_EQ(result->error, "no MAD engine");
}

}  // namespace
}  // namespace ibfabric::fabric
