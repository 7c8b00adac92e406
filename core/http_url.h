#pragma once
// An http:// or https:// URL as the programs' HTTP clients take it (ibfabric-localize's store,
// the probe plan): scheme, host (an IPv6 one without its brackets), port (the scheme's when not
// given), path. One parser, so that both say the same of the same mistake.

#include <string>

namespace ibfabric {

struct HttpUrl {
  bool tls = false;
  std::string host, port;
  std::string path;  // from the first '/' on, as given; "" when none
};

// Throws std::invalid_argument naming `what` (the flag or key the URL came from), the URL and
// what is wrong: no http(s) scheme, user or password in it (they would show in logs), a bad
// IPv6 host, no host.
HttpUrl parse_http_url(const std::string& url, const std::string& what);

}  // namespace ibfabric
