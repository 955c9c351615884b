"""Black-box tests of segment mode over several MariaDB databases
(segment.mysql.urls, leafd multi-db init): disjoint IDs by construction,
start-up refusals, a database killed (-9) or hung (SIGSTOP) under load from
two nodes with 0 failed requests and 0 duplicates, every database down and
back, and a third database added by the documented procedure without a
repeat.

MULTIDB_LOAD_S and MULTIDB_OUTAGE_S set the load and outage
lengths (the issue's 30 s and 20 s by default)."""
import http.client
import os
import signal
import subprocess
import threading
import time

from bbutil import LEAFD, MariaDB, Workdir, check, eq, stop_and_wait

TESTS = [
    "test_init_start_checks_and_disjoint",
    "test_failover_kill_and_hang",
    "test_all_down_then_one_back",
    "test_add_a_third_database",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): failover scenarios, bound by their waits; check_store runs the
# multi-database set-up and a database's outage, restart and hang under ASan.
PLAIN_ONLY = {
    "test_init_start_checks_and_disjoint",
    "test_failover_kill_and_hang",
    "test_all_down_then_one_back",
    "test_add_a_third_database",
}

LOAD_S = float(os.environ.get("MULTIDB_LOAD_S", "30"))
OUTAGE_S = float(os.environ.get("MULTIDB_OUTAGE_S", "20"))
BLOCK = 100000


def dbs(wd, n):
    out = []
    for i in range(n):
        m = MariaDB(os.path.join(wd.path, "db%d" % i))
        wd.cleanup.append(m.stop)
        out.append(m.start())
    return out


def pid_of(m):
    with open(os.path.join(m.dir, "pid")) as f:
        return int(f.read().strip())


def init(urls, *extra):
    r = subprocess.run([LEAFD, "multi-db", "init"] + urls + ["--block-size=%d" % BLOCK, "--segment.max_step=2000"]
                       + list(extra), capture_output=True, timeout=120)
    return r.returncode, (r.stdout + r.stderr).decode()


def node(wd, urls, name, extra=None):
    flags = ["--leaf.snowflake.enable=false", "--segment.mysql.urls=" + ",".join(urls),
             # The default query timeout, and a wait that outlasts it and a
             # load from the next database: with 1000 ms, on a busy machine
             # (under ASan) queries to both databases timed out mid-load
             # ("Lost connection ... during query") and requests failed.
             "--segment.db_timeout_ms=3000", "--segment.wait_ms=8000",
             "--segment.max_step=2000", "--segment.lease_max=50000",
             "--segment.refresh_ms=500"] + (extra or [])
    return wd.leafd(conf={"leaf.segment.enable": "true"}, flags=flags, name=name)


class Load:
    """Client threads taking IDs from nodes; every answer is recorded."""

    def __init__(self, nodes, tag, threads_per_node=2, count=5):
        self.nodes, self.tag, self.count = nodes, tag, count
        self.ids, self.fails, self.errors = [], 0, []
        self.lock = threading.Lock()
        self.stop = False
        self.ts = [threading.Thread(target=self.run, args=(d,))
                   for d in nodes for _ in range(threads_per_node)]

    def run(self, d):
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        mine = []
        while not self.stop:
            try:
                c.request("GET", "/segment/%s?count=%d" % (self.tag, self.count))
                r = c.getresponse()
                body = r.read().decode()
                if r.status == 200:
                    mine.extend(int(x) for x in body.split())
                else:
                    with self.lock:
                        self.fails += 1
                        if len(self.errors) < 5:
                            self.errors.append("%d %s" % (r.status, body[:200]))
            except (OSError, http.client.HTTPException) as e:
                with self.lock:
                    self.fails += 1
                    if len(self.errors) < 5:
                        self.errors.append(repr(e))
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
            time.sleep(0.002)
        with self.lock:
            self.ids.extend(mine)

    def __enter__(self):
        for t in self.ts:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        for t in self.ts:
            t.join()
        return False

    def check(self, what):
        eq(self.fails, 0, "%s: failed requests (%s)" % (what, self.errors))
        eq(len(set(self.ids)), len(self.ids), "%s: no duplicate among %d IDs"
           % (what, len(self.ids)))
        check(len(self.ids) > 1000, "%s: load ran (%d IDs)" % (what, len(self.ids)))


def metric(d, name):
    total = 0.0
    for line in d.get("/metrics").text.splitlines():
        if line.startswith(name):
            total += float(line.split()[-1])
    return total


def test_init_start_checks_and_disjoint(ctx):
    with Workdir("multidb-init") as wd:
        a, b = dbs(wd, 2)
        a.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('mt', 5000, 1000)")
        # A segment tag named like a serial period's row is a segment tag;
        # a serial row (its description says so) is copied as a serial row.
        a.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('order:2024', 1, 100)")
        a.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
              "VALUES ('PAY:all', 1, 100, 'serial period')")
        urls = [a.url, b.url]
        rc, out = init(urls)
        eq(rc, 0, "init: %s" % out)
        check("database 1" in out and "from block" in out, out)
        eq(b.sql("SELECT biz_tag FROM leaf_alloc WHERE description IS NULL OR "
                 "description <> 'serial period' ORDER BY biz_tag").split(),
           ["mt", "order:2024"], "the tags copied")
        eq(b.sql("SELECT biz_tag FROM leaf_alloc WHERE description = 'serial period'").split(),
           ["PAY:all"], "the serial row copied as one")
        rc, out = init(urls)
        eq(rc, 0, "init again: %s" % out)
        check("already a set" in out, "safe to run twice: %s" % out)
        # Start-up refusals, each naming what is wrong.
        bad = node(wd, [b.url, a.url], "swapped")
        eq(bad.start(expect_fail=True) != 0, True, "swapped order refused")
        check("number 1 of 2" in bad.log() or "number 0 of 2" in bad.log(), bad.log())
        one = wd.leafd(conf={"leaf.segment.enable": "true"},
                       flags=["--leaf.snowflake.enable=false", "--segment.mysql.url=" + a.url],
                       name="alone")
        check(one.start(expect_fail=True) != 0, "one database of a set alone refused")
        check("list them all in segment.mysql.urls" in one.log(), one.log())
        b.sql("DELETE FROM leaf_alloc WHERE biz_tag = 'mt'")
        miss = node(wd, urls, "missing")
        check(miss.start(expect_fail=True) != 0, "a tag missing in one database refused")
        check("'mt' is in database 0" in miss.log(), miss.log())
        rc, out = init(urls)        # puts it back (a set whose rows differ)
        eq(b.sql("SELECT count(*) FROM leaf_alloc WHERE biz_tag = 'mt'").strip(), "1",
           "init restores the row: %s" % out)
        # A serial row is not in blocks: a step over the block size is its
        # own business, not a start-up refusal.
        a.sql("UPDATE leaf_alloc SET step = %d WHERE biz_tag = 'PAY:all'" % (BLOCK + 1))
        # Two nodes, each on its preferred database: disjoint blocks.
        n1 = node(wd, urls, "n1").start()
        n2 = node(wd, [a.url, b.url], "n2").start()
        ids = []
        for d in (n1, n2):
            r = d.get("/segment/mt?count=100")
            eq(r.status, 200, "IDs: %r" % r)
            ids += [int(x) for x in r.text.split()]
            eq(d.get("/segment/order:2024").status, 200, "the serial-shaped segment tag")
            r = d.get("/segment/PAY:all")
            eq((r.status, r.json().get("error")), (404, "unknown_biz_tag"),
               "a serial row is no segment tag")
        check(min(ids) > 5000, "above the single-database IDs")
        eq(len(set(ids)), len(ids), "disjoint")
        h = n1.get("/health").json()
        eq(len(h["segment"]["databases"]), 2, "health lists both databases")


def test_failover_kill_and_hang(ctx):
    with Workdir("multidb-failover") as wd:
        a, b = dbs(wd, 2)
        a.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('fo', 1, 100)")
        urls = [a.url, b.url]
        rc, out = init(urls)
        eq(rc, 0, out)
        nodes = [node(wd, urls, "n%d" % i).start() for i in range(2)]
        b_loads = 'leafd_segment_db_loads_total{db="1"}'
        with Load(nodes, "fo") as load:
            time.sleep(LOAD_S / 3)
            before = sum(metric(d, b_loads) for d in nodes)
            os.kill(pid_of(a), signal.SIGKILL)
            time.sleep(OUTAGE_S)
            during = sum(metric(d, b_loads) for d in nodes)
            a.restart()
            time.sleep(LOAD_S / 3)
        load.check("kill -9")
        # With A dead every load is B's. (Whether a load counts as a
        # failover depends on who finds A dead first: a load, or the
        # refresh, after which loads go to B at once.)
        check(during > before, "loads went to database 1 while database 0 "
              "was dead (%s before, %s after)" % (before, during))
        # A hung database (SIGSTOP): loads move on after db_timeout_ms.
        with Load(nodes, "fo") as load:
            time.sleep(LOAD_S / 3)
            # Make the hung one the preferred one first: stop the other
            # briefly so that loads go there, then hang it.
            stop_and_wait(pid_of(b))
            time.sleep(OUTAGE_S / 2)
            os.kill(pid_of(b), signal.SIGCONT)
            time.sleep(2)
            stop_and_wait(pid_of(a))
            time.sleep(OUTAGE_S / 2)
            os.kill(pid_of(a), signal.SIGCONT)
            time.sleep(LOAD_S / 3)
        load.check("SIGSTOP")


def test_all_down_then_one_back(ctx):
    with Workdir("multidb-alldown") as wd:
        a, b = dbs(wd, 2)
        a.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('ad', 1, 10)")
        urls = [a.url, b.url]
        eq(init(urls)[0], 0, "init")
        d = node(wd, urls, "n").start()
        eq(d.get("/segment/ad").status, 200, "serving")
        a.stop()
        b.stop()
        got = None
        for _ in range(400):
            r = d.get("/segment/ad?count=10")
            if r.status != 200:
                got = r
                break
        check(got is not None, "the buffers ran dry")
        eq(got.status, 503, "503: %r" % got)
        eq(got.json()["error"], "ids_exhausted", "code")
        b.start()
        end = time.time() + 30
        while time.time() < end and d.get("/segment/ad").status != 200:
            time.sleep(0.2)
        eq(d.get("/segment/ad").status, 200, "serving again with one database back")


def test_add_a_third_database(ctx):
    with Workdir("multidb-add") as wd:
        a, b, c = dbs(wd, 3)
        a.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('ad3', 1, 100)")
        two = [a.url, b.url]
        eq(init(two)[0], 0, "init with two")
        nodes = [node(wd, two, "n%d" % i).start() for i in range(2)]
        ids = []
        with Load(nodes, "ad3") as load:
            time.sleep(3)
        load.check("two databases")
        ids += load.ids
        # The procedure (docs/operations.md): run init with the new list,
        # then restart every node with it.
        three = [a.url, b.url, c.url]
        rc, out = init(three)
        eq(rc, 0, "init with three: %s" % out)
        # A node still on the old list refuses to load (its databases say
        # they are 3 now); what it serves comes from buffers it had.
        old = node(wd, two, "old")
        check(old.start(expect_fail=True) != 0, "the old list is refused at start")
        for d in nodes:
            d.stop()
        nodes = [node(wd, three, "m%d" % i).start() for i in range(2)]
        with Load(nodes, "ad3") as load:
            time.sleep(3)
            os.kill(pid_of(b), signal.SIGKILL)
            time.sleep(3)
        load.check("three databases")
        ids += load.ids
        eq(len(set(ids)), len(ids), "no repeat across the change (%d IDs)" % len(ids))
