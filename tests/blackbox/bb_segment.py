"""Black-box tests of segment mode on the embedded SQLite store, the HTTP
API's errors, the pages, the command line and signals."""
import os
import signal
import subprocess
import time

from bbutil import (LEAFD, Workdir, check, eq, parallel, raw_request, wait_for)

TESTS = [
    "test_embedded_default_serves_demo",
    "test_batches_and_json",
    "test_bad_input_errors",
    "test_mode_disabled",
    "test_pages",
    "test_new_tag_and_unknown_tag",
    "test_restart_continues_above",
    "test_concurrent_clients_no_duplicates",
    "test_cli_help_and_check_config",
    "test_sigterm_and_sighup",
    "test_bad_row_stops_only_its_tag",
    "test_edges_of_the_id_space",
    "test_batch_over_the_range_limit",
]


def err(r, status, code):
    eq(r.status, status, "status of %r" % r)
    eq(r.header("Content-Type"), "application/json", "error content type")
    j = r.json()
    eq(j.get("error"), code, "error code")
    check(len(j.get("message", "")) > 10, "error message too short: %r" % j)


def test_embedded_default_serves_demo(ctx):
    with Workdir("embedded") as wd:
        d = wd.leafd().start()
        r = d.get("/segment/demo")
        eq(r.status, 200, "status")
        eq(r.header("Content-Type"), "text/plain", "content type")
        check(r.text.endswith("\n"), "ID ends with a newline")
        a = int(r.text)
        b = int(d.get("/segment/demo").text)
        check(b > a, "IDs increase: %d then %d" % (a, b))
        check(os.path.exists(os.path.join(wd.path, "leafd.db")), "leafd.db created")
        # Leaf's path answers too.
        r = d.get("/api/segment/get/demo")
        eq(r.status, 200, "leaf path status")
        check(int(r.text) > b, "leaf path ID increases")
        # HEAD on an ID route takes no ID: 405 (issue 9, item 9).
        r = d.client.request("HEAD", "/segment/demo")
        eq(r.status, 405, "HEAD status")
        eq(r.body, b"", "HEAD body")
        eq(d.stop(), 0, "exit code on SIGTERM")


def test_batches_and_json(ctx):
    with Workdir("batch") as wd:
        d = wd.leafd(flags=["--segment.count_max=5000"]).start()
        r = d.get("/segment/demo?count=5")
        ids = r.ids()
        eq(len(ids), 5, "count=5")
        eq(ids, sorted(ids), "increasing")
        eq(len(set(ids)), 5, "distinct")
        # Across several segment ends (demo's step is 1000).
        r = d.get("/segment/demo?count=4500")
        ids2 = r.ids()
        eq(len(ids2), 4500, "count=4500")
        check(all(x < y for x, y in zip(ids2, ids2[1:])), "increasing across segments")
        check(ids2[0] > ids[-1], "after the previous batch")
        # JSON by Accept and by ?format=json; IDs are strings.
        for path, hdr in (("/segment/demo?count=3", {"Accept": "application/json"}),
                          ("/segment/demo?count=3&format=json", {})):
            r = d.get(path, hdr)
            eq(r.status, 200, "json status")
            eq(r.header("Content-Type"), "application/json", "json content type")
            j = r.json()
            eq(j["biz_tag"], "demo", "biz_tag")
            eq(len(j["ids"]), 3, "3 ids")
            check(all(isinstance(x, str) for x in j["ids"]), "ids are strings")
        r = d.get("/segment/demo?format=json")
        eq(len(r.json()["ids"]), 1, "single id json")
        # ?format=text wins over Accept.
        r = d.get("/segment/demo?format=text", {"Accept": "application/json"})
        eq(r.header("Content-Type"), "text/plain", "format=text")


def test_bad_input_errors(ctx):
    with Workdir("badinput") as wd:
        d = wd.leafd().start()
        err(d.get("/segment/no-such-tag"), 404, "unknown_biz_tag")
        for bad in ["/segment/", "/segment", "/segment/" + "a" * 129,
                    "/segment/a%20b", "/segment/a%2Fb", "/segment/a%00b",
                    "/segment/a%zz", "/segment/a%2", "/segment/%C3%A9",
                    "/segment/a'%3B%20DROP%20TABLE%20leaf_alloc%3B--",
                    "/segment/a/b", "/api/segment/get/"]:
            err(d.get(bad), 400, "invalid_biz_tag")
        # 128 bytes is fine (unknown, but well-formed).
        err(d.get("/segment/" + "a" * 128), 404, "unknown_biz_tag")
        # Percent-encoded valid characters decode to the real tag.
        eq(d.get("/segment/%64emo").status, 200, "percent-encoded demo")
        for q in ["count=0", "count=-1", "count=abc", "count=1001", "count=",
                  "count=1e3", "count=99999999999999999999999", "count=%205"]:
            err(d.get("/segment/demo?" + q), 400, "invalid_count")
        err(d.get("/segment/demo?format=xml"), 400, "invalid_format")
        for m in ["POST", "PUT", "DELETE"]:
            r = d.client.request(m, "/segment/demo")
            err(r, 405, "method_not_allowed")
            eq(r.header("Allow"), "GET, HEAD", "Allow header")
        err(d.get("/nope"), 404, "not_found")
        eq(d.get("/").status, 302, "/ redirects to the console")
        # The database was not touched by any of it.
        rows = d.get("/db").json()["rows"]
        eq(sorted(r["biz_tag"] for r in rows), ["demo"], "only demo in leaf_alloc")
        # The HTTP layer's own limits.
        out = raw_request(d.port, b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        check(out.startswith(b"HTTP/1.1 414"), "long URL: %r" % out[:40])
        out = raw_request(d.port, b"GET / HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n")
        check(out.startswith(b"HTTP/1.1 431"), "big header: %r" % out[:40])
        out = raw_request(d.port, b"NONSENSE\r\n\r\n")
        check(out.startswith(b"HTTP/1.1 400"), "malformed: %r" % out[:40])
        eq(d.get("/segment/demo").status, 200, "still serving")


def test_mode_disabled(ctx):
    with Workdir("disabled") as wd:
        d = wd.leafd(conf={"leaf.snowflake.enable": "true",
                           "snowflake.cache_file": os.path.join(wd.path, "sf.json")}).start()
        err(d.get("/segment/demo"), 404, "mode_disabled")
        err(d.get("/api/segment/get/demo"), 404, "mode_disabled")
        r = d.get("/health")
        eq(r.status, 200, "health with segment off")
        eq(r.json()["segment"]["enabled"], False, "segment disabled in health")


def test_pages(ctx):
    with Workdir("pages") as wd:
        d = wd.leafd().start()
        ids = d.get("/segment/demo?count=10").ids()
        r = d.get("/health")
        eq(r.status, 200, "health")
        j = r.json()
        eq(j["status"], "ok", "health status")
        eq(j["segment"]["db"], "up", "db up")
        r = d.get("/metrics")
        eq(r.status, 200, "metrics")
        m = r.text
        for needle in ['leafd_http_requests_total{route="segment",status="200"} 1',
                       'leafd_segment_ids_issued_total{biz_tag="demo"} 10',
                       'leafd_segment_step{biz_tag="demo"}',
                       "leafd_segment_load_seconds_bucket",
                       "leafd_segment_load_seconds_count",
                       "leafd_db_errors_total 0",
                       'leafd_segment_ids_available{biz_tag="demo"}',
                       "leafd_db_up 1"]:
            check(needle in m, "metrics lacks %r" % needle)
        c = d.get("/cache").json()
        tag = [t for t in c["tags"] if t["key"] == "demo"][0]
        eq(tag["init_ok"], True, "cache init_ok")
        seg = tag["segments"][tag["pos"]]
        eq(int(seg["value"]), ids[-1] + 1, "cache value is the next ID")
        check("next_ready" in tag and "loading" in tag and "step" in seg, "cache fields")
        db = d.get("/db").json()
        row = [r for r in db["rows"] if r["biz_tag"] == "demo"][0]
        eq(row["step"], 1000, "db step")
        check(int(row["max_id"]) > ids[-1], "db max_id above the IDs issued")
        eq(db["fresh"], True, "db read afresh")


def test_new_tag_and_unknown_tag(ctx):
    with Workdir("newtag") as wd:
        d = wd.leafd(flags=["--segment.refresh_ms=3600000"]).start()
        eq(d.get("/segment/demo").status, 200, "demo")
        err(d.get("/segment/fresh-tag"), 404, "unknown_biz_tag")
        # Insert with sqlite3's C library through python's sqlite3 module.
        import sqlite3
        con = sqlite3.connect(os.path.join(wd.path, "leafd.db"), timeout=10)
        con.execute("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
                    "VALUES ('fresh-tag2', 5000, 100, 'x')")
        con.commit()
        con.close()
        # Not negatively cached: works at once, without waiting for a refresh.
        r = d.get("/segment/fresh-tag2")
        eq(r.status, 200, "new tag works at once: %r" % r)
        eq(int(r.text), 5000, "first ID of the new tag")


def test_restart_continues_above(ctx):
    with Workdir("restart") as wd:
        d = wd.leafd().start()
        last = d.get("/segment/demo?count=50").ids()[-1]
        eq(d.stop(), 0, "SIGTERM exit")
        d2 = wd.leafd(port=d.port).start()
        first = int(d2.get("/segment/demo").text)
        check(first > last, "after restart %d > %d" % (first, last))
        d2.kill9()
        d3 = wd.leafd(port=d.port).start()
        check(int(d3.get("/segment/demo").text) > first, "after kill -9")


def test_concurrent_clients_no_duplicates(ctx):
    with Workdir("concurrent") as wd:
        d = wd.leafd(flags=["--threads=2"]).start()
        from bbutil import Client

        def worker(i):
            c = Client(d.port)
            out = []
            for k in range(300):
                r = c.get("/segment/demo?count=%d" % (1 + k % 7))
                eq(r.status, 200, "status")
                out += r.ids()
            c.close()
            return out
        res = parallel(8, worker)
        all_ids = [x for r in res for x in r]
        eq(len(all_ids), len(set(all_ids)), "no duplicate among %d IDs" % len(all_ids))
        for r in res:
            check(all(x < y for x, y in zip(r, r[1:])), "each client's IDs increase")


def test_cli_help_and_check_config(ctx):
    r = subprocess.run([LEAFD, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    eq(r.returncode, 0, "--help exit")
    out = r.stdout.decode()
    for needle in ["usage: leafd", "leaf.segment.enable", "segment.wait_ms", "500",
                   "listen.port", "8080"]:
        check(needle in out, "--help lacks %r" % needle)
    with Workdir("cli") as wd:
        good = os.path.join(wd.path, "good.conf")
        with open(good, "w") as f:
            f.write("leaf.segment.enable = true\nlisten.port = 9001\n")
        r = subprocess.run([LEAFD, "-c", good, "--check-config"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        eq(r.returncode, 0, "good config: %s" % r.stderr)
        bad = os.path.join(wd.path, "bad.conf")
        with open(bad, "w") as f:
            f.write("leaf.segment.enable = true\n\nlisten.port = 99999\n")
        r = subprocess.run([LEAFD, "-c", bad, "--check-config"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        eq(r.returncode, 2, "bad config exit")
        check(("%s:3: listen.port" % bad) in r.stderr.decode(),
              "file, line and reason: %r" % r.stderr)
        r = subprocess.run([LEAFD, "-c", bad], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=10)
        eq(r.returncode, 2, "a bad config stops the start")
        r = subprocess.run([LEAFD, "--bogus"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        eq(r.returncode, 2, "unknown flag")
        # A taken port is a clear start-up error.
        d = wd.leafd().start()
        d2 = wd.leafd(port=d.port, name="second")
        d2.flags.append("--segment.sqlite.path=%s" % os.path.join(wd.path, "2.db"))
        rc = d2.start(expect_fail=True)
        check(rc != 0, "second leafd on a taken port fails")
        check("8" in d2.log() or "Address" in d2.log() or "address" in d2.log(),
              "says why: %s" % d2.log())


def test_sigterm_and_sighup(ctx):
    with Workdir("signals") as wd:
        # A 60 s shutdown timeout: with nothing in flight the stop must not
        # wait for it, a bound far from both it and a busy machine's stall.
        d = wd.leafd(flags=["--log.file=%s" % os.path.join(wd.path, "leafd-file.log"),
                            "--shutdown_timeout_ms=60000"]).start()
        eq(d.get("/segment/demo").status, 200, "serving")
        os.rename(os.path.join(wd.path, "leafd-file.log"),
                  os.path.join(wd.path, "leafd-file.log.1"))
        d.send(signal.SIGHUP)
        wait_for(lambda: os.path.exists(os.path.join(wd.path, "leafd-file.log")), 30,
                 what="log reopened on SIGHUP")
        eq(d.get("/segment/demo").status, 200, "serving after SIGHUP")
        t0 = time.time()
        eq(d.stop(timeout=90), 0, "exit 0 on SIGTERM")
        check(time.time() - t0 < 30, "stopped at once, not after the 60 s shutdown timeout")
        with open(os.path.join(wd.path, "leafd-file.log")) as f:
            check("stopped" in f.read(), "log says stopped")


def sql(wd, *stmts):
    import sqlite3
    con = sqlite3.connect(os.path.join(wd.path, "leafd.db"), timeout=10)
    for q in stmts:
        con.execute(q)
    con.commit()
    con.close()


def test_bad_row_stops_only_its_tag(ctx):
    """Issue 9 item 3: one row whose max_id is not an integer stops only its
    own tag; the database stays up, tags never loaded still work, and the
    log says it once (the old store called it a database error: every
    never-loaded tag got 503 and the log flapped)."""
    with Workdir("badrow") as wd:
        d = wd.leafd(flags=["--segment.refresh_ms=3600000"]).start()
        eq(d.get("/segment/demo").status, 200, "demo")
        sql(wd, "INSERT INTO leaf_alloc(biz_tag, max_id, step) VALUES ('bad', 'abc', 100)",
            "INSERT INTO leaf_alloc(biz_tag, max_id, step) VALUES ('fresh', 1, 100)")
        for _ in range(8):
            err(d.get("/segment/bad"), 503, "bad_leaf_alloc_row")
        for i in range(8):
            r = d.get("/segment/fresh")
            eq(r.status, 200, "a healthy never-loaded tag still works (%d): %r" % (i, r))
        h = d.get("/health")
        eq(h.status, 200, "health: %r" % h.text)
        m = d.get("/metrics").text
        check("leafd_db_up 1" in m, "the database is up: %s" %
              [x for x in m.splitlines() if "db_up" in x])
        log = d.log()
        eq(log.count("cannot take a segment"), 1, "said once: %s" % log[-2000:])
        check("unreachable" not in log, "never called the database down")


def test_edges_of_the_id_space(ctx):
    """Issue 9 item 6: near INT64_MAX, an adapted step that no longer fits
    falls back to what fits (never below the row's step) instead of breaking
    the tag; a negative max_id is refused instead of served as 20-digit
    unsigned IDs."""
    with Workdir("edges") as wd:
        d = wd.leafd(flags=["--segment.refresh_ms=3600000"]).start()
        top = (1 << 63) - 1
        sql(wd, "INSERT INTO leaf_alloc(biz_tag, max_id, step) VALUES ('big', %d, 5)" % (top - 10),
            "INSERT INTO leaf_alloc(biz_tag, max_id, step) VALUES ('neg', -100, 10)")
        got = []
        for _ in range(10):
            r = d.get("/segment/big")
            eq(r.status, 200, "ID %d of the last 10: %r" % (len(got), r))
            got.append(int(r.text))
        eq(got, list(range(top - 10, top)), "the last ten IDs, in order")
        err(d.get("/segment/big"), 503, "bad_leaf_alloc_row")
        check("instead of leafd's" in d.log(), "the log names both steps")
        r = d.get("/segment/neg")
        err(r, 503, "bad_leaf_alloc_row")
        check("start at 1" in d.log(), "the log says why: %s" % d.log()[-1500:])


def test_batch_over_the_range_limit(ctx):
    """Issue 9 item 7: a batch that could need more than 8 segments is
    refused at once with the limit, and takes nothing."""
    with Workdir("bigbatch") as wd:
        # segment.wait_ms 60 s: "at once" has a bound far from it and from
        # a busy machine's stall
        d = wd.leafd(flags=["--segment.refresh_ms=3600000",
                            "--segment.wait_ms=60000"]).start()
        sql(wd, "INSERT INTO leaf_alloc(biz_tag, max_id, step) VALUES ('small', 1, 10)")
        t0 = time.time()
        r = d.get("/segment/small?count=100")
        err(r, 400, "batch_too_large")
        check("70" in r.json()["message"], "names the limit: %r" % r.json())
        check(time.time() - t0 < 30, "at once, not after segment.wait_ms")
        eq(int(d.get("/segment/small").text), 1, "nothing was taken")
        eq(len(d.get("/segment/small?count=70").ids()), 70, "the limit itself works")
