#pragma once
// What ibfabric-localize publishes of one evaluation: each confirmed verdict as the series the
// alerts read (culprit labels, evidence in words) and the localizer's own health.

#include "localize/localizer.h"
#include "query/evidence_reader.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace ibfabric {
class MetricsBuilder;
}  // namespace ibfabric

namespace ibfabric::localizer {

// How the log names a suspect: a cable by both ends, a congested port by its direction, a host.
std::string display_name(const localize::Evidence& e, const localize::Suspect& s);

// The series of one evaluation: verdicts (confirmed) and health.
struct EvaluationReport {
  bool evaluated = false;  // evidence read in full and fresh: verdicts are meaningful
  std::string failure;     // why not
  double at = 0;           // Unix seconds the evidence is of
  double read_seconds = 0, attribution_seconds = 0;
  double evidence_age = -1;  // seconds; -1: no probe sample in the store
  query::Reading reading;
  std::vector<localize::Verdict> verdicts;  // confirmed
  std::vector<localize::Verdict> withheld;  // made, not named: evidence they need is missing
  std::size_t waiting = 0;                  // suspects found, not confirmed yet
  // Per pair of reading.evidence: a culprit named in the last 10 minutes explains it.
  std::vector<bool> explained;
  // An evaluation that failed shortly after one that did not: that one's verdicts (and pairs
  // no culprit explains) stay published, with their age (a store's hiccup blanks nothing).
  std::shared_ptr<const EvaluationReport> kept;
  std::size_t plan_hosts = 0, plan_jobs = 0;  // the probe plan: hosts given peers, jobs covered
};
void add_evaluation_metrics(MetricsBuilder& out, const EvaluationReport& report);

}  // namespace ibfabric::localizer
