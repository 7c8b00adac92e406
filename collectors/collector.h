#pragma once
// The interfaces every collector implements, and how collectors are registered.
//
// A collector knows its source and turns it into metric families. The daemon's
// CollectorRunner owns its schedule: it starts a collection on the collector's interval, at
// most one at a time, bounds it by a deadline (`run_timeout`; by default the interval for a
// BlockingCollector, none for a Collector, whose I/O the MAD engine bounds) and publishes the
// result as that collector's immutable snapshot together with its health
// (ibfabric_collector_success, duration, timeouts, run_stuck, ...).
//
// Two kinds, by what their source can do to a thread:
// - Collector: collect() runs on the io_context's thread and never blocks. It may keep
//   asynchronous work of its own on the loop between collections (the MAD engine's
//   completions, the probe collector's sockets and probe timers), but not its schedule.
// - BlockingCollector: its source can block a thread for as long as it likes (a sysfs read
//   asks the HCA's firmware; a netlink dump). collect_blocking() runs on a worker thread,
//   never on the loop; a run past its deadline fails and the thread is left to return when
//   the kernel lets it (its late result is discarded).
#include "collectors/peer_directory.h"
#include "config/config.h"
#include "config/config_section.h"
#include "core/metrics.h"
#include "core/node_names.h"

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
  // Called once on the loop before the first collect() of a collector that is going to run (not
  // by --check-config, nor for one a reload builds and drops). True when it sends or answers
  // MADs; then the daemon opens the MAD engine's default port before any collector's first run,
  // so a collector that answers MADs declares its services (mad::Engine::serve) here, and their
  // agents register in that same open (docs/design.md, "The MAD engine's port opens").
  virtual bool prepare_mad() { return false; }
};

class BlockingCollector : public Collector {
 public:
  // One collection, on a worker thread: may block on its source. Must not throw, must not
  // touch the io_context, and is never called while a previous call has not returned. The
  // object may be destroyed on the worker thread (the runner that owned it was replaced by a
  // reload while the read was stuck), so its destructor must not need the loop either.
  virtual CollectResult collect_blocking() = 0;
  // The same on the calling thread (unit tests).
  void collect(Done done) final { done(collect_blocking()); }
};

// What a collector may use. Everything here outlives every collector built from it.
struct CollectorContext {
  boost::asio::io_context& io;
  std::string sysfs_root;
  // The MAD engine shared by every MAD-based collector; created on first use.
  std::function<std::shared_ptr<mad::Engine>()> mad_engine;
  // Names for node GUIDs (node_name_map); never null. Re-read on every config (re)load.
  std::shared_ptr<const NodeNameMap> node_names = std::make_shared<const NodeNameMap>();
  // The channel from the probe collector to the paths collector: the peers probe probes, which
  // paths traces. The daemon wires it (daemon_collector_context, daemon/app.h); null where
  // nothing is: probe then tells no one its peers, and paths traces none.
  std::shared_ptr<probe::PeerDirectory> probe_peers = nullptr;
  // PortXmitWait ticks the configuration gives (transmit_wait_ticks); never null.
  std::shared_ptr<const std::vector<TransmitWaitTickRule>> transmit_wait_ticks =
      std::make_shared<const std::vector<TransmitWaitTickRule>>();
  // Where collectors keep state across restarts ("" = nowhere): state_directory, docs/design.md.
  std::string state_directory = "";
  // Where procfs is mounted (procfs_root, --procfs-root): /proc, or a fixture tree in tests.
  std::string procfs_root = "/proc";
};

struct CollectorSpec {
  std::string_view name;
  bool enabled_by_default;
  std::chrono::nanoseconds default_interval;
  // Reads the collector's own keys from `section` (everything but `enabled`, `interval` and
  // `run_timeout`), calls section.finish(), and builds the collector. Throws ConfigError on a
  // bad key. Must not touch any device: --check-config builds collectors and throws them away.
  std::function<std::unique_ptr<Collector>(CollectorContext&, ConfigSection&)> create;
};

// Every collector the daemon knows, in the order their metrics are rendered.

}  // namespace ibfabric
