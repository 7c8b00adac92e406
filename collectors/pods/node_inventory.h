#pragma once
// What the `pods` collector knows of the node, read on every collection: its RDMA devices
// (sysfs class/infiniband) with their PCI functions and places in the PCIe tree, its NVIDIA GPUs
// (the driver's procfs driver/nvidia/gpus/<pci address>/information, and their sysfs PCI
// functions), and how far apart two PCI functions are, in the classes `nvidia-smi topo -m`
// prints (PIX, PXB, PHB, NODE, SYS). docs/collectors.md, "Collector `pods`".

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ibfabric::pods {

// A PCI function and where it hangs: `path` is its sysfs device path below devices/, the host
// bridge first ("pci0000:15"), then every PCI function from the root port down to this one
// ("0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0").
struct PciPosition {
  std::string address;  // "0000:18:00.0"
  std::vector<std::string> path;
  std::optional<std::int64_t> numa_node;  // -1: the platform reports no affinity; nullopt: unknown
};

// One entry of class/infiniband.
struct RdmaDevice {
  std::string name;                // "mlx5_0", "rdmap16s27"
  std::optional<PciPosition> pci;  // nullopt: a device without a PCI function (rxe, siw)
  std::string pf_address;          // an SR-IOV VF's physical function; "" otherwise
  bool efa = false;                // an AWS Elastic Fabric Adapter (PCI vendor 0x1d0f)
  std::vector<std::string> ports;  // "1", "2": the entries of ports/, in numeric order
};

// One GPU the NVIDIA driver lists in procfs.
struct Gpu {
  PciPosition pci;   // path empty when sysfs has no such PCI function
  std::string uuid;  // "GPU-…" as the driver writes it; "" when the file has none
};

// A file that was there but could not be used.
struct Problem {
  std::string path;
  std::string what;
};

struct NodeInventory {
  std::vector<RdmaDevice> rdma;  // by name
  std::vector<Gpu> gpus;         // by PCI address, which is NVML's index order
  // VF PCI address -> its PF's, from the virtfnN links of the PFs of RDMA devices: a VF whose
  // own RDMA device the daemon cannot see (bound to vfio-pci, or moved into a pod's RDMA
  // namespace) still leads to its PF.
  std::map<std::string, std::string> vf_pf;
  std::vector<Problem> problems;

  const RdmaDevice* device(std::string_view name) const;
  // The RDMA devices whose PCI function is `address`.
  std::vector<const RdmaDevice*> devices_of(std::string_view address) const;
};

// Reads both roots. A root without class/infiniband (no RDMA driver) or without
// driver/nvidia/gpus (no NVIDIA driver) gives no devices of that kind, and no problem.
NodeInventory read_inventory(const std::string& sysfs_root, const std::string& procfs_root);

// The value of the driver's "GPU UUID:" line (nv-procfs: "GPU UUID: \t GPU-<uuid>"); nullopt when
// the line is missing or its value is not "GPU-" and 36 characters of a UUID.
std::optional<std::string> parse_gpu_uuid(std::string_view information);

// "0000:18:00.0": domain, bus, device and function in lowercase hex, as sysfs names functions.
bool is_pci_address(std::string_view text);

// How far apart two PCI functions are, nearest first, as `nvidia-smi topo -m` names it:
//   pix   under one PCIe switch (or one port): at most one bridge on either side of the switch
//   pxb   under one root port through several switches, not through the host bridge
//   phb   under one PCIe host bridge, through it (different root ports)
//   node  under different host bridges of one NUMA node
//   sys   across NUMA nodes (or a NUMA node unknown)
enum class Distance { pix, pxb, phb, node, sys };
std::string_view distance_name(Distance distance);  // "PIX", ...
Distance distance(const PciPosition& a, const PciPosition& b);

// The devices a GPU's traffic would leave by: of the RDMA devices with a PCI function that are
// not VFs, those nearest to the GPU; all of them when several are as near. Empty when the GPU's
// position is unknown or there are none.
struct Nearest {
  std::vector<const RdmaDevice*> devices;
  Distance distance = Distance::sys;
};
Nearest nearest_devices(const Gpu& gpu, const NodeInventory& inventory);

}  // namespace ibfabric::pods
