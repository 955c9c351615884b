#!/usr/bin/env python3
"""bench.py: leafd against its baselines and peers, in one run, one table.

What it measures (all servers on loopback, started here on free ports in a
temp dir and stopped by PID; medians over interleaved rounds, so every target
sees the same machine noise):

  HTTP       wrk keep-alive: nginx `return 200` (the baseline), leafd
             /segment/demo, ?count=100, ?count=1000, /snowflake,
             /snowflake?count=4096, /uuid, /ulid and their ?count=1000,
             /serial/demo (single), with 1 and 2 threads
             (nginx workers / leafd I/O threads); req/s, IDs/s, p50, p99 and
             the server's CPU time per request (user+sys from /proc).
  RESP       redis-benchmark -c CONNS against leafd's Redis-protocol
             listener: INCR demo without and with -P 16, and LEAF.SEGMENT
             demo 1000, beside redis-server's INCR in the same run; ops/s,
             p50, p99 and the server's CPU per operation. INCR again with
             http.busy_poll_us=BUSY_POLL_US (a second leafd).
  peers      Redis INCR (redis-benchmark, with and without -P 16, same
             connection count); MariaDB one transaction per ID (UPDATE max_id
             = max_id + 1; SELECT) and MariaDB SEQUENCE NEXTVAL
             (build/dbclient, DBCONNS connections).
  failover   two MariaDB servers (segment.mysql.urls), wrk on a tag that
             loads often: latency p50/p99/max untouched, and with the
             preferred database killed -9 mid-run; loads failed over
             (bench/failover.py).
  dbtls      leafd on a database-bound tag over TLS to MariaDB against the
             same on a clear-text URL (bench/dbtls.py).
  stores     segment allocations/s through leafd's store layer
             (build/storebench), MariaDB against PostgreSQL, 1 and 4
             connections (bench/stores.py).
  in process build/microbench: segment_take (and snowflake_next) IDs/s per
             thread, 1 and 2 threads.
  client     libleafd-client (build/clientbench) against a leafd started
             here: leafd_next IDs/s per thread (1 and 2 threads), its HTTP
             requests per million IDs; and leases/s over HTTP (wrk on
             /segment/demo/lease?size=1000, in the http section). Baselines
             in the same run: segment_take (microbench) and nginx.
  footprint  leafd's RSS with 10,000 tags loaded (bench/footprint.py), and the
             time from fork to the first ID served on the embedded default.
  TLS        HTTPS keep-alive and full handshakes/s, leafd against nginx over
             HTTPS with the same certificate (bench/tls.py).
  conceal    concealed values against plain ones (issue 30): one leafd
             serving a plain and a concealed segment tag and a plain and a
             concealed serial code; wrk on single IDs and ?count=1000 of
             each, plain and concealed back to back in every round;
             concealed/plain req/s (goal >= 0.9 for single IDs), IDs/s, and
             conceal_ids' ns per ID in process (bench/conceal.py; alone:
             make bench-conceal).
  DB load    opt-in (DBLOAD=1, or make bench-dbload): leaf_alloc transactions
             per minute at a steady 2,000 IDs/s for 2 minutes against MariaDB,
             then 2 minutes against PostgreSQL 15 (bench/dbload.py).

    make bench                          # defaults: 3 rounds of 5 s, ~4 min
    DBLOAD=1 make bench                 # plus the 2-minute database-load run
    ROUNDS=5 DURATION=10 python3 bench/bench.py
    ONLY=http,micro python3 bench/bench.py   # sections: http resp peers failover micro
                                             # client startup footprint dbload multi memcache h2 grpc dbtls tls
                                             # stores conceal

Environment: ROUNDS (3), DURATION (5 s per wrk/peer run), CONNS (64),
THREADS (1,2), BUSY_POLL_US (50), DBCONNS (16), STARTUP_RUNS (5), FOOTPRINT_TAGS (10000),
DBLOAD (0), DBLOAD_SECONDS (120), DBLOAD_RATE (2000).
"""
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from bbutil import free_port  # noqa: E402  (one copy, shared with the tests)
LEAFD = os.path.join(ROOT, "leafd")
MICROBENCH = os.path.join(ROOT, "build", "microbench")
DBCLIENT = os.path.join(ROOT, "build", "dbclient")
CLIENTBENCH = os.path.join(ROOT, "build", "clientbench")
MARIADB_SH = os.path.join(ROOT, "tests", "lib", "mariadb.sh")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = int(os.environ.get("DURATION", "5"))
CONNS = int(os.environ.get("CONNS", "64"))
BUSY_POLL_US = int(os.environ.get("BUSY_POLL_US", "50"))
THREADS = os.environ.get("THREADS", "1,2")
DBCONNS = int(os.environ.get("DBCONNS", "16"))
STARTUP_RUNS = int(os.environ.get("STARTUP_RUNS", "5"))
DBLOAD = os.environ.get("DBLOAD", "0") not in ("", "0", "no", "false")
ONLY = set(x for x in os.environ.get("ONLY", "").split(",") if x)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def want(section):
    if ONLY:
        return section in ONLY
    return section != "dbload" or DBLOAD


def log(msg):
    print(msg, file=sys.stderr, flush=True)



def wait_port(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("nothing listens on %d" % port)


def cpu_ticks(pids):
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return total


def children(pid):
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], stdout=subprocess.PIPE).stdout
        return [int(x) for x in out.split()]
    except FileNotFoundError:
        return []


def http_get(port, path, timeout=5):
    """One GET on a fresh connection: (status, body)."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        c.close()


def stop_proc(proc, sig=signal.SIGTERM, timeout=15):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def parse_latency(s):
    m = re.match(r"([\d.]+)(us|ms|s)", s)
    v, u = float(m.group(1)), m.group(2)
    return v / 1000.0 if u == "us" else v if u == "ms" else v * 1000.0


def wrk(url, pids, ids_per_req=1, warmup=0):
    if warmup:
        subprocess.run(["wrk", "-t1", "-c%d" % CONNS, "-d%ds" % warmup, url],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    before = cpu_ticks(pids)
    out = subprocess.run(["wrk", "-t1", "-c%d" % CONNS, "-d%ds" % DURATION, "--latency", url],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode()
    after = cpu_ticks(pids)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    p50 = parse_latency(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = parse_latency(re.search(r"\s99%\s+(\S+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock_err = re.search(r"Socket errors: (.*)", out)
    if errors or sock_err:
        log("  warning: %s: %s %s" % (url, errors and errors.group(0), sock_err and sock_err.group(0)))
    cpu_us = (after - before) / CLK_TCK * 1e6 / max(reqs, 1)
    # Only answers with IDs count as IDs (a 503 under overload has none).
    good = 1.0 - (int(errors.group(1)) / reqs if errors and reqs else 0.0)
    return {"rps": rps, "p50": p50, "p99": p99, "cpu_us": cpu_us,
            "ids": rps * good * ids_per_req, "non2xx": 1.0 - good}


# ---- servers ----

class Nginx:
    """nginx answering `return 200` with a 17-byte body: over h2c with h2,
    over HTTPS with tls=(certificate file, key file)."""

    def __init__(self, workdir, workers, h2=False, tls=None):
        self.dir = os.path.join(workdir, "nginx-%d%s%s" % (workers, "-h2c" if h2 else "",
                                                           "-tls" if tls else ""))
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        ssl = ""
        if tls:
            ssl = ("ssl_protocols TLSv1.2 TLSv1.3;\n        ssl_certificate %s;\n"
                   "        ssl_certificate_key %s;" % tls)
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""
worker_processes %d;
daemon off;
pid %s/nginx.pid;
error_log %s/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    server {
        listen 127.0.0.1:%d%s%s reuseport;
        %s
        location / { default_type text/plain; return 200 "1234567890123456\\n"; }
    }
}
""" % (workers, self.dir, self.dir, self.port, " http2" if h2 else "",
       " ssl" if tls else "", ssl))
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        time.sleep(0.2)
        self.pids = [self.proc.pid] + children(self.proc.pid)

    def stop(self):
        stop_proc(self.proc, signal.SIGQUIT, 10)


class Leafd:
    def __init__(self, workdir, threads, name=None, extra=()):
        self.dir = os.path.join(workdir, name or "leafd-%d" % threads)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.rport = free_port()
        self.proc = subprocess.Popen([LEAFD, "--listen.port=%d" % self.port,
                                      "--resp.listen.port=%d" % self.rport,
                                      "--threads=%d" % threads,
                                      "--segment.count_max=100000",
                                      "--log.level=warn"] + list(extra),
                                     cwd=self.dir, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_port(self.port)
        self.pids = [self.proc.pid]
        # Warm up: load the tag and grow its step.
        subprocess.run(["curl", "-s", "-o", "/dev/null",
                        "http://127.0.0.1:%d/segment/demo?count=1000" % self.port])

    def stop(self):
        stop_proc(self.proc)


def redis_benchmark(port, pids, args, n, ids_per_op=1):
    """One redis-benchmark run of n operations (args: -P and the command)."""
    before = cpu_ticks(pids)
    out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port),
                          "-c", str(CONNS), "-n", str(n), "--csv"] + args,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode()
    after = cpu_ticks(pids)
    m = re.search(r'^"[^"]+","([\d.]+)","([\d.]+)","([\d.]+)","([\d.]+)","([\d.]+)","([\d.]+)"',
                  out, re.M)
    if m is None:
        raise RuntimeError("redis-benchmark said: %s" % out[-500:])
    rps = float(m.group(1))
    return {"rps": rps, "ids": rps * ids_per_op, "p50": float(m.group(4)),
            "p99": float(m.group(6)), "cpu_us": (after - before) / CLK_TCK * 1e6 / n}


class RespTarget:
    """redis-benchmark against leafd's RESP listener, calibrated to DURATION."""

    def __init__(self, lf, args, ids_per_op=1):
        self.lf, self.args, self.per, self.n = lf, args, ids_per_op, None

    def run(self):
        if self.n is None:
            r = redis_benchmark(self.lf.rport, self.lf.pids, self.args, 20000, self.per)
            self.n = max(10000, int(r["rps"] * DURATION))
        return redis_benchmark(self.lf.rport, self.lf.pids, self.args, self.n, self.per)


class Redis:
    """A throwaway redis-server: no persistence, loopback, a free port."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "redis")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port),
                                      "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", self.dir,
                                      "--daemonize", "no",
                                      "--logfile", os.path.join(self.dir, "redis.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        self.pids = [self.proc.pid]
        self.n = {}             # requests per run, calibrated to DURATION

    def bench(self, pipeline):
        n = self.n.get(pipeline)
        if n is None:           # calibrate: a short run gives the rate
            r = self._run(pipeline, 20000 * pipeline)
            n = self.n[pipeline] = max(10000, int(r["rps"] * DURATION))
        return self._run(pipeline, n)

    def _run(self, pipeline, n):
        return redis_benchmark(self.port, self.pids, ["-P", str(pipeline), "INCR", "k"], n)

    def stop(self):
        stop_proc(self.proc)


class MariaDB:
    """A throwaway MariaDB from tests/lib/mariadb.sh (start DIR / stop DIR)."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "mariadb")
        out = subprocess.run(["sh", MARIADB_SH, "start", self.dir], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=dict(os.environ, LEAFD_ROOT=ROOT))
        env = dict(re.findall(r"^(MYSQL_\w+)=(\S+)$", out.stdout.decode(), re.M))
        if out.returncode != 0 or "MYSQL_URL" not in env:
            raise RuntimeError("tests/lib/mariadb.sh start failed: %s" % out.stderr.decode()[-500:])
        self.url = env["MYSQL_URL"]
        self.port = int(env["MYSQL_PORT"])
        with open(os.path.join(self.dir, "pid")) as f:
            self.pids = [int(f.read().strip())]

    def sql(self, query):
        out = subprocess.run(["mariadb", "--no-defaults", "--socket=%s/sock" % self.dir,
                              "--user=root", "-N", "-B", "leaf", "-e", query],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if out.returncode != 0:
            raise RuntimeError("mariadb: %s: %s" % (query, out.stderr.decode()))
        return out.stdout.decode()

    def status(self, name):
        out = self.sql("SHOW GLOBAL STATUS LIKE '%s'" % name).split()
        return int(out[1])

    def perid_setup(self):
        self.sql("DELETE FROM leaf_alloc WHERE biz_tag = 'bench-perid';"
                 "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
                 "VALUES ('bench-perid', 1, 1, 'bench: one transaction per ID');"
                 "DROP SEQUENCE IF EXISTS bench_seq; CREATE SEQUENCE bench_seq")

    def perid(self, mode):
        before = cpu_ticks(self.pids)
        out = subprocess.run([DBCLIENT, "-m", mode, "-P", str(self.port), "-c", str(DBCONNS),
                              "-d", str(DURATION)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT).stdout.decode()
        after = cpu_ticks(self.pids)
        m = re.search(r"RESULT \S+ conns=\d+ ids=(\d+) seconds=\S+ ids_per_sec=([\d.]+) "
                      r"p50_ms=([\d.]+) p99_ms=([\d.]+) errors=(\d+)", out)
        if m is None:
            raise RuntimeError("dbclient said: %s" % out[-500:])
        if int(m.group(5)):
            log("  warning: dbclient %s: %s errors" % (mode, m.group(5)))
        ids = int(m.group(1))
        rate = float(m.group(2))
        return {"rps": rate, "ids": rate, "p50": float(m.group(3)), "p99": float(m.group(4)),
                "cpu_us": (after - before) / CLK_TCK * 1e6 / max(ids, 1)}

    def stop(self):
        subprocess.run(["sh", MARIADB_SH, "stop", self.dir], stdout=subprocess.DEVNULL)


def microbench():
    """One run of build/microbench: {(name, threads): (per_thread, total, limit)}."""
    out = subprocess.run([MICROBENCH, "-r", "3", "-d", "0.3"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    if out.returncode != 0:
        log("  warning: microbench: %s" % out.stderr.decode().strip())
    res = {}
    for m in re.finditer(r"^RESULT (\S+) threads=(\d+) per_thread=(\d+) total=(\d+) limit=(\d+)",
                         out.stdout.decode(), re.M):
        res[(m.group(1), int(m.group(2)))] = {"per": float(m.group(3)), "total": float(m.group(4)),
                                              "limit": float(m.group(5))}
    return res


def clientbench(work, threads):
    """One run of build/clientbench per thread count against a fresh leafd:
    {threads: {"per", "total", "http_per_million"}}."""
    lf = Leafd(work, 2, "leafd-client")
    res = {}
    try:
        for n in threads:
            out = subprocess.run([CLIENTBENCH, "http://127.0.0.1:%d" % lf.port, "demo", str(n),
                                  str(min(DURATION, 3))], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
            m = re.search(r"^RESULT client threads=(\d+) per_thread=(\d+) total=(\d+) "
                          r"http_per_million=([\d.]+)", out.stdout.decode(), re.M)
            if out.returncode != 0 or m is None:
                log("  warning: clientbench: %s" % out.stderr.decode().strip())
                continue
            res[n] = {"per": float(m.group(2)), "total": float(m.group(3)),
                      "http_per_million": float(m.group(4))}
    finally:
        lf.stop()
    return res


# ---- the machine and its noise ----

def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%d cores, %s, Linux %s" % (os.cpu_count(), model, os.uname().release)


def cpu_stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v  # user nice system idle iowait irq softirq steal ...


def own_pids():
    """This process and all its descendants (the servers and clients we run)."""
    pids, todo = set(), [os.getpid()]
    while todo:
        p = todo.pop()
        pids.add(p)
        todo += [c for c in children(p) if c not in pids]
    return pids


# ---- the table ----

def fmt_int(v):
    return "{:,.0f}".format(v)


def fmt_rate(v):
    if v >= 1e9:
        return "%.2fG" % (v / 1e9)
    if v >= 1e6:
        return "%.1fM" % (v / 1e6)
    return fmt_int(v)


def med(rs, key):
    return statistics.median(r[key] for r in rs)


def batch_spread(rs, per):
    """A batch row's vs-base text: the rounds' lowest and highest IDs/s,
    and the IDs one second of the server's CPU gives (per / cpu per request).
    A 1,000-UUID answer is ~37 KB, and wrk and the server's threads share the
    cores copying it: on a busy machine the IDs/s of one target moved 3-6x
    between rounds of one run while its server CPU per ID moved ~10% (leafd
    made 1 recv, 1 send and 4 getrandom per answer, no futex, and under 0.1
    context switches per request in fast and slow rounds alike), so the
    second figure is the one to compare across runs."""
    lo = min(r["ids"] for r in rs)
    hi = max(r["ids"] for r in rs)
    cpu = med(rs, "cpu_us")
    per_cpu = per / (cpu * 1e-6) if cpu > 0 else 0
    return "%s-%s, %s/cpu-s" % (fmt_rate(lo), fmt_rate(hi), fmt_rate(per_cpu))


COLS = "%-44s %3s %5s %11s %11s %8s %8s %9s  %-24s %-14s %s"


def row(name, thr="", conns="", ids="", rps="", p50="", p99="", cpu="", ratio="", goal="", met=""):
    return COLS % (name, thr, conns, ids, rps, p50, p99, cpu, ratio, goal, met)


def main():
    if not os.access(LEAFD, os.X_OK):
        print("bench: build leafd first (make leafd)")
        return 1
    missing = [t for t in ("wrk", "nginx", "redis-server", "redis-benchmark", "mariadbd", "mariadb")
               if shutil.which(t) is None and not os.path.exists("/usr/sbin/" + t)]
    if missing:
        log("bench: %s missing (sh .ci/deps.sh bench); those rows are skipped" % " ".join(missing))
    for b in (MICROBENCH, DBCLIENT, CLIENTBENCH):
        if not os.access(b, os.X_OK):
            log("bench: %s missing (make %s)" % (b, os.path.relpath(b, ROOT)))
    have = lambda t: t not in missing  # noqa: E731
    os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"

    sys.path.insert(0, HERE)
    import footprint
    import dbload
    import failover
    import dbtls
    import stores

    t_start = time.time()
    load_start = os.getloadavg()
    stat_start = cpu_stat()
    work = tempfile.mkdtemp(prefix="leafd-bench-")
    threads = [int(t) for t in THREADS.split(",")]
    results = {}
    micro = []
    client = []
    startup = []
    fp = db_load = fo = mc_lines = h2_rows = grpc_rows = db_tls = store_rows = None
    conceal_rows = None
    tls_rows = []
    servers = []
    mdb = None
    # (key, label, kind, thr, conns, ids_per_req, run)
    targets = []
    try:
        if want("http") and have("wrk") and have("nginx"):
            for n in threads:
                ng = Nginx(work, n)
                lf = Leafd(work, n)
                servers += [ng, lf]
                base = "http://127.0.0.1:%d" % lf.port
                for key, url, pids, per in (
                        ("nginx", "http://127.0.0.1:%d/" % ng.port, ng.pids, 1),
                        ("single", base + "/segment/demo", lf.pids, 1),
                        ("batch100", base + "/segment/demo?count=100", lf.pids, 100),
                        ("batch1000", base + "/segment/demo?count=1000", lf.pids, 1000),
                        ("sfsingle", base + "/snowflake", lf.pids, 1),
                        ("sfbatch", base + "/snowflake?count=4096", lf.pids, 4096),
                        ("uuidsingle", base + "/uuid", lf.pids, 1),
                        ("uuidbatch", base + "/uuid?count=1000", lf.pids, 1000),
                        ("ulidsingle", base + "/ulid", lf.pids, 1),
                        ("ulidbatch", base + "/ulid?count=1000", lf.pids, 1000),
                        ("serialsingle", base + "/serial/demo", lf.pids, 1),
                        ("lease1000", base + "/segment/demo/lease?size=1000", lf.pids, 1000)):
                    warm = 2 if key == "sfbatch" else 0
                    targets.append(((key, n), (lambda u=url, p=pids, k=per, w=warm:
                                               wrk(u, p, k, w))))
        if want("resp") and have("redis-benchmark"):
            lfs = {}
            for n in threads:
                lf = next((x for x in servers if isinstance(x, Leafd) and
                           x.dir.endswith("leafd-%d" % n)), None)
                if lf is None:
                    lf = Leafd(work, n)
                    servers.append(lf)
                lfs[n] = lf
                for key, args, per in (("resp_incr", ["-P", "1", "INCR", "demo"], 1),
                                       ("resp_incr16", ["-P", "16", "INCR", "demo"], 1),
                                       ("resp_seg1000", ["-P", "1", "LEAF.SEGMENT", "demo",
                                                         "1000"], 1000)):
                    targets.append(((key, n), RespTarget(lf, args, per).run))
                # The same with http.busy_poll_us: the I/O thread polls
                # before it sleeps (more CPU, fewer wakeups).
                bp = Leafd(work, n, name="leafd-busypoll-%d" % n,
                           extra=["--http.busy_poll_us=%d" % BUSY_POLL_US])
                servers.append(bp)
                for key, args in (("resp_incr_bp", ["-P", "1", "INCR", "demo"]),
                                  ("resp_incr16_bp", ["-P", "16", "INCR", "demo"])):
                    targets.append(((key, n), RespTarget(bp, args, 1).run))
        if (want("peers") or want("resp")) and have("redis-server") and have("redis-benchmark"):
            rd = Redis(work)
            servers.append(rd)
            targets.append((("redis", 1), lambda: rd.bench(1)))
            targets.append((("redis", 16), lambda: rd.bench(16)))
        if want("peers"):
            if have("mariadbd") and have("mariadb") and os.access(DBCLIENT, os.X_OK):
                log("starting MariaDB")
                mdb = MariaDB(work)
                mdb.perid_setup()
                targets.append((("db_alloc", DBCONNS), lambda: mdb.perid("alloc")))
                targets.append((("db_seq", DBCONNS), lambda: mdb.perid("seq")))
        for r in range(ROUNDS):
            log("round %d/%d" % (r + 1, ROUNDS))
            for key, run in targets:
                results.setdefault(key, []).append(run())
            if want("micro") and os.access(MICROBENCH, os.X_OK):
                micro.append(microbench())
            if want("client") and os.access(CLIENTBENCH, os.X_OK):
                client.append(clientbench(work, threads))
            if want("startup"):
                for i in range(STARTUP_RUNS):
                    if i % ROUNDS == r:
                        startup.append(footprint.first_id(LEAFD, work))
        if want("failover") and have("wrk") and have("mariadbd") and have("mariadb"):
            fo = failover.run(log)
        if want("memcache"):
            import memcache  # bench/memcache.py: leafd vs memcached, same client
            mc_lines = memcache.run(log)
        if want("h2"):
            import h2
            h2_rows = h2.run(work)
        if want("dbtls") and have("wrk") and have("mariadbd") and have("mariadb"):
            db_tls = dbtls.run(log)
        if (want("stores") and have("mariadbd") and os.access(stores.STOREBENCH, os.X_OK)
                and os.access("/usr/lib/postgresql/15/bin/postgres", os.X_OK)):
            store_rows = stores.run(log)
        if want("tls") and have("wrk") and have("nginx"):
            import tls as tls_bench
            tls_rows = tls_bench.run(log)
        if want("footprint"):
            log("footprint: %s tags" % fmt_int(footprint.TAGS))
            fp = footprint.footprint(LEAFD, work)
        if want("grpc") and have("nginx") and shutil.which("h2load"):
            import grpc as grpc_bench           # bench/grpc.py: NextSegment vs nginx h2c
            grpc_rows = grpc_bench.run(LEAFD, work, log, ROUNDS, DURATION, threads)
        if want("conceal") and have("wrk"):
            import conceal                      # bench/conceal.py: concealed vs plain
            conceal_rows = conceal.run(LEAFD, work, log)
        if want("dbload") and have("mariadbd") and have("mariadb"):
            if mdb is None:
                log("starting MariaDB")
                mdb = MariaDB(work)
            db_load = [dbload.run(LEAFD, work, mdb, log)]
            if have("psql") and os.path.exists("/usr/lib/postgresql/15/bin/postgres"):
                pg = dbload.PostgreSQL(work)
                try:
                    db_load.append(dbload.run(LEAFD, work, pg, log))
                finally:
                    pg.stop()
    finally:
        for s in servers:
            s.stop()
        if mdb is not None:
            mdb.stop()
        shutil.rmtree(work, ignore_errors=True)

    elapsed = time.time() - t_start
    stat_end = cpu_stat()
    d = [b - a for a, b in zip(stat_start, stat_end)]
    total = sum(d[:8]) or 1
    steal = 100.0 * d[7] / total if len(d) > 7 else 0.0

    out = []
    p = out.append
    p("")
    p("leafd benchmark, %s" % time.strftime("%Y-%m-%d %H:%M"))
    p("machine: %s" % machine())
    p("noise: load average %.2f at start, %.2f at end; steal %.1f%% of CPU time; run took %.0f s"
      % (load_start[0], os.getloadavg()[0], steal, elapsed))
    p("HTTP: wrk -t1 -c%d -d%ds keep-alive on loopback, wrk and server sharing the cores; peers: "
      "redis-benchmark -c%d," % (CONNS, DURATION, CONNS))
    p("MariaDB clients %d connections. Medians of %d interleaved rounds. cpu/req = server "
      "user+sys CPU per request (per ID for peers)." % (DBCONNS, ROUNDS))
    p("IDs/s counts only 200 answers. /snowflake?count=4096 runs 2 s unmeasured first, so "
      "the 1 s leafd may borrow ahead of the clock is used up: the figure is the sustained rate.")
    p("")
    hdr = row("figure", "thr", "conns", "IDs/s", "req/s", "p50 ms", "p99 ms", "cpu/req",
              "vs base", "goal", "met")
    p(hdr)
    p("-" * len(hdr))

    def http_row(label, key, n, ratio="", goal="", met=""):
        rs = results[(key, n)]
        p(row(label, n, CONNS, fmt_rate(med(rs, "ids")), fmt_int(med(rs, "rps")),
              "%.3f" % med(rs, "p50"), "%.3f" % med(rs, "p99"), "%.1fus" % med(rs, "cpu_us"),
              ratio, goal, met))

    if any(k[0] == "nginx" for k in results):
        p("HTTP, one ID per request (vs base: leafd/nginx req/s, p99, cpu/req)")
        for n in threads:
            http_row("  nginx return 200 (baseline)", "nginx", n)
            ng, lf = results[("nginx", n)], results[("single", n)]
            r_rps = med(lf, "rps") / med(ng, "rps")
            r_p99 = med(lf, "p99") / med(ng, "p99")
            r_cpu = med(lf, "cpu_us") / max(med(ng, "cpu_us"), 1e-9)
            ok = r_rps >= 1 and r_p99 <= 1 and r_cpu <= 1
            http_row("  leafd /segment/demo", "single", n,
                     "%.2f %.2f %.2f" % (r_rps, r_p99, r_cpu), ">=1 <=1 <=1", "yes" if ok else "NO")
            sf = results[("sfsingle", n)]
            r_rps = med(sf, "rps") / med(ng, "rps")
            r_p99 = med(sf, "p99") / med(ng, "p99")
            r_cpu = med(sf, "cpu_us") / max(med(ng, "cpu_us"), 1e-9)
            ok = r_rps >= 1 and r_p99 <= 1 and r_cpu <= 1
            http_row("  leafd /snowflake", "sfsingle", n,
                     "%.2f %.2f %.2f" % (r_rps, r_p99, r_cpu), ">=1 <=1 <=1", "yes" if ok else "NO")
        p("HTTP, batches")
        for n in threads:
            http_row("  leafd /segment/demo?count=100", "batch100", n)
        for n in threads:
            ids = med(results[("batch1000", n)], "ids")
            http_row("  leafd /segment/demo?count=1000", "batch1000", n, "",
                     ">= 30M IDs/s", "yes" if ids >= 30e6 else "NO")
        for n in threads:
            ids = med(results[("sfbatch", n)], "ids")
            http_row("  leafd /snowflake?count=4096", "sfbatch", n, "%.2f of 4.096M" % (ids / 4.096e6),
                     ">= 0.95 of limit", "yes" if ids >= 0.95 * 4.096e6 else "NO")

    if any(k[0] == "uuidsingle" for k in results):
        p("UUIDv7 and ULID (vs base: leafd/nginx req/s in the same run)")
        for n in threads:
            ng = results[("nginx", n)]
            for key, label in (("uuidsingle", "/uuid"), ("ulidsingle", "/ulid")):
                r_rps = med(results[(key, n)], "rps") / med(ng, "rps")
                http_row("  leafd " + label, key, n, "%.2f" % r_rps, ">= 1.0x nginx",
                         "yes" if r_rps >= 1 else "NO")
        for n in threads:
            for key, label in (("uuidbatch", "/uuid?count=1000"), ("ulidbatch", "/ulid?count=1000")):
                ids = med(results[(key, n)], "ids")
                http_row("  leafd " + label, key, n, batch_spread(results[(key, n)], 1000),
                         ">= 10M IDs/s", "yes" if ids >= 10e6 else "NO")

    if any(k[0] == "serialsingle" for k in results):
        p("Serial numbers (vs base: leafd/nginx req/s in the same run)")
        for n in threads:
            r_rps = med(results[("serialsingle", n)], "rps") / med(results[("nginx", n)], "rps")
            http_row("  leafd /serial/demo", "serialsingle", n, "%.2f" % r_rps)

    if micro:
        p("In process, build/microbench (IDs/s per thread; cpu/req: ns per ID per thread; "
          "vs base: share of the layout limit)")

        def mrow(label, name, n, goal="", limit_goal=False):
            vals = [m[(name, n)] for m in micro if (name, n) in m]
            if not vals:
                p(row(label, n, "", "(no result)"))
                return
            per = statistics.median(v["per"] for v in vals)
            tot = statistics.median(v["total"] for v in vals)
            lim = vals[0]["limit"]
            ratio = ("%.2f of %s" % (tot / lim, fmt_rate(lim))) if lim else \
                ("total %s" % fmt_rate(tot) if n > 1 else "")
            met = ""
            if goal:
                met = "yes" if per >= 100e6 else "NO"
            ns = 1e9 / per
            p(row(label, n, "", fmt_rate(per) + "/thr", "", "", "", ("%.1fns" if ns >= 1 else "%.3fns") % ns,
                  ratio, goal, met))

        mrow("  segment_take (in process, as the server), 1 ID", "segment_take", 1)
        mrow("  segment_take, 2 threads on one tag", "segment_take_shared_tag", 2)
        mrow("  segment_take, 2 threads, a tag each", "segment_take_tag_each", 2)
        mrow("  segment_take, 1000 IDs per call", "segment_take_count1000", 1)
        # SNOWFLAKE MICROBENCHMARK: build/microbench's snowflake_next figures.
        mrow("  snowflake_next, 1 ID, Leaf layout", "snowflake_next", 1)
        mrow("  snowflake_next, 1 ID, Leaf layout", "snowflake_next", 2)
        mrow("  snowflake_next, 1 ID, 21-bit sequence", "snowflake_next_seq21", 1)
        mrow("  snowflake_next, 1 ID, 21-bit sequence", "snowflake_next_seq21", 2)
        # FF1 (src/core/ff1.c): encipherments/s; ns per encipherment in cpu/req
        mrow("  ff1_encrypt_u64, 20-bit domain, AES-256", "ff1_encrypt_bin20", 1)
        mrow("  ff1_encrypt_u64, 20-bit domain, AES-256", "ff1_encrypt_bin20", 2)
        mrow("  ff1_encrypt_u64, 6 decimal digits, AES-256", "ff1_encrypt_dec6", 1)
        mrow("  ff1_encrypt_u64, 6 decimal digits, AES-256", "ff1_encrypt_dec6", 2)
        # concealed tags (src/segment/conceal.c): counters concealed/s, ns per ID
        mrow("  conceal_ids, 1 counter per call", "conceal_ids", 1)
        mrow("  conceal_ids, 1 counter per call", "conceal_ids", 2)
        mrow("  conceal_ids, 1000 counters per call", "conceal_ids_count1000", 1)
        mrow("  conceal_ids, a new block every call", "conceal_ids_new_block", 1)

    if any(k[0] == "lease1000" for k in results):
        p("Leases over HTTP (vs base: leases/s / nginx req/s in the same run)")
        for n in threads:
            r = med(results[("lease1000", n)], "rps") / med(results[("nginx", n)], "rps")
            http_row("  leafd /segment/demo/lease?size=1000", "lease1000", n, "%.2f" % r)

    if client:
        p("C client, in process (build/clientbench: leafd_next on one tag against a local "
          "leafd; vs base: / segment_take in the same run)")
        for n in threads:
            vals = [c[n] for c in client if n in c]
            if not vals:
                p(row("  libleafd-client leafd_next", n, "", "(no result)"))
                continue
            per = statistics.median(v["per"] for v in vals)
            hpm = statistics.median(v["http_per_million"] for v in vals)
            base_name = "segment_take" if n == 1 else "segment_take_shared_tag"
            base = [m[(base_name, n)]["per"] for m in micro if (base_name, n) in m]
            ratio = "%.2f" % (per / statistics.median(base)) if base else ""
            p(row("  libleafd-client leafd_next, 1 ID", n, "", fmt_rate(per) + "/thr", "", "", "",
                  "%.1fns" % (1e9 / per), ratio, ">= 100M/thr", "yes" if per >= 100e6 else "NO"))
            p(row("  its HTTP requests per million IDs", n, "", "%.2f" % hpm))

    if startup or fp:
        p("Footprint")
        if fp:
            p(row("  RSS, %s tags, %s with a segment" % (fmt_int(fp["tags"]), fmt_int(fp["requested"])),
                  fp["threads"], "", "%.1f MB" % (fp["rss_kb"] / 1024.0), "", "", "", "",
                  "peak %.1f MB" % (fp["hwm_kb"] / 1024.0), "<= 16 MB",
                  "yes" if fp["rss_kb"] <= 16 * 1024 else "NO"))
            p(row("  RSS, embedded default, after its first ID", fp["threads"], "",
                  "%.1f MB" % (fp["idle_rss_kb"] / 1024.0)))
        if startup:
            ms = statistics.median(startup)
            p(row("  first ID after fork, embedded default", "", "", "%.1f ms" % ms, "", "", "", "",
                  "median of %d" % len(startup), "<= 50 ms", "yes" if ms <= 50 else "NO"))

    if any(k[0] == "resp_incr" for k in results) and ("redis", 1) in results:
        p("RESP, redis-benchmark -c%d (vs base: leafd ops/s / redis-server INCR ops/s, same "
          "run; cpu/req: server CPU per operation)" % CONNS)

        def resp_row(label, key, n, base=None, goal="", per_id=False):
            rs = results[(key, n)]
            ratio = met = ""
            if base is not None:
                r = med(rs, "rps") / med(results[base], "rps")
                ratio = "%.2fx" % r
                if goal:
                    met = "yes" if r >= 1.0 else "NO"
            p(row(label, n, CONNS, fmt_rate(med(rs, "ids")), fmt_int(med(rs, "rps")),
                  "%.3f" % med(rs, "p50"), "%.3f" % med(rs, "p99"), "%.1fus" % med(rs, "cpu_us"),
                  ratio, goal, met))
        p(row("  redis-server INCR k", 1, CONNS, fmt_rate(med(results[("redis", 1)], "ids")),
              fmt_int(med(results[("redis", 1)], "rps")), "%.3f" % med(results[("redis", 1)], "p50"),
              "%.3f" % med(results[("redis", 1)], "p99"),
              "%.1fus" % med(results[("redis", 1)], "cpu_us"), "(baseline)"))
        for n in threads:
            resp_row("  leafd INCR demo", "resp_incr", n, ("redis", 1), ">= 1.0x redis")
        for n in threads:
            if ("resp_incr_bp", n) in results:
                resp_row("  leafd INCR demo, busy_poll_us=%d" % BUSY_POLL_US, "resp_incr_bp",
                         n, ("redis", 1), ">= 1.0x redis")
        p(row("  redis-server INCR k -P 16", 1, CONNS, fmt_rate(med(results[("redis", 16)], "ids")),
              fmt_int(med(results[("redis", 16)], "rps")),
              "%.3f" % med(results[("redis", 16)], "p50"),
              "%.3f" % med(results[("redis", 16)], "p99"),
              "%.1fus" % med(results[("redis", 16)], "cpu_us"), "(baseline)"))
        for n in threads:
            resp_row("  leafd INCR demo -P 16", "resp_incr16", n, ("redis", 16), ">= 1.0x redis")
        for n in threads:
            if ("resp_incr16_bp", n) in results:
                resp_row("  leafd INCR demo -P 16, busy_poll_us=%d" % BUSY_POLL_US,
                         "resp_incr16_bp", n, ("redis", 16), ">= 1.0x redis")
        for n in threads:
            rs = results[("resp_seg1000", n)]
            ratio = ""
            if ("batch1000", n) in results:
                ratio = "%.2fx HTTP" % (med(rs, "ids") / med(results[("batch1000", n)], "ids"))
            p(row("  leafd LEAF.SEGMENT demo 1000", n, CONNS, fmt_rate(med(rs, "ids")),
                  fmt_int(med(rs, "rps")), "%.3f" % med(rs, "p50"), "%.3f" % med(rs, "p99"),
                  "%.1fus" % med(rs, "cpu_us"), ratio))

    peer_keys = [k for k in (("redis", 1), ("redis", 16), ("db_alloc", DBCONNS), ("db_seq", DBCONNS))
                 if k in results]
    if peer_keys:
        ref = results.get(("single", 1))
        p("Peers, same run (vs base: leafd /segment/demo 1 thread IDs/s / this)")
        labels = {"redis": "  redis INCR%s",
                  "db_alloc": "  MariaDB txn per ID: UPDATE+1, SELECT",
                  "db_seq": "  MariaDB SEQUENCE NEXTVAL (cache 1000)"}
        for key in peer_keys:
            rs = results[key]
            label = labels[key[0]]
            if key[0] == "redis":
                label = label % ("" if key[1] == 1 else " -P %d" % key[1])
                conns, thr = CONNS, 1
            else:
                conns, thr = DBCONNS, ""
            ratio = "%.2fx" % (med(ref, "ids") / med(rs, "ids")) if ref else ""
            p(row(label, thr, conns, fmt_rate(med(rs, "ids")), fmt_int(med(rs, "rps")),
                  "%.3f" % med(rs, "p50"), "%.3f" % med(rs, "p99"), "%.1fus" % med(rs, "cpu_us"),
                  ratio))

    if fo:
        p("Segment database failover: 2 MariaDB, tag step 100 (loads every few ms), wrk -c16 "
          "%d s per run, the preferred database killed -9 a third in; medians of %d rounds"
          % (failover.SECONDS, fo["rounds"]))
        for key, label in (("calm", "  no failure"), ("kill", "  a database killed")):
            f = fo[key]
            ratio = goal = met = ""
            if key == "kill":
                ratio = "p99 %.2fx calm" % (f["p99"] / fo["calm"]["p99"] if fo["calm"]["p99"] else 0)
                goal = "p99 <= 2x, max < %d ms" % fo["wait_ms"]
                met = "yes" if f["p99"] <= 2 * fo["calm"]["p99"] and f["max"] < fo["wait_ms"] \
                    and f["failed"] == 0 else "NO"
            p(row(label, 1, 16, "", fmt_int(f["rps"]), "%.3f" % f["p50"], "%.3f" % f["p99"],
                  "max %.1fms" % f["max"], ratio, goal, met))
        p(row("  failed requests; loads failed over", "", "", "", "", "", "", "",
              "%d; %d" % (fo["kill"]["failed"], fo["failovers"])))

    if db_tls:
        p("\n".join(db_tls))
    if store_rows:
        p("Segment allocations through leafd's store layer (build/storebench: store_alloc "
          "in a loop, a connection and a tag per thread), MariaDB against PostgreSQL 15 on "
          "this machine, medians of %d rounds of %g s:" % (stores.ROUNDS, stores.SECONDS))
        p("\n".join(store_rows))
    for dl in db_load or []:
        p("Database load: %d s at %s IDs/s (single IDs) on one tag, leafd on %s; counted "
          "by leafd's /metrics and the database's own count of updates (%s)"
          % (dl["seconds"], fmt_int(dl["rate"]), dl["db"],
             "Com_update" if dl["db"] == "MariaDB" else "pg_stat_user_tables.n_tup_upd"))
        last = len(dl["minutes"]) - 1
        for i, mn in enumerate(dl["minutes"]):
            p(row("  leaf_alloc transactions in minute %d" % (i + 1), 1, dbload.CLIENTS,
                  fmt_int(mn["ids_per_s"]), fmt_int(mn["ids_per_s"]), "", "", "",
                  "loads %d alloc %d updates %d" % (mn["loads"], mn["alloc"], mn["com_update"]),
                  "<= 1/min/tag" if i == last else "",
                  ("yes" if mn["loads"] <= 1 else "NO") if i == last else ""))
        p(row("  adaptive step for the next load", "", "", "", "", "", "", "",
              "%s (table: 1,000)" % fmt_int(dl["step"])))
        if dl["start_loads"] or dl["failed"]:
            p(row("  (loads before the traffic; failed requests)", "", "", "", "", "", "", "",
                  "%d; %d" % (dl["start_loads"], dl["failed"])))
    if not db_load and not ONLY:
        p("Database load: not run (DBLOAD=1 make bench, or make bench-dbload: 2 min against "
          "MariaDB, then 2 min against PostgreSQL)")
    if want("multi") and have("redis-server"):
        import resp_multi   # MULTI + 100 INCR + EXEC, leafd vs redis-server (bench/resp_multi.py)
        out += resp_multi.run(LEAFD)
    if mc_lines:
        out += [""] + mc_lines
    if h2_rows:
        out += [""] + h2_rows
    out += [""] + grpc_rows if grpc_rows else []
    out += [""] + conceal_rows if conceal_rows else []
    print("\n".join(out + tls_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
