#pragma once
// Naming what two evaluations agree on (docs/design.md, "Who is to blame"): the verdicts of
// localize() become names only once they hold.

#include "localize/localizer.h"

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ibfabric::localize {

// A verdict's culprits as one stable key (for naming only what two evaluations agree on).
std::string verdict_key(const Evidence& evidence, const Suspect& suspect);

// Names a suspect only once two evaluations in a row hold it (a verdict of one evaluation, in
// the middle of a change, names nobody), and, unless it is settled (Verdict::settled), only once
// it has been held a whole evaluation interval: the counters that would decide between a cable
// and its host are in the store by then.
class Confirmer {
 public:
  // `interval`: the evaluation interval, s.
  explicit Confirmer(double interval = 10) : interval_(interval) {}
  // The verdicts of `verdicts` to name, of the evaluation whose evidence time is `at` (s): those
  // the previous call also held, and that are settled, or were first held (in this run of calls
  // holding them) a whole interval before `at`, or were named by the previous call.
  std::vector<Verdict> confirm(const Evidence& evidence, std::vector<Verdict> verdicts, double at);
  // Whether suspects wait to be named: the next evaluation comes half an interval later, when
  // one that is settled by then (its own evidence, or fresher probes that rule the rest out)
  // is named, and one that is not waits on.
  bool pending() const { return pending_ > 0; }

 private:
  double interval_;
  std::map<std::string, double> held_since_;  // what the last call held, and since when
  std::set<std::string> named_;
  std::size_t pending_ = 0;
};

}  // namespace ibfabric::localize
