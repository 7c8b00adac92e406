#include "localizer/flags.h"

#include "config/config.h"
#include "config/config_section.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <stdexcept>

namespace ibfabric::localizer {

namespace {

std::chrono::milliseconds duration_flag(const std::string& flag, const std::string& text) {
  auto d = parse_duration(text);
  if (!d || d->count() <= 0) {
    throw std::invalid_argument(flag + "=" + text +
                                ": not a duration; give a number and a unit, e.g. 10s, 500ms, "
                                "1m, 1m30s");
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

// Bytes, as a number or with a unit: 67108864, 64MiB, 512KiB, 1GiB.
std::size_t bytes_flag(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  unsigned long long scale = unit.empty()    ? 1
                             : unit == "KiB" ? 1ull << 10
                             : unit == "MiB" ? 1ull << 20
                             : unit == "GiB" ? 1ull << 30
                                             : 0;
  if (used == 0 || scale == 0 || v == 0 || v > (1ull << 40) / scale) {
    throw std::invalid_argument(flag + "=" + text +
                                ": give a size in bytes, or with KiB, MiB or GiB (e.g. 64MiB)");
  }
  return static_cast<std::size_t>(v * scale);
}

}  // namespace

std::string usage() {
  return R"(Usage: ibfabric-localize [flags]

Names the cable, host or congested port behind probe loss and late probes between hosts, from
the evidence the ibfabricd daemons export, read from a Prometheus-compatible query API; serves
its verdicts as series on its own /metrics (docs/design.md, "Who is to blame").

  --prometheus.url=URL            query API to read from (default http://localhost:9090);
                                  Prometheus, VictoriaMetrics (/prometheus prefix for vmselect),
                                  Thanos Query, Mimir (/prometheus)
  --prometheus.header='N: V'      header sent with every query (repeatable), e.g.
                                  'X-Scope-OrgID: training'
  --prometheus.http-config-file=FILE
                                  credentials and TLS for the store, in Prometheus'
                                  http_config format: authorization (credentials_file),
                                  basic_auth (password_file), bearer_token_file, tls_config
                                  (ca_file, cert_file, key_file, server_name)
  --query.timeout=8s              deadline of the probe queries, and of the wait for the
                                  evidence that refreshes with them
  --query.refresh-timeout=1m      deadline of a query that refreshes kept evidence (hosts,
                                  paths, counters, ...): it may run on past its evaluation
  --query.max-concurrency=4       refresh queries at the store at once (the 4 probe queries
                                  go out at once besides)
  --query.max-response-bytes=64MiB  an answer larger than this fails its query
  --evaluation-interval=10s       how often the verdicts are made
  --evidence.window=1m            window of the probe evidence (sent, lost, late per pair)
  --evidence.max-age=60s          no verdict from a store whose newest probe sample is older
  --web.listen-address=:10920     where /metrics is served
  --web.config.file=FILE          TLS and basic auth (exporter-toolkit's format)
  --log.level=info                debug, info, warn, error
  --log.format=logfmt             logfmt or json
  --once                          evaluate (twice, one interval apart: a verdict must hold in
                                  two evaluations), print the exposition, exit
  --version, --help
)";
}

Flags parse_flags(const std::vector<std::string>& args) {
  Flags o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i], value;
    auto eq = arg.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto need = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= args.size()) throw std::invalid_argument(arg + " needs a value");
      return args[++i];
    };
    if (arg == "--prometheus.url") {
      o.prometheus.url = need();
    } else if (arg == "--prometheus.header") {
      std::string h = need();
      auto colon = h.find(':');
      if (colon == std::string::npos || colon == 0) {
        throw std::invalid_argument("--prometheus.header=" + h +
                                    ": give 'Name: value', e.g. 'X-Scope-OrgID: training'");
      }
      std::string v = h.substr(colon + 1);
      v.erase(0, v.find_first_not_of(' '));
      o.prometheus.headers.emplace_back(h.substr(0, colon), v);
    } else if (arg == "--prometheus.http-config-file") {
      o.http_config_file = need();
    } else if (arg == "--query.timeout") {
      o.prometheus.timeout = duration_flag(arg, need());
    } else if (arg == "--query.refresh-timeout") {
      o.reader.refresh_timeout = duration_flag(arg, need());
    } else if (arg == "--query.max-concurrency") {
      std::string v = need();
      std::size_t used = 0;
      long n = 0;
      try {
        n = std::stol(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != v.size() || n < 1 || n > 64) {
        throw std::invalid_argument(arg + "=" + v + ": give a number of queries, 1 to 64");
      }
      o.reader.max_in_flight = static_cast<std::size_t>(n);
    } else if (arg == "--query.max-response-bytes") {
      o.prometheus.body_limit = bytes_flag(arg, need());
    } else if (arg == "--evaluation-interval") {
      o.interval = duration_flag(arg, need());
      if (o.interval < std::chrono::seconds(1)) {
        throw std::invalid_argument("--evaluation-interval=" + value + ": at least 1s");
      }
    } else if (arg == "--evidence.window") {
      o.reader.window =
          std::chrono::duration_cast<std::chrono::seconds>(duration_flag(arg, need()));
      if (o.reader.window < std::chrono::seconds(5)) {
        throw std::invalid_argument(arg + ": at least 5s (a rate needs two scrapes in its window)");
      }
    } else if (arg == "--evidence.max-age") {
      o.max_evidence_age = duration_flag(arg, need());
    } else if (arg == "--web.listen-address") {
      // The address as ibfabricd's flag and config take it (one rule for both programs).
      o.listen_address = need();
      if (auto error = check_listen_address(o.listen_address); !error.empty()) {
        throw std::invalid_argument("--web.listen-address \"" + o.listen_address + "\": " + error);
      }
    } else if (arg == "--web.config.file") {
      o.web_config_file = need();
    } else if (arg == "--log.level") {
      o.log_level = need();
      if (spdlog::level::from_str(o.log_level) == spdlog::level::off && o.log_level != "off") {
        throw std::invalid_argument("--log.level=" + o.log_level + ": debug, info, warn or error");
      }
    } else if (arg == "--log.format") {
      o.log_format = need();
      if (o.log_format != "logfmt" && o.log_format != "json") {
        throw std::invalid_argument("--log.format=" + o.log_format + ": logfmt or json");
      }
    } else if (arg == "--once" || arg == "--version" || arg == "--help" || arg == "-h") {
      if (has_value) throw std::invalid_argument("flag " + arg + " takes no value");
      (arg == "--once" ? o.once : arg == "--version" ? o.version : o.help) = true;
    } else {
      throw std::invalid_argument("unknown flag " + args[i] + " (--help lists them)");
    }
  }
  if (!o.http_config_file.empty()) {
    try {
      o.prometheus.http = query::load_http_config(o.http_config_file);
    } catch (const std::runtime_error& e) {  // ConfigError: file:line:column and what is wrong
      throw std::invalid_argument(e.what());
    }
  }
  {
    // The URL and the TLS files as the client will use them (it throws saying what is wrong).
    boost::asio::io_context io;
    query::PrometheusClient check(io, o.prometheus);
  }
  if (o.prometheus.timeout >= o.interval) {
    throw std::invalid_argument("--query.timeout must be shorter than --evaluation-interval");
  }
  return o;
}

}  // namespace ibfabric::localizer
