#!/usr/bin/env python3
"""The fabric sweep at the size of a 10,000-node cluster, on ibsim with raised limits.

Default shape: a three-level fat tree (tests/lib/gen_fattree.py fattree3) of 10 pods, each
25 leaves x 40 HCAs and 40 spines, under 200 cores: 10,000 HCAs, 850 switches (leaves of 80
ports, 40 down / 40 up; spines of 50, 25 down / 25 up; cores of 50), 50,000 switch ports, every
one cabled. ibsim runs with `-N 12000 -S 1000 -P 80000` (its defaults stop at 2,048 nodes, 256
switches, 13,312 ports). `--shape LxSxH` runs a two-level fat tree instead (fattree(), e.g.
60x30x32: 90 switches, 5,580 switch ports, the largest of bench/fabric_scale.py).

Phases (`--phases`, comma-separated, in this order; all by default):

  up       ibsim's start (parse) time and memory; opensm's time to `Entering MASTER state`, to
           `SUBNET UP` in its log (it may never print it on large fabrics), and until a
           `--once` sweep of every switch port has no failed port; opensm's memory.
  sweep    ROUNDS rounds, alternating: `ibqueryerrors` (one process, its own discovery and a
           PortCounters Get per port); `ibfabricd --once` (fabric collector only, rate limit
           lifted): discovery, sweep, MADs, whole process, peak RSS (wait4 ru_maxrss); a
           running daemon, `shards: 1`: its discovery and the median of its steady sweeps 2
           to 1+STEADY (topology cached, from its debug log), MADs/s, CPU of every daemon
           thread and of ibsim per MAD over those sweeps; two running daemons on two nodes,
           `shards: 2`, shard 0 and 1 at once: the same per shard (they share ibsim's one
           thread and the machine's cores); shard 0 of 2 alone, as each node of a real
           fabric sweeps with its own CPU.
  mads     (not in the default phases) the MADs one ibqueryerrors and one --once run send,
           counted at the port as bench/fabric_sweep.py does.
  clients  (not in the default phases) --clients daemons, shards 0..N-1 of N, at once beside
           opensm: which attach to ibsim and sweep their shard.
  budgets  for each series budget (`counters:` all, errors_and_traffic, a 5-counter list) and
           each of shards 1/1, 0/2, 1/2: a daemon's series (all, and the fabric's), the bytes
           and wall time of one whole scrape, gzip and text.
  prom     a real Prometheus (Debian's, tests/lib/promserver.py) scraping shard 0 of 2 every
           --prom-interval (timeout the same) for --prom-window seconds: its
           scrape_duration_seconds and scrape_samples_scraped.
  default  (not in the default phases: about 7 minutes at 50,000 ports) the default rate limit
           (2,000 MADs/s): a running daemon's discovery, first sweep and one steady sweep, with
           `shards: 1`, then two daemons with `shards: 2` at once.
  memory   the daemon's peak RSS (VmHWM, reset with /proc/PID/clear_refs after its second
           sweep, or the largest VmRSS sampled every 20 ms if larger) and median RSS over
           --mem-window seconds of sweeps every --steady-interval while scraped every 2 s:
           gzip, every Nth scrape plain text (--mem-text-every N; 0: gzip only); beside an
           idle daemon (no collector) scraped the same way; KiB per swept switch port. The
           sweeping daemon keeps its link memory in a state directory, as under the shipped
           unit (since 2026-11-25 night; earlier figures were read without one).
           With --baseline BINARY, that build and this one alternate over --mem-rounds
           rounds beside one idle daemon, and their figures are printed side by side.
  vl       (not in the default phases) what `vl_transmit_wait: true` costs against false, on the
           same fabric in the same run: ROUNDS rounds of `ibfabricd --once` (rate limit
           lifted), off then on in each, so that the machine's noise hits both: medians of the
           sweep, the whole process, the sweep's MADs (one PortVLXmitWaitCounters more per
           port), peak RSS, ports swept and failed, series (all, the fabric's, the per-VL ones:
           one per operational data VL of each port) and exposition bytes, with on/off; then a
           running daemon of each, one after the other, measured as the memory phase measures
           one (link memory on disk, beside one idle daemon, --mem-* options): RSS and KiB per
           swept switch port, off, on and on/off.

Everything it starts (ibsim, opensm, daemons, Prometheus) is ended by PID when it ends.

    bench/fabric_10k.py [--rounds 3] [--shape 10x25x40x40x5 | LxSxH] [--phases up,sweep,...]
"""

import argparse
import gzip
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, HERE)
os.environ.setdefault("IBFABRIC_SOURCE_DIR", ROOT)

from fabric_sweep import SWEEP_DONE, cpu_seconds, metric  # noqa: E402
from gen_fattree import fattree, fattree3  # noqa: E402
from simfabric import SimFabric  # noqa: E402

DISCOVERY_DONE = re.compile(r"fabric: discovery done switches=(\d+) cas=(\d+) cables=(\d+) "
                            r"seconds=([\d.]+)")
LIMITS = (12000, 1000, 80000)
# Before the sweep queried 16 switches at a time (2026-11-25), the engine's default
# mad.max_queued (100,000) failed the MADs of a steady sweep of more than about 33,000 switch
# ports from one node (3 per port, all queued at once) with queue_full, so the bench raises it;
# --max-queued 100000 runs with the default.
MAX_QUEUED = 1000000
BUDGETS = (("all", "all"), ("errors_and_traffic", "errors_and_traffic"),
           ("list5", "[symbol_errors, link_downed, receive_errors, transmit_bytes, "
                     "receive_bytes]"))


def say(*args):
    print(*args, flush=True)


def hcas(text):
    return re.findall(r'^Hca\t\d+ "([^"]+)"', text, re.M)


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def daemon_config(f, name, interval="1h", rediscover=1000, shards=1, shard=0, counters="all",
                  fabric=True, rate_limit=0, state=False, vl_transmit_wait=False):
    text = "mad: {rate_limit: %d, max_queued: %d}\ncollectors:\n  sysfs: {enabled: false}\n" \
           "  ports: {enabled: false}\n" % (rate_limit, MAX_QUEUED)
    if state:
        # As under the shipped unit (StateDirectory=): the link memory is written to disk.
        directory = os.path.join(f.workdir, name + "-state")
        os.makedirs(directory, exist_ok=True)
        text = "state_directory: %s\n" % directory + text
    if fabric:
        text += ("  fabric: {enabled: true, interval: %s, rediscover_every: %d, shards: %d, "
                 "shard: %d, counters: %s%s}\n" % (interval, rediscover, shards, shard, counters,
                                                   ", vl_transmit_wait: true"
                                                   if vl_transmit_wait else ""))
    return write(os.path.join(f.workdir, name + ".yaml"), text)


def scrape(url, compressed, timeout=300):
    """(body text, bytes on the wire, wall seconds)."""
    headers = {"Accept-Encoding": "gzip"} if compressed else {}
    start = time.monotonic()
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                timeout=timeout) as r:
        body = r.read()
        encoding = r.headers.get("Content-Encoding", "")
    wall = time.monotonic() - start
    if compressed and encoding != "gzip":
        raise RuntimeError("no gzip answer to Accept-Encoding: gzip")
    text = gzip.decompress(body) if encoding == "gzip" else body
    return text.decode(), len(body), wall


FABRIC_RUNS = re.compile(r'^ibfabric_collector_runs_total\{collector="fabric"\} (\S+)$', re.M)
VL_FAMILY = "ibfabric_fabric_port_vl_transmit_wait_ticks_total"
# A per-VL series' labels but its vl: the switch port it belongs to.
VL_PORT = re.compile(r"^%s\{(.*?),?vl=\"\d+\"(.*?)\} " % VL_FAMILY, re.M)


def series(text, *families):
    """Series in an exposition: all, the fabric's, and then those of each of `families`."""
    n = fab = 0
    counts = [0] * len(families)
    for line in text.splitlines():
        if line and not line.startswith("#"):
            n += 1
            if line.startswith("ibfabric_fabric_"):
                fab += 1
                for i, family in enumerate(families):
                    if line.startswith(family + "{"):
                        counts[i] += 1
    return (n, fab) + tuple(counts)


def vls_per_port(text):
    """{number of per-VL series of a switch port: how many ports have that many}."""
    ports = {}
    for m in VL_PORT.finditer(text):
        ports[m.groups()] = ports.get(m.groups(), 0) + 1
    hist = {}
    for n in ports.values():
        hist[n] = hist.get(n, 0) + 1
    return dict(sorted(hist.items()))


# --- up ------------------------------------------------------------------------------------

def bring_up(text, timeout, sweep_host, binary):
    """A started SimFabric and its bring-up timings."""
    t = {}
    start = time.monotonic()
    f = SimFabric(text, name="f10k", text=True, limits=LIMITS, start_sm=False,
                  ibsim_timeout=timeout)
    try:
        f.start()
        t["ibsim_start"] = time.monotonic() - start
        t["ibsim_rss_mib"] = status_kib(f.ibsim.pid, "VmRSS") / 1024
        sm = f.start_opensm(f.sm_host)
        start = time.monotonic()
        osm_log = sm.log_path + ".osm"
        once_cfg = daemon_config(f, "ready")
        deadline = start + timeout
        while "ready" not in t:
            if time.monotonic() > deadline:
                raise RuntimeError("fabric not swept whole after %ds: %s" % (timeout, t))
            if not sm.alive() or not f.ibsim.alive():
                raise RuntimeError("opensm or ibsim died:\n" + f.diagnostics())
            try:
                with open(osm_log, errors="replace") as log:
                    osm = log.read()
            except OSError:
                osm = ""
            now = time.monotonic() - start
            if "master" not in t and "Entering MASTER state" in osm + sm.log():
                t["master"] = now
                say("  opensm MASTER after %.1fs" % now)
            if "subnet_up" not in t and "SUBNET UP" in osm:
                t["subnet_up"] = now
                say("  opensm SUBNET UP after %.1fs" % now)
            if "master" in t:
                r = subprocess.run([binary, "--once", "--config", once_cfg],
                                   env=f.env(sweep_host), cwd=f.workdir, capture_output=True,
                                   text=True, timeout=600)
                try:
                    swept = metric(r.stdout, "ibfabric_fabric_ports_swept")
                    failed = metric(r.stdout, "ibfabric_fabric_ports_failed")
                    say("  --once at %.1fs: %d ports swept, %d failed"
                        % (time.monotonic() - start, swept, failed))
                    if swept and not failed:
                        t["ready"] = time.monotonic() - start
                except KeyError:
                    say("  --once at %.1fs: no sweep yet" % (time.monotonic() - start))
            time.sleep(2)
        t["opensm_rss_mib"] = status_kib(sm.pid, "VmRSS") / 1024
        t["opensm_hwm_mib"] = status_kib(sm.pid, "VmHWM") / 1024
        t["ibsim_rss_mib_after"] = status_kib(f.ibsim.pid, "VmRSS") / 1024
        return f, t
    except BaseException:
        f.close()
        raise


# --- sweep ---------------------------------------------------------------------------------

def run_once(f, binary, host, config):
    """ibfabricd --once: metrics, wall seconds and peak RSS (MiB) of the process."""
    start = time.monotonic()
    p = subprocess.Popen([binary, "--once", "--config", config], env=f.env(host),
                         cwd=f.workdir, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    # The daemon's own high-water mark, read while it runs: wait4's ru_maxrss of a child counts
    # the image it was forked from (this script, with the fabric and earlier outputs: 440-478
    # MiB at 50,000 ports, whatever the daemon used).
    hwm = [0]
    done = threading.Event()

    def watch():  # until the output ends (not p.poll(): that would reap the child before wait4)
        while not done.is_set():
            try:
                hwm[0] = max(hwm[0], status_kib(p.pid, "VmHWM"))
            except (OSError, ValueError):
                return
            time.sleep(0.01)
    watcher = threading.Thread(target=watch)
    watcher.start()
    out = p.stdout.read().decode()
    done.set()
    watcher.join()
    _, status, _ = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    if p.returncode != 0:
        raise RuntimeError("ibfabricd --once failed (%d)" % p.returncode)
    n, fab, vl = series(out, VL_FAMILY)
    return {
        "wall": wall,
        "peak_mib": hwm[0] / 1024,
        "collector": metric(out, "ibfabric_collector_duration_seconds", collector="fabric"),
        "discovery": metric(out, "ibfabric_fabric_discovery_duration_seconds"),
        "sweep": metric(out, "ibfabric_fabric_sweep_duration_seconds"),
        "sweep_mads": int(metric(out, "ibfabric_fabric_sweep_mads")),
        "ports": int(metric(out, "ibfabric_fabric_ports_swept")),
        "failed": int(metric(out, "ibfabric_fabric_ports_failed")),
        "text_bytes": len(out.encode()),
        "series": n,
        "fabric_series": fab,
        "vl_series": vl,
        "vls_per_port": vls_per_port(out) if vl else {},
    }


def run_iqe(f, host):
    start = time.monotonic()
    before = cpu_seconds(f.ibsim.pid)
    r = f.run_tool(["ibqueryerrors"], host=host, check=False, timeout=900)
    wall = time.monotonic() - start
    ibsim = cpu_seconds(f.ibsim.pid) - before
    m = re.search(r"(\d+) ports checked", r.stdout)
    if not m:
        raise RuntimeError("ibqueryerrors failed (%d): %s" % (r.returncode, r.stderr[-1000:]))
    return wall, int(m.group(1)), ibsim


class Steady:
    """Watches running daemons' debug logs: the discovery, then STEADY sweeps after the first
    sweep, and the CPU (daemon threads, ibsim) spent between the end of the first sweep and the
    end of the last one counted."""

    def __init__(self, f, daemons, steady):
        self.f, self.daemons, self.steady = f, daemons, steady

    def run(self, timeout):
        n = len(self.daemons)
        cpu0 = [None] * n
        cpu1 = [None] * n
        ib0 = [None] * n
        ib1 = [None] * n
        deadline = time.monotonic() + timeout
        while any(c is None for c in cpu1):
            if time.monotonic() > deadline:
                raise RuntimeError("no %d steady sweeps within %ds:\n%s"
                                   % (self.steady, timeout, self.daemons[0].log()[-2000:]))
            time.sleep(0.1)
            for i, d in enumerate(self.daemons):
                done = len(SWEEP_DONE.findall(d.log()))
                if cpu0[i] is None and done >= 1:
                    cpu0[i], ib0[i] = cpu_seconds(d.process.pid), cpu_seconds(self.f.ibsim.pid)
                if cpu1[i] is None and done >= 1 + self.steady:
                    cpu1[i], ib1[i] = cpu_seconds(d.process.pid), cpu_seconds(self.f.ibsim.pid)
        out = []
        for i, d in enumerate(self.daemons):
            log = d.log()
            disc = DISCOVERY_DONE.search(log)
            sweeps = SWEEP_DONE.findall(log)[1:1 + self.steady]
            failed = max(int(x[0]) for x in sweeps)
            mads = sum(int(x[1]) for x in sweeps)
            out.append({
                "discovery": float(disc.group(4)),
                "first_sweep": float(SWEEP_DONE.findall(log)[0][2]),
                "sweep": statistics.median(float(x[2]) for x in sweeps),
                "mads": int(sweeps[-1][1]),
                "failed": failed,
                "cpu_per_mad_us": (cpu1[i] - cpu0[i]) / mads * 1e6,
                "ibsim_per_mad_us": (ib1[i] - ib0[i]) / mads * 1e6,
                "rss_mib": status_kib(d.process.pid, "VmRSS") / 1024,
                "hwm_mib": status_kib(d.process.pid, "VmHWM") / 1024,
            })
        return out


def run_steady(f, hosts, shards, interval, steady, timeout, rate_limit=0, only=None):
    """Steady sweeps of daemons sweeping shards 0..shards-1 at once (or only those in `only`)."""
    daemons = []
    try:
        for shard in (range(shards) if only is None else only):
            cfg = daemon_config(f, "steady-%d-%d" % (shards, shard), interval=interval,
                                shards=shards, shard=shard, rate_limit=rate_limit)
            d = f.daemon(["--config", cfg, "--log.level", "debug"], host=hosts[shard])
            daemons.append(d)
            d.start(timeout=60)
        return Steady(f, daemons, steady).run(timeout)
    finally:
        for d in daemons:
            d.__exit__(None, None, None)


# --- budgets, prom, memory -------------------------------------------------------------------

def wait_collected(d, timeout):
    """Until the daemon (run with --log.level debug) has finished a fabric sweep, and a moment
    for its snapshot to be published."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if SWEEP_DONE.search(d.log()):
            time.sleep(1)
            return
        time.sleep(0.5)
    raise RuntimeError("no fabric collection within %ds:\n%s" % (timeout, d.log()[-2000:]))


def budgets(f, hosts, timeout):
    rows = []
    for name, counters in BUDGETS:
        for shards, shard in ((1, 0), (2, 0), (2, 1)):
            cfg = daemon_config(f, "budget-%s-%d-%d" % (name, shards, shard), shards=shards,
                                shard=shard, counters=counters)
            with f.daemon(["--config", cfg, "--log.level", "debug"], host=hosts[shard]) as d:
                wait_collected(d, timeout)
                gz_text, gz_bytes, gz_wall = scrape(d.url + "/metrics", True)
                gz2 = scrape(d.url + "/metrics", True)[2]
                text, text_bytes, text_wall = scrape(d.url + "/metrics", False)
                n, fab = series(text)
                row = (name, shards, shard, n, fab, gz_bytes, gz_wall, gz2, text_bytes,
                       text_wall)
                say("  budget %-18s shard %d/%d: %d series (%d fabric), gzip %d B in %.3fs "
                    "(again, cached: %.3fs), text %d B in %.3fs" % ((row[0], row[2], row[1])
                                                                     + row[3:]))
                rows.append(row)
    return rows


def prom(f, host, window, interval, fabric_interval, timeout):
    from promserver import PromServer
    cfg = daemon_config(f, "prom-shard0", interval=fabric_interval, rediscover=10, shards=2,
                        shard=0)
    with f.daemon(["--config", cfg, "--log.level", "debug"], host=host) as d:
        wait_collected(d, timeout)
        target = d.url.replace("http://", "")
        with PromServer(targets=[target], interval=interval) as p:
            time.sleep(window)
            durations = p.query('scrape_duration_seconds{job="ibfabric"}[%ds]' % window)
            samples = p.query('scrape_samples_scraped{job="ibfabric"}')
            up = p.query('up{job="ibfabric"}[%ds]' % window)
            prom_rss = status_kib(p.proc.pid, "VmHWM") / 1024
        vals = [float(v) for _, v in durations[0]["values"]] if durations else []
        ups = [float(v) for _, v in up[0]["values"]] if up else []
        return {"durations": vals, "samples": int(float(samples[0]["value"][1])) if samples else 0,
                "up": ups, "prom_hwm_mib": prom_rss}


def scraper(url, stop, every=2.0, text_every=5):
    """Scrapes url every `every` seconds until `stop` is set: gzip, every text_every-th plain
    (none when 0)."""
    stats = {"gzip": [], "text": [], "after_sweep": [], "later": []}
    i = 0
    last_run = None
    while not stop.is_set():
        start = time.monotonic()
        i += 1
        kind = "text" if text_every and i % text_every == 0 else "gzip"
        try:
            text, size, wall = scrape(url, kind == "gzip")
            stats[kind].append((size, wall))
            # The first scrape that shows a new fabric sweep, against the later ones.
            run = FABRIC_RUNS.search(text)
            if kind == "gzip" and run and last_run is not None:
                stats["after_sweep" if run.group(1) != last_run else "later"].append(wall)
            last_run = run.group(1) if run else last_run
        except OSError as e:
            stats.setdefault("errors", []).append(str(e))
        stop.wait(max(0.0, every - (time.monotonic() - start)))
    return stats


def memory_window(f, d, window, pid_ready, text_every=5):
    """Peak RSS over `window` seconds of 2-second scrapes (VmHWM reset at the start, and
    VmRSS sampled every 20 ms), the median of the samples, and the scrapes."""
    pid = d.process.pid
    pid_ready()
    with open("/proc/%d/clear_refs" % pid, "w") as c:
        c.write("5")  # resets VmHWM to the current RSS
    stop = threading.Event()
    result = {}
    th = threading.Thread(target=lambda: result.update(
        scraper(d.url + "/metrics", stop, text_every=text_every)))
    th.start()
    rss = []
    end = time.monotonic() + window
    while time.monotonic() < end:
        rss.append(status_kib(pid, "VmRSS") / 1024)
        time.sleep(0.02)
    stop.set()
    th.join()
    # The kernel updates VmHWM only when memory is unmapped (and at the read), not when
    # malloc gives pages back with madvise: the peak is the larger of it and the samples.
    hwm = status_kib(pid, "VmHWM") / 1024
    return {"hwm": max(hwm, max(rss)), "vmhwm": hwm, "rss_median": statistics.median(rss),
            "rss_max_sampled": max(rss), "scrapes": result}


SHARD_PORTS = re.compile(r"fabric: sweep done ports=(\d+) failed=(\d+)")


def memory(f, host, ports, interval, window, timeout, text_every=(5,), shards=1,
           vl_transmit_wait=False, name="mem", idle=None, binary=None):
    """The idle daemon (unless given: `idle`, a memory_window() of one) and one sweeping daemon
    (`binary`, else $IBFABRICD) per text_every value: (idle, [{every, ports, busy, peak_kib,
    rss_kib} per value])."""
    if idle is None:
        idle_cfg = daemon_config(f, "idle", fabric=False)
        with f.daemon(["--config", idle_cfg], host=host) as d:
            idle = memory_window(f, d, min(window, 30), lambda: time.sleep(2), text_every[0])
        show("idle", idle)
    cfg = daemon_config(f, name, interval=interval, rediscover=10, shards=shards, state=True,
                        vl_transmit_wait=vl_transmit_wait)
    rows = []
    for every in text_every:
        with f.daemon(["--config", cfg, "--log.level", "debug"], host=host,
                      binary=binary) as d:
            def ready():
                deadline = time.monotonic() + timeout
                while len(SWEEP_DONE.findall(d.log())) < 2:
                    if time.monotonic() > deadline:
                        raise RuntimeError("no second sweep:\n" + d.log()[-2000:])
                    time.sleep(0.2)
            busy = memory_window(f, d, window, ready, every)
            sweeps = SWEEP_DONE.findall(d.log())
            if shards > 1:  # shard 0's switch ports: what its last sweep covered
                ok, failed = SHARD_PORTS.findall(d.log())[-1]
                ports = int(ok) + int(failed)
                say("  shard 0 of %d: %d switch ports" % (shards, ports))
        show("sweeping%s (%s)" % (" with vl_transmit_wait" if vl_transmit_wait else "",
                                  "every %dth scrape text" % every if every else "gzip only"),
             busy)
        sweep_seconds = statistics.median(float(x[2]) for x in sweeps[1:] or sweeps)
        say("  sweeps in the daemon's life: %d (failed ports max %d), median %.2f s after the "
            "first" % (len(sweeps), max(int(x[0]) for x in sweeps), sweep_seconds))
        row = {"every": every, "ports": ports, "busy": busy, "sweep": sweep_seconds,
               "peak_kib": (busy["hwm"] - idle["hwm"]) * 1024 / ports,
               "rss_kib": (busy["rss_median"] - idle["rss_median"]) * 1024 / ports}
        say("  per swept switch port: peak %.2f KiB ((%.1f - %.1f) MiB / %d), median RSS %.2f "
            "KiB" % (row["peak_kib"], busy["hwm"], idle["hwm"], ports, row["rss_kib"]))
        rows.append(row)
    return idle, rows


def compare_memory(f, host, ports, interval, a, every, binary):
    """--baseline: the memory phase of both builds on this one fabric beside one idle daemon,
    --mem-rounds rounds, the order of the two swapped each round (the machine's noise hits
    both), then each build's figures side by side."""
    builds = (("baseline", a.baseline), ("this build", binary))
    idle = None
    rows = {name: [] for name, _ in builds}
    for rnd in range(a.mem_rounds):
        for name, path in (builds if rnd % 2 == 0 else builds[::-1]):
            say("round %d, %s (%s), load average %s" % (rnd + 1, name, path, os.getloadavg()))
            idle, out = memory(f, host, ports, interval, a.mem_window, a.timeout, every,
                               a.mem_shards, idle=idle, binary=path)
            rows[name] += out
    say("side by side, KiB per swept switch port (peak / median RSS), and each daemon's median "
        "sweep, rounds in order:")
    for name, _ in builds:
        say("  %-10s peak %s (median %.2f), median RSS %s (median %.2f), sweep %s s" % (
            name, " ".join("%.2f" % r["peak_kib"] for r in rows[name]),
            statistics.median(r["peak_kib"] for r in rows[name]),
            " ".join("%.2f" % r["rss_kib"] for r in rows[name]),
            statistics.median(r["rss_kib"] for r in rows[name]),
            " ".join("%.2f" % r["sweep"] for r in rows[name])))


def show(name, m):
    sc = m["scrapes"]
    say("  %s daemon: peak RSS %.1f MiB (VmHWM %.1f, max sampled %.1f), RSS median %.1f MiB; "
        "%d gzip scrapes (median %d B, %.3fs), %d text (median %d B, %.3fs), %d errors" % (
            name, m["hwm"], m["vmhwm"], m["rss_max_sampled"], m["rss_median"],
            len(sc["gzip"]),
            statistics.median(x[0] for x in sc["gzip"]) if sc["gzip"] else 0,
            statistics.median(x[1] for x in sc["gzip"]) if sc["gzip"] else 0,
            len(sc["text"]),
            statistics.median(x[0] for x in sc["text"]) if sc["text"] else 0,
            statistics.median(x[1] for x in sc["text"]) if sc["text"] else 0,
            len(sc.get("errors", []))))
    if sc["after_sweep"] and sc["later"]:
        say("  gzip scrapes at the client: the first after each sweep median %.3fs max %.3fs "
            "(%d), the later ones median %.3fs max %.3fs (%d)" % (
                statistics.median(sc["after_sweep"]), max(sc["after_sweep"]),
                len(sc["after_sweep"]), statistics.median(sc["later"]), max(sc["later"]),
                len(sc["later"])))


# --- vl ------------------------------------------------------------------------------------

# What the vl phase compares of the --once runs: (run_once() key, name, format).
VL_ONCE = (("sweep", "sweep seconds", "%.3f"), ("wall", "process wall seconds", "%.3f"),
           ("sweep_mads", "sweep MADs", "%d"), ("peak_mib", "peak RSS MiB", "%.1f"),
           ("ports", "ports swept", "%d"), ("failed", "ports failed", "%d"),
           ("series", "series", "%d"), ("fabric_series", "fabric series", "%d"),
           ("text_bytes", "exposition bytes", "%d"), ("vl_series", "per-VL series", "%d"))


def off_on(title, rows):
    """A table of (name, format, off, on) rows: off, on, on/off, on - off."""
    say(title)
    say("  %-34s %13s %13s %8s %13s" % ("vl_transmit_wait:", "off", "on", "on/off", "on - off"))
    for name, fmt, off, on in rows:
        say("  %-34s %13s %13s %8s %13s" % (name, fmt % off, fmt % on,
                                            "%.3fx" % (on / off) if off else "-",
                                            fmt % (on - off)))


def vl_cost(f, binary, host, ports, rounds, interval, window, timeout, text_every, shards):
    """vl_transmit_wait off against on, on the same fabric: --once runs alternating (off, on)
    in each round, then a running daemon of each, one after the other, measured as the memory
    phase measures it (beside one idle daemon)."""
    med = statistics.median
    cfgs = {False: daemon_config(f, "once"),
            True: daemon_config(f, "once-vl", vl_transmit_wait=True)}
    runs = {False: [], True: []}
    for rnd in range(rounds):
        say("round %d, load average %s" % (rnd + 1, os.getloadavg()))
        for vl in (False, True):
            o = run_once(f, binary, host, cfgs[vl])
            runs[vl].append(o)
            say("  --once, vl_transmit_wait %-3s: sweep %.3fs (%d MADs), process %.2fs, peak "
                "RSS %.1f MiB, %d ports, %d failed, %d series (%d fabric, %d per-VL), %d B text"
                % ("on" if vl else "off", o["sweep"], o["sweep_mads"], o["wall"], o["peak_mib"],
                   o["ports"], o["failed"], o["series"], o["fabric_series"], o["vl_series"],
                   o["text_bytes"]))
    say("")
    off_on("--once, medians of %d rounds:" % rounds,
           [(name, fmt, med(o[key] for o in runs[False]), med(o[key] for o in runs[True]))
            for key, name, fmt in VL_ONCE])
    last = runs[True][-1]
    say("  per-VL series per swept switch port %.2f; ports by their number of per-VL series "
        "(last run): %s" % (last["vl_series"] / last["ports"] if last["ports"] else 0,
                            ", ".join("%d VLs: %d" % kv for kv in last["vls_per_port"].items())
                            or "none"))
    say("\nvl_transmit_wait, running daemons, fabric every %s, scraped every 2 s for %ds:"
        % (interval, window))
    idle, off = memory(f, host, ports, interval, window, timeout, text_every, shards,
                       name="vl-mem-off")
    _, on = memory(f, host, ports, interval, window, timeout, text_every, shards,
                   vl_transmit_wait=True, name="vl-mem-on", idle=idle)
    for a, b in zip(off, on):
        off_on("running daemon (%s), %d switch ports:"
               % ("every %dth scrape text" % a["every"] if a["every"] else "gzip only",
                  a["ports"]),
               [("peak RSS MiB", "%.1f", a["busy"]["hwm"], b["busy"]["hwm"]),
                ("median RSS MiB", "%.1f", a["busy"]["rss_median"], b["busy"]["rss_median"]),
                ("KiB per swept switch port, peak", "%.2f", a["peak_kib"], b["peak_kib"]),
                ("KiB per swept switch port, median", "%.2f", a["rss_kib"], b["rss_kib"])])


def clients(f, hosts, n, timeout):
    """ibsim serves a limited number of attached processes: n daemons sweeping shards 0..n-1
    of n at once, beside opensm. How many attach and sweep their shard without a failure?"""
    say("%d daemons at once (shards: %d), beside opensm:" % (n, n))
    daemons = []
    try:
        for i in range(n):
            cfg = daemon_config(f, "clients-%d" % i, interval="1h", shards=n, shard=i)
            d = f.daemon(["--config", cfg, "--log.level", "debug"], host=hosts[i])
            daemons.append(d)
            try:
                d.start(timeout=60)
            except RuntimeError as e:
                lines = [x for x in str(e).splitlines() if x.strip()]
                say("  daemon %d did not start: %s" % (i, " / ".join(lines[-3:])[:400]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive = [d for d in daemons if d.process.poll() is None]
            if all(SWEEP_DONE.search(d.log()) or "error" in d.log() for d in alive):
                break
            time.sleep(1)
        for i, d in enumerate(daemons):
            sweep = SWEEP_DONE.search(d.log())
            errors = [x for x in d.log().splitlines() if "level=error" in x or "level=warn" in x]
            say("  daemon %d: %s, %s%s" % (
                i, "running" if d.process.poll() is None else "exited %s" % d.process.returncode,
                "swept, failed ports %s" % sweep.group(1) if sweep else "no sweep",
                ("; first warning/error: " + errors[0][:200]) if errors else ""))
    finally:
        for d in daemons:
            d.__exit__(None, None, None)


# --- main ----------------------------------------------------------------------------------

def main():
    global LIMITS, MAX_QUEUED
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--shape", default="10x25x40x40x5",
                   help="PODSxLEAVESxSPINESxHCASxCORE_LINKS (three levels) or LxSxH (two)")
    p.add_argument("--phases", default="up,sweep,budgets,prom,memory")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steady", type=int, default=3, help="steady sweeps per daemon and round")
    p.add_argument("--steady-interval", default="5s")
    p.add_argument("--clients", type=int, default=10, help="daemons of the clients phase")
    p.add_argument("--prom-interval", default="15s")
    p.add_argument("--prom-window", type=int, default=120)
    p.add_argument("--mem-window", type=int, default=60)
    p.add_argument("--mem-interval", default=None,
                   help="the memory phase's fabric interval (default: --steady-interval)")
    p.add_argument("--mem-text-every", default="5",
                   help="memory phase: every Nth scrape plain text, 0 = gzip only; a "
                        "comma-separated list runs one sweeping daemon per value")
    p.add_argument("--timeout", type=int, default=900, help="bound of every wait")
    p.add_argument("--limits", default=None,
                   help="NODES,SWITCHES,PORTS for ibsim -N -S -P (default: 12000,1000,80000, "
                        "or 1.2x the shape's when that is larger)")
    p.add_argument("--mem-shards", type=int, default=1,
                   help="memory phase: the sweeping daemon is shard 0 of this many")
    p.add_argument("--max-queued", type=int, default=MAX_QUEUED,
                   help="mad.max_queued of every daemon (the engine's default is 100000)")
    p.add_argument("--baseline", default=None,
                   help="memory phase: another ibfabricd binary measured the same way, "
                        "alternating with this build's over --mem-rounds rounds")
    p.add_argument("--mem-rounds", type=int, default=2,
                   help="memory phase with --baseline: rounds of both builds")
    a = p.parse_args()
    MAX_QUEUED = a.max_queued
    # A SIGTERM (timeout(1)) still ends everything started, through the finally clauses.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    binary = os.path.join(a.build, "daemon", "ibfabricd")
    os.environ["IBFABRICD"] = binary
    if not os.path.exists(binary):
        sys.exit("missing %s: build first" % binary)
    dims = [int(x) for x in a.shape.split("x")]
    text = fattree3(*dims) if len(dims) == 5 else fattree(*dims)
    names = hcas(text)
    if a.limits:
        LIMITS = tuple(int(x) for x in a.limits.split(","))
    else:
        nsw = len(re.findall(r"^Switch\t", text, re.M))
        nports = sum(int(x) for x in re.findall(r"^Switch\t(\d+)", text, re.M))
        want = (len(names) + nsw, nsw, nports + nsw + len(names))
        LIMITS = tuple(max(d, int(w * 1.2)) for d, w in zip(LIMITS, want))
    # opensm runs on the first HCA; the daemons and ibqueryerrors on the next ones.
    hosts = names[1:3]
    phases = a.phases.split(",")
    say("shape %s: %d HCAs; ibsim -N %d -S %d -P %d; load average %s"
        % (a.shape, len(names), LIMITS[0], LIMITS[1], LIMITS[2], os.getloadavg()))

    f, up = bring_up(text, a.timeout, hosts[0], binary)
    try:
        say("up: ibsim ready in %.1fs, RSS %.1f MiB (%.1f MiB once the SM is master); opensm "
            "MASTER %.1fs, SUBNET UP %s, whole fabric swept %.1fs after opensm started; opensm "
            "RSS %.1f MiB (peak %.1f)" % (
                up["ibsim_start"], up["ibsim_rss_mib"], up["ibsim_rss_mib_after"],
                up.get("master", -1),
                "%.1fs" % up["subnet_up"] if "subnet_up" in up else "not logged",
                up["ready"], up["opensm_rss_mib"], up["opensm_hwm_mib"]))
        once_cfg = daemon_config(f, "once")
        ports = run_once(f, binary, hosts[0], once_cfg)["ports"]
        say("switch ports swept: %d" % ports)

        if "sweep" in phases:
            res = {k: [] for k in ("iqe", "iqe_ibsim", "once", "s1", "s2", "s2alone")}
            for rnd in range(a.rounds):
                say("round %d, load average %s" % (rnd + 1, os.getloadavg()))
                wall, checked, ib = run_iqe(f, hosts[0])
                res["iqe"].append(wall)
                res["iqe_ibsim"].append(ib)
                say("  ibqueryerrors %.2fs (%d ports checked; ibsim CPU %.2fs)" % (wall, checked,
                                                                                   ib))
                o = run_once(f, binary, hosts[0], once_cfg)
                res["once"].append(o)
                say("  --once: fabric collector %.2fs (discovery %.2fs, sweep %.2fs, %d MADs), "
                    "process %.2fs, peak RSS %.1f MiB, %d ports, %d failed, %d B text"
                    % (o["collector"], o["discovery"], o["sweep"], o["sweep_mads"], o["wall"],
                       o["peak_mib"], o["ports"], o["failed"], o["text_bytes"]))
                for key, shards, only in (("s1", 1, None), ("s2", 2, None),
                                          ("s2alone", 2, [0])):
                    out = run_steady(f, hosts, shards, a.steady_interval, a.steady, a.timeout,
                                     only=only)
                    res[key].append(out)
                    for i, s in enumerate(out):
                        say("  steady, shard %d of %d%s: discovery %.2fs, first sweep %.2fs, "
                            "steady sweep median %.2fs (%d MADs, %.0f MADs/s, failed ports "
                            "max %d), daemon CPU %.1f us per MAD, ibsim %.1f us per MAD, RSS "
                            "%.1f MiB, peak %.1f MiB" % (
                                i, shards, " alone" if only else "", s["discovery"],
                                s["first_sweep"], s["sweep"], s["mads"], s["mads"] / s["sweep"],
                                s["failed"], s["cpu_per_mad_us"], s["ibsim_per_mad_us"],
                                s["rss_mib"], s["hwm_mib"]))
                    say("    this round: ibqueryerrors / the slowest of these sweeps %.2fx"
                        % (wall / max(s["sweep"] for s in out)))
            med = statistics.median
            iqe = med(res["iqe"])
            say("\nmedians of %d rounds, %d switch ports:" % (a.rounds, ports))
            say("  ibqueryerrors %.2fs (ibsim CPU %.2fs)" % (iqe, med(res["iqe_ibsim"])))
            oc = med(o["collector"] for o in res["once"])
            ow = med(o["wall"] for o in res["once"])
            say("  --once collector %.2fs (discovery %.2fs, sweep %.2fs), process %.2fs, peak "
                "%.1f MiB: ibqueryerrors / --once %.2fx (collector), %.2fx (process)"
                % (oc, med(o["discovery"] for o in res["once"]),
                   med(o["sweep"] for o in res["once"]), ow,
                   med(o["peak_mib"] for o in res["once"]), iqe / oc, iqe / ow))
            for shards in (1, 2):
                for i in range(shards):
                    rows = [r[i] for r in res["s%d" % shards]]
                    sw = med(r["sweep"] for r in rows)
                    mads = rows[-1]["mads"]
                    say("  steady shard %d/%d: sweep %.2fs, %d MADs, %.0f MADs/s, discovery "
                        "%.2fs, daemon CPU %.1f us/MAD, ibsim %.1f us/MAD: ibqueryerrors / "
                        "sweep %.2fx" % (i, shards, sw, mads, mads / sw,
                                         med(r["discovery"] for r in rows),
                                         med(r["cpu_per_mad_us"] for r in rows),
                                         med(r["ibsim_per_mad_us"] for r in rows), iqe / sw))
                if shards == 2:
                    wall = med(max(r[0]["sweep"], r[1]["sweep"]) for r in res["s2"])
                    say("  shards 2, both at once: the slower shard's sweep %.2fs: "
                        "ibqueryerrors / it %.2fx" % (wall, iqe / wall))
            rows = [r[0] for r in res["s2alone"]]
            sw = med(r["sweep"] for r in rows)
            say("  shard 0 of 2 alone (no other sweeper): sweep %.2fs, %d MADs, %.0f MADs/s, "
                "discovery %.2fs, daemon CPU %.1f us/MAD, ibsim %.1f us/MAD, RSS %.1f MiB: "
                "ibqueryerrors / sweep %.2fx" % (
                    sw, rows[-1]["mads"], rows[-1]["mads"] / sw,
                    med(r["discovery"] for r in rows), med(r["cpu_per_mad_us"] for r in rows),
                    med(r["ibsim_per_mad_us"] for r in rows), med(r["rss_mib"] for r in rows),
                    iqe / sw))
            for key in ("s1", "s2", "s2alone"):
                for r in res[key]:
                    for x in r:
                        if x["failed"]:
                            say("  WARNING: %s: a steady sweep had %d failed ports"
                                % (key, x["failed"]))

        if "mads" in phases:
            import fabric_sweep
            fabric_sweep.HOST, fabric_sweep.OBSERVER = hosts[0], hosts[1]
            counter = fabric_sweep.MadCounter(f)
            n = counter.measure(lambda: run_iqe(f, hosts[0]))
            m = counter.measure(lambda: run_once(f, binary, hosts[0], once_cfg))
            say("MADs leaving %s (PortXmitPkts delta, baseline %d): ibqueryerrors %d, --once %d"
                % (hosts[0], counter.baseline, n, m))

        if "clients" in phases:
            clients(f, names[1:1 + a.clients], a.clients, a.timeout)

        if "budgets" in phases:
            say("series budgets:")
            budgets(f, hosts, a.timeout)

        if "prom" in phases:
            say("prometheus scraping shard 0 of 2 every %s for %ds:"
                % (a.prom_interval, a.prom_window))
            r = prom(f, hosts[0], a.prom_window, a.prom_interval, "60s", a.timeout)
            d = r["durations"]
            say("  %d scrapes, scrape_duration_seconds median %.3fs, max %.3fs (%s); "
                "scrape_samples_scraped %d; up %s; Prometheus peak RSS %.0f MiB"
                % (len(d), statistics.median(d) if d else -1, max(d) if d else -1,
                   ", ".join("%.3f" % x for x in d), r["samples"], r["up"], r["prom_hwm_mib"]))

        if "memory" in phases:
            interval = a.mem_interval or a.steady_interval
            say("memory, fabric every %s, scraped every 2 s for %ds:" % (interval, a.mem_window))
            every = [int(x) for x in a.mem_text_every.split(",")]
            if not a.baseline:
                memory(f, hosts[0], ports, interval, a.mem_window, a.timeout, every,
                       a.mem_shards)
            else:
                compare_memory(f, hosts[0], ports, interval, a, every, binary)
        if "vl" in phases:
            interval = a.mem_interval or a.steady_interval
            say("vl_transmit_wait off against on, %d rounds:" % a.rounds)
            vl_cost(f, binary, hosts[0], ports, a.rounds, interval, a.mem_window, a.timeout,
                    [int(x) for x in a.mem_text_every.split(",")], a.mem_shards)
        if "default" in phases:
            say("default rate limit (2,000 MADs/s), shards 1 and shards 2, one after the other:")
            for shards in (1, 2):
                out = run_steady(f, hosts, shards, "1s", 1, a.timeout * 2, rate_limit=2000)
                for i, s in enumerate(out):
                    say("  shard %d of %d: discovery %.1fs, first sweep (PMA only) %.1fs, steady "
                        "sweep %.1fs (%d MADs, %.0f MADs/s, failed ports max %d)"
                        % (i, shards, s["discovery"], s["first_sweep"], s["sweep"], s["mads"],
                           s["mads"] / s["sweep"], s["failed"]))
        say("ibsim RSS at the end %.1f MiB; load average %s"
            % (status_kib(f.ibsim.pid, "VmRSS") / 1024, os.getloadavg()))
    finally:
        f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
