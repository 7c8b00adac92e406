#include "collectors/ports/ports_run.h"

#include "collectors/ports/ports_collector.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

namespace ibfabric::ports {
namespace {

using Clock = std::chrono::steady_clock;

// PortInfo.PortPhysicalState LinkUp (libibmad has no name for it).
constexpr int kPhysLinkUp = 5;

std::vector<std::uint8_t> attribute_data(const mad::Response& r) {
  return std::vector<std::uint8_t>(r.data(), r.data() + r.data_size());
}

}  // namespace

PortsRun::PortsRun(mad::ClientHandle& mad, const PortsConfig& config, const NodeNameMap& names,
                   PortsState& state, Collector::Done done, std::vector<mad::LocalPort> ports)
    : FanOut(mad), config_(config), names_(names), s_(state), done_(std::move(done)) {
  for (auto& lp : ports) links_.push_back(Link{std::move(lp), {}, {}, false, false, 0, {}, {}});
}

void PortsRun::start() {
  launch([this] {
    for (std::size_t i = 0; i < links_.size(); ++i) query_local(i);
  });
}

Side& PortsRun::side(std::size_t i, Which w) {
  return w == Which::local ? links_[i].local : links_[i].peer;
}

void PortsRun::ask(std::size_t i, Which w, const char* attribute, mad::Request req,
                   std::function<void(const mad::Response&)> on_ok, std::function<void()> on_fail) {
  const auto& lp = links_[i].local_port;
  req.via = mad::PortAddress{lp.ca, lp.port};
  auto min_size = mad::attribute_size(req.mgmt_class);
  FanOut::ask(std::move(req), min_size,
              [this, i, w, attribute, on_ok = std::move(on_ok),
               on_fail = std::move(on_fail)](const mad::Response& r) {
                const auto& lp = links_[i].local_port;
                s_.errors.note(r, {lp.ca, lp.port, side_label(w), attribute}, [&] {
                  return fmt::format("device={} port={} side={} attribute={}", lp.ca, lp.port,
                                     side_label(w), attribute);
                });
                if (r.ok()) {
                  any_answer_ = true;
                  on_ok(r);
                } else {
                  side(i, w).lost = true;
                  if (on_fail) on_fail();
                }
              });
}

void PortsRun::query_local(std::size_t i) {
  int port = links_[i].local_port.port;
  ask(
      i, Which::local, "port_info",
      mad::Request::smp_get(mad::Destination::by_route({}), IB_ATTR_PORT_INFO,
                            static_cast<std::uint32_t>(port)),
      [this, i, port](const mad::Response& r) {
        auto& link = links_[i];
        link.local_answered = true;
        link.subnet = r.get64(IB_PORT_GID_PREFIX_F);
        link.local.port_info = mad::decode_port_info(r.data());
        link.local.port_info_at = Clock::now();
        if (mad::routable_lid(link.local.port_info->lid)) {
          query_pma(i, Which::local, link.local.port_info->lid, port);
        }
        if (config_.peers && link.local.port_info->phys_state == kPhysLinkUp) {
          query_peer(i);
        }
      },
      [this, i, port] {
        // Lost (the simulator drops even directed-route SMPs to the local node at a lossy
        // local port): go on as the port was last read, within keep_unread, so that the
        // loss costs this one value and not every other query of the port.
        auto it = s_.memory.find({links_[i].local_port.ca, port, "local"});
        if (it == s_.memory.end() || !it->second.port_info ||
            Clock::now() - it->second.port_info_at > config_.keep_unread) {
          return;
        }
        const auto& pi = *it->second.port_info;
        if (mad::routable_lid(pi.lid)) query_pma(i, Which::local, pi.lid, port);
        if (config_.peers && pi.phys_state == kPhysLinkUp) query_peer(i);
      });
  ask(i, Which::local, "node_description",
      mad::Request::smp_get(mad::Destination::by_route({}), IB_ATTR_NODE_DESC),
      [this, i](const mad::Response& r) {
        links_[i].local_description = r.get_string(IB_NODE_DESC_F);
      });
  if (!s_.device_ids.contains(links_[i].local_port.node_guid)) {
    ask(i, Which::local, "node_info",
        mad::Request::smp_get(mad::Destination::by_route({}), IB_ATTR_NODE_INFO),
        [this](const mad::Response& r) {
          auto node = mad::decode_node_info(r.data());
          s_.device_ids[node.guid] = {node.vendor_id, node.device_id};
        });
  }
}

void PortsRun::query_peer(std::size_t i) {
  links_[i].peer_asked = true;
  auto route = mad::Destination::by_route({static_cast<std::uint8_t>(links_[i].local_port.port)});
  ask(i, Which::peer, "node_info", mad::Request::smp_get(route, IB_ATTR_NODE_INFO),
      [this, i, route](const mad::Response& r) {
        auto& peer = links_[i].peer;
        auto node = mad::decode_node_info(r.data());
        peer.node_guid = node.guid;
        peer.node_type = node.type;
        s_.device_ids[node.guid] = {node.vendor_id, node.device_id};
        // The port the SMP entered the peer through: the far end of our cable.
        int peer_port = static_cast<int>(r.get(IB_NODE_LOCAL_PORT_F));
        peer.entered_port = peer_port;
        ask(i, Which::peer, "node_description", mad::Request::smp_get(route, IB_ATTR_NODE_DESC),
            [this, i](const mad::Response& d) {
              links_[i].peer.node_description = d.get_string(IB_NODE_DESC_F);
            });
        ask(i, Which::peer, "port_info",
            mad::Request::smp_get(route, IB_ATTR_PORT_INFO, static_cast<std::uint32_t>(peer_port)),
            [this, i, peer_port](const mad::Response& p) {
              auto& peer = links_[i].peer;
              peer.port_info = mad::decode_port_info(p.data());
              peer.port_info_at = Clock::now();
              peer.pma_port = peer_port;
              if (peer.node_type != IB_NODE_SWITCH && mad::routable_lid(peer.port_info->lid)) {
                query_pma(i, Which::peer, peer.port_info->lid, peer_port);
              }
            });
        if (peer.node_type == IB_NODE_SWITCH) {
          // Only a switch's port 0 holds its LID, which its PMA answers at.
          ask(i, Which::peer, "switch_port0_info",
              mad::Request::smp_get(route, IB_ATTR_PORT_INFO, 0),
              [this, i, peer_port](const mad::Response& p) {
                links_[i].peer.switch_capability_mask = p.get(IB_PORT_CAPMASK_F);
                links_[i].peer.switch_port0_at = Clock::now();
                auto lid = static_cast<std::uint16_t>(p.get(IB_PORT_LID_F));
                if (mad::routable_lid(lid)) query_pma(i, Which::peer, lid, peer_port);
              });
        }
      });
}

void PortsRun::query_pma(std::size_t i, Which w, std::uint16_t lid, int port) {
  side(i, w).pma_lid = lid;
  side(i, w).pma_port = port;
  ask(i, w, "class_port_info", mad::Request::pma_get(lid, CLASS_PORT_INFO),
      [this, i, w, lid, port](const mad::Response& r) {
        auto caps = mad::decode_class_port_info(r.data());
        side(i, w).caps = caps;
        side(i, w).caps_at = Clock::now();
        if (mad::needs_port_counters(caps)) {
          auto req = mad::Request::pma_get(lid, IB_GSI_PORT_COUNTERS);
          req.set(IB_PC_PORT_SELECT_F, static_cast<std::uint32_t>(port));
          ask(i, w, "port_counters", std::move(req), [this, i, w](const mad::Response& c) {
            side(i, w).basic = attribute_data(c);
            side(i, w).basic_at = Clock::now();
          });
        }
        if (caps.extended()) {
          auto req = mad::Request::pma_get(lid, IB_GSI_PORT_COUNTERS_EXT);
          req.set(IB_PC_EXT_PORT_SELECT_F, static_cast<std::uint32_t>(port));
          ask(i, w, "port_counters_extended", std::move(req), [this, i, w](const mad::Response& c) {
            side(i, w).extended = attribute_data(c);
            side(i, w).extended_at = Clock::now();
          });
        }
        if (!config_.error_details) return;
        // A PMA that rejects these costs only their series (counted as query errors).
        const auto& attributes = mad::detail_attributes();
        side(i, w).details.resize(attributes.size());
        side(i, w).details_at.resize(attributes.size());
        for (std::size_t a = 0; a < attributes.size(); ++a) {
          auto req = mad::Request::pma_get(lid, attributes[a].attribute);
          req.set(IB_PC_PORT_SELECT_F, static_cast<std::uint32_t>(port));
          ask(i, w, attributes[a].name, std::move(req), [this, i, w, a](const mad::Response& c) {
            side(i, w).details[a] = attribute_data(c);
            side(i, w).details_at[a] = Clock::now();
          });
        }
      });
}

}  // namespace ibfabric::ports
