#include "collectors/sm/sm_run.h"

#include "collectors/sm/sm_collector.h"
#include "mad/attributes.h"

#include <spdlog/fmt/fmt.h>

namespace ibfabric::sm {
namespace {

using prometheus::MetricType;

// An answer shorter than its attribute (kSmInfoSize for SMInfo) is unusable.
constexpr std::size_t kPortInfoSize = IB_SMP_DATA_SIZE;

std::string port_prefix(const mad::LocalPort& lp) {
  return "device=" + lp.ca + " port=" + std::to_string(lp.port);
}

std::string describe(const mad::Response& r) {
  std::string text = mad::to_string(r.status);
  if (!r.error.empty()) text += " (" + r.error + ")";
  return text;
}

}  // namespace

SmRun::SmRun(mad::ClientHandle& mad, const SmConfig& config, const NodeNameMap& names,
             SmState& state, Collector::Done done, std::vector<mad::LocalPort> ports)
    : FanOut(mad), config_(config), names_(names), s_(state), done_(std::move(done)) {
  for (auto& lp : ports) {
    ports_.emplace_back();
    ports_.back().local = std::move(lp);
  }
}

void SmRun::start() {
  launch([this] {
    for (std::size_t i = 0; i < ports_.size(); ++i) query_port_info(i);
  });
}

void SmRun::ask(std::size_t i, const char* query, std::size_t min_size, mad::Request req,
                std::function<void(const mad::Response&)> on_ok,
                std::function<void(const mad::Response&)> on_fail) {
  const auto& lp = ports_[i].local;
  req.via = mad::PortAddress{lp.ca, lp.port};
  FanOut::ask(std::move(req), min_size,
              [this, i, query, on_ok = std::move(on_ok),
               on_fail = std::move(on_fail)](const mad::Response& r) {
                const auto& lp = ports_[i].local;
                s_.errors.note(r, {lp.ca, lp.port, query}, [&] {
                  return fmt::format("device={} port={} query={}", lp.ca, lp.port, query);
                });
                if (r.ok()) {
                  on_ok(r);
                } else if (on_fail) {
                  on_fail(r);
                }
              });
}

void SmRun::query_port_info(std::size_t i) {
  auto& pp = ports_[i];
  ask(
      i, "port_info", kPortInfoSize,
      mad::Request::smp_get(mad::Destination::by_route({}), IB_ATTR_PORT_INFO,
                            static_cast<std::uint32_t>(pp.local.port)),
      [this, i](const mad::Response& r) {
        auto& pp = ports_[i];
        pp.port_info_answered = true;
        pp.lid = static_cast<std::uint16_t>(r.get(IB_PORT_LID_F));
        pp.sm_lid = static_cast<std::uint16_t>(r.get(IB_PORT_SMLID_F));
        // A port without a LID, or that no SM has configured, has nobody to ask by LID.
        if (!mad::routable_lid(pp.lid) || !mad::routable_lid(pp.sm_lid)) return;
        query_master(i);
        if (config_.subnet) query_sa(i);
      },
      [this, i](const mad::Response& r) {
        ports_[i].problems.push_back("PortInfo of the local port failed: " + describe(r));
      });
}

void SmRun::query_master(std::size_t i) {
  auto& pp = ports_[i];
  pp.master_asked = true;
  ask(
      i, "sm_info_master", kSmInfoSize,
      mad::Request::smp_get(mad::Destination::to_lid(pp.sm_lid), IB_ATTR_SMINFO),
      [this, i](const mad::Response& r) {
        ports_[i].master = decode_sm_info(r.data());
        query_name(i, ports_[i].sm_lid);
      },
      [this, i](const mad::Response& r) {
        auto& pp = ports_[i];
        pp.problems.push_back("the SM the port points at (lid " + std::to_string(pp.sm_lid) +
                              ") did not answer SMInfo: " + describe(r));
      });
}

void SmRun::query_sa(std::size_t i) {
  auto& pp = ports_[i];
  pp.sa_asked = true;
  mad::Request req;
  req.to = mad::Destination::to_lid(pp.sm_lid);
  req.mgmt_class = mad::kSubnAdm;
  req.method = IB_MAD_METHOD_GET_TABLE;
  req.attr_id = IB_SA_ATTR_SMINFORECORD;
  ask(
      i, "sm_info_record", 0, std::move(req),
      [this, i](const mad::Response& r) {
        auto& pp = ports_[i];
        pp.sa_answered = true;
        for (const auto& rec : decode_sm_info_records(r.mad.data(), r.mad.size())) {
          pp.subnet[rec.lid].sa_record = rec.info;
        }
        query_subnet_sms(i);
      },
      [this, i](const mad::Response& r) {
        auto& pp = ports_[i];
        pp.problems.push_back("the SA at lid " + std::to_string(pp.sm_lid) +
                              " did not answer the SMInfoRecord table: " + describe(r));
        // The SMs seen before are still worth asking: the standby of a dead master is.
        const auto& memory = s_.memory[{pp.local.ca, pp.local.port}];
        for (const auto& [lid, info] : memory.known_sms) pp.subnet[lid].remembered = info;
        query_subnet_sms(i);
      });
}

void SmRun::query_subnet_sms(std::size_t i) {
  auto& pp = ports_[i];
  for (auto& [lid, sm] : pp.subnet) {
    // The SM at the port's SM LID is already being asked.
    if (lid == pp.sm_lid || !mad::routable_lid(lid)) continue;
    std::uint16_t target = lid;
    ask(
        i, "sm_info_subnet", kSmInfoSize,
        mad::Request::smp_get(mad::Destination::to_lid(target), IB_ATTR_SMINFO),
        [this, i, target](const mad::Response& r) {
          ports_[i].subnet[target].answer = decode_sm_info(r.data());
          query_name(i, target);
        },
        nullptr);
  }
}

// The node name of the SM at `lid` (node-name-map, else NodeDescription): NodeInfo for the
// node GUID, then NodeDescription. A failure costs only the name: it stays as last read
// (sm_name), and is not the GUID for a poll.
void SmRun::query_name(std::size_t i, std::uint16_t lid) {
  auto dest = mad::Destination::to_lid(lid);
  ask(
      i, "node_info", kPortInfoSize, mad::Request::smp_get(dest, IB_ATTR_NODE_INFO),
      [this, i, lid, dest](const mad::Response& r) {
        auto guid = r.get64(IB_NODE_GUID_F);
        if (const std::string* mapped = names_.find(guid)) ports_[i].names[lid] = *mapped;
        ask(
            i, "node_description", kPortInfoSize, mad::Request::smp_get(dest, IB_ATTR_NODE_DESC),
            [this, i, lid, guid](const mad::Response& d) {
              ports_[i].names[lid] = names_.name(guid, d.get_string(IB_NODE_DESC_F));
            },
            nullptr);
      },
      nullptr);
}

// The SM's name as read in this pass, else as last seen, else what its port GUID gives.
std::string SmRun::sm_name(PortPass& pp, PortMemory& memory, std::uint16_t lid,
                           std::uint64_t port_guid) {
  if (auto it = pp.names.find(lid); it != pp.names.end()) {
    memory.names[port_guid] = it->second;
    return it->second;
  }
  if (auto it = memory.names.find(port_guid); it != memory.names.end()) return it->second;
  return names_.name(port_guid, "");
}

void SmRun::emit_port(MetricsBuilder& out, PortPass& pp) {
  auto& memory = s_.memory[{pp.local.ca, pp.local.port}];
  Labels l{{"device", pp.local.ca}, {"port", std::to_string(pp.local.port)}};
  if (pp.port_info_answered) {
    out.gauge("ibfabric_sm_port_sm_lid",
              "LID of the master SM the local port points at (PortInfo.MasterSMLID); 0 when no "
              "SM has configured the port.",
              l, pp.sm_lid);
  }
  if (pp.master_asked) {
    out.gauge("ibfabric_sm_master_up",
              "1 when the SM at the port's MasterSMLID answered SMInfo in the last poll.", l,
              pp.master ? 1 : 0);
  }
  if (pp.master) {
    const SmInfo& m = *pp.master;
    Labels info = l;
    info.emplace_back("guid", hex_guid(m.guid));
    info.emplace_back("lid", std::to_string(pp.sm_lid));
    info.emplace_back("state", state_name(m.state));
    info.emplace_back("node_name", sm_name(pp, memory, pp.sm_lid, m.guid));
    out.info("ibfabric_sm_master_info",
             "The SM the local port points at: its port GUID, LID and state name (SMInfo), and "
             "its node's name (node-name-map, else NodeDescription, else GUID).",
             info);
    out.gauge("ibfabric_sm_master_state",
              "SMInfo.SMState of the SM the port points at: 0 not_active, 1 discovering, 2 "
              "standby, 3 master.",
              l, m.state);
    out.gauge("ibfabric_sm_master_priority",
              "SMInfo.Priority of the SM the port points at (0-15, higher wins).", l, m.priority);
    out.gauge("ibfabric_sm_master_activity",
              "SMInfo.ActCount of the SM the port points at: moves while the SM works; 32-bit, "
              "restarts with the SM.",
              l, m.activity_count);
  }
  memory.master.observe(pp.master);
  out.counter("ibfabric_sm_master_changes_total",
              "Times this daemon saw the master SM of the port's subnet change to another GUID "
              "(failover or handover) since it started.",
              l, static_cast<double>(memory.master.master_changes()));
  out.gauge("ibfabric_sm_activity_stalled_polls",
            "Polls in a row in which the master SM's activity count was not seen moving (same "
            "count, or no answer); 0 while it works.",
            l, static_cast<double>(memory.master.stalled_polls()));

  if (!pp.sa_asked) return;
  out.gauge("ibfabric_sm_sa_up",
            "1 when the SA at the port's MasterSMLID answered the SMInfoRecord table in the "
            "last poll.",
            l, pp.sa_answered ? 1 : 0);
  // The SM at the port's SM LID belongs in the list even if the table missed it.
  if (pp.master) pp.subnet[pp.sm_lid].answer = pp.master;
  if (!pp.master && pp.subnet.count(pp.sm_lid) == 0 && memory.known_sms.count(pp.sm_lid)) {
    pp.subnet[pp.sm_lid].remembered = memory.known_sms[pp.sm_lid];
  }
  int by_state[4] = {0, 0, 0, 0};
  std::map<std::uint16_t, SmInfo> known;
  for (const auto& [lid, sm] : pp.subnet) {
    const std::optional<SmInfo>& now = sm.answer ? sm.answer : sm.sa_record;
    const std::optional<SmInfo>& any = now ? now : sm.remembered;
    if (!any) continue;
    known[lid] = *any;
    Labels sl = l;
    sl.emplace_back("guid", hex_guid(any->guid));
    sl.emplace_back("lid", std::to_string(lid));
    out.gauge("ibfabric_sm_subnet_sm_responding",
              "1 when this SM answered SMInfo in the last poll; 0 when the SA lists it, or an "
              "earlier poll saw it, but it did not answer.",
              sl, sm.answer ? 1 : 0);
    if (!now) continue;  // nothing read about it in this poll
    if (now->state >= 0 && now->state < 4) by_state[now->state]++;
    Labels info = sl;
    info.emplace_back("state", state_name(now->state));
    info.emplace_back("node_name", sm_name(pp, memory, lid, now->guid));
    out.info("ibfabric_sm_subnet_sm_info",
             "Every SM of the subnet (SA SMInfoRecord table, then SMInfo from each SM): its "
             "port GUID, LID and state name, and its node's name (node-name-map, else "
             "NodeDescription, else GUID).",
             info);
    out.gauge("ibfabric_sm_subnet_sm_state",
              "SMInfo.SMState of each SM of the subnet: 0 not_active, 1 discovering, 2 standby, "
              "3 master.",
              sl, now->state);
    out.gauge("ibfabric_sm_subnet_sm_priority", "SMInfo.Priority of each SM of the subnet.", sl,
              now->priority);
    out.gauge("ibfabric_sm_subnet_sm_activity", "SMInfo.ActCount of each SM of the subnet.", sl,
              now->activity_count);
  }
  for (int s = 0; s < 4; ++s) {
    Labels cl = l;
    cl.emplace_back("state", state_name(s));
    out.gauge("ibfabric_sm_subnet_sms",
              "Number of SMs of the subnet in each state, as read in the last poll (more than "
              "one master: split subnet).",
              cl, by_state[s]);
  }
  // Forget SMs only when the SA gave a fresh table without them.
  if (pp.sa_answered) {
    memory.known_sms = std::move(known);
  } else {
    for (auto& [lid, info] : known) memory.known_sms[lid] = info;
  }
}

void SmRun::settled() {
  MetricsBuilder out;
  std::vector<std::string> problems;
  for (auto& pp : ports_) {
    emit_port(out, pp);
    for (const auto& p : pp.problems) problems.push_back(port_prefix(pp.local) + ": " + p);
  }
  const char* errors_help =
      "MAD queries of the collector that failed (timeout, error status, no port), by query: "
      "port_info, sm_info_master, sm_info_subnet, sm_info_record, node_info, node_description.";
  out.declare("ibfabric_sm_query_errors_total", errors_help, MetricType::Counter);
  for (const auto& [key, n] : s_.errors.counts()) {
    const auto& [device, port, query] = key;
    out.counter("ibfabric_sm_query_errors_total", errors_help,
                {{"device", device}, {"port", std::to_string(port)}, {"query", query}},
                static_cast<double>(n));
  }
  CollectResult result;
  // No InfiniBand port is nothing to collect, not a failure.
  if (!problems.empty()) {
    result.success = false;
    for (const auto& p : problems) {
      if (!result.error.empty()) result.error += "; ";
      result.error += p;
    }
  }
  result.metrics = std::move(out).take();
  auto done = std::move(done_);
  done(std::move(result));
}

}  // namespace ibfabric::sm
