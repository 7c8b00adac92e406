"""A real Alertmanager (Debian's prometheus-alertmanager) with the shipped configuration, and a
webhook receiver of the test's own that keeps every notification it is sent.

The shipped deploy/alertmanager/alertmanager.yml is used as it is, with only these rewritten
(each replacement must happen exactly as often as expected, so a change of the file's shape
fails loudly instead of testing something else):
  - the three placeholder receiver URLs -> the test's webhook, /pager, /chat and /heartbeat;
  - group_wait (30s, 2m) -> 1s (or as the test says) and group_interval (5m) -> 2s, so that a
    test takes seconds;
  - the heartbeat's group_interval (1m) -> 2s and repeat_interval (50s) -> 1s: a heartbeat
    (IbfabricWatchdog) every 2 s, as the shipped one every minute (HEARTBEAT_SECONDS).
Routing, grouping, the other repeat intervals and inhibition are the shipped ones.
"""

import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

from ibfabric_testlib import free_port, source_dir

SHIPPED = os.path.join(source_dir(), "deploy", "alertmanager", "alertmanager.yml")
PAGER_URL = "https://pager.invalid/ibfabric"
CHAT_URL = "https://chat.invalid/ibfabric"
HEARTBEAT_URL = "https://heartbeat.invalid/ibfabric"
HEARTBEAT_SECONDS = 2  # the heartbeat receiver's group_interval in the test's copy


class WebhookReceiver:
    """Keeps every notification POSTed to it (Alertmanager's webhook JSON, with `path` added:
    /pager, /chat or /heartbeat, and `received_at`: time.monotonic() at its arrival), in a
    thread of this process."""

    def __init__(self):
        self.notifications = []
        self.lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                payload = json.loads(body)
                payload["path"] = self.path
                payload["received_at"] = time.monotonic()
                with owner.lock:
                    owner.notifications.append(payload)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def received(self, path=None):
        with self.lock:
            return [n for n in self.notifications if path is None or n["path"] == path]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def config_for_test(webhook, group_wait=None):
    """The shipped configuration's text, rewritten as the module's docstring says.
    group_wait: {shipped value: the test's} instead of 1 s for both (a test of the whole chain
    keeps the shipped ratio to the time its localizer takes to name a culprit)."""
    with open(SHIPPED) as f:
        text = f.read()
    waits = group_wait or {"30s": "1s", "2m": "1s"}
    replacements = [
        (re.escape(PAGER_URL), webhook.url("/pager"), 1),
        (re.escape(CHAT_URL), webhook.url("/chat"), 1),
        (re.escape(HEARTBEAT_URL), webhook.url("/heartbeat"), 1),
        (r"group_wait: 30s\b", "group_wait: " + waits["30s"], 2),
        (r"group_wait: 2m\b", "group_wait: " + waits["2m"], 1),
        (r"group_interval: 5m\b", "group_interval: 2s", 1),
        (r"group_interval: 1m\b", "group_interval: %ds" % HEARTBEAT_SECONDS, 1),
        (r"repeat_interval: 50s\b", "repeat_interval: 1s", 1),
    ]
    for pattern, new, count in replacements:
        text, n = re.subn(pattern, new, text)
        if n != count:
            raise AssertionError("%s: %d matches of %r, expected %d" % (SHIPPED, n, pattern, count))
    return text


class Alertmanager:
    """prometheus-alertmanager on a loopback port, one instance without clustering, in a
    directory of its own (removed by close())."""

    def __init__(self, config_text):
        self.dir = tempfile.mkdtemp(prefix="ibfabric-am-")
        self.config = os.path.join(self.dir, "alertmanager.yml")
        with open(self.config, "w") as f:
            f.write(config_text)
        self.port = free_port()
        self.log = open(os.path.join(self.dir, "alertmanager.log"), "w")
        self.process = subprocess.Popen(
            ["prometheus-alertmanager", "--config.file=" + self.config,
             "--storage.path=" + os.path.join(self.dir, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--cluster.listen-address="],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url("/-/ready"), timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("alertmanager did not start:\n" + self.log_text())
            time.sleep(0.1)

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def log_text(self):
        self.log.flush()
        with open(os.path.join(self.dir, "alertmanager.log")) as f:
            return f.read()

    def post_alerts(self, alerts):
        """POST /api/v2/alerts as Prometheus does: labels (alertname and severity included),
        annotations, startsAt."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = json.dumps([{"labels": a, "annotations": {"summary": a["alertname"]},
                            "startsAt": now, "generatorURL": "http://prometheus.test/graph"}
                           for a in alerts]).encode()
        request = urllib.request.Request(self.url("/api/v2/alerts"), data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as r:
            if r.status != 200:
                raise AssertionError("POST /api/v2/alerts: %d" % r.status)

    def alerts(self):
        """GET /api/v2/alerts: every alert it holds, with status.state and status.inhibitedBy."""
        with urllib.request.urlopen(self.url("/api/v2/alerts"), timeout=10) as r:
            return json.loads(r.read())

    def close(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
