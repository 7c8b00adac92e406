// Fuzzes how ibfabric-localize reads its evidence (query/evidence_reader.h), from the answers a
// store gives to the attribution it runs on them: a store on loopback answers each query with
// one of the input's parts (split at lines "--"; a part is a line of text, then the body: the
// first part whose text the query holds answers it, else one chosen by the query's text, so the
// same query gets the same answer), HTTP 200 and the body. Two evaluations read it, the second
// with what the first kept. Whatever the store says, the evidence handed on is consistent
// (every index in range) and localize() and explained_pairs() run on it without a crash.
#include "localize/explained.h"
#include "localize/localizer.h"
#include "loopback_store.h"
#include "query/evidence_reader.h"

#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace {

// The query of a request (its form-encoded body).
std::string query_of(const std::string& request) {
  auto at = request.find("query=");
  std::string out;
  for (auto i = at == std::string::npos ? request.size() : at + 6; i < request.size(); ++i) {
    char c = request[i];
    if (c == '&') break;
    if (c == '+') {
      out.push_back(' ');
    } else if (c == '%' && i + 2 < request.size()) {
      out.push_back(static_cast<char>(std::stoi(request.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void check(const ibfabric::query::Reading& r) {
  const auto& e = r.evidence;
  for (const auto& p : e.pairs) {
    if (p.prober >= e.hosts.size() || p.peer >= e.hosts.size()) std::abort();
    for (auto l : p.path) {
      if (ibfabric::localize::cable_of(l) >= e.cables.size()) std::abort();
    }
    if (!(p.lost <= p.sent) || !(p.late <= p.sent)) std::abort();
  }
  for (const auto& [key, s] : r.symptoms) {
    if (s.placed >= static_cast<std::ptrdiff_t>(e.pairs.size())) std::abort();
  }
  auto verdicts = ibfabric::localize::localize(e);
  std::set<ibfabric::localize::Culprit> culprits;
  for (const auto& v : verdicts) {
    for (const auto& s : v.suspects) culprits.insert(ibfabric::localize::culprit_of(e, s));
  }
  if (ibfabric::localize::explained_pairs(e, culprits).size() != e.pairs.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> parts;  // text to match, body
  for (std::size_t at = 0;;) {
    auto end = input.find("\n--\n", at);
    auto part = input.substr(at, end == std::string::npos ? std::string::npos : end - at);
    auto line = part.find('\n');
    if (line == std::string::npos) {
      parts.emplace_back("", part);
    } else {
      parts.emplace_back(part.substr(0, line), part.substr(line + 1));
    }
    if (end == std::string::npos) break;
    at = end + 4;
  }
  boost::asio::io_context io;
  ibfabric::fuzz::LoopbackStore store(io, [&](const std::string& request) {
    auto query = query_of(request);
    const std::string* body = nullptr;
    for (const auto& [text, b] : parts) {
      if (!text.empty() && query.find(text) != std::string::npos) {
        body = &b;
        break;
      }
    }
    if (!body) body = &parts[std::hash<std::string>{}(query) % parts.size()].second;
    return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body->size()) + "\r\nConnection: close\r\n\r\n" + *body;
  });
  ibfabric::query::ClientOptions options;
  options.url = store.url();
  options.timeout = std::chrono::milliseconds(2000);
  ibfabric::query::ReaderOptions reader_options;
  reader_options.refresh_timeout = std::chrono::milliseconds(2000);
  ibfabric::query::EvidenceReader reader(io, options, reader_options);
  int readings = 0;
  std::function<void(ibfabric::query::Reading)> second = [&](ibfabric::query::Reading r) {
    check(r);
    ++readings;
    store.close();
  };
  reader.read(1700000000, [&](ibfabric::query::Reading r) {
    check(r);
    ++readings;
    reader.read(1700000010, second, true);
  });
  io.run();
  if (readings != 2) std::abort();
  return 0;
}
