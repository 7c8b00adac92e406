#include "config/config.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

namespace ibfabric {
namespace {

const std::vector<std::string> kLogLevels = {"trace", "debug",    "info", "warn",
                                             "error", "critical", "off"};

}  // namespace

std::string check_listen_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) return "expected HOST:PORT, [IPv6]:PORT or :PORT";
  std::string host = address.substr(0, colon);
  std::string port = address.substr(colon + 1);
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value > 65535) {
    return "expected a port number from 0 to 65535 after the last ':', got \"" + port + "\"";
  }
  if (host.find(':') != std::string::npos && !(host.starts_with('[') && host.ends_with(']'))) {
    return "an IPv6 host must be written in brackets, as [::1]:PORT";
  }
  return "";
}

DaemonConfig parse_config(const std::string& text, const std::string& source,
                          const std::vector<CollectorDefaults>& known) {
  DaemonConfig config;
  config.source = source;
  YAML::Node root = parse_yaml(text, source);
  ConfigSection top(root, source, "");

  config.log_level = top.get_enum("log_level", config.log_level, kLogLevels);
  config.sysfs_root = top.get_string("sysfs_root", config.sysfs_root);
  config.procfs_root = top.get_string("procfs_root", config.procfs_root);
  if (top.has("state_directory")) config.state_directory = top.get_string("state_directory", "");
  if (top.has("node_name_map")) {
    config.node_name_map = top.get_string("node_name_map", "");
    if (config.node_name_map->empty()) top.fail("node_name_map", "expected a file path");
  }
  if (auto web = top.get_section("web")) {
    config.listen_address = web->get_string("listen_address", config.listen_address);
    if (auto error = check_listen_address(config.listen_address); !error.empty()) {
      web->fail("listen_address", error);
    }
    config.web_config_file = web->get_string("config_file", config.web_config_file);
    WebLimits& limits = config.web_limits;
    limits.max_connections = static_cast<std::size_t>(web->get_int(
        "max_connections", static_cast<std::int64_t>(limits.max_connections), 1, 65536));
    // Unset, it follows a lowered max_connections instead of making that an error.
    limits.max_connections_per_client =
        std::min(limits.max_connections_per_client, limits.max_connections);
    limits.max_connections_per_client = static_cast<std::size_t>(
        web->get_int("max_connections_per_client",
                     static_cast<std::int64_t>(limits.max_connections_per_client), 1, 65536));
    if (limits.max_connections_per_client > limits.max_connections) {
      web->fail("max_connections_per_client", "must be at most web.max_connections (" +
                                                  std::to_string(limits.max_connections) + ")");
    }
    const auto min_timeout = std::chrono::milliseconds(10);
    limits.header_timeout = web->get_duration("header_timeout", limits.header_timeout, min_timeout);
    limits.tls_handshake_timeout =
        web->get_duration("tls_handshake_timeout", limits.tls_handshake_timeout, min_timeout);
    limits.idle_timeout = web->get_duration("idle_timeout", limits.idle_timeout, min_timeout);
    web->finish();
  }
  for (auto& rule : top.get_section_list("transmit_wait_ticks")) {
    TransmitWaitTickRule r;
    for (const char* key : {"vendor_id", "device_id", "bytes"}) {
      if (!rule.has(key)) {
        rule.fail(key,
                  std::string("missing ") + key +
                      ": every transmit_wait_ticks entry gives vendor_id, device_id and bytes");
      }
    }
    r.vendor_id = static_cast<std::uint32_t>(rule.get_int("vendor_id", 0, 0, 0xffffff));
    r.device_id = static_cast<std::uint32_t>(rule.get_int("device_id", 0, 0, 0xffff));
    r.bytes = rule.get_double("bytes", 0, 1e-3, 1e6);
    r.per_lane = rule.get_enum("per", "port", {"port", "lane"}) == "lane";
    rule.finish();
    config.transmit_wait_ticks.push_back(r);
  }
  config.mad = top.get_section("mad");

  std::optional<ConfigSection> collectors = top.get_section("collectors");
  if (collectors) {
    for (const auto& name : collectors->keys()) {
      if (std::none_of(known.begin(), known.end(), [&](const auto& c) { return c.name == name; })) {
        std::string names;
        for (const auto& c : known) names += (names.empty() ? "" : ", ") + c.name;
        collectors->fail_key(name, "unknown collector; known collectors: " + names);
      }
    }
  }
  for (const auto& spec : known) {
    const std::string& name = spec.name;
    std::optional<ConfigSection> section =
        collectors ? collectors->get_section(name) : std::nullopt;
    if (!section) section.emplace(YAML::Node(), source, "collectors." + name);
    CollectorConfig cc{name, spec.enabled_by_default, spec.default_interval, spec.default_interval,
                       *section};
    cc.enabled = cc.section.get_bool("enabled", spec.enabled_by_default);
    cc.interval =
        cc.section.get_duration("interval", spec.default_interval, std::chrono::milliseconds(100));
    // Absent: zero, the runner's default for the collector's kind (collector_runner.h).
    cc.run_timeout = cc.section.get_duration("run_timeout", std::chrono::nanoseconds::zero(),
                                             std::chrono::milliseconds(10));
    config.collectors.push_back(std::move(cc));
  }
  if (collectors) collectors->finish();
  top.finish();
  return config;
}

DaemonConfig load_config_file(const std::string& path,
                              const std::vector<CollectorDefaults>& collectors) {
  return parse_config(read_config_file(path, "--config"), path, collectors);
}

}  // namespace ibfabric
