"""Operator-action matrix: changing snowflake.worker_bits on nodes that share
a worker-ID store, under load (client threads taking IDs from every node all
the while), against the real binary.

The layout decides where an ID's bits go: timestamp << (datacenter + worker
+ sequence bits) | worker << sequence bits | sequence. So:
- worker_bits raised by taking bits from timestamp_bits (same epoch): the
  timestamp's shift grows, every new ID is above every old one, even with
  old-layout nodes still running (a rolling restart is safe);
- worker_bits lowered into timestamp_bits: the shift shrinks, new IDs fall
  among old ones (an ID of now equals one issued about (now - epoch) / 2^k
  after the epoch): never safe, leafd refuses the restart;
- worker_bits traded with sequence_bits: the same shift, but IDs of one
  millisecond collide across the two layouts (new worker w covers old workers
  2w, 2w+1 ...): refused at the restart; the procedure (stop every node, wait
  past the highest fence in their cache files, remove the files, start all on
  the new layout) issues nothing twice.
Each row asserts that no ID was issued twice, or that leafd refused the
change with a message that says why and what to do. Without redis-server
(or MariaDB for the MySQL row) the tests skip (under CI=1 they fail)."""
import json
import os
import subprocess
import threading
import time

from bbutil import Client, TestFailure, Workdir, check, eq, wait_for

TESTS = [
    "test_raise_worker_bits_rolling",
    "test_lower_worker_bits_refused",
    "test_trade_worker_for_sequence_procedure",
    "test_mysql_lowered_row_past_max",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): rolling procedures, bound by their waits; the refusals stay in the
# ASan lane.
PLAIN_ONLY = {
    "test_raise_worker_bits_rolling",
    "test_mysql_lowered_row_past_max",
}

EPOCH0 = [(2, "leafd:snowflake:")]
OLD = (41, 10, 12)                  # timestamp, worker, sequence bits


def node(wd, r, ip, bits=OLD, db=None, name=None):
    store = ["--snowflake.worker_source=mysql",
             "--snowflake.mysql.url=mysql://root@127.0.0.1:%d/%s" % (db.port, "leaf")] \
        if db is not None else \
        ["--snowflake.worker_source=redis",
         "--snowflake.redis.url=redis://127.0.0.1:%d/2" % r.port]
    flags = ["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
             "--snowflake.ip=%s" % ip, "--leaf.snowflake.port=7000",
             "--snowflake.cache_file=%s.json" % (name or ip),
             "--snowflake.takeover_age_ms=4000", "--snowflake.release_on_stop=true",
             "--snowflake.fence_step_ms=500", "--snowflake.heartbeat_ms=200",
             "--snowflake.timestamp_bits=%d" % bits[0],
             "--snowflake.worker_bits=%d" % bits[1],
             "--snowflake.sequence_bits=%d" % bits[2]] + store
    return wd.leafd(flags=flags, name=name or ip)


class Load:
    """Client threads taking IDs from the current node of each slot until
    stop(); every ID with the layout its node ran, and every answer that was
    not 200 (a node down during its restart is expected)."""

    def __init__(self, slots, threads=4):
        self.slots = slots              # (leafd, bits) each, replaced whole
        self.lock = threading.Lock()
        self.ids = []                   # (id, bits)
        self.errors = 0
        self.done = False
        self.threads = [threading.Thread(target=self.run, args=(i,))
                        for i in range(threads)]
        for t in self.threads:
            t.start()

    def run(self, i):
        n = 0
        clients = {}                    # port -> this thread's own Client
        while not self.done:
            d, bits = self.slots[(i + n) % len(self.slots)]
            n += 1
            c = clients.setdefault(d.port, Client(d.port))
            try:
                resp = c.get("/snowflake?count=50")
            except Exception:           # restarting: connection refused
                c.close()
                time.sleep(0.02)
                with self.lock:
                    self.errors += 1
                continue
            if resp.status == 200:
                got = resp.ids()
                with self.lock:
                    self.ids.extend((x, bits) for x in got)
            else:
                with self.lock:
                    self.errors += 1
                time.sleep(0.01)

    def count(self):
        with self.lock:
            return len(self.ids)

    def stop(self):
        self.done = True
        for t in self.threads:
            t.join()
        self.threads = []
        values = [x for x, _ in self.ids]
        dup = len(values) - len(set(values))
        eq(dup, 0, "IDs issued twice (of %d)" % len(values))
        return self.ids


def more(load, n=3000, what="IDs"):
    start = load.count()
    wait_for(lambda: load.count() >= start + n, 30, step=0.05, what=what)


def restart(wd, r, slots, i, ip, bits, db=None):
    eq(slots[i][0].stop(), 0, "clean stop of %s" % ip)
    slots[i] = (node(wd, r, ip, bits, db=db).start(), bits)


def test_raise_worker_bits_rolling(ctx):
    """worker_bits 10 -> 11 out of timestamp_bits (41 -> 40), one node at a
    time under load: safe; every ID of the new layout is above every ID of
    the old one, also while the other node still runs the old layout."""
    new = (40, 11, 12)
    with Workdir("ops-wbits-raise") as wd:
        r = wd.redis(epoch0=EPOCH0)
        slots = [(node(wd, r, "10.7.0.%d" % i).start(), OLD) for i in range(2)]
        load = Load(slots)
        try:
            more(load, what="IDs from the old layout")
            restart(wd, r, slots, 0, "10.7.0.0", new)
            time.sleep(1)
            more(load, what="IDs while the layouts mix")
            restart(wd, r, slots, 1, "10.7.0.1", new)
            more(load, what="IDs from the new layout")
        finally:
            ids = load.stop()
        old_max = max(x for x, b in ids if b == OLD)
        new_ids = [x for x, b in ids if b == new]
        check(new_ids, "the new layout issued")
        check(min(new_ids) > old_max, "every new ID above every old one")
        for d, _ in slots:
            eq(d.stop(), 0, "clean stop")


def test_lower_worker_bits_refused(ctx):
    """worker_bits 10 -> 9 into timestamp_bits (41 -> 42): a restart on it is
    refused, naming both layouts; the node comes back on the old one, and
    nothing was issued twice. The epoch is a few seconds back, so that were
    the restart taken, the new layout would reach the old IDs' values (an ID
    of (now - epoch) ms under 42 bits is one of half that under 41) within
    the test: IDs would then repeat."""
    epoch = int(time.time() * 1000) - 3000
    ep = ["--snowflake.epoch_ms=%d" % epoch, "--snowflake.expiry_margin_days=0"]

    def at(wd, r, ip, bits=OLD):
        d = node(wd, r, ip, bits)
        d.flags += ep
        return d
    with Workdir("ops-wbits-lower") as wd:
        r = wd.redis(epoch0=EPOCH0)
        slots = [(at(wd, r, "10.7.1.%d" % i).start(), OLD) for i in range(2)]
        load = Load(slots)
        try:
            more(load)
            time.sleep(3)               # old IDs of 3 s .. 6 s or more
            eq(slots[0][0].stop(), 0, "clean stop")
            since = time.time() * 1000 - epoch
            d = at(wd, r, "10.7.1.0", (42, 9, 12))
            try:
                d.start()
                # It may listen before its layout check refuses (that waits
                # for the worker-ID claim, slow on a busy machine): refused
                # is an exit, not a port that stays closed.
                try:
                    d.proc.wait(timeout=10)
                    started = False
                except subprocess.TimeoutExpired:
                    started = True
            except TestFailure:         # it exited: refused
                started = False
            if started:                 # run past twice the time
                slots[0] = (d, (42, 9, 12))
                while time.time() * 1000 - epoch < 2 * since + 500:
                    time.sleep(0.1)
                load.stop()             # the IDs issued twice, if any
            check(not started and "snowflake layout changed" in d.log() and
                  "%d:41/0/10/12" % epoch in d.log() and
                  "%d:42/0/9/12" % epoch in d.log() and
                  "never safe" in d.log(),
                  "the lowered layout refused, saying why: %s" % d.log())
            slots[0] = (at(wd, r, "10.7.1.0").start(), OLD)
            more(load, what="IDs after the restart on the old layout")
        finally:
            load.stop()
        for d, _ in slots:
            eq(d.stop(), 0, "clean stop")


def fence_in(wd, name):
    with open(os.path.join(wd.path, name + ".json")) as f:
        return json.load(f)["fence"]


def test_trade_worker_for_sequence_procedure(ctx):
    """worker_bits 10 -> 9 into sequence_bits (12 -> 13): the rolling restart
    is refused; the procedure (stop every node, wait past the highest fence
    in their cache files, remove the files, start them on the new layout)
    issues nothing twice across the old and the new IDs."""
    new = (41, 9, 13)
    with Workdir("ops-wbits-trade") as wd:
        r = wd.redis(epoch0=EPOCH0)
        ips = ["10.7.2.%d" % i for i in range(2)]
        slots = [(node(wd, r, ip).start(), OLD) for ip in ips]
        load = Load(slots)
        try:
            more(load)
            eq(slots[0][0].stop(), 0, "clean stop")
            d = node(wd, r, ips[0], new)
            rc = d.start(expect_fail=True)
            check(rc != 0 and "snowflake layout changed" in d.log() and
                  "stop every node of the old layout" in d.log(),
                  "the traded layout refused with the procedure: %s" % d.log())
            eq(slots[1][0].stop(), 0, "clean stop")
            top = max(fence_in(wd, ip) for ip in ips)
            while time.time() * 1000 <= top + 50:
                time.sleep(0.05)
            for ip in ips:
                os.unlink(os.path.join(wd.path, ip + ".json"))
            for i, ip in enumerate(ips):
                slots[i] = (node(wd, r, ip, new).start(), new)
            more(load, what="IDs from the new layout")
        finally:
            ids = load.stop()
        check(any(b == new for _, b in ids), "the new layout issued")
        for d, _ in slots:
            eq(d.stop(), 0, "clean stop")


def test_mysql_lowered_row_past_max(ctx):
    """MySQL: worker_bits 2 -> 1 (into sequence_bits, by the procedure) while
    a node's leaf_worker row is worker ID 3, past the new maximum 1: its claim
    ends at once with an ID within (its old row freed, fence kept), and a
    node finding none free is refused with the count; no ID twice."""
    old, new = (41, 2, 20), (41, 1, 21)
    with Workdir("ops-wbits-mysql") as wd:
        db = wd.mariadb().worker_epoch0()
        ips = ["10.7.3.%d" % i for i in range(4)]
        nodes = [node(wd, None, ip, old, db=db).start() for ip in ips]
        # leafd listens before its claim has committed: wait for each row
        held = {ip: int(wait_for(lambda ip=ip: db.sql(
                    "SELECT worker_id FROM leaf_worker WHERE identity = "
                    "'%s:7000'" % ip).strip(), timeout=30, step=0.1,
                    what="%s's row" % ip)) for ip in ips}
        eq(sorted(held.values()), [0, 1, 2, 3], "four nodes, worker IDs 0..3")
        # Which node claimed which ID depends on how their claims interleave.
        ip3 = [ip for ip in ips if held[ip] == 3][0]
        ip_a, ip_b = [ip for ip in ips if ip != ip3][:2]
        slots = [(nodes[0], old), (nodes[3], old)]
        load = Load(slots)
        try:
            more(load)
            for d in nodes:
                eq(d.stop(), 0, "clean stop")
            top = max(fence_in(wd, ip) for ip in ips)
            while time.time() * 1000 <= top + 50:
                time.sleep(0.05)
            for ip in ips:
                os.unlink(os.path.join(wd.path, ip + ".json"))
            # the node that held worker ID 3 first: it must not retry for ever
            t0 = time.time()
            slots[1] = (node(wd, None, ip3, new, db=db).start(), new)
            wait_for(lambda: slots[1][0].get("/snowflake/state").json()["worker_id"] in (0, 1),
                     20, what="worker ID within 0..1 for the node that held 3")
            check(time.time() - t0 < 20, "claimed at once")
            check("outside this node's range 0..1" in slots[1][0].log(),
                  "the freed row logged: %s" % slots[1][0].log())
            slots[0] = (node(wd, None, ip_a, new, db=db).start(), new)
            wait_for(lambda: slots[0][0].get("/snowflake/state").json()["worker_id"] in (0, 1),
                     20, what="the other ID within")
            third = node(wd, None, ip_b, new, db=db)
            rc = third.start(expect_fail=True)
            check(rc != 0 and "all 2 (0..1) are in use" in third.log(),
                  "a third node refused with the count: %s" % third.log())
            more(load, what="IDs from the new layout")
        finally:
            load.stop()
        eq(db.sql("SELECT released FROM leaf_worker WHERE worker_id = 3").strip(), "1",
           "the row past the maximum freed")
        for d, _ in slots:
            eq(d.stop(), 0, "clean stop")
