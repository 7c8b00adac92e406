// Fuzzes the parser of the query API's answers (query/prometheus_json.h): ibfabric-localize
// reads whatever a store, or something posing as one, sends back. Any input gives a series
// list or an error message, never a crash; a success is only claimed for a vector result.
#include "query/prometheus_json.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  std::vector<ibfabric::query::Series> out;
  auto error = ibfabric::query::parse_vector(body, {"job", "instance", "peer"}, out);
  if (error.empty()) {
    for (const auto& s : out) {
      if (s.labels.size() != 3) std::abort();
    }
  } else if (!out.empty()) {
    std::abort();  // a failed parse hands back nothing
  }
  return 0;
}
