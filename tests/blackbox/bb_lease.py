"""Black-box tests of leases (GET /segment/<biz_tag>/lease?size=N) and of
Tinyid's API (/tinyid/id/...), on the embedded SQLite store and on a real,
throwaway MariaDB with several nodes.

BB_LEASE_MIX_SECONDS sets how long the five-node mix runs (default 30,
as the issue asks)."""
import os
import re
import socket
import sqlite3
import struct
import threading
import time

from bbutil import Client, Workdir, check, eq, parallel, wait_for

TESTS = [
    "test_lease_forms_and_errors",
    "test_lease_buffers_or_table_never_overlap",
    "test_lease_counted_apart",
    "test_tinyid_bodies",
    "test_tinyid_client_arithmetic",
    "test_tinyid_tokens",
    "test_mariadb_five_nodes_mixed",
    "test_lease_with_the_database_down",
    "test_lease_dropped_while_waiting",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): outage and five-node scenarios, bound by their waits.
PLAIN_ONLY = {
    "test_lease_with_the_database_down",
    "test_mariadb_five_nodes_mixed",
}


def ranges_of(r):
    """The [start, end) ranges of a text lease answer."""
    out = []
    for line in r.text.splitlines():
        a, b = line.split()
        out.append((int(a), int(b)))
    return out


def no_overlap(ranges, what):
    ranges = sorted(ranges)
    for (a0, a1), (b0, b1) in zip(ranges, ranges[1:]):
        check(a1 <= b0, "%s: [%d, %d) overlaps [%d, %d)" % (what, a0, a1, b0, b1))


def err(r, status, code):
    eq(r.status, status, "status of %r" % r)
    eq(r.json()["error"], code, "error code of %r" % r)


def test_lease_forms_and_errors(ctx):
    with Workdir("lease1") as wd:
        d = wd.leafd(flags=["--segment.lease_max=5000"]).start()
        r = d.get("/segment/demo/lease?size=10")
        eq(r.status, 200, "lease: %r" % r)
        eq(r.header("Cache-Control"), "no-store", "never cached")
        rs = ranges_of(r)
        eq(sum(b - a for a, b in rs), 10, "ten IDs in %r" % rs)
        r = d.get("/segment/demo/lease?size=7&format=json")
        eq(r.status, 200, "json lease")
        j = r.json()
        eq(j["biz_tag"], "demo", "biz_tag")
        for x in j["ranges"]:
            check(isinstance(x["start"], str) and isinstance(x["end"], str),
                  "IDs as strings: %r" % j)
        eq(sum(int(x["end"]) - int(x["start"]) for x in j["ranges"]), 7, "seven IDs")
        r = d.get("/segment/demo/lease?size=3", {"Accept": "application/json"})
        check(r.json()["ranges"], "Accept picks JSON")
        for q in ["", "?size=0", "?size=5001", "?size=-1", "?size=x", "?size=99999999999999999999"]:
            err(d.get("/segment/demo/lease" + q), 400, "invalid_size")
        err(d.get("/segment/demo/lease?size=1&size=2"), 400, "repeated_parameter")
        err(d.get("/segment/demo/lease?size=1&format=xml"), 400, "invalid_format")
        err(d.get("/segment/no-such-tag/lease?size=5"), 404, "unknown_biz_tag")
        err(d.get("/segment/b%20d/lease?size=5"), 400, "invalid_biz_tag")
        r = d.client.request("HEAD", "/segment/demo/lease?size=5")
        eq(r.status, 405, "HEAD takes no lease")


def test_lease_buffers_or_table_never_overlap(ctx):
    """Small leases come from the buffers, large ones from the table; both
    mixed with single IDs and batches from many threads: nothing twice."""
    with Workdir("lease2") as wd:
        # A long wait: this test is about overlaps, and on a busy machine
        # (or under ASan) a segment load can take longer than the default.
        d = wd.leafd(flags=["--threads=2", "--segment.wait_ms=5000"]).start()
        # One lease of each source first, so that both are used whatever the
        # threads below meet: a small lease comes from the buffers only while
        # they hold twice its size, which under load they may never do.
        first = d.get("/segment/demo").ids()
        wait_for(lambda: [t for t in d.get("/cache").json()["tags"]
                          if t["key"] == "demo"][0]["available"] >= 100,
                 timeout=30, what="the demo buffers loaded")
        ranges = [(x, x + 1) for x in first]
        for size in (20, 100000):          # buffers, then the table
            r = d.get("/segment/demo/lease?size=%d" % size)
            eq(r.status, 200, "lease of %d: %r" % (size, r))
            ranges += ranges_of(r)

        def worker(i):
            c = Client(d.port)
            ids, ranges = [], []
            for k in range(120):
                if i % 3 == 0:
                    r = c.get("/segment/demo/lease?size=%d" % (1 + (k * 37) % 400))
                    eq(r.status, 200, "small lease %r" % r)
                    ranges += ranges_of(r)
                elif i % 3 == 1:
                    r = c.get("/segment/demo/lease?size=%d" % (2000 + k * 13))
                    eq(r.status, 200, "large lease %r" % r)
                    ranges += ranges_of(r)
                else:
                    r = c.get("/segment/demo?count=%d" % (1 + k % 5))
                    eq(r.status, 200, "IDs %r" % r)
                    ids += r.ids()
            c.close()
            return ids, ranges
        res = parallel(6, worker)
        ranges += [x for _, rs in res for x in rs] + [(x, x + 1) for ids, _ in res for x in ids]
        no_overlap(ranges, "leases and IDs")
        m = d.get("/metrics").text
        db = int(re.search(r'leafd_segment_ids_leased_total\{biz_tag="demo",source="db"\} (\d+)', m).group(1))
        buf = int(re.search(r'leafd_segment_ids_leased_total\{biz_tag="demo",source="buffer"\} (\d+)', m).group(1))
        check(db > 0 and buf > 0, "both sources used (buffer %d, db %d)" % (buf, db))


def test_lease_counted_apart(ctx):
    with Workdir("lease3") as wd:
        d = wd.leafd().start()
        eq(d.get("/segment/demo?count=5").status, 200, "served")
        time_end = time.time() + 30
        while d.get("/cache").json()["tags"][0]["available"] < 100 and time.time() < time_end:
            time.sleep(0.05)
        eq(d.get("/segment/demo/lease?size=20").status, 200, "small lease")
        eq(d.get("/segment/demo/lease?size=100000").status, 200, "large lease")
        tag = [t for t in d.get("/cache").json()["tags"] if t["key"] == "demo"][0]
        eq(tag["issued"], 5, "served IDs exclude leases: %r" % tag)
        eq(tag["leases"]["count"], 2, "leases counted: %r" % tag)
        eq(tag["leases"]["ids_from_buffers"] + tag["leases"]["ids_from_db"], 100020,
           "leased IDs: %r" % tag)
        eq(tag["leases"]["ids_from_db"], 100000, "the large one from the table: %r" % tag)
        m = d.get("/metrics").text
        check('leafd_segment_ids_issued_total{biz_tag="demo"} 5' in m, "metric served")
        check('leafd_segment_leases_total{biz_tag="demo"} 2' in m, "metric leases")
        check('route="lease",status="200"} 2' in m, "route counted")


def test_tinyid_bodies(ctx):
    with Workdir("tiny1") as wd:
        d = wd.leafd().start()
        r = d.get("/tinyid/id/nextId?bizType=demo&batchSize=3")
        eq(r.status, 200, "nextId")
        m = re.fullmatch(rb'\{"data":\[(\d+),(\d+),(\d+)\],"code":200,"message":""\}', r.body)
        check(m, "nextId body %r" % r.body)
        a = [int(x) for x in m.groups()]
        eq(a, [a[0], a[0] + 1, a[0] + 2], "increasing")
        r = d.client.request("POST", "/tinyid/id/nextIdSimple?bizType=demo&batchSize=2")
        check(re.fullmatch(rb"\d+,\d+", r.body), "nextIdSimple body %r" % r.body)
        r = d.get("/tinyid/id/nextIdSimple?bizType=demo")
        check(re.fullmatch(rb"\d+", r.body), "one ID, no comma: %r" % r.body)
        r = d.get("/tinyid/id/nextSegmentId?bizType=demo")
        m = re.fullmatch(rb'\{"data":\{"maxId":(\d+),"loadingId":(\d+),"currentId":(\d+),'
                         rb'"delta":1,"remainder":0\},"code":200,"message":""\}', r.body)
        check(m, "nextSegmentId body %r" % r.body)
        mx, ld, cur = map(int, m.groups())
        eq(mx - cur, 1000, "a segment is the row's step (demo: 1000)")
        eq(ld, cur + 200, "loading at 20%")
        r = d.client.request("POST", "/tinyid/id/nextSegmentIdSimple?bizType=demo")
        check(re.fullmatch(rb"\d+,\d+,\d+,1,0", r.body), "simple body %r" % r.body)
        # Errors as Tinyid answers them: HTTP 200, code 6 or an empty body.
        r = d.get("/tinyid/id/nextId?bizType=nope")
        eq((r.status, r.body), (200, b'{"data":null,"code":6,"message":'
                                     b'"error query segmentId: can not find biztype:nope"}'),
           "unknown bizType")
        r = d.get("/tinyid/id/nextSegmentId?bizType=nope")
        eq(r.body, b'{"data":null,"code":6,"message":"can not find biztype:nope"}', "unknown")
        for p in ["nextIdSimple", "nextSegmentIdSimple"]:
            r = d.get("/tinyid/id/%s?bizType=nope" % p)
            eq((r.status, r.body), (200, b""), "empty body on error (%s)" % p)
        r = d.get("/tinyid/id/nextId?bizType=demo&batchSize=0")
        eq(r.body, b'{"data":[],"code":200,"message":""}', "batchSize 0")
        r = d.get("/tinyid/id/nextId?bizType=demo&batchSize=200000")
        eq(len(r.json()["data"]), 100000, "batchSize cut to 100000")
        r = d.get("/tinyid/id/nextId")
        eq(r.body, b'{"data":null,"code":5,"message":"token is error"}', "no bizType")
        err(d.get("/tinyid/id/nextId?bizType=demo&batchSize=x"), 400, "invalid_batch_size")
        err(d.get("/tinyid/id/other?bizType=demo"), 404, "not_found")
        err(d.client.request("PUT", "/tinyid/id/nextId?bizType=demo"), 405, "method_not_allowed")


def tinyid_client(simple):
    """Tinyid's client SegmentId over one nextSegmentIdSimple answer: the IDs
    it hands out and where it starts loading the next segment."""
    cur, loading, mx, delta, rem = map(int, simple.split(b","))
    # init(): align currentId so that currentId % delta == remainder.
    if cur % delta != rem:
        for _ in range(delta + 1):
            cur += 1
            if cur % delta == rem:
                cur -= delta
                break
    ids, preload_at = [], None
    while True:
        cur += delta
        if cur > mx:
            break
        if cur >= loading and preload_at is None:
            preload_at = cur
        ids.append(cur)
    return ids, preload_at, (mx - (int(simple.split(b",")[0]))) * 20 // 100


def test_tinyid_client_arithmetic(ctx):
    """Model Tinyid's client on leafd's answers: the first ID a segment
    gives, its preload point and its last ID; with leafd's own IDs from the
    same tag, nothing twice."""
    with Workdir("tiny2") as wd:
        d = wd.leafd().start()
        seen = []
        for k in range(5):
            r = d.client.request("POST", "/tinyid/id/nextSegmentIdSimple?bizType=demo")
            eq(r.status, 200, "segment")
            cur, loading, mx, delta, rem = map(int, r.body.split(b","))
            eq((delta, rem), (1, 0), "one database: delta 1, remainder 0")
            ids, preload_at, fifth = tinyid_client(r.body)
            eq(ids[0], cur + 1, "the first ID is currentId + delta")
            eq(ids[-1], mx, "the last ID is maxId")
            eq(len(ids), 1000, "the row's step")
            eq(preload_at, cur + fifth, "preloads at 20%")
            seen += [(i, i + 1) for i in ids]
            seen += [(x, x + 1) for x in d.get("/segment/demo?count=50").ids()]
            seen += ranges_of(d.get("/segment/demo/lease?size=%d" % (10 + 900 * k)))
        no_overlap(seen, "Tinyid segments, IDs and leases")


def test_tinyid_tokens(ctx):
    with Workdir("tiny3") as wd:
        tokens = os.path.join(wd.path, "tokens")
        with open(tokens, "w") as f:
            f.write("tok-demo-0001 demo\ntok-other-002 other\n")
        d = wd.leafd(flags=["--auth.tokens_file=" + tokens,
                            "--segment.lease_max=1000"]).start()
        bad = b'{"data":null,"code":5,"message":"token is error"}'
        for q in ["", "&token=tok-other-002", "&token=wrong-wrong"]:
            eq(d.get("/tinyid/id/nextId?bizType=demo" + q).body, bad, "token %r" % q)
            eq(d.get("/tinyid/id/nextSegmentId?bizType=demo" + q).body, bad, "token %r" % q)
            for p in ["nextIdSimple", "nextSegmentIdSimple"]:
                r = d.get("/tinyid/id/%s?bizType=demo%s" % (p, q))
                eq((r.status, r.body), (200, b""), "%s with token %r" % (p, q))
        r = d.get("/tinyid/id/nextId?bizType=demo&token=tok-demo-0001")
        eq(r.json()["code"], 200, "right token: %r" % r)
        r = d.client.request("POST", "/tinyid/id/nextSegmentIdSimple?token=tok-demo-0001&bizType=demo")
        check(re.fullmatch(rb"\d+,\d+,\d+,1,0", r.body), "right token, POST: %r" % r.body)
        err(d.get("/tinyid/id/nextId?bizType=demo&token=a&token=b"), 400, "repeated_parameter")
        # A batch over segment.lease_max: without the token the answer is
        # Tinyid's "token is error", not the node's limit.
        big = "/tinyid/id/nextId?bizType=demo&batchSize=5000"
        eq(d.get(big).body, bad, "over the limit, no token")
        r = d.get(big + "&token=tok-demo-0001")
        err(r, 400, "invalid_batch_size")
        check("segment.lease_max" in r.json()["message"], "names the limit: %r" % r)
        d.stop()
        check("tok-demo-0001" not in d.log(), "tokens never logged")


def test_mariadb_five_nodes_mixed(ctx):
    """Leases from three nodes and single IDs from two more, on one MariaDB,
    for BB_LEASE_MIX_SECONDS (30): no ID twice across every range and ID."""
    seconds = float(os.environ.get("BB_LEASE_MIX_SECONDS", "30"))
    db = ctx.shared_mariadb()
    db.sql("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
           "VALUES ('lease-mix', 1, 2000, 'test')")
    # A long wait and query timeout: this test is about overlaps, and on a
    # loaded 2-core machine five nodes queue on the tag's row lock for longer
    # than 500 ms, or the 3 s query timeout ("Lost connection ... during
    # query": leafd gave up and answered 503).
    conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
            "segment.mysql.url": db.url, "threads": "1", "segment.wait_ms": "15000",
            "segment.db_timeout_ms": "10000"}
    with Workdir("leasemix") as wd:
        nodes = [wd.leafd(conf=conf, name="n%d" % i).start() for i in range(5)]
        stop = time.time() + seconds
        lock = threading.Lock()
        counts = {"lease": 0, "single": 0}

        def worker(i):
            node = nodes[i % 5]
            c = Client(node.port)
            out = []
            k = 0
            while time.time() < stop:
                k += 1
                if i % 5 < 3:
                    size = (1, 50, 700, 5000, 60000)[k % 5]
                    r = c.get("/segment/lease-mix/lease?size=%d" % size)
                    eq(r.status, 200, "lease on n%d: %r" % (i % 5, r))
                    rs = ranges_of(r)
                    eq(sum(b - a for a, b in rs), size, "lease size")
                    out += rs
                    kind = "lease"
                else:
                    r = c.get("/segment/lease-mix?count=%d" % (1 + k % 3))
                    eq(r.status, 200, "IDs on n%d: %r" % (i % 5, r))
                    out += [(x, x + 1) for x in r.ids()]
                    kind = "single"
                with lock:
                    counts[kind] += 1
            c.close()
            return out
        res = parallel(10, worker)
        ranges = [x for r in res for x in r]
        no_overlap(ranges, "five nodes")
        check(counts["lease"] > 50 and counts["single"] > 50, "both kinds ran: %r" % counts)
        ids = sum(b - a for a, b in ranges)
        print("     %.0f s: %d leases, %d single requests, %d IDs, 0 overlaps"
              % (seconds, counts["lease"], counts["single"], ids))


def test_lease_with_the_database_down(ctx):
    """MariaDB stopped: a lease the buffers can hold is still answered, one
    that needs the table is a prompt 503 ids_exhausted (Tinyid: code 6 or an
    empty body); after a restart leases come again, and nothing repeats."""
    with Workdir("leasedown") as wd:
        db = wd.mariadb()
        db.sql("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
               "VALUES ('down', 1, 5000, 'test')")
        conf = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                "segment.mysql.url": db.url, "segment.wait_ms": "400",
                "segment.db_backoff_max_ms": "500", "segment.db_timeout_ms": "60000"}
        d = wd.leafd(conf=conf).start()
        seen = []
        # The first load may outlast the short wait on a busy machine (or
        # under ASan): ask until it is served; a 503 takes no ID.
        wait_for(lambda: d.get("/segment/down?count=600").status == 200, timeout=30,
                 step=0.2, what="serving (past the prefetch point)")
        wait_for(lambda: [t for t in d.get("/cache").json()["tags"]
                          if t["key"] == "down"][0]["next_ready"], what="next buffer")
        seen += ranges_of(d.get("/segment/down/lease?size=50000"))     # from the table
        db.stop()
        r = d.get("/segment/down/lease?size=100")
        eq(r.status, 200, "a small lease from the buffers: %r" % r)
        seen += ranges_of(r)
        t0 = time.time()
        r = d.get("/segment/down/lease?size=50000")
        eq(r.status, 503, "a table lease with the database down: %r" % r)
        eq(r.json()["error"], "ids_exhausted", "code")
        check(r.header("Retry-After") is not None, "Retry-After")
        # not after db_timeout_ms (60 s), nor once the database is back
        check(time.time() - t0 < 30, "answered promptly (%.1f s)" % (time.time() - t0))
        r = d.client.request("POST", "/tinyid/id/nextSegmentIdSimple?bizType=down")
        eq((r.status, r.body), (200, b""), "Tinyid: an empty body")
        r = d.get("/tinyid/id/nextSegmentId?bizType=down")
        eq(r.json()["code"], 6, "Tinyid: code 6 %r" % r.body)
        db.restart()
        r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(
            d.get("/segment/down/lease?size=50000")), timeout=20, what="leases again")
        seen += ranges_of(r)
        seen += [(x, x + 1) for x in d.get("/segment/down?count=100").ids()]
        no_overlap(seen, "across the outage")


def test_lease_dropped_while_waiting(ctx):
    """Clients that go away (RST) while their leases wait for the database:
    each job is given back (before, every one leaked: the ASan lane fails
    on a leak at exit), and the jobs the loader had not started never touch
    the table (loader.h: a job whose caller has gone)."""
    with Workdir("lease-drop") as wd:
        d = wd.leafd(flags=["--segment.wait_ms=30000",
                            "--segment.db_timeout_ms=60000"]).start()
        eq(d.get("/segment/demo").status, 200, "demo loaded")
        db = sqlite3.connect(os.path.join(wd.path, "leafd.db"), isolation_level=None,
                             timeout=60)
        before = db.execute("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'demo'").fetchone()[0]
        db.execute("BEGIN IMMEDIATE")           # hold the write lock
        socks = []
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", d.port), 10)
            s.sendall(b"GET /segment/demo/lease?size=50000 HTTP/1.1\r\nHost: x\r\n\r\n")
            socks.append(s)

        def waiting():
            m = re.search(r"^leafd_http_requests_waiting (\d+)$", d.get("/metrics").text, re.M)
            return m is not None and int(m.group(1)) >= 4
        wait_for(waiting, 60, what="four leases waiting for the database")
        for s in socks:                         # RST, not FIN: the client is gone
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        wait_for(lambda: not waiting(), 60, what="the dropped leases to go")
        db.execute("ROLLBACK")
        r = d.get("/segment/demo/lease?size=10")
        eq(r.status, 200, "a lease after: %r" % r)
        after = db.execute("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'demo'").fetchone()[0]
        # At most the jobs the loader had started when the clients went
        # (one per database thread: segment.db_threads is 2, so 100,000,
        # both waiting on the lock) and the new lease's refill; never all
        # four (200,000).
        check(after - before < 3 * 50000, "dropped jobs skipped the table: max_id "
              "%d -> %d" % (before, after))
        eq(d.stop(), 0, "exit status (an ASan build reports leaks here)")
        check("LeakSanitizer" not in d.log(), "no leak:\n%s" % d.log()[-3000:])
