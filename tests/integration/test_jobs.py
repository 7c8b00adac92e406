"""Training jobs end to end: which jobs a named cable hurts, the job board, a pod that ends.

The simulator and the daemons as test_localization runs them (a two-level fat tree under ibsim,
an ibfabricd on every host probing over MAD every 50 ms, tracing its probes' paths, reading its
own port's counters; the first also sweeps the switches), each daemon scraped with the `node`
label the ServiceMonitor gives it (a target label here: Kubernetes node names, not the fabric's
node names, so every join to a job goes through `node`). Probing is in two groups: the four
hosts of leaves 1 and 2 probe each other, the two of leaf 3 each other, so a host cable in the
first group is crossed by the paths of those four hosts only.

A fake kube-state-metrics (this test's own HTTP server) serves kube_pod_info, kube_pod_owner,
kube_pod_labels and kube_pod_status_phase as kube-state-metrics 2.x names and labels them (the
pod labels as `--metric-labels-allowlist` exports them, owners as the controllers set them),
scraped with honor_labels as kube-prometheus scrapes it, and the shipped rules make
ibfabric:job_node from them:

- train/llama, a Kubeflow PyTorchJob: 3 nodes of the first group (and a pending pod, no node);
- train/bert, a JobSet (its pods owned by the batch Job it made): 2 nodes of the first group;
- data/etl, a batch Job: one node in each group;
- inference/serve, a LeaderWorkerSet: both nodes of the second group, crossed by no path of
  the first;
- kube-system/coredns, a Deployment's pod: no training job.

It also serves dcgm-exporter's DCGM_FI_DEV_GPU_UTIL (2 GPUs a node, Hostname the node's name).

2 % of the packets into the cable of one of llama's hosts are dropped: IbfabricSuspectLink names
the cable and its description says "Jobs it hurts (most first): train/llama (3 nodes),
train/bert (2 nodes), data/etl (1 node)." and nothing of inference/serve; its dashboard_url
opens the job board on train/llama, and the landing board's "Jobs the culprits hurt" has a row
for each of the three. Every query of the job board (tests/lib/shipped.py, the
variables as Grafana sets them for train/llama) returns data, and only of llama's nodes (but
"Ports its pods use": ibfabric_pod_port_info comes from the pods collector, not in this build).
Then bert's pod on one node is deleted (its series dropped, as kube-state-metrics drops them)
and etl's pod on a node of the first group completes (phase Succeeded): the next verdicts say
"train/llama (3 nodes), train/bert (1 node)", and no verdict after names data/etl.

Not covered: pods from a fake kubelet through the daemon's pods collector
(ibfabric_pod_port_info), which is not merged yet. Skipped when IBFABRIC_SANITIZED=1 (no daemon
code path of its own: the rules, the localizer's jobs part and the dashboard queries)."""

import http.server
import json
import os
import random
import re
import shutil
import tempfile
import threading
import time
import unittest
import urllib.request

from gen_fattree import fattree, hca_name, leaf_name
from ibfabric_testlib import find_samples, free_port, require_tools
from promserver import Localizer, PromServer
from shipped import JOB_BOARD, dashboard_queries, shortened_rules
from simfabric import SIM_TOOLS, SimFabric

SEED = int(os.environ.get("IBFABRIC_TEST_SEED", random.randrange(1 << 30)))
LEAVES, SPINES, HCAS = 3, 2, 2
# Kubernetes node names of the hosts, in the order of hca_name.
NODES = ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4", "gpu-b1", "gpu-b2"]
FIRST_GROUP = 4  # the hosts of leaves 1 and 2 probe each other; those of leaf 3 each other
# The job board's panels that may be empty here, and why.
EMPTY_HERE = {"Ports its pods use": "ibfabric_pod_port_info: the pods collector is not in "
                                    "this build"}
GRAFANA = "https://grafana.invalid/d/"


class Pod:
    def __init__(self, namespace, name, node, labels=None, owner=None, phase="Running"):
        self.namespace, self.name, self.node = namespace, name, node
        self.labels = labels or {}
        self.owner = owner  # (kind, name) or None
        self.phase = phase
        self.uid = "%08x-0000-4000-8000-%012x" % (random.getrandbits(32), random.getrandbits(48))


def pods():
    """The pods of the jobs above, as their operators make them."""
    kubeflow = {"training.kubeflow.org/job-name": "llama",
                "training.kubeflow.org/operator-name": "pytorchjob-controller"}
    out = [Pod("train", "llama-master-0", "gpu-a1", dict(kubeflow), ("PyTorchJob", "llama")),
           Pod("train", "llama-worker-0", "gpu-a2", dict(kubeflow), ("PyTorchJob", "llama")),
           Pod("train", "llama-worker-1", "gpu-a3", dict(kubeflow), ("PyTorchJob", "llama")),
           # Not scheduled yet: no node, phase Pending.
           Pod("train", "llama-worker-2", "", dict(kubeflow), ("PyTorchJob", "llama"),
               phase="Pending")]
    jobset = {"jobset.sigs.k8s.io/jobset-name": "bert", "job-name": "bert-workers-0"}
    out += [Pod("train", "bert-workers-0-0-x7k2p", "gpu-a3", dict(jobset), ("Job", "bert-workers-0")),
            Pod("train", "bert-workers-0-1-q9r4m", "gpu-a4", dict(jobset), ("Job", "bert-workers-0"))]
    out += [Pod("data", "etl-5fz8w", "gpu-a4", {"job-name": "etl"}, ("Job", "etl")),
            Pod("data", "etl-m2c7d", "gpu-b1", {"job-name": "etl"}, ("Job", "etl"))]
    lws = {"leaderworkerset.sigs.k8s.io/name": "serve"}
    out += [Pod("inference", "serve-0", "gpu-b1", dict(lws), ("StatefulSet", "serve")),
            Pod("inference", "serve-0-1", "gpu-b2", dict(lws), ("StatefulSet", "serve-0"))]
    out += [Pod("kube-system", "coredns-7db6d8ff4d-2xq9v", "gpu-a1", {}, ("ReplicaSet",
                                                                       "coredns-7db6d8ff4d"))]
    return out


# kube-state-metrics' --metric-labels-allowlist=pods=[...] as docs/alerts-and-dashboards.md says.
ALLOWLIST = ["job-name", "training.kubeflow.org/job-name", "jobset.sigs.k8s.io/jobset-name",
             "volcano.sh/job-name", "leaderworkerset.sigs.k8s.io/name"]
PHASES = ["Pending", "Succeeded", "Failed", "Unknown", "Running"]


def labels_text(labels):
    return ",".join('%s="%s"' % (k, v.replace("\\", "\\\\").replace('"', '\\"'))
                    for k, v in labels)


def ksm_exposition(pods):
    """The four families as kube-state-metrics 2.x writes them."""
    families = {
        "kube_pod_info": ("Information about pod.", []),
        "kube_pod_owner": ("Information about the Pod's owner.", []),
        "kube_pod_labels": ("Kubernetes labels converted to Prometheus labels.", []),
        "kube_pod_status_phase": ("The pods current phase.", []),
    }
    for n, p in enumerate(pods):
        ids = [("namespace", p.namespace), ("pod", p.name), ("uid", p.uid)]
        families["kube_pod_info"][1].append((ids[:2] + [
            ("host_ip", "10.0.0.%d" % (n + 10) if p.node else ""),
            ("pod_ip", "10.244.%d.%d" % (n, n + 2) if p.node else ""), ("node", p.node),
            ("created_by_kind", p.owner[0] if p.owner else "<none>"),
            ("created_by_name", p.owner[1] if p.owner else "<none>"), ("uid", p.uid),
            ("priority_class", ""), ("host_network", "false")], 1))
        families["kube_pod_owner"][1].append((ids[:2] + [
            ("owner_kind", p.owner[0] if p.owner else "<none>"),
            ("owner_name", p.owner[1] if p.owner else "<none>"),
            ("owner_is_controller", "true" if p.owner else "<none>"), ("uid", p.uid)], 1))
        # Sanitized as kube-state-metrics does: every character not [a-zA-Z0-9_] becomes _.
        families["kube_pod_labels"][1].append((ids + [
            ("label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k), v)
            for k, v in sorted(p.labels.items()) if k in ALLOWLIST], 1))
        for phase in PHASES:
            families["kube_pod_status_phase"][1].append((ids[:2] + [("phase", phase),
                                                                    ("uid", p.uid)],
                                                         int(phase == p.phase)))
    out = []
    for name, (help_text, samples) in families.items():
        out.append("# HELP %s %s\n# TYPE %s gauge\n" % (name, help_text, name))
        out.extend("%s{%s} %d\n" % (name, labels_text(l), v) for l, v in samples)
    return "".join(out)


def dcgm_exposition():
    """dcgm-exporter's GPU utilisation, two GPUs a node, Hostname its Kubernetes node name
    (NODE_NAME, as its Helm chart and the GPU Operator set it)."""
    out = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n",
           "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"]
    for n, node in enumerate(NODES):
        for gpu in range(2):
            out.append('DCGM_FI_DEV_GPU_UTIL{gpu="%d",UUID="GPU-%08x-1b2c-3d4e-5f60-%012x",'
                       'pci_bus_id="00000000:%02X:00.0",device="nvidia%d",'
                       'modelName="NVIDIA H100 80GB HBM3",Hostname="%s",'
                       'DCGM_FI_DRIVER_VERSION="550.54.15"} %d\n'
                       % (gpu, n, gpu, 0x18 + gpu, gpu, node, 90 - 3 * n))
    return "".join(out)


class FakeExporters:
    """kube-state-metrics on /metrics, dcgm-exporter on /dcgm, from one loopback server."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pods = pods()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with outer.lock:
                    if self.path == "/metrics":
                        body = ksm_exposition(outer.pods)
                    elif self.path == "/dcgm":
                        body = dcgm_exposition()
                    else:
                        self.send_error(404)
                        return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def change(self, fn):
        with self.lock:
            fn(self.pods)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def prometheus_config(daemons, localizer_port, fake_port, rules):
    """prometheus.yml: the daemons with their node label (the ServiceMonitor's relabeling of
    __meta_kubernetes_pod_node_name), the localizer, kube-state-metrics (honor_labels, as
    kube-prometheus scrapes it) and dcgm-exporter."""
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [rules],
        "scrape_configs": [
            {"job_name": "ibfabric", "static_configs": [
                {"targets": ["127.0.0.1:%d" % port], "labels": {"node": node}}
                for node, port in daemons]},
            {"job_name": "ibfabric-localize",
             "static_configs": [{"targets": ["127.0.0.1:%d" % localizer_port]}]},
            {"job_name": "kube-state-metrics", "honor_labels": True,
             "static_configs": [{"targets": ["127.0.0.1:%d" % fake_port]}]},
            {"job_name": "dcgm-exporter", "metrics_path": "/dcgm",
             "static_configs": [{"targets": ["127.0.0.1:%d" % fake_port]}]},
        ],
    }
    return json.dumps(config)  # JSON is YAML


@require_tools(*SIM_TOOLS, "prometheus", "promtool")
@unittest.skipIf(os.environ.get("IBFABRIC_SANITIZED") == "1",
                 "no daemon code path of its own (the rules, the localizer's jobs and the "
                 "dashboard queries): the release suite runs it")
class JobsEndToEnd(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        print("jobs test seed %d (IBFABRIC_TEST_SEED=%d reproduces it)" % (SEED, SEED))
        self.rng = random.Random(SEED)
        random.seed(SEED)
        self.tmp = tempfile.mkdtemp(prefix="ibfabric-jobs-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # Quantum-2 switches and ConnectX-7 HCAs: the switch ports' PortXmitWait tick is known,
        # so the congestion share has values.
        self.fabric = SimFabric(fattree(leaves=LEAVES, spines=SPINES, hcas_per_leaf=HCAS,
                                        device_ids=(0x2C9, 0xD2F2, 0x1021)),
                                name="jobs", sm_host="spine-01", start_sm=False)
        self.fabric.start()
        self.addCleanup(self.fabric.close)
        conf = os.path.join(self.tmp, "opensm.conf")
        with open(conf, "w") as f:
            f.write("ignore_other_sm TRUE\n")
        self.sm = self.fabric.spawn("opensm", ["opensm", "-F", conf, "-f",
                                               os.path.join(self.tmp, "opensm.log")],
                                    host="spine-01")
        self.hosts = [hca_name(l, j, HCAS) for l in range(1, LEAVES + 1)
                      for j in range(1, HCAS + 1)]
        self.node_of = dict(zip(self.hosts, NODES))
        self.fabric.wait_ready(hosts=self.hosts[:1])
        lids = {h: self.fabric.lid(h) for h in self.hosts}
        groups = [self.hosts[:FIRST_GROUP], self.hosts[FIRST_GROUP:]]
        self.daemons = {}
        for i, host in enumerate(self.hosts):
            group = groups[0] if host in groups[0] else groups[1]
            targets = ", ".join('{lid: %d, name: "%s"}' % (lids[h], h.split()[0])
                                for h in group if h != host)
            config = os.path.join(self.tmp, "ibfabricd-%d.yaml" % i)
            with open(config, "w") as f:
                f.write("mad: {timeout: 200ms, retries: 2}\n"
                        "collectors:\n"
                        "  sysfs: {enabled: false}\n  sm: {enabled: false}\n"
                        "  sriov: {enabled: false}\n"
                        "  ports: {enabled: true, interval: 1s}\n"
                        "  fabric: {enabled: %s, interval: 2s}\n"
                        "  probe: {enabled: true, interval: 1s, udp_listen: \"\", "
                        "probe_interval: 50ms, timeout: 1s, targets: [%s]}\n"
                        "  paths: {enabled: true, interval: 1s, verify_every: 2s}\n"
                        % ("true" if i == 0 else "false", targets))
            daemon = self.fabric.daemon(["--config", config], host=host,
                                        env=dict(os.environ, SIM_SET_ISSM="1"), port=free_port(),
                                        ready_log="mad: serving class 0x32")
            self.addCleanup(daemon.stop)
            daemon.start()
            self.daemons[host] = daemon
        for host, daemon in self.daemons.items():
            peers = FIRST_GROUP - 1 if host in groups[0] else len(groups[1]) - 1
            daemon.wait_for(lambda s, n=peers: sum(x.value for x in find_samples(
                s, "ibfabric_path_peers", state="traced")) == n, timeout=60,
                what="every path traced")
        self.fake = FakeExporters()
        self.addCleanup(self.fake.close)
        localizer_port = free_port()
        rules = shortened_rules(self.tmp, min_window=15)
        self.prom = PromServer(config=prometheus_config(
            [(self.node_of[h], d.port) for h, d in self.daemons.items()], localizer_port,
            self.fake.port, rules))
        self.prom.start()
        self.addCleanup(self.prom.close)
        self.localizer = Localizer(self.prom.url(""), localizer_port)
        self.localizer.start()
        self.addCleanup(self.localizer.close)

    def host_cable(self, host):
        """(leaf, leaf port, host, 1) by name, as the alert's labels name it."""
        n = self.hosts.index(host)
        return frozenset({(leaf_name(n // HCAS + 1), str(n % HCAS + 1)), (host, "1")})

    def suspect_link(self):
        """{cable: alert} of the IbfabricSuspectLink alerts firing now."""
        out = {}
        for a in self.prom.firing_alerts("IbfabricSuspectLink"):
            l = a["labels"]
            out[frozenset({(l["node_name"], l["port"]),
                           (l["remote_node_name"], l["remote_port"])})] = a
        return out

    def jobs_named(self):
        """{(namespace, job_name): nodes} the localizer serves now for its verdicts."""
        with urllib.request.urlopen(self.localizer.url("/metrics"), timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            m = re.match(r'ibfabric_localize_suspect_job\{(.*)\} (\S+)$', line)
            if m:
                labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
                out[(labels["namespace"], labels["job_name"])] = int(float(m.group(2)))
        return out

    def test_jobs_named_board_and_a_pod_that_ends(self):
        # Every job of a running pod with a node, by the kind that made it; coredns is no job.
        expected = {("train", "llama", "kubeflow"): {"gpu-a1", "gpu-a2", "gpu-a3"},
                    ("train", "bert", "jobset"): {"gpu-a3", "gpu-a4"},
                    ("data", "etl", "job"): {"gpu-a4", "gpu-b1"},
                    ("inference", "serve", "leaderworkerset"): {"gpu-b1", "gpu-b2"}}

        def job_nodes():
            out = {}
            for r in self.prom.query("ibfabric:job_node"):
                m = r["metric"]
                out.setdefault((m["namespace"], m["job_name"], m["job_kind"]), set()).add(
                    m["node"])
            return out
        self.prom.wait_for(lambda: job_nodes() == expected, timeout=30,
                           what="ibfabric:job_node from the fake kube-state-metrics")
        self.prom.wait_for(lambda: self.prom.query("max(ibfabric_localize_up) == 1"), timeout=60,
                           what="the localizer evaluating")
        # The routes are programmed: opensm goes (as in test_localization).
        self.sm.stop()
        self.assertEqual(self.suspect_link(), {})

        # 2 % of the packets into the cable of one of llama's hosts.
        lossy = self.rng.choice(self.hosts[:3])
        print("2 % into", lossy, "node", self.node_of[lossy])
        cable = self.host_cable(lossy)
        hurt = ("Jobs it hurts (most first): train/llama (3 nodes), train/bert (2 nodes), "
                "data/etl (1 node).")
        self.fabric.command('Error "%s"[1] 2' % lossy)
        try:
            def named():
                alert = self.suspect_link().get(cable)
                return alert if alert and hurt in alert["annotations"]["description"] else None
            alert = self.prom.wait_for(named, timeout=60, what="the cable of %s named, with "
                                       "the jobs it hurts" % lossy)
            self.assertEqual(list(self.suspect_link()), [cable], "named besides the cable")
            description = alert["annotations"]["description"]
            self.assertEqual(description.count("Jobs it hurts"), 1)
            self.assertNotIn("serve", description)
            self.assertNotIn("coredns", description)
            self.assertEqual(alert["annotations"]["dashboard_url"],
                             GRAFANA + "ibfabric-job?var-namespace=train&var-job_name=llama")
            self.assertEqual(self.jobs_named(), {("train", "llama"): 3, ("train", "bert"): 2,
                                                 ("data", "etl"): 1})
            self.check_job_board(cable)
            # The landing board's way there: a row per culprit and job it hurts.
            [(_, _, expr)] = [q for q in dashboard_queries("4s")
                              if q[1] == "Jobs the culprits hurt"]
            self.assertEqual(sorted((r["metric"]["namespace"], r["metric"]["job_name"],
                                     r["metric"]["kind"], r["value"][1])
                                    for r in self.prom.query(expr)),
                             [("data", "etl", "cable", "1"), ("train", "bert", "cable", "2"),
                              ("train", "llama", "cable", "3")])

            # bert's pod on gpu-a4 is deleted; etl's there completes.
            def end(pods):
                pods[:] = [p for p in pods if p.name != "bert-workers-0-1-q9r4m"]
                for p in pods:
                    if p.name == "etl-5fz8w":
                        p.phase = "Succeeded"
            self.fake.change(end)
            ended = time.monotonic()
            after = {("train", "llama"): 3, ("train", "bert"): 1}
            self.prom.wait_for(lambda: self.jobs_named() == after, timeout=20,
                               what="the next verdicts without the pods that ended")
            print("verdicts without the ended pods %.1f s after" % (time.monotonic() - ended))
            # No later verdict names them again, and the alert says so.
            for _ in range(6):
                self.assertEqual(self.jobs_named(), after)
                time.sleep(0.5)
            hurt = "Jobs it hurts (most first): train/llama (3 nodes), train/bert (1 node)."
            self.prom.wait_for(lambda: hurt in self.suspect_link()[cable]["annotations"][
                "description"], timeout=15, what="the alert's description after the pods ended")
            self.assertNotIn("etl", self.suspect_link()[cable]["annotations"]["description"])
        finally:
            self.fabric.command('Error "%s"[1] 0' % lossy)

    def check_job_board(self, cable):
        """Every query of the job board, for train/llama as Grafana asks it: data, and only of
        llama's nodes."""
        nodes = sorted(r["metric"]["node"] for r in self.prom.query(
            'max by (node) (ibfabric:job_node{namespace="train",job_name="llama"})'))
        self.assertEqual(nodes, ["gpu-a1", "gpu-a2", "gpu-a3"])
        # A multi-value variable in a regex, as Grafana's Prometheus data source writes it.
        variables = {"namespace": "train", "job_name": "llama", "node": "(%s)" % "|".join(nodes)}
        with open(os.path.join(os.environ["IBFABRIC_SOURCE_DIR"], "dashboards",
                               JOB_BOARD)) as f:
            titles = {p["title"] for p in json.load(f)["panels"] if p["type"] != "row"}
        queries = [q for q in dashboard_queries("4s", variables=variables)
                   if q[0] == JOB_BOARD and q[1] in titles]
        self.assertEqual({q[1] for q in queries}, titles)
        self.assertGreater(len(queries), 30)
        results = {}
        deadline = time.monotonic() + 30
        missing = queries
        while missing and time.monotonic() < deadline:  # rates need a few scrapes of the fault
            for q in missing:
                results[q] = self.prom.query(q[2])
            missing = [q for q in missing if not results[q] and q[1] not in EMPTY_HERE]
            if missing:
                time.sleep(1)
        self.assertEqual([(q[1], q[2]) for q in missing], [], "job board queries without data")
        for (_, title, expr), rows in results.items():
            for row in rows:
                for label in ("node", "peer_node"):
                    if label in row["metric"]:
                        self.assertIn(row["metric"][label], nodes, "%s: %s" % (title, row))
        by_title = {}
        for (_, title, _), rows in results.items():
            by_title.setdefault(title, []).append(rows)
        # Its culprit: the cable, in the culprits' table and on the cables of its paths.
        [culprits, _, _] = by_title["Culprits that hurt it"]
        self.assertEqual([(r["metric"]["kind"], r["value"][1]) for r in culprits],
                         [("cable", "3")])
        named = by_title["Cables between its nodes"][-1]
        self.assertEqual([frozenset({(r["metric"]["node_name"], r["metric"]["port"]),
                                     (r["metric"]["remote_node_name"],
                                      r["metric"]["remote_port"])}) for r in named], [cable])
        # The probes between its nodes: every pair of them both ways (each probes the others).
        pairs = {(r["metric"]["node"], r["metric"]["peer_node"])
                 for r in by_title["Probe loss matrix of its nodes"][0]}
        self.assertEqual(pairs, {(a, b) for a in nodes for b in nodes if a != b})
        self.assertEqual(sorted(r["metric"]["node"] for r in by_title["GPU utilisation per node"][0]),
                         nodes)


if __name__ == "__main__":
    unittest.main(verbosity=2)
