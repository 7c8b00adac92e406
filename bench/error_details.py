#!/usr/bin/env python3
"""What PortRcvErrorDetails and PortXmitDiscardDetails cost the fabric sweep: the steady-state
sweep (after one discovery, so no PortInfo comes free from it) of the 48-switch / 576-HCA fat
tree with `error_details` off and on, alternating in one run on one simulated fabric, rate limit
lifted. Each daemon's figure is the median of its collections 2 to 6, from its debug log
(fabric_sweep.median_steady_sweep: nothing scrapes during a sweep). Prints MADs per sweep and
the median sweep time of each, and their ratio.

  python3 bench/error_details.py [--rounds 5]
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("IBFABRICD", os.path.join(HERE, "..", "build", "daemon", "ibfabricd"))
os.environ.setdefault("IBFABRIC_SOURCE_DIR", os.path.join(HERE, ".."))

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
sys.path.insert(0, HERE)
from fabric_sweep import HOST, median_steady_sweep  # noqa: E402
from gen_fattree import fattree  # noqa: E402
from simfabric import SimFabric  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    results = {False: [], True: []}
    mads = {}
    f = SimFabric(fattree(), name="bench-details")
    try:
        f.start()
        f.wait_ready(hosts=[HOST])
        daemons = {}
        for details in (False, True):
            path = os.path.join(f.workdir, "details-%s.yaml" % details)
            with open(path, "w") as out:
                out.write("mad: {rate_limit: 0}\ncollectors:\n  sysfs: {enabled: false}\n"
                          "  ports: {enabled: false}\n  sm: {enabled: false}\n"
                          "  sriov: {enabled: false}\n"
                          "  fabric: {enabled: true, interval: 500ms, rediscover_every: 1000000,"
                          " error_details: %s}\n" % ("true" if details else "false"))
            daemons[details] = path
        for _ in range(args.rounds):
            for details, config in daemons.items():
                # The first run is discovery + a sweep that reuses discovery's PortInfo; the
                # ones after it are steady-state sweeps.
                with f.daemon(["--config", config, "--collector.fabric", "--log.level", "debug"],
                              host=HOST) as d:
                    seconds, mads[details] = median_steady_sweep(d)
                    results[details].append(seconds)
    finally:
        f.close()
    off, on = statistics.median(results[False]), statistics.median(results[True])
    print("error_details off: %d MADs per sweep, median %.3f s" % (mads[False], off))
    print("error_details on:  %d MADs per sweep, median %.3f s" % (mads[True], on))
    print("on / off: %.2fx MADs, %.2fx time" % (mads[True] / mads[False], on / off))


if __name__ == "__main__":
    main()
