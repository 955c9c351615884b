#!/usr/bin/env python3
"""resp_multi.py: Redis transactions, MULTI + 100 INCR + EXEC, against leafd's
RESP listener and against redis-server, with the same client in the same
run.

The client: MULTI_CLIENTS processes (4), each with one connection, each
sending one whole transaction at a time (MULTI, 100 x INCR <key>, EXEC,
pre-encoded in one write) and reading its 202 reply lines (+OK, 100 x
+QUEUED, *100, 100 integers) before the next; it checks that EXEC's array
holds increasing integers (IDs/s counts them; a refusal in the array,
-IDS_EXHAUSTED say, is counted apart). leafd
(1 I/O thread, tag demo) and redis-server (INCR k) take turns, MULTI_ROUNDS
(ROUNDS, 3) rounds of MULTI_SECONDS (DURATION, 5 s) each; the table gives
the medians and leafd / redis.

    python3 bench/resp_multi.py          # alone; bench.py runs it as ONLY=multi
"""
import multiprocessing
import os
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
from bench import CLK_TCK, cpu_ticks, stop_proc, wait_port  # noqa: E402
LEAFD = os.path.join(ROOT, "leafd")
ROUNDS = int(os.environ.get("MULTI_ROUNDS", os.environ.get("ROUNDS", "3")))
SECONDS = float(os.environ.get("MULTI_SECONDS", os.environ.get("DURATION", "5")))
CLIENTS = int(os.environ.get("MULTI_CLIENTS", "4"))
N = 100


def encode(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def client(port, key, seconds, q):
    """Transactions for seconds; puts (transactions, error or None)."""
    tx = encode(b"MULTI") + encode(b"INCR", key) * N + encode(b"EXEC")
    lines = 2 * N + 2
    s = socket.create_connection(("127.0.0.1", port), 10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    done, refused, slowest, err, buf = 0, 0, 0.0, None, b""
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            t0 = time.monotonic()
            s.sendall(tx)
            while buf.count(b"\r\n") < lines:
                chunk = s.recv(1 << 16)
                if not chunk:
                    raise RuntimeError("connection closed")
                buf += chunk
            parts = buf.split(b"\r\n")
            buf = b"\r\n".join(parts[lines:])
            if parts[N + 1] != b"*%d" % N:
                raise RuntimeError("unexpected answer: %r" % parts[N:N + 3])
            # An element may be a refusal (-IDS_EXHAUSTED ...): counted apart.
            ids = [int(x[1:]) for x in parts[N + 2:lines] if x.startswith(b":")]
            if ids != sorted(set(ids)):
                raise RuntimeError("EXEC's IDs are not increasing")
            done += len(ids)
            if len(ids) < N:
                refused += N - len(ids)
                slowest = max(slowest, time.monotonic() - t0)
    except Exception as e:      # report, do not hang the parent
        err = str(e)
    s.close()
    q.put((done, refused, slowest, err))


def measure(port, key, pid):
    """(IDs/s, refused, slowest refused transaction s, server CPU s per ID)."""
    q = multiprocessing.Queue()
    ps = [multiprocessing.Process(target=client, args=(port, key, SECONDS, q))
          for _ in range(CLIENTS)]
    t0 = time.monotonic()
    cpu0 = cpu_ticks([pid])
    for p in ps:
        p.start()
    res = [q.get() for _ in ps]
    for p in ps:
        p.join()
    dt = time.monotonic() - t0
    cpu = (cpu_ticks([pid]) - cpu0) / CLK_TCK
    errs = [r[3] for r in res if r[3]]
    if errs:
        raise RuntimeError(errs[0])
    ids = sum(r[0] for r in res)
    return ids / dt, sum(r[1] for r in res), max(r[2] for r in res), cpu / max(ids, 1)


def run(leafd=LEAFD, work=None):
    """The markdown rows (a list of lines)."""
    work = work or tempfile.mkdtemp(prefix="leafd-bench-multi-")
    ldir, rdir = os.path.join(work, "multi-leafd"), os.path.join(work, "multi-redis")
    os.makedirs(ldir, exist_ok=True)
    os.makedirs(rdir, exist_ok=True)
    lport, lrport, rport = free_port(), free_port(), free_port()
    lf = subprocess.Popen([leafd, "--listen.port=%d" % lport, "--resp.listen.port=%d" % lrport,
                           "--threads=1", "--log.level=warn"], cwd=ldir,
                          stdout=subprocess.DEVNULL,
                          stderr=open(os.path.join(ldir, "leafd.log"), "wb"))
    rd = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no", "--dir", rdir,
                           "--daemonize", "no", "--logfile", os.path.join(rdir, "redis.log")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rates = {"leafd": [], "redis": []}
    cpus = {"leafd": [], "redis": []}
    refused = {"leafd": 0, "redis": 0}
    slowest = 0.0
    try:
        wait_port(lrport)
        wait_port(rport)
        for _ in range(ROUNDS):
            for name, port, key, pid in (("redis", rport, b"k", rd.pid),
                                         ("leafd", lrport, b"demo", lf.pid)):
                try:
                    ids_s, bad, slow, cpu = measure(port, key, pid)
                except RuntimeError as e:
                    raise RuntimeError("%s: %s (exit status %r; logs in %s)"
                                       % (name, e, (lf if name == "leafd" else rd).poll(),
                                          work))
                rates[name].append(ids_s)
                cpus[name].append(cpu)
                refused[name] += bad
                if name == "leafd":
                    slowest = max(slowest, slow)
    finally:
        stop_proc(lf)
        stop_proc(rd)
    rm, lm = statistics.median(rates["redis"]), statistics.median(rates["leafd"])
    rc, lc = (statistics.median(cpus[k]) * 1e9 * N for k in ("redis", "leafd"))
    return [
        "",
        "RESP transactions: MULTI + %d INCR + EXEC, %d client processes (one transaction "
        "in flight each), %d interleaved rounds of %.0f s, medians; server CPU = its "
        "user+sys time per transaction" % (N, CLIENTS, ROUNDS, SECONDS),
        "",
        "| figure | IDs/s | transactions/s | vs redis-server | server CPU/transaction |",
        "|---|---|---|---|---|",
        "| redis-server `INCR k` | %s | %s | baseline | %.0f us |"
        % (fmt(rm), fmt(rm / N), rc / 1000),
        "| leafd `INCR demo`, 1 I/O thread | %s | %s | %.2fx | %.0f us (%.2fx) |"
        % (fmt(lm), fmt(lm / N), lm / rm, lc / 1000, lc / rc),
        "",
        "Refused INCRs in EXEC arrays (not counted as IDs): leafd %d%s, redis-server %d."
        % (refused["leafd"], " (slowest such transaction %.0f ms)" % (slowest * 1000)
           if refused["leafd"] else "", refused["redis"]),
    ]


def fmt(v):
    return "{:,}".format(int(round(v)))


if __name__ == "__main__":
    print("\n".join(run()))
