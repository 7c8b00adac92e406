#!/usr/bin/env python3
"""Localization benchmark: do the shipped rules name the culprit, only the culprit, and how fast?

On a simulated two-level fat tree (ibsim + opensm under the umad shim, tests/lib/simfabric.py)
every host runs an ibfabricd that probes peers over MAD (collector `probe`, the demo's settings:
`probe_interval: 100ms`, `spike_floor: 20ms`, `interval: 5s`), answers their probes, traces
where its probes go (`paths`, every 10 s) and reads its own port (`ports`); the first one also
sweeps the switches (`fabric`). A real Prometheus (Debian's) scrapes them every 5 s and
evaluates `dashboards/alerts/ibfabric.rules.yml` of this tree (or `--rules`) exactly as
shipped, every 5 s; ibfabric-localize (`--localize`, its defaults: every 10 s, a minute of
evidence) reads that Prometheus and is scraped by it; the alerts fire on its verdicts. Each scenario gets a fresh Prometheus (a new TSDB), a clean warm-up
(`--warmup`), then its fault(s) for `--duration` seconds, while /api/v1/alerts is polled every
second. `IbfabricSuspectLink` (a cable, by both ends), `IbfabricSuspectHost` (a host; not
required to exist in the rules) and `IbfabricSuspectCongestion` (a port; no scenario congests
one, so any it names is a bystander) name things; nothing else counts.

Scenarios (drawn from `--seed`, printed; `--seed N --only ID` replays one):
  host            `Error "<host>"[1] P`: P % of the packets into a host port lost
  leaf_up         `Error "<leaf>"[<uplink>] P`: packets from a spine into a leaf
  spine           `Error "<spine>"[<port>] P`: packets from a leaf into a spine
  stall           six 0.4 s SIGSTOP/SIGCONT pauses of one host's daemon, 1 s apart
  local           a daemon failing locally: four 1.5 s pauses (past the probe timeout: its own
                  probes in flight time out, its loop counts the stalls), 1 s apart
  two_drops       two of the drops above on different cables
  drop_and_stall  one drop and one stall of a host whose cable it is not
  clean           nothing
with P from {1, 2, 3, 5, 10, 30}; fault specs 0 to 6 take the kinds in the order host, leaf_up,
stall, clean, spine, two_drops, drop_and_stall, local (so that 16 scenarios cover each kind under
both probing modes), later ones any kind. Every fault spec runs twice: under a full mesh (every host probes every
other) and under sparse probing (every host probes 2 or 3 peers drawn from the seed, as each
node would at 10,000 nodes). Full-mesh scenarios run first on one fabric, then the sparse
ones on another (the daemons are kept between the scenarios of one probing mode).

Ground truth comes from `ibtracert SLID DLID` for every ordered host pair, run once per fabric
before any daemon starts (never from the daemons' `ibfabric_path_*`). A fault touches a set of
probe pairs: a drop, the pairs whose probe or answer enters the dropping port; a stall, the
pairs the host probes or is probed by. The culprit is `distinguishable` when no other cable
(in either direction) and no host is touched by exactly that set; `twin` when the only look-alike
is the host/own-cable twin (a host's cable carries exactly that host's pairs, in any probing
mode, so a drop into a host port and a stalled host are always twins); `ambiguous` with other
look-alikes; `invisible` when no probed pair is touched.

Per scenario: whether each culprit was named (a cable fault: the link alert naming that cable;
a stall: the host alert naming that host), the time from injection to the first poll that saw
it firing (and when it first went pending), and every other cable or host named at any time,
warm-up included, sorted into the culprit's twin, its look-alikes (ambiguous culprits) and
bystanders (anything else). Also: when a pair was first recorded faulty, and the fabric's
network-blamed RTT spikes, lost and sent probes and faulty pairs after the warm-up and at the
end (a warm-up that already had a faulty pair was not clean: on the simulator, a loaded
machine stalls ibsim or a daemon and every pair sees RTT spikes). Totals: precision (strict,
and counting twins and look-alikes as the culprit; also without the noisy warm-ups), recall
over distinguishable culprits and overall, time to name by fault kind and drop rate, every
bystander, look-alike and twin event with the command that replays its scenario; `--json
PATH` writes everything.

Notifications: each scenario's Prometheus sends its alerts to a real Alertmanager (Debian's
prometheus-alertmanager) running the shipped deploy/alertmanager/alertmanager.yml, its pager and
chat receivers pointed at a webhook of the bench's own (tests/lib/alertmanager.py: routing,
grouping and inhibition as shipped, group_wait and group_interval shortened to seconds). Counted
per scenario: the notification groups that fired after the injection (a group is a receiver and
Alertmanager's group key: one page or chat thread, however often it repeats), by receiver, with
their alerts; and any before it (a clean warm-up should have none). The heartbeat receiver's
(IbfabricWatchdog, always firing) is no notification of a fault and is not counted. Totals:
groups per fault, pages per fault, and the scenarios whose groups outnumber their faults.

    bench/localization.py [--seed N] [--scenarios 14] [--only ID,...] [--modes full,sparse]
                          [--warmup 75] [--duration 150] [--clean-hour [--clean-seconds 3600]]
                          [--spike-floor 20ms] [--hog N] [--json PATH] [--keep-logs]
                          [--binary PATH]

With --hog N, N processes that only spin (one per core: both cores busy) run beside everything
from the moment each fabric is up to the end: a training step's load on the hosts' CPUs. With
--clean-hour it answers "does a clean fabric on a loaded machine page anyone?".

Everything it starts (ibsim, opensm, the daemons, Prometheus) is ended by PID when it ends,
also on Ctrl-C or SIGTERM.
"""

import argparse
import hashlib
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from gen_fattree import fattree, hca_name, leaf_name, spine_name  # noqa: E402
from ibfabric_testlib import find_samples, free_port  # noqa: E402
from promserver import WATCHDOG, Localizer, PromServer  # noqa: E402

os.environ.setdefault("IBFABRIC_SOURCE_DIR", ROOT)  # tests/lib's alertmanager.py reads it
from alertmanager import Alertmanager, WebhookReceiver, config_for_test  # noqa: E402
from simfabric import SHIM, SimFabric  # noqa: E402

NAMING = ("IbfabricSuspectLink", "IbfabricSuspectHost", "IbfabricSuspectCongestion")
# A pair with lost or late probes in the last minute (what the localizer reads).
FAULTY_PAIRS = ("group by (job, instance, peer, transport) "
                "(increase(ibfabric_probe_lost_total[1m]) > 0 "
                "or increase(ibfabric_probe_spikes_total[1m]) > 0)")
RATES = (1, 2, 3, 5, 10, 30)
KINDS = ("host", "leaf_up", "stall", "clean", "spine", "two_drops", "drop_and_stall", "local")
DROPS = ("host", "leaf_up", "spine")
MODES = ("full", "sparse")
STALL_PAUSES, STALL_PAUSE_S, STALL_GAP_S = 6, 0.4, 0.6
LOCAL_PAUSES, LOCAL_PAUSE_S, LOCAL_GAP_S = 4, 1.5, 1.0
HOST_FAULTS = ("stall", "local")  # a host's own: the culprit is the host


def say(*args):
    print(time.strftime("%H:%M:%S"), *args, flush=True)


# --- the fabric and what probes can tell apart -----------------------------------------------

class Topology:
    """The fat tree of gen_fattree.fattree(): names, and each host's cable."""

    def __init__(self, leaves, spines, hcas):
        self.leaves, self.spines, self.hcas = leaves, spines, hcas
        self.text = fattree(leaves=leaves, spines=spines, hcas_per_leaf=hcas)
        self.hosts = [hca_name(l, j, hcas) for l in range(1, leaves + 1)
                      for j in range(1, hcas + 1)]
        self.host_set = set(self.hosts)
        # host -> (leaf, leaf port): host j of leaf l hangs on port j.
        self.host_port = {hca_name(l, j, hcas): (leaf_name(l), j)
                          for l in range(1, leaves + 1) for j in range(1, hcas + 1)}

    def cable(self, a, pa, b, pb):
        """A cable, both directions folded: its two ends, the switch (or lower) end first."""
        return tuple(sorted([(a, int(pa)), (b, int(pb))],
                            key=lambda e: (e[0] in self.host_set, e[0], e[1])))

    def host_cable(self, host):
        leaf, port = self.host_port[host]
        return self.cable(leaf, port, host, 1)

    def far_end(self, node, port):
        """The (node, port) cabled to `node` port `port`."""
        if node in self.host_set:
            return self.host_port[node]
        if node.startswith("leaf-"):
            l = int(node.split("-")[1])
            if port <= self.hcas:
                return hca_name(l, port, self.hcas), 1
            return spine_name(port - self.hcas), l
        return leaf_name(port), self.hcas + int(node.split("-")[1])


def cable_str(cable):
    return '"%s"[%d] <-> "%s"[%d]' % (cable[0][0], cable[0][1], cable[1][0], cable[1][1])


def host_str(host):
    return 'host "%s"' % host


def twin_of(topo, entity):
    """A host's twin is its own cable and the other way round; other cables have none."""
    for h in topo.hosts:
        if entity == host_str(h):
            return cable_str(topo.host_cable(h))
        if entity == cable_str(topo.host_cable(h)):
            return host_str(h)
    return None


_HOP = re.compile(r'^\[(\d+)\] -> \S+ port \{(0x[0-9a-f]+)\}\[(\d+)\].*"([^"]*)"\s*$')
_FROM = re.compile(r'^From \S+ \{(0x[0-9a-f]+)\} portnum (\d+) .*"([^"]*)"\s*$')


def parse_ibtracert(text, guids):
    """ibtracert's default output -> [(sender, port, receiver, port)], one per cable crossed;
    fills guids {guid: node name} from the GUIDs it prints."""
    hops, node = [], None
    for line in text.splitlines():
        line = line.strip()
        m = _FROM.match(line)
        if m:
            node = m.group(3)
            guids[int(m.group(1), 16)] = node
            continue
        m = _HOP.match(line)
        if m and node is not None:
            guids[int(m.group(2), 16)] = m.group(4)
            hops.append((node, int(m.group(1)), m.group(4), int(m.group(3))))
            node = m.group(4)
    return hops


def evidence(routes, pairs):
    """{direction: pairs crossing it} and {host: pairs touching it} for the probed pairs. A
    pair (prober, peer) crosses its probe's route and its answer's."""
    links = {}
    for p, q in pairs:
        for d in routes[(p, q)] + routes[(q, p)]:
            links.setdefault(d, set()).add((p, q))
    hosts = {}
    for p, q in pairs:
        hosts.setdefault(p, set()).add((p, q))
        hosts.setdefault(q, set()).add((p, q))
    return links, hosts


def classify(topo, links, hosts, culprit, touched):
    """(class, look-alikes) of a culprit entity whose fault touches the pair set `touched`."""
    if not touched:
        return "invisible", []
    alike = set()
    for d, ps in links.items():
        e = cable_str(topo.cable(*d))
        if e != culprit and ps == touched:
            alike.add(e)
    for h, ps in hosts.items():
        e = host_str(h)
        if e != culprit and ps == touched:
            alike.add(e)
    if not alike:
        return "distinguishable", []
    if alike == {twin_of(topo, culprit)}:
        return "twin", sorted(alike)
    return "ambiguous", sorted(alike)


# --- scenarios ---------------------------------------------------------------------------------

def sparse_peers(seed, topo):
    """{host: [peers]}: every host probes 2 or 3 others, drawn from the seed."""
    rng = random.Random("%d-sparse" % seed)
    out = {}
    for h in topo.hosts:
        others = [x for x in topo.hosts if x != h]
        out[h] = sorted(rng.sample(others, rng.choice((2, 3))))
    return out


def draw_drop(rng, topo, kind, avoid=()):
    """One drop of `kind` on a cable not in `avoid`: where the Error goes, the cable, the rate."""
    while True:
        if kind == "host":
            node, port = rng.choice(topo.hosts), 1
        elif kind == "leaf_up":
            node = leaf_name(rng.randint(1, topo.leaves))
            port = topo.hcas + rng.randint(1, topo.spines)
        else:
            node, port = spine_name(rng.randint(1, topo.spines)), rng.randint(1, topo.leaves)
        far = topo.far_end(node, port)
        cable = cable_str(topo.cable(node, port, *far))
        if cable not in avoid:
            return {"kind": kind, "node": node, "port": port, "rate": rng.choice(RATES),
                    "from": list(far), "culprit": cable}


def draw_stall(rng, topo, avoid=()):
    host = rng.choice([h for h in topo.hosts if cable_str(topo.host_cable(h)) not in avoid])
    return {"kind": "stall", "host": host, "culprit": host_str(host)}


def fault_spec(seed, index, topo):
    """The faults of spec `index` of this seed: the first seven take KINDS in order."""
    rng = random.Random("%d-%d" % (seed, index))
    kind = KINDS[index] if index < len(KINDS) else rng.choice(KINDS)
    if kind in DROPS:
        faults = [draw_drop(rng, topo, kind)]
    elif kind in HOST_FAULTS:
        faults = [dict(draw_stall(rng, topo), kind=kind)]
    elif kind == "two_drops":
        first = draw_drop(rng, topo, rng.choice(DROPS))
        faults = [first, draw_drop(rng, topo, rng.choice(DROPS), avoid=(first["culprit"],))]
    elif kind == "drop_and_stall":
        drop = draw_drop(rng, topo, rng.choice(DROPS))
        faults = [drop, draw_stall(rng, topo, avoid=(drop["culprit"],))]
    else:
        faults = []
    return kind, faults


def catalog(seed, count, topo):
    """[(id, kind, mode, faults)]: spec i under full mesh (id i/full), then sparse (i/sparse)."""
    out = []
    i = 0
    while len(out) < count:
        kind, faults = fault_spec(seed, i, topo)
        for mode in MODES:
            if len(out) < count:
                out.append(("%d/%s" % (i, mode), kind, mode, faults))
        i += 1
    return out


def describe(fault):
    if fault["kind"] == "stall":
        return "stall of %s" % fault["host"]
    if fault["kind"] == "local":
        return "%s's daemon failing locally (1.5 s pauses)" % fault["host"]
    return '%d %% into "%s"[%d] (packets from "%s"[%d])' % (
        fault["rate"], fault["node"], fault["port"], fault["from"][0], fault["from"][1])


# --- one fabric of daemons -----------------------------------------------------------------------

class Rig:
    """ibsim, opensm until the routes are programmed, and one ibfabricd per host probing
    `targets[host]`. opensm is stopped once every path is traced (as test_localization does):
    under the simulator an Error drops its SMPs too and it then reroutes now and then, which
    would move the pairs off the faulty cable mid-scenario."""

    def __init__(self, topo, targets, binary, name, spike_floor="20ms"):
        self.topo, self.targets, self.binary, self.name = topo, targets, binary, name
        self.spike_floor = spike_floor
        self.fabric = None
        self.daemons = {}
        self.routes = {}
        self.guids = {}
        self.lids = {}

    def start(self):
        topo = self.topo
        self.fabric = SimFabric(topo.text, name=self.name, sm_host=spine_name(1),
                                start_sm=False)
        self.fabric.start()
        # ignore_other_sm: the responders set their ports' IsSM bit (SIM_SET_ISSM=1); without
        # it opensm's MADs to them end the daemons under the shim. opensm sits on a spine so
        # that every host's IsSM slot is free for its responder.
        conf = os.path.join(self.fabric.workdir, "opensm.conf")
        with open(conf, "w") as f:
            f.write("ignore_other_sm TRUE\n")
        self.sm = self.fabric.spawn("opensm", ["opensm", "-F", conf, "-f", os.path.join(
            self.fabric.workdir, "opensm.osm.log")], host=spine_name(1))
        self.fabric.wait_ready(hosts=topo.hosts[:1], timeout=60)
        for h in topo.hosts:
            self.lids[h] = self.fabric.lid(h)
        # Ground truth, before any daemon holds a client slot.
        for p in topo.hosts:
            for q in topo.hosts:
                if p != q:
                    out = self.fabric.run_tool(["ibtracert", str(self.lids[p]),
                                                str(self.lids[q])], host=topo.hosts[0]).stdout
                    self.routes[(p, q)] = parse_ibtracert(out, self.guids)
                    if not self.routes[(p, q)] or self.routes[(p, q)][-1][2] != q:
                        raise RuntimeError("ibtracert %s -> %s: %r" % (p, q, out))
        for i, h in enumerate(topo.hosts):
            self._start_daemon(i, h)
        for h, d in self.daemons.items():
            want = len(self.targets[h])
            d.wait_for(lambda s: sum(x.value for x in find_samples(
                s, "ibfabric_path_peers", state="traced")) == want, timeout=120,
                what="every path of %s traced" % h)
        self.sm.stop()
        self.check_paths()
        return self

    def _start_daemon(self, i, host):
        work = self.fabric.workdir
        targets = ", ".join('{lid: %d, name: "%s"}' % (self.lids[q], q.split()[0])
                            for q in self.targets[host])
        config = os.path.join(work, "ibfabricd-%d.yaml" % i)
        with open(config, "w") as f:
            f.write("collectors:\n"
                    "  sysfs: {enabled: false}\n  sm: {enabled: false}\n"
                    "  sriov: {enabled: false}\n  ports: {enabled: true}\n"
                    "  fabric: {enabled: %s, interval: 30s}\n"
                    "  probe: {enabled: true, interval: 5s, udp_listen: \"\", "
                    "probe_interval: 100ms, spike_floor: %s, targets: [%s]}\n"
                    "  paths: {enabled: true, interval: 10s}\n"
                    % ("true" if i == 0 else "false", self.spike_floor, targets))
        d = self.fabric.daemon(["--config", config], host=host, binary=self.binary,
                               env=dict(os.environ, SIM_SET_ISSM="1"), port=free_port())
        # Under the shim a probe that reaches a daemon before its responder registered ends
        # it: the daemons already probing wait (SIGSTOP) until the new one serves.
        running = list(self.daemons.values())
        for other in running:
            other.signal(signal.SIGSTOP)
        try:
            d.start()
            self.daemons[host] = d
            deadline = time.monotonic() + 30
            while "mad: serving class 0x32" not in d.log():
                if time.monotonic() > deadline or d.process.poll() is not None:
                    raise RuntimeError("%s does not serve:\n%s" % (host, d.log()[-2000:]))
                time.sleep(0.05)
        finally:
            for other in running:
                other.signal(signal.SIGCONT)

    def check_paths(self):
        """The daemons' traced cables, compared with ibtracert's (reported, never used)."""
        diffs = 0
        for h, d in self.daemons.items():
            for s in find_samples(d.samples(), "ibfabric_path_hop_info"):
                l = s.labels
                a, b = (l["node_name"], int(l["port"])), (l["remote_node_name"],
                                                          int(l["remote_port"]))
                sender, receiver = (a, b) if l["direction"] == "a_to_b" else (b, a)
                peer = [q for q in self.targets[h] if q.split()[0] == l["peer"]][0]
                route = self.routes[(h, peer) if l["leg"] == "to_peer" else (peer, h)]
                if sender + receiver not in route:
                    diffs += 1
        self.path_diffs = diffs
        return diffs

    def alive(self):
        return all(d.process.poll() is None for d in self.daemons.values())

    def close(self, keep_logs=False):
        for host, d in self.daemons.items():
            try:
                if d.process and d.process.poll() is None:
                    d.signal(signal.SIGCONT)
                d.stop()
            except Exception:  # keep ending the others
                try:
                    os.killpg(d.process.pid, signal.SIGKILL)
                except (ProcessLookupError, AttributeError):
                    pass
            if not keep_logs and d.stderr_path:
                try:
                    os.unlink(d.stderr_path)
                except OSError:
                    pass
            elif d.stderr_path:
                say("kept the log of %s's daemon (%s mesh): %s" % (host, self.name[3:],
                                                                     d.stderr_path))
        if self.fabric is not None:
            self.fabric.close()


# --- one scenario ------------------------------------------------------------------------------

class Namer:
    """Maps a naming alert's labels to an entity string (cable_str / host_str)."""

    def __init__(self, topo, guids, instances):
        self.topo, self.guids, self.instances = topo, guids, instances
        self.short = {h.split()[0]: h for h in topo.hosts}

    def _node(self, name, guid):
        if name in self.guids.values():
            return name
        if name in self.short:
            return self.short[name]
        try:
            return self.guids.get(int(guid, 16), name)
        except (TypeError, ValueError):
            return name

    def entity(self, labels):
        if labels["alertname"] == "IbfabricSuspectCongestion":
            # No scenario congests a port: any port named is a bystander.
            return "congested port %s port %s" % (labels.get("node_name"), labels.get("port"))
        if labels["alertname"] == "IbfabricSuspectLink":
            try:
                a = self._node(labels.get("node_name"), labels.get("node_guid"))
                b = self._node(labels.get("remote_node_name"), labels.get("remote_node_guid"))
                return cable_str(self.topo.cable(a, labels["port"], b, labels["remote_port"]))
            except (KeyError, ValueError):
                return "unknown link %s" % json.dumps(labels, sort_keys=True)
        host = self._node(labels.get("node_name"), labels.get("node_guid"))
        if host not in self.topo.host_set:
            host = self.instances.get(labels.get("instance"), host)
        if host in self.topo.host_set:
            return host_str(host)
        return "unknown host %s" % json.dumps(labels, sort_keys=True)


def noise(prom, seconds):
    """What the whole fabric's probes saw over the last `seconds` (the Prometheus's life): RTT
    spikes the network is blamed for (spikes minus those the responder's hold time explains),
    lost probes, probes sent, pairs recorded faulty. In a warm-up all of it is noise: on the
    simulator a stalled ibsim (the whole network is one process) or a descheduled daemon
    shows as network spikes."""
    window = "[%ds]" % max(10, int(seconds))

    def total(expr):
        r = prom.query("sum(%s)" % expr)
        return round(float(r[0]["value"][1])) if r else 0
    return {"network_spikes": total("increase(ibfabric_probe_spikes_total%s)" % window)
            - total("increase(ibfabric_probe_host_spikes_total%s)" % window),
            "lost": total("increase(ibfabric_probe_lost_total%s)" % window),
            "sent": total("increase(ibfabric_probe_sent_total%s)" % window),
            "faulty_pairs": len(prom.query(FAULTY_PAIRS))}


def stall(daemon, stop_event, kind="stall"):
    """Short pauses of one daemon: its peers' probes wait, and so do its own answers; a local
    failure's pauses outlast the probe timeout, so its own probes in flight are lost too."""
    pauses, pause, gap = ((STALL_PAUSES, STALL_PAUSE_S, STALL_GAP_S) if kind == "stall"
                          else (LOCAL_PAUSES, LOCAL_PAUSE_S, LOCAL_GAP_S))
    for _ in range(pauses):
        if stop_event.is_set():
            break
        daemon.signal(signal.SIGSTOP)
        try:
            time.sleep(pause)
        finally:
            daemon.signal(signal.SIGCONT)
        time.sleep(gap)


def run_scenario(rig, sid, kind, mode, faults, rules, warmup, duration, poll_s, localize):
    topo = rig.topo
    instances = {"127.0.0.1:%d" % d.port: h for h, d in rig.daemons.items()}
    pairs = [(p, q) for p in topo.hosts for q in rig.targets[p]]
    links, hosts = evidence(rig.routes, pairs)
    culprits = []
    for f in faults:
        if f["kind"] in HOST_FAULTS:
            touched = hosts.get(f["host"], set())
        else:
            touched = set()
            for d, ps in links.items():
                if (d[2], d[3]) == (f["node"], f["port"]):
                    touched |= ps
        cls, alike = classify(topo, links, hosts, f["culprit"], touched)
        culprits.append({"fault": f, "entity": f["culprit"], "class": cls, "alike": alike,
                         "twin": twin_of(topo, f["culprit"]), "pairs": len(touched)})
    say("scenario %s (%s, %s): %s" % (sid, kind, mode, "; ".join(
        "%s [%s, %d pairs]" % (describe(c["fault"]), c["class"], c["pairs"]) for c in culprits)
        or "clean fabric"))
    namer = Namer(topo, rig.guids, instances)
    localizer_port, prom_port = free_port(), free_port()
    webhook = WebhookReceiver()
    alertmanager = Alertmanager(config_for_test(webhook))
    prom = PromServer(targets=sorted(instances), rule_files=[rules], interval="5s",
                      port=prom_port,
                      extra_jobs={"ibfabric-localize": ["127.0.0.1:%d" % localizer_port]},
                      alertmanagers=["127.0.0.1:%d" % alertmanager.port])
    localizer = Localizer("http://127.0.0.1:%d" % prom_port, localizer_port, interval="10s", window="1m",
                          query_timeout="8s", binary=localize)
    named = {}  # entity -> {"first": s from injection, "last": ..., "alert": name}
    pending = {}  # entity -> s from injection when first seen pending
    first_faulty = [None]  # s from injection when some pair was first recorded faulty
    others = {}  # alertname of other firing alerts -> most at once
    load = []
    stop_event = threading.Event()
    stall_thread = None
    t0 = None
    try:
        prom.start()
        localizer.start()
        start = time.monotonic()

        def poll(until):
            while time.monotonic() < until:
                now = time.monotonic()
                try:
                    alerts = prom.api("alerts")["alerts"] or []
                except OSError as e:
                    say("poll failed: %s" % e)
                    alerts = []
                seen, others_now = {}, {}
                for al in alerts:
                    name = al["labels"]["alertname"]
                    if name in NAMING:
                        e = namer.entity(al["labels"])
                        if al["state"] == "firing" or e not in seen:
                            seen[e] = (name, al["state"],
                                       al.get("annotations", {}).get("description", ""))
                    elif al["state"] == "firing" and name != WATCHDOG:
                        others_now[name] = others_now.get(name, 0) + 1
                for name, n in others_now.items():
                    others[name] = max(others.get(name, 0), n)
                rel = round(now - (t0 if t0 is not None else start + warmup), 1)
                for e, (name, state, description) in seen.items():
                    # pending: the rule's expression holds, its `for:` not yet over.
                    if state != "firing":
                        pending.setdefault(e, rel)
                    elif e not in named:
                        # The description as it first fired: why a bystander was named.
                        named[e] = {"first": rel, "last": rel, "alert": name,
                                    "description": description}
                        say("  %+.0fs firing %s: %s" % (rel, name, e))
                    else:
                        named[e]["last"] = rel
                if first_faulty[0] is None:
                    try:
                        if prom.query(FAULTY_PAIRS):
                            first_faulty[0] = rel
                    except OSError:
                        pass
                time.sleep(max(0.0, poll_s - (time.monotonic() - now)))

        load.append(os.getloadavg()[0])
        poll(start + warmup)
        if not rig.alive():
            raise RuntimeError("a daemon died during the warm-up")
        warm = noise(prom, warmup) if warmup else None
        t0 = time.monotonic()
        before_fault = len(webhook.received())
        for f in faults:
            if f["kind"] in HOST_FAULTS:
                stall_thread = threading.Thread(target=stall, args=(
                    rig.daemons[f["host"]], stop_event, f["kind"]), daemon=True)
                stall_thread.start()
            else:
                rig.fabric.command('Error "%s"[%d] %d' % (f["node"], f["port"], f["rate"]),
                                   settle=0)
        load.append(os.getloadavg()[0])
        poll(t0 + duration)
        load.append(os.getloadavg()[0])
        faulty = prom.query(FAULTY_PAIRS)
        faulty_pairs = sorted("%s -> %s" % (instances.get(s["metric"].get("instance"), "?")
                                            .split()[0], s["metric"].get("peer"))
                              for s in faulty)
        end = noise(prom, warmup + duration)
        dead = [h for h, d in rig.daemons.items() if d.process.poll() is not None]
    finally:
        stop_event.set()
        if stall_thread is not None:
            stall_thread.join(timeout=10)
        for f in faults:
            if f["kind"] not in HOST_FAULTS:
                rig.fabric.command('Error "%s"[%d] 0' % (f["node"], f["port"]), settle=0)
        localizer.close()
        prom.close()
        received = webhook.received()
        alertmanager.close()
        webhook.close()
    notifications = {"warm-up": notification_groups(received[:before_fault]),
                     "fault": notification_groups(received[before_fault:])}

    result = score({"id": sid, "kind": kind, "mode": mode, "pairs": len(pairs),
                    "faults": faults, "culprits": culprits, "named": named, "pending": pending,
                    "first_faulty_pair": first_faulty[0], "other_alerts": others,
                    "faulty_pairs_at_end": faulty_pairs, "load": load, "dead_daemons": dead,
                    "evidence_after_warmup": warm, "evidence_at_end": end,
                    "notifications": notifications})
    say("  first faulty pair at %s s; after the warm-up %s; at the end %s"
        % (first_faulty[0], warm, end))
    for c in result["culprits"]:
        say("  culprit %s: %s%s%s" % (c["entity"], "named after %.0f s" % c["time"]
                                      if c["named"] else "not named",
                                      "" if c["pending"] is None
                                      else " (pending from %.0f s)" % c["pending"],
                                      "; twin %s named after %.0f s" % (
                                          c["twin"], c["twin_time"]) if c["twin_named"] else ""))
    for b in result["lookalikes"]:
        say("  look-alike %s named at %+.0f s" % (b["entity"], b["first"]))
    for b in result["bystanders"]:
        say("  BYSTANDER %s named at %+.0f s: %s" % (b["entity"], b["first"],
                                                       b.get("description", "")))
    for phase, groups in notifications.items():
        for g in groups:
            say("  notified (%s, %s): %s %s" % (phase, g["receiver"], ", ".join(g["alerts"]),
                                                 g["group"]))
    if dead:
        say("  daemons died: %s" % ", ".join(dead))
    return result


def notification_groups(received):
    """The notification groups among webhook POSTs: one per receiver and group key that fired
    (a page or a chat thread, however many times Alertmanager sent it), with its alerts' names
    and its group labels."""
    groups = {}
    for n in received:
        if n.get("status") != "firing" or n["path"] == "/heartbeat":  # IbfabricWatchdog's
            continue
        g = groups.setdefault((n["path"], n["groupKey"]), {
            "receiver": n["path"].strip("/"), "group": n.get("groupLabels", {}), "alerts": set()})
        g["alerts"].update(a["labels"]["alertname"] for a in n.get("alerts", []))
    return [dict(g, alerts=sorted(g["alerts"])) for _, g in sorted(groups.items())]


def score(result):
    """Sorts what a scenario named: each culprit (named? when? its twin?), then every other
    entity as a twin (a culprit's host/own-cable twin), a look-alike (a cable or host whose
    pairs equal an ambiguous culprit's: probes cannot tell them apart either) or a bystander
    (anything else). Works on a result read back from --json too."""
    named, pending = result["named"], result["pending"]
    roles = {}
    for c in result["culprits"]:
        roles[c["entity"]] = "culprit"
    for c in result["culprits"]:
        if c["twin"]:
            roles.setdefault(c["twin"], "twin")
        for e in c["alike"]:
            roles.setdefault(e, "lookalike")
    for c in result["culprits"]:
        hit = named.get(c["entity"])
        twin = named.get(c["twin"]) if c["twin"] else None
        c.update(named=hit is not None, pending=pending.get(c["entity"]),
                 time=hit["first"] if hit else None, twin_named=twin is not None,
                 twin_time=twin["first"] if twin else None)
    result.update(twins=[], lookalikes=[], bystanders=[])
    for e, v in sorted(named.items()):
        role = roles.get(e, "bystander")
        if role != "culprit":
            result[role + "s"].append({
                "entity": e, "first": v["first"], "last": v["last"], "alert": v["alert"],
                "description": v.get("description", ""),
                "phase": "warm-up" if v["first"] < 0 else "fault" if result["faults"]
                else "clean"})
    return result


# --- totals ------------------------------------------------------------------------------------

def summarize(results, duration):
    for r in results:
        score(r)
    culprits = [dict(c, scenario=r["id"], mode=r["mode"]) for r in results
                for c in r["culprits"]]
    n_culprit_named = sum(1 for c in culprits if c["named"])
    n_twin = sum(len(r["twins"]) for r in results)
    n_alike = sum(len(r["lookalikes"]) for r in results)
    n_bystander = sum(len(r["bystanders"]) for r in results)
    all_named = n_culprit_named + n_twin + n_alike + n_bystander

    def frac(k, n):
        return {"named": k, "of": n, "ratio": (k / n) if n else None}

    by_class = {}
    for cls in ("distinguishable", "twin", "ambiguous", "invisible"):
        cs = [c for c in culprits if c["class"] == cls]
        by_class[cls] = {"culprit": frac(sum(c["named"] for c in cs), len(cs)),
                         "twin_only": sum(1 for c in cs if c["twin_named"] and not c["named"])}
    times = {}
    for c in culprits:
        f = c["fault"]
        key = f["kind"] if f["kind"] in HOST_FAULTS else "%s %d %%" % (f["kind"], f["rate"])
        t = times.setdefault(key, {"n": 0, "times": [], "twin_times": [], "pending": []})
        t["n"] += 1
        if c["pending"] is not None:
            t["pending"].append(c["pending"])
        if c["named"]:
            t["times"].append(c["time"])
        elif c["twin_named"]:
            t["twin_times"].append(c["twin_time"])
    for t in times.values():
        t["median"] = statistics.median(t["times"]) if t["times"] else None
        t["max"] = max(t["times"]) if t["times"] else None
    # A warm-up in which some pair already turned faulty: the fabric (on the simulator, the
    # machine under it) was not clean, and what was named there is partly that noise's doing.
    noisy = [r["id"] for r in results
             if r["first_faulty_pair"] is not None and r["first_faulty_pair"] < 0]
    quiet = [r for r in results if r["id"] not in noisy]
    q_named = sum(1 for r in quiet for c in r["culprits"] if c["named"])
    q_all = q_named + sum(len(r["twins"]) + len(r["lookalikes"]) + len(r["bystanders"])
                          for r in quiet)
    fault_groups = [(r, g) for r in results for g in r.get("notifications", {}).get("fault", [])]
    notified = {
        "groups": len(fault_groups),
        "pages": sum(1 for _, g in fault_groups if g["receiver"] == "pager"),
        "faults": sum(len(r["faults"]) for r in results),
        "warm_up_groups": sum(len(r.get("notifications", {}).get("warm-up", []))
                              for r in results),
        "scenarios_over": [r["id"] for r in results
                           if len(r.get("notifications", {}).get("fault", [])) > len(r["faults"])],
    }
    return {
        "notifications": notified,
        "noisy_warmups": noisy,
        "bystanders_named_after_quiet_warmups": sum(len(r["bystanders"]) for r in quiet),
        "precision_after_quiet_warmups": (q_named / q_all) if q_all else None,
        "scenarios": len(results),
        "culprits": len(culprits),
        "named_entities": all_named,
        "culprits_named": n_culprit_named,
        "twins_named": n_twin,
        "lookalikes_named": n_alike,
        "bystanders_named": n_bystander,
        "scenarios_with_bystanders": sum(1 for r in results if r["bystanders"]),
        # Strict: a twin (a stalled host's cable, a dropping host cable's host) or a look-alike
        # is not the culprit. Lenient: they are, since probes alone cannot tell them apart.
        "precision": (n_culprit_named / all_named) if all_named else None,
        "precision_twin_as_culprit": ((n_culprit_named + n_twin + n_alike) / all_named)
        if all_named else None,
        "recall_distinguishable": by_class["distinguishable"]["culprit"],
        "recall_overall": frac(n_culprit_named, len(culprits)),
        "by_class": by_class,
        "time_to_name": times,
        "duration": duration,
    }


def pct(x):
    return "n/a" if x is None else "%.0f %%" % (100 * x)


def report(summary, results, seed, command):
    s = summary
    print()
    print("localization benchmark, seed %d (%s)" % (seed, command))
    print("scenarios %d, culprits %d; named: %d culprits, %d twins, %d look-alikes, "
          "%d bystanders" % (s["scenarios"], s["culprits"], s["culprits_named"],
                             s["twins_named"], s["lookalikes_named"], s["bystanders_named"]))
    print("precision %s (twins and look-alikes counted as the culprit: %s); scenarios with a "
          "bystander: %d"
          % (pct(s["precision"]), pct(s["precision_twin_as_culprit"]),
             s["scenarios_with_bystanders"]))
    print("scenarios whose warm-up already had a faulty pair: %d (%s); after the others: "
          "%d bystanders, precision %s" % (len(s["noisy_warmups"]),
                                           ", ".join(s["noisy_warmups"]) or "none",
                                           s["bystanders_named_after_quiet_warmups"],
                                           pct(s["precision_after_quiet_warmups"])))
    n = s["notifications"]
    print("notification groups after the injection: %d for %d faults (%s a fault), pages %d; "
          "before it: %d; scenarios with more groups than faults: %s"
          % (n["groups"], n["faults"], "%.2f" % (n["groups"] / n["faults"]) if n["faults"]
             else "n/a", n["pages"], n["warm_up_groups"], ", ".join(n["scenarios_over"])
             or "none"))
    rd = s["recall_distinguishable"]
    print("recall: distinguishable %d/%d (%s), overall %d/%d (%s)"
          % (rd["named"], rd["of"], pct(rd["ratio"]), s["recall_overall"]["named"],
             s["recall_overall"]["of"], pct(s["recall_overall"]["ratio"])))
    for cls, v in s["by_class"].items():
        if v["culprit"]["of"]:
            print("  %-16s culprit named %d/%d, only its twin named %d"
                  % (cls, v["culprit"]["named"], v["culprit"]["of"], v["twin_only"]))
    print("time to name (s from injection; not named within %d s otherwise):" % s["duration"])
    for key in sorted(s["time_to_name"]):
        t = s["time_to_name"][key]
        print("  %-16s %d/%d named%s%s%s" % (
            key, len(t["times"]), t["n"],
            ", median %.0f, max %.0f" % (t["median"], t["max"]) if t["times"] else "",
            "; twin named instead after %s" % ", ".join("%.0f" % x for x in t["twin_times"])
            if t["twin_times"] else "",
            "; pending (the rule's `for:` running) after %s" % ", ".join(
                "%.0f" % x for x in t["pending"]) if t["pending"] else ""))
    for role in ("bystander", "lookalike", "twin"):
        events = [(r["id"], b) for r in results for b in r[role + "s"]]
        print("%s events: %d" % (role, len(events)))
        for sid, b in events:
            print("  %s: %s named at %+.0f s (%s), replay: bench/localization.py --seed %d "
                  "--only %s" % (sid, b["entity"], b["first"], b["phase"], seed, sid))


# --- main --------------------------------------------------------------------------------------

def git_head(path):
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=None, help="default: drawn and printed")
    ap.add_argument("--scenarios", type=int, default=14, help="how many (full and sparse "
                    "variants of each fault spec count one each)")
    ap.add_argument("--only", default=None, help="comma-separated scenario ids (e.g. 3/sparse)")
    ap.add_argument("--modes", default="full,sparse")
    ap.add_argument("--warmup", type=float, default=75, help="s of clean fabric per scenario")
    ap.add_argument("--duration", type=float, default=150, help="s a fault is held and watched")
    ap.add_argument("--poll", type=float, default=1.0, help="s between /api/v1/alerts polls")
    ap.add_argument("--clean-hour", action="store_true",
                    help="instead: one clean full mesh for --clean-seconds, anything named")
    ap.add_argument("--clean-seconds", type=float, default=3600)
    ap.add_argument("--spike-floor", default="20ms",
                    help="the daemons' probe spike_floor (the demo's 20ms by default)")
    ap.add_argument("--leaves", type=int, default=4)
    ap.add_argument("--spines", type=int, default=2)
    ap.add_argument("--hcas-per-leaf", type=int, default=2)
    ap.add_argument("--rules", default=os.path.join(ROOT, "dashboards", "alerts",
                                                     "ibfabric.rules.yml"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "daemon", "ibfabricd"))
    ap.add_argument("--localize", default=os.path.join(ROOT, "build", "daemon",
                                                        "ibfabric-localize"))
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--hog", type=int, default=0,
                    help="processes that only spin, beside everything once a fabric is up")
    ap.add_argument("--keep-logs", action="store_true",
                    help="keep the daemons' logs (their RTT spike lines say when and where)")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    binary, rules = os.path.abspath(a.binary), os.path.abspath(a.rules)
    localize = os.path.abspath(a.localize)
    for path, flag in ((binary, "--binary"), (localize, "--localize")):
        if not os.path.exists(path):
            sys.exit("missing %s: build first (or %s)" % (path, flag))
    for tool in ("ibsim", "opensm", "ibtracert", "prometheus", "promtool"):
        if not any(os.access(os.path.join(p, tool), os.X_OK)
                   for p in os.environ.get("PATH", "").split(os.pathsep)):
            sys.exit("missing %s: scripts/install-deps.sh" % tool)
    if not os.path.exists(SHIM):
        sys.exit("missing %s: scripts/install-deps.sh" % SHIM)
    os.environ["IBFABRICD"] = binary
    # Each host's daemon holds an ibsim client slot, opensm another, and a tool a third
    # while the routes are read: ibsim has 10.
    if a.leaves * a.hcas_per_leaf > 8:
        sys.exit("at most 8 hosts: ibsim serves 10 clients (opensm and a tool included)")
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    with open(rules, "rb") as f:
        rules_text = f.read()
    has_host_alert = b"alert: IbfabricSuspectHost" in rules_text
    command = " ".join(["bench/localization.py"] + sys.argv[1:])
    say("localization benchmark: seed %d (--seed %d replays it); rules %s (sha256 %s, "
        "IbfabricSuspectHost %s); binary %s"
        % (seed, seed, rules, hashlib.sha256(rules_text).hexdigest()[:12],
           "present" if has_host_alert else "absent: a stall can only be named as a cable",
           binary))
    topo = Topology(a.leaves, a.spines, a.hcas_per_leaf)
    sparse = sparse_peers(seed, topo)
    full = {h: [q for q in topo.hosts if q != h] for h in topo.hosts}
    if a.clean_hour:
        todo = [("clean-hour", "clean", "full", [])]
    else:
        if a.only is None:
            todo = catalog(seed, a.scenarios, topo)
        else:
            want = a.only.split(",")
            top = max(int(x.split("/")[0]) for x in want)
            todo = [t for t in catalog(seed, len(MODES) * (top + 1), topo) if t[0] in want]
        todo = [t for t in todo if t[2] in a.modes.split(",")]
    say("%d scenario(s): %s" % (len(todo), ", ".join("%s %s" % (t[0], t[1]) for t in todo)))
    say("sparse probing: %s" % "; ".join("%s -> %s" % (h.split()[0], ",".join(
        q.split()[0] for q in sparse[h])) for h in topo.hosts))
    out = {"seed": seed, "command": command, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "rules": rules, "rules_sha256": hashlib.sha256(rules_text).hexdigest(),
           "has_suspect_host_alert": has_host_alert, "binary": binary,
           "tree_commit": git_head(ROOT), "warmup": a.warmup, "spike_floor": a.spike_floor,
           "duration": a.clean_seconds if a.clean_hour else a.duration, "hog": a.hog,
           "topology": {"leaves": a.leaves, "spines": a.spines, "hcas_per_leaf": a.hcas_per_leaf},
           "sparse_peers": sparse, "fabrics": [], "results": []}
    results = out["results"]
    rig = None
    hogs = []
    failed = False
    try:
        for mode in MODES:
            for sid, kind, m, faults in [t for t in todo if t[2] == mode]:
                if rig is not None and not rig.alive():
                    say("a daemon died: a new fabric")
                    rig.close(keep_logs=True)
                    rig = None
                if rig is None:
                    say("starting the %s-mesh fabric (%d hosts)" % (mode, len(topo.hosts)))
                    t = time.monotonic()
                    # Assigned before start(), so that a failed start is cleaned up too.
                    rig = Rig(topo, full if mode == "full" else sparse, binary,
                              "loc%s" % mode, a.spike_floor)
                    rig.start()
                    out["fabrics"].append({"mode": mode, "start_s": round(time.monotonic() - t),
                                           "daemon_hops_not_in_ibtracert": rig.path_diffs})
                    say("fabric up in %.0f s; daemon-traced hops not in ibtracert's routes: %d"
                        % (time.monotonic() - t, rig.path_diffs))
                    while len(hogs) < a.hog:
                        hogs.append(subprocess.Popen(
                            [sys.executable, "-c", "while True: pass"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                    if hogs:
                        say("%d spinning processes beside it" % len(hogs))
                results.append(run_scenario(rig, sid, kind, m, faults, rules,
                                            0 if a.clean_hour else a.warmup, out["duration"],
                                            a.poll, localize))
            if rig is not None:
                rig.close(keep_logs=a.keep_logs)
                rig = None
    except BaseException:
        failed = True
        raise
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        if rig is not None:
            rig.close(keep_logs=failed or a.keep_logs)
        if results:
            out["summary"] = summarize(results, out["duration"])
            report(out["summary"], results, seed, command)
            if a.json:
                with open(a.json, "w") as f:
                    json.dump(out, f, indent=1, sort_keys=True)
                say("wrote %s" % a.json)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
