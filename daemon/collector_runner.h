#pragma once
// Drives one collector: its own timer, one run at a time, and its health published with its
// metrics in one snapshot.

#include "collectors/collector.h"
#include "daemon/snapshot_store.h"

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace ibfabric {

class CollectorRunner : public std::enable_shared_from_this<CollectorRunner> {
 public:
  CollectorRunner(boost::asio::io_context& io, std::string name, std::chrono::nanoseconds interval,
                  std::unique_ptr<Collector> collector, SnapshotStore& store);

  // Runs now, then every interval. A run that outlasts its interval is counted as an overrun
  // and the next run starts when it ends: runs never overlap.
  void start();
  // Stops the timer and drops the result of a run in flight. Removes its snapshot.
  void stop();
  // One run, then `done` (for --once).
  void run_once(std::function<void(bool success)> done);

  const std::string& name() const { return name_; }

 private:
  void run(std::function<void(bool)> done);
  void finish(CollectResult result, std::chrono::steady_clock::time_point started);
  void schedule(std::chrono::steady_clock::time_point next);

  boost::asio::steady_timer timer_;
  std::string name_;
  std::chrono::nanoseconds interval_;
  std::unique_ptr<Collector> collector_;
  SnapshotStore& store_;
  bool stopped_ = false;
  std::uint64_t run_generation_ = 0;

  // Health, kept across runs.
  std::uint64_t runs_ = 0;
  std::uint64_t failures_ = 0;
  std::uint64_t overruns_ = 0;
  double last_success_unix_seconds_ = 0;
  std::string last_error_;
};

}  // namespace ibfabric
