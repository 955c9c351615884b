"""snowflake.worker_source = postgresql (workerid_pg.c) against throwaway
PostgreSQL 15 clusters, under load (bb_ops_workerid's Load: client threads
taking IDs from every node all the time), each asserting that no ID was
issued twice across the nodes and that every refusal was a 503 with a JSON
error code:
  - two nodes get distinct worker IDs from a range of two; one freezes
    (SIGSTOP) past its lease, a third started then takes its worker ID and
    issues only past its fence, and the frozen one, resumed, loses it (worker_id_lost);
  - TRUNCATE leaf_worker under live nodes: worker_id_lost, and a new node
    gates on the new epoch row;
  - leaf_worker restored from an older pg_dump (DROP, CREATE, COPY: a new
    OID) under live nodes: a new node takes neither live worker ID;
  - a standby that lacks the last heartbeats promoted (a new timeline): a
    new node on it does not take the live node's worker ID, whose row
    there is stale; the live node keeps it.
Also: a bad snowflake.postgresql.url (or none at all) stops the start and
fails --check-config, naming the part that is wrong, never the password.
Without postgresql-15 these skip (under CI=1 they fail)."""
import os
import signal
import subprocess
import time

from bbutil import LEAFD, PG_BIN, PostgreSQL, Workdir, check, eq, wait_for
from bb_ops_workerid import (COMMON, LEASE_MS, SLOW_HB, Load, Proxy, c_worker,
                             grows, join_third, state, third_not_live)
from bb_postgresql import PW, basebackup

TESTS = [
    "test_pg_wid_bad_url_refused",
    "test_pg_wid_lease_takeover",
    "test_pg_wid_truncate",
    "test_pg_wid_restore_older_dump",
    "test_pg_wid_promoted_standby",
]

# Store outages and restores, bound by their waits: the plain lane only
# (check_workerid_store runs the store's rules under ASan).
PLAIN_ONLY = set(TESTS) - {"test_pg_wid_bad_url_refused"}

SEQ_BITS = 19       # COMMON's layout: no datacenter bits, 3 worker bits


def pg_node(wd, url, ip, extra=()):
    flags = COMMON + list(extra) + ["--snowflake.worker_source=postgresql",
                                    "--snowflake.postgresql.url=%s" % url,
                                    "--snowflake.ip=%s" % ip,
                                    "--leaf.snowflake.port=7000",
                                    "--snowflake.cache_file=%s.json" % ip]
    return wd.leafd(flags=flags, name=ip)


def two_nodes(wd, url, extra=()):
    a = pg_node(wd, url, "10.7.0.1", extra).start()
    b = pg_node(wd, url, "10.7.0.2", extra).start()
    load = Load().start()
    load.add(a)
    load.add(b)
    grows(load, 2000, 60, "the first IDs from A and B")
    return a, b, load


def worker_of(x):
    return (x >> SEQ_BITS) & 7


def test_pg_wid_bad_url_refused(ctx):
    """snowflake.postgresql.url is checked as segment.postgresql.url is:
    --check-config exits 2 and the start fails, naming the key and the
    part; the password is never printed. Neither URL set: refused too;
    segment.postgresql.url is the default."""
    base = ["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
            "--snowflake.worker_source=postgresql"]
    cases = [
        (["--snowflake.postgresql.url=postgresql://leaf:s3cr3t@127.0.0.1/leaf?sslmode=verify-fulll"],
         "snowflake.postgresql.url", "sslmode \"verify-fulll\""),
        (["--snowflake.postgresql.url=host=127.0.0.1 password=s3cr3t bogus=1"],
         "snowflake.postgresql.url", "invalid connection option \"bogus\""),
        (["--segment.postgresql.url=dbname=leaf password=s3cr3t"],
         "segment.postgresql.url", "no host"),
        (["--snowflake.worker_source=k8s", "--snowflake.k8s.fence_store=postgresql",
          "--snowflake.k8s.ordinal_env=POD_NAME",
          "--snowflake.postgresql.url=postgresql://leaf:s3cr3t@127.0.0.1:99999/leaf"],
         "snowflake.postgresql.url", "port \"99999\""),
        ([], "snowflake.postgresql.url", "neither snowflake.postgresql.url nor "
         "segment.postgresql.url is set"),
    ]
    with Workdir("pg-wid-badurl") as wd:
        for i, (flags, key, want) in enumerate(cases):
            r = subprocess.run([LEAFD, "--check-config"] + base + flags,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            err = r.stderr.decode()
            eq(r.returncode, 2, "--check-config of %r: %s" % (flags, err))
            check(key in err and want in err, "--check-config names %r: %s" % (want, err))
            check("s3cr3t" not in err, "the password printed: %s" % err)
            d = wd.leafd(flags=base + flags + ["--leaf.snowflake.port=7000"], name="n%d" % i,
                         env={"POD_NAME": "web-0"})
            check(d.start(expect_fail=True) != 0, "leafd refused to start on %r" % flags)
            check(want in d.log(), "the start names %r:\n%s" % (want, d.log()))
            check("s3cr3t" not in d.log(), "the password logged:\n%s" % d.log())
        r = subprocess.run([LEAFD, "--check-config"] + base +
                           ["--segment.postgresql.url=postgresql://leaf@db1.example/leaf"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        eq(r.returncode, 0, "segment.postgresql.url as the default: %s" % r.stderr.decode())


def test_pg_wid_lease_takeover(ctx):
    """A and B under load hold the two worker IDs of the range 0..1. A is
    frozen (SIGSTOP); C, started once A's lease lapsed, takes A's worker
    ID and issues only above every ID A issued (past A's fence). A, resumed, finds its row taken: 503
    worker_id_lost, never an ID under C's worker ID again."""
    with Workdir("pg-wid-lease") as wd:
        db = wd.postgresql().worker_epoch0()
        rng = ["--snowflake.worker_id_max=1"]
        a, b, load = two_nodes(wd, db.url, rng)
        wa, wb = state(a)["worker_id"], state(b)["worker_id"]
        eq(sorted([wa, wb]), [0, 1], "A and B hold the range's two IDs")
        with load.lock:
            load.nodes.remove(a.port)
        os.kill(a.proc.pid, signal.SIGSTOP)
        try:
            t0 = time.time()
            # before A's lease lapses the range is full: C would refuse to
            # start (check_workerid_store covers that claim)
            time.sleep(LEASE_MS / 1000.0 + 0.5)
            c = pg_node(wd, db.url, "10.7.0.3", rng)
            join_third(wd, load, c)
            wc = c_worker(c)
            took = time.time() - t0
            eq(wc, wa, "C takes the frozen A's worker ID")
            grows(load, 2000, 60, "IDs from B and C")
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        load.add(a)
        wait_for(lambda: "worker_id_lost" in a.get("/snowflake").text, 15,
                 step=0.1, what="A refusing with worker_id_lost")
        grows(load, 1000, 30, "IDs after A resumed")
        n = load.assert_unique("a lease lapsed and taken over")
        a_ids = [x for p, x in load.ids if p == a.port and worker_of(x) == wa]
        c_ids = [x for p, x in load.ids if p == c.port]
        check(a_ids and c_ids, "IDs from A and C under worker ID %d" % wa)
        check(min(c_ids) > max(a_ids), "C issued past A's fence: %d > %d"
              % (min(c_ids), max(a_ids)))
        print("  %d IDs, 0 twice; C had a worker ID %.1f s after A froze; "
              "refusals %r" % (n, took, load.refused))


def test_pg_wid_truncate(ctx):
    """TRUNCATE leaf_worker under A and B: their next heartbeat finds no
    row (503 worker_id_lost); C gates on the new epoch row."""
    with Workdir("pg-wid-trunc") as wd:
        db = wd.postgresql().worker_epoch0()
        a, b, load = two_nodes(wd, db.url)
        db.sql("TRUNCATE leaf_worker")
        join_third(wd, load, pg_node(wd, db.url, "10.7.0.3"))
        grows(load, 2000, 60, "IDs after TRUNCATE")
        wait_for(lambda: "worker_id_lost" in a.get("/snowflake").text, 10,
                 step=0.1, what="A refusing after TRUNCATE")
        n = load.assert_unique("TRUNCATE leaf_worker")
        print("  %d IDs, 0 twice; refusals %r" % (n, load.refused))


def pg_tool(db, tool, args, **kw):
    cmd = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
    return subprocess.run(cmd + [PG_BIN + "/" + tool, "-X" if tool == "psql" else "-w",
                                 "-h", os.path.join(db.dir, "run"), "-p", str(db.port),
                                 "-U", "postgres", "-d", "leaf"] + args,
                          check=True, timeout=60, **kw)


def test_pg_wid_restore_older_dump(ctx):
    """leaf_worker dumped (pg_dump --clean) while A and B run, restored in
    one transaction more than a lease later (DROP, CREATE, COPY: the rows
    and the epoch row's marker as they were, the table's OID new): C,
    started at once, takes neither worker ID; A and B write their rows
    again and keep them; no ID twice."""
    with Workdir("pg-wid-dump") as wd:
        db = wd.postgresql().worker_epoch0()
        a, b, load = two_nodes(wd, db.url, SLOW_HB)
        wa, wb = state(a)["worker_id"], state(b)["worker_id"]
        dump = pg_tool(db, "pg_dump", ["--clean", "--if-exists", "-t", "leaf_worker"],
                       stdout=subprocess.PIPE).stdout
        time.sleep(LEASE_MS / 1000.0 + 1)
        grows(load, 1000, 30, "IDs after the dump")
        pg_tool(db, "psql", ["-q", "-1", "-v", "ON_ERROR_STOP=1"], input=dump,
                stdout=subprocess.DEVNULL)
        c = pg_node(wd, db.url, "10.7.0.3")
        third_not_live(wd, load, c, a, b, wa, wb,
                       "leaf_worker restored from an older dump")
        check("created again" in c.log() or "went back in time" in a.log() + b.log(),
              "C saw the table created again, or A or B their row go back")
        print("  %d IDs, 0 twice; refusals %r" % (len(set(x for _, x in load.ids)),
                                                   load.refused))


def test_pg_wid_promoted_standby(ctx):
    """leaf_worker on a primary with a streaming standby; the standby stops
    (it lacks A's heartbeats from then on) for more than a lease, the
    primary is killed -9, the standby started and promoted (timeline 2).
    C's address leads to it first, A's a little later (as VIPs and DNS
    reach nodes at different times). C, started at once, finds A's row with
    a stale heartbeat: it must not take A's worker ID (A issued under it
    until a moment ago): the server identity changed, so no row older than
    the promotion is free for a lease. A keeps its worker ID; no ID
    twice."""
    with Workdir("pg-wid-promote") as wd:
        primary = wd.postgresql(name="primary")
        primary.worker_epoch0()
        sdir = os.path.join(wd.path, "standby")
        basebackup(primary, sdir)
        standby = PostgreSQL(wd.path, name="standby")
        wd.cleanup.append(standby.stop)
        standby.start()
        pa = Proxy(primary.port)
        wd.cleanup.append(pa.close)
        a = pg_node(wd, "postgresql://leaf:%s@127.0.0.1:%d/leaf" % (PW, pa.port),
                    "10.7.0.1").start()
        load = Load().start()
        load.add(a)
        grows(load, 2000, 60, "the first IDs from A")
        wa = state(a)["worker_id"]
        wait_for(lambda: standby.psql("SELECT count(*) FROM leaf_worker WHERE "
                                      "worker_id = %d" % wa, db="leaf").strip() == "1",
                 30, step=0.1, what="the standby has A's row")
        standby.stop()
        time.sleep(LEASE_MS / 1000.0 + 1)   # A's heartbeats go to the primary only
        grows(load, 1000, 30, "IDs while the standby lags")
        with open(os.path.join(primary.dir, "pid")) as f:
            os.kill(int(f.read().split()[0]), signal.SIGKILL)
        pa.move(None)
        standby.start()
        standby.psql("SELECT pg_promote(true, 60)", db="postgres")
        c = pg_node(wd, "postgresql://leaf:%s@127.0.0.1:%d/leaf" % (PW, standby.port),
                    "10.7.0.3")
        join_third(wd, load, c)
        wc = c_worker(c)
        pa.move(standby.port)
        grows(load, 2000, 60, "IDs after the promotion")
        n = load.assert_unique("a lagging standby promoted")
        check(wc != wa, "C took A's worker ID %r on the promoted standby" % wa)
        check("server changed" in c.log(), "C logs that leaf_worker's server changed")
        eq(state(a)["worker_id"], wa, "A keeps its worker ID")
        check("went back in time" in a.log(), "A logs that its row went back in time")
        print("  %d IDs, 0 twice; refusals %r" % (n, load.refused))
