#include "daemon/localize_options.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <stdexcept>

namespace ibfabric {

namespace {

std::chrono::milliseconds parse_duration(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  double ms = unit == "ms" ? v : unit == "s" ? v * 1e3 : unit == "m" ? v * 6e4 : -1;
  if (used == 0 || ms <= 0 || !std::isfinite(ms)) {
    throw std::invalid_argument(flag + "=" + text +
                                ": not a duration; give a number and a unit, e.g. 10s, 500ms, 1m");
  }
  return std::chrono::milliseconds(static_cast<long long>(ms));
}

}  // namespace

std::string localize_usage() {
  return R"(Usage: ibfabric-localize [flags]

Names the cable, host or congested port behind probe loss and late probes between hosts, from
the evidence the ibfabricd daemons export, read from a Prometheus-compatible query API; serves
its verdicts as series on its own /metrics (docs/design.md, "Who is to blame").

  --prometheus.url=URL            query API to read from (default http://localhost:9090);
                                  Prometheus, VictoriaMetrics (/prometheus prefix for vmselect),
                                  Thanos Query, Mimir (/prometheus)
  --prometheus.header='N: V'      header sent with every query (repeatable), e.g.
                                  'X-Scope-OrgID: training' or 'Authorization: Bearer ...'
  --query.timeout=8s              deadline of one query
  --evaluation-interval=10s       how often the verdicts are made
  --evidence.window=1m            window of the probe evidence (sent, lost, late per pair)
  --evidence.max-age=60s          no verdict from a store whose newest probe sample is older
  --web.listen-address=:10920     where /metrics is served
  --web.config.file=FILE          TLS and basic auth (exporter-toolkit's format)
  --log.level=info                debug, info, warn, error
  --once                          evaluate (twice, one interval apart: a verdict must hold in
                                  two evaluations), print the exposition, exit
  --version, --help
)";
}

LocalizeOptions parse_localize_options(const std::vector<std::string>& args) {
  LocalizeOptions o;
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
    } else if (arg == "--query.timeout") {
      o.prometheus.timeout = parse_duration(arg, need());
    } else if (arg == "--evaluation-interval") {
      o.interval = parse_duration(arg, need());
      if (o.interval < std::chrono::seconds(1)) {
        throw std::invalid_argument("--evaluation-interval=" + value + ": at least 1s");
      }
    } else if (arg == "--evidence.window") {
      o.window = std::chrono::duration_cast<std::chrono::seconds>(parse_duration(arg, need()));
      if (o.window < std::chrono::seconds(5)) {
        throw std::invalid_argument(arg + ": at least 5s (a rate needs two scrapes in its window)");
      }
    } else if (arg == "--evidence.max-age") {
      o.max_evidence_age = parse_duration(arg, need());
    } else if (arg == "--web.listen-address") {
      o.listen_address = need();
    } else if (arg == "--web.config.file") {
      o.web_config_file = need();
    } else if (arg == "--log.level") {
      o.log_level = need();
      if (spdlog::level::from_str(o.log_level) == spdlog::level::off && o.log_level != "off") {
        throw std::invalid_argument("--log.level=" + o.log_level + ": debug, info, warn or error");
      }
    } else if (arg == "--once") {
      o.once = true;
    } else if (arg == "--version") {
      o.version = true;
    } else if (arg == "--help" || arg == "-h") {
      o.help = true;
    } else {
      throw std::invalid_argument("unknown flag " + args[i] + " (--help lists them)");
    }
  }
  query::check_url(o.prometheus.url);
  if (o.prometheus.timeout >= o.interval) {
    throw std::invalid_argument("--query.timeout must be shorter than --evaluation-interval");
  }
  return o;
}

}  // namespace ibfabric
