#include "query/http_client.h"

#include "core/http_client.h"
#include "core/http_url.h"

#include <boost/asio/post.hpp>

#include <cctype>
#include <cstdio>
#include <stdexcept>

namespace ibfabric::query {

namespace asio = boost::asio;

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

struct PrometheusClient::Impl {
  Impl(asio::io_context& io, ClientOptions o)
      : io(io),
        options(std::move(o)),
        http(io, parse_url(options.url), options.url, tls(options.http), "ibfabric-localize",
             options.body_limit) {}
  static HttpTls tls(const HttpConfig& h) {
    return {h.ca_file, h.cert_file, h.key_file, h.server_name, h.insecure_skip_verify, h.source};
  }
  asio::io_context& io;
  ClientOptions options;
  HttpClient http;
};

PrometheusClient::PrometheusClient(asio::io_context& io, ClientOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

PrometheusClient::~PrometheusClient() = default;

const std::string& PrometheusClient::url() const { return impl_->options.url; }

namespace {

// The store's answer to one query: its series, or what kind of failure.
QueryResult result_of(HttpAnswer a, const std::vector<std::string>& labels,
                      std::size_t body_limit) {
  QueryResult r;
  r.duration = a.duration;
  switch (a.failure) {
    case HttpAnswer::Failure::none:
      break;
    case HttpAnswer::Failure::timeout:
      r.failure = QueryResult::Failure::timeout;
      r.error = std::move(a.error);
      return r;
    case HttpAnswer::Failure::connection:
      r.failure = QueryResult::Failure::connection;
      r.error = std::move(a.error);
      return r;
    case HttpAnswer::Failure::too_large:
      r.failure = QueryResult::Failure::too_large;
      r.error =
          "the answer is larger than --query.max-response-bytes=" + std::to_string(body_limit);
      return r;
  }
  r.bytes = a.body.size();
  std::string error = parse_vector(a.body, labels, r.series);
  bool ok = a.status == 200;
  if (!error.empty()) {
    r.error = "HTTP " + std::to_string(a.status) + ": " + error;
    // An error status, or the store's own error: HTTP; a 200 whose body is not the API's
    // JSON: malformed.
    r.failure = !ok || error.rfind("query failed", 0) == 0 ? QueryResult::Failure::http
                                                           : QueryResult::Failure::malformed;
    if (a.status == 401 || a.status == 403) r.failure = QueryResult::Failure::auth;
    r.series.clear();
  } else if (!ok) {
    r.error = "HTTP " + std::to_string(a.status);
    r.failure = QueryResult::Failure::http;
    r.series.clear();
  }
  return r;
}

}  // namespace

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
  HttpRequest req;
  req.method = "POST";
  req.target = impl_->http.url().path + "/api/v1/query";
  req.content_type = "application/x-www-form-urlencoded";
  req.headers = impl_->options.headers;
  if (!authorization_value.empty()) req.headers.emplace_back("Authorization", authorization_value);
  char time[32];
  std::snprintf(time, sizeof time, "%.3f", at);
  req.body = "query=" + form_encode(promql) + "&time=" + time;
  impl_->http.exchange(
      std::move(req), timeout.count() > 0 ? timeout : impl_->options.timeout,
      [labels = std::move(labels), done = std::move(done), limit = impl_->options.body_limit](
          HttpAnswer a) { done(result_of(std::move(a), labels, limit)); });
}

}  // namespace ibfabric::query
