"""The shipped alert rules and dashboard queries, in the form end-to-end tests feed them to a
server with Prometheus's API (Prometheus, VictoriaMetrics, vmalert).

Python standard library only.
"""

import glob
import json
import os
import re

from ibfabric_testlib import source_dir

RULES = os.path.join(source_dir(), "dashboards", "alerts", "ibfabric.rules.yml")
# Dashboard queries that cannot have data on this machine, and why. Nothing else may come back
# empty.
NO_DATA_HERE = {
    # Per-VF traffic comes from the kernel over rtnetlink; this kernel has no VFs (the SR-IOV
    # fixture tree gives the sysfs side only).
    "VF received bytes": "no VFs in this kernel",
    "VF transmitted bytes": "no VFs in this kernel",
    "VF dropped packets": "no VFs in this kernel",
    # The pod of a VF comes from the kubelet's pod-resources socket; no kubelet here
    # (tests/integration/test_sriov_kubelet.py runs a fake one).
    "Pods holding VFs": "no kubelet",
    "Kubelet pod-resources answers": "no kubelet",
    "Kubelet pod-resources errors per second": "no kubelet",
    # Localization: the probes here are UDP on loopback, which the fabric does not carry.
    # tests/integration/test_localization.py checks these panels on MAD probes and a bad cable.
    "Suspects": "no faulty cable or host",
    "Path of the selected prober and peer": "no MAD probes",
    "Untraced paths": "no untraceable path",
    "Paths per state": "no paths collector",
    # Congestion: no port of the simulated fabric waits until test_5c makes one (after the
    # dashboard test), and the demo's switches are Quantum-2s, whose tick is known.
    "Congested switch ports now": "no congested port yet",
    "Congested switch ports by tier and role": "no congested port yet",
    "Switch ports waiting where the tick is not known: ticks per word": "every tick known",
    # The landing board (ibfabric-oncall) and every board's annotations: nothing fires, nothing
    # is named and no probe pair is lossy on a healthy fabric. test_prometheus_e2e checks the
    # alert panels while IbfabricPortDown is pending and firing (test_3), and the unexplained
    # loss and the daemons down while a responder is stopped (test_5); test_localization the
    # culprits' annotation and the firing alerts while it names two cables.
    "Firing now": "nothing fires on a healthy fabric",
    "Pending": "nothing pending on a healthy fabric",
    "Critical alerts": "nothing fires on a healthy fabric",
    "Warning alerts": "nothing fires on a healthy fabric",
    "Info alerts": "nothing fires on a healthy fabric",
    "Culprits named": "no faulty cable or host",
    "Suspects withheld": "no evidence too old to use",
    "Unexplained probe loss": "no probe lost on a healthy fabric",
    "Unexplained probe jitter": "no jitter above 500 us on a healthy fabric",
    "Unexplained RTT spikes": "spikes on loopback only now and then",
    "Localizer query failures per second": "no localizer query fails",
    # Maintenance: nothing is declared in maintenance on the test fabric (promtool and
    # tests/e2e/test_alertmanager_config.py test it).
    "In maintenance now": "nothing in maintenance",
    "Alerts held back by maintenance": "nothing in maintenance",
    "Daemons down, collectors failing or stuck": "every daemon up, every collector working",
    # The training jobs a culprit hurts: no culprit and no job here (test_jobs checks it).
    "Jobs the culprits hurt": "no culprit named, no kube-state-metrics",
}
JOB_BOARD = "ibfabric-job.json"


def _job_board_panels():
    """The titles of the job board's panels: no test but tests/integration/test_jobs.py has a
    training job (kube-state-metrics) to show; that test runs every one of its queries with a
    job's data. Titles of their own, so that listing them hides no other board's panel."""
    titles, others = set(), set()
    for path in glob.glob(os.path.join(source_dir(), "dashboards", "*.json")):
        with open(path) as f:
            panels = [p["title"] for p in json.load(f)["panels"] if p["type"] != "row"]
        (titles if os.path.basename(path) == JOB_BOARD else others).update(panels)
    assert not titles & others, "job board panels titled as other boards' panels: %s" % (
        titles & others)
    return titles


NO_DATA_HERE.update((title, "no training job here (no kube-state-metrics): test_jobs checks "
                     "the job board") for title in _job_board_panels())


def shortened_rules(directory, short_for="3s", min_window=4, for_divisor=None,
                    window_divisor=60):
    """The shipped rules on a test's time scale, written to directory/ibfabric.rules.yml: every
    `for:` becomes short_for (or, with for_divisor, is divided by it but never below short_for:
    alerts keep their order), every range window is divided by window_divisor (60: a minute
    becomes a second, 1h 60s, 1d 1440s) but never below min_window seconds (a rate needs two
    scrapes in its window), and a group's own evaluation `interval:` and an `offset` are divided
    by 10. So alerts fire and resolve within a test; expressions and thresholds are otherwise as
    shipped."""
    with open(RULES) as f:
        text = f.read()
    unit = {"s": 1, "m": 60, "h": 3600}

    def scaled_for(m):
        if for_divisor is None:
            return m.group(1) + short_for
        shipped = int(m.group(2)) * unit[m.group(3)]
        return m.group(1) + "%ds" % max(int(short_for.rstrip("s")), shipped // for_divisor)
    text, n = re.subn(r"^(\s+for: )(\d+)([smh])$", scaled_for, text, flags=re.M)
    assert n > 0 and not re.search(r"^\s+for: (?!\d+s$)", text, re.M)
    seconds = {"m": 60, "h": 3600, "d": 86400}

    def scaled(m):
        return "%ds" % max(min_window,
                           int(m.group(1)) * seconds[m.group(2)] // window_divisor)
    text, n = re.subn(r"\[(\d+)([mhd])\]", lambda m: "[%s]" % scaled(m), text)
    assert n > 0
    text = re.sub(r"offset (\d+)s\b", lambda m: "offset %ds" % max(1, int(m.group(1)) // 10),
                  text)
    text = re.sub(r"^(    interval: )(\d+)s$",
                  lambda m: m.group(1) + "%gs" % max(1, int(m.group(2)) // 10), text, flags=re.M)
    path = os.path.join(directory, "ibfabric.rules.yml")
    with open(path, "w") as f:
        f.write(text)
    return path


def rule_exprs():
    """[(alert or record name, expr)] of the shipped rules, as shipped (read without a YAML
    library: the file's `- alert:` / `- record:` / `expr:` layout, a one-line expr or a `|`
    block)."""
    with open(RULES) as f:
        lines = f.read().splitlines()
    out = []
    name = None
    i = 0
    while i < len(lines):
        m = re.match(r"\s*- (?:alert|record): (\S+)$", lines[i])
        if m:
            name = m.group(1)
        m = re.match(r"(\s*)expr: (.*)$", lines[i])
        if m and name:
            if m.group(2).strip() == "|":
                indent = len(m.group(1))
                block = []
                while i + 1 < len(lines) and (not lines[i + 1].strip() or
                                              len(lines[i + 1]) - len(lines[i + 1].lstrip())
                                              > indent):
                    i += 1
                    block.append(lines[i].strip())
                expr = " ".join(b for b in block if b)
            else:
                expr = m.group(2).strip()
            out.append((name, expr))
            name = None
        i += 1
    return out


def dashboard_queries(rate_interval, job="ibfabric", dashboard_range="5m", variables=None):
    """(dashboard file, panel title, expr) of every query of every shipped dashboard, and
    (dashboard file, annotation name, expr) of its Prometheus annotation queries, with
    $__rate_interval set to rate_interval, $__range to dashboard_range, $job to job, the
    variables named in `variables` ({name: value}: the job board's namespace, job_name, and node
    as Grafana writes a multi-value variable in a regex: "(a|b)") to their value, and every
    other variable ($instance, $device, $pf) matching all."""
    def substituted(expr):
        expr = expr.replace("$__rate_interval", rate_interval)
        expr = expr.replace("$__range", dashboard_range)
        expr = expr.replace('"$job"', '"%s"' % job)
        for name, value in (variables or {}).items():
            expr = expr.replace('"$%s"' % name, json.dumps(value))
        # $instance, $device, $pf: all (not label_replace's "$1")
        return re.sub(r'"\$[A-Za-z_]\w*"', '".+"', expr)

    for path in sorted(glob.glob(os.path.join(source_dir(), "dashboards", "*.json"))):
        with open(path) as f:
            dashboard = json.load(f)
        for panel in dashboard["panels"]:
            for t in panel.get("targets", []):
                yield os.path.basename(path), panel["title"], substituted(t["expr"])
        for annotation in dashboard.get("annotations", {}).get("list", []):
            if "expr" in annotation:
                yield os.path.basename(path), annotation["name"], substituted(annotation["expr"])
