#pragma once
// The daemon's configuration: the file's top-level keys, with every collector's section kept
// for its own factory to read (collectors/collector.h).

#include "config/config_section.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric {

inline constexpr const char* kDefaultListenAddress = ":10916";

struct CollectorConfig {
  std::string name;
  bool enabled = false;
  std::chrono::nanoseconds interval{};
  // Bound on one collection; a run past it fails (collectors/collector.h). Zero when not set:
  // the interval for a blocking collector, none for one that runs on the loop.
  std::chrono::nanoseconds run_timeout{};
  // The collector's section with `enabled`, `interval` and `run_timeout` already read; the
  // collector's factory reads the rest and calls finish().
  ConfigSection section;
};

// What the endpoint allows each client, so that slow or idle clients cannot starve scrapes
// (docs/security.md). Keys under `web:`.
struct WebLimits {
  std::size_t max_connections = 64;
  std::size_t max_connections_per_client = 16;                        // per client IP address
  std::chrono::nanoseconds header_timeout = std::chrono::seconds(5);  // a request's headers
  std::chrono::nanoseconds tls_handshake_timeout = std::chrono::seconds(5);
  std::chrono::nanoseconds idle_timeout = std::chrono::minutes(2);  // keep-alive between requests
  bool operator==(const WebLimits&) const = default;
};

// A device's PortXmitWait tick, given by the configuration (`transmit_wait_ticks`): for the
// devices no public source gives one for (ib/transmit_wait_tick.h).
struct TransmitWaitTickRule {
  std::uint32_t vendor_id = 0;  // NodeInfo VendorID
  std::uint32_t device_id = 0;  // NodeInfo DeviceID
  double bytes = 0;             // one tick is this many bytes' transmit time
  bool per_lane = false;        // ... of one lane (true) or of the port (false)
  bool operator==(const TransmitWaitTickRule&) const = default;
};

struct DaemonConfig {
  std::string source;  // the file it came from, or "<built-in defaults>"
  std::string log_level = "info";
  std::string listen_address = kDefaultListenAddress;
  std::string web_config_file;  // TLS and basic auth; "" = plain HTTP, no auth
  WebLimits web_limits;
  std::string sysfs_root = "/sys";
  // Where procfs is mounted: the pods collector reads the NVIDIA driver's driver/nvidia/gpus.
  std::string procfs_root = "/proc";
  // infiniband-diags node-name-map; unset = rdma-core's default path, used only if it exists.
  std::optional<std::string> node_name_map;
  // Where the MAD collectors keep what must survive a restart (ib/state_store.h);
  // unset = $STATE_DIRECTORY (systemd's StateDirectory=), else none; "" = none.
  std::optional<std::string> state_directory;
  std::vector<TransmitWaitTickRule> transmit_wait_ticks;
  std::optional<ConfigSection> mad;         // the `mad:` section, read by the MAD engine's parser
  std::vector<CollectorConfig> collectors;  // every registered collector, in registry order
};

// A collector the config may name: the daemon passes the registered ones (collectors/
// registry.h, collector_defaults()), so that this layer knows no collector.
struct CollectorDefaults {
  std::string name;
  bool enabled_by_default = false;
  std::chrono::nanoseconds default_interval{};
};

// Parses `text` (named `source` in messages); `collectors` are the collectors it may name, in
// the order DaemonConfig::collectors lists them. Throws ConfigError with file:line:column.
DaemonConfig parse_config(const std::string& text, const std::string& source,
                          const std::vector<CollectorDefaults>& collectors);
// Reads and parses a file; a missing or unreadable file is a ConfigError too.
DaemonConfig load_config_file(const std::string& path,
                              const std::vector<CollectorDefaults>& collectors);

// "HOST:PORT", "[v6]:PORT" or ":PORT" (all addresses). Returns an error message or "".
std::string check_listen_address(const std::string& address);

}  // namespace ibfabric
