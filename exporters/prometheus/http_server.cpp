#include "exporters/prometheus/http_server.h"

#include "exporters/prometheus/basic_auth.h"
#include "exporters/prometheus/connection_table.h"
#include "ibfabric/version.h"

#include <spdlog/spdlog.h>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <map>
#include <optional>
#include <stdexcept>

namespace ibfabric {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
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

std::shared_ptr<ssl::context> make_tls_context(const TlsConfig& t) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, t.min_version == 13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(native, t.max_version == 13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_compression |
                   ssl::context::single_dh_use);
  auto load = [](const std::string& what, const std::string& file, auto&& fn) {
    try {
      fn();
    } catch (const boost::system::system_error& e) {
      throw std::runtime_error("cannot load the TLS " + what + " \"" + file + "\": " + e.what());
    }
  };
  load("certificate", t.cert_file, [&] { ctx->use_certificate_chain_file(t.cert_file); });
  load("key", t.key_file, [&] { ctx->use_private_key_file(t.key_file, ssl::context::pem); });
  if (SSL_CTX_check_private_key(native) != 1) {
    throw std::runtime_error("the TLS key \"" + t.key_file +
                             "\" does not match the certificate \"" + t.cert_file + "\"");
  }
  if (!t.client_ca_file.empty()) {
    load("client CA", t.client_ca_file, [&] { ctx->load_verify_file(t.client_ca_file); });
  }
  auto accept_any = [](bool, ssl::verify_context&) { return true; };
  switch (t.client_auth) {
    case ClientAuth::none:
      ctx->set_verify_mode(ssl::verify_none);
      break;
    case ClientAuth::request:
      ctx->set_verify_mode(ssl::verify_peer);
      ctx->set_verify_callback(accept_any);
      break;
    case ClientAuth::require_any:
      ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
      ctx->set_verify_callback(accept_any);
      break;
    case ClientAuth::verify_if_given:
      ctx->set_verify_mode(ssl::verify_peer);
      break;
    case ClientAuth::require_and_verify:
      ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
      break;
  }
  return ctx;
}

// What a connection is served with, fixed when it is accepted; a reload makes a new one.
struct Settings {
  std::shared_ptr<ssl::context> tls;  // null: plain HTTP
  std::shared_ptr<BasicAuth> auth;    // null: no auth
  std::map<std::string, std::string> headers;
};

// Paths for health checks. They reveal no metric and are answered without basic auth, so that
// probes need no credentials and cost no bcrypt (docs/security.md).
constexpr std::string_view kHealthyPath = "/-/healthy";
constexpr std::string_view kReadyPath = "/-/ready";

std::string_view path_of(const http::request<http::empty_body>& req) {
  std::string_view target(req.target().data(), req.target().size());
  return target.substr(0, target.find('?'));
}

std::shared_ptr<const Settings> make_settings(const WebConfig& web) {
  auto settings = std::make_shared<Settings>();
  if (web.tls) settings->tls = make_tls_context(*web.tls);
  if (!web.basic_auth_users.empty()) {
    settings->auth = std::make_shared<BasicAuth>(web.basic_auth_users);
  }
  settings->headers = web.headers;
  return settings;
}

}  // namespace

class HttpServer::Impl : public std::enable_shared_from_this<HttpServer::Impl> {
 public:
  Impl(asio::io_context& io, HttpServerOptions options, RenderMetrics render)
      : io_(io),
        acceptor_(io),
        options_(std::move(options)),
        render_(std::move(render)),
        settings_(make_settings(options_.web)),
        limits_(options_.limits) {}

  // Ends the auth thread before the io_context can go away: a bcrypt check finishing later
  // would post into a destroyed loop.
  void shutdown() {
    close();
    auth_pool_.stop();
    auth_pool_.join();
  }

  void set_web_config(const WebConfig& web) { settings_ = make_settings(web); }
  void set_limits(const WebLimits& limits) { limits_ = limits; }

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
          if (!ec) self->serve(std::move(socket));
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
  using State = ConnectionTable::State;
  using ConnectionBase = ConnectionTable::Connection;

  template <class Stream>
  struct Connection : ConnectionBase {
    template <class... Args>
    Connection(std::shared_ptr<const Settings> s, Args&&... args)
        : stream(std::forward<Args>(args)...), settings(std::move(s)) {}
    void abort() override { beast::get_lowest_layer(stream).close(); }
    Stream stream;
    std::shared_ptr<const Settings> settings;
    beast::flat_buffer buffer{8192};
    std::optional<http::request_parser<http::empty_body>> parser;
    http::response<http::string_body> response;
    // A streamed response: its header, then the body as it is produced (chunked in HTTP/1.1,
    // up to the close in HTTP/1.0).
    std::unique_ptr<ScrapeBody> body;
    std::optional<http::response<http::empty_body>> head;
    std::optional<http::response_serializer<http::empty_body>> serializer;
    std::string chunk;
  };
  using PlainConnection = Connection<beast::tcp_stream>;
  using TlsConnection = Connection<beast::ssl_stream<beast::tcp_stream>>;

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
    boost::system::error_code ec;
    auto remote = socket.remote_endpoint(ec);
    if (ec) return;  // gone already
    if (!table_.admit(remote.address(), limits_)) {
      socket.close(ec);
      return;
    }
    auto settings = settings_;
    if (!settings->tls) {
      auto connection = std::make_shared<PlainConnection>(settings, std::move(socket));
      table_.enter(connection, remote.address(), State::headers);
      read_request(connection);
      return;
    }
    auto connection = std::make_shared<TlsConnection>(settings, std::move(socket), *settings->tls);
    table_.enter(connection, remote.address(), State::tls_handshake);
    beast::get_lowest_layer(connection->stream).expires_after(limits_.tls_handshake_timeout);
    connection->stream.async_handshake(
        ssl::stream_base::server, [self = shared_from_this(), connection](beast::error_code ec) {
          if (ec) {
            if (!connection->entry) {
              // evicted
            } else if (ec == beast::error::timeout) {
              ++self->stats_.tls_handshake_timeouts;
            } else {
              // Plain HTTP to the TLS port, an untrusted client certificate, a scanner.
              ++self->stats_.tls_handshake_failures;
              spdlog::debug("msg=\"TLS handshake failed\" error=\"{}\"", ec.message());
            }
            self->done(connection);
            return;
          }
          self->read_request(connection);
        });
  }

  template <class C>
  void done(const std::shared_ptr<C>& connection) {
    table_.leave(*connection);
    boost::system::error_code ec;
    auto& socket = beast::get_lowest_layer(connection->stream).socket();
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  // Bytes of the next request already read (a pipelined request)?
  static bool has_input(const PlainConnection& connection) { return connection.buffer.size() > 0; }
  static bool has_input(TlsConnection& connection) {
    return connection.buffer.size() > 0 || SSL_pending(connection.stream.native_handle()) > 0;
  }

  // Between two requests of a keep-alive connection: idle until the next request's first byte,
  // then its headers are due within header_timeout.
  template <class C>
  void await_request(const std::shared_ptr<C>& connection) {
    if (has_input(*connection)) {
      read_request(connection);
      return;
    }
    ConnectionTable::set_state(*connection, State::idle);
    beast::get_lowest_layer(connection->stream).expires_after(limits_.idle_timeout);
    connection->stream.async_read_some(
        connection->buffer.prepare(4096),
        [self = shared_from_this(), connection](beast::error_code ec, std::size_t n) {
          if (ec || !connection->entry) {
            if (ec == beast::error::timeout && connection->entry) ++self->stats_.idle_timeouts;
            self->done(connection);
            return;
          }
          connection->buffer.commit(n);
          self->read_request(connection);
        });
  }

  // One request's headers, due within header_timeout from now: from accept, from the end of
  // the TLS handshake, or from the first byte after an idle keep-alive.
  template <class C>
  void read_request(const std::shared_ptr<C>& connection) {
    ConnectionTable::set_state(*connection, State::headers);
    connection->parser.emplace();
    connection->parser->header_limit(8 * 1024);
    connection->parser->body_limit(0);
    beast::get_lowest_layer(connection->stream).expires_after(limits_.header_timeout);
    http::async_read(connection->stream, connection->buffer, *connection->parser,
                     [self = shared_from_this(), connection](beast::error_code ec, std::size_t) {
                       if (!connection->entry) {  // evicted
                         self->done(connection);
                         return;
                       }
                       ConnectionTable::set_state(*connection, State::busy);
                       if (ec) {
                         // The client hung up, before or in the middle of its request: nobody
                         // reads a 400, and writing one would hold the connection busy, where
                         // no cap can evict it for a new scrape.
                         const bool hung_up = ec == http::error::end_of_stream ||
                                              ec == http::error::partial_message ||
                                              ec == asio::error::connection_reset ||
                                              ec == asio::ssl::error::stream_truncated;
                         if (ec == beast::error::timeout) {
                           ++self->stats_.header_timeouts;
                         } else if (!hung_up) {
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

  template <class C>
  void respond_error(const std::shared_ptr<C>& connection, http::status status, std::string body) {
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

  template <class C>
  void handle(const std::shared_ptr<C>& connection) {
    const auto& auth = connection->settings->auth;
    const auto& req = connection->parser->get();
    if (!auth || path_of(req) == kHealthyPath || path_of(req) == kReadyPath) {
      respond(connection);
      return;
    }
    auto header = req[http::field::authorization];
    auto credentials = BasicAuth::parse_header(std::string_view(header.data(), header.size()));
    if (!credentials) {
      unauthorized(connection);
      return;
    }
    asio::post(auth_pool_, [self = shared_from_this(), connection, auth,
                            credentials = std::move(*credentials)] {
      bool ok = auth->verify(credentials.first, credentials.second);
      asio::post(self->io_, [self, connection, ok] {
        if (!ok) {
          spdlog::debug("msg=\"HTTP basic auth failed\"");
          self->unauthorized(connection);
          return;
        }
        self->respond(connection);
      });
    });
  }

  template <class C>
  void unauthorized(const std::shared_ptr<C>& connection) {
    ++stats_.unauthorized;
    auto& res = connection->response;
    res = {};
    res.version(connection->parser->get().version());
    res.result(http::status::unauthorized);
    res.set(http::field::www_authenticate, "Basic realm=\"ibfabricd\", charset=\"UTF-8\"");
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.keep_alive(connection->parser->get().keep_alive());
    res.body() = "unauthorized\n";
    finish_response(connection);
  }

  template <class C>
  void respond(const std::shared_ptr<C>& connection) {
    const auto& req = connection->parser->get();
    auto& res = connection->response;
    res = {};
    res.version(req.version());
    res.keep_alive(req.keep_alive());
    res.set(http::field::server, std::string("ibfabricd/") + kVersion);
    std::string_view target = path_of(req);
    std::string_view full(req.target().data(), req.target().size());
    auto question = full.find('?');
    std::string_view query = question == std::string_view::npos ? "" : full.substr(question + 1);
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      ++stats_.bad_method;
      res.result(http::status::method_not_allowed);
      res.set(http::field::allow, "GET, HEAD");
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = "method not allowed: use GET\n";
    } else if (target == "/metrics") {
      auto accept = req[http::field::accept_encoding];
      auto scrape = render_(ScrapeRequest{query, std::string_view(accept.data(), accept.size())});
      res.set(http::field::vary, "Accept-Encoding");
      if (scrape.status != 200) {
        ++stats_.bad_request;  // a bad collect[]: node_exporter answers 400 too
        res.result(http::status::bad_request);
        res.set(http::field::content_type, "text/plain; charset=utf-8");
      } else {
        ++stats_.ok;
        res.result(http::status::ok);
        res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        if (scrape.gzip) res.set(http::field::content_encoding, "gzip");
      }
      res.body() = std::move(scrape.body);
      connection->body = std::move(scrape.stream);
    } else if (auto doc = options_.documents.find(std::string(target));
               doc != options_.documents.end()) {
      ++stats_.ok;
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = doc->second(query);
    } else if (target == "/") {
      ++stats_.ok;
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/html; charset=utf-8");
      std::string page = kLandingPage;
      page.replace(page.find("{version}"), 9, kVersion);
      res.body() = std::move(page);
    } else if (target == kHealthyPath) {
      // Answered on the event loop: a loop that is stuck does not answer.
      ++stats_.ok;
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = "ibfabricd is healthy.\n";
    } else if (target == kReadyPath) {
      std::vector<std::string> waiting;
      if (options_.not_ready) waiting = options_.not_ready();
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      if (waiting.empty()) {
        ++stats_.ok;
        res.result(http::status::ok);
        res.body() = "ibfabricd is ready.\n";
      } else {
        ++stats_.unavailable;
        res.result(http::status::service_unavailable);
        std::string body = "not ready: no collection yet from";
        for (std::size_t i = 0; i < waiting.size(); ++i) body += (i ? ", " : " ") + waiting[i];
        res.body() = body + "\n";
      }
    } else {
      ++stats_.not_found;
      res.result(http::status::not_found);
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = "not found: try /metrics\n";
    }
    finish_response(connection);
  }

  template <class C>
  void finish_response(const std::shared_ptr<C>& connection) {
    auto& res = connection->response;
    for (const auto& [name, value] : connection->settings->headers) res.set(name, value);
    if (connection->body) {
      stream_response(connection);
      return;
    }
    res.prepare_payload();
    if (connection->parser->get().method() == http::verb::head) {
      auto length = res.body().size();
      res.body().clear();
      res.content_length(length);
    }
    write(connection);
  }

  // The header now, then the body a slice at a time: the exporter renders (or copies) the next
  // slice only when the socket took the last one, so a scrape never holds its whole text. The
  // write timeout bounds the whole response.
  template <class C>
  void stream_response(const std::shared_ptr<C>& connection) {
    auto& res = connection->response;
    auto& head = connection->head.emplace(res.result(), res.version());
    head.base() = res.base();
    if (res.version() >= 11) {
      head.chunked(true);
    } else {
      head.keep_alive(false);  // HTTP/1.0: the body ends where the connection does
    }
    if (connection->parser->get().method() == http::verb::head) connection->body.reset();
    auto& serializer = connection->serializer.emplace(head);
    beast::get_lowest_layer(connection->stream).expires_after(options_.write_timeout);
    http::async_write_header(
        connection->stream, serializer,
        [self = shared_from_this(), connection](beast::error_code ec, std::size_t) {
          self->stream_next(connection, ec);
        });
  }

  template <class C>
  void stream_next(const std::shared_ptr<C>& connection, beast::error_code ec) {
    auto after = [self = shared_from_this(), connection](beast::error_code e, std::size_t) {
      self->stream_next(connection, e);
    };
    if (!ec && connection->body) {
      auto& chunk = connection->chunk;
      chunk.clear();
      bool more = true;
      try {
        while (more && chunk.empty()) more = connection->body->next(chunk);
      } catch (const std::exception& e) {
        // A body cut short is all the client can be told once the header is out.
        spdlog::error("msg=\"scrape body failed\" error=\"{}\"", e.what());
        connection->body.reset();
        done(connection);
        return;
      }
      if (more) {
        if (connection->head->chunked()) {
          asio::async_write(connection->stream, http::make_chunk(asio::buffer(chunk)), after);
        } else {
          asio::async_write(connection->stream, asio::buffer(chunk), after);
        }
        return;
      }
      connection->body.reset();  // done: release the snapshots it held
      bool head_only = connection->parser->get().method() == http::verb::head;
      if (connection->head->chunked() && !head_only) {
        asio::async_write(connection->stream, http::make_chunk_last(), after);
        return;
      }
    }
    connection->body.reset();
    connection->serializer.reset();
    bool keep_alive = connection->head && connection->head->keep_alive();
    connection->head.reset();
    if (ec == beast::error::timeout) ++stats_.write_timeouts;
    if (ec || !keep_alive) {
      done(connection);
      return;
    }
    await_request(connection);
  }

  template <class C>
  void write(const std::shared_ptr<C>& connection) {
    beast::get_lowest_layer(connection->stream).expires_after(options_.write_timeout);
    http::async_write(connection->stream, connection->response,
                      [self = shared_from_this(), connection](beast::error_code ec, std::size_t) {
                        if (ec == beast::error::timeout) ++self->stats_.write_timeouts;
                        if (ec || !connection->response.keep_alive()) {
                          self->done(connection);
                          return;
                        }
                        self->await_request(connection);
                      });
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  HttpServerOptions options_;
  RenderMetrics render_;
  std::shared_ptr<const Settings> settings_;
  // bcrypt runs here, never on the event loop; one thread bounds the CPU a flood can take.
  asio::thread_pool auth_pool_{1};
  WebLimits limits_;
  Stats stats_;
  ConnectionTable table_{stats_};
};

HttpServer::HttpServer(asio::io_context& io, HttpServerOptions options, RenderMetrics render)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(render))) {
  impl_->listen();
  impl_->accept();
}

HttpServer::~HttpServer() { impl_->shutdown(); }

std::uint16_t HttpServer::port() const { return impl_->port(); }
void HttpServer::close() { impl_->close(); }
void HttpServer::set_web_config(const WebConfig& web) { impl_->set_web_config(web); }
void HttpServer::set_limits(const WebLimits& limits) { impl_->set_limits(limits); }

const char* HttpServer::cap_name(Stats::Cap cap) {
  return cap == Stats::total_cap ? "max_connections" : "max_connections_per_client";
}

const char* HttpServer::phase_name(Stats::Phase phase) {
  switch (phase) {
    case Stats::tls_handshake:
      return "tls_handshake";
    case Stats::headers:
      return "headers";
    default:
      return "idle";
  }
}
const HttpServer::Stats& HttpServer::stats() const { return impl_->stats(); }

}  // namespace ibfabric
