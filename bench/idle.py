#!/usr/bin/env python3
"""Idle overhead: ibfabricd with its default intervals (sysfs and ports every 15 s, sm every 15 s
when built) beside prometheus-node-exporter's infiniband collector, both scraped every 15 s
as Prometheus would, on the same scaled-up sysfs tree (8 HCAs x 2 ports), for DURATION seconds
in the same run. With --fabric, ibfabricd also runs its MAD collectors against a simulated
fabric (ibsim + opensm, config/demo/fabric.topo) under the umad shim.

Printed: CPU as a percentage of one core over the run, and resident memory at the end.
Usage: bench/idle.py [--duration 120] [--fabric] [--ibfabricd PATH]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from make_sysfs_tree import make_tree  # noqa: E402
from sysfs_scrape import cpu_seconds, free_port, rss_mib, wait_up  # noqa: E402

SCRAPE_EVERY = 15.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=120)
    ap.add_argument("--fabric", action="store_true")
    ap.add_argument("--ibfabricd", default=os.path.join(HERE, "..", "build", "daemon", "ibfabricd"))
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="bench-idle-")
    tree = make_tree(os.path.join(work, "sys"))
    fabric = None
    env = dict(os.environ)
    if a.fabric:
        os.environ.setdefault("IBFABRIC_SOURCE_DIR", os.path.join(HERE, ".."))
        from simfabric import SimFabric
        fabric = SimFabric(os.path.join(HERE, "..", "config", "demo", "fabric.topo"),
                           name="idle", sm_host="sm-node mlx5_0")
        fabric.start()
        env = fabric.env("gpu-node-01 mlx5_0")
    ib_port, ne_port = free_port(), free_port()
    procs = {
        "ibfabricd": subprocess.Popen(
            [a.ibfabricd, "--sysfs-root", tree, "--log.level", "warn",
             "--web.listen-address", "127.0.0.1:%d" % ib_port] +
            ([] if a.fabric else ["--no-collector.ports"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            cwd=fabric.workdir if fabric else work),
        "node_exporter": subprocess.Popen(
            ["prometheus-node-exporter", "--collector.disable-defaults", "--collector.infiniband",
             "--path.sysfs=" + tree, "--web.listen-address=127.0.0.1:%d" % ne_port],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    }
    urls = {"ibfabricd": "http://127.0.0.1:%d/metrics" % ib_port,
            "node_exporter": "http://127.0.0.1:%d/metrics" % ne_port}
    try:
        for name in procs:
            wait_up(urls[name], procs[name])
        time.sleep(2)
        start = {name: cpu_seconds(p.pid) for name, p in procs.items()}
        t0 = time.monotonic()
        next_scrape = t0
        while time.monotonic() - t0 < a.duration:
            if time.monotonic() >= next_scrape:
                for url in urls.values():
                    urllib.request.urlopen(url, timeout=10).read()
                next_scrape += SCRAPE_EVERY
            time.sleep(0.2)
        elapsed = time.monotonic() - t0
        print("idle run: %.0f s, scraped every %.0f s, sysfs tree 8 HCAs x 2 ports%s" %
              (elapsed, SCRAPE_EVERY, ", MAD collectors on a simulated fabric" if a.fabric else ""))
        for name, p in procs.items():
            cpu = cpu_seconds(p.pid) - start[name]
            print("%-14s CPU %.3f%% of one core (%.2f s), RSS %.1f MiB" %
                  (name, 100 * cpu / elapsed, cpu, rss_mib(p.pid)))
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
        if fabric:
            fabric.close()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
