#pragma once
// Command-line flags. Flags given override the config file.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric {

struct Options {
  std::optional<std::string> config_file;
  std::optional<std::string> listen_address;
  std::optional<std::string> web_config_file;
  std::optional<std::string> sysfs_root;
  std::optional<std::string> procfs_root;
  std::optional<std::string> node_name_map;
  std::optional<std::string> log_level;
  std::map<std::string, bool> collector_enabled;  // --collector.X / --no-collector.X
  bool check_config = false;
  bool once = false;
  bool version = false;
  bool help = false;
};

// Throws std::invalid_argument with a message that says what is wrong and what to do.
Options parse_options(const std::vector<std::string>& args);
std::string usage();

}  // namespace ibfabric
