#!/usr/bin/env python3
"""Fabric sweep against real-switch latency: ibqueryerrors, a perfquery loop and ibfabricd on
the 48-switch / 576-HCA fat tree (1,632 switch ports), each with every MAD answer held back by
the latency model of bench/switch_latency/switch_latency.c (preloaded in front of ibsim's shim:
each node's management agent serves one MAD at a time, S microseconds each). Standard library
only.

First it checks the model itself with bench/fabric_mad_client (PortCountersExtended Gets):
one switch with 1 in flight should take about N x (S + the simulator's round trip), one switch
with 8 in flight about N x S (its CPU is serial), 8 switches with 8 in flight about N x S / 8.
The library's own lateness (how long after its due time each answer was handed out) is printed.

Then, for every round and every latency in --latencies-us (alternating inside each round):

  ibqueryerrors  one process: its own discovery, then a PortCounters Get per port;
  perfquery      `perfquery -x LID PORT`, one process per port, on a random sample of
                 --perfquery-sample switch ports, extrapolated to every switch port;
  once           `ibfabricd --once` with only the fabric collector, `mad: {rate_limit: 0}`:
                 whole process (wall), and discovery + sweep (collector duration);
  steady         a running daemon's sweeps between discoveries (topology cached): the median
                 of its 2nd to 6th collections, from its debug log; rate
                 limit lifted, default in-flight caps.

And once per latency, the steady sweep with the default engine config (rate limit 2,000
MADs/s). Prints medians and ratios per latency.

    bench/fabric_latency.py [--build build] [--rounds 3] [--latencies-us 0,20,100,500]
"""

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, HERE)

import ibfabric_testlib  # noqa: E402
from fabric_sweep import (HOST, MadCounter, make_fabric, median_steady_sweep,  # noqa: E402
                         metric, switches, wait_whole_sweep)
from gen_fattree import fattree  # noqa: E402
from simfabric import SHIM  # noqa: E402


class Runner:
    def __init__(self, fabric, lib, rmpp=None):
        self.f = fabric
        self.lib = lib
        self.rmpp = rmpp

    def env(self, us):
        env = self.f.env(HOST)
        env["LD_PRELOAD"] = self.lib + " " + SHIM  # the model first: it wraps the shim
        if self.rmpp:  # RMPP outside the model: it reassembles the segments the model released
            env["LD_PRELOAD"] = self.rmpp + " " + env["LD_PRELOAD"]
        env["IBFABRIC_SWITCH_LATENCY_US"] = str(us)
        env["IBFABRIC_SWITCH_LATENCY_REPORT"] = "1"  # its own lateness, on stderr at exit
        return env

    def run(self, args, us, timeout=600):
        start = time.monotonic()
        r = subprocess.run(args, env=self.env(us), cwd=self.f.workdir, capture_output=True,
                           text=True, timeout=timeout)
        return time.monotonic() - start, r


def lateness(stderr):
    """(mean, max) microseconds the model handed answers out after their due time, and how many
    answers it handed out."""
    m = re.search(r"switch_latency: answers=(\d+) held=(\d+) late_mean_us=(\S+) "
                  r"late_max_us=(\S+)", stderr)
    if not m:
        return float("nan"), float("nan"), 0
    return float(m.group(3)), float(m.group(4)), int(m.group(1))


def check_model(runner, client, lids, us, workdir, count=200):
    """The model's own figures: serial, serial per switch, parallel over 8 switches."""
    one = os.path.join(workdir, "one-switch")
    with open(one, "w") as out:
        out.write("%d 1\n" % lids[0])
    eight = os.path.join(workdir, "eight-switches")
    with open(eight, "w") as out:
        out.writelines("%d 1\n" % lid for lid in lids[:8])
    rows = []
    for name, targets, window, expect in (
            ("1 switch, 1 in flight", one, 1, None),
            ("1 switch, 8 in flight", one, 8, count * us / 1e6),
            ("8 switches, 8 in flight", eight, 8, count * us / 8 / 1e6)):
        env = runner.env(us)
        r = subprocess.run([client, "--targets", targets, "--count", str(count), "--in-flight",
                            str(window)], env=env, cwd=runner.f.workdir, capture_output=True,
                           text=True, timeout=120)
        m = re.search(r"ok=(\d+).*seconds=(\S+)", r.stdout)
        if r.returncode != 0 or not m or int(m.group(1)) != count:
            raise RuntimeError("client failed: %s %s" % (r.stdout, r.stderr[-500:]))
        rows.append((name, float(m.group(2)), expect, lateness(r.stderr)))
    return rows


def run_once(runner, daemon, config, us):
    wall, r = runner.run([daemon, "--once", "--config", config, "--no-collector.ports",
                          "--no-collector.sysfs", "--collector.fabric"], us)
    if r.returncode != 0:
        raise RuntimeError("ibfabricd --once failed (exit %d): %s" % (r.returncode,
                                                                     r.stderr[-2000:]))
    t = r.stdout
    if metric(t, "ibfabric_fabric_ports_failed"):
        print("warning: --once: %d ports failed" % metric(t, "ibfabric_fabric_ports_failed"))
    return wall, metric(t, "ibfabric_collector_duration_seconds", collector="fabric"), metric(
        t, "ibfabric_fabric_discovery_duration_seconds"), lateness(r.stderr)[0]


def run_steady(runner, config, us, binary=None):
    """median_steady_sweep() of a daemon with `config` under the model at `us` (`binary`: another
    ibfabricd than the build's)."""
    with ibfabric_testlib.Daemon(["--config", config, "--log.level", "debug"],
                                 env=runner.env(us), cwd=runner.f.workdir, binary=binary) as d:
        return median_steady_sweep(d)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--latencies-us", default="0,20,100,500")
    p.add_argument("--perfquery-sample", type=int, default=30)
    p.add_argument("--no-default-rate", action="store_true",
                   help="skip the steady sweep with the default rate limit")
    p.add_argument("--sa-rmpp", action="store_true",
                   help="RMPP for SA tables on the simulator (bench/sa_rmpp) in every process, "
                        "as bench/fabric_sweep.py --sa-rmpp")
    p.add_argument("--no-caps", action="store_true",
                   help="skip the steady sweep with 4x the in-flight caps")
    p.add_argument("--baseline", default=None,
                   help="another ibfabricd binary whose --once and steady sweep run beside the "
                        "build's in every round")
    a = p.parse_args()
    latencies = [float(x) for x in a.latencies_us.split(",")]
    daemon = os.path.join(a.build, "daemon", "ibfabricd")
    os.environ["IBFABRICD"] = daemon
    client = os.path.join(a.build, "bench", "fabric_mad_client")
    lib = os.path.join(a.build, "bench", "libswitch_latency.so")
    for b in (daemon, client, lib):
        if not os.path.exists(b):
            sys.exit("missing %s: build first (cmake --build %s)" % (b, a.build))

    rng = random.Random(1)
    with make_fabric(fattree(), "latency", a.build, a.sa_rmpp) as f:
        f.wait_ready(hosts=[HOST])
        runner = Runner(f, lib, f.preload if a.sa_rmpp else None)
        wait_whole_sweep(f, daemon, runner.env(0))
        sw = switches(f)
        ports = [(lid, n) for lid, count in sw for n in range(1, count + 1)]
        configs = {}
        for name, text in (
                ("once", "mad: {rate_limit: 0}\ncollectors:\n  fabric: {rediscover_every: 1}\n"),
                ("steady", "mad: {rate_limit: 0}\ncollectors:\n  sysfs: {enabled: false}\n"
                 "  ports: {enabled: false}\n"
                 "  fabric: {enabled: true, interval: 500ms, rediscover_every: 1000}\n"),
                ("steady-caps", "mad: {rate_limit: 0, max_in_flight: 256, "
                 "max_in_flight_per_destination: 16}\ncollectors:\n  sysfs: {enabled: false}\n"
                 "  ports: {enabled: false}\n"
                 "  fabric: {enabled: true, interval: 500ms, rediscover_every: 1000}\n"),
                ("steady-default", "collectors:\n  sysfs: {enabled: false}\n"
                 "  ports: {enabled: false}\n"
                 "  fabric: {enabled: true, interval: 1s, rediscover_every: 1000}\n")):
            configs[name] = os.path.join(f.workdir, name + ".yaml")
            with open(configs[name], "w") as out:
                out.write(text)
        print("fabric: %d switches, %d switch ports; latencies %s us; %d rounds"
              % (len(sw), len(ports), a.latencies_us, a.rounds))

        # MADs per run, measured at the port (no latency: the count does not depend on it).
        counter = MadCounter(f)
        sent = {
            "once": counter.measure(lambda: run_once(runner, daemon, configs["once"], 0)),
            "ibqueryerrors": counter.measure(lambda: runner.run(["ibqueryerrors"], 0)),
            "ibnetdiscover": counter.measure(lambda: runner.run(["ibnetdiscover"], 0)),
            "perfquery": counter.measure(lambda: runner.run(
                ["perfquery", "-x", str(ports[0][0]), str(ports[0][1])], 0)),
        }
        print("MADs per run: ibfabricd --once %d, ibqueryerrors %d, ibnetdiscover %d, one "
              "perfquery -x %d" % (sent["once"], sent["ibqueryerrors"], sent["ibnetdiscover"],
                                   sent["perfquery"]))

        print("\nthe model, %d PortCountersExtended Gets by fabric_mad_client:" % 200)
        for us in latencies:
            if not us:
                continue
            for name, seconds, expect, (late_mean, late_max, _) in check_model(
                    runner, client, [lid for lid, _ in sw], us, f.workdir):
                print("  S=%4.0f us  %-24s %.3f s (%.0f us per MAD)%s; answers late by %.0f us "
                      "on average, %.0f us at most" % (
                          us, name, seconds, seconds / 200 * 1e6,
                          "" if expect is None else ", model %.3f s" % expect, late_mean,
                          late_max))

        res = {us: {k: [] for k in ("iqe", "iqe_net", "pq", "once_wall", "once_coll",
                                    "once_disc", "steady", "steady_caps", "iqe_late",
                                    "once_late", "b_once_wall", "b_steady")}
               for us in latencies}
        steady_mads = None
        for rnd in range(a.rounds):
            for us in latencies:
                r = res[us]
                t, out = runner.run(["ibqueryerrors"], us)
                if "ports checked" not in out.stdout:
                    # As in fabric_sweep.py: rare, and not seen in 40 runs alone.
                    print("ibqueryerrors failed (rc %d), run again: %s" % (
                        out.returncode, (out.stdout + out.stderr)[-500:]))
                    t, out = runner.run(["ibqueryerrors"], us)
                if "ports checked" not in out.stdout:
                    raise RuntimeError("ibqueryerrors failed: " + out.stderr[-1000:])
                r["iqe"].append(t)
                late_mean, _, answers = lateness(out.stderr)
                r["iqe_late"].append(late_mean)
                # ibqueryerrors waits for every answer in turn, so the model's lateness (its own
                # wake-up delay on a loaded machine) adds to its time answer by answer.
                r["iqe_net"].append(t - answers * late_mean / 1e6)
                sample = rng.sample(ports, min(a.perfquery_sample, len(ports)))
                start = time.monotonic()
                for lid, port in sample:
                    t_pq, out = runner.run(["perfquery", "-x", str(lid), str(port)], us)
                    if out.returncode != 0:
                        raise RuntimeError("perfquery failed: " + out.stderr[-500:])
                r["pq"].append((time.monotonic() - start) / len(sample) * len(ports))
                # The two builds swap places every round, as in fabric_sweep.py (a fixed order
                # measured the order).
                baseline_first = a.baseline and rnd % 2 == 1

                def baseline_runs():
                    b_wall, _, _, _ = run_once(runner, a.baseline, configs["once"], us)
                    r["b_once_wall"].append(b_wall)
                    r["b_steady"].append(run_steady(runner, configs["steady"], us,
                                                    a.baseline)[0])
                    print("  baseline %s, S=%g us: --once process %.3fs, steady sweep %.3fs" % (
                        a.baseline, us, b_wall, r["b_steady"][-1]))

                if baseline_first:
                    baseline_runs()
                wall, coll, disc, late = run_once(runner, daemon, configs["once"], us)
                r["once_late"].append(late)
                r["once_wall"].append(wall)
                r["once_coll"].append(coll)
                r["once_disc"].append(disc)
                st, steady_mads = run_steady(runner, configs["steady"], us)
                r["steady"].append(st)
                if not a.no_caps:
                    r["steady_caps"].append(run_steady(runner, configs["steady-caps"], us)[0])
                else:
                    r["steady_caps"].append(float("nan"))
                if a.baseline and not baseline_first:
                    baseline_runs()
                print("round %d, S=%g us: ibqueryerrors %.3fs (%.3fs without the model's "
                      "lateness), perfquery loop %.1fs, --once %.3fs (collector %.3fs, discovery "
                      "%.3fs), steady sweep %.3fs (caps x4: %.3fs)" % (
                          rnd + 1, us, r["iqe"][-1], r["iqe_net"][-1], r["pq"][-1], wall, coll,
                          disc, st, r["steady_caps"][-1]))

        default_rate = {}
        if not a.no_default_rate:
            for us in latencies:
                default_rate[us] = run_steady(runner, configs["steady-default"], us)

    print("\nmedians over %d rounds; %d switch ports; steady sweep %d MADs:" % (
        a.rounds, len(ports), steady_mads))
    print("| S per MAD | ibqueryerrors (without lateness) | perfquery loop | --once process | "
          "--once discovery + sweep | steady sweep | steady, caps x4 | ibqueryerrors / steady "
          "(without lateness) | ibqueryerrors / --once process | steady, default rate limit | "
          "answers late, ibqueryerrors / --once |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for us in latencies:
        m = {k: statistics.median(v) for k, v in res[us].items()}
        dr = default_rate.get(us)
        print("| %g us | %.3f s (%.3f s) | %.1f s | %.3f s | %.3f s | %.3f s | %.3f s | %.1fx "
              "(%.1fx) | %.2fx | %s | %.0f / %.0f us |" % (
                  us, m["iqe"], m["iqe_net"], m["pq"], m["once_wall"], m["once_coll"],
                  m["steady"], m["steady_caps"], m["iqe"] / m["steady"],
                  m["iqe_net"] / m["steady"], m["iqe"] / m["once_wall"],
                  "%.2f s (%.0f MADs/s)" % (dr[0], dr[1] / dr[0]) if dr else "-",
                  m["iqe_late"], m["once_late"]))
    if a.baseline:
        print("baseline %s, same rounds:" % a.baseline)
        print("| S per MAD | baseline --once process | baseline steady sweep | ibqueryerrors / "
              "baseline steady (without lateness) | ibqueryerrors / baseline --once | baseline / "
              "this build, steady |")
        print("|---|---|---|---|---|---|")
        for us in latencies:
            m = {k: statistics.median(v) for k, v in res[us].items() if v}
            print("| %g us | %.3f s | %.3f s | %.1fx (%.1fx) | %.2fx | %.2fx |" % (
                us, m["b_once_wall"], m["b_steady"], m["iqe"] / m["b_steady"],
                m["iqe_net"] / m["b_steady"], m["iqe"] / m["b_once_wall"],
                m["b_steady"] / m["steady"]))
    print("lateness: how long after its due time the model handed an answer out (this "
          "machine's wake-up delay). ibqueryerrors waits for each answer in turn, so its "
          "lateness adds up; the daemon's answers overlap, its figures are upper bounds.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
