"""Helpers shared by the end-to-end and integration tests: run the built daemon, scrape it,
parse the exposition text. Standard library only."""

import atexit
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from dataclasses import dataclass, field


def ibfabricd_path():
    return os.environ["IBFABRICD"]


def source_dir():
    return os.environ["IBFABRIC_SOURCE_DIR"]


def fixture(*parts):
    return os.path.join(source_dir(), "tests", "fixtures", *parts)


@dataclass
class Sample:
    name: str
    labels: dict = field(default_factory=dict)
    value: float = 0.0


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(value):
    return value.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def _parse_value(text):
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    return float(text)


def parse_exposition(text):
    """Parses Prometheus text format 0.0.4 into samples; raises ValueError on a bad line."""
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise ValueError(f"line {number}: not a sample: {line!r}")
        labels = {}
        body = match.group(3) or ""
        pos = 0
        while pos < len(body):
            label = _LABEL.match(body, pos)
            if not label:
                raise ValueError(f"line {number}: bad labels: {line!r}")
            labels[label.group(1)] = _unescape(label.group(2))
            pos = label.end()
        samples.append(Sample(match.group(1), labels, _parse_value(match.group(4))))
    return samples


def find_samples(samples, name, **labels):
    return [s for s in samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def find_sample(samples, name, **labels):
    found = find_samples(samples, name, **labels)
    if len(found) > 1:
        raise AssertionError(f"{len(found)} samples of {name} match {labels}")
    return found[0] if found else None


# IBFABRIC_REQUIRE_ALL_TOOLS=1 (scripts/test.sh sets it once scripts/install-deps.sh has
# installed every tool): a test that would skip for a missing tool fails instead, naming it,
# since CTest counts a skipped Python test as passed. Without it (one test run by hand on a
# machine without the tools) it still skips. Skips for other reasons (IBFABRIC_SANITIZED=1,
# a host property, no root) are plain unittest skips and stay skips.
def tools_required():
    return os.environ.get("IBFABRIC_REQUIRE_ALL_TOOLS") == "1"


def missing_tools(*tools):
    """The tools not found: a command name looked up on PATH, or an absolute path that must
    exist (the simulator's shim library)."""
    return [t for t in tools
            if not (os.path.exists(t) if os.path.isabs(t) else shutil.which(t))]


def _missing_message(missing, why):
    return "missing %s%s" % (", ".join(missing), " (%s)" % why if why else "")


def require_tools(*tools, why="scripts/install-deps.sh installs them"):
    """A class or test method decorator: skips when one of `tools` is missing (see
    missing_tools), or, under IBFABRIC_REQUIRE_ALL_TOOLS=1, fails naming it: a class in its
    setUpClass (before any fixture of its own is built), a method when it runs."""
    missing = missing_tools(*tools)

    def decorate(target):
        if not missing:
            return target
        message = _missing_message(missing, why)
        if not tools_required():
            return unittest.skip(message)(target)
        message += "; IBFABRIC_REQUIRE_ALL_TOOLS=1 makes that a failure"
        if isinstance(target, type):
            def set_up_class(cls):
                raise AssertionError(message)
            target.setUpClass = classmethod(set_up_class)
            return target

        def failing(self, *args, **kwargs):
            self.fail(message)
        failing.__name__ = target.__name__
        failing.__doc__ = target.__doc__
        return failing
    return decorate


def skip_unless_tools(test, *tools, why="scripts/install-deps.sh installs them"):
    """In a running test: skips it when one of `tools` is missing, or fails it under
    IBFABRIC_REQUIRE_ALL_TOOLS=1."""
    missing = missing_tools(*tools)
    if not missing:
        return
    message = _missing_message(missing, why)
    if tools_required():
        test.fail(message + "; IBFABRIC_REQUIRE_ALL_TOOLS=1 makes that a failure")
    test.skipTest(message)


def promtool_check_metrics(text):
    """`promtool check metrics` on exposition text: (exit code, everything it printed). promtool
    prints one line per problem, lint warnings included ("use base unit ...", "metric name
    should not include type ..."); text that passes prints nothing, so a strict check asserts
    (0, "") rather than the exit code alone."""
    result = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                            text=True, timeout=30)
    return result.returncode, (result.stdout + result.stderr).strip()


def run_once(args, env=None, cwd=None, timeout=60):
    return subprocess.run([ibfabricd_path(), "--once", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10, headers=None):
    """Returns (status, headers, body text); HTTP errors are returned, not raised."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


# Daemon logs: one directory per test process (ibfabricd-logs-XXXX in the temp directory),
# removed when the process exits after unittest reported every run successful, kept with its
# path printed when a test failed or errored, or a run did not finish. A process killed before
# it can exit (as ctest ends one at its timeout) keeps it too, without the message.
# IBFABRIC_KEEP_LOGS=1 keeps it always. A process that runs no unittest (a benchmark) keeps it
# only when something is in it: a Daemon used as a context manager there removes its own log
# when its block ends without an exception.
_log_dir = None
_runs = []  # one per unittest run in this process: None while it runs, then wasSuccessful()


def _start_test_run(self, _original=unittest.TestResult.startTestRun):
    _runs.append(None)
    _original(self)


def _stop_test_run(self, _original=unittest.TestResult.stopTestRun):
    if _runs and _runs[-1] is None:
        _runs[-1] = self.wasSuccessful()
    # A run whose every test skipped says so on a line of its own, which tests/CMakeLists.txt
    # gives CTest as SKIP_REGULAR_EXPRESSION: a planned skip shows as "Not Run (Skipped)", not as
    # "Passed".
    if self.skipped and len(self.skipped) >= self.testsRun and self.wasSuccessful():
        print("\n%s: %s" % (ALL_SKIPPED, "; ".join(sorted({why for _, why in self.skipped}))),
              flush=True)
    _original(self)


ALL_SKIPPED = "ibfabric: every test of this run skipped"

# Every runner (unittest.main's TextTestRunner included) calls these on its result object,
# whose classes do not override them.
unittest.TestResult.startTestRun = _start_test_run
unittest.TestResult.stopTestRun = _stop_test_run


def daemon_log_dir():
    global _log_dir
    if _log_dir is None:
        _log_dir = tempfile.mkdtemp(prefix="ibfabricd-logs-")
        atexit.register(_remove_logs_unless_failed)
    return _log_dir


def _remove_logs_unless_failed():
    if _log_dir is None or not os.path.isdir(_log_dir):
        return
    logs = sorted(os.listdir(_log_dir))
    if os.environ.get("IBFABRIC_KEEP_LOGS") == "1":
        why = "IBFABRIC_KEEP_LOGS=1"
    elif not _runs:
        why = None if not logs else "not removed by the end of their Daemon's block"
    elif not all(_runs):  # None: a run that never finished
        why = "a test failed or did not finish"
    else:
        why = None
    if why is None:
        shutil.rmtree(_log_dir, ignore_errors=True)
        return
    print("ibfabricd logs kept (%s): %s" % (why, _log_dir), file=sys.stderr)
    for name in logs:
        print("  " + os.path.join(_log_dir, name), file=sys.stderr)


class Daemon:
    """Runs ibfabricd in the background on a free loopback port. Use as a context manager.
    Its standard error goes to a file in daemon_log_dir() (log() reads it)."""

    def __init__(self, args, env=None, cwd=None, binary=None, port=None, ready_log=None):
        """ready_log: wait for this text in the daemon's log instead of a plain-HTTP 200 from
        /metrics (for TLS or auth)."""
        self.ready_log = ready_log
        self.args = list(args)
        self.env = env
        self.cwd = cwd
        self.binary = binary or ibfabricd_path()
        self.port = port or free_port()
        self.process = None
        self.stderr_path = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=20):
        return self.launch().wait_ready(timeout)

    def launch(self):
        """Starts the process and returns at once (several daemons started together)."""
        log = tempfile.NamedTemporaryFile(prefix="ibfabricd-", suffix=".log", delete=False,
                                          dir=daemon_log_dir())
        self.stderr_path = log.name
        self.process = subprocess.Popen(
            [self.binary, *self.args, "--web.listen-address", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=log, env=self.env, cwd=self.cwd,
            start_new_session=True)
        log.close()
        return self

    def wait_ready(self, timeout=20):
        """Waits for a launched daemon to serve (see ready_log); stops it and raises if it
        exits or does not serve in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ibfabricd exited with {self.process.returncode}:\n{self.log()}")
            if self.ready_log is not None:
                if self.ready_log in self.log():
                    return self
            else:
                try:
                    status, _, _ = http_get(self.url + "/metrics", timeout=2)
                    if status == 200:
                        return self
                except OSError:
                    pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"ibfabricd did not serve /metrics within {timeout}s:\n{self.log()}")

    def scrape(self, timeout=10):
        status, _, body = http_get(self.url + "/metrics", timeout=timeout)
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}")
        return body

    def samples(self):
        return parse_exposition(self.scrape())

    def wait_for(self, predicate, timeout=30, interval=0.2, what="condition"):
        """Scrapes until predicate(samples) is true; returns the samples. A predicate that reads
        a sample not exported yet (find_sample(...) is None: AttributeError, TypeError) means
        not yet: /metrics serves before a collector's first snapshot, and a scrape in between
        failed test_daemon on a loaded CI machine (2026-11-29)."""
        deadline = time.monotonic() + timeout
        samples = []
        last_error = None
        while time.monotonic() < deadline:
            samples = self.samples()
            try:
                if predicate(samples):
                    return samples
            except (AttributeError, TypeError) as e:
                last_error = e
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}" +
                             (f" (the predicate last raised {last_error!r})" if last_error else ""))

    def signal(self, sig):
        self.process.send_signal(sig)

    def stop(self, timeout=10):
        """SIGTERM, wait; SIGKILL if it does not exit in time. Returns the exit code."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise

    def log(self):
        if not self.stderr_path or not os.path.exists(self.stderr_path):
            return ""
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, *exc):
        self.stop()
        # Under unittest the log stays until the process knows whether every test passed.
        if exc_type is None and not _runs and self.stderr_path:
            try:
                os.unlink(self.stderr_path)
            except FileNotFoundError:
                pass
