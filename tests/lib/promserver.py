"""A real Prometheus server (Debian's `prometheus`) for end-to-end tests: scrapes given targets
every second, evaluates rule files every second, and answers queries over its HTTP API.
HttpApiServer is the part any server with Prometheus's HTTP API shares (VictoriaMetrics and
vmalert in victoriametrics.py).

Python standard library only. The server runs in its own session from a scratch directory and
is ended by PID; the directory is removed.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from ibfabric_testlib import free_port

# Fires always (dashboards/alerts/ibfabric.rules.yml): the dead man's switch. firing() leaves it
# out, so that "nothing fires" means nothing but it.
WATCHDOG = "IbfabricWatchdog"


class HttpApiServer:
    """A server process that answers Prometheus's HTTP API (/api/v1/...), started in its own
    session from a scratch directory, ended by its process group id; the directory is removed.
    Subclasses set `name` and `ready_path` and call _launch() from start()."""

    name = "server"
    ready_path = "/-/ready"

    def __init__(self):
        self.workdir = None
        self.proc = None
        self.port = None
        self.log_path = None

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

    def _launch(self, argv):
        """Starts argv (its own listen port in self.port) and waits until ready_path answers."""
        self.log_path = os.path.join(self.workdir, self.name + ".log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(argv, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited:\n%s" % (self.name, self.log()[-3000:]))
            try:
                with urllib.request.urlopen(self.url(self.ready_path), timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("%s not ready after 60s:\n%s" % (self.name,
                                                                    self.log()[-3000:]))
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
        except (OSError, TypeError):
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

    def firing(self, watchdog=False):
        """{alertname: [labels, ...]} of the alerts firing now; IbfabricWatchdog, which always
        fires, only with watchdog=True."""
        out = {}
        for alert in self.api("alerts")["alerts"] or []:  # vmalert: null for none
            if alert["state"] == "firing" and (watchdog or
                                               alert["labels"]["alertname"] != WATCHDOG):
                out.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
        return out

    def firing_alerts(self, alert):
        """The firing alerts named `alert`, each with its labels and annotations."""
        return [a for a in self.api("alerts")["alerts"] or []
                if a["state"] == "firing" and a["labels"]["alertname"] == alert]

    def wait_for(self, predicate, timeout, what):
        started = time.monotonic()
        deadline = started + timeout
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                took = time.monotonic() - started
                if took > timeout / 2:  # in the log of a run that passed: what made it slow
                    print("slow wait: %s took %.1f s of its %.0f s" % (what, took, timeout),
                          file=sys.stderr)
                return last
            time.sleep(0.5)
        raise AssertionError("timed out after %.0fs waiting for %s (last: %r)"
                             % (timeout, what, last))


class PromServer(HttpApiServer):
    """targets: scraped as one job every `interval`, or `config`: the text of a whole
    prometheus.yml to run instead (checked with promtool like the generated one)."""

    name = "prometheus"

    def __init__(self, targets=(), rule_files=(), job="ibfabric", interval="1s", config=None,
                 port=None, extra_jobs=None, alertmanagers=(), extra_args=()):
        super().__init__()
        self.extra_args = list(extra_args)  # flags of its own (--rules.alert.resend-delay=1s)
        self.alertmanagers = list(alertmanagers)  # host:port of Alertmanagers it sends alerts to
        self.targets = list(targets)
        self.want_port = port  # chosen ahead: a localizer started later must know it
        self.extra_jobs = dict(extra_jobs or {})  # job -> targets, scraped besides `job`
        self.rule_files = list(rule_files)
        self.job = job
        self.interval = interval
        self.config = config

    def start(self):
        self.workdir = tempfile.mkdtemp(prefix="promserver-")
        config_path = os.path.join(self.workdir, "prometheus.yml")
        with open(config_path, "w") as f:
            if self.config is not None:
                f.write(self.config)
            else:
                config = {  # JSON is YAML
                    "global": {"scrape_interval": self.interval,
                               "evaluation_interval": self.interval,
                               "scrape_timeout": self.interval},
                    "rule_files": self.rule_files,
                    "scrape_configs": [{"job_name": self.job,
                                        "static_configs": [{"targets": self.targets}]}] +
                                      [{"job_name": job, "static_configs": [{"targets": t}]}
                                       for job, t in sorted(self.extra_jobs.items())],
                }
                if self.alertmanagers:
                    config["alerting"] = {"alertmanagers": [
                        {"static_configs": [{"targets": self.alertmanagers}]}]}
                json.dump(config, f)
        check = subprocess.run(["promtool", "check", "config", config_path], capture_output=True,
                               text=True, timeout=60)
        if check.returncode != 0:
            raise RuntimeError("promtool check config failed:\n" + check.stdout + check.stderr)
        self.port = self.want_port or free_port()
        return self._launch(
            ["prometheus", "--config.file=" + config_path,
             "--storage.tsdb.path=" + os.path.join(self.workdir, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port,
             "--web.enable-lifecycle"] + self.extra_args)

    def targets_up(self):
        return [t for t in self.api("targets")["activeTargets"] if t["health"] == "up"]


class Localizer(HttpApiServer):
    """ibfabric-localize (the build's, $IBFABRIC_LOCALIZE) reading a Prometheus at `prom_url`,
    serving its verdicts on `port` (chosen ahead, so that the Prometheus can scrape it), on a
    test's time scale: evaluations every `interval`, probe evidence over `window`."""

    name = "ibfabric-localize"

    def __init__(self, prom_url, port, interval="2s", window="15s", query_timeout="1500ms",
                 extra_args=(), binary=None):
        super().__init__()
        self.prom_url = prom_url
        self.port = port
        self.argv = [binary or os.environ["IBFABRIC_LOCALIZE"], "--prometheus.url=" + prom_url,
                     "--web.listen-address=127.0.0.1:%d" % port,
                     "--evaluation-interval=" + interval, "--evidence.window=" + window,
                     "--query.timeout=" + query_timeout,
                     "--log.level=debug"] + list(extra_args)

    def start(self):
        self.workdir = tempfile.mkdtemp(prefix="localizer-")
        return self._launch(self.argv)

    def metrics(self):
        with urllib.request.urlopen(self.url("/metrics"), timeout=10) as r:
            return r.read().decode()
