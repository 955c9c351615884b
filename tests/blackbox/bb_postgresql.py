"""Black-box tests of segment mode and serials on a real, throwaway
PostgreSQL 15 (segment.store = postgresql; tests/lib/postgresql.sh):
both forms of the connection string and the password from a passfile,
two nodes without a duplicate, bad rows, bad connection strings refused
at start and by --check-config, the server stopped, hung (SIGSTOP) and
back, a database that went back in time (store_behind) and leafd
db-fence, serials from several nodes across a period change, TLS
(verify-full, a wrong CA, a client certificate), and several hosts with
target_session_attrs=read-write through a standby's promotion (the
failover rule: refused until db-fence, no ID repeated). Several
PostgreSQL databases (multi-db): bb_pg_multidb.py."""
import os
import random
import signal
import subprocess
import threading
import time

from bbutil import (LEAFD, PG_BIN, Client, PostgreSQL, Workdir, check, eq,
                    parallel, wait_for)

TESTS = [
    "test_pg_forms_and_passfile",
    "test_pg_two_nodes_no_duplicates",
    "test_pg_bad_rows",
    "test_pg_bad_url_refused",
    "test_pg_outage_and_recovery",
    "test_pg_hung_server",
    "test_pg_store_behind_and_fence",
    "test_pg_serial_nodes",
    "test_pg_tls",
    "test_pg_promoted_standby",
    "test_pg_sync_standby_promoted",
]

# Outage and failover scenarios, bound by their waits: the plain lane only.
PLAIN_ONLY = {
    "test_pg_outage_and_recovery",
    "test_pg_hung_server",
    "test_pg_promoted_standby",
    "test_pg_sync_standby_promoted",
    "test_pg_serial_nodes",
}

PW = "leafpw"
OFFSET_ENV = "LEAFD_TEST_SERIAL_DB_OFFSET_MS"


def shared(ctx):
    """One cluster for the tests that only add rows of their own."""
    if getattr(ctx, "_pg", None) is None:
        ctx._pg_wd = Workdir("pg-shared")
        ctx._pg = PostgreSQL(ctx._pg_wd.path).start()
        old = ctx.close

        def close():
            try:
                ctx._pg.stop()
            finally:
                ctx._pg_wd.__exit__(None, None, None)
                old()
        ctx.close = close
    return ctx._pg


def conf(url, **extra):
    # A long wait by default: a first load may be slow on a busy machine;
    # the outage tests set their own.
    c = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
         "segment.store": "postgresql", "segment.postgresql.url": url,
         "segment.wait_ms": "5000"}
    c.update(extra)
    return c


def add_tag(db, tag, step, max_id=1):
    db.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
           "VALUES ('%s', %d, %d, 'test')" % (tag, max_id, step))


def uniq_tag(base):
    return "%s-%d" % (base, random.randrange(10 ** 9))


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return None


def fence_read(d):
    """Wait until the refused node has read the database's last fence
    (needs_fence_after in /health): only a fence made after that lifts
    its refusal (store_marks_fenced)."""
    wait_for(lambda: d.get("/health").json()["segment"].get("refused", {})
             .get("needs_fence_after", -1) >= 0, timeout=30, step=0.1,
             what="the refused node read the last fence")


def fence(url, floor, serial_floor=None):
    args = [LEAFD, "db-fence", "--floor=%d" % floor, "--segment.store=postgresql",
            "--segment.postgresql.url=" + url]
    if serial_floor:
        args.append("--serial-floor=%d" % serial_floor)
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    eq(r.returncode, 0, "db-fence: %s" % r.stderr.decode())
    return r.stdout.decode()


def test_pg_forms_and_passfile(ctx):
    """The URI form, and the keyword form whose password comes from a
    passfile: both serve one tag, no ID twice, no password in the logs."""
    db = shared(ctx)
    tag = uniq_tag("forms")
    add_tag(db, tag, 100)
    with Workdir("pg-forms") as wd:
        passfile = os.path.join(wd.path, "pgpass")
        with open(passfile, "w") as f:
            f.write("127.0.0.1:%d:leaf:leaf:%s\n" % (db.port, PW))
        os.chmod(passfile, 0o600)
        kw = "host=127.0.0.1 port=%d dbname=leaf user=leaf passfile=%s" % (db.port, passfile)
        a = wd.leafd(conf=conf(db.url), name="a").start()
        b = wd.leafd(conf=conf(kw), name="b").start()

        def worker(i):
            c = Client((a, b)[i % 2].port)
            out = []
            for k in range(60):
                r = c.get("/segment/%s?count=%d" % (tag, 1 + k % 7))
                eq(r.status, 200, "node %d: %r" % (i % 2, r))
                out += r.ids()
            c.close()
            return out
        ids = [x for part in parallel(4, worker) for x in part]
        eq(len(ids), len(set(ids)), "no duplicate among %d IDs" % len(ids))
        for d in (a, b):
            h = d.get("/health").json()["segment"]
            eq(h["store"], "postgresql", "store kind")
            eq(h["db"], "up", "db up")
            check(h["server"].startswith("pg:"), "server identity %r" % h["server"])
            eq(metric(d.get("/metrics").text, "leafd_db_up"), 1, "metrics db_up")
            check(PW not in d.log(), "the password in the log:\n%s" % d.log())
        row = db.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag = '%s'" % tag)
        check(int(row) > max(ids), "max_id %s above every ID issued" % row.strip())
        # The URI's password wrong: the keyword node still served above,
        # this one says why.
        bad = db.url.replace(PW, "wrong")
        c = wd.leafd(conf=conf(bad, **{"segment.wait_ms": "300"}), name="c").start()
        eq(c.get("/segment/" + tag).status, 503, "a wrong password serves nothing")
        wait_for(lambda: "password authentication failed" in c.log(), timeout=10,
                 what="the server's own reason in the log")


def test_pg_two_nodes_no_duplicates(ctx):
    """Two nodes, eight clients, a small step: many loads race on one row."""
    db = shared(ctx)
    tag = uniq_tag("two")
    add_tag(db, tag, 30)
    with Workdir("pg-two") as wd:
        a = wd.leafd(conf=conf(db.url, threads="2"), name="a").start()
        b = wd.leafd(conf=conf(db.url, threads="2"), name="b").start()

        def worker(i):
            c = Client((a, b)[i % 2].port)
            out = []
            for k in range(150):
                r = c.get("/segment/%s?count=%d" % (tag, 1 + k % 9))
                eq(r.status, 200, "status %r" % r)
                out += r.ids()
            c.close()
            return out
        ids = [x for part in parallel(8, worker) for x in part]
        eq(len(ids), len(set(ids)), "no duplicate among %d IDs from two nodes" % len(ids))
        check(len(ids) > 3000, "enough IDs: %d" % len(ids))
        loads = sum(metric(d.get("/metrics").text, 'leafd_db_queries_total{kind="alloc"}') or 0
                    for d in (a, b))
        check(loads >= 10, "many loads: %d" % loads)


def test_pg_bad_rows(ctx):
    """A bad step, a max_id near INT64_MAX (the adapted step that no longer
    fits: the row's own is taken), a max_id of 0 (a range from 0): only
    their tags stop, the database is not reported down; fixed rows serve
    without a restart."""
    db = shared(ctx)
    bad, near, zero, good = (uniq_tag(t) for t in ("badstep", "nearend", "zero", "good"))
    add_tag(db, bad, 1)
    db.sql("UPDATE leaf_alloc SET step = 0 WHERE biz_tag = '%s'" % bad)
    add_tag(db, near, 100, max_id=9223372036854775800)
    add_tag(db, zero, 100, max_id=0)
    add_tag(db, good, 100)
    with Workdir("pg-badrow") as wd:
        d = wd.leafd(conf=conf(db.url, **{"segment.refresh_ms": "300"})).start()
        for tag in (bad, near, zero):
            r = d.get("/segment/" + tag)
            eq(r.status, 503, "%s: %r" % (tag, r))
            eq(r.json()["error"], "bad_leaf_alloc_row", tag)
        eq(d.get("/segment/" + good).status, 200, "other tags unaffected")
        eq(d.get("/health").json()["segment"]["db"], "up", "the database is not down")
        check("database unreachable" not in d.log(), "no database-down log")
        eq(int(db.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag = '%s'" % near)),
           9223372036854775800, "the overflowing row unchanged")
        eq(int(db.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag = '%s'" % zero)), 0,
           "the row of max_id 0 unchanged")
        db.sql("UPDATE leaf_alloc SET step = 10 WHERE biz_tag = '%s'" % bad)
        wait_for(lambda: d.get("/segment/" + bad).status == 200, timeout=10,
                 what="the fixed row serves without a restart")


def test_pg_bad_url_refused(ctx):
    """A bad connection string stops leafd at start and fails
    --check-config (exit 2), the message naming the part that is wrong;
    the password is never printed."""
    cases = [
        ("postgresql://leaf:s3cr3t@127.0.0.1/leaf?sslmode=verify-fulll", "sslmode \"verify-fulll\""),
        ("postgresql://leaf:s3cr3t@127.0.0.1/leaf?nosuch=1", "invalid URI query parameter: \"nosuch\""),
        ("host=127.0.0.1 dbname=leaf password=s3cr3t bogus=1", "invalid connection option \"bogus\""),
        ("host=a,b port=1,2,3 password=s3cr3t", "1,2,3 ports for a,b hosts"),
        ("postgresql://leaf:s3cr3t@127.0.0.1:99999/leaf", "port \"99999\""),
        ("host=127.0.0.1 password=s3cr3t target_session_attrs=writable",
         "target_session_attrs \"writable\""),
        ("host=127.0.0.1 password=s3cr3t sslmode=verify-full sslrootcert=/nonexistent/ca.pem",
         "sslrootcert: cannot read /nonexistent/ca.pem"),
        ("host=127.0.0.1 password=s3cr3t replication=database", "replication=database"),
        ("dbname=leaf password=s3cr3t", "no host"),
        ("postgresql://leaf:s3cr3t@127.0.0.1/leaf?connect_timeout=soon", "connect_timeout \"soon\""),
        # libpq quotes the bad token: never the password's.
        ("postgresql://leaf:s3cr3t%zz@127.0.0.1/leaf", "invalid percent-encoded token: \"...\""),
        ("host=127.0.0.1 password=s3cr3t s3cr3t", "missing \"=\" after \"...\""),
    ]
    with Workdir("pg-badurl") as wd:
        for i, (url, want) in enumerate(cases):
            r = subprocess.run([LEAFD, "--check-config"] + ["--%s=%s" % kv for kv in conf(url).items()],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            err = r.stderr.decode()
            eq(r.returncode, 2, "--check-config of %r: %s" % (url, err))
            check("segment.postgresql.url" in err and want in err,
                  "--check-config names %r: %s" % (want, err))
            check("s3cr3t" not in err, "the password printed: %s" % err)
            d = wd.leafd(conf=conf(url), name="n%d" % i)
            rc = d.start(expect_fail=True)
            check(rc != 0, "leafd refused to start on %r" % url)
            check(want in d.log(), "the start names %r:\n%s" % (want, d.log()))
            check("s3cr3t" not in d.log(), "the password logged:\n%s" % d.log())
        r = subprocess.run([LEAFD, "--check-config", "--leaf.segment.enable=true",
                            "--segment.store=postgresql"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        eq(r.returncode, 2, "postgresql without a URL")
        check(b"segment.postgresql.url is not set" in r.stderr, r.stderr.decode())
        good = "postgresql://leaf@db1.example:5432,db2.example:5433/leaf?target_session_attrs=read-write"
        r = subprocess.run([LEAFD, "--check-config"] + ["--%s=%s" % kv for kv in conf(good).items()],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        eq(r.returncode, 0, "a good multi-host URI: %s" % r.stderr.decode())


def test_pg_outage_and_recovery(ctx):
    """PostgreSQL stops: the buffers are served, then 503 ids_exhausted
    naming the database, /health and /metrics say down; after a restart
    IDs come again without a leafd restart, none repeated."""
    with Workdir("pg-outage") as wd:
        db = wd.postgresql()
        add_tag(db, "outage", 200)
        d = wd.leafd(conf=conf(db.url, **{"segment.db_backoff_max_ms": "500",
                                          "segment.wait_ms": "300",
                                          "segment.db_timeout_ms": "1000"})).start()
        wait_for(lambda: d.get("/segment/outage?count=30").status == 200, timeout=30,
                 step=0.2, what="serving")
        wait_for(lambda: [t for t in d.get("/cache").json()["tags"]
                          if t["key"] == "outage"][0]["next_ready"], what="next buffer")
        db.stop()
        served = []
        r = None
        for _ in range(300):
            r = d.get("/segment/outage?count=5")
            if r.status != 200:
                break
            served += r.ids()
        check(len(served) >= 200, "served %d IDs from buffers with the database down"
              % len(served))
        eq(r.status, 503, "503 once the buffers are empty")
        eq(r.json()["error"], "ids_exhausted", "error code")
        check("database" in r.json()["message"], "names the database: %r" % r.json())
        h = d.get("/health")
        eq(h.status, 503, "health 503 while dry and the database is down")
        eq(h.json()["segment"]["db"], "down", "health says db down")
        m = d.get("/metrics").text
        eq(metric(m, "leafd_db_up"), 0, "metrics db_up")
        check(metric(m, "leafd_db_errors_total") > 0, "metrics db errors")
        db.restart()
        r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(d.get("/segment/outage")),
                     timeout=30, what="recovery without a restart")
        served.append(int(r.text))
        eq(len(served), len(set(served)), "no duplicate across the outage")
        eq(d.log().count("database unreachable"), 1, "logged the outage once")
        check("database is back" in d.log(), "logged the recovery")
        eq(d.get("/health").status, 200, "healthy again")


def test_pg_hung_server(ctx):
    """Every process of the cluster stopped (SIGSTOP): the statement's
    deadline (segment.db_timeout_ms) ends the wait, so a request gets a
    503 instead of hanging, and /health answers; after SIGCONT IDs come
    again, none repeated."""
    with Workdir("pg-hung") as wd:
        db = wd.postgresql()
        add_tag(db, "hung", 50)
        d = wd.leafd(conf=conf(db.url, **{"segment.db_backoff_max_ms": "500",
                                          "segment.wait_ms": "500",
                                          "segment.db_timeout_ms": "1000"})).start()
        wait_for(lambda: d.get("/segment/hung").status == 200, timeout=30, what="serving")
        served = []
        pids = db.pids()
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        try:
            r = None
            for _ in range(200):
                r = d.get("/segment/hung?count=5")
                if r.status != 200:
                    break
                served += r.ids()
            eq(r.status, 503, "503 while the server hangs: %r" % r)
            wait_for(lambda: d.get("/health").json()["segment"]["db"] == "down",
                     timeout=30, what="/health says down while the server hangs")
            check("no answer within 1000 ms" in d.log() or "timeout expired" in d.log(),
                  "the log says the server did not answer:\n%s" % d.log())
        finally:
            for p in pids:
                os.kill(p, signal.SIGCONT)
        r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(d.get("/segment/hung")),
                     timeout=30, what="recovery after SIGCONT")
        served.append(int(r.text))
        eq(len(served), len(set(served)), "no duplicate across the hang")


def test_pg_store_behind_and_fence(ctx):
    """The database goes back in time (max_id lowered, as a restored dump
    would): the next range starts below the node's mark and is refused
    (503 store_behind), every tag with it; leafd db-fence with a floor
    above the marks lets the node resume above the floor."""
    with Workdir("pg-behind") as wd:
        db = wd.postgresql()
        add_tag(db, "behind", 100)
        add_tag(db, "other", 100)
        d = wd.leafd(conf=conf(db.url, **{"segment.wait_ms": "2000",
                                          "segment.db_backoff_max_ms": "300"})).start()
        ids = []
        for _ in range(5):
            r = d.get("/segment/behind?count=50")
            eq(r.status, 200, "serving %r" % r)
            ids += r.ids()
        db.sql("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'behind'")
        r = None
        for _ in range(50):
            r = d.get("/segment/behind?count=50")
            if r.status != 200:
                break
            ids += r.ids()
        eq(r.status, 503, "a range below the mark refused: %r" % r)
        eq(r.json()["error"], "store_behind", "error code %r" % r.json())
        eq(d.get("/segment/other").status, 503, "every tag refused with it")
        h = d.get("/health").json()["segment"]
        marks = h["marks_max"]
        fence_read(d)
        check(marks >= max(ids), "marks_max %d >= issued %d" % (marks, max(ids)))
        out = fence(db.url, marks + 1000)
        check("floor %d" % (marks + 1000) in out, out)
        r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(
            d.get("/segment/behind?count=10")), timeout=30, what="resumed after the fence")
        check(min(r.ids()) >= marks + 1000, "after the fence, above the floor: %r" % r.ids()[:3])
        ids += r.ids()
        eq(len(ids), len(set(ids)), "no ID repeated")
        eq(int(db.sql("SELECT COUNT(*) FROM leafd_fence")), 1, "one fence row")


def test_pg_serial_nodes(ctx):
    """Serials on PostgreSQL: four nodes ask for a new code's first serial
    at once (one row, a range each, no failed load), then two nodes serve
    across a period change of the database's clock: no serial twice, each
    day starts at 1, one row per period."""
    db = shared(ctx)
    code = "G%d" % random.randrange(10 ** 6)
    prefix = "G%06d" % random.randrange(10 ** 6)
    with Workdir("pg-serial") as wd:
        c4 = conf(db.url, **{"serial.count_max": "10", "segment.wait_ms": "30000",
                             "serial.%s.prefix" % code: code, "serial.%s.step" % code: "50"})
        nodes = [wd.leafd(conf=c4, name="n%d" % i).start() for i in range(4)]
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
            eq(r.status, 200, "node %d: %r" % (i, r))
        firsts = sorted(int(r.json()["ids"][0][-6:]) for r in got)
        eq(firsts, [1, 51, 101, 151], "one row, a range per node")
        for n in nodes:
            check("cannot take a range" not in n.log(), "no load failed:\n%s" % n.log())
            n.stop()
        # The period change: the database's clock 4 s before midnight UTC.
        code2 = code + "D"
        midnight = int(time.mktime((2026, 12, 1, 0, 0, 0, 0, 0, 0)) - time.timezone) * 1000
        offset = midnight - 4000 - int(time.time() * 1000)
        c2 = conf(db.url, **{"serial.count_max": "10", "serial.%s.prefix" % code2: prefix,
                             "serial.%s.zone" % code2: "UTC", "serial.%s.step" % code2: "300"})
        two = [wd.leafd(conf=c2, name="p%d" % i, env={OFFSET_ENV: str(offset)}).start()
               for i in range(2)]
        flat = []
        lock = threading.Lock()
        stop = time.time() + 8

        def client(i):
            c = Client(two[i % 2].port)
            while time.time() < stop:
                r = c.get("/serial/%s?count=%d&format=json" % (code2, 1 + i % 3))
                check(r.status == 200, "node %d: %r" % (i % 2, r))
                with lock:
                    flat.extend(r.json()["ids"])
            c.close()
        ts = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        check(len(flat) > 200, "enough serials: %d" % len(flat))
        eq(len(set(flat)), len(flat), "no duplicate across the two nodes")
        dt = slice(len(prefix), len(prefix) + 8)
        dates = sorted({s[dt] for s in flat})
        eq(dates, ["20261130", "20261201"], "the two days")
        for day in dates:
            seqs = sorted(int(s[-6:]) for s in flat if s[dt] == day)
            eq(seqs[0], 1, "day %s starts at 1" % day)
        rows = db.sql("SELECT COUNT(*) FROM leaf_alloc WHERE biz_tag LIKE 'serial.%s.%%'"
                      % prefix.lower())
        eq(int(rows), 2, "one row per period")


def pki(wd):
    """bb_dbtls's CA, server certificate (IP 127.0.0.1) and wrong CA, and a
    client certificate whose CN is the role leaf (cert authentication)."""
    from bb_dbtls import Pki
    p = Pki(wd)
    p.pg_client, p.pg_client_key = p._leaf("pgclient", "leaf", "extendedKeyUsage=clientAuth")
    return p


def test_pg_tls(ctx):
    """A server with ssl = on that takes the role leaf over TLS only: a URL
    with sslmode=verify-full and the CA serves, and the server lists the
    session as encrypted; a clear-text URL, a wrong CA and a client
    certificate of no one are refused with the reason in the log; a client
    certificate alone (no password) serves."""
    with Workdir("pg-tls") as wd:
        p = pki(wd)
        db = PostgreSQL(wd.path,
                        hba=["hostnossl all leaf 127.0.0.1/32 reject",
                             "hostssl all leaf 127.0.0.1/32 cert map=certmap",
                             "hostssl leaf leafpw 127.0.0.1/32 scram-sha-256"])
        wd.cleanup.append(db.stop)
        db.start()
        # The server's files exist once initdb ran; ssl = on from the restart.
        data = os.path.join(db.dir, "data")
        for src, dst in ((p.server, "server.crt"), (p.server_key, "server.key"), (p.ca, "ca.crt")):
            subprocess.run(["install", "-o", "postgres", "-m", "600", src,
                            os.path.join(data, dst)], check=True)
        with open(os.path.join(db.dir, "conf"), "w") as f:
            f.write("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
                    "ssl_ca_file = 'ca.crt'\n")
        with open(os.path.join(data, "pg_ident.conf"), "a") as f:
            f.write("certmap leaf leaf\n")
        db.psql("CREATE ROLE leafpw LOGIN PASSWORD 'pw-9911'; "
                "GRANT SELECT, INSERT, UPDATE ON leaf_alloc TO leafpw", db="leaf")
        db.restart()
        add_tag(db, "tls", 100)
        base = "host=127.0.0.1 port=%d dbname=leaf" % db.port
        good = "%s user=leafpw password=pw-9911 sslmode=verify-full sslrootcert=%s" % (base, p.ca)
        d = wd.leafd(conf=conf(good), name="good").start()
        r = d.get("/segment/tls")
        eq(r.status, 200, "verify-full serves: %r\n%s" % (r, d.log()))
        enc = db.psql("SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a "
                      "USING (pid) WHERE a.application_name = 'leafd'", db="postgres").strip()
        eq(enc, "t", "the server lists leafd's sessions as TLS")
        check("TLSv1.3" in d.log() or "TLSv1.2" in d.log(), "the log names the TLS:\n%s" % d.log())
        cert = ("%s user=leaf sslmode=verify-full sslrootcert=%s sslcert=%s sslkey=%s"
                % (base, p.ca, p.pg_client, p.pg_client_key))
        os.chmod(p.pg_client_key, 0o600)
        c = wd.leafd(conf=conf(cert), name="cert").start()
        r = c.get("/segment/tls")
        eq(r.status, 200, "a client certificate alone serves: %r\n%s" % (r, c.log()))
        ids = [int(d.get("/segment/tls").text), int(r.text)]
        refusals = [
            ("clear", "%s user=leaf password=%s sslmode=disable" % (base, PW), "no encryption"),
            ("wrongca", "%s user=leafpw password=pw-9911 sslmode=verify-full sslrootcert=%s"
             % (base, p.wrong_ca), "certificate verify failed"),
            ("nocert", "%s user=leaf sslmode=verify-full sslrootcert=%s" % (base, p.ca),
             "connection requires a valid client certificate"),
        ]
        for name, url, why in refusals:
            n = wd.leafd(conf=conf(url, **{"segment.wait_ms": "300"}), name=name).start()
            eq(n.get("/segment/tls").status, 503, "%s: no ID" % name)
            wait_for(lambda: why in n.log(), timeout=10, what="%s: %r in the log" % (name, why))
            check(PW not in n.log() and "pw-9911" not in n.log(), "a password in the log")
        eq(len(ids), len(set(ids)), "no duplicate")


def basebackup(primary, standby_dir, sync_name=None):
    """A streaming standby of primary in standby_dir (pg_basebackup -R)."""
    os.makedirs(standby_dir, exist_ok=True)
    data = os.path.join(standby_dir, "data")
    os.makedirs(data)
    subprocess.run(["chown", "postgres", data], check=True)
    os.chmod(data, 0o700)
    r = subprocess.run(["runuser", "-u", "postgres", "--", PG_BIN + "/pg_basebackup",
                        "-h", os.path.join(primary.dir, "run"), "-p", str(primary.port),
                        "-U", "postgres", "-D", data, "-R", "-X", "stream", "-c", "fast"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    eq(r.returncode, 0, "pg_basebackup: %s" % r.stderr.decode())
    subprocess.run(["cp", os.path.join(data, "postgresql.conf"),
                    os.path.join(data, "postgresql.conf.orig")], check=True)


def test_pg_promoted_standby(ctx):
    """A primary and its asynchronous streaming standby; leafd's URL names
    both hosts, the standby first, with target_session_attrs=read-write,
    so it loads from the primary. The standby stops replaying while the
    primary hands out more ranges (it lacks the last commits), the primary
    dies, the standby is promoted: leafd follows the host list to it,
    sees a new timeline of the same cluster, and refuses every load
    (503 db_failover) rather than repeat the ranges the standby lacks:
    also node c, idle through the lag, whose marks cannot tell (positive
    control, by hand, with pg_server_check's refusal taken out: c served
    IDs that a and b had issued). leafd db-fence with the largest
    marks_max lets every node resume; no ID repeated across the failover."""
    with Workdir("pg-promote") as wd:
        primary = wd.postgresql(name="primary")
        add_tag(primary, "fo", 100)
        sdir = os.path.join(wd.path, "standby")
        basebackup(primary, sdir)
        standby = PostgreSQL(wd.path, name="standby")
        wd.cleanup.append(standby.stop)
        standby.start()
        wait_for(lambda: standby.psql("SELECT count(*) FROM leaf_alloc WHERE biz_tag = 'fo'")
                 .strip() == "1", timeout=30, what="the standby has the row")
        url = ("postgresql://leaf:%s@127.0.0.1:%d,127.0.0.1:%d/leaf?"
               "target_session_attrs=read-write" % (PW, standby.port, primary.port))
        cf = conf(url, **{"segment.wait_ms": "3000", "segment.db_backoff_max_ms": "300",
                          "segment.db_timeout_ms": "2000"})
        # c loads before the lag and is idle through it: its marks are below
        # what the standby lacks, so only the server's identity stops it
        # from taking again the ranges a and b took meanwhile.
        nodes = [wd.leafd(conf=cf, name=n).start() for n in ("a", "b", "c")]
        ids = []
        for i in range(9):
            r = nodes[i % 3].get("/segment/fo?count=50")
            eq(r.status, 200, "before: %r\n%s" % (r, nodes[i % 3].log()))
            ids += r.ids()
        server = nodes[0].get("/health").json()["segment"]["server"]
        check(server.endswith("/1"), "timeline 1 before: %r" % server)
        rep = nodes[0].get("/health").json()["segment"].get("replication") or {}
        eq((rep.get("store"), rep.get("mode"), rep.get("server"), rep.get("durability")),
           ("postgresql", "async", server.split(";")[0], "ok"),
           "/health's replication block: %r" % rep)
        # The standby lags: it is down while the primary goes on (libpq
        # skips it in the host list), and is started again once the
        # primary is gone, with the WAL it had.
        standby.stop()
        for i in range(10):
            r = nodes[i % 2].get("/segment/fo?count=100")
            eq(r.status, 200, "while the standby lags: %r" % r)
            ids += r.ids()
        primary_max = int(primary.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'fo'"))
        with open(os.path.join(primary.dir, "pid")) as f:
            os.kill(int(f.read()), signal.SIGKILL)
        standby.start()
        standby.psql("SELECT pg_promote(true, 60)", db="postgres")
        standby_max = int(standby.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'fo'"))
        check(standby_max < primary_max, "the promoted standby lacks the last ranges: "
              "%d < %d" % (standby_max, primary_max))
        # Each node serves what it holds, then is refused (or, without the
        # rule, goes on: at most 40 requests of 100 IDs). c first: a refused
        # load of a or b would move the counter past what they issued.
        codes = []
        for n in reversed(nodes):
            r = None
            for _ in range(40):
                r = wait_for(lambda: (lambda x: x if x.status in (200, 503) else None)(
                    n.get("/segment/fo?count=100")), timeout=30, what="an answer")
                if r.status != 200:
                    break
                ids.extend(r.ids())
            while r.status == 503 and r.json().get("error") == "ids_exhausted":
                time.sleep(0.1)             # the load in flight, then its verdict
                r = n.get("/segment/fo?count=100")
                if r.status == 200:
                    ids.extend(r.ids())
            codes.append(r.json().get("error") if r.status != 200 else "served")
        eq(len(ids), len(set(ids)), "no ID repeated after the promotion (%d IDs, %d twice)"
           % (len(ids), len(ids) - len(set(ids))))
        eq(codes, ["db_failover"] * 3, "every node refused for the failover")
        for n in nodes:
            check("changed from pg:" in n.log(), "the log names the change:\n%s" % n.log())
        eq(len(ids), len(set(ids)), "no ID repeated before the fence")
        marks = max(n.get("/health").json()["segment"]["marks_max"] for n in nodes)
        for n in nodes:
            fence_read(n)
        fence(url, marks + 1)
        for n in nodes:
            r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(
                n.get("/segment/fo?count=20")), timeout=30, what="resumed after the fence")
            ids += r.ids()
            server2 = n.get("/health").json()["segment"]["server"]
            check(server2.endswith("/2"), "timeline 2 after: %r" % server2)
            rep = n.get("/health").json()["segment"].get("replication") or {}
            check(str(rep.get("server")).endswith("/2"), "the replication block names "
                  "the promoted server: %r" % rep)
        eq(len(ids), len(set(ids)), "no ID repeated across the failover (%d IDs)" % len(ids))


def wait_sync(primary):
    wait_for(lambda: primary.psql("SELECT count(*) FROM pg_stat_replication "
                                  "WHERE sync_state = 'sync'", db="postgres").strip() == "1",
             timeout=60, step=0.2, what="a synchronous standby streaming")


def test_pg_sync_standby_promoted(ctx):
    """segment.postgresql.replication = sync, a primary with a synchronous
    standby (synchronous_standby_names = '*'), two nodes under load from
    four clients: the primary is killed -9 and the standby promoted. The
    promoted standby has no standby of its own, so its commits wait: the
    nodes follow the host list to it, and a load's commit outlasts
    segment.db_timeout_ms (the connection is closed, the range never used;
    503 ids_exhausted); once a new standby streams from it, loads resume
    on the new timeline without a fence (accepted: every range in use was
    flushed by the standby). 0 IDs twice; the failed requests by code and
    the seconds without an ID are printed."""
    with Workdir("pg-sync") as wd:
        primary = wd.postgresql(name="primary")
        add_tag(primary, "sy", 200)     # before commits wait for a standby
        with open(os.path.join(primary.dir, "conf"), "w") as f:
            f.write("synchronous_standby_names = '*'\n")
        primary.restart()
        basebackup(primary, os.path.join(wd.path, "s1"))
        s1 = PostgreSQL(wd.path, name="s1")
        wd.cleanup.append(s1.stop)
        s1.start()
        wait_sync(primary)
        url = ("postgresql://leaf:%s@127.0.0.1:%d,127.0.0.1:%d/leaf?"
               "target_session_attrs=read-write" % (PW, s1.port, primary.port))
        cf = conf(url, **{"segment.wait_ms": "1000", "segment.db_backoff_max_ms": "300",
                          "segment.db_timeout_ms": "1500",
                          "segment.postgresql.replication": "sync"})
        nodes = [wd.leafd(conf=cf, name=n).start() for n in ("a", "b")]
        lock = threading.Lock()
        ids, codes, served_at = [], {}, []
        stop = [False]

        def client(i):
            c = Client(nodes[i % 2].port)
            while not stop[0]:
                try:
                    r = c.get("/segment/sy?count=%d" % (1 + i % 5))
                except Exception:
                    c.close()
                    c = Client(nodes[i % 2].port)
                    continue
                with lock:
                    if r.status == 200:
                        ids.extend(r.ids())
                        served_at.append(time.time())
                    else:
                        code = r.json().get("error") if r.status == 503 else r.status
                        codes[code] = codes.get(code, 0) + 1
                if r.status != 200:
                    time.sleep(0.05)
            c.close()
        ts = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        try:
            time.sleep(2)
            before = len(ids)
            check(before > 100, "served before the kill: %d" % before)
            with open(os.path.join(primary.dir, "pid")) as f:
                os.kill(int(f.read()), signal.SIGKILL)
            t_kill = time.time()
            s1.psql("SELECT pg_promote(true, 60)", db="postgres")
            time.sleep(3)
            # A new synchronous standby of the promoted one.
            basebackup(s1, os.path.join(wd.path, "s2"))
            s2 = PostgreSQL(wd.path, name="s2")
            wd.cleanup.append(s2.stop)
            s2.start()
            wait_sync(s1)
            t_sync = time.time()
            wait_for(lambda: [t for t in served_at if t > t_sync + 0.5], timeout=60,
                     step=0.2, what="served again once the new standby streams")
            time.sleep(1)
        finally:
            stop[0] = True
            for t in ts:
                t.join()
        gaps = [b - a for a, b in zip(served_at, served_at[1:]) if b > t_kill]
        print("  %d IDs, %d twice; failed requests by code %r; longest time without an "
              "ID after the kill %.1f s" % (len(ids), len(ids) - len(set(ids)), codes,
                                             max(gaps) if gaps else -1))
        eq(len(ids), len(set(ids)), "no ID twice across the promotion (%d IDs)" % len(ids))
        check("db_failover" not in codes, "no refusal for the failover: %r" % codes)
        for n in nodes:
            h = n.get("/health").json()["segment"]
            check(h["server"].endswith("/2;sync"), "on timeline 2 under sync: %r" % h["server"])
            check("refused" not in h, "not refused: %r" % h)
            rep = h.get("replication") or {}
            eq((rep.get("store"), rep.get("mode")), ("postgresql", "sync"),
               "/health's replication block: %r" % rep)
            check(str(rep.get("server")).endswith("/2"), "it names timeline 2: %r" % rep)
        check(any("accepted (segment.postgresql.replication = sync" in n.log() for n in nodes),
              "the change of server logged as accepted")
        for n in nodes:
            eq(n.log().count("accepted (segment.postgresql.replication = sync"), 1,
               "one change of server, accepted once (a connection kept from the old "
               "primary never counts):\n%s" % n.log())
