#include "collectors/probe/probe_plan_client.h"

#include "core/http_url.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <openssl/ssl.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace ibfabric::probe {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// A plan is a few lines; anything larger is not one.
constexpr std::size_t kBodyLimit = 1 << 20;

// The plan's URL: its path, /probe-plan when none; no query string (node_guid is added).
HttpUrl parse(const std::string& url) {
  HttpUrl u = parse_http_url(url, "plan_url");
  if (u.path.empty()) u.path = "/probe-plan";
  if (u.path.find('?') != std::string::npos) {
    throw std::invalid_argument("plan_url \"" + url + "\": no query string (node_guid is added)");
  }
  return u;
}

}  // namespace

std::optional<std::vector<std::uint64_t>> parse_plan(std::string_view body) {
  std::vector<std::uint64_t> out;
  while (!body.empty()) {
    auto end = body.find('\n');
    std::string_view line = body.substr(0, end);
    body = end == std::string_view::npos ? std::string_view{} : body.substr(end + 1);
    if (line.empty() || line.front() == '#') continue;
    auto token = line.substr(0, line.find(' '));
    if (token.size() != 18 || token.substr(0, 2) != "0x") return std::nullopt;
    std::uint64_t guid = 0;
    for (char c : token.substr(2)) {
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (digit < 0) return std::nullopt;
      guid = guid << 4 | static_cast<std::uint64_t>(digit);
    }
    out.push_back(guid);
  }
  return out;
}

void check_plan_url(const std::string& url) { parse(url); }

struct PlanClient::Impl {
  Impl(asio::io_context& io, const std::string& url) : io(io), url(parse(url)) {
    if (this->url.tls) {
      ssl = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
      ssl->set_default_verify_paths();
      ssl->set_verify_mode(asio::ssl::verify_peer);
    }
  }
  asio::io_context& io;
  HttpUrl url;
  std::unique_ptr<asio::ssl::context> ssl;
};

namespace {

template <class Stream>
struct Get : std::enable_shared_from_this<Get<Stream>> {
  Get(std::shared_ptr<PlanClient::Impl> c, std::unique_ptr<Stream> s, PlanClient::Done d)
      : client(std::move(c)),
        stream(std::move(s)),
        resolver(client->io),
        deadline(client->io),
        done(std::move(d)) {}
  std::shared_ptr<PlanClient::Impl> client;
  std::unique_ptr<Stream> stream;
  tcp::resolver resolver;
  asio::steady_timer deadline;
  PlanClient::Done done;
  http::request<http::empty_body> request;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  bool finished = false;

  auto& socket() { return beast::get_lowest_layer(*stream).socket(); }
  void finish(std::optional<std::vector<std::uint64_t>> plan, std::string error) {
    if (finished) return;
    finished = true;
    deadline.cancel();
    resolver.cancel();
    beast::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
    auto d = std::move(done);
    d(std::move(plan), std::move(error));
  }
  void fail(const std::string& what, const beast::error_code& ec) {
    finish(std::nullopt, what + ": " + ec.message());
  }

  void run(std::chrono::nanoseconds timeout) {
    auto self = this->shared_from_this();
    deadline.expires_after(timeout);
    deadline.async_wait([self](const beast::error_code& ec) {
      if (!ec) self->finish(std::nullopt, "no answer within the deadline");
    });
    resolver.async_resolve(client->url.host, client->url.port,
                           [self](const beast::error_code& ec, tcp::resolver::results_type r) {
                             if (self->finished) return;
                             if (ec) return self->fail("resolving " + self->client->url.host, ec);
                             asio::async_connect(
                                 self->socket(), r,
                                 [self](const beast::error_code& ec, const tcp::endpoint&) {
                                   if (self->finished) return;
                                   if (ec) return self->fail("connecting", ec);
                                   self->handshake();
                                 });
                           });
  }
  void handshake() {
    auto self = this->shared_from_this();
    if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
      SSL_set_tlsext_host_name(stream->native_handle(), client->url.host.c_str());
      stream->set_verify_callback(asio::ssl::host_name_verification(client->url.host));
      stream->async_handshake(asio::ssl::stream_base::client, [self](const beast::error_code& ec) {
        if (self->finished) return;
        if (ec) return self->fail("TLS handshake", ec);
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
      if (ec) return self->fail("sending the request", ec);
      self->parser.body_limit(kBodyLimit);
      // The header alone first, so that the body limit holds (query/http_client.cpp says why).
      http::async_read_header(*self->stream, self->buffer, self->parser,
                              [self](const beast::error_code& ec, std::size_t) {
                                if (self->finished) return;
                                if (ec) return self->fail("reading the answer", ec);
                                http::async_read(*self->stream, self->buffer, self->parser,
                                                 [self](const beast::error_code& ec, std::size_t) {
                                                   if (self->finished) return;
                                                   if (ec)
                                                     return self->fail("reading the answer", ec);
                                                   self->answered();
                                                 });
                              });
    });
  }
  void answered() {
    const auto& res = parser.get();
    if (res.result() != http::status::ok) {
      return finish(std::nullopt, "HTTP " + std::to_string(res.result_int()));
    }
    auto plan = parse_plan(res.body());
    if (!plan) return finish(std::nullopt, "not a probe plan (a line is neither # nor a GUID)");
    finish(std::move(plan), "");
  }
};

}  // namespace

PlanClient::PlanClient(asio::io_context& io, std::string url)
    : impl_(std::make_shared<Impl>(io, url)) {}
PlanClient::~PlanClient() = default;

void PlanClient::fetch(std::uint64_t node_guid, std::chrono::nanoseconds timeout, Done done) {
  char guid[24];
  std::snprintf(guid, sizeof guid, "0x%016llx", static_cast<unsigned long long>(node_guid));
  auto start = [&](auto get) {
    get->request.method(http::verb::get);
    get->request.target(impl_->url.path + "?node_guid=" + guid);
    get->request.version(11);
    get->request.set(http::field::host, impl_->url.host);
    get->request.set(http::field::user_agent, "ibfabricd");
    get->request.set(http::field::connection, "close");
    get->run(timeout);
  };
  if (impl_->ssl) {
    using Stream = beast::ssl_stream<beast::tcp_stream>;
    start(std::make_shared<Get<Stream>>(impl_, std::make_unique<Stream>(impl_->io, *impl_->ssl),
                                        std::move(done)));
  } else {
    using Stream = beast::tcp_stream;
    start(
        std::make_shared<Get<Stream>>(impl_, std::make_unique<Stream>(impl_->io), std::move(done)));
  }
}

}  // namespace ibfabric::probe
