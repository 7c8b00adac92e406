#!/usr/bin/env python3
"""Scrape latency with a hung sysfs collector: two ibfabricd side by side in one run, on two
copies of the same sysfs tree (bench/make_sysfs_tree.py: 8 HCAs x 2 ports), one of them with a
FIFO in place of mlx5_0's ports/1/counters/port_rcv_data (its open() waits for a writer that
never comes, as a counters/ read waits on a firmware that does not answer).

Both daemons run the sysfs collector every second (run_timeout: the interval) and the sriov
collector; rounds alternate between them, each round SCRAPES scrapes at RATE per second; printed:
p50 and p99 of the client-side scrape latency over all rounds, the samples a scrape returned
(the hung daemon drops the sysfs series, so it renders less: compare latencies knowing that),
and the hung daemon's sysfs health at the end.

No node_exporter peer here: it opens sysfs files without blocking on a FIFO (it skips the
file and reports the rest), so a FIFO does not hang it; a real hung PMA read blocks in read()
for any reader, which this bench cannot reproduce without hardware.

Usage: bench/hung_source.py [--rounds 5] [--scrapes 100] [--rate 20] [--ibfabricd PATH]
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_sysfs_tree import make_tree  # noqa: E402

HUNG_FILE = os.path.join("devices", "pci0000:00", "0000:00:01.0", "0000:17:00.0", "infiniband",
                         "mlx5_0", "ports", "1", "counters", "port_rcv_data")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url, proc):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("%s exited early" % url)
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("%s did not come up" % url)


def scrape_round(url, scrapes, rate, latencies):
    period = 1.0 / rate
    next_at = time.monotonic()
    samples = 0
    for _ in range(scrapes):
        next_at += period
        t0 = time.perf_counter()
        body = urllib.request.urlopen(url, timeout=10).read()
        latencies.append(time.perf_counter() - t0)
        samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        time.sleep(max(0.0, next_at - time.monotonic()))
    return samples


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def sample_value(body, prefix):
    for line in body.splitlines():
        if line.startswith(prefix):
            return line.rsplit(" ", 1)[1]
    return "absent"


def release(path):
    """Wakes every open() waiting on the FIFO and removes it."""
    if os.path.exists(path):
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        os.unlink(path)
        os.close(fd)


def run_before(binary, tree, config):
    """Answered scrapes (of 5, 2 s timeout each) of `binary` on the hung tree. Its loop is
    stuck, so SIGTERM cannot stop it: it is killed."""
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--config", config, "--sysfs-root", tree, "--log.level", "critical",
         "--web.listen-address", "127.0.0.1:%d" % port],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    answered = 0
    try:
        time.sleep(1)
        for _ in range(5):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2).read()
                answered += 1
            except OSError:
                pass
    finally:
        proc.kill()
        proc.wait(timeout=10)
    return answered


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scrapes", type=int, default=100)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--ibfabricd", default=os.path.join(HERE, "..", "build", "daemon", "ibfabricd"))
    ap.add_argument("--before", help="an ibfabricd built before sysfs left the event loop: "
                    "also count how many of 5 scrapes it answers within 2 s on the hung tree")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="bench-hung-")
    trees = {"healthy": make_tree(os.path.join(work, "healthy"))}
    hung_tree = os.path.join(work, "hung")
    shutil.copytree(trees["healthy"], hung_tree, symlinks=True)
    trees["hung sysfs"] = hung_tree
    fifo = os.path.join(hung_tree, HUNG_FILE)
    os.unlink(fifo)
    os.mkfifo(fifo)

    urls, procs = {}, {}
    for name, tree in trees.items():
        config = os.path.join(work, name.replace(" ", "_") + ".yaml")
        with open(config, "w") as f:
            f.write("collectors:\n  sysfs: {interval: 1s}\n  ports: {enabled: false}\n"
                    "  sm: {enabled: false}\n")
        port = free_port()
        urls[name] = "http://127.0.0.1:%d/metrics" % port
        procs[name] = subprocess.Popen(
            [a.ibfabricd, "--config", config, "--sysfs-root", tree, "--log.level", "critical",
             "--web.listen-address", "127.0.0.1:%d" % port],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latencies = {name: [] for name in procs}
    samples = {}
    before = None
    try:
        for name in procs:
            wait_up(urls[name], procs[name])
        time.sleep(2)  # the hung daemon's first run has passed its deadline
        for r in range(a.rounds):
            order = list(procs) if r % 2 == 0 else list(reversed(list(procs)))
            for name in order:
                samples[name] = scrape_round(urls[name], a.scrapes, a.rate, latencies[name])
        body = urllib.request.urlopen(urls["hung sysfs"], timeout=10).read().decode()
        health = {m: sample_value(body, 'ibfabric_collector_%s{collector="sysfs"}' % m)
                  for m in ("success", "run_stuck", "timeouts_total", "runs_total")}
        sriov_runs = sample_value(body, 'ibfabric_collector_runs_total{collector="sriov"}')
        if a.before:
            before = run_before(a.before, hung_tree, os.path.join(work, "healthy.yaml"))
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
        release(fifo)
        shutil.rmtree(work)

    print("sysfs tree: 8 HCAs x 2 ports; %d rounds x %d scrapes at %.0f/s, alternating; sysfs "
          "every 1s" % (a.rounds, a.scrapes, a.rate))
    print("%-12s %8s %9s %9s %9s" % ("ibfabricd", "samples", "p50 ms", "p99 ms", "max ms"))
    for name in procs:
        lat = latencies[name]
        print("%-12s %8d %9.3f %9.3f %9.3f" % (name, samples[name], percentile(lat, 50) * 1e3,
                                               percentile(lat, 99) * 1e3, max(lat) * 1e3))
    print("ratio hung / healthy: p50 %.2fx, p99 %.2fx" % (
        percentile(latencies["hung sysfs"], 50) / percentile(latencies["healthy"], 50),
        percentile(latencies["hung sysfs"], 99) / percentile(latencies["healthy"], 99)))
    print("hung daemon, sysfs collector at the end: success %s, run_stuck %s, timeouts_total %s, "
          "runs_total %s; sriov runs_total %s" % (
              health["success"], health["run_stuck"], health["timeouts_total"],
              health["runs_total"], sriov_runs))
    if before is not None:
        print("before (%s) on the hung tree: %d of 5 scrapes answered within 2 s" % (
            a.before, before))


if __name__ == "__main__":
    main()
