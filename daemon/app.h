#pragma once
// The daemon: config, collectors on their timers, the HTTP endpoint, signals and systemd.

#include "collectors/registry.h"
#include "config/config.h"
#include "core/node_names.h"
#include "core/snapshot_store.h"
#include "daemon/collector_runner.h"
#include "daemon/options.h"
#include "exporters/prometheus/http_server.h"
#include "exporters/prometheus/render.h"
#include "mad/engine.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ibfabric {

// Paths follow MAD probing: whoever probes peers over MAD (a {lid}, {guid} or {name} target,
// or `discover: true`) gets their paths traced and their peers named, which localization needs,
// unless the config (`paths: {enabled: ...}`) or a flag (`--[no-]collector.paths`) decides.
void follow_mad_probes_with_paths(DaemonConfig& config, const std::map<std::string, bool>& flags);

// The context the daemon builds its collectors with, for its life (reloads keep it): the MAD
// engine from `mad_engine` on first use, and the channel from the probe collector to the paths
// collector (CollectorContext::probe_peers), the one place two collectors meet.
CollectorContext daemon_collector_context(boost::asio::io_context& io,
                                          std::function<std::shared_ptr<mad::Engine>()> mad_engine);

class App {
 public:
  explicit App(Options options);
  ~App();

  // Exit codes: 0 ok, 1 a collector failed (--once) or runtime error, 2 bad flags or config.
  int run();
  // Worker threads that have not returned (a collector run or a port listing stuck in a read:
  // at least the collectors whose last run has not returned). The caller should
  // then end the process without destructors (std::_Exit): such a thread still uses the
  // collector it holds and cannot be joined or cancelled.
  std::size_t runs_in_flight() const;

 private:
  DaemonConfig load_config() const;  // the file (or defaults) with the flags applied
  // Builds every enabled collector from `config`, with the node names it loaded in `names`;
  // throws ConfigError.
  std::vector<std::shared_ptr<CollectorRunner>> build_runners(
      const DaemonConfig& config, std::shared_ptr<const NodeNameMap>& names);
  // The `mad:` section of `config` (defaults when absent); throws ConfigError.
  static mad::EngineConfig parse_mad_config(const DaemonConfig& config);
  std::shared_ptr<mad::Engine> mad_engine();  // created on first use
  // The web config file named by `config` (plain HTTP when none); throws ConfigError.
  static WebConfig load_web(const DaemonConfig& config);
  ScrapeResponse scrape(const ScrapeRequest& request);
  void apply_log_level(const std::string& level);

  int check_config();
  int run_once();
  int serve();
  void reload();
  void arm_signals();
  void arm_watchdog(std::chrono::microseconds period);
  void arm_heartbeat(std::chrono::steady_clock::time_point from);

  Options options_;
  boost::asio::io_context io_;
  SnapshotStore store_;
  CollectorContext context_;
  mad::EngineConfig mad_config_;
  std::shared_ptr<mad::Engine> mad_engine_;
  std::vector<std::shared_ptr<CollectorRunner>> runners_;
  std::shared_ptr<const NodeNameMap> node_names_;  // what runners_ were built with
  // Per collector name, kept across reloads: one outstanding run per collector, ever.
  std::map<std::string, std::shared_ptr<RunSlot>> run_slots_;
  std::vector<LiveMetrics> live_metrics_;
  Exporter exporter_;
  std::unique_ptr<HttpServer> http_;
  DaemonConfig config_;
  WebConfig web_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer watchdog_;
  // Wakes the loop every kHeartbeat to see how late it is: a stopped or descheduled daemon
  // answers probes late without its responder's hold time showing it (docs/design.md).
  boost::asio::steady_timer heartbeat_;
  std::uint64_t loop_stalls_ = 0;
  double loop_stall_seconds_ = 0;
  std::uint64_t reloads_ = 0, reload_failures_ = 0;
};

}  // namespace ibfabric
