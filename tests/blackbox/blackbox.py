#!/usr/bin/env python3
"""blackbox.py: run leafd's black-box tests (tests/blackbox/bb_*.py) against the real
binary. Each test_* function takes a Context. Prints one line per test and a
closing "N passed, N failed" line; exits 1 if any test failed.

A test that cannot run here (no MariaDB, no ZooKeeper: bbutil.skip) is
reported as "skip" and listed apart; under CI=1 (or true) it fails instead.

    python3 tests/blackbox/blackbox.py              # all
    python3 tests/blackbox/blackbox.py segment      # tests whose module or name has "segment"
"""
import importlib
import os
import socket
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import bbutil  # noqa: E402


class Context:
    """Shared, lazily started servers for tests that only read/insert rows."""

    def __init__(self):
        self._wd = None
        self._mariadb = None

    def shared_mariadb(self):
        if self._mariadb is None and os.environ.get("LEAFD_TEST_MYSQL_PORT"):
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


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    filt = sys.argv[1:]
    mods = sorted(f[:-3] for f in os.listdir(here) if f.startswith("bb_") and f.endswith(".py"))
    tests = []
    for m in mods:
        mod = importlib.import_module(m)
        for name in getattr(mod, "TESTS", []):
            full = "%s.%s" % (m, name)
            if filt and not any(f in full for f in filt):
                continue
            tests.append((full, getattr(mod, name)))
    if not os.path.exists(bbutil.LEAFD):
        print("no leafd binary at %s: run make first" % bbutil.LEAFD)
        return 1
    ctx = Context()
    passed = failed = 0
    skipped = []
    t_all = time.time()
    try:
        for full, fn in tests:
            t0 = time.time()
            try:
                fn(ctx)
                passed += 1
                print("ok   %-60s %5.1fs" % (full, time.time() - t0), flush=True)
            except bbutil.Skipped as e:
                skipped.append(full)
                print("skip %-60s %5.1fs" % (full, time.time() - t0), flush=True)
                print("     %s" % e)
            except Exception as e:
                failed += 1
                print("FAIL %-60s %5.1fs" % (full, time.time() - t0), flush=True)
                if isinstance(e, bbutil.TestFailure):
                    print("     %s" % str(e).replace("\n", "\n     "))
                else:
                    traceback.print_exc()
    finally:
        ctx.close()
    print("black-box tests: %.0fs" % (time.time() - t_all))
    if skipped:
        print("%d skipped (they cannot run here; under CI=1 they fail): %s"
              % (len(skipped), ", ".join(skipped)))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
