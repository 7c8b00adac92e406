"""The `ports` collector and the MAD engine against a simulated fabric (ibsim + opensm under the
umad shim, see tests/lib/simfabric.py): values equal what perfquery and smpquery report for the
same ports, link changes show within a poll, MAD drops show as timeouts and retries, and a dead
or frozen simulator does not take the daemon down."""

import os
import signal
import subprocess
import time
import unittest

from ibfabric_testlib import find_sample, find_samples, ibfabricd_path, parse_exposition, \
    require_tools
from pma_counters import DATA_COUNTERS, ERROR_COUNTERS
from simfabric import SIM_TOOLS, SimFabric, parse_dotted

TOPOLOGY = "/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca"
HOST = "Hca2"          # the node the daemon runs on; opensm runs on Hca1
PEER = "Switch2"       # what Hca2's port 1 is cabled to (Switch2 port 1)
LOCAL = {"device": "ibsim0", "port": "1"}


# Values of the test's choosing; the extended ones above 2^32. Each side gets different ones so
# a local/peer mix-up cannot pass. (ibsim accepts PortMulticastRcvPkts but its PMA always
# answers 0 for it, so it is left at 0; it is still compared with perfquery.)
ERROR_VALUES = {
    "local": {"SymbolErrorCounter": 65535, "LinkDownedCounter": 7, "PortRcvErrors": 321,
              "PortXmitDiscards": 42, "LocalLinkIntegrityErrors": 3, "PortXmitWait": 123456,
              "ExcessiveBufferOverrunErrors": 2, "VL15Dropped": 9},
    "peer": {"SymbolErrorCounter": 11, "LinkErrorRecoveryCounter": 255, "PortRcvErrors": 1000,
             "PortRcvSwitchRelayErrors": 17, "PortXmitWait": 4000000000,
             "PortXmitConstraintErrors": 5},
}
EXT_VALUES = {
    "local": {"PortXmitData": (1 << 40) + 5, "PortRcvData": (1 << 33) + 7,
              "PortXmitPkts": (1 << 35) + 1, "PortRcvPkts": (1 << 32) + 99,
              "PortUnicastXmitPkts": (1 << 34) + 3},
    "peer": {"PortXmitData": (1 << 45) + 11, "PortRcvData": (1 << 41) + 13,
             "PortXmitPkts": (1 << 33) + 5, "PortRcvPkts": (1 << 37) + 21,
             "PortUnicastRcvPkts": (1 << 38) + 1, "PortMulticastXmitPkts": (1 << 33) + 2},
}

LINK_STATES = {"Down": 1, "Initialize": 2, "Armed": 3, "Active": 4}
PHYS_STATES = {"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4,
               "LinkUp": 5, "LinkErrorRecovery": 6}


def write_config(fabric, interval="1s", timeout="100ms", retries=2, extra=""):
    path = os.path.join(fabric.workdir, "ibfabricd.yaml")
    with open(path, "w") as f:
        f.write("collectors:\n"
                "  sysfs: {enabled: false}\n"
                "  ports: {interval: %s}\n"
                "mad:\n"
                "  timeout: %s\n"
                "  retries: %d\n%s" % (interval, timeout, retries, extra))
    return path


def run_once(fabric, config):
    r = subprocess.run([ibfabricd_path(), "--once", "--config", config], env=fabric.env(HOST),
                       cwd=fabric.workdir, capture_output=True, text=True, timeout=60)
    return r, parse_exposition(r.stdout) if r.stdout else []


def value(samples, name, **labels):
    s = find_sample(samples, name, **labels)
    return None if s is None else s.value


class Tools:
    """perfquery/smpquery against the ports the daemon reads, from the daemon's node."""

    def __init__(self, fabric):
        self.f = fabric

    def local_lid(self):
        return int(parse_dotted(self.f.run_tool(["smpquery", "-D", "portinfo", "0", "1"],
                                                host=HOST).stdout)["Lid"])

    def peer_lid(self):
        # A switch's LID is in its port 0's PortInfo.
        return int(parse_dotted(self.f.run_tool(["smpquery", "-D", "portinfo", "0,1", "0"],
                                                host=HOST).stdout)["Lid"])

    def counters(self, lid, port):
        basic = parse_dotted(self.f.run_tool(["perfquery", str(lid), str(port)], host=HOST).stdout)
        ext = parse_dotted(self.f.run_tool(["perfquery", "-x", str(lid), str(port)],
                                           host=HOST).stdout)
        return basic, ext

    def portinfo(self, path, port):
        return parse_dotted(self.f.run_tool(["smpquery", "-D", "portinfo", path, str(port)],
                                            host=HOST).stdout)


@require_tools(*SIM_TOOLS, "smpquery")
class PortsTest(unittest.TestCase):

    def fabric(self, name):
        f = SimFabric(TOPOLOGY, name=name)
        f.start()
        self.addCleanup(f.close)
        return f

    def set_counters(self, f):
        for side, node in (("local", HOST), ("peer", PEER)):
            for field, v in ERROR_VALUES[side].items():
                f.perf_set(node, 1, field, v)
            for field, v in EXT_VALUES[side].items():
                f.perf_set(node, 1, field, v, extended=True)
        time.sleep(0.3)

    def check_counters(self, f, samples_fn, tools, may_grow=()):
        """samples_fn() collects once; the tools read before and after it, so every data
        counter (which our own MADs keep moving) must lie between the two readings and every
        error counter must equal both. Counters in `may_grow` may have moved up since they
        were set (ibsim counts the MADs it drops as PortRcvErrors)."""
        lids = {"local": (tools.local_lid(), 1), "peer": (tools.peer_lid(), 1)}
        before = {side: tools.counters(*lids[side]) for side in lids}
        samples = samples_fn()
        after = {side: tools.counters(*lids[side]) for side in lids}
        for side in ("local", "peer"):
            labels = dict(LOCAL, side=side)
            for metric, field in ERROR_COUNTERS.items():
                got = value(samples, "ibfabric_ports_" + metric, **labels)
                self.assertIsNotNone(got, "%s %s missing" % (side, metric))
                self.assertEqual(int(before[side][0][field]), int(after[side][0][field]), field)
                self.assertEqual(got, int(before[side][0][field]), "%s %s" % (side, metric))
            for metric, (field, scale) in DATA_COUNTERS.items():
                got = value(samples, "ibfabric_ports_" + metric, **labels)
                self.assertIsNotNone(got, "%s %s missing" % (side, metric))
                lo, hi = int(before[side][1][field]) * scale, int(after[side][1][field]) * scale
                self.assertTrue(lo <= got <= hi, "%s %s: %d not in [%d, %d]"
                                % (side, metric, got, lo, hi))
                if field in EXT_VALUES[side]:
                    self.assertGreaterEqual(got, EXT_VALUES[side][field] * scale)
            for field, v in ERROR_VALUES[side].items():
                if field in may_grow:
                    self.assertGreaterEqual(int(before[side][0][field]), v, field)
                else:
                    self.assertEqual(int(before[side][0][field]), v, "PerformanceSet %s" % field)
        return samples, lids

    def test_values_equal_perfquery_and_smpquery(self):
        f = self.fabric("values")
        tools = Tools(f)
        self.set_counters(f)
        config = write_config(f)
        results = []

        def collect():
            r, samples = run_once(f, config)
            results.append(r)
            self.assertEqual(r.returncode, 0, r.stderr)
            return samples

        samples, lids = self.check_counters(f, collect, tools)
        self.assertEqual(value(samples, "ibfabric_collector_success", collector="ports"), 1)

        # A counter pegged at its 16-bit maximum in PortCounters is flagged; others are not.
        self.assertEqual(value(samples, "ibfabric_ports_counters_saturated", side="local",
                               counter="SymbolErrorCounter", **LOCAL), 1)
        self.assertEqual(value(samples, "ibfabric_ports_counters_saturated", side="peer",
                               counter="SymbolErrorCounter", **LOCAL), 0)
        self.assertEqual(value(samples, "ibfabric_ports_counters_saturated", side="peer",
                               counter="LinkErrorRecoveryCounter", **LOCAL), 1)
        # Data counters come from the 64-bit set here: no saturation series for them.
        self.assertIsNone(value(samples, "ibfabric_ports_counters_saturated", side="local",
                                counter="PortXmitData", **LOCAL))

        # PortInfo, local (DR path 0) and peer (DR path 0,1, the switch's port 1).
        for side, path, port in (("local", "0", 1), ("peer", "0,1", 1)):
            pi = tools.portinfo(path, port)
            labels = dict(LOCAL, side=side)
            self.assertEqual(value(samples, "ibfabric_ports_state", **labels),
                             LINK_STATES[pi["LinkState"]], side)
            self.assertEqual(value(samples, "ibfabric_ports_physical_state", **labels),
                             PHYS_STATES[pi["PhysLinkState"]], side)
            self.assertEqual(value(samples, "ibfabric_ports_link_width_lanes", **labels),
                             int(pi["LinkWidthActive"].rstrip("X")), side)
            # smpquery prints Gb/s ("10.0 Gbps"); the gauge is in bytes per second.
            self.assertEqual(
                value(samples, "ibfabric_ports_link_speed_lane_bytes_per_second", **labels),
                float(pi["LinkSpeedActive"].split()[0]) * 1e9 / 8, side)
            self.assertEqual(value(samples, "ibfabric_ports_mtu_bytes", **labels),
                             int(pi["NeighborMTU"]), side)
            self.assertEqual(value(samples, "ibfabric_ports_mtu_capability_bytes", **labels),
                             int(pi["MtuCap"]), side)
            info = find_sample(samples, "ibfabric_ports_info", **labels)
            self.assertEqual(info.labels["link_width"], pi["LinkWidthActive"])
            self.assertEqual(info.labels["state"], pi["LinkState"].upper()
                             .replace("INITIALIZE", "INIT"))
            self.assertEqual(info.labels["physical_state"], pi["PhysLinkState"])
        local_pi = tools.portinfo("0", 1)
        labels = dict(LOCAL, side="local")
        self.assertEqual(value(samples, "ibfabric_ports_lid", **labels), int(local_pi["Lid"]))
        self.assertEqual(value(samples, "ibfabric_ports_sm_lid", **labels),
                         int(local_pi["SMLid"]))
        self.assertEqual(value(samples, "ibfabric_ports_lmc", **labels), int(local_pi["LMC"]))
        self.assertEqual(value(samples, "ibfabric_ports_lid", side="peer", **LOCAL),
                         lids["peer"][0])

        # The peer's identity.
        ni = parse_dotted(f.run_tool(["smpquery", "-D", "nodeinfo", "0,1"], host=HOST).stdout)
        nd = parse_dotted(f.run_tool(["smpquery", "-D", "nodedesc", "0,1"], host=HOST).stdout)
        peer = find_sample(samples, "ibfabric_ports_peer_info", **LOCAL)
        self.assertIsNotNone(peer)
        self.assertEqual(peer.labels["peer_node_guid"], "0x%016x" % int(ni["Guid"], 16))
        self.assertEqual(peer.labels["peer_port"], ni["LocalPort"])
        self.assertEqual(peer.labels["peer_node_description"], nd["Node Description"])
        self.assertEqual(peer.labels["peer_node_description"], PEER)
        self.assertEqual(peer.labels["peer_node_type"], "switch")

    def test_unlink_and_relink_show_within_a_poll(self):
        f = self.fabric("link")
        config = write_config(f, interval="1s")
        with f.daemon(["--config", config], host=HOST) as d:
            d.wait_for(lambda s: value(s, "ibfabric_ports_state", side="peer", **LOCAL) == 4,
                       timeout=10, what="peer port active")
            f.command('Unlink "%s"[1]' % HOST, settle=0)
            t0 = time.monotonic()
            s = d.wait_for(lambda s: value(s, "ibfabric_ports_state", side="local",
                                           **LOCAL) == 1, timeout=5, what="local port down")
            down_after = time.monotonic() - t0
            self.assertLess(down_after, 3.0)  # one 1s interval plus a collection and a scrape
            self.assertNotEqual(value(s, "ibfabric_ports_physical_state", side="local",
                                      **LOCAL), 5)
            # No link: the peer's values are missing, not the last ones seen; who was cabled
            # there is remembered (link_memory), so alerts still name the far end.
            s = d.wait_for(lambda s: value(s, "ibfabric_ports_state", side="peer", **LOCAL)
                           is None, timeout=3, what="peer series gone")
            peer = find_sample(s, "ibfabric_ports_peer_info", **LOCAL)
            self.assertIsNotNone(peer, "the cable's far end is remembered")
            self.assertEqual(peer.labels["peer_node_description"], PEER)
            self.assertEqual(peer.labels["peer_node_name"], PEER)

            f.command('ReLink "%s"' % HOST, settle=0)
            t0 = time.monotonic()
            s = d.wait_for(lambda s: value(s, "ibfabric_ports_physical_state", side="local",
                                           **LOCAL) == 5
                           and value(s, "ibfabric_ports_state", side="peer", **LOCAL) is not None,
                           timeout=5, what="link back up")
            self.assertLess(time.monotonic() - t0, 3.0)
            self.assertEqual(value(s, "ibfabric_collector_success", collector="ports"), 1)

    def test_mad_drops_count_as_timeouts_and_values_stay_right(self):
        f = self.fabric("drops")
        tools = Tools(f)
        self.set_counters(f)
        # Many retries and a short timeout: with half the MADs through the port dropped, every
        # query still gets through in almost every run.
        config = write_config(f, interval="1s", timeout="50ms", retries=15)
        with f.daemon(["--config", config], host=HOST) as d:
            d.wait_for(lambda s: value(s, "ibfabric_collector_success", collector="ports") == 1,
                       timeout=10, what="first collection")
            f.command('Error "%s"[1] 50' % HOST, settle=0)

            def timeouts(s):
                return sum(x.value for x in find_samples(s, "ibfabric_mad_timeouts_total"))

            def retries(s):
                return sum(x.value for x in find_samples(s, "ibfabric_mad_retries_total"))

            s = d.wait_for(lambda s: timeouts(s) >= 5 and retries(s) >= 5, timeout=20,
                           what="timeouts and retries counted")
            runs = value(s, "ibfabric_collector_runs_total", collector="ports")
            # A fresh collection made entirely under drops.
            s = d.wait_for(lambda s: value(s, "ibfabric_collector_runs_total",
                                           collector="ports") >= runs + 2,
                           timeout=15, what="two more collections")
            # Values read under drops are the values that were set (PortRcvErrors excepted:
            # ibsim counts its drops there).
            self.assertEqual(value(s, "ibfabric_collector_success", collector="ports"), 1)
            for side in ("local", "peer"):
                for metric, field in ERROR_COUNTERS.items():
                    if field == "PortRcvErrors":
                        continue
                    self.assertEqual(value(s, "ibfabric_ports_" + metric, side=side, **LOCAL),
                                     ERROR_VALUES[side].get(field, 0), "%s %s" % (side, field))
                for field, v in EXT_VALUES[side].items():
                    metric = [m for m, (fl, _) in DATA_COUNTERS.items() if fl == field][0]
                    self.assertGreaterEqual(
                        value(s, "ibfabric_ports_" + metric, side=side, **LOCAL),
                        v * DATA_COUNTERS[metric][1], "%s %s" % (side, field))
            f.command('Error "%s"[1] 0' % HOST, settle=0.3)

            # The tools' own MADs cross the same port: error counters must still equal theirs.
            def next_collection():
                # Two more runs: the second one started after the tools' first reading.
                runs = value(d.samples(), "ibfabric_collector_runs_total", collector="ports")
                return d.wait_for(lambda s: value(s, "ibfabric_collector_runs_total",
                                                  collector="ports") >= runs + 2,
                                  timeout=10, what="two more collections")
            self.check_counters(f, next_collection, tools, may_grow={"PortRcvErrors"})
            self.assertGreater(timeouts(s), 0)

    def test_killed_simulator_does_not_crash_the_daemon(self):
        f = self.fabric("kill")
        config = write_config(f, interval="1s", extra="  reopen_backoff: 200ms\n"
                                                      "  reopen_backoff_max: 1s\n")
        with f.daemon(["--config", config], host=HOST) as d:
            d.wait_for(lambda s: value(s, "ibfabric_collector_success", collector="ports") == 1,
                       timeout=10, what="first collection")
            f.kill_ibsim()
            s = d.wait_for(lambda s: value(s, "ibfabric_collector_success",
                                           collector="ports") == 0,
                           timeout=10, what="ports collector failing")
            self.assertIsNotNone(find_sample(s, "ibfabric_build_info"))
            self.assertTrue(find_samples(s, "process_resident_memory_bytes")
                            or find_samples(s, "process_cpu_seconds_total"))
            self.assertEqual(value(s, "ibfabric_mad_port_open", **LOCAL), 0)
            failures = value(s, "ibfabric_mad_port_failures_total", **LOCAL)
            self.assertGreaterEqual(failures, 1)
            # The engine keeps trying with backoff, and keeps serving.
            d.wait_for(lambda s: value(s, "ibfabric_mad_port_opens_total", **LOCAL) >= 2,
                       timeout=10, what="a reopen attempt")
            # A new simulator on the same socket name: under the shim this process cannot
            # reconnect (libumad2sim connects once per process, at its first umad call), so
            # all that can be checked here is that the daemon lives on and keeps serving.
            f.restart()
            time.sleep(2)
            self.assertIsNone(d.process.poll(), "daemon exited:\n" + d.log()[-2000:])
            s = d.samples()
            self.assertIsNotNone(find_sample(s, "ibfabric_build_info"))
            self.assertEqual(d.stop(), 0)

    def test_frozen_simulator_fails_then_recovers(self):
        f = self.fabric("freeze")
        config = write_config(f, interval="1s")
        with f.daemon(["--config", config], host=HOST) as d:
            d.wait_for(lambda s: value(s, "ibfabric_collector_success", collector="ports") == 1,
                       timeout=10, what="first collection")
            os.kill(f.ibsim.pid, signal.SIGSTOP)
            try:
                s = d.wait_for(lambda s: value(s, "ibfabric_collector_success",
                                               collector="ports") == 0,
                               timeout=10, what="ports collector failing")
                self.assertIsNotNone(find_sample(s, "ibfabric_build_info"))
                # Timed-out values are not carried over from the last good collection.
                self.assertIsNone(value(s, "ibfabric_ports_state", side="local", **LOCAL))
            finally:
                os.kill(f.ibsim.pid, signal.SIGCONT)
            s = d.wait_for(lambda s: value(s, "ibfabric_collector_success",
                                           collector="ports") == 1
                           and value(s, "ibfabric_ports_state", side="peer", **LOCAL) == 4,
                           timeout=15, what="recovery")
            self.assertGreater(sum(x.value for x in find_samples(
                s, "ibfabric_mad_timeouts_total")), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
