#!/usr/bin/env python3
"""failover.py: segment mode through MariaDB failovers, under real network
namespaces, with every ID checked (issue 28, sections 2.1, 2.3 and 3.1).

    python3 tests/blackbox/failover.py --short        make test (lane failover)
    python3 tests/blackbox/failover.py                make chaos-long: each phase
                                                      --phase-secs (30) long
    python3 tests/blackbox/failover.py --expect-duplicates --leafd OLD
        the positive control: scenarios async and restore against a leafd
        without the fix; passes only if each shows duplicates
    --only async,semisync,...   a subset;  --keep   keep the work directory

Every scenario runs in its own tests/lib/netns.py network (bridge lfhXXXX,
10.231.S.0/24): each MariaDB and each leafd node in a namespace of its own,
the clients (tests/lib/idcheck.py: HTTP, leases, RESP, memcached, gRPC; one
thread per node per front end; and libleafd-client over both nodes, a
process) in the root namespace, through the bridge.
Tag `fo`, step 10, segment.max_step 5000: the step grows to about a
second of IDs, so that a load stalled a moment by a busy machine (make test
runs lanes side by side) does not drain the buffers, while every phase
still sees several loads per node. The
leafd nodes reach the database through a VIP (10.231.S.201) that moves to
the promoted replica as keepalived moves it.

Scenarios (phases in brackets; figures printed per phase):
  async     GTID primary db1 -> async replica db2, two leafd nodes. [calm]
            [lag: db2's SQL thread stopped] [failover: db1 killed -9, db2
            promoted without applying its relay log, VIP moved]. Without the
            fix: duplicates (the positive control). With it: every node
            refuses with 503 db_failover once its buffers drain [refused],
            until `leafd db-fence --floor=N --segment.mysql.url=VIP`, N the
            largest segment.marks_max of the nodes' /health [fenced]; then every node
            serves again [after]; 0 duplicates, no failure in [after].
  partition the same, by partitions: [lag: db1 cut from db2 (nftables), the
            replica's IO thread gets nothing] [failover: db1 cut from the
            leafd nodes too, left running (a primary on the wrong side of
            a partition), db2 promoted, VIP moved]; then as async. The
            nodes' connections to the VIP hang until db_timeout_ms.
  semisync  db1 -> db2, db3, semi-sync AFTER_SYNC (timeout 10 s), nodes with
            segment.mysql.replication = semi-sync. [calm] [lag: db2's SQL
            thread stopped] [failover: db1 killed, the replica that
            received the most promoted after applying what it received,
            the other re-pointed to it, VIP moved] [after]. 0 duplicates;
            no failed request outside [failover].
  degrade   db1 -> db2 semi-sync, timeout 1 s. [calm] [degraded: db2's IO
            thread stopped: the primary falls back to async; every node
            answers 503 durability_degraded and its /health says
            segment.replication.durability "degraded"]
            [recovering: IO thread started, semi-sync back on] [after: no
            failure]. 0 duplicates.
  restore   one MariaDB, one node. [calm] a dump of leaf_alloc taken,
            [drift] [restored: the dump loaded back while the node runs].
            Without the fix: duplicates (positive control). With it: 503
            store_behind, 0 duplicates.
Exit 1 if any scenario's check fails. Root only (network namespaces).

Measured on the 2-core test VM (HEAD of harness after merging main 788fb8e):
--short 78 s alone, 92 s beside the blackbox lane; --phase-secs 30 488 s;
the positive controls (--short, a46976b) 42 s. Figures of --short:
  scenario   leafd    IDs      repeated  failed by code                       no service
  async      a46976b  118,325  25,650    -                                    0.01 s
  async      fix       98,254  0         db_failover 370                      1.62 s
  partition  a46976b  118,621  27,796    ids_exhausted 45                     1.56 s
  partition  fix       98,053  0         db_failover 319, ids_exhausted 29    1.73 s
  semisync   fix       93,613  0         durability_degraded 33               0.41 s
  degrade    fix       70,625  0         durability_degraded 134              1.74 s
  restore    a46976b   45,399  9,654     -                                    0.01 s
  restore    fix       35,837  0         store_behind 253, c_unavailable 25   3.39 s
("no service": the longest time one client went without an answer; async and
partition include the half phase the operator takes to run db-fence. p99
in the failover phases stayed within 1 ms of calm in --short; in the long
run 250-300 ms, the refused requests waiting segment.wait_ms.)
"""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from bbutil import LEAFD, wait_for  # noqa: E402
from idcheck import Load, build_idstream  # noqa: E402
from leafd_ns import NsLeafd, preflight  # noqa: E402
from mariadb_ns import NsMariaDB, start_all, wait_semi_sync, dump, restore  # noqa: E402
from netns import Net  # noqa: E402
from scenario_cli import check, parser, run_all, say  # noqa: E402

TAG = "fo"


def LeafNode(node, wd, url, extra, binary, grpc=True):
    """A leafd on url in its own namespace (leafd_ns.NsLeafd)."""
    conf = {"segment.mysql.url": url, "segment.max_step": 5000}
    conf.update(extra)
    return NsLeafd(node, wd, conf, binary, grpc)


def start_dbs(net, wd, n, **kw):
    dbs = [NsMariaDB(net.add("db%d" % (i + 1)), wd, i + 1, **kw) for i in range(n)]
    return start_all(dbs)


def add_tag(db):
    db.sql("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
           "VALUES ('%s', 1, 10, 'failover test')" % TAG)


def max_id(db):
    return int(db.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag='%s'" % TAG))


def wait_each(load, nodes, since, pred, timeout, what):
    """Until every node has an answer since `since` that pred accepts
    (pred(code) on the load's records); when pred accepts a success, the
    C client too (its "node" is "all": it serves from its leases, and after
    an outage waits dead_ms before it asks a server again)."""
    want = set(n.node.name for n in nodes)
    if load.cclient and pred(None):
        want.add("all")

    def done():
        seen = set()
        for recs in load.recs:
            for r in recs[::-1]:
                if r[0] < since:
                    break
                if pred(r[4]):
                    seen.add(r[2])
        return want <= seen
    wait_for(done, timeout, step=0.1, what=what)


def wait_serving(load, nodes, timeout, what):
    """Until no node's /health shows loads refused or durability degraded
    (a node can answer from its buffers while it refuses to load, and run
    dry after), then until every node and the C client answered since."""
    def healthy(n):
        seg = n.health()["segment"]
        return "refused" not in seg and \
            seg.get("replication", {}).get("durability") != "degraded"
    wait_for(lambda: all(healthy(n) for n in nodes), timeout, step=0.1, what=what + " (/health)")
    wait_each(load, nodes, time.time(), lambda c: c is None, 30, what)

    # Then a second of answers without a failure: a client that was
    # backing off (the C client waits dead_ms after an outage) or a node
    # whose next segment was still on its way has caught up.
    def quiet():
        now = time.time()
        for recs in load.recs:
            for r in recs[::-1]:
                if r[0] < now - 1.0:
                    break
                if r[4] is not None:
                    return False
        return True
    wait_for(quiet, 30, step=0.1, what=what + " (1 s without a failed answer)")


def fence(nodes, url, binary, store="mysql"):
    """leafd db-fence with the floor the runbook says: the largest
    segment.marks_max of the nodes' /health (store: mysql or postgresql,
    url that store's segment.<store>.url)."""
    floor = max(int(n.health()["segment"]["marks_max"]) for n in nodes)
    r = subprocess.run([binary, "db-fence", "--floor=%d" % floor, "--segment.store=" + store,
                        "--segment.%s.url=%s" % (store, url)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                       env={k: v for k, v in os.environ.items() if not k.startswith("LEAFD_")})
    say("leafd db-fence --floor %d: exit %d: %s" % (floor, r.returncode,
                                                    r.stdout.decode().strip()[:300]))
    check(r.returncode == 0, "leafd db-fence failed")
    return floor


class Scenario:
    def __init__(self, args, name):
        self.args, self.name = args, name
        self.wd = tempfile.mkdtemp(prefix="lfh-%s-" % name)
        self.secs = args.phase_secs
        self.load = None
        self.summary = None

    def phase(self, load, name, secs=None):
        say("  phase %s" % name)
        load.phase(name)
        if secs:
            time.sleep(secs)

    @contextlib.contextmanager
    def network(self):
        """A Net whose clients stop before it closes (a failed check
        leaves no client counting the teardown as failed requests)."""
        with Net() as net:
            try:
                yield net
            finally:
                if self.load is not None:
                    self.load.stop()

    def start_load(self, nodes):
        self.load = Load([n.client() for n in nodes], TAG, cclient=self.args.cclient).start()
        return self.load

    def report(self, load):
        load.stop()
        rep = load.report()
        print(rep.text, flush=True)
        self.summary = rep.summary([p for p in rep.phases if p not in ("calm", "lag", "drift",
                                                                         "after")])
        return rep

    def finish(self, load):
        self.load = None
        rep = self.report(load)
        check(not rep.bad, "answers that were not the IDs asked for: %s" % rep.bad[:3])
        return rep

    def expect_dups(self, rep):
        if self.args.expect_duplicates:
            check(rep.duplicates > 0, "positive control: no duplicate seen (%d IDs)" % rep.issued)
        else:
            check(rep.duplicates == 0, "%d IDs given twice, e.g. %s"
                  % (rep.duplicates, rep.dup_examples))


def sc_async(s, cut=False):
    """cut: the partition variant (lag and failover by nftables, the old
    primary left running); else the replica's SQL thread stopped and the
    primary killed -9."""
    args = s.args
    with s.network() as net:
        db1, db2 = start_dbs(net, s.wd, 2)
        vip = net.vip(1)
        net.add_vip(db1.node, vip)
        db2.replicate_from(db1)
        add_tag(db1)
        db2.wait_caught_up(db1)
        url = db1.url(vip)
        nodes = [LeafNode(net.add("n%d" % i), s.wd, url, {}, args.leafd, args.grpc).start()
                 for i in range(2)]
        load = s.start_load(nodes)
        s.phase(load, "calm", s.secs)
        if cut:
            net.partition([db1.node], [db2.node])
        else:
            db2.lag()
        s.phase(load, "lag", s.secs)
        s.phase(load, "failover")
        if cut:
            net.partition([db1.node], [n.node for n in nodes])
            time.sleep(0.5)               # what was in flight lands or times out
        at_primary = max_id(db1)
        if not cut:
            db1.kill9()
        db2.promote(apply_relay=False)
        net.move_vip(vip, db1.node, db2.node)
        moved = time.time()
        say("  db1 reached max_id %d; db2, promoted, has %d" % (at_primary, max_id(db2)))
        check(max_id(db2) < at_primary, "the replica did not lag: nothing to lose")
        refused_until_fence(s, load, nodes, moved, url)
    return s


def refused_until_fence(s, load, nodes, moved, url, store="mysql"):
    """After an async failover (the VIP moved at `moved`): with
    --expect-duplicates, two phases of load and the duplicates asked for;
    else every node refusing with db_failover [refused], leafd db-fence
    [fenced], every node serving again [after], no failure outside the
    failover, 0 duplicates."""
    if s.args.expect_duplicates:
        time.sleep(s.secs * 2)
        rep = s.finish(load)
    else:
        wait_each(load, nodes, moved, lambda c: c == "db_failover", 30 + s.secs,
                  "every node refusing with db_failover")
        s.phase(load, "refused", s.secs / 2)
        fence(nodes, url, s.args.leafd, store)
        s.phase(load, "fenced")
        wait_serving(load, nodes, 30, "every node serving after db-fence")
        s.phase(load, "after", s.secs)
        rep = s.finish(load)
        check(rep.failed(["calm", "lag", "after"]) == 0,
              "failed requests outside the failover: %s" % rep.errors(["calm", "lag", "after"]))
    s.expect_dups(rep)


def promote_best(replicas):
    """The replica that received the most (Gtid_IO_Pos, domain 0), promoted
    after applying its relay log; the others re-pointed to it."""
    def seq(d):
        pos = d.slave_status().get("Gtid_IO_Pos", "")
        return max([int(p.split("-")[2]) for p in pos.split(",") if p.startswith("0-")] or [0])
    best = max(replicas, key=seq)
    best.promote(apply_relay=True)
    for d in replicas:
        if d is not best:
            d.repoint(best)
    return best


def sc_semisync(s):
    args = s.args
    with s.network() as net:
        db1, db2, db3 = start_dbs(net, s.wd, 3, semi_sync=True, semi_timeout_ms=10000)
        vip = net.vip(1)
        net.add_vip(db1.node, vip)
        db2.replicate_from(db1)
        db3.replicate_from(db1)
        wait_semi_sync(db1)
        add_tag(db1)
        url = db1.url(vip)
        nodes = [LeafNode(net.add("n%d" % i), s.wd, url,
                          {"segment.mysql.replication": "semi-sync"}, args.leafd,
                          args.grpc).start() for i in range(2)]
        load = s.start_load(nodes)
        s.phase(load, "calm", s.secs)
        db2.lag()
        s.phase(load, "lag", s.secs)
        s.phase(load, "failover")
        db1.kill9()
        best = promote_best([db2, db3])
        net.move_vip(vip, db1.node, best.node)
        say("  promoted %s, max_id %d" % (best.node.name, max_id(best)))
        wait_semi_sync(best)
        wait_serving(load, nodes, 30 + s.secs, "every node serving after the failover")
        s.phase(load, "after", s.secs)
        rep = s.finish(load)
        check(rep.failed(["calm", "lag", "after"]) == 0,
              "failed requests outside the failover: %s" % rep.errors(["calm", "lag", "after"]))
        check("db_failover" not in rep.errors(),
              "semi-sync: the promoted replica was not accepted without db-fence")
        s.expect_dups(rep)
    return s


def sc_degrade(s):
    args = s.args
    with s.network() as net:
        db1, db2 = start_dbs(net, s.wd, 2, semi_sync=True, semi_timeout_ms=1000)
        db2.replicate_from(db1)
        wait_semi_sync(db1)
        add_tag(db1)
        url = db1.url()
        nodes = [LeafNode(net.add("n%d" % i), s.wd, url,
                          {"segment.mysql.replication": "semi-sync"}, args.leafd,
                          args.grpc).start() for i in range(2)]
        load = s.start_load(nodes)
        s.phase(load, "calm", s.secs)
        s.phase(load, "degraded")
        cut = time.time()
        db2.stop_io()
        wait_each(load, nodes, cut, lambda c: c == "durability_degraded", 30 + s.secs,
                  "every node refusing with durability_degraded")
        for n in nodes:
            h = n.health()
            check(h["segment"].get("replication", {}).get("durability") == "degraded",
                  "%s /health does not say degraded: %s" % (n.node.name, json.dumps(h)[:600]))
        check(db1.status("Rpl_semi_sync_master_status") == "OFF",
              "semi-sync still on with the replica's IO thread stopped")
        s.phase(load, "recovering")
        db2.start_io()
        wait_semi_sync(db1)
        wait_serving(load, nodes, 30, "every node serving again")
        s.phase(load, "after", s.secs)
        rep = s.finish(load)
        check(rep.failed(["calm", "after"]) == 0,
              "failed requests outside the fallback: %s" % rep.errors(["calm", "after"]))
        s.expect_dups(rep)
    return s


def sc_restore(s):
    args = s.args
    with s.network() as net:
        (db,) = start_dbs(net, s.wd, 1)
        add_tag(db)
        nodes = [LeafNode(net.add("n0"), s.wd, db.url(), {}, args.leafd, args.grpc).start()]
        load = s.start_load(nodes)
        s.phase(load, "calm", s.secs)
        path = os.path.join(s.wd, "leaf_alloc.sql")
        dump(db, path)
        before = max_id(db)
        s.phase(load, "drift", s.secs)
        s.phase(load, "restored")
        after = max_id(db)
        restore(db, path)
        restored = time.time()
        say("  max_id %d just after the dump, %d before the restore, %d after"
            % (before, after, max_id(db)))
        check(after > before, "no load between the dump and the restore")
        if not args.expect_duplicates:
            wait_each(load, nodes, restored, lambda c: c == "store_behind", 30 + s.secs,
                      "the node refusing with store_behind")
        time.sleep(s.secs)
        rep = s.finish(load)
        check(rep.failed(["calm", "drift"]) == 0,
              "failed requests before the restore: %s" % rep.errors(["calm", "drift"]))
        s.expect_dups(rep)
    return s


SCENARIOS = {"async": sc_async, "partition": lambda s: sc_async(s, cut=True),
             "semisync": sc_semisync, "degrade": sc_degrade, "restore": sc_restore}
CONTROLS = ("async", "partition", "restore")


def main(script="failover.py", scenarios=None, controls=CONTROLS, new_scenario=Scenario):
    """The command line, the preflight and the C client around run_all
    (failover_pg.py's main too, with its scenarios)."""
    args = parser(LEAFD).parse_args()
    if args.phase_secs is None:
        args.phase_secs = 3.0 if args.short else 30.0
    code, args.grpc = preflight(script)
    if code is not None:
        return code
    args.leafd = os.path.abspath(args.leafd)
    cdir = tempfile.mkdtemp(prefix="lfh-idstream-")
    try:
        args.cclient = build_idstream(cdir)
        return run_all(args, scenarios or SCENARIOS, controls, new_scenario, say)
    finally:
        shutil.rmtree(cdir, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    sys.exit(main())
