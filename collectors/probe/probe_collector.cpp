#include "collectors/probe/probe_collector.h"

#include "collectors/probe/probe_plan_client.h"

#include "collectors/probe/probe_run.h"
#include "config/config.h"
#include "core/stable_hash.h"
#include "mad/engine.h"
#include "mad/port_listing.h"

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace ibfabric::probe {
namespace {

namespace asio = boost::asio;

constexpr std::uint8_t kMagic[4] = {'I', 'B', 'F', 'P'};

void put(std::uint8_t* p, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v & 0xff);
}
std::uint64_t get(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

// What the runner calls. The probing, and the config the spec read, are the prober's (probe_run.h),
// which outlives every collection; the collector keeps the port listing, run off the loop in
// each collection before the prober's MAD work.
class ProbeCollector final : public Collector {
 public:
  ProbeCollector(asio::io_context& io, ProbeConfig config,
                 std::function<std::shared_ptr<mad::Engine>()> mad_engine,
                 std::shared_ptr<const NodeNameMap> node_names,
                 std::shared_ptr<PeerDirectory> directory)
      : prober_(std::make_shared<ProbeRun>(io, std::move(config), std::move(mad_engine),
                                           std::move(node_names), std::move(directory))),
        listing_(io, mad::PortListing::infiniband({})) {}
  ~ProbeCollector() override { prober_->stop(); }
  bool prepare_mad() override { return prober_->prepare_mad(); }

  void collect(Done done) override {
    prober_->start();
    prober_->rotate();
    if (!prober_->uses_mad()) {
      finish(std::move(done));
      return;
    }
    // Listed off the loop: libibumad's sysfs reads can block on the HCA. A failed listing
    // fails the collection but not the UDP probes, whose series are still published.
    listing_.list([this, done = std::move(done)](std::optional<std::vector<mad::LocalPort>> ports,
                                                 std::string error) mutable {
      prober_->refresh_mad(ports, error);
      finish(std::move(done));
    });
  }

 private:
  void finish(Done done) {
    MetricsBuilder out;
    CollectResult result;
    prober_->fill(out, result);
    result.metrics = std::move(out).take();
    done(std::move(result));
  }

  std::shared_ptr<ProbeRun> prober_;
  mad::PortListing listing_;
};

}  // namespace

std::optional<Message> decode(const std::uint8_t* data, std::size_t size) {
  if (size < kHeaderBytes || !std::equal(kMagic, kMagic + 4, data) || data[4] != 1) {
    return std::nullopt;
  }
  if (data[5] != 1 && data[5] != 2) return std::nullopt;
  Message m;
  m.reply = data[5] == 2;
  m.sequence = static_cast<std::uint32_t>(get(data + 8, 4));
  m.token = get(data + 12, 8);
  m.hold_ns = get(data + 20, 8);
  return m;
}

void encode(const Message& m, std::uint8_t* data) {
  std::copy(kMagic, kMagic + 4, data);
  data[4] = 1;
  data[5] = m.reply ? 2 : 1;
  data[6] = data[7] = 0;
  put(data + 8, m.sequence, 4);
  put(data + 12, m.token, 8);
  put(data + 20, m.hold_ns, 8);
}

std::vector<TargetConfig> choose_peers(const std::string& self, std::vector<TargetConfig> targets,
                                       std::size_t max_peers, std::uint64_t slot) {
  if (targets.size() <= max_peers) return targets;
  std::stable_sort(targets.begin(), targets.end(), [&](const auto& a, const auto& b) {
    return fnv1a(self + "|" + a.name) < fnv1a(self + "|" + b.name);
  });
  std::size_t start =
      static_cast<std::size_t>((slot % targets.size()) * max_peers % targets.size());
  std::rotate(targets.begin(), targets.begin() + static_cast<std::ptrdiff_t>(start), targets.end());
  targets.resize(max_peers);
  return targets;
}

std::uint64_t rotation_slot(std::chrono::nanoseconds rotate_every,
                            std::chrono::system_clock::time_point now) {
  if (rotate_every.count() <= 0) return 0;
  return static_cast<std::uint64_t>(now.time_since_epoch() / rotate_every);
}

namespace {

// One entry of `targets`: {address, name} (UDP) or {lid | guid | name} (MAD).
TargetConfig parse_target(ConfigSection& t) {
  TargetConfig target;
  target.address = t.get_string("address", "");
  target.lid = static_cast<std::uint16_t>(t.get_int("lid", 0, 0, 0xbfff));
  std::string guid = t.get_string("guid", "");
  std::string name = t.get_string("name", "");
  // With an address (UDP), lid or guid name the peer's InfiniBand port: not where probes go,
  // but what the paths collector traces the route to.
  if (target.lid && !guid.empty()) {
    t.fail("guid", "a target names its InfiniBand port by lid or by guid, not both");
  }
  if (target.address.empty() && !target.lid && guid.empty() && name.empty()) {
    t.fail("address",
           "a target needs an address (IP:PORT, UDP) or a lid, guid or name (node "
           "description, MAD)");
  }
  if (!guid.empty()) {
    char* end = nullptr;
    errno = 0;
    target.guid = std::strtoull(guid.c_str(), &end, 16);
    if (errno != 0 || end == guid.c_str() || *end != '\0' || target.guid == 0) {
      t.fail("guid", "\"" + guid + "\" is not a port GUID (0x followed by 16 hex digits)");
    }
  }
  if (!target.address.empty()) {
    try {
      parse_endpoint(target.address);
    } catch (const std::exception& e) {
      t.fail("address", e.what());
    }
    target.name = name.empty() ? target.address : name;
  } else if (target.guid != 0) {
    target.name = name.empty() ? hex_guid(target.guid) : name;
  } else if (target.lid != 0) {
    target.name = name.empty() ? "lid " + std::to_string(target.lid) : name;
  } else {
    target.node_description = name;
    target.name = name;
  }
  t.finish();
  return target;
}

}  // namespace

CollectorSpec spec() {
  return CollectorSpec{
      "probe", false, std::chrono::seconds(5),
      [](CollectorContext& context, ConfigSection& section) -> std::unique_ptr<Collector> {
        ProbeConfig c;
        c.udp_listen = section.get_string("udp_listen", c.udp_listen);
        if (!c.udp_listen.empty()) {
          try {
            parse_endpoint(c.udp_listen);
          } catch (const std::exception& e) {
            section.fail("udp_listen", e.what());
          }
        }
        c.mad_responder = section.get_bool("mad_responder", c.mad_responder);
        c.mad_responder_max_per_second = section.get_double("mad_responder_max_per_second",
                                                            c.mad_responder_max_per_second, 1, 1e6);
        c.discover = section.get_bool("discover", c.discover);
        c.resolve_interval =
            section.get_duration("resolve_interval", c.resolve_interval, std::chrono::seconds(1));
        for (auto& t : section.get_section_list("targets")) {
          c.targets.push_back(parse_target(t));
        }
        c.probe_interval =
            section.get_duration("probe_interval", c.probe_interval, std::chrono::milliseconds(1));
        c.timeout = section.get_duration("timeout", c.timeout, std::chrono::milliseconds(1));
        c.payload_bytes = static_cast<std::size_t>(section.get_int(
            "payload_bytes", static_cast<std::int64_t>(c.payload_bytes), kHeaderBytes, 8192));
        c.max_peers = static_cast<std::size_t>(
            section.get_int("max_peers", static_cast<std::int64_t>(c.max_peers), 1, 4096));
        c.rotate_every =
            section.get_duration("rotate_every", c.rotate_every, std::chrono::nanoseconds{0});
        c.max_probes_per_second =
            section.get_double("max_probes_per_second", c.max_probes_per_second, 0.1, 100000);
        c.plan_url = section.get_string("plan_url", c.plan_url);
        if (!c.plan_url.empty()) {
          try {
            check_plan_url(c.plan_url);
          } catch (const std::invalid_argument& e) {
            section.fail("plan_url", e.what());
          }
        }
        c.plan_interval =
            section.get_duration("plan_interval", c.plan_interval, std::chrono::seconds(1));
        c.window = static_cast<std::size_t>(
            section.get_int("window", static_cast<std::int64_t>(c.window), 1, 100000));
        c.spike.multiplier = section.get_double("spike_multiplier", c.spike.multiplier, 1, 1000);
        c.spike.floor = section.get_duration("spike_floor", c.spike.floor);
        c.spike.baseline_window = static_cast<std::size_t>(section.get_int(
            "baseline_window", static_cast<std::int64_t>(c.spike.baseline_window), 1, 100000));
        section.finish();
        return std::make_unique<ProbeCollector>(context.io, std::move(c), context.mad_engine,
                                                context.node_names, context.probe_peers);
      }};
}

}  // namespace ibfabric::probe
