#include "exporters/prometheus/http_server.h"

#include "ibfabric/version.h"

#include <spdlog/spdlog.h>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <boost/asio/ip/v6_only.hpp>

#include <optional>
#include <stdexcept>

namespace ibfabric {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr const char* kLandingPage = R"(<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>ibfabricd</title></head>
<body>
<h1>ibfabricd</h1>
<p>InfiniBand fabric monitor, version {version}.</p>
<p><a href="/metrics">Metrics</a></p>
</body>
</html>
)";

tcp::endpoint parse_endpoint(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("expected HOST:PORT");
  std::string host = address.substr(0, colon);
  auto port = static_cast<std::uint16_t>(std::stoul(address.substr(colon + 1)));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) return {tcp::v6(), port};
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("\"" + host + "\" is not an IP address");
  return {ip, port};
}

}  // namespace

class HttpServer::Impl : public std::enable_shared_from_this<HttpServer::Impl> {
 public:
  Impl(asio::io_context& io, HttpServerOptions options, RenderMetrics render)
      : io_(io), acceptor_(io), options_(std::move(options)), render_(std::move(render)) {}

  void listen() {
    tcp::endpoint endpoint;
    try {
      endpoint = parse_endpoint(options_.listen_address);
    } catch (const std::exception& e) {
      throw std::runtime_error("web listen address \"" + options_.listen_address +
                               "\": " + e.what());
    }
    boost::system::error_code ec;
    bool any = options_.listen_address.starts_with(':');
    if (!open_and_bind(endpoint, any, ec) && any) {
      // No IPv6 on this host: all IPv4 addresses instead.
      endpoint = tcp::endpoint(tcp::v4(), endpoint.port());
      open_and_bind(endpoint, false, ec);
    }
    if (ec) {
      throw std::runtime_error("cannot listen on " + options_.listen_address + ": " + ec.message() +
                               " (is another process using the port? choose another with "
                               "--web.listen-address)");
    }
  }

  void accept() {
    acceptor_.async_accept(
        [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
          if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
          if (!ec) {
            if (self->open_connections_ >= self->options_.max_connections) {
              ++self->stats_.rejected;
              socket.close(ec);  // shed load instead of queueing unboundedly
            } else {
              self->serve(std::move(socket));
            }
          }
          self->accept();
        });
  }

  void close() {
    boost::system::error_code ec;
    acceptor_.close(ec);
  }

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  const Stats& stats() const { return stats_; }

 private:
  struct Connection {
    explicit Connection(tcp::socket socket) : stream(std::move(socket)) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer{8192};
    std::optional<http::request_parser<http::empty_body>> parser;
    http::response<http::string_body> response;
  };

  bool open_and_bind(const tcp::endpoint& endpoint, bool dual_stack,
                     boost::system::error_code& ec) {
    if (acceptor_.is_open()) acceptor_.close(ec);
    ec.clear();
    acceptor_.open(endpoint.protocol(), ec);
    if (ec) return false;
    acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (dual_stack) acceptor_.set_option(asio::ip::v6_only(false), ec);
    ec.clear();
    acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    return !ec;
  }

  void serve(tcp::socket socket) {
    ++open_connections_;
    auto connection = std::make_shared<Connection>(std::move(socket));
    read(connection);
  }

  void done(const std::shared_ptr<Connection>& connection) {
    boost::system::error_code ec;
    connection->stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    connection->stream.close();
    --open_connections_;
  }

  void read(const std::shared_ptr<Connection>& connection) {
    connection->parser.emplace();
    connection->parser->header_limit(8 * 1024);
    connection->parser->body_limit(0);
    connection->stream.expires_after(options_.request_timeout);
    http::async_read(connection->stream, connection->buffer, *connection->parser,
                     [self = shared_from_this(), connection](beast::error_code ec, std::size_t) {
                       if (ec) {
                         if (ec != http::error::end_of_stream && ec != beast::error::timeout &&
                             ec != asio::error::connection_reset) {
                           ++self->stats_.bad_request;
                           self->respond_error(connection, http::status::bad_request,
                                               "bad request: " + ec.message() + "\n");
                           return;
                         }
                         self->done(connection);
                         return;
                       }
                       self->handle(connection);
                     });
  }

  void respond_error(const std::shared_ptr<Connection>& connection, http::status status,
                     std::string body) {
    auto& res = connection->response;
    res = {};
    res.version(11);
    res.result(status);
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.keep_alive(false);
    res.body() = std::move(body);
    res.prepare_payload();
    write(connection);
  }

  void handle(const std::shared_ptr<Connection>& connection) {
    const auto& req = connection->parser->get();
    auto& res = connection->response;
    res = {};
    res.version(req.version());
    res.keep_alive(req.keep_alive());
    res.set(http::field::server, std::string("ibfabricd/") + kVersion);
    std::string_view target(req.target().data(), req.target().size());
    target = target.substr(0, target.find('?'));
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      ++stats_.bad_method;
      res.result(http::status::method_not_allowed);
      res.set(http::field::allow, "GET, HEAD");
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = "method not allowed: use GET\n";
    } else if (target == "/metrics") {
      ++stats_.ok;
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = render_();
    } else if (target == "/") {
      ++stats_.ok;
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/html; charset=utf-8");
      std::string page = kLandingPage;
      page.replace(page.find("{version}"), 9, kVersion);
      res.body() = std::move(page);
    } else {
      ++stats_.not_found;
      res.result(http::status::not_found);
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = "not found: try /metrics\n";
    }
    res.prepare_payload();
    if (req.method() == http::verb::head) {
      auto length = res.body().size();
      res.body().clear();
      res.content_length(length);
    }
    write(connection);
  }

  void write(const std::shared_ptr<Connection>& connection) {
    connection->stream.expires_after(options_.request_timeout);
    http::async_write(connection->stream, connection->response,
                      [self = shared_from_this(), connection](beast::error_code ec, std::size_t) {
                        if (ec || !connection->response.keep_alive()) {
                          self->done(connection);
                          return;
                        }
                        self->read(connection);
                      });
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  HttpServerOptions options_;
  RenderMetrics render_;
  std::size_t open_connections_ = 0;
  Stats stats_;
};

HttpServer::HttpServer(asio::io_context& io, HttpServerOptions options, RenderMetrics render)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(render))) {
  impl_->listen();
  impl_->accept();
}

HttpServer::~HttpServer() { impl_->close(); }

std::uint16_t HttpServer::port() const { return impl_->port(); }
void HttpServer::close() { impl_->close(); }
const HttpServer::Stats& HttpServer::stats() const { return impl_->stats(); }

}  // namespace ibfabric
