// The sweep's result: a finished switch's ports as series (with what memory supplies for the
// parts this sweep lost, and what it keeps for the next), the node and cable info of a topology,
// and the summary when the last query has settled. What is asked is sweep_run.cpp's.
#include "collectors/fabric/sweep_run.h"

#include "core/text_format.h"
#include "ib/link_rate.h"
#include "ib/transmit_wait_tick.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace ibfabric::fabric {
namespace {

using prometheus::MetricType;
using Clock = std::chrono::steady_clock;

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

constexpr const char* kSaturatedHelp =
    "Present (value 1) only for a counter that is pegged at its maximum: one read from 32-bit "
    "PortCounters, or a 16-bit PortVLXmitWait.";

// The labels every series of a switch port carries (port index = port number - 1).
Labels switch_port_labels(const std::string& guid, std::size_t idx) {
  return {{"node_guid", guid}, {"port", std::to_string(idx + 1)}};
}

}  // namespace

void SweepRun::emit_finished(SwitchResult& sw, TimePoint now) {
  if (sw.emitted) return;
  sw.emitted = true;
  if (sw.answered) {
    ++switches_answered_;
    kept_.last_seen[sw.node->guid] = now;
  } else if (!sw.ports.empty() && !sw.node->carried) {
    // A switch that answered nothing has moved, lost its LID or died: look again (unless
    // the last discovery already missed it; it is looked for at every discovery).
    kept_.rediscover = true;
  }
  // Values lost in this sweep are taken from memory only when the fabric answered at all: a
  // sweep that got nothing back is a failed collection, not a lossy cable.
  const bool keep = kept_.config.keep_unread.count() > 0;
  if (keep && any_answered_) recall(sw, now);
  emit_switch(out_, sw, now, ports_ok_, ports_failed_, ports_stale_);
  if (keep) remember(sw, now);
  std::vector<PortResult>().swap(sw.ports);
  auto i = static_cast<std::size_t>(&sw - switches_.data());
  if (i < sa_info_.size()) std::vector<std::optional<mad::PortInfo>>().swap(sa_info_[i]);
  maybe_seal();
}

void SweepRun::maybe_seal() {
  if (!sealing_ && !settling_ && out_.samples() >= kept_.config.seal_samples) seal();
}

bool SweepRun::seal() {
  auto part = out_.take_samples([this](MetricsBuilder::FamilyId id, const MetricFamily& family) {
    return sealed_.contains(id) ||
           (!settling_ && family.samples.size() * kSealFamilyShare >= kept_.config.seal_samples);
  });
  if (part.empty()) return false;
  std::vector<MetricsBuilder::FamilyId> ids;
  MetricFamilies families;
  std::vector<char> headers;  // the first part of a family has its HELP and TYPE
  for (auto& [id, family] : part) {
    headers.push_back(sealed_.contains(id) ? 0 : 1);
    if (!sealed_.contains(id)) {
      auto& sealed = sealed_[id];
      sealed.name = family.name;
      if (auto hint = kept_.sealed_octets.find(family.name); hint != kept_.sealed_octets.end()) {
        sealed.text.deflated.reserve(hint->second + hint->second / 32);
      }
    }
    ids.push_back(id);
    families.push_back(std::move(family));
  }
  sealing_ = true;
  compress_part_(
      std::move(families), std::move(headers),
      [self = std::static_pointer_cast<SweepRun>(shared_from_this()),
       ids = std::move(ids)](Pieces pieces) { self->on_sealed(ids, std::move(pieces)); });
  return true;
}

void SweepRun::on_sealed(const std::vector<MetricsBuilder::FamilyId>& ids, Pieces pieces) {
  // One part is out at a time, so the parts of a family join in the order they were taken.
  for (std::size_t k = 0; k < ids.size() && k < pieces.size(); ++k) {
    append_deflated(sealed_[ids[k]].text, *pieces[k]);
  }
  sealing_ = false;
  if (!settling_) {
    maybe_seal();
  } else if (!seal()) {
    finish();
  }
}

void SweepRun::recall(SwitchResult& sw, TimePoint now) {
  auto it = kept_.memory.find(sw.node->guid);
  if (it == kept_.memory.end()) return;
  const auto& memory = it->second.ports;
  const auto& bytes = it->second.bytes;
  const auto& optional = it->second.optional;
  const std::size_t attributes = kept_.optional.size();
  const auto keep = kept_.config.keep_unread;
  for (std::size_t idx = 0; idx < sw.ports.size() && idx < memory.size(); ++idx) {
    auto& p = sw.ports[idx];
    const auto& m = memory[idx];
    auto use = [&](TimePoint at) {
      if (now - at > keep) return false;
      if (!p.stale_since || at < *p.stale_since) p.stale_since = at;
      return true;
    };
    auto unpack = [&](const FabricState::Kept& from, std::vector<std::uint8_t>& to, TimePoint& at) {
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
    if (optional.size() != memory.size() * attributes) continue;
    for (std::size_t a = 0; a < p.lost_optional.size() && a < attributes; ++a) {
      const auto& kept = optional[idx * attributes + a];
      if (!p.lost_optional[a] || !kept.size) continue;
      if (a < p.optional.size() && !p.optional[a].empty()) continue;
      if (!use(kept.at)) continue;
      p.optional.resize(p.lost_optional.size());
      p.optional_at.resize(p.lost_optional.size());
      unpack(kept, p.optional[a], p.optional_at[a]);
    }
  }
}

void SweepRun::remember(const SwitchResult& sw, TimePoint now) {
  auto& memory = kept_.memory[sw.node->guid];
  memory.ports.resize(sw.ports.size());
  const std::size_t attributes = kept_.optional.size();
  if (memory.optional.size() != sw.ports.size() * attributes) {
    memory.optional.assign(sw.ports.size() * attributes, FabricState::Kept{});
  }
  const auto keep = kept_.config.keep_unread;
  // The switch's buffer is written anew: parts read now, and parts kept from the old one.
  std::vector<std::uint8_t> bytes;
  bytes.reserve(memory.bytes.size());
  auto keep_part = [&](const std::vector<std::uint8_t>& data, TimePoint at, std::size_t used,
                       FabricState::Kept& to) {
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
      to = FabricState::Kept{};
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
    for (std::size_t a = 0; a < attributes; ++a) {
      static const std::vector<std::uint8_t> kNone;
      bool read = a < p.optional.size() && !p.optional[a].empty();
      keep_part(read ? p.optional[a] : kNone, read ? p.optional_at[a] : TimePoint{},
                kept_.optional[a].octets, memory.optional[idx * attributes + a]);
    }
  }
  if (bytes.capacity() > bytes.size() + bytes.size() / 4) bytes.shrink_to_fit();
  memory.bytes = std::move(bytes);
}

void SweepRun::emit_switch(MetricsBuilder& out, const SwitchResult& sw, TimePoint now,
                           int& ports_ok, int& ports_failed, int& ports_stale) {
  auto guid = hex_guid(sw.node->guid);
  out.gauge("ibfabric_fabric_switch_lid", "LID of the switch (PortInfo of its port 0).",
            {{"node_guid", guid}}, sw.node->lid);
  // One series per switch, from 0: a counter that appears at its first increment loses that
  // increment to rate().
  auto timeouts = kept_.switch_timeouts.find(sw.node->guid);
  out.counter(
      "ibfabric_fabric_switch_timeouts_total",
      "Sweep queries to this switch that got no answer after every retry of the MAD "
      "engine.",
      {{"node_guid", guid}},
      timeouts == kept_.switch_timeouts.end() ? 0.0 : static_cast<double>(timeouts->second));
  if (sw.caps) {
    out.gauge("ibfabric_fabric_switch_pma_capability_mask",
              "CapabilityMask of the switch's Performance Management agent (ClassPortInfo).",
              {{"node_guid", guid}}, sw.caps->mask);
    if (sw.caps->xmit_wait() && exported("transmit_wait_ticks")) {
      if (auto tick = transmit_wait_tick(sw.node->vendor_id, sw.node->device_id,
                                         kept_.config.transmit_wait_ticks)) {
        out.gauge("ibfabric_fabric_node_transmit_wait_tick_bytes",
                  "One PortXmitWait tick of this switch is the time this many bytes take to "
                  "send at a port's data rate (per=\"port\") or at one lane's (per=\"lane\"); "
                  "absent where its tick is not known (docs/collectors.md#congested-time).",
                  {{"node_guid", guid}, {"per", tick->per_lane ? "lane" : "port"}}, tick->bytes);
      }
    }
  }
  auto& port_labels = kept_.labels.ports[sw.node->guid];
  if (port_labels.size() != sw.ports.size()) {
    port_labels.clear();
    for (std::size_t idx = 0; idx < sw.ports.size(); ++idx) {
      port_labels.push_back(
          &kept_.labels.arena->sets.emplace_back(label_text(switch_port_labels(guid, idx))));
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
      if (auto effective = link_rate::effective_bytes_per_second(pi)) {
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
      if (!exported(v.def->metric)) continue;
      const auto& [name, help] = counter_names()[static_cast<std::size_t>(v.def - defs)];
      out.counter(name, help, l, v.value);
      if (v.saturated && *v.saturated) {
        Labels sl = switch_port_labels(guid, idx);
        sl.emplace_back("counter", std::string(v.def->pma_name));
        out.gauge("ibfabric_fabric_port_counters_saturated", kSaturatedHelp, sl, 1);
      }
    }
    // The error details come first in `optional`; add_detail_counters() reads those only.
    if (kept_.config.error_details && !pr.optional.empty()) {
      mad::add_detail_counters(out, "ibfabric_fabric_port_", switch_port_labels(guid, idx),
                               pr.optional, [this](std::string_view m) { return exported(m); });
    }
    emit_vl_xmit_wait(out, sw, idx, guid, *l);
  }
}

void SweepRun::emit_vl_xmit_wait(MetricsBuilder& out, const SwitchResult& sw, std::size_t idx,
                                 const std::string& guid, const LabelSet& port_labels) {
  auto slot = kept_.vl_xmit_wait();
  if (!slot) return;
  const auto& pr = sw.ports[idx];
  // Which VLs are the port's: without its PortInfo (lost, and not kept) nothing is exported.
  if (!pr.port_info || *slot >= pr.optional.size()) return;
  const auto& data = pr.optional[*slot];
  if (data.size() < mad::port_vl_xmit_wait_octets()) return;
  int vls = mad::operational_data_vls(pr.port_info->oper_vls);
  static constexpr const char* kHelp =
      "Ticks during which the port had data to send on this VL but sent none "
      "(PortVLXmitWaitCounters; 16 bits, stops at 65535: "
      "docs/collectors.md#congested-time).";
  // The VL is a number of the sample's own beside the port's set (MetricFamily::number_label),
  // so that a per-VL series costs what the port's other series cost: no label set of its own.
  auto family = out.numbered_family("ibfabric_fabric_port_vl_transmit_wait_ticks_total", kHelp,
                                    prometheus::MetricType::Counter, "vl");
  for (int vl = 0; vl < vls; ++vl) {
    auto value = mad::vl_xmit_wait(data.data(), vl);
    out.add_numbered(family, &port_labels, static_cast<std::uint16_t>(vl), value);
    if (value >= mad::kVlXmitWaitMax) {
      Labels sl = switch_port_labels(guid, idx);
      sl.emplace_back("counter", mad::vl_xmit_wait_name(vl));
      out.gauge("ibfabric_fabric_port_counters_saturated", kSaturatedHelp, sl, 1);
    }
  }
}

void SweepRun::settled() {
  sweep_seconds_ = seconds_since(started_);
  // What is left: switches held back because none had answered (then nothing did).
  auto now = Clock::now();
  for (auto& sw : switches_) emit_finished(sw, now);
  if (sealed_.empty()) {
    finish();
    return;
  }
  // The rest of the families compressed part by part goes the same way, after the part out.
  settling_ = true;
  if (!sealing_ && !seal()) finish();
}

void SweepRun::finish() {
  const double sweep_seconds = sweep_seconds_;
  kept_.sealed_octets.clear();
  for (auto& [id, sealed] : sealed_) {
    auto& text = sealed.text;
    kept_.sealed_octets[sealed.name] = text.deflated.size();
    // Without a reservation (the first such sweep, or a text that outgrew it) the text grew by
    // doubling: its unused half would stay for as long as the snapshot is shown.
    if (text.deflated.capacity() > text.deflated.size() + text.deflated.size() / 16) {
      text.deflated.shrink_to_fit();
    }
    out_.set_text(id, std::make_shared<const DeflatedText>(std::move(text)));
  }
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
            "Wall time of the last topology discovery.", {}, kept_.discovery_seconds);
  out.gauge("ibfabric_fabric_discovery_timestamp_seconds",
            "Unix time the last successful discovery finished.", {}, kept_.discovery_timestamp);
  out.counter("ibfabric_fabric_discoveries_total", "Topology discoveries run since start.", {},
              static_cast<double>(kept_.discoveries));
  out.declare("ibfabric_fabric_query_errors_total",
              "MAD queries of the fabric collector that failed, by phase and attribute.",
              MetricType::Counter);
  kept_.state.fill_metrics(out);
  for (const auto& [key, n] : kept_.errors.counts()) {
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
  kept_.family_sizes = MetricsBuilder::sizes_of(result.metrics);
  spdlog::debug(
      "fabric: sweep done ports={} failed={} stale={} mads={} seconds={:.3f} "
      "build_seconds={:.3f}",
      ports_ok, ports_failed, ports_stale, asked(), sweep_seconds,
      seconds_since(started_) - sweep_seconds);
  ++kept_.sweeps_since_discovery;
  auto done = std::move(done_);
  done(std::move(result));
}
bool SweepRun::exported(std::string_view metric) const {
  if (kept_.config.counters.empty()) return true;
  if (metric.ends_with("_total")) metric.remove_suffix(6);
  return kept_.config.counters.count(std::string(metric)) > 0;
}

}  // namespace ibfabric::fabric
