// CollectorRunner with a blocking collector whose source hangs until the test lets it go: the
// run fails at its deadline, ticks meanwhile neither start another call nor wait, the late
// result is discarded, and the collector recovers by itself. Conditions are awaited with
// generous bounds; nothing asserts how fast.

#include "daemon/collector_runner.h"
#include "tests/unit/collector_test_support.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace ibfabric {
namespace {

using namespace std::chrono_literals;
using test_support::value;

// Hangs in collect_blocking() while closed; answers `test_value` = the call's number.
class GateCollector final : public BlockingCollector {
 public:
  CollectResult collect_blocking() override {
    const int call = ++calls;
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return open_; });
    MetricsBuilder out;
    out.gauge("test_value", "The call that produced this.", {}, call);
    return CollectResult{std::move(out).take(), true, {}};
  }
  void set_open(bool open) {
    // Notified under the lock: a released worker may destroy this collector right after.
    std::lock_guard lock(mutex_);
    open_ = open;
    changed_.notify_all();
  }
  std::atomic<int> calls{0};

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
};

// Runs on the loop and finishes each pass after `pass` (a MAD sweep in miniature).
class SlowLoopCollector final : public Collector {
 public:
  SlowLoopCollector(boost::asio::io_context& io, std::chrono::milliseconds pass)
      : timer_(io), pass_(pass) {}
  void collect(Done done) override {
    timer_.expires_after(pass_);
    timer_.async_wait([done = std::move(done)](const boost::system::error_code&) {
      done(CollectResult{{}, true, {}});
    });
  }

 private:
  boost::asio::steady_timer timer_;
  std::chrono::milliseconds pass_;
};

MetricFamilies snapshot_of(const SnapshotStore& store) {
  MetricFamilies all;
  for (const auto& snapshot : store.all()) merge_families(all, snapshot->families);
  return all;
}

double health(const SnapshotStore& store, const std::string& name) {
  return value(snapshot_of(store), name, {{"collector", "gate"}}).value_or(-1);
}

// Runs the loop until `done` holds; false after 20 s.
bool run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
  const auto limit = std::chrono::steady_clock::now() + 20s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    io.run_for(5ms);
  }
  return true;
}

TEST(CollectorRunnerTest, StuckRunFailsAtItsDeadlineAndRecoversWhenItsSourceAnswers) {
  boost::asio::io_context io;
  SnapshotStore store;
  auto owned = std::make_unique<GateCollector>();
  GateCollector& gate = *owned;
  auto slot = std::make_shared<RunSlot>();
  auto runner =
      std::make_shared<CollectorRunner>(io, "gate", 20ms, 20ms, std::move(owned), store, slot);
  runner->start();

  ASSERT_TRUE(run_until(io, [&] { return health(store, "ibfabric_collector_run_stuck") == 1; }));
  EXPECT_EQ(health(store, "ibfabric_collector_success"), 0);
  EXPECT_EQ(health(store, "ibfabric_collector_timeouts_total"), 1);
  EXPECT_FALSE(value(snapshot_of(store), "test_value", {}).has_value());

  // Ticks go on, fail, and do not call the collector again.
  ASSERT_TRUE(run_until(io, [&] { return health(store, "ibfabric_collector_runs_total") >= 6; }));
  EXPECT_EQ(gate.calls.load(), 1);
  EXPECT_EQ(health(store, "ibfabric_collector_run_stuck"), 1);
  EXPECT_EQ(health(store, "ibfabric_collector_timeouts_total"), 1);
  EXPECT_EQ(health(store, "ibfabric_collector_failures_total"),
            health(store, "ibfabric_collector_runs_total"));

  // The source answers: the late result (call 1) is dropped, a fresh run (call 2 or later)
  // is published.
  gate.set_open(true);
  ASSERT_TRUE(run_until(io, [&] { return health(store, "ibfabric_collector_success") == 1; }));
  EXPECT_EQ(health(store, "ibfabric_collector_run_stuck"), 0);
  auto published = value(snapshot_of(store), "test_value", {});
  ASSERT_TRUE(published.has_value());
  EXPECT_GE(*published, 2);

  runner->stop();
  EXPECT_TRUE(snapshot_of(store).empty());
  // Let the last worker go before the collector's owner (this test) returns.
  ASSERT_TRUE(run_until(io, [&] { return !slot->busy.load(); }));
}

TEST(CollectorRunnerTest, ReplacedRunnerDoesNotStartASecondRunWhileTheFirstIsStuck) {
  boost::asio::io_context io;
  SnapshotStore store;
  auto owned = std::make_unique<GateCollector>();
  GateCollector& first = *owned;
  auto slot = std::make_shared<RunSlot>();
  auto old_runner =
      std::make_shared<CollectorRunner>(io, "gate", 20ms, 20ms, std::move(owned), store, slot);
  old_runner->start();
  ASSERT_TRUE(run_until(io, [&] { return health(store, "ibfabric_collector_run_stuck") == 1; }));

  // A reload: the old runner goes (its stuck thread keeps its collector alive), a new one
  // with a new collector object shares the slot.
  old_runner->stop();
  old_runner.reset();
  auto replacement = std::make_unique<GateCollector>();
  GateCollector& second = *replacement;
  second.set_open(true);
  auto runner = std::make_shared<CollectorRunner>(io, "gate", 20ms, 20ms, std::move(replacement),
                                                  store, slot);
  runner->start();
  ASSERT_TRUE(run_until(io, [&] { return health(store, "ibfabric_collector_runs_total") >= 4; }));
  EXPECT_EQ(second.calls.load(), 0);
  EXPECT_EQ(health(store, "ibfabric_collector_run_stuck"), 1);

  EXPECT_EQ(first.calls.load(), 1);
  // The old thread returns into nothing (and destroys `first`); the new runner proceeds.
  first.set_open(true);
  ASSERT_TRUE(run_until(io, [&] { return health(store, "ibfabric_collector_success") == 1; }));
  EXPECT_GE(second.calls.load(), 1);
  runner->stop();
  ASSERT_TRUE(run_until(io, [&] { return !slot->busy.load(); }));
}

// Answers on the loop: call 1 a large snapshot (prepared before it is shown), later calls a
// small one (shown at once).
class LargeThenSmallCollector final : public Collector {
 public:
  void collect(Done done) override {
    const int call = ++calls;
    MetricsBuilder out;
    out.gauge("test_value", "The call that produced this.", {}, call);
    for (int i = 0; call == 1 && i < 20000; ++i) {
      out.gauge("test_port", "A port.", {{"port", std::to_string(i)}}, i);
    }
    done(CollectResult{std::move(out).take(), true, {}});
  }
  int calls = 0;
};

// A large snapshot is shown only once prepared, and not at all if a newer one was shown
// meanwhile (a failed or small run after it): the store never goes back in time.
TEST(CollectorRunnerTest, APreparedSnapshotNeverReplacesANewerOne) {
  boost::asio::io_context io;
  SnapshotStore store;
  auto runner = std::make_shared<CollectorRunner>(
      io, "gate", 20ms, 0ns, std::make_unique<LargeThenSmallCollector>(), store);
  std::function<void()> held;
  runner->set_preparer(
      [&](const std::string&, SnapshotPtr snapshot, std::function<void(SnapshotPtr)> then) {
        held = [snapshot, then] { then(snapshot); };  // the exporter is still compressing it
      });
  runner->start();
  ASSERT_TRUE(run_until(io, [&] { return held && value(snapshot_of(store), "test_value", {}); }));
  EXPECT_EQ(value(snapshot_of(store), "test_value", {}), 2);  // run 1 waits, run 2 is shown
  held();                                                     // run 1 is ready now: too late
  EXPECT_EQ(value(snapshot_of(store), "test_value", {}), 2);
  EXPECT_FALSE(value(snapshot_of(store), "test_port", {{"port", "0"}}).has_value());
  runner->stop();
}

TEST(CollectorRunnerTest, ALoopCollectorHasNoDeadlineUnlessOneIsSet) {
  boost::asio::io_context io;
  SnapshotStore store;
  // A pass three intervals long: an overrun by default, not a failure.
  auto runner = std::make_shared<CollectorRunner>(
      io, "gate", 20ms, 0ns, std::make_unique<SlowLoopCollector>(io, 60ms), store);
  runner->start();
  ASSERT_TRUE(run_until(io, [&] { return health(store, "ibfabric_collector_runs_total") >= 3; }));
  EXPECT_EQ(health(store, "ibfabric_collector_success"), 1);
  EXPECT_EQ(health(store, "ibfabric_collector_timeouts_total"), 0);
  // Counted after a run is published, so the snapshot of run 3 shows the first two.
  EXPECT_GE(health(store, "ibfabric_collector_overruns_total"), 2);
  runner->stop();

  // With run_timeout set, the same pass fails at its deadline and its late result is dropped.
  SnapshotStore bounded_store;
  auto bounded = std::make_shared<CollectorRunner>(
      io, "gate", 20ms, 30ms, std::make_unique<SlowLoopCollector>(io, 60ms), bounded_store);
  bounded->start();
  ASSERT_TRUE(run_until(
      io, [&] { return health(bounded_store, "ibfabric_collector_timeouts_total") >= 2; }));
  EXPECT_EQ(health(bounded_store, "ibfabric_collector_success"), 0);
  EXPECT_EQ(health(bounded_store, "ibfabric_collector_failures_total"),
            health(bounded_store, "ibfabric_collector_runs_total"));
  bounded->stop();
}

}  // namespace
}  // namespace ibfabric
