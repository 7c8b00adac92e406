#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer it may not use (docs/design.md):

    daemon/               anything below
    exporters/prometheus/ core, config
    query/                localize (the evidence it reads)
    localize/             nothing: pure code
    collectors/<name>/    the collector interface (collectors/*.h), mad, core, config; never
                          another collector
    collectors/*          the interface: mad, core, config (registry.cpp: every collector)
    mad/                  core, config
    core/                 config
    config/               nothing

Every build runs it (the check_layers target of CMakeLists.txt), so an include against the
arrows fails the build, whatever the linker would have let through (a header-only include links
without complaint). Standard library only.

    scripts/check_layers.py ROOT     # exit 1 and one line per forbidden include
"""

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".h", ".cpp")
# Each layer and the layers its files may include (besides their own layer).
BELOW = {
    "config": set(),
    "core": {"config"},
    "mad": {"core", "config"},
    "collectors": {"mad", "core", "config"},
    "exporters": {"core", "config"},
    "localize": set(),
    "query": {"localize"},
    "daemon": {"collectors", "exporters", "localize", "query", "mad", "core", "config"},
}
# Generated headers (the build's generated/ directory) and who may include them.
GENERATED = {"ibfabric/version.h": {"exporters", "daemon"}}


def layer_of(path):
    """(layer, collector or None) of a path relative to ROOT; None for files of no layer."""
    parts = path.split("/")
    if parts[0] not in BELOW:
        return None
    collector = parts[1] if parts[0] == "collectors" and len(parts) > 2 else None
    return parts[0], collector


def allowed(source, target):
    """Why `source` may not include `target` ("" when it may)."""
    src_layer, src_collector = layer_of(source)
    if target in GENERATED:
        return "" if src_layer in GENERATED[target] else "a generated header of the daemon"
    dst = layer_of(target)
    if dst is None:
        return ""  # a system or third-party header, or a generated protobuf header
    dst_layer, dst_collector = dst
    if dst_layer == src_layer:
        if src_layer != "collectors" or dst_collector is None or dst_collector == src_collector:
            return ""
        if source == "collectors/registry.cpp":
            return ""
        if src_collector is None:
            return "the collector interface may not include a collector"
        return "collector %s may not include collector %s" % (src_collector, dst_collector)
    if dst_layer in BELOW[src_layer]:
        return ""
    return "layer %s may not include layer %s" % (src_layer, dst_layer)


def check(root):
    problems = []
    for layer in BELOW:
        for directory, _, files in os.walk(os.path.join(root, layer)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(directory, name)
                source = os.path.relpath(path, root).replace(os.sep, "/")
                with open(path, errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    why = allowed(source, m.group(1))
                    if why:
                        line = text.count("\n", 0, m.start()) + 1
                        problems.append('%s:%d: #include "%s": %s (docs/design.md, "Layers")'
                                        % (source, line, m.group(1), why))
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
