#include "collectors/sysfs/sysfs_collector.h"

#include "collectors/sysfs/sysfs_run.h"

namespace ibfabric::sysfs {

SysfsCollector::SysfsCollector(SysfsConfig config) : config_(std::move(config)) {}

bool SysfsConfig::selects(const std::string& device) const {
  if (devices_include && !std::regex_match(device, *devices_include)) return false;
  if (devices_exclude && std::regex_match(device, *devices_exclude)) return false;
  return true;
}

CollectResult SysfsCollector::collect_blocking() {
  try {
    return SysfsRun(config_, state_).run();
  } catch (const std::exception& e) {
    // Only allocation failure or a programming error gets here.
    return CollectResult{MetricFamilies{}, false, std::string("sysfs: ") + e.what()};
  }
}

namespace {

// devices_include / devices_exclude: an ECMAScript regular expression that must match the whole
// device name. nullopt when the key is absent or empty.
std::optional<std::regex> device_regex(ConfigSection& section, const std::string& key) {
  std::string pattern = section.get_string(key, "");
  if (pattern.empty()) return std::nullopt;
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    section.fail(key, "invalid regular expression \"" + pattern + "\" (" + e.what() +
                          "); expected an ECMAScript pattern matching whole device names, "
                          "e.g. \"mlx5_[0-3]\"");
  }
}

}  // namespace

CollectorSpec spec() {
  return CollectorSpec{
      "sysfs", true, std::chrono::seconds(15),
      [](CollectorContext& context, ConfigSection& section) -> std::unique_ptr<Collector> {
        SysfsConfig config;
        config.sysfs_root = context.sysfs_root;
        const auto devices = section.get_string_list("devices");
        for (const auto& device : devices) {
          if (device.empty() || device.find('/') != std::string::npos || device == "." ||
              device == "..") {
            section.fail("devices", "expected device names such as mlx5_0, got \"" + device + "\"");
          }
        }
        config.devices.insert(devices.begin(), devices.end());
        config.devices_include = device_regex(section, "devices_include");
        config.devices_exclude = device_regex(section, "devices_exclude");
        section.finish();
        return std::make_unique<SysfsCollector>(std::move(config));
      }};
}

}  // namespace ibfabric::sysfs
