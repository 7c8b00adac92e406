#include "daemon/localize_app.h"

#include "core/metrics.h"
#include "daemon/snapshot_store.h"
#include "exporters/prometheus/http_server.h"
#include "exporters/prometheus/render.h"
#include "exporters/prometheus/self_metrics.h"
#include "exporters/prometheus/web_config.h"

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

namespace {

std::chrono::milliseconds parse_duration(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  double ms = unit == "ms" ? v : unit == "s" ? v * 1e3 : unit == "m" ? v * 6e4 : -1;
  if (used == 0 || ms <= 0 || !std::isfinite(ms)) {
    throw std::invalid_argument(flag + "=" + text +
                                ": not a duration; give a number and a unit, e.g. 10s, 500ms, 1m");
  }
  return std::chrono::milliseconds(static_cast<long long>(ms));
}

}  // namespace

std::string localize_usage() {
  return R"(Usage: ibfabric-localize [flags]

Names the cable, host or congested port behind probe loss and late probes between hosts, from
the evidence the ibfabricd daemons export, read from a Prometheus-compatible query API; serves
its verdicts as series on its own /metrics (docs/design.md, "Who is to blame").

  --prometheus.url=URL            query API to read from (default http://localhost:9090);
                                  Prometheus, VictoriaMetrics (/prometheus prefix for vmselect),
                                  Thanos Query, Mimir (/prometheus)
  --prometheus.header='N: V'      header sent with every query (repeatable), e.g.
                                  'X-Scope-OrgID: training' or 'Authorization: Bearer ...'
  --query.timeout=8s              deadline of one query
  --evaluation-interval=10s       how often the verdicts are made
  --evidence.window=1m            window of the probe evidence (sent, lost, late per pair)
  --evidence.max-age=60s          no verdict from a store whose newest probe sample is older
  --web.listen-address=:10920     where /metrics is served
  --web.config.file=FILE          TLS and basic auth (exporter-toolkit's format)
  --log.level=info                debug, info, warn, error
  --once                          evaluate (twice, one interval apart: a verdict must hold in
                                  two evaluations), print the exposition, exit
  --version, --help
)";
}

LocalizeOptions parse_localize_options(const std::vector<std::string>& args) {
  LocalizeOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i], value;
    auto eq = arg.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto need = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= args.size()) throw std::invalid_argument(arg + " needs a value");
      return args[++i];
    };
    if (arg == "--prometheus.url") {
      o.prometheus.url = need();
    } else if (arg == "--prometheus.header") {
      std::string h = need();
      auto colon = h.find(':');
      if (colon == std::string::npos || colon == 0) {
        throw std::invalid_argument("--prometheus.header=" + h +
                                    ": give 'Name: value', e.g. 'X-Scope-OrgID: training'");
      }
      std::string v = h.substr(colon + 1);
      v.erase(0, v.find_first_not_of(' '));
      o.prometheus.headers.emplace_back(h.substr(0, colon), v);
    } else if (arg == "--query.timeout") {
      o.prometheus.timeout = parse_duration(arg, need());
    } else if (arg == "--evaluation-interval") {
      o.interval = parse_duration(arg, need());
      if (o.interval < std::chrono::seconds(1)) {
        throw std::invalid_argument("--evaluation-interval=" + value + ": at least 1s");
      }
    } else if (arg == "--evidence.window") {
      o.window = std::chrono::duration_cast<std::chrono::seconds>(parse_duration(arg, need()));
      if (o.window < std::chrono::seconds(5)) {
        throw std::invalid_argument(arg + ": at least 5s (a rate needs two scrapes in its window)");
      }
    } else if (arg == "--evidence.max-age") {
      o.max_evidence_age = parse_duration(arg, need());
    } else if (arg == "--web.listen-address") {
      o.listen_address = need();
    } else if (arg == "--web.config.file") {
      o.web_config_file = need();
    } else if (arg == "--log.level") {
      o.log_level = need();
      if (spdlog::level::from_str(o.log_level) == spdlog::level::off && o.log_level != "off") {
        throw std::invalid_argument("--log.level=" + o.log_level + ": debug, info, warn or error");
      }
    } else if (arg == "--once") {
      o.once = true;
    } else if (arg == "--version") {
      o.version = true;
    } else if (arg == "--help" || arg == "-h") {
      o.help = true;
    } else {
      throw std::invalid_argument("unknown flag " + args[i] + " (--help lists them)");
    }
  }
  query::check_url(o.prometheus.url);
  if (o.prometheus.timeout >= o.interval) {
    throw std::invalid_argument("--query.timeout must be shorter than --evaluation-interval");
  }
  return o;
}

// --- verdicts as series ---------------------------------------------------------------------

namespace {

using localize::Evidence;
using localize::Kind;
using localize::Suspect;
using localize::Verdict;

std::string port_name(const std::string& node, std::uint32_t port) {
  return node + " port " + std::to_string(port);
}

std::string display(const Evidence& e, const Suspect& s) {
  const auto& hosts = e.hosts;
  switch (s.kind) {
    case Kind::cable: {
      const auto& c = e.cables[s.cable];
      return port_name(c.a_name, c.a.port) + " <-> " + port_name(c.b_name, c.b.port);
    }
    case Kind::congestion: {
      const auto& c = e.cables[s.cable];
      return s.a_to_b
                 ? port_name(c.a_name, c.a.port) + " (to " + port_name(c.b_name, c.b.port) + ")"
                 : port_name(c.b_name, c.b.port) + " (to " + port_name(c.a_name, c.a.port) + ")";
    }
    case Kind::host:
      return "host " + hosts[s.host].name;
    case Kind::responder:
      return hosts[s.host].name + "'s responder";
    case Kind::prober:
      return hosts[s.host].name + "'s prober";
  }
  return "";
}

// The culprit's labels, as the alerts name it: a cable or a congested port by both ends
// (node_* the a end, or the sending port), a host by its node.
Labels identity(const Evidence& e, const Suspect& s) {
  if (s.kind == Kind::cable || s.kind == Kind::congestion) {
    const auto& c = e.cables[s.cable];
    bool a_first = s.kind == Kind::cable || s.a_to_b;
    const auto& near = a_first ? c.a : c.b;
    const auto& far = a_first ? c.b : c.a;
    return {{"kind", s.kind == Kind::cable ? "cable" : "congestion"},
            {"node_guid", hex_guid(near.guid)},
            {"port", std::to_string(near.port)},
            {"node_name", a_first ? c.a_name : c.b_name},
            {"remote_node_guid", hex_guid(far.guid)},
            {"remote_port", std::to_string(far.port)},
            {"remote_node_name", a_first ? c.b_name : c.a_name}};
  }
  return {{"kind", "host"},
          {"node_guid", hex_guid(e.hosts[s.host].guid)},
          {"node_name", e.hosts[s.host].name}};
}

std::string listed(const std::vector<std::string>& items, std::size_t most) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < most; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > most) out += ", and " + std::to_string(items.size() - most) + " more";
  return out.empty() ? "none" : out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}
std::string percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%%", whole > 0 ? 100 * part / whole : 0.0);
  return buf;
}

// What the engineer reads first: the numbers behind the verdict, in words.
std::string evidence_text(const Evidence& e, const Verdict& v) {
  const Suspect& s = v.suspects.front();
  std::string out;
  if (s.kind == Kind::cable) {
    const auto& c = e.cables[s.cable];
    std::string each;
    for (int d = 0; d < 2; ++d) {
      if (!s.directions[static_cast<std::size_t>(d)]) continue;
      auto link = localize::link_of(s.cable, d == 0);
      double sent = 0, lost = 0;
      for (const auto& pair : e.pairs) {
        if (std::find(pair.path.begin(), pair.path.end(), link) == pair.path.end()) continue;
        sent += pair.sent;
        lost += pair.lost;
      }
      each += std::string(each.empty() ? "" : "; ") + "packets " +
              (d == 0 ? c.a_name + " -> " + c.b_name : c.b_name + " -> " + c.a_name) + ": " +
              number(lost) + " of " + number(sent) + " probes lost (" + percent(lost, sent) + ")";
    }
    out = "In the last minute " + each + ". Counters in 10 minutes:";
    bool any = false;
    for (auto [node, port] : {std::pair{c.a_name, c.a}, std::pair{c.b_name, c.b}}) {
      auto it = e.counters.find(port);
      if (it == e.counters.end()) continue;
      out += std::string(any ? ";" : "") + " " + port_name(node, port.port) + " (" +
             it->second.source + "): " + number(it->second.errors) + " errors, " +
             number(it->second.discards) + " discards";
      any = true;
    }
    return out + (any ? "." : " none counted at either end.");
  }
  if (s.kind == Kind::congestion) {
    const auto& c = e.cables[s.cable];
    auto it = e.congested.find(s.a_to_b ? c.a : c.b);
    out = number(v.late) + " of " + number(v.sent) +
          " probes of its pairs were late in the last "
          "minute";
    if (it != e.congested.end()) {
      char buf[64];
      if (it->second.share) {
        std::snprintf(buf, sizeof buf, "waited to send %.3g%% of the time", 100 * it->second.value);
      } else {
        std::snprintf(buf, sizeof buf, "waited %.1f PortXmitWait ticks per word sent",
                      it->second.value);
      }
      out += std::string("; it ") + buf + " over the last 5 minutes";
    }
    return out + ".";
  }
  const localize::Host& h = e.hosts[s.host];
  double sent[2] = {0, 0}, lost[2] = {0, 0}, late[2] = {0, 0}, pairs[2] = {0, 0};
  for (const auto& pair : e.pairs) {
    for (int role = 0; role < 2; ++role) {
      if ((role == 0 ? pair.peer : pair.prober) != s.host) continue;
      sent[role] += pair.sent;
      lost[role] += pair.lost;
      late[role] += pair.late;
      ++pairs[role];
    }
  }
  for (int role = 0; role < 2; ++role) {
    out += std::string(role ? "; its own probes: " : "In the last minute, answers to it: ") +
           number(late[role]) + " late, " + number(lost[role]) + " lost of " + number(sent[role]) +
           " (" + number(pairs[role]) + " pairs)";
  }
  char stall[32];
  std::snprintf(stall, sizeof stall, "%.1fs", h.loop_stall_seconds);
  out += std::string(". Its daemon: event loop stalled ") + stall + " in the minute, " +
         number(h.responder_dropped) + " probes left unanswered, " + number(h.local_failures) +
         " probes failed locally" + (h.daemon_down ? ", down (not answering scrapes)" : "") + ".";
  return out;
}

void add_verdict(MetricsBuilder& out, const Evidence& e, const Verdict& v) {
  const Suspect& culprit = v.suspects.front();
  Labels id = identity(e, culprit);
  out.gauge("ibfabric_localize_suspect",
            "A culprit the localizer names (both of the last two evaluations held it): a cable, "
            "a host or a congested port; value: the probe pairs it explains.",
            id, static_cast<double>(v.pairs.size()));
  std::vector<std::string> equal, pairs, radius;
  for (std::size_t i = 1; i < v.suspects.size(); ++i) equal.push_back(display(e, v.suspects[i]));
  std::vector<std::uint32_t> sorted = v.pairs;
  std::sort(sorted.begin(), sorted.end(), [&](std::uint32_t a, std::uint32_t b) {
    const auto& x = e.pairs[a];
    const auto& y = e.pairs[b];
    return std::tie(e.hosts[x.prober].name, e.hosts[x.peer].name) <
           std::tie(e.hosts[y.prober].name, e.hosts[y.peer].name);
  });
  for (auto p : sorted) {
    pairs.push_back(e.hosts[e.pairs[p].prober].name + " -> " + e.hosts[e.pairs[p].peer].name);
  }
  for (auto h : v.blast_radius) radius.push_back(e.hosts[h].name);
  std::sort(radius.begin(), radius.end());
  Labels info = id;
  info.emplace_back("cause", v.cause);
  info.emplace_back("why", v.why);
  info.emplace_back("evidence", evidence_text(e, v));
  info.emplace_back("pairs", listed(pairs, 6));
  info.emplace_back("equally_suspect", listed(equal, 8));
  info.emplace_back("blast_radius", listed(radius, 8));
  out.info("ibfabric_localize_suspect_info",
           "Why a suspect is named: its cause (loss, late, congestion), the reason, its evidence "
           "in words (probes each way, both ends' counters, its daemon's own trouble), the pairs "
           "it explains (prober -> peer), what the probes cannot tell it from, and the hosts "
           "whose probed paths cross it.",
           info);
  for (auto [what, value] :
       {std::pair{"sent", v.sent}, std::pair{"lost", v.lost}, std::pair{"late", v.late}}) {
    Labels l = id;
    l.emplace_back("what", what);
    out.gauge("ibfabric_localize_suspect_probes",
              "Probes of the pairs a named suspect explains (a cable: of all pairs crossing its "
              "losing direction) in the last minute, by what became of them.",
              l, value);
  }
}

}  // namespace

void add_evaluation_metrics(MetricsBuilder& out, const EvaluationReport& r) {
  out.gauge("ibfabric_localize_up",
            "1 when the last evaluation read all its evidence, fresh, and made verdicts; 0 when "
            "the query API failed or its data is stale (no verdict then).",
            {}, r.evaluated ? 1 : 0);
  out.gauge("ibfabric_localize_last_evaluation_timestamp_seconds",
            "The time the last evaluation's evidence is of (Unix seconds).", {}, r.at);
  out.gauge("ibfabric_localize_evaluation_duration_seconds",
            "Wall time of the last evaluation: reading the evidence and attributing it.", {},
            r.read_seconds + r.attribution_seconds);
  out.gauge("ibfabric_localize_attribution_duration_seconds",
            "Wall time of the last evaluation's attribution alone.", {}, r.attribution_seconds);
  if (r.evidence_age >= 0) {
    out.gauge("ibfabric_localize_evidence_age_seconds",
              "Age of the newest probe sample in the store at the last evaluation.", {},
              r.evidence_age);
  }
  for (const auto& [query, seconds] : r.reading.query_seconds) {
    out.gauge("ibfabric_localize_query_duration_seconds",
              "Wall time of each query of the last evaluation (paths: all batches together).",
              {{"query", query}}, seconds);
  }
  for (const auto& [query, n] : r.reading.query_series) {
    out.gauge("ibfabric_localize_query_series",
              "Series each query of the last evaluation returned.", {{"query", query}}, n);
  }
  const auto& e = r.reading.evidence;
  out.gauge("ibfabric_localize_pairs",
            "Probed pairs of the last evaluation: placed (prober, peer and path known) or "
            "unplaced (no verdict can use them).",
            {{"state", "placed"}}, static_cast<double>(e.pairs.size()));
  out.gauge("ibfabric_localize_pairs", "", {{"state", "unplaced"}},
            static_cast<double>(r.reading.pairs_unplaced));
  out.gauge("ibfabric_localize_hosts", "Hosts in the last evaluation's evidence.", {},
            static_cast<double>(e.hosts.size()));
  out.gauge("ibfabric_localize_cables", "Cables the traced paths cross.", {},
            static_cast<double>(e.cables.size()));
  out.gauge("ibfabric_localize_path_daemons_read",
            "Daemons whose paths the last evaluation read again (their path trace marker moved).",
            {}, static_cast<double>(r.reading.path_instances_read));
  out.declare("ibfabric_localize_suspect", "", prometheus::MetricType::Gauge);
  if (!r.evaluated) return;
  for (const auto& v : r.verdicts) add_verdict(out, e, v);
}

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
      now.insert(display(r.reading.evidence, v.suspects.front()));
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
