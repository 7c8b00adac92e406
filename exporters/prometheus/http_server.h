#pragma once
// The HTTP endpoint, on the daemon's io_context: `/metrics` (exposition text), a landing page at
// `/`, and `/-/healthy` and `/-/ready` for probes. Requests are small GETs; anything slow, large
// or malformed is cut off, and no client can hold the connection slots scrapes need: a cap per
// client address, deadlines for a TLS handshake, a request's headers and an idle keep-alive,
// and at the total cap the oldest idle or incomplete connection makes way for a new one.
// Optionally TLS and basic auth from a web config file (web_config.h); bcrypt checks run on a
// worker thread so that a flood of bad passwords never stalls the event loop.

#include "config/config.h"
#include "exporters/prometheus/render.h"
#include "exporters/prometheus/web_config.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ibfabric {

struct HttpServerOptions {
  std::string listen_address;  // HOST:PORT, [V6]:PORT or :PORT
  WebLimits limits;
  std::chrono::nanoseconds write_timeout = std::chrono::seconds(30);  // to write one response
  WebConfig web;  // default: plain HTTP, no auth
  // `/-/ready`: the names of what is not ready yet (collectors that have not published once);
  // empty means ready. Unset: always ready.
  std::function<std::vector<std::string>()> not_ready;
  // Further plain-text documents, by path (ibfabric-localize's /probe-plan): the query string
  // in, the body out, answered on the loop (keep them cheap). None by default.
  std::map<std::string, std::function<std::string(std::string_view query)>> documents;
};

class HttpServer {
 public:
  // Serves /metrics: gets the query string and Accept-Encoding.
  using RenderMetrics = std::function<ScrapeResponse(const ScrapeRequest&)>;
  // Binds and listens; throws std::runtime_error naming the address when it cannot.
  HttpServer(boost::asio::io_context& io, HttpServerOptions options, RenderMetrics render);
  ~HttpServer();

  std::uint16_t port() const;
  void close();
  // TLS and auth settings for connections accepted from now on (SIGHUP: rotated certificates).
  // Throws std::runtime_error when the certificate or key cannot be loaded; the old settings stay.
  void set_web_config(const WebConfig& web);
  // Caps and deadlines for what happens from now on (SIGHUP); open connections stay.
  void set_limits(const WebLimits& limits);

  // Requests served since start, by response code (for self-metrics).
  struct Stats {
    std::uint64_t ok = 0, not_found = 0, bad_method = 0, bad_request = 0, unauthorized = 0;
    std::uint64_t rejected = 0, tls_handshake_failures = 0;
    std::uint64_t unavailable = 0;  // 503 from /-/ready
    // Which cap a connection met: max_connections or max_connections_per_client.
    enum Cap { total_cap, client_cap, kCaps };
    // What an evicted connection was doing.
    enum Phase { tls_handshake, headers, idle, kPhases };
    std::uint64_t rejected_per_client = 0;  // `rejected` counts the total cap
    std::array<std::array<std::uint64_t, kPhases>, kCaps> evicted{};
    // Connections closed at a deadline: a handshake, a request's headers, an idle keep-alive,
    // or writing a response.
    std::uint64_t tls_handshake_timeouts = 0, header_timeouts = 0, idle_timeouts = 0,
                  write_timeouts = 0;
    std::uint64_t open_connections = 0;
  };
  static const char* cap_name(Stats::Cap cap);
  static const char* phase_name(Stats::Phase phase);
  const Stats& stats() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace ibfabric
