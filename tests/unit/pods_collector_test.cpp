// The `pods` collector: which pod uses which local RDMA port. On fixture trees laid out as the
// kernel lays them out: tests/fixtures/sysfs/gpu-node with tests/fixtures/procfs/gpu-node (a
// two-socket GPU node: 8 GPUs, 4 ConnectX-7 HCAs, two PCIe switches, one of them with a second
// level; README.md there), sriov-ib (VFs) and efa, asking the fake kubelet of fake_kubelet.h (a
// real gRPC server of the kubelet's pod-resources proto on a Unix socket).

#include "collectors/pods/pods_collector.h"
#include "collectors/pods/node_inventory.h"

#include "tests/unit/collector_test_support.h"
#include "tests/unit/fake_kubelet.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

namespace ibfabric::pods {
namespace {

using namespace ibfabric::test_support;

namespace fs = std::filesystem;

std::string sysfs(const std::string& name) {
  return std::string(IBFABRIC_SOURCE_DIR) + "/tests/fixtures/sysfs/" + name;
}
std::string procfs(const std::string& name) {
  return std::string(IBFABRIC_SOURCE_DIR) + "/tests/fixtures/procfs/" + name;
}

std::unique_ptr<Collector> make(const std::string& sysfs_root, const std::string& procfs_root,
                                const std::string& yaml) {
  boost::asio::io_context io;
  CollectorContext context{io, sysfs_root, {}};
  context.procfs_root = procfs_root;
  ConfigSection section(YAML::Load(yaml), "test.yaml", "collectors.pods");
  // The runner reads these two before the collector's own keys.
  section.get_bool("enabled", true);
  section.get_duration("interval", std::chrono::seconds(15));
  return spec().create(context, section);
}

const char* kUuid[] = {
    "GPU-1f8b6c57-0c5c-d1d6-3fd7-4a5ec6a33b00", "GPU-2e4d10aa-91b2-77c3-0b1e-58d0f4c21a11",
    "GPU-3a9c2f01-5d6e-4b7a-8c9d-0e1f2a3b4c22", "GPU-4b0d3e12-6e7f-5c8b-9d0e-1f2a3b4c5d33",
    "GPU-5c1e4f23-7f80-6d9c-0e1f-2a3b4c5d6e44", "GPU-6d2f5034-8091-7e0d-1f2a-3b4c5d6e7f55",
    "GPU-7e306145-91a2-8f1e-2a3b-4c5d6e7f8066", "GPU-8f417256-a2b3-902f-3b4c-5d6e7f809177"};

// --- what the node has ----------------------------------------------------------------------

TEST(PodsInventory, TheGpuNode) {
  const NodeInventory inventory = read_inventory(sysfs("gpu-node"), procfs("gpu-node"));
  EXPECT_TRUE(inventory.problems.empty());
  ASSERT_EQ(inventory.rdma.size(), 4u);
  EXPECT_EQ(inventory.rdma[2].name, "mlx5_2");
  ASSERT_TRUE(inventory.rdma[2].pci);
  EXPECT_EQ(inventory.rdma[2].pci->address, "0000:3c:00.0");
  EXPECT_EQ(inventory.rdma[2].pci->path,
            (std::vector<std::string>{"pci0000:35", "0000:35:01.0", "0000:36:00.0", "0000:37:02.0",
                                      "0000:3a:00.0", "0000:3b:00.0", "0000:3c:00.0"}));
  EXPECT_EQ(inventory.rdma[2].pci->numa_node, 0);
  EXPECT_EQ(inventory.rdma[2].ports, std::vector<std::string>{"1"});
  EXPECT_FALSE(inventory.rdma[2].efa);
  EXPECT_EQ(inventory.rdma[2].pf_address, "");
  ASSERT_EQ(inventory.gpus.size(), 8u);
  const char* addresses[] = {"0000:18:00.0", "0000:19:00.0", "0000:38:00.0", "0000:39:00.0",
                             "0000:4e:00.0", "0000:5e:00.0", "0000:98:00.0", "0000:b8:00.0"};
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(inventory.gpus[i].pci.address, addresses[i]);
    EXPECT_EQ(inventory.gpus[i].uuid, kUuid[i]);
    EXPECT_EQ(inventory.gpus[i].pci.numa_node, i < 6 ? 0 : 1);
  }
  EXPECT_EQ(inventory.gpus[4].pci.path,
            (std::vector<std::string>{"pci0000:4d", "0000:4d:01.0", "0000:4e:00.0"}));
}

TEST(PodsInventory, NoDriversNoDevicesNoProblems) {
  const NodeInventory inventory = read_inventory("/nonexistent-sysfs", "/nonexistent-procfs");
  EXPECT_TRUE(inventory.rdma.empty());
  EXPECT_TRUE(inventory.gpus.empty());
  EXPECT_TRUE(inventory.problems.empty());
}

TEST(PodsInventory, VfsLeadToTheirPf) {
  const NodeInventory inventory = read_inventory(sysfs("sriov-ib"), "/nonexistent-procfs");
  ASSERT_EQ(inventory.rdma.size(), 8u);
  EXPECT_EQ(inventory.rdma[0].pf_address, "");
  EXPECT_EQ(inventory.rdma[3].name, "mlx5_3");
  EXPECT_EQ(inventory.rdma[3].pf_address, "0000:af:00.0");
  EXPECT_EQ(inventory.vf_pf.size(), 8u);
  EXPECT_EQ(inventory.vf_pf.at("0000:af:01.0"), "0000:af:00.0");  // VF 7, on vfio-pci
}

TEST(PodsInventory, EfaIsRecognisedByItsVendor) {
  const NodeInventory inventory = read_inventory(sysfs("efa"), "/nonexistent-procfs");
  ASSERT_EQ(inventory.rdma.size(), 1u);
  EXPECT_EQ(inventory.rdma[0].name, "rdmap16s27");
  EXPECT_TRUE(inventory.rdma[0].efa);
  EXPECT_EQ(inventory.rdma[0].ports, std::vector<std::string>{"1"});
}

TEST(PodsInventory, ParseGpuUuid) {
  EXPECT_EQ(parse_gpu_uuid("Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-1f8b6c57-0c5c-d1d6-3fd7-"
                           "4a5ec6a33b00\nBus Location: \t 0000:18:00.0\n"),
            "GPU-1f8b6c57-0c5c-d1d6-3fd7-4a5ec6a33b00");
  EXPECT_EQ(parse_gpu_uuid("GPU UUID: GPU-1F8B6C57-0C5C-D1D6-3FD7-4A5EC6A33B00"),
            "GPU-1F8B6C57-0C5C-D1D6-3FD7-4A5EC6A33B00");
  EXPECT_FALSE(parse_gpu_uuid("Model: \t\t NVIDIA H100\n"));
  EXPECT_FALSE(parse_gpu_uuid("GPU UUID: \t ??\n"));
  EXPECT_FALSE(parse_gpu_uuid("GPU UUID: \t GPU-1f8b6c57-0c5c-d1d6-3fd7\n"));
  EXPECT_FALSE(parse_gpu_uuid("GPU UUID: \t GPU-1f8b6c57x0c5c-d1d6-3fd7-4a5ec6a33b00\n"));
  EXPECT_FALSE(parse_gpu_uuid("GPU UUID: \t GPU-1f8b6c57-0c5c-d1d6-3fd7-4a5ec6a33bzz\n"));
  EXPECT_FALSE(parse_gpu_uuid(""));
}

TEST(PodsInventory, PciAddresses) {
  EXPECT_TRUE(is_pci_address("0000:18:00.0"));
  EXPECT_TRUE(is_pci_address("0001:af:1f.7"));
  EXPECT_FALSE(is_pci_address("0000:AF:00.0"));  // sysfs writes lowercase
  EXPECT_FALSE(is_pci_address("18:00.0"));
  EXPECT_FALSE(is_pci_address("0000:18:00:0"));
  EXPECT_FALSE(is_pci_address("mlx5_0"));
}

// --- PCIe distance ----------------------------------------------------------------------------

PciPosition at(std::vector<std::string> path, std::optional<std::int64_t> numa) {
  return PciPosition{path.back(), std::move(path), numa};
}

TEST(PodsDistance, AsNvidiaSmiTopoNamesIt) {
  const auto gpu =
      at({"pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"}, 0);
  // The same switch: GPU, downstream port, upstream port, downstream port, HCA.
  EXPECT_EQ(
      distance(
          gpu,
          at({"pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:02.0", "0000:1a:00.0"}, 0)),
      Distance::pix);
  // Two functions of one device.
  EXPECT_EQ(distance(at({"pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:16:00.1"}, 0),
                     at({"pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:16:00.0"}, 0)),
            Distance::pix);
  // A switch below the switch.
  EXPECT_EQ(distance(gpu, at({"pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:02.0",
                              "0000:3a:00.0", "0000:3b:00.0", "0000:3c:00.0"},
                             0)),
            Distance::pxb);
  // Another root port of the same host bridge.
  EXPECT_EQ(distance(gpu, at({"pci0000:15", "0000:15:02.0", "0000:1c:00.0"}, 0)), Distance::phb);
  // Another host bridge: the same NUMA node, another one, or one unknown.
  EXPECT_EQ(distance(gpu, at({"pci0000:4d", "0000:4d:02.0", "0000:4f:00.0"}, 0)), Distance::node);
  EXPECT_EQ(distance(gpu, at({"pci0000:97", "0000:97:02.0", "0000:99:00.0"}, 1)), Distance::sys);
  EXPECT_EQ(distance(gpu, at({"pci0000:97", "0000:97:02.0", "0000:99:00.0"}, std::nullopt)),
            Distance::sys);
  // No affinity reported anywhere (-1): one node.
  EXPECT_EQ(distance(at({"pci0000:00", "0000:00:01.0", "0000:01:00.0"}, -1),
                     at({"pci0000:40", "0000:40:01.0", "0000:41:00.0"}, -1)),
            Distance::node);
  EXPECT_EQ(distance_name(Distance::pxb), "PXB");
  EXPECT_EQ(distance_name(Distance::node), "NODE");
}

// --- GPUs and the ports NCCL would use for them -----------------------------------------------

struct GpuPort {
  std::string gpu, device, distance;
  bool operator==(const GpuPort&) const = default;
  bool operator<(const GpuPort& o) const {
    return std::tie(gpu, device, distance) < std::tie(o.gpu, o.device, o.distance);
  }
};
void PrintTo(const GpuPort& p, std::ostream* out) {
  *out << p.gpu << "->" << p.device << "(" << p.distance << ")";
}

std::set<GpuPort> gpu_ports(const MetricFamilies& m) {
  std::set<GpuPort> found;
  for (const auto* s : samples(m, "ibfabric_pods_gpu_port_info")) {
    const auto l = label_map(*s);
    EXPECT_EQ(l.at("port"), "1");
    found.insert({l.at("gpu"), l.at("device"), l.at("distance")});
  }
  return found;
}

TEST(PodsGpus, EachGpuIsTiedToItsNearestPortsTiesKept) {
  auto collector = make(sysfs("gpu-node"), procfs("gpu-node"), "kubelet_socket: ''");
  const auto result = collect(*collector);
  EXPECT_TRUE(result.success) << result.error;
  std::set<GpuPort> expected = {// Same switch as two HCAs: both.
                                {"0", "mlx5_0", "PIX"},
                                {"0", "mlx5_1", "PIX"},
                                {"1", "mlx5_0", "PIX"},
                                {"1", "mlx5_1", "PIX"},
                                // The HCA behind a second-level switch.
                                {"2", "mlx5_2", "PXB"},
                                {"3", "mlx5_2", "PXB"},
                                // Another root port of the same host bridge.
                                {"4", "mlx5_3", "PHB"}};
  // No HCA on GPU 5's host bridge: every HCA of its NUMA node; GPUs 6 and 7 are on a socket
  // without HCAs: every HCA, across the interconnect.
  for (const char* device : {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}) {
    expected.insert({"5", device, "NODE"});
    expected.insert({"6", device, "SYS"});
    expected.insert({"7", device, "SYS"});
  }
  EXPECT_EQ(gpu_ports(result.metrics), expected);
  const auto gpu2 = info(result.metrics, "ibfabric_pods_gpu_port_info", {{"gpu", "2"}});
  EXPECT_EQ(gpu2.at("gpu_uuid"), kUuid[2]);
  EXPECT_EQ(gpu2.at("gpu_pci_address"), "0000:38:00.0");
  EXPECT_EQ(value(result.metrics, "ibfabric_pods_read_errors_total", {}), 0);
  // kubelet_socket "" turns the pod lookup off: not even declared.
  EXPECT_EQ(family(result.metrics, "ibfabric_pods_kubelet_up"), nullptr);
  EXPECT_EQ(family(result.metrics, "ibfabric_pod_port_info"), nullptr);
}

// --- pods -------------------------------------------------------------------------------------

struct PodPort {
  std::string namespace_name, pod, container, device, port, via, resource;
  bool operator==(const PodPort&) const = default;
  bool operator<(const PodPort& o) const {
    return std::tie(namespace_name, pod, device, port) <
           std::tie(o.namespace_name, o.pod, o.device, o.port);
  }
};
void PrintTo(const PodPort& p, std::ostream* out) {
  *out << p.namespace_name << "/" << p.pod << "[" << p.container << "] " << p.device << ":"
       << p.port << " via " << p.via << " (" << p.resource << ")";
}

std::set<PodPort> pod_ports(const MetricFamilies& m) {
  std::set<PodPort> found;
  for (const auto* s : samples(m, "ibfabric_pod_port_info")) {
    const auto l = label_map(*s);
    EXPECT_EQ(s->value, 1);
    EXPECT_TRUE(found
                    .insert({l.at("namespace"), l.at("pod"), l.at("container"), l.at("device"),
                             l.at("port"), l.at("via"), l.at("resource")})
                    .second)
        << "two series for one pod and port";
  }
  return found;
}

double unmapped(const MetricFamilies& m, const std::string& resource, const std::string& reason) {
  return value(m, "ibfabric_pods_unmapped_devices", {{"resource", resource}, {"reason", reason}})
      .value_or(0);
}

class PodsKubelet : public ::testing::Test {
 protected:
  std::unique_ptr<Collector> collector(const std::string& sysfs_root,
                                       const std::string& procfs_root,
                                       const std::string& keys = "") {
    return make(sysfs_root, procfs_root,
                "{kubelet_socket: '" + socket_ + "', kubelet_timeout: 5s" +
                    (keys.empty() ? "" : ", " + keys) + "}");
  }

  TempDir tmp_;
  std::string socket_ = tmp_.path() + "/kubelet.sock";
  FakeKubelet kubelet_;
  GrpcServer server_{socket_, &kubelet_};
};

const std::string kGpu = "nvidia.com/gpu";
const std::string kShared = "rdma/hca_shared_devices_a";
const std::string kSharedKeys =
    "rdma_shared_resources: [{resource: rdma/hca_shared_devices_a, devices: [mlx5_0, ibp60s0]}]";

// Every way a pod gets the fabric on the GPU node, one pod each, and a pod using one port in
// two ways: one series per pod and port.
TEST_F(PodsKubelet, EveryWayToThePorts) {
  kubelet_.answer_with(answer({
      // Two GPUs by UUID, on two switches.
      {"ml", "train-0", "worker", kGpu, {kUuid[0], kUuid[2]}},
      // ... and a shared HCA: mlx5_0 by name, mlx5_2 by its net interface.
      {"ml", "train-0", "worker", kShared, {"3"}},
      // GPU 4 by index (deviceIDStrategy index), a time-sliced replica of GPU 5 by UUID.
      {"ml", "train-1", "main", kGpu, {"4"}},
      {"ml", "train-1", "main", "nvidia.com/gpu.shared", {std::string(kUuid[5]) + "::2"}},
      // A whole HCA by RDMA device name, one by PCI address (another plugin's resource).
      {"infer", "server-0", "app", "example.com/hca", {"mlx5_1", "0000:4f:00.0"}},
      // Resources the collector knows nothing of: ignored, not counted.
      {"infer", "server-0", "app", "intel.com/qat", {"0000:e1:00.1"}},
      {"infer", "server-0", "app", "example.com/fpga", {"fpga0"}},
  }));
  auto c = collector(sysfs("gpu-node"), procfs("gpu-node"), kSharedKeys);
  LogCapture log;
  const auto result = collect(*c);
  EXPECT_TRUE(result.success) << result.error;
  const std::string both = kGpu + "," + kShared;
  const std::string replica = "nvidia.com/gpu.shared";
  EXPECT_EQ(
      pod_ports(result.metrics),
      (std::set<PodPort>{{"infer", "server-0", "app", "mlx5_1", "1", "hca", "example.com/hca"},
                         {"infer", "server-0", "app", "mlx5_3", "1", "hca", "example.com/hca"},
                         {"ml", "train-0", "worker", "mlx5_0", "1", "gpu,rdma_shared", both},
                         {"ml", "train-0", "worker", "mlx5_1", "1", "gpu", kGpu},
                         {"ml", "train-0", "worker", "mlx5_2", "1", "gpu,rdma_shared", both},
                         // GPU 5 has no HCA on its host bridge: every HCA of its NUMA node.
                         {"ml", "train-1", "main", "mlx5_0", "1", "gpu", replica},
                         {"ml", "train-1", "main", "mlx5_1", "1", "gpu", replica},
                         {"ml", "train-1", "main", "mlx5_2", "1", "gpu", replica},
                         // GPU 4 (PHB) and GPU 5 both lead to mlx5_3.
                         {"ml", "train-1", "main", "mlx5_3", "1", "gpu", kGpu + "," + replica}}));
  EXPECT_EQ(value(result.metrics, "ibfabric_pods_kubelet_up", {}), 1);
  EXPECT_TRUE(samples(result.metrics, "ibfabric_pods_unmapped_devices").empty());
  // The join labels are the port series' own (the sysfs collector's device and port).
  for (const auto* s : samples(result.metrics, "ibfabric_pod_port_info")) {
    const auto l = label_map(*s);
    EXPECT_EQ(l.size(), 7u);
  }
  const auto lines = log.take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "info pods: kubelet pod-resources socket found socket=" + socket_);
}

// The ways the collector cannot tie a device to a port: each counted by resource and reason and
// logged once while it lasts; the pod's other devices still count.
TEST_F(PodsKubelet, WhatCannotBeTiedIsCountedAndLoggedOnce) {
  kubelet_.answer_with(answer({
      {"ml", "train-0", "worker", kGpu, {kUuid[1], "GPU-00000000-0000-0000-0000-000000000000"}},
      {"ml",
       "train-0",
       "worker",
       "nvidia.com/mig-1g.10gb",
       {"MIG-5c1e4f23-7f80-6d9c-0e1f-2a3b4c5d6e44"}},
      {"ml", "train-0", "worker", kGpu, {"8"}},
      {"ml", "train-0", "worker", kShared, {"0", "1"}},
      {"ml", "train-0", "worker", "vpc.amazonaws.com/efa", {"efa_0"}},
  }));
  auto c = collector(sysfs("gpu-node"), procfs("gpu-node"));  // no rdma_shared_resources
  LogCapture log;
  for (int run = 1; run <= 2; ++run) {
    SCOPED_TRACE(run);
    const auto result = collect(*c);
    EXPECT_TRUE(result.success) << result.error;
    const auto& m = result.metrics;
    EXPECT_EQ((pod_ports(m)),
              (std::set<PodPort>{{"ml", "train-0", "worker", "mlx5_0", "1", "gpu", kGpu},
                                 {"ml", "train-0", "worker", "mlx5_1", "1", "gpu", kGpu}}));
    EXPECT_EQ(unmapped(m, kGpu, "unknown_device"), 2);  // the zero UUID, index 8
    EXPECT_EQ(unmapped(m, "nvidia.com/mig-1g.10gb", "mig_uuid"), 1);
    EXPECT_EQ(unmapped(m, kShared, "not_configured"), 2);
    EXPECT_EQ(unmapped(m, "vpc.amazonaws.com/efa", "unknown_device"), 1);
    EXPECT_EQ(samples(m, "ibfabric_pods_unmapped_devices").size(), 4u);
  }
  const auto lines = log.take();
  ASSERT_EQ(lines.size(), 7u);  // socket found, 6 device ids: each once
  EXPECT_EQ(count_containing(lines, "warning pods: cannot tie a device to a port"), 6u);
  EXPECT_EQ(count_containing(lines,
                             "resource=rdma/hca_shared_devices_a device_id=0 "
                             "reason=not_configured namespace=ml pod=train-0 error=\""),
            1u);
  EXPECT_EQ(count_containing(lines, "collectors.pods.rdma_shared_resources"), 2u);
  EXPECT_EQ(count_containing(lines,
                             "device_id=MIG-5c1e4f23-7f80-6d9c-0e1f-2a3b4c5d6e44 "
                             "reason=mig_uuid"),
            1u);

  // The pod goes; when a pod holding a MIG device comes back, it is logged again.
  kubelet_.answer_with(answer({}));
  auto result = collect(*c);
  EXPECT_TRUE(samples(result.metrics, "ibfabric_pods_unmapped_devices").empty());
  EXPECT_TRUE(samples(result.metrics, "ibfabric_pod_port_info").empty());
  kubelet_.answer_with(answer({{"ml",
                                "train-2",
                                "w",
                                "nvidia.com/mig-1g.10gb",
                                {"MIG-5c1e4f23-7f80-6d9c-0e1f-2a3b4c5d6e44"}}}));
  result = collect(*c);
  EXPECT_EQ(count_containing(log.take(), "reason=mig_uuid"), 1u);
}

// A VF (SR-IOV network device plugin: PCI addresses) uses its own RDMA device's port, when the
// daemon sees it, and its PF's physical port; a VF on vfio-pci only its PF's.
TEST_F(PodsKubelet, VfsUseTheirOwnPortAndTheirPfs) {
  fs::copy(sysfs("sriov-ib"), tmp_.path() + "/sys",
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  const fs::path bus = fs::path(tmp_.path()) / "sys/devices/pci0000:ae/0000:ae:00.0";
  for (const char* device : {"0000:af:00.0/infiniband/mlx5_0", "0000:af:00.3/infiniband/mlx5_3"}) {
    fs::create_directories(bus / device / "ports/1");
    std::ofstream(bus / device / "ports/1/state") << "4: ACTIVE\n";
  }
  kubelet_.answer_with(answer({
      {"ml", "train-0", "worker", "openshift.io/mlnxnics", {"0000:af:00.3"}},
      {"infer", "server-1", "app", "openshift.io/mlnxnics", {"0000:AF:01.0"}},
  }));
  auto c = collector(tmp_.path() + "/sys", "/nonexistent-procfs");
  const auto result = collect(*c);
  EXPECT_TRUE(result.success) << result.error;
  const std::string nics = "openshift.io/mlnxnics";
  EXPECT_EQ(pod_ports(result.metrics),
            (std::set<PodPort>{{"infer", "server-1", "app", "mlx5_0", "1", "sriov_vf", nics},
                               {"ml", "train-0", "worker", "mlx5_0", "1", "sriov_vf", nics},
                               {"ml", "train-0", "worker", "mlx5_3", "1", "sriov_vf", nics}}));
  // No GPUs there: nothing tied to them, and no problem either.
  EXPECT_TRUE(samples(result.metrics, "ibfabric_pods_gpu_port_info").empty());
  EXPECT_EQ(value(result.metrics, "ibfabric_pods_read_errors_total", {}), 0);
}

// AWS's EFA device plugin names its devices as class/infiniband does ("rdmap16s27").
TEST_F(PodsKubelet, EfaDevices) {
  kubelet_.answer_with(answer({
      {"ml", "train-0", "worker", "vpc.amazonaws.com/efa", {"rdmap16s27"}},
      {"ml", "train-1", "worker", "vpc.amazonaws.com/efa", {"0000:10:1b.0"}},
  }));
  auto c = collector(sysfs("efa"), "/nonexistent-procfs");
  const auto result = collect(*c);
  EXPECT_TRUE(result.success) << result.error;
  const std::string efa = "vpc.amazonaws.com/efa";
  EXPECT_EQ(pod_ports(result.metrics),
            (std::set<PodPort>{{"ml", "train-0", "worker", "rdmap16s27", "1", "efa", efa},
                               {"ml", "train-1", "worker", "rdmap16s27", "1", "efa", efa}}));
}

// A garbled procfs file costs that GPU's UUID; a GPU whose PCI function sysfs does not show
// costs its ports; a shared resource's reference that names nothing costs that device. Each is
// logged once, and nothing else is lost: the GPUs keep their index order.
TEST_F(PodsKubelet, BadInputCostsOnlyWhatItConcerns) {
  fs::copy(sysfs("gpu-node"), tmp_.path() + "/sys",
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::copy(procfs("gpu-node"), tmp_.path() + "/proc", fs::copy_options::recursive);
  const fs::path gpus = fs::path(tmp_.path()) / "proc/driver/nvidia/gpus";
  std::ofstream(gpus / "0000:39:00.0/information") << "Model: \t\t NVIDIA H100\nGPU UUID: \t ??\n";
  fs::remove(fs::path(tmp_.path()) / "sys/bus/pci/devices/0000:b8:00.0");
  fs::create_directories(gpus / "not-a-gpu");
  kubelet_.answer_with(answer({
      {"ml", "train-0", "worker", kGpu, {kUuid[3], "3", "7", kUuid[0]}},
      {"ml", "train-0", "worker", kShared, {"0"}},
  }));
  auto c = collector(tmp_.path() + "/sys", tmp_.path() + "/proc",
                     "rdma_shared_resources: [{resource: rdma/hca_shared_devices_a, devices: "
                     "[mlx5_9, ibp79s0]}]");
  LogCapture log;
  for (int run = 1; run <= 2; ++run) {
    SCOPED_TRACE(run);
    const auto result = collect(*c);
    EXPECT_TRUE(result.success) << result.error;
    const auto& m = result.metrics;
    // GPU 3 by index still leads to mlx5_2; GPU 0 to its switch's HCAs; mlx5_3 through the
    // shared resource's good reference.
    EXPECT_EQ(
        pod_ports(m),
        (std::set<PodPort>{{"ml", "train-0", "worker", "mlx5_0", "1", "gpu", kGpu},
                           {"ml", "train-0", "worker", "mlx5_1", "1", "gpu", kGpu},
                           {"ml", "train-0", "worker", "mlx5_2", "1", "gpu", kGpu},
                           {"ml", "train-0", "worker", "mlx5_3", "1", "rdma_shared", kShared}}));
    EXPECT_EQ(unmapped(m, kGpu, "unknown_device"), 1);  // GPU 3's UUID
    EXPECT_EQ(unmapped(m, kGpu, "no_port"), 1);         // GPU 7: where it is is unknown
    EXPECT_EQ(value(m, "ibfabric_pods_read_errors_total", {}), 3 * run);
    // GPU 7 has no ports; the others keep theirs.
    EXPECT_TRUE(samples(m, "ibfabric_pods_gpu_port_info", {{"gpu", "7"}}).empty());
    EXPECT_EQ(samples(m, "ibfabric_pods_gpu_port_info", {{"gpu", "3"}}).size(), 1u);
    EXPECT_EQ(info(m, "ibfabric_pods_gpu_port_info", {{"gpu", "3"}}).at("gpu_uuid"), "");
  }
  const auto lines = log.take();
  EXPECT_EQ(count_containing(lines, "warning pods: cannot use file="), 3u);
  EXPECT_EQ(count_containing(lines,
                             "0000:39:00.0/information error=\"no \"GPU UUID: GPU-…\" "
                             "line: "),
            1u);
  EXPECT_EQ(count_containing(lines, "not-a-gpu error=\"not named by a PCI address\""), 1u);
  EXPECT_EQ(count_containing(lines, "bus/pci/devices/0000:b8:00.0 error="), 1u);
  EXPECT_EQ(count_containing(lines,
                             "rdma_shared_resources: resource=rdma/hca_shared_devices_a "
                             "device=mlx5_9 names no RDMA device"),
            1u);
  EXPECT_EQ(count_containing(lines, "cannot tie a device to a port"), 2u);

  // The file is repaired: logged once more, as good.
  std::ofstream(gpus / "0000:39:00.0/information") << "GPU UUID: \t " << kUuid[3] << "\n";
  const auto result = collect(*c);
  EXPECT_EQ(unmapped(result.metrics, kGpu, "unknown_device"), 0);
  EXPECT_EQ(count_containing(log.take(), "info pods: file is good again file="), 1u);
}

// A kubelet that fails costs only the pod series: the GPU map stays, the collection succeeds.
TEST_F(PodsKubelet, AFailingKubeletCostsOnlyThePodSeries) {
  kubelet_.garble();
  auto c = collector(sysfs("gpu-node"), procfs("gpu-node"));
  LogCapture log;
  const auto result = collect(*c);
  EXPECT_TRUE(result.success) << result.error;
  EXPECT_EQ(value(result.metrics, "ibfabric_pods_kubelet_up", {}), 0);
  EXPECT_EQ(value(result.metrics, "ibfabric_pods_kubelet_errors_total", {{"reason", "malformed"}}),
            1);
  EXPECT_EQ(value(result.metrics, "ibfabric_pods_kubelet_errors_total", {{"reason", "timeout"}}),
            0);
  EXPECT_TRUE(samples(result.metrics, "ibfabric_pod_port_info").empty());
  EXPECT_EQ(samples(result.metrics, "ibfabric_pods_gpu_port_info").size(), 19u);
  EXPECT_EQ(count_containing(log.take(), "warning pods: kubelet pod-resources List failed"), 1u);
}

// No socket: no kubelet series, nothing logged.
TEST(PodsKubeletAbsent, IsSilent) {
  LogCapture log;
  auto c = make(sysfs("gpu-node"), procfs("gpu-node"),
                "kubelet_socket: /nonexistent/pod-resources/kubelet.sock");
  const auto result = collect(*c);
  EXPECT_TRUE(result.success);
  EXPECT_TRUE(samples(result.metrics, "ibfabric_pods_kubelet_up").empty());
  EXPECT_TRUE(samples(result.metrics, "ibfabric_pod_port_info").empty());
  EXPECT_EQ(samples(result.metrics, "ibfabric_pods_gpu_port_info").size(), 19u);
  EXPECT_TRUE(log.take().empty());
}

TEST(PodsConfig, Keys) {
  const auto m = [](const std::string& yaml) {
    return make(sysfs("gpu-node"), procfs("gpu-node"), yaml);
  };
  EXPECT_NO_THROW(m("{kubelet_socket: /run/kubelet.sock, kubelet_timeout: 500ms}"));
  EXPECT_NO_THROW(m("{gpu_resources: [example.com/gpu], efa_resources: []}"));
  EXPECT_NO_THROW(
      m("rdma_shared_resources: [{resource: rdma/a, devices: [mlx5_0]}, "
        "{resource: rdma/b, devices: [ibp26s0, '0000:1b:00.0']}]"));
  EXPECT_THROW(m("kubelet_socket: kubelet.sock"), ConfigError);
  EXPECT_THROW(m("kubelet_timeout: 15s"), ConfigError);
  EXPECT_THROW(m("rdma_shared_resources: [{resource: rdma/a}]"), ConfigError);
  EXPECT_THROW(m("rdma_shared_resources: [{devices: [mlx5_0]}]"), ConfigError);
  EXPECT_THROW(m("rdma_shared_resources: [{resource: rdma/a, devices: []}]"), ConfigError);
  EXPECT_THROW(m("rdma_shared_resources: [{resource: rdma/a, devices: [mlx5_0], pf: x}]"),
               ConfigError);
  EXPECT_THROW(m("rdma_shared_resources: [{resource: rdma/a, devices: [mlx5_0]}, "
                 "{resource: rdma/a, devices: [mlx5_1]}]"),
               ConfigError);
  EXPECT_THROW(m("gpu_resource: [x]"), ConfigError);
}

}  // namespace
}  // namespace ibfabric::pods
