#include "collectors/probe/probe_plan_client.h"

#include "core/http_client.h"
#include "core/http_url.h"

#include <cstdio>
#include <stdexcept>

namespace ibfabric::probe {

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
  Impl(boost::asio::io_context& io, const std::string& url)
      : http(io, parse(url), url, HttpTls{}, "ibfabricd", kBodyLimit) {}
  HttpClient http;
};

PlanClient::PlanClient(boost::asio::io_context& io, std::string url)
    : impl_(std::make_shared<Impl>(io, url)) {}
PlanClient::~PlanClient() = default;

void PlanClient::fetch(std::uint64_t node_guid, std::chrono::nanoseconds timeout, Done done) {
  char guid[24];
  std::snprintf(guid, sizeof guid, "0x%016llx", static_cast<unsigned long long>(node_guid));
  HttpRequest request;
  request.target = impl_->http.url().path + "?node_guid=" + guid;
  impl_->http.exchange(
      std::move(request), std::chrono::duration_cast<std::chrono::milliseconds>(timeout),
      [done = std::move(done)](HttpAnswer a) {
        if (a.failure != HttpAnswer::Failure::none) {
          return done(std::nullopt, std::move(a.error));
        }
        if (a.status != 200) {
          return done(std::nullopt, "HTTP " + std::to_string(a.status));
        }
        auto plan = parse_plan(a.body);
        if (!plan) {
          return done(std::nullopt, "not a probe plan (a line is neither # nor a GUID)");
        }
        done(std::move(plan), "");
      });
}

}  // namespace ibfabric::probe
