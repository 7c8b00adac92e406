#pragma once
// The HTTP endpoint, on the daemon's io_context: `/metrics` (exposition text) and a landing
// page at `/`. Requests are small GETs; anything slow, large or malformed is cut off.
// Optionally TLS and basic auth from a web config file (web_config.h); bcrypt checks run on a
// worker thread so that a flood of bad passwords never stalls the event loop.

#include "exporters/prometheus/render.h"
#include "exporters/prometheus/web_config.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ibfabric {

struct HttpServerOptions {
  std::string listen_address;  // HOST:PORT, [V6]:PORT or :PORT
  std::chrono::seconds request_timeout{30};
  std::size_t max_connections = 64;
  WebConfig web;  // default: plain HTTP, no auth
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

  // Requests served since start, by response code (for self-metrics).
  struct Stats {
    std::uint64_t ok = 0, not_found = 0, bad_method = 0, bad_request = 0, unauthorized = 0;
    std::uint64_t rejected = 0, tls_handshake_failures = 0;
  };
  const Stats& stats() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace ibfabric
