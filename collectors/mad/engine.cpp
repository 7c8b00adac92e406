#include "collectors/mad/engine.h"

#include <infiniband/umad.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <arpa/inet.h>
#include <endian.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace ibfabric::mad {

namespace {

using Clock = std::chrono::steady_clock;

// How long the receiver thread blocks in one umad_recv(): bounds how long closing a port waits.
constexpr int kRecvSliceMs = 100;
constexpr std::size_t kMinRecvBuffer = IB_MAD_SIZE;
constexpr std::size_t kMaxRecvBuffer = 1 << 20;  // RMPP-reassembled SA tables
constexpr int kPermissiveLid = 0xffff;

bool is_vendor_range2(std::uint8_t mgmt_class) {
  return mgmt_class >= IB_VENDOR_RANGE2_START_CLASS && mgmt_class <= IB_VENDOR_RANGE2_END_CLASS;
}
bool is_vendor_range1(std::uint8_t mgmt_class) {
  return mgmt_class >= IB_VENDOR_RANGE1_START_CLASS && mgmt_class <= IB_VENDOR_RANGE1_END_CLASS;
}
bool is_smi(std::uint8_t mgmt_class) {
  return mgmt_class == IB_SMI_CLASS || mgmt_class == IB_SMI_DIRECT_CLASS;
}

int data_offset(std::uint8_t mgmt_class) {
  if (is_smi(mgmt_class)) return IB_SMP_DATA_OFFS;
  if (mgmt_class == IB_SA_CLASS) return IB_SA_DATA_OFFS;
  if (mgmt_class == IB_PERFORMANCE_CLASS) return IB_PC_DATA_OFFS;
  if (mgmt_class == IB_BOARD_MGMT_CLASS) return IB_BM_DATA_OFFS;
  if (mgmt_class == IB_CC_CLASS) return IB_CC_DATA_OFFS;
  if (is_vendor_range2(mgmt_class)) return IB_VENDOR_RANGE2_DATA_OFFS;
  if (is_vendor_range1(mgmt_class)) return IB_VENDOR_RANGE1_DATA_OFFS;
  return IB_PC_DATA_OFFS;  // the common GS layout: 24-byte header, 40 reserved
}

int class_version(std::uint8_t mgmt_class) {
  return (mgmt_class == IB_SA_CLASS || mgmt_class == IB_CC_CLASS) ? 2 : 1;
}

std::string class_label(std::uint8_t mgmt_class) {
  switch (mgmt_class) {
    case IB_SMI_CLASS:
      return "smi";
    case IB_SMI_DIRECT_CLASS:
      return "smi_directed";
    case IB_SA_CLASS:
      return "sa";
    case IB_PERFORMANCE_CLASS:
      return "perf";
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", mgmt_class);
      return buf;
    }
  }
}

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

// libibmad's mad_set_field() family takes a non-const buffer for reading too.
std::uint8_t* mutable_bytes(const std::uint8_t* p) { return const_cast<std::uint8_t*>(p); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Config

EngineConfig parse_engine_config(ConfigSection& section) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  EngineConfig c;
  c.ca = section.get_string("ca", c.ca);
  c.port = static_cast<int>(section.get_int("port", c.port, 0, 254));
  c.timeout = duration_cast<milliseconds>(
      section.get_duration("timeout", c.timeout, std::chrono::milliseconds{1}));
  c.retries = static_cast<int>(section.get_int("retries", c.retries, 0, 20));
  c.max_in_flight = static_cast<int>(section.get_int("max_in_flight", c.max_in_flight, 1, 4096));
  c.max_in_flight_per_destination = static_cast<int>(
      section.get_int("max_in_flight_per_destination", c.max_in_flight_per_destination, 1, 256));
  c.rate_limit = section.get_double("rate_limit", c.rate_limit, 0, 1e9);
  c.rate_burst = static_cast<int>(section.get_int("rate_burst", c.rate_burst, 1, 1000000));
  c.max_queued = static_cast<std::size_t>(
      section.get_int("max_queued", static_cast<std::int64_t>(c.max_queued), 1, 100000000));
  c.reopen_backoff = duration_cast<milliseconds>(
      section.get_duration("reopen_backoff", c.reopen_backoff, std::chrono::milliseconds{1}));
  c.reopen_backoff_max = duration_cast<milliseconds>(section.get_duration(
      "reopen_backoff_max", c.reopen_backoff_max, std::chrono::milliseconds{1}));
  if (c.reopen_backoff_max < c.reopen_backoff) {
    section.fail("reopen_backoff_max", "must not be shorter than reopen_backoff");
  }
  section.finish();
  return c;
}

// ---------------------------------------------------------------------------------------------
// Small value types

std::string Destination::to_string() const {
  if (!directed) return "lid " + std::to_string(lid);
  std::string s = "route 0";
  for (auto hop : path) s += "," + std::to_string(hop);
  return s;
}

Request& Request::set(enum MAD_FIELDS field, std::uint32_t value) {
  payload.resize(IB_MAD_SIZE, 0);
  mad_set_field(payload.data(), 0, field, value);
  return *this;
}

Request& Request::set64(enum MAD_FIELDS field, std::uint64_t value) {
  payload.resize(IB_MAD_SIZE, 0);
  mad_set_field64(payload.data(), 0, field, value);
  return *this;
}

Request Request::smp_get(Destination to, std::uint16_t attr_id, std::uint32_t attr_mod) {
  Request r;
  r.mgmt_class = to.directed ? kSmiDirected : kSmiLid;
  r.to = std::move(to);
  r.attr_id = attr_id;
  r.attr_mod = attr_mod;
  return r;
}

Request Request::pma_get(std::uint16_t lid, std::uint16_t attr_id, std::uint32_t attr_mod) {
  Request r;
  r.mgmt_class = kPerfMgt;
  r.to = Destination::to_lid(lid);
  r.attr_id = attr_id;
  r.attr_mod = attr_mod;
  return r;
}

const char* to_string(Status status) {
  switch (status) {
    case Status::ok:
      return "ok";
    case Status::mad_status:
      return "mad_status";
    case Status::timeout:
      return "timeout";
    case Status::port_error:
      return "port_error";
    case Status::port_unavailable:
      return "port_unavailable";
    case Status::queue_full:
      return "queue_full";
    case Status::refused:
      return "refused";
    case Status::cancelled:
      return "cancelled";
  }
  return "unknown";
}

const std::uint8_t* Response::data() const {
  if (mad.size() < IB_MAD_SIZE) return nullptr;
  return mad.data() + data_offset(mad[1]);
}

std::size_t Response::data_size() const {
  if (mad.size() < IB_MAD_SIZE) return 0;
  return mad.size() - static_cast<std::size_t>(data_offset(mad[1]));
}

std::uint32_t Response::get(enum MAD_FIELDS field) const {
  const auto* d = data();
  return d ? mad_get_field(mutable_bytes(d), 0, field) : 0;
}

std::uint64_t Response::get64(enum MAD_FIELDS field) const {
  const auto* d = data();
  return d ? mad_get_field64(mutable_bytes(d), 0, field) : 0;
}

std::string Response::get_string(enum MAD_FIELDS field) const {
  const auto* d = data();
  if (!d) return {};
  // Strings in MADs are at most 64 octets (NodeDescription) and need not be terminated.
  char buf[IB_SMP_DATA_SIZE + 1] = {};
  mad_decode_field(mutable_bytes(d), field, buf);
  buf[IB_SMP_DATA_SIZE] = '\0';
  return std::string(buf, strnlen(buf, IB_SMP_DATA_SIZE));
}

// ---------------------------------------------------------------------------------------------
// Local ports

namespace {

std::once_flag umad_init_once;
bool umad_ready = false;

bool init_umad() {
  std::call_once(umad_init_once, [] {
    umad_ready = umad_init() >= 0;
    if (!umad_ready) spdlog::warn("mad: umad_init failed, no MAD can be sent");
  });
  return umad_ready;
}

}  // namespace

std::vector<LocalPort> list_local_ports() {
  std::vector<LocalPort> out;
  if (!init_umad()) return out;
  char names[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
  int n = umad_get_cas_names(names, UMAD_MAX_DEVICES);
  for (int i = 0; i < n; ++i) {
    umad_ca_t ca{};
    if (umad_get_ca(names[i], &ca) < 0) continue;
    for (int p = 1; p < UMAD_CA_MAX_PORTS && p <= ca.numports; ++p) {
      const umad_port_t* up = ca.ports[p];
      if (!up) continue;
      LocalPort lp;
      lp.ca = ca.ca_name;
      lp.port = up->portnum;
      lp.lid = static_cast<std::uint16_t>(up->base_lid);
      lp.sm_lid = static_cast<std::uint16_t>(up->sm_lid);
      lp.lmc = static_cast<int>(up->lmc);
      lp.state = static_cast<int>(up->state);
      lp.phys_state = static_cast<int>(up->phys_state);
      lp.port_guid = be64toh(up->port_guid);
      lp.node_guid = be64toh(ca.node_guid);
      lp.link_layer = up->link_layer;
      out.push_back(std::move(lp));
    }
    umad_release_ca(&ca);
  }
  std::sort(out.begin(), out.end(), [](const LocalPort& a, const LocalPort& b) {
    return std::tie(a.ca, a.port) < std::tie(b.ca, b.port);
  });
  return out;
}

std::vector<LocalPort> list_infiniband_ports(const std::set<std::string>& only) {
  std::vector<LocalPort> ports;
  for (auto& port : list_local_ports()) {
    if (port.link_layer == "Ethernet") continue;
    if (!only.empty() && !only.count(port.ca)) continue;
    ports.push_back(std::move(port));
  }
  return ports;
}

// ---------------------------------------------------------------------------------------------
// The engine

namespace {

class EngineImpl;

// What the receiver thread shares with the loop; owned by both so neither outlives it.
struct Receiver {
  int portid = -1;
  std::atomic<bool> stop{false};
  // Transaction id (lower 32 bits) of the NodeInfo that wakes the receiver when the port closes;
  // 0 when none was sent.
  std::atomic<std::uint32_t> wake_tid{0};
  std::thread thread;
};

struct OpenPort {
  PortAddress addr;
  std::uint64_t generation = 0;
  std::shared_ptr<Receiver> receiver;                   // null when closed
  std::map<std::pair<int, std::uint32_t>, int> agents;  // (class, oui) -> agent id
  std::map<int, int> service_agents;                    // service id -> agent id
  std::uint16_t sm_lid = 0;
  // Reopen backoff after a failure.
  Clock::time_point retry_at{};
  std::chrono::milliseconds backoff{0};
  std::string last_error;
  std::uint64_t opens = 0;
  std::uint64_t failures = 0;
  bool open() const { return receiver != nullptr; }
};

// One MAD as the receiver thread read it.
struct Arrival {
  int umad_status = 0;
  std::vector<std::uint8_t> bytes;
  ib_mad_addr_t from{};  // network byte order, as libibumad gives it
  int pkey_index = 0;
  Clock::time_point at;
};

// A class this daemon answers requests of (Engine::serve).
struct ServiceEntry {
  PortAddress via;    // as asked (ca "" = the default port)
  PortAddress addr;   // resolved
  std::string error;  // why it is not registered
  std::uint8_t mgmt_class = 0;
  std::uint32_t oui = 0;
  double max_per_second = 0;
  RequestHandler handler;
  double tokens = 0;
  Clock::time_point refilled_at;
  std::uint64_t answered = 0;
  std::uint64_t dropped = 0;
};

struct Pending {
  Request req;
  Callback callback;
  bool has_owner = false;
  std::weak_ptr<void> owner;
  PortAddress port;  // resolved
  std::string dest_key;
  int attempts = 0;
  int max_attempts = 1;
  std::chrono::milliseconds timeout{0};
  std::uint32_t tid = 0;
  Clock::time_point sent_at{};
  Clock::time_point answered_at{};  // when the receiver thread read the answer
  std::unique_ptr<boost::asio::steady_timer> timer;
  bool owner_gone() const { return has_owner && owner.expired(); }
};
using PendingPtr = std::unique_ptr<Pending>;

struct DestQueue {
  std::deque<PendingPtr> queue;
  int in_flight = 0;
  bool ready = false;  // listed in EngineImpl::ready_
};

struct ClassCounters {
  std::uint64_t requests = 0;
  std::uint64_t sent = 0;
  std::uint64_t answered = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t retries = 0;
  std::uint64_t served = 0;                      // requests from elsewhere answered (Engine::serve)
  std::map<std::string, std::uint64_t> results;  // by Status
  std::map<std::string, std::uint64_t> errors;   // by reason
  // Round-trip times of answered attempts.
  std::vector<std::uint64_t> rtt_buckets;
  double rtt_sum = 0;
};

const std::vector<double> kRttBounds{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                     0.025,  0.05,    0.1,    0.25,  0.5,    1.0};

class ClientImpl;

class EngineImpl final : public Engine, public std::enable_shared_from_this<EngineImpl> {
 public:
  EngineImpl(boost::asio::io_context& io, EngineConfig config)
      : Engine(std::move(config)), io_(io), rate_timer_(io) {
    tokens_ = config_.rate_burst;
    refilled_at_ = Clock::now();
  }

  ~EngineImpl() override {
    for (auto& [addr, port] : ports_) close_port(port);
    // Pending requests and their callbacks are dropped with the maps; their timers' handlers
    // hold only weak pointers.
  }

  void submit(Request request, Callback callback) override {
    submit_owned(std::move(request), std::move(callback), false, {});
  }

  std::unique_ptr<Client> client() override;

  std::optional<PortAddress> default_port() override {
    if (!init_umad()) return std::nullopt;
    umad_port_t info{};
    if (umad_get_port(config_.ca.empty() ? nullptr : config_.ca.c_str(), config_.port, &info) < 0) {
      return std::nullopt;
    }
    PortAddress addr{info.ca_name, info.portnum};
    umad_release_port(&info);
    return addr;
  }

  void fill_metrics(MetricsBuilder& out) const override;

  std::unique_ptr<Service> serve(PortAddress via, std::uint8_t mgmt_class, std::uint32_t oui,
                                 double max_per_second, RequestHandler handler) override;

  std::string refresh_service(int id) {
    auto& service = services_.at(id);
    auto addr = resolve(service.via);
    if (!addr) return "no local CA port found";
    service.addr = *addr;
    OpenPort* port = ensure_open(*addr);  // registers the services of a port it opens
    if (!port->open()) return port->last_error;
    if (!port->service_agents.count(id)) register_service(*port, id, service);
    return port->service_agents.count(id) ? "" : service.error;
  }

  void end_service(int id) {
    auto it = services_.find(id);
    if (it == services_.end()) return;
    if (auto pit = ports_.find(it->second.addr); pit != ports_.end() && pit->second.open()) {
      if (auto a = pit->second.service_agents.find(id); a != pit->second.service_agents.end()) {
        umad_unregister(pit->second.receiver->portid, a->second);
        pit->second.service_agents.erase(a);
      }
    }
    services_.erase(it);
  }

  const ServiceEntry* service(int id) const {
    auto it = services_.find(id);
    return it == services_.end() ? nullptr : &it->second;
  }

  void submit_owned(Request request, Callback callback, bool has_owner, std::weak_ptr<void> owner) {
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
    auto addr = resolve(p->req.via);
    if (!addr) {
      finish(std::move(p), Status::port_unavailable, "no local CA port found");
      return;
    }
    p->port = *addr;
    OpenPort* port = ensure_open(*addr);
    if (!port->open()) {
      finish(std::move(p), Status::port_unavailable, port->last_error);
      return;
    }
    if (p->req.mgmt_class == IB_SA_CLASS && !p->req.to.directed && p->req.to.lid == 0) {
      p->req.to.lid = port->sm_lid;
      if (p->req.to.lid == 0) {
        finish(std::move(p), Status::refused, "no SM LID known on this port");
        return;
      }
    }
    p->dest_key = addr->ca + "/" + std::to_string(addr->port) + "/" + p->req.to.to_string();
    auto dit = dests_.try_emplace(p->dest_key).first;
    dit->second.queue.push_back(std::move(p));
    ++queued_;
    mark_ready(dit->second, dit->first);
    pump();
  }

  // Called on the loop by what the receiver thread posts.
  void on_receive(PortAddress addr, std::uint64_t generation, Arrival arrival);
  void on_port_broken(PortAddress addr, std::uint64_t generation, std::string error);

 private:
  std::optional<std::string> refusal(const Request& r) const {
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

  std::optional<PortAddress> resolve(const PortAddress& via) {
    if (!via.ca.empty()) {
      if (via.port > 0) return via;
      if (!init_umad()) return std::nullopt;
      umad_port_t info{};
      if (umad_get_port(via.ca.c_str(), 0, &info) < 0) return std::nullopt;
      PortAddress addr{info.ca_name, info.portnum};
      umad_release_port(&info);
      return addr;
    }
    if (!default_port_) default_port_ = default_port();
    return default_port_;
  }

  OpenPort* ensure_open(const PortAddress& addr) {
    auto& port = ports_[addr];
    port.addr = addr;
    if (port.open()) return &port;
    auto now = Clock::now();
    if (now < port.retry_at) return &port;  // last_error still says why
    if (!init_umad()) {
      port.last_error = "umad_init failed";
      return &port;
    }
    int portid = umad_open_port(addr.ca.c_str(), addr.port);
    if (portid < 0) {
      port_failed(port, "umad_open_port " + addr.ca + " port " + std::to_string(addr.port) + ": " +
                            errno_text(portid));
      return &port;
    }
    port.agents.clear();
    port.service_agents.clear();
    port.generation = ++generations_;
    port.opens++;
    auto receiver = std::make_shared<Receiver>();
    receiver->portid = portid;
    port.receiver = receiver;
    // Services first: under the simulator, requests for them can arrive as soon as the port
    // is open (see register_service).
    for (auto& [id, service] : services_) {
      if (service.addr == addr) register_service(port, id, service);
    }
    umad_port_t info{};
    if (umad_get_port(addr.ca.c_str(), addr.port, &info) >= 0) {
      port.sm_lid = static_cast<std::uint16_t>(info.sm_lid);
      umad_release_port(&info);
    }
    receiver->thread =
        std::thread([this_weak = weak_from_this(), receiver, addr, gen = port.generation,
                     &io = io_] { receive_loop(io, this_weak, receiver, addr, gen); });
    spdlog::info("mad: port opened ca={} port={}", addr.ca, addr.port);
    return &port;
  }

  void port_failed(OpenPort& port, std::string error) {
    port.failures++;
    port.backoff = port.backoff.count() == 0
                       ? config_.reopen_backoff
                       : std::min(port.backoff * 2, config_.reopen_backoff_max);
    port.retry_at = Clock::now() + port.backoff;
    if (port.last_error != error) {
      spdlog::warn("mad: port unusable ca={} port={} error=\"{}\" retry_in_ms={}", port.addr.ca,
                   port.addr.port, error, port.backoff.count());
    }
    port.last_error = std::move(error);
  }

  void close_port(OpenPort& port) {
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

  // The receiver leaves umad_recv() when its slice ends (kRecvSliceMs) or a MAD arrives; neither
  // closing nor unregistering wakes it. So ask the local node for its NodeInfo (directed route,
  // zero hops: no switch involved) and let the answer wake it: closing a port (every `--once`
  // run, every shutdown) then waits a round trip instead of up to a whole slice. Best effort:
  // on a broken port the send fails and the slice ends the wait as before. Sets the receiver's
  // stop flag; once stopped, the receiver still waits for this answer (see receive_loop).
  void wake_receiver(OpenPort& port) {
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
    if (encoded &&
        umad_send(receiver.portid, agent, buf.data(), IB_MAD_SIZE, kRecvSliceMs, 0) < 0) {
      receiver.wake_tid = 0;  // nothing will come: the slice ends the wait
    }
  }

  int agent_for(OpenPort& port, std::uint8_t mgmt_class, std::uint32_t oui) {
    auto key = std::make_pair(static_cast<int>(mgmt_class), is_vendor_range2(mgmt_class) ? oui : 0);
    if (auto it = port.agents.find(key); it != port.agents.end()) return it->second;
    int agent;
    if (is_vendor_range2(mgmt_class)) {
      std::uint8_t oui_bytes[3] = {static_cast<std::uint8_t>(oui >> 16),
                                   static_cast<std::uint8_t>(oui >> 8),
                                   static_cast<std::uint8_t>(oui)};
      agent = umad_register_oui(port.receiver->portid, mgmt_class, 0, oui_bytes, nullptr);
    } else {
      // SA answers tables with RMPP; the kernel reassembles them for an RMPP agent.
      int rmpp = mgmt_class == IB_SA_CLASS ? 1 : 0;
      agent = umad_register(port.receiver->portid, mgmt_class, class_version(mgmt_class), rmpp,
                            nullptr);
    }
    if (agent >= 0) port.agents[key] = agent;
    return agent;
  }

  void register_service(OpenPort& port, int id, ServiceEntry& service) {
    // The simulator's shim crashes a process that receives a MAD of a class it registered no
    // agent for, and an SM sends SMInfo to the ports the shim marks IsSM for a responder. SMP
    // agents without a method mask receive nothing unsolicited on a real host.
    agent_for(port, IB_SMI_CLASS, 0);
    agent_for(port, IB_SMI_DIRECT_CLASS, 0);
    long method_mask[16 / sizeof(long)] = {};
    method_mask[0] = 1L << IB_MAD_METHOD_GET;
    std::uint8_t oui_bytes[3] = {static_cast<std::uint8_t>(service.oui >> 16),
                                 static_cast<std::uint8_t>(service.oui >> 8),
                                 static_cast<std::uint8_t>(service.oui)};
    int agent =
        umad_register_oui(port.receiver->portid, service.mgmt_class, 0, oui_bytes, method_mask);
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

  // Answers a request for a served class, or counts it as unsolicited.
  void serve_request(OpenPort& port, const Arrival& arrival) {
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

  void mark_ready(DestQueue& dq, const std::string& key) {
    if (dq.ready || dq.queue.empty() || dq.in_flight >= config_.max_in_flight_per_destination) {
      return;
    }
    dq.ready = true;
    ready_.push_back(key);
  }

  bool take_token() {
    if (config_.rate_limit <= 0) return true;
    auto now = Clock::now();
    double elapsed = std::chrono::duration<double>(now - refilled_at_).count();
    refilled_at_ = now;
    tokens_ = std::min<double>(config_.rate_burst, tokens_ + elapsed * config_.rate_limit);
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

  void arm_rate_timer() {
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

  void pump() {
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

  void maybe_erase(std::map<std::string, DestQueue>::iterator it) {
    if (it->second.queue.empty() && it->second.in_flight == 0 && !it->second.ready) {
      dests_.erase(it);
    }
  }

  void send(PendingPtr p, DestQueue& dq) {
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

  // Takes the in-flight request `tid` out and frees its slots.
  PendingPtr take_in_flight(std::uint32_t tid) {
    auto it = in_flight_.find(tid);
    if (it == in_flight_.end()) return nullptr;
    auto p = std::move(it->second);
    in_flight_.erase(it);
    in_flight_total_--;
    if (auto d = dests_.find(p->dest_key); d != dests_.end()) {
      d->second.in_flight--;
      mark_ready(d->second, d->first);
    }
    if (p->timer) p->timer->cancel();
    return p;
  }

  void on_attempt_timeout(std::uint32_t tid) {
    auto p = take_in_flight(tid);
    if (!p) return;
    counters_[p->req.mgmt_class].timeouts++;
    std::string error = "no answer from " + p->req.to.to_string() + " after " +
                        std::to_string(p->attempts) + " attempt(s)";
    retry_or_fail(std::move(p), Status::timeout, std::move(error));
    pump();
  }

  void retry_or_fail(PendingPtr p, Status status, std::string error) {
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

  void broken(const PortAddress& addr, const std::string& error) {
    auto pit = ports_.find(addr);
    if (pit == ports_.end()) return;
    OpenPort& port = pit->second;
    close_port(port);
    port_failed(port, error);
    if (default_port_ && *default_port_ == addr) default_port_.reset();
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

  // Every request ends here exactly once. The callback runs from the loop, never inside
  // submit(), and is dropped if its Client or the engine is gone by then.
  void finish(PendingPtr p, Status status, std::string error, std::vector<std::uint8_t> mad = {},
              std::uint16_t mad_status = 0) {
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
    boost::asio::post(io_,
                      [w = weak_from_this(), cb = std::move(p->callback), has_owner = p->has_owner,
                       owner = p->owner, r = std::move(r)]() mutable {
                        if (w.expired()) return;
                        if (has_owner && owner.expired()) return;
                        cb(std::move(r));
                      });
  }

  static void receive_loop(boost::asio::io_context& io, std::weak_ptr<EngineImpl> engine,
                           std::shared_ptr<Receiver> receiver, PortAddress addr,
                           std::uint64_t generation);

  boost::asio::io_context& io_;
  std::map<PortAddress, OpenPort> ports_;
  std::optional<PortAddress> default_port_;
  std::uint64_t generations_ = 0;
  std::map<std::string, DestQueue> dests_;
  std::deque<std::string> ready_;  // destinations with queued work and a free slot
  std::unordered_map<std::uint32_t, PendingPtr> in_flight_;
  int in_flight_total_ = 0;
  std::size_t queued_ = 0;
  std::uint32_t next_tid_ = 1;
  double tokens_ = 0;
  Clock::time_point refilled_at_;
  boost::asio::steady_timer rate_timer_;
  bool rate_timer_armed_ = false;
  std::map<std::uint8_t, ClassCounters> counters_;
  std::map<int, ServiceEntry> services_;
  int next_service_id_ = 1;
  std::uint64_t unmatched_ = 0;
  std::uint64_t bad_responses_ = 0;
  bool logged_bad_response_ = false;

  friend class ClientImpl;
};

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

std::unique_ptr<Client> EngineImpl::client() {
  return std::make_unique<ClientImpl>(weak_from_this());
}

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
  return std::make_unique<ServiceImpl>(weak_from_this(), id);
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

void EngineImpl::fill_metrics(MetricsBuilder& out) const {
  out.declare("ibfabric_mad_requests_total",
              "MAD requests finished, by management class and result",
              prometheus::MetricType::Counter);
  for (const auto& [cls, cc] : counters_) {
    if (cls == 0) continue;
    Labels l{{"class", class_label(cls)}};
    out.counter("ibfabric_mad_sent_total", "MADs sent, retries included, by management class", l,
                static_cast<double>(cc.sent));
    out.counter("ibfabric_mad_answered_total", "Answers matched to a request, by management class",
                l, static_cast<double>(cc.answered));
    out.counter("ibfabric_mad_timeouts_total", "Attempts that got no answer in time", l,
                static_cast<double>(cc.timeouts));
    out.counter("ibfabric_mad_retries_total", "Attempts sent again after a timeout or busy answer",
                l, static_cast<double>(cc.retries));
    out.counter("ibfabric_mad_served_total",
                "Requests from other nodes answered by this daemon (the MAD probe responder)", l,
                static_cast<double>(cc.served));
    for (const auto& [result, n] : cc.results) {
      out.counter("ibfabric_mad_requests_total",
                  "MAD requests finished, by management class and result",
                  {{"class", class_label(cls)}, {"result", result}}, static_cast<double>(n));
    }
    for (const auto& [reason, n] : cc.errors) {
      out.counter("ibfabric_mad_errors_total", "MAD errors, by management class and reason",
                  {{"class", class_label(cls)}, {"reason", reason}}, static_cast<double>(n));
    }
    if (!cc.rtt_buckets.empty()) {
      out.histogram("ibfabric_mad_response_seconds",
                    "Time from sending a MAD to its answer, by management class", l, kRttBounds,
                    cc.rtt_buckets, cc.answered, cc.rtt_sum);
    }
  }
  if (auto it = counters_.find(0); it != counters_.end()) {
    for (const auto& [reason, n] : it->second.errors) {
      out.counter("ibfabric_mad_errors_total", "MAD errors, by management class and reason",
                  {{"class", "none"}, {"reason", reason}}, static_cast<double>(n));
    }
  }
  out.counter("ibfabric_mad_unmatched_answers_total",
              "Answers matching no request in flight (mostly late answers after a timeout)", {},
              static_cast<double>(unmatched_));
  out.counter("ibfabric_mad_bad_answers_total",
              "Answers dropped as truncated or not matching the request", {},
              static_cast<double>(bad_responses_));
  out.gauge("ibfabric_mad_in_flight", "MADs sent and not yet answered or timed out", {},
            in_flight_total_);
  out.gauge("ibfabric_mad_queued", "MAD requests waiting for a free slot or rate-limit token", {},
            static_cast<double>(queued_));
  for (const auto& [addr, port] : ports_) {
    Labels l{{"device", addr.ca}, {"port", std::to_string(addr.port)}};
    out.gauge("ibfabric_mad_port_open", "1 when the engine has this local umad port open", l,
              port.open() ? 1 : 0);
    out.counter("ibfabric_mad_port_opens_total", "Times the umad port was opened", l,
                static_cast<double>(port.opens));
    out.counter("ibfabric_mad_port_failures_total",
                "Times the umad port failed to open or broke while open", l,
                static_cast<double>(port.failures));
  }
}

}  // namespace

std::shared_ptr<Engine> Engine::create(boost::asio::io_context& io, EngineConfig config) {
  // Writing to a dead simulator's socket must be an error, not a fatal signal.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
  return std::make_shared<EngineImpl>(io, std::move(config));
}

}  // namespace ibfabric::mad
