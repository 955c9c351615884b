#!/usr/bin/env python3
"""run_all.py: what `make test` runs after building (through run_all.sh).

The tests run in lanes, several at once. A lane runs its steps one after the
other and writes everything to its own log; when it ends, its log is printed
whole, each line prefixed with [lane]. At the end: one line per lane (its
time), and the totals line CI reads, "tests: N passed, N failed".

Lanes share no server, port or directory, so that they can run together,
TEST_JOBS at once, started in the order of START below (the chaos run
first, then the longest lanes, so that no long lane starts last; a short
one fills the end). They are:
  chaos       chaos.py --short (at nice -5 where allowed)             ports 18000-19999
  failover    failover.py --short: MariaDB failovers in network        ports 21000-21999
              namespaces (root), every ID checked (nice -5); then
              failover_multidb.py --short --idle-node; then
              failover_pg.py --short (PostgreSQL standbys promoted)
  galera      galera.py --short: a 3-node Galera cluster in namespaces  ports 22000-22999
              under kill, partition and quorum loss (nice -5)
  sentinel    sentinel.py --short: snowflake worker IDs from Redis      ports 24000-24499
              with Sentinel in namespaces (root): a lagging replica
              promoted, Sentinel cut off, the old master back, a split;
              every ID checked (nice -5)
  zkens       zk_ensemble.py --short: snowflake worker IDs from a      ports 23500-23999
              3-node ZooKeeper ensemble in namespaces (root): leader
              killed, follower cut, quorum lost, a node cut off, a
              restore from an older copy; every ID checked (nice -5)
  bb-asan     blackbox.py --asan -j BB_JOBS against ./leafd-asan      ports 14000-17999
              (any ASan/UBSan report of any leafd fails the lane; the
              front ends, parsers, hostile input, refusals and teardown:
              every test but the fault scenarios a module lists in
              PLAIN_ONLY, which the blackbox lane runs)
  blackbox    blackbox.py -j BB_PLAIN_JOBS against ./leafd            ports 10000-13999
  unit-asan   the unit tests under ASan + UBSan                       own MariaDB + ZooKeeper
  unit-tsan   the racing suites under ThreadSanitizer                 own MariaDB + ZooKeeper
  unit        the unit tests (build/tests/check_*)                    own MariaDB + ZooKeeper
  fuzz        fuzz/run.sh, FUZZ_SECONDS (8 here) per target (nice 10)
  lint        make lint; docker-compose config (nice 10)
  deb         tests/deb/test_deb.py: make deb, install, run, purge (root) ports 9000-9099
The unit suites restart their MariaDB and ZooKeeper and empty tables
(check_store, check_workerid, check_workerid_store), so every unit lane
starts its own pair. The black-box tests start their own servers in their
own directories, or use their worker's shared MariaDB (blackbox.py -j); the
port ranges sit below the kernel's ephemeral range (32768-60999), so an
outgoing connection never takes one, and below the 20000+ that
tests/lib/mariadb.sh picks from.

Environment:
  UNIT_ONLY=asan|tsan   only that unit lane (make check-asan, make check-tsan)
  TEST_JOBS=N           lanes at once (default twice the cores: 4 here; the
                        lanes spend most of their time waiting on servers,
                        clocks and timeouts: on this 2-core machine the lanes
                        took 331 s at 4 at once and 557 s at 2)
  BB_JOBS=N             black-box workers of the bb-asan lane (default 2)
  BB_PLAIN_JOBS=N       black-box workers of the blackbox lane (default 2; the
                        longest lane, 1,030 s of tests that mostly wait: at 3
                        it took 300 s instead of 518 s, but the multi-db
                        kill -9 test's buffers ran dry once, so 2 it stays)
  FUZZ_SECONDS=N        seconds per fuzz target (default 8; make fuzz-ci: 30)
  TEST_LANES="a b"      only these lanes (e.g. TEST_LANES="unit lint")
  CI                    1 unless set: a missing server fails, never skips
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(ROOT)

ASAN_OPTIONS = "detect_leaks=1:abort_on_error=1"
UBSAN_OPTIONS = "print_stacktrace=1"
TSAN_OPTIONS = "halt_on_error=1 second_deadlock_stack=1 history_size=4"


# The order lanes start in: the chaos run first (it times every node's
# answers), then the longest lanes, the short ones last.
START = ["chaos", "failover", "galera", "zkens", "sentinel", "blackbox", "unit-asan", "fuzz", "unit", "unit-tsan", "bb-asan",
         "deb", "lint"]


def units(pattern):
    return sorted(t for t in glob.glob(pattern) if not t.endswith((".d", ".o")))


def lanes(tmp):
    """name -> (needs MariaDB + ZooKeeper, env, steps[, nice]); a step is
    (title, argv). They start in this order: the chaos run first, at a
    higher priority (nice -5, where allowed), as it times every node's
    answers while servers stop and start. (The black-box lanes at -5 too
    starved the unit lanes: check_client under ASan failed in three runs
    of three.) The fuzzers and cppcheck, which only burn CPU for a set time
    or a set job, run at nice 10."""
    bb_jobs = os.environ.get("BB_JOBS", "2")
    bb_plain_jobs = os.environ.get("BB_PLAIN_JOBS", "2")
    fuzz_s = os.environ.get("FUZZ_SECONDS", "8")
    reports = os.path.join(tmp, "bb-asan", "reports")
    return {
        "chaos": (False, {"LEAFD_TEST_PORTS": "18000-19999"}, [
            ("chaos run, short version (make chaos for the long one)",
             ["python3", "tests/blackbox/chaos.py", "--short"]),
        ], -5),
        "failover": (False, {"LEAFD_TEST_PORTS": "21000-21999"}, [
            ("what the fault harness needs of this kernel (tests/lib/netns.py --check)",
             ["python3", "tests/lib/netns.py", "--check"]),
            ("MariaDB failovers under load, short version (make chaos-long for the long one)",
             ["python3", "tests/blackbox/failover.py", "--short"]),
            ("multi-db with a member that fails over, a node idle through it",
             ["python3", "tests/blackbox/failover_multidb.py", "--short",
              "--idle-node"]),
            ("PostgreSQL: an async standby and a sync standby promoted under load",
             ["python3", "tests/blackbox/failover_pg.py", "--short"]),
        ], -5),
        "galera": (False, {"LEAFD_TEST_PORTS": "22000-22999"}, [
            ("two leafd nodes through a 3-node Galera cluster: kill, partition, "
             "quorum loss", ["python3", "tests/blackbox/galera.py", "--short"]),
        ], -5),
        "sentinel": (False, {"LEAFD_TEST_PORTS": "24000-24499"}, [
            ("snowflake worker IDs from Redis with Sentinel through failovers "
             "under load, short version (make chaos-long for the long one)",
             ["python3", "tests/blackbox/sentinel.py", "--short"]),
        ], -5),
        "zkens": (False, {"LEAFD_TEST_PORTS": "23500-23999"}, [
            ("snowflake worker IDs from a ZooKeeper ensemble under faults, short version "
             "(make chaos-long for the long one)",
             ["python3", "tests/blackbox/zk_ensemble.py", "--short"]),
        ], -5),
        "bb-asan": (False, {
            "LEAFD_TEST_BIN": os.path.join(ROOT, "leafd-asan"),
            "LEAFD_TEST_PORTS": "14000-17999",
            # Every leafd writes its reports apart (log_path), and the lane
            # fails on any; a test's LD_PRELOAD (libfaketime) comes before
            # the ASan runtime, which verify_asan_link_order would refuse.
            "ASAN_OPTIONS": "abort_on_error=1:detect_leaks=0:verify_asan_link_order=0:"
                            "log_path=%s/asan" % reports,
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:log_path=%s/ubsan" % reports,
        }, [
            ("black-box tests against leafd-asan, less each module's PLAIN_ONLY",
             ["python3", "tests/blackbox/blackbox.py", "--asan", "-j", bb_jobs]),
            ("ASan/UBSan reports of leafd-asan",
             ["sh", "-c", 'mkdir -p "$1"; if ls "$1" | grep -q .; then '
              'for f in "$1"/*; do echo "== $f"; head -60 "$f"; done; exit 1; fi; '
              'echo "none"', "sh", reports]),
        ]),
        "blackbox": (False, {"LEAFD_TEST_PORTS": "10000-13999"}, [
            ("black-box tests", ["python3", "tests/blackbox/blackbox.py", "-j", bb_plain_jobs]),
        ]),
        "unit-asan": (True, {"ASAN_OPTIONS": ASAN_OPTIONS, "UBSAN_OPTIONS": UBSAN_OPTIONS,
                             "LSAN_OPTIONS": "suppressions=%s/tests/lib/lsan.supp" % ROOT}, [
            ("unit tests under ASan + UBSan",
             ["sh", "tests/lib/run_unit.sh"] + units("build/asan/tests/check_*")),
        ]),
        "unit-tsan": (True, {"TSAN_OPTIONS": TSAN_OPTIONS}, [
            # The racing suites: any report fails the suite.
            ("racing suites under ThreadSanitizer",
             ["sh", "tests/lib/run_unit.sh"] + units("build/tsan/tests/check_*")),
        ]),
        "unit": (True, {}, [
            ("unit tests", ["sh", "tests/lib/run_unit.sh"] + units("build/tests/check_*")),
        ]),
        "fuzz": (False, {"FUZZ_SECONDS": fuzz_s,
                         "FUZZ_CORPUS": os.path.join(tmp, "fuzz", "corpus")}, [
            ("each libFuzzer target for %s s (make fuzz-ci: 30 s)" % fuzz_s,
             ["sh", "fuzz/run.sh"]),
        ], 10),
        "lint": (False, {}, [
            ("make lint (cppcheck, the layers of src/)",
             ["sh", "-c", 'make --no-print-directory lint && echo "lint: clean"']),
            ("docker-compose.yml",
             ["sh", "-c", 'docker-compose -f docker-compose.yml config -q && '
              'echo "docker-compose.yml is valid"']),
        ], 10),
        "deb": (False, {"LEAFD_TEST_PORTS": "9000-9099"}, [
            ("the Debian package", ["python3", "tests/deb/test_deb.py"])], 10),
    }


class Lane:
    def __init__(self, name, tmp, servers, env, steps, nice=0):
        self.name, self.servers, self.steps, self.nice = name, servers, steps, nice
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir, exist_ok=True)
        self.log_path = os.path.join(self.dir, "log")
        self.env = dict(os.environ)
        self.env.update(env)
        self.ok = None
        self.secs = 0.0
        self.proc = None
        self.stopping = False

    def say(self, log, text):
        log.write(text + "\n")
        log.flush()

    def run_step(self, log, title, argv):
        self.say(log, "== " + title)
        if self.stopping:
            return False
        # A session of its own: an interrupted run kills the step's whole
        # process group (stop()).
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env,
                                     start_new_session=True, preexec_fn=self.renice)
        rc = self.proc.wait()
        self.proc = None
        if rc != 0:
            self.say(log, "== %s: FAILED (exit %d)" % (title, rc))
        return rc == 0

    def renice(self):
        """In the step's child, before exec: the lane's priority. A negative
        one needs root; without, the step runs at the default."""
        if self.nice:
            try:
                os.nice(self.nice)
            except OSError:
                pass

    def start_servers(self, log):
        """A MariaDB and a ZooKeeper of the lane's own (tests/lib/*.sh)."""
        my, zk = os.path.join(self.dir, "mariadb"), os.path.join(self.dir, "zk")
        self.say(log, "== starting a throwaway MariaDB and ZooKeeper in %s" % self.dir)
        env = {}
        for what, argv, envfile in (
                ("MariaDB", ["sh", "tests/lib/mariadb.sh", "start", my], my + "/env"),
                ("ZooKeeper", ["bash", "tests/lib/zookeeper.sh", "start", zk], zk + "/env")):
            r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=log,
                               stdin=subprocess.DEVNULL, env=self.env)
            if r.returncode == 0 and os.path.exists(envfile):
                with open(envfile) as f:
                    for line in f:
                        k, _, v = line.strip().partition("=")
                        env[k] = v
            if r.returncode != 0:
                self.say(log, "cannot start %s (sh .ci/deps.sh test installs it)" % what)
                return False
        if not env.get("MYSQL_PORT") or not env.get("MYSQL_URL") or not env.get("ZK_ADDRESS"):
            self.say(log, "no port in %s/env or %s/env" % (my, zk))
            return False
        self.env.update({
            "LEAFD_TEST_MYSQL_URL": env["MYSQL_URL"], "LEAFD_TEST_MYSQL_PORT": env["MYSQL_PORT"],
            "LEAFD_TEST_MYSQL_DIR": my, "LEAFD_TEST_ZK": env["ZK_ADDRESS"],
            "LEAFD_TEST_ZK_DIR": zk})
        self.say(log, "   MariaDB on 127.0.0.1:%s, ZooKeeper on %s"
                 % (env["MYSQL_PORT"], env["ZK_ADDRESS"]))
        return True

    def stop_servers(self):
        if self.servers:
            subprocess.run(["sh", "tests/lib/mariadb.sh", "stop", os.path.join(self.dir, "mariadb")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run(["bash", "tests/lib/zookeeper.sh", "stop", os.path.join(self.dir, "zk")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def run(self):
        t0 = time.time()
        ok = True
        with open(self.log_path, "w") as log:
            try:
                if self.servers and not self.start_servers(log):
                    self.say(log, "== SOME TESTS FAILED: a server did not start")
                    ok = False
                else:
                    for title, argv in self.steps:
                        # Every step runs, whatever the one before did.
                        ok = self.run_step(log, title, argv) and ok
            except Exception as e:     # keep the run going: report it
                self.say(log, "== lane %s: %r" % (self.name, e))
                ok = False
            finally:
                self.stop_servers()
        self.secs = time.time() - t0
        self.ok = ok

    def stop(self):
        """From a signal handler: stop the running step's process group,
        SIGTERM first so that a step can clean up after itself (test_deb
        purges what it installed), SIGKILL what is left 30 s later."""
        self.stopping = True
        p = self.proc
        if p is None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except OSError:
            return
        for _ in range(300):
            if p.poll() is not None:
                break
            time.sleep(0.1)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass


def main():
    os.environ.setdefault("CI", "1")
    # check's per-test timeouts are hang guards; lanes share the cores.
    os.environ.setdefault("CK_TIMEOUT_MULTIPLIER", "4")
    tmp = tempfile.mkdtemp(prefix="leafd-test-")
    only = os.environ.get("UNIT_ONLY", "")
    table = lanes(tmp)
    if only:
        names = ["unit-" + only]
    elif os.environ.get("TEST_LANES"):
        names = os.environ["TEST_LANES"].split()
    else:
        names = list(START)
    assert sorted(START) == sorted(table), "START names every lane once"
    for n in names:
        if n not in table:
            print("run_all: no lane %r (lanes: %s)" % (n, " ".join(table)))
            return 2
    todo = [Lane(n, tmp, *table[n]) for n in names]
    jobs = max(1, int(os.environ.get("TEST_JOBS", str(2 * (os.cpu_count() or 2)))))
    out_lock = threading.Lock()
    slots = threading.Semaphore(jobs)
    t_all = time.time()

    def interrupted(sig, frame):
        stoppers = [threading.Thread(target=lane.stop) for lane in todo]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
        for lane in todo:
            lane.stop_servers()
        shutil.rmtree(tmp, ignore_errors=True)
        os._exit(130)
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)

    print("== %d lanes, %d at once, in %s: %s" % (len(todo), jobs, tmp, " ".join(names)),
          flush=True)

    def one(lane):
        try:
            with out_lock:
                print("== %s: started at +%.0fs" % (lane.name, time.time() - t_all), flush=True)
            lane.run()
            with out_lock, open(lane.log_path, errors="replace") as f:
                for line in f:
                    sys.stdout.write("[%s] %s" % (lane.name, line if line.endswith("\n")
                                                  else line + "\n"))
                print("== %s: %s in %.0fs" % (lane.name, "ok" if lane.ok else "FAILED",
                                             lane.secs), flush=True)
        finally:
            slots.release()

    threads = []
    for lane in todo:
        slots.acquire()
        t = threading.Thread(target=one, args=(lane,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()

    # Totals: check's "N%: Checks: N, Failures: F, Errors: E" lines and the
    # black-box runner's "N passed, N failed". A failed lane without a count
    # of its own (a fuzzer crash, lint) counts as one failure.
    # The failures are recapped here, next to the totals, so that a CI page
    # that shows only the tail of the output still names them: check's
    # "file:line:F:suite:case:..." / ":E:" lines, the black-box runner's
    # "FAIL name" lines and a step's "== step: FAILED" line.
    n = f = 0
    recap = []
    for lane in todo:
        ln = lf = 0
        with open(lane.log_path, errors="replace") as fh:
            for line in fh:
                if (re.match(r"^[^ :]+:[0-9]+:[FE]:", line) or line.startswith("FAIL ")
                        or re.match(r"^== .*: FAILED", line)):
                    recap.append("[%s] %s" % (lane.name, line.rstrip("\n")[:300]))
                m = re.match(r"^[0-9]+%: Checks: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+)", line)
                if m:
                    ln += int(m.group(1))
                    lf += int(m.group(2)) + int(m.group(3))
                m = re.match(r"^([0-9]+) passed, ([0-9]+) failed$", line.rstrip("\n"))
                if m:
                    ln += int(m.group(1)) + int(m.group(2))
                    lf += int(m.group(2))
        if not lane.ok and lf == 0:
            ln, lf = ln + 1, 1
        n, f = n + ln, f + lf
    status = 0 if all(lane.ok for lane in todo) else 1
    if recap:
        print("== failures:")
        for line in recap[:40]:
            print("   " + line)
    print("== lanes: " + ", ".join("%s %s %.0fs" % (lane.name, "ok" if lane.ok else "FAILED",
                                                   lane.secs) for lane in todo))
    wall = time.time() - t_all
    build = os.environ.get("TEST_BUILD_SECS", "")
    if build.isdigit():
        print("== wall time %.0fs: build %ss (make test-bins), lanes %.0fs"
              % (int(build) + wall, build, wall))
    else:
        print("== wall time %.0fs" % wall)
    shutil.rmtree(tmp, ignore_errors=True)
    print("== all tests passed" if status == 0 else "== SOME TESTS FAILED")
    print("tests: %d passed, %d failed" % (n - f, f), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
