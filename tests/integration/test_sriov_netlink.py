"""The sriov collector against this machine's kernel: the RTM_GETLINK dump with RTEXT_FILTER_VF
goes to the live rtnetlink socket (this machine's interfaces have no VFs, so the collector must
report none and succeed), while the sysfs side reads the fixture trees. Also checks that VFs
removed between two collections of a running daemon leave no series behind."""

import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from ibfabric_testlib import (Daemon, find_sample, find_samples, fixture, ibfabricd_path,
                              missing_tools, parse_exposition, run_once, skip_unless_tools,
                              tools_required)

NETLINK_FAMILIES = (
    "ibfabric_sriov_vf_receive_packets_total",
    "ibfabric_sriov_vf_transmit_bytes_total",
    "ibfabric_sriov_vf_netlink_info",
    "ibfabric_sriov_vf_link_state",
    "ibfabric_sriov_vf_trusted",
)


def only_sriov_args():
    """--no-collector.NAME for every collector but sriov, read from --help."""
    result = subprocess.run([ibfabricd_path(), "--help"], capture_output=True, text=True,
                            timeout=30)
    if result.returncode != 0:
        raise AssertionError(f"--help failed: {result.stderr}")
    names = re.findall(r"^\s+([a-z][a-z0-9_]*) \((?:on|off) by default\)$", result.stdout,
                       re.MULTILINE)
    if "sriov" not in names:
        raise AssertionError(f"sriov is not among the collectors in --help:\n{result.stdout}")
    return [f"--no-collector.{name}" for name in names if name != "sriov"] + ["--collector.sriov"]


def promtool_problems(text):
    if missing_tools("promtool"):
        # The lint only; the rest of the test runs. Where every tool was installed, a failure.
        if tools_required():
            return "promtool is missing; IBFABRIC_REQUIRE_ALL_TOOLS=1 makes that a failure"
        return ""
    # Anything promtool prints is a problem, a lint warning too, whatever its exit code.
    result = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                            text=True, timeout=30)
    output = (result.stdout + result.stderr).strip()
    return output or ("promtool exited %d" % result.returncode if result.returncode else "")


class SriovLiveNetlinkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.args = only_sriov_args()

    def once(self, root, *extra):
        result = run_once([*self.args, "--sysfs-root", root, *extra])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(promtool_problems(result.stdout), "")
        samples = parse_exposition(result.stdout)
        self.assertEqual(
            find_sample(samples, "ibfabric_collector_success", collector="sriov").value, 1,
            result.stderr)
        return samples

    def test_fixture_pf_with_live_kernel_without_vfs(self):
        samples = self.once(fixture("sysfs", "sriov-ib"))
        # sysfs side: the fixture's PF and its 8 VFs.
        self.assertEqual(find_sample(samples, "ibfabric_sriov_pf_vfs_enabled",
                                     pf="ibp175s0").value, 8)
        self.assertEqual(len(find_samples(samples, "ibfabric_sriov_vf_info")), 8)
        vf7 = find_sample(samples, "ibfabric_sriov_vf_info", vf="7")
        self.assertEqual(vf7.labels["pci_address"], "0000:af:01.0")
        self.assertEqual(vf7.labels["node_guid"], "0x0c42a10300af1007")
        # netlink side: the dump worked and this machine has no VFs.
        self.assertEqual(find_sample(samples, "ibfabric_sriov_netlink_errors_total").value, 0)
        for name in NETLINK_FAMILIES:
            self.assertEqual(find_samples(samples, name), [], name)

    def test_roce_fixture(self):
        samples = self.once(fixture("sysfs", "sriov-roce"))
        pfs = {s.labels["pf"]: s.labels for s in find_samples(samples, "ibfabric_sriov_pf_info")}
        self.assertEqual(sorted(pfs), ["ens1f0np0", "ens1f1np1"])
        self.assertEqual(pfs["ens1f0np0"]["rdma_device"], "mlx5_2")
        self.assertEqual(find_sample(samples, "ibfabric_sriov_pf_vfs_enabled",
                                     pf="ens1f1np1").value, 0)
        self.assertEqual(find_sample(samples, "ibfabric_sriov_vf_info", pf="ens1f0np0",
                                     vf="0").labels["net_interface"], "ens1f0v0")

    def test_live_sysfs_matches_what_python_sees(self):
        # The real /sys: as many PFs as this machine has (none here), and success either way.
        samples = self.once("/sys")
        expected = {os.path.realpath(os.path.dirname(path)) for pattern in (
            "/sys/class/net/*/device/sriov_totalvfs",
            "/sys/class/infiniband/*/device/sriov_totalvfs") for path in glob.glob(pattern)}
        self.assertEqual(len(find_samples(samples, "ibfabric_sriov_pf_info")), len(expected))

    def test_empty_sysfs_root_reports_nothing_and_succeeds(self):
        with tempfile.TemporaryDirectory() as root:
            samples = self.once(root)
        self.assertEqual(find_samples(samples, "ibfabric_sriov_pf_info"), [])
        self.assertEqual(find_samples(samples, "ibfabric_sriov_read_errors_total"), [])

    def test_in_a_fresh_network_namespace(self):
        # Only lo exists there: the dump still has to succeed.
        skip_unless_tools(self, "unshare", why="util-linux")
        unshare = shutil.which("unshare")
        # Not a missing tool: this host (a container) does not allow a namespace.
        probe = subprocess.run([unshare, "--net", "true"], capture_output=True, timeout=30)
        if probe.returncode != 0:
            self.skipTest(f"cannot create a network namespace: {probe.stderr.decode().strip()}")
        result = subprocess.run(
            [unshare, "--net", ibfabricd_path(), "--once", *self.args, "--sysfs-root",
             fixture("sysfs", "sriov-ib")], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        samples = parse_exposition(result.stdout)
        self.assertEqual(find_sample(samples, "ibfabric_sriov_netlink_errors_total").value, 0)
        self.assertEqual(len(find_samples(samples, "ibfabric_sriov_vf_info")), 8)

    def test_netlink_can_be_switched_off(self):
        with tempfile.TemporaryDirectory() as tmp:
            config = os.path.join(tmp, "ibfabric.yaml")
            with open(config, "w", encoding="utf-8") as f:
                f.write("collectors:\n  sriov:\n    netlink: false\n")
            samples = self.once(fixture("sysfs", "sriov-ib"), "--config", config)
        self.assertIsNone(find_sample(samples, "ibfabric_sriov_netlink_errors_total"))
        self.assertEqual(len(find_samples(samples, "ibfabric_sriov_vf_info")), 8)


class SriovVfsComeAndGoTest(unittest.TestCase):
    """A running daemon; VFs 6 and 7 are removed from the tree (a pod deleted, numVfs reduced)
    and put back. Their series must vanish and return, without restarting the daemon."""

    def test_removed_vfs_leave_no_series(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sys")
            shutil.copytree(fixture("sysfs", "sriov-ib"), root, symlinks=True)
            pf = os.path.join(root, "devices/pci0000:ae/0000:ae:00.0/0000:af:00.0")
            config = os.path.join(tmp, "ibfabric.yaml")
            with open(config, "w", encoding="utf-8") as f:
                f.write("collectors:\n  sriov:\n    interval: 200ms\n")
            with Daemon([*only_sriov_args(), "--config", config, "--sysfs-root", root]) as d:
                def vfs(samples):
                    return sorted(s.labels["vf"]
                                  for s in find_samples(samples, "ibfabric_sriov_vf_info"))

                d.wait_for(lambda s: len(vfs(s)) == 8, timeout=20, what="8 VFs")
                for vf in ("6", "7"):
                    os.unlink(os.path.join(pf, f"virtfn{vf}"))
                    shutil.rmtree(os.path.join(pf, "sriov", vf))
                with open(os.path.join(pf, "sriov_numvfs"), "w", encoding="utf-8") as f:
                    f.write("6\n")
                samples = d.wait_for(lambda s: len(vfs(s)) == 6, timeout=20, what="6 VFs")
                self.assertEqual(vfs(samples), ["0", "1", "2", "3", "4", "5"])
                for s in samples:
                    if s.name.startswith("ibfabric_sriov_"):
                        self.assertNotIn(s.labels.get("vf"), ("6", "7"), s)
                self.assertEqual(find_sample(samples, "ibfabric_sriov_read_errors_total",
                                             pf="ibp175s0").value, 0)

                os.symlink("../0000:af:00.7", os.path.join(pf, "virtfn6"))
                with open(os.path.join(pf, "sriov_numvfs"), "w", encoding="utf-8") as f:
                    f.write("7\n")
                samples = d.wait_for(lambda s: len(vfs(s)) == 7, timeout=20, what="7 VFs")
                vf6 = find_sample(samples, "ibfabric_sriov_vf_info", vf="6")
                self.assertEqual(vf6.labels["pci_address"], "0000:af:00.7")
                self.assertEqual(vf6.labels["node_guid"], "")  # its sriov/6 is gone
                self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
