"""Black-box tests of the shared-store worker ID sources against the real
binary: snowflake.worker_source = redis with a redis-server started on a
free port (bbutil.Redis) (three nodes, three worker IDs; a restart keeps its
ID; a twin identity refused; one past the layout refused with the count in
use; Redis stopped: IDs within the lease, then 503; /snowflake/state and
/metrics), and k8s from a pod name, alone and with its fence also in Redis
(snowflake.k8s.fence_store = redis: held by the pod name, a restart without
its cache file still gated by the store's fence, another pod on that worker
ID refused, Redis down at start and while running) and in MySQL (a
throwaway MariaDB); a new Redis store (no epoch key) or a new leaf_worker
table (no epoch row) makes the first claim wait past its epoch +
fence_step + max_borrow + max_clock_offset, with 503 fence_not_passed
meanwhile (its message naming the new-store gate); a pod's identity in the
store is <namespace>/<pod> (an upgrade from the bare pod name keeps its
worker ID, the same name in another namespace is refused). Without
redis-server or MariaDB those tests skip (under CI=1 they fail)."""
import os
import time

from bbutil import Workdir, check, eq, wait_for

TESTS = [
    "test_redis_three_nodes_restart_twin_max",
    "test_redis_outage_then_503",
    "test_redis_new_store_waits",
    "test_k8s_ordinal",
    "test_k8s_fence_in_redis",
    "test_k8s_fence_in_mysql",
    "test_mysql_new_table_waits",
    "test_k8s_fence_store_down",
    "test_k8s_namespaces_in_redis",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): store outages, bound by their waits (check_workerid_store runs them
# under ASan).
PLAIN_ONLY = {
    "test_k8s_fence_in_mysql",
    "test_mysql_new_table_waits",
    "test_redis_outage_then_503",
}


# A new store's first claims wait until its epoch + fence_step + max_borrow
# + max_clock_offset (6.5 s with these flags) before issuing. Only
# test_redis_new_store_waits and test_mysql_new_table_waits are about that;
# the others start as on a store whose epoch the operator set to 0 (new,
# nothing ever issued from it): these Redis keys, MariaDB.worker_epoch0().
EPOCH0 = [(2, "leafd:snowflake:")]


def node(wd, r, ip, extra=None, name=None):
    flags = ["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
             "--snowflake.worker_source=redis",
             "--snowflake.redis.url=redis://127.0.0.1:%d/2" % r.port,
             "--snowflake.ip=%s" % ip, "--leaf.snowflake.port=7000",
             "--snowflake.cache_file=%s.json" % (name or ip),
             "--snowflake.takeover_age_ms=4000",
             "--snowflake.fence_step_ms=500", "--snowflake.heartbeat_ms=200",
             "--snowflake.worker_bits=2", "--snowflake.sequence_bits=20"]
    # extra replaces the defaults above that it names
    named = {e.split("=", 1)[0] for e in extra or []}
    flags = [f for f in flags if f.split("=", 1)[0] not in named] + (extra or [])
    return wd.leafd(flags=flags, name=name or ip)


def state(d):
    r = d.get("/snowflake/state")
    eq(r.status, 200, "state")
    return r.json()


def test_redis_three_nodes_restart_twin_max(ctx):
    with Workdir("wid-redis") as wd:
        r = wd.redis(epoch0=EPOCH0)
        nodes = [node(wd, r, "10.1.0.%d" % i).start() for i in range(3)]
        ws = sorted(state(d)["worker_id"] for d in nodes)
        eq(ws, [0, 1, 2], "three nodes, three worker IDs")
        st = state(nodes[0])
        eq(st["source"], "redis", "source")
        eq(st["store"], "redis", "store")
        check(st["store_fence_ms"] >= st["fence"] - 1 and st["lease_expires_ms"] > 0,
              "fence in the store and lease expiry shown: %r" % st)
        m = nodes[0].get("/metrics").text
        check('leafd_snowflake_heartbeat_age_seconds{source="redis"}' in m,
              "heartbeat age per source")
        check('leafd_snowflake_clock_offset_ms{source="redis"}' in m, "clock offset")
        ids = set()
        for d in nodes:
            got = d.get("/snowflake?count=1000").ids()
            eq(len(got), 1000, "1000 IDs")
            ids.update(got)
        eq(len(ids), 3000, "no ID twice across the nodes")
        # a restart keeps its ID
        w1 = state(nodes[1])["worker_id"]
        eq(nodes[1].stop(), 0, "clean stop")
        nodes[1] = node(wd, r, "10.1.0.1").start()
        eq(state(nodes[1])["worker_id"], w1, "restart keeps its worker ID")
        # a twin (same ip:port, another cache file) is refused
        twin = node(wd, r, "10.1.0.0", name="twin")
        rc = twin.start(expect_fail=True)
        check(rc != 0 and "is in use" in twin.log(), "twin refused: %s" % twin.log())
        # 2 worker bits: a fourth node is fine, a fifth is refused
        fourth = node(wd, r, "10.1.0.3").start()
        eq(state(fourth)["worker_id"], 3, "the fourth ID")
        fifth = node(wd, r, "10.1.0.4")
        rc = fifth.start(expect_fail=True)
        check(rc != 0 and "all 4 (0..3) are in use" in fifth.log(),
              "one past the maximum: %s" % fifth.log())


def refused_by(d, t0, limit):
    """A check for wait_for: d refuses IDs. A request sent limit s or more
    after t0 that is still served goes into the list returned, which must
    end empty: the time a request is sent, not the time its answer is seen,
    so that a busy machine holding the test up cannot fail it."""
    late = []

    def refused():
        sent = time.time()
        st = d.get("/snowflake").status
        if st == 503:
            return True
        if st == 200 and sent - t0 >= limit:
            late.append(round(sent - t0, 1))
        check(st == 200, "an ID or a 503, not %d" % st)
        return False
    return refused, late


def test_redis_outage_then_503(ctx):
    # A 24 s lease and 6 s fence steps, not node()'s 4 s and 0.5 s: "served
    # right after the outage" must hold however long redis-server takes to
    # stop on a busy machine, and the test is held up (the fence Redis holds
    # is 3 to 6 s ahead; with 0.5 s fence steps, and with 3 s, it was not).
    with Workdir("wid-redis-down") as wd:
        r = wd.redis(epoch0=EPOCH0)
        d = node(wd, r, "10.2.0.1", extra=["--snowflake.takeover_age_ms=24000",
                                           "--snowflake.fence_step_ms=6000"]).start()
        eq(d.get("/snowflake").status, 200, "serving")
        r.stop()
        t0 = time.time()
        # within the lease: still served (up to the fence Redis holds)
        eq(d.get("/snowflake").status, 200, "served right after the outage")

        refused, late = refused_by(d, t0, 12.0)
        wait_for(refused, 40, what="503 once past the fence / half the lease")
        check(not late, "stopped within half the 24 s lease: served requests "
              "sent %r s after the outage" % late)
        j = d.get("/snowflake").json()
        check(j["error"] in ("fence_unconfirmed", "worker_lease_expired"),
              "a JSON 503 that says why: %r" % j)
        st = state(d)
        check(st["last_error"], "the store's error shown")


def test_redis_new_store_waits(ctx):
    """No epoch key: the first claim sets it to Redis's TIME and gates worker
    ID 0 (no hash) on epoch + 500 + 1000 + 500 ms: 503 fence_not_passed, the
    gate in /snowflake/state's start_fence and one log line, then IDs above
    the gate."""
    with Workdir("wid-redis-epoch") as wd:
        r = wd.redis()
        t0 = time.time()
        d = node(wd, r, "10.3.0.1", extra=["--snowflake.max_clock_offset_ms=500"]).start()
        # leafd may listen before its first claim has set the epoch
        epoch = int(wait_for(lambda: r.cli("-n", "2", "GET", "leafd:snowflake:epoch"),
                             30, what="the epoch key"))
        # set between the start and now (give or take clocks), however long
        # the start took
        check(t0 * 1000 - 5000 < epoch < time.time() * 1000 + 5000,
              "epoch is about now: %d (start at %d)" % (epoch, t0 * 1000))
        gated_on_epoch(d, "redis", 0, epoch)


def test_k8s_ordinal(ctx):
    with Workdir("wid-k8s") as wd:
        d = wd.leafd(flags=["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
                            "--snowflake.worker_source=k8s",
                            "--snowflake.k8s.ordinal_env=MY_POD",
                            "--snowflake.k8s.ordinal_offset=10"],
                     env={"MY_POD": "leafd-5"}).start()
        st = state(d)
        eq(st["worker_id"], 15, "ordinal + offset")
        eq(st["source"], "k8s", "source")
        bad = wd.leafd(flags=["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
                              "--snowflake.worker_source=k8s",
                              "--snowflake.k8s.ordinal_env=MY_POD"],
                       env={"MY_POD": "leafd"}, name="bad")
        rc = bad.start(expect_fail=True)
        check(rc != 0 and "StatefulSet ordinal" in bad.log(), "no ordinal: %s" % bad.log())


def pod(wd, r, name, pod_name, offset=10, db=None, extra=None):
    """A k8s pod whose fence is also in Redis r, or in MariaDB db."""
    store = ["--snowflake.k8s.fence_store=mysql", "--snowflake.mysql.url=%s" % db.url] \
        if db is not None else \
        ["--snowflake.k8s.fence_store=redis",
         "--snowflake.redis.url=redis://127.0.0.1:%d/2" % r.port]
    flags = ["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
             "--snowflake.worker_source=k8s",
             "--snowflake.k8s.ordinal_env=MY_POD",
             "--snowflake.k8s.ordinal_offset=%d" % offset] + store + [
             "--snowflake.cache_file=%s.json" % name,
             "--snowflake.takeover_age_ms=4000",
             "--snowflake.fence_step_ms=500", "--snowflake.heartbeat_ms=200",
             # 2 IDs per ms: a batch of 2000 borrows about 1 s ahead
             "--snowflake.worker_bits=21", "--snowflake.sequence_bits=1",
             "--snowflake.count_max=2000"] + (extra or [])
    return wd.leafd(flags=flags, env={"MY_POD": pod_name}, name=name)


def id_ms(i):
    """An ID's timestamp (21 worker bits + 1 sequence bit, Leaf's epoch)."""
    return (i >> 22) + 1288834974657


def first_ids(d, count, what):
    """The first batch of count snowflake IDs d serves, waiting (up to 10 s)
    while it answers 503."""
    got = []

    def served():
        resp = d.get("/snowflake?count=%d" % count)
        if resp.status == 200:
            got.extend(resp.ids())
            return True
        return False
    wait_for(served, 10, what=what)
    return got


def gated_on_epoch(d, store, worker, epoch):
    """d claimed worker (no record in store) on a new store whose epoch is
    epoch, with fence_step 500 + max_borrow 1000 + max_clock_offset 500:
    gated at epoch + 2000 ms (start_fence, 503 fence_not_passed before it,
    one log line), then IDs above the gate."""
    st = state(d)
    eq(st["worker_id"], worker, "worker ID %d" % worker)
    eq(st["start_fence"], epoch + 2000, "gate: epoch + 2000 ms")
    resp = d.get("/snowflake")
    if time.time() * 1000 < epoch + 1900:
        eq(resp.status, 503, "nothing before the gate")
        eq(resp.json()["error"], "fence_not_passed", "why")
        msg = resp.json()["message"]
        check("new/wiped-store epoch gate %d" % (epoch + 2000) in msg and
              "may have been issued" not in msg and
              ("SET " if store == "redis" else "UPDATE leaf_worker") in msg,
              "the 503 names the new-store gate and how to skip it: %s" % msg)
    check("%s has no record of worker ID %d since %d" % (store, worker, epoch) in d.log(),
          "the wait logged: %s" % d.log())
    got = first_ids(d, 10, "IDs once past the gate")
    check(min(id_ms(i) for i in got) > epoch + 2000, "IDs above the gate")


def k8s_fence_in_store(wd, r, db):
    """Held by the pod name; a restart without its cache file is gated by the
    store's fence; another pod on that worker ID is refused."""
    d = pod(wd, r, "web2", "web-2", db=db).start()
    st = state(d)
    eq(st["worker_id"], 12, "ordinal + offset")
    eq(st["source"], "k8s", "source")
    eq(st["store"], "mysql" if db else "redis", "store")
    eq(st["identity"], "web-2", "identity: the pod name")
    if db is not None:
        eq(db.sql("SELECT identity FROM leaf_worker WHERE worker_id = 12").strip(),
           "web-2", "leaf_worker holds worker ID 12 for the pod")
    else:
        eq(r.cli("-n", "2", "HGET", "leafd:snowflake:w:12", "identity"), "web-2",
           "redis holds worker ID 12 for the pod")
    return d


def test_k8s_fence_in_redis(ctx):
    with Workdir("wid-k8s-redis") as wd:
        k8s_restart_and_refusal(wd, wd.redis(epoch0=EPOCH0), None)


def test_k8s_fence_in_mysql(ctx):
    with Workdir("wid-k8s-mysql") as wd:
        k8s_restart_and_refusal(wd, None, wd.mariadb().worker_epoch0())


def test_mysql_new_table_waits(ctx):
    """No leaf_worker table: the pod's first claim creates it, sets the epoch
    row to the server's NOW(3) and gates worker ID 12 (no row) on epoch +
    500 + 1000 + 500 ms: 503 fence_not_passed, the gate in /snowflake/state's
    start_fence and one log line, then IDs above the gate."""
    with Workdir("wid-mysql-epoch") as wd:
        db = wd.mariadb()
        t0 = time.time()
        d = pod(wd, None, "web2", "web-2", db=db,
                extra=["--snowflake.max_clock_offset_ms=500"]).start()
        # leafd listens before its first claim has committed
        epoch = int(wait_for(lambda: db.sql("SELECT fence_ms FROM leaf_worker WHERE"
                                            " worker_id = -1 AND identity = '~epoch'")
                             .strip(), 30, step=0.1, what="the epoch row"))
        # set between the start and now (give or take clocks), however long
        # the start took
        check(t0 * 1000 - 5000 < epoch < time.time() * 1000 + 5000,
              "epoch is about now: %d (start at %d)" % (epoch, t0 * 1000))
        gated_on_epoch(d, "mysql", 12, epoch)


def k8s_restart_and_refusal(wd, r, db):
    """A pod killed and back without its cache file (a new volume) waits
    past the store's fence; another pod on its worker ID is refused."""
    d = k8s_fence_in_store(wd, r, db)
    first = d.get("/snowflake?count=2000").ids()
    eq(len(first), 2000, "2000 IDs")
    # issued ahead of the clock, so a restart without a gate would reuse
    # their timestamps
    check(id_ms(max(first)) > time.time() * 1000,
          "the last ID is ahead of the clock: %d" % id_ms(max(first)))
    # the pod dies and comes back on a new volume: no cache file
    d.kill9()
    os.unlink(os.path.join(wd.path, "web2.json"))
    d = pod(wd, r, "web2", "web-2", db=db).start()
    eq(state(d)["worker_id"], 12, "the same worker ID")
    got = first_ids(d, 100, "IDs after the restart")
    check(min(got) > max(first),
          "gated by the store's fence: %d <= %d" % (min(got), max(first)))
    # another StatefulSet whose offset overlaps: worker ID 12 again
    other = pod(wd, r, "api0", "api-0", offset=12, db=db)
    rc = other.start(expect_fail=True)
    check(rc != 0 and "worker ID 12 is held by web-2" in other.log(),
          "another pod refused, naming the holder: %s" % other.log())


def test_k8s_fence_store_down(ctx):
    with Workdir("wid-k8s-redis-down") as wd:
        r = wd.redis(epoch0=EPOCH0)
        port = r.port
        r.stop()
        d = pod(wd, r, "web0", "web-0").start()
        resp = d.get("/snowflake")
        eq(resp.status, 503, "no worker ID while Redis is down")
        eq(resp.json()["error"], "worker_id_unknown", "why")
        r.start()
        eq(r.port, port, "redis back on its port")

        def ok():
            return d.get("/snowflake").status == 200
        wait_for(ok, 10, what="IDs once Redis answers")
        eq(state(d)["worker_id"], 10, "ordinal + offset")
        r.stop()
        t0 = time.time()

        refused, late = refused_by(d, t0, 4.0)
        wait_for(refused, 30, what="503 once past the fence / half the lease")
        check(not late, "stopped within half the 4 s lease: served requests "
              "sent %r s after the outage" % late)
        j = d.get("/snowflake").json()
        check(j["error"] in ("fence_unconfirmed", "worker_lease_expired"),
              "a JSON 503 that says why: %r" % j)


def ns_pod(wd, r, name, ns):
    """pod() in namespace ns (snowflake.k8s.namespace_env, as the manifest's
    POD_NAMESPACE); ns None: no namespace known, the bare pod name."""
    d = pod(wd, r, name, "web-2")
    if ns is not None:
        d.flags.append("--snowflake.k8s.namespace_env=MY_NS")
        d.env["MY_NS"] = ns
    return d


def test_k8s_namespaces_in_redis(ctx):
    """Pod web-2 upgraded from the bare-name identity takes its own worker ID
    back at once as prod/web-2 (even from its last run's live lease); web-2 of
    namespace stage on the same store is refused, naming prod/web-2, and
    prod/web-2 keeps serving (before: each took the ID from the other)."""
    with Workdir("wid-k8s-ns") as wd:
        r = wd.redis(epoch0=EPOCH0)
        old = ns_pod(wd, r, "web2", None).start()
        eq(state(old)["identity"], "web-2", "no namespace: the bare pod name")
        eq(old.get("/snowflake").status, 200, "serving")
        old.kill9()                     # its lease still live
        prod = ns_pod(wd, r, "web2", "prod").start()
        st = state(prod)
        eq(st["identity"], "prod/web-2", "identity: namespace/pod")
        eq(st["worker_id"], 12, "its own worker ID back")
        eq(r.cli("-n", "2", "HGET", "leafd:snowflake:w:12", "identity"), "prod/web-2",
           "redis holds worker ID 12 for prod/web-2")
        first_ids(prod, 10, "IDs from prod/web-2")
        stage = ns_pod(wd, r, "web2-stage", "stage")
        rc = stage.start(expect_fail=True)
        check(rc != 0 and "held by prod/web-2" in stage.log() and
              "stage/web-2 cannot have it" in stage.log(),
              "the same pod name in another namespace refused: %s" % stage.log())
        eq(prod.get("/snowflake").status, 200, "prod/web-2 still serving")
        eq(prod.stop(), 0, "clean stop")
