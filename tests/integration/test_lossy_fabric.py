"""A lossy fabric is not a down fabric (issue 22): on a small simulated fat tree (ibsim + opensm
under the umad shim, see tests/lib/simfabric.py) with MAD drops of 30 to 100 % on ports along
the daemon's MAD paths, the `fabric` sweep and the `ports` collector keep every series they had
(a port whose queries were lost keeps its last values and says how old they are in
*_stale_seconds), report no port down, keep every switch and cable in the topology, and count
the lost queries; a real `Unlink` under the same drops still shows as down."""

import os
import time
import unittest

from ibfabric_testlib import find_sample, find_samples, require_tools
from gen_fattree import fattree
from simfabric import SIM_TOOLS, SimFabric

# 4 leaves x 3 HCAs, 2 spines, 5 ports per switch: 6 switches, 30 switch ports (28 cabled).
LEAVES, SPINES, HCAS = 4, 2, 3
SWITCH_PORTS = 5
HOST = "node-004 mlx5_0"  # on leaf-02 port 1; opensm runs on node-001 (leaf-01)
INTERVAL = 2.0            # fabric sweep interval, seconds
# Drops on the daemon's MAD paths. ibsim drops that share of the MADs that enter the node they
# are addressed to through that port (checked here with perfquery: a MAD only passing through
# the port, or an answer, is not dropped; port 0 of a switch stands for every port): the
# daemon's MADs to its own HCA (directed route 0, its own PMA), to spine-01 through the cable
# from the daemon's leaf, to leaf-03 through spine-02 and to leaf-04 through spine-01.
LOSSY = [(HOST, 1, 30), ("spine-01", 2, 50), ("leaf-03", 5, 50), ("leaf-04", 4, 50)]
SWITCHES = ["leaf-%02d" % i for i in range(1, LEAVES + 1)] + \
    ["spine-%02d" % i for i in range(1, SPINES + 1)]
PORT_COUNTERS_EXTENDED = 29  # attribute ID 0x1d, for ibsim's per-attribute Error

CONFIG = """\
mad: {timeout: 100ms, retries: 2}
collectors:
  sysfs: {enabled: false}
  sm: {enabled: false}
  ports: {interval: 1s}
  fabric: {enabled: true, interval: 2s, rediscover_every: 2}
"""

FABRIC_PORT = "ibfabric_fabric_port_"
PORTS = "ibfabric_ports_"
# Series that may come and go: the staleness gauges themselves, and counters that appear on a
# first failure.
VOLATILE = ("_stale_seconds", "_query_errors_total",
            "_counters_saturated")


def value(samples, name, **labels):
    s = find_sample(samples, name, **labels)
    return None if s is None else s.value


def series(samples, prefixes):
    """{(name, labels)} of the per-port series of the given families."""
    return {(s.name, tuple(sorted(s.labels.items()))) for s in samples
            if s.name.startswith(prefixes) and not s.name.endswith(VOLATILE)}


def runs(samples, collector="fabric"):
    return value(samples, "ibfabric_collector_runs_total", collector=collector) or 0


@require_tools(*SIM_TOOLS)
class LossyFabricTest(unittest.TestCase):

    def setUp(self):
        self.f = SimFabric(fattree(LEAVES, SPINES, HCAS, SWITCH_PORTS), name="lossy")
        self.f.start()
        self.addCleanup(self.f.close)
        self.f.wait_ready(hosts=[HOST])
        # The SM has set every LID and route by now. Left running, it loses its own SMPs to the
        # drops below and re-initializes links (seen: an uplink went to INIT for a sweep), so the
        # links would not stay up, which is this test's ground truth. The unlink at the end is
        # ibsim's own and needs no SM to show.
        for sm in self.f.sms:
            sm.stop()
        path = os.path.join(self.f.workdir, "lossy.yaml")
        with open(path, "w") as f:
            f.write(CONFIG)
        self.config = path

    def errors(self, entries, attribute=None):
        for node, port, rate in entries:
            self.f.command('Error "%s"[%d] %d%s' % (node, port, rate,
                                                   "" if attribute is None else " %d" % attribute),
                           settle=0)

    def next_sweeps(self, d, n=1, timeout=30):
        """Samples from a snapshot made by a sweep that started after this call."""
        start = runs(d.samples())
        return d.wait_for(lambda s: runs(s) >= start + n + 1, timeout=timeout, interval=0.1,
                          what="%d more sweeps" % (n + 1))

    def check_nothing_lost(self, s, base, where):
        """Every series of the baseline is there, with every port's state as it was."""
        missing = base["fabric"] - series(s, FABRIC_PORT)
        self.assertFalse(missing, "%s: %d fabric series gone, e.g. %s; %s\n%s" % (
            where, len(missing), sorted(missing)[:5],
            {x.name: x.value for x in s if x.name.startswith(("ibfabric_fabric_ports",
                                                              "ibfabric_fabric_switches"))},
            self.d.log()[-3000:]))
        missing = base["ports"] - series(s, PORTS)
        self.assertFalse(missing, "%s: ports series gone: %s; now %s" % (
            where, sorted(missing)[:5], [x.labels for x in find_samples(s, "ibfabric_ports_info")]))
        for x in find_samples(s, "ibfabric_fabric_port_state"):
            key = (x.labels["node_guid"], x.labels["port"])
            self.assertEqual(x.value, base["state"][key], "%s: port %s" % (where, key))
        for side in ("local", "peer"):
            self.assertEqual(value(s, "ibfabric_ports_state", side=side, device="ibsim0",
                                   port="1"), 4, "%s: %s" % (where, side))
        self.assertEqual(len(find_samples(s, "ibfabric_fabric_node_info")), base["nodes"], where)
        self.assertEqual(value(s, "ibfabric_fabric_nodes", node_type="switch"),
                         LEAVES + SPINES, where)
        links = {tuple(sorted(x.labels.items())) for x in find_samples(s,
                                                                      "ibfabric_fabric_link_info")}
        self.assertEqual(links, base["links"], where)
        # ports_swept counts ports read whole in this sweep, ports_failed the others; the stale
        # ones are among the failed.
        swept = value(s, "ibfabric_fabric_ports_swept")
        failed = value(s, "ibfabric_fabric_ports_failed")
        stale = value(s, "ibfabric_fabric_ports_stale")
        self.assertEqual(swept + failed, base["total_ports"], where)
        self.assertLessEqual(stale, failed, where)
        self.assertEqual(len(find_samples(s, "ibfabric_fabric_port_stale_seconds")), stale, where)
        self.assertEqual(value(s, "ibfabric_collector_success", collector="fabric"), 1,
                         "%s\n%s" % (where, self.d.log()[-3000:]))

    def test_lossy_fabric_keeps_its_series_and_a_real_unlink_still_shows(self):
        t0 = time.monotonic()
        with self.f.daemon(["--config", self.config], host=HOST) as d:
            self.d = d
            total = (LEAVES + SPINES) * SWITCH_PORTS
            s = d.wait_for(lambda s: value(s, "ibfabric_fabric_ports_swept") == total and
                           value(s, "ibfabric_ports_state", side="peer", device="ibsim0",
                                 port="1") == 4,
                           timeout=30, what="a whole sweep and the peer read")
            base = {
                "fabric": series(s, FABRIC_PORT),
                "ports": series(s, PORTS),
                "state": {(x.labels["node_guid"], x.labels["port"]): x.value
                          for x in find_samples(s, "ibfabric_fabric_port_state")},
                "nodes": len(find_samples(s, "ibfabric_fabric_node_info")),
                "links": {tuple(sorted(x.labels.items()))
                          for x in find_samples(s, "ibfabric_fabric_link_info")},
                "total_ports": total,
            }
            self.assertEqual(len(base["state"]), total)
            cabled = LEAVES * (HCAS + SPINES) + SPINES * LEAVES
            self.assertEqual(sum(v == 4 for v in base["state"].values()), cabled)
            self.assertEqual(base["nodes"], LEAVES + SPINES + LEAVES * HCAS)
            self.assertIsNone(find_sample(s, "ibfabric_fabric_port_stale_seconds"))
            self.assertEqual(value(s, "ibfabric_fabric_ports_stale"), 0)
            names = {x.labels["node_description"]: x.labels["node_guid"]
                     for x in find_samples(s, "ibfabric_fabric_node_info")}

            # 1. Random drops of 30-50 % on the daemon's paths, for several sweeps (and at
            # least one rediscovery): every scrape keeps every series and every state.
            self.errors(LOSSY)
            try:
                start = runs(s)
                failed_seen = stale_seen = scrapes = 0
                # Six sweeps of 1 s under drops, each query retried at most twice: 90 s is
                # far past what they take, and a sweep that stopped fails here, not at ctest's
                # timeout.
                deadline = time.monotonic() + 90
                while runs(s) < start + 6:
                    self.assertLess(time.monotonic(), deadline,
                                    "6 sweeps under drops not done in 90 s (done: %d)"
                                    % (runs(s) - start))
                    s = d.samples()
                    scrapes += 1
                    self.check_nothing_lost(s, base, "scrape %d under drops" % scrapes)
                    failed_seen = max(failed_seen, value(s, "ibfabric_fabric_ports_failed"))
                    stale_seen = max(stale_seen, value(s, "ibfabric_fabric_ports_stale"))
                    time.sleep(0.3)
                print("\n%d scrapes under drops over 6 sweeps: up to %d ports failed, %d stale"
                      % (scrapes, failed_seen, stale_seen))
                # The drops did cost queries (else this test would prove nothing), and they
                # were counted.
                self.assertGreater(failed_seen, 0)
                self.assertGreater(stale_seen, 0)
                self.assertGreater(sum(x.value for x in find_samples(
                    s, "ibfabric_fabric_query_errors_total", phase="sweep")), 0)
                self.assertGreater(sum(x.value for x in find_samples(
                    s, "ibfabric_fabric_switch_timeouts_total")), 0)
                self.assertGreater(sum(x.value for x in find_samples(
                    s, "ibfabric_mad_timeouts_total")), 0)
                self.assertGreaterEqual(value(s, "ibfabric_fabric_discoveries_total"), 2)

                # 2. Every PortCountersExtended query is lost (every switch, and the daemon's own
                # HCA): every switch port keeps the data counters it last read, and their age
                # grows sweep by sweep.
                no_extended = [(sw, 0, 100) for sw in SWITCHES] + [(HOST, 1, 100)]
                self.errors(no_extended, attribute=PORT_COUNTERS_EXTENDED)
                try:
                    self.next_sweeps(d)
                    ages = []
                    for n in range(2):
                        s = self.next_sweeps(d, 0)
                        self.check_nothing_lost(s, base, "sweep %d without extended counters"
                                                % (n + 1))
                        self.assertEqual(value(s, "ibfabric_fabric_ports_stale"), total, (
                            value(s, "ibfabric_fabric_ports_failed"),
                            [(x.labels, x.value) for x in find_samples(
                                s, "ibfabric_fabric_query_errors_total")]))
                        ages.append({(x.labels["node_guid"], x.labels["port"]): x.value
                                     for x in find_samples(s, "ibfabric_fabric_port_stale_seconds")})
                        if n == 0:
                            packets = {(x.labels["node_guid"], x.labels["port"]): x.value
                                       for x in find_samples(
                                           s, "ibfabric_fabric_port_transmit_packets_total")}
                    self.assertEqual(len(ages[1]), total)
                    for key, age in ages[1].items():
                        self.assertGreater(age, ages[0][key] + INTERVAL / 2, key)
                    # The remembered values, not fresh ones: MAD traffic moves data counters.
                    self.assertEqual({(x.labels["node_guid"], x.labels["port"]): x.value
                                      for x in find_samples(
                                          s, "ibfabric_fabric_port_transmit_packets_total")},
                                     packets)
                    # The peer's (leaf-02's) extended counters: lost too, kept, with their age.
                    s = d.wait_for(lambda s: value(s, "ibfabric_ports_stale_seconds",
                                                   side="peer", device="ibsim0", port="1"),
                                   timeout=10, what="the peer's counters reported stale")
                    self.check_nothing_lost(s, base, "ports collector without extended counters")
                finally:
                    self.errors([(node, port, 0) for node, port, _ in no_extended],
                                attribute=PORT_COUNTERS_EXTENDED)
                    self.errors([(HOST, 1, 30)])

                # 3. A real unlink under the same drops shows as down: port 3 of leaf-04 (an
                # HCA's cable) goes DOWN, the series stay.
                self.f.command('Unlink "leaf-04"[3]', settle=0)
                leaf4 = names["leaf-04"]
                s = d.wait_for(lambda s: value(s, "ibfabric_fabric_port_state",
                                               node_guid=leaf4, port="3") == 1,
                               timeout=20, what="leaf-04 port 3 DOWN")
                link = find_sample(s, "ibfabric_fabric_link_info", node_guid=leaf4, port="3")
                self.assertIsNotNone(link, "the unlinked cable is still named")
                self.assertEqual(link.labels["remote_node_name"], "node-012 mlx5_0")
            finally:
                self.errors([(node, port, 0) for node, port, _ in LOSSY])
            # Without drops, nothing is stale any more.
            s = self.next_sweeps(d)
            self.assertEqual(value(s, "ibfabric_fabric_ports_stale"), 0)
            self.assertIsNone(find_sample(s, "ibfabric_fabric_port_stale_seconds"))
        print("test ran %.1fs" % (time.monotonic() - t0))

    def test_a_switch_silent_for_longer_than_keep_unread_is_gone_and_comes_back(self):
        """The bound: values older than keep_unread are dropped, and a switch that answered
        nothing for that long leaves the topology; it returns when it answers again."""
        path = os.path.join(self.f.workdir, "bound.yaml")
        with open(path, "w") as f:
            f.write("mad: {timeout: 100ms, retries: 1}\ncollectors:\n"
                    "  sysfs: {enabled: false}\n  sm: {enabled: false}\n"
                    "  ports: {enabled: false}\n"
                    "  fabric: {enabled: true, interval: 1s, rediscover_every: 2, "
                    "keep_unread: 3s}\n")
        total = (LEAVES + SPINES) * SWITCH_PORTS
        with self.f.daemon(["--config", path], host=HOST) as d:
            s = d.wait_for(lambda s: value(s, "ibfabric_fabric_ports_swept") == total,
                           timeout=30, what="a whole sweep")
            leaf3 = find_sample(s, "ibfabric_fabric_node_info",
                                node_description="leaf-03").labels["node_guid"]
            # Every MAD to leaf-03 enters it through one of its two uplinks (port 0 would drop
            # only the LID-routed ones: directed-route SMPs still reached it, seen here).
            uplinks = [("leaf-03", HCAS + 1 + n) for n in range(SPINES)]
            self.errors([(node, port, 100) for node, port in uplinks])
            try:
                s = d.wait_for(lambda s: value(s, "ibfabric_fabric_ports_stale") == SWITCH_PORTS,
                               timeout=10, what="leaf-03's ports stale")
                started = time.monotonic()
                self.assertEqual(len(find_samples(s, "ibfabric_fabric_port_state",
                                                  node_guid=leaf3)), SWITCH_PORTS)
                self.assertEqual(value(s, "ibfabric_fabric_nodes", node_type="switch"), 6)
                # Past keep_unread (3 s): its values are gone, and so is the switch.
                s = d.wait_for(lambda s: value(s, "ibfabric_fabric_nodes",
                                               node_type="switch") == 5,
                               timeout=20, what="leaf-03 dropped from the topology")
                self.assertGreater(time.monotonic() - started, 2.0)
                self.assertEqual(find_samples(s, "ibfabric_fabric_port_state", node_guid=leaf3),
                                 [])
                self.assertEqual(value(s, "ibfabric_fabric_ports_stale"), 0)
                self.assertEqual(len(find_samples(s, "ibfabric_fabric_port_state")),
                                 total - SWITCH_PORTS)
                # Its cables are still named (link_memory, 24h by default).
                self.assertTrue(find_samples(s, "ibfabric_fabric_link_info", node_guid=leaf3))
            finally:
                self.errors([(node, port, 0) for node, port in uplinks])
            d.wait_for(lambda s: value(s, "ibfabric_fabric_ports_swept") == total and
                       value(s, "ibfabric_fabric_nodes", node_type="switch") == 6,
                       timeout=20, what="leaf-03 back")

    def test_a_cable_down_before_a_restart_is_still_down_and_named_after_it(self):
        """Issue 22, item 1: link memory survives a restart through the state directory."""
        t0 = time.monotonic()
        far = "node-012 mlx5_0"  # on leaf-04 port 3

        def config(name, text):
            path = os.path.join(self.f.workdir, name)
            with open(path, "w") as f:
                f.write(text)
            return path

        state_a = os.path.join(self.f.workdir, "state-a")
        state_b = os.path.join(self.f.workdir, "state-b")
        os.mkdir(state_a)
        os.mkdir(state_b)
        # A sweeps the fabric from node-004; B runs on the host whose cable is unlinked.
        conf_a = config("a.yaml", "state_directory: %s\n%s" % (state_a, CONFIG))
        conf_b = config("b.yaml", "state_directory: %s\nmad: {timeout: 100ms}\ncollectors:\n"
                        "  sysfs: {enabled: false}\n  sm: {enabled: false}\n"
                        "  ports: {interval: 1s}\n" % state_b)
        port = {"device": "ibsim0", "port": "1"}

        def written(s, collector):
            return (value(s, "ibfabric_state_writes_total", collector=collector) or 0) >= 1

        def fabric_down_and_named(s):
            link = find_sample(s, "ibfabric_fabric_link_info", node_guid=self.leaf4, port="3")
            return (value(s, "ibfabric_fabric_port_state", node_guid=self.leaf4, port="3") == 1
                    and link is not None and link.labels["remote_node_name"] == far and link)

        def host_down_and_named(s):
            peer = find_sample(s, "ibfabric_ports_peer_info", **port)
            return (value(s, "ibfabric_ports_state", side="local", **port) == 1 and
                    peer is not None and peer.labels["peer_node_name"] == "leaf-04" and
                    peer.labels["peer_port"] == "3" and peer)

        with self.f.daemon(["--config", conf_a], host=HOST) as a, \
                self.f.daemon(["--config", conf_b], host=far) as b:
            s = a.wait_for(lambda s: value(s, "ibfabric_fabric_ports_swept") ==
                           (LEAVES + SPINES) * SWITCH_PORTS and written(s, "fabric"),
                           timeout=30, what="a sweep and the fabric state written")
            self.leaf4 = find_sample(s, "ibfabric_fabric_node_info",
                                     node_description="leaf-04").labels["node_guid"]
            b.wait_for(lambda s: find_sample(s, "ibfabric_ports_peer_info", **port) and
                       written(s, "ports"), timeout=30, what="B's peer read and its state written")
            self.f.command('Unlink "leaf-04"[3]', settle=0)
            a.wait_for(fabric_down_and_named, timeout=20, what="leaf-04 port 3 down, named")
            b.wait_for(host_down_and_named, timeout=20, what="B's port down, its peer named")
        with open(os.path.join(state_a, "fabric.state")) as f:
            self.assertIn("node-012%20mlx5_0", f.read())

        # Restarted: the cable is still down and still named at both ends, from the state files.
        with self.f.daemon(["--config", conf_a], host=HOST) as a, \
                self.f.daemon(["--config", conf_b], host=far) as b:
            s = a.wait_for(fabric_down_and_named, timeout=30,
                           what="after a restart, leaf-04 port 3 down and still named")
            self.assertGreaterEqual(value(s, "ibfabric_state_restored_links", collector="fabric"),
                                    1)
            self.assertEqual(value(s, "ibfabric_state_files_ignored_total", collector="fabric"),
                             0)
            s = b.wait_for(host_down_and_named, timeout=30,
                           what="after a restart, B's port down and its peer still named")
            self.assertEqual(value(s, "ibfabric_state_restored_links", collector="ports"), 1)

        # A state file that is not this fabric's (another subnet: the GID prefix differs) or
        # not one at all (garbage) is ignored with one warning and counted; the daemon runs as
        # without it, and the down cable is no longer named: what the state file brought back
        # above is not there without it.
        with open(os.path.join(state_a, "fabric.state"), "rb") as f:
            good = f.read()
        self.assertIn(b" 0xfe80000000000000 ", good)  # ibsim's default subnet prefix
        for bad in (good.replace(b" 0xfe80000000000000 ", b" 0xfe80000000000001 "),
                    b"ibfabric-state 1 fabric\norigin 0x\x00\xff garbage\n"):
            with open(os.path.join(state_a, "fabric.state"), "wb") as f:
                f.write(bad)
            with self.f.daemon(["--config", conf_a], host=HOST) as a:
                s = a.wait_for(lambda s: value(s, "ibfabric_fabric_port_state",
                                               node_guid=self.leaf4, port="3") == 1,
                               timeout=30, what="a sweep")
                self.assertEqual(value(s, "ibfabric_state_files_ignored_total",
                                       collector="fabric"), 1)
                self.assertIsNone(find_sample(s, "ibfabric_fabric_link_info",
                                              node_guid=self.leaf4, port="3"))
                self.assertEqual(len(find_samples(s, "ibfabric_fabric_port_state")),
                                 (LEAVES + SPINES) * SWITCH_PORTS)
                self.assertEqual(value(s, "ibfabric_collector_success", collector="fabric"), 1)
                log = a.log()
            self.assertEqual(log.count("state file ignored"), 1, log[-2000:])
        print("\ntest ran %.1fs" % (time.monotonic() - t0))

    def test_a_daemon_killed_before_its_deferred_save_restores_the_last_file_written(self):
        """docs/design.md, "State that survives a restart": the state file is written at most
        once a minute, into a temporary file renamed over it, so a crash leaves the previous
        file whole, and what changed since the last write is learned again by the next
        discovery, except a cable that went down within that minute after it was first seen.
        So after a SIGKILL that comes before a deferred save, the next start restores the last
        file written: a cable of that write that is down now is still named, and one first seen
        after it and down since is not."""
        state = os.path.join(self.f.workdir, "state")
        os.mkdir(state)
        path = os.path.join(self.f.workdir, "killed.yaml")
        with open(path, "w") as f:
            f.write("state_directory: %s\n%s" % (state, CONFIG))
        old = "node-012 mlx5_0"  # on leaf-04 port 3: seen by the first discovery
        new = "node-008 mlx5_0"  # on leaf-03 port 2: cabled only after the first write
        self.f.command('Unlink "%s"[1]' % new, settle=0)

        def writes(s):
            return value(s, "ibfabric_state_writes_total", collector="fabric") or 0

        def link(s, leaf, port):
            return find_sample(s, "ibfabric_fabric_link_info", node_guid=leaf, port=port)

        def down(s, leaf, port):
            return value(s, "ibfabric_fabric_port_state", node_guid=leaf, port=port) == 1

        d = self.f.daemon(["--config", path], host=HOST)
        d.start()
        try:
            s = d.wait_for(lambda s: writes(s) == 1, timeout=30, what="the first state write")
            first_write = time.monotonic()
            leaves = {x.labels["node_description"]: x.labels["node_guid"]
                      for x in find_samples(s, "ibfabric_fabric_node_info", node_type="switch")}
            leaf3, leaf4 = leaves["leaf-03"], leaves["leaf-04"]
            self.assertIsNone(link(s, leaf3, "2"))
            # Within the minute after that write: the new cable is seen, so the state changed
            # and its save waits for the minute to pass; then both cables go down.
            self.f.command('ReLink "%s"' % new, settle=0)
            s = d.wait_for(lambda s: link(s, leaf3, "2") is not None, timeout=30,
                           what="the new cable discovered")
            self.assertEqual(link(s, leaf3, "2").labels["remote_node_name"], new)
            self.f.command('Unlink "%s"[1]' % new, settle=0)
            self.f.command('Unlink "%s"[1]' % old, settle=0)
            s = d.wait_for(lambda s: down(s, leaf3, "2") and down(s, leaf4, "3"), timeout=30,
                           what="both cables down")
            self.assertIsNotNone(link(s, leaf3, "2"), "named in the process's own memory")
            self.assertEqual(writes(s), 1, "written again %.0f s after the first write%s" % (
                time.monotonic() - first_write,
                " (a minute passed: the machine was too slow for this test's premise)"
                if time.monotonic() - first_write >= 60 else ": not deferred to the minute"))
        finally:
            d.process.kill()
            d.process.wait()
            d.stop()
            self.f.reclaim_clients([d.process.pid])
        with open(os.path.join(state, "fabric.state")) as f:
            text = f.read()
        self.assertIn("node-012%20mlx5_0", text)
        self.assertNotIn("node-008", text)

        with self.f.daemon(["--config", path], host=HOST) as d:
            s = d.wait_for(lambda s: down(s, leaf4, "3") and down(s, leaf3, "2") and
                           link(s, leaf4, "3") is not None, timeout=30,
                           what="after the restart, both cables down, the old one named")
            self.assertEqual(link(s, leaf4, "3").labels["remote_node_name"], old)
            self.assertIsNone(link(s, leaf3, "2"), "a cable the last write did not have")
            self.assertEqual(value(s, "ibfabric_state_files_ignored_total", collector="fabric"),
                             0)
            self.assertGreaterEqual(value(s, "ibfabric_state_restored_links", collector="fabric"),
                                    1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
