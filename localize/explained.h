#pragma once
// Which probe pairs a named culprit explains (docs/design.md, "Who is to blame"): a pair whose
// probes cross a named cable or congested port, or whose prober or peer is a named host. Their
// own symptoms (loss, jitter, spikes) are the culprit's, said by its verdict, and page no one
// on their own; what no culprit explains is served per pair for the probe alerts.

#include "localize/localizer.h"

#include <compare>
#include <cstdint>
#include <set>
#include <vector>

namespace ibfabric::localize {

// A named suspect by value: names outlive one evaluation's indexes.
struct Culprit {
  Kind kind = Kind::cable;  // cable, congestion (the sending port `a`, into `b`) or host
  PortRef a, b;
  std::uint64_t host = 0;
  auto operator<=>(const Culprit&) const = default;
};
Culprit culprit_of(const Evidence& evidence, const Suspect& suspect);

// For each pair of `evidence`: whether one of `culprits` explains it.
std::vector<bool> explained_pairs(const Evidence& evidence, const std::set<Culprit>& culprits);

}  // namespace ibfabric::localize
