#include "daemon/localize_app.h"

#include "core/metrics.h"
#include "daemon/snapshot_store.h"
#include "daemon/verdict_series.h"
#include "exporters/prometheus/http_server.h"
#include "exporters/prometheus/render.h"
#include "exporters/prometheus/self_metrics.h"
#include "exporters/prometheus/web_config.h"
#include "localize/confirmer.h"

#include <spdlog/spdlog.h>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <cmath>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace ibfabric {

// --- the service ----------------------------------------------------------------------------

namespace {

// Evaluates on a thread and io_context of its own; publishes each evaluation's snapshot.
class Evaluator {
 public:
  Evaluator(const LocalizeOptions& o,
            std::function<void(SnapshotPtr, const EvaluationReport&)> publish)
      : options_(o),
        reader_(io_, o.prometheus, o.window),
        timer_(io_),
        publish_(std::move(publish)) {}

  void start() {
    arm(std::chrono::system_clock::now());
    thread_ = std::thread([this] { io_.run(); });
  }
  void stop() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  // One evaluation now, on the calling thread (--once).
  void evaluate_now(double at, std::function<void()> then) {
    evaluate(at, std::move(then));
    io_.run();
    io_.restart();
  }
  std::uint64_t evaluations = 0, failures = 0;

 private:
  // Evidence times on the interval's grid: two instances read the same samples (HA). While
  // suspects wait to be named they are judged again half an interval later, on the half grid
  // (both instances hold them alike): one settled by then (Verdict::settled) is named 5 s
  // after it was found, not 10; one that is not waits a whole interval (Confirmer).
  void arm(std::chrono::system_clock::time_point now) {
    double step = std::chrono::duration<double>(options_.interval).count();
    if (confirmer_.pending()) step /= 2;
    const double t = std::chrono::duration<double>(now.time_since_epoch()).count();
    const double next = std::floor(t / step) * step + step;
    auto wait = std::chrono::duration<double>(next - t);
    timer_.expires_after(std::chrono::duration_cast<std::chrono::milliseconds>(wait));
    timer_.async_wait([this, next](const boost::system::error_code& ec) {
      if (ec) return;
      evaluate(next, [this] { arm(std::chrono::system_clock::now()); });
    });
  }

  void evaluate(double at, std::function<void()> then) {
    auto start = std::chrono::steady_clock::now();
    reader_.read(
        at,
        [this, at, start, then = std::move(then)](query::Reading reading) {
          EvaluationReport r;
          r.at = at;
          r.read_seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (reading.newest_sample > 0) r.evidence_age = std::max(0.0, at - reading.newest_sample);
          ++evaluations;
          if (!reading.errors.empty()) {
            // By error, with the queries that met it (one store failing fails them all alike).
            std::map<std::string, std::string> by_error;
            for (const auto& [query, error] : reading.errors) {
              auto& queries = by_error[error];
              queries += (queries.empty() ? "" : ", ") + query;
            }
            for (const auto& [error, queries] : by_error) {
              r.failure += (r.failure.empty() ? "" : "; ") + error + " (" + queries + ")";
            }
          } else if (r.evidence_age < 0) {
            // No daemon probes (yet): nothing to name, which is no failure of the localizer
            // (IbfabricDaemonAbsent covers daemons gone from the store).
            if (!no_evidence_logged_) {
              spdlog::info(
                  "msg=\"no probe evidence in the store (ibfabric_probe_node_info): nothing "
                  "to localize\"");
              no_evidence_logged_ = true;
            }
          } else if (r.evidence_age >
                     std::chrono::duration<double>(options_.max_evidence_age).count()) {
            r.failure = "the newest probe sample is " +
                        std::to_string(static_cast<long>(r.evidence_age)) +
                        " s old (--evidence.max-age)";
          }
          r.reading = std::move(reading);
          if (r.failure.empty()) {
            auto t0 = std::chrono::steady_clock::now();
            auto verdicts = localize::localize(r.reading.evidence);
            std::size_t suspects = verdicts.size();
            r.verdicts = confirmer_.confirm(r.reading.evidence, std::move(verdicts), at);
            // A suspect not confirmed yet is judged again with fresh counters: they decide between
            // a cable and its host before anything is named.
            r.waiting = suspects - r.verdicts.size();
            fresh_next_ = r.waiting > 0;
            r.attribution_seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            r.evaluated = true;
          } else {
            ++failures;
            confirmer_ = new_confirmer();  // a gap: nothing held across it
            after_gap_ = true;
          }
          log(r);
          MetricsBuilder out;
          add_evaluation_metrics(out, r);
          out.counter("ibfabric_localize_evaluations_total", "Evaluations since start.", {},
                      static_cast<double>(evaluations));
          out.counter(
              "ibfabric_localize_evaluation_failures_total",
              "Evaluations that made no verdict (a query failed, or the evidence is stale).", {},
              static_cast<double>(failures));
          auto snapshot = std::make_shared<Snapshot>();
          snapshot->families = std::move(out).take();
          publish_(std::move(snapshot), r);
          then();
        },
        fresh_next_);
  }

  void log(const EvaluationReport& r) {
    if (!r.failure.empty()) {
      // Once when it starts, and when what fails changes (which queries, or stale evidence).
      std::string what;
      for (const auto& [query, error] : r.reading.errors) what += query + " ";
      if (what.empty()) what = "stale";
      if (what != last_failure_) spdlog::warn("msg=\"no verdict\" reason=\"{}\"", r.failure);
      last_failure_ = what;
      return;
    }
    if (!last_failure_.empty()) spdlog::info("msg=\"evidence read again\"");
    last_failure_.clear();
    std::set<std::string> now;
    for (const auto& v : r.verdicts) {
      now.insert(display_name(r.reading.evidence, v.suspects.front()));
    }
    if (after_gap_) {  // nothing is confirmed yet after a gap: not a change of verdict
      after_gap_ = false;
      if (now.empty()) return;
    }
    for (const auto& name : now) {
      if (!named_.count(name)) spdlog::warn("msg=\"named\" suspect=\"{}\"", name);
    }
    for (const auto& name : named_) {
      if (!now.count(name)) spdlog::info("msg=\"no longer named\" suspect=\"{}\"", name);
    }
    named_ = std::move(now);
    spdlog::debug(
        "msg=evaluated pairs={} hosts={} cables={} verdicts={} waiting={} read_s={:.3f} "
        "attribution_s={:.3f}",
        r.reading.evidence.pairs.size(), r.reading.evidence.hosts.size(),
        r.reading.evidence.cables.size(), r.verdicts.size(), r.waiting, r.read_seconds,
        r.attribution_seconds);
  }

  const LocalizeOptions& options_;
  boost::asio::io_context io_;
  query::EvidenceReader reader_;
  boost::asio::steady_timer timer_;
  std::function<void(SnapshotPtr, const EvaluationReport&)> publish_;
  localize::Confirmer new_confirmer() const {
    return localize::Confirmer(std::chrono::duration<double>(options_.interval).count());
  }
  localize::Confirmer confirmer_ = new_confirmer();
  std::thread thread_;
  std::string last_failure_;
  bool after_gap_ = false;
  bool fresh_next_ = false;
  bool no_evidence_logged_ = false;
  std::set<std::string> named_;
};

}  // namespace

int run_localize(const LocalizeOptions& options) {
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  SnapshotStore store;
  std::vector<LiveMetrics> live{[](MetricsBuilder& out) {
    add_process_metrics(out);
    add_build_info(out);
  }};
  if (options.once) {
    // Two evaluations one interval apart: a verdict must hold in both.
    SnapshotPtr last;
    Evaluator evaluator(options, [&](SnapshotPtr s, const EvaluationReport&) { last = s; });
    double now = std::floor(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    double step = std::chrono::duration<double>(options.interval).count();
    evaluator.evaluate_now(now - step, [] {});
    evaluator.evaluate_now(now, [] {});
    std::cout << render_text({last}, live);
    return evaluator.failures == 0 ? 0 : 1;
  }
  WebConfig web;
  if (!options.web_config_file.empty()) web = load_web_config(options.web_config_file);
  boost::asio::io_context io;
  HttpServerOptions http;
  http.listen_address = options.listen_address;
  http.web = web;
  std::atomic<bool> published{false};
  http.not_ready = [&] {
    return published.load() ? std::vector<std::string>{} : std::vector<std::string>{"localize"};
  };
  Exporter exporter;
  HttpServer server(io, http, [&](const ScrapeRequest& request) {
    return exporter.scrape(request, store.named(), {"localize"}, live);
  });
  spdlog::info("msg=\"ibfabric-localize started\" prometheus_url={} listen={} interval_s={}",
               options.prometheus.url, options.listen_address,
               std::chrono::duration<double>(options.interval).count());
  Evaluator evaluator(options, [&](SnapshotPtr s, const EvaluationReport&) {
    store.publish("localize", std::move(s));
    published = true;
  });
  evaluator.start();
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) {
    spdlog::info("msg=\"stopping\"");
    server.close();
    io.stop();
  });
  io.run();
  evaluator.stop();
  return 0;
}

}  // namespace ibfabric
