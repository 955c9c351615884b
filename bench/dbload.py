#!/usr/bin/env python3
"""dbload.py: how many leaf_alloc transactions leafd makes at steady traffic.

One tag ('dbload', step 1000) in a throwaway MariaDB; leafd on it (segment
mode only); a paced client asks for single IDs at DBLOAD_RATE (2,000) IDs/s
for DBLOAD_SECONDS (120). At every minute the transactions are counted three
ways: leafd's /metrics (leafd_segment_loads_total and
leafd_db_queries_total{kind="alloc"}) and MariaDB's own
SHOW GLOBAL STATUS LIKE 'Com_update' (leafd is its only writer meanwhile).
Leaf's rule doubles the step whenever a segment lasted under
segment.duration_ms (15 min), so the count falls as the run goes on; the
step reached is reported too.

bench/bench.py runs it with DBLOAD=1 (or make bench-dbload); alone:
python3 bench/dbload.py (starts and stops its own MariaDB).
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


def run(leafd, workdir, mdb, log=lambda m: print(m, file=sys.stderr)):
    """mdb: bench.MariaDB (url, sql(), status()). Returns the figures."""
    mdb.sql("DELETE FROM leaf_alloc WHERE biz_tag = '%s';"
            "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
            "VALUES ('%s', 1, 1000, 'bench: database load')" % (TAG, TAG))
    d = tempfile.mkdtemp(prefix="dbload-", dir=workdir)
    port = free_port()
    proc = subprocess.Popen([leafd, "--listen.port=%d" % port, "--threads=1",
                             "--segment.mysql.url=%s" % mdb.url, "--leaf.segment.enable=true",
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
                    raise RuntimeError("leafd did not start on MariaDB (see %s/leafd.log)" % d)
                time.sleep(0.05)
        time.sleep(0.5)
        snaps = [(metrics(port), mdb.status("Com_update"), (0, 0))]
        log("dbload: %d s at %.0f IDs/s on MariaDB" % (SECONDS, RATE))
        pacer = Pacer(port)
        pacer.start()
        marks = list(range(60, SECONDS, 60)) + [SECONDS]
        for mark in marks:
            time.sleep(max(0, pacer.t0 + mark - time.monotonic()))
            snaps.append((metrics(port), mdb.status("Com_update"), pacer.count()))
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
        return {"seconds": SECONDS, "rate": RATE, "minutes": minutes, "step": last["step"],
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
        mdb = bench.MariaDB(work)
        print(run(os.path.join(ROOT, "leafd"), work, mdb))
    finally:
        if mdb is not None:
            mdb.stop()
        shutil.rmtree(work, ignore_errors=True)
