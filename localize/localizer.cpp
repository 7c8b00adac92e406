#include "localize/localizer.h"

#include "localize/late.h"
#include "localize/likelihood.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

// The method (docs/design.md, "Who is to blame"), in the order it runs:
//  1. Candidates: every cable direction a traced pair crosses, and every host as a whole, as
//     responder (the pairs probing it) and as prober (its own pairs).
//  2. Loss, greedily, as 007 and NetBouncer do: the candidate whose pairs' loss it explains
//     best (log-likelihood gain of its pairs losing at its own pooled rate) is taken first,
//     if no pair of it lost significantly less than its rate says (a one-sided binomial
//     deviance, alone and all together), its loss is more than what the culprits taken before
//     already explain (significance against their refitted rates), and it explains enough.
//     Its pairs' loss is then explained away, and the next is looked for in what is left.
//     Candidates over the same lossy pairs, as likely, are one verdict: the probes cannot tell
//     them apart; evidence of their own (counters at a cable's ends, a host's own trouble)
//     decides between them where some have it.
//  3. Late: a pair's late probes are its slower host's; a host is late when most of its
//     pairs are, and far more than the rest of the fabric. Late pairs crossing a congested
//     port are the port's; a late host whose lateness the congestion explains, and that has
//     no trouble of its own, is no culprit.
// A daemon's own failures never enter the loss: they are its host's evidence.

namespace ibfabric::localize {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::cable:
      return "cable";
    case Kind::host:
      return "host";
    case Kind::responder:
      return "responder";
    case Kind::prober:
      return "prober";
    case Kind::congestion:
      return "congestion";
  }
  return "?";
}

namespace {

// The loss a clean fabric is held to (what a named culprit's loss must be significantly above):
// 1 probe in 10,000.
constexpr double kBackground = 1e-4;

// Candidate ids: cable directions first (LinkId), then 3 per host.
enum HostRole : std::uint32_t { kWhole = 0, kResponder = 1, kProber = 2 };

struct Csr {
  std::vector<std::uint32_t> start;  // size n + 1
  std::vector<std::uint32_t> items;
  std::size_t size(std::uint32_t i) const { return start[i + 1] - start[i]; }
  const std::uint32_t* begin(std::uint32_t i) const { return items.data() + start[i]; }
  const std::uint32_t* end(std::uint32_t i) const { return items.data() + start[i + 1]; }
};

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class Run {
 public:
  Run(const Evidence& e, const Options& o) : e_(e), o_(o) {
    links_ = static_cast<std::uint32_t>(e.cables.size() * 2);
    candidates_ = links_ + static_cast<std::uint32_t>(e.hosts.size() * 3);
    build_index();
    index_counted_cables();
  }

  std::vector<Verdict> run() {
    std::vector<Verdict> out;
    loss(out);
    late_verdicts(e_, o_, out);
    merge_host_verdicts(out);
    for (auto& v : out) mark_lacking(v);
    return out;
  }

 private:
  void mark_lacking(Verdict& v) const {
    const Lacking& l = e_.lacking;
    bool host =
        v.suspects.front().kind != Kind::cable && v.suspects.front().kind != Kind::congestion;
    bool loss = v.cause.find("loss") != std::string::npos;
    bool late = v.cause != "loss";
    std::vector<const char*> lacking;
    if (loss && l.counters) lacking.push_back("counters");
    if (host && l.daemons) lacking.push_back("daemons");
    if (late && l.congestion) lacking.push_back("congestion");
    for (const char* what : lacking) v.lacking += std::string(v.lacking.empty() ? "" : ", ") + what;
    v.withheld = host && v.cause == "late" && l.congestion;
  }

  std::uint32_t host_candidate(HostId h, HostRole role) const { return links_ + h * 3 + role; }
  bool is_link(std::uint32_t c) const { return c < links_; }
  HostId host_of(std::uint32_t c) const { return (c - links_) / 3; }
  HostRole role_of(std::uint32_t c) const { return HostRole((c - links_) % 3); }

  void build_index() {
    const auto& pairs = e_.pairs;
    std::vector<std::uint32_t> count(candidates_ + 1, 0);
    // Loss evidence needs a traced path: without one the pair's cables are not known, and a
    // host would answer for them.
    traced_.assign(pairs.size(), false);
    for (std::uint32_t p = 0; p < pairs.size(); ++p) {
      traced_[p] = !pairs[p].path.empty() && pairs[p].sent > 0;
      if (traced_[p]) for_candidates(p, [&](std::uint32_t c) { ++count[c + 1]; });
    }
    std::partial_sum(count.begin(), count.end(), count.begin());
    pairs_of_.start = count;
    pairs_of_.items.resize(count.back());
    std::vector<std::uint32_t> fill(count.begin(), count.end() - 1);
    for (std::uint32_t p = 0; p < pairs.size(); ++p) {
      if (traced_[p]) for_candidates(p, [&](std::uint32_t c) { pairs_of_.items[fill[c]++] = p; });
    }
  }

  // --- evidence of their own ---------------------------------------------------------------

  bool counted(const PortRef& port) const {
    auto it = e_.counters.find(port);
    return it != e_.counters.end() && (it->second.errors > 0 || it->second.discards > 0);
  }
  bool cable_counted(CableId c) const { return counted(e_.cables[c].a) || counted(e_.cables[c].b); }
  bool host_trouble_own(HostId h) const { return own_trouble(e_.hosts[h], o_); }
  // A host's own cables (one end is the host) that count errors or discards.
  bool host_cable_counted(HostId h) const { return host_cable_counted_[h]; }

  // Which cables are a host's own (one end is the host), and which hosts' count errors or
  // discards, at either end: once per evaluation, by GUID.
  void index_counted_cables() {
    std::unordered_map<std::uint64_t, HostId> by_guid;
    for (HostId h = 0; h < e_.hosts.size(); ++h) by_guid.emplace(e_.hosts[h].guid, h);
    host_cable_counted_.assign(e_.hosts.size(), false);
    host_cable_.assign(e_.cables.size(), false);
    for (CableId c = 0; c < e_.cables.size(); ++c) {
      host_cable_[c] = by_guid.count(e_.cables[c].a.guid) || by_guid.count(e_.cables[c].b.guid);
    }
    auto mark = [&](std::uint64_t guid) {
      auto it = by_guid.find(guid);
      if (it != by_guid.end()) host_cable_counted_[it->second] = true;
    };
    for (const auto& [port, counters] : e_.counters) {
      if (counters.errors > 0 || counters.discards > 0) mark(port.guid);
    }
    for (const Cable& cable : e_.cables) {
      if (counted(cable.b)) mark(cable.a.guid);
      if (counted(cable.a)) mark(cable.b.guid);
    }
  }

  // --- loss ----------------------------------------------------------------------------------

  struct Score {
    double sent = 0, lost = 0, rate = 0, gain = 0;
    std::uint32_t lossy = 0;
    std::uint64_t set_hash = 0;  // of its lossy pairs: equal sets, equal hashes
  };

  // Residual sent and lost of every pair given the named culprits' rates (what they would
  // have let through, and what of its loss they do not explain).
  void residuals() {
    const auto& pairs = e_.pairs;
    kept_.assign(pairs.size(), 1.0);
    for (const auto& [c, r] : named_rate_) {
      for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) kept_[*p] *= 1 - r;
    }
    res_sent_.resize(pairs.size());
    res_lost_.resize(pairs.size());
    for (std::uint32_t p = 0; p < pairs.size(); ++p) {
      double s = pairs[p].sent, l = pairs[p].lost;
      res_sent_[p] = s * kept_[p];
      res_lost_[p] = std::max(0.0, l - s * (1 - kept_[p]));
    }
  }

  // Refits the named culprits' rates together: each one's rate is its pairs' loss that the
  // others do not explain, over what the others let through.
  void refit() {
    for (int iteration = 0; iteration < 4; ++iteration) {
      for (auto& [c, r] : named_rate_) {
        double s = 0, l = 0;
        for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) {
          double others = kept_[*p] / (1 - r);  // what the other culprits let through
          const Pair& pair = e_.pairs[*p];
          s += pair.sent * others;
          l += std::max(0.0, pair.lost - pair.sent * (1 - others));
        }
        double fresh = s > 0 ? std::min(l / s, 0.999) : r;
        // kept_ follows the new rate.
        for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) {
          kept_[*p] = kept_[*p] / (1 - r) * (1 - fresh);
        }
        r = fresh;
      }
    }
  }

  // A pair that lost significantly more than `rate`: it crosses another fault too, whose loss
  // adds to the candidate's own. Such pairs count neither for its rate nor for its fit.
  bool excess(std::uint32_t p, double rate) const {
    double e = res_sent_[p] * rate;
    return res_lost_[p] > e && excess_deviance(res_lost_[p], res_sent_[p], e) > one_;
  }

  // Its own rate: pooled over its pairs but those that lost significantly more (a median would
  // instead let clean pairs hide a candidate that most of its pairs contradict).
  double own_rate(std::uint32_t c) const {
    double s = 0, l = 0;
    for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) {
      s += res_sent_[*p];
      l += res_lost_[*p];
    }
    double rate = s > 0 ? l / s : 0;
    for (int iteration = 0; iteration < 4; ++iteration) {
      s = l = 0;
      for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) {
        if (excess(*p, rate)) continue;
        s += res_sent_[*p];
        l += res_lost_[*p];
      }
      double next = s > 0 ? l / s : rate;
      if (std::abs(next - rate) < 1e-9) break;
      rate = next;
    }
    return rate;
  }

  // The pairs with loss left to explain that it keeps at `rate` (sorted).
  std::vector<std::uint32_t> lossy_set(std::uint32_t c, double rate) const {
    std::vector<std::uint32_t> out;
    for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) {
      if (res_lost_[*p] > 0.5 && !excess(*p, rate)) out.push_back(*p);
    }
    return out;
  }

  // Its rate, and what it explains at that rate: the pairs it keeps (not in excess), their
  // loss, the set of those that lost (for telling candidates apart), its fit.
  // `aside`: pairs left out of all but its rate.
  Score score(std::uint32_t c, const std::vector<std::uint32_t>& aside = {}) const {
    Score s;
    s.rate = own_rate(c);
    for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) {
      if (excess(*p, s.rate) || std::binary_search(aside.begin(), aside.end(), *p)) continue;
      s.sent += res_sent_[*p];
      s.lost += res_lost_[*p];
      if (res_lost_[*p] > 0.5) {
        ++s.lossy;
        s.set_hash += mix(*p);
      }
      s.gain += pair_gain(*p, s.rate);
    }
    return s;
  }

  // How much likelier pair p's loss is with a candidate dropping at `rate` than without, beside
  // what the culprits named before let through (a pair they explain adds little).
  double pair_gain(std::uint32_t p, double rate) const {
    const Pair& pair = e_.pairs[p];
    const double through = kept_[p] * (1 - background_);
    return loglik(pair.lost, pair.sent, 1 - through * (1 - rate)) -
           loglik(pair.lost, pair.sent, 1 - through);
  }

  // Whether its pairs lost too little for it to drop at `rate`: all its pairs together
  // (Fisher's method over their exact lower tails, at contradiction_p: pairs of a few probes
  // each weigh what they can; a pair that lost more than its share adds next to nothing), or
  // one pair alone whose loss is far less likely (the square of contradiction_p over the
  // candidate's pairs: the one-in-a-million pair of a true fault among the thousands a large
  // fabric shows must not throw it out, and the host cables under it named instead). Pairs in
  // excess (another fault's too) are left out, as from its rate.
  bool contradicted(std::uint32_t c, double rate) const {
    double fisher = 0;
    int n = 0;
    double log_alpha =
        std::log(o_.contradiction_p * o_.contradiction_p / static_cast<double>(pairs_of_.size(c)));
    for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) {
      // A pair a named culprit crosses cannot speak against it: that culprit's rate was fitted
      // with the pair's whole loss, this candidate's share included.
      if (excess(*p, rate) || kept_[*p] < 1) continue;
      ++n;
      if (res_lost_[*p] >= res_sent_[*p] * rate) continue;  // its lower tail is over one half
      double log_p = log_binomial_le(res_lost_[*p], res_sent_[*p], rate);
      if (log_p < log_alpha) return true;
      fisher += -2 * log_p;
    }
    return n > 1 && fisher > chi2_quantile(2 * n, z_);
  }

  void loss(std::vector<Verdict>& out) {
    const auto& pairs = e_.pairs;
    z_ = z_of(o_.contradiction_p);
    one_ = z_ * z_;

    std::vector<std::uint32_t> stamp(candidates_, 0);
    std::uint32_t round = 0;
    residuals();
    for (int iteration = 0; iteration < 256; ++iteration) {
      ++round;
      // Candidates of the pairs with loss left to explain.
      std::vector<std::uint32_t> live;
      for (std::uint32_t p = 0; p < pairs.size(); ++p) {
        if (!traced_[p] || res_lost_[p] <= 0.5) continue;
        for_candidates(p, [&](std::uint32_t c) {
          if (stamp[c] != round) {
            stamp[c] = round;
            live.push_back(c);
          }
        });
      }
      if (live.empty()) break;
      std::sort(live.begin(), live.end());
      // Every one that could be named, scored.
      struct Fit {
        std::uint32_t c;
        Score s;
      };
      std::vector<Fit> fits;
      for (std::uint32_t c : live) {
        if (named_rate_.count(c) || spent_.count(c)) continue;
        // A host with no trouble of its own whose cable counts errors is no culprit: what is
        // lost on its way in and out is the cable's, whichever role the probes point at.
        if (excused(c)) continue;
        Score s = score(c);
        if (nameable(c, s)) fits.push_back({c, s});
      }
      if (fits.empty()) break;
      // The best that may stand for a fault: a cable, or a host whose own daemon shows trouble.
      // A host without is never named alone for loss: what its pairs lose without its daemon
      // knowing is lost on its cable, or a chance run of a few probes that its handful of pairs
      // fits better than the fault they cross (it can still be named beside one, below).
      auto may_stand = [&](const Fit& f) { return is_link(f.c) || host_trouble_own(host_of(f.c)); };
      const Fit* best = nullptr;
      for (const auto& f : fits) {
        if (may_stand(f) && (!best || f.s.gain > best->s.gain + 1e-9)) best = &f;
      }
      if (!best) break;

      // Equally suspect: as likely (within equal_fit of the best) over the same lossy pairs or
      // more, or a part of them with evidence of its own (a host's cable whose end counts
      // errors, and the downlink all its pairs take with a few of another fault's): the probes
      // cannot tell them apart.
      const auto best_set = lossy_set(best->c, best->s.rate);
      // The best's lossy pairs that a fault elsewhere crosses too: a candidate with evidence
      // of its own that loses at least min_lost on pairs the best does not carry.
      std::vector<std::uint32_t> elsewhere;
      for (const auto& f : fits) {
        if (&f == best || !own_evidence(f.c)) continue;
        const auto set = lossy_set(f.c, f.s.rate);
        double outside = 0;
        for (std::uint32_t p : set) {
          if (!std::binary_search(best_set.begin(), best_set.end(), p)) outside += res_lost_[p];
        }
        if (outside < o_.min_lost) continue;
        std::set_intersection(set.begin(), set.end(), best_set.begin(), best_set.end(),
                              std::back_inserter(elsewhere));
      }
      std::sort(elsewhere.begin(), elsewhere.end());
      elsewhere.erase(std::unique(elsewhere.begin(), elsewhere.end()), elsewhere.end());
      // The best with those aside: a candidate with evidence of its own that carries the rest
      // as well is as suspect (what sets them apart is the other fault's loss).
      std::vector<std::uint32_t> best_rest;
      std::set_difference(best_set.begin(), best_set.end(), elsewhere.begin(), elsewhere.end(),
                          std::back_inserter(best_rest));
      const double best_rest_gain =
          elsewhere.empty() ? best->s.gain : score(best->c, elsewhere).gain;
      std::vector<const Fit*> group;
      for (const auto& f : fits) {
        if (&f != best) {
          const auto set = lossy_set(f.c, f.s.rate);
          // A part of them only with evidence of its own (it can then be what the rest is
          // not); without, it explains less and is no look-alike.
          bool more = std::includes(set.begin(), set.end(), best_set.begin(), best_set.end());
          bool part = std::includes(best_set.begin(), best_set.end(), set.begin(), set.end());
          bool alike =
              f.s.gain >= best->s.gain - o_.equal_fit && (more || (part && own_evidence(f.c)));
          // Evidence of its own is worth what a fit does not weigh: one with it that crosses all
          // the best's lossy pairs (whether it keeps them at its rate or not) is as suspect as
          // a best without, within evidence_weight more.
          bool alike_evidence = own_evidence(f.c) && !own_evidence(best->c) &&
                                f.s.gain >= best->s.gain - o_.equal_fit - o_.evidence_weight &&
                                std::includes(pairs_of_.begin(f.c), pairs_of_.end(f.c),
                                              best_set.begin(), best_set.end());
          bool alike_aside =
              !elsewhere.empty() && !best_rest.empty() && own_evidence(f.c) &&
              f.s.gain >= best_rest_gain - o_.equal_fit &&
              std::includes(set.begin(), set.end(), best_rest.begin(), best_rest.end());
          if (!alike && !alike_evidence && !alike_aside) continue;
        }
        group.push_back(&f);
      }
      // Evidence of their own decides between them, where some have it; the one that stays and
      // fits best stands for the fault (its rate explains the loss away).
      std::vector<const Fit*> kept;
      bool any_evidence =
          std::any_of(group.begin(), group.end(), [&](const Fit* f) { return own_evidence(f->c); });
      for (const Fit* f : group) {
        if (!any_evidence || own_evidence(f->c)) kept.push_back(f);
      }
      // (kept holds one that may stand: the best, or, where evidence decided, those with it.)
      const Fit* culprit = nullptr;
      for (const Fit* f : kept) {
        if (may_stand(*f) && (!culprit || f->s.gain > culprit->s.gain + 1e-9)) culprit = f;
      }
      std::vector<std::uint32_t> members;
      for (const Fit* f : kept) members.push_back(f->c);
      std::sort(members.begin(), members.end());
      const auto lossy_pairs = lossy_set(culprit->c, culprit->s.rate);
      const bool settled =
          any_evidence || (is_link(culprit->c) && decisive(culprit->c, lossy_pairs));
      named_rate_[culprit->c] = culprit->s.rate;
      for (const Fit* f : group) spent_.insert(f->c);
      residuals();
      refit();
      emit_loss(out, members, culprit->c, any_evidence, settled, lossy_pairs);
      residuals();
    }
    prune(out);
    // Each loss verdict's rate as refitted with all the others.
    for (std::size_t v = 0; v < out.size(); ++v) out[v].rate = named_rate_[loss_culprits_[v]];
  }

  // Whether what it explains (`s`, beside the culprits named) makes it a culprit.
  bool nameable(std::uint32_t c, const Score& s) const {
    if (s.lost < o_.min_lost || s.rate <= o_.min_loss_rate) return false;
    double hosts_loss = own_evidence(c) ? 0 : one_hosts_loss(c, s.rate, s.lost);
    if (hosts_loss > 0 && hosts_loss < o_.min_lost_host) return false;
    // Significant beyond what is named: its fit is a likelihood ratio against "not it", over
    // the pairs it keeps, beside the named culprits' loss.
    return s.gain >= o_.min_gain && !contradicted(c, s.rate);
  }

  // Greedy naming takes first what fits best at the time: a host whose few pairs happen to
  // carry much of a fault's loss can come before the fault. Each culprit is asked again beside
  // all the others (their rates refitted without it); one that is no longer nameable goes.
  void prune(std::vector<Verdict>& out) {
    for (std::size_t v = 0; v < out.size();) {
      const std::uint32_t c = loss_culprits_[v];
      const double rate = named_rate_[c];
      named_rate_.erase(c);
      residuals();
      refit();
      residuals();
      if (nameable(c, score(c))) {
        named_rate_[c] = rate;
        ++v;
        continue;
      }
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(v));
      loss_culprits_.erase(loss_culprits_.begin() + static_cast<std::ptrdiff_t>(v));
    }
    residuals();
    refit();
  }

  // Every candidate of pair p, once each.
  template <class F>
  void for_candidates(std::uint32_t p, F&& f) const {
    const Pair& pair = e_.pairs[p];
    for (std::size_t i = 0; i < pair.path.size(); ++i) {
      LinkId l = pair.path[i];
      if (l >= links_ ||
          std::find(pair.path.begin(), pair.path.begin() + i, l) != pair.path.begin() + i) {
        continue;
      }
      f(l);
    }
    f(host_candidate(pair.prober, kWhole));
    if (pair.peer != pair.prober) f(host_candidate(pair.peer, kWhole));
    f(host_candidate(pair.peer, kResponder));
    f(host_candidate(pair.prober, kProber));
  }

  bool excused(std::uint32_t c) const {
    return !is_link(c) && !host_trouble_own(host_of(c)) && host_cable_counted(host_of(c));
  }

  // Of its loss (`lost`, at `rate`), the part that is one host's: all of it for a host or a
  // cable with a host at one end; for another cable, the loss of the pairs of the host its
  // lossy pairs share most where the others lost one probe at most (a stray loss beside one
  // host's pairs is no evidence of a fault elsewhere); nothing otherwise.
  double one_hosts_loss(std::uint32_t c, double rate, double lost) const {
    if (!is_link(c) || host_cable_[cable_of(c)]) return lost;
    std::unordered_map<HostId, double> by_host;
    double total = 0;
    for (std::uint32_t p : lossy_set(c, rate)) {
      const Pair& pair = e_.pairs[p];
      total += res_lost_[p];
      by_host[pair.prober] += res_lost_[p];
      if (pair.peer != pair.prober) by_host[pair.peer] += res_lost_[p];
    }
    double top = 0;
    for (const auto& [host, host_lost] : by_host) top = std::max(top, host_lost);
    double others = total - top;
    return others <= 1 ? lost - others : 0;
  }

  // Its fit over all its pairs at their pooled rate (none left out as in excess): the
  // log-likelihood ratio of it dropping at that rate against nothing, beside the culprits named.
  double fit_all(std::uint32_t c) const {
    double sent = 0, lost = 0;
    for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) {
      sent += res_sent_[*p];
      lost += res_lost_[*p];
    }
    const double rate = sent > 0 ? lost / sent : 0;
    double fit = 0;
    for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) fit += pair_gain(*p, rate);
    return fit;
  }

  // Whether every other component its lossy pairs cross fits worse by settle_margin: what
  // could still take its place (a look-alike whose counters arrive, its host's cable once the
  // pairs only that carries start to lose) is already ruled out by the probes.
  bool decisive(std::uint32_t c, const std::vector<std::uint32_t>& lossy_pairs) const {
    const double bar = fit_all(c) - o_.settle_margin;
    std::unordered_set<std::uint32_t> asked = {c};
    bool ruled_out = true;
    for (std::uint32_t p : lossy_pairs) {
      for_candidates(p, [&](std::uint32_t other) {
        if (ruled_out && asked.insert(other).second && fit_all(other) > bar) ruled_out = false;
      });
      if (!ruled_out) return false;
    }
    return true;
  }

  bool own_evidence(std::uint32_t c) const {
    return is_link(c) ? cable_counted(cable_of(c)) : host_trouble_own(host_of(c));
  }

  // One verdict: `kept` the suspects (candidate ids, sorted: cable directions first),
  // `primary` the one that stands for the fault.
  void emit_loss(std::vector<Verdict>& out, const std::vector<std::uint32_t>& kept,
                 std::uint32_t primary, bool any_evidence, bool settled,
                 const std::vector<std::uint32_t>& lossy_pairs) {
    Verdict v;
    v.cause = "loss";
    // Suspects: cables (directions merged) first, then hosts (roles merged: a whole host
    // over its roles).
    std::map<CableId, std::vector<bool>> cables;
    std::map<HostId, Kind> hosts;
    for (std::uint32_t c : kept) {
      if (is_link(c)) {
        auto& d = cables[cable_of(c)];
        d.resize(2, false);
        d[a_to_b(c) ? 0 : 1] = true;
      } else {
        Kind k = role_of(c) == kWhole       ? Kind::host
                 : role_of(c) == kResponder ? Kind::responder
                                            : Kind::prober;
        auto [it, fresh] = hosts.emplace(host_of(c), k);
        if (!fresh && it->second != k) it->second = Kind::host;
      }
    }
    for (auto& [cable, directions] : cables) {
      Suspect s;
      s.kind = Kind::cable;
      s.cable = cable;
      s.directions = directions;
      v.suspects.push_back(s);
    }
    for (auto& [host, kind] : hosts) {
      Suspect s;
      s.kind = kind;
      s.host = host;
      v.suspects.push_back(s);
    }
    // The one that stands for the fault first: the alert is named after it.
    auto first = std::find_if(v.suspects.begin(), v.suspects.end(), [&](const Suspect& s) {
      return is_link(primary) ? s.kind == Kind::cable && s.cable == cable_of(primary)
                              : s.kind != Kind::cable && s.host == host_of(primary);
    });
    std::rotate(v.suspects.begin(), first, first + 1);
    v.pairs = lossy_pairs;
    // Its probes: of the pairs crossing the first suspect (for a cable, its first direction
    // that loses). Its blast radius: the hosts whose probed paths cross it (a cable: either
    // way; replacing it stops both).
    for (auto* p = pairs_of_.begin(primary); p != pairs_of_.end(primary); ++p) {
      v.sent += e_.pairs[*p].sent;
      v.lost += e_.pairs[*p].lost;
      v.late += e_.pairs[*p].late;
    }
    std::vector<bool> seen(e_.hosts.size(), false);
    auto radius = [&](std::uint32_t c) {
      for (auto* p = pairs_of_.begin(c); p != pairs_of_.end(c); ++p) {
        for (HostId h : {e_.pairs[*p].prober, e_.pairs[*p].peer}) {
          if (!seen[h]) {
            seen[h] = true;
            v.blast_radius.push_back(h);
          }
        }
      }
    };
    if (is_link(primary)) {
      radius(link_of(cable_of(primary), true));
      radius(link_of(cable_of(primary), false));
    } else {
      radius(primary);
    }
    std::sort(v.blast_radius.begin(), v.blast_radius.end());
    std::size_t others = v.suspects.size() - 1;
    if (others == 0) {
      v.why = any_evidence
                  ? "its pairs lose and no clean pair crosses it; its own evidence confirms it"
                  : "its pairs lose and no clean pair crosses it";
    } else {
      v.why =
          "its pairs lose and no clean pair crosses it; the probes cannot tell it from the "
          "others named, which carry the same pairs";
    }
    v.settled = settled;
    loss_culprits_.push_back(primary);
    out.push_back(std::move(v));
  }

  const Evidence& e_;
  const Options& o_;
  std::uint32_t links_ = 0, candidates_ = 0;
  Csr pairs_of_;
  std::vector<bool> traced_, host_cable_counted_, host_cable_;
  std::vector<double> kept_, res_sent_, res_lost_;
  std::map<std::uint32_t, double> named_rate_;
  std::set<std::uint32_t> spent_;
  std::vector<std::uint32_t> loss_culprits_;  // of each loss verdict, in order
  double background_ = kBackground, z_ = 3, one_ = 9;
};

}  // namespace

std::vector<Verdict> localize(const Evidence& evidence, const Options& options) {
  return Run(evidence, options).run();
}

}  // namespace ibfabric::localize
