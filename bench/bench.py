#!/usr/bin/env python3
"""bench.py: leafd against nginx `return 200` (and peers), in one run.

Every target is measured with wrk (keep-alive, loopback) in interleaved
rounds, so leafd and its baseline see the same machine noise; the table
reports medians over the rounds, leafd/nginx ratios, and the server's CPU
time per request (from /proc, user+system of the server processes).

    python3 bench/bench.py                  # defaults: 3 rounds of 5 s
    ROUNDS=5 DURATION=10 python3 bench/bench.py
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEAFD = os.path.join(ROOT, "leafd")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = int(os.environ.get("DURATION", "5"))
CONNS = int(os.environ.get("CONNS", "64"))
THREADS = os.environ.get("THREADS", "1,2")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p != 8080:
            return p


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


def parse_latency(s):
    m = re.match(r"([\d.]+)(us|ms|s)", s)
    v, u = float(m.group(1)), m.group(2)
    return v / 1000.0 if u == "us" else v if u == "ms" else v * 1000.0


def wrk(url, pids, ids_per_req=1):
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
        print("  warning: %s: %s %s" % (url, errors and errors.group(0), sock_err and sock_err.group(0)),
              file=sys.stderr)
    cpu_us = (after - before) / CLK_TCK * 1e6 / max(reqs, 1)
    return {"rps": rps, "p50": p50, "p99": p99, "cpu_us": cpu_us, "ids": rps * ids_per_req}


class Nginx:
    def __init__(self, workdir, workers):
        self.dir = os.path.join(workdir, "nginx-%d" % workers)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
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
        listen 127.0.0.1:%d reuseport;
        location / { default_type text/plain; return 200 "1234567890123456\\n"; }
    }
}
""" % (workers, self.dir, self.dir, self.port))
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        time.sleep(0.2)
        self.pids = [self.proc.pid] + children(self.proc.pid)

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Leafd:
    def __init__(self, workdir, threads):
        self.dir = os.path.join(workdir, "leafd-%d" % threads)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.proc = subprocess.Popen([LEAFD, "--listen.port=%d" % self.port,
                                      "--threads=%d" % threads,
                                      "--segment.count_max=100000",
                                      "--log.level=warn"],
                                     cwd=self.dir, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_port(self.port)
        self.pids = [self.proc.pid]
        # Warm up: load the tag and grow its step.
        subprocess.run(["curl", "-s", "-o", "/dev/null",
                        "http://127.0.0.1:%d/segment/demo?count=1000" % self.port])

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=15)


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
    return "%d cores, %s, %s" % (os.cpu_count(), model, os.uname().release)


def main():
    if shutil.which("wrk") is None or shutil.which("nginx") is None:
        print("bench needs wrk and nginx (sh .ci/deps.sh bench)")
        return 1
    work = tempfile.mkdtemp(prefix="leafd-bench-")
    threads = [int(t) for t in THREADS.split(",")]
    results = {}
    servers = []
    try:
        targets = []
        for n in threads:
            ng = Nginx(work, n)
            lf = Leafd(work, n)
            servers += [ng, lf]
            base = "http://127.0.0.1:%d" % lf.port
            targets += [
                ("nginx return 200", n, "http://127.0.0.1:%d/" % ng.port, ng.pids, 1, None),
                ("leafd /segment/demo", n, base + "/segment/demo", lf.pids, 1, "nginx return 200"),
                ("leafd /segment/demo?count=100", n, base + "/segment/demo?count=100", lf.pids, 100, None),
                ("leafd /segment/demo?count=1000", n, base + "/segment/demo?count=1000", lf.pids, 1000, None),
            ]
        for r in range(ROUNDS):
            print("round %d/%d" % (r + 1, ROUNDS), file=sys.stderr, flush=True)
            for name, n, url, pids, per, _ in targets:
                results.setdefault((name, n), []).append(wrk(url, pids, per))
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)

    print()
    print("machine: %s" % machine())
    print("wrk -t1 -c%d -d%ds, keep-alive, loopback; medians of %d interleaved rounds;"
          % (CONNS, DURATION, ROUNDS))
    print("wrk and the server share the cores. cpu/req = server user+sys CPU per request.")
    print()
    hdr = "%-32s %3s %11s %13s %9s %9s %9s %10s" % (
        "target", "thr", "req/s", "IDs/s", "p50 ms", "p99 ms", "cpu/req", "vs nginx")
    print(hdr)
    print("-" * len(hdr))
    for name, n, url, pids, per, base in targets:
        rs = results[(name, n)]
        med = {k: statistics.median(x[k] for x in rs) for k in rs[0]}
        ratio = ""
        if base is not None:
            b = results[(base, n)]
            ratio = "%.2fx" % (med["rps"] / statistics.median(x["rps"] for x in b))
        print("%-32s %3d %11.0f %13.0f %9.3f %9.3f %7.1fus %10s" % (
            name, n, med["rps"], med["ids"], med["p50"], med["p99"], med["cpu_us"], ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
