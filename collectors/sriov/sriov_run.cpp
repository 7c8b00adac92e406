#include "collectors/sriov/sriov_run.h"

#include "collectors/sriov/sriov_netlink.h"
#include "collectors/sriov/sriov_sysfs.h"

#include <linux/if_link.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <tuple>

namespace ibfabric::sriov {
namespace {

using prometheus::MetricType;

constexpr std::string_view kPfInfo = "ibfabric_sriov_pf_info";
constexpr std::string_view kPfVfsSupported = "ibfabric_sriov_pf_vfs_supported";
constexpr std::string_view kPfVfsEnabled = "ibfabric_sriov_pf_vfs_enabled";
constexpr std::string_view kVfInfo = "ibfabric_sriov_vf_info";
constexpr std::string_view kVfLinkPolicy = "ibfabric_sriov_vf_link_policy";
constexpr std::string_view kReadErrors = "ibfabric_sriov_read_errors_total";
constexpr std::string_view kVfNetlinkInfo = "ibfabric_sriov_vf_netlink_info";
constexpr std::string_view kVfLinkState = "ibfabric_sriov_vf_link_state";
constexpr std::string_view kVfTrusted = "ibfabric_sriov_vf_trusted";
constexpr std::string_view kVfSpoofCheck = "ibfabric_sriov_vf_spoof_check";
constexpr std::string_view kNetlinkErrors = "ibfabric_sriov_netlink_errors_total";
constexpr std::string_view kVfNumaNode = "ibfabric_sriov_vf_numa_node";
constexpr std::string_view kVfPodInfo = "ibfabric_sriov_vf_pod_info";
constexpr std::string_view kKubeletUp = "ibfabric_sriov_kubelet_up";
constexpr std::string_view kKubeletErrors = "ibfabric_sriov_kubelet_errors_total";

const FamilyDoc kFamilies[] = {
    {kPfInfo,
     "One per SR-IOV physical function (sysfs), value 1: pf (its uplink net interface, or its "
     "PCI address when it has none), pci_address, rdma_device.",
     MetricType::Gauge},
    {kPfVfsSupported, "VFs the physical function supports (sysfs device/sriov_totalvfs).",
     MetricType::Gauge},
    {kPfVfsEnabled, "VFs enabled on the physical function (sysfs device/sriov_numvfs).",
     MetricType::Gauge},
    {kVfInfo,
     "One per enabled VF (sysfs virtfnN), value 1: its PCI address, the net interface and RDMA "
     "device it became (empty when no driver is bound), node and port GUID and link_policy "
     "(mlx5 sriov/<vf>/{node,port,policy}; empty when the driver has none).",
     MetricType::Gauge},
    {kVfLinkPolicy,
     "Port state policy of the VF (mlx5 sysfs sriov/<vf>/policy): 0 Down, 1 Up, 2 Follow "
     "(the physical port).",
     MetricType::Gauge},
    {kReadErrors,
     "SR-IOV sysfs files of this physical function that were unreadable or garbled, counted "
     "on every collection since the daemon started.",
     MetricType::Counter},
    {kVfNetlinkInfo,
     "One per VF the kernel reports over rtnetlink (IFLA_VF_INFO), value 1: mac, link_state "
     "name, and the node/port GUIDs the kernel reports (IFLA_VF_IB_*_GUID; empty if none).",
     MetricType::Gauge},
    {kVfLinkState,
     "Administrative link state of the VF (rtnetlink IFLA_VF_LINK_STATE): 0 auto (follows the "
     "uplink), 1 enable (always up), 2 disable (always down).",
     MetricType::Gauge},
    {kVfTrusted, "1 if the VF is trusted (rtnetlink IFLA_VF_TRUST), 0 if not.", MetricType::Gauge},
    {kVfSpoofCheck, "1 if MAC spoof checking is on for the VF (rtnetlink IFLA_VF_SPOOFCHK).",
     MetricType::Gauge},
    {kNetlinkErrors,
     "RTM_GETLINK dumps that failed (no answer within netlink_timeout, socket error, or "
     "malformed answer) since the daemon started.",
     MetricType::Counter},
    {kVfNumaNode,
     "NUMA node of the VF's PCI device (sysfs virtfnN/numa_node); -1 when the platform reports "
     "no affinity.",
     MetricType::Gauge},
};

const FamilyDoc kKubeletFamilies[] = {
    {kVfPodInfo,
     "One per VF the kubelet reports as allocated to a pod (pod-resources List, device id = the "
     "VF's PCI address), value 1: namespace, pod, container (comma-separated if several of the "
     "pod's containers hold it), resource (the device plugin's resource name).",
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

struct StatCounter {
  std::string_view name;
  std::string_view help;
  std::optional<std::uint64_t> VfStats::*field;
};

const StatCounter kStatCounters[] = {
    {"ibfabric_sriov_vf_receive_packets_total",
     "Packets received by the VF (rtnetlink IFLA_VF_STATS_RX_PACKETS).", &VfStats::rx_packets},
    {"ibfabric_sriov_vf_transmit_packets_total",
     "Packets transmitted by the VF (IFLA_VF_STATS_TX_PACKETS).", &VfStats::tx_packets},
    {"ibfabric_sriov_vf_receive_bytes_total", "Bytes received by the VF (IFLA_VF_STATS_RX_BYTES).",
     &VfStats::rx_bytes},
    {"ibfabric_sriov_vf_transmit_bytes_total",
     "Bytes transmitted by the VF (IFLA_VF_STATS_TX_BYTES).", &VfStats::tx_bytes},
    {"ibfabric_sriov_vf_receive_broadcast_packets_total",
     "Broadcast packets received by the VF (IFLA_VF_STATS_BROADCAST).", &VfStats::broadcast},
    {"ibfabric_sriov_vf_receive_multicast_packets_total",
     "Multicast packets received by the VF (IFLA_VF_STATS_MULTICAST).", &VfStats::multicast},
    {"ibfabric_sriov_vf_receive_dropped_packets_total",
     "Received packets the VF dropped (IFLA_VF_STATS_RX_DROPPED, Linux 5.6+).",
     &VfStats::rx_dropped},
    {"ibfabric_sriov_vf_transmit_dropped_packets_total",
     "Packets to transmit the VF dropped (IFLA_VF_STATS_TX_DROPPED, Linux 5.6+).",
     &VfStats::tx_dropped},
};

std::string_view link_state_name(std::uint32_t state) {
  switch (state) {
    case IFLA_VF_LINK_STATE_AUTO:
      return "auto";
    case IFLA_VF_LINK_STATE_ENABLE:
      return "enable";
    case IFLA_VF_LINK_STATE_DISABLE:
      return "disable";
  }
  return "unknown";
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) {
    if (!text.empty()) text += ',';
    text += name;
  }
  return text;
}

}  // namespace

CollectResult SriovRun::run() {
  MetricsBuilder out;
  for (const auto& family : kFamilies) out.declare(family.name, family.help, family.type);
  if (dump_) {
    for (const auto& counter : kStatCounters) {
      out.declare(counter.name, counter.help, MetricType::Counter);
    }
  }

  // --- sysfs -------------------------------------------------------------------------------
  SriovInventory inventory = read_inventory(config_.sysfs_root);
  std::set<std::string> bad_now;
  for (const auto& problem : inventory.problems) {
    ++s_.read_errors[problem.pf];
    bad_now.insert(problem.path);
    if (!s_.bad_files.contains(problem.path)) {
      spdlog::warn("sriov: cannot use file={} error=\"{}\"", problem.path, problem.what);
    }
  }
  for (const auto& path : s_.bad_files) {
    if (!bad_now.contains(path)) spdlog::info("sriov: file is good again file={}", path);
  }
  s_.bad_files = std::move(bad_now);

  std::map<std::string, const PfInventory*> pf_by_name;
  for (const auto& pf : inventory.pfs) {
    pf_by_name.emplace(pf.name(), &pf);
    const Labels pf_labels{{"pf", pf.name()}};
    out.info(kPfInfo, "",
             {{"pf", pf.name()},
              {"pci_address", pf.pci_address},
              {"rdma_device", joined(pf.rdma_devices)}});
    if (pf.total_vfs) out.gauge(kPfVfsSupported, "", pf_labels, static_cast<double>(*pf.total_vfs));
    if (pf.enabled_vfs) {
      out.gauge(kPfVfsEnabled, "", pf_labels, static_cast<double>(*pf.enabled_vfs));
    }
    for (const auto& vf : pf.vfs) {
      const std::string index = std::to_string(vf.index);
      out.info(kVfInfo, "",
               {{"pf", pf.name()},
                {"vf", index},
                {"pci_address", vf.pci_address},
                {"net_interface", joined(vf.net_interfaces)},
                {"rdma_device", joined(vf.rdma_devices)},
                {"node_guid", vf.node_guid.value_or("")},
                {"port_guid", vf.port_guid.value_or("")},
                {"link_policy", vf.policy ? std::string(link_policy_name(*vf.policy)) : ""}});
      const Labels vf_labels{{"pf", pf.name()}, {"vf", index}, {"pci_address", vf.pci_address}};
      if (vf.policy) out.gauge(kVfLinkPolicy, "", vf_labels, static_cast<double>(*vf.policy));
      if (vf.numa_node) out.gauge(kVfNumaNode, "", vf_labels, static_cast<double>(*vf.numa_node));
    }
  }
  // Every present PF has its error counter, zero included; errors listing the class
  // directories have pf="". A PF that is gone takes its series along.
  for (const auto& pf : inventory.pfs) {
    out.counter(kReadErrors, "", {{"pf", pf.name()}},
                static_cast<double>(s_.read_errors[pf.name()]));
  }
  if (const auto found = s_.read_errors.find(""); found != s_.read_errors.end()) {
    out.counter(kReadErrors, "", {{"pf", ""}}, static_cast<double>(found->second));
  }

  // --- kubelet -------------------------------------------------------------------------------
  add_pods(out, inventory.pfs);

  // --- netlink -------------------------------------------------------------------------------
  CollectResult result;
  result.success = true;
  if (dump_) {
    std::vector<PfLink> links;
    try {
      links = dump_();
      if (!s_.last_netlink_error.empty()) spdlog::info("sriov: netlink link dump works again");
      s_.last_netlink_error.clear();
    } catch (const NetlinkError& e) {
      ++s_.netlink_errors;
      result.success = false;
      result.error = std::string("sriov: netlink: ") + e.what();
      s_.last_netlink_error = e.what();
    }
    out.counter(kNetlinkErrors, "", {}, static_cast<double>(s_.netlink_errors));

    for (const auto& link : links) {
      const auto found = pf_by_name.find(link.ifname);
      const PfInventory* pf = found == pf_by_name.end() ? nullptr : found->second;
      for (const auto& vf : link.vfs) {
        std::string pci_address;
        if (pf) {
          for (const auto& known : pf->vfs) {
            if (known.index == vf.vf) pci_address = known.pci_address;
          }
        }
        const Labels labels{
            {"pf", link.ifname}, {"vf", std::to_string(vf.vf)}, {"pci_address", pci_address}};
        Labels info = labels;
        info.emplace_back("mac", vf.mac.value_or(""));
        info.emplace_back("link_state",
                          vf.link_state ? std::string(link_state_name(*vf.link_state)) : "");
        info.emplace_back("node_guid", vf.node_guid.value_or(""));
        info.emplace_back("port_guid", vf.port_guid.value_or(""));
        out.info(kVfNetlinkInfo, "", info);
        if (vf.link_state) out.gauge(kVfLinkState, "", labels, *vf.link_state);
        if (vf.trust) out.gauge(kVfTrusted, "", labels, *vf.trust ? 1 : 0);
        if (vf.spoof_check) out.gauge(kVfSpoofCheck, "", labels, *vf.spoof_check ? 1 : 0);
        if (vf.stats) {
          for (const auto& counter : kStatCounters) {
            const auto& value = (*vf.stats).*counter.field;
            if (value) out.counter(counter.name, "", labels, static_cast<double>(*value));
          }
        }
      }
    }
  }
  result.metrics = std::move(out).take();
  return result;
}

// A kubelet that is absent, refuses, hangs or answers garbage costs the pod series only: it is
// counted and logged, and never fails the collection.
void SriovRun::add_pods(MetricsBuilder& out, const std::vector<PfInventory>& pfs) {
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
  const std::vector<kubelet::DeviceAssignment>& devices = answer.devices;

  struct VfRef {
    const PfInventory* pf;
    const VfInventory* vf;
  };
  std::map<std::string, VfRef> vf_by_address;
  for (const auto& pf : pfs) {
    for (const auto& vf : pf.vfs) {
      if (!vf.pci_address.empty()) vf_by_address.emplace(vf.pci_address, VfRef{&pf, &vf});
    }
  }
  // One series per VF and pod, so that `* on (pf, vf) group_left (namespace, pod)` finds one
  // match: containers of one pod that share a VF (an init container's devices are handed on to
  // the app container) are joined into one label value.
  using Key = std::tuple<std::string, std::uint32_t, std::string, std::string, std::string,
                         std::string>;  // pf, vf, pci_address, namespace, pod, resource
  std::map<Key, std::set<std::string>> held;
  for (const auto& device : devices) {
    std::string address = device.device_id;
    std::transform(address.begin(), address.end(), address.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    // Device ids of other plugins (GPUs, other PCI devices) are not VFs of a PF seen here.
    const auto found = vf_by_address.find(address);
    if (found == vf_by_address.end()) continue;
    const auto& [pf, vf] = found->second;
    held[{pf->name(), vf->index, vf->pci_address, device.namespace_name, device.pod,
          device.resource}]
        .insert(device.container);
  }
  for (const auto& [key, containers] : held) {
    const auto& [pf, vf, pci_address, namespace_name, pod, resource] = key;
    out.info(kVfPodInfo, "",
             {{"pf", pf},
              {"vf", std::to_string(vf)},
              {"pci_address", pci_address},
              {"namespace", namespace_name},
              {"pod", pod},
              {"container", joined({containers.begin(), containers.end()})},
              {"resource", resource}});
  }
}

}  // namespace ibfabric::sriov
