"""The shipped alert rules: `promtool check rules` and `promtool test rules` pass (the cases of
every alert, and those of the localization alerts, which fire on ibfabric-localize's verdicts),
every alert has a firing and a non-firing unit test (but IbfabricWatchdog, which always fires
and must have no non-firing one), carries severity, summary, description and a runbook_url
whose section exists in docs/runbook.md, and reads counters only through rate() or increase().

The rules file is read with a small line parser (the standard library has no YAML); it fails
loudly when the file's shape is not the one it understands, and the rule count must equal what
promtool reports.
"""

import os
import re
import subprocess
import unittest

from ibfabric_testlib import source_dir

ALERTS_DIR = os.path.join(source_dir(), "dashboards", "alerts")
RULES = os.path.join(ALERTS_DIR, "ibfabric.rules.yml")
RULE_TESTS = os.path.join(ALERTS_DIR, "ibfabric.rules.test.yml")
LOCALIZATION_TESTS = os.path.join(ALERTS_DIR, "ibfabric.localization.test.yml")
RUNBOOK = os.path.join(source_dir(), "docs", "runbook.md")
# Fires always, by design (a dead man's switch outside pages when its heartbeat stops): severity
# `none`, no non-firing case, no label to describe.
WATCHDOG = "IbfabricWatchdog"


def parse_rules(text):
    """Returns [{'alert': name, 'expr': str, 'labels': {...}, 'annotations': {...}}]."""
    rules = []
    current = None
    section = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^      - (alert|record): (\S+)$", line)
        if m:
            current = {"kind": m.group(1), "alert": m.group(2), "expr": "", "labels": {},
                       "annotations": {}}
            rules.append(current)
            section = None
        elif current is not None and re.match(r"^        expr: \|$", line):
            body = []
            while i + 1 < len(lines) and lines[i + 1].startswith("          "):
                i += 1
                body.append(lines[i].strip())
            current["expr"] = " ".join(body)
        elif current is not None and line.startswith("        expr: "):
            current["expr"] = line[len("        expr: "):]
        elif current is not None and line in ("        labels:", "        annotations:"):
            section = line.strip()[:-1]
        elif current is not None and section and re.match(r"^          \S", line):
            key, _, value = line.strip().partition(": ")
            if value in ("|", "|-"):
                # A block scalar (a template written across lines): the lines below it.
                body = []
                while i + 1 < len(lines) and lines[i + 1].startswith("            "):
                    i += 1
                    body.append(lines[i].strip())
                value = "\n".join(body)
            current[section][key] = value.strip("'\"")
        i += 1
    return rules


def strip_strings(expr):
    return re.sub(r'"[^"]*"', '""', expr)


class AlertRulesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(RULES) as f:
            cls.rules = parse_rules(f.read())
        cls.tests_text = ""
        for path in (RULE_TESTS, LOCALIZATION_TESTS):
            with open(path) as f:
                cls.tests_text += f.read()
        with open(RUNBOOK) as f:
            cls.runbook = f.read()

    def test_promtool_check_rules(self):
        out = subprocess.run(["promtool", "check", "rules", RULES], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        m = re.search(r"SUCCESS: (\d+) rules found", out.stdout + out.stderr)
        self.assertIsNotNone(m, out.stdout)
        self.assertEqual(int(m.group(1)), len(self.rules),
                         "the line parser of this test missed rules; keep the file's layout")

    def test_promtool_test_rules(self):
        out = subprocess.run(["promtool", "test", "rules", RULE_TESTS, LOCALIZATION_TESTS],
                             capture_output=True, text=True, timeout=120, cwd=ALERTS_DIR)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_every_alert_has_a_firing_and_a_non_firing_case(self):
        cases = re.findall(r"alertname: (\w+)\n\s+exp_alerts:( \[\])?", self.tests_text)
        firing = {name for name, empty in cases if not empty}
        quiet = {name for name, empty in cases if empty}
        names = {r["alert"] for r in self.rules if r["kind"] == "alert"}
        self.assertGreater(len(names), 0)
        self.assertEqual(sorted(names - firing), [], "alerts without a firing test")
        self.assertIn(WATCHDOG, names)
        self.assertEqual(sorted(names - quiet), [WATCHDOG], "alerts without a non-firing test")
        self.assertEqual(sorted((firing | quiet) - names), [], "tests of alerts that do not exist")

    def test_every_alert_is_documented_and_labelled(self):
        anchors = {h.strip().lower() for h in re.findall(r"^## (\w+)$", self.runbook, re.M)}
        for rule in self.rules:
            if rule["kind"] == "record":
                self.assertRegex(rule["alert"], r"^ibfabric:\w+(:\w+)?$", "a record's name")
                continue
            with self.subTest(alert=rule["alert"]):
                if rule["alert"] == WATCHDOG:
                    self.assertEqual((rule["labels"].get("severity"), rule["expr"]),
                                     ("none", "vector(1)"))
                else:
                    self.assertIn(rule["labels"].get("severity"), ("critical", "warning", "info"))
                self.assertTrue(rule["annotations"].get("summary"))
                self.assertNotIn("{{", rule["annotations"]["summary"], "summary must be static")
                description = rule["annotations"].get("description", "")
                # absent() and vector(1) have no labels to name
                if not rule["expr"].startswith(("absent(", "vector(")):
                    self.assertIn("{{", description)
                self.assertTrue(description)
                url = rule["annotations"].get("runbook_url", "")
                # The shipped base; set_runbook_url.py points every link at the operator's copy.
                self.assertRegex(url, r"^https://ibfabric\.invalid/runbook\.md#\w+$")
                anchor = url.rsplit("#", 1)[1]
                self.assertEqual(anchor, rule["alert"].lower())
                self.assertIn(anchor, anchors, "no section in docs/runbook.md")

    def test_runbook_links_come_from_one_setting(self):
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            for path in (RULES, RULE_TESTS, LOCALIZATION_TESTS):
                shutil.copy(path, tmp)
            files = [os.path.join(tmp, os.path.basename(p))
                     for p in (RULES, RULE_TESTS, LOCALIZATION_TESTS)]
            script = os.path.join(ALERTS_DIR, "set_runbook_url.py")
            base = "https://wiki.example.com/ibfabric/runbook"
            check = subprocess.run([script, "--check", base] + files, capture_output=True)
            self.assertEqual(check.returncode, 1, "the shipped links already use the new base?")
            subprocess.run([script, base] + files, check=True)
            subprocess.run([script, "--check", base] + files, check=True)
            with open(files[0]) as f:
                urls = [r["annotations"]["runbook_url"] for r in parse_rules(f.read())
                        if r["kind"] == "alert"]
            alerts = [r for r in self.rules if r["kind"] == "alert"]
            self.assertEqual(len(urls), len(alerts))
            for url, rule in zip(urls, alerts):
                self.assertEqual(url, base + "#" + rule["alert"].lower())
            # The promtool tests expect the same links, so they still pass.
            out = subprocess.run(["promtool", "test", "rules"] + files[1:], capture_output=True,
                                 text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            bad = subprocess.run([script, "not a url"] + files, capture_output=True, text=True)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("absolute URL", bad.stderr)

    def test_counters_only_through_rate_or_increase(self):
        for rule in self.rules:
            expr = strip_strings(rule["expr"])
            with self.subTest(alert=rule["alert"]):
                self.assertTrue(expr, "empty expression")
                self.assertNotRegex(expr, r"\b(delta|idelta)\s*\(", "delta on a counter")
                for m in re.finditer(r"\b(\w+_total)\b", expr):
                    before = expr[:m.start()]
                    self.assertRegex(before, r"\b(rate|irate|increase)\s*\(\s*$",
                                     "%s is not read through rate()/increase()" % m.group(1))


if __name__ == "__main__":
    unittest.main()
