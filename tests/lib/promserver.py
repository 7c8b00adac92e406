"""A real Prometheus server (Debian's `prometheus`) for end-to-end tests: scrapes given targets
every second, evaluates rule files every second, and answers queries over its HTTP API.

Python standard library only. The server runs in its own session from a scratch directory and
is ended by PID; the directory is removed.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from ibfabric_testlib import free_port


class PromServer:
    def __init__(self, targets, rule_files=(), job="ibfabric", interval="1s"):
        self.targets = list(targets)
        self.rule_files = list(rule_files)
        self.job = job
        self.interval = interval
        self.workdir = None
        self.proc = None
        self.port = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self):
        self.workdir = tempfile.mkdtemp(prefix="promserver-")
        config = {
            "global": {"scrape_interval": self.interval, "evaluation_interval": self.interval,
                       "scrape_timeout": self.interval},
            "rule_files": self.rule_files,
            "scrape_configs": [{"job_name": self.job,
                                "static_configs": [{"targets": self.targets}]}],
        }
        config_path = os.path.join(self.workdir, "prometheus.yml")
        with open(config_path, "w") as f:
            json.dump(config, f)  # JSON is YAML
        check = subprocess.run(["promtool", "check", "config", config_path], capture_output=True,
                               text=True, timeout=60)
        if check.returncode != 0:
            raise RuntimeError("promtool check config failed:\n" + check.stdout + check.stderr)
        self.port = free_port()
        self.log_path = os.path.join(self.workdir, "prometheus.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                ["prometheus", "--config.file=" + config_path,
                 "--storage.tsdb.path=" + os.path.join(self.workdir, "data"),
                 "--web.listen-address=127.0.0.1:%d" % self.port,
                 "--web.enable-lifecycle"],
                cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("prometheus exited:\n" + self.log()[-3000:])
            try:
                with urllib.request.urlopen(self.url("/-/ready"), timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("prometheus not ready after 60s:\n" + self.log()[-3000:])
            time.sleep(0.2)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def api(self, path, **params):
        url = self.url("/api/v1/" + path)
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError("%s: %s" % (url, body))
        return body["data"]

    def query(self, expr):
        """Instant query: the list of result samples (vector) or [] for none."""
        data = self.api("query", query=expr)
        if data["resultType"] in ("vector", "matrix"):
            return data["result"]
        return [data["result"]]

    def firing(self):
        """{alertname: [labels, ...]} of the alerts firing now."""
        out = {}
        for alert in self.api("alerts")["alerts"]:
            if alert["state"] == "firing":
                out.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
        return out

    def targets_up(self):
        return [t for t in self.api("targets")["activeTargets"] if t["health"] == "up"]

    def wait_for(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(0.5)
        raise AssertionError("timed out after %.0fs waiting for %s (last: %r)"
                             % (timeout, what, last))
