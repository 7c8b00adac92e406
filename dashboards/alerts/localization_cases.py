#!/usr/bin/env python3
"""Writes ibfabric.localization.test.yml: promtool unit tests of the localization rules
(IbfabricSuspectLink and the ibfabric:* records behind it) on synthetic series.

The fabric is a small two-level fat tree (3 leaves, 2 spines, 2 hosts per leaf) routed as a
subnet manager's linear forwarding tables route it: by destination, a host's traffic to another
leaf going up through spine (host index mod 2). Every scenario says which hosts probe which, and
which cable directions drop packets (or which peer is paused); this script derives, as the
collectors would export them, the paths (ibfabric_path_hop_info, both legs of every pair) and
the probe counters (a pair whose probe or answer crosses a dropping link loses 30 % of its
probes). What each scenario expects the rules to name is written by hand below, never derived.

  dashboards/alerts/localization_cases.py            # rewrite the test file
  dashboards/alerts/localization_cases.py --check    # exit 1 if the file is not what it writes
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "ibfabric.localization.test.yml")
RUNBOOK = "https://ibfabric.invalid/runbook.md#ibfabricsuspectlink"

LEAVES, SPINES, HOSTS_PER_LEAF = 3, 2, 2
SWITCH, CA = "switch", "CA"


def guid(kind, n):
    return "0x0002c90300%02x%04x" % ({"leaf": 0xa0, "spine": 0xb0, "host": 0xc0}[kind], n)


NODES = {}  # name -> (guid, type)
for i in range(1, LEAVES + 1):
    NODES["leaf-%d" % i] = (guid("leaf", i), SWITCH)
for i in range(1, SPINES + 1):
    NODES["spine-%d" % i] = (guid("spine", i), SWITCH)
HOSTS = ["h%d" % i for i in range(1, LEAVES * HOSTS_PER_LEAF + 1)]
for i, h in enumerate(HOSTS, 1):
    NODES[h] = (guid("host", i), CA)


def leaf_of(host):
    return (HOSTS.index(host)) // HOSTS_PER_LEAF + 1


def host_port(host):  # the leaf port the host is cabled to
    return HOSTS.index(host) % HOSTS_PER_LEAF + 1


def route(src, dst):
    """Hops [(from node, from port, to node, to port)] of a packet from host src to host dst."""
    ls, ld = leaf_of(src), leaf_of(dst)
    hops = [(src, 1, "leaf-%d" % ls, host_port(src))]
    if ls != ld:
        spine = HOSTS.index(dst) % SPINES + 1
        hops.append(("leaf-%d" % ls, HOSTS_PER_LEAF + spine, "spine-%d" % spine, ls))
        hops.append(("spine-%d" % spine, ld, "leaf-%d" % ld, HOSTS_PER_LEAF + spine))
    hops.append(("leaf-%d" % ld, host_port(dst), dst, 1))
    return hops


def cable(hop):
    """As the paths collector names a hop's cable: (a node, a port, b node, b port, direction)."""
    f, fp, t, tp = hop
    f_switch, t_switch = NODES[f][1] == SWITCH, NODES[t][1] == SWITCH
    from_is_a = f_switch if f_switch != t_switch else (NODES[f][0], fp) < (NODES[t][0], tp)
    return (f, fp, t, tp, "a_to_b") if from_is_a else (t, tp, f, fp, "b_to_a")


def hop_series(prober, peer):
    out = []
    for leg, hops in (("to_peer", route(prober, peer)), ("from_peer", route(peer, prober))):
        for n, hop in enumerate(hops, 1):
            a, ap, b, bp, direction = cable(hop)
            out.append(
                'ibfabric_path_hop_info{job="ibfabric",instance="%s:10916",peer="%s",'
                'transport="mad",leg="%s",hop="%d",node_guid="%s",port="%d",node_name="%s",'
                'remote_node_guid="%s",remote_port="%d",remote_node_name="%s",direction="%s"}'
                % (prober, peer, leg, n, NODES[a][0], ap, a, NODES[b][0], bp, b, direction))
    return out


def crosses(prober, peer, link):
    return link in route(prober, peer) or link in route(peer, prober)


def link(frm, frm_port, to, to_port):
    return (frm, frm_port, to, to_port)


def uplink(leaf, spine):  # leaf -> spine
    return link("leaf-%d" % leaf, HOSTS_PER_LEAF + spine, "spine-%d" % spine, leaf)


def downlink(spine, leaf):  # spine -> leaf
    return link("spine-%d" % spine, leaf, "leaf-%d" % leaf, HOSTS_PER_LEAF + spine)


def into_host(host):  # leaf -> host
    return link("leaf-%d" % leaf_of(host), host_port(host), host, 1)


MINUTES = 16  # samples 0..16, one a minute


def counter(per_minute):
    return "0+%gx%d" % (per_minute, MINUTES)


def scenario_series(pairs, dropping=(), paused=(), port_errors=(), lossy_pairs=()):
    series = []
    for prober, peer in pairs:
        series += [(s, "1x%d" % MINUTES) for s in hop_series(prober, peer)]
        labels = 'job="ibfabric",instance="%s:10916",peer="%s",transport="mad"' % (prober, peer)
        lossy = (prober, peer) in lossy_pairs or any(crosses(prober, peer, l) for l in dropping)
        spikes = 3 if peer in paused else 0  # a paused responder: spikes its hold time shows
        series += [
            ("ibfabric_probe_sent_total{%s}" % labels, counter(60)),
            ("ibfabric_probe_lost_total{%s}" % labels, counter(18 if lossy else 0)),
            ("ibfabric_probe_spikes_total{%s}" % labels, counter(spikes)),
            ("ibfabric_probe_host_spikes_total{%s}" % labels, counter(spikes)),
        ]
    # The fabric sweep's counters of switch ports (what the alert quotes of the cable itself).
    swept = {}
    for node, port, name, per_minute in port_errors:
        swept.setdefault((node, port), {})[name] = per_minute
    for (node, port), rates in swept.items():
        for name in ("symbol_errors", "link_error_recoveries", "link_downed", "receive_errors",
                     "transmit_discards", "transmit_wait_ticks"):
            series.append(('ibfabric_fabric_port_%s_total{job="ibfabric",instance="h1:10916",'
                           'node_guid="%s",port="%d"}' % (name, NODES[node][0], port),
                           counter(rates.get(name, 0))))
    return series


def mesh(hosts):
    return [(a, b) for a in hosts for b in hosts if a != b]


def alert(a, ap, b, bp):
    return ('ALERTS{alertname="IbfabricSuspectLink",alertstate="firing",severity="warning",'
            'node_guid="%s",port="%d",node_name="%s",remote_node_guid="%s",remote_port="%d",'
            'remote_node_name="%s"}' % (NODES[a][0], ap, a, NODES[b][0], bp, b))


# Each: (comment, pairs, faults, the cables expected in ALERTS (a end first), extra checks).
SCENARIOS = [
    ("a faulty leaf uplink: packets from spine-1 into leaf-2 are dropped; every pair whose probe "
     "or answer takes it loses probes, the hosts' own cables are crossed by clean pairs too",
     mesh(HOSTS), dict(dropping=[downlink(1, 2)],
                       port_errors=[("leaf-2", 3, "receive_errors", 30),
                                    ("spine-1", 2, "transmit_wait_ticks", 600)]),
     [("leaf-2", 3, "spine-1", 2)]),
    ("the same faulty uplink, and h2 -> h5 loses probes too (a busy prober, say): that pair "
     "crosses none of the uplink's cables; the cables it crosses that the uplink's pairs cross "
     "too are no more suspect for it, so only the uplink is named",
     mesh(HOSTS), dict(dropping=[downlink(1, 2)], lossy_pairs=[("h2", "h5")]),
     [("leaf-2", 3, "spine-1", 2)]),
    ("a faulty host downlink: packets into h3 are dropped; all of h3's pairs lose probes, both "
     "ways, and its cable is the one they all share",
     mesh(HOSTS), dict(dropping=[into_host("h3")]),
     [("leaf-2", 1, "h3", 1)]),
    ("a paused host: h4's responder held the probes; the RTT spikes are all the host's own (its "
     "hold time shows them), so no cable is blamed, not even h4's, which only these pairs cross "
     "towards h4 (h4 probes nobody)",
     [p for p in mesh(HOSTS) if p[0] != "h4"], dict(paused=["h4"]),
     []),
    ("two faults at once: spine-2 -> leaf-3 and the cable into h1",
     mesh(HOSTS), dict(dropping=[downlink(2, 3), into_host("h1")]),
     [("leaf-3", 4, "spine-2", 3), ("leaf-1", 1, "h1", 1)]),
    ("a cable crossed by no pair: leaf-3 -> h6 takes errors, but only h1, h2 and h3 probe each "
     "other; nothing points at any cable (IbfabricSwitchPortErrors names that one)",
     mesh(["h1", "h2", "h3"]), dict(dropping=[into_host("h6")],
                                    port_errors=[("leaf-3", 2, "receive_errors", 100)]),
     []),
    ("loss no cable explains: h1 loses probes to h3, but h3's probes to h1 cross the same "
     "cables (the other way) cleanly; no cable that clean pairs cross as often is named",
     mesh(HOSTS), dict(lossy_pairs=[("h1", "h3")]),
     []),
    ("one pair only (h1 probes h3 and nothing else): every cable of its path carries exactly "
     "that pair, so all four are named, as one suspect set",
     [("h1", "h3")], dict(dropping=[into_host("h3")]),
     [("leaf-1", 1, "h1", 1), ("leaf-1", 3, "spine-1", 1), ("leaf-2", 3, "spine-1", 2),
      ("leaf-2", 1, "h3", 1)]),
]

# The cables of h1 <-> h3, sorted by name and port as the alert lists them.
PATH_H1_H3 = ["leaf-1 port 1 <-> h1 port 1", "leaf-1 port 3 <-> spine-1 port 1",
              "leaf-2 port 1 <-> h3 port 1", "leaf-2 port 3 <-> spine-1 port 2"]
SUMMARY = "Probe loss or RTT spikes between hosts point at one cable."
# The whole alert, as the engineer reads it, for two scenarios (checked by hand against them).
DESCRIPTIONS = {
    # a faulty leaf uplink: 8 pairs take spine-1 -> leaf-2 (h3's, with the hosts of leaves 1
    # and 3; the other way round their traffic goes up through other links); the fabric sweep
    # counted 30 receive errors a minute at leaf-2 port 3 and XmitWait at spine-1 port 2.
    0: ["Cable leaf-2 port 3 <-> spine-1 port 2 best explains 8 probe pair(s) that lost probes "
        "or had RTT spikes in 10 minutes (packets spine-1 -> leaf-2: 8 faulty, 0 clean pairs "
        "cross them). Pairs (prober -> peer): h1:10916 -> h3, h2:10916 -> h3, h3:10916 -> h1, "
        "h3:10916 -> h2, h3:10916 -> h5, h3:10916 -> h6, and more. Equally suspect (probes "
        "cannot tell them apart): none. Its own counters in 10 minutes (fabric sweep, those not "
        "zero): spine-1 port 2: 10 XmitWait ticks/s; leaf-2 port 3: 300 errors."],
    # one pair only: each of the four cables names the other three.
    7: [("Cable %s best explains 1 probe pair(s) that lost probes or had RTT spikes in 10 "
         "minutes (packets %s: 1 faulty, 0 clean pairs cross them; packets %s: 1 faulty, 0 clean "
         "pairs cross them). Pairs (prober -> peer): h1:10916 -> h3. Equally suspect (probes "
         "cannot tell them apart): %s. Its own counters in 10 minutes (fabric sweep, those not "
         "zero): none.") % (cable_name, first, second, ", ".join(c for c in PATH_H1_H3 if c != cable_name))
        for cable_name, first, second in (
            ("leaf-1 port 1 <-> h1 port 1", "leaf-1 -> h1", "h1 -> leaf-1"),
            ("leaf-1 port 3 <-> spine-1 port 1", "leaf-1 -> spine-1", "spine-1 -> leaf-1"),
            ("leaf-2 port 3 <-> spine-1 port 2", "leaf-2 -> spine-1", "spine-1 -> leaf-2"),
            ("leaf-2 port 1 <-> h3 port 1", "leaf-2 -> h3", "h3 -> leaf-2"))],
}


def yaml_quote(s):
    return "'" + s.replace("'", "''") + "'"


def render():
    lines = [
        "# Generated by localization_cases.py (edit that, then run it): promtool unit tests of the",
        "# localization rules (IbfabricSuspectLink) on a synthetic 3-leaf, 2-spine fat tree.",
        "# Run: promtool test rules dashboards/alerts/ibfabric.localization.test.yml",
        "rule_files:",
        "  - ibfabric.rules.yml",
        "evaluation_interval: 1m",
        "tests:",
    ]
    for index, (comment, pairs, faults, expected) in enumerate(SCENARIOS):
        lines.append("  # " + comment)
        lines.append("  - interval: 1m")
        lines.append("    input_series:")
        for s, values in scenario_series(pairs, **faults):
            lines.append("      - series: " + yaml_quote(s))
            lines.append("        values: '%s'" % values)
        lines.append("    promql_expr_test:")
        lines.append("      - expr: ALERTS{alertname=\"IbfabricSuspectLink\",alertstate=\"firing\"}")
        lines.append("        eval_time: 14m")
        lines.append("        exp_samples:" + ("" if expected else " []"))
        for a, ap, b, bp in expected:
            lines.append("          - labels: " + yaml_quote(alert(a, ap, b, bp)))
            lines.append("            value: 1")
        if index in DESCRIPTIONS:
            lines.append("    alert_rule_test:")
            lines.append("      - eval_time: 14m")
            lines.append("        alertname: IbfabricSuspectLink")
            lines.append("        exp_alerts:")
            for (a, ap, b, bp), description in zip(expected, DESCRIPTIONS[index]):
                lines.append("          - exp_labels:")
                for key, value in (("severity", "warning"), ("node_guid", NODES[a][0]),
                                   ("port", ap), ("node_name", a),
                                   ("remote_node_guid", NODES[b][0]), ("remote_port", bp),
                                   ("remote_node_name", b)):
                    lines.append("              %s: '%s'" % (key, value))
                lines.append("            exp_annotations:")
                lines.append("              summary: " + yaml_quote(SUMMARY))
                lines.append("              description: " + yaml_quote(description))
                lines.append("              runbook_url: " + RUNBOOK)
        if not expected:
            # The quiet case of the alert, for tests/e2e/test_alert_rules.py.
            lines.append("    alert_rule_test:")
            lines.append("      - eval_time: 14m")
            lines.append("        alertname: IbfabricSuspectLink")
            lines.append("        exp_alerts: []")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = render()
    if args.check:
        with open(OUT) as f:
            if f.read() != text:
                print("%s is not what %s writes: run it" % (OUT, sys.argv[0]), file=sys.stderr)
                return 1
        return 0
    with open(OUT, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
