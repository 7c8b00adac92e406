#pragma once
// The attribution: evidence in, verdicts out (docs/design.md, "Who is to blame"). Pure code,
// no I/O and no clock: the same evidence gives the same verdicts, in the same order.

#include "localize/evidence.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ibfabric::localize {

// What a verdict blames.
enum class Kind : std::uint8_t {
  cable,       // a cable, in the directions listed
  host,        // a host as a whole
  responder,   // a host as the one answering probes
  prober,      // a host as the one sending them
  congestion,  // a sending port that waits (the cable's direction it sends into)
};
const char* kind_name(Kind kind);

// One component a verdict names.
struct Suspect {
  Kind kind = Kind::cable;
  CableId cable = 0;             // cable, congestion
  std::vector<bool> directions;  // cable: which directions lose ({a_to_b, b_to_a} order)
  bool a_to_b = true;            // congestion: the direction it sends into
  HostId host = 0;               // host, responder, prober
  auto operator<=>(const Suspect&) const = default;
};

struct Verdict {
  // What explains the evidence. `suspects.front()` is the culprit the alert is named after; the
  // rest are the components the probes cannot tell it apart from (same pairs, as likely), and
  // no evidence of their own decides between them.
  std::vector<Suspect> suspects;
  std::string cause;                    // "loss", "late", "congestion"
  std::vector<std::uint32_t> pairs;     // the pairs it explains (indexes into Evidence::pairs)
  double sent = 0, lost = 0, late = 0;  // over the pairs it explains
  double rate = 0;                      // its own loss rate (loss), late share (late, congestion)
  std::vector<HostId> blast_radius;     // hosts whose probed paths cross it (or the host itself)
  std::string why;                      // one sentence: why this and not the others
  // Nothing still to come is expected to change it: its culprit has evidence of its own beside
  // the probes (errors or discards counted at a cable's ends, its daemon's trouble, a sending
  // port that waits), or it is a cable that every other component its lossy pairs cross fits
  // worse by Options::settle_margin (the counters still to come, which move a look-alike by
  // equal_fit + evidence_weight, cannot put another in its place).
  bool settled = false;
  // The evidence it was made without that bears on it (Evidence::lacking): "counters" (a
  // loss verdict: a cable is not told from its host), "daemons" (a host verdict: its own
  // trouble unknown), "congestion" (a late verdict); joined by ", ", "" when it lacked nothing.
  std::string lacking;
  // Made, but not to be named: a late host without the congestion evidence that would tell
  // its lateness from a congested port's (incast into a host would name the host).
  bool withheld = false;
};

struct Options {
  // Loss: a culprit explains at least this many lost probes, at more than this rate.
  double min_lost = 4;
  double min_loss_rate = 0.005;
  // ... and one whose evidence is one host's (the host, its own cable, or a cable whose pairs
  // that lose are all that host's) with no evidence of its own (trouble of its daemon, errors
  // counted at the cable's ends) at least this many: the stray losses of the handful of pairs
  // one host has look like a 1 % fault at 4 or 5 probes, and page for nothing.
  double min_lost_host = 6;
  // ... and its fit, the log-likelihood ratio of its pairs' loss with it dropping at its rate
  // against without (beside the culprits named before it), is at least this: e^10, about
  // 22,000 to 1, so that the thousands of candidates of a large fabric name no chance run.
  double min_gain = 10;
  // A pair contradicts a candidate when, had the candidate dropped its share of the pair's
  // probes, losing as few as it did had a chance under this (one-sided binomial test); all of
  // its pairs that lost less than their share, together, likewise (chi-square of their
  // deviances).
  double contradiction_p = 1e-3;
  // Candidates whose log-likelihood gain is within this of the best one's, over the same
  // pairs, are equally suspect.
  double equal_fit = 2.0;
  // ... and one with evidence of its own (errors at a cable's ends, its daemon's trouble) over
  // the same pairs or more is as suspect as a best without within this much more: about the
  // log of how much likelier a fault makes that evidence than chance does.
  double evidence_weight = 4.0;
  // A cable without evidence of its own is settled (Verdict::settled) when every other
  // component its lossy pairs cross fits worse by this much (log-likelihood ratio at each one's
  // pooled rate): counters still to come move a look-alike by equal_fit + evidence_weight, and
  // between two fixed rates a likelihood ratio of e^12 against the true one comes by chance at
  // most once in 160,000 (the fitted rates make it a little likelier).
  double settle_margin = 12;
  // Late: a host late in at least this many pairs, this many late probes, this share of its
  // probes, and this many times as often as the pairs it is no part of.
  double min_late_pairs = 2;
  double min_late = 8;
  double min_late_rate = 0.01;
  double late_over_others = 3;
  // Own trouble: loop stalls of at least this long in the window.
  double stall_seconds = 0.5;
};

// One evaluation.
std::vector<Verdict> localize(const Evidence& evidence, const Options& options = {});

}  // namespace ibfabric::localize
