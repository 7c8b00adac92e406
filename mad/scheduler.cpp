// The engine's request scheduler (as libibmad's rpc.c): per-destination queues served
// round-robin, the in-flight caps, the rate limit, per-attempt timeouts and retries, and the
// one place every request ends (finish). See engine_impl.h for how the engine is split.
#include "mad/engine_impl.h"

namespace ibfabric::mad::detail {

namespace {

class ClientImpl final : public Client {
 public:
  explicit ClientImpl(std::weak_ptr<EngineImpl> engine)
      : engine_(std::move(engine)), token_(std::make_shared<int>(0)) {}
  void submit(Request request, Callback callback) override {
    if (auto e = engine_.lock()) {
      e->submit_owned(std::move(request), std::move(callback), true, token_);
    }
  }

 private:
  std::weak_ptr<EngineImpl> engine_;
  std::shared_ptr<int> token_;
};

}  // namespace

std::unique_ptr<Client> EngineImpl::client() {
  return std::make_unique<ClientImpl>(weak_from_this());
}

void EngineImpl::submit(Request request, Callback callback) {
  submit_owned(std::move(request), std::move(callback), false, {});
}

void EngineImpl::submit_owned(Request request, Callback callback, bool has_owner,
                              std::weak_ptr<void> owner) {
  auto p = std::make_unique<Pending>();
  p->req = std::move(request);
  p->callback = std::move(callback);
  p->has_owner = has_owner;
  p->owner = std::move(owner);
  p->max_attempts = 1 + p->req.retries.value_or(config_.retries);
  p->timeout = p->req.timeout.value_or(config_.timeout);
  counters_[p->req.mgmt_class].requests++;

  if (auto why = refusal(p->req)) {
    finish(std::move(p), Status::refused, *why);
    return;
  }
  if (queued_ >= config_.max_queued) {
    finish(std::move(p), Status::queue_full, "more than max_queued requests waiting");
    return;
  }
  // While the default port's first open runs, nothing else touches libibumad (port_open.cpp).
  if (first_open_ && first_open_->waiting) {
    first_open_->parked.push_back(std::move(p));
    ++queued_;
    return;
  }
  dispatch(std::move(p));
  pump();
}

void EngineImpl::dispatch(PendingPtr p) {
  // Resolving and opening a port read sysfs and can block: they run on a worker while the
  // request waits parked (port_open.cpp).
  if (auto addr = known(p->req.via)) {
    p->port = *addr;
    route(std::move(p));
    return;
  }
  if (auto why = start_resolve(p->req.via)) {
    finish(std::move(p), Status::port_unavailable, *why);
    return;
  }
  resolving_.at(p->req.via)->parked.push_back(std::move(p));
  ++queued_;
}

void EngineImpl::enqueue(PendingPtr p, OpenPort& port) {
  if (p->req.mgmt_class == IB_SA_CLASS && !p->req.to.directed && p->req.to.lid == 0) {
    p->req.to.lid = port.sm_lid;
    if (p->req.to.lid == 0) {
      finish(std::move(p), Status::refused, "no SM LID known on this port");
      return;
    }
  }
  p->dest_key = port.addr.ca + "/" + std::to_string(port.addr.port) + "/" + p->req.to.to_string();
  auto dit = dests_.try_emplace(p->dest_key).first;
  dit->second.queue.push_back(std::move(p));
  ++queued_;
  mark_ready(dit->second, dit->first);
}

void EngineImpl::fail_parked(OffLoopCall& call, const std::string& error) {
  auto parked = std::move(call.parked);
  queued_ -= parked.size();
  for (auto& p : parked) finish(std::move(p), Status::port_unavailable, error);
}

std::optional<std::string> EngineImpl::refusal(const Request& r) const {
  // Never change the fabric: only Get-type methods leave this engine.
  if (r.method != IB_MAD_METHOD_GET && r.method != IB_MAD_METHOD_GET_TABLE) {
    return "only Get and GetTable methods are sent";
  }
  if (r.to.directed && r.mgmt_class != IB_SMI_DIRECT_CLASS) {
    return "a directed route needs the directed-route SMP class";
  }
  if (!r.to.directed && r.mgmt_class == IB_SMI_DIRECT_CLASS) {
    return "the directed-route SMP class needs a route";
  }
  if (r.to.path.size() >= IB_SUBNET_PATH_HOPS_MAX) return "directed route too long";
  if (!r.to.directed && r.to.lid == 0 && r.mgmt_class != IB_SA_CLASS) return "LID 0";
  auto room = static_cast<std::size_t>(IB_MAD_SIZE - data_offset(r.mgmt_class));
  if (r.payload.size() > room &&
      std::any_of(r.payload.begin() + static_cast<std::ptrdiff_t>(room), r.payload.end(),
                  [](std::uint8_t b) { return b != 0; })) {
    return "payload larger than the class's data area";
  }
  return std::nullopt;
}

void EngineImpl::mark_ready(DestQueue& dq, const std::string& key) {
  if (dq.ready || dq.queue.empty() || dq.in_flight >= config_.max_in_flight_per_destination) {
    return;
  }
  dq.ready = true;
  ready_.push_back(key);
}

bool EngineImpl::take_token() {
  if (config_.rate_limit <= 0) return true;
  auto now = Clock::now();
  double elapsed = std::chrono::duration<double>(now - refilled_at_).count();
  refilled_at_ = now;
  tokens_ = std::min<double>(config_.rate_burst, tokens_ + elapsed * config_.rate_limit);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

void EngineImpl::arm_rate_timer() {
  if (rate_timer_armed_) return;
  rate_timer_armed_ = true;
  double wait_s = (1 - tokens_) / config_.rate_limit;
  rate_timer_.expires_after(std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(wait_s, 0.0001))));
  rate_timer_.async_wait([w = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = w.lock()) {
      self->rate_timer_armed_ = false;
      self->pump();
    }
  });
}

void EngineImpl::pump() {
  while (!ready_.empty() && in_flight_total_ < config_.max_in_flight) {
    std::string key = ready_.front();
    auto it = dests_.find(key);
    if (it == dests_.end()) {
      ready_.pop_front();
      continue;
    }
    auto& dq = it->second;
    // Requests of a destroyed Client are dropped without spending a token.
    while (!dq.queue.empty() && dq.queue.front()->owner_gone()) {
      auto gone = std::move(dq.queue.front());
      dq.queue.pop_front();
      --queued_;
      counters_[gone->req.mgmt_class].results[to_string(Status::cancelled)]++;
    }
    if (dq.queue.empty() || dq.in_flight >= config_.max_in_flight_per_destination) {
      ready_.pop_front();
      dq.ready = false;
      maybe_erase(it);
      continue;
    }
    if (!take_token()) {
      arm_rate_timer();
      return;
    }
    ready_.pop_front();
    dq.ready = false;
    auto p = std::move(dq.queue.front());
    dq.queue.pop_front();
    --queued_;
    send(std::move(p), dq);
    // send() may have broken the port and emptied this destination.
    it = dests_.find(key);
    if (it != dests_.end()) {
      mark_ready(it->second, it->first);
      maybe_erase(it);
    }
  }
}

void EngineImpl::maybe_erase(std::map<std::string, DestQueue>::iterator it) {
  if (it->second.queue.empty() && it->second.in_flight == 0 && !it->second.ready) {
    dests_.erase(it);
  }
}

void EngineImpl::send(PendingPtr p, DestQueue& dq) {
  auto pit = ports_.find(p->port);
  if (pit == ports_.end() || !pit->second.open()) {
    finish(std::move(p), Status::port_error, "port closed");
    return;
  }
  OpenPort& port = pit->second;
  auto& cc = counters_[p->req.mgmt_class];
  int agent = agent_for(port, p->req.mgmt_class, p->req.oui);
  if (agent < 0) {
    cc.errors["register"]++;
    finish(std::move(p), Status::port_error,
           "umad_register class " + class_label(p->req.mgmt_class) + ": " + errno_text(agent));
    return;
  }

  std::uint32_t tid = next_tid_++;
  if (tid == 0) tid = next_tid_++;
  p->tid = tid;

  std::vector<std::uint8_t> buf(umad_size() + IB_MAD_SIZE, 0);
  auto* umad = buf.data();
  ib_rpc_t rpc{};
  rpc.mgtclass = p->req.mgmt_class;
  rpc.method = p->req.method;
  rpc.attr.id = p->req.attr_id;
  rpc.attr.mod = p->req.attr_mod;
  rpc.trid = tid;
  rpc.mask = p->req.sa_component_mask;
  rpc.oui = p->req.oui;
  rpc.dataoffs = data_offset(p->req.mgmt_class);
  rpc.datasz = static_cast<int>(std::min<std::size_t>(
      p->req.payload.size(), static_cast<std::size_t>(IB_MAD_SIZE - rpc.dataoffs)));
  ib_dr_path_t dr{};
  if (p->req.to.directed) {
    dr.cnt = static_cast<int>(p->req.to.path.size());
    for (std::size_t i = 0; i < p->req.to.path.size(); ++i) dr.p[i + 1] = p->req.to.path[i];
    dr.drslid = kPermissiveLid;
    dr.drdlid = kPermissiveLid;
  }
  if (!mad_encode(umad_get_mad(umad), &rpc, p->req.to.directed ? &dr : nullptr,
                  rpc.datasz > 0 ? p->req.payload.data() : nullptr)) {
    cc.errors["encode"]++;
    finish(std::move(p), Status::refused, "mad_encode failed");
    return;
  }
  bool gsi = !is_smi(p->req.mgmt_class);
  int dlid = p->req.to.directed ? kPermissiveLid : p->req.to.lid;
  umad_set_addr(umad, dlid, gsi ? 1 : 0, 0, gsi ? IB_DEFAULT_QP1_QKEY : 0);

  // The kernel needs a timeout to route the answer back to this agent; it retries nothing
  // itself (retries 0): the engine's own timer and retry logic decide.
  p->sent_at = Clock::now();
  int rc = umad_send(port.receiver->portid, agent, umad, IB_MAD_SIZE,
                     static_cast<int>(p->timeout.count()), 0);
  if (rc < 0) {
    cc.errors["send"]++;
    std::string error = "umad_send: " + errno_text(rc);
    auto addr = port.addr;
    finish(std::move(p), Status::port_error, error);
    broken(addr, error);
    return;
  }
  cc.sent++;
  p->attempts++;
  if (!p->timer) p->timer = std::make_unique<boost::asio::steady_timer>(io_);
  p->timer->expires_after(p->timeout);
  p->timer->async_wait([w = weak_from_this(), tid](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = w.lock()) self->on_attempt_timeout(tid);
  });
  dq.in_flight++;
  in_flight_total_++;
  in_flight_.emplace(tid, std::move(p));
}

PendingPtr EngineImpl::take_in_flight(std::uint32_t tid) {
  auto it = in_flight_.find(tid);
  if (it == in_flight_.end()) return nullptr;
  auto p = std::move(it->second);
  in_flight_.erase(it);
  in_flight_total_--;
  if (auto d = dests_.find(p->dest_key); d != dests_.end()) {
    d->second.in_flight--;
    mark_ready(d->second, d->first);
    // A directed route with nothing left goes: a discovery's routes are one destination each
    // (30,000 at 50,000 switch ports, 130 octets apiece, for the daemon's life). A LID stays:
    // a sweep asks it again as soon as this answer is handled, and there are as many as LIDs.
    if (p->req.to.directed) maybe_erase(d);
  }
  if (p->timer) p->timer->cancel();
  return p;
}

void EngineImpl::on_attempt_timeout(std::uint32_t tid) {
  auto p = take_in_flight(tid);
  if (!p) return;
  counters_[p->req.mgmt_class].timeouts++;
  std::string error = "no answer from " + p->req.to.to_string() + " after " +
                      std::to_string(p->attempts) + " attempt(s)";
  retry_or_fail(std::move(p), Status::timeout, std::move(error));
  pump();
}

void EngineImpl::retry_or_fail(PendingPtr p, Status status, std::string error) {
  if (p->attempts < p->max_attempts && !p->owner_gone()) {
    counters_[p->req.mgmt_class].retries++;
    auto dit = dests_.try_emplace(p->dest_key).first;
    dit->second.queue.push_front(std::move(p));
    ++queued_;
    mark_ready(dit->second, dit->first);
    return;
  }
  finish(std::move(p), status, std::move(error));
}

void EngineImpl::finish(PendingPtr p, Status status, std::string error,
                        std::vector<std::uint8_t> mad, std::uint16_t mad_status) {
  auto& cc = counters_[p->req.mgmt_class];
  if (p->owner_gone()) status = Status::cancelled;
  cc.results[to_string(status)]++;
  if (status == Status::cancelled || !p->callback) return;
  Response r;
  r.status = status;
  r.mad_status = mad_status;
  r.attempts = p->attempts;
  if (status == Status::ok || status == Status::mad_status) r.rtt = p->answered_at - p->sent_at;
  r.error = std::move(error);
  r.mad = std::move(mad);
  boost::asio::post(io_, [w = weak_from_this(), cb = std::move(p->callback),
                          has_owner = p->has_owner, owner = p->owner, r = std::move(r)]() mutable {
    if (w.expired()) return;
    if (has_owner && owner.expired()) return;
    cb(std::move(r));
  });
}

}  // namespace ibfabric::mad::detail
