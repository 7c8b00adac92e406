#!/usr/bin/env python3
"""How the fabric sweep grows with the fabric: generated two-level fat trees of increasing size
(ibsim + opensm), on each the daemon's steady-state sweep (a running daemon's second
collection, rate limit lifted, topology cached) and `ibqueryerrors`, alternating, ROUNDS each,
medians. Also the daemon's resident memory and series count with the whole fabric swept.

Memory: scraped as Prometheus does (Accept-Encoding: gzip) after the daemon's third sweep, its
process_resident_memory_bytes; minus the RSS of an idle daemon (no collector enabled) on the same
host, divided by the switch ports swept: the cost per swept port. Also the peak (VmHWM) and the
bytes of one gzip and one identity scrape.

    bench/fabric_scale.py [--rounds 3] [--sizes 8x4x9,16x8x18,32x16x18,48x24x24,60x30x32]
                          [--keep-unread 0s]

A size is LEAVESxSPINESxHCAS_PER_LEAF (tests/lib/gen_fattree.py). ibsim's default limits hold
2,048 nodes: the largest default size, 60x30x32, has 1,920 HCAs and 90 switches. Larger fabrics
need ibsim's limits raised: bench/fabric_10k.py (50,000 switch ports and 10,000 HCAs).
"""

import argparse
import gzip
import os
import statistics
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, HERE)
os.environ.setdefault("IBFABRIC_SOURCE_DIR", ROOT)

from fabric_sweep import HOST, run_timed, switches  # noqa: E402
from gen_fattree import fattree  # noqa: E402
from ibfabric_testlib import parse_exposition  # noqa: E402
from simfabric import SimFabric  # noqa: E402


def scrape(daemon, compressed=True):
    """(samples, bytes on the wire) of one scrape."""
    headers = {"Accept-Encoding": "gzip"} if compressed else {}
    request = urllib.request.Request(daemon.url + "/metrics", headers=headers)
    with urllib.request.urlopen(request, timeout=120) as response:
        body = response.read()
        encoding = response.headers.get("Content-Encoding", "")
    if compressed and encoding != "gzip":
        raise RuntimeError("no gzip answer to Accept-Encoding: gzip")
    text = gzip.decompress(body) if encoding == "gzip" else body
    return parse_exposition(text.decode()), len(body)


def peak_mib(daemon):
    with open("/proc/%d/status" % daemon.process.pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(daemon):
    with open("/proc/%d/stat" % daemon.process.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_rss(fabric, config):
    """Resident MiB of a daemon with no collector, scraped twice (gzip)."""
    with fabric.daemon(["--config", config], host=HOST) as d:
        scrape(d)
        time.sleep(1)
        values = {x.name: x.value for x in scrape(d)[0] if not x.labels}
        return values["process_resident_memory_bytes"] / 2**20


def steady(fabric, config):
    """(sweep seconds, MADs, resident MiB, series, peak MiB, gzip bytes, identity bytes) of a
    running daemon after its third collection, scraped as Prometheus does."""
    def runs(samples):
        for x in samples:
            if x.name == "ibfabric_collector_runs_total" and x.labels.get("collector") == "fabric":
                return x.value
        return 0

    with fabric.daemon(["--config", config], host=HOST) as d:
        deadline = time.monotonic() + 300
        while True:
            # Not scraping while a sweep runs: rendering takes CPU from it on 2 cores.
            time.sleep(1.5)
            samples, wire = scrape(d)
            if runs(samples) >= 3:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("no third fabric collection")
        values = {x.name: x.value for x in samples if not x.labels}
        identity = scrape(d, compressed=False)[1]
        return (values["ibfabric_fabric_sweep_duration_seconds"],
                int(values["ibfabric_fabric_sweep_mads"]),
                values["process_resident_memory_bytes"] / 2**20, len(samples), peak_mib(d), wire,
                identity)


def scrape_cpu(fabric, config):
    """CPU seconds of the daemon for: the first gzip scrape after a sweep (compresses the
    snapshot), a second one (from the cache), an identity scrape (renders the text). One sweep
    only (interval 1h), so nothing else runs meanwhile."""
    with fabric.daemon(["--config", config], host=HOST) as d:
        deadline = time.monotonic() + 300
        while True:
            time.sleep(1)
            # A scrape without self metrics and no fabric series: cheap, and compresses nothing
            # of the fabric's snapshot.
            request = urllib.request.Request(d.url + "/metrics?exclude[]=fabric")
            with urllib.request.urlopen(request, timeout=60) as response:
                samples = parse_exposition(response.read().decode())
            if any(x.name == "ibfabric_collector_runs_total" and x.value >= 1 for x in samples):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("no fabric collection")
        cpu = []
        for compressed in (True, True, False):
            before = cpu_seconds(d)
            scrape(d, compressed)
            cpu.append(cpu_seconds(d) - before)
        return cpu


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sizes", default="8x4x9,16x8x18,32x16x18,48x24x24,60x30x32")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    # The fabric collector's memory of every port's last values (docs/design.md, "A lossy fabric
    # is not a down fabric"); "0s" measures without it.
    p.add_argument("--keep-unread", default=None)
    a = p.parse_args()
    os.environ["IBFABRICD"] = os.path.join(a.build, "daemon", "ibfabricd")
    rows = []
    for size in a.sizes.split(","):
        leaves, spines, hcas = (int(x) for x in size.split("x"))
        start = time.monotonic()
        with SimFabric(fattree(leaves, spines, hcas), name="scale", ready_timeout=300) as f:
            f.wait_ready(hosts=[HOST], timeout=300)
            up = time.monotonic() - start
            sw = switches(f)
            nports = sum(n for _, n in sw)
            config = os.path.join(f.workdir, "steady.yaml")
            with open(config, "w") as out:
                out.write("mad: {rate_limit: 0}\ncollectors:\n  sysfs: {enabled: false}\n"
                          "  ports: {enabled: false}\n"
                          "  fabric: {enabled: true, interval: 1s, rediscover_every: 1000%s}\n"
                          % ("" if a.keep_unread is None else ", keep_unread: " + a.keep_unread))
            idle_config = os.path.join(f.workdir, "idle.yaml")
            with open(idle_config, "w") as out:
                out.write("collectors:\n  sysfs: {enabled: false}\n  ports: {enabled: false}\n")
            d, iqe, rss, series, mads, idle, peak, wire = [], [], [], [], 0, [], [], None
            fresh, cached, plain = [], [], []
            once_config = os.path.join(f.workdir, "once.yaml")
            with open(once_config, "w") as out:
                out.write("mad: {rate_limit: 0}\ncollectors:\n  sysfs: {enabled: false}\n"
                          "  ports: {enabled: false}\n  fabric: {enabled: true, interval: 1h}\n")
            for _ in range(a.rounds):
                idle.append(idle_rss(f, idle_config))
                s, mads, r, n, hwm, gz, ident = steady(f, config)
                cpu_fresh, cpu_cached, cpu_identity = scrape_cpu(f, once_config)
                fresh.append(cpu_fresh)
                cached.append(cpu_cached)
                plain.append(cpu_identity)
                d.append(s)
                rss.append(r)
                series.append(n)
                peak.append(hwm)
                wire = (gz, ident)
                t, res = run_timed(f, ["ibqueryerrors"])
                if "ports checked" not in res.stdout:
                    raise RuntimeError("ibqueryerrors failed: " + res.stderr[-500:])
                iqe.append(t)
        row = (len(sw), nports, leaves * hcas, statistics.median(d), mads,
               statistics.median(iqe), statistics.median(rss), max(series),
               statistics.median(idle), statistics.median(peak), wire[0], wire[1])
        rows.append(row)
        print("%s: CPU of a scrape: gzip %.3f s compressing a new snapshot, %.3f s from the "
              "cache; identity %.3f s" % (size, statistics.median(fresh),
                                          statistics.median(cached), statistics.median(plain)),
              flush=True)
        print("%s: fabric up in %.0fs; %d switches, %d switch ports, %d HCAs: steady sweep %.3fs "
              "(%d MADs), ibqueryerrors %.3fs, RSS %.1f MiB, %d series, idle RSS %.1f MiB, "
              "peak %.1f MiB, scrape %d bytes gzip / %d identity" % ((size, up) + row),
              flush=True)
    print()
    print("%8s %12s %6s %10s %8s %10s %14s %8s %9s %9s %9s %13s %9s %11s %13s" % (
        "switches", "switch ports", "HCAs", "sweep s", "MADs", "MADs/s", "s/1000 ports",
        "iqe s", "iqe/sweep", "RSS MiB", "idle MiB", "KiB/port", "peak MiB", "gzip bytes",
        "identity bytes"))
    for (sw, ports, hcas, sweep, mads, iqe, rss, series, idle, peak, gz, ident) in rows:
        print("%8d %12d %6d %10.3f %8d %10.0f %14.3f %8.3f %8.2fx %9.1f %9.1f %13.2f %9.1f %11d "
              "%13d" % (sw, ports, hcas, sweep, mads, mads / sweep, sweep / ports * 1000, iqe,
                        iqe / sweep, rss, idle, (rss - idle) * 1024 / ports, peak, gz, ident))


if __name__ == "__main__":
    main()
