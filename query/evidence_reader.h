#pragma once
// Reads one evaluation's evidence (localize/evidence.h) from a Prometheus-compatible query API:
// the probe counters of every pair over the last minute, each daemon's own evidence, the ports
// that counted errors, the congested ports; and the traced paths, which change rarely, only for
// the daemons whose `ibfabric_path_traces_total` moved since the last read (or that are new).

#include "localize/evidence.h"
#include "query/http_client.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace ibfabric::query {

struct Reading {
  localize::Evidence evidence;
  // What failed, by query name ("" when everything was read). Any failure: no verdict.
  std::map<std::string, std::string> errors;
  std::map<std::string, double> query_seconds;  // by query name
  std::map<std::string, double> query_series;   // series each query returned
  double newest_sample = 0;             // Unix seconds of the newest probe sample seen; 0: none
  std::size_t pairs_unplaced = 0;       // probed pairs whose prober or peer host is not known
  std::size_t path_instances_read = 0;  // daemons whose paths were read again this time
};

class EvidenceReader {
 public:
  // `window`: of the probe evidence (a minute names a fault within a minute).
  EvidenceReader(boost::asio::io_context& io, ClientOptions client,
                 std::chrono::seconds window = std::chrono::seconds(60));
  ~EvidenceReader();

  // Reads the evidence as of `at` (Unix seconds); `done` runs on the io_context. `fresh`: ask
  // the slow queries (counters, congestion) now, whatever their schedule (a suspect waits on
  // them to be confirmed).
  void read(double at, std::function<void(Reading)> done, bool fresh = false);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// The PromQL of each query the reader sends (for docs/design.md and the tests).
std::vector<std::pair<std::string, std::string>> evidence_queries();

}  // namespace ibfabric::query
