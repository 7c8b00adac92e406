#include "localize/confirmer.h"

#include <algorithm>

namespace ibfabric::localize {

std::string verdict_key(const Evidence& evidence, const Suspect& suspect) {
  switch (suspect.kind) {
    case Kind::cable: {
      const Cable& c = evidence.cables[suspect.cable];
      return "cable " + std::to_string(c.a.guid) + ":" + std::to_string(c.a.port) + " " +
             std::to_string(c.b.guid) + ":" + std::to_string(c.b.port);
    }
    case Kind::congestion: {
      const Cable& c = evidence.cables[suspect.cable];
      const PortRef& p = suspect.a_to_b ? c.a : c.b;
      return "congestion " + std::to_string(p.guid) + ":" + std::to_string(p.port);
    }
    default:
      return "host " + std::to_string(evidence.hosts[suspect.host].guid);
  }
}

std::vector<Verdict> Confirmer::confirm(const Evidence& evidence, std::vector<Verdict> verdicts,
                                        double at) {
  std::map<std::string, double> held_since;
  std::set<std::string> named;
  std::vector<Verdict> out;
  pending_ = 0;
  for (auto& v : verdicts) {
    // Held when any of its suspects was (a set whose culprit changed order is the same fault),
    // since the earliest of them.
    bool held = false, was_named = false;
    double since = at;
    std::vector<std::string> keys;
    for (const auto& s : v.suspects) {
      auto key = verdict_key(evidence, s) + " " + v.cause;
      if (auto it = held_since_.find(key); it != held_since_.end()) {
        held = true;
        since = std::min(since, it->second);
      }
      was_named = was_named || named_.count(key) > 0;
      keys.push_back(key);
    }
    for (const auto& key : keys) held_since.emplace(key, since);
    // (A thousandth of a second short of the interval counts: evidence times are on its grid.)
    if (held && (was_named || v.settled || at - since >= interval_ - 1e-3)) {
      named.insert(keys.begin(), keys.end());
      out.push_back(std::move(v));
      continue;
    }
    ++pending_;
  }
  held_since_ = std::move(held_since);
  named_ = std::move(named);
  return out;
}

}  // namespace ibfabric::localize
