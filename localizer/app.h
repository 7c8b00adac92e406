#pragma once
// ibfabric-localize: the localizer as a service, one or two per cluster (docs/design.md, "Who is
// to blame"). Every evaluation interval it reads the evidence from a Prometheus-compatible query
// API (query/evidence_reader.h), runs the attribution (localize/) and publishes its verdicts and
// its own health as one snapshot, which its /metrics serves. The HTTP endpoint runs on the main
// io_context; reading and attribution on an io_context of their own, so a large result or a slow
// store never holds a scrape.

#include "localizer/flags.h"

namespace ibfabric::localizer {

int run(const Flags& options);

}  // namespace ibfabric::localizer
