"""The Debian package, end to end on this machine: scripts/package.sh builds it from the release
build dir (IBFABRIC_BUILD_DIR), lintian reports no error, `dpkg -i` installs it (files in place,
conffiles registered, user and groups created, the unit enabled, the config created from the
example), the installed unit passes `systemd-analyze verify` and `systemd-analyze security
--offline=true` within the threshold of tests/systemd/verify_units.sh, the installed binary runs
(`--version`, `--check-config` on the shipped example, as user ibfabric too), the man page names
every flag and collector of `--help`, a reinstall (the upgrade path of postinst) keeps an edited
config and a disabled unit, `dpkg -r` keeps the config, and `dpkg --purge` leaves nothing
behind: no file, directory, conffile, enable link, user or group that was not there before.
A second round with a group rdma that the site already had: kept, with its gid, on purge.

Needs root (dpkg). systemd is not PID 1 here, so nothing is started; the maintainer scripts must
cope with that. Skipped when IBFABRIC_SANITIZED=1: packaging is tested once, in the release
suite (the package is made from the release binary), and when ibfabricd is already installed
(this test would purge the operator's package).
"""

import glob
import gzip
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from ibfabric_testlib import source_dir

PKG = "ibfabricd"
UNIT = "/lib/systemd/system/ibfabricd.service"
SYSCONF = "/etc/ibfabric"
# This test runs dpkg six times: no fsync per file (the files need not survive a crash), and
# man-db's trigger (mandb, seconds each time) runs once at the end instead of after every run.
DPKG = ["dpkg", "--force-unsafe-io", "--no-triggers"]
# Where a package install could leave something. Narrow on purpose: other tests run beside this
# one and write elsewhere (their build dirs, /tmp).
WATCHED = ["/etc", "/lib/systemd", "/lib/udev/rules.d", "/lib/sysusers.d", "/usr/bin",
           "/usr/sbin", "/usr/share/ibfabric", "/usr/share/doc", "/usr/share/man/man8",
           "/usr/share/lintian", "/var/lib/ibfabricd", "/var/lib/ibfabric", "/var/lib/systemd"]
# The shadow tools (userdel, groupdel) and systemd-sysusers leave backups of the files they
# rewrite and a lock file: not the package's.
SHADOW_NOISE = re.compile(r"^/etc/(passwd|group|shadow|gshadow)-$|^/etc/\.pwd\.lock$")


def run(cmd, check=True, **kwargs):
    start = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kwargs)
    if time.monotonic() - start > 1:  # where the test's time goes, for the log
        print(f"{time.monotonic() - start:5.1f} s  {' '.join(cmd)}")
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {result.returncode}:\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


def tree(paths):
    found = set()
    for top in paths:
        if not os.path.lexists(top):
            continue
        found.add(top)
        for parent, dirs, files in os.walk(top):
            for name in dirs + files:
                path = os.path.join(parent, name)
                if not SHADOW_NOISE.match(path):
                    found.add(path)
    return found


def account_lines():
    """The lines of the account databases that name our user or groups."""
    lines = set()
    for db in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"):
        if os.path.exists(db):
            with open(db) as f:
                lines |= {f"{db}:{line.rstrip()}" for line in f
                          if re.search(r"(^|[:,])(ibfabric|rdma)([:,]|$)", line)}
    return lines


def installed():
    result = run(["dpkg-query", "-W", "-f=${db:Status-Status}", PKG], check=False)
    return result.returncode == 0 and result.stdout not in ("", "not-installed")


def project_version():
    with open(os.path.join(source_dir(), "CMakeLists.txt")) as f:
        m = re.search(r"^project\(ibfabric VERSION ([0-9.]+) ", f.read(), re.MULTILINE)
    assert m, "no project(ibfabric VERSION ...) in CMakeLists.txt"
    return m.group(1)


def max_exposure():
    """The exposure threshold of the build-tree unit's test, so both tests hold one bar."""
    with open(os.path.join(source_dir(), "tests", "systemd", "verify_units.sh")) as f:
        m = re.search(r"^max_exposure=([0-9.]+)$", f.read(), re.MULTILINE)
    assert m, "no max_exposure= in tests/systemd/verify_units.sh"
    return float(m.group(1))


@unittest.skipIf(os.environ.get("IBFABRIC_SANITIZED") == "1",
                 "packaging is tested once, in the release suite")
class PackageTest(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("dpkg -i needs root")
        if installed():
            self.skipTest(f"{PKG} is installed on this machine; this test would purge it")
        # Cleanups run last-in first-out: this one after the purge.
        self.addCleanup(run, ["dpkg", "--triggers-only", "--pending"], check=False)
        self.tmp = tempfile.mkdtemp(prefix="ibfabric-pkg-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def test_build_install_purge(self):
        version = project_version()
        before_tree = tree(WATCHED)
        before_accounts = account_lines()

        # --- build
        dist = os.path.join(self.tmp, "dist")
        env = dict(os.environ, IBFABRIC_DIST_DIR=dist)
        out = run([os.path.join(source_dir(), "scripts", "package.sh"),
                   os.environ["IBFABRIC_BUILD_DIR"]], env=env)
        debs = glob.glob(os.path.join(dist, "*.deb"))
        arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        self.assertEqual([os.path.basename(d) for d in debs], [f"{PKG}_{version}_{arch}.deb"],
                         out.stdout)
        deb = debs[0]

        # --- control fields: shlibs-derived runtime libraries, never a -dev package
        fields = run(["dpkg-deb", "-f", deb, "Package", "Version", "Depends"]).stdout
        depends = re.search(r"^Depends: (.*)$", fields, re.MULTILINE).group(1)
        for lib in ("libibumad3", "libibmad5", "libyaml-cpp", "libssl3", "libsystemd0"):
            self.assertIn(lib, depends)
        self.assertNotIn("-dev", depends)

        # --- lintian reads only the .deb and takes ~20 s: it runs while the package is
        # installed and checked, and is judged at the end.
        lint = subprocess.Popen(["lintian", "--allow-root", deb], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.addCleanup(lint.kill)

        # --- install
        self.addCleanup(run, DPKG + ["--purge", PKG], check=False)
        run(DPKG + ["-i", deb])
        self.assertTrue(installed())
        listed = set(run(["dpkg", "-L", PKG]).stdout.split())
        expected = {"/usr/bin/ibfabricd", UNIT, "/lib/udev/rules.d/90-ibfabric-umad.rules",
                    "/usr/bin/ibfabric-localize", "/lib/systemd/system/ibfabric-localize.service",
                    "/lib/sysusers.d/ibfabric.conf", f"{SYSCONF}/ibfabricd.example.yaml",
                    f"{SYSCONF}/web-config.example.yml", "/usr/share/man/man8/ibfabricd.8.gz",
                    "/usr/share/man/man8/ibfabric-localize.8.gz",
                    "/usr/share/ibfabric/alerts/ibfabric.rules.yml",
                    "/usr/share/ibfabric/alertmanager/alertmanager.yml",
                    "/usr/share/doc/ibfabricd/copyright", "/usr/share/doc/ibfabricd/changelog.gz",
                    "/usr/share/doc/ibfabricd/README.systemd.md"}
        for name in glob.glob(os.path.join(source_dir(), "dashboards", "ibfabric-*.json")):
            expected.add("/usr/share/ibfabric/dashboards/" + os.path.basename(name))
        self.assertEqual(expected - listed, set(), "files missing from the package")
        for path in expected:
            self.assertTrue(os.path.isfile(path), path)
        # The shipped data are the sources' files, byte for byte.
        for src, dst in (("dashboards/alerts/ibfabric.rules.yml",
                          "/usr/share/ibfabric/alerts/ibfabric.rules.yml"),
                         ("deploy/alertmanager/alertmanager.yml",
                          "/usr/share/ibfabric/alertmanager/alertmanager.yml"),
                         ("config/ibfabricd.example.yaml", f"{SYSCONF}/ibfabricd.example.yaml"),
                         ("systemd/90-ibfabric-umad.rules",
                          "/lib/udev/rules.d/90-ibfabric-umad.rules")):
            with open(os.path.join(source_dir(), src), "rb") as a, open(dst, "rb") as b:
                self.assertEqual(a.read(), b.read(), dst)
        conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", PKG]).stdout
        self.assertEqual(sorted(re.findall(r"^ (\S+) [0-9a-f]{32}$", conffiles, re.MULTILINE)),
                         [f"{SYSCONF}/ibfabricd.example.yaml", f"{SYSCONF}/web-config.example.yml"])
        # postinst: the config from the example, the enable link, the user and groups.
        with open(f"{SYSCONF}/ibfabricd.example.yaml") as a, open(f"{SYSCONF}/ibfabricd.yaml") as b:
            self.assertEqual(a.read(), b.read())
        link = "/etc/systemd/system/multi-user.target.wants/ibfabricd.service"
        self.assertEqual(os.readlink(link), UNIT)
        user = run(["getent", "passwd", "ibfabric"]).stdout.strip().split(":")
        self.assertTrue(0 < int(user[2]) < 1000, user)
        self.assertTrue(user[6].endswith("nologin"), user)
        self.assertEqual(run(["getent", "group", "ibfabric"]).stdout.split(":")[2], user[3])
        self.assertIn("ibfabric", run(["getent", "group", "rdma"]).stdout.strip()
                      .split(":")[3].split(","))

        # --- the installed unit
        with open(UNIT) as f:
            unit = f.read()
        self.assertIn("\nExecStart=/usr/bin/ibfabricd --config /etc/ibfabric/ibfabricd.yaml\n",
                      unit)
        doc = re.search(r"^Documentation=file://(\S+)$", unit, re.MULTILINE).group(1)
        self.assertTrue(os.path.isfile(doc), doc)
        verify = run(["systemd-analyze", "verify", "--man=no", UNIT], cwd=self.tmp, check=False,
                     env=dict(os.environ, SYSTEMD_LOG_COLOR="0"))
        self.assertEqual(verify.returncode, 0, verify.stderr)
        complaints = [line for line in (verify.stdout + verify.stderr).splitlines()
                      if "ibfabricd.service" in line]
        self.assertEqual(complaints, [], "systemd-analyze verify")
        security = run(["systemd-analyze", "security", "--offline=true", "--no-pager", UNIT],
                       cwd=self.tmp)
        score = re.search(r"Overall exposure level for ibfabricd\.service: ([0-9.]+)",
                          security.stdout)
        self.assertIsNotNone(score, security.stdout)
        print(f"installed unit: systemd-analyze security exposure {score.group(1)}")
        self.assertLessEqual(float(score.group(1)), max_exposure(), security.stdout)

        # --- the installed binaries
        self.assertTrue(run(["/usr/bin/ibfabricd", "--version"]).stdout
                        .startswith(f"ibfabricd {version} "))
        self.assertTrue(run(["/usr/bin/ibfabric-localize", "--version"]).stdout
                        .startswith(f"ibfabric-localize {version} "))
        for config in (f"{SYSCONF}/ibfabricd.example.yaml", f"{SYSCONF}/ibfabricd.yaml"):
            check = run(["/usr/bin/ibfabricd", "--check-config", "--config", config])
            self.assertIn(f"{config}: ok", check.stdout + check.stderr)
        # ... as the daemon's user, which must be able to read its config.
        as_user = run(["runuser", "-u", "ibfabric", "--", "/usr/bin/ibfabricd", "--check-config",
                       "--config", f"{SYSCONF}/ibfabricd.yaml"])
        self.assertIn("ok", as_user.stdout + as_user.stderr)
        # The same check fails on a broken copy, so the "ok" above means something.
        broken = os.path.join(self.tmp, "broken.yaml")
        with open(broken, "w") as f:
            f.write("collectors:\n  sysfs:\n    interval: soon\n")
        self.assertEqual(run(["/usr/bin/ibfabricd", "--check-config", "--config", broken],
                             check=False).returncode, 2)

        # --- the man pages: each renders without warnings and names every flag of its
        # program's --help (ibfabricd's also every collector)
        for program in ("ibfabricd", "ibfabric-localize"):
            help_text = run([f"/usr/bin/{program}", "--help"]).stdout
            man_page = f"/usr/share/man/man8/{program}.8.gz"
            man = run(["man", "--warnings", "-l", man_page],
                      env=dict(os.environ, MANWIDTH="100", LC_ALL="C.UTF-8"))
            self.assertEqual(man.stderr.strip(), "", f"man --warnings {man_page}")
            page = re.sub(r".\x08", "", man.stdout)  # overstrike bold/underline
            page = page.replace("\u2010", "-").replace("\u2212", "-")
            flags = set(re.findall(r"(--[a-z][a-z.-]*[a-z])", help_text))
            self.assertGreater(len(flags), 8, help_text)
            for flag in flags:
                self.assertIn(flag, page, f"{man_page} lacks {flag}")
            for name, state in re.findall(r"^\s+([a-z][a-z0-9_]*) \((on|off) by default\)$",
                                          help_text, re.MULTILINE):
                self.assertRegex(page, rf"\b{name}\s+\({state}", f"man page: collector {name}")
            with gzip.open(man_page, "rt") as f:
                self.assertIn(f'"ibfabric {version}"', f.read())

        # --- reinstall, as an upgrade runs postinst (configure with the old version): the
        # operator's config and a disabled unit stay as they are
        with open(f"{SYSCONF}/ibfabricd.yaml", "a") as f:
            f.write("# edited by the operator\n")
        with open(f"{SYSCONF}/ibfabricd.yaml") as f:
            edited = f.read()
        run(["systemctl", "disable", "ibfabricd.service"])  # works offline, as an admin does
        self.assertFalse(os.path.lexists(link))
        run(DPKG + ["-i", deb])
        with open(f"{SYSCONF}/ibfabricd.yaml") as f:
            self.assertEqual(f.read(), edited, "a reinstall changed the operator's config")
        self.assertFalse(os.path.lexists(link), "a reinstall enabled a disabled unit")
        with open("/var/lib/ibfabricd/created-by-postinst") as f:
            created = f.read().split()
        self.assertEqual(len(created), len(set(created)), created)
        self.assertIn("user:ibfabric", created)

        # --- remove: program gone, config kept, unit masked against stale links
        run(DPKG + ["-r", PKG])
        self.assertFalse(os.path.exists("/usr/bin/ibfabricd"))
        self.assertFalse(os.path.exists(UNIT))
        self.assertTrue(os.path.exists(f"{SYSCONF}/ibfabricd.yaml"))
        self.assertTrue(os.path.exists(f"{SYSCONF}/ibfabricd.example.yaml"))

        # --- purge: nothing left behind
        run(DPKG + ["--purge", PKG])
        self.assertFalse(installed())
        self.assertEqual(run(["dpkg-query", "-W", "-f=${Conffiles}", PKG], check=False)
                         .stdout.strip(), "")
        after_tree = tree(WATCHED)
        self.assertEqual(sorted(after_tree - before_tree), [], "left behind after purge")
        self.assertEqual(sorted(before_tree - after_tree), [], "removed by purge, not ours")
        self.assertEqual(account_lines(), before_accounts, "accounts after purge")

        # --- a site that has group rdma already (rdma-core's or its own): postinst adds the
        # user to it, purge keeps it. Only when this machine had none: otherwise the first
        # round above was this case.
        if not any(line.startswith("/etc/group:rdma:") for line in before_accounts):
            run(["groupadd", "--system", "rdma"])
            self.addCleanup(run, ["groupdel", "rdma"], check=False)
            gid = run(["getent", "group", "rdma"]).stdout.split(":")[2]
            run(DPKG + ["-i", deb])
            group = run(["getent", "group", "rdma"]).stdout.strip().split(":")
            self.assertEqual((group[2], group[3]), (gid, "ibfabric"))
            run(DPKG + ["--purge", PKG])
            group = run(["getent", "group", "rdma"], check=False).stdout.strip().split(":")
            self.assertEqual(group[2:], [gid, ""], "purge removed or changed the site's rdma")
            run(["groupdel", "rdma"])
            self.assertEqual(sorted(tree(WATCHED) ^ before_tree), [], "second round")
            self.assertEqual(account_lines(), before_accounts, "accounts after the second round")

        # --- lintian: no error (warnings are printed for the log)
        lint_out, lint_err = lint.communicate(timeout=300)
        print(lint_out + lint_err)
        errors = [line for line in lint_out.splitlines() if line.startswith("E:")]
        self.assertEqual(errors, [], "lintian errors")
        self.assertIn(lint.returncode, (0, 2), lint_err)  # 2: only warnings


if __name__ == "__main__":
    unittest.main(verbosity=2)
