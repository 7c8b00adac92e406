#include "query/evidence_reader.h"

#include <boost/asio/steady_timer.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <set>
#include <utility>

namespace ibfabric::query {

using localize::CableId;
using localize::HostId;
using localize::LinkId;
using localize::PortRef;

const char* part_name(Part part) {
  switch (part) {
    case Part::probes:
      return "probes";
    case Part::hosts:
      return "hosts";
    case Part::paths:
      return "paths";
    case Part::daemons:
      return "daemons";
    case Part::counters:
      return "counters";
    case Part::congestion:
      return "congestion";
    case Part::symptoms:
      return "symptoms";
    case Part::jobs:
      return "jobs";
  }
  return "?";
}

double max_age(Part part) {
  switch (part) {
    case Part::probes:
      return 0;  // read fresh, or no verdict (--evidence.max-age bounds the samples' age)
    case Part::hosts:
    case Part::paths:
      return 600;
    case Part::daemons:
    case Part::jobs:
      return 120;
    case Part::counters:
      return 900;
    case Part::congestion:
    case Part::symptoms:
      return 300;
  }
  return 0;
}

namespace {

// Window of the probe evidence: a minute names a fault within a minute; counters of ports over
// 10 minutes (errors are rare events: one in 10 minutes is still the cable's).
const char* kPairSum = "sum by (job, instance, peer, transport) ";
const char* kDaemonSum = "sum by (job, instance) ";
// Errors of a port: symbol errors, link error recoveries, links downed, receive errors.
std::string errors_of(const std::string& prefix, const std::string& selector) {
  std::string out;
  for (const char* counter :
       {"symbol_errors", "link_error_recoveries", "link_downed", "receive_errors"}) {
    out += std::string(out.empty() ? "(" : " + ") + "increase(" + prefix + "_" + counter +
           "_total" + selector + "[10m])";
  }
  return out + ")";
}

// Counters of a port by (node_guid, port), from each of its readers.
std::string by_port(const std::string& what, const std::string& source) {
  if (source == "sweep") return "max by (node_guid, port) (" + what + ") > 0";
  if (source == "local") {
    return "max by (node_guid, port) (" + what +
           " * on (job, instance, device, port) group_left (node_guid) ibfabric_ports_peer_info) > "
           "0";
  }
  return "max by (node_guid, port) (label_replace(label_replace(" + what +
         " * on (job, instance, device, port) group_left (peer_node_guid, peer_port) "
         "ibfabric_ports_peer_info, \"node_guid\", \"$1\", \"peer_node_guid\", \"(.+)\"), "
         "\"port\", "
         "\"$1\", \"peer_port\", \"(.+)\")) > 0";
}

struct Query {
  std::string name, promql;
  std::vector<std::string> labels;
  Part part = Part::probes;
  // Counters over 10 minutes and 5-minute rates change little in 10 s, and at thousands of
  // hosts they are the costliest queries the store answers: read every kSlowEvery-th time.
  bool slow = false;
};
constexpr int kSlowEvery = 6;
// What the per-pair symptoms are read above: the thresholds of the alerts on them
// (IbfabricProbeJitterHigh, IbfabricProbeRttSpikes), which may raise but not lower them.
constexpr const char* kJitterOver = "0.0005";
constexpr const char* kSpikesOver = "5";

std::vector<Query> fixed_queries(const std::string& w) {
  const std::vector<std::string> pair{"job", "instance", "peer", "transport"};
  const std::vector<std::string> daemon{"job", "instance"};
  const std::vector<std::string> port{"node_guid", "port"};
  std::vector<Query> q{
      {"sent", std::string(kPairSum) + "(increase(ibfabric_probe_sent_total[" + w + "]))", pair},
      {"lost", std::string(kPairSum) + "(increase(ibfabric_probe_lost_total[" + w + "]))", pair},
      {"late", std::string(kPairSum) + "(increase(ibfabric_probe_spikes_total[" + w + "]))", pair},
      {"newest", "max(timestamp(ibfabric_probe_node_info))", {}},
      {"nodes",
       "max by (job, instance, node_guid, node_name, node) "
       "(last_over_time(ibfabric_probe_node_info{node_guid!=\"\"}[10m]))",
       {"job", "instance", "node_guid", "node_name", "node"},
       Part::hosts,
       true},
      // Asked every evaluation: a job that ended must not stay in the next verdict.
      {"jobs",
       "max by (namespace, job_name, node) (ibfabric:job_node)",
       {"namespace", "job_name", "node"},
       Part::jobs},
      {"path_marker", std::string(kDaemonSum) + "(ibfabric_path_traces_total)", daemon,
       Part::paths},
      {"stalls",
       std::string(kDaemonSum) + "(increase(ibfabric_event_loop_stall_seconds_total[" + w + "]))",
       daemon, Part::daemons},
      {"responder_dropped",
       std::string(kDaemonSum) + "(increase(ibfabric_probe_responder_dropped_total[" + w +
           "])) > 0",
       daemon, Part::daemons},
      {"local_failures",
       std::string(kDaemonSum) + "(increase(ibfabric_probe_failed_total[" + w + "])) > 0", daemon,
       Part::daemons},
      {"down", "up == 0", daemon, Part::daemons},
      // An end (node GUID, port) of every cable down at some time in the window: a host's own
      // port, as its daemon says, or a switch port with a cable, as the sweep says.
      {"links_down",
       "max by (node_guid, port) ((min_over_time(ibfabric_ports_state{side=\"local\"}[" + w +
           "]) < 4) * on (job, instance, device, port) group_left (node_guid) "
           "ibfabric_ports_peer_info) or max by (node_guid, port) "
           "((min_over_time(ibfabric_fabric_port_state[" +
           w + "]) < 4) and on (job, instance, node_guid, port) ibfabric_fabric_link_info)",
       port, Part::daemons},
      {"congested",
       "ibfabric:port_congested:rate5m",
       {"node_guid", "port", "unit"},
       Part::congestion,
       true},
      {"jitter",
       "max by (job, instance, peer, transport) (ibfabric_probe_jitter_seconds) > " +
           std::string(kJitterOver),
       pair, Part::symptoms},
      {"spikes_10m",
       std::string(kPairSum) + "(increase(ibfabric_probe_spikes_total[10m])) > " + kSpikesOver,
       pair, Part::symptoms, true},
  };
  for (const char* source : {"sweep", "local", "peer"}) {
    std::string s = source;
    std::string prefix = s == "sweep" ? "ibfabric_fabric_port" : "ibfabric_ports";
    std::string selector = s == "sweep" ? "" : "{side=\"" + s + "\"}";
    q.push_back(
        {"errors_" + s, by_port(errors_of(prefix, selector), s), port, Part::counters, true});
    q.push_back(
        {"discards_" + s,
         by_port("increase(" + prefix + "_transmit_discards_total" + selector + "[10m])", s), port,
         Part::counters, true});
  }
  return q;
}

std::uint64_t parse_guid(const std::string& s) {
  return std::strtoull(s.c_str(), nullptr, s.rfind("0x", 0) == 0 ? 16 : 10);
}
PortRef port_ref(const std::vector<std::string>& labels, std::size_t at) {
  return {parse_guid(labels[at]), static_cast<std::uint32_t>(std::atoi(labels[at + 1].c_str()))};
}

std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view(".[]()*+?{}|^$\\").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::string promql_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

using DaemonKey = std::pair<std::string, std::string>;  // job, instance

// A query's name as reported: its batches as one ("paths 3" -> "paths").
std::string reported(const std::string& name) { return name.substr(0, name.find(' ')); }

}  // namespace

std::vector<QueryText> evidence_queries() {
  std::vector<QueryText> out;
  for (const auto& q : fixed_queries("1m")) out.push_back({q.name, q.promql, q.part});
  out.push_back(
      {"paths", "ibfabric_path_hop_info{instance=~\"<daemons whose marker moved>\"}", Part::paths});
  out.push_back({"peers", "ibfabric_path_peer_info{instance=~\"<the same>\"}", Part::paths});
  return out;
}

struct EvidenceReader::State : std::enable_shared_from_this<State> {
  State(boost::asio::io_context& io, ClientOptions c, ReaderOptions o)
      : io(io),
        client(io, c),
        probe_timeout(c.timeout),
        options(o),
        window(std::to_string(o.window.count()) + "s") {}

  boost::asio::io_context& io;
  PrometheusClient client;
  std::chrono::milliseconds probe_timeout;
  ReaderOptions options;
  std::string window;  // of the probe evidence, as PromQL writes a range
  int reads = 0;

  // The last answer of each query (the probe queries' too: this evaluation's).
  struct Kept {
    std::vector<Series> series;
    double at = -1;  // the evidence time it answered for; -1: never answered
    bool running = false;
  };
  std::map<std::string, Kept> kept;

  // What happened since the last reading, handed to the next (background refreshes included),
  // and the last figures of every query (kept when it was not asked).
  std::map<std::string, std::string> errors;
  std::set<std::string> answered;
  std::map<std::string, double> seconds, series, bytes, invalid;
  std::map<std::string, double> last_seconds, last_series, last_bytes;
  std::map<std::pair<std::string, std::string>, double> failures_total;
  std::map<std::string, double> invalid_total;

  // One evaluation waiting for its queries.
  struct Evaluation {
    explicit Evaluation(boost::asio::io_context& io) : budget(io) {}
    double at = 0;
    std::function<void(Reading)> done;
    std::map<std::string, QueryResult> probes;  // this evaluation's probe answers
    std::size_t probes_left = 0, refreshes_left = 0;
    std::size_t path_daemons = 0;  // daemons whose paths it asked to read again
    boost::asio::steady_timer budget;
    bool budget_over = false, finished = false;
  };

  // The probe queries go out at once; the refreshes, at most options.max_in_flight at a time,
  // in the order asked.
  struct Waiting {
    Query query;
    double at;
    std::chrono::milliseconds timeout;
    std::function<void(QueryResult)> done;
  };
  std::deque<Waiting> waiting;
  std::size_t in_flight = 0;

  // `first`: ahead of the refreshes waiting (the paths a verdict needs, before the counters).
  void send(Query q, double at, std::function<void(QueryResult)> done, bool first = false) {
    if (q.part == Part::probes) return go(std::move(q), at, probe_timeout, std::move(done), false);
    Waiting w{std::move(q), at, options.refresh_timeout, std::move(done)};
    if (first) {
      waiting.push_front(std::move(w));
    } else {
      waiting.push_back(std::move(w));
    }
    next();
  }
  void next() {
    while (in_flight < std::max<std::size_t>(options.max_in_flight, 1) && !waiting.empty()) {
      Waiting w = std::move(waiting.front());
      waiting.pop_front();
      ++in_flight;
      go(std::move(w.query), w.at, w.timeout, std::move(w.done), true);
    }
  }
  void go(Query q, double at, std::chrono::milliseconds timeout,
          std::function<void(QueryResult)> done, bool counted) {
    auto self = shared_from_this();
    client.query(
        q.promql, at, q.labels,
        [self, name = q.name, counted, done = std::move(done)](QueryResult r) {
          self->note(name, r);
          done(std::move(r));
          if (!counted) return;
          --self->in_flight;
          self->next();
        },
        timeout);
  }

  // Every answer, whenever it comes: its figures and failure for the next reading; NaN and
  // infinite values dropped (counted: a store that answers them is broken somewhere).
  void note(const std::string& name, QueryResult& r) {
    auto key = reported(name);  // the batches of one read of paths add up (maps start at 0)
    seconds[key] += std::chrono::duration<double>(r.duration).count();
    bytes[key] += static_cast<double>(r.bytes);
    if (r.failure != QueryResult::Failure::none) {
      errors[key] = r.error;
      failures_total[{key, failure_name(r.failure)}] += 1;
      return;
    }
    answered.insert(key);
    std::size_t before = r.series.size();
    std::erase_if(r.series, [](const Series& x) { return !std::isfinite(x.value); });
    if (r.series.size() != before) {
      invalid[key] += static_cast<double>(before - r.series.size());
      invalid_total[key] += static_cast<double>(before - r.series.size());
    }
    series[key] += static_cast<double>(before);
  }

  // --- paths ----------------------------------------------------------------------------------
  std::vector<localize::Cable> cables;
  std::map<std::tuple<std::uint64_t, std::uint32_t, std::uint64_t, std::uint32_t>, CableId>
      cable_ids;
  struct PeerPath {
    std::uint64_t peer_guid = 0;
    std::string peer_name;
    std::vector<LinkId> path;
  };
  // Whether a path crosses a cable with an end in `ends`.
  bool crosses(const std::vector<LinkId>& path, const std::set<PortRef>& ends) const {
    if (ends.empty()) return false;
    for (LinkId l : path) {
      const auto& c = cables[localize::cable_of(l)];
      if (ends.count(c.a) || ends.count(c.b)) return true;
    }
    return false;
  }
  struct Daemon {
    double marker = -1;                                             // as last read
    std::map<std::pair<std::string, std::string>, PeerPath> paths;  // by (peer, transport)
    bool reading = false;
  };
  std::map<DaemonKey, Daemon> daemons;
  std::map<DaemonKey, double> markers;  // the last marker answer
  double markers_at = -1;               // its evidence time
  double paths_at = -1;                 // the time every daemon's paths were as its marker says
  double newest_seen = 0;               // the newest probe sample's time, as last seen

  LinkId link(const std::vector<std::string>& l, std::size_t at) {
    // l[at..]: node_guid, port, node_name, remote_node_guid, remote_port, remote_node_name,
    // direction
    PortRef a = port_ref(l, at);
    PortRef b = port_ref(l, at + 3);
    auto key = std::make_tuple(a.guid, a.port, b.guid, b.port);
    auto it = cable_ids.find(key);
    CableId id;
    if (it == cable_ids.end()) {
      id = static_cast<CableId>(cables.size());
      cable_ids.emplace(key, id);
      cables.push_back({a, b, l[at + 2], l[at + 5]});
    } else {
      id = it->second;
      cables[id].a_name = l[at + 2];  // names may change (a new node-name-map)
      cables[id].b_name = l[at + 5];
    }
    return localize::link_of(id, l[at + 6] != "b_to_a");
  }

  void check_paths_complete() {
    for (const auto& [key, marker] : markers) {
      auto it = daemons.find(key);
      if (it == daemons.end() || it->second.marker != marker) return;
    }
    paths_at = std::max(paths_at, markers_at);
  }

  // A marker answer: the daemons whose marker moved (or that are new) are read again, in
  // batches of 200 instances (the job is checked on the results); those already being read
  // wait for that read. `ev`, if still waiting, waits for the batches too.
  void on_markers(const std::vector<Series>& answer, double at,
                  const std::shared_ptr<Evaluation>& ev) {
    markers.clear();
    for (const auto& s : answer) markers[{s.labels[0], s.labels[1]}] = s.value;
    markers_at = at;
    for (auto it = daemons.begin(); it != daemons.end();) {
      it = markers.count(it->first) ? std::next(it) : daemons.erase(it);
    }
    std::set<DaemonKey> changed;
    for (const auto& [key, marker] : markers) {
      auto& d = daemons[key];
      if (d.marker != marker && !d.reading) changed.insert(key);
    }
    check_paths_complete();
    std::map<std::string, std::vector<DaemonKey>> by_instance;
    for (const auto& key : changed) by_instance[key.second].push_back(key);
    std::vector<DaemonKey> batch;
    std::string selector;
    std::size_t in_batch = 0;
    auto flush = [&] {
      if (batch.empty()) return;
      issue_batch(std::move(batch), "{instance=~" + promql_quote("(" + selector + ")") + "}", at,
                  ev);
      batch.clear();
      selector.clear();
      in_batch = 0;
    };
    for (const auto& [instance, keys] : by_instance) {
      selector += (selector.empty() ? "" : "|") + regex_escape(instance);
      batch.insert(batch.end(), keys.begin(), keys.end());
      if (++in_batch == 200) flush();
    }
    flush();
    if (ev && !ev->finished) ev->path_daemons += changed.size();
  }

  void issue_batch(std::vector<DaemonKey> keys, const std::string& selector, double at,
                   const std::shared_ptr<Evaluation>& ev) {
    static const std::vector<std::string> hop_labels{
        "job",       "instance",         "peer",        "transport",        "node_guid", "port",
        "node_name", "remote_node_guid", "remote_port", "remote_node_name", "direction"};
    static const std::vector<std::string> peer_labels{
        "job", "instance", "peer", "transport", "peer_node_guid", "peer_node_name"};
    for (const auto& key : keys) daemons[key].reading = true;
    struct Batch {
      std::vector<DaemonKey> keys;
      std::vector<double> markers;  // as the answer that asked for the read said
      std::map<std::string, QueryResult> got;
      int left = 2;
      double at;
    };
    auto batch = std::make_shared<Batch>();
    batch->keys = std::move(keys);
    for (const auto& key : batch->keys) batch->markers.push_back(markers[key]);
    batch->at = at;
    auto n = std::to_string(batches_sent++);
    auto self = shared_from_this();
    std::weak_ptr<Evaluation> waiting_ev;  // the evaluation that waits for it, if one does
    if (ev && !ev->finished) {
      waiting_ev = ev;
      ++ev->refreshes_left;
    }
    for (auto& q :
         {Query{"paths " + n, "ibfabric_path_hop_info" + selector, hop_labels, Part::paths},
          Query{"peers " + n, "ibfabric_path_peer_info" + selector, peer_labels, Part::paths}}) {
      send(
          q, at,
          [self, batch, waiting_ev, name = q.name](QueryResult r) {
            batch->got[name] = std::move(r);
            if (--batch->left > 0) return;
            self->on_batch(*batch);
            if (auto ev = waiting_ev.lock()) {
              --ev->refreshes_left;
              self->maybe_finish(ev);
            }
          },
          true);
    }
  }
  std::size_t batches_sent = 0;

  template <class Batch>
  void on_batch(const Batch& b) {
    bool ok = true;
    for (const auto& [name, r] : b.got) ok = ok && r.failure == QueryResult::Failure::none;
    std::map<DaemonKey, std::map<std::pair<std::string, std::string>, PeerPath>> fresh;
    for (const auto& key : b.keys) {
      auto it = daemons.find(key);
      if (it != daemons.end()) it->second.reading = false;
      if (ok) fresh[key];
    }
    if (!ok) return;  // read again after the next marker answer
    for (const auto& [name, r] : b.got) {
      bool hops = name.rfind("paths", 0) == 0;
      for (const auto& s : r.series) {
        auto it = fresh.find({s.labels[0], s.labels[1]});
        if (it == fresh.end()) continue;
        auto& path = it->second[{s.labels[2], s.labels[3]}];
        if (hops) {
          path.path.push_back(link(s.labels, 4));
        } else {
          path.peer_guid = parse_guid(s.labels[4]);
          path.peer_name = s.labels[5];
        }
      }
    }
    for (std::size_t i = 0; i < b.keys.size(); ++i) {
      auto d = daemons.find(b.keys[i]);
      if (d == daemons.end()) continue;  // gone meanwhile
      d->second.paths = std::move(fresh[b.keys[i]]);
      d->second.marker = b.markers[i];
    }
    check_paths_complete();
  }

  // --- one evaluation -------------------------------------------------------------------------
  void start(double at, std::function<void(Reading)> done, bool fresh) {
    auto ev = std::make_shared<Evaluation>(io);
    ev->at = at;
    ev->done = std::move(done);
    bool slow_now = reads++ % kSlowEvery == 0 || fresh;
    auto self = shared_from_this();
    std::vector<Query> asked;
    for (auto& q : fixed_queries(window)) {
      auto& k = kept[q.name];
      if (q.part != Part::probes) {
        if (k.running || (q.slow && !slow_now && k.at >= 0)) continue;
        k.running = true;
        ++ev->refreshes_left;
      } else {
        ++ev->probes_left;
      }
      asked.push_back(std::move(q));
    }
    ev->budget.expires_after(probe_timeout);
    ev->budget.async_wait([self, ev](const boost::system::error_code& ec) {
      if (ec) return;
      ev->budget_over = true;
      self->maybe_finish(ev);
    });
    for (auto& q : asked) {
      Part part = q.part;
      std::string name = q.name;
      send(std::move(q), at, [self, ev, part, name, at](QueryResult r) {
        if (part == Part::probes) {
          if (r.failure == QueryResult::Failure::none) {
            self->kept[name] = {std::move(r.series), at, false};
          }
          ev->probes[name] = std::move(r);
          --ev->probes_left;
        } else {
          auto& k = self->kept[name];
          k.running = false;
          if (r.failure == QueryResult::Failure::none) {
            k.series = std::move(r.series);
            k.at = at;
            if (name == "path_marker") self->on_markers(k.series, at, ev);
          }
          if (!ev->finished) --ev->refreshes_left;
        }
        self->maybe_finish(ev);
      });
    }
  }

  void maybe_finish(const std::shared_ptr<Evaluation>& ev) {
    if (ev->finished || ev->probes_left > 0) return;
    if (ev->refreshes_left > 0 && !ev->budget_over) return;
    ev->finished = true;
    ev->budget.cancel();
    Reading reading = assemble(*ev);
    auto done = std::move(ev->done);
    done(std::move(reading));
  }

  // The series of a kept query if usable at `at` (nullptr if not); its part's state updated:
  // as old as its oldest answer, never read (-1) while one of its queries has not answered.
  const std::vector<Series>* use(const std::string& name, Part part, double at, Reading& r) {
    auto& state = r.parts[static_cast<std::size_t>(part)];
    const auto& k = kept[name];
    if (k.at < 0) {
      state = {-1, false};
      unread[static_cast<std::size_t>(part)] = true;
      return nullptr;
    }
    double age = at - k.at;
    if (!unread[static_cast<std::size_t>(part)]) state.age = std::max(state.age, age);
    if (age > max_age(part) + 1e-6) {
      state.usable = false;
      return nullptr;
    }
    return &k.series;
  }
  std::array<bool, kParts> unread{};

  Reading assemble(Evaluation& ev) {
    Reading reading;
    const double at = ev.at;
    for (const auto& [name, s] : seconds) last_seconds[name] = s;
    for (const auto& [name, n] : bytes) last_bytes[name] = n;
    for (const auto& [name, n] : series) last_series[name] = n;
    reading.errors = std::exchange(errors, {});
    reading.answered = std::exchange(answered, {});
    reading.invalid_values = std::exchange(invalid, {});
    seconds.clear(), bytes.clear(), series.clear();
    reading.query_seconds = last_seconds;
    reading.query_series = last_series;
    reading.query_bytes = last_bytes;
    reading.failures_total = failures_total;
    reading.invalid_values_total = invalid_total;
    reading.refreshes_running = in_flight + waiting.size();
    reading.path_instances_read = ev.path_daemons;
    // Parts: usable until one of their queries says otherwise.
    for (auto& p : reading.parts) p = {-1, true};
    unread = {};
    bool probes_ok = true;
    for (const auto& [name, r] : ev.probes) {
      probes_ok = probes_ok && r.failure == QueryResult::Failure::none;
    }
    reading.probes_read = probes_ok;
    auto& probes = reading.parts[static_cast<std::size_t>(Part::probes)];
    probes.usable = reading.probes_read;
    // The newest probe sample: a store whose ingestion stalled has none within its lookback
    // (5 minutes for Prometheus) after a while; the last one seen says how old it is then.
    const auto& newest = kept["newest"].series;
    if (reading.probes_read && !newest.empty()) newest_seen = newest.front().value;
    if (reading.probes_read && newest_seen > 0) {
      reading.newest_sample = newest_seen;
      probes.age = std::max(0.0, at - reading.newest_sample);
    }
    auto& paths = reading.parts[static_cast<std::size_t>(Part::paths)];
    paths.age = paths_at < 0 ? -1 : at - paths_at;
    paths.usable = paths_at >= 0 && paths.age <= max_age(Part::paths) + 1e-6;

    auto& e = reading.evidence;
    // Symptoms: by pair, whether placed or not.
    auto symptom = [&](const char* name, double Reading::Symptoms::*field) {
      if (const auto* s = use(name, Part::symptoms, at, reading)) {
        for (const auto& x : *s) {
          reading.symptoms[{x.labels[0], x.labels[1], x.labels[2], x.labels[3]}].*field = x.value;
        }
      }
    };
    symptom("jitter", &Reading::Symptoms::jitter_seconds);
    symptom("spikes_10m", &Reading::Symptoms::spikes_10m);
    // Hosts: a daemon's node.
    std::map<std::uint64_t, HostId> hosts;
    auto host = [&](std::uint64_t guid, const std::string& name) {
      auto [it, fresh_host] = hosts.emplace(guid, static_cast<HostId>(e.hosts.size()));
      if (fresh_host) {
        localize::Host h;
        h.guid = guid;
        if (name.empty()) {  // as the collectors name a node without a name: its GUID
          char hex[24];
          std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(guid));
          h.name = hex;
        } else {
          h.name = name;
        }
        e.hosts.push_back(std::move(h));
      }
      return it->second;
    };
    std::map<DaemonKey, HostId> daemon_host;
    std::map<HostId, std::string> host_node;  // the host's node name, as Kubernetes has it
    if (const auto* nodes = use("nodes", Part::hosts, at, reading)) {
      for (const auto& s : *nodes) {
        HostId h = host(parse_guid(s.labels[2]), s.labels[3]);
        daemon_host[{s.labels[0], s.labels[1]}] = h;
        if (!s.labels[4].empty()) host_node[h] = s.labels[4];
      }
    }
    // The jobs on each node (the last usable answer: none when the part is missing).
    std::map<std::string, std::vector<std::uint32_t>> node_jobs;
    if (const auto* jobs = use("jobs", Part::jobs, at, reading)) {
      std::map<std::pair<std::string, std::string>, std::uint32_t> index;
      for (const auto& s : *jobs) {
        auto key = std::make_pair(s.labels[0], s.labels[1]);
        auto [it, fresh_job] = index.emplace(key, static_cast<std::uint32_t>(index.size()));
        if (fresh_job) reading.jobs.push_back(key);
        node_jobs[s.labels[2]].push_back(it->second);
      }
    }
    // The daemons' own trouble.
    auto own = [&](const char* query, auto&& apply) {
      const auto* s = use(query, Part::daemons, at, reading);
      if (!s) return;
      for (const auto& x : *s) {
        auto it = daemon_host.find({x.labels[0], x.labels[1]});
        if (it != daemon_host.end()) apply(e.hosts[it->second], x.value);
      }
    };
    own("stalls", [](localize::Host& h, double v) { h.loop_stall_seconds += v; });
    own("responder_dropped", [](localize::Host& h, double v) { h.responder_dropped += v; });
    own("local_failures", [](localize::Host& h, double v) { h.local_failures += v; });
    own("down", [](localize::Host& h, double) { h.daemon_down = true; });
    e.lacking.daemons = !reading.parts[static_cast<std::size_t>(Part::daemons)].usable;
    std::set<PortRef> down_ends;
    if (const auto* x = use("links_down", Part::daemons, at, reading)) {
      for (const auto& s : *x) down_ends.insert(port_ref(s.labels, 0));
    }
    // Counters: the sweep's, else the host's own daemon's, else the far end's.
    for (const char* source : {"peer", "local", "sweep"}) {
      std::string s = source;
      const char* said = s == "sweep"   ? "fabric sweep"
                         : s == "local" ? "its own daemon"
                                        : "the daemon at its far end";
      std::map<PortRef, localize::PortCounters> read;
      if (const auto* x = use("errors_" + s, Part::counters, at, reading)) {
        for (const auto& c : *x) read[port_ref(c.labels, 0)].errors = c.value;
      }
      if (const auto* x = use("discards_" + s, Part::counters, at, reading)) {
        for (const auto& c : *x) read[port_ref(c.labels, 0)].discards = c.value;
      }
      for (auto& [port, counters] : read) {
        counters.source = said;
        e.counters[port] = counters;  // a later (more direct) reader replaces an earlier one
      }
    }
    e.lacking.counters = !reading.parts[static_cast<std::size_t>(Part::counters)].usable;
    if (const auto* x = use("congested", Part::congestion, at, reading)) {
      for (const auto& c : *x) {
        e.congested[port_ref(c.labels, 0)] = {c.value, c.labels[2] != "ticks_per_word"};
      }
    }
    e.lacking.congestion = !reading.parts[static_cast<std::size_t>(Part::congestion)].usable;
    if (!reading.probes_read) return reading;
    // Pairs: sent, lost and late of each, placed on its prober's host and its traced path.
    struct Counts {
      double sent = NAN, lost = NAN, late = NAN;
    };
    std::map<PairLabels, Counts> pairs;
    auto pair_values = [&](const char* query, double Counts::*field) {
      for (const auto& s : kept[query].series) {
        pairs[{s.labels[0], s.labels[1], s.labels[2], s.labels[3]}].*field = s.value;
      }
    };
    pair_values("sent", &Counts::sent);
    pair_values("lost", &Counts::lost);
    pair_values("late", &Counts::late);
    for (auto& [key, counts] : pairs) {
      if (std::isnan(counts.sent)) continue;  // not probed in the window (a lone lost or late)
      if (std::isnan(counts.lost) || std::isnan(counts.late)) {
        ++reading.pairs_incomplete;  // the store lacks one of its series: no evidence either way
        continue;
      }
      auto prober = daemon_host.find({key.job, key.instance});
      const PeerPath* path = nullptr;
      if (paths.usable) {
        auto daemon = daemons.find({key.job, key.instance});
        if (daemon != daemons.end()) {
          auto it = daemon->second.paths.find({key.peer, key.transport});
          if (it != daemon->second.paths.end() && it->second.peer_guid) path = &it->second;
        }
      }
      if (path && crosses(path->path, down_ends)) {
        ++reading.pairs_link_down;
        reading.symptoms.erase(key);  // no probe alert either: the cable's own alert pages
        continue;
      }
      bool placed = prober != daemon_host.end() && path;
      if (counts.lost > 0 || reading.symptoms.count(key)) {
        auto& s = reading.symptoms[key];
        s.sent = counts.sent;
        s.lost = std::min(counts.lost, counts.sent);
        if (prober != daemon_host.end()) s.prober_name = e.hosts[prober->second].name;
        if (path) s.peer_name = path->peer_name;
        if (placed) s.placed = static_cast<std::ptrdiff_t>(e.pairs.size());
      }
      if (!placed) {
        ++reading.pairs_unplaced;
        continue;
      }
      localize::Pair pair;
      pair.prober = prober->second;
      pair.peer = host(path->peer_guid, path->peer_name);
      pair.path = path->path;
      pair.key = key.instance + " " + key.peer + " " + key.transport;
      pair.sent = counts.sent;
      pair.lost = std::min(counts.lost, counts.sent);
      pair.late = std::min(counts.late, counts.sent);
      e.pairs.push_back(std::move(pair));
    }
    e.cables = cables;
    reading.host_jobs.resize(e.hosts.size());
    for (const auto& [h, node] : host_node) {
      auto it = node_jobs.find(node);
      if (it != node_jobs.end()) reading.host_jobs[h] = it->second;
    }
    return reading;
  }
};

EvidenceReader::EvidenceReader(boost::asio::io_context& io, ClientOptions client,
                               ReaderOptions options)
    : state_(std::make_shared<State>(io, std::move(client), options)) {}

EvidenceReader::~EvidenceReader() = default;

void EvidenceReader::read(double at, std::function<void(Reading)> done, bool fresh) {
  state_->start(at, std::move(done), fresh);
}

}  // namespace ibfabric::query
