#!/usr/bin/env python3
"""CPU per steady-state fabric sweep, for two or more ibfabricd builds side by side. Standard
library only.

On the 48-switch / 576-HCA fat tree (1,632 switch ports; ibsim + opensm under the umad shim),
each binary in turn runs the fabric collector alone (rate limit lifted, a sweep every 300 ms,
no rediscovery) for --seconds, --rounds times, alternating. Per sweep it reports:

  wall      the median sweep duration (the daemon's debug log, "sweep done ... seconds=");
  daemon    CPU of every thread of the daemon (the loop, the MAD receiver, the shim's reader),
            from /proc/PID/task/*/schedstat, snapshot building included;
  ibsim     CPU of the simulator (it serves one MAD at a time, on one thread);
  switches  voluntary + involuntary context switches of the daemon's threads.

Per binary it also prints the MADs of its sweep and its daemon CPU per MAD. With --client
(bench/fabric_mad_client, built by CMake) it runs the minimal client each round too, the same
number of PortCountersExtended Gets as the first binary's sweep, 16 in flight, and reads its CPU
(user + system, from wait4) per MAD: the floor a MAD costs a process under the shim. With
--sa-rmpp every process has bench/sa_rmpp preloaded (bench/fabric_sweep.py --sa-rmpp).

Use it to compare an engine change with the build before it:

    git worktree add /tmp/before HEAD~1 && cmake -S /tmp/before -B /tmp/before/build -G Ninja \\
        -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/before/build
    bench/sweep_cpu.py /tmp/before/build/daemon/ibfabricd build/daemon/ibfabricd
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, HERE)

from fabric_sweep import (HOST, SWEEP_DONE, cpu_seconds, make_fabric, switches,  # noqa: E402
                         wait_whole_sweep)
from gen_fattree import fattree  # noqa: E402


def client_cpu(fabric, client, targets, count):
    """CPU seconds (user + system) of one fabric_mad_client run of `count` Gets, 16 in flight."""
    p = subprocess.Popen([client, "--targets", targets, "--count", str(count), "--in-flight", "16"],
                         env=fabric.env(HOST), cwd=fabric.workdir, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    out = p.stdout.read().decode()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = status
    if "ok=%d" % count not in out:
        raise RuntimeError("client: " + out)
    return usage.ru_utime + usage.ru_stime


def context_switches(pid):
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def run(fabric, binary, config, seconds):
    log = os.path.join(fabric.workdir, "sweep_cpu.log")
    with open(log, "w") as err:
        p = subprocess.Popen([binary, "--config", config, "--web.listen-address", "127.0.0.1:0",
                              "--log.level", "debug"], env=fabric.env(HOST), cwd=fabric.workdir,
                             stdout=subprocess.DEVNULL, stderr=err)
    try:
        # Past start, discovery and the first sweep (which follows the discovery).
        deadline = time.monotonic() + 60
        while len(SWEEP_DONE.findall(open(log).read())) < 2:
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("%s: no steady sweep:\n%s" % (binary, open(log).read()[-2000:]))
            time.sleep(0.1)
        ibsim0, cpu0, cs0 = (cpu_seconds(fabric.ibsim.pid), cpu_seconds(p.pid),
                             context_switches(p.pid))
        n0 = len(SWEEP_DONE.findall(open(log).read()))
        time.sleep(seconds)
        sweeps = SWEEP_DONE.findall(open(log).read())
        ibsim1, cpu1, cs1 = (cpu_seconds(fabric.ibsim.pid), cpu_seconds(p.pid),
                             context_switches(p.pid))
    finally:
        p.terminate()
        p.wait(timeout=30)
    n = len(sweeps) - n0
    if n < 1:
        raise RuntimeError("%s: no sweep in %.0f s" % (binary, seconds))
    if any(int(x[0]) for x in sweeps[n0:]):
        print("warning: %s: ports failed in a sweep" % binary)
    return {"wall": statistics.median(float(x[2]) for x in sweeps[n0:]),
            "daemon": (cpu1 - cpu0) / n, "ibsim": (ibsim1 - ibsim0) / n,
            "switches": (cs1 - cs0) / n, "mads": int(sweeps[-1][1]), "sweeps": n}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("binaries", nargs="+")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=6)
    p.add_argument("--client", default=None, help="bench/fabric_mad_client, run each round")
    p.add_argument("--sa-rmpp", action="store_true",
                   help="RMPP for SA tables on the simulator (bench/sa_rmpp) in every process")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="for --sa-rmpp")
    a = p.parse_args()
    if a.client:
        a.client = os.path.abspath(a.client)  # it runs in the fabric's scratch directory
    with make_fabric(fattree(), "sweepcpu", a.build, a.sa_rmpp) as f:
        f.wait_ready(hosts=[HOST])
        config = os.path.join(f.workdir, "steady.yaml")
        with open(config, "w") as out:
            out.write("mad: {rate_limit: 0}\ncollectors:\n  sysfs: {enabled: false}\n"
                      "  ports: {enabled: false}\n"
                      "  fabric: {enabled: true, interval: 300ms, rediscover_every: 1000000}\n")
        wait_whole_sweep(f, a.binaries[0], f.env(HOST))
        res = {b: [] for b in a.binaries}
        client = []
        targets = os.path.join(f.workdir, "targets")
        if a.client:
            with open(targets, "w") as out:
                out.writelines("%d %d\n" % (lid, port) for lid, n in switches(f)
                               for port in range(1, n + 1))
        for rnd in range(a.rounds):
            for b in a.binaries:
                res[b].append(run(f, b, config, a.seconds))
                x = res[b][-1]
                print("round %d %s: %d sweeps, wall %.4f s, daemon %.4f s, ibsim %.4f s, "
                      "%.0f context switches per sweep" % (rnd + 1, b, x["sweeps"], x["wall"],
                                                           x["daemon"], x["ibsim"],
                                                           x["switches"]))
            if a.client:
                count = res[a.binaries[0]][-1]["mads"]
                client.append(client_cpu(f, a.client, targets, count) / count)
                print("round %d client: %.1f us CPU per MAD" % (rnd + 1, client[-1] * 1e6))
    print()
    print("medians over %d rounds, per sweep of %d MADs:"
          % (a.rounds, res[a.binaries[0]][0]["mads"]))
    print("| binary | MADs per sweep | sweep wall | daemon CPU | daemon CPU per MAD | ibsim CPU | "
          "context switches |")
    print("|---|---|---|---|---|---|---|")
    for b in a.binaries:
        m = {k: statistics.median(x[k] for x in res[b]) for k in ("wall", "daemon", "ibsim",
                                                                  "switches", "mads")}
        print("| %s | %d | %.4f s | %.4f s | %.1f us | %.4f s | %.0f |" % (
            b, m["mads"], m["wall"], m["daemon"], m["daemon"] / m["mads"] * 1e6, m["ibsim"],
            m["switches"]))
    if client:
        c = statistics.median(client)
        print("minimal client: %.1f us CPU per MAD; daemon / client per MAD: %s" % (
            c * 1e6, ", ".join("%.2fx" % (statistics.median(x["daemon"] / x["mads"]
                                                            for x in res[b]) / c)
                               for b in a.binaries)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
