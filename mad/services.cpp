// The engine's services (as libibmad's serv.c): answering Get requests of a vendor class
// this daemon serves (the MAD probe responder), rate-capped per service.
#include "mad/engine_impl.h"

namespace ibfabric::mad::detail {

namespace {

class ServiceImpl final : public Service {
 public:
  ServiceImpl(std::weak_ptr<EngineImpl> engine, int id) : engine_(std::move(engine)), id_(id) {}
  ~ServiceImpl() override {
    if (auto e = engine_.lock()) e->end_service(id_);
  }
  std::string refresh() override {
    auto e = engine_.lock();
    return e ? e->refresh_service(id_) : "the MAD engine is gone";
  }
  std::uint64_t answered() const override {
    auto e = engine_.lock();
    auto* s = e ? e->service(id_) : nullptr;
    return s ? s->answered : 0;
  }
  std::uint64_t dropped() const override {
    auto e = engine_.lock();
    auto* s = e ? e->service(id_) : nullptr;
    return s ? s->dropped : 0;
  }

 private:
  std::weak_ptr<EngineImpl> engine_;
  int id_;
};

}  // namespace

std::unique_ptr<Service> EngineImpl::serve(PortAddress via, std::uint8_t mgmt_class,
                                           std::uint32_t oui, double max_per_second,
                                           RequestHandler handler) {
  if (!is_vendor_range2(mgmt_class)) {
    throw std::invalid_argument("Engine::serve: only vendor range 2 classes (0x30-0x4f)");
  }
  int id = next_service_id_++;
  auto& service = services_[id];
  service.via = std::move(via);
  service.mgmt_class = mgmt_class;
  service.oui = oui;
  service.max_per_second = std::max(1.0, max_per_second);
  service.tokens = service.max_per_second;
  service.refilled_at = Clock::now();
  service.handler = std::move(handler);
  // On a port open already, at once: a service that replaces another (a reload's new probe
  // collector) takes over its agent before the old one ends (register_service).
  if (auto addr = known(service.via)) {
    service.addr = *addr;
    if (auto pit = ports_.find(*addr); pit != ports_.end() && pit->second.open()) {
      register_service(pit->second, id, service);
    }
  }
  return std::make_unique<ServiceImpl>(weak_from_this(), id);
}

std::string EngineImpl::refresh_service(int id) {
  auto& service = services_.at(id);
  // Resolving and opening run on a worker (port_open.cpp): until they are done there is
  // nothing to report, and the service registers when its port opens.
  if (first_open_ && first_open_->waiting) return "";
  auto addr = known(service.via);
  if (!addr) {
    auto error = resolving_.count(service.via) ? resolving_.at(service.via)->last_error : "";
    if (auto why = start_resolve(service.via)) return *why;
    return error;
  }
  service.addr = *addr;
  auto& port = ports_[*addr];
  port.addr = *addr;
  if (!port.open()) {
    if (port.is_opening()) return "";
    if (auto why = start_open(port)) return *why;
    return "";
  }
  if (!port.service_agents.count(id)) register_service(port, id, service);
  return port.service_agents.count(id) ? "" : service.error;
}

void EngineImpl::end_service(int id) {
  auto it = services_.find(id);
  if (it == services_.end()) return;
  const auto& ended = it->second;
  if (auto pit = ports_.find(ended.addr); pit != ports_.end() && pit->second.open()) {
    auto& port = pit->second;
    if (auto a = port.service_agents.find(id); a != port.service_agents.end()) {
      const int agent = a->second;
      port.service_agents.erase(a);
      bool kept = std::any_of(port.service_agents.begin(), port.service_agents.end(),
                              [&](const auto& entry) { return entry.second == agent; });
      // The agent stays with another service of the class on this port, unregistered: under the
      // simulator's shim a request of a class with no agent ends the process, and a request
      // arriving between an unregistration and a registration would.
      for (auto& [sid, service] : services_) {
        if (kept) break;
        if (sid != id && service.addr == port.addr && service.mgmt_class == ended.mgmt_class &&
            service.oui == ended.oui && !port.service_agents.count(sid)) {
          port.service_agents[sid] = agent;
          service.error.clear();
          kept = true;
        }
      }
      if (!kept) umad_unregister(port.receiver->portid, agent);
    }
  }
  services_.erase(it);
}

const ServiceEntry* EngineImpl::service(int id) const {
  auto it = services_.find(id);
  return it == services_.end() ? nullptr : &it->second;
}

void EngineImpl::register_service(OpenPort& port, int id, ServiceEntry& service) {
  // The simulator's shim crashes a process that receives a MAD of a class it registered no
  // agent for, and an SM sends SMInfo to the ports the shim marks IsSM for a responder. SMP
  // agents without a method mask receive nothing unsolicited on a real host.
  agent_for(port, IB_SMI_CLASS, 0);
  agent_for(port, IB_SMI_DIRECT_CLASS, 0);
  // One agent per class and OUI on a port, shared by the services of it (a reload's new probe
  // collector serves beside the one it replaces until that one ends): a second registration of
  // the class would fail on a host, and under the shim the first one's unregistration would take
  // the class's delivery away from both.
  for (const auto& [sid, agent] : port.service_agents) {
    auto other = services_.find(sid);
    if (sid != id && other != services_.end() && other->second.mgmt_class == service.mgmt_class &&
        other->second.oui == service.oui) {
      port.service_agents[id] = agent;
      service.error.clear();
      return;
    }
  }
  int agent =
      register_agent(port.receiver->portid, AgentSpec{service.mgmt_class, service.oui, true});
  char what[64];
  std::snprintf(what, sizeof what, "class 0x%02x oui 0x%06x", service.mgmt_class, service.oui);
  if (agent < 0) {
    std::string error = std::string("cannot serve ") + what + " on " + port.addr.ca + " port " +
                        std::to_string(port.addr.port) + ": " + errno_text(agent);
    if (agent == -EBUSY || agent == -EINVAL) {
      error += " (another process, such as ibping -S, may serve it already)";
    }
    if (service.error != error) spdlog::warn("mad: {}", error);
    service.error = std::move(error);
    return;
  }
  port.service_agents[id] = agent;
  service.error.clear();
  spdlog::info("mad: serving {} on ca={} port={}", what, port.addr.ca, port.addr.port);
}

void EngineImpl::serve_request(OpenPort& port, const Arrival& arrival) {
  const auto& bytes = arrival.bytes;
  auto mgmt_class = static_cast<std::uint8_t>(bytes[1]);
  unsigned method = mad_get_field(mutable_bytes(bytes.data()), 0, IB_MAD_METHOD_F);
  std::uint32_t oui = is_vendor_range2(mgmt_class)
                          ? mad_get_field(mutable_bytes(bytes.data()), 0, IB_VEND2_OUI_F)
                          : 0;
  auto& cc = counters_[mgmt_class];
  for (auto& [id, service] : services_) {
    auto agent = port.service_agents.find(id);
    if (agent == port.service_agents.end() || service.mgmt_class != mgmt_class ||
        service.oui != oui || method != IB_MAD_METHOD_GET) {
      continue;
    }
    auto now = Clock::now();
    service.tokens = std::min(
        service.max_per_second,
        service.tokens + service.max_per_second *
                             std::chrono::duration<double>(now - service.refilled_at).count());
    service.refilled_at = now;
    if (service.tokens < 1) {
      service.dropped++;
      return;
    }
    service.tokens -= 1;
    InboundRequest request{port.addr, ntohs(arrival.from.lid), arrival.at, bytes.data()};
    auto data = service.handler(request);
    if (!data) {
      service.dropped++;
      return;
    }
    std::vector<std::uint8_t> buf(umad_size() + IB_MAD_SIZE, 0);
    auto* mad = static_cast<std::uint8_t*>(umad_get_mad(buf.data()));
    // The request's header as it came, transaction id included (the requester matches on
    // it), turned into a GetResp with status 0.
    std::memcpy(mad, bytes.data(), IB_MAD_SIZE);
    mad_set_field(mad, 0, IB_MAD_RESPONSE_F, 1);
    mad_set_field(mad, 0, IB_MAD_STATUS_F, 0);
    auto offset = static_cast<std::size_t>(data_offset(mgmt_class));
    std::memset(mad + offset, 0, IB_MAD_SIZE - offset);
    std::memcpy(mad + offset, data->data(), std::min(data->size(), IB_MAD_SIZE - offset));
    const auto& from = arrival.from;
    umad_set_addr(buf.data(), ntohs(from.lid), static_cast<int>(ntohl(from.qpn)), from.sl,
                  from.qkey ? static_cast<int>(ntohl(from.qkey)) : IB_DEFAULT_QP1_QKEY);
    umad_set_pkey(buf.data(), arrival.pkey_index);
    if (umad_send(port.receiver->portid, agent->second, buf.data(), IB_MAD_SIZE, 0, 0) < 0) {
      cc.errors["answer_send"]++;
      service.dropped++;
      return;
    }
    cc.served++;
    service.answered++;
    return;
  }
  cc.errors["unsolicited"]++;
}

}  // namespace ibfabric::mad::detail
