"""Every scrape is one snapshot, under load (docs/design.md, "The exposition").

A daemon sweeps the 1,632-port fat tree every 0.3 s (with the sm collector, so that the runners'
health families are shared between two snapshots and rendered per scrape, ahead of the fabric's
kept gzip). Two real Prometheus servers scrape it at once: one every second, the other through a
proxy that passes the answer on at about 100 KB/s, so that each of its scrapes spans several
sweeps (the fabric's snapshot is replaced several times while its body is written). A client of
the test scrapes with gzip as fast as it can, and meanwhile three more read plain text and gzip
a few KB at a time.

One snapshot per scrape means that `ibfabric_collector_runs_total{collector="fabric"}` (health,
rendered first) and `ibfabric_fabric_sweep_duration_seconds` (the fabric's own, kept gzip, near
the end) come from the same sweep in every scrape. The fast client maps each run number to its
sweep duration (a float with microseconds, different every sweep); in every scrape of both
Prometheus servers (their samples of one scrape share a timestamp) and every slow body, the pair
must be one the fast client saw. The slow Prometheus's scrapes (at least three: the test waits for
them) must each have spanned more than two sweeps, and every scrape of both must have succeeded.
The clients run on threads of an executor and the test takes each one's result, so a failure on
any of them (two durations for one run, a truncated gzip body, a failed request) fails the test.

Not in the sanitized suites (IBFABRIC_SANITIZED=1), for the CI budget: the code it runs is the
exporter's, which the unit tests (render_test, http_server_test) run sanitized.
"""

import concurrent.futures
import gzip
import os
import re
import shutil
import socket
import tempfile
import threading
import time
import unittest
import urllib.request

from gen_fattree import fattree
from ibfabric_testlib import find_sample, require_tools
from promserver import PromServer
from simfabric import SIM_TOOLS, SimFabric

HOST = "node-001 mlx5_0"
SWEEP = 0.3  # seconds between fabric sweeps
RATE = 100_000  # bytes per second the slow proxy passes on: ~1.7 s for a 167 KB gzip body
WINDOW = 14  # seconds both Prometheus servers scrape


RUNS = re.compile(r'^ibfabric_collector_runs_total\{collector="fabric"\} (\S+)$', re.M)
DURATION = re.compile(r"^ibfabric_fabric_sweep_duration_seconds (\S+)$", re.M)


def pair_of(text):
    """(runs_total of the fabric collector, its sweep duration) in one exposition."""
    runs, duration = RUNS.search(text), DURATION.search(text)
    return (float(runs.group(1)) if runs else None, float(duration.group(1)) if duration else None)


class SlowProxy:
    """Accepts on a port of its own; forwards each connection to `target`, passing the
    answer on at RATE bytes per second (requests go through at once)."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, upstream, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, RATE),
                             daemon=True).start()

    @staticmethod
    def _pipe(source, sink, rate):
        due = 0.0  # when the octets passed on so far are due at RATE
        try:
            while True:
                data = source.recv(2048 if rate else 65536)
                if not data:
                    break
                sink.sendall(data)
                if rate:
                    # Paced by the clock: late wake-ups on a loaded machine are made up for (up
                    # to 0.2 s), an idle kept-alive connection is not.
                    due = max(due, time.monotonic() - 0.2) + len(data) / rate
                    time.sleep(max(0.0, due - time.monotonic()))
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closed = True
        self.listener.close()


def slow_read(url, encoding, out):
    """Reads the body a part every 0.05 s, for about 2 s: gzip 4 KB at a time, plain text
    (30 times larger) 128 KB."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": encoding})
    with urllib.request.urlopen(request, timeout=60) as r:
        body = b""
        while True:
            part = r.read(4096 if encoding == "gzip" else 131072)
            if not part:
                break
            body += part
            time.sleep(0.05)
    out.append(gzip.decompress(body).decode() if encoding == "gzip" else body.decode())


@require_tools(*SIM_TOOLS, "prometheus", "promtool")
@unittest.skipIf(os.environ.get("IBFABRIC_SANITIZED") == "1", "release suite only (CI budget)")
class ScrapeConsistencyTest(unittest.TestCase):

    def test_every_scrape_is_one_snapshot(self):
        fabric = SimFabric(fattree(), name="consistency")
        tmp = tempfile.mkdtemp(prefix="ibfabric-consistency-")
        try:
            fabric.start()
            fabric.wait_ready(hosts=[HOST])
            config = os.path.join(tmp, "ibfabricd.yaml")
            with open(config, "w") as f:
                f.write("mad: {rate_limit: 0}\n"  # no limit: a sweep well within SWEEP
                        "collectors:\n"
                        "  sysfs: {enabled: false}\n  ports: {enabled: false}\n"
                        "  sriov: {enabled: false}\n  sm: {interval: 1s}\n"
                        f"  fabric: {{enabled: true, interval: {int(SWEEP * 1000)}ms}}\n")
            with fabric.daemon(["--config", config], host=HOST) as daemon:
                self.check(daemon)
        finally:
            fabric.close()
            shutil.rmtree(tmp, ignore_errors=True)

    def check(self, daemon):
        daemon.wait_for(lambda s: find_sample(s, "ibfabric_fabric_sweep_duration_seconds"),
                        timeout=60, what="a first sweep")
        url = daemon.url + "/metrics"
        seen = {}  # run number -> sweep duration, from the fast client
        sizes = []
        stop = threading.Event()

        def fast():
            # gzip (kept by the daemon, cheap for both) as fast as it goes, to see every run.
            request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
            while not stop.is_set():
                with urllib.request.urlopen(request, timeout=10) as r:
                    body = r.read()
                    sizes.append(len(body))
                    runs, duration = pair_of(gzip.decompress(body).decode())
                if runs is not None and duration is not None:
                    self.assertEqual(seen.setdefault(runs, duration), duration,
                                     "two sweep durations for run %d" % runs)
                time.sleep(0.02)

        proxy = SlowProxy(daemon.port)
        direct = PromServer(targets=["127.0.0.1:%d" % daemon.port], job="direct")
        slow = PromServer(config="""
global: {scrape_interval: 5s, scrape_timeout: 5s}
scrape_configs:
  - job_name: slow
    static_configs: [{targets: ["127.0.0.1:%d"]}]
""" % proxy.port)
        bodies = []
        # Threads of an executor: .result() raises whatever ended a client in the test's thread.
        clients = concurrent.futures.ThreadPoolExecutor(max_workers=4)
        try:
            with direct, slow:
                fast_client = clients.submit(fast)
                started = time.time()
                readers = []
                for encoding in ("gzip", "identity", "gzip"):
                    readers.append(clients.submit(slow_read, url, encoding, bodies))
                    time.sleep(0.5)
                time.sleep(WINDOW)
                for reader in readers:
                    reader.result(timeout=60)
                # On a loaded machine the slow server may have finished fewer scrapes by now (its
                # first one starts anywhere within its 5 s interval); the check needs three.
                slow.wait_for(lambda: slow.query(
                    "count_over_time(ibfabric_fabric_sweep_duration_seconds[%ds]) >= 3"
                    % (time.time() - started + 2)), timeout=60, what="three slow scrapes")
                stop.set()
                fast_client.result(timeout=30)
                window = "%ds" % (time.time() - started + 2)
                pairs = {name: self.scraped_pairs(server, window)
                         for name, server in (("direct", direct), ("slow", slow))}
                durations = [float(v) for _, v in slow.query(
                    "scrape_duration_seconds[%s]" % window)[0]["values"]]
                ups = {name: [float(v) for _, v in server.query("up[%s]" % window)[0]["values"]]
                       for name, server in (("direct", direct), ("slow", slow))}
        finally:
            stop.set()
            clients.shutdown(wait=False, cancel_futures=True)
        proxy.close()

        self.assertGreater(len(seen), WINDOW / SWEEP / 3, "the fabric did not sweep often")
        self.assertEqual(len(bodies), 3)
        pairs["slow readers"] = [pair_of(body) for body in bodies]
        for name, found in pairs.items():
            self.assertGreater(len(found), 1, name)
            # A run the fast client missed cannot be checked; most must be.
            checked = [(runs, d) for runs, d in found if runs in seen]
            self.assertGreater(len(checked), len(found) / 2, name)
            for runs, d in checked:
                self.assertEqual(d, seen[runs], "%s: run %d's scrape mixed sweeps" % (name, runs))
        # Each slow scrape spanned sweeps, and none failed.
        self.assertGreater(min(durations), 2 * SWEEP, durations)
        for name, values in ups.items():
            self.assertTrue(values and all(v == 1 for v in values), (name, values, durations, max(sizes)))

    @staticmethod
    def scraped_pairs(server, window):
        """[(runs_total, sweep duration)] of each scrape: the two samples of one scrape share
        its timestamp."""
        def by_time(expr):
            result = server.query("%s[%s]" % (expr, window))
            return {t: float(v) for t, v in result[0]["values"]} if result else {}
        runs = by_time('ibfabric_collector_runs_total{collector="fabric"}')
        durations = by_time("ibfabric_fabric_sweep_duration_seconds")
        return [(runs[t], durations[t]) for t in sorted(runs) if t in durations]


if __name__ == "__main__":
    unittest.main(verbosity=2)
