#!/usr/bin/env python3
"""memcache.py: leafd's memcached listener against a real memcached, with
the same client.

leafd (2 I/O threads, the embedded default, memcache.listen.port) answers
`get demo` (a segment ID) and `get @snowflake`; memcached (-t 2, the same
number of worker threads) answers `get demo` of a stored 19-digit value, the
length of a snowflake ID. Each in memcached's text protocol and in its
binary protocol (a GET frame; memcached's default -B auto serves both on
one port, as leafd does), in the same run. The client is build/mcload (bench/mcload.c: one
epoll thread, many connections, each keeping DEPTH gets in flight; libmemcached's
memcslap cannot ask for a fixed key, and leafd has no other). Rounds are
interleaved (leafd, then memcached, the order swapped every round), and the
medians are compared: the target is leafd >= 1.0x memcached's ops/s.

bench/bench.py runs it as the section `memcache`; run alone:
    python3 bench/memcache.py          (ROUNDS=3, MC_SECONDS=5)
"""
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from bbutil import free_port, wait_for  # noqa: E402  (shared with the tests)
LEAFD = os.path.join(ROOT, "leafd")
MCLOAD = os.path.join(ROOT, "build", "mcload")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SECONDS = float(os.environ.get("MC_SECONDS", "5"))
CONNS = int(os.environ.get("MC_CONNS", "50"))
# (label, depth, protocol): one get at a time per connection, and 16
# pipelined, in the text and the binary protocol.
SHAPES = (("get, no pipelining", 1, "text"), ("get, 16 pipelined", 16, "text"),
          ("binary get, no pipelining", 1, "binary"),
          ("binary get, 16 pipelined", 16, "binary"))
VALUE = b"1234567890123456789"


def ask(port, data, until):
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.sendall(data)
    got = b""
    while until not in got:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    return got


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def load(port, depth, key, proto):
    out = subprocess.run([MCLOAD, str(port), str(CONNS), str(depth), str(SECONDS), key]
                         + (["binary"] if proto == "binary" else []),
                         capture_output=True, timeout=SECONDS + 60, check=True).stdout.split()
    ops, errors = int(out[1]), int(out[3])
    if errors:
        raise RuntimeError("mcload: %d errors against port %d" % (errors, port))
    return float(out[7])


def run(log=print):
    """Markdown lines: the table, or one line saying why it did not run."""
    if shutil.which("memcached") is None:
        return ["memcached: not installed (sh .ci/deps.sh bench); memcache rows skipped"]
    if not os.access(MCLOAD, os.X_OK):
        return ["memcache: build/mcload missing (make build/mcload); rows skipped"]
    work = tempfile.mkdtemp(prefix="leafd-bench-mc-")
    procs = []
    res = {}
    try:
        lport, mport, dport = free_port(), free_port(), free_port()
        with open(os.path.join(work, "leafd.log"), "wb") as lf:
            procs.append(subprocess.Popen(
                [LEAFD, "--listen.port=%d" % lport, "--threads=2",
                 "--memcache.listen.port=%d" % mport], cwd=work, stdout=lf,
                stderr=subprocess.STDOUT))
        cmd = ["memcached", "-l", "127.0.0.1", "-p", str(dport), "-U", "0", "-t", "2"]
        if os.geteuid() == 0:
            cmd += ["-u", "root"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        for p in (mport, dport):
            wait_for(lambda p=p: socket.create_connection(("127.0.0.1", p), 0.5).close()
                     or True, 15, what="port %d" % p)
        if b"STORED" not in ask(dport, b"set demo 0 0 %d\r\n%s\r\n" % (len(VALUE), VALUE),
                                b"\r\n"):
            raise RuntimeError("memcached did not store the key")
        # leafd's first segment of demo, and the value memcached serves.
        if b"END" not in ask(mport, b"get demo\r\n", b"END\r\n"):
            raise RuntimeError("leafd did not answer get demo")
        for r in range(ROUNDS):
            log("memcache round %d/%d" % (r + 1, ROUNDS))
            for label, depth, proto in SHAPES:
                runs = [("leafd", mport, "demo"), ("memcached", dport, "demo"),
                        ("leafd_sf", mport, "@snowflake")]
                if r % 2:
                    runs.reverse()
                for who, port, key in runs:
                    res.setdefault((who, depth, proto), []).append(
                        load(port, depth, key, proto))
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(work, ignore_errors=True)

    lines = ["memcached get: build/mcload, %d connections, %g s per run, medians of %d "
             "interleaved rounds; leafd 2 I/O threads, memcached -t 2" % (CONNS, SECONDS, ROUNDS),
             "",
             "| figure | depth | leafd ops/s | memcached ops/s | leafd/memcached | goal | met |",
             "|---|---|---|---|---|---|---|"]
    for label, depth, proto in SHAPES:
        base = statistics.median(res[("memcached", depth, proto)])
        for who, what in (("leafd", "get demo (segment)"), ("leafd_sf", "get @snowflake")):
            v = statistics.median(res[(who, depth, proto)])
            ratio = v / base if base else 0
            lines.append("| %s: %s | %d | %.0f | %.0f | %.2fx | >= 1.0x | %s |"
                         % (label, what, depth, v, base, ratio, "yes" if ratio >= 1 else "NO"))
    return lines


if __name__ == "__main__":
    print("\n".join(run(lambda m: print(m, file=sys.stderr))))
