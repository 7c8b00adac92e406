"""deploy/kubernetes and deploy/container, checked with what Debian has (no kubeconform, kubeval
or API server; docs/deployment.md says what that leaves untested): every manifest parses
(python3-yaml) and has the fields the API server requires; the DaemonSet is not privileged,
drops every capability, mounts the host's sysfs and /dev/infiniband read-only, probes
/-/healthy and /-/ready on a port it declares; the Service, ServiceMonitor and DaemonSet agree on
labels, port names and numbers; the image tag, the Containerfile and the package agree on the
version; the ConfigMap's config passes `ibfabricd --check-config`; the checked-in PrometheusRule
is exactly what generate_prometheusrule.py makes from dashboards/alerts/ibfabric.rules.yml, holds
the same rules, and `promtool check rules` accepts the rules extracted from it; the checked-in
AlertmanagerConfig is what generate_alertmanagerconfig.py makes from
deploy/alertmanager/alertmanager.yml, converts back into that file's route tree, receivers and
inhibit rules field by field, and amtool accepts the result; the maintenance windows' PrometheusRule
(scripts/ibfabric-maintenance --kubernetes) passes the same checks as the shipped one.
"""

import json
import os
import re
import subprocess
import tempfile
import unittest

import yaml

from ibfabric_testlib import ibfabricd_path, require_tools, source_dir

K8S = os.path.join(source_dir(), "deploy", "kubernetes")
CONTAINERFILE = os.path.join(source_dir(), "deploy", "container", "Containerfile")
RULES = os.path.join(source_dir(), "dashboards", "alerts", "ibfabric.rules.yml")
NAMESPACE = "ibfabric"
LOCALIZE = "localize"  # ibfabric-localize's manifests, a kustomization of their own
CLUSTER_SCOPED = {"Namespace"}


def project_version():
    with open(os.path.join(source_dir(), "CMakeLists.txt")) as f:
        m = re.search(r"^project\(ibfabric VERSION ([0-9.]+) ", f.read(), re.MULTILINE)
    assert m, "no project(ibfabric VERSION ...) in CMakeLists.txt"
    return m.group(1)


def load(name):
    with open(os.path.join(K8S, name)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    assert len(docs) == 1, f"{name}: expected one document, found {len(docs)}"
    return docs[0]


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


class ManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = sorted(f for f in os.listdir(K8S) if f.endswith(".yaml"))
        cls.docs = {name: load(name) for name in cls.files}
        cls.by_kind = {d["kind"]: d for d in cls.docs.values()}
        ds = cls.by_kind["DaemonSet"]
        cls.pod = ds["spec"]["template"]["spec"]
        assert len(cls.pod["containers"]) == 1, "one container expected"
        cls.container = cls.pod["containers"][0]

    def test_kustomization_lists_every_manifest(self):
        listed = self.by_kind["Kustomization"]["resources"]
        self.assertEqual(sorted(r for r in listed if r != LOCALIZE),
                         [f for f in self.files if f != "kustomization.yaml"])
        self.assertIn(LOCALIZE, listed)
        with open(os.path.join(K8S, LOCALIZE, "kustomization.yaml")) as f:
            local = yaml.safe_load(f)["resources"]
        self.assertEqual(sorted(local), sorted(f for f in os.listdir(os.path.join(K8S, LOCALIZE))
                                               if f.endswith(".yaml") and f != "kustomization.yaml"))

    def test_required_fields(self):
        for name, doc in self.docs.items():
            with self.subTest(name=name):
                self.assertRegex(doc.get("apiVersion", ""), r"^[a-z0-9.]+(/v[0-9a-z]+)?$|^v1$")
                self.assertTrue(doc.get("kind"))
                if doc["kind"] == "Kustomization":
                    continue
                meta = doc.get("metadata", {})
                self.assertRegex(meta.get("name", ""), r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
                if doc["kind"] in CLUSTER_SCOPED:
                    self.assertNotIn("namespace", meta)
                else:
                    self.assertEqual(meta.get("namespace"), NAMESPACE)
        self.assertEqual(self.by_kind["Namespace"]["metadata"]["name"], NAMESPACE)
        expected = {"Namespace": "v1", "ConfigMap": "v1", "DaemonSet": "apps/v1",
                    "Service": "v1", "ServiceMonitor": "monitoring.coreos.com/v1",
                    "PrometheusRule": "monitoring.coreos.com/v1",
                    "AlertmanagerConfig": "monitoring.coreos.com/v1alpha1",
                    "Kustomization": "kustomize.config.k8s.io/v1beta1"}
        self.assertEqual({k: d["apiVersion"] for k, d in self.by_kind.items()}, expected)

    def test_daemonset_selector_and_security(self):
        ds = self.by_kind["DaemonSet"]
        labels = ds["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(selects(ds["spec"]["selector"]["matchLabels"], labels))
        pod, c = self.pod, self.container
        for key in ("hostPID", "hostIPC"):
            self.assertFalse(pod.get(key, False), key)
        sc = c["securityContext"]
        self.assertIs(sc.get("privileged"), False)
        self.assertIs(sc.get("allowPrivilegeEscalation"), False)
        self.assertIs(sc.get("readOnlyRootFilesystem"), True)
        self.assertEqual(sc["capabilities"].get("drop"), ["ALL"])
        self.assertNotIn("add", sc["capabilities"])
        self.assertIs(pod["securityContext"].get("runAsNonRoot"), True)
        self.assertNotEqual(pod["securityContext"].get("runAsUser"), 0)
        # hostNetwork is on for rtnetlink (sriov) and the probes, so DNS must follow it.
        if pod.get("hostNetwork"):
            self.assertEqual(pod.get("dnsPolicy"), "ClusterFirstWithHostNet")

    def test_host_mounts_read_only(self):
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        mounts = {m["name"]: m for m in self.container["volumeMounts"]}
        self.assertEqual(set(volumes), set(mounts))
        host = {v["hostPath"]["path"]: name for name, v in volumes.items() if "hostPath" in v}
        self.assertEqual(set(host), {"/sys", "/dev/infiniband"})
        for path, name in host.items():
            self.assertIs(mounts[name].get("readOnly"), True, path)
        self.assertEqual(mounts[host["/dev/infiniband"]]["mountPath"], "/dev/infiniband")

    def test_state_directory_is_a_writable_mount(self):
        config = yaml.safe_load(self.config_text())
        state = config.get("state_directory")
        self.assertTrue(state, "the ConfigMap sets state_directory (link memory across restarts)")
        mounts = {m["mountPath"].rstrip("/"): m for m in self.container["volumeMounts"]}
        self.assertIn(state.rstrip("/"), mounts)
        mount = mounts[state.rstrip("/")]
        self.assertFalse(mount.get("readOnly", False))
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        self.assertIn("emptyDir", volumes[mount["name"]])

    def config_text(self):
        args = self.container["args"]
        config_path = args[args.index("--config") + 1]
        mounts = {m["name"]: m for m in self.container["volumeMounts"]}
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        for name, mount in mounts.items():
            if config_path.startswith(mount["mountPath"].rstrip("/") + "/"):
                cm_name = volumes[name]["configMap"]["name"]
                key = config_path[len(mount["mountPath"].rstrip("/")) + 1:]
                cm = self.by_kind["ConfigMap"]
                self.assertEqual(cm["metadata"]["name"], cm_name)
                return cm["data"][key]
        self.fail(f"--config {config_path} is not in a mounted ConfigMap")

    def test_configmap_config_is_valid_and_matches_mounts(self):
        text = self.config_text()
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(text)
            f.flush()
            check = subprocess.run([ibfabricd_path(), "--check-config", "--config", f.name],
                                   capture_output=True, text=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        config = yaml.safe_load(text)
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        sys_mount = next(m["mountPath"] for m in self.container["volumeMounts"]
                         if volumes[m["name"]].get("hostPath", {}).get("path") == "/sys")
        self.assertEqual(config.get("sysfs_root"), sys_mount)
        port = int(config["web"]["listen_address"].rsplit(":", 1)[1])
        ports = {p["name"]: p for p in self.container["ports"]}
        self.assertEqual(ports["metrics"]["containerPort"], port)

    def test_probes(self):
        ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        for probe, path in (("livenessProbe", "/-/healthy"), ("readinessProbe", "/-/ready")):
            with self.subTest(probe=probe):
                get = self.container[probe]["httpGet"]
                self.assertEqual(get["path"], path)
                self.assertTrue(get["port"] in ports or get["port"] in ports.values(), get)
                self.assertNotEqual(get.get("scheme", "HTTP"), "HTTPS")  # plain HTTP config

    def test_service_and_servicemonitor_agree(self):
        svc, sm = self.by_kind["Service"], self.by_kind["ServiceMonitor"]
        pod_labels = self.by_kind["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(selects(svc["spec"]["selector"], pod_labels))
        self.assertEqual(svc["spec"].get("clusterIP"), "None")
        container_ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        svc_ports = {p["name"]: p for p in svc["spec"]["ports"]}
        for name, p in svc_ports.items():
            self.assertIn(p["targetPort"], list(container_ports) + list(container_ports.values()))
            self.assertEqual(p["port"], container_ports[name])
        self.assertTrue(selects(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]))
        self.assertIn(svc["metadata"]["namespace"], sm["spec"]["namespaceSelector"]["matchNames"])
        for ep in sm["spec"]["endpoints"]:
            self.assertIn(ep["port"], svc_ports)
            self.assertEqual(ep.get("path", "/metrics"), "/metrics")
        # The job label is the Service's name; the rules select the daemons as
        # job=~"ibfabric.*",job!~"ibfabric-localize.*".
        self.assertNotIn("jobLabel", sm["spec"])
        self.assertRegex(svc["metadata"]["name"], r"^ibfabric.*$")
        self.assertNotRegex(svc["metadata"]["name"], r"^ibfabric-localize")
        with open(RULES) as f:
            self.assertIn('job=~"ibfabric.*",job!~"ibfabric-localize.*"', f.read())

    def test_image_containerfile_and_version_agree(self):
        version = project_version()
        image = self.container["image"]
        self.assertTrue(image.endswith(f"/ibfabricd:{version}"), image)
        with open(CONTAINERFILE) as f:
            text = f.read()
        self.assertRegex(text, r"(?m)^FROM debian:12-slim$")
        self.assertRegex(text, rf"(?m)^ARG IBFABRIC_VERSION={re.escape(version)}$")
        self.assertRegex(text, r"(?m)^COPY dist/ibfabricd_\$\{IBFABRIC_VERSION\}_\*\.deb /tmp/$")
        self.assertRegex(text, r"apt-get install [^\n]*\\\n[^\n]*/tmp/ibfabricd_")
        entry = re.search(r'(?m)^ENTRYPOINT \["([^"]+)"\]$', text)
        self.assertEqual(entry.group(1), "/usr/bin/ibfabricd")  # the package's bindir
        self.assertIn(f"EXPOSE {self.container['ports'][0]['containerPort']}", text)
        user = re.search(r"(?m)^USER (\d+):(\d+)$", text)
        self.assertEqual(int(user.group(1)), self.pod["securityContext"]["runAsUser"])


class LocalizerManifestsTest(unittest.TestCase):
    """ibfabric-localize: a Deployment of two replicas running the image's ibfabric-localize,
    unprivileged and read-only, probed on the port it serves, scraped through its Service."""

    def setUp(self):
        def load_local(name):
            with open(os.path.join(K8S, LOCALIZE, name)) as f:
                return yaml.safe_load(f)
        self.deploy = load_local("deployment.yaml")
        self.svc = load_local("service.yaml")
        self.sm = load_local("servicemonitor.yaml")

    def test_deployment(self):
        d = self.deploy
        self.assertEqual((d["apiVersion"], d["kind"]), ("apps/v1", "Deployment"))
        self.assertEqual(d["metadata"]["namespace"], NAMESPACE)
        self.assertEqual(d["spec"]["replicas"], 2)
        labels = d["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(selects(d["spec"]["selector"]["matchLabels"], labels))
        pod = d["spec"]["template"]["spec"]
        self.assertIs(pod["securityContext"]["runAsNonRoot"], True)
        (c,) = pod["containers"]
        self.assertEqual(c["command"], ["/usr/bin/ibfabric-localize"])
        self.assertTrue(c["image"].endswith("/ibfabricd:%s" % project_version()), c["image"])
        sc = c["securityContext"]
        self.assertIs(sc["readOnlyRootFilesystem"], True)
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        listen = next(a for a in c["args"] if a.startswith("--web.listen-address="))
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports["metrics"], int(listen.rsplit(":", 1)[1]))
        self.assertEqual(c["livenessProbe"]["httpGet"]["path"], "/-/healthy")
        self.assertEqual(c["readinessProbe"]["httpGet"]["path"], "/-/ready")
        # The flags are the binary's: it rejects unknown ones.
        self.assertTrue(any(a.startswith("--prometheus.url=") for a in c["args"]))
        out = subprocess.run([os.environ["IBFABRIC_LOCALIZE"], "--help"], capture_output=True,
                             text=True, timeout=30)
        for arg in c["args"]:
            self.assertIn(arg.split("=", 1)[0], out.stdout)

    def test_service_and_servicemonitor_agree(self):
        pod_labels = self.deploy["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(selects(self.svc["spec"]["selector"], pod_labels))
        self.assertTrue(selects(self.sm["spec"]["selector"]["matchLabels"],
                                self.svc["metadata"]["labels"]))
        (port,) = self.svc["spec"]["ports"]
        (c,) = self.deploy["spec"]["template"]["spec"]["containers"]
        self.assertEqual(port["port"], c["ports"][0]["containerPort"])
        self.assertEqual([e["port"] for e in self.sm["spec"]["endpoints"]], [port["name"]])
        # Its job is the Service's name, which the localizer's alerts select (job=~"ibfabric-
        # localize.*"), and which the daemons' alerts leave out.
        self.assertNotIn("jobLabel", self.sm["spec"])
        self.assertRegex(self.svc["metadata"]["name"], r"^ibfabric-localize")


class PrometheusRuleTest(unittest.TestCase):
    def test_generated_file_is_current(self):
        script = os.path.join(K8S, "generate_prometheusrule.py")
        check = subprocess.run(["python3", script, "--check"], capture_output=True, text=True,
                               timeout=30)
        self.assertEqual(check.returncode, 0, check.stderr)

    def test_same_rules_and_promtool_accepts_them(self):
        rule = load("prometheusrule.yaml")
        with open(RULES) as f:
            shipped = yaml.safe_load(f)
        self.assertEqual(rule["spec"]["groups"], shipped["groups"])
        count = sum(len(g["rules"]) for g in shipped["groups"])
        self.assertGreater(count, 10)
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            yaml.safe_dump({"groups": rule["spec"]["groups"]}, f, sort_keys=False)
            f.flush()
            out = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True,
                                 text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertRegex(out.stdout + out.stderr, rf"SUCCESS: {count} rules found")


ALERTMANAGER = os.path.join(source_dir(), "deploy", "alertmanager", "alertmanager.yml")
MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$')


def parse_matcher(text):
    """(name, type, value) of an Alertmanager matcher as the shipped file writes them."""
    m = MATCHER.match(text)
    assert m, "a matcher the test does not read: %r" % text
    return m.group(1), m.group(2), json.loads('"%s"' % m.group(3))


def crd_matcher(m):
    """(name, type, value) of an AlertmanagerConfig matcher."""
    assert set(m) == {"name", "value", "matchType"}, m
    assert m["matchType"] in ("=", "!=", "=~", "!~"), m
    return m["name"], m["matchType"], m["value"]


def route_back(r):
    """An AlertmanagerConfig route as alertmanager.yml writes one (matchers as tuples)."""
    names = {"receiver": "receiver", "groupBy": "group_by", "groupWait": "group_wait",
             "groupInterval": "group_interval", "repeatInterval": "repeat_interval",
             "continue": "continue"}
    assert set(r) <= set(names) | {"matchers", "routes"}, sorted(r)
    out = {names[k]: v for k, v in r.items() if k in names}
    if "matchers" in r:
        out["matchers"] = [crd_matcher(m) for m in r["matchers"]]
    if "routes" in r:
        out["routes"] = [route_back(c) for c in r["routes"]]
    return out


def route_shipped(r):
    out = {k: v for k, v in r.items() if k not in ("matchers", "routes")}
    if "matchers" in r:
        out["matchers"] = [parse_matcher(m) for m in r["matchers"]]
    if "routes" in r:
        out["routes"] = [route_shipped(c) for c in r["routes"]]
    return out


def receiver_back(r):
    assert set(r) <= {"name", "webhookConfigs"}, sorted(r)
    out = {"name": r["name"]}
    if "webhookConfigs" in r:
        names = {"url": "url", "sendResolved": "send_resolved", "maxAlerts": "max_alerts"}
        out["webhook_configs"] = []
        for w in r["webhookConfigs"]:
            assert set(w) <= set(names), sorted(w)
            out["webhook_configs"].append({names[k]: v for k, v in w.items()})
    return out


def inhibit_back(r):
    assert set(r) <= {"sourceMatch", "targetMatch", "equal"}, sorted(r)
    out = {"source_matchers": [crd_matcher(m) for m in r["sourceMatch"]],
           "target_matchers": [crd_matcher(m) for m in r["targetMatch"]]}
    if "equal" in r:
        out["equal"] = r["equal"]
    return out


def inhibit_shipped(r):
    out = {"source_matchers": [parse_matcher(m) for m in r["source_matchers"]],
           "target_matchers": [parse_matcher(m) for m in r["target_matchers"]]}
    if "equal" in r:
        out["equal"] = r["equal"]
    return out


def tuples_to_text(m):
    return "%s%s%s" % (m[0], m[1], json.dumps(m[2]))


class AlertmanagerConfigTest(unittest.TestCase):
    """deploy/kubernetes/alertmanagerconfig.yaml: generated from deploy/alertmanager/alertmanager.yml
    (generate_alertmanagerconfig.py), and equal to it: converted back into an Alertmanager
    configuration, its route tree, receivers and inhibit rules are the shipped file's, field by
    field, and amtool accepts the result."""

    @classmethod
    def setUpClass(cls):
        cls.crd = load("alertmanagerconfig.yaml")
        with open(ALERTMANAGER) as f:
            cls.shipped_text = f.read()
        cls.shipped = yaml.safe_load(cls.shipped_text)

    def test_generated_file_is_current(self):
        script = os.path.join(K8S, "generate_alertmanagerconfig.py")
        check = subprocess.run(["python3", script, "--check"], capture_output=True, text=True,
                               timeout=30)
        self.assertEqual(check.returncode, 0, check.stderr)

    def test_the_generators_reader_reads_what_yaml_reads(self):
        # The generator reads alertmanager.yml without a YAML library.
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "generate_alertmanagerconfig", os.path.join(K8S, "generate_alertmanagerconfig.py"))
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
        self.assertEqual(gen.load(self.shipped_text), self.shipped)
        for bad in ("a: {b: c}\n", "a: |\n  text\n", "a: [b, c\n", "a: b\n  c: d\n",
                    "a: 1\na: 2\n"):
            with self.subTest(text=bad):
                with self.assertRaises(gen.YamlError):
                    gen.load(bad)

    def test_metadata(self):
        meta = self.crd["metadata"]
        self.assertEqual((self.crd["apiVersion"], self.crd["kind"]),
                         ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig"))
        self.assertEqual(meta["namespace"], NAMESPACE)
        self.assertEqual(sorted(self.crd["spec"]), ["inhibitRules", "receivers", "route"])

    def walk(self, want, got, path):
        """Field by field, each difference named by its path."""
        if isinstance(want, dict) and isinstance(got, dict):
            self.assertEqual(sorted(got), sorted(want), path)
            for k in want:
                self.walk(want[k], got[k], "%s.%s" % (path, k))
        elif isinstance(want, list) and isinstance(got, list):
            self.assertEqual(len(got), len(want), path)
            for i, (w, g) in enumerate(zip(want, got)):
                self.walk(w, g, "%s[%d]" % (path, i))
        else:
            self.assertEqual(got, want, path)

    def test_route_tree_receivers_and_inhibit_rules_are_the_shipped_ones(self):
        spec = self.crd["spec"]
        top = route_back(spec["route"])
        # The one difference: its top route takes ibfabric's alerts only (the file's root route
        # takes all; in a shared Alertmanager the others are not this project's).
        self.assertEqual(top.pop("matchers"), [("alertname", "=~", "Ibfabric.+")])
        self.walk(route_shipped(self.shipped["route"]), top, "route")
        self.walk(self.shipped["receivers"], [receiver_back(r) for r in spec["receivers"]],
                  "receivers")
        self.walk([inhibit_shipped(r) for r in self.shipped["inhibit_rules"]],
                  [inhibit_back(r) for r in spec["inhibitRules"]], "inhibit_rules")
        # Every receiver a route names is there; the top route names one (the operator's rule).
        names = {r["name"] for r in spec["receivers"]}
        self.assertIn(spec["route"]["receiver"], names)

        def receivers_of(r):
            yield r.get("receiver")
            for c in r.get("routes", []):
                yield from receivers_of(c)
        self.assertLessEqual(set(receivers_of(spec["route"])) - {None}, names)

    @require_tools("amtool")
    def test_converted_back_amtool_accepts_it(self):
        spec = self.crd["spec"]

        def texts(r):
            if "matchers" in r:
                r["matchers"] = [tuples_to_text(m) for m in r["matchers"]]
            for c in r.get("routes", []):
                texts(c)
            return r
        top = route_back(spec["route"])
        del top["matchers"]  # a root route has none (test above)
        config = {"global": self.shipped.get("global", {}),
                  "route": texts(top),
                  "receivers": [receiver_back(r) for r in spec["receivers"]],
                  "inhibit_rules": [
                      dict(r, source_matchers=[tuples_to_text(m) for m in r["source_matchers"]],
                           target_matchers=[tuples_to_text(m) for m in r["target_matchers"]])
                      for r in (inhibit_back(r) for r in spec["inhibitRules"])]}
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            yaml.safe_dump(config, f, sort_keys=False)
            f.flush()
            out = subprocess.run(["amtool", "check-config", f.name], capture_output=True,
                                 text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("- %d inhibit rules" % len(self.shipped["inhibit_rules"]), out.stdout)

    def test_url_secret_form(self):
        script = os.path.join(K8S, "generate_alertmanagerconfig.py")
        out = subprocess.run(["python3", script, "--url-secret", "ibfabric-receivers"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        doc = yaml.safe_load(out.stdout)
        hooks = [(r["name"], w) for r in doc["spec"]["receivers"]
                 for w in r.get("webhookConfigs", [])]
        self.assertEqual(sorted(n for n, _ in hooks), ["chat", "heartbeat", "pager"])
        for name, w in hooks:
            self.assertNotIn("url", w)
            self.assertEqual(w["urlSecret"], {"name": "ibfabric-receivers", "key": name})
        self.assertEqual(doc["spec"]["route"], self.crd["spec"]["route"])
        self.assertEqual(doc["spec"]["inhibitRules"], self.crd["spec"]["inhibitRules"])


class MaintenanceManifestTest(unittest.TestCase):
    """scripts/ibfabric-maintenance --kubernetes: the maintenance windows as a PrometheusRule,
    checked as the shipped manifests are (tests/e2e/test_maintenance_tool.py tests the tool)."""

    def test_prometheusrule_of_the_windows(self):
        tool = os.path.join(source_dir(), "scripts", "ibfabric-maintenance")
        shipped = os.path.join(source_dir(), "deploy", "maintenance",
                               "ibfabric-maintenance.rules.yml")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "maintenance.rules.yml")
            with open(shipped) as f, open(path, "w") as out:
                out.write(f.read())
            manifests = []
            for args in (["list"], ["add", "switch", "leaf-a01 (rack A1)", "--for", "2h"],
                         ["add", "cable", "leaf-a01 (rack A1):17", "--for", "1h"]):
                out = subprocess.run(["python3", tool, "--file", path, "--kubernetes", *args],
                                     capture_output=True, text=True, timeout=30)
                self.assertEqual(out.returncode, 0, out.stderr)
                manifests.append(out.stdout)
        for text, count in zip(manifests, (0, 1, 2)):
            with self.subTest(windows=count):
                (doc,) = [d for d in yaml.safe_load_all(text) if d is not None]
                self.assertEqual((doc["apiVersion"], doc["kind"]),
                                 ("monitoring.coreos.com/v1", "PrometheusRule"))
                meta = doc["metadata"]
                self.assertRegex(meta["name"], r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
                self.assertNotEqual(meta["name"], load("prometheusrule.yaml")["metadata"]["name"])
                self.assertEqual(meta["namespace"], NAMESPACE)
                # Selected as the shipped PrometheusRule is.
                self.assertEqual(meta["labels"], load("prometheusrule.yaml")["metadata"]["labels"])
                (group,) = doc["spec"]["groups"]
                self.assertEqual(len(group["rules"]), count)
                for rule in group["rules"]:
                    self.assertEqual(rule["record"], "ibfabric:maintenance_declared")
                    self.assertEqual(sorted(rule["labels"]), ["kind", "name", "reason", "until"])
                with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
                    yaml.safe_dump({"groups": doc["spec"]["groups"]}, f, sort_keys=False)
                    f.flush()
                    out = subprocess.run(["promtool", "check", "rules", f.name],
                                         capture_output=True, text=True, timeout=60)
                self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
                self.assertIn("SUCCESS: %d rules found" % count, out.stdout + out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
