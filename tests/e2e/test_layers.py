"""The layers (docs/design.md) are the build's: a file of a layer that includes a header of a
layer its library does not link, "quoted" or <angled>, does not compile; along the arrows it
does. Each case compiles a planted file with the exact command the build uses for a real source
of that layer (compile_commands.json), syntax only. scripts/check_layers.py, which every build
runs, passes on the tree and fails on an include that climbs out of the include roots."""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

from ibfabric_testlib import source_dir

CHECK = os.path.join(source_dir(), "scripts", "check_layers.py")
BUILD = os.environ.get("IBFABRIC_BUILD_DIR", os.path.join(source_dir(), "build"))

# A real source of each layer, whose compile command the planted files borrow.
LAYER_SOURCE = {
    "config": "config/config.cpp",
    "core": "core/metrics.cpp",
    "mad": "mad/engine.cpp",
    "ib": "ib/link_rate.cpp",
    "kubelet": "kubelet/kubelet_watch.cpp",
    "collector interface": "collectors/collect_with_ports.cpp",
    "collector ports": "collectors/ports/ports_run.cpp",
    "collector pods": "collectors/pods/pods_run.cpp",
    "exporters": "exporters/prometheus/render.cpp",
    "localize": "localize/localizer.cpp",
    "query": "query/evidence_reader.cpp",
    "daemon": "daemon/app.cpp",
    "localizer": "localizer/app.cpp",
}

# (layer, header, compiles?)
CASES = [
    # Against the arrows.
    ("core", "collectors/collector.h", False),
    ("config", "core/metrics.h", False),
    ("mad", "exporters/prometheus/render.h", False),
    ("mad", "ib/state_store.h", False),
    ("ib", "exporters/prometheus/render.h", False),
    ("ib", "collectors/fan_out.h", False),
    ("core", "ib/link_rate.h", False),
    ("collector ports", "collectors/probe/probe_stats.h", False),
    ("collector ports", "exporters/prometheus/render.h", False),
    ("collector interface", "collectors/sm/sm_collector.h", False),
    ("exporters", "mad/engine.h", False),
    ("exporters", "collectors/collector.h", False),
    ("core", "ibfabric/version.h", False),
    ("localize", "core/metrics.h", False),
    ("query", "exporters/prometheus/render.h", False),
    ("localize", "query/evidence_reader.h", False),
    ("localize", "mad/engine.h", False),
    ("localize", "exporters/prometheus/render.h", False),
    ("query", "collectors/collector.h", False),
    ("query", "daemon/app.h", False),
    ("query", "localizer/app.h", False),
    # Two programs, two rooms: neither sees the other's.
    ("daemon", "localizer/app.h", False),
    ("localizer", "daemon/app.h", False),
    ("localizer", "collectors/collector.h", False),
    ("localizer", "mad/engine.h", False),
    ("kubelet", "core/metrics.h", False),
    ("kubelet", "collectors/collector.h", False),
    ("collector ports", "kubelet/pod_resources.h", False),
    # Along them.
    ("mad", "core/metrics.h", True),
    ("collector ports", "collectors/ports/ports_run.h", True),
    ("collector ports", "collectors/collector.h", True),
    ("collector ports", "mad/engine.h", True),
    ("collector ports", "ib/link_rate.h", True),
    ("collector ports", "collectors/fan_out.h", True),
    ("ib", "mad/attributes.h", True),
    ("exporters", "ibfabric/version.h", True),
    ("query", "localize/localizer.h", True),
    ("localizer", "query/evidence_reader.h", True),
    ("localizer", "core/snapshot_store.h", True),
    ("daemon", "core/snapshot_store.h", True),
    ("kubelet", "config/config_section.h", True),
    ("collector pods", "kubelet/kubelet_watch.h", True),
]


def compile_command(source):
    """The build's command for `source`, as an argument list without its output and input."""
    with open(os.path.join(BUILD, "compile_commands.json")) as f:
        entries = json.load(f)
    path = os.path.join(source_dir(), source)
    for e in entries:
        if os.path.realpath(e["file"]) == os.path.realpath(path):
            args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
            break
    else:
        raise AssertionError("no compile command for %s in %s" % (source, BUILD))
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
        elif a in ("-c", "-MD", "-MMD") or os.path.realpath(a) == os.path.realpath(path):
            pass
        else:
            out.append(a)
    return out


class LayersTest(unittest.TestCase):
    def test_the_compiler_refuses_an_include_against_the_arrows(self):
        commands = {layer: compile_command(src) for layer, src in LAYER_SOURCE.items()}
        with tempfile.TemporaryDirectory() as tmp:
            for layer, header, compiles in CASES:
                # Both spellings where it must fail; one where it must compile (the slow case).
                for quote in ('"%s"', "<%s>") if not compiles else ('"%s"',):
                    include = "#include " + quote % header
                    with self.subTest(layer=layer, include=include):
                        planted = os.path.join(tmp, "planted.cpp")
                        with open(planted, "w") as f:
                            f.write(include + "\n")
                        out = subprocess.run(commands[layer] + ["-fsyntax-only", planted],
                                             capture_output=True, text=True, timeout=120,
                                             cwd=BUILD)
                        if compiles:
                            self.assertEqual(out.returncode, 0, out.stderr[-2000:])
                        else:
                            self.assertNotEqual(out.returncode, 0,
                                                "%s compiled in layer %s" % (include, layer))
                            # Refused for the header not being found, not for anything else.
                            self.assertIn(header, out.stderr)
                            self.assertRegex(out.stderr, "No such file|file not found")

    def test_the_tree_climbs_out_of_no_include_root(self):
        out = subprocess.run([sys.executable, CHECK, source_dir()], capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_an_include_that_climbs_out_fails_the_check(self):
        files = {
            "collectors/ports/ports.cpp": '#include "../../exporters/prometheus/render.h"\n',
            "core/model.h": "#include <string>\n#include </usr/include/stdio.h>\n",
            "mad/engine.h": "#include <../config/config.h>\n",
            # Along the roots: not reported.
            "collectors/sm/sm.cpp": '#include "collectors/sm/sm_decode.h"\n#include <vector>\n',
            # localize/ does no I/O: an I/O or clock header, or another layer's, is reported;
            # its own and the standard library's others are not.
            "localize/io.cpp": "#include <fstream>\n",
            "localize/clock.h": '#include <vector>\n#include "localize/evidence.h"\n'
                                "#include <chrono>\n",
            "localize/store.cpp": '#include "query/evidence_reader.h"\n',
        }
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w") as f:
                    f.write(text)
            out = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True,
                                 timeout=60)
        self.assertEqual(out.returncode, 1)
        reported = sorted(line.split(":")[0] for line in out.stderr.splitlines())
        self.assertEqual(reported, ["collectors/ports/ports.cpp", "core/model.h", "localize/clock.h",
                                    "localize/io.cpp", "localize/store.cpp", "mad/engine.h"])
        self.assertIn('core/model.h:2: #include </usr/include/stdio.h> climbs out', out.stderr)
        self.assertIn("localize/clock.h:3: #include chrono: localize/ does no I/O", out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
