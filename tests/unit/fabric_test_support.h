#pragma once
// What the fabric collector's unit tests (discovery_run_test.cpp, sweep_run_test.cpp)
// share: a small fat tree on the fake MAD engine (fake_fabric.h), a collector over it, one
// collection run to its end on the loop, and the exposition it gives, read as a scrape reads it
// (the node and link info families are kept compressed, so they are rendered, not inspected).

#include "collectors/fabric/fabric_collector.h"
#include "core/node_names.h"
#include "core/off_loop.h"
#include "exporters/prometheus/render.h"
#include "fake_fabric.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ibfabric::fabric_test {

using namespace std::chrono_literals;
using Guid = std::uint64_t;

// Runs the loop until `done` (the fake answers through the loop; nothing waits on a clock but
// the bound, which only a hung test reaches).
template <class Pred>
bool run_until(boost::asio::io_context& io, Pred done, std::chrono::milliseconds bound = 10s) {
  auto until = std::chrono::steady_clock::now() + bound;
  while (!done() && std::chrono::steady_clock::now() < until) {
    if (io.stopped()) io.restart();
    if (io.run_one_for(10ms) == 0) std::this_thread::sleep_for(1ms);
  }
  return done();
}

// Until no worker thread of the process runs (the info compression) and what it posted has run.
inline void settle(boost::asio::io_context& io) {
  EXPECT_TRUE(run_until(io, [] { return OffLoop::running() == 0; }));
  io.restart();
  io.poll();
}

inline std::string hex(Guid guid) { return hex_guid(guid); }

// One sample of the exposition.
struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = NAN;
};

// An exposition in text, parsed: every sample with its labels.
class Exposition {
 public:
  Exposition() = default;
  explicit Exposition(const std::string& text) : text_(text) {
    static const std::regex label(R"re((\w+)="((?:[^"\\]|\\.)*)")re");
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      Series s;
      auto brace = line.find('{');
      auto space = line.rfind(' ');
      if (brace != std::string::npos && brace < space) {
        s.name = line.substr(0, brace);
        auto body = line.substr(brace, line.rfind('}') - brace);
        for (std::sregex_iterator it(body.begin(), body.end(), label), end; it != end; ++it) {
          s.labels[(*it)[1]] = (*it)[2];
        }
      } else {
        s.name = line.substr(0, space);
      }
      s.value = std::stod(line.substr(space + 1));
      series_.push_back(std::move(s));
    }
  }
  // The samples of `name` carrying every label of `labels`.
  std::vector<Series> all(const std::string& name,
                          const std::map<std::string, std::string>& labels = {}) const {
    std::vector<Series> out;
    for (const auto& s : series_) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : labels) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) match = false;
      }
      if (match) out.push_back(s);
    }
    return out;
  }
  // The value of the one sample of `name` with `labels`; nullopt when there is none.
  std::optional<double> value(const std::string& name,
                              const std::map<std::string, std::string>& labels = {}) const {
    auto found = all(name, labels);
    if (found.empty()) return std::nullopt;
    EXPECT_EQ(found.size(), 1u) << name << " has several samples with these labels";
    return found[0].value;
  }
  // A switch port's sample of `name`.
  std::optional<double> port(const std::string& name, Guid guid, int port) const {
    return value(name, {{"node_guid", hex(guid)}, {"port", std::to_string(port)}});
  }
  // The names of every sample, once.
  std::set<std::string> names() const {
    std::set<std::string> out;
    for (const auto& s : series_) out.insert(s.name);
    return out;
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::vector<Series> series_;
};

// One collection, run to its end.
struct Collected {
  CollectResult result;
  Exposition metrics;
};

inline Collected collect(boost::asio::io_context& io, Collector& collector) {
  std::optional<CollectResult> result;
  collector.collect([&](CollectResult r) { result = std::move(r); });
  EXPECT_TRUE(run_until(io, [&] { return result.has_value(); })) << "the collection never ended";
  if (!result) return {};
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->families = result->metrics;
  return {std::move(*result), Exposition(render_text({snapshot}, {}))};
}

// A two-level fat tree: `spines` spine switches, `leaves` leaf switches, `hosts` CAs on each
// leaf. Leaf l's port s+1 goes to spine s's port l+1; leaf l's ports spines+1.. go to its hosts,
// and `spare` more ports are empty. The daemon runs on the first host of the first leaf. LIDs:
// spines 1.., leaves 101.., hosts 1001...
struct FatTree {
  static constexpr Guid kSpine = 0x0002c90200500000ull;
  static constexpr Guid kLeaf = 0x0002c90200400000ull;
  static constexpr Guid kHost = 0x0002c90300000000ull;

  FatTree(boost::asio::io_context& io, int spines_, int leaves_, int hosts_, int spare = 2)
      : spines(spines_),
        leaves(leaves_),
        hosts(hosts_),
        leaf_ports(spines_ + hosts_ + spare),
        fabric(std::make_shared<test_support::FakeFabric>(io, host(0, 0))) {
    for (int s = 0; s < spines; ++s) {
      fabric->add({spine(s), IB_NODE_SWITCH, leaves, "spine-" + std::to_string(s + 1),
                   static_cast<std::uint16_t>(1 + s)});
    }
    for (int l = 0; l < leaves; ++l) {
      fabric->add({leaf(l), IB_NODE_SWITCH, leaf_ports, "leaf-" + std::to_string(l + 1),
                   static_cast<std::uint16_t>(101 + l)});
      for (int s = 0; s < spines; ++s) fabric->cable(leaf(l), s + 1, spine(s), l + 1);
      for (int h = 0; h < hosts; ++h) {
        fabric->add({host(l, h), IB_NODE_CA, 1, host_name(l, h) + " mlx5_0",
                     static_cast<std::uint16_t>(1001 + l * 100 + h)});
        fabric->cable(leaf(l), spines + 1 + h, host(l, h), 1);
      }
    }
  }
  static Guid spine(int s) { return kSpine + 1 + static_cast<Guid>(s); }
  static Guid leaf(int l) { return kLeaf + 1 + static_cast<Guid>(l); }
  static Guid host(int l, int h) { return kHost + 0x100 * (1 + static_cast<Guid>(l)) + h; }
  static std::string host_name(int l, int h) {
    return "host-" + std::to_string(l + 1) + "-" + std::to_string(h + 1);
  }
  std::vector<Guid> switches() const {
    std::vector<Guid> out;
    for (int s = 0; s < spines; ++s) out.push_back(spine(s));
    for (int l = 0; l < leaves; ++l) out.push_back(leaf(l));
    return out;
  }
  int ports_of(Guid sw) const { return sw >= kSpine ? leaves : leaf_ports; }
  int switch_ports() const { return spines * leaves + leaves * leaf_ports; }
  std::uint16_t lid_of(Guid sw) const {
    return static_cast<std::uint16_t>(sw >= kSpine ? sw - kSpine : 100 + (sw - kLeaf));
  }
  std::function<std::shared_ptr<mad::Engine>()> engine() const {
    return [f = fabric] { return f; };
  }

  int spines, leaves, hosts, leaf_ports;
  std::shared_ptr<test_support::FakeFabric> fabric;
};

inline std::unique_ptr<fabric::FabricCollector> make_collector(boost::asio::io_context& io,
                                                               const FatTree& tree,
                                                               fabric::FabricConfig config = {}) {
  return std::make_unique<fabric::FabricCollector>(io, tree.engine(), std::move(config),
                                                   std::make_shared<const NodeNameMap>());
}

using test_support::FakeFabric;

// The requests of `attribute` the fake has seen.
inline std::vector<FakeFabric::Sent> sent(const FakeFabric& fabric,
                                          FakeFabric::Attribute attribute) {
  std::vector<FakeFabric::Sent> out;
  for (const auto& r : fabric.requests()) {
    if (r.attribute == attribute.id && (r.mgmt_class == mad::kPerfMgt) == attribute.pma) {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace ibfabric::fabric_test
