#pragma once
// The SR-IOV inventory as sysfs shows it: physical functions (found through the `device` link of
// class/net/<if> and class/infiniband/<dev>) with sriov_totalvfs, their enabled VFs (virtfnN
// links), what each VF became (its net/ and infiniband/ entries) and, for mlx5, the VF's
// GUIDs and link-state policy from <pf>/sriov/<vf>/{node,port,policy}.
//
// A pure function of the tree under the sysfs root: it holds no state, so a VF that is gone
// from sysfs is gone from the next inventory.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ibfabric::sriov {

// mlx5's port state policy of a VF (sriov/<vf>/policy): what the VF's port does when the
// physical port goes up or down.
enum class LinkPolicy : int { down = 0, up = 1, follow = 2 };

struct VfInventory {
  std::uint32_t index = 0;                  // N of virtfnN
  std::string pci_address;                  // "0000:17:00.2"
  std::vector<std::string> net_interfaces;  // what the VF's driver registered, if bound
  std::vector<std::string> rdma_devices;
  std::optional<std::string> node_guid;  // "0x" + 16 hex digits
  std::optional<std::string> port_guid;
  std::optional<LinkPolicy> policy;
  // The VF's PCI device's numa_node: -1 when the platform gives no affinity; nullopt when the
  // file is missing or garbled.
  std::optional<std::int64_t> numa_node;
};

struct PfInventory {
  std::string pci_address;
  // The PF's uplink net interface ("" when it has none: then the PCI address names it).
  std::string interface;
  std::vector<std::string> rdma_devices;
  std::optional<std::uint64_t> total_vfs;    // sriov_totalvfs
  std::optional<std::uint64_t> enabled_vfs;  // sriov_numvfs
  std::vector<VfInventory> vfs;              // ordered by index

  // The `pf` label: the interface, or the PCI address for a PF without one.
  const std::string& name() const { return interface.empty() ? pci_address : interface; }
};

// A file that was there but could not be read or parsed (missing optional files are not
// problems). `pf` is the PF's name.
struct ReadProblem {
  std::string pf;
  std::string path;
  std::string what;
};

struct SriovInventory {
  std::vector<PfInventory> pfs;  // only PFs with sriov_totalvfs, ordered by name
  std::vector<ReadProblem> problems;
};

SriovInventory read_inventory(const std::string& sysfs_root);

// "11:22:33:44:55:66:77:88\n" (mlx5's %02x:...) -> "0x1122334455667788".
std::optional<std::string> parse_vf_guid(std::string_view text);
// "Down", "Up", "Follow".
std::optional<LinkPolicy> parse_link_policy(std::string_view text);
std::string_view link_policy_name(LinkPolicy policy);
// An unsigned decimal such as sriov_totalvfs.
std::optional<std::uint64_t> parse_count(std::string_view text);
// A PCI device's numa_node ("1\n", "-1\n"): a node number, or -1.
std::optional<std::int64_t> parse_numa_node(std::string_view text);

}  // namespace ibfabric::sriov
