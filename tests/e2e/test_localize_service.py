"""ibfabric-localize as a service, against a query API of the test's own that answers as
Prometheus's /api/v1/query does (the real Prometheus is test_localization's): a small fat tree
(2 leaves, 1 spine, 4 hosts probing each other) whose cable into h3 drops 30 % of the packets,
h3's port counting the errors.

- the culprit is named once two evaluations held it, as the cable by both ends, with its
  evidence in words; /-/ready answers once it has evaluated;
- the API failing (HTTP 500), answering garbage, answering too late (past --query.timeout) or
  holding only stale evidence (past --evidence.max-age): ibfabric_localize_up 0, no suspect
  series, the failure counted, the reason in its log; and back to a verdict once it answers;
- paths are read once, and again only for a daemon whose ibfabric_path_traces_total moved;
- bad flags are refused with what to do.

It runs in every build, sanitized ones included: the service's threads (evaluation, HTTP) under
TSan, its parsing under ASan."""

import http.server
import json
import os
import subprocess
import threading
import time
import unittest
import urllib.parse

from ibfabric_testlib import find_samples, free_port, http_get, parse_exposition

LOCALIZE = os.environ["IBFABRIC_LOCALIZE"]
HOSTS = ["h1", "h2", "h3", "h4"]
GUID = {"leaf-1": "0x0000000000a00001", "leaf-2": "0x0000000000a00002",
        "spine-1": "0x0000000000b00001"}
for i, h in enumerate(HOSTS, 1):
    GUID[h] = "0x0000000000c0000%d" % i


def leaf_of(h):
    return "leaf-%d" % ((HOSTS.index(h) // 2) + 1)


def port_of(h):
    return HOSTS.index(h) % 2 + 1


def route(src, dst):
    """Hops (from, from port, to, to port); leaves reach the spine on port 3."""
    ls, ld = leaf_of(src), leaf_of(dst)
    hops = [(src, 1, ls, port_of(src))]
    if ls != ld:
        hops += [(ls, 3, "spine-1", int(ls[-1])), ("spine-1", int(ld[-1]), ld, 3)]
    return hops + [(ld, port_of(dst), dst, 1)]


def hop_labels(hop):
    """As the paths collector names a cable: the switch end is a; direction of the hop."""
    f, fp, t, tp = hop
    f_is_a = not f.startswith("h") if f.startswith("h") != t.startswith("h") else \
        (GUID[f], fp) < (GUID[t], tp)
    a, ap, b, bp = (f, fp, t, tp) if f_is_a else (t, tp, f, fp)
    return {"node_guid": GUID[a], "port": str(ap), "node_name": a, "remote_node_guid": GUID[b],
            "remote_port": str(bp), "remote_node_name": b,
            "direction": "a_to_b" if f_is_a else "b_to_a"}


def instance(h):
    return "%s:10916" % h


PAIRS = [(a, b) for a in HOSTS for b in HOSTS if a != b]
DROPPING = ("leaf-2", 1, "h3", 1)  # into h3


class FakeApi:
    """Answers instant queries from the fabric above; `mode` makes it fail."""

    def __init__(self):
        self.mode = "ok"
        self.newest_age = 1.0
        self.queries = []
        self.times = []  # the evaluation time of each query, as the localizer asked for it
        self.marker = 1
        self.counters = True  # h3's port counts the errors of its drops
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                query = form.get("query", [""])[0]
                outer.queries.append(query)
                outer.times.append(float(form.get("time", ["nan"])[0]))
                if outer.mode == "error":
                    return self.reply(500, b'{"status":"error","errorType":"internal",'
                                           b'"error":"overloaded"}')
                if outer.mode == "garbage":
                    return self.reply(200, b"<html>502 Bad Gateway</html>")
                if outer.mode == "slow":
                    time.sleep(2.5)
                body = {"status": "success",
                        "data": {"resultType": "vector", "result": outer.answer(query)}}
                self.reply(200, json.dumps(body).encode())

            def reply(self, code, body):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass  # the localizer gave up on a slow answer

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 128  # the localizer sends its queries side by side

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def answer(self, q):
        now = time.time()

        def series(labels, value):
            return {"metric": labels, "value": [now, str(value)]}

        def pair(p, q_):
            return {"job": "ibfabric", "instance": instance(p), "peer": "%s mlx5_0" % q_,
                    "transport": "mad"}

        def daemon(h):
            return {"job": "ibfabric", "instance": instance(h)}
        crossing = lambda p, q_: DROPPING in route(p, q_) + route(q_, p)  # noqa: E731
        if "ibfabric_probe_sent_total" in q:
            return [series(pair(p, q_), 600) for p, q_ in PAIRS]
        if "ibfabric_probe_lost_total" in q:
            return [series(pair(p, q_), 180 if crossing(p, q_) else 0) for p, q_ in PAIRS]
        if "ibfabric_probe_spikes_total" in q:
            return [series(pair(p, q_), 0) for p, q_ in PAIRS]
        if q.startswith("max(timestamp(ibfabric_probe_node_info"):
            return [series({}, now - self.newest_age)]
        if "ibfabric_probe_node_info" in q:
            return [series(dict(daemon(h), node_guid=GUID[h], node_name=h), 1) for h in HOSTS]
        if "ibfabric_path_traces_total" in q:
            return [series(daemon(h), self.marker if h == "h1" else 1) for h in HOSTS]
        if q.startswith("ibfabric_path_hop_info"):
            return [series(dict(pair(p, q_), leg=leg, hop=str(n), **hop_labels(hop)), 1)
                    for p, q_ in PAIRS if instance(p) in q
                    for leg, hops in (("to_peer", route(p, q_)), ("from_peer", route(q_, p)))
                    for n, hop in enumerate(hops, 1)]
        if q.startswith("ibfabric_path_peer_info"):
            return [series(dict(pair(p, q_), peer_node_guid=GUID[q_], peer_node_name=q_), 1)
                    for p, q_ in PAIRS if instance(p) in q]
        if q.startswith("max by (node_guid, port) (") and "side=\"local\"" in q and \
                "receive_errors" in q and self.counters:
            return [series({"node_guid": GUID["h3"], "port": "1"}, 180)]
        return []


class LocalizeServiceTest(unittest.TestCase):
    def setUp(self):
        self.api = FakeApi()
        self.api.counters = self._testMethodName != "test_a_suspect_without_counters_waits"
        self.addCleanup(self.api.close)
        self.port = free_port()
        self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                     "localize-service-%d.log" % self.port), "w+")
        self.addCleanup(self.log.close)
        self.proc = subprocess.Popen(
            [LOCALIZE, "--prometheus.url=http://127.0.0.1:%d" % self.api.port,
             "--web.listen-address=127.0.0.1:%d" % self.port, "--evaluation-interval=1s",
             "--evidence.window=5s", "--query.timeout=800ms", "--evidence.max-age=30s"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.assertEqual(self.proc.wait(timeout=20), 0, self.logtext())

    def logtext(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def metrics(self):
        status, _, body = http_get("http://127.0.0.1:%d/metrics" % self.port)
        self.assertEqual(status, 200)
        return parse_exposition(body)

    def wait(self, predicate, what, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                samples = self.metrics()
                if predicate(samples):
                    return samples
            except OSError:
                pass
            time.sleep(0.2)
        self.fail("timed out waiting for %s\n%s" % (what, self.logtext()[-3000:]))

    def value(self, samples, name, **labels):
        found = find_samples(samples, name, **labels)
        return found[0].value if found else None

    def test_names_the_cable_and_gives_no_verdict_without_fresh_evidence(self):
        named = self.wait(lambda s: find_samples(s, "ibfabric_localize_suspect"), "a verdict")
        status, _, _ = http_get("http://127.0.0.1:%d/-/ready" % self.port)
        self.assertEqual(status, 200)
        suspects = find_samples(named, "ibfabric_localize_suspect")
        self.assertEqual(len(suspects), 1, suspects)
        labels = suspects[0].labels
        self.assertEqual((labels["kind"], labels["node_name"], labels["port"],
                          labels["remote_node_name"], labels["remote_port"]),
                         ("cable", "leaf-2", "1", "h3", "1"))
        self.assertEqual(suspects[0].value, 6)  # h3's pairs, both ways
        info = find_samples(named, "ibfabric_localize_suspect_info")[0].labels
        self.assertIn("packets leaf-2 -> h3: 1080 of 3600 probes lost (30%)", info["evidence"])
        self.assertIn("h3 port 1 (its own daemon): 180 errors", info["evidence"])
        self.assertEqual(info["equally_suspect"], "none")
        self.assertEqual(self.value(named, "ibfabric_localize_up"), 1)
        self.assertEqual(self.value(named, "ibfabric_localize_pairs", state="placed"), 12)
        # Evaluations on the interval's grid (1 s); the one that confirms a new suspect with
        # evidence of its own (h3's counters) half an interval after the one that found it.
        self.assertEqual(self.evaluation_times()[:2], [0.0, 0.5])
        self.wait(lambda s: len(self.evaluation_times()) >= 4, "two more evaluations")
        self.assertEqual([t % 1 for t in self.evaluation_times()[2:4]], [0, 0])
        # Paths: read once for every daemon; then only h1's, once its marker moves.
        hop_queries = lambda: [q for q in self.api.queries  # noqa: E731
                               if q.startswith("ibfabric_path_hop_info")]
        self.assertEqual(len(hop_queries()), 1, hop_queries())
        self.api.marker = 2
        self.wait(lambda s: len(hop_queries()) == 2, "h1's paths read again")
        self.assertIn(instance("h1"), hop_queries()[1])
        self.assertNotIn(instance("h2"), hop_queries()[1])
        time.sleep(2.5)
        self.assertEqual(len(hop_queries()), 2, "paths read again without a change")

        for mode, reason in (("error", "HTTP 500: query failed: internal: overloaded"),
                             ("garbage", "malformed JSON"),
                             ("slow", "no answer within 800 ms"),
                             ("stale", "s old (--evidence.max-age)")):
            with self.subTest(mode=mode):
                failures = self.value(self.metrics(), "ibfabric_localize_evaluation_failures_total")
                if mode == "stale":
                    self.api.newest_age = 300
                else:
                    self.api.mode = mode
                down = self.wait(lambda s: self.value(s, "ibfabric_localize_up") == 0,
                                 "no verdict (%s)" % mode)
                self.assertEqual(find_samples(down, "ibfabric_localize_suspect"), [])
                self.assertGreater(self.value(down, "ibfabric_localize_evaluation_failures_total"),
                                   failures)
                self.assertIn(reason, self.logtext())
                self.api.mode, self.api.newest_age = "ok", 1.0
                self.wait(lambda s: find_samples(s, "ibfabric_localize_suspect"),
                          "the verdict again after %s" % mode)

    def evaluation_times(self):
        """The evidence times asked for, from the first evaluation's."""
        times = [t for q, t in zip(list(self.api.queries), list(self.api.times))
                 if "ibfabric_probe_sent_total" in q]
        self.assertTrue(times and times[0] % 1 == 0, times)
        return [t - times[0] for t in times]

    def test_a_suspect_without_counters_waits(self):
        # Without h3's counters the probes cannot tell its cable from h3: one verdict naming
        # both, judged again half an interval after it was found and still not settled there,
        # named a whole interval after it was found (the counters that would decide may not be
        # in the store yet). Seen as soon as it is named: before the evaluation at 2 s.
        named = self.wait(lambda s: find_samples(s, "ibfabric_localize_suspect"), "a verdict")
        info = find_samples(named, "ibfabric_localize_suspect_info")[0].labels
        self.assertIn("h3", info["equally_suspect"])
        self.assertEqual(self.evaluation_times(), [0.0, 0.5, 1.0])

    def test_bad_flags_say_what_to_do(self):
        for args, message in ((["--prometheus.url=prometheus:9090"], "must start with http://"),
                              (["--evaluation-interval=soon"], "not a duration"),
                              (["--prometheus.header=nocolon"], "give 'Name: value'"),
                              (["--query.timeout=20s"], "shorter than --evaluation-interval"),
                              (["--no-such-flag"], "unknown flag")):
            with self.subTest(args=args):
                out = subprocess.run([LOCALIZE] + args, capture_output=True, text=True,
                                     timeout=30)
                self.assertEqual(out.returncode, 2, out.stderr)
                self.assertIn(message, out.stderr)


if __name__ == "__main__":
    unittest.main()
