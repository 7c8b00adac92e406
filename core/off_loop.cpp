#include "core/off_loop.h"

#include <boost/asio/post.hpp>

#include <system_error>
#include <thread>

namespace ibfabric {

namespace {
std::atomic<std::size_t> g_running{0};
}  // namespace

OffLoop::OffLoop(boost::asio::io_context& io, std::shared_ptr<RunSlot> slot)
    : slot_(slot ? std::move(slot) : std::make_shared<RunSlot>()),
      mailbox_(std::make_shared<Mailbox>()) {
  mailbox_->io = &io;
}

OffLoop::~OffLoop() { close(); }

void OffLoop::close() {
  std::lock_guard lock(mailbox_->mutex);
  mailbox_->io = nullptr;
}

std::size_t OffLoop::running() { return g_running.load(std::memory_order_acquire); }

std::string OffLoop::start(std::function<Then()> work) {
  slot_->busy.store(true, std::memory_order_relaxed);
  g_running.fetch_add(1, std::memory_order_relaxed);
  auto run = [work = std::move(work), slot = slot_, mailbox = mailbox_]() mutable {
    Then then = work();
    // What the work held (a collector, after a reload its last owner) goes before the slot
    // frees, so that the next call never overlaps with its destruction.
    work = nullptr;
    slot->busy.store(false, std::memory_order_release);
    {
      std::lock_guard lock(mailbox->mutex);
      if (mailbox->io && then) {
        // Checked again when it runs: closed in between, its owner may be gone (a StateStore
        // destroyed with its write's result still queued ran that result on freed memory).
        boost::asio::post(*mailbox->io, [mailbox, then = std::move(then)] {
          {
            std::lock_guard lock(mailbox->mutex);
            if (!mailbox->io) return;
          }
          then();
        });
      }
    }
    g_running.fetch_sub(1, std::memory_order_release);
  };
  try {
    // Detached: a read that never returns must not hold up the loop, a reload or the exit.
    std::thread(std::move(run)).detach();
  } catch (const std::system_error& e) {
    g_running.fetch_sub(1, std::memory_order_relaxed);
    slot_->busy.store(false, std::memory_order_relaxed);
    return std::string("cannot start a thread: ") + e.what();
  }
  return {};
}

}  // namespace ibfabric
