#!/usr/bin/env python3
"""failover_multidb.py: multi-db mode (segment.mysql.urls) with one member
that is itself an async MariaDB pair and fails over (issue 28, section 2.5).

    python3 tests/blackbox/failover_multidb.py --short --leafd ./leafd
    python3 tests/blackbox/failover_multidb.py            each phase --phase-secs (30)
    python3 tests/blackbox/failover_multidb.py --control single --expect-duplicates \
        --leafd OLD       the positive control (below)
    --order kill-first|vip-first   --keep   keep the work directory

Topology (tests/lib/netns.py network, prefix lfm, 10.235.S.0/24): database 0
is one MariaDB (namespace dbz); database 1 is a GTID primary db1p with an
async replica db1r, reached through a VIP (10.235.S.201) that moves to the
replica when it is promoted, as keepalived moves it. `leafd multi-db init
URL0 URL1` prepares the set (URL1 names the VIP). Two leafd nodes n0, n1
(segment.mysql.urls = URL0,URL1), tag `fo`, step 10, segment.max_step 40;
clients: tests/lib/idcheck.py (HTTP, leases, RESP, memcached, gRPC when
python3-grpcio is there), one thread per node per front end.

Phases (figures per phase: answers/s, failed requests by code, longest wait,
p50/p99; and p99 failover against calm):
  calm      the nodes start cut from database 0 (nftables) so that their
            loads go to database 1 (a node prefers the database that
            answered last), then the cut heals and database 0 is probed
            back (segment.refresh_ms 500: the probe runs on the refresh;
            until then no top is pushed to it); both nodes load from db1,
            database 0 records db1's top.
  lag       db1r's SQL thread stopped: it receives, applies nothing.
  failover  kill-first (default): db1p killed -9, db1r promoted without its
            relay log (what an async replica loses), VIP moved.
            --order vip-first: db1p hung or cut off: db1r promoted and the
            VIP moved to it while db1p is still up, db1p killed -9 after
            (leafd's connections see no connect failure, only a lost
            connection that it retries on a new one: on the promoted server).
  after     database 1, behind the top the nodes recorded for it, must stay
            out of loads: every node serves from database 0, and its
            /health shows database 1 down with "restored from an older
            copy?".
  reinit    the operator step: nodes stopped, `leafd multi-db init` with the
            same list (it sets the set above every top), nodes started.
  cut0      the nodes cut from database 0 until the restored database 1 has
            served loads; healed (503 ids_exhausted allowed here: a load
            waits db_timeout_ms on the cut connection).
  back      every client served again; no failure.
0 duplicates over the whole run, and no failed request in calm, lag, after,
back.

--idle-node: a third node n2, with the others through calm (its loads from
db1), takes 20 IDs in calm and nothing more until after the failover, then
HTTP and lease clients for one phase. It finds db1 through a lost
connection retried at once on the promoted server, never a failed load: it
never marks db1 down, so multi_behind never runs for it, and its loads
start at the promoted max_id (its own floor is lower).

What this found (issue 28 helper report, leafd main at 93b4056, and
a46976b alike): kill-first with two busy nodes passes (the busy nodes' loads
fail during the move, db1 is marked down, the probe finds it behind); with
--idle-node, about 10,000 to 12,000 of 700,000 IDs are given twice, from
exactly the promoted max_id up; with --order vip-first, 0 to 45 twice (the
busy nodes reconnect silently too; a duplicate needs the node with the
lower floor to load first) and database 1 is never kept out. Both fail
until multi-db loads detect the change of server.

Positive control (--control single): the same pair, no multi-db: both nodes
on segment.mysql.url = the VIP alone, [calm] [lag] [failover] [after].
--expect-duplicates passes only if duplicates are seen: on leafd a46976b
(before the marks and the server-identity rule) 56,997 of 242,291 IDs twice.
Without --expect-duplicates (new code), it requires 0 duplicates (the nodes
refuse with db_failover; no fence in this scenario).

Exit 1 if a check fails. Root only (network namespaces). Ports 25000-25999.
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from bbutil import LEAFD, Client, TestFailure, wait_for  # noqa: E402
from idcheck import Load  # noqa: E402
from leafd_ns import NsLeafd, clean_env, preflight  # noqa: E402
from mariadb_ns import NsMariaDB, start_all  # noqa: E402
from netns import Net  # noqa: E402

TAG = "fo"
T0 = time.time()
_PORT = [25000 + random.randrange(0, 500)]


def port():
    """The next port of 25000-25999 (each node has a namespace of its own:
    only distinct ports within one node matter)."""
    _PORT[0] += 1
    if _PORT[0] > 25999:
        _PORT[0] = 25000
    return _PORT[0]


def say(msg):
    print("[%6.1fs] %s" % (time.time() - T0, msg), flush=True)


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def LeafNode(node, wd, store_conf, binary, grpc):
    """A leafd in its own namespace (leafd_ns.NsLeafd) on store_conf."""
    conf = {"segment.max_step": 40,
            # A database marked down is probed back on the refresh
            # (default 60 s): until then no top is pushed to it.
            "segment.refresh_ms": 500}
    conf.update(store_conf)
    return NsLeafd(node, wd, conf, binary, grpc, port_fn=port)


def multi_dbs(h):
    """The segment databases' list in a /health answer (wherever it is)."""
    found = []

    def walk(x):
        if isinstance(x, dict):
            if "where" in x and "up" in x:
                found.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(h)
    return found


def start_dbs(net, wd, names):
    dbs = [NsMariaDB(net.add(n), wd, i + 1) for i, n in enumerate(names)]
    return start_all(dbs)


def max_id(db):
    return int(db.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag='%s'" % TAG))


def leafd_cmd(binary, *args):
    r = subprocess.run([binary] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120, env=clean_env())
    out = r.stdout.decode().strip()
    say("  leafd %s: exit %d: %s" % (" ".join(args[:2]), r.returncode, out[-600:]))
    return r.returncode, out


def wait_kinds(load, since, timeout, what):
    """Until every client (each node, each front end) has a successful
    answer since `since` (gRPC's channel backs off after a restart)."""
    def done():
        for recs in load.recs:
            if not any(r[0] >= since and r[4] is None for r in recs[-200:]):
                return False
        return True
    wait_for(done, timeout, step=0.1, what=what)


def wait_each(load, names, since, pred, timeout, what):
    """Until every node in names has an answer since `since` that pred
    accepts (pred(code))."""
    def done():
        seen = set()
        for recs in load.recs:
            for r in recs[::-1]:
                if r[0] < since:
                    break
                if pred(r[4]):
                    seen.add(r[2])
        return all(n in seen for n in names)
    wait_for(done, timeout, step=0.1, what=what)


class Scenario:
    def __init__(self, args):
        self.args = args
        self.wd = tempfile.mkdtemp(prefix="lfm-")
        self.secs = args.phase_secs
        self.load = None
        self.notes = []
        self.failed_load = None
        self.load2 = None
        self.extra_ids = []               # the idle node's, outside self.load

    def phase(self, name, secs=None):
        say("  phase %s" % name)
        self.load.phase(name)
        if secs:
            time.sleep(secs)

    def halt(self):
        """On a failure: stop the clients before the network goes (the
        figures up to the failure, without the teardown's errors)."""
        if self.load2 is not None:
            self.load2.stop()
        if self.load is not None:
            self.load.stop()
            self.failed_load = self.load
            self.load = None

    def finish(self):
        load, self.load = self.load, None
        load.stop()
        rep = load.report()
        print(rep.text, flush=True)
        check(not rep.bad, "answers that were not the IDs asked for: %s" % rep.bad[:3])
        if self.extra_ids:
            allids = sorted([i for a in load.ids for i in a] + self.extra_ids)
            dups = [a for a, b in zip(allids, allids[1:]) if a == b]
            say("  with the idle node's %d IDs: %d IDs issued, %d given twice%s"
                % (len(self.extra_ids), len(allids), len(dups),
                   " (e.g. %s)" % sorted(set(dups))[:5] if dups else ""))
            rep.issued, rep.duplicates = len(allids), len(dups)
            rep.dup_examples = sorted(set(dups))[:5]
        calm = rep.phases.get("calm", {}).get("p99_ms", 0)
        fo = rep.phases.get("failover", {}).get("p99_ms", 0)
        say("  p99 failover %.1f ms vs calm %.1f ms (%.1fx)"
            % (fo, calm, fo / calm if calm else 0))
        return rep

    def expect_dups(self, rep):
        if self.args.expect_duplicates:
            check(rep.duplicates > 0, "positive control: no duplicate seen (%d IDs)" % rep.issued)
            say("  positive control: %d of %d IDs given twice, e.g. %s"
                % (rep.duplicates, rep.issued, rep.dup_examples))
        else:
            check(rep.duplicates == 0, "%d IDs given twice, e.g. %s"
                  % (rep.duplicates, rep.dup_examples))


def failover(s, net, db1p, db1r, vip):
    """db1p lost, db1r promoted without its relay log, the VIP on db1r.
    Returns the time the VIP moved."""
    if s.args.order == "vip-first":
        # db1p cut off or hung: the failover tool promotes db1r, the VIP
        # moves to it; db1p, still up meanwhile, is killed after (STONITH).
        # (Promoted before the move: leafd connects as root here, and
        # read_only does not stop root on a replica still replicating.)
        db1r.promote(apply_relay=False)
        promoted = max_id(db1r)
        net.move_vip(vip, db1p.node, db1r.node)
        moved = time.time()
        at_primary = max_id(db1p)
        db1p.kill9()
    else:
        at_primary = max_id(db1p)
        db1p.kill9()
        db1r.promote(apply_relay=False)
        promoted = max_id(db1r)
        net.move_vip(vip, db1p.node, db1r.node)
        moved = time.time()
    say("  db1p reached max_id %d; db1r, promoted, has %d (%d IDs lost)"
        % (at_primary, promoted, at_primary - promoted))
    check(promoted < at_primary, "the replica did not lag: nothing to lose")
    return moved


def sc_multi(s):
    with Net(prefix="lfm", first_octet=235) as net:
        try:
            multi_body(s, net)
        finally:
            s.halt()
    return s


def multi_body(s, net):
    args = s.args
    if True:
        dbz, db1p, db1r = start_dbs(net, s.wd, ["dbz", "db1p", "db1r"])
        vip = net.vip(1)
        net.add_vip(db1p.node, vip)
        db1r.replicate_from(db1p)
        dbz.sql("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
                "VALUES ('%s', 1, 10, 'failover test')" % TAG)
        urls = [dbz.url(), db1p.url(vip)]
        rc, out = leafd_cmd(args.leafd, "multi-db", "init", *urls)
        check(rc == 0, "leafd multi-db init failed: %s" % out)
        db1r.wait_caught_up(db1p)
        names = ["n0", "n1"]
        nns = [net.add(n) for n in names + (["n2"] if args.idle_node else [])]
        # Cut from database 0 while they start: their loads go to database
        # 1, which they then prefer.
        net.partition(nns, [dbz.node])
        nodes = [LeafNode(n, s.wd, {"segment.mysql.urls": ",".join(urls)}, args.leafd,
                          args.grpc).start() for n in nns]
        idle = nodes.pop() if args.idle_node else None
        s.load = Load([n.client() for n in nodes], TAG, kinds=args.kinds).start()
        s.phase("calm")
        wait_each(s.load, names, 0, lambda c: c is None, 30, "every node serving")
        if idle is not None:
            # A node with little traffic: a few IDs now (its loads, from
            # database 1), then nothing until after the failover.
            c = Client(idle.ports["http"], host=idle.node.addr, timeout=5)
            for _ in range(4):
                r = c.get("/segment/%s?count=5" % TAG)
                check(r.status == 200, "n2: %d %s" % (r.status, r.text[:200]))
                s.extra_ids.extend(r.ids())
            c.close()
        net.heal()
        time.sleep(s.secs)
        for n in nodes:
            dbs = multi_dbs(n.health())
            check(len(dbs) == 2 and dbs[1].get("preferred"),
                  "%s does not prefer database 1: %s" % (n.node.name, dbs))
        wait_for(lambda: all(multi_dbs(n.health())[0].get("up") for n in nodes), 10,
                 step=0.1, what="database 0 probed back up")
        top_rec = dbz.sql("SELECT MAX(top) FROM leafd_multi_member WHERE pos = 1")
        say("  database 0 records database 1's top at %s; db1p max_id %d"
            % (top_rec, max_id(db1p)))
        db1r.lag()
        s.phase("lag", s.secs)
        s.phase("failover")
        moved = failover(s, net, db1p, db1r, vip)
        wait_each(s.load, names, moved + 0.5, lambda c: c is None, 30,
                  "every node serving after the failover")
        s.phase("after", s.secs)
        if idle is not None:
            # The idle node's clients come now: its first load after the
            # failover.
            s.load2 = Load([idle.client()], TAG, kinds=("http", "lease")).start()
            s.load2.phase("after")
            time.sleep(s.secs)
            s.load2.stop()
            rep2 = s.load2.report()
            say("  n2 (idle through the failover), after it: " +
                rep2.text.replace("\n", "\n      "))
            s.extra_ids.extend(i for a in s.load2.ids for i in a)
            nodes.append(idle)

        def said():
            return all("older copy" in (multi_dbs(n.health())[1].get("error") or "")
                       for n in nodes)
        try:
            wait_for(said, 10, step=0.2, what="/health: database 1 behind its record")
        except Exception:
            pass                          # reported below
        kept_out = {}
        for n in nodes:
            dbs = multi_dbs(n.health())
            d1 = dbs[1] if len(dbs) == 2 else {}
            kept_out[n.node.name] = (not d1.get("up"), d1.get("error", ""))
            say("  %s /health database 1: up=%s error=%s" % (n.node.name, d1.get("up"),
                                                            d1.get("error", "")[:200]))
        s.notes.append("kept out after failover: %s" % kept_out)
        s.phase("reinit")
        if idle is not None:
            nodes.remove(idle)
            idle.stop()
        for n in nodes:
            n.stop()
        rc, out = leafd_cmd(args.leafd, "multi-db", "init", *urls)
        check(rc == 0, "leafd multi-db init (same list) failed: %s" % out)
        s.notes.append("init with the same list: %s" % out.split("\n")[0][:300])
        for n in nodes:
            n.start()
        wait_kinds(s.load, time.time(), 60, "every client served after init and restart")
        s.phase("cut0")                      # loads go to the restored db1
        net.partition(nns, [dbz.node])
        before = max_id(db1r)
        wait_for(lambda: max_id(db1r) > before + 100, 30, step=0.2,
                 what="loads on database 1 while database 0 is cut")
        time.sleep(s.secs / 2)
        net.heal()
        used = max_id(db1r)
        say("  database 1 after init: max_id %d -> %d while database 0 was cut"
            % (before, used))
        wait_kinds(s.load, time.time(), 30, "every client served after the heal")
        s.phase("back", s.secs)
        for n in nodes:
            dbs = multi_dbs(n.health())
            check(len(dbs) == 2, "%s /health: %s" % (n.node.name, dbs))
            say("  %s /health database 1: up=%s loads=%s" % (n.node.name, dbs[1].get("up"),
                                                            dbs[1].get("loads")))
        rep = s.finish()
        s.expect_dups(rep)
        if args.expect_duplicates:
            return s                # the break is shown; the rest is the fix's
        for n, (out_, err) in kept_out.items():
            check(out_ and "older copy" in err,
                  "%s: database 1 not kept out after the failover (error %r)" % (n, err))
        quiet = ["calm", "lag", "after", "back"]
        check(rep.failed(quiet) == 0, "failed requests outside the failover and the "
              "restart: %s" % rep.errors(quiet))
    return s


def sc_single(s):
    """The positive control: the pair alone, segment.mysql.url = the VIP."""
    with Net(prefix="lfm", first_octet=235) as net:
        try:
            single_body(s, net)
        finally:
            s.halt()
    return s


def single_body(s, net):
    args = s.args
    if True:
        db1p, db1r = start_dbs(net, s.wd, ["db1p", "db1r"])
        vip = net.vip(1)
        net.add_vip(db1p.node, vip)
        db1r.replicate_from(db1p)
        db1p.sql("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
                 "VALUES ('%s', 1, 10, 'failover test')" % TAG)
        db1r.wait_caught_up(db1p)
        names = ["n0", "n1"]
        nodes = [LeafNode(net.add(n), s.wd, {"segment.mysql.url": db1p.url(vip)},
                          args.leafd, args.grpc).start() for n in names]
        s.load = Load([n.client() for n in nodes], TAG, kinds=args.kinds).start()
        s.phase("calm", s.secs)
        db1r.lag()
        s.phase("lag", s.secs)
        s.phase("failover")
        failover(s, net, db1p, db1r, vip)
        time.sleep(s.secs)
        s.phase("after", s.secs)
        rep = s.finish()
        s.expect_dups(rep)
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--phase-secs", type=float, default=None)
    ap.add_argument("--leafd", default=LEAFD)
    ap.add_argument("--control", choices=["multi", "single"], default="multi")
    ap.add_argument("--order", choices=["kill-first", "vip-first"], default="kill-first")
    ap.add_argument("--expect-duplicates", action="store_true")
    ap.add_argument("--idle-node", action="store_true",
                    help="a third node n2 that takes a few IDs in calm and none "
                    "until after the failover")
    ap.add_argument("--kinds", default="http,lease,resp,mc,grpc")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if args.phase_secs is None:
        args.phase_secs = 3.0 if args.short else 30.0
    args.kinds = tuple(args.kinds.split(","))
    code, args.grpc = preflight("failover_multidb.py", "grpc" in args.kinds)
    if code is not None:
        return code
    args.leafd = os.path.abspath(args.leafd)
    name = args.control
    say("== %s, %s%s (%s)" % (name, args.order,
                             " (positive control)" if args.expect_duplicates else "",
                             args.leafd))
    s = Scenario(args)
    ok = False
    try:
        (sc_multi if name == "multi" else sc_single)(s)
        ok = True
        for n in s.notes:
            say("  " + n)
        say("== %s: ok in %.0fs" % (name, time.time() - T0))
    except Exception as e:
        say("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        for n in s.notes:
            say("  " + n)
        if s.failed_load is not None:     # the figures up to the failure
            print(s.failed_load.report().text, flush=True)
    finally:
        if s.load is not None:
            s.load.stop_ev.set()
        if args.keep or not ok:
            say("  (kept %s)" % s.wd)
        else:
            shutil.rmtree(s.wd, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    sys.exit(main())
