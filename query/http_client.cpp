#include "query/http_client.h"

#include "core/http_url.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <openssl/ssl.h>

#include <optional>
#include <stdexcept>

namespace ibfabric::query {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// The store's URL: its path is the API's prefix (no trailing '/').
HttpUrl parse_url(const std::string& url) {
  HttpUrl u = parse_http_url(url, "--prometheus.url");
  while (!u.path.empty() && u.path.back() == '/') u.path.pop_back();
  return u;
}

}  // namespace

const char* failure_name(QueryResult::Failure failure) {
  switch (failure) {
    case QueryResult::Failure::none:
      return "none";
    case QueryResult::Failure::timeout:
      return "timeout";
    case QueryResult::Failure::connection:
      return "connection";
    case QueryResult::Failure::http:
      return "http";
    case QueryResult::Failure::malformed:
      return "malformed";
    case QueryResult::Failure::too_large:
      return "too_large";
    case QueryResult::Failure::auth:
      return "auth";
  }
  return "?";
}

std::string form_encode(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3 / 2);
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else if (c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

struct PrometheusClient::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, ClientOptions o)
      : io(io), options(std::move(o)), url(parse_url(options.url)) {
    const HttpConfig& h = options.http;
    server_name = h.server_name.empty() ? url.host : h.server_name;
    if (!url.tls) {
      if (!h.ca_file.empty() || !h.cert_file.empty() || h.insecure_skip_verify) {
        throw std::invalid_argument(h.source + ": tls_config is set, but --prometheus.url " +
                                    options.url + " is not https://");
      }
      return;
    }
    ssl = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    try {
      if (h.ca_file.empty()) {
        ssl->set_default_verify_paths();
      } else {
        ssl->load_verify_file(h.ca_file);
      }
      if (!h.cert_file.empty()) {
        ssl->use_certificate_chain_file(h.cert_file);
        ssl->use_private_key_file(h.key_file, asio::ssl::context::pem);
      }
    } catch (const boost::system::system_error& e) {
      throw std::invalid_argument(h.source + ": tls_config: " + e.what() +
                                  " (is each file PEM, the key the certificate's?)");
    }
    ssl->set_verify_mode(h.insecure_skip_verify ? asio::ssl::verify_none : asio::ssl::verify_peer);
  }
  asio::io_context& io;
  ClientOptions options;
  HttpUrl url;
  std::string server_name;  // what the store's certificate must name (and SNI)
  std::unique_ptr<asio::ssl::context> ssl;
};

namespace {

// One query: resolve, connect, (handshake), write, read, parse; any step past the deadline
// fails it.
template <class Stream>
struct Exchange : std::enable_shared_from_this<Exchange<Stream>> {
  std::shared_ptr<PrometheusClient::Impl> client;
  std::unique_ptr<Stream> stream;
  tcp::resolver resolver;
  http::request<http::string_body> request;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::string_body>> parser;
  std::vector<std::string> labels;
  std::function<void(QueryResult)> done;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  asio::steady_timer deadline;
  bool finished = false;

  Exchange(std::shared_ptr<PrometheusClient::Impl> c, std::unique_ptr<Stream> s)
      : client(std::move(c)), stream(std::move(s)), resolver(client->io), deadline(client->io) {}

  auto& socket() { return beast::get_lowest_layer(*stream).socket(); }

  void fail(const std::string& what, const beast::error_code& ec,
            QueryResult::Failure failure = QueryResult::Failure::connection) {
    QueryResult r;
    r.failure = failure;
    r.error = what + ": " + ec.message();
    finish(std::move(r));
  }
  void finish(QueryResult r) {
    if (finished) return;
    finished = true;
    deadline.cancel();
    beast::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
    r.duration = std::chrono::steady_clock::now() - start;
    auto d = std::move(done);
    d(std::move(r));
  }

  void run(std::chrono::milliseconds timeout) {
    auto self = this->shared_from_this();
    deadline.expires_after(timeout);
    deadline.async_wait([self, timeout](const beast::error_code& ec) {
      if (ec) return;
      QueryResult r;
      r.failure = QueryResult::Failure::timeout;
      r.error = "no answer within " + std::to_string(timeout.count()) + " ms";
      self->finish(std::move(r));
    });
    resolver.async_resolve(
        client->url.host, client->url.port,
        [self](const beast::error_code& ec, tcp::resolver::results_type results) {
          if (self->finished) return;
          if (ec) return self->fail("resolving " + self->client->url.host, ec);
          asio::async_connect(
              self->socket(), results, [self](const beast::error_code& ec, const tcp::endpoint&) {
                if (self->finished) return;
                if (ec) return self->fail("connecting to " + self->client->options.url, ec);
                self->handshake();
              });
        });
  }

  void handshake() {
    auto self = this->shared_from_this();
    if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
      if (!SSL_set_tlsext_host_name(stream->native_handle(), client->server_name.c_str())) {
        return fail("TLS SNI", beast::error_code(static_cast<int>(::ERR_get_error()),
                                                 asio::error::get_ssl_category()));
      }
      if (!client->options.http.insecure_skip_verify) {
        stream->set_verify_callback(asio::ssl::host_name_verification(client->server_name));
      }
      stream->async_handshake(asio::ssl::stream_base::client, [self](const beast::error_code& ec) {
        if (self->finished) return;
        if (ec) return self->fail("TLS handshake with " + self->client->options.url, ec);
        self->write();
      });
    } else {
      write();
    }
  }

  void write() {
    auto self = this->shared_from_this();
    http::async_write(*stream, request, [self](const beast::error_code& ec, std::size_t) {
      if (self->finished) return;
      if (ec) return self->fail("sending the query", ec);
      self->parser.emplace();
      self->parser->body_limit(self->client->options.body_limit);
      // The header first: Boost 1.74's eager parse (async_read) lets a Content-Length over the
      // body limit through when the header and the body arrive in one read (seen: a 1 MiB
      // answer read whole under a 64 KiB limit); parsing the header alone checks it.
      http::async_read_header(*self->stream, self->buffer, *self->parser,
                              [self](const beast::error_code& ec, std::size_t) {
                                if (self->finished) return;
                                if (ec) return self->read_failed(ec);
                                http::async_read(*self->stream, self->buffer, *self->parser,
                                                 [self](const beast::error_code& ec, std::size_t) {
                                                   if (self->finished) return;
                                                   if (ec) return self->read_failed(ec);
                                                   self->answered();
                                                 });
                              });
    });
  }

  void read_failed(const beast::error_code& ec) {
    if (ec == http::error::body_limit) {
      return fail("the answer is larger than --query.max-response-bytes=" +
                      std::to_string(client->options.body_limit),
                  ec, QueryResult::Failure::too_large);
    }
    fail("reading the answer", ec);
  }

  void answered() {
    auto response = parser->release();
    QueryResult r;
    r.bytes = response.body().size();
    std::string error = parse_vector(response.body(), labels, r.series);
    bool ok = response.result() == http::status::ok;
    if (!error.empty()) {
      r.error = "HTTP " + std::to_string(response.result_int()) + ": " + error;
      // An error status, or the store's own error: HTTP; a 200 whose body is not the API's
      // JSON: malformed.
      r.failure = !ok || error.rfind("query failed", 0) == 0 ? QueryResult::Failure::http
                                                             : QueryResult::Failure::malformed;
      if (response.result() == http::status::unauthorized ||
          response.result() == http::status::forbidden) {
        r.failure = QueryResult::Failure::auth;
      }
      r.series.clear();
    } else if (!ok) {
      r.error = "HTTP " + std::to_string(response.result_int());
      r.failure = QueryResult::Failure::http;
      r.series.clear();
    }
    finish(std::move(r));
  }
};

}  // namespace

PrometheusClient::PrometheusClient(asio::io_context& io, ClientOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

PrometheusClient::~PrometheusClient() = default;

const std::string& PrometheusClient::url() const { return impl_->options.url; }

void PrometheusClient::query(const std::string& promql, double at, std::vector<std::string> labels,
                             std::function<void(QueryResult)> done,
                             std::chrono::milliseconds timeout) {
  std::string authorization_value;
  try {
    authorization_value = authorization(impl_->options.http);
  } catch (const std::exception& e) {
    QueryResult r;
    r.failure = QueryResult::Failure::auth;
    r.error = impl_->options.http.source + ": " + e.what();
    asio::post(impl_->io, [done = std::move(done), r = std::move(r)]() mutable { done(r); });
    return;
  }
  auto fill = [&](auto& exchange) {
    auto& req = exchange->request;
    req.method(http::verb::post);
    req.target(impl_->url.path + "/api/v1/query");
    req.version(11);
    req.set(http::field::host, impl_->url.host);
    req.set(http::field::user_agent, "ibfabric-localize");
    req.set(http::field::content_type, "application/x-www-form-urlencoded");
    req.set(http::field::connection, "close");
    for (const auto& [name, value] : impl_->options.headers) req.set(name, value);
    if (!authorization_value.empty()) req.set(http::field::authorization, authorization_value);
    char time[32];
    std::snprintf(time, sizeof time, "%.3f", at);
    req.body() = "query=" + form_encode(promql) + "&time=" + time;
    req.prepare_payload();
    exchange->labels = std::move(labels);
    exchange->done = std::move(done);
    exchange->run(timeout.count() > 0 ? timeout : impl_->options.timeout);
  };
  if (impl_->ssl) {
    using Stream = beast::ssl_stream<beast::tcp_stream>;
    auto e =
        std::make_shared<Exchange<Stream>>(impl_, std::make_unique<Stream>(impl_->io, *impl_->ssl));
    fill(e);
  } else {
    using Stream = beast::tcp_stream;
    auto e = std::make_shared<Exchange<Stream>>(impl_, std::make_unique<Stream>(impl_->io));
    fill(e);
  }
}

}  // namespace ibfabric::query
