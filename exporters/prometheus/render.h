#pragma once
// Renders the exposition of a scrape: every collector's latest snapshot plus the live
// self-metrics (process, build info, MAD engine counters) that cost no I/O to read. The
// Exporter serves it as text or gzip, filtered by node_exporter's `collect[]`/`exclude[]`
// parameters, and caches what it derives from a snapshot until the snapshot is replaced.

#include "collectors/metrics.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ibfabric {

// Fills live self-metrics at scrape time. Must be cheap and must not block.
using LiveMetrics = std::function<void(MetricsBuilder&)>;

// The whole exposition as text, nothing cached (--once, tests).
std::string render_text(const std::vector<SnapshotPtr>& snapshots,
                        const std::vector<LiveMetrics>& live);

// The standard process_* metrics of this process, read from /proc/self.
void add_process_metrics(MetricsBuilder& out);
// ibfabric_build_info.
void add_build_info(MetricsBuilder& out);

// True when an Accept-Encoding header value accepts gzip (RFC 9110: `gzip` or `*` with a
// q-value above 0, `identity;q=0` alone does not force it).
bool accepts_gzip(std::string_view accept_encoding);

struct ScrapeRequest {
  std::string_view query;            // the target after '?', undecoded
  std::string_view accept_encoding;  // the header's value, empty when absent
};

struct ScrapeResponse {
  unsigned status = 200;  // 400: `body` is a plain-text error message
  std::string body;
  bool gzip = false;  // body is gzip (Content-Encoding: gzip)
};

class Exporter {
 public:
  using NamedSnapshots = std::vector<std::pair<std::string, SnapshotPtr>>;
  Exporter();
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;
  // `collectors`: the enabled collectors' names (what collect[] may name).
  ScrapeResponse scrape(const ScrapeRequest& request, const NamedSnapshots& snapshots,
                        const std::vector<std::string>& collectors,
                        const std::vector<LiveMetrics>& live);

  // Bytes of compressed and rendered text the cache holds (tests, debugging).
  std::size_t cached_bytes() const;

  struct Segment;  // a run of one snapshot's families and what was derived from it

 private:
  std::vector<Segment> cache_;
};

// The parameters node_exporter takes: `collect[]=NAME` (only these) and `exclude[]=NAME`
// (all but these), repeated. Returns an error message for a malformed or contradictory query.
struct CollectorFilter {
  std::vector<std::string> collect;
  std::vector<std::string> exclude;
};
std::string parse_collector_filter(std::string_view query, CollectorFilter& out);

}  // namespace ibfabric
