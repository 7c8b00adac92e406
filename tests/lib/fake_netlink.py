"""A stand-in for the kernel's rtnetlink at the SR-IOV collector's test seam
(IBFABRIC_SRIOV_NETLINK_SOCKET, docs/testing.md), for tests/e2e/test_hung_source.py and
tests/integration/test_soak.py: a dump that is never answered while it is silent."""

import socket
import struct
import threading

NLMSG_DONE = 3
NLM_F_MULTI = 2


class FakeNetlink:
    """A unix SOCK_SEQPACKET server standing in for the kernel's rtnetlink: while `silent` it
    takes requests and never answers; otherwise it answers each with an empty dump
    (NLMSG_DONE), including the requests it had left waiting."""

    def __init__(self, path):
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.server.bind(path)
        self.server.listen(16)
        self.lock = threading.Lock()
        self.silent = True
        self.waiting = []  # (connection, sequence) left unanswered
        self.requests = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            request = conn.recv(4096)
            if len(request) < 16:
                conn.close()
                continue
            sequence = struct.unpack_from("=IHHII", request)[3]
            with self.lock:
                self.requests += 1
                if self.silent:
                    self.waiting.append((conn, sequence))
                    continue
            self._answer(conn, sequence)

    @staticmethod
    def _answer(conn, sequence):
        try:
            conn.send(struct.pack("=IHHIIi", 20, NLMSG_DONE, NLM_F_MULTI, sequence, 0, 0))
        except OSError:
            pass  # the daemon gave up on this request (netlink_timeout)
        conn.close()

    def answer(self):
        with self.lock:
            self.silent = False
            waiting, self.waiting = self.waiting, []
        for conn, sequence in waiting:
            self._answer(conn, sequence)

    def go_silent(self):
        with self.lock:
            self.silent = True

    def close(self):
        self.server.close()
        with self.lock:
            for conn, _ in self.waiting:
                conn.close()
