#include "core/snapshot_store.h"

#include <algorithm>

namespace ibfabric {

void SnapshotStore::publish(const std::string& collector, SnapshotPtr snapshot) {
  std::lock_guard lock(mutex_);
  published_.insert(collector);
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const auto& entry) { return entry.first == collector; });
  if (it == entries_.end()) {
    entries_.emplace_back(collector, std::move(snapshot));
  } else {
    it->second = std::move(snapshot);
  }
}

void SnapshotStore::remove(const std::string& collector) {
  std::lock_guard lock(mutex_);
  std::erase_if(entries_, [&](const auto& entry) { return entry.first == collector; });
}

std::vector<SnapshotPtr> SnapshotStore::all() const {
  std::lock_guard lock(mutex_);
  std::vector<SnapshotPtr> out;
  out.reserve(entries_.size());
  for (const auto& entry : entries_) out.push_back(entry.second);
  return out;
}

std::vector<std::pair<std::string, SnapshotPtr>> SnapshotStore::named() const {
  std::lock_guard lock(mutex_);
  return entries_;
}

}  // namespace ibfabric

namespace ibfabric {

bool SnapshotStore::published(const std::string& collector) const {
  std::lock_guard lock(mutex_);
  return published_.contains(collector);
}

}  // namespace ibfabric
