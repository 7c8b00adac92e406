#include "collectors/fabric/fabric_model.h"

#include "core/stable_hash.h"

#include <algorithm>
#include <bit>
#include <set>
#include <stdexcept>
#include <string>

namespace ibfabric::fabric {

std::uint64_t stable_guid_hash(std::uint64_t guid) {
  char octets[8];
  for (int i = 0; i < 8; ++i) octets[i] = static_cast<char>((guid >> (56 - 8 * i)) & 0xff);
  return fnv1a(std::string_view(octets, sizeof octets));
}

bool in_shard(std::uint64_t guid, int shard, int shards) {
  if (shards <= 1) return true;
  return stable_guid_hash(guid) % static_cast<std::uint64_t>(shards) ==
         static_cast<std::uint64_t>(shard);
}

bool Topology::add_node(std::uint64_t guid, int type, int num_ports,
                        std::vector<std::uint8_t> route) {
  auto [it, inserted] = nodes_.try_emplace(guid);
  if (!inserted) return false;
  it->second.guid = guid;
  it->second.type = type;
  it->second.num_ports = num_ports;
  it->second.route = std::move(route);
  if (type == IB_NODE_SWITCH) it->second.port_info.resize(static_cast<std::size_t>(num_ports));
  it->second.links.resize(static_cast<std::size_t>(std::clamp(num_ports, 0, 255)));
  return true;
}

void Topology::add_link(std::uint64_t guid, int port, std::uint64_t remote_guid, int remote_port) {
  set_link(guid, port, Link{remote_guid, remote_port});
}

void Topology::set_link(std::uint64_t guid, int port, const Link& link) {
  auto it = nodes_.find(guid);
  if (it == nodes_.end()) {
    throw std::logic_error("a cable of node " + std::to_string(guid) + ", which was not added");
  }
  if (port < 1 || port > 255) return;  // no port number a MAD can carry
  auto& links = it->second.links;
  // A port past the node's NumPorts (an answer that contradicts it) is kept all the same.
  if (static_cast<std::size_t>(port) > links.size()) links.resize(static_cast<std::size_t>(port));
  links[static_cast<std::size_t>(port - 1)] = link;
}

const Link* Topology::link(std::uint64_t guid, int port) const {
  const Node* node = find(guid);
  if (!node || port < 1 || static_cast<std::size_t>(port) > node->links.size()) return nullptr;
  const Link& l = node->links[static_cast<std::size_t>(port - 1)];
  return l.remote_guid ? &l : nullptr;
}

std::size_t Topology::link_count() const {
  std::size_t n = 0;
  for_each_link([&](std::uint64_t, int, const Link&) { ++n; });
  return n;
}

Node* Topology::find(std::uint64_t guid) {
  auto it = nodes_.find(guid);
  return it == nodes_.end() ? nullptr : &it->second;
}

const Node* Topology::find(std::uint64_t guid) const {
  auto it = nodes_.find(guid);
  return it == nodes_.end() ? nullptr : &it->second;
}

std::size_t Topology::cable_count() const {
  std::size_t n = 0;
  for_each_link([&](std::uint64_t guid, int port, const Link& link) {
    const Link* back = this->link(link.remote_guid, link.remote_port);
    bool seen_from_other_side = back && back->remote_guid == guid && back->remote_port == port;
    // A cable seen from both ends is counted at its smaller end only.
    if (!seen_from_other_side ||
        std::pair(guid, port) < std::pair(link.remote_guid, link.remote_port))
      ++n;
  });
  return n;
}

void Topology::fill_unanswered(const Topology& previous) {
  if (!subnet_prefix) subnet_prefix = previous.subnet_prefix;
  if (!sm_lid) sm_lid = previous.sm_lid;
  for (auto& [guid, node] : nodes_) {
    const Node* old = previous.find(guid);
    if (!old || old->type != node.type) continue;
    if (!node.description_read && old->description_read) {
      node.description = old->description;
      node.description_read = true;
    }
    if (!node.port0_capability_mask && old->port0_capability_mask) {
      node.lid = old->lid;
      node.port0_capability_mask = old->port0_capability_mask;
    }
  }
}

bool Topology::seen_not_up(std::uint64_t guid, int port) const {
  const Node* node = find(guid);
  if (!node || port < 1 || static_cast<std::size_t>(port) > node->port_info.size()) return false;
  const auto& pi = node->port_info[static_cast<std::size_t>(port - 1)];
  return pi && pi->phys_state != kPhysLinkUp;
}

void Topology::carry_missed(const Topology& previous,
                            const std::function<bool(std::uint64_t)>& recent) {
  std::set<std::uint64_t> missing;
  for (const auto& [guid, node] : previous.nodes()) {
    if (!nodes_.count(guid) && recent(guid)) missing.insert(guid);
  }
  auto present = [&](std::uint64_t guid) { return nodes_.count(guid) || missing.count(guid); };
  std::vector<std::pair<std::pair<std::uint64_t, int>, Link>> carried;
  previous.for_each_link([&](std::uint64_t guid, int port, const Link& link) {
    const std::pair<std::uint64_t, int> end{guid, port};
    if (this->link(guid, port)) return;
    std::pair<std::uint64_t, int> far{link.remote_guid, link.remote_port};
    if (!present(end.first) || !present(far.first)) return;
    if (seen_not_up(end.first, end.second) || seen_not_up(far.first, far.second)) return;
    // The far end's port is cabled to something else now.
    if (const Link* now = this->link(far.first, far.second);
        now && std::pair(now->remote_guid, now->remote_port) != end) {
      return;
    }
    carried.push_back({end, Link{link.remote_guid, link.remote_port, true}});
  });
  // A missing node with no cable kept is gone; drop the cables that led to it, until nothing
  // changes (a chain of missing nodes hanging off one another).
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = missing.begin(); it != missing.end();) {
      bool linked = std::any_of(carried.begin(), carried.end(), [&](const auto& entry) {
        return entry.first.first == *it || entry.second.remote_guid == *it;
      });
      if (linked) {
        ++it;
        continue;
      }
      it = missing.erase(it);
      changed = true;
    }
    std::erase_if(carried, [&](const auto& entry) {
      bool gone = !present(entry.first.first) || !present(entry.second.remote_guid);
      changed = changed || gone;
      return gone;
    });
  }
  for (auto guid : missing) {
    Node node = *previous.find(guid);
    node.carried = true;
    for (auto& pi : node.port_info) pi.reset();
    node.links.assign(node.links.size(), Link{});  // only its cables kept, below
    nodes_.emplace(guid, std::move(node));
  }
  for (const auto& [end, link] : carried) set_link(end.first, end.second, link);
}

void pack_octets(const std::uint8_t* data, std::size_t covered, std::vector<std::uint8_t>& out) {
  const std::size_t bitmap = out.size();
  out.resize(bitmap + (covered + 7) / 8, 0);
  for (std::size_t i = 0; i < covered; ++i) {
    if (data[i] == 0) continue;
    out[bitmap + i / 8] = static_cast<std::uint8_t>(out[bitmap + i / 8] | (1u << (i % 8)));
    out.push_back(data[i]);
  }
}

std::size_t packed_size(const std::uint8_t* packed, std::size_t covered) {
  std::size_t n = (covered + 7) / 8;
  for (std::size_t b = 0; b < (covered + 7) / 8; ++b) n += std::popcount(packed[b]);
  return n;
}

void unpack_octets(const std::uint8_t* packed, std::size_t covered, std::size_t size,
                   std::vector<std::uint8_t>& to) {
  to.assign(std::max(size, covered), 0);
  const std::uint8_t* value = packed + (covered + 7) / 8;
  for (std::size_t i = 0; i < covered; ++i) {
    if (packed[i / 8] & (1u << (i % 8))) to[i] = *value++;
  }
}

std::vector<const Node*> Topology::switches() const {
  std::vector<const Node*> out;
  for (const auto& [guid, node] : nodes_) {
    if (node.type == IB_NODE_SWITCH) out.push_back(&node);
  }
  return out;
}

std::size_t Topology::count(int type) const {
  std::size_t n = 0;
  for (const auto& [guid, node] : nodes_) n += node.type == type;
  return n;
}

}  // namespace ibfabric::fabric
