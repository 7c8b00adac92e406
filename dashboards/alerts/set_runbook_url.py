#!/usr/bin/env python3
"""Points every alert's runbook_url, and the dashboards' runbook links, at your copy of
docs/runbook.md: the one setting for runbook links. The shipped rules and dashboards use
https://ibfabric.invalid/runbook.md (a name that can never resolve, RFC 2606), because this
project owns no web address; publish docs/runbook.md where your on-call engineers can read it (a
wiki, an internal docs site) and run, before loading the rules and the dashboards:

  dashboards/alerts/set_runbook_url.py https://wiki.example.com/ibfabric/runbook [FILE ...]

Each alert's link becomes BASE#<alert name in lower case>, the runbook's section anchor; in a
dashboard (FILE ending in .json), every link titled "Runbook..." becomes BASE or BASE#<its
anchor>. FILE defaults to the shipped rules, their promtool tests and the dashboards
(dashboards/ibfabric-*.json; dashboards/generate.py takes the base from the rules, so it writes
the same links); --check only reports whether they already use BASE.
"""
import argparse
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FILES = [os.path.join(HERE, name) for name in
                 ("ibfabric.rules.yml", "ibfabric.rules.test.yml", "ibfabric.localization.test.yml")
                 ] + sorted(glob.glob(os.path.join(HERE, "..", "ibfabric-*.json")))
SHIPPED_BASE = "https://ibfabric.invalid/runbook.md"
LINK = re.compile(r"^([ \t]*runbook_url: )'?([^'#\s]*)#(\w+)'?[ \t]*$", re.M)


def dashboard_runbook_links(dashboard):
    """The links of a dashboard (its own, and its panels') titled "Runbook...": the ones
    dashboards/generate.py makes to docs/runbook.md."""
    panels = list(dashboard.get("panels", []))
    panels += [inner for p in panels for inner in p.get("panels", [])]
    for owner in [dashboard] + panels:
        for link in owner.get("links", []):
            if link.get("title", "").startswith("Runbook") and "url" in link:
                yield link


def set_in_dashboard(path, base, check):
    """Sets the runbook links of the dashboard at `path` to `base`; the number that differed,
    or None when it has none. Written as generate.py writes it (indent 2, a final newline)."""
    with open(path) as f:
        dashboard = json.load(f)
    links = list(dashboard_runbook_links(dashboard))
    if not links:
        return None
    stale = 0
    for link in links:
        anchor = link["url"].partition("#")[2]
        url = base + ("#" + anchor if anchor else "")
        stale += link["url"] != url
        link["url"] = url
    if not check:
        with open(path, "w") as f:
            json.dump(dashboard, f, indent=2, sort_keys=False)
            f.write("\n")
    return stale


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="URL of your copy of docs/runbook.md, without #anchor")
    ap.add_argument("files", nargs="*", default=DEFAULT_FILES)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a link differs")
    args = ap.parse_args()
    if "#" in args.base or not re.match(r"^\w+://\S+$", args.base):
        ap.error("base must be an absolute URL without '#', e.g. https://wiki.example.com/runbook")
    stale = 0
    for path in args.files:
        if path.endswith(".json"):
            n = set_in_dashboard(path, args.base, args.check)
            if n is None:
                print("%s: no runbook link found" % path, file=sys.stderr)
                return 1
            stale += n
            continue
        with open(path) as f:
            text = f.read()
        links = LINK.findall(text)
        if not links:
            print("%s: no runbook_url found" % path, file=sys.stderr)
            return 1
        stale += sum(1 for _, base, _ in links if base != args.base)
        if not args.check:
            with open(path, "w") as f:
                f.write(LINK.sub(lambda m: "%s%s#%s" % (m.group(1), args.base, m.group(3)), text))
    if args.check and stale:
        print("%d runbook links do not use %s" % (stale, args.base), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
