"""ibfabricd --once on every sysfs fixture tree: the output passes `promtool check metrics`
(lint included), carries the values worked out by hand from the fixture files, and names
exactly the metrics docs/collectors.md documents."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

from ibfabric_testlib import (find_sample, find_samples, fixture, ibfabricd_path,
                              parse_exposition, run_once, source_dir)

FIXTURES = ("cx7-ndr", "roce", "down-polling", "two-port", "broken", "efa", "legacy-mlx4")


def only_sysfs_args():
    """--no-collector.NAME for every collector but sysfs, read from --help so collectors added
    later do not leak into these runs."""
    result = subprocess.run([ibfabricd_path(), "--help"], capture_output=True, text=True,
                            timeout=30)
    if result.returncode != 0:
        raise AssertionError(f"--help failed: {result.stderr}")
    names = re.findall(r"^\s+([a-z][a-z0-9_]*) \((?:on|off) by default\)$", result.stdout,
                       re.MULTILINE)
    if "sysfs" not in names:
        raise AssertionError(f"sysfs is not among the collectors in --help:\n{result.stdout}")
    return [f"--no-collector.{name}" for name in names if name != "sysfs"]


def promtool_check(text):
    result = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                            text=True, timeout=30)
    return result.returncode, (result.stdout + result.stderr).strip()


def documented_metrics():
    """The metric names in the first column of the sysfs tables in docs/collectors.md."""
    path = os.path.join(source_dir(), "docs", "collectors.md")
    with open(path, encoding="utf-8") as f:
        return set(re.findall(r"^\|\s*`(ibfabric_sysfs_[a-z0-9_]+)`", f.read(), re.MULTILINE))


class SysfsOnceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.extra = only_sysfs_args()
        cls.outputs = {}
        for name in FIXTURES:
            result = run_once(["--sysfs-root", fixture("sysfs", name), *cls.extra])
            cls.outputs[name] = result

    def samples(self, name):
        result = self.outputs[name]
        self.assertEqual(result.returncode, 0, f"{name}: {result.stderr}")
        return parse_exposition(result.stdout)

    def value(self, fixture_name, metric, **labels):
        sample = find_sample(self.samples(fixture_name), metric, **labels)
        self.assertIsNotNone(sample, f"{fixture_name}: no {metric} {labels}")
        return sample.value

    def test_every_fixture_succeeds_and_passes_promtool(self):
        for name in FIXTURES:
            with self.subTest(fixture=name):
                result = self.outputs[name]
                self.assertEqual(result.returncode, 0, result.stderr)
                code, problems = promtool_check(result.stdout)
                self.assertEqual((code, problems), (0, ""))
                samples = parse_exposition(result.stdout)
                self.assertEqual(
                    find_sample(samples, "ibfabric_collector_success", collector="sysfs").value, 1)

    def test_counters_are_typed_counter_and_gauges_gauge(self):
        text = self.outputs["cx7-ndr"].stdout
        types = dict(re.findall(r"^# TYPE (ibfabric_sysfs_\S+) (\S+)$", text, re.MULTILINE))
        self.assertTrue(types)
        for name, kind in types.items():
            self.assertEqual(kind, "counter" if name.endswith("_total") else "gauge", name)

    def test_the_documented_metrics_are_exactly_the_ones_exported(self):
        exported = set(re.findall(r"^# TYPE (ibfabric_sysfs_\S+) ", self.outputs["cx7-ndr"].stdout,
                                  re.MULTILINE))
        self.assertEqual(exported, documented_metrics())

    def test_cx7_ndr(self):
        port = dict(device="mlx5_0", port="1")
        info = find_sample(self.samples("cx7-ndr"), "ibfabric_sysfs_device_info", device="mlx5_0")
        self.assertEqual(info.labels, {
            "device": "mlx5_0", "node_guid": "0x0c42a1030065ab12",
            "system_image_guid": "0x0c42a1030065ab12", "firmware_version": "28.39.1002",
            "board_id": "MT_0000000838", "hca_type": "MT4129",
            "node_description": "gpu-node-017 HCA-1", "node_type": "CA",
            "pci_address": "0000:17:00.0"})
        port_info = find_sample(self.samples("cx7-ndr"), "ibfabric_sysfs_port_info", **port)
        self.assertEqual(port_info.labels, {
            "device": "mlx5_0", "port": "1", "link_layer": "InfiniBand", "state": "ACTIVE",
            "physical_state": "LinkUp", "link_width": "4X", "link_speed": "NDR"})
        self.assertEqual(self.value("cx7-ndr", "ibfabric_sysfs_port_state", **port), 4)
        self.assertEqual(self.value("cx7-ndr", "ibfabric_sysfs_port_rate_bytes_per_second",
                                    **port), 50e9)
        self.assertEqual(self.value("cx7-ndr", "ibfabric_sysfs_port_lid", **port), 0x1a2)
        # 1234567890123 and 987654321098 4-octet words.
        self.assertEqual(self.value("cx7-ndr", "ibfabric_sysfs_port_transmit_bytes_total",
                                    **port), 4938271560492)
        self.assertEqual(self.value("cx7-ndr", "ibfabric_sysfs_port_receive_bytes_total",
                                    **port), 3950617284392)
        self.assertEqual(self.value("cx7-ndr", "ibfabric_sysfs_port_transmit_packets_total",
                                    **port), 24680135790)
        self.assertEqual(self.value("cx7-ndr", "ibfabric_sysfs_port_symbol_errors_total",
                                    **port), 3)
        self.assertEqual(self.value("cx7-ndr", "ibfabric_sysfs_port_hw_stat_total",
                                    counter="rx_write_requests", **port), 5000000123)
        # mlx5's congestion counters have names of their own, and only those.
        self.assertEqual(self.value("cx7-ndr", "ibfabric_sysfs_port_roce_cnp_sent_total",
                                    **port), 21)
        self.assertIsNone(find_sample(self.samples("cx7-ndr"), "ibfabric_sysfs_port_hw_stat_total",
                                      counter="np_cnp_sent", **port))
        self.assertEqual(self.value("cx7-ndr",
                                    "ibfabric_sysfs_port_effective_rate_bytes_per_second",
                                    **port), 50e9)
        self.assertIsNone(find_sample(self.samples("cx7-ndr"), "ibfabric_sysfs_port_hw_stat_total",
                                      counter="lifespan", **port))
        self.assertEqual(self.value("cx7-ndr", "ibfabric_sysfs_read_errors_total", **port), 0)

    def test_roce(self):
        mlx = dict(device="mlx5_1", port="1")
        rxe = dict(device="rxe0", port="1")
        samples = self.samples("roce")
        self.assertEqual(find_sample(samples, "ibfabric_sysfs_port_info", **mlx)
                         .labels["link_layer"], "Ethernet")
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_rate_bytes_per_second", **mlx),
                         12.5e9)
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_link_width_lanes", **mlx), 2)
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_transmit_bytes_total", **mlx),
                         294967296004)
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_roce_cnp_handled_total", **mlx),
                         2210)
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_roce_cnp_sent_total", **mlx),
                         3401)
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_roce_ecn_marked_packets_total",
                                    **mlx), 3502)
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_out_of_sequence_packets_total",
                                    **mlx), 29)
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_local_ack_timeouts_total", **mlx),
                         2)
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_packet_sequence_errors_total",
                                    **mlx), 11)
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_hw_stat_total",
                                    counter="rx_write_requests", **mlx), 7340032)
        self.assertIsNone(find_sample(samples, "ibfabric_sysfs_port_hw_stat_total",
                                      counter="rp_cnp_handled", **mlx))
        # rxe0: "N/A (no PMA)" everywhere in counters/: no PortCounters series and no errors.
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_rate_bytes_per_second", **rxe),
                         312500000)
        self.assertEqual(find_sample(samples, "ibfabric_sysfs_port_info", **rxe)
                         .labels["link_speed"], "SDR")
        rxe_pma = [s.name for s in samples
                   if s.labels.get("device") == "rxe0" and s.name.startswith("ibfabric_sysfs_port_")
                   and s.name.endswith("_total") and s.name != "ibfabric_sysfs_port_hw_stat_total"]
        self.assertEqual(rxe_pma, [])
        self.assertEqual(self.value("roce", "ibfabric_sysfs_port_hw_stat_total",
                                    counter="sent_pkts", **rxe), 120034)
        self.assertEqual(self.value("roce", "ibfabric_sysfs_read_errors_total", **rxe), 0)
        self.assertEqual(find_sample(samples, "ibfabric_sysfs_device_info", device="rxe0")
                         .labels["pci_address"], "")

    def test_efa(self):
        port = dict(device="rdmap16s27", port="1")
        samples = self.samples("efa")
        info = find_sample(samples, "ibfabric_sysfs_device_info", device="rdmap16s27")
        self.assertEqual((info.labels["node_type"], info.labels["pci_address"]),
                         ("unspecified", "0000:10:1b.0"))
        self.assertEqual(find_sample(samples, "ibfabric_sysfs_port_info", **port)
                         .labels["link_layer"], "Unknown")
        # hw_counters/tx_bytes etc. are bytes: no x4.
        expected = {
            "ibfabric_sysfs_port_transmit_bytes_total": 918273645546,
            "ibfabric_sysfs_port_receive_bytes_total": 817263544536,
            "ibfabric_sysfs_port_transmit_packets_total": 120034567,
            "ibfabric_sysfs_port_receive_packets_total": 110023456,
            "ibfabric_sysfs_port_efa_receive_drops_total": 17,
            "ibfabric_sysfs_port_efa_rdma_read_bytes_total": 655360000789,
            "ibfabric_sysfs_port_efa_rdma_write_bytes_total": 98304000654,
            "ibfabric_sysfs_port_efa_retransmitted_bytes_total": 26214400,
            "ibfabric_sysfs_port_efa_retransmitted_packets_total": 3200,
            "ibfabric_sysfs_port_efa_retransmit_timeouts_total": 9,
            "ibfabric_sysfs_port_efa_unresponsive_remote_events_total": 1,
            "ibfabric_sysfs_port_efa_impaired_remote_connection_events_total": 4,
            "ibfabric_sysfs_port_effective_rate_bytes_per_second": 12.5e9,
        }
        for metric, want in expected.items():
            self.assertEqual(self.value("efa", metric, **port), want, metric)
        self.assertEqual(find_samples(samples, "ibfabric_sysfs_port_hw_stat_total"), [])
        self.assertEqual(self.value("efa", "ibfabric_sysfs_device_hw_stat_total",
                                    device="rdmap16s27", counter="keep_alive_rcvd"), 86400)
        self.assertEqual(self.value("efa", "ibfabric_sysfs_read_errors_total", **port), 0)

    def test_legacy_counters_ext_win(self):
        port = dict(device="mlx4_0", port="1")
        samples = self.samples("legacy-mlx4")
        # counters_ext/port_xmit_data_64 (12884901888123 words), not counters/port_xmit_data
        # (2^32-1, saturated).
        self.assertEqual(self.value("legacy-mlx4", "ibfabric_sysfs_port_transmit_bytes_total",
                                    **port), 51539607552492)
        self.assertEqual(self.value("legacy-mlx4", "ibfabric_sysfs_port_receive_packets_total",
                                    **port), 21474836480321)
        self.assertEqual(self.value("legacy-mlx4",
                                    "ibfabric_sysfs_port_unicast_transmit_packets_total", **port),
                         25769800000000)
        self.assertEqual(len(find_samples(samples, "ibfabric_sysfs_port_transmit_bytes_total",
                                          **port)), 1)
        self.assertEqual(find_samples(samples, "ibfabric_sysfs_port_pma_stat_total"), [])
        self.assertAlmostEqual(self.value("legacy-mlx4",
                                          "ibfabric_sysfs_port_effective_rate_bytes_per_second",
                                          **port), 6818181818.18, places=1)

    def test_down_polling(self):
        port = dict(device="mlx5_0", port="1")
        self.assertEqual(self.value("down-polling", "ibfabric_sysfs_port_state", **port), 1)
        self.assertEqual(self.value("down-polling", "ibfabric_sysfs_port_physical_state", **port),
                         2)
        labels = find_sample(self.samples("down-polling"), "ibfabric_sysfs_port_info",
                             **port).labels
        self.assertEqual((labels["state"], labels["physical_state"]), ("DOWN", "Polling"))
        self.assertEqual(self.value("down-polling", "ibfabric_sysfs_port_lid", **port), 0xffff)
        self.assertEqual(self.value("down-polling", "ibfabric_sysfs_port_link_downed_total",
                                    **port), 5)

    def test_two_port(self):
        p1 = dict(device="mlx4_0", port="1")
        p2 = dict(device="mlx4_0", port="2")
        self.assertEqual(self.value("two-port", "ibfabric_sysfs_port_rate_bytes_per_second", **p1),
                         7e9)
        self.assertEqual(self.value("two-port", "ibfabric_sysfs_port_rate_bytes_per_second", **p2),
                         5e9)
        self.assertEqual(self.value("two-port", "ibfabric_sysfs_port_lmc", **p1), 2)
        self.assertEqual(self.value("two-port", "ibfabric_sysfs_port_transmit_bytes_total", **p1),
                         17179869184)
        self.assertEqual(self.value("two-port", "ibfabric_sysfs_port_transmit_bytes_total", **p2),
                         204000000204)
        self.assertEqual(self.value("two-port", "ibfabric_sysfs_port_vl15_dropped_total", **p1),
                         30)
        self.assertEqual(self.value("two-port", "ibfabric_sysfs_port_vl15_dropped_total", **p2),
                         50)

    def test_broken_costs_only_the_bad_values(self):
        port = dict(device="mlx5_0", port="1")
        samples = self.samples("broken")
        self.assertIsNone(find_sample(samples, "ibfabric_sysfs_port_state", **port))
        self.assertIsNone(find_sample(samples, "ibfabric_sysfs_port_rate_bytes_per_second",
                                      **port))
        self.assertIsNone(find_sample(samples, "ibfabric_sysfs_port_symbol_errors_total", **port))
        self.assertEqual(self.value("broken", "ibfabric_sysfs_port_physical_state", **port), 5)
        self.assertEqual(self.value("broken", "ibfabric_sysfs_port_lid", **port), 0x2b)
        self.assertEqual(self.value("broken", "ibfabric_sysfs_port_transmit_bytes_total", **port),
                         4000)
        self.assertEqual(self.value("broken", "ibfabric_sysfs_port_link_error_recoveries_total",
                                    **port), 1)
        self.assertEqual(self.value("broken", "ibfabric_sysfs_read_errors_total", **port), 7)
        device_errors = {s.labels["device"]: s.value
                         for s in find_samples(samples, "ibfabric_sysfs_read_errors_total")
                         if "port" not in s.labels}
        self.assertEqual(device_errors, {"mlx5_0": 1, "mlx5_1": 1})
        # Each bad file is logged once, naming the file.
        stderr = self.outputs["broken"].stderr
        self.assertEqual(stderr.count("sysfs: cannot use file="), 9, stderr)
        self.assertIn("mlx5_0/ports/1/rate error=\"missing\"", stderr)

    def test_missing_class_directory_fails_with_a_hint(self):
        tmp = tempfile.mkdtemp(prefix="ibfabric-sysfs-e2e-")
        try:
            result = run_once(["--sysfs-root", tmp, *self.extra])
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertIn(f"no InfiniBand devices: {tmp}/class/infiniband does not exist; is the "
                          "driver loaded? use --sysfs-root to point elsewhere", result.stderr)
            samples = parse_exposition(result.stdout)
            self.assertEqual(
                find_sample(samples, "ibfabric_collector_success", collector="sysfs").value, 0)
            code, problems = promtool_check(result.stdout)
            self.assertEqual((code, problems), (0, ""))
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main()
