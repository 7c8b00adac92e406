// Listing the local ports off the loop (mad::PortListing) with a listing that hangs until the
// test lets it go: the collection fails at the deadline instead of blocking the loop, no second
// listing starts while the first has not returned (every collection meanwhile fails with the
// same error, so it is logged once), the late result is discarded, and the next collection
// after it returns works. Conditions are awaited with generous bounds; nothing asserts how fast.

#include "mad/port_listing.h"
#include "collectors/ports/ports_collector.h"
#include "collectors/sm/sm_collector.h"
#include "fake_fabric.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ibfabric::mad {
namespace {

using namespace std::chrono_literals;

// A listing that hangs while the gate is closed; counts its calls.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool open = false;
  std::atomic<int> calls{0};
  std::vector<LocalPort> ports;

  PortListing::Lister lister() {
    return [this] {
      ++calls;
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return open; });
      return ports;
    };
  }
  void release() {
    std::lock_guard lock(mutex);
    open = true;
    changed.notify_all();
  }
};

// Runs the loop until `done` or 10 s.
template <class Pred>
bool run_until(boost::asio::io_context& io, Pred done) {
  auto until = std::chrono::steady_clock::now() + 10s;
  while (!done() && std::chrono::steady_clock::now() < until) io.run_one_for(50ms);
  return done();
}

struct Outcome {
  bool called = false;
  std::optional<std::vector<LocalPort>> ports;
  std::string error;
};

TEST(PortListing, AHungListingFailsAtItsDeadlineAndNoSecondOneStartsUntilItReturns) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  Gate gate;
  LocalPort port;
  port.ca = "mlx5_0";
  port.port = 1;
  gate.ports.push_back(port);
  auto listing = std::make_unique<PortListing>(io, gate.lister(), 50ms);
  auto ask = [&] {
    auto out = std::make_shared<Outcome>();
    listing->list([out](std::optional<std::vector<LocalPort>> ports, std::string error) {
      out->called = true;
      out->ports = std::move(ports);
      out->error = std::move(error);
    });
    return out;
  };

  auto first = ask();
  EXPECT_FALSE(first->called) << "a listing that has not returned cannot have a result";
  ASSERT_TRUE(run_until(io, [&] { return first->called; }));
  EXPECT_FALSE(first->ports);
  EXPECT_EQ(first->error, listing->stuck_error());
  EXPECT_NE(first->error.find("did not finish within 0.050s"), std::string::npos) << first->error;

  // Still hung: fails at once, with the same text, and starts no second thread.
  auto second = ask();
  EXPECT_TRUE(second->called);
  EXPECT_EQ(second->error, first->error);
  // On a loaded machine the first listing's thread may reach the lister only after its
  // deadline; wait for it, then it must be the only one.
  for (int i = 0; i < 500 && gate.calls.load() == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(gate.calls.load(), 1);

  gate.release();
  // Once it returned, a listing runs again and its result arrives; the late one never does.
  std::shared_ptr<Outcome> third;
  ASSERT_TRUE(run_until(io, [&] {
    if (!third || (third->called && !third->ports)) third = ask();
    return third->called && third->ports;
  }));
  ASSERT_EQ(third->ports->size(), 1u);
  EXPECT_EQ((*third->ports)[0].ca, "mlx5_0");
  // 2, or more when a listing of the released gate missed its 50 ms on a loaded machine.
  EXPECT_GE(gate.calls.load(), 2);
  EXPECT_FALSE(first->ports) << "the late result of the timed-out listing was delivered";
}

TEST(PortListing, DestroyedWhileHungNeverCallsBack) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  auto gate = std::make_shared<Gate>();
  bool called = false;
  {
    PortListing listing(
        io, [gate] { return gate->lister()(); }, 10s);
    listing.list([&](std::optional<std::vector<LocalPort>>, std::string) { called = true; });
  }
  gate->release();
  // The worker returns and would post; nothing may run.
  run_until(io, [&] { return OffLoop::running() == 0; });
  io.poll();
  EXPECT_FALSE(called);
}

// The collectors that list ports on every run: a hung listing fails their run (not the loop),
// with one error text for as long as it hangs.
template <class Make>
void collector_fails_while_listing_hangs(Make make) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  auto engine = std::make_shared<test_support::FakeFabric>(io, test_support::FakeFabric::Held{});
  Gate gate;  // no ports: a run after the listing returned has nothing to ask and succeeds
  auto collector = make(
      io, [engine]() -> std::shared_ptr<Engine> { return engine; }, gate);
  auto collect = [&] {
    auto out = std::make_shared<std::optional<CollectResult>>();
    collector->collect([out](CollectResult r) { *out = std::move(r); });
    return out;
  };
  auto first = collect();
  ASSERT_TRUE(run_until(io, [&] { return first->has_value(); }));
  EXPECT_FALSE((*first)->success);
  EXPECT_NE((*first)->error.find("listing the local InfiniBand ports"), std::string::npos)
      << (*first)->error;
  auto second = collect();
  ASSERT_TRUE(second->has_value());
  EXPECT_FALSE((*second)->success);
  EXPECT_EQ((*second)->error, (*first)->error) << "one text, so the runner logs it once";
  EXPECT_EQ(gate.calls.load(), 1);
  EXPECT_TRUE(engine->held.empty());

  gate.release();
  std::shared_ptr<std::optional<CollectResult>> later;
  ASSERT_TRUE(run_until(io, [&] {
    if (!later || (later->has_value() && !(*later)->success)) later = collect();
    return later->has_value() && (*later)->success;
  }));
  EXPECT_EQ(gate.calls.load(), 2);
}

TEST(PortListing, PortsCollectorRunFailsWhileTheListingHangs) {
  collector_fails_while_listing_hangs([](boost::asio::io_context& io, auto factory, Gate& gate) {
    ports::PortsConfig config;
    auto c = std::make_unique<ports::PortsCollector>(
        io, factory, config, std::make_shared<const NodeNameMap>(), gate.lister(), 50ms);
    return c;
  });
}

TEST(PortListing, SmCollectorRunFailsWhileTheListingHangs) {
  collector_fails_while_listing_hangs([](boost::asio::io_context& io, auto factory, Gate& gate) {
    return std::make_unique<sm::SmCollector>(
        io, factory, sm::SmConfig{}, std::make_shared<const NodeNameMap>(), gate.lister(), 50ms);
  });
}

}  // namespace
}  // namespace ibfabric::mad
