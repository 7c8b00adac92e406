#include "exporters/prometheus/scrape_request.h"

#include <cctype>
#include <cstdlib>
#include <optional>

namespace ibfabric {

bool accepts_gzip(std::string_view header) {
  // A list of `coding[;q=VALUE]`; gzip is acceptable when named (or matched by `*`) with a
  // q-value above zero. An explicit `gzip` entry wins over `*`.
  std::optional<double> gzip, any;
  while (!header.empty()) {
    auto comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    auto trim = [](std::string_view v) {
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
      return v;
    };
    auto semi = item.find(';');
    std::string coding(trim(item.substr(0, semi)));
    for (auto& c : coding) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    double q = 1;
    while (semi != std::string_view::npos) {
      item = item.substr(semi + 1);
      semi = item.find(';');
      auto param = trim(item.substr(0, semi));
      if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
        std::string value(trim(param.substr(2)));
        char* end = nullptr;
        q = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0' || !(q >= 0)) q = 0;  // malformed: not accepted
      }
    }
    if (coding == "gzip" || coding == "x-gzip") {
      gzip = q;
    } else if (coding == "*") {
      any = q;
    }
  }
  if (gzip) return *gzip > 0;
  return any && *any > 0;
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded: %XX and '+' for a space. False on a malformed escape.
bool url_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = hex_value(in[i + 1]);
      int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return true;
}

}  // namespace

std::string parse_collector_filter(std::string_view query, CollectorFilter& out) {
  std::string key, value;
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    if (!url_decode(pair.substr(0, eq), key) ||
        !url_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1),
                    value)) {
      return "malformed %-escape in the query string";
    }
    if (key != "collect[]" && key != "exclude[]")
      continue;  // others are ignored, as node_exporter does
    if (value.empty()) return "empty collector name in " + key;
    (key == "collect[]" ? out.collect : out.exclude).push_back(value);
  }
  if (!out.collect.empty() && !out.exclude.empty()) {
    return "collect[] and exclude[] cannot be used together";
  }
  return {};
}

}  // namespace ibfabric
