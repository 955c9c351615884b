"""Operator actions on segment mode over several databases (issue 20's
matrix, multi-db rows), each under load from several client threads on two
nodes: add a database, remove one, replace a lost one, reorder the list
(serials too), restore one from an older dump, and a DBA changing `step`
(one database and several). Each asserts that no ID or serial repeats, or
that leafd refused the action with a message that says what to do.

The databases are schemas of one MariaDB server (ctx.shared_mariadb()):
"losing" one is DROP DATABASE, and "unreachable" is its leafd_multi_db
table renamed away (every load on it then fails, as on a dead server)."""
import os
import random
import subprocess
import time

import bbutil
from bbutil import LEAFD, MariaDB, Workdir, check, eq, wait_for
from bb_multidb import Load, node

TESTS = [
    "test_replace_a_lost_database",
    "test_reorder_keeps_serials",
    "test_new_first_database_keeps_serials",
    "test_add_a_database",
    "test_remove_a_database",
    "test_restore_from_an_older_dump",
    "test_restore_under_load",
    "test_remove_first_database_keeps_serials",
    "test_replace_first_database_keeps_serials",
    "test_first_database_lost_without_copies",
    "test_restore_first_database_keeps_serials",
    "test_legacy_set_restore",
    "test_step_over_block_size",
    "test_step_change_single_database",
    "test_all_down_at_start_then_block_check",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): operator procedures on running clusters, bound by their waits.
PLAIN_ONLY = set(TESTS)

BLOCK = 100000


class Schemas:
    """Fresh schemas on the shared server, dropped afterwards."""

    def __init__(self, ctx, wd, n):
        self.db = ctx.shared_mariadb()
        base = "mo%d" % random.randrange(10 ** 6)
        self.names = ["%s_%d" % (base, i) for i in range(n)]
        for s in self.names:
            self.sql(None, "DROP DATABASE IF EXISTS %s; CREATE DATABASE %s" % (s, s))
        wd.cleanup.append(self.drop)
        self.urls = [self.db.url.rsplit("/", 1)[0] + "/" + s for s in self.names]

    def sql(self, i, stmt):
        args = ["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1",
                "-P%d" % self.db.port, "-N", "-B"]
        if i is not None:
            args.append(self.names[i])
        r = subprocess.run(args + ["-e", stmt], capture_output=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("SQL failed: %s: %s" % (stmt, r.stderr.decode()))
        return r.stdout.decode()

    def tag(self, tag, step):
        """A segment tag in the first database (init copies it)."""
        self.sql(0, "CREATE TABLE leaf_alloc (biz_tag varchar(128) NOT NULL,"
                    " max_id bigint NOT NULL, step int NOT NULL, description varchar(256),"
                    " update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,"
                    " PRIMARY KEY (biz_tag))")
        self.sql(0, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('%s', 1, %d)"
                 % (tag, step))

    def dump(self, wd, i):
        path = os.path.join(wd.path, "dump%d.sql" % i)
        with open(path, "wb") as f:
            subprocess.run(["mariadb-dump", "--no-defaults", "-uroot", "-h127.0.0.1",
                            "-P%d" % self.db.port, self.names[i]], stdout=f, check=True,
                           timeout=60)
        return path

    def restore(self, i, path):
        with open(path, "rb") as f:
            subprocess.run(["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1",
                            "-P%d" % self.db.port, self.names[i]], stdin=f, check=True,
                           timeout=60)

    def drop(self):
        for s in self.names:
            self.sql(None, "DROP DATABASE IF EXISTS %s" % s)

    def off(self, i):
        """Database i unreachable for loads: its meta table renamed away."""
        self.sql(i, "RENAME TABLE leafd_multi_db TO leafd_multi_db_off")

    def on(self, i):
        self.sql(i, "RENAME TABLE leafd_multi_db_off TO leafd_multi_db")

    def top(self, i):
        v = self.sql(i, "SELECT MAX(max_id) FROM leaf_alloc WHERE description IS NULL "
                        "OR description <> 'serial period'").strip()
        return int(v) if v not in ("", "NULL") else 0


def init(urls, *extra):
    r = subprocess.run([LEAFD, "multi-db", "init"] + list(urls)
                       + ["--block-size=%d" % BLOCK, "--segment.max_step=2000"] + list(extra),
                       capture_output=True, timeout=120)
    return r.returncode, (r.stdout + r.stderr).decode()


def nodes_on(wd, urls, name, n=2, extra=None):
    return [node(wd, urls, "%s%d" % (name, i), extra).start() for i in range(n)]


def stop_all(nodes):
    for d in nodes:
        d.stop()


def no_repeat(ids, what):
    eq(len(set(ids)), len(ids), "%s: %d IDs, %d issued twice"
       % (what, len(ids), len(ids) - len(set(ids))))


def load_for(nodes, tag, seconds, what):
    # 20 IDs a request: Load.check's 1,000 IDs within seconds on a busy machine.
    with Load(nodes, tag, count=20) as load:
        time.sleep(seconds)
    load.check(what)
    return load.ids


def serve_after(wd, s, urls, tag, ids, what):
    """Two new nodes on urls, with the first database unreachable so that
    the others serve: nothing they hand out may be among ids."""
    nodes = nodes_on(wd, urls, "m")
    s.off(0)
    more = load_for(nodes, tag, 2, what)
    s.on(0)
    stop_all(nodes)
    no_repeat(ids + more, what)


def floor_refusal(out, what):
    check("--floor" in out and "not in the list" in out,
          "%s: the refusal names the missing database and the floor flag: %s" % (what, out))


def test_replace_a_lost_database(ctx):
    """Finding 1: init A B; loads go to B while A is unreachable; B is lost
    and init A C runs with an empty C. Today C hands out B's blocks again."""
    with Workdir("ops-multidb-replace") as wd:
        s = Schemas(ctx, wd, 3)
        s.tag('rp', 1000)
        ab = s.urls[:2]
        rc, out = init(ab)
        eq(rc, 0, "init A B: %s" % out)
        nodes = nodes_on(wd, ab, "n")
        ids = load_for(nodes, "rp", 2, "A and B")
        s.off(0)                        # A unreachable: loads go to B
        ids += load_for(nodes, "rp", 4, "B alone")
        stop_all(nodes)
        s.on(0)
        check(s.top(1) > 0, "B handed out IDs")
        s.sql(None, "DROP DATABASE %s" % s.names[1])     # B lost for good
        s.sql(None, "CREATE DATABASE %s" % s.names[1])   # (so cleanup finds it)
        ac = [s.urls[0], s.urls[2]]
        rc, out = init(ac)
        if rc != 0:
            floor_refusal(out, "init A C")
            # The procedure: the highest ID any client received, plus one.
            rc, out = init(ac, "--floor=%d" % (max(ids) + 1))
            eq(rc, 0, "init A C --floor: %s" % out)
        serve_after(wd, s, ac, "rp", ids, "across the replacement")


SERIAL = {"serial.PAY.prefix": "PAY", "serial.PAY.step": "20", "serial.count_max": "10"}


def serial_node(wd, urls, name):
    flags = ["--leaf.snowflake.enable=false", "--segment.mysql.urls=" + ",".join(urls),
             # as bb_multidb.node: a timeout and a wait a busy machine (or
             # ASan) does not outlast ("next segment did not arrive in time")
             "--segment.db_timeout_ms=3000", "--segment.wait_ms=8000",
             "--segment.max_step=2000",
             "--segment.lease_max=50000", "--segment.refresh_ms=500"]
    conf = dict(SERIAL)
    conf["leaf.segment.enable"] = "true"
    return wd.leafd(conf=conf, flags=flags, name=name).start()


def serials(nodes, code, rounds):
    got = []
    for _ in range(rounds):
        for d in nodes:
            r = d.get("/serial/%s?count=5" % code)
            eq(r.status, 200, "serial: %r" % r)
            got += r.text.split()
    return got


def serial_case(ctx, name, make_list):
    with Workdir(name) as wd:
        s = Schemas(ctx, wd, 3)
        s.tag('so', 500)
        old = s.urls[:2]
        eq(init(old)[0], 0, "init")
        conf_nodes = [serial_node(wd, old, "n%d" % i) for i in range(2)]
        with Load(conf_nodes, "so", count=20) as load:
            got = serials(conf_nodes, "PAY", 10)
            time.sleep(1.5)
        load.check("before")
        ids = load.ids
        stop_all(conf_nodes)
        new = make_list(s)
        rc, out = init(new)
        if rc != 0:
            check("serial" in out, "a refusal that names the serial rows: %s" % out)
            return
        conf_nodes = [serial_node(wd, new, "m%d" % i) for i in range(2)]
        with Load(conf_nodes, "so", count=20) as load:
            got += serials(conf_nodes, "PAY", 10)
            time.sleep(1.5)
        load.check("after")
        stop_all(conf_nodes)
        no_repeat(got, "serials across the change")
        no_repeat(ids + load.ids, "IDs across the change")


def test_reorder_keeps_serials(ctx):
    """Finding 2: init A B, then init B A: today PAY<today>000001 again."""
    serial_case(ctx, "ops-multidb-reorder", lambda s: [s.urls[1], s.urls[0]])


def test_new_first_database_keeps_serials(ctx):
    """Finding 2: a new database put first (init C A B)."""
    serial_case(ctx, "ops-multidb-newfirst", lambda s: [s.urls[2], s.urls[0], s.urls[1]])


def serial_round(wd, urls, name, tag):
    """Two serial nodes on urls under segment load: 100 serials of PAY
    and the IDs of tag."""
    nodes = [serial_node(wd, urls, "%s%d" % (name, i)) for i in range(2)]
    with Load(nodes, tag, count=20) as load:
        got = serials(nodes, "PAY", 10)
        time.sleep(1.5)
    load.check(name)
    stop_all(nodes)
    return got, load.ids


def first_gone_case(ctx, name, old_n, new_list):
    """Serials issued on a set of old_n databases, then init with a list
    that lacks the first one (new_list(s)): serials go on, none repeats."""
    with Workdir(name) as wd:
        s = Schemas(ctx, wd, 3)
        s.tag('fg', 500)
        old = s.urls[:old_n]
        eq(init(old)[0], 0, "init")
        got, ids = serial_round(wd, old, "n", "fg")
        new = new_list(s)
        # The procedure: every node stopped, the floor above the first
        # database's rows (the test reads them even when "lost").
        rc, out = init(new, "--floor=%d" % (max(ids) + 1))
        eq(rc, 0, "init without the first database: %s" % out)
        more, ids2 = serial_round(wd, new, "m", "fg")
        no_repeat(got + more, "serials across the change (%d before, %d after)"
                  % (len(got), len(more)))
        no_repeat(ids + ids2, "IDs across the change")


def test_remove_first_database_keeps_serials(ctx):
    """Issue 20 (second review): init A B C, serials, init B C --floor:
    serial rows lived in A alone; today PAY<today>000001 again."""
    first_gone_case(ctx, "ops-multidb-rmfirst", 3, lambda s: s.urls[1:3])


def test_replace_first_database_keeps_serials(ctx):
    """init A B, serials, A lost for good (dropped), init C B --floor with
    an empty C: today serials start again."""
    def lose_a(s):
        s.sql(None, "DROP DATABASE %s; CREATE DATABASE %s" % (s.names[0], s.names[0]))
        return [s.urls[2], s.urls[1]]
    first_gone_case(ctx, "ops-multidb-replfirst", 2, lose_a)


def test_first_database_lost_without_copies(ctx):
    """The first database lost, and no copy of its serial rows anywhere (its
    nodes ran an older leafd; simulated by deleting B's copies): init
    refuses, saying what to do, unless --accept-serial-restart."""
    with Workdir("ops-multidb-nocopies") as wd:
        s = Schemas(ctx, wd, 3)
        s.tag('nc', 500)
        eq(init(s.urls[:2])[0], 0, "init A B")
        got, ids = serial_round(wd, s.urls[:2], "n", "nc")
        s.sql(1, "DELETE FROM leaf_alloc WHERE description = 'serial period'")
        s.sql(None, "DROP DATABASE %s; CREATE DATABASE %s" % (s.names[0], s.names[0]))
        new = [s.urls[2], s.urls[1]]
        rc, out = init(new, "--floor=%d" % (max(ids) + 1))
        check(rc != 0 and "serial" in out and "--accept-serial-restart" in out
              and "not in the list" in out,
              "init refuses, naming the serial rows and the flag: rc %d: %s" % (rc, out))
        rc, out = init(new, "--floor=%d" % (max(ids) + 1), "--accept-serial-restart")
        eq(rc, 0, "init --accept-serial-restart: %s" % out)
        check("serials start again" in out, "init says what it accepted: %s" % out)


def test_restore_first_database_keeps_serials(ctx):
    """init A B, serials, A dumped, more serials, A restored from the dump,
    init A B (the documented procedure): today its serial rows go back to
    the dump's values and repeat."""
    with Workdir("ops-multidb-restfirst") as wd:
        s = Schemas(ctx, wd, 2)
        s.tag('rf', 500)
        eq(init(s.urls)[0], 0, "init A B")
        got, ids = serial_round(wd, s.urls, "n", "rf")
        dump = s.dump(wd, 0)
        more, ids2 = serial_round(wd, s.urls, "m", "rf")
        s.restore(0, dump)
        rc, out = init(s.urls)
        eq(rc, 0, "init after the restore: %s" % out)
        last, ids3 = serial_round(wd, s.urls, "o", "rf")
        no_repeat(got + more + last, "serials across the restore of the first database")
        no_repeat(ids + ids2 + ids3, "IDs across the restore")


def test_legacy_set_restore(ctx):
    """A set made before leafd_multi_member existed (simulated: the table
    dropped in both): init A B must write the members, or the nodes record
    no top and the restore procedure repeats B's IDs (the reviewer: 53,240
    of 209,140 IDs twice)."""
    restore_b_case(ctx, "ops-multidb-legacy", "lg", legacy=True)


def test_add_a_database(ctx):
    """Add a database (the documented procedure: init with the new list
    while the old nodes run, then restart them with it): the old nodes
    refuse loads (503) once their databases say the set changed."""
    with Workdir("ops-multidb-add") as wd:
        s = Schemas(ctx, wd, 3)
        s.tag('ad', 200)
        eq(init(s.urls[:2])[0], 0, "init A B")
        nodes = nodes_on(wd, s.urls[:2], "n")
        with Load(nodes, "ad", count=20) as load:
            time.sleep(1.5)
            rc, out = init(s.urls)
            time.sleep(1.5)
        eq(rc, 0, "init A B C under load: %s" % out)
        no_repeat(load.ids, "during the change")
        for e in load.errors:
            check(e.startswith("503 "), "old nodes refuse with a 503: %s" % e)
        stop_all(nodes)
        serve_after(wd, s, s.urls, "ad", load.ids, "across the addition")


def test_remove_a_database(ctx):
    """Remove a database: init with a list that lacks a member is refused
    (unless --floor); the floor read from the removed database makes it
    safe."""
    with Workdir("ops-multidb-remove") as wd:
        s = Schemas(ctx, wd, 3)
        s.tag('rm', 300)
        eq(init(s.urls)[0], 0, "init A B C")
        nodes = nodes_on(wd, s.urls, "n")
        ids = load_for(nodes, "rm", 1.5, "A B C")
        s.off(0)
        s.off(1)                        # C serves
        ids += load_for(nodes, "rm", 2, "C alone")
        s.on(0)
        s.on(1)
        stop_all(nodes)
        rc, out = init(s.urls[:2])
        if rc != 0:
            floor_refusal(out, "init A B")
            # The procedure: C's highest max_id (every node stopped), plus one.
            rc, out = init(s.urls[:2], "--floor=%d" % (s.top(2) + 1))
            eq(rc, 0, "init A B --floor: %s" % out)
        serve_after(wd, s, s.urls[:2], "rm", ids, "across the removal")


def b_dumped_under_load(wd, s, tag):
    """Two nodes on A B with B serving (A unreachable a while, so B stays
    preferred), B dumped, B serving on: (nodes, IDs, dump)."""
    nodes = nodes_on(wd, s.urls, "n")
    s.off(0)                            # B serves (and stays preferred)
    ids = load_for(nodes, tag, 2, "B")
    s.on(0)
    wait_for(lambda: all(db_state(d, 0)["up"] for d in nodes), timeout=30,
             what="A back up")
    dump = s.dump(wd, 1)
    ids += load_for(nodes, tag, 3, "B after the dump")
    return nodes, ids, dump


def test_restore_from_an_older_dump(ctx):
    """B dumped, B serves on, B restored from the dump; the procedure runs
    init with the same list before the nodes start again. Today init says
    "already a set" and B repeats what it handed out after the dump."""
    restore_b_case(ctx, "ops-multidb-restore", "rs")


def restore_b_case(ctx, name, tag, legacy=False):
    """B restored from an older dump, then init with the same list: nothing
    B hands out after it repeats. legacy: the set made without member
    records (leafd_multi_member dropped in both, init run again)."""
    with Workdir(name) as wd:
        s = Schemas(ctx, wd, 2)
        s.tag(tag, 400)
        eq(init(s.urls)[0], 0, "init A B")
        if legacy:
            for i in range(2):
                s.sql(i, "DROP TABLE leafd_multi_member")
            rc, out = init(s.urls)
            eq(rc, 0, "init on the old set: %s" % out)
        nodes, ids, dump = b_dumped_under_load(wd, s, tag)
        stop_all(nodes)
        s.restore(1, dump)
        rc, out = init(s.urls)
        eq(rc, 0, "init after the restore: %s" % out)
        serve_after(wd, s, s.urls, tag, ids, "across the restore")


def db_state(d, i):
    return d.get("/health").json()["segment"]["databases"][i]


def test_restore_under_load(ctx):
    """B restored from an older dump while two nodes serve (B was down for
    the restore, as a restore takes it down): the nodes keep it out of
    loads, saying why, instead of repeating what it handed out since the
    dump; then the documented procedure (init, restart) brings it back."""
    with Workdir("ops-multidb-restore-live") as wd:
        s = Schemas(ctx, wd, 2)
        s.tag("rl", 400)
        eq(init(s.urls)[0], 0, "init A B")
        nodes, ids, dump = b_dumped_under_load(wd, s, "rl")
        with Load(nodes, "rl", count=20) as load:
            s.off(1)                    # B goes down for its restore
            wait_for(lambda: not any(db_state(d, 1)["up"] for d in nodes), timeout=30,
                     what="B marked down")
            s.restore(1, dump)
            s.sql(1, "DROP TABLE leafd_multi_db_off")
            # The probes find B answering again, and behind.
            wait_for(lambda: all("restored from an older copy" in db_state(d, 1).get("error", "")
                                 for d in nodes), timeout=30, what="B found behind")
            s.off(0)                    # only B could serve now
            time.sleep(3)
            s.on(0)
            time.sleep(1)
        no_repeat(ids + load.ids, "B restored under load")
        for e in load.errors:
            check(e.startswith("503 ") and '"error"' in e, "a clear refusal: %s" % e)
        for d in nodes:
            st = db_state(d, 1)
            check(not st["up"] and "restored from an older copy" in st.get("error", ""),
                  "B kept out, saying why: %s" % st)
        ids += load.ids
        stop_all(nodes)
        rc, out = init(s.urls)
        eq(rc, 0, "init after the restore: %s" % out)
        check("restored from an older copy" in out, out)
        serve_after(wd, s, s.urls, "rl", ids, "B after init")


def test_step_over_block_size(ctx):
    """Finding 6: a DBA raises a tag's step above the block size while two
    nodes serve it. Today: 503 bad_leaf_alloc_row once the buffers run out.
    Now: loads take a block's worth, said once per tag in the log."""
    with Workdir("ops-multidb-step") as wd:
        s = Schemas(ctx, wd, 2)
        s.tag('st', 1000)
        eq(init(s.urls)[0], 0, "init")
        nodes = nodes_on(wd, s.urls, "n")
        with Load(nodes, "st", count=100) as load:
            time.sleep(1)
            for i in range(2):
                s.sql(i, "UPDATE leaf_alloc SET step = %d WHERE biz_tag = 'st'" % (3 * BLOCK))
            # Long enough for the refresh to read the new step and for
            # several loads to use it; on a busy machine, until each node
            # has capped one (what is checked below).
            time.sleep(6)
            for d in nodes:
                wait_for(lambda: "over the databases' block size" in d.log(), 60,
                         step=0.2, what="%s capping a load at the block size" % d.name)
            for i in range(2):
                s.sql(i, "UPDATE leaf_alloc SET step = 1000 WHERE biz_tag = 'st'")
            time.sleep(2)
        load.check("step over the block size")
        for d in nodes:
            said = d.log().count("over the databases' block size")
            eq(said, 1, "the cap is logged once per tag, not per load:\n%s" % d.log())
        stop_all(nodes)


def test_step_change_single_database(ctx):
    """A DBA raising and lowering a tag's step on one database while two
    nodes serve it: nothing repeats, nothing fails."""
    with Workdir("ops-single-step") as wd:
        s = Schemas(ctx, wd, 1)
        s.tag('ss', 100)
        flags = ["--leaf.snowflake.enable=false", "--segment.mysql.url=" + s.urls[0],
                 "--segment.refresh_ms=500", "--segment.max_step=100000"]
        nodes = [wd.leafd(conf={"leaf.segment.enable": "true"}, flags=flags,
                          name="n%d" % i).start() for i in range(2)]
        with Load(nodes, "ss", count=10) as load:
            for step in (50000, 20, 100):
                time.sleep(1.5)
                s.sql(0, "UPDATE leaf_alloc SET step = %d WHERE biz_tag = 'ss'" % step)
            time.sleep(1.5)
        load.check("step changes")
        stop_all(nodes)


def own_servers(wd, n):
    """n throwaway MariaDB servers (they are stopped and started, which the
    shared one must not be); their ports from LEAFD_TEST_PORTS's slice when
    it is set (mariadb.sh uses a port written to DIR/port as it is)."""
    out = []
    for i in range(n):
        m = MariaDB(os.path.join(wd.path, "db%d" % i))
        if bbutil._port_range() is not None:
            with open(os.path.join(m.dir, "port"), "w") as f:
                f.write("%d\n" % bbutil.free_port())
        wd.cleanup.append(m.stop)
        out.append(m.start())
    return out



def test_all_down_at_start_then_block_check(ctx):
    """Issue 28 (section 3.5): segment.lease_max or segment.max_step over
    the set's block size is refused at start when a database answers (a
    lease from the table, or a range, is one range inside one block). A
    node started while every database is down cannot check it then: it
    checks when a database first answers, and refuses every load, saying
    why in /health (each database's error), until it is restarted with a
    config that fits. Before (a46976b) such a node served segment IDs as if the config
    fit, and a lease over the block size answered 503 bad_leaf_alloc_row,
    blaming the tag's row instead of the config."""
    with Workdir("ops-multidb-alldown-block") as wd:
        block = 1000
        a, b = own_servers(wd, 2)
        a.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('bk', 1, 100)")
        urls = [a.url, b.url]
        r = subprocess.run([LEAFD, "multi-db", "init"] + urls
                           + ["--block-size=%d" % block, "--segment.max_step=%d" % block,
                              "--segment.lease_max=%d" % block],
                           capture_output=True, timeout=120)
        eq(r.returncode, 0, "init: %s" % (r.stdout + r.stderr).decode())

        def configured(name, lease_max, max_step):
            return node(wd, urls, name, ["--segment.lease_max=%d" % lease_max,
                                         "--segment.max_step=%d" % max_step])

        for key, lm, ms in (("lease_max", 5 * block, block), ("max_step", block, 5 * block)):
            said = "segment.%s %d is over the databases' block size %d" % (key, 5 * block, block)
            # The reference: with the databases up, refused at start.
            d = configured("up-" + key, lm, ms)
            rc = d.start(expect_fail=True)
            check(rc != 0 and said in d.log(),
                  "%s over the block size, databases up: refused at start (rc %s):\n%s"
                  % (key, rc, d.log()))
            a.stop()
            b.stop()
            d = configured("down-" + key, lm, ms).start()   # nothing to check against yet
            a.start()
            b.start()

            def answered():
                """A request served, or the node saying why it refuses."""
                r = d.get("/segment/bk")
                if r.status == 200:
                    return r
                dbs = d.get("/health").json()["segment"]["databases"]
                return r if all(said in x.get("error", "") for x in dbs) else None

            r = wait_for(answered, timeout=60, step=0.2,
                         what="%s: both databases answering again" % d.name)
            check(r.status == 503 and r.json().get("error"),
                  "%s %d over the block size %d, started with every database down: "
                  "once they answer, every load is refused (503 and a JSON error), "
                  "got %d %s" % (key, 5 * block, block, r.status, r.text.strip()[:300]))
            if key == "lease_max":
                r = d.get("/segment/bk/lease?size=%d" % (block + block // 2))
                check(r.status == 503 and r.json().get("error") not in (None, "bad_leaf_alloc_row"),
                      "a lease over the block size: 503, and not blamed on the row: %d %s"
                      % (r.status, r.text.strip()[:300]))
            for x in d.get("/health").json()["segment"]["databases"]:
                check(not x["up"] and said in x.get("error", ""),
                      "/health says why each database is kept out: %s" % x)
            d.stop()
        # The config fixed: the same databases serve, a lease of a whole
        # block stays inside one block.
        d = configured("fits", block, block).start()
        r = wait_for(lambda: d.get("/segment/bk/lease?size=%d" % block).status == 200 and
                     d.get("/segment/bk/lease?size=%d" % block), timeout=60, step=0.2,
                     what="a lease of %d from the fixed node" % block)
        for line in r.text.split("\n"):
            if line.strip():
                lo, hi = (int(x) for x in line.split())
                eq(lo // block, (hi - 1) // block, "lease [%d, %d) inside one block" % (lo, hi))
        eq(d.get("/segment/bk?count=10").status, 200, "the fixed node serves")
        d.stop()
