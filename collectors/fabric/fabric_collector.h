#pragma once
// The `fabric` collector: discovers the whole fabric (switches, CAs, links) by a directed-route
// breadth-first search from the engine's default port, then sweeps PortInfo and the PMA
// counters of every port of every switch of this node's shard. Everything goes through the
// shared MAD engine, all requests pipelined; the engine's caps and rate limit pace them.
// Metrics and config keys: docs/collectors.md, "Collector `fabric`".
//
// The per-run state machines are DiscoveryRun (discovery_run.h) and SweepRun (sweep_run.h).
// This class keeps what lives across runs (FabricState, fabric_state.h), starts the runs, decides
// what a discovery's topology replaces, keeps the link memory and its state file, and holds the
// spec.

#include "collectors/collector.h"
#include "collectors/fabric/fabric_model.h"
#include "collectors/fabric/fabric_state.h"
#include "collectors/fabric/topology_info.h"
#include "core/off_loop.h"
#include "ib/state_file.h"
#include "mad/engine.h"

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

// name "fabric", off by default, every 60s. Its keys are read in spec() and documented in
// docs/configuration.md, "Collector `fabric`" (tests/unit/config_keys_test.cpp ties the two).
CollectorSpec spec();

// The counter names `counters:` accepts, and those `errors_and_traffic` stands for.
std::vector<std::string> known_counters();
std::set<std::string> errors_and_traffic_counters();

class FabricCollector final : public Collector {
 public:
  FabricCollector(boost::asio::io_context& io,
                  std::function<std::shared_ptr<mad::Engine>()> mad_engine, FabricConfig config,
                  std::shared_ptr<const NodeNameMap> names, std::string state_directory = "");
  void collect(Done done) override;
  bool prepare_mad() override { return true; }

 private:
  // Starts a SweepRun of the last topology. fresh: the topology was discovered in this
  // collection, so its PortInfo answers are used instead of asking again.
  void sweep(Done done, bool fresh, bool discovery_ok, std::string discovery_error);

  // Remembers the cables discovery saw (switch end -> far end) for link_memory, so that a
  // cable that went down is still named by what was plugged in there.
  void remember_links(const Topology& topology);
  // The link memory of the state file, once, after the first discovery that found the local
  // node (`origin`) and read its port's GID prefix (`subnet`): only a file written for the
  // fabric seen from that same node, on the same subnet, is used.
  void restore_state(std::uint64_t origin, std::uint64_t subnet);
  void save_state(std::uint64_t origin, std::uint64_t subnet);
  // Makes the label cache's info families of `info` and compresses them on a thread of their
  // own (at 50,000 switch ports they are 12.5 MB of text: too long a step for the loop), then
  // puts them in the cache and calls `then` on the loop. When no thread can be started (out
  // of threads or memory), they are made as samples on the loop and `then` is called now.
  void compress_info(TopologyInfo info, std::function<void()> then);
  // Compresses a part of a sweep's families on a thread of its own (each family's samples are
  // freed there as soon as it is compressed), then calls `then` on the loop with their texts
  // (SweepRun::CompressPart). When no thread can be started, compresses on the loop: a part is
  // bounded (FabricConfig::seal_samples).
  void compress_part(MetricFamilies part, std::vector<char> headers,
                     std::function<void(std::vector<std::shared_ptr<const DeflatedText>>)> then);

  boost::asio::io_context& io_;
  // Everything the runs read and update: the topology, the label cache, the link memory, the
  // last values for keep_unread, the state store, the error counters.
  FabricState kept_;
  bool state_loaded_ = false;
  std::optional<state::State> pending_state_;

  // The compression compress_info() waits for; its thread holds only a weak pointer to it, so
  // a result that comes back after the collector went is dropped.
  struct InfoCompression {
    FabricCollector* collector;
    std::function<void()> then;
    // The loop has work while the thread runs: --once runs it until it has none.
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> busy;
  };
  std::shared_ptr<InfoCompression> info_compression_;
  // Likewise for the part of a sweep being compressed (one at a time).
  struct PartCompression {
    FabricCollector* collector;
    std::function<void(std::vector<std::shared_ptr<const DeflatedText>>)> then;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> busy;
  };
  std::shared_ptr<PartCompression> part_compression_;
  OffLoop compressor_;  // last: closed before anything its results would reach goes
};

}  // namespace ibfabric::fabric
