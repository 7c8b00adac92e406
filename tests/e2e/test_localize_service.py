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

import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import unittest

from fake_store import GUID, FakeApi, instance
from ibfabric_testlib import find_samples, free_port, http_get, parse_exposition
from pki import make_pki

LOCALIZE = os.environ["IBFABRIC_LOCALIZE"]


class LocalizeServiceTest(unittest.TestCase):
    def setUp(self):
        self.api = FakeApi()
        self.api.counters = self._testMethodName != "test_a_suspect_without_counters_waits"
        self.addCleanup(self.api.close)
        self.port = free_port()
        self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                     "localize-service-%d.log" % self.port), "w+")
        self.addCleanup(self.log.close)
        self.proc = None

    def start(self, *args, url=None):
        self.proc = subprocess.Popen(
            [LOCALIZE, "--prometheus.url=" + (url or "http://127.0.0.1:%d" % self.api.port),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--evaluation-interval=1s",
             "--evidence.window=5s", "--query.timeout=800ms", "--evidence.max-age=30s"] +
            list(args), stdout=self.log, stderr=subprocess.STDOUT)
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
        self.start()
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
        # The jobs on the hosts whose probed paths cross it (every host probes h3), most hurt
        # first; not the job on a node of no such host.
        self.assertEqual(info["jobs"], "train/llama (3 nodes), train/bert (2 nodes)")
        self.assertEqual({(x.labels["namespace"], x.labels["job_name"]): x.value
                          for x in find_samples(named, "ibfabric_localize_suspect_job")},
                         {("train", "llama"): 3, ("train", "bert"): 2})
        self.assertEqual(self.value(named, "ibfabric_localize_up"), 1)
        self.assertEqual(self.value(named, "ibfabric_localize_pairs", state="placed"), 12)
        # The pairs the cable explains raise no probe alert of their own.
        self.assertEqual(find_samples(named, "ibfabric_localize_pair_unexplained_loss_ratio"), [])
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
        # The probe plan: each job's hosts a ring in the order of their GUIDs; h3 is in both
        # jobs (llama: h1 h2 h3, bert: h3 h4), so it probes h1 and h4 first.
        status, _, plan = http_get("http://127.0.0.1:%d/probe-plan?node_guid=%s" % (
            self.port, GUID["h3"]))
        self.assertEqual(status, 200)
        self.assertEqual([l for l in plan.splitlines() if not l.startswith("#")],
                         ["%s h1" % GUID["h1"], "%s h4" % GUID["h4"]])
        self.assertEqual(self.value(self.metrics(), "ibfabric_localize_probe_plan_jobs"), 2)
        # A job that ended is gone from the next verdict.
        del self.api.jobs[("train", "bert")]
        self.wait(lambda s: len(find_samples(s, "ibfabric_localize_suspect_job")) == 1,
                  "the ended job gone from the verdict")
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
                if mode == "error":
                    # A hiccup blanks nothing: the last verdicts stay, with their age, for up
                    # to three intervals.
                    self.assertEqual(len(find_samples(down, "ibfabric_localize_suspect")), 1)
                    self.assertGreaterEqual(
                        self.value(down, "ibfabric_localize_verdicts_age_seconds"), 1)
                down = self.wait(lambda s: self.value(s, "ibfabric_localize_up") == 0 and
                                 not find_samples(s, "ibfabric_localize_suspect"),
                                 "the kept verdicts gone (%s)" % mode)
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
        self.start()
        named = self.wait(lambda s: find_samples(s, "ibfabric_localize_suspect"), "a verdict")
        info = find_samples(named, "ibfabric_localize_suspect_info")[0].labels
        self.assertIn("h3", info["equally_suspect"])
        self.assertEqual(self.evaluation_times(), [0.0, 0.5, 1.0])

    # --- partial evidence: a query that fails or is slow degrades the verdict, never blanks it

    def info(self, samples):
        found = find_samples(samples, "ibfabric_localize_suspect_info")
        return found[0].labels if found else None

    def test_a_failing_counter_query_degrades_the_verdict(self):
        # h3's receive errors come from the counters its own daemon reads (side="local"): with
        # those queries failing, the cable is still named, with h3 beside it (the probes cannot
        # tell a host from its own cable) and the verdict says it lacks the counters.
        self.api.query_modes = {'side="local"': "error"}
        self.start()
        named = self.wait(lambda s: self.info(s), "a verdict without counters")
        info = self.info(named)
        self.assertEqual((info["node_name"], info["remote_node_name"]), ("leaf-2", "h3"))
        self.assertIn("h3", info["equally_suspect"])
        self.assertEqual(info["lacking"], "counters")
        self.assertEqual(self.value(named, "ibfabric_localize_up"), 1)
        self.assertEqual(self.value(named, "ibfabric_localize_store_up"), 1)
        self.assertEqual(self.value(named, "ibfabric_localize_evidence_usable",
                                    evidence="counters"), 0)
        self.assertEqual(self.value(named, "ibfabric_localize_evidence_usable",
                                    evidence="paths"), 1)
        self.assertGreaterEqual(self.value(named, "ibfabric_localize_query_failures_total",
                                           query="errors_local", reason="http"), 1)
        log = self.logtext()
        self.assertEqual(log.count('msg="query failed" query=errors_local evidence=counters'), 1,
                         log)
        self.assertIn('msg="evidence not read yet" evidence=counters', log)
        # The counters answer again: the cable alone, with h3's errors as its evidence.
        self.api.query_modes = {}
        whole = self.wait(lambda s: (self.info(s) or {}).get("lacking") == "none",
                          "the verdict with counters")
        info = self.info(whole)
        self.assertEqual(info["equally_suspect"], "none")
        self.assertIn("h3 port 1 (its own daemon): 180 errors", info["evidence"])
        self.assertEqual(self.value(whole, "ibfabric_localize_evidence_usable",
                                    evidence="counters"), 1)
        self.assertIn('msg="query answers again" query=errors_local', self.logtext())

    def test_a_slow_refresh_serves_a_later_evaluation(self):
        # The counters take longer than an evaluation's budget (--query.timeout): the
        # evaluations go on without them, and their answer, when it comes, serves the next.
        self.api.query_modes = {'side="local"': "slow"}
        self.api.slow_seconds = 3
        self.start()
        first = self.wait(lambda s: self.info(s), "a verdict before the counters")
        self.assertEqual(self.info(first)["lacking"], "counters")
        whole = self.wait(lambda s: (self.info(s) or {}).get("lacking") == "none",
                          "the counters' late answer used")
        self.assertIn("h3 port 1 (its own daemon): 180 errors", self.info(whole)["evidence"])
        self.assertGreaterEqual(
            self.value(whole, "ibfabric_localize_evidence_age_seconds", evidence="counters"), 1)
        self.assertNotIn("query failed", self.logtext())

    def test_values_that_are_no_numbers_and_missing_series(self):
        self.start()
        self.wait(lambda s: self.info(s), "a verdict")
        # NaN from the daemons' stalls (kept evidence): dropped, counted, said once; the
        # verdict stands.
        self.api.query_modes = {"ibfabric_event_loop_stall_seconds_total": "nan"}
        nan = self.wait(lambda s: self.value(s, "ibfabric_localize_invalid_values_total",
                                             query="stalls"), "NaN counted")
        self.assertEqual(self.value(nan, "ibfabric_localize_invalid_values_total",
                                    query="stalls") % 4, 0)
        self.assertTrue(self.info(nan))
        # +Inf lost probes, then no lost series at all: the pairs are no evidence either way
        # (incomplete), nothing is named from them, and the log says so.
        for mode in ("inf", "empty"):
            with self.subTest(mode=mode):
                self.api.query_modes = {"ibfabric_probe_lost_total": mode}
                gone = self.wait(lambda s: self.value(s, "ibfabric_localize_pairs",
                                                      state="incomplete") == 12,
                                 "pairs incomplete (%s)" % mode)
                self.assertEqual(self.value(gone, "ibfabric_localize_pairs", state="placed"), 0)
                self.assertEqual(self.value(gone, "ibfabric_localize_up"), 1)
                self.api.query_modes = {}
                self.wait(lambda s: self.info(s) and self.value(
                    s, "ibfabric_localize_pairs", state="incomplete") == 0, "named again")
        # A store whose ingestion stalled has, after its lookback, no probe sample at all: the
        # evidence's age goes on from the newest one seen, it does not vanish.
        self.api.query_modes = {"max(timestamp(": "empty"}
        aging = self.wait(lambda s: (self.value(s, "ibfabric_localize_evidence_age_seconds",
                                                evidence="probes") or 0) >= 4,
                          "the probe evidence aging from the last sample seen")
        self.assertEqual(self.value(aging, "ibfabric_localize_up"), 1)  # under --evidence.max-age
        self.api.query_modes = {}
        log = self.logtext()
        self.assertEqual(log.count('msg="values that are not numbers dropped" query=stalls'), 1)
        self.assertIn('msg="values that are not numbers dropped" query=lost', log)
        self.assertEqual(log.count('msg="pairs without their lost or late series'), 2, log)

    def test_a_cable_down_explains_the_pairs_that_cross_it(self):
        # h3's cable is down (its own daemon says so): the 6 pairs to and from h3 cross it and
        # are left out (its port-down alert pages for them), so nothing is named and none is
        # served for a probe alert; the other 6 pairs are placed as before.
        self.api.links_down = [(GUID["h3"], 1)]
        self.start()
        left_out = self.wait(lambda s: self.value(s, "ibfabric_localize_pairs",
                                                  state="link_down") == 6, "6 pairs left out")
        self.assertEqual(self.value(left_out, "ibfabric_localize_pairs", state="placed"), 6)
        self.assertEqual(find_samples(left_out, "ibfabric_localize_suspect"), [])
        self.assertEqual(find_samples(left_out, "ibfabric_localize_pair_unexplained_loss_ratio"),
                         [])
        # The cable back up (in the window): h3's pairs are evidence again, and name it.
        self.api.links_down = []
        named = self.wait(lambda s: find_samples(s, "ibfabric_localize_suspect"), "a verdict")
        self.assertEqual(self.value(named, "ibfabric_localize_pairs", state="link_down"), 0)
        [suspect] = find_samples(named, "ibfabric_localize_suspect")
        self.assertEqual(suspect.labels["remote_node_name"], "h3")

    def test_pairs_it_cannot_place_are_served_unexplained(self):
        # No peer of any pair is known (the store lacks ibfabric_path_peer_info): nothing is
        # named, and every lossy pair is served for IbfabricProbeLoss, by the names known.
        self.api.query_modes = {"ibfabric_path_peer_info": "empty"}
        self.start()
        served = self.wait(lambda s: len(find_samples(
            s, "ibfabric_localize_pair_unexplained_loss_ratio")) == 6, "the 6 lossy pairs")
        self.assertEqual(find_samples(served, "ibfabric_localize_suspect"), [])
        self.assertEqual(self.value(served, "ibfabric_localize_pairs", state="unplaced"), 12)
        pair = find_samples(served, "ibfabric_localize_pair_unexplained_loss_ratio",
                            probe_instance=instance("h1"), peer="h3 mlx5_0")[0]
        self.assertEqual(pair.value, 0.3)
        self.assertEqual((pair.labels["probe_job"], pair.labels["transport"],
                          pair.labels["prober_name"], pair.labels["peer_name"]),
                         ("ibfabric", "mad", "h1", "h3 mlx5_0"))

    def test_truncated_oversized_and_refused(self):
        self.start("--query.max-response-bytes=256KiB")
        self.wait(lambda s: self.info(s), "a verdict")
        # Truncated JSON for the hosts (kept evidence): the last answer serves.
        self.api.query_modes = {"last_over_time(ibfabric_probe_node_info": "truncated"}
        kept = self.wait(lambda s: self.value(s, "ibfabric_localize_query_failures_total",
                                              query="nodes", reason="malformed"),
                         "the truncated answer counted")
        self.assertTrue(self.info(kept))
        self.assertEqual(self.value(kept, "ibfabric_localize_up"), 1)
        # An answer over --query.max-response-bytes for a probe query: no verdict.
        self.api.query_modes = {"ibfabric_probe_sent_total": "huge"}
        down = self.wait(lambda s: self.value(s, "ibfabric_localize_up") == 0 and not
                         find_samples(s, "ibfabric_localize_suspect"), "no verdict")
        self.assertEqual(self.value(down, "ibfabric_localize_store_up"), 0)
        self.assertGreaterEqual(self.value(down, "ibfabric_localize_query_failures_total",
                                           query="sent", reason="too_large"), 1)
        self.assertIn("larger than --query.max-response-bytes=262144", self.logtext())
        self.api.query_modes = {}
        self.wait(lambda s: self.info(s), "a verdict again")
        # The store goes away (connections refused), and comes back on the same port.
        port = self.api.port
        self.api.close()
        refused = self.wait(lambda s: self.value(s, "ibfabric_localize_store_up") == 0,
                            "the store unreachable")
        self.assertEqual(self.value(refused, "ibfabric_localize_up"), 0)
        self.assertGreaterEqual(self.value(refused, "ibfabric_localize_query_failures_total",
                                           query="sent", reason="connection"), 1)
        self.assertIn("connecting to http://127.0.0.1:%d" % port, self.logtext())
        self.api = FakeApi(port=port)
        self.addCleanup(self.api.close)
        back = self.wait(lambda s: self.info(s) and self.value(
            s, "ibfabric_localize_store_up") == 1, "a verdict once the store is back")
        self.assertEqual(self.value(back, "ibfabric_localize_verdicts_age_seconds"), 0)

    def test_credentials_and_tls_from_a_file(self):
        # Prometheus' http_config: a bearer token from a file, re-read for each query (a rotated
        # token is used at once), over TLS with the store's CA and a client certificate.
        d = tempfile.mkdtemp(prefix="ibfabric-localize-tls-")
        self.addCleanup(shutil.rmtree, d, True)
        make_pki(d)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(os.path.join(d, "tls.crt"), os.path.join(d, "tls.key"))
        tls.verify_mode = ssl.CERT_REQUIRED
        tls.load_verify_locations(os.path.join(d, "ca.crt"))
        self.api.close()
        self.api = FakeApi(tls=tls)
        self.addCleanup(self.api.close)
        self.api.authorization = "Bearer first-token"
        with open(os.path.join(d, "token"), "w") as f:
            f.write("first-token\n")
        config = os.path.join(d, "store.yml")
        with open(config, "w") as f:
            f.write("authorization:\n  credentials_file: token\n"
                    "tls_config:\n  ca_file: ca.crt\n  cert_file: client.crt\n"
                    "  key_file: client.key\n")
        self.start("--prometheus.http-config-file=" + config, "--log.format=json",
                   url="https://127.0.0.1:%d" % self.api.port)
        self.wait(lambda s: self.info(s), "a verdict over TLS with the token")
        self.api.authorization = "Bearer second-token"
        with open(os.path.join(d, "token"), "w") as f:
            f.write("second-token\n")
        failures = lambda s: self.value(  # noqa: E731
            s, "ibfabric_localize_query_failures_total", query="sent", reason="auth") or 0
        evaluations = lambda s: self.value(s, "ibfabric_localize_evaluations_total")  # noqa
        rotated = self.metrics()
        # A verdict again with the rotated token (on a loaded machine the evaluations in the
        # middle of the rotation may fail long enough for the held suspect to start afresh).
        after = self.wait(lambda s: evaluations(s) >= evaluations(rotated) + 3 and self.value(
            s, "ibfabric_localize_up") == 1 and self.info(s), "a verdict with the rotated token")
        # At most the evaluation in the middle of the rotation failed.
        self.assertLessEqual(failures(after) - failures(rotated), 4)
        # --log.format=json: every line one JSON object with its fields.
        lines = [json.loads(line) for line in self.logtext().splitlines() if line.strip()]
        self.assertTrue(any(line.get("msg") == "named" and "leaf-2" in line.get("suspect", "")
                            for line in lines), lines)
        self.assertTrue(all({"ts", "level", "msg"} <= set(line) for line in lines), lines)

    def test_bad_flags_say_what_to_do(self):
        for args, message in ((["--prometheus.url=prometheus:9090"], "must start with http://"),
                              (["--evaluation-interval=soon"], "not a duration"),
                              (["--prometheus.header=nocolon"], "give 'Name: value'"),
                              (["--query.timeout=20s"], "shorter than --evaluation-interval"),
                              (["--no-such-flag"], "unknown flag"),
                              (["--query.max-response-bytes=lots"], "KiB, MiB or GiB"),
                              (["--query.max-concurrency=0"], "1 to 64"),
                              (["--log.format=xml"], "logfmt or json"),
                              (["--web.listen-address=10920"], "expected HOST:PORT"),
                              (["--once=yes"], "takes no value"),
                              (["--prometheus.http-config-file=/nonexistent.yml"],
                               "/nonexistent.yml"),
                              (["--prometheus.http-config-file=" + self.bad_http_config()],
                               "bad.yml:2:3"),
                              (["--prometheus.http-config-file=" + self.tls_config()],
                               "is not https://")):
            with self.subTest(args=args):
                out = subprocess.run([LOCALIZE] + args, capture_output=True, text=True,
                                     timeout=30)
                self.assertEqual(out.returncode, 2, out.stderr)
                self.assertIn(message, out.stderr)

    def write(self, name, text):
        d = tempfile.mkdtemp(prefix="ibfabric-localize-flags-")
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
        return os.path.join(d, name)

    def bad_http_config(self):
        return self.write("bad.yml", "basic_auth:\n  user: me\n")  # an unknown key

    def tls_config(self):
        return self.write("tls.yml", "tls_config:\n  insecure_skip_verify: true\n")


if __name__ == "__main__":
    unittest.main()
