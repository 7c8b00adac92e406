#pragma once
// The MAD engine's inside, shared by the files that implement it (not part of its API, which
// is engine.h). Split as libibmad splits rpc.c, register.c and serv.c:
//   engine.cpp       the value types (Request, Response, ...), metrics, Engine::create
//   engine_config.cpp  the `mad:` config section
//   local_ports.cpp  listing the local CA ports (libibumad's sysfs reads)
//   scheduler.cpp    queues per destination, the in-flight caps, the rate limit, timeouts,
//                    retries, and how every request ends (finish)
//   port_open.cpp    umad ports: resolving and opening them off the loop, their agents, closing
//   receiver.cpp     the receiver thread, TID matching, agents on demand, a port that breaks
//   services.cpp     answering requests of a class this daemon serves (Engine::serve)

#include "core/off_loop.h"
#include "mad/engine.h"

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
#include <list>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <utility>

namespace ibfabric::mad::detail {

using Clock = std::chrono::steady_clock;

// How long the receiver thread blocks in one umad_recv(): bounds how long closing a port waits.
inline constexpr int kRecvSliceMs = 100;
constexpr std::size_t kMinRecvBuffer = IB_MAD_SIZE;
// RMPP-reassembled SA tables: the PortInfoRecord table of a whole subnet is 72 octets a port
// (4.3 MB at 50,000 switch ports and 10,000 HCAs).
constexpr std::size_t kMaxRecvBuffer = 32u << 20;
constexpr int kPermissiveLid = 0xffff;

inline bool is_vendor_range2(std::uint8_t mgmt_class) {
  return mgmt_class >= IB_VENDOR_RANGE2_START_CLASS && mgmt_class <= IB_VENDOR_RANGE2_END_CLASS;
}
inline bool is_vendor_range1(std::uint8_t mgmt_class) {
  return mgmt_class >= IB_VENDOR_RANGE1_START_CLASS && mgmt_class <= IB_VENDOR_RANGE1_END_CLASS;
}
inline bool is_smi(std::uint8_t mgmt_class) {
  return mgmt_class == IB_SMI_CLASS || mgmt_class == IB_SMI_DIRECT_CLASS;
}

inline int data_offset(std::uint8_t mgmt_class) {
  if (is_smi(mgmt_class)) return IB_SMP_DATA_OFFS;
  if (mgmt_class == IB_SA_CLASS) return IB_SA_DATA_OFFS;
  if (mgmt_class == IB_PERFORMANCE_CLASS) return IB_PC_DATA_OFFS;
  if (mgmt_class == IB_BOARD_MGMT_CLASS) return IB_BM_DATA_OFFS;
  if (mgmt_class == IB_CC_CLASS) return IB_CC_DATA_OFFS;
  if (is_vendor_range2(mgmt_class)) return IB_VENDOR_RANGE2_DATA_OFFS;
  if (is_vendor_range1(mgmt_class)) return IB_VENDOR_RANGE1_DATA_OFFS;
  return IB_PC_DATA_OFFS;  // the common GS layout: 24-byte header, 40 reserved
}

inline int class_version(std::uint8_t mgmt_class) {
  return (mgmt_class == IB_SA_CLASS || mgmt_class == IB_CC_CLASS) ? 2 : 1;
}

inline std::string class_label(std::uint8_t mgmt_class) {
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

inline std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

// libibmad's mad_set_field() family takes a non-const buffer for reading too.
inline std::uint8_t* mutable_bytes(const std::uint8_t* p) { return const_cast<std::uint8_t*>(p); }

// libibumad's umad_init(), once per process; false when it failed (logged once).
bool init_umad();
// The IsSM mark take_simulator_issm() held back, set on `addr` (its issm device opened and kept
// open: closing it would clear the mark) once its agents are registered; once per process,
// nothing when none was held back. Under the shim only, so its two sysfs reads may run on the
// loop.
void mark_simulator_issm(const PortAddress& addr);
// Clears that mark (closes the issm device): called before the engine closes its ports, so that
// no request reaches the process while it closes them and exits.
void unmark_simulator_issm();

// libibumad's blocking part of finding and opening a port: sysfs reads (umad_get_port) and
// umad_open_port, which on a real host can wait as long as an HCA firmware command. Both run on
// a worker thread (core/off_loop.h), never on the loop; tests replace them.
// An agent to register on a port as soon as it is open, on the worker that opened it: the
// classes a service receives unsolicited (see EngineImpl::register_service). `serve_get`: the
// agent receives Get requests (a method mask), not only answers.
struct AgentSpec {
  std::uint8_t mgmt_class = 0;
  std::uint32_t oui = 0;
  bool serve_get = false;
};
struct Opened {
  int portid = -1;  // < 0: not opened, `error` says why
  std::uint16_t sm_lid = 0;
  std::string error;
  std::vector<int> agents;            // one per AgentSpec asked for, in order; < 0: that one failed
  Clock::time_point registered_at{};  // after the last agent's registration (0: not told)
};
struct PortOps {
  // The port libibumad picks for CA `ca` ("" = the first) and port `port` (0 = the first
  // active); nullopt when there is none.
  std::function<std::optional<PortAddress>(const std::string& ca, int port)> resolve;
  std::function<Opened(const PortAddress& addr, const std::vector<AgentSpec>& agents)> open;
  static PortOps umad();
};
// Registers one agent (umad_register / umad_register_oui); its id, or a negative errno.
int register_agent(int portid, const AgentSpec& spec);

// How long the engine waits for one resolve or open on its worker. A fixed few seconds, as for
// listing the ports (PortListing::kDefaultDeadline): a sysfs read that takes longer is stuck
// on the firmware, and the requests parked behind it should fail rather than wait for it.
inline constexpr std::chrono::seconds kOpenDeadline{5};

struct OffLoopCall;

// A umad port descriptor a worker opened; closed unless the loop takes it (an open that
// returned after its deadline, or after the engine went away).
struct PortHandle {
  int portid = -1;
  explicit PortHandle(int id) : portid(id) {}
  PortHandle(const PortHandle&) = delete;
  PortHandle& operator=(const PortHandle&) = delete;
  ~PortHandle() {
    if (portid >= 0) umad_close_port(portid);
  }
  int release() { return std::exchange(portid, -1); }
};

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
  std::unique_ptr<OffLoopCall> opening;  // resolve + umad_open_port on a worker
  bool open() const { return receiver != nullptr; }
  bool is_opening() const;
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

// One blocking call at a time off the loop, waited for until a deadline; what waits for it is
// parked here (counted in queued_). A call past its deadline keeps the worker busy until it
// returns: no second one starts meanwhile, so a stuck sysfs read holds one thread.
struct OffLoopCall {
  explicit OffLoopCall(boost::asio::io_context& io) : worker(io), timer(io) {}
  OffLoop worker;
  boost::asio::steady_timer timer;
  std::uint64_t id = 0;    // of the call waited for
  bool waiting = false;    // started, and neither returned nor past its deadline
  std::string last_error;  // of the last call that failed (cleared when one succeeds)
  std::deque<PendingPtr> parked;
};

inline bool OpenPort::is_opening() const { return opening && opening->waiting; }

struct DestQueue {
  // A list: most destinations of a discovery (one directed route each) hold a single request,
  // for which a deque's first block (512 octets) was most of the engine's memory at its peak.
  std::list<PendingPtr> queue;
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

inline const std::vector<double> kRttBounds{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                            0.025,  0.05,    0.1,    0.25,  0.5,    1.0};

class EngineImpl final : public Engine, public std::enable_shared_from_this<EngineImpl> {
 public:
  EngineImpl(boost::asio::io_context& io, EngineConfig config, PortOps ops = PortOps::umad(),
             std::chrono::nanoseconds open_deadline = kOpenDeadline);
  ~EngineImpl() override;
  void submit(Request request, Callback callback) override;
  std::unique_ptr<Client> client() override;
  std::optional<PortAddress> default_port() override;
  void fill_metrics(MetricsBuilder& out) const override;
  std::unique_ptr<Service> serve(PortAddress via, std::uint8_t mgmt_class, std::uint32_t oui,
                                 double max_per_second, RequestHandler handler) override;
  void open_default_port(std::function<void(std::string)> done) override;
  std::string refresh_service(int id);
  void end_service(int id);
  const ServiceEntry* service(int id) const;
  void submit_owned(Request request, Callback callback, bool has_owner, std::weak_ptr<void> owner);

  // Called on the loop by what the receiver thread posts.
  void on_receive(PortAddress addr, std::uint64_t generation, Arrival arrival);
  void on_port_broken(PortAddress addr, std::uint64_t generation, std::string error);

 private:
  // scheduler.cpp
  std::optional<std::string> refusal(const Request& r) const;
  void mark_ready(DestQueue& dq, const std::string& key);
  bool take_token();
  void arm_rate_timer();
  void pump();
  void maybe_erase(std::map<std::string, DestQueue>::iterator it);
  void send(PendingPtr p, DestQueue& dq);
  // Takes the in-flight request `tid` out and frees its slots.
  PendingPtr take_in_flight(std::uint32_t tid);
  void on_attempt_timeout(std::uint32_t tid);
  void retry_or_fail(PendingPtr p, Status status, std::string error);
  // Every request ends here exactly once. The callback runs from the loop, never inside
  // submit(), and is dropped if its Client or the engine is gone by then.
  void finish(PendingPtr p, Status status, std::string error, std::vector<std::uint8_t> mad = {},
              std::uint16_t mad_status = 0);

  // Queues `p` for its destination on the open `port` (the caller pumps).
  void enqueue(PendingPtr p, OpenPort& port);
  // Fails what waited in `call` with port_unavailable and `error`.
  void fail_parked(OffLoopCall& call, const std::string& error);
  // Sends `p` on to its port once resolved, else parks it behind the resolve of its `via`
  // (the caller pumps).
  void dispatch(PendingPtr p);

  // port_open.cpp
  // The port `via` names once resolved (as asked when it names both CA and port); nullopt
  // while unknown.
  std::optional<PortAddress> known(const PortAddress& via) const;
  // Starts resolving `via` on the worker unless that is under way; an error when it cannot.
  std::optional<std::string> start_resolve(const PortAddress& via);
  void resolved(PortAddress via, std::uint64_t id, std::optional<PortAddress> addr,
                std::string error);
  // Sends `p` (its port resolved) on, parks it behind the port's open, or fails it.
  void route(PendingPtr p);
  // Starts opening `port` on the worker; an error (the backoff's, a stuck open's) when it
  // cannot.
  std::optional<std::string> start_open(OpenPort& port);
  void opened(PortAddress addr, std::uint64_t id, Opened result, std::shared_ptr<PortHandle> handle,
              const std::vector<AgentSpec>& agents, const std::vector<int>& for_services);
  // Takes over the port a worker opened: the agents it registered (`for_services`: the service
  // of each, 0 for the SMP classes), the services it did not, the receiver thread.
  void adopt(OpenPort& port, const Opened& result, PortHandle& handle,
             const std::vector<AgentSpec>& agents, const std::vector<int>& for_services);
  // The first open of the default port (open_default_port): resolved, opened and registered on
  // one worker call; what waited for it goes on.
  void first_opened(std::uint64_t id, std::optional<PortAddress> addr, std::string error,
                    Opened result, std::shared_ptr<PortHandle> handle,
                    const std::vector<AgentSpec>& agents, const std::vector<int>& for_services,
                    Clock::time_point started_at);
  void first_open_expired(std::uint64_t id);
  void end_first_open(const std::string& error);
  void open_expired(PortAddress addr, std::uint64_t id);
  void port_failed(OpenPort& port, std::string error);
  void close_port(OpenPort& port);

  // receiver.cpp
  // The receiver leaves umad_recv() when its slice ends (kRecvSliceMs) or a MAD arrives; neither
  // closing nor unregistering wakes it. So ask the local node for its NodeInfo (directed route,
  // zero hops: no switch involved) and let the answer wake it: closing a port (every `--once`
  // run, every shutdown) then waits a round trip instead of up to a whole slice. Best effort:
  // on a broken port the send fails and the slice ends the wait as before. Sets the receiver's
  // stop flag; once stopped, the receiver still waits for this answer (see receive_loop).
  void wake_receiver(OpenPort& port);
  int agent_for(OpenPort& port, std::uint8_t mgmt_class, std::uint32_t oui);
  void broken(const PortAddress& addr, const std::string& error);
  static void receive_loop(boost::asio::io_context& io, std::weak_ptr<EngineImpl> engine,
                           std::shared_ptr<Receiver> receiver, PortAddress addr,
                           std::uint64_t generation);

  // services.cpp
  void register_service(OpenPort& port, int id, ServiceEntry& service);
  // Answers a request for a served class, or counts it as unsolicited.
  void serve_request(OpenPort& port, const Arrival& arrival);

  boost::asio::io_context& io_;
  PortOps ops_;
  std::chrono::nanoseconds open_deadline_;
  std::map<PortAddress, OpenPort> ports_;
  // Ports resolved from what requests name (as asked, {} = the config's default port); an
  // entry goes when its port breaks.
  std::map<PortAddress, PortAddress> resolved_;
  std::map<PortAddress, std::unique_ptr<OffLoopCall>> resolving_;
  // open_default_port's call. While it runs, no other call touches libibumad: requests wait in
  // it, and services and default_port() start nothing.
  std::unique_ptr<OffLoopCall> first_open_;
  std::vector<std::function<void(std::string)>> first_open_done_;
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
};

}  // namespace ibfabric::mad::detail
