"""UDP probes between network namespaces joined by a veth pair made by the test: a responder
daemon inside a namespace of its own, a prober daemon in the test's namespace.

- steady probing for several hundred probes shows no spike and no loss;
- pausing the responder process (SIGSTOP, SIGCONT after 100 ms, by PID) makes RTT spikes that the
  spike counter and the histogram show;
- pausing it for longer than the timeout shows as lost probes;
- the network share of the RTT (RTT minus the responder's hold time) is never above the RTT.
"""

import os
import signal
import subprocess
import tempfile
import time
import unittest

from ibfabric_testlib import Daemon, find_sample, ibfabricd_path, parse_exposition

PORT = 10917


def sh(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), r.stderr))
    return r


class UdpProbeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tag = os.getpid() % 60000
        cls.ns = "ibft-probe-%d" % tag
        cls.veth_root, cls.veth_ns = "ibfp%dr" % tag, "ibfp%dn" % tag
        net = "10.%d.%d" % (200 + tag % 50, tag % 250)
        cls.root_ip, cls.ns_ip = net + ".1", net + ".2"
        cls.tmp = tempfile.TemporaryDirectory(prefix="ibfabric-probe-")
        cls.responder = None
        cls.prober = None
        try:
            sh("ip", "netns", "add", cls.ns)
            sh("ip", "link", "add", cls.veth_root, "type", "veth", "peer", "name", cls.veth_ns)
            sh("ip", "link", "set", cls.veth_ns, "netns", cls.ns)
            sh("ip", "addr", "add", cls.root_ip + "/24", "dev", cls.veth_root)
            sh("ip", "link", "set", cls.veth_root, "up")
            sh("ip", "netns", "exec", cls.ns, "ip", "addr", "add", cls.ns_ip + "/24", "dev",
               cls.veth_ns)
            sh("ip", "netns", "exec", cls.ns, "ip", "link", "set", cls.veth_ns, "up")
            sh("ip", "netns", "exec", cls.ns, "ip", "link", "set", "lo", "up")

            base = ("collectors:\n  sysfs: {enabled: false}\n  ports: {enabled: false}\n"
                    "  sm: {enabled: false}\n  sriov: {enabled: false}\n")
            responder_cfg = os.path.join(cls.tmp.name, "responder.yaml")
            with open(responder_cfg, "w") as f:
                f.write(base + "  probe: {enabled: true, udp_listen: \"%s:%d\"}\n"
                        % (cls.ns_ip, PORT))
            prober_cfg = os.path.join(cls.tmp.name, "prober.yaml")
            with open(prober_cfg, "w") as f:
                f.write(base + "  probe:\n    enabled: true\n    interval: 500ms\n"
                        "    udp_listen: \"\"\n    probe_interval: 10ms\n    timeout: 300ms\n"
                        "    spike_multiplier: 5\n    spike_floor: 20ms\n"
                        "    targets: [{address: \"%s:%d\", name: peer-a}]\n" % (cls.ns_ip, PORT))
            log = open(os.path.join(cls.tmp.name, "responder.log"), "w")
            cls.responder = subprocess.Popen(
                ["ip", "netns", "exec", cls.ns, ibfabricd_path(), "--config", responder_cfg,
                 "--web.listen-address", "127.0.0.1:0"],
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
            log.close()
            # The responder first: a probe sent before it listens would count as lost.
            deadline = time.monotonic() + 20
            while 'msg="listening"' not in open(log.name).read():
                if cls.responder.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("responder did not start:\n" + open(log.name).read())
                time.sleep(0.05)
            cls.prober = Daemon(["--config", prober_cfg])
            cls.prober.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.prober:
            cls.prober.stop()
        if cls.responder and cls.responder.poll() is None:
            os.kill(cls.responder.pid, signal.SIGCONT)
            cls.responder.terminate()
            cls.responder.wait(timeout=10)
        sh("ip", "link", "del", cls.veth_root, check=False)
        sh("ip", "netns", "del", cls.ns, check=False)
        cls.tmp.cleanup()

    def sample(self, samples, name, **labels):
        s = find_sample(samples, name, peer="peer-a", transport="udp", **labels)
        return None if s is None else s.value

    def wait_received(self, at_least, timeout=60):
        return self.prober.wait_for(
            lambda s: (self.sample(s, "ibfabric_probe_received_total") or 0) >= at_least,
            timeout=timeout, what="%d answered probes" % at_least)

    def test_1_steady_probing_has_no_spikes_and_no_loss(self):
        samples = self.wait_received(400)
        self.assertEqual(self.sample(samples, "ibfabric_probe_spikes_total"), 0)
        self.assertEqual(self.sample(samples, "ibfabric_probe_lost_total"), 0)
        p50 = self.sample(samples, "ibfabric_probe_rtt_window_seconds", stat="p50")
        p99 = self.sample(samples, "ibfabric_probe_rtt_window_seconds", stat="p99")
        self.assertGreater(p50, 0)
        self.assertLessEqual(p50, p99)
        count = self.sample(samples, "ibfabric_probe_rtt_seconds_count")
        inf = self.sample(samples, "ibfabric_probe_rtt_seconds_bucket", le="+Inf")
        self.assertEqual(count, inf)
        self.assertGreaterEqual(count, 400)
        print("steady: %d probes, p50 %.1f us, p99 %.1f us, jitter %.1f us" % (
            count, p50 * 1e6, p99 * 1e6,
            self.sample(samples, "ibfabric_probe_jitter_seconds") * 1e6))

    def test_2_a_paused_responder_makes_spikes(self):
        before = parse_exposition(self.prober.scrape())
        slow_before = self.sample(before, "ibfabric_probe_rtt_seconds_bucket", le="0.01")
        count_before = self.sample(before, "ibfabric_probe_rtt_seconds_count")
        for _ in range(3):
            os.kill(self.responder.pid, signal.SIGSTOP)
            time.sleep(0.1)
            os.kill(self.responder.pid, signal.SIGCONT)
            time.sleep(0.5)
        samples = self.wait_received(count_before + 50)
        self.assertGreaterEqual(self.sample(samples, "ibfabric_probe_spikes_total"), 1)
        # The histogram shows them: probes slower than 10 ms appeared.
        slow = (self.sample(samples, "ibfabric_probe_rtt_seconds_count") -
                self.sample(samples, "ibfabric_probe_rtt_seconds_bucket", le="0.01"))
        self.assertGreater(slow, count_before - slow_before)
        self.assertGreaterEqual(
            self.sample(samples, "ibfabric_probe_rtt_window_seconds", stat="max"), 0.01)
        self.assertIn("RTT spike peer=peer-a", self.prober.log())

    def test_3_a_longer_pause_shows_as_loss(self):
        before = self.sample(parse_exposition(self.prober.scrape()), "ibfabric_probe_lost_total")
        os.kill(self.responder.pid, signal.SIGSTOP)
        time.sleep(1.0)
        os.kill(self.responder.pid, signal.SIGCONT)
        samples = self.prober.wait_for(
            lambda s: (self.sample(s, "ibfabric_probe_lost_total") or 0) > before + 10,
            timeout=10, what="lost probes")
        self.assertGreater(self.sample(samples, "ibfabric_probe_sent_total"),
                           self.sample(samples, "ibfabric_probe_received_total"))

    def test_4_network_share_is_never_above_the_rtt(self):
        samples = parse_exposition(self.prober.scrape())
        rtt_sum = self.sample(samples, "ibfabric_probe_rtt_seconds_sum")
        net_sum = self.sample(samples, "ibfabric_probe_network_rtt_seconds_sum")
        self.assertEqual(self.sample(samples, "ibfabric_probe_network_rtt_seconds_count"),
                         self.sample(samples, "ibfabric_probe_rtt_seconds_count"))
        self.assertLessEqual(net_sum, rtt_sum)
        self.assertGreater(net_sum, 0)


if __name__ == "__main__":
    unittest.main()
