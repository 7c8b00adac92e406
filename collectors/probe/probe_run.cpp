// The probing: peers chosen and resolved, probes sent on their timers (UDP or MAD), answers and
// replies matched, the responder. What a collection reports of it is probe_emit.cpp's.
#include "collectors/probe/probe_run.h"

#include "config/config.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/v6_only.hpp>

#include <algorithm>
#include <cstring>
#include <random>

namespace ibfabric::probe {
namespace {

namespace asio = boost::asio;
using udp = asio::ip::udp;
using Clock = std::chrono::system_clock;  // as ProbeRun::Clock, for the socket helpers

// Asks the kernel to stamp every datagram with its arrival time, so that the time a probe
// waited for this daemon's event loop counts as host delay, not as network time.
void enable_timestamps(int fd) {
  int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
}

// One datagram without blocking: its size and the kernel's arrival time (now when the kernel
// gave none); nullopt when there is nothing to read.
std::optional<std::pair<std::size_t, Clock::time_point>> receive_one(udp::socket& socket,
                                                                     std::uint8_t* data,
                                                                     std::size_t size,
                                                                     udp::endpoint& from) {
  iovec iov{data, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
  msghdr msg{};
  msg.msg_name = from.data();
  msg.msg_namelen = static_cast<socklen_t>(from.capacity());
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(socket.native_handle(), &msg, MSG_DONTWAIT);
  if (n < 0) return std::nullopt;
  from.resize(msg.msg_namelen);
  Clock::time_point at = Clock::now();
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      timespec ts{};
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      at = Clock::time_point(std::chrono::duration_cast<Clock::duration>(
          std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
    }
  }
  return std::make_pair(static_cast<std::size_t>(n), at);
}

std::string self_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

asio::ip::udp::endpoint parse_endpoint(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("expected IP:PORT");
  std::string host = text.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(text.substr(colon + 1));
  } catch (const std::exception&) {
    throw std::runtime_error("expected a port number after the last ':'");
  }
  if (port < 1 || port > 65535) throw std::runtime_error("port out of range 1-65535");
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) return {udp::v6(), static_cast<std::uint16_t>(port)};
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("\"" + host + "\" is not an IP address");
  return {ip, static_cast<std::uint16_t>(port)};
}

ProbeRun::ProbeRun(asio::io_context& io, ProbeConfig config,
                   std::function<std::shared_ptr<mad::Engine>()> mad_engine,
                   std::shared_ptr<const NodeNameMap> node_names,
                   std::shared_ptr<PeerDirectory> directory, WallClock wall_clock)
    : io_(io),
      config_(std::move(config)),
      mad_(std::move(mad_engine)),
      node_names_(std::move(node_names)),
      directory_(std::move(directory)),
      socket_(io),
      responder_(io),
      sweep_(io),
      wall_clock_(std::move(wall_clock)),
      plan_timer_(io) {
  std::random_device random;
  token_ = (static_cast<std::uint64_t>(random()) << 32) | random();
  for (const auto& t : config_.targets) {
    if (t.guid != 0 || (t.mad() && !t.node_description.empty())) needs_sa_ = true;
  }
  needs_sa_ = needs_sa_ || config_.discover || !config_.plan_url.empty();
  has_infiniband_ = uses_mad();
}

void ProbeRun::start() {
  if (started_) return;
  started_ = true;
  // The MAD responder first (its agent registered with the port's first open, see
  // prepare_mad; without the daemon's open first, the engine opens the port now).
  if (config_.mad_responder) serve_mad();
  if (!config_.udp_listen.empty()) open_responder();
  update_peers();
  arm_sweep();
  if (!config_.plan_url.empty()) {
    plan_client_ = std::make_unique<PlanClient>(io_, config_.plan_url);
    ask_plan();
  }
}

void ProbeRun::ask_plan() {
  auto again = [w = weak_from_this()](std::chrono::nanoseconds after) {
    auto self = w.lock();
    if (!self) return;
    self->plan_timer_.expires_after(after);
    self->plan_timer_.async_wait([w](const boost::system::error_code& ec) {
      if (auto self = w.lock(); self && !ec) self->ask_plan();
    });
  };
  // Asked by this node's GUID: once the port it probes from is known.
  if (node_guid_ == 0) return again(std::chrono::seconds(1));
  auto timeout = std::min<std::chrono::nanoseconds>(config_.plan_interval, std::chrono::seconds(5));
  plan_client_->fetch(node_guid_, timeout,
                      [w = weak_from_this(), again](std::optional<std::vector<std::uint64_t>> plan,
                                                    std::string error) {
                        auto self = w.lock();
                        if (!self) return;
                        bool up = plan.has_value();
                        // Said when it starts failing, when how it fails changes, and when it
                        // answers again; a failing plan keeps the peers it gave last (a localizer
                        // restarting is no reason to drop a job's pairs).
                        if (!up && (self->plan_up_ != false || error != self->plan_error_)) {
                          spdlog::warn("msg=\"probe plan not read\" url={} error=\"{}\"",
                                       self->config_.plan_url, error);
                        } else if (up && self->plan_up_ == false) {
                          spdlog::info("msg=\"probe plan read again\" url={}",
                                       self->config_.plan_url);
                        }
                        self->plan_up_ = up;
                        self->plan_error_ = error;
                        if (plan) self->set_plan(std::move(*plan));
                        again(self->config_.plan_interval);
                      });
}

void ProbeRun::set_plan(std::vector<std::uint64_t> plan) {
  if (plan == plan_) return;
  plan_ = std::move(plan);
  update_peers();
}

bool ProbeRun::prepare_mad() {
  if (config_.mad_responder) {
    if (auto engine = mad_.engine()) declare_service(engine);
  }
  return uses_mad();
}

bool ProbeRun::uses_mad() const {
  return config_.mad_responder || needs_sa_ ||
         std::any_of(config_.targets.begin(), config_.targets.end(),
                     [](const TargetConfig& t) { return t.mad(); });
}

void ProbeRun::refresh_mad(const std::optional<std::vector<mad::LocalPort>>& ports,
                           const std::string& error) {
  mad_errors_.clear();
  bool has_mad_targets =
      config_.discover || std::any_of(config_.targets.begin(), config_.targets.end(),
                                      [](const TargetConfig& t) { return t.mad(); });
  if (!config_.mad_responder && !has_mad_targets) return;
  if (!ports) {
    mad_errors_.push_back(error);
    return;
  }
  own_port_guids_.clear();
  for (const auto& port : *ports) own_port_guids_.insert(port.port_guid);
  has_infiniband_ = !ports->empty();
  // A node without InfiniBand (UDP probes only) has nothing to serve or probe over MAD.
  if (ports->empty()) {
    if (has_mad_targets) mad_errors_.push_back("no InfiniBand port for MAD probes");
    return;
  }
  if (!mad_.engine()) return;
  if (config_.mad_responder) {
    if (auto error = serve_mad(); !error.empty()) {
      mad_errors_.push_back("MAD responder: " + error);
    }
  }
  identify(*ports);
  auto now = std::chrono::steady_clock::now();
  if (needs_sa_ && !resolving_ && now >= resolve_at_) resolve();
  if (!sa_error_.empty()) mad_errors_.push_back(sa_error_);
}

void ProbeRun::identify(const std::vector<mad::LocalPort>& ports) {
  auto engine = mad_.engine();
  auto via = engine ? engine->default_port() : std::nullopt;
  if (!via) return;  // being resolved: the next collection
  auto it = std::find_if(ports.begin(), ports.end(), [&](const mad::LocalPort& p) {
    return p.ca == via->ca && p.port == via->port;
  });
  if (it == ports.end()) return;
  if (it->node_guid != node_guid_) {
    node_guid_ = it->node_guid;
    node_description_.reset();
  }
  if (node_description_ || describing_) return;
  describing_ = true;
  mad_.client().submit(mad::Request::smp_get(mad::Destination::by_route({}), IB_ATTR_NODE_DESC),
                       [w = weak_from_this(), guid = node_guid_](mad::Response r) {
                         auto self = w.lock();
                         if (!self) return;
                         self->describing_ = false;
                         // Unanswered: named by GUID until an answer comes (asked again next
                         // collection).
                         if (guid == self->node_guid_ && r.ok()) {
                           self->node_description_ = r.get_string(IB_NODE_DESC_F);
                         }
                       });
}

std::optional<Labels> ProbeRun::node_labels() const {
  if (node_guid_ == 0) {
    if (has_infiniband_) return std::nullopt;
    return Labels{{"node_name", self_name()}};
  }
  std::string mapped = node_names_->name(node_guid_, "");
  if (!node_description_ && mapped == hex_guid(node_guid_)) return std::nullopt;
  return Labels{{"node_guid", hex_guid(node_guid_)},
                {"node_name", node_names_->name(node_guid_, node_description_.value_or(""))}};
}

void ProbeRun::rotate() {
  if (rotation_slot(config_.rotate_every, wall_clock_()) != slot_) {
    update_peers();
  }
}

std::string ProbeRun::serve_mad() {
  auto engine = mad_.engine();
  if (!engine) return "no MAD engine";
  declare_service(engine);
  return service_->refresh();
}

void ProbeRun::declare_service(const std::shared_ptr<mad::Engine>& engine) {
  // A reload that changed the `mad:` section replaces the engine: serve on the new one.
  if (service_engine_.lock() != engine) service_.reset();
  if (!service_) {
    service_engine_ = engine;
    auto host = ping_host_name();
    service_ =
        engine->serve({}, kPingClass, kPingOui, config_.mad_responder_max_per_second,
                      [host](const mad::InboundRequest& in) {
                        auto held = std::chrono::steady_clock::now() - in.received_at;
                        return std::optional(encode_ping_answer(
                            host, std::chrono::duration_cast<std::chrono::nanoseconds>(held)));
                      });
  }
}

void ProbeRun::stop() {
  boost::system::error_code ec;
  socket_.close(ec);
  responder_.close(ec);
  sweep_.cancel();
  plan_timer_.cancel();
  for (auto& peer : peers_) peer->timer.cancel();
  service_.reset();
}

void ProbeRun::update_peers() {
  std::vector<TargetConfig> candidates;
  std::map<std::string, Wanted> wanted;  // by "transport|name"
  auto want = [&](Wanted w) {
    std::string key = (w.mad ? "mad|" : "udp|") + w.target.name;
    if (wanted.emplace(key, w).second) candidates.push_back(w.target);
  };
  errors_.clear();
  std::set<std::string> unresolved;
  for (const auto& t : config_.targets) {
    std::uint16_t lid = t.lid;
    if (lid == 0) {
      for (const auto& r : records_) {
        if ((t.guid != 0 && r.port_guid == t.guid) ||
            (!t.node_description.empty() && r.description == t.node_description)) {
          lid = r.lid;
          break;
        }
      }
    }
    if (!t.mad()) {
      // The LID, when the target names its IB port, only places the peer's path.
      try {
        want(Wanted{t, false, parse_endpoint(t.address), lid});
      } catch (const std::exception& e) {
        errors_.push_back("target " + t.address + ": " + e.what());
      }
      continue;
    }
    if (lid != 0) {
      want(Wanted{t, true, {}, lid});
    } else if (resolved_once_) {
      // A host that went away leaves the SA's table: not this collector's failure, which
      // would page once for each of its probers beside the host's own page. Said in
      // ibfabric_probe_targets_unresolved and the log instead (a misspelt name shows there).
      unresolved.insert(t.name);
    }
  }
  if (unresolved != unresolved_) {
    for (const auto& name : unresolved) {
      if (!unresolved_.count(name)) {
        spdlog::warn(
            "msg=\"probe target not known to the SA\" target=\"{}\" "
            "hint=\"the host went away, or the name or GUID is wrong\"",
            name);
      }
    }
    for (const auto& name : unresolved_) {
      if (!unresolved.count(name)) {
        spdlog::info("msg=\"probe target known to the SA again\" target=\"{}\"", name);
      }
    }
    unresolved_ = std::move(unresolved);
  }
  if (config_.discover) {
    // This node's own ports, as the latest listing saw them (records_ come from an SA lookup,
    // which only a collection that listed the ports starts).
    const auto& own = own_port_guids_;
    std::set<std::uint64_t> nodes;
    for (const auto& r : records_) {
      // One port per CA node (the first the SA lists), never this node's own.
      if (r.node_type != IB_NODE_CA || own.count(r.port_guid) ||
          !nodes.insert(r.node_guid).second) {
        continue;
      }
      TargetConfig t;
      // Named as the fabric and ports collectors name nodes: node-name-map, NodeDescription,
      // GUID (of the node: the map's key).
      t.name = node_names_->name(r.node_guid, r.description);
      t.guid = r.port_guid;
      want(Wanted{t, true, {}, r.lid});
    }
  }
  // The planned peers first (the training jobs this node runs: ibfabric-localize's plan), by
  // the SA's records of their node GUID, within max_peers; then the subset, by name, over both
  // transports, of the rest.
  std::set<std::string> chosen;
  std::set<std::string> planned;
  for (auto guid : plan_) {
    if (planned.size() >= config_.max_peers) break;
    auto r = std::find_if(records_.begin(), records_.end(), [&](const NodeRecord& r) {
      return r.node_guid == guid && r.node_type == IB_NODE_CA &&
             !own_port_guids_.count(r.port_guid);
    });
    if (r == records_.end()) continue;  // not (yet) in the SA's table: not probed
    TargetConfig t;
    t.name = node_names_->name(r->node_guid, r->description);
    t.guid = r->port_guid;
    want(Wanted{t, true, {}, r->lid});
    planned.insert("mad|" + t.name);
  }
  chosen = planned;
  planned_ = planned.size();
  std::vector<TargetConfig> rest;
  for (const auto& t : candidates) {
    if (!planned.count((t.mad() ? "mad|" : "udp|") + t.name)) rest.push_back(t);
  }
  slot_ = rotation_slot(config_.rotate_every, wall_clock_());
  for (const auto& t : choose_peers(self_name(), rest, config_.max_peers - planned.size(), slot_)) {
    chosen.insert((t.mad() ? "mad|" : "udp|") + t.name);
  }

  std::vector<PeerPtr> next;
  for (auto& peer : peers_) {
    std::string key = (peer->mad ? "mad|" : "udp|") + peer->name;
    auto it = wanted.find(key);
    if (it == wanted.end() || !chosen.count(key)) {
      peer->timer.cancel();  // gone: its series vanish with it
      continue;
    }
    peer->lid = it->second.lid;
    peer->endpoint = it->second.endpoint;
    chosen.erase(key);
    next.push_back(peer);
  }
  for (const auto& key : chosen) {
    const auto& w = wanted.at(key);
    auto peer = std::make_shared<Peer>(w.target.name, w.mad, config_.spike, config_.window, io_);
    peer->lid = w.lid;
    peer->endpoint = w.endpoint;
    next.push_back(std::move(peer));
  }
  peers_ = std::move(next);
  std::sort(peers_.begin(), peers_.end(),
            [](const PeerPtr& a, const PeerPtr& b) { return a->name < b->name; });
  std::vector<ProbedPeer> probed;
  for (const auto& peer : peers_) {
    probed.push_back({peer->name, peer->mad ? "mad" : "udp", peer->lid});
  }
  if (directory_) directory_->publish(std::move(probed));

  bool any_udp = std::any_of(peers_.begin(), peers_.end(), [](auto& p) { return !p->mad; });
  if (any_udp && !socket_.is_open()) {
    boost::system::error_code ec;
    auto protocol = std::find_if(peers_.begin(), peers_.end(), [](auto& p) { return !p->mad; });
    socket_.open((*protocol)->endpoint.protocol(), ec);
    if (ec) {
      errors_.push_back("cannot open the probe socket: " + ec.message());
    } else {
      enable_timestamps(socket_.native_handle());
      receive();
    }
  }
  schedule_all();
}

void ProbeRun::schedule_all() {
  if (peers_.empty()) return;
  auto interval = config_.probe_interval;
  auto floor = std::chrono::nanoseconds(static_cast<std::int64_t>(
      1e9 * static_cast<double>(peers_.size()) / config_.max_probes_per_second));
  if (floor > interval) {
    if (floor != interval_) {
      spdlog::warn("probe: {} peers at max_probes_per_second {} stretch the probe interval to {}",
                   peers_.size(), config_.max_probes_per_second, format_duration(floor));
    }
    interval = floor;
  }
  interval_ = interval;
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    if (peers_[i]->scheduled) continue;
    peers_[i]->scheduled = true;
    // Spread new peers over one interval rather than probing them all at once.
    schedule(peers_[i],
             interval * static_cast<std::int64_t>(i) / static_cast<std::int64_t>(peers_.size()));
  }
}

void ProbeRun::resolve() {
  if (!mad_.engine()) return;
  std::vector<mad::Request> queries;
  for (const auto& t : config_.targets) {
    if (t.guid == 0 && t.node_description.empty()) continue;
    queries.push_back(node_record_query(t.guid, t.node_description));
  }
  if (config_.discover) queries.push_back(node_record_query(0, ""));
  resolving_ = true;
  auto round = std::make_shared<ResolveRound>();
  round->waiting = queries.size();
  for (auto& q : queries) {
    mad_.client().submit(std::move(q), [w = weak_from_this(), round](mad::Response r) {
      auto self = w.lock();
      if (!self) return;
      if (r.ok()) {
        auto found = decode_node_records(r.mad.data(), r.mad.size());
        round->records.insert(round->records.end(), found.begin(), found.end());
      } else if (round->error.empty()) {
        round->error = std::string("SA NodeRecord lookup: ") + mad::to_string(r.status) +
                       (r.error.empty() ? "" : " (" + r.error + ")");
      }
      if (--round->waiting == 0) self->resolved(*round);
    });
  }
}

void ProbeRun::resolved(ResolveRound& round) {
  resolving_ = false;
  auto now = std::chrono::steady_clock::now();
  if (!round.error.empty()) {
    // Retried at the next collection; the peers resolved before stay.
    resolve_at_ = now;
    if (sa_error_ != round.error) spdlog::warn("probe: {}", round.error);
    sa_error_ = round.error;
    return;
  }
  sa_error_.clear();
  resolve_at_ = now + config_.resolve_interval;
  records_ = std::move(round.records);
  resolved_once_ = true;
  update_peers();
}

void ProbeRun::open_responder() {
  try {
    auto endpoint = parse_endpoint(config_.udp_listen);
    boost::system::error_code ec;
    responder_.open(endpoint.protocol(), ec);
    if (!ec && endpoint.address().is_v6() && endpoint.address().is_unspecified()) {
      responder_.set_option(asio::ip::v6_only(false), ec);
    }
    if (!ec) responder_.bind(endpoint, ec);
    if (ec) throw std::runtime_error(ec.message());
    enable_timestamps(responder_.native_handle());
    respond();
  } catch (const std::exception& e) {
    responder_error_ = "responder on " + config_.udp_listen + ": " + e.what() +
                       " (choose another udp_listen, or \"\" for none)";
  }
}

void ProbeRun::respond() {
  responder_.async_wait(udp::socket::wait_read, [self = shared_from_this()](
                                                    const boost::system::error_code& ec) {
    if (ec == asio::error::operation_aborted) return;
    auto& buf = self->responder_buffer_;
    while (auto got =
               receive_one(self->responder_, buf.data(), buf.size(), self->responder_peer_)) {
      auto [n, received] = *got;
      auto m = decode(buf.data(), n);
      if (!m || m->reply) continue;
      m->reply = true;
      auto held = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - received);
      m->hold_ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, held.count()));
      encode(*m, buf.data());
      boost::system::error_code send_error;
      // A datagram socket does not block on send; answer at once so the hold time
      // written above is what the probe really spent here.
      self->responder_.send_to(asio::buffer(buf.data(), n), self->responder_peer_, 0, send_error);
      if (!send_error) ++self->responder_requests_;
    }
    self->respond();
  });
}

void ProbeRun::schedule(const PeerPtr& peer, std::chrono::nanoseconds after) {
  peer->timer.expires_after(after);
  peer->timer.async_wait([w = weak_from_this(), weak_peer = std::weak_ptr<Peer>(peer)](
                             const boost::system::error_code& ec) {
    if (ec) return;
    auto self = w.lock();
    auto peer = weak_peer.lock();
    if (!self || !peer) return;
    if (peer->mad) {
      self->send_mad(peer);
    } else {
      self->send_udp(*peer);
    }
    self->schedule(peer, self->interval_);
  });
}

void ProbeRun::send_udp(Peer& peer) {
  if (!socket_.is_open()) return;
  Message m;
  m.sequence = peer.next_sequence++;
  m.token = token_;
  auto buffer =
      std::make_shared<std::vector<std::uint8_t>>(std::max(config_.payload_bytes, kHeaderBytes), 0);
  encode(m, buffer->data());
  peer.pending[m.sequence] = Clock::now();
  peer.stats.add_sent();
  socket_.async_send_to(asio::buffer(*buffer), peer.endpoint,
                        [buffer](const boost::system::error_code&, std::size_t) {});
}

void ProbeRun::send_mad(const PeerPtr& peer) {
  if (!mad_.engine()) return;
  mad::Request req;
  req.to = mad::Destination::to_lid(peer->lid);
  req.mgmt_class = kPingClass;
  req.oui = kPingOui;
  req.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(config_.timeout);
  req.retries = 0;  // a lost probe is a measurement, not something to hide
  mad_.client().submit(std::move(req), [w = weak_from_this(),
                                        weak_peer = std::weak_ptr<Peer>(peer)](mad::Response r) {
    auto self = w.lock();
    auto peer = weak_peer.lock();
    if (!self || !peer) return;
    switch (r.status) {
      case mad::Status::ok: {
        peer->stats.add_sent();
        auto hold = decode_ping_hold(r.data(), r.data_size());
        std::optional<std::chrono::nanoseconds> network;
        if (hold) network = r.rtt - std::min(*hold, r.rtt);
        self->record(*peer, r.rtt, network);
        break;
      }
      case mad::Status::timeout:
        peer->stats.add_sent();
        peer->stats.add_lost();
        break;
      // This daemon's own failures, not the network's (localization reads them as evidence
      // about this host): never counted as sent or lost.
      case mad::Status::port_error:
        ++peer->port_errors;
        break;
      case mad::Status::mad_status:
        ++peer->mad_statuses;
        break;
      default:
        // Never sent (no port, queue full): not a probe of the peer, but said in the
        // collector's health.
        if (self->send_errors_.size() < 8) {
          self->send_errors_.insert("probe to " + peer->name + ": " + r.error);
        }
        break;
    }
  });
}

void ProbeRun::record(Peer& peer, std::chrono::nanoseconds rtt,
                      std::optional<std::chrono::nanoseconds> network) {
  if (peer.stats.add(rtt, network)) {
    spdlog::warn("probe: RTT spike peer={} transport={} rtt_us={:.1f} baseline_us={:.1f}",
                 peer.name, peer.mad ? "mad" : "udp",
                 std::chrono::duration<double, std::micro>(rtt).count(),
                 peer.stats.baseline().value_or(0) * 1e6);
  }
}

void ProbeRun::receive() {
  socket_.async_wait(udp::socket::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       if (ec == asio::error::operation_aborted) return;
                       while (auto got = receive_one(self->socket_, self->buffer_.data(),
                                                     self->buffer_.size(), self->from_)) {
                         self->on_reply(got->second, got->first);
                       }
                       self->receive();
                     });
}

void ProbeRun::on_reply(Clock::time_point now, std::size_t n) {
  auto m = decode(buffer_.data(), n);
  if (!m || !m->reply || m->token != token_) return;
  for (auto& peer : peers_) {
    if (peer->mad || peer->endpoint != from_) continue;
    auto it = peer->pending.find(m->sequence);
    if (it == peer->pending.end()) return;  // late: already counted lost
    auto rtt = std::chrono::duration_cast<std::chrono::nanoseconds>(now - it->second);
    peer->pending.erase(it);
    if (rtt.count() < 0 || rtt > std::chrono::seconds(10)) return;  // a clock step
    auto hold = std::chrono::nanoseconds(static_cast<std::int64_t>(m->hold_ns));
    record(*peer, rtt, rtt - std::min(hold, rtt));
    return;
  }
}

void ProbeRun::arm_sweep() {
  sweep_.expires_after(
      std::max<std::chrono::nanoseconds>(config_.timeout / 4, std::chrono::milliseconds(10)));
  sweep_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    auto now = Clock::now();
    for (auto& peer : self->peers_) {
      for (auto it = peer->pending.begin(); it != peer->pending.end();) {
        if (now - it->second > self->config_.timeout) {
          peer->stats.add_lost();
          it = peer->pending.erase(it);
        } else {
          ++it;
        }
      }
    }
    self->arm_sweep();
  });
}

}  // namespace ibfabric::probe
