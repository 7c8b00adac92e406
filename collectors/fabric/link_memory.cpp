#include "collectors/fabric/link_memory.h"

#include <infiniband/mad.h>

#include <algorithm>
#include <iterator>

namespace ibfabric::fabric {

const std::string& LinkMemory::name(std::uint64_t guid) const {
  static const std::string none;
  auto it = std::lower_bound(names_.begin(), names_.end(), guid,
                             [](const auto& entry, std::uint64_t g) { return entry.first < g; });
  return it != names_.end() && it->first == guid ? it->second : none;
}

void LinkMemory::remember(const Topology& topology, const NodeNameMap& names, TimePoint now,
                          Duration keep) {
  // Merged with what is remembered, both sorted by switch end (as Topology::for_each_link gives
  // them): what was seen now replaces what was remembered of the same end.
  std::vector<RememberedLink> merged;
  merged.reserve(std::max(topology.link_count(), links_.size()));
  auto old = links_.begin();
  auto keep_older = [&](std::pair<std::uint64_t, int> before) {
    for (; old != links_.end() && old->end() < before; ++old) {
      if (now - old->seen <= keep) merged.push_back(*old);
    }
    if (old != links_.end() && old->end() == before) ++old;
  };
  std::vector<std::uint64_t> unknown;  // far ends this discovery did not find
  topology.for_each_link([&](std::uint64_t guid, int port, const Link& link) {
    // A cable this discovery did not see keeps the time it was last seen.
    if (link.carried) return;
    const Node* node = topology.find(guid);
    if (!node || node->type != IB_NODE_SWITCH) return;
    const Node* remote = topology.find(link.remote_guid);
    if (!remote) unknown.push_back(link.remote_guid);
    keep_older({guid, port});
    merged.push_back({guid, link.remote_guid, now, static_cast<std::uint8_t>(port),
                      static_cast<std::uint8_t>(link.remote_port),
                      static_cast<std::uint8_t>(remote ? remote->type : 0)});
  });
  keep_older({~std::uint64_t{0}, 256});
  // The names of this discovery: of every node it found, and of a far end it did not.
  std::vector<std::pair<std::uint64_t, std::string>> seen_names;
  seen_names.reserve(topology.nodes().size() + unknown.size());
  for (const auto& [guid, node] : topology.nodes()) {
    seen_names.emplace_back(guid, names.name(guid, node.description));
  }
  for (auto guid : unknown) seen_names.emplace_back(guid, names.name(guid, ""));
  replace(std::move(merged), std::move(seen_names));
}

std::size_t LinkMemory::restore(const std::vector<state::LinkRecord>& records,
                                const std::vector<TimePoint>& seen, TimePoint now, Duration keep) {
  std::vector<RememberedLink> restored;
  std::vector<std::pair<std::uint64_t, std::string>> restored_names;
  for (std::size_t i = 0; i < records.size() && i < seen.size(); ++i) {
    const auto& r = records[i];
    if (now - seen[i] > keep) continue;
    restored.push_back({r.guid, r.remote_guid, seen[i], static_cast<std::uint8_t>(r.port),
                        static_cast<std::uint8_t>(r.remote_port),
                        static_cast<std::uint8_t>(r.remote_type)});
    restored_names.emplace_back(r.guid, r.name);
    restored_names.emplace_back(r.remote_guid, r.remote_name);
  }
  // What is remembered already (discovery just saw it) is newer: its records and names stay.
  std::stable_sort(restored.begin(), restored.end(),
                   [](const auto& a, const auto& b) { return a.end() < b.end(); });
  std::vector<RememberedLink> merged;
  merged.reserve(links_.size() + restored.size());
  std::size_t added = 0;
  auto known = links_.begin();
  for (auto it = restored.begin(); it != restored.end(); ++it) {
    if (it != restored.begin() && std::prev(it)->end() == it->end()) continue;  // the first
    for (; known != links_.end() && known->end() < it->end(); ++known) merged.push_back(*known);
    if (known != links_.end() && known->end() == it->end()) continue;
    merged.push_back(*it);
    ++added;
  }
  merged.insert(merged.end(), known, links_.end());
  // The names known already first: they win.
  std::vector<std::pair<std::uint64_t, std::string>> names;
  names.swap(names_);
  names.insert(names.end(), std::make_move_iterator(restored_names.begin()),
               std::make_move_iterator(restored_names.end()));
  replace(std::move(merged), std::move(names));
  return added;
}

void LinkMemory::replace(std::vector<RememberedLink> links,
                         std::vector<std::pair<std::uint64_t, std::string>> names) {
  links_ = std::move(links);
  links_.shrink_to_fit();
  std::vector<std::uint64_t> named;
  named.reserve(2 * links_.size());
  for (const auto& link : links_) {
    named.push_back(link.guid);
    named.push_back(link.remote_guid);
  }
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  auto by_guid = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::stable_sort(names.begin(), names.end(), by_guid);
  std::vector<std::pair<std::uint64_t, std::string>> kept;
  kept.reserve(named.size());
  // `names` first, then names_: the first name of a GUID wins; only the GUIDs still named.
  auto a = names.begin();
  auto b = names_.begin();
  for (auto guid : named) {
    while (a != names.end() && a->first < guid) ++a;
    while (b != names_.end() && b->first < guid) ++b;
    if (a != names.end() && a->first == guid) {
      kept.push_back(std::move(*a));
    } else if (b != names_.end() && b->first == guid) {
      kept.push_back(std::move(*b));
    }
  }
  names_ = std::move(kept);
}

}  // namespace ibfabric::fabric
