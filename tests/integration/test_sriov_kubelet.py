"""The running daemon asks a kubelet which pod holds each VF: ibfabricd (sriov collector only,
every 300 ms, 3 s in sanitized builds, on the sriov-ib fixture tree) and tests/tools/fake_kubelet, a gRPC server of the
kubelet's pod-resources v1 proto on a Unix socket, answering from a file the test rewrites.

The socket appears after the daemon started (the pod series start without a restart), a pod is
deleted (its series go), the kubelet dies leaving its socket file (connection refused: pod
series gone, kubelet_up 0, the reason counted, the collection still succeeds), and the socket is
removed (the kubelet series go). The exposition passes `promtool check metrics`."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from ibfabric_testlib import Daemon, find_sample, find_samples, fixture

from test_sriov_netlink import only_sriov_args, promtool_problems

NICS = "openshift.io/mlnxnics"
# Sanitized builds are many times slower (the first gRPC call of a TSan process took 1.8 s):
# a longer interval and deadline there, so that a healthy call never times out.
SANITIZED = os.environ.get("IBFABRIC_SANITIZED") == "1"
INTERVAL, TIMEOUT = ("3s", "2500ms") if SANITIZED else ("300ms", "250ms")


def fake_kubelet_path():
    return os.path.join(os.environ["IBFABRIC_BUILD_DIR"], "tests", "fake_kubelet")


class FakeKubelet:
    def __init__(self, socket, answers):
        self.process = subprocess.Popen([fake_kubelet_path(), socket, answers],
                                        stdout=subprocess.PIPE, text=True, start_new_session=True)
        line = self.process.stdout.readline()
        if line.strip() != "serving":
            self.process.kill()
            raise RuntimeError(f"fake_kubelet did not start: {line!r}")

    def kill(self):
        """SIGKILL: the socket file stays behind, as after a kubelet crash."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process.stdout.close()


def write_answers(path, lines):
    with open(path + ".new", "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    os.replace(path + ".new", path)  # the fake reads it whole or not at all


def pods(samples):
    return {s.labels["vf"]: (s.labels["namespace"], s.labels["pod"], s.labels["container"])
            for s in find_samples(samples, "ibfabric_sriov_vf_pod_info")}


class SriovKubeletTest(unittest.TestCase):
    def test_pods_follow_the_kubelet(self):
        with tempfile.TemporaryDirectory() as tmp:
            socket = os.path.join(tmp, "pod-resources", "kubelet.sock")
            answers = os.path.join(tmp, "answers.txt")
            write_answers(answers, [
                f"ml train-0 worker {NICS} 0000:af:00.3",
                f"ml train-0 worker {NICS} 0000:af:00.7",
                "ml train-0 worker nvidia.com/gpu GPU-fef8089b-4820-abfc-e83e-94318197576e",
                f"infer server-1 app {NICS} 0000:af:01.0",
            ])
            config = os.path.join(tmp, "ibfabric.yaml")
            with open(config, "w", encoding="utf-8") as f:
                f.write(f"collectors:\n  sriov:\n    interval: {INTERVAL}\n    netlink: false\n"
                        f"    kubelet_socket: {socket}\n    kubelet_timeout: {TIMEOUT}\n")
            kubelet = None
            with Daemon([*only_sriov_args(), "--config", config,
                         "--sysfs-root", fixture("sysfs", "sriov-ib")]) as d:
                try:
                    samples = d.wait_for(lambda s: find_samples(s, "ibfabric_sriov_vf_info"),
                                         timeout=40, what="VF series")
                    self.assertEqual(pods(samples), {})
                    self.assertIsNone(find_sample(samples, "ibfabric_sriov_kubelet_up"))

                    # The kubelet comes up after the daemon.
                    os.makedirs(os.path.dirname(socket))
                    kubelet = FakeKubelet(socket, answers)
                    samples = d.wait_for(lambda s: len(pods(s)) == 3, timeout=40,
                                         what="three VFs held by pods")
                    self.assertEqual(pods(samples), {
                        "2": ("ml", "train-0", "worker"),
                        "6": ("ml", "train-0", "worker"),
                        "7": ("infer", "server-1", "app"),
                    })
                    vf2 = find_sample(samples, "ibfabric_sriov_vf_pod_info", vf="2")
                    self.assertEqual(vf2.labels["pf"], "ibp175s0")
                    self.assertEqual(vf2.labels["pci_address"], "0000:af:00.3")
                    self.assertEqual(vf2.labels["resource"], NICS)
                    self.assertEqual(find_sample(samples, "ibfabric_sriov_kubelet_up").value, 1)
                    self.assertEqual(find_sample(samples, "ibfabric_sriov_vf_numa_node",
                                                 vf="2").value, 1)
                    self.assertEqual(promtool_problems(d.scrape()), "")

                    # train-0 is deleted.
                    write_answers(answers, [f"infer server-1 app {NICS} 0000:af:01.0"])
                    samples = d.wait_for(lambda s: len(pods(s)) == 1, timeout=40,
                                         what="train-0's series to go")
                    self.assertEqual(pods(samples), {"7": ("infer", "server-1", "app")})

                    # The kubelet dies; its socket file stays and refuses connections.
                    kubelet.kill()
                    samples = d.wait_for(
                        lambda s: find_sample(s, "ibfabric_sriov_kubelet_up").value == 0,
                        timeout=40, what="kubelet_up 0")
                    self.assertEqual(pods(samples), {})
                    self.assertGreaterEqual(find_sample(
                        samples, "ibfabric_sriov_kubelet_errors_total",
                        reason="unavailable").value, 1)
                    if not SANITIZED:  # there a slow first call may have timed out
                        self.assertEqual(find_sample(
                            samples, "ibfabric_sriov_kubelet_errors_total",
                            reason="timeout").value, 0)
                    self.assertEqual(find_sample(samples, "ibfabric_collector_success",
                                                 collector="sriov").value, 1)
                    self.assertEqual(len(find_samples(samples, "ibfabric_sriov_vf_info")), 8)

                    # The socket file is removed: the kubelet series go.
                    os.unlink(socket)
                    d.wait_for(lambda s: find_sample(s, "ibfabric_sriov_kubelet_up") is None,
                               timeout=40, what="kubelet_up to go")
                    log = d.log()
                    # Once for the refusal; a second line only if a call raced the fake's
                    # bind() and listen() when it started.
                    self.assertIn("reason=unavailable", log)
                    if not SANITIZED:
                        self.assertLessEqual(log.count("kubelet pod-resources List failed"), 2,
                                             log)
                    self.assertEqual(log.count("kubelet pod-resources socket found"), 1, log)
                    self.assertEqual(log.count("kubelet pod-resources socket is gone"), 1, log)
                    self.assertEqual(d.stop(), 0)
                finally:
                    if kubelet:
                        kubelet.kill()


if __name__ == "__main__":
    unittest.main()
