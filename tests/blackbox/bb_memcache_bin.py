"""Black-box tests of memcached's binary protocol on leafd's memcached port
(memcache.listen.port; docs/memcache.md): clients nobody here wrote, npm's
memjs (binary only) and libmemcached's binary mode (memccat and memcstat
--binary), and a raw socket for every opcode: GET, GETQ, GETK,
GETKQ, NOOP, VERSION, STAT, QUIT, QUITQ, every storage opcode refused
(0x83) without a close and its body skipped, unknown opcodes (0x81), the
refusals' status codes (0x01 for an unknown tag, 0x04, 0x08 noauth, 0x86
for a 503), opaque and CAS; bad frames (lengths that disagree, a key over
250 bytes, a body over 1 MiB, a bad magic byte after the first frame, a
frame cut short) answered and closed, never a hang; pipelined quiet gets
closed by a NOOP, a client that never reads (bounded memory), a text client
on the same port at the same time, and the memcached TLS port."""
import os
import socket
import sqlite3
import struct
import subprocess
import time

from bbutil import Workdir, check, eq, free_port
from bb_memcache import need, start
from bb_resp import unread_client
from bb_resp_multi import node_redis_dir

TESTS = [
    "test_bin_opcodes",
    "test_bin_refusals",
    "test_bin_bad_frames",
    "test_bin_pipeline",
    "test_bin_memjs",
    "test_bin_libmemcached",
    "test_bin_tls",
]

HDR = struct.Struct(">BBHBBHIIQ")
GET, SET, ADD, REPLACE, DELETE, INCR, DECR, QUIT, FLUSH = range(9)
GETQ, NOOP, VERSION, GETK, GETKQ, APPEND, PREPEND, STAT = range(9, 17)
QUITQ = 0x17
# Every storage opcode and its quiet form, with the extras memcached asks
# of each (set/add/replace: flags and expiry; incr/decr: delta, initial,
# expiry; flush, touch, gat: expiry; verbosity: a level).
STORAGE = [(SET, 8), (ADD, 8), (REPLACE, 8), (DELETE, 0), (INCR, 20), (DECR, 20),
           (FLUSH, 4), (APPEND, 0), (PREPEND, 0), (0x11, 8), (0x12, 8), (0x13, 8),
           (0x14, 0), (0x15, 20), (0x16, 20), (0x18, 4), (0x19, 0), (0x1a, 0),
           (0x1b, 4), (0x1c, 4), (0x1d, 4), (0x1e, 4), (0x23, 4), (0x24, 4)]
VERSION_STR = b"1.4.0 leafd-0.1.0"


def frame(op, key=b"", extras=b"", val=b"", opaque=0, cas=0, keylen=None, extlen=None,
          bodylen=None, magic=0x80):
    kl = len(key) if keylen is None else keylen
    el = len(extras) if extlen is None else extlen
    bl = len(key) + len(extras) + len(val) if bodylen is None else bodylen
    return HDR.pack(magic, op, kl, el, 0, 0, bl, opaque, cas) + extras + key + val


class Bin:
    """A binary-protocol socket: send frames, read response frames."""

    def __init__(self, port, sock=None):
        self.s = sock or socket.create_connection(("127.0.0.1", port), 5)
        self.s.settimeout(30)   # a busy machine may be late; a hang still fails
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def _fill(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                return False
            self.buf += chunk
        return True

    def read(self):
        """(opcode, status, key, extras, value, opaque, cas), or None at EOF."""
        if not self._fill(24):
            check(self.buf == b"", "a frame cut short: %r" % self.buf)
            return None
        magic, op, kl, el, _, st, bl, opq, cas = HDR.unpack(self.buf[:24])
        eq(magic, 0x81, "response magic")
        check(self._fill(24 + bl), "a body cut short")
        body, self.buf = self.buf[24:24 + bl], self.buf[24 + bl:]
        return op, st, body[el:el + kl], body[:el], body[el + kl:], opq, cas

    def read_eof(self, timeout=30):
        """Everything until the server closes (bytes)."""
        self.s.settimeout(timeout)
        data = self.buf
        try:
            while True:
                chunk = self.s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            check(False, "no close in %d s after %r" % (timeout, data[:200]))
        except ConnectionResetError:
            pass
        self.buf = b""
        return data

    def close(self):
        self.s.close()


def get_id(c, key=b"demo", op=GET, opaque=1):
    c.send(frame(op, key, opaque=opaque))
    r = c.read()
    eq((r[0], r[1], r[5]), (op, 0, opaque), "%r: %r" % (key, r))
    eq(r[3], b"\0\0\0\0", "flags 0")
    return r


def test_bin_opcodes(ctx):
    with Workdir("mcbin-ops") as wd:
        d = start(wd)
        c = Bin(d.mport)
        # GET: the ID in decimal, its CAS the ID, the opaque echoed.
        a = get_id(c, opaque=0xdeadbeef)
        eq(int(a[4]), a[6], "CAS is the ID")
        eq(a[2], b"", "GET: no key")
        b = get_id(c, op=GETK, opaque=2)
        eq(b[2], b"demo", "GETK: the key")
        check(int(b[4]) > int(a[4]), "demo increases: %s then %s" % (a[4], b[4]))
        # GETQ, GETKQ answer a hit like GET, GETK.
        q = get_id(c, op=GETQ, opaque=3)
        kq = get_id(c, op=GETKQ, opaque=4)
        eq(kq[2], b"demo", "GETKQ: the key")
        check(int(a[4]) < int(b[4]) < int(q[4]) < int(kq[4]), "in order")
        sf = get_id(c, b"@snowflake")
        check(int(sf[4]) > 1 << 22 and int(sf[4]) == sf[6], "a snowflake ID, its CAS")
        u = get_id(c, b"@uuid", op=GETK)
        eq((len(u[4]), u[2]), (36, b"@uuid"), "a UUID")
        check(u[6] == int(u[4].replace(b"-", b"")[:16], 16), "a UUID's CAS: its first 64 bits")
        eq(len(get_id(c, b"@ulid")[4]), 26, "a ULID")
        # The request's CAS is not looked at.
        c.send(frame(GET, b"demo", cas=12345, opaque=6))
        eq(c.read()[1], 0, "a get with a CAS")
        # An unknown tag: key not found, its code in the value; quiet: no answer.
        c.send(frame(GET, b"nosuch", opaque=7))
        r = c.read()
        eq((r[0], r[1], r[5]), (GET, 0x01, 7), "unknown tag: %r" % (r,))
        check(r[4].startswith(b"unknown_biz_tag: "), r[4])
        c.send(frame(GETK, b"nosuch", opaque=8))
        r = c.read()
        eq((r[1], r[2]), (0x01, b"nosuch"), "GETK's miss carries the key")
        c.send(frame(GETQ, b"nosuch", opaque=9) + frame(GETKQ, b"nosuch", opaque=10) +
               frame(NOOP, opaque=11))
        r = c.read()
        eq((r[0], r[1], r[5], r[4]), (NOOP, 0, 11, b""), "quiet misses: only the NOOP")
        # VERSION, STAT.
        c.send(frame(VERSION, opaque=12))
        r = c.read()
        eq((r[0], r[1], r[4], r[5]), (VERSION, 0, VERSION_STR, 12), "version")
        c.send(frame(STAT, opaque=13))
        stats = {}
        while True:
            r = c.read()
            eq((r[0], r[1], r[5]), (STAT, 0, 13), "a stat frame")
            if r[2] == b"" and r[4] == b"":
                break
            stats[r[2].decode()] = r[4].decode()
        eq(int(stats["pid"]), d.proc.pid, "stats pid")
        check(int(stats["get_hits"]) >= 8 and int(stats["get_misses"]) >= 4, stats)
        eq(int(stats["cmd_get"]), int(stats["get_hits"]) + int(stats["get_misses"]), "cmd_get")
        c.send(frame(STAT, b"settings", opaque=14))
        names = []
        while True:
            r = c.read()
            if r[2] == b"":
                break
            names.append((r[2], r[4]))
        check((b"binding_protocol", b"auto-negotiate") in names, names)
        c.send(frame(STAT, b"items", opaque=15))
        eq(c.read()[2:5], (b"", b"", b""), "stats items: the end frame only")
        c.send(frame(STAT, b"bogus", opaque=16))
        r = c.read()
        eq((r[1], r[5]), (0x01, 16), "an unknown stats group, as memcached: %r" % (r,))
        check(r[4].startswith(b"unknown_stats_group: "), r[4])
        # QUIT: answered, then closed.
        c.send(frame(QUIT, opaque=17) + frame(GET, b"demo"))
        r = c.read()
        eq((r[0], r[1], r[5]), (QUIT, 0, 17), "quit answered")
        eq(c.read_eof(), b"", "then closed, the get after it unanswered")
        c.close()
        c = Bin(d.mport)
        c.send(frame(QUITQ) + frame(GET, b"demo"))
        eq(c.read_eof(), b"", "QUITQ: closed with no answer")
        c.close()
        # HTTP and the binary port share the allocator.
        h = int(d.get("/segment/demo").text)
        check(h > int(kq[4]), "HTTP after the binary gets")
        eq(d.stop(), 0, "clean stop")


def test_bin_refusals(ctx):
    with Workdir("mcbin-refusals") as wd:
        tokens = os.path.join(wd.path, "tokens")
        with open(tokens, "w") as f:
            f.write("tok-demo-123 demo\n")
        # segment.wait_ms short (start's 30 s comes first): a 503 below.
        d = start(wd, flags=["--segment.db_timeout_ms=60000", "--segment.wait_ms=300"])
        c = Bin(d.mport)
        # Every storage opcode: 0x83, the connection kept, the body skipped
        # (it holds a GET frame, which would be answered if it were read).
        inner = frame(GET, b"demo", opaque=999)
        for op, ext in STORAGE:
            c.send(frame(op, b"k", b"\0" * ext, inner, opaque=op))
            r = c.read()
            eq((r[0], r[1], r[5]), (op, 0x83, op), "storage opcode 0x%02x: %r" % (op, r))
            check(r[4].startswith(b"not_supported: "), r[4])
        # A body that comes later, in pieces, is skipped too.
        c.send(frame(SET, b"k", b"\0" * 8, bodylen=1 + 8 + 1000, opaque=50))
        eq(c.read()[1], 0x83, "set refused before its body")
        for i in range(10):
            c.send(b"x" * 100)
            time.sleep(0.02)
        get_id(c, opaque=51)
        # Unknown opcodes (SASL's, range ops, anything): 0x81, body skipped.
        for op in (0x20, 0x21, 0x31, 0x55, 0xff):
            c.send(frame(op, b"key", val=inner, opaque=op))
            r = c.read()
            eq((r[0], r[1], r[5]), (op, 0x81, op), "unknown opcode 0x%02x: %r" % (op, r))
        # A bad tag: invalid arguments.
        for key in (b"bad/key", b"t" * 129, b"sp ace", b"\x00\x01"):
            c.send(frame(GET, key, opaque=60))
            r = c.read()
            eq((r[1], r[5]), (0x04, 60), "%r: %r" % (key, r))
            check(r[4].startswith(b"invalid_biz_tag: "), r[4])
        get_id(c, opaque=61)
        # A 503 (the tag lookup waits for a database held locked longer
        # than segment.wait_ms): temporary failure, its code in the value.
        db = sqlite3.connect(os.path.join(wd.path, "leafd.db"), isolation_level=None,
                             timeout=60)
        db.execute("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('late', 1, 1000)")
        db.execute("BEGIN EXCLUSIVE")
        try:
            c.send(frame(GETKQ, b"late", opaque=62))
            r = c.read()
        finally:
            db.execute("COMMIT")
            db.close()
        eq((r[0], r[1], r[2], r[5]), (GETKQ, 0x86, b"late", 62), "a 503: %r" % (r,))
        check(r[4].split(b":")[0] in (b"tag_lookup_unavailable", b"ids_exhausted"), r[4])
        c.close()
        eq(d.stop(), 0, "clean stop")
        # Tokens: a protected key is an authentication error (also quiet).
        d = start(wd, flags=["--auth.tokens_file=" + tokens], name="tokens")
        c = Bin(d.mport)
        c.send(frame(GETQ, b"demo", opaque=70) + frame(NOOP, opaque=71))
        r = c.read()
        eq((r[0], r[1], r[5]), (GETQ, 0x08, 70), "noauth: %r" % (r,))
        check(r[4].startswith(b"noauth: demo needs a token"), r[4])
        eq(c.read()[0], NOOP, "then the NOOP")
        eq(len(get_id(c, b"@uuid")[4]), 36, "UUIDs need no token")
        c.close()
        eq(d.stop(), 0, "clean stop")


def test_bin_bad_frames(ctx):
    with Workdir("mcbin-bad") as wd:
        d = start(wd, flags=["--http.idle_timeout_ms=1500"])
        big = 1024 * 1024
        for name, data, status in [
            ("key over 250 bytes", frame(GET, b"k" * 251, opaque=5), 0x04),
            ("key over the body", frame(GET, b"demo", bodylen=3, opaque=5), 0x04),
            ("extras over the body", frame(SET, b"", b"\0" * 8, bodylen=4, opaque=5), 0x04),
            ("get with extras", frame(GET, b"demo", b"\0" * 4, opaque=5), 0x04),
            ("get without a key", frame(GET, opaque=5), 0x04),
            ("get with a value", frame(GET, b"demo", val=b"x", opaque=5), 0x04),
            ("noop with a body", frame(NOOP, val=b"x", opaque=5), 0x04),
            ("version with a key", frame(VERSION, b"k", opaque=5), 0x04),
            ("stat with extras", frame(STAT, b"", b"\0", opaque=5), 0x04),
            ("a set over 1 MiB", frame(SET, b"k", b"\0" * 8, bodylen=9 + big + 1, opaque=5),
             0x03),
            ("a body of 4 GiB", frame(0x42, b"k", bodylen=0xffffffff, opaque=5), 0x03),
        ]:
            c = Bin(d.mport)
            c.send(frame(NOOP, opaque=1) + data)
            eq(c.read()[0], NOOP, "%s: the frame before it is answered" % name)
            r = c.read()
            check(r is not None, "%s: an error frame" % name)
            eq((r[1], r[5]), (status, 5), "%s: %r" % (name, r))
            check(r[4].startswith(b"bad_request: "), r[4])
            eq(c.read_eof(), b"", "%s: then closed" % name)
            c.close()
        # A set of exactly 1 MiB is refused and skipped, the connection kept.
        c = Bin(d.mport)
        c.send(frame(SET, b"k", b"\0" * 8, b"v" * big, opaque=6))
        eq(c.read()[1], 0x83, "a 1 MiB set: not supported")
        get_id(c, opaque=7)
        # A bad magic byte after the first frame: closed, no answer.
        c.send(b"get demo\r\n")
        eq(c.read_eof(), b"", "text after binary: closed with no answer")
        c.close()
        # A response magic (0x81) as a request: the same.
        c = Bin(d.mport)
        get_id(c)
        c.send(frame(GET, b"demo", magic=0x81))
        eq(c.read_eof(), b"", "a response frame as a request: closed")
        c.close()
        # A frame sent a byte at a time is answered whole.
        c = Bin(d.mport)
        for byte in frame(GETK, b"@snowflake", opaque=8):
            c.send(bytes([byte]))
            time.sleep(0.002)
        r = c.read()
        eq((r[0], r[1], r[2], r[5]), (GETK, 0, b"@snowflake", 8), "byte by byte: %r" % (r,))
        # A frame cut short, then silence: the idle timeout closes it, with
        # an error frame (never a hang, never text).
        c.send(frame(GET, b"@snowflake", opaque=9)[:30])
        t0 = time.time()
        r = c.read()
        check(time.time() - t0 > 1.0, "closed after the idle timeout, not before")
        eq((r[0], r[1], r[5]), (GET, 0x04, 9), "a timed-out frame: %r" % (r,))
        check(r[4].startswith(b"request_timeout: "), r[4])
        eq(c.read_eof(), b"", "then closed")
        c.close()
        # A refused set whose body stops coming: the same, for the set.
        c = Bin(d.mport)
        c.send(frame(SET, b"k", b"\0" * 8, bodylen=9 + 100, opaque=10) + b"v" * 50)
        eq(c.read()[1], 0x83, "the set refused")
        r = c.read()
        eq((r[0], r[1], r[5]), (SET, 0x04, 10), "a timed-out body: %r" % (r,))
        eq(c.read_eof(), b"", "then closed")
        c.close()
        # Cut short, then the client closes: leafd goes on.
        for cut in (1, 10, 24, 27):
            s = socket.create_connection(("127.0.0.1", d.mport), 5)
            s.sendall(frame(GET, b"demo")[:cut])
            s.close()
        c = Bin(d.mport)
        get_id(c)
        c.close()
        eq(d.stop(), 0, "clean stop")


def test_bin_pipeline(ctx):
    with Workdir("mcbin-pipeline") as wd:
        d = start(wd, flags=["--http.idle_timeout_ms=800"])
        c = Bin(d.mport)
        # 3,000 quiet gets in one send, every third a miss, then a NOOP: the
        # hits come back in order, with their keys and opaques, then the NOOP.
        keys = [b"demo", b"nosuch", b"@snowflake"]
        n = 3000
        c.send(b"".join(frame(GETKQ, keys[i % 3], opaque=i) for i in range(n)) +
               frame(NOOP, opaque=n))
        got = []
        while True:
            r = c.read()
            if r[0] == NOOP:
                eq(r[5], n, "the NOOP's opaque")
                break
            eq(r[1], 0, "a hit: %r" % (r,))
            got.append((r[5], r[2], int(r[4])))
        eq([o for o, _, _ in got], [i for i in range(n) if i % 3 != 1], "hits in order")
        check(all(k == keys[o % 3] for o, k, _ in got), "the keys")
        demo = [v for _, k, v in got if k == b"demo"]
        sf = [v for _, k, v in got if k == b"@snowflake"]
        eq(len(set(demo + sf)), len(got), "no ID twice")
        check(demo == sorted(demo) and sf == sorted(sf), "increasing")
        # A text client on the same port, at the same time.
        t = socket.create_connection(("127.0.0.1", d.mport), 5)
        t.settimeout(30)
        t.sendall(b"get demo\r\n")
        c.send(frame(GET, b"demo", opaque=1))
        line = b""
        while not line.endswith(b"END\r\n"):
            line += t.recv(4096)
        v_text = int(line.split(b"\r\n")[1])
        v_bin = int(c.read()[4])
        check(v_text > demo[-1] and v_bin > demo[-1] and v_text != v_bin, "both served")
        t.sendall(b"version\r\n")
        eq(t.recv(4096), b"VERSION 1.4.0 leafd-0.1.0\r\n", "text stays text")
        t.close()
        c.close()
        # A client that pipelines gets and never reads: memory stays bounded,
        # others are served, and it is closed once it makes no progress.
        def served():
            c = Bin(d.mport)
            eq(get_id(c, b"@ulid")[1], 0, "others are served")
            c.close()
        sent, got = unread_client(d, d.mport, frame(GETK, b"@uuid") * 200, served)
        per = 24 + 4 + 5 + 36
        check(len(got) < sent // 29 * per, "not every answer was made: %d bytes for %d "
              "bytes of gets" % (len(got), sent))
        eq(d.stop(), 0, "clean stop")


def test_bin_memjs(ctx):
    here = node_redis_dir()
    with Workdir("mcbin-memjs") as wd:
        d = start(wd)
        p = subprocess.run(["node", os.path.join(here, "memjs.js"), str(d.mport)],
                           capture_output=True, timeout=120)
        out = p.stdout.decode() + p.stderr.decode()
        eq(p.returncode, 0, "node memjs.js: %s" % out[-1500:])
        check("ok" in out, out[-500:])
        # memjs's IDs are below HTTP's next one.
        last = int([x for x in out.split() if x.startswith("last=")][0][5:])
        check(int(d.get("/segment/demo").text) > last, "HTTP after memjs")
        eq(d.stop(), 0, "clean stop")


def test_bin_libmemcached(ctx):
    for t in ("memccat", "memcstat"):
        need(t)
    with Workdir("mcbin-tools") as wd:
        d = start(wd)
        srv = "--servers=127.0.0.1:%d" % d.mport
        p = subprocess.run(["memccat", "--binary", srv, "demo", "@snowflake", "demo"],
                           capture_output=True, timeout=60)
        eq(p.returncode, 0, "memccat --binary: %r" % p.stderr)
        ids = [int(x) for x in p.stdout.split()]
        eq(len(ids), 3, "three values: %r" % p.stdout)
        check(ids[2] > ids[0], "demo increases")
        p = subprocess.run(["memccat", "--binary", srv, "nosuch"], capture_output=True,
                           timeout=60)
        check(p.returncode != 0 and p.stdout == b"", "an unknown tag is no value: %r" % (p,))
        p = subprocess.run(["memcstat", "--binary", srv], capture_output=True, timeout=60)
        eq(p.returncode, 0, "memcstat --binary: %r" % p.stderr)
        out = p.stdout.decode()
        check("pid: %d" % d.proc.pid in out and "leafd_version:" in out, out)
        # The connections were binary ones: leafd counted their frames.
        c = Bin(d.mport)
        c.send(frame(STAT))
        stats = {}
        while True:
            r = c.read()
            if r[2] == b"":
                break
            stats[r[2]] = r[4]
        check(int(stats[b"get_hits"]) >= 3, stats)
        c.close()
        eq(d.stop(), 0, "clean stop")


def test_bin_tls(ctx):
    from bb_tls import Pki, start as tls_start
    with Workdir("mcbin-tls") as wd:
        pki = Pki(wd)
        mport = free_port()
        d = tls_start(wd, pki, flags=["--memcache.listen.tls_port=%d" % mport])
        ids = []
        for _ in range(2):
            raw = socket.create_connection(("127.0.0.1", mport), 10)
            s = pki.context().wrap_socket(raw, server_hostname="localhost")
            c = Bin(0, sock=s)
            for i in range(50):
                ids.append(int(get_id(c, opaque=i)[4]))
            c.send(frame(GETQ, b"nosuch") + frame(VERSION, opaque=7))
            eq(c.read()[4], VERSION_STR, "version over TLS, the quiet miss silent")
            c.send(frame(SET, b"k", b"\0" * 8, b"v"))
            eq(c.read()[1], 0x83, "set refused over TLS")
            c.close()
        eq(len(set(ids)), 100, "distinct IDs over TLS")
        check(ids == sorted(ids), "in order")
        r = d.get("/segment/demo")
        check(int(r.body) > ids[-1], "HTTP goes on above them")
        eq(d.stop(), 0, "exit status")
