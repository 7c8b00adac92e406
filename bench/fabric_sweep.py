#!/usr/bin/env python3
"""Fabric sweep benchmark on a simulated two-level fat tree (48 switches, 576 HCAs, 1,632
switch ports; ibsim + opensm under the umad shim). Standard library only.

In one run, on one fabric, alternating every round, it times:

  daemon      `ibfabricd --once --no-collector.ports --no-collector.sysfs --collector.fabric`
              with `mad: {rate_limit: 0}`: the fabric collector's duration (discovery + sweep,
              ibfabric_collector_duration_seconds) and the sweep alone
              (ibfabric_fabric_sweep_duration_seconds, ibfabric_fabric_sweep_mads MADs; right
              after a discovery the sweep reuses discovery's PortInfo, so it is PMA only);
  steady      a running daemon's sweeps between discoveries (topology cached,
              rediscover_every 1000), PortInfo by LID included: the median of its 2nd to 6th
              collections, from its debug log;
  ibqueryerrors  one process (its own discovery + a PortCounters Get per port);
  perfquery   `perfquery -x LID PORT`, one process per switch port, on a random sample of
              --perfquery-sample ports, extrapolated to every switch port;
  client      bench/fabric_mad_client (built by CMake): PortCountersExtended Gets only, from
              one thread, with 8, 16 and 64 in flight, the best of the three counted; run with
              as many MADs as the --once sweep and as the steady sweep sent.

Then the daemon with the default engine config (rate limit 2000 MADs/s). Prints medians,
MADs per second and ratios.

With --sa-rmpp every process on the fabric (opensm, the daemons, the tools) runs with
bench/sa_rmpp (libsa_rmpp.so, built by CMake) preloaded in front of ibsim's shim: RMPP for SA
tables, which the shim does not carry, so that the SA's PortInfoRecord table reaches the daemon
whole, as it does on a host (docs/design.md, "What each sweep asks"). Without it the table is
cut to its first segment and every switch port's PortInfo is asked by SMP.

With --baseline BINARY (another ibfabricd build, e.g. an older commit's), each round also runs
that binary's --once and steady sweep in the same alternation, so that a change is measured
beside what it replaces on the same fabric and machine load. The two builds swap places every
round: the build run first in a round had the faster --once by 1.24-1.42x whichever it was
(docs/benchmarks.md, 2026-11-29), so a fixed order measured the order.

And the floor under `--once`: ibsim serves one MAD at a time on one thread, so no client can
finish before ibsim has spent its CPU time on that client's MADs (read from
/proc/IBSIM/task/*/schedstat around each --once run and each ibqueryerrors run), nor before a
shim process has started: `sminfo` (one MAD) is timed as the smallest such process. The floor is
their sum; ibqueryerrors / floor is the most any client sending --once's MADs could gain.

    bench/fabric_sweep.py [--build build] [--rounds 5] [--perfquery-sample 200]
                          [--baseline OTHER/ibfabricd] [--sa-rmpp]
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

from gen_fattree import fattree  # noqa: E402
from simfabric import SHIM, SimFabric  # noqa: E402


class RmppSimFabric(SimFabric):
    """A SimFabric whose every process (opensm included) has `preload` in front of the shim."""

    def __init__(self, *args, preload, **kwargs):
        super().__init__(*args, **kwargs)
        self.preload = preload

    def env(self, host, shim=True, base=None):
        env = super().env(host, shim, base)
        if shim:
            env["LD_PRELOAD"] = self.preload + " " + env["LD_PRELOAD"]
        return env


def make_fabric(topology, name, build, sa_rmpp, **kwargs):
    """The bench's fabric (kwargs: SimFabric's): with `sa_rmpp`, every process has bench/sa_rmpp
    preloaded."""
    if not sa_rmpp:
        return SimFabric(topology, name=name, **kwargs)
    lib = os.path.join(build, "bench", "libsa_rmpp.so")
    if not os.path.exists(lib):
        sys.exit("missing %s: build first (cmake --build %s)" % (lib, build))
    return RmppSimFabric(topology, name=name, preload=lib, **kwargs)

HOST = "node-002 mlx5_0"
OBSERVER = "node-003 mlx5_0"  # reads HOST's port counters, so its own MADs do not leave HOST


def metric(text, name, **labels):
    want = ",".join('%s="%s"' % kv for kv in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" (\S+)$"
    for line in text.splitlines():
        m = re.match(pattern, line)
        if m:
            return float(m.group(1))
    raise KeyError(name)


def wait_whole_sweep(fabric, binary, env, timeout=120):
    """Returns once `binary --once` (fabric collector only) sweeps every switch port of
    `fabric` without a failure: fabric.wait_ready() sees LID-routed MADs work from HOST, but the
    SM may still be routing the rest of the fabric."""
    deadline = time.monotonic() + timeout
    while True:
        r = subprocess.run([binary, "--once", "--no-collector.ports", "--no-collector.sysfs",
                            "--collector.fabric"], env=env, cwd=fabric.workdir,
                           capture_output=True, text=True, timeout=300)
        try:
            if metric(r.stdout, "ibfabric_fabric_ports_failed") == 0:
                return
        except KeyError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the fabric did not answer a whole sweep within %d s" % timeout)
        time.sleep(2)


def switches(fabric):
    """[(lid, ports)] of every switch, from ibnetdiscover."""
    out = []
    text = fabric.run_tool(["ibnetdiscover"], host=HOST, timeout=60).stdout
    for line in text.splitlines():
        m = re.match(r'Switch\s+(\d+)\s+"S-[0-9a-f]+".*\blid (\d+)', line)
        if m:
            out.append((int(m.group(2)), int(m.group(1))))
    return out


class MadCounter:
    """MADs a tool sent, measured as the growth of PortXmitPkts of HOST's HCA port (ibsim counts
    every packet it forwards), read through the PMA from another node. The reads themselves add
    a constant (one answer leaves HOST per read), taken off as `baseline`; the SM's own
    occasional MADs to HOST are noise of a few packets."""

    def __init__(self, fabric):
        self.f = fabric
        out = fabric.run_tool(["smpquery", "-D", "portinfo", "0", "1"], host=HOST).stdout
        self.lid = int(re.search(r"^Lid:\.*(\d+)", out, re.M).group(1))
        self.baseline = 0
        self.baseline = min(self.measure(lambda: None) for _ in range(3))

    def read(self):
        out = self.f.run_tool(["perfquery", "-x", str(self.lid), "1"], host=OBSERVER).stdout
        return int(re.search(r"^PortXmitPkts:\.*(\d+)", out, re.M).group(1))

    def measure(self, action):
        before = self.read()
        action()
        return self.read() - before - self.baseline


def run_daemon(fabric, binary, config):
    start = time.monotonic()
    r = subprocess.run([binary, "--once", "--config", config, "--no-collector.ports",
                        "--no-collector.sysfs", "--collector.fabric"], env=fabric.env(HOST),
                       cwd=fabric.workdir, capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - start
    if r.returncode != 0:
        raise RuntimeError("ibfabricd failed: " + r.stderr[-2000:])
    t = r.stdout
    return {
        "wall": wall,
        "collector": metric(t, "ibfabric_collector_duration_seconds", collector="fabric"),
        "sweep": metric(t, "ibfabric_fabric_sweep_duration_seconds"),
        "discovery": metric(t, "ibfabric_fabric_discovery_duration_seconds"),
        "sweep_mads": int(metric(t, "ibfabric_fabric_sweep_mads")),
        "ports": int(metric(t, "ibfabric_fabric_ports_swept")),
        "failed": int(metric(t, "ibfabric_fabric_ports_failed")),
    }


# The daemon's debug line at the end of each fabric sweep (collectors/fabric).
# (`stale=` since the memory of last values, keep_unread; optional so older builds still parse)
SWEEP_DONE = re.compile(r"fabric: sweep done ports=\d+ failed=(\d+)(?: stale=\d+)? mads=(\d+) "
                        r"seconds=([\d.]+)")
STEADY_SWEEPS = 5


def median_steady_sweep(d, timeout=120):
    """Median sweep duration and the MADs of running daemon `d`'s collections 2 to
    1 + STEADY_SWEEPS (the first one follows a discovery), read from its debug log: a single
    sweep varies by tens of percent on this machine, and scraping /metrics (tens of thousands
    of series) would take CPU from the sweeps it measures."""
    deadline = time.monotonic() + timeout
    while True:
        time.sleep(0.5)
        sweeps = SWEEP_DONE.findall(d.log())
        if len(sweeps) >= 1 + STEADY_SWEEPS:
            steady = sweeps[1:1 + STEADY_SWEEPS]
            failed = max(int(x[0]) for x in steady)
            if failed:
                print("warning: steady sweep: up to %d ports failed" % failed)
            return statistics.median(float(x[2]) for x in steady), int(steady[-1][1])
        if time.monotonic() > deadline:
            raise RuntimeError("fewer than %d fabric collections:\n%s"
                               % (1 + STEADY_SWEEPS, d.log()[-2000:]))


def run_steady(fabric, config, binary=None):
    """median_steady_sweep() of a daemon with `config` (run with --log.level debug); `binary`:
    another ibfabricd than the build's."""
    with fabric.daemon(["--config", config, "--log.level", "debug"], host=HOST,
                       binary=binary) as d:
        return median_steady_sweep(d)


CLIENT_WINDOWS = (8, 16, 64)


def run_client(fabric, client_bin, targets, count):
    """The minimal client's best time for `count` Gets over the CLIENT_WINDOWS (MADs in
    flight): the simulator answers fastest at no single window on every machine."""
    best = None
    for window in CLIENT_WINDOWS:
        t, r = run_timed(fabric, [client_bin, "--targets", targets, "--count", str(count),
                                  "--in-flight", str(window)])
        m = re.search(r"ok=(\d+).*lost=(\d+) seconds=(\S+)", r.stdout)
        if r.returncode != 0 or not m:
            raise RuntimeError("client failed: %s %s" % (r.stdout, r.stderr[-1000:]))
        if int(m.group(2)):
            print("warning: client lost %s MADs" % m.group(2))
        best = float(m.group(3)) if best is None else min(best, float(m.group(3)))
    return best


def cpu_seconds(pid):
    """CPU seconds of every live thread of process `pid` so far (/proc/PID/task/*/schedstat:
    nanoseconds on a CPU; ibsim has one thread, the daemon several)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass  # the thread ended meanwhile
    return total / 1e9


def with_ibsim_cpu(fabric, action):
    """(action's result, ibsim's CPU seconds while it ran)."""
    before = cpu_seconds(fabric.ibsim.pid)
    result = action()
    return result, cpu_seconds(fabric.ibsim.pid) - before


def run_timed(fabric, args):
    start = time.monotonic()
    r = fabric.run_tool(args, host=HOST, check=False, timeout=300)
    return time.monotonic() - start, r


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--perfquery-sample", type=int, default=200)
    p.add_argument("--default-rate-rounds", type=int, default=2)
    p.add_argument("--baseline", default=None,
                   help="another ibfabricd binary, run beside the build's in every round")
    p.add_argument("--sa-rmpp", action="store_true",
                   help="RMPP for SA tables on the simulator (bench/sa_rmpp) in every process")
    a = p.parse_args()
    daemon_bin = os.path.join(a.build, "daemon", "ibfabricd")
    os.environ["IBFABRICD"] = daemon_bin  # for the test library's Daemon
    client_bin = os.path.join(a.build, "bench", "fabric_mad_client")
    for b in (daemon_bin, client_bin):
        if not os.path.exists(b):
            sys.exit("missing %s: build first (cmake --build %s)" % (b, a.build))

    rng = random.Random(1)
    with make_fabric(fattree(), "bench", a.build, a.sa_rmpp) as f:
        f.wait_ready(hosts=[HOST])
        sw = switches(f)
        ports = [(lid, port) for lid, n in sw for port in range(1, n + 1)]
        targets = os.path.join(f.workdir, "targets")
        with open(targets, "w") as out:
            out.writelines("%d %d\n" % t for t in ports)
        unlimited = os.path.join(f.workdir, "unlimited.yaml")
        with open(unlimited, "w") as out:
            out.write("mad: {rate_limit: 0}\ncollectors:\n  fabric: {rediscover_every: 1}\n")
        default = os.path.join(f.workdir, "default.yaml")
        with open(default, "w") as out:
            out.write("collectors:\n  fabric: {rediscover_every: 1}\n")
        steady = os.path.join(f.workdir, "steady.yaml")
        with open(steady, "w") as out:
            out.write("mad: {rate_limit: 0}\ncollectors:\n  sysfs: {enabled: false}\n"
                      "  ports: {enabled: false}\n"
                      "  fabric: {enabled: true, interval: 500ms, rediscover_every: 1000}\n")
        print("fabric: %d switches, %d switch ports; %d rounds" % (len(sw), len(ports), a.rounds))

        res = {k: [] for k in ("d_wall", "d_coll", "d_sweep", "d_disc", "iqe", "pq", "cl",
                               "st_sweep", "cl_st", "d_ibsim", "iqe_ibsim", "sminfo",
                               "b_wall", "b_coll", "b_sweep", "b_st_sweep")}
        base_mads = base_steady_mads = None
        steady_mads = None
        mads = None
        # How many MADs each contender sends, measured once (outside the timed rounds).
        counter = MadCounter(f)
        sent = {}
        sent["daemon"] = counter.measure(lambda: run_daemon(f, daemon_bin, unlimited))
        sent["ibqueryerrors"] = counter.measure(lambda: run_timed(f, ["ibqueryerrors"]))
        sent["perfquery"] = counter.measure(
            lambda: f.run_tool(["perfquery", "-x", str(ports[0][0]), str(ports[0][1])], host=HOST))
        print("MADs leaving %s per run (PortXmitPkts delta, baseline %d): daemon %d, "
              "ibqueryerrors %d, one perfquery -x %d" % (HOST, counter.baseline, sent["daemon"],
                                                         sent["ibqueryerrors"], sent["perfquery"]))
        for rnd in range(a.rounds):
            baseline_first = a.baseline and rnd % 2 == 1
            if baseline_first:
                b = run_daemon(f, a.baseline, unlimited)
            d, ibsim_cpu = with_ibsim_cpu(f, lambda: run_daemon(f, daemon_bin, unlimited))
            if a.baseline and not baseline_first:
                b = run_daemon(f, a.baseline, unlimited)
            res["d_ibsim"].append(ibsim_cpu)
            if d["failed"] or d["ports"] != len(ports):
                print("warning: daemon swept %d ports, %d failed" % (d["ports"], d["failed"]))
            mads = d["sweep_mads"]
            res["d_wall"].append(d["wall"])
            res["d_coll"].append(d["collector"])
            res["d_sweep"].append(d["sweep"])
            res["d_disc"].append(d["discovery"])

            (t, r), ibsim_cpu = with_ibsim_cpu(f, lambda: run_timed(f, ["ibqueryerrors"]))
            if "ports checked" not in r.stdout:
                # Seen twice on 2026-11-29 (rc and output not kept), never in 40 runs alone.
                print("ibqueryerrors failed (rc %d), run again: %s" % (
                    r.returncode, (r.stdout + r.stderr)[-500:]))
                (t, r), ibsim_cpu = with_ibsim_cpu(f, lambda: run_timed(f, ["ibqueryerrors"]))
            if "ports checked" not in r.stdout:
                raise RuntimeError("ibqueryerrors failed: " + r.stderr[-1000:])
            res["iqe"].append(t)
            res["iqe_ibsim"].append(ibsim_cpu)
            t, r = run_timed(f, ["sminfo"])
            if r.returncode != 0:
                raise RuntimeError("sminfo failed: " + r.stderr[-1000:])
            res["sminfo"].append(t)

            sample = rng.sample(ports, min(a.perfquery_sample, len(ports)))
            start = time.monotonic()
            for lid, port in sample:
                f.run_tool(["perfquery", "-x", str(lid), str(port)], host=HOST)
            res["pq"].append((time.monotonic() - start) / len(sample) * len(ports))

            res["cl"].append(run_client(f, client_bin, targets, mads))
            if baseline_first:
                b_st, base_steady_mads = run_steady(f, steady, a.baseline)
            st_sweep, steady_mads = run_steady(f, steady)
            if a.baseline and not baseline_first:
                b_st, base_steady_mads = run_steady(f, steady, a.baseline)
            res["st_sweep"].append(st_sweep)
            res["cl_st"].append(run_client(f, client_bin, targets, steady_mads))
            if a.baseline:
                base_mads = b["sweep_mads"]
                res["b_wall"].append(b["wall"])
                res["b_coll"].append(b["collector"])
                res["b_sweep"].append(b["sweep"])
                res["b_st_sweep"].append(b_st)
                print("  baseline %s: --once %.3fs (sweep %.3fs, process %.3fs), steady sweep "
                      "%.3fs" % (a.baseline, b["collector"], b["sweep"], b["wall"], b_st))
            print("round %d: daemon %.3fs (sweep %.3fs, discovery %.3fs, process %.3fs), "
                  "steady sweep %.3fs, ibqueryerrors %.3fs, perfquery loop %.1fs (extrapolated), "
                  "client %.3fs / %.3fs"
                  % (rnd + 1, d["collector"], d["sweep"], d["discovery"], d["wall"],
                     st_sweep, res["iqe"][-1], res["pq"][-1], res["cl"][-1], res["cl_st"][-1]))

        dflt = [run_daemon(f, daemon_bin, default) for _ in range(a.default_rate_rounds)]
        steady_default = os.path.join(f.workdir, "steady-default.yaml")
        with open(steady_default, "w") as out:
            out.write("collectors:\n  sysfs: {enabled: false}\n  ports: {enabled: false}\n"
                      "  fabric: {enabled: true, interval: 1s, rediscover_every: 1000}\n")
        dflt_steady = [run_steady(f, steady_default) for _ in range(a.default_rate_rounds)]

    med = {k: statistics.median(v) for k, v in res.items() if v}
    print()
    print("medians over %d rounds (%d switch ports; --once sweep %d MADs, steady sweep %d MADs):"
          % (a.rounds, len(ports), mads, steady_mads))
    print("  daemon, discovery + sweep (collector duration): %.3fs" % med["d_coll"])
    print("    discovery %.3fs, sweep %.3fs = %.0f MADs/s; whole process %.3fs" % (
        med["d_disc"], med["d_sweep"], mads / med["d_sweep"], med["d_wall"]))
    print("    all MADs of one --once run (measured at the port): %d = %.0f MADs/s over the "
          "collector duration" % (sent["daemon"], sent["daemon"] / med["d_coll"]))
    print("  daemon steady-state sweep (topology cached):   %.3fs = %.0f MADs/s" % (
        med["st_sweep"], steady_mads / med["st_sweep"]))
    print("  ibqueryerrors (process):                        %.3fs, %d MADs = %.0f MADs/s" % (
        med["iqe"], sent["ibqueryerrors"], sent["ibqueryerrors"] / med["iqe"]))
    print("  perfquery -x loop, %d-port sample extrapolated:  %.2fs" % (
        a.perfquery_sample, med["pq"]))
    print("  minimal client, %d PortCountersExtended Gets:  %.3fs = %.0f MADs/s" % (
        mads, med["cl"], mads / med["cl"]))
    print("  minimal client, %d PortCountersExtended Gets:  %.3fs = %.0f MADs/s" % (
        steady_mads, med["cl_st"], steady_mads / med["cl_st"]))
    print("ratios:")
    print("  ibqueryerrors / daemon (discovery + sweep):  %.2fx" % (med["iqe"] / med["d_coll"]))
    print("  ibqueryerrors / daemon (whole process):      %.2fx" % (med["iqe"] / med["d_wall"]))
    print("  ibqueryerrors / daemon steady sweep:         %.2fx  (discovery only every "
          "rediscover_every-th sweep)" % (med["iqe"] / med["st_sweep"]))
    print("  perfquery loop / daemon (discovery + sweep): %.1fx" % (med["pq"] / med["d_coll"]))
    print("  daemon --once sweep / minimal client (same MADs): %.2fx" % (med["d_sweep"] / med["cl"]))
    print("  daemon steady sweep / minimal client (same MADs): %.2fx" % (
        med["st_sweep"] / med["cl_st"]))
    if a.baseline:
        print("baseline %s, same rounds (--once sweep %d MADs, steady sweep %d MADs):" % (
            a.baseline, base_mads, base_steady_mads))
        print("  --once: discovery + sweep %.3fs, sweep %.3fs, process %.3fs; steady sweep %.3fs"
              % (med["b_coll"], med["b_sweep"], med["b_wall"], med["b_st_sweep"]))
        print("  ibqueryerrors / baseline steady sweep:       %.2fx" % (
            med["iqe"] / med["b_st_sweep"]))
        print("  ibqueryerrors / baseline --once process:     %.2fx" % (
            med["iqe"] / med["b_wall"]))
        print("  baseline / this build: steady sweep %.2fx, --once process %.2fx, --once "
              "collector %.2fx" % (med["b_st_sweep"] / med["st_sweep"],
                                   med["b_wall"] / med["d_wall"], med["b_coll"] / med["d_coll"]))
    floor = med["d_ibsim"] + med["sminfo"]
    print("floor under --once (ibsim is one thread):")
    print("  ibsim CPU per --once run %.3fs, per ibqueryerrors run %.3fs; sminfo process %.3fs"
          % (med["d_ibsim"], med["iqe_ibsim"], med["sminfo"]))
    print("  --once cannot take less than %.3fs: ibqueryerrors / floor %.2fx (measured "
          "ibqueryerrors / --once process %.2fx)" % (floor, med["iqe"] / floor,
                                                     med["iqe"] / med["d_wall"]))
    if not dflt:  # --default-rate-rounds 0
        return 0
    sweep_default = statistics.median(d["sweep"] for d in dflt)
    coll_default = statistics.median(d["collector"] for d in dflt)
    st_default = statistics.median(x[0] for x in dflt_steady)
    print("default rate limit (2000 MADs/s), %d runs each:" % len(dflt))
    print("  --once: discovery + sweep %.3fs, its sweep %.3fs (%d MADs)" % (
        coll_default, sweep_default, dflt[0]["sweep_mads"]))
    print("  steady sweep %.3fs (%d MADs) = %.3fs per 1,000 switch ports" % (
        st_default, dflt_steady[0][1], st_default / len(ports) * 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
