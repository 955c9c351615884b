#!/usr/bin/env python3
"""blackbox.py: run leafd's black-box tests (tests/blackbox/bb_*.py) against the real
binary. Each test_* function takes a Context. Prints one line per test and a
closing "N passed, N failed" line; exits 1 if any test failed.

A test that cannot run here (no MariaDB, no ZooKeeper: bbutil.skip) is
reported as "skip" and listed apart; under CI=1 (or true) it fails instead.

    python3 tests/blackbox/blackbox.py              # all
    python3 tests/blackbox/blackbox.py segment      # tests whose module or name has "segment"
    python3 tests/blackbox/blackbox.py bb_mysql.test_leaf_schema   # one test
    python3 tests/blackbox/blackbox.py -j 2         # in 2 worker processes
    python3 tests/blackbox/blackbox.py --asan       # all but each module's PLAIN_ONLY

--asan is the set make test's bb-asan lane runs against ./leafd-asan: every
test but those a module lists in PLAIN_ONLY (fault scenarios whose time goes
to waiting for servers to stop, fail over or come back; the plain lane runs
them, and the unit suites run those code paths under ASan). The front ends,
parsers, hostile input, refusals and teardown all run under ASan.

-j N runs the tests in N worker processes, each taking the next test from one
queue, the longest first: by the times in tests/blackbox/times.json (committed,
so that a fresh clone runs in the same order as any other; update it from
build/blackbox-times-<binary>.json, which every run writes, when tests change).
Each worker has its own shared MariaDB (never the
one LEAFD_TEST_MYSQL_PORT names, which a lone run uses) and, when
LEAFD_TEST_PORTS=LO-HI is set, its own slice of that port range
(bbutil.free_port); every test makes its own work directory. A worker's
output for one test is printed whole when the test ends.
LEAFD_TEST_BIN=./leafd-asan runs the tests against another binary.
"""
import contextlib
import importlib
import io
import json
import multiprocessing
import os
import socket
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import bbutil  # noqa: E402


class Context:
    """Shared, lazily started servers for tests that only read/insert rows."""

    def __init__(self, own_mariadb=False):
        self._wd = None
        self._mariadb = None
        self._own = own_mariadb     # a -j worker: never the external one

    def shared_mariadb(self):
        if self._mariadb is None and not self._own and os.environ.get("LEAFD_TEST_MYSQL_PORT"):
            # The one make test started (tests/lib/run_all.sh); it stops it.
            m = bbutil.MariaDB.__new__(bbutil.MariaDB)
            m.dir = os.environ.get("LEAFD_TEST_MYSQL_DIR")
            m.port = int(os.environ["LEAFD_TEST_MYSQL_PORT"])
            m.url = os.environ["LEAFD_TEST_MYSQL_URL"]
            m.external = True
            try:
                socket.create_connection(("127.0.0.1", m.port), 2).close()
            except OSError as e:
                raise bbutil.TestFailure("LEAFD_TEST_MYSQL_PORT=%d: no MariaDB there (%s)"
                                         % (m.port, e))
            self._mariadb = m
        if self._mariadb is None:
            self._wd = bbutil.Workdir("shared")
            self._mariadb = bbutil.MariaDB(self._wd.path).start()
        return self._mariadb

    def close(self):
        if self._mariadb is not None and not getattr(self._mariadb, "external", False):
            try:
                self._mariadb.stop()
            except Exception as e:
                print("  stopping shared MariaDB: %s" % e)
        if self._wd is not None:
            self._wd.__exit__(None, None, None)


# The times of this run, per binary (./leafd-asan is slower), written for
# the next update of ORDER; the order itself never depends on an earlier run.
TIMES = os.path.join(bbutil.ROOT, "build", "blackbox-times-%s.json" % os.path.basename(bbutil.LEAFD))
ORDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "times.json")


def run_one(ctx, full, fn):
    """Run one test; return (verdict, seconds, output) where verdict is
    "ok", "skip" or "FAIL" and output what it printed (and why it failed)."""
    buf = io.StringIO()
    t0 = time.time()
    with contextlib.redirect_stdout(buf):
        try:
            fn(ctx)
            verdict = "ok"
        except bbutil.Skipped as e:
            verdict = "skip"
            print("     %s" % e)
        except Exception as e:
            verdict = "FAIL"
            if isinstance(e, bbutil.TestFailure):
                print("     %s" % str(e).replace("\n", "\n     "))
            else:
                print(traceback.format_exc(), end="")
    return verdict, time.time() - t0, buf.getvalue()


def worker(wid, nworkers, tests, todo, done):
    """A -j worker: its own Context and port slice; takes test indexes from
    todo until None, reports ("start"|"end", ...) on done."""
    rng = bbutil._port_range()
    if rng is not None:
        lo, hi = rng
        span = (hi - lo + 1) // nworkers
        os.environ["LEAFD_TEST_PORTS"] = "%d-%d" % (lo + wid * span, lo + (wid + 1) * span - 1)
    ctx = Context(own_mariadb=True)
    try:
        while True:
            i = todo.get()
            if i is None:
                break
            done.put(("start", wid, i, None))
            done.put(("end", wid, i, run_one(ctx, *tests[i])))
    finally:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            ctx.close()
        done.put(("closed", wid, None, buf.getvalue()))


def run_parallel(tests, jobs, report):
    """Run tests in jobs worker processes (fork: the modules are imported
    once, here). A worker that dies fails the test it was running."""
    mp = multiprocessing.get_context("fork")
    todo, done = mp.Queue(), mp.Queue()
    for i in range(len(tests)):
        todo.put(i)
    for _ in range(jobs):
        todo.put(None)
    procs = [mp.Process(target=worker, args=(w, jobs, tests, todo, done)) for w in range(jobs)]
    for p in procs:
        p.start()
    running = {}                # worker -> test index
    closed = set()
    while len(closed) < jobs:
        try:
            kind, wid, i, payload = done.get(timeout=5)
        except Exception:       # queue.Empty: is every worker still there?
            for w, p in enumerate(procs):
                if w not in closed and not p.is_alive():
                    closed.add(w)
                    if w in running:
                        report(tests[running.pop(w)][0],
                               ("FAIL", 0.0, "     worker %d died (exit %s) in this test\n"
                                % (w, p.exitcode)))
            continue
        if kind == "start":
            running[wid] = i
        elif kind == "end":
            running.pop(wid, None)
            report(tests[i][0], payload)
        else:
            closed.add(wid)
            if payload:
                print(payload, end="", flush=True)
    for p in procs:
        p.join()


def main():
    args = sys.argv[1:]
    jobs = 1
    asan = "--asan" in args
    args = [a for a in args if a != "--asan"]
    if args[:1] == ["-j"] and len(args) >= 2:
        jobs, args = int(args[1]), args[2:]
    elif args[:1] and args[0].startswith("-j"):
        jobs, args = int(args[0][2:]), args[1:]
    here = os.path.dirname(os.path.abspath(__file__))
    filt = args
    mods = sorted(f[:-3] for f in os.listdir(here) if f.startswith("bb_") and f.endswith(".py"))
    tests = []
    for m in mods:
        mod = importlib.import_module(m)
        names = getattr(mod, "TESTS", [])
        plain_only = getattr(mod, "PLAIN_ONLY", set())
        stray = sorted(set(plain_only) - set(names))
        if stray:
            print("%s: PLAIN_ONLY names no test of TESTS: %s" % (m, ", ".join(stray)))
            return 1
        for name in names:
            full = "%s.%s" % (m, name)
            if filt and not any(f in full for f in filt):
                continue
            if asan and name in plain_only:
                continue
            tests.append((full, getattr(mod, name)))
    if not os.path.exists(bbutil.LEAFD):
        print("no leafd binary at %s: run make first" % bbutil.LEAFD)
        return 1
    with open(ORDER) as f:
        order = json.load(f).get(os.path.basename(bbutil.LEAFD), {})
    times = {}
    if jobs > 1:
        # Longest first, so that no long test starts last; a test not timed
        # yet counts as long.
        tests.sort(key=lambda t: -order.get(t[0], 1e9))
    passed = failed = 0
    skipped = []

    def report(full, result):
        nonlocal passed, failed
        verdict, secs, out = result
        print("%-4s %-60s %5.1fs" % (verdict, full, secs))
        print(out, end="", flush=True)
        times[full] = round(secs, 1)
        if verdict == "ok":
            passed += 1
        elif verdict == "skip":
            skipped.append(full)
        else:
            failed += 1

    t_all = time.time()
    if jobs > 1:
        run_parallel(tests, jobs, report)
    else:
        ctx = Context()
        try:
            for full, fn in tests:
                report(full, run_one(ctx, full, fn))
        finally:
            ctx.close()
    try:
        os.makedirs(os.path.dirname(TIMES), exist_ok=True)
        tmp = "%s.%d" % (TIMES, os.getpid())
        with open(tmp, "w") as f:
            json.dump(times, f, indent=0, sort_keys=True)
        os.replace(tmp, TIMES)
    except OSError:
        pass
    print("black-box tests: %.0fs" % (time.time() - t_all))
    if skipped:
        print("%d skipped (they cannot run here; under CI=1 they fail): %s"
              % (len(skipped), ", ".join(skipped)))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
