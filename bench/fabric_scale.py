#!/usr/bin/env python3
"""How the fabric sweep grows with the fabric: generated two-level fat trees of increasing size
(ibsim + opensm), on each the daemon's steady-state sweep (a running daemon's second
collection, rate limit lifted, topology cached) and `ibqueryerrors`, alternating, ROUNDS each,
medians. Also the daemon's resident memory and series count with the whole fabric swept.

    bench/fabric_scale.py [--rounds 3] [--sizes 8x4x9,16x8x18,32x16x18,48x24x24,60x30x32]

A size is LEAVESxSPINESxHCAS_PER_LEAF (tests/lib/gen_fattree.py). ibsim holds at most 2,048 nodes:
the largest default size, 60x30x32, has 1,920 HCAs and 90 switches.
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, HERE)
os.environ.setdefault("IBFABRIC_SOURCE_DIR", ROOT)

from fabric_sweep import HOST, run_timed, steady_samples, switches  # noqa: E402
from gen_fattree import fattree  # noqa: E402
from simfabric import SimFabric  # noqa: E402


def steady(fabric, config):
    """(sweep seconds, MADs, resident MiB, series) of a running daemon's second collection."""
    samples = steady_samples(fabric, config, timeout=300)
    values = {x.name: x.value for x in samples if not x.labels}
    return (values["ibfabric_fabric_sweep_duration_seconds"],
            int(values["ibfabric_fabric_sweep_mads"]),
            values["process_resident_memory_bytes"] / 2**20, len(samples))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sizes", default="8x4x9,16x8x18,32x16x18,48x24x24,60x30x32")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
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
                          "  fabric: {enabled: true, interval: 1s, rediscover_every: 1000}\n")
            d, iqe, rss, series, mads = [], [], [], [], 0
            for _ in range(a.rounds):
                s, mads, r, n = steady(f, config)
                d.append(s)
                rss.append(r)
                series.append(n)
                t, res = run_timed(f, ["ibqueryerrors"])
                if "ports checked" not in res.stdout:
                    raise RuntimeError("ibqueryerrors failed: " + res.stderr[-500:])
                iqe.append(t)
        row = (len(sw), nports, leaves * hcas, statistics.median(d), mads,
               statistics.median(iqe), statistics.median(rss), max(series))
        rows.append(row)
        print("%s: fabric up in %.0fs; %d switches, %d switch ports, %d HCAs: steady sweep %.3fs "
              "(%d MADs), ibqueryerrors %.3fs, RSS %.1f MiB, %d series" % ((size, up) + row),
              flush=True)
    print()
    print("%8s %12s %6s %10s %8s %10s %14s %8s %9s %9s" % (
        "switches", "switch ports", "HCAs", "sweep s", "MADs", "MADs/s", "s/1000 ports",
        "iqe s", "iqe/sweep", "RSS MiB"))
    for sw, ports, hcas, sweep, mads, iqe, rss, series in rows:
        print("%8d %12d %6d %10.3f %8d %10.0f %14.3f %8.3f %8.2fx %9.1f" % (
            sw, ports, hcas, sweep, mads, mads / sweep, sweep / ports * 1000, iqe, iqe / sweep,
            rss))


if __name__ == "__main__":
    main()
