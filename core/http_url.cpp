#include "core/http_url.h"

#include <stdexcept>

namespace ibfabric {

HttpUrl parse_http_url(const std::string& url, const std::string& what) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(what + " \"" + url + "\": " + why);
  };
  HttpUrl u;
  std::string rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    u.tls = true;
    rest = url.substr(8);
  } else {
    fail("must start with http:// or https://");
  }
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  u.path = slash == std::string::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string::npos) {
    fail("no user or password in the URL: they would show in logs and in ps");
  }
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    auto close = authority.find(']');
    if (close == std::string::npos) fail("bad IPv6 host (no ']')");
    u.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') {
      u.port = authority.substr(close + 2);
    }
  } else {
    auto colon = authority.rfind(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string::npos) u.port = authority.substr(colon + 1);
  }
  if (u.host.empty()) fail("no host");
  if (u.port.empty()) u.port = u.tls ? "443" : "80";
  return u;
}

}  // namespace ibfabric
