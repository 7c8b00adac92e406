"""Soak: a daemon on a simulated fabric with every collector at a high rate (sysfs 100 ms, ports
200 ms, sm 1 s, fabric 500 ms, probes every 5 ms to its own responder) while faults are injected in a loop: a link
unlinked and relinked, MADs dropped on a port, counters set, the simulator frozen for half a
second, a sysfs counter file that hangs whoever opens it (a FIFO without a writer) until the
next step releases it. Prometheus-like scrapes every 250 ms. At the end, after the faults are
cleared, every collector succeeds again and the daemon's resident memory, threads and open
descriptors are within a small margin of their values after the warm-up.

IBFABRIC_SOAK_SECONDS sets the length of the fault loop (default 60).
"""

import os
import shutil
import signal
import time
import unittest

from ibfabric_testlib import find_sample, fixture, free_port, parse_exposition, source_dir
from simfabric import SimFabric

TOPOLOGY = os.path.join(source_dir(), "config", "demo", "fabric.topo")
HOST = "gpu-node-01 mlx5_0"
SOAK_SECONDS = float(os.environ.get("IBFABRIC_SOAK_SECONDS", "60"))
SANITIZED = os.environ.get("IBFABRIC_SANITIZED") == "1"
WARMUP_SECONDS = 10
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


class SoakTest(unittest.TestCase):
    def test_soak_with_faults(self):
        with SimFabric(TOPOLOGY, name="soak", sm_host="sm-node mlx5_0") as fabric:
            config = os.path.join(fabric.workdir, "soak.yaml")
            responder = "127.0.0.1:%d" % free_port()  # the daemon probes its own responder
            with open(config, "w") as f:
                f.write("mad: {timeout: 50ms, retries: 1}\n"
                        "collectors:\n"
                        "  sysfs: {interval: 100ms}\n"
                        "  ports: {interval: 200ms}\n"
                        "  sm: {interval: 1s}\n"
                        "  fabric: {enabled: true, interval: 500ms, rediscover_every: 4}\n"
                        "  probe: {enabled: true, interval: 500ms, udp_listen: \"%s\","
                        " probe_interval: 5ms, timeout: 100ms, targets: [{address: \"%s\","
                        " name: self}]}\n" % (responder, responder))
            sysfs_root = os.path.join(fabric.workdir, "sysfs")
            shutil.copytree(fixture("sysfs", "cx7-ndr"), sysfs_root, symlinks=True)
            hung_file = os.path.join(sysfs_root, COUNTERS, "hung_counter")
            with fabric.daemon(["--config", config, "--sysfs-root", sysfs_root],
                               host=HOST) as d:
                pid = d.process.pid
                deadline = time.monotonic() + WARMUP_SECONDS
                while time.monotonic() < deadline:
                    d.scrape()
                    time.sleep(0.25)
                rss0, fds0, threads0 = proc_status(pid)

                step = 0
                end = time.monotonic() + SOAK_SECONDS
                while time.monotonic() < end:
                    fault = step % 5
                    if os.path.exists(hung_file):
                        release_fifo(hung_file)
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
                    else:
                        os.mkfifo(hung_file)  # released at the next step
                    for _ in range(8):
                        d.scrape()
                        time.sleep(0.25)
                    step += 1
                fabric.command('ReLink "gpu-node-02 mlx5_0"')
                fabric.command('Error "leaf-1"[1] 0')
                if os.path.exists(hung_file):
                    release_fifo(hung_file)

                def all_succeed(samples):
                    health = [s for s in samples if s.name == "ibfabric_collector_success"]
                    return health and all(s.value == 1 for s in health)
                d.wait_for(all_succeed, timeout=60, interval=0.5,
                           what="every collector to succeed after the faults")
                time.sleep(1)
                rss1, fds1, threads1 = proc_status(pid)
                samples = parse_exposition(d.scrape())
                print("soak: %d fault steps in %.0fs; resident %.1f -> %.1f MiB, fds %d -> %d, "
                      "threads %d -> %d, collections: %s" % (
                          step, SOAK_SECONDS, rss0 / 2**20, rss1 / 2**20, fds0, fds1, threads0,
                          threads1,
                          {s.labels["collector"]: int(s.value) for s in samples
                           if s.name == "ibfabric_collector_runs_total"}))
                self.assertGreater(step, 4)  # every fault ran at least once
                self.assertLessEqual(fds1, fds0 + FD_MARGIN)
                self.assertLessEqual(threads1, threads0 + THREAD_MARGIN)
                if not SANITIZED:  # ASan's quarantine holds freed memory; LSan checks leaks
                    self.assertLessEqual(rss1, rss0 + RSS_MARGIN_BYTES)
                # Faults were seen: MAD timeouts counted.
                timeouts = sum(s.value for s in samples if s.name == "ibfabric_mad_timeouts_total")
                self.assertGreater(timeouts, 0)
                # The hung file was seen: sysfs runs failed at their deadline.
                sysfs_timeouts = find_sample(samples, "ibfabric_collector_timeouts_total",
                                             collector="sysfs")
                self.assertGreater(sysfs_timeouts.value, 0)
                self.assertIsNotNone(find_sample(samples, "ibfabric_build_info"))
                probes = find_sample(samples, "ibfabric_probe_received_total", peer="self")
                self.assertGreater(probes.value, 1000)
                self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()
