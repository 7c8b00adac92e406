#pragma once
// Renders the exposition of a scrape: every collector's latest snapshot plus the live
// self-metrics (process, build info, MAD engine counters) that cost no I/O to read. The
// Exporter serves it as text or gzip, filtered by node_exporter's `collect[]`/`exclude[]`
// parameters, as a stream: the body is produced a slice at a time while the socket takes it,
// so no scrape holds its whole text. A scrape holds the snapshots it started with, so it is one
// snapshot per collector however long the client takes. A large snapshot is compressed ahead
// of time off the loop (prepare()), so the first scrape after a sweep costs what the later ones
// do, and is then shown as that compressed text instead of its samples (docs/design.md, "The
// exposition").

#include "core/metrics.h"
#include "exporters/prometheus/scrape_request.h"

#include <boost/asio/thread_pool.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
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

// A body produced as it is sent.
class ScrapeBody {
 public:
  virtual ~ScrapeBody() = default;
  // Appends the next part of the body to `out` (tens of KiB at most; compressed when the
  // response is gzip). False, with nothing appended, once the body is complete.
  virtual bool next(std::string& out) = 0;
};

struct ScrapeResponse {
  unsigned status = 200;  // 400: `body` is a plain-text error message
  std::string body;       // the whole body when `stream` is null
  bool gzip = false;      // the body is gzip (Content-Encoding: gzip)
  std::unique_ptr<ScrapeBody> stream;
};

// The whole body of `response` (tests): `body`, or everything its stream produces.
std::string read_body(ScrapeResponse& response);

class Exporter {
 public:
  using NamedSnapshots = std::vector<std::pair<std::string, SnapshotPtr>>;
  Exporter();
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;
  // `collectors`: the enabled collectors' names (what collect[] may name). The live metrics
  // are read now; the snapshots are held by the stream until it ends.
  ScrapeResponse scrape(const ScrapeRequest& request, const NamedSnapshots& snapshots,
                        const std::vector<std::string>& collectors,
                        const std::vector<LiveMetrics>& live);

  // On the exporter's worker thread: makes of `snapshot` (to replace `name`'s in `current`)
  // the snapshot to show, whose large families are their text compressed (DeflatedText) and
  // whose other runs of families are compressed into the cache, then drops `snapshot` and calls
  // `done` with it there. `snapshot` is the exporter's alone: each large family's samples are
  // freed as soon as they are compressed. `live_names`: the live families' names (they decide
  // which families are the snapshot's alone, as in a scrape).
  void prepare(const NamedSnapshots& current, const std::string& name,
               std::shared_ptr<Snapshot> snapshot, std::vector<std::string> live_names,
               std::function<void(SnapshotPtr)> done);
  // After a prepared snapshot replaced the shown one: forgets the old one's gzip and hands
  // the freed heap back to the kernel, on the worker thread.
  void release_replaced();
  // Whether a snapshot is large enough to be prepared before it is shown.
  static bool worth_preparing(const Snapshot& snapshot);

  // Bytes of compressed text the cache holds (tests, debugging).
  std::size_t cached_bytes() const;

  struct Segment;  // the gzip of a run of one snapshot's families
  struct Cache;

 private:
  std::shared_ptr<Cache> cache_;
  boost::asio::thread_pool worker_{1};
};

}  // namespace ibfabric
