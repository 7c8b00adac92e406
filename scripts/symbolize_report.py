#!/usr/bin/env python3
"""Symbolizes sanitizer reports written with symbolize=0 (scripts/test.sh, docs/testing.md).

The TSan suite runs with symbolize=0: in-process symbolization of even a suppressed report
(the simulator shim's over-read) stalls the reporting thread for seconds, long enough for MAD
timeouts of 100 ms to fail the test that happened to trigger it. Frames then read
`#3 <null> <null> (ibfabricd+0x1724ee)`; this script adds function, file and line from
addr2line, looking each module up in the build directory first, then in the system's library
directories.

usage: symbolize_report.py BUILD_DIR REPORT...   (writes the symbolized reports to stdout)
"""

import os
import re
import subprocess
import sys

FRAME = re.compile(r"^(\s*#\d+ )<null> <null> \(([^()+\s]+)\+(0x[0-9a-f]+)\)\s*$")
LIB_DIRS = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib", "/lib"]


def find_module(name, build_dir):
    for top in [build_dir] + LIB_DIRS:
        for dirpath, _, files in os.walk(top):
            if name in files:
                return os.path.join(dirpath, name)
    return None


def symbolize(module, offsets):
    """{offset: "function file:line"} for the offsets of one module."""
    r = subprocess.run(["addr2line", "-C", "-f", "-e", module] + offsets, capture_output=True,
                       text=True, check=False)
    lines = r.stdout.splitlines()
    if r.returncode != 0 or len(lines) != 2 * len(offsets):
        return {}
    return {off: "%s %s" % (lines[2 * i], lines[2 * i + 1]) for i, off in enumerate(offsets)}


def main():
    build_dir, reports = sys.argv[1], sys.argv[2:]
    texts = []
    wanted = {}
    for path in reports:
        with open(path, errors="replace") as f:
            text = f.read().splitlines()
        texts.append((path, text))
        for line in text:
            m = FRAME.match(line)
            if m:
                wanted.setdefault(m.group(2), set()).add(m.group(3))
    names = {}
    for module, offsets in wanted.items():
        path = find_module(module, build_dir)
        if not path:
            continue
        # addr2line wants an address inside the call, not the return address after it.
        calls = {o: "0x%x" % max(int(o, 16) - 1, 0) for o in offsets}
        found = symbolize(path, sorted(set(calls.values())))
        for o, call in calls.items():
            if call in found:
                names[(module, o)] = found[call]
    for path, text in texts:
        print("== %s" % path)
        for line in text:
            m = FRAME.match(line)
            if m and (m.group(2), m.group(3)) in names:
                line = "%s%s (%s+%s)" % (m.group(1), names[(m.group(2), m.group(3))], m.group(2),
                                         m.group(3))
            print(line)


if __name__ == "__main__":
    main()
