#pragma once
// Late probes and ports that wait: the congestion and late-host verdicts of localize()
// (docs/design.md, "Who is to blame"), as R-Pingmesh (SIGCOMM 2024) tells host delay from
// network delay. The loss verdicts are localizer.cpp's.

#include "localize/localizer.h"

#include <vector>

namespace ibfabric::localize {

// Whether a host's own daemon shows trouble: loop stalls, responder drops, local failures, or
// the daemon down. Evidence about the host, never network loss.
inline bool own_trouble(const Host& host, const Options& o) {
  return host.loop_stall_seconds >= o.stall_seconds || host.responder_dropped > 0 ||
         host.local_failures > 0 || host.daemon_down;
}

// Appends the congestion verdicts (a late pair crossing a congested sending port is that
// port's), then the late hosts (judged, when without trouble of their own, on the late probes
// no named congestion explains).
void late_verdicts(const Evidence& e, const Options& o, std::vector<Verdict>& out);

// One verdict per host: a host named for loss and for being late (a long stall does both) is
// one culprit.
void merge_host_verdicts(std::vector<Verdict>& out);

}  // namespace ibfabric::localize
