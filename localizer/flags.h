#pragma once
// ibfabric-localize's command line: flags, defaults and the errors a wrong flag gets.

#include "localize/localizer.h"
#include "query/evidence_reader.h"

#include <chrono>
#include <string>
#include <vector>

namespace ibfabric::localizer {

struct Flags {
  query::ClientOptions prometheus = [] {
    query::ClientOptions c;
    c.url = "http://localhost:9090";
    return c;
  }();
  std::string listen_address = ":10920";
  std::string web_config_file;
  std::string http_config_file;  // --prometheus.http-config-file (loaded into prometheus.http)
  query::ReaderOptions reader;   // window, queries at once, the refreshes' deadline
  localize::Options localize;    // the attribution's thresholds (fixed: docs/design.md)
  std::chrono::milliseconds interval{10000};
  // Evidence older than this (the newest probe sample the store has) gives no verdict: a store
  // whose scrapes stopped would otherwise show the last minute before they did.
  std::chrono::milliseconds max_evidence_age{60000};
  std::string log_level = "info";
  std::string log_format = "logfmt";  // or json
  bool once = false;  // one evaluation, its exposition on stdout (needs two reads to confirm)
  bool version = false, help = false;
};

// Throws std::invalid_argument saying what is wrong and how to fix it.
Flags parse_flags(const std::vector<std::string>& args);
std::string usage();

}  // namespace ibfabric::localizer
