#!/usr/bin/env python3
"""MAD probe overhead on a simulated fabric: CPU seconds ibfabricd spends per 1,000 MAD probes
(prober and responder), and its RTT measurement side by side with the stock `ibping` between
the same two simulated nodes, against the same responder (an ibfabricd), alternating, several
rounds, medians.

    bench/probe_mad.py [--rounds 5] [--probes 2000] [--interval-ms 2]

`ibping -f` (flood: the next ping as soon as the answer is in) sends as many pings each round.
Its own average is printed as it reports it, and next to it the wall-clock time per ping
(elapsed time of the whole run / pings, process start included), because ibping's timestamps
(infiniband-diags 44, `time_stamp()`: tv_sec * 1e6 + tv_nsec / 10000) count the sub-second
part in 10 us units and so under-report RTTs below a second tenfold.
"""

import argparse
import os
import re
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from probe_overhead import metric  # noqa: E402
from simfabric import SimFabric  # noqa: E402
from sysfs_scrape import cpu_seconds, free_port  # noqa: E402

TOPOLOGY = "/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca"
OFF = ("collectors:\n  sysfs: {enabled: false}\n  ports: {enabled: false}\n"
       "  sm: {enabled: false}\n  sriov: {enabled: false}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--probes", type=int, default=2000)
    ap.add_argument("--interval-ms", type=float, default=2)
    ap.add_argument("--ibfabricd", default=os.path.join(HERE, "..", "build", "daemon", "ibfabricd"))
    a = ap.parse_args()
    os.environ.setdefault("IBFABRICD", os.path.abspath(a.ibfabricd))
    work = tempfile.TemporaryDirectory(prefix="bench-probe-mad-")
    # opensm on a switch, ignoring other SMs: see tests/integration/test_probe_mad.py.
    fabric = SimFabric(TOPOLOGY, name="benchmad", sm_host="Switch1", start_sm=False)
    daemons = []
    try:
        fabric.start()
        conf = os.path.join(work.name, "opensm.conf")
        with open(conf, "w") as f:
            f.write("ignore_other_sm TRUE\n")
        fabric.spawn("opensm", ["opensm", "-F", conf, "-f", os.path.join(work.name, "osm.log")],
                     host="Switch1")
        fabric.wait_ready(hosts=["Hca4"])
        out = fabric.run_tool(["ibaddr"], host="Hca3").stdout
        lid = int(re.search(r"LID start (0x[0-9a-f]+)", out).group(1), 16)
        with open(os.path.join(work.name, "r.yaml"), "w") as f:
            f.write(OFF + "  probe: {enabled: true, udp_listen: \"\", "
                    "mad_responder_max_per_second: 100000}\n")
        with open(os.path.join(work.name, "p.yaml"), "w") as f:
            f.write("mad: {rate_limit: 0}\n" + OFF +
                    "  probe: {enabled: true, interval: 1s, udp_listen: \"\", mad_responder: "
                    "false, probe_interval: %gms, max_probes_per_second: 100000, timeout: 500ms, "
                    "window: %d, targets: [{lid: %d, name: peer}]}\n"
                    % (a.interval_ms, a.probes, lid))
        responder = fabric.daemon(["--config", os.path.join(work.name, "r.yaml"),
                                   "--log.level", "warn"], host="Hca3",
                                  env=dict(os.environ, SIM_SET_ISSM="1"))
        responder.start()
        daemons.append(responder)
        prober = fabric.daemon(["--config", os.path.join(work.name, "p.yaml"),
                                "--log.level", "warn"], host="Hca4")
        prober.port = free_port()
        prober.start()
        daemons.append(prober)
        url = prober.url + "/metrics"
        time.sleep(1)
        pid_p, pid_r = prober.process.pid, responder.process.pid
        os.kill(pid_p, signal.SIGSTOP)  # probing runs only inside its own rounds
        cpu_p, cpu_r, rtt_d, net_d, ib_avg, ib_wall = [], [], [], [], [], []
        for _ in range(a.rounds):
            os.kill(pid_p, signal.SIGCONT)
            sent0 = metric(url, "ibfabric_probe_sent_total", peer="peer") or 0
            c_p, c_r = cpu_seconds(pid_p), cpu_seconds(pid_r)
            time.sleep(a.probes * a.interval_ms / 1000)
            sent = metric(url, "ibfabric_probe_sent_total", peer="peer") - sent0
            d_p, d_r = cpu_seconds(pid_p) - c_p, cpu_seconds(pid_r) - c_r
            rtt_d.append(metric(url, "ibfabric_probe_rtt_window_seconds", peer="peer",
                                transport="mad", stat="p50"))
            net_d.append(metric(url, "ibfabric_probe_last_network_rtt_seconds", peer="peer"))
            os.kill(pid_p, signal.SIGSTOP)
            cpu_p.append(d_p / sent * 1000)
            cpu_r.append(d_r / sent * 1000)
            start = time.monotonic()
            r = fabric.run_tool(["ibping", "-f", "-c", str(a.probes), str(lid)], host="Hca4",
                                timeout=600)
            elapsed = time.monotonic() - start
            m = re.search(r"(\d+) received.*\n.*= [\d.]+/([\d.]+)/", r.stdout)
            received = int(m.group(1))
            ib_avg.append(float(m.group(2)) / 1000)
            ib_wall.append(elapsed / max(received, 1))
        med = statistics.median
        print("MAD probes between two simulated nodes (ibsim), responder: ibfabricd; %d rounds of "
              "%d probes" % (a.rounds, a.probes))
        print("  CPU per 1,000 probes: prober %.3f s, responder %.3f s" % (med(cpu_p), med(cpu_r)))
        print("  RTT: ibfabricd p50 %.1f us (every %g ms; network share of the latest %.1f us)"
              % (med(rtt_d) * 1e6, a.interval_ms, med(net_d) * 1e6))
        print("       ibping -f: reported avg %.1f us, wall clock per ping %.1f us"
              % (med(ib_avg) * 1e6, med(ib_wall) * 1e6))
        print("  ratio ibfabricd p50 / ibping wall clock per ping: %.2fx"
              % (med(rtt_d) / med(ib_wall)))
        print("(CPU time has the kernel's clock-tick resolution, 1/%d s)"
              % os.sysconf("SC_CLK_TCK"))
    finally:
        for d in daemons:
            try:
                os.kill(d.process.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            d.stop()
        fabric.close()
        work.cleanup()


if __name__ == "__main__":
    main()
