#!/usr/bin/env python3
"""sysfs collection and scrape: ibfabricd vs prometheus-node-exporter's infiniband collector on
the same scaled-up sysfs tree (bench/make_sysfs_tree.py: 8 HCAs x 2 ports with full counters/ and
hw_counters/), side by side in one run.

Three processes run for the whole benchmark; rounds alternate between them. In a round one of
them is scraped SCRAPES times at RATE per second while the others idle:
- node_exporter reads sysfs on every scrape (its design); only its infiniband collector is
  enabled, with its default exporter metrics (go_*, process_*), as ibfabricd has process_*;
- "ibfabricd" collects on a timer of the same period as the scrapes (1/RATE), so its CPU per
  scrape is one collection plus one render: the same work per scrape as node_exporter;
- "ibfabricd (scrape only)" collects once an hour, so its CPU per scrape is what serving a
  scrape costs: ibfabricd renders its latest snapshot and never reads sysfs for a scrape.
Measured per round: CPU seconds of the scraped process (utime + stime from /proc/PID/stat) per
scrape, client-side scrape latency, bytes of the response body (on the wire) and resident memory
at the end. Printed: medians over the rounds and the ratios node_exporter / ibfabricd.

With --gzip every scrape sends `Accept-Encoding: gzip` as Prometheus does; both exporters then
answer gzip (node_exporter compresses each response; ibfabricd compresses a snapshot once).

Usage: bench/sysfs_scrape.py [--rounds 5] [--scrapes 100] [--rate 10] [--gzip] [--ibfabricd PATH]
"""

import argparse
import gzip
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_sysfs_tree import make_tree  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


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


def scrape_round(url, pid, scrapes, rate, compressed=False):
    period = 1.0 / rate
    latencies = []
    samples = 0
    wire = 0
    headers = {"Accept-Encoding": "gzip"} if compressed else {}
    cpu0 = cpu_seconds(pid)
    next_at = time.monotonic()
    for _ in range(scrapes):
        next_at += period
        t0 = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=10) as response:
            body = response.read()
            encoding = response.headers.get("Content-Encoding", "")
        latencies.append(time.perf_counter() - t0)
        if compressed and encoding != "gzip":
            raise SystemExit("%s answered %r to Accept-Encoding: gzip" % (url, encoding))
        wire = len(body)
        if encoding == "gzip":
            body = gzip.decompress(body)
        samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        time.sleep(max(0.0, next_at - time.monotonic()))
    cpu = cpu_seconds(pid) - cpu0
    return {"cpu_per_scrape": cpu / scrapes, "latency": statistics.median(latencies),
            "rss": rss_mib(pid), "samples": samples, "bytes": wire}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scrapes", type=int, default=100)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--gzip", action="store_true", help="scrape with Accept-Encoding: gzip")
    ap.add_argument("--ibfabricd", default=os.path.join(HERE, "..", "build", "daemon", "ibfabricd"))
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="bench-sysfs-")
    tree = make_tree(os.path.join(work, "sys"))
    def ibfabricd(name, interval):
        config = os.path.join(work, name + ".yaml")
        with open(config, "w") as f:
            f.write("collectors:\n  sysfs: {interval: %s}\n  ports: {enabled: false}\n" % interval)
        port = free_port()
        urls[name] = "http://127.0.0.1:%d/metrics" % port
        return subprocess.Popen(
            [a.ibfabricd, "--config", config, "--sysfs-root", tree, "--log.level", "warn",
             "--web.listen-address", "127.0.0.1:%d" % port],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    ne_port = free_port()
    urls = {"node_exporter": "http://127.0.0.1:%d/metrics" % ne_port}
    procs = {
        "ibfabricd": ibfabricd("ibfabricd", "%dms" % int(1000 / a.rate)),
        "ibfabricd (scrape only)": ibfabricd("ibfabricd (scrape only)", "1h"),
        "node_exporter": subprocess.Popen(
            ["prometheus-node-exporter", "--collector.disable-defaults", "--collector.infiniband",
             "--path.sysfs=" + tree,
             "--web.listen-address=127.0.0.1:%d" % ne_port],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    }
    results = {name: [] for name in procs}
    try:
        for name in procs:
            wait_up(urls[name], procs[name])
            scrape_round(urls[name], procs[name].pid, 10, a.rate, a.gzip)  # warm-up
        for r in range(a.rounds):
            order = list(procs) if r % 2 == 0 else list(reversed(list(procs)))  # alternate
            for name in order:
                results[name].append(
                    scrape_round(urls[name], procs[name].pid, a.scrapes, a.rate, a.gzip))
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
        subprocess.run(["rm", "-rf", work])

    def med(name, key):
        return statistics.median(x[key] for x in results[name])

    print("sysfs tree: 8 HCAs x 2 ports (bench/make_sysfs_tree.py); %d rounds x %d scrapes at "
          "%.0f/s, alternating%s" % (a.rounds, a.scrapes, a.rate,
                                      ", Accept-Encoding: gzip" if a.gzip else ""))
    print("%-24s %8s %10s %14s %11s %8s" % ("", "samples", "bytes", "CPU ms/scrape", "latency ms",
                                            "RSS MiB"))
    for name in procs:
        print("%-24s %8d %10d %14.3f %11.3f %8.1f" % (
            name, results[name][-1]["samples"], med(name, "bytes"),
            med(name, "cpu_per_scrape") * 1e3, med(name, "latency") * 1e3, med(name, "rss")))
    ne = "node_exporter"
    for ib in ("ibfabricd", "ibfabricd (scrape only)"):
        cpu_ib = med(ib, "cpu_per_scrape")
        print("ratio node_exporter / %s: CPU per scrape %s, latency %.1fx, RSS %.1fx, "
              "bytes per sample %.2fx" % (
                  ib, "%.1fx" % (med(ne, "cpu_per_scrape") / cpu_ib) if cpu_ib > 0
                  else "inf (0 ticks)",
                  med(ne, "latency") / med(ib, "latency"), med(ne, "rss") / med(ib, "rss"),
                  (med(ne, "bytes") / results[ne][-1]["samples"])
                  / (med(ib, "bytes") / results[ib][-1]["samples"])))
    print("(CPU time has the kernel's clock-tick resolution, 1/%d s; per-scrape figures are "
          "round totals divided by %d scrapes)" % (CLK_TCK, a.scrapes))


if __name__ == "__main__":
    main()
