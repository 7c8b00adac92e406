#pragma once
// Drives one collector: its own timer, at most one run at a time, each run bounded by a
// deadline, and its health published with its metrics in one snapshot.
//
// A BlockingCollector runs on a thread of its own per run (detached), which posts its result
// back to the loop; the loop never waits for it. A run past its deadline (of either kind) is
// published as a failed run (health only: the collector's series are dropped, as node_exporter
// drops a failed collector's) and the thread is left to return whenever its read does; until then
// no new run of that collector starts (each tick that finds it still busy is a failed run), so a
// source that never answers costs one thread per collector, not one per tick. Its late result
// is discarded: the next run reads the source afresh.

#include "collectors/collector.h"
#include "core/off_loop.h"
#include "core/snapshot_store.h"

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ibfabric {

// A collector's RunSlot (core/off_loop.h) says whether it has a run that has not returned
// yet. A blocking collector's is shared by every runner its name has had (a reload replaces
// runners), so that a thread still stuck in a read keeps a new runner from starting a second
// one.

class CollectorRunner : public std::enable_shared_from_this<CollectorRunner> {
 public:
  // `run_timeout` zero means the default: the interval for a BlockingCollector, none for a
  // collector that runs on the loop (its I/O is bounded by the MAD engine's timeouts, it holds
  // no thread, and a sweep longer than its interval is an overrun, not a failure). `slot` null
  // means a slot of its own.
  CollectorRunner(boost::asio::io_context& io, std::string name, std::chrono::nanoseconds interval,
                  std::chrono::nanoseconds run_timeout, std::unique_ptr<Collector> collector,
                  SnapshotStore& store, std::shared_ptr<RunSlot> slot = nullptr);
  ~CollectorRunner();

  // Runs now, then every interval. A run that outlasts its interval (but not its deadline) is
  // counted as an overrun and the next run starts when it ends: runs never overlap.
  void start();
  // Final: stops the timers, drops the result of a run in flight (a worker thread's result is
  // no longer even posted) and removes the snapshot (unless `keep_snapshot`: a reload's new
  // runner of the same name replaces it). Call before the io_context goes away.
  void stop(bool keep_snapshot = false);
  // One run, then `done` (for --once); `done` is called at the deadline at the latest.
  void run_once(std::function<void(bool success)> done);
  // The collector's Collector::prepare_mad(): once, before start() or run_once().
  bool prepare_mad() { return collector_->prepare_mad(); }

  const std::string& name() const { return name_; }

  // Makes a large snapshot ready to serve (the exporter compresses it off the loop) before it
  // replaces the shown one: `then` is to be called on the loop with what to show. Unset:
  // published at once (--once, tests).
  using Preparer = std::function<void(const std::string& name, std::shared_ptr<Snapshot> snapshot,
                                      std::function<void(SnapshotPtr)> then)>;
  void set_preparer(Preparer preparer) { preparer_ = std::move(preparer); }

  // What the collector was built from (its config section, interval, deadline); a reload keeps
  // a runner whose fingerprint did not change, so its counters go on.
  void set_fingerprint(std::string fingerprint) { fingerprint_ = std::move(fingerprint); }
  const std::string& fingerprint() const { return fingerprint_; }
  // Takes over the health counters of the runner it replaces at a reload, so that
  // ibfabric_collector_*_total never go back while the process runs.
  void carry_health(const CollectorRunner& from);

 private:
  void run(std::function<void(bool)> done);
  void start_blocking(BlockingCollector& collector, std::uint64_t id);
  void on_result(std::uint64_t id, CollectResult result);
  void on_deadline(std::uint64_t id);
  // Counts a run and publishes its health, with the collector's metrics on success (or a
  // partial failure the collector chose to report values with).
  void finish(CollectResult result, double duration_seconds);
  void publish(bool success, MetricFamilies metrics);
  void schedule(std::chrono::steady_clock::time_point next);
  std::string stuck_error() const;

  boost::asio::io_context& io_;
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer deadline_;
  std::string name_;
  std::chrono::nanoseconds interval_;
  std::chrono::nanoseconds run_timeout_;  // zero: no deadline
  std::shared_ptr<Collector> collector_;
  BlockingCollector* blocking_ = nullptr;  // collector_ when it is one
  SnapshotStore& store_;
  Preparer preparer_;
  std::string fingerprint_;
  // Snapshots in publication order, and the newest one the store shows: a prepared snapshot
  // that is ready after a newer one was shown is dropped.
  std::uint64_t published_ = 0, shown_ = 0;
  std::shared_ptr<RunSlot> slot_;
  // Runs a blocking collector's runs on threads of their own; closed by stop() so that nothing
  // is posted to an io_context that is going away.
  OffLoop worker_;
  bool stopped_ = false;

  // The run this runner started that has not returned (0: none), and whether its deadline
  // has already failed it.
  std::uint64_t last_id_ = 0;
  std::uint64_t in_flight_ = 0;
  bool timed_out_ = false;
  std::chrono::steady_clock::time_point started_;
  std::function<void(bool)> done_;

  // Health, kept across runs.
  std::uint64_t runs_ = 0;
  std::uint64_t failures_ = 0;
  std::uint64_t overruns_ = 0;
  std::uint64_t timeouts_ = 0;
  bool stuck_ = false;  // a run past its deadline has not returned
  double last_duration_seconds_ = 0;
  double last_success_unix_seconds_ = 0;
  std::string last_error_;
};

// Gets `runners` ready for their first run, then calls `start` on the loop (never inside this
// call): every collector declares its use of MAD (Collector::prepare_mad); when one uses it, the
// MAD engine (`engine()`) opens its default port first, registering the agents of every service
// declared, and `start` waits until that open has finished, failed or passed its deadline
// (mad::Engine::open_default_port). So that open is the daemon's first access of the IB stack:
// no collector lists the local ports or reads the IB tree of sysfs before it. The loop never
// waits for it.
void prepare_runners(boost::asio::io_context& io,
                     const std::vector<std::shared_ptr<CollectorRunner>>& runners,
                     const std::function<std::shared_ptr<mad::Engine>()>& engine,
                     std::function<void()> start);

}  // namespace ibfabric
