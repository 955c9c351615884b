"""scenario_cli.py: what the fault scenario scripts share around their
scenarios (failover.py, sentinel.py; leafd_ns.preflight checks root and
the gRPC client).

    args = parser(LEAFD).parse_args()       # --short --phase-secs --leafd ...
    ...                                     # leafd_ns.preflight
    return run_all(args, SCENARIOS, CONTROLS, Scenario, say)

say(msg), check(cond, msg): the story's lines, a failed check.
parser: the options every scenario script takes (--short, --phase-secs,
--leafd, --expect-duplicates, --only, --keep); add its own.
run_all: each scenario of --only (else every one, or CONTROLS with
--expect-duplicates) in turn: new_scenario(args, name) must give an object
with wd (its work directory), load (the running idcheck.Load or None),
summary (the closing line's figures, or None) and report(load) (stops the
load, prints its figures, sets summary); SCENARIOS[name](s) runs it. A
failure prints the figures up to it and keeps the work directory. The
closing table and the "N passed, N failed" line; 1 if any failed.
"""
import argparse
import shutil
import time

from bbutil import TestFailure

T0 = time.time()


def say(msg):
    """A line of the run's story, with the seconds since the script began."""
    print("[%6.1fs] %s" % (time.time() - T0, msg), flush=True)


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def parser(leafd):
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--phase-secs", type=float, default=None)
    ap.add_argument("--leafd", default=leafd)
    ap.add_argument("--expect-duplicates", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--keep", action="store_true")
    return ap


def run_all(args, scenarios, controls, new_scenario, say):
    names = args.only.split(",") if args.only else \
        list(controls if args.expect_duplicates else scenarios)
    failed, summaries = [], []
    for name in names:
        say("== %s%s (%s)" % (name, " (positive control)" if args.expect_duplicates else "",
                              args.leafd))
        t = time.time()
        s = new_scenario(args, name)
        try:
            scenarios[name](s)
            say("== %s: ok in %.0fs" % (name, time.time() - t))
        except Exception as e:
            failed.append(name)
            say("FAIL %s: %s: %s" % (name, type(e).__name__, e))
            if s.load is not None:        # the figures up to the failure
                load, s.load = s.load, None
                s.report(load)
        finally:                          # interrupted too (SIGTERM: SystemExit)
            if s.load is not None:
                s.load.stop_ev.set()
            if args.keep or name in failed:
                say("  (kept %s)" % s.wd)
            else:
                shutil.rmtree(s.wd, ignore_errors=True)
        if s.summary:
            summaries.append("%-10s %s%s" % (name, "FAILED: " if name in failed else "",
                                             s.summary))
    print("== figures%s (%s):" % (" of the positive control" if args.expect_duplicates else "",
                                  args.leafd))
    for line in summaries:
        print("   " + line)
    print("%d passed, %d failed" % (len(names) - len(failed), len(failed)), flush=True)
    return 1 if failed else 0
