#pragma once
// The `fabric` collector: discovers the whole fabric (switches, CAs, links) by a directed-route
// breadth-first search from the engine's default port, then sweeps PortInfo and the PMA
// counters of every port of every switch of this node's shard. Everything goes through the
// shared MAD engine, all requests pipelined; the engine's caps and rate limit pace them.
// Metrics and config keys: docs/collectors.md, "Collector `fabric`".

#include "collectors/collector.h"
#include "collectors/fabric/fabric_model.h"
#include "core/off_loop.h"
#include "core/state_store.h"
#include "mad/attributes.h"
#include "mad/engine.h"
#include "mad/fan_out.h"

#include <boost/asio/executor_work_guard.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ibfabric::fabric {

struct FabricConfig {
  int shard = 0;              // this node sweeps switches whose stable_guid_hash % shards == shard
  int shards = 1;             // 1 = no sharding
  int rediscover_every = 10;  // sweeps between discoveries (1 = discover before every sweep)
  int max_hops = kMaxHops;
  // The series budget: which per-port counters are exported (metric names without the
  // ibfabric_fabric_port_ prefix and _total suffix). Empty = every counter.
  std::set<std::string> counters;
  // PortRcvErrorDetails and PortXmitDiscardDetails of every switch port: 2 more MADs a port.
  bool error_details = false;
  std::chrono::nanoseconds link_memory = std::chrono::hours(24);
  // How long a switch port that cannot be read (its queries lost) keeps the values it was last
  // read with, and a switch a discovery missed stays in the topology. 0: not at all.
  std::chrono::nanoseconds keep_unread = std::chrono::minutes(10);
};

// name "fabric", off by default, every 60s. Config keys (besides enabled and interval):
//   shard: 0, shards: 1, rediscover_every: 10, max_hops: 63,
//   counters: all | errors_and_traffic | [symbol_errors, receive_bytes, ...],
//   error_details: false, link_memory: 24h, keep_unread: 10m
CollectorSpec spec();

// The counter names `counters:` accepts, and those `errors_and_traffic` stands for.
std::vector<std::string> known_counters();
std::set<std::string> errors_and_traffic_counters();

class FabricCollector final : public Collector {
 public:
  FabricCollector(boost::asio::io_context& io,
                  std::function<std::shared_ptr<mad::Engine>()> engine_factory, FabricConfig config,
                  std::shared_ptr<const NodeNameMap> names, std::string state_directory = "");
  void collect(Done done) override;
  bool prepare_mad() override { return true; }

  // Counts a failed query under (phase, attribute) and logs once per `subject` (a switch GUID
  // or a route) and attribute when it starts failing, and again when it works.
  void note_result(const char* phase, const char* attribute,
                   const std::function<std::string()>& subject, const mad::Response& r);

 private:
  friend class Discovery;
  friend class Sweep;
  // fresh: the topology was discovered in this collection, so its PortInfo answers are used
  // instead of asking again.
  void sweep(Done done, bool fresh, bool discovery_ok, std::string discovery_error);

  // Never the engine itself (seen without: SIGSEGV on SIGTERM mid-sweep; see ClientHandle).
  // Remembers the cables discovery saw (switch end -> far end) for link_memory, so that a
  // cable that went down is still named by what was plugged in there.
  void remember_links(const Topology& topology);
  // The link memory of the state file, once, after the first discovery that found the local
  // node (`origin`) and read its port's GID prefix (`subnet`): only a file written for the
  // fabric seen from that same node, on the same subnet, is used.
  void restore_state(std::uint64_t origin, std::uint64_t subnet);
  void save_state(std::uint64_t origin, std::uint64_t subnet);
  // Compresses the label cache's info families on a thread of their own (at 50,000 switch
  // ports they are 12.5 MB of text: too long a step for the loop), then puts them in the
  // cache and calls `then` on the loop. When no thread can be started (out of threads or
  // memory), they stay as samples and `then` is called now.
  void compress_info(std::function<void()> then);
  bool exported(std::string_view metric) const;

  using TimePoint = std::chrono::steady_clock::time_point;

  // What one switch port gave, part by part, and when each part was read: a sweep's result,
  // and between sweeps the memory of every swept port (a part lost in a sweep is taken from it
  // for keep_unread).
  struct PortValues {
    std::optional<mad::PortInfo> port_info;
    std::vector<std::uint8_t> basic;                 // PortCounters data, empty: none
    std::vector<std::uint8_t> extended;              // PortCountersExtended data
    std::vector<std::vector<std::uint8_t>> details;  // mad::detail_attributes() order
    TimePoint port_info_at, basic_at, extended_at;
    std::vector<TimePoint> details_at;
  };
  // An attribute's data between sweeps: only the octets the counter decoders read (reserved
  // and unused fields are most of a PMA attribute's 192), packed without their zero octets
  // (pack_octets), in the switch's one buffer (no allocation per port and attribute), and the
  // size it is restored to, zero-filled, when used.
  struct Kept {
    std::uint32_t offset = 0;   // into SwitchMemory::bytes
    std::uint16_t covered = 0;  // octets packed there
    std::uint16_t size = 0;     // 0: nothing kept
    TimePoint at;
  };
  struct PortMemory {
    std::optional<mad::PortInfo> port_info;
    TimePoint port_info_at;
    Kept basic, extended;
    std::vector<Kept> details;
  };
  struct SwitchMemory {
    std::vector<PortMemory> ports;    // index = port number - 1
    std::vector<std::uint8_t> bytes;  // what every port's Kept parts hold
  };

  struct RememberedLink {
    std::uint64_t remote_guid = 0;
    int remote_port = 0;
    int remote_type = 0;
    std::string name, remote_name;
    std::chrono::steady_clock::time_point seen;
  };

  boost::asio::io_context& io_;
  mad::ClientHandle mad_;
  FabricConfig config_;
  std::shared_ptr<const NodeNameMap> names_;
  std::map<std::pair<std::uint64_t, int>, RememberedLink> links_seen_;

  std::shared_ptr<const Topology> topology_;  // from the last discovery that reached anything
  // What every sweep reuses until the topology or the link memory changes: the label set of
  // each swept switch port, and the node and link info families as their compressed text. Most
  // of a sweep's label text never changes; shared, the shown snapshot and the one being built
  // hold it once. Sets are added to the arena only by the first sweep of a topology (a new
  // topology gets a new cache), so no shown snapshot reads an arena that is still growing.
  struct LabelCache {
    std::shared_ptr<const Topology> topology;  // what it was built for
    std::uint64_t links_version = 0;
    std::shared_ptr<LabelArena> arena = std::make_shared<LabelArena>();
    std::map<std::uint64_t, std::vector<const LabelSet*>> ports;  // per switch: port - 1
    // Compressed by compress_info() (their samples when it could not start).
    std::shared_ptr<const MetricFamilies> info = std::make_shared<const MetricFamilies>();
  };
  LabelCache labels_;
  std::uint64_t links_version_ = 0;  // changes with links_seen_
  int sweeps_since_discovery_ = 0;
  bool rediscover_ = true;
  std::map<std::uint64_t, mad::PmaCapabilities> pma_caps_;  // per switch, until rediscovery
  // Samples per family of the last sweep: the next one reserves them (MetricsBuilder).
  MetricsBuilder::SizeHints family_sizes_;
  // The last ClassPortInfo each switch answered, kept across discoveries: used when the query
  // is lost, so that a lost MAD does not cost every counter of the switch.
  std::map<std::uint64_t, mad::PmaCapabilities> last_caps_;
  std::map<std::uint64_t, SwitchMemory> memory_;  // per swept switch
  // When each node was last found by a discovery or (a switch) answered a sweep query.
  std::map<std::uint64_t, TimePoint> last_seen_;
  std::map<std::uint64_t, std::uint64_t> switch_timeouts_;  // sweep queries timed out, per switch
  state::StateStore state_;
  bool state_loaded_ = false;
  std::optional<state::State> pending_state_;

  std::uint64_t discoveries_ = 0;
  double discovery_seconds_ = 0;
  double discovery_timestamp_ = 0;
  // (phase, attribute): string literals, and the names of mad::detail_attributes().
  mad::QueryErrors<std::pair<std::string_view, std::string_view>> errors_;
  // The compression compress_info() waits for; its thread holds only a weak pointer to it, so
  // a result that comes back after the collector went is dropped.
  struct InfoCompression {
    FabricCollector* collector;
    std::function<void()> then;
    // The loop has work while the thread runs: --once runs it until it has none.
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> busy;
  };
  std::shared_ptr<InfoCompression> info_compression_;
  OffLoop compressor_;  // last: closed before anything its results would reach goes
};

}  // namespace ibfabric::fabric
