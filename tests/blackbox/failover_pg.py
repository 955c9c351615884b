#!/usr/bin/env python3
"""failover_pg.py: segment mode on PostgreSQL through standby promotions,
under real network namespaces, with every ID checked (issue 31, section 3).

    python3 tests/blackbox/failover_pg.py --short      make test (lane failover)
    python3 tests/blackbox/failover_pg.py              make chaos-long: each phase
                                                       --phase-secs (30) long
    python3 tests/blackbox/failover_pg.py --expect-duplicates --leafd NORULE
        the positive control: scenario async against a leafd whose
        PostgreSQL server check is cut out (make chaos-long builds it, see
        the Makefile: the rule came with the store, 4009dce, so no commit
        has the store without it, and no setting turns it off); passes
        only if it shows duplicates
    --only async,sync   a subset;  --keep   keep the work directory

The shape of failover.py (its Scenario, refused_until_fence and wait_serving
serve here): a tests/lib/netns.py network (prefix lfo, 10.239.S.0/24), each
PostgreSQL 15 (tests/lib/postgresql_ns.py, run as the user postgres) and
each of two leafd nodes in a namespace of its own, the clients
(tests/lib/idcheck.py: HTTP, leases, RESP, memcached, gRPC, and
libleafd-client) in the root namespace. Tag `fo`, step 10,
segment.max_step 5000. The nodes reach the database through a VIP
(10.239.S.201) that moves to the promoted standby.

Scenarios (phases in brackets):
  async  db1 primary -> db2 asynchronous streaming standby. [calm] [lag: db2
         cut from db1 (nftables): it receives nothing more] [failover: db1
         killed -9, db2 promoted, VIP moved]. Without the rule: duplicates
         (the positive control). With it: every node refuses with 503
         db_failover [refused] until `leafd db-fence --floor=N` (N the
         largest segment.marks_max of the nodes' /health) [fenced]; then
         every node serves again [after]; 0 duplicates.
  sync   db1 -> db2 with synchronous_commit = on, synchronous_standby_names
         = 'db2'; nodes with segment.postgresql.replication = sync. [calm]
         [failover: db1 killed -9, db2 promoted, VIP moved; a new standby
         db3 made from db2 and named synchronous there (until it streams,
         db2's commits have no standby: loads refused durability_degraded
         or waiting)] [after]. 0 duplicates, no db_failover, no fence, no
         failed request outside [failover].
Exit 1 if any scenario's check fails. Root only (network namespaces).

Measured on the 2-core test VM (b3824bb + this script), --short 42-51 s
(both scenarios), --phase-secs 30 about 200 s, the control 21 s / 140 s:
  scenario  leafd    phases  IDs      twice    failed by code                     no service
  async     rule     short   76,797   0        db_failover 313, c_unavailable 13  1.66 s
  async     rule     30 s    748,179  0        db_failover 2,510, c_unav. 112     15.28 s
  async     no rule  short   109,457  27,800   -                                  0.17 s
  async     no rule  30 s    990,015  234,960  -                                  0.49 s
  sync      rule     short   74,583   0        durability_degraded 514            3.62 s
  sync      rule     30 s    465,076  0        durability_degraded 425,           10.68 s
                                               ids_exhausted 609, c_unav. 33
("no service": the longest time one client went without an answer; async's
includes the half phase before db-fence. p99 in the failover phases: short
7 ms against 39 ms calm (async), 6.6 ms against 3.4 ms (sync); 30 s phases
about 250 ms against 5-8 ms calm: refused requests wait segment.wait_ms.)
With only store_pg.c's server check cut out the marks still refuse: 503
store_behind, 0 of 68,525 IDs twice.
"""
import contextlib
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
import failover  # noqa: E402
from failover import Scenario, refused_until_fence, wait_serving  # noqa: E402
from leafd_ns import NsLeafd  # noqa: E402
from netns import Net  # noqa: E402
from postgresql_ns import NsPostgres  # noqa: E402
from scenario_cli import check, say  # noqa: E402

TAG = "fo"


class PgScenario(Scenario):
    @contextlib.contextmanager
    def network(self):
        with Net(prefix="lfo", first_octet=239) as net:
            try:
                yield net
            finally:
                if self.load is not None:
                    self.load.stop()


def LeafNode(node, wd, url, extra, binary, grpc=True):
    conf = {"segment.store": "postgresql", "segment.postgresql.url": url,
            "segment.max_step": 5000}
    conf.update(extra)
    return NsLeafd(node, wd, conf, binary, grpc)


def add_tag(db):
    db.sql("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
           "VALUES ('%s', 1, 10, 'failover test')" % TAG)


def max_id(db):
    return int(db.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag = '%s'" % TAG))


def primary_standby(s, net, sync=False):
    """db1 with the tag, db2 its streaming standby (synchronous_standby_names
    = 'db2' when sync), the VIP on db1; (db1, db2, vip, url on the VIP)."""
    db1 = NsPostgres(net.add("db1"), s.wd).start()
    add_tag(db1)
    db2 = NsPostgres(net.add("db2"), s.wd).standby_of(db1)
    if sync:
        db1.set_sync("db2")
    vip = net.vip(1)
    net.add_vip(db1.node, vip)
    return db1, db2, vip, db1.url(vip)


def sc_async(s):
    args = s.args
    with s.network() as net:
        db1, db2, vip, url = primary_standby(s, net)
        nodes = [LeafNode(net.add("n%d" % i), s.wd, url, {}, args.leafd, args.grpc).start()
                 for i in range(2)]
        load = s.start_load(nodes)
        s.phase(load, "calm", s.secs)
        net.partition([db1.node], [db2.node])
        s.phase(load, "lag", s.secs)
        s.phase(load, "failover")
        at_primary = max_id(db1)
        db1.kill9()
        db2.promote()
        net.move_vip(vip, db1.node, db2.node)
        moved = time.time()
        say("  db1 reached max_id %d; db2, promoted, has %d" % (at_primary, max_id(db2)))
        check(max_id(db2) < at_primary, "the standby did not lag: nothing to lose")
        refused_until_fence(s, load, nodes, moved, url, "postgresql")
    return s


def sc_sync(s):
    args = s.args
    with s.network() as net:
        db1, db2, vip, url = primary_standby(s, net, sync=True)
        nodes = [LeafNode(net.add("n%d" % i), s.wd, url,
                          {"segment.postgresql.replication": "sync"}, args.leafd,
                          args.grpc).start() for i in range(2)]
        load = s.start_load(nodes)
        s.phase(load, "calm", s.secs)
        s.phase(load, "failover")
        at_primary = max_id(db1)
        db1.kill9()
        db2.promote()
        net.move_vip(vip, db1.node, db2.node)
        say("  db1 reached max_id %d; db2, promoted, has %d" % (at_primary, max_id(db2)))
        check(max_id(db2) >= at_primary, "the synchronous standby lacks commits")
        NsPostgres(net.add("db3"), s.wd).standby_of(db2)
        db2.set_sync("db3")
        wait_serving(load, nodes, 30 + s.secs, "every node serving after the failover")
        s.phase(load, "after", s.secs)
        rep = s.finish(load)
        check(rep.failed(["calm", "after"]) == 0,
              "failed requests outside the failover: %s" % rep.errors(["calm", "after"]))
        check("db_failover" not in rep.errors(),
              "sync: the promoted standby was not accepted without db-fence")
        s.expect_dups(rep)
    return s


SCENARIOS = {"async": sc_async, "sync": sc_sync}
CONTROLS = ("async",)


def main():
    return failover.main("failover_pg.py", SCENARIOS, CONTROLS, PgScenario)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    sys.exit(main())
