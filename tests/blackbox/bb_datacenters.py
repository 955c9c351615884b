"""Black-box tests of several datacenters (issue 29, section 3): two
"datacenters", each with a ZooKeeper of its own and two leafd nodes under
load, every snowflake ID of every client checked (tests/lib/idcheck.py):
no ID twice across both, every ID's worker (and datacenter) field inside
its datacenter's, and a node more than its datacenter's range holds
refused at start, naming the range, never given an ID of the other's.
Both ways of keeping them apart: worker ID ranges on Leaf's default layout
(snowflake.worker_id_min/_max; DC A's range narrowed to 510..511 so that two
nodes fill it, DC B 512..1023, whose first node advances its ZooKeeper's
sequence counter to 512) and datacenter bits (5 datacenter, 5 worker bits,
datacenter_id 1 and 2, each range 0..1). The positive control: the same two
ZooKeepers without ranges (Leaf#187's setup) repeat IDs.
Also each source's range alone: static and --check-config refusals (a range
that does not fit the layout, min > max, a static worker ID outside it), k8s
(ordinal + offset outside the range refused), Redis and MySQL (the lowest
free inside the range, a full range refused as "all in use" with the
range); /health and /snowflake/state show the range and datacenter ID."""
import os
import sys
import time

from bbutil import Workdir, check, eq, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import idcheck  # noqa: E402

TESTS = [
    "test_two_datacenters_worker_ranges",
    "test_two_datacenters_datacenter_bits",
    "test_range_static_and_check_config",
    "test_range_k8s",
    "test_range_redis",
    "test_range_mysql",
]

# Fault-free, but each starts two ZooKeepers (or a MariaDB) and runs load for
# seconds: the plain lane only (check_workerid* run the claims under ASan).
PLAIN_ONLY = {
    "test_two_datacenters_worker_ranges",
    "test_two_datacenters_datacenter_bits",
    "test_range_mysql",
}

LOAD_S = float(os.environ.get("DC_LOAD_SECS", "4"))
# short gates: a new forever gates on its creation + fence_step + max_borrow
# + max_clock_offset (workerid_zk.c); a fence write may take a quarter of
# the fence step (a busy machine made 125 ms, with 500 ms steps, too short)
FAST = ["--snowflake.fence_step_ms=2000", "--snowflake.max_borrow_ms=100",
        "--snowflake.max_clock_offset_ms=1000", "--snowflake.heartbeat_ms=200"]
# 503s a slow ZooKeeper write may cause (the fence not yet confirmed), which
# say nothing about the ranges: allowed, counted
SLOW_STORE = {"fence_unconfirmed", "fence_pending"}


def zk_node(wd, zk, name, ip, extra, leaf_name="dc"):
    flags = ["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
             "--leaf.name=%s" % leaf_name,
             "--leaf.snowflake.zk.address=%s" % zk.address,
             "--snowflake.ip=%s" % ip, "--leaf.snowflake.port=7000",
             "--snowflake.cache_file=%s.json" % name] + FAST + list(extra)
    return wd.leafd(flags=flags, name=name)


def state(d):
    r = d.get("/snowflake/state")
    eq(r.status, 200, "state")
    return r.json()


def serving(d):
    wait_for(lambda: d.get("/snowflake").status == 200, timeout=30, step=0.1,
             what="%s serving snowflake IDs" % d.name)


def fields(i, dc_bits, worker_bits=10, seq_bits=12):
    """(datacenter, worker) of snowflake ID i."""
    worker = (i >> seq_bits) & ((1 << worker_bits) - 1)
    dc = (i >> (seq_bits + worker_bits)) & ((1 << dc_bits) - 1) if dc_bits else 0
    return dc, worker


def run_load(dcs, secs, mid=None):
    """dcs: {label: [leafd]}; load on every node of every DC for secs (mid()
    called halfway, under load); {label: Report}, and the duplicates across
    all of them."""
    loads = {}
    for label, nodes in dcs.items():
        loads[label] = idcheck.Load([(d.name, "127.0.0.1", {"http": d.port}) for d in nodes],
                                    "sf", kinds=("sf",), pause=0.002).start()
        loads[label].phase("load")
    time.sleep(secs / 2)
    if mid is not None:
        mid()
    time.sleep(secs / 2)
    for ld in loads.values():
        ld.stop()
    allids = sorted(i for ld in loads.values() for a in ld.ids for i in a)
    dups = sum(1 for a, b in zip(allids, allids[1:]) if a == b)
    return loads, dups, len(allids)


def ids_of(load):
    return [i for a in load.ids for i in a]


def check_reports(loads):
    for label, ld in loads.items():
        rep = ld.report()
        check(not rep.bad, "DC %s: bad answers %r" % (label, rep.bad[:3]))
        p = rep.phases["load"]
        other = {k: v for k, v in p["errors"].items() if k not in SLOW_STORE}
        eq(other, {}, "DC %s: failed requests other than a slow fence write" % label)
        check(rep.issued > 0 and p["failed"] * 10 < p["requests"],
              "DC %s issued IDs, most requests served (%r)" % (label, p["errors"]))
        print("  DC %s: %d IDs, %d requests, %d failed, p99 %.1f ms, longest wait %.2f s"
              % (label, rep.issued, p["requests"], p["failed"], p["p99_ms"],
                 p["longest_wait_s"]))


def full_refused(extra_node, lo, hi):
    rc = extra_node.start(expect_fail=True)
    log = extra_node.log()
    check(rc != 0 and "no free worker ID" in log and
          "past this node's range %d..%d" % (lo, hi) in log,
          "a node past the full range %d..%d refused at start: rc %r %s" % (lo, hi, rc, log))


def test_two_datacenters_worker_ranges(ctx):
    with Workdir("dc-ranges") as wd:
        zka, zkb = wd.zookeeper("zk-a"), wd.zookeeper("zk-b")
        ra, rb = (510, 511), (512, 1023)
        rng = lambda r: ["--snowflake.worker_id_min=%d" % r[0],  # noqa: E731
                         "--snowflake.worker_id_max=%d" % r[1]]
        a = [zk_node(wd, zka, "a%d" % i, "10.8.1.%d" % i, rng(ra)).start() for i in range(2)]
        b = [zk_node(wd, zkb, "b%d" % i, "10.8.2.%d" % i, rng(rb)).start() for i in range(2)]
        for d in a + b:
            serving(d)
        wa = sorted(state(d)["worker_id"] for d in a)
        wb = sorted(state(d)["worker_id"] for d in b)
        eq(wa, [510, 511], "DC A's nodes: the top of its range (ZooKeeper A's counter advanced)")
        eq(wb, [512, 513], "DC B's nodes: the first of its range (ZooKeeper B's counter advanced)")
        st = state(a[0])
        eq((st["worker_id_min"], st["worker_id_max"]), ra, "state shows the range")
        h = a[0].get("/health").json()["snowflake"]
        eq((h["worker_id_min"], h["worker_id_max"], h["worker_id"] in ra), ra + (True,),
           "/health shows the worker ID and the range: %r" % h)
        extra = zk_node(wd, zka, "a-extra", "10.8.1.9", rng(ra))
        t0 = time.time()
        loads, dups, n = run_load({"A": a, "B": b}, LOAD_S,
                                  mid=lambda: full_refused(extra, *ra))
        check_reports(loads)
        eq(dups, 0, "no ID twice across the two datacenters (%d IDs)" % n)
        for label, r in (("A", ra), ("B", rb)):
            bad = [i for i in ids_of(loads[label]) if not r[0] <= fields(i, 0)[1] <= r[1]]
            eq(len(bad), 0, "DC %s: every ID's worker field inside %r (e.g. %r)" % (label, r, bad[:3]))
        print("  ranges: %d IDs, 0 duplicates, the third node of DC A refused (%.1f s)"
              % (n, time.time() - t0))
        for d in a + b:
            eq(d.stop(), 0, "clean stop")

        # The positive control: the same two ZooKeepers, no ranges (each
        # datacenter's counter starts at 0, as in Leaf#187): IDs repeat.
        ca = [zk_node(wd, zka, "ca%d" % i, "10.8.3.%d" % i, [], "ctl").start() for i in range(2)]
        cb = [zk_node(wd, zkb, "cb%d" % i, "10.8.4.%d" % i, [], "ctl").start() for i in range(2)]
        for d in ca + cb:
            serving(d)
        eq(sorted(state(d)["worker_id"] for d in ca), sorted(state(d)["worker_id"] for d in cb),
           "without ranges both datacenters hand out the same worker IDs")
        _, cdups, cn = run_load({"A": ca, "B": cb}, 2.0)
        check(cdups > 0, "positive control: without ranges the two datacenters repeat IDs "
              "(%d IDs, %d duplicates)" % (cn, cdups))
        print("  positive control (no ranges): %d IDs, %d duplicates" % (cn, cdups))


def test_two_datacenters_datacenter_bits(ctx):
    with Workdir("dc-bits") as wd:
        zka, zkb = wd.zookeeper("zk-a"), wd.zookeeper("zk-b")
        lay = ["--snowflake.datacenter_bits=5", "--snowflake.worker_bits=5",
               "--snowflake.worker_id_max=1"]
        a = [zk_node(wd, zka, "a%d" % i, "10.9.1.%d" % i,
                     lay + ["--snowflake.datacenter_id=1"]).start() for i in range(2)]
        b = [zk_node(wd, zkb, "b%d" % i, "10.9.2.%d" % i,
                     lay + ["--snowflake.datacenter_id=2"]).start() for i in range(2)]
        for d in a + b:
            serving(d)
        for label, nodes, dc in (("A", a, 1), ("B", b, 2)):
            sts = [state(d) for d in nodes]
            eq(sorted(s["worker_id"] for s in sts), [0, 1],
               "DC %s: worker IDs 0 and 1 (the same as the other's)" % label)
            eq({(s["datacenter_id"], s["worker_id_min"], s["worker_id_max"]) for s in sts},
               {(dc, 0, 1)}, "DC %s: datacenter ID and range in the state" % label)
            h = nodes[0].get("/health").json()["snowflake"]
            eq(h["datacenter_id"], dc, "/health shows the datacenter ID: %r" % h)
        extra = zk_node(wd, zkb, "b-extra", "10.9.2.9", lay + ["--snowflake.datacenter_id=2"])
        loads, dups, n = run_load({"A": a, "B": b}, LOAD_S,
                                  mid=lambda: full_refused(extra, 0, 1))
        check_reports(loads)
        eq(dups, 0, "no ID twice across the two datacenters (%d IDs)" % n)
        for label, dc in (("A", 1), ("B", 2)):
            bad = [i for i in ids_of(loads[label])
                   if fields(i, 5, worker_bits=5) not in ((dc, 0), (dc, 1))]
            eq(len(bad), 0, "DC %s: every ID has datacenter %d and worker 0..1 (e.g. %r)"
               % (label, dc, bad[:3]))
        print("  datacenter bits: %d IDs, 0 duplicates, the third node of DC B refused" % n)


def test_range_static_and_check_config(ctx):
    with Workdir("dc-static") as wd:
        base = ["--leaf.segment.enable=false", "--leaf.snowflake.enable=true"]
        for extra, want in (
                (["--snowflake.worker_id_max=1024"],
                 "snowflake.worker_id_max 1024 does not fit in 10 worker bits"),
                (["--snowflake.worker_bits=8", "--snowflake.sequence_bits=14",
                  "--snowflake.worker_id_min=300"],
                 "snowflake.worker_id_min 300 is above snowflake.worker_id_max 255"),
                (["--snowflake.worker_id_min=600", "--snowflake.worker_id_max=500"],
                 "snowflake.worker_id_min 600 is above snowflake.worker_id_max 500"),
                (["--snowflake.worker_id_min=512", "--snowflake.worker_id=3"],
                 "snowflake.worker_id 3 is outside snowflake.worker_id_min.."
                 "snowflake.worker_id_max (512..1023)")):
            d = wd.leafd(flags=base + extra + ["--check-config"], name="cc")
            rc = d.start(expect_fail=True)
            check(rc == 2 and want in d.log(), "--check-config %r: rc %r %s" % (extra, rc, d.log()))
            d = wd.leafd(flags=base + extra, name="start")
            rc = d.start(expect_fail=True)
            check(rc != 0 and want in d.log(), "start %r refused: rc %r %s" % (extra, rc, d.log()))
        d = wd.leafd(flags=base + ["--snowflake.worker_id_min=512", "--snowflake.worker_id=700",
                                   "--snowflake.cache_file=s.json"], name="ok").start()
        st = state(d)
        eq((st["worker_id"], st["worker_id_min"], st["worker_id_max"]), (700, 512, 1023),
           "static worker ID inside the range, shown with it")
        ids = d.get("/snowflake?count=100").ids()
        eq({fields(i, 0)[1] for i in ids}, {700}, "IDs carry worker 700")


def test_range_k8s(ctx):
    with Workdir("dc-k8s") as wd:
        base = ["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
                "--snowflake.worker_source=k8s", "--snowflake.k8s.ordinal_env=POD",
                "--snowflake.k8s.ordinal_offset=500", "--snowflake.worker_id_min=500",
                "--snowflake.worker_id_max=502", "--snowflake.cache_file=k.json"]
        d = wd.leafd(flags=base, env={"POD": "leafd-3"}, name="k3")
        rc = d.start(expect_fail=True)
        check(rc != 0 and "worker ID 503 is outside snowflake.worker_id_min..worker_id_max "
              "(500..502)" in d.log(), "pod ordinal 3 + 500 refused: rc %r %s" % (rc, d.log()))
        d = wd.leafd(flags=base, env={"POD": "leafd-2"}, name="k2").start()
        st = state(d)
        eq((st["worker_id"], st["worker_id_min"], st["worker_id_max"]), (502, 500, 502),
           "pod ordinal 2 + 500 inside the range")


def store_range(wd, flags, label):
    """Three nodes on a range of two (2..3, worker_bits 2): the two IDs of
    the range, the third refused naming it."""
    rng = ["--snowflake.worker_id_min=2", "--snowflake.worker_id_max=3"]
    nodes = [wd.leafd(flags=flags("10.7.0.%d" % i) + rng, name="n%d" % i).start()
             for i in range(2)]
    eq(sorted(state(d)["worker_id"] for d in nodes), [2, 3], "%s: the range's two IDs" % label)
    third = wd.leafd(flags=flags("10.7.0.9") + rng, name="n9")
    rc = third.start(expect_fail=True)
    check(rc != 0 and "all 2 (2..3) are in use" in third.log() and
          "snowflake.worker_id_min..worker_id_max" in third.log(),
          "%s: a third node refused, naming the range: rc %r %s" % (label, rc, third.log()))
    ids = set()
    for d in nodes:
        got = d.get("/snowflake?count=1000").ids()
        eq(len(got), 1000, "1000 IDs")
        check(all(fields(i, 0, worker_bits=2, seq_bits=20)[1] in (2, 3) for i in got),
              "%s: every ID inside the range" % label)
        ids.update(got)
    eq(len(ids), 2000, "%s: no ID twice" % label)


def test_range_redis(ctx):
    with Workdir("dc-redis") as wd:
        r = wd.redis(epoch0=[(2, "leafd:snowflake:")])
        store_range(wd, lambda ip: [
            "--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
            "--snowflake.worker_source=redis",
            "--snowflake.redis.url=redis://127.0.0.1:%d/2" % r.port,
            "--snowflake.ip=%s" % ip, "--leaf.snowflake.port=7000",
            "--snowflake.cache_file=%s.json" % ip, "--snowflake.takeover_age_ms=4000",
            "--snowflake.fence_step_ms=500", "--snowflake.heartbeat_ms=200",
            "--snowflake.worker_bits=2", "--snowflake.sequence_bits=20"], "redis")


def test_range_mysql(ctx):
    with Workdir("dc-mysql") as wd:
        db = wd.mariadb().worker_epoch0()
        store_range(wd, lambda ip: [
            "--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
            "--snowflake.worker_source=mysql",
            "--snowflake.mysql.url=mysql://root@127.0.0.1:%d/leaf" % db.port,
            "--snowflake.ip=%s" % ip, "--leaf.snowflake.port=7000",
            "--snowflake.cache_file=%s.json" % ip, "--snowflake.takeover_age_ms=8000",
            "--snowflake.fence_step_ms=500", "--snowflake.heartbeat_ms=200",
            "--snowflake.worker_bits=2", "--snowflake.sequence_bits=20"], "mysql")
