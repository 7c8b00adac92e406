// Fuzzes ibfabric-localize's HTTP client (query/http_client.h) end to end over loopback TCP:
// the input is the store's whole answer, raw (status line, headers, body: chunked, short,
// oversized, not HTTP at all). Any input gives either series or a failure that says what kind,
// never a crash, a hang past the deadline or both, and no answer over the body limit is read.
#include "loopback_store.h"
#include "query/http_client.h"

#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string raw(reinterpret_cast<const char*>(data), size);
  boost::asio::io_context io;
  ibfabric::fuzz::LoopbackStore store(io, [&](const std::string&) { return raw; });
  ibfabric::query::ClientOptions options;
  options.url = store.url();
  options.timeout = std::chrono::milliseconds(2000);
  options.body_limit = 64 << 10;  // reachable by the fuzzer: too_large is a path of its own
  ibfabric::query::PrometheusClient client(io, options);
  int answers = 0;
  client.query("up", 1700000000, {"job", "instance"}, [&](ibfabric::query::QueryResult r) {
    ++answers;
    bool failed = r.failure != ibfabric::query::QueryResult::Failure::none;
    if (failed == r.error.empty()) std::abort();  // a failure says what, a success nothing
    if (failed && !r.series.empty()) std::abort();
    if (r.bytes > options.body_limit) std::abort();  // the limit holds however the bytes come
    for (const auto& s : r.series) {
      if (s.labels.size() != 2) std::abort();
    }
    store.close();
  });
  io.run();
  if (answers != 1) std::abort();
  return 0;
}
