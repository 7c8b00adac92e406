// The restore rules of the state directory (docs/design.md, "State that survives a restart"),
// through the two collectors that keep link memory there (`fabric` and `ports`), on a fabric
// simulated at the MAD engine: the edge the collectors talk to, answering directed-route SMPs
// and PMA Gets the way a subnet does. Nothing of ours is mocked; the state files are real files
// in a temporary directory.
//
// No clock is injected: the code has no clock seam, and none of these rules needs time to pass.
// A record's age is the file's own input (its `seen` time is written into it), and "restored
// cables go on aging from the time they were last seen" is checked on the file the collector
// writes back after restoring: it keeps each record's `seen` time instead of taking now.
//
// A restart here is a new collector over the same directory; what a daemon killed with SIGKILL
// before its deferred save restores is also checked against the real daemon in
// tests/integration/test_lossy_fabric.py.

#include "ib/state_store.h"
#include "collector_test_support.h"
#include "collectors/fabric/fabric_collector.h"
#include "collectors/ports/ports_collector.h"
#include "core/node_names.h"
#include "core/off_loop.h"
#include "exporters/prometheus/render.h"
#include "fake_fabric.h"
#include "ib/state_file.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

namespace ibfabric::state {
namespace {

using namespace std::chrono_literals;
using test_support::TempDir;

constexpr std::uint64_t kSubnet = test_support::kSubnetPrefix;
constexpr std::uint64_t kLeaf = 0x0002c90200400001ull;
constexpr std::uint64_t kHostA = 0x0002c90300000a00ull;  // the daemon's node
constexpr std::uint64_t kHostB = 0x0002c90300000b00ull;
constexpr std::uint64_t kHostC = 0x0002c90300000c00ull;
constexpr std::uint64_t kHostD = 0x0002c90300000d00ull;
constexpr std::uint64_t kHostE = 0x0002c90300000e00ull;
constexpr int kLeafPorts = 6;

// A leaf switch with host-a (the daemon's node) on port 1, host-b on 2, host-c on 3 and
// ports 4 to 6 empty.
struct Subnet {
  explicit Subnet(boost::asio::io_context& io)
      : fabric(std::make_shared<test_support::FakeFabric>(io, kHostA)) {
    fabric->add({kLeaf, IB_NODE_SWITCH, kLeafPorts, "leaf-01", 1});
    fabric->add({kHostA, IB_NODE_CA, 1, "host-a mlx5_0", 2});
    fabric->add({kHostB, IB_NODE_CA, 1, "host-b mlx5_0", 3});
    fabric->add({kHostC, IB_NODE_CA, 1, "host-c mlx5_0", 4});
    fabric->add({kHostD, IB_NODE_CA, 1, "host-d mlx5_0", 5});
    fabric->add({kHostE, IB_NODE_CA, 1, "host-e mlx5_0", 6});
    fabric->cable(kLeaf, 1, kHostA, 1);
    fabric->cable(kLeaf, 2, kHostB, 1);
    fabric->cable(kLeaf, 3, kHostC, 1);
  }
  std::function<std::shared_ptr<mad::Engine>()> engine() {
    return [f = fabric] { return f; };
  }
  std::shared_ptr<test_support::FakeFabric> fabric;
};

template <class Pred>
bool run_until(boost::asio::io_context& io, Pred done, std::chrono::milliseconds bound = 10s) {
  auto until = std::chrono::steady_clock::now() + bound;
  while (!done() && std::chrono::steady_clock::now() < until) {
    if (io.stopped()) io.restart();
    if (io.run_one_for(10ms) == 0) std::this_thread::sleep_for(1ms);
  }
  return done();
}

// One collection, run to its end; the exposition as text (the fabric's info families are
// kept compressed, so they are read the way a scrape reads them).
std::string collect(boost::asio::io_context& io, Collector& collector) {
  std::optional<CollectResult> result;
  collector.collect([&](CollectResult r) { result = std::move(r); });
  EXPECT_TRUE(run_until(io, [&] { return result.has_value(); })) << "the collection never ended";
  if (!result) return "";
  EXPECT_TRUE(result->success) << result->error;
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->families = std::move(result->metrics);
  return render_text({snapshot}, {});
}

// The label sets of every sample of `name` in exposition text.
std::vector<std::map<std::string, std::string>> series(const std::string& text,
                                                       const std::string& name) {
  static const std::regex label(R"re((\w+)="((?:[^"\\]|\\.)*)")re");
  std::vector<std::map<std::string, std::string>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(name + "{")) continue;
    std::map<std::string, std::string> labels;
    auto body = line.substr(name.size(), line.rfind('}') - name.size());
    for (std::sregex_iterator it(body.begin(), body.end(), label), end; it != end; ++it) {
      labels[(*it)[1]] = (*it)[2];
    }
    out.push_back(std::move(labels));
  }
  return out;
}

// The value of the sample of `name` with label collector="<collector>", or NAN.
double collector_value(const std::string& text, const std::string& name,
                       const std::string& collector) {
  std::istringstream in(text);
  auto prefix = name + "{collector=\"" + collector + "\"} ";
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(prefix)) return std::stod(line.substr(prefix.size()));
  }
  return NAN;
}

// port -> far end's name, of the fabric's link_info of the leaf.
std::map<int, std::string> leaf_cables(const std::string& text) {
  std::map<int, std::string> out;
  for (auto& l : series(text, "ibfabric_fabric_link_info")) {
    if (l["node_guid"] == "0x0002c90200400001") out[std::stoi(l["port"])] = l["remote_node_name"];
  }
  return out;
}

LinkRecord leaf_record(int port, std::uint64_t remote, const std::string& remote_name,
                       double seen) {
  return LinkRecord{kSubnet, "", kLeaf, port, remote, 1, IB_NODE_CA, seen, "leaf-01", remote_name};
}

State fabric_state(std::uint64_t origin, std::vector<LinkRecord> links) {
  return State{"fabric", origin, unix_now() - 60, std::move(links)};
}

// Runs the loop until no worker thread of the process runs (the state writes and the
// fabric's compression) and what they posted has run: a write a collection started has landed
// by then, or there was none.
void settle(boost::asio::io_context& io) {
  EXPECT_TRUE(run_until(io, [] { return OffLoop::running() == 0; }))
      << "a worker thread of this process still runs (one of another test?)";
  io.restart();
  io.poll();
}

const LinkRecord* record(const State& state, std::uint64_t guid, int port) {
  for (const auto& l : state.links) {
    if (l.guid == guid && l.port == port) return &l;
  }
  return nullptr;
}

class StateRestore : public ::testing::Test {
 protected:
  // A write still under way does not outlive the directory.
  void TearDown() override { settle(io_); }

  std::unique_ptr<fabric::FabricCollector> fabric_collector(std::chrono::nanoseconds memory = 24h) {
    fabric::FabricConfig config;
    config.link_memory = memory;
    config.rediscover_every = 1;  // every collection discovers: a cable plugged in is seen
    return std::make_unique<fabric::FabricCollector>(
        io_, subnet_.engine(), config, std::make_shared<const NodeNameMap>(), dir_.path());
  }
  std::unique_ptr<ports::PortsCollector> ports_collector(std::chrono::nanoseconds memory = 24h) {
    ports::PortsConfig config;
    config.link_memory = memory;
    config.error_details = false;
    auto port = test_support::ib_port(kHostA);
    return std::make_unique<ports::PortsCollector>(
        io_, subnet_.engine(), config, std::make_shared<const NodeNameMap>(),
        [port] { return std::vector<mad::LocalPort>{port}; }, 5s, dir_.path());
  }
  std::string path(const std::string& collector) const {
    return dir_.path() + "/" + collector + ".state";
  }
  void write(const State& state) {
    ASSERT_EQ(write_atomically(path(state.collector), serialize(state)), "");
  }
  // The file as the last collection left it.
  State saved(const std::string& collector) {
    settle(io_);
    auto loaded = load(path(collector));
    EXPECT_TRUE(loaded.state) << loaded.error;
    return loaded.state ? *loaded.state : State{};
  }

  boost::asio::io_context io_;
  Subnet subnet_{io_};
  TempDir dir_;
};

// The fabric file of the node the daemon runs on brings back a cable that is down now, named;
// the same file written on another node (its `origin`: where its discovery started) is
// ignored whole, once, and counted, and the cable is not named.
TEST_F(StateRestore, AFabricFileWrittenByAnotherNodeIsIgnored) {
  auto seen = unix_now() - 600;
  for (auto origin : {kHostA, kHostB}) {
    SCOPED_TRACE(origin == kHostA ? "this node's file" : "another node's file");
    write(fabric_state(origin, {leaf_record(4, kHostD, "host-d mlx5_0", seen)}));
    auto collector = fabric_collector();
    auto text = collect(io_, *collector);
    auto mine = saved("fabric");  // this node's own from now on, written after the restore
    EXPECT_EQ(mine.origin, kHostA);
    auto cables = leaf_cables(text);
    EXPECT_EQ(cables[2], "host-b mlx5_0");  // what discovery sees is there either way
    if (origin == kHostA) {
      EXPECT_EQ(cables[4], "host-d mlx5_0");
      EXPECT_EQ(collector_value(text, "ibfabric_state_restored_links", "fabric"), 1);
      EXPECT_EQ(collector_value(text, "ibfabric_state_files_ignored_total", "fabric"), 0);
    } else {
      EXPECT_EQ(cables.count(4), 0u) << "port 4 named from another node's file";
      EXPECT_EQ(collector_value(text, "ibfabric_state_restored_links", "fabric"), 0);
      EXPECT_EQ(collector_value(text, "ibfabric_state_files_ignored_total", "fabric"), 1);
      EXPECT_EQ(record(mine, kLeaf, 4), nullptr);
    }
  }
}

// The ports file of another host (its records are for a CA whose node GUID is not this
// host's) is ignored and counted; this host's own file names the far end of its port while
// the port is down.
TEST_F(StateRestore, APortsFileWrittenByAnotherHostIsIgnored) {
  subnet_.fabric->unplug(kHostA, 1);  // the daemon's own cable is down: only the file names it
  for (auto host : {kHostA, kHostB}) {
    SCOPED_TRACE(host == kHostA ? "this host's file" : "another host's file");
    write(State{"ports",
                0,
                unix_now() - 60,
                {LinkRecord{kSubnet, "mlx5_0", host, 1, kLeaf, 5, IB_NODE_SWITCH, unix_now() - 600,
                            "host mlx5_0", "leaf-01"}}});
    auto collector = ports_collector();
    auto text = collect(io_, *collector);
    settle(io_);  // its own write lands before the next file is put in place
    auto peers = series(text, "ibfabric_ports_peer_info");
    if (host == kHostA) {
      ASSERT_EQ(peers.size(), 1u) << text;
      EXPECT_EQ(peers[0]["peer_node_guid"], "0x0002c90200400001");
      EXPECT_EQ(peers[0]["peer_port"], "5");
      EXPECT_EQ(collector_value(text, "ibfabric_state_restored_links", "ports"), 1);
      EXPECT_EQ(collector_value(text, "ibfabric_state_files_ignored_total", "ports"), 0);
    } else {
      EXPECT_TRUE(peers.empty()) << "the far end named from another host's file";
      EXPECT_EQ(collector_value(text, "ibfabric_state_restored_links", "ports"), 0);
      EXPECT_EQ(collector_value(text, "ibfabric_state_files_ignored_total", "ports"), 1);
    }
  }
}

// A record older than link_memory is not restored; a younger one is, and it keeps the time it
// was last seen: the file written back after the restore holds that time, not the restart's,
// so link_memory still ends it then (as it ends a cable seen in this process).
TEST_F(StateRestore, LinkMemoryEndsRecordsFromWhenTheyWereLastSeen) {
  auto now = unix_now();
  auto old_seen = now - 2 * 3600.0;  // past the 1 h of link_memory below
  auto young_seen = now - 50 * 60.0;
  write(fabric_state(kHostA, {leaf_record(4, kHostD, "host-d mlx5_0", old_seen),
                              leaf_record(5, kHostE, "host-e mlx5_0", young_seen)}));
  auto collector = fabric_collector(1h);
  auto text = collect(io_, *collector);
  auto cables = leaf_cables(text);
  EXPECT_EQ(cables.count(4), 0u) << "a cable last seen 2 h ago restored with link_memory 1h";
  EXPECT_EQ(cables[5], "host-e mlx5_0");
  EXPECT_EQ(collector_value(text, "ibfabric_state_restored_links", "fabric"), 1);

  auto after = saved("fabric");
  EXPECT_EQ(after.links.size(), 4u);  // ports 1-3 seen now, 5 restored
  EXPECT_EQ(record(after, kLeaf, 4), nullptr);
  const auto* young = record(after, kLeaf, 5);
  ASSERT_NE(young, nullptr);
  // Steady-clock to Unix time and back costs a few clock reads: well under a second, while
  // a record restarted at the restore would be 50 minutes younger.
  EXPECT_NEAR(young->seen, young_seen, 1.0);
  const auto* seen_now = record(after, kLeaf, 2);
  ASSERT_NE(seen_now, nullptr);
  EXPECT_GE(seen_now->seen, now - 1.0);
}

// The fabric file of this node written for another subnet (its records carry the GID prefix of
// the port they were seen from) is ignored whole, once, and counted; the cable is not named.
TEST_F(StateRestore, AFabricFileOfAnotherSubnetIsIgnored) {
  auto other = leaf_record(4, kHostD, "host-d mlx5_0", unix_now() - 600);
  other.subnet = kSubnet + 1;
  write(fabric_state(kHostA, {other}));
  auto collector = fabric_collector();
  auto text = collect(io_, *collector);
  EXPECT_EQ(leaf_cables(text)[2], "host-b mlx5_0");
  EXPECT_EQ(leaf_cables(text).count(4), 0u) << "port 4 named from another subnet's file";
  EXPECT_EQ(collector_value(text, "ibfabric_state_restored_links", "fabric"), 0);
  EXPECT_EQ(collector_value(text, "ibfabric_state_files_ignored_total", "fabric"), 1);
  EXPECT_EQ(record(saved("fabric"), kLeaf, 4), nullptr);
}

// Cables moved while the daemon was down: host-b, which the file has on port 3, is on port 2
// now, and host-c the other way round. What discovery sees wins over the file, in the metrics
// and in the next file.
TEST_F(StateRestore, ACableMovedWhileTheDaemonWasDownIsShownWhereItIsNow) {
  auto seen = unix_now() - 600;
  write(fabric_state(kHostA, {leaf_record(2, kHostC, "host-c mlx5_0", seen),
                              leaf_record(3, kHostB, "host-b mlx5_0", seen)}));
  auto collector = fabric_collector();
  auto text = collect(io_, *collector);
  auto cables = leaf_cables(text);
  EXPECT_EQ(cables[2], "host-b mlx5_0");
  EXPECT_EQ(cables[3], "host-c mlx5_0");
  EXPECT_EQ(collector_value(text, "ibfabric_state_restored_links", "fabric"), 0);
  auto after = saved("fabric");
  ASSERT_NE(record(after, kLeaf, 2), nullptr);
  ASSERT_NE(record(after, kLeaf, 3), nullptr);
  EXPECT_EQ(record(after, kLeaf, 2)->remote_guid, kHostB);
  EXPECT_EQ(record(after, kLeaf, 3)->remote_guid, kHostC);
}

// The same for the ports collector: the file has the host's cable on leaf port 5, the one-hop
// query finds it on leaf port 1 now.
TEST_F(StateRestore, ALocalCableMovedWhileTheDaemonWasDownIsShownWhereItIsNow) {
  write(State{"ports",
              0,
              unix_now() - 60,
              {LinkRecord{kSubnet, "mlx5_0", kHostA, 1, kLeaf, 5, IB_NODE_SWITCH, unix_now() - 600,
                          "host-a mlx5_0", "leaf-01"}}});
  auto collector = ports_collector();
  auto text = collect(io_, *collector);
  auto peers = series(text, "ibfabric_ports_peer_info");
  ASSERT_EQ(peers.size(), 1u) << text;
  EXPECT_EQ(peers[0]["peer_port"], "1");
}

// The file is written at most once a minute: a cable first seen within the minute after the
// last write is not in the file yet. A daemon that stops then (its restart here: a new
// collector over the same directory; the real daemon writes nothing at exit, and SIGKILL is
// in tests/integration/test_lossy_fabric.py) restores the last file written, whole: the
// cables of that write, and not the newer one, which is unnamed once it is down.
TEST_F(StateRestore, ASaveDeferredByTheRateLimitIsLostAtARestart) {
  {
    auto first = fabric_collector();
    collect(io_, *first);
    EXPECT_EQ(saved("fabric").links.size(), 3u);
    // host-d is plugged into port 4: the state changed, within the minute of the last write.
    subnet_.fabric->cable(kLeaf, 4, kHostD, 1);
    auto text = collect(io_, *first);
    EXPECT_EQ(leaf_cables(text)[4], "host-d mlx5_0");
    EXPECT_EQ(saved("fabric").links.size(), 3u) << "written within the minute";
    text = collect(io_, *first);
    EXPECT_EQ(collector_value(text, "ibfabric_state_writes_total", "fabric"), 1);
    EXPECT_EQ(collector_value(text, "ibfabric_state_write_failures_total", "fabric"), 0);
  }
  // Down while the daemon is down: host-c, which the last write has, and host-d, which it
  // does not.
  subnet_.fabric->unplug(kLeaf, 3);
  subnet_.fabric->unplug(kLeaf, 4);
  auto restarted = fabric_collector();
  auto text = collect(io_, *restarted);
  auto cables = leaf_cables(text);
  EXPECT_EQ(cables[3], "host-c mlx5_0");
  EXPECT_EQ(cables.count(4), 0u) << "host-d was never written, yet named after the restart";
  EXPECT_EQ(collector_value(text, "ibfabric_state_restored_links", "fabric"), 1);
  EXPECT_EQ(collector_value(text, "ibfabric_state_files_ignored_total", "fabric"), 0);
}

}  // namespace
}  // namespace ibfabric::state
