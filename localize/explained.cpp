#include "localize/explained.h"

namespace ibfabric::localize {

Culprit culprit_of(const Evidence& e, const Suspect& s) {
  Culprit c;
  switch (s.kind) {
    case Kind::cable:
      c.kind = Kind::cable;
      c.a = e.cables[s.cable].a;
      c.b = e.cables[s.cable].b;
      break;
    case Kind::congestion:
      c.kind = Kind::congestion;
      c.a = s.a_to_b ? e.cables[s.cable].a : e.cables[s.cable].b;
      c.b = s.a_to_b ? e.cables[s.cable].b : e.cables[s.cable].a;
      break;
    default:  // a host, in whichever role: all its pairs are its
      c.kind = Kind::host;
      c.host = e.hosts[s.host].guid;
  }
  return c;
}

std::vector<bool> explained_pairs(const Evidence& e, const std::set<Culprit>& culprits) {
  std::vector<bool> links(e.cables.size() * 2, false), hosts(e.hosts.size(), false);
  for (CableId id = 0; id < e.cables.size(); ++id) {
    const Cable& cable = e.cables[id];
    // A cable in either direction; a congested port in the direction it sends.
    bool whole = culprits.count({Kind::cable, cable.a, cable.b, 0}) > 0;
    links[link_of(id, true)] = whole || culprits.count({Kind::congestion, cable.a, cable.b, 0});
    links[link_of(id, false)] = whole || culprits.count({Kind::congestion, cable.b, cable.a, 0});
  }
  for (HostId h = 0; h < e.hosts.size(); ++h) {
    hosts[h] = culprits.count({Kind::host, {}, {}, e.hosts[h].guid}) > 0;
  }
  std::vector<bool> out(e.pairs.size(), false);
  for (std::size_t p = 0; p < e.pairs.size(); ++p) {
    const Pair& pair = e.pairs[p];
    bool explained = hosts[pair.prober] || hosts[pair.peer];
    for (LinkId l : pair.path) explained = explained || links[l];
    out[p] = explained;
  }
  return out;
}

}  // namespace ibfabric::localize
