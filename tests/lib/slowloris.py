"""Slow clients against an HTTP(S) endpoint, for tests/e2e/test_slow_clients.py and
bench/slow_clients.py: many connections that each send one byte every `period` seconds and never
finish a request (slowloris), on one thread with a selector. When the server closes one, it
reconnects after a random pause of up to `period`, so the pressure lasts as long as the pool runs.

Modes:
- "headers": plain TCP; the request line at once, then one header byte per period.
- "tls_silent": connects and sends nothing (a TLS handshake that never starts).
- "tls_partial": the first bytes of a real ClientHello, then one more byte per period (a
  handshake that never completes).
- "tls_headers": completes the TLS handshake, then trickles a request as "headers" does.

Every connection is bound to one of `sources` (loopback addresses such as 127.0.0.2), so a test
can tell its slow clients apart from its scraper by address.
"""

import random
import selectors
import socket
import ssl
import threading
import time

REQUEST_LINE = b"GET /metrics HTTP/1.1\r\nHost: slow\r\n"
HEADER_BYTES = b"X-Slow: " + b"a" * 4000  # never ends within a test's or bench's time


def client_hello():
    """The bytes of a TLS ClientHello, as Python's ssl module would send it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


class _Slow:
    def __init__(self, pool, source):
        self.pool = pool
        self.source = source
        self.sock = None
        self.tls = None  # ssl.SSLSocket once wrapped
        self.sent = 0
        self.handshaken = False
        self.next_at = 0.0  # when to send the next byte, or reconnect when closed
        self.payload = b""

    def connect(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((self.source, 0))
            s.settimeout(5)
            s.connect((self.pool.host, self.pool.port))
        except OSError:
            s.close()
            self.pool.connect_failures += 1
            self.next_at = time.monotonic() + self.pool.period * random.random()
            return
        s.setblocking(False)
        self.sock = s
        self.sent = 0
        self.handshaken = False
        self.pool.connects += 1
        mode = self.pool.mode
        if mode == "headers":
            self.payload = HEADER_BYTES
            self._send(REQUEST_LINE)
        elif mode == "tls_partial":
            hello = self.pool.hello
            self.payload = hello[len(hello) // 2:]
            self._send(hello[: len(hello) // 2])
        elif mode == "tls_headers":
            self.tls = self.pool.tls_context.wrap_socket(
                s, do_handshake_on_connect=False, server_hostname="127.0.0.1")
            self.sock = self.tls  # wrap_socket detached `s`
            self.payload = HEADER_BYTES
            self._handshake()
        if self.sock is not None:
            self.pool.selector.register(self.sock, selectors.EVENT_READ, self)
        self.next_at = time.monotonic() + self.pool.period

    def _handshake(self):
        try:
            self.tls.do_handshake()
            self.handshaken = True
            self._send(REQUEST_LINE)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except (OSError, ssl.SSLError):
            self.closed()

    def _send(self, data):
        try:
            (self.tls or self.sock).send(data)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            pass
        except OSError:
            self.closed()

    def readable(self):
        if self.tls is not None and not self.handshaken:
            self._handshake()
            return
        try:
            data = (self.tls or self.sock).recv(65536)
        except (ssl.SSLWantReadError, BlockingIOError):
            return
        except OSError:
            data = b""
        if not data:
            self.closed()
        # Anything else (an error response) is read and ignored; the server closes next.

    def tick(self, now):
        if self.sock is None:
            if self.pool.reconnect and now >= self.next_at:
                self.connect()
            return
        if now < self.next_at:
            return
        self.next_at = now + self.pool.period
        if self.pool.mode == "tls_silent" or (self.tls is not None and not self.handshaken):
            return
        if self.sent < len(self.payload):
            self._send(self.payload[self.sent:self.sent + 1])
            self.sent += 1

    def closed(self):
        if self.sock is None:
            return
        self.pool.closed_by_server += 1
        try:
            self.pool.selector.unregister(self.sock)
        except (KeyError, ValueError):
            pass
        (self.tls or self.sock).close()
        self.sock = None
        self.tls = None
        self.next_at = time.monotonic() + self.pool.period * random.random()

    def close(self):
        if self.sock is not None:
            try:
                self.pool.selector.unregister(self.sock)
            except (KeyError, ValueError):
                pass
            (self.tls or self.sock).close()
            self.sock = None


class SlowClients:
    """`count` slow connections to host:port from `sources`, in `mode`, on a thread of their
    own. Use as a context manager; counters: connects, closed_by_server, connect_failures."""

    def __init__(self, port, count=200, sources=("127.0.0.2",), mode="headers", period=2.0,
                 host="127.0.0.1", reconnect=True):
        self.host, self.port, self.count = host, port, count
        self.sources = list(sources)
        self.mode = mode
        self.period = period
        self.reconnect = reconnect
        self.connects = self.closed_by_server = self.connect_failures = 0
        self.hello = client_hello() if mode == "tls_partial" else b""
        self.tls_context = None
        if mode == "tls_headers":
            self.tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            self.tls_context.check_hostname = False
            self.tls_context.verify_mode = ssl.CERT_NONE
        self.selector = selectors.DefaultSelector()
        self.clients = [_Slow(self, self.sources[i % len(self.sources)]) for i in range(count)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._connected = threading.Event()

    def open_now(self):
        """How many of the pool's connections are open (from the pool's side)."""
        return sum(1 for c in self.clients if c.sock is not None)

    def _run(self):
        for c in self.clients:
            if self._stop.is_set():
                break
            c.connect()
        self._connected.set()
        while not self._stop.is_set():
            for key, _ in self.selector.select(timeout=0.05):
                key.data.readable()
            now = time.monotonic()
            for c in self.clients:
                c.tick(now)
        for c in self.clients:
            c.close()
        self.selector.close()

    def start(self, timeout=60):
        """Starts the pool and waits until every client has made its first connection attempt."""
        self._thread.start()
        self._connected.wait(timeout)
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=30)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
