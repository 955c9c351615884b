"""Operator actions on a shared worker-ID store, under load (issue 20's
matrix, the worker-ID rows): two or more leafd nodes take snowflake IDs from
Redis, MySQL or ZooKeeper while client threads take IDs from every node all
the time; the action happens meanwhile, and a node started right after it
joins the load. Each test asserts that no ID was issued twice across the
nodes, and that whatever was refused was refused with a 503 and a JSON error
code (never a crash):
  - Redis: a restart without persistence, a restore from an older RDB (the
    store goes back in time under live nodes), FLUSHALL;
  - MySQL: TRUNCATE leaf_worker, a restore of leaf_worker from an older
    mariadb-dump;
  - ZooKeeper: its data directory lost (stopped, wiped, started);
  - a clock step (libfaketime) on the node started after a Redis restore;
  - a worker ID that moves to another node whose snowflake serials print in
    a zone behind (Asia/Tokyo -> Asia/Shanghai), in each store: the serial
    zones record kept with the worker ID gates the serials that would
    repeat (503 serial_zone_gate), with the record removed as the control.
Without redis-server, MariaDB or ZooKeeper those tests skip (under CI=1 they
fail)."""
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import json

from bbutil import Client, MariaDB, Workdir, check, eq, faketime_preload, wait_for

TESTS = [
    "test_redis_restart_without_persistence",
    "test_redis_restore_older_rdb",
    "test_redis_flushall",
    "test_mysql_truncate",
    "test_mysql_restore_older_dump",
    "test_zookeeper_data_dir_lost",
    "test_redis_restore_with_clock_step",
    "test_mysql_failover_lagging_replica",
    "test_redis_serial_zone_moves",
    "test_mysql_serial_zone_moves",
    "test_zookeeper_serial_zone_moves",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): store restores and wipes, bound by their waits
# (check_workerid_store runs them under ASan).
PLAIN_ONLY = set(TESTS)

# Small and quick: a 3 s lease, 200 ms heartbeats, 500 ms fence steps; the
# gate of an ID the store lost is 500 + 1000 (borrow) + 500 (clock limit).
LEASE_MS = 3000
COMMON = ["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
          "--snowflake.heartbeat_ms=200", "--snowflake.fence_step_ms=500",
          "--snowflake.max_clock_offset_ms=500",
          "--snowflake.takeover_age_ms=%d" % LEASE_MS,
          "--snowflake.worker_bits=3", "--snowflake.sequence_bits=19"]
PREFIX = "leafd:snowflake:"


class Load:
    """Client threads taking IDs from every node (nodes may be added while it
    runs) until stop(); the IDs, and the refusals by status and code."""

    def __init__(self, threads=4, count=50):
        self.nodes = []
        self.ids = []
        self.refused = {}
        self.bad = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.count = count
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(threads)]

    def add(self, d):
        with self.lock:
            self.nodes.append(d.port)

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def _run(self, i):
        clients = {}
        n = i
        while not self.done.is_set():
            with self.lock:
                ports = list(self.nodes)
            if not ports:
                time.sleep(0.01)
                continue
            port = ports[n % len(ports)]
            n += 1
            c = clients.get(port) or clients.setdefault(port, Client(port, timeout=10))
            try:
                r = c.get("/snowflake?count=%d" % self.count)
            except OSError:
                c.close()
                clients.pop(port, None)
                time.sleep(0.02)
                continue
            if r.status == 200:
                got = r.ids()
                with self.lock:
                    self.ids.extend((port, x) for x in got)
                continue
            try:
                code = r.json().get("error")
            except ValueError:
                code = None
            with self.lock:
                if r.status != 503 or not code:
                    self.bad.append((r.status, r.text[:200]))
                key = "%d %s" % (r.status, code)
                self.refused[key] = self.refused.get(key, 0) + 1
            time.sleep(0.01)
        for c in clients.values():
            c.close()

    def issued(self):
        with self.lock:
            return len(self.ids)

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(30)

    def assert_unique(self, what):
        """No ID twice, across every node; every refusal a 503 with a code."""
        self.stop()
        seen = {}
        twice = 0
        ports = set()
        for port, x in self.ids:
            if x in seen:
                twice += 1
                ports.add((seen[x], port))
            else:
                seen[x] = port
        check(not self.bad, "%s: refusals that are not 503 + JSON code: %r"
              % (what, self.bad[:5]))
        check(twice == 0, "%s: %d IDs issued twice (node ports %r); refusals %r"
              % (what, twice, sorted(ports)[:4], self.refused))
        check(len(seen) > 0, "%s: no IDs at all" % what)
        return len(seen)


def grows(load, by, timeout=30, what="IDs issued"):
    n0 = load.issued()
    wait_for(lambda: load.issued() >= n0 + by, timeout, step=0.05, what=what)


def redis_node(wd, r, ip, name=None, env=None, preload=None, extra=()):
    flags = COMMON + list(extra) + ["--snowflake.worker_source=redis",
                      "--snowflake.redis.url=redis://127.0.0.1:%d/2" % r.port,
                      "--snowflake.ip=%s" % ip, "--leaf.snowflake.port=7000",
                      "--snowflake.cache_file=%s.json" % (name or ip)]
    return wd.leafd(flags=flags, name=name or ip, env=env, preload=preload)


def mysql_node(wd, db, ip, extra=()):
    flags = COMMON + list(extra) + ["--snowflake.worker_source=mysql",
                      "--snowflake.mysql.url=%s" % db.url,
                      "--snowflake.ip=%s" % ip, "--leaf.snowflake.port=7000",
                      "--snowflake.cache_file=%s.json" % ip]
    return wd.leafd(flags=flags, name=ip)


def zk_node(wd, zk, ip):
    flags = COMMON + ["--snowflake.worker_source=zookeeper",
                      "--leaf.snowflake.zk.address=%s" % zk.address,
                      "--leaf.name=ops", "--snowflake.zk_session_timeout_ms=4000",
                      "--snowflake.ip=%s" % ip, "--leaf.snowflake.port=7000",
                      "--snowflake.cache_file=%s.json" % ip]
    return wd.leafd(flags=flags, name=ip)


def state(d):
    r = d.get("/snowflake/state")
    eq(r.status, 200, "state")
    return r.json()


def two_nodes_loaded(wd, make):
    """Nodes A and B (from make(ip)) serving, and a load on both that has
    issued IDs."""
    a = make("10.7.0.1").start()
    b = make("10.7.0.2").start()
    load = Load().start()
    load.add(a)
    load.add(b)
    grows(load, 2000, 60, "the first IDs from A and B")
    return a, b, load


def redis_two_nodes(wd, r, extra=()):
    return two_nodes_loaded(wd, lambda ip: redis_node(wd, r, ip, extra=extra))


# The restore tests: A and B heartbeat once a second, so that C, started at
# once, usually claims before their next write finds what the restore did
# (the case the rule is for; it holds whatever the order).
SLOW_HB = ["--snowflake.heartbeat_ms=1000"]


def join_third(wd, load, c):
    """C started right after the action, into the load; its worker ID (or
    None while it has none)."""
    c.start()
    load.add(c)
    return state(c).get("worker_id")


def c_worker(c):
    """C's worker ID once it has one."""
    def got():
        w = state(c).get("worker_id")
        return (w,) if w is not None and w >= 0 else None
    return wait_for(got, 30, step=0.1, what="C's worker ID")[0]


def third_not_live(wd, load, c, a, b, wa, wb, what):
    """C joins the load right after the store went back: no ID twice, C
    took neither live node's worker ID, and A and B kept theirs."""
    join_third(wd, load, c)
    grows(load, 3000, 60, "IDs after the restore")
    wc = c_worker(c)
    load.assert_unique(what)
    check(wc not in (wa, wb), "C took a live node's worker ID %r (A %r, B %r)"
          % (wc, wa, wb))
    eq(state(a)["worker_id"], wa, "A keeps its worker ID")
    eq(state(b)["worker_id"], wb, "B keeps its worker ID")


def test_redis_restart_without_persistence(ctx):
    """Redis restarted empty under A and B: their next heartbeat finds the
    hash gone (503 worker_id_lost); C, started at once, gates on the new
    epoch; no ID twice."""
    with Workdir("ops-wid-redis-restart") as wd:
        r = wd.redis(epoch0=[(2, PREFIX)])
        r.epoch0 = []           # the restart comes back with nothing
        a, b, load = redis_two_nodes(wd, r)
        r.stop()
        r.wipe()
        r.start()
        join_third(wd, load, redis_node(wd, r, "10.7.0.3"))
        grows(load, 2000, 60, "IDs after the restart")
        wait_for(lambda: state(a)["status"] != "ok" or state(a)["worker_id"] is None,
                 10, what="A noticing its hash gone")
        load.assert_unique("redis restarted without persistence")


def test_redis_restore_older_rdb(ctx):
    """An RDB saved while A and B run; more than a lease later Redis is
    restarted from it: A's and B's hashes are there with stale heartbeats.
    C, started before their next write, takes neither worker ID (they write
    within a lease, and C's claim waits that long for a hash older than the
    restart): no ID twice, and A and B keep theirs."""
    with Workdir("ops-wid-redis-rdb") as wd:
        r = wd.redis(epoch0=[(2, PREFIX)])
        a, b, load = redis_two_nodes(wd, r, SLOW_HB)
        wa, wb = state(a)["worker_id"], state(b)["worker_id"]
        r.cli("SAVE")
        time.sleep(LEASE_MS / 1000.0 + 1)
        grows(load, 1000, 30, "IDs after the save")
        r.stop()
        r.start()               # from the RDB
        third_not_live(wd, load, redis_node(wd, r, "10.7.0.3"), a, b, wa, wb,
                       "redis restored from an older RDB")
        check("went back in time" in a.log() + b.log(),
              "A or B logs that its record went back in time")


def test_redis_flushall(ctx):
    """FLUSHALL under A and B: both lose their worker IDs at their next
    write (503 worker_id_lost); C gates on the new epoch."""
    with Workdir("ops-wid-redis-flush") as wd:
        r = wd.redis(epoch0=[(2, PREFIX)])
        a, b, load = redis_two_nodes(wd, r)
        r.cli("FLUSHALL")
        join_third(wd, load, redis_node(wd, r, "10.7.0.3"))
        grows(load, 2000, 60, "IDs after FLUSHALL")
        wait_for(lambda: a.get("/snowflake").status == 503, 10,
                 what="A refusing after FLUSHALL")
        check("worker_id_lost" in a.get("/snowflake").text, "A: worker_id_lost")
        load.assert_unique("redis FLUSHALL")


def truncate(db):
    """TRUNCATE TABLE leaf_worker; again when MariaDB answers 1146 (no such
    table), which it did once here while the nodes' claims held the table
    (TRUNCATE is a DROP and a CREATE in InnoDB)."""
    for i in range(3):
        try:
            return db.sql("TRUNCATE TABLE leaf_worker")
        except Exception as e:
            if "1146" not in str(e) or i == 2:
                raise
            time.sleep(0.2)


def test_mysql_truncate(ctx):
    """TRUNCATE TABLE leaf_worker under A and B: their next heartbeat finds
    no row (503 worker_id_lost); C gates on the new epoch row."""
    with Workdir("ops-wid-mysql-trunc") as wd:
        db = wd.mariadb().worker_epoch0()
        a, b, load = two_nodes_loaded(wd, lambda ip: mysql_node(wd, db, ip))
        truncate(db)
        join_third(wd, load, mysql_node(wd, db, "10.7.0.3"))
        grows(load, 2000, 60, "IDs after TRUNCATE")
        wait_for(lambda: a.get("/snowflake").status == 503, 10,
                 what="A refusing after TRUNCATE")
        load.assert_unique("TRUNCATE leaf_worker")


def test_mysql_restore_older_dump(ctx):
    """leaf_worker dumped while A and B run, restored more than a lease
    later: C, started at once, takes neither worker ID; A and B write their
    rows again and keep them; no ID twice."""
    with Workdir("ops-wid-mysql-dump") as wd:
        db = wd.mariadb().worker_epoch0()
        a, b, load = two_nodes_loaded(wd, lambda ip: mysql_node(wd, db, ip, SLOW_HB))
        wa, wb = state(a)["worker_id"], state(b)["worker_id"]
        dump = os.path.join(wd.path, "leaf_worker.sql")
        with open(dump, "wb") as f:
            subprocess.run(["mariadb-dump", "--no-defaults", "-uroot", "-h127.0.0.1",
                            "-P%d" % db.port, "leaf", "leaf_worker"],
                           stdout=f, check=True, timeout=60)
        time.sleep(LEASE_MS / 1000.0 + 1)
        grows(load, 1000, 30, "IDs after the dump")
        with open(dump, "rb") as f:
            subprocess.run(["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1",
                            "-P%d" % db.port, "leaf"], stdin=f, check=True, timeout=60)
        third_not_live(wd, load, mysql_node(wd, db, "10.7.0.3"), a, b, wa, wb,
                       "leaf_worker restored from an older dump")


def test_zookeeper_data_dir_lost(ctx):
    """ZooKeeper stopped, its data directory wiped, started: A and B cannot
    confirm fences (503 fence_unconfirmed, then worker_id_lost); C registers
    sequence 0 again, a live worker ID, but gates past the new forever's
    creation + fence step + borrow + clock limit: no ID twice."""
    with Workdir("ops-wid-zk-wipe") as wd:
        zk = wd.zookeeper()
        a, b, load = two_nodes_loaded(wd, lambda ip: zk_node(wd, zk, ip))
        zk.stop()
        data = os.path.join(zk.dir, "data")
        shutil.rmtree(data)
        os.makedirs(data)
        zk.start()
        join_third(wd, load, zk_node(wd, zk, "10.7.0.3"))
        grows(load, 2000, 60, "IDs after the wipe")
        load.assert_unique("ZooKeeper data directory lost")


def test_redis_restore_with_clock_step(ctx):
    """The RDB restore again, and C's clock (libfaketime) stepped 2 s back
    after it started: C refuses or waits, and nothing repeats."""
    with Workdir("ops-wid-redis-rdb-clock") as wd:
        r = wd.redis(epoch0=[(2, PREFIX)])
        a, b, load = redis_two_nodes(wd, r)
        r.cli("SAVE")
        time.sleep(LEASE_MS / 1000.0 + 1)
        r.stop()
        r.start()
        ft = os.path.join(wd.path, "faketime.rc")
        with open(ft, "w") as f:
            f.write("+0\n")
        c = redis_node(wd, r, "10.7.0.3", env={"FAKETIME_TIMESTAMP_FILE": ft,
                                                "FAKETIME_NO_CACHE": "1",
                                                "FAKETIME_DONT_FAKE_MONOTONIC": "1"},
                       preload=faketime_preload(wd.path))
        join_third(wd, load, c)
        grows(load, 1000, 60, "IDs after the restore")
        with open(ft, "w") as f:
            f.write("-2\n")
        grows(load, 2000, 60, "IDs after C's clock step")
        load.assert_unique("redis restore and a clock step")


class Proxy:
    """A TCP proxy on 127.0.0.1 whose backend can move, as a VIP does:
    move() closes every connection through it (as the old primary's death
    does) and sends new ones to the new backend; None refuses them (the
    address not yet up anywhere)."""

    def __init__(self, backend):
        self.backend = backend
        self.lock = threading.Lock()
        self.socks = []
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.done = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.done:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            with self.lock:
                to = self.backend
            if to is None:
                c.close()
                continue
            try:
                u = socket.create_connection(("127.0.0.1", to), timeout=5)
            except OSError:
                c.close()
                continue
            u.settimeout(None)
            with self.lock:
                self.socks += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def move(self, backend):
        with self.lock:
            self.backend = backend
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.done = True
        self.move(None)
        self.ls.close()


def replicated_pair(wd):
    """A MariaDB primary (server_id 1) and an asynchronous GTID replica of
    it (server_id 2), both with binary logs, the replica read-only."""
    dbs = []
    for sid in (1, 2):
        m = MariaDB.__new__(MariaDB)
        m.dir = os.path.join(wd.path, "mariadb%d" % sid)
        os.makedirs(m.dir, exist_ok=True)
        m.port = m.url = None
        with open(os.path.join(m.dir, "args"), "w") as f:
            f.write("--server-id=%d --log-bin=%s/binlog --binlog-format=ROW "
                    "--log-slave-updates --gtid-strict-mode=0%s\n"
                    % (sid, m.dir, " --read-only=1" if sid == 2 else ""))
        wd.cleanup.append(m.stop)
        dbs.append(m.start())
    p, r = dbs
    # both loaded sql/mysql.sql at start: the replica starts from the
    # primary's position now
    pos = p.sql("SELECT @@gtid_binlog_pos").strip()
    r.sql("SET GLOBAL gtid_slave_pos = '%s'" % pos)
    r.sql("CHANGE MASTER TO master_host='127.0.0.1', master_port=%d, "
          "master_user='root', master_use_gtid=slave_pos, "
          "master_connect_retry=1" % p.port)
    r.sql("START SLAVE")
    return p, r


def replica_caught_up(p, r, timeout=30):
    pos = p.sql("SELECT @@gtid_binlog_pos").strip()
    wait_for(lambda: r.sql("SELECT MASTER_GTID_WAIT('%s', 1)" % pos).strip() == "0",
             timeout, step=0.1, what="the replica applying the primary's writes")


def test_mysql_failover_lagging_replica(ctx):
    """leaf_worker on a MariaDB primary with an asynchronous replica whose
    SQL thread stops (it lags more than a lease behind A's heartbeats); the
    primary is killed, the replica promoted, and each node's database
    address moves to it (C's first, A's a little later, as VIPs and DNS
    reach nodes at different times). C, started at once, finds A's row with
    a stale heartbeat: it must not take A's worker ID (A issued under it
    until a moment ago), and no ID may be issued twice."""
    with Workdir("ops-wid-mysql-failover") as wd:
        p, r = replicated_pair(wd)
        pa, pc = Proxy(p.port), Proxy(p.port)
        wd.cleanup.append(pa.close)
        wd.cleanup.append(pc.close)
        p.worker_epoch0()
        a = mysql_node(wd, type("DB", (), {"url": "mysql://root@127.0.0.1:%d/leaf"
                                          % pa.port})(), "10.7.0.1").start()
        load = Load().start()
        load.add(a)
        grows(load, 2000, 60, "the first IDs from A")
        wa = state(a)["worker_id"]
        replica_caught_up(p, r)
        r.sql("STOP SLAVE SQL_THREAD")
        time.sleep(LEASE_MS / 1000.0 + 1)   # A's heartbeats go to the primary only
        grows(load, 1000, 30, "IDs while the replica lags")
        os.kill(int(open(os.path.join(p.dir, "pid")).read().strip()), signal.SIGKILL)
        pa.move(None)
        pc.move(None)
        r.sql("STOP SLAVE")
        r.sql("RESET SLAVE ALL")
        r.sql("SET GLOBAL read_only = 0")
        pc.move(r.port)
        c = mysql_node(wd, type("DB", (), {"url": "mysql://root@127.0.0.1:%d/leaf"
                                          % pc.port})(), "10.7.0.3")
        join_third(wd, load, c)
        wc = c_worker(c)
        pa.move(r.port)
        grows(load, 2000, 60, "IDs after the failover")
        load.assert_unique("a lagging replica promoted")
        check(wc != wa, "C took A's worker ID %r on the promoted replica" % wa)
        check("server changed" in c.log(), "C logs that leaf_worker's server changed")
        eq(state(a)["worker_id"], wa, "A keeps its worker ID")
        check("went back in time" in a.log(), "A logs that its row went back in time")


# --- a worker ID moving between nodes, and its snowflake serials' zones ----

ZONE_CODE = "Z"


def serial_load(node, until, count=10, clients=3):
    """clients threads take serials of ZONE_CODE from node until
    until(texts) (the serials so far) or 60 s. Returns (texts, per-client event lists of
    (kind, what, time): ("ok", n) / ("gate", message) / ("503", code):
    another refusal, such as fence_unconfirmed on a busy machine); any
    answer but 200 or a 503 with a JSON code fails the test."""
    texts, events, errors = [], [[] for _ in range(clients)], []
    lock = threading.Lock()
    done = threading.Event()

    def run(i):
        c = Client(node.port)
        try:
            while not done.is_set():
                r = c.get("/serial/%s?count=%d" % (ZONE_CODE, count))
                if r.status == 200:
                    got = r.text.split()
                    with lock:
                        texts.extend(got)
                        events[i].append(("ok", len(got), time.time()))
                    continue
                body = {}
                try:
                    body = r.json()
                except ValueError:
                    pass
                if r.status != 503 or not body.get("error"):
                    errors.append((r.status, r.text[:300]))
                    return
                if body["error"] == "serial_zone_gate":
                    events[i].append(("gate", body.get("message", ""), time.time()))
                else:
                    events[i].append(("503", body["error"], time.time()))
                time.sleep(0.02)
        except OSError as e:
            errors.append(("io", str(e)))
        finally:
            c.close()
    ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for t in ts:
        t.start()
    end = time.time() + 60
    while time.time() < end and not errors:
        with lock:
            if until(texts):
                break
        time.sleep(0.05)
    done.set()
    for t in ts:
        t.join(30)
    check(not errors, "serials from %s: answers that are not 200 or 503 "
          "with a code: %r" % (node.name, errors[:3]))
    return texts, events


def zone_conf(wd, ip, zone, prefix, store, ft=None):
    """A node's config: snowflake mode on store's worker IDs (released at
    stop), identity ip:7000, serial ZONE_CODE printed in zone."""
    conf = dict(x[2:].split("=", 1) for x in COMMON)
    conf.update({"snowflake.release_on_stop": "true",
                 # B's clock runs an hour ahead of the store's (libfaketime)
                 "snowflake.max_clock_offset_ms": "0",
                 "snowflake.ip": ip, "leaf.snowflake.port": "7000",
                 "snowflake.cache_file": os.path.join(wd.path, "%s-%s.json" % (prefix, ip)),
                 "serial.count_max": "1000",
                 "serial.%s.prefix" % ZONE_CODE: prefix,
                 "serial.%s.source" % ZONE_CODE: "snowflake",
                 "serial.%s.pattern" % ZONE_CODE: "yyyyMMddHHmmssSSS",
                 "serial.%s.zone" % ZONE_CODE: zone})
    conf.update(store)
    return conf


def local_times(texts, prefix):
    """The printed local times (yyyyMMddHHmmssSSS) of serials."""
    return [t[len(prefix):len(prefix) + 17] for t in texts]


def zone_move(wd, store, drop_record, prefix, phase, lead):
    """Node A (10.7.0.1, Asia/Tokyo) prints serials of ZONE_CODE for 2 s and
    stops, releasing its worker ID; node B (10.7.0.2, Asia/Shanghai, an
    hour behind) claims the same worker ID from the store, its clock
    (libfaketime) an hour on from A's first serial less lead seconds, so
    that its Shanghai time comes to A's Tokyo times again; it takes serials
    until it prints a local time past A's last (or 60 s).
    drop_record(worker) runs between them (the control: the record gone).
    Returns (A's serials, B's serials, B's events, the worker IDs, B's
    /health at its start)."""
    ft = os.path.join(wd.path, "faketime-%s.rc" % phase)
    with open(ft, "w") as f:
        f.write("+0\n")
    a = wd.leafd(conf=zone_conf(wd, "10.7.0.1", "Asia/Tokyo", prefix, store),
                 name="%s-a" % phase).start()
    wait_for(lambda: a.get("/snowflake").status == 200, 30, step=0.1,
             what="A serving")
    wa = state(a)["worker_id"]
    t1 = time.time()
    got_a, _ = serial_load(a, lambda t: len(t) >= 3000 and time.time() - t1 >= 2)
    eq(a.stop(), 0, "A's exit status")
    a_last = max(local_times(got_a, prefix))
    drop_record(wa)
    with open(ft + ".tmp", "w") as f:
        f.write("%+.3f\n" % (3600 - (time.time() - t1) - lead))
    os.rename(ft + ".tmp", ft)
    b = wd.leafd(conf=zone_conf(wd, "10.7.0.2", "Asia/Shanghai", prefix, store),
                 name="%s-b" % phase,
                 env={"FAKETIME_TIMESTAMP_FILE": ft, "FAKETIME_NO_CACHE": "1",
                      "FAKETIME_DONT_FAKE_MONOTONIC": "1"},
                 preload=faketime_preload(wd.path)).start()
    wait_for(lambda: b.get("/snowflake").status == 200, 30, step=0.1,
             what="B serving snowflake IDs")
    wb = state(b)["worker_id"]
    health = b.get("/health").json()
    got_b, ev = serial_load(b, lambda t: len(t) >= 1000 and
                            local_times(t[-1:], prefix)[0] > a_last)
    eq(b.stop(), 0, "B's exit status")
    return got_a, got_b, ev, (wa, wb), health


def zone_moves(wd, store, drop_record):
    """The fix (the record kept) and the control (the record removed), each
    on its own store namespace (store(phase): the node keys)."""
    prefix = "MZF"
    # B's clock 3 s before A's first serial: gated for about 5.5 s (A's 2 s
    # and the fence step), a window a slow start does not miss
    got_a, got_b, ev, (wa, wb), health = zone_move(wd, store("fix"), lambda w: None,
                                                   prefix, "fix", 3)
    eq(wb, wa, "B claimed A's worker ID")
    check(got_a and got_b, "both nodes served serials (A %d, B %d)"
          % (len(got_a), len(got_b)))
    twice = set(got_a) & set(got_b)
    gates = [m for e in ev for k, m, _ in e if k == "gate"]
    check(not twice, "%d of B's %d serials are A's again, e.g. %s"
          % (len(twice), len(got_b), sorted(twice)[:1]))
    check(max(local_times(got_a, prefix)) < min(local_times(got_b, prefix)),
          "B printed a local time A printed (A up to %s, B from %s)"
          % (max(local_times(got_a, prefix)), min(local_times(got_b, prefix))))
    check(gates, "B never answered 503 serial_zone_gate, though its first "
          "serials' local times were A's")
    check("until" in gates[0] and "change the prefix" in gates[0],
          "the gate says until when and what to do: %r" % gates[0])
    for e in ev:                # the gate, then served: never gated again
        kinds = [k for k, _, _ in e]
        if "ok" in kinds:
            check("gate" not in kinds[kinds.index("ok"):],
                  "B gated a client again after serving it: %r" % kinds[:20])
    zg = health.get("serial", {}).get("zone_gates")
    check(zg and zg[0]["code"] == ZONE_CODE,
          "/health names the gated code while the gate holds: %r" % health.get("serial"))
    t_gate = min(t for e in ev for k, _, t in e if k == "gate")
    t_ok = min(t for e in ev for k, _, t in e if k == "ok")
    other = sum(1 for e in ev for k, _, _ in e if k == "503")
    fix = (len(got_a), len(got_b), len(gates), t_ok - t_gate, other)

    # the control: the same move with the record removed from the store
    prefix = "MZC"
    got_a, got_b, ev, (wa, wb), _ = zone_move(wd, store("control"), drop_record,
                                              prefix, "control", 1)
    eq(wb, wa, "control: B claimed A's worker ID")
    twice = set(got_a) & set(got_b)
    gates = [m for e in ev for k, m, _ in e if k == "gate"]
    check(not gates, "control: B gated without a record: %r" % gates[:1])
    check(min(local_times(got_b, prefix)) <= max(local_times(got_a, prefix)),
          "control: B printed no local time A printed (A up to %s, B from %s): "
          "the scenario does not reach the hole" % (max(local_times(got_a, prefix)),
                                                     min(local_times(got_b, prefix))))
    check(twice, "control: B repeated none of A's serials")
    print("  fix: A %d serials, B %d (0 repeated), %d gate answers over %.1f s, "
          "%d other 503s; control: A %d, B %d, %d of B's repeated A's"
          % (fix + (len(got_a), len(got_b), len(twice))))


def test_redis_serial_zone_moves(ctx):
    """A worker ID in Redis passes from a Tokyo node to a Shanghai node: the
    hash's "zones" record gates the Shanghai node's serials until its local
    time passes what Tokyo printed; with the field deleted, it repeats."""
    with Workdir("ops-wid-redis-zone") as wd:
        r = wd.redis(epoch0=[(3, "zfix:"), (3, "zctl:")])
        url = "redis://127.0.0.1:%d/3" % r.port

        def store(phase):
            return {"snowflake.worker_source": "redis", "snowflake.redis.url": url,
                    "snowflake.redis.prefix": "zfix:" if phase == "fix" else "zctl:"}
        zone_moves(wd, store, lambda w: r.cli("-n", "3", "HDEL", "zctl:w:%d" % w, "zones"))


def test_mysql_serial_zone_moves(ctx):
    """The same with leaf_worker's serial_zones column, on a table made
    before the column (leafd adds it)."""
    with Workdir("ops-wid-mysql-zone") as wd:
        db = wd.mariadb().worker_epoch0()
        db.sql("ALTER TABLE leaf_worker DROP COLUMN serial_zones")
        db.sql("CREATE DATABASE leafctl")
        db.sql("CREATE TABLE leafctl.leaf_worker LIKE leaf.leaf_worker")
        db.sql("INSERT INTO leafctl.leaf_worker SELECT * FROM leaf.leaf_worker")
        ctl = db.url.rsplit("/", 1)[0] + "/leafctl"

        def store(phase):
            return {"snowflake.worker_source": "mysql",
                    "snowflake.mysql.url": db.url if phase == "fix" else ctl}
        zone_moves(wd, store, lambda w: db.sql(
            "UPDATE leafctl.leaf_worker SET serial_zones = NULL WHERE worker_id = %d" % w))
        check("serial_zones" in db.sql("SHOW COLUMNS FROM leaf_worker"),
              "leafd added the serial_zones column to the old table")


def test_zookeeper_serial_zone_moves(ctx):
    """The same with the "serial_zones" field of Leaf's node data in
    ZooKeeper (a released node claimed by another ip:port)."""
    with Workdir("ops-wid-zk-zone") as wd:
        zk = wd.zookeeper()

        def store(phase):
            return {"snowflake.worker_source": "zookeeper",
                    "leaf.snowflake.zk.address": zk.address,
                    "leaf.name": "zfix" if phase == "fix" else "zctl",
                    "snowflake.zk_session_timeout_ms": "4000"}

        def drop(w):
            path = "/snowflake/zctl/forever/10.7.0.1:7000-%010d" % w
            out = zk.cli("get", path)
            data = [l for l in out.splitlines() if l.startswith("{")]
            check(data, "control: node %s not read: %s" % (path, out[-500:]))
            node = json.loads(data[0])
            check("serial_zones" in node, "A's node has a serial_zones record: %r" % node)
            del node["serial_zones"]
            out = zk.cli("set", path, json.dumps(node, separators=(",", ":")))
            check("serial_zones" not in zk.cli("get", path),
                  "control: the record is still in %s: %s" % (path, out[-500:]))
        zone_moves(wd, store, drop)
