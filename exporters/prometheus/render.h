#pragma once
// Renders the exposition text of a scrape: every collector's latest snapshot plus the live
// self-metrics (process, build info, MAD engine counters) that cost no I/O to read.

#include "collectors/metrics.h"

#include <functional>
#include <string>
#include <vector>

namespace ibfabric {

class SnapshotStore;

// Fills live self-metrics at scrape time. Must be cheap and must not block.
using LiveMetrics = std::function<void(MetricsBuilder&)>;

std::string render_text(const std::vector<SnapshotPtr>& snapshots,
                        const std::vector<LiveMetrics>& live);

// The standard process_* metrics of this process, read from /proc/self.
void add_process_metrics(MetricsBuilder& out);
// ibfabric_build_info.
void add_build_info(MetricsBuilder& out);

}  // namespace ibfabric
