// Which probe pairs a named culprit explains (localize/explained.h): those whose path crosses a
// named cable (either way) or congested port (the way it sends), or whose prober or peer is a
// named host.
#include "localize/explained.h"

#include <gtest/gtest.h>

namespace ibfabric::localize {
namespace {

// Hosts h0, h1, h2 on one leaf L (ports 1..3): cable c (L port i <-> h_i port 1), a the leaf's
// end. Pairs: h0 -> h1, h1 -> h2, h2 -> h0, each crossing its two cables both ways.
Evidence three_hosts() {
  Evidence e;
  const std::uint64_t leaf = 0xa0;
  for (std::uint32_t i = 0; i < 3; ++i) {
    e.hosts.push_back({0xc0 + i, "h" + std::to_string(i)});
    e.cables.push_back({{leaf, i + 1}, {0xc0 + i, 1}, "L", "h" + std::to_string(i)});
  }
  for (HostId p = 0; p < 3; ++p) {
    Pair pair;
    pair.prober = p;
    pair.peer = (p + 1) % 3;
    for (CableId c : {pair.prober, pair.peer}) {
      pair.path.push_back(link_of(c, false));  // up from the host
      pair.path.push_back(link_of(c, true));   // down to it
    }
    e.pairs.push_back(pair);
  }
  return e;
}

TEST(Explained, ACableExplainsThePairsCrossingIt) {
  Evidence e = three_hosts();
  Suspect cable;
  cable.kind = Kind::cable;
  cable.cable = 1;  // h1's
  std::set<Culprit> named{culprit_of(e, cable)};
  EXPECT_EQ(explained_pairs(e, named), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(explained_pairs(e, {}), (std::vector<bool>{false, false, false}));
}

TEST(Explained, AHostExplainsItsPairsBothWays) {
  Evidence e = three_hosts();
  Suspect host;
  host.kind = Kind::responder;  // any role: the whole host
  host.host = 2;
  EXPECT_EQ(explained_pairs(e, {culprit_of(e, host)}), (std::vector<bool>{false, true, true}));
}

TEST(Explained, ACongestedPortExplainsOnlyWhatItSends) {
  Evidence e = three_hosts();
  e.pairs[0].path = {link_of(0, false)};  // h0 -> h1 crosses h0's cable up only
  e.pairs[2].path = {link_of(0, true)};   // h2 -> h0 crosses it down only
  Suspect leaf_port;                      // the leaf's port sending down to h0
  leaf_port.kind = Kind::congestion;
  leaf_port.cable = 0;
  leaf_port.a_to_b = true;
  EXPECT_EQ(explained_pairs(e, {culprit_of(e, leaf_port)}),
            (std::vector<bool>{false, false, true}));
}

TEST(Explained, CulpritsAreMatchedByValueAcrossEvaluations) {
  // A later evaluation's evidence numbers its cables and hosts otherwise: the same cable and
  // host still explain the same pairs.
  Evidence first = three_hosts();
  Suspect cable;
  cable.kind = Kind::cable;
  cable.cable = 1;
  Culprit named = culprit_of(first, cable);
  Evidence later = three_hosts();
  std::swap(later.cables[0], later.cables[1]);
  for (auto& pair : later.pairs) {
    for (auto& l : pair.path) {
      CableId c = cable_of(l) == 0 ? 1 : cable_of(l) == 1 ? 0 : cable_of(l);
      l = link_of(c, a_to_b(l));
    }
  }
  EXPECT_EQ(explained_pairs(later, {named}), (std::vector<bool>{true, true, false}));
}

}  // namespace
}  // namespace ibfabric::localize
