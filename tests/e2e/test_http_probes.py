"""`/-/healthy` and `/-/ready` of a running daemon (docs/configuration.md, "Health checks"):

- healthy answers 200 from the event loop; HEAD works, POST is refused;
- ready answers 200 once every enabled collector has published (here sysfs on a fixture tree
  and sriov, which run on workers and may publish after the first scrape: the test waits for
  ready), and /metrics then shows both collectors' health, so "ready" is not an answer made up
  before collection;
- with basic auth on (the shipped example web config, TLS with a self-signed certificate), both
  paths answer without credentials while /metrics and every other path still get 401.

The 503 of a daemon that is not ready yet, and its list of collectors, is checked in the unit
test HttpServer.ReadyWaitsForEveryCollectorAndHealthyDoesNot with a readiness it controls.
"""

import http.client
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import unittest

from ibfabric_testlib import Daemon, find_sample, fixture, http_get, parse_exposition, source_dir

EXAMPLE = os.path.join(source_dir(), "config", "web-config.example.yml")


class HttpProbesTest(unittest.TestCase):
    def test_healthy_and_ready(self):
        with Daemon(["--sysfs-root", fixture("sysfs", "cx7-ndr"), "--no-collector.ports",
                     "--no-collector.sm"]) as d:
            status, headers, body = http_get(d.url + "/-/healthy")
            self.assertEqual((status, body), (200, "ibfabricd is healthy.\n"))
            self.assertTrue(headers["Content-Type"].startswith("text/plain"))
            deadline = time.monotonic() + 20
            while True:
                status, _, body = http_get(d.url + "/-/ready")
                if status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            self.assertEqual((status, body), (200, "ibfabricd is ready.\n"))
            samples = parse_exposition(d.scrape())
            for collector in ("sysfs", "sriov"):
                self.assertIsNotNone(find_sample(samples, "ibfabric_collector_success",
                                                 collector=collector))

            conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
            conn.request("HEAD", "/-/healthy")
            response = conn.getresponse()
            self.assertEqual(response.status, 200)
            self.assertEqual(response.read(), b"")
            conn.request("POST", "/-/ready")
            self.assertEqual(conn.getresponse().status, 405)
            conn.close()

    def test_probes_need_no_credentials_when_basic_auth_is_on(self):
        workdir = tempfile.mkdtemp(prefix="ibfabric-probes-")
        try:
            r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                                "-days", "2", "-subj", "/CN=127.0.0.1", "-addext",
                                "subjectAltName=IP:127.0.0.1", "-keyout", "tls.key", "-out",
                                "tls.crt"], cwd=workdir, capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            web = os.path.join(workdir, "web-config.yml")
            shutil.copy(EXAMPLE, web)
            tls = ssl.create_default_context(cafile=os.path.join(workdir, "tls.crt"))
            with Daemon(["--web.config.file", web, "--no-collector.ports",
                         "--no-collector.sysfs"], ready_log='msg="listening"') as d:
                def get(path):
                    conn = http.client.HTTPSConnection("127.0.0.1", d.port, context=tls,
                                                       timeout=10)
                    try:
                        conn.request("GET", path)
                        response = conn.getresponse()
                        return response.status, response.read().decode()
                    finally:
                        conn.close()
                self.assertEqual(get("/-/healthy"), (200, "ibfabricd is healthy.\n"))
                self.assertEqual(get("/-/ready"), (200, "ibfabricd is ready.\n"))
                for path in ("/metrics", "/", "/-/healthy2", "/-/other"):
                    with self.subTest(path=path):
                        self.assertEqual(get(path)[0], 401)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
