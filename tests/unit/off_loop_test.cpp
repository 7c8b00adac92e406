// OffLoop's contract (core/off_loop.h): what a worker hands back runs on the loop,
// unless the OffLoop was closed by then, also when the worker had already posted it.

#include "core/off_loop.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <thread>

namespace ibfabric {
namespace {

using namespace std::chrono_literals;

// Until the worker threads of this process have returned, and so posted what they hand back.
bool workers_done() {
  auto until = std::chrono::steady_clock::now() + 10s;
  while (OffLoop::running() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  return OffLoop::running() == 0;
}

TEST(OffLoop, AResultRunsOnTheLoop) {
  boost::asio::io_context io;
  OffLoop worker(io);
  bool ran = false;
  ASSERT_EQ(worker.start([&]() -> OffLoop::Then { return [&] { ran = true; }; }), "");
  ASSERT_TRUE(workers_done());
  EXPECT_FALSE(ran);  // not on the worker
  io.poll();
  EXPECT_TRUE(ran);
}

TEST(OffLoop, AResultPostedBeforeItsOffLoopClosedDoesNotRun) {
  boost::asio::io_context io;
  bool ran = false;
  {
    OffLoop worker(io);
    ASSERT_EQ(worker.start([&]() -> OffLoop::Then { return [&] { ran = true; }; }), "");
    ASSERT_TRUE(workers_done());  // posted, not run: the loop has not run yet
  }                               // closed: its owner goes
  io.poll();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace ibfabric
