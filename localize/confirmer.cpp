#include "localize/confirmer.h"

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
                                        bool early) {
  std::set<std::string> now, named;
  std::vector<Verdict> out;
  pending_ = pending_settled_ = 0;
  for (auto& v : verdicts) {
    // Held when any of its suspects was (a set whose culprit changed order is the same fault).
    bool held = false, was_named = false;
    std::vector<std::string> keys;
    for (const auto& s : v.suspects) {
      auto key = verdict_key(evidence, s) + " " + v.cause;
      held = held || previous_.count(key) > 0;
      was_named = was_named || named_.count(key) > 0;
      keys.push_back(key);
    }
    now.insert(keys.begin(), keys.end());
    if (held && (!early || was_named || v.settled)) {
      named.insert(keys.begin(), keys.end());
      out.push_back(std::move(v));
      continue;
    }
    ++pending_;
    if (v.settled) ++pending_settled_;
  }
  previous_ = std::move(now);
  named_ = std::move(named);
  return out;
}

}  // namespace ibfabric::localize
