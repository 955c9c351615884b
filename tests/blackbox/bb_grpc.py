"""Black-box tests of the gRPC listener (grpc.listen.port) with clients
nobody here wrote: Debian's python3-grpcio, with the messages protoc
(protobuf-compiler) generates from the repo's proto/ at test time, and
nghttp (nghttp2-client) where a client library would hide what is tested
(a grpc-timeout without the client's own deadline), and Go's gRPC client
(Debian's golang-google-grpc-dev, stubs by protoc-gen-go plugins=grpc,
built offline in GOPATH mode; tests/blackbox/go/).

Every method of leafd.v1.IdService and grpc.health.v1.Health; every status
code leafd answers (INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE,
UNAUTHENTICATED, PERMISSION_DENIED, DEADLINE_EXCEEDED, UNIMPLEMENTED,
RESOURCE_EXHAUSTED); tokens in the authorization metadata; grpc-timeout
shortening the segment wait and never lengthening it; Health/Check SERVING,
then NOT_SERVING while the store is held; many concurrent calls, every ID
distinct."""
import fcntl
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

from bbutil import Client, Workdir, check, eq, free_port, parallel, skip, wait_for

TESTS = [
    "test_every_method",
    "test_errors",
    "test_tokens",
    "test_grpc_timeout",
    "test_health_not_serving",
    "test_concurrent_calls_distinct",
    "test_parked_call_holds_back_nothing",
    "test_go_client",
]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO = os.path.join(ROOT, "proto")
_mods = {}


def mods():
    """grpc, and the messages protoc generates from proto/ (in a temp dir)."""
    if _mods:
        return _mods
    try:
        import grpc  # noqa: F401
    except ImportError:
        # Debian's python3-grpcio, when python3 is not Debian's own.
        sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import grpc
    except ImportError:
        skip("python3-grpcio is not installed (sh .ci/deps.sh test)")
    if shutil.which("protoc") is None:
        skip("protoc is not installed (protobuf-compiler; sh .ci/deps.sh test)")
    # Generated, imported, then removed here: a -j worker ends with
    # os._exit, which runs no atexit handler, and its /tmp would stay.
    out = tempfile.mkdtemp(prefix="leafd-grpc-py-")
    # health.proto under a name of its own: its package path
    # (grpc/health/v1) would shadow the grpc package itself.
    shutil.copy(os.path.join(PROTO, "grpc/health/v1/health.proto"),
                os.path.join(out, "leafd_test_health.proto"))
    subprocess.check_call(["protoc", "--proto_path=" + PROTO, "--python_out=" + out,
                           "leafd/v1/leafd.proto"])
    subprocess.check_call(["protoc", "--proto_path=" + out, "--python_out=" + out,
                           "leafd_test_health.proto"])
    sys.path.insert(0, out)
    try:
        from leafd.v1 import leafd_pb2
        import leafd_test_health_pb2
    finally:
        sys.path.remove(out)
        shutil.rmtree(out, ignore_errors=True)
    _mods.update(grpc=grpc, pb=leafd_pb2, health=leafd_test_health_pb2)
    return _mods


class Stub:
    """leafd.v1.IdService and grpc.health.v1.Health over one channel, by
    channel.unary_unary with the generated serializers."""

    METHODS = {
        "NextSegment": ("SegmentRequest", "IdsReply"),
        "NextSnowflake": ("CountRequest", "IdsReply"),
        "NextUuid": ("CountRequest", "StringsReply"),
        "NextUlid": ("CountRequest", "StringsReply"),
        "NextSerial": ("SerialRequest", "StringsReply"),
        "Lease": ("LeaseRequest", "LeaseReply"),
        "Decode": ("DecodeRequest", "DecodeReply"),
    }

    def __init__(self, port):
        m = mods()
        self.grpc, self.pb, self.hpb = m["grpc"], m["pb"], m["health"]
        self.channel = self.grpc.insecure_channel("127.0.0.1:%d" % port)
        for name, (req, rep) in self.METHODS.items():
            setattr(self, name, self.channel.unary_unary(
                "/leafd.v1.IdService/" + name,
                request_serializer=getattr(self.pb, req).SerializeToString,
                response_deserializer=getattr(self.pb, rep).FromString))
        for name in ("Check", "Watch"):
            call = self.channel.unary_unary if name == "Check" else self.channel.unary_stream
            setattr(self, name, call(
                "/grpc.health.v1.Health/" + name,
                request_serializer=self.hpb.HealthCheckRequest.SerializeToString,
                response_deserializer=self.hpb.HealthCheckResponse.FromString))

    def raw(self, path):
        """A method by path, bytes in and out."""
        return self.channel.unary_unary(path, request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)

    def close(self):
        self.channel.close()


def start(wd, flags=None, name="leafd", **kw):
    gport = free_port()
    d = wd.leafd(flags=["--grpc.listen.port=%d" % gport] + (flags or []), name=name, **kw)
    d.start()
    d.gport = gport
    wait_for(lambda: "gRPC on" in d.log(), 15, what="the gRPC listener")
    return d


def refused(fn, code, prefix=None, **kw):
    """fn(**kw) fails with status code (a grpc.StatusCode name); the
    message starts with leafd's error code prefix."""
    grpc = mods()["grpc"]
    try:
        r = fn(**kw)
        if hasattr(r, "__iter__") and not hasattr(r, "ids"):
            list(r)
    except grpc.RpcError as e:
        eq(e.code().name, code, "status of %s: %s" % (code, e.details()))
        if prefix is not None:
            check(e.details().startswith(prefix + ": "),
                  "message starts with %r: %r" % (prefix, e.details()))
        return e.details()
    raise AssertionError("expected %s, got an answer" % code)


def test_every_method(ctx):
    with Workdir("grpc-methods") as wd:
        d = start(wd, flags=["--segment.lease_max=5000"])
        s = Stub(d.gport)
        pb, hpb = s.pb, s.hpb
        r = s.NextSegment(pb.SegmentRequest(biz_tag="demo"))
        eq(len(r.ids), 1, "count 0 means 1: %r" % r)
        r = s.NextSegment(pb.SegmentRequest(biz_tag="demo", count=50))
        eq(len(r.ids), 50, "fifty IDs")
        eq(len(set(r.ids)), 50, "distinct")
        check(list(r.ids) == sorted(r.ids), "increasing")
        seg = set(r.ids)
        http = d.get("/segment/demo?count=50").ids()
        check(not seg & set(http), "HTTP and gRPC share one sequence, no repeat")
        check(min(http) > max(seg), "HTTP's IDs come after gRPC's")

        sf = s.NextSnowflake(pb.CountRequest(count=20)).ids
        eq(len(set(sf)), 20, "twenty snowflake IDs")
        dec = s.Decode(pb.DecodeRequest(id=sf[0]))
        j = d.get("/snowflake/decode/%d" % sf[0]).json()
        eq(str(dec.id), j["id"], "id")
        eq(dec.timestamp_ms, j["timestamp"], "timestamp")
        eq(dec.time, j["time"], "time")
        eq(dec.worker_id, j["worker_id"], "worker_id")
        eq(dec.sequence, j["sequence"], "sequence")
        eq(dec.has_datacenter, "datacenter_id" in j, "datacenter")

        u = s.NextUuid(pb.CountRequest(count=3)).ids
        eq(len(u), 3, "three UUIDs")
        for x in u:
            check(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                               r"[0-9a-f]{12}", x), "a UUIDv7: %r" % x)
        lid = s.NextUlid(pb.CountRequest()).ids
        eq(len(lid), 1, "one ULID")
        check(re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{26}", lid[0]), "a ULID: %r" % lid[0])
        eq(d.get("/uuid/decode/" + u[0]).status, 200, "the HTTP decoder reads it")

        ser = s.NextSerial(pb.SerialRequest(code="demo", count=2)).ids
        eq(len(set(ser)), 2, "two serials: %r" % ser)
        more = d.get("/serial/demo").text.split()
        check(more[0] > ser[1], "HTTP's serial follows: %r after %r" % (more, ser))

        lease = s.Lease(pb.LeaseRequest(biz_tag="demo", size=300))
        eq(lease.biz_tag, "demo", "lease tag")
        eq(sum(x.end - x.start for x in lease.ranges), 300, "300 IDs: %r" % lease)
        for x in lease.ranges:
            check(not any(x.start <= i < x.end for i in seg | set(http)),
                  "a lease repeats no ID served")
        step = s.Lease(pb.LeaseRequest(biz_tag="demo"))
        check(sum(x.end - x.start for x in step.ranges) >= 1, "size 0: the row's step")

        for service in ("", "leafd.v1.IdService"):
            eq(s.Check(hpb.HealthCheckRequest(service=service)).status,
               hpb.HealthCheckResponse.SERVING, "SERVING for %r" % service)
        refused(s.Check, "NOT_FOUND", "unknown_service",
                request=hpb.HealthCheckRequest(service="no.such.Service"))
        refused(s.Watch, "UNIMPLEMENTED", request=hpb.HealthCheckRequest())
        refused(s.raw("/leafd.v1.IdService/NextThing"), "UNIMPLEMENTED", "unknown_method",
                request=b"")
        refused(s.raw("/other.Service/NextSegment"), "UNIMPLEMENTED", request=b"")
        m = d.get("/metrics").text
        check(re.search(r'leafd_http_requests_total\{route="segment",status="200"\} [1-9]', m),
              "gRPC calls are counted on their routes")
        s.close()


def test_errors(ctx):
    with Workdir("grpc-errors") as wd:
        d = start(wd, flags=["--segment.count_max=100", "--segment.lease_max=1000"])
        s = Stub(d.gport)
        pb = s.pb
        refused(s.NextSegment, "INVALID_ARGUMENT", "invalid_count",
                request=pb.SegmentRequest(biz_tag="demo", count=101))
        refused(s.NextSegment, "INVALID_ARGUMENT", "invalid_biz_tag",
                request=pb.SegmentRequest(biz_tag="a b"))
        refused(s.NextSegment, "INVALID_ARGUMENT", "invalid_biz_tag",
                request=pb.SegmentRequest())
        refused(s.NextSegment, "INVALID_ARGUMENT", "invalid_message",
                request=pb.SegmentRequest(biz_tag="de\0mo"))
        refused(s.raw("/leafd.v1.IdService/NextSegment"), "INVALID_ARGUMENT",
                "invalid_message", request=b"\x0a\x09ab")
        refused(s.NextSegment, "NOT_FOUND", "unknown_biz_tag",
                request=pb.SegmentRequest(biz_tag="no-such-tag"))
        refused(s.NextSnowflake, "INVALID_ARGUMENT", "invalid_count",
                request=pb.CountRequest(count=1 << 31))
        refused(s.NextSerial, "INVALID_ARGUMENT", "invalid_serial_code",
                request=pb.SerialRequest(code="x.y"))
        refused(s.NextSerial, "NOT_FOUND", "unknown_serial_code",
                request=pb.SerialRequest(code="NOPE"))
        refused(s.Lease, "INVALID_ARGUMENT", "invalid_size",
                request=pb.LeaseRequest(biz_tag="demo", size=1001))
        refused(s.Lease, "NOT_FOUND", "unknown_biz_tag",
                request=pb.LeaseRequest(biz_tag="nope", size=5))
        refused(s.Decode, "INVALID_ARGUMENT", "invalid_id",
                request=pb.DecodeRequest(id=-5))
        # A message over grpc.max_message_bytes (65536): the transport's.
        refused(s.NextSegment, "RESOURCE_EXHAUSTED",
                request=pb.SegmentRequest(biz_tag="x" * 70000))
        # Unknown fields are skipped, as protobuf does.
        r = s.raw("/leafd.v1.IdService/NextSegment")(
            b"\x0a\x04demo\x48\x96\x01\x7a\x03xyz\x10\x03")
        eq(len(pb.IdsReply.FromString(r).ids), 3, "unknown fields skipped")
        # The server still serves (nothing above took it down).
        eq(len(s.NextSegment(pb.SegmentRequest(biz_tag="demo", count=2)).ids), 2, "alive")
        s.close()
        d.stop()
        # A mode this node does not run: UNIMPLEMENTED.
        d2 = start(wd, flags=["--leaf.snowflake.enable=false"], name="nosf")
        s = Stub(d2.gport)
        refused(s.NextSnowflake, "UNIMPLEMENTED", "mode_disabled", request=pb.CountRequest())
        refused(s.Decode, "UNIMPLEMENTED", "mode_disabled", request=pb.DecodeRequest(id=1))
        eq(len(s.NextUuid(pb.CountRequest(count=2)).ids), 2, "UUIDs need no mode")
        s.close()
        d2.stop()
        d3 = start(wd, flags=["--leaf.segment.enable=false"], name="noseg")
        s = Stub(d3.gport)
        refused(s.NextSegment, "UNIMPLEMENTED", "mode_disabled",
                request=pb.SegmentRequest(biz_tag="demo"))
        refused(s.Lease, "UNIMPLEMENTED", "mode_disabled",
                request=pb.LeaseRequest(biz_tag="demo", size=5))
        s.close()


def test_tokens(ctx):
    with Workdir("grpc-tokens") as wd:
        tokens = os.path.join(wd.path, "tokens")
        with open(tokens, "w") as f:
            f.write("tok-demo-123 demo\ntok-sf-12345 @snowflake\ntok-ser-123 @serial:demo\n")
        d = start(wd, flags=["--auth.tokens_file=" + tokens])
        s = Stub(d.gport)
        pb = s.pb

        def md(tok):
            return [("authorization", "Bearer " + tok)]
        seg = pb.SegmentRequest(biz_tag="demo", count=2)
        refused(s.NextSegment, "UNAUTHENTICATED", "token_required", request=seg)
        refused(s.NextSegment, "PERMISSION_DENIED", "token_forbidden", request=seg,
                metadata=md("tok-sf-12345"))
        refused(s.NextSegment, "PERMISSION_DENIED", request=seg, metadata=md("wrong-token"))
        eq(len(s.NextSegment(seg, metadata=md("tok-demo-123")).ids), 2, "the tag's token")
        refused(s.NextSnowflake, "UNAUTHENTICATED", request=pb.CountRequest())
        refused(s.NextSnowflake, "PERMISSION_DENIED", request=pb.CountRequest(),
                metadata=md("tok-demo-123"))
        eq(len(s.NextSnowflake(pb.CountRequest(), metadata=md("tok-sf-12345")).ids), 1,
           "@snowflake's token")
        refused(s.Lease, "UNAUTHENTICATED", request=pb.LeaseRequest(biz_tag="demo", size=5))
        eq(len(s.Lease(pb.LeaseRequest(biz_tag="demo", size=5),
                       metadata=md("tok-demo-123")).ranges) >= 1, True, "lease with token")
        refused(s.NextSerial, "UNAUTHENTICATED", request=pb.SerialRequest(code="demo"))
        eq(len(s.NextSerial(pb.SerialRequest(code="demo"), metadata=md("tok-ser-123")).ids),
           1, "@serial:demo's token")
        # Health needs no token, as /health.
        eq(s.Check(s.hpb.HealthCheckRequest()).status, s.hpb.HealthCheckResponse.SERVING,
           "health is open")
        s.close()


def frame(msg):
    return b"\0" + len(msg).to_bytes(4, "big") + msg


def nghttp(port, method, msg, headers):
    """One call by nghttp, which sets no deadline of its own: (grpc-status,
    grpc-message) as the server's trailers say."""
    if shutil.which("nghttp") is None:
        skip("nghttp is not installed (nghttp2-client; sh .ci/deps.sh test)")
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(frame(msg))
        f.flush()
        args = ["nghttp", "-v", "-d", f.name, "-H", "content-type: application/grpc",
                "-H", "te: trailers"]
        for h in headers:
            args += ["-H", h]
        p = subprocess.run(args + ["http://127.0.0.1:%d/leafd.v1.IdService/%s" % (port, method)],
                           capture_output=True, timeout=120)
    out = p.stdout.decode("utf-8", "replace")
    st = re.search(r"grpc-status: (\d+)", out)
    check(st is not None, "a grpc-status trailer in nghttp's output:\n%s" % out[-2000:])
    msg = re.search(r"grpc-message: (.*)", out)
    return int(st.group(1)), (msg.group(1).strip() if msg else "")


def add_tag(path, tag, step=1000):
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    db.execute("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
               "VALUES (?, 1, ?, 'grpc test')", (tag, step))
    db.close()


class HeldStore:
    """The embedded SQLite store's write lock, held by another connection:
    a segment load waits for it (up to segment.db_timeout_ms)."""

    def __init__(self, path):
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30)
        self.db.execute("BEGIN IMMEDIATE")

    def release(self):
        self.db.execute("ROLLBACK")
        self.db.close()


def test_grpc_timeout(ctx):
    """A grpc-timeout shorter than segment.wait_ms ends the wait early with
    DEADLINE_EXCEEDED; a longer one is cut to wait_ms (UNAVAILABLE)."""
    with Workdir("grpc-timeout") as wd:
        d = start(wd, flags=["--segment.wait_ms=1500", "--segment.db_timeout_ms=60000"])
        pb = mods()["pb"]
        eq(d.get("/segment/demo").status, 200, "the store works")
        add_tag(os.path.join(wd.path, "leafd.db"), "held")
        held = HeldStore(os.path.join(wd.path, "leafd.db"))
        try:
            msg = pb.SegmentRequest(biz_tag="held").SerializeToString()
            # The server's own answer, no client deadline: 300 ms < 1500 ms.
            st, text = nghttp(d.gport, "NextSegment", msg, ["grpc-timeout: 300m"])
            eq(st, 4, "DEADLINE_EXCEEDED from the server: %r" % text)
            # 60 s > 1500 ms: the wait is still wait_ms, a retryable refusal.
            st, text = nghttp(d.gport, "NextSegment", msg, ["grpc-timeout: 60S"])
            eq(st, 14, "UNAVAILABLE after wait_ms: %r" % text)
            check(text.startswith("tag_lookup_unavailable") or text.startswith("ids_exhausted"),
                  "the reason: %r" % text)
            # The Python client's deadline: DEADLINE_EXCEEDED too.
            s = Stub(d.gport)
            refused(s.NextSegment, "DEADLINE_EXCEEDED", request=pb.SegmentRequest(biz_tag="held"),
                    timeout=0.3)
            # Other tags are served meanwhile.
            eq(len(s.NextSegment(pb.SegmentRequest(biz_tag="demo")).ids), 1, "demo served")
            s.close()
        finally:
            held.release()
        s = Stub(d.gport)
        r = wait_for(lambda: s.NextSegment(pb.SegmentRequest(biz_tag="held"), timeout=30),
                     30, what="held served once released")
        eq(len(r.ids), 1, "served")
        s.close()


def test_health_not_serving(ctx):
    """Check is SERVING while /health answers 200, NOT_SERVING while it
    answers 503 (the store held past db_timeout_ms, a tag served dry)."""
    with Workdir("grpc-health") as wd:
        d = start(wd, flags=["--segment.wait_ms=300", "--segment.db_timeout_ms=300",
                             "--segment.db_backoff_max_ms=300"])
        s = Stub(d.gport)
        pb, hpb = s.pb, s.hpb
        eq(s.Check(hpb.HealthCheckRequest()).status, hpb.HealthCheckResponse.SERVING, "up")
        path = os.path.join(wd.path, "leafd.db")
        add_tag(path, "dry", step=10)
        wait_for(lambda: d.get("/segment/dry").status == 200, 30, step=0.2,
                 what="dry served")
        held = HeldStore(path)
        try:
            def down():
                try:
                    s.NextSegment(pb.SegmentRequest(biz_tag="dry", count=5), timeout=30)
                except mods()["grpc"].RpcError as e:
                    check(e.code().name == "UNAVAILABLE", "UNAVAILABLE: %s" % e)
                    check(e.details().startswith("ids_exhausted: "), e.details())
                return d.get("/health").status == 503
            wait_for(down, 30, step=0.2, what="/health 503")
            eq(s.Check(hpb.HealthCheckRequest()).status, hpb.HealthCheckResponse.NOT_SERVING,
               "NOT_SERVING while /health is 503")
            eq(s.Check(hpb.HealthCheckRequest(service="leafd.v1.IdService")).status,
               hpb.HealthCheckResponse.NOT_SERVING, "for the service too")
        finally:
            held.release()
        wait_for(lambda: d.get("/segment/dry").status == 200 and d.get("/health").status == 200,
                 30, step=0.2, what="/health 200 again")
        eq(s.Check(hpb.HealthCheckRequest()).status, hpb.HealthCheckResponse.SERVING,
           "SERVING again")
        s.close()


def test_parked_call_holds_back_nothing(ctx):
    """A call waiting for a segment (the store held) is parked: later calls on
    the same channel (one HTTP/2 connection) are answered meanwhile, and the
    parked one gets its ID once the store is free."""
    with Workdir("grpc-parked") as wd:
        d = start(wd, flags=["--segment.wait_ms=30000", "--segment.db_timeout_ms=60000"])
        pb = mods()["pb"]
        path = os.path.join(wd.path, "leafd.db")
        add_tag(path, "slow")
        s = Stub(d.gport)
        eq(len(s.NextSegment(pb.SegmentRequest(biz_tag="demo")).ids), 1, "warm")
        held = HeldStore(path)
        try:
            parked = s.NextSegment.future(pb.SegmentRequest(biz_tag="slow"), timeout=120)
            for _ in range(20):
                eq(len(s.NextSegment(pb.SegmentRequest(biz_tag="demo", count=2)).ids), 2,
                   "answered while a call on the channel is parked")
                eq(len(s.NextUuid(pb.CountRequest()).ids), 1, "a UUID too")
            # The store is still held, so the parked call cannot have an ID.
            check(not parked.done(), "the parked call still waits")
        finally:
            held.release()
        eq(len(parked.result(timeout=60).ids), 1, "the parked call's ID once the store is free")
        s.close()


def test_concurrent_calls_distinct(ctx):
    """Eight threads on four channels, and 200 calls in flight on one:
    every segment and snowflake ID distinct, gRPC's and HTTP's together."""
    with Workdir("grpc-load") as wd:
        d = start(wd, flags=["--threads=2", "--segment.wait_ms=10000"])
        pb = mods()["pb"]
        stubs = [Stub(d.gport) for _ in range(4)]
        seen, lock = [], threading.Lock()

        def run(i):
            s = stubs[i % 4]
            http = Client(d.port)
            mine = []
            for k in range(150):
                mine += s.NextSegment(pb.SegmentRequest(biz_tag="demo", count=7)).ids
                mine += s.NextSnowflake(pb.CountRequest(count=3)).ids
                if k % 50 == 0:
                    mine += http.get("/segment/demo?count=5").ids()
            http.close()
            with lock:
                seen.extend(mine)
        parallel(8, run)
        s = stubs[0]
        futs = [s.NextSegment.future(pb.SegmentRequest(biz_tag="demo", count=2))
                for _ in range(200)]
        for f in futs:
            seen.extend(f.result(timeout=60).ids)
        eq(len(seen), 8 * 150 * 10 + 8 * 3 * 5 + 400, "every call answered")
        eq(len(set(seen)), len(seen), "no ID twice among %d" % len(seen))
        for st in stubs:
            st.close()


def go_client():
    """tests/blackbox/go/leafd_grpc_client.go built against stubs protoc-gen-go
    generates from proto/ (GOPATH mode: Debian's Go packages, no network).
    Built once for both black-box lanes, under a lock, into a file named by
    the hash of its sources (so a binary is reused only when it was built
    from the same ones), with the build cache under build/."""
    for tool in ("go", "protoc", "protoc-gen-go"):
        if shutil.which(tool) is None:
            skip("%s is not installed (golang-go, golang-google-grpc-dev, "
                 "golang-goprotobuf-dev; sh .ci/deps.sh test)" % tool)
    if not os.path.isdir("/usr/share/gocode/src/google.golang.org/grpc"):
        skip("golang-google-grpc-dev is not installed (sh .ci/deps.sh test)")
    main_go = os.path.join(ROOT, "tests/blackbox/go/leafd_grpc_client.go")
    h = hashlib.sha256()
    for f in (main_go, os.path.join(PROTO, "leafd/v1/leafd.proto")):
        with open(f, "rb") as fh:
            h.update(fh.read())
    outdir = os.path.join(ROOT, "build", "tests", "go")
    os.makedirs(outdir, exist_ok=True)
    binary = os.path.join(outdir, "leafd_grpc_client-" + h.hexdigest()[:16])
    with open(os.path.join(outdir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(binary):
            return binary
        gopath = tempfile.mkdtemp(prefix="leafd-go-")
        try:
            src = os.path.join(gopath, "src")
            os.makedirs(os.path.join(src, "leafdclient"))
            subprocess.check_call(["protoc", "--proto_path=" + PROTO,
                                   "--go_out=plugins=grpc:" + src, "leafd/v1/leafd.proto"])
            shutil.copy(main_go, os.path.join(src, "leafdclient", "main.go"))
            env = dict(os.environ, GO111MODULE="off", GOFLAGS="", GOPROXY="off", GOENV="off",
                       GOPATH=gopath + ":/usr/share/gocode",
                       GOCACHE=os.path.join(ROOT, "build", "gocache"))
            p = subprocess.run(["go", "build", "-o", binary + ".tmp", "."],
                               cwd=os.path.join(src, "leafdclient"),
                               env=env, capture_output=True, timeout=900)
        finally:
            shutil.rmtree(gopath, ignore_errors=True)
        check(p.returncode == 0, "go build: %s" % p.stderr.decode()[-3000:])
        os.replace(binary + ".tmp", binary)
    return binary


def test_go_client(ctx):
    """Go's gRPC client: every kind of call, a NOT_FOUND with leafd's code,
    health, and 64 goroutines on one connection with every ID distinct."""
    binary = go_client()
    with Workdir("grpc-go") as wd:
        d = start(wd, flags=["--segment.wait_ms=10000"])
        p = subprocess.run([binary, "127.0.0.1:%d" % d.gport], capture_output=True,
                           timeout=300)
        out = p.stdout.decode()
        check(p.returncode == 0, "the Go client failed: %s\n%s" % (out, p.stderr.decode()))
        got = dict(line.split(" ", 1) for line in out.splitlines())
        eq(len(got["segment"].strip("[]").split()), 3, "three segment IDs: %r" % got)
        sf = got["snowflake"].strip("[]").split()
        eq(got["decode"].split()[0], sf[0], "Decode of the first snowflake ID")
        j = d.get("/snowflake/decode/" + sf[0]).json()
        eq(int(got["decode"].split()[1]), j["timestamp"], "its timestamp, as HTTP")
        check(re.fullmatch(r"[0-9a-f-]{36}", got["uuid"]), "a UUID: %r" % got["uuid"])
        eq(got["lease"], "100", "a lease of 100")
        eq(got["notfound"], "NotFound", "NOT_FOUND")
        eq(got["health"], "SERVING", "health")
        eq(got["distinct"], str(64 * 20 * 5), "distinct IDs from 64 goroutines")
