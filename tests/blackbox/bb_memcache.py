"""Black-box tests of the memcached-protocol listener (memcache.listen.port)
with clients nobody here wrote: Python's pymemcache (get, get_many, gets,
set refused, stats, version), and libmemcached-tools' memccat, memcstat and
memcping. Also: a pipeline of gets behind a key that waits for its first
segment, answered in order; a storage command's data block skipped (a
command inside it is never run); malformed lines answered or closed; the
limits (key length, keys per get, line length, block length); a client that
never reads its answers (memory stays bounded, others are served, it is
closed); an idle connection closed; tokens (protected keys refused, or
served with memcache.token)."""
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time

from bbutil import Workdir, check, eq, free_port, skip, wait_for
from bb_resp import Raw, unread_client

TESTS = [
    "test_pymemcache",
    "test_libmemcached_tools",
    "test_pipeline_order",
    "test_storage_and_malformed",
    "test_limits_and_slow_reader",
    "test_tokens",
]


def pymemcache_mod():
    try:
        import pymemcache  # noqa: F401
    except ImportError:
        # Debian's python3-pymemcache, when python3 is not Debian's own.
        sys.path.append("/usr/lib/python3/dist-packages")
    try:
        from pymemcache.client.base import Client
        from pymemcache import exceptions
        return Client, exceptions
    except ImportError:
        skip("python3-pymemcache is not installed (sh .ci/deps.sh test)")


def need(tool):
    if shutil.which(tool) is None:
        skip("%s is not installed (sh .ci/deps.sh test)" % tool)


def start(wd, flags=None, **kw):
    mport = free_port()
    # A busy machine: a first segment load or a tag lookup may take longer
    # than the default segment.wait_ms (500 ms), and its SERVER_ERROR would
    # leave a get fewer lines than a test reads. Waits here are never failed.
    d = wd.leafd(flags=["--memcache.listen.port=%d" % mport, "--segment.wait_ms=30000"]
                 + (flags or []), **kw)
    d.start()
    d.mport = mport
    # start() waits for the HTTP port; the memcached one may open a moment later.
    wait_for(lambda: socket.create_connection(("127.0.0.1", mport), 0.5).close() or True,
             15, what="the memcached port %d" % mport)
    return d


def values(raw):
    """Parse a get answer: [(key, value, cas or None)], and its last line."""
    out, lines = [], raw.split(b"\r\n")
    i = 0
    while i < len(lines) and lines[i].startswith(b"VALUE "):
        f = lines[i].split(b" ")
        eq(int(f[3]), len(lines[i + 1]), "bytes of %r" % lines[i])
        out.append((f[1].decode(), lines[i + 1].decode(),
                    int(f[4]) if len(f) > 4 else None))
        i += 2
    return out, lines[i].decode() if i < len(lines) else ""


def test_pymemcache(ctx):
    Client, exc = pymemcache_mod()
    with Workdir("mc-pymemcache") as wd:
        d = start(wd)
        c = Client(("127.0.0.1", d.mport), connect_timeout=5, timeout=10)
        a = int(c.get("demo"))
        b = int(c.get("demo"))
        check(b > a, "get demo increases: %d then %d" % (a, b))
        many = c.get_many(["demo", "@snowflake", "@uuid", "@ulid"])
        eq(sorted(many), sorted(["demo", "@snowflake", "@uuid", "@ulid"]), "one value per key")
        check(int(many["demo"]) > b, "after the gets")
        check(int(many["@snowflake"]) > 1 << 22, "a snowflake ID: %r" % many["@snowflake"])
        eq(len(many["@uuid"]), 36, "a UUID")
        eq(len(many["@ulid"]), 26, "a ULID")
        # gets: the cas value of an ID is the ID.
        v, cas = c.gets("demo")
        eq(int(v), int(cas), "gets: cas is the ID")
        # HTTP and memcached share the allocator.
        h = int(d.get("/segment/demo").text)
        check(h > int(cas), "HTTP after memcached: %d > %s" % (h, cas))
        eq(int(c.get("demo")) > h, True, "memcached after HTTP")
        # Refusals, as exceptions the client raises.
        try:
            c.set("k", "v", noreply=False)
            check(False, "set was accepted")
        except exc.MemcacheServerError as e:
            check("not_supported" in str(e) and "set" in str(e), str(e))
        try:
            c.get("nosuch")
            check(False, "an unknown tag was answered")
        except exc.MemcacheClientError as e:
            check("unknown_biz_tag" in str(e), str(e))
        try:
            c.incr("demo", 1)
            check(False, "incr was accepted")
        except exc.MemcacheServerError as e:
            check("not_supported" in str(e), str(e))
        # set with pymemcache's default noreply: the refusal is still sent and
        # the connection closed, so the next call fails or reconnects, and
        # never reads the wrong answer.
        c.set("k", "v")
        try:
            r = c.get("demo")
            check(r is not None and int(r) > h, "a fresh connection's get: %r" % r)
        except (exc.MemcacheServerError, exc.MemcacheUnexpectedCloseError,
                ConnectionError) as e:
            check("not_supported" in str(e) or isinstance(e, (ConnectionError,
                  exc.MemcacheUnexpectedCloseError)), "the refusal: %s" % e)
        eq(c.version(), b"1.4.0 leafd-0.1.0", "version")
        st = c.stats()
        eq(int(st[b"pid"]), d.proc.pid, "stats pid")
        check(st[b"get_hits"] >= 8 and st[b"get_misses"] >= 1, "hits and misses: %r" % st)
        eq(st[b"cmd_get"], st[b"get_hits"] + st[b"get_misses"], "cmd_get")
        check(st[b"curr_connections"] >= 1, "curr_connections")
        c.close()
        eq(d.stop(), 0, "clean stop")


def test_libmemcached_tools(ctx):
    for t in ("memccat", "memcstat", "memcping"):
        need(t)
    with Workdir("mc-tools") as wd:
        d = start(wd)
        srv = "--servers=127.0.0.1:%d" % d.mport
        p = subprocess.run(["memccat", srv, "demo", "@snowflake", "demo"],
                           capture_output=True, timeout=60)
        eq(p.returncode, 0, "memccat: %r" % p.stderr)
        ids = [int(x) for x in p.stdout.split()]
        eq(len(ids), 3, "three values: %r" % p.stdout)
        check(ids[2] > ids[0], "demo increases")
        p = subprocess.run(["memccat", srv, "nosuch"], capture_output=True, timeout=60)
        check(p.returncode != 0 and p.stdout == b"", "an unknown tag is no value: %r" % (p,))
        p = subprocess.run(["memcstat", srv], capture_output=True, timeout=60)
        eq(p.returncode, 0, "memcstat: %r" % p.stderr)
        out = p.stdout.decode()
        check("pid: %d" % d.proc.pid in out, out)
        check("leafd_version:" in out and "get_hits:" in out, out)
        p = subprocess.run(["memcping", srv], capture_output=True, timeout=60)
        eq(p.returncode, 0, "memcping: %r" % p.stderr)
        eq(d.stop(), 0, "clean stop")


def test_pipeline_order(ctx):
    with Workdir("mc-pipeline") as wd:
        d = start(wd)
        c = Raw(d.mport)
        # The first get of demo waits for its first segment (parked); the
        # keys and commands behind it wait, and all are answered in order.
        c.send(b"get demo @snowflake demo\r\ngets demo\r\nversion\r\nget demo\r\n")
        got = c.read_lines(13)
        vals, end = values("\r\n".join(got[:7]).encode())
        eq([k for k, _, _ in vals], ["demo", "@snowflake", "demo"], "keys in order")
        check(int(vals[2][1]) > int(vals[0][1]), "demo increases within a get")
        eq(end, "END", "END")
        eq(got[7].split(" ")[0:2], ["VALUE", "demo"], "gets")
        eq(int(got[7].split(" ")[4]), int(got[8]), "cas is the ID")
        check(int(got[8]) > int(vals[2][1]), "gets after get")
        eq(got[9:11], ["END", "VERSION 1.4.0 leafd-0.1.0"], "then version")
        eq(got[11].split(" ")[:2], ["VALUE", "demo"], "then get")
        # A client that half-closes after its commands gets every answer.
        s = socket.create_connection(("127.0.0.1", d.mport), 5)
        s.sendall(b"get demo\r\nget @uuid\r\n")
        s.shutdown(socket.SHUT_WR)
        data = b""
        s.settimeout(30)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        eq(data.count(b"END\r\n"), 2, "both answered before the close: %r" % data)
        c.close()
        eq(d.stop(), 0, "clean stop")


def test_storage_and_malformed(ctx):
    with Workdir("mc-malformed") as wd:
        d = start(wd, flags=["--segment.db_timeout_ms=60000"])
        c = Raw(d.mport)
        # The data block is skipped, whatever it holds: the get inside it is
        # never run (if it were, there would be a VALUE line).
        c.send(b"set k 0 0 10\r\nget demo\r\n\r\nversion\r\n")
        got = c.read_lines(2)
        check(got[0].startswith("SERVER_ERROR not_supported "), got[0])
        eq(got[1], "VERSION 1.4.0 leafd-0.1.0", "in step after the block")
        # A block that arrives later, in pieces, is skipped too.
        c.send(b"append k 0 0 6\r\nab")
        check(c.read_lines(1)[0].startswith("SERVER_ERROR not_supported "), "append")
        c.send(b"cd")
        time.sleep(0.1)
        c.send(b"ef\r\nversion\r\n")
        eq(c.read_lines(1), ["VERSION 1.4.0 leafd-0.1.0"], "in step")
        for line, want in [
            (b"bogus\r\n", "ERROR"),
            (b"\r\n", "ERROR"),
            (b"get\r\n", "CLIENT_ERROR bad_command bad command line format: get needs a key"),
            (b"get " + b"k" * 251 + b"\r\n", "CLIENT_ERROR bad_command key longer than 250 bytes"),
            (b"get " + b" ".join(b"demo" for _ in range(129)) + b"\r\n",
             "CLIENT_ERROR bad_command too many keys in one get"),
            (b"get bad/key\r\n", "CLIENT_ERROR invalid_biz_tag "),
            (b"get " + b"t" * 129 + b"\r\n", "CLIENT_ERROR invalid_biz_tag "),
            (b"delete demo\r\n", "SERVER_ERROR not_supported "),
            (b"flush_all\r\n", "SERVER_ERROR not_supported "),
            (b"stats bogus\r\n", "CLIENT_ERROR unknown_stats_group "),
        ]:
            c.send(line)
            got = c.read_lines(1)[0]
            check(got.startswith(want), "%r: %r" % (line[:40], got))
        # An error ends a get: no END, the keys after it are not answered.
        # demo's first segment and nosuch's lookup wait for the database,
        # held locked here longer than the default segment.wait_ms (a busy
        # machine's disk): the get waits for them, not SERVER_ERROR (start).
        db = sqlite3.connect(os.path.join(wd.path, "leafd.db"),
                             isolation_level=None, timeout=60)
        db.execute("BEGIN EXCLUSIVE")
        c.send(b"get demo nosuch demo\r\nversion\r\n")
        time.sleep(1)
        db.execute("COMMIT")
        db.close()
        got = c.read_lines(4)
        eq(got[0].split(" ")[:2], ["VALUE", "demo"], "the first key")
        check(got[2].startswith("CLIENT_ERROR unknown_biz_tag "), got[2])
        eq(got[3], "VERSION 1.4.0 leafd-0.1.0", "next command")
        c.send(b"stats settings\r\nstats items\r\n")
        got = c.read_lines(8)
        check("STAT binding_protocol auto-negotiate" in got and got.count("END") == 2, got)
        c.send(b"quit\r\n")
        eq(c.read_all(30), b"", "quit closes, with no answer")
        c.close()
        # Closing errors: the connection cannot be kept in step.
        for line, want in [
            (b"set k 0 0 x\r\n", b"CLIENT_ERROR bad data chunk\r\n"),
            (b"set k 0 0 2000000\r\n", b"CLIENT_ERROR object too large for cache\r\n"),
            (b"set k 0\r\n", b"CLIENT_ERROR bad command line format\r\n"),
            (b"get " + b"a " * 5000, b"CLIENT_ERROR line too long\r\n"),
        ]:
            c = Raw(d.mport)
            c.send(line)
            eq(c.read_all(30), want, "%r" % line[:30])
            c.close()
        # noreply on a refused command: answered, then closed.
        c = Raw(d.mport)
        c.send(b"set k 0 0 1 noreply\r\nx\r\nget demo\r\n")
        data = c.read_all(30)
        check(data.startswith(b"SERVER_ERROR not_supported ") and b"VALUE" not in data,
              repr(data))
        c.close()
        # The node still serves.
        check(int(d.get("/segment/demo").text) > 0, "HTTP still serves")
        eq(d.stop(), 0, "clean stop")


def test_limits_and_slow_reader(ctx):
    with Workdir("mc-limits") as wd:
        d = start(wd, flags=["--http.idle_timeout_ms=800"])
        # A half-written line is timed out.
        c = Raw(d.mport)
        c.send(b"get de")
        t0 = time.time()
        data = c.read_all(30)
        dt = time.time() - t0
        check(data.startswith(b"CLIENT_ERROR request not received in time"), "an error: %r" % data)
        # no upper bound: a busy machine may be late
        check(dt > 0.5, "closed after the idle timeout, not before: %.2f s" % dt)
        c.close()
        # A client that pipelines gets and never reads the answers; meanwhile
        # another client is served.
        def served():
            c = Raw(d.mport)
            c.send(b"version\r\n")
            eq(c.read_lines(1), ["VERSION 1.4.0 leafd-0.1.0"], "others are served")
            c.close()
        cmd = b"get " + b" ".join([b"@uuid"] * 100) + b"\r\n"
        sent, got = unread_client(d, d.mport, cmd * 20, served)
        per_cmd = 100 * (len("VALUE @uuid 0 36\r\n") + 38) + 5
        check(len(got) < sent / len(cmd) * per_cmd, "not every answer was made: %d "
              "bytes for %d bytes of commands" % (len(got), sent))
        eq(d.stop(), 0, "clean stop")
    with Workdir("mc-maxconn") as wd:
        d = start(wd, flags=["--http.max_connections=2"])
        # The port probe of start() may not be closed on leafd's side yet:
        # open until two connections are served.
        held, end = [], time.time() + 15
        while len(held) < 2 and time.time() < end:
            h = Raw(d.mport)
            h.send(b"version\r\n")
            if h.read_lines(1)[0].startswith("VERSION"):
                held.append(h)
            else:
                h.close()
                time.sleep(0.05)
        eq(len(held), 2, "two connections served")
        c = Raw(d.mport)
        eq(c.read_all(30), b"SERVER_ERROR too many open connections\r\n", "over the limit")
        c.close()
        for h in held:
            h.close()
        eq(d.stop(), 0, "clean stop")


def test_tokens(ctx):
    with Workdir("mc-tokens") as wd:
        tokens = os.path.join(wd.path, "tokens")
        with open(tokens, "w") as f:
            f.write("tok-demo-123 demo\ntok-sf-12345 @snowflake\n")
        d = start(wd, flags=["--auth.tokens_file=" + tokens])
        c = Raw(d.mport)
        c.send(b"get demo\r\nget @snowflake\r\nget @uuid\r\n")
        got = c.read_lines(5)
        check(got[0].startswith("CLIENT_ERROR noauth demo needs a token"), got[0])
        check(got[1].startswith("CLIENT_ERROR noauth @snowflake needs a token"), got[1])
        eq(got[2][:len("VALUE @uuid 0 36")], "VALUE @uuid 0 36", "UUIDs need no token")
        c.close()
        eq(d.stop(), 0, "clean stop")
        # memcache.token: the listener serves that token's scopes only.
        d = start(wd, flags=["--auth.tokens_file=" + tokens,
                             "--memcache.token=tok-demo-123"])
        c = Raw(d.mport)
        c.send(b"get demo\r\nget @snowflake\r\n")
        got = c.read_lines(4)
        eq(got[0].split(" ")[:2], ["VALUE", "demo"], "demo with memcache.token")
        eq(got[2], "END", "END")
        check(got[3].startswith("CLIENT_ERROR noauth @snowflake needs a token"), got[3])
        c.close()
        eq(d.stop(), 0, "clean stop")
        # A memcache.token that is not in the file is refused at start.
        d2 = wd.leafd(flags=["--memcache.listen.port=%d" % free_port(),
                             "--auth.tokens_file=" + tokens,
                             "--memcache.token=not-a-token-1"], name="bad")
        check(d2.start(expect_fail=True) != 0, "refused to start")
        check("memcache.token is not a token of" in d2.log(), d2.log())
