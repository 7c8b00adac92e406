"""The daemon as a user runs it: flags, config checking, --once, the HTTP endpoint, SIGHUP
reloads and a clean SIGTERM stop."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request

from ibfabric_testlib import (Daemon, find_sample, http_get, ibfabricd_path, parse_exposition,
                              promtool_check_metrics, run_once, source_dir)


class DaemonTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ibfabric-daemon-")
        # An empty but present class/infiniband: a host whose driver has no devices.
        self.sysfs = os.path.join(self.tmp, "sys")
        os.makedirs(os.path.join(self.sysfs, "class", "infiniband"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def write_config(self, text, name="ibfabricd.yaml"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_binary(self, *args):
        return subprocess.run([ibfabricd_path(), *args], capture_output=True, text=True,
                              timeout=30)

    def test_version_and_help(self):
        result = self.run_binary("--version")
        self.assertEqual(result.returncode, 0)
        self.assertRegex(result.stdout, r"^ibfabricd \d+\.\d+\.\d+")
        result = self.run_binary("--help")
        self.assertEqual(result.returncode, 0)
        for flag in ("--config", "--check-config", "--once", "--web.listen-address",
                     "--sysfs-root", "--log.level", "--version", "sysfs"):
            self.assertIn(flag, result.stdout)

    def test_bad_flags_exit_2_with_a_reason(self):
        for args, expected in ((["--bogus"], "unknown flag"),
                               (["--config"], "needs a value"),
                               (["--web.listen-address", "nonsense"], "HOST:PORT"),
                               (["--log.level", "loud"], "expected trace"),
                               (["--collector.nosuch"], "unknown collector")):
            result = self.run_binary(*args)
            self.assertEqual(result.returncode, 2, args)
            self.assertIn(expected, result.stderr, args)

    def test_check_config_accepts_the_example_and_rejects_errors_with_location(self):
        example = os.path.join(source_dir(), "config", "ibfabricd.example.yaml")
        result = self.run_binary("--check-config", "--config", example)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("ok", result.stdout)

        bad = self.write_config("collectors:\n  sysfs:\n    interval: fast\n")
        result = self.run_binary("--check-config", "--config", bad)
        self.assertEqual(result.returncode, 2)
        self.assertIn(f"{bad}:3:15: collectors.sysfs.interval: expected a duration", result.stderr)

        bad = self.write_config("collectors:\n  sysfs:\n    colour: blue\n")
        result = self.run_binary("--check-config", "--config", bad)
        self.assertEqual(result.returncode, 2)
        self.assertIn(f"{bad}:3:5: collectors.sysfs.colour: unknown key", result.stderr)

        result = self.run_binary("--check-config", "--config", os.path.join(self.tmp, "none"))
        self.assertEqual(result.returncode, 2)
        self.assertIn("cannot read the file", result.stderr)

    def test_once_prints_valid_exposition_with_self_metrics(self):
        result = run_once(["--sysfs-root", self.sysfs])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(promtool_check_metrics(result.stdout), (0, ""))
        samples = parse_exposition(result.stdout)
        self.assertEqual(find_sample(samples, "ibfabric_collector_success",
                                     collector="sysfs").value, 1)
        self.assertIsNotNone(find_sample(samples, "ibfabric_collector_duration_seconds",
                                         collector="sysfs"))
        self.assertEqual(find_sample(samples, "ibfabric_collector_runs_total",
                                     collector="sysfs").value, 1)
        info = find_sample(samples, "ibfabric_build_info")
        self.assertEqual(info.value, 1)
        self.assertRegex(info.labels["version"], r"^\d+\.\d+\.\d+$")
        for name in ("process_cpu_seconds_total", "process_resident_memory_bytes",
                     "process_open_fds", "process_max_fds", "process_start_time_seconds"):
            self.assertIsNotNone(find_sample(samples, name), name)
        start = find_sample(samples, "process_start_time_seconds").value
        self.assertLess(abs(start - time.time()), 60)

    def test_once_exits_1_when_a_collector_fails_but_still_prints(self):
        result = run_once(["--sysfs-root", os.path.join(self.tmp, "no-such-root")])
        self.assertEqual(result.returncode, 1)
        samples = parse_exposition(result.stdout)
        self.assertEqual(find_sample(samples, "ibfabric_collector_success",
                                     collector="sysfs").value, 0)
        self.assertIsNotNone(find_sample(samples, "ibfabric_build_info"))

    def test_no_collector_flag_overrides_the_config(self):
        config = self.write_config("collectors:\n  sysfs:\n    enabled: true\n")
        result = run_once(["--config", config, "--no-collector.sysfs"])
        self.assertEqual(result.returncode, 0, result.stderr)
        samples = parse_exposition(result.stdout)
        self.assertIsNone(find_sample(samples, "ibfabric_collector_success", collector="sysfs"))

    def test_serves_metrics_and_landing_page_and_stops_on_sigterm(self):
        daemon = Daemon(["--sysfs-root", self.sysfs])
        with daemon:
            status, headers, body = http_get(daemon.url + "/metrics")
            self.assertEqual(status, 200)
            self.assertTrue(headers["Content-Type"].startswith("text/plain; version=0.0.4"))
            self.assertEqual(promtool_check_metrics(body), (0, ""))
            samples = parse_exposition(body)
            self.assertEqual(find_sample(samples, "ibfabric_collector_success",
                                         collector="sysfs").value, 1)

            status, headers, body = http_get(daemon.url + "/")
            self.assertEqual(status, 200)
            self.assertIn('href="/metrics"', body)
            self.assertEqual(http_get(daemon.url + "/nope")[0], 404)
            request = urllib.request.Request(daemon.url + "/metrics", method="POST")
            try:
                urllib.request.urlopen(request, timeout=5)
                self.fail("POST was accepted")
            except urllib.error.HTTPError as error:
                self.assertEqual(error.code, 405)

            started = time.monotonic()
            self.assertEqual(daemon.stop(timeout=5), 0, daemon.log())
            self.assertLess(time.monotonic() - started, 2.0, "SIGTERM took too long")
            self.assertIn("stopped", daemon.log())

    def test_sighup_reloads_and_a_bad_config_keeps_the_old_one(self):
        config = self.write_config(
            f"sysfs_root: {self.sysfs}\ncollectors:\n  sysfs:\n    interval: 200ms\n")
        with Daemon(["--config", config]) as daemon:
            daemon.wait_for(lambda s: find_sample(s, "ibfabric_collector_runs_total",
                                                  collector="sysfs").value >= 2,
                            what="sysfs runs every 200ms")
            self.write_config("collectors:\n  sysfs:\n    interval: [broken\n")
            daemon.signal(signal.SIGHUP)
            samples = daemon.wait_for(
                lambda s: find_sample(s, "ibfabric_config_reload_failures_total").value == 1,
                what="the reload to be rejected")
            self.assertEqual(find_sample(samples, "ibfabric_config_reloads_total").value, 0)
            runs = find_sample(samples, "ibfabric_collector_runs_total", collector="sysfs").value
            daemon.wait_for(lambda s: find_sample(s, "ibfabric_collector_runs_total",
                                                  collector="sysfs").value > runs,
                            what="the old config to keep running")
            self.assertIn("config reload rejected", daemon.log())

            # A reload keeps the sysfs runs counter going: the same config again rebuilds
            # nothing; another interval rebuilds the collector and carries its runner's counters.
            for reloads, interval, restarted in ((1, "200ms", 0), (2, "300ms", 1)):
                before = find_sample(daemon.samples(), "ibfabric_collector_runs_total",
                                     collector="sysfs").value
                self.write_config(f"sysfs_root: {self.sysfs}\ncollectors:\n  sysfs:\n"
                                  f"    interval: {interval}\n")
                daemon.signal(signal.SIGHUP)
                samples = daemon.wait_for(
                    lambda s: find_sample(s, "ibfabric_config_reloads_total").value == reloads,
                    what="reload %d" % reloads)
                self.assertGreaterEqual(find_sample(samples, "ibfabric_collector_runs_total",
                                                    collector="sysfs").value, before)
                self.assertIn("restarted=%d" % restarted, daemon.log())

            self.write_config(f"sysfs_root: {self.sysfs}\ncollectors:\n  sysfs:\n"
                              "    enabled: false\n")
            daemon.signal(signal.SIGHUP)
            samples = daemon.wait_for(
                lambda s: find_sample(s, "ibfabric_config_reloads_total").value == 3,
                what="the reload to be applied")
            self.assertIsNone(find_sample(samples, "ibfabric_collector_success",
                                          collector="sysfs"))
            self.assertEqual(daemon.stop(), 0)

    def test_a_port_in_use_is_a_clear_error(self):
        with Daemon(["--sysfs-root", self.sysfs]) as first:
            result = subprocess.run(
                [ibfabricd_path(), "--sysfs-root", self.sysfs,
                 "--web.listen-address", f"127.0.0.1:{first.port}"],
                capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, 1)
            self.assertIn(f"cannot listen on 127.0.0.1:{first.port}", result.stderr)
            self.assertIn("Address already in use", result.stderr)

if __name__ == "__main__":
    unittest.main(verbosity=2)
