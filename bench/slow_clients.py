#!/usr/bin/env python3
"""Scrape latency under slow clients: ibfabricd vs prometheus-node-exporter, side by side.

Both serve the same sysfs tree (bench/make_sysfs_tree.py: 8 HCAs x 2 ports): node_exporter with
only its infiniband collector (it reads sysfs on every scrape), ibfabricd with its sysfs
collector every 15 s (a scrape renders the latest snapshot). Both listen on loopback.

Rounds alternate over four cells: {ibfabricd, node_exporter} x {quiet, 200 slow clients}. In a
"slow" cell, 200 slowloris connections from 127.0.0.2 (tests/lib/slowloris.py: the request
line, then one header byte per second, never a whole request, reconnecting when closed) press
on the process being scraped; the scraper, from 127.0.0.1, makes SCRAPES scrapes at RATE per
second, each on a new connection with a 10 s timeout (Prometheus's default scrape_timeout).
Printed per cell: p50 and p99 scrape latency over all rounds, failed scrapes, resident memory,
the server's CPU (% of one core while the cell's scrapes ran), and what the slow clients saw
(connections made, connections the server closed); then the ratios slow / quiet for each
process and node_exporter / ibfabricd for each condition. The slow clients run in this
process and take CPU of their own (more when a server closes their connections and they
reconnect), in a process of their own on the same cores as the servers.

Usage: bench/slow_clients.py [--rounds 3] [--scrapes 100] [--rate 10] [--slow 200]
                             [--ibfabricd PATH]
"""

import argparse
import http.client
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from make_sysfs_tree import make_tree  # noqa: E402
from sysfs_scrape import cpu_seconds, free_port, rss_mib, wait_up  # noqa: E402
from slowloris import SlowClients  # noqa: E402


def slow_pool(port, count, started, stop, result):
    """The slow clients, in a process of their own: in the scraper's process they would take
    the GIL from it, and more so against a server that closes their connections."""
    pool = SlowClients(port, count, ["127.0.0.2"], "headers", period=1.0).start()
    started.set()
    stop.wait()
    pool.stop()
    result.put((pool.connects, pool.closed_by_server))


class SlowPool:
    def __init__(self, port, count):
        self.started, self.stop_event = multiprocessing.Event(), multiprocessing.Event()
        self.result = multiprocessing.Queue()
        self.process = multiprocessing.Process(
            target=slow_pool, args=(port, count, self.started, self.stop_event, self.result))
        self.process.start()
        self.started.wait(60)

    def stop(self):
        """Returns (connections made, connections the server closed)."""
        self.stop_event.set()
        counts = self.result.get(timeout=60)
        self.process.join(timeout=30)
        return counts


def percentile(values, p):
    """Nearest rank."""
    ordered = sorted(values)
    rank = max(1, int(round(p / 100.0 * len(ordered) + 0.5)))
    return ordered[min(rank, len(ordered)) - 1]


def scrape_once(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                      source_address=("127.0.0.1", 0))
    try:
        conn.request("GET", "/metrics", headers={"Connection": "close"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def scrape_round(port, scrapes, rate):
    latencies, failures = [], 0
    period = 1.0 / rate
    next_at = time.monotonic()
    for _ in range(scrapes):
        next_at += period
        t0 = time.perf_counter()
        try:
            ok = scrape_once(port) == 200
        except OSError:
            ok = False
        elapsed = time.perf_counter() - t0
        if ok:
            latencies.append(elapsed)
        else:
            failures += 1
        time.sleep(max(0.0, next_at - time.monotonic()))
    return latencies, failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scrapes", type=int, default=100)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--slow", type=int, default=200)
    ap.add_argument("--ibfabricd", default=os.path.join(HERE, "..", "build", "daemon", "ibfabricd"))
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="bench-slow-")
    tree = make_tree(os.path.join(work, "sys"))
    config = os.path.join(work, "ibfabricd.yaml")
    with open(config, "w") as f:
        f.write("collectors:\n  sysfs: {interval: 15s}\n  ports: {enabled: false}\n"
                "  sm: {enabled: false}\n  sriov: {enabled: false}\n")
    ports = {"ibfabricd": free_port(), "node_exporter": free_port()}
    procs = {
        "ibfabricd": subprocess.Popen(
            [a.ibfabricd, "--config", config, "--sysfs-root", tree, "--log.level", "warn",
             "--web.listen-address", "127.0.0.1:%d" % ports["ibfabricd"]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        "node_exporter": subprocess.Popen(
            ["prometheus-node-exporter", "--collector.disable-defaults", "--collector.infiniband",
             "--path.sysfs=" + tree, "--web.listen-address=127.0.0.1:%d" % ports["node_exporter"]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    }
    cells = [(name, cond) for name in procs for cond in ("quiet", "slow")]
    latencies = {cell: [] for cell in cells}
    failures = {cell: 0 for cell in cells}
    slow_seen = {name: [0, 0] for name in procs}  # connections made, closed by the server
    rss = {cell: 0.0 for cell in cells}
    cpu = {cell: [0.0, 0.0] for cell in cells}  # CPU seconds of the server, wall seconds
    try:
        for name in procs:
            wait_up("http://127.0.0.1:%d/metrics" % ports[name], procs[name])
            scrape_round(ports[name], 10, a.rate)  # warm-up
        for r in range(a.rounds):
            order = cells if r % 2 == 0 else list(reversed(cells))  # alternate
            for name, cond in order:
                pool = None
                if cond == "slow":
                    pool = SlowPool(ports[name], a.slow)
                    time.sleep(2)  # every slow client connected and sending
                try:
                    cpu0, wall0 = cpu_seconds(procs[name].pid), time.monotonic()
                    lat, fail = scrape_round(ports[name], a.scrapes, a.rate)
                    cpu[(name, cond)][0] += cpu_seconds(procs[name].pid) - cpu0
                    cpu[(name, cond)][1] += time.monotonic() - wall0
                    rss[(name, cond)] = max(rss[(name, cond)], rss_mib(procs[name].pid))
                finally:
                    if pool:
                        connects, closed = pool.stop()
                        slow_seen[name][0] += connects
                        slow_seen[name][1] += closed
                        time.sleep(1)  # let the server see the closes
                latencies[(name, cond)] += lat
                failures[(name, cond)] += fail
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
        subprocess.run(["rm", "-rf", work])

    print("%d rounds x %d scrapes at %.0f/s per cell, alternating; %d slow clients from "
          "127.0.0.2, scraper from 127.0.0.1 (new connection per scrape, 10 s timeout)" %
          (a.rounds, a.scrapes, a.rate, a.slow))
    print("%-14s %-6s %9s %9s %7s %8s %10s" % ("", "", "p50 ms", "p99 ms", "failed", "RSS MiB",
                                              "CPU %"))
    stat = {}
    for cell in cells:
        lat = latencies[cell]
        p50 = percentile(lat, 50) * 1e3 if lat else float("nan")
        p99 = percentile(lat, 99) * 1e3 if lat else float("nan")
        stat[cell] = (p50, p99)
        print("%-14s %-6s %9.2f %9.2f %7d %8.1f %10.1f" % (
            cell[0], cell[1], p50, p99, failures[cell], rss[cell],
            100 * cpu[cell][0] / cpu[cell][1]))
    for name in procs:
        print("%s: slow / quiet p50 %.2fx, p99 %.2fx; slow clients made %d connections, the "
              "server closed %d" % (name, stat[(name, "slow")][0] / stat[(name, "quiet")][0],
                                    stat[(name, "slow")][1] / stat[(name, "quiet")][1],
                                    slow_seen[name][0], slow_seen[name][1]))
    for cond in ("quiet", "slow"):
        print("node_exporter / ibfabricd, %s: p50 %.2fx, p99 %.2fx" % (
            cond, stat[("node_exporter", cond)][0] / stat[("ibfabricd", cond)][0],
            stat[("node_exporter", cond)][1] / stat[("ibfabricd", cond)][1]))


if __name__ == "__main__":
    main()
