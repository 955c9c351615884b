"""Black-box tests of business serial numbers (GET /serial/<code>).

The period is decided by the database's clock. To cross a period boundary
without waiting for midnight, these tests start leafd with the test-only
LEAFD_TEST_SERIAL_DB_OFFSET_MS=N: the clock read in the allocation
transaction becomes the database's own clock plus N (added in the SQL).
Every node given the same N sees one shifted database clock; the nodes' own
clocks play no part (one node below even runs an hour ahead under
libfaketime)."""
import datetime
import os
import random
import re
import threading
import time

import subprocess

from bbutil import LEAFD, Client, Workdir, check, eq, faketime_preload, wait_for

TESTS = [
    "test_embedded_demo",
    "test_tokens",
    "test_bad_definitions_refused_at_start",
    "test_exhausted_never_wraps",
    "test_dst_fall_back_repeats_nothing",
    "test_snowflake_source",
    "test_snowflake_source_sequence_random",
    "test_two_nodes_mariadb_period_change",
    "test_four_nodes_create_a_row_at_once",
    "test_mariadb_outage",
    "test_same_text_codes_refused",
    "test_snowflake_yy_layout_refused",
    "test_wide_worker_id",
    "test_old_row_format_carried",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): clock and outage scenarios, bound by their waits.
PLAIN_ONLY = {
    "test_dst_fall_back_repeats_nothing",
    "test_mariadb_outage",
    "test_two_nodes_mariadb_period_change",
}

OFFSET_ENV = "LEAFD_TEST_SERIAL_DB_OFFSET_MS"


def err(r, status, code):
    eq(r.status, status, "status %r" % r)
    eq(r.json()["error"], code, "code %r" % r)


def now_ms():
    return int(time.time() * 1000)


def ms_utc(y, mo, d, h=0, mi=0, s=0):
    return int(datetime.datetime(y, mo, d, h, mi, s,
                                 tzinfo=datetime.timezone.utc).timestamp() * 1000)


def test_embedded_demo(ctx):
    with Workdir("serial-demo") as wd:
        d = wd.leafd().start()
        today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
        r = d.get("/serial/demo")
        eq(r.status, 200, "status %r" % r)
        eq(r.header("Cache-Control"), "no-store", "Cache-Control")
        first = r.text.strip()
        check(re.fullmatch(r"DEMO\d{8}\d{10}", first), "form of %r" % first)
        check(first[4:12] == today or int(first[4:12]) == int(today) + 1,
              "date of %s is today (UTC) %s" % (first, today))
        r = d.get("/serial/demo?count=100&format=json")
        got = [first] + r.json()["ids"]
        eq(len(got), 101, "count")
        eq(len(set(got)), 101, "no duplicate")
        eq(got, sorted(got), "increasing within a day")
        err(d.get("/serial/nope"), 404, "unknown_serial_code")
        err(d.get("/serial/b%20d"), 400, "invalid_serial_code")
        err(d.get("/serial/de%00mo"), 400, "invalid_serial_code")
        err(d.get("/serial/" + "x" * 40), 400, "invalid_serial_code")
        err(d.get("/serial/demo?count=0"), 400, "invalid_count")
        err(d.get("/serial/demo?count=101"), 400, "invalid_count")
        eq(d.client.request("HEAD", "/serial/demo").status, 405, "HEAD takes nothing")
        h = d.get("/health").json()
        eq(h["serial"]["codes"], 1, "health: one code")
        eq(h["serial"]["db"], "up", "health: db up")
        m = d.get("/metrics").text
        check('leafd_serial_issued_total{code="demo"} 101' in m, "issued metric:\n%s" % m)
        check('leafd_http_requests_total{route="serial",status="404"} 1' in m,
              "route metric")
        # The period's row is in leaf_alloc (/db) but is no segment tag: a
        # segment load would draw on the row the serials count in.
        rows = [r for r in d.get("/db").json()["rows"] if r["description"] == "serial period"]
        eq(len(rows), 1, "one serial period row in /db: %r" % rows)
        prow = rows[0]["biz_tag"]
        err(d.get("/segment/" + prow), 404, "unknown_biz_tag")     # looked up alone
        # A restart continues the day's row: nothing repeats.
        d.stop()
        d2 = wd.leafd(port=d.port).start()
        again = d2.get("/serial/demo?count=50&format=json").json()["ids"]
        check(not set(again) & set(got), "a restart repeats nothing")
        check(min(again) > max(got), "and continues after the buffered range")
        err(d2.get("/segment/" + prow), 404, "unknown_biz_tag")    # in the list read at start
        keys = [t["key"] for t in d2.get("/cache").json()["tags"]]
        check(prow not in keys and "demo" in keys, "/cache lists segment tags only: %r" % keys)
        eq(d2.get("/segment/demo").status, 200, "the demo segment tag still serves")


def test_tokens(ctx):
    with Workdir("serial-tokens") as wd:
        path = os.path.join(wd.path, "tokens")
        with open(path, "w") as f:
            f.write("serial-token-1 @serial:demo\nother-token-22 demo\n")
        d = wd.leafd(flags=["--auth.tokens_file=%s" % path]).start()
        err(d.get("/serial/demo"), 401, "token_required")
        err(d.get("/serial/demo?token=other-token-22"), 403, "token_forbidden")
        eq(d.get("/serial/demo?token=serial-token-1").status, 200, "the serial token")
        eq(d.get("/serial/demo", {"Authorization": "Bearer serial-token-1"}).status, 200,
           "as a header")


def start_fails(wd, lines, want):
    path = os.path.join(wd.path, "bad.conf")
    with open(path, "w") as f:
        f.write("leaf.segment.enable = true\nleaf.snowflake.enable = false\n")
        f.write("".join(l + "\n" for l in lines))
    d = wd.leafd(flags=["-c", path])
    rc = d.start(expect_fail=True)
    check(rc != 0, "leafd started with %r" % lines)
    check(want in d.log(), "start-up error names %r:\n%s" % (want, d.log()))
    return rc


def test_bad_definitions_refused_at_start(ctx):
    with Workdir("serial-bad") as wd:
        start_fails(wd, ["serial.PAY.prefix = PAY", "serial.PAY.colour = red"],
                    "bad.conf:4: serial.PAY.colour: unknown field")
        start_fails(wd, ["serial.PAY.pattern = yyyyMMdd-HH"],
                    "bad.conf:3: serial.PAY.pattern: time pattern")
        start_fails(wd, ["serial.PAY.zone = Mars/Olympus"], "bad.conf:3: serial.PAY.zone:")
        start_fails(wd, ["serial.PAY.pattern = yyMM"],
                    "bad.conf:3: serial.PAY.pattern: the time pattern \"yyMM\" does not print")
        start_fails(wd, ["serial.PAY.digits = 0"], "bad.conf:3: serial.PAY.digits:")
        start_fails(wd, ["serial.PAY.source = snowflake",
                         "serial.PAY.pattern = yyyyMMddHHmmssSSS"],
                    "bad.conf:3: serial.PAY.source: source = snowflake needs snowflake mode")
        start_fails(wd, ["serial.PAY.worker_id = true"],
                    "bad.conf:3: serial.PAY.worker_id: the node's worker ID needs snowflake")
        # --check-config gives the same error, exit 2.
        path = os.path.join(wd.path, "bad.conf")
        r = subprocess.run([LEAFD, "-c", path, "--check-config"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        eq(r.returncode, 2, "--check-config exit status")
        check(b"bad.conf:3: serial.PAY.worker_id" in r.stderr, "--check-config: %r" % r.stderr)


def test_exhausted_never_wraps(ctx):
    with Workdir("serial-exhausted") as wd:
        conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "serial.count_max": "10", "serial.T.prefix": "T",
                "serial.T.digits": "2", "serial.T.step": "30"}
        d = wd.leafd(conf=conf).start()
        got = []
        for _ in range(9):
            got += d.get("/serial/T?count=10&format=json").json()["ids"]
        r = d.get("/serial/T?count=10")
        err(r, 503, "serial_exhausted")
        check("99" in r.json()["message"], "the limit is in the message: %r" % r.json())
        got += d.get("/serial/T?count=9&format=json").json()["ids"]
        eq([int(s[-2:]) for s in got], list(range(1, 100)), "1..99, nothing else")
        err(d.get("/serial/T"), 503, "serial_exhausted")
        m = d.get("/metrics").text
        check('leafd_http_503_total{route="serial",code="serial_exhausted"} 2' in m,
              "503 metric:\n%s" % m)
        # A restart does not wrap either: the row is at its end.
        d.stop()
        d2 = wd.leafd(conf=conf, port=d.port, name="leafd2").start()
        err(d2.get("/serial/T"), 503, "serial_exhausted")


def test_dst_fall_back_repeats_nothing(ctx):
    # New York, 2026-11-01: 01:59:59 EDT is followed by 01:00:00 EST. The
    # database clock is set to 01:59:57 EDT when the node starts.
    with Workdir("serial-dst") as wd:
        target = ms_utc(2026, 11, 1, 5, 59, 57)
        conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "serial.NY.prefix": "NY", "serial.NY.zone": "America/New_York",
                "serial.NY.pattern": "yyyyMMddHHmmss", "serial.NY.step": "100"}
        d = wd.leafd(conf=conf, env={OFFSET_ENV: str(target - now_ms())}).start()
        got = []
        end = time.time() + 6
        while time.time() < end:
            got += d.get("/serial/NY?count=5&format=json").json()["ids"]
            time.sleep(0.05)
        eq(len(set(got)), len(got), "no duplicate")
        times = [s[2:16] for s in got]
        check(all(t.startswith("20261101") for t in times), "one day: %r" % set(times))
        hours = [t[8:10] for t in times]
        check("01" in hours and not set(hours) - {"01"}, "all in the 01 hour: %r" % set(hours))
        minutes = [t[10:12] for t in times]
        i59 = max(i for i, m in enumerate(minutes) if m == "59")
        check(any(m == "00" for m in minutes[i59 + 1:]),
              "the hour repeats after 01:59 (fall-back): %r" % times[i59:i59 + 3])
        seq = [int(s[-6:]) for s in got]
        eq(seq, sorted(seq), "the day's sequence goes on through the repeated hour")
        eq(seq[0], 1, "the day starts at 1")


def test_snowflake_source_sequence_random(ctx):
    """Snowflake serials with snowflake.sequence_random and 8 sequence bits:
    a batch of 256 serials is a millisecond's whole sequence, which wraps
    at its random offset (docs/id-kinds.md). The node serves it, every
    serial distinct; before, an assert that a batch's IDs increase aborted
    the process."""
    with Workdir("serial-sf-random") as wd:
        conf = {"leaf.segment.enable": "false", "leaf.snowflake.enable": "true",
                "snowflake.cache_file": os.path.join(wd.path, "sf.json"),
                "snowflake.worker_id": "7", "snowflake.sequence_bits": "8",
                "snowflake.timestamp_bits": "45",
                "snowflake.sequence_random": "true", "serial.count_max": "1000",
                "serial.ORD.prefix": "ORD", "serial.ORD.source": "snowflake",
                "serial.ORD.pattern": "yyyyMMddHHmmssSSS"}
        d = wd.leafd(conf=conf).start()
        got = []
        for _ in range(20):
            r = d.get("/serial/ORD?count=256&format=json")
            eq(r.status, 200, "status %r" % r)
            got += r.json()["ids"]
        eq(len(set(got)), len(got), "no duplicate among %d" % len(got))
        eq(d.get("/health").status, 200, "the node still serves")


def test_snowflake_source(ctx):
    with Workdir("serial-sf") as wd:
        conf = {"leaf.segment.enable": "false", "leaf.snowflake.enable": "true",
                "snowflake.cache_file": os.path.join(wd.path, "sf.json"),
                "snowflake.worker_id": "7", "serial.count_max": "1000",
                "serial.ORD.prefix": "ORD", "serial.ORD.source": "snowflake",
                "serial.ORD.pattern": "yyyyMMddHHmmssSSS",
                "serial.W.prefix": "W", "serial.W.worker_id": "true",
                "serial.W.step": "1000"}
        d = wd.leafd(conf=conf).start()
        t0 = datetime.datetime.now(datetime.timezone.utc)
        got = []
        for _ in range(20):
            r = d.get("/serial/ORD?count=1000&format=json")
            eq(r.status, 200, "status %r" % r)
            got += r.json()["ids"]
        eq(len(set(got)), len(got), "no duplicate")
        for s in got[:: 997]:
            check(re.fullmatch(r"ORD\d{17}0007\d{4}", s), "form of %s" % s)
            t = datetime.datetime.strptime(s[3:20] + "000", "%Y%m%d%H%M%S%f").replace(
                tzinfo=datetime.timezone.utc)
            check(abs((t - t0).total_seconds()) < 60, "time part %s near now" % s)
        eq(got, sorted(got), "time-ordered")
        eq(d.get("/health").json()["serial"]["codes"], 2, "health")
        # source = segment with the node's worker ID: date, worker, sequence.
        w = d.get("/serial/W?count=2&format=json").json()["ids"]
        today = t0.strftime("%Y%m%d")
        eq([s[:9] + s[9:13] for s in w], ["W" + today + "0007"] * 2, "worker in %r" % w)
        eq([int(s[13:]) for s in w], [1, 2], "sequence after the worker")


def test_two_nodes_mariadb_period_change(ctx):
    """Two nodes on one MariaDB, the database clock 4 s before midnight in
    Asia/Shanghai: every serial is unique, each node's dates never go back,
    and the sequence restarts exactly once (two rows, each starting at 1).
    One node's own clock runs an hour ahead (libfaketime): it plays no part."""
    db = ctx.shared_mariadb()
    code = "P%d" % random.randrange(10 ** 8)
    # The row is the printed shape's: a prefix of this run's own (pid and
    # a random number), so that concurrent runs never share a row.
    prefix = "P%07d%06d" % (os.getpid() % 10 ** 7, random.randrange(10 ** 6))
    dt = slice(len(prefix), len(prefix) + 8)        # the date printed
    with Workdir("serial-2nodes") as wd:
        midnight = ms_utc(2026, 11, 30, 16, 0, 0)        # 00:00 in Shanghai
        target = midnight - 4000
        offset = target - now_ms()
        conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "segment.mysql.url": db.url, "serial.count_max": "10",
                "serial.%s.prefix" % code: prefix, "serial.%s.zone" % code: "Asia/Shanghai",
                "serial.%s.step" % code: "20000"}
        ahead = {"LD_PRELOAD": faketime_preload(wd.path), "FAKETIME": "+1h",
                 "FAKETIME_DONT_FAKE_MONOTONIC": "1", OFFSET_ENV: str(offset)}
        nodes = [wd.leafd(conf=conf, name="a", env={OFFSET_ENV: str(offset)}).start(),
                 wd.leafd(conf=conf, name="b", env=ahead).start()]
        got = [[] for _ in range(4)]        # per client, in its order
        when = [[] for _ in range(4)]       # database time: sent, answered
        stop = time.time() + 8

        def client(i):
            c = Client(nodes[i % 2].port)
            while time.time() < stop:
                sent = now_ms() + offset
                r = c.get("/serial/%s?count=%d&format=json" % (code, 1 + i % 3))
                check(r.status == 200, "node %d: %r" % (i % 2, r))
                got[i].append(r.json()["ids"])
                when[i].append((sent, now_ms() + offset))
            c.close()
        ts = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        flat = [s for node in got for batch in node for s in batch]
        check(len(flat) > 200, "enough serials: %d" % len(flat))
        eq(len(set(flat)), len(flat), "no duplicate across the two nodes")
        dates = sorted({s[dt] for s in flat})
        eq(dates, ["20261130", "20261201"], "the two days")
        for s in flat:
            check(re.fullmatch(prefix + r"\d{8}\d{6}", s), "form of %s" % s)
        for n, mine in enumerate(got):
            seen = [b[0][dt] for b in mine]
            eq(seen, sorted(seen), "node %d never goes back a day (client %d)" % (n % 2, n))
            for b, (sent, answered) in zip(mine, when[n]):
                eq(len({s[dt] for s in b}), 1, "a batch is of one day")
                # The day is the database's: never the old day well after
                # its midnight, never the new one well before.
                if b[0][dt] == "20261130":
                    check(sent < midnight + 250, "old day asked %d ms after the "
                          "database's midnight" % (sent - midnight))
                else:
                    check(answered > midnight - 250, "new day answered %d ms before "
                          "the database's midnight" % (midnight - answered))
        for day in dates:
            seqs = sorted(int(s[-6:]) for s in flat if s[dt] == day)
            eq(seqs[0], 1, "day %s starts at 1 (restarts once)" % day)
        shape = "serial.%s.y4mod.0.6" % prefix.lower()
        rows = db.sql("SELECT biz_tag FROM leaf_alloc WHERE biz_tag LIKE '%s:%%' "
                      "ORDER BY biz_tag" % shape).split()
        eq(rows, ["%s:20261130" % shape, "%s:20261201" % shape], "one row per period")


def test_four_nodes_create_a_row_at_once(ctx):
    """Four nodes ask for a period's first serial at the same moment, five
    times (five fresh codes): one row per code, each node a range of its own
    (the firsts are 1, 1 + step, 1 + 2 step, 1 + 3 step), and no load fails
    (INSERT ... ON DUPLICATE KEY UPDATE queues the late nodes for the row's
    exclusive lock; it does not deadlock them)."""
    db = ctx.shared_mariadb()
    base = "Q%d" % random.randrange(10 ** 6)
    codes = ["%s_%d" % (base, k) for k in range(5)]
    shapes = ["serial.%s.y4mod.0.6" % c.lower() for c in codes]
    with Workdir("serial-4nodes") as wd:
        conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "segment.mysql.url": db.url, "serial.count_max": "10",
                "segment.wait_ms": "30000"}     # a busy machine: loads may be slow, never failed
        for code in codes:
            conf["serial.%s.prefix" % code] = code     # prints its own text
            conf["serial.%s.step" % code] = "50"
        nodes = [wd.leafd(conf=conf, name="n%d" % i).start() for i in range(4)]
        for code, shape in zip(codes, shapes):
            barrier = threading.Barrier(4)
            got = [None] * 4

            def ask(i):
                c = Client(nodes[i].port)
                barrier.wait()
                got[i] = c.get("/serial/%s?format=json" % code)
                c.close()
            ts = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            for i, r in enumerate(got):
                eq(r.status, 200, "node %d, code %s: %r" % (i, code, r))
            firsts = sorted(int(r.json()["ids"][0][-6:]) for r in got)
            eq(firsts, [1, 51, 101, 151], "code %s: one row, a range per node" % code)
            rows = db.sql("SELECT COUNT(*) FROM leaf_alloc WHERE biz_tag LIKE '%s:%%'"
                          % shape).split()
            eq(rows, ["1"], "one row for %s" % code)
        for n in nodes:
            check("cannot take a range" not in n.log(), "no load failed:\n%s" % n.log())


def test_mariadb_outage(ctx):
    """MariaDB stops: the numbers held are served, then a clear 503
    serial_unavailable naming the database, /health says so; after a
    restart serials come again without a leafd restart, none repeated."""
    with Workdir("serial-outage") as wd:
        db = wd.mariadb()
        conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "segment.mysql.url": db.url, "segment.wait_ms": "300",
                "segment.db_timeout_ms": "1000", "segment.db_backoff_max_ms": "500",
                "serial.count_max": "10", "serial.O.prefix": "O", "serial.O.step": "100"}
        d = wd.leafd(conf=conf).start()
        # The first load may outlast the short wait on a busy machine (or
        # under ASan): ask until it is served; a 503 takes no serial.
        r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(
            d.get("/serial/O?count=10&format=json")), timeout=30, step=0.2,
            what="the first serials")
        served = r.json()["ids"]
        db.stop()
        r = None
        for _ in range(100):
            r = d.get("/serial/O?count=10&format=json")
            if r.status != 200:
                break
            served += r.json()["ids"]
        check(len(served) >= 100, "served %d held serials with the database down" % len(served))
        err(r, 503, "serial_unavailable")
        check("database is unreachable" in r.json()["message"], "names the cause: %r" % r.json())
        check(r.header("Retry-After") is not None, "Retry-After")
        h = d.get("/health")
        eq(h.status, 503, "health 503 while a code holds nothing and the database is down")
        eq(h.json()["serial"]["db"], "down", "health: serial db down")
        eq(h.json()["serial"]["codes_without_numbers"], 1, "health: the dry code")
        db.restart()
        r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(
            d.get("/serial/O?count=10&format=json")), timeout=30, what="recovery")
        served += r.json()["ids"]
        eq(len(served), len(set(served)), "no duplicate across the outage")
        eq(d.get("/health").json()["serial"]["db"], "up", "health: db up again")


def check_config(wd, lines, want):
    """--check-config refuses lines with want on stderr, exit 2."""
    path = os.path.join(wd.path, "check.conf")
    with open(path, "w") as f:
        f.write("".join(l + "\n" for l in lines))
    r = subprocess.run([LEAFD, "-c", path, "--check-config"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    eq(r.returncode, 2, "--check-config exit status for %r: %r" % (lines, r.stderr))
    check(want.encode() in r.stderr, "--check-config names %r: %r" % (want, r.stderr))


def test_same_text_codes_refused(ctx):
    """Issue 20, finding 3(c): two codes whose serials can be the same text
    (here the default empty prefix, the same pattern and digits) are refused
    at start and by --check-config, naming both codes. Before the fix both
    started from 1 and printed the same serials."""
    with Workdir("serial-same-text") as wd:
        start_fails(wd, ["serial.A.step = 1000", "serial.B.reset = month",
                         "serial.B.pattern = yyyyMMdd"],
                    "bad.conf:4: serial.B.prefix: serial.A (line 3) and serial.B can "
                    "print the same text")
        check_config(wd, ["leaf.segment.enable = true", "serial.PAY.prefix = P",
                          "serial.ORD.prefix = P"],
                     "serial.PAY (line 2) and serial.ORD can print the same text")
        # Different prefixes of one length: they always differ there.
        path = os.path.join(wd.path, "ok.conf")
        with open(path, "w") as f:
            f.write("leaf.segment.enable = true\nserial.PAY.prefix = PA\n"
                    "serial.ORD.prefix = OR\n")
        r = subprocess.run([LEAFD, "-c", path, "--check-config"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        eq(r.returncode, 0, "--check-config accepts PA and OR: %r" % r.stderr)


def test_snowflake_yy_layout_refused(ctx):
    """Issue 20, finding 7: yy with a snowflake layout that lasts over 100
    years would print one time twice; refused, saying what to change."""
    with Workdir("serial-yy") as wd:
        check_config(wd, ["leaf.snowflake.enable = true", "snowflake.timestamp_bits = 42",
                          "snowflake.sequence_bits = 11", "serial.S.source = snowflake",
                          "serial.S.pattern = yyMMddHHmmssSSS"],
                     "serial.S.pattern: yy repeats every 100 years, and the snowflake "
                     "layout (snowflake.timestamp_bits = 42) lasts 139 years, so a "
                     "printed time would repeat: use yyyy, or at most 41 timestamp bits")


def test_wide_worker_id(ctx):
    """Issue 20, finding 5: a worker ID of 10000 or more (14 worker bits)
    with serial.<code>.worker_id = true. Before the fix the first serial
    request aborted the process (an assert in serial_fmt.c); now the worker
    field is as wide as the layout's largest worker ID (5 digits here)."""
    with Workdir("serial-wide-worker") as wd:
        conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "true",
                "snowflake.cache_file": os.path.join(wd.path, "sf.json"),
                "snowflake.worker_bits": "14", "snowflake.sequence_bits": "8",
                "snowflake.worker_id": "10000",
                "serial.W.prefix": "W", "serial.W.worker_id": "true",
                "serial.N.prefix": "N", "serial.N.worker_id": "true",
                "serial.N.source": "snowflake", "serial.N.pattern": "yyyyMMddHHmmssSSS"}
        d = wd.leafd(conf=conf).start()
        r = d.get("/serial/W?count=3&format=json")
        check(d.proc.poll() is None, "leafd is still running:\n%s" % d.log())
        eq(r.status, 200, "status %r" % r)
        today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
        for k, s in enumerate(r.json()["ids"]):
            check(re.fullmatch(r"W\d{8}10000\d{6}", s), "form of %s" % s)
            eq(int(s[14:]), k + 1, "sequence of %s" % s)
        check(r.json()["ids"][0][1:9] in (today, str(int(today) + 1)), "date")
        r = d.get("/serial/N?count=2&format=json")
        eq(r.status, 200, "snowflake source: %r" % r)
        check(re.fullmatch(r"N\d{17}10000\d{3}", r.json()["ids"][0]), "form of %r" % r.json())


def test_old_row_format_carried(ctx):
    """Rows of the key format before issue 20 ("CODE:20261123") exist in
    deployed databases: the new row of the same code and day starts above
    the old row's max_id, not at 1."""
    db = ctx.shared_mariadb()
    code = "OLD%d" % random.randrange(10 ** 6)
    with Workdir("serial-old-rows") as wd:
        offset = ms_utc(2026, 11, 23, 12) - now_ms()
        db.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES "
               "('%s:20261123', 731, 1000, 'serial period')" % code)
        conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "segment.mysql.url": db.url, "serial.%s.prefix" % code: code,
                "serial.%s.step" % code: "100"}
        d = wd.leafd(conf=conf, env={OFFSET_ENV: str(offset)}).start()
        ids = d.get("/serial/%s?count=5&format=json" % code).json()["ids"]
        eq([s[:len(code) + 8] for s in ids], [code + "20261123"] * 5, "the day")
        eq([int(s[-6:]) for s in ids], list(range(731, 736)), "above the old row")
        rows = db.sql("SELECT biz_tag, max_id FROM leaf_alloc WHERE biz_tag LIKE "
                      "'serial.%s.%%'" % code.lower()).split()
        eq(rows, ["serial.%s.y4mod.0.6:20261123" % code.lower(), "831"], "the new row")
