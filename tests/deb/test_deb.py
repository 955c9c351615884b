#!/usr/bin/env python3
"""test_deb.py: the Debian package, end to end, on this machine (make test's
"deb" lane; needs root, and under CI=1 fails without it, never skips).

  1. make deb (build/leafd_<version>_<arch>.deb and leafd-dev, lintian clean);
  2. apt-get install -y ./build/leafd_*.deb ./build/leafd-dev_*.deb, then
     checks what they installed: the binary, man page, unit, conffile, the
     leafd system user, the state directory and the modes postinst sets;
     systemd-analyze verify and security (offline) on the installed unit;
  3. runs the installed unit's ExecStartPre and ExecStart command lines,
     parsed from it, as systemd would start them, within what a test can do
     without systemd: as User=/Group= with no supplementary groups, in
     WorkingDirectory=, with UMask= and LimitNOFILE= (the sandboxing lines,
     namespaces and the system call filter are not applied; systemd-analyze
     checks them). The port comes from the environment (LEAFD_LISTEN_PORT,
     which overrides the conffile's 8080); gets IDs from /segment/demo,
     /snowflake and, through the installed C client (leafd-dev's
     example.c compiled against its header and library), from leased ranges;
     then stops it by PID (SIGTERM, exit 0);
  4. apt-get remove -y leafd: the conffile and the state stay; installed
     again, a second run's IDs are all above the first run's;
  5. apt-get purge -y leafd leafd-dev, and checks that nothing is left
     but what Debian keeps: the leafd user and group (system users stay).
     "Left" is judged on what the packages put there: every path dpkg says
     they own (dpkg -L while installed), every path the install made (new
     under /etc /lib /usr /var /opt and named for leafd, right after apt-get
     install, before the test runs anything: what dpkg and the maintainer
     scripts made, such as deb-systemd-helper's links), and the
     state leafd writes (/var/lib/leafd, /var/log/leafd); a directory that
     another package owns too (/usr/share/man/man8) may stay. What other
     programs write about leafd is theirs, not the package's: man-db's cat
     page of leafd(8), which man writes when systemd-analyze verify checks
     the unit's Documentation=man:leafd(8) (and when a user runs man leafd),
     on a machine where it was not there already.

While it installs, a /usr/sbin/policy-rc.d (exit 101) keeps the package's
postinst from starting leafd.service on port 8080 where systemd runs (if
the machine has no policy-rc.d of its own). Whatever happens, it stops its
leafd, purges the packages, removes that policy-rc.d and the leafd user if
it made them. It refuses to run where leafd is installed already.

Prints "N passed, N failed" (make test counts it). Takes 3 to 4 minutes on
this 2-core machine while other lanes run (make deb is about half of it).
"""
import grp
import json
import os
import pwd
import re
import resource
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import bbutil  # noqa: E402

UNIT = "/lib/systemd/system/leafd.service"
POLICY = "/usr/sbin/policy-rc.d"
PKGS = ["leafd", "leafd-dev"]
APT_ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
APT = ["apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=300"]

passed, failed = [0], [0]


def check(cond, what):
    """One counted assertion; a failure is reported and the run goes on."""
    if cond:
        passed[0] += 1
        print("ok   " + what, flush=True)
    else:
        failed[0] += 1
        print("FAIL " + what, flush=True)
    return bool(cond)


def run(argv, **kw):
    """Run, print the command and (on failure) its output; return it."""
    print("$ " + " ".join(shlex.quote(a) for a in argv), flush=True)
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, text=True, **kw)
    if r.returncode != 0:
        print(r.stdout[-6000:], flush=True)
    return r


def pkg_state(name):
    """dpkg's status word for a package ("installed", "config-files", ...),
    or "" when dpkg does not know it."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Status}", name],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def version_h():
    with open(os.path.join(ROOT, "src/core/version.h")) as f:
        return re.search(r'#define LEAFD_VERSION "([^"]+)"', f.read()).group(1)


def unit_service(path):
    """The [Service] section: key -> list of values, in order (a key may
    repeat; an empty assignment resets it, as systemd reads it)."""
    out, section = {}, None
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            continue
        if section != "[Service]" or "=" not in line:
            continue
        k, v = (x.strip() for x in line.split("=", 1))
        if v == "":
            out[k] = []
        else:
            out.setdefault(k, []).append(v)
    return out


def exec_argv(line):
    """ExecStart=-style command line -> argv. Prefixes "-" (ignore failure)
    and "@" (argv[0]) are understood; "+", "!", ":" (run privileged or
    without substitution) would mean this emulation is wrong: refused."""
    flags = ""
    while line and line[0] in "-@+!:":
        flags += line[0]
        line = line[1:]
    if set(flags) & set("+!:"):
        raise bbutil.TestFailure("unit line with prefix %r: not emulated" % flags)
    argv = shlex.split(line)
    if "@" in flags:
        argv = [argv[0]] + argv[2:]
    if "$" in line or "%" in line:
        raise bbutil.TestFailure("unit line with $VAR or %%specifier: not emulated: %s" % line)
    return argv


class Service:
    """The unit's process context as systemd would set it up (the part a
    test can reproduce: user, group, no supplementary groups, working
    directory, umask, open-files limit, Environment=)."""

    def __init__(self, svc, env):
        self.user = svc["User"][-1]
        self.group = svc.get("Group", [self.user])[-1]
        self.cwd = svc.get("WorkingDirectory", ["/"])[-1]
        self.umask = int(svc.get("UMask", ["0022"])[-1], 8)
        self.nofile = svc.get("LimitNOFILE", [None])[-1]
        self.env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "LANG": "C.UTF-8"}
        for assignment in svc.get("Environment", []):
            for kv in shlex.split(assignment):
                k, _, v = kv.partition("=")
                self.env[k] = v
        self.env.update(env)

    def drop(self):
        """In the child, before exec: the limit (as root, so that the hard
        limit may rise), then the group, no supplementary groups, the user."""
        if self.nofile:
            soft, _, hard = self.nofile.partition(":")
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (int(soft), int(hard or soft)))
            except (ValueError, OSError):
                # no CAP_SYS_RESOURCE (a container): as far as the hard limit goes
                cap = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(int(soft), cap), cap))
        os.setgroups([])
        os.setgid(grp.getgrnam(self.group).gr_gid)
        os.setuid(pwd.getpwnam(self.user).pw_uid)

    def popen(self, argv, log):
        return subprocess.Popen(argv, umask=self.umask, cwd=self.cwd, env=self.env,
                                preexec_fn=self.drop, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT)


def owner(path):
    st = os.stat(path)
    return (pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name,
            stat.S_IMODE(st.st_mode))


def installed_checks(version, multiarch):
    r = run(["/usr/sbin/leafd", "--version"])
    check(r.returncode == 0 and r.stdout.strip() == "leafd " + version,
          "/usr/sbin/leafd --version says leafd %s (src/core/version.h)" % version)
    for path in ["/usr/share/man/man8/leafd.8.gz", UNIT, "/etc/leafd/leafd.conf",
                 "/usr/share/doc/leafd/copyright", "/usr/include/leafd_client.h",
                 "/usr/lib/%s/libleafd-client.a" % multiarch]:
        check(os.path.isfile(path), "installed: " + path)
    # Rendered from a copy outside every man tree: man-db neither reads its
    # cat page cache for it (an older page) nor writes one.
    page = os.path.join(tempfile.mkdtemp(prefix="leafd-man-"), "leafd.8.gz")
    shutil.copy("/usr/share/man/man8/leafd.8.gz", page)
    r = subprocess.run(["man", "--warnings", "-l", page],
                       capture_output=True, text=True, env=dict(os.environ, MANWIDTH="80"))
    shutil.rmtree(os.path.dirname(page), ignore_errors=True)
    check(r.returncode == 0 and not r.stderr and "CONFIGURATION KEYS" in r.stdout
          and "listen.port" in r.stdout,
          "leafd(8) renders without a groff warning, with the keys of --help %s"
          % r.stderr[:500])
    r = subprocess.run(["dpkg-query", "-W", "-f=${Conffiles}", "leafd"],
                       capture_output=True, text=True)
    check("/etc/leafd/leafd.conf" in r.stdout, "/etc/leafd/leafd.conf is a conffile")
    try:
        pw = pwd.getpwnam("leafd")
        check(pw.pw_uid < 1000 and pw.pw_shell.endswith("nologin")
              and pw.pw_dir == "/var/lib/leafd",
              "leafd is a system user (uid %d, shell %s, home %s)"
              % (pw.pw_uid, pw.pw_shell, pw.pw_dir))
    except KeyError:
        check(False, "postinst made the leafd user")
    check(os.path.isdir("/var/lib/leafd") and owner("/var/lib/leafd") == ("leafd", "leafd", 0o750),
          "/var/lib/leafd: leafd:leafd 0750")
    check(owner("/etc/leafd/leafd.conf") == ("root", "leafd", 0o640),
          "/etc/leafd/leafd.conf: root:leafd 0640 (may hold passwords)")
    with open("/etc/leafd/leafd.conf") as f:
        conf = f.read()
    check("segment.sqlite.path = /var/lib/leafd/leafd.db" in conf
          and "snowflake.cache_file = /var/lib/leafd/" in conf
          and "segment.marks_file = /var/lib/leafd/segment-marks" in conf,
          "the conffile keeps its state in /var/lib/leafd")

    svc = unit_service(UNIT)
    want = {"User": "leafd", "StateDirectory": "leafd", "ProtectSystem": "strict",
            "NoNewPrivileges": "yes", "PrivateTmp": "yes", "ProtectHome": "yes",
            "WorkingDirectory": "/var/lib/leafd"}
    for k, v in want.items():
        check(svc.get(k, [None])[-1] == v, "unit: %s=%s" % (k, v))
    fam = " ".join(svc.get("RestrictAddressFamilies", [])).split()
    check({"AF_INET", "AF_INET6", "AF_UNIX"} <= set(fam) and not fam[0].startswith("~"),
          "unit: RestrictAddressFamilies allows the stores (AF_INET AF_INET6 AF_UNIX): %s"
          % " ".join(fam))
    r = run(["systemd-analyze", "verify", UNIT])
    check(r.returncode == 0, "systemd-analyze verify " + UNIT)
    r = run(["systemd-analyze", "security", "--offline=true", UNIT])
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    check(m is not None and float(m.group(1)) <= 2.0,
          "systemd-analyze security --offline: exposure %s (at most 2.0)"
          % (m.group(1) if m else "?"))
    return svc


def serve_checks(svc, tmp, state, seen):
    """One run of the unit's command; every ID must be new and, for the
    demo tag, above every ID of earlier runs. Returns the IDs seen."""
    port = bbutil.free_port()
    service = Service(svc, {"LEAFD_LISTEN_PORT": str(port)})
    print("emulating: User=%s Group=%s WorkingDirectory=%s UMask=%04o LimitNOFILE=%s "
          "(at most the hard limit, %d, where root may not raise it), port %d from "
          "LEAFD_LISTEN_PORT" % (service.user, service.group, service.cwd, service.umask,
                                 service.nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1],
                                 port), flush=True)
    log_path = os.path.join(tmp, "leafd.log")
    with open(log_path, "w") as log:
        for line in svc.get("ExecStartPre", []):
            p = service.popen(exec_argv(line), log)
            check(p.wait(timeout=120) == 0, "ExecStartPre as %s: %s" % (service.user, line))
        argv = exec_argv(svc["ExecStart"][-1])
        check(argv[0] == "/usr/sbin/leafd", "ExecStart runs /usr/sbin/leafd: %s" % " ".join(argv))
        state["proc"] = service.popen(argv, log)
    proc = state["proc"]
    c = bbutil.Client(port)
    try:
        bbutil.wait_for(lambda: proc.poll() is None and c.get("/health").status == 200,
                        timeout=120, step=0.2, what="leafd's /health on port %d" % port)
        ids = []
        for _ in range(2):
            r = c.get("/segment/demo")
            check(r.status == 200 and len(r.ids()) == 1, "/segment/demo: %r" % r)
            ids += r.ids() if r.status == 200 else []
        check(len(ids) == 2 and max(seen + [0]) < ids[0] < ids[1],
              "/segment/demo IDs rise, above the %d IDs of earlier runs: %s" % (len(seen), ids))
        r = c.get("/snowflake")
        check(r.status == 200 and len(r.ids()) == 1 and r.ids()[0] > 0, "/snowflake: %r" % r)

        example = os.path.join(tmp, "example")
        r = run(["sh", "-c", 'cc -o "$1" /usr/share/doc/leafd-dev/examples/example.c '
                 '-lleafd-client $(pkg-config --libs libcurl) -pthread', "sh", example])
        check(r.returncode == 0, "leafd-dev: example.c builds against the installed "
              "leafd_client.h and libleafd-client.a")
        if r.returncode == 0:
            r = run([example, "http://127.0.0.1:%d" % port, "demo", "3"])
            got = [int(x) for x in r.stdout.split()[:3] if x.isdigit()]
            check(r.returncode == 0 and len(got) == 3 and len(set(got + ids + seen)) ==
                  5 + len(seen), "the C client leases IDs from the packaged leafd: %s" % got)
            ids += got
    except bbutil.TestFailure as e:
        check(False, str(e))
    finally:
        c.close()
    for f in ("/var/lib/leafd/leafd.db", "/var/lib/leafd/snowflake-cache.json"):
        check(os.path.exists(f) and owner(f)[0] == "leafd" and owner(f)[2] & 0o077 == 0,
              "%s: leafd's, no access for others (UMask): %s"
              % (f, owner(f) if os.path.exists(f) else "missing"))
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, "SIGTERM to PID %d: leafd exits 0 (%s)" % (proc.pid, rc))
    with open(log_path) as f:
        print("-- leafd's log:\n" + f.read()[-3000:], flush=True)
    return seen + ids


def remove_checks(debs):
    """apt-get remove keeps the conffile and the state; installed again,
    leafd goes on from them."""
    r = run(APT + ["remove", "leafd"], env=APT_ENV)
    check(r.returncode == 0 and pkg_state("leafd") == "config-files",
          "apt-get remove -y leafd: config-files left (dpkg: %r)" % pkg_state("leafd"))
    kept = ["/etc/leafd/leafd.conf", "/var/lib/leafd/leafd.db",
            "/var/lib/leafd/snowflake-cache.json"]
    check(all(os.path.exists(p) for p in kept) and not os.path.exists("/usr/sbin/leafd"),
          "after remove: the binary is gone, kept: %s" % [p for p in kept if os.path.exists(p)])
    r = run(APT + ["install"] + debs, cwd=ROOT, env=APT_ENV)
    check(r.returncode == 0 and pkg_state("leafd") == "installed", "installed again")


def tree_paths():
    """Every path under the system's trees (the repo and /tmp are
    elsewhere): a snapshot, to tell what an install made."""
    r = subprocess.run(["find", "/etc", "/lib", "/usr", "/var", "/opt", "-xdev"],
                       capture_output=True, text=True)
    return set(r.stdout.split("\n")) - {""}


def owned_paths():
    """What dpkg says the installed packages own (files and directories)."""
    r = subprocess.run(["dpkg-query", "-L"] + PKGS, capture_output=True, text=True)
    return {os.path.normpath(p) for p in r.stdout.split("\n")
            if p.startswith("/") and os.path.normpath(p) != "/"}


def owned_by_other(path):
    """Does a package other than ours own path too (a shared directory)?"""
    r = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        pkgs, _, p = line.rpartition(": ")
        if p != path:
            continue
        for pkg in pkgs.split(", "):
            if pkg.split(":")[0] not in PKGS:
                return True
    return False


def purge_checks(multiarch, ours):
    r = run(APT + ["purge"] + PKGS, env=APT_ENV)
    check(r.returncode == 0, "apt-get purge -y leafd leafd-dev")
    for p in PKGS:
        check(pkg_state(p) in ("", "not-installed"), "%s purged (dpkg: %r)" % (p, pkg_state(p)))
    gone = ["/etc/leafd", "/var/lib/leafd", "/var/log/leafd", "/usr/share/doc/leafd",
            "/usr/share/doc/leafd-dev", "/usr/sbin/leafd", UNIT,
            "/usr/share/man/man8/leafd.8.gz", "/usr/include/leafd_client.h",
            "/usr/lib/%s/libleafd-client.a" % multiarch,
            "/etc/systemd/system/multi-user.target.wants/leafd.service",
            "/var/lib/systemd/deb-systemd-helper-enabled/leafd.service.dsh-also",
            "/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/leafd.service",
            "/var/lib/systemd/deb-systemd-helper-masked/leafd.service"]
    left = [p for p in gone if os.path.lexists(p)]
    check(not left, "nothing left after purge (of %d paths): %s" % (len(gone), left or "none"))
    left = sorted(p for p in ours if os.path.lexists(p) and not owned_by_other(p))
    check(not left, "nothing left of the %d paths the packages owned or the install "
          "made: %s" % (len(ours), left[:20] or "none"))
    kept = []
    try:
        pwd.getpwnam("leafd")
        grp.getgrnam("leafd")
        kept = ["user leafd", "group leafd"]
    except KeyError:
        pass
    check(kept == ["user leafd", "group leafd"],
          "kept, as Debian keeps system users: %s" % (", ".join(kept) or "nothing"))


# While it runs, what it changed on the machine, so that a run killed before
# its cleanup (SIGKILL, a power cut) is cleaned up by the next one instead of
# failing it ("installed on this machine already").
MARK = "/var/tmp/leafd-test-deb.json"


def undo(made_policy, had_user):
    """Put the machine back: no leafd package, our policy-rc.d and our
    leafd user gone."""
    if any(pkg_state(x) not in ("", "not-installed") for x in PKGS):
        run(APT + ["purge"] + PKGS, env=APT_ENV)
    if made_policy and os.path.lexists(POLICY):
        os.unlink(POLICY)
    if not had_user:
        # The machine as it was: the user the package made goes too.
        run(["deluser", "--system", "--quiet", "leafd"])
        try:
            grp.getgrnam("leafd")
            run(["delgroup", "--system", "--quiet", "leafd"])
        except KeyError:
            pass


def recover():
    """A mark left by a killed run: undo what that run did."""
    try:
        with open(MARK) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return
    print("test_deb: an earlier run was killed before its cleanup (%s): undoing it" % MARK)
    undo(m.get("made_policy", False), m.get("had_user", True))
    os.unlink(MARK)


def mark(made_policy, had_user):
    with open(MARK + ".tmp", "w") as f:
        json.dump({"made_policy": made_policy, "had_user": had_user}, f)
    os.replace(MARK + ".tmp", MARK)


def main():
    t0 = time.time()
    # SIGTERM (make test interrupted) runs the cleanup in finally.
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(143))
    if os.geteuid() != 0:
        if bbutil.in_ci():
            print("test_deb: needs root (apt-get install); CI=%s: a failure, not a skip"
                  % os.environ.get("CI"))
            print("0 passed, 1 failed")
            return 1
        print("test_deb: skipped: needs root (apt-get install)")
        return 0
    recover()
    held = [p for p in PKGS if pkg_state(p) not in ("", "not-installed")]
    if held:
        print("test_deb: %s installed on this machine already; this test would purge it"
              % ", ".join(held))
        print("0 passed, 1 failed")
        return 1
    version = version_h()
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                          text=True).stdout.strip()
    multiarch = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"],
                               capture_output=True, text=True).stdout.strip()
    debs = ["./build/%s_%s_%s.deb" % (p, version, arch) for p in PKGS]
    had_user = True
    try:
        pwd.getpwnam("leafd")
    except KeyError:
        had_user = False
    made_policy = False
    state = {"proc": None}
    tmp = tempfile.mkdtemp(prefix="leafd-deb-")
    try:
        t = time.time()
        r = run(["make", "--no-print-directory", "deb"], cwd=ROOT)
        check(r.returncode == 0 and all(os.path.exists(os.path.join(ROOT, d)) for d in debs),
              "make deb: %s, lintian clean (%.0fs)" % (" ".join(debs), time.time() - t))
        if r.returncode != 0:
            return 1
        made_policy = not os.path.lexists(POLICY)
        mark(made_policy, had_user)
        if made_policy:
            with open(POLICY, "w") as f:
                f.write("#!/bin/sh\n# test_deb.py: start no service while it installs\nexit 101\n")
            os.chmod(POLICY, 0o755)
        before = tree_paths()
        r = run(APT + ["install"] + debs, cwd=ROOT, env=APT_ENV)
        if not check(r.returncode == 0, "apt-get install -y " + " ".join(debs)):
            return 1
        # What the packages own and what installing them made (dpkg, the
        # maintainer scripts), before anything here runs leafd or man.
        made = {p for p in tree_paths() - before if "leafd" in p}
        owned = owned_paths()
        check("/usr/sbin/leafd" in owned and "/var/lib/leafd" in made,
              "dpkg owns /usr/sbin/leafd; postinst made /var/lib/leafd "
              "(%d owned, %d made)" % (len(owned), len(made)))
        ours = owned | made | {"/var/lib/leafd", "/var/log/leafd"}
        svc = installed_checks(version, multiarch)
        seen = serve_checks(svc, tmp, state, [])
        remove_checks(debs)
        serve_checks(svc, tmp, state, seen)
        purge_checks(multiarch, ours)
    except Exception as e:    # counted, then the cleanup below
        check(False, "test_deb: %r" % e)
    finally:
        p = state["proc"]
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
        undo(made_policy, had_user)
        if os.path.exists(MARK):
            os.unlink(MARK)
        subprocess.run(["rm", "-rf", tmp])
        print("test_deb: %.0fs" % (time.time() - t0))
        print("%d passed, %d failed" % (passed[0], failed[0]), flush=True)
    return 1 if failed[0] else 0


if __name__ == "__main__":
    sys.exit(main())
