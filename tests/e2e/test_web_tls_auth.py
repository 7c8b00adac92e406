"""TLS and basic auth on the endpoint (--web.config.file), checked with curl against a
self-signed CA made by `openssl` and bcrypt hashes made by `htpasswd`:

- `promtool check web-config` accepts the shipped example (config/web-config.example.yml, next
  to a certificate and key), and ibfabricd serves with that very file;
- right credentials pass; wrong password, unknown user and missing credentials get 401 with a
  WWW-Authenticate header; plain HTTP to the TLS port gets no HTTP answer; TLS 1.1 is refused;
- with RequireAndVerifyClientCert, a client certificate from the CA passes and none fails;
- a broken web config is refused by --check-config with file:line:column, and a running daemon
  keeps its old web config when a SIGHUP brings a broken one.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from ibfabric_testlib import Daemon, ibfabricd_path, source_dir
from pki import make_pki

EXAMPLE = os.path.join(source_dir(), "config", "web-config.example.yml")
EXAMPLE_USER = "prometheus"
EXAMPLE_PASSWORD = "example-password-change-me"  # stated in the example file


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


class WebTlsAuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ibfabric-tls-")
        make_pki(cls.dir)
        cls.web_config = os.path.join(cls.dir, "web-config.yml")
        shutil.copy(EXAMPLE, cls.web_config)
        cls.daemon = Daemon(["--web.config.file", cls.web_config, "--no-collector.ports"],
                            ready_log='msg="listening"')
        cls.daemon.start()
        cls.url = "https://127.0.0.1:%d" % cls.daemon.port

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def curl(self, *args, url=None):
        """Returns (curl exit code, HTTP status or 0, headers+body)."""
        r = run(["curl", "-sS", "-i", "--max-time", "10", "--cacert",
                 os.path.join(self.dir, "ca.crt"), "-w", "\n%{http_code}", *args,
                 url or self.url + "/metrics"])
        lines = r.stdout.rstrip("\n").rsplit("\n", 1)
        code = int(lines[-1]) if lines[-1].isdigit() else 0
        return r.returncode, code, r.stdout + r.stderr

    def test_promtool_accepts_the_shipped_example(self):
        r = run(["promtool", "check", "web-config", self.web_config])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_right_credentials_pass(self):
        rc, code, out = self.curl("-u", "%s:%s" % (EXAMPLE_USER, EXAMPLE_PASSWORD))
        self.assertEqual((rc, code), (0, 200), out)
        self.assertIn("ibfabric_build_info", out)
        self.assertIn("Strict-Transport-Security: max-age=31536000", out)
        # Again: served from the remembered check, same answer.
        rc, code, out = self.curl("-u", "%s:%s" % (EXAMPLE_USER, EXAMPLE_PASSWORD))
        self.assertEqual((rc, code), (0, 200), out)

    def test_wrong_or_missing_credentials_get_401(self):
        for args in (["-u", EXAMPLE_USER + ":wrong"], ["-u", "nobody:" + EXAMPLE_PASSWORD], [],
                     ["-H", "Authorization: Basic !!!notbase64"],
                     ["-H", "Authorization: Bearer abc"]):
            with self.subTest(args=args):
                rc, code, out = self.curl(*args)
                self.assertEqual((rc, code), (0, 401), out)
                self.assertIn('WWW-Authenticate: Basic realm="ibfabricd"', out)
                self.assertNotIn("ibfabric_build_info", out)

    def test_plain_http_to_the_tls_port_fails(self):
        rc, code, out = self.curl(url="http://127.0.0.1:%d/metrics" % self.daemon.port)
        self.assertNotEqual(rc, 0, out)
        self.assertEqual(code, 0, out)

    def test_tls_below_1_2_is_refused(self):
        rc, code, out = self.curl("-u", "%s:%s" % (EXAMPLE_USER, EXAMPLE_PASSWORD),
                                  "--tlsv1.0", "--tls-max", "1.1")
        self.assertNotEqual(rc, 0, out)
        self.assertEqual(code, 0, out)

    def test_client_certificates(self):
        config = os.path.join(self.dir, "mtls.yml")
        with open(config, "w") as f:
            f.write("tls_server_config:\n"
                    "  cert_file: tls.crt\n  key_file: tls.key\n"
                    "  client_auth_type: RequireAndVerifyClientCert\n"
                    "  client_ca_file: ca.crt\n")
        with Daemon(["--web.config.file", config, "--no-collector.ports"],
                    ready_log='msg="listening"') as d:
            url = "https://127.0.0.1:%d/metrics" % d.port
            rc, code, out = self.curl("--cert", os.path.join(self.dir, "client.crt"), "--key",
                                      os.path.join(self.dir, "client.key"), url=url)
            self.assertEqual((rc, code), (0, 200), out)
            rc, code, out = self.curl(url=url)
            self.assertNotEqual(rc, 0, out)
            self.assertEqual(code, 0, out)
            # A self-signed certificate the CA did not sign.
            rc, code, out = self.curl("--cert", os.path.join(self.dir, "rogue.crt"), "--key",
                                      os.path.join(self.dir, "rogue.key"), url=url)
            self.assertNotEqual(rc, 0, out)

    def test_broken_web_config_is_refused_with_its_location(self):
        cases = {
            "basic_auth_users:\n  admin: plaintext\n": "web.yml:2:10",
            "tls_server_config:\n  cert_file: missing.crt\n  key_file: tls.key\n": "web.yml:2:14",
            "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
            "  min_version: TLS11\n": "web.yml:4:16",
            "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
            "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n": "web.yml:4:3",
            "tls_server_confg:\n  cert_file: tls.crt\n": "web.yml:1:1",
        }
        for text, where in cases.items():
            with self.subTest(text=text):
                path = os.path.join(self.dir, "web.yml")
                with open(path, "w") as f:
                    f.write(text)
                r = run([ibfabricd_path(), "--check-config", "--web.config.file", path])
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(where, r.stderr)

    def test_reload_keeps_the_old_web_config_when_the_new_one_is_broken(self):
        config = os.path.join(self.dir, "reload.yml")
        shutil.copy(EXAMPLE, config)
        with Daemon(["--web.config.file", config, "--no-collector.ports"],
                    ready_log='msg="listening"') as d:
            url = "https://127.0.0.1:%d/metrics" % d.port
            with open(config, "w") as f:
                f.write("basic_auth_users:\n  prometheus: not-a-hash\n")
            d.signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while "config reload rejected" not in d.log() and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertIn("config reload rejected", d.log())
            rc, code, out = self.curl("-u", "%s:%s" % (EXAMPLE_USER, EXAMPLE_PASSWORD), url=url)
            self.assertEqual((rc, code), (0, 200), out)


if __name__ == "__main__":
    unittest.main()
