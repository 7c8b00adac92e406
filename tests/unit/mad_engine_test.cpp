#include "daemon/collector_runner.h"
#include "mad/engine.h"
#include "mad/engine_impl.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace ibfabric::mad {
namespace {

using namespace std::chrono_literals;

ConfigSection section(const std::string& yaml) {
  return ConfigSection(YAML::Load(yaml), "test.yaml", "mad");
}

TEST(EngineConfig, DefaultsWhenEmpty) {
  auto s = section("{}");
  auto c = parse_engine_config(s);
  EngineConfig d;
  EXPECT_EQ(c.timeout, d.timeout);
  EXPECT_EQ(c.retries, d.retries);
  EXPECT_EQ(c.rate_limit, d.rate_limit);
  EXPECT_EQ(c.max_in_flight_per_destination, d.max_in_flight_per_destination);
}

TEST(EngineConfig, ReadsEveryKey) {
  auto s = section(R"(
ca: mlx5_1
port: 2
timeout: 250ms
retries: 5
max_in_flight: 128
max_in_flight_per_destination: 2
rate_limit: 0
rate_burst: 10
max_queued: 500
reopen_backoff: 2s
reopen_backoff_max: 1m
)");
  auto c = parse_engine_config(s);
  EXPECT_EQ(c.ca, "mlx5_1");
  EXPECT_EQ(c.port, 2);
  EXPECT_EQ(c.timeout, 250ms);
  EXPECT_EQ(c.retries, 5);
  EXPECT_EQ(c.max_in_flight, 128);
  EXPECT_EQ(c.max_in_flight_per_destination, 2);
  EXPECT_EQ(c.rate_limit, 0);
  EXPECT_EQ(c.rate_burst, 10);
  EXPECT_EQ(c.max_queued, 500u);
  EXPECT_EQ(c.reopen_backoff, 2s);
  EXPECT_EQ(c.reopen_backoff_max, 60s);
}

TEST(EngineConfig, RejectsUnknownKeysAndBadValues) {
  {
    auto s = section("{timeout: 1s, retry: 3}");
    EXPECT_THROW(parse_engine_config(s), ConfigError);
  }
  {
    auto s = section("{max_in_flight: 0}");
    EXPECT_THROW(parse_engine_config(s), ConfigError);
  }
  {
    auto s = section("{rate_limit: -1}");
    EXPECT_THROW(parse_engine_config(s), ConfigError);
  }
  {
    auto s = section("{reopen_backoff: 10s, reopen_backoff_max: 1s}");
    EXPECT_THROW(parse_engine_config(s), ConfigError);
  }
}

TEST(Request, SetPlacesFieldsWhereLibibmadReadsThem) {
  auto r = Request::pma_get(12, 0x12);
  r.set(IB_PC_PORT_SELECT_F, 7);
  ASSERT_GE(r.payload.size(), 2u);
  // PortSelect is the second octet of the PortCounters attribute.
  EXPECT_EQ(r.payload[1], 7);
  EXPECT_EQ(mad_get_field(r.payload.data(), 0, IB_PC_PORT_SELECT_F), 7u);
  r.set64(IB_PC_EXT_XMT_BYTES_F, 0x123456789aULL);
  EXPECT_EQ(mad_get_field64(r.payload.data(), 0, IB_PC_EXT_XMT_BYTES_F), 0x123456789aULL);
}

TEST(Destination, Describes) {
  EXPECT_EQ(Destination::to_lid(12).to_string(), "lid 12");
  EXPECT_EQ(Destination::by_route({1, 13}).to_string(), "route 0,1,13");
  EXPECT_EQ(Destination::by_route({}).to_string(), "route 0");
}

// An answer as an SMA would send it, built with libibmad's encoder.
std::vector<std::uint8_t> port_info_answer(std::uint16_t lid, int state) {
  std::vector<std::uint8_t> mad(IB_MAD_SIZE, 0);
  ib_rpc_t rpc{};
  rpc.mgtclass = IB_SMI_DIRECT_CLASS;
  rpc.method = IB_MAD_METHOD_GET_RESPONSE;
  rpc.attr.id = IB_ATTR_PORT_INFO;
  rpc.attr.mod = 1;
  rpc.trid = 0x0000002a00000007ULL;
  ib_dr_path_t dr{};
  dr.cnt = 1;
  dr.p[1] = 1;
  std::array<std::uint8_t, IB_SMP_DATA_SIZE> data{};
  mad_set_field(data.data(), 0, IB_PORT_LID_F, lid);
  mad_set_field(data.data(), 0, IB_PORT_STATE_F, static_cast<std::uint32_t>(state));
  rpc.dataoffs = IB_SMP_DATA_OFFS;
  rpc.datasz = IB_SMP_DATA_SIZE;
  EXPECT_NE(mad_encode(mad.data(), &rpc, &dr, data.data()), nullptr);
  return mad;
}

TEST(Response, DecodesAttributeDataAtTheClassOffset) {
  Response r;
  r.status = Status::ok;
  r.mad = port_info_answer(0x1234, 4);
  ASSERT_NE(r.data(), nullptr);
  EXPECT_EQ(r.data_size(), static_cast<std::size_t>(IB_MAD_SIZE - IB_SMP_DATA_OFFS));
  EXPECT_EQ(r.get(IB_PORT_LID_F), 0x1234u);
  EXPECT_EQ(r.get(IB_PORT_STATE_F), 4u);
}

TEST(Response, TruncatedAnswerDecodesToNothing) {
  Response r;
  r.mad = port_info_answer(0x1234, 4);
  r.mad.resize(100);
  EXPECT_EQ(r.data(), nullptr);
  EXPECT_EQ(r.data_size(), 0u);
  EXPECT_EQ(r.get(IB_PORT_LID_F), 0u);
  EXPECT_EQ(r.get_string(IB_NODE_DESC_F), "");
}

TEST(Response, NodeDescriptionNeedNotBeTerminated) {
  Response r;
  r.mad.assign(IB_MAD_SIZE, 0);
  r.mad[1] = IB_SMI_CLASS;
  std::fill(r.mad.begin() + IB_SMP_DATA_OFFS, r.mad.end(), 'x');
  EXPECT_EQ(r.get_string(IB_NODE_DESC_F), std::string(64, 'x'));
}

// Requests the engine refuses never reach a device, so this runs anywhere.
TEST(Engine, RefusesSetMethodsAndBadRoutesWithoutSending) {
  boost::asio::io_context io;
  auto engine = Engine::create(io, EngineConfig{});
  std::vector<Status> results;
  auto set = Request::smp_get(Destination::to_lid(1), IB_ATTR_PORT_INFO, 1);
  set.method = IB_MAD_METHOD_SET;
  bool called_inside = true;
  engine->submit(set, [&](Response r) { results.push_back(r.status); });
  called_inside = !results.empty();
  auto dr_as_lid = Request::smp_get(Destination::to_lid(1), IB_ATTR_PORT_INFO);
  dr_as_lid.mgmt_class = kSmiDirected;
  engine->submit(dr_as_lid, [&](Response r) { results.push_back(r.status); });
  auto lid0 = Request::pma_get(0, 0x12);
  engine->submit(lid0, [&](Response r) { results.push_back(r.status); });
  io.run();
  EXPECT_FALSE(called_inside);
  EXPECT_EQ(results, (std::vector<Status>{Status::refused, Status::refused, Status::refused}));

  MetricsBuilder mb;
  engine->fill_metrics(mb);
  auto families = std::move(mb).take();
  double refused = 0;
  for (const auto& f : families) {
    if (f.name != "ibfabric_mad_requests_total") continue;
    for (const auto& m : f.samples) {
      for (const auto& [name, value] : m.labels->labels()) {
        if (name == "result" && value == "refused") refused += m.value;
      }
    }
  }
  EXPECT_EQ(refused, 3);
}

TEST(Engine, ClientDestroyedDropsItsCallbacks) {
  boost::asio::io_context io;
  auto engine = Engine::create(io, EngineConfig{});
  int calls = 0;
  {
    auto client = engine->client();
    auto set = Request::smp_get(Destination::to_lid(1), IB_ATTR_PORT_INFO, 1);
    set.method = IB_MAD_METHOD_SET;
    client->submit(set, [&](Response) { ++calls; });
  }
  io.run();
  EXPECT_EQ(calls, 0);
}

TEST(Engine, DestroyedEngineDropsQueuedCallbacks) {
  boost::asio::io_context io;
  int calls = 0;
  {
    auto engine = Engine::create(io, EngineConfig{});
    auto set = Request::smp_get(Destination::to_lid(1), IB_ATTR_PORT_INFO, 1);
    set.method = IB_MAD_METHOD_SET;
    engine->submit(set, [&](Response) { ++calls; });
  }
  io.run();
  EXPECT_EQ(calls, 0);
}

// A fake umad open that blocks until the test opens the gate. Shared with the worker thread,
// which may outlive a failed test body.
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool opened = false;
  int calls = 0;
  // Bounded, so that an engine that opened on the loop fails the test instead of hanging it.
  void wait() {
    std::unique_lock lock(mutex);
    ++calls;
    cv.wait_for(lock, 20s, [&] { return opened; });
  }
  void release() {
    std::lock_guard lock(mutex);
    opened = true;
    cv.notify_all();
  }
  int count() {
    std::lock_guard lock(mutex);
    return calls;
  }
};

detail::PortOps blocking_ops(std::shared_ptr<Gate> gate, std::shared_ptr<int> resolves) {
  detail::PortOps ops;
  ops.resolve = [resolves](const std::string&, int) {
    ++*resolves;  // only ever one resolve at a time: the worker's slot
    return std::optional(PortAddress{"fake0", 1});
  };
  ops.open = [gate](const PortAddress& addr, const std::vector<detail::AgentSpec>&) {
    gate->wait();
    detail::Opened out;
    out.error = "fake open of " + addr.ca + " failed";
    return out;
  };
  return ops;
}

double gauge(const Engine& engine, const std::string& name) {
  MetricsBuilder mb;
  engine.fill_metrics(mb);
  for (const auto& f : std::move(mb).take()) {
    if (f.name == name && !f.samples.empty()) return f.samples.front().value;
  }
  return -1;
}

// Opening a port (umad_open_port, sysfs) runs on a worker: while it blocks, the loop goes on
// (a timer fires), the requests waiting for it are parked and counted as queued, and they
// finish with the open's error once it returns. Both requests share one open, and the failed
// open's backoff then answers at once without opening again.
TEST(Engine, OpensPortsOffTheLoopAndParksRequestsUntilTheOpenReturns) {
  boost::asio::io_context io;
  auto gate = std::make_shared<Gate>();
  auto resolves = std::make_shared<int>(0);
  auto engine =
      std::make_shared<detail::EngineImpl>(io, EngineConfig{}, blocking_ops(gate, resolves), 60s);
  EXPECT_EQ(engine->default_port(), std::nullopt);  // unknown yet: starts resolving, no wait
  std::vector<Response> results;
  auto by_default = Request::smp_get(Destination::to_lid(1), IB_ATTR_NODE_INFO);
  auto by_name = by_default;
  by_name.via = {"fake0", 1};
  engine->submit(by_default, [&](Response r) { results.push_back(std::move(r)); });
  engine->submit(by_name, [&](Response r) { results.push_back(std::move(r)); });

  bool fired = false;
  double queued_meanwhile = -1;
  boost::asio::steady_timer timer(io);
  timer.expires_after(20ms);
  timer.async_wait([&](const boost::system::error_code&) {
    fired = true;
    queued_meanwhile = gauge(*engine, "ibfabric_mad_queued");
    EXPECT_TRUE(results.empty());
    gate->release();
  });
  io.run();

  EXPECT_TRUE(fired);
  EXPECT_EQ(queued_meanwhile, 2);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) {
    EXPECT_EQ(r.status, Status::port_unavailable);
    EXPECT_EQ(r.error, "fake open of fake0 failed");
  }
  EXPECT_EQ(gate->count(), 1);
  EXPECT_EQ(gauge(*engine, "ibfabric_mad_queued"), 0);
  EXPECT_EQ(engine->default_port(), (PortAddress{"fake0", 1}));
  EXPECT_EQ(*resolves, 1);

  // Within the reopen backoff: the same error, no second open.
  results.clear();
  engine->submit(by_name, [&](Response r) { results.push_back(std::move(r)); });
  io.restart();
  io.run();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, Status::port_unavailable);
  EXPECT_EQ(results[0].error, "fake open of fake0 failed");
  EXPECT_EQ(gate->count(), 1);
}

// An open past its deadline fails what waits for it; until it returns, no second open starts
// (one stuck thread, not one per attempt), and once it has, the next attempt opens again.
TEST(Engine, AnOpenPastItsDeadlineHoldsOneThread) {
  boost::asio::io_context io;
  auto gate = std::make_shared<Gate>();
  EngineConfig config;
  config.reopen_backoff = 1ms;
  config.reopen_backoff_max = 1ms;
  auto engine = std::make_shared<detail::EngineImpl>(
      io, config, blocking_ops(gate, std::make_shared<int>(0)), 50ms);
  std::vector<Response> results;
  auto req = Request::smp_get(Destination::to_lid(1), IB_ATTR_NODE_INFO);
  req.via = {"fake0", 1};
  engine->submit(req, [&](Response r) { results.push_back(std::move(r)); });
  io.run();  // the deadline's timer ends it
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, Status::port_unavailable);
  EXPECT_NE(results[0].error.find("did not finish within 0.050s"), std::string::npos)
      << results[0].error;

  std::this_thread::sleep_for(5ms);  // past the backoff
  engine->submit(req, [&](Response r) { results.push_back(std::move(r)); });
  io.restart();
  io.run();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].status, Status::port_unavailable);
  EXPECT_NE(results[1].error.find("no new attempt starts until it returns"), std::string::npos)
      << results[1].error;
  EXPECT_EQ(gate->count(), 1);

  gate->release();
  // The stuck worker returns, its late answer is dropped and its slot frees: then the next
  // attempt opens again (a bounded wait for that, not a timing assert).
  for (int i = 0; i < 5000; ++i) {
    std::this_thread::sleep_for(2ms);  // past the backoff, and time for the worker to end
    results.resize(2);
    engine->submit(req, [&](Response r) { results.push_back(std::move(r)); });
    io.restart();
    io.run();
    ASSERT_EQ(results.size(), 3u);
    if (results[2].error.find("no new attempt") == std::string::npos) break;
  }
  EXPECT_EQ(results[2].error, "fake open of fake0 failed");
  EXPECT_EQ(gate->count(), 2);
}

// What the fake libibumad calls of a first open saw.
struct OpenRecord {
  std::mutex mutex;
  std::thread::id resolve_thread, open_thread;
  std::vector<detail::AgentSpec> agents;
  int opens = 0;
  std::atomic<bool> returned{false};
  int pipe_write = -1;
  ~OpenRecord() {
    if (pipe_write >= 0) ::close(pipe_write);
  }
};

// Resolves to fake0 port 1; the open records its thread and the agents asked for, waits for
// `gate`, and fails or succeeds. A pipe's read end stands for the umad descriptor of a
// successful open: the receiver thread's umad_recv() polls it and times out slice after slice,
// and closing the port ends it.
detail::PortOps recording_ops(std::shared_ptr<OpenRecord> record, std::shared_ptr<Gate> gate,
                              bool succeed) {
  detail::PortOps ops;
  ops.resolve = [record](const std::string&, int) {
    std::lock_guard lock(record->mutex);
    record->resolve_thread = std::this_thread::get_id();
    return std::optional(PortAddress{"fake0", 1});
  };
  ops.open = [record, gate, succeed](const PortAddress&,
                                     const std::vector<detail::AgentSpec>& agents) {
    {
      std::lock_guard lock(record->mutex);
      record->open_thread = std::this_thread::get_id();
      record->agents = agents;
      ++record->opens;
    }
    gate->wait();
    detail::Opened out;
    int fds[2];
    if (succeed && ::pipe(fds) == 0) {
      out.portid = fds[0];
      record->pipe_write = fds[1];
      for (std::size_t i = 0; i < agents.size(); ++i) out.agents.push_back(static_cast<int>(i));
    } else {
      out.error = "fake open failed";
    }
    record->returned = true;
    return out;
  };
  return ops;
}

// Runs the loop until `done` holds; false after 20 s.
bool run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
  const auto limit = std::chrono::steady_clock::now() + 20s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    if (io.stopped()) io.restart();  // it ran out of work, and a worker may post more
    io.run_for(5ms);
  }
  return true;
}

// A service declared before the first open is registered by that open, on the worker that
// resolved and opened the port, in the same call: when it returns, the service serves without
// any registration of its own. Meanwhile nothing else starts a resolve or an open.
TEST(Engine, FirstOpenRegistersTheServicesDeclaredBeforeItInTheSameCall) {
  boost::asio::io_context io;
  auto record = std::make_shared<OpenRecord>();
  auto gate = std::make_shared<Gate>();
  auto engine = std::make_shared<detail::EngineImpl>(io, EngineConfig{},
                                                     recording_ops(record, gate, true), 60s);
  auto service =
      engine->serve({}, 0x32, 0x1405, 100, [](const InboundRequest&) { return std::nullopt; });
  std::optional<std::string> outcome;
  engine->open_default_port([&](std::string error) { outcome = std::move(error); });
  EXPECT_FALSE(outcome.has_value());  // never inside the call
  EXPECT_EQ(service->refresh(), "");
  EXPECT_EQ(engine->default_port(), std::nullopt);

  bool checked = false;
  boost::asio::steady_timer timer(io);
  timer.expires_after(20ms);
  timer.async_wait([&](const boost::system::error_code&) {
    checked = true;
    EXPECT_FALSE(outcome.has_value());
    gate->release();
  });
  ASSERT_TRUE(run_until(io, [&] { return outcome.has_value(); }));
  EXPECT_TRUE(checked);
  EXPECT_EQ(*outcome, "");
  {
    std::lock_guard lock(record->mutex);
    EXPECT_EQ(record->opens, 1);
    EXPECT_EQ(record->resolve_thread, record->open_thread);
    EXPECT_NE(record->open_thread, std::this_thread::get_id());
    ASSERT_EQ(record->agents.size(), 3u);
    EXPECT_EQ(record->agents[0].mgmt_class, IB_SMI_CLASS);
    EXPECT_EQ(record->agents[1].mgmt_class, IB_SMI_DIRECT_CLASS);
    EXPECT_EQ(record->agents[2].mgmt_class, 0x32);
    EXPECT_EQ(record->agents[2].oui, 0x1405u);
    EXPECT_TRUE(record->agents[2].serve_get);
  }
  // Serving: a registration of its own would fail on the pipe and say so.
  EXPECT_EQ(service->refresh(), "");
  EXPECT_EQ(gauge(*engine, "ibfabric_mad_port_open"), 1);
  EXPECT_EQ(engine->default_port(), (PortAddress{"fake0", 1}));

  // A second service of the class (a reload's new collector) shares the agent at once; the
  // first one's end leaves it registered.
  auto replacement =
      engine->serve({}, 0x32, 0x1405, 100, [](const InboundRequest&) { return std::nullopt; });
  EXPECT_EQ(replacement->refresh(), "");
  service.reset();
  EXPECT_EQ(replacement->refresh(), "");

  // Asked again with the port open: answered soon, without a second open.
  outcome.reset();
  engine->open_default_port([&](std::string error) { outcome = std::move(error); });
  ASSERT_TRUE(run_until(io, [&] { return outcome.has_value(); }));
  EXPECT_EQ(*outcome, "");
  std::lock_guard lock(record->mutex);
  EXPECT_EQ(record->opens, 1);
}

// A request submitted while the first open runs waits for it (counted as queued) and then
// fails with its error, without an open of its own.
TEST(Engine, RequestsWaitForTheFirstOpen) {
  boost::asio::io_context io;
  auto record = std::make_shared<OpenRecord>();
  auto gate = std::make_shared<Gate>();
  auto engine = std::make_shared<detail::EngineImpl>(io, EngineConfig{},
                                                     recording_ops(record, gate, false), 60s);
  std::optional<std::string> outcome;
  engine->open_default_port([&](std::string error) { outcome = std::move(error); });
  std::vector<Response> results;
  engine->submit(Request::smp_get(Destination::to_lid(1), IB_ATTR_NODE_INFO),
                 [&](Response r) { results.push_back(std::move(r)); });
  double queued = -1;
  boost::asio::steady_timer timer(io);
  timer.expires_after(20ms);
  timer.async_wait([&](const boost::system::error_code&) {
    queued = gauge(*engine, "ibfabric_mad_queued");
    EXPECT_TRUE(results.empty());
    gate->release();
  });
  ASSERT_TRUE(run_until(io, [&] { return outcome.has_value() && !results.empty(); }));
  EXPECT_EQ(queued, 1);
  EXPECT_EQ(*outcome, "fake open failed");
  EXPECT_EQ(results[0].status, Status::port_unavailable);
  EXPECT_EQ(results[0].error, "fake open failed");
  std::lock_guard lock(record->mutex);
  EXPECT_EQ(record->opens, 1);
}

// Counts its runs, and those after the first open had returned.
class CountingCollector final : public Collector {
 public:
  CountingCollector(std::shared_ptr<OpenRecord> record, bool uses_mad)
      : record_(std::move(record)), uses_mad_(uses_mad) {}
  bool prepare_mad() override {
    ++prepared;
    return uses_mad_;
  }
  void collect(Done done) override {
    ++calls;
    if (record_->returned) ++after_open;
    done(CollectResult{});
  }
  int prepared = 0, calls = 0, after_open = 0;

 private:
  std::shared_ptr<OpenRecord> record_;
  bool uses_mad_;
};

struct Runners {
  SnapshotStore store;
  CountingCollector* mad = nullptr;
  CountingCollector* other = nullptr;
  std::vector<std::shared_ptr<CollectorRunner>> all;
  Runners(boost::asio::io_context& io, std::shared_ptr<OpenRecord> record, bool any_mad) {
    auto a = std::make_unique<CountingCollector>(record, any_mad);
    auto b = std::make_unique<CountingCollector>(record, false);
    mad = a.get();
    other = b.get();
    all.push_back(std::make_shared<CollectorRunner>(io, "a", 1h, 0s, std::move(a), store));
    all.push_back(std::make_shared<CollectorRunner>(io, "b", 1h, 0s, std::move(b), store));
  }
  void start() {
    for (auto& r : all) r->start();
  }
  ~Runners() {
    for (auto& r : all) r->stop();
  }
};

// When a collector uses MAD, no collector (that one or any other) runs before the engine's first
// open has returned, and the loop goes on meanwhile.
TEST(Engine, CollectorsStartOnlyOnceTheFirstOpenHasReturned) {
  boost::asio::io_context io;
  auto record = std::make_shared<OpenRecord>();
  auto gate = std::make_shared<Gate>();
  auto engine = std::make_shared<detail::EngineImpl>(io, EngineConfig{},
                                                     recording_ops(record, gate, false), 60s);
  Runners runners(io, record, true);
  prepare_runners(
      io, runners.all, [&] { return engine; }, [&] { runners.start(); });
  EXPECT_EQ(runners.mad->prepared, 1);
  EXPECT_EQ(runners.other->prepared, 1);
  bool checked = false;
  boost::asio::steady_timer timer(io);
  timer.expires_after(20ms);
  timer.async_wait([&](const boost::system::error_code&) {
    checked = true;
    EXPECT_EQ(runners.mad->calls + runners.other->calls, 0);
    gate->release();
  });
  ASSERT_TRUE(run_until(io, [&] { return runners.mad->calls > 0 && runners.other->calls > 0; }));
  EXPECT_TRUE(checked);
  EXPECT_EQ(runners.mad->after_open, runners.mad->calls);
  EXPECT_EQ(runners.other->after_open, runners.other->calls);
}

// An open past its deadline lets the collectors start all the same (it goes on on its thread).
TEST(Engine, CollectorsStartAtTheFirstOpensDeadline) {
  boost::asio::io_context io;
  auto record = std::make_shared<OpenRecord>();
  auto gate = std::make_shared<Gate>();
  auto engine = std::make_shared<detail::EngineImpl>(io, EngineConfig{},
                                                     recording_ops(record, gate, false), 50ms);
  Runners runners(io, record, true);
  prepare_runners(
      io, runners.all, [&] { return engine; }, [&] { runners.start(); });
  ASSERT_TRUE(run_until(io, [&] { return runners.mad->calls > 0 && runners.other->calls > 0; }));
  EXPECT_FALSE(record->returned);
  gate->release();
  ASSERT_TRUE(run_until(io, [&] { return record->returned.load(); }));
}

// Without a collector that uses MAD, the engine is neither made nor asked to open anything.
TEST(Engine, CollectorsWithoutMadStartWithoutAnOpen) {
  boost::asio::io_context io;
  auto record = std::make_shared<OpenRecord>();
  Runners runners(io, record, false);
  int engines = 0;
  prepare_runners(
      io, runners.all,
      [&]() -> std::shared_ptr<Engine> {
        ++engines;
        return nullptr;
      },
      [&] { runners.start(); });
  EXPECT_EQ(runners.mad->calls, 0);  // never inside the call
  ASSERT_TRUE(run_until(io, [&] { return runners.mad->calls > 0 && runners.other->calls > 0; }));
  EXPECT_EQ(engines, 0);
}

}  // namespace
}  // namespace ibfabric::mad
