"""Localization end to end: from probe loss to the cable, in a real Prometheus.

A simulated two-level fat tree (ibsim + opensm under the umad shim, see ../shared/SIMULATOR.md)
with an ibfabricd on every host: each probes every other over MAD (ibping's class), answers
their probes, and traces the paths of its probes (collector `paths`); the first also sweeps the
fabric. Debian's `prometheus` scrapes them every second with the shipped rules, time-shortened
as in test_prometheus_e2e (windows divided by 60, `for:` 3 s; expressions as shipped).

- while the fabric is healthy, no pair is faulty and IbfabricSuspectLink stays quiet;
- `Error "<node>"[<port>] 30` on a cable drawn at run time (among the cable directions some
  pair crosses, whose set of pairs no other cable direction has: the seed is printed) drops 30 %
  of the packets entering that port; IbfabricSuspectLink fires naming that cable by both ends'
  names and ports, and no other cable, while the fault lasts;
- the queries of the probe dashboard's localization row return data;
- clearing the error resolves the alert.

opensm runs on a spine (with ignore_other_sm), so every host's IsSM slot is free for a responder
(SIM_SET_ISSM=1); it is stopped once the routes are programmed, before the fault. Skipped when
IBFABRIC_SANITIZED=1 (it passed under ASan+UBSan and TSan when written; the sanitized suites
keep their minutes for the daemon's own tests)."""

import os
import random
import shutil
import tempfile
import time
import unittest

from gen_fattree import fattree
from ibfabric_testlib import find_samples, free_port
from promserver import PromServer
from shipped import dashboard_queries, shortened_rules
from simfabric import SHIM, SimFabric

SEED = int(os.environ.get("IBFABRIC_TEST_SEED", random.randrange(1 << 30)))
LEAVES, SPINES, HCAS = 3, 2, 2
ROW = ("Suspect cables", "Path of the selected prober and peer", "Paths per state")


def cable_of(labels):
    """A cable as the alert names it: (a end name, port, b end name, port)."""
    return (labels["node_name"], labels["port"], labels["remote_node_name"],
            labels["remote_port"])


@unittest.skipUnless(shutil.which("ibsim") and shutil.which("opensm") and
                     shutil.which("prometheus") and os.path.exists(SHIM),
                     "needs ibsim-utils, opensm, infiniband-diags and prometheus "
                     "(scripts/install-deps.sh)")
@unittest.skipIf(os.environ.get("IBFABRIC_SANITIZED") == "1",
                 "a test of the shipped rules: the release suite runs it; under the sanitizers "
                 "the daemon's part (paths, MAD probes and responders) is test_paths' and "
                 "test_probe_mad's, and the suite's time is better spent there")
class LocalizationEndToEnd(unittest.TestCase):
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
        self.hosts = ["node-%03d mlx5_0" % i for i in range(1, LEAVES * HCAS + 1)]
        self.fabric.wait_ready(hosts=self.hosts[:1])
        lids = {h: self.fabric.lid(h) for h in self.hosts}
        self.daemons = []
        for i, host in enumerate(self.hosts):
            targets = ", ".join('{lid: %d, name: "%s"}' % (lids[h], h.split()[0])
                                for h in self.hosts if h != host)
            config = os.path.join(self.tmp, "ibfabricd-%d.yaml" % i)
            with open(config, "w") as f:
                # Loss is what this test is about: a spike floor of 10 s keeps a loaded CI
                # machine's scheduling delays out of the evidence.
                f.write("mad: {timeout: 200ms, retries: 2}\n"
                        "collectors:\n"
                        "  sysfs: {enabled: false}\n  ports: {enabled: false}\n"
                        "  sm: {enabled: false}\n  sriov: {enabled: false}\n"
                        "  fabric: {enabled: %s, interval: 2s}\n"
                        "  probe: {enabled: true, interval: 1s, udp_listen: \"\", "
                        "probe_interval: 100ms, timeout: 1s, spike_floor: 10s, "
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
            self.daemons.append(daemon)
        for daemon in self.daemons:
            daemon.wait_for(lambda s: sum(x.value for x in find_samples(
                s, "ibfabric_path_peers", state="traced")) == len(self.hosts) - 1, timeout=60,
                what="every path traced")
        self.prom = PromServer(targets=["127.0.0.1:%d" % d.port for d in self.daemons],
                               rule_files=[shortened_rules(self.tmp)])
        self.prom.start()
        self.addCleanup(self.prom.close)

    def suspects(self):
        return {cable_of(a["labels"]) for a in self.prom.firing_alerts("IbfabricSuspectLink")}

    def pairs_by_link(self):
        """{(sender, port, receiver, port): frozenset of (prober, peer)}: which pairs cross each
        cable direction, from ibfabric_path_hop_info as Prometheus scraped it."""
        out = {}
        for s in self.prom.query("ibfabric_path_hop_info"):
            l = s["metric"]
            a, b = (l["node_name"], l["port"]), (l["remote_node_name"], l["remote_port"])
            sender, receiver = (a, b) if l["direction"] == "a_to_b" else (b, a)
            out.setdefault(sender + receiver, set()).add((l["instance"], l["peer"]))
        return {k: frozenset(v) for k, v in out.items()}

    def test_an_error_on_a_cable_fires_the_alert_naming_it_and_no_other(self):
        pair_count = len(self.hosts) * (len(self.hosts) - 1)
        # Healthy: every pair recorded, none faulty, for several evaluations.
        self.prom.wait_for(lambda: len(self.prom.query("ibfabric:probe_pair_faulty:10m == 0"))
                           == pair_count, timeout=60, what="every pair recorded clean")
        def every_path():
            links = self.pairs_by_link()
            return len(links) > 20 and links
        links = self.prom.wait_for(every_path, timeout=30, what="the paths in Prometheus")
        for _ in range(5):
            self.assertEqual(self.suspects(), set())
            self.assertEqual(self.prom.query("ibfabric:probe_pair_faulty:10m > 0"), [])
            time.sleep(1)

        # The routes are programmed: opensm goes. Under the simulator the error drops its SMPs
        # too, and then it reroutes now and then (seen here), moving the pairs off the cable.
        self.sm.stop()
        # A cable direction whose pairs no other direction carries: probes can name it alone.
        sets = list(links.values())
        unique = sorted(k for k, v in links.items() if sets.count(v) == 1)
        self.assertTrue(unique, "no cable direction with a pair set of its own")
        sender, sender_port, receiver, receiver_port = self.rng.choice(unique)
        # The alert names a cable's ends as the paths collector does (the switch end first, of
        # two switches the lower GUID): take that naming from a hop of the cable.
        expected = None
        for s in self.prom.query("ibfabric_path_hop_info"):
            l = s["metric"]
            if {(l["node_name"], l["port"]), (l["remote_node_name"], l["remote_port"])} == \
                    {(sender, sender_port), (receiver, receiver_port)}:
                expected = cable_of(l)
                break
        print("error on packets %s port %s -> %s port %s, crossed by %d of %d pairs" % (
            sender, sender_port, receiver, receiver_port,
            len(links[(sender, sender_port, receiver, receiver_port)]), pair_count))
        self.fabric.command('Error "%s"[%s] 30' % (receiver, receiver_port))
        cleared = False
        try:
            others = {}

            def named():
                alerts = self.prom.firing_alerts("IbfabricSuspectLink")
                found = {cable_of(a["labels"]) for a in alerts}
                for a in alerts:
                    if cable_of(a["labels"]) != expected:
                        others[cable_of(a["labels"])] = a["annotations"]["description"]
                return expected in found
            self.prom.wait_for(named, timeout=60, what="IbfabricSuspectLink naming %s" %
                               (expected,))
            # It stays, alone, while the fault lasts.
            for _ in range(6):
                named()
                time.sleep(1)
            self.assertEqual(others, {}, "IbfabricSuspectLink named other cables: %s" % others)
            alert = [a for a in self.prom.firing_alerts("IbfabricSuspectLink")
                     if cable_of(a["labels"]) == expected][0]
            description = alert["annotations"]["description"]
            self.assertIn("Cable %s port %s <-> %s port %s" % expected, description)
            self.assertIn("packets %s -> %s" % (sender, receiver), description)

            # The dashboard row shows it.
            queries = [q for q in dashboard_queries("4s") if q[1] in ROW]
            self.assertEqual(sorted({q[1] for q in queries}), sorted(ROW))
            for dashboard, title, expr in queries:
                self.assertTrue(self.prom.query(expr), "%s / %s: no data" % (dashboard, title))

            self.fabric.command('Error "%s"[%s] 0' % (receiver, receiver_port))
            cleared = True
            self.prom.wait_for(lambda: not self.suspects(), timeout=60,
                               what="IbfabricSuspectLink resolved once the error is cleared")
        finally:
            if not cleared:
                self.fabric.command('Error "%s"[%s] 0' % (receiver, receiver_port))


if __name__ == "__main__":
    unittest.main(verbosity=2)
