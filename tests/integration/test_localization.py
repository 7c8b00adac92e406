"""Localization end to end: from probe loss and late answers to the culprit, through a real
Prometheus and ibfabric-localize.

A simulated two-level fat tree (ibsim + opensm under the umad shim, see tests/lib/simfabric.py)
with an ibfabricd on every host: each probes every other over MAD (ibping's class) every 50 ms,
answers their probes, traces the paths of its probes (`paths`), and reads its own port's counters
(`ports`); the first also sweeps the switches (`fabric`). Debian's `prometheus` scrapes them
every second, and scrapes ibfabric-localize, which reads the evidence from that Prometheus every
2 s over a 15 s window (a minute in production); the shipped rules fire on its verdicts,
time-shortened as in test_prometheus_e2e (windows divided by 60 but at least 15 s, `for:` 3 s;
expressions as shipped). Spike evidence is on (spike_floor 20 ms). The candidates are drawn at
run time (the seed is printed) from the topology and from `ibtracert`, never from the daemons'
own series; while each fault lasts, every cable and host named at any poll is recorded, and
nothing but the culprit may be:

- a clean fabric: nothing named;
- 3 % of the packets into a host's own port dropped: its cable is named (the host's port counts
  the receive errors, so not the host), the alert quotes that count from the host's own daemon;
- a stalled host (six 0.4 s SIGSTOP pauses of its daemon): the host is named, no cable;
- two faults at once: 30 % into a spine from a leaf, on a cable direction whose probe pairs no
  other candidate has (by ibtracert), and 3 % into another host: both cables are named;
- each clears: its alerts resolve, and nothing else is named meanwhile.

opensm runs on a spine (with ignore_other_sm), so every host's IsSM slot is free for a responder
(SIM_SET_ISSM=1); it is stopped once the routes are programmed, before the faults. Skipped when
IBFABRIC_SANITIZED=1 (it passed under ASan+UBSan and TSan when written; the sanitized suites
keep their minutes for the daemon's own tests)."""

import os
import random
import shutil
import signal
import tempfile
import time
import unittest

from gen_fattree import fattree, hca_name, leaf_name
from ibfabric_testlib import find_samples, free_port, require_tools
from promserver import Localizer, PromServer
from routes import pair_links
from shipped import dashboard_queries, shortened_rules
from simfabric import SIM_TOOLS, SimFabric

SEED = int(os.environ.get("IBFABRIC_TEST_SEED", random.randrange(1 << 30)))
LEAVES, SPINES, HCAS = 3, 2, 2
# Panels with data while two cables are named (on the probes board, and the landing board's and
# every board's culprits and firing alerts).
ROW = ("Suspects", "Path of the selected prober and peer", "Paths per state", "Firing now",
       "Warning alerts", "Culprits named")


def named_now(prom):
    """{("link", frozenset of both ends) or ("host", name): description} firing now."""
    out = {}
    for a in prom.firing_alerts("IbfabricSuspectLink"):
        l = a["labels"]
        key = ("link", frozenset({(l["node_name"], l["port"]),
                                  (l["remote_node_name"], l["remote_port"])}))
        out[key] = a["annotations"]["description"]
    for a in prom.firing_alerts("IbfabricSuspectHost"):
        out[("host", a["labels"]["node_name"])] = a["annotations"]["description"]
    return out


def cable(a, ap, b, bp):
    return ("link", frozenset({(a, str(ap)), (b, str(bp))}))


@require_tools(*SIM_TOOLS, "ibtracert", "prometheus", "promtool")
@unittest.skipIf(os.environ.get("IBFABRIC_SANITIZED") == "1",
                 "a test of the shipped rules: the release suite runs it; under the sanitizers "
                 "the daemon's part (paths, MAD probes and responders) is test_paths' and "
                 "test_probe_mad's, and the suite's time is better spent there")
class LocalizationEndToEnd(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        print("localization test seed %d (IBFABRIC_TEST_SEED=%d reproduces it)" % (SEED, SEED))
        self.rng = random.Random(SEED)
        self.tmp = tempfile.mkdtemp(prefix="ibfabric-localization-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.fabric = SimFabric(fattree(leaves=LEAVES, spines=SPINES, hcas_per_leaf=HCAS),
                                name="localize", sm_host="spine-01", start_sm=False)
        self.fabric.start()
        self.addCleanup(self.fabric.close)
        # ignore_other_sm: the responders' ports carry the IsSM bit (SIM_SET_ISSM=1), and
        # without it opensm's MADs to them end the daemons under the shim (as in
        # test_probe_mad).
        conf = os.path.join(self.tmp, "opensm.conf")
        with open(conf, "w") as f:
            f.write("ignore_other_sm TRUE\n")
        self.sm = self.fabric.spawn("opensm", ["opensm", "-F", conf, "-f",
                                               os.path.join(self.tmp, "opensm.log")],
                                    host="spine-01")
        self.hosts = [hca_name(l, j, HCAS) for l in range(1, LEAVES + 1)
                      for j in range(1, HCAS + 1)]
        self.fabric.wait_ready(hosts=self.hosts[:1])
        self.lids = {h: self.fabric.lid(h) for h in self.hosts}
        self.daemons = {}
        for i, host in enumerate(self.hosts):
            targets = ", ".join('{lid: %d, name: "%s"}' % (self.lids[h], h.split()[0])
                                for h in self.hosts if h != host)
            config = os.path.join(self.tmp, "ibfabricd-%d.yaml" % i)
            with open(config, "w") as f:
                f.write("mad: {timeout: 200ms, retries: 2}\n"
                        "collectors:\n"
                        "  sysfs: {enabled: false}\n  sm: {enabled: false}\n"
                        "  sriov: {enabled: false}\n"
                        "  ports: {enabled: true, interval: 1s}\n"
                        "  fabric: {enabled: %s, interval: 2s}\n"
                        "  probe: {enabled: true, interval: 1s, udp_listen: \"\", "
                        "probe_interval: 50ms, timeout: 1s, spike_floor: 20ms, "
                        "targets: [%s]}\n"
                        "  paths: {enabled: true, interval: 1s, verify_every: 2s}\n"
                        % ("true" if i == 0 else "false", targets))
            # Started one after the other while the earlier ones already probe them: a daemon
            # takes requests only once its responder is registered (test_start_under_probes).
            daemon = self.fabric.daemon(["--config", config], host=host,
                                        env=dict(os.environ, SIM_SET_ISSM="1"), port=free_port(),
                                        ready_log="mad: serving class 0x32")
            self.addCleanup(daemon.stop)
            daemon.start()
            self.daemons[host] = daemon
        for daemon in self.daemons.values():
            daemon.wait_for(lambda s: sum(x.value for x in find_samples(
                s, "ibfabric_path_peers", state="traced")) == len(self.hosts) - 1, timeout=60,
                what="every path traced")
        # The ground truth: which cable directions each probe pair crosses, by ibtracert.
        self.pairs = [(a, b) for a in self.hosts for b in self.hosts if a != b]
        self.links = pair_links(self.fabric, self.lids, self.pairs, self.hosts[0])
        localizer_port, prom_port = free_port(), free_port()
        self.prom = PromServer(targets=["127.0.0.1:%d" % d.port for d in self.daemons.values()],
                               rule_files=[shortened_rules(self.tmp, min_window=15)],
                               port=prom_port,
                               extra_jobs={"ibfabric-localize": ["127.0.0.1:%d" % localizer_port]})
        self.prom.start()
        self.addCleanup(self.prom.close)
        self.localizer = Localizer(self.prom.url(""), localizer_port)
        self.localizer.start()
        self.addCleanup(self.localizer.close)

    def host_cable(self, host):
        """The host's cable as the alert names it: (leaf, leaf port, host, 1)."""
        n = self.hosts.index(host)
        return cable(leaf_name(n // HCAS + 1), n % HCAS + 1, host, 1)

    def distinguishable_uplinks(self):
        """Cable directions leaf -> spine whose set of probe pairs no other candidate has (no
        other cable direction, no host), by ibtracert: the probes can name them alone."""
        by_link = {}
        for pair, links in self.links.items():
            for link in links:
                by_link.setdefault(link, set()).add(pair)
        sets = [frozenset(v) for v in by_link.values()]
        sets += [frozenset(p for p in self.pairs if h in p) for h in self.hosts]
        out = []
        for link, pairs in by_link.items():
            if link[0].startswith("leaf") and link[2].startswith("spine") and \
                    sets.count(frozenset(pairs)) == 1:
                out.append(link)
        return sorted(out)

    def expect(self, culprits, what, timeout=60, hold=6):
        """Waits until every culprit is named, then holds the fault `hold` seconds more; returns
        the descriptions. Fails if anything else was named at any poll."""
        others = {}
        seen = {}
        evidence = []

        def poll():
            now = named_now(self.prom)
            for key, description in now.items():
                if key not in culprits and key not in others and not evidence:
                    evidence.append(self.evidence())  # as it was when a bystander showed
                (seen if key in culprits else others)[key] = description
            return set(culprits) <= set(now)
        try:
            self.prom.wait_for(poll, timeout=timeout, what=what)
        except AssertionError as e:
            raise AssertionError("%s\nnamed now: %s\n%s" % (e, sorted(named_now(self.prom)),
                                                            self.evidence())) from None
        deadline = time.monotonic() + hold
        while time.monotonic() < deadline:
            poll()
            time.sleep(0.5)
        if others:
            self.fail("%s: named besides the culprit: %s\n%s" % (what, others, evidence[0]))
        return seen

    def evidence(self):
        """What the localizer saw and said, for a failure's message: its series and its log."""
        lines = [l for l in self.localizer.metrics().splitlines()
                 if l.startswith("ibfabric_localize_")]
        return "\n".join(lines) + "\nlocalizer log:\n" + self.localizer.log()[-4000:]

    def quiet(self, culprits, what, timeout=60):
        """Waits until nothing is named any more; meanwhile only the culprits of the fault just
        cleared may still be named (their alerts resolving): anything else fails."""
        others = {}

        def poll():
            now = named_now(self.prom)
            others.update({k: d for k, d in now.items() if k not in culprits})
            return not now
        self.prom.wait_for(poll, timeout=timeout, what=what)
        if others:
            self.fail("%s: named while the culprits' alerts resolved: %s\n%s"
                      % (what, others, self.evidence()))

    def test_culprits_named_and_never_a_bystander(self):
        # Clean: every pair recorded, nothing named for several evaluations.
        def placed():
            rows = self.prom.query('max(ibfabric_localize_pairs{state="placed"})')
            return rows and int(float(rows[0]["value"][1])) == len(self.pairs)
        self.prom.wait_for(placed, timeout=60,
                           what="the localizer placing every pair (prober, peer and path)")
        self.prom.wait_for(lambda: self.prom.query("max(ibfabric_localize_up) == 1"), timeout=30,
                           what="the localizer evaluating")
        for _ in range(8):
            self.assertEqual(named_now(self.prom), {})
            time.sleep(1)
        # The routes are programmed: opensm goes. Under the simulator an error drops its SMPs
        # too, and then it reroutes now and then (seen here), moving the pairs off the cable.
        self.sm.stop()

        hosts = list(self.hosts)
        self.rng.shuffle(hosts)
        lossy_host, stalled_host, second_host = hosts[:3]

        # 1. 3 % of the packets into a host's own port.
        print("3 % into", lossy_host)
        self.fabric.command('Error "%s"[1] 3' % lossy_host)
        try:
            seen = self.expect([self.host_cable(lossy_host)], "the cable of %s" % lossy_host)
        finally:
            self.fabric.command('Error "%s"[1] 0' % lossy_host)
        description = seen[self.host_cable(lossy_host)]
        # Both ends' counters: the host's own port as its own daemon reads it.
        self.assertRegex(description, r"%s port 1 \(its own daemon\): [1-9]\d* errors"
                         % lossy_host)
        self.assertIn("Equally suspect (probes cannot tell them apart): none.", description)
        self.quiet([self.host_cable(lossy_host)],
                   "the cable's alert resolved once the error is cleared")

        # 2. A stalled host, with spike evidence on.
        print("stalling", stalled_host)
        daemon = self.daemons[stalled_host]
        for _ in range(6):
            daemon.signal(signal.SIGSTOP)
            time.sleep(0.4)
            daemon.signal(signal.SIGCONT)
            time.sleep(0.6)
        seen = self.expect([("host", stalled_host)], "host %s named" % stalled_host, hold=3)
        self.assertRegex(seen[("host", stalled_host)], r"answers to it: [1-9]\d* late")
        self.quiet([("host", stalled_host)], "the host's alert resolved")

        # 3. Two faults at once: a leaf -> spine direction the probes can tell apart, and 3 %
        # into another host.
        uplinks = self.distinguishable_uplinks()
        self.assertTrue(uplinks, "no leaf -> spine direction with a pair set of its own")
        sender, sender_port, spine, spine_port = self.rng.choice(uplinks)
        print("30 %% into %s port %d (from %s), 3 %% into %s" % (spine, spine_port, sender,
                                                                  second_host))
        self.fabric.command('Error "%s"[%d] 30' % (spine, spine_port))
        self.fabric.command('Error "%s"[1] 3' % second_host)
        try:
            culprits = [cable(sender, sender_port, spine, spine_port),
                        self.host_cable(second_host)]
            self.expect(culprits, "both faults named")
            queries = [q for q in dashboard_queries("4s") if q[1] in ROW]
            self.assertEqual(sorted({q[1] for q in queries}), sorted(ROW))
            for dashboard, title, expr in queries:
                self.assertTrue(self.prom.query(expr), "%s / %s: no data" % (dashboard, title))
            # Nothing congests a port here: the Suspects table names no congestion.
            self.assertEqual(self.prom.query('ibfabric_localize_suspect{kind="congestion"}'), [])
        finally:
            self.fabric.command('Error "%s"[%d] 0' % (spine, spine_port))
            self.fabric.command('Error "%s"[1] 0' % second_host)
        self.quiet(culprits, "both alerts resolved")


if __name__ == "__main__":
    unittest.main(verbosity=2)
