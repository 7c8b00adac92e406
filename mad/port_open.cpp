// The engine's umad ports, opened (as libibmad's register.c): resolving which local port a
// request goes out of, opening it and registering its agents off the loop (a sysfs read can
// block as long as a firmware command), the first open of the default port, and closing.
// The receiver thread that then reads the port is receiver.cpp's.
#include "mad/engine_impl.h"

namespace ibfabric::mad::detail {
namespace {

// The port `resolve` finds for `ca` and `port`; when none, `error` says why.
std::optional<PortAddress> resolve_or_why(const decltype(PortOps::resolve)& resolve,
                                          const std::string& ca, int port, std::string& error) {
  error = "no local CA port found";
  try {
    return resolve(ca, port);
  } catch (const std::exception& e) {
    error += std::string(": ") + e.what();
    return std::nullopt;
  }
}

}  // namespace

PortOps PortOps::umad() {
  PortOps ops;
  ops.resolve = [](const std::string& ca, int port) -> std::optional<PortAddress> {
    if (!init_umad()) return std::nullopt;
    umad_port_t info{};
    if (umad_get_port(ca.empty() ? nullptr : ca.c_str(), port, &info) < 0) return std::nullopt;
    PortAddress addr{info.ca_name, info.portnum};
    umad_release_port(&info);
    return addr;
  };
  ops.open = [](const PortAddress& addr, const std::vector<AgentSpec>& agents) {
    Opened out;
    if (!init_umad()) {
      out.error = "umad_init failed";
      return out;
    }
    int portid = umad_open_port(addr.ca.c_str(), addr.port);
    if (portid < 0) {
      out.error = "umad_open_port " + addr.ca + " port " + std::to_string(addr.port) + ": " +
                  errno_text(portid);
      return out;
    }
    out.portid = portid;
    // Right after the open, before anything else: requests for a service can arrive at once.
    for (const auto& spec : agents) out.agents.push_back(register_agent(portid, spec));
    out.registered_at = Clock::now();
    umad_port_t info{};
    if (umad_get_port(addr.ca.c_str(), addr.port, &info) >= 0) {
      out.sm_lid = static_cast<std::uint16_t>(info.sm_lid);
      umad_release_port(&info);
    }
    return out;
  };
  return ops;
}

EngineImpl::EngineImpl(boost::asio::io_context& io, EngineConfig config, PortOps ops,
                       std::chrono::nanoseconds open_deadline)
    : Engine(std::move(config)),
      io_(io),
      ops_(std::move(ops)),
      open_deadline_(open_deadline),
      rate_timer_(io) {
  tokens_ = config_.rate_burst;
  refilled_at_ = Clock::now();
}

EngineImpl::~EngineImpl() {
  unmark_simulator_issm();
  for (auto& [addr, port] : ports_) close_port(port);
  // Pending requests and their callbacks are dropped with the maps; their timers' handlers
  // hold only weak pointers. A worker still resolving or opening posts nothing once its
  // OffLoop is gone, and closes the port it opened (PortHandle).
}

std::optional<PortAddress> EngineImpl::default_port() {
  if (auto addr = known({})) return addr;
  if (!(first_open_ && first_open_->waiting)) start_resolve({});
  return std::nullopt;
}

std::optional<PortAddress> EngineImpl::known(const PortAddress& via) const {
  if (!via.ca.empty() && via.port > 0) return via;
  if (auto it = resolved_.find(via); it != resolved_.end()) return it->second;
  return std::nullopt;
}

namespace {
std::string deadline_text(const std::string& what, std::chrono::nanoseconds deadline) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fs", std::chrono::duration<double>(deadline).count());
  return what + " (libibumad, sysfs) did not finish within " + buf +
         "; no new attempt starts until it returns";
}
std::string via_text(const PortAddress& via) {
  if (via.ca.empty()) return "the default port";
  return via.ca + (via.port > 0 ? " port " + std::to_string(via.port) : "");
}

// The agents an open registers right after umad_open_port: the SMP classes always (a port
// whose IsSM bit the simulator's shim set gets the SM's SMInfo at once; every collector sends
// SMPs, which need these agents anyway), then one per class and OUI of the services on that
// port (services of one class share its agent). `for_services`: the service id of each, 0 for
// the SMP ones.
struct OpenAgents {
  std::vector<AgentSpec> agents = {{IB_SMI_CLASS, 0, false}, {IB_SMI_DIRECT_CLASS, 0, false}};
  std::vector<int> for_services = {0, 0};
  void add(int id, std::uint8_t mgmt_class, std::uint32_t oui) {
    for (const auto& a : agents) {
      if (a.serve_get && a.mgmt_class == mgmt_class && a.oui == oui) return;
    }
    agents.push_back({mgmt_class, oui, true});
    for_services.push_back(id);
  }
};

// A service as declared, for a worker that learns which port it opens only once it resolved it.
struct Declared {
  int id = 0;
  PortAddress via;
  std::uint8_t mgmt_class = 0;
  std::uint32_t oui = 0;
};
}  // namespace

std::optional<std::string> EngineImpl::start_resolve(const PortAddress& via) {
  auto& slot = resolving_[via];
  if (!slot) slot = std::make_unique<OffLoopCall>(io_);
  auto& call = *slot;
  if (call.waiting) return std::nullopt;
  auto stuck = deadline_text("resolving " + via_text(via), open_deadline_);
  if (call.worker.busy()) return stuck;
  // A first open stuck past its deadline holds the one thread the default port may hold.
  if (via == PortAddress{} && first_open_ && first_open_->worker.busy()) {
    return deadline_text("opening the default port", open_deadline_);
  }
  const auto id = ++call.id;
  call.waiting = true;
  std::weak_ptr<EngineImpl> weak = weak_from_this();
  call.timer.expires_after(open_deadline_);
  call.timer.async_wait([weak, via, id, stuck](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->resolved(via, id, std::nullopt, stuck);
  });
  // The config's default when a request names no CA.
  std::string ca = via.ca.empty() ? config_.ca : via.ca;
  int port = via.ca.empty() ? config_.port : via.port;
  auto error =
      call.worker.start([resolve = ops_.resolve, ca, port, weak, via, id]() -> OffLoop::Then {
        std::string error;
        std::optional<PortAddress> addr = resolve_or_why(resolve, ca, port, error);
        return [weak, via, id, addr, error] {
          if (auto self = weak.lock()) self->resolved(via, id, addr, error);
        };
      });
  if (!error.empty()) {
    call.waiting = false;
    call.timer.cancel();
    return error;
  }
  return std::nullopt;
}

void EngineImpl::resolved(PortAddress via, std::uint64_t id, std::optional<PortAddress> addr,
                          std::string error) {
  auto it = resolving_.find(via);
  if (it == resolving_.end()) return;
  auto& call = *it->second;
  if (call.id != id || !call.waiting) return;  // late: its deadline already failed what waited
  call.waiting = false;
  call.timer.cancel();
  if (!addr) {
    call.last_error = error;
    fail_parked(call, error);
    return;
  }
  call.last_error.clear();
  resolved_[via] = *addr;
  auto parked = std::move(call.parked);
  queued_ -= parked.size();
  // A service on this port registers now if another request opened it already, else as soon
  // as it opens (see start_open() and opened()).
  for (auto& [sid, service] : services_) {
    if (service.via != via) continue;
    service.addr = *addr;
    auto& port = ports_[*addr];
    port.addr = *addr;
    if (port.open()) {
      if (!port.service_agents.count(sid)) register_service(port, sid, service);
    } else if (!port.is_opening()) {
      start_open(port);
    }
  }
  for (auto& p : parked) {
    p->port = *addr;
    route(std::move(p));
  }
  pump();
}

void EngineImpl::route(PendingPtr p) {
  auto& port = ports_[p->port];
  port.addr = p->port;
  if (port.open()) {
    enqueue(std::move(p), port);
    return;
  }
  if (!port.is_opening()) {
    if (auto why = start_open(port)) {
      finish(std::move(p), Status::port_unavailable, *why);
      return;
    }
  }
  port.opening->parked.push_back(std::move(p));
  ++queued_;
}

std::optional<std::string> EngineImpl::start_open(OpenPort& port) {
  if (Clock::now() < port.retry_at) return port.last_error;  // still says why
  if (!port.opening) port.opening = std::make_unique<OffLoopCall>(io_);
  auto& call = *port.opening;
  auto stuck = deadline_text("opening " + via_text(port.addr), open_deadline_);
  if (call.worker.busy()) return stuck;
  const auto id = ++call.id;
  call.waiting = true;
  std::weak_ptr<EngineImpl> weak = weak_from_this();
  auto addr = port.addr;
  call.timer.expires_after(open_deadline_);
  call.timer.async_wait([weak, addr, id](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->open_expired(addr, id);
  });
  // Agents register on the worker, right after the open: under the simulator a MAD for them
  // can arrive before the loop would get to it, and the shim kills a process that receives a
  // class it has no agent for.
  OpenAgents open_agents;
  for (const auto& [sid, service] : services_) {
    if (service.addr == addr) open_agents.add(sid, service.mgmt_class, service.oui);
  }
  auto agents = std::move(open_agents.agents);
  auto for_services = std::move(open_agents.for_services);
  auto error = call.worker.start([open = ops_.open, weak, addr, id, agents,
                                  for_services]() -> OffLoop::Then {
    Opened result;
    try {
      result = open(addr, agents);
    } catch (const std::exception& e) {
      result.portid = -1;
      result.error = "opening " + addr.ca + " port " + std::to_string(addr.port) + ": " + e.what();
    }
    auto handle = std::make_shared<PortHandle>(result.portid);
    return [weak, addr, id, result, handle, agents, for_services] {
      if (auto self = weak.lock()) self->opened(addr, id, result, handle, agents, for_services);
    };
  });
  if (!error.empty()) {
    call.waiting = false;
    call.timer.cancel();
    return error;
  }
  return std::nullopt;
}

void EngineImpl::open_expired(PortAddress addr, std::uint64_t id) {
  auto pit = ports_.find(addr);
  if (pit == ports_.end() || !pit->second.opening) return;
  auto& port = pit->second;
  auto& call = *port.opening;
  if (call.id != id || !call.waiting) return;
  call.waiting = false;
  port_failed(port, deadline_text("opening " + via_text(addr), open_deadline_));
  fail_parked(call, port.last_error);
}

void EngineImpl::opened(PortAddress addr, std::uint64_t id, Opened result,
                        std::shared_ptr<PortHandle> handle, const std::vector<AgentSpec>& agents,
                        const std::vector<int>& for_services) {
  auto pit = ports_.find(addr);
  if (pit == ports_.end() || !pit->second.opening) return;  // `handle` closes the port
  auto& port = pit->second;
  auto& call = *port.opening;
  if (call.id != id || !call.waiting || port.open()) return;  // late: given up at its deadline
  call.waiting = false;
  call.timer.cancel();
  if (result.portid < 0) {
    port_failed(port, result.error);
    fail_parked(call, port.last_error);
    return;
  }
  adopt(port, result, *handle, agents, for_services);
  auto parked = std::move(call.parked);
  queued_ -= parked.size();
  for (auto& p : parked) enqueue(std::move(p), port);
  pump();
}

void EngineImpl::adopt(OpenPort& port, const Opened& result, PortHandle& handle,
                       const std::vector<AgentSpec>& agents, const std::vector<int>& for_services) {
  const auto addr = port.addr;
  port.agents.clear();
  port.service_agents.clear();
  port.generation = ++generations_;
  port.opens++;
  auto receiver = std::make_shared<Receiver>();
  receiver->portid = handle.release();
  port.receiver = receiver;
  // The agents the worker registered. A service's goes to another service of its class on this
  // port when that one has ended meanwhile, and is unregistered when there is none.
  for (std::size_t i = 0; i < result.agents.size() && i < agents.size(); ++i) {
    int agent = result.agents[i];
    if (agent < 0) continue;
    if (for_services[i] == 0) {
      port.agents[{agents[i].mgmt_class, 0}] = agent;
      continue;
    }
    int owner = 0;
    for (const auto& [sid, service] : services_) {
      if (service.addr == addr && service.mgmt_class == agents[i].mgmt_class &&
          service.oui == agents[i].oui && (owner == 0 || sid == for_services[i])) {
        owner = sid;
      }
    }
    if (owner == 0) {
      umad_unregister(receiver->portid, agent);
      continue;
    }
    port.service_agents[owner] = agent;
    services_.at(owner).error.clear();
    spdlog::info("mad: serving class 0x{:02x} oui 0x{:06x} on ca={} port={}", agents[i].mgmt_class,
                 agents[i].oui, addr.ca, addr.port);
  }
  // Services the worker did not register (started meanwhile, another of a class it registered,
  // or its registration failed: this reports why).
  for (auto& [sid, service] : services_) {
    if (service.addr == addr && !port.service_agents.count(sid)) {
      register_service(port, sid, service);
    }
  }
  // Only now may requests come (take_simulator_issm); not on the worker, whose port may yet be
  // dropped as late.
  mark_simulator_issm(addr);
  port.sm_lid = result.sm_lid;
  receiver->thread =
      std::thread([this_weak = weak_from_this(), receiver, addr, gen = port.generation, &io = io_] {
        receive_loop(io, this_weak, receiver, addr, gen);
      });
  spdlog::info("mad: port opened ca={} port={}", addr.ca, addr.port);
}

void EngineImpl::open_default_port(std::function<void(std::string)> done) {
  auto soon = [this, &done](std::string error) {
    boost::asio::post(io_, [done = std::move(done), error = std::move(error)] { done(error); });
  };
  if (first_open_ && first_open_->waiting) {
    first_open_done_.push_back(std::move(done));
    return;
  }
  // Open, or opening the ordinary way (a request came first): requests wait for it anyway.
  if (auto addr = known({})) {
    auto& port = ports_[*addr];
    port.addr = *addr;
    if (port.open() || port.is_opening()) return soon("");
    if (Clock::now() < port.retry_at) return soon(port.last_error);
  }
  if (auto it = resolving_.find({}); it != resolving_.end() && it->second->waiting) {
    return soon("");
  }
  if (!first_open_) first_open_ = std::make_unique<OffLoopCall>(io_);
  auto& call = *first_open_;
  if (call.worker.busy()) return soon(deadline_text("opening the default port", open_deadline_));
  const auto id = ++call.id;
  call.waiting = true;
  first_open_done_.push_back(std::move(done));
  std::weak_ptr<EngineImpl> weak = weak_from_this();
  call.timer.expires_after(open_deadline_);
  call.timer.async_wait([weak, id](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->first_open_expired(id);
  });
  std::vector<Declared> declared;
  for (const auto& [sid, service] : services_) {
    declared.push_back({sid, service.via, service.mgmt_class, service.oui});
  }
  // One call, back to back: the first access of the IB stack (in resolve: libibumad's
  // initialisation, where the simulator's shim attaches and starts delivering MADs), resolving,
  // umad_open_port and registering every agent. A gap between them (a post to the loop, a second
  // thread) is time in which a peer's probe ends the process under the shim.
  auto error = call.worker.start([resolve = ops_.resolve, open = ops_.open, ca = config_.ca,
                                  port = config_.port, declared, weak, id]() -> OffLoop::Then {
    const auto started_at = Clock::now();
    std::string error;
    std::optional<PortAddress> addr = resolve_or_why(resolve, ca, port, error);
    Opened result;
    OpenAgents open_agents;
    if (addr) {
      for (const auto& d : declared) {
        if (d.via == PortAddress{} || d.via == *addr) open_agents.add(d.id, d.mgmt_class, d.oui);
      }
      try {
        result = open(*addr, open_agents.agents);
      } catch (const std::exception& e) {
        result.portid = -1;
        result.error =
            "opening " + addr->ca + " port " + std::to_string(addr->port) + ": " + e.what();
      }
    }
    auto handle = std::make_shared<PortHandle>(result.portid);
    return [weak, id, addr, error, result, handle, agents = std::move(open_agents.agents),
            for_services = std::move(open_agents.for_services), started_at] {
      if (auto self = weak.lock()) {
        self->first_opened(id, addr, error, result, handle, agents, for_services, started_at);
      }
    };
  });
  if (!error.empty()) {
    call.waiting = false;
    call.timer.cancel();
    end_first_open(error);
  }
}

void EngineImpl::first_opened(std::uint64_t id, std::optional<PortAddress> addr, std::string error,
                              Opened result, std::shared_ptr<PortHandle> handle,
                              const std::vector<AgentSpec>& agents,
                              const std::vector<int>& for_services, Clock::time_point started_at) {
  auto& call = *first_open_;
  if (call.id != id || !call.waiting) return;  // late: `handle` closes the port
  call.waiting = false;
  call.timer.cancel();
  if (!addr) {
    // What the next refresh of a service on the default port reports.
    auto& slot = resolving_[{}];
    if (!slot) slot = std::make_unique<OffLoopCall>(io_);
    slot->last_error = error;
    end_first_open(error);
    return;
  }
  resolved_[{}] = *addr;
  for (auto& [sid, service] : services_) {
    if (service.via == PortAddress{}) service.addr = *addr;
  }
  auto& port = ports_[*addr];
  port.addr = *addr;
  if (port.open() || port.is_opening()) {
    // Cannot happen (everything else waited for this call); `handle` closes the extra one.
    end_first_open("");
    return;
  }
  if (result.portid < 0) {
    port_failed(port, result.error);
    end_first_open(port.last_error);
    return;
  }
  adopt(port, result, *handle, agents, for_services);
  if (result.registered_at != Clock::time_point{}) {
    // From the first access of the IB stack to the last agent registered: the window in which,
    // but for the late IsSM mark, the simulator's shim could deliver a request of a class with
    // no agent (docs/design.md). An upper bound: it starts before the first access.
    spdlog::info(
        "mad: default port opened ca={} port={} agents={} first_access_to_registered_us={}",
        addr->ca, addr->port, agents.size(),
        std::chrono::duration_cast<std::chrono::microseconds>(result.registered_at - started_at)
            .count());
  }
  end_first_open("");
}

void EngineImpl::first_open_expired(std::uint64_t id) {
  if (!first_open_ || first_open_->id != id || !first_open_->waiting) return;
  first_open_->waiting = false;
  end_first_open(deadline_text("opening the default port", open_deadline_));
}

void EngineImpl::end_first_open(const std::string& error) {
  // The requests that waited go on (or start their own resolve and open, which fail at once
  // with the stuck call's error while it has not returned).
  auto parked = std::move(first_open_->parked);
  queued_ -= parked.size();
  for (auto& p : parked) dispatch(std::move(p));
  pump();
  auto done = std::move(first_open_done_);
  first_open_done_.clear();
  for (auto& d : done) {
    boost::asio::post(io_, [d = std::move(d), error] { d(error); });
  }
}

void EngineImpl::port_failed(OpenPort& port, std::string error) {
  port.failures++;
  port.backoff = port.backoff.count() == 0 ? config_.reopen_backoff
                                           : std::min(port.backoff * 2, config_.reopen_backoff_max);
  port.retry_at = Clock::now() + port.backoff;
  if (port.last_error != error) {
    spdlog::warn("mad: port unusable ca={} port={} error=\"{}\" retry_in_ms={}", port.addr.ca,
                 port.addr.port, error, port.backoff.count());
  }
  port.last_error = std::move(error);
}

void EngineImpl::close_port(OpenPort& port) {
  if (!port.receiver) return;
  if (port.receiver->thread.joinable()) {
    wake_receiver(port);  // sets stop
    port.receiver->thread.join();
  } else {
    port.receiver->stop = true;
  }
  umad_close_port(port.receiver->portid);
  port.receiver.reset();
  port.agents.clear();
  port.service_agents.clear();
}

}  // namespace ibfabric::mad::detail
