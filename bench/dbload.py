#!/usr/bin/env python3
"""dbload.py: how many leaf_alloc transactions leafd makes at steady traffic.

One tag ('dbload', step 1000) in a throwaway MariaDB, or PostgreSQL 15;
leafd on it (segment mode only); a paced client asks for single IDs at
DBLOAD_RATE (2,000) IDs/s for DBLOAD_SECONDS (120). At every minute the
transactions are counted three ways: leafd's /metrics
(leafd_segment_loads_total and leafd_db_queries_total{kind="alloc"}) and the
database's own count of updates (MariaDB: SHOW GLOBAL STATUS LIKE
'Com_update'; PostgreSQL: pg_stat_user_tables.n_tup_upd of leaf_alloc,
which a session publishes a second or more after its last, so a load may
show a minute late); leafd is the only
writer meanwhile.
Leaf's rule doubles the step whenever a segment lasted under
segment.duration_ms (15 min), so the count falls as the run goes on; the
step reached is reported too.

bench/bench.py runs it with DBLOAD=1 (or make bench-dbload), on MariaDB
and then on PostgreSQL; alone: python3 bench/dbload.py [mysql|postgresql]
(starts and stops its own server).
"""
import http.client
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from bbutil import free_port  # noqa: E402  (one copy, shared with the tests)
SECONDS = int(os.environ.get("DBLOAD_SECONDS", "120"))
RATE = float(os.environ.get("DBLOAD_RATE", "2000"))
CLIENTS = 2
TAG = "dbload"


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    finally:
        c.close()

    def one(pattern):
        m = re.search(pattern, text, re.M)
        return int(m.group(1)) if m else 0
    return {"loads": one(r"^leafd_segment_loads_total (\d+)"),
            "alloc": one(r'^leafd_db_queries_total\{kind="alloc"\} (\d+)'),
            "step": one(r'^leafd_segment_step\{biz_tag="%s"\} (\d+)' % TAG)}


class Pacer:
    """CLIENTS threads, keep-alive, each at RATE/CLIENTS requests per second
    on a fixed schedule (a late request is sent at once, not skipped)."""

    def __init__(self, port):
        self.port = port
        self.ok = 0
        self.failed = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.client, args=(i,)) for i in range(CLIENTS)]

    def start(self):
        self.t0 = time.monotonic()
        for t in self.threads:
            t.start()

    def client(self, i):
        interval = CLIENTS / RATE
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        n = 0
        next_at = self.t0 + i * interval / CLIENTS
        while not self.stop.is_set():
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                c.request("GET", "/segment/" + TAG)
                r = c.getresponse()
                r.read()
                good = r.status == 200
            except (OSError, http.client.HTTPException):
                good = False
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            with self.lock:
                if good:
                    self.ok += 1
                else:
                    self.failed += 1
            n += 1
            next_at += interval
        c.close()

    def count(self):
        with self.lock:
            return self.ok, self.failed

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join()


class PostgreSQL:
    """A throwaway PostgreSQL 15 (tests/lib/postgresql.sh), as dbload needs
    it: url, flags, name, sql(), updates(), stop()."""
    name = "PostgreSQL"

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "postgresql")
        out = subprocess.run(["sh", os.path.join(ROOT, "tests", "lib", "postgresql.sh"),
                              "start", self.dir], capture_output=True,
                             env=dict(os.environ, LEAFD_ROOT=ROOT))
        m = re.search(r"^PG_URL=(\S+)$", out.stdout.decode(), re.M)
        if out.returncode != 0 or not m:
            raise RuntimeError("tests/lib/postgresql.sh start: %s" % out.stderr.decode()[-500:])
        self.url = m.group(1)
        self.flags = ["--segment.store=postgresql", "--segment.postgresql.url=%s" % self.url]

    def sql(self, query):
        out = subprocess.run(["psql", self.url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
                              "-c", query], capture_output=True)
        if out.returncode != 0:
            raise RuntimeError("psql: %s: %s" % (query, out.stderr.decode()))
        return out.stdout.decode()

    def updates(self):
        # leafd's session publishes its counts at a commit a second or more
        # after the last, or after 10 s idle: the last load may come a
        # minute late, never lost
        return int(self.sql("SELECT coalesce(sum(n_tup_upd), 0) FROM pg_stat_user_tables "
                            "WHERE relname = 'leaf_alloc'").strip() or 0)

    def stop(self):
        subprocess.run(["sh", os.path.join(ROOT, "tests", "lib", "postgresql.sh"), "stop",
                        self.dir], capture_output=True)


def run(leafd, workdir, mdb, log=lambda m: print(m, file=sys.stderr)):
    """mdb: bench.MariaDB (url, sql(), status()) or PostgreSQL above (url,
    flags, sql(), updates()). Returns the figures."""
    name = getattr(mdb, "name", "MariaDB")
    flags = getattr(mdb, "flags", ["--segment.mysql.url=%s" % mdb.url])
    updates = getattr(mdb, "updates", lambda: mdb.status("Com_update"))
    mdb.sql("DELETE FROM leaf_alloc WHERE biz_tag = '%s';"
            "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
            "VALUES ('%s', 1, 1000, 'bench: database load')" % (TAG, TAG))
    d = tempfile.mkdtemp(prefix="dbload-", dir=workdir)
    port = free_port()
    proc = subprocess.Popen([leafd, "--listen.port=%d" % port, "--threads=1"] + flags +
                            ["--leaf.segment.enable=true",
                             "--leaf.snowflake.enable=false",
                             "--log.file=%s" % os.path.join(d, "leafd.log")],
                            cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pacer = None
    try:
        end = time.time() + 30
        while True:
            try:
                metrics(port)
                break
            except OSError:
                if proc.poll() is not None or time.time() > end:
                    raise RuntimeError("leafd did not start on %s (see %s/leafd.log)" % (name, d))
                time.sleep(0.05)
        time.sleep(0.5)
        snaps = [(metrics(port), updates(), (0, 0))]
        log("dbload: %d s at %.0f IDs/s on %s" % (SECONDS, RATE, name))
        pacer = Pacer(port)
        pacer.start()
        marks = list(range(60, SECONDS, 60)) + [SECONDS]
        for mark in marks:
            time.sleep(max(0, pacer.t0 + mark - time.monotonic()))
            snaps.append((metrics(port), updates(), pacer.count()))
            log("  dbload: %d s: %s" % (mark, snaps[-1]))
        pacer.end()
        pacer = None
        minutes = []
        prev_mark = 0
        for (a, ua, ca), (b, ub, cb), mark in zip(snaps, snaps[1:], marks):
            minutes.append({"loads": b["loads"] - a["loads"], "alloc": b["alloc"] - a["alloc"],
                            "com_update": ub - ua,
                            "ids_per_s": (cb[0] - ca[0]) / (mark - prev_mark),
                            "failed": cb[1] - ca[1]})
            prev_mark = mark
        last = snaps[-1][0]
        return {"db": name, "seconds": SECONDS, "rate": RATE, "minutes": minutes,
                "step": last["step"],
                "start_loads": snaps[0][0]["loads"], "failed": snaps[-1][2][1]}
    finally:
        if pacer is not None:
            pacer.end()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()



if __name__ == "__main__":
    import shutil
    sys.path.insert(0, HERE)
    import bench
    work = tempfile.mkdtemp(prefix="leafd-dbload-")
    mdb = None
    try:
        mdb = PostgreSQL(work) if sys.argv[1:] == ["postgresql"] else bench.MariaDB(work)
        print(run(os.path.join(ROOT, "leafd"), work, mdb))
    finally:
        if mdb is not None:
            mdb.stop()
        shutil.rmtree(work, ignore_errors=True)
