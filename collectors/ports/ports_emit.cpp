// The pass's result: each link's sides as series (with what memory supplies for the parts this
// pass lost, and what it keeps for the next), the state file, and the summary once the last
// query has settled. What is asked is ports_run.cpp's.
#include "collectors/ports/ports_run.h"

#include "collectors/ports/ports_collector.h"
#include "ib/link_rate.h"
#include "ib/transmit_wait_tick.h"

#include <algorithm>

namespace ibfabric::ports {
namespace {

using prometheus::MetricType;
using Clock = std::chrono::steady_clock;

}  // namespace

// A side whose queries were lost in this pass takes the parts it lacks from its memory,
// when they were read within keep_unread.
void PortsRun::recall(const Link& link, Side& s, Which w, TimePoint now) {
  auto it = s_.memory.find({link.local_port.ca, link.local_port.port, side_label(w)});
  if (!s.lost || it == s_.memory.end()) return;
  const Side& m = it->second;
  const auto keep = config_.keep_unread;
  auto use = [&](TimePoint at) {
    if (now - at > keep) return false;
    if (!s.stale_since || at < *s.stale_since) s.stale_since = at;
    return true;
  };
  if (!s.port_info && m.port_info && use(m.port_info_at)) {
    s.port_info = m.port_info;
    s.port_info_at = m.port_info_at;
  }
  // A switch peer's port 0 (its LID and CapabilityMask).
  if (!s.switch_capability_mask && m.switch_capability_mask && use(m.switch_port0_at)) {
    s.switch_capability_mask = m.switch_capability_mask;
    s.switch_port0_at = m.switch_port0_at;
    if (!s.pma_lid) s.pma_lid = m.pma_lid;
  }
  if (!s.caps && m.caps && use(m.caps_at)) {
    s.caps = m.caps;
    s.caps_at = m.caps_at;
  }
  if (s.basic.empty() && !m.basic.empty() && use(m.basic_at)) {
    s.basic = m.basic;
    s.basic_at = m.basic_at;
  }
  if (s.extended.empty() && !m.extended.empty() && use(m.extended_at)) {
    s.extended = m.extended;
    s.extended_at = m.extended_at;
  }
  for (std::size_t a = 0; a < m.details.size(); ++a) {
    if (m.details[a].empty() || (a < s.details.size() && !s.details[a].empty())) continue;
    if (!use(m.details_at[a])) continue;
    s.details.resize(m.details.size());
    s.details_at.resize(m.details.size());
    s.details[a] = m.details[a];
    s.details_at[a] = m.details_at[a];
  }
}

// Keeps what the side gave (read now or recalled) for the next pass; a part not read now
// stays until it is older than keep_unread.
void PortsRun::remember(const Link& link, const Side& s, Which w, TimePoint now) {
  auto& m = s_.memory[{link.local_port.ca, link.local_port.port, side_label(w)}];
  const auto keep = config_.keep_unread;
  auto expired = [&](TimePoint at) { return now - at > keep; };
  if (s.port_info) {
    m.port_info = s.port_info;
    m.port_info_at = s.port_info_at;
  } else if (expired(m.port_info_at)) {
    m.port_info.reset();
  }
  if (s.switch_capability_mask) {
    m.switch_capability_mask = s.switch_capability_mask;
    m.switch_port0_at = s.switch_port0_at;
    m.pma_lid = s.pma_lid;
  } else if (expired(m.switch_port0_at)) {
    m.switch_capability_mask.reset();
  }
  if (s.caps) {
    m.caps = s.caps;
    m.caps_at = s.caps_at;
  } else if (expired(m.caps_at)) {
    m.caps.reset();
  }
  if (!s.basic.empty()) {
    m.basic = s.basic;
    m.basic_at = s.basic_at;
  } else if (expired(m.basic_at)) {
    m.basic.clear();
  }
  if (!s.extended.empty()) {
    m.extended = s.extended;
    m.extended_at = s.extended_at;
  } else if (expired(m.extended_at)) {
    m.extended.clear();
  }
  if (m.details.size() < s.details.size()) {
    m.details.resize(s.details.size());
    m.details_at.resize(s.details.size());
  }
  for (std::size_t a = 0; a < m.details.size(); ++a) {
    if (a < s.details.size() && !s.details[a].empty()) {
      m.details[a] = s.details[a];
      m.details_at[a] = s.details_at[a];
    } else if (expired(m.details_at[a])) {
      m.details[a].clear();
    }
  }
}

void PortsRun::emit_side(MetricsBuilder& out, const Link& link, const Side& s, Which w,
                         TimePoint now) {
  Labels l{{"device", link.local_port.ca},
           {"port", std::to_string(link.local_port.port)},
           {"side", side_label(w)}};
  if (s.stale_since) {
    out.gauge("ibfabric_ports_stale_seconds",
              "Present only while some series of this side of the port hold values from an "
              "earlier collection (its queries were lost since): seconds since the oldest of "
              "them was read.",
              l, std::chrono::duration<double>(now - *s.stale_since).count());
  }
  if (s.port_info) {
    auto pi = *s.port_info;
    if (s.switch_capability_mask) {
      pi.extended_speeds = (*s.switch_capability_mask & mad::kPortCapExtendedSpeeds) != 0;
    }
    Labels info = l;
    info.emplace_back("state", mad::state_name(pi.state));
    info.emplace_back("physical_state", mad::phys_state_name(pi.phys_state));
    info.emplace_back("link_width", mad::width_name(pi.width_active));
    info.emplace_back("link_speed", mad::active_speed_name(pi));
    info.emplace_back("link_width_enabled", mad::width_names(pi.width_enabled));
    info.emplace_back("link_width_supported", mad::width_names(pi.width_supported));
    info.emplace_back("link_speed_enabled", mad::enabled_speed_names(pi));
    info.emplace_back("link_speed_supported", mad::supported_speed_names(pi));
    out.info("ibfabric_ports_info",
             "Names behind the numeric port gauges: states, active/enabled/supported link "
             "widths and speeds (mad::PortInfo).",
             info);
    out.gauge("ibfabric_ports_state",
              "Logical port state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE (mad::PortInfo.PortState).", l,
              pi.state);
    out.gauge("ibfabric_ports_physical_state",
              "Physical port state: 1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, "
              "5 LinkUp, 6 LinkErrorRecovery, 7 PhyTest (mad::PortInfo.PortPhysicalState).",
              l, pi.phys_state);
    out.gauge("ibfabric_ports_link_width_lanes",
              "Active link width in mad::lanes, 0 when the link is down "
              "(mad::PortInfo.LinkWidthActive).",
              l, mad::lanes(pi.width_active));
    out.gauge("ibfabric_ports_link_speed_lane_bytes_per_second",
              "Nominal signalling rate of one lane in bytes per second, Gb/s times 1e9 / 8: 2.5 "
              "SDR, 5 DDR, 10 QDR, 14 FDR, 25 EDR, 50 HDR, 100 NDR Gb/s "
              "(mad::PortInfo.LinkSpeedActive / LinkSpeedExtActive).",
              l, mad::lane_gbps(pi) * 1e9 / 8);
    out.gauge(
        "ibfabric_ports_rate_bytes_per_second",
        "Nominal signalling rate of the link in bytes per second (mad::lanes times lane rate).", l,
        mad::lanes(pi.width_active) * mad::lane_gbps(pi) * 1e9 / 8);
    if (auto effective = link_rate::effective_bytes_per_second(pi)) {
      out.gauge("ibfabric_ports_effective_rate_bytes_per_second",
                "Data rate of the link after line encoding (8b/10b up to QDR, 64b/66b for "
                "FDR and EDR, FEC from HDR on), in bytes per second.",
                l, *effective);
    }
    out.gauge("ibfabric_ports_mtu_bytes", "Active MTU in bytes (mad::PortInfo.NeighborMTU).", l,
              mad::mtu_bytes(pi.neighbor_mtu));
    out.gauge("ibfabric_ports_mtu_capability_bytes",
              "Largest MTU the port supports (mad::PortInfo.MTUCap).", l,
              mad::mtu_bytes(pi.mtu_capability));
    std::uint16_t lid = w == Which::local ? pi.lid : (s.pma_lid ? s.pma_lid : pi.lid);
    out.gauge("ibfabric_ports_lid",
              "LID of the port (for a switch peer: the switch's LID, from its port 0).", l, lid);
    if (w == Which::local) {
      out.gauge("ibfabric_ports_lmc", "LID mask control of the local port (mad::PortInfo.LMC).", l,
                pi.lmc);
      out.gauge("ibfabric_ports_sm_lid",
                "LID of the master Subnet Manager the local port points at "
                "(mad::PortInfo.MasterSMLID).",
                l, pi.sm_lid);
    }
  }
  if (s.caps) {
    out.gauge("ibfabric_ports_pma_capability_mask",
              "CapabilityMask of the port's Performance Management agent (ClassPortInfo): "
              "0x200 PortCountersExtended, 0x400 the same without uni/multicast counters, 0x1000 "
              "PortXmitWait.",
              l, s.caps->mask);
    const std::uint8_t* basic = s.basic.empty() ? nullptr : s.basic.data();
    const std::uint8_t* extended = s.extended.empty() ? nullptr : s.extended.data();
    for (const auto& v : mad::merge_counters(*s.caps, basic, extended)) {
      if (v.def->kind == mad::CounterDef::Kind::xmit_wait) emit_tick(out, link, s, w, l);
      std::string name = "ibfabric_ports_" + std::string(v.def->metric);
      std::string help = std::string(v.def->help) + " (" + std::string(v.def->pma_name) + ")";
      out.counter(name, help, l, v.value);
      if (v.saturated) {
        Labels sl = l;
        sl.emplace_back("counter", std::string(v.def->pma_name));
        out.gauge("ibfabric_ports_counters_saturated",
                  "1 when a counter read from 32-bit PortCounters is pegged at its maximum and "
                  "stopped counting.",
                  sl, *v.saturated ? 1 : 0);
      }
    }
    mad::add_detail_counters(out, "ibfabric_ports_", l, s.details);
  }
}

// The tick of the side's PortXmitWait, where its device's is known: the share of time it waited
// is ticks x bytes (x width, per lane) / data rate (docs/collectors.md#congested-time).
void PortsRun::emit_tick(MetricsBuilder& out, const Link& link, const Side& s, Which w,
                         const Labels& l) {
  std::optional<std::uint64_t> guid = link.local_port.node_guid;
  if (w == Which::peer) {
    guid = s.node_guid;
    auto seen = s_.peers_seen.find({link.local_port.ca, link.local_port.port});
    if (!guid && seen != s_.peers_seen.end()) guid = seen->second.guid;
  }
  if (!guid) return;
  auto ids = s_.device_ids.find(*guid);
  if (ids == s_.device_ids.end()) return;
  auto tick =
      transmit_wait_tick(ids->second.first, ids->second.second, config_.transmit_wait_ticks);
  if (!tick) return;
  Labels tl = l;
  tl.emplace_back("per", tick->per_lane ? "lane" : "port");
  out.gauge("ibfabric_ports_transmit_wait_tick_bytes",
            "One PortXmitWait tick of this side's device is the time this many bytes take to "
            "send at the port's data rate (per=\"port\") or at one lane's (per=\"lane\"); "
            "absent where the device's tick is not known (docs/collectors.md#congested-time).",
            tl, tick->bytes);
}

// ibfabric_ports_peer_info: who is at the far end of the local port's cable, from this pass
// or, once the far end stopped answering, as it was last seen (within link_memory).
void PortsRun::emit_peer(MetricsBuilder& out, const Link& link, Clock::time_point now) {
  const auto& lp = link.local_port;
  auto key = std::make_pair(lp.ca, lp.port);
  if (link.local_description) s_.local_descriptions[lp.ca] = *link.local_description;
  if (const auto& p = link.peer; p.node_guid) {
    // A lost NodeDescription keeps the one last read of the same node: a lost MAD must not
    // rename the far end (and change this series' labels).
    std::string description = p.node_description.value_or("");
    if (auto old = s_.peers_seen.find(key);
        !p.node_description && old != s_.peers_seen.end() && old->second.guid == *p.node_guid) {
      description = old->second.description;
    }
    // The local PortInfo (and with it the subnet) may have been lost in this pass.
    auto subnet = link.subnet;
    if (auto old = s_.peers_seen.find(key); !subnet && old != s_.peers_seen.end()) {
      subnet = old->second.subnet;
    }
    // The port number comes with the peer's PortInfo; when that was lost, NodeInfo's
    // LocalPortNum is the same port.
    s_.peers_seen[key] = {lp.node_guid, subnet,
                          *p.node_guid, p.pma_port ? p.pma_port : p.entered_port,
                          p.node_type,  std::move(description),
                          now};
  }
  auto it = s_.peers_seen.find(key);
  if (it == s_.peers_seen.end()) return;
  const auto& peer = it->second;
  if (now - peer.seen > config_.link_memory) {
    s_.peers_seen.erase(it);
    return;
  }
  auto local_description = s_.local_descriptions.find(lp.ca);
  out.info(
      "ibfabric_ports_peer_info",
      "The node and port at the other end of the local port's cable (NodeInfo, "
      "NodeDescription over a one-hop directed route), with both ends' names "
      "(node-name-map, else NodeDescription, else GUID). Kept for link_memory after the "
      "far end stops answering, so a cable that went down is still named.",
      {{"device", lp.ca},
       {"port", std::to_string(lp.port)},
       {"node_guid", hex_guid(lp.node_guid)},
       {"node_name", names_.name(lp.node_guid, local_description == s_.local_descriptions.end()
                                                   ? std::string_view{}
                                                   : std::string_view{local_description->second})},
       {"peer_node_guid", hex_guid(peer.guid)},
       {"peer_port", std::to_string(peer.port)},
       {"peer_node_type", mad::node_type_name(peer.type)},
       {"peer_node_description", trim_node_description(peer.description)},
       {"peer_node_name", names_.name(peer.guid, peer.description)}});
}

// The link memory of the state file, for the local ports that are still there with the same
// CA (node GUID); once, at the first collection.
void PortsRun::restore_state() {
  // Not before the local ports are listed and have answered their PortInfo: they say which
  // records are this host's (CA node GUID, port, subnet).
  if (!s_.pending_state || links_.empty()) return;
  for (const auto& link : links_) {
    if (!link.local_answered) return;
  }
  auto saved = std::move(*s_.pending_state);
  s_.pending_state.reset();
  auto now = Clock::now();
  std::size_t restored = 0;
  std::size_t matched = 0;
  std::size_t other_subnet = 0;
  for (const auto& l : saved.links) {
    auto link = std::find_if(links_.begin(), links_.end(), [&](const Link& k) {
      return k.local_port.ca == l.device && k.local_port.port == l.port &&
             k.local_port.node_guid == l.guid;
    });
    if (link == links_.end()) continue;
    if (link->subnet != l.subnet) {
      ++other_subnet;
      continue;
    }
    ++matched;
    auto seen = state::to_steady(l.seen);
    if (now - seen > config_.link_memory) continue;
    s_.local_descriptions.try_emplace(l.device, l.name);
    restored += s_.peers_seen
                    .try_emplace({l.device, l.port},
                                 RememberedPeer{l.guid, l.subnet, l.remote_guid, l.remote_port,
                                                l.remote_type, l.remote_name, seen})
                    .second;
  }
  if (other_subnet > 0) {
    s_.store.reject(std::to_string(other_subnet) +
                    " records written for a local port on another subnet (GID prefix); those "
                    "are not used");
  } else if (!saved.links.empty() && matched == 0) {
    s_.store.reject("written for other local ports (CA node GUIDs) than this host's");
  }
  s_.store.set_restored(restored);
}

void PortsRun::save_state() {
  if (!s_.store.enabled()) return;
  state::State s;
  s.collector = "ports";
  s.saved = state::unix_now();
  for (const auto& [key, peer] : s_.peers_seen) {
    if (!peer.subnet) continue;  // not known yet: the file would not be used
    auto description = s_.local_descriptions.find(key.first);
    s.links.push_back(state::LinkRecord{
        peer.subnet, key.first, peer.local_guid, key.second, peer.guid, peer.port, peer.type,
        state::to_unix(peer.seen),
        description == s_.local_descriptions.end() ? std::string() : description->second,
        peer.description});
  }
  s_.store.save(std::move(s));
}

void PortsRun::settled() {
  MetricsBuilder out;
  restore_state();
  auto now = Clock::now();
  out.declare("ibfabric_ports_state", "Logical port state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE.",
              MetricType::Gauge);
  bool any_local = false;
  const bool keep = config_.keep_unread.count() > 0;
  for (auto& link : links_) {
    any_local = any_local || link.local_answered;
    // Lost values are recalled only in a pass that got any answer at all (one that got none
    // is a failed collection, not a lossy cable), and for the peer only when it was asked
    // (the local port was, or was last read, LinkUp).
    if (keep && any_answer_) {
      recall(link, link.local, Which::local, now);
      if (link.peer_asked) recall(link, link.peer, Which::peer, now);
    }
    emit_side(out, link, link.local, Which::local, now);
    emit_side(out, link, link.peer, Which::peer, now);
    emit_peer(out, link, now);
    if (keep) {
      remember(link, link.local, Which::local, now);
      remember(link, link.peer, Which::peer, now);
    }
  }
  out.declare("ibfabric_ports_query_errors_total",
              "MAD queries of the collector that failed (timeout, error status, no port)",
              MetricType::Counter);
  for (const auto& [key, n] : s_.errors.counts()) {
    const auto& [device, port, side, attribute] = key;
    out.counter("ibfabric_ports_query_errors_total",
                "MAD queries of the collector that failed (timeout, error status, no port)",
                {{"device", device},
                 {"port", std::to_string(port)},
                 {"side", side},
                 {"attribute", attribute}},
                static_cast<double>(n));
  }
  save_state();
  s_.store.fill_metrics(out);
  CollectResult result;
  // No InfiniBand port (a RoCE-only or IB-less node) is nothing to collect, not a failure;
  // a port that exists but does not answer is. A pass that lost the local PortInfo but got
  // other answers is a lossy fabric, not a failed source.
  if (!links_.empty() && !any_local && !any_answer_) {
    result.success = false;
    result.error = "no local port answered its mad::PortInfo query";
  }
  result.metrics = std::move(out).take();
  auto done = std::move(done_);
  done(std::move(result));
}

}  // namespace ibfabric::ports
