#include "collectors/fabric/fabric_collector.h"

#include "collectors/fabric/discovery_run.h"
#include "collectors/fabric/sweep_run.h"
#include "core/text_format.h"

#include <malloc.h>
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <optional>
#include <utility>

namespace ibfabric::fabric {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

FabricCollector::FabricCollector(boost::asio::io_context& io,
                                 std::function<std::shared_ptr<mad::Engine>()> mad_engine,
                                 FabricConfig config, std::shared_ptr<const NodeNameMap> names,
                                 std::string state_directory)
    : io_(io),
      kept_(io, std::move(mad_engine), std::move(config), std::move(names),
            std::move(state_directory)),
      compressor_(io) {}

void FabricCollector::compress_info(TopologyInfo info, std::function<void()> then) {
  auto job = std::make_shared<InfoCompression>(
      InfoCompression{this, std::move(then), boost::asio::make_work_guard(io_)});
  std::weak_ptr<InfoCompression> weak = job;
  auto source = std::make_shared<const TopologyInfo>(std::move(info));
  auto error = compressor_.start([source, weak]() -> OffLoop::Then {
    auto started = Clock::now();
    auto compressed = topology_info_compressed(*source, kTopologyInfoPart);
    std::size_t bytes = 0;
    for (const auto& family : compressed) bytes += family.text->deflated.size();
    // The heap this thread's arena took goes back to the kernel: glibc keeps it otherwise,
    // under the sweep that follows (0.5 MiB at 5,580 switch ports).
    malloc_trim(0);
    return [weak, compressed = std::move(compressed), bytes,
            seconds = seconds_since(started)]() mutable {
      auto job = weak.lock();
      if (!job) return;
      spdlog::debug("fabric: node and link info compressed bytes={} seconds={:.3f}", bytes,
                    seconds);
      auto& c = *job->collector;
      c.kept_.labels.info = std::make_shared<const MetricFamilies>(std::move(compressed));
      c.info_compression_.reset();
      job->then();
    };
  });
  if (!error.empty()) {
    spdlog::warn(
        "fabric: node and link info kept uncompressed, which holds more memory until the next "
        "topology: {}",
        error);
    info_compression_.reset();  // an earlier topology's, if one were pending: it must not land
    kept_.labels.info = std::make_shared<const MetricFamilies>(topology_info_samples(*source));
    job->then();
    return;
  }
  info_compression_ = std::move(job);
}

namespace {
std::vector<std::shared_ptr<const DeflatedText>> deflate_part(MetricFamilies& part,
                                                              const std::vector<char>& headers) {
  Deflater deflater;
  std::string text;
  std::vector<std::shared_ptr<const DeflatedText>> pieces;
  for (std::size_t i = 0; i < part.size(); ++i) {
    pieces.push_back(deflate_family(part[i], deflater, text, headers.at(i) != 0));
    release_samples(part[i]);
  }
  return pieces;
}
}  // namespace

void FabricCollector::compress_part(
    MetricFamilies part, std::vector<char> headers,
    std::function<void(std::vector<std::shared_ptr<const DeflatedText>>)> then) {
  auto job = std::make_shared<PartCompression>(
      PartCompression{this, std::move(then), boost::asio::make_work_guard(io_)});
  part_compression_ = job;
  std::weak_ptr<PartCompression> weak = job;
  auto land = [weak](std::vector<std::shared_ptr<const DeflatedText>> pieces) {
    auto job = weak.lock();
    if (!job) return;
    auto then = std::move(job->then);
    job->collector->part_compression_.reset();
    then(std::move(pieces));
  };
  auto shared = std::make_shared<MetricFamilies>(std::move(part));
  auto error = compressor_.start([shared, headers, land]() -> OffLoop::Then {
    return [land, pieces = deflate_part(*shared, headers)]() mutable { land(std::move(pieces)); };
  });
  if (error.empty()) return;
  spdlog::warn("fabric: a part of the sweep's result is compressed on the event loop: {}", error);
  boost::asio::post(
      io_, [land, pieces = deflate_part(*shared, headers)]() mutable { land(std::move(pieces)); });
}

void FabricCollector::restore_state(std::uint64_t origin, std::uint64_t subnet) {
  // Not before the subnet is known (the local PortInfo may have been lost).
  if (!pending_state_ || !subnet) return;
  auto saved = std::move(*pending_state_);
  pending_state_.reset();
  if (saved.origin != origin) {
    kept_.state.reject("written for the fabric as seen from node " + hex_guid(saved.origin) +
                       ", this daemon's node is " + hex_guid(origin));
    return;
  }
  for (const auto& l : saved.links) {
    if (l.subnet != subnet) {
      kept_.state.reject("written for subnet " + hex_guid(l.subnet) + ", this port's is " +
                         hex_guid(subnet));
      return;
    }
  }
  std::vector<Clock::time_point> seen;
  seen.reserve(saved.links.size());
  for (const auto& l : saved.links) seen.push_back(state::to_steady(l.seen));
  // What discovery has just seen is newer.
  auto restored =
      kept_.links_seen.restore(saved.links, seen, Clock::now(), kept_.config.link_memory);
  ++kept_.links_version;
  kept_.state.set_restored(restored);
}

void FabricCollector::save_state(std::uint64_t origin, std::uint64_t subnet) {
  if (!kept_.state.accepts() || !subnet) return;
  state::StateText text("fabric", origin, state::unix_now(), kept_.links_seen.size());
  for (const auto& link : kept_.links_seen.links()) {
    text.add(state::LinkRecord{subnet, "", link.guid, link.port, link.remote_guid, link.remote_port,
                               link.remote_type, state::to_unix(link.seen),
                               kept_.links_seen.name(link.guid),
                               kept_.links_seen.name(link.remote_guid)});
  }
  kept_.state.save_text(std::move(text).finish());
}

void FabricCollector::remember_links(const Topology& topology) {
  kept_.links_seen.remember(topology, *kept_.names, Clock::now(), kept_.config.link_memory);
  ++kept_.links_version;
}

void FabricCollector::collect(Done done) {
  if (!state_loaded_) {
    state_loaded_ = true;
    pending_state_ = kept_.state.load();
  }
  auto engine = kept_.mad.engine();
  if (!engine) {
    done(CollectResult{{}, false, "no MAD engine"});
    return;
  }
  if (!kept_.rediscover && kept_.topology &&
      kept_.sweeps_since_discovery < kept_.config.rediscover_every) {
    sweep(std::move(done), false, true, "");
    return;
  }
  auto started = Clock::now();
  auto discovery = std::make_shared<DiscoveryRun>(kept_, [this, started, done = std::move(done)](
                                                             std::shared_ptr<Topology> topology,
                                                             int failed) mutable {
    kept_.discovery_seconds = seconds_since(started);
    ++kept_.discoveries;
    auto now = Clock::now();
    // Keep the last topology when this one is empty: the switches of a fabric that does
    // not answer now still exist, and sweeping them counts their failures. Under MAD loss the
    // local node's own NodeInfo can be lost too (the simulator drops directed-route SMPs at the
    // local port); with a topology known, the sweep says whether the fabric answers, and the
    // next collection discovers again.
    if (topology->nodes().empty()) {
      if (kept_.topology && kept_.config.keep_unread.count() > 0) {
        kept_.rediscover = true;
        sweep(std::move(done), false, true, "");
        return;
      }
      sweep(std::move(done), false, false,
            "discovery failed: the local node did not answer NodeInfo");
      return;
    }
    if (kept_.topology) {
      // A lost MAD must not rename a node, take a switch's LID or forget a switch.
      topology->fill_unanswered(*kept_.topology);
      if (failed > 0 && kept_.config.keep_unread.count() > 0) {
        topology->carry_missed(*kept_.topology, [&](std::uint64_t guid) {
          auto it = kept_.last_seen.find(guid);
          return it != kept_.last_seen.end() && now - it->second <= kept_.config.keep_unread;
        });
      }
    }
    if (topology->count(IB_NODE_SWITCH) == 0) {
      sweep(std::move(done), false, false,
            "discovery found no switch (is the local port's link down?)");
      return;
    }
    kept_.discovery_timestamp =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::size_t carried = 0;
    for (const auto& [guid, node] : topology->nodes()) {
      if (node.carried) {
        ++carried;
      } else {
        kept_.last_seen[guid] = now;
      }
    }
    auto gone = [&](const auto& entry) { return !topology->find(entry.first); };
    std::erase_if(kept_.last_seen, gone);
    std::erase_if(kept_.memory, gone);
    std::erase_if(kept_.last_caps, gone);
    std::erase_if(kept_.switch_timeouts, gone);
    if (carried) {
      spdlog::debug("fabric: discovery lost {} queries; kept {} nodes it did not find", failed,
                    carried);
    }
    kept_.topology = std::move(topology);
    ++kept_.topology_version;
    remember_links(*kept_.topology);
    std::optional<std::pair<std::uint64_t, std::uint64_t>> save;  // (origin, subnet)
    for (const auto& [guid, node] : kept_.topology->nodes()) {
      if (!node.route.empty() || node.carried) continue;
      restore_state(guid, kept_.topology->subnet_prefix);
      save = {guid, kept_.topology->subnet_prefix};
      break;
    }
    kept_.pma_caps.clear();
    kept_.rediscover = false;
    kept_.sweeps_since_discovery = 0;
    spdlog::debug("fabric: discovery done switches={} cas={} cables={} seconds={:.3f}",
                  kept_.topology->count(IB_NODE_SWITCH), kept_.topology->count(IB_NODE_CA),
                  kept_.topology->cable_count(), kept_.discovery_seconds);
    if (save) {
      // The state file's text (about 128 octets a cable) is built once this sweep's result is
      // out and the last topology freed: built here, beside both topologies, it made the
      // daemon's peak at 50,000 switch ports.
      done = [this, done = std::move(done), save = *save](CollectResult result) {
        done(std::move(result));
        save_state(save.first, save.second);
      };
    }
    sweep(std::move(done), true, true, "");
  });
  discovery->start();
}

void FabricCollector::sweep(Done done, bool fresh, bool discovery_ok, std::string discovery_error) {
  auto topology = kept_.topology ? kept_.topology : std::make_shared<const Topology>();
  auto s = std::make_shared<SweepRun>(
      kept_, std::move(topology), fresh, std::move(done), discovery_ok, std::move(discovery_error),
      [this](TopologyInfo info, std::function<void()> then) {
        compress_info(std::move(info), std::move(then));
      },
      [this](MetricFamilies part, std::vector<char> headers,
             std::function<void(SweepRun::Pieces)> then) {
        compress_part(std::move(part), std::move(headers), std::move(then));
      });
  s->start();
}

void FabricState::note_result(const char* phase, const char* attribute,
                              const std::function<std::string()>& subject, const mad::Response& r) {
  errors.note(r, {phase, attribute}, [&] {
    return fmt::format("phase={} attribute={} subject=\"{}\"", phase, attribute, subject());
  });
}

namespace {
std::string counter_key(std::string_view metric) {
  if (metric.ends_with("_total")) metric.remove_suffix(6);
  return std::string(metric);
}
}  // namespace

std::vector<std::string> known_counters() {
  std::vector<std::string> out;
  for (const auto& def : mad::counter_defs()) out.push_back(counter_key(def.metric));
  for (const auto& attribute : mad::detail_attributes()) {
    for (const auto& def : attribute.counters) out.push_back(counter_key(def.metric));
  }
  return out;
}

std::set<std::string> errors_and_traffic_counters() {
  using K = mad::CounterDef::Kind;
  std::set<std::string> out;
  for (const auto& def : mad::counter_defs()) {
    if (def.kind != K::ietf) out.insert(counter_key(def.metric));
  }
  for (const auto& attribute : mad::detail_attributes()) {
    for (const auto& def : attribute.counters) out.insert(counter_key(def.metric));
  }
  return out;
}

CollectorSpec spec() {
  return CollectorSpec{
      "fabric", false, std::chrono::seconds(60),
      [](CollectorContext& context, ConfigSection& section) -> std::unique_ptr<Collector> {
        FabricConfig c;
        c.shards = static_cast<int>(section.get_int("shards", c.shards, 1, 4096));
        c.shard = static_cast<int>(section.get_int("shard", c.shard, 0, 4095));
        c.rediscover_every =
            static_cast<int>(section.get_int("rediscover_every", c.rediscover_every, 1, 1000000));
        c.max_hops = static_cast<int>(section.get_int("max_hops", c.max_hops, 1, kMaxHops));
        c.error_details = section.get_bool("error_details", c.error_details);
        c.vl_transmit_wait = section.get_bool("vl_transmit_wait", c.vl_transmit_wait);
        c.link_memory = section.get_duration("link_memory", c.link_memory);
        c.keep_unread =
            section.get_duration("keep_unread", c.keep_unread, std::chrono::nanoseconds{0});
        if (section.has("counters") && section.node()["counters"].IsSequence()) {
          auto known = known_counters();
          for (const auto& name : section.get_string_list("counters")) {
            if (std::find(known.begin(), known.end(), name) == known.end()) {
              std::string list;
              for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
              section.fail("counters", "unknown counter \"" + name + "\"; known: " + list);
            }
            c.counters.insert(name);
          }
          if (c.counters.empty()) section.fail("counters", "the list names no counter");
        } else if (section.get_enum("counters", "all", {"all", "errors_and_traffic"}) ==
                   "errors_and_traffic") {
          c.counters = errors_and_traffic_counters();
        }
        if (c.shard >= c.shards) {
          section.fail("shard", "shard " + std::to_string(c.shard) + " must be less than shards " +
                                    std::to_string(c.shards));
        }
        section.finish();
        c.transmit_wait_ticks = *context.transmit_wait_ticks;
        return std::make_unique<FabricCollector>(context.io, context.mad_engine, std::move(c),
                                                 context.node_names, context.state_directory);
      }};
}

}  // namespace ibfabric::fabric
