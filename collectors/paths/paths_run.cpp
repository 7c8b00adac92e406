// The tracing: which tables and nodes are asked to follow each probed peer's two legs hop by
// hop, and when a traced path is stale. What a run reports of the paths is paths_emit.cpp's.
#include "collectors/paths/paths_run.h"

#include "collectors/paths/paths_collector.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace ibfabric::paths {

CableEnds cable_ends(const Hop& hop) {
  bool from_switch = hop.from_type == IB_NODE_SWITCH;
  bool to_switch = hop.to_type == IB_NODE_SWITCH;
  bool from_is_a = from_switch != to_switch ? from_switch
                                            : std::pair(hop.from_guid, hop.from_port) <
                                                  std::pair(hop.to_guid, hop.to_port);
  if (from_is_a) return {hop.from_guid, hop.from_port, hop.to_guid, hop.to_port, true};
  return {hop.to_guid, hop.to_port, hop.from_guid, hop.from_port, false};
}

namespace {

// Why a leg could not be traced: the `reason` label of ibfabric_path_untraced.
constexpr const char* kNoRoute = "no_route";  // a switch's table has no port for the LID
constexpr const char* kNoAnswer = "no_answer";
constexpr const char* kHopLimit = "hop_limit";
constexpr const char* kLoop = "loop";
constexpr const char* kWrongDestination = "wrong_destination";
// Not a failure: the run's MAD budget ran out first; the leg is traced in a later run.
constexpr const char* kDeferred = "deferred";

// What a trace of one peer produces: both legs, the tables it read, or why it stopped.
struct TraceResult {
  LegState to_peer, from_peer;
  std::set<BlockKey> blocks;
  bool deferred = false;
};

}  // namespace

struct PathsRun::Trace {
  PeerKey key;
  std::uint16_t dlid = 0;
  bool forward = true;  // the to_peer leg; then from_peer
  Route route;          // to the node the next hop leaves from
  Hop pending;          // the hop being followed (its receiving end unknown yet)
  std::vector<Hop> hops;
  std::set<std::uint64_t> switches;  // visited on this leg
  TraceResult result;
  Route peer_route;  // where the peer was found (the answer's leg starts there)
  std::uint64_t peer_guid = 0;
};

PathsRun::PathsRun(mad::ClientHandle& mad, const PathsConfig& config, PathsState& state,
                   const probe::PeerDirectory& peers, const NodeNameMap& names,
                   Collector::Done done)
    : FanOut(mad),
      config_(config),
      s_(state),
      peers_(peers),
      names_(names),
      done_(std::move(done)),
      now_(Clock::now()) {}

void PathsRun::start() {
  launch([this] { ask_local(); });
}

// A query within the run's budget; over it, `on_done` gets a deferred failure at once.
bool PathsRun::ask_budgeted(const char* attribute, mad::Request request,
                            std::function<void(const mad::Response&)> on_ok,
                            std::function<void(const char* reason)> on_fail) {
  if (asked() >= config_.max_mads_per_run) {
    on_fail(kDeferred);
    return false;
  }
  std::string subject = request.to.to_string();
  ask(std::move(request), IB_SMP_DATA_SIZE,
      [this, attribute, subject, on_ok = std::move(on_ok),
       on_fail = std::move(on_fail)](const mad::Response& r) {
        s_.errors.note(r, attribute, [&] {
          return fmt::format("attribute={} destination=\"{}\"", attribute, subject);
        });
        if (r.ok()) {
          on_ok(r);
        } else {
          on_fail(kNoAnswer);
        }
      });
  return true;
}

// --- this node and its SM -------------------------------------------------------------

void PathsRun::ask_local() {
  ask_budgeted(
      "node_info", mad::Request::smp_get(mad::Destination::by_route({}), IB_ATTR_NODE_INFO),
      [this](const mad::Response& r) {
        local_ = mad::decode_node_info(r.data());
        ask_budgeted(
            "port_info",
            mad::Request::smp_get(mad::Destination::by_route({}), IB_ATTR_PORT_INFO,
                                  static_cast<std::uint32_t>(local_->local_port)),
            [this](const mad::Response& p) {
              auto pi = mad::decode_port_info(p.data());
              local_lid_ = static_cast<std::uint16_t>(pi.lid);
              sm_lid_ = static_cast<std::uint16_t>(pi.sm_lid);
              ask_sm();
            },
            [this](const char*) { local_error_ = "the local port did not answer PortInfo"; });
      },
      [this](const char*) { local_error_ = "the local node did not answer NodeInfo"; });
}

void PathsRun::ask_sm() {
  if (!mad::routable_lid(sm_lid_)) {
    plan(std::nullopt);
    return;
  }
  ask_budgeted(
      "sm_info", mad::Request::smp_get(mad::Destination::to_lid(sm_lid_), IB_ATTR_SMINFO),
      [this](const mad::Response& r) {
        plan(std::pair(r.get64(IB_SMINFO_GUID_F), r.get(IB_SMINFO_ACT_F)));
      },
      [this](const char*) { plan(std::nullopt); });
}

// --- what to trace ----------------------------------------------------------------------

void PathsRun::plan(std::optional<std::pair<std::uint64_t, std::uint32_t>> sm) {
  if (local_->type != IB_NODE_CA || !mad::routable_lid(local_lid_)) {
    local_error_ = "the local port has no LID yet (is a Subnet Manager running?)";
    return;
  }
  if (s_.local_guid != local_->guid || s_.local_port != local_->local_port ||
      s_.local_lid != local_lid_) {
    if (s_.local_guid != 0) spdlog::info("paths: this node's port changed; tracing again");
    s_.local_guid = local_->guid;
    s_.local_port = local_->local_port;
    s_.local_lid = local_lid_;
    s_.forget_topology();
    s_.all_stale("local_change");
    s_.refreshed_at = now_;
  }
  bool verify = false;
  if (sm && s_.sm_guid != 0 && sm->first != s_.sm_guid) {
    spdlog::info("paths: the master SM changed; tracing every path again");
    s_.forget_topology();
    s_.all_stale("sm_change");
  } else if (now_ - s_.refreshed_at >= config_.refresh) {
    s_.forget_topology();
    s_.all_stale("refresh");
    s_.refreshed_at = now_;
  } else if (now_ - s_.verified_at >= config_.verify_every) {
    // Routes change only when an SM programs the tables: read them again only after the
    // master has been active (any SMP it sends moves its ActCount), or when no SM answers.
    verify = !sm || !s_.verified_activity || *s_.verified_activity != sm->second;
  }
  if (sm) s_.sm_guid = sm->first;
  update_peers();
  if (verify) {
    s_.verified_at = now_;
    if (sm) s_.verified_activity = sm->second;
    verify_tables();
  } else {
    if (sm && !s_.verified_activity) s_.verified_activity = sm->second;
    trace_stale();
  }
}

void PathsRun::update_peers() {
  std::map<PeerKey, std::uint16_t> wanted;
  unplaced_ = 0;
  for (const auto& p : peers_.peers()) {
    if (!mad::routable_lid(p.lid)) {
      ++unplaced_;
      continue;
    }
    wanted[{p.name, p.transport}] = p.lid;
  }
  std::erase_if(s_.paths, [&](const auto& e) { return !wanted.count(e.first); });
  for (const auto& [key, lid] : wanted) {
    auto& path = s_.paths[key];
    if (path.lid != lid) {
      path = PeerPath{};
      path.lid = lid;
    }
  }
}

// Reads every forwarding-table block a path depends on again; a block that changed or no
// longer answers makes its paths stale.
void PathsRun::verify_tables() {
  std::set<BlockKey> used;
  for (const auto& [key, path] : s_.paths) used.insert(path.blocks.begin(), path.blocks.end());
  verifying_ = 1;  // held until every read is out
  for (const auto& key : used) {
    auto it = s_.lft.find(key);
    if (it == s_.lft.end()) continue;
    ++verifying_;
    auto route = it->second.route;
    ask_budgeted(
        "linear_forwarding_table",
        mad::Request::smp_get(mad::Destination::by_route(route), IB_ATTR_LINEARFORWTBL, key.second),
        [this, key](const mad::Response& r) {
          auto& block = s_.lft[key];
          if (!std::equal(block.ports.begin(), block.ports.end(), r.data())) {
            std::copy_n(r.data(), block.ports.size(), block.ports.begin());
            changed(key, "route_change");
          }
          verified();
        },
        [this, key](const char* reason) {
          if (reason != kDeferred) {
            s_.lft.erase(key);
            changed(key, "hop_lost");
          }
          verified();
        });
  }
  verified();
}

void PathsRun::changed(const BlockKey& key, const char* cause) {
  // What is at the end of a route may have changed too (a cable moved): read nodes again.
  s_.nodes.clear();
  s_.port_lids.clear();
  for (auto& [peer, path] : s_.paths) {
    if (path.blocks.count(key) && !path.stale) {
      path.stale = true;
      path.cause = cause;
    }
  }
}

void PathsRun::verified() {
  if (--verifying_ > 0) return;
  for (auto& [key, path] : s_.paths) {
    if (!path.stale) path.confirmed = now_;
  }
  trace_stale();
}

// --- tracing ----------------------------------------------------------------------------

void PathsRun::trace_stale() {
  // Paths never traced first, so a new peer is placed before old ones are refreshed.
  std::vector<PeerKey> order;
  for (const auto& [key, path] : s_.paths) {
    if (path.stale && path.to_peer.hops.empty()) order.push_back(key);
  }
  for (const auto& [key, path] : s_.paths) {
    if (path.stale && !path.to_peer.hops.empty()) order.push_back(key);
  }
  for (const auto& key : order) trace(key);
}

void PathsRun::trace(const PeerKey& key) {
  auto t = std::make_shared<Trace>();
  t->key = key;
  t->dlid = s_.paths.at(key).lid;
  start_leg(t, true);
}

void PathsRun::start_leg(const TracePtr& t, bool forward) {
  t->forward = forward;
  t->hops.clear();
  t->switches.clear();
  if (forward) {
    t->route = {};
    t->pending = Hop{local_->guid, local_->local_port, IB_NODE_CA, 0, 0, 0};
    next_node(t, static_cast<std::uint8_t>(local_->local_port));
    return;
  }
  // The answer leaves the peer by the port the probe reached it through, towards the switch
  // (or node) the probe came from, and goes on by this node's LID.
  const Hop& last = t->result.to_peer.hops.back();
  t->dlid = local_lid_;
  t->route.assign(t->peer_route.begin(), t->peer_route.end() - 1);
  t->hops.push_back(Hop{last.to_guid, last.to_port, last.to_type, last.from_guid, last.from_port,
                        last.from_type});
  if (last.from_type != IB_NODE_SWITCH) {
    arrived(t, last.from_guid, {});  // two CAs cabled back to back
    return;
  }
  t->switches.insert(last.from_guid);
  at_switch(t, last.from_guid);
}

// Follows the pending hop out of port `out` of the node at t->route.
void PathsRun::next_node(const TracePtr& t, std::uint8_t out) {
  if (static_cast<int>(t->hops.size()) >= config_.max_hops ||
      t->route.size() >= static_cast<std::size_t>(fabric_max_route)) {
    fail(t, kHopLimit, std::to_string(t->hops.size()) + " cables");
    return;
  }
  Route next = t->route;
  next.push_back(out);
  node_at(next, [this, t, next](const std::optional<mad::NodeInfo>& node, const char* why) {
    if (!node) {
      fail(t, why, "no node answered at route " + mad::Destination::by_route(next).to_string());
      return;
    }
    t->pending.to_guid = node->guid;
    t->pending.to_port = node->local_port;
    t->pending.to_type = node->type;
    t->hops.push_back(t->pending);
    t->route = next;
    if (node->type != IB_NODE_SWITCH) {
      check_destination(t, *node);
      return;
    }
    if (!t->switches.insert(node->guid).second) {
      fail(t, kLoop, "switch " + hex_guid(node->guid) + " reached twice");
      return;
    }
    at_switch(t, node->guid);
  });
}

// At a switch (reached by t->route): its forwarding table says where the LID goes.
void PathsRun::at_switch(const TracePtr& t, std::uint64_t guid) {
  BlockKey key{guid, mad::lft_block(t->dlid)};
  t->result.blocks.insert(key);
  lft(key, t->route, [this, t, guid](const LftBlock* block, const char* why) {
    if (!block) {
      fail(t, why, "switch " + hex_guid(guid) + " did not answer LinearForwardingTable");
      return;
    }
    int out = mad::lft_port(block->ports.data(), t->dlid);
    if (out == mad::kLftNoRoute) {
      fail(t, kNoRoute,
           "switch " + hex_guid(guid) + " has no port for LID " + std::to_string(t->dlid));
      return;
    }
    if (out == 0) {
      fail(t, kWrongDestination,
           "LID " + std::to_string(t->dlid) + " is switch " + hex_guid(guid) + " itself");
      return;
    }
    t->pending = Hop{guid, out, IB_NODE_SWITCH, 0, 0, 0};
    next_node(t, static_cast<std::uint8_t>(out));
  });
}

// A CA (or router) ends the leg: it must own the LID the leg was routed by.
void PathsRun::check_destination(const TracePtr& t, const mad::NodeInfo& node) {
  port_lid(t->route, node.local_port,
           [this, t, node](std::optional<std::pair<std::uint16_t, int>> lid, const char* why) {
             if (!lid) {
               fail(t, why, "node " + hex_guid(node.guid) + " did not answer PortInfo");
               return;
             }
             auto [base, lmc] = *lid;
             if (t->dlid < base || t->dlid >= base + (1 << lmc)) {
               fail(t, kWrongDestination,
                    "LID " + std::to_string(t->dlid) + " led to node " + hex_guid(node.guid) +
                        " port " + std::to_string(node.local_port) + " (LID " +
                        std::to_string(base) + ")");
               return;
             }
             arrived(t, node.guid, t->route);
           });
}

void PathsRun::arrived(const TracePtr& t, std::uint64_t guid, Route route) {
  if (t->forward) {
    t->result.to_peer.hops = t->hops;
    t->peer_route = std::move(route);
    t->peer_guid = guid;
    start_leg(t, false);
    return;
  }
  if (guid != local_->guid) {
    fail(t, kWrongDestination, "this node's LID led to node " + hex_guid(guid));
    return;
  }
  t->result.from_peer.hops = t->hops;
  finish(t);
}

void PathsRun::fail(const TracePtr& t, const char* reason, std::string detail) {
  if (reason == kDeferred) {
    t->result.deferred = true;
  } else {
    auto& leg = t->forward ? t->result.to_peer : t->result.from_peer;
    leg.failure = reason;
    leg.detail = std::move(detail);
    if (t->forward) {
      // No answer leg without the probe's: it starts where the probe arrived.
      t->result.from_peer.failure = reason;
      t->result.from_peer.detail = "the probe's leg could not be traced";
    }
  }
  finish(t);
}

void PathsRun::finish(const TracePtr& t) {
  auto it = s_.paths.find(t->key);
  if (it == s_.paths.end()) return;
  auto& path = it->second;
  auto& r = t->result;
  if (r.deferred) return;  // stays stale; traced in a later run
  ++s_.traces[path.cause];
  const auto& peer = t->key.first;
  const auto& transport = t->key.second;
  auto settle = [&](LegState& leg, LegState& now, const char* name) {
    if (!now.failure.empty()) {
      if (leg.failure != now.failure) {
        spdlog::warn("paths: cannot trace peer=\"{}\" transport={} leg={} reason={} detail=\"{}\"",
                     peer, transport, name, now.failure, now.detail);
      }
      leg.failure = now.failure;
      leg.detail = now.detail;
      return;
    }
    if (!leg.failure.empty()) {
      spdlog::info("paths: traced again peer=\"{}\" transport={} leg={}", peer, transport, name);
    } else if (!leg.hops.empty() && leg.hops != now.hops) {
      spdlog::info("paths: route changed peer=\"{}\" transport={} leg={} cables={}", peer,
                   transport, name, now.hops.size());
    }
    leg.failure.clear();
    leg.hops = std::move(now.hops);
  };
  settle(path.to_peer, r.to_peer, "to_peer");
  settle(path.from_peer, r.from_peer, "from_peer");
  bool ok = r.to_peer.failure.empty() && r.from_peer.failure.empty();
  if (ok) {
    path.blocks = std::move(r.blocks);
    path.confirmed = now_;
    path.stale = false;
  } else {
    // The blocks this attempt read may be what failed it (read before the SM programmed
    // them, or since reprogrammed, and only verified while a traced path uses them): the
    // retry reads them again.
    for (const auto& key : r.blocks) s_.lft.erase(key);
    path.cause = "retry";
  }
}

// --- cached queries: each answer is asked once per run, and reused across runs ----------

void PathsRun::node_at(const Route& route, NodeCallback cb) {
  if (auto it = s_.nodes.find(route); it != s_.nodes.end()) {
    describe(it->second.guid, route);
    cb(it->second, nullptr);
    return;
  }
  auto& waiting = node_waiting_[route];
  waiting.push_back(std::move(cb));
  if (waiting.size() > 1) return;
  auto answer = [this, route](const std::optional<mad::NodeInfo>& node, const char* why) {
    if (node) {
      s_.nodes[route] = *node;
      describe(node->guid, route);
    }
    auto callbacks = std::move(node_waiting_[route]);
    node_waiting_.erase(route);
    for (auto& f : callbacks) f(node, why);
  };
  ask_budgeted(
      "node_info", mad::Request::smp_get(mad::Destination::by_route(route), IB_ATTR_NODE_INFO),
      [answer](const mad::Response& r) { answer(mad::decode_node_info(r.data()), nullptr); },
      [answer](const char* why) { answer(std::nullopt, why); });
}

void PathsRun::lft(const BlockKey& key, const Route& route, LftCallback cb) {
  if (auto it = s_.lft.find(key); it != s_.lft.end()) {
    cb(&it->second, nullptr);
    return;
  }
  auto& waiting = lft_waiting_[key];
  waiting.push_back(std::move(cb));
  if (waiting.size() > 1) return;
  auto answer = [this, key](const LftBlock* block, const char* why) {
    auto callbacks = std::move(lft_waiting_[key]);
    lft_waiting_.erase(key);
    for (auto& f : callbacks) f(block, why);
  };
  ask_budgeted(
      "linear_forwarding_table",
      mad::Request::smp_get(mad::Destination::by_route(route), IB_ATTR_LINEARFORWTBL, key.second),
      [this, key, route, answer](const mad::Response& r) {
        auto& block = s_.lft[key];
        block.route = route;
        std::copy_n(r.data(), block.ports.size(), block.ports.begin());
        answer(&block, nullptr);
      },
      [answer](const char* why) { answer(nullptr, why); });
}

void PathsRun::port_lid(const Route& route, int port, LidCallback cb) {
  std::pair<Route, int> key{route, port};
  if (auto it = s_.port_lids.find(key); it != s_.port_lids.end()) {
    cb(it->second, nullptr);
    return;
  }
  ask_budgeted(
      "port_info",
      mad::Request::smp_get(mad::Destination::by_route(route), IB_ATTR_PORT_INFO,
                            static_cast<std::uint32_t>(port)),
      [this, key, cb](const mad::Response& r) {
        auto pi = mad::decode_port_info(r.data());
        auto lid = std::pair(static_cast<std::uint16_t>(pi.lid), pi.lmc);
        s_.port_lids[key] = lid;
        cb(lid, nullptr);
      },
      [cb](const char* why) { cb(std::nullopt, why); });
}

// NodeDescription, for names, once per node until the next refresh. Best effort: a node
// without one is named by its GUID.
void PathsRun::describe(std::uint64_t guid, const Route& route) {
  if (s_.descriptions.count(guid) || !described_.insert(guid).second) return;
  ask_budgeted(
      "node_description",
      mad::Request::smp_get(mad::Destination::by_route(route), IB_ATTR_NODE_DESC),
      [this, guid](const mad::Response& r) {
        s_.descriptions[guid] = r.get_string(IB_NODE_DESC_F);
      },
      [](const char*) {});
}

}  // namespace ibfabric::paths
