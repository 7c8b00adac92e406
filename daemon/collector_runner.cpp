#include "daemon/collector_runner.h"

#include "exporters/prometheus/render.h"
#include "mad/engine.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include <system_error>
#include <thread>

namespace ibfabric {

using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

CollectorRunner::CollectorRunner(boost::asio::io_context& io, std::string name,
                                 std::chrono::nanoseconds interval,
                                 std::chrono::nanoseconds run_timeout,
                                 std::unique_ptr<Collector> collector, SnapshotStore& store,
                                 std::shared_ptr<RunSlot> slot)
    : io_(io),
      timer_(io),
      deadline_(io),
      name_(std::move(name)),
      interval_(interval),
      collector_(std::move(collector)),
      blocking_(dynamic_cast<BlockingCollector*>(collector_.get())),
      store_(store),
      // Only a blocking collector's runs hold a thread: only they need a slot kept across
      // reloads. A loop collector's run in flight at a reload is simply dropped, as before.
      slot_(slot && blocking_ ? std::move(slot) : std::make_shared<RunSlot>()),
      worker_(io, slot_) {
  run_timeout_ = run_timeout.count() > 0 ? run_timeout
                 : blocking_             ? interval
                                         : std::chrono::nanoseconds::zero();
}

CollectorRunner::~CollectorRunner() = default;

void CollectorRunner::start() {
  if (!stopped_) schedule(Clock::now());
}

void CollectorRunner::stop(bool keep_snapshot) {
  stopped_ = true;
  timer_.cancel();
  deadline_.cancel();
  done_ = nullptr;
  worker_.close();
  if (!keep_snapshot) store_.remove(name_);
}

void CollectorRunner::carry_health(const CollectorRunner& from) {
  runs_ = from.runs_;
  failures_ = from.failures_;
  overruns_ = from.overruns_;
  timeouts_ = from.timeouts_;
  last_success_unix_seconds_ = from.last_success_unix_seconds_;
}

void CollectorRunner::run_once(std::function<void(bool)> done) { run(std::move(done)); }

void CollectorRunner::schedule(Clock::time_point next) {
  timer_.expires_at(next);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->stopped_) return;
    auto started = Clock::now();
    self->run([self, started](bool) {
      if (self->stopped_) return;
      auto next = started + self->interval_;
      auto now = Clock::now();
      if (next <= now) {
        if (self->timed_out_) {
          // Failed at a deadline of an interval or more: ask the source again an interval
          // later, not at once (it most likely still hangs, and the run would only be skipped).
          next = now + self->interval_;
        } else {
          ++self->overruns_;
          spdlog::warn(
              "collector={} msg=\"run took longer than its interval; next run starts now\" "
              "duration_seconds={:.3f} interval_seconds={:.3f}",
              self->name_, seconds(now - started), seconds(self->interval_));
          next = now;
        }
      }
      self->schedule(next);
    });
  });
}

std::string CollectorRunner::stuck_error() const {
  // One text for the timed-out run and the ticks it makes fail, so it is logged once.
  if (run_timeout_.count() == 0) return "the previous run has not returned; no new run starts";
  return fmt::format(
      "a run did not finish within run_timeout={:.3f}s; no new run starts until it returns",
      seconds(run_timeout_));
}

void CollectorRunner::run(std::function<void(bool)> done) {
  // One outstanding run per collector, across reloads: a run that passed its deadline and has
  // not returned keeps its thread, and every tick meanwhile fails without starting another.
  if (slot_->busy.load(std::memory_order_acquire)) {
    stuck_ = true;
    finish(CollectResult{{}, false, stuck_error()}, last_duration_seconds_);
    if (done) done(false);
    return;
  }
  stuck_ = false;
  timed_out_ = false;
  slot_->busy.store(true, std::memory_order_relaxed);
  const auto id = ++last_id_;
  in_flight_ = id;
  started_ = Clock::now();
  done_ = std::move(done);

  if (run_timeout_.count() > 0) {
    deadline_.expires_after(run_timeout_);
    deadline_.async_wait([self = shared_from_this(), id](const boost::system::error_code& ec) {
      if (!ec) self->on_deadline(id);
    });
  }

  if (blocking_) {
    start_blocking(*blocking_, id);
    return;
  }
  // May complete synchronously or later, always on the loop.
  collector_->collect([self = shared_from_this(), slot = slot_, id](CollectResult result) {
    slot->busy.store(false, std::memory_order_release);
    self->on_result(id, std::move(result));
  });
}

void CollectorRunner::start_blocking(BlockingCollector& blocking, std::uint64_t id) {
  // The worker holds the collector (a reload may drop the runner's reference meanwhile); it is
  // released, on the worker, before the slot frees.
  auto error = worker_.start(
      [collector = collector_, &blocking, weak = weak_from_this(), id]() -> OffLoop::Then {
        CollectResult result;
        try {
          result = blocking.collect_blocking();
        } catch (const std::exception& e) {
          result = CollectResult{{}, false, e.what()};
        }
        return [weak, id, result = std::move(result)]() mutable {
          if (auto self = weak.lock()) self->on_result(id, std::move(result));
        };
      });
  if (!error.empty()) on_result(id, CollectResult{{}, false, std::move(error)});
}

void CollectorRunner::on_result(std::uint64_t id, CollectResult result) {
  if (id != in_flight_) return;  // a run this runner had already given up on and replaced
  in_flight_ = 0;
  if (stopped_) return;
  const double duration = seconds(Clock::now() - started_);
  if (timed_out_) {
    // Its deadline already failed this run; what it read is late and is discarded.
    spdlog::debug(
        "collector={} msg=\"a run that passed its deadline returned; its result is discarded\" "
        "duration_seconds={:.3f}",
        name_, duration);
    stuck_ = false;
    publish(false, {});
    return;
  }
  deadline_.cancel();
  const bool success = result.success;
  finish(std::move(result), duration);
  if (auto done = std::move(done_)) {
    done_ = nullptr;
    done(success);
  }
}

void CollectorRunner::on_deadline(std::uint64_t id) {
  if (id != in_flight_ || timed_out_ || stopped_) return;
  timed_out_ = true;
  stuck_ = true;
  ++timeouts_;
  finish(CollectResult{{}, false, stuck_error()}, seconds(run_timeout_));
  if (auto done = std::move(done_)) {
    done_ = nullptr;
    done(false);
  }
}

void CollectorRunner::finish(CollectResult result, double duration_seconds) {
  last_duration_seconds_ = duration_seconds;
  ++runs_;
  if (result.success) {
    last_success_unix_seconds_ =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (!last_error_.empty()) {
      spdlog::info("collector={} msg=\"recovered\"", name_);
      last_error_.clear();
    }
  } else {
    ++failures_;
    // Log a failure when it starts or changes, not on every run.
    std::string error = result.error.empty() ? "unknown error" : result.error;
    if (error != last_error_) {
      spdlog::error("collector={} msg=\"collection failed\" error=\"{}\"", name_, error);
      last_error_ = std::move(error);
    }
  }
  publish(result.success, std::move(result.metrics));
}

void CollectorRunner::publish(bool success, MetricFamilies metrics) {
  MetricsBuilder health;
  Labels labels{{"collector", name_}};
  health.gauge("ibfabric_collector_success",
               "1 if the collector's last run read its source, 0 if it failed.", labels,
               success ? 1 : 0);
  health.gauge("ibfabric_collector_duration_seconds", "How long the collector's last run took.",
               labels, last_duration_seconds_);
  if (last_success_unix_seconds_ > 0) {
    health.gauge("ibfabric_collector_last_success_timestamp_seconds",
                 "Unix time of the collector's last successful run.", labels,
                 last_success_unix_seconds_);
  }
  health.counter("ibfabric_collector_runs_total", "Runs of the collector since the daemon started.",
                 labels, static_cast<double>(runs_));
  health.counter("ibfabric_collector_failures_total",
                 "Runs of the collector that failed since the daemon started.", labels,
                 static_cast<double>(failures_));
  health.counter("ibfabric_collector_overruns_total",
                 "Runs that took longer than the collector's interval (the next run was late).",
                 labels, static_cast<double>(overruns_));
  health.counter("ibfabric_collector_timeouts_total",
                 "Runs that did not finish within the collector's run_timeout (failed runs).",
                 labels, static_cast<double>(timeouts_));
  health.gauge("ibfabric_collector_run_stuck",
               "1 while a run that passed its deadline has not returned (a blocking collector's "
               "thread still waits on its source); no new run of the collector starts meanwhile.",
               labels, stuck_ ? 1 : 0);

  auto snapshot = std::make_shared<Snapshot>();
  snapshot->families = std::move(health).take();
  merge_families(snapshot->families, std::move(metrics));
  const std::uint64_t sequence = ++published_;
  auto show = [this, sequence](SnapshotPtr ready) {
    if (stopped_ || sequence < shown_) return;
    shown_ = sequence;
    store_.publish(name_, std::move(ready));
  };
  if (!preparer_ || !Exporter::worth_preparing(*snapshot)) {
    show(std::move(snapshot));
    return;
  }
  preparer_(name_, std::move(snapshot), [self = weak_from_this(), show](SnapshotPtr ready) {
    if (self.lock()) show(std::move(ready));
  });
}

void prepare_runners(boost::asio::io_context& io,
                     const std::vector<std::shared_ptr<CollectorRunner>>& runners,
                     const std::function<std::shared_ptr<mad::Engine>()>& engine,
                     std::function<void()> start) {
  bool uses_mad = false;
  for (const auto& runner : runners) uses_mad = runner->prepare_mad() || uses_mad;
  auto mad = uses_mad && engine ? engine() : nullptr;
  if (!mad) {
    boost::asio::post(io, std::move(start));
    return;
  }
  mad->open_default_port([start = std::move(start)](const std::string& error) {
    if (!error.empty()) {
      spdlog::info(
          "msg=\"the MAD engine's default port is not open; collectors start\" error=\"{}\"",
          error);
    }
    start();
  });
}

}  // namespace ibfabric
