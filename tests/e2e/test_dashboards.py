"""Lint of the shipped Grafana dashboards (dashboards/*.json).

Valid JSON written by dashboards/generate.py (a committed file that differs from the generator's
output fails), unique uids, a datasource variable and no ${DS_...} import placeholders, job and
instance variables; every panel has a title, a description and a unit from Grafana's unit list,
and uses the datasource variable; every metric selector filters on job and instance (but for the
localizer's series and ALERTS, below); every rate/irate uses $__rate_interval (increase also
$__range), and every counter is read through one of them; every query parses (promtool).
The annotation queries are linted as the panels' queries are.

Links: every dashboard links to every other (a dropdown of the tag every one carries), to the
landing board and to the runbook at the base the alert rules use (set_runbook_url.py sets both);
every panel link goes to a runbook section of a shipped alert or to a dashboard that exists.
Annotations: every dashboard shows the shipped alerts while they fire (critical and warning
enabled, info not) and the culprits ibfabric-localize names.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from ibfabric_testlib import require_tools, source_dir
from shipped import dashboard_queries

DASHBOARDS = os.path.join(source_dir(), "dashboards")
RULES = os.path.join(DASHBOARDS, "alerts", "ibfabric.rules.yml")
RUNBOOK = os.path.join(source_dir(), "docs", "runbook.md")
SET_RUNBOOK_URL = os.path.join(DASHBOARDS, "alerts", "set_runbook_url.py")
LANDING = "ibfabric-oncall"

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
# Prometheus's own series: `up` of the daemons' targets (filtered on job and instance like the
# rest), and the alerts its rules evaluate (ALERTS, ALERTS_FOR_STATE): those carry the labels of
# what they are about, not the daemons' job and instance, and must select the shipped alerts.
UP_RE = re.compile(r'(?<![\w:"])up\b(\s*\{[^}]*\})?')
ALERTS_RE = re.compile(r"\b(ALERTS(?:_FOR_STATE)?)\b(\s*\{[^}]*\})?")
SHIPPED_ALERTS = 'alertname=~"Ibfabric.*"'


def dashboard_files():
    return sorted(glob.glob(os.path.join(DASHBOARDS, "*.json")))


def panels_of(dashboard):
    for p in dashboard.get("panels", []):
        yield p
        for inner in p.get("panels", []):
            yield inner


def strip_strings(expr):
    return re.sub(r'"[^"]*"', '""', expr)


def rules():
    """(alert names, runbook base) of the shipped rules."""
    with open(RULES) as f:
        text = f.read()
    names = set(re.findall(r"^\s*- alert: (\w+)\s*$", text, re.M))
    bases = set(re.findall(r"^\s*runbook_url: '?([^'#\s]*)#\w+'?\s*$", text, re.M))
    assert len(bases) == 1, bases
    return names, bases.pop()


def runbook_links(dashboard):
    """Every link whose title starts with "Runbook" (set_runbook_url.py rewrites these)."""
    for link in dashboard.get("links", []):
        if link.get("title", "").startswith("Runbook"):
            yield link
    for p in panels_of(dashboard):
        for link in p.get("links", []):
            if link.get("title", "").startswith("Runbook"):
                yield link


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
        for m in ALERTS_RE.finditer(expr):
            seen += 1
            self.assertIn(SHIPPED_ALERTS, m.group(2) or "", "%s in %s" % (m.group(1), expr))
        for m in UP_RE.finditer(expr):
            seen += 1
            self.assertIn('job=~"$job",instance=~"$instance"', m.group(1) or "", expr)
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
        seen += len(re.findall(r"\bibfabric:\w+", expr))
        self.assertGreater(seen, 0, "no ibfabric metric, up or ALERTS in " + expr)
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

    def test_the_strict_parts_of_the_lint_still_catch(self):
        # The exceptions are narrow: ALERTS of any other alert, `up` of any job, a daemon
        # metric without job or instance all fail.
        for bad in ('ALERTS{alertstate="firing"}', 'count(ALERTS)',
                    'ALERTS_FOR_STATE{alertname="Other"}', 'up == 0', 'up{job=~"$job"}',
                    'ibfabric_collector_success == 0', 'ibfabric_build_info{job=~"$job"}',
                    'rate(ibfabric_localize_query_failures_total[5m])'):
            with self.subTest(expr=bad):
                with self.assertRaises(AssertionError):
                    self.check_expr(bad)
        self.check_expr('count(ALERTS{alertname=~"Ibfabric.*",alertstate="firing"})')
        self.check_expr('count(up{job=~"$job",instance=~"$instance"} == 0)')
        self.check_expr("max(ibfabric_localize_evidence_age_seconds)")

    def test_landing_board(self):
        landing = [d for d in self.dashboards.values() if d["uid"] == LANDING]
        self.assertEqual(len(landing), 1)
        d = landing[0]
        exprs = " ".join(t["expr"] for p in panels_of(d) for t in p.get("targets", []))
        # What fires and what is pending, of every Ibfabric* alert (no list of names: alerts
        # added later show up); the culprits with their evidence; the localizer's and the
        # daemons' health; the pairs nothing explains.
        for needed in ('ALERTS{alertname=~"Ibfabric.*",alertstate="firing"}',
                       'ALERTS{alertname=~"Ibfabric.*",alertstate="pending"}',
                       "ibfabric_localize_suspect_info", "blast_radius", "evidence",
                       "ibfabric_localize_withheld_info", "ibfabric_localize_up",
                       "ibfabric_localize_store_up", "ibfabric_localize_evidence_age_seconds",
                       "ibfabric_localize_evidence_usable",
                       "ibfabric_localize_query_failures_total",
                       "ibfabric_localize_evaluation_duration_seconds",
                       'up{job=~"$job",instance=~"$instance"}', "ibfabric_collector_success",
                       "ibfabric_localize_pair_unexplained_loss_ratio",
                       "ibfabric_localize_pair_unexplained_jitter_seconds",
                       "ibfabric_localize_pair_unexplained_rtt_spikes"):
            self.assertIn(needed, exprs)
        self.assertNotRegex(exprs, r'alertname=~?"Ibfabric[A-Z]', "an alert named by name")
        # The suspects table is the probes board's, not a copy.
        suspects = [[p for p in panels_of(b) if p["title"] == "Suspects"]
                    for b in self.dashboards.values()]
        tables = [s[0] for s in suspects if s]
        self.assertEqual(len(tables), 2)
        self.assertEqual(tables[0]["targets"], tables[1]["targets"])

    def test_links(self):
        alerts, base = rules()
        with open(RUNBOOK) as f:
            sections = {h.lower() for h in re.findall(r"^## (\w+)$", f.read(), re.M)}
        uids = {d["uid"] for d in self.dashboards.values()}
        tagged = {}
        for d in self.dashboards.values():
            for tag in d.get("tags", []):
                tagged.setdefault(tag, set()).add(d["uid"])
        self.assertEqual(tagged.get("ibfabric"), uids, "every board carries the tag ibfabric")
        self.assertEqual(tagged.get(LANDING), {LANDING})
        for name, d in self.dashboards.items():
            with self.subTest(dashboard=name):
                links = d["links"]
                by_tag = [l for l in links if l["type"] == "dashboards"]
                for link in by_tag:
                    # A dashboards link lists the boards with its tags; each must reach one
                    # other than this one.
                    self.assertTrue(link["tags"])
                    reached = set.intersection(*(tagged.get(t, set()) for t in link["tags"]))
                    self.assertTrue(reached - {d["uid"]}, link)
                    self.assertTrue(link["keepTime"])
                    self.assertTrue(link["includeVars"])
                self.assertIn(["ibfabric"], [l["tags"] for l in by_tag if l["asDropdown"]])
                if d["uid"] != LANDING:
                    self.assertIn([LANDING], [l["tags"] for l in by_tag])
                [runbook] = [l for l in links if l["type"] == "link"]
                self.assertEqual(runbook["url"], base)
                self.assertTrue(runbook["title"].startswith("Runbook"))
                for p in panels_of(d):
                    for link in p.get("links", []):
                        url = link["url"]
                        if link["title"].startswith("Runbook"):
                            page, _, anchor = url.partition("#")
                            self.assertEqual(page, base, link)
                            if anchor:
                                self.assertIn(anchor, sections, "no section in docs/runbook.md")
                                self.assertIn(anchor, {a.lower() for a in alerts})
                            continue
                        m = re.match(r"^/d/([\w-]+)\?", url)
                        self.assertTrue(m, "a panel link that is neither the runbook nor a board: "
                                        + url)
                        self.assertIn(m.group(1), uids, "a link to no dashboard: " + url)
                        self.assertIn("${__url_time_range}", url)
        # The culprits' tables link to the runbook sections of their alerts.
        for d in self.dashboards.values():
            for p in panels_of(d):
                if p["title"] == "Suspects":
                    self.assertIn(base + "#ibfabricsuspectlink", [l["url"] for l in p["links"]])

    def test_annotations(self):
        for name, d in self.dashboards.items():
            with self.subTest(dashboard=name):
                annotations = {a["name"]: a for a in d["annotations"]["list"]}
                self.assertEqual(annotations["Annotations & Alerts"].get("builtIn"), 1)
                prometheus = [a for a in annotations.values() if not a.get("builtIn")]
                self.assertEqual(sorted(a["name"] for a in prometheus),
                                 ["Critical alerts", "Culprits named", "Info alerts",
                                  "Warning alerts"])
                for a in prometheus:
                    self.assertEqual(a["datasource"], {"type": "prometheus",
                                                       "uid": "${datasource}"})
                    self.check_expr(a["expr"])
                    # Grafana 10 and 11.0 read expr and step; later versions the target (and
                    # move expr and step there when it has none).
                    self.assertEqual(a["target"]["expr"], a["expr"])
                    self.assertEqual(a["target"]["interval"], a["step"])
                    self.assertRegex(a["step"], r"^\d+[smh]$")
                    self.assertIs(a["useValueForTime"], False)
                    self.assertTrue(a["titleFormat"] and a["textFormat"] and a["iconColor"])
                    # The text names a label every event has.
                    for label in re.findall(r"\{\{(\w+)\}\}", a["textFormat"]):
                        self.assertRegex(a["expr"], r'"%s"' % label)
                for severity, on in (("critical", True), ("warning", True), ("info", False)):
                    a = annotations[severity.capitalize() + " alerts"]
                    self.assertIs(a["enable"], on)
                    self.assertIn('ALERTS{alertname=~"Ibfabric.*",alertstate="firing",'
                                  'severity="%s"}' % severity, a["expr"])
                culprits = annotations["Culprits named"]
                self.assertIs(culprits["enable"], True)
                self.assertIn("ibfabric_localize_suspect,", culprits["expr"])

    @require_tools("promtool")
    def test_every_query_parses(self):
        # Also those no end-to-end test has data for (NO_DATA_HERE): each query, variables
        # substituted as the end-to-end tests do, as a recording rule promtool checks.
        queries = list(dashboard_queries("1m"))
        self.assertGreater(len(queries), 100)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "queries.yml")
            with open(path, "w") as f:
                f.write("groups:\n  - name: dashboards\n    rules:\n")
                for n, (_, _, expr) in enumerate(queries):
                    f.write("      - record: dashboard_query_%d\n        expr: %s\n"
                            % (n, json.dumps(expr)))
            out = subprocess.run(["promtool", "check", "rules", path], capture_output=True,
                                 text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_runbook_links_come_from_the_rules_setting(self):
        # set_runbook_url.py rewrites the dashboards' runbook links with the rules' (its
        # default files), and nothing else in them.
        _, base = rules()
        new = "https://wiki.example.com/ibfabric/runbook"
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for path in self.files:
                shutil.copy(path, tmp)
                files.append(os.path.join(tmp, os.path.basename(path)))
            check = subprocess.run([sys.executable, SET_RUNBOOK_URL, "--check", base] + files,
                                   capture_output=True, text=True)
            self.assertEqual(check.returncode, 0, check.stderr)
            check = subprocess.run([sys.executable, SET_RUNBOOK_URL, "--check", new] + files,
                                   capture_output=True, text=True)
            self.assertEqual(check.returncode, 1)
            subprocess.run([sys.executable, SET_RUNBOOK_URL, new] + files, check=True)
            subprocess.run([sys.executable, SET_RUNBOOK_URL, "--check", new] + files, check=True)
            for path in files:
                name = os.path.basename(path)
                with open(path) as f:
                    text = f.read()
                    rewritten = json.loads(text)
                self.assertTrue(text.endswith("}\n"))
                before = self.dashboards[name]
                old_links = list(runbook_links(before))
                new_links = list(runbook_links(rewritten))
                self.assertEqual([l["url"].replace(base, new, 1) for l in old_links],
                                 [l["url"] for l in new_links])
                for link in new_links:
                    link["url"] = link["url"].replace(new, base, 1)
                self.assertEqual(rewritten, before, "%s: more than the links changed" % name)
        with open(SET_RUNBOOK_URL) as f:
            self.assertIn("ibfabric-*.json", f.read(), "the dashboards are among its defaults")


if __name__ == "__main__":
    unittest.main()
