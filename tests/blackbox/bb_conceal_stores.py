"""Concealed segment tags (segment.conceal) on MariaDB and PostgreSQL,
under load: plain and concealed nodes of one row at once (with a kill -9),
a concealed tag over a multi-db set, a set whose block size cannot hold a
concealed load (refused at start), and on PostgreSQL the same mixed nodes
plus a node with another key refused. Every answer is checked for duplicates (bb_multidb's
Load); the concealed IDs are also revealed and checked against their blocks.

A concealed load takes a whole aligned block of 2^20 counters for one node
and issues that block's counters permuted, so plain counters (other blocks)
never meet them: docs/id-kinds.md, "Concealed segment tags"."""
import os
import subprocess
import time

from bbutil import LEAFD, Workdir, check, eq
from bb_multidb import Load, node
from bb_ops_multidb import Schemas
import bb_postgresql

TESTS = [
    "test_plain_and_concealed_nodes",
    "test_concealed_over_a_set",
    "test_set_block_too_small_refused",
    "test_concealed_on_postgresql",
]

# Several nodes under load each, on the shared server: the plain lane only.
PLAIN_ONLY = set(TESTS)

KEY = "2b7e151628aed2a6abf7158809cf4f3c"
ADMIN = "conceal-stores-admin-9"
BITS = 20


def key_file(wd):
    path = os.path.join(wd.path, "conceal.key")
    with open(path, "w") as f:
        f.write(KEY + "\n")
    os.chmod(path, 0o600)
    return path


def conceal_flags(wd, tag):
    return ["--segment.conceal=" + tag, "--segment.conceal_key_file=" + key_file(wd),
            "--admin.token=" + ADMIN]


def reveal(d, tag, i):
    r = d.get("/segment/reveal/%s/%d" % (tag, i),
              headers={"Authorization": "Bearer " + ADMIN})
    eq(r.status, 200, "reveal %d: %s" % (i, r.text))
    return r.json()


def check_revealed(d, tag, ids, what):
    """A sample of concealed IDs: each reveals a counter in its own block,
    all counters distinct."""
    seen = set()
    for i in ids[:: max(1, len(ids) // 200)]:
        j = reveal(d, tag, i)
        check(j["concealed"], "%s: %d is concealed: %s" % (what, i, j))
        eq(j["counter"] >> BITS, i >> BITS, "%s: %d's counter in its block" % (what, i))
        check(j["counter"] not in seen, "%s: counter %d revealed twice" % (what, j["counter"]))
        seen.add(j["counter"])


def test_plain_and_concealed_nodes(ctx):
    """One row, two nodes concealing it and one serving it in plain (as an
    older leafd or Java Leaf would), under load; one concealed node is
    killed (-9) and restarted midway. No ID repeats, every node served."""
    with Workdir("conceal-mixed") as wd:
        s = Schemas(ctx, wd, 1)
        s.tag("mx", 1000)
        url = s.urls[0]
        base = ["--leaf.snowflake.enable=false", "--segment.mysql.url=" + url,
                "--segment.refresh_ms=500", "--segment.wait_ms=8000"]
        conf = {"leaf.segment.enable": "true"}
        c0 = wd.leafd(conf=conf, flags=base + conceal_flags(wd, "mx"), name="c0").start()
        c1 = wd.leafd(conf=conf, flags=base + conceal_flags(wd, "mx"), name="c1").start()
        p = wd.leafd(conf=conf, flags=base, name="plain").start()
        per = {}
        with Load([c0, c1, p], "mx", count=100) as before:
            time.sleep(2)
        before.check("plain and concealed nodes of one row")
        c1.kill9()
        c1.start()
        with Load([c0, c1, p], "mx", count=100) as after:
            time.sleep(2)
        after.check("after a kill -9 of a concealed node")
        every = before.ids + after.ids
        eq(len(set(every)), len(every), "no duplicate across the kill (%d IDs)"
           % len(every))
        for d in (c0, p):
            r = d.get("/segment/mx?count=1000")
            eq(r.status, 200, d.name)
            per[d.name] = [int(x) for x in r.text.split()]
        # The plain node's IDs are consecutive counters; the concealed ones
        # are not, and lie in blocks the plain node never reaches.
        plain = per["plain"]
        eq(plain, list(range(plain[0], plain[0] + 1000)), "plain IDs are counters")
        hidden = per["c0"]
        check(hidden != sorted(hidden), "a concealed batch is in no order")
        blocks = {i >> BITS for i in hidden}
        check(all((i >> BITS) not in blocks for i in plain),
              "plain IDs outside the concealed blocks")
        check_revealed(c0, "mx", hidden, "mixed")
        for d in (c0, c1, p):
            d.stop()


def test_concealed_over_a_set(ctx):
    """A concealed tag over two databases (multi-db, blocks of 2^22 IDs):
    two nodes under load, one database made unreachable midway (the other
    serves); no ID repeats and the IDs reveal to counters in their blocks."""
    with Workdir("conceal-set") as wd:
        s = Schemas(ctx, wd, 2)
        s.tag("cs", 1000)
        r = subprocess.run([LEAFD, "multi-db", "init"] + s.urls
                           + ["--block-size=%d" % (1 << 22), "--segment.max_step=2000"],
                           capture_output=True, timeout=120)
        eq(r.returncode, 0, "init: %s" % (r.stdout + r.stderr).decode())
        nodes = [node(wd, s.urls, "s%d" % i, conceal_flags(wd, "cs")).start()
                 for i in range(2)]
        with Load(nodes, "cs", count=100) as load:
            time.sleep(2)
            s.sql(1, "RENAME TABLE leafd_multi_db TO leafd_multi_db_away")
            time.sleep(2)
            s.sql(1, "RENAME TABLE leafd_multi_db_away TO leafd_multi_db")
            time.sleep(1)
        load.check("a concealed tag over a set")
        check_revealed(nodes[0], "cs", sorted(load.ids), "set")
        for d in nodes:
            d.stop()


def test_set_block_too_small_refused(ctx):
    """A set whose block size (100,000) cannot hold a concealed load (a
    range of up to 2^21 IDs): refused at start, saying what to do."""
    with Workdir("conceal-set-small") as wd:
        s = Schemas(ctx, wd, 2)
        s.tag("cz", 1000)
        r = subprocess.run([LEAFD, "multi-db", "init"] + s.urls
                           + ["--block-size=100000", "--segment.max_step=2000"],
                           capture_output=True, timeout=120)
        eq(r.returncode, 0, "init: %s" % (r.stdout + r.stderr).decode())
        d = node(wd, s.urls, "z", conceal_flags(wd, "cz"))
        rc = d.start(expect_fail=True)
        out = d.log()
        check(rc != 0, "refused at start")
        check("segment.conceal_bits 20 needs the databases' blocks to hold 2097152"
              in out and "--block-size" in out, "the message: %s" % out)



def test_concealed_on_postgresql(ctx):
    """PostgreSQL (segment.store = postgresql): two concealed nodes and a
    plain one of one row under load, a concealed node killed (-9) and
    restarted between two rounds; no duplicate. Then a node with another
    key: 503 conceal_key_changed naming both keys, while the others serve."""
    db = bb_postgresql.shared(ctx)
    tag = bb_postgresql.uniq_tag("cpg")
    bb_postgresql.add_tag(db, tag, 1000)
    with Workdir("conceal-pg") as wd:
        conf = bb_postgresql.conf(db.url)
        c = [wd.leafd(conf=conf, flags=conceal_flags(wd, tag), name="c%d" % i).start()
             for i in range(2)]
        p = wd.leafd(conf=conf, name="plain").start()
        with Load(c + [p], tag, count=100) as before:
            time.sleep(2)
        before.check("PostgreSQL: plain and concealed nodes")
        c[1].kill9()
        c[1].start()
        with Load(c + [p], tag, count=100) as after:
            time.sleep(2)
        after.check("PostgreSQL: after a kill -9")
        every = before.ids + after.ids
        eq(len(set(every)), len(every), "no duplicate across the kill (%d IDs)"
           % len(every))
        other = os.path.join(wd.path, "other.key")
        with open(other, "w") as f:
            f.write("000102030405060708090a0b0c0d0e0f\n")
        os.chmod(other, 0o600)
        o = wd.leafd(conf=conf, flags=["--segment.conceal=" + tag,
                                       "--segment.conceal_key_file=" + other],
                     name="other").start()
        r = o.get("/segment/%s" % tag)
        eq(r.status, 503, "another key: %s" % r.text)
        eq(r.json()["error"], "conceal_key_changed", "code")
        check("needs the same segment.conceal_key_file" in r.json()["message"],
              "the message says what to do: %s" % r.text)
        eq(c[0].get("/segment/%s" % tag).status, 200, "the others serve")
        r = c[0].get("/segment/%s?count=1000" % tag)
        eq(r.status, 200, "a batch: %s" % r.text)
        check_revealed(c[0], tag, r.ids(), "PostgreSQL")
        for d in c + [p, o]:
            d.stop()
