"""The whole chain, as users run it, counted in notifications: the demo's simulated fabric
(config/demo/fabric.topo, its node-name-map, opensm on sm-node), ibfabricd on its four nodes as
scripts/demo.sh runs them (gpu-node-01 also sweeps the fabric; all four probe the GPU nodes over
MAD, the three GPU nodes answer), Debian's `prometheus` with the shipped rules and the shipped,
empty maintenance rules file, ibfabric-localize, and a real Alertmanager running the shipped
deploy/alertmanager/alertmanager.yml, its pager, chat and heartbeat receivers pointed at a
webhook of the test's own (tests/lib/alertmanager.py).

Time is shortened (the rules' windows and `for:` divided by 20, the localizer every 2 s over
15 s, Alertmanager's group_wait divided by 6 and group_interval 2 s: see GROUP_WAIT): the
expressions, thresholds, routing, grouping and inhibition are the shipped ones.

The faults of the README's list (every command there appears verbatim in README.md, checked
here), one after the other on a quiet fabric: here 2 % loss into a host and a stalled host;
test_alert_chain_links.py a host's cable and an uplink down, and symbol errors on the uplink;
test_alert_chain_counters.py a congested port and a stuck receiver;
test_alert_chain_switches.py a spine and a leaf switch going away;
test_alert_chain_maintenance.py a leaf going away inside a maintenance window declared with
scripts/ibfabric-maintenance, and a host going away (its daemon killed, its cable unlinked).
Each file has a fabric of its own, so that they run side by side. For each fault:
- while the fault lasts: exactly the notification groups the README says, at its receiver
  (pager or chat), each carrying the culprit's alert only; for maintenance none, while
  Prometheus fires IbfabricSwitchDown and Alertmanager holds it back;
- when it is undone: each of those groups gets its resolved notification;
- nothing else is notified from the injection until the fabric is quiet again.
No fixed sleeps: each step waits for what it needs (a notification, the alerts' state in
Prometheus and Alertmanager); "nothing else" is judged once the fabric is quiet, and a fault is
held for HOLD_HEARTBEATS of the Watchdog's heartbeats (every 2 s here) after its notification,
so that a symptom slower than the culprit has its turn to be notified.

Skipped when IBFABRIC_SANITIZED=1: it tests the shipped rules and routing; the daemons' and the
localizer's parts run under the sanitizers in their own tests.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from alertmanager import Alertmanager, WebhookReceiver, config_for_test
from ibfabric_testlib import free_port, require_tools, source_dir
from promserver import Localizer, PromServer
from shipped import shortened_rules
from simfabric import SIM_TOOLS, SimFabric

TOPOLOGY = os.path.join(source_dir(), "config", "demo", "fabric.topo")
NAME_MAP = os.path.join(source_dir(), "config", "demo", "ib-node-name-map")
MAINTENANCE_RULES = os.path.join(source_dir(), "deploy", "maintenance",
                                 "ibfabric-maintenance.rules.yml")
MAINTENANCE_TOOL = os.path.join(source_dir(), "scripts", "ibfabric-maintenance")
README = os.path.join(source_dir(), "README.md")
NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "sm-node"]
RESPONDERS = NODES[:3]  # sm-node's IsSM slot is opensm's: it probes, it does not answer
HOLD_HEARTBEATS = 5
# The chain's times keep the shipped order: the daemons and the scrapes run about 15 times
# faster than in production, the localizer 5 times (every 2 s over 15 s, against every 10 s over
# a minute). The rules' windows and `for:` are divided by 20 (at least 4 and 3 s): what the rules
# remember after an event (20 minutes) must outlast what they remember of a verdict (10) by the
# localizer's evidence window, and a `for:` of 10 minutes (jitter) must still outwait this
# machine's noise. Alertmanager's group_wait (30 s for pages, 2 minutes for chat) is what lets
# the localizer and the event rules name the culprit before a symptom is sent: divided by 6.
GROUP_WAIT = {"30s": "5s", "2m": "20s"}
TIME_DIVISOR = 20
# Alerts that notify (pager or chat) by their severity (deploy/alertmanager/alertmanager.yml).
NOTIFYING = ("critical", "warning")
# A congested port as the demo's loop makes it: PortXmitWait raised at 40 % of the port's time
# (SDR 4x, 1 GB/s, a Quantum-2's 8-byte tick: 5e7 ticks a second).
CONGESTION_TICKS_PER_SECOND = 5e7


def hca(node):
    return node + " mlx5_0"


class Fault:
    def __init__(self, name, expect, inject=(), undo=(), readme=(), before=None, during=None,
                 after=None, whole_again=None):
        self.name = name
        self.expect = expect  # {receiver: [alert name of each group]}
        self.inject = list(inject)  # ibsim console commands
        self.undo = list(undo)
        self.readme = list(readme) or self.inject  # what README.md must show verbatim
        # callables(test): before the injection, right after it, before the undo, and once the
        # fabric is whole again after it
        self.before, self.during, self.after = before, during, after
        self.whole_again = whole_again


def stall_loop(test, stop):
    """The demo's stalled host: six 0.4 s pauses of gpu-node-02's daemon, 0.6 s apart."""
    daemon = test.daemons["gpu-node-02"]
    for _ in range(6):
        if stop.is_set():
            return
        daemon.signal(signal.SIGSTOP)
        try:
            stop.wait(0.4)
        finally:
            daemon.signal(signal.SIGCONT)
        stop.wait(0.6)


def congestion_loop(test, stop):
    """The demo's congestion loop: spine-1's port to leaf-2 waits 40 % of the time, the 32-bit
    counter set back before it pegs."""
    start = time.monotonic()
    while not stop.wait(0.25):
        ticks = int(CONGESTION_TICKS_PER_SECOND * (time.monotonic() - start)) % 4_000_000_000
        test.fabric.command('PerformanceSet "spine-1"[2] PortCounters.PortXmitWait=%d' % ticks,
                            settle=0)


def counting(command, step):
    """A counter fault that lasts: `command` (the README's, which sets the counter once) set to
    one more step every 2 s. The rules' windows are 20 times shorter here than shipped, and
    Alertmanager's group_wait only 6 times: one set would leave the window (30 s) soon after the
    chat group's wait (20 s), at the mercy of this machine's scheduling (in production it stays
    in the window for 10 minutes, 5 times the wait); a bad cable keeps erring anyway."""
    prefix = command.rsplit("=", 1)[0]

    def loop(test, stop):
        value = step
        while True:
            test.fabric.command("%s=%d" % (prefix, value), settle=0)
            value += step
            if stop.wait(2):
                return
    return loop


def in_background(loop):
    """A (during, after) pair running loop(test, stop) in a thread while the fault lasts."""
    state = {}

    def during(test):
        state["stop"] = threading.Event()
        state["thread"] = threading.Thread(target=loop, args=(test, state["stop"]), daemon=True)
        state["thread"].start()

    def after(test):
        state["stop"].set()
        state["thread"].join(timeout=30)
    return during, after


def host_goes_away(test):
    test.daemons["gpu-node-03"].process.kill()
    test.daemons["gpu-node-03"].process.wait()


def host_comes_back(test):
    test.daemons["gpu-node-03"].launch()
    test.daemons["gpu-node-03"].wait_ready(30)


def maintenance(*args):
    def run(test):
        out = subprocess.run([sys.executable, MAINTENANCE_TOOL, "--file", test.maintenance_file,
                              "--reload", test.prom.url(""), *args],
                             capture_output=True, text=True, timeout=60)
        test.assertEqual(out.returncode, 0, out.stdout + out.stderr)
    return run


def in_maintenance(test):
    maintenance("add", "switch", "leaf-a01 (rack A1)", "--for", "30m", "--reason", "chain test")(
        test)
    test.prom.wait_for(lambda: test.prom.firing_alerts("IbfabricMaintenance"), 60,
                       "IbfabricMaintenance to fire")


def end_maintenance(test):
    """Once nothing it held back is active any more, as an operator ends a window."""
    test.prom.wait_for(lambda: not [a for a in test.alertmanager.alerts()
                                    if a["labels"]["alertname"] == "IbfabricSwitchDown"], 60,
                       "IbfabricSwitchDown resolved in Alertmanager")
    maintenance("end", "switch", "leaf-a01 (rack A1)")(test)


def held_back_by_maintenance(test):
    """While the leaf is away in its window: Prometheus fires IbfabricSwitchDown for it, and
    Alertmanager holds it as inhibited (by IbfabricMaintenance)."""
    def inhibited():
        return [a for a in test.alertmanager.alerts()
                if a["labels"]["alertname"] == "IbfabricSwitchDown"
                and a["status"]["inhibitedBy"]]
    test.prom.wait_for(lambda: test.prom.firing_alerts("IbfabricSwitchDown"), 90,
                       "IbfabricSwitchDown to fire in Prometheus")
    test.prom.wait_for(inhibited, 30, "Alertmanager to hold IbfabricSwitchDown back")


SYMBOL_ERRORS = 'PerformanceSet "leaf-1"[5] PortCounters.SymbolErrorCounter=1000'
HOQ_DISCARDS = 'PerformanceSet "leaf-2"[1] PortXmitDiscardDetails.PortSwHOQLifetimeLimitDiscards=40'
symbol_errors_during, symbol_errors_after = in_background(counting(SYMBOL_ERRORS, 1000))
hoq_discards_during, hoq_discards_after = in_background(counting(HOQ_DISCARDS, 40))
stall_during, stall_after = in_background(stall_loop)
congestion_during, congestion_after = in_background(congestion_loop)

# Five sets, each on a fabric of its own (a file each, so that they run side by side): the
# README's faults that the probes find, those of a link, those of congestion, and the events.
LOSS_FAULTS = [  # test_alert_chain.py
    Fault("2 % loss into a host", {"chat": ["IbfabricSuspectLink"]},
          inject=['Error "gpu-node-03 mlx5_0"[1] 2'], undo=['Error "gpu-node-03 mlx5_0"[1] 0']),
    Fault("a stalled host", {"chat": ["IbfabricSuspectHost"]}, readme=["kill -STOP"],
          during=stall_during, after=stall_after),
]
LINK_FAULTS = [  # test_alert_chain_links.py
    Fault("a host's cable down", {"pager": ["IbfabricPortDown"]},
          inject=['Unlink "gpu-node-02 mlx5_0"[1]'], undo=['ReLink "gpu-node-02 mlx5_0"']),
    Fault("an uplink down", {"chat": ["IbfabricLeafUplinksLost"]},
          inject=['Unlink "leaf-1"[5]'], undo=['ReLink "leaf-1"']),
    # Last here: the localizer counts a cable's errors over 10 minutes (not shortened), so a
    # counter fault would stand beside the next cable it names.
    Fault("symbol errors on an uplink", {"chat": ["IbfabricSwitchPortErrors"]},
          readme=[SYMBOL_ERRORS], during=symbol_errors_during, after=symbol_errors_after),
]
COUNTER_FAULTS = [  # test_alert_chain_counters.py
    Fault("a congested spine port", {"chat": ["IbfabricCongestionHotSpot"]},
          readme=["PortXmitWait"], during=congestion_during, after=congestion_after,
          undo=['PerformanceSet "spine-1"[2] PortCounters.PortXmitWait=0']),
    Fault("a stuck receiver", {"chat": ["IbfabricStuckReceiver"]},
          readme=["HOQ lifetime discards"], during=hoq_discards_during, after=hoq_discards_after),
]
SWITCH_FAULTS = [  # test_alert_chain_switches.py
    Fault("a spine switch goes away", {"pager": ["IbfabricSwitchDown"]},
          inject=['Unlink "spine-1"'], undo=['ReLink "spine-1"']),
    Fault("a leaf switch goes away", {"pager": ["IbfabricSwitchDown"]},
          inject=['Unlink "leaf-1"'], undo=['ReLink "leaf-1"']),
]
HOST_FAULTS = [  # test_alert_chain_maintenance.py
    Fault("a leaf switch in maintenance goes away", {},
          inject=['Unlink "leaf-1"'], undo=['ReLink "leaf-1"'],
          readme=["scripts/ibfabric-maintenance add switch"],
          before=in_maintenance, during=held_back_by_maintenance,
          # As an operator does: the window ends once the switch is back (one that ends while
          # the switch is still away pages, as it should).
          whole_again=end_maintenance),
    # Last: its daemon comes back new (its probes and paths start again).
    Fault("a host goes away", {"pager": ["IbfabricHostDown"]},
          inject=['Unlink "gpu-node-03 mlx5_0"[1]'], undo=['ReLink "gpu-node-03 mlx5_0"'],
          readme=["kill -KILL", 'Unlink "gpu-node-03 mlx5_0"[1]'],
          during=host_goes_away, after=host_comes_back),
]


@require_tools(*SIM_TOOLS, "prometheus", "promtool", "prometheus-alertmanager")
@unittest.skipIf(os.environ.get("IBFABRIC_SANITIZED") == "1",
                 "a test of the shipped rules and routing: the release suite runs it")
class AlertChain(unittest.TestCase):
    maxDiff = None
    faults = LOSS_FAULTS

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ibfabric-chain-")
        cls.fabric = SimFabric(TOPOLOGY, name="chain", sm_host=hca("sm-node"), start_sm=False)
        cls.daemons = {}
        cls.prom = cls.localizer = cls.alertmanager = cls.webhook = None
        try:
            cls.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start(cls):
        cls.fabric.start()
        # As the demo: opensm on sm-node, ignoring the SM bit the responders' ports carry.
        conf = os.path.join(cls.tmp, "opensm.conf")
        with open(conf, "w") as f:
            f.write("ignore_other_sm TRUE\n")
        cls.fabric.spawn("opensm", ["opensm", "-F", conf, "-f",
                                    os.path.join(cls.tmp, "opensm.log")], host=hca("sm-node"))
        cls.fabric.wait_ready(hosts=[hca("gpu-node-01")])
        for i, node in enumerate(NODES):
            targets = ", ".join('{name: "%s"}' % hca(n) for n in RESPONDERS if n != node)
            config = os.path.join(cls.tmp, "%s.yaml" % node)
            state = os.path.join(cls.tmp, "state-" + node)
            os.makedirs(state)
            with open(config, "w") as f:
                f.write("state_directory: %s\n" % state +
                        "node_name_map: %s\n" % NAME_MAP +
                        "mad: {timeout: 200ms, retries: 2}\n"
                        "collectors:\n"
                        "  sysfs: {enabled: false}\n  sriov: {enabled: false}\n"
                        "  ports: {interval: 1s}\n  sm: {interval: 1s}\n"
                        "  fabric: {enabled: %s, interval: 2s, error_details: true}\n"
                        % ("true" if i == 0 else "false") +
                        "  probe: {enabled: true, interval: 1s, udp_listen: \"\", "
                        "mad_responder: %s, probe_interval: 50ms, timeout: 1s, "
                        "spike_floor: 20ms, targets: [%s]}\n"
                        % ("true" if node in RESPONDERS else "false", targets) +
                        "  paths: {enabled: true, interval: 1s, verify_every: 2s}\n")
            env = dict(os.environ, SIM_SET_ISSM="1") if node in RESPONDERS else None
            cls.daemons[node] = cls.fabric.daemon(["--config", config], host=hca(node),
                                                  env=env).launch()
        for d in cls.daemons.values():
            d.wait_ready(30)
        cls.webhook = WebhookReceiver()
        cls.alertmanager = Alertmanager(config_for_test(cls.webhook, group_wait=GROUP_WAIT))
        cls.maintenance_file = os.path.join(cls.tmp, "ibfabric-maintenance.rules.yml")
        shutil.copy(MAINTENANCE_RULES, cls.maintenance_file)
        localizer_port = free_port()
        cls.prom = PromServer(["127.0.0.1:%d" % d.port for d in cls.daemons.values()],
                              rule_files=[shortened_rules(cls.tmp, for_divisor=TIME_DIVISOR,
                                                          window_divisor=TIME_DIVISOR),
                                          cls.maintenance_file],
                              extra_jobs={"ibfabric-localize": ["127.0.0.1:%d" % localizer_port]},
                              alertmanagers=["127.0.0.1:%d" % cls.alertmanager.port],
                              extra_args=["--rules.alert.resend-delay=1s"])
        cls.prom.start()
        cls.localizer = Localizer(cls.prom.url(""), localizer_port)
        cls.localizer.start()
        cls.prom.wait_for(lambda: len(cls.prom.targets_up()) == len(NODES) + 1, 60,
                          "the four daemons and the localizer scraped")

    @classmethod
    def tearDownClass(cls):
        for part in (cls.localizer, cls.prom, cls.alertmanager, cls.webhook):
            if part is not None:
                part.close()
        for d in cls.daemons.values():
            d.stop()
        cls.fabric.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # --- waiting on the chain ---------------------------------------------------------------

    def notifying_alerts(self):
        """Alerts that would notify someone, pending or firing in Prometheus, or held by
        Alertmanager (inhibited or not)."""
        names = [a["labels"]["alertname"] for a in self.prom.api("alerts")["alerts"]
                 if a["labels"].get("severity") in NOTIFYING]
        names += [a["labels"]["alertname"] for a in self.alertmanager.alerts()
                  if a["labels"].get("severity") in NOTIFYING]
        return sorted(names)

    def whole(self):
        """Every daemon up with its port ACTIVE, every cabled switch port the sweep reads
        ACTIVE."""
        up = self.prom.query('up{job="ibfabric"} == 1')
        active = self.prom.query('ibfabric_ports_state{side="local"} == 4')
        down = self.prom.query("(ibfabric_fabric_port_state < 4) * on (job, instance, node_guid, "
                               "port) group_left ibfabric_fabric_link_info")
        return len(up) == len(NODES) and len(active) == len(NODES) and not down

    def wait_quiet(self, timeout, what):
        """Until the fabric is whole again, nothing that notifies is pending or firing anywhere
        in the chain and the localizer names nothing; then two more heartbeats (every group
        flushed)."""
        self.prom.wait_for(lambda: self.whole() and not self.notifying_alerts()
                           and not self.prom.query("ibfabric_localize_suspect"), timeout,
                           "the fabric whole and quiet (%s)" % what)
        self.wait_heartbeats(2)

    def state(self):
        """What the chain holds now, for a failure's message: the alerts in Prometheus and
        Alertmanager, the event records, the rules that fail to evaluate."""
        events = {q: sorted((r["metric"].get("switch_name") or r["metric"].get("node_name", ""),
                             r["metric"].get("port", ""), r["value"][1])
                            for r in self.prom.query(q))
                  for q in ("ibfabric:switch_neighbour_link_down", "ibfabric:switch_away",
                            "ibfabric:host_away")}
        errors = ["%s: %s" % (r["name"], r["lastError"])
                  for g in self.prom.api("rules")["groups"] for r in g["rules"]
                  if r.get("lastError")]
        return "Prometheus: %s; Alertmanager: %s; %s; rule errors: %s" % (
            sorted("%s %s" % (a["labels"]["alertname"], a["state"])
                   for a in self.prom.api("alerts")["alerts"]),
            sorted("%s%s" % (a["labels"]["alertname"],
                             " (inhibited)" if a["status"]["inhibitedBy"] else "")
                   for a in self.alertmanager.alerts()), events, errors)

    def wait_heartbeats(self, n):
        seen = len(self.webhook.received("/heartbeat"))
        self.prom.wait_for(lambda: len(self.webhook.received("/heartbeat")) >= seen + n,
                           10 + 3 * n, "%d heartbeats" % n)

    def groups(self, since):
        """{(receiver, groupKey): {"alerts": firing alert names ever, "resolved": bool}} of the
        notifications since index `since`, heartbeats aside."""
        out = {}
        # A group key notified before `since` (a cable faulted twice) counts from its first
        # firing notification after it: what came before is the fault before, resolved late.
        earlier = self.notified_before(since)
        for n in self.webhook.received()[since:]:
            receiver = n["path"].strip("/")
            if receiver == "heartbeat":
                continue
            firing = [a for a in n["alerts"] if a["status"] == "firing"]
            if (receiver, n["groupKey"]) in earlier:
                if not firing:
                    continue
                earlier.discard((receiver, n["groupKey"]))
            g = out.setdefault((receiver, n["groupKey"]),
                               {"alerts": set(), "resolved": False, "firing": []})
            g["alerts"].update(a["labels"]["alertname"] for a in firing)
            g["firing"] += [(a["labels"]["alertname"],
                             a["annotations"].get("description", "")[:300]) for a in firing]
            g["resolved"] |= n["status"] == "resolved"
        return out

    def notified_before(self, since):
        return {(n["path"].strip("/"), n["groupKey"]) for n in self.webhook.received()[:since]}

    def summary(self, groups):
        return {receiver: sorted(sorted(g["alerts"]) for (r, _), g in groups.items()
                                 if r == receiver)
                for receiver in sorted({r for r, _ in groups})}

    # --- the faults -------------------------------------------------------------------------

    def test_0_readme_lists_every_fault(self):
        with open(README) as f:
            text = f.read()
        for fault in self.faults:
            for words in fault.readme:
                self.assertIn(words, text, "README.md: the fault %r" % fault.name)
            for alerts in fault.expect.values():
                for name in alerts:
                    self.assertIn(name, text, "README.md: what %r notifies" % fault.name)

    def test_1_each_fault_one_notification_resolved_when_undone(self):
        self.wait_quiet(120, "before the first fault")
        only = os.environ.get("IBFABRIC_CHAIN_FAULTS")  # "0,3": those of self.faults only
        for i, fault in enumerate(self.faults):
            if only and str(i) not in only.split(","):
                continue
            with self.subTest(fault=fault.name):
                self.run_fault(fault)

    def run_fault(self, fault):
        started = time.monotonic()
        since = len(self.webhook.received())
        if fault.before:
            fault.before(self)
        undone = False
        try:
            for line in fault.inject:
                self.fabric.command(line, settle=0)
            if fault.during:
                fault.during(self)

            def notified():
                got = self.summary(self.groups(since))
                return all(len(got.get(r, [])) >= len(names)
                           for r, names in fault.expect.items())
            try:
                self.prom.wait_for(notified, 120, "%s: its notification" % fault.name)
            except AssertionError as e:
                raise AssertionError("%s\n%s\nnotified: %s" % (
                    e, self.state(), self.summary(self.groups(since)))) from None
            notified_after = time.monotonic() - started
            self.wait_heartbeats(HOLD_HEARTBEATS)
        finally:
            if fault.after:
                fault.after(self)
            for line in fault.undo:
                self.fabric.command(line, settle=0)
            undone = time.monotonic()

        def resolved():
            groups = self.groups(since)
            return all(g["resolved"] for g in groups.values())
        self.prom.wait_for(resolved, 180, "%s: its notifications resolved" % fault.name)
        if fault.whole_again:
            self.prom.wait_for(self.whole, 180, "the fabric whole after %s" % fault.name)
            fault.whole_again(self)
        self.wait_quiet(180, "after %s" % fault.name)
        groups = self.groups(since)
        print("%s: notified after %.0f s, resolved and quiet %.0f s after it was undone: %s"
              % (fault.name, notified_after, time.monotonic() - undone, self.summary(groups)),
              file=sys.stderr)
        want = {r: sorted([name] for name in names) for r, names in fault.expect.items()}
        self.assertEqual(self.summary(groups), want, "%s: the notification groups, %s" % (
            fault.name, "\n".join("%s: %s" % (r, g["firing"]) for (r, _), g in groups.items())))
        self.assertTrue(all(g["resolved"] for g in groups.values()))


if __name__ == "__main__":
    unittest.main(verbosity=2)
