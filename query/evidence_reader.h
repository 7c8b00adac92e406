#pragma once
// Reads one evaluation's evidence (localize/evidence.h) from a Prometheus-compatible query API
// (docs/design.md, "Partial evidence, never silence"). The evidence comes in parts, each read by
// its own queries and kept with its own age:
//   probes      sent, lost and late per pair over the window, the newest probe sample's time:
//               asked every evaluation, and what no verdict is made without;
//   hosts       which daemon is which node;          paths  where each pair's probes go;
//   daemons     each daemon's own trouble;           counters  errors and discards of ports;
//   congestion  the sending ports that wait;         symptoms  per-pair jitter and spikes;
//   jobs        which training jobs run on which node (ibfabric:job_node);
// every part but the probes keeps its last answer when a query fails or is slow, and is used
// while younger than its maximum age (kMaxAge); a query still running when the evaluation's
// budget ends keeps running in the background, and its answer serves the next evaluation.

#include "localize/evidence.h"
#include "query/http_client.h"

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace ibfabric::query {

enum class Part : std::uint8_t {
  probes,
  hosts,
  paths,
  daemons,
  counters,
  congestion,
  symptoms,
  jobs,
};
constexpr std::size_t kParts = 8;
const char* part_name(Part part);
// The age (s) past which a kept part is not used: the hosts and the paths change rarely; the
// daemons' trouble is a minute's; the counters are over 10 minutes and read every 6th time;
// the congested ports are 5-minute rates.
double max_age(Part part);

struct ReaderOptions {
  std::chrono::seconds window{60};  // of the probe evidence (a minute names a fault in a minute)
  std::size_t max_in_flight = 4;    // queries at the store at once (probe queries go first)
  // Deadline of a query that refreshes a kept part (the probe queries have the client's):
  // it may run on past the evaluation that asked it, and serve the next.
  std::chrono::milliseconds refresh_timeout{60000};
};

// A probe pair as the daemons label it.
struct PairLabels {
  std::string job, instance, peer, transport;
  auto operator<=>(const PairLabels&) const = default;
};

struct PartState {
  double age = -1;      // s from the evidence time of its oldest answer in use; -1: none yet
  bool usable = false;  // every query of it answered, younger than max_age()
};

struct Reading {
  localize::Evidence evidence;
  // The pairs that show a symptom the probe alerts read, placed or not: loss in the window,
  // jitter over 500 us, more than 5 spikes in 10 minutes (the last usable answers).
  struct Symptoms {
    double sent = 0, lost = 0;
    double jitter_seconds = -1, spikes_10m = -1;  // -1: not over the threshold
    std::string prober_name, peer_name;           // "" where not known
    std::ptrdiff_t placed = -1;                   // its index in evidence.pairs, if placed
  };
  std::map<PairLabels, Symptoms> symptoms;
  // The training jobs on each host (by its daemon's `node` label and ibfabric:job_node),
  // parallel to evidence.hosts: indexes into `jobs`, (namespace, job name).
  std::vector<std::pair<std::string, std::string>> jobs;
  std::vector<std::vector<std::uint32_t>> host_jobs;
  // Probe evidence read fresh this time: false gives no verdict (`errors` says why).
  bool probes_read = false;
  std::array<PartState, kParts> parts{};
  // Queries that failed since the last reading (refreshes left running by an earlier
  // evaluation included), by name ("paths" and "peers" for all their batches): what failed.
  std::map<std::string, std::string> errors;
  std::set<std::string> answered;                // queries that answered since the last reading
  std::map<std::string, double> invalid_values;  // NaN or infinite values dropped since, by query
  // Each query's last answer: its wall time, its series, its body's size.
  std::map<std::string, double> query_seconds, query_series, query_bytes;
  // Since start: failures by (query, failure_name()), values dropped by query.
  std::map<std::pair<std::string, std::string>, double> failures_total;
  std::map<std::string, double> invalid_values_total;
  double newest_sample = 0;          // Unix seconds of the newest probe sample seen; 0: none
  std::size_t pairs_unplaced = 0;    // probed pairs whose prober or peer host is not known
  std::size_t pairs_incomplete = 0;  // pairs with `sent` but no `lost` or `late` series
  // Pairs whose path crosses a cable that was down in the window: left out of the evidence
  // (their loss is the cable's, and its port-down alert, or its switch's or host's, names it).
  std::size_t pairs_link_down = 0;
  std::size_t path_instances_read = 0;  // daemons whose paths were read again this time
  std::size_t refreshes_running = 0;    // queries left running past this evaluation's budget
};

class EvidenceReader {
 public:
  EvidenceReader(boost::asio::io_context& io, ClientOptions client, ReaderOptions options = {});
  ~EvidenceReader();

  // Reads the evidence as of `at` (Unix seconds); `done` runs on the io_context once the probe
  // queries have answered and the refreshes asked with them have answered or the client's
  // timeout has passed since the call. `fresh`: refresh the slow parts (counters, congestion,
  // spikes) now, whatever their schedule (a suspect waits on them to be confirmed).
  void read(double at, std::function<void(Reading)> done, bool fresh = false);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// The PromQL of each query the reader sends, with its part (for docs/design.md and the tests).
struct QueryText {
  std::string name, promql;
  Part part;
};
std::vector<QueryText> evidence_queries();

}  // namespace ibfabric::query
