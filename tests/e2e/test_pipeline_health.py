"""The pipeline watches itself, with real processes (issue 48: the Watchdog, the localizer's
own alerts, two replicas on one store).

A real Prometheus (Debian's) evaluates the shipped rules on the test's time scale
(tests/lib/shipped.py: every `for:` 3 s but the absent() alerts' 30 s, windows of minutes as
seconds, every second; alerts re-sent every second, so that the last alert a stopped Prometheus
sent ends 4 s later, its endsAt). It scrapes a fake daemon (job `ibfabric`: one host's probe
info) and two replicas of ibfabric-localize (job `ibfabric-localize`), which read one store of
the test's own answering as a store whose cable into h3 drops packets
(tests/lib/fake_store.py). It sends to a real Alertmanager running the shipped configuration
(tests/lib/alertmanager.py: the receivers pointed at a webhook of the test's own, group_wait
1 s, the heartbeat every 2 s).

In order, on one setup:
1. HA: both replicas name the cable; one chat notification for it (IbfabricSuspectLink). One
   replica is killed (SIGKILL) mid-fault: the survivor keeps naming the cable; exactly one
   chat notification for the dead replica (IbfabricLocalizerDown, naming it) and none more for
   the cable; no page, no IbfabricDaemonDown: nothing else fires.
2. The store refuses connections: IbfabricStoreUnreachable, one notification, and no other new
   alert; the store answers again and it resolves. Then the store's newest probe sample grows
   old: IbfabricStoreIngestionStalled, not IbfabricLocalizerFailing (the localizer's
   ibfabric_localize_store_up and ibfabric_localize_evidence_age_seconds{evidence="probes"}).
3. The heartbeat: IbfabricWatchdog reached the heartbeat receiver every 2 s all along, alone in
   its notifications; Prometheus stopped, the heartbeats stop once its last alert ended in
   Alertmanager, and no "resolved" one follows.

It tests rules and routing, the localizer a black box beside them (test_localize_service tests
the service, sanitized builds included): scripts/test.sh runs it in the release suite only.
Waits are polls with deadlines; "nothing more came" is judged over heartbeats, the
Alertmanager's own clock (each heartbeat is one flush of its groups later).
"""

import http.server
import os
import re
import signal
import sys
import tempfile
import threading
import time
import unittest

from ibfabric_testlib import find_samples, free_port, parse_exposition, require_tools

CABLE = {"kind": "cable", "node_name": "leaf-2", "port": "1", "remote_node_name": "h3",
         "remote_port": "1"}
RESEND_SECONDS = 1  # --rules.alert.resend-delay and the evaluation interval: endsAt = 4 x this


class FakeDaemon:
    """A scrape target standing for one ibfabricd: h1's probe info, nothing else (so that no
    other rule has anything to fire on)."""

    BODY = (b'# TYPE ibfabric_probe_node_info gauge\n'
            b'ibfabric_probe_node_info{node_guid="0x0000000000c00001",node_name="h1"} 1\n')

    def __init__(self):
        body = self.BODY

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = "127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def rules_for_test(directory):
    """The shipped rules on the test's time scale (shortened_rules), but for the `for:` of the
    two absent() alerts: 30 s. Shortened to 3 s, they would race Prometheus's first scrape (its
    service discovery hands the targets over up to 5 s after it starts) and fire at its start."""
    from shipped import shortened_rules
    path = shortened_rules(directory)
    with open(path) as f:
        text = f.read()
    text, n = re.subn(r"(- alert: Ibfabric(?:Daemon|Localizer)Absent\n"
                      r"(?:        .*\n)*?        for: )3s", r"\g<1>30s", text)
    assert n == 2, n
    with open(path, "w") as f:
        f.write(text)
    return path


def names_cable(localizer):
    samples = parse_exposition(localizer.metrics())
    return bool(find_samples(samples, "ibfabric_localize_suspect", **CABLE))


@require_tools("prometheus", "promtool", "prometheus-alertmanager")
class PipelineHealthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from alertmanager import Alertmanager, WebhookReceiver, config_for_test
        from fake_store import FakeApi
        from promserver import Localizer, PromServer
        started = time.monotonic()
        cls.tmp = tempfile.TemporaryDirectory(prefix="pipeline-health-")
        cls.webhook = cls.am = cls.store = cls.daemon = cls.prom = None
        cls.localizers = []
        try:
            cls.webhook = WebhookReceiver()
            cls.am = Alertmanager(config_for_test(cls.webhook))
            cls.store = FakeApi()
            cls.daemon = FakeDaemon()
            # The localizers first: they read the store, not Prometheus, and are up when it
            # first scrapes them.
            for _ in range(2):
                localizer = Localizer("http://127.0.0.1:%d" % cls.store.port, free_port())
                cls.localizers.append(localizer)
                localizer.start()
            cls.prom = PromServer(
                targets=[cls.daemon.address], job="ibfabric",
                extra_jobs={"ibfabric-localize": ["127.0.0.1:%d" % x.port
                                                  for x in cls.localizers]},
                rule_files=[rules_for_test(cls.tmp.name)],
                alertmanagers=["127.0.0.1:%d" % cls.am.port],
                extra_args=["--rules.alert.resend-delay=%ds" % RESEND_SECONDS])
            cls.prom.start()
            print("setUpClass: %.1f s" % (time.monotonic() - started), file=sys.stderr)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for part in cls.localizers + [cls.prom, cls.am, cls.store, cls.daemon, cls.webhook]:
            if part is not None:
                part.close()
        cls.tmp.cleanup()

    # --- what Alertmanager sent -------------------------------------------------------------

    def notifications(self, path, alertname=None, status="firing", since=0):
        """The POSTs to `path` (/pager, /chat, /heartbeat) from index `since` on, of `status`
        (None: any), carrying `alertname` (None: any)."""
        return [n for n in self.webhook.received()[since:]
                if n["path"] == path and (status is None or n["status"] == status)
                and (alertname is None or
                     any(a["labels"]["alertname"] == alertname for a in n["alerts"]))]

    def heartbeats(self):
        return self.webhook.received("/heartbeat")

    def wait(self, predicate, what, timeout=40):
        return self.prom.wait_for(predicate, timeout, what)

    def wait_heartbeats(self, n, what):
        """Waits for n more heartbeats: n flushes of Alertmanager's groups, in which anything
        still to be sent would have been."""
        target = len(self.heartbeats()) + n
        self.wait(lambda: len(self.heartbeats()) >= target, "%d heartbeats (%s)" % (n, what),
                  timeout=n * 2 * 2 + 10)

    def firing_labels(self, alertname):
        return [a["labels"] for a in self.prom.firing_alerts(alertname)]

    # --- 1. two replicas, one killed mid-fault ----------------------------------------------

    def test_1_ha_replica_killed_mid_fault(self):
        a, b = self.localizers
        self.wait(lambda: all(names_cable(x) for x in self.localizers),
                  "both replicas to name the cable")
        self.wait(lambda: self.notifications("/chat", "IbfabricSuspectLink"),
                  "the chat notification of IbfabricSuspectLink")
        self.assertEqual(set(self.prom.firing()), {"IbfabricSuspectLink"})

        os.killpg(a.proc.pid, signal.SIGKILL)
        a.proc.wait(timeout=10)
        dead = "127.0.0.1:%d" % a.port
        killed_at = len(self.webhook.received())
        self.wait(lambda: self.notifications("/chat", "IbfabricLocalizerDown", since=killed_at),
                  "the chat notification of IbfabricLocalizerDown")
        self.wait_heartbeats(3, "anything else to be sent")

        self.assertTrue(names_cable(b), "the survivor names the cable")
        firing = self.prom.firing()
        self.assertEqual(sorted(firing), ["IbfabricLocalizerDown", "IbfabricSuspectLink"],
                         "firing besides IbfabricWatchdog")
        self.assertEqual([(l["job"], l["instance"]) for l in firing["IbfabricLocalizerDown"]],
                         [("ibfabric-localize", dead)])
        [suspect] = firing["IbfabricSuspectLink"]
        self.assertEqual(suspect["cable"], "0x0000000000a00002:1:0x0000000000c00003:1")
        # Exactly one notification for the fault and one for the dead replica, both to chat,
        # each alone in it; nothing to the pager (not IbfabricDaemonDown).
        chat = self.notifications("/chat", status=None)
        self.assertEqual([sorted(x["labels"]["alertname"] for x in n["alerts"]) for n in chat],
                         [["IbfabricSuspectLink"], ["IbfabricLocalizerDown"]])
        self.assertEqual(chat[1]["alerts"][0]["labels"]["instance"], dead)
        self.assertEqual(self.notifications("/pager", status=None), [])

    # --- 2. the store fails -------------------------------------------------------------------

    def test_2_store_unreachable_then_stalled(self):
        from fake_store import FakeApi
        before = set(self.prom.firing())  # IbfabricLocalizerDown, if test 1 ran
        since = len(self.webhook.received())
        self.store.close()  # connections refused
        try:
            self.wait(lambda: self.notifications("/chat", "IbfabricStoreUnreachable", since=since),
                      "the chat notification of IbfabricStoreUnreachable")
            self.wait_heartbeats(3, "anything else to be sent")
            new = self.notifications("/chat", since=since) + \
                self.notifications("/pager", since=since)
            self.assertEqual([sorted(x["labels"]["alertname"] for x in n["alerts"]) for n in new],
                             [["IbfabricStoreUnreachable"]], "firing notifications since")
            self.assertEqual(set(self.prom.firing()) - before - {"IbfabricSuspectLink"},
                             {"IbfabricStoreUnreachable"})
        finally:
            type(self).store = FakeApi(port=self.store.port)  # answers again, where it did
        self.wait(lambda: "IbfabricStoreUnreachable" not in self.prom.firing(),
                  "IbfabricStoreUnreachable to resolve")

        since = len(self.webhook.received())
        self.store.newest_age = 300  # its ingestion stopped 5 minutes ago
        try:
            self.wait(lambda: self.firing_labels("IbfabricStoreIngestionStalled"),
                      "IbfabricStoreIngestionStalled")
            self.wait_heartbeats(3, "anything else to be sent")
            self.assertEqual(set(self.prom.firing()) - before - {"IbfabricSuspectLink"},
                             {"IbfabricStoreIngestionStalled"})
            new = self.notifications("/chat", since=since) + \
                self.notifications("/pager", since=since)
            self.assertEqual(sorted(a["labels"]["alertname"] for n in new for a in n["alerts"]
                                    if a["labels"]["alertname"] != "IbfabricSuspectLink"),
                             ["IbfabricStoreIngestionStalled"])
        finally:
            self.store.newest_age = 1.0

    # --- 3. the heartbeat ---------------------------------------------------------------------

    def test_3_heartbeats_stop_with_prometheus(self):
        from alertmanager import HEARTBEAT_SECONDS
        self.wait_heartbeats(2, "the heartbeat")
        beats = self.heartbeats()
        for n in beats:
            self.assertEqual((n["receiver"], n["status"]), ("heartbeat", "firing"))
            self.assertEqual([a["labels"]["alertname"] for a in n["alerts"]], ["IbfabricWatchdog"])
        gaps = [b["received_at"] - a["received_at"] for a, b in zip(beats, beats[1:])]
        # One every flush; one flush late on a loaded machine at most.
        self.assertLess(max(gaps), 3 * HEARTBEAT_SECONDS + 1, "heartbeats every flush")

        stopped = time.monotonic()
        self.prom.close()
        # Its last alert ends in Alertmanager at its endsAt, 4 x the resend delay after it was
        # sent; the heartbeat's group is flushed once more at most, with nothing to send.
        self.wait(lambda: not [a for a in self.am.alerts()
                               if a["labels"]["alertname"] == "IbfabricWatchdog"],
                  "the Watchdog to end in Alertmanager", timeout=4 * RESEND_SECONDS + 20)
        ended = time.monotonic()
        count = len(self.heartbeats())
        while time.monotonic() < ended + 3 * HEARTBEAT_SECONDS:  # three flushes' worth
            self.assertLessEqual(len(self.heartbeats()), count + 1, "heartbeats go on")
            time.sleep(0.2)
        last = self.heartbeats()[-1]["received_at"]
        self.assertLess(last - stopped, 4 * RESEND_SECONDS + HEARTBEAT_SECONDS + 3,
                        "heartbeats after Prometheus stopped")
        self.assertLess(last, ended + HEARTBEAT_SECONDS + 1)
        self.assertEqual(self.notifications("/heartbeat", status="resolved"), [])


if __name__ == "__main__":
    unittest.main()
