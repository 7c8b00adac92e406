"""The shipped Alertmanager configuration (deploy/alertmanager/alertmanager.yml).

1. `amtool check-config` accepts it, and `amtool config routes test` sends every alert of the
   shipped rules to the receiver of its severity (critical: pager, warning: chat, info and no
   severity: dashboards, which notifies no one; IbfabricWatchdog, severity none: heartbeat);
   every alert name it refers to exists.
2. A real Alertmanager (Debian's prometheus-alertmanager, one instance, no clustering) runs it,
   with the receiver URLs pointed at a webhook of this test's own and group_wait/group_interval
   shortened (tests/lib/alertmanager.py says exactly what is rewritten). For each fault, the
   alerts the rules give (their labels as dashboards/alerts/ibfabric.rules.test.yml expects
   them: the culprit and the symptoms that still fire) are posted as Prometheus posts them.
   Each fault must give exactly one notification group per culprit, at the receiver of the
   culprit's severity, carrying only the culprit; its symptoms must be held as inhibited. A
   clean fabric on a loaded machine (only the job-wide info IbfabricProbeRttSpikes) notifies
   no one. A switch, a node and a cable in maintenance (IbfabricMaintenance firing for it):
   none of the alerts about it is notified, whatever their severity, and those about other
   things are. A critical alert silences the warning and info alerts about the same thing
   (cable, port, host port, daemon), not the sweep's alerts its daemon reports; two fabrics
   (label `cluster`) neither share a notification nor silence each other's alerts.
   IbfabricWatchdog is posted beside every fault: it is one group of its own at the heartbeat
   receiver, with nothing else in it, and never inhibited. No fixed sleep: once the groups
   expected are notified, two more heartbeats (every 2 s) mean every group was flushed, so one
   not expected would have been notified too.

What the rules themselves keep quiet (the per-pair probe alerts of pairs a named culprit
explains, the host daemon's IbfabricStuckReceiver where the sweep sees the port) is tested by
promtool in ibfabric.rules.test.yml; here only what Alertmanager does.
"""

import os
import re
import subprocess
import time
import unittest

from ibfabric_testlib import require_tools, source_dir

RULES = os.path.join(source_dir(), "dashboards", "alerts", "ibfabric.rules.yml")
CONFIG = os.path.join(source_dir(), "deploy", "alertmanager", "alertmanager.yml")
RECEIVER = {"critical": "pager", "warning": "chat", "info": "dashboards", "none": "heartbeat"}
WATCHDOG = {"alertname": "IbfabricWatchdog", "severity": "none"}


def rule_severities():
    """{alert name: severity} of the shipped rules."""
    with open(RULES) as f:
        text = f.read()
    found = re.findall(r"^      - alert: (\w+)\n(?:        .*\n)*?          severity: (\w+)$", text,
                       re.M)
    return dict(found)


@require_tools("amtool")
class AmtoolTest(unittest.TestCase):
    def amtool(self, *args):
        return subprocess.run(["amtool", *args], capture_output=True, text=True, timeout=60)

    def test_check_config(self):
        out = self.amtool("check-config", CONFIG)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("SUCCESS", out.stdout)
        self.assertRegex(out.stdout, r"- [1-9]\d* inhibit rules")

    def route_test(self, receiver, labels):
        return self.amtool("config", "routes", "test", "--config.file=" + CONFIG,
                           "--verify.receivers=" + receiver,
                           *["%s=%s" % kv for kv in labels.items()])

    def test_every_rule_routes_by_its_severity(self):
        severities = rule_severities()
        self.assertGreater(len(severities), 30, "the rules' parser found too few alerts")
        self.assertEqual(set(severities.values()), {"critical", "warning", "info", "none"})
        self.assertEqual([n for n, s in severities.items() if s == "none"], ["IbfabricWatchdog"])
        for name, severity in sorted(severities.items()):
            with self.subTest(alert=name):
                out = self.route_test(RECEIVER[severity], {"alertname": name, "severity": severity})
                self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_routes_table(self):
        cable = "0x0002c90300000002:1:0x0002c90300c00003:1"
        cases = [
            ("pager", {"alertname": "IbfabricPortDown", "severity": "critical", "cable": cable}),
            ("pager", {"alertname": "IbfabricSwitchPortDown", "severity": "critical",
                       "cable": cable, "cable_end": "a"}),
            ("pager", {"alertname": "IbfabricDaemonDown", "severity": "critical",
                       "job": "ibfabric", "instance": "n1:10916"}),
            ("chat", {"alertname": "IbfabricSuspectLink", "severity": "warning", "cable": cable}),
            ("chat", {"alertname": "IbfabricSuspectHost", "severity": "warning",
                      "node_guid": "0x0002c90300c00002"}),
            ("chat", {"alertname": "IbfabricSuspectCongestion", "severity": "warning"}),
            ("chat", {"alertname": "IbfabricReceiveErrors", "severity": "warning", "cable": cable}),
            ("dashboards", {"alertname": "IbfabricProbeRttSpikes", "severity": "info",
                            "job": "ibfabric"}),
            ("dashboards", {"alertname": "IbfabricCongestion", "severity": "info"}),
            ("dashboards", {"alertname": "IbfabricMaintenance", "severity": "info",
                            "switch_guid": LEAF2, "node_guid": LEAF2}),
            ("dashboards", {"alertname": "SomethingElse"}),  # no severity: nobody notified
            ("heartbeat", WATCHDOG),
            # The Watchdog by its name, whatever else it carries (an external label, a severity
            # a site gave it): never to a person.
            ("heartbeat", dict(WATCHDOG, severity="critical", prometheus="shard-0")),
            ("dashboards", {"alertname": "Watchdog", "severity": "none"}),  # another's
            ("chat", {"alertname": "IbfabricLocalizerDown", "severity": "warning",
                      "job": "ibfabric-localize", "instance": "loc-b:10920"}),
            ("chat", {"alertname": "IbfabricStoreUnreachable", "severity": "warning",
                      "job": "ibfabric-localize"}),
        ]
        for receiver, labels in cases:
            with self.subTest(labels=labels):
                out = self.route_test(receiver, labels)
                self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        # The check can fail: a warning is not routed to the pager.
        out = self.route_test("pager", {"alertname": "IbfabricSuspectLink", "severity": "warning"})
        self.assertNotEqual(out.returncode, 0, out.stdout)

    def test_alert_names_it_refers_to_exist(self):
        with open(CONFIG) as f:
            text = f.read()
        names = set(re.findall(r"\b(Ibfabric\w+)", text))
        self.assertGreater(len(names), 10)
        self.assertEqual(sorted(names - set(rule_severities())), [])


# Labels as the rules give them (dashboards/alerts/ibfabric.rules.yml), on the demo's fabric.
LEAF2 = "0x0002c90300000002"
SPINE1 = "0x0002c90300000009"
GPU1, GPU2, GPU3 = "0x0002c90300c00001", "0x0002c90300c00002", "0x0002c90300c00003"
GPU3_CABLE = "%s:1:%s:1" % (LEAF2, GPU3)
GPU2_CABLE = "0x0002c90300000001:2:%s:1" % GPU2


def host_port_alert(name, severity, instance, cable, side="local", node_name="gpu-node-03",
                    peer_node_name="leaf-a02 (rack A2)", peer_port="1"):
    # The cable's switch end first: the peer's GUID.
    return {"alertname": name, "severity": severity, "job": "ibfabric", "instance": instance,
            "device": "mlx5_0", "port": "1", "side": side, "node_name": node_name,
            "peer_node_guid": cable.split(":")[0], "peer_node_name": peer_node_name,
            "peer_port": peer_port, "cable": cable}


def switch_port_alert(name, severity, node_guid, port, cable, cable_end, remote_node_type,
                      leaf=None, node_name="leaf-a02 (rack A2)", remote_node_name="gpu-node-03",
                      instance="localhost:10916"):
    # The far end's GUID: the cable's "b" end seen from its "a" end, and the other way round.
    remote = cable.split(":")[2 if cable_end == "a" else 0]
    labels = {"alertname": name, "severity": severity, "job": "ibfabric",
              "instance": instance, "node_guid": node_guid, "port": port,
              "node_name": node_name, "remote_node_guid": remote,
              "remote_node_name": remote_node_name, "remote_port": "1",
              "remote_node_type": remote_node_type, "cable": cable, "cable_end": cable_end}
    if leaf:
        labels["leaf"] = leaf
    return labels


def suspect_link(cable_a, port_a, cable_b, port_b, name_a, name_b):
    return {"alertname": "IbfabricSuspectLink", "severity": "warning", "node_guid": cable_a,
            "port": port_a, "node_name": name_a, "remote_node_guid": cable_b,
            "remote_port": port_b, "remote_node_name": name_b,
            "cable": "%s:%s:%s:%s" % (cable_a, port_a, cable_b, port_b)}


LOADED_MACHINE = {"alertname": "IbfabricProbeRttSpikes", "severity": "info", "job": "ibfabric"}
LEAF1 = "0x0002c90300000001"
LEAF2_SPINE1_CABLE = "%s:3:%s:2" % (LEAF2, SPINE1)


def maintenance(kind, name, **identity):
    """IbfabricMaintenance as the rules give it: one per daemon, GUID and cable in maintenance,
    a GUID in every label the alerts about it use."""
    labels = {"alertname": "IbfabricMaintenance", "severity": "info", "kind": kind, "name": name,
              "reason": "CHG-1234", "until": "2026-12-01T06:00:00Z"}
    guid = identity.pop("guid", None)
    if guid:
        labels.update(node_guid=guid, remote_node_guid=guid, peer_node_guid=guid)
        if kind == "switch":
            labels["switch_guid"] = guid
    labels.update(identity)
    return labels


# name -> (alerts posted, {receiver: [alert names of each notification group]}, inhibited)
SCENARIOS = {
    # The demo's 2 % drops into gpu-node-03: the cable is named; gpu-node-03's own daemon counts
    # receive errors at its port, the sweep errors at the leaf's end; the probe loss of its
    # pairs does not fire (ibfabric:probe_pair_explained).
    "lossy host cable": (
        [suspect_link(LEAF2, "1", GPU3, "1", "leaf-a02 (rack A2)", "gpu-node-03"),
         host_port_alert("IbfabricReceiveErrors", "warning", "localhost:10918", GPU3_CABLE),
         host_port_alert("IbfabricSymbolErrors", "warning", "localhost:10918", GPU3_CABLE,
                         side="peer"),
         switch_port_alert("IbfabricSwitchPortErrors", "warning", LEAF2, "1", GPU3_CABLE, "a",
                           "CA")],
        {"chat": [{"IbfabricSuspectLink"}]},
        {"IbfabricReceiveErrors", "IbfabricSymbolErrors", "IbfabricSwitchPortErrors"}),
    # A cable between a leaf and a spine, errors counted at both ends by the sweep.
    "lossy switch cable": (
        [suspect_link(LEAF2, "3", SPINE1, "2", "leaf-a02 (rack A2)", "spine-1"),
         switch_port_alert("IbfabricSwitchPortErrors", "warning", LEAF2, "3",
                           "%s:3:%s:2" % (LEAF2, SPINE1), "a", "switch", leaf=LEAF2),
         switch_port_alert("IbfabricSwitchPortErrors", "warning", SPINE1, "2",
                           "%s:3:%s:2" % (LEAF2, SPINE1), "b", "switch", leaf=LEAF2,
                           node_name="spine-1", remote_node_name="leaf-a02 (rack A2)")],
        {"chat": [{"IbfabricSuspectLink"}]},
        {"IbfabricSwitchPortErrors"}),
    # The demo's stalled gpu-node-02: the host is named; the spikes of its pairs do not fire,
    # the job-wide spikes alert (info) may, for pairs nothing explains.
    "stalled host": (
        [{"alertname": "IbfabricSuspectHost", "severity": "warning", "node_guid": GPU2,
          "node_name": "gpu-node-02"}, LOADED_MACHINE],
        {"chat": [{"IbfabricSuspectHost"}]},
        set()),
    # The demo's HOQ discards on leaf-2 port 1: the sweep's alert (the host daemon's does not
    # fire; were both there, one cable, one group).
    "stuck receiver": (
        [{"alertname": "IbfabricStuckReceiver", "severity": "warning", "node_guid": LEAF2,
          "port": "1", "node_name": "leaf-2", "remote_node_guid": GPU3, "remote_port": "1",
          "remote_node_name": "gpu-node-03", "tier": "host_downlink", "cable": GPU3_CABLE},
         {"alertname": "IbfabricStuckReceiver", "severity": "warning", "job": "ibfabric",
          "instance": "localhost:10918", "device": "mlx5_0", "port": "1", "node_name": "gpu-node-03",
          "peer_node_name": "leaf-2", "peer_port": "1", "cable": GPU3_CABLE}],
        {"chat": [{"IbfabricStuckReceiver"}]},
        set()),
    # The demo's congestion: one hot spot (warning); the hosts' own congestion is info.
    "congestion": (
        [{"alertname": "IbfabricCongestionHotSpot", "severity": "warning", "node_guid": SPINE1,
          "port": "2", "node_name": "spine-1", "remote_node_guid": LEAF2, "remote_port": "3",
          "remote_node_name": "leaf-2", "tier": "spine", "role": "root", "unit": "share"},
         {"alertname": "IbfabricCongestion", "severity": "info", "job": "ibfabric",
          "instance": "localhost:10918", "device": "mlx5_0", "port": "1", "side": "peer"}],
        {"chat": [{"IbfabricCongestionHotSpot"}]},
        set()),
    # A host's cable down: the host's IbfabricPortDown pages; the sweep's view of the same cable
    # and the errors of the link going down are silenced.
    "host cable down": (
        [host_port_alert("IbfabricPortDown", "critical", "localhost:10917", GPU2_CABLE,
                         node_name="gpu-node-02", peer_node_name="leaf-a01 (rack A1)",
                         peer_port="2"),
         switch_port_alert("IbfabricSwitchPortDown", "critical", "0x0002c90300000001", "2",
                           GPU2_CABLE, "a", "CA", node_name="leaf-a01 (rack A1)",
                           remote_node_name="gpu-node-02"),
         host_port_alert("IbfabricLinkDowned", "warning", "localhost:10917", GPU2_CABLE,
                         node_name="gpu-node-02", peer_node_name="leaf-a01 (rack A1)",
                         peer_port="2"),
         switch_port_alert("IbfabricSwitchPortErrors", "warning", "0x0002c90300000001", "2",
                           GPU2_CABLE, "a", "CA", node_name="leaf-a01 (rack A1)",
                           remote_node_name="gpu-node-02")],
        {"pager": [{"IbfabricPortDown"}]},
        {"IbfabricSwitchPortDown", "IbfabricLinkDowned", "IbfabricSwitchPortErrors"}),
    # A leaf loses two uplinks (both ends of each swept) while one of its ports to a host goes
    # down too: the uplinks are one warning; the host's port still pages.
    "leaf uplinks lost": (
        [{"alertname": "IbfabricLeafUplinksLost", "severity": "warning", "job": "ibfabric",
          "instance": "localhost:10916", "node_guid": LEAF2, "node_name": "leaf-a02 (rack A2)",
          "leaf": LEAF2}]
        + [switch_port_alert("IbfabricSwitchPortDown", "critical", guid, port, cable, end,
                             "switch", leaf=LEAF2)
           for guid, port, cable, end in [
               (LEAF2, "3", "%s:3:%s:2" % (LEAF2, SPINE1), "a"),
               (SPINE1, "2", "%s:3:%s:2" % (LEAF2, SPINE1), "b"),
               ("0x0002c90300000008", "2", "0x0002c90300000008:2:%s:4" % LEAF2, "a"),
               (LEAF2, "4", "0x0002c90300000008:2:%s:4" % LEAF2, "b")]]
        + [switch_port_alert("IbfabricSwitchPortDown", "critical", LEAF2, "1", GPU3_CABLE, "a",
                             "CA")],
        {"pager": [{"IbfabricSwitchPortDown"}], "chat": [{"IbfabricLeafUplinksLost"}]},
        {"IbfabricSwitchPortDown"}),
    # A daemon that cannot be scraped: one page, not its collectors' alerts too.
    "daemon down": (
        [{"alertname": "IbfabricDaemonDown", "severity": "critical", "job": "ibfabric",
          "instance": "localhost:10917"},
         {"alertname": "IbfabricCollectorFailing", "severity": "warning", "job": "ibfabric",
          "instance": "localhost:10917", "collector": "ports"},
         {"alertname": "IbfabricCollectorStuck", "severity": "warning", "job": "ibfabric",
          "instance": "localhost:10917", "collector": "sysfs"}],
        {"pager": [{"IbfabricDaemonDown"}]},
        {"IbfabricCollectorFailing", "IbfabricCollectorStuck"}),
    # Nothing at fault, the machine loaded: only the job-wide spikes alert, which is info.
    "clean loaded machine": ([LOADED_MACHINE], {}, set()),
    # The store stopped ingesting: the stalled evidence is the event; that it knows no daemon
    # target either, 15 minutes on, is the same one.
    "store ingestion stalled": (
        [{"alertname": "IbfabricStoreIngestionStalled", "severity": "warning",
          "job": "ibfabric-localize"},
         {"alertname": "IbfabricDaemonAbsent", "severity": "warning"}],
        {"chat": [{"IbfabricStoreIngestionStalled"}]},
        {"IbfabricDaemonAbsent"}),
    # Nothing named yet, a flaky host cable counting errors at both ends: one group (the cable).
    "flaky cable, nothing named": (
        [host_port_alert("IbfabricSymbolErrors", "warning", "localhost:10918", GPU3_CABLE),
         host_port_alert("IbfabricSymbolErrors", "warning", "localhost:10918", GPU3_CABLE,
                         side="peer"),
         switch_port_alert("IbfabricSwitchPortErrors", "warning", LEAF2, "1", GPU3_CABLE, "a",
                           "CA")],
        {"chat": [{"IbfabricSymbolErrors", "IbfabricSwitchPortErrors"}]},
        set()),
}

# Maintenance (docs/alerts-and-dashboards.md, "Maintenance"): IbfabricMaintenance (info, to no
# one) holds back every alert about the thing in maintenance, whatever its severity; the alerts
# about other things still notify.
SCENARIOS.update({
    # Leaf leaf-a02 in a firmware upgrade: its IbfabricSwitchDown, its ports' alerts (the sweep's,
    # and gpu-node-03's port cabled to it), the spine's port cabled to it, a culprit and a hot
    # spot naming it: none notified. gpu-node-02's port, on leaf-a01, still pages.
    "switch in maintenance": (
        [maintenance("switch", "leaf-a02 (rack A2)", guid=LEAF2),
         {"alertname": "IbfabricSwitchDown", "severity": "critical", "switch_guid": LEAF2,
          "switch_name": "leaf-a02 (rack A2)"},
         switch_port_alert("IbfabricSwitchPortDown", "critical", LEAF2, "1", GPU3_CABLE, "a", "CA"),
         switch_port_alert("IbfabricSwitchPortDown", "critical", SPINE1, "2", LEAF2_SPINE1_CABLE,
                           "b", "switch", leaf=LEAF2, node_name="spine-1",
                           remote_node_name="leaf-a02 (rack A2)"),
         host_port_alert("IbfabricPortDown", "critical", "localhost:10918", GPU3_CABLE),
         switch_port_alert("IbfabricSwitchPortErrors", "warning", LEAF2, "3", LEAF2_SPINE1_CABLE,
                           "a", "switch", leaf=LEAF2, remote_node_name="spine-1"),
         suspect_link(LEAF2, "3", SPINE1, "2", "leaf-a02 (rack A2)", "spine-1"),
         {"alertname": "IbfabricCongestionHotSpot", "severity": "warning", "node_guid": SPINE1,
          "port": "2", "node_name": "spine-1", "remote_node_guid": LEAF2, "remote_port": "3",
          "remote_node_name": "leaf-2", "tier": "spine", "role": "root", "unit": "share"},
         host_port_alert("IbfabricPortDown", "critical", "localhost:10917", GPU2_CABLE,
                         node_name="gpu-node-02", peer_node_name="leaf-a01 (rack A1)",
                         peer_port="2")],
        {"pager": [{"IbfabricPortDown"}]},
        {"IbfabricSwitchDown", "IbfabricSwitchPortDown", "IbfabricPortDown",
         "IbfabricSwitchPortErrors", "IbfabricSuspectLink", "IbfabricCongestionHotSpot"}),
    # gpu-node-02 drained and powered off: its IbfabricHostDown (and IbfabricDaemonDown, were
    # it only its daemon), its port, the switch port facing it, its collectors, its probes and
    # the culprit naming it: none notified. Another daemon down still pages, and the fabric
    # sweep that gpu-node-02 runs still reports the other switch ports (their job and instance
    # are the sweeper's, not what they are about).
    "node in maintenance": (
        [maintenance("node", "gpu-node-02", job="ibfabric", instance="localhost:10917"),
         maintenance("node", "gpu-node-02", guid=GPU2),
         {"alertname": "IbfabricHostDown", "severity": "critical", "job": "ibfabric",
          "instance": "localhost:10917"},
         {"alertname": "IbfabricDaemonDown", "severity": "critical", "job": "ibfabric",
          "instance": "localhost:10917"},
         host_port_alert("IbfabricPortDown", "critical", "localhost:10917", GPU2_CABLE,
                         node_name="gpu-node-02", peer_node_name="leaf-a01 (rack A1)",
                         peer_port="2"),
         switch_port_alert("IbfabricSwitchPortDown", "critical", LEAF1, "2", GPU2_CABLE, "a",
                           "CA", node_name="leaf-a01 (rack A1)", remote_node_name="gpu-node-02"),
         {"alertname": "IbfabricCollectorFailing", "severity": "warning", "job": "ibfabric",
          "instance": "localhost:10917", "collector": "probe"},
         {"alertname": "IbfabricSuspectHost", "severity": "warning", "node_guid": GPU2,
          "node_name": "gpu-node-02"},
         {"alertname": "IbfabricProbeLoss", "severity": "warning", "job": "ibfabric",
          "instance": "localhost:10917", "peer": "gpu-node-01", "transport": "mad",
          "prober_name": "gpu-node-02", "peer_name": "gpu-node-01"},
         {"alertname": "IbfabricDaemonDown", "severity": "critical", "job": "ibfabric",
          "instance": "localhost:10918"},
         switch_port_alert("IbfabricSwitchPortErrors", "warning", LEAF2, "1", GPU3_CABLE, "a",
                           "CA", instance="localhost:10917")],
        {"pager": [{"IbfabricDaemonDown"}], "chat": [{"IbfabricSwitchPortErrors"}]},
        {"IbfabricHostDown", "IbfabricDaemonDown", "IbfabricPortDown", "IbfabricSwitchPortDown",
         "IbfabricCollectorFailing", "IbfabricSuspectHost", "IbfabricProbeLoss"}),
    # gpu-node-03's cable being replaced: its ends down, the errors of its going down, the
    # culprit naming it: none notified. Errors on gpu-node-02's cable still go to chat.
    "cable in maintenance": (
        [maintenance("cable", "leaf-a02 (rack A2):1", cable=GPU3_CABLE),
         host_port_alert("IbfabricPortDown", "critical", "localhost:10918", GPU3_CABLE),
         switch_port_alert("IbfabricSwitchPortDown", "critical", LEAF2, "1", GPU3_CABLE, "a", "CA"),
         host_port_alert("IbfabricLinkDowned", "warning", "localhost:10918", GPU3_CABLE),
         suspect_link(LEAF2, "1", GPU3, "1", "leaf-a02 (rack A2)", "gpu-node-03"),
         host_port_alert("IbfabricSymbolErrors", "warning", "localhost:10917", GPU2_CABLE,
                         node_name="gpu-node-02", peer_node_name="leaf-a01 (rack A1)",
                         peer_port="2")],
        {"chat": [{"IbfabricSymbolErrors"}]},
        {"IbfabricPortDown", "IbfabricSwitchPortDown", "IbfabricLinkDowned",
         "IbfabricSuspectLink"}),
})

# A critical alert silences the warning and info alerts about the same thing, whatever their
# names (a cable, a port by GUID, a host port, a daemon), and only those.
SCENARIOS.update({
    # gpu-node-02's cable down (its port pages), the localizer naming that cable and its link
    # width at the switch end degraded on the way down, its RoCE timeouts; leaf-a02's port to
    # gpu-node-03 down (the sweep pages) with a hot spot and a stuck receiver at that port; a
    # host gone (IbfabricHostDown) with its probes' loss and its MAD timeouts. Three pages, no
    # warning about them; the fabric sweep the gone host ran reports a cable elsewhere: chat.
    "critical silences what it is about": (
        [host_port_alert("IbfabricPortDown", "critical", "localhost:10917", GPU2_CABLE,
                         node_name="gpu-node-02", peer_node_name="leaf-a01 (rack A1)",
                         peer_port="2"),
         suspect_link(LEAF1, "2", GPU2, "1", "leaf-a01 (rack A1)", "gpu-node-02"),
         host_port_alert("IbfabricLinkWidthDegraded", "warning", "localhost:10917", GPU2_CABLE,
                         side="peer", node_name="gpu-node-02",
                         peer_node_name="leaf-a01 (rack A1)", peer_port="2"),
         {"alertname": "IbfabricRoceLocalAckTimeouts", "severity": "warning", "job": "ibfabric",
          "instance": "localhost:10917", "device": "mlx5_0", "port": "1"},
         switch_port_alert("IbfabricSwitchPortDown", "critical", LEAF2, "1", GPU3_CABLE, "a", "CA"),
         {"alertname": "IbfabricCongestionHotSpot", "severity": "warning", "node_guid": LEAF2,
          "port": "1", "node_name": "leaf-2", "remote_node_guid": GPU3, "remote_port": "1",
          "remote_node_name": "gpu-node-03", "tier": "host_downlink", "role": "root",
          "unit": "share"},
         {"alertname": "IbfabricStuckReceiver", "severity": "warning", "node_guid": LEAF2,
          "port": "1", "node_name": "leaf-2", "remote_node_guid": GPU3, "remote_port": "1",
          "remote_node_name": "gpu-node-03", "tier": "host_downlink", "cable": GPU3_CABLE},
         {"alertname": "IbfabricHostDown", "severity": "critical", "job": "ibfabric",
          "instance": "localhost:10919"},
         {"alertname": "IbfabricProbeLoss", "severity": "warning", "job": "ibfabric",
          "instance": "localhost:10919", "peer": "gpu-node-01", "transport": "mad",
          "prober_name": "gpu-node-04", "peer_name": "gpu-node-01"},
         {"alertname": "IbfabricMadTimeouts", "severity": "info", "job": "ibfabric",
          "instance": "localhost:10919", "class": "subn"},
         switch_port_alert("IbfabricSwitchPortErrors", "warning", SPINE1, "2", LEAF2_SPINE1_CABLE,
                           "b", "switch", leaf=LEAF2, node_name="spine-1",
                           remote_node_name="leaf-a02 (rack A2)", instance="localhost:10919")],
        {"pager": [{"IbfabricPortDown"}, {"IbfabricSwitchPortDown"}, {"IbfabricHostDown"}],
         "chat": [{"IbfabricSwitchPortErrors"}]},
        {"IbfabricSuspectLink", "IbfabricLinkWidthDegraded", "IbfabricRoceLocalAckTimeouts",
         "IbfabricCongestionHotSpot", "IbfabricStuckReceiver", "IbfabricProbeLoss",
         "IbfabricMadTimeouts"}),
    # Two fabrics, one Alertmanager, each Prometheus with its external label `cluster`, their
    # daemons named alike: the same alert in both is two notifications, and fabric a's daemon
    # down silences fabric a's collector alert, not fabric b's.
    "two fabrics (cluster)": (
        [{"alertname": "IbfabricDaemonDown", "severity": "critical", "job": "ibfabric",
          "instance": "localhost:10917", "cluster": "a"}]
        + [{"alertname": "IbfabricCollectorFailing", "severity": "warning", "job": "ibfabric",
            "instance": "localhost:10917", "collector": "ports", "cluster": c} for c in "ab"]
        + [dict(host_port_alert("IbfabricPortDown", "critical", "localhost:10918", GPU3_CABLE),
                cluster=c) for c in "ab"],
        {"pager": [{"IbfabricDaemonDown"}, {"IbfabricPortDown"}, {"IbfabricPortDown"}],
         "chat": [{"IbfabricCollectorFailing"}]},
        {"IbfabricCollectorFailing"}),
})

# The test's copy (tests/lib/alertmanager.py) flushes a new group after 1 s (group_wait) and
# sends the heartbeat every 2 s: once the groups expected are in, two more heartbeats mean every
# group Alertmanager formed has been flushed, so one not expected would be in too.
SETTLE_HEARTBEATS = 2


@require_tools("prometheus-alertmanager", "amtool")
class RealAlertmanagerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from alertmanager import WebhookReceiver
        cls.webhook = WebhookReceiver()

    @classmethod
    def tearDownClass(cls):
        cls.webhook.close()

    def wait_for(self, predicate, what, timeout=30):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                self.fail("timed out after %d s waiting for %s" % (timeout, what))
            time.sleep(0.1)

    def run_scenario(self, alerts, expected_groups):
        """Posts the alerts and IbfabricWatchdog to a fresh Alertmanager, waits for
        expected_groups notification groups and then SETTLE_HEARTBEATS heartbeats, checks the
        Watchdog's group, returns ({receiver: {groupKey: set of firing alert names}} but the
        heartbeat's, Alertmanager's alerts but the Watchdog)."""
        from alertmanager import Alertmanager, config_for_test
        before = len(self.webhook.received())
        heartbeats_before = len(self.webhook.received("/heartbeat"))

        def notified_groups():
            return {n["groupKey"] for n in self.webhook.received()[before:]
                    if n["path"] != "/heartbeat"}
        am = Alertmanager(config_for_test(self.webhook))
        try:
            out = subprocess.run(["amtool", "check-config", am.config], capture_output=True,
                                 text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            am.post_alerts(alerts + [WATCHDOG])
            self.wait_for(lambda: len(notified_groups()) >= expected_groups,
                          "%d notification groups" % expected_groups)
            heartbeats = len(self.webhook.received("/heartbeat"))
            self.wait_for(lambda: len(self.webhook.received("/heartbeat"))
                          >= heartbeats + SETTLE_HEARTBEATS, "the heartbeats")
            held = am.alerts()
        finally:
            am.close()
        [watchdog] = [a for a in held if a["labels"]["alertname"] == WATCHDOG["alertname"]]
        self.assertEqual(watchdog["status"]["inhibitedBy"], [], "the Watchdog inhibited")
        held.remove(watchdog)
        groups = {}
        for n in self.webhook.received()[before:]:
            receiver = n["path"].strip("/")
            self.assertEqual(n["receiver"], receiver)
            names = groups.setdefault(receiver, {}).setdefault(n["groupKey"], set())
            names.update(a["labels"]["alertname"] for a in n["alerts"] if a["status"] == "firing")
        # One group at the heartbeat receiver, the Watchdog alone in it, sent again and again
        # (every 2 s in the test's copy: its group_wait 0s, then 2, 4 s...).
        heartbeat = groups.pop("heartbeat", {})
        self.assertEqual(list(heartbeat.values()), [{WATCHDOG["alertname"]}], "heartbeat groups")
        self.assertGreaterEqual(len(self.webhook.received("/heartbeat")) - heartbeats_before,
                                SETTLE_HEARTBEATS)
        return groups, held

    def test_scenarios(self):
        for name, (alerts, expected, inhibited) in SCENARIOS.items():
            with self.subTest(scenario=name):
                groups, held = self.run_scenario(
                    alerts, sum(len(gs) for gs in expected.values()))
                got = {receiver: sorted(sorted(g) for g in by_key.values())
                       for receiver, by_key in groups.items()}
                want = {receiver: sorted(sorted(g) for g in gs) for receiver, gs in expected.items()}
                self.assertEqual(got, want, "notification groups per receiver")
                self.assertEqual(len(held), len(alerts), "Alertmanager holds every alert posted")
                suppressed = {a["labels"]["alertname"] for a in held
                              if a["status"]["inhibitedBy"]}
                self.assertEqual(suppressed, inhibited, "alerts held as inhibited")


if __name__ == "__main__":
    unittest.main()
