#pragma once
// ibfabric-localize: the localizer as a service, one or two per cluster (docs/design.md, "Who is
// to blame"). Every evaluation interval it reads the evidence from a Prometheus-compatible query
// API (query/evidence_reader.h), runs the attribution (localize/) and publishes its verdicts and
// its own health as one snapshot, which its /metrics serves. The HTTP endpoint runs on the main
// io_context; reading and attribution on an io_context of their own, so a large result or a slow
// store never holds a scrape.

#include "localize/confirmer.h"
#include "localize/localizer.h"
#include "query/evidence_reader.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric {

struct LocalizeOptions {
  query::ClientOptions prometheus{"http://localhost:9090", std::chrono::seconds(8), {}};
  std::string listen_address = ":10920";
  std::string web_config_file;
  std::chrono::milliseconds interval{10000};
  std::chrono::seconds window{60};  // of the probe evidence
  // Evidence older than this (the newest probe sample the store has) gives no verdict: a store
  // whose scrapes stopped would otherwise show the last minute before they did.
  std::chrono::milliseconds max_evidence_age{60000};
  std::string log_level = "info";
  bool once = false;  // one evaluation, its exposition on stdout (needs two reads to confirm)
  bool version = false, help = false;
};

// Throws std::invalid_argument saying what is wrong and how to fix it.
LocalizeOptions parse_localize_options(const std::vector<std::string>& args);
std::string localize_usage();

// The series of one evaluation: verdicts (confirmed) and health.
struct EvaluationReport {
  bool evaluated = false;  // evidence read in full and fresh: verdicts are meaningful
  std::string failure;     // why not
  double at = 0;           // Unix seconds the evidence is of
  double read_seconds = 0, attribution_seconds = 0;
  double evidence_age = -1;  // seconds; -1: no probe sample in the store
  query::Reading reading;
  std::vector<localize::Verdict> verdicts;  // confirmed
  std::size_t waiting = 0;                  // suspects found, not confirmed yet
};
void add_evaluation_metrics(class MetricsBuilder& out, const EvaluationReport& report);

int run_localize(const LocalizeOptions& options);

}  // namespace ibfabric
