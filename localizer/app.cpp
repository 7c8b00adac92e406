#include "localizer/app.h"

#include "core/metrics.h"
#include "core/snapshot_store.h"
#include "exporters/prometheus/http_server.h"
#include "exporters/prometheus/render.h"
#include "exporters/prometheus/self_metrics.h"
#include "exporters/prometheus/web_config.h"
#include "localize/confirmer.h"
#include "localize/explained.h"
#include "localize/probe_plan.h"
#include "localizer/verdict_series.h"

#include <spdlog/spdlog.h>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace ibfabric::localizer {

// --- the service ----------------------------------------------------------------------------

namespace {

// The probe plan (localize/probe_plan.h), as /probe-plan serves it: a host's planned peers, one
// line each ("0x<GUID> <name>"), after a comment line. Swapped whole after each evaluation.
class PlanDocument {
 public:
  void publish(std::map<std::uint64_t, std::string> lines) {
    auto fresh = std::make_shared<const std::map<std::uint64_t, std::string>>(std::move(lines));
    std::lock_guard lock(mutex_);
    plan_ = std::move(fresh);
  }
  // `query`: node_guid=0x<16 hex digits>, the daemon's own (its ibfabric_probe_node_info).
  std::string serve(std::string_view query) const {
    std::string_view key = "node_guid=";
    auto at = query.find(key);
    std::string out = "# ibfabric-localize probe plan: the peers to probe first (docs/design.md)\n";
    if (at == std::string_view::npos) return out + "# no node_guid=0x... in the query\n";
    auto guid = std::strtoull(std::string(query.substr(at + key.size(), 18)).c_str(), nullptr, 16);
    std::shared_ptr<const std::map<std::uint64_t, std::string>> plan;
    {
      std::lock_guard lock(mutex_);
      plan = plan_;
    }
    if (!plan) return out;
    auto it = plan->find(guid);
    return it == plan->end() ? out : out + it->second;
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const std::map<std::uint64_t, std::string>> plan_;
};

// Evaluates on a thread and io_context of its own; publishes each evaluation's snapshot.
class Evaluator {
 public:
  Evaluator(const Flags& o, std::function<void(SnapshotPtr, const EvaluationReport&)> publish,
            PlanDocument* plan = nullptr)
      : plan_(plan),
        options_(o),
        reader_(io_, o.prometheus, o.reader),
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
          r.failure = failure_of(reading, r.evidence_age);
          r.reading = std::move(reading);
          if (r.failure.empty()) {
            // A gap of up to two failed evaluations keeps what was held across it (a slow store
            // fails one now and then); a longer one starts afresh.
            double step = std::chrono::duration<double>(options_.interval).count();
            if (last_ok_ >= 0 && at - last_ok_ > 3 * step + 1e-3) confirmer_ = new_confirmer();
            last_ok_ = at;
            auto t0 = std::chrono::steady_clock::now();
            auto verdicts = localize::localize(r.reading.evidence, options_.localize);
            std::size_t suspects = verdicts.size();
            std::vector<localize::Verdict> named;
            for (auto& v : verdicts) (v.withheld ? r.withheld : named).push_back(std::move(v));
            r.verdicts = confirmer_.confirm(r.reading.evidence, std::move(named), at);
            // A suspect not confirmed yet is judged again with fresh counters: they decide between
            // a cable and its host before anything is named.
            r.waiting = suspects - r.verdicts.size() - r.withheld.size();
            fresh_next_ = r.waiting > 0;
            remember(r, at);
            plan(r);
            r.attribution_seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            r.evaluated = true;
          } else {
            ++failures;
            double step = std::chrono::duration<double>(options_.interval).count();
            if (last_made_ && at - last_made_->at <= 3 * step + 1e-3) r.kept = last_made_;
          }
          log(r);
          MetricsBuilder out;
          add_evaluation_metrics(out, r);
          out.counter("ibfabric_localize_evaluations_total", "Evaluations since start.", {},
                      static_cast<double>(evaluations));
          out.counter("ibfabric_localize_evaluation_failures_total",
                      "Evaluations that made no verdict (the probe evidence could not be read or "
                      "is stale, or the hosts or paths are older than they may be).",
                      {}, static_cast<double>(failures));
          auto snapshot = std::make_shared<Snapshot>();
          snapshot->families = std::move(out).take();
          publish_(std::move(snapshot), r);
          if (r.evaluated) last_made_ = std::make_shared<const EvaluationReport>(std::move(r));
          then();
        },
        fresh_next_);
  }

  // Why no verdict can be made of `reading` ("" when one can): the probe evidence was not read
  // or is stale, or what places the pairs (hosts, paths) is missing or too old.
  std::string failure_of(const query::Reading& reading, double evidence_age) const {
    if (!reading.probes_read) {
      // By error, with the queries that met it (one store failing fails them all alike).
      std::map<std::string, std::string> by_error;
      for (const auto& [query, error] : reading.errors) {
        if (query != "sent" && query != "lost" && query != "late" && query != "newest") continue;
        auto& queries = by_error[error];
        queries += (queries.empty() ? "" : ", ") + query;
      }
      std::string out;
      for (const auto& [error, queries] : by_error) {
        out += (out.empty() ? "" : "; ") + error + " (" + queries + ")";
      }
      return out.empty() ? "the probe queries failed" : out;
    }
    if (evidence_age < 0) return "";  // no daemon probes (yet): nothing to name, no failure
    if (evidence_age > std::chrono::duration<double>(options_.max_evidence_age).count()) {
      return "the newest probe sample is " + std::to_string(static_cast<long>(evidence_age)) +
             " s old (--evidence.max-age)";
    }
    for (query::Part part : {query::Part::hosts, query::Part::paths}) {
      const auto& p = reading.parts[static_cast<std::size_t>(part)];
      if (p.usable) continue;
      std::string what = std::string(query::part_name(part));
      return p.age < 0 ? "the " + what + " have not been read yet"
                       : "the " + what + " are " + std::to_string(static_cast<long>(p.age)) +
                             " s old (at most " +
                             std::to_string(static_cast<long>(query::max_age(part))) + " s)";
    }
    return "";
  }

  // Culprits named in the last 10 minutes, as the alerts remember them: the pairs they explain
  // raise no probe alert of their own.
  void remember(EvaluationReport& r, double at) {
    for (const auto& v : r.verdicts) {
      for (const auto& s : v.suspects) named_at_[localize::culprit_of(r.reading.evidence, s)] = at;
    }
    std::erase_if(named_at_, [at](const auto& n) { return at - n.second > kRemembered; });
    std::set<localize::Culprit> culprits;
    for (const auto& [c, _] : named_at_) culprits.insert(c);
    r.explained = localize::explained_pairs(r.reading.evidence, culprits);
  }
  static constexpr double kRemembered = 600;

  // The probe plan from the jobs on the hosts (ibfabric:job_node): each multi-node job's hosts
  // as a ring (localize/probe_plan.h).
  void plan(EvaluationReport& r) {
    const auto& e = r.reading.evidence;
    std::vector<std::vector<std::uint64_t>> jobs(r.reading.jobs.size());
    for (std::size_t h = 0; h < r.reading.host_jobs.size(); ++h) {
      for (auto j : r.reading.host_jobs[h]) jobs[j].push_back(e.hosts[h].guid);
    }
    std::map<std::uint64_t, std::string> names;
    for (const auto& host : e.hosts) names[host.guid] = host.name;
    std::map<std::uint64_t, std::string> lines;
    for (const auto& [host, peers] : localize::probe_plan(jobs)) {
      auto& text = lines[host];
      for (auto peer : peers) text += hex_guid(peer) + " " + names[peer] + "\n";
    }
    r.plan_hosts = lines.size();
    for (const auto& hosts : jobs) r.plan_jobs += hosts.size() >= 2;
    if (plan_) plan_->publish(std::move(lines));
  }

  void log(const EvaluationReport& r) {
    // Queries that fail, once when they start, when how they fail changes, and when they
    // answer again: a slow store logs a line, not a line per evaluation.
    for (const auto& [query, error] : r.reading.errors) {
      auto [it, fresh] = failing_.emplace(query, error);
      if (!fresh && it->second == error) continue;
      it->second = error;
      spdlog::warn("msg=\"query failed\" query={} evidence={} error=\"{}\"", query, part_of(query),
                   error);
    }
    for (auto it = failing_.begin(); it != failing_.end();) {
      if (!r.reading.answered.count(it->first) || r.reading.errors.count(it->first)) {
        ++it;
        continue;
      }
      spdlog::info("msg=\"query answers again\" query={}", it->first);
      it = failing_.erase(it);
    }
    for (const auto& [query, n] : r.reading.invalid_values) {
      if (!invalid_logged_.insert(query).second) continue;
      spdlog::warn(
          "msg=\"values that are not numbers dropped\" query={} count={} "
          "hint=\"the store answered NaN or an infinity; a recording rule or the store is "
          "broken\"",
          query, n);
    }
    // Evidence parts that stop or start being usable.
    for (std::size_t i = 0; i < query::kParts; ++i) {
      const auto& p = r.reading.parts[i];
      if (p.usable == part_usable_[i]) continue;
      part_usable_[i] = p.usable;
      auto part = static_cast<query::Part>(i);
      if (part == query::Part::probes) continue;  // said by "no verdict"
      if (!p.usable && p.age < 0) {
        spdlog::warn("msg=\"evidence not read yet\" evidence={} effect=\"{}\"",
                     query::part_name(part), effect_of(part));
      } else if (!p.usable) {
        spdlog::warn(
            "msg=\"evidence too old to use\" evidence={} age_s={:.0f} max_age_s={:.0f} "
            "effect=\"{}\"",
            query::part_name(part), p.age, query::max_age(part), effect_of(part));
      } else {
        spdlog::info("msg=\"evidence usable again\" evidence={} age_s={:.0f}",
                     query::part_name(part), p.age);
      }
    }
    std::size_t incomplete = r.reading.pairs_incomplete;
    if ((incomplete > 0) != (pairs_incomplete_ > 0)) {
      if (incomplete > 0) {
        spdlog::warn(
            "msg=\"pairs without their lost or late series: no evidence of them\" pairs={} "
            "hint=\"the store lacks ibfabric_probe_lost_total or ibfabric_probe_spikes_total "
            "of daemons that send probes\"",
            incomplete);
      } else {
        spdlog::info("msg=\"every pair has its lost and late series again\"");
      }
    }
    pairs_incomplete_ = incomplete;
    if (!r.failure.empty()) {
      if (r.failure != last_failure_) spdlog::warn("msg=\"no verdict\" reason=\"{}\"", r.failure);
      last_failure_ = r.failure;
      return;
    }
    if (!last_failure_.empty()) spdlog::info("msg=\"verdicts made again\"");
    last_failure_.clear();
    if (r.evidence_age < 0 && !no_evidence_logged_) {
      // No daemon probes (yet): nothing to name, which is no failure of the localizer
      // (IbfabricDaemonAbsent covers daemons gone from the store).
      spdlog::info(
          "msg=\"no probe evidence in the store (ibfabric_probe_node_info): nothing to "
          "localize\"");
      no_evidence_logged_ = true;
    }
    std::set<std::string> now;
    for (const auto& v : r.verdicts) {
      now.insert(display_name(r.reading.evidence, v.suspects.front()));
    }
    for (const auto& name : now) {
      if (!named_.count(name)) spdlog::warn("msg=\"named\" suspect=\"{}\"", name);
    }
    for (const auto& name : named_) {
      if (!now.count(name)) spdlog::info("msg=\"no longer named\" suspect=\"{}\"", name);
    }
    named_ = std::move(now);
    spdlog::debug(
        "msg=evaluated pairs={} hosts={} cables={} verdicts={} waiting={} withheld={} "
        "read_s={:.3f} attribution_s={:.3f}",
        r.reading.evidence.pairs.size(), r.reading.evidence.hosts.size(),
        r.reading.evidence.cables.size(), r.verdicts.size(), r.waiting, r.withheld.size(),
        r.read_seconds, r.attribution_seconds);
  }
  static std::string part_of(const std::string& query) {
    for (const auto& q : query::evidence_queries()) {
      if (q.name == query) return query::part_name(q.part);
    }
    return "?";
  }
  static const char* effect_of(query::Part part) {
    switch (part) {
      case query::Part::hosts:
      case query::Part::paths:
        return "no verdict";
      case query::Part::counters:
        return "a cable is not told from its host: both named as one verdict";
      case query::Part::congestion:
        return "late hosts withheld; no congested port named";
      case query::Part::daemons:
        return "hosts' own trouble unknown: a host needs more lost probes to be named";
      case query::Part::symptoms:
        return "per-pair jitter and spike alerts see nothing";
      case query::Part::jobs:
        return "verdicts name no jobs (ibfabric:job_node: kube-state-metrics, or a job map)";
      case query::Part::probes:
        break;
    }
    return "";
  }

  PlanDocument* plan_;
  const Flags& options_;
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
  bool fresh_next_ = false;
  bool no_evidence_logged_ = false;
  std::size_t pairs_incomplete_ = 0;
  double last_ok_ = -1;  // evidence time of the last evaluation that made verdicts
  std::set<std::string> named_;
  std::map<std::string, std::string> failing_;  // queries failing, and how
  std::set<std::string> invalid_logged_;
  std::array<bool, query::kParts> part_usable_{true, true, true, true, true, true, true, true};
  std::map<localize::Culprit, double> named_at_;
  std::shared_ptr<const EvaluationReport> last_made_;  // the last evaluation that made verdicts
};

}  // namespace

int run(const Flags& options) {
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
  PlanDocument plan;
  http.documents["/probe-plan"] = [&plan](std::string_view query) { return plan.serve(query); };
  Exporter exporter;
  HttpServer server(io, http, [&](const ScrapeRequest& request) {
    return exporter.scrape(request, store.named(), {"localize"}, live);
  });
  spdlog::info("msg=\"ibfabric-localize started\" prometheus_url={} listen={} interval_s={}",
               options.prometheus.url, options.listen_address,
               std::chrono::duration<double>(options.interval).count());
  Evaluator evaluator(
      options,
      [&](SnapshotPtr s, const EvaluationReport&) {
        store.publish("localize", std::move(s));
        published = true;
      },
      &plan);
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

}  // namespace ibfabric::localizer
