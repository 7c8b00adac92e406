"""Lint of the shipped Grafana dashboards (dashboards/*.json).

Valid JSON written by dashboards/generate.py (a committed file that differs from the generator's
output fails), unique uids, a datasource variable and no ${DS_...} import placeholders, job and
instance variables; every panel has a title, a description and a unit from Grafana's unit list,
and uses the datasource variable; every metric selector filters on job and instance; every
rate/irate uses $__rate_interval (increase also $__range), and every counter is read through one of them.
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from ibfabric_testlib import source_dir

DASHBOARDS = os.path.join(source_dir(), "dashboards")

# Unit ids from Grafana's value formats (packages/grafana-data/src/valueFormats/categories.ts)
# that these dashboards may use.
GRAFANA_UNITS = {
    "none", "short", "percent", "percentunit", "bool", "string",
    "ns", "µs", "ms", "s", "m", "h", "d", "dtdurations", "dtdurationms",
    "dateTimeAsIso", "dateTimeFromNow",
    "bits", "bytes", "decbytes", "decbits",
    "bps", "Bps", "binBps", "binbps", "pps", "reqps", "ops", "cps", "rps", "wps",
}
COUNTER_SUFFIXES = ("_total", "_bucket", "_count", "_sum")
METRIC_RE = re.compile(r"\b((?:ibfabric|process)_[a-zA-Z0-9_]+)\b(\s*\{[^}]*\})?")


def dashboard_files():
    return sorted(glob.glob(os.path.join(DASHBOARDS, "*.json")))


def panels_of(dashboard):
    for p in dashboard.get("panels", []):
        yield p
        for inner in p.get("panels", []):
            yield inner


def strip_strings(expr):
    return re.sub(r'"[^"]*"', '""', expr)


class DashboardLintTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = dashboard_files()
        cls.dashboards = {}
        for path in cls.files:
            with open(path) as f:
                cls.dashboards[os.path.basename(path)] = json.load(f)

    def test_there_are_dashboards(self):
        self.assertGreaterEqual(len(self.dashboards), 3)

    def test_committed_files_are_what_the_generator_writes(self):
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([sys.executable, os.path.join(DASHBOARDS, "generate.py"), out],
                           check=True, timeout=60)
            generated = sorted(os.listdir(out))
            self.assertEqual(generated, sorted(self.dashboards))
            for name in generated:
                with open(os.path.join(out, name)) as f, \
                        open(os.path.join(DASHBOARDS, name)) as g:
                    self.assertEqual(f.read(), g.read(),
                                     "%s is stale: run python3 dashboards/generate.py" % name)

    def test_dashboard_level(self):
        uids = [d.get("uid") for d in self.dashboards.values()]
        self.assertEqual(len(uids), len(set(uids)), "duplicate uid")
        for name, d in self.dashboards.items():
            with self.subTest(dashboard=name):
                self.assertTrue(d.get("uid"))
                self.assertTrue(d.get("title"))
                self.assertTrue(d.get("description"))
                self.assertGreaterEqual(d.get("schemaVersion", 0), 39)
                self.assertNotIn("__inputs", d)
                with open(os.path.join(DASHBOARDS, name)) as f:
                    self.assertNotIn("${DS_", f.read())
                names = {v["name"]: v for v in d["templating"]["list"]}
                self.assertEqual(names["datasource"]["type"], "datasource")
                self.assertEqual(names["datasource"]["query"], "prometheus")
                self.assertIn("job", names)
                self.assertIn("instance", names)
                ids = [p["id"] for p in panels_of(d)]
                self.assertEqual(len(ids), len(set(ids)), "duplicate panel id")

    def test_every_panel(self):
        for name, d in self.dashboards.items():
            for p in panels_of(d):
                if p["type"] == "row":
                    continue
                with self.subTest(dashboard=name, panel=p.get("title")):
                    self.assertTrue(p.get("title"))
                    self.assertTrue(p.get("description"))
                    unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit")
                    self.assertIn(unit, GRAFANA_UNITS)
                    self.assertEqual(p["datasource"]["uid"], "${datasource}")
                    self.assertTrue(p.get("targets"))
                    for t in p["targets"]:
                        self.assertEqual(t["datasource"]["uid"], "${datasource}")
                        self.check_expr(t["expr"])

    def check_expr(self, expr):
        self.assertTrue(expr.strip())
        seen = 0
        for m in METRIC_RE.finditer(expr):
            seen += 1
            metric, selector = m.group(1), m.group(2) or ""
            if metric.startswith("ibfabric_localize_"):
                # The localizer's verdicts: cluster-wide, from its own job, not a daemon's.
                continue
            self.assertIn('job=~"$job"', selector, "%s in %s" % (metric, expr))
            # Every instance on purpose: a value another node reports (the fabric sweep's
            # counters beside a prober's path).
            self.assertTrue('instance=~"$instance"' in selector or 'instance=~".+"' in selector,
                            "%s in %s" % (metric, expr))
        # Recording rules are cluster-wide: no job or instance label to select.
        seen += len(re.findall(r"\bibfabric:\w+:\w+", expr))
        self.assertGreater(seen, 0, "no ibfabric metric in " + expr)
        bare = strip_strings(expr)
        for m in re.finditer(r"\b(rate|irate|increase)\s*\(", bare):
            rest = bare[m.end():]
            depth, end = 1, 0
            for end, ch in enumerate(rest):
                depth += ch == "("
                depth -= ch == ")"
                if depth == 0:
                    break
            # A rate over $__rate_interval; an increase may also span the dashboard's range (a
            # table of totals such as the worst cables).
            window = r"(rate_interval|range)" if m.group(1) == "increase" else r"rate_interval"
            self.assertRegex(rest[:end], r"\[\$__%s\]\s*$" % window, expr)
        for m in METRIC_RE.finditer(bare):
            if m.group(1).endswith(COUNTER_SUFFIXES):
                self.assertRegex(bare[:m.start()], r"\b(rate|irate|increase)\s*\(\s*$",
                                 "counter %s not read through a rate in %s" % (m.group(1), expr))


if __name__ == "__main__":
    unittest.main()
