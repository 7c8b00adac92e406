#pragma once
// Naming what two evaluations agree on (docs/design.md, "Who is to blame"): the verdicts of
// localize() become names only once they hold.

#include "localize/localizer.h"

#include <cstddef>
#include <set>
#include <string>
#include <vector>

namespace ibfabric::localize {

// A verdict's culprits as one stable key (for naming only what two evaluations agree on).
std::string verdict_key(const Evidence& evidence, const Suspect& suspect);

// Names a suspect only once two evaluations in a row hold it (a verdict of one evaluation, in
// the middle of a change, names nobody).
class Confirmer {
 public:
  // The verdicts of `verdicts` whose culprit the previous call also had. `early`: this call
  // comes half an interval after the last (early() said so): a suspect not named yet is named
  // now only when settled; one that is not waits for the next call, a whole interval after it
  // was found, so that the counters that would decide between a cable and its host have
  // reached the store.
  std::vector<Verdict> confirm(const Evidence& evidence, std::vector<Verdict> verdicts,
                               bool early = false);
  // Whether the next evaluation may come half an interval later: the last call left suspects
  // to confirm, and each is settled.
  bool early() const { return pending_ > 0 && pending_ == pending_settled_; }

 private:
  std::set<std::string> previous_, named_;
  std::size_t pending_ = 0, pending_settled_ = 0;
};

}  // namespace ibfabric::localize
