#pragma once
// Instant queries against a Prometheus-compatible query API (Prometheus, VictoriaMetrics,
// Thanos Query, Mimir), on the caller's io_context: a POST to <url>/api/v1/query per query, a
// connection of its own each (the queries of one evaluation run side by side), a deadline on
// the whole exchange. http and https (the system's CA store, the host name checked).

#include "query/http_config.h"
#include "query/prometheus_json.h"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ibfabric::query {

struct ClientOptions {
  std::string url;  // http[s]://host[:port][/path prefix]
  std::chrono::milliseconds timeout{8000};
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. X-Scope-OrgID for Mimir
  // An answer's body larger than this fails its query (--query.max-response-bytes).
  std::size_t body_limit = kDefaultBodyLimit;
  // The largest answer the localizer gets is a probe query's: 1.77 MB at 4,096 hosts with 3
  // peers each, about 4.3 MB at 10,000 (docs/benchmarks.md, "Answer sizes"): 15 times that
  // leaves room for more peers and longer names, and bounds what a broken or hostile store can
  // make the localizer hold.
  static constexpr std::size_t kDefaultBodyLimit = std::size_t{64} << 20;
  HttpConfig http;  // authentication and TLS (--prometheus.http-config-file)
};

struct QueryResult {
  // What kind of failure, for the series that counts them (low cardinality).
  enum class Failure : std::uint8_t { none, timeout, connection, http, malformed, too_large, auth };
  Failure failure = Failure::none;
  std::string error;  // "" on success: what failed, where
  std::vector<Series> series;
  std::chrono::nanoseconds duration{0};
  std::size_t bytes = 0;
};
const char* failure_name(QueryResult::Failure failure);

class PrometheusClient {
 public:
  // Throws std::invalid_argument for a URL it cannot use, saying why.
  PrometheusClient(boost::asio::io_context& io, ClientOptions options);
  ~PrometheusClient();

  // Evaluates `promql` at `at` (Unix seconds); `done` runs on the io_context with the values of
  // `labels` of every series. Parsing runs there too: a large result is parsed off the loop by
  // the caller's choice of io_context (ibfabric-localize gives it one of its own). `timeout`:
  // the exchange's deadline, the options' when zero.
  void query(const std::string& promql, double at, std::vector<std::string> labels,
             std::function<void(QueryResult)> done,
             std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

  const std::string& url() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// `text` percent-encoded as application/x-www-form-urlencoded wants it.
std::string form_encode(const std::string& text);

}  // namespace ibfabric::query
