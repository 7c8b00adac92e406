"""The running daemon ties pods to local RDMA ports: ibfabricd (the pods and sysfs collectors
only, every 300 ms, 3 s in sanitized builds) on the gpu-node fixture trees (sysfs and procfs:
8 GPUs, 4 HCAs) asking tests/tools/fake_kubelet, a gRPC server of the kubelet's pod-resources
v1 proto on a Unix socket, answering from a file the test rewrites.

One pod with GPUs (by UUID) and a shared HCA (the RDMA shared device plugin, mapped in the
config), one with a GPU by index and a whole HCA by PCI address, device ids the daemon cannot
tie (a MIG UUID, an unmapped shared resource) and a resource it knows nothing of. Every pod
series joins a sysfs port series on (device, port); the GPU map is there without a kubelet; a
deleted pod's series go. The exposition passes `promtool check metrics`."""

import os
import re
import subprocess
import tempfile
import unittest

from ibfabric_testlib import Daemon, find_sample, find_samples, fixture, ibfabricd_path

from test_sriov_kubelet import FakeKubelet, write_answers, SANITIZED, INTERVAL, TIMEOUT
from test_sriov_netlink import promtool_problems

GPU = "nvidia.com/gpu"
SHARED = "rdma/hca_shared_devices_a"
UUID0 = "GPU-1f8b6c57-0c5c-d1d6-3fd7-4a5ec6a33b00"  # GPU 0: PIX to mlx5_0 and mlx5_1
UUID2 = "GPU-3a9c2f01-5d6e-4b7a-8c9d-0e1f2a3b4c22"  # GPU 2: PXB to mlx5_2


def only_args(*keep):
    """--no-collector.NAME for every collector not in `keep`, read from --help."""
    result = subprocess.run([ibfabricd_path(), "--help"], capture_output=True, text=True,
                            timeout=30)
    names = re.findall(r"^\s+([a-z][a-z0-9_]*) \((?:on|off) by default\)$", result.stdout,
                       re.MULTILINE)
    if "pods" not in names:
        raise AssertionError("no pods collector in --help:\n" + result.stdout)
    return ([f"--no-collector.{n}" for n in names if n not in keep] +
            [f"--collector.{n}" for n in keep])


def pod_ports(samples):
    return {(s.labels["namespace"], s.labels["pod"], s.labels["device"], s.labels["port"]):
            (s.labels["via"], s.labels["resource"], s.labels["container"])
            for s in find_samples(samples, "ibfabric_pod_port_info")}


class PodsKubeletTest(unittest.TestCase):
    def test_pods_are_tied_to_the_ports_they_use(self):
        with tempfile.TemporaryDirectory() as tmp:
            socket = os.path.join(tmp, "kubelet.sock")
            answers = os.path.join(tmp, "answers.txt")
            write_answers(answers, [
                f"ml train-0 worker {GPU} {UUID0}",
                f"ml train-0 worker {GPU} {UUID2}",
                f"ml train-0 worker {SHARED} 3",
                f"ml train-1 main {GPU} 4",
                "ml train-1 main example.com/hca 0000:4f:00.0",
                "ml train-2 main nvidia.com/mig-1g.10gb MIG-5c1e4f23-7f80-6d9c-0e1f-2a3b4c5d6e44",
                "ml train-2 main rdma/hca_shared_devices_b 0",
                "ml train-2 main example.com/fpga fpga0",
            ])
            config = os.path.join(tmp, "ibfabric.yaml")
            with open(config, "w", encoding="utf-8") as f:
                f.write(f"collectors:\n"
                        f"  sysfs:\n    interval: {INTERVAL}\n"
                        f"  pods:\n    interval: {INTERVAL}\n"
                        f"    kubelet_socket: {socket}\n    kubelet_timeout: {TIMEOUT}\n"
                        f"    rdma_shared_resources:\n"
                        f"      - resource: {SHARED}\n"
                        f"        devices: [mlx5_0, ibp60s0]\n")
            kubelet = None
            with Daemon([*only_args("pods", "sysfs"), "--config", config,
                         "--sysfs-root", fixture("sysfs", "gpu-node"),
                         "--procfs-root", fixture("procfs", "gpu-node")]) as d:
                try:
                    # Without a kubelet: the GPU map, no pod series, no kubelet series.
                    samples = d.wait_for(
                        lambda s: find_samples(s, "ibfabric_pods_gpu_port_info"), timeout=40,
                        what="the GPU map")
                    self.assertEqual(len(find_samples(samples, "ibfabric_pods_gpu_port_info")),
                                     19)
                    self.assertEqual(pod_ports(samples), {})
                    self.assertIsNone(find_sample(samples, "ibfabric_pods_kubelet_up"))

                    kubelet = FakeKubelet(socket, answers)
                    samples = d.wait_for(lambda s: len(pod_ports(s)) == 4, timeout=40,
                                         what="four pod ports")
                    both = f"{GPU},{SHARED}"
                    self.assertEqual(pod_ports(samples), {
                        ("ml", "train-0", "mlx5_0", "1"): ("gpu,rdma_shared", both, "worker"),
                        ("ml", "train-0", "mlx5_1", "1"): ("gpu", GPU, "worker"),
                        ("ml", "train-0", "mlx5_2", "1"): ("gpu,rdma_shared", both, "worker"),
                        # GPU 4 (PHB to mlx5_3), and mlx5_3 itself by its PCI address.
                        ("ml", "train-1", "mlx5_3", "1"): ("gpu,hca", f"example.com/hca,{GPU}",
                                                           "main"),
                    })
                    self.assertEqual(find_sample(samples, "ibfabric_pods_kubelet_up").value, 1)
                    unmapped = {(s.labels["resource"], s.labels["reason"]): s.value
                                for s in find_samples(samples, "ibfabric_pods_unmapped_devices")}
                    self.assertEqual(unmapped, {
                        ("nvidia.com/mig-1g.10gb", "mig_uuid"): 1,
                        ("rdma/hca_shared_devices_b", "not_configured"): 1,
                    })
                    # Every pod series joins a port series of the sysfs collector.
                    ports = {(s.labels["device"], s.labels["port"])
                             for s in find_samples(samples, "ibfabric_sysfs_port_info")}
                    for key in pod_ports(samples):
                        self.assertIn(key[2:], ports)
                    self.assertEqual(promtool_problems(d.scrape()), "")

                    # train-0 is deleted.
                    write_answers(answers, [f"ml train-1 main {GPU} 4"])
                    samples = d.wait_for(lambda s: len(pod_ports(s)) == 1, timeout=40,
                                         what="train-0's series to go")
                    self.assertEqual(pod_ports(samples), {
                        ("ml", "train-1", "mlx5_3", "1"): ("gpu", GPU, "main")})
                    self.assertEqual(find_samples(samples, "ibfabric_pods_unmapped_devices"), [])
                    self.assertEqual(find_sample(samples, "ibfabric_collector_success",
                                                 collector="pods").value, 1)
                    log = d.log()
                    self.assertEqual(log.count("pods: cannot tie a device to a port"), 2, log)
                    self.assertIn("reason=not_configured", log)
                    self.assertEqual(d.stop(), 0)
                finally:
                    if kubelet:
                        kubelet.kill()


if __name__ == "__main__":
    unittest.main()
