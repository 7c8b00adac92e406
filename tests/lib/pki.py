"""A test PKI made with `openssl`: a CA, a server certificate for 127.0.0.1 and a client
certificate signed by it, and a self-signed client certificate it did not sign."""

import os
import subprocess


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1 and a client certificate signed by it, and a
    self-signed client certificate it did not sign."""
    def ok(args):
        r = run(args, cwd=d)
        assert r.returncode == 0, r.stderr
    ok(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=ibfabric test CA", "-keyout", "ca.key", "-out", "ca.crt"])
    ok(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=rogue scraper", "-keyout", "rogue.key", "-out", "rogue.crt"])
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, cn in (("tls", "127.0.0.1"), ("client", "scraper")):
        ok(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + cn,
            "-keyout", name + ".key", "-out", name + ".csr"])
        ok(["openssl", "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", name + ".crt"])
