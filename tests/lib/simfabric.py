"""A simulated InfiniBand fabric for integration tests: ibsim, opensm and the umad shim
(docs/testing.md).

SimFabric starts `ibsim -s TOPOLOGY` fed from a FIFO (so a test can type console commands
such as PerformanceSet, Unlink, ReLink, Error while it runs), a Subnet Manager (opensm under the
umad shim), and waits until LID-routed MADs work. Tools and the daemon run under the shim from a
scratch directory (the shim leaves sys-<pid> trees in its working directory). Everything it
starts is ended by PID on close(), and the scratch directory is removed.

Python standard library only.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

SHIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
# What every simulated fabric needs (ibsim-utils, opensm, infiniband-diags: wait_ready polls with
# perfquery), for ibfabric_testlib.require_tools.
SIM_TOOLS = ("ibsim", "opensm", "perfquery", SHIM)


class SimFabricError(RuntimeError):
    pass


def first_node(topology_text, kind=None):
    """The quoted name of the first node record ('Hca' or 'Switch' when kind is given)."""
    for line in topology_text.splitlines():
        words = line.split(None, 2)
        if len(words) >= 3 and words[0] in ("Switch", "Hca") and (kind is None or words[0] == kind):
            rest = words[2]
            if rest.startswith('"'):
                return rest[1:rest.index('"', 1)]
    return None


class _Proc:
    """A long-lived helper started in its own session; ended by its PID."""

    def __init__(self, name, popen, log_path):
        self.name = name
        self.popen = popen
        self.log_path = log_path

    @property
    def pid(self):
        return self.popen.pid

    def alive(self):
        return self.popen.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=5.0):
        if self.popen.poll() is not None:
            return self.popen.returncode
        try:
            os.kill(self.popen.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        # Its own session: the group id is its PID, so this reaches only what it started.
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.popen.wait(timeout=timeout)

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""


class SimFabric:
    """A fabric: ibsim + opensm under the shim.

    topology: a path to an ibnetdiscover-style file, or the text itself when `text=True` or
    when it contains a newline. `sm_host`: the node opensm attaches to (default: the first HCA
    of the file). `limits`: (nodes, switches, ports) for ibsim's -N -S -P, which default to
    2,048, 256 and 13,312 (the benches' large fabrics raise them; the tests do not); then
    `ibsim_timeout` is how long ibsim may take to parse the network. Use as a context manager or
    call start()/close().
    """

    def __init__(self, topology, name=None, *, text=None, sm_host=None, start_sm=True,
                 sm_priority=None, ready_timeout=30.0, keep_dir=False, limits=None,
                 ibsim_timeout=10.0):
        if text is None:
            text = "\n" in topology
        if text:
            self.topology_text = topology
        else:
            with open(topology) as f:
                self.topology_text = f.read()
        self.name = name or "fabric"
        self.sock_name = "ibft-%s-%d-%s" % (self.name, os.getpid(), uuid.uuid4().hex[:8])
        self.sm_host = sm_host or first_node(self.topology_text, "Hca")
        self.start_sm = start_sm
        self.sm_priority = sm_priority
        self.ready_timeout = ready_timeout
        self.keep_dir = keep_dir
        self.limits = limits
        self.ibsim_timeout = ibsim_timeout
        self.workdir = None
        self.ibsim = None
        self.sms = []
        self.procs = []  # everything long-lived we started, for close()
        self._fifo_fd = None
        self._fifo_writer = None

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self):
        """A start that fails ends what it started and removes the scratch directory (its error
        carries the diagnostics), so a caller that registers close() only after start() leaks
        nothing."""
        self.workdir = tempfile.mkdtemp(prefix="simfabric-%s-" % self.name)
        try:
            self.topology_path = os.path.join(self.workdir, "fabric.topo")
            with open(self.topology_path, "w") as f:
                f.write(self.topology_text)
            self.fifo_path = os.path.join(self.workdir, "console")
            os.mkfifo(self.fifo_path)
            self.start_ibsim()
            if self.start_sm:
                self.start_opensm(self.sm_host, priority=self.sm_priority)
                self.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def start_ibsim(self):
        """Starts (or restarts, after kill_ibsim) the simulator on the same socket name."""
        if self.ibsim is not None and self.ibsim.alive():
            raise SimFabricError("ibsim is already running")
        if self._fifo_fd is None:
            # Opening read-write never blocks and keeps a writer, so ibsim never sees EOF.
            self._fifo_fd = os.open(self.fifo_path, os.O_RDWR)
            self._fifo_writer = os.open(self.fifo_path, os.O_WRONLY)
        log_path = os.path.join(self.workdir, "ibsim-%d.log" % len(self.procs))
        args = ["ibsim"]
        if self.limits:
            args += ["-N", str(self.limits[0]), "-S", str(self.limits[1]),
                     "-P", str(self.limits[2])]
        self.ibsim = self._spawn("ibsim", args + ["-s", self.topology_path], log_path,
                                 env=self.env(None, shim=False), stdin=self._fifo_fd)
        # Wait for the console prompt: the socket is listening once the network is parsed.
        self._wait(lambda: "simulator ready" in self.ibsim.log(), self.ibsim_timeout,
                   "ibsim to start", self.ibsim)
        return self.ibsim

    def kill_ibsim(self, sig=signal.SIGKILL):
        """Ends the simulator (its clients lose their connection); the SM dies with it or not,
        it is stopped too. start_ibsim() + start_opensm() bring a fabric back."""
        if self.ibsim is not None:
            self.ibsim.stop(sig)
        for sm in self.sms:
            sm.stop(signal.SIGKILL)
        self.sms = []

    def restart(self):
        """A new ibsim and opensm with the same socket name, ready for LID-routed MADs."""
        self.kill_ibsim()
        self.start_ibsim()
        if self.start_sm:
            self.start_opensm(self.sm_host, priority=self.sm_priority)
            self.wait_ready()

    def start_opensm(self, host, priority=None):
        log_path = os.path.join(self.workdir, "opensm-%s-%d.log" % (_safe(host), len(self.procs)))
        args = ["opensm", "-f", log_path + ".osm"]
        if priority is not None:
            args += ["-p", str(priority)]
        sm = self._spawn("opensm", args, log_path, env=self.env(host))
        self.sms.append(sm)
        return sm

    def wait_ready(self, hosts=None, timeout=None):
        """Polls a LID-routed query (perfquery of the host's own port) on every host until it
        answers; hosts defaults to the SM's node."""
        timeout = timeout or self.ready_timeout
        deadline = time.monotonic() + timeout
        for host in hosts or [self.sm_host]:
            while True:
                r = self.run_tool(["perfquery"], host=host, check=False, timeout=10)
                if r.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise SimFabricError("fabric not ready after %.0fs (perfquery on %s: %s)\n%s"
                                         % (timeout, host, r.stderr.strip()[-400:],
                                            self.diagnostics()))
                for sm in self.sms:
                    if not sm.alive():
                        raise SimFabricError("opensm exited:\n" + sm.log()[-2000:])
                time.sleep(0.2)

    def close(self):
        for proc in reversed(self.procs):
            try:
                proc.stop()
            except Exception:  # keep ending the others
                pass
        self.procs = []
        for fd in (self._fifo_writer, self._fifo_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fifo_fd = self._fifo_writer = None
        if self.workdir and not self.keep_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # --- using the fabric ------------------------------------------------------------------

    def env(self, host, shim=True, base=None):
        """Environment for a process attached to `host` (None = ibsim's default node)."""
        env = dict(os.environ if base is None else base)
        env["IBSIM_SOCKNAME"] = self.sock_name
        # opensm keeps guid2lid, neighbors and the like in /var/cache/opensm, shared by every
        # opensm on the machine: the fabrics of tests running side by side (with overlapping
        # GUIDs) would read each other's. Each fabric gets its own.
        if self.workdir:
            env["OSM_CACHE_DIR"] = env["OSM_TMP_DIR"] = self.workdir
        if shim:
            env["LD_PRELOAD"] = SHIM
            if host:
                env["SIM_HOST"] = host
        return env

    def command(self, line, settle=0.2):
        """Types one console command into ibsim (e.g. 'Unlink "Hca1"[1]')."""
        if self._fifo_writer is None:
            raise SimFabricError("ibsim console is not open")
        os.write(self._fifo_writer, (line.rstrip("\n") + "\n").encode())
        if settle:
            time.sleep(settle)

    def attached(self, timeout=10.0):
        """ibsim's occupied client slots, from its `Attached` console command:
        [(slot, pid, node, is_sm)]. The answer is read from ibsim's log between two comment
        lines of our own (ibsim echoes `#` lines), so output of earlier commands is not taken
        for it; waits up to `timeout` for ibsim to answer (it answers nothing while stopped)."""
        if self.ibsim is None or not self.ibsim.alive():
            raise SimFabricError("ibsim is not running")
        tag = uuid.uuid4().hex[:12]
        begin, end = "# attached-%s" % tag, "# attached-end-%s" % tag
        with open(self.ibsim.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            offset = f.tell()
        for line in (begin, "Attached", end):
            self.command(line, settle=0)
        text = [""]

        def answered():
            with open(self.ibsim.log_path, "rb") as f:
                f.seek(offset)
                text[0] = f.read().decode(errors="replace")
            return end in text[0]
        self._wait(answered, timeout, "ibsim's answer to Attached", self.ibsim)
        answer = text[0][text[0].index(begin):text[0].index(end)]
        return [(int(m.group(1)), int(m.group(2)), m.group(3), m.group(4) == "SM")
                for m in re.finditer(r'Client (\d+): pid (\d+) connected at "([^"]*)" port \S+, '
                                     r'lid \d+, qp \d+ ?(SM)?', answer)]

    def reclaim_clients(self, pids=()):
        """Frees the ibsim client slots of processes that died without detaching.

        ibsim has 10 client slots (IBSIM_MAX_CLIENTS). The shim gives its slot back
        (SIM_CTL_DISCONNECT) when a process exits normally; a SIGKILLed process keeps it until
        ibsim fails to deliver a MAD to it, which may never happen, and one process may hold
        several. After enough kills every new client fails with `sim_init: connect failed`.
        A slot also keeps its IsSM flag: a client attaching with SIM_SET_ISSM=1 to that node
        is refused ("SM already exists"); an opensm started there again is not (it sets IsSM
        through the issm device, unchecked), but requests to the node go to the first IsSM
        slot, the dead one, and when ibsim finds it dead it clears the IsSM bit of the port's
        PortInfo, which the live opensm had set. ibsim's console frees a slot and its IsSM flag
        with `X N` (disconnect_client() in ibsim/ibsim.c, the same in 0.10 and 0.12).

        Frees every slot whose pid is in `pids` or names no process any more. Call it after
        the killed process has been reaped (a zombie's pid still exists) and before starting
        its replacement (between `Attached` and `X N`, ibsim could otherwise hand a slot freed
        on its own to the newcomer). Returns the (slot, pid, node, is_sm) freed."""
        dead = set(pids)
        freed = [c for c in self.attached() if c[1] in dead or not _pid_exists(c[1])]
        for slot, _, _, _ in freed:
            self.command("X %d" % slot, settle=0)
        if freed:
            left = [c for c in self.attached() if c in freed]
            if left:
                raise SimFabricError("ibsim kept the slots %s after X" % left)
        return freed

    def perf_set(self, node, port, field, value, extended=False):
        attr = "PortCountersExtended" if extended else "PortCounters"
        self.command('PerformanceSet "%s"[%d] %s.%s=%d' % (node, port, attr, field, value),
                     settle=0)

    def run_tool(self, args, host=None, timeout=20, check=True):
        """Runs an infiniband-diags tool (or any libibumad program) under the shim."""
        r = subprocess.run(args, env=self.env(host), cwd=self.workdir, capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise SimFabricError("%s failed (%d): %s" % (" ".join(args), r.returncode,
                                                         r.stderr.strip()[-1000:]))
        return r

    def lid(self, host):
        """The base LID of `host`'s port, as `ibaddr` prints it."""
        out = self.run_tool(["ibaddr"], host=host).stdout
        return int(re.search(r"LID start (0x[0-9a-f]+)", out).group(1), 16)

    def spawn(self, name, args, host=None, env=None):
        """A long-lived process under the shim (ended by close())."""
        log_path = os.path.join(self.workdir, "%s-%d.log" % (_safe(name), len(self.procs)))
        return self._spawn(name, args, log_path, env=self.env(host, base=env))

    def daemon(self, args, host=None, env=None, **kwargs):
        """An ibfabric_testlib.Daemon attached to `host`, run from the scratch directory
        (kwargs: further Daemon arguments, e.g. port). The caller starts and stops it."""
        import ibfabric_testlib
        return ibfabric_testlib.Daemon(args, env=self.env(host, base=env), cwd=self.workdir,
                                       **kwargs)

    def diagnostics(self):
        parts = []
        if self.ibsim is not None:
            parts.append("--- ibsim (%s)\n%s" % ("alive" if self.ibsim.alive() else "dead",
                                                 self.ibsim.log()[-1500:]))
        for sm in self.sms:
            parts.append("--- opensm (%s)\n%s" % ("alive" if sm.alive() else "dead",
                                                  sm.log()[-1500:]))
        return "\n".join(parts)

    # --- internals -------------------------------------------------------------------------

    def _spawn(self, name, args, log_path, env, stdin=subprocess.DEVNULL):
        log = open(log_path, "w")
        try:
            popen = subprocess.Popen(args, env=env, cwd=self.workdir, stdin=stdin, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()
        proc = _Proc(name, popen, log_path)
        self.procs.append(proc)
        return proc

    def _wait(self, predicate, timeout, what, proc=None):
        deadline = time.monotonic() + timeout
        while not predicate():
            if proc is not None and not proc.alive():
                raise SimFabricError("%s exited while waiting for %s:\n%s"
                                     % (proc.name, what, proc.log()[-2000:]))
            if time.monotonic() > deadline:
                raise SimFabricError("timed out after %.0fs waiting for %s" % (timeout, what))
            time.sleep(0.05)


def _pid_exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _safe(text):
    return "".join(c if c.isalnum() else "_" for c in text)


# --- parsing tool output, for comparisons ----------------------------------------------------

def parse_dotted(output):
    """'Name:.....value' lines (perfquery, smpquery) -> {Name: value string}."""
    values = {}
    for line in output.splitlines():
        if line.startswith("#") or ":" not in line:
            continue
        key, _, rest = line.partition(":")
        values[key.strip()] = rest.lstrip(".").strip()
    return values
