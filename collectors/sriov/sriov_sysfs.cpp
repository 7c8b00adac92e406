#include "collectors/sriov/sriov_sysfs.h"

#include "ib/sysfs_parse.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

namespace ibfabric::sriov {

namespace fs = std::filesystem;

std::optional<std::string> parse_vf_guid(std::string_view text) {
  text = sysfs::trim(text);
  // Exactly eight two-digit hex bytes separated by colons: 23 characters.
  if (text.size() != 23) return std::nullopt;
  std::string guid = "0x";
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (i % 3 == 2) {
      if (c != ':') return std::nullopt;
      continue;
    }
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    guid += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return guid;
}

std::optional<LinkPolicy> parse_link_policy(std::string_view text) {
  text = sysfs::trim(text);
  if (text == "Down") return LinkPolicy::down;
  if (text == "Up") return LinkPolicy::up;
  if (text == "Follow") return LinkPolicy::follow;
  return std::nullopt;
}

std::string_view link_policy_name(LinkPolicy policy) {
  switch (policy) {
    case LinkPolicy::down:
      return "Down";
    case LinkPolicy::up:
      return "Up";
    case LinkPolicy::follow:
      return "Follow";
  }
  return "";
}

std::optional<std::uint64_t> parse_count(std::string_view text) {
  return sysfs::parse_decimal(text);
}

std::optional<std::int64_t> parse_numa_node(std::string_view text) {
  text = sysfs::trim(text);
  if (text == "-1") return -1;
  const auto node = sysfs::parse_decimal(text);
  // Linux has at most 1 << CONFIG_NODES_SHIFT (10 at most) nodes.
  if (!node || *node > 65535) return std::nullopt;
  return static_cast<std::int64_t>(*node);
}

namespace {

struct FileContent {
  std::string text;
  int error = 0;  // errno of open/read
};

FileContent read_small_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {{}, errno};
  FileContent content;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      content.error = errno;
      break;
    }
    if (n == 0) break;
    content.text.append(buffer, static_cast<std::size_t>(n));
    if (content.text.size() >= 65536) break;  // not a sysfs attribute; parsing will refuse it
  }
  ::close(fd);
  return content;
}

// Sorted entry names; empty when the directory does not exist. Other failures set `error`.
std::vector<std::string> list_dir(const fs::path& dir, std::error_code& error) {
  std::vector<std::string> names;
  error.clear();
  fs::directory_iterator it(dir, error);
  if (error) {
    if (error == std::errc::no_such_file_or_directory || error == std::errc::not_a_directory) {
      error.clear();
    }
    return names;
  }
  for (; it != fs::directory_iterator(); it.increment(error)) {
    if (error) return names;
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::uint32_t> suffix_index(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  std::uint32_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

// Reads one PF; problems go into `problems`.
class PfReader {
 public:
  PfReader(const fs::path& dir, std::vector<ReadProblem>& problems)
      : dir_(dir), problems_(problems) {}

  PfInventory read() {
    pf_.pci_address = dir_.filename().string();
    pf_.interface = uplink_interface();
    pf_.rdma_devices = entries(dir_ / "infiniband");
    pf_.total_vfs = count(dir_ / "sriov_totalvfs");
    pf_.enabled_vfs = count(dir_ / "sriov_numvfs");

    std::error_code error;
    for (const auto& name : list_dir(dir_, error)) {
      auto index = suffix_index(name, "virtfn");
      if (index) pf_.vfs.push_back(read_vf(*index, dir_ / name));
    }
    if (error) problem(dir_, "cannot list: " + error.message());
    std::sort(pf_.vfs.begin(), pf_.vfs.end(),
              [](const VfInventory& a, const VfInventory& b) { return a.index < b.index; });
    return std::move(pf_);
  }

 private:
  void problem(const fs::path& path, std::string what) {
    // The name is settled before any file that can fail is read.
    problems_.push_back({pf_.name(), path.string(), std::move(what)});
  }

  std::vector<std::string> entries(const fs::path& dir) {
    std::error_code error;
    auto names = list_dir(dir, error);
    if (error) problem(dir, "cannot list: " + error.message());
    return names;
  }

  // The text of a file; nullopt when missing (if `optional`) or after recording a problem.
  std::optional<std::string> text(const fs::path& path, bool optional) {
    FileContent content = read_small_file(path);
    if (content.error == ENOENT && optional) return std::nullopt;
    if (content.error != 0) {
      problem(path, content.error == ENOENT
                        ? "missing"
                        : "cannot read: " + std::string(std::strerror(content.error)));
      return std::nullopt;
    }
    return std::move(content.text);
  }

  template <typename Parse>
  auto parsed(const fs::path& path, bool optional, Parse parse, std::string_view expected)
      -> decltype(parse(std::string_view{})) {
    auto content = text(path, optional);
    if (!content) return std::nullopt;
    auto value = parse(*content);
    if (!value) {
      problem(path, "cannot parse: expected " + std::string(expected) + ", got '" +
                        sysfs::printable(*content) + "'");
    }
    return value;
  }

  std::optional<std::uint64_t> count(const fs::path& path) {
    return parsed(path, false, parse_count, "a decimal number");
  }

  // In switchdev mode the VF representors are net devices of the PF too; their phys_port_name
  // is "pf0vf3" (or "pf0sf1" for subfunctions), the uplink's is "p0" or unsupported.
  std::string uplink_interface() {
    std::error_code error;
    auto names = list_dir(dir_ / "net", error);
    for (const auto& name : names) {
      FileContent port = read_small_file(dir_ / "net" / name / "phys_port_name");
      const std::string_view port_name = sysfs::trim(port.text);
      if (port.error == 0 && (port_name.find("vf") != std::string_view::npos ||
                              port_name.find("sf") != std::string_view::npos)) {
        continue;
      }
      return name;
    }
    return "";
  }

  VfInventory read_vf(std::uint32_t index, const fs::path& link) {
    VfInventory vf;
    vf.index = index;
    std::error_code error;
    const fs::path target = fs::read_symlink(link, error);
    if (error) {
      problem(link, "cannot read link: " + error.message());
    } else {
      vf.pci_address = target.filename().string();
    }
    // While VFs are being removed the link can dangle: then there is nothing bound to list.
    vf.net_interfaces = entries(link / "net");
    vf.rdma_devices = entries(link / "infiniband");
    vf.numa_node = parsed(link / "numa_node", true, parse_numa_node, "a NUMA node number or -1");

    const fs::path vf_dir = dir_ / "sriov" / std::to_string(index);
    vf.node_guid = parsed(vf_dir / "node", true, parse_vf_guid, "xx:xx:xx:xx:xx:xx:xx:xx");
    vf.port_guid = parsed(vf_dir / "port", true, parse_vf_guid, "xx:xx:xx:xx:xx:xx:xx:xx");
    vf.policy = parsed(vf_dir / "policy", true, parse_link_policy, "Down, Up or Follow");
    return vf;
  }

  fs::path dir_;
  std::vector<ReadProblem>& problems_;
  PfInventory pf_;
};

}  // namespace

SriovInventory read_inventory(const std::string& sysfs_root) {
  SriovInventory inventory;
  // PCI functions by canonical path: a PF is reached from its net interface and its RDMA
  // device alike.
  std::set<fs::path> functions;
  for (const char* cls : {"class/net", "class/infiniband"}) {
    const fs::path class_dir = fs::path(sysfs_root) / cls;
    std::error_code error;
    for (const auto& name : list_dir(class_dir, error)) {
      const fs::path device = class_dir / name / "device";
      std::error_code ignored;
      if (!fs::exists(device / "sriov_totalvfs", ignored)) continue;
      const fs::path function = fs::canonical(device, ignored);
      if (!ignored) functions.insert(function);
    }
    if (error) {
      inventory.problems.push_back({"", class_dir.string(), "cannot list: " + error.message()});
    }
  }
  for (const auto& function : functions) {
    inventory.pfs.push_back(PfReader(function, inventory.problems).read());
  }
  std::sort(inventory.pfs.begin(), inventory.pfs.end(),
            [](const PfInventory& a, const PfInventory& b) { return a.name() < b.name(); });
  return inventory;
}

}  // namespace ibfabric::sriov
