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
RUNBOOK = "https://ibfabric.invalid/runbook.md#"

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
                'ibfabric_path_hop_info{job="ibfabric",instance="%s:10916",peer="%s mlx5_0",'
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


STEP = 10  # seconds between samples (a scrape)
SAMPLES = 13  # 0..130 s
FAULT_AT = 6  # the fault starts after sample 6 (60 s)
EVAL_BEFORE, EVAL_NAMED = "50s", "2m"  # before the fault; a minute after it started
PROBES = 100  # per pair and sample: 10 probes a second


def counter(during, before=0, lead=0):
    """A counter's values in promtool's notation: `before` a sample until the fault, `during`
    a sample from then on; `lead` samples more before the fault."""
    samples, fault_at = SAMPLES + lead, FAULT_AT + lead
    if before == during:
        return "0+%gx%d" % (during, samples)
    start = before * fault_at
    return "0+%gx%d %g+%gx%d" % (before, fault_at, start + during, during,
                                   samples - fault_at - 1)


def eval_times(lead):
    """Before the fault, and a minute after it started."""
    if not lead:
        return EVAL_BEFORE, EVAL_NAMED
    return "%ds" % ((FAULT_AT + lead - 1) * STEP), "%ds" % ((FAULT_AT + lead) * STEP + 60)


# Congestion: every switch counts PortXmitWait in ticks of 8 bytes' time (a Quantum-2's) and
# every port runs at 400 Gb/s (50e9 bytes a second), so a tick is 0.16 ns.
TICK_BYTES, RATE = 8, 50e9


def pair_labels(prober, peer):
    return 'job="ibfabric",instance="%s:10916",peer="%s mlx5_0",transport="mad"' % (prober, peer)


def scenario_series(pairs, dropping=(), stalled=(), long_stalled=(), dropping_responder=(),
                    lossy_pairs=(), late_pairs=(), port_errors=(), everyone_late=False,
                    lucky_pairs=(), congested=(), spikes=2, tick_unknown=(), lead=0):
    """Series as the collectors would export them. dropping: {link: loss rate} of packets
    crossing a cable direction; stalled: hosts whose daemon pauses (their probes' answers come
    late); long_stalled: pauses longer than the probe timeout (late and lost); dropping_responder:
    {host: rate} of probes its responder leaves unanswered; lossy_pairs / late_pairs: {pair: per
    sample}; lucky_pairs: {pair: lost per sample} for a pair that loses less than its faults say
    (by chance); port_errors: [(node, port, counter, per sample)] where the port's reader counts
    them; congested: {link: share of time its sending switch port waits, from the start} (a
    probe crossing one is late `spikes` times in 100 from the fault on); tick_unknown: switches whose
    tick is not known (their ports wait 2 ticks per word sent instead); lead: samples more
    before the fault (a 5-minute rate needs 5 minutes of samples)."""
    dropping, dropping_responder, lucky_pairs = dict(dropping), dict(dropping_responder), dict(lucky_pairs)
    lossy_pairs, late_pairs, congested = dict(lossy_pairs), dict(late_pairs), dict(congested)
    series = []
    always = "1x%d" % (SAMPLES + lead)

    def ctr(during, before=0):
        return counter(during, before, lead)

    hosts = sorted({h for pair in pairs for h in pair}, key=HOSTS.index)
    for prober, peer in pairs:
        series += [(s, always) for s in hop_series(prober, peer)]
        series.append(('ibfabric_path_peer_info{job="ibfabric",instance="%s:10916",peer="%s mlx5_0",'
                       'transport="mad",peer_node_guid="%s",peer_node_name="%s"}'
                       % (prober, peer, NODES[peer][0], peer), always))
        labels = pair_labels(prober, peer)
        crossed = route(prober, peer) + route(peer, prober)
        kept = 1.0
        for link_, rate in dropping.items():
            if link_ in crossed:
                kept *= 1 - rate
        kept *= 1 - dropping_responder.get(peer, 0)
        lost = round(PROBES * (1 - kept)) + lossy_pairs.get((prober, peer), 0)
        lost = lucky_pairs.get((prober, peer), lost)
        late = late_pairs.get((prober, peer), 0)
        if peer in stalled or peer in long_stalled:
            late += 3  # the probes sent while it was stopped, answered when it goes on
        if prober in stalled or prober in long_stalled:
            late += 1  # the one in flight when it stopped
        if peer in long_stalled:
            lost += 5
        if everyone_late:
            late += 1
        if any(link_ in crossed for link_ in congested):
            late += spikes
        series += [
            ("ibfabric_probe_sent_total{%s}" % labels, ctr(PROBES, PROBES)),
            ("ibfabric_probe_lost_total{%s}" % labels,
             ctr(lost)),
            ("ibfabric_probe_spikes_total{%s}" % labels,
             ctr(late)),
        ]
    # Every daemon: its node, its event loop, its responder, its own port (`ports`).
    counted = {}
    for node, port, name, per_sample in port_errors:
        counted.setdefault((node, port), {})[name] = per_sample
    for h in hosts:
        instance = 'job="ibfabric",instance="%s:10916"' % h
        series.append(('ibfabric_probe_node_info{%s,node_guid="%s",node_name="%s"}'
                       % (instance, NODES[h][0], h), always))
        stall = 2.0 if h in long_stalled else 1.2 if h in stalled else 0
        series.append(("ibfabric_event_loop_stall_seconds_total{%s}" % instance,
                       ctr(stall)))
        dropped = round(PROBES * dropping_responder.get(h, 0)) * sum(1 for p in pairs if p[1] == h)
        series.append(('ibfabric_probe_responder_dropped_total{%s,transport="mad"}' % instance,
                       ctr(dropped)))
        leaf, leaf_port = "leaf-%d" % leaf_of(h), host_port(h)
        series.append(('ibfabric_ports_peer_info{%s,device="mlx5_0",port="1",node_guid="%s",'
                       'node_name="%s",peer_node_guid="%s",peer_port="%d",peer_node_type="switch",'
                       'peer_node_name="%s"}' % (instance, NODES[h][0], h, NODES[leaf][0],
                                                 leaf_port, leaf), always))
        for side, key in (("local", (h, 1)), ("peer", (leaf, leaf_port))):
            rates = counted.get(key, {})
            for name in ("symbol_errors", "link_error_recoveries", "link_downed",
                         "receive_errors", "transmit_discards", "transmit_wait_ticks"):
                per_sample = rates.get(name, 0)
                series.append(('ibfabric_ports_%s_total{%s,device="mlx5_0",port="1",side="%s"}'
                               % (name, instance, side),
                               ctr(per_sample)))
    # The fabric sweep (run by h1) of the switch ports that count something.
    for (node, port), rates in counted.items():
        if NODES[node][1] != SWITCH:
            continue
        for name in ("symbol_errors", "link_error_recoveries", "link_downed", "receive_errors",
                     "transmit_discards", "transmit_wait_ticks"):
            per_sample = rates.get(name, 0)
            series.append(('ibfabric_fabric_port_%s_total{job="ibfabric",instance="h1:10916",'
                           'node_guid="%s",port="%d"}' % (name, NODES[node][0], port),
                           ctr(per_sample)))
    if congested:
        series += congestion_series(congested, tick_unknown, SAMPLES + lead)
    return series


def congestion_series(congested, tick_unknown, samples):
    """The fabric sweep's view (by h1) of every switch port's cable, and of the waiting ports:
    their tick, rate and counters, which go on 10 minutes past the probes' samples (the port
    still waits when its spikes are over)."""
    sweep = 'job="ibfabric",instance="h1:10916"'
    always = "1x%d" % samples
    series = []
    cables = {hop for prober, peer in mesh(HOSTS) for hop in route(prober, peer)}
    for f, fp, t, tp in sorted(cables):
        if NODES[f][1] != SWITCH:
            continue
        series.append(('ibfabric_fabric_link_info{%s,cable_end="a",node_guid="%s",port="%d",'
                       'node_name="%s",remote_node_guid="%s",remote_port="%d",'
                       'remote_node_type="%s",remote_node_name="%s"}'
                       % (sweep, NODES[f][0], fp, f, NODES[t][0], tp, NODES[t][1], t), always))
    for name, (node_guid, kind) in NODES.items():
        if kind == SWITCH and name not in tick_unknown:
            series.append(('ibfabric_fabric_node_transmit_wait_tick_bytes{%s,node_guid="%s",'
                           'per="port"}' % (sweep, node_guid), "%dx%d" % (TICK_BYTES, samples)))
    for (f, fp, t, tp), share in congested.items():
        port = '%s,node_guid="%s",port="%d"' % (sweep, NODES[f][0], fp)
        sent = RATE * STEP / 10  # bytes a sample: a tenth of the rate
        ticks = 2 * sent / 4 if f in tick_unknown else share * STEP * RATE / TICK_BYTES
        longer = samples + 60
        series += [
            ("ibfabric_fabric_port_effective_rate_bytes_per_second{%s}" % port,
             "%gx%d" % (RATE, longer)),
            ("ibfabric_fabric_port_transmit_wait_ticks_total{%s}" % port,
             "0+%gx%d" % (ticks, longer)),
            ("ibfabric_fabric_port_transmit_bytes_total{%s}" % port, "0+%gx%d" % (sent, longer)),
        ]
    return series


def mesh(hosts):
    return [(a, b) for a in hosts for b in hosts if a != b]


def link_alert(a, ap, b, bp):
    return ('ALERTS{alertname="IbfabricSuspectLink",alertstate="firing",severity="warning",'
            'node_guid="%s",port="%d",node_name="%s",remote_node_guid="%s",remote_port="%d",'
            'remote_node_name="%s"}' % (NODES[a][0], ap, a, NODES[b][0], bp, b))


def congestion_alert(a, ap, b, bp):
    return ('ALERTS{alertname="IbfabricSuspectCongestion",alertstate="firing",severity="warning",'
            'node_guid="%s",port="%d",node_name="%s",remote_node_guid="%s",remote_port="%d",'
            'remote_node_name="%s"}' % (NODES[a][0], ap, a, NODES[b][0], bp, b))


def host_alert(h):
    return ('ALERTS{alertname="IbfabricSuspectHost",alertstate="firing",severity="warning",'
            'node_guid="%s",node_name="%s"}' % (NODES[h][0], h))


def named_cable(a, ap, b, bp):
    return ("link", a, ap, b, bp)


def host(h):
    return ("host", h)


def congestion(link_):
    """A congested port: the sending end of `link_` (from, from port, to, to port)."""
    return ("congestion",) + tuple(link_)


def into_host_errors(h, per_sample=30):
    """ibsim counts a packet dropped at a port in that port's PortRcvErrors: here the host's own
    port, read by its own daemon."""
    return [(h, 1, "receive_errors", per_sample)]


SPARSE_DEMO = mesh(["h1", "h3", "h5"]) + [("h2", "h1"), ("h2", "h3"), ("h2", "h5")]

# Each: (comment, pairs, faults, what the alerts must name a minute after the fault started).
SCENARIOS = [
    ("a faulty leaf uplink: packets from spine-1 into leaf-2 are dropped (30 %); every pair whose "
     "probe or answer takes it loses probes; h3's other pairs (with h4) are clean, so h3 is not "
     "to blame; the sweep counts the receive errors at leaf-2 port 3",
     mesh(HOSTS), dict(dropping={downlink(1, 2): 0.3},
                       port_errors=[("leaf-2", 3, "receive_errors", 30),
                                    ("spine-1", 2, "transmit_wait_ticks", 100)]),
     [named_cable("leaf-2", 3, "spine-1", 2)]),
    ("the same faulty uplink, and h2 -> h5 loses probes too (a busy prober, say): nothing else "
     "explains that pair without clean pairs against it, so only the uplink is named",
     mesh(HOSTS), dict(dropping={downlink(1, 2): 0.3}, lossy_pairs={("h2", "h5"): 30}),
     [named_cable("leaf-2", 3, "spine-1", 2)]),
    ("a faulty host cable: packets into h3 are dropped (30 %); all of h3's pairs lose probes, both "
     "ways; h3 and its cable carry the same pairs, and h3's own port counts the receive errors: "
     "the cable is named, not the host",
     mesh(HOSTS), dict(dropping={into_host("h3"): 0.3}, port_errors=into_host_errors("h3")),
     [named_cable("leaf-2", 1, "h3", 1)]),
    ("the same without counters (no ports collector on h3, say): probes cannot tell h3 from its "
     "cable, so both are named, each saying so",
     mesh(HOSTS), dict(dropping={into_host("h3"): 0.3}),
     [named_cable("leaf-2", 1, "h3", 1), host("h3")]),
    ("a small loss: 2 % of the packets into h5 dropped, named within the minute",
     mesh(HOSTS), dict(dropping={into_host("h5"): 0.02}, port_errors=into_host_errors("h5", 2)),
     [named_cable("leaf-3", 1, "h5", 1)]),
    ("2 % of the packets from spine-2 into leaf-3 dropped",
     mesh(HOSTS), dict(dropping={downlink(2, 3): 0.02},
                       port_errors=[("leaf-3", 4, "receive_errors", 2)]),
     [named_cable("leaf-3", 4, "spine-2", 3)]),
    ("a stalled host: h4's daemon is stopped for 0.4 s three times every 10 s; the probes to it "
     "are answered late (its hold time cannot show a stop), its event loop counts the stalls: h4 "
     "is named, no cable",
     mesh(HOSTS), dict(stalled=["h4"]),
     [host("h4")]),
    ("a stalled host under sparse probing (the demo's: three hosts probe each other, a fourth "
     "probes them and answers nobody): h3 is named, not the spine cables its few pairs cross",
     SPARSE_DEMO, dict(stalled=["h3"]),
     [host("h3")]),
    ("a host stalled longer than the probe timeout: probes to it are lost as well as late; its "
     "cable carries the same pairs, but the host's own stalls name it, and the cable has no "
     "errors",
     mesh(HOSTS), dict(long_stalled=["h4"]),
     [host("h4")]),
    ("3 % into h3's port, while the loss builds up: so far only the probes to h3 lost it (none "
     "of the answers to h3's own probes yet), so the probes point at h3 as responder; but h3's "
     "port counts the receive errors and h3 shows no trouble of its own, so h3 is not named (its "
     "cable will be, once its pairs all lose)",
     mesh(HOSTS), dict(lossy_pairs={(p, "h3"): 3 for p in HOSTS if p != "h3"},
                       port_errors=into_host_errors("h3", 3)),
     []),
    ("a responder that leaves probes unanswered (over its rate cap): only the probes to h2 are "
     "lost, h2's own probes are fine: h2 is named (as responder), not its cable",
     mesh(HOSTS), dict(dropping_responder={"h2": 0.2}),
     [host("h2")]),
    ("two faults at once: spine-2 -> leaf-3 and the cable into h1, both counted",
     mesh(HOSTS), dict(dropping={downlink(2, 3): 0.3, into_host("h1"): 0.3},
                       port_errors=[("leaf-3", 4, "receive_errors", 30)] + into_host_errors("h1")),
     [named_cable("leaf-3", 4, "spine-2", 3), named_cable("leaf-1", 1, "h1", 1)]),
    ("a big and a small fault at once: spine-1 -> leaf-2 drops 30 %, the cable into h1 3 %; some "
     "of h1's pairs cross both, and the uplinks they cross carry the big fault's pairs too: each "
     "of h1's pairs is explained by what drops at its own rate, so both cables are named",
     mesh(HOSTS), dict(dropping={downlink(1, 2): 0.3, into_host("h1"): 0.03},
                       port_errors=[("leaf-2", 3, "receive_errors", 30)] +
                       into_host_errors("h1", 3)),
     [named_cable("leaf-2", 3, "spine-1", 2), named_cable("leaf-1", 1, "h1", 1)]),
    ("30 % from leaf-3 up into spine-2 and 3 % into h3: h2's pairs cross both (4 the uplink, 2 "
     "h3's), so most of h2's loss is the uplink's and its own rate is h3's; the lost probes that "
     "count for a candidate are those of the pairs it could explain, so h3's cable is named, "
     "not h2",
     mesh(HOSTS), dict(dropping={uplink(3, 2): 0.3, into_host("h3"): 0.03},
                       port_errors=[("spine-2", 3, "receive_errors", 30)] +
                       into_host_errors("h3", 3)),
     [named_cable("leaf-3", 4, "spine-2", 3), named_cable("leaf-2", 1, "h3", 1)]),
    ("30 % from leaf-1 up into spine-1 and 3 % into h5, and h5's probes to h6 lose a third of "
     "what the fault says (chance: 6 in the minute where 18 were due): not so few that they "
     "contradict h5's cable (a tenth of what is due), which is named with the uplink",
     mesh(HOSTS), dict(dropping={uplink(1, 1): 0.3, into_host("h5"): 0.03},
                       lucky_pairs={("h5", "h6"): 1},
                       port_errors=[("spine-1", 1, "receive_errors", 30)] +
                       into_host_errors("h5", 3)),
     [named_cable("leaf-1", 3, "spine-1", 1), named_cable("leaf-3", 1, "h5", 1)]),
    ("a faulty cable and a stalled host at once: spine-1 -> leaf-2 drops 30 %, h6 stalls",
     mesh(HOSTS), dict(dropping={downlink(1, 2): 0.3}, stalled=["h6"],
                       port_errors=[("leaf-2", 3, "receive_errors", 30)]),
     [named_cable("leaf-2", 3, "spine-1", 2), host("h6")]),
    ("a cable crossed by no pair: leaf-3 -> h6 drops, but only h1, h2 and h3 probe each other; "
     "nothing points at any cable (IbfabricSwitchPortErrors names that one)",
     mesh(["h1", "h2", "h3"]), dict(dropping={into_host("h6"): 0.3},
                                    port_errors=[("leaf-3", 2, "receive_errors", 30)]),
     []),
    ("loss no candidate explains: h1 loses probes to h3, but h3's probes to h1 cross the same "
     "cables (the other way) cleanly, and both hosts' other pairs are clean: nothing is named",
     mesh(HOSTS), dict(lossy_pairs={("h1", "h3"): 30}),
     []),
    ("one pair only (h1 probes h3, nothing else), packets into h3 dropped, no counters: every "
     "cable of its path and both hosts carry exactly that pair, so all are named, as one set",
     [("h1", "h3")], dict(dropping={into_host("h3"): 0.3}),
     [named_cable("leaf-1", 1, "h1", 1), named_cable("leaf-1", 3, "spine-1", 1),
      named_cable("leaf-2", 3, "spine-1", 2), named_cable("leaf-2", 1, "h3", 1), host("h1"), host("h3")]),
    ("the same with h3's port counting the errors: that evidence names its cable alone",
     [("h1", "h3")], dict(dropping={into_host("h3"): 0.3}, port_errors=into_host_errors("h3")),
     [named_cable("leaf-2", 1, "h3", 1)]),
    ("a clean fabric with scattered spikes (a busy machine): two pairs late once a minute, "
     "nothing named",
     mesh(HOSTS), dict(late_pairs={("h1", "h2"): 1, ("h5", "h3"): 1}),
     []),
    ("a busy host: three of h2's ten pairs each see a late probe every 10 s (18 in the minute), "
     "the other seven none: most of its pairs are not late, so it is not named",
     mesh(HOSTS), dict(late_pairs={("h1", "h2"): 1, ("h2", "h5"): 1, ("h4", "h2"): 1}),
     []),
    ("a busier host: all of h2's pairs see a late probe now and then (every 20 s), the rest of "
     "the fabric none: late 0.5 % of the time, under the 1 % that names a host",
     mesh(HOSTS), dict(late_pairs={p: 0.5 for p in mesh(HOSTS) if "h2" in p}),
     []),
    ("every pair late at once (the whole machine, or the simulator, stalled): no one host is "
     "late more than the rest, nothing named",
     mesh(HOSTS), dict(everyone_late=True),
     []),
    # Congestion: the port waits from the start (its 5-minute rate formed), the spikes start at
    # the fault.
    ("congestion at a spine port: spine-1 port 2 (into leaf-2) waits 41 % of the time; the 8 "
     "pairs whose probes or answers cross it see 2 in 100 probes late: the port is named, not h3 "
     "(all of whose late pairs it explains) and no cable (nothing lost)",
     mesh(HOSTS), dict(congested={downlink(1, 2): 0.41}, lead=30),
     [congestion(downlink(1, 2))]),
    ("incast into h3: leaf-2 port 1 (to h3) waits 60 % of the time; every pair of h3 is late, "
     "which alone would name h3 as a late host: the port is named instead",
     mesh(HOSTS), dict(congested={into_host("h3"): 0.6}, lead=30),
     [congestion(into_host("h3"))]),
    ("the same spine port on a switch whose tick is not known: it waits 2 ticks per word sent, "
     "named all the same (in ticks per word)",
     mesh(HOSTS), dict(congested={downlink(1, 2): 0.41}, tick_unknown=["spine-1"], lead=30),
     [congestion(downlink(1, 2))]),
    ("a congested spine port whose pairs are not late (the probes go through between bursts): "
     "nothing named here (IbfabricCongestionHotSpot names the port)",
     mesh(HOSTS), dict(congested={downlink(1, 2): 0.41}, spikes=0, lead=30),
     []),
    ("the pairs crossing spine-1 port 2 spike but it waits only 5 % of the time: not congestion; "
     "every late pair is h3's, so h3 is named as a late host",
     mesh(HOSTS), dict(congested={downlink(1, 2): 0.05}, lead=30),
     [host("h3")]),
    ("congestion and a faulty cable at once: spine-1 port 2 waits 41 %, and 30 % of the packets "
     "into h5 are dropped (its port counts them): the port for the spikes, the cable for the "
     "loss",
     mesh(HOSTS), dict(congested={downlink(1, 2): 0.41}, dropping={into_host("h5"): 0.3},
                       port_errors=into_host_errors("h5"), lead=30),
     [congestion(downlink(1, 2)), named_cable("leaf-3", 1, "h5", 1)]),
    ("congestion and a stalled host at once: spine-1 port 2 waits 41 %, h6's daemon stalls: the "
     "port and h6",
     mesh(HOSTS), dict(congested={downlink(1, 2): 0.41}, stalled=["h6"], lead=30),
     [congestion(downlink(1, 2)), host("h6")]),
    ("incast into h3 while h3 itself stalls: both the port and h3 (its own stalls)",
     mesh(HOSTS), dict(congested={into_host("h3"): 0.6}, stalled=["h3"], lead=30),
     [congestion(into_host("h3")), host("h3")]),
    # Seen in bench/localization.py (seed 28, 4/sparse): a host named beside the cable.
    ("sparse probing, 2 % of the packets from leaf-2 up into spine-1 dropped: three pairs cross "
     "it (h1 -> h3's answers, h3 -> h5 and h4 -> h1), and h4 -> h1 happens to lose twice the "
     "others' share; h1 answers no other prober, so as a responder it fits that pair's rate "
     "better than the cable: the cable carries the other two pairs' loss as well, so it is "
     "named, for all three, and not h1",
     [("h1", "h3"), ("h3", "h5"), ("h4", "h1"), ("h1", "h2"), ("h1", "h6"), ("h5", "h6"),
      ("h6", "h2"), ("h2", "h4")],
     dict(dropping={uplink(2, 1): 0.02}, lossy_pairs={("h4", "h1"): 2}),
     [named_cable("leaf-2", 3, "spine-1", 2)]),
    ("sparse probing, two faults one pair crosses: 5 % into h6 (its port counts them) and 5 % "
     "from leaf-3 up into spine-1 (counted there); h1 -> h6 crosses both and loses 10 %, a rate "
     "that fits the cables only it crosses better than either fault: those are each explained "
     "by a fault that carries them and more, so only the two faults are named",
     [("h1", "h6"), ("h4", "h6"), ("h6", "h4"), ("h5", "h3"), ("h3", "h5"), ("h2", "h1"),
      ("h3", "h4")],
     dict(dropping={into_host("h6"): 0.05, uplink(3, 1): 0.05},
          port_errors=into_host_errors("h6", 5) + [("spine-1", 3, "receive_errors", 5)]),
     [named_cable("leaf-3", 2, "h6", 1), named_cable("leaf-3", 3, "spine-1", 3)]),
]

# When the samples end, a minute later the evidence is gone, and the alerts remember it for
# 10 minutes: {scenario: (when remembered, when forgotten, the description then)}.
# The first scenario's samples end at 130 s; its counters then read 218 errors in 10 minutes
# (the 180 counted, as increase() extrapolates them to the edges of its window).
MEMORY = {0: ("3m30s", "12m",
    "Cable leaf-2 port 3 <-> spine-1 port 2 explains the probe loss of 8 probe pair(s) (the most "
    "in a minute, over the last 10 minutes). No probe lost to it in the last minute: the fault "
    "may have stopped (the alert stays 10 minutes after its last evidence). Counters in 10 "
    "minutes: leaf-2 port 3 (fabric sweep): 218 errors, 0 discards; spine-1 "
    "port 2 (fabric sweep): 0 errors, 0 discards. Hosts whose probed paths "
    "cross it: h1, h2, h3, h4, h5, h6."),
    # The first congestion scenario's probes' samples end at 430 s; its port still waits.
    24: ("8m30s", "18m30s",
         "Probes crossing spine-1 port 2 (to leaf-2 port 3) spiked; it waited to send 41% of "
         "the time over the last 5 minutes. No late probe crossing it in the last minute: the "
         "congestion may have eased (the alert stays 10 minutes after its last evidence). "
         "Congestion, not a fault of a cable or a host: it explains the spikes of 8 probe pair(s) "
         "(the most in a minute, over the last 10 minutes). A spine port: traffic is unevenly "
         "spread over the spines, or oversubscribed here. A root: the congestion starts here. "
         "Also named for the same pairs: none."),
}
SUMMARIES = {"IbfabricSuspectLink": "Probe loss between hosts points at one cable.",
             "IbfabricSuspectHost": "Probes between hosts point at one host, not the network.",
             "IbfabricSuspectCongestion": "Probe RTT spikes between hosts point at a congested "
                                          "port, not a cable or a host."}
# The whole alert, as the engineer reads it, for some scenarios (checked by hand).
DESCRIPTIONS = {
    # A faulty leaf uplink: 8 pairs take spine-1 -> leaf-2 (h3's, with the hosts of leaves 1
    # and 3), each losing 30 of 100 probes every 10 s: over the minute, 8 x 180 = 1,440 of
    # 4,800. The sweep counted 30 receive errors a sample at leaf-2 port 3 since the fault began
    # a minute ago (6 samples: 180); spine-1 port 2 counts XmitWait ticks but its tick and its
    # data are not read, so no waiting is quoted. Every host's pairs cross the cable one way or the other
    # (h4's answers to leaf 1 go up through it), so all six are its blast radius.
    0: [("IbfabricSuspectLink", named_cable("leaf-2", 3, "spine-1", 2),
         "Cable leaf-2 port 3 <-> spine-1 port 2 explains the probe loss of 8 probe pair(s) (the "
         "most in a minute, over the last 10 minutes). In the last minute packets spine-1 -> "
         "leaf-2: 1440 of 4800 probes lost (30%). Pairs (prober -> peer): h1 -> h3, h2 -> h3, h3 "
         "-> h1, h3 -> h2, h3 -> h5, h3 -> h6, and more. Equally suspect (probes cannot tell them "
         "apart): none. Counters in 10 minutes: leaf-2 port 3 (fabric sweep): 180 errors, 0 "
         "discards; spine-1 port 2 (fabric sweep): 0 errors, 0 discards. Hosts whose probed paths cross it: h1, h2, h3, h4, h5, h6.")],
    # The host cable without counters: the cable and h3 name each other.
    3: [("IbfabricSuspectLink", named_cable("leaf-2", 1, "h3", 1),
         "Cable leaf-2 port 1 <-> h3 port 1 explains the probe loss of 10 probe pair(s) (the most "
         "in a minute, over the last 10 minutes). In the last minute packets leaf-2 -> h3: 1800 "
         "of 6000 probes lost (30%); packets h3 -> leaf-2: 1800 of 6000 probes lost (30%). Pairs "
         "(prober -> peer): h1 -> h3, h2 -> h3, h3 -> h1, h3 -> h2, h3 -> h4, h3 -> h5, and more. "
         "Equally suspect (probes cannot tell them apart): host h3. Counters in 10 minutes: "
         "leaf-2 port 1 (the daemon at its far end): 0 errors, 0 discards; h3 "
         "port 1 (its own daemon): 0 errors, 0 discards. Hosts whose probed "
         "paths cross it: h1, h2, h3, h4, h5, h6."),
        ("IbfabricSuspectHost", host("h3"),
         "Host h3 explains the late or lost probes of 10 probe pair(s) (the most in a minute, "
         "over the last 10 minutes), where other pairs crossing the same cables were clean. In "
         "the last minute (blamed as a whole): answers to it: 0 late, 900 lost of 3000 (5 pairs); "
         "its own probes: 0 late, 900 lost of 3000 (5 pairs). Its daemon: event loop stalled 0s "
         "in the minute. Equally suspect (probes cannot tell them apart): leaf-2 port 1 <-> h3 "
         "port 1. Its own port counters in 10 minutes: port 1 (its own daemon): 0 errors, 0 "
         "discards.")],
    # Congestion at a spine port: 8 pairs cross it, each with 600 probes in the minute of which
    # 12 late (2 every 10 s): 96 of 4,800. Its switch's tick is 8 bytes at 50e9 bytes a second.
    24: [("IbfabricSuspectCongestion", congestion(downlink(1, 2)),
          "Pairs (prober -> peer) h1 -> h3, h2 -> h3, h3 -> h1, h3 -> h2, h3 -> h5, h3 -> h6, and "
          "more spike while crossing spine-1 port 2 (to leaf-2 port 3), which waited to send 41% "
          "of the time over the last 5 minutes: 96 of 4800 probes crossing it were late in the "
          "last minute. Congestion, not a fault of a cable or a host: it explains the spikes of 8 "
          "probe pair(s) (the most in a minute, over the last 10 minutes). A spine port: traffic "
          "is unevenly spread over the spines, or oversubscribed here. A root: the congestion "
          "starts here. Also named for the same pairs: none.")],
    # Incast: all 10 of h3's pairs cross the port into it: 120 of 6,000 late.
    25: [("IbfabricSuspectCongestion", congestion(into_host("h3")),
          "Pairs (prober -> peer) h1 -> h3, h2 -> h3, h3 -> h1, h3 -> h2, h3 -> h4, h3 -> h5, and "
          "more spike while crossing leaf-2 port 1 (to h3 port 1), which waited to send 60% of "
          "the time over the last 5 minutes: 120 of 6000 probes crossing it were late in the last "
          "minute. Congestion, not a fault of a cable or a host: it explains the spikes of 10 "
          "probe pair(s) (the most in a minute, over the last 10 minutes). A port to a host: "
          "incast into h3, or a slow receiver. A root: the congestion starts here. Also named for "
          "the same pairs: none.")],
    # The tick not known: 2 ticks per 4-octet word sent.
    26: [("IbfabricSuspectCongestion", congestion(downlink(1, 2)),
          "Pairs (prober -> peer) h1 -> h3, h2 -> h3, h3 -> h1, h3 -> h2, h3 -> h5, h3 -> h6, and "
          "more spike while crossing spine-1 port 2 (to leaf-2 port 3), which waited 2.0 "
          "PortXmitWait ticks per word sent (its tick is not known) over the last 5 minutes: 96 "
          "of 4800 probes crossing it were late in the last minute. Congestion, not a fault of a "
          "cable or a host: it explains the spikes of 8 probe pair(s) (the most in a minute, over "
          "the last 10 minutes). A spine port: traffic is unevenly spread over the spines, or "
          "oversubscribed here. A root: the congestion starts here. Also named for the same "
          "pairs: none.")],
    # Congestion and a stalled host: h6's pairs with h3 cross the port too (24 more late).
    30: [("IbfabricSuspectCongestion", congestion(downlink(1, 2)),
          "Pairs (prober -> peer) h1 -> h3, h2 -> h3, h3 -> h1, h3 -> h2, h3 -> h5, h3 -> h6, and "
          "more spike while crossing spine-1 port 2 (to leaf-2 port 3), which waited to send 41% "
          "of the time over the last 5 minutes: 120 of 4800 probes crossing it were late in the "
          "last minute. Congestion, not a fault of a cable or a host: it explains the spikes of 8 "
          "probe pair(s) (the most in a minute, over the last 10 minutes). A spine port: traffic "
          "is unevenly spread over the spines, or oversubscribed here. A root: the congestion "
          "starts here. Also named for the same pairs: host h6.")],
    # The stalled host: its 5 probers each see 3 late answers every 10 s (90 in the minute);
    # its own probes see 1 late answer each every 10 s (30); its loop stalled 1.2 s every 10 s.
    6: [("IbfabricSuspectHost", host("h4"),
         "Host h4 explains the late or lost probes of 10 probe pair(s) (the most in a minute, "
         "over the last 10 minutes), where other pairs crossing the same cables were clean. In "
         "the last minute (blamed as a whole): answers to it: 90 late, 0 lost of 3000 (5 pairs); "
         "its own probes: 30 late, 0 lost of 3000 (5 pairs). Its daemon: event loop stalled 7.2s "
         "in the minute. Equally suspect (probes cannot tell them apart): none. Its own port "
         "counters in 10 minutes: port 1 (its own daemon): 0 errors, 0 discards.")],
}


def yaml_quote(s):
    return "'" + s.replace("'", "''") + "'"


ALERTNAMES = {"link": "IbfabricSuspectLink", "host": "IbfabricSuspectHost",
              "congestion": "IbfabricSuspectCongestion"}


def expected_alerts(expected):
    alert = {"link": link_alert, "host": host_alert, "congestion": congestion_alert}
    return sorted(alert[item[0]](*item[1:]) for item in expected)


def alert_labels(item):
    if item[0] in ("link", "congestion"):
        a, ap, b, bp = item[1:]
        return [("node_guid", NODES[a][0]), ("port", ap), ("node_name", a),
                ("remote_node_guid", NODES[b][0]), ("remote_port", bp), ("remote_node_name", b)]
    return [("node_guid", NODES[item[1]][0]), ("node_name", item[1])]


def render():
    lines = [
        "# Generated by localization_cases.py (edit that, then run it): promtool unit tests of the",
        "# localization rules (IbfabricSuspectLink, IbfabricSuspectHost, IbfabricSuspectCongestion)",
        "# on a synthetic 3-leaf, 2-spine fat tree.",
        "# Run: promtool test rules dashboards/alerts/ibfabric.localization.test.yml",
        "rule_files:",
        "  - ibfabric.rules.yml",
        "evaluation_interval: 10s",
        "tests:",
    ]
    for index, (comment, pairs, faults, expected) in enumerate(SCENARIOS):
        lines.append("  # " + comment)
        lines.append("  - interval: %ds" % STEP)
        lines.append("    input_series:")
        for s, values in scenario_series(pairs, **faults):
            lines.append("      - series: " + yaml_quote(s))
            lines.append("        values: '%s'" % values)
        lines.append("    promql_expr_test:")
        eval_before, eval_named = eval_times(faults.get("lead", 0))
        evals = [(eval_before, []), (eval_named, expected_alerts(expected))]
        if index in MEMORY:
            evals += [(MEMORY[index][0], expected_alerts(expected)), (MEMORY[index][1], [])]
        for eval_time, names in evals:
            lines.append("      - expr: ALERTS{alertname=~\"IbfabricSuspect(Link|Host|Congestion)\","
                         "alertstate=\"firing\"}")
            lines.append("        eval_time: %s" % eval_time)
            lines.append("        exp_samples:" + ("" if names else " []"))
            for name in names:
                lines.append("          - labels: " + yaml_quote(name))
                lines.append("            value: 1")
        tests = []
        for alertname in SUMMARIES:
            described = [d for d in DESCRIPTIONS.get(index, []) if d[0] == alertname]
            if described:
                tests.append((alertname, described))
            elif not expected:
                tests.append((alertname, []))  # the quiet case, for test_alert_rules.py
        if index in MEMORY:
            alertname = ALERTNAMES[expected[0][0]]
            tests.append((alertname, [(None, expected[0], MEMORY[index][2])], MEMORY[index][0]))
        if tests:
            lines.append("    alert_rule_test:")
        for test in tests:
            alertname, described = test[:2]
            lines.append("      - eval_time: %s" % (test[2] if len(test) > 2 else eval_named))
            lines.append("        alertname: " + alertname)
            lines.append("        exp_alerts:" + ("" if described else " []"))
            for _, item, description in described:
                lines.append("          - exp_labels:")
                lines.append("              severity: 'warning'")
                for key, value in alert_labels(item):
                    lines.append("              %s: '%s'" % (key, value))
                lines.append("            exp_annotations:")
                lines.append("              summary: " + yaml_quote(SUMMARIES[alertname]))
                lines.append("              description: " + yaml_quote(description))
                lines.append("              runbook_url: " + RUNBOOK + alertname.lower())
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
