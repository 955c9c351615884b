"""Black-box tests of segment mode over several PostgreSQL databases
(segment.postgresql.urls, leafd multi-db init; docs/multi-db.md,
"PostgreSQL"), on throwaway PostgreSQL 15 clusters
(tests/lib/postgresql.sh):

- the single-database guard: a node on segment.postgresql.url alone,
  under load while multi-db init makes its database a member, stops
  loading and repeats none of the set's IDs (run as a positive control
  with the guard cut out: `python3 bb_pg_multidb.py --guardless LEAFD`
  passes only if that binary hands out IDs in another member's blocks);
- init (its printed line without a password, safe twice), start-up
  refusals, two nodes on disjoint blocks, one member killed -9 under load
  (0 failed requests) and back, a node killed -9 and restarted under load,
  every ID checked for repeats;
- a member whose server identity changes (another cluster restored from
  a dump behind the same address): kept out of loads, the other serves;
- a member restored in place from an older copy: kept out of loads by a
  node started after, until multi-db init sets the set above it;
- serial numbers from the first member, copied to the other, and the
  list reordered without a serial twice;
- the refusals of sets that mix MySQL and PostgreSQL, and of settings
  that do not apply to a set.
"""
import http.client
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import bbutil  # noqa: E402
from bbutil import (PG_BIN, PostgreSQL, Workdir, check, eq,  # noqa: E402
                    wait_for)

TESTS = [
    "test_pg_multi_single_guard",
    "test_pg_multi_serve_and_failover",
    "test_pg_multi_identity_change",
    "test_pg_multi_restored_member",
    "test_pg_multi_serials_reordered",
    "test_pg_multi_refusals",
]

# Outage scenarios, bound by their waits: the plain lane only.
PLAIN_ONLY = {
    "test_pg_multi_single_guard",
    "test_pg_multi_serve_and_failover",
    "test_pg_multi_identity_change",
    "test_pg_multi_restored_member",
    "test_pg_multi_serials_reordered",
}

BLOCK = 20000
MYSQL_URL = "mysql://leaf:pw@127.0.0.1:3306/leaf"


def clusters(wd, n):
    out = []
    for i in range(n):
        p = PostgreSQL(wd.path, name="pg%d" % i)
        wd.cleanup.append(p.stop)
        out.append(p.start())
    return out


def add_tag(db, tag, step, max_id=1):
    db.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
           "VALUES ('%s', %d, %d, 'test')" % (tag, max_id, step))


def init(urls, *extra):
    args = list(extra) or ["--block-size=%d" % BLOCK, "--segment.max_step=2000",
                           "--segment.lease_max=%d" % BLOCK]
    r = subprocess.run([bbutil.LEAFD, "multi-db", "init"] + urls + args,
                       capture_output=True, timeout=120)
    return r.returncode, (r.stdout + r.stderr).decode()


def node(wd, urls, name, extra=None):
    flags = ["--leaf.snowflake.enable=false",
             "--segment.postgresql.urls=" + ",".join(urls),
             "--segment.db_timeout_ms=3000", "--segment.wait_ms=8000",
             "--segment.max_step=2000", "--segment.lease_max=%d" % BLOCK,
             "--segment.refresh_ms=500"] + (extra or [])
    return wd.leafd(conf={"leaf.segment.enable": "true"}, flags=flags, name=name)


def kill_cluster(db):
    """kill -9 the postmaster and its children (the shared memory is
    then free for a restart)."""
    pids = db.pids()
    for p in pids:
        try:
            os.kill(p, 9)
        except ProcessLookupError:
            pass
    for p in pids:
        wait_for(lambda: not os.path.exists("/proc/%d" % p), timeout=30,
                 what="postgres %d gone" % p)


class Load:
    """Client threads taking IDs from nodes (a node may be replaced
    meanwhile: nodes is read at each request); every answer recorded."""

    def __init__(self, nodes, tag, threads_per_node=2, count=5):
        self.nodes, self.tag, self.count = nodes, tag, count
        self.ids, self.fails, self.errors, self.by_node = [], 0, [], {}
        self.lock = threading.Lock()
        self.stop = False
        self.ts = [threading.Thread(target=self.run, args=(i,))
                   for i in range(len(nodes)) for _ in range(threads_per_node)]

    def run(self, i):
        mine = []
        c, port = None, None
        while not self.stop:
            d = self.nodes[i]
            if d is None or d.proc is None:
                time.sleep(0.01)
                continue
            if port != d.port:
                c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
                port = d.port
            try:
                c.request("GET", "/segment/%s?count=%d" % (self.tag, self.count))
                r = c.getresponse()
                body = r.read().decode()
                if r.status == 200:
                    mine.extend((int(x), i) for x in body.split())
                else:
                    with self.lock:
                        self.fails += 1
                        if len(self.errors) < 5:
                            self.errors.append("%d %s" % (r.status, body[:200]))
            except (OSError, http.client.HTTPException) as e:
                if self.nodes[i] is not None and self.nodes[i].proc is not None:
                    with self.lock:
                        self.fails += 1
                        if len(self.errors) < 5:
                            self.errors.append(repr(e))
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
            time.sleep(0.002)
        with self.lock:
            for x, k in mine:
                self.ids.append(x)
                self.by_node.setdefault(k, []).append(x)

    def __enter__(self):
        for t in self.ts:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        for t in self.ts:
            t.join()
        return False

    def check(self, what, fails_ok=False):
        if not fails_ok:
            eq(self.fails, 0, "%s: failed requests (%s)" % (what, self.errors))
        dups = len(self.ids) - len(set(self.ids))
        eq(dups, 0, "%s: no duplicate among %d IDs" % (what, len(self.ids)))
        check(len(self.ids) > 500, "%s: load ran (%d IDs)" % (what, len(self.ids)))
        print("  %s: %d IDs, 0 duplicates, %d failed requests"
              % (what, len(self.ids), self.fails))


def owner(i, n=2, block=BLOCK):
    """The member owning ID i (blocks of block IDs, block k to k mod n)."""
    return (i // block) % n


GUARD_BLOCK = 1000


def guard_scenario(wd):
    """A node on db0 alone (segment.postgresql.url, step 50) under load
    while multi-db init makes db0 and db1 a set (blocks of 1,000); then
    db0 stops and a new node on the set takes IDs from db1. Returns the
    single node's IDs after init's since_block in db1's blocks, the
    duplicates among every ID, the load, the single node's log."""
    a, b = clusters(wd, 2)
    add_tag(a, "guard", 50)
    single = wd.leafd(conf={"leaf.segment.enable": "true"},
                      flags=["--leaf.snowflake.enable=false",
                             "--segment.store=postgresql",
                             "--segment.postgresql.url=" + a.url,
                             "--segment.wait_ms=2000", "--segment.max_step=50",
                             "--segment.refresh_ms=200"],
                      name="single").start()
    with Load([single], "guard", threads_per_node=3, count=5) as load:
        time.sleep(1.5)
        rc, out = init([a.url, b.url], "--block-size=%d" % GUARD_BLOCK,
                       "--segment.max_step=50", "--segment.lease_max=%d" % GUARD_BLOCK)
        eq(rc, 0, "init under a single node's load: %s" % out)
        time.sleep(3)
    since = int(b.sql("SELECT since_block FROM leafd_multi_db").strip())
    a.stop()
    late = node(wd, [a.url, b.url], "late",
                ["--segment.max_step=50", "--segment.lease_max=%d" % GUARD_BLOCK,
                 "--segment.db_timeout_ms=1000"]).start()
    late_ids = []
    for _ in range(30):
        r = late.get("/segment/guard?count=100")
        eq(r.status, 200, "the set serves from database 1: %r" % r)
        late_ids += r.ids()
    check(all(owner(x, block=GUARD_BLOCK) == 1 for x in late_ids),
          "the late node's IDs are database 1's")
    after = [x for x in load.ids if x >= since * GUARD_BLOCK]
    in_b = [x for x in after if owner(x, block=GUARD_BLOCK) == 1]
    every = load.ids + late_ids
    dups = len(every) - len(set(every))
    return load, in_b, dups, single.log(), since


def test_pg_multi_single_guard(ctx):
    """The single-database guard: once init froze db0 and made it a
    member, the node on db0 alone gets no range (its loads are refused,
    its clients 503 once its buffers ran dry), so it serves nothing in
    db1's blocks, which db1 then hands out: no ID twice."""
    with Workdir("pgm-guard") as wd:
        load, in_b, dups, log, since = guard_scenario(wd)
        eq(dups, 0, "no duplicate among the single node's %d IDs and the set's"
           % len(load.ids))
        eq(len(in_b), 0, "the single node served no ID in database 1's blocks")
        check("segment.postgresql.url alone) stops loading" in log,
              "the refusal is logged: %s" % log[-1500:])
        check(load.fails > 0, "the single node's clients were refused (503) "
              "once its buffers ran dry")
        print("  guard: the single node served %d IDs, none from block %d on "
              "(init's since_block), %d requests refused after; the set's node "
              "3,000 from database 1; 0 duplicates" % (len(load.ids), since,
                                                       load.fails))


def test_pg_multi_serve_and_failover(ctx):
    """Init, its refusals at start, two nodes on disjoint blocks, a member
    killed -9 under load (0 failed requests, loads go to the other) and
    back, a node killed -9 and restarted under load: no ID twice."""
    with Workdir("pgm-serve") as wd:
        a, b = clusters(wd, 2)
        add_tag(a, "mt", 100, max_id=5000)
        a.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
              "VALUES ('PAY:all', 1, 100, 'serial period')")
        urls = [a.url, b.url]
        rc, out = init(urls)
        eq(rc, 0, "init: %s" % out)
        check("segment.postgresql.urls = " in out, out)
        check("leafpw" not in out, "init prints no password: %s" % out)
        eq(b.sql("SELECT biz_tag FROM leaf_alloc ORDER BY biz_tag").split(),
           ["PAY:all", "mt"], "the tags copied")
        eq(b.sql("SELECT description FROM leaf_alloc WHERE biz_tag = 'PAY:all'").strip(),
           "serial period", "the serial row copied as one")
        rc, out = init(urls)
        eq(rc, 0, "init again: %s" % out)
        check("already a set" in out, "safe to run twice: %s" % out)
        # Start-up refusals.
        bad = node(wd, [b.url, a.url], "swapped")
        check(bad.start(expect_fail=True) != 0, "swapped order refused")
        check("number 1 of 2" in bad.log() or "number 0 of 2" in bad.log(), bad.log())
        one = wd.leafd(conf={"leaf.segment.enable": "true"},
                       flags=["--leaf.snowflake.enable=false",
                              "--segment.postgresql.url=" + a.url], name="alone")
        check(one.start(expect_fail=True) != 0, "one database of a set alone refused")
        check("list them all in segment.postgresql.urls" in one.log(), one.log())
        # Two nodes; each serves inside blocks, above the old IDs.
        nodes = [node(wd, urls, "n%d" % i).start() for i in range(2)]
        ids = []
        for d in nodes:
            r = d.get("/segment/mt?count=50")
            eq(r.status, 200, "IDs: %r" % r)
            ids += r.ids()
            r = d.get("/serial/PAY")
            h = d.get("/health").json()["segment"]
            eq(h["store"], "postgresql", "the set's kind")
            eq(len(h["databases"]), 2, "health lists both databases")
        check(min(ids) > 5000, "above the single-database IDs")
        eq(len(set(ids)), len(ids), "disjoint")
        # A member killed -9 under load, and back.
        loads1 = 'leafd_segment_db_loads_total{db="1"}'

        def metric(d, name):
            return sum(float(l.split()[-1]) for l in d.get("/metrics").text.splitlines()
                       if l.startswith(name))
        with Load(nodes, "mt") as load:
            time.sleep(2)
            before = sum(metric(d, loads1) for d in nodes)
            kill_cluster(a)
            time.sleep(4)
            during = sum(metric(d, loads1) for d in nodes)
            a.start()
            wait_for(lambda: all(x["up"] for x in nodes[0].get("/health").json()
                                 ["segment"]["databases"]), timeout=30, step=0.2,
                     what="database 0 up again")
            time.sleep(1)
            # A node killed -9 under load and restarted.
            old = nodes[1]
            nodes[1] = None
            old.kill9()
            nodes[1] = node(wd, urls, "n1b").start()
            time.sleep(3)
        load.check("member kill -9, node kill -9")
        check(during > before, "loads went to database 1 while database 0 was "
              "dead (%s before, %s after)" % (before, during))
        all_ids = load.ids + ids
        eq(len(set(all_ids)), len(all_ids), "no repeat across the run")
        for x in load.ids:
            check(x >= BLOCK, "inside the set's blocks: %d" % x)


def test_pg_multi_identity_change(ctx):
    """Another cluster behind db0's address (restored from a dump of it,
    so its tables say it is database 0 of the set): its server identity
    (system identifier) differs, so the node keeps it out of loads and
    says why; db1 serves."""
    with Workdir("pgm-ident") as wd:
        a, b = clusters(wd, 2)
        add_tag(a, "idc", 100)
        urls = [a.url, b.url]
        rc, out = init(urls)
        eq(rc, 0, out)
        d = node(wd, urls, "n").start()
        first = d.get("/segment/idc?count=5")
        eq(first.status, 200, "serving: %r" % first)
        check(all(owner(x) == 0 for x in first.ids()), "from database 0 first")
        dump = os.path.join(wd.path, "db0.sql")
        cmd = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
        with open(dump, "wb") as f:
            r = subprocess.run(cmd + [PG_BIN + "/pg_dump", "-h", os.path.join(a.dir, "run"),
                                      "-p", str(a.port), "-U", "postgres", "--clean",
                                      "--if-exists", "leaf"], stdout=f, stderr=subprocess.PIPE,
                               timeout=60)
        eq(r.returncode, 0, "pg_dump: %s" % r.stderr.decode())
        a.stop()
        c = PostgreSQL(wd.path, name="pg0-other")
        with open(os.path.join(c.dir, "port"), "w") as f:
            f.write("%d\n" % a.port)
        wd.cleanup.append(c.stop)
        c.start()
        os.chmod(dump, 0o644)
        r = subprocess.run(cmd + [PG_BIN + "/psql", "-X", "-q", "-h", os.path.join(c.dir, "run"),
                                  "-p", str(c.port), "-U", "postgres", "-d", "leaf", "-f", dump],
                           capture_output=True, timeout=60)
        eq(r.returncode, 0, "restore: %s" % r.stderr.decode())
        # Loads prefer db1 now (db0 was down): once db0 answers again,
        # stop db1 so that loads go to db0, whose new server is refused.
        wait_for(lambda: d.get("/health").json()["segment"]["databases"][0]["up"],
                 timeout=30, step=0.2, what="database 0 answers again")
        ids = []
        b.stop()
        end = time.time() + 20
        changed = None
        while time.time() < end and changed is None:
            r = d.get("/segment/idc?count=50")
            if r.status == 200:
                ids += r.ids()
            for x in d.get("/health").json()["segment"]["databases"]:
                if x["index"] == 0 and "server behind it changed" in x.get("error", ""):
                    changed = x["error"]
            time.sleep(0.05)
        check(changed is not None, "database 0's new server was refused: %s" % d.log())
        check("from pg:" in changed and " to pg:" in changed, changed)
        b.start()
        wait_for(lambda: d.get("/segment/idc?count=50").status == 200, timeout=30,
                 step=0.2, what="served again from database 1")
        for _ in range(20):
            r = d.get("/segment/idc?count=50")
            eq(r.status, 200, "served from database 1: %r" % r)
            check(all(owner(x) == 1 for x in r.ids()), "loads from database 1 only")
            ids += r.ids()
        eq(d.get("/health").json()["segment"]["databases"][0]["up"], False,
           "database 0 stays out of loads")
        eq(len(set(ids)), len(ids), "no repeat")
        print("  identity change: %s" % changed[:160])


def test_pg_multi_restored_member(ctx):
    """A member whose rows went back (restored in place from an older
    copy: the same server, its max_id set back): a node started then sees
    it below the top the other member recorded for it and keeps it out of
    loads; multi-db init with the same list sets the set above it, and
    after a restart every ID is new."""
    with Workdir("pgm-restore") as wd:
        a, b = clusters(wd, 2)
        add_tag(a, "rs", 100)
        urls = [a.url, b.url]
        rc, out = init(urls)
        eq(rc, 0, out)
        old = a.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'rs'").strip()
        n1 = node(wd, urls, "n1").start()
        ids = []
        for _ in range(20):
            r = n1.get("/segment/rs?count=50")
            eq(r.status, 200, "serving: %r" % r)
            ids += r.ids()
        check(any(owner(x) == 0 for x in ids), "database 0 served")
        n1.stop()
        a.sql("UPDATE leaf_alloc SET max_id = %s WHERE biz_tag = 'rs'" % old)
        n2 = node(wd, urls, "n2").start()
        dbs0 = n2.get("/health").json()["segment"]["databases"][0]
        eq(dbs0["up"], False, "the restored member is out of loads")
        check("restored from an older copy?" in dbs0.get("error", ""), dbs0)
        for _ in range(20):
            r = n2.get("/segment/rs?count=50")
            eq(r.status, 200, "the other member serves: %r" % r)
            check(all(owner(x) == 1 for x in r.ids()), "from database 1 only")
            ids += r.ids()
        n2.stop()
        # The first member behind its record, and no serial row anywhere
        # (no copies): init asks for the operator's word on serials.
        rc, out = init(urls)
        eq(rc, 1, out)
        check("--accept-serial-restart" in out, out)
        rc, out = init(urls, "--block-size=%d" % BLOCK, "--segment.max_step=2000",
                       "--segment.lease_max=%d" % BLOCK, "--accept-serial-restart")
        eq(rc, 0, out)
        check("restored from an older copy? setting the set again above it" in out, out)
        n3 = node(wd, urls, "n3").start()
        for _ in range(20):
            r = n3.get("/segment/rs?count=50")
            eq(r.status, 200, "serving after init: %r" % r)
            ids += r.ids()
        check(all(x["up"] for x in n3.get("/health").json()["segment"]["databases"]),
              "both members up after init")
        eq(len(set(ids)), len(ids), "no repeat among %d IDs" % len(ids))


SERIAL = {"serial.PAY.prefix": "PAY", "serial.PAY.step": "20", "serial.count_max": "10"}


def serials(nodes, rounds):
    got = []
    for _ in range(rounds):
        for d in nodes:
            r = d.get("/serial/PAY?count=5")
            eq(r.status, 200, "serial: %r" % r)
            got += r.text.split()
    return got


def test_pg_multi_serials_reordered(ctx):
    """Serial numbers on a set: loaded from the first member in a
    transaction that checks its leafd_multi_db row, copied to the other
    after each load; the list reordered (init B A) merges the rows into
    the new first member, and no serial repeats."""
    with Workdir("pgm-serial") as wd:
        a, b = clusters(wd, 2)
        add_tag(a, "so", 100)
        eq(init([a.url, b.url])[0], 0, "init A B")

        def serial_nodes(urls, tag):
            conf = dict(SERIAL)
            conf["leaf.segment.enable"] = "true"
            return [wd.leafd(conf=conf, name="%s%d" % (tag, i), flags=[
                "--leaf.snowflake.enable=false",
                "--segment.postgresql.urls=" + ",".join(urls),
                "--segment.db_timeout_ms=3000", "--segment.wait_ms=8000",
                "--segment.max_step=2000", "--segment.lease_max=%d" % BLOCK,
                "--segment.refresh_ms=500"]).start() for i in range(2)]
        nodes = serial_nodes([a.url, b.url], "n")
        got = serials(nodes, 10)
        for d in nodes:
            d.stop()
        copies = b.sql("SELECT max_id FROM leaf_alloc WHERE description = "
                       "'serial period'").split()
        eq(len(copies), 1, "database 1 holds a copy of the serial row")
        first = a.sql("SELECT max_id FROM leaf_alloc WHERE description = "
                      "'serial period'").split()
        eq(copies, first, "the copy is at the row's value")
        rc, out = init([b.url, a.url])
        eq(rc, 0, "init B A: %s" % out)
        nodes = serial_nodes([b.url, a.url], "m")
        got += serials(nodes, 10)
        eq(len(set(got)), len(got), "no serial twice among %d" % len(got))
        print("  serials: %d, 0 twice across the reorder" % len(got))


def test_pg_multi_refusals(ctx):
    """Sets mixing MySQL and PostgreSQL, both lists, a keyword-form
    member, sync replication with a set: refused at start and by
    --check-config with a message naming the cause; multi-db init given
    both kinds refuses before it connects (nothing written)."""
    with Workdir("pgm-refuse") as wd:
        pg = "postgresql://leaf:leafpw@127.0.0.1:1/leaf"
        pg2 = "postgresql://leaf:leafpw@127.0.0.1:2/leaf"
        cases = [
            (["--segment.store=postgresql", "--segment.mysql.urls=%s,%s" % (MYSQL_URL, MYSQL_URL)],
             "several PostgreSQL databases go in segment.postgresql.urls"),
            (["--segment.postgresql.urls=%s,%s" % (pg, pg2), "--segment.mysql.url=" + MYSQL_URL],
             "sets mixing the two are not supported"),
            (["--segment.mysql.urls=%s,%s" % (MYSQL_URL, pg)],
             "sets mixing the two are not supported"),
            (["--segment.postgresql.urls=%s,%s" % (pg, MYSQL_URL)],
             "is not a postgresql:// URI"),
            (["--segment.postgresql.urls=%s,host=h dbname=leaf" % pg],
             "is not a postgresql:// URI"),
            (["--segment.postgresql.urls=%s" % pg, "--segment.postgresql.url=" + pg2],
             "are both set: use one"),
            (["--segment.postgresql.url=%s,%s" % (pg, pg2)],
             "several databases go in segment.postgresql.urls"),
            (["--segment.postgresql.urls=%s,%s" % (pg, pg2),
              "--segment.postgresql.replication=sync"],
             "replication = sync is for one cluster"),
        ]
        # libpq's keyword form in MySQL's list: told apart at start only.
        cases.append(([("--segment.mysql.urls=%s,host=127.0.0.1 dbname=leaf2" % MYSQL_URL)],
                      "URL 2 is PostgreSQL's"))
        for n, (flags, want) in enumerate(cases):
            for check_only in ((True, False) if n < len(cases) - 1 else (False,)):
                args = [bbutil.LEAFD, "--leaf.segment.enable=true",
                        "--leaf.snowflake.enable=false"] + flags
                if check_only:
                    args.append("--check-config")
                else:
                    args.append("--listen.port=%d" % bbutil.free_port())
                r = subprocess.run(args, capture_output=True, timeout=30, cwd=wd.path)
                err = (r.stdout + r.stderr).decode()
                check(r.returncode != 0, "%r refused (check %s): %s" % (flags, check_only, err))
                check(want in err, "%r: %r in %s" % (flags, want, err))
        # A good pair passes --check-config without connecting.
        r = subprocess.run([bbutil.LEAFD, "--leaf.segment.enable=true", "--check-config",
                            "--segment.postgresql.urls=%s, %s" % (pg, pg2)],
                           capture_output=True, timeout=30, cwd=wd.path)
        eq(r.returncode, 0, "a good list: %s" % (r.stdout + r.stderr).decode())
        # multi-db init with both kinds: refused before any connection.
        for urls in ([pg, MYSQL_URL], [MYSQL_URL, pg], [MYSQL_URL, "host=h dbname=leaf"]):
            r = subprocess.run([bbutil.LEAFD, "multi-db", "init"] + urls,
                               capture_output=True, timeout=30)
            err = (r.stdout + r.stderr).decode()
            eq(r.returncode, 1, "init %r: %s" % (urls, err))
            check("sets mixing the two are not supported" in err, err)
            check("leafpw" not in err, "no password: %s" % err)


def main():
    """--guardless LEAFD: the positive control of the single-database
    guard against a leafd built without it; passes only if that node
    hands out IDs in database 1's blocks after init (IDs the set gives
    to database 1, which it hands out again)."""
    if len(sys.argv) != 3 or sys.argv[1] != "--guardless":
        print("usage: bb_pg_multidb.py --guardless LEAFD", file=sys.stderr)
        return 2
    bbutil.LEAFD = os.path.abspath(sys.argv[2])
    with Workdir("pgm-control") as wd:
        load, in_b, dups, _, since = guard_scenario(wd)
        print("positive control: the single node served %d IDs in database 1's "
              "blocks after init (from ID %d); %d duplicates between the nodes, "
              "%d IDs in all" % (len(in_b), since * BLOCK, dups, len(load.ids)))
        if not in_b:
            print("FAIL: without the guard the single node served nothing in "
                  "database 1's blocks")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
