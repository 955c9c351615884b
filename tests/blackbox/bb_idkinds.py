"""Black-box tests of UUIDv7 and ULID: the formats (Python's uuid module
accepts every UUID as version 7 with the RFC variant), order, the decoders
and their refusals, `leafd decode` for every kind, and clock steps back of
10 ms and 10 s under libfaketime that repeat nothing and keep order."""
import os
import subprocess
import time
import uuid

from bbutil import LEAFD, Client, Workdir, check, eq, faketime_preload

TESTS = [
    "test_uuid_format_and_order",
    "test_ulid_format_and_order",
    "test_decoders_and_refusals",
    "test_decode_cli_every_kind",
    "test_clock_steps_back_repeat_nothing",
]

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid_value(s):
    v = 0
    for ch in s:
        v = v * 32 + CROCKFORD.index(ch)
    return v


def err(r, status, code):
    eq(r.status, status, "status %r" % r)
    eq(r.json()["error"], code, "code")


def test_uuid_format_and_order(ctx):
    with Workdir("uuid") as wd:
        d = wd.leafd().start()
        now = time.time() * 1000
        got = []
        for _ in range(20):
            r = d.get("/uuid?count=1000&format=json")
            eq(r.status, 200, "status")
            eq(r.header("Cache-Control"), "no-store", "Cache-Control")
            got.extend(r.json()["ids"])
            t = d.get("/uuid")
            got.extend(t.text.split())
        eq(len(got), 20 * 1001, "count")
        for s in got:
            u = uuid.UUID(s)
            eq(u.version, 7, "version of %s" % s)
            eq(u.variant, uuid.RFC_4122, "variant of %s" % s)
            eq(str(u), s, "canonical lower-case text")
            ms = int(s.replace("-", "")[:12], 16)
            check(abs(ms - now) < 60000, "timestamp %d near now %d" % (ms, now))
        eq(got, sorted(got), "text order is issue order")
        eq(len(set(got)), len(got), "no duplicate")
        eq(d.client.request("HEAD", "/uuid").status, 405, "HEAD takes nothing")
        err(d.get("/uuid?count=0"), 400, "invalid_count")
        err(d.get("/uuid?count=1001"), 400, "invalid_count")
        m = d.get("/metrics").text
        check("leafd_uuid_issued_total %d" % len(got) in m, "metric counts the UUIDs")


def test_ulid_format_and_order(ctx):
    with Workdir("ulid") as wd:
        d = wd.leafd().start()
        got = []
        for _ in range(20):
            got.extend(d.get("/ulid?count=1000&format=json").json()["ids"])
            got.extend(d.get("/ulid").text.split())
        for s in got:
            eq(len(s), 26, "length of %s" % s)
            check(all(ch in CROCKFORD for ch in s), "alphabet of %s" % s)
            check(s[0] <= "7", "first character of %s" % s)
        eq(got, sorted(got), "text order is issue order")
        vals = [ulid_value(s) for s in got]
        eq(vals, sorted(vals), "numeric order")
        eq(len(set(got)), len(got), "no duplicate")
        eq(d.client.request("HEAD", "/ulid").status, 405, "HEAD takes nothing")


def test_decoders_and_refusals(ctx):
    with Workdir("iddec") as wd:
        d = wd.leafd().start()
        # RFC 9562 Appendix A.6.
        j = d.get("/uuid/decode/017F22E2-79B0-7CC3-98C4-DC0C0C07398F").json()
        eq(j["version"], 7, "version")
        eq(j["variant"], "rfc9562", "variant")
        eq(j["timestamp"], 0x017F22E279B0, "timestamp")
        eq(j["time"], "2022-02-22T19:22:22.000Z", "time")
        # A UUID of another version decodes, without a timestamp.
        j = d.get("/uuid/decode/%s" % uuid.uuid4()).json()
        eq(j["version"], 4, "v4")
        check("timestamp" not in j, "no timestamp for v4")
        # ulid/spec's example; lower case and the I/L/O aliases.
        for s in ("01ARYZ6S41TSV4RRFFQ69G5FAV", "01aryz6s41tsv4rrffq69g5fav",
                  "OIARYZ6S4LTSV4RRFFQ69G5FAV"):
            j = d.get("/ulid/decode/" + s).json()
            eq(j["timestamp"], 1469918176385, "ULID time of %s" % s)
            eq(j["ulid"], "01ARYZ6S41TSV4RRFFQ69G5FAV", "canonical")
        for p in ("/uuid/decode/xyz", "/uuid/decode/017F22E2-79B0-7CC3-98C4-DC0C0C07398G",
                  "/uuid/decode/017F22E2x79B0-7CC3-98C4-DC0C0C07398F",
                  "/ulid/decode/8ZZZZZZZZZZZZZZZZZZZZZZZZZ",
                  "/ulid/decode/01ARYZ6S41TSV4RRFFQ69G5FAU", "/ulid/decode/" + "0" * 300):
            r = d.get(p)
            err(r, 400, "invalid_id")
            check(len(r.json()["message"]) > 10, "says what is wrong: %r" % r.json())
        # What the server issues decodes to now.
        s = d.get("/uuid").text.strip()
        j = d.get("/uuid/decode/" + s).json()
        check(abs(j["timestamp"] - time.time() * 1000) < 60000, "issued UUID's time")


def test_decode_cli_every_kind(ctx):
    def run(x):
        return subprocess.run([LEAFD, "decode", x], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=10)
    r = run("017F22E2-79B0-7CC3-98C4-DC0C0C07398F")
    eq(r.returncode, 0, "uuid rc")
    check(b'"version":7' in r.stdout, "uuid decoded: %r" % r.stdout)
    r = run("01ARYZ6S41TSV4RRFFQ69G5FAV")
    eq(r.returncode, 0, "ulid rc")
    check(b'"timestamp":1469918176385' in r.stdout, "ulid decoded: %r" % r.stdout)
    r = run("2124739473278238720")
    eq(r.returncode, 0, "snowflake rc")
    check(b'"worker_id"' in r.stdout, "snowflake decoded: %r" % r.stdout)
    for bad in ("01ARYZ6S41TSV4RRFFQ69G5FAU", "not-an-id", "017F22E2-79B0-7CC3-98C4-DC0C0C07398G"):
        r = run(bad)
        eq(r.returncode, 1, "rc of %s" % bad)
        check(b"decode:" in r.stderr, "says why: %r" % r.stderr)


def set_clock(path, offset):
    with open(path + ".tmp", "w") as f:
        f.write(offset + "\n")
    os.rename(path + ".tmp", path)


def test_clock_steps_back_repeat_nothing(ctx):
    with Workdir("idclock") as wd:
        ft = os.path.join(wd.path, "faketime.rc")
        set_clock(ft, "+0")
        env = {"LD_PRELOAD": faketime_preload(wd.path), "FAKETIME_TIMESTAMP_FILE": ft,
               "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        d = wd.leafd(env=env).start()
        got = {"uuid": [], "ulid": []}
        c = Client(d.port)

        def burst(n=100):
            for kind in got:
                for _ in range(n):
                    r = c.get("/%s?count=20&format=json" % kind)
                    eq(r.status, 200, "%s status" % kind)
                    got[kind].extend(r.json()["ids"])
        burst()
        set_clock(ft, "-0.010")
        burst()
        set_clock(ft, "-10")
        burst()
        set_clock(ft, "+0")
        burst()
        c.close()
        for kind, ids in got.items():
            eq(len(set(ids)), len(ids), "%s: no repeat across the steps" % kind)
            eq(ids, sorted(ids), "%s: still increasing across the steps" % kind)
        # While the clock was 10 s behind, the timestamps kept the last one.
        ms = [int(s.replace("-", "")[:12], 16) for s in got["uuid"]]
        eq(ms, sorted(ms), "UUID timestamps never go back")
