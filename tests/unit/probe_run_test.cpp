// The probe collector's prober (collectors/probe/probe_run.h), driven through the fake MAD engine:
// every MAD it submits waits in the engine's queue until the test answers it, with the round
// trip the engine would have measured (Response::rtt) and the responder's data. Probes go out
// on the prober's own timers (probe_interval 1ms here): the test runs the io_context until the
// probes it wants are queued. Nothing sleeps and nothing asserts how long anything took.
//
// Covered: the spike rule and the host share of spikes (answers with and without the
// responder's hold time), lost probes and probes never sent, the max_peers subset and its
// rotation, SA resolution of targets and discovery, ibfabric_probe_node_info, and the MAD
// responder's service declared in prepare_mad(). The statistics on fixed inputs, the wire
// formats and choose_peers alone are in probe_stats_test.cpp and mad_ping_test.cpp; UDP probes
// over real sockets in tests/integration/test_probe_udp.py.

#include "collectors/probe/probe_run.h"
#include "collector_test_support.h"
#include "core/node_names.h"
#include "fake_fabric.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ibfabric::probe {
namespace {

using namespace std::chrono_literals;
using test_support::FakeFabric;
using test_support::info;
using test_support::LogCapture;
using test_support::samples;
using test_support::value;

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

TargetConfig by_lid(std::uint16_t lid) {
  TargetConfig t;
  t.lid = lid;
  t.name = "lid " + std::to_string(lid);
  return t;
}

// One peer probed over UDP, at a documentation address (RFC 5737): a prober with no MAD work.
TargetConfig udp_peer() {
  TargetConfig t;
  t.address = "192.0.2.1:10917";
  t.name = "udp-peer";
  return t;
}

// MAD only, no UDP responder (no port is bound), probes every millisecond with no rate cap in
// the way.
ProbeConfig mad_config(std::vector<TargetConfig> targets) {
  ProbeConfig c;
  c.udp_listen = "";
  c.mad_responder = false;
  c.targets = std::move(targets);
  c.probe_interval = 1ms;
  c.max_probes_per_second = 100000;
  return c;
}

struct Rig {
  boost::asio::io_context io;
  std::shared_ptr<FakeFabric> engine = std::make_shared<FakeFabric>(io, FakeFabric::Held{});
  std::shared_ptr<PeerDirectory> directory = std::make_shared<PeerDirectory>();
  std::shared_ptr<const NodeNameMap> names = std::make_shared<const NodeNameMap>();
  // The wall clock the prober's rotation slots are taken from.
  std::chrono::system_clock::time_point now = std::chrono::system_clock::time_point(1000h);
  std::shared_ptr<ProbeRun> prober;
  CollectResult result;  // of the latest collect()

  // The prober takes the engine `engine` holds at each call, as the daemon's factory gives the
  // engine of the latest configuration.
  void make(ProbeConfig config) {
    prober = std::make_shared<ProbeRun>(
        io, std::move(config), [this]() -> std::shared_ptr<mad::Engine> { return engine; }, names,
        directory, [this] { return now; });
  }
  ~Rig() {
    if (!prober) return;
    // The handlers stop() cancels still hold the prober: let them run before the loop goes.
    prober->stop();
    io.restart();
    io.poll();
    prober.reset();
  }

  // What one collection publishes.
  MetricFamilies collect() {
    MetricsBuilder out;
    result = CollectResult{};
    prober->fill(out, result);
    return std::move(out).take();
  }

  // Runs the loop until `n` MADs wait in the engine (the probe timers fire every 1ms); 10 s is
  // a bound for a prober that never sends, not a measurement.
  void run_until_queued(std::size_t n) {
    auto until = std::chrono::steady_clock::now() + 10s;
    while (engine->held.size() < n && std::chrono::steady_clock::now() < until) {
      io.run_one_for(100ms);
    }
    ASSERT_GE(engine->held.size(), n) << "the prober did not send";
  }
};

// The attribute data a responder answers a MAD probe with: ours carries the hold time, the
// stock `ibping -S` only its host name.
std::vector<std::uint8_t> ping_data(std::optional<std::chrono::nanoseconds> hold) {
  if (hold) return encode_ping_answer("peer.example", *hold);
  std::vector<std::uint8_t> data(kPingDataSize, 0);
  std::memcpy(data.data(), "peer.example", 12);
  return data;
}

// Answers the oldest request: ok with `data` at the class's data offset and the round trip the
// engine measured.
void answer_ok(FakeFabric& engine, std::chrono::nanoseconds rtt,
               const std::vector<std::uint8_t>& data) {
  ASSERT_FALSE(engine.held.empty());
  auto s = std::move(engine.held.front());
  engine.held.pop_front();
  mad::Response r;
  r.status = mad::Status::ok;
  r.attempts = 1;
  r.rtt = rtt;
  r.mad.assign(std::max<std::size_t>(IB_MAD_SIZE, 64 + data.size()), 0);
  r.mad[1] = s.request.mgmt_class;
  auto offset = static_cast<std::size_t>(r.data() - r.mad.data());
  std::copy(data.begin(), data.end(), r.mad.begin() + static_cast<std::ptrdiff_t>(offset));
  s.callback(std::move(r));
}

// A probe's answer: RTT `rtt`, and the responder's hold time when it says one.
void answer_ping(FakeFabric& engine, std::chrono::nanoseconds rtt,
                 std::optional<std::chrono::nanoseconds> hold) {
  ASSERT_FALSE(engine.held.empty());
  ASSERT_EQ(engine.held.front().request.mgmt_class, kPingClass);
  answer_ok(engine, rtt, ping_data(hold));
}

void answer_failed(FakeFabric& engine, mad::Status status, const std::string& error) {
  ASSERT_FALSE(engine.held.empty());
  auto s = std::move(engine.held.front());
  engine.held.pop_front();
  mad::Response r;
  r.status = status;
  r.error = error;
  s.callback(std::move(r));
}

Labels peer(const std::string& name) { return {{"peer", name}, {"transport", "mad"}}; }

TEST(ProbeRun, MadProbesGoToThePeersLidAsIbpingsGetWithoutRetry) {
  Rig rig;
  rig.make(mad_config({by_lid(5)}));
  rig.prober->start();
  rig.run_until_queued(1);
  const auto& q = rig.engine->held.front().request;
  EXPECT_FALSE(q.to.directed);
  EXPECT_EQ(q.to.lid, 5);
  EXPECT_EQ(q.mgmt_class, kPingClass);
  EXPECT_EQ(q.oui, kPingOui);
  EXPECT_EQ(q.method, IB_MAD_METHOD_GET);
  ASSERT_TRUE(q.retries);
  EXPECT_EQ(*q.retries, 0) << "a lost probe is a measurement, not something to retry";
  EXPECT_EQ(rig.directory->peers(), (std::vector<ProbedPeer>{{"lid 5", "mad", 5}}));
}

// 16 steady answers make the baseline (100us); then spikes of 5ms: one the responder's hold time
// explains (the host's), one it does not (the network's), one from a responder that says no
// hold time (stock ibping -S: a spike, never the host's).
TEST(ProbeRun, ASpikeIsTheHostsWhenTheResponderHeldTheProbeAndNeverWithoutAHoldTime) {
  LogCapture log;
  Rig rig;
  rig.make(mad_config({by_lid(5)}));
  rig.prober->start();
  for (int i = 0; i < 16; ++i) {
    rig.run_until_queued(1);
    answer_ping(*rig.engine, 100us, 10us);
  }
  auto steady = rig.collect();
  EXPECT_EQ(value(steady, "ibfabric_probe_spikes_total", peer("lid 5")), 0);
  EXPECT_EQ(value(steady, "ibfabric_probe_baseline_rtt_seconds", peer("lid 5")), 100e-6);

  rig.run_until_queued(1);
  answer_ping(*rig.engine, 5ms, 4950us);  // network 50us: the host's
  auto host = rig.collect();
  EXPECT_EQ(value(host, "ibfabric_probe_spikes_total", peer("lid 5")), 1);
  EXPECT_EQ(value(host, "ibfabric_probe_host_spikes_total", peer("lid 5")), 1);
  EXPECT_EQ(value(host, "ibfabric_probe_last_network_rtt_seconds", peer("lid 5")), 50e-6);

  rig.run_until_queued(1);
  answer_ping(*rig.engine, 5ms, 10us);  // network 4.99ms: the network's
  rig.run_until_queued(1);
  answer_ping(*rig.engine, 5ms, std::nullopt);  // no hold time
  auto out = rig.collect();
  EXPECT_TRUE(rig.result.success) << rig.result.error;
  EXPECT_EQ(value(out, "ibfabric_probe_spikes_total", peer("lid 5")), 3);
  EXPECT_EQ(value(out, "ibfabric_probe_host_spikes_total", peer("lid 5")), 1);
  EXPECT_EQ(value(out, "ibfabric_probe_sent_total", peer("lid 5")), 19);
  EXPECT_EQ(value(out, "ibfabric_probe_received_total", peer("lid 5")), 19);
  EXPECT_EQ(value(out, "ibfabric_probe_lost_total", peer("lid 5")), 0);
  // The network share is known only for the answers that said their hold time.
  auto network = samples(out, "ibfabric_probe_network_rtt_seconds", peer("lid 5"));
  ASSERT_EQ(network.size(), 1u);
  const auto* family = test_support::family(out, "ibfabric_probe_network_rtt_seconds");
  EXPECT_EQ(family->histograms[0].count, 18u);
  // Spikes stay out of the baseline.
  EXPECT_EQ(value(out, "ibfabric_probe_baseline_rtt_seconds", peer("lid 5")), 100e-6);
  EXPECT_EQ(
      test_support::count_containing(log.take(),
                                     "probe: RTT spike peer=lid 5 transport=mad rtt_us=5000.0 "
                                     "baseline_us=100.0"),
      3u);
}

// A timeout is the network's (or the peer's): a lost probe. A broken port or a MAD status is this
// daemon's own failure: counted apart (ibfabric_probe_failed_total), never sent or lost, so that
// localization reads it as evidence about this host, not as a lossy network.
TEST(ProbeRun, ATimeoutIsALostProbeALocalFailureIsNotAndAProbeNeverSentIsReported) {
  Rig rig;
  rig.make(mad_config({by_lid(5)}));
  rig.prober->start();
  rig.run_until_queued(1);
  answer_ping(*rig.engine, 100us, 10us);
  for (auto status : {mad::Status::timeout, mad::Status::timeout, mad::Status::mad_status,
                      mad::Status::port_error, mad::Status::port_error}) {
    rig.run_until_queued(1);
    answer_failed(*rig.engine, status, "lost");
  }
  auto lost = rig.collect();
  EXPECT_TRUE(rig.result.success) << "a lost probe is a measurement, not a failed collection";
  EXPECT_EQ(value(lost, "ibfabric_probe_sent_total", peer("lid 5")), 3);
  EXPECT_EQ(value(lost, "ibfabric_probe_received_total", peer("lid 5")), 1);
  EXPECT_EQ(value(lost, "ibfabric_probe_lost_total", peer("lid 5")), 2);
  auto failed = [&](const char* reason) {
    auto l = peer("lid 5");
    l.emplace_back("reason", reason);
    return value(lost, "ibfabric_probe_failed_total", l);
  };
  EXPECT_EQ(failed("port_error"), 2);
  EXPECT_EQ(failed("mad_status"), 1);

  // Not sent: no port, or the engine's queue full. The peer did not lose them.
  rig.run_until_queued(1);
  answer_failed(*rig.engine, mad::Status::port_unavailable, "no local CA port found");
  rig.run_until_queued(1);
  answer_failed(*rig.engine, mad::Status::queue_full, "queue full");
  auto unsent = rig.collect();
  EXPECT_EQ(value(unsent, "ibfabric_probe_sent_total", peer("lid 5")), 3);
  EXPECT_EQ(value(unsent, "ibfabric_probe_lost_total", peer("lid 5")), 2);
  EXPECT_FALSE(rig.result.success);
  EXPECT_NE(rig.result.error.find("probe to lid 5: no local CA port found"), std::string::npos)
      << rig.result.error;
  EXPECT_NE(rig.result.error.find("probe to lid 5: queue full"), std::string::npos)
      << rig.result.error;
  // Said once, in the collection after they failed.
  rig.collect();
  EXPECT_TRUE(rig.result.success) << rig.result.error;
}

// Six candidates, two at a time: the window the rotation slot picks (choose_peers, from this
// node's own order), and the next one when the slot moves on.
TEST(ProbeRun, MaxPeersProbesTheSlotsWindowAndRotateEveryMovesItOn) {
  Rig rig;
  std::vector<TargetConfig> targets;
  for (std::uint16_t lid = 1; lid <= 6; ++lid) targets.push_back(by_lid(lid));
  auto config = mad_config(targets);
  config.max_peers = 2;
  config.rotate_every = 1min;
  rig.make(config);
  auto names_of = [](const std::vector<TargetConfig>& chosen) {
    std::set<std::string> out;
    for (const auto& t : chosen) out.insert(t.name);
    return out;
  };
  auto probed = [&] {
    std::set<std::string> out;
    for (const auto& p : rig.directory->peers()) out.insert(p.name);
    return out;
  };
  auto slot = rotation_slot(1min, rig.now);
  rig.prober->start();
  auto first = probed();
  EXPECT_EQ(first, names_of(choose_peers(host_name(), targets, 2, slot)));
  EXPECT_EQ(value(rig.collect(), "ibfabric_probe_peers", {}), 2);

  // Within the slot nothing moves.
  rig.now += 59s;
  rig.prober->rotate();
  EXPECT_EQ(probed(), first);

  // The next slot: the next two; after three slots every candidate was probed.
  std::set<std::string> seen = first;
  for (int i = 1; i <= 2; ++i) {
    rig.now += 1min;
    rig.prober->rotate();
    auto now = probed();
    EXPECT_EQ(now, names_of(choose_peers(host_name(), targets, 2, slot + i)));
    EXPECT_EQ(now.size(), 2u);
    for (const auto& name : now) EXPECT_TRUE(seen.insert(name).second) << name << " twice";
  }
  EXPECT_EQ(seen.size(), 6u);

  // Probes go to the new window only: those to peers that left stop (their timers cancelled).
  rig.engine->held.clear();
  rig.run_until_queued(4);
  std::set<std::string> asked;
  for (const auto& s : rig.engine->held) asked.insert("lid " + std::to_string(s.request.to.lid));
  EXPECT_EQ(asked, probed());
  // And only their series are published: a peer that left loses its series.
  std::set<std::string> published;
  auto out = rig.collect();
  for (const auto* sample : samples(out, "ibfabric_probe_sent_total")) {
    published.insert(test_support::label_map(*sample)["peer"]);
  }
  EXPECT_EQ(published, probed());
}

// NodeRecord (IBA 15.2.5.2) through libibmad's field table, and a GetTableResp of them as the
// engine hands it over (records from octet 56, AttributeOffset their stride in 8-octet words).
std::vector<std::uint8_t> node_record(std::uint16_t lid, int type, std::uint64_t node,
                                      std::uint64_t port_guid, const std::string& description) {
  std::vector<std::uint8_t> r(112, 0);
  mad_set_field(r.data(), 0, IB_SA_NR_LID_F, lid);
  mad_set_field(r.data(), 0, IB_SA_NR_TYPE_F, static_cast<std::uint32_t>(type));
  mad_set_field64(r.data(), 0, IB_SA_NR_GUID_F, node);
  mad_set_field64(r.data(), 0, IB_SA_NR_PORT_GUID_F, port_guid);
  mad_set_field(r.data(), 0, IB_SA_NR_LOCAL_PORT_F, 1);
  char text[IB_SMP_DATA_SIZE] = {};
  description.copy(text, sizeof text);
  mad_encode_field(r.data(), IB_SA_NR_NODEDESC_F, text);
  return r;
}

void answer_table(FakeFabric& engine, const std::vector<std::vector<std::uint8_t>>& records) {
  ASSERT_FALSE(engine.held.empty());
  auto s = std::move(engine.held.front());
  engine.held.pop_front();
  ASSERT_EQ(s.request.attr_id, IB_SA_ATTR_NODERECORD);
  mad::Response r;
  r.status = mad::Status::ok;
  r.mad.assign(std::max<std::size_t>(IB_MAD_SIZE, 56 + 112 * records.size()), 0);
  r.mad[1] = IB_SA_CLASS;
  mad_set_field(r.mad.data(), 0, IB_SA_ATTROFFS_F, 112 / 8);
  for (std::size_t i = 0; i < records.size(); ++i) {
    std::copy(records[i].begin(), records[i].end(),
              r.mad.begin() + static_cast<std::ptrdiff_t>(56 + 112 * i));
  }
  s.callback(std::move(r));
}

constexpr std::uint64_t kOwnNode = 0x0002c90300000010, kOwnPort = 0x0002c90300000011;

std::vector<mad::LocalPort> own_ports() {
  mad::LocalPort port;
  port.ca = "mlx5_0";
  port.port = 1;
  port.lid = 1;
  port.node_guid = kOwnNode;
  port.port_guid = kOwnPort;
  port.link_layer = "InfiniBand";
  return {port};
}

TargetConfig by_port_guid() {
  TargetConfig t;
  t.guid = 0x0002c90300000a01;
  t.name = "by-guid";
  return t;
}

// The SA's NodeRecord of the by_port_guid() target's port, at `lid`.
std::vector<std::uint8_t> target_record(std::uint16_t lid) {
  return node_record(lid, IB_NODE_CA, 0x0002c90300000a00, 0x0002c90300000a01, "gpu-05 mlx5_0");
}

// Targets by port GUID and by node description, and discovery: one SA lookup each, and the
// peers follow the answers. Discovery takes one port per CA, never a switch, never this node.
TEST(ProbeRun, SaLookupsResolveTargetsByGuidAndDescriptionAndDiscoveryNeverTakesThisNode) {
  Rig rig;
  rig.names = std::make_shared<const NodeNameMap>(
      NodeNameMap::parse("0x0002c90300000c00 \"gpu-13\"\n", "names"));
  TargetConfig by_guid;
  by_guid.guid = 0x0002c90300000a01;
  by_guid.name = "by-guid";
  TargetConfig by_description;
  by_description.node_description = "gpu-07 mlx5_0";
  by_description.name = "gpu-07 mlx5_0";
  auto config = mad_config({by_guid, by_description});
  config.discover = true;
  rig.make(config);
  EXPECT_TRUE(rig.prober->uses_mad());
  rig.prober->start();
  EXPECT_TRUE(rig.directory->peers().empty()) << "no LID known before the SA answers";

  rig.prober->refresh_mad(own_ports(), "");
  ASSERT_EQ(rig.engine->held.size(), 3u);
  const auto& guid_query = rig.engine->held[0].request;
  EXPECT_EQ(guid_query.sa_component_mask, 1u << 8);  // PortGUID
  const auto& description_query = rig.engine->held[1].request;
  EXPECT_EQ(description_query.sa_component_mask, 1u << 14);  // NodeDescription
  const auto& table_query = rig.engine->held[2].request;
  EXPECT_EQ(table_query.sa_component_mask, 0u);  // the whole table

  answer_table(*rig.engine, {node_record(11, IB_NODE_CA, 0x0002c90300000a00, 0x0002c90300000a01,
                                         "gpu-05 mlx5_0")});
  answer_table(*rig.engine, {node_record(12, IB_NODE_CA, 0x0002c90300000b00, 0x0002c90300000b01,
                                         "gpu-07 mlx5_0")});
  EXPECT_TRUE(rig.directory->peers().empty()) << "the peers change once every lookup answered";
  answer_table(*rig.engine,
               {node_record(1, IB_NODE_CA, kOwnNode, kOwnPort, "this node"),
                node_record(2, IB_NODE_SWITCH, 0x0002c90300000100, 0x0002c90300000100, "Switch"),
                node_record(13, IB_NODE_CA, 0x0002c90300000c00, 0x0002c90300000c01, "c"),
                node_record(14, IB_NODE_CA, 0x0002c90300000c00, 0x0002c90300000c02, "c port 2"),
                node_record(15, IB_NODE_CA, 0x0002c90300000d00, 0x0002c90300000d01, "gpu-14")});
  // Discovery finds the targets' nodes too: gpu-07's under the target's name, which is its
  // description (one peer), gpu-05's under its own (a second peer at LID 11, as the code keys
  // peers by transport and name).
  EXPECT_EQ(rig.directory->peers(), (std::vector<ProbedPeer>{{"by-guid", "mad", 11},
                                                             {"gpu-05 mlx5_0", "mad", 11},
                                                             {"gpu-07 mlx5_0", "mad", 12},
                                                             {"gpu-13", "mad", 13},
                                                             {"gpu-14", "mad", 15}}));
  rig.collect();
  EXPECT_TRUE(rig.result.success) << rig.result.error;

  // Probes go to the LIDs the SA gave.
  rig.run_until_queued(5);
  std::set<std::uint16_t> lids;
  for (const auto& s : rig.engine->held) lids.insert(s.request.to.lid);
  EXPECT_EQ(lids, (std::set<std::uint16_t>{11, 12, 13, 15}));
}

TEST(ProbeRun, AFailedLookupIsReportedAndRetriedAndATargetTheSaDoesNotKnowIsNamed) {
  Rig rig;
  TargetConfig by_guid;
  by_guid.guid = 0x0002c90300000a01;
  by_guid.name = "by-guid";
  rig.make(mad_config({by_guid}));
  rig.prober->start();
  rig.prober->refresh_mad(own_ports(), "");
  LogCapture log;
  answer_failed(*rig.engine, mad::Status::timeout, "no answer");
  EXPECT_EQ(log.take(),
            std::vector<std::string>{"warning probe: SA NodeRecord lookup: timeout (no answer)"});

  // The lookup answers after its collection ended: the next collection asks again at once (not
  // a resolve_interval later) and reports the failure.
  rig.prober->refresh_mad(own_ports(), "");
  ASSERT_EQ(rig.engine->held.size(), 1u);
  EXPECT_EQ(rig.engine->held.front().request.attr_id, IB_SA_ATTR_NODERECORD);
  rig.collect();
  EXPECT_FALSE(rig.result.success);
  EXPECT_NE(rig.result.error.find("SA NodeRecord lookup: timeout (no answer)"), std::string::npos)
      << rig.result.error;

  // An empty answer: the SA does not know the target (a host that went away, or a wrong GUID):
  // not probed, counted and said once, and no failure of the collector (one page for a host
  // that goes away, not one per prober).
  answer_table(*rig.engine, {});
  rig.prober->refresh_mad(own_ports(), "");  // the lookup's failure is over
  EXPECT_EQ(value(rig.collect(), "ibfabric_probe_targets_unresolved", {}), 1);
  EXPECT_TRUE(rig.result.success) << rig.result.error;
  EXPECT_TRUE(rig.directory->peers().empty());
  auto said = log.take();
  EXPECT_EQ(std::count_if(said.begin(), said.end(),
                          [](const std::string& line) {
                            return line.find(
                                       "probe target not known to the SA\" "
                                       "target=\"by-guid\"") != std::string::npos;
                          }),
            1)
      << ::testing::PrintToString(said);

  // A failed port listing: nothing over MAD in that collection, and said so.
  rig.prober->refresh_mad(std::nullopt, "listing the local InfiniBand ports failed");
  EXPECT_TRUE(rig.engine->held.empty());
  rig.collect();
  EXPECT_NE(rig.result.error.find("listing the local InfiniBand ports failed"), std::string::npos)
      << rig.result.error;
}

// ibfabric_probe_node_info: the CA of the engine's default port, by its node-name-map name,
// else the NodeDescription it answers over MAD; absent until one of them is known.
TEST(ProbeRun, NodeInfoNamesTheCaByItsNodeDescriptionOnceItAnswered) {
  Rig rig;
  rig.make(mad_config({by_lid(5)}));
  auto node_info = [&] { return samples(rig.collect(), "ibfabric_probe_node_info").size(); };
  EXPECT_EQ(node_info(), 0u) << "named before the ports were listed";

  // The default port is not resolved yet: nothing to ask.
  rig.prober->refresh_mad(own_ports(), "");
  EXPECT_TRUE(rig.engine->held.empty());
  EXPECT_EQ(node_info(), 0u);

  rig.engine->port = mad::PortAddress{"mlx5_0", 1};
  rig.prober->refresh_mad(own_ports(), "");
  ASSERT_EQ(rig.engine->held.size(), 1u);
  const auto& q = rig.engine->held.front().request;
  EXPECT_TRUE(q.to.directed);
  EXPECT_TRUE(q.to.path.empty()) << "this node's own CA";
  EXPECT_EQ(q.attr_id, IB_ATTR_NODE_DESC);
  EXPECT_EQ(node_info(), 0u) << "named by GUID a collection before its description came";

  // Unanswered: still nameless, and asked again at the next collection.
  answer_failed(*rig.engine, mad::Status::timeout, "no answer");
  EXPECT_EQ(node_info(), 0u);
  rig.prober->refresh_mad(own_ports(), "");
  ASSERT_EQ(rig.engine->held.size(), 1u);
  std::vector<std::uint8_t> description(IB_SMP_DATA_SIZE, 0);
  std::memcpy(description.data(), "gpu-01 HCA-1", 12);
  answer_ok(*rig.engine, 0ns, description);
  auto out = rig.collect();
  EXPECT_EQ(info(out, "ibfabric_probe_node_info", {}),
            (std::map<std::string, std::string>{{"node_guid", "0x0002c90300000010"},
                                                {"node_name", "gpu-01 HCA-1"}}));
  // Asked once per CA.
  rig.prober->refresh_mad(own_ports(), "");
  EXPECT_TRUE(rig.engine->held.empty());
}

TEST(ProbeRun, NodeInfoPrefersTheNodeNameMapAndIsKnownAtOnceFromIt) {
  Rig rig;
  rig.names = std::make_shared<const NodeNameMap>(
      NodeNameMap::parse("0x0002c90300000010 \"rack1-gpu01\"\n", "names"));
  rig.engine->port = mad::PortAddress{"mlx5_0", 1};
  rig.make(mad_config({by_lid(5)}));
  rig.prober->refresh_mad(own_ports(), "");
  EXPECT_EQ(info(rig.collect(), "ibfabric_probe_node_info", {}),
            (std::map<std::string, std::string>{{"node_guid", "0x0002c90300000010"},
                                                {"node_name", "rack1-gpu01"}}));
  std::vector<std::uint8_t> description(IB_SMP_DATA_SIZE, 0);
  std::memcpy(description.data(), "gpu-01 HCA-1", 12);
  answer_ok(*rig.engine, 0ns, description);
  EXPECT_EQ(info(rig.collect(), "ibfabric_probe_node_info", {})["node_name"], "rack1-gpu01");
}

TEST(ProbeRun, NodeInfoWithoutInfinibandIsTheHostName) {
  // UDP probes only: no MAD at all, named at once.
  {
    Rig rig;
    auto config = mad_config({udp_peer()});
    rig.make(config);
    EXPECT_FALSE(rig.prober->uses_mad());
    EXPECT_EQ(info(rig.collect(), "ibfabric_probe_node_info", {}),
              (std::map<std::string, std::string>{{"node_name", host_name()}}));
  }
  // A MAD responder on a node whose listing finds no InfiniBand port.
  {
    Rig rig;
    auto config = mad_config({});
    config.mad_responder = true;
    rig.make(config);
    EXPECT_EQ(samples(rig.collect(), "ibfabric_probe_node_info").size(), 0u);
    rig.prober->refresh_mad(std::vector<mad::LocalPort>{}, "");
    EXPECT_EQ(info(rig.collect(), "ibfabric_probe_node_info", {}),
              (std::map<std::string, std::string>{{"node_name", host_name()}}));
    EXPECT_TRUE(rig.result.success) << "a responder without InfiniBand is skipped, not an error";
  }
}

// The daemon calls prepare_mad() before it opens the engine's default port (before any run), so
// that the responder's agent registers in that open: the service must be declared there, and
// only once.
TEST(ProbeRun, PrepareMadDeclaresTheRespondersServiceBeforeTheFirstRunAndOnlyOnce) {
  Rig rig;
  auto config = mad_config({});
  config.mad_responder = true;
  config.mad_responder_max_per_second = 250;
  rig.make(config);
  EXPECT_TRUE(rig.prober->prepare_mad());
  ASSERT_EQ(rig.engine->served.size(), 1u);
  const auto& served = rig.engine->served[0];
  EXPECT_EQ(served.via, mad::PortAddress{}) << "the default port";
  EXPECT_EQ(served.mgmt_class, kPingClass);
  EXPECT_EQ(served.oui, kPingOui);
  EXPECT_EQ(served.max_per_second, 250);
  EXPECT_TRUE(rig.engine->opens.empty()) << "the daemon opens the port, not the prober";
  EXPECT_TRUE(rig.engine->held.empty());

  // What it answers: ibping's host name, then the time it held the probe (here at least the
  // 3 ms the request is said to have waited).
  mad::InboundRequest in;
  in.received_at = std::chrono::steady_clock::now() - 3ms;
  auto answer = served.handler(in);
  ASSERT_TRUE(answer);
  EXPECT_STREQ(reinterpret_cast<const char*>(answer->data()), ping_host_name().c_str());
  auto hold = decode_ping_hold(answer->data(), answer->size());
  ASSERT_TRUE(hold);
  EXPECT_GE(*hold, 3ms);

  // The first run serves the service declared, no second one.
  rig.prober->start();
  EXPECT_EQ(rig.engine->served.size(), 1u);
  EXPECT_EQ(rig.engine->refreshes, 1);
  rig.engine->answered = 7;
  rig.engine->dropped = 2;
  auto out = rig.collect();
  EXPECT_EQ(value(out, "ibfabric_probe_responder_requests_total", {{"transport", "mad"}}), 7);
  EXPECT_EQ(value(out, "ibfabric_probe_responder_dropped_total", {{"transport", "mad"}}), 2);

  // A responder that cannot register is the collection's failure, with the reason.
  rig.engine->serve_error = "class 0x32 is served by another process (ibping -S?)";
  rig.prober->refresh_mad(own_ports(), "");
  rig.collect();
  EXPECT_FALSE(rig.result.success);
  EXPECT_NE(rig.result.error.find("MAD responder: class 0x32"), std::string::npos)
      << rig.result.error;
}

TEST(ProbeRun, PrepareMadWithoutAResponderDeclaresNothingAndSaysWhetherMadIsUsed) {
  {
    Rig rig;
    rig.make(mad_config({by_lid(5)}));
    EXPECT_TRUE(rig.prober->prepare_mad()) << "MAD targets use the engine";
    EXPECT_TRUE(rig.engine->served.empty());
  }
  {
    Rig rig;
    auto config = mad_config({udp_peer()});
    rig.make(config);
    EXPECT_FALSE(rig.prober->prepare_mad()) << "UDP only: the daemon need not open a MAD port";
    EXPECT_TRUE(rig.engine->served.empty());
  }
}

// A node whose probes are all UDP has no MAD work in a collection: a failed port listing is
// not its failure, and nothing is asked over MAD.
TEST(ProbeRun, AProberWithoutMadWorkIgnoresThePortListing) {
  Rig rig;
  auto config = mad_config({udp_peer()});
  rig.make(config);
  rig.engine->port = mad::PortAddress{"mlx5_0", 1};
  rig.prober->refresh_mad(std::nullopt, "listing the local InfiniBand ports failed");
  rig.collect();
  EXPECT_TRUE(rig.result.success) << rig.result.error;
  rig.prober->refresh_mad(own_ports(), "");
  EXPECT_TRUE(rig.engine->held.empty());
  EXPECT_TRUE(rig.engine->served.empty());
}

// MAD targets on a node whose listing finds no InfiniBand port: said in the collection's
// failure (a responder alone is skipped quietly: NodeInfoWithoutInfinibandIsTheHostName).
TEST(ProbeRun, MadTargetsOnANodeWithoutInfinibandAreAFailure) {
  Rig rig;
  rig.make(mad_config({by_lid(5)}));
  rig.prober->refresh_mad(std::vector<mad::LocalPort>{}, "");
  auto out = rig.collect();
  EXPECT_FALSE(rig.result.success);
  EXPECT_NE(rig.result.error.find("no InfiniBand port for MAD probes"), std::string::npos)
      << rig.result.error;
  EXPECT_EQ(info(out, "ibfabric_probe_node_info", {}),
            (std::map<std::string, std::string>{{"node_name", host_name()}}));
}

// Before the SA has answered a first lookup, a target without a LID is not "not known to the
// SA": it is being looked up.
TEST(ProbeRun, ATargetIsNotUnknownToTheSaBeforeItFirstAnswers) {
  Rig rig;
  rig.make(mad_config({by_port_guid()}));
  rig.prober->start();
  rig.prober->refresh_mad(own_ports(), "");
  ASSERT_EQ(rig.engine->held.size(), 1u);
  rig.collect();
  EXPECT_TRUE(rig.result.success) << rig.result.error;
  EXPECT_TRUE(rig.directory->peers().empty());
}

// A prober of one target by port GUID that asks the SA again at every collection
// (resolve_interval 0), started, with its first lookup sent.
void start_looking_up_every_collection(Rig& rig) {
  auto config = mad_config({by_port_guid()});
  config.resolve_interval = 0s;
  rig.make(config);
  rig.prober->start();
  rig.prober->refresh_mad(own_ports(), "");
}

// A lookup still out when the next collection comes is not asked a second time.
TEST(ProbeRun, ALookupStillOutIsNotAskedAgain) {
  Rig rig;
  start_looking_up_every_collection(rig);
  rig.prober->refresh_mad(own_ports(), "");
  EXPECT_EQ(rig.engine->held.size(), 1u);
  answer_table(*rig.engine, {target_record(11)});
  rig.prober->refresh_mad(own_ports(), "");
  EXPECT_EQ(rig.engine->held.size(), 1u) << "once answered, asked again (resolve_interval 0)";
}

// An answered lookup is asked again resolve_interval later, not at every collection.
TEST(ProbeRun, AnAnsweredLookupIsAskedAgainOnlyAfterResolveInterval) {
  for (auto interval : {std::chrono::nanoseconds{1h}, std::chrono::nanoseconds{0}}) {
    SCOPED_TRACE("resolve_interval " + std::to_string(interval.count()) + "ns");
    Rig rig;
    auto config = mad_config({by_port_guid()});
    config.resolve_interval = interval;
    rig.make(config);
    rig.prober->start();
    rig.prober->refresh_mad(own_ports(), "");
    answer_table(*rig.engine, {target_record(11)});
    EXPECT_EQ(rig.directory->peers(), (std::vector<ProbedPeer>{{"by-guid", "mad", 11}}));
    rig.prober->refresh_mad(own_ports(), "");
    EXPECT_EQ(rig.engine->held.size(), interval.count() > 0 ? 0u : 1u);
  }
}

// A lookup that fails after one that answered keeps the peers the earlier one resolved (and
// says so in the collection's failure).
TEST(ProbeRun, AFailedLookupKeepsThePeersResolvedBefore) {
  Rig rig;
  start_looking_up_every_collection(rig);
  answer_table(*rig.engine, {target_record(11)});
  rig.prober->refresh_mad(own_ports(), "");
  answer_failed(*rig.engine, mad::Status::timeout, "no answer");
  EXPECT_EQ(rig.directory->peers(), (std::vector<ProbedPeer>{{"by-guid", "mad", 11}}));
  rig.prober->refresh_mad(own_ports(), "");
  rig.collect();
  EXPECT_FALSE(rig.result.success);
  EXPECT_NE(rig.result.error.find("SA NodeRecord lookup: timeout"), std::string::npos)
      << rig.result.error;
  EXPECT_EQ(rig.result.error.find("not known to the SA"), std::string::npos) << rig.result.error;
  rig.run_until_queued(2);  // the lookup asked again, and a probe
  EXPECT_EQ(rig.engine->held.back().request.to.lid, 11);
}

// A target the SA now places at another LID (its port re-cabled, or the SM gave it another) is
// the same peer: its probes go to the new LID and its counters go on.
TEST(ProbeRun, ATargetAtANewLidIsProbedThereAndKeepsItsCounters) {
  Rig rig;
  start_looking_up_every_collection(rig);
  answer_table(*rig.engine, {target_record(11)});
  for (int i = 0; i < 2; ++i) {
    rig.run_until_queued(1);
    EXPECT_EQ(rig.engine->held.front().request.to.lid, 11);
    answer_ping(*rig.engine, 100us, 10us);
  }
  rig.prober->refresh_mad(own_ports(), "");
  ASSERT_EQ(rig.engine->held.front().request.attr_id, IB_SA_ATTR_NODERECORD);
  answer_table(*rig.engine, {target_record(21)});
  EXPECT_EQ(rig.directory->peers(), (std::vector<ProbedPeer>{{"by-guid", "mad", 21}}));
  rig.engine->held.clear();  // probes sent before the answer
  rig.run_until_queued(1);
  EXPECT_EQ(rig.engine->held.front().request.to.lid, 21);
  answer_ping(*rig.engine, 100us, 10us);
  auto out = rig.collect();
  EXPECT_EQ(value(out, "ibfabric_probe_received_total", peer("by-guid")), 3);
}

// The NodeDescription of this node's CA is asked once while it is out, not at every
// collection.
TEST(ProbeRun, ANodeDescriptionStillOutIsNotAskedAgain) {
  Rig rig;
  rig.engine->port = mad::PortAddress{"mlx5_0", 1};
  rig.make(mad_config({by_lid(5)}));
  rig.prober->refresh_mad(own_ports(), "");
  rig.prober->refresh_mad(own_ports(), "");
  ASSERT_EQ(rig.engine->held.size(), 1u);
  EXPECT_EQ(rig.engine->held.front().request.attr_id, IB_ATTR_NODE_DESC);
}

// Another CA at the engine's default port (the adapter replaced, or the port now another's):
// its own NodeDescription is asked, and until it answers the node is not named by the old one.
TEST(ProbeRun, AnotherCaAtTheDefaultPortIsDescribedAnew) {
  Rig rig;
  rig.engine->port = mad::PortAddress{"mlx5_0", 1};
  rig.make(mad_config({by_lid(5)}));
  auto description = [](const char* text) {
    std::vector<std::uint8_t> d(IB_SMP_DATA_SIZE, 0);
    std::memcpy(d.data(), text, std::strlen(text));
    return d;
  };
  rig.prober->refresh_mad(own_ports(), "");
  answer_ok(*rig.engine, 0ns, description("gpu-01 HCA-1"));
  EXPECT_EQ(info(rig.collect(), "ibfabric_probe_node_info", {})["node_name"], "gpu-01 HCA-1");

  auto replaced = own_ports();
  replaced[0].node_guid = 0x0002c90300000020;
  replaced[0].port_guid = 0x0002c90300000021;
  rig.prober->refresh_mad(replaced, "");
  ASSERT_EQ(rig.engine->held.size(), 1u);
  EXPECT_EQ(rig.engine->held.front().request.attr_id, IB_ATTR_NODE_DESC);
  EXPECT_TRUE(samples(rig.collect(), "ibfabric_probe_node_info").empty());
  answer_ok(*rig.engine, 0ns, description("gpu-02 HCA-1"));
  EXPECT_EQ(info(rig.collect(), "ibfabric_probe_node_info", {}),
            (std::map<std::string, std::string>{{"node_guid", "0x0002c90300000020"},
                                                {"node_name", "gpu-02 HCA-1"}}));
}

// The answer to a NodeDescription asked of the CA that was there before is not the new CA's.
TEST(ProbeRun, ADescriptionOfTheCaThatWasThereBeforeIsNotTheNewOnes) {
  Rig rig;
  rig.engine->port = mad::PortAddress{"mlx5_0", 1};
  rig.make(mad_config({by_lid(5)}));
  rig.prober->refresh_mad(own_ports(), "");
  ASSERT_EQ(rig.engine->held.size(), 1u);
  auto replaced = own_ports();
  replaced[0].node_guid = 0x0002c90300000020;
  rig.prober->refresh_mad(replaced, "");
  std::vector<std::uint8_t> old(IB_SMP_DATA_SIZE, 0);
  std::memcpy(old.data(), "gpu-01 HCA-1", 12);
  answer_ok(*rig.engine, 0ns, old);
  EXPECT_TRUE(samples(rig.collect(), "ibfabric_probe_node_info").empty());
  rig.prober->refresh_mad(replaced, "");
  ASSERT_EQ(rig.engine->held.size(), 1u) << "the new CA's is asked";
}

// A reload that replaced the MAD engine: the responder is served on the new one.
TEST(ProbeRun, TheResponderIsServedOnAReplacedEngine) {
  Rig rig;
  auto config = mad_config({});
  config.mad_responder = true;
  rig.make(config);
  ASSERT_TRUE(rig.prober->prepare_mad());
  ASSERT_EQ(rig.engine->served.size(), 1u);
  auto first = rig.engine;
  rig.engine = std::make_shared<FakeFabric>(rig.io, FakeFabric::Held{});
  rig.prober->refresh_mad(own_ports(), "");
  EXPECT_EQ(rig.engine->served.size(), 1u);
  EXPECT_EQ(rig.engine->refreshes, 1);
  EXPECT_EQ(first->served.size(), 1u);
}

// More peers than max_probes_per_second allows at probe_interval: the interval is stretched
// (so that the rate holds), said once, not at every update of the peers.
TEST(ProbeRun, MorePeersThanTheRateAllowsStretchTheIntervalSaidOnce) {
  LogCapture log;
  Rig rig;
  auto config = mad_config({by_lid(5), by_lid(6), by_lid(7)});
  config.max_probes_per_second = 1;
  config.rotate_every = 1min;
  rig.make(config);
  rig.prober->start();
  rig.now += 1min;
  rig.prober->rotate();  // the same three peers, scheduled again
  EXPECT_EQ(
      test_support::count_containing(
          log.take(), "probe: 3 peers at max_probes_per_second 1 stretch the probe interval to 3s"),
      1u);
}

// Probes never sent are said in the collection's failure, at most 8 of them (a port gone under
// a hundred peers is one problem, not a hundred).
TEST(ProbeRun, ProbesNeverSentAreSaidAtMostEightTimes) {
  Rig rig;
  std::vector<TargetConfig> targets;
  for (std::uint16_t lid = 1; lid <= 10; ++lid) targets.push_back(by_lid(lid));
  rig.make(mad_config(targets));
  rig.prober->start();
  rig.run_until_queued(10);
  while (!rig.engine->held.empty()) {
    answer_failed(*rig.engine, mad::Status::port_unavailable, "no local CA port found");
  }
  rig.collect();
  EXPECT_FALSE(rig.result.success);
  std::size_t said = 0;
  for (auto at = rig.result.error.find("probe to "); at != std::string::npos;
       at = rig.result.error.find("probe to ", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 8u) << rig.result.error;
}

// A round of lookups in which several fail reports the first failure (one line, not one per
// target).
TEST(ProbeRun, ARoundOfFailedLookupsReportsTheFirstFailure) {
  Rig rig;
  TargetConfig by_description;
  by_description.node_description = "gpu-07 mlx5_0";
  by_description.name = "gpu-07 mlx5_0";
  rig.make(mad_config({by_port_guid(), by_description}));
  rig.prober->start();
  rig.prober->refresh_mad(own_ports(), "");
  ASSERT_EQ(rig.engine->held.size(), 2u);
  answer_failed(*rig.engine, mad::Status::timeout, "no answer");
  answer_failed(*rig.engine, mad::Status::mad_status, "invalid attribute");
  rig.prober->refresh_mad(own_ports(), "");
  rig.collect();
  EXPECT_FALSE(rig.result.success);
  EXPECT_NE(rig.result.error.find("SA NodeRecord lookup: timeout (no answer)"), std::string::npos)
      << rig.result.error;
  EXPECT_EQ(rig.result.error.find("invalid attribute"), std::string::npos) << rig.result.error;
}

// The engine's default port not among the ports listed (its CA gone since it was chosen): no
// CA to describe, and the node is not named.
TEST(ProbeRun, ADefaultPortTheListingDoesNotHoldIsNotDescribed) {
  Rig rig;
  rig.engine->port = mad::PortAddress{"mlx5_1", 1};
  rig.make(mad_config({by_lid(5)}));
  rig.prober->refresh_mad(own_ports(), "");  // mlx5_0 only
  EXPECT_TRUE(rig.engine->held.empty());
  EXPECT_TRUE(samples(rig.collect(), "ibfabric_probe_node_info").empty());
}

// The probe plan (plan_url): the peers ibfabric-localize plans for this node (the training jobs
// it runs) are probed first, within max_peers, found by their node GUID in the SA's table; the
// rest of the subset is drawn from what is left. A planned node the SA does not know is not
// probed (and does not take a slot).
TEST(ProbeRun, PlannedPeersAreProbedFirstWithinMaxPeers) {
  Rig rig;
  auto config = mad_config({});
  config.discover = true;
  config.max_peers = 2;
  rig.make(config);
  rig.prober->start();
  rig.prober->refresh_mad(own_ports(), "");
  answer_table(*rig.engine,
               {node_record(1, IB_NODE_CA, kOwnNode, kOwnPort, "this node"),
                node_record(11, IB_NODE_CA, 0x0002c90300000a00, 0x0002c90300000a01, "a"),
                node_record(12, IB_NODE_CA, 0x0002c90300000b00, 0x0002c90300000b01, "b"),
                node_record(13, IB_NODE_CA, 0x0002c90300000c00, 0x0002c90300000c01, "c"),
                node_record(14, IB_NODE_CA, 0x0002c90300000d00, 0x0002c90300000d01, "d")});
  ASSERT_EQ(rig.directory->peers().size(), 2u);
  // Whatever the subset drew, the planned node is among the two, and one other.
  for (std::uint64_t planned : {0x0002c90300000a00ull, 0x0002c90300000d00ull}) {
    rig.prober->set_plan({planned, 0x0002c90300000f00});  // 0x...0f00: not in the SA's table
    auto peers = rig.directory->peers();
    ASSERT_EQ(peers.size(), 2u);
    std::string name = planned == 0x0002c90300000a00ull ? "a" : "d";
    EXPECT_TRUE(peers[0].name == name || peers[1].name == name) << name;
  }
  rig.prober->set_plan({0x0002c90300000a00, 0x0002c90300000b00, 0x0002c90300000c00});
  EXPECT_EQ(rig.directory->peers(),
            (std::vector<ProbedPeer>{{"a", "mad", 11}, {"b", "mad", 12}}));  // max_peers
}

TEST(ProbePlanClient, TheBodyIsOneGuidALine) {
  EXPECT_EQ(parse_plan("# ibfabric-localize probe plan\n0x0002c90300000a00 gpu-01\n\n"
                       "0x0002C90300000B00\n"),
            (std::vector<std::uint64_t>{0x0002c90300000a00, 0x0002c90300000b00}));
  EXPECT_EQ(parse_plan(""), std::vector<std::uint64_t>{});
  EXPECT_EQ(parse_plan("<html>not found</html>\n"), std::nullopt);
  EXPECT_EQ(parse_plan("0x12 short\n"), std::nullopt);
  EXPECT_THROW(check_plan_url("ibfabric-localize:10920"), std::invalid_argument);
  EXPECT_THROW(check_plan_url("http://h:1/probe-plan?x=1"), std::invalid_argument);
  EXPECT_NO_THROW(check_plan_url("https://[::1]:10920/probe-plan"));
}

}  // namespace
}  // namespace ibfabric::probe
