#!/usr/bin/env python3
"""dbtls.py: what TLS to MySQL costs leafd, against the same leafd on a
clear-text URL, in one run.

One throwaway MariaDB with a throwaway CA (--ssl-ca/--ssl-cert/--ssl-key, as
bb_dbtls makes it); tag 'bt' with step 10 and segment.max_step 10, so that
nearly every request waits for a leaf_alloc transaction: the figure is
database-bound, the TLS records of every statement included. Each round
starts leafd twice, on `mysql://root@127.0.0.1:P/leaf` and on the same URL
with `?ssl_mode=verify_identity&ssl_ca=...`, in alternating order, runs wrk
(-t1 -c4, DBTLS_SECONDS, default DURATION or 5 s) on /segment/bt, and reads
leafd_segment_loads_total. Reported: medians over ROUNDS of requests/s,
loads/s and p99, the failed requests (non-2xx and socket errors, all
rounds), and the TLS/clear ratio of requests/s.

bench/bench.py runs it in the "dbtls" section; alone: python3 bench/dbtls.py.
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "tests", "blackbox"))
from bbutil import free_port  # noqa: E402
from bb_dbtls import Pki  # noqa: E402  (the throwaway CA of the tests)
LEAFD = os.path.join(ROOT, "leafd")
MARIADB_SH = os.path.join(ROOT, "tests", "lib", "mariadb.sh")
SECONDS = int(os.environ.get("DBTLS_SECONDS", os.environ.get("DURATION", "5")))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
CONNS = 4


class Dir:
    def __init__(self, path):
        self.path = path


def latency_ms(s):
    m = re.match(r"([\d.]+)(us|ms|s)", s)
    v = float(m.group(1))
    return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v


def loads(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    return int(re.search(r"^leafd_segment_loads_total (\d+)", text, re.M).group(1))


def one(url, work, name):
    """leafd on url: wrk for SECONDS; requests/s, loads/s, p99 ms."""
    port = free_port()
    log = open(os.path.join(work, name + ".log"), "ab")
    proc = subprocess.Popen([LEAFD, "--listen.port=%d" % port, "--log.level=warn",
                             "--leaf.segment.enable=true", "--leaf.snowflake.enable=false",
                             "--segment.mysql.url=" + url, "--segment.max_step=10"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        end = time.time() + 30
        while True:
            try:
                r = urllib.request.urlopen("http://127.0.0.1:%d/segment/bt" % port, timeout=10)
                if r.status == 200:
                    break
            except OSError:
                pass
            if time.time() > end or proc.poll() is not None:
                raise RuntimeError("leafd on %s served no ID; see %s.log" % (name, name))
            time.sleep(0.05)
        before = loads(port)
        out = subprocess.run(["wrk", "-t1", "-c%d" % CONNS, "-d%ds" % SECONDS, "--latency",
                              "http://127.0.0.1:%d/segment/bt" % port],
                             capture_output=True).stdout.decode()
        after = loads(port)
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        sockerr = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), "
                            r"timeout (\d+)", out)
        return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
                "failed": (int(non2xx.group(1)) if non2xx else 0) +
                          (sum(int(x) for x in sockerr.groups()) if sockerr else 0),
                "loads": (after - before) / SECONDS,
                "p99": latency_ms(re.search(r"\s99%\s+(\S+)", out).group(1))}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def run(log=print):
    """Markdown rows (header included)."""
    work = tempfile.mkdtemp(prefix="leafd-bench-dbtls-")
    db = os.path.join(work, "mariadb")
    res = {"clear": [], "tls": []}
    try:
        pki = Pki(Dir(work))
        os.makedirs(db)
        with open(os.path.join(db, "args"), "w") as f:
            f.write("--ssl-ca=%s --ssl-cert=%s --ssl-key=%s\n" % (pki.ca, pki.server, pki.server_key))
        log("dbtls: starting MariaDB with TLS")
        out = subprocess.run(["sh", MARIADB_SH, "start", db], capture_output=True,
                             env=dict(os.environ, LEAFD_ROOT=ROOT))
        m = re.search(r"^MYSQL_PORT=(\d+)$", out.stdout.decode(), re.M)
        if out.returncode != 0 or not m:
            raise RuntimeError("mariadb.sh start: %s" % out.stderr.decode()[-300:])
        port = int(m.group(1))
        subprocess.run(["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1", "-P%d" % port,
                        "leaf", "-e", "INSERT INTO leaf_alloc (biz_tag, max_id, step) "
                        "VALUES ('bt', 1, 10)"], check=True, capture_output=True)
        clear = "mysql://root@127.0.0.1:%d/leaf" % port
        urls = {"clear": clear,
                "tls": clear + "?ssl_mode=verify_identity&ssl_ca=" + pki.ca}
        for r in range(ROUNDS):
            for kind in (("clear", "tls") if r % 2 == 0 else ("tls", "clear")):
                log("dbtls: round %d, %s" % (r + 1, kind))
                res[kind].append(one(urls[kind], work, kind))
    finally:
        subprocess.run(["sh", MARIADB_SH, "stop", db], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    def med(kind, key):
        return statistics.median(x[key] for x in res[kind])
    rows = ["| leafd -> MariaDB, tag step 10 (a load every ~10 IDs), wrk -c%d %d s, "
            "medians of %d rounds | requests/s | loads/s | p99 ms | failed | TLS / clear |"
            % (CONNS, SECONDS, ROUNDS),
            "|---|---:|---:|---:|---:|---:|"]
    for kind, label in (("clear", "clear text (baseline)"),
                        ("tls", "TLS, ssl_mode=verify_identity")):
        ratio = "" if kind == "clear" else "%.2fx" % (med("tls", "rps") / med("clear", "rps"))
        rows.append("| %s | %.0f | %.0f | %.2f | %d | %s |" % (
            label, med(kind, "rps"), med(kind, "loads"), med(kind, "p99"),
            sum(x["failed"] for x in res[kind]), ratio))
    return rows


if __name__ == "__main__":
    print("\n".join(run(lambda s: print(s, file=sys.stderr, flush=True))))
