#!/usr/bin/env python3
"""stores.py: segment allocations per second, MariaDB against PostgreSQL,
in one run.

Starts a throwaway MariaDB (tests/lib/mariadb.sh: InnoDB's log written at
commit, not fsynced) and a throwaway PostgreSQL 15 (tests/lib/postgresql.sh:
fsync off, the WAL written at commit) on this machine, and runs
build/storebench against each: leafd's own store layer (store_alloc, what
the loader threads call: MySQL's UPDATE + SELECT in a transaction,
PostgreSQL's one UPDATE ... RETURNING), one connection per thread, each on
a tag of its own, for STORES_SECONDS (default DURATION or 5 s), at 1 and 4
threads, the two stores in alternating order over ROUNDS. Reported: the
median allocations/s, p50 and p99 of one allocation, errors (all rounds),
and PostgreSQL/MariaDB.

bench/bench.py runs it in the "stores" section; alone: python3 bench/stores.py.
"""
import os
import re
import shutil
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STOREBENCH = os.path.join(ROOT, "build", "storebench")
SECONDS = float(os.environ.get("STORES_SECONDS", os.environ.get("DURATION", "5")))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
THREADS = (1, 4)


def start(script, d, key):
    out = subprocess.run(["sh", os.path.join(ROOT, "tests", "lib", script), "start", d],
                         capture_output=True, env=dict(os.environ, LEAFD_ROOT=ROOT))
    m = re.search(r"^%s=(\S+)$" % key, out.stdout.decode(), re.M)
    if out.returncode != 0 or not m:
        raise RuntimeError("%s start: %s" % (script, out.stderr.decode()[-300:]))
    return m.group(1)


def one(kind, url, threads):
    out = subprocess.run([STOREBENCH, "-s", kind, "-u", url, "-t", str(threads),
                          "-d", str(SECONDS)], capture_output=True, timeout=SECONDS + 120)
    m = re.search(r"allocs_per_sec=([\d.]+) p50_ms=([\d.]+) p99_ms=([\d.]+) errors=(\d+)",
                  out.stdout.decode())
    if out.returncode != 0 or not m:
        raise RuntimeError("storebench %s: %s" % (kind, (out.stdout + out.stderr).decode()[-300:]))
    return {"rate": float(m.group(1)), "p50": float(m.group(2)), "p99": float(m.group(3)),
            "errors": int(m.group(4))}


def run(log=print):
    """Markdown rows (header included)."""
    work = tempfile.mkdtemp(prefix="leafd-bench-stores-")
    my_dir, pg_dir = os.path.join(work, "mariadb"), os.path.join(work, "postgresql")
    res = {}
    try:
        log("stores: starting MariaDB and PostgreSQL")
        urls = {"mysql": start("mariadb.sh", my_dir, "MYSQL_URL"),
                "postgresql": start("postgresql.sh", pg_dir, "PG_URL")}
        for r in range(ROUNDS):
            for t in THREADS:
                order = ("mysql", "postgresql") if r % 2 == 0 else ("postgresql", "mysql")
                for kind in order:
                    log("stores: round %d, %s, %d thread(s)" % (r + 1, kind, t))
                    res.setdefault((kind, t), []).append(one(kind, urls[kind], t))
    finally:
        subprocess.run(["sh", os.path.join(ROOT, "tests", "lib", "mariadb.sh"), "stop", my_dir],
                       capture_output=True)
        subprocess.run(["sh", os.path.join(ROOT, "tests", "lib", "postgresql.sh"), "stop", pg_dir],
                       capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    rows = ["| store | threads | allocations/s | p50 ms | p99 ms | errors | PostgreSQL/MariaDB |",
            "|---|---|---|---|---|---|---|"]
    for t in THREADS:
        med = {}
        for kind in ("mysql", "postgresql"):
            rs = res[(kind, t)]
            med[kind] = statistics.median(x["rate"] for x in rs)
            rows.append("| %s | %d | %s | %.3f | %.3f | %d | %s |" % (
                "MariaDB" if kind == "mysql" else "PostgreSQL", t, "{:,.0f}".format(med[kind]),
                statistics.median(x["p50"] for x in rs), statistics.median(x["p99"] for x in rs),
                sum(x["errors"] for x in rs),
                "%.2fx" % (med["postgresql"] / med["mysql"]) if kind == "postgresql" else ""))
    return rows


if __name__ == "__main__":
    print("\n".join(run()))
