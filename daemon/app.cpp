#include "daemon/app.h"

#include "exporters/prometheus/self_metrics.h"
#include "ibfabric/version.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <yaml-cpp/yaml.h>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>

namespace ibfabric {

App::App(Options options)
    : options_(std::move(options)),
      context_(daemon_collector_context(io_, [this] { return mad_engine(); })),
      signals_(io_),
      watchdog_(io_),
      heartbeat_(io_) {
  live_metrics_.push_back(add_process_metrics);
  live_metrics_.push_back([this](MetricsBuilder& out) {
    out.counter("ibfabric_event_loop_stalls_total",
                "Times the event loop woke 10 ms or more after it was due: the process was "
                "stopped or descheduled, or a handler ran long. Probes it answered meanwhile "
                "were late.",
                {}, static_cast<double>(loop_stalls_));
    out.counter("ibfabric_event_loop_stall_seconds_total",
                "Time the event loop was late by, summed over those stalls.", {},
                loop_stall_seconds_);
  });
  live_metrics_.push_back(add_build_info);
  live_metrics_.push_back([this](MetricsBuilder& out) {
    out.counter("ibfabric_config_reloads_total", "Config reloads (SIGHUP) that were applied.", {},
                static_cast<double>(reloads_));
    out.counter("ibfabric_config_reload_failures_total",
                "Config reloads rejected because the new config was invalid; the old one runs on.",
                {}, static_cast<double>(reload_failures_));
  });
  live_metrics_.push_back([this](MetricsBuilder& out) {
    if (mad_engine_) mad_engine_->fill_metrics(out);
  });
  live_metrics_.push_back([this](MetricsBuilder& out) {
    if (!http_) return;
    const auto& stats = http_->stats();
    const char* help = "HTTP requests served by the metrics endpoint, by response code.";
    out.counter("ibfabric_http_requests_total", help, {{"code", "200"}},
                static_cast<double>(stats.ok));
    out.counter("ibfabric_http_requests_total", help, {{"code", "400"}},
                static_cast<double>(stats.bad_request));
    out.counter("ibfabric_http_requests_total", help, {{"code", "404"}},
                static_cast<double>(stats.not_found));
    out.counter("ibfabric_http_requests_total", help, {{"code", "401"}},
                static_cast<double>(stats.unauthorized));
    out.counter("ibfabric_http_requests_total", help, {{"code", "405"}},
                static_cast<double>(stats.bad_method));
    out.counter("ibfabric_http_tls_handshake_failures_total",
                "TLS handshakes that failed: plain HTTP to the TLS port, an untrusted client "
                "certificate, a protocol below the minimum version.",
                {}, static_cast<double>(stats.tls_handshake_failures));
    out.counter("ibfabric_http_requests_total", help, {{"code", "503"}},
                static_cast<double>(stats.unavailable));
    // Connection management (docs/security.md): caps, evictions, deadlines.
    using Stats = HttpServer::Stats;
    const char* rejected =
        "Connections closed at once: a cap was reached and every connection "
        "under it was busy serving a request.";
    out.counter("ibfabric_http_connections_rejected_total", rejected,
                {{"reason", HttpServer::cap_name(Stats::total_cap)}},
                static_cast<double>(stats.rejected));
    out.counter("ibfabric_http_connections_rejected_total", rejected,
                {{"reason", HttpServer::cap_name(Stats::client_cap)}},
                static_cast<double>(stats.rejected_per_client));
    for (int cap = 0; cap < Stats::kCaps; ++cap) {
      for (int phase = 0; phase < Stats::kPhases; ++phase) {
        out.counter("ibfabric_http_connections_evicted_total",
                    "Connections closed to make way for a new one at a cap, by the cap and by "
                    "what the closed one was waiting for from its client.",
                    {{"reason", HttpServer::cap_name(static_cast<Stats::Cap>(cap))},
                     {"phase", HttpServer::phase_name(static_cast<Stats::Phase>(phase))}},
                    static_cast<double>(stats.evicted[cap][phase]));
      }
    }
    const char* timeouts =
        "Connections closed at a deadline: web.tls_handshake_timeout, "
        "web.header_timeout, web.idle_timeout, or 30 s to write a response.";
    const std::pair<const char*, std::uint64_t> phases[] = {
        {"tls_handshake", stats.tls_handshake_timeouts},
        {"headers", stats.header_timeouts},
        {"idle", stats.idle_timeouts},
        {"write", stats.write_timeouts}};
    for (const auto& [phase, value] : phases) {
      out.counter("ibfabric_http_timeouts_total", timeouts, {{"phase", phase}},
                  static_cast<double>(value));
    }
    out.gauge("ibfabric_http_connections_open", "Connections open to the endpoint.", {},
              static_cast<double>(stats.open_connections));
  });
}

App::~App() = default;

DaemonConfig App::load_config() const {
  DaemonConfig config = options_.config_file
                            ? load_config_file(*options_.config_file, collector_defaults())
                            : parse_config("", "<built-in defaults>", collector_defaults());
  if (options_.listen_address) config.listen_address = *options_.listen_address;
  if (options_.web_config_file) config.web_config_file = *options_.web_config_file;
  if (options_.sysfs_root) config.sysfs_root = *options_.sysfs_root;
  if (options_.procfs_root) config.procfs_root = *options_.procfs_root;
  if (options_.node_name_map) config.node_name_map = *options_.node_name_map;
  if (options_.log_level) config.log_level = *options_.log_level;
  for (auto& collector : config.collectors) {
    if (auto it = options_.collector_enabled.find(collector.name);
        it != options_.collector_enabled.end()) {
      collector.enabled = it->second;
    }
  }
  follow_mad_probes_with_paths(config, options_.collector_enabled);
  return config;
}

void follow_mad_probes_with_paths(DaemonConfig& config, const std::map<std::string, bool>& flags) {
  CollectorConfig* probe = nullptr;
  CollectorConfig* paths = nullptr;
  for (auto& c : config.collectors) {
    if (c.name == "probe") probe = &c;
    if (c.name == "paths") paths = &c;
  }
  if (!probe || !paths || !probe->enabled || paths->section.has("enabled") ||
      flags.count("paths")) {
    return;
  }
  const YAML::Node& node = probe->section.node();
  bool over_mad = node["discover"] && node["discover"].IsScalar() &&
                  node["discover"].as<std::string>() == "true";
  if (const YAML::Node& targets = node["targets"]; targets && targets.IsSequence()) {
    for (const auto& t : targets) {
      if (t.IsMap() && !t["address"]) over_mad = true;  // {lid}, {guid} or {name}: a MAD target
    }
  }
  paths->enabled = over_mad;
}

WebConfig App::load_web(const DaemonConfig& config) {
  if (config.web_config_file.empty()) return WebConfig{};
  return load_web_config(config.web_config_file);
}

CollectorContext daemon_collector_context(
    boost::asio::io_context& io, std::function<std::shared_ptr<mad::Engine>()> mad_engine) {
  CollectorContext context{io, "/sys", std::move(mad_engine)};
  context.probe_peers = std::make_shared<probe::PeerDirectory>();
  return context;
}

mad::EngineConfig App::parse_mad_config(const DaemonConfig& config) {
  ConfigSection section =
      config.mad ? *config.mad : ConfigSection(YAML::Node(), config.source, "mad");
  return mad::parse_engine_config(section);
}

std::shared_ptr<mad::Engine> App::mad_engine() {
  // Lazily, so that a node whose collectors send no MAD never opens a umad device.
  if (!mad_engine_) mad_engine_ = mad::Engine::create(io_, mad_config_);
  return mad_engine_;
}

std::vector<std::shared_ptr<CollectorRunner>> App::build_runners(
    const DaemonConfig& config, std::shared_ptr<const NodeNameMap>& names) {
  // A context of its own, so that a rejected reload leaves the running one untouched.
  CollectorContext context = context_;
  context.sysfs_root = config.sysfs_root;
  context.procfs_root = config.procfs_root;
  if (config.state_directory) {
    context.state_directory = *config.state_directory;
  } else if (const char* env = std::getenv("STATE_DIRECTORY"); env != nullptr) {
    // systemd's StateDirectory=: a colon-separated list when the unit names several.
    context.state_directory = std::string(env).substr(0, std::string(env).find(':'));
  } else {
    context.state_directory.clear();
  }
  context.node_names = config.node_name_map ? NodeNameMap::load(*config.node_name_map, false)
                                            : NodeNameMap::load(kDefaultNodeNameMap, true);
  names = context.node_names;
  context.transmit_wait_ticks =
      std::make_shared<const std::vector<TransmitWaitTickRule>>(config.transmit_wait_ticks);
  if (context.node_names->size() > 0) {
    spdlog::info("msg=\"node-name-map loaded\" file=\"{}\" names={}", context.node_names->source(),
                 context.node_names->size());
  }
  std::vector<std::shared_ptr<CollectorRunner>> runners;
  for (auto collector : config.collectors) {
    const CollectorSpec* spec = find_collector_spec(collector.name);
    // Disabled collectors' sections are validated too, so a typo never waits for the day
    // someone enables it.
    auto built = spec->create(context, collector.section);
    if (!collector.enabled) continue;
    auto& slot = run_slots_[collector.name];
    if (!slot) slot = std::make_shared<RunSlot>();
    auto runner =
        std::make_shared<CollectorRunner>(io_, collector.name, collector.interval,
                                          collector.run_timeout, std::move(built), store_, slot);
    runner->set_fingerprint(YAML::Dump(collector.section.node()) + "\n" +
                            std::to_string(collector.interval.count()) + " " +
                            std::to_string(collector.run_timeout.count()));
    if (!options_.once) {
      runner->set_preparer([this](const std::string& name, std::shared_ptr<Snapshot> snapshot,
                                  std::function<void(SnapshotPtr)> then) {
        std::vector<std::string> live_names;
        MetricsBuilder live;
        for (const auto& fill : live_metrics_) fill(live);
        for (const auto& family : std::move(live).take()) live_names.push_back(family.name);
        auto started = std::chrono::steady_clock::now();
        exporter_.prepare(
            store_.named(), name, std::move(snapshot), std::move(live_names),
            [this, name, started, then = std::move(then)](SnapshotPtr ready) {
              boost::asio::post(io_, [this, name, started, then, ready = std::move(ready)] {
                then(ready);  // shown: the old snapshot is dropped
                exporter_.release_replaced();
                // How long scrapes got the previous snapshot after the collector published.
                spdlog::debug(
                    "exporter: snapshot prepared collector={} seconds={:.3f}", name,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                        .count());
              });
            });
      });
    }
    runners.push_back(std::move(runner));
  }
  return runners;
}

void App::apply_log_level(const std::string& level) {
  spdlog::set_level(spdlog::level::from_str(level));
}

ScrapeResponse App::scrape(const ScrapeRequest& request) {
  std::vector<std::string> collectors;
  for (const auto& runner : runners_) collectors.push_back(runner->name());
  return exporter_.scrape(request, store_.named(), collectors, live_metrics_);
}

int App::run() {
  try {
    config_ = load_config();
    apply_log_level(config_.log_level);
    mad_config_ = parse_mad_config(config_);
    web_ = load_web(config_);
    auto runners = build_runners(config_, node_names_);
    if (options_.check_config) {
      std::cout << config_.source << ": ok (" << runners.size() << " collectors enabled)\n";
      return 0;
    }
    runners_ = std::move(runners);
  } catch (const ConfigError& e) {
    if (options_.check_config) {
      std::cerr << e.what() << '\n';
    } else {
      spdlog::error("msg=\"invalid config\" error=\"{}\"", e.what());
    }
    return 2;
  }
  return options_.once ? run_once() : serve();
}

int App::run_once() {
  std::size_t pending = runners_.size();
  bool all_ok = true;
  if (pending > 0) {
    prepare_runners(
        io_, runners_, [this] { return mad_engine(); },
        [&] {
          for (auto& runner : runners_) {
            runner->run_once([&](bool success) {
              all_ok = all_ok && success;
              if (--pending == 0) io_.stop();
            });
          }
        });
    io_.run();
  }
  // Written a slice at a time, as a scrape streams it: at 50,000 switch ports the text is
  // 132 MB, which --once used to build whole first (docs/benchmarks.md).
  auto response = scrape(ScrapeRequest{});
  if (response.stream) {
    std::string slice;
    while (response.stream->next(slice)) {
      std::cout << slice;
      slice.clear();
    }
  } else {
    std::cout << response.body;
  }
  std::cout.flush();
  for (auto& runner : runners_) runner->stop();
  return all_ok ? 0 : 1;
}

std::size_t App::runs_in_flight() const {
  std::size_t busy = 0;
  for (const auto& [name, slot] : run_slots_) {
    if (slot->busy.load(std::memory_order_acquire)) ++busy;
  }
  // Also the threads of loop collectors' local-port listings (mad/port_listing.h).
  return std::max(busy, OffLoop::running());
}

int App::serve() {
  try {
    HttpServerOptions http_options;
    http_options.listen_address = config_.listen_address;
    http_options.web = web_;
    http_options.limits = config_.web_limits;
    // Ready once every enabled collector has published a snapshot, successful or not.
    http_options.not_ready = [this] {
      std::vector<std::string> waiting;
      for (const auto& runner : runners_) {
        if (!store_.published(runner->name())) waiting.push_back(runner->name());
      }
      return waiting;
    };
    http_ = std::make_unique<HttpServer>(io_, std::move(http_options),
                                         [this](const ScrapeRequest& r) { return scrape(r); });
  } catch (const std::exception& e) {
    spdlog::critical("msg=\"cannot start the metrics endpoint\" error=\"{}\"", e.what());
    return 1;
  }
  // The MAD engine's port opens (and its responder registers) before any collector runs.
  prepare_runners(
      io_, runners_, [this] { return mad_engine(); },
      [runners = runners_] {
        for (auto& runner : runners) runner->start();
      });
  arm_signals();
  arm_heartbeat(std::chrono::steady_clock::now());
  std::uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(0, &watchdog_usec) > 0) {
    arm_watchdog(std::chrono::microseconds(watchdog_usec / 2));
  }
  spdlog::info("msg=\"listening\" address={} port={} version={} config=\"{}\" collectors={}",
               config_.listen_address, http_->port(), kVersion, config_.source, runners_.size());
  sd_notify(0, "READY=1");
  io_.run();
  spdlog::info("msg=\"stopped\"");
  return 0;
}

void App::arm_signals() {
  signals_.add(SIGTERM);
  signals_.add(SIGINT);
  signals_.add(SIGHUP);
  signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    if (signal == SIGHUP) {
      reload();
      arm_signals();
      return;
    }
    spdlog::info("msg=\"stopping\" signal={}", signal == SIGTERM ? "SIGTERM" : "SIGINT");
    sd_notify(0, "STOPPING=1");
    for (auto& runner : runners_) runner->stop();
    runners_.clear();
    if (http_) http_->close();
    io_.stop();
  });
}

void App::reload() {
  sd_notify(0, "RELOADING=1");
  try {
    DaemonConfig next = load_config();
    mad::EngineConfig next_mad = parse_mad_config(next);
    WebConfig next_web = load_web(next);
    std::shared_ptr<const NodeNameMap> next_names;
    auto runners = build_runners(next, next_names);
    try {
      if (http_) http_->set_web_config(next_web);  // e.g. a renewed certificate
      if (http_) http_->set_limits(next.web_limits);
    } catch (const std::runtime_error& e) {
      throw ConfigError(e.what());
    }
    if (mad_engine_ && next_mad != mad_config_) {
      // Collectors hold the engine while MADs are in flight; swapping it under them would
      // drop answers, so its settings wait for a restart like the listen address.
      spdlog::warn("msg=\"the mad section changed; it applies after a restart\"");
    } else {
      mad_config_ = next_mad;
    }
    if (next.listen_address != config_.listen_address) {
      spdlog::warn(
          "msg=\"web.listen_address changed; it applies after a restart\" current={} "
          "new={}",
          config_.listen_address, next.listen_address);
    }
    // A collector whose inputs did not change keeps running, counters and all; one whose
    // section (or the sysfs or procfs root, state directory, node names or PortXmitWait ticks every
    // collector reads) changed is replaced, with its runner's health counters carried over. Its
    // own counters start from 0, as after a restart (docs/configuration.md, "Reloading").
    const bool same_context = next.sysfs_root == config_.sysfs_root &&
                              next.procfs_root == config_.procfs_root &&
                              next.state_directory == config_.state_directory &&
                              next.transmit_wait_ticks == config_.transmit_wait_ticks &&
                              next_names->same_names(*node_names_);
    std::vector<std::shared_ptr<CollectorRunner>> started, kept;
    for (auto& fresh : runners) {
      auto old = std::find_if(runners_.begin(), runners_.end(),
                              [&](const auto& r) { return r->name() == fresh->name(); });
      if (old != runners_.end() && same_context && (*old)->fingerprint() == fresh->fingerprint()) {
        kept.push_back(*old);
        continue;
      }
      if (old != runners_.end()) fresh->carry_health(**old);
      started.push_back(fresh);
    }
    // Before the replaced collectors stop: a new probe collector's responder then shares the
    // agent of the one it replaces, and the class is never without one.
    prepare_runners(
        io_, started, [this] { return mad_engine(); },
        [started] {
          for (auto& runner : started) runner->start();
        });
    for (auto& runner : runners_) {
      if (std::find(kept.begin(), kept.end(), runner) != kept.end()) continue;
      // A replaced collector's last snapshot stays shown until its new runner publishes.
      bool replaced = std::any_of(started.begin(), started.end(),
                                  [&](const auto& r) { return r->name() == runner->name(); });
      runner->stop(replaced);
    }
    runners_.clear();
    for (auto& fresh : runners) {
      auto it = std::find_if(kept.begin(), kept.end(),
                             [&](const auto& r) { return r->name() == fresh->name(); });
      runners_.push_back(it != kept.end() ? *it : fresh);
    }
    node_names_ = next_names;
    apply_log_level(next.log_level);
    config_ = std::move(next);
    ++reloads_;
    spdlog::info("msg=\"config reloaded\" config=\"{}\" collectors={} restarted={}", config_.source,
                 runners_.size(), started.size());
  } catch (const ConfigError& e) {
    ++reload_failures_;
    spdlog::error("msg=\"config reload rejected; the previous config keeps running\" error=\"{}\"",
                  e.what());
  }
  sd_notify(0, "READY=1");
}

namespace {
// 100 ms: ten wake-ups a second, and a stall shorter than a probe interval is still seen.
constexpr auto kHeartbeat = std::chrono::milliseconds(100);
constexpr auto kStall = std::chrono::milliseconds(10);
}  // namespace

void App::arm_heartbeat(std::chrono::steady_clock::time_point from) {
  const auto due = from + kHeartbeat;
  heartbeat_.expires_at(due);
  heartbeat_.async_wait([this, due](const boost::system::error_code& ec) {
    if (ec) return;
    auto now = std::chrono::steady_clock::now();
    auto late = now - due;
    if (late >= kStall) {
      ++loop_stalls_;
      loop_stall_seconds_ += std::chrono::duration<double>(late).count();
    }
    arm_heartbeat(now);
  });
}

void App::arm_watchdog(std::chrono::microseconds period) {
  // Pinged from the loop itself, so a stuck loop is what systemd sees and restarts.
  sd_notify(0, "WATCHDOG=1");
  watchdog_.expires_after(period);
  watchdog_.async_wait([this, period](const boost::system::error_code& ec) {
    if (!ec) arm_watchdog(period);
  });
}

}  // namespace ibfabric
