#!/usr/bin/env python3
"""Probe overhead: CPU seconds ibfabricd spends per 1,000 UDP probes (prober and responder), and
its RTT measurement against `ping` (ICMP echo, the kernel answering) over the same veth pair
between two network namespaces, alternating, several rounds, medians. Needs root (ip netns).

    bench/probe_overhead.py [--rounds 5] [--probes 2000] [--interval-ms 2]
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sysfs_scrape import cpu_seconds, free_port  # noqa: E402

NS = "ibfb-probe-%d" % os.getpid()
VR, VN = "ibfbr%d" % (os.getpid() % 10000), "ibfbn%d" % (os.getpid() % 10000)
ROOT_IP, NS_IP = "10.251.7.1", "10.251.7.2"


def sh(*args):
    subprocess.run(list(args), check=True, capture_output=True, timeout=30)


def metric(url, name, **labels):
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    want = ",".join('%s="%s"' % kv for kv in labels.items())
    for line in text.splitlines():
        if line.startswith(name + ("{" + want if want else "")):
            return float(line.rsplit(" ", 1)[1])
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--probes", type=int, default=2000)
    ap.add_argument("--interval-ms", type=float, default=2)
    ap.add_argument("--ibfabricd", default=os.path.join(HERE, "..", "build", "daemon", "ibfabricd"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-probe-")
    procs = []
    try:
        sh("ip", "netns", "add", NS)
        sh("ip", "link", "add", VR, "type", "veth", "peer", "name", VN)
        sh("ip", "link", "set", VN, "netns", NS)
        sh("ip", "addr", "add", ROOT_IP + "/24", "dev", VR)
        sh("ip", "link", "set", VR, "up")
        sh("ip", "netns", "exec", NS, "ip", "addr", "add", NS_IP + "/24", "dev", VN)
        sh("ip", "netns", "exec", NS, "ip", "link", "set", VN, "up")
        sh("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up")
        off = ("collectors:\n  sysfs: {enabled: false}\n  ports: {enabled: false}\n"
               "  sm: {enabled: false}\n  sriov: {enabled: false}\n")
        with open(os.path.join(work, "r.yaml"), "w") as f:
            f.write(off + "  probe: {enabled: true, udp_listen: \"%s:10917\"}\n" % NS_IP)
        with open(os.path.join(work, "p.yaml"), "w") as f:
            f.write(off + "  probe: {enabled: true, interval: 1s, udp_listen: \"\", probe_interval: "
                    "%gms, max_probes_per_second: 100000, timeout: 500ms, window: %d, targets: "
                    "[{address: \"%s:10917\", name: peer}]}\n" % (a.interval_ms, a.probes, NS_IP))
        responder = subprocess.Popen(
            ["ip", "netns", "exec", NS, a.ibfabricd, "--config", os.path.join(work, "r.yaml"),
             "--web.listen-address", "127.0.0.1:0", "--log.level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        procs.append(responder)
        time.sleep(1)
        port = free_port()
        url = "http://127.0.0.1:%d/metrics" % port
        prober = subprocess.Popen(
            [a.ibfabricd, "--config", os.path.join(work, "p.yaml"), "--web.listen-address",
             "127.0.0.1:%d" % port, "--log.level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        procs.append(prober)
        time.sleep(1)
        os.kill(prober.pid, signal.SIGSTOP)  # probing runs only inside its own rounds
        cpu_p, cpu_r, rtt_d, rtt_net, rtt_ping = [], [], [], [], []
        for _ in range(a.rounds):
            # ibfabricd: let the prober run for as long as `probes` probes take. The two scrapes
            # that read its counters fall inside the window: their CPU (a few ms) counts too.
            os.kill(prober.pid, signal.SIGCONT)
            sent0 = metric(url, "ibfabric_probe_sent_total", peer="peer") or 0
            c_p, c_r = cpu_seconds(prober.pid), cpu_seconds(responder.pid)
            time.sleep(a.probes * a.interval_ms / 1000)
            sent = metric(url, "ibfabric_probe_sent_total", peer="peer") - sent0
            d_p, d_r = cpu_seconds(prober.pid) - c_p, cpu_seconds(responder.pid) - c_r
            rtt_d.append(metric(url, "ibfabric_probe_rtt_window_seconds", peer="peer",
                                transport="udp", stat="p50"))
            rtt_net.append(metric(url, "ibfabric_probe_last_network_rtt_seconds", peer="peer"))
            os.kill(prober.pid, signal.SIGSTOP)
            cpu_p.append(d_p / sent * 1000)
            cpu_r.append(d_r / sent * 1000)
            # ping: the same number of echoes at the same interval over the same veth.
            out = subprocess.run(["ping", "-q", "-c", str(min(a.probes, 1000)), "-i",
                                  str(max(a.interval_ms / 1000, 0.002)), NS_IP],
                                 capture_output=True, text=True, timeout=600).stdout
            m = re.search(r"= [\d.]+/([\d.]+)/", out)
            rtt_ping.append(float(m.group(1)) / 1000 if m else float("nan"))
        med = statistics.median
        print("probes over a veth pair between two namespaces, %d rounds of %d probes every %g ms"
              % (a.rounds, a.probes, a.interval_ms))
        print("  CPU per 1,000 probes: prober %.3f s, responder %.3f s" % (med(cpu_p), med(cpu_r)))
        print("  RTT: ibfabricd p50 %.1f us (network share of the latest %.1f us), ping avg %.1f us"
              % (med(rtt_d) * 1e6, med(rtt_net) * 1e6, med(rtt_ping) * 1e6))
        print("  ratio ibfabricd / ping RTT: %.2fx" % (med(rtt_d) / med(rtt_ping)))
        print("(CPU time has the kernel's clock-tick resolution, 1/%d s)" % os.sysconf("SC_CLK_TCK"))
    finally:
        for p in procs:
            try:
                os.kill(p.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            p.terminate()
            p.wait(timeout=10)
        subprocess.run(["ip", "link", "del", VR], capture_output=True)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
