#pragma once
// The HTTP endpoint, on the daemon's io_context: `/metrics` (exposition text) and a landing
// page at `/`. Requests are small GETs; anything slow, large or malformed is cut off.

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
};

class HttpServer {
 public:
  using RenderMetrics = std::function<std::string()>;
  // Binds and listens; throws std::runtime_error naming the address when it cannot.
  HttpServer(boost::asio::io_context& io, HttpServerOptions options, RenderMetrics render);
  ~HttpServer();

  std::uint16_t port() const;
  void close();

  // Requests served since start, by response code (for self-metrics).
  struct Stats {
    std::uint64_t ok = 0, not_found = 0, bad_method = 0, bad_request = 0, rejected = 0;
  };
  const Stats& stats() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace ibfabric
