"""Black-box tests of the Redis-protocol listener (resp.listen.port) with
clients nobody here wrote: redis-cli (one-shot, --pipe and interactive
start-up in a pseudo-terminal), redis-benchmark as a load client, and
Python's redis package (a pool of 8 connections x 100k INCRs, pipelines of
1,000). Also: errors by leafd's code, tokens over AUTH/HELLO, a pipeline
behind a command that waits for its first segment, a half-written command
timed out, and a client that never reads its replies (leafd's memory stays
bounded and other clients are served)."""
import os
import pty
import select
import shutil
import socket
import subprocess
import sys
import threading
import time

from bbutil import TestFailure, Workdir, check, eq, free_port, parallel, skip, wait_for

TESTS = [
    "test_redis_cli",
    "test_redis_cli_interactive_start",
    "test_redis_cli_pipe_and_benchmark",
    "test_python_pool_no_duplicate",
    "test_errors_and_pipeline_order",
    "test_auth",
    "test_timeouts_and_backpressure",
]


def redis_mod():
    try:
        import redis  # noqa: F401
    except ImportError:
        # Debian's python3-redis, when python3 is not Debian's own.
        sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import redis
        return redis
    except ImportError:
        skip("python3-redis is not installed (sh .ci/deps.sh test)")


def need(tool):
    if shutil.which(tool) is None:
        skip("%s is not installed (sh .ci/deps.sh test)" % tool)


def start(wd, flags=None, **kw):
    """leafd with RESP on d.rport. A segment may take 30 s to come (a test's
    flags can say otherwise): a tag's first load, an SQLite write, can
    outlast the default 500 ms under ASan on a busy machine, and a command
    then gets IDS_EXHAUSTED (redis-cli --pipe's first INCR did)."""
    rport = free_port()
    d = wd.leafd(flags=["--resp.listen.port=%d" % rport, "--segment.wait_ms=30000"]
                 + (flags or []), **kw)
    d.start()
    d.rport = rport
    # start() waits for the HTTP port; the RESP listener may open a moment
    # later (on a busy machine under ASan a test's first connect was refused)
    wait_for(lambda: socket.create_connection(("127.0.0.1", rport), 0.5).close() or True,
             15, what="the RESP port %d" % rport)
    return d


def cli(d, *args, stdin=None):
    p = subprocess.run(["redis-cli", "-p", str(d.rport)] + list(args),
                       input=stdin, capture_output=True, timeout=60)
    return p.stdout.decode(), p.stderr.decode(), p.returncode


class Raw:
    """A plain socket for what a client library would hide."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), 5)
        # an answer may be seconds late on a busy machine (ASan, lanes in
        # parallel); a hang still fails, after 30 s
        self.s.settimeout(30)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def read_lines(self, n, timeout=30):
        end = time.time() + timeout
        while self.buf.count(b"\r\n") < n and time.time() < end:
            try:
                chunk = self.s.recv(65536)
            except socket.timeout:
                raise TestFailure("%d lines not in %d s, got %r" % (n, timeout, self.buf))
            if not chunk:
                break
            self.buf += chunk
        lines = self.buf.split(b"\r\n")
        out, self.buf = lines[:n], b"\r\n".join(lines[n:])
        return [x.decode() for x in out]

    def read_all(self, timeout=10):
        self.s.settimeout(timeout)
        data = self.buf
        try:
            while True:
                chunk = self.s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            pass
        return data

    def close(self):
        self.s.close()


def test_redis_cli(ctx):
    need("redis-cli")
    with Workdir("resp-cli") as wd:
        d = start(wd)
        out, _, rc = cli(d, "INCR", "demo")
        eq(rc, 0, "exit status")
        a = int(out)
        out, _, _ = cli(d, "INCR", "demo")
        check(int(out) > a, "INCR increases: %s then %s" % (a, out))
        out, _, _ = cli(d, "LEAF.SNOWFLAKE", "3")
        sf = [int(x) for x in out.split()]
        eq(len(sf), 3, "three snowflake IDs")
        eq(sf, sorted(set(sf)), "increasing, distinct")
        out, _, _ = cli(d, "LEAF.SEGMENT", "demo", "5")
        seg = [int(x) for x in out.split()]
        eq(len(seg), 5, "five segment IDs")
        check(seg[0] > a, "after the INCRs")
        # HTTP and RESP share the allocator: the next HTTP ID is later still.
        h = int(d.get("/segment/demo").text)
        check(h > seg[-1], "HTTP after RESP: %d > %d" % (h, seg[-1]))
        out, _, _ = cli(d, "LEAF.UUID", "2")
        eq(len(out.split()), 2, "two UUIDs")
        out, _, _ = cli(d, "LEAF.SERIAL", "demo", "3")
        ser = out.split()
        eq(len(ser), 3, "three serials: %r" % out)
        check(all(x.startswith("DEMO") for x in ser), "the demo code's prefix: %r" % ser)
        eq(ser, sorted(set(ser)), "increasing, distinct")
        h = d.get("/serial/demo").text.strip()
        check(h > ser[-1], "HTTP after RESP: %s > %s" % (h, ser[-1]))
        out, _, _ = cli(d, "LEAF.SERIAL", "nosuch")
        check(out.startswith("UNKNOWN_SERIAL_CODE "), out)
        out, _, _ = cli(d, "LEAF.DECODE", str(sf[0]))
        check('"worker_id":' in out, "decoded: %s" % out)
        out, _, _ = cli(d, "GET", "x")
        check(out.startswith("ERR unknown command 'GET'"), out)
        m = d.get("/metrics").text
        check("leafd_resp_commands_total " in m, "RESP metrics")
        eq(d.stop(), 0, "clean stop")


def test_redis_cli_interactive_start(ctx):
    """redis-cli's interactive start-up (COMMAND DOCS for its hints) goes
    without an error, and a command typed at its prompt is answered."""
    need("redis-cli")
    with Workdir("resp-tty") as wd:
        d = start(wd)
        pid, fd = pty.fork()
        if pid == 0:
            # A dumb terminal: linenoise reads plain lines, no cursor queries.
            os.environ["TERM"] = "dumb"
            # No ~/.redisclirc or history file of this machine's user.
            os.environ["REDISCLI_RCFILE"] = "/dev/null"
            os.environ["REDISCLI_HISTFILE"] = "/dev/null"
            os.execvp("redis-cli", ["redis-cli", "-p", str(d.rport)])
        out = b""

        def read_until(token, timeout=10):
            nonlocal out
            end = time.time() + timeout
            while token not in out and time.time() < end:
                r, _, _ = select.select([fd], [], [], 0.2)
                if r:
                    try:
                        out += os.read(fd, 4096)
                    except OSError:
                        break
            return token in out
        try:
            check(read_until(b"> "), "a prompt: %r" % out)
            os.write(fd, b"INCR demo\r")
            check(read_until(b"(integer)"), "an integer answer: %r" % out)
            os.write(fd, b"LEAF.SNOWFLAKE 2\r")
            check(read_until(b"2) \""), "an array answer: %r" % out)
            os.write(fd, b"quit\r")
            read_until(b"\x00", 2)
        finally:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
            os.waitpid(pid, 0)
            os.close(fd)
        text = out.decode("utf-8", "replace")
        check("ERR" not in text and "rror" not in text, "no error at start: %r" % text)
        # Its start-up command (COMMAND DOCS) was answered, not refused.
        m = d.get("/metrics").text
        check('leafd_http_requests_total{route="resp",status="200"}' in m,
              "a start-up command answered: %s" % [x for x in m.splitlines() if "resp" in x])


def test_redis_cli_pipe_and_benchmark(ctx):
    need("redis-cli")
    need("redis-benchmark")
    with Workdir("resp-pipe") as wd:
        d = start(wd)
        cmds = b"".join(b"*2\r\n$4\r\nINCR\r\n$4\r\ndemo\r\n" for _ in range(10000))
        out, err, rc = cli(d, "--pipe", stdin=cmds)
        eq(rc, 0, "redis-cli --pipe exit status: %s %s" % (out, err))
        check("errors: 0, replies: 10000" in out, "--pipe summary: %r" % out)
        before = int(cli(d, "INCR", "demo")[0])
        p = subprocess.run(["redis-benchmark", "-p", str(d.rport), "-c", "16",
                            "-n", "20000", "-P", "4", "-q", "INCR", "demo"],
                           capture_output=True, timeout=120)
        text = (p.stdout + p.stderr).decode("utf-8", "replace")
        eq(p.returncode, 0, "redis-benchmark: %s" % text[-500:])
        check("requests per second" in text, "a rate: %s" % text[-300:])
        after = int(cli(d, "INCR", "demo")[0])
        check(after >= before + 20001,
              "20000 INCRs between %d and %d, each a distinct later ID" % (before, after))


def test_python_pool_no_duplicate(ctx):
    redis = redis_mod()
    with Workdir("resp-py") as wd:
        d = start(wd)
        pool = redis.ConnectionPool(host="127.0.0.1", port=d.rport, max_connections=8)
        per = int(os.environ.get("LEAFD_RESP_PER_THREAD", "100000"))

        def work(i):
            r = redis.Redis(connection_pool=pool)
            got = [r.incr("demo") for _ in range(1000)]     # one at a time
            while len(got) < per:
                p = r.pipeline(transaction=False)
                for _ in range(min(1000, per - len(got))):
                    p.incr("demo")
                got.extend(p.execute())
            return got
        t0 = time.time()
        res = parallel(8, work)
        dt = time.time() - t0
        ids = [x for r in res for x in r]
        eq(len(ids), 8 * per, "every INCR answered")
        eq(len(set(ids)), len(ids), "no duplicate")
        for r in res:
            # Pipelined replies come back in order; each pipeline's IDs
            # were taken in order on one connection, so they increase.
            for k in range(1000, len(r), 1000):
                blk = r[k:k + 1000]
                eq(blk, sorted(blk), "a pipeline's IDs increase")
        print("  %d INCRs from 8 threads in %.1f s" % (len(ids), dt))
        # The same IDs as LEAF.SEGMENT gives, as bulk strings.
        r = redis.Redis(connection_pool=pool)
        v = r.execute_command("LEAF.SEGMENT", "demo", "3")
        eq(len(v), 3, "LEAF.SEGMENT demo 3")
        check(int(v[0]) > max(ids), "later than every INCR")


def test_errors_and_pipeline_order(ctx):
    with Workdir("resp-err") as wd:
        d = start(wd)
        c = Raw(d.rport)
        # The first command on a fresh node waits for demo's first segment;
        # the commands behind it wait too, and come back in order.
        c.send(b"INCR demo\r\n*3\r\n$12\r\nLEAF.SEGMENT\r\n$4\r\ndemo\r\n$1\r\n2\r\n"
               b"PING\r\nINCR demo\r\nINCR nosuchtag\r\nINCR bad/tag\r\n"
               b"LEAF.SEGMENT demo 100000000\r\nLEAF.SNOWFLAKE 0\r\nPING\r\n")
        lines = c.read_lines(12)
        check(lines[0].startswith(":"), "INCR: %s" % lines)
        a = int(lines[0][1:])
        eq(lines[1], "*2", "array of 2")
        b1, b2 = int(lines[3]), int(lines[5])
        eq(lines[6], "+PONG", "PING in order")
        c2 = int(lines[7][1:])
        check(a < b1 < b2 < c2, "in order: %s" % lines[:8])
        check(lines[8].startswith("-UNKNOWN_BIZ_TAG biz_tag 'nosuchtag'"), lines[8])
        check(lines[9].startswith("-INVALID_BIZ_TAG "), lines[9])
        check(lines[10].startswith("-INVALID_COUNT count must be an integer from 1 to"),
              lines[10])
        check(lines[11].startswith("-INVALID_COUNT "), lines[11])
        eq(c.read_lines(1), ["+PONG"], "still serving")
        c.close()
        # Segment mode off: a clear refusal, not an ID.
        d.stop()
        d2 = start(wd, flags=["--leaf.segment.enable=false"], name="noseg")
        c = Raw(d2.rport)
        c.send(b"INCR demo\r\n")
        l = c.read_lines(1)[0]
        check(l.startswith("-MODE_DISABLED segment mode is off"), l)
        c.close()


def test_auth(ctx):
    with Workdir("resp-auth") as wd:
        tokens = os.path.join(wd.path, "tokens")
        with open(tokens, "w") as f:
            f.write("tok-demo-123 demo\ntok-sf-12345 @snowflake\n")
        d = start(wd, flags=["--auth.tokens_file=" + tokens,
                             "--admin.token=admin-secret-1"])
        c = Raw(d.rport)

        def cmd(line):
            c.send(line.encode() + b"\r\n")
            return c.read_lines(1)[0]
        check(cmd("INCR demo").startswith("-NOAUTH "), "no token")
        check(cmd("AUTH wrong-token").startswith("-WRONGPASS "), "wrong token")
        check(cmd("INCR demo").startswith("-NOAUTH "), "still no token")
        eq(cmd("AUTH tok-demo-123"), "+OK", "AUTH")
        check(cmd("INCR demo").startswith(":"), "INCR with its token")
        check(cmd("LEAF.SNOWFLAKE").startswith("-NOPERM the token is not valid for "
                                               "@snowflake"), "scope")
        check(cmd("INCR other").startswith("-NOPERM "), "another tag")
        c.send(b"INFO segment\r\n")
        check(b"segment_store" not in c.read_all(1), "operator section needs admin")
        c.close()
        c = Raw(d.rport)
        c.send(b"HELLO 2 AUTH default tok-sf-12345\r\n")
        check(b"leafd" in c.read_all(1), "HELLO with AUTH")
        eq(cmd("LEAF.SNOWFLAKE 2"), "*2", "snowflake with its token")
        c.read_lines(4)
        eq(cmd("AUTH admin-secret-1"), "+OK", "admin token")
        c.send(b"INFO segment\r\n")
        check(b"segment_store:sqlite" in c.read_all(1), "operator section")
        check(cmd("INCR demo").startswith("-NOPERM "), "admin token gives no IDs")
        c.close()


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def unread_client(d, port, burst, served):
    """A client that sends burst over and over for 0.6 s and never reads:
    leafd's memory stays bounded (under 64 MB more) and served() (another
    client's check) passes meanwhile; after 1.5 s more (the test's idle
    timeout is shorter) it has been closed. Returns (bytes sent, bytes of
    answers read afterwards)."""
    base = rss_kb(d.proc.pid)
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.setblocking(False)
    sent, end = 0, time.time() + 0.6
    while time.time() < end:
        try:
            sent += s.send(burst)
        except BlockingIOError:
            time.sleep(0.01)
    grown = rss_kb(d.proc.pid) - base
    check(grown < 64 * 1024, "leafd grew %d KB with an unread client" % grown)
    served()
    # The reader that makes no progress is closed after the timeout.
    time.sleep(1.5)
    got = b""
    try:
        s.setblocking(True)
        s.settimeout(5)
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    return sent, got


def test_timeouts_and_backpressure(ctx):
    with Workdir("resp-limits") as wd:
        d = start(wd, flags=["--http.idle_timeout_ms=800", "--segment.count_max=1000"])
        # A half-written command is timed out, with a RESP error.
        c = Raw(d.rport)
        c.send(b"*2\r\n$4\r\nINCR\r\n$4\r\nde")
        t0 = time.time()
        data = c.read_all(30)
        dt = time.time() - t0
        # the error is the proof it was timed out; no upper bound on when
        # (a busy machine)
        check(data.startswith(b"-ERR "), "an error: %r" % data)
        check(dt > 0.5, "closed after the idle timeout: %.2f s" % dt)
        c.close()
        # Limits: an error in Redis's words, then close.
        c = Raw(d.rport)
        c.send(b"*1\r\n$100000\r\n")
        data = c.read_all(5)
        check(data.startswith(b"-ERR Protocol error: invalid bulk length"), repr(data))
        c.close()
        # A client that pipelines big answers and never reads them; meanwhile
        # another client is served.
        def served():
            c = Raw(d.rport)
            c.send(b"PING\r\n")
            eq(c.read_lines(1), ["+PONG"], "others are served")
            c.close()
        sent, got = unread_client(d, d.rport, b"LEAF.SEGMENT demo 1000\r\n" * 1000, served)
        check(len(got) < sent / 24 * 30000, "not every answer was made: %d bytes "
              "for %d bytes of commands" % (len(got), sent))
        eq(d.stop(), 0, "clean stop")
