"""Black-box tests of concealed serial numbers (serial.<code>.conceal).

The sequence digits are FF1-enciphered within the period. These tests check
what a client sees over HTTP, RESP and gRPC (unique, one period's prefix, not
counting up by one), the key file's checks at start, the key changed within
a period (503 serial_key_changed, then accepted in the next period: the
database clock is moved with LEAFD_TEST_SERIAL_DB_OFFSET_MS as in
bb_serial.py), the admin decode route, and a period's domain used up."""
import datetime
import os
import re
import secrets
import socket
import subprocess

import bb_grpc
from bbutil import LEAFD, Client, Workdir, check, eq, free_port, wait_for

TESTS = [
    "test_conceal_http_resp_decode",
    "test_key_file_refused",
    "test_key_changed_mid_period",
    "test_exhausted_all_distinct",
]

# A million serials over HTTP: the plain black-box lane only, not against
# leafd-asan.
PLAIN_ONLY = {"test_exhausted_all_distinct"}

OFFSET_ENV = "LEAFD_TEST_SERIAL_DB_OFFSET_MS"
ADMIN = "conceal-admin-token-7"
DAY_MS = 86400 * 1000


def err(r, status, code):
    eq(r.status, status, "status %r" % r)
    eq(r.json()["error"], code, "code %r" % r)


def key_file(wd, name="serial.key", mode=0o600):
    path = os.path.join(wd.path, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.write(fd, (secrets.token_hex(32) + "\n").encode())
    os.close(fd)
    os.chmod(path, mode)
    return path


def conf_for(key, digits=6, step=20000, count_max=1000):
    return {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
            "serial.count_max": str(count_max), "serial.PAY.prefix": "PAY",
            "serial.PAY.digits": str(digits), "serial.PAY.step": str(step),
            "serial.PAY.conceal": "true", "serial.PAY.key_file": key}


def serials(d, n):
    r = d.get("/serial/PAY?count=%d&format=json" % n)
    eq(r.status, 200, "serials: %r" % r)
    return r.json()["ids"]


def test_conceal_http_resp_decode(ctx):
    with Workdir("serial-conceal") as wd:
        rport = free_port()
        key = key_file(wd)
        d = bb_grpc.start(wd, conf=conf_for(key),
                          flags=["--resp.listen.port=%d" % rport,
                                 "--admin.token=" + ADMIN])
        wait_for(lambda: socket.create_connection(("127.0.0.1", rport), 0.5).close()
                 or True, 15, what="the RESP port")
        got = []
        for _ in range(20):
            got += serials(d, 10)
        p = subprocess.run(["redis-cli", "-p", str(rport), "AUTH", ADMIN],
                           capture_output=True, timeout=30)
        resp = []
        for _ in range(20):
            p = subprocess.run(["redis-cli", "-p", str(rport), "LEAF.SERIAL", "PAY", "10"],
                               capture_output=True, timeout=30)
            eq(p.returncode, 0, "redis-cli: %r" % (p,))
            resp += p.stdout.decode().split()
        eq(len(resp), 200, "200 serials over RESP: %r" % resp[:5])
        stub = bb_grpc.Stub(d.gport)
        grpc_got = []
        for _ in range(20):
            grpc_got += list(stub.NextSerial(stub.pb.SerialRequest(code="PAY", count=10)).ids)
        eq(len(grpc_got), 200, "200 serials over gRPC")
        everything = got + resp + grpc_got
        eq(len(set(everything)), len(everything), "no duplicate over HTTP, RESP and gRPC")
        today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
        for s in everything:
            check(re.fullmatch(r"PAY\d{8}\d{6}", s), "form of %s" % s)
        days = {s[3:11] for s in everything}
        check(days <= {today, (datetime.datetime.now(datetime.timezone.utc)
                                - datetime.timedelta(days=1)).strftime("%Y%m%d")},
              "the period is printed: %r" % days)
        seq = [int(s[11:]) for s in got]
        plus_one = sum(1 for a, b in zip(seq, seq[1:]) if b == a + 1)
        check(plus_one <= 2, "consecutive serials count up by one %d times" % plus_one)
        # The admin route: refused without the token, the counters with it.
        r = d.get("/serial/decode/PAY/" + got[0])
        check(r.status in (401, 403) and "counter" not in r.text,
              "decode without the token: %r" % r)
        auth = {"Authorization": "Bearer " + ADMIN}
        counters = []
        for s in got:
            r = d.get("/serial/decode/PAY/" + s, headers=auth)
            eq(r.status, 200, "decode %s: %r" % (s, r))
            j = r.json()
            eq(j["period"], s[3:11], "period of %s" % s)
            eq(j["concealed"], True, "concealed")
            counters.append(j["counter"])
        eq(counters, sorted(counters), "the counters behind the serials count up")
        eq(len(set(counters)), len(counters), "distinct counters")
        check(counters[0] >= 1, "counters from 1: %r" % counters[:3])
        err(d.get("/serial/decode/PAY/PAY2026", headers=auth), 400, "invalid_serial")
        err(d.get("/serial/decode/NOPE/PAY20261128000001", headers=auth), 404,
            "unknown_serial_code")
        d.stop()
        # No admin token and no admin listener: never on the public port.
        d2 = wd.leafd(conf=conf_for(key), name="open").start()
        s = serials(d2, 1)[0]
        err(d2.get("/serial/decode/PAY/" + s), 403, "admin_required")
        d2.stop()


def test_key_file_refused(ctx):
    with Workdir("serial-conceal-key") as wd:
        for mode in (0o644, 0o640):
            path = key_file(wd, "loose.key", mode)
            d = wd.leafd(conf=conf_for(path), name="loose")
            rc = d.start(expect_fail=True)
            check(rc != 0, "started with a key file of mode %o" % mode)
            check("chmod 600 " + path in d.log() and "serial.PAY.key_file" in d.log(),
                  "the error names the file and chmod 600:\n%s" % d.log())
        conf = os.path.join(wd.path, "loose.conf")
        r = subprocess.run([LEAFD, "-c", conf, "--check-config"], capture_output=True)
        eq(r.returncode, 2, "--check-config exit status")
        check(b"chmod 600" in r.stderr, "--check-config: %r" % r.stderr)
        short = os.path.join(wd.path, "short.key")
        fd = os.open(short, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"00112233")
        os.close(fd)
        d = wd.leafd(conf=conf_for(short), name="short")
        check(d.start(expect_fail=True) != 0, "started with an 8-byte key")
        check("expected 32, 48 or 64 hex digits" in d.log(), d.log())


def test_key_changed_mid_period(ctx):
    with Workdir("serial-conceal-rotate") as wd:
        a = wd.leafd(conf=conf_for(key_file(wd, "a.key")), name="a").start()
        first = serials(a, 5)
        a.stop()
        # Another key in the same period (one database, here SQLite): 503.
        b_conf = conf_for(key_file(wd, "b.key"))
        b = wd.leafd(conf=b_conf, name="b").start()
        r = b.get("/serial/PAY")
        err(r, 503, "serial_key_changed")
        check("next period" in r.json()["message"], "says when: %r" % r.json())
        b.stop()
        # The next period (the database's clock a day on): the new key.
        c = wd.leafd(conf=b_conf, name="c", env={OFFSET_ENV: str(DAY_MS)}).start()
        r = c.get("/serial/PAY?count=5&format=json")
        eq(r.status, 200, "next period: %r" % r)
        later = r.json()["ids"]
        check(all(s[3:11] != first[0][3:11] for s in later),
              "another period: %r vs %r" % (later, first))
        eq(len(set(later + first)), 10, "distinct")


def test_exhausted_all_distinct(ctx):
    """A day's whole 10^6 domain (999,999 counters from 1) over HTTP: every
    serial distinct, then serial_exhausted, never a repeat."""
    with Workdir("serial-conceal-full") as wd:
        now = datetime.datetime.now(datetime.timezone.utc)
        noon = now.replace(hour=12, minute=0, second=0, microsecond=0)
        offset = int((noon - now).total_seconds() * 1000)   # no midnight
        d = wd.leafd(conf=conf_for(key_file(wd), step=200000),
                     env={OFFSET_ENV: str(offset)}).start()
        c = Client(d.port)
        seen = set()
        total = 0
        while True:
            r = c.get("/serial/PAY?count=1000")
            if r.status == 503:
                break
            eq(r.status, 200, "%r" % r)
            batch = r.text.split()
            total += len(batch)
            seen.update(s[11:] for s in batch)
            check(total < 1000000, "more than the domain holds")
        err(r, 503, "serial_exhausted")
        # 999 x 1,000 taken; 999 left, asked for in smaller batches.
        n = 100
        while n >= 1:
            r = c.get("/serial/PAY?count=%d" % n)
            if r.status == 200:
                batch = r.text.split()
                total += len(batch)
                seen.update(s[11:] for s in batch)
            else:
                err(r, 503, "serial_exhausted")
                n //= 10
        eq(total, 999999, "the whole domain but one value")
        eq(len(seen), total, "every serial distinct")
        err(c.get("/serial/PAY"), 503, "serial_exhausted")
