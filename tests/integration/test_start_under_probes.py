"""Daemons that start while their peers already probe them (issue 28, item 5).

Under the simulator's shim a process can receive MADs from its first access of the IB paths (the
shim attaches to ibsim then, and SIM_SET_ISSM=1 makes it mark the port IsSM, the port ibsim sends
requests to; see tests/lib/simfabric.py), and a MAD of a class it has no agent for yet ends it
(SIGSEGV). ibfabricd's first access of the IB stack is the MAD engine opening its default port,
every agent it serves is registered in that same call right after the open, no collector runs
before, and under the shim it marks the port IsSM only once they are registered (docs/design.md,
"The MAD engine's port opens").

Seven daemons on a fat tree, each probing the six others over MAD every 100 ms and answering
their probes (SIM_SET_ISSM=1), with the default `ports` collector on:

- all seven start at once, nobody held back; every one answers every prober;
- then, round after round, some of them are stopped and started again, together, while the
  others keep probing them;
- every daemon is alive at the end, and every one answers every prober.

No timing is asserted. opensm runs on a spine (`ignore_other_sm`, as in test_localization) and
is stopped once the routes are programmed: the daemons need no SA (their targets are LIDs), and
its client slot stays free (ibsim has ten).

What this test does not judge is how a daemon ends: a MAD that reaches a process while the shim's
exit handler runs deadlocks that handler or crashes it (docs/design.md, "The MAD engine's port
opens"), which a stop under probes meets now and then. Such a stop is ended with SIGKILL, its
ibsim client slot is freed, and it is counted and printed, not failed, provided the daemon logged
`msg="exiting"` first (everything of its own torn down: what failed is an exit handler after
main). A stop that fails before that line fails the test. Skipped when IBFABRIC_SANITIZED=1: the
sanitized suites start daemons under probes in test_probe_mad."""

import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import unittest

from gen_fattree import fattree
from ibfabric_testlib import find_samples, free_port, require_tools
from simfabric import SIM_TOOLS, SimFabric

SEED = int(os.environ.get("IBFABRIC_TEST_SEED", random.randrange(1 << 30)))
LEAVES, SPINES, HCAS = 4, 2, 2  # eight hosts: seven daemons, one idle
DAEMONS = 7
ROUNDS, RESTARTED = 8, 3        # 7 + 24 starts under probing
SERVING = "mad: serving class 0x32"
# Logged by the engine for its first open (docs/design.md): the time from its first access of
# the IB stack to its last agent registered. Printed, never asserted.
WINDOW = re.compile(r"first_access_to_registered_us=(\d+)")


@require_tools(*SIM_TOOLS)
@unittest.skipIf(os.environ.get("IBFABRIC_SANITIZED") == "1",
                 "the release suite runs it; the sanitized suites start daemons under probes in "
                 "test_probe_mad")
class StartUnderProbes(unittest.TestCase):
    def setUp(self):
        print("start-under-probes seed %d (IBFABRIC_TEST_SEED=%d reproduces it)" % (SEED, SEED))
        self.rng = random.Random(SEED)
        self.tmp = tempfile.mkdtemp(prefix="ibfabric-start-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.fabric = SimFabric(fattree(leaves=LEAVES, spines=SPINES, hcas_per_leaf=HCAS),
                                name="startrace", sm_host="spine-01", start_sm=False)
        self.fabric.start()
        self.addCleanup(self.fabric.close)
        conf = os.path.join(self.tmp, "opensm.conf")
        with open(conf, "w") as f:
            f.write("ignore_other_sm TRUE\n")
        sm = self.fabric.spawn("opensm", ["opensm", "-F", conf, "-f",
                                          os.path.join(self.tmp, "opensm.log")], host="spine-01")
        self.hosts = ["node-%03d mlx5_0" % i for i in range(1, DAEMONS + 1)]
        self.fabric.wait_ready(hosts=self.hosts)
        lids = {h: self.fabric.lid(h) for h in self.hosts}
        sm.stop()
        self.names = [h.split()[0] for h in self.hosts]
        self.daemons = []
        self.windows = []
        self.bad_exits = []
        for i, host in enumerate(self.hosts):
            targets = ", ".join('{lid: %d, name: "%s"}' % (lids[h], h.split()[0])
                                for h in self.hosts if h != host)
            config = os.path.join(self.tmp, "ibfabricd-%d.yaml" % i)
            with open(config, "w") as f:
                # sysfs: the shim does not redirect stat(), so that collector finds no tree; sm:
                # no SM once opensm is stopped.
                f.write("collectors:\n"
                        "  sysfs: {enabled: false}\n  sm: {enabled: false}\n"
                        "  sriov: {enabled: false}\n"
                        "  probe: {enabled: true, interval: 1s, udp_listen: \"\", "
                        "probe_interval: 100ms, timeout: 1s, spike_floor: 10s, "
                        "targets: [%s]}\n" % targets)
            daemon = self.fabric.daemon(["--config", config], host=host,
                                        env=dict(os.environ, SIM_SET_ISSM="1"), port=free_port(),
                                        ready_log=SERVING)
            self.daemons.append(daemon)
        self.addCleanup(self.stop_all)

    def stop_all(self):
        for i, d in enumerate(self.daemons):
            if d.process is not None and d.process.poll() is None:
                self.stop(i)
        if self.bad_exits:
            print("stops that did not end cleanly under the shim (SIGKILLed or crashed at exit, "
                  "slots freed): %s" % ", ".join(self.bad_exits))
        if self.windows:
            print("first access to last agent registered, over %d starts: min %d us, median %d "
                  "us, max %d us" % (len(self.windows), min(self.windows),
                                     statistics.median(self.windows), max(self.windows)))

    def died(self, i, when):
        d = self.daemons[i]
        code = d.process.returncode
        why = " (SIGSEGV)" if code == -signal.SIGSEGV else ""
        self.fail("the daemon on %s exited with %s%s %s:\n%s"
                  % (self.names[i], code, why, when, d.log()[-3000:]))

    def assert_alive(self, when):
        for i, d in enumerate(self.daemons):
            if d.process.poll() is not None:
                self.died(i, when)

    def stop(self, i):
        """SIGTERM, as a restart does; see the module's docstring for an exit the shim spoils."""
        d = self.daemons[i]
        d.process.send_signal(signal.SIGTERM)
        try:
            code = d.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            d.process.kill()
            d.process.wait()
            code = "hung"
        if code != 0:
            self.bad_exits.append("%s (%s)" % (self.names[i], code))
            self.fabric.reclaim_clients([d.process.pid])
            if 'msg="exiting"' not in d.log():
                self.fail("the daemon on %s stopped with %s before its own teardown ended (no "
                          "msg=\"exiting\" in its log):\n%s" % (self.names[i], code,
                                                              d.log()[-3000:]))

    def launch(self, indices, when):
        """Starts these daemons together, then waits until each serves the ping class."""
        for i in indices:
            self.daemons[i].launch()
        for i in indices:
            try:
                self.daemons[i].wait_ready(timeout=20)
            except RuntimeError:
                if self.daemons[i].process.poll() is not None:
                    self.died(i, when)
                raise
            match = WINDOW.search(self.daemons[i].log())
            if match:
                self.windows.append(int(match.group(1)))

    def received(self, i):
        """{peer: MAD probes answered} as daemon i counts them."""
        samples = self.daemons[i].samples()
        return {p: sum(s.value for s in find_samples(samples, "ibfabric_probe_received_total",
                                                     peer=p, transport="mad"))
                for p in self.names if p != self.names[i]}

    def wait_every_pair_answers(self, what, timeout=60):
        """Until every daemon got answers from each of its peers beyond what it had now."""
        before = [self.received(i) for i in range(DAEMONS)]
        deadline = time.monotonic() + timeout
        missing = None
        while time.monotonic() < deadline:
            self.assert_alive(what)
            missing = [(self.names[i], p) for i in range(DAEMONS)
                       for p, n in self.received(i).items() if n <= before[i][p]]
            if not missing:
                return
            time.sleep(0.3)
        self.fail("%s: no answer for (prober, peer) %s within %ds" % (what, missing, timeout))

    def test_daemons_started_while_their_peers_probe_them_survive(self):
        self.launch(range(DAEMONS), "at the common start")
        self.wait_every_pair_answers("after the common start")
        order = list(range(DAEMONS))
        for r in range(ROUNDS):
            # The others probe at full rate meanwhile (they have probed for a second at least).
            time.sleep(1)
            self.assert_alive("before round %d" % r)
            chosen = self.rng.sample(order, RESTARTED)
            print("round %d: restarting %s" % (r, ", ".join(self.names[i] for i in chosen)))
            for i in chosen:
                self.stop(i)
            self.launch(chosen, "when started again in round %d" % r)
        time.sleep(1)
        self.assert_alive("after the last round")
        self.wait_every_pair_answers("after the last round")
        self.assert_alive("at the end")


if __name__ == "__main__":
    unittest.main(verbosity=2)
