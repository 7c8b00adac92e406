#include "query/evidence_reader.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

namespace ibfabric::query {

using localize::CableId;
using localize::HostId;
using localize::LinkId;
using localize::PortRef;

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
  // Counters over 10 minutes and 5-minute rates change little in 10 s, and at thousands of
  // hosts they are the costliest queries the store answers: read every kSlowEvery-th time.
  bool slow = false;
};
constexpr int kSlowEvery = 6;

std::vector<Query> fixed_queries(const std::string& w) {
  const std::vector<std::string> pair{"job", "instance", "peer", "transport"};
  const std::vector<std::string> daemon{"job", "instance"};
  const std::vector<std::string> port{"node_guid", "port"};
  std::vector<Query> q{
      {"sent", std::string(kPairSum) + "(increase(ibfabric_probe_sent_total[" + w + "]))", pair},
      {"lost", std::string(kPairSum) + "(increase(ibfabric_probe_lost_total[" + w + "]))", pair},
      {"late", std::string(kPairSum) + "(increase(ibfabric_probe_spikes_total[" + w + "]))", pair},
      {"nodes",
       "max by (job, instance, node_guid, node_name) "
       "(last_over_time(ibfabric_probe_node_info{node_guid!=\"\"}[10m]))",
       {"job", "instance", "node_guid", "node_name"}},
      {"newest", "max(timestamp(ibfabric_probe_node_info))", {}},
      {"path_marker", std::string(kDaemonSum) + "(ibfabric_path_traces_total)", daemon},
      {"stalls",
       std::string(kDaemonSum) + "(increase(ibfabric_event_loop_stall_seconds_total[" + w + "]))",
       daemon},
      {"responder_dropped",
       std::string(kDaemonSum) + "(increase(ibfabric_probe_responder_dropped_total[" + w +
           "])) > 0",
       daemon},
      {"local_failures",
       std::string(kDaemonSum) + "(increase(ibfabric_probe_failed_total[" + w + "])) > 0", daemon},
      {"down", "up == 0", daemon},
      {"congested", "ibfabric:port_congested:rate5m", {"node_guid", "port", "unit"}, true},
  };
  for (const char* source : {"sweep", "local", "peer"}) {
    std::string s = source;
    std::string prefix = s == "sweep" ? "ibfabric_fabric_port" : "ibfabric_ports";
    std::string selector = s == "sweep" ? "" : "{side=\"" + s + "\"}";
    q.push_back({"errors_" + s, by_port(errors_of(prefix, selector), s), port, true});
    q.push_back(
        {"discards_" + s,
         by_port("increase(" + prefix + "_transmit_discards_total" + selector + "[10m])", s), port,
         true});
  }
  return q;
}

std::uint64_t parse_guid(const std::string& s) {
  return std::strtoull(s.c_str(), nullptr, s.rfind("0x", 0) == 0 ? 16 : 10);
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
using PairKey =
    std::tuple<std::string, std::string, std::string, std::string>;  // + peer, transport

}  // namespace

std::vector<std::pair<std::string, std::string>> evidence_queries() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& q : fixed_queries("1m")) out.emplace_back(q.name, q.promql);
  out.emplace_back("paths", "ibfabric_path_hop_info{instance=~\"<daemons whose marker moved>\"}");
  out.emplace_back("peers", "ibfabric_path_peer_info{instance=~\"<the same>\"}");
  return out;
}

struct EvidenceReader::State : std::enable_shared_from_this<State> {
  State(boost::asio::io_context& io, ClientOptions o, std::string w)
      : client(io, std::move(o)), window(std::move(w)) {}

  PrometheusClient client;
  std::string window;  // of the probe evidence, as PromQL writes a range
  int reads = 0;
  std::map<std::string, std::vector<Series>> slow;  // the slow queries' last answers
  std::map<std::string, double> slow_seconds;       // and how long they took
  std::vector<localize::Cable> cables;
  std::map<std::tuple<std::uint64_t, std::uint32_t, std::uint64_t, std::uint32_t>, CableId>
      cable_ids;
  struct PeerPath {
    std::uint64_t peer_guid = 0;
    std::string peer_name;
    std::vector<LinkId> path;
  };
  struct Daemon {
    double marker = -1;
    std::map<std::pair<std::string, std::string>, PeerPath> paths;  // by (peer, transport)
  };
  std::map<DaemonKey, Daemon> daemons;

  // Runs queries side by side; `then` once all have answered.
  void gather(std::vector<Query> queries, double at,
              std::function<void(std::map<std::string, QueryResult>)> then) {
    struct Pending {
      std::map<std::string, QueryResult> results;
      std::size_t left;
      std::function<void(std::map<std::string, QueryResult>)> then;
    };
    auto pending = std::make_shared<Pending>();
    pending->left = queries.size();
    pending->then = std::move(then);
    if (queries.empty()) {
      pending->then({});
      return;
    }
    for (auto& q : queries) {
      client.query(q.promql, at, q.labels, [pending, name = q.name](QueryResult r) {
        pending->results[name] = std::move(r);
        if (--pending->left == 0) pending->then(std::move(pending->results));
      });
    }
  }

  LinkId link(const std::vector<std::string>& l, std::size_t at) {
    // l[at..]: node_guid, port, node_name, remote_node_guid, remote_port, remote_node_name,
    // direction
    PortRef a{parse_guid(l[at]), static_cast<std::uint32_t>(std::atoi(l[at + 1].c_str()))};
    PortRef b{parse_guid(l[at + 3]), static_cast<std::uint32_t>(std::atoi(l[at + 4].c_str()))};
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
};

EvidenceReader::EvidenceReader(boost::asio::io_context& io, ClientOptions client,
                               std::chrono::seconds window)
    : state_(std::make_shared<State>(io, std::move(client), std::to_string(window.count()) + "s")) {
}

EvidenceReader::~EvidenceReader() = default;

void EvidenceReader::read(double at, std::function<void(Reading)> done, bool fresh) {
  auto state = state_;
  std::vector<Query> queries;
  bool slow_now = state->reads++ % kSlowEvery == 0 || fresh;
  for (auto& q : fixed_queries(state->window)) {
    if (!q.slow || slow_now || !state->slow.count(q.name)) queries.push_back(std::move(q));
  }
  state->gather(
      std::move(queries), at,
      [state, at, done = std::move(done)](std::map<std::string, QueryResult> fixed) mutable {
        Reading reading;
        for (const auto& [name, r] : fixed) {
          reading.query_seconds[name] = std::chrono::duration<double>(r.duration).count();
          reading.query_series[name] = static_cast<double>(r.series.size());
          if (!r.error.empty()) reading.errors[name] = r.error;
        }
        if (!reading.errors.empty()) return done(std::move(reading));
        // The slow queries not asked this time: their last answers.
        for (auto& q : fixed_queries(state->window)) {
          if (!q.slow) continue;
          auto asked = fixed.find(q.name);
          if (asked != fixed.end()) {
            state->slow[q.name] = asked->second.series;
            state->slow_seconds[q.name] = reading.query_seconds[q.name];
          } else {
            fixed[q.name].series = state->slow[q.name];
            reading.query_seconds[q.name] = state->slow_seconds[q.name];  // as last asked
            reading.query_series[q.name] = static_cast<double>(state->slow[q.name].size());
          }
        }
        // Which daemons' paths to read again: their marker moved, or they are new.
        std::set<DaemonKey> changed, seen;
        for (const auto& s : fixed["path_marker"].series) {
          DaemonKey key{s.labels[0], s.labels[1]};
          seen.insert(key);
          auto& d = state->daemons[key];
          if (d.marker != s.value) changed.insert(key);
        }
        for (auto it = state->daemons.begin(); it != state->daemons.end();) {
          it = seen.count(it->first) ? std::next(it) : state->daemons.erase(it);
        }
        // Batches of daemons, by instance (the job is checked on the results).
        std::vector<Query> paths;
        const std::vector<std::string> hop_labels{
            "job",       "instance",         "peer",        "transport",        "node_guid", "port",
            "node_name", "remote_node_guid", "remote_port", "remote_node_name", "direction"};
        const std::vector<std::string> peer_labels{"job",       "instance",       "peer",
                                                   "transport", "peer_node_guid", "peer_node_name"};
        std::string batch;
        std::size_t in_batch = 0, batches = 0;
        auto flush = [&] {
          if (batch.empty()) return;
          std::string selector = "{instance=~" + promql_quote("(" + batch + ")") + "}";
          auto n = std::to_string(batches++);
          paths.push_back({"paths " + n, "ibfabric_path_hop_info" + selector, hop_labels});
          paths.push_back({"peers " + n, "ibfabric_path_peer_info" + selector, peer_labels});
          batch.clear();
          in_batch = 0;
        };
        std::set<std::string> instances;
        for (const auto& key : changed) instances.insert(key.second);
        for (const auto& instance : instances) {
          batch += (batch.empty() ? "" : "|") + regex_escape(instance);
          if (++in_batch == 200) flush();
        }
        flush();
        reading.path_instances_read = changed.size();
        state->gather(
            std::move(paths), at,
            [state, changed, fixed = std::move(fixed), reading = std::move(reading),
             done = std::move(done)](std::map<std::string, QueryResult> got) mutable {
              for (const auto& [name, r] : got) {
                reading.query_seconds[name.substr(0, name.find(' '))] +=
                    std::chrono::duration<double>(r.duration).count();
                reading.query_series[name.substr(0, name.find(' '))] +=
                    static_cast<double>(r.series.size());
                if (!r.error.empty()) reading.errors[name] = r.error;
              }
              if (!reading.errors.empty()) return done(std::move(reading));
              // New paths of the daemons that changed (a daemon without paths keeps none).
              std::map<DaemonKey, std::map<std::pair<std::string, std::string>, State::PeerPath>>
                  fresh;
              for (const auto& key : changed) fresh[key];
              for (const auto& [name, r] : got) {
                bool hops = name.rfind("paths", 0) == 0;
                for (const auto& s : r.series) {
                  DaemonKey key{s.labels[0], s.labels[1]};
                  auto it = fresh.find(key);
                  if (it == fresh.end()) continue;
                  auto& path = it->second[{s.labels[2], s.labels[3]}];
                  if (hops) {
                    path.path.push_back(state->link(s.labels, 4));
                  } else {
                    path.peer_guid = parse_guid(s.labels[4]);
                    path.peer_name = s.labels[5];
                  }
                }
              }
              for (auto& [key, peer_paths] : fresh)
                state->daemons[key].paths = std::move(peer_paths);
              for (const auto& s : fixed["path_marker"].series) {
                state->daemons[{s.labels[0], s.labels[1]}].marker = s.value;
              }
              // Assemble.
              auto& e = reading.evidence;
              std::map<std::uint64_t, HostId> hosts;
              auto host = [&](std::uint64_t guid, const std::string& name) {
                auto [it, fresh_host] = hosts.emplace(guid, static_cast<HostId>(e.hosts.size()));
                if (fresh_host) {
                  localize::Host h;
                  h.guid = guid;
                  if (name.empty()) {  // as the collectors name a node without a name: its GUID
                    char hex[24];
                    std::snprintf(hex, sizeof hex, "0x%016llx",
                                  static_cast<unsigned long long>(guid));
                    h.name = hex;
                  } else {
                    h.name = name;
                  }
                  e.hosts.push_back(std::move(h));
                }
                return it->second;
              };
              std::map<DaemonKey, HostId> daemon_host;
              for (const auto& s : fixed["nodes"].series) {
                daemon_host[{s.labels[0], s.labels[1]}] =
                    host(parse_guid(s.labels[2]), s.labels[3]);
              }
              auto own = [&](const char* query, auto&& apply) {
                for (const auto& s : fixed[query].series) {
                  auto it = daemon_host.find({s.labels[0], s.labels[1]});
                  if (it != daemon_host.end()) apply(e.hosts[it->second], s.value);
                }
              };
              own("stalls", [](localize::Host& h, double v) { h.loop_stall_seconds += v; });
              own("responder_dropped",
                  [](localize::Host& h, double v) { h.responder_dropped += v; });
              own("local_failures", [](localize::Host& h, double v) { h.local_failures += v; });
              own("down", [](localize::Host& h, double) { h.daemon_down = true; });
              std::map<PairKey, localize::Pair> pairs;
              auto pair_values = [&](const char* query, double localize::Pair::*field) {
                for (const auto& s : fixed[query].series) {
                  PairKey key{s.labels[0], s.labels[1], s.labels[2], s.labels[3]};
                  if (std::isfinite(s.value)) pairs[key].*field = s.value;
                }
              };
              pair_values("sent", &localize::Pair::sent);
              pair_values("lost", &localize::Pair::lost);
              pair_values("late", &localize::Pair::late);
              for (auto& [key, pair] : pairs) {
                auto prober = daemon_host.find({std::get<0>(key), std::get<1>(key)});
                auto daemon = state->daemons.find({std::get<0>(key), std::get<1>(key)});
                const State::PeerPath* path = nullptr;
                if (daemon != state->daemons.end()) {
                  auto it = daemon->second.paths.find({std::get<2>(key), std::get<3>(key)});
                  if (it != daemon->second.paths.end() && it->second.peer_guid) path = &it->second;
                }
                if (prober == daemon_host.end() || !path) {
                  ++reading.pairs_unplaced;
                  continue;
                }
                pair.prober = prober->second;
                pair.peer = host(path->peer_guid, path->peer_name);
                pair.path = path->path;
                pair.key = std::get<1>(key) + " " + std::get<2>(key) + " " + std::get<3>(key);
                pair.lost = std::min(pair.lost, pair.sent);
                pair.late = std::min(pair.late, pair.sent);
                e.pairs.push_back(std::move(pair));
              }
              e.cables = state->cables;
              // Counters: the sweep's, else the host's own daemon's, else the far end's.
              for (const char* source : {"peer", "local", "sweep"}) {
                std::string s = source;
                const char* said = s == "sweep"   ? "fabric sweep"
                                   : s == "local" ? "its own daemon"
                                                  : "the daemon at its far end";
                std::map<PortRef, localize::PortCounters> read;
                for (const auto& x : fixed["errors_" + s].series) {
                  read[{parse_guid(x.labels[0]),
                        static_cast<std::uint32_t>(std::atoi(x.labels[1].c_str()))}]
                      .errors = x.value;
                }
                for (const auto& x : fixed["discards_" + s].series) {
                  read[{parse_guid(x.labels[0]),
                        static_cast<std::uint32_t>(std::atoi(x.labels[1].c_str()))}]
                      .discards = x.value;
                }
                for (auto& [port, counters] : read) {
                  counters.source = said;
                  e.counters[port] =
                      counters;  // a later (more direct) reader replaces an earlier one
                }
              }
              for (const auto& x : fixed["congested"].series) {
                e.congested[{parse_guid(x.labels[0]),
                             static_cast<std::uint32_t>(std::atoi(x.labels[1].c_str()))}] = {
                    x.value, x.labels[2] != "ticks_per_word"};
              }
              const auto& newest = fixed["newest"].series;
              if (!newest.empty() && std::isfinite(newest.front().value)) {
                reading.newest_sample = newest.front().value;
              }
              done(std::move(reading));
            });
      });
}

}  // namespace ibfabric::query
