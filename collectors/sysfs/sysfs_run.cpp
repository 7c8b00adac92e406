#include "collectors/sysfs/sysfs_run.h"

#include "collectors/sysfs/counter_files.h"
#include "collectors/sysfs/sysfs_collector.h"

#include "ib/link_rate.h"
#include "ib/sysfs_parse.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>

namespace ibfabric::sysfs {
namespace {

namespace fs = std::filesystem;
using prometheus::MetricType;

constexpr std::string_view kDeviceInfo = "ibfabric_sysfs_device_info";
constexpr std::string_view kPortInfo = "ibfabric_sysfs_port_info";
constexpr std::string_view kPortState = "ibfabric_sysfs_port_state";
constexpr std::string_view kPortPhysicalState = "ibfabric_sysfs_port_physical_state";
constexpr std::string_view kPortRate = "ibfabric_sysfs_port_rate_bytes_per_second";
constexpr std::string_view kPortEffectiveRate =
    "ibfabric_sysfs_port_effective_rate_bytes_per_second";
constexpr std::string_view kPortWidth = "ibfabric_sysfs_port_link_width_lanes";
constexpr std::string_view kPortLid = "ibfabric_sysfs_port_lid";
constexpr std::string_view kPortSmLid = "ibfabric_sysfs_port_sm_lid";
constexpr std::string_view kPortSmSl = "ibfabric_sysfs_port_sm_sl";
constexpr std::string_view kPortLmc = "ibfabric_sysfs_port_lmc";
constexpr std::string_view kPortCounter = "ibfabric_sysfs_port_pma_stat_total";
constexpr std::string_view kPortHwCounter = "ibfabric_sysfs_port_hw_stat_total";
constexpr std::string_view kDeviceHwCounter = "ibfabric_sysfs_device_hw_stat_total";
constexpr std::string_view kReadErrors = "ibfabric_sysfs_read_errors_total";

const FamilyDoc kFamilies[] = {
    {kDeviceInfo,
     "One per RDMA device in class/infiniband, value 1: node_guid, sys_image_guid, fw_ver, "
     "board_id, hca_type, node_desc, node_type and the PCI address of its device link.",
     MetricType::Gauge},
    {kPortInfo,
     "One per port, value 1: link_layer, the names of state and phys_state, and the width and "
     "speed from rate.",
     MetricType::Gauge},
    {kPortState,
     "Logical port state from ports/N/state: 0 NOP, 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, "
     "5 ACTIVE_DEFER.",
     MetricType::Gauge},
    {kPortPhysicalState,
     "Physical port state from ports/N/phys_state: 1 Sleep, 2 Polling, 3 Disabled, "
     "4 PortConfigurationTraining, 5 LinkUp, 6 LinkErrorRecovery, 7 Phy Test.",
     MetricType::Gauge},
    {kPortRate, "Signalling rate of the port from ports/N/rate (400 Gb/sec is 5e10).",
     MetricType::Gauge},
    {kPortEffectiveRate,
     "Data rate of the port after line encoding, from ports/N/rate: on InfiniBand ports the "
     "lanes times the lane's data rate (8b/10b to QDR, 64b/66b FDR10 to EDR, 50/100/200 Gb/s "
     "for HDR/NDR/XDR); on Ethernet and EFA ports the rate the kernel prints, which is already "
     "a data rate (4X QDR is 4e9, 4X NDR 5e10).",
     MetricType::Gauge},
    {kPortWidth, "Active link width in lanes from ports/N/rate (4X is 4).", MetricType::Gauge},
    {kPortLid, "Base LID of the port from ports/N/lid (0 on Ethernet link layer ports).",
     MetricType::Gauge},
    {kPortSmLid, "LID of the master Subnet Manager as seen by the port, from ports/N/sm_lid.",
     MetricType::Gauge},
    {kPortSmSl, "Service level for talking to the Subnet Manager, from ports/N/sm_sl.",
     MetricType::Gauge},
    {kPortLmc, "LID mask control of the port from ports/N/lid_mask_count (2^LMC LIDs).",
     MetricType::Gauge},
};

std::string error_text(int error) { return std::strerror(error); }

// Directory entries by name; nullopt with `error` set when the directory cannot be listed.
// readdir rather than std::filesystem: this runs for every port on every collection.
std::optional<std::vector<std::string>> list_dir(const std::string& path, std::error_code& error) {
  DIR* dir = ::opendir(path.c_str());
  if (!dir) {
    error = std::error_code(errno, std::generic_category());
    return std::nullopt;
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(dir)) {
    std::string_view name(entry->d_name);
    if (name != "." && name != "..") names.emplace_back(name);
  }
  int read_error = errno;
  ::closedir(dir);
  if (read_error) {
    error = std::error_code(read_error, std::generic_category());
    return std::nullopt;
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool is_port_number(const std::string& name) {
  return !name.empty() && name.size() <= 3 &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

SysfsRun::SysfsRun(const SysfsConfig& config, SysfsState& state) : config_(config), s_(state) {
  for (const auto& family : kFamilies) out_.declare(family.name, family.help, family.type);
  for (const auto& counter : kNamedCounters) {
    out_.declare(counter.metric, counter.help, MetricType::Counter);
  }
  for (const auto& counter : kMellanoxHwCounters) {
    out_.declare(counter.metric, counter.help, MetricType::Counter);
  }
  for (const auto& counter : kEfaHwCounters) {
    if (!counter.help.empty()) out_.declare(counter.metric, counter.help, MetricType::Counter);
  }
  out_.declare(kPortCounter,
               "Files in ports/N/counters without a metric of their own, by file name, as the "
               "kernel reports them.",
               MetricType::Counter);
  out_.declare(kPortHwCounter,
               "Driver-specific port counters from ports/N/hw_counters, by file name "
               "(lifespan, a setting, is skipped).",
               MetricType::Counter);
  out_.declare(kDeviceHwCounter,
               "Driver-specific device counters from <device>/hw_counters, by file name "
               "(lifespan, a setting, is skipped).",
               MetricType::Counter);
  out_.declare(kReadErrors,
               "sysfs files of this device (device-level files: no port label) or port that "
               "were missing, unreadable or garbled, counted on every collection since the "
               "daemon started.",
               MetricType::Counter);
}

CollectResult SysfsRun::run() {
  const std::string& class_dir = config_.class_dir();
  std::error_code error;
  const bool exists = fs::exists(class_dir, error);
  if (error) return failure("cannot read " + class_dir + ": " + error.message());
  if (!exists) {
    return failure("no InfiniBand devices: " + class_dir +
                   " does not exist; is the driver loaded? use --sysfs-root to point elsewhere");
  }
  auto devices = list_dir(class_dir, error);
  if (!devices) return failure("cannot list " + class_dir + ": " + error.message());

  for (const auto& wanted : config_.devices) {
    if (std::find(devices->begin(), devices->end(), wanted) == devices->end() &&
        s_.missing_devices_logged.insert(wanted).second) {
      spdlog::warn("sysfs: configured device not found device={} dir={}", wanted, class_dir);
    }
  }
  for (const auto& device : *devices) {
    if (!config_.devices.empty() && !config_.devices.contains(device)) continue;
    if (!config_.selects(device)) continue;
    if (config_.devices.contains(device)) s_.missing_devices_logged.erase(device);
    collect_device(device, class_dir + "/" + device);
  }
  s_.reader.close_unused();
  return CollectResult{std::move(out_).take(), true, {}};
}

CollectResult SysfsRun::failure(std::string message) {
  return CollectResult{MetricFamilies{}, false, std::move(message)};
}

// --- error bookkeeping -----------------------------------------------------------------

void SysfsRun::good(const std::string& path) {
  if (s_.bad_files.erase(path) > 0) spdlog::info("sysfs: file is good again file={}", path);
}

void SysfsRun::bad(const std::string& path, const std::string& device, const std::string& port,
                   const std::string& what) {
  ++s_.read_errors[{device, port}];
  if (s_.bad_files.insert(path).second) {
    spdlog::warn("sysfs: cannot use file={} error=\"{}\"", path, what);
  }
}

// The trimmed text of a file, or nullopt after counting it as bad. A missing file is bad
// unless `optional`.
std::optional<std::string> SysfsRun::text(const std::string& path, const std::string& device,
                                          const std::string& port, bool optional) {
  FileContent content = s_.reader.read(path);
  if (content.error == ENOENT && optional) {
    // Missing is normal for driver attributes such as board_id: not an error, and no
    // longer bad if it was.
    good(path);
    return std::nullopt;
  }
  if (content.error != 0) {
    std::error_code ignored;
    std::string what = content.error != ENOENT         ? "cannot read: " + error_text(content.error)
                       : fs::is_symlink(path, ignored) ? "missing (dangling symlink)"
                                                       : "missing";
    bad(path, device, port, what);
    return std::nullopt;
  }
  return std::string(trim(content.text));
}

// Parses a file with `parse`; counts it as bad (with `expected` in the log) on failure.
template <typename Parser>
auto SysfsRun::parsed(const std::string& path, const std::string& device, const std::string& port,
                      Parser parse, std::string_view expected)
    -> decltype(parse(std::string_view{})) {
  auto content = text(path, device, port);
  if (!content) return std::nullopt;
  auto value = parse(*content);
  if (!value) {
    bad(path, device, port,
        "cannot parse: expected " + std::string(expected) + ", got '" + printable(*content) + "'");
    return std::nullopt;
  }
  good(path);
  return value;
}

// --- devices ---------------------------------------------------------------------------

void SysfsRun::collect_device(const std::string& device, const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    // The class link dangles: the device is going away, or the tree is damaged.
    bad(dir, device, "", "device directory is missing (dangling link in class/infiniband?)");
    emit_errors(device, "");
    return;
  }
  good(dir);

  auto node_guid = parsed(dir + "/node_guid", device, "", parse_guid, "xxxx:xxxx:xxxx:xxxx");
  auto image_guid = parsed(dir + "/sys_image_guid", device, "", parse_guid, "xxxx:xxxx:xxxx:xxxx");
  auto node_type = parsed(dir + "/node_type", device, "", parse_numbered_name, "N: NAME");
  auto firmware = plain(dir + "/fw_ver", device, "");
  auto description = plain(dir + "/node_desc", device, "");
  // Driver attributes: mlx4/mlx5 and others have them, rxe and siw do not.
  auto board_id = text(dir + "/board_id", device, "", true);
  auto hca_type = text(dir + "/hca_type", device, "", true);
  if (board_id) good(dir + "/board_id");
  if (hca_type) good(dir + "/hca_type");

  out_.info(kDeviceInfo, "",
            {{"device", device},
             {"node_guid", node_guid.value_or("")},
             {"system_image_guid", image_guid.value_or("")},
             {"firmware_version", firmware.value_or("")},
             {"board_id", board_id.value_or("")},
             {"hca_type", hca_type.value_or("")},
             {"node_description", description.value_or("")},
             {"node_type", node_type ? node_type->name : ""},
             {"pci_address", pci_address(dir)}});

  // Device-level hw_counters (efa's admin-queue statistics, hfi1's, mlx5 switchdev's) stay
  // generic: none of them is traffic or a fabric signal.
  counter_dir(dir + "/hw_counters", device, "", CounterDir::device_hw);
  const Driver driver = driver_of(dir, device);

  const std::string ports_dir = dir + "/ports";
  auto ports = list_dir(ports_dir, error);
  if (!ports) {
    bad(ports_dir, device, "", "cannot list: " + error.message());
  } else {
    good(ports_dir);
    std::vector<std::string> numbers;
    for (const auto& name : *ports) {
      if (is_port_number(name)) numbers.push_back(name);
    }
    std::sort(numbers.begin(), numbers.end(), [](const std::string& a, const std::string& b) {
      return std::stoi(a) < std::stoi(b);
    });
    for (const auto& port : numbers) collect_port(device, port, ports_dir + "/" + port, driver);
  }
  emit_errors(device, "");
}

// A free-text attribute; only reading can fail.
std::optional<std::string> SysfsRun::plain(const std::string& path, const std::string& device,
                                           const std::string& port) {
  auto content = text(path, device, port);
  if (content) good(path);
  return content;
}

// From the PCI vendor of the device's function: 0x15b3 Mellanox/NVIDIA, 0x1d0f Amazon (EFA).
// Virtual devices (rxe, siw) have no device link: `other`.
Driver SysfsRun::driver_of(const std::string& dir, const std::string& device) {
  auto vendor = text(dir + "/device/vendor", device, "", true);
  if (!vendor) return Driver::other;
  good(dir + "/device/vendor");
  if (*vendor == "0x15b3") return Driver::mellanox;
  if (*vendor == "0x1d0f") return Driver::efa;
  return Driver::other;
}

// "0000:17:00.0" from <device>/device -> ../../../0000:17:00.0; "" for virtual devices
// (rxe, siw), which have no such link.
std::string SysfsRun::pci_address(const std::string& dir) {
  std::error_code error;
  fs::path target = fs::read_symlink(dir + "/device", error);
  if (error) return "";
  return target.filename().string();
}

// --- ports -----------------------------------------------------------------------------

void SysfsRun::collect_port(const std::string& device, const std::string& port,
                            const std::string& dir, Driver driver) {
  const Labels labels{{"device", device}, {"port", port}};

  auto state = parsed(dir + "/state", device, port, parse_numbered_name, "N: NAME");
  auto phys = parsed(dir + "/phys_state", device, port, parse_numbered_name, "N: NAME");
  auto rate = parsed(dir + "/rate", device, port, parse_rate, "N Gb/sec (WX SPEED)");
  auto lid = parsed(dir + "/lid", device, port, parse_hex, "0xN");
  auto sm_lid = parsed(dir + "/sm_lid", device, port, parse_hex, "0xN");
  auto sm_sl = parsed(dir + "/sm_sl", device, port, parse_decimal, "a decimal number");
  auto lmc = parsed(dir + "/lid_mask_count", device, port, parse_decimal, "a decimal number");
  auto link_layer = plain(dir + "/link_layer", device, port);

  out_.info(kPortInfo, "",
            {{"device", device},
             {"port", port},
             {"link_layer", link_layer.value_or("")},
             {"state", state ? state->name : ""},
             {"physical_state", phys ? phys->name : ""},
             {"link_width", rate ? rate->width : ""},
             {"link_speed", rate ? rate->speed : ""}});
  if (state) out_.gauge(kPortState, "", labels, state->number);
  if (phys) out_.gauge(kPortPhysicalState, "", labels, phys->number);
  if (rate) {
    out_.gauge(kPortRate, "", labels, static_cast<double>(rate->bytes_per_second));
    out_.gauge(kPortWidth, "", labels, rate->lanes);
    if (auto effective = effective_rate(*rate, link_layer.value_or(""))) {
      out_.gauge(kPortEffectiveRate, "", labels, *effective);
    }
  }
  if (lid) out_.gauge(kPortLid, "", labels, static_cast<double>(*lid));
  if (sm_lid) out_.gauge(kPortSmLid, "", labels, static_cast<double>(*sm_lid));
  if (sm_sl) out_.gauge(kPortSmSl, "", labels, static_cast<double>(*sm_sl));
  if (lmc) out_.gauge(kPortLmc, "", labels, static_cast<double>(*lmc));

  emitted_.clear();
  superseded_.clear();
  counter_dir(dir + "/counters_ext", device, port, CounterDir::legacy);
  counter_dir(dir + "/counters", device, port, CounterDir::pma);
  counter_dir(dir + "/hw_counters", device, port, CounterDir::port_hw, driver);
  emit_errors(device, port);
}

// InfiniBand: the lanes times the lane's data rate. Ethernet (RoCE) and EFA ports: the kernel
// derives width and speed from the Ethernet speed or the device's link speed, so the rate it
// prints is already the data rate (100GbE is "100 Gb/sec (4X EDR)", 40GbE "(4X QDR)").
std::optional<double> SysfsRun::effective_rate(const LinkRate& rate, const std::string& layer) {
  if (layer != "InfiniBand") return static_cast<double>(rate.bytes_per_second);
  auto speed = link_rate::lane_speed_from_name(rate.speed);
  if (!speed) return std::nullopt;
  return link_rate::effective_bytes_per_second(*speed, static_cast<int>(rate.lanes));
}

// Every file in counters_ext/, counters/ or hw_counters/. A missing directory is normal:
// modern kernels create counters/ only for devices with a PMA, hw_counters/ only for drivers
// that have them, and counters_ext/ only before 4.5.
void SysfsRun::counter_dir(const std::string& dir, const std::string& device,
                           const std::string& port, CounterDir kind, Driver driver) {
  std::error_code error;
  auto files = list_dir(dir, error);
  if (!files) {
    if (error == std::errc::no_such_file_or_directory) {
      good(dir);
    } else {
      bad(dir, device, port, "cannot list: " + error.message());
    }
    return;
  }
  good(dir);
  if (kind == CounterDir::legacy) {
    // Listed means present: the 64-bit file replaces the 32-bit one even when it is garbled,
    // so a value never jumps between the two.
    for (const auto& file : *files) {
      if (const auto* legacy = legacy_counter(file))
        superseded_.insert(std::string(legacy->supersedes));
    }
  }
  // EFA without a readable PCI vendor (a damaged tree, a VM oddity): known by a counter no
  // other driver has.
  if (kind == CounterDir::port_hw && driver == Driver::other &&
      std::find(files->begin(), files->end(), "rdma_read_resp_bytes") != files->end()) {
    driver = Driver::efa;
  }
  for (const auto& file : *files) {
    // lifespan is how long the driver caches hw_counters, in ms: a setting, not a counter.
    if ((kind == CounterDir::port_hw || kind == CounterDir::device_hw) && file == "lifespan") {
      continue;
    }
    if (kind == CounterDir::pma && superseded_.contains(file)) continue;
    const std::string path = dir + "/" + file;
    auto content = text(path, device, port);
    if (!content) continue;
    CounterText value = parse_counter(*content);
    if (value.kind == CounterText::Kind::garbled) {
      bad(path, device, port,
          "cannot parse: expected an unsigned decimal counter, got '" + printable(*content) + "'");
      continue;
    }
    good(path);
    if (value.kind == CounterText::Kind::not_supported) continue;

    Labels labels{{"device", device}};
    if (!port.empty()) labels.emplace_back("port", port);
    std::string_view metric;
    double scale = 1;
    if (kind == CounterDir::legacy) {
      if (const auto* legacy = legacy_counter(file)) {
        metric = legacy->metric;
        scale = legacy->scale;
      }
    } else {
      const NamedCounter* named = nullptr;
      if (kind == CounterDir::pma) {
        named = named_counter(file);
      } else if (kind == CounterDir::port_hw && driver == Driver::mellanox) {
        named = find_named(kMellanoxHwCounters, file);
      } else if (kind == CounterDir::port_hw && driver == Driver::efa) {
        named = find_named(kEfaHwCounters, file);
      }
      if (named) {
        metric = named->metric;
        scale = named->scale;
      }
    }
    // A name already given to another file of this port (EFA's tx_bytes on a tree that also
    // has counters/port_xmit_data) keeps its generic series instead of a duplicate.
    if (!metric.empty() && emitted_.insert(metric).second) {
      // Scale in double: exact for the power-of-two 4, and it cannot wrap as uint64 would.
      out_.counter(metric, "", labels, static_cast<double>(value.value) * scale);
      continue;
    }
    std::string_view generic = kind == CounterDir::device_hw ? kDeviceHwCounter
                               : kind == CounterDir::port_hw ? kPortHwCounter
                                                             : kPortCounter;
    labels.emplace_back("counter", kind == CounterDir::legacy ? "counters_ext/" + file : file);
    out_.counter(generic, "", labels, static_cast<double>(value.value));
  }
}

void SysfsRun::emit_errors(const std::string& device, const std::string& port) {
  Labels labels{{"device", device}};
  if (!port.empty()) labels.emplace_back("port", port);
  out_.counter(kReadErrors, "", labels, static_cast<double>(s_.read_errors[{device, port}]));
}

}  // namespace ibfabric::sysfs
