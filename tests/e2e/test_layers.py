"""The layers (docs/design.md) hold: scripts/check_layers.py, which every build runs, passes on
the tree and fails on includes against the arrows, each reported with file, line and why."""

import os
import subprocess
import sys
import tempfile
import unittest

from ibfabric_testlib import source_dir

CHECK = os.path.join(source_dir(), "scripts", "check_layers.py")


def run(root):
    return subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True,
                          timeout=60)


class LayersTest(unittest.TestCase):
    def test_the_tree_follows_the_layers(self):
        out = run(source_dir())
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_an_include_against_the_arrows_fails(self):
        files = {
            # Against the arrows: each must be reported.
            "core/model.h": '#include "collectors/collector.h"\n',
            "config/section.cpp": '#include <string>\n#include "core/metrics.h"\n',
            "mad/engine.h": '#include "exporters/prometheus/render.h"\n',
            "collectors/ports/ports.cpp": '#include "collectors/probe/probe_stats.h"\n',
            "collectors/collector.h": '#include "collectors/sm/sm_collector.h"\n',
            "exporters/prometheus/render.cpp": '#include "mad/engine.h"\n',
            "core/version.cpp": '#include "ibfabric/version.h"\n',
            # Along them: none may be reported.
            "mad/ok.cpp": '#include "core/metrics.h"\n#include "config/config_section.h"\n',
            "collectors/sm/sm.cpp": ('#include "collectors/sm/sm_decode.h"\n'
                                     '#include "collectors/collector.h"\n#include "mad/engine.h"\n'),
            "collectors/registry.cpp": '#include "collectors/sm/sm_collector.h"\n',
            "daemon/app.cpp": ('#include "collectors/registry.h"\n'
                               '#include "exporters/prometheus/render.h"\n'
                               '#include "ibfabric/version.h"\n'),
        }
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w") as f:
                    f.write(text)
            out = run(root)
        self.assertEqual(out.returncode, 1)
        reported = sorted(line.split(":")[0] for line in out.stderr.splitlines())
        self.assertEqual(reported, sorted([
            "core/model.h", "config/section.cpp", "mad/engine.h", "collectors/ports/ports.cpp",
            "collectors/collector.h", "exporters/prometheus/render.cpp", "core/version.cpp"]))
        self.assertIn('config/section.cpp:2: #include "core/metrics.h": layer config may not '
                      'include layer core', out.stderr)
        self.assertIn("collector ports may not include collector probe", out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
