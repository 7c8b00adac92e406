"""The `paths` collector on simulated fat trees (ibsim + opensm under the umad shim, see
tests/lib/simfabric.py), against `ibtracert`, the infiniband-diags tool an engineer runs by hand:

- on random two-level fat trees (shape and daemon host drawn at run time; the seed is printed),
  both legs of every probed peer's path (this node -> peer, peer -> this node) equal
  `ibtracert SLID DLID` hop by hop: the same cables, crossed in the same order and direction;
- when the SM changes the routes (a spine cable unlinked), the daemon notices the changed
  forwarding tables and traces again, and the paths equal ibtracert's new ones;
- a peer that cannot be traced (a LID nobody has, a host whose port drops every SMP, a hop
  limit) is reported in `ibfabric_path_untraced` with its reason and a log line, while the
  probes to it go on and the other paths stay traced.

opensm runs on a spine: the daemon probes every host over MAD, and under the shim a MAD of a
class the SM registered no agent for would kill it."""

import os
import random
import tempfile
import time
import unittest

from gen_fattree import fattree
from ibfabric_testlib import find_samples, parse_exposition, require_tools
from routes import ibtracert_hops
from simfabric import SIM_TOOLS, SimFabric

SEED = int(os.environ.get("IBFABRIC_TEST_SEED", random.randrange(1 << 30)))
def daemon_hops(samples, peer, leg):
    """The same list from ibfabric_path_hop_info (a/b ends and direction back to sender/receiver)."""
    rows = []
    for s in find_samples(samples, "ibfabric_path_hop_info", peer=peer, leg=leg):
        l = s.labels
        a = (l["node_name"], int(l["port"]))
        b = (l["remote_node_name"], int(l["remote_port"]))
        sender, receiver = (a, b) if l["direction"] == "a_to_b" else (b, a)
        rows.append((int(l["hop"]), sender + receiver))
    rows.sort()
    assert [h for h, _ in rows] == list(range(1, len(rows) + 1)), rows
    return [hop for _, hop in rows]



@require_tools(*SIM_TOOLS, "ibtracert")
class PathsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        print("paths test seed %d (IBFABRIC_TEST_SEED=%d reproduces it)" % (SEED, SEED))
        cls.rng = random.Random(SEED)

    def fabric(self, leaves, spines, hcas):
        topo = fattree(leaves=leaves, spines=spines, hcas_per_leaf=hcas)
        fabric = SimFabric(topo, name="paths", sm_host="spine-01")
        fabric.start()
        self.addCleanup(fabric.close)
        hosts = ["node-%03d mlx5_0" % i for i in range(1, leaves * hcas + 1)]
        return fabric, hosts

    def start_daemon(self, fabric, host, targets, extra=""):
        config = os.path.join(fabric.workdir, "ibfabricd-%d.yaml" % len(fabric.procs))
        entries = ", ".join('{lid: %d, name: "%s"}' % (lid, name) for name, lid in targets)
        with open(config, "w") as f:
            f.write("mad: {timeout: 100ms, retries: 2}\n"
                    "collectors:\n"
                    "  sysfs: {enabled: false}\n  ports: {enabled: false}\n"
                    "  sm: {enabled: false}\n  sriov: {enabled: false}\n"
                    "  probe: {enabled: true, interval: 500ms, udp_listen: \"\", "
                    "mad_responder: false, probe_interval: 200ms, timeout: 100ms, "
                    "targets: [%s]}\n"
                    "  paths: {enabled: true, interval: 500ms, verify_every: 1s%s}\n"
                    % (entries, extra))
        daemon = fabric.daemon(["--config", config, "--log.level", "debug"], host=host)
        daemon.start()
        self.addCleanup(daemon.stop)
        return daemon

    def wait_traced(self, daemon, count, timeout=60):
        return daemon.wait_for(
            lambda s: sum(x.value for x in find_samples(s, "ibfabric_path_peers", state="traced"))
            == count, timeout=timeout, what="%d traced paths" % count)

    def assert_equal_to_ibtracert(self, fabric, host, lids, samples):
        for peer, lid in lids.items():
            if peer == host:
                continue
            name = peer.split()[0]
            for leg, slid, dlid in (("to_peer", lids[host], lid), ("from_peer", lid, lids[host])):
                expected = ibtracert_hops(fabric, host, slid, dlid)
                untraced = find_samples(samples, "ibfabric_path_untraced", peer=name, leg=leg)
                if expected is None:
                    # No route (after a reroute): ibtracert fails, and so does the daemon.
                    self.assertTrue(untraced, "%s -> %s, leg %s: ibtracert found no route, the "
                                    "daemon did" % (host, peer, leg))
                    break  # the answer's leg starts where the probe's arrives
                self.assertTrue(expected, "ibtracert %d %d printed no hop" % (slid, dlid))
                self.assertFalse(untraced, "%s -> %s, leg %s" % (host, peer, leg))
                self.assertEqual(daemon_hops(samples, name, leg), expected,
                                 "%s -> %s, leg %s" % (host, peer, leg))

    def test_1_both_legs_equal_ibtracert_on_random_fat_trees_and_after_a_route_change(self):
        shapes = [(self.rng.randint(3, 5), self.rng.randint(2, 3), self.rng.randint(2, 3))
                  for _ in range(2)]
        for n, (leaves, spines, hcas) in enumerate(shapes):
            with self.subTest(leaves=leaves, spines=spines, hcas=hcas):
                fabric, hosts = self.fabric(leaves, spines, hcas)
                host = self.rng.choice(hosts)
                fabric.wait_ready(hosts=[host])
                lids = {h: fabric.lid(h) for h in hosts}
                targets = [(h.split()[0], lids[h]) for h in hosts if h != host]
                daemon = self.start_daemon(fabric, host, targets)
                samples = self.wait_traced(daemon, len(targets))
                self.assert_equal_to_ibtracert(fabric, host, lids, samples)
                if n:
                    continue
                # The SM routes around a spine cable the paths use: the daemon sees the
                # changed tables and traces again.
                used = [s.labels for s in find_samples(samples, "ibfabric_path_hop_info",
                                                       leg="to_peer", hop="2")]
                self.assertTrue(used, "no path crosses a spine")
                cable = self.rng.choice(used)
                spine_end = (cable["node_name"], cable["port"]) \
                    if cable["node_name"].startswith("spine") \
                    else (cable["remote_node_name"], cable["remote_port"])
                fabric.command('Unlink "%s"[%s]' % spine_end)
                self.addCleanup(fabric.command, 'ReLink "%s"' % spine_end[0])

                def rerouted(s):
                    changed = sum(x.value for x in find_samples(s, "ibfabric_path_traces_total")
                                  if x.labels["cause"] in ("route_change", "hop_lost"))
                    untraced = {x.labels["peer"]
                                for x in find_samples(s, "ibfabric_path_untraced")}
                    # A path the SM left without a route keeps its last good cables (and says
                    # so in ibfabric_path_untraced).
                    still = [x for x in find_samples(s, "ibfabric_path_hop_info")
                             if {x.labels["node_name"], x.labels["remote_node_name"]} ==
                             {cable["node_name"], cable["remote_node_name"]} and
                             {x.labels["port"], x.labels["remote_port"]} ==
                             {cable["port"], cable["remote_port"]} and
                             x.labels["peer"] not in untraced]
                    return changed > 0 and not still
                # opensm sees the unlinked port at its next sweep (every 10 s) and reprograms
                # the tables; on a loaded (sanitized, parallel) run that took over 30 s.
                try:
                    samples = daemon.wait_for(rerouted, timeout=90,
                                              what="paths traced again around the unlinked cable")
                except AssertionError as e:
                    s = daemon.samples()
                    raise AssertionError("%s; traces %s; untraced %s; still crossing it %s" % (
                        e, [(x.labels["cause"], x.value)
                            for x in find_samples(s, "ibfabric_path_traces_total")],
                        [x.labels for x in find_samples(s, "ibfabric_path_untraced")],
                        [(x.labels["peer"], x.labels["leg"], x.labels["hop"])
                         for x in find_samples(s, "ibfabric_path_hop_info")
                         if {x.labels["node_name"], x.labels["remote_node_name"]} ==
                         {cable["node_name"], cable["remote_node_name"]}])) from e
                samples = daemon.wait_for(
                    lambda s: sum(x.value for x in find_samples(s, "ibfabric_path_peers")
                                  if x.labels["state"] in ("traced", "untraced"))
                    == len(targets) and s, timeout=60, what="every path traced or untraced")
                self.assert_equal_to_ibtracert(fabric, host, lids, samples)

    def test_2_untraceable_peers_are_reported_and_probed_on(self):
        fabric, hosts = self.fabric(3, 2, 3)
        # near and dropping share the daemon's leaf; far is behind another.
        host, near, dropping, far = hosts[0], hosts[1], hosts[2], hosts[6]
        fabric.wait_ready(hosts=[host])
        lids = {h: fabric.lid(h) for h in hosts}
        # Every SMP that would enter `dropping`'s port is lost: its NodeInfo never answers.
        fabric.command('Error "%s"[1] 100' % dropping)
        unknown_lid = max(lids.values()) + 50
        targets = [("near", lids[near]), ("far", lids[far]), ("dropping", lids[dropping]),
                   ("nobody", unknown_lid)]
        daemon = self.start_daemon(fabric, host, targets, extra=", max_hops: 3")

        def reported(s):
            reasons = {(x.labels["peer"], x.labels["leg"]): x.labels["reason"]
                       for x in find_samples(s, "ibfabric_path_untraced")}
            return len(reasons) == 6 and reasons
        samples = daemon.wait_for(reported, timeout=60, what="three untraceable peers")
        reasons = reported(samples)
        # far is 4 cables away (host, leaf, spine, leaf, host): past max_hops 3.
        self.assertEqual(reasons[("far", "to_peer")], "hop_limit")
        self.assertEqual(reasons[("dropping", "to_peer")], "no_answer")
        self.assertEqual(reasons[("nobody", "to_peer")], "no_route")
        for peer in ("far", "dropping", "nobody"):
            self.assertIn((peer, "from_peer"), reasons)
            self.assertFalse(find_samples(samples, "ibfabric_path_hop_info", peer=peer))
        self.assertEqual(len(find_samples(samples, "ibfabric_path_hop_info", peer="near",
                                          leg="to_peer")), 2)
        self.assertRegex(daemon.scrape(), r"# HELP ibfabric_path_hop_info A cable")
        log = daemon.log()
        for peer, reason in (("far", "hop_limit"), ("dropping", "no_answer"),
                             ("nobody", "no_route")):
            self.assertRegex(log, r'paths: cannot trace peer="%s" transport=mad leg=to_peer '
                                  r'reason=%s' % (peer, reason))
        # The probes go on: each untraceable peer's sent counter keeps growing.
        before = {p: find_samples(samples, "ibfabric_probe_sent_total", peer=p)[0].value
                  for p in ("far", "dropping", "nobody")}
        later = daemon.wait_for(
            lambda s: all(find_samples(s, "ibfabric_probe_sent_total", peer=p)[0].value >
                          before[p] + 3 for p in before), timeout=10, what="probes going on")
        self.assertEqual(find_samples(later, "ibfabric_collector_success",
                                      collector="paths")[0].value, 1)
        # Clearing the drops lets the next attempt trace it.
        fabric.command('Error "%s"[1] 0' % dropping)
        daemon.wait_for(lambda s: len(find_samples(s, "ibfabric_path_hop_info",
                                                   peer="dropping", leg="from_peer")) == 2,
                        timeout=60, what="the dropping peer traced once its port answers")
        self.assertIn('paths: traced again peer="dropping"', daemon.log())


if __name__ == "__main__":
    unittest.main()
