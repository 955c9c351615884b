"""Black-box tests of snowflake mode: the static default, decoding, a real
ZooKeeper for worker IDs, and the clock stepped back with libfaketime."""
import json
import os
import subprocess
import threading
import time

from bbutil import (LEAFD, Client, Workdir, check, eq, faketime_preload, wait_for)

TESTS = [
    "test_static_default",
    "test_decode_and_bad_input",
    "test_zk_three_nodes_distinct_worker_ids",
    "test_zk_restart_keeps_worker_id",
    "test_zk_java_leaf_node_reused",
    "test_zk_down_at_start_waits_for_it",
    "test_zk_stopped_and_restarted_while_serving",
    "test_clock_stepped_back_while_serving",
    "test_kill9_then_restart_with_clock_back",
    "test_takeover_race",
    "test_zk_release_on_stop_and_state",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): ZooKeeper outages and restarts, bound by their waits
# (check_workerid runs them under ASan).
PLAIN_ONLY = {
    "test_zk_three_nodes_distinct_worker_ids",
    "test_zk_down_at_start_waits_for_it",
    "test_zk_restart_keeps_worker_id",
    "test_zk_stopped_and_restarted_while_serving",
    "test_zk_java_leaf_node_reused",
}

def sf_conf(wd, name, **extra):
    conf = {"leaf.snowflake.enable": "true",
            "leaf.segment.enable": "false",
            "snowflake.ip": "127.0.0.1",
            "snowflake.cache_file": os.path.join(wd.path, "%s-cache.json" % name)}
    conf.update(extra)
    return conf


def zk_conf(wd, zk, name, **extra):
    conf = sf_conf(wd, name, **extra)
    conf["leaf.name"] = "bbtest"
    conf["leaf.snowflake.zk.address"] = zk.address
    return conf


def serving(d):
    """d's first 200 to /snowflake: a new node under a new forever (a fresh
    ZooKeeper) waits past its creation + fence step + borrow + clock limit
    (workerid_zk.c), 503 fence_not_passed meanwhile."""
    return wait_for(lambda: (lambda r: r if r.status == 200 else None)(d.get("/snowflake")),
                    timeout=30, step=0.1, what="the first IDs")


def state(d):
    r = d.get("/snowflake/state")
    eq(r.status, 200, "state status %r" % r)
    return r.json()


def decode(d, i):
    return d.get("/snowflake/decode/%d" % i).json()


def test_static_default(ctx):
    with Workdir("sfstatic") as wd:
        d = wd.leafd().start()
        r = d.get("/snowflake")
        eq(r.status, 200, "status")
        eq(r.header("Content-Type"), "text/plain", "content type")
        a = int(r.text)
        ids = d.get("/snowflake?count=4096").ids()
        eq(len(ids), 4096, "count=4096")
        check(all(x < y for x, y in zip(ids, ids[1:])), "increasing")
        check(ids[0] > a, "after the single ID")
        j = d.get("/snowflake?count=2", {"Accept": "application/json"}).json()
        check(all(isinstance(x, str) for x in j["ids"]) and len(j["ids"]) == 2, "json ids")
        r = d.get("/api/snowflake/get/anykey")
        eq(r.status, 200, "Leaf's path")
        check(int(r.text) > ids[-1], "Leaf's path increases")
        dec = decode(d, ids[0])
        eq(dec["worker_id"], 0, "static worker 0")
        check(abs(dec["timestamp"] - time.time() * 1000) < 10000, "timestamp is now-ish")
        st = state(d)
        eq(st["source"], "static", "source")
        check(st["fence"] > st["last_timestamp"], "the fence is ahead of the last timestamp")
        h = d.get("/health").json()
        eq(h["snowflake"]["status"], "ok", "health")
        m = d.get("/metrics").text
        check("leafd_snowflake_" in m, "snowflake metrics")
        check('leafd_leaf_snowflake_requests_total{key="anykey"} 1' in m, "Leaf key metric")
        # The layout is in the log.
        check("41 timestamp + 10 worker + 12 sequence" in d.log() and "runs out" in d.log(),
              "layout logged: %s" % d.log())


def test_decode_and_bad_input(ctx):
    with Workdir("sfdecode") as wd:
        d = wd.leafd().start()
        i = int(d.get("/snowflake").text)
        r = d.get("/decodeSnowflakeId?snowflakeId=%d" % i)
        eq(r.status, 200, "Leaf decode")
        j = r.json()
        check("timestamp" in j and "sequenceId" in j and "workerId" in j, "Leaf fields %r" % j)
        out = subprocess.run([LEAFD, "decode", str(i)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        eq(out.returncode, 0, "leafd decode")
        eq(json.loads(out.stdout)["id"], str(i), "CLI decodes the same")
        eq(json.loads(out.stdout), decode(d, i), "CLI and HTTP agree")
        for bad in ["abc", "-1", "99999999999999999999", "9223372036854775808",
                    "12a", "%00", "1.5", ""]:
            r = d.get("/snowflake/decode/" + bad)
            eq(r.status, 400, "decode %r: %r" % (bad, r))
            eq(r.json()["error"], "invalid_id", "code")
        r = d.get("/decodeSnowflakeId?snowflakeId=abc")
        eq(r.status, 400, "Leaf decode of a bad ID")
        out = subprocess.run([LEAFD, "decode", "-5"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        check(out.returncode != 0, "leafd decode -5 fails")
        for q in ["count=0", "count=4097", "count=x"]:
            r = d.get("/snowflake?" + q)
            eq(r.status, 400, q)
            eq(r.json()["error"], "invalid_count", q)
        d.stop()
        d2 = wd.leafd(conf={"leaf.segment.enable": "true"}, port=d.port).start()
        for path in ["/snowflake", "/api/snowflake/get/x", "/snowflake/decode/1",
                     "/snowflake/state"]:
            r = d2.get(path)
            eq(r.status, 404, path)
            eq(r.json()["error"], "mode_disabled", path)


def test_zk_three_nodes_distinct_worker_ids(ctx):
    with Workdir("zk3") as wd:
        zk = wd.zookeeper()
        nodes = [wd.leafd(conf=zk_conf(wd, zk, "n%d" % i), name="n%d" % i).start()
                 for i in range(3)]
        wids = [state(n)["worker_id"] for n in nodes]
        for n in nodes:
            serving(n)
        eq(len(set(wids)), 3, "three distinct worker IDs %r" % wids)
        for n, w in zip(nodes, wids):
            eq(state(n)["source"], "zookeeper", "source")
            eq(decode(n, int(n.get("/snowflake").text))["worker_id"], w, "IDs carry it")
        ls = zk.cli("ls", "/snowflake/bbtest/forever")
        for n in nodes:
            check("127.0.0.1:%d-" % n.port in ls, "node for port %d in %s" % (n.port, ls))
        ids = []
        for n in nodes:
            ids += n.get("/snowflake?count=1000").ids()
        eq(len(ids), len(set(ids)), "no duplicates across nodes")


def test_zk_restart_keeps_worker_id(ctx):
    with Workdir("zkrestart") as wd:
        zk = wd.zookeeper()
        d = wd.leafd(conf=zk_conf(wd, zk, "a"), name="a").start()
        w = state(d)["worker_id"]
        last = int(serving(d).text)
        eq(d.stop(), 0, "stop")
        d2 = wd.leafd(conf=zk_conf(wd, zk, "a"), name="a", port=d.port).start()
        eq(state(d2)["worker_id"], w, "same worker ID after restart")
        # A clean stop left the last timestamp issued as the fence (file and
        # node): no wait for the fence step.
        r = d2.get("/snowflake")
        eq(r.status, 200, "serves at once after a clean restart: %r" % r)
        check(int(r.text) > last, "IDs go on increasing")
        check("fence lowered" in d.log(), "the stop said so: %s" % d.log())


def test_zk_java_leaf_node_reused(ctx):
    with Workdir("zkjava") as wd:
        zk = wd.zookeeper()
        port = 31777
        # Exactly what Java Leaf's SnowflakeZookeeperHolder creates.
        zk.cli("create", "/snowflake", "")
        zk.cli("create", "/snowflake/bbtest", "")
        zk.cli("create", "/snowflake/bbtest/forever", "")
        for i in range(4):   # other nodes first, so the sequence is not 0
            zk.cli("create", "-s", "/snowflake/bbtest/forever/10.0.0.%d:8080-" % i,
                   '{"ip":"10.0.0.%d","port":"8080","timestamp":%d}' % (i, int(time.time() * 1000)))
        out = zk.cli("create", "-s", "/snowflake/bbtest/forever/127.0.0.1:%d-" % port,
                     '{"ip":"127.0.0.1","port":"%d","timestamp":%d}' % (port, int(time.time() * 1000)))
        check("Created" in out, "node created: %s" % out)
        d = wd.leafd(conf=zk_conf(wd, zk, "j", **{"leaf.snowflake.port": str(port)}),
                     name="j").start()
        st = state(d)
        eq(st["worker_id"], 4, "reuses Java Leaf's node (sequence 4): %r" % st)
        ls = zk.cli("ls", "/snowflake/bbtest/forever")
        eq(ls.count("127.0.0.1:%d-" % port), 1, "no second node: %s" % ls)


def test_zk_down_at_start_waits_for_it(ctx):
    # Without ZooKeeper no fence can be confirmed (another process could
    # inherit the worker ID and gate on the node), so the cache file's worker
    # ID is not used: 503 until ZooKeeper is back, then the same worker ID.
    with Workdir("zkdown") as wd:
        zk = wd.zookeeper()
        conf = zk_conf(wd, zk, "c", **{"snowflake.zk_session_timeout_ms": "2000"})
        d = wd.leafd(conf=conf, name="c").start()
        w = state(d)["worker_id"]
        last = int(serving(d).text)
        d.stop()
        zk.stop()
        d2 = wd.leafd(conf=conf, name="c", port=d.port).start()
        st = state(d2)
        eq(st["worker_id"], None, "no worker ID without ZooKeeper: %r" % st)
        r = d2.get("/snowflake")
        eq(r.status, 503, "refused: %r" % r)
        eq(r.json()["error"], "worker_id_unknown", "its code: %r" % r)
        zk.restart()
        r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(d2.get("/snowflake")),
                     timeout=30, what="serving once ZooKeeper is back")
        eq(state(d2)["worker_id"], w, "the same worker ID")
        check(int(r.text) > last, "increasing")


def test_zk_stopped_and_restarted_while_serving(ctx):
    with Workdir("zkbounce") as wd:
        zk = wd.zookeeper()
        conf = zk_conf(wd, zk, "b", **{"snowflake.heartbeat_ms": "300",
                                       "snowflake.zk_session_timeout_ms": "4000"})
        d = wd.leafd(conf=conf, name="b").start()
        node = state(d)["zk_node"]
        serving(d)
        ids, failures = [], []
        stop = threading.Event()

        def load():
            c = Client(d.port)
            while not stop.is_set():
                r = c.get("/snowflake?count=10")
                if r.status == 200:
                    ids.extend(r.ids())
                else:
                    failures.append(r.json().get("error"))
                time.sleep(0.005)
        t = threading.Thread(target=load)
        t.start()
        time.sleep(0.5)
        zk.stop()
        time.sleep(3)
        zk.restart()
        # The heartbeat resumes: the node's timestamp moves again.

        def heartbeat_ts():
            out = zk.cli("get", node)
            i = out.find('{"ip"')
            return json.loads(out[i:out.index("}", i) + 1])["timestamp"] if i >= 0 else 0
        t0 = int(time.time() * 1000)
        wait_for(lambda: heartbeat_ts() > t0, timeout=30, step=0.5, what="heartbeat after restart")
        stop.set()
        t.join()
        # Served up to the fence ZooKeeper holds, then refused with its own
        # code until a fence lands again; never anything else.
        check(set(failures) <= {"fence_unconfirmed"},
              "only fence_unconfirmed while ZooKeeper was down: %r" % set(failures))
        check("connection lost" in d.log() and "connected again" in d.log(),
              "the log says when ZooKeeper went and came back: %s" % d.log())
        eq(len(ids), len(set(ids)), "no duplicates")
        check(len(ids) > 100, "kept serving")


def faketime_env(path):
    return {"LD_PRELOAD": faketime_preload(os.path.dirname(path)),
            "FAKETIME_TIMESTAMP_FILE": path,
            "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def set_clock(path, offset):
    with open(path + ".tmp", "w") as f:
        f.write(offset + "\n")
    os.rename(path + ".tmp", path)


def test_clock_stepped_back_while_serving(ctx):
    with Workdir("sfclock") as wd:
        ft = os.path.join(wd.path, "faketime.rc")
        set_clock(ft, "+0")
        d = wd.leafd(conf=sf_conf(wd, "f", **{"snowflake.max_backward_ms": "1000"}),
                     env=faketime_env(ft), name="f").start()
        ids, refusals = [], []

        def burst(n=200):
            c = Client(d.port)
            for _ in range(n):
                r = c.get("/snowflake?count=5")
                if r.status == 200:
                    ids.extend(r.ids())
                else:
                    refusals.append(r)
            c.close()
        burst()
        set_clock(ft, "-0.010")      # 10 ms back: served seamlessly
        burst()
        eq(refusals, [], "no refusal for a 10 ms step back")
        set_clock(ft, "-10")         # 10 s back: beyond the bound
        burst(20)
        check(len(refusals) > 0, "refused beyond max_backward_ms")
        r = refusals[0]
        eq(r.status, 503, "status")
        eq(r.json()["error"], "clock_behind", "code")
        check(any(ch.isdigit() for ch in r.json()["message"]), "says by how much: %r" % r.json())
        check(r.header("Retry-After") is not None, "Retry-After")
        h = d.get("/health")
        eq(h.status, 503, "health says it cannot serve")
        set_clock(ft, "+0")          # the clock catches up
        refusals.clear()
        wait_for(lambda: d.get("/snowflake").status == 200, what="recovery")
        burst()
        eq(refusals, [], "serving again")
        eq(len(ids), len(set(ids)), "no repeated ID across the steps (%d IDs)" % len(ids))
        m = d.get("/metrics").text
        check("backward" in m, "clock-backward metrics")


def test_kill9_then_restart_with_clock_back(ctx):
    with Workdir("sfkill") as wd:
        ft = os.path.join(wd.path, "faketime.rc")
        set_clock(ft, "+0")
        conf = sf_conf(wd, "k", **{"snowflake.start_wait_ms": "8000",
                                   "segment.wait_ms": "500"})
        d = wd.leafd(conf=conf, env=faketime_env(ft), name="k").start()
        before = []
        c = Client(d.port)
        for _ in range(300):
            before += c.get("/snowflake?count=20").ids()
        c.close()
        d.kill9()
        set_clock(ft, "-2")          # restart with the clock 2 s behind
        d2 = wd.leafd(conf=conf, env=faketime_env(ft), name="k", port=d.port).start()
        after, codes = [], set()
        end = time.time() + 15
        c = Client(d2.port)
        while time.time() < end and len(after) < 2000:
            r = c.get("/snowflake?count=20")
            if r.status == 200:
                after += r.ids()
            else:
                codes.add(r.json()["error"])
                time.sleep(0.05)
        check(len(after) >= 2000, "served again after the fence (%d)" % len(after))
        both = before + after
        eq(len(both), len(set(both)), "no ID repeated across kill -9 and the clock step")
        check(min(after) > max(before), "restart IDs are above the old ones")
        check(codes <= {"fence_not_passed", "fence_pending"}, "only fence waits: %r" % codes)


def test_takeover_race(ctx):
    with Workdir("takeover") as wd:
        zk = wd.zookeeper()
        zk.cli("create", "/snowflake", "")
        zk.cli("create", "/snowflake/bbtest", "")
        zk.cli("create", "/snowflake/bbtest/forever", "")
        stale = int(time.time() * 1000) - 3600 * 1000
        zk.cli("create", "-s", "/snowflake/bbtest/forever/10.9.9.9:8080-",
               '{"ip":"10.9.9.9","port":"8080","timestamp":%d,"leafd":"00000000deadbeef"}' % stale)
        extra = {"snowflake.takeover": "true", "snowflake.takeover_age_ms": "60000"}
        a = wd.leafd(conf=zk_conf(wd, zk, "ta", **extra), name="ta")
        b = wd.leafd(conf=zk_conf(wd, zk, "tb", **extra), name="tb")
        a.start(wait=False)
        b.start(wait=False)
        for n in (a, b):
            wait_for(lambda: n.get("/snowflake/state").status == 200, timeout=20,
                     what="node up")
        sa, sb = state(a), state(b)
        eq(sorted([sa["source"], sb["source"]]), ["takeover", "zookeeper"],
           "exactly one took the stale registration: %r %r" % (sa, sb))
        check(sa["worker_id"] != sb["worker_id"], "distinct worker IDs")
        winner = a if sa["source"] == "takeover" else b
        eq(state(winner)["worker_id"], 0, "the stale node's worker ID")
        # The new owner waits for the old owner's fence, then serves.
        wait_for(lambda: winner.get("/snowflake").status == 200, what="winner serves")


def test_zk_release_on_stop_and_state(ctx):
    # /snowflake/state and /metrics show the lease fields for ZooKeeper; a
    # clean stop with release_on_stop marks the node released, and another
    # identity (another port) gets that worker ID at once, before creating a
    # node of its own.
    with Workdir("zkrelease") as wd:
        zk = wd.zookeeper()
        extra = {"snowflake.release_on_stop": "true", "snowflake.heartbeat_ms": "300"}
        a = wd.leafd(conf=zk_conf(wd, zk, "ra", **extra), name="ra").start()
        st = state(a)
        eq(st["source"], "zookeeper", "source: %r" % st)
        eq(st["store"], "zookeeper", "store: %r" % st)
        eq(st["identity"], "127.0.0.1:%d" % a.port, "identity: %r" % st)
        eq(st["lease_ms"], None, "no lease without takeover: %r" % st)
        eq(st["lease_expires_ms"], None, "no expiry without takeover: %r" % st)
        check(st["store_fence_ms"] >= st["fence"] - 1, "the node holds the fence: %r" % st)
        eq(st["zk_state"], "connected", "zk_state: %r" % st)
        node = st["zk_node"]
        # heartbeats every 300 ms: one under 5 s old (a busy machine can hold
        # the keeper, or ZooKeeper, up for seconds at a time)
        wait_for(lambda: (lambda age: age is not None and age < 5000)(
            state(a).get("heartbeat_age_ms")), what="a heartbeat under 5 s old")
        m = a.get("/metrics").text
        check('leafd_snowflake_heartbeat_age_seconds{source="zookeeper"}' in m,
              "heartbeat age by source in /metrics")
        check("leafd_snowflake_zk_session_state 2" in m, "session state in /metrics")
        serving(a)
        ids = a.get("/snowflake?count=100").ids()
        w = st["worker_id"]
        eq(a.stop(), 0, "clean stop")
        out = zk.cli("get", node)
        line = [x for x in out.splitlines() if x.startswith('{"ip"')]
        check(len(line) == 1, "the node's data in %s" % out)
        data = json.loads(line[0])
        eq(data.get("released"), True, "the node is released: %r" % data)
        eq(data["port"], str(a.port), "still Leaf's Endpoint fields: %r" % data)
        bport = a.port + 1          # another identity, whatever port b binds
        b = wd.leafd(conf=zk_conf(wd, zk, "rb", **dict(extra, **{
            "snowflake.release_on_stop": "false",
            "leaf.snowflake.port": str(bport)})), name="rb").start()
        st = state(b)
        eq(st["identity"], "127.0.0.1:%d" % bport, "b's identity: %r" % st)
        eq(st["worker_id"], w, "the released worker ID, at once: %r" % st)
        eq(st["zk_node"], node, "the same node: %r" % st)
        r = wait_for(lambda: (lambda x: x if x.status == 200 else None)(b.get("/snowflake")),
                     timeout=30, what="b serves")
        check(int(r.text) > max(ids), "above every ID the released holder issued")
        ls = zk.cli("ls", "/snowflake/bbtest/forever")
        eq(ls.count("127.0.0.1:%d-" % bport), 0, "b made no node of its own: %s" % ls)
