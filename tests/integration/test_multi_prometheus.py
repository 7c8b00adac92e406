"""The deployment a 10,000-node cluster needs (docs/scaling.md), end to end on a small simulated
fat tree: four ibfabricd, two of them sweeping the fabric as shards 0 and 1 of 2; two Prometheus
servers run with the shipped deploy/prometheus/shard-{0,1}.yml, each keeping the targets whose
`hashmod` of the address falls in its shard and remote-writing into one VictoriaMetrics run with
deploy/victoria-metrics/victoria-metrics.default's flags; vmalert, with the flags of
deploy/victoria-metrics/vmalert.service, evaluates the shipped rules on VictoriaMetrics and
notifies a stand-in Alertmanager. Only addresses, paths and intervals are replaced in those
files (and VictoriaMetrics gets `-search.latencyOffset=1s`, so that a sample is queryable a
second after it arrives instead of 30).

From VictoriaMetrics alone:
- every switch port of the fabric (ibnetdiscover's switches x their port counts) has exactly one
  series of a fabric counter, from the daemon whose fabric shard holds the switch (the
  documented FNV-1a hash) and through the Prometheus whose hashmod shard holds that daemon;
- every target's series come from one Prometheus only (the `prometheus` external label names
  it), so queries count no series twice;
- every query of every shipped dashboard returns data;
- every shipped rule evaluates without error (as shipped, in VictoriaMetrics), vmalert loads and
  evaluates all of them, none fires on the healthy fabric (but IbfabricProbeJitterHigh, see
  LOAD_NOISE), and symbol errors set on one switch port of each fabric shard fire
  IbfabricSwitchPortErrors for exactly those ports, in vmalert and at the Alertmanager.

The rules run on the test's time scale as in test_prometheus_e2e.py (every `for:` 3s, windows
divided by 60). A deployment test: it skips itself when IBFABRIC_SANITIZED=1 (the sanitized
suites set it; the daemon's code paths are those of test_prometheus_e2e.py), so it runs once
in CI.
"""

import hashlib
import json
import os
import re
import tempfile
import time
import unittest

from fabric_topology import fnv1a_guid, parse_ibnetdiscover
from gen_fattree import fattree
from ibfabric_testlib import fixture, free_port, require_tools, source_dir
from promserver import PromServer
from shipped import NO_DATA_HERE, RULES, dashboard_queries, rule_exprs, shortened_rules
from simfabric import SIM_TOOLS, SimFabric
from promserver import WATCHDOG, Localizer
from victoriametrics import (FakeAlertmanager, VictoriaMetrics, VmAlert, flags_from_default_file,
                             flags_from_unit)

DEPLOY = os.path.join(source_dir(), "deploy")
SHARD_CONFIGS = [os.path.join(DEPLOY, "prometheus", "shard-%d.yml" % i) for i in (0, 1)]
VM_DEFAULT = os.path.join(DEPLOY, "victoria-metrics", "victoria-metrics.default")
VMALERT_UNIT = os.path.join(DEPLOY, "victoria-metrics", "vmalert.service")
SHARDS = 2
# 4 leaves, 2 spines, 2 HCAs per leaf: 6 switches of 8 ports (48 switch ports), 8 HCAs.
# Quantum-2 switches (a known PortXmitWait tick, so the congestion panels have a share of time)
# and ConnectX-7 HCAs, as the demo's fabric; the sweep reads every optional attribute (error
# details, per-VL waiting), so that their panels have data.
TOPOLOGY = fattree(leaves=4, spines=2, hcas_per_leaf=2, device_ids=(0x2C9, 0xD2F2, 0x1021))
SM_NODE = "node-001 mlx5_0"
RATE_INTERVAL = "4s"  # Grafana's $__rate_interval at a 1s scrape interval
# Left out of "fires nothing on a healthy fabric": the probes run over loopback between daemons
# on a machine that runs other tests beside this one, so their jitter measures its scheduling,
# and `for:` shortened from 10m to 3s turns a few loaded seconds into an alert (seen here: 0.7-1.5
# ms at a load average of 13 on 2 cores). The rule still has to evaluate without error; its
# firing and quiet cases are promtool unit tests (tests/e2e/test_alert_rules.py).
LOAD_NOISE = {"IbfabricProbeJitterHigh"}


def hashmod(address, modulus):
    """Prometheus's `hashmod` relabel action: the low 8 octets of the MD5 of the value, as a
    big-endian integer, modulo the modulus."""
    return int.from_bytes(hashlib.md5(address.encode()).digest()[8:], "big") % modulus


def port_in_shard(shard, taken):
    """A free loopback port whose target address Prometheus's hashmod puts into `shard`."""
    while True:
        port = free_port()
        if port not in taken and hashmod("127.0.0.1:%d" % port, SHARDS) == shard:
            taken.add(port)
            return port


def substitute(text, replacements, what):
    """text with every key of replacements replaced by its value; each key must occur exactly
    once, so that the shipped file and this test cannot drift apart silently."""
    for old, new in replacements.items():
        if text.count(old) != 1:
            raise AssertionError("%s: %r occurs %d times, expected once"
                                 % (what, old, text.count(old)))
        text = text.replace(old, new)
    return text


# (node, fabric shard or None, Prometheus shard, extra daemon config, extra arguments).
# The two sweeping daemons go to different Prometheus servers, crossed over (fabric shard 0
# through Prometheus shard 1): the two splits are independent.
DAEMONS = [
    ("node-002 mlx5_0", 0, 1, "responder", []),
    ("node-003 mlx5_0", 1, 0, "prober", []),
    ("node-005 mlx5_0", None, 0, "", ["--sysfs-root", fixture("sysfs", "sriov-ib")]),
    ("node-007 mlx5_0", None, 1, "", []),
]


@unittest.skipIf(os.environ.get("IBFABRIC_SANITIZED") == "1",
                 "a deployment test: runs in the release suite only")
@require_tools(*SIM_TOOLS, "ibnetdiscover", "prometheus", "promtool", "victoria-metrics",
                "vmalert")
class MultiPrometheusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ibfabric-multiprom-")
        cls.fabric = SimFabric(TOPOLOGY, name="multiprom", sm_host=SM_NODE)
        cls.daemons, cls.proms = [], []
        cls.vm = cls.vmalert = cls.alertmanager = cls.localizer = None
        try:
            cls.fabric.start()
            cls.fabric.wait_ready(hosts=[d[0] for d in DAEMONS])
            cls.switches = parse_ibnetdiscover(
                cls.fabric.run_tool(["ibnetdiscover"], host=DAEMONS[0][0]).stdout)
            cls.start_daemons()
            # ibfabric-localize reads the global store (docs/scaling.md); one shard scrapes it
            # (the shipped job ibfabric-localize), so its verdicts reach where vmalert reads.
            cls.localizer_port = localizer_port = free_port()
            cls.vm = VictoriaMetrics(flags_from_default_file(VM_DEFAULT),
                                     replace={"search.latencyOffset": "1s"})
            cls.vm.start()
            cls.localizer = Localizer(cls.vm.url(""), localizer_port)
            cls.localizer.start()
            cls.start_prometheus()
            cls.vm.wait_for(lambda: len(cls.vm.query('up{job="ibfabric"} == 1')) == len(DAEMONS),
                            60, "every target's up in VictoriaMetrics")
            cls.alertmanager = FakeAlertmanager()
            cls.vmalert = VmAlert(flags_from_unit(VMALERT_UNIT), {
                "rule": shortened_rules(cls.tmp.name),
                "datasource.url": cls.vm.url(""),
                "remoteWrite.url": cls.vm.url(""),
                "remoteRead.url": cls.vm.url(""),
                "notifier.url": cls.alertmanager.url(),
                "evaluationInterval": "1s",
            })
            cls.vmalert.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_daemons(cls):
        taken = set()
        responder = "127.0.0.1:%d" % free_port()
        probe = {
            "": "",
            "responder": "  probe: {enabled: true, interval: 1s, udp_listen: \"%s\"}\n"
                         % responder,
            # The spike floor as in test_prometheus_e2e.py: loopback RTTs on a loaded machine.
            "prober": "  probe: {enabled: true, interval: 1s, udp_listen: \"\","
                      " probe_interval: 100ms, timeout: 300ms, spike_floor: 50ms,"
                      " targets: [{address: \"%s\", name: node-1}]}\n" % responder,
        }
        cls.instances = {}  # instance -> (fabric shard, Prometheus shard)
        for i, (node, fabric_shard, prom_shard, role, args) in enumerate(DAEMONS):
            fabric = ("{enabled: true, interval: 1s, shards: %d, shard: %d, error_details: true,"
                      " vl_transmit_wait: true}"
                      % (SHARDS, fabric_shard) if fabric_shard is not None
                      else "{enabled: false}")
            config = os.path.join(cls.tmp.name, "ibfabricd-%d.yaml" % i)
            with open(config, "w") as f:
                f.write("mad: {timeout: 100ms, retries: 1}\n"
                        "collectors:\n"
                        "  sysfs: {enabled: false}\n"
                        "  ports: {interval: 1s}\n"
                        "  sriov: {interval: 1s}\n"
                        "  sm: {interval: 1s}\n"
                        "  fabric: %s\n" % fabric + probe[role])
            d = cls.fabric.daemon(["--config", config] + args, host=node,
                                  port=port_in_shard(prom_shard, taken))
            d.start()
            cls.daemons.append(d)
            cls.instances["127.0.0.1:%d" % d.port] = (fabric_shard, prom_shard)

    @classmethod
    def start_prometheus(cls):
        targets = os.path.join(cls.tmp.name, "ibfabric-targets.json")
        with open(targets, "w") as f:
            json.dump([{"targets": sorted(cls.instances)}], f)
        localizers = os.path.join(cls.tmp.name, "ibfabric-localize-targets.json")
        with open(localizers, "w") as f:
            json.dump([{"targets": ["127.0.0.1:%d" % cls.localizer_port]}], f)
        for path in SHARD_CONFIGS:
            with open(path) as f:
                text = f.read()
            config = substitute(text, {
                "scrape_interval: 15s": "scrape_interval: 1s",
                "scrape_timeout: 10s": "scrape_timeout: 1s",
                "/etc/prometheus/ibfabric-targets.json": targets,
                "/etc/prometheus/ibfabric-localize-targets.json": localizers,
                "http://victoria-metrics:8428/api/v1/write": cls.vm.write_url(),
            }, path)
            prom = PromServer(config=config)
            cls.proms.append(prom)
            prom.start()

    @classmethod
    def tearDownClass(cls):
        for server in [cls.localizer, cls.vmalert] + cls.proms + [cls.vm]:
            if server:
                server.close()
        if cls.alertmanager:
            cls.alertmanager.close()
        for d in cls.daemons:
            d.stop()
        cls.fabric.close()
        cls.tmp.cleanup()

    def alert_states(self):
        """Every alert vmalert holds (pending or firing), and the localizer's log, for failure
        messages."""
        return "\n".join("%s %s value=%s since %s" % (a["state"], a["labels"], a.get("value"),
                                                      a.get("activeAt"))
                         for a in self.vmalert.api("alerts")["alerts"] or []) + \
            "\n--- ibfabric-localize:\n" + self.localizer.log()[-3000:]

    def test_0_shard_configs_differ_only_in_the_marked_lines(self):
        with open(SHARD_CONFIGS[0]) as f, open(SHARD_CONFIGS[1]) as g:
            a, b = f.read().splitlines(), g.read().splitlines()
        self.assertEqual(len(a), len(b))
        differ = [(x, y) for x, y in zip(a, b) if x != y]
        self.assertEqual(len(differ), 3, differ)  # the label, and each job's keep rule
        for x, y in differ:
            self.assertIn("# shard", x)
            self.assertIn("# shard", y)

    def test_1_each_prometheus_scrapes_its_hashmod_shard(self):
        # The layout the test chose its ports for, so that both servers have targets and the
        # two sweeping daemons are scraped by different servers.
        for shard, prom in enumerate(self.proms):
            expected = {i for i, (_, s) in self.instances.items() if s == shard}
            self.assertEqual(len(expected), 2)
            daemons = lambda: [t for t in prom.targets_up()  # noqa: E731
                               if t["labels"]["job"] == "ibfabric"]
            active = prom.wait_for(lambda: daemons() if len(daemons()) == len(expected) else None,
                                   30, "shard %d's targets up" % shard)
            self.assertEqual({t["labels"]["instance"] for t in active}, expected)
            dropped = [t for t in prom.api("targets")["droppedTargets"]
                       if t["discoveredLabels"]["job"] == "ibfabric"]
            self.assertEqual(len(dropped), len(self.instances) - len(expected))
        # The localizer is a target like any: exactly one of the two scrapes it.
        localizers = [len([t for t in prom.targets_up()
                           if t["labels"]["job"] == "ibfabric-localize"]) for prom in self.proms]
        self.assertEqual(sorted(localizers), [0, 1])

    def test_2_every_switch_port_exactly_once(self):
        # ibnetdiscover's view: every port 1..N of every switch.
        expected = {(guid, str(p)) for guid, s in self.switches.items()
                    for p in range(1, s["ports"] + 1)}
        self.assertEqual(len(self.switches), 6)
        self.assertEqual(len(expected), 48)
        by_shard = {0: 0, 1: 0}
        for guid in self.switches:
            by_shard[fnv1a_guid(int(guid, 16)) % SHARDS] += 1
        self.assertTrue(all(by_shard.values()), "a fabric shard without switches: %s" % by_shard)
        fabric_daemon = {fs: i for i, (fs, _) in self.instances.items() if fs is not None}
        for metric in ("ibfabric_fabric_port_symbol_errors_total", "ibfabric_fabric_port_state"):
            with self.subTest(metric=metric):
                deadline = time.monotonic() + 30  # until every port's first sample is in
                while True:
                    result = self.vm.query(metric)
                    pairs = [(x["metric"]["node_guid"], x["metric"]["port"]) for x in result]
                    if set(pairs) == expected or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                self.assertEqual(set(pairs), expected)
                self.assertEqual(len(pairs), len(set(pairs)), "a switch port reported twice")
                for x in result:
                    m = x["metric"]
                    instance = fabric_daemon[fnv1a_guid(int(m["node_guid"], 16)) % SHARDS]
                    self.assertEqual(m["instance"], instance, m)
                    self.assertEqual(m["prometheus"],
                                     "shard-%d" % self.instances[instance][1], m)

    def test_3_every_target_from_one_prometheus(self):
        # Every series of a target carries the external label of the one server that scraped it.
        result = self.vm.query(  # (not the alerts vmalert writes)
            'count by (instance, prometheus) ({job="ibfabric", __name__!~"ALERTS.*"})')
        seen = {}
        for x in result:
            seen.setdefault(x["metric"]["instance"], []).append(x["metric"]["prometheus"])
        self.assertEqual(seen, {i: ["shard-%d" % s] for i, (_, s) in self.instances.items()})
        # ... so an aggregation over the whole store counts each target once.
        up = self.vm.query('count by (instance) (up{job="ibfabric"})')
        self.assertEqual({x["metric"]["instance"]: x["value"][1] for x in up},
                         {i: "1" for i in self.instances})
        self.assertEqual(self.vm.query('sum(ibfabric_fabric_ports_swept)')[0]["value"][1], "48")

    def test_4_every_dashboard_query_returns_data(self):
        # InfiniBand nodes only: the RoCE/EFA dashboard's data comes from fixture trees that
        # test_prometheus_e2e.py reads.
        queries = [q for q in dashboard_queries(RATE_INTERVAL) if q[1] not in NO_DATA_HERE
                   and q[0] != "ibfabric-rdma-nics.json"]
        self.assertGreater(len(queries), 20)
        deadline = time.monotonic() + 60
        missing = queries
        while missing and time.monotonic() < deadline:
            missing = [q for q in missing if not self.vm.query(q[2])]
            if missing:
                time.sleep(1)
        self.assertEqual([(q[0], q[1]) for q in missing], [],
                         "dashboard queries without data in VictoriaMetrics")

    def test_5_every_rule_evaluates_and_none_fires_on_a_healthy_fabric(self):
        shipped = rule_exprs()
        with open(RULES) as f:
            self.assertEqual(len(shipped), len(re.findall(r"^\s*- (alert|record):", f.read(),
                                                          re.M)))
        for name, expr in shipped:
            with self.subTest(rule=name):
                self.vm.query(expr)  # raises unless VictoriaMetrics answers "success"
        # vmalert loaded every rule and has evaluated each several times past the 3s `for:`.
        time.sleep(6)
        rules = self.vmalert.rules()
        self.assertEqual(sorted(r["name"] for r in rules), sorted(n for n, _ in shipped))
        for r in rules:
            with self.subTest(rule=r["name"]):
                self.assertEqual(r["lastError"], "")
                self.assertEqual(r["health"], "ok")
                self.assertFalse(r["lastEvaluation"].startswith("0001-"), r)
        # ibfabric-localize reads VictoriaMetrics as it reads Prometheus: it evaluates (its
        # series, scraped by VictoriaMetrics, say so) and names nothing on a healthy fabric.
        self.vm.wait_for(lambda: self.vm.query('ibfabric_localize_up == 1'), 30,
                         "the localizer evaluating against VictoriaMetrics")
        self.assertEqual(self.vm.query("ibfabric_localize_suspect"), [])
        firing = self.vmalert.firing()
        for name in LOAD_NOISE:
            firing.pop(name, None)
        self.assertEqual(firing, {}, self.alert_states())
        self.assertEqual([a for a in self.alertmanager.received()
                          if a["labels"].get("alertname") not in LOAD_NOISE | {WATCHDOG}], [],
                         self.alert_states())

    def test_6_switch_port_errors_fire_from_both_fabric_shards(self):
        # One switch port in each fabric shard, so the alert comes through both sweeping daemons
        # and both Prometheus servers.
        picked = {}
        for guid, s in sorted(self.switches.items()):
            picked.setdefault(fnv1a_guid(int(guid, 16)) % SHARDS, (guid, s["name"]))
        self.assertEqual(len(picked), SHARDS)
        want = set()
        for shard, (guid, name) in picked.items():
            self.fabric.perf_set(name, 3, "SymbolErrorCounter", 50)
            want.add((guid, "3"))

        def fired():
            got = {(l["node_guid"], l["port"]) for l in
                   self.vmalert.firing().get("IbfabricSwitchPortErrors", [])}
            return got if got == want else None
        self.vmalert.wait_for(fired, 40, "IbfabricSwitchPortErrors on %s" % sorted(want))
        self.assertEqual(set(self.vmalert.firing()) - LOAD_NOISE, {"IbfabricSwitchPortErrors"},
                         self.alert_states())

        def notified():
            got = {(a["labels"].get("node_guid"), a["labels"].get("port"))
                   for a in self.alertmanager.received()
                   if a["labels"].get("alertname") == "IbfabricSwitchPortErrors"}
            return got if got == want else None
        self.vmalert.wait_for(notified, 20, "the Alertmanager to receive both alerts")


if __name__ == "__main__":
    unittest.main()
