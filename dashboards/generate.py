#!/usr/bin/env python3
"""Writes the Grafana dashboards (classic JSON model) into this folder.

The JSON files are committed so they can be imported or provisioned as they are; this script is
their source, so that every panel gets the same datasource, variables and layout.
tests/e2e/test_dashboards.py fails when a committed file differs from what this script writes.

Run: python3 dashboards/generate.py
"""

import json
import os
import re
import sys

SCHEMA_VERSION = 39  # Grafana 11
HERE = os.path.dirname(os.path.abspath(__file__))
DS = {"type": "prometheus", "uid": "${datasource}"}
# Every selector carries these two matchers.
SEL = 'job=~"$job",instance=~"$instance"'
RI = "$__rate_interval"
RULES = os.path.join(HERE, "alerts", "ibfabric.rules.yml")


def read_rules():
    """The alert names of the shipped rules, and the one base of their runbook_url links (what
    alerts/set_runbook_url.py sets): the dashboards link to the same copy of docs/runbook.md."""
    with open(RULES) as f:
        text = f.read()
    names = set(re.findall(r"^\s*- alert: (\w+)\s*$", text, re.M))
    bases = set(re.findall(r"^\s*runbook_url: '?([^'#\s]*)#\w+'?\s*$", text, re.M))
    if len(bases) != 1:
        sys.exit("%s: the runbook links use %d bases, not one: %s" % (RULES, len(bases), bases))
    return names, bases.pop()


ALERT_NAMES, RUNBOOK = read_rules()
# The landing board: the first one the person paged opens.
ONCALL_UID = "ibfabric-oncall"


def query_var(name, label, query, multi, include_all, all_value=".+"):
    v = {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": name},
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": include_all,
        "current": {},
        "hide": 0,
    }
    if include_all and all_value is not None:
        v["allValue"] = all_value
    return v


DATASOURCE_VAR = {
    "name": "datasource",
    "label": "Data source",
    "type": "datasource",
    "query": "prometheus",
    "current": {},
    "hide": 0,
    "refresh": 1,
}


def variables(instance_multi=True, extra=()):
    out = [
        dict(DATASOURCE_VAR),
        query_var("job", "Job", "label_values(ibfabric_build_info, job)", False, False),
        query_var("instance", "Instance", 'label_values(ibfabric_build_info{job=~"$job"}, instance)',
                  instance_multi, instance_multi),
    ]
    for name, label, query in extra:
        out.append(query_var(name, label, query, True, True))
    return out


class Layout:
    """Panels left to right, 24 columns wide, rows of equal height."""

    def __init__(self):
        self.panels = []
        self.x = 0
        self.y = 0
        self.row_h = 0

    def add(self, panel, w, h):
        if self.x + w > 24:
            self.x = 0
            self.y += self.row_h
            self.row_h = 0
        panel["id"] = len(self.panels) + 1
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        self.panels.append(panel)

    def row(self, title):
        if self.x:
            self.y += self.row_h
        self.x, self.row_h = 0, 0
        self.add({"type": "row", "title": title, "collapsed": False, "panels": []}, 24, 1)
        self.x = 24  # the next panel starts a new line


def target(expr, legend="", ref="A", instant=False, fmt=None):
    t = {"refId": ref, "datasource": DS, "expr": expr, "legendFormat": legend or "__auto"}
    if instant:
        t["instant"] = True
        t["range"] = False
    if fmt:
        t["format"] = fmt
    return t


def panel(kind, title, description, unit, targets, **options):
    p = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": options.pop("options", {}),
        "targets": targets,
    }
    if kind == "timeseries":
        p["fieldConfig"]["defaults"]["custom"] = {"drawStyle": "line", "lineWidth": 1,
                                                  "fillOpacity": 0, "spanNulls": False}
        p["options"].setdefault("legend", {"displayMode": "table", "placement": "bottom",
                                           "calcs": ["max", "lastNotNull"]})
        p["options"].setdefault("tooltip", {"mode": "multi", "sort": "desc"})
    p.update(options)
    return p


def timeseries(title, description, unit, *targets, **options):
    return panel("timeseries", title, description, unit, list(targets), **options)


def stat(title, description, unit, *targets, thresholds=None, color="red", steps=None):
    """A single value, green, `color` from `thresholds` on; or coloured by `steps`
    ([(colour, from value)], the first from None)."""
    p = panel("stat", title, description, unit, list(targets),
              options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                       "colorMode": "background", "graphMode": "none", "textMode": "auto"})
    if steps is None:
        steps = [("green", None)] + ([(color, thresholds)] if thresholds is not None else [])
    p["fieldConfig"]["defaults"]["thresholds"] = {
        "mode": "absolute", "steps": [{"color": c, "value": v} for c, v in steps]}
    return p


def table(title, description, unit, *targets):
    return panel("table", title, description, unit, list(targets),
                 options={"showHeader": True},
                 transformations=[{"id": "merge", "options": {}}])


def runbook_links(*alerts):
    """Panel links to the runbook's sections of `alerts` (docs/runbook.md, an anchor per alert:
    its name in lower case). Their titles start with "Runbook": set_runbook_url.py rewrites
    those links' base."""
    for alert in alerts:
        if alert not in ALERT_NAMES:
            sys.exit("no alert %s in %s" % (alert, RULES))
    return [{"title": "Runbook: " + alert, "url": "%s#%s" % (RUNBOOK, alert.lower()),
             "targetBlank": True} for alert in alerts]


def board_link(uid, title):
    """A panel link to another ibfabric dashboard, with this one's time range, data source and
    job."""
    return {"title": title, "url": "/d/%s?${__url_time_range}&${datasource:queryparam}&"
            "${job:queryparam}" % uid, "targetBlank": False}


def linked(p, *alerts, boards=()):
    """Panel `p` with links to the runbook sections of `alerts` and to `boards` ((uid, title))."""
    p["links"] = runbook_links(*alerts) + [board_link(uid, title) for uid, title in boards]
    return p


def dashboard_links(uid):
    """Every board links to every other (a dropdown of the boards tagged ibfabric, keeping the
    time range and the variables they share), to the landing board, and to the runbook."""
    def by_tag(title, tag, dropdown, tooltip):
        return {"asDropdown": dropdown, "icon": "external link", "includeVars": True,
                "keepTime": True, "tags": [tag], "targetBlank": False, "title": title,
                "tooltip": tooltip, "type": "dashboards", "url": ""}
    out = []
    if uid != ONCALL_UID:
        out.append(by_tag("On call", ONCALL_UID, False,
                          "What fires now and the culprits named"))
    out.append(by_tag("ibfabric dashboards", "ibfabric", True, ""))
    out.append({"asDropdown": False, "icon": "doc", "includeVars": False, "keepTime": False,
                "tags": [], "targetBlank": True, "title": "Runbook",
                "tooltip": "What to check and do when an ibfabric alert fires (docs/runbook.md)",
                "type": "link", "url": RUNBOOK})
    return out


# Every Ibfabric* alert, whoever adds one: the shipped rules' names all start so.
ALERTS_SEL = 'alertname=~"Ibfabric.*"'
# What an alert is about, as one label `about`: its subject's labels as key=value, in this
# order, whichever of them the alert has (each rule names its subject with its own labels).
# A GUID only where no name is there, the daemon's instance only where no node is named.
SUBJECT = ["kind", "name", "until", "switch_name", "switch_guid", "node_name", "node_guid",
           "device", "port", "side", "peer_node_name", "peer_node_guid", "peer_port",
           "remote_node_name", "remote_node_guid", "remote_port", "leaf", "tier", "role", "unit",
           "prober_name", "peer_name", "peer", "transport", "collector", "class", "counter",
           "pf", "vf", "pci_address", "namespace", "pod", "instance"]
SUBJECT_UNLESS = [("node_guid", "node_name"), ("remote_node_guid", "remote_node_name"),
                  ("peer_node_guid", "peer_node_name"), ("switch_guid", "switch_name"),
                  ("peer", "peer_name"), ("instance", "node_name"), ("instance", "prober_name")]
# IbfabricMaintenance (it has `kind`) carries one GUID in four labels: node_guid says it.
MAINTENANCE_UNLESS = [("switch_guid", "kind"), ("remote_node_guid", "kind"),
                      ("peer_node_guid", "kind")]


def about(expr, keys=SUBJECT, unless=SUBJECT_UNLESS + MAINTENANCE_UNLESS):
    """`expr` (alerts, or ALERTS_FOR_STATE) with the label `about`: "node_name=gpu-node-02
    device=mlx5_0 port=1 ..." (label_replace copies each key present into a helper label ab<n>,
    label_join joins them, the helpers are dropped again)."""
    helper = {key: "ab%d" % n for n, key in enumerate(keys)}
    for key in keys:
        expr = 'label_replace(%s,"%s","%s=$1 ","%s","(.+)")' % (expr, helper[key], key, key)
    for key, other in unless:
        expr = 'label_replace(%s,"%s","","%s",".+")' % (expr, helper[key], other)
    return 'max without (%s) (label_join(%s,"about","",%s))' % (
        ",".join(helper.values()), expr, ",".join('"%s"' % h for h in helper.values()))


def prometheus_annotation(name, expr, title, text, color, enable, tags):
    """A Prometheus annotation query (Grafana's classic model): an event wherever `expr` has a
    series (value above 0), one region while it lasts (samples at most a step apart). The query
    is both at the top level (expr, step: what Grafana 10 and 11.0 read) and as `target` (what
    later versions move them to, keeping a target's values)."""
    step = "1m"
    return {"datasource": DS, "enable": enable, "hide": False, "iconColor": color, "name": name,
            "expr": expr, "step": step, "titleFormat": title, "textFormat": text,
            "tagKeys": tags, "useValueForTime": False,
            "target": {"refId": "Anno", "expr": expr, "interval": step, "range": True,
                       "instant": False}}


def annotations():
    """On every board: the shipped alerts while they fire (critical and warning on, info off),
    and the culprits ibfabric-localize names."""
    def alerts(severity):
        return about('ALERTS{%s,alertstate="firing",severity="%s"}' % (ALERTS_SEL, severity),
                     ["severity"] + SUBJECT)
    culprits = ('max by (kind, culprit) (label_join(label_replace(label_replace(label_replace('
                'ibfabric_localize_suspect, "at_port", " port $1", "port", "(.+)"), '
                '"to", " - $1", "remote_node_name", "(.+)"), "at_remote_port", " port $1", '
                '"remote_port", "(.+)"), "culprit", "", "node_name", "at_port", "to", '
                '"at_remote_port"))')
    return {"list": [
        {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
         "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
         "name": "Annotations & Alerts", "type": "dashboard"},
        prometheus_annotation("Critical alerts", alerts("critical"), "{{alertname}}",
                              "{{about}}", "red", True, "alertname,severity"),
        prometheus_annotation("Warning alerts", alerts("warning"), "{{alertname}}",
                              "{{about}}", "orange", True, "alertname,severity"),
        prometheus_annotation("Info alerts", alerts("info"), "{{alertname}}", "{{about}}",
                              "blue", False, "alertname,severity"),
        prometheus_annotation("Culprits named", culprits, "Culprit named: {{kind}}",
                              "{{culprit}}", "purple", True, "kind"),
    ]}


# Panels of the detail boards about an alert's subject, by title: they link to the runbook
# sections of those alerts (and, where the detail is on another board, to it). Every title must
# be a panel's.
PANEL_RUNBOOKS = {
    "ibfabric-fabric-overview": {
        "Local ports not ACTIVE": ["IbfabricPortDown"],
        "Links below their best width or speed": ["IbfabricLinkWidthDegraded",
                                                  "IbfabricLinkSpeedDegraded"],
        "Collectors failing": ["IbfabricCollectorFailing"],
        "Congestion: share of time waiting": ["IbfabricCongestion"],
        "SMs in state master": ["IbfabricNoMasterSm"],
        "Master SM stalled polls": ["IbfabricSmActivityStalled"],
        "Master changes seen": ["IbfabricSmFailover"],
        "Switch ports not ACTIVE": ["IbfabricSwitchPortDown", "IbfabricLeafUplinksLost"],
        "Switch port errors per second": ["IbfabricSwitchPortErrors"],
        "Congested switch ports now": ["IbfabricCongestionHotSpot"],
        "Head-of-queue lifetime discards (stuck receivers)": ["IbfabricStuckReceiver"],
    },
    "ibfabric-node": {
        "Saturated 32-bit counters": ["IbfabricCounterSaturated"],
    },
    "ibfabric-daemon": {
        "Collector success": ["IbfabricCollectorFailing", "IbfabricCollectorStuck"],
        "MAD timeouts and retries per second": ["IbfabricMadTimeouts"],
    },
    "ibfabric-probes": {
        "RTT spikes per second": ["IbfabricProbeRttSpikes"],
        "Jitter per peer": ["IbfabricProbeJitterHigh"],
        "Loss per peer": ["IbfabricProbeLoss"],
    },
    "ibfabric-sriov": {
        "Kubelet pod-resources answers": ["IbfabricSriovKubeletDown"],
        "VF dropped packets": ["IbfabricSriovVfDroppingPackets"],
    },
    "ibfabric-rdma-nics": {
        "ECN-marked packets received per second": ["IbfabricRoceCongestion"],
        "Timeouts and retransmissions per second": ["IbfabricRoceLocalAckTimeouts"],
        "EFA retransmitted packets per second": ["IbfabricEfaRetransmits"],
        "EFA impaired and unresponsive remotes per second": ["IbfabricEfaImpairedRemote"],
    },
}


def dashboard(uid, title, description, layout, templating, tags=()):
    runbooks = dict(PANEL_RUNBOOKS.get(uid, {}))
    for p in layout.panels:
        if p["title"] in runbooks:
            linked(p, *runbooks.pop(p["title"]))
    if runbooks:
        sys.exit("%s: no panel titled %s" % (uid, ", ".join(sorted(runbooks))))
    return {
        "annotations": annotations(),
        "description": description,
        "editable": True,
        "graphTooltip": 1,
        "id": None,
        "links": dashboard_links(uid),
        "panels": layout.panels,
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "tags": ["ibfabric", "infiniband"] + list(tags),
        "templating": {"list": templating},
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": title,
        "uid": uid,
        "version": 1,
    }


def port_rate(metric, extra=""):
    return ("sum by (instance, device, port, side) (rate(%s{%s%s}[%s]))" %
            (metric, SEL, extra, RI))


# Names instead of GUIDs (ibfabric_ports_peer_info, ibfabric_fabric_link_info carry both ends'
# names). A series without a name (no peer read yet) is kept, unnamed, by the `unless` branch.
# topk(1) per port: one series even while a name changes (the old one lingers in the lookback
# window), and one per switch port even if two nodes sweep the same shard.
PEER_INFO = ("topk by (instance, device, port) (1, ibfabric_ports_peer_info{%s})" % SEL)
LINK_INFO = ("topk by (node_guid, port) (1, ibfabric_fabric_link_info{%s})" % SEL)
# One row per cable: a cable between two switches is swept from both ends, one marked "a".
CABLE_INFO = ("topk by (node_guid, port) (1, ibfabric_fabric_link_info{%s,cable_end=\"a\"})"
              % SEL)
PORT_LEGEND = "{{node_name}} {{device}}/{{port}} {{side}} - {{peer_node_name}} p{{peer_port}}"
SWITCH_LEGEND = "{{node_name}} p{{port}} - {{remote_node_name}} p{{remote_port}}"


def with_peer_names(expr):
    return ("(%s) * on (instance, device, port) group_left (node_name, peer_node_name, peer_port) "
            "%s or (%s) unless on (instance, device, port) %s" % (expr, PEER_INFO, expr, PEER_INFO))


def with_link_names(expr):
    return ("(%s) * on (node_guid, port) group_left (node_name, remote_node_name, remote_port) "
            "%s or (%s) unless on (node_guid, port) %s" % (expr, LINK_INFO, expr, LINK_INFO))


def both_ends(fabric_metrics, ports_metrics):
    """Per cable (one row per switch end in ibfabric_fabric_link_info): the increase over the
    dashboard's range of `fabric_metrics` at the switch end plus, at the far end, the same
    counters from the sweep (a switch) or from the host's own ports collector (a CA)."""
    def summed(metrics, sel, by):
        return "max by (%s) (%s)" % (by, " + ".join(
            "increase(%s{%s}[$__range])" % (m, sel) for m in metrics))
    near = summed(fabric_metrics, SEL, "node_guid, port")
    hosts = ("max by (node_guid, port) (%s * on (instance, device, port) group_left (node_guid) "
             "%s)" % (summed(ports_metrics, SEL + ',side="local"', "instance, device, port"),
                      PEER_INFO))

    def as_far(expr):
        return ('label_replace(label_replace(%s, "remote_node_guid", "$1", "node_guid", "(.*)"), '
                '"remote_port", "$1", "port", "(.*)")' % expr)
    at_near = "%s * on (node_guid, port) group_left () %s" % (CABLE_INFO, near)
    far = "(%s or %s)" % (as_far(near), as_far(hosts))
    return ("sort_desc(topk(25, (%s) + on (remote_node_guid, remote_port) group_left () %s "
            "or (%s)))" % (at_near, far, at_near))


def switch_end(expr):
    """`expr` (by node_guid, port) on each cable's row, at its switch end."""
    return "%s * on (node_guid, port) group_left () max by (node_guid, port) (%s)" % (
        CABLE_INFO, expr)


ERROR_COUNTERS = [
    ("ibfabric_ports_symbol_errors_total", "Symbol errors",
     "Minor errors on a physical lane (SymbolErrorCounter): a marginal cable or transceiver."),
    ("ibfabric_ports_link_error_recoveries_total", "Link error recoveries",
     "Times the link retrained to recover from errors (LinkErrorRecoveryCounter)."),
    ("ibfabric_ports_link_downed_total", "Links downed",
     "Times error recovery failed and the link went down (LinkDownedCounter)."),
    ("ibfabric_ports_receive_errors_total", "Receive errors",
     "Packets received with an error (PortRcvErrors)."),
    ("ibfabric_ports_transmit_discards_total", "Transmit discards",
     "Packets discarded instead of sent: port down or stuck waiting for credits "
     "(PortXmitDiscards)."),
]


def fabric_overview():
    lay = Layout()
    lay.row("Ports")
    lay.add(stat("Local ports not ACTIVE",
                 "Local HCA ports whose logical state is not ACTIVE (ibfabric_ports_state < 4).",
                 "none",
                 target("count(ibfabric_ports_state{%s,side=\"local\"} < 4) or vector(0)" % SEL,
                        instant=True), thresholds=1), 6, 4)
    lay.add(stat("Ports with errors now",
                 "Ports (either end of a local link) whose symbol, receive or link error "
                 "counters moved in the last rate interval.", "none",
                 target("count(sum by (instance, device, port, side) ("
                        "rate(ibfabric_ports_symbol_errors_total{%s}[%s]) + "
                        "rate(ibfabric_ports_receive_errors_total{%s}[%s]) + "
                        "rate(ibfabric_ports_link_error_recoveries_total{%s}[%s])) > 0) "
                        "or vector(0)" % (SEL, RI, SEL, RI, SEL, RI), instant=True),
                 thresholds=1), 6, 4)
    lay.add(stat("Links below their best width or speed",
                 "ACTIVE ports running at fewer lanes or a lower lane speed than they had within "
                 "the last day.", "none",
                 target("count((ibfabric_ports_link_width_lanes{%s} < "
                        "max_over_time(ibfabric_ports_link_width_lanes{%s}[1d])) or "
                        "(ibfabric_ports_link_speed_lane_bytes_per_second{%s} < "
                        "max_over_time(ibfabric_ports_link_speed_lane_bytes_per_second{%s}[1d]))) "
                        "or vector(0)" % (SEL, SEL, SEL, SEL), instant=True), thresholds=1), 6, 4)
    lay.add(stat("Collectors failing",
                 "Collectors whose last run could not read their source (see the daemon "
                 "dashboard).", "none",
                 target("count(ibfabric_collector_success{%s} == 0) or vector(0)" % SEL,
                        instant=True), thresholds=1), 6, 4)
    lay.row("Errors (both ends of every local link; side=peer is the switch port)")
    for metric, title, desc in ERROR_COUNTERS:
        lay.add(timeseries(title + " per second", desc + " Top 10 ports.", "cps",
                           target("topk(10, %s)" % with_peer_names(port_rate(metric)),
                                  PORT_LEGEND)), 12, 8)
    lay.row("Traffic and congestion")
    lay.add(timeseries("Top talkers: transmitted", "Local ports sending the most data.", "Bps",
                       target("topk(10, %s)" % port_rate("ibfabric_ports_transmit_bytes_total",
                                                         ',side="local"'),
                              "{{instance}} {{device}}/{{port}}")), 12, 8)
    lay.add(timeseries("Top talkers: received", "Local ports receiving the most data.", "Bps",
                       target("topk(10, %s)" % port_rate("ibfabric_ports_receive_bytes_total",
                                                         ',side="local"'),
                              "{{instance}} {{device}}/{{port}}")), 12, 8)
    lay.add(timeseries("Congestion: share of time waiting",
                       "The share of the last 5 minutes a port had data to send and could not "
                       "(PortXmitWait x its device's tick / time; recording rule "
                       "ibfabric:ports_transmit_wait_share:rate5m), top 10: side local, the host's "
                       "packets waiting to enter the fabric; side peer, the switch port facing "
                       "the host (incast, a slow receiver). Only ports whose device's tick is "
                       "known (docs/collectors.md#congested-time).", "percentunit",
                       target("topk(10, %s)" % with_peer_names(
                           "ibfabric:ports_transmit_wait_share:rate5m{%s}" % SEL), PORT_LEGEND)),
            12, 8)
    lay.add(timeseries("Congestion where the tick is not known: ticks per word sent",
                       "PortXmitWait ticks per 4-octet word sent over 5 minutes (recording rule "
                       "ibfabric:ports_transmit_wait_per_word:rate5m), top 10, for ports whose "
                       "device's tick is not known (every HCA unless transmit_wait_ticks gives "
                       "it): above 1, the port waits more than it sends.", "none",
                       target("topk(10, %s)" % with_peer_names(
                           "ibfabric:ports_transmit_wait_per_word:rate5m{%s}" % SEL),
                              PORT_LEGEND)), 12, 8)
    lay.row("Subnet Manager")
    lay.add(stat("SMs in state master", "Most SMs in state master any node sees (exactly 1 is "
                 "healthy; 0 means no master).", "none",
                 target("max(ibfabric_sm_subnet_sms{%s,state=\"master\"})" % SEL,
                        instant=True)), 6, 4)
    lay.add(stat("Master SM stalled polls", "Polls in a row in which the master's activity "
                 "count did not move (a hung SM), worst node.", "none",
                 target("max(ibfabric_sm_activity_stalled_polls{%s})" % SEL, instant=True),
                 thresholds=4), 6, 4)
    lay.add(timeseries("Master changes seen", "Master SM changes (failovers) seen by the nodes, "
                       "per second.", "cps",
                       target("sum(rate(ibfabric_sm_master_changes_total{%s}[%s]))" % (SEL, RI),
                              "master changes")), 12, 4)
    lay.add(table("Subnet Managers", "Every SM of the subnet by name, with its state, as the "
                  "nodes see them (ibfabric_sm_subnet_sm_info).", "none",
                  target("max by (node_name, guid, lid, state) (ibfabric_sm_subnet_sm_info{%s})"
                         % SEL,
                         instant=True, fmt="table")), 24, 5)
    lay.row("Switch ports (fabric collector, on the nodes that sweep the fabric)")
    fsel = SEL
    lay.add(stat("Switch ports not ACTIVE",
                 "Switch ports whose logical state is not ACTIVE, from the fabric sweep; "
                 "unused ports are DOWN too, so watch the trend.", "none",
                 target("count(ibfabric_fabric_port_state{%s} < 4) or vector(0)" % fsel,
                        instant=True)), 6, 4)
    lay.add(stat("Switch ports that failed the last sweep",
                 "Switch ports of the swept shard(s) with at least one failed query.", "none",
                 target("sum(ibfabric_fabric_ports_failed{%s}) or vector(0)" % fsel,
                        instant=True), thresholds=1), 6, 4)
    lay.add(stat("Sweep duration", "Wall time of the last fabric sweep (per sweeping node).",
                 "s", target("max(ibfabric_fabric_sweep_duration_seconds{%s})" % fsel,
                             instant=True)), 6, 4)
    lay.add(stat("Nodes in the fabric", "Switches and CAs found by the last discovery.", "none",
                 target("max by (node_type) (ibfabric_fabric_nodes{%s})" % fsel, "{{node_type}}",
                        instant=True)), 6, 4)
    lay.add(stat("Switch ports shown from an earlier sweep",
                 "Switch ports whose queries were lost in the last sweep (a lossy cable on the "
                 "way drops MADs too) and that show the values last read instead, within "
                 "keep_unread; not a port down.", "none",
                 target("sum(ibfabric_fabric_ports_stale{%s}) or vector(0)" % fsel,
                        instant=True), thresholds=1), 6, 4)
    lay.add(stat("Oldest value shown",
                 "Age of the oldest value a switch port or a host port (either end) shows from "
                 "an earlier run because its queries were lost since.", "s",
                 target("max(max(ibfabric_fabric_port_stale_seconds{%s}) or "
                        "max(ibfabric_ports_stale_seconds{%s}) or vector(0))" % (fsel, SEL),
                        instant=True)), 6, 4)
    lay.add(timeseries("Sweep queries lost per switch",
                       "Sweep queries to a switch that got no answer after every retry, per "
                       "second, top 10: the switches behind a cable that drops packets.", "cps",
                       target("topk(10, sum by (node_guid) (rate("
                              "ibfabric_fabric_switch_timeouts_total{%s}[%s])) * on (node_guid) "
                              "group_left (node_name) max by (node_guid, node_name) "
                              "(ibfabric_fabric_node_info{%s}))" % (fsel, RI, fsel),
                              "{{node_name}}")), 12, 4)
    lay.add(timeseries("Switch port errors per second",
                       "Symbol errors, link error recoveries, links downed and receive errors on "
                       "switch ports (every cable, including switch to switch), top 10.", "cps",
                       target("topk(10, %s)" % with_link_names(
                           "sum by (node_guid, port) ("
                           "rate(ibfabric_fabric_port_symbol_errors_total{%s}[%s]) + "
                           "rate(ibfabric_fabric_port_link_error_recoveries_total{%s}[%s]) + "
                           "rate(ibfabric_fabric_port_link_downed_total{%s}[%s]) + "
                           "rate(ibfabric_fabric_port_receive_errors_total{%s}[%s]))"
                           % (fsel, RI, fsel, RI, fsel, RI, fsel, RI)),
                              SWITCH_LEGEND)), 12, 8)
    lay.row("Congestion hot spots (fabric sweep): where ports wait, by tier, roots and victims")
    hot = "ibfabric:switch_port_congestion:rate5m"
    lay.add(table("Congested switch ports now",
                  "Every switch port that waited more than 10 %% of the last 5 minutes (or more "
                  "than one PortXmitWait tick per word sent, unit ticks_per_word, where its "
                  "switch's tick is not known), with both ends of its cable, its tier "
                  "(host_downlink: incast or a slow receiver; leaf_uplink and spine: imbalance "
                  "or oversubscription) and its role (root: the congestion starts here; victim: "
                  "it backs up from the switch it leads to). Recording rule %s; what "
                  "IbfabricCongestionHotSpot fires on after 10 minutes. Fabric-wide." % hot,
                  "percentunit",
                  target("sort_desc(max by (node_name, port, remote_node_name, remote_port, "
                         "tier, role, unit) (%s))" % hot, instant=True, fmt="table")), 12, 8)
    lay.add(timeseries("Congested switch ports by tier and role",
                       "How many switch ports are congested (as in the table), by tier and "
                       "role. Fabric-wide.", "none",
                       target("count by (tier, role) (%s)" % hot, "{{tier}} {{role}}")), 12, 8)
    share = ("ibfabric:switch_port_transmit_wait_share:rate5m{%s} * on (node_guid, port) "
             "group_left (node_name, remote_node_name, remote_port, tier) "
             "ibfabric:switch_port_tier" % fsel)
    lay.add(timeseries("Most congested switch ports",
                       "The share of the last 5 minutes each switch port waited to send "
                       "(recording rule ibfabric:switch_port_transmit_wait_share:rate5m), top 10, "
                       "with its tier.", "percentunit",
                       target("topk(10, %s)" % share, SWITCH_LEGEND + " {{tier}}")), 12, 8)
    over_day = ("topk(20, max by (node_name, port, remote_node_name, remote_port, tier) "
                "(%s_over_time(ibfabric:switch_port_transmit_wait_share:rate5m{%s}[1d]) "
                "* on (node_guid, port) group_left (node_name, remote_node_name, remote_port, "
                "tier) ibfabric:switch_port_tier))")
    lay.add(table("Most congested switch ports over a day",
                  "The switch ports that waited the most, over the last day: the highest share "
                  "of 5 minutes, and the day's average, top 20. A port at the top every day is "
                  "a placement or routing matter, not a burst.", "percentunit",
                  target(over_day % ("max", fsel), "worst 5 minutes", instant=True, fmt="table"),
                  target(over_day % ("avg", fsel), "day's average", ref="B", instant=True,
                         fmt="table")), 12, 8)
    lay.add(timeseries("Switch ports waiting where the tick is not known: ticks per word",
                       "PortXmitWait ticks per 4-octet word sent over 5 minutes, top 10, for "
                       "switches whose tick the daemon does not know (not a Quantum, Switch-IB "
                       "or SwitchX, and not in transmit_wait_ticks).", "none",
                       target("topk(10, %s)" % with_link_names(
                           "max by (node_guid, port) ("
                           "ibfabric:switch_port_transmit_wait_per_word:rate5m{%s})" % fsel),
                              SWITCH_LEGEND)), 12, 8)
    lay.add(timeseries("Head-of-queue lifetime discards (stuck receivers)",
                       "Packets switch ports discarded after waiting at the head of their queue "
                       "past the lifetime limit (PortSwHOQLifetimeLimitDiscards), per second, "
                       "top 10: the receiver at the far end is not taking packets "
                       "(IbfabricStuckReceiver). From the fabric sweep with error_details, and "
                       "from the switch port facing each host (ports, side peer).", "cps",
                       target("topk(10, %s)" % with_link_names(
                           "sum by (node_guid, port) (rate("
                           "ibfabric_fabric_port_transmit_switch_hol_lifetime_limit_discards_total"
                           "{%s}[%s]))" % (fsel, RI)), SWITCH_LEGEND),
                       target("topk(10, %s)" % with_peer_names(
                           "rate(ibfabric_ports_transmit_switch_hol_lifetime_limit_discards_total"
                           "{%s,side=\"peer\"}[%s])" % (SEL, RI)), PORT_LEGEND, ref="B")),
            12, 8)
    lay.add(timeseries("Waiting per VL (vl_transmit_wait)",
                       "PortVLXmitWait ticks per second of each data VL of the switch ports, top "
                       "10: which virtual lane (which service level's traffic: NCCL's, "
                       "storage's) waits. Only where the fabric sweep has vl_transmit_wait on. "
                       "16-bit counters that stop at 65535 and the daemon never clears: a VL "
                       "that waited reads 0 per second once pegged (its pegged flag: "
                       "ibfabric_fabric_port_counters_saturated{counter=\"PortVLXmitWait<vl>\"}"
                       "; docs/collectors.md, Congested time).", "none",
                       target("topk(10, %s)" % with_link_names(
                           "sum by (node_guid, port, vl) (rate("
                           "ibfabric_fabric_port_vl_transmit_wait_ticks_total{%s}[%s]))"
                           % (fsel, RI)),
                              "{{node_name}} p{{port}} VL {{vl}} - {{remote_node_name}} "
                              "p{{remote_port}}")), 24, 8)
    lay.row("Worst cables (a cable is named by both of its ends)")
    errors = ["ibfabric_fabric_port_%s_total" % c for c in (
        "symbol_errors", "link_error_recoveries", "receive_errors", "local_link_integrity_errors",
        "excessive_buffer_overrun_errors")]
    host_errors = [m.replace("fabric_port_", "ports_") for m in errors]
    lay.add(table("Worst cables",
                  "Every cable from the fabric sweep as switch port - far end, by name, with the "
                  "errors counted at either end over the dashboard's range (a bad transmitter "
                  "shows up as receive errors at the far end; a host's end comes from its own "
                  "ports collector), links downed at either end, and the link's width and lane "
                  "speed (in Gb/s) now against their best in the last day. Each cable is one "
                  "row, also one between two switches (its end with cable_end=\"a\").", "none",
                  target(both_ends(errors, host_errors), instant=True, fmt="table"),
                  target(both_ends(["ibfabric_fabric_port_link_downed_total"],
                                   ["ibfabric_ports_link_downed_total"]),
                         ref="B", instant=True, fmt="table"),
                  target(switch_end("ibfabric_fabric_port_link_width_lanes{%s}" % fsel),
                         ref="C", instant=True, fmt="table"),
                  target(switch_end("max_over_time(ibfabric_fabric_port_link_width_lanes{%s}[1d])"
                                    % fsel), ref="D", instant=True, fmt="table"),
                  target(switch_end("ibfabric_fabric_port_link_speed_lane_bytes_per_second{%s}"
                                    " * 8 / 1e9" % fsel), ref="E", instant=True, fmt="table"),
                  target(switch_end("max_over_time("
                                    "ibfabric_fabric_port_link_speed_lane_bytes_per_second{%s}[1d])"
                                    " * 8 / 1e9" % fsel), ref="F", instant=True, fmt="table")),
            24, 10)
    return dashboard("ibfabric-fabric-overview", "ibfabric / Fabric overview",
                     "InfiniBand fabric health across nodes: ports down, error rates, congestion, "
                     "top talkers, Subnet Manager state, switch ports.", lay, variables())


def node_detail():
    lay = Layout()
    dsel = SEL + ',device=~"$device"'
    lay.row("Link")
    lay.add(table("Ports", "State, physical state, width, speed and peer of every local port "
                  "(ibfabric_ports_info).", "none",
                  target("ibfabric_ports_info{%s}" % dsel, instant=True, fmt="table")), 24, 6)
    lay.add(table("Peer of each local port", "The node and port at the far end of each cable "
                  "(ibfabric_ports_peer_info).", "none",
                  target("ibfabric_ports_peer_info{%s}" % dsel, instant=True, fmt="table")),
            24, 5)
    lay.add(timeseries("Logical state", "1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE.", "none",
                       target("ibfabric_ports_state{%s}" % dsel, "{{device}}/{{port}} {{side}}")),
            8, 7)
    lay.add(timeseries("Link width: now and best in the last day",
                       "Active lanes; the dashed series is the most the link had within a day.",
                       "none",
                       target("ibfabric_ports_link_width_lanes{%s}" % dsel,
                              "{{device}}/{{port}} {{side}}"),
                       target("max_over_time(ibfabric_ports_link_width_lanes{%s}[1d])" % dsel,
                              "best {{device}}/{{port}} {{side}}", ref="B")), 8, 7)
    lay.add(timeseries("Lane speed: now and best in the last day",
                       "Per-lane signalling rate in bits per second (the series is in bytes "
                       "per second: times 8): NDR 100, HDR 50, EDR 25 Gb/s.", "bps",
                       target("ibfabric_ports_link_speed_lane_bytes_per_second{%s} * 8" % dsel,
                              "{{device}}/{{port}} {{side}}"),
                       target("max_over_time(ibfabric_ports_link_speed_lane_bytes_per_second{%s}"
                              "[1d]) * 8" % dsel, "best {{device}}/{{port}} {{side}}", ref="B")),
            8, 7)
    lay.row("Traffic")
    lay.add(timeseries("Throughput", "Bytes per second sent (positive) and received, local "
                       "port and the switch port facing it.", "Bps",
                       target(port_rate("ibfabric_ports_transmit_bytes_total",
                                        ',device=~"$device"'),
                              "tx {{device}}/{{port}} {{side}}"),
                       target(port_rate("ibfabric_ports_receive_bytes_total",
                                        ',device=~"$device"'),
                              "rx {{device}}/{{port}} {{side}}", ref="B")), 12, 8)
    lay.add(timeseries("Congestion", "PortXmitWait ticks per second on both ends.", "cps",
                       target(port_rate("ibfabric_ports_transmit_wait_ticks_total",
                                        ',device=~"$device"'),
                              "{{device}}/{{port}} {{side}}")), 12, 8)
    lay.row("Errors")
    for metric, title, desc in ERROR_COUNTERS:
        lay.add(timeseries(title + " per second", desc, "cps",
                           target(port_rate(metric, ',device=~"$device"'),
                                  "{{device}}/{{port}} {{side}}")), 8, 7)
    lay.add(timeseries("Saturated 32-bit counters",
                       "1 when a PortCounters value is pegged at its maximum.", "none",
                       target("ibfabric_ports_counters_saturated{%s}" % dsel,
                              "{{device}}/{{port}} {{side}} {{counter}}")), 8, 7)
    extra = [("device", "Device",
              'label_values(ibfabric_ports_state{job=~"$job",instance=~"$instance"}, device)')]
    return dashboard("ibfabric-node", "ibfabric / Node and HCA",
                     "One node's HCA ports and the switch ports facing them: link state, "
                     "width and speed, traffic, errors.", lay,
                     variables(instance_multi=False, extra=extra))


def daemon():
    lay = Layout()
    lay.row("Collectors")
    lay.add(timeseries("Collector success", "1 when the collector's last run read its "
                       "source.", "bool",
                       target("ibfabric_collector_success{%s}" % SEL,
                              "{{instance}} {{collector}}")), 12, 7)
    lay.add(timeseries("Collector run time", "Duration of each collector's last run.", "s",
                       target("ibfabric_collector_duration_seconds{%s}" % SEL,
                              "{{instance}} {{collector}}")), 12, 7)
    lay.add(timeseries("Collector failures, timeouts and overruns per second",
                       "Failed runs, runs that missed their run_timeout (a source that does not "
                       "answer), and runs that outlasted their interval.", "cps",
                       target("sum by (instance, collector) (rate(ibfabric_collector_failures_total"
                              "{%s}[%s]))" % (SEL, RI), "failures {{instance}} {{collector}}"),
                       target("sum by (instance, collector) (rate(ibfabric_collector_overruns_total"
                              "{%s}[%s]))" % (SEL, RI), "overruns {{instance}} {{collector}}",
                              ref="B"),
                       target("sum by (instance, collector) (rate(ibfabric_collector_timeouts_total"
                              "{%s}[%s]))" % (SEL, RI), "timeouts {{instance}} {{collector}}",
                              ref="C")), 24, 7)
    lay.row("MAD engine")
    lay.add(timeseries("MAD requests per second by result",
                       "Requests finished by the engine, by management class and result.", "reqps",
                       target("sum by (instance, class, result) (rate(ibfabric_mad_requests_total"
                              "{%s}[%s]))" % (SEL, RI), "{{instance}} {{class}} {{result}}")),
            12, 8)
    lay.add(timeseries("MAD timeouts and retries per second",
                       "Attempts without an answer, and attempts sent again.", "cps",
                       target("sum by (instance, class) (rate(ibfabric_mad_timeouts_total{%s}[%s]))"
                              % (SEL, RI), "timeouts {{instance}} {{class}}"),
                       target("sum by (instance, class) (rate(ibfabric_mad_retries_total{%s}[%s]))"
                              % (SEL, RI), "retries {{instance}} {{class}}", ref="B")), 12, 8)
    lay.add(timeseries("MAD response time p99",
                       "99th percentile of the time from sending a MAD to its answer.", "s",
                       target("histogram_quantile(0.99, sum by (instance, class, le) ("
                              "rate(ibfabric_mad_response_seconds_bucket{%s}[%s])))" % (SEL, RI),
                              "{{instance}} {{class}}")), 12, 8)
    lay.add(timeseries("MADs in flight and queued",
                       "Sent and not yet answered; waiting for a slot or a rate-limit token.",
                       "none",
                       target("ibfabric_mad_in_flight{%s}" % SEL, "in flight {{instance}}"),
                       target("ibfabric_mad_queued{%s}" % SEL, "queued {{instance}}", ref="B")),
            12, 8)
    lay.row("Process")
    lay.add(timeseries("CPU", "CPU time used by ibfabricd, as a fraction of one core.",
                       "percentunit",
                       target("rate(process_cpu_seconds_total{%s}[%s])" % (SEL, RI),
                              "{{instance}}")), 8, 7)
    lay.add(timeseries("Resident memory", "Resident set size of ibfabricd.", "bytes",
                       target("process_resident_memory_bytes{%s}" % SEL, "{{instance}}")), 8, 7)
    lay.add(timeseries("Open file descriptors", "Open descriptors of ibfabricd.", "none",
                       target("process_open_fds{%s}" % SEL, "{{instance}}")), 8, 7)
    lay.add(timeseries("Scrapes per second", "Requests to the metrics endpoint, by code.",
                       "reqps",
                       target("sum by (instance, code) (rate(ibfabric_http_requests_total{%s}[%s]))"
                              % (SEL, RI), "{{instance}} {{code}}")), 12, 7)
    lay.add(table("Build", "Version and build of each daemon (ibfabric_build_info).", "none",
                  target("ibfabric_build_info{%s}" % SEL, instant=True, fmt="table")), 12, 7)
    return dashboard("ibfabric-daemon", "ibfabric / Daemon",
                     "Health of ibfabricd itself: collectors, the MAD engine, process resources.",
                     lay, variables())


# A probe series with its prober's name (node_name): the node as its peers and the alerts name
# it (ibfabric_probe_node_info), so that a row reads "gpu-node-01 -> gpu-node-03".
PAIR_LEGEND = "{{node_name}} -> {{peer}} ({{transport}})"


def by_prober(expr):
    return ("%s * on (job, instance) group_left (node_name) "
            "topk by (job, instance) (1, ibfabric_probe_node_info{%s})" % (expr, SEL))


def heatmap(title, description, expr):
    p = panel("heatmap", title, description, "s",
              [target(expr, "{{le}}", fmt="heatmap")],
              options={"calculate": False, "yAxis": {"unit": "s"},
                       "cellGap": 1, "color": {"mode": "scheme", "scheme": "Oranges"}})
    return p


def probes():
    lay = Layout()
    psel = SEL + ',peer=~"$peer"'
    lay.row("Round-trip time")
    lay.add(heatmap("RTT distribution", "Answered probes per RTT bucket over time (all selected "
                    "peers), from ibfabric_probe_rtt_seconds.",
                    "sum by (le) (rate(ibfabric_probe_rtt_seconds_bucket{%s}[%s]))"
                    % (psel, RI)), 24, 9)
    lay.add(timeseries("p99 RTT per peer", "99th percentile over each peer's latest probes "
                       "(the collector's window).", "s",
                       target(by_prober("ibfabric_probe_rtt_window_seconds{%s,stat=\"p99\"}"
                                        % psel), PAIR_LEGEND)), 12, 8)
    lay.add(timeseries("p50 RTT: full and network share", "Median RTT, and the median of RTT "
                       "minus the time the responder held the probe; a gap is host delay.", "s",
                       target("histogram_quantile(0.5, sum by (le) (rate("
                              "ibfabric_probe_rtt_seconds_bucket{%s}[%s])))" % (psel, RI),
                              "full RTT"),
                       target("histogram_quantile(0.5, sum by (le) (rate("
                              "ibfabric_probe_network_rtt_seconds_bucket{%s}[%s])))" % (psel, RI),
                              "network share", ref="B")), 12, 8)
    lay.row("Pingmesh: prober x peer")
    # One bad host shows as a row or a column, one bad switch as a block. Probers are named as
    # their peers name them (ibfabric_probe_node_info), peers by their target name.

    def matrix(title, description, unit, expr):
        named = 'label_replace(%s, "prober", "$1", "node_name", "(.+)")' % by_prober(expr)
        return panel("table", title, description, unit,
                     [target("max by (prober, peer) (%s)" % named, instant=True, fmt="table")],
                     options={"showHeader": True},
                     transformations=[{"id": "groupingToMatrix", "options": {
                         "columnField": "peer", "rowField": "prober", "valueField": "Value"}}])

    lay.add(matrix("p99 RTT matrix", "p99 RTT of each prober (row) to each peer (column) over "
                   "the collector's window; a slow row is a slow host, a slow column a slow "
                   "peer.", "s",
                   "ibfabric_probe_rtt_window_seconds{%s,stat=\"p99\"}" % psel), 12, 8)
    lay.add(matrix("Loss matrix", "Share of probes lost from each prober (row) to each peer "
                   "(column) over the rate interval.", "percentunit",
                   "sum by (job, instance, peer) (rate(ibfabric_probe_lost_total{%s}[%s])) / sum "
                   "by (job, instance, peer) (rate(ibfabric_probe_sent_total{%s}[%s]))"
                   % (psel, RI, psel, RI)), 12, 8)
    lay.row("Spikes, jitter, loss")
    lay.add(timeseries("RTT spikes per second", "Probes above spike_multiplier x the peer's "
                       "baseline median and above spike_floor.", "cps",
                       target(by_prober("sum by (job, instance, peer, transport) (rate("
                                        "ibfabric_probe_spikes_total{%s}[%s]))" % (psel, RI)),
                              PAIR_LEGEND)), 8, 8)
    lay.add(timeseries("Jitter per peer", "RFC 3550 jitter of consecutive RTTs.", "s",
                       target(by_prober("ibfabric_probe_jitter_seconds{%s}" % psel),
                              PAIR_LEGEND)), 8, 8)
    lay.add(timeseries("Loss per peer", "Share of probes without an answer within the "
                       "timeout.", "percentunit",
                       target(by_prober("sum by (job, instance, peer, transport) (rate("
                                        "ibfabric_probe_lost_total{%s}[%s])) / sum by (job, "
                                        "instance, peer, transport) (rate("
                                        "ibfabric_probe_sent_total{%s}[%s]))"
                                        % (psel, RI, psel, RI)),
                              PAIR_LEGEND)), 8, 8)
    lay.add(timeseries("Probes per second", "Probes sent per peer, and requests this node's "
                       "responders answered, by transport (udp, mad).", "pps",
                       target(by_prober("sum by (job, instance, peer, transport) (rate("
                                        "ibfabric_probe_sent_total{%s}[%s]))" % (psel, RI)),
                              "sent " + PAIR_LEGEND),
                       target(by_prober("sum by (job, instance, transport) (rate("
                                        "ibfabric_probe_responder_requests_total{%s}[%s]))"
                                        % (SEL, RI)),
                              "answered by {{node_name}} ({{transport}})", ref="B")), 24, 7)
    lay.row("Where is it? Probe loss and spikes localized to cables (collector paths)")
    lay.add(suspects_table(), 24, 7)
    hops = ('ibfabric_path_hop_info{%s}' % psel)
    by = "instance, peer, leg, hop, node_name, port, remote_node_name, remote_port, direction"

    def at_end(expr, far):
        """`expr` (by node_guid, port, from the fabric sweep) at one end of each hop's cable."""
        if far:
            expr = ('label_replace(label_replace(%s, "remote_node_guid", "$1", "node_guid", '
                    '"(.*)"), "remote_port", "$1", "port", "(.*)")' % expr)
            keys = "remote_node_guid, remote_port"
        else:
            keys = "node_guid, port"
        return "max by (%s) (%s * on (%s) group_left () max by (%s) (%s))" % (
            by, hops, keys, keys, expr)

    # The fabric sweep's counters come from the sweeping nodes, not the prober: any instance.
    fabric_rates = [
        ("errors/s", "sum by (node_guid, port) (%s)" % " + ".join(
            "rate(ibfabric_fabric_port_%s_total{job=~\"$job\",instance=~\".+\"}[%s])" % (c, RI) for c in (
                "symbol_errors", "link_error_recoveries", "link_downed", "receive_errors"))),
        ("discards/s", "sum by (node_guid, port) (rate(ibfabric_fabric_port_transmit_discards_total"
         "{job=~\"$job\",instance=~\".+\"}[%s]))" % RI),
        ("XmitWait ticks/s", "sum by (node_guid, port) (rate("
         "ibfabric_fabric_port_transmit_wait_ticks_total{job=~\"$job\",instance=~\".+\"}[%s]))" % RI),
    ]
    path_targets = [target("max by (%s) (%s)" % (by, hops), "cable", instant=True, fmt="table")]
    for n, (what, expr) in enumerate(fabric_rates):
        for far in (False, True):
            path_targets.append(target(at_end(expr, far), "%s at %s end" % (
                what, "remote" if far else "node"), ref="BCDEFG"[2 * n + far], instant=True,
                fmt="table"))
    lay.add(table("Path of the selected prober and peer",
                  "The cables the probes of the selected instance(s) to the selected peer(s) "
                  "cross (leg to_peer) and their answers (leg from_peer), hop by hop as the "
                  "switches' forwarding tables route them (ibfabric_path_hop_info), with each "
                  "end's error, discard and XmitWait rates from the fabric sweep (empty where "
                  "no node sweeps that switch, and at a host's end). Pick one instance and one "
                  "peer.", "none", *path_targets), 24, 10)
    lay.add(timeseries("Untraced paths", "Legs whose latest trace failed, by reason "
                       "(ibfabric_path_untraced): such a pair's cables are its last good trace, "
                       "or none.", "none",
                       target("count by (instance, reason) (ibfabric_path_untraced{%s})" % SEL,
                              "{{instance}} {{reason}}")), 12, 7)
    lay.add(timeseries("Paths per state", "Probed peers by the state of their path "
                       "(ibfabric_path_peers): traced, untraced, pending, unplaced.", "none",
                       target("sum by (state) (ibfabric_path_peers{%s})" % SEL, "{{state}}")),
            12, 7)
    extra = [("peer", "Peer",
              'label_values(ibfabric_probe_sent_total{job=~"$job",instance=~"$instance"}, peer)')]
    return dashboard("ibfabric-probes", "ibfabric / Probes and jitter",
                     "Active probes between nodes: RTT distribution, p99 and spikes per peer, "
                     "jitter, loss, host delay told apart from network delay, and the cables "
                     "that probe loss and spikes point at.", lay, variables(extra=extra))


def suspects_table():
    """One row per culprit ibfabric-localize names (a cable by both ends, a host, or a congested
    port), with its evidence over the last minute: on the landing board and the probes board."""
    def by_suspect(expr, labels=""):
        return ('max by (kind, suspect%s) (label_join(%s, "suspect", " ", "node_name", "port", '
                '"remote_node_name", "remote_port"))' % (labels, expr))
    probes = 'ibfabric_localize_suspect_probes{what="%s"}'
    columns = [(by_suspect("ibfabric_localize_suspect"), "pairs explained"),
               (by_suspect(probes % "lost"), "probes lost"),
               ("%s / (%s > 0)" % (by_suspect(probes % "lost"), by_suspect(probes % "sent")),
                "loss ratio"),
               (by_suspect(probes % "late"), "late probes"),
               (by_suspect("ibfabric_localize_suspect_info", ", cause, equally_suspect, "
                           "blast_radius, jobs, lacking, why, evidence, pairs"), "named")]
    targets = [target(expr, legend, ref="ABCDEFG"[n], instant=True, fmt="table")
               for n, (expr, legend) in enumerate(columns)]
    return linked(table(
        "Suspects",
        "What ibfabric-localize names (IbfabricSuspectLink, IbfabricSuspectHost, "
        "IbfabricSuspectCongestion fire on it) over the last minute: a cable by both "
        "ends (kind cable), a host (kind host) or a congested sending port (kind "
        "congestion, to the port after it), the probe pairs it explains, the probes lost "
        "and late of its pairs, its cause, what the probes cannot tell it from "
        "(equally_suspect), the hosts whose probed paths cross it (blast_radius), the training "
        "jobs on those hosts, most hurt first (jobs; the training job board shows one), the "
        "evidence it was made without (lacking: none, or counters, daemons, congestion), why, "
        "its evidence in words, and its pairs (prober -> peer). Hover a cell for the whole "
        "text. Cluster-wide: not filtered by instance or peer.", "none",
        *targets), "IbfabricSuspectLink", "IbfabricSuspectHost", "IbfabricSuspectCongestion",
        boards=[(JOB_UID, "Training job board")])


def alerts_table(title, state, description, runbook):
    """The shipped alerts in `state` now, newest first: alert, severity, what it is about, and
    how long it has been active (since its condition began: ALERTS_FOR_STATE, which the rule
    evaluator writes beside ALERTS), and any label not in SUBJECT as a column of its own."""
    expr = ("sort(%s)" % about('time() - (ALERTS_FOR_STATE{%s} and ignoring (alertstate) '
                               'ALERTS{%s,alertstate="%s"})' % (ALERTS_SEL, ALERTS_SEL, state)))
    p = table(title, description, "dtdurations", target(expr, "active for", instant=True,
                                                         fmt="table"))
    hidden = ["Time", "alertstate", "cable", "cable_end", "remote_node_type"] + SUBJECT
    p["transformations"].append({"id": "organize", "options": {
        "excludeByName": {name: True for name in hidden},
        "indexByName": {"alertname": 0, "severity": 1, "about": 2},
        "renameByName": {}}})
    p["links"] = [{"title": "Runbook (a section per alert: its name in lower case)",
                   "url": RUNBOOK, "targetBlank": True}] if runbook else []
    return p


def maintenance_tables():
    """What is in maintenance now and until when, what each declaration resolved to, and the
    alerts its maintenance holds back in Alertmanager (docs/alerts-and-dashboards.md,
    "Maintenance")."""
    now = table(
        "In maintenance now",
        "Switches, cables and nodes in maintenance now (ibfabric:maintenance): declared in the "
        "maintenance rules file (scripts/ibfabric-maintenance), until their end, or Kubernetes "
        "nodes cordoned or drained, while they are (no until). Alertmanager holds back every "
        "alert about them (IbfabricMaintenance). Resolved to: the daemons, GUIDs and cables the "
        "name matched; 0 means it matches nothing and holds nothing back (check the name).",
        "none",
        target("max by (kind, name, until, reason) (ibfabric:maintenance)", "in maintenance",
               instant=True, fmt="table"),
        target("count by (kind, name) (ibfabric:maintenance_daemon or ibfabric:maintenance_guid "
               "or ibfabric:maintenance_cable) or on (kind, name) 0 * max by (kind, name) "
               "(ibfabric:maintenance)", "resolved to", ref="B", instant=True, fmt="table"))
    now["transformations"].append({"id": "organize", "options": {
        "excludeByName": {"Time": True, "Value #A": True},
        "indexByName": {"kind": 0, "name": 1, "until": 2, "reason": 3, "Value #B": 4},
        "renameByName": {"Value #B": "resolved to (daemons, GUIDs, cables)"}}})
    # The firing alerts that share a label with what is in maintenance, as Alertmanager's
    # inhibit rules match them: a GUID (as switch_guid, node_guid, remote_node_guid or
    # peer_node_guid), a cable, a daemon's job and instance (not the sweep's alerts, which carry
    # a node_guid: their job and instance are the sweeper's).
    firing = 'ALERTS{%s,alertstate="firing",kind=""%s}'
    # What each held-back alert is about (its kind, name and until are the maintenance's).
    subject = [k for k in SUBJECT if k not in ("kind", "name", "until")]
    guid = "ibfabric:maintenance_guid"
    held = " or ".join([
        "(%s * on (node_guid) group_left (kind, name, until) %s)" % (firing % (ALERTS_SEL, ""),
                                                                    guid)] + [
        '(%s * on (%s) group_left (kind, name, until) label_replace(%s, "%s", "$1", '
        '"node_guid", "(.+)"))' % (firing % (ALERTS_SEL, ""), label, guid, label)
        for label in ("remote_node_guid", "peer_node_guid", "switch_guid")] + [
        "(%s * on (cable) group_left (kind, name, until) ibfabric:maintenance_cable)" % (
            firing % (ALERTS_SEL, "")),
        "(%s * on (job, instance) group_left (kind, name, until) ibfabric:maintenance_daemon)"
        % (firing % (ALERTS_SEL, ',node_guid=""'))])
    p = table(
        "Alerts held back by maintenance",
        "Alerts firing now about something in maintenance: Alertmanager notifies no one of them "
        "while its IbfabricMaintenance fires (they stay here, and in Alertmanager's UI as "
        "suppressed). kind and name: the maintenance that holds each back.", "none",
        target("sort(%s)" % about("max by (alertname, severity, kind, name, until, %s) (%s)" % (
            ", ".join(subject), held), subject, SUBJECT_UNLESS), "held back", instant=True,
            fmt="table"))
    p["transformations"].append({"id": "organize", "options": {
        "excludeByName": dict({"Time": True, "Value": True},
                              **{k: True for k in subject}),
        "indexByName": {"alertname": 0, "severity": 1, "about": 2, "kind": 3, "name": 4,
                        "until": 5},
        "renameByName": {"kind": "in maintenance: kind", "name": "name"}}})
    return now, p


def oncall():
    """The landing board: what fires now, the culprits named, what nothing explains, and
    whether the localizer and the daemons work (so that silence means a healthy fabric)."""
    lay = Layout()
    lay.row("What fires now (every Ibfabric* alert)")

    def count(state, severity=""):
        return target("count(ALERTS{%s,alertstate=\"%s\"%s}) or vector(0)" % (
            ALERTS_SEL, state, ',severity="%s"' % severity if severity else ""), instant=True)
    lay.add(stat("Critical alerts firing", "Shipped alerts of severity critical firing now: "
                 "these page (deploy/alertmanager/alertmanager.yml).", "none",
                 count("firing", "critical"), thresholds=1), 6, 4)
    lay.add(stat("Warning alerts firing", "Shipped alerts of severity warning firing now: "
                 "they go to the chat or ticket receiver.", "none",
                 count("firing", "warning"), thresholds=1, color="orange"), 6, 4)
    lay.add(stat("Info alerts firing", "Shipped alerts of severity info firing now: context, "
                 "no notification.", "none", count("firing", "info"), thresholds=1,
                 color="blue"), 6, 4)
    lay.add(stat("Alerts pending", "Alerts whose condition holds but not yet for their `for:` "
                 "duration: they fire if it lasts.", "none", count("pending"), thresholds=1,
                 color="yellow"), 6, 4)
    lay.add(alerts_table(
        "Firing now", "firing",
        "Every Ibfabric* alert firing now (ALERTS), newest first: the alert, its severity, what "
        "it is about (its node, device, port, far end, cable ends, prober and peer, collector, "
        "... as key=value), and how long it has been active (since its condition began, its "
        "for: included; from ALERTS_FOR_STATE). Labels no shipped alert uses yet show as "
        "columns of their own. The runbook has a section per alert, its name in lower case "
        "(#ibfabricportdown); each notification links to it.", True), 24, 9)
    lay.add(alerts_table(
        "Pending", "pending",
        "Alerts whose condition holds now but not yet for their for: duration, newest first, "
        "with how long it has held: they fire if it lasts.", False), 24, 5)

    lay.row("In maintenance (the alerts about it notify no one until it ends)")
    in_maintenance, held_back = maintenance_tables()
    lay.add(linked(in_maintenance, "IbfabricMaintenance"), 10, 6)
    lay.add(linked(held_back, "IbfabricMaintenance"), 14, 6)

    lay.row("Culprits ibfabric-localize names now")
    lay.add(suspects_table(), 24, 8)
    hurt = table(
        "Jobs the culprits hurt",
        "Each training job a culprit named now hurts (ibfabric_localize_suspect_job: its nodes "
        "among the hosts whose probed paths cross the culprit), by culprit, most hurt first; "
        "click a row for the training job board of that job (its nodes, ports, probes, cables, "
        "and GPU utilisation beside the fabric's evidence).", "none",
        target('sort_desc(max by (namespace, job_name, kind, suspect) (label_join('
               'ibfabric_localize_suspect_job, "suspect", " ", "node_name", "port", '
               '"remote_node_name", "remote_port")))', "its nodes hurt", instant=True,
               fmt="table"))
    hurt["fieldConfig"]["defaults"]["links"] = [{
        "title": "Training job board: ${__data.fields.namespace}/${__data.fields.job_name}",
        "url": "/d/%s?${__url_time_range}&${datasource:queryparam}&${job:queryparam}"
               "&var-namespace=${__data.fields.namespace}&var-job_name=${__data.fields.job_name}"
               % JOB_UID, "targetBlank": False}]
    lay.add(linked(hurt, "IbfabricSuspectLink", "IbfabricSuspectHost",
                   "IbfabricSuspectCongestion", boards=[(JOB_UID, "Training job board")]), 24, 5)
    lay.add(linked(table(
        "Suspects withheld",
        "Suspects ibfabric-localize made but does not name, because evidence they need is too "
        "old to use (lacking: counters, daemons, congestion; ibfabric_localize_withheld_info): "
        "named again once it is. The localizer's evidence, below, says which part is stale.",
        "none", target('max by (kind, suspect, cause, lacking) (label_join('
                       'ibfabric_localize_withheld_info, "suspect", " ", "node_name", "port", '
                       '"remote_node_name", "remote_port"))', "withheld", instant=True,
                       fmt="table")), "IbfabricLocalizerFailing"), 24, 5)

    lay.row("Probe symptoms no culprit explains (per pair, from ibfabric-localize)")
    pair = "{{prober_name}} -> {{peer_name}} ({{transport}})"

    def unexplained(metric):
        return target("topk(20, max by (prober_name, peer_name, transport) (%s))" % metric, pair)
    lay.add(linked(timeseries(
        "Unexplained probe loss",
        "Probe pairs losing probes that no culprit named in the last 10 minutes explains: the "
        "share lost over the localizer's evidence window, top 20 "
        "(ibfabric_localize_pair_unexplained_loss_ratio; IbfabricProbeLoss fires above 1 % for "
        "2 minutes). Loss nothing explains: a cable no probed pair isolates, or a path not "
        "traced.", "percentunit",
        unexplained("ibfabric_localize_pair_unexplained_loss_ratio")), "IbfabricProbeLoss",
        boards=[("ibfabric-probes", "Probes and jitter")]), 8, 7)
    lay.add(linked(timeseries(
        "Unexplained probe jitter",
        "Probe pairs whose RTT jitter is above 500 us that no culprit named in the last 10 "
        "minutes explains, top 20 (ibfabric_localize_pair_unexplained_jitter_seconds; "
        "IbfabricProbeJitterHigh fires after 10 minutes).", "s",
        unexplained("ibfabric_localize_pair_unexplained_jitter_seconds")),
        "IbfabricProbeJitterHigh", boards=[("ibfabric-probes", "Probes and jitter")]), 8, 7)
    lay.add(linked(timeseries(
        "Unexplained RTT spikes",
        "Probe pairs with more than 5 RTT spikes in 10 minutes that no culprit named in the "
        "last 10 minutes explains: the spikes, top 20 "
        "(ibfabric_localize_pair_unexplained_rtt_spikes; IbfabricProbeRttSpikes, info, lists "
        "them). On a busy training cluster the hosts make such spikes themselves.", "none",
        unexplained("ibfabric_localize_pair_unexplained_rtt_spikes")),
        "IbfabricProbeRttSpikes", boards=[("ibfabric-probes", "Probes and jitter")]), 8, 7)

    lay.row("Is ibfabric-localize working? (without it no culprit is named)")
    lay.add(linked(stat(
        "Localizers evaluating", "ibfabric-localize instances whose last evaluation made "
        "verdicts (ibfabric_localize_up == 1); 0: no culprit is named (none scraped, or its "
        "probe evidence missing or stale).", "none",
        target("count(ibfabric_localize_up == 1) or vector(0)", instant=True),
        steps=[("red", None), ("green", 1)]),
        "IbfabricLocalizerFailing", "IbfabricLocalizerAbsent"), 6, 4)
    lay.add(linked(stat(
        "Localizers whose store answers", "ibfabric-localize instances whose store (Prometheus, "
        "VictoriaMetrics, ...) answered the last evaluation's probe queries "
        "(ibfabric_localize_store_up == 1).", "none",
        target("count(ibfabric_localize_store_up == 1) or vector(0)", instant=True),
        steps=[("red", None), ("green", 1)]), "IbfabricLocalizerFailing"), 6, 4)
    lay.add(linked(stat(
        "Evidence parts unusable", "Parts of the evidence (probes, hosts, paths, daemons, "
        "counters, congestion, symptoms) a localizer holds too old to use "
        "(ibfabric_localize_evidence_usable == 0): verdicts are made without them, or withheld "
        "(docs/design.md, Partial evidence).", "none",
        target("count(ibfabric_localize_evidence_usable == 0) or vector(0)", instant=True),
        thresholds=1, color="orange"), "IbfabricLocalizerFailing"), 6, 4)
    lay.add(stat(
        "Oldest evidence in use", "Age of the oldest part of the evidence any localizer's last "
        "evaluation used (ibfabric_localize_evidence_age_seconds).", "s",
        target("max(ibfabric_localize_evidence_age_seconds)", instant=True)), 6, 4)
    lay.add(table(
        "Evidence by part", "Each localizer's evidence by part: its age in seconds (probes: the "
        "newest probe sample; the others: their oldest answer in use) and whether it is young "
        "enough to use (1) or not (0).", "none",
        target("max by (instance, evidence) (ibfabric_localize_evidence_age_seconds)",
               "age seconds", instant=True, fmt="table"),
        target("min by (instance, evidence) (ibfabric_localize_evidence_usable)", "usable",
               ref="B", instant=True, fmt="table")), 8, 8)
    lay.add(linked(timeseries(
        "Localizer query failures per second",
        "Queries of the localizers to the store that failed, by query and reason (timeout, "
        "connection, http, malformed, too_large, auth); the localizer's log says more.", "cps",
        target("sum by (instance, query, reason) (rate("
               "ibfabric_localize_query_failures_total[%s]))" % RI,
               "{{instance}} {{query}} {{reason}}")), "IbfabricLocalizerFailing"), 8, 8)
    lay.add(timeseries(
        "Localizer evaluation time", "Wall time of each localizer's last evaluation: reading "
        "the evidence and attributing it (every 10 s by default).", "s",
        target("ibfabric_localize_evaluation_duration_seconds", "{{instance}}")), 8, 8)

    lay.row("Are the daemons working? (ibfabricd, the selected job and instances)")
    lay.add(stat("Daemons scraped", "Daemons of the selected job Prometheus scrapes now (up == "
                 "1).", "none", target("count(up{%s} == 1) or vector(0)" % SEL, instant=True)),
            6, 4)
    lay.add(linked(stat(
        "Daemons down", "Daemons of the selected job Prometheus cannot scrape (up == 0): their "
        "nodes are not monitored.", "none",
        target("count(up{%s} == 0) or vector(0)" % SEL, instant=True), thresholds=1),
        "IbfabricDaemonDown", boards=[("ibfabric-daemon", "Daemon dashboard")]), 6, 4)
    lay.add(linked(stat(
        "Collectors failing", "Collectors whose last run could not read their source "
        "(ibfabric_collector_success == 0).", "none",
        target("count(ibfabric_collector_success{%s} == 0) or vector(0)" % SEL, instant=True),
        thresholds=1), "IbfabricCollectorFailing",
        boards=[("ibfabric-daemon", "Daemon dashboard")]), 6, 4)
    lay.add(linked(stat(
        "Collectors stuck", "Collectors whose run passed its deadline and has not returned "
        "(ibfabric_collector_run_stuck == 1): a read waiting in the kernel.", "none",
        target("count(ibfabric_collector_run_stuck{%s} == 1) or vector(0)" % SEL,
               instant=True), thresholds=1), "IbfabricCollectorStuck"), 6, 4)
    lay.add(linked(table(
        "Daemons down, collectors failing or stuck",
        "Which daemon is not scraped (up == 0), and which collector of which daemon fails or is "
        "stuck, now.", "none",
        target('max by (job, instance, collector, what) ('
               'label_replace(up{%s} == 0, "what", "not scraped", "", "") or '
               'label_replace(ibfabric_collector_success{%s} == 0, "what", "collector failing", '
               '"", "") or '
               'label_replace(ibfabric_collector_run_stuck{%s} == 1, "what", "collector stuck", '
               '"", ""))' % (SEL, SEL, SEL), "problem", instant=True, fmt="table")),
        "IbfabricDaemonDown", "IbfabricCollectorFailing", "IbfabricCollectorStuck",
        boards=[("ibfabric-daemon", "Daemon dashboard")]), 24, 6)
    return dashboard(ONCALL_UID, "ibfabric: on call",
                     "The first board to open when paged: the Ibfabric* alerts firing and "
                     "pending now, the culprits ibfabric-localize names with their evidence and "
                     "the hosts they touch, the probe loss, jitter and spikes no culprit "
                     "explains, and whether the localizer and the daemons work (silence is only "
                     "good news when they do).", lay, variables(), tags=[ONCALL_UID])


VF_KEY = "job, instance, pf, vf, pci_address"


def with_pod(expr):
    """`expr` (one series per VF, carrying VF_KEY) with the namespace and pod labels of the pod
    that holds the VF (ibfabric_sriov_vf_pod_info); VFs no pod holds keep their series, without
    those labels."""
    return ("%s * on (%s) group_left (namespace, pod) ("
            "group by (%s, namespace, pod) (ibfabric_sriov_vf_pod_info{%s}) "
            "or on (%s) group by (%s) (ibfabric_sriov_vf_info{%s}))"
            % (expr, VF_KEY, VF_KEY, SEL, VF_KEY, VF_KEY, SEL))


def vf_rate(metric, vsel):
    return with_pod("sum by (%s) (rate(%s{%s}[%s]))" % (VF_KEY, metric, vsel, RI))


def sriov():
    lay = Layout()
    vsel = SEL + ',pf=~"$pf"'
    vf_legend = "{{pf}} vf {{vf}} {{pci_address}} {{namespace}} {{pod}}"
    lay.row("Physical functions")
    lay.add(table("Physical functions", "Every SR-IOV physical function: PCI address and RDMA "
                  "device (ibfabric_sriov_pf_info).", "none",
                  target("ibfabric_sriov_pf_info{%s}" % vsel, instant=True, fmt="table")), 12, 6)
    lay.add(timeseries("VFs enabled and supported", "sriov_numvfs and sriov_totalvfs per PF.",
                       "none",
                       target("ibfabric_sriov_pf_vfs_enabled{%s}" % vsel, "enabled {{pf}}"),
                       target("ibfabric_sriov_pf_vfs_supported{%s}" % vsel, "supported {{pf}}",
                              ref="B")), 12, 6)
    lay.row("Virtual functions")
    lay.add(table("VFs", "Every enabled VF: PCI address (what the SR-IOV device plugin gives a "
                  "pod), the net interface and RDMA device it became, GUIDs, link policy; the "
                  "namespace and pod that hold it when the kubelet says "
                  "(ibfabric_sriov_vf_pod_info), and its NUMA node (Value #B; -1: no affinity).",
                  "none",
                  target(with_pod("ibfabric_sriov_vf_info{%s}" % vsel), instant=True,
                         fmt="table"),
                  target("ibfabric_sriov_vf_numa_node{%s}" % vsel, ref="B", instant=True,
                         fmt="table")), 24, 8)
    lay.add(table("Pods holding VFs", "Which container of which pod holds each VF, and the "
                  "device plugin resource it was allocated from (kubelet pod-resources API).",
                  "none",
                  target("ibfabric_sriov_vf_pod_info{%s}" % vsel, instant=True, fmt="table")),
            16, 6)
    lay.add(stat("Kubelet pod-resources answers", "1 when the last pod-resources List call to "
                 "the kubelet answered, 0 when it failed (ibfabric_sriov_kubelet_up); no value "
                 "on a node without a kubelet socket.", "none",
                 target("min(ibfabric_sriov_kubelet_up{%s})" % SEL, instant=True)), 8, 6)
    lay.add(timeseries("VF link policy", "0 Down, 1 Up, 2 Follow the physical port.", "none",
                       target(with_pod("ibfabric_sriov_vf_link_policy{%s}" % vsel), vf_legend)),
            8, 7)
    lay.add(timeseries("VF received bytes", "Bytes per second received by each VF "
                       "(rtnetlink VF stats), with the pod that holds it.", "Bps",
                       target(vf_rate("ibfabric_sriov_vf_receive_bytes_total", vsel),
                              vf_legend)), 8, 7)
    lay.add(timeseries("VF transmitted bytes", "Bytes per second sent by each VF, with the pod "
                       "that holds it.", "Bps",
                       target(vf_rate("ibfabric_sriov_vf_transmit_bytes_total", vsel),
                              vf_legend)), 8, 7)
    lay.add(timeseries("VF dropped packets", "Received and to-be-sent packets dropped per "
                       "second, per VF, with the pod that holds it.", "pps",
                       target(vf_rate("ibfabric_sriov_vf_receive_dropped_packets_total", vsel),
                              "rx " + vf_legend),
                       target(vf_rate("ibfabric_sriov_vf_transmit_dropped_packets_total", vsel),
                              "tx " + vf_legend, ref="B")), 12, 7)
    lay.add(timeseries("SR-IOV read and netlink errors per second",
                       "Unreadable or garbled SR-IOV sysfs files, and failed rtnetlink dumps.",
                       "cps",
                       target("sum by (instance, pf) (rate(ibfabric_sriov_read_errors_total{%s}"
                              "[%s]))" % (SEL, RI), "sysfs {{instance}} {{pf}}"),
                       target("sum by (instance) (rate(ibfabric_sriov_netlink_errors_total{%s}"
                              "[%s]))" % (SEL, RI), "netlink {{instance}}", ref="B")), 12, 7)
    lay.add(timeseries("Kubelet pod-resources errors per second",
                       "Failed pod-resources List calls to the kubelet, by reason (timeout, "
                       "unavailable, unimplemented, malformed, other); no series on a node "
                       "without a kubelet socket.", "cps",
                       target("sum by (instance, reason) (rate("
                              "ibfabric_sriov_kubelet_errors_total{%s}[%s]))" % (SEL, RI),
                              "{{reason}} {{instance}}")), 12, 7)
    extra = [("pf", "PF",
              'label_values(ibfabric_sriov_pf_info{job=~"$job",instance=~"$instance"}, pf)')]
    return dashboard("ibfabric-sriov", "ibfabric / SR-IOV virtual functions",
                     "SR-IOV physical and virtual functions of one node: which pod holds each "
                     "VF (kubelet pod-resources API), its state and traffic.", lay,
                     variables(instance_multi=False, extra=extra))


def rdma_nics():
    """RoCE and EFA ports (and every other local RDMA port) from the sysfs collector."""
    lay = Layout()
    dsel = SEL + ',device=~"$device"'
    by = "sum by (instance, device, port)"

    def rate_of(metric):
        return "%s (rate(%s{%s}[%s]))" % (by, metric, dsel, RI)

    legend = "{{instance}} {{device}}/{{port}}"
    lay.row("Traffic (every local RDMA port: InfiniBand, RoCE, EFA)")
    lay.add(table("Ports", "Link layer (InfiniBand, Ethernet for RoCE, Unknown for EFA), state, "
                  "width and speed of every local port (ibfabric_sysfs_port_info).", "none",
                  target("ibfabric_sysfs_port_info{%s}" % dsel, instant=True, fmt="table")),
            24, 6)
    lay.add(timeseries("Throughput against the effective rate",
                       "Bytes per second sent and received per port, and the port's data rate "
                       "after line encoding (ibfabric_sysfs_port_effective_rate_bytes_per_second)"
                       ". EFA's counts come from its hw_counters, in bytes.", "Bps",
                       target(rate_of("ibfabric_sysfs_port_transmit_bytes_total"),
                              "tx " + legend),
                       target(rate_of("ibfabric_sysfs_port_receive_bytes_total"),
                              "rx " + legend, ref="B"),
                       target("ibfabric_sysfs_port_effective_rate_bytes_per_second{%s}" % dsel,
                              "rate " + legend, ref="C")), 24, 8)
    lay.row("RoCE congestion (mlx5)")
    lay.add(timeseries("ECN-marked packets received per second",
                       "RoCE packets that arrived with an ECN Congestion Experienced mark "
                       "(np_ecn_marked_roce_packets): a switch queue towards this port was "
                       "filling.", "pps",
                       target(rate_of("ibfabric_sysfs_port_roce_ecn_marked_packets_total"),
                              legend)), 8, 8)
    lay.add(timeseries("CNPs sent and handled per second",
                       "Congestion Notification Packets this port sent in answer to ECN marks "
                       "(np_cnp_sent), and CNPs it received and slowed down for (rp_cnp_handled)"
                       ".", "pps",
                       target(rate_of("ibfabric_sysfs_port_roce_cnp_sent_total"),
                              "sent " + legend),
                       target(rate_of("ibfabric_sysfs_port_roce_cnp_handled_total"),
                              "handled " + legend, ref="B")), 8, 8)
    lay.add(timeseries("Probe jitter from these nodes",
                       "RFC 3550 jitter of the probes these nodes send (probe collector): "
                       "congestion on RoCE paths shows here as it does in ECN and CNP rates.",
                       "s",
                       target("ibfabric_probe_jitter_seconds{%s}" % SEL,
                              "{{instance}} -> {{peer}} ({{transport}})")), 8, 8)
    lay.row("Loss and retransmission (mlx5 transport)")
    lay.add(timeseries("Sequence errors per second",
                       "Out-of-sequence packets received, NAK sequence errors and implied NAKs: "
                       "packets lost on the way (not congestion, which marks instead of "
                       "dropping).", "cps",
                       target(rate_of("ibfabric_sysfs_port_out_of_sequence_packets_total"),
                              "out of sequence " + legend),
                       target(rate_of("ibfabric_sysfs_port_packet_sequence_errors_total"),
                              "NAK seq " + legend, ref="B"),
                       target(rate_of("ibfabric_sysfs_port_implied_nak_sequence_errors_total"),
                              "implied NAK " + legend, ref="C")), 12, 8)
    lay.add(timeseries("Timeouts and retransmissions per second",
                       "Local ACK timeouts (requests unanswered), duplicate requests received "
                       "(the peer resent), adaptive retransmissions and their timeouts.", "cps",
                       target(rate_of("ibfabric_sysfs_port_local_ack_timeouts_total"),
                              "ACK timeout " + legend),
                       target(rate_of("ibfabric_sysfs_port_duplicate_requests_total"),
                              "duplicate " + legend, ref="B"),
                       target(rate_of("ibfabric_sysfs_port_roce_adaptive_retransmissions_total"),
                              "adaptive retrans " + legend, ref="C"),
                       target(rate_of(
                           "ibfabric_sysfs_port_roce_adaptive_retransmission_timeouts_total"),
                              "adaptive retrans timeout " + legend, ref="D")), 12, 8)
    lay.row("AWS EFA")
    lay.add(timeseries("EFA retransmitted packets per second",
                       "Packets the SRD transport sent again (retrans_pkts) and its "
                       "retransmission timeouts (retrans_timeout_events).", "pps",
                       target(rate_of("ibfabric_sysfs_port_efa_retransmitted_packets_total"),
                              "retransmitted " + legend),
                       target(rate_of("ibfabric_sysfs_port_efa_retransmit_timeouts_total"),
                              "timeouts " + legend, ref="B")), 8, 8)
    lay.add(timeseries("EFA impaired and unresponsive remotes per second",
                       "Connections to remote peers found impaired, and peers that stopped "
                       "answering; receive drops.", "cps",
                       target(rate_of(
                           "ibfabric_sysfs_port_efa_impaired_remote_connection_events_total"),
                              "impaired " + legend),
                       target(rate_of("ibfabric_sysfs_port_efa_unresponsive_remote_events_total"),
                              "unresponsive " + legend, ref="B"),
                       target(rate_of("ibfabric_sysfs_port_efa_receive_drops_total"),
                              "rx drops " + legend, ref="C")), 8, 8)
    lay.add(timeseries("EFA RDMA read and write bytes per second",
                       "Bytes moved by RDMA read and write work requests (rdma_read_bytes, "
                       "rdma_write_bytes).", "Bps",
                       target(rate_of("ibfabric_sysfs_port_efa_rdma_read_bytes_total"),
                              "read " + legend),
                       target(rate_of("ibfabric_sysfs_port_efa_rdma_write_bytes_total"),
                              "write " + legend, ref="B")), 8, 8)
    extra = [("device", "Device",
              'label_values(ibfabric_sysfs_port_info{job=~"$job",instance=~"$instance"}, '
              'device)')]
    return dashboard("ibfabric-rdma-nics", "ibfabric / RoCE and EFA ports",
                     "Local RDMA ports of the selected nodes as the kernel reports them (sysfs "
                     "collector): traffic against the effective rate, RoCE congestion (ECN, "
                     "CNPs) beside probe jitter, loss and retransmissions, EFA retransmissions "
                     "and impaired remotes.", lay, variables(extra=extra))


# --- The job board: one training job, chosen by namespace and job name ---------------------
# Its nodes are those ibfabric:job_node gives it (kube-state-metrics, or a scheduler's job map):
# the hidden variable `node`, every value selected. The daemons' series carry the node's name in
# their `node` label (a target label: the ServiceMonitor's, or the scrape config's), so every
# daemon query of this board selects job=~"$job",node=~"$node" instead of an instance (the lint's
# one exception, tests/e2e/test_dashboards.py); the fabric sweep's counters, read by whichever
# daemon sweeps the switch, select instance=~".+" as elsewhere.
JOB_UID = "ibfabric-job"
JSEL = 'job=~"$job",node=~"$node"'
SWEEP = 'job=~"$job",instance=~".+"'
THE_JOB = 'namespace="$namespace",job_name="$job_name"'
JOB_PORT = "node, instance, device, port, side"
# The probe pairs between two of its nodes, by the prober's series (job, instance, peer,
# transport), with the peer's node as `peer_node`: the peer's port (ibfabric_path_peer_info
# peer_node_guid, which the paths collector resolves) is the node GUID of the daemon whose
# ibfabric_probe_node_info names it, and that daemon's `node` label is the peer's node. The
# prober is one of its nodes by its own `node` label, the peer by that join: both must be.
JOB_PEERS = ('label_replace(label_replace(topk by (node_guid) (1, max by (node_guid, node) ('
             'ibfabric_probe_node_info{%s,node_guid!=""})), "peer_node_guid", "$1", '
             '"node_guid", "(.+)"), "peer_node", "$1", "node", "(.+)")' % JSEL)
JOB_PAIRS = ("max by (job, instance, node, peer, transport, peer_node) ("
             "ibfabric_path_peer_info{%s} * on (peer_node_guid) group_left (peer_node) %s)"
             % (JSEL, JOB_PEERS))
JOB_PAIR_LEGEND = "{{node}} -> {{peer_node}} ({{transport}})"
# Its daemons by node: the recording rules of the ports keep (job, instance, device, port, side)
# only, so their series reach the node through the daemon's instance.
JOB_DAEMONS = "group by (job, instance, node) (ibfabric_build_info{%s})" % JSEL
# The cables the probes between its nodes cross (either leg), one row per cable, named as
# ibfabric_fabric_link_info{cable_end="a"} names it.
CABLE = "node_guid, port, node_name, remote_node_guid, remote_port, remote_node_name"
JOB_HOPS = ("ibfabric_path_hop_info{%s} * on (job, instance, peer, transport) group_left () %s"
            % (JSEL, JOB_PAIRS))
# A GPU's node: dcgm-exporter's Hostname (its NODE_NAME, which its Helm chart and the GPU
# Operator set to the Kubernetes node's name), else a kubernetes_node or node label a scrape
# config gave it.
GPU_UTIL = ('(label_replace(DCGM_FI_DEV_GPU_UTIL{Hostname=~"$node"}, "node", "$1", "Hostname", '
            '"(.+)") or label_replace(DCGM_FI_DEV_GPU_UTIL{kubernetes_node=~"$node"}, "node", '
            '"$1", "kubernetes_node", "(.+)") or DCGM_FI_DEV_GPU_UTIL{node=~"$node"})')
LINK_ERRORS = ("symbol_errors", "link_error_recoveries", "link_downed", "receive_errors")


def job_variables():
    """The data source, the daemons' scrape job, the training job by namespace and name, and its
    nodes: hidden, every one selected (All is the list of its nodes, not a wildcard)."""
    node = query_var("node", "Its nodes",
                     'label_values(ibfabric:job_node{%s}, node)' % THE_JOB, True, True,
                     all_value=None)
    node["hide"] = 2
    node["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
    return [
        dict(DATASOURCE_VAR),
        query_var("job", "Daemons' scrape job", "label_values(ibfabric_build_info, job)", False,
                  False),
        query_var("namespace", "Namespace", "label_values(ibfabric:job_node, namespace)", False,
                  False),
        query_var("job_name", "Training job",
                  'label_values(ibfabric:job_node{namespace="$namespace"}, job_name)', False,
                  False),
        node,
    ]


def job_named(expr):
    """`expr` (by JOB_PORT) with the names of the port's node and of its far end."""
    info = "topk by (instance, device, port) (1, ibfabric_ports_peer_info{%s})" % JSEL
    return ("(%s) * on (instance, device, port) group_left (node_name, peer_node_name, peer_port) "
            "%s or (%s) unless on (instance, device, port) %s" % (expr, info, expr, info))


def job_ports(metric, extra=""):
    return "max by (%s) (%s{%s%s})" % (JOB_PORT, metric, JSEL, extra)


def job_record(record):
    """A recording rule's series of its nodes' ports (by JOB_PORT)."""
    return ('max by (%s) (%s{job=~"$job"} * on (job, instance) group_left (node) %s)'
            % (JOB_PORT, record, JOB_DAEMONS))


def on_cables(expr, keys):
    """`expr` (one value per `keys`: node_guid, port or remote_node_guid, remote_port) on each
    cable of the paths between its nodes that has it."""
    return "max by (%s) (group by (%s) (%s) * on (%s) group_left () (%s))" % (
        CABLE, CABLE, JOB_HOPS, keys, expr)


def cable_end(fabric_expr, ports_expr, far):
    """A value at one end of each cable by (node_guid, port), the "a" end, or (remote_node_guid,
    remote_port), the "b" end if `far`: from the fabric sweep (`fabric_expr`, by node_guid, port),
    else from the daemon of the host at that cable (`ports_expr`, by instance, device, port: side
    peer is the switch port facing the host, the "a" end of a host's cable; side local the host's
    own port, its "b" end), where @SIDE@ in `ports_expr` stands for the side's matcher."""
    info = "topk by (instance, device, port) (1, ibfabric_ports_peer_info{%s})" % JSEL
    if far:
        host = ("max by (node_guid, port) ((%s) * on (instance, device, port) group_left "
                "(node_guid) %s)" % (ports_expr.replace("@SIDE@", ',side="local"'), info))
    else:
        host = ('max by (node_guid, port) (label_replace(label_replace((%s) * on (instance, '
                'device, port) group_left (peer_node_guid, peer_port) %s, "node_guid", "$1", '
                '"peer_node_guid", "(.+)"), "port", "$1", "peer_port", "(.+)"))'
                % (ports_expr.replace("@SIDE@", ',side="peer"'), info))
    expr = "max by (node_guid, port) (%s) or %s" % (fabric_expr, host)
    if not far:
        return on_cables(expr, "node_guid, port")
    expr = ('max by (remote_node_guid, remote_port) (label_replace(label_replace(%s, '
            '"remote_node_guid", "$1", "node_guid", "(.+)"), "remote_port", "$1", "port", "(.+)"))'
            % expr)
    return on_cables(expr, "remote_node_guid, remote_port")


def job():
    lay = Layout()
    job_nodes = "max by (node) (ibfabric:job_node{%s})" % THE_JOB
    named_by_job = "ibfabric_localize_suspect_job{%s}" % THE_JOB
    by_culprit = "kind, node_guid, port, remote_node_guid, remote_port"
    loss = ("(sum by (job, instance, node, peer, transport) (rate(ibfabric_probe_lost_total{%s}"
            "[%s])) / sum by (job, instance, node, peer, transport) (rate("
            "ibfabric_probe_sent_total{%s}[%s]))) * on (job, instance, peer, transport) "
            "group_left (peer_node) %s" % (JSEL, RI, JSEL, RI, JOB_PAIRS))
    errors = " + ".join("rate(ibfabric_ports_%s_total{%s}[%s])" % (c, JSEL, RI)
                        for c in LINK_ERRORS)

    lay.row("The job and its nodes")
    lay.add(stat("Nodes it runs on", "The nodes the job's running pods are on (ibfabric:job_node).",
                 "none", target("count(%s) or vector(0)" % job_nodes, instant=True)), 4, 4)
    lay.add(stat("Its nodes without a daemon", "Its nodes no ibfabricd of the selected scrape "
                 "job is scraped on (up == 1 with that node label): their ports and probes are "
                 "not seen.", "none",
                 target('count(%s unless on (node) (up{%s} == 1)) or vector(0)'
                        % (job_nodes, JSEL), instant=True), thresholds=1, color="orange"), 4, 4)
    lay.add(linked(stat(
        "Its ports not ACTIVE", "Local ports of its nodes whose logical state is not ACTIVE.",
        "none", target('count(ibfabric_ports_state{%s,side="local"} < 4) or vector(0)' % JSEL,
                       instant=True), thresholds=1), "IbfabricPortDown"), 4, 4)
    lay.add(linked(stat(
        "Its links below their best", "Ports of its nodes (either end of the cable) with fewer "
        "lanes or a lower lane speed than they had within the last day.", "none",
        target("count((ibfabric_ports_link_width_lanes{%s} < max_over_time("
               "ibfabric_ports_link_width_lanes{%s}[1d])) or "
               "(ibfabric_ports_link_speed_lane_bytes_per_second{%s} < max_over_time("
               "ibfabric_ports_link_speed_lane_bytes_per_second{%s}[1d]))) or vector(0)"
               % (JSEL, JSEL, JSEL, JSEL), instant=True), thresholds=1, color="orange"),
        "IbfabricLinkWidthDegraded", "IbfabricLinkSpeedDegraded"), 4, 4)
    lay.add(stat("Worst probe loss between its nodes", "The highest share of probes lost "
                 "between two of its nodes over the rate interval.", "percentunit",
                 target("max(%s) or vector(0)" % loss, instant=True),
                 steps=[("green", None), ("orange", 0.001), ("red", 0.01)]), 4, 4)
    lay.add(linked(stat(
        "Culprits named that hurt it", "Cables, hosts and congested ports ibfabric-localize "
        "names now whose blast radius (the hosts whose probed paths cross the culprit) holds "
        "some of its nodes (ibfabric_localize_suspect_job).", "none",
        target("count(max by (%s) (%s)) or vector(0)" % (by_culprit, named_by_job),
               instant=True), thresholds=1, color="orange"),
        "IbfabricSuspectLink", "IbfabricSuspectHost", "IbfabricSuspectCongestion"), 4, 4)
    lay.add(table("Its nodes", "Each node of the job (ibfabric:job_node), whether its daemon "
                  "is scraped (daemon up: 1), and its local ports: how many, how many ACTIVE.",
                  "none",
                  target(job_nodes, "in the job", instant=True, fmt="table"),
                  target("max by (node) (up{%s})" % JSEL, "daemon up", ref="B", instant=True,
                         fmt="table"),
                  target('count by (node) (ibfabric_ports_state{%s,side="local"})' % JSEL,
                         "ports", ref="C", instant=True, fmt="table"),
                  target('count by (node) (ibfabric_ports_state{%s,side="local"} == 4)' % JSEL,
                         "ports ACTIVE", ref="D", instant=True, fmt="table")), 24, 6)

    lay.row("GPU utilisation beside the fabric's evidence (DCGM exporter, where in the same store)")
    both = timeseries(
        "GPU utilisation and the fabric's evidence",
        "On one time axis: the job's GPU utilisation (dcgm-exporter's DCGM_FI_DEV_GPU_UTIL, "
        "0-100 %, of every GPU of its nodes: the job average and its 5 lowest nodes; a GPU's "
        "node is its Hostname label, else kubernetes_node or node), and, on the right axes, the "
        "worst probe loss between two of its nodes and how many culprits named now hurt it. "
        "GPUs idle while the loss rises or a culprit is named: the network; idle with a clean "
        "fabric: look elsewhere (input pipeline, a straggler, checkpointing). No GPU series "
        "where no dcgm-exporter reaches this store.", "percent",
        target("avg(%s)" % GPU_UTIL, "GPU utilisation, job average"),
        target("bottomk(5, avg by (node) (%s))" % GPU_UTIL, "GPU utilisation {{node}}",
               ref="B"),
        target("max(%s)" % loss, "worst probe loss between its nodes", ref="C"),
        target("count(max by (%s) (%s)) or vector(0)" % (by_culprit, named_by_job),
               "culprits named that hurt it", ref="D"))

    def right(ref, unit, bars=False):
        props = [{"id": "unit", "value": unit}, {"id": "custom.axisPlacement", "value": "right"}]
        if bars:
            props.append({"id": "custom.drawStyle", "value": "bars"})
        return {"matcher": {"id": "byFrameRefID", "options": ref}, "properties": props}
    both["fieldConfig"]["overrides"] = [right("C", "percentunit"), right("D", "none", True)]
    lay.add(both, 24, 9)
    lay.add(timeseries("GPU utilisation per node", "The average utilisation of each node's "
                       "GPUs (DCGM_FI_DEV_GPU_UTIL), every node of the job.", "percent",
                       target("avg by (node) (%s)" % GPU_UTIL, "{{node}}")), 12, 8)
    lay.add(timeseries("Throughput of its nodes", "Bytes per second its nodes' local ports send "
                       "and receive, per node: a job that stalls stops sending.", "Bps",
                       target('sum by (node) (rate(ibfabric_ports_transmit_bytes_total{%s,'
                              'side="local"}[%s]))' % (JSEL, RI), "tx {{node}}"),
                       target('sum by (node) (rate(ibfabric_ports_receive_bytes_total{%s,'
                              'side="local"}[%s]))' % (JSEL, RI), "rx {{node}}", ref="B")), 12, 8)

    lay.row("Culprits ibfabric-localize names now that hurt it")

    def culprit(expr, labels=""):
        return ('max by (kind, suspect%s) (label_join(%s, "suspect", " ", "node_name", "port", '
                '"remote_node_name", "remote_port"))' % (labels, expr))
    lay.add(linked(table(
        "Culprits that hurt it",
        "Each culprit named now whose blast radius holds some of its nodes: how many of its "
        "nodes (ibfabric_localize_suspect_job), the pairs it explains, its cause, why, its "
        "evidence in words, its pairs, what the probes cannot tell it from, the hosts whose "
        "probed paths cross it, every job it hurts (most first) and the evidence it was made "
        "without. Hover a cell for the whole text.", "none",
        target(culprit(named_by_job), "its nodes hurt", instant=True, fmt="table"),
        target(culprit("ibfabric_localize_suspect and on (%s) %s" % (by_culprit, named_by_job)),
               "pairs explained", ref="B", instant=True, fmt="table"),
        target(culprit("ibfabric_localize_suspect_info and on (%s) %s" % (by_culprit,
                                                                          named_by_job),
                       ", cause, why, evidence, pairs, equally_suspect, blast_radius, jobs, "
                       "lacking"), "named", ref="C", instant=True, fmt="table")),
        "IbfabricSuspectLink", "IbfabricSuspectHost", "IbfabricSuspectCongestion",
        boards=[(ONCALL_UID, "On call: every culprit"), ("ibfabric-probes", "Probes and jitter")]),
        24, 7)

    lay.row("Its ports: state, width and speed, errors, congestion")
    state = table(
        "Ports of its nodes",
        "Every port of its nodes and the switch port facing it (side peer), named with its far "
        "end: logical state (4 ACTIVE), width in lanes and lane speed in Gb/s now and their best "
        "within the last day, link errors over the dashboard's range (symbol, recovery, downed, "
        "receive), and the share of the last 5 minutes it waited to send (where the device's "
        "tick is known).", "none",
        target(job_named(job_ports("ibfabric_ports_state")), "state", instant=True,
               fmt="table"),
        target(job_named(job_ports("ibfabric_ports_link_width_lanes")), "width", ref="B",
               instant=True, fmt="table"),
        target(job_named("max by (%s) (max_over_time(ibfabric_ports_link_width_lanes{%s}[1d]))"
                         % (JOB_PORT, JSEL)), "best width", ref="C", instant=True, fmt="table"),
        target(job_named("max by (%s) (ibfabric_ports_link_speed_lane_bytes_per_second{%s}) * 8 "
                         "/ 1e9" % (JOB_PORT, JSEL)), "lane Gb/s", ref="D", instant=True,
               fmt="table"),
        target(job_named("max by (%s) (max_over_time("
                         "ibfabric_ports_link_speed_lane_bytes_per_second{%s}[1d])) * 8 / 1e9"
                         % (JOB_PORT, JSEL)), "best lane Gb/s", ref="E", instant=True,
               fmt="table"),
        target(job_named("sum by (%s) (%s)" % (JOB_PORT, " + ".join(
            "increase(ibfabric_ports_%s_total{%s}[$__range])" % (c, JSEL) for c in LINK_ERRORS))),
            "errors in range", ref="F", instant=True, fmt="table"),
        target(job_named(job_record("ibfabric:ports_transmit_wait_share:rate5m")),
               "waiting share", ref="G", instant=True, fmt="table"))
    state["fieldConfig"]["overrides"] = [{
        "matcher": {"id": "byName", "options": "Value #A"},
        "properties": [{"id": "mappings", "value": [{"type": "value", "options": {
            "1": {"text": "DOWN", "color": "red"}, "2": {"text": "INIT", "color": "orange"},
            "3": {"text": "ARMED", "color": "orange"}, "4": {"text": "ACTIVE", "color": "green"}}}]},
                       {"id": "custom.cellOptions", "value": {"type": "color-text"}}]}]
    lay.add(linked(state, "IbfabricPortDown", "IbfabricLinkWidthDegraded",
                   "IbfabricLinkSpeedDegraded", boards=[("ibfabric-node", "Node and HCA")]), 24, 8)
    port_legend = "{{node}} {{device}}/{{port}} {{side}} - {{peer_node_name}}"
    lay.add(linked(timeseries(
        "Port errors per second on its nodes",
        "Symbol errors, link error recoveries, links downed and receive errors per second on "
        "its nodes' ports and the switch ports facing them, top 10.", "cps",
        target("topk(10, %s)" % job_named("sum by (%s) (%s)" % (JOB_PORT, errors)),
               port_legend)), "IbfabricSymbolErrors", "IbfabricReceiveErrors"), 12, 8)
    lay.add(linked(timeseries(
        "Congestion on its ports",
        "The share of the last 5 minutes each of its ports (and the switch port facing it) "
        "waited to send, where the device's tick is known "
        "(ibfabric:ports_transmit_wait_share:rate5m), and PortXmitWait ticks per word sent "
        "where it is not (ibfabric:ports_transmit_wait_per_word:rate5m, above 1: it waits more "
        "than it sends), top 10 each.", "percentunit",
        target("topk(10, %s)" % job_named(job_record(
            "ibfabric:ports_transmit_wait_share:rate5m")), "share " + port_legend),
        target("topk(10, %s)" % job_named(job_record(
            "ibfabric:ports_transmit_wait_per_word:rate5m")), "ticks/word " + port_legend,
            ref="B")), "IbfabricCongestion"), 12, 8)
    lay.add(table(
        "Ports its pods use",
        "Which of its pods uses which local port (ibfabric_pod_port_info from the daemon's pods "
        "collector, from the kubelet's pod-resources API): by SR-IOV VF, whole HCA, shared RDMA "
        "device or the GPU next to the port (via). Empty where the daemons do not export it "
        "(a daemon without the pods collector). A ServiceMonitor without honorLabels renames "
        "the series' namespace and pod to exported_namespace and exported_pod: both are read.",
        "none",
        target('max by (node, namespace, pod, container, device, port, via) (label_replace('
               'label_replace(ibfabric_pod_port_info{%s}, "namespace", "$1", '
               '"exported_namespace", "(.+)"), "pod", "$1", "exported_pod", "(.+)") * on '
               '(namespace, pod) group_left () max by (namespace, pod) (ibfabric:pod_job{%s}))'
               % (JSEL, THE_JOB), "pod port", instant=True, fmt="table")), 24, 6)

    lay.row("Probes between its nodes: RTT, jitter, loss")
    lay.add(linked(timeseries(
        "p99 RTT between its nodes",
        "99th percentile RTT over each pair's latest probes, for the pairs whose prober and "
        "peer are both its nodes (the peer's node: its port's node GUID, from the paths "
        "collector, and the node label of the daemon on it), top 20.", "s",
        target("topk(20, ibfabric_probe_rtt_window_seconds{%s,stat=\"p99\"} * on (job, "
               "instance, peer, transport) group_left (peer_node) %s)" % (JSEL, JOB_PAIRS),
               JOB_PAIR_LEGEND)), boards=[("ibfabric-probes", "Probes and jitter")]), 8, 8)
    lay.add(linked(timeseries(
        "Jitter between its nodes",
        "RFC 3550 jitter of consecutive RTTs between two of its nodes, top 20.", "s",
        target("topk(20, ibfabric_probe_jitter_seconds{%s} * on (job, instance, peer, "
               "transport) group_left (peer_node) %s)" % (JSEL, JOB_PAIRS), JOB_PAIR_LEGEND)),
        "IbfabricProbeJitterHigh"), 8, 8)
    lay.add(linked(timeseries(
        "Probe loss between its nodes",
        "The share of probes without an answer between two of its nodes over the rate "
        "interval, top 20.", "percentunit",
        target("topk(20, %s)" % loss, JOB_PAIR_LEGEND)), "IbfabricProbeLoss"), 8, 8)
    lay.add(panel("table", "Probe loss matrix of its nodes",
                  "The share of probes lost from each of its nodes (row) to each other (column) "
                  "over the rate interval: a bad host shows as a row or a column, a bad switch "
                  "as a block.", "percentunit",
                  [target("max by (node, peer_node) (%s)" % loss, instant=True, fmt="table")],
                  options={"showHeader": True},
                  transformations=[{"id": "groupingToMatrix", "options": {
                      "columnField": "peer_node", "rowField": "node", "valueField": "Value"}}]),
            24, 8)

    lay.row("Cables on the paths between its nodes")
    sweep_errors = "sum by (node_guid, port) (%s)" % " + ".join(
        "increase(ibfabric_fabric_port_%s_total{%s}[$__range])" % (c, SWEEP) for c in LINK_ERRORS)
    host_errors = "sum by (instance, device, port) (%s)" % " + ".join(
        "increase(ibfabric_ports_%s_total{%s@SIDE@}[$__range])" % (c, JSEL) for c in LINK_ERRORS)

    def both(fabric_metric, ports_metric, what, ref, fn="%s"):
        return [target(cable_end(fn % ("%s{%s}" % (fabric_metric, SWEEP)),
                                 "max by (instance, device, port) (%s)"
                                 % (fn % ("%s{%s@SIDE@}" % (ports_metric, JSEL))), far),
                       "%s at %s end" % (what, "b" if far else "a"), ref=ref[far], instant=True,
                       fmt="table") for far in (False, True)]
    waiting = ('max by (node_guid, port) (ibfabric:port_transmit_wait:rate5m)')
    cables = [target("count by (%s) (%s)" % (CABLE, JOB_HOPS), "legs crossing it",
                     instant=True, fmt="table")]
    cables += both("ibfabric_fabric_port_state", "ibfabric_ports_state", "state", "BC")
    cables += both("ibfabric_fabric_port_link_width_lanes", "ibfabric_ports_link_width_lanes",
                   "width", "DE")
    cables += both("ibfabric_fabric_port_link_speed_lane_bytes_per_second",
                   "ibfabric_ports_link_speed_lane_bytes_per_second", "lane Gb/s", "FG",
                   fn="%s * 8 / 1e9")
    cables += [target(cable_end(sweep_errors, host_errors, far), "errors in range at %s end"
                      % ("b" if far else "a"), ref="HI"[far], instant=True, fmt="table")
               for far in (False, True)]
    cables += [target(on_cables(waiting, "node_guid, port"), "waiting at a end", ref="J",
                      instant=True, fmt="table"),
               target(on_cables('max by (remote_node_guid, remote_port) (label_replace('
                                'label_replace(%s, "remote_node_guid", "$1", "node_guid", '
                                '"(.+)"), "remote_port", "$1", "port", "(.+)"))' % waiting,
                                "remote_node_guid, remote_port"), "waiting at b end", ref="K",
                      instant=True, fmt="table"),
               target(on_cables('max by (node_guid, port, remote_node_guid, remote_port) ('
                                'ibfabric_localize_suspect{kind="cable"})',
                                "node_guid, port, remote_node_guid, remote_port"),
                      "named now: pairs it explains", ref="L", instant=True, fmt="table")]
    lay.add(linked(table(
        "Cables between its nodes",
        "Every cable the probes between two of its nodes cross, either way (ibfabric_path_hop_info "
        "of those pairs; named as the fabric sweep names it: a is the switch end of a host's "
        "cable), with how many of their legs cross it, each end's state (4 ACTIVE), width and "
        "lane speed and link errors over the dashboard's range (from the fabric sweep, else the "
        "host's own daemon), how much each end waits to send (ibfabric:port_transmit_wait:rate5m:"
        " share of time, or ticks per word where the tick is not known), and, if "
        "ibfabric-localize names the cable now, the pairs it explains. Only cables probed pairs "
        "of its nodes cross: MAD probes, or UDP probes to targets the paths collector placed.",
        "none", *cables), "IbfabricSuspectLink", "IbfabricSwitchPortDown",
        "IbfabricSwitchPortErrors", boards=[("ibfabric-fabric-overview", "Fabric overview")]),
        24, 10)
    return dashboard(JOB_UID, "ibfabric / Training job",
                     "One training job, chosen by namespace and job name (ibfabric:job_node: its "
                     "running pods' nodes): its nodes and their ports, RTT, jitter and loss "
                     "between its nodes, the cables on the paths between them, the culprits "
                     "named now that hurt it, and its GPU utilisation (DCGM exporter) beside "
                     "the fabric's evidence.", lay, job_variables(), tags=[JOB_UID])


DASHBOARDS = {
    "ibfabric-oncall.json": oncall,
    "ibfabric-rdma-nics.json": rdma_nics,
    "ibfabric-fabric-overview.json": fabric_overview,
    "ibfabric-node.json": node_detail,
    "ibfabric-probes.json": probes,
    "ibfabric-sriov.json": sriov,
    "ibfabric-daemon.json": daemon,
    "ibfabric-job.json": job,
}


def write(directory):
    for name, build in DASHBOARDS.items():
        with open(os.path.join(directory, name), "w") as f:
            json.dump(build(), f, indent=2, sort_keys=False)
            f.write("\n")


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else HERE)
