#pragma once
// The daemon's configuration: the file's top-level keys, with every collector's section kept
// for its own factory to read (collectors/collector.h).

#include "config/config_section.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric {

inline constexpr const char* kDefaultListenAddress = ":10916";

struct CollectorConfig {
  std::string name;
  bool enabled = false;
  std::chrono::nanoseconds interval{};
  // The collector's section with `enabled` and `interval` already read; the collector's
  // factory reads the rest and calls finish().
  ConfigSection section;
};

struct DaemonConfig {
  std::string source;  // the file it came from, or "<built-in defaults>"
  std::string log_level = "info";
  std::string listen_address = kDefaultListenAddress;
  std::string web_config_file;  // TLS and basic auth; "" = plain HTTP, no auth
  std::string sysfs_root = "/sys";
  // infiniband-diags node-name-map; unset = rdma-core's default path, used only if it exists.
  std::optional<std::string> node_name_map;
  std::optional<ConfigSection> mad;         // the `mad:` section, read by the MAD engine's parser
  std::vector<CollectorConfig> collectors;  // every registered collector, in registry order
};

// Parses `text` (named `source` in messages). Throws ConfigError with file:line:column.
DaemonConfig parse_config(const std::string& text, const std::string& source);
// Reads and parses a file; a missing or unreadable file is a ConfigError too.
DaemonConfig load_config_file(const std::string& path);

// "HOST:PORT", "[v6]:PORT" or ":PORT" (all addresses). Returns an error message or "".
std::string check_listen_address(const std::string& address);

}  // namespace ibfabric
