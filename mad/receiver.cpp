// The engine's receiver (as the receive half of libibmad's rpc.c): the thread that is the only
// reader of an open port, matching answers to requests by transaction id, the agents a send
// registers on demand, and what happens when a port breaks. Opening ports is port_open.cpp's.
#include "mad/engine_impl.h"

namespace ibfabric::mad::detail {

void EngineImpl::wake_receiver(OpenPort& port) {
  auto& receiver = *port.receiver;
  int agent = agent_for(port, IB_SMI_DIRECT_CLASS, 0);
  if (agent < 0) {
    receiver.stop = true;
    return;
  }
  std::vector<std::uint8_t> buf(umad_size() + IB_MAD_SIZE, 0);
  ib_rpc_t rpc{};
  rpc.mgtclass = IB_SMI_DIRECT_CLASS;
  rpc.method = IB_MAD_METHOD_GET;
  rpc.attr.id = IB_ATTR_NODE_INFO;
  std::uint32_t tid = next_tid_++;
  if (tid == 0) tid = next_tid_++;
  rpc.trid = tid;
  rpc.dataoffs = IB_SMP_DATA_OFFS;
  ib_dr_path_t dr{};
  dr.drslid = kPermissiveLid;
  dr.drdlid = kPermissiveLid;
  bool encoded = mad_encode(umad_get_mad(buf.data()), &rpc, &dr, nullptr) != nullptr;
  umad_set_addr(buf.data(), kPermissiveLid, 0, 0, 0);
  // wake_tid before stop: a receiver that sees stop knows whether to wait for the answer.
  if (encoded) receiver.wake_tid = tid;
  receiver.stop = true;
  if (encoded && umad_send(receiver.portid, agent, buf.data(), IB_MAD_SIZE, kRecvSliceMs, 0) < 0) {
    receiver.wake_tid = 0;  // nothing will come: the slice ends the wait
  }
}

int register_agent(int portid, const AgentSpec& spec) {
  long method_mask[16 / sizeof(long)] = {};
  method_mask[0] = 1L << IB_MAD_METHOD_GET;
  long* mask = spec.serve_get ? method_mask : nullptr;
  if (is_vendor_range2(spec.mgmt_class)) {
    std::uint8_t oui_bytes[3] = {static_cast<std::uint8_t>(spec.oui >> 16),
                                 static_cast<std::uint8_t>(spec.oui >> 8),
                                 static_cast<std::uint8_t>(spec.oui)};
    return umad_register_oui(portid, spec.mgmt_class, 0, oui_bytes, mask);
  }
  // SA answers tables with RMPP; the kernel reassembles them for an RMPP agent.
  int rmpp = spec.mgmt_class == IB_SA_CLASS ? 1 : 0;
  return umad_register(portid, spec.mgmt_class, class_version(spec.mgmt_class), rmpp, mask);
}

int EngineImpl::agent_for(OpenPort& port, std::uint8_t mgmt_class, std::uint32_t oui) {
  auto key = std::make_pair(static_cast<int>(mgmt_class), is_vendor_range2(mgmt_class) ? oui : 0);
  if (auto it = port.agents.find(key); it != port.agents.end()) return it->second;
  int agent = register_agent(port.receiver->portid, AgentSpec{mgmt_class, oui, false});
  if (agent >= 0) port.agents[key] = agent;
  return agent;
}

void EngineImpl::broken(const PortAddress& addr, const std::string& error) {
  auto pit = ports_.find(addr);
  if (pit == ports_.end()) return;
  OpenPort& port = pit->second;
  close_port(port);
  port_failed(port, error);
  std::erase_if(resolved_, [&](const auto& entry) { return entry.second == addr; });
  // Everything pending on this port fails now rather than timing out one by one.
  std::vector<std::uint32_t> tids;
  for (auto& [tid, p] : in_flight_) {
    if (p->port == addr) tids.push_back(tid);
  }
  for (auto tid : tids) {
    if (auto p = take_in_flight(tid)) finish(std::move(p), Status::port_error, error);
  }
  for (auto it = dests_.begin(); it != dests_.end();) {
    auto& q = it->second.queue;
    for (auto qi = q.begin(); qi != q.end();) {
      if ((*qi)->port == addr) {
        auto p = std::move(*qi);
        qi = q.erase(qi);
        --queued_;
        finish(std::move(p), Status::port_error, error);
      } else {
        ++qi;
      }
    }
    if (q.empty() && it->second.in_flight == 0) {
      it->second.ready = false;
      it = dests_.erase(it);
    } else {
      ++it;
    }
  }
}

void EngineImpl::receive_loop(boost::asio::io_context& io, std::weak_ptr<EngineImpl> engine,
                              std::shared_ptr<Receiver> receiver, PortAddress addr,
                              std::uint64_t generation) {
  std::size_t capacity = kMinRecvBuffer;
  std::vector<std::uint8_t> buf(umad_size() + capacity);
  // Once stopped, the receiver still reads until the wake-up answer (close_port) is in, or one
  // slice passes: an answer reaching the simulator's shim after the descriptor closed crashes
  // the process (its receiver thread dereferences the freed queue).
  bool slice_after_stop = false;
  for (;;) {
    if (receiver->stop.load() && (receiver->wake_tid.load() == 0 || slice_after_stop)) return;
    bool stopping = receiver->stop.load();
    int length = static_cast<int>(capacity);
    int rc = umad_recv(receiver->portid, buf.data(), &length, kRecvSliceMs);
    if (rc < 0) {
      int err = -rc;
      if (err == ETIMEDOUT || err == EAGAIN || err == EINTR) {
        slice_after_stop = slice_after_stop || stopping;
        continue;
      }
      if (err == ENOSPC && length > static_cast<int>(capacity) &&
          static_cast<std::size_t>(length) <= kMaxRecvBuffer) {
        // The next read returns the same MAD; make room for it.
        capacity = static_cast<std::size_t>(length);
        buf.assign(umad_size() + capacity, 0);
        continue;
      }
      if (receiver->stop.load()) return;
      boost::asio::post(io, [engine, addr, generation, error = "umad_recv: " + errno_text(err)] {
        if (auto e = engine.lock()) e->on_port_broken(addr, generation, error);
      });
      return;
    }
    Arrival arrival;
    // Stamped here, not on the loop: round-trip times exclude the wait for the event loop.
    arrival.at = Clock::now();
    arrival.umad_status = umad_status(buf.data());
    if (auto* from = umad_get_mad_addr(buf.data())) arrival.from = *from;
    arrival.pkey_index = umad_get_pkey(buf.data());
    auto* mad = static_cast<std::uint8_t*>(umad_get_mad(buf.data()));
    if (receiver->stop.load() && receiver->wake_tid.load() != 0 &&
        static_cast<std::uint32_t>(mad_get_field64(mad, 0, IB_MAD_TRID_F)) ==
            receiver->wake_tid.load()) {
      return;
    }
    std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(std::max(length, 0)), capacity);
    arrival.bytes.assign(mad, mad + n);
    if (capacity > kMinRecvBuffer) {
      // A large SA table (megabytes at 50,000 ports, once per sweep) is not kept room for
      // between sweeps: the next one grows the buffer again.
      capacity = kMinRecvBuffer;
      std::vector<std::uint8_t>(umad_size() + capacity).swap(buf);
    }
    boost::asio::post(io, [engine, addr, generation, arrival = std::move(arrival)]() mutable {
      if (auto e = engine.lock()) e->on_receive(addr, generation, std::move(arrival));
    });
  }
}

void EngineImpl::on_port_broken(PortAddress addr, std::uint64_t generation, std::string error) {
  auto pit = ports_.find(addr);
  if (pit == ports_.end() || pit->second.generation != generation || !pit->second.open()) return;
  counters_[0].errors["receive"]++;
  broken(addr, error);
}

void EngineImpl::on_receive(PortAddress addr, std::uint64_t generation, Arrival arrival) {
  auto& bytes = arrival.bytes;
  const int umad_status_code = arrival.umad_status;
  auto pit = ports_.find(addr);
  if (pit == ports_.end() || pit->second.generation != generation) return;  // a closed port's
  // An RMPP-reassembled SA answer (GetTableResp) is as long as its payload, which is shorter
  // than one MAD when the table is small; the rest of the engine reads whole MADs.
  if (bytes.size() >= IB_SA_DATA_OFFS && bytes.size() < IB_MAD_SIZE && bytes[1] == IB_SA_CLASS) {
    bytes.resize(IB_MAD_SIZE, 0);
  }
  if (bytes.size() < IB_MAD_SIZE) {
    bad_responses_++;
    if (!logged_bad_response_) {
      spdlog::warn("mad: short answer dropped ca={} port={} bytes={}", addr.ca, addr.port,
                   bytes.size());
      logged_bad_response_ = true;
    }
    return;
  }
  if (umad_status_code == 0 && !mad_get_field(bytes.data(), 0, IB_MAD_RESPONSE_F)) {
    // A request, not an answer: its transaction id is the requester's, not ours.
    serve_request(pit->second, arrival);
    return;
  }
  auto tid = static_cast<std::uint32_t>(mad_get_field64(bytes.data(), 0, IB_MAD_TRID_F));
  auto it = in_flight_.find(tid);
  if (it == in_flight_.end() || !(it->second->port == addr)) {
    // Typically the late answer to an attempt that already timed out.
    unmatched_++;
    return;
  }
  const Request& req = it->second->req;
  auto& cc = counters_[req.mgmt_class];
  if (umad_status_code != 0) {
    // The kernel returns our own send with a status when it gave up waiting (ETIMEDOUT) or
    // could not send it at all.
    auto p = take_in_flight(tid);
    if (umad_status_code == ETIMEDOUT) {
      cc.timeouts++;
    } else {
      cc.errors["send_status"]++;
    }
    std::string error =
        "no answer from " + p->req.to.to_string() + ": " + errno_text(umad_status_code);
    retry_or_fail(std::move(p), Status::timeout, std::move(error));
    pump();
    return;
  }
  unsigned mgmt_class = mad_get_field(bytes.data(), 0, IB_MAD_MGMTCLASS_F);
  unsigned method = mad_get_field(bytes.data(), 0, IB_MAD_METHOD_F);
  unsigned response = mad_get_field(bytes.data(), 0, IB_MAD_RESPONSE_F);
  unsigned attr = mad_get_field(bytes.data(), 0, IB_MAD_ATTRID_F);
  if (!response || mgmt_class != req.mgmt_class || attr != req.attr_id ||
      (method & ~static_cast<unsigned>(IB_MAD_RESPONSE)) != req.method) {
    // Not an answer to what we asked: let the attempt time out and retry.
    cc.errors["bad_response"]++;
    bad_responses_++;
    return;
  }
  auto p = take_in_flight(tid);
  p->answered_at = arrival.at;
  cc.answered++;
  double rtt = std::chrono::duration<double>(p->answered_at - p->sent_at).count();
  if (cc.rtt_buckets.empty()) cc.rtt_buckets.assign(kRttBounds.size(), 0);
  for (std::size_t i = 0; i < kRttBounds.size(); ++i) {
    if (rtt <= kRttBounds[i]) cc.rtt_buckets[i]++;
  }
  cc.rtt_sum += rtt;
  // A successful answer ends the port's reopen backoff.
  pit->second.backoff = std::chrono::milliseconds{0};
  pit->second.last_error.clear();

  auto status = static_cast<std::uint16_t>(req.mgmt_class == IB_SMI_DIRECT_CLASS
                                               ? mad_get_field(bytes.data(), 0, IB_DRSMP_STATUS_F)
                                               : mad_get_field(bytes.data(), 0, IB_MAD_STATUS_F));
  if (status == 0) {
    finish(std::move(p), Status::ok, {}, std::move(bytes));
  } else if ((status & IB_MAD_STS_BUSY) != 0 && p->attempts < p->max_attempts) {
    cc.errors["busy"]++;
    retry_or_fail(std::move(p), Status::mad_status, "busy");
  } else {
    cc.errors["mad_status"]++;
    char text[64];
    std::snprintf(text, sizeof text, "MAD status 0x%04x from ", status);
    std::string error = text + p->req.to.to_string();
    finish(std::move(p), Status::mad_status, std::move(error), std::move(bytes), status);
  }
  pump();
}

}  // namespace ibfabric::mad::detail
