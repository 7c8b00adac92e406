#include "daemon/options.h"

#include "collectors/registry.h"
#include "config/config.h"

#include <stdexcept>

namespace ibfabric {

std::string usage() {
  std::string collectors;
  for (const auto& spec : collector_specs()) {
    collectors += "                               " + std::string(spec.name) +
                  (spec.enabled_by_default ? " (on by default)\n" : " (off by default)\n");
  }
  return std::string(
             "Usage: ibfabricd [flags]\n"
             "InfiniBand fabric monitor: port counters, link state, Subnet Manager state and "
             "probes,\nexposed as Prometheus metrics.\n\n"
             "Flags (flags override the config file):\n"
             "  --config FILE                YAML config file (default: built-in defaults)\n"
             "  --check-config               validate the config, print what is wrong, exit\n"
             "  --once                       run every enabled collector once, print the "
             "metrics, exit\n"
             "                               (exit 1 if a collector failed)\n"
             "  --web.listen-address ADDR    HOST:PORT, [IPv6]:PORT or :PORT (default ") +
         kDefaultListenAddress +
         ")\n"
         "  --web.config.file FILE       TLS and basic auth (exporter-toolkit web config "
         "format)\n"
         "  --sysfs-root DIR             where sysfs is mounted (default /sys)\n"
         "  --procfs-root DIR            where procfs is mounted (default /proc)\n"
         "  --node-name-map FILE         node names, infiniband-diags format (default "
         "/etc/rdma/ib-node-name-map if it exists)\n"
         "  --log.level LEVEL            trace, debug, info, warn, error (default info)\n"
         "  --collector.NAME             enable collector NAME\n"
         "  --no-collector.NAME          disable collector NAME\n"
         "  --version                    print the version and exit\n"
         "  --help                       print this help and exit\n\n"
         "Collectors:\n" +
         collectors;
}

Options parse_options(const std::vector<std::string>& args) {
  Options options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::optional<std::string> inline_value;
    if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) {
        throw std::invalid_argument("flag " + arg + " needs a value; see --help");
      }
      return args[++i];
    };
    auto no_value = [&] {
      if (inline_value) throw std::invalid_argument("flag " + arg + " takes no value");
    };
    if (arg == "--config") {
      options.config_file = value();
    } else if (arg == "--web.listen-address") {
      options.listen_address = value();
      if (auto error = check_listen_address(*options.listen_address); !error.empty()) {
        throw std::invalid_argument("--web.listen-address \"" + *options.listen_address +
                                    "\": " + error);
      }
    } else if (arg == "--web.config.file") {
      options.web_config_file = value();
    } else if (arg == "--sysfs-root") {
      options.sysfs_root = value();
    } else if (arg == "--procfs-root") {
      options.procfs_root = value();
    } else if (arg == "--node-name-map") {
      options.node_name_map = value();
    } else if (arg == "--log.level") {
      options.log_level = value();
    } else if (arg == "--check-config") {
      no_value();
      options.check_config = true;
    } else if (arg == "--once") {
      no_value();
      options.once = true;
    } else if (arg == "--version") {
      no_value();
      options.version = true;
    } else if (arg == "--help" || arg == "-h") {
      no_value();
      options.help = true;
    } else if (arg.starts_with("--collector.") || arg.starts_with("--no-collector.")) {
      no_value();
      bool enable = arg.starts_with("--collector.");
      std::string name = arg.substr(arg.find('.') + 1);
      if (!find_collector_spec(name)) {
        throw std::invalid_argument("unknown collector \"" + name + "\" in " + arg +
                                    "; see --help for the list");
      }
      options.collector_enabled[name] = enable;
    } else {
      throw std::invalid_argument("unknown flag \"" + args[i] + "\"; see --help");
    }
  }
  if (options.log_level) {
    static const std::vector<std::string> levels = {"trace", "debug",    "info", "warn",
                                                    "error", "critical", "off"};
    if (std::find(levels.begin(), levels.end(), *options.log_level) == levels.end()) {
      throw std::invalid_argument("--log.level \"" + *options.log_level +
                                  "\": expected trace, debug, info, warn, error, critical or off");
    }
  }
  return options;
}

}  // namespace ibfabric
