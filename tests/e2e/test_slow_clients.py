"""Slow clients cannot starve scrapes (issue 13). 200 slowloris connections (one byte every
second, never a whole request; reconnecting when closed) press on the endpoint while a
Prometheus-like scraper makes SCRAPES scrapes, each on a new connection with Prometheus's default
10 s timeout; every scrape must get 200:

- 200 slow connections from 127.0.0.2, scraper from 127.0.0.1, plain HTTP, default limits: the
  per-client cap keeps them to 16 connections;
- the same with TLS and basic auth on (the shipped example web config, a self-signed
  certificate), the slow connections split between handshakes that never start, ClientHellos
  sent half and then a byte per second, and requests trickled after a finished handshake;
- 200 slow connections from 200 addresses (127.0.1.1 to 127.0.1.200), so the per-client cap
  never applies: the total cap is reached and the oldest incomplete connections make way.

Each scrape also reads `ibfabric_http_connections_open`, to show the slow clients did hold
their share (and never more than the cap), and the evictions counted say which cap acted.
No timing is asserted: a scrape that times out fails the test.
"""

import http.client
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import unittest

from ibfabric_testlib import Daemon, find_sample, find_samples, parse_exposition, source_dir
from slowloris import SlowClients

SCRAPES = 12
SCRAPE_TIMEOUT = 10  # Prometheus's default scrape_timeout
EXAMPLE = os.path.join(source_dir(), "config", "web-config.example.yml")
AUTH = "Basic cHJvbWV0aGV1czpleGFtcGxlLXBhc3N3b3JkLWNoYW5nZS1tZQ=="  # prometheus:example-...


def scrape(port, tls=None):
    """One scrape from 127.0.0.1 on a new connection: (status, body)."""
    args = dict(timeout=SCRAPE_TIMEOUT, source_address=("127.0.0.1", 0))
    if tls:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=tls, **args)
        headers = {"Authorization": AUTH}
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, **args)
        headers = {}
    try:
        conn.request("GET", "/metrics", headers={"Connection": "close", **headers})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def counter_sum(text, name, **labels):
    return sum(s.value for s in find_samples(parse_exposition(text), name, **labels))


class SlowClientsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ibfabric-slow-")
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                            "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", "tls.key", "-out", "tls.crt"],
                           cwd=cls.dir, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        cls.web_config = os.path.join(cls.dir, "web-config.yml")
        shutil.copy(EXAMPLE, cls.web_config)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def scrapes_under(self, port, pools, tls=None):
        """Runs the pools, scrapes SCRAPES times; returns the statuses, the open connections
        each scrape saw, and the last body."""
        for pool in pools:
            pool.start()
        try:
            time.sleep(1)  # a round of bytes from every slow client
            statuses, open_seen, body = [], [], ""
            for _ in range(SCRAPES):
                status, body = scrape(port, tls)
                statuses.append(status)
                if status == 200:
                    sample = find_sample(parse_exposition(body),
                                         "ibfabric_http_connections_open")
                    open_seen.append(sample.value)
                time.sleep(0.2)
            connects = sum(p.connects for p in pools)
            print("slow connections made %d, closed by the server %d; open at scrapes: %s" %
                  (connects, sum(p.closed_by_server for p in pools), open_seen))
            self.assertGreaterEqual(connects, 200)
            return statuses, open_seen, body
        finally:
            for pool in pools:
                pool.stop()

    def test_200_slow_clients_from_one_address(self):
        with Daemon(["--no-collector.ports", "--no-collector.sysfs"]) as d:
            pools = [SlowClients(d.port, 200, ["127.0.0.2"], "headers", period=1.0)]
            statuses, open_seen, body = self.scrapes_under(d.port, pools)
            self.assertEqual(statuses, [200] * SCRAPES)
            # 16 slow ones held (the per-client cap) plus the scrape itself.
            self.assertGreaterEqual(max(open_seen), 17)
            self.assertGreater(counter_sum(body, "ibfabric_http_connections_evicted_total",
                                           reason="max_connections_per_client"), 0)

    def test_200_slow_clients_from_one_address_with_tls_and_auth(self):
        with Daemon(["--web.config.file", self.web_config, "--no-collector.ports",
                     "--no-collector.sysfs"], ready_log='msg="listening"') as d:
            pools = [SlowClients(d.port, 70, ["127.0.0.2"], "tls_silent", period=1.0),
                     SlowClients(d.port, 70, ["127.0.0.2"], "tls_partial", period=1.0),
                     SlowClients(d.port, 60, ["127.0.0.2"], "tls_headers", period=1.0)]
            tls = ssl.create_default_context(cafile=os.path.join(self.dir, "tls.crt"))
            statuses, open_seen, body = self.scrapes_under(d.port, pools, tls)
            self.assertEqual(statuses, [200] * SCRAPES)
            self.assertGreaterEqual(max(open_seen), 17)
            self.assertGreater(counter_sum(body, "ibfabric_http_connections_evicted_total",
                                           reason="max_connections_per_client"), 0)

    def test_200_slow_clients_from_200_addresses(self):
        with Daemon(["--no-collector.ports", "--no-collector.sysfs"]) as d:
            sources = ["127.0.1.%d" % i for i in range(1, 201)]
            pools = [SlowClients(d.port, 200, sources, "headers", period=1.0)]
            statuses, open_seen, body = self.scrapes_under(d.port, pools)
            self.assertEqual(statuses, [200] * SCRAPES)
            self.assertGreaterEqual(max(open_seen), 60)  # the total cap was reached...
            self.assertLessEqual(max(open_seen), 64)  # ...and held
            self.assertGreater(counter_sum(body, "ibfabric_http_connections_evicted_total",
                                           reason="max_connections"), 0)


if __name__ == "__main__":
    unittest.main()
