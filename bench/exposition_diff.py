#!/usr/bin/env python3
"""The same metrics from two ibfabricd builds on the same simulated fabric: what a change that
should not change behaviour (a refactor) is held to. Standard library only.

On the demo's fabric (config/demo/fabric.topo, its node-name-map; ibsim + opensm under the umad
shim), each binary in turn runs on the same host for --seconds (sysfs on the ConnectX-7 fixture
tree, ports, sm, fabric with error details, probe and paths probing two other hosts over MAD, all
every second) and is scraped once at the end, --rounds times, alternating. Each exposition is reduced to its series
(name and labels) and their values, then compared:

  series    every series of one build must be in the other's (none added, none gone);
  values    equal, but for what a run cannot repeat: times and durations (`*_seconds` gauges
            and histograms, `_timestamp_`, process_* metrics), RTTs and what counts them, MAD
            and SMP counts that depend on timing (retries, in flight), and the fabric's traffic
            counters, which the daemons' own MADs move between two runs.

    bench/exposition_diff.py BEFORE/ibfabricd AFTER/ibfabricd [--rounds 2] [--added REGEX]

--added names metric families the later build adds on purpose (matched whole, as a regular
expression): their series may be only in AFTER, and are counted apart.

--sa-rmpp preloads bench/sa_rmpp (libsa_rmpp.so of --build) in every process of the fabric, so
that the SA's tables arrive whole (the shim carries no RMPP; bench/fabric_sweep.py --sa-rmpp):
a build that reads PortInfo from the SA's PortInfoRecord table is then compared with its reading
by SMP.

--vl-transmit-wait turns on the fabric's per-VL waiting (`vl_transmit_wait: true`), so that its
series (a label set per port and VL) are compared too.

Prints the series only one side has and the values that differ beyond what is ignored; exits 1
when there is any, 0 when the two builds export the same.
"""

import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))

sys.path.insert(0, HERE)

from fabric_sweep import make_fabric  # noqa: E402

HOST = "gpu-node-01 mlx5_0"
PEERS = ("gpu-node-02 mlx5_0", "gpu-node-03 mlx5_0")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')
# Values a run cannot repeat (names matched whole, as regular expressions).
UNSTABLE = [
    r".*_seconds(_bucket|_sum|_count)?", r".*_timestamp_.*", r"process_.*",
    r"ibfabric_probe_.*", r"ibfabric_mad_.*", r"ibfabric_path_(mads_total|run_mads|age_seconds)",
    r"ibfabric_collector_(duration_seconds|last_success_timestamp_seconds)",
    r"ibfabric_event_loop_.*", r"ibfabric_http_.*",
    # Traffic counters move with the daemons' own MADs between two runs.
    r"ibfabric_(ports|fabric_port)_(transmit|receive)_(bytes|packets)_total",
    r"ibfabric_(ports|fabric_port)_(unicast|multicast)_(transmit|receive)_packets_total",
    r"ibfabric_fabric_(sweep|discovery)_.*", r"ibfabric_sm_.*_activity",
]


def series(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if m:
            out[(m.group(1), m.group(2) or "")] = m.group(3)
    return out


def unstable(name):
    return any(re.fullmatch(p, name) for p in UNSTABLE)


def config(workdir, vl_transmit_wait=False):
    path = os.path.join(workdir, "exposition_diff.yaml")
    targets = ", ".join('{name: "%s"}' % p for p in PEERS)
    with open(path, "w") as f:
        f.write("collectors:\n"
                "  sysfs: {interval: 1s}\n  ports: {interval: 1s}\n  sm: {interval: 1s}\n"
                "  sriov: {enabled: false}\n"
                "  fabric: {enabled: true, interval: 1s, error_details: true%s}\n"
                "  probe: {enabled: true, interval: 1s, udp_listen: \"\", mad_responder: false, "
                "probe_interval: 100ms, targets: [%s]}\n"
                "  paths: {enabled: true, interval: 1s}\n"
                % (", vl_transmit_wait: true" if vl_transmit_wait else "", targets))
    return path


def scrape_after(fabric, binary, conf, seconds):
    """The exposition of `binary` run for `seconds`, and whether it was still running then."""
    import urllib.request
    from ibfabric_testlib import free_port
    port = free_port()
    p = subprocess.Popen([binary, "--config", conf, "--web.listen-address", "127.0.0.1:%d" % port,
                          "--node-name-map",
                          os.path.join(ROOT, "config", "demo", "ib-node-name-map"), "--sysfs-root",
                          os.path.join(ROOT, "tests", "fixtures", "sysfs", "cx7-ndr")],
                         env=fabric.env(HOST), cwd=fabric.workdir, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        time.sleep(seconds)
        alive = p.poll() is None
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
            return series(r.read().decode()), alive
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=2)
    # Half an interval past the 15th: scraped at 15 s, the build run second in a round was
    # sometimes a collection behind (`ibfabric_collector_runs_total` 15 against 16).
    parser.add_argument("--seconds", type=float, default=15.5)
    parser.add_argument("--added", default=None,
                        help="families AFTER adds on purpose (a regular expression)")
    parser.add_argument("--vl-transmit-wait", action="store_true",
                        help="the fabric collector with vl_transmit_wait: true")
    parser.add_argument("--sa-rmpp", action="store_true",
                        help="RMPP for SA tables on the simulator (bench/sa_rmpp)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="where libsa_rmpp.so is (--sa-rmpp)")
    args = parser.parse_args()
    added = 0
    with open(os.path.join(ROOT, "config", "demo", "fabric.topo")) as f:
        topology = f.read()
    problems = []
    with make_fabric(topology, "expodiff", args.build, args.sa_rmpp, text=True,
                     sm_host="sm-node mlx5_0") as fabric:
        conf = config(fabric.workdir, args.vl_transmit_wait)
        for round_ in range(args.rounds):
            runs = {}
            for label, binary in (("before", args.before), ("after", args.after)):
                runs[label], alive = scrape_after(fabric, binary, conf, args.seconds)
                print("round %d %s: %d series%s" % (round_ + 1, label, len(runs[label]),
                                                    "" if alive else " (the daemon had exited)"))
            before, after = runs["before"], runs["after"]
            for key in sorted(set(before) - set(after)):
                problems.append("round %d: only before: %s%s" % (round_ + 1, *key))
            for key in sorted(set(after) - set(before)):
                if args.added and re.fullmatch(args.added, key[0]):
                    added += 1
                    continue
                problems.append("round %d: only after: %s%s" % (round_ + 1, *key))
            for key in sorted(set(before) & set(after)):
                if not unstable(key[0]) and before[key] != after[key]:
                    problems.append("round %d: %s%s: %s before, %s after"
                                    % (round_ + 1, key[0], key[1], before[key], after[key]))
    for p in problems:
        print(p)
    if args.added:
        print("%d series of families added on purpose (%s), over all rounds" % (added, args.added))
    print("%d difference(s)" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
