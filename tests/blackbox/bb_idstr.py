"""Black-box tests of IDs as strings (docs/id-kinds.md, "IDs as strings"):
segment and snowflake IDs as fixed-width base62 / Crockford base32 with
the configured prefixes, asked for over HTTP (text and JSON, count=N),
RESP, memcached and gRPC; read back by the decode routes of each; every
string checked against a reference decoder written here from the docs
(alphabet, width, prefix), string order against numeric order; bad strings
and bad encodings refused with a clear 400 and a JSON error code (a RESP
error, a memcached CLIENT_ERROR, gRPC INVALID_ARGUMENT); and the js53
snowflake layout, whose every ID is at most 2^53-1."""
import socket

from bbutil import Workdir, check, eq, free_port, wait_for

TESTS = [
    "test_http_strings_and_decode",
    "test_http_bad_strings",
    "test_resp_and_memcached_strings",
    "test_grpc_strings",
    "test_js53_layout",
    "test_tinyid_strings",
]

B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
B32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
MAXID = 2 ** 63 - 1
JS_MAX = 2 ** 53 - 1


def ref_decode(s, prefix):
    """The reference reading of an ID string the server wrote: the prefix
    and '_' (when the kind has one), then 11 of base62 or 13 of base32."""
    if prefix:
        check(s.startswith(prefix + "_"), "%r starts with %s_" % (s, prefix))
        s = s[len(prefix) + 1:]
    if len(s) == 11:
        alpha = B62
    else:
        eq(len(s), 13, "width of %r" % s)
        alpha = B32
    v = 0
    for ch in s:
        check(ch in alpha, "%r in the alphabet (%r)" % (ch, s))
        v = v * len(alpha) + alpha.index(ch)
    check(v <= MAXID, "%r at most 2^63-1" % s)
    return v


def ref_encode(v, enc, prefix=""):
    alpha, width = (B62, 11) if enc == "base62" else (B32, 13)
    out = ""
    for _ in range(width):
        out = alpha[v % len(alpha)] + out
        v //= len(alpha)
    return (prefix + "_" if prefix else "") + out


def conf(extra=None):
    c = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "true",
         "segment.prefix.ord": "demo", "snowflake.prefix": "evt",
         "snowflake.cache_file": "sf.json"}
    c.update(extra or {})
    return c


def err(r, status, code, has=None):
    eq(r.status, status, "status of %r" % r)
    j = r.json()
    eq(j["error"], code, "error code of %r" % r)
    if has is not None:
        check(has in j["message"], "%r in %r" % (has, j["message"]))


def test_http_strings_and_decode(ctx):
    with Workdir("idstr-http") as wd:
        d = wd.leafd(conf=conf()).start()
        nums, strs = [], []
        for enc in ("base62", "base32"):
            for fmt in ("text", "json"):
                r = d.get("/segment/demo?count=50&enc=%s&format=%s" % (enc, fmt))
                eq(r.status, 200, "segment %s %s: %r" % (enc, fmt, r))
                eq(r.header("Cache-Control"), "no-store", "no-store")
                got = r.json()["ids"] if fmt == "json" else r.text.split()
                if fmt == "json":
                    eq(r.json()["biz_tag"], "demo", "JSON names the tag")
                eq(len(got), 50, "count=50")
                for s in got:
                    v = ref_decode(s, "ord")
                    eq(s, ref_encode(v, enc, "ord"), "canonical spelling")
                    j = d.get("/segment/decode/" + s).json()
                    eq(j, {"id": str(v), "encoding": enc, "biz_tag": "demo"},
                       "decode of %s" % s)
                    nums.append(v)
                    strs.append(s)
            # the same numbers as a client would get in decimal: next one up
            n = d.get("/segment/demo").ids()[0]
            check(n > nums[-1], "decimal %d after the strings' %d" % (n, nums[-1]))
        eq(len(set(nums)), len(nums), "no ID twice")
        eq(nums, sorted(nums), "issue order")
        for enc in ("base62", "base32"):
            same = [s for s in strs if len(s) == 4 + (11 if enc == "base62" else 13)]
            eq(same, sorted(same), "%s strings sort as their IDs" % enc)
        # an unprefixed string reads too; the Leaf path takes ?enc= as well
        eq(d.get("/segment/decode/" + strs[0][4:]).json(),
           {"id": str(nums[0]), "encoding": "base62"}, "no prefix: no tag")
        leaf = d.get("/api/segment/get/demo?enc=base32").text.split()
        eq(len(leaf), 1, "Leaf's path")
        ref_decode(leaf[0], "ord")

        sf = []
        for enc in ("base62", "base32"):
            r = d.get("/snowflake?count=100&enc=%s&format=json" % enc)
            eq(r.status, 200, "snowflake %s" % enc)
            got = r.json()["ids"]
            eq(len(got), 100, "count=100")
            for s in got:
                v = ref_decode(s, "evt")
                j = d.get("/snowflake/decode/" + s).json()
                k = d.get("/snowflake/decode/%d" % v).json()
                eq(j, k, "decode of %s is the decimal's" % s)
                sf.append((v, s))
        eq(len(set(v for v, _ in sf)), 200, "no snowflake ID twice")
        vals = [v for v, _ in sf]
        eq(vals, sorted(vals), "issue order")
        # ?enc= names the encoding: an all-digit base62 string reads as
        # base62, not as a decimal
        digits = "12345678901"
        eq(d.get("/snowflake/decode/%s?enc=base62" % digits).json()["id"],
           str(ref_decode(digits, "")), "?enc=base62 reads digits as base62")
        eq(d.get("/snowflake/decode/%s" % digits).json()["id"], digits,
           "all digits without ?enc= is decimal")
        # numbers stay the default
        eq(len(d.get("/snowflake?count=3").ids()), 3, "decimal by default")


def test_http_bad_strings(ctx):
    with Workdir("idstr-bad") as wd:
        d = wd.leafd(conf=conf()).start()
        err(d.get("/segment/demo?enc=base64"), 400, "invalid_encoding", "base62")
        err(d.get("/segment/demo?enc=base62&enc=base32"), 400, "repeated_parameter")
        err(d.get("/snowflake?enc=BASE62"), 400, "invalid_encoding")
        err(d.get("/snowflake?enc="), 400, "invalid_encoding")
        bad = [
            ("ord_0000000000", "wrong length"),          # 10
            ("ord_000000000000", "wrong length"),        # 12
            ("ord_00000000000000", "wrong length"),      # 14
            ("0000000000-", "bad character"),
            ("000000-000000", "bad character"),          # no hyphens
            ("000000000000U", "bad character"),
            ("ord_0000000000%2B", "bad character"),
            ("AzL8n0Y58m8", "out of range"),             # 2^63
            ("zzzzzzzzzzz", "out of range"),
            ("8000000000000", "out of range"),
            ("Ord_00000000001", "bad prefix"),
            ("_00000000001", "bad prefix"),
            ("ord__00000000001", "bad prefix"),
            ("%00" * 3, None),
            ("x" * 200, None),
        ]
        for s, why in bad:
            r = d.get("/segment/decode/" + s)
            err(r, 400, "invalid_id", why)
        err(d.get("/segment/decode/usr_00000000001"), 400, "unknown_prefix", "usr")
        err(d.get("/segment/decode/evt_00000000001"), 400, "unknown_prefix")
        err(d.get("/snowflake/decode/ord_00000000001"), 400, "unknown_prefix")
        err(d.get("/snowflake/decode/evt_AzL8n0Y58m8"), 400, "invalid_id", "out of range")
        err(d.get("/snowflake/decode/evt_0000000000"), 400, "invalid_id", "wrong length")
        err(d.get("/snowflake/decode/0000000000000?enc=base62"), 400, "invalid_id",
            "base62 takes 11")
        err(d.get("/snowflake/decode/12a"), 400, "invalid_id", "decimal")
        # the edges decode
        eq(d.get("/segment/decode/AzL8n0Y58m7").json()["id"], str(MAXID), "2^63-1")
        eq(d.get("/segment/decode/7zzzzzzzzzzzz").json()["id"], str(MAXID),
           "2^63-1, lower case")
        eq(d.get("/segment/decode/00000000000").json()["id"], "0", "0")
        eq(d.get("/segment/decode/ord_000000000000L").json()["id"], "1", "L is 1")
        # a config that breaks the prefix rules does not start
        bad_conf = wd.leafd(conf=conf({"segment.prefix.Ord": "demo"}), name="bad")
        check(bad_conf.start(expect_fail=True) != 0, "a bad prefix refuses to start")
        check("a prefix is" in bad_conf.log(), "and says why: %s" % bad_conf.log())


def resp(port, *args):
    """One RESP command, its raw answer (one read of what arrives)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        msg = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            msg += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(msg)
        data = b""
        while True:
            chunk = s.recv(65536)
            data += chunk
            if not chunk or parse_resp(data) is not None:
                return parse_resp(data)
    finally:
        s.close()


def parse_resp(data):
    """An array of bulk strings, a bulk string or an error, or None when
    more is needed."""
    def one(i):
        end = data.find(b"\r\n", i)
        if end < 0:
            return None
        t, v = data[i:i + 1], data[i + 1:end]
        if t == b"-":
            return ("error", v.decode()), end + 2
        if t == b":":
            return int(v), end + 2
        if t == b"$":
            n = int(v)
            if len(data) < end + 2 + n + 2:
                return None
            return data[end + 2:end + 2 + n].decode(), end + 2 + n + 2
        if t == b"*":
            out, j = [], end + 2
            for _ in range(int(v)):
                r = one(j)
                if r is None:
                    return None
                out.append(r[0])
                j = r[1]
            return out, j
        raise AssertionError("unexpected RESP %r" % data[:80])
    r = one(0)
    return None if r is None else r[0]


def mc(port, line):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(line.encode() + b"\r\n")
        data = b""
        while not (data.endswith(b"END\r\n") or b"ERROR" in data):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data.decode()
    finally:
        s.close()


LONG = "e" + "v" * 61 + "t"                 # a prefix of 63, the longest


def test_resp_and_memcached_strings(ctx):
    with Workdir("idstr-resp-mc") as wd:
        rport, mport = free_port(), free_port()
        d = wd.leafd(conf=conf({"resp.listen.port": rport,
                                "memcache.listen.port": mport,
                                "snowflake.prefix": LONG})).start()
        wait_for(lambda: "memcached protocol on" in d.log(), 15, what="memcached")
        seen = []
        for enc in ("base62", "BASE32", "dec"):
            got = resp(rport, "LEAF.SEGMENT", "demo", "5", enc)
            eq(len(got), 5, "LEAF.SEGMENT 5 %s: %r" % (enc, got))
            for s in got:
                seen.append(int(s) if enc == "dec" else ref_decode(s, "ord"))
            got = resp(rport, "LEAF.SNOWFLAKE", "3", enc)
            eq(len(got), 3, "LEAF.SNOWFLAKE 3 %s: %r" % (enc, got))
            for s in got:
                v = int(s) if enc == "dec" else ref_decode(s, LONG)
                if enc != "dec":
                    j = resp(rport, "LEAF.DECODE", s)
                    check('"id":"%d"' % v in j, "LEAF.DECODE %s: %s" % (s, j))
        eq(seen, sorted(seen), "issue order")
        eq(len(set(seen)), len(seen), "no ID twice")
        j = resp(rport, "LEAF.DECODE", ref_encode(seen[0], "base62", "ord"))
        check('"biz_tag":"demo"' in j and '"id":"%d"' % seen[0] in j,
              "LEAF.DECODE of a segment string: %s" % j)
        e = resp(rport, "LEAF.SEGMENT", "demo", "1", "hex")
        eq(e[0], "error", "a bad encoding is an error: %r" % (e,))
        check(e[1].startswith("INVALID_ENCODING "), "its code: %r" % (e,))
        # 26 characters (14-letter prefix, '_', 11 base62) as a ULID is:
        # read as an ID string, not as a ULID (before: "above the largest
        # ULID" for IDs a node with that prefix issues).
        e = resp(rport, "LEAF.DECODE", ref_encode(seen[0], "base62", "abcdefghijklmn"))
        eq(e[0], "error", "an unknown prefix is an error: %r" % (e,))
        check("ULID" not in e[1] and "prefix" in e[1], "read as an ID string: %r" % (e,))
        e = resp(rport, "LEAF.DECODE", "ord_AzL8n0Y58m8")
        eq(e[0], "error", "an overflow is an error: %r" % (e,))
        check("out of range" in e[1], "and says so: %r" % (e,))
        e = resp(rport, "LEAF.SEGMENT", "demo", "1", "base62", "x")
        eq(e[0], "error", "too many arguments: %r" % (e,))

        out = mc(mport, "gets demo/base62 @snowflake/base32 demo/dec")
        lines = out.split("\r\n")
        check(lines[0].startswith("VALUE demo/base62 0 15 "), "first key: %r" % out)
        v = ref_decode(lines[1], "ord")
        eq(int(lines[0].split()[4]), v, "gets' cas is the ID")
        check(lines[2].startswith("VALUE @snowflake/base32 0 77 "), "second: %r" % out)
        ref_decode(lines[3], LONG)
        check(lines[4].startswith("VALUE demo/dec 0 "), "third: %r" % out)
        eq(int(lines[5]), v + 1, "the next ID, as a number")
        eq(lines[6], "END", "END")
        # the binary protocol (GETK): the longest value, 77 bytes
        from bb_memcache_bin import GETK, Bin, frame
        b = Bin(mport)
        key = b"@snowflake/base32"
        b.send(frame(GETK, key, opaque=7))
        op, st, k, extras, val, opq, cas = b.read()
        b.close()
        eq((op, st, opq, k), (GETK, 0, 7, key), "binary GETK echoes the key")
        val = val.decode()
        eq(len(val), 77, "a 63-character prefix, '_' and 13: %r" % val)
        eq(ref_decode(val, LONG), cas, "the binary cas is the ID")
        out = mc(mport, "get demo/base64")
        check(out.startswith("CLIENT_ERROR invalid_biz_tag") and "/base62" in out,
              "an unknown encoding: no such key, and the forms: %r" % out)
        out = mc(mport, "get @ulid/base62")
        check(out.startswith("CLIENT_ERROR invalid_encoding"), "ULID: %r" % out)
        out = mc(mport, "get bad/tag/base62")
        check(out.startswith("CLIENT_ERROR invalid_biz_tag"), "a '/' in the tag: %r" % out)
        # memcached's decode key: @decode/<id>, text and binary
        import json
        seg = ref_encode(seen[0], "base62", "ord")
        out = mc(mport, "get @decode/%s" % seg)
        lines = out.split("\r\n")
        check(lines[0].startswith("VALUE @decode/%s 0 " % seg), "decode key: %r" % out)
        j = json.loads(lines[1])
        eq((j.get("biz_tag"), j.get("id")), ("demo", str(seen[0])), "decoded segment string")
        eq(lines[2], "END", "END after the decode value")
        sf = resp(rport, "LEAF.SNOWFLAKE", "1", "base62")[0]
        out = mc(mport, "get @decode/%s" % sf)
        j = json.loads(out.split("\r\n")[1])
        eq(j.get("id"), str(ref_decode(sf, LONG)), "decoded snowflake string: %r" % out)
        check("worker_id" in j or "worker" in out, "a snowflake's fields: %r" % out)
        out = mc(mport, "get @decode/ord_AzL8n0Y58m8")
        check(out.startswith("CLIENT_ERROR invalid_id"), "an overflow over memcached: %r" % out)
        b = Bin(mport)
        key = ("@decode/%s" % seg).encode()
        b.send(frame(GETK, key, opaque=9))
        op, st, k, extras, val, opq, cas = b.read()
        b.close()
        eq((op, st, opq, k), (GETK, 0, 9, key), "binary decode echoes the key")
        eq(json.loads(val.decode()).get("id"), str(seen[0]), "binary decode's value")


def test_grpc_strings(ctx):
    import bb_grpc
    m = bb_grpc.mods()
    grpc, pb = m["grpc"], m["pb"]
    with Workdir("idstr-grpc") as wd:
        gport = free_port()
        d = wd.leafd(conf=conf({"grpc.listen.port": gport})).start()
        wait_for(lambda: "gRPC on" in d.log(), 15, what="the gRPC listener")
        ch = grpc.insecure_channel("127.0.0.1:%d" % gport)

        def call(name, req, rep):
            return ch.unary_unary("/leafd.v1.IdService/" + name,
                                  request_serializer=req.SerializeToString,
                                  response_deserializer=rep.FromString)
        seg = call("NextSegment", pb.SegmentRequest, pb.IdsReply)
        sf = call("NextSnowflake", pb.CountRequest, pb.IdsReply)
        dec = call("Decode", pb.DecodeRequest, pb.DecodeReply)
        dseg = call("DecodeSegment", pb.DecodeSegmentRequest, pb.SegmentIdReply)
        uuid = call("NextUuid", pb.CountRequest, pb.StringsReply)
        vals = []
        for enc, name in ((pb.ID_ENCODING_BASE62, "base62"),
                          (pb.ID_ENCODING_BASE32, "base32")):
            r = seg(pb.SegmentRequest(biz_tag="demo", count=20, encoding=enc))
            eq(len(r.ids), 0, "strings only")
            eq(len(r.strings), 20, "twenty strings")
            for s in r.strings:
                v = ref_decode(s, "ord")
                eq(s, ref_encode(v, name, "ord"), "canonical")
                back = dseg(pb.DecodeSegmentRequest(text=s))
                eq((back.id, back.biz_tag, back.encoding), (v, "demo", enc),
                   "DecodeSegment of %s" % s)
                vals.append(v)
            r = sf(pb.CountRequest(count=5, encoding=enc))
            eq(len(r.strings), 5, "five snowflake strings")
            for s in r.strings:
                v = ref_decode(s, "evt")
                eq(dec(pb.DecodeRequest(text=s)).id, v, "Decode of %s" % s)
        eq(vals, sorted(vals), "issue order")
        r = seg(pb.SegmentRequest(biz_tag="demo"))
        eq((len(r.ids), len(r.strings)), (1, 0), "DEC: numbers, as before")
        check(r.ids[0] > vals[-1], "after the strings")

        def refused(fn, req, code, prefix):
            try:
                fn(req)
            except grpc.RpcError as e:
                eq(e.code().name, code, "status: %s" % e.details())
                check(e.details().startswith(prefix + ": "), "code: %s" % e.details())
                return
            raise AssertionError("expected %s" % code)
        refused(seg, pb.SegmentRequest(biz_tag="demo", encoding=7),
                "INVALID_ARGUMENT", "invalid_encoding")
        refused(uuid, pb.CountRequest(encoding=pb.ID_ENCODING_BASE62),
                "INVALID_ARGUMENT", "invalid_encoding")
        refused(dseg, pb.DecodeSegmentRequest(text="ord_AzL8n0Y58m8"),
                "INVALID_ARGUMENT", "invalid_id")
        refused(dseg, pb.DecodeSegmentRequest(text="evt_00000000001"),
                "INVALID_ARGUMENT", "unknown_prefix")
        refused(dseg, pb.DecodeSegmentRequest(text=""), "INVALID_ARGUMENT", "invalid_id")
        refused(dec, pb.DecodeRequest(text="ord_00000000001"),
                "INVALID_ARGUMENT", "unknown_prefix")
        refused(dec, pb.DecodeRequest(id=5, text="evt_00000000001"),
                "INVALID_ARGUMENT", "invalid_message")
        raw = ch.unary_unary("/leafd.v1.IdService/Decode",
                             request_serializer=lambda b: b,
                             response_deserializer=lambda b: b)
        refused(raw, b"\x12\x0c00000000001\x00", "INVALID_ARGUMENT", "invalid_message")
        ch.close()


def test_js53_layout(ctx):
    with Workdir("idstr-js53") as wd:
        d = wd.leafd(conf={"leaf.snowflake.enable": "true",
                           "snowflake.layout": "js53", "snowflake.worker_id": "31",
                           "snowflake.cache_file": "sf.json"}).start()
        st = d.get("/snowflake/state").json()
        lay = st.get("layout", st)
        eq((lay["timestamp_bits"], lay["worker_bits"], lay["sequence_bits"]),
           (41, 5, 7), "the js53 bits: %r" % lay)
        ids = []
        for _ in range(30):
            ids.extend(d.get("/snowflake?count=4096").ids())
        eq(len(set(ids)), len(ids), "no ID twice")
        check(max(ids) <= JS_MAX, "every ID at most 2^53-1: %d" % max(ids))
        check(max(ids) > 2 ** 45, "and not trivially small: %d" % max(ids))
        j = d.get("/snowflake/decode/%d" % ids[-1]).json()
        eq(j["worker_id"], 31, "worker 31, the highest")
        err(d.get("/snowflake/decode/%d" % (JS_MAX + 1)), 400, "invalid_id", "2^53")
        s = d.get("/snowflake?enc=base62").text.strip()
        check(ref_decode(s, "") <= JS_MAX, "a string of a js53 ID")
        d.stop()
        # a node that issued IDs under Leaf's layout refuses js53 (its IDs
        # would go down): the cache file records the layout
        old = wd.leafd(conf={"leaf.snowflake.enable": "true",
                             "snowflake.cache_file": "old.json"}, name="old").start()
        check(old.get("/snowflake").ids()[0] > JS_MAX, "Leaf's layout: above 2^53")
        old.stop()
        again = wd.leafd(conf={"leaf.snowflake.enable": "true", "snowflake.layout": "js53",
                               "snowflake.cache_file": "old.json"}, name="again")
        check(again.start(expect_fail=True) != 0, "js53 over Leaf's layout refuses")
        check("snowflake layout changed" in again.log(), "and says why: %s" % again.log())
        for extra, why in (({"snowflake.worker_bits": "6"}, "remove the snowflake.*_bits"),
                           ({"snowflake.worker_id": "32"}, "does not fit")):
            c = {"leaf.snowflake.enable": "true", "snowflake.layout": "js53",
                 "snowflake.cache_file": "sf2.json"}
            c.update(extra)
            bad = wd.leafd(conf=c, name="bad")
            check(bad.start(expect_fail=True) != 0, "%r refuses to start" % extra)
            check(why in bad.log(), "and says why: %s" % bad.log())


def test_tinyid_strings(ctx):
    """Tinyid's nextId and nextIdSimple with &enc=: the IDs as strings after
    the tag's prefix (quoted in nextId's data), the same IDs as the numbers
    would be; without enc, Tinyid's numbers unchanged; on nextSegmentId a
    400 invalid_encoding (a segment is a range of numbers)."""
    import json
    with Workdir("idstr-tinyid") as wd:
        d = wd.leafd(conf=conf()).start()
        r = d.get("/tinyid/id/nextId?bizType=demo&batchSize=3")
        eq(r.status, 200, "nextId: %r" % r)
        nums = json.loads(r.body)["data"]
        check(all(isinstance(v, int) for v in nums) and len(nums) == 3,
              "Tinyid's numbers without enc: %r" % nums)
        r = d.get("/tinyid/id/nextId?bizType=demo&batchSize=3&enc=base62")
        eq(r.status, 200, "nextId&enc=base62: %r" % r)
        j = json.loads(r.body)
        eq((j["code"], len(j["data"])), (200, 3), "Tinyid's envelope: %r" % j)
        got = [ref_decode(v, "ord") for v in j["data"]]
        eq(got, [nums[-1] + 1, nums[-1] + 2, nums[-1] + 3], "the next IDs, as strings")
        r = d.get("/tinyid/id/nextIdSimple?bizType=demo&batchSize=2&enc=base32")
        eq(r.status, 200, "nextIdSimple&enc=base32: %r" % r)
        parts = r.body.decode().strip().split(",")
        eq([ref_decode(v, "ord") for v in parts], [got[-1] + 1, got[-1] + 2],
           "nextIdSimple's strings: %r" % parts)
        err(d.get("/tinyid/id/nextSegmentId?bizType=demo&enc=base62"), 400,
            "invalid_encoding", "range")
        err(d.get("/tinyid/id/nextId?bizType=demo&enc=hex"), 400, "invalid_encoding")
