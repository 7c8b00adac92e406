#pragma once
// The exporter's own series, read at scrape time: the standard process_* metrics of this process
// (from /proc/self, as the Prometheus client libraries name them) and ibfabric_build_info.

#include "core/metrics.h"

namespace ibfabric {

// The standard process_* metrics of this process, read from /proc/self.
void add_process_metrics(MetricsBuilder& out);
// ibfabric_build_info.
void add_build_info(MetricsBuilder& out);

}  // namespace ibfabric
