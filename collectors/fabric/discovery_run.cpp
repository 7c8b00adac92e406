#include "collectors/fabric/discovery_run.h"

#include <utility>

namespace ibfabric::fabric {
namespace {

std::string route_string(const std::vector<std::uint8_t>& route) {
  std::string s = "0";
  for (auto p : route) s += "," + std::to_string(p);
  return s;
}

}  // namespace

DiscoveryRun::DiscoveryRun(FabricState& kept, Finished finished)
    : FanOut(kept.mad), kept_(kept), finished_(std::move(finished)) {}

void DiscoveryRun::start() {
  launch([this] { node_info({}, 0, 0); });
}

void DiscoveryRun::ask(const char* attribute, const std::string& subject, mad::Request req,
                       std::function<void(const mad::Response&)> on_ok) {
  auto min_size = mad::attribute_size(req.mgmt_class);
  FanOut::ask(std::move(req), min_size,
              [this, attribute, subject, on_ok = std::move(on_ok)](const mad::Response& r) {
                kept_.note_result(
                    "discovery", attribute, [&] { return subject; }, r);
                if (r.ok()) {
                  on_ok(r);
                } else {
                  ++failed_;
                }
                --asking_;
                ask_port_infos();
              });
  ++asking_;
}

void DiscoveryRun::ask_port_infos() {
  while (asking_ < kPortInfosOut && !waiting_.empty()) {
    WaitingPorts w = std::move(waiting_.front());
    waiting_.pop_front();
    port_info(w.guid, w.next, w.route);
    if (w.next++ < w.last) waiting_.push_back(std::move(w));
  }
}

void DiscoveryRun::settled() {
  auto finished = std::move(finished_);
  finished(topology_, failed_);
}

void DiscoveryRun::node_info(std::vector<std::uint8_t> route, std::uint64_t parent_guid,
                             int parent_port) {
  auto subject = "route " + route_string(route);
  ask("node_info", subject,
      mad::Request::smp_get(mad::Destination::by_route(route), IB_ATTR_NODE_INFO),
      [this, route, parent_guid, parent_port](const mad::Response& r) {
        auto node = mad::decode_node_info(r.data());
        // Added first (false: a second route to a node known already): its cables are kept
        // with it.
        bool added_now = topology_->add_node(node.guid, node.type, node.num_ports, route);
        if (!route.empty()) {
          topology_->add_link(parent_guid, parent_port, node.guid, node.local_port);
          topology_->add_link(node.guid, node.local_port, parent_guid, parent_port);
        } else {
          // The local node answers through the engine's default port: its number, without
          // asking libibumad (a sysfs read) on the loop.
          local_port_ = node.local_port;
        }
        if (!added_now) return;
        auto* added = topology_->find(node.guid);
        added->vendor_id = node.vendor_id;
        added->device_id = node.device_id;
        explore(node.guid, node.type, node.num_ports, route);
      });
}

void DiscoveryRun::explore(std::uint64_t guid, int type, int num_ports,
                           const std::vector<std::uint8_t>& route) {
  auto dest = mad::Destination::by_route(route);
  auto subject = hex_guid(guid);
  ask("node_description", subject, mad::Request::smp_get(dest, IB_ATTR_NODE_DESC),
      [this, guid](const mad::Response& r) {
        auto* node = topology_->find(guid);
        node->description = r.get_string(IB_NODE_DESC_F);
        node->description_read = true;
      });
  int first = 1, last = 0;
  if (type == IB_NODE_SWITCH) {
    ask("switch_port_info", subject, mad::Request::smp_get(dest, IB_ATTR_PORT_INFO, 0),
        [this, guid](const mad::Response& r) {
          auto* node = topology_->find(guid);
          node->lid = static_cast<std::uint16_t>(r.get(IB_PORT_LID_F));
          node->port0_capability_mask = r.get(IB_PORT_CAPMASK_F);
        });
    last = num_ports;
  } else if (route.empty()) {
    // The local CA: leave only through the engine's default port. Other CAs are leaves.
    first = last = local_port_;
  }
  if (static_cast<int>(route.size()) >= kept_.config.max_hops || first > last) return;
  waiting_.push_back(
      WaitingPorts{guid, std::make_shared<const std::vector<std::uint8_t>>(route), first, last});
  ask_port_infos();
}

void DiscoveryRun::port_info(
    std::uint64_t guid, int p,
    const std::shared_ptr<const std::vector<std::uint8_t>>& route_of_node) {
  const auto& route = *route_of_node;
  ask("port_info", hex_guid(guid),
      mad::Request::smp_get(mad::Destination::by_route(route), IB_ATTR_PORT_INFO,
                            static_cast<std::uint32_t>(p)),
      [this, guid, p, route_of_node](const mad::Response& r) {
        const auto& route = *route_of_node;
        if (route.empty()) {
          topology_->subnet_prefix = r.get64(IB_PORT_GID_PREFIX_F);
          topology_->sm_lid = static_cast<std::uint16_t>(r.get(IB_PORT_SMLID_F));
        }
        auto& infos = topology_->find(guid)->port_info;
        if (static_cast<std::size_t>(p) <= infos.size()) {
          infos[static_cast<std::size_t>(p - 1)] = mad::decode_port_info(r.data());
        }
        if (static_cast<int>(r.get(IB_PORT_PHYS_STATE_F)) != kPhysLinkUp) return;
        // The far end is known when this port is the one the node was entered by, or when
        // the node behind it already asked through its side of the cable (libibnetdisc
        // skips the first; a fat tree's inter-switch cables are the second): one NodeInfo
        // per cable instead of two.
        if (topology_->link(guid, p)) return;
        auto next = route;
        next.push_back(static_cast<std::uint8_t>(p));
        node_info(std::move(next), guid, p);
      });
}

}  // namespace ibfabric::fabric
