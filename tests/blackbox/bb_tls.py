"""Black-box tests of TLS on leafd's listeners (listen.tls_port,
resp.listen.tls_port, tls.*) with clients nobody here wrote: curl
(--cacert, --cert/--key), openssl s_client, redis-cli --tls, python3-redis
with ssl=True, and Python's ssl module. The certificates come from a
throwaway CA that each test makes with the openssl command.

Covered: HTTPS beside HTTP and HTTPS alone; a handshake that never finishes
is closed after tls.handshake_timeout_ms while other clients are served, and
stalled handshakes count against http.max_connections; a pipelined burst
larger than the input buffer over one TLS connection; a slow request (408)
and a client that never reads its answers (memory bounded); mutual TLS required
and optional, a client certificate standing in for a token
(cert:CN=<name>); SIGHUP reloading a new certificate while a keep-alive
connection goes on, and keeping the old one when the new file is bad;
the chain sent is the one in tls.cert_file, never one built from
tls.ca_file; tls.min_version; files refused at start and by --check-config; ALPN h2 on
the HTTPS port (curl) and gRPC over TLS (python3-grpcio with
ssl_channel_credentials) on grpc.listen.tls_port."""
import http.client
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

from bb_resp import need, redis_mod, rss_kb
from bbutil import Workdir, check, eq, free_port, skip, wait_for

TESTS = [
    "test_https_beside_http_and_alone",
    "test_chain_from_cert_file",
    "test_handshake_timeout_and_limits",
    "test_pipelined_burst",
    "test_slow_request_and_unread_answers",
    "test_mtls_required",
    "test_mtls_optional_cert_token",
    "test_redis_tls",
    "test_memcache_tls",
    "test_sighup_reload",
    "test_min_version",
    "test_bad_files_refused",
    "test_alpn_h2_and_grpc",
]


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Pki:
    """A throwaway CA (ca.pem), a server certificate for 127.0.0.1 and
    localhost (srv), a client certificate with CN=alice (cli), and one from
    another CA (rogue)."""

    def __init__(self, wd):
        need("openssl")
        self.dir = os.path.join(wd.path, "pki")
        os.makedirs(self.dir)
        self.ca("ca")
        self.ca("rogueca")
        self.srv = self.leaf("srv", "localhost", "ca")
        self.cli = self.leaf("cli", "alice", "ca")
        self.rogue = self.leaf("rogue", "alice", "rogueca")

    def path(self, name):
        return os.path.join(self.dir, name)

    def ca(self, name):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", name + ".key", "-out", name + ".pem", "-days", "2",
                "-subj", "/CN=leafd test " + name, cwd=self.dir)

    def leaf(self, name, cn, ca):
        with open(self.path("san.ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn,
                cwd=self.dir)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey",
                ca + ".key", "-CAcreateserial", "-out", name + ".pem", "-days", "2",
                "-extfile", "san.ext", cwd=self.dir)
        return (self.path(name + ".pem"), self.path(name + ".key"))

    def conf(self, **extra):
        flags = ["--tls.cert_file=" + self.srv[0], "--tls.key_file=" + self.srv[1]]
        for k, v in extra.items():
            flags.append("--tls.%s=%s" % (k, v))
        return flags

    def context(self, cert=None):
        ctx = ssl.create_default_context(cafile=self.path("ca.pem"))
        if cert is not None:
            ctx.load_cert_chain(cert[0], cert[1])
        return ctx


def start(wd, pki, flags=None, http=True, resp_tls=False, **kw):
    """leafd with HTTPS on d.tport (and plain HTTP on d.port when http)."""
    tport = free_port()
    f = ["--listen.tls_port=%d" % tport] + pki.conf() + list(flags or [])
    if not http:
        f.append("--listen.port=0")
    if resp_tls:
        d_rport = free_port()
        f.append("--resp.listen.tls_port=%d" % d_rport)
    d = wd.leafd(flags=f, port=None if http else tport, **kw)
    d.start()
    d.tport = tport
    if resp_tls:
        d.rport = d_rport
    wait_for(lambda: socket.create_connection(("127.0.0.1", tport), 0.5).close() or True,
             15, what="the HTTPS port %d" % tport)
    if resp_tls:
        wait_for(lambda: socket.create_connection(("127.0.0.1", d_rport), 0.5).close()
                 or True, 15, what="the RESP TLS port %d" % d_rport)
    return d


def curl(pki, port, path="/segment/demo", cert=None, extra=()):
    """(exit code, HTTP status, body) of curl over HTTPS."""
    need("curl")
    args = ["curl", "-q", "-sS", "--max-time", "20", "--cacert", pki.path("ca.pem"),
            "-o", "-", "-w", "\n%{http_code}"]
    if cert is not None:
        args += ["--cert", cert[0], "--key", cert[1]]
    args += list(extra) + ["https://127.0.0.1:%d%s" % (port, path)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    body, _, code = p.stdout.rpartition("\n")
    return p.returncode, code, body


def https_get(pki, port, path, conn=None, cert=None):
    if conn is None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=20,
                                           context=pki.context(cert))
    conn.request("GET", path)
    r = conn.getresponse()
    return conn, r.status, r.read()


def test_https_beside_http_and_alone(ctx):
    with Workdir("tls-https") as wd:
        pki = Pki(wd)
        d = start(wd, pki)
        rc, code, body = curl(pki, d.tport)
        eq(rc, 0, "curl exit")
        eq(code, "200", "HTTPS status")
        check(body.strip().isdigit(), "an ID over HTTPS: %r" % body)
        eq(d.get("/segment/demo").status, 200, "plain HTTP beside it")
        # Without the CA, curl refuses leafd's certificate: it is verified.
        p = subprocess.run(["curl", "-q", "-sS", "--max-time", "20",
                            "https://127.0.0.1:%d/segment/demo" % d.tport],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode != 0, "curl without --cacert must refuse the certificate")
        # HTTP on the HTTPS port: the handshake fails, the connection closes.
        s = socket.create_connection(("127.0.0.1", d.tport), 10)
        s.sendall(b"GET /segment/demo HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(20)
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        s.close()
        check(b"HTTP/1.1 200" not in data, "no plain answer on the TLS port: %r" % data)
        eq(d.stop(), 0, "exit status")

        # listen.port 0 with listen.tls_port: HTTPS only.
        d = start(wd, pki, http=False, name="tlsonly")
        rc, code, body = curl(pki, d.tport, "/snowflake")
        eq((rc, code), (0, "200"), "HTTPS alone")
        log = d.log()
        check("listening on https://127.0.0.1:%d" % d.tport in log, log)
        check("listening on http://" not in log, "no plain HTTP listener: " + log)
        eq(d.stop(), 0, "exit status")


def test_chain_from_cert_file(ctx):
    """A server certificate from an intermediate CA: with the intermediate
    after it in tls.cert_file, a client that trusts only the root verifies
    it; with the leaf alone in the file, it does not, even when
    tls.ca_file holds the intermediate (leafd sends the file's chain and
    builds none: SSL_MODE_NO_AUTO_CHAIN)."""
    with Workdir("tls-chain") as wd:
        pki = Pki(wd)
        with open(pki.path("ca.ext"), "w") as f:
            f.write("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "inter.key", "-out", "inter.csr", "-subj", "/CN=leafd test inter",
                cwd=pki.dir)
        openssl("x509", "-req", "-in", "inter.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", "inter.pem", "-days", "2", "-extfile", "ca.ext",
                cwd=pki.dir)
        leaf = pki.leaf("isrv", "localhost", "inter")
        with open(pki.path("isrv-chain.pem"), "w") as out:
            for name in (leaf[0], pki.path("inter.pem")):
                with open(name) as f:
                    out.write(f.read())
        for name, cert, extra, ok in (
                ("chain", pki.path("isrv-chain.pem"), [], True),
                ("leafonly", leaf[0], ["--tls.ca_file=" + pki.path("inter.pem")], False)):
            d = start(wd, pki, ["--tls.cert_file=" + cert, "--tls.key_file=" + leaf[1]]
                      + extra, name=name)
            rc, code, body = curl(pki, d.tport)
            if ok:
                eq((rc, code), (0, "200"), "%s: verified against the root alone" % name)
                check(body.strip().isdigit(), "an ID: %r" % body)
            else:
                # 60: curl's "peer certificate cannot be authenticated"
                eq(rc, 60, "%s: no intermediate sent, so curl must refuse the "
                   "certificate (code %r)" % (name, code))
            eq(d.stop(), 0, "%s: exit status" % name)


def test_handshake_timeout_and_limits(ctx):
    with Workdir("tls-hstimeout") as wd:
        pki = Pki(wd)
        aport = free_port()
        d = start(wd, pki, ["--tls.handshake_timeout_ms=1500",
                            "--http.max_connections=3",
                            "--admin.listen.port=%d" % aport])
        d.client.close()

        def metrics():
            # from the admin listener, whose connections are not counted
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % aport,
                                        timeout=20) as r:
                return r.read().decode()

        def open_conns():
            return int(re.search(r"^leafd_http_connections (\d+)$", metrics(),
                                 re.M).group(1))
        # start()'s probe of the TLS port, and any connection of its, must
        # be gone before the three below take every slot.
        wait_for(lambda: open_conns() == 0, 30, what="no connection open")
        # A client that sends half a ClientHello and then nothing.
        hello = client_hello()
        stalled = []
        t0 = time.monotonic()
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", d.tport), 10)
            s.sendall(hello[:20])
            stalled.append(s)
        # They take every slot: a fourth connection is closed at once.
        extra = socket.create_connection(("127.0.0.1", d.tport), 10)
        extra.settimeout(20)
        try:
            eq(extra.recv(100), b"", "over max_connections: closed")
        except ConnectionResetError:
            pass
        extra.close()
        # Each stalled handshake is closed after the timeout, not before.
        for s in stalled:
            s.settimeout(30)
            try:
                data = s.recv(100)
            except ConnectionResetError:
                data = b""
            eq(data, b"", "a stalled handshake is closed")
            check(time.monotonic() - t0 >= 1.4,
                  "closed %.2fs after connect, before tls.handshake_timeout_ms"
                  % (time.monotonic() - t0))
            s.close()
        # Their slots are free again: a real client is served.
        rc, code, _ = wait_curl(pki, d.tport)
        eq((rc, code), (0, "200"), "served after the stalled ones closed")
        # The counters (each I/O thread's, summed): at least the three
        # stalled ones failed, curl's succeeded. Asked until they say so
        # (an I/O thread may count a close a moment after the client saw
        # it); the failure names what they said last.
        seen = {}

        def counted():
            m = metrics()
            for k in ("failed", "ok"):
                v = re.search(r'leafd_tls_handshakes_total\{result="%s"\} (\d+)' % k, m)
                seen[k] = int(v.group(1)) if v else None
            return (seen["failed"] or 0) >= 3 and (seen["ok"] or 0) >= 1
        try:
            wait_for(counted, 20, what="the handshake counters")
        except Exception:
            check(False, "handshake counters: %r (want failed >= 3, ok >= 1)" % seen)

        # openssl s_client: a full handshake, leafd's certificate verified.
        need("openssl")
        p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % d.tport,
                            "-CAfile", pki.path("ca.pem"), "-verify_return_error",
                            "-ign_eof"],
                           input="GET /health HTTP/1.0\r\n\r\n", capture_output=True,
                           text=True, timeout=60)
        check("Verify return code: 0 (ok)" in p.stdout, p.stdout[-2000:])
        check("HTTP/1.1 200" in p.stdout, p.stdout[-2000:])
        eq(d.stop(), 0, "exit status")


def wait_curl(pki, port):
    """curl until it gets an answer (slots free up as the server notices)."""
    out = [None]

    def ok():
        out[0] = curl(pki, port)
        return out[0][1] == "200"
    wait_for(ok, 30, step=0.2, what="an HTTPS answer")
    return out[0]


def client_hello():
    """A real TLS ClientHello, from Python's ssl over memory BIOs."""
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    s = c.wrap_bio(i, o, server_hostname="localhost")
    try:
        s.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return o.read()


def test_pipelined_burst(ctx):
    with Workdir("tls-pipeline") as wd:
        pki = Pki(wd)
        d = start(wd, pki)
        n = 1500            # ~60 kB: records larger than the input buffer
        raw = socket.create_connection(("127.0.0.1", d.tport), 10)
        s = pki.context().wrap_socket(raw, server_hostname="localhost")
        s.settimeout(30)
        s.sendall(b"GET /segment/demo HTTP/1.1\r\nHost: x\r\n\r\n" * n)
        data = b""
        while data.count(b"HTTP/1.1 200") < n or not data.endswith(b"\n"):
            chunk = s.recv(65536)
            check(chunk, "the connection closed after %d answers"
                  % data.count(b"HTTP/1.1 200"))
            data += chunk
        ids = [int(x.split(b"\r\n\r\n", 1)[1].strip())
               for x in data.split(b"HTTP/1.1 200 OK")[1:]]
        eq(len(ids), n, "answers")
        eq(len(set(ids)), n, "distinct IDs")
        check(ids == sorted(ids), "in order")
        s.close()
        eq(d.stop(), 0, "exit status")


def test_slow_request_and_unread_answers(ctx):
    """After the handshake the plain limits hold: a half-sent request gets
    408 after http.idle_timeout_ms, and a client that pipelines big answers
    and never reads them holds leafd's memory to the output high-water
    mark while others are served."""
    with Workdir("tls-limits") as wd:
        pki = Pki(wd)
        d = start(wd, pki, ["--http.idle_timeout_ms=800"])
        ctxt = pki.context()
        s = ctxt.wrap_socket(socket.create_connection(("127.0.0.1", d.tport), 10),
                             server_hostname="localhost")
        s.sendall(b"GET /segment/demo HTTP/1.1\r\nHost: x")
        t0 = time.monotonic()
        s.settimeout(30)
        data = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        except (ConnectionResetError, ssl.SSLError):
            pass
        s.close()
        check(b"HTTP/1.1 408" in data, "a slow request over TLS: %r" % data[:200])
        check(time.monotonic() - t0 >= 0.7, "408 before http.idle_timeout_ms")

        base = rss_kb(d.proc.pid)
        s = ctxt.wrap_socket(socket.create_connection(("127.0.0.1", d.tport), 10),
                             server_hostname="localhost")
        s.setblocking(False)
        req = b"GET /segment/demo?count=1000 HTTP/1.1\r\nHost: x\r\n\r\n" * 200
        end = time.time() + 0.8
        while time.time() < end:
            try:
                s.send(req)
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                time.sleep(0.01)
        grown = rss_kb(d.proc.pid) - base
        check(grown < 64 * 1024, "leafd grew %d KB with an unread TLS client" % grown)
        rc, code, _ = curl(pki, d.tport)
        eq((rc, code), (0, "200"), "others are served")
        s.close()
        eq(d.stop(), 0, "exit status")


def test_mtls_required(ctx):
    with Workdir("tls-mtls") as wd:
        pki = Pki(wd)
        d = start(wd, pki, pki.conf(ca_file=pki.path("ca.pem"), client_auth="required"),
                  resp_tls=True)
        rc, code, body = curl(pki, d.tport, cert=pki.cli)
        eq((rc, code), (0, "200"), "with a client certificate")
        rc, code, body = curl(pki, d.tport)
        check(rc != 0 and code != "200" and not body.strip().isdigit(),
              "no certificate: no ID (%s %s %r)" % (rc, code, body))
        rc, code, body = curl(pki, d.tport, cert=pki.rogue)
        check(rc != 0 and code != "200" and not body.strip().isdigit(),
              "untrusted certificate: no ID (%s %s %r)" % (rc, code, body))
        need("redis-cli")
        base = ["redis-cli", "--tls", "--cacert", pki.path("ca.pem"), "-p", str(d.rport)]
        p = subprocess.run(base + ["--cert", pki.cli[0], "--key", pki.cli[1],
                                   "INCR", "demo"], capture_output=True, text=True,
                           timeout=60)
        check(p.stdout.strip().isdigit(), "redis-cli --tls with a certificate: %r %r"
              % (p.stdout, p.stderr))
        p = subprocess.run(base + ["INCR", "demo"], capture_output=True, text=True,
                           timeout=60)
        check(not p.stdout.strip().isdigit(), "redis-cli --tls without one: %r"
              % p.stdout)
        eq(d.stop(), 0, "exit status")


def test_mtls_optional_cert_token(ctx):
    with Workdir("tls-certtoken") as wd:
        pki = Pki(wd)
        tokens = os.path.join(wd.path, "tokens")
        with open(tokens, "w") as f:
            f.write("cert:CN=alice demo\nbob-token-123 demo\n")
        d = start(wd, pki, pki.conf(ca_file=pki.path("ca.pem"), client_auth="optional")
                  + ["--auth.tokens_file=" + tokens], resp_tls=True)
        eq(curl(pki, d.tport)[1], "401", "no certificate, no token")
        eq(curl(pki, d.tport, cert=pki.cli)[1], "200", "alice's certificate")
        eq(curl(pki, d.tport, "/snowflake", cert=pki.cli)[1], "403",
           "alice's certificate is not valid for @snowflake")
        eq(curl(pki, d.tport, extra=["-H", "Authorization: Bearer cert:CN=alice"])[1],
           "403", "a bearer token naming the certificate")
        eq(curl(pki, d.tport, extra=["-H", "Authorization: Bearer bob-token-123"])[1],
           "200", "a token, no certificate")
        check(curl(pki, d.tport, cert=pki.rogue)[0] != 0,
              "optional: an untrusted certificate fails the handshake")
        # Plain HTTP never has an identity.
        eq(d.get("/segment/demo").status, 401, "plain HTTP, no token")
        redis = redis_mod()
        r = redis.Redis(host="127.0.0.1", port=d.rport, ssl=True,
                        ssl_ca_certs=pki.path("ca.pem"), ssl_certfile=pki.cli[0],
                        ssl_keyfile=pki.cli[1], socket_timeout=20)
        a = r.incr("demo")
        b = r.incr("demo")
        check(b > a, "INCR over TLS with a certificate: %s %s" % (a, b))
        r.close()
        r = redis.Redis(host="127.0.0.1", port=d.rport, ssl=True,
                        ssl_ca_certs=pki.path("ca.pem"), socket_timeout=20)
        try:
            r.incr("demo")
            raise AssertionError("INCR without a certificate or token answered")
        except redis.exceptions.RedisError as e:      # AuthenticationError
            check("token" in str(e), str(e))
        r.close()
        eq(d.stop(), 0, "exit status")


def test_redis_tls(ctx):
    with Workdir("tls-redis") as wd:
        pki = Pki(wd)
        d = start(wd, pki, resp_tls=True)
        need("redis-cli")
        p = subprocess.run(["redis-cli", "--tls", "--cacert", pki.path("ca.pem"), "-p",
                            str(d.rport), "INCR", "demo"], capture_output=True, text=True,
                           timeout=60)
        check(p.stdout.strip().isdigit(), "redis-cli --tls: %r %r" % (p.stdout, p.stderr))
        redis = redis_mod()
        r = redis.Redis(host="127.0.0.1", port=d.rport, ssl=True,
                        ssl_ca_certs=pki.path("ca.pem"), socket_timeout=30)
        pipe = r.pipeline(transaction=False)
        for _ in range(2000):
            pipe.incr("demo")
        ids = pipe.execute()
        eq(len(set(ids)), 2000, "distinct IDs from a pipeline over TLS")
        check(ids == sorted(ids), "in order")
        r.close()
        eq(d.stop(), 0, "exit status")


def test_memcache_tls(ctx):
    """memcached's text protocol over TLS (memcache.listen.tls_port): the
    same IDs as HTTP, with pymemcache's tls_context; a client that skips TLS
    gets no answer, and the plain memcached port stays off."""
    from pymemcache.client.base import Client as McClient
    with Workdir("tls-memcache") as wd:
        pki = Pki(wd)
        mport = free_port()
        d = start(wd, pki, flags=["--memcache.listen.tls_port=%d" % mport])
        wait_for(lambda: socket.create_connection(("127.0.0.1", mport), 0.5).close()
                 or True, 15, what="the memcached TLS port %d" % mport)
        mc = McClient(("127.0.0.1", mport), tls_context=pki.context(), timeout=30)
        ids = [int(mc.get("demo")) for _ in range(200)]
        eq(len(set(ids)), 200, "distinct IDs over TLS")
        check(ids == sorted(ids), "in order")
        check(int(mc.get("@snowflake")) > 0, "a snowflake ID")
        mc.close()
        # Clear text on the TLS port: the handshake fails, no ID comes back.
        s = socket.create_connection(("127.0.0.1", mport), 10)
        s.sendall(b"get demo\r\n")
        s.settimeout(30)
        try:
            got = s.recv(4096)
        except OSError:
            got = b""
        check(b"VALUE" not in got, "no ID in clear text on the TLS port: %r" % got)
        s.close()
        r = d.get("/segment/demo")
        check(int(r.body) > ids[-1], "HTTP goes on above the memcached IDs")
        eq(d.stop(), 0, "exit status")
    # With a tokens file: a client certificate's cert:CN= line gives its
    # scopes over memcached too; without one, no ID.
    from pymemcache.exceptions import MemcacheClientError
    with Workdir("tls-memcache-cert") as wd:
        pki = Pki(wd)
        tokens = os.path.join(wd.path, "tokens")
        with open(tokens, "w") as f:
            f.write("cert:CN=alice demo\n")
        mport = free_port()
        d = start(wd, pki, pki.conf(ca_file=pki.path("ca.pem"), client_auth="optional")
                  + ["--auth.tokens_file=" + tokens, "--memcache.listen.tls_port=%d" % mport])
        wait_for(lambda: socket.create_connection(("127.0.0.1", mport), 0.5).close()
                 or True, 15, what="the memcached TLS port %d" % mport)
        mc = McClient(("127.0.0.1", mport), tls_context=pki.context(pki.cli), timeout=30)
        check(int(mc.get("demo")) > 0, "alice's certificate gives demo")
        try:
            mc.get("@snowflake")
            raise AssertionError("@snowflake answered for a certificate without it")
        except MemcacheClientError as e:
            check("noauth" in str(e), str(e))
        mc.close()
        mc = McClient(("127.0.0.1", mport), tls_context=pki.context(), timeout=30)
        try:
            mc.get("demo")
            raise AssertionError("demo answered without a certificate")
        except MemcacheClientError as e:
            check("noauth" in str(e), str(e))
        mc.close()
        eq(d.stop(), 0, "exit status")


def peer_cert(pki, port):
    raw = socket.create_connection(("127.0.0.1", port), 10)
    s = pki.context().wrap_socket(raw, server_hostname="localhost")
    der = s.getpeercert(binary_form=True)
    s.close()
    return der


def test_sighup_reload(ctx):
    with Workdir("tls-reload") as wd:
        pki = Pki(wd)
        d = start(wd, pki)
        first = peer_cert(pki, d.tport)
        conn, st, _ = https_get(pki, d.tport, "/segment/demo")
        eq(st, 200, "keep-alive connection")
        # Under load: clients take IDs over HTTPS all through the reloads,
        # each on a keep-alive connection it opens again now and then (new
        # handshakes meet whichever certificate is in place).
        stop = threading.Event()
        got, errors = [], []

        def client(i):
            c, n = None, 0
            while not stop.is_set():
                try:
                    if c is None or n % 20 == 0:
                        if c is not None:
                            c.close()
                        c = http.client.HTTPSConnection("127.0.0.1", d.tport, timeout=30,
                                                        context=pki.context())
                    c.request("GET", "/segment/demo")
                    r = c.getresponse()
                    body = r.read()
                    if r.status != 200:
                        errors.append((r.status, body))
                    else:
                        got.append(int(body))
                    n += 1
                except (OSError, http.client.HTTPException) as e:
                    errors.append(repr(e))
                    c = None
            if c is not None:
                c.close()
        load = [threading.Thread(target=client, args=(i,)) for i in range(3)]
        for t in load:
            t.start()
        # A new certificate and key from the same CA, in place.
        new = pki.leaf("srv2", "localhost", "ca")
        shutil.copy(new[0], pki.srv[0])
        shutil.copy(new[1], pki.srv[1])
        d.send(signal.SIGHUP)
        wait_for(lambda: "TLS certificate and key reloaded" in d.log(), 20,
                 what="the reload log line")
        conn, st, _ = https_get(pki, d.tport, "/segment/demo", conn=conn)
        eq(st, 200, "the open connection after the reload")
        second = peer_cert(pki, d.tport)
        check(second != first, "new handshakes get the new certificate")
        # A bad file: refused with one line, the new certificate kept.
        with open(pki.srv[0], "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n")
        d.send(signal.SIGHUP)
        wait_for(lambda: "keeping the running TLS certificate" in d.log(), 20,
                 what="the refusal log line")
        line = [x for x in d.log().splitlines() if "keeping the running TLS" in x][-1]
        check("tls.cert_file" in line, line)
        eq(peer_cert(pki, d.tport), second, "the running certificate kept")
        conn, st, _ = https_get(pki, d.tport, "/segment/demo", conn=conn)
        eq(st, 200, "the open connection after a refused reload")
        # A key that does not match: refused too.
        shutil.copy(new[0], pki.srv[0])
        shutil.copy(pki.cli[1], pki.srv[1])
        d.send(signal.SIGHUP)
        wait_for(lambda: d.log().count("keeping the running TLS certificate") >= 2, 20,
                 what="the second refusal")
        eq(peer_cert(pki, d.tport), second, "kept after a mismatched key")
        stop.set()
        for t in load:
            t.join()
        eq(errors, [], "every request under load answered through the reloads")
        check(len(got) > 0, "the load took IDs")
        eq(len(set(got)), len(got), "no ID twice under load (%d IDs)" % len(got))
        conn.close()
        eq(d.stop(), 0, "exit status")


def test_min_version(ctx):
    need("openssl")
    with Workdir("tls-minver") as wd:
        pki = Pki(wd)
        d = start(wd, pki, pki.conf(min_version="1.3"))

        def s_client(ver):
            return subprocess.run(["openssl", "s_client", "-connect",
                                   "127.0.0.1:%d" % d.tport, "-CAfile", pki.path("ca.pem"),
                                   ver], input="", capture_output=True, text=True,
                                  timeout=60)
        p = s_client("-tls1_2")
        check(p.returncode != 0 or "Cipher is (NONE)" in p.stdout,
              "TLS 1.2 refused: " + p.stdout[-1500:])
        p = s_client("-tls1_3")
        check("TLSv1.3" in p.stdout and "Verify return code: 0" in p.stdout,
              "TLS 1.3 served: " + p.stdout[-1500:])
        rc, code, _ = curl(pki, d.tport, extra=["--tls-max", "1.2"])
        check(rc != 0, "curl --tls-max 1.2 refused")
        eq(d.stop(), 0, "exit status")


def test_bad_files_refused(ctx):
    from bbutil import LEAFD
    with Workdir("tls-badfiles") as wd:
        pki = Pki(wd)
        port = free_port()

        def check_config(*flags):
            return subprocess.run([LEAFD, "--check-config", "--listen.tls_port=%d" % port]
                                  + list(flags), capture_output=True, text=True,
                                  cwd=wd.path, timeout=60)
        p = check_config(*pki.conf())
        eq(p.returncode, 0, "good files: " + p.stderr)
        p = check_config("--tls.cert_file=" + pki.path("nope.pem"),
                         "--tls.key_file=" + pki.srv[1])
        check(p.returncode != 0 and "tls.cert_file" in p.stderr and "nope.pem" in p.stderr,
              p.stderr)
        p = check_config("--tls.cert_file=" + pki.srv[0], "--tls.key_file=" + pki.cli[1])
        check(p.returncode != 0 and "does not match" in p.stderr or
              "tls.key_file" in p.stderr, p.stderr)
        p = check_config("--tls.cert_file=" + pki.srv[0])
        check(p.returncode != 0 and "tls.key_file" in p.stderr, p.stderr)
        p = check_config(*pki.conf(client_auth="required"))
        check(p.returncode != 0 and "tls.ca_file" in p.stderr, p.stderr)
        # The server itself refuses to start, with the same reason.
        d = wd.leafd(flags=["--listen.tls_port=%d" % port, "--tls.cert_file=" + pki.srv[0],
                            "--tls.key_file=" + pki.cli[1]])
        rc = d.start(expect_fail=True)
        check(rc != 0 and "tls.key_file" in d.log(), d.log())


def grpc_mod():
    try:
        import grpc  # noqa: F401
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import grpc
        return grpc
    except ImportError:
        skip("python3-grpcio is not installed (sh .ci/deps.sh test)")


def test_alpn_h2_and_grpc(ctx):
    with Workdir("tls-alpn") as wd:
        pki = Pki(wd)
        gport = free_port()
        d = start(wd, pki, ["--grpc.listen.tls_port=%d" % gport])
        wait_for(lambda: socket.create_connection(("127.0.0.1", gport), 0.5).close() or True,
                 15, what="the gRPC TLS port")
        # curl offers h2 and http/1.1 by ALPN: leafd picks h2.
        rc, code, body = curl(pki, d.tport, extra=["-w", "\n%{http_version}"])
        # (the second -w wins: code is the HTTP version)
        check(rc == 0 and body.strip().isdigit() and code == "2",
              "HTTP/2 over TLS: %s %r %r" % (rc, code, body))
        rc, code, body = curl(pki, d.tport, extra=["--http1.1"])
        eq((rc, code), (0, "200"), "HTTP/1.1 over TLS")
        grpc = grpc_mod()
        opts = [("grpc.ssl_target_name_override", "localhost")]
        with open(pki.path("ca.pem"), "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        ch = grpc.secure_channel("127.0.0.1:%d" % gport, creds, options=opts)
        call = ch.unary_unary("/leafd.v1.IdService/NextSegment",
                              request_serializer=lambda x: x,
                              response_deserializer=lambda x: x)
        try:
            call(b"", timeout=20)
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
        # Any answer from leafd's HTTP/2 layer: TLS and ALPN h2 worked.
        check(code != grpc.StatusCode.UNAVAILABLE, "gRPC over TLS: %s" % code)
        ch.close()
        # A client that does not trust leafd's CA gets no channel.
        ch = grpc.secure_channel("127.0.0.1:%d" % gport, grpc.ssl_channel_credentials(),
                                 options=opts)
        try:
            ch.unary_unary("/leafd.v1.IdService/NextSegment",
                           request_serializer=lambda x: x,
                           response_deserializer=lambda x: x)(b"", timeout=20)
            raise AssertionError("an untrusted server certificate was accepted")
        except grpc.RpcError as e:
            eq(e.code(), grpc.StatusCode.UNAVAILABLE, "untrusted: no channel")
        ch.close()
        eq(d.stop(), 0, "exit status")
