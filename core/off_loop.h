#pragma once
// Blocking work off the event loop: a detached thread per call, at most one at a time per
// slot, whose result is posted back to the loop. Used by CollectorRunner for a
// BlockingCollector's runs and by the MAD collectors to list the local ports
// (mad/port_listing.h). A thread stuck in a read is never joined or cancelled:
// its owner gives up on it at a deadline of its own, and the slot stays busy until it returns,
// so a source that never answers holds one thread per slot, not one per attempt.

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace ibfabric {

// Whether a call has not returned yet. May be shared (a reload replaces a collector's runner,
// and the new one must wait for the old one's stuck thread). Set on the loop, cleared by the
// worker thread (or by whoever finishes work that runs on the loop).
struct RunSlot {
  std::atomic<bool> busy{false};
};

class OffLoop {
 public:
  // What a worker hands back: run on the loop, unless the OffLoop was closed by then.
  using Then = std::function<void()>;

  explicit OffLoop(boost::asio::io_context& io, std::shared_ptr<RunSlot> slot = nullptr);
  ~OffLoop();
  OffLoop(const OffLoop&) = delete;
  OffLoop& operator=(const OffLoop&) = delete;

  // Nothing is posted to the loop after this (a stopped owner, an io_context going away).
  void close();
  bool busy() const { return slot_->busy.load(std::memory_order_acquire); }
  const std::shared_ptr<RunSlot>& slot() const { return slot_; }

  // Marks the slot busy and runs `work` on a thread of its own; what it returns is posted to
  // the loop. The slot frees once `work` has returned and what it captured is destroyed (on
  // the worker thread: `work` must not need the loop for that). Returns why no thread could
  // be started ("" when one was; the slot is free again otherwise).
  std::string start(std::function<Then()> work);

  // Worker threads of every OffLoop that have not returned, process-wide: main() must not run
  // destructors under them at exit.
  static std::size_t running();

 private:
  // What a worker posts through; the lock is held only while posting, never during the work.
  struct Mailbox {
    std::mutex mutex;
    boost::asio::io_context* io = nullptr;
  };
  std::shared_ptr<RunSlot> slot_;
  std::shared_ptr<Mailbox> mailbox_;
};

}  // namespace ibfabric
