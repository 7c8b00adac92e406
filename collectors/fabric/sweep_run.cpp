// The sweep's asking: which switch and port is asked what, when, of whom (docs/design.md, "What
// each sweep asks"). What a switch's answers become is sweep_emit.cpp's.
#include "collectors/fabric/sweep_run.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace ibfabric::fabric {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

SweepRun::SweepRun(FabricState& kept, std::shared_ptr<const Topology> topology, bool fresh,
                   Collector::Done done, bool discovery_ok, std::string discovery_error,
                   CompressInfo compress_info, CompressPart compress_part)
    : FanOut(kept.mad),
      kept_(kept),
      topology_(std::move(topology)),
      fresh_(fresh),
      done_(std::move(done)),
      discovery_ok_(discovery_ok),
      discovery_error_(std::move(discovery_error)),
      compress_info_(std::move(compress_info)),
      compress_part_(std::move(compress_part)) {}

void SweepRun::start() {
  auto& cache = kept_.labels;
  if (cache.topology_version == kept_.topology_version &&
      cache.links_version == kept_.links_version) {
    begin();
    return;
  }
  FabricState::LabelCache next;
  next.swept = swept_switches();
  if (cache.topology_version && next.swept == cache.swept) {
    // A port's label set names its switch and number only: while the switches swept are the
    // same, with as many ports each, so are the sets, and the shown snapshot and this sweep
    // share them (a second copy after each rediscovery was 5 MB at 50,000 switch ports). No
    // set is added to an arena a shown snapshot reads.
    next.arena = cache.arena;
    next.ports = std::move(cache.ports);
  }
  cache = std::move(next);
  cache.topology_version = kept_.topology_version;
  cache.links_version = kept_.links_version;
  // Made and compressed on a thread of their own (their label text, both ends of every cable
  // by name, is the longest of the exposition, and only a scrape reads it), before the sweep
  // begins, so that what that takes is never added to what the sweep builds.
  const auto& cfg = kept_.config;
  compress_info_(
      TopologyInfo{topology_, kept_.links_seen, kept_.names, cfg.shard, cfg.shards},
      [self = std::static_pointer_cast<SweepRun>(shared_from_this())] { self->begin(); });
}

std::vector<std::pair<std::uint64_t, int>> SweepRun::swept_switches() const {
  std::vector<std::pair<std::uint64_t, int>> out;
  for (const Node* node : topology_->switches()) {
    if (in_shard(node->guid, kept_.config.shard, kept_.config.shards)) {
      out.emplace_back(node->guid, node->num_ports);
    }
  }
  return out;
}

void SweepRun::begin() {
  started_ = Clock::now();
  for (const Node* node : topology_->switches()) {
    if (!in_shard(node->guid, kept_.config.shard, kept_.config.shards)) continue;
    switches_.push_back(SwitchResult{node, std::nullopt, {}, false, false, 0, false});
  }
  pending_.assign(switches_.size(), 0);
  gave_up_place_.assign(switches_.size(), 0);
  out_.size_hints(&kept_.family_sizes);
  const auto& cfg = kept_.config;
  out_.info("ibfabric_fabric_shard_info", "Which shard of the fabric this daemon sweeps.",
            {{"shard", std::to_string(cfg.shard)}, {"shards", std::to_string(cfg.shards)}});
  for (const auto& family : *kept_.labels.info) out_.add_family(family);
  out_.adopt(kept_.labels.arena);
  launch([this] {
    // Right after a discovery the ports' PortInfo is the discovery's own; otherwise it comes from
    // the SA's table when there is an SA to ask. The switches' counters are asked meanwhile.
    if (!fresh_ && !switches_.empty() && mad::routable_lid(topology_->sm_lid)) {
      if (kept_.table_sweeps_skipped > 0 && kept_.table_skipped_lid == topology_->sm_lid) {
        --kept_.table_sweeps_skipped;
      } else {
        ask_port_info_records();
      }
    }
    for (std::size_t k = 0; k < kSwitchesInFlight; ++k) start_next_switch();
  });
}

void SweepRun::ask_port_info_records() {
  mad::Request req;
  req.to = mad::Destination::to_lid(topology_->sm_lid);
  req.mgmt_class = mad::kSubnAdm;
  req.method = IB_MAD_METHOD_GET_TABLE;
  req.attr_id = IB_SA_ATTR_PORTINFORECORD;
  // No component mask: every port's record. The answer is as large as the table (RMPP): 4.3 MB
  // at 50,000 switch ports, which an SM takes a while to build. One attempt, with time for it: a
  // retry would have the SM build the whole table again, and a table that does not come costs
  // only the SMPs of the ports (the switches wait for it, so a dead SA costs each sweep this).
  req.timeout = kTableTimeout;
  req.retries = 0;
  sa_pending_ = true;
  FanOut::ask(std::move(req), 0, [this, asked = Clock::now()](const mad::Response& r) {
    auto lid = topology_->sm_lid;
    kept_.note_result(
        "sweep", "port_info_record", [lid] { return "sa lid " + std::to_string(lid); }, r);
    std::size_t used = r.ok() ? use_port_info_records(r) : 0;
    spdlog::debug("fabric: port info records sa_lid={} result={} octets={} used={} seconds={:.3f}",
                  lid, mad::to_string(r.status), r.mad.size(), used, seconds_since(asked));
    kept_.table_sweeps_skipped = used == 0 ? kSweepsWithoutTable : 0;
    kept_.table_skipped_lid = lid;
    sa_pending_ = false;
    // The switches started meanwhile: the PortInfo of the ports they have asked so far, then
    // what the table held them back from.
    for (auto i : std::exchange(sa_waiting_, {})) {
      for (std::size_t idx = 0; idx < switches_[i].next_port; ++idx) port_info(i, idx);
      --pending_[i];
      after_query(i);
    }
  });
}

std::size_t SweepRun::use_port_info_records(const mad::Response& r) {
  sa_at_ = Clock::now();
  std::size_t used = 0;
  std::unordered_map<std::uint16_t, std::size_t> by_lid;
  for (std::size_t i = 0; i < switches_.size(); ++i) {
    if (mad::routable_lid(switches_[i].node->lid)) by_lid.emplace(switches_[i].node->lid, i);
  }
  sa_info_.resize(switches_.size());
  mad::for_each_port_info_record(r.mad.data(), r.mad.size(), [&](const mad::PortInfoRecord& rec) {
    auto it = by_lid.find(rec.lid);
    if (it == by_lid.end()) return;
    auto& ports = sa_info_[it->second];
    auto n = static_cast<std::size_t>(std::max(0, switches_[it->second].node->num_ports));
    if (rec.port < 1 || static_cast<std::size_t>(rec.port) > n) return;
    // The SM keeps no width and speed of a port whose link is not up (opensm's record reads 0),
    // where the port's SMA answers what it last trained at: such a port is asked by SMP, so
    // that the exposition does not depend on where its PortInfo came from.
    if (rec.info.phys_state != kPhysLinkUp) return;
    if (ports.size() < n) ports.resize(n);
    ports[static_cast<std::size_t>(rec.port) - 1] = rec.info;
    ++used;
  });
  return used;
}

void SweepRun::port_info(std::size_t i, std::size_t idx) {
  auto& sw = switches_[i];
  if (const auto* record = sa_record(i, idx)) {
    sw.ports[idx].port_info = *record;
    sw.ports[idx].port_info_at = sa_at_;
    return;
  }
  auto port = [this, i, idx]() -> PortResult& { return switches_[i].ports[idx]; };
  ask(
      i, "port_info",
      mad::Request::smp_get(mad::Destination::to_lid(sw.node->lid), IB_ATTR_PORT_INFO,
                            static_cast<std::uint32_t>(idx + 1)),
      [port](const mad::Response& r) {
        port().port_info = mad::decode_port_info(r.data());
        port().port_info_at = Clock::now();
      },
      [port](const mad::Response&) { port().failed = port().lost_info = true; });
}

const mad::PortInfo* SweepRun::sa_record(std::size_t i, std::size_t idx) const {
  if (i >= sa_info_.size() || idx >= sa_info_[i].size() || !sa_info_[i][idx]) return nullptr;
  return &*sa_info_[i][idx];
}

void SweepRun::start_next_switch() {
  while (next_switch_ < switches_.size()) {
    std::size_t i = next_switch_++;
    query_switch(i);
    if (pending_[i] > 0) return;
    finish_switch(i);
  }
}

void SweepRun::after_query(std::size_t i) {
  ask_ports(i);
  const auto& sw = switches_[i];
  if (pending_[i] == 0) {
    finish_switch(i);
    if (gave_up_place_[i]) {
      --giving_up_place_;
    } else {
      start_next_switch();
    }
  } else if (sa_pending_ && pending_[i] == 1 && !gave_up_place_[i] &&
             sw.next_port == sw.ports.size() && giving_up_place_ < kSwitchesWaitingForTable) {
    // Its one count left is the table's: every switch started while the table is out holds
    // one (query_switch).
    gave_up_place_[i] = 1;
    ++giving_up_place_;
    start_next_switch();
  }
}

void SweepRun::finish_switch(std::size_t i) {
  auto& sw = switches_[i];
  if (!any_answered_) {
    held_back_.push_back(i);
    return;
  }
  emit_finished(sw, Clock::now());
}

void SweepRun::ask(std::size_t i, const char* attribute, mad::Request req,
                   std::function<void(const mad::Response&)> on_ok,
                   std::function<void(const mad::Response&)> on_fail) {
  auto min_size = mad::attribute_size(req.mgmt_class);
  ++pending_[i];
  FanOut::ask(std::move(req), min_size,
              [this, i, attribute, on_ok = std::move(on_ok),
               on_fail = std::move(on_fail)](const mad::Response& r) {
                auto& sw = switches_[i];
                kept_.note_result(
                    "sweep", attribute, [&] { return hex_guid(sw.node->guid); }, r);
                if (r.ok()) {
                  sw.answered = true;
                  on_ok(r);
                } else {
                  if (r.status == mad::Status::timeout) ++kept_.switch_timeouts[sw.node->guid];
                  on_fail(r);
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
                after_query(i);
              });
}

void SweepRun::query_switch(std::size_t i) {
  auto& sw = switches_[i];
  // Allocated now, not at the start: a sweep holds the ports of the switches in flight.
  sw.ports.resize(static_cast<std::size_t>(std::max(0, sw.node->num_ports)));
  auto lid = sw.node->lid;
  if (!mad::routable_lid(lid)) {
    // The SM has not given the switch a LID (yet): nothing can be asked by LID.
    mad::Response r;
    r.status = mad::Status::refused;
    r.error = "switch has no routable LID";
    kept_.note_result(
        "sweep", "lid", [&] { return hex_guid(sw.node->guid); }, r);
    for (auto& p : sw.ports) p.lose_all(kept_.optional.size());
    // What its PMA answered before still says how to read the counters memory gives back.
    if (auto it = kept_.last_caps.find(sw.node->guid); it != kept_.last_caps.end()) {
      sw.caps = it->second;
    }
    return;
  }
  if (sa_pending_) {
    // Not finished before the SA's table is in: its ports' PortInfo waits for it.
    ++pending_[i];
    sa_waiting_.push_back(i);
  }
  if (auto it = kept_.pma_caps.find(sw.node->guid); it != kept_.pma_caps.end()) {
    sw.caps = it->second;
    query_ports(i);
    return;
  }
  ask(
      i, "class_port_info", mad::Request::pma_get(lid, CLASS_PORT_INFO),
      [this, i](const mad::Response& r) {
        auto caps = mad::decode_class_port_info(r.data());
        switches_[i].caps = caps;
        kept_.pma_caps[switches_[i].node->guid] = caps;
        kept_.last_caps[switches_[i].node->guid] = caps;
        query_ports(i);
      },
      [this, i](const mad::Response&) {
        // Lost: the capabilities it answered before (they change with the firmware, not
        // with the traffic) still say what to ask.
        auto& sw = switches_[i];
        if (auto it = kept_.last_caps.find(sw.node->guid); it != kept_.last_caps.end()) {
          sw.caps = it->second;
          query_ports(i);
          return;
        }
        // Never answered: without it no port's counters are asked for, only their PortInfo.
        for (auto& p : sw.ports) p.lose_counters(kept_.optional.size());
        sw.no_counters = true;
        query_ports(i);
      });
}

void SweepRun::query_ports(std::size_t i) {
  switches_[i].next_port = 0;
  ask_ports(i);
}

void SweepRun::ask_ports(std::size_t i) {
  auto& sw = switches_[i];
  if (!sw.caps && !sw.no_counters) return;  // ClassPortInfo not in yet
  auto lid = sw.node->lid;
  while (sw.next_port < sw.ports.size() && pending_[i] < kQueriesPerSwitch) {
    auto idx = sw.next_port++;
    int p = static_cast<int>(idx) + 1;
    auto port = [this, i, idx]() -> PortResult& { return switches_[i].ports[idx]; };
    if (fresh_ && idx < sw.node->port_info.size() && sw.node->port_info[idx]) {
      sw.ports[idx].port_info = sw.node->port_info[idx];
      sw.ports[idx].port_info_at = Clock::now();
      sw.answered = true;  // to this collection's discovery
    } else if (!sa_pending_) {
      port_info(i, idx);
    }  // else when the SA's table is in (ask_port_info_records)
    if (!sw.caps) continue;
    const auto caps = *sw.caps;
    if (mad::needs_port_counters(caps)) {
      auto req = mad::Request::pma_get(lid, IB_GSI_PORT_COUNTERS);
      req.set(IB_PC_PORT_SELECT_F, static_cast<std::uint32_t>(p));
      ask(
          i, "port_counters", std::move(req),
          [port](const mad::Response& r) {
            port().basic.assign(r.data(), r.data() + r.data_size());
            port().basic_at = Clock::now();
          },
          [port](const mad::Response&) { port().failed = port().lost_basic = true; });
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
          [port](const mad::Response&) { port().failed = port().lost_extended = true; });
    }
    const auto& optional = kept_.optional;
    if (optional.empty()) continue;
    auto& values = sw.ports[idx];
    values.optional.resize(optional.size());
    values.optional_at.resize(optional.size());
    values.lost_optional.resize(optional.size());
    for (std::size_t a = 0; a < optional.size(); ++a) {
      auto req = mad::Request::pma_get(lid, optional[a].attribute);
      req.set(IB_PC_PORT_SELECT_F, static_cast<std::uint32_t>(p));
      ask(
          i, optional[a].name, std::move(req),
          [port, a](const mad::Response& r) {
            port().optional[a].assign(r.data(), r.data() + r.data_size());
            port().optional_at[a] = Clock::now();
          },
          [port, a](const mad::Response& r) {
            // A PMA that does not support the attribute answers so (a MAD status): that costs
            // only its series. No answer at all is a lost query, as for the port's other parts.
            port().lost_optional[a] = 1;
            if (r.status != mad::Status::mad_status) port().failed = true;
          });
    }
  }
}

}  // namespace ibfabric::fabric
