#pragma once
// The fabric as discovery sees it, and the pure logic of the `fabric` collector that needs no
// MAD: shard assignment and assembling nodes and links from directed-route answers.

#include "mad/attributes.h"

#include <infiniband/mad.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric::fabric {

constexpr int kMaxHops = 63;  // a directed route holds at most 64 port numbers, the first is 0

// PortInfo.PortPhysicalState LinkUp (libibmad has no name for it).
constexpr int kPhysLinkUp = 5;

// FNV-1a (core/stable_hash.h) over the GUID's 8 octets in network (big-endian) order,
// as the GUID appears on the wire, so that every host puts a switch in the same shard.
std::uint64_t stable_guid_hash(std::uint64_t guid);

// Whether the node with `guid` belongs to shard `shard` of `shards` (shards >= 1).
bool in_shard(std::uint64_t guid, int shard, int shards);

// The memory of last values keeps a counter attribute packed: of its first `covered` octets, a
// bitmap of those that are not zero, then those octets. Error counters are mostly zero and
// wide counters start with zero octets, so most of an attribute is not stored.
void pack_octets(const std::uint8_t* data, std::size_t covered, std::vector<std::uint8_t>& out);
// Octets a packing of `covered` octets takes, read from its bitmap.
std::size_t packed_size(const std::uint8_t* packed, std::size_t covered);
// `size` octets into `to`: the `covered` packed ones, then zeros.
void unpack_octets(const std::uint8_t* packed, std::size_t covered, std::size_t size,
                   std::vector<std::uint8_t>& to);

// What a port is cabled to.
struct Link {
  std::uint64_t remote_guid = 0;  // 0: no cable recorded (no node has GUID 0)
  int remote_port = 0;
  bool carried = false;  // not seen by this discovery, kept from an earlier one
};

struct Node {
  std::uint64_t guid = 0;
  int type = 0;  // IB_NODE_CA, IB_NODE_SWITCH or IB_NODE_ROUTER
  int num_ports = 0;
  std::uint32_t vendor_id = 0;  // NodeInfo VendorID and DeviceID (the PortXmitWait tick)
  std::uint32_t device_id = 0;
  std::string description;
  bool description_read = false;    // NodeDescription answered (else `description` is empty)
  std::vector<std::uint8_t> route;  // directed route the node was first reached by
  // Not found by the discovery that made this topology, kept from an earlier one
  // (Topology::carry_missed).
  bool carried = false;
  // Switches: from PortInfo of port 0 (only port 0 carries a switch's LID and CapabilityMask).
  std::uint16_t lid = 0;
  std::optional<std::uint32_t> port0_capability_mask;
  // Switches: PortInfo of ports 1..num_ports as discovery read it (index = port - 1). The sweep
  // right after a discovery uses these instead of asking again.
  std::vector<std::optional<mad::PortInfo>> port_info;
  // What each port is cabled to (index = port - 1). A vector a node instead of a map of every
  // cable end: 16 octets a port instead of about 64 (3.8 MB at 50,000 switch ports).
  std::vector<Link> links;
};

class Topology {
 public:
  // Adds a node reached by `route`; returns false (and changes nothing) when a node with that
  // GUID is known already, i.e. the route is a second way to a node seen before.
  bool add_node(std::uint64_t guid, int type, int num_ports, std::vector<std::uint8_t> route);

  // Records what port `port` (1 to 255) of `guid`, a node added before, is cabled to
  // (std::logic_error for a node not added). A later answer for the same port replaces an
  // earlier one.
  void add_link(std::uint64_t guid, int port, std::uint64_t remote_guid, int remote_port);

  Node* find(std::uint64_t guid);
  const Node* find(std::uint64_t guid) const;
  const std::map<std::uint64_t, Node>& nodes() const { return nodes_; }
  // The far end of port `port` of `guid`; nullptr where no cable is recorded.
  const Link* link(std::uint64_t guid, int port) const;
  // Every cable end recorded, sorted by GUID then port: each(guid, port, link).
  template <class Each>
  void for_each_link(Each&& each) const {
    for (const auto& [guid, node] : nodes_) {
      for (std::size_t i = 0; i < node.links.size(); ++i) {
        if (node.links[i].remote_guid) each(guid, static_cast<int>(i + 1), node.links[i]);
      }
    }
  }
  std::size_t link_count() const;  // cable ends recorded

  // Every switch-side link has a matching link recorded from the other side when both ends are
  // switches; a switch-CA link is recorded from the switch only. Counts each cable once.
  std::size_t cable_count() const;

  // What a query lost in this discovery left unknown about a node it did find (its
  // NodeDescription; a switch's port 0 LID and CapabilityMask) is taken from `previous`, so
  // that a lost MAD changes no name and no LID.
  void fill_unanswered(const Topology& previous);

  // For a discovery in which queries were lost: the nodes and cables of `previous` that it did
  // not find are kept (marked `carried`) unless something says they are gone. A cable is kept
  // when neither end's port was read in this discovery with a physical state other than LinkUp
  // and neither end is now cabled elsewhere; a node is kept when `recent(guid)` (it answered
  // recently) and at least one of its cables is kept. Carried switches keep their LID but no
  // PortInfo (the sweep reads it).
  void carry_missed(const Topology& previous, const std::function<bool(std::uint64_t)>& recent);

  std::vector<const Node*> switches() const;
  std::size_t count(int type) const;

  // GID prefix of the local port discovery left through (its PortInfo); 0 when not read.
  std::uint64_t subnet_prefix = 0;
  // That port's MasterSMLID: where the subnet administrator (SA) answers, whose PortInfoRecord
  // table a steady sweep reads instead of a PortInfo SMP per port; 0 when not read.
  std::uint16_t sm_lid = 0;

 private:
  // Whether this discovery read port `port` of `guid` and found its link not up.
  bool seen_not_up(std::uint64_t guid, int port) const;
  void set_link(std::uint64_t guid, int port, const Link& link);

  std::map<std::uint64_t, Node> nodes_;
};

}  // namespace ibfabric::fabric
