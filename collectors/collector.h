#pragma once
// The one interface every collector implements, and how collectors are registered.
//
// A collector knows its source and turns it into metric families. It owns no timer: the
// daemon's CollectorRunner calls collect() on the collector's interval, never overlapping
// runs, and publishes the result as that collector's immutable snapshot together with its
// health (ibfabric_collector_success, duration, last success).

#include "collectors/metrics.h"
#include "collectors/names/node_names.h"
#include "config/config_section.h"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace ibfabric {

namespace mad {
class Engine;
}

struct CollectResult {
  MetricFamilies metrics;
  // False when the collector could not read its source at all (the values it still has are
  // published anyway). Per-value problems are counted in the collector's own error metrics.
  bool success = true;
  std::string error;  // one line, logged when success is false
};

class Collector {
 public:
  using Done = std::function<void(CollectResult)>;
  virtual ~Collector() = default;
  // Starts one collection. Must call `done` exactly once, on the io_context's thread (it may
  // call it before returning). Must not throw and must not block on device I/O.
  virtual void collect(Done done) = 0;
};

// What a collector may use. Everything here outlives every collector built from it.
struct CollectorContext {
  boost::asio::io_context& io;
  std::string sysfs_root;
  // The MAD engine shared by every MAD-based collector; created on first use.
  std::function<std::shared_ptr<mad::Engine>()> mad_engine;
  // Names for node GUIDs (node_name_map); never null. Re-read on every config (re)load.
  std::shared_ptr<const NodeNameMap> node_names = std::make_shared<const NodeNameMap>();
};

struct CollectorSpec {
  std::string_view name;
  bool enabled_by_default;
  std::chrono::nanoseconds default_interval;
  // Reads the collector's own keys from `section` (everything but `enabled` and `interval`),
  // calls section.finish(), and builds the collector. Throws ConfigError on a bad key. Must not
  // touch any device: --check-config builds collectors and throws them away.
  std::function<std::unique_ptr<Collector>(CollectorContext&, ConfigSection&)> create;
};

// Every collector the daemon knows, in the order their metrics are rendered.
std::span<const CollectorSpec> collector_specs();
const CollectorSpec* find_collector_spec(std::string_view name);

}  // namespace ibfabric
