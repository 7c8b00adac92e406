#include "collectors/pods/node_inventory.h"

#include "ib/sysfs_parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ibfabric::pods {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kAmazonVendor = "0x1d0f";

// The whole of a small file; nullopt when it cannot be opened or read.
std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

std::optional<std::int64_t> parse_numa_node(std::string_view text) {
  text = sysfs::trim(text);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < -1 ||
      value > 65535) {
    return std::nullopt;
  }
  return value;
}

// `link` (a sysfs link to a PCI function) resolved below the root's devices/ folder:
// {"pci0000:15", ..., "0000:18:00.0"}; empty when it does not resolve to a PCI function there.
std::vector<std::string> pci_path(const fs::path& root, const fs::path& link) {
  std::error_code ec;
  const fs::path devices = fs::canonical(root / "devices", ec);
  if (ec) return {};
  const fs::path target = fs::canonical(link, ec);
  if (ec) return {};
  const fs::path relative = target.lexically_relative(devices);
  std::vector<std::string> parts;
  for (const auto& part : relative) parts.push_back(part.string());
  if (parts.size() < 2 || parts.front() == ".." || !parts.front().starts_with("pci") ||
      !is_pci_address(parts.back())) {
    return {};
  }
  return parts;
}

// The PCI function behind `link`, or nullopt; numa_node read beside it (a garbled one is a
// problem, a missing one unknown).
std::optional<PciPosition> position(const fs::path& root, const fs::path& link,
                                    std::vector<Problem>& problems) {
  PciPosition pci;
  pci.path = pci_path(root, link);
  if (pci.path.empty()) return std::nullopt;
  pci.address = pci.path.back();
  if (const auto text = read_text(link / "numa_node")) {
    pci.numa_node = parse_numa_node(*text);
    if (!pci.numa_node) {
      problems.push_back({(link / "numa_node").string(),
                          "not a NUMA node number: \"" + sysfs::printable(*text) + "\""});
    }
  }
  return pci;
}

std::vector<std::string> sorted_entries(const fs::path& dir, std::error_code& ec) {
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool numeric_less(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

void read_rdma(const fs::path& root, NodeInventory& inventory) {
  const fs::path dir = root / "class" / "infiniband";
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  const auto names = sorted_entries(dir, ec);
  if (ec) {
    inventory.problems.push_back({dir.string(), "cannot list: " + ec.message()});
    return;
  }
  for (const auto& name : names) {
    const fs::path device_dir = dir / name;
    if (!fs::exists(device_dir, ec)) {
      inventory.problems.push_back({device_dir.string(), "the link leads nowhere"});
      continue;
    }
    RdmaDevice device;
    device.name = name;
    const fs::path function = device_dir / "device";
    device.pci = position(root, function, inventory.problems);
    if (device.pci) {
      if (const auto vendor = read_text(function / "vendor")) {
        device.efa = sysfs::trim(*vendor) == kAmazonVendor;
      }
      if (fs::is_symlink(function / "physfn", ec)) {
        const auto pf = pci_path(root, function / "physfn");
        if (!pf.empty()) device.pf_address = pf.back();
      } else {
        std::error_code list_ec;
        for (const auto& entry : sorted_entries(function, list_ec)) {
          if (!entry.starts_with("virtfn")) continue;
          const auto vf = pci_path(root, function / entry);
          if (!vf.empty()) inventory.vf_pf[vf.back()] = device.pci->address;
        }
      }
    }
    std::error_code ports_ec;
    for (const auto& port : sorted_entries(device_dir / "ports", ports_ec)) {
      if (!port.empty() && std::all_of(port.begin(), port.end(),
                                       [](unsigned char c) { return std::isdigit(c) != 0; })) {
        device.ports.push_back(port);
      }
    }
    std::sort(device.ports.begin(), device.ports.end(), numeric_less);
    inventory.rdma.push_back(std::move(device));
  }
}

void read_gpus(const fs::path& sysfs, const fs::path& procfs, NodeInventory& inventory) {
  const fs::path dir = procfs / "driver" / "nvidia" / "gpus";
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  const auto names = sorted_entries(dir, ec);
  if (ec) {
    inventory.problems.push_back({dir.string(), "cannot list: " + ec.message()});
    return;
  }
  for (const auto& name : names) {
    if (!is_pci_address(name)) {
      inventory.problems.push_back({(dir / name).string(), "not named by a PCI address"});
      continue;
    }
    Gpu gpu;
    gpu.pci.address = name;
    const fs::path file = dir / name / "information";
    if (const auto text = read_text(file)) {
      if (const auto uuid = parse_gpu_uuid(*text)) {
        gpu.uuid = *uuid;
      } else {
        inventory.problems.push_back(
            {file.string(), "no \"GPU UUID: GPU-…\" line: \"" + sysfs::printable(*text) + "\""});
      }
    } else {
      inventory.problems.push_back({file.string(), "cannot read"});
    }
    const fs::path function = sysfs / "bus" / "pci" / "devices" / name;
    if (auto pci = position(sysfs, function, inventory.problems)) {
      gpu.pci = std::move(*pci);
    } else {
      inventory.problems.push_back(
          {function.string(), "the GPU's PCI function is not in sysfs (or not below devices/)"});
    }
    inventory.gpus.push_back(std::move(gpu));
  }
}

bool is_hex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isdigit(c) != 0 || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  });
}

}  // namespace

const RdmaDevice* NodeInventory::device(std::string_view name) const {
  for (const auto& device : rdma) {
    if (device.name == name) return &device;
  }
  return nullptr;
}

std::vector<const RdmaDevice*> NodeInventory::devices_of(std::string_view address) const {
  std::vector<const RdmaDevice*> found;
  for (const auto& device : rdma) {
    if (device.pci && device.pci->address == address) found.push_back(&device);
  }
  return found;
}

NodeInventory read_inventory(const std::string& sysfs_root, const std::string& procfs_root) {
  NodeInventory inventory;
  read_rdma(sysfs_root, inventory);
  read_gpus(sysfs_root, procfs_root, inventory);
  return inventory;
}

std::optional<std::string> parse_gpu_uuid(std::string_view information) {
  constexpr std::string_view kKey = "GPU UUID:";
  std::size_t at = 0;
  while (at < information.size()) {
    std::size_t end = information.find('\n', at);
    if (end == std::string_view::npos) end = information.size();
    const std::string_view line = information.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(kKey)) continue;
    const std::string_view value = sysfs::trim(line.substr(kKey.size()));
    // GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
    if (value.size() != 40 || !value.starts_with("GPU-")) return std::nullopt;
    const std::string_view uuid = value.substr(4);
    for (std::size_t i = 0; i < uuid.size(); ++i) {
      const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
      if (dash ? uuid[i] != '-' : !is_hex(uuid.substr(i, 1))) return std::nullopt;
    }
    return std::string(value);
  }
  return std::nullopt;
}

bool is_pci_address(std::string_view text) {
  // dddd:bb:dd.f
  if (text.size() != 12 || text[4] != ':' || text[7] != ':' || text[10] != '.') return false;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11}) {
    const char c = text[i];
    if (!(std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string_view distance_name(Distance distance) {
  switch (distance) {
    case Distance::pix:
      return "PIX";
    case Distance::pxb:
      return "PXB";
    case Distance::phb:
      return "PHB";
    case Distance::node:
      return "NODE";
    case Distance::sys:
      return "SYS";
  }
  return "SYS";
}

Distance distance(const PciPosition& a, const PciPosition& b) {
  if (a.path.empty() || b.path.empty() || a.path.front() != b.path.front()) {
    // Different host bridges: one NUMA node (-1 on both: a machine without NUMA affinity, one
    // node) or across the interconnect.
    return a.numa_node && b.numa_node && *a.numa_node == *b.numa_node ? Distance::node
                                                                      : Distance::sys;
  }
  // The bridges above each function (the host bridge and the function itself left out), and
  // how many of them the two share from the root port down.
  const std::size_t above_a = a.path.size() - 2;
  const std::size_t above_b = b.path.size() - 2;
  std::size_t shared = 0;
  while (shared < above_a && shared < above_b && a.path[1 + shared] == b.path[1 + shared]) {
    ++shared;
  }
  if (shared == 0) return Distance::phb;
  // Below the deepest shared bridge (a switch's upstream port), one downstream port on each
  // side: the same switch. More: switches below switches.
  return std::max(above_a - shared, above_b - shared) <= 1 ? Distance::pix : Distance::pxb;
}

Nearest nearest_devices(const Gpu& gpu, const NodeInventory& inventory) {
  Nearest nearest;
  if (gpu.pci.path.empty()) return nearest;
  for (const auto& device : inventory.rdma) {
    if (!device.pci || !device.pf_address.empty()) continue;
    const Distance d = distance(gpu.pci, *device.pci);
    if (nearest.devices.empty() || d < nearest.distance) {
      nearest.devices = {&device};
      nearest.distance = d;
    } else if (d == nearest.distance) {
      nearest.devices.push_back(&device);
    }
  }
  return nearest;
}

}  // namespace ibfabric::pods
