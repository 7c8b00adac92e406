#!/usr/bin/env python3
"""Points every alert's runbook_url at your copy of docs/runbook.md: the one setting for runbook
links. The shipped rules use https://ibfabric.invalid/runbook.md (a name that can never resolve,
RFC 2606), because this project owns no web address; publish docs/runbook.md where your on-call
engineers can read it (a wiki, an internal docs site) and run, before loading the rules:

  dashboards/alerts/set_runbook_url.py https://wiki.example.com/ibfabric/runbook [FILE ...]

Each link becomes BASE#<alert name in lower case>, the runbook's section anchor. FILE defaults to
the shipped rules and their promtool tests; --check only reports whether they already use BASE.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FILES = [os.path.join(HERE, name) for name in
                 ("ibfabric.rules.yml", "ibfabric.rules.test.yml", "ibfabric.localization.test.yml")]
SHIPPED_BASE = "https://ibfabric.invalid/runbook.md"
LINK = re.compile(r"^([ \t]*runbook_url: )'?([^'#\s]*)#(\w+)'?[ \t]*$", re.M)


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
