#include "daemon/collector_runner.h"

#include <spdlog/spdlog.h>

namespace ibfabric {

using Clock = std::chrono::steady_clock;

CollectorRunner::CollectorRunner(boost::asio::io_context& io, std::string name,
                                 std::chrono::nanoseconds interval,
                                 std::unique_ptr<Collector> collector, SnapshotStore& store)
    : timer_(io),
      name_(std::move(name)),
      interval_(interval),
      collector_(std::move(collector)),
      store_(store) {}

void CollectorRunner::start() {
  stopped_ = false;
  schedule(Clock::now());
}

void CollectorRunner::stop() {
  stopped_ = true;
  ++run_generation_;  // a run in flight finishes into nothing
  timer_.cancel();
  store_.remove(name_);
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
        ++self->overruns_;
        spdlog::warn(
            "collector={} msg=\"run took longer than its interval; next run starts now\" "
            "duration_seconds={:.3f} interval_seconds={:.3f}",
            self->name_, std::chrono::duration<double>(now - started).count(),
            std::chrono::duration<double>(self->interval_).count());
        next = now;
      }
      self->schedule(next);
    });
  });
}

void CollectorRunner::run(std::function<void(bool)> done) {
  auto generation = run_generation_;
  auto started = Clock::now();
  // The collector may complete synchronously or later; either way `finish` runs exactly once
  // and a result from before a stop() is dropped.
  auto self = shared_from_this();
  collector_->collect([self, generation, started, done = std::move(done)](CollectResult result) {
    if (generation != self->run_generation_) return;
    bool success = result.success;
    self->finish(std::move(result), started);
    if (done) done(success);
  });
}

void CollectorRunner::finish(CollectResult result, Clock::time_point started) {
  double duration = std::chrono::duration<double>(Clock::now() - started).count();
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
    if (result.error != last_error_) {
      spdlog::error("collector={} msg=\"collection failed\" error=\"{}\"", name_, result.error);
      last_error_ = result.error.empty() ? "unknown error" : result.error;
    }
  }

  MetricsBuilder health;
  Labels labels{{"collector", name_}};
  health.gauge("ibfabric_collector_success",
               "1 if the collector's last run read its source, 0 if it failed.", labels,
               result.success ? 1 : 0);
  health.gauge("ibfabric_collector_duration_seconds", "How long the collector's last run took.",
               labels, duration);
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

  auto snapshot = std::make_shared<Snapshot>();
  snapshot->families = std::move(health).take();
  merge_families(snapshot->families, std::move(result.metrics));
  store_.publish(name_, std::move(snapshot));
}

}  // namespace ibfabric
