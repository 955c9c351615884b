"""Black-box tests of segment mode on a real, throwaway MariaDB."""
import re
import time

from bbutil import Client, Workdir, check, eq, parallel, wait_for

TESTS = [
    "test_leaf_jdbc_url_and_sample_tag",
    "test_two_nodes_no_duplicates",
    "test_dba_step_change_takes_effect",
    "test_tag_inserted_while_running",
    "test_unknown_tag_flood_is_cached",
    "test_mariadb_outage_and_recovery",
    "test_bad_row_stops_only_its_tag",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): an outage scenario, bound by its waits (check_store runs it under
# ASan).
PLAIN_ONLY = {
    "test_mariadb_outage_and_recovery",
}


def node_conf(db, **extra):
    conf = {"leaf.segment.enable": "true",
            "leaf.snowflake.enable": "false",
            "segment.mysql.url": db.url}
    conf.update(extra)
    return conf


def add_tag(db, tag, step, max_id=1):
    db.sql("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
           "VALUES ('%s', %d, %d, 'test')" % (tag, max_id, step))


def metric(text, name):
    m = re.search(r"^%s (\d+)" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else None


def test_leaf_jdbc_url_and_sample_tag(ctx):
    db = ctx.shared_mariadb()
    with Workdir("jdbc") as wd:
        db.sql("INSERT IGNORE INTO leaf_alloc(biz_tag, max_id, step, description) "
               "VALUES ('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')")
        conf = {"leaf.name": "com.sankuai.leaf.opensource.test",
                "leaf.segment.enable": "true",
                "leaf.jdbc.url": "jdbc:mysql://127.0.0.1:%d/leaf?useUnicode=true"
                                 "&characterEncoding=utf8" % db.port,
                "leaf.jdbc.username": "root",
                "leaf.jdbc.password": "",
                "leaf.snowflake.enable": "false"}
        d = wd.leafd(conf=conf).start()
        r = d.get("/api/segment/get/leaf-segment-test")
        eq(r.status, 200, "Leaf path on MariaDB: %r" % r)
        first = int(r.text)
        r = d.get("/segment/leaf-segment-test?count=10")
        ids = r.ids()
        eq(ids, list(range(first + 1, first + 11)), "sequential within a segment")
        row = db.sql("SELECT max_id, step FROM leaf_alloc WHERE biz_tag='leaf-segment-test'")
        max_id, step = map(int, row.split())
        check(max_id > ids[-1], "max_id %d above issued %d" % (max_id, ids[-1]))
        eq(d.get("/health").json()["segment"]["store"], "mysql", "store kind")


def test_two_nodes_no_duplicates(ctx):
    db = ctx.shared_mariadb()
    add_tag(db, "two-nodes", 50)
    with Workdir("twonodes") as wd:
        a = wd.leafd(conf=node_conf(db, **{"threads": "2"}), name="a").start()
        b = wd.leafd(conf=node_conf(db, **{"threads": "2"}), name="b").start()

        def worker(i):
            node = (a, b)[i % 2]
            c = Client(node.port)
            out = []
            for k in range(150):
                r = c.get("/segment/two-nodes?count=%d" % (1 + k % 9))
                eq(r.status, 200, "status %r" % r)
                out += r.ids()
            c.close()
            return out
        res = parallel(8, worker)
        ids = [x for r in res for x in r]
        eq(len(ids), len(set(ids)), "no duplicate among %d IDs from two nodes" % len(ids))
        check(len(ids) > 1000, "enough IDs")


def test_dba_step_change_takes_effect(ctx):
    db = ctx.shared_mariadb()
    add_tag(db, "dba-step", 10)
    with Workdir("dbastep") as wd:
        d = wd.leafd(conf=node_conf(db, **{"segment.refresh_ms": "200"})).start()
        d.get("/segment/dba-step")
        db.sql("UPDATE leaf_alloc SET step = 5000 WHERE biz_tag = 'dba-step'")
        time.sleep(0.6)  # a refresh reads the new step

        def picked_up():
            d.get("/segment/dba-step?count=100")
            c = d.get("/cache").json()
            t = [t for t in c["tags"] if t["key"] == "dba-step"][0]
            steps = [s["step"] for s in t["segments"]]
            return t["min_step"] == 5000 and 5000 in steps
        wait_for(picked_up, timeout=10, what="a segment of the DBA's new step 5000")
        # Without a restart, the database moved by the new step.
        max_id = int(db.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag='dba-step'"))
        check(max_id >= 5000, "max_id %d moved by the new step" % max_id)


def test_tag_inserted_while_running(ctx):
    db = ctx.shared_mariadb()
    with Workdir("inserted") as wd:
        d = wd.leafd(conf=node_conf(db, **{"segment.refresh_ms": "3600000"})).start()
        r = d.get("/segment/late-tag")
        eq(r.status, 404, "unknown before insert")
        add_tag(db, "late-tag-2", 100, max_id=777)
        r = d.get("/segment/late-tag-2")
        eq(r.status, 200, "works at once after insert: %r" % r)
        eq(int(r.text), 777, "first ID")


def test_unknown_tag_flood_is_cached(ctx):
    db = ctx.shared_mariadb()
    with Workdir("flood") as wd:
        d = wd.leafd(conf=node_conf(db, **{"segment.refresh_ms": "3600000"})).start()
        before = d.get("/metrics").text
        q0 = sum(metric(before, 'leafd_db_queries_total{kind="%s"}' % k) for k in ("lookup", "list"))

        def worker(i):
            c = Client(d.port)
            for k in range(250):
                r = c.get("/segment/junk-%d-%d" % (i, k % 50))
                check(r.status in (404, 503), "junk tag answered %r" % r)
            c.close()
        parallel(4, worker)
        after = d.get("/metrics").text
        q1 = sum(metric(after, 'leafd_db_queries_total{kind="%s"}' % k) for k in ("lookup", "list"))
        # 1000 requests for 200 distinct unknown tags: each tag asked about
        # at most once (often less: lookups are batched into one list).
        check(q1 - q0 <= 200, "database queries for junk tags: %d" % (q1 - q0))
        eq(d.get("/segment/junk-0-0").status, 404, "cached as unknown")


def test_mariadb_outage_and_recovery(ctx):
    with Workdir("outage") as wd:
        db = wd.mariadb()
        add_tag(db, "outage", 200)
        d = wd.leafd(conf=node_conf(db, **{"segment.db_backoff_max_ms": "500",
                                           "segment.wait_ms": "300",
                                           "segment.db_timeout_ms": "1000"})).start()
        # The first load may outlast the short wait on a busy machine (or
        # under ASan): ask until it is served; a 503 takes no ID.
        wait_for(lambda: d.get("/segment/outage?count=30").status == 200, timeout=30,
                 step=0.2, what="serving")
        # Let the prefetch land so both buffers are full.
        wait_for(lambda: [t for t in d.get("/cache").json()["tags"]
                          if t["key"] == "outage"][0]["next_ready"], what="next buffer")
        db.stop()
        # Served from the buffers while the database is down.
        served = []
        for _ in range(100):
            r = d.get("/segment/outage?count=5")
            if r.status != 200:
                break
            served += r.ids()
        check(len(served) >= 200, "served %d IDs from buffers with the database down" % len(served))
        # Then a clear 503 once both buffers are empty.
        r = None
        for _ in range(200):
            r = d.get("/segment/outage?count=5")
            if r.status != 200:
                break
            served += r.ids()
        eq(r.status, 503, "503 once the buffers are empty")
        eq(r.json()["error"], "ids_exhausted", "error code")
        check("database" in r.json()["message"], "says the database is the cause: %r" % r.json())
        check(r.header("Retry-After") is not None, "Retry-After")
        h = d.get("/health")
        eq(h.status, 503, "health 503 while dry and the database is down")
        eq(h.json()["segment"]["db"], "down", "health says db down")
        m = d.get("/metrics").text
        eq(metric(m, "leafd_db_up"), 0, "metrics db_up")
        check(metric(m, "leafd_db_errors_total") > 0, "metrics db errors")
        db.restart()
        r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(d.get("/segment/outage")),
                     timeout=20, what="recovery without a restart")
        served.append(int(r.text))
        eq(len(served), len(set(served)), "no duplicate across the outage")
        check("database unreachable" in d.log() and "database is back" in d.log(),
              "logged once per change of state")
        eq(d.log().count("database unreachable"), 1, "logged the outage once")
        eq(d.get("/health").status, 200, "healthy again")


def test_bad_row_stops_only_its_tag(ctx):
    db = ctx.shared_mariadb()
    add_tag(db, "bad-step", 0)
    add_tag(db, "near-end", 100, max_id=9223372036854775800)
    add_tag(db, "good-neighbour", 100)
    with Workdir("badrow") as wd:
        d = wd.leafd(conf=node_conf(db, **{"segment.refresh_ms": "300"})).start()
        for tag in ("bad-step", "near-end"):
            r = d.get("/segment/" + tag)
            eq(r.status, 503, "%s: %r" % (tag, r))
            eq(r.json()["error"], "bad_leaf_alloc_row", tag)
        eq(d.get("/segment/good-neighbour").status, 200, "other tags unaffected")
        h = d.get("/health").json()
        eq(h["segment"]["db"], "up", "the database is not reported down")
        check("database unreachable" not in d.log(), "no database-down log")
        db.sql("UPDATE leaf_alloc SET step = 10 WHERE biz_tag = 'bad-step'")
        wait_for(lambda: d.get("/segment/bad-step").status == 200, timeout=10,
                 what="the fixed row serves without a restart")
