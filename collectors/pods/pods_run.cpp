#include "collectors/pods/pods_run.h"

#include "collectors/pods/node_inventory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>

namespace ibfabric::pods {
namespace {

using prometheus::MetricType;

constexpr std::string_view kPodPortInfo = "ibfabric_pod_port_info";
constexpr std::string_view kGpuPortInfo = "ibfabric_pods_gpu_port_info";
constexpr std::string_view kUnmapped = "ibfabric_pods_unmapped_devices";
constexpr std::string_view kReadErrors = "ibfabric_pods_read_errors_total";
constexpr std::string_view kKubeletUp = "ibfabric_pods_kubelet_up";
constexpr std::string_view kKubeletErrors = "ibfabric_pods_kubelet_errors_total";

const FamilyDoc kFamilies[] = {
    {kGpuPortInfo,
     "One per NVIDIA GPU and local RDMA port nearest to it in the PCIe tree (the ports NCCL "
     "would use for it), value 1: gpu (NVML index), gpu_uuid, gpu_pci_address, device, port, "
     "distance (PIX, PXB, PHB, NODE, SYS as nvidia-smi topo -m).",
     MetricType::Gauge},
    {kReadErrors,
     "sysfs and procfs files of GPUs and RDMA devices that were there but unreadable or "
     "garbled, counted on every collection since the daemon started.",
     MetricType::Counter},
};

const FamilyDoc kKubeletFamilies[] = {
    {kPodPortInfo,
     "One per pod and local RDMA port it uses, as the kubelet's last pod-resources answer says, "
     "value 1: namespace, pod, container, device and port (the port series' own labels), via "
     "(sriov_vf, hca, efa, rdma_shared, gpu; comma-separated when several), resource.",
     MetricType::Gauge},
    {kUnmapped,
     "Device ids of the kubelet's last answer, of resources the collector maps, that it could "
     "not tie to a local port, by resource and reason.",
     MetricType::Gauge},
    {kKubeletUp,
     "1 if the last pod-resources List call to the kubelet answered, 0 if it failed; absent "
     "while the kubelet socket does not exist.",
     MetricType::Gauge},
    {kKubeletErrors,
     "pod-resources List calls that failed since the daemon started, by reason: timeout, "
     "permission_denied, unavailable, unimplemented, malformed, other.",
     MetricType::Counter},
};

std::string joined(const std::set<std::string>& names) {
  std::string text;
  for (const auto& name : names) {
    if (!text.empty()) text += ',';
    text += name;
  }
  return text;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

bool matches(const std::vector<std::string>& patterns, const std::string& resource) {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& pattern) {
    if (pattern.ends_with('*')) {
      return resource.starts_with(std::string_view(pattern).substr(0, pattern.size() - 1));
    }
    return resource == pattern;
  });
}

bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Why a device id was not tied to a port: the `reason` label of ibfabric_pods_unmapped_devices,
// and what the log line says about it.
struct Unmapped {
  std::string_view reason;
  std::string_view explanation;
};
constexpr Unmapped kUnknownDevice{"unknown_device",
                                  "names no GPU, RDMA device or PCI function of this node"};
constexpr Unmapped kNoGpus{"no_gpus",
                           "the NVIDIA driver lists no GPU (no driver/nvidia/gpus under the "
                           "procfs root)"};
constexpr Unmapped kMigUuid{"mig_uuid",
                            "a MIG device's UUID: the driver's procfs does not say which GPU "
                            "it is on (use the device plugin's index ids, or whole GPUs)"};
constexpr Unmapped kNoPort{"no_port",
                           "found, but no RDMA port of this node is tied to it (no HCA with a "
                           "PCI function and a port, or none visible in sysfs)"};
constexpr Unmapped kNotConfigured{
    "not_configured",
    "an RDMA shared device plugin resource: its device ids name no device; list its devices "
    "in collectors.pods.rdma_shared_resources"};

// The GPU a device id of the NVIDIA device plugin names: "GPU-<uuid>" (deviceIDStrategy uuid,
// the default), "3" (index), "3:1" (a MIG device by index: GPU 3), each maybe with "::N" (a
// replica of a shared GPU: time-slicing, MPS).
const Gpu* find_gpu(const NodeInventory& inventory, std::string id, const Unmapped*& why) {
  if (const auto replica = id.find("::"); replica != std::string::npos) id.resize(replica);
  if (inventory.gpus.empty()) {
    why = &kNoGpus;
    return nullptr;
  }
  why = &kUnknownDevice;
  if (id.starts_with("MIG-")) {
    why = &kMigUuid;
    return nullptr;
  }
  if (id.starts_with("GPU-")) {
    const std::string uuid = lowercase(id);
    for (const auto& gpu : inventory.gpus) {
      if (!gpu.uuid.empty() && lowercase(gpu.uuid) == uuid) return &gpu;
    }
    return nullptr;
  }
  // NVML numbers GPUs in PCI bus order: the inventory's order.
  if (const auto colon = id.find(':'); colon != std::string::npos) {
    if (!all_digits(std::string_view(id).substr(colon + 1))) return nullptr;
    id.resize(colon);
  }
  if (!all_digits(id) || id.size() > 4) return nullptr;
  const auto index = static_cast<std::size_t>(std::stoul(id));
  return index < inventory.gpus.size() ? &inventory.gpus[index] : nullptr;
}

}  // namespace

CollectResult PodsRun::run() {
  MetricsBuilder out;
  for (const auto& family : kFamilies) out.declare(family.name, family.help, family.type);

  const NodeInventory inventory = read_inventory(config_.sysfs_root, config_.procfs_root);
  std::set<std::string> bad_now;
  for (const auto& problem : inventory.problems) {
    ++s_.read_errors;
    bad_now.insert(problem.path);
    if (!s_.bad_files.contains(problem.path)) {
      spdlog::warn("pods: cannot use file={} error=\"{}\"", problem.path, problem.what);
    }
  }
  for (const auto& path : s_.bad_files) {
    if (!bad_now.contains(path)) spdlog::info("pods: file is good again file={}", path);
  }
  s_.bad_files = std::move(bad_now);
  out.counter(kReadErrors, "", {}, static_cast<double>(s_.read_errors));

  for (std::size_t index = 0; index < inventory.gpus.size(); ++index) {
    const Gpu& gpu = inventory.gpus[index];
    const Nearest nearest = nearest_devices(gpu, inventory);
    for (const RdmaDevice* device : nearest.devices) {
      for (const auto& port : device->ports) {
        out.info(kGpuPortInfo, "",
                 {{"gpu", std::to_string(index)},
                  {"gpu_uuid", gpu.uuid},
                  {"gpu_pci_address", gpu.pci.address},
                  {"device", device->name},
                  {"port", port},
                  {"distance", std::string(distance_name(nearest.distance))}});
      }
    }
  }

  add_pods(out, inventory);
  return CollectResult{std::move(out).take(), true, ""};
}

// A kubelet that is absent, refuses, hangs or answers garbage costs the pod series only: it is
// counted and logged, and never fails the collection. So does a device id that cannot be tied
// to a port: it is counted by reason and logged once, and the pod's other devices still count.
void PodsRun::add_pods(MetricsBuilder& out, const NodeInventory& inventory) {
  if (config_.kubelet.socket.empty()) return;
  for (const auto& family : kKubeletFamilies) out.declare(family.name, family.help, family.type);
  const kubelet::Answer answer = s_.kubelet.ask(config_.kubelet);
  if (!answer.socket_exists) return;
  out.gauge(kKubeletUp, "", {}, answer.up ? 1 : 0);
  const auto errors = s_.kubelet.errors();
  for (const char* reason : kubelet::kKubeletErrorReasons) {
    out.counter(kKubeletErrors, "", {{"reason", reason}}, static_cast<double>(errors.at(reason)));
  }
  if (!answer.up) return;

  // RDMA devices a reference names: an RDMA device, a PCI function (a VF's leads to its own
  // device, if the daemon sees it, and to its PF's), or a net interface's PCI function.
  const auto devices_named = [&](const std::string& reference, bool& vf) {
    std::vector<const RdmaDevice*> found;
    vf = false;
    std::string address;
    if (const RdmaDevice* device = inventory.device(reference)) {
      found.push_back(device);
      address = device->pci ? device->pci->address : "";
    } else if (is_pci_address(lowercase(reference))) {
      address = lowercase(reference);
      found = inventory.devices_of(address);
    } else if (!reference.empty() && reference.find('/') == std::string::npos && reference != "." &&
               reference != "..") {
      std::error_code ec;
      const auto target = std::filesystem::canonical(
          std::filesystem::path(config_.sysfs_root) / "class" / "net" / reference / "device", ec);
      if (!ec && is_pci_address(target.filename().string())) {
        address = target.filename().string();
        found = inventory.devices_of(address);
      }
    }
    if (address.empty()) return found;
    std::string pf;
    for (const RdmaDevice* device : found) {
      if (!device->pf_address.empty()) pf = device->pf_address;
    }
    if (const auto it = inventory.vf_pf.find(address); pf.empty() && it != inventory.vf_pf.end()) {
      pf = it->second;
    }
    if (!pf.empty()) {
      vf = true;
      for (const RdmaDevice* device : inventory.devices_of(pf)) {
        if (std::find(found.begin(), found.end(), device) == found.end()) found.push_back(device);
      }
    }
    return found;
  };

  // The shared resources' devices, resolved once per collection; a reference that names
  // nothing is logged when it starts to.
  std::map<std::string, std::vector<const RdmaDevice*>> shared;
  std::set<std::string> bad_references;
  for (const auto& resource : config_.rdma_shared) {
    auto& devices = shared[resource.resource];
    for (const auto& reference : resource.devices) {
      bool vf = false;
      const auto found = devices_named(reference, vf);
      if (found.empty()) {
        const std::string key = resource.resource + " " + reference;
        bad_references.insert(key);
        if (!s_.bad_references.contains(key)) {
          spdlog::warn(
              "pods: rdma_shared_resources: resource={} device={} names no RDMA device, net "
              "interface or PCI function of this node",
              resource.resource, reference);
        }
      }
      for (const RdmaDevice* device : found) {
        if (std::find(devices.begin(), devices.end(), device) == devices.end()) {
          devices.push_back(device);
        }
      }
    }
  }
  s_.bad_references = std::move(bad_references);

  // One series per pod and port, so that a join on the port's labels finds one per pod: the
  // containers, ways and resources by which the pod uses the port are joined into one value.
  struct Use {
    std::set<std::string> containers, via, resources;
  };
  using Key = std::tuple<std::string, std::string, std::string, std::string, std::string>;
  std::map<Key, Use> uses;  // namespace, pod, device, port (numeric order kept by padding)
  std::map<std::pair<std::string, std::string>, int> unmapped_count;  // resource, reason
  std::set<std::string> unmapped_now;

  for (const auto& held : answer.devices) {
    std::vector<const RdmaDevice*> devices;
    std::string via;
    const Unmapped* why = nullptr;
    if (const auto found = shared.find(held.resource); found != shared.end()) {
      devices = found->second;
      via = "rdma_shared";
      why = devices.empty() ? &kUnknownDevice : &kNoPort;
    } else if (matches(config_.gpu_resources, held.resource)) {
      via = "gpu";
      if (const Gpu* gpu = find_gpu(inventory, held.device_id, why)) {
        devices = nearest_devices(*gpu, inventory).devices;
        why = &kNoPort;
      }
    } else {
      bool vf = false;
      devices = devices_named(held.device_id, vf);
      const bool efa = matches(config_.efa_resources, held.resource);
      via = efa ? "efa" : vf ? "sriov_vf" : "hca";
      if (devices.empty()) {
        // Device ids of other plugins (FPGAs, other vendors' NICs) are none of ours; only
        // resources the collector is told or knows to be about RDMA devices are reported.
        if (efa) {
          why = &kUnknownDevice;
        } else if (held.resource.starts_with("rdma/")) {
          why = &kNotConfigured;
        } else {
          continue;
        }
      } else {
        why = &kNoPort;
      }
    }
    bool tied = false;
    for (const RdmaDevice* device : devices) {
      for (const auto& port : device->ports) {
        // Ports sort as numbers within a device: "2" before "10".
        const std::string order = std::string(8 - std::min<std::size_t>(8, port.size()), '0');
        Use& use = uses[{held.namespace_name, held.pod, device->name, order + port, port}];
        use.containers.insert(held.container);
        use.via.insert(via);
        use.resources.insert(held.resource);
        tied = true;
      }
    }
    if (tied) continue;
    ++unmapped_count[{held.resource, std::string(why->reason)}];
    const std::string key = held.resource + " " + held.device_id + " " + std::string(why->reason);
    unmapped_now.insert(key);
    if (!s_.unmapped.contains(key)) {
      spdlog::warn(
          "pods: cannot tie a device to a port resource={} device_id={} reason={} namespace={} "
          "pod={} error=\"{}\"",
          held.resource, held.device_id, why->reason, held.namespace_name, held.pod,
          why->explanation);
    }
  }
  s_.unmapped = std::move(unmapped_now);

  for (const auto& [key, use] : uses) {
    const auto& [namespace_name, pod, device, order, port] = key;
    out.info(kPodPortInfo, "",
             {{"namespace", namespace_name},
              {"pod", pod},
              {"container", joined(use.containers)},
              {"device", device},
              {"port", port},
              {"via", joined(use.via)},
              {"resource", joined(use.resources)}});
  }
  for (const auto& [key, count] : unmapped_count) {
    out.gauge(kUnmapped, "", {{"resource", key.first}, {"reason", key.second}}, count);
  }
}

}  // namespace ibfabric::pods
