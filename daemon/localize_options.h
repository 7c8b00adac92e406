#pragma once
// ibfabric-localize's command line: flags, defaults and the errors a wrong flag gets.

#include "query/evidence_reader.h"

#include <chrono>
#include <string>
#include <vector>

namespace ibfabric {

struct LocalizeOptions {
  query::ClientOptions prometheus{"http://localhost:9090", std::chrono::seconds(8), {}};
  std::string listen_address = ":10920";
  std::string web_config_file;
  std::chrono::milliseconds interval{10000};
  std::chrono::seconds window{60};  // of the probe evidence
  // Evidence older than this (the newest probe sample the store has) gives no verdict: a store
  // whose scrapes stopped would otherwise show the last minute before they did.
  std::chrono::milliseconds max_evidence_age{60000};
  std::string log_level = "info";
  bool once = false;  // one evaluation, its exposition on stdout (needs two reads to confirm)
  bool version = false, help = false;
};

// Throws std::invalid_argument saying what is wrong and how to fix it.
LocalizeOptions parse_localize_options(const std::vector<std::string>& args);
std::string localize_usage();

}  // namespace ibfabric
