#!/usr/bin/env python3
"""What placing probes on the fabric costs one node (collector `paths`), on a simulated fat tree:
SMPs to trace a set of peers from a cold cache, SMPs per rotation of the peer subset once the
cache is warm (`rotate_every`), SMPs of a verification of the forwarding tables, and series per
probed peer (probe and path series) in one scrape.

    bench/paths_cost.py [--leaves 16] [--spines 8] [--hcas-per-leaf 8] [--peers 16]
                        [--rotations 3] [--rotate-every 20]

One ibfabricd on the first host probes `--peers` of all the other hosts over MAD (a subset that
moves on every `--rotate-every` seconds) and traces their paths; nothing answers the probes
(they are lost, which costs the paths nothing). The peer: `ibtracert`, run once a leg for the
same two legs of the first slot's peers, from the same host. Prints one line per figure.
"""

import argparse
import os
import re
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from gen_fattree import fattree  # noqa: E402
from ibfabric_testlib import find_samples, free_port  # noqa: E402
from simfabric import SimFabric  # noqa: E402

OFF = ("collectors:\n  sysfs: {enabled: false}\n  ports: {enabled: false}\n"
       "  sm: {enabled: false}\n  sriov: {enabled: false}\n")


def value(samples, name, **labels):
    return sum(s.value for s in find_samples(samples, name, **labels))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--leaves", type=int, default=16)
    ap.add_argument("--spines", type=int, default=8)
    ap.add_argument("--hcas-per-leaf", type=int, default=8)
    ap.add_argument("--peers", type=int, default=16)
    ap.add_argument("--rotations", type=int, default=3)
    ap.add_argument("--rotate-every", type=int, default=20, help="seconds")
    ap.add_argument("--ibfabricd", default=os.path.join(HERE, "..", "build", "daemon", "ibfabricd"))
    a = ap.parse_args()
    os.environ.setdefault("IBFABRICD", os.path.abspath(a.ibfabricd))
    work = tempfile.TemporaryDirectory(prefix="bench-paths-")
    hosts = ["node-%03d mlx5_0" % i for i in range(1, a.leaves * a.hcas_per_leaf + 1)]
    fabric = SimFabric(fattree(leaves=a.leaves, spines=a.spines, hcas_per_leaf=a.hcas_per_leaf),
                       name="benchpaths", sm_host="spine-01", ready_timeout=120)
    daemon = None
    try:
        fabric.start()
        fabric.wait_ready(hosts=[hosts[0]])
        # (ibaddr per host: the shim passes no RMPP, so one SA table query lists one record.)
        lids = {}
        for h in hosts:
            lids[h] = fabric.lid(h)
        targets = ", ".join('{lid: %d, name: "%s"}' % (lids[h], h.split()[0])
                            for h in hosts[1:] if h in lids)
        config = os.path.join(work.name, "ibfabricd.yaml")
        with open(config, "w") as f:
            f.write(OFF + "  probe: {enabled: true, interval: 1s, udp_listen: \"\", "
                    "mad_responder: false, probe_interval: 1s, timeout: 500ms, max_peers: %d, "
                    "rotate_every: %ds, targets: [%s]}\n"
                    "  paths: {enabled: true, interval: 1s, verify_every: 5s, "
                    "max_mads_per_run: 100000}\n" % (a.peers, a.rotate_every, targets))
        daemon = fabric.daemon(["--config", config], host=hosts[0], port=free_port())
        daemon.start()
        print("fabric: %d leaves, %d spines, %d hosts (%d with a LID); %d peers a slot, a new "
              "slot every %d s" % (a.leaves, a.spines, len(hosts), len(lids), a.peers,
                                   a.rotate_every))

        def traced(s):
            return value(s, "ibfabric_path_peers", state="traced") == a.peers and s

        s = daemon.wait_for(traced, timeout=60, what="the first slot traced")
        cold = value(s, "ibfabric_path_mads_total")
        print("cold cache: %d SMPs for %d peers (%.1f a peer), %d forwarding-table blocks cached"
              % (cold, a.peers, cold / a.peers, value(s, "ibfabric_path_cached_tables")))
        # The peer: `ibtracert` tracing the same two legs of each of these peers, one run a leg,
        # from the same host, its SMPs counted as packets leaving that host's port (ibsim
        # counts every MAD as traffic), with the daemon paused meanwhile.
        peers = sorted({x.labels["peer"] for x in find_samples(s, "ibfabric_path_hops")})
        own = lids[hosts[0]]

        def sent_packets():
            out = fabric.run_tool(["perfquery", "-x", str(own), "1"], host=hosts[0]).stdout
            return int(re.search(r"PortXmitPkts:\.+(\d+)", out).group(1))
        daemon.signal(signal.SIGSTOP)
        try:
            before = sent_packets()
            for peer in peers:
                lid = lids[peer + " mlx5_0"]
                for slid, dlid in ((own, lid), (lid, own)):
                    fabric.run_tool(["ibtracert", str(slid), str(dlid)], host=hosts[0])
            # Less the after-query's own packet.
            tracert = sent_packets() - before - 1
        finally:
            daemon.signal(signal.SIGCONT)
        print("ibtracert: %d SMPs for the same %d peers' two legs (%.1f a peer): %.1fx the "
              "daemon's cold trace" % (tracert, len(peers), tracert / len(peers),
                                       tracert / max(1, cold)))
        peer_series = [x for x in s if "peer" in x.labels]
        probe = sum(1 for x in peer_series if x.name.startswith("ibfabric_probe_"))
        path = sum(1 for x in peer_series if x.name.startswith("ibfabric_path_"))
        print("series per peer: %.1f probe, %.1f path (%d peers)" % (
            probe / a.peers, path / a.peers, a.peers))
        hops = find_samples(s, "ibfabric_path_hops")
        print("cables per leg: mean %.2f over %d legs" % (
            sum(x.value for x in hops) / max(1, len(hops)), len(hops)))
        # Rotations: new peers each slot; the cache (tables, nodes) is warm.
        for n in range(a.rotations):
            before_new = value(s, "ibfabric_path_traces_total", cause="new")
            before = value(s, "ibfabric_path_mads_total")
            s = daemon.wait_for(
                lambda x: value(x, "ibfabric_path_traces_total", cause="new") >= before_new +
                a.peers * 0.5 and traced(x), timeout=a.rotate_every * 3,
                what="the next slot traced")
            new = value(s, "ibfabric_path_traces_total", cause="new") - before_new
            mads = value(s, "ibfabric_path_mads_total") - before
            print("rotation %d: %d new peers traced with %d SMPs (%.1f a new peer), %d blocks "
                  "cached" % (n + 1, new, mads, mads / max(1, new),
                              value(s, "ibfabric_path_cached_tables")))
        # Verification with a quiet SM: SMPs per verify_every.
        before = value(s, "ibfabric_path_mads_total")
        t0 = time.monotonic()
        time.sleep(max(2, a.rotate_every - time.time() % a.rotate_every - 1))  # within the slot
        s = daemon.samples()
        print("steady (no new peers; the blocks in use re-read every 5 s): %.1f SMPs/s over "
              "%.0f s" % (
            (value(s, "ibfabric_path_mads_total") - before) / (time.monotonic() - t0),
            time.monotonic() - t0))
    finally:
        if daemon:
            daemon.stop()
        fabric.close()


if __name__ == "__main__":
    main()
