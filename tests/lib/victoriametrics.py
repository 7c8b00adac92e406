"""VictoriaMetrics (single node) and vmalert from Debian's `victoria-metrics` package, for
end-to-end tests, started with the flags of the shipped deployment files under deploy/
(docs/scaling.md) with addresses, paths and intervals replaced; and a stand-in Alertmanager
that records what vmalert sends it.

Python standard library only. Servers run in their own session from a scratch directory and
are ended by process group; the directory is removed.
"""

import http.server
import json
import os
import shlex
import tempfile
import threading

from ibfabric_testlib import free_port
from promserver import HttpApiServer


def flags_from_default_file(path):
    """The flags of an /etc/default file's ARGS="..." line, split at white space as systemd
    splits the unit's `$ARGS`."""
    with open(path) as f:
        for line in f:
            if line.startswith("ARGS="):
                return "".join(shlex.split(line[len("ARGS="):])).split()
    raise ValueError("%s: no ARGS= line" % path)


def flags_from_unit(path):
    """The flags of a systemd unit's ExecStart= line (the binary left out)."""
    with open(path) as f:
        for line in f:
            if line.startswith("ExecStart="):
                return shlex.split(line[len("ExecStart="):])[1:]
    raise ValueError("%s: no ExecStart= line" % path)


def with_flags(flags, replace, add=()):
    """flags (`-name=value` each) with the values of the names in `replace` replaced; every
    name in `replace` must be among the flags (a shipped file that drops one fails the test
    rather than running with a default). `add`: further flags, appended."""
    out = []
    seen = set()
    for flag in flags:
        name, eq, _ = flag.partition("=")
        name = name.lstrip("-")
        if eq and name in replace:
            out.append("-%s=%s" % (name, replace[name]))
            seen.add(name)
        else:
            out.append(flag)
    missing = set(replace) - seen
    if missing:
        raise ValueError("flags %s are not in %s" % (sorted(missing), flags))
    return out + list(add)


class VictoriaMetrics(HttpApiServer):
    """victoria-metrics with `flags`; its -httpListenAddr and -storageDataPath are replaced by a
    free loopback port and a scratch directory, and those of `replace` (names without the dash)
    by their values."""

    name = "victoria-metrics"
    ready_path = "/health"

    def __init__(self, flags, add=(), replace=None):
        super().__init__()
        self.flags = list(flags)
        self.add = list(add)
        self.replace = dict(replace or {})

    def start(self):
        self.workdir = tempfile.mkdtemp(prefix="victoriametrics-")
        self.port = free_port()
        return self._launch(["victoria-metrics"] + with_flags(self.flags, dict({
            "httpListenAddr": "127.0.0.1:%d" % self.port,
            "storageDataPath": os.path.join(self.workdir, "data"),
        }, **self.replace), self.add))

    def write_url(self):
        return self.url("/api/v1/write")


class VmAlert(HttpApiServer):
    """vmalert with `flags`, its -httpListenAddr replaced by a free loopback port and the
    values in `replace` (flag name without the dash -> value) replaced."""

    name = "vmalert"
    ready_path = "/health"

    def __init__(self, flags, replace):
        super().__init__()
        self.flags = list(flags)
        self.replace = dict(replace)

    def start(self):
        self.workdir = tempfile.mkdtemp(prefix="vmalert-")
        self.port = free_port()
        replace = dict(self.replace, httpListenAddr="127.0.0.1:%d" % self.port)
        return self._launch(["vmalert"] + with_flags(self.flags, replace))

    def rules(self):
        """Every rule of every group: vmalert's /api/v1/rules entries."""
        return [r for g in self.api("rules")["groups"] for r in g["rules"]]


class FakeAlertmanager:
    """Accepts Alertmanager's POST /api/v2/alerts on a loopback port and keeps every alert
    posted (a list of dicts with `labels`), in a thread of this process."""

    def __init__(self):
        self.alerts = []
        self.lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    posted = json.loads(body)
                except ValueError:
                    posted = []
                with owner.lock:
                    owner.alerts.extend(posted if isinstance(posted, list) else [])
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def received(self):
        with self.lock:
            return list(self.alerts)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
