#pragma once
// What a scrape asks for, read from its request: the encoding it accepts and node_exporter's
// collector filter.

#include <string>
#include <string_view>
#include <vector>

namespace ibfabric {

// True when an Accept-Encoding header value accepts gzip (RFC 9110: `gzip` or `*` with a
// q-value above 0, `identity;q=0` alone does not force it).
bool accepts_gzip(std::string_view accept_encoding);

struct ScrapeRequest {
  std::string_view query;            // the target after '?', undecoded
  std::string_view accept_encoding;  // the header's value, empty when absent
};

// The parameters node_exporter takes: `collect[]=NAME` (only these) and `exclude[]=NAME`
// (all but these), repeated. Returns an error message for a malformed or contradictory query.
struct CollectorFilter {
  std::vector<std::string> collect;
  std::vector<std::string> exclude;
};
std::string parse_collector_filter(std::string_view query, CollectorFilter& out);

}  // namespace ibfabric
