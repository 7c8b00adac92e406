#pragma once
// The latest snapshot of every collector. Collectors swap theirs in whole; a scrape copies the
// pointers and renders, so it never sees a half-written snapshot and never waits on a collector.

#include "core/metrics.h"

#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ibfabric {

class SnapshotStore {
 public:
  void publish(const std::string& collector, SnapshotPtr snapshot);
  void remove(const std::string& collector);
  // In the order collectors first published.
  std::vector<SnapshotPtr> all() const;
  // The same, with each collector's name (for collect[]).
  std::vector<std::pair<std::string, SnapshotPtr>> named() const;
  // Whether `collector` has published at least once since start (a later remove() does not
  // undo it: a reload that rebuilds a collector does not make the daemon unready).
  bool published(const std::string& collector) const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, SnapshotPtr>> entries_;
  std::set<std::string> published_;
};

}  // namespace ibfabric
