"""Soak: a daemon on a simulated fabric with every collector at a high rate (sysfs 100 ms, ports
200 ms, sm 1 s, fabric 500 ms, sriov 500 ms, probes every 5 ms to its own responder) while faults
are injected in a loop, one per step, each cleared at the next step: a link unlinked and
relinked, MADs dropped on a port, counters set, the simulator frozen for half a second, a sysfs
counter file that hangs whoever opens it (a FIFO without a writer), 64 slow HTTP clients from
127.0.0.2 trickling header bytes (tests/lib/slowloris.py), and an rtnetlink dump that is never
answered (tests/lib/fake_netlink.py at IBFABRIC_SRIOV_NETLINK_SOCKET). Prometheus-like scrapes
every 250 ms must all get 200, slow clients and stuck collectors included.

Flat resources: after each full cycle of faults, once the last fault is cleared and the daemon
reports it gone (no stuck collector run, no HTTP connection but the scraper's), its resident
memory, threads and open descriptors are measured. Every cycle's figures must be within a small
margin of the first cycle's (so a leak per cycle fails, while what a fault holds in flight, at
most 16 slow connections and one stuck thread per collector, is never counted since it is
released by then), and the figures at the end within the same margin of those after warm-up.
Resident memory is not checked when IBFABRIC_SANITIZED=1 (ASan's quarantine holds freed memory;
LSan checks leaks there); threads and descriptors are.

IBFABRIC_SOAK_SECONDS sets the least length of the fault loop, which runs whole cycles of about
11 s, at least two (default 30 s: three cycles; 15 s, two cycles, when IBFABRIC_SANITIZED=1 so
that each sanitized suite pays about 40 s for the test).
"""

import os
import shutil
import signal
import time
import unittest

from fake_netlink import FakeNetlink
from ibfabric_testlib import find_sample, fixture, free_port, parse_exposition, source_dir
from simfabric import SimFabric
from slowloris import SlowClients

TOPOLOGY = os.path.join(source_dir(), "config", "demo", "fabric.topo")
HOST = "gpu-node-01 mlx5_0"
SANITIZED = os.environ.get("IBFABRIC_SANITIZED") == "1"
SOAK_SECONDS = float(os.environ.get("IBFABRIC_SOAK_SECONDS", "15" if SANITIZED else "30"))
WARMUP_SECONDS = 5 if SANITIZED else 10
SCRAPES_PER_STEP = 6  # every 250 ms
FAULTS = 7  # steps in a cycle
SLOW_CLIENTS = 64  # as many as once locked the endpoint (issue 13)
RSS_MARGIN_BYTES = 8 * 1024 * 1024
FD_MARGIN = 4
THREAD_MARGIN = 2
COUNTERS = os.path.join("devices", "pci0000:00", "0000:00:01.0", "0000:17:00.0", "infiniband",
                        "mlx5_0", "ports", "1", "counters")


def proc_status(pid):
    with open("/proc/%d/status" % pid) as f:
        rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
    return rss, len(os.listdir("/proc/%d/fd" % pid)), len(os.listdir("/proc/%d/task" % pid))


def release_fifo(path):
    """Wakes every open of the FIFO (our O_RDWR open never blocks and counts as the writer),
    unlinks it so that nobody opens it anew, then ends the readers' wait."""
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    os.unlink(path)
    os.close(fd)


def value(samples, name, **labels):
    sample = find_sample(samples, name, **labels)
    return None if sample is None else sample.value


def quiet(samples):
    """No fault is in flight any more: no collector run stuck, no connection but the scrape."""
    stuck = [s for s in samples if s.name == "ibfabric_collector_run_stuck" and s.value != 0]
    return not stuck and value(samples, "ibfabric_http_connections_open") <= 1


class SoakTest(unittest.TestCase):
    def test_soak_with_faults(self):
        with SimFabric(TOPOLOGY, name="soak", sm_host="sm-node mlx5_0") as fabric:
            netlink = FakeNetlink(os.path.join(fabric.workdir, "rtnetlink.sock"))
            self.addCleanup(netlink.close)
            netlink.answer()  # answers until a fault step makes it silent
            config = os.path.join(fabric.workdir, "soak.yaml")
            responder = "127.0.0.1:%d" % free_port()  # the daemon probes its own responder
            with open(config, "w") as f:
                f.write("mad: {timeout: 50ms, retries: 1}\n"
                        "collectors:\n"
                        "  sysfs: {interval: 100ms}\n"
                        "  ports: {interval: 200ms}\n"
                        "  sm: {interval: 1s}\n"
                        "  fabric: {enabled: true, interval: 500ms, rediscover_every: 4}\n"
                        "  sriov: {interval: 500ms, run_timeout: 300ms, netlink_timeout: 10s}\n"
                        "  probe: {enabled: true, interval: 500ms, udp_listen: \"%s\","
                        " probe_interval: 5ms, timeout: 100ms, targets: [{address: \"%s\","
                        " name: self}]}\n" % (responder, responder))
            sysfs_root = os.path.join(fabric.workdir, "sysfs")
            shutil.copytree(fixture("sysfs", "cx7-ndr"), sysfs_root, symlinks=True)
            hung_file = os.path.join(sysfs_root, COUNTERS, "hung_counter")
            env = dict(os.environ, IBFABRIC_SRIOV_NETLINK_SOCKET=netlink.path)
            with fabric.daemon(["--config", config, "--sysfs-root", sysfs_root],
                               host=HOST, env=env) as d:
                pid = d.process.pid
                deadline = time.monotonic() + WARMUP_SECONDS
                while time.monotonic() < deadline:
                    d.scrape()
                    time.sleep(0.25)
                rss0, fds0, threads0 = proc_status(pid)

                slow = None
                slow_open_seen = 0  # the most connections a scrape saw open under slow clients

                def clear_faults():
                    nonlocal slow
                    if os.path.exists(hung_file):
                        release_fifo(hung_file)
                    if slow is not None:
                        slow.stop()
                        slow = None
                    netlink.answer()

                started = time.monotonic()
                step = 0
                cycles = []  # (rss, fds, threads) once each cycle's faults are cleared
                # Whole cycles only, so that every measurement is taken at the same phase and no
                # fault is left in flight.
                while step % FAULTS or len(cycles) < 2 or time.monotonic() < started + SOAK_SECONDS:
                    fault = step % FAULTS
                    clear_faults()  # the previous step's, each fault lasts one step
                    if fault == 0:
                        fabric.command('Unlink "gpu-node-02 mlx5_0"[1]')
                    elif fault == 1:
                        fabric.command('ReLink "gpu-node-02 mlx5_0"')
                        fabric.command('Error "leaf-1"[1] 50')
                    elif fault == 2:
                        fabric.command('Error "leaf-1"[1] 0')
                        fabric.perf_set("leaf-1", 1, "SymbolErrorCounter", step)
                    elif fault == 3:
                        os.kill(fabric.ibsim.pid, signal.SIGSTOP)
                        time.sleep(0.5)
                        os.kill(fabric.ibsim.pid, signal.SIGCONT)
                    elif fault == 4:
                        os.mkfifo(hung_file)
                    elif fault == 5:
                        slow = SlowClients(d.port, SLOW_CLIENTS, ["127.0.0.2"], "headers",
                                           period=0.5).start()
                    else:
                        netlink.go_silent()
                    for _ in range(SCRAPES_PER_STEP):
                        body = d.scrape()  # raises unless 200
                        if slow is not None:
                            slow_open_seen = max(slow_open_seen, value(
                                parse_exposition(body), "ibfabric_http_connections_open"))
                        time.sleep(0.25)
                    step += 1
                    if step % FAULTS == 0:
                        clear_faults()
                        d.wait_for(quiet, timeout=30, interval=0.25,
                                   what="the faults of cycle %d to be gone" % len(cycles))
                        cycles.append(proc_status(pid))
                loop_seconds = time.monotonic() - started
                fabric.command('ReLink "gpu-node-02 mlx5_0"')
                fabric.command('Error "leaf-1"[1] 0')

                def all_succeed(samples):
                    health = [s for s in samples if s.name == "ibfabric_collector_success"]
                    return health and all(s.value == 1 for s in health)
                d.wait_for(all_succeed, timeout=60, interval=0.5,
                           what="every collector to succeed after the faults")
                time.sleep(1)
                rss1, fds1, threads1 = proc_status(pid)
                samples = parse_exposition(d.scrape())
                print("soak: %d fault steps (%d cycles) in %.0f s; resident %.1f MiB after warm-up, "
                      "%s after each cycle, %.1f at the end; fds %d, %s, %d; threads %d, %s, %d; "
                      "slow clients held up to %d connections; collections: %s" % (
                          step, len(cycles), loop_seconds, rss0 / 2**20,
                          ["%.1f" % (c[0] / 2**20) for c in cycles], rss1 / 2**20,
                          fds0, [c[1] for c in cycles], fds1,
                          threads0, [c[2] for c in cycles], threads1, slow_open_seen - 1,
                          {s.labels["collector"]: int(s.value) for s in samples
                           if s.name == "ibfabric_collector_runs_total"}))
                # Flat across cycles: each cycle ends where the first one did.
                rss_first, fds_first, threads_first = cycles[0]
                for i, (rss, fds, threads) in enumerate(cycles[1:], 2):
                    self.assertLessEqual(fds, fds_first + FD_MARGIN, "descriptors, cycle %d" % i)
                    self.assertLessEqual(threads, threads_first + THREAD_MARGIN,
                                         "threads, cycle %d" % i)
                    if not SANITIZED:  # ASan's quarantine holds freed memory; LSan checks leaks
                        self.assertLessEqual(rss, rss_first + RSS_MARGIN_BYTES,
                                             "resident memory, cycle %d" % i)
                # And the end near the warm-up.
                self.assertLessEqual(fds1, fds0 + FD_MARGIN)
                self.assertLessEqual(threads1, threads0 + THREAD_MARGIN)
                if not SANITIZED:
                    self.assertLessEqual(rss1, rss0 + RSS_MARGIN_BYTES)
                # Every fault was seen. MAD timeouts counted:
                timeouts = sum(s.value for s in samples if s.name == "ibfabric_mad_timeouts_total")
                self.assertGreater(timeouts, 0)
                # the hung file and the unanswered dump: runs failed at their deadline;
                for collector in ("sysfs", "sriov"):
                    self.assertGreater(value(samples, "ibfabric_collector_timeouts_total",
                                             collector=collector), 0, collector)
                # the slow clients held connections (up to the per-client cap) beside the scrape.
                self.assertGreater(slow_open_seen, 1)
                self.assertIsNotNone(find_sample(samples, "ibfabric_build_info"))
                probes = find_sample(samples, "ibfabric_probe_received_total", peer="self")
                self.assertGreater(probes.value, 1000)
                self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
