#!/usr/bin/env python3
"""sentinel.py: snowflake worker IDs from Redis with Sentinel, through
failovers, in network namespaces, with every ID checked (issue 29, section 2).

    python3 tests/blackbox/sentinel.py --short        make test (lane sentinel): kill,
                                                      sentinel, split; 2 s phases
    python3 tests/blackbox/sentinel.py                make chaos-long: each phase
                                                      --phase-secs (20) long
    python3 tests/blackbox/sentinel.py --expect-duplicates --leafd OLD
        the positive control: scenario split against a leafd without the
        Sentinel support (plain snowflake.redis.url, so no Sentinel
        majority behind each write); passes only if it shows duplicates
    --only kill,sentinel,back,split   a subset;  --keep   keep the work directory

Every scenario runs in its own tests/lib/netns.py network (prefix lfs): three
redis-servers (r1 the master; r2 and r3 replicas, r2 with the lower
replica-priority, so Sentinel promotes it), three Sentinels (quorum 2,
down-after 1 s; tests/lib/redis_ns.py) and the leafd nodes, each in a
namespace of its own. leafd: snowflake.worker_source = redis,
snowflake.redis.sentinels = the three, worker_bits 1 (two worker IDs, so
that a node started later has to wait for one the others held), lease
(takeover_age_ms) 6 s, fence_step 1 s, heartbeat 300 ms. The clients
(tests/lib/idcheck.py with tag @snowflake: HTTP, RESP, memcached, gRPC; one
thread per node per front end) run in the root namespace; a node started
during a scenario gets its clients then. Every ID of every client is
checked for repeats.

Scenarios (phases in brackets):
  kill      [calm] [lag: r2 cut from r1 (nftables), n2 restarted meanwhile:
            its new claim reaches r1 and r3, not r2] [failover: r1 killed -9,
            Sentinel promotes r2, which lacks n2's claim and the last
            heartbeats; the cut healed once it has (before, r1's kernel
            would hand r2 what the killed process had sent)] [after: n3 started; it may take n2's worker
            ID only a lease after r2 noticed it is another server (issue
            20's rule); n2's next write finds its claim gone and stops it]
            [back: r1 back as in back, n1 restarted meanwhile].
            0 duplicates.
  sentinel  [calm] [cut_leafd: the Sentinels cut from the leafd nodes: a
            node cannot tell this from being cut off with the master while
            the Sentinels promote another server, so n1 serves up to the
            fence its last confirmed write holds, then 503
            worker_lease_expired (never another code) until the cut heals;
            n2 restarted meanwhile gets no worker ID] [cut_servers: the
            Sentinels cut from the servers: no failover can happen while it
            lasts, and no request fails] [after: healed; a failover the
            Sentinels began in the cut may end now, and the nodes follow].
            0 duplicates.
  back      [calm] [failover: r1 killed, r2 promoted] [back: r1 restarted
            empty, as a master, until Sentinel makes it a replica of r2; n2
            restarted meanwhile] [after]. 0 duplicates; r1 never ran a
            leafd script (INFO commandstats has no EVAL). Not in --short
            (kill ends with the same phase).
  split     [calm] [split: r1, r3 and n1 cut off from everything else (the
            clients still reach n1); Sentinel promotes r2] [taken: n3
            started on the majority side takes n1's worker ID after a
            lease] [after: healed; Sentinel makes r1 and r3 replicas of
            r2]. r1 keeps its replica r3, so it would take writes even with
            min-replicas-to-write 1; but n1 reaches no Sentinel, and leafd
            counts a write only while a majority of the Sentinels name the
            server it writes to: n1 stops issuing half a lease after its
            last confirmed write, before n3 can take its ID: 0 duplicates.
            The positive control (--expect-duplicates --leafd OLD: plain
            URLs, n1 on r1, n3 on r2): n1 goes on issuing under n3.
The servers run without min-replicas-to-write: what leafd guarantees does
not rest on it.
Exit 1 if any scenario's check fails. Root only (network namespaces).
"""
import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from bbutil import LEAFD, in_ci, wait_for  # noqa: E402
from idcheck import SNOWFLAKE, Load, HttpIds  # noqa: E402
from leafd_ns import NsLeafd, preflight  # noqa: E402
from netns import Net  # noqa: E402
from scenario_cli import check, parser, run_all, say  # noqa: E402
from redis_ns import PORT, NsRedis, NsSentinel, wait_master, wait_replicas, \
    wait_sentinels_see  # noqa: E402

NAME = "m1"
PREFIX = "leafd:snowflake:"
LEASE_MS = 4000
KINDS = ("http", "resp", "mc", "grpc")
# what a node answers while its writes do not count (no Sentinel majority)
REFUSALS = {"fence_unconfirmed", "fence_pending", "worker_lease_expired"}


class Scenario:
    def __init__(self, args, name):
        self.args, self.name = args, name
        self.wd = tempfile.mkdtemp(prefix="lfs-%s-" % name)
        self.secs = args.phase_secs
        self.load = None
        self.summary = None
        self.control = args.expect_duplicates

    @contextlib.contextmanager
    def network(self):
        with Net(prefix="lfs", first_octet=236) as net:
            try:
                yield net
            finally:
                if self.load is not None:
                    self.load.stop()

    def servers(self, net):
        """r1 master, r2 (promoted first) and r3 replicas, three Sentinels."""
        r1 = NsRedis(net.add("r1"), self.wd).start()
        r2 = NsRedis(net.add("r2"), self.wd, master=r1, priority=10).start()
        r3 = NsRedis(net.add("r3"), self.wd, master=r1, priority=100).start()
        ss = [NsSentinel(net.add("s%d" % i), self.wd, r1, NAME).start() for i in (1, 2, 3)]
        wait_replicas(r1, 2)
        wait_sentinels_see(ss)
        wait_master(ss, r1)
        # a new store nothing was issued from (docs/operations.md)
        r1.cmd("SET", PREFIX + "epoch", "0")
        return [r1, r2, r3], ss

    def leafd(self, net, name, ss, url=None):
        node = net.add(name)
        conf = {"leaf.segment.enable": "false", "leaf.snowflake.enable": "true",
                "snowflake.worker_source": "redis",
                "snowflake.ip": node.addr, "leaf.snowflake.port": 7000,
                "snowflake.cache_file": os.path.join(self.wd, "%s.json" % name),
                "snowflake.takeover_age_ms": LEASE_MS, "snowflake.fence_step_ms": 1000,
                "snowflake.heartbeat_ms": 300, "snowflake.max_borrow_ms": 200,
                "snowflake.max_clock_offset_ms": 1000,
                "snowflake.worker_bits": 1, "snowflake.sequence_bits": 21}
        if url is not None:          # the positive control's leafd: no Sentinel
            conf["snowflake.redis.url"] = url
        else:
            conf["snowflake.redis.sentinels"] = ",".join(s.hostport for s in ss)
            conf["snowflake.redis.master_name"] = NAME
        return NsLeafd(node, self.wd, conf, self.args.leafd, self.args.grpc)

    def start_load(self, nodes):
        self.load = Load([n.client() for n in nodes], SNOWFLAKE, kinds=KINDS).start()
        return self.load

    def calm(self, net):
        """The servers, n1 and n2 under load, the calm phase."""
        rs, ss = self.servers(net)
        n1 = self.leafd(net, "n1", ss).start()
        n2 = self.leafd(net, "n2", ss).start()
        wait_serving([n1, n2], 60, "n1, n2 serving")
        self.start_load([n1, n2])
        self.phase("calm", self.secs)
        return rs, ss, n1, n2

    def phase(self, name, secs=None):
        say("  phase %s" % name)
        self.load.phase(name)
        if secs:
            time.sleep(secs)

    def report(self, load):
        load.stop()
        rep = load.report()
        print(rep.text, flush=True)
        self.summary = rep.summary([p for p in rep.phases if p not in ("calm", "after")])
        return rep

    def finish(self):
        load, self.load = self.load, None
        rep = self.report(load)
        check(not rep.bad, "answers that were not the IDs asked for: %s" % rep.bad[:3])
        if self.control:
            check(rep.duplicates > 0, "positive control: no duplicate seen (%d IDs)" % rep.issued)
        else:
            check(rep.duplicates == 0, "%d IDs given twice, e.g. %s"
                  % (rep.duplicates, rep.dup_examples))
        return rep


def serving(n):
    """n answers a snowflake ID now."""
    c = HttpIds(n.node.addr, n.ports["http"], SNOWFLAKE)
    try:
        code, ids = c.get()
        return code is None and len(ids) > 0
    except Exception:
        return False
    finally:
        c.close()


def wait_serving(nodes, timeout, what):
    wait_for(lambda: all(serving(n) for n in nodes), timeout, step=0.2, what=what)


def state(n):
    import json
    import urllib.request
    with urllib.request.urlopen("http://%s:%d/snowflake/state" % (n.node.addr, n.ports["http"]),
                                timeout=5) as r:
        return json.loads(r.read())


def worker(n):
    return state(n).get("worker_id")


def failed_of(load, node, phase):
    """Failed requests of node's clients in the phase (by code)."""
    bounds = load.phases + [("end", load.t_end)]
    out = {}
    for (name, t0), (_, t1) in zip(bounds, bounds[1:]):
        if name != phase:
            continue
        for recs in load.recs:
            for r in recs:
                if r[2] == node and r[4] is not None and t0 <= r[0] < t1:
                    out[r[4]] = out.get(r[4], 0) + 1
    return out


def restart(n, what):
    n.stop()
    n.start()
    say("  %s restarted (%s)" % (n.node.name, what))


def follows_master(n, old, new):
    """Section 4 of issue 29: n's /snowflake/state names the new master and
    counts the failover, and so does /metrics."""
    import urllib.request
    want = "%s:%s" % (new.addr, PORT)
    wait_for(lambda: state(n).get("redis_master") == want, 30, step=0.2,
             what="%s's /snowflake/state naming %s the master" % (n.node.name, want))
    st = state(n)
    check(st.get("store_failovers", 0) >= 1, "%s: no failover counted: %s" % (n.node.name, st))
    with urllib.request.urlopen("http://%s:%d/metrics" % (n.node.addr, n.ports["http"]),
                                timeout=5) as r:
        met = r.read().decode()
    check(re.search(r'^leafd_snowflake_store_failovers_total\{source="redis"\} [1-9]', met, re.M),
          "%s: no failover in /metrics" % n.node.name)
    say("  %s follows master %s (was %s:%s), failovers seen: %d"
        % (n.node.name, want, old.addr, PORT, st["store_failovers"]))


def sc_kill(s):
    with s.network() as net:
        (r1, r2, r3), ss = s.servers(net)
        n1 = s.leafd(net, "n1", ss).start()
        wait_serving([n1], 60, "n1 serving")
        n2 = s.leafd(net, "n2", ss).start()
        wait_serving([n2], 60, "n2 serving")
        n3 = s.leafd(net, "n3", ss)
        w2 = worker(n2)
        s.start_load([n1, n2])
        s.phase("calm", s.secs)
        s.phase("lag")
        net.partition([r2.node], [r1.node])
        time.sleep(1.5)
        restart(n2, "its claim reaches r1 and r3 only")
        wait_serving([n2], 30, "n2 serving again")
        time.sleep(max(s.secs - 1.5, 1.0))
        key = "%sw:%d" % (PREFIX, w2)
        new, old = r1.cmd("HGET", key, "instance"), r2.cmd("HGET", key, "instance")
        say("  %s instance: r1 %s, r2 %s (lagging)" % (key, new, old))
        check(new != old, "r2 has n2's new claim: it does not lag")
        s.phase("failover")
        r1.kill9()
        t = time.time()
        # healed only once r2 is the master: r1's kernel would otherwise
        # deliver what the killed process had sent (its socket buffer) and
        # r2 would lag no more
        wait_master(ss, r2, 60)
        net.heal()
        say("  r2 promoted %.1f s after r1 was killed" % (time.time() - t))
        check(r2.cmd("HGET", key, "instance") == old,
              "r2 has n2's new claim after all: it did not lag")
        time.sleep(s.secs)
        follows_master(n1, r1, r2)
        s.phase("after")
        n3.start()
        s.load.add(n3.client())
        t = time.time()
        wait_serving([n3], 60, "n3 serving")
        say("  n3 serving %.1f s after its start, worker ID %s; n2: %s" %
            (time.time() - t, worker(n3), str(state(n2).get("last_error"))[:120]))
        time.sleep(s.secs)
        old_master_back(s, r1, n1)
        s.finish()


def sc_sentinel(s):
    with s.network() as net:
        (r1, r2, r3), ss, n1, n2 = s.calm(net)
        s.phase("cut_leafd")
        net.partition([x.node for x in ss], [n1.node, n2.node])
        restart(n2, "the Sentinels out of its reach")
        time.sleep(max(s.secs, 3.0))
        check(not serving(n2), "n2 serves without having reached a Sentinel")
        say("  n2 without a worker ID: %s" % str(state(n2).get("last_error"))[:160])
        net.heal()
        wait_serving([n1, n2], 30, "n1, n2 serving after the cut healed")
        s.phase("cut_servers")
        net.partition([x.node for x in ss], [r1.node, r2.node, r3.node])
        time.sleep(max(s.secs, 4.0))
        net.heal()
        s.phase("after")
        time.sleep(max(s.secs, 3.0))
        masters = [x.master() for x in ss]
        # A failover the Sentinels began in the cut (they saw r1 down) may
        # end once it heals: then the nodes follow it.
        say("  sentinels name %s (r1 is %s, r2 %s)" % (masters, r1.addr, r2.addr))
        if any(m != (r1.addr, 6379) for m in masters):
            wait_serving([n1, n2], 30, "n1, n2 serving after the Sentinels' failover")
        load = s.load
        rep = s.finish()
        check(rep.phases["cut_servers"]["failed"] == 0,
              "requests failed while the Sentinels were cut from the servers: %s"
              % rep.phases["cut_servers"]["errors"])
        f = failed_of(load, "n1", "cut_leafd")
        check(set(f) <= REFUSALS, "n1's refusals while no Sentinel confirmed its master: %s" % f)


def old_master_back(s, r1, n):
    """[back] r1 restarted empty, a master until Sentinel makes it a
    replica; n restarted meanwhile. No leafd may run a script on r1."""
    s.phase("back")
    r1.start()
    restart(n, "r1 back")
    wait_for(lambda: r1.role() == "slave", 60, step=0.2, what="r1 a replica again")
    say("  r1 is a replica of %s" % r1.info().get("master_host"))
    wait_serving([n], 30, "%s serving" % n.node.name)
    time.sleep(s.secs)
    stats = r1.cmd("INFO", "commandstats")
    check("cmdstat_eval:" not in stats, "a leafd ran a script on r1 after its restart: %s"
          % [x for x in stats.splitlines() if "eval" in x])


def sc_back(s):
    with s.network() as net:
        (r1, r2, r3), ss, n1, n2 = s.calm(net)
        s.phase("failover")
        r1.kill9()
        wait_master(ss, r2, 60)
        time.sleep(s.secs)
        old_master_back(s, r1, n2)
        s.phase("after", s.secs)
        s.finish()


def sc_split(s):
    with s.network() as net:
        (r1, r2, r3), ss = s.servers(net)
        url = (lambda r: "redis://%s:6379" % r.addr) if s.control else (lambda r: None)
        n1 = s.leafd(net, "n1", ss, url(r1)).start()
        wait_serving([n1], 60, "n1 serving")
        n2 = s.leafd(net, "n2", ss, url(r1)).start()
        wait_serving([n2], 60, "n2 serving")
        n3 = s.leafd(net, "n3", ss, url(r2))
        say("  worker IDs: n1 %s, n2 %s" % (worker(n1), worker(n2)))
        s.start_load([n1, n2])
        s.phase("calm", s.secs)
        s.phase("split")
        others = [r2.node, n2.node, n3.node] + [x.node for x in ss]
        net.partition([r1.node, r3.node, n1.node], others)
        t = time.time()
        wait_master(ss, r2, 60)
        say("  r2 promoted %.1f s into the split" % (time.time() - t))
        s.phase("taken")
        n3.start()
        s.load.add(n3.client())
        t = time.time()
        wait_serving([n3], 60, "n3 serving")
        say("  n3 serving %.1f s after its start, worker ID %s" % (time.time() - t, worker(n3)))
        time.sleep(max(s.secs, 3.0))
        s.phase("after")
        net.heal()
        time.sleep(s.secs)
        s.finish()


SCENARIOS = {"kill": sc_kill, "sentinel": sc_sentinel, "back": sc_back, "split": sc_split}
CONTROLS = ("split",)
SHORT = ("kill", "sentinel", "split")     # kill ends as back does


def main():
    args = parser(LEAFD).parse_args()
    if args.phase_secs is None:
        args.phase_secs = 2.0 if args.short else 20.0
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        msg = "redis-server/redis-cli missing (sh .ci/deps.sh test)"
        print(("FAIL " if in_ci() else "SKIP ") + msg)
        return 1 if in_ci() else 0
    if args.short and not args.only:
        args.only = ",".join(SHORT)
    code, args.grpc = preflight("sentinel.py")
    if code is not None:
        return code
    args.leafd = os.path.abspath(args.leafd)
    return run(args)


def run(args):
    return run_all(args, SCENARIOS, CONTROLS, Scenario, say)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    sys.exit(main())
