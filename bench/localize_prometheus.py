#!/usr/bin/env python3
"""End to end at scale: fault localization with a real Prometheus (or docs/scaling.md's layout), today's rules or ibfabric-localize.

Simulated daemons serve, one scrape target per host, the series the localization reads, on a
two-level fat tree (`--hosts-per-leaf` hosts under each leaf, one uplink from every leaf to
every one of `--spines` spines, routed as a subnet manager's linear forwarding tables route it:
by destination, traffic to another leaf going up through spine (destination index mod spines)).
Every host probes `--peers` peers drawn from `--seed` over MAD, one probe a second per pair. A
real Prometheus (Debian's, `--prometheus`) scrapes every host every `--scrape-interval` seconds
(10; the scrape timeout the same, at most 10 s; job "ibfabric", instance "node-0001:10916", ...)
and evaluates `--rules`. After `--fault-after` seconds, packets
crossing one leaf uplink in one direction (a leaf -> spine direction drawn from the seed among
those at least the median number of pairs cross, or `--fault-link leaf-03:spine-07`) are lost
with probability `--fault-loss` (2 %): every probe or answer that crosses it is lost so, drawn
per probe. The run ends after `--duration` seconds.

Layouts (`--layout`):
  single  (the default) as above: one Prometheus scrapes every target, evaluates the rules and
          is what the localizer reads.
  scale   docs/scaling.md's layout as shipped: two Prometheus servers run
          deploy/prometheus/shard-0.yml and shard-1.yml (of `--deploy`), both reading one file_sd
          list of every host and keeping the hosts their `hashmod` shard holds (so each host is
          served on a port of its own: instance "127.0.0.1:PORT"); both remote-write into one
          VictoriaMetrics (`--victoria-metrics`) with the flags of
          deploy/victoria-metrics/victoria-metrics.default; vmalert (`--vmalert`) with the flags
          of deploy/victoria-metrics/vmalert.service evaluates `--rules` on VictoriaMetrics,
          keeping its state there (-remoteWrite.url, -remoteRead.url) and notifying a stand-in
          Alertmanager of this process (this vmalert has no -notifier.blackhole); the localizer
          reads VictoriaMetrics. Replaced in those files, each replacement asserted to occur
          exactly once (as tests/integration/test_multi_prometheus.py does): the target file,
          the remote-write address, the scrape interval (the shipped 15 s; and the 10 s scrape
          timeout when the interval is shorter), VictoriaMetrics' listen address and storage
          path (in the workdir), vmalert's -rule, its addresses and listen address; its
          -evaluationInterval stays 15s (the localization group has its own 10s), the
          localizer's target file (the shipped job `ibfabric-localize`: one shard scrapes it).
          `--vm-latency-offset SECONDS` replaces VictoriaMetrics' -search.latencyOffset (as
          shipped: 10s; the test gives 1s); `--localize-scraped-by vm`: VictoriaMetrics scrapes
          the localizer itself (-promscrape.config) instead of a shard. E.g.
          bench/localize_prometheus.py --hosts 1024 --layout scale --scrape-interval 15 \\
              --mode new --localize build/daemon/ibfabric-localize

Modes:
  old   today's rules (the 60 records of the group `ibfabric-localization`), e.g.
          git -C /work/main show 55f6f26:dashboards/alerts/ibfabric.rules.yml > /tmp/rules.old.yml
          bench/localize_prometheus.py --hosts 1024 --mode old --rules /tmp/rules.old.yml
  new   the same, plus `--localize BINARY` (ibfabric-localize) reading this Prometheus and scraped
        by it (job `--localize-job`), with the new rules (default: this tree's
        dashboards/alerts/ibfabric.rules.yml):
          bench/localize_prometheus.py --hosts 1024 --mode new --localize build/ibfabric-localize

Jobs (`--jobs N`, layout single; issue 50 item 5, docs/design.md "Probes that cover every job"):
  every ibfabric target carries `node` (its host name, by the shipped shard files' relabel rule;
  layout scale: `node` in the target file). From `--jobs-start` seconds on (spread evenly over
  `--jobs-spread`), N jobs of `--job-size` hosts each start, the hosts drawn from the seed (free
  hosts first: a job spans leaves, as a scheduler's would), the kinds turning (Kubeflow
  PyTorchJob, JobSet, Volcano, LeaderWorkerSet, batch Job) over four namespaces. The generator
  serves them as kube-state-metrics v2 names them (kube_pod_info{node}, kube_pod_labels with the
  allowlisted job labels, kube_pod_owner, kube_pod_status_phase: Pending `--pod-pending` s
  before the start, Running from it; an ibfabricd DaemonSet pod on every node besides), scraped
  as job "kube-state-metrics": the shipped group `ibfabric-jobs` makes ibfabric:job_node. Mode
  new: each simulated daemon does what the probe collector does with collectors.probe.plan_url
  (collectors/probe/probe_run.cpp ask_plan, update_peers): asks the localizer's
  /probe-plan?node_guid=0x... every `--plan-interval` (30 s) after its last answer, from a random
  phase, each daemon from a loopback address of its own (127.2.x.y), and probes the planned
  peers first within `--peers` (max_peers), the drawn subset filling the rest (a peer kept
  keeps its counters, a new one starts from 0, a dropped one's series go);
  ibfabric_probe_plan_{peers,up}; its paths collector (every `--paths-interval`, 30
  s, random phase) traces the new peers (ibfabric_path_hop_info both legs, _peer_info, the
  marker ibfabric_path_traces_total{cause="new"} moving) and drops the gone ones. `--no-plan`:
  no daemon asks (the coverage without the plan). Measured, polling the store every
  `--coverage-poll` (2) seconds from the first pods on: per job, seconds from its start (pods
  Running) until every one of its nodes has probe evidence with another of its nodes
  (increase(ibfabric_probe_sent_total[1m]) > 0 on a pair whose prober, by `node`, and peer are
  both the job's: each node probes or is probed by one of its job's), and until
  ibfabric:job_node lists all its nodes; when its last host applied its plan; the peers (probes
  a second) and probers per host in the store before the jobs and at the end (max, mean); the
  localizer's ibfabric_localize_probe_plan_{jobs,hosts} on change; what the rule made of each
  job. E.g.
          bench/localize_prometheus.py --hosts 1024 --mode new --localize BINARY --jobs 32 \\
              --job-size 32 --jobs-start 120 --duration 330

Per host the targets serve (TYPE lines, no HELP), as the real collectors label them:
  probe   per peer: ibfabric_probe_{sent,received,lost,spikes,host_spikes}_total,
          ibfabric_probe_failed_total{reason=port_error|mad_status},
          ibfabric_probe_{last_rtt,last_network_rtt,jitter,baseline_rtt}_seconds,
          ibfabric_probe_rtt_window_seconds{stat=p50|p99|max}; per node: ibfabric_probe_node_info,
          ibfabric_probe_responder_{requests,dropped}_total{transport="mad"}
  paths   ibfabric_path_hop_info (both legs, as collectors/paths/paths_run.cpp emit_leg names
          them), ibfabric_path_peer_info, ibfabric_path_traces_total{cause="new"}
  ports   ibfabric_ports_peer_info; per side (local, peer) the 22 PortCounters(Extended)
          counters ibfabric_ports_*_total and the gauges the rules read (state, link width, lane
          speed, effective rate, transmit_wait_tick_bytes)
  daemon  ibfabric_event_loop_stall_seconds_total, ibfabric_event_loop_stalls_total
  sweep   on node-0001 only (the host that sweeps the fabric), the switch port series the rules
          read: ibfabric_fabric_link_info, ibfabric_fabric_node_transmit_wait_tick_bytes, per
          switch port ibfabric_fabric_port_{effective_rate_bytes_per_second,link_width_lanes} and
          ibfabric_fabric_port_{symbol_errors,link_error_recoveries,link_downed,receive_errors,
          transmit_discards,transmit_wait_ticks,transmit_bytes,
          transmit_switch_hol_lifetime_limit_discards}_total
Counters advance with the clock (probes at 1/s per pair, bytes and packets at a per-host rate);
errors, stalls, spikes and responder drops stay 0: the fault is the only thing to find, and no
port counts it (the probes alone must name it). All targets are served by one child process
(asyncio, HTTP/1.1 keep-alive, texts built once, only the counters formatted per scrape).

Measured, polling Prometheus's own /metrics every 2 s, /api/v1/alerts every second and
/api/v1/rules every 20 s (and, new mode, the localizer's /metrics every 2 s); layout scale: the
same of vmalert instead, and every 10 s each shard's /metrics for its remote write:
  - per rule group: evaluation time (prometheus_rule_group_last_duration_seconds, one value per
    evaluation seen) and iterations missed of those scheduled
    (prometheus_rule_group_iterations_{missed_,}total), after `--warmup` seconds (default 60 +
    the scrape interval: every target's 1-minute windows filled); rule evaluation failures;
    the slowest rules (/api/v1/rules); with vmalert (layout scale):
    vmalert_iteration_duration_seconds{group} is a summary, so one evaluation's time is the
    growth of its _sum over its _count's between two polls, the iterations and misses are
    vmalert_iteration_{,missed_}total, the failures the rules whose
    vmalert_{alerting,recording}_rules_error was 1 at a poll after the warm-up (layout scale's
    warm-up adds 5 s of remote write and the latency offset: default 60 + interval + 5 + 10);
  - per process started (each Prometheus, VictoriaMetrics, vmalert, the generator, the
    localizer): CPU seconds (utime + stime
    of /proc/<pid>/stat) over the measured window (from the end of the warm-up to the end) and
    the cores that is, RSS (peak of VmRSS sampled every 2 s, and VmHWM); each also per 1,000
    hosts; and how busy the whole machine was (/proc/stat), since others may share it;
  - input series: the samples every scrape of job "ibfabric" returns, summed over the targets,
    and each Prometheus's head series at the end (records included); layout scale: each shard's
    targets and samples, VictoriaMetrics' active series and rows written, whether any target
    reached it through two servers, which server scraped the localizer, the remote-write lag
    (newest sample appended minus newest sent), and what the stand-in Alertmanager received;
  - the warning and error lines of every process's log (<workdir>/<name>.log) during the run;
  - seconds from the fault until IbfabricSuspectLink fires for that cable (by node_guid, port,
    remote_node_guid, remote_port), and every other IbfabricSuspect* alert that fired (bystanders);
  - new mode: the localizer's evaluation duration (`<prefix>evaluation_duration_seconds`: a
    gauge, one value per evaluation, or a histogram/summary, mean per poll), its evaluations
    (`<prefix>evaluations_total`: per minute, expected 60 / --evaluation-interval) and failures
    (`<prefix>evaluation_failures_total`), prefix `--localize-metric-prefix`; the slowest
    duration of each of its queries (`<prefix>query_duration_seconds{query}`), its evidence age,
    and its log's `no verdict` lines (the log is <workdir>/localize.log).
Prints one table row per run (and `--json PATH` writes everything). Everything started is ended
by PID (also on Ctrl-C / SIGTERM). Standard library only.

    bench/localize_prometheus.py --hosts 1024 --mode old|new [--rules FILE] [--localize BINARY]
        [--layout single|scale] [--vm-latency-offset S] [--localize-scraped-by one|vm]
        [--scrape-interval 10] [--duration 300] [--fault-after 120] [--warmup 60+interval]
        [--seed 1] [--fault-loss 0.02]
        [--peers 3] [--hosts-per-leaf 32] [--spines 16] [--workdir DIR] [--keep] [--json PATH]
        [--jobs N [--job-size 32] [--jobs-start 120] [--jobs-spread 60] [--pod-pending 10]
         [--plan-interval 30] [--paths-interval 30] [--no-plan] [--coverage-poll 2]]
"""
import argparse
import asyncio
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
JOB = "ibfabric"
DAEMON_PORT = 10916
LOCALIZATION_GROUP = "ibfabric-localization"
SUSPECT_ALERTS = ("IbfabricSuspectLink", "IbfabricSuspectHost", "IbfabricSuspectCongestion")

# The 22 counters of PortCounters / PortCountersExtended (mad/attributes.cpp), as the ports
# collector names them: ibfabric_ports_<name>.
PORT_COUNTERS = [
    "symbol_errors_total", "link_error_recoveries_total", "link_downed_total",
    "receive_errors_total", "receive_remote_physical_errors_total",
    "receive_switch_relay_errors_total", "transmit_discards_total",
    "transmit_constraint_errors_total", "receive_constraint_errors_total",
    "local_link_integrity_errors_total", "excessive_buffer_overrun_errors_total",
    "vl15_dropped_total", "qp1_dropped_total", "transmit_wait_ticks_total",
    "transmit_bytes_total", "receive_bytes_total", "transmit_packets_total",
    "receive_packets_total", "unicast_transmit_packets_total", "unicast_receive_packets_total",
    "multicast_transmit_packets_total", "multicast_receive_packets_total",
]
# Of them, those that advance (traffic): bytes at the host's rate, packets at a 2 KiB average.
PORT_TRAFFIC = {"transmit_bytes_total": 1.0, "receive_bytes_total": 1.0,
                "transmit_packets_total": 1 / 2048, "receive_packets_total": 1 / 2048,
                "unicast_transmit_packets_total": 1 / 2048,
                "unicast_receive_packets_total": 1 / 2048}
SWEEP_COUNTERS = ["symbol_errors_total", "link_error_recoveries_total", "link_downed_total",
                  "receive_errors_total", "transmit_discards_total", "transmit_wait_ticks_total",
                  "transmit_bytes_total", "transmit_switch_hol_lifetime_limit_discards_total"]
LANE_BYTES = 100e9 / 8  # NDR: 100 Gb/s a lane
EFFECTIVE = 4 * LANE_BYTES * 0.97  # four lanes, after FEC (roughly)


# --- The fabric ------------------------------------------------------------------------------

class Fabric:
    """Nodes are ('h', i) hosts (0-based), ('l', l) leaves and ('s', s) spines (1-based)."""

    def __init__(self, hosts, per_leaf, spines, peers, seed):
        self.n, self.hpl, self.spines = hosts, per_leaf, spines
        self.leaves = (hosts + per_leaf - 1) // per_leaf
        rng = random.Random(seed)
        self.peers = []
        for i in range(hosts):
            drawn = rng.sample(range(hosts - 1), min(peers, hosts - 1))
            self.peers.append([j if j < i else j + 1 for j in drawn])
        # Per pair (i, k-th peer): the cable directions its two legs cross.
        self.pair_links = [[self.pair_links_of(i, p) for p in self.peers[i]] for i in range(hosts)]

    def pair_links_of(self, i, j):
        """The cable directions the two legs of the pair (prober i, peer j) cross."""
        return frozenset(self.cable(h)[:5] for leg in self.legs(i, j) for h in leg)

    def guid(self, node):
        kind, n = node
        return 0x0002c90300000000 + {"l": 0xa00000, "s": 0xb00000, "h": 0xc00000}[kind] + n + \
            (1 if kind == "h" else 0)

    def hex(self, node):
        return "0x%016x" % self.guid(node)

    def name(self, node):
        kind, n = node
        if kind == "h":
            return "node-%04d" % (n + 1)
        return ("leaf-%02d" if kind == "l" else "spine-%02d") % n

    def leaf_of(self, i):
        return i // self.hpl + 1

    def host_port(self, i):  # the leaf port host i is cabled to
        return i % self.hpl + 1

    def route(self, src, dst):
        """Hops (from node, from port, to node, to port) of a packet from host src to host dst."""
        ls, ld = self.leaf_of(src), self.leaf_of(dst)
        hops = [(("h", src), 1, ("l", ls), self.host_port(src))]
        if ls != ld:
            spine = dst % self.spines + 1
            hops.append((("l", ls), self.hpl + spine, ("s", spine), ls))
            hops.append((("s", spine), ld, ("l", ld), self.hpl + spine))
        hops.append((("l", ld), self.host_port(dst), ("h", dst), 1))
        return hops

    def legs(self, prober, peer):
        return self.route(prober, peer), self.route(peer, prober)

    def cable(self, hop):
        """As the paths collector names a hop's cable: (a, a port, b, b port, direction); `a` the
        switch end of a host's cable, else the lower (GUID, port)."""
        f, fp, t, tp = hop
        f_switch, t_switch = f[0] != "h", t[0] != "h"
        if f_switch != t_switch:
            from_is_a = f_switch
        else:
            from_is_a = (self.guid(f), fp) < (self.guid(t), tp)
        return (f, fp, t, tp, "a_to_b") if from_is_a else (t, tp, f, fp, "b_to_a")

    def uplink(self, leaf, spine):
        """The leaf -> spine direction of the cable leaf port (hpl + spine) <-> spine port leaf."""
        return self.cable((("l", leaf), self.hpl + spine, ("s", spine), leaf))

    def crossing(self, link):
        return [(i, k) for i in range(self.n) for k, links in enumerate(self.pair_links[i])
                if link in links]

    def draw_fault(self, seed):
        """A leaf -> spine direction, among those at least the median number of pairs cross."""
        counts = {}
        for i in range(self.n):
            for links in self.pair_links[i]:
                for link in links:
                    if link[0][0] == "l" and link[2][0] == "s" and link[4] == "a_to_b":
                        counts[link] = counts.get(link, 0) + 1
        ups = [self.uplink(l, s) for l in range(1, self.leaves + 1)
               for s in range(1, self.spines + 1)]
        median = statistics.median(counts.get(u, 0) for u in ups)
        eligible = [u for u in ups if counts.get(u, 0) >= max(median, 1)]
        return random.Random("fault-%d" % seed).choice(eligible), median

    def link_str(self, link):
        a, ap, b, bp, d = link
        return "%s port %d -> %s port %d" % ((self.name(a), ap, self.name(b), bp) if d == "a_to_b"
                                             else (self.name(b), bp, self.name(a), ap))

    def switches(self):
        return [("l", l) for l in range(1, self.leaves + 1)] + \
            [("s", s) for s in range(1, self.spines + 1)]

    def switch_ports(self, sw):
        """(port, remote node, remote port) of every cabled port of a switch."""
        kind, n = sw
        if kind == "l":
            out = [(self.host_port(i), ("h", i), 1)
                   for i in range((n - 1) * self.hpl, min(n * self.hpl, self.n))]
            out += [(self.hpl + s, ("s", s), n) for s in range(1, self.spines + 1)]
            return out
        return [(l, ("l", l), self.hpl + n) for l in range(1, self.leaves + 1)]


def labels(pairs):
    return "{" + ",".join('%s="%s"' % kv for kv in pairs) + "}"


def peer_label(fabric, j):
    return "%s mlx5_0" % fabric.name(("h", j))


# --- Serving (the child process) -------------------------------------------------------------

class PeerState:
    """One probed pair's counters, as a Peer of the probe collector holds them: a peer dropped
    and added again starts from 0 (a new Peer)."""

    __slots__ = ("start", "phase", "rtt", "lost", "lost_at", "faulty")

    def __init__(self, start, phase, rtt, faulty):
        self.start, self.phase, self.rtt, self.faulty = start, phase, rtt, faulty
        self.lost, self.lost_at = 0, None  # lost_at: when lost was last brought up to date

    def sent_at(self, t):
        return max(0, int(math.floor(t - self.start + self.phase)))


class HostTarget:
    """One host's text: a static part (encoded when the peers or the paths change) and the
    counters that advance. Its peers: the planned ones first (ibfabric-localize's plan), then
    the drawn subset (in the order choose_peers ranks it), `len(drawn)` in all, as
    collectors/probe/probe_run.cpp's update_peers chooses them; its paths: the peers as of the
    paths collector's last run."""

    def __init__(self, fabric, i, rng, sweep, fault_link=None, plan=False):
        f = fabric
        self.fabric, self.i = f, i
        self.base = time.time() - rng.uniform(600, 86400)  # the daemon has run a while
        phases = [rng.random() for _ in f.peers[i]]
        self.rate = rng.uniform(1e8, 5e9)  # bytes a second each way
        self.fault_link = fault_link
        self.drawn = list(f.peers[i])
        self.state = {}
        for k, (j, phase) in enumerate(zip(self.drawn, phases)):
            self.state[j] = PeerState(self.base, phase, rng.uniform(8e-6, 20e-6),
                                      fault_link in f.pair_links[i][k])
        self.peers = list(self.drawn)       # probed now
        self.path_peers = list(self.drawn)  # traced, as of the paths collector's last run
        self.traces = len(self.drawn)       # ibfabric_path_traces_total{cause="new"}
        self.plan_mode, self.plan, self.planned, self.plan_up = plan, [], 0, None
        self.own_rng = random.Random("host-%d" % i)  # new peers' phases and RTTs
        self.probers = 0  # set by the caller: pairs that probe this host
        self.resp_acc, self.resp_since = 0.0, self.base  # the responder's requests counter
        self.fixed = self.build_fixed()
        self.sweep = self.build_sweep() if sweep else (b"", 0)
        self.build()

    def set_probers(self, n, now):
        self.resp_acc += self.probers * (now - self.resp_since)
        self.resp_since, self.probers = now, n

    @staticmethod
    def text(families, order):
        out = []
        for family in order:
            kind, lines = families[family]
            out.append("# TYPE %s %s\n" % (family, kind))
            out.extend(line + "\n" for line in lines)
        return "".join(out), sum(len(families[fam][1]) for fam in order)

    @staticmethod
    def adder():
        order, families = [], {}

        def add(family, kind, line):
            if family not in families:
                families[family] = (kind, [])
                order.append(family)
            families[family][1].append(line)
        return add, families, order

    def build_fixed(self):
        """What never changes: the node, its daemon's health, its port."""
        f, i = self.fabric, self.i
        me, leaf = ("h", i), ("l", f.leaf_of(i))
        add, families, order = self.adder()
        add("ibfabric_probe_node_info", "gauge", "ibfabric_probe_node_info%s 1" % labels(
            [("node_guid", f.hex(me)), ("node_name", f.name(me))]))
        add("ibfabric_probe_responder_dropped_total", "counter",
            'ibfabric_probe_responder_dropped_total{transport="mad"} 0')
        add("ibfabric_event_loop_stall_seconds_total", "counter",
            "ibfabric_event_loop_stall_seconds_total 0")
        add("ibfabric_event_loop_stalls_total", "counter", "ibfabric_event_loop_stalls_total 0")
        add("ibfabric_ports_peer_info", "gauge", "ibfabric_ports_peer_info%s 1" % labels(
            [("device", "mlx5_0"), ("port", 1), ("node_guid", f.hex(me)), ("node_name", f.name(me)),
             ("peer_node_guid", f.hex(leaf)), ("peer_port", f.host_port(i)),
             ("peer_node_type", "switch"), ("peer_node_name", f.name(leaf))]))
        for side in ("local", "peer"):
            sl = [("device", "mlx5_0"), ("port", 1), ("side", side)]
            for name, value in (("state", 4), ("link_width_lanes", 4),
                                ("link_speed_lane_bytes_per_second", LANE_BYTES),
                                ("effective_rate_bytes_per_second", EFFECTIVE)):
                add("ibfabric_ports_" + name, "gauge",
                    "ibfabric_ports_%s%s %.12g" % (name, labels(sl), value))
            add("ibfabric_ports_transmit_wait_tick_bytes", "gauge",
                "ibfabric_ports_transmit_wait_tick_bytes%s 8" % labels(sl + [("per", "port")]))
            for name in PORT_COUNTERS:
                if name not in PORT_TRAFFIC:
                    add("ibfabric_ports_" + name, "counter",
                        "ibfabric_ports_%s%s 0" % (name, labels(sl)))
        text, n = self.text(families, order)
        return text, n

    def build_sweep(self):
        f = self.fabric
        add, families, order = self.adder()
        for sw in f.switches():
            add("ibfabric_fabric_node_transmit_wait_tick_bytes", "gauge",
                "ibfabric_fabric_node_transmit_wait_tick_bytes%s 8" % labels(
                    [("node_guid", f.hex(sw)), ("per", "port")]))
            for port, remote, rport in f.switch_ports(sw):
                b_end = remote[0] != "h" and (f.guid(remote), rport) < (f.guid(sw), port)
                add("ibfabric_fabric_link_info", "gauge", "ibfabric_fabric_link_info%s 1" % labels(
                    [("cable_end", "b" if b_end else "a"), ("node_guid", f.hex(sw)),
                     ("port", port), ("node_name", f.name(sw)),
                     ("remote_node_guid", f.hex(remote)), ("remote_port", rport),
                     ("remote_node_type", "CA" if remote[0] == "h" else "switch"),
                     ("remote_node_name", f.name(remote))]))
                pl = labels([("node_guid", f.hex(sw)), ("port", port)])
                add("ibfabric_fabric_port_effective_rate_bytes_per_second", "gauge",
                    "ibfabric_fabric_port_effective_rate_bytes_per_second%s %.12g" % (pl, EFFECTIVE))
                add("ibfabric_fabric_port_link_width_lanes", "gauge",
                    "ibfabric_fabric_port_link_width_lanes%s 4" % pl)
                for name in SWEEP_COUNTERS:
                    add("ibfabric_fabric_port_" + name, "counter",
                        "ibfabric_fabric_port_%s%s 0" % (name, pl))
        text, n = self.text(families, order)
        return text.encode(), n

    def build(self):
        """The static text of the peers and paths as they are now, and the counters' template."""
        f, i = self.fabric, self.i
        add, families, order = self.adder()
        for j in self.path_peers:
            pl = [("peer", peer_label(f, j)), ("transport", "mad")]
            for leg_name, leg in zip(("to_peer", "from_peer"), f.legs(i, j)):
                for n, hop in enumerate(leg, 1):
                    a, ap, b, bp, d = f.cable(hop)
                    add("ibfabric_path_hop_info", "gauge", "ibfabric_path_hop_info%s 1" % labels(
                        pl + [("leg", leg_name), ("hop", n), ("node_guid", f.hex(a)), ("port", ap),
                              ("node_name", f.name(a)), ("remote_node_guid", f.hex(b)),
                              ("remote_port", bp), ("remote_node_name", f.name(b)),
                              ("direction", d)]))
            add("ibfabric_path_peer_info", "gauge", "ibfabric_path_peer_info%s 1" % labels(
                pl + [("peer_node_guid", f.hex(("h", j))), ("peer_node_name", f.name(("h", j)))]))
        for j in self.peers:
            pl = [("peer", peer_label(f, j)), ("transport", "mad")]
            for name in ("spikes_total", "host_spikes_total"):
                add("ibfabric_probe_" + name, "counter", "ibfabric_probe_%s%s 0" % (name, labels(pl)))
            for reason in ("port_error", "mad_status"):  # the prober's own failures (98f833c)
                add("ibfabric_probe_failed_total", "counter", "ibfabric_probe_failed_total%s 0" % labels(
                    pl + [("reason", reason)]))
            rtt = self.state[j].rtt
            for name, value in (("last_rtt_seconds", rtt), ("last_network_rtt_seconds", rtt * 0.8),
                                ("jitter_seconds", rtt * 0.05), ("baseline_rtt_seconds", rtt)):
                add("ibfabric_probe_" + name, "gauge",
                    "ibfabric_probe_%s%s %.9g" % (name, labels(pl), value))
            for stat, value in (("p50", rtt), ("p99", rtt * 1.5), ("max", rtt * 3)):
                add("ibfabric_probe_rtt_window_seconds", "gauge",
                    "ibfabric_probe_rtt_window_seconds%s %.9g" % (labels(pl + [("stat", stat)]), value))
        add("ibfabric_path_traces_total", "counter",
            'ibfabric_path_traces_total{cause="new"} %d' % self.traces)
        if self.plan_mode:  # as probe_emit.cpp, with plan_url set
            add("ibfabric_probe_plan_peers", "gauge", "ibfabric_probe_plan_peers %d" % self.planned)
            add("ibfabric_probe_plan_up", "gauge", "ibfabric_probe_plan_up %d" % bool(self.plan_up))
        text, n = self.text(families, order)
        self.static = (text + self.fixed[0]).encode() + self.sweep[0]
        self.static_series = n + self.fixed[1] + self.sweep[1]
        # The counters that advance: one %d each, in families of their own.
        dyn = []
        for name in ("sent_total", "received_total", "lost_total"):
            dyn.append("# TYPE ibfabric_probe_%s counter\n" % name)
            for j in self.peers:
                dyn.append("ibfabric_probe_%s%s %%d\n" % (
                    name, labels([("peer", peer_label(f, j)), ("transport", "mad")])))
        dyn.append("# TYPE ibfabric_probe_responder_requests_total counter\n")
        dyn.append('ibfabric_probe_responder_requests_total{transport="mad"} %d\n')
        for name in PORT_TRAFFIC:
            dyn.append("# TYPE ibfabric_ports_%s counter\n" % name)
            for side in ("local", "peer"):
                dyn.append("ibfabric_ports_%s%s %%d\n" % (
                    name, labels([("device", "mlx5_0"), ("port", 1), ("side", side)])))
        self.template = "".join(dyn)
        self.series = self.static_series + sum(1 for line in dyn if not line.startswith("#"))

    def set_plan(self, guids, now, guid_index):
        """As ProbeRun::set_plan and update_peers: the planned peers first (found by node GUID,
        never this node), within max_peers (len(drawn)); then the drawn subset without them.
        Returns (peers dropped, peers added)."""
        self.plan = guids
        max_peers = len(self.drawn)
        planned = []
        for g in guids:
            if len(planned) >= max_peers:
                break
            j = guid_index.get(g)
            if j is None or j == self.i or j in planned:
                continue  # not in the SA's table (or this node): not probed
            planned.append(j)
        rest = [j for j in self.drawn if j not in planned][:max_peers - len(planned)]
        chosen = planned + rest
        self.planned = len(planned)
        gone = [j for j in self.peers if j not in chosen]
        added = [j for j in chosen if j not in self.state]
        for j in gone:
            del self.state[j]
        for j in added:
            self.state[j] = PeerState(now, self.own_rng.random(), self.own_rng.uniform(8e-6, 20e-6),
                                      self.fault_link in self.fabric.pair_links_of(self.i, j))
        self.peers = chosen
        return gone, added

    def paths_run(self):
        """The paths collector's run: the peers probed now traced (cause "new"), the gone ones'
        paths dropped. True when anything changed."""
        if set(self.path_peers) == set(self.peers):
            return False
        self.traces += len(set(self.peers) - set(self.path_peers))
        self.path_peers = list(self.peers)
        return True

    def render(self, now, fault):
        values = []
        states = [self.state[j] for j in self.peers]
        sent = [s.sent_at(now) for s in states]
        self.bring_lost_up_to_date(now, fault, states)
        lost = [s.lost for s in states]
        values += sent
        values += [s - l for s, l in zip(sent, lost)]
        values += lost
        values.append(int(self.resp_acc + self.probers * (now - self.resp_since)))
        up = now - self.base
        for name, per_byte in PORT_TRAFFIC.items():
            values.append(int(self.rate * up * per_byte))
            values.append(int(self.rate * 1.01 * up * per_byte))
        return (self.template % tuple(values)).encode()

    @staticmethod
    def bring_lost_up_to_date(now, fault, states):
        """Draws, for each probe sent since the last scrape on a pair crossing the faulty
        direction, whether it was lost (fault: (link, loss, epoch, rng) or None)."""
        if fault is None or fault[2] is None:
            return
        link, loss, since, rng = fault
        for s in states:
            if not s.faulty:
                continue
            start = since if s.lost_at is None else max(since, s.lost_at)
            if now > start:
                n = s.sent_at(now) - s.sent_at(start)
                s.lost += sum(1 for _ in range(n) if rng.random() < loss)
                s.lost_at = now


# --- Training jobs: kube-state-metrics' pods ---------------------------------------------------

JOB_KINDS = ("kubeflow", "jobset", "volcano", "leaderworkerset", "job")
NAMESPACES = ("team-a", "team-b", "team-c", "team-d")


def job_schedule(hosts, jobs, size, seed, start, spread):
    """The jobs (drawn from the seed, so that a job's hosts span leaves, as a scheduler's would):
    each {namespace, name, kind, hosts (0-based), start (seconds from the run's start: its pods
    Running)}. Hosts are not shared while there are free ones; the kinds and namespaces turn."""
    rng = random.Random("jobs-%d" % seed)
    free, out = [], []
    for k in range(jobs):
        if len(free) < size:
            free = list(range(hosts))
            rng.shuffle(free)
        members, free = sorted(free[:size]), free[size:]
        out.append({"namespace": NAMESPACES[k % len(NAMESPACES)], "name": "train-%02d" % (k + 1),
                    "kind": JOB_KINDS[k % len(JOB_KINDS)], "hosts": members,
                    "start": start + (spread * k / jobs if jobs > 1 else 0.0)})
    return out


class KubeStateMetrics:
    """The pods kube-state-metrics (v2) would serve for the jobs: kube_pod_info (node),
    kube_pod_labels (the allowlisted job labels, docs/alerts-and-dashboards.md's
    --metric-labels-allowlist), kube_pod_owner, kube_pod_status_phase (Pending `pending`
    seconds before the job's start, Running from it); besides, an ibfabricd DaemonSet pod on
    every node (never a job). Text rebuilt only when a pod changes phase."""

    PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")

    def __init__(self, fabric, schedule, pending):
        self.fabric, self.schedule, self.pending = fabric, schedule, pending
        self.epoch = None
        self.cache = (None, b"")

    def pods(self, job):
        """(pod, uid, labels, owner kind, owner name) of each of the job's pods, by host."""
        ns, name, kind = job["namespace"], job["name"], job["kind"]
        out = []
        for n, h in enumerate(job["hosts"]):
            uid = "%08x-0000-4000-8000-%012x" % (zlib.crc32(("%s/%s" % (ns, name)).encode()), h)
            if kind == "kubeflow":  # a PyTorchJob's worker
                pod = "%s-worker-%d" % (name, n)
                lab = [("label_training_kubeflow_org_job_name", name),
                       ("label_training_kubeflow_org_replica_type", "worker")]
                owner = ("PyTorchJob", name)
            elif kind == "jobset":  # a JobSet's replicated Job's pod
                pod = "%s-workers-0-%d-x%04d" % (name, n, h)
                lab = [("label_jobset_sigs_k8s_io_jobset_name", name),
                       ("label_job_name", "%s-workers-0" % name)]
                owner = ("Job", "%s-workers-0" % name)
            elif kind == "volcano":  # a Volcano vcjob's task pod (its owner kind is Job too)
                pod = "%s-worker-%d" % (name, n)
                lab = [("label_volcano_sh_job_name", name)]
                owner = ("Job", name)
            elif kind == "leaderworkerset":  # one group of a LeaderWorkerSet
                pod = "%s-0" % name if n == 0 else "%s-0-%d" % (name, n)
                lab = [("label_leaderworkerset_sigs_k8s_io_name", name)]
                owner = ("StatefulSet", name if n == 0 else "%s-0" % name)
            else:  # an indexed batch Job
                pod = "%s-%d-x%04d" % (name, n, h)
                lab = [("label_job_name", name)]
                owner = ("Job", name)
            out.append((h, pod, uid, lab, owner))
        return out

    def render(self, now):
        if self.epoch is None:
            return b""
        t = now - self.epoch
        # Which jobs' pods are absent, Pending or Running: the text changes only with that.
        key = tuple(0 if t < j["start"] - self.pending else 1 if t < j["start"] else 2
                    for j in self.schedule)
        if self.cache[0] == key:
            return self.cache[1]
        f = self.fabric
        info, lab_lines, owner_lines, phase_lines = [], [], [], []

        def pod(ns, name, uid, node, ip, labs, owner, phase):
            base = [("namespace", ns), ("pod", name), ("uid", uid)]
            info.append("kube_pod_info%s 1" % labels(base + [
                ("host_ip", "10.0.%d.%d" % (ip // 250, ip % 250 + 1)),
                ("pod_ip", "10.128.%d.%d" % (ip // 250, ip % 250 + 1)), ("node", node),
                ("created_by_kind", owner[0]), ("created_by_name", owner[1]),
                ("priority_class", ""), ("host_network", "false")]))
            lab_lines.append("kube_pod_labels%s 1" % labels(base + labs))
            owner_lines.append("kube_pod_owner%s 1" % labels(base + [
                ("owner_kind", owner[0]), ("owner_name", owner[1]),
                ("owner_is_controller", "true")]))
            for p in self.PHASES:
                phase_lines.append("kube_pod_status_phase%s %d" % (
                    labels(base + [("phase", p)]), p == phase))

        for h in range(f.n):
            pod("ibfabric", "ibfabricd-%05x" % h, "ds-%012x" % h, f.name(("h", h)), h,
                [("label_app_kubernetes_io_name", "ibfabricd")], ("DaemonSet", "ibfabricd"),
                "Running")
        for j, state in zip(self.schedule, key):
            if state == 0:
                continue
            for h, name, uid, labs, owner in self.pods(j):
                pod(j["namespace"], name, uid, f.name(("h", h)), h, labs, owner,
                    "Pending" if state == 1 else "Running")
        text = []
        for family, lines in (("kube_pod_info", info), ("kube_pod_labels", lab_lines),
                              ("kube_pod_owner", owner_lines),
                              ("kube_pod_status_phase", phase_lines)):
            text.append("# HELP %s kube-state-metrics, simulated\n# TYPE %s gauge\n" % (family, family))
            text.extend(line + "\n" for line in lines)
        self.cache = (key, "".join(text).encode())
        return self.cache[1]


def daemon_address(i):
    """The source address of host i's simulated daemon: one of its own (127.0.0.0/8 is all
    loopback on Linux), as every real daemon has. From one address, the daemons would share the
    localizer's web limit of 16 connections a client (config/config.h WebLimits), and the
    oldest waiting would be closed unanswered."""
    return "127.2.%d.%d" % (i // 250, i % 250 + 1)


async def http_get_async(host, port, path, timeout, local=None):
    """One GET (HTTP/1.1, Connection: close), from address `local`; (status, body)."""
    async def go():
        reader, writer = await asyncio.open_connection(
            host, port, local_addr=(local, 0) if local else None)
        try:
            writer.write(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (
                path, host, port)).encode())
            await writer.drain()
            data = await reader.read()
        finally:
            writer.close()
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if b"chunked" in head.lower():
            raise ValueError("chunked answer")
        return status, body.decode(errors="replace")
    return await asyncio.wait_for(go(), timeout)


def parse_plan(body):
    """As collectors/probe/probe_plan_client.cpp's parse_plan: the node GUIDs, lines starting
    with '#' comments; None when a line is neither."""
    out = []
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        token = line.split()[0]
        if len(token) != 18 or not token.startswith("0x"):
            return None
        try:
            out.append(int(token, 16))
        except ValueError:
            return None
    return out


def serve(args):
    fabric = Fabric(args.hosts, args.hosts_per_leaf, args.spines, args.peers, args.seed)
    link = fabric.draw_fault(args.seed)[0] if not args.fault_link else parse_link(fabric, args.fault_link)
    rng = random.Random("targets-%d" % args.seed)
    targets, by_index = {}, []
    t0 = time.time()
    planning = args.jobs > 0 and not args.no_plan
    for i in range(fabric.n):
        t = HostTarget(fabric, i, rng, sweep=(i == 0 and not args.no_sweep), fault_link=link,
                       plan=planning)
        targets[fabric.name(("h", i))] = t
        by_index.append(t)
    for i in range(fabric.n):
        for j in fabric.peers[i]:
            by_index[j].probers += 1
    state = {"fault": [link, args.fault_loss, None, random.Random("loss-%d" % args.seed)],
             "scrapes": 0, "plan_url": None}
    series = sum(t.series for t in targets.values())
    schedule = job_schedule(fabric.n, args.jobs, args.job_size, args.seed, args.jobs_start,
                            args.jobs_spread)
    kube = KubeStateMetrics(fabric, schedule, args.pod_pending) if args.jobs else None
    guid_index = {fabric.guid(("h", i)): i for i in range(fabric.n)}
    # Per host: what its simulated daemon did (the harness reads it at /control/stats).
    log = [{"asks": 0, "ask_failures": 0, "first_failure": None, "plans": [], "changes": [],
            "path_runs": []}
           for _ in range(fabric.n)]

    def control():  # "fault EPOCH": when the loss starts; "jobs EPOCH": the run's start;
        for line in sys.stdin:  # "plan URL": the localizer's /probe-plan
            words = line.split()
            if words[:1] == ["fault"]:
                state["fault"][2] = float(words[1])
            elif words[:1] == ["jobs"] and kube:
                kube.epoch = float(words[1])
            elif words[:1] == ["plan"]:
                state["plan_url"] = urllib.parse.urlsplit(words[1])

    threading.Thread(target=control, daemon=True).start()

    def stats():
        return json.dumps({"hosts": [
            {"peers": t.peers, "planned": t.planned, "paths": t.path_peers, "probers": t.probers,
             **log[t.i]} for t in by_index]}).encode()

    by_port = {}  # --serve-per-host: listening port -> its host's target

    async def handle(reader, writer):
        own = by_port.get(writer.get_extra_info("sockname")[1])
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                parts = path.split("/")
                dyn = b""
                if own is not None:
                    target = own if path == "/metrics" else None
                else:
                    target = targets.get(parts[2]) if len(parts) == 4 and parts[1] == "host" else None
                if target is not None:
                    fault = state["fault"]
                    dyn = target.render(time.time(), fault if fault[2] is not None else None)
                    body, status = target.static, b"200 OK"
                    state["scrapes"] += 1
                elif path == "/ksm/metrics" and kube:
                    body, status = kube.render(time.time()), b"200 OK"
                elif path == "/control/stats":
                    body, status = stats(), b"200 OK"
                else:
                    body, status = b"not found\n", b"404 Not Found"
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; version=0.0.4"
                             b"\r\nContent-Length: " + str(len(body) + len(dyn)).encode() +
                             b"\r\n\r\n")
                writer.write(body)
                writer.write(dyn)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    def change_peers(t, guids, now):
        gone, added = t.set_plan(guids, now, guid_index)
        for j in gone:
            by_index[j].set_probers(by_index[j].probers - 1, now)
        for j in added:
            by_index[j].set_probers(by_index[j].probers + 1, now)
        if gone or added:
            log[t.i]["changes"].append([round(now, 3), t.planned, [int(j) for j in added]])
        t.build()

    async def ask(t, sem):
        """One ask of the plan, as ProbeRun::ask_plan: a failing plan keeps the peers it gave
        last (ibfabric_probe_plan_up 0)."""
        url = state["plan_url"]
        async with sem:
            try:
                status, body = await http_get_async(
                    url.hostname, url.port, "%s?node_guid=%s" % (url.path, fabric.hex(("h", t.i))),
                    min(args.plan_interval, 5), daemon_address(t.i))
                plan = parse_plan(body) if status == 200 else None
                error = None if plan is not None else "HTTP %d or a malformed plan" % status
            except (OSError, ValueError, IndexError, asyncio.TimeoutError) as e:
                plan, error = None, "%s: %s" % (type(e).__name__, e)
        now = time.time()
        log[t.i]["asks"] += 1
        was_up = t.plan_up
        t.plan_up = plan is not None
        if plan is None:
            log[t.i]["ask_failures"] += 1
            if log[t.i]["first_failure"] is None:
                log[t.i]["first_failure"] = [round(now, 3), error]
        if plan is not None and plan != t.plan:
            change_peers(t, plan, now)
            log[t.i]["plans"].append([round(now, 3), t.planned])
        elif was_up != t.plan_up:
            t.build()  # ibfabric_probe_plan_up changed

    async def daemons():
        """Each simulated daemon's timers: its plan asked every plan_interval after the last
        answer (from a random phase), its paths traced every paths_interval (random phase)."""
        phase = random.Random("phases-%d" % args.seed)
        next_ask = [None] * fabric.n
        next_paths = [time.time() + phase.uniform(0, args.paths_interval) for _ in range(fabric.n)]
        ask_phase = [phase.uniform(0, args.plan_interval) for _ in range(fabric.n)]
        asking = set()
        sem = asyncio.Semaphore(256)  # file descriptors only: the asks go at their own phases

        def done(task, i):
            asking.discard(i)
            next_ask[i] = time.time() + args.plan_interval

        while True:
            now = time.time()
            for i, t in enumerate(by_index):
                if now >= next_paths[i]:
                    next_paths[i] += args.paths_interval
                    if t.paths_run():
                        log[i]["path_runs"].append(round(now, 3))
                        t.build()
                if not planning or state["plan_url"] is None or i in asking:
                    continue
                if next_ask[i] is None:
                    next_ask[i] = now + ask_phase[i]
                if now >= next_ask[i]:
                    asking.add(i)
                    asyncio.ensure_future(ask(t, sem)).add_done_callback(
                        lambda task, i=i: done(task, i))
            await asyncio.sleep(0.25)

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", args.serve_port, backlog=4096)
        ports, per_host = [], []
        if args.serve_per_host:  # one listening port per host, each its own scrape target
            for i in range(fabric.n):
                per_host.append(await asyncio.start_server(handle, "127.0.0.1", 0, backlog=64))
                ports.append(per_host[-1].sockets[0].getsockname()[1])
                by_port[ports[-1]] = targets[fabric.name(("h", i))]
        print(json.dumps({"ready": True, "series": series, "build_seconds": time.time() - t0,
                          "static_bytes": sum(len(t.static) for t in targets.values()),
                          "ports": ports}),
              flush=True)
        asyncio.ensure_future(daemons())
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def parse_link(fabric, text):
    leaf, spine = text.split(":")
    return fabric.uplink(int(leaf.split("-")[1]), int(spine.split("-")[1]))


# --- The harness -----------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def api(base, path, params=None, timeout=30):
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    return json.loads(http_get(url, timeout))["data"]


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """[(name, {labels}, value)] of a Prometheus text exposition."""
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = LINE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        out.append((m.group(1), dict(LABEL.findall(m.group(3) or "")), value))
    return out


def proc_cpu(pid):
    """User + system CPU seconds of a process (and its threads)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError):
        return None


def proc_status(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def machine_cpu():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v), idle


class Run:
    """Every process started, in order; ended by PID (SIGTERM, then SIGKILL after 20 s), last
    started first. Its log is <workdir>/<name>.log."""

    def __init__(self, args):
        self.args = args
        self.procs = []
        self.closers = []  # in-process servers (the stand-in Alertmanager)
        self.work = args.workdir or tempfile.mkdtemp(prefix="localize-e2e-")
        os.makedirs(self.work, exist_ok=True)

    def start(self, argv, name, **kw):
        log = open(os.path.join(self.work, name + ".log"), "wb")
        p = subprocess.Popen(argv, stdout=kw.pop("stdout", log), stderr=log, **kw)
        self.procs.append((name, p))
        return p

    def close(self):
        # One at a time, last started first: the localizer and vmalert go before the store they
        # query, the shards before the store they write to (no errors logged at the end).
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for close in self.closers:
            close()
        if not self.args.keep and not self.args.workdir:
            shutil.rmtree(self.work, ignore_errors=True)

    def wait_ready(self, p, name, url, seconds=120):
        """Until GET url answers 2xx; fails if the process ends first."""
        deadline = time.time() + seconds
        while True:
            try:
                http_get(url, 2)
                return
            except (OSError, urllib.error.URLError):
                if p.poll() is not None:
                    raise SystemExit("%s exited (%s): see %s/%s.log" % (name, p.returncode,
                                                                        self.work, name))
                if time.time() > deadline:
                    raise SystemExit("%s not ready after %d s: see %s/%s.log" % (
                        name, seconds, self.work, name))
                time.sleep(0.2)


def summary(values):
    if not values:
        return None
    return {"n": len(values), "min": min(values), "median": statistics.median(values),
            "max": max(values)}


def fmt_range(s, unit="s", digits=2):
    if not s:
        return "none seen"
    if s["min"] == s["max"]:
        return "%.*f %s (1 value)" % (digits, s["min"], unit) if s["n"] == 1 else \
            "%.*f %s" % (digits, s["min"], unit)
    return "%.*f-%.*f %s (median %.*f, %d values)" % (digits, s["min"], digits, s["max"], unit,
                                                       digits, s["median"], s["n"])


def duration_arg(seconds):
    """A number of seconds as a Prometheus duration: 10s, 2.5s -> 2500ms."""
    return "%ds" % seconds if seconds == int(seconds) else "%dms" % round(seconds * 1000)


def run(args):
    fabric = Fabric(args.hosts, args.hosts_per_leaf, args.spines, args.peers, args.seed)
    if args.fault_link:
        fault, median = parse_link(fabric, args.fault_link), None
    else:
        fault, median = fabric.draw_fault(args.seed)
    crossing = fabric.crossing(fault)
    a, ap, b, bp, _ = fault
    want = {"node_guid": fabric.hex(a), "port": str(ap), "remote_node_guid": fabric.hex(b),
            "remote_port": str(bp)}
    say("fabric: %d hosts, %d leaves of %d, %d spines, %d peers each (seed %d); fault: %s, %.1f %% "
        "of the packets crossing it lost from %d s on; %d pairs cross it (median over leaf "
        "uplinks: %s)" % (fabric.n, fabric.leaves, fabric.hpl, fabric.spines, args.peers, args.seed,
                          fabric.link_str(fault), args.fault_loss * 100, args.fault_after,
                          len(crossing), median))
    say("layout %s, scrape interval %s, warm-up %.0f s%s" % (
        args.layout, duration_arg(args.scrape_interval), args.warmup,
        ", %d busy processes beside (--hog)" % args.hog if args.hog else ""))
    r = Run(args)
    result = {"command": " ".join(sys.argv),
              "hosts": args.hosts, "layout": args.layout, "mode": args.mode, "seed": args.seed,
              "hog": args.hog,
              "scrape_interval": args.scrape_interval, "warmup": args.warmup,
              "duration": args.duration, "fault_after": args.fault_after,
              "fault": fabric.link_str(fault), "pairs_crossing_fault": len(crossing),
              "rules": os.path.abspath(args.rules), "nproc": os.cpu_count(),
              "loadavg_start": open("/proc/loadavg").read().split()[:3]}
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    try:
        measure(args, fabric, want, r, result)
    finally:
        r.close()
        if args.keep or args.workdir:
            say("kept: %s" % r.work)
    return result


# --- The layouts: what scrapes the targets, evaluates the rules, holds the series -------------

class SingleLayout:
    """One Prometheus scrapes every host (one generator port, the host in the path, relabeled
    to instance node-NNNN:10916), evaluates --rules, and is what the localizer reads."""

    name = "single"
    per_host_ports = False

    def __init__(self, args, r, fabric, loc_port):
        self.args, self.r, self.fabric, self.loc_port = args, r, fabric, loc_port
        self.port = free_port()
        self.store_url = self.rules_url = self.group_metrics_url = \
            "http://127.0.0.1:%d" % self.port
        self.group_metrics_kind = "prometheus"
        self.prometheus = []  # (name, URL) of every Prometheus server

    def start(self, gen_port, ports):
        args, r = self.args, self.r
        interval = duration_arg(args.scrape_interval)
        timeout = duration_arg(min(10, args.scrape_interval))
        scrape = [{
            "job_name": JOB, "scrape_interval": interval, "scrape_timeout": timeout,
            "static_configs": [{"targets": ["%s:%d" % (self.fabric.name(("h", i)), DAEMON_PORT)
                                            for i in range(self.fabric.n)]}],
            "relabel_configs": [
                {"source_labels": ["__address__"], "target_label": "instance"},
                {"source_labels": ["__address__"], "regex": "([^:]+):.*",
                 "target_label": "__metrics_path__", "replacement": "/host/$1/metrics"},
                # The node's name, as the training jobs' pods name it: the shipped shard
                # files' rule (deploy/prometheus/shard-0.yml), the target's host name.
                {"source_labels": ["__address__", "node"], "regex": "([^:;]+)(?::\\d+)?;",
                 "target_label": "node"},
                {"target_label": "__address__", "replacement": "127.0.0.1:%d" % gen_port}],
        }]
        if args.jobs:  # kube-state-metrics, which the group ibfabric-jobs reads
            scrape.append({"job_name": "kube-state-metrics", "scrape_interval": interval,
                           "scrape_timeout": timeout, "metrics_path": "/ksm/metrics",
                           "static_configs": [{"targets": ["127.0.0.1:%d" % gen_port]}]})
        if self.loc_port:
            scrape.append({"job_name": args.localize_job, "scrape_interval": interval,
                           "scrape_timeout": timeout,
                           "static_configs": [{"targets": ["127.0.0.1:%d" % self.loc_port]}]})
        config = {"global": {"scrape_interval": interval, "scrape_timeout": timeout,
                             "evaluation_interval": args.evaluation_interval},
                  "rule_files": [os.path.abspath(args.rules)], "scrape_configs": scrape}
        conf_path = os.path.join(r.work, "prometheus.yml")
        with open(conf_path, "w") as f:
            json.dump(config, f, indent=1)  # YAML is a superset of JSON
        promtool_check(args, conf_path)
        prom = r.start([args.prometheus, "--config.file=" + conf_path,
                        "--storage.tsdb.path=" + os.path.join(r.work, "tsdb"),
                        "--web.listen-address=127.0.0.1:%d" % self.port], "prometheus")
        self.t_start = time.time()
        r.wait_ready(prom, "prometheus", self.store_url + "/-/ready", 60)
        self.procs = {"prometheus": prom}
        self.prometheus = [("prometheus", self.store_url)]

    def poll(self, now, t_start, errors):
        pass

    def final(self, result, errors):
        pass


def promtool_check(args, conf_path):
    check = subprocess.run([args.promtool, "check", "config", conf_path], capture_output=True,
                           text=True)
    if check.returncode:
        raise SystemExit("promtool check config failed:\n" + check.stdout + check.stderr)


class ScaleLayout:
    """docs/scaling.md's layout as shipped (`--deploy`, default this tree's deploy/): two
    Prometheus servers run deploy/prometheus/shard-{0,1}.yml, both reading one file_sd list of
    every host (each host a port of the generator's own, so that `hashmod` of the address splits
    them) and keeping their shard; both remote-write into one VictoriaMetrics run with the flags
    of deploy/victoria-metrics/victoria-metrics.default; vmalert, with the flags of
    deploy/victoria-metrics/vmalert.service, evaluates --rules on VictoriaMetrics, keeps its
    state there and notifies a stand-in Alertmanager of this process; the localizer reads
    VictoriaMetrics. Replaced in those files, each replacement asserted to occur exactly once
    (as tests/integration/test_multi_prometheus.py does): the target file, the remote-write
    address, the scrape interval (and the scrape timeout, when the interval is shorter),
    VictoriaMetrics' listen address and storage path, vmalert's rule file, addresses and listen
    address; added: -search.latencyOffset when --vm-latency-offset is given (VictoriaMetrics'
    default is 30 s), and the localizer's scrape (--localize-scraped-by): the shipped shard files
    have no job for it."""

    name = "scale"
    per_host_ports = True
    SHARDS = 2

    def __init__(self, args, r, fabric, loc_port):
        self.args, self.r, self.fabric, self.loc_port = args, r, fabric, loc_port
        self.vm_port, self.vmalert_port = free_port(), free_port()
        self.shard_ports = [free_port() for _ in range(self.SHARDS)]
        self.store_url = "http://127.0.0.1:%d" % self.vm_port
        self.rules_url = self.group_metrics_url = "http://127.0.0.1:%d" % self.vmalert_port
        self.group_metrics_kind = "vmalert"
        self.prometheus = [("prometheus-shard-%d" % i, "http://127.0.0.1:%d" % p)
                           for i, p in enumerate(self.shard_ports)]
        self.remote_write = {}  # shard -> {"lag_max": s, ...}

    def shard_config(self, i, targets):
        """The shipped shard file with the target file, the remote-write address and the scrape
        interval replaced, and the localizer's target file (--localize-scraped-by one)."""
        args = self.args
        path = os.path.join(args.deploy, "prometheus", "shard-%d.yml" % i)
        with open(path) as f:
            text = f.read()
        interval = duration_arg(args.scrape_interval)
        replace = {"scrape_interval: 15s": "scrape_interval: " + interval,
                   "/etc/prometheus/ibfabric-targets.json": targets,
                   "http://victoria-metrics:8428/api/v1/write": self.store_url + "/api/v1/write"}
        if args.scrape_interval < 10:
            replace["scrape_timeout: 10s"] = "scrape_timeout: " + interval
        if self.loc_port and args.localize_scraped_by == "one":
            # The shipped job ibfabric-localize: one shard scrapes it, as any target.
            localizers = os.path.join(self.r.work, "ibfabric-localize-targets.json")
            with open(localizers, "w") as f:
                json.dump([{"targets": ["127.0.0.1:%d" % self.loc_port]}], f)
            replace["/etc/prometheus/ibfabric-localize-targets.json"] = localizers
            if args.localize_job != "ibfabric-localize":
                replace["job_name: ibfabric-localize "] = "job_name: %s " % args.localize_job
        return substitute(text, replace, path)

    def start(self, gen_port, ports):
        args, r = self.args, self.r
        sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
        from victoriametrics import (FakeAlertmanager, flags_from_default_file,
                                     flags_from_unit, with_flags)
        targets = os.path.join(r.work, "ibfabric-targets.json")
        with open(targets, "w") as f:
            # Targets by address: each its `node` in the target file (as the shard files say).
            json.dump([{"targets": ["127.0.0.1:%d" % p],
                        "labels": {"node": self.fabric.name(("h", i))}}
                       for i, p in enumerate(ports)], f)
        add = []
        vm_replace = {}
        if args.vm_latency_offset is not None:
            vm_replace["search.latencyOffset"] = duration_arg(args.vm_latency_offset)
        if self.loc_port and args.localize_scraped_by == "vm":  # as the test does
            scrape = os.path.join(r.work, "vm-scrape.yml")
            with open(scrape, "w") as f:
                f.write("scrape_configs:\n  - job_name: %s\n    scrape_interval: %s\n"
                        "    static_configs: [{targets: ['127.0.0.1:%d']}]\n" % (
                            args.localize_job, duration_arg(args.scrape_interval), self.loc_port))
            add.append("-promscrape.config=" + scrape)
        vm_flags = flags_from_default_file(os.path.join(args.deploy, "victoria-metrics",
                                                        "victoria-metrics.default"))
        vm_argv = [args.victoria_metrics] + with_flags(vm_flags, dict({
            "httpListenAddr": "127.0.0.1:%d" % self.vm_port,
            "storageDataPath": os.path.join(r.work, "victoria-metrics-data")}, **vm_replace), add)
        vm = r.start(vm_argv, "victoria-metrics")
        r.wait_ready(vm, "victoria-metrics", self.store_url + "/health", 60)
        self.procs = {"victoria-metrics": vm}
        self.commands = {"victoria-metrics": " ".join(vm_argv)}
        shards = []
        for i in range(self.SHARDS):
            name = "prometheus-shard-%d" % i
            conf = os.path.join(r.work, "shard-%d.yml" % i)
            with open(conf, "w") as f:
                f.write(self.shard_config(i, targets))
            promtool_check(args, conf)
            argv = [args.prometheus, "--config.file=" + conf,
                    "--storage.tsdb.path=" + os.path.join(r.work, "tsdb-shard-%d" % i),
                    "--web.listen-address=127.0.0.1:%d" % self.shard_ports[i]]
            shards.append(r.start(argv, name))
            self.procs[name] = shards[-1]
            self.commands[name] = " ".join(argv)
        self.t_start = time.time()
        for (name, url), p in zip(self.prometheus, shards):
            r.wait_ready(p, name, url + "/-/ready", 60)
        self.alertmanager = FakeAlertmanager()
        r.closers.append(self.alertmanager.close)
        unit = flags_from_unit(os.path.join(args.deploy, "victoria-metrics", "vmalert.service"))
        vmalert_argv = [args.vmalert] + with_flags(unit, {
            "rule": os.path.abspath(args.rules),
            "datasource.url": self.store_url,
            "remoteWrite.url": self.store_url,
            "remoteRead.url": self.store_url,
            "notifier.url": self.alertmanager.url(),
            "httpListenAddr": "127.0.0.1:%d" % self.vmalert_port})
        vmalert = r.start(vmalert_argv, "vmalert")
        r.wait_ready(vmalert, "vmalert", self.rules_url + "/health", 60)
        self.procs["vmalert"] = vmalert
        self.commands["vmalert"] = " ".join(vmalert_argv)
        self.next_poll = 0

    def poll(self, now, t_start, errors):
        """Every 10 s, each shard's remote write: how far the newest sample sent trails the
        newest appended (prometheus_remote_storage_highest_timestamp_in_seconds -
        prometheus_remote_storage_queue_highest_sent_timestamp_seconds), failures, retries."""
        if now < self.next_poll:
            return
        self.next_poll = now + 10
        for name, url in self.prometheus:
            try:
                m = {}
                for n, lab, v in parse_metrics(http_get(url + "/metrics", 10).decode()):
                    if n.startswith("prometheus_remote_storage_"):
                        m[n] = m.get(n, 0) + v
            except (OSError, urllib.error.URLError, ValueError) as e:
                errors.append("%s /metrics at %.0f s: %s" % (name, now - t_start, e))
                continue
            rw = self.remote_write.setdefault(name, {"lag_max": 0, "lag_max_warm": 0})
            hi = m.get("prometheus_remote_storage_highest_timestamp_in_seconds")
            sent = m.get("prometheus_remote_storage_queue_highest_sent_timestamp_seconds")
            if hi and sent:
                rw["lag_max"] = max(rw["lag_max"], hi - sent)
                if now >= t_start + self.args.warmup:
                    rw["lag_max_warm"] = max(rw["lag_max_warm"], hi - sent)
            for key in ("samples_failed_total", "samples_retried_total", "samples_dropped_total",
                        "samples_pending", "shards", "samples_total"):
                if "prometheus_remote_storage_" + key in m:
                    rw[key] = m["prometheus_remote_storage_" + key]

    def final(self, result, errors):
        result["layout_commands"] = self.commands
        result["remote_write"] = self.remote_write
        q = lambda base, expr: api(base, "/api/v1/query", {"query": expr})["result"]
        shards = {}
        for name, url in self.prometheus:
            s = shards[name] = {}
            try:
                for key, expr in (("targets", 'count(up{job="%s"})' % JOB),
                                  ("targets_up", 'sum(up{job="%s"})' % JOB),
                                  ("scraped_samples", 'sum(scrape_samples_scraped{job="%s"})' % JOB),
                                  ("localize_up", 'sum(up{job="%s"})' % self.args.localize_job)):
                    v = q(url, expr)
                    s[key] = float(v[0]["value"][1]) if v else None
            except (OSError, urllib.error.URLError, ValueError, KeyError, IndexError) as e:
                errors.append("%s final queries: %s" % (name, e))
        result["shards"] = shards
        vm = result["victoria_metrics"] = {}
        try:
            v = q(self.store_url, 'max(count by (instance) (up{job="%s"}))' % JOB)
            vm["max_servers_per_target"] = float(v[0]["value"][1]) if v else None
            vm["localize_scraped_by"] = sorted(
                x["metric"].get("prometheus", "victoria-metrics itself")
                for x in q(self.store_url, 'up{job="%s"}' % self.args.localize_job))
            for n, lab, val in parse_metrics(http_get(self.store_url + "/metrics", 30).decode()):
                if n == "vm_cache_entries" and lab.get("type") == "storage/hour_metric_ids":
                    vm["active_series"] = val
                elif n == "vm_rows_inserted_total" and lab.get("type") == "promremotewrite":
                    vm["rows_inserted_remote_write"] = val
                elif n in ("vm_slow_queries_total", "vm_slow_row_inserts_total",
                           "vm_rows_ignored_total", "vm_http_request_errors_total"):
                    vm[n] = vm.get(n, 0) + val
        except (OSError, urllib.error.URLError, ValueError, KeyError, IndexError) as e:
            errors.append("victoria-metrics final queries: %s" % e)
        received = {}
        for a in self.alertmanager.received():
            n = a.get("labels", {}).get("alertname")
            received[n] = received.get(n, 0) + 1
        result["alertmanager_received"] = received
        lines = []
        lines.append("shards: %s; VictoriaMetrics: %s active series, %s rows remote-written, "
                     "a target in at most %s server(s); localizer scraped by %s" % (
                         "; ".join("%s %s targets (%s up), %s samples a scrape" % (
                             n, "%.0f" % s["targets"] if s.get("targets") is not None else "?",
                             "%.0f" % s["targets_up"] if s.get("targets_up") is not None else "?",
                             "{:,.0f}".format(s["scraped_samples"]) if s.get("scraped_samples") else "?")
                             for n, s in shards.items()),
                         "{:,.0f}".format(vm["active_series"]) if vm.get("active_series") else "?",
                         "{:,.0f}".format(vm["rows_inserted_remote_write"]) if vm.get("rows_inserted_remote_write") else "?",
                         "%.0f" % vm["max_servers_per_target"] if vm.get("max_servers_per_target") else "?",
                         ", ".join(vm.get("localize_scraped_by") or []) or "nobody"))
        lines.append("remote write, newest sample sent behind newest appended (max over the run, "
                     "after the warm-up): %s; VictoriaMetrics slow queries %s" % (
                         "; ".join("%s %.1f s, %.1f s (failed %.0f, retried %.0f samples)" % (
                             n, w["lag_max"], w["lag_max_warm"], w.get("samples_failed_total", 0),
                             w.get("samples_retried_total", 0)) for n, w in self.remote_write.items()),
                         "%.0f" % vm.get("vm_slow_queries_total", 0)))
        lines.append("stand-in Alertmanager received: %s" % (", ".join(
            "%s x%d" % kv for kv in sorted(received.items())) or "nothing"))
        result["layout_lines"] = lines


def substitute(text, replacements, what):
    """text with every key of replacements replaced by its value; each key must occur exactly
    once, so that the shipped file and the benchmark cannot drift apart silently."""
    for old, new in replacements.items():
        if text.count(old) != 1:
            raise SystemExit("%s: %r occurs %d times, expected once" % (what, old, text.count(old)))
        text = text.replace(old, new)
    return text


LAYOUTS = {"single": SingleLayout, "scale": ScaleLayout}


# --- Measuring --------------------------------------------------------------------------------

class Components:
    """CPU seconds (utime + stime of /proc/<pid>/stat) and memory (VmRSS sampled, VmHWM) of
    every process started, by name; CPU counted from the end of the warm-up (or from the start,
    when the run ends before it)."""

    def __init__(self):
        self.procs = {}
        self.cpu0, self.cpu_warm, self.rss = {}, None, {}
        self.t0 = self.t_warm = None
        self.m0 = self.m_warm = None

    def add(self, name, p):
        self.procs[name] = p
        self.cpu0[name] = proc_cpu(p.pid)
        self.rss[name] = 0

    def begin(self):
        self.t0, self.m0 = time.time(), machine_cpu()

    def warm(self):
        self.cpu_warm = {k: proc_cpu(p.pid) for k, p in self.procs.items()}
        self.t_warm, self.m_warm = time.time(), machine_cpu()

    def sample(self):
        for k, p in self.procs.items():
            v = proc_status(p.pid, "VmRSS")
            if v:
                self.rss[k] = max(self.rss[k], v)

    def check_alive(self, work):
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise SystemExit("%s exited (%s): see %s/%s.log" % (name, p.returncode, work, name))

    def result(self, hosts):
        cpu1 = {k: proc_cpu(p.pid) for k, p in self.procs.items()}
        m1, t1 = machine_cpu(), time.time()
        base, t_base, m_base = (self.cpu_warm, self.t_warm, self.m_warm) if self.cpu_warm else \
            (self.cpu0, self.t0, self.m0)
        span = t1 - t_base
        k = hosts / 1000
        out = {}
        for name, p in self.procs.items():
            c = {"pid": p.pid, "window": span}
            if cpu1[name] is not None and base.get(name) is not None:
                c["cpu_seconds"] = cpu1[name] - base[name]
                c["cores"] = c["cpu_seconds"] / span
                c["cores_per_1k_hosts"] = c["cores"] / k
            c["rss_peak"] = self.rss[name] or None
            c["vmhwm"] = proc_status(p.pid, "VmHWM")
            if c["vmhwm"]:
                c["vmhwm_per_1k_hosts"] = c["vmhwm"] / k
            out[name] = c
        busy = 1 - (m1[1] - m_base[1]) / max(1, m1[0] - m_base[0])
        return out, busy, span


GROUP_COUNTERS = {
    "prometheus": {"iterations": "prometheus_rule_group_iterations_total",
                   "missed": "prometheus_rule_group_iterations_missed_total",
                   "failures": "prometheus_rule_evaluation_failures_total",
                   "interval": "prometheus_rule_group_interval_seconds"},
    "vmalert": {"iterations": "vmalert_iteration_total",
                "missed": "vmalert_iteration_missed_total",
                "interval": "vmalert_iteration_interval_seconds"},
}
VMALERT_RULE_ERRORS = ("vmalert_alerting_rules_error", "vmalert_recording_rules_error")


def poll_groups(kind, text, groups, now, t_warm):
    """Per rule group, from the evaluator's own /metrics: the evaluations seen (start time ->
    seconds) and the counters. Prometheus: each evaluation's start and duration
    (prometheus_rule_group_last_evaluation_timestamp_seconds, _last_duration_seconds). vmalert:
    vmalert_iteration_duration_seconds is a summary, so an evaluation's duration is the growth
    of its _sum over that of its _count between polls (the mean, when two ended between polls);
    its failures are the rules whose vmalert_{alerting,recording}_rules_error was 1 at a poll."""
    cur = {}
    for name, lab, value in parse_metrics(text):
        if kind == "prometheus":
            g = lab.get("rule_group", "").rsplit(";", 1)[-1]
        else:
            g = lab.get("group", "") if name.startswith("vmalert_") and "quantile" not in lab \
                else ""
        if not g:
            continue
        c = cur.setdefault(g, {"_errors": set()})
        if name in VMALERT_RULE_ERRORS:
            if value > 0:
                c["_errors"].add(lab.get("alertname") or lab.get("recording") or lab.get("id"))
        else:
            c[name] = value
    for g, c in cur.items():
        d = groups.setdefault(g, {"durations": {}, "warm": None, "end": None, "errors": set(),
                                  "prev": None})
        if kind == "prometheus":
            ts = c.get("prometheus_rule_group_last_evaluation_timestamp_seconds", 0)
            if ts > 0 and "prometheus_rule_group_last_duration_seconds" in c:
                d["durations"][ts] = c["prometheus_rule_group_last_duration_seconds"]
        else:
            n = c.get("vmalert_iteration_duration_seconds_count")
            s = c.get("vmalert_iteration_duration_seconds_sum")
            if n is not None and s is not None:
                if d["prev"] and n > d["prev"][0]:
                    mean = (s - d["prev"][1]) / (n - d["prev"][0])
                    d["durations"][now - mean] = mean
                d["prev"] = (n, s)
        if now >= t_warm:
            if d["warm"] is None:
                d["warm"] = c
            d["errors"] |= c["_errors"]
        d["end"] = c


def groups_result(kind, groups, t_start, t_warm, hosts):
    names = GROUP_COUNTERS[kind]
    out = {}
    for g, d in groups.items():
        w, e = d.get("warm") or {}, d.get("end") or {}
        delta = lambda key: e.get(names[key], 0) - w.get(names[key], 0) if key in names else None
        # Evaluations that ended after the warm-up (one that started before it counts).
        durations = summary([v for ts, v in d["durations"].items() if ts + v >= t_warm])
        out[g] = {
            "durations": durations,
            "max_per_1k_hosts": durations["max"] / (hosts / 1000) if durations else None,
            "timeline": [[round(ts - t_start, 1), round(v, 3)] for ts, v in sorted(d["durations"].items())],
            "iterations": delta("iterations"), "missed": delta("missed"),
            "failures": delta("failures") if kind == "prometheus" else len(d["errors"]),
            "failing_rules": sorted(d["errors"]),
            "interval": e.get(names["interval"])}
    return out


LOG_TROUBLE = re.compile(r"level=(error|warn)|\t(error|warn|panic|fatal)\t", re.I)


def log_trouble(work, names):
    """Per process, the warning and error lines its log has so far (count, the first few)."""
    out = {}
    for name in names:
        found = {"count": 0, "first": []}
        try:
            with open(os.path.join(work, name + ".log"), errors="replace") as f:
                for line in f:
                    if LOG_TROUBLE.search(line) and 'msg="named"' not in line:  # its verdicts
                        found["count"] += 1
                        if len(found["first"]) < 3:
                            found["first"].append(line.strip()[:400])
        except OSError:
            pass
        out[name] = found
    return out


def localize_log(path):
    """What the localizer's log says: its 'no verdict' lines (count, first reasons) and the
    suspects it named."""
    out = {"no_verdict": 0, "no_verdict_reasons": [], "named": [], "warnings": 0}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if "no verdict" in line:
                    out["no_verdict"] += 1
                    m = re.search(r'reason="([^"]*)"', line)
                    reason = m.group(1) if m else line.strip()
                    if reason not in out["no_verdict_reasons"] and len(out["no_verdict_reasons"]) < 8:
                        out["no_verdict_reasons"].append(reason[:300])
                elif 'msg="named"' in line:
                    m = re.search(r'suspect="([^"]*)"', line)
                    out["named"].append(m.group(1) if m else line.strip())
                if "warn" in line.lower() or "error" in line.lower():
                    out["warnings"] += 1
    except OSError:
        pass
    return out


class Localizer:
    """Polls ibfabric-localize's /metrics: its verdict on the faulty cable, its evaluations,
    their duration, failures, per-query durations and evidence age."""

    def __init__(self, args, port, want):
        self.args, self.port, self.want = args, port, want
        self.pre = args.localize_metric_prefix
        self.evals, self.means = {}, []
        self.snap = self.last = self.names = self.end = None
        self.naming = [(None, False)]  # (seconds after the fault, names the faulty cable) on change
        self.queries = {}  # query -> {"max": run max, "max_warm": after the warm-up, "values": [...]}
        self.ages = []  # (evaluation, age of the newest probe sample)
        self.part_ages = {}  # evidence part -> largest age after the warm-up
        self.plan = [(None, None, None)]  # (time, probe_plan_jobs, probe_plan_hosts) on change

    def poll(self, now, t_warm, fault_epoch):
        pre, want = self.pre, self.want
        ms = parse_metrics(http_get("http://127.0.0.1:%d/metrics" % self.port, 5).decode())
        self.names = sorted({n for n, _, _ in ms})
        # Whether its verdicts name the faulty cable now (ibfabric_localize_suspect).
        names_it = any(n == "ibfabric_localize_suspect" and lab.get("kind") == "cable" and
                       all(lab.get(k) == v for k, v in want.items()) and value > 0
                       for n, lab, value in ms)
        if names_it != self.naming[-1][1]:
            self.naming.append((round(now - fault_epoch, 1), names_it))
        cur, probe_age = {}, None
        for n, lab, value in ms:
            if n == pre + "evidence_age_seconds":
                # One series, or one per part of the evidence (label evidence): the probes' is
                # the newest probe sample's age.
                part = lab.get("evidence")
                if part in (None, "probes"):
                    probe_age = value
                if part and now >= t_warm:
                    self.part_ages[part] = max(self.part_ages.get(part, 0), value)
                continue
            if n == pre + "query_duration_seconds":
                q = self.queries.setdefault(lab.get("query", ""), {"max": 0, "max_warm": 0})
                q["max"] = max(q["max"], value)
                if now >= t_warm:
                    q["max_warm"] = max(q["max_warm"], value)
            if n.startswith(pre) and not lab.get("le") and not lab.get("quantile"):
                cur[n] = cur.get(n, 0) + value
        plan = (cur.get(pre + "probe_plan_jobs"), cur.get(pre + "probe_plan_hosts"))
        if plan != self.plan[-1][1:]:
            self.plan.append((now,) + plan)
        evals = cur.get(pre + "evaluations_total")
        dur = cur.get(pre + "evaluation_duration_seconds")
        if now >= t_warm:
            if dur is not None and evals is not None:
                self.evals[evals] = dur
            if probe_age is not None and evals is not None:
                self.ages.append((evals, probe_age))
            if self.last and pre + "evaluation_duration_seconds_count" in cur:
                dc = cur[pre + "evaluation_duration_seconds_count"] - \
                    self.last.get(pre + "evaluation_duration_seconds_count", 0)
                ds = cur.get(pre + "evaluation_duration_seconds_sum", 0) - \
                    self.last.get(pre + "evaluation_duration_seconds_sum", 0)
                if dc > 0:
                    self.means.append(ds / dc)
            if self.snap is None:
                self.snap = (now, cur)
        self.last = cur
        self.end = (now, cur)

    def result(self, result, hosts, work):
        pre = self.pre
        result["localize_metric_names"] = self.names
        result["localize_naming"] = self.naming[1:]
        result["localize_durations"] = summary(list(self.evals.values())) or summary(self.means)
        if result["localize_durations"]:
            result["localize_duration_max_per_1k_hosts"] = \
                result["localize_durations"]["max"] / (hosts / 1000)
        result["localize_query_durations"] = self.queries
        result["localize_evidence_age"] = summary([v for _, v in dict(self.ages).items()]) \
            if self.ages else None
        result["localize_evidence_part_age_max"] = self.part_ages
        if self.snap and self.end:
            (ta, a), (tb, b) = self.snap, self.end
            ev = b.get(pre + "evaluations_total", 0) - a.get(pre + "evaluations_total", 0)
            result["localize_evaluations"] = ev
            result["localize_per_minute"] = ev / max(1e-9, tb - ta) * 60
            result["localize_failures"] = b.get(pre + "evaluation_failures_total", 0) - \
                a.get(pre + "evaluation_failures_total", 0)
            result["localize_failures_total"] = b.get(pre + "evaluation_failures_total", 0)
            result["localize_window"] = tb - ta
        result["localize_log"] = localize_log(os.path.join(work, "localize.log"))


class JobCoverage:
    """From the first job's pods on, polled every --coverage-poll seconds (each query asked at
    the poll's time): per job, when the store's ibfabric:job_node first lists every one of its
    nodes (kube-state-metrics scraped, the group ibfabric-jobs evaluated), and when every node
    of the job has probe evidence with another of its nodes: increase(ibfabric_probe_sent_total
    [1m]) > 0 on a pair whose prober (its `node` label) and peer are both the job's, each node
    probing or probed by one of its job's. Seconds from the job's start (its pods Running);
    evidence already there at the start (drawn peers that happen to share the job) counts 0."""

    EVIDENCE = 'max by (node, peer) (increase(ibfabric_probe_sent_total{job="%s"}[1m]) > 0)' % JOB
    RECORD = "count by (namespace, job_name) (ibfabric:job_node)"

    def __init__(self, args, fabric, schedule, t_start):
        self.args, self.fabric, self.schedule, self.t_start = args, fabric, schedule, t_start
        self.peer_host = {peer_label(fabric, i): i for i in range(fabric.n)}
        self.node_host = {fabric.name(("h", i)): i for i in range(fabric.n)}
        self.begin = t_start + min(j["start"] for j in schedule) - args.pod_pending - 2
        self.next = self.begin
        self.jobs = [{"covered": None, "record": None, "at_2m": None, "lost_after": None,
                      "nodes_covered_last": 0} for _ in schedule]
        self.polls, self.poll_seconds = 0, []

    def poll(self, now, store, errors):
        if now < self.next:
            return
        self.next = now + self.args.coverage_poll
        at = {"time": "%.3f" % now}
        t0 = time.time()
        try:
            ev = api(store, "/api/v1/query", dict(at, query=self.EVIDENCE), timeout=20)["result"]
            rec = api(store, "/api/v1/query", dict(at, query=self.RECORD), timeout=20)["result"]
        except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
            errors.append("coverage at %.0f s: %s" % (now - self.t_start, e))
            return
        self.polls += 1
        self.poll_seconds.append(time.time() - t0)
        pairs = set()
        for x in ev:
            a = self.node_host.get(x["metric"].get("node"))
            b = self.peer_host.get(x["metric"].get("peer"))
            if a is not None and b is not None:
                pairs.add((a, b))
        nodes_listed = {(x["metric"].get("namespace"), x["metric"].get("job_name")):
                        float(x["value"][1]) for x in rec}
        for job, d in zip(self.schedule, self.jobs):
            start = self.t_start + job["start"]
            if now < start:
                continue
            after = now - start
            if d["record"] is None and nodes_listed.get((job["namespace"], job["name"])) == len(job["hosts"]):
                d["record"] = round(after, 1)
            members = set(job["hosts"])
            covered = set()
            for a, b in pairs:
                if a in members and b in members:
                    covered.add(a)
                    covered.add(b)
            d["nodes_covered_last"] = len(covered)
            if d["at_2m"] is None and after >= 120:
                d["at_2m"] = len(covered)
            if len(covered) == len(members):
                if d["covered"] is None:
                    d["covered"] = round(after, 1)
            elif d["covered"] is not None and d["lost_after"] is None:
                d["lost_after"] = round(after, 1)  # covered, then not any more

    def result(self, result, gen_stats, store, errors):
        out = result["jobs"] = {
            "jobs": len(self.schedule), "job_size": self.args.job_size, "polls": self.polls,
            "poll_seconds": summary(self.poll_seconds),
            "starts": [round(j["start"], 1) for j in self.schedule],
            "leaves_spanned": summary([len({self.fabric.leaf_of(h) for h in j["hosts"]})
                                       for j in self.schedule]),
            "per_job": []}
        # What the shipped rule group made of each job (its kind), and nothing else a job.
        try:
            made = {(x["metric"].get("namespace"), x["metric"].get("job_name")):
                    (x["metric"].get("job_kind"), float(x["value"][1])) for x in api(
                        store, "/api/v1/query",
                        {"query": "count by (namespace, job_name, job_kind) (ibfabric:job_node)"},
                        timeout=30)["result"]}
            want = {(j["namespace"], j["name"]): (j["kind"], float(len(j["hosts"])))
                    for j in self.schedule if self.t_start + j["start"] < time.time()}
            out["rule_jobs"] = len(made)
            out["rule_mismatches"] = sorted("%s/%s: %s, expected %s" % (k + (made.get(k), want.get(k)))
                                            for k in set(made) | set(want) if made.get(k) != want.get(k))
        except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
            errors.append("the rule's jobs: %s" % e)
        hosts_log = (gen_stats or {}).get("hosts") or []
        for job, d in zip(self.schedule, self.jobs):
            start = self.t_start + job["start"]
            applied = []
            for h in job["hosts"]:
                if h >= len(hosts_log):
                    continue
                first = next((c[0] for c in hosts_log[h]["plans"]
                              if c[0] >= start - self.args.pod_pending and c[1] > 0), None)
                applied.append(None if first is None else first - start)
            plan_last = None if not applied or None in applied else round(max(applied), 1)
            out["per_job"].append(dict(d, namespace=job["namespace"], job_name=job["name"],
                                       kind=job["kind"], start=round(job["start"], 1),
                                       hosts_without_plan=sum(1 for a in applied if a is None),
                                       plan_applied_last=plan_last))
        covered = [d["covered"] for d in out["per_job"] if d["covered"] is not None]
        out["covered"] = summary(covered)
        out["covered_count"] = len(covered)
        out["within_2m"] = sum(1 for c in covered if c <= 120)
        out["record"] = summary([d["record"] for d in out["per_job"] if d["record"] is not None])
        out["plan_applied_last"] = summary([d["plan_applied_last"] for d in out["per_job"]
                                            if d["plan_applied_last"] is not None])
        out["lost_coverage"] = sum(1 for d in out["per_job"] if d["lost_after"] is not None)
        if hosts_log:
            out["asks"] = sum(h["asks"] for h in hosts_log)
            out["ask_failures"] = sum(h["ask_failures"] for h in hosts_log)
            out["first_ask_failures"] = sorted({h["first_failure"][1] for h in hosts_log
                                                if h["first_failure"]})[:5]
            out["peers_changes"] = sum(len(h["changes"]) for h in hosts_log)
            out["hosts_planned"] = sum(1 for h in hosts_log if h["planned"] > 0)
            out["generator_peers"] = {"max": max(len(h["peers"]) for h in hosts_log),
                                      "mean": statistics.mean(len(h["peers"]) for h in hosts_log)}
            out["generator_probers"] = {"max": max(h["probers"] for h in hosts_log),
                                        "mean": statistics.mean(h["probers"] for h in hosts_log)}

    def probes_per_host(self, store, at, errors):
        """Peers (probes a second) per host and probers per host, as the store has them at `at`."""
        q = lambda expr: api(store, "/api/v1/query", {"query": expr, "time": "%.3f" % at},
                             timeout=30)["result"]
        n = self.fabric.n
        out = {}
        try:
            for key, expr in (("peers", 'count by (node) (ibfabric_probe_sent_total{job="%s"})' % JOB),
                              ("probers", 'count by (peer) (ibfabric_probe_sent_total{job="%s"})' % JOB),
                              ("probes_per_second", 'sum by (node) (rate(ibfabric_probe_sent_total{job="%s"}[1m]))' % JOB)):
                v = [float(x["value"][1]) for x in q(expr)]
                out[key] = {"max": max(v) if v else 0, "mean": sum(v) / n, "series": len(v)}
            v = q('sum(ibfabric_probe_plan_peers{job="%s"})' % JOB)
            out["planned_peers"] = float(v[0]["value"][1]) if v else None
            v = q('count(ibfabric_probe_plan_up{job="%s"} == 0)' % JOB)
            out["plan_down"] = float(v[0]["value"][1]) if v else 0
        except (OSError, urllib.error.URLError, ValueError, KeyError, IndexError) as e:
            errors.append("probes per host at %.0f s: %s" % (at - self.t_start, e))
        return out


def start_generator(args, r, per_host_ports):
    gen_port = free_port()
    gen = r.start([sys.executable, os.path.abspath(__file__), "--serve", "--serve-port", str(gen_port),
                   "--hosts", str(args.hosts), "--hosts-per-leaf", str(args.hosts_per_leaf),
                   "--spines", str(args.spines), "--peers", str(args.peers), "--seed", str(args.seed),
                   "--fault-loss", str(args.fault_loss)] +
                  (["--fault-link", args.fault_link] if args.fault_link else []) +
                  (["--no-sweep"] if args.no_sweep else []) +
                  (["--jobs", str(args.jobs), "--job-size", str(args.job_size),
                    "--jobs-start", str(args.jobs_start), "--jobs-spread", str(args.jobs_spread),
                    "--pod-pending", str(args.pod_pending),
                    "--plan-interval", str(args.plan_interval)] if args.jobs else []) +
                  ["--paths-interval", str(args.paths_interval)] +
                  (["--no-plan"] if args.no_plan else []) +
                  (["--serve-per-host"] if per_host_ports else []),
                  "generator", stdout=subprocess.PIPE, stdin=subprocess.PIPE)
    ready = json.loads(gen.stdout.readline() or "{}")
    if not ready.get("ready"):
        raise SystemExit("the generator did not start: see %s/generator.log" % r.work)
    say("generator: %d series in %d targets built in %.1f s (%.0f MB of static text)" % (
        ready["series"], args.hosts, ready["build_seconds"], ready["static_bytes"] / 1e6))
    return gen, gen_port, ready


def measure(args, fabric, want, r, result):
    gen, gen_port, ready = start_generator(args, r, LAYOUTS[args.layout].per_host_ports)
    result["served_series"] = ready["series"]
    loc_port = free_port() if args.mode == "new" else None
    layout = LAYOUTS[args.layout](args, r, fabric, loc_port)
    layout.start(gen_port, ready["ports"])
    t_start = layout.t_start
    fault_epoch = t_start + args.fault_after
    gen.stdin.write(("fault %.3f\n" % fault_epoch).encode())
    if args.jobs:
        gen.stdin.write(("jobs %.3f\n" % t_start).encode())
    gen.stdin.flush()
    coverage = None
    if args.jobs:
        schedule = job_schedule(args.hosts, args.jobs, args.job_size, args.seed, args.jobs_start,
                                args.jobs_spread)
        coverage = JobCoverage(args, fabric, schedule, t_start)
        probes_before = None
    comp = Components()
    comp.begin()
    for name, p in layout.procs.items():
        comp.add(name, p)
    comp.add("generator", gen)
    # A starved machine (the store busy with dashboards, compaction, others' queries): busy
    # processes beside everything, from the start to the end.
    for i in range(args.hog):
        r.start([sys.executable, "-c", "while True: pass"], "hog-%d" % i)
    loc = None
    if loc_port:
        argv = [args.localize, "--prometheus.url=" + layout.store_url,
                "--web.listen-address=127.0.0.1:%d" % loc_port,
                "--evaluation-interval=%s" % args.localize_interval] + args.localize_arg
        comp.add("localize", r.start(argv, "localize"))
        result["localize_command"] = " ".join(argv)
        r.wait_ready(comp.procs["localize"], "localize", "http://127.0.0.1:%d/metrics" % loc_port, 30)
        loc = Localizer(args, loc_port, want)
        if args.jobs and not args.no_plan:  # the daemons' collectors.probe.plan_url
            gen.stdin.write(("plan http://127.0.0.1:%d/probe-plan\n" % loc_port).encode())
            gen.stdin.flush()

    groups = {}         # rule group -> {"durations": {eval start: seconds}, "warm": ..., "end": ...}
    rules_slowest = {}  # (group, rule) -> max evaluation seconds seen
    first_fire, others, pending_first = None, {}, None
    seen = {}  # alertname -> {"first", "state", "labelsets"}: every alert, whatever its name
    t_warm = t_start + args.warmup
    next_metrics = next_rules = 0
    errors = []
    end = t_start + args.duration
    while time.time() < end:
        now = time.time()
        comp.check_alive(r.work)
        if comp.cpu_warm is None and now >= t_warm:
            comp.warm()
        try:
            for alert in api(layout.rules_url, "/api/v1/alerts", timeout=5)["alerts"] or []:
                lab = alert["labels"]
                a = seen.setdefault(lab.get("alertname"), {"first": round(now - t_start, 1),
                                                           "state": alert["state"], "sets": set()})
                a["sets"].add(tuple(sorted(lab.items())))
                if alert["state"] == "firing" and a["state"] != "firing":
                    a["state"], a["first_firing"] = "firing", round(now - t_start, 1)
                if lab.get("alertname") not in SUSPECT_ALERTS:
                    continue
                is_fault = lab["alertname"] == "IbfabricSuspectLink" and \
                    all(lab.get(k) == v for k, v in want.items())
                if is_fault:
                    if alert["state"] == "pending" and pending_first is None:
                        pending_first = now
                    if alert["state"] == "firing" and first_fire is None:
                        first_fire = now
                        say("%5.0f s: IbfabricSuspectLink fires for the faulty cable, %.0f s after "
                            "the fault" % (now - t_start, now - fault_epoch))
                else:
                    key = (lab["alertname"], lab.get("node_name"), lab.get("port"),
                           lab.get("remote_node_name"), lab.get("remote_port"))
                    if key not in others:
                        others[key] = {"first": now - t_start, "state": alert["state"]}
                        say("%5.0f s: also %s (%s)" % (now - t_start, lab["alertname"], ", ".join(
                            "%s=%s" % kv for kv in sorted(lab.items()) if kv[0] != "alertname")))
        except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
            errors.append("alerts at %.0f s: %s" % (now - t_start, e))
        if now >= next_metrics:
            next_metrics = now + 2
            try:
                poll_groups(layout.group_metrics_kind,
                            http_get(layout.group_metrics_url + "/metrics", 10).decode(),
                            groups, now, t_warm)
            except (OSError, urllib.error.URLError, ValueError) as e:
                errors.append("%s /metrics at %.0f s: %s" % (layout.group_metrics_kind,
                                                             now - t_start, e))
            comp.sample()
            layout.poll(now, t_start, errors)
            if loc:
                try:
                    loc.poll(now, t_warm, fault_epoch)
                except (OSError, urllib.error.URLError, ValueError) as e:
                    errors.append("localize /metrics at %.0f s: %s" % (now - t_start, e))
        if coverage:
            if probes_before is None and now >= coverage.begin:
                probes_before = coverage.probes_per_host(layout.store_url, now, errors)
            coverage.poll(now, layout.store_url, errors)
        if now >= next_rules and now >= t_warm:
            next_rules = now + 20
            try:
                for grp in api(layout.rules_url, "/api/v1/rules", timeout=20)["groups"]:
                    for rule in grp["rules"]:
                        key = (grp["name"], rule.get("name"))
                        rules_slowest[key] = max(rules_slowest.get(key, 0),
                                                 rule.get("evaluationTime", 0))
            except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
                errors.append("rules at %.0f s: %s" % (now - t_start, e))
        time.sleep(max(0.0, 1 - (time.time() - now)))

    t_end = time.time()
    result["components"], result["machine_busy_share"], result["measured_window"] = \
        comp.result(args.hosts)
    result["cpu_cores"] = {k: c["cores"] for k, c in result["components"].items() if "cores" in c}
    result["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    try:
        q = lambda expr: api(layout.store_url, "/api/v1/query", {"query": expr})["result"]
        result["scraped_samples"] = float(q('sum(scrape_samples_scraped{job="%s"})' % JOB)[0]["value"][1])
        result["targets_up"] = float(q('sum(up{job="%s"})' % JOB)[0]["value"][1])
        result["targets_down"] = sorted(x["metric"]["instance"] for x in q('up{job="%s"} == 0' % JOB))
        result["scrape_duration_max"] = float(q('max(max_over_time(scrape_duration_seconds{job="%s"}[2m]))' % JOB)[0]["value"][1])
    except (OSError, urllib.error.URLError, ValueError, KeyError, IndexError) as e:
        errors.append("final queries: %s" % e)
    # Each Prometheus server's own: the scrape interval it kept, its head series.
    result["prometheus"] = {}
    for name, url in layout.prometheus:
        pr = result["prometheus"][name] = {}
        try:
            for n, lab, v in parse_metrics(http_get(url + "/metrics", 60).decode()):
                if n == "prometheus_tsdb_head_series":
                    pr["head_series"] = v
                elif n == "prometheus_target_interval_length_seconds" and \
                        lab.get("quantile") == "0.99" and \
                        lab.get("interval") == duration_arg(args.scrape_interval):
                    pr["scrape_interval_p99"] = v
        except (OSError, urllib.error.URLError, ValueError) as e:
            errors.append("%s final queries: %s" % (name, e))
    if coverage:
        try:
            gen_stats = json.loads(http_get("http://127.0.0.1:%d/control/stats" % gen_port, 30))
        except (OSError, urllib.error.URLError, ValueError) as e:
            gen_stats = None
            errors.append("generator stats: %s" % e)
        coverage.result(result, gen_stats, layout.store_url, errors)
        result["jobs"]["probes_before"] = probes_before
        result["jobs"]["probes_after"] = coverage.probes_per_host(layout.store_url, t_end, errors)
        result["jobs"]["plan_asked"] = bool(loc) and not args.no_plan
    layout.final(result, errors)
    first = layout.prometheus[0][0] if layout.prometheus else None
    if args.layout == "single":  # the keys of the earlier runs' JSON
        result["prometheus_rss_peak"] = result["components"]["prometheus"]["rss_peak"]
        result["prometheus_vmhwm"] = result["components"]["prometheus"]["vmhwm"]
        result["head_series"] = result["prometheus"][first].get("head_series")
        result["scrape_interval_p99"] = result["prometheus"][first].get("scrape_interval_p99")
    result["groups"] = groups_result(layout.group_metrics_kind, groups, t_start, t_warm,
                                     args.hosts)
    result["slowest_rules"] = sorted(([g, n, v] for (g, n), v in rules_slowest.items()),
                                     key=lambda x: -x[2])[:8]
    result["fault_named_after"] = None if first_fire is None else first_fire - fault_epoch
    result["fault_pending_after"] = None if pending_first is None else pending_first - fault_epoch
    result["fault_window"] = t_end - fault_epoch
    result["alerts_seen"] = {n: {"first": a["first"], "state": a["state"],
                                 "first_firing": a.get("first_firing", a["first"] if a["state"] == "firing" else None),
                                 "series": len(a["sets"])} for n, a in seen.items()}
    result["other_suspects"] = [{"alert": k[0], "node": k[1], "port": k[2], "remote": k[3],
                                 "remote_port": k[4], **v} for k, v in others.items()]
    if loc:
        loc.result(result, args.hosts, r.work)
        result["localize_plan"] = [[round(t - t_start, 1), j, h] for t, j, h in loc.plan[1:]]
    result["log_trouble"] = log_trouble(r.work, list(comp.procs))  # before anything is stopped
    result["errors"] = errors[:20]
    result["workdir"] = r.work


def say(text):
    print(text, file=sys.stderr, flush=True)


def mb(v):
    return "%.0f MB" % (v / 1e6) if v else "?"


def report(res, args):
    g = res["groups"]
    loc_g = g.get(LOCALIZATION_GROUP)
    k = res["hosts"] / 1000
    lines = ["", "command: " + res["command"]]
    named = res["fault_named_after"]
    named_s = "%.0f s" % named if named is not None else \
        "not within the run (%.0f s after the fault)" % res["fault_window"]
    comps = res["components"]
    evaluator = "Prometheus" if res["layout"] == "single" else "vmalert"
    header = ("| hosts | layout | mode | scrape | input series (scraped) | `ibfabric-localization` "
              "evaluation (%s) | iterations missed | all rule groups: missed | RSS peak | "
              "cable named after the fault |" % evaluator)
    all_missed = "%d of %d" % (sum(d["missed"] for d in g.values()),
                               sum(d["iterations"] for d in g.values()))
    if loc_g:
        group_s = fmt_range(loc_g["durations"]) if loc_g["timeline"] else \
            "first evaluation not finished after %.0f s" % args.duration
        missed_s = "%d of %d" % (loc_g["missed"], loc_g["iterations"])
    else:
        group_s, missed_s = "no such group", "-"
    rss_s = " / ".join("%s %s" % (n, mb(c.get("rss_peak"))) for n, c in comps.items()
                       if n not in ("generator", "localize"))
    row = "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        "{:,}".format(res["hosts"]), res["layout"], res["mode"],
        duration_arg(res["scrape_interval"]),
        "{:,.0f}".format(res.get("scraped_samples") or 0), group_s, missed_s, all_missed,
        rss_s, named_s)
    if res["mode"] == "new":
        header += " localizer evaluation | evaluations a minute | failures |"
        row += " %s | %s | %s |" % (fmt_range(res.get("localize_durations")),
                                    "%.1f" % res["localize_per_minute"] if res.get("localize_per_minute") is not None else "?",
                                    "%.0f" % res["localize_failures"] if res.get("localize_failures") is not None else "?")
    lines += [header, "|" + "---|" * (header.count("|") - 1), row, ""]
    lines.append("per component over the %.0f s after the warm-up (CPU: utime+stime of "
                 "/proc/<pid>/stat; RSS: VmRSS sampled every 2 s, VmHWM at the end; per 1,000 "
                 "hosts: divided by %.3g):" % (res["measured_window"], k))
    lines.append("  %-20s %9s %7s %13s %10s %10s %15s" % (
        "component", "CPU s", "cores", "cores/1k", "RSS peak", "VmHWM", "VmHWM/1k"))
    for n, c in comps.items():
        lines.append("  %-20s %9s %7s %13s %10s %10s %15s" % (
            n, "%.1f" % c["cpu_seconds"] if "cpu_seconds" in c else "?",
            "%.3f" % c["cores"] if "cores" in c else "?",
            "%.4f" % c["cores_per_1k_hosts"] if "cores_per_1k_hosts" in c else "?",
            mb(c.get("rss_peak")), mb(c.get("vmhwm")), mb(c.get("vmhwm_per_1k_hosts"))))
    lines.append("every rule group (%s) after the %d s warm-up (time of the evaluations that "
                 "ended after it, and per 1,000 hosts the slowest; iterations missed of "
                 "scheduled; failures%s):" % (
                     evaluator, args.warmup,
                     "" if res["layout"] == "single" else ": rules seen in error"))
    for n, d in sorted(g.items()):
        lines.append("  %-24s %s%s; %d of %d missed; %d failed; %d evaluations ended in the %.0f s "
                     "(%.0f due)" % (
            n, fmt_range(d["durations"]) if d["timeline"] else "no evaluation finished",
            " (max %.3f s/1k hosts)" % (d["durations"]["max"] / k) if d["durations"] else "",
            d["missed"], d["iterations"], d["failures"], (d["durations"] or {}).get("n", 0),
            args.duration - args.warmup, (args.duration - args.warmup) / (d["interval"] or 10)))
    lines.append("  (a missed iteration is counted when the next one starts: one still running at "
                 "the end has not added its own)")
    lines.append("slowest rules (largest evaluationTime seen): " + "; ".join(
        "%s %.2f s" % (n, v) for _, n, v in res["slowest_rules"][:5]))
    lines.append("every alert pending or firing during the run (first seen, s from the start; "
                 "label sets): %s" % (", ".join(
                     "%s %s at %.0f s (%d)" % (n, a["state"], a["first_firing"] if a["state"] == "firing"
                                               else a["first"], a["series"])
                     for n, a in sorted(res.get("alerts_seen", {}).items())) or "none"))
    lines.append("fault: %s (%d pairs cross it)%s; other IbfabricSuspect* alerts: %s" % (
        res["fault"], res["pairs_crossing_fault"],
        "; pending after %.0f s" % res["fault_pending_after"] if res["fault_pending_after"] is not None else "",
        ", ".join("%s %s%s at %.0f s" % (o["alert"], o["node"], " port %s <-> %s port %s" % (
            o["port"], o["remote"], o["remote_port"]) if o["remote"] else "", o["first"])
            for o in res["other_suspects"]) or "none"))
    heads = ", ".join("%s %s" % (n, "{:,.0f}".format(p["head_series"]) if p.get("head_series") else "?")
                      for n, p in res["prometheus"].items())
    ivs = ", ".join("%s %s" % (n, "%.2f s" % p["scrape_interval_p99"] if p.get("scrape_interval_p99") else "?")
                    for n, p in res["prometheus"].items())
    lines.append("served series %s, head series at the end: %s (records included), targets up %s, "
                 "slowest scrape %.2f s, scrape interval p99: %s" % (
                     "{:,}".format(res["served_series"]), heads,
                     "%.0f%s" % (res.get("targets_up", 0), " (down: %s)" % ", ".join(
                         res["targets_down"][:5]) if res.get("targets_down") else ""),
                     res.get("scrape_duration_max") or 0, ivs))
    for line in res.get("layout_lines", []):
        lines.append(line)
    lines.append("machine (%d cores, shared): %.0f %% busy after the warm-up; load average %s -> %s" % (
        res["nproc"], 100 * res["machine_busy_share"],
        "/".join(res["loadavg_start"]), "/".join(res["loadavg_end"])))
    if res["mode"] == "new":
        lines.append("localizer: %s; its metrics: %s" % (res.get("localize_command"),
                                                         ", ".join(res.get("localize_metric_names") or [])))
        lines.append("its verdict on the faulty cable (ibfabric_localize_suspect, polled every 2 s; "
                     "seconds after the fault): %s" % ("; ".join(
                         "%s at %.0f s" % ("named" if on else "not named", t)
                         for t, on in res.get("localize_naming") or []) or "never named"))
        lines.append("its queries, slowest single duration over the run (after the warm-up): %s" % (
            ", ".join("%s %.2f s (%.2f s)" % (q, v["max"], v["max_warm"]) for q, v in
                      sorted((res.get("localize_query_durations") or {}).items())) or "none"))
        log = res.get("localize_log") or {}
        lines.append("its evidence age after the warm-up: %s; failed evaluations in all: %s; its "
                     "log: %d 'no verdict' line(s)%s; named: %s" % (
                         fmt_range(res.get("localize_evidence_age"), digits=1) + (
                             " (largest of each part: %s)" % ", ".join(
                                 "%s %.0f s" % kv for kv in sorted(res["localize_evidence_part_age_max"].items()))
                             if res.get("localize_evidence_part_age_max") else ""),
                         "%.0f" % res["localize_failures_total"] if res.get("localize_failures_total") is not None else "?",
                         log.get("no_verdict", 0),
                         " (%s)" % "; ".join(log["no_verdict_reasons"]) if log.get("no_verdict_reasons") else "",
                         ", ".join(log.get("named") or []) or "nothing"))
    if res.get("jobs"):
        lines += jobs_report(res, args)
    if loc_g:
        lines.append("%s evaluations (start s: seconds): %s" % (LOCALIZATION_GROUP, ", ".join(
            "%.0f: %.1f" % tuple(x) for x in loc_g["timeline"])))
    trouble = {n: t for n, t in (res.get("log_trouble") or {}).items() if t["count"]}
    lines.append("warnings and errors in the logs during the run: %s" % (", ".join(
        "%s %d" % (n, t["count"]) for n, t in trouble.items()) or "none"))
    for n, t in trouble.items():
        lines.append("  %s, first: %s" % (n, t["first"][0][:300]))
    if res["errors"]:
        lines.append("poll errors: " + "; ".join(res["errors"][:5]))
    print("\n".join(lines), flush=True)


def jobs_report(res, args):
    j = res["jobs"]
    lines = []
    per = j["per_job"]
    starts = j["starts"]
    lines.append("jobs: %d of %d nodes (hosts drawn from the seed: %s leaves a job), pods Running "
                 "from %.0f-%.0f s (Pending %.0f s before), kinds %s; the daemons %s" % (
                     j["jobs"], j["job_size"], fmt_range(j["leaves_spanned"], "", 0).replace("  ", " "),
                     min(starts), max(starts), args.pod_pending,
                     ", ".join(sorted({d["kind"] for d in per})),
                     "ask the localizer's plan every %.0f s (random phase), paths traced every "
                     "%.0f s" % (args.plan_interval, args.paths_interval) if j["plan_asked"]
                     else "ask no plan (--no-plan or mode old)"))
    lines.append("EVERY NODE OF A JOB WITH PROBE EVIDENCE AMONG ITS JOB'S (s from the job's "
                 "start; polled every %.0f s): %s; %d of %d jobs covered, %d within 2 minutes; "
                 "covered then not: %d" % (
                     args.coverage_poll, fmt_range(j["covered"], digits=1), j["covered_count"],
                     j["jobs"], j["within_2m"], j["lost_coverage"]))
    uncovered = [d for d in per if d["covered"] is None]
    if uncovered:
        lines.append("  not covered: %s" % "; ".join(
            "%s/%s %d of %d nodes at the end%s" % (
                d["namespace"], d["job_name"], d["nodes_covered_last"], j["job_size"],
                ", %d at 2 min" % d["at_2m"] if d["at_2m"] is not None else "")
            for d in uncovered[:8]))
    lines.append("  stages, max over the jobs (s from the start): ibfabric:job_node lists every "
                 "node %s; the last host's plan applied %s (hosts with none: %d)" % (
                     fmt_range(j["record"], digits=1), fmt_range(j["plan_applied_last"], digits=1),
                     sum(d["hosts_without_plan"] for d in per)))
    if "rule_jobs" in j:
        lines.append("  the shipped group ibfabric-jobs at the end: %d jobs in ibfabric:job_node; "
                     "not as started (namespace/job: made, expected (kind, nodes)): %s" % (
                         j["rule_jobs"], "; ".join(j["rule_mismatches"]) or "none"))
    lines.append("  per job (start s: covered after s): %s" % ", ".join(
        "%.0f: %s" % (d["start"], "%.0f" % d["covered"] if d["covered"] is not None else "never")
        for d in per))

    def pph(x):
        if not x:
            return "?"
        return ("peers a host max %.0f mean %.2f (%.0f hosts), probes a second max %.2f mean "
                "%.2f, probed by max %.0f mean %.2f%s" % (
                    x["peers"]["max"], x["peers"]["mean"], x["peers"]["series"],
                    x["probes_per_second"]["max"], x["probes_per_second"]["mean"],
                    x["probers"]["max"], x["probers"]["mean"],
                    ", planned peers %.0f, plan down on %.0f" % (x["planned_peers"], x["plan_down"])
                    if x.get("planned_peers") is not None else ""))
    lines.append("probes per host (the store's ibfabric_probe_sent_total): before the jobs %s; "
                 "at the end %s" % (pph(j.get("probes_before")), pph(j.get("probes_after"))))
    if "asks" in j:
        lines.append("the simulated daemons: %d asks of the plan, %d failed%s; %d peer changes, "
                     "%d hosts with a planned peer at the end; at the end peers a host max %d "
                     "mean %.2f, probed by max %d mean %.2f" % (
                         j["asks"], j["ask_failures"],
                         " (%s)" % "; ".join(j["first_ask_failures"]) if j["first_ask_failures"] else "",
                         j["peers_changes"], j["hosts_planned"], j["generator_peers"]["max"],
                         j["generator_peers"]["mean"], j["generator_probers"]["max"],
                         j["generator_probers"]["mean"]))
    if res.get("localize_plan") is not None:
        lines.append("localizer's plan (ibfabric_localize_probe_plan_jobs/_hosts on change, s "
                     "from the start): %s" % (", ".join(
                         "%.0f s %s/%s" % (t, "?" if a is None else "%.0f" % a,
                                          "?" if b is None else "%.0f" % b)
                         for t, a, b in res["localize_plan"]) or "never seen"))
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=1024)
    p.add_argument("--layout", choices=sorted(LAYOUTS), default="single")
    p.add_argument("--mode", choices=("old", "new"), default="old")
    p.add_argument("--rules", default=os.path.join(REPO, "dashboards", "alerts", "ibfabric.rules.yml"))
    p.add_argument("--localize", help="the ibfabric-localize binary (mode new)")
    p.add_argument("--localize-arg", action="append", default=[],
                   help="one more argument for ibfabric-localize (repeatable)")
    p.add_argument("--localize-interval", default="10s")
    p.add_argument("--localize-job", default="ibfabric-localize")
    p.add_argument("--localize-metric-prefix", default="ibfabric_localize_")
    p.add_argument("--scrape-interval", type=float, default=10,
                   help="seconds between scrapes of every target (scrape timeout: the same, at "
                        "most 10 s)")
    p.add_argument("--duration", type=float, default=300, help="seconds from Prometheus's start")
    p.add_argument("--fault-after", type=float, default=120)
    p.add_argument("--warmup", type=float,
                   help="seconds before the evaluation times, misses and CPU count (default: 60 "
                        "+ the scrape interval, when every target's 1-minute windows hold a "
                        "minute)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--peers", type=int, default=3)
    p.add_argument("--hosts-per-leaf", type=int, default=32)
    p.add_argument("--spines", type=int, default=16)
    p.add_argument("--fault-loss", type=float, default=0.02)
    p.add_argument("--fault-link", help="leaf-NN:spine-MM (default: drawn from the seed)")
    p.add_argument("--no-sweep", action="store_true", help="no switch port series on node-0001")
    p.add_argument("--evaluation-interval", default="10s",
                   help="Prometheus's global evaluation_interval (the localization group sets 10s)")
    p.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    p.add_argument("--victoria-metrics", default=shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics")
    p.add_argument("--vmalert", default=shutil.which("vmalert") or "/usr/bin/vmalert")
    p.add_argument("--deploy", default=os.path.join(REPO, "deploy"),
                   help="layout scale: the shipped deploy/ files to run")
    p.add_argument("--vm-latency-offset", type=float,
                   help="layout scale: VictoriaMetrics' -search.latencyOffset in seconds (default: "
                        "not given, as shipped: VictoriaMetrics' own 30 s)")
    p.add_argument("--localize-scraped-by", choices=("one", "vm"), default="one",
                   help="layout scale, mode new: the shard whose hashmod keeps its address (the "
                        "shipped job ibfabric-localize), or VictoriaMetrics itself")
    p.add_argument("--jobs", type=int, default=0,
                   help="training jobs that start (kube-state-metrics' pods; 0: none)")
    p.add_argument("--job-size", type=int, default=32, help="nodes of each job")
    p.add_argument("--jobs-start", type=float, default=120,
                   help="seconds from the start when the first job's pods are Running")
    p.add_argument("--jobs-spread", type=float, default=60,
                   help="the jobs' starts spread evenly over this many seconds")
    p.add_argument("--pod-pending", type=float, default=10,
                   help="seconds a job's pods are Pending (scheduled) before Running")
    p.add_argument("--plan-interval", type=float, default=30,
                   help="the daemons' collectors.probe.plan_interval")
    p.add_argument("--paths-interval", type=float, default=30,
                   help="the daemons' paths collector interval (new peers traced at its run)")
    p.add_argument("--no-plan", action="store_true",
                   help="the daemons ask no plan (no plan_url): the coverage without it")
    p.add_argument("--coverage-poll", type=float, default=2,
                   help="seconds between the polls of the jobs' probe evidence")
    p.add_argument("--hog", type=int, default=0,
                   help="busy processes run beside everything (a starved store): 0 by default")
    p.add_argument("--promtool", default=shutil.which("promtool") or "/usr/bin/promtool")
    p.add_argument("--workdir", help="keep everything here (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--serve-port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--serve-per-host", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
        except (ValueError, OSError):
            pass
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        serve(args)
        return 0
    if args.mode == "new" and not args.localize:
        p.error("--mode new needs --localize BINARY")
    if args.scrape_interval < 1:
        p.error("--scrape-interval: at least 1 s")
    if args.jobs and args.layout != "single":
        p.error("--jobs: layout single only (kube-state-metrics is scraped by its Prometheus)")
    if args.jobs and (args.job_size < 2 or args.job_size > args.hosts):
        p.error("--job-size: 2 .. --hosts")
    if args.warmup is None:
        args.warmup = 60 + args.scrape_interval
        if args.layout == "scale":  # and until the store shows it: remote write, query offset
            args.warmup += 5 + (10 if args.vm_latency_offset is None else args.vm_latency_offset)
    if args.fault_after < args.warmup:
        say("note: the fault (--fault-after %.0f) starts before the warm-up ends (%.0f s)" % (
            args.fault_after, args.warmup))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    # Ctrl-C ends everything started, even when started in the background (which ignores SIGINT).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        res = run(args)
    except KeyboardInterrupt:
        say("interrupted: everything started is ended")
        return 130
    report(res, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
