#pragma once
// The `paths` collector: the route of every probe through the fabric, as `ibtracert` finds it.
// For each peer the `probe` collector probes whose InfiniBand port (LID) is known, it follows
// the switches' linear forwarding tables hop by hop with directed-route SMPs: the probe's leg
// (this node -> peer, by the peer's LID) and the answer's (peer -> this node, by this node's
// LID, from the peer's leaf on). It exports every cable of both legs as an info series, so that
// rules can join per-pair loss and spikes with the cables the pairs cross (localization).
// What it learns is cached across runs (LFT blocks are shared by 64 LIDs, switches by many
// peers) and verified when the SM shows activity; MADs per run are bounded.
// Metrics and keys: docs/collectors.md, "Collector `paths`".

#include "collectors/collector.h"
#include "collectors/paths/paths_run.h"
#include "mad/engine.h"

#include <chrono>
#include <cstdint>
#include <memory>

namespace ibfabric::paths {

struct PathsConfig {
  // Every path is traced again from scratch (nodes and tables re-read) at least this often.
  std::chrono::nanoseconds refresh = std::chrono::hours(1);
  // The forwarding-table blocks the paths use are read again when the master SM's activity
  // count has moved, at most this often.
  std::chrono::nanoseconds verify_every = std::chrono::minutes(1);
  int max_mads_per_run = 1000;
  int max_hops = 32;  // cables per leg
};

// name "paths", off by default, every 30s. Its keys are read in spec() and documented in
// docs/configuration.md, "Collector `paths`" (tests/unit/config_keys_test.cpp ties the two).
CollectorSpec spec();

// Keeps what lives across runs (PathsState) and builds a PathsRun per collection.
class PathsCollector final : public Collector {
 public:
  PathsCollector(CollectorContext& context, PathsConfig config)
      : mad_(context.mad_engine),
        // Nothing wired: no peer to trace.
        peers_(context.probe_peers ? context.probe_peers
                                   : std::make_shared<const probe::PeerDirectory>()),
        names_(context.node_names),
        config_(config) {}
  void collect(Done done) override;
  bool prepare_mad() override { return true; }

 private:
  mad::ClientHandle mad_;
  std::shared_ptr<const probe::PeerDirectory> peers_;
  std::shared_ptr<const NodeNameMap> names_;
  PathsConfig config_;
  PathsState state_;
};

}  // namespace ibfabric::paths
