"""MAD probes (ibping's class) on a simulated fabric (ibsim + opensm under the umad shim):

- the stock `ibping` pings a daemon's responder and gets answers carrying the host name;
- two daemons probe each other, found by node description through the SA (and by LID): every
  probe answered, the responder's hold time in every answer, no spike while steady;
- discovery lists every other CA port the SA knows, never the node's own;
- pausing the responder process makes RTT spikes the spike counter and the histogram show;
- a daemon probes the stock `ibping -S` and reports round trips without a network share;
- a new daemon's responder serves from its start, not from its collector's next run.

Simulator quirks this works around (see tests/lib/simfabric.py): requests reach a responder only
when it attached with SIM_SET_ISSM=1, which sets the IsSM bit of its port; the shim crashes a
process that receives a MAD of a class it registered no agent for. So opensm runs on a switch
(discovery probes every CA, and opensm has no ping agent) with `ignore_other_sm` (it would
otherwise poll the responders' IsSM ports with SMInfo), and is stopped before `ibping -S`
starts (which has no agent for SMInfo at all)."""

import os
import signal
import socket
import tempfile
import time
import unittest

from ibfabric_testlib import find_sample, find_samples, parse_exposition, require_tools
from simfabric import SIM_TOOLS, SimFabric, parse_dotted

TOPOLOGY = "/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca"
SM_HOST = "Switch1"
RESPONDER_HOST = "Hca3"   # an ibfabricd, probed by the other
PROBER_HOST = "Hca4"      # an ibfabricd that probes with discovery (and is probed back)
IBPING_HOST = "Hca2"      # the stock `ibping -S`, last test
SILENT_HOST = "Hca1"      # nothing answers there
SILENT_NAME = "rack-07/silent"  # its name in the prober's node-name-map



@require_tools(*SIM_TOOLS, "ibping", "smpquery")
class MadProbeTest(unittest.TestCase):
    """One fabric for the class; the tests run in name order, the last one stops opensm."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ibfabric-probe-mad-")
        cls.fabric = SimFabric(TOPOLOGY, name="probemad", sm_host=SM_HOST, start_sm=False)
        cls.responder = cls.prober = None
        try:
            cls.fabric.start()
            conf = os.path.join(cls.tmp.name, "opensm.conf")
            with open(conf, "w") as f:
                f.write("ignore_other_sm TRUE\n")
            cls.sm = cls.fabric.spawn("opensm", ["opensm", "-F", conf, "-f",
                                        os.path.join(cls.tmp.name, "opensm.log")], host=SM_HOST)
            cls.fabric.wait_ready(hosts=[PROBER_HOST])
            cls.responder_lid = cls.fabric.lid(RESPONDER_HOST)
            cls.ibping_lid = cls.fabric.lid(IBPING_HOST)
            base = ("collectors:\n  sysfs: {enabled: false}\n  ports: {enabled: false}\n"
                    "  sm: {enabled: false}\n  sriov: {enabled: false}\n")
            responder_cfg = os.path.join(cls.tmp.name, "responder.yaml")
            with open(responder_cfg, "w") as f:
                f.write(base + "  probe: {enabled: true, interval: 500ms, udp_listen: \"\", "
                        "probe_interval: 50ms, timeout: 1s, spike_floor: 50ms, "
                        "targets: [{name: %s}]}\n" % PROBER_HOST)
            # The discovered peer is named by the node-name-map (keyed by node GUID).
            silent_guid = parse_dotted(cls.fabric.run_tool(
                ["smpquery", "nodeinfo", str(cls.fabric.lid(SILENT_HOST))],
                host=PROBER_HOST).stdout)["Guid"]
            name_map = os.path.join(cls.tmp.name, "node-name-map")
            with open(name_map, "w") as f:
                f.write('%s "%s"\n' % (silent_guid, SILENT_NAME))
            prober_cfg = os.path.join(cls.tmp.name, "prober.yaml")
            with open(prober_cfg, "w") as f:
                f.write("node_name_map: %s\n" % name_map + base + "  probe:\n    enabled: true\n    interval: 500ms\n"
                        "    udp_listen: \"\"\n    discover: true\n"
                        "    probe_interval: 20ms\n    timeout: 1s\n"
                        "    max_probes_per_second: 1000\n"
                        "    spike_multiplier: 5\n    spike_floor: 50ms\n"
                        "    targets:\n      - {name: %s}\n      - {lid: %d, name: by-lid}\n"
                        "      - {name: %s}\n"
                        % (RESPONDER_HOST, cls.responder_lid, IBPING_HOST))
            # Both daemons answer and probe each other; the second starts while the first
            # already probes it (a daemon takes requests only once its responder is registered).
            env = dict(os.environ, SIM_SET_ISSM="1")
            cls.responder = cls.fabric.daemon(["--config", responder_cfg], host=RESPONDER_HOST,
                                              env=env)
            cls.prober = cls.fabric.daemon(["--config", prober_cfg], host=PROBER_HOST, env=env)
            cls.start_serving(cls.responder)
            cls.start_serving(cls.prober)
        except BaseException:
            cls.tearDownClass()
            raise

    @staticmethod
    def start_serving(daemon):
        daemon.start()
        deadline = time.monotonic() + 20
        while "mad: serving class 0x32" not in daemon.log():
            if time.monotonic() > deadline:
                raise AssertionError("daemon not serving:\n" + daemon.log())
            time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        for d in (cls.prober, cls.responder):
            if d and d.process and d.process.poll() is None:
                os.kill(d.process.pid, signal.SIGCONT)
                d.stop()
        cls.fabric.close()
        cls.tmp.cleanup()

    def value(self, samples, name, peer, **labels):
        s = find_sample(samples, name, peer=peer, transport="mad", **labels)
        return None if s is None else s.value

    def wait_received(self, peer, at_least, timeout=60):
        return self.prober.wait_for(
            lambda s: (self.value(s, "ibfabric_probe_received_total", peer) or 0) >= at_least,
            timeout=timeout, what="%d answered probes from %s" % (at_least, peer))

    def test_1_stock_ibping_gets_answers_from_the_daemon(self):
        r = self.fabric.run_tool(["ibping", "-f", "-c", "5", str(self.responder_lid)],
                                 host=SILENT_HOST, timeout=30)
        self.assertIn("5 packets transmitted, 5 received", r.stdout)
        # ibping names the host by what the answers carried, as ibping -S answers: the host name
        # (and domain, if any). Flooded (-f: back to back, not a second apart), it prints the
        # name in its statistics only.
        self.assertIn("--- %s" % socket.gethostname(), r.stdout)
        # Counted in the probe collector's next snapshot (every 500 ms here).
        self.responder.wait_for(
            lambda s: find_sample(s, "ibfabric_probe_responder_requests_total",
                                  transport="mad").value >= 5,
            timeout=10, what="5 answered requests counted")

    def answered(self, daemon, peers, at_least):
        return daemon.wait_for(
            lambda s: all((self.value(s, "ibfabric_probe_received_total", p) or 0)
                          >= at_least[p] for p in peers),
            timeout=60, what="answers from %s" % ", ".join(peers))

    def test_2_daemons_probe_each_other_by_name_and_lid(self):
        # Probes sent while the other daemon was starting or stopped (setUpClass) may be lost
        # or late; from the first answer on, none may be. Both daemons probe at once: each one's
        # first answers, then `more` answered probes each from there.
        runs = ((self.prober, (RESPONDER_HOST, "by-lid"), 300),
                (self.responder, (PROBER_HOST,), 50))
        firsts = [self.answered(daemon, peers, {p: 1 for p in peers})
                  for daemon, peers, _ in runs]
        for (daemon, peers, more), first in zip(runs, firsts):
            last = self.answered(daemon, peers, {
                p: self.value(first, "ibfabric_probe_received_total", p) + more for p in peers})
            for peer in peers:
                for name in ("ibfabric_probe_lost_total", "ibfabric_probe_spikes_total"):
                    self.assertEqual(self.value(last, name, peer), self.value(first, name, peer),
                                     "%s to %s" % (name, peer))
                # Every answer carried the responder's hold time.
                self.assertEqual(
                    self.value(last, "ibfabric_probe_network_rtt_seconds_count", peer),
                    self.value(last, "ibfabric_probe_received_total", peer), peer)
                self.assertLessEqual(
                    self.value(last, "ibfabric_probe_network_rtt_seconds_sum", peer),
                    self.value(last, "ibfabric_probe_rtt_seconds_sum", peer))
        samples = self.prober.samples()
        p50 = self.value(samples, "ibfabric_probe_rtt_window_seconds", RESPONDER_HOST, stat="p50")
        p99 = self.value(samples, "ibfabric_probe_rtt_window_seconds", RESPONDER_HOST, stat="p99")
        self.assertGreater(p50, 0)
        self.assertLessEqual(p50, p99)
        print("steady over MAD: %d probes, p50 %.1f us, p99 %.1f us" % (
            self.value(samples, "ibfabric_probe_received_total", RESPONDER_HOST), p50 * 1e6,
            p99 * 1e6))

    def test_3_discovery_adds_other_cas_never_this_node(self):
        samples = self.prober.wait_for(
            lambda s: (self.value(s, "ibfabric_probe_lost_total", SILENT_NAME) or 0) >= 3,
            what="lost probes to the discovered silent node")
        peers = {s.labels["peer"] for s in find_samples(samples, "ibfabric_probe_sent_total",
                                                        transport="mad")}
        # Configured: two names resolved through the SA, one LID. Discovered: under the
        # simulator the SA's NodeRecord table arrives as its first RMPP segment only (the shim
        # does no RMPP), which holds one record, Hca1's; on a real host the kernel reassembles
        # the whole table. Hca1 is named by the node-name-map.
        self.assertEqual(peers, {SILENT_NAME, IBPING_HOST, RESPONDER_HOST, "by-lid"})
        self.assertNotIn(PROBER_HOST, peers)
        self.assertEqual(self.value(samples, "ibfabric_probe_received_total", SILENT_NAME), 0)
        self.assertEqual(find_sample(samples, "ibfabric_probe_peers").value, 4)

    def test_4_a_paused_responder_makes_spikes(self):
        before = parse_exposition(self.prober.scrape())
        count_before = self.value(before, "ibfabric_probe_rtt_seconds_count", RESPONDER_HOST)
        slow_before = count_before - self.value(before, "ibfabric_probe_rtt_seconds_bucket",
                                                RESPONDER_HOST, le="0.05")
        for _ in range(3):
            self.responder.signal(signal.SIGSTOP)
            time.sleep(0.2)
            self.responder.signal(signal.SIGCONT)
            time.sleep(0.5)
        samples = self.wait_received(RESPONDER_HOST, count_before + 50)
        self.assertGreaterEqual(self.value(samples, "ibfabric_probe_spikes_total",
                                           RESPONDER_HOST), 1)
        slow = (self.value(samples, "ibfabric_probe_rtt_seconds_count", RESPONDER_HOST) -
                self.value(samples, "ibfabric_probe_rtt_seconds_bucket", RESPONDER_HOST,
                           le="0.05"))
        self.assertGreater(slow, slow_before)
        self.assertIn("RTT spike peer=%s transport=mad" % RESPONDER_HOST, self.prober.log())

    def test_5_daemon_probes_stock_ibping_server(self):
        self.assertEqual(self.value(self.prober.samples(), "ibfabric_probe_received_total",
                                    IBPING_HOST), 0)
        # Even with ignore_other_sm, opensm now and then asks a new IsSM port for its SMInfo,
        # which crashes `ibping -S` under the shim. The fabric keeps its LIDs and routes
        # without its SM, and the prober resolved Hca2 already.
        self.sm.stop()
        # Nor may a probe reach ibping -S before it registered its agent: under the shim that
        # ends it (a daemon takes requests only once registered; ibping -S takes them from its
        # first access of the IB stack).
        self.prober.signal(signal.SIGSTOP)
        try:
            server = self.fabric.spawn("ibping-S", ["ibping", "-S"], host=IBPING_HOST,
                                       env=dict(os.environ, SIM_SET_ISSM="1"))
            time.sleep(1)
        finally:
            self.prober.signal(signal.SIGCONT)
        try:
            samples = self.wait_received(IBPING_HOST, 20)
        except AssertionError:
            raise AssertionError("ibping -S %s:\n%s\nprober:\n%s" % (
                "running" if server.alive() else "exited", server.log()[-2000:],
                self.prober.log()[-3000:]))
        # ibping -S says nothing of its own time: round trips only, no network share.
        self.assertGreaterEqual(self.value(samples, "ibfabric_probe_rtt_seconds_count",
                                           IBPING_HOST), 20)
        self.assertEqual(self.value(samples, "ibfabric_probe_network_rtt_seconds_count",
                                    IBPING_HOST), 0)

    def test_6_a_new_daemon_serves_from_its_start(self):
        # The responder registers as soon as its port opens, not at the probe collector's
        # next run (15 s by default here): stock ibping gets every answer from the start. The
        # prober (which discovered this CA) goes on probing while it starts; opensm is stopped
        # (test 5).
        config = os.path.join(self.tmp.name, "fresh.yaml")
        with open(config, "w") as f:
            f.write("collectors:\n  sysfs: {enabled: false}\n  ports: {enabled: false}\n"
                    "  sm: {enabled: false}\n  sriov: {enabled: false}\n"
                    "  probe: {enabled: true, udp_listen: \"\"}\n")
        fresh = self.fabric.daemon(["--config", config], host=SILENT_HOST,
                                   env=dict(os.environ, SIM_SET_ISSM="1"))
        try:
            started = time.monotonic()
            self.start_serving(fresh)
            serving_after = time.monotonic() - started
            self.assertLess(serving_after, 5, "serving only %.1f s after start" % serving_after)
            silent_lid = self.fabric.lid(SILENT_HOST)
            r = self.fabric.run_tool(["ibping", "-f", "-c", "5", str(silent_lid)],
                                     host=PROBER_HOST, timeout=30)
            self.assertIn("5 packets transmitted, 5 received", r.stdout)
            self.assertIsNone(fresh.process.poll(), fresh.log())
        finally:
            fresh.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
