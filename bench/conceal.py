#!/usr/bin/env python3
"""conceal.py: concealed values against plain ones, in one run (issue 30).

One leafd per I/O thread count (THREADS), on its embedded SQLite store,
serves side by side:
  - segment tags `demo` (plain) and `hidden` (segment.conceal = hidden,
    segment.conceal_key_file, mode 600, 64 hex digits; conceal_bits 20);
  - serial codes `plain` (PLN) and `hid` (HID, serial.hid.conceal = true,
    serial.hid.key_file), both 10 sequence digits, step 10,000,000 and
    serial.count_max 1000, so that neither waits for its SQLite row.
wrk (-t1 -cCONNS, keep-alive, DURATION s per run) takes single IDs
(GET /segment/<tag>, /serial/<code>) and batches (?count=1000) of each.
Every round runs each pair back to back, plain then concealed in odd
rounds and the other way round in even ones, so both see the same noise;
the table gives medians over ROUNDS rounds, concealed / plain req/s as
the ratio of the medians and as the median of each round's own ratio (the
two runs of a round are seconds apart, so that one sees the machine's
other load least; the goal, >= 0.9 for single IDs, is judged on it), each
round's ratio, IDs/s, p99 and the server's CPU per request (user+sys from
/proc) with plain / concealed: the requests one CPU-second serves,
concealed against plain, which moves far less with the machine's other
load than req/s does).

In process, each round also runs build/microbench -o conceal and -o ff1:
conceal_ids (src/segment/conceal.c) per counter, one per call, 1000 per
call, and from a new block every call (the per-thread domain made again),
beside ff1_encrypt_u64 over the same 20-bit domain: ns per ID.

bench/bench.py runs it as its conceal section (ONLY=conceal, or
make bench-conceal); run alone:
    python3 bench/conceal.py
Environment: ROUNDS (3), DURATION (5), CONNS (64), THREADS (1,2).
"""
import os
import re
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (servers and helpers, one copy)

SQLITE_SQL = os.path.join(bench.ROOT, "sql", "sqlite.sql")
SERIAL_STEP = 10000000
# (key, path, IDs per request); pairs: (plain, concealed)
PAIRS = [
    ("segment, 1 ID", ("/segment/demo", "/segment/hidden"), 1),
    ("serial, 1 ID", ("/serial/plain", "/serial/hid"), 1),
    ("segment, count=1000", ("/segment/demo?count=1000", "/segment/hidden?count=1000"), 1000),
    ("serial, count=1000", ("/serial/plain?count=1000", "/serial/hid?count=1000"), 1000),
]
MICRO = [("conceal_ids", 1, "conceal_ids, 1 counter per call"),
         ("conceal_ids", 2, "conceal_ids, 1 counter per call"),
         ("conceal_ids_count1000", 1, "conceal_ids, 1000 counters per call"),
         ("conceal_ids_new_block", 1, "conceal_ids, a new block every call"),
         ("ff1_encrypt_bin20", 1, "ff1_encrypt_u64 alone, 20-bit domain")]


def key_file(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (secrets.token_hex(32) + "\n").encode())
    os.close(fd)
    return path


class Leafd:
    """leafd on a config file: a plain and a concealed tag, a plain and a
    concealed serial code."""

    def __init__(self, leafd, work, threads):
        self.dir = os.path.join(work, "leafd-conceal-%d" % threads)
        os.makedirs(self.dir)
        db = sqlite3.connect(os.path.join(self.dir, "leafd.db"))
        with open(SQLITE_SQL) as f:
            db.executescript(f.read())
        db.execute("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES "
                   "('demo', 1, 1000, 'bench: plain'), ('hidden', 1, 1000, 'bench: concealed')")
        db.commit()
        db.close()
        conf = os.path.join(self.dir, "leafd.conf")
        with open(conf, "w") as f:
            f.write("""leaf.segment.enable = true
leaf.snowflake.enable = false
segment.count_max = 100000
segment.conceal = hidden
segment.conceal_key_file = %s
segment.conceal_bits = 20
serial.count_max = 1000
serial.plain.prefix = PLN
serial.plain.digits = 10
serial.plain.step = %d
serial.hid.prefix = HID
serial.hid.digits = 10
serial.hid.step = %d
serial.hid.conceal = true
serial.hid.key_file = %s
""" % (key_file(os.path.join(self.dir, "segment.key")), SERIAL_STEP, SERIAL_STEP,
                key_file(os.path.join(self.dir, "serial.key"))))
        self.port = bench.free_port()
        self.log = open(os.path.join(self.dir, "leafd.log"), "w")
        self.proc = subprocess.Popen([leafd, "-c", conf, "--listen.port=%d" % self.port,
                                      "--threads=%d" % threads, "--log.level=warn"],
                                     cwd=self.dir, stdout=self.log, stderr=subprocess.STDOUT)
        self.pids = [self.proc.pid]
        bench.wait_port(self.port)

    def check(self):
        """Each target answers 200 with its IDs; concealed IDs do not count
        up. Raises with leafd's answer otherwise."""
        got = {}
        for _, paths, per in PAIRS:
            for path in paths:
                st, body = bench.http_get(self.port, path, timeout=30)
                ids = body.split()
                if st != 200 or len(ids) != per:
                    raise RuntimeError("conceal bench: GET %s: %d %s" % (path, st, body[:300]))
                got[path] = ids
        seg = [int(x) for x in got["/segment/hidden?count=1000"]]
        ser = [x for x in got["/serial/hid?count=1000"]]
        if (len(set(seg)) != 1000 or seg == sorted(seg) or len(set(ser)) != 1000
                or ser == sorted(ser) or not ser[0].startswith("HID")):
            raise RuntimeError("conceal bench: the concealed answers look plain: %r %r"
                               % (seg[:3], ser[:3]))

    def stop(self):
        bench.stop_proc(self.proc)
        self.log.close()


def micro():
    """One run of build/microbench -o conceal and -o ff1: {(name, thr): per_thread}."""
    res = {}
    for only in ("conceal", "ff1"):
        out = subprocess.run([bench.MICROBENCH, "-o", only, "-r", "3", "-d", "0.3"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if out.returncode != 0:
            bench.log("  warning: microbench -o %s: %s" % (only, out.stderr.decode().strip()))
        for m in re.finditer(r"^RESULT (\S+) threads=(\d+) per_thread=(\d+)",
                             out.stdout.decode(), re.M):
            res[(m.group(1), int(m.group(2)))] = float(m.group(3))
    return res


def run(leafd, work, log):
    """Interleaved rounds per thread count; returns the table's lines."""
    threads = [int(t) for t in bench.THREADS.split(",")]
    res = {}            # (label, thr, 0 plain | 1 concealed) -> [wrk results]
    ratios = {}         # (label, thr) -> [per-round ratios]
    mic = []
    have_micro = os.access(bench.MICROBENCH, os.X_OK)
    for n in threads:
        lf = Leafd(leafd, work, n)
        try:
            lf.check()
            base = "http://127.0.0.1:%d" % lf.port
            for _, paths, _ in PAIRS:           # warm up: steps grown, blocks taken
                for path in paths:
                    subprocess.run(["wrk", "-t1", "-c%d" % bench.CONNS, "-d1s", base + path],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for r in range(bench.ROUNDS):
                log("conceal: %d thread(s), round %d/%d" % (n, r + 1, bench.ROUNDS))
                for label, paths, per in PAIRS:
                    order = (0, 1) if r % 2 == 0 else (1, 0)
                    got = {}
                    for which in order:
                        got[which] = bench.wrk(base + paths[which], lf.pids, per)
                        res.setdefault((label, n, which), []).append(got[which])
                    ratios.setdefault((label, n), []).append(got[1]["rps"] / got[0]["rps"])
                if have_micro and n == threads[0]:
                    mic.append(micro())
        finally:
            lf.stop()
        if lf.proc.returncode not in (0, None):
            log("  warning: leafd (conceal, %d threads) exited %s" % (n, lf.proc.returncode))

    med = bench.med
    lines = ["Concealed against plain (issue 30): one leafd per thread count serving "
             "segment tags demo (plain) and hidden (segment.conceal, 2^20-ID blocks, "
             "AES-256) and serial codes plain and hid (conceal = true, 10 digits), "
             "wrk -t1 -c%d -d%ds keep-alive; medians of %d rounds, plain and concealed "
             "back to back in each (order alternating)" % (bench.CONNS, bench.DURATION,
                                                          bench.ROUNDS), "",
             "| figure | thr | plain req/s | concealed req/s | concealed/plain: of the "
             "medians; median of the rounds (each round) | plain IDs/s | concealed IDs/s | p99 ms plain / concealed "
             "| cpu/req plain / concealed (ratio) | goal | met |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, _, per in PAIRS:
        for n in threads:
            p, c = res[(label, n, 0)], res[(label, n, 1)]
            ratio = med(c, "rps") / med(p, "rps")
            paired = statistics.median(ratios[(label, n)])
            each = " ".join("%.2f" % x for x in ratios[(label, n)])
            bad = sum(x["non2xx"] for x in p + c)
            goal = ">= 0.9x" if per == 1 else ""
            met = ("yes" if paired >= 0.9 else "NO") if per == 1 else ""
            lines.append("| %s%s | %d | %s | %s | %.2f; **%.2f** (%s) | %s | %s | %.3f / %.3f "
                         "| %.1f / %.1f us (%.2f) | %s | %s |"
                         % (label, " (non-2xx seen!)" if bad else "", n,
                            bench.fmt_int(med(p, "rps")), bench.fmt_int(med(c, "rps")), ratio,
                            paired, each, bench.fmt_rate(med(p, "ids")), bench.fmt_rate(med(c, "ids")),
                            med(p, "p99"), med(c, "p99"), med(p, "cpu_us"), med(c, "cpu_us"),
                            med(p, "cpu_us") / max(med(c, "cpu_us"), 1e-9), goal, met))
    if mic:
        lines += ["", "In process, build/microbench (medians of %d runs, one per round): ns "
                  "per ID per thread" % len(mic), "",
                  "| figure | thr | IDs/s per thread | ns per ID |", "|---|---|---|---|"]
        for name, n, label in MICRO:
            vals = [m[(name, n)] for m in mic if (name, n) in m]
            if vals:
                v = statistics.median(vals)
                lines.append("| %s | %d | %s | %.0f |" % (label, n, bench.fmt_rate(v), 1e9 / v))
    return lines


def main():
    leafd = bench.LEAFD
    if not os.access(leafd, os.X_OK):
        print("conceal bench: build leafd first (make leafd)")
        return 1
    if shutil.which("wrk") is None:
        print("conceal bench: wrk is missing (sh .ci/deps.sh bench)")
        return 1
    work = tempfile.mkdtemp(prefix="leafd-conceal-bench-")
    try:
        lines = run(leafd, work, bench.log)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
