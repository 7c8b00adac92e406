#include "config/config.h"
#include "collectors/registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace ibfabric {
namespace {

using namespace std::chrono_literals;

// Expects parse_config(text) to fail with a message containing every part of `expected`.
void expect_error(const std::string& text, std::initializer_list<std::string> expected) {
  try {
    parse_config(text, "test.yaml", collector_defaults());
    FAIL() << "no error for:\n" << text;
  } catch (const ConfigError& e) {
    for (const auto& part : expected) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << part << "\"";
    }
  }
}

const CollectorConfig& collector(const DaemonConfig& config, const std::string& name) {
  for (const auto& c : config.collectors) {
    if (c.name == name) return c;
  }
  throw std::runtime_error("no collector " + name);
}

TEST(ParseDuration, AcceptsUnitsAndCompounds) {
  EXPECT_EQ(parse_duration("15s"), 15s);
  EXPECT_EQ(parse_duration("500ms"), 500ms);
  EXPECT_EQ(parse_duration("2m"), 120s);
  EXPECT_EQ(parse_duration("1h"), 3600s);
  EXPECT_EQ(parse_duration("1m30s"), 90s);
  EXPECT_EQ(parse_duration("250us"), 250us);
  EXPECT_EQ(parse_duration("1.5s"), 1500ms);
  EXPECT_EQ(parse_duration("10ns"), 10ns);
}

TEST(ParseDuration, RejectsGarbage) {
  for (const char* text : {"", "15", "s", "15 s", "15sec", "-1s", "1x", "ms15", "1e3s", ".s"}) {
    EXPECT_FALSE(parse_duration(text).has_value()) << text;
  }
}

TEST(FormatDuration, PicksTheLargestExactUnit) {
  EXPECT_EQ(format_duration(15s), "15s");
  EXPECT_EQ(format_duration(1500ms), "1500ms");
  EXPECT_EQ(format_duration(3us), "3us");
  EXPECT_EQ(format_duration(7ns), "7ns");
}

TEST(ParseConfig, EmptyTextGivesDefaults) {
  auto config = parse_config("", "x.yaml", collector_defaults());
  EXPECT_EQ(config.listen_address, kDefaultListenAddress);
  EXPECT_EQ(config.sysfs_root, "/sys");
  EXPECT_EQ(config.log_level, "info");
  EXPECT_FALSE(config.collectors.empty());
  const auto& sysfs = collector(config, "sysfs");
  EXPECT_TRUE(sysfs.enabled);
  EXPECT_EQ(sysfs.interval, 15s);
}

TEST(ParseConfig, ReadsEveryTopLevelKey) {
  auto config = parse_config(R"(
log_level: debug
sysfs_root: /tmp/sys
web:
  listen_address: "127.0.0.1:9999"
collectors:
  sysfs:
    enabled: false
    interval: 500ms
)",
                             "x.yaml", collector_defaults());
  EXPECT_EQ(config.log_level, "debug");
  EXPECT_EQ(config.sysfs_root, "/tmp/sys");
  EXPECT_EQ(config.listen_address, "127.0.0.1:9999");
  const auto& sysfs = collector(config, "sysfs");
  EXPECT_FALSE(sysfs.enabled);
  EXPECT_EQ(sysfs.interval, 500ms);
}

TEST(ParseConfig, ACollectorWithNothingUnderItKeepsDefaults) {
  auto config = parse_config("collectors:\n  sysfs:\n", "x.yaml", collector_defaults());
  EXPECT_TRUE(collector(config, "sysfs").enabled);
}

TEST(ParseConfig, NotYaml) { expect_error("web: [unclosed\n", {"test.yaml:", "not valid YAML"}); }

TEST(ParseConfig, TopLevelNotAMapping) {
  expect_error("- a\n- b\n", {"test.yaml:1:1", "expected a mapping"});
}

TEST(ParseConfig, UnknownTopLevelKeyNamesItsLineAndColumn) {
  expect_error("log_level: info\nlisten: 1\n", {"test.yaml:2:1", "listen: unknown key", "web"});
}

TEST(ParseConfig, UnknownKeyInWeb) {
  expect_error("web:\n  listen: \":1\"\n",
               {"test.yaml:2:3", "web.listen: unknown key", "listen_address"});
}

TEST(ParseConfig, BadLogLevel) {
  expect_error("log_level: loud\n", {"test.yaml:1:12", "log_level", "expected one of", "debug"});
}

TEST(ParseConfig, WrongTypeForAMapping) {
  expect_error("web: 42\n", {"test.yaml:1:6", "web", "expected a mapping"});
}

TEST(ParseConfig, WrongTypeForAScalar) {
  expect_error("sysfs_root: [a, b]\n",
               {"test.yaml:1:13", "sysfs_root", "expected a string", "list"});
}

TEST(ParseConfig, BadListenAddresses) {
  expect_error("web:\n  listen_address: nohostport\n", {"2:19", "expected HOST:PORT"});
  expect_error("web:\n  listen_address: \"host:99999\"\n", {"2:19", "port number"});
  expect_error("web:\n  listen_address: \"::1:80\"\n", {"brackets"});
}

TEST(ParseConfig, UnknownCollector) {
  expect_error("collectors:\n  sysfz:\n    enabled: true\n",
               {"test.yaml:2:", "collectors.sysfz", "unknown collector", "sysfs"});
}

TEST(ParseConfig, BadEnabled) {
  expect_error("collectors:\n  sysfs:\n    enabled: yes please\n",
               {"test.yaml:3:14", "collectors.sysfs.enabled", "expected true or false"});
}

TEST(ParseConfig, BadInterval) {
  expect_error("collectors:\n  sysfs:\n    interval: soon\n",
               {"test.yaml:3:15", "collectors.sysfs.interval", "expected a duration", "\"soon\""});
}

TEST(ParseConfig, IntervalTooShort) {
  expect_error("collectors:\n  sysfs:\n    interval: 1ms\n", {"must be at least 100ms"});
}

TEST(ParseConfig, RunTimeoutIsOptionalAndChecked) {
  // Not set: zero, which the runner reads as its default for the collector's kind.
  auto config =
      parse_config("collectors:\n  sysfs:\n    interval: 2s\n", "x.yaml", collector_defaults());
  EXPECT_EQ(collector(config, "sysfs").run_timeout, 0s);
  config = parse_config("collectors:\n  sriov:\n    run_timeout: 750ms\n", "x.yaml",
                        collector_defaults());
  EXPECT_EQ(collector(config, "sriov").run_timeout, 750ms);
  EXPECT_EQ(collector(config, "sriov").interval, 15s);
  expect_error("collectors:\n  sysfs:\n    run_timeout: 1ms\n",
               {"test.yaml:3:18", "collectors.sysfs.run_timeout", "must be at least 10ms"});
  expect_error("collectors:\n  sysfs:\n    run_timeout: never\n",
               {"collectors.sysfs.run_timeout", "expected a duration"});
}

TEST(ConfigSection, UnknownKeyInACollectorSectionIsReportedByFinish) {
  auto config =
      parse_config("collectors:\n  sysfs:\n    enabeld: true\n", "x.yaml", collector_defaults());
  auto section = collector(config, "sysfs").section;
  try {
    section.finish();
    FAIL() << "finish() accepted an unknown key";
  } catch (const ConfigError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("x.yaml:3:5"), std::string::npos) << message;
    EXPECT_NE(message.find("collectors.sysfs.enabeld: unknown key"), std::string::npos) << message;
    EXPECT_NE(message.find("enabled"), std::string::npos) << message;
  }
}

TEST(ConfigSection, TypedGettersCheckRangesAndTypes) {
  ConfigSection section(YAML::Load("n: 7\nx: 0x1f\nbig: 1000\nf: 2.5\nbad: abc\nlist: [a, b]\n"
                                   "sub: {k: v}\nseq: [{a: 1}, {a: 2}]\n"),
                        "s.yaml", "root");
  EXPECT_EQ(section.get_int("n", 0, 0, 10), 7);
  EXPECT_EQ(section.get_int("x", 0, 0, 100), 31);
  EXPECT_EQ(section.get_int("absent", 5, 0, 10), 5);
  EXPECT_THROW(section.get_int("big", 0, 0, 10), ConfigError);
  EXPECT_THROW(section.get_int("bad", 0, 0, 10), ConfigError);
  EXPECT_DOUBLE_EQ(section.get_double("f", 0, 0, 10), 2.5);
  EXPECT_THROW(section.get_double("bad", 0, 0, 10), ConfigError);
  EXPECT_EQ(section.get_string_list("list"), (std::vector<std::string>{"a", "b"}));
  auto sub = section.get_section("sub");
  ASSERT_TRUE(sub.has_value());
  EXPECT_EQ(sub->get_string("k", ""), "v");
  EXPECT_EQ(sub->path(), "root.sub");
  sub->finish();
  auto seq = section.get_section_list("seq");
  ASSERT_EQ(seq.size(), 2u);
  EXPECT_EQ(seq[1].get_int("a", 0, 0, 9), 2);
  EXPECT_EQ(seq[1].path(), "root.seq[1]");
  EXPECT_NO_THROW(section.finish());
}

TEST(ConfigSection, ErrorsOnAListWhereAStringListIsExpected) {
  ConfigSection section(YAML::Load("list: {a: b}\nnested: [[1]]\n"), "s.yaml", "");
  EXPECT_THROW(section.get_string_list("list"), ConfigError);
  EXPECT_THROW(section.get_string_list("nested"), ConfigError);
}

TEST(LoadConfigFile, MissingFileSaysWhichAndWhy) {
  try {
    load_config_file("/nonexistent/ibfabricd.yaml", collector_defaults());
    FAIL();
  } catch (const ConfigError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("/nonexistent/ibfabricd.yaml"), std::string::npos);
    EXPECT_NE(message.find("No such file"), std::string::npos);
  }
}

TEST(LoadConfigFile, TheShippedExampleIsValid) {
  auto config =
      load_config_file(IBFABRIC_SOURCE_DIR "/config/ibfabricd.example.yaml", collector_defaults());
  EXPECT_EQ(config.source, IBFABRIC_SOURCE_DIR "/config/ibfabricd.example.yaml");
}

TEST(ParseConfig, WebLimits) {
  auto defaults = parse_config("", "x.yaml", collector_defaults()).web_limits;
  EXPECT_EQ(defaults.max_connections, 64u);
  EXPECT_EQ(defaults.max_connections_per_client, 16u);
  EXPECT_EQ(defaults.header_timeout, 5s);
  EXPECT_EQ(defaults.tls_handshake_timeout, 5s);
  EXPECT_EQ(defaults.idle_timeout, 2min);
  auto set = parse_config(R"(
web:
  max_connections: 100
  max_connections_per_client: 4
  header_timeout: 2s
  tls_handshake_timeout: 1500ms
  idle_timeout: 30s
)",
                          "x.yaml", collector_defaults())
                 .web_limits;
  EXPECT_EQ(set.max_connections, 100u);
  EXPECT_EQ(set.max_connections_per_client, 4u);
  EXPECT_EQ(set.header_timeout, 2s);
  EXPECT_EQ(set.tls_handshake_timeout, 1500ms);
  EXPECT_EQ(set.idle_timeout, 30s);
  // An unset per-client cap follows a lower total cap.
  EXPECT_EQ(parse_config("web:\n  max_connections: 8\n", "x.yaml", collector_defaults())
                .web_limits.max_connections_per_client,
            8u);
}

TEST(ParseConfig, BadWebLimits) {
  expect_error("web:\n  max_connections: 0\n", {"test.yaml:2:20", "web.max_connections"});
  expect_error("web:\n  max_connections: 8\n  max_connections_per_client: 9\n",
               {"test.yaml:3:31", "at most web.max_connections (8)"});
  expect_error("web:\n  header_timeout: 1ms\n", {"test.yaml:2:19", "at least 10ms"});
  expect_error("web:\n  idle_timeout: soon\n", {"test.yaml:2:17", "expected a duration"});
}

TEST(ParseConfig, TransmitWaitTicks) {
  auto c = parse_config(
      "transmit_wait_ticks:\n"
      "  - {vendor_id: 0x2c9, device_id: 0x1021, bytes: 8}\n"
      "  - {vendor_id: 0x2c9, device_id: 0x101b, bytes: 32, per: lane}\n",
      "test.yaml", collector_defaults());
  ASSERT_EQ(c.transmit_wait_ticks.size(), 2u);
  EXPECT_EQ(c.transmit_wait_ticks[0], (TransmitWaitTickRule{0x2c9, 0x1021, 8, false}));
  EXPECT_EQ(c.transmit_wait_ticks[1], (TransmitWaitTickRule{0x2c9, 0x101b, 32, true}));
  EXPECT_TRUE(parse_config("", "test.yaml", collector_defaults()).transmit_wait_ticks.empty());
  expect_error("transmit_wait_ticks:\n  - {vendor_id: 0x2c9, bytes: 8}\n",
               {"test.yaml:2:5", "missing device_id", "vendor_id, device_id and bytes"});
  expect_error(
      "transmit_wait_ticks:\n  - {vendor_id: 0x2c9, device_id: 0x1021, bytes: 8, per: vl}\n",
      {"test.yaml:2:", "per", "port", "lane"});
  expect_error("transmit_wait_ticks:\n  - {vendor_id: 0x2c9, device_id: 0x10000, bytes: 8}\n",
               {"test.yaml:2:", "device_id"});
  expect_error("transmit_wait_ticks:\n  - {vendor_id: 0x2c9, device_id: 1, bytes: 8, tick: 7}\n",
               {"test.yaml:2:", "tick: unknown key"});
}

}  // namespace
}  // namespace ibfabric
