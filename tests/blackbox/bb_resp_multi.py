"""Black-box tests of Redis transactions and INFO on the RESP listener, with
clients nobody here wrote: redis-py's default pipeline (a MULTI/EXEC
transaction) and its non-transaction pipeline, its WATCH loops
(r.transaction and a hand-written WatchError loop), redis-cli --stat,
redis-benchmark -t incr, and node-redis multi() (tests/node, installed by
npm ci from its package-lock.json).

What they show: a transaction's IDs are unique and in order, also when its
first INCR waits for the node's first segment (EXEC parks) and commands are
pipelined behind it; a refused command aborts EXEC (-EXECABORT) and takes no
ID, which the next INCR proves (it is the previous one + 1); DISCARD takes
none either; an error at run time is the element of EXEC's array; the queue
limits abort; INFO's fields are real."""
import fcntl
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import time

from bbutil import ROOT, Workdir, check, eq, in_ci, skip
from bb_resp import Raw, need, redis_mod, start

TESTS = [
    "test_pipeline_transaction",
    "test_exec_parks_in_order",
    "test_execabort_takes_no_id",
    "test_discard_and_misuse",
    "test_error_in_exec_slot",
    "test_watch_loops",
    "test_queue_limits",
    "test_info_fields",
    "test_redis_cli_stat",
    "test_redis_benchmark_incr",
    "test_node_redis_multi",
]


def seed(wd, *tags, step=1000):
    """leaf_alloc with demo (step 1000) and tags, before leafd starts."""
    con = sqlite3.connect(os.path.join(wd.path, "leafd.db"))
    with open(os.path.join(ROOT, "sql", "sqlite.sql")) as f:
        con.executescript(f.read())
    con.execute("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
                "VALUES ('demo', 1, 1000, 'test')")
    for t in tags:
        con.execute("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
                    "VALUES (?, 1, ?, 'test')", (t, step))
    con.commit()
    con.close()


def incr_demo(c):
    c.send(b"INCR demo\r\n")
    return int(c.read_lines(1)[0][1:])


def client(d):
    redis = redis_mod()
    return redis, redis.Redis(port=d.rport, socket_timeout=30)


def test_pipeline_transaction(ctx):
    with Workdir("resp-multi") as wd:
        d = start(wd)
        redis, r = client(d)
        p = r.pipeline()                    # transaction=True: MULTI ... EXEC
        for _ in range(100):
            p.incr("demo")
        got = p.execute()
        eq(len(got), 100, "EXEC's array")
        check(all(isinstance(x, int) for x in got), "integers: %r" % got[:3])
        eq(got, sorted(set(got)), "unique and increasing")
        # Mixed commands: each answer in its place.
        p = r.pipeline()
        p.incr("demo")
        p.execute_command("LEAF.SEGMENT", "demo", "3")
        p.ping()
        p.execute_command("LEAF.SNOWFLAKE")
        p.echo("x")
        a, seg, pong, sf, echo = p.execute()
        check(a > got[-1], "after the first transaction")
        eq([int(x) for x in seg], [a + 1, a + 2, a + 3], "LEAF.SEGMENT in EXEC")
        eq(pong, True, "PING")
        eq(len(sf), 1, "LEAF.SNOWFLAKE")
        eq(echo, b"x", "ECHO")
        # A pipeline without a transaction: the same IDs, no MULTI.
        p = r.pipeline(transaction=False)
        for _ in range(50):
            p.incr("demo")
        more = p.execute()
        eq(more, list(range(a + 4, a + 54)), "non-transaction pipeline")
        eq(r.incr("demo"), a + 54, "the next INCR")
        d.stop()


def test_exec_parks_in_order(ctx):
    """On a fresh node the first INCR waits for the first segment: EXEC
    parks, and what is pipelined behind it waits in order."""
    with Workdir("resp-multi-park") as wd:
        d = start(wd)
        c = Raw(d.rport)
        c.send(b"MULTI\r\nINCR demo\r\nLEAF.SEGMENT demo 2\r\nINCR demo\r\nEXEC\r\n"
               b"INCR demo\r\nPING\r\n")
        lines = c.read_lines(4 + 1 + 1 + 5 + 1 + 1 + 1)
        eq(lines[:4], ["+OK", "+QUEUED", "+QUEUED", "+QUEUED"], "queued")
        eq(lines[4], "*3", "EXEC's array")
        first = int(lines[5][1:])
        eq(lines[6:11], ["*2", "$%d" % len(str(first + 1)), str(first + 1),
                         "$%d" % len(str(first + 2)), str(first + 2)], "LEAF.SEGMENT")
        eq(lines[11], ":%d" % (first + 3), "the third")
        eq(lines[12], ":%d" % (first + 4), "the INCR behind EXEC")
        eq(lines[13], "+PONG", "PING last")
        c.close()
        d.stop()
    # Segments of one ID: nearly every INCR of the queue waits for a load,
    # so EXEC parks and resumes many times.
    with Workdir("resp-multi-parks") as wd:
        seed(wd, "tiny", step=1)
        d = start(wd, flags=["--segment.create_demo=false"])
        c = Raw(d.rport)
        c.send(b"MULTI\r\n" + b"INCR tiny\r\n" * 30 + b"EXEC\r\nINCR tiny\r\n")
        lines = c.read_lines(1 + 30 + 1 + 30 + 1, timeout=60)
        eq(lines[31], "*30", "EXEC's array")
        got = [int(x[1:]) for x in lines[32:62]]
        eq(got, sorted(set(got)), "30 unique increasing IDs: %r" % got)
        check(int(lines[62][1:]) > got[-1], "the INCR behind EXEC: %r" % lines[62])
        c.close()
        d.stop()


def test_execabort_takes_no_id(ctx):
    with Workdir("resp-multi-abort") as wd:
        d = start(wd)
        redis, r = client(d)
        a = r.incr("demo")
        p = r.pipeline()
        p.incr("demo")
        p.incr("bad/tag")
        p.incr("demo")
        try:
            p.execute()
            check(False, "EXEC of a transaction with a refused command succeeded")
        except redis.ResponseError as e:
            check("INVALID_BIZ_TAG" in str(e), "the refused command's error: %s" % e)
        eq(r.incr("demo"), a + 1, "no ID taken by the aborted transaction")
        # Unknown command, arity, bad count, over count_max: each aborts.
        c = Raw(d.rport)
        for bad in (b"GET demo", b"INCR", b"LEAF.SEGMENT demo 0",
                    b"LEAF.SEGMENT demo 100000000", b"LEAF.UUID x", b"HELLO 3"):
            c.send(b"MULTI\r\nINCR demo\r\n" + bad + b"\r\nINCR demo\r\nEXEC\r\n")
            lines = c.read_lines(5)
            eq(lines[:2], ["+OK", "+QUEUED"], bad)
            check(lines[2].startswith("-"), "%s refused: %r" % (bad, lines[2]))
            eq(lines[3], "+QUEUED", "queued after the error")
            eq(lines[4], "-EXECABORT Transaction discarded because of previous errors.",
               "EXECABORT after %s" % bad)
        c.send(b"INCR demo\r\n")
        eq(c.read_lines(1), [":%d" % (a + 2)], "still no ID taken")
        c.close()
        d.stop()


def test_discard_and_misuse(ctx):
    with Workdir("resp-multi-discard") as wd:
        d = start(wd)
        c = Raw(d.rport)
        a = incr_demo(c)
        c.send(b"MULTI\r\nINCR demo\r\nINCR demo\r\nDISCARD\r\nINCR demo\r\n")
        eq(c.read_lines(5), ["+OK", "+QUEUED", "+QUEUED", "+OK", ":%d" % (a + 1)],
           "DISCARD takes no ID")
        c.send(b"EXEC\r\nDISCARD\r\nMULTI\r\nMULTI\r\nWATCH demo\r\nINCR demo\r\nEXEC\r\n")
        eq(c.read_lines(8), ["-ERR EXEC without MULTI", "-ERR DISCARD without MULTI",
                             "+OK", "-ERR MULTI calls can not be nested",
                             "-ERR WATCH inside MULTI is not allowed", "+QUEUED",
                             "*1", ":%d" % (a + 2)],
           "Redis's errors; nested MULTI and WATCH do not abort")
        c.send(b"MULTI\r\nEXEC\r\n")
        eq(c.read_lines(2), ["+OK", "*0"], "an empty transaction")
        # QUIT inside MULTI runs at once, as in Redis.
        c.send(b"MULTI\r\nINCR demo\r\nQUIT\r\n")
        eq(c.read_lines(3), ["+OK", "+QUEUED", "+OK"], "QUIT")
        c.close()
        redis, r = client(d)
        eq(r.incr("demo"), a + 3, "the closed transaction took nothing")
        d.stop()


def test_error_in_exec_slot(ctx):
    with Workdir("resp-multi-slot") as wd:
        d = start(wd)
        redis, r = client(d)
        p = r.pipeline()
        p.incr("demo")
        p.incr("nosuchtag")                 # known only at run time
        p.incr("demo")
        res = p.execute(raise_on_error=False)
        eq(len(res), 3, "three answers")
        check(isinstance(res[1], redis.ResponseError) and
              "UNKNOWN_BIZ_TAG" in str(res[1]), "the error in its slot: %r" % res[1])
        eq(res[2], res[0] + 1, "the commands around it ran")
        d.stop()


def test_watch_loops(ctx):
    with Workdir("resp-multi-watch") as wd:
        d = start(wd)
        redis, r = client(d)
        a = r.incr("demo")

        def body(pipe):
            pipe.multi()
            pipe.incr("demo")
        eq(r.transaction(body, "demo"), [a + 1], "r.transaction(func, 'demo')")
        tries = 0
        with r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch("demo", "other")
                    pipe.multi()
                    pipe.incr("demo")
                    pipe.incr("demo")
                    got = pipe.execute()
                    break
                except redis.WatchError:
                    tries += 1
                    check(tries < 3, "WATCH never succeeds")
        eq(tries, 0, "no retry")
        eq(got, [a + 2, a + 3], "the watched transaction's IDs")
        with r.pipeline() as pipe:
            pipe.watch("demo")
            pipe.unwatch()
        c = Raw(d.rport)
        c.send(b"WATCH\r\nUNWATCH\r\nMULTI\r\nUNWATCH\r\nEXEC\r\n")
        eq(c.read_lines(6), ["-ERR wrong number of arguments for 'watch' command",
                             "+OK", "+OK", "+QUEUED", "*1", "+OK"], "WATCH/UNWATCH")
        c.close()
        d.stop()


def test_queue_limits(ctx):
    with Workdir("resp-multi-limits") as wd:
        d = start(wd)
        c = Raw(d.rport)
        a = incr_demo(c)
        # 100,000 IDs in all: 100 x 1,000 pass, the 101st is over.
        c.send(b"MULTI\r\n" + b"LEAF.SEGMENT demo 1000\r\n" * 101 + b"EXEC\r\n")
        lines = c.read_lines(103)
        eq(lines[100], "+QUEUED", "the 100th")
        check(lines[101].startswith("-ERR transaction too large"), lines[101])
        eq(lines[102], "-EXECABORT Transaction discarded because of previous errors.",
           "over the ID limit")
        # 10,000 commands pass, the next is over.
        c.send(b"MULTI\r\n" + b"PING\r\n" * 10001 + b"EXEC\r\nINCR demo\r\n")
        lines = c.read_lines(10004, timeout=60)
        eq(lines[10000], "+QUEUED", "the 10,000th")
        check(lines[10001].startswith("-ERR transaction too large"), lines[10001])
        check(lines[10002].startswith("-EXECABORT"), "aborted")
        eq(lines[10003], ":%d" % (a + 1), "no ID taken")
        # Answers: INFO may take 8 KB each; 16 MiB of them is under 2,000.
        c.send(b"MULTI\r\n" + b"INFO\r\n" * 2000 + b"EXEC\r\n")
        lines = c.read_lines(2002, timeout=60)
        refused = [i for i, x in enumerate(lines) if x.startswith("-ERR transaction too large")]
        check(1500 < refused[0] < 2000, "the answer bound: %r" % refused[:1])
        check(lines[-1].startswith("-EXECABORT"), "aborted")
        c.close()
        d.stop()


def info_dict(text):
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def statm_rss(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_info_fields(ctx):
    with Workdir("resp-info") as wd:
        d = start(wd)
        redis, r = client(d)
        r.incr("demo")
        srv = r.info("server")
        ver = tuple(int(x) for x in str(srv["redis_version"]).split("."))
        check(ver >= (7, 0, 0), "redis_version %r" % srv["redis_version"])
        check(re.match(r"^\d+\.\d+\.\d+$", str(srv["leafd_version"])),
              "leafd_version %r" % srv["leafd_version"])
        eq(srv["redis_mode"], "standalone", "redis_mode")
        eq(srv["process_id"], d.proc.pid, "process_id")
        eq(srv["tcp_port"], d.rport, "tcp_port")
        eq(srv["arch_bits"], 64, "arch_bits")
        check(str(srv["os"]).startswith("Linux "), "os %r" % srv["os"])
        check(srv["uptime_in_seconds"] >= 0, "uptime")
        mem = r.info("memory")
        check(mem["used_memory"] > 100000, "used_memory %r" % mem["used_memory"])
        rss = statm_rss(d.proc.pid)
        check(rss / 2 < mem["used_memory_rss"] < rss * 2,
              "used_memory_rss %r vs statm %r" % (mem["used_memory_rss"], rss))
        check(mem["used_memory"] < mem["used_memory_rss"] * 4, "allocator vs RSS")
        check(re.match(r"^\d+(\.\d\d[KMGT])?B?$", mem["used_memory_human"]),
              "human %r" % mem["used_memory_human"])
        allinfo = r.info()
        for k in ("connected_clients", "total_commands_processed", "loading",
                  "role", "used_cpu_user", "db0"):
            check(k in allinfo, "INFO has %s" % k)
        eq(allinfo["db0"]["keys"], 1, "db0:keys (the tags this node knows)")
        eq(allinfo["role"], "master", "role")
        d.stop()


def test_redis_cli_stat(ctx):
    """redis-cli --stat for a few intervals: the memory column is a size."""
    need("redis-cli")
    need("stdbuf")
    with Workdir("resp-stat") as wd:
        d = start(wd)
        p = subprocess.Popen(["stdbuf", "-oL", "redis-cli", "-p", str(d.rport),
                              "--stat", "-i", "0.2"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        rows = []
        end = time.time() + 60
        try:
            while len(rows) < 3 and time.time() < end:
                line = p.stdout.readline().decode()
                if not line:
                    break
                if re.match(r"^\d", line):
                    rows.append(line.split())
        finally:
            p.kill()
            p.wait()
        eq(len(rows), 3, "three rows of --stat")
        for row in rows:
            eq(row[0], "1", "keys (the demo tag)")
            check(re.match(r"^\d+(\.\d+)?[BKMG]$", row[1]), "memory column %r" % row[1])
            check(int(row[2]) >= 1, "clients")
        d.stop()


def test_redis_benchmark_incr(ctx):
    """redis-benchmark -t incr sends INCR counter:__rand_int__ (docs/resp.md):
    with that row it runs; without it, it stops at the first error."""
    need("redis-benchmark")
    with Workdir("resp-bench-incr") as wd:
        seed(wd, "counter:__rand_int__")
        d = start(wd, flags=["--segment.create_demo=false"])
        p = subprocess.run(["redis-benchmark", "-p", str(d.rport), "-t", "incr",
                            "-n", "2000", "-c", "4", "-q"],
                           capture_output=True, timeout=120)
        out = p.stdout.decode()
        eq(p.returncode, 0, "redis-benchmark -t incr: %s" % out[-300:])
        check("INCR:" in out and "requests per second" in out, out[-300:])
        redis, r = client(d)
        check(r.incr("counter:__rand_int__") > 2000, "its 2,000 IDs were taken")
        d.stop()


def node_redis_dir():
    """tests/node with its node_modules (npm ci), or skip/fail."""
    here = os.path.join(ROOT, "tests", "node")
    if shutil.which("node") is None or shutil.which("npm") is None:
        skip("node and npm are not installed")
    # make test runs the black-box suite twice at once (leafd, leafd-asan)
    # in one checkout: one npm ci, under a lock, and a mark written only
    # once it has finished, so the other never uses a half-made tree.
    # The mark holds package-lock.json's hash: node_modules made from
    # another lock file is made again.
    done = os.path.join(here, "node_modules", ".leafd-npm-ci-done")
    with open(os.path.join(here, "package-lock.json"), "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(here, ".npm-ci.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(done) as f:
                have = f.read().strip()
        except OSError:
            have = ""
        if have != want:
            p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=here,
                               capture_output=True, timeout=300)
            if p.returncode != 0:
                msg = "npm ci in tests/node failed: %s" % p.stderr.decode()[-500:]
                if in_ci():
                    check(False, msg)
                skip(msg)
            with open(done, "w") as f:
                f.write(want)
    return here


def test_node_redis_multi(ctx):
    here = node_redis_dir()
    with Workdir("resp-node") as wd:
        d = start(wd)
        p = subprocess.run(["node", os.path.join(here, "multi.js"), str(d.rport)],
                           capture_output=True, timeout=120)
        out = p.stdout.decode() + p.stderr.decode()
        eq(p.returncode, 0, "node multi.js: %s" % out[-1500:])
        check("ok" in out, out[-500:])
        d.stop()
