#include "collectors/probe/probe_collector.h"

#include "config/config.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/udp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <random>

namespace ibfabric::probe {
namespace {

namespace asio = boost::asio;
using udp = asio::ip::udp;
// Socket receive timestamps are CLOCK_REALTIME (there is no monotonic choice), so probe times
// are taken on that clock too; a sample across a clock step is dropped (negative or > 10 s).
using Clock = std::chrono::system_clock;

constexpr std::uint8_t kMagic[4] = {'I', 'B', 'F', 'P'};
constexpr std::size_t kMaxDatagram = 9000;

void put(std::uint8_t* p, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v & 0xff);
}
std::uint64_t get(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// "IP:PORT", "[IPv6]:PORT", ":PORT" (every address). Throws std::runtime_error.
udp::endpoint parse_endpoint(const std::string& text) {
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

// Everything that runs between collections: sockets, timers, per-peer state. Handlers hold
// it by shared_ptr; stop() cancels them all.
class Prober : public std::enable_shared_from_this<Prober> {
 public:
  Prober(asio::io_context& io, ProbeConfig config)
      : io_(io), config_(std::move(config)), socket_(io), responder_(io), sweep_(io) {
    std::random_device random;
    token_ = (static_cast<std::uint64_t>(random()) << 32) | random();
  }

  // Opens the sockets and starts probing; an error is logged and reported by collect().
  void start() {
    if (started_) return;
    started_ = true;
    if (!config_.udp_listen.empty()) open_responder();
    for (const auto& target : config_.targets) {
      try {
        peers_.push_back(std::make_unique<Peer>(target, parse_endpoint(target.address),
                                                config_.spike, config_.window, io_));
      } catch (const std::exception& e) {
        errors_.push_back("target " + target.address + ": " + e.what());
      }
    }
    if (peers_.empty()) return;
    boost::system::error_code ec;
    socket_.open(peers_.front()->endpoint.protocol(), ec);
    if (ec) {
      errors_.push_back("cannot open the probe socket: " + ec.message());
      return;
    }
    enable_timestamps(socket_.native_handle());
    receive();
    // Never more than max_probes_per_second in all: stretch every peer's interval if needed.
    auto interval = config_.probe_interval;
    auto floor = std::chrono::nanoseconds(static_cast<std::int64_t>(
        1e9 * static_cast<double>(peers_.size()) / config_.max_probes_per_second));
    if (floor > interval) {
      spdlog::warn("probe: {} peers at max_probes_per_second {} stretch the probe interval to {}",
                   peers_.size(), config_.max_probes_per_second, format_duration(floor));
      interval = floor;
    }
    interval_ = interval;
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      // Spread the peers over one interval rather than probing them all at once.
      schedule(i,
               interval * static_cast<std::int64_t>(i) / static_cast<std::int64_t>(peers_.size()));
    }
    arm_sweep();
  }

  void stop() {
    boost::system::error_code ec;
    socket_.close(ec);
    responder_.close(ec);
    sweep_.cancel();
    for (auto& peer : peers_) peer->timer.cancel();
  }

  void fill(MetricsBuilder& out, CollectResult& result) {
    for (const auto& e : errors_) {
      result.success = false;
      result.error += (result.error.empty() ? "" : "; ") + e;
    }
    out.counter("ibfabric_probe_responder_requests_total",
                "Probe requests this daemon's UDP responder answered.", {},
                static_cast<double>(responder_requests_));
    out.gauge("ibfabric_probe_interval_seconds",
              "Time between two probes to one peer, after the max_probes_per_second cap.", {},
              std::chrono::duration<double>(interval_).count());
    for (const auto& peer : peers_) {
      const auto& s = peer->stats;
      Labels l{{"peer", peer->target.name}, {"transport", "udp"}};
      out.counter("ibfabric_probe_sent_total", "Probes sent to the peer.", l,
                  static_cast<double>(s.sent()));
      out.counter("ibfabric_probe_received_total", "Probe replies received in time.", l,
                  static_cast<double>(s.received()));
      out.counter("ibfabric_probe_lost_total", "Probes without a reply within the timeout.", l,
                  static_cast<double>(s.lost()));
      out.counter("ibfabric_probe_spikes_total",
                  "Probes whose RTT exceeded spike_multiplier x the peer's rolling baseline "
                  "median and the absolute spike_floor.",
                  l, static_cast<double>(s.spikes()));
      const auto& bounds = rtt_buckets();
      out.histogram("ibfabric_probe_rtt_seconds", "Round-trip time of answered probes.", l, bounds,
                    s.bucket_counts(), s.received(), s.sum());
      out.histogram("ibfabric_probe_network_rtt_seconds",
                    "Round-trip time minus the time the responder held the probe: the "
                    "network's share.",
                    l, bounds, s.network_bucket_counts(), s.network_count(), s.network_sum());
      if (auto v = s.last_rtt()) {
        out.gauge("ibfabric_probe_last_rtt_seconds", "RTT of the latest answered probe.", l, *v);
      }
      if (auto v = s.last_network()) {
        out.gauge("ibfabric_probe_last_network_rtt_seconds",
                  "RTT minus responder hold time of the latest answered probe.", l, *v);
      }
      const char* window_help = "RTT over the latest `window` answered probes, by statistic.";
      for (auto [stat, q] : {std::pair{"p50", 0.5}, std::pair{"p99", 0.99}}) {
        if (auto v = s.percentile(q)) {
          Labels w = l;
          w.emplace_back("stat", stat);
          out.gauge("ibfabric_probe_rtt_window_seconds", window_help, w, *v);
        }
      }
      if (auto v = s.max()) {
        Labels w = l;
        w.emplace_back("stat", "max");
        out.gauge("ibfabric_probe_rtt_window_seconds", window_help, w, *v);
      }
      out.gauge("ibfabric_probe_jitter_seconds",
                "RFC 3550 jitter of consecutive RTTs: J += (|D| - J) / 16.", l, s.jitter());
      if (auto v = s.baseline()) {
        out.gauge("ibfabric_probe_baseline_rtt_seconds",
                  "Median RTT of the peer's recent non-spike probes, the spike rule's baseline.", l,
                  *v);
      }
    }
  }

 private:
  struct Peer {
    Peer(TargetConfig t, udp::endpoint e, SpikeRule rule, std::size_t window, asio::io_context& io)
        : target(std::move(t)), endpoint(e), stats(rule, window), timer(io) {}
    TargetConfig target;
    udp::endpoint endpoint;
    PeerStats stats;
    asio::steady_timer timer;
    std::uint32_t next_sequence = 1;
    std::map<std::uint32_t, Clock::time_point> pending;  // sequence -> sent at
  };

  void open_responder() {
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
      errors_.push_back("responder on " + config_.udp_listen + ": " + e.what() +
                        " (choose another udp_listen, or \"\" for none)");
    }
  }

  void respond() {
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

  void schedule(std::size_t i, std::chrono::nanoseconds after) {
    auto& peer = *peers_[i];
    peer.timer.expires_after(after);
    peer.timer.async_wait([self = shared_from_this(), i](const boost::system::error_code& ec) {
      if (ec) return;
      self->send(i);
      self->schedule(i, self->interval_);
    });
  }

  void send(std::size_t i) {
    auto& peer = *peers_[i];
    Message m;
    m.sequence = peer.next_sequence++;
    m.token = token_;
    auto buffer = std::make_shared<std::vector<std::uint8_t>>(
        std::max(config_.payload_bytes, kHeaderBytes), 0);
    encode(m, buffer->data());
    peer.pending[m.sequence] = Clock::now();
    peer.stats.add_sent();
    socket_.async_send_to(asio::buffer(*buffer), peer.endpoint,
                          [buffer](const boost::system::error_code&, std::size_t) {});
  }

  void receive() {
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

  void on_reply(Clock::time_point now, std::size_t n) {
    auto m = decode(buffer_.data(), n);
    if (!m || !m->reply || m->token != token_) return;
    for (auto& peer : peers_) {
      if (peer->endpoint != from_) continue;
      auto it = peer->pending.find(m->sequence);
      if (it == peer->pending.end()) return;  // late: already counted lost
      auto rtt = std::chrono::duration_cast<std::chrono::nanoseconds>(now - it->second);
      peer->pending.erase(it);
      if (rtt.count() < 0 || rtt > std::chrono::seconds(10)) return;  // a clock step
      auto hold = std::chrono::nanoseconds(static_cast<std::int64_t>(m->hold_ns));
      if (peer->stats.add(rtt, rtt - std::min(hold, rtt))) {
        spdlog::warn("probe: RTT spike peer={} transport=udp rtt_us={:.1f} baseline_us={:.1f}",
                     peer->target.name, std::chrono::duration<double, std::micro>(rtt).count(),
                     peer->stats.baseline().value_or(0) * 1e6);
      }
      return;
    }
  }

  // Probes older than the timeout are lost; checked a few times per timeout.
  void arm_sweep() {
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

  asio::io_context& io_;
  ProbeConfig config_;
  udp::socket socket_;     // the prober's
  udp::socket responder_;  // the responder's
  asio::steady_timer sweep_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<std::string> errors_;
  std::array<std::uint8_t, kMaxDatagram> buffer_{}, responder_buffer_{};
  udp::endpoint from_, responder_peer_;
  std::uint64_t token_ = 0;
  std::uint64_t responder_requests_ = 0;
  std::chrono::nanoseconds interval_{0};
  bool started_ = false;
};

class ProbeCollector final : public Collector {
 public:
  ProbeCollector(asio::io_context& io, ProbeConfig config)
      : prober_(std::make_shared<Prober>(io, std::move(config))) {}
  ~ProbeCollector() override { prober_->stop(); }

  void collect(Done done) override {
    prober_->start();
    MetricsBuilder out;
    CollectResult result;
    prober_->fill(out, result);
    result.metrics = std::move(out).take();
    done(std::move(result));
  }

 private:
  std::shared_ptr<Prober> prober_;
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
                                       std::size_t max_peers) {
  if (targets.size() <= max_peers) return targets;
  std::stable_sort(targets.begin(), targets.end(), [&](const auto& a, const auto& b) {
    return fnv1a(self + "|" + a.name) < fnv1a(self + "|" + b.name);
  });
  targets.resize(max_peers);
  return targets;
}

CollectorSpec spec() {
  return CollectorSpec{
      "probe", false, std::chrono::seconds(15),
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
        for (auto& t : section.get_section_list("targets")) {
          TargetConfig target;
          target.address = t.get_string("address", "");
          if (target.address.empty()) t.fail("address", "a target needs an address (IP:PORT)");
          try {
            parse_endpoint(target.address);
          } catch (const std::exception& e) {
            t.fail("address", e.what());
          }
          target.name = t.get_string("name", target.address);
          t.finish();
          c.targets.push_back(std::move(target));
        }
        c.probe_interval =
            section.get_duration("probe_interval", c.probe_interval, std::chrono::milliseconds(1));
        c.timeout = section.get_duration("timeout", c.timeout, std::chrono::milliseconds(1));
        c.payload_bytes = static_cast<std::size_t>(section.get_int(
            "payload_bytes", static_cast<std::int64_t>(c.payload_bytes), kHeaderBytes, 8192));
        c.max_peers = static_cast<std::size_t>(
            section.get_int("max_peers", static_cast<std::int64_t>(c.max_peers), 1, 4096));
        c.max_probes_per_second =
            section.get_double("max_probes_per_second", c.max_probes_per_second, 0.1, 100000);
        c.window = static_cast<std::size_t>(
            section.get_int("window", static_cast<std::int64_t>(c.window), 1, 100000));
        c.spike.multiplier = section.get_double("spike_multiplier", c.spike.multiplier, 1, 1000);
        c.spike.floor = section.get_duration("spike_floor", c.spike.floor);
        c.spike.baseline_window = static_cast<std::size_t>(section.get_int(
            "baseline_window", static_cast<std::int64_t>(c.spike.baseline_window), 1, 100000));
        section.finish();
        c.targets = choose_peers(self_name(), std::move(c.targets), c.max_peers);
        return std::make_unique<ProbeCollector>(context.io, std::move(c));
      }};
}

}  // namespace ibfabric::probe
