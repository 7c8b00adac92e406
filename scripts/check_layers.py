#!/usr/bin/env python3
"""Fails when a source file includes a header by a path that climbs out of its include roots
("../", or an absolute path), quoted or angled; or when localize/ includes an I/O or clock
header, or a header of another layer.

The layers themselves (docs/design.md, "Layers") are the compiler's to enforce: each layer's
library exposes an include root of its own and no include path covers the whole tree, so a
header of a layer a target does not link is not found. A relative path that climbs out would
reach it anyway; every build runs this check (the check_layers target of CMakeLists.txt) so that
none does. Standard library only.

    scripts/check_layers.py ROOT     # exit 1 and one line per include that climbs out
"""

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)
SOURCES = (".h", ".cpp", ".c")
FOLDERS = ("config", "core", "mad", "ib", "collectors", "exporters", "localize", "query", "daemon",
           "localizer", "kubelet", "tests", "bench")
# localize/ is the attribution: pure code, no I/O (docs/design.md). Its library links nothing, but
# the standard library's and the system's I/O headers are on every include path, so this check
# holds it to its own headers and the standard library without I/O.
NO_IO = "localize/"
NO_IO_HEADERS = re.compile(r"^(fstream|iostream|istream|ostream|cstdio|stdio\.h|filesystem|"
                           r"thread|future|chrono|ctime|random|boost/.*|unistd\.h|sys/.*|"
                           r"spdlog/.*)$")


def check(root):
    problems = []
    for folder in FOLDERS:
        for directory, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(directory, name)
                source = os.path.relpath(path, root).replace(os.sep, "/")
                with open(path, errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    target = m.group(2)
                    if source.startswith(NO_IO) and (
                            NO_IO_HEADERS.match(target) or
                            (m.group(1) == '"' and not target.startswith(NO_IO))):
                        line = text.count("\n", 0, m.start()) + 1
                        problems.append(
                            "%s:%d: #include %s: localize/ does no I/O and knows no clock: the "
                            "standard library without I/O and its own headers only "
                            "(docs/design.md, \"Layers\")" % (source, line, target))
                        continue
                    if target.startswith("/") or ".." in target.split("/"):
                        line = text.count("\n", 0, m.start()) + 1
                        problems.append(
                            "%s:%d: #include %s%s%s climbs out of the include roots: name the "
                            "header from its layer's root, as \"core/metrics.h\" (docs/design.md, "
                            "\"Layers\")" % (source, line, m.group(1), target,
                                              '"' if m.group(1) == '"' else ">"))
    return problems


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    problems = check(sys.argv[1])
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
