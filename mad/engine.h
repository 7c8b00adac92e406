#pragma once
// The asynchronous MAD engine: every MAD the daemon sends goes through here.
//
// Threading: every member function is called on the io_context's thread, and every callback
// runs there. Each open umad port has one receiver thread, the only reader of that port, which
// blocks in umad_recv() and posts what it reads into the io_context (the umad descriptor cannot
// be put into epoll under the simulator's shim, see docs/collectors.md, "MAD engine"). Sends go out
// from the io_context's thread.
//
// Flow control: requests wait in a queue per destination and are sent round-robin across
// destinations, so that at most `max_in_flight_per_destination` MADs are outstanding at any
// node, at most `max_in_flight` in total, and no more than `rate_limit` MADs per second leave
// the daemon (token bucket; retries count too). Each attempt has its own timeout; a request is
// retried `retries` times before it fails with Status::timeout.
//
// Ports are opened lazily, on the first request that needs them (or at the daemon's start, see
// open_default_port()), and never as issm on a host (see take_simulator_issm()). When a port
// breaks (the simulator dies, the device goes away), everything pending on it fails with
// Status::port_error, the port is closed, and it is reopened on a later request once a backoff
// has passed; until then requests for it fail at once with Status::port_unavailable.
//
// Destruction: safe with requests in flight. Callbacks that have not run yet are dropped (never
// called), receiver threads are joined, ports are closed.
//
// Config: the top-level `mad:` section, see parse_engine_config() and docs/collectors.md, "MAD
// engine". Metrics: fill_metrics() (ibfabric_mad_*), listed in docs/collectors.md.

#include "config/config_section.h"
#include "core/metrics.h"

#include <infiniband/mad.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ibfabric::mad {

struct EngineConfig {
  std::string ca;  // CA used when a request names none; "" = the first CA libibumad finds
  int port = 0;    // its port; 0 = the first port of that CA
  std::chrono::milliseconds timeout{500};  // per attempt
  int retries = 2;                         // attempts = 1 + retries
  int max_in_flight = 64;                  // over all destinations
  int max_in_flight_per_destination = 4;   // per LID / directed-route path
  double rate_limit = 2000;                // MADs per second leaving the daemon; 0 = unlimited
  int rate_burst = 100;                    // token bucket depth
  std::size_t max_queued = 100000;         // requests waiting beyond this fail with queue_full
  std::chrono::milliseconds reopen_backoff{1000};       // first wait after a port broke
  std::chrono::milliseconds reopen_backoff_max{60000};  // doubling up to this
  bool operator==(const EngineConfig&) const = default;
};

// Reads the `mad:` section (its keys: docs/configuration.md, "`mad`", which
// tests/unit/config_keys_test.cpp ties to this parser) and calls section.finish(). Throws
// ConfigError.
EngineConfig parse_engine_config(ConfigSection& section);

// Management classes the engine knows by name (any other class number works too).
enum Class : std::uint8_t {
  kSmiLid = IB_SMI_CLASS,              // 0x01 subnet management, LID routed
  kSmiDirected = IB_SMI_DIRECT_CLASS,  // 0x81 subnet management, directed route
  kSubnAdm = IB_SA_CLASS,              // 0x03 SA
  kPerfMgt = IB_PERFORMANCE_CLASS,     // 0x04 PMA
};

// A local CA port as libibumad sees it (sysfs; no MAD is sent to learn this).
struct LocalPort {
  std::string ca;  // "mlx5_0" (under the simulator's shim: "ibsim0")
  int port = 0;    // 1-based, as in sysfs
  std::uint16_t lid = 0;
  std::uint16_t sm_lid = 0;
  int lmc = 0;
  int state = 0;       // 1 Down, 2 Init, 3 Armed, 4 Active
  int phys_state = 0;  // 5 LinkUp, 2 Polling, 3 Disabled, ...
  std::uint64_t port_guid = 0;
  std::uint64_t node_guid = 0;
  std::string link_layer;  // "InfiniBand" or "Ethernet"
};

// Under the simulator's shim (libumad2sim), SIM_SET_ISSM marks the process's port IsSM as the
// shim attaches, at the process's first access of the IB paths, and from then on ibsim delivers
// requests to it (a peer's probe, an SM's SMInfo): one of a class the process has no agent for
// yet ends it (SIGSEGV), and the shim's own setup after attaching takes milliseconds. So call
// this first thing in main(), before any thread: with SIM_SET_ISSM set and the shim preloaded,
// it takes SIM_SET_ISSM out of the environment, and the engine's first port open marks IsSM
// itself (opening the port's issm device, as opensm does) once every agent is registered.
// Otherwise (every real host) it does nothing.
void take_simulator_issm();

// Every port of every CA libibumad finds, sorted by CA then port. Empty when there is none or
// libibumad cannot be initialised. Synchronous sysfs reads only.
std::vector<LocalPort> list_local_ports();
// The InfiniBand ones (RoCE ports have no subnet management), only of the CAs in `only` when
// it is not empty.
std::vector<LocalPort> list_infiniband_ports(const std::set<std::string>& only);

// Which local port a request leaves from. ca "" = the engine's default port.
struct PortAddress {
  std::string ca;
  int port = 0;
  bool operator==(const PortAddress&) const = default;
  auto operator<=>(const PortAddress&) const = default;
};

// Where a request goes: a LID, or a directed route of outgoing port numbers starting at the
// local node (path {} = the local node itself, {1} = whatever is cabled to local port 1,
// {1, 13} = one hop further, out of port 13 of that node). Directed routes need class
// kSmiDirected.
struct Destination {
  std::uint16_t lid = 0;  // used when path is empty and directed is false
  bool directed = false;
  std::vector<std::uint8_t> path;  // outgoing ports, at most 63 hops

  static Destination to_lid(std::uint16_t lid) { return Destination{lid, false, {}}; }
  static Destination by_route(std::vector<std::uint8_t> path) {
    return Destination{0, true, std::move(path)};
  }
  std::string to_string() const;  // "lid 12" / "route 0,1,13"
};

struct Request {
  PortAddress via;  // ca "" = default port
  Destination to;
  std::uint8_t mgmt_class = kSmiLid;
  std::uint8_t method = IB_MAD_METHOD_GET;  // the engine refuses Set (Status::refused)
  std::uint16_t attr_id = 0;
  std::uint32_t attr_mod = 0;
  std::uint64_t sa_component_mask = 0;  // SA only
  std::uint32_t oui = 0;                // vendor range 2 (0x30-0x4f) only
  // Attribute payload, copied at the class's data offset (SMP 64, PMA 64, SA 56, vendor 40).
  // Fill with set() so offsets come from libibmad's field table.
  std::vector<std::uint8_t> payload;
  // Overrides of the engine's config for this request.
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<int> retries;

  // mad_set_field into `payload` (grown as needed), e.g. set(IB_PC_PORT_SELECT_F, 3).
  Request& set(enum MAD_FIELDS field, std::uint32_t value);
  Request& set64(enum MAD_FIELDS field, std::uint64_t value);

  // Common shapes.
  static Request smp_get(Destination to, std::uint16_t attr_id, std::uint32_t attr_mod = 0);
  static Request pma_get(std::uint16_t lid, std::uint16_t attr_id, std::uint32_t attr_mod = 0);
};

enum class Status {
  ok,                // an answer with MAD status 0
  mad_status,        // an answer whose MAD status is not 0 (Response::mad_status says which)
  timeout,           // no answer after every attempt
  port_error,        // the port broke while this request was pending
  port_unavailable,  // the port could not be opened (or is in its reopen backoff)
  queue_full,        // more than max_queued requests waiting
  refused,           // a request the engine will not send (Set, bad route, unknown CA, ...)
  cancelled,         // the Client it was submitted through was destroyed (callback not called)
};
const char* to_string(Status status);

struct Response {
  Status status = Status::timeout;
  std::uint16_t mad_status = 0;  // status field of the answer (DR SMP: without the D bit)
  int attempts = 0;
  std::chrono::nanoseconds rtt{0};  // of the answered attempt
  std::string error;                // one line when status is not ok
  // The whole answer (at least 256 bytes when there is one; more for RMPP-reassembled SA).
  std::vector<std::uint8_t> mad;

  bool ok() const { return status == Status::ok; }
  // The attribute data of the answer (at the class's data offset) and its size; nullptr/0 when
  // there is no answer.
  const std::uint8_t* data() const;
  std::size_t data_size() const;
  // libibmad decoding of the attribute data; 0 / "" when there is no answer.
  std::uint32_t get(enum MAD_FIELDS field) const;
  std::uint64_t get64(enum MAD_FIELDS field) const;
  std::string get_string(enum MAD_FIELDS field) const;  // e.g. IB_NODE_DESC_F
};

using Callback = std::function<void(Response)>;

// A request from elsewhere in the fabric that reached a class this daemon serves.
struct InboundRequest {
  PortAddress port;                                   // the local port it arrived at
  std::uint16_t slid = 0;                             // the requester
  std::chrono::steady_clock::time_point received_at;  // stamped by the receiver thread
  const std::uint8_t* mad = nullptr;                  // the whole request, IB_MAD_SIZE bytes
};
// The attribute data to answer with (copied at the class's data offset into a GetResp that
// keeps the request's header and transaction id), or nullopt to leave the request unanswered.
using RequestHandler =
    std::function<std::optional<std::vector<std::uint8_t>>(const InboundRequest&)>;

// A registration made by Engine::serve(); destroying it stops serving.
class Service {
 public:
  virtual ~Service() = default;
  // Opens the port and registers again if the port broke or was never opened (a closed port
  // is reopened no sooner than the engine's backoff allows). "" when serving, else why not.
  virtual std::string refresh() = 0;
  virtual std::uint64_t answered() const = 0;
  virtual std::uint64_t dropped() const = 0;  // over the rate cap, or the handler declined
};

class Client;

class Engine {
 public:
  static std::shared_ptr<Engine> create(boost::asio::io_context& io, EngineConfig config);
  virtual ~Engine() = default;

  // Queues `request`; `callback` runs later on the io_context's thread (never inside submit()).
  virtual void submit(Request request, Callback callback) = 0;

  // Answers Get requests of vendor class `mgmt_class` (range 2, 0x30-0x4f) with `oui` that
  // arrive at `via`, at most `max_per_second` answers (a token bucket one second deep). The
  // handler runs on the io_context's thread. Nothing is sent but answers to requests. Declared
  // before open_default_port(), its agent registers in that open; when its port is open
  // already, at once (sharing the agent of a service of the same class that it replaces).
  virtual std::unique_ptr<Service> serve(PortAddress via, std::uint8_t mgmt_class,
                                         std::uint32_t oui, double max_per_second,
                                         RequestHandler handler) = 0;

  // Opens the default port now, in one call on a worker thread: libibumad's first access (under
  // the simulator's shim, from that moment the process receives MADs), resolving the port,
  // umad_open_port, and registering the SMP classes' agents and those of every service
  // declared so far, back to back. `done` runs on the io_context's thread once that call
  // returned ("" or why the port is not open) or passed its deadline, never inside this call;
  // soon when the port is open already or an open of it is under way. Requests submitted
  // meanwhile wait for it. The daemon calls it before any collector's first run.
  virtual void open_default_port(std::function<void(std::string error)> done) = 0;

  // A handle whose destruction drops the callbacks of every request submitted through it that
  // has not completed yet. Collectors submit through their own Client so that a collector can
  // be destroyed while its requests are in flight.
  virtual std::unique_ptr<Client> client() = 0;

  // The port used when a request names none, resolved from the config, as far as it is known:
  // never blocks. nullopt until a request (or this call, which starts it) has resolved it off
  // the loop, and when no CA exists. Does not open it.
  virtual std::optional<PortAddress> default_port() = 0;

  // Adds the ibfabric_mad_* families (counters since start, in-flight and queued gauges).
  virtual void fill_metrics(MetricsBuilder& out) const = 0;

  const EngineConfig& config() const { return config_; }

 protected:
  explicit Engine(EngineConfig config) : config_(std::move(config)) {}
  EngineConfig config_;
};

class Client {
 public:
  virtual ~Client() = default;
  virtual void submit(Request request, Callback callback) = 0;
};

// What a collector keeps instead of the engine: a Client of the shared engine, made again if
// the engine was replaced. It never holds the engine itself: pending callbacks hold the
// collector's runner, so a strong reference would keep the engine, and its receiver threads,
// alive past the event loop at shutdown.
class ClientHandle {
 public:
  explicit ClientHandle(std::function<std::shared_ptr<Engine>()> factory)
      : factory_(std::move(factory)) {}
  // The engine for this collection, or nullptr when there is none; client() is ready after it.
  // Keep the result only for the duration of the call that asked.
  std::shared_ptr<Engine> engine() {
    auto engine = factory_ ? factory_() : nullptr;
    if (engine && (!client_ || engine_.lock() != engine)) {
      client_ = engine->client();
      engine_ = engine;
    }
    return engine;
  }
  Client& client() { return *client_; }

 private:
  std::function<std::shared_ptr<Engine>()> factory_;
  std::weak_ptr<Engine> engine_;
  std::unique_ptr<Client> client_;
};

}  // namespace ibfabric::mad
