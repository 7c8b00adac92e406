"""The endpoint under slow, huge and malformed requests: each gets an error or a closed
connection, none takes the daemon down or blocks the scrapes of others."""

import random
import socket
import time
import unittest

from ibfabric_testlib import Daemon, find_sample, find_samples, parse_exposition


def exchange(port, data, timeout=5):
    """Sends raw bytes, returns whatever comes back before the server closes (or timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may close while we still send (huge headers)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        return out


class HttpAbuseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(["--no-collector.ports", "--no-collector.sysfs"])
        cls.daemon.start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def assert_still_serving(self):
        self.assertIn("ibfabric_build_info", self.daemon.scrape())

    def test_malformed_requests_get_400(self):
        for raw in (b"GARBAGE\r\n\r\n", b"GET /metrics HTTP/9.9\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\nBad Header\r\n\r\n",
                    b"\x00\xff\xfe\r\n\r\n"):
            with self.subTest(raw=raw):
                reply = exchange(self.daemon.port, raw)
                self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply[:80])
        self.assert_still_serving()

    def test_huge_headers_and_bodies_are_refused(self):
        huge = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n"
        reply = exchange(self.daemon.port, huge)
        self.assertNotIn(b"200 OK", reply)
        body = b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" + b"b" * 5000
        reply = exchange(self.daemon.port, body)
        self.assertNotIn(b"200 OK", reply)
        self.assert_still_serving()

    def test_random_bytes_do_not_crash_it(self):
        rng = random.Random(1234)
        for _ in range(200):
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600)))
            exchange(self.daemon.port, data, timeout=2)
        self.assert_still_serving()

    def test_slow_clients_do_not_block_scrapes(self):
        slow = []
        try:
            for _ in range(20):
                s = socket.create_connection(("127.0.0.1", self.daemon.port), timeout=5)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHo")  # and then nothing
                slow.append(s)
            time.sleep(0.2)
            start = time.monotonic()
            self.assert_still_serving()
            self.assertLess(time.monotonic() - start, 5, "a scrape waited for slow clients")
        finally:
            for s in slow:
                s.close()

    def test_connections_beyond_the_per_client_cap_evict_older_ones_and_are_counted(self):
        held = []
        try:
            for _ in range(80):
                held.append(socket.create_connection(("127.0.0.1", self.daemon.port), timeout=5))
            time.sleep(0.5)
            # The scrape comes from the same address: it too makes way for itself.
            samples = parse_exposition(self.daemon.scrape())
        finally:
            for s in held:
                s.close()
        self.assertLessEqual(find_sample(samples, "ibfabric_http_connections_open").value, 16)
        evicted = find_samples(samples, "ibfabric_http_connections_evicted_total",
                               reason="max_connections_per_client")
        self.assertGreaterEqual(sum(s.value for s in evicted), 80 - 16)

if __name__ == "__main__":
    unittest.main()
