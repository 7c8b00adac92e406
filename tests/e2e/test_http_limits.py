"""The endpoint's connection limits, one at a time (docs/security.md), with limits set small or
deadlines set short in the test's config so that each acts quickly:

- at the per-client cap a new connection from that address closes that address's oldest waiting
  connection, and no other;
- at the total cap a new connection closes the oldest waiting one, here an idle keep-alive;
- a reload (SIGHUP) applies changed limits to new connections;
- a request whose headers trickle in (a byte every 0.2 s, so no inactivity timeout would fire)
  is closed at the header deadline; an idle keep-alive is closed at the idle deadline;
- TLS handshakes that never start, or whose ClientHello trickles in, are closed at the handshake
  deadline.

Each closure is also checked in the counters. Nothing here asserts how fast: a connection the
server does not close fails the test after a generous bound.
"""

import os
import select
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.request

from ibfabric_testlib import Daemon, find_sample, parse_exposition
from slowloris import SlowClients

BOUND = 30  # seconds a test waits for something before failing


def config_file(directory, name, web):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write("web:\n")
        for key, value in web.items():
            f.write("  %s: %s\n" % (key, value))
        f.write("collectors:\n  ports: {enabled: false}\n  sysfs: {enabled: false}\n")
    return path


def connect(port, source):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def is_closed(s):
    """True when the server closed `s` (EOF or reset); False while it is open and silent."""
    readable, _, _ = select.select([s], [], [], 0)
    if not readable:
        return False
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


def wait_closed(s, bound=BOUND):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if is_closed(s):
            return True
        select.select([s], [], [], 0.2)
    return False


def keep_alive_request(s, path="/-/healthy"):
    """Sends one keep-alive GET on `s` and reads the whole response; returns its status line."""
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    fields = {line.split(b":")[0].strip().lower(): line.split(b":", 1)[1].strip()
              for line in head.split(b"\r\n")[1:]}
    if fields.get(b"transfer-encoding") == b"chunked":  # /metrics is streamed
        while True:  # chunk by chunk: SIZE CRLF DATA CRLF, until the empty one
            while b"\r\n" not in body:
                body += s.recv(4096)
            size_line, _, body = body.partition(b"\r\n")
            size = int(size_line, 16)
            while len(body) < size + 2:
                body += s.recv(4096)
            body = body[size + 2:]
            if size == 0:
                break
    else:
        length = int(fields[b"content-length"])
        while len(body) < length:
            body += s.recv(4096)
    return head.split(b"\r\n")[0].decode()


def value(daemon, name, **labels):
    sample = find_sample(parse_exposition(daemon.scrape()), name, **labels)
    return sample.value if sample else None


class HttpLimitsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ibfabric-limits-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def caps_daemon(self):
        return Daemon(["--config", config_file(self.dir, "caps.yaml", {
            "max_connections": 8, "max_connections_per_client": 4, "header_timeout": "1m",
            "idle_timeout": "1m"})])

    def test_the_per_client_cap_closes_that_clients_oldest_waiting_connection(self):
        with self.caps_daemon() as d:
            held = [connect(d.port, "127.0.0.3") for _ in range(4)]
            other = connect(d.port, "127.0.0.4")
            try:
                # The scrape (from 127.0.0.1) is accepted after them: all five are in.
                self.assertEqual(value(d, "ibfabric_http_connections_open"), 6)
                newest = connect(d.port, "127.0.0.3")
                self.assertTrue(wait_closed(held[0]), "the oldest of 127.0.0.3 stayed open")
                for s in held[1:] + [other, newest]:
                    self.assertFalse(is_closed(s))
                self.assertEqual(value(d, "ibfabric_http_connections_evicted_total",
                                       reason="max_connections_per_client", phase="headers"), 1)
                self.assertEqual(value(d, "ibfabric_http_connections_evicted_total",
                                       reason="max_connections", phase="headers"), 0)
                held.append(newest)
            finally:
                for s in held + [other]:
                    s.close()

    def test_the_total_cap_closes_the_oldest_waiting_connection_an_idle_keep_alive(self):
        with self.caps_daemon() as d:
            keep_alive = connect(d.port, "127.0.0.5")
            held = []
            try:
                self.assertEqual(keep_alive_request(keep_alive), "HTTP/1.1 200 OK")
                held = [connect(d.port, "127.0.0.%d" % i) for i in range(6, 13)]  # 8 open now
                # This scrape is the ninth connection: the keep-alive went idle before the seven
                # others were accepted, so it is the one closed.
                samples = parse_exposition(d.scrape())
                self.assertTrue(wait_closed(keep_alive), "the idle keep-alive stayed open")
                for s in held:
                    self.assertFalse(is_closed(s))
                evicted = find_sample(samples, "ibfabric_http_connections_evicted_total",
                                      reason="max_connections", phase="idle")
                self.assertEqual(evicted.value, 1)
                self.assertEqual(find_sample(samples, "ibfabric_http_connections_open").value, 8)
            finally:
                for s in held + [keep_alive]:
                    s.close()

    def test_a_reload_applies_new_limits(self):
        config = config_file(self.dir, "reload.yaml", {"max_connections_per_client": 4,
                                                       "header_timeout": "1m"})
        with Daemon(["--config", config]) as d:
            config_file(self.dir, "reload.yaml", {"max_connections_per_client": 2,
                                                  "header_timeout": "1m"})
            d.signal(signal.SIGHUP)
            deadline = time.monotonic() + BOUND
            while 'msg="config reloaded"' not in d.log() and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertIn('msg="config reloaded"', d.log())
            held = [connect(d.port, "127.0.0.3") for _ in range(3)]
            try:
                self.assertTrue(wait_closed(held[0]), "the cap of 2 per client did not apply")
                self.assertFalse(is_closed(held[1]) or is_closed(held[2]))
            finally:
                for s in held:
                    s.close()

    def test_header_and_idle_deadlines(self):
        with Daemon(["--config", config_file(self.dir, "deadlines.yaml", {
                "header_timeout": "1s", "idle_timeout": "1s"})]) as d:
            trickle = connect(d.port, "127.0.0.3")
            sent = 0
            try:
                trickle.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                closed = False
                deadline = time.monotonic() + BOUND
                while not closed and time.monotonic() < deadline:
                    try:
                        closed = is_closed(trickle)
                        if not closed:
                            trickle.sendall(b"a")
                            sent += 1
                    except OSError:
                        closed = True
                    time.sleep(0.2)
                self.assertTrue(closed, "a request trickling its headers was never closed")
                self.assertGreater(sent, 0)
            finally:
                trickle.close()
            self.assertEqual(value(d, "ibfabric_http_timeouts_total", phase="headers"), 1)

            keep_alive = connect(d.port, "127.0.0.3")
            try:
                self.assertEqual(keep_alive_request(keep_alive), "HTTP/1.1 200 OK")
                self.assertEqual(keep_alive_request(keep_alive, "/metrics"), "HTTP/1.1 200 OK")
                self.assertTrue(wait_closed(keep_alive), "an idle keep-alive was never closed")
            finally:
                keep_alive.close()
            self.assertEqual(value(d, "ibfabric_http_timeouts_total", phase="idle"), 1)

    def test_tls_handshakes_are_cut_at_the_deadline(self):
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                            "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", "tls.key", "-out", "tls.crt"],
                           cwd=self.dir, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        web = os.path.join(self.dir, "web.yml")
        with open(web, "w") as f:
            f.write("tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n")
        config = config_file(self.dir, "tls.yaml", {"tls_handshake_timeout": "1s",
                                                    "config_file": web})
        with Daemon(["--config", config], ready_log='msg="listening"') as d:
            pools = [SlowClients(d.port, 3, ["127.0.0.3"], "tls_silent", period=0.2,
                                 reconnect=False),
                     SlowClients(d.port, 3, ["127.0.0.3"], "tls_partial", period=0.2,
                                 reconnect=False)]
            for pool in pools:
                pool.start()
            try:
                deadline = time.monotonic() + BOUND
                while (sum(p.closed_by_server for p in pools) < 6 and
                       time.monotonic() < deadline):
                    time.sleep(0.2)
                self.assertEqual([p.closed_by_server for p in pools], [3, 3])
            finally:
                for pool in pools:
                    pool.stop()
            tls = ssl.create_default_context(cafile=os.path.join(self.dir, "tls.crt"))
            url = "https://127.0.0.1:%d/metrics" % d.port
            with urllib.request.urlopen(url, context=tls, timeout=10) as response:
                samples = parse_exposition(response.read().decode())
            timeouts = find_sample(samples, "ibfabric_http_timeouts_total", phase="tls_handshake")
            self.assertEqual(timeouts.value, 6)
            failures = find_sample(samples, "ibfabric_http_tls_handshake_failures_total")
            self.assertEqual(failures.value, 0)


if __name__ == "__main__":
    unittest.main()
