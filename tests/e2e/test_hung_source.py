"""Sources that hang: a sysfs counter file whose open never returns (a FIFO without a writer,
as a counters/ read that waits on the HCA's firmware) and an rtnetlink dump that is never
answered (a unix socket standing in for the kernel, IBFABRIC_SRIOV_NETLINK_SOCKET). In both the
endpoint keeps answering, the hung collector is reported failed (collector_success 0, its
timeouts counted, ibfabric_collector_run_stuck 1) with its series dropped, the other
collectors keep their schedule, the systemd watchdog keeps being fed, the stuck run holds one
thread however many ticks pass, SIGTERM exits 0, and once the source answers again the collector recovers on its own.

No timing asserts: every wait is a generous upper bound on a condition."""

import os
import shutil
import socket
import tempfile
import threading
import unittest

from fake_netlink import FakeNetlink
from ibfabric_testlib import Daemon, find_sample, find_samples, fixture, free_port

DEVICE_DIR = os.path.join("devices", "pci0000:00", "0000:00:01.0", "0000:17:00.0", "infiniband")


def thread_count(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def value(samples, name, **labels):
    sample = find_sample(samples, name, **labels)
    return None if sample is None else sample.value


def runs(samples, collector):
    return value(samples, "ibfabric_collector_runs_total", collector=collector) or 0


def stuck(samples, collector):
    return (value(samples, "ibfabric_collector_run_stuck", collector=collector) == 1 and
            value(samples, "ibfabric_collector_success", collector=collector) == 0 and
            (value(samples, "ibfabric_collector_timeouts_total", collector=collector) or 0) >= 1)


def healthy(samples, collector):
    return (value(samples, "ibfabric_collector_success", collector=collector) == 1 and
            value(samples, "ibfabric_collector_run_stuck", collector=collector) == 0)


def release_fifo(path, content):
    """Ends every open of the FIFO at `path` and leaves a regular file with `content` there:
    a reader waiting in open() is woken by our (never blocking) O_RDWR open, and nobody can
    open the FIFO anew once the regular file has replaced it."""
    replacement = path + ".new"
    with open(replacement, "w") as f:
        f.write(content)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.replace(replacement, path)
    finally:
        os.close(fd)


class NotifySocket:
    """Plays systemd's notify socket: counts the WATCHDOG=1 pings the daemon sends."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.lock = threading.Lock()
        self.pings = 0
        self.thread = threading.Thread(target=self._receive, daemon=True)
        self.thread.start()

    def _receive(self):
        while True:
            try:
                message = self.sock.recv(4096)
            except OSError:
                return
            if b"WATCHDOG=1" in message.split(b"\n"):
                with self.lock:
                    self.pings += 1

    def count(self):
        with self.lock:
            return self.pings

    def close(self):
        self.sock.close()


class HungSysfsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ibfabric-hung-")
        # cx7-ndr plus a second device (a copy of mlx5_0 named mlx5_1), symlinks kept.
        self.root = os.path.join(self.tmp, "sys")
        shutil.copytree(fixture("sysfs", "cx7-ndr"), self.root, symlinks=True)
        devices = os.path.join(self.root, DEVICE_DIR)
        shutil.copytree(os.path.join(devices, "mlx5_0"), os.path.join(devices, "mlx5_1"),
                        symlinks=True)
        os.symlink(os.path.join("..", "..", DEVICE_DIR, "mlx5_1"),
                   os.path.join(self.root, "class", "infiniband", "mlx5_1"))
        self.counters = {d: os.path.join(devices, d, "ports", "1", "counters")
                         for d in ("mlx5_0", "mlx5_1")}

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_fifo_counter_fails_only_sysfs_and_it_recovers(self):
        rcv_data = os.path.join(self.counters["mlx5_0"], "port_rcv_data")
        with open(rcv_data) as f:
            rcv_words = int(f.read())
        os.unlink(rcv_data)
        os.mkfifo(rcv_data)  # open(O_RDONLY) blocks until a writer comes

        udp = "127.0.0.1:%d" % free_port()
        config = os.path.join(self.tmp, "ibfabricd.yaml")
        with open(config, "w") as f:
            f.write("collectors:\n"
                    "  sysfs: {interval: 300ms}\n"
                    "  ports: {enabled: false}\n"
                    "  sm: {enabled: false}\n"
                    "  sriov: {enabled: false}\n"
                    "  probe: {enabled: true, interval: 300ms, mad_responder: false,"
                    " udp_listen: \"%s\", targets: [{address: \"%s\", name: self}]}\n"
                    % (udp, udp))
        notify = NotifySocket(os.path.join(self.tmp, "notify.sock"))
        self.addCleanup(notify.close)
        # As systemd runs it with WatchdogSec=: a ping is due every 200 ms.
        env = dict(os.environ, NOTIFY_SOCKET=notify.path, WATCHDOG_USEC="400000")
        with Daemon(["--config", config, "--sysfs-root", self.root], env=env) as d:
            pid = d.process.pid
            # Every scrape below must answer 200 (Daemon.samples raises otherwise).
            samples = d.wait_for(lambda s: stuck(s, "sysfs"), timeout=30,
                                 what="the sysfs collector to be stuck")
            self.assertEqual([s.name for s in samples if s.name.startswith("ibfabric_sysfs_")],
                             [], "a stuck run publishes no sysfs series, of any device")
            threads = thread_count(pid)
            pings = notify.count()
            sysfs_runs, probe_runs = runs(samples, "sysfs"), runs(samples, "probe")
            # Ticks keep coming: each fails (skipped) without starting another thread, the
            # probe collector keeps its schedule, and the loop keeps feeding the watchdog.
            samples = d.wait_for(
                lambda s: runs(s, "sysfs") >= sysfs_runs + 6 and runs(s, "probe") >= probe_runs + 3,
                timeout=60, what="more sysfs ticks and probe runs while sysfs is stuck")
            self.assertTrue(stuck(samples, "sysfs"))
            self.assertEqual(value(samples, "ibfabric_collector_success", collector="probe"), 1)
            self.assertEqual(value(samples, "ibfabric_collector_run_stuck", collector="probe"), 0)
            self.assertEqual(value(samples, "ibfabric_collector_timeouts_total", collector="sysfs"),
                             1, "only the first run timed out; the ticks after it were skipped")
            failures = value(samples, "ibfabric_collector_failures_total", collector="sysfs")
            self.assertEqual(failures, runs(samples, "sysfs"))
            # Six ticks later at most one more thread (a probe or timer thread coming and
            # going), not one per tick.
            self.assertLessEqual(thread_count(pid), threads + 1)
            self.assertGreater(notify.count(), pings, "no WATCHDOG=1 while sysfs was stuck")

            # The firmware answers again: the waiting open is released and the file is a
            # regular one again. Nothing is done to the daemon.
            release_fifo(rcv_data, "%d\n" % rcv_words)
            samples = d.wait_for(lambda s: healthy(s, "sysfs"), timeout=30,
                                 what="the sysfs collector to recover on its own")
            self.assertEqual(value(samples, "ibfabric_sysfs_port_receive_bytes_total",
                                   device="mlx5_0", port="1"), 4 * rcv_words)
            self.assertIsNotNone(value(samples, "ibfabric_sysfs_port_receive_bytes_total",
                                       device="mlx5_1", port="1"))

            # A hang in mlx5_1 stops the whole run: mlx5_0's series go too.
            os.mkfifo(os.path.join(self.counters["mlx5_1"], "hung_counter"))
            timeouts = value(samples, "ibfabric_collector_timeouts_total", collector="sysfs")
            samples = d.wait_for(
                lambda s: stuck(s, "sysfs") and value(
                    s, "ibfabric_collector_timeouts_total", collector="sysfs") > timeouts,
                timeout=30, what="the sysfs collector to be stuck on mlx5_1")
            self.assertEqual([s.name for s in samples if s.name.startswith("ibfabric_sysfs_")],
                             [])

            # SIGTERM with a thread still waiting in open(): a clean exit all the same.
            self.assertEqual(d.stop(timeout=30), 0, d.log())
            self.assertIn("exiting without waiting for collector runs", d.log())
            self.assertEqual(d.log().count('collector=sysfs msg="collection failed"'), 2,
                             "one log line per stuck episode, not one per tick")


class HungNetlinkTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ibfabric-hung-nl-")
        self.netlink = FakeNetlink(os.path.join(self.tmp, "rtnetlink.sock"))

    def tearDown(self):
        self.netlink.close()
        shutil.rmtree(self.tmp)

    def test_unanswered_dump_fails_only_sriov_and_it_recovers(self):
        config = os.path.join(self.tmp, "ibfabricd.yaml")
        with open(config, "w") as f:
            # The dump waits up to 10 s for an answer; the collector gives up after 300 ms.
            f.write("collectors:\n"
                    "  sysfs: {interval: 300ms}\n"
                    "  ports: {enabled: false}\n"
                    "  sm: {enabled: false}\n"
                    "  sriov: {interval: 500ms, run_timeout: 300ms, netlink_timeout: 10s}\n")
        env = dict(os.environ, IBFABRIC_SRIOV_NETLINK_SOCKET=self.netlink.path)
        with Daemon(["--config", config, "--sysfs-root", fixture("sysfs", "sriov-ib")],
                    env=env) as d:
            pid = d.process.pid
            samples = d.wait_for(lambda s: stuck(s, "sriov"), timeout=30,
                                 what="the sriov collector to be stuck on its netlink dump")
            self.assertEqual(find_samples(samples, "ibfabric_sriov_pf_info"), [],
                             "a stuck run publishes none of the collector's series")
            threads = thread_count(pid)
            sriov_runs, sysfs_runs = runs(samples, "sriov"), runs(samples, "sysfs")
            samples = d.wait_for(
                lambda s: runs(s, "sriov") >= sriov_runs + 4 and runs(s, "sysfs") >= sysfs_runs + 4,
                timeout=60, what="more sriov ticks and sysfs runs while sriov is stuck")
            self.assertTrue(stuck(samples, "sriov"))
            self.assertTrue(healthy(samples, "sysfs"))
            self.assertLessEqual(thread_count(pid), threads + 1)
            self.assertEqual(self.netlink.requests, 1, "one outstanding dump, not one per tick")

            self.netlink.answer()
            samples = d.wait_for(lambda s: healthy(s, "sriov"), timeout=30,
                                 what="the sriov collector to recover on its own")
            self.assertEqual(value(samples, "ibfabric_sriov_pf_vfs_enabled", pf="ibp175s0"), 8)
            self.assertIsNotNone(value(samples, "ibfabric_sriov_netlink_errors_total"))

            # Silent again, then SIGTERM while a thread waits in recv().
            self.netlink.go_silent()
            d.wait_for(lambda s: stuck(s, "sriov"), timeout=30,
                       what="the sriov collector to be stuck again")
            self.assertEqual(d.stop(timeout=30), 0, d.log())


if __name__ == "__main__":
    unittest.main()
