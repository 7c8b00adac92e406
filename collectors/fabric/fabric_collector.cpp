#include "collectors/fabric/fabric_collector.h"

#include "core/text_format.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>

namespace ibfabric::fabric {
namespace {

using prometheus::MetricType;
using Clock = std::chrono::steady_clock;

std::string route_string(const std::vector<std::uint8_t>& route) {
  std::string s = "0";
  for (auto p : route) s += "," + std::to_string(p);
  return s;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Metric name and help of every PMA counter, built once: a sweep emits tens of thousands.
const std::vector<std::pair<std::string, std::string>>& counter_names() {
  static const auto names = [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& def : mad::counter_defs()) {
      out.emplace_back("ibfabric_fabric_port_" + std::string(def.metric),
                       std::string(def.help) + " (" + std::string(def.pma_name) + ")");
    }
    return out;
  }();
  return names;
}

// The labels every series of a switch port carries (port index = port number - 1).
Labels switch_port_labels(const std::string& guid, std::size_t idx) {
  return {{"node_guid", guid}, {"port", std::to_string(idx + 1)}};
}

}  // namespace

// One directed-route breadth-first search. Every node found is asked for its NodeDescription
// (and a switch for its port 0 PortInfo) and, if it is a switch, for the PortInfo of every
// port; through every port whose physical state is LinkUp and whose far end is not known yet
// goes a NodeInfo one hop further. A GUID seen before ends that branch but still records the
// link (both ends). The engine paces it; the PortInfo queries wait here for room (below).
class Discovery : public mad::FanOut {
 public:
  // The topology found, and how many of the discovery's queries failed.
  using Finished = std::function<void(std::shared_ptr<Topology>, int)>;
  Discovery(FabricCollector& c, Finished finished)
      : FanOut(c.mad_), c_(c), finished_(std::move(finished)) {}

  void start() {
    launch([this] { node_info({}, 0, 0); });
  }

 private:
  void ask(const char* attribute, const std::string& subject, mad::Request req,
           std::function<void(const mad::Response&)> on_ok) {
    auto min_size = mad::attribute_size(req.mgmt_class);
    FanOut::ask(std::move(req), min_size,
                [this, attribute, subject, on_ok = std::move(on_ok)](const mad::Response& r) {
                  c_.note_result(
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

  // A PortInfo query is handed to the engine only while fewer than kPortInfosOut of the
  // discovery's queries are out, one port of each waiting node in turn: a level of a fat tree
  // asked at once queued a request (about 1 KiB) per port of the level, and taking turns spreads
  // the queries out over many destinations, which the engine serves 4 at a time each.
  static constexpr int kPortInfosOut = 256;
  struct WaitingPorts {
    std::uint64_t guid;
    std::shared_ptr<const std::vector<std::uint8_t>> route;
    int next, last;  // ports next..last are still to be asked
  };

  void ask_port_infos() {
    while (asking_ < kPortInfosOut && !waiting_.empty()) {
      WaitingPorts w = std::move(waiting_.front());
      waiting_.pop_front();
      port_info(w.guid, w.next, w.route);
      if (w.next++ < w.last) waiting_.push_back(std::move(w));
    }
  }

  void settled() override {
    auto finished = std::move(finished_);
    finished(topology_, failed_);
  }

  // NodeInfo of whatever is at `route`, reached out of port `parent_port` of `parent_guid`
  // (route {}: the local node; no parent).
  void node_info(std::vector<std::uint8_t> route, std::uint64_t parent_guid, int parent_port) {
    auto subject = "route " + route_string(route);
    ask("node_info", subject,
        mad::Request::smp_get(mad::Destination::by_route(route), IB_ATTR_NODE_INFO),
        [this, route, parent_guid, parent_port](const mad::Response& r) {
          auto node = mad::decode_node_info(r.data());
          if (!route.empty()) {
            topology_->add_link(parent_guid, parent_port, node.guid, node.local_port);
            topology_->add_link(node.guid, node.local_port, parent_guid, parent_port);
          } else {
            // The local node answers through the engine's default port: its number, without
            // asking libibumad (a sysfs read) on the loop.
            local_port_ = node.local_port;
          }
          if (!topology_->add_node(node.guid, node.type, node.num_ports, route)) return;
          explore(node.guid, node.type, node.num_ports, route);
        });
  }

  void explore(std::uint64_t guid, int type, int num_ports,
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
    if (static_cast<int>(route.size()) >= c_.config_.max_hops || first > last) return;
    waiting_.push_back(
        WaitingPorts{guid, std::make_shared<const std::vector<std::uint8_t>>(route), first, last});
    ask_port_infos();
  }

  void port_info(std::uint64_t guid, int p,
                 const std::shared_ptr<const std::vector<std::uint8_t>>& route_of_node) {
    const auto& route = *route_of_node;
    ask("port_info", hex_guid(guid),
        mad::Request::smp_get(mad::Destination::by_route(route), IB_ATTR_PORT_INFO,
                              static_cast<std::uint32_t>(p)),
        [this, guid, p, route_of_node](const mad::Response& r) {
          const auto& route = *route_of_node;
          if (route.empty()) topology_->subnet_prefix = r.get64(IB_PORT_GID_PREFIX_F);
          auto& infos = topology_->find(guid)->port_info;
          if (static_cast<std::size_t>(p) <= infos.size()) {
            infos[static_cast<std::size_t>(p - 1)] = mad::decode_port_info(r.data());
          }
          if (static_cast<int>(r.get(IB_PORT_PHYS_STATE_F)) != kPhysLinkUp) return;
          // The far end is known when this port is the one the node was entered by, or when
          // the node behind it already asked through its side of the cable (libibnetdisc
          // skips the first; a fat tree's inter-switch cables are the second): one NodeInfo
          // per cable instead of two.
          if (topology_->links().count({guid, p})) return;
          auto next = route;
          next.push_back(static_cast<std::uint8_t>(p));
          node_info(std::move(next), guid, p);
        });
  }

  FabricCollector& c_;
  int asking_ = 0;  // queries of this discovery not settled yet
  std::deque<WaitingPorts> waiting_;
  int local_port_ = 0;
  int failed_ = 0;
  Finished finished_;
  std::shared_ptr<Topology> topology_ = std::make_shared<Topology>();
};

// One sweep of the shard's switches: ClassPortInfo once per switch (cached until the next
// discovery), then PortInfo, PortCounters and/or PortCountersExtended of every port, all by
// LID, kSwitchesInFlight switches at a time.
class Sweep : public mad::FanOut {
 public:
  using TimePoint = FabricCollector::TimePoint;
  // A part is "lost" when it is missing because a query failed (its own, or one it needed);
  // only a lost part is taken from the port's memory.
  struct PortResult : FabricCollector::PortValues {
    bool failed = false;
    bool lost_info = false, lost_basic = false, lost_extended = false;
    std::vector<char> lost_details;
    std::optional<TimePoint> stale_since;  // the oldest part taken from memory
    void lose_all() {
      failed = lost_info = lost_basic = lost_extended = true;
      lost_details.assign(mad::detail_attributes().size(), 1);
    }
    void lose_counters() {
      failed = lost_basic = lost_extended = true;
      lost_details.assign(mad::detail_attributes().size(), 1);
    }
  };
  struct SwitchResult {
    const Node* node;
    std::optional<mad::PmaCapabilities> caps;
    std::vector<PortResult> ports;  // index = port number - 1; from its start to its emission
    bool answered = false;          // any query of this switch answered in this sweep
    bool emitted = false;
    std::size_t next_port = 0;  // index of the first port not asked yet, once caps are known
  };

  Sweep(FabricCollector& c, std::shared_ptr<const Topology> topology, bool fresh,
        Collector::Done done, bool discovery_ok, std::string discovery_error)
      : FanOut(c.mad_),
        c_(c),
        topology_(std::move(topology)),
        fresh_(fresh),
        done_(std::move(done)),
        discovery_ok_(discovery_ok),
        discovery_error_(std::move(discovery_error)) {}

  void start() {
    auto& cache = c_.labels_;
    if (cache.topology == topology_ && cache.links_version == c_.links_version_) {
      begin();
      return;
    }
    cache = FabricCollector::LabelCache{};
    cache.topology = topology_;
    cache.links_version = c_.links_version_;
    MetricsBuilder info;
    emit_topology(info);
    cache.info = std::make_shared<const MetricFamilies>(std::move(info).take());
    // Kept compressed: their label text (both ends of every cable, by name) is the longest of
    // the exposition, and only a scrape reads it. Compressed before the sweep begins, so that
    // what the compression takes is never added to what the sweep builds.
    c_.compress_info(
        [self = std::static_pointer_cast<Sweep>(shared_from_this())] { self->begin(); });
  }

 private:
  void begin() {
    started_ = Clock::now();
    for (const Node* node : topology_->switches()) {
      if (!in_shard(node->guid, c_.config_.shard, c_.config_.shards)) continue;
      switches_.push_back(SwitchResult{node, std::nullopt, {}, false, false, 0});
    }
    pending_.assign(switches_.size(), 0);
    out_.size_hints(&c_.family_sizes_);
    const auto& cfg = c_.config_;
    out_.info("ibfabric_fabric_shard_info", "Which shard of the fabric this daemon sweeps.",
              {{"shard", std::to_string(cfg.shard)}, {"shards", std::to_string(cfg.shards)}});
    for (const auto& family : *c_.labels_.info) out_.add_family(family);
    out_.adopt(c_.labels_.arena);
    launch([this] {
      for (std::size_t k = 0; k < kSwitchesInFlight; ++k) start_next_switch();
    });
  }

  // Switches whose queries are out at once. Queuing every query of a large fabric at once held
  // them all in memory (about 1 KiB per switch port at 50,000 ports) and could pass the
  // engine's max_queued. The engine keeps 64 MADs out, 4 per destination by default: 16
  // switches can fill them (docs/benchmarks.md has what the window costs in speed).
  static constexpr std::size_t kSwitchesInFlight = 16;
  // Queries of one switch handed to the engine at once: more than the 4 it keeps out per
  // destination, so that it always has the next at hand, but not every port's. Each waiting
  // query costs about 1 KiB (request, callbacks, timer): 16 switches of 36 ports held 1,152
  // of them.
  static constexpr int kQueriesPerSwitch = 12;

  // Starts the next switch whose queries stay out (one with nothing to ask is passed over).
  void start_next_switch() {
    while (next_switch_ < switches_.size()) {
      std::size_t i = next_switch_++;
      query_switch(i);
      if (pending_[i] > 0) return;
      finish_switch(i);
    }
  }

  // A switch whose queries have all settled goes into the result now and its answers are
  // freed, so that a sweep holds the raw answers of the switches in flight only. Not before
  // some switch of the sweep answered: a sweep that got nothing back takes nothing from the
  // ports' memory (settled() then emits the switches held back).
  void finish_switch(std::size_t i) {
    auto& sw = switches_[i];
    if (!any_answered_) {
      held_back_.push_back(i);
      return;
    }
    emit_finished(sw, Clock::now());
  }

  void emit_finished(SwitchResult& sw, TimePoint now) {
    if (sw.emitted) return;
    sw.emitted = true;
    if (sw.answered) {
      ++switches_answered_;
      c_.last_seen_[sw.node->guid] = now;
    } else if (!sw.ports.empty() && !sw.node->carried) {
      // A switch that answered nothing has moved, lost its LID or died: look again (unless
      // the last discovery already missed it; it is looked for at every discovery).
      c_.rediscover_ = true;
    }
    // Values lost in this sweep are taken from memory only when the fabric answered at all: a
    // sweep that got nothing back is a failed collection, not a lossy cable.
    const bool keep = c_.config_.keep_unread.count() > 0;
    if (keep && any_answered_) recall(sw, now);
    emit_switch(out_, sw, now, ports_ok_, ports_failed_, ports_stale_);
    if (keep) remember(sw, now);
    std::vector<PortResult>().swap(sw.ports);
  }

  // `on_fail` runs when the query failed (after it was counted).
  void ask(std::size_t i, const char* attribute, mad::Request req,
           std::function<void(const mad::Response&)> on_ok, std::function<void()> on_fail) {
    auto min_size = mad::attribute_size(req.mgmt_class);
    ++pending_[i];
    FanOut::ask(std::move(req), min_size,
                [this, i, attribute, on_ok = std::move(on_ok),
                 on_fail = std::move(on_fail)](const mad::Response& r) {
                  auto& sw = switches_[i];
                  c_.note_result(
                      "sweep", attribute, [&] { return hex_guid(sw.node->guid); }, r);
                  if (r.ok()) {
                    sw.answered = true;
                    on_ok(r);
                  } else {
                    if (r.status == mad::Status::timeout) ++c_.switch_timeouts_[sw.node->guid];
                    on_fail();
                  }
                  if (sw.answered && !any_answered_) {
                    any_answered_ = true;
                    auto now = Clock::now();
                    for (auto held : std::exchange(held_back_, {})) {
                      emit_finished(switches_[held], now);
                    }
                  }
                  // After on_ok, which may have asked more of this switch (its ports).
                  --pending_[i];
                  ask_ports(i);
                  if (pending_[i] == 0) {
                    finish_switch(i);
                    start_next_switch();
                  }
                });
  }

  void query_switch(std::size_t i) {
    auto& sw = switches_[i];
    // Allocated now, not at the start: a sweep holds the ports of the switches in flight.
    sw.ports.resize(static_cast<std::size_t>(std::max(0, sw.node->num_ports)));
    auto lid = sw.node->lid;
    if (!mad::routable_lid(lid)) {
      // The SM has not given the switch a LID (yet): nothing can be asked by LID.
      mad::Response r;
      r.status = mad::Status::refused;
      r.error = "switch has no routable LID";
      c_.note_result(
          "sweep", "lid", [&] { return hex_guid(sw.node->guid); }, r);
      for (auto& p : sw.ports) p.lose_all();
      return;
    }
    if (auto it = c_.pma_caps_.find(sw.node->guid); it != c_.pma_caps_.end()) {
      sw.caps = it->second;
      query_ports(i);
      return;
    }
    ask(
        i, "class_port_info", mad::Request::pma_get(lid, CLASS_PORT_INFO),
        [this, i](const mad::Response& r) {
          auto caps = mad::decode_class_port_info(r.data());
          switches_[i].caps = caps;
          c_.pma_caps_[switches_[i].node->guid] = caps;
          c_.last_caps_[switches_[i].node->guid] = caps;
          query_ports(i);
        },
        [this, i] {
          // Lost: the capabilities it answered before (they change with the firmware, not
          // with the traffic) still say what to ask.
          auto& sw = switches_[i];
          if (auto it = c_.last_caps_.find(sw.node->guid); it != c_.last_caps_.end()) {
            sw.caps = it->second;
            query_ports(i);
            return;
          }
          // Never answered: without it no port's counters are asked for.
          for (auto& p : sw.ports) p.lose_counters();
        });
  }

  void query_ports(std::size_t i) {
    switches_[i].next_port = 0;
    ask_ports(i);
  }

  // Asks for the next ports of the switch while fewer than kQueriesPerSwitch of its queries
  // are out (a port's queries go together).
  void ask_ports(std::size_t i) {
    auto& sw = switches_[i];
    if (!sw.caps) return;
    auto lid = sw.node->lid;
    auto caps = *sw.caps;
    while (sw.next_port < sw.ports.size() && pending_[i] < kQueriesPerSwitch) {
      auto idx = sw.next_port++;
      int p = static_cast<int>(idx) + 1;
      auto port = [this, i, idx]() -> PortResult& { return switches_[i].ports[idx]; };
      if (fresh_ && idx < sw.node->port_info.size() && sw.node->port_info[idx]) {
        sw.ports[idx].port_info = sw.node->port_info[idx];
        sw.ports[idx].port_info_at = Clock::now();
        sw.answered = true;  // to this collection's discovery
      } else {
        ask(
            i, "port_info",
            mad::Request::smp_get(mad::Destination::to_lid(lid), IB_ATTR_PORT_INFO,
                                  static_cast<std::uint32_t>(p)),
            [port](const mad::Response& r) {
              port().port_info = mad::decode_port_info(r.data());
              port().port_info_at = Clock::now();
            },
            [port] { port().failed = port().lost_info = true; });
      }
      if (mad::needs_port_counters(caps)) {
        auto req = mad::Request::pma_get(lid, IB_GSI_PORT_COUNTERS);
        req.set(IB_PC_PORT_SELECT_F, static_cast<std::uint32_t>(p));
        ask(
            i, "port_counters", std::move(req),
            [port](const mad::Response& r) {
              port().basic.assign(r.data(), r.data() + r.data_size());
              port().basic_at = Clock::now();
            },
            [port] { port().failed = port().lost_basic = true; });
      }
      if (caps.extended()) {
        auto req = mad::Request::pma_get(lid, IB_GSI_PORT_COUNTERS_EXT);
        req.set(IB_PC_EXT_PORT_SELECT_F, static_cast<std::uint32_t>(p));
        ask(
            i, "port_counters_extended", std::move(req),
            [port](const mad::Response& r) {
              port().extended.assign(r.data(), r.data() + r.data_size());
              port().extended_at = Clock::now();
            },
            [port] { port().failed = port().lost_extended = true; });
      }
      if (!c_.config_.error_details) continue;
      const auto& attributes = mad::detail_attributes();
      sw.ports[idx].details.resize(attributes.size());
      sw.ports[idx].details_at.resize(attributes.size());
      sw.ports[idx].lost_details.resize(attributes.size());
      for (std::size_t a = 0; a < attributes.size(); ++a) {
        auto req = mad::Request::pma_get(lid, attributes[a].attribute);
        req.set(IB_PC_PORT_SELECT_F, static_cast<std::uint32_t>(p));
        // An optional attribute: its failure costs only its own series, the port is not failed.
        ask(
            i, attributes[a].name, std::move(req),
            [port, a](const mad::Response& r) {
              port().details[a].assign(r.data(), r.data() + r.data_size());
              port().details_at[a] = Clock::now();
            },
            [port, a] { port().lost_details[a] = 1; });
      }
    }
  }

  void emit_topology(MetricsBuilder& out) {
    const auto& cfg = c_.config_;
    for (const auto& [guid, node] : topology_->nodes()) {
      if (!in_shard(guid, cfg.shard, cfg.shards)) continue;
      out.info("ibfabric_fabric_node_info",
               "A node of the fabric (NodeInfo, NodeDescription) and its name (node-name-map, "
               "else NodeDescription, else GUID); each node is reported by the shard its GUID "
               "hashes to.",
               {{"node_guid", hex_guid(guid)},
                {"node_type", mad::node_type_name(node.type)},
                {"node_description", trim_node_description(node.description)},
                {"node_name", c_.names_->name(guid, node.description)}});
    }
    for (const auto& [end, link] : c_.links_seen_) {
      if (!in_shard(end.first, cfg.shard, cfg.shards)) continue;
      // A cable between two switches is seen from both ends; "a" marks one end of each cable
      // (the lower GUID and port), so a per-cable view counts it once, whichever shard sweeps it.
      bool b_end =
          link.remote_type == IB_NODE_SWITCH && std::pair(link.remote_guid, link.remote_port) < end;
      out.info("ibfabric_fabric_link_info",
               "What port `port` of switch `node_guid` is cabled to, by GUID and by name, as "
               "discovery last saw it (kept for link_memory after the far end stops answering).",
               {{"cable_end", b_end ? "b" : "a"},
                {"node_guid", hex_guid(end.first)},
                {"port", std::to_string(end.second)},
                {"node_name", link.name},
                {"remote_node_guid", hex_guid(link.remote_guid)},
                {"remote_port", std::to_string(link.remote_port)},
                {"remote_node_type", mad::node_type_name(link.remote_type)},
                {"remote_node_name", link.remote_name}});
    }
  }

  // The parts of the switch's ports that this sweep lost are taken from the port's memory
  // when they were read within keep_unread; each such port records the oldest.
  void recall(SwitchResult& sw, TimePoint now) {
    auto it = c_.memory_.find(sw.node->guid);
    if (it == c_.memory_.end()) return;
    const auto& memory = it->second.ports;
    const auto& bytes = it->second.bytes;
    const auto keep = c_.config_.keep_unread;
    for (std::size_t idx = 0; idx < sw.ports.size() && idx < memory.size(); ++idx) {
      auto& p = sw.ports[idx];
      const auto& m = memory[idx];
      auto use = [&](TimePoint at) {
        if (now - at > keep) return false;
        if (!p.stale_since || at < *p.stale_since) p.stale_since = at;
        return true;
      };
      auto unpack = [&](const FabricCollector::Kept& from, std::vector<std::uint8_t>& to,
                        TimePoint& at) {
        unpack_octets(bytes.data() + from.offset, from.covered, from.size, to);
        at = from.at;
      };
      if (!p.port_info && p.lost_info && m.port_info && use(m.port_info_at)) {
        p.port_info = m.port_info;
        p.port_info_at = m.port_info_at;
      }
      if (p.basic.empty() && p.lost_basic && m.basic.size && use(m.basic.at)) {
        unpack(m.basic, p.basic, p.basic_at);
      }
      if (p.extended.empty() && p.lost_extended && m.extended.size && use(m.extended.at)) {
        unpack(m.extended, p.extended, p.extended_at);
      }
      for (std::size_t a = 0; a < p.lost_details.size() && a < m.details.size(); ++a) {
        if (!p.lost_details[a] || !m.details[a].size) continue;
        if (a < p.details.size() && !p.details[a].empty()) continue;
        if (!use(m.details[a].at)) continue;
        p.details.resize(p.lost_details.size());
        p.details_at.resize(p.lost_details.size());
        unpack(m.details[a], p.details[a], p.details_at[a]);
      }
    }
  }

  // Keeps what the switch's ports gave (read now or recalled) for the next sweep; a part not
  // read now stays until it is older than keep_unread.
  void remember(const SwitchResult& sw, TimePoint now) {
    auto& memory = c_.memory_[sw.node->guid];
    memory.ports.resize(sw.ports.size());
    const auto keep = c_.config_.keep_unread;
    // The switch's buffer is written anew: parts read now, and parts kept from the old one.
    std::vector<std::uint8_t> bytes;
    bytes.reserve(memory.bytes.size());
    auto keep_part = [&](const std::vector<std::uint8_t>& data, TimePoint at, std::size_t used,
                         FabricCollector::Kept& to) {
      if (!data.empty()) {
        auto covered = std::min(data.size(), used);
        to.offset = static_cast<std::uint32_t>(bytes.size());
        pack_octets(data.data(), covered, bytes);
        to.covered = static_cast<std::uint16_t>(covered);
        to.size = static_cast<std::uint16_t>(data.size());
        to.at = at;
      } else if (to.size && now - to.at <= keep) {
        const std::uint8_t* from = memory.bytes.data() + to.offset;
        to.offset = static_cast<std::uint32_t>(bytes.size());
        bytes.insert(bytes.end(), from, from + packed_size(from, to.covered));
      } else {
        to = FabricCollector::Kept{};
      }
    };
    for (std::size_t idx = 0; idx < sw.ports.size(); ++idx) {
      const auto& p = sw.ports[idx];
      auto& m = memory.ports[idx];
      if (p.port_info) {
        m.port_info = p.port_info;
        m.port_info_at = p.port_info_at;
      } else if (now - m.port_info_at > keep) {
        m.port_info.reset();
      }
      keep_part(p.basic, p.basic_at, mad::port_counters_octets(), m.basic);
      keep_part(p.extended, p.extended_at, mad::port_counters_extended_octets(), m.extended);
      if (m.details.size() < p.details.size()) m.details.resize(p.details.size());
      for (std::size_t a = 0; a < m.details.size(); ++a) {
        static const std::vector<std::uint8_t> kNone;
        bool read = a < p.details.size() && !p.details[a].empty();
        keep_part(read ? p.details[a] : kNone, read ? p.details_at[a] : TimePoint{},
                  mad::detail_octets(a), m.details[a]);
      }
    }
    if (bytes.capacity() > bytes.size() + bytes.size() / 4) bytes.shrink_to_fit();
    memory.bytes = std::move(bytes);
  }

  void emit_switch(MetricsBuilder& out, const SwitchResult& sw, TimePoint now, int& ports_ok,
                   int& ports_failed, int& ports_stale) {
    auto guid = hex_guid(sw.node->guid);
    out.gauge("ibfabric_fabric_switch_lid", "LID of the switch (PortInfo of its port 0).",
              {{"node_guid", guid}}, sw.node->lid);
    // One series per switch, from 0: a counter that appears at its first increment loses that
    // increment to rate().
    auto timeouts = c_.switch_timeouts_.find(sw.node->guid);
    out.counter(
        "ibfabric_fabric_switch_timeouts_total",
        "Sweep queries to this switch that got no answer after every retry of the MAD "
        "engine.",
        {{"node_guid", guid}},
        timeouts == c_.switch_timeouts_.end() ? 0.0 : static_cast<double>(timeouts->second));
    if (sw.caps) {
      out.gauge("ibfabric_fabric_switch_pma_capability_mask",
                "CapabilityMask of the switch's Performance Management agent (ClassPortInfo).",
                {{"node_guid", guid}}, sw.caps->mask);
    }
    auto& port_labels = c_.labels_.ports[sw.node->guid];
    if (port_labels.size() != sw.ports.size()) {
      port_labels.clear();
      for (std::size_t idx = 0; idx < sw.ports.size(); ++idx) {
        port_labels.push_back(
            &c_.labels_.arena->sets.emplace_back(label_text(switch_port_labels(guid, idx))));
      }
    }
    for (std::size_t idx = 0; idx < sw.ports.size(); ++idx) {
      const auto& pr = sw.ports[idx];
      if (pr.failed) {
        ++ports_failed;
      } else {
        ++ports_ok;
      }
      // One label set for every series of the port, from the cache (adopted by `out`).
      const LabelSet* l = port_labels[idx];
      if (pr.stale_since) {
        ++ports_stale;
        out.gauge("ibfabric_fabric_port_stale_seconds",
                  "Present only while some series of this port hold values from an earlier sweep "
                  "(its queries were lost since): seconds since the oldest of them was read.",
                  l, std::chrono::duration<double>(now - *pr.stale_since).count());
      }
      if (pr.port_info) {
        auto pi = *pr.port_info;
        // External ports of a switch carry no CapabilityMask; port 0's applies.
        if (sw.node->port0_capability_mask) {
          pi.extended_speeds = (*sw.node->port0_capability_mask & mad::kPortCapExtendedSpeeds) != 0;
        }
        out.gauge("ibfabric_fabric_port_state",
                  "Logical port state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE (PortInfo.PortState).", l,
                  pi.state);
        out.gauge("ibfabric_fabric_port_physical_state",
                  "Physical port state: 1 Sleep, 2 Polling, 3 Disabled, 4 "
                  "PortConfigurationTraining, 5 LinkUp, 6 LinkErrorRecovery, 7 PhyTest.",
                  l, pi.phys_state);
        out.gauge("ibfabric_fabric_port_link_width_lanes",
                  "Active link width in lanes, 0 when the link is down (PortInfo.LinkWidthActive).",
                  l, mad::lanes(pi.width_active));
        out.gauge("ibfabric_fabric_port_link_speed_lane_bytes_per_second",
                  "Nominal signalling rate of one lane in bytes per second, Gb/s times 1e9 / 8 "
                  "(PortInfo.LinkSpeedActive / LinkSpeedExtActive).",
                  l, mad::lane_gbps(pi) * 1e9 / 8);
        if (auto effective = mad::effective_bytes_per_second(pi)) {
          out.gauge("ibfabric_fabric_port_effective_rate_bytes_per_second",
                    "Data rate of the link after line encoding (8b/10b up to QDR, 64b/66b for "
                    "FDR and EDR, FEC from HDR on), in bytes per second.",
                    l, *effective);
        }
      }
      if (!sw.caps) continue;
      const std::uint8_t* basic = pr.basic.empty() ? nullptr : pr.basic.data();
      const std::uint8_t* extended = pr.extended.empty() ? nullptr : pr.extended.data();
      const mad::CounterDef* defs = mad::counter_defs().data();
      for (const auto& v : mad::merge_counters(*sw.caps, basic, extended)) {
        if (!c_.exported(v.def->metric)) continue;
        const auto& [name, help] = counter_names()[static_cast<std::size_t>(v.def - defs)];
        out.counter(name, help, l, v.value);
        if (v.saturated && *v.saturated) {
          Labels sl = switch_port_labels(guid, idx);
          sl.emplace_back("counter", std::string(v.def->pma_name));
          out.gauge("ibfabric_fabric_port_counters_saturated",
                    "Present (value 1) only for a counter read from 32-bit PortCounters that is "
                    "pegged at its maximum.",
                    sl, 1);
        }
      }
      if (pr.details.empty()) continue;
      mad::add_detail_counters(out, "ibfabric_fabric_port_", switch_port_labels(guid, idx),
                               pr.details, [this](std::string_view m) { return c_.exported(m); });
    }
  }

  void settled() override {
    double sweep_seconds = seconds_since(started_);
    // What is left: switches held back because none had answered (then nothing did).
    auto now = Clock::now();
    for (auto& sw : switches_) emit_finished(sw, now);
    MetricsBuilder& out = out_;
    const int switches_answered = switches_answered_;
    const int ports_ok = ports_ok_, ports_failed = ports_failed_, ports_stale = ports_stale_;
    out.gauge("ibfabric_fabric_nodes", "Nodes found by the last discovery, whole fabric.",
              {{"node_type", "switch"}}, static_cast<double>(topology_->count(IB_NODE_SWITCH)));
    out.gauge("ibfabric_fabric_nodes", "Nodes found by the last discovery, whole fabric.",
              {{"node_type", "CA"}}, static_cast<double>(topology_->count(IB_NODE_CA)));
    out.gauge("ibfabric_fabric_nodes", "Nodes found by the last discovery, whole fabric.",
              {{"node_type", "router"}}, static_cast<double>(topology_->count(IB_NODE_ROUTER)));
    out.gauge("ibfabric_fabric_links", "Cables found by the last discovery, whole fabric.", {},
              static_cast<double>(topology_->cable_count()));
    out.gauge("ibfabric_fabric_switches_swept",
              "Switches of this shard that answered at least one query in the last sweep.", {},
              switches_answered);
    out.gauge("ibfabric_fabric_ports_swept",
              "Switch ports of this shard whose every query answered in the last sweep.", {},
              ports_ok);
    out.gauge("ibfabric_fabric_ports_failed",
              "Switch ports of this shard with at least one failed query in the last sweep (their "
              "other values are still reported).",
              {}, ports_failed);
    out.gauge("ibfabric_fabric_ports_stale",
              "Switch ports of this shard reported at least partly with values of an earlier "
              "sweep, their queries in this one lost (ibfabric_fabric_port_stale_seconds says "
              "how old).",
              {}, ports_stale);
    out.gauge("ibfabric_fabric_sweep_mads",
              "MAD requests the last sweep made (retries not counted), discovery excluded.", {},
              asked());
    out.gauge("ibfabric_fabric_sweep_duration_seconds",
              "Wall time of the last sweep of the shard's switch ports, discovery excluded.", {},
              sweep_seconds);
    out.gauge("ibfabric_fabric_discovery_duration_seconds",
              "Wall time of the last topology discovery.", {}, c_.discovery_seconds_);
    out.gauge("ibfabric_fabric_discovery_timestamp_seconds",
              "Unix time the last successful discovery finished.", {}, c_.discovery_timestamp_);
    out.counter("ibfabric_fabric_discoveries_total", "Topology discoveries run since start.", {},
                static_cast<double>(c_.discoveries_));
    out.declare("ibfabric_fabric_query_errors_total",
                "MAD queries of the fabric collector that failed, by phase and attribute.",
                MetricType::Counter);
    c_.state_.fill_metrics(out);
    for (const auto& [key, n] : c_.errors_.counts()) {
      out.counter("ibfabric_fabric_query_errors_total",
                  "MAD queries of the fabric collector that failed, by phase and attribute.",
                  {{"phase", std::string(key.first)}, {"attribute", std::string(key.second)}},
                  static_cast<double>(n));
    }
    CollectResult result;
    if (!discovery_ok_) {
      result.success = false;
      result.error = discovery_error_;
    } else if (!switches_.empty() && switches_answered == 0) {
      result.success = false;
      result.error = "no switch of this shard answered";
    }
    result.metrics = std::move(out).take();
    c_.family_sizes_ = MetricsBuilder::sizes_of(result.metrics);
    spdlog::debug(
        "fabric: sweep done ports={} failed={} stale={} mads={} seconds={:.3f} "
        "build_seconds={:.3f}",
        ports_ok, ports_failed, ports_stale, asked(), sweep_seconds,
        seconds_since(started_) - sweep_seconds);
    ++c_.sweeps_since_discovery_;
    auto done = std::move(done_);
    done(std::move(result));
  }

  FabricCollector& c_;
  std::shared_ptr<const Topology> topology_;
  bool fresh_;  // the topology was discovered in this collection: its PortInfo is current
  Collector::Done done_;
  bool discovery_ok_;
  std::string discovery_error_;
  std::vector<SwitchResult> switches_;
  std::vector<int> pending_;            // queries of each switch not settled yet
  std::size_t next_switch_ = 0;         // the first switch not started
  bool any_answered_ = false;           // some query of this sweep was answered
  std::vector<std::size_t> held_back_;  // finished before any answer
  // The result, built switch by switch as each one's queries settle.
  MetricsBuilder out_;
  int switches_answered_ = 0, ports_ok_ = 0, ports_failed_ = 0, ports_stale_ = 0;
  Clock::time_point started_;
};

FabricCollector::FabricCollector(boost::asio::io_context& io,
                                 std::function<std::shared_ptr<mad::Engine>()> engine_factory,
                                 FabricConfig config, std::shared_ptr<const NodeNameMap> names,
                                 std::string state_directory)
    : io_(io),
      mad_(std::move(engine_factory)),
      config_(std::move(config)),
      names_(std::move(names)),
      state_(io, std::move(state_directory), "fabric"),
      errors_("fabric"),
      compressor_(io) {}

void FabricCollector::compress_info(std::function<void()> then) {
  auto job = std::make_shared<InfoCompression>(
      InfoCompression{this, std::move(then), boost::asio::make_work_guard(io_)});
  std::weak_ptr<InfoCompression> weak = job;
  auto error = compressor_.start([families = labels_.info, weak]() -> OffLoop::Then {
    auto started = Clock::now();
    MetricFamilies compressed;
    std::size_t bytes = 0;
    for (const auto& family : *families) {
      compressed.push_back(compressed_family(family));
      bytes += compressed.back().text->deflated.size();
    }
    // The heap this thread's arena took for the compression goes back to the kernel: glibc
    // keeps it otherwise, under the sweep that follows (0.5 MiB at 5,580 switch ports).
    malloc_trim(0);
    return [weak, compressed = std::move(compressed), bytes,
            seconds = seconds_since(started)]() mutable {
      auto job = weak.lock();
      if (!job) return;
      spdlog::debug("fabric: node and link info compressed bytes={} seconds={:.3f}", bytes,
                    seconds);
      auto& c = *job->collector;
      c.labels_.info = std::make_shared<const MetricFamilies>(std::move(compressed));
      c.info_compression_.reset();
      job->then();
    };
  });
  if (!error.empty()) {
    spdlog::warn(
        "fabric: node and link info kept uncompressed, which holds more memory until the next "
        "topology: {}",
        error);
    info_compression_.reset();  // an earlier topology's, if one were pending: it must not land
    job->then();
    return;
  }
  info_compression_ = std::move(job);
}

void FabricCollector::restore_state(std::uint64_t origin, std::uint64_t subnet) {
  // Not before the subnet is known (the local PortInfo may have been lost).
  if (!pending_state_ || !subnet) return;
  auto saved = std::move(*pending_state_);
  pending_state_.reset();
  if (saved.origin != origin) {
    state_.reject("written for the fabric as seen from node " + hex_guid(saved.origin) +
                  ", this daemon's node is " + hex_guid(origin));
    return;
  }
  for (const auto& l : saved.links) {
    if (l.subnet != subnet) {
      state_.reject("written for subnet " + hex_guid(l.subnet) + ", this port's is " +
                    hex_guid(subnet));
      return;
    }
  }
  auto now = Clock::now();
  std::size_t restored = 0;
  for (const auto& l : saved.links) {
    auto seen = state::to_steady(l.seen);
    if (now - seen > config_.link_memory) continue;
    // What discovery has just seen is newer.
    restored += links_seen_
                    .try_emplace({l.guid, l.port},
                                 RememberedLink{l.remote_guid, l.remote_port, l.remote_type, l.name,
                                                l.remote_name, seen})
                    .second;
  }
  ++links_version_;
  state_.set_restored(restored);
}

void FabricCollector::save_state(std::uint64_t origin, std::uint64_t subnet) {
  if (!state_.enabled() || !subnet) return;
  state::State s;
  s.collector = "fabric";
  s.origin = origin;
  s.saved = state::unix_now();
  s.links.reserve(links_seen_.size());
  for (const auto& [end, link] : links_seen_) {
    s.links.push_back(state::LinkRecord{subnet, "", end.first, end.second, link.remote_guid,
                                        link.remote_port, link.remote_type,
                                        state::to_unix(link.seen), link.name, link.remote_name});
  }
  state_.save(std::move(s));
}

bool FabricCollector::exported(std::string_view metric) const {
  if (config_.counters.empty()) return true;
  if (metric.ends_with("_total")) metric.remove_suffix(6);
  return config_.counters.count(std::string(metric)) > 0;
}

void FabricCollector::remember_links(const Topology& topology) {
  auto now = Clock::now();
  for (const auto& [end, link] : topology.links()) {
    // A cable this discovery did not see keeps the time it was last seen.
    if (link.carried) continue;
    const Node* node = topology.find(end.first);
    if (!node || node->type != IB_NODE_SWITCH) continue;
    const Node* remote = topology.find(link.remote_guid);
    links_seen_[end] = {link.remote_guid,
                        link.remote_port,
                        remote ? remote->type : 0,
                        names_->name(end.first, node->description),
                        names_->name(link.remote_guid, remote ? remote->description : ""),
                        now};
  }
  std::erase_if(links_seen_,
                [&](const auto& entry) { return now - entry.second.seen > config_.link_memory; });
  ++links_version_;
}

void FabricCollector::collect(Done done) {
  if (!state_loaded_) {
    state_loaded_ = true;
    pending_state_ = state_.load();
  }
  auto engine = mad_.engine();
  if (!engine) {
    done(CollectResult{{}, false, "no MAD engine"});
    return;
  }
  if (!rediscover_ && topology_ && sweeps_since_discovery_ < config_.rediscover_every) {
    sweep(std::move(done), false, true, "");
    return;
  }
  auto started = Clock::now();
  auto discovery = std::make_shared<Discovery>(*this, [this, started, done = std::move(done)](
                                                          std::shared_ptr<Topology> topology,
                                                          int failed) mutable {
    discovery_seconds_ = seconds_since(started);
    ++discoveries_;
    auto now = Clock::now();
    // Keep the last topology when this one is empty: the switches of a fabric that does
    // not answer now still exist, and sweeping them counts their failures. Under MAD loss the
    // local node's own NodeInfo can be lost too (the simulator drops directed-route SMPs at the
    // local port); with a topology known, the sweep says whether the fabric answers, and the
    // next collection discovers again.
    if (topology->nodes().empty()) {
      if (topology_ && config_.keep_unread.count() > 0) {
        rediscover_ = true;
        sweep(std::move(done), false, true, "");
        return;
      }
      sweep(std::move(done), false, false,
            "discovery failed: the local node did not answer NodeInfo");
      return;
    }
    if (topology_) {
      // A lost MAD must not rename a node, take a switch's LID or forget a switch.
      topology->fill_unanswered(*topology_);
      if (failed > 0 && config_.keep_unread.count() > 0) {
        topology->carry_missed(*topology_, [&](std::uint64_t guid) {
          auto it = last_seen_.find(guid);
          return it != last_seen_.end() && now - it->second <= config_.keep_unread;
        });
      }
    }
    if (topology->count(IB_NODE_SWITCH) == 0) {
      sweep(std::move(done), false, false,
            "discovery found no switch (is the local port's link down?)");
      return;
    }
    discovery_timestamp_ =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::size_t carried = 0;
    for (const auto& [guid, node] : topology->nodes()) {
      if (node.carried) {
        ++carried;
      } else {
        last_seen_[guid] = now;
      }
    }
    auto gone = [&](const auto& entry) { return !topology->find(entry.first); };
    std::erase_if(last_seen_, gone);
    std::erase_if(memory_, gone);
    std::erase_if(last_caps_, gone);
    std::erase_if(switch_timeouts_, gone);
    if (carried) {
      spdlog::debug("fabric: discovery lost {} queries; kept {} nodes it did not find", failed,
                    carried);
    }
    topology_ = std::move(topology);
    remember_links(*topology_);
    for (const auto& [guid, node] : topology_->nodes()) {
      if (!node.route.empty() || node.carried) continue;
      restore_state(guid, topology_->subnet_prefix);
      save_state(guid, topology_->subnet_prefix);
      break;
    }
    pma_caps_.clear();
    rediscover_ = false;
    sweeps_since_discovery_ = 0;
    spdlog::debug("fabric: discovery done switches={} cas={} cables={} seconds={:.3f}",
                  topology_->count(IB_NODE_SWITCH), topology_->count(IB_NODE_CA),
                  topology_->cable_count(), discovery_seconds_);
    sweep(std::move(done), true, true, "");
  });
  discovery->start();
}

void FabricCollector::sweep(Done done, bool fresh, bool discovery_ok, std::string discovery_error) {
  auto topology = topology_ ? topology_ : std::make_shared<const Topology>();
  auto s = std::make_shared<Sweep>(*this, std::move(topology), fresh, std::move(done), discovery_ok,
                                   std::move(discovery_error));
  s->start();
}

void FabricCollector::note_result(const char* phase, const char* attribute,
                                  const std::function<std::string()>& subject,
                                  const mad::Response& r) {
  errors_.note(r, {phase, attribute}, [&] {
    return fmt::format("phase={} attribute={} subject=\"{}\"", phase, attribute, subject());
  });
}

namespace {
std::string counter_key(std::string_view metric) {
  if (metric.ends_with("_total")) metric.remove_suffix(6);
  return std::string(metric);
}
}  // namespace

std::vector<std::string> known_counters() {
  std::vector<std::string> out;
  for (const auto& def : mad::counter_defs()) out.push_back(counter_key(def.metric));
  for (const auto& attribute : mad::detail_attributes()) {
    for (const auto& def : attribute.counters) out.push_back(counter_key(def.metric));
  }
  return out;
}

std::set<std::string> errors_and_traffic_counters() {
  using K = mad::CounterDef::Kind;
  std::set<std::string> out;
  for (const auto& def : mad::counter_defs()) {
    if (def.kind != K::ietf) out.insert(counter_key(def.metric));
  }
  for (const auto& attribute : mad::detail_attributes()) {
    for (const auto& def : attribute.counters) out.insert(counter_key(def.metric));
  }
  return out;
}

CollectorSpec spec() {
  return CollectorSpec{
      "fabric", false, std::chrono::seconds(60),
      [](CollectorContext& context, ConfigSection& section) -> std::unique_ptr<Collector> {
        FabricConfig c;
        c.shards = static_cast<int>(section.get_int("shards", c.shards, 1, 4096));
        c.shard = static_cast<int>(section.get_int("shard", c.shard, 0, 4095));
        c.rediscover_every =
            static_cast<int>(section.get_int("rediscover_every", c.rediscover_every, 1, 1000000));
        c.max_hops = static_cast<int>(section.get_int("max_hops", c.max_hops, 1, kMaxHops));
        c.error_details = section.get_bool("error_details", c.error_details);
        c.link_memory = section.get_duration("link_memory", c.link_memory);
        c.keep_unread =
            section.get_duration("keep_unread", c.keep_unread, std::chrono::nanoseconds{0});
        if (section.has("counters") && section.node()["counters"].IsSequence()) {
          auto known = known_counters();
          for (const auto& name : section.get_string_list("counters")) {
            if (std::find(known.begin(), known.end(), name) == known.end()) {
              std::string list;
              for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
              section.fail("counters", "unknown counter \"" + name + "\"; known: " + list);
            }
            c.counters.insert(name);
          }
          if (c.counters.empty()) section.fail("counters", "the list names no counter");
        } else if (section.get_enum("counters", "all", {"all", "errors_and_traffic"}) ==
                   "errors_and_traffic") {
          c.counters = errors_and_traffic_counters();
        }
        if (c.shard >= c.shards) {
          section.fail("shard", "shard " + std::to_string(c.shard) + " must be less than shards " +
                                    std::to_string(c.shards));
        }
        section.finish();
        return std::make_unique<FabricCollector>(context.io, context.mad_engine, std::move(c),
                                                 context.node_names, context.state_directory);
      }};
}

}  // namespace ibfabric::fabric
