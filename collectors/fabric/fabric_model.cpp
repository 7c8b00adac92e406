#include "collectors/fabric/fabric_model.h"

#include "collectors/stable_hash.h"

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
  return true;
}

void Topology::add_link(std::uint64_t guid, int port, std::uint64_t remote_guid, int remote_port) {
  links_[{guid, port}] = Link{remote_guid, remote_port};
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
  for (const auto& [end, link] : links_) {
    auto back = links_.find({link.remote_guid, link.remote_port});
    bool seen_from_other_side = back != links_.end() && back->second.remote_guid == end.first &&
                                back->second.remote_port == end.second;
    // A cable seen from both ends is counted at its smaller end only.
    if (!seen_from_other_side || end < back->first) ++n;
  }
  return n;
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
