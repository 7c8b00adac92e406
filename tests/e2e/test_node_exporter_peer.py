"""Peer check against Debian's prometheus-node-exporter (its `infiniband` collector, procfs
sysfs/class_infiniband.go): on every fixture, every counter and port gauge node_exporter reports
for a device/port must appear in ibfabricd's --once output, under the mapped name, with the
same device/port and the same value; and every ibfabricd series of a mapped name must be
reported by node_exporter too.

node_exporter 1.5 gives up on the whole collector when any one device has a file it cannot
handle (no board_id, one garbled state), so each device is checked on a sysfs root of its own:
otherwise one rxe device would hide every comparison on the host. The devices node_exporter
cannot read are listed below with the reason, and the test checks that it indeed fails on them,
so the list cannot go stale."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from ibfabric_testlib import (find_sample, find_samples, fixture, free_port, http_get,
                              ibfabricd_path, parse_exposition, run_once)

NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
FIXTURES = ("cx7-ndr", "roce", "down-polling", "two-port", "broken", "efa", "legacy-mlx4")

# node_exporter name -> (ibfabricd name, extra ibfabricd labels)
MAPPING = {
    "node_infiniband_excessive_buffer_overrun_errors_total":
        ("ibfabric_sysfs_port_excessive_buffer_overrun_errors_total", {}),
    "node_infiniband_link_downed_total": ("ibfabric_sysfs_port_link_downed_total", {}),
    "node_infiniband_link_error_recovery_total":
        ("ibfabric_sysfs_port_link_error_recoveries_total", {}),
    "node_infiniband_local_link_integrity_errors_total":
        ("ibfabric_sysfs_port_local_link_integrity_errors_total", {}),
    "node_infiniband_multicast_packets_received_total":
        ("ibfabric_sysfs_port_multicast_receive_packets_total", {}),
    "node_infiniband_multicast_packets_transmitted_total":
        ("ibfabric_sysfs_port_multicast_transmit_packets_total", {}),
    "node_infiniband_port_constraint_errors_received_total":
        ("ibfabric_sysfs_port_receive_constraint_errors_total", {}),
    "node_infiniband_port_constraint_errors_transmitted_total":
        ("ibfabric_sysfs_port_transmit_constraint_errors_total", {}),
    "node_infiniband_port_data_received_bytes_total":
        ("ibfabric_sysfs_port_receive_bytes_total", {}),
    "node_infiniband_port_data_transmitted_bytes_total":
        ("ibfabric_sysfs_port_transmit_bytes_total", {}),
    # counters/port_rcv_discards is not a kernel file; node_exporter knows it by name.
    "node_infiniband_port_discards_received_total":
        ("ibfabric_sysfs_port_pma_stat_total", {"counter": "port_rcv_discards"}),
    "node_infiniband_port_discards_transmitted_total":
        ("ibfabric_sysfs_port_transmit_discards_total", {}),
    "node_infiniband_port_errors_received_total": ("ibfabric_sysfs_port_receive_errors_total", {}),
    "node_infiniband_port_packets_received_total":
        ("ibfabric_sysfs_port_receive_packets_total", {}),
    "node_infiniband_port_packets_transmitted_total":
        ("ibfabric_sysfs_port_transmit_packets_total", {}),
    "node_infiniband_port_transmit_wait_total":
        ("ibfabric_sysfs_port_transmit_wait_ticks_total", {}),
    "node_infiniband_unicast_packets_received_total":
        ("ibfabric_sysfs_port_unicast_receive_packets_total", {}),
    "node_infiniband_unicast_packets_transmitted_total":
        ("ibfabric_sysfs_port_unicast_transmit_packets_total", {}),
    "node_infiniband_port_receive_remote_physical_errors_total":
        ("ibfabric_sysfs_port_receive_remote_physical_errors_total", {}),
    "node_infiniband_port_receive_switch_relay_errors_total":
        ("ibfabric_sysfs_port_receive_switch_relay_errors_total", {}),
    "node_infiniband_symbol_error_total": ("ibfabric_sysfs_port_symbol_errors_total", {}),
    "node_infiniband_vl15_dropped_total": ("ibfabric_sysfs_port_vl15_dropped_total", {}),
    "node_infiniband_state_id": ("ibfabric_sysfs_port_state", {}),
    "node_infiniband_physical_state_id": ("ibfabric_sysfs_port_physical_state", {}),
    "node_infiniband_rate_bytes_per_second": ("ibfabric_sysfs_port_rate_bytes_per_second", {}),
}
# counters_ext/ (kernels before 4.5): node_exporter reports it as node_infiniband_legacy_*,
# beside the 32-bit counters/ values; ibfabricd exports the 64-bit value under the one name.
LEGACY_MAPPING = {
    "node_infiniband_legacy_data_transmitted_bytes_total":
        ("ibfabric_sysfs_port_transmit_bytes_total", {}),
    "node_infiniband_legacy_data_received_bytes_total":
        ("ibfabric_sysfs_port_receive_bytes_total", {}),
    "node_infiniband_legacy_packets_transmitted_total":
        ("ibfabric_sysfs_port_transmit_packets_total", {}),
    "node_infiniband_legacy_packets_received_total":
        ("ibfabric_sysfs_port_receive_packets_total", {}),
    "node_infiniband_legacy_unicast_packets_transmitted_total":
        ("ibfabric_sysfs_port_unicast_transmit_packets_total", {}),
    "node_infiniband_legacy_unicast_packets_received_total":
        ("ibfabric_sysfs_port_unicast_receive_packets_total", {}),
    "node_infiniband_legacy_multicast_packets_transmitted_total":
        ("ibfabric_sysfs_port_multicast_transmit_packets_total", {}),
    "node_infiniband_legacy_multicast_packets_received_total":
        ("ibfabric_sysfs_port_multicast_receive_packets_total", {}),
}
MAPPING.update(LEGACY_MAPPING)
# Where node_exporter has the legacy series, its 32-bit counters/ counterpart (saturated at
# 2^32-1 on such hosts) is not what ibfabricd reports: ibfabricd's value is the legacy one.
SUPERSEDED_BY_LEGACY = {
    "node_infiniband_port_data_transmitted_bytes_total":
        "node_infiniband_legacy_data_transmitted_bytes_total",
    "node_infiniband_port_data_received_bytes_total":
        "node_infiniband_legacy_data_received_bytes_total",
    "node_infiniband_port_packets_transmitted_total":
        "node_infiniband_legacy_packets_transmitted_total",
    "node_infiniband_port_packets_received_total": "node_infiniband_legacy_packets_received_total",
}

# node_infiniband_info label -> ibfabric_sysfs_device_info label
INFO_LABELS = {"board_id": "board_id", "firmware_version": "firmware_version",
               "hca_type": "hca_type"}

# (fixture, device) -> why node_exporter 1.5 reports nothing for it.
NODE_EXPORTER_FAILS = {
    ("roce", "rxe0"): "no board_id file (procfs 0.8 requires one)",
    ("broken", "mlx5_0"): "ports/1/state is garbled",
    ("broken", "mlx5_1"): "the class link dangles",
    # node_exporter 1.5 does not read hw_counters/ either, where EFA's traffic is.
    ("efa", "rdmap16s27"): "no board_id file (the efa driver has none)",
}


def only_sysfs_args():
    result = subprocess.run([ibfabricd_path(), "--help"], capture_output=True, text=True,
                            timeout=30)
    names = re.findall(r"^\s+([a-z][a-z0-9_]*) \((?:on|off) by default\)$", result.stdout,
                       re.MULTILINE)
    if "sysfs" not in names:
        raise AssertionError(f"sysfs is not among the collectors in --help:\n{result.stdout}")
    return [f"--no-collector.{name}" for name in names if name != "sysfs"]


class NodeExporter:
    """prometheus-node-exporter with only the infiniband collector, on a free loopback port."""

    def __init__(self, sysfs_root):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [NODE_EXPORTER, f"--path.sysfs={sysfs_root}", "--collector.disable-defaults",
             "--collector.infiniband", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=self.log, start_new_session=True)

    def scrape(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"node_exporter exited with {self.process.returncode}: "
                                   f"{self.output()}")
            try:
                status, _, body = http_get(f"http://127.0.0.1:{self.port}/metrics", timeout=5)
                if status == 200:
                    return body
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"node_exporter did not answer within {timeout}s: {self.output()}")

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self):
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log.close()


def single_device_root(tmp, fixture_name, device):
    """A sysfs root whose class/infiniband holds only `device`, linked to the fixture's own
    device directory (so the device's relative links still resolve)."""
    root = os.path.join(tmp, f"{fixture_name}-{device}")
    os.makedirs(os.path.join(root, "class", "infiniband"))
    link = os.path.join(fixture("sysfs", fixture_name), "class", "infiniband", device)
    target = os.path.join(os.path.dirname(link), os.readlink(link))
    os.symlink(os.path.normpath(target), os.path.join(root, "class", "infiniband", device))
    return root


class NodeExporterPeerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(NODE_EXPORTER, os.X_OK):
            raise AssertionError(f"{NODE_EXPORTER} is missing: apt-get install "
                                 "prometheus-node-exporter (scripts/install-deps.sh)")
        cls.extra = only_sysfs_args()
        cls.tmp = tempfile.mkdtemp(prefix="ibfabric-peer-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def run_both(self, root):
        exporter = NodeExporter(root)
        try:
            theirs = parse_exposition(exporter.scrape())
        finally:
            exporter.stop()
        result = run_once(["--sysfs-root", root, *self.extra])
        self.assertEqual(result.returncode, 0, result.stderr)
        return theirs, parse_exposition(result.stdout)

    def compare(self, theirs, ours, where):
        """Returns how many node_exporter samples were compared."""
        compared = 0
        for sample in theirs:
            if not sample.name.startswith("node_infiniband_"):
                continue
            if sample.name == "node_infiniband_info":
                mine = find_sample(ours, "ibfabric_sysfs_device_info",
                                   device=sample.labels["device"])
                self.assertIsNotNone(mine, f"{where}: no device_info for {sample.labels}")
                for their_label, our_label in INFO_LABELS.items():
                    self.assertEqual(mine.labels[our_label], sample.labels[their_label],
                                     f"{where}: {their_label}")
                continue
            self.assertIn(sample.name, MAPPING,
                          f"{where}: node_exporter reports {sample.name}, which the mapping "
                          "table does not map")
            self.assertEqual(set(sample.labels), {"device", "port"}, f"{where}: {sample}")
            if (sample.name in SUPERSEDED_BY_LEGACY and
                    find_sample(theirs, SUPERSEDED_BY_LEGACY[sample.name], **sample.labels)):
                continue
            name, extra = MAPPING[sample.name]
            mine = find_sample(ours, name, **sample.labels, **extra)
            self.assertIsNotNone(mine, f"{where}: node_exporter has {sample}, ibfabricd has no "
                                       f"{name} {sample.labels} {extra}")
            self.assertEqual(mine.value, sample.value,
                             f"{where}: {sample.name} {sample.labels} vs {name}")
            compared += 1
        # The other way round: nothing of a mapped name that node_exporter does not have
        # (under its counters/ or its legacy counters_ext/ name).
        theirs_of = {}
        for their_name, (name, extra) in MAPPING.items():
            theirs_of.setdefault((name, tuple(sorted(extra.items()))), []).append(their_name)
        for (name, extra), their_names in theirs_of.items():
            for mine in find_samples(ours, name, **dict(extra)):
                labels = {"device": mine.labels["device"], "port": mine.labels["port"]}
                self.assertTrue(any(find_sample(theirs, n, **labels) for n in their_names),
                                f"{where}: ibfabricd has {name} {labels}, node_exporter "
                                f"has none of {their_names}")
        return compared

    def test_every_device_of_every_fixture(self):
        expected_failures_seen = set()
        total = 0
        for fixture_name in FIXTURES:
            devices = sorted(os.listdir(os.path.join(fixture("sysfs", fixture_name), "class",
                                                     "infiniband")))
            self.assertTrue(devices, fixture_name)
            for device in devices:
                where = f"{fixture_name}/{device}"
                with self.subTest(device=where):
                    root = single_device_root(self.tmp, fixture_name, device)
                    theirs, ours = self.run_both(root)
                    success = find_sample(theirs, "node_scrape_collector_success",
                                          collector="infiniband")
                    self.assertIsNotNone(success, where)
                    if (fixture_name, device) in NODE_EXPORTER_FAILS:
                        self.assertEqual(success.value, 0,
                                         f"{where}: node_exporter was expected to fail ("
                                         f"{NODE_EXPORTER_FAILS[(fixture_name, device)]}); "
                                         "update the table")
                        self.assertEqual([s for s in theirs
                                          if s.name.startswith("node_infiniband_")], [])
                        expected_failures_seen.add((fixture_name, device))
                        continue
                    self.assertEqual(success.value, 1, f"{where}: node_exporter failed")
                    compared = self.compare(theirs, ours, where)
                    self.assertGreater(compared, 0, f"{where}: nothing compared")
                    total += compared
        self.assertEqual(expected_failures_seen, set(NODE_EXPORTER_FAILS))
        # 5 ports with 21 counters and 3 gauges each, and legacy-mlx4's port: 13 counters/
        # files and 3 gauges, plus 8 counters_ext/ files that replace 4 of counters/.
        self.assertEqual(total, 5 * 24 + 24)

    def test_a_whole_fixture_at_once(self):
        # The same comparison on an unmodified fixture root with several ports.
        theirs, ours = self.run_both(fixture("sysfs", "two-port"))
        self.assertEqual(self.compare(theirs, ours, "two-port"), 2 * 24)


if __name__ == "__main__":
    unittest.main()
