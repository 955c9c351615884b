#!/usr/bin/env python3
"""failover.py: request latency while a segment database dies, against the
same without a failure, in one run.

Two throwaway MariaDB servers prepared by `leafd multi-db init`, one leafd
on both (segment mode only; tag 'fo' with step 100 and segment.max_step
2,000, so that loads are frequent and some must happen during the outage).
Each round runs wrk (-t1 -c16 --latency, FAILOVER_SECONDS, default 10 s)
twice: once untouched, once with the preferred database killed (-9) a third
of the way in (it is restarted after the run). Reported: p50, p99 and max
latency of each, the non-2xx answers, and the loads that failed over
(leafd_segment_db_failovers_total). Medians over ROUNDS.

bench/bench.py runs it in the "failover" section; alone:
python3 bench/failover.py.
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from bbutil import free_port  # noqa: E402
LEAFD = os.path.join(ROOT, "leafd")
MARIADB_SH = os.path.join(ROOT, "tests", "lib", "mariadb.sh")
SECONDS = int(os.environ.get("FAILOVER_SECONDS", "10"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
CONNS = 16


def latency_ms(s):
    m = re.match(r"([\d.]+)(us|ms|s)", s)
    v = float(m.group(1))
    return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v


class DB:
    def __init__(self, work, name):
        self.dir = os.path.join(work, name)
        out = subprocess.run(["sh", MARIADB_SH, "start", self.dir], capture_output=True,
                             env=dict(os.environ, LEAFD_ROOT=ROOT))
        env = dict(re.findall(r"^(MYSQL_\w+)=(\S+)$", out.stdout.decode(), re.M))
        if out.returncode != 0 or "MYSQL_URL" not in env:
            raise RuntimeError("mariadb.sh start: %s" % out.stderr.decode()[-300:])
        self.url = env["MYSQL_URL"]

    def pid(self):
        with open(os.path.join(self.dir, "pid")) as f:
            return int(f.read().strip())

    def sql(self, q):
        subprocess.run(["mariadb", "--no-defaults", "--socket=%s/sock" % self.dir,
                        "--user=root", "leaf", "-e", q], check=True, capture_output=True)

    def restart(self):
        subprocess.run(["sh", MARIADB_SH, "restart", self.dir], capture_output=True,
                       env=dict(os.environ, LEAFD_ROOT=ROOT))

    def stop(self):
        subprocess.run(["sh", MARIADB_SH, "stop", self.dir], capture_output=True)


def get_json(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
        return json.loads(r.read().decode())


def failovers(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    return sum(float(x) for x in re.findall(
        r'^leafd_segment_db_failovers_total\{db="\d+"\} (\S+)', text, re.M))


def wrk_run(port, seconds):
    out = subprocess.run(["wrk", "-t1", "-c%d" % CONNS, "-d%ds" % seconds, "--latency",
                          "http://127.0.0.1:%d/segment/fo" % port],
                         capture_output=True).stdout.decode()
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockerr = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {"p50": latency_ms(re.search(r"\s50%\s+(\S+)", out).group(1)),
            "p99": latency_ms(re.search(r"\s99%\s+(\S+)", out).group(1)),
            "max": latency_ms(re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", out).group(1)),
            "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "failed": (int(non2xx.group(1)) if non2xx else 0) +
                      (sum(int(x) for x in sockerr.groups()) if sockerr else 0)}


def run(log=print):
    work = tempfile.mkdtemp(prefix="leafd-failover-")
    dbs, proc = [], None
    res = {"calm": [], "kill": [], "failovers": [], "wait_ms": 3000}
    try:
        log("failover: starting two MariaDB servers")
        dbs = [DB(work, "db0"), DB(work, "db1")]
        dbs[0].sql("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('fo', 1, 100)")
        urls = [d.url for d in dbs]
        subprocess.run([LEAFD, "multi-db", "init"] + urls + ["--block-size=100000",
                        "--segment.max_step=2000"], check=True, capture_output=True)
        port = free_port()
        proc = subprocess.Popen([LEAFD, "--listen.port=%d" % port, "--log.level=warn",
                                 "--leaf.snowflake.enable=false",
                                 "--segment.mysql.urls=" + ",".join(urls),
                                 "--segment.max_step=2000", "--segment.lease_max=50000",
                                 "--segment.db_timeout_ms=1000",
                                 "--segment.wait_ms=%d" % res["wait_ms"],
                                 "--segment.refresh_ms=1000"],
                                cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                get_json(port, "/health")
                break
            except OSError:
                time.sleep(0.05)
        for r in range(ROUNDS):
            log("failover: round %d/%d" % (r + 1, ROUNDS))
            res["calm"].append(wrk_run(port, SECONDS))
            pref = [d["index"] for d in get_json(port, "/health")["segment"]["databases"]
                    if d["preferred"]]
            victim = dbs[pref[0] if pref else 0]
            before = failovers(port)
            t = threading.Timer(SECONDS / 3.0, lambda v=victim: os.kill(v.pid(), signal.SIGKILL))
            t.start()
            res["kill"].append(wrk_run(port, SECONDS))
            t.join()
            res["failovers"].append(failovers(port) - before)
            victim.restart()
            time.sleep(2)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
        for d in dbs:
            d.stop()
        subprocess.run(["rm", "-rf", work])
    out = {}
    for k in ("calm", "kill"):
        out[k] = {m: statistics.median(x[m] for x in res[k])
                  for m in ("p50", "p99", "max", "rps", "failed")}
        out[k]["max"] = max(x["max"] for x in res[k])
        out[k]["failed"] = sum(x["failed"] for x in res[k])
    out["failovers"] = statistics.median(res["failovers"])
    out["wait_ms"] = res["wait_ms"]
    out["rounds"] = ROUNDS
    return out


if __name__ == "__main__":
    r = run()
    print(json.dumps(r, indent=1))
