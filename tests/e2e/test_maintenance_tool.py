"""scripts/ibfabric-maintenance: the maintenance windows file (docs/alerts-and-dashboards.md,
"Maintenance").

add, list, end and prune on a file of the test's own, with the clock set (--now); names and
times checked, with clear errors and the file left untouched; the file it writes passes
`promtool check rules`, and with the shipped rules (`promtool test rules`) a window makes the
switch it names in maintenance from its start to its end and not after (it ends by itself), and
one scheduled later starts by itself; --reload POSTs /-/reload; the shipped, empty file is one
the tool reads. The PrometheusRule it prints (--kubernetes) is checked as the manifests are, in
tests/e2e/test_kubernetes_manifests.py.
"""

import http.server
import os
import shutil
import subprocess
import tempfile
import threading
import unittest

from ibfabric_testlib import require_tools, source_dir

TOOL = os.path.join(source_dir(), "scripts", "ibfabric-maintenance")
SHIPPED = os.path.join(source_dir(), "deploy", "maintenance", "ibfabric-maintenance.rules.yml")
RULES = os.path.join(source_dir(), "dashboards", "alerts", "ibfabric.rules.yml")
NOW = "2026-12-01T08:00:00Z"


def run(path, *args, now=NOW):
    return subprocess.run(["python3", TOOL, "--file", path, "--now", now, *args],
                          capture_output=True, text=True, timeout=30)


class MaintenanceToolTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ibfabric-maint-")
        self.path = os.path.join(self.dir, "maintenance.rules.yml")
        shutil.copy(SHIPPED, self.path)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def ok(self, *args, now=NOW):
        out = run(self.path, *args, now=now)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        return out

    def text(self):
        with open(self.path) as f:
            return f.read()

    def listed(self, now=NOW):
        """list's rows as (kind, name, state, from, until)."""
        rows = self.ok("list", now=now).stdout.splitlines()
        self.assertEqual(rows[0].split()[:3], ["KIND", "NAME", "STATE"])
        out = []
        for row in rows[1:]:
            kind, rest = row.split(None, 1)
            # NAME may hold spaces: the columns after it are fixed words and times.
            fields = rest.split()
            i = next(n for n, f in enumerate(fields) if f in ("active", "scheduled", "ended"))
            out.append((kind, " ".join(fields[:i]), fields[i], fields[i + 1], fields[i + 2]))
        return out

    @require_tools("promtool")
    def test_shipped_file_is_empty_and_valid(self):
        out = subprocess.run(["promtool", "check", "rules", SHIPPED], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("SUCCESS: 0 rules found", out.stdout + out.stderr)
        self.assertEqual(self.listed(), [])

    @require_tools("promtool")
    def test_add_list_end_prune(self):
        self.ok("add", "switch", "leaf-a01 (rack A1)", "--for", "2h", "--reason",
                "firmware upgrade CHG-1234")
        self.ok("add", "node", "gpu-node-07", "--until", "2026-12-01T19:00:00+01:00")
        self.ok("add", "cable", "0x0002C90300000001:17", "--for", "30m", "--start",
                "2026-12-01T09:00:00Z")
        self.ok("add", "cable", "0x0002c90300A00003:1:0x0002c90300000002:1", "--for", "1h")
        self.assertEqual(self.listed(), [
            ("cable", "0x0002c90300a00003:1:0x0002c90300000002:1", "active",
             "2026-12-01T08:00:00Z", "2026-12-01T09:00:00Z"),
            ("node", "gpu-node-07", "active", "2026-12-01T08:00:00Z", "2026-12-01T18:00:00Z"),
            ("switch", "leaf-a01 (rack A1)", "active", "2026-12-01T08:00:00Z",
             "2026-12-01T10:00:00Z"),
            ("cable", "0x0002c90300000001:17", "scheduled", "2026-12-01T09:00:00Z",
             "2026-12-01T09:30:00Z")])
        text = self.text()
        # Each window: a record that exists from its start to its end, its end as RFC 3339.
        self.assertIn('expr: vector(1) and on () (vector(time()) >= 1796112000 < 1796119200)\n'
                      '        labels: {"kind": "switch", "name": "leaf-a01 (rack A1)", '
                      '"reason": "firmware upgrade CHG-1234", "until": "2026-12-01T10:00:00Z"}',
                      text)
        self.assertEqual(text.count("\n      - record: ibfabric:maintenance_declared\n"), 4)
        out = subprocess.run(["promtool", "check", "rules", self.path], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("SUCCESS: 4 rules found", out.stdout + out.stderr)

        # A window that overlaps one of the same thing replaces it; the file keeps its header.
        out = self.ok("add", "switch", "leaf-a01 (rack A1)", "--for", "4h", "--reason", "longer")
        self.assertIn("replaced: switch leaf-a01 (rack A1)", out.stderr)
        self.assertEqual([r[4] for r in self.listed() if r[0] == "switch"],
                         ["2026-12-01T12:00:00Z"])
        self.assertTrue(self.text().startswith("# Maintenance windows of ibfabric"))

        # At 11:00 two have ended; list says so, prune removes them.
        later = "2026-12-01T11:00:00Z"
        states = {r[1]: r[2] for r in self.listed(now=later)}
        self.assertEqual(states["0x0002c90300000001:17"], "ended")
        self.assertEqual(states["gpu-node-07"], "active")
        out = self.ok("prune", now=later)
        self.assertIn("pruned 2 ended window(s)", out.stderr)
        self.assertEqual(sorted(r[1] for r in self.listed(now=later)),
                         ["gpu-node-07", "leaf-a01 (rack A1)"])

        # end: the thing's windows go; a GUID is found whatever its case.
        out = self.ok("end", "node", "gpu-node-07")
        self.assertIn("ended: node gpu-node-07", out.stderr)
        self.assertEqual([r[1] for r in self.listed()], ["leaf-a01 (rack A1)"])
        out = run(self.path, "end", "node", "gpu-node-07")
        self.assertEqual(out.returncode, 2)
        self.assertIn("no window of node 'gpu-node-07'", out.stderr)
        self.ok("end", "switch", "leaf-a01 (rack A1)")
        self.assertEqual(self.listed(), [])
        out = subprocess.run(["promtool", "check", "rules", self.path], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_invalid_names_and_times(self):
        self.ok("add", "node", "gpu-node-01", "--for", "1h")
        before = self.text()
        cases = [
            (["add", "node", "gpu-node-02"], "one of the arguments --for --until is required"),
            (["add", "rack", "a1", "--for", "1h"], "invalid choice: 'rack'"),
            (["add", "switch", "0x12", "--for", "1h"], "a GUID is 0x and 16 hex digits"),
            (["add", "switch", "  ", "--for", "1h"], "name is empty"),
            (["add", "node", "a\nb", "--for", "1h"], "without control characters"),
            (["add", "cable", "leaf-a01", "--for", "1h"], "name it by one end, NAME:PORT"),
            (["add", "cable", "leaf-a01:0", "--for", "1h"], "port 1-254"),
            (["add", "cable", "0x12:3", "--for", "1h"], "is no GUID"),
            (["add", "node", "n1", "--for", "2 hours"], "not a duration"),
            (["add", "node", "n1", "--for", "0m"], "must last some time"),
            (["add", "node", "n1", "--for", "32d"], "at most 31 days"),
            (["add", "node", "n1", "--until", "tomorrow"], "not an RFC 3339 time"),
            (["add", "node", "n1", "--until", "2026-12-01T09:00:00"], "give its time zone"),
            (["add", "node", "n1", "--until", "2026-12-01T07:00:00Z"], "not in the future"),
            (["add", "node", "n1", "--until", "2026-12-01T10:00:00Z", "--start",
              "2026-12-01T11:00:00Z"], "before it starts"),
            (["add", "node", "n1", "--for", "1h", "--reason", "two\nlines"], "on one line"),
            (["end", "cable", "leaf-a01:3"], "no window of cable 'leaf-a01:3'"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                out = run(self.path, *args)
                self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
                self.assertIn(message, out.stderr)
                self.assertNotIn("Traceback", out.stderr)
                self.assertEqual(self.text(), before, "the file changed on an error")

    def test_refuses_a_file_it_cannot_read(self):
        with open(self.path, "a") as f:
            f.write("      - record: something_else\n        expr: vector(1)\n")
        out = run(self.path, "add", "node", "n1", "--for", "1h")
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertRegex(out.stderr, r"line \d+: expected the group|line \d+: expected a record")
        with open(self.path, "w") as f:
            f.write("rules: []\n")
        out = run(self.path, "list")
        self.assertEqual(out.returncode, 2)
        self.assertIn("no top-level 'groups:'", out.stderr)

    def test_reload(self):
        posts = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                posts.append(self.path)
                self.send_response(200 if self.path == "/-/reload" else 404)
                self.end_headers()

            def log_message(self, *args):
                pass
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = "http://127.0.0.1:%d" % server.server_address[1]
            out = self.ok("--reload", url, "add", "node", "n1", "--for", "1h")
            self.assertIn("reloaded: POST %s/-/reload" % url, out.stderr)
            self.assertEqual(posts, ["/-/reload"])
            # An answer other than 200: the file is written, and the error says so.
            out = run(self.path, "--reload", url + "/other", "end", "node", "n1")
            self.assertEqual(out.returncode, 2)
            self.assertIn("HTTP 404", out.stderr)
            self.assertIn("--web.enable-lifecycle", out.stderr)
            self.assertEqual(self.listed(), [])
        finally:
            server.shutdown()
            server.server_close()

    @require_tools("promtool")
    def test_windows_end_by_themselves_with_the_shipped_rules(self):
        # promtool's clock starts at 1970-01-01T00:00:00Z: a window of 20 minutes from then, one
        # scheduled from 30 to 50 minutes.
        epoch = "1970-01-01T00:00:00Z"
        self.ok("add", "switch", "leaf-a01 (rack A1)", "--for", "20m", "--reason", "firmware",
                now=epoch)
        self.ok("add", "switch", "0x0002c90300000002", "--for", "20m", "--start",
                "1970-01-01T00:30:00Z", "--reason", "later", now=epoch)
        link = ('ibfabric_fabric_link_info{job="ibfabric",instance="n9:10916",cable_end="a",'
                'node_guid="0x0002c90300000001",port="17",node_name="leaf-a01 (rack A1)",'
                'remote_node_guid="0x0002c90300a00001",remote_port="1",remote_node_type="CA",'
                'remote_node_name="gpu-node-01"}')
        test = """rule_files:
  - %s
  - %s
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: '%s'
        values: '1x60'
    promql_expr_test:
      - expr: ibfabric:maintenance_guid
        eval_time: 10m
        exp_samples:
          - labels: 'ibfabric:maintenance_guid{kind="switch",name="leaf-a01 (rack A1)",node_guid="0x0002c90300000001",reason="firmware",until="1970-01-01T00:20:00Z"}'
            value: 1
      - expr: ibfabric:maintenance_guid
        eval_time: 25m
        exp_samples: []
      - expr: ibfabric:maintenance_guid
        eval_time: 40m
        exp_samples:
          - labels: 'ibfabric:maintenance_guid{kind="switch",name="0x0002c90300000002",node_guid="0x0002c90300000002",reason="later",until="1970-01-01T00:50:00Z"}'
            value: 1
    alert_rule_test:
      - eval_time: 25m
        alertname: IbfabricMaintenance
        exp_alerts: []
      - eval_time: 55m
        alertname: IbfabricMaintenance
        exp_alerts: []
""" % (RULES, self.path, link)
        path = os.path.join(self.dir, "test.yml")
        with open(path, "w") as f:
            f.write(test)
        out = subprocess.run(["promtool", "test", "rules", path], capture_output=True,
                             text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)


if __name__ == "__main__":
    unittest.main()
