"""Black-box tests of HTTP/2 on the HTTP port (h2c with prior knowledge) with
clients nobody here wrote: curl --http2-prior-knowledge (the same routes,
JSON, tokens and errors as HTTP/1.1: the bodies compared byte for byte),
h2load (many connections x many streams, every request answered 2xx), and
nghttp (hundreds of concurrent streams on one connection, while h2load runs:
every ID distinct). Also: http.h2=false turns h2c off."""
import os
import re
import shutil
import subprocess
import threading

from bbutil import Workdir, check, eq, skip

TESTS = [
    "test_curl_same_as_http1",
    "test_tokens_over_h2",
    "test_h2load_and_distinct_ids",
    "test_h2_off",
]


def need(tool):
    if shutil.which(tool) is None:
        skip("%s is not installed (sh .ci/deps.sh test)" % tool)


def curl(port, path, h2=True, headers=()):
    """(status, http_version, content_type, body) from one curl run. (curl
    7.88 does not reuse a prior-knowledge connection for a second URL, so
    one URL per run.)"""
    args = ["curl", "-q", "-sS", "--max-time", "30",
            "--http2-prior-knowledge" if h2 else "--http1.1",
            "-w", "\n%{http_code} %{http_version} %{content_type}"]
    for h in headers:
        args += ["-H", h]
    p = subprocess.run(args + ["http://127.0.0.1:%d%s" % (port, path)],
                       capture_output=True, timeout=60)
    eq(p.returncode, 0, "curl %s: %s" % (path, p.stderr.decode()))
    body, _, tail = p.stdout.rpartition(b"\n")
    status, version, ctype = (tail.decode().split(" ", 2) + [""])[:3]
    return int(status), version, ctype, body


def h2_streams(d):
    """leafd_h2_streams_total, over HTTP/1.1."""
    m = d.get("/metrics").text
    return int(re.search(r"^leafd_h2_streams_total (\d+)$", m, re.M).group(1))


def test_curl_same_as_http1(ctx):
    need("curl")
    with Workdir("h2-curl") as wd:
        d = wd.leafd().start()
        first = int(d.get("/segment/demo").text)
        # Routes whose answer does not depend on time or on earlier IDs:
        # the same status, type and body over both.
        for path, hdrs in [("/segment/nosuch", ()),
                           ("/segment/demo?count=abc", ()),
                           ("/segment/demo?count=0", ("Accept: application/json",)),
                           ("/no/such/route", ()),
                           ("/snowflake?count=-1", ()),
                           ("/decode/abc", ("Accept: application/json",))]:
            s1, v1, t1, b1 = curl(d.port, path, h2=False, headers=hdrs)
            s2, v2, t2, b2 = curl(d.port, path, headers=hdrs)
            eq((v1, v2), ("1.1", "2"), "versions for %s" % path)
            eq(s2, s1, "status of %s" % path)
            eq(t2, t1, "content type of %s" % path)
            eq(b2, b1, "body of %s" % path)
            check(s1 >= 400, "%s is an error: %d %r" % (path, s1, b1))
        # IDs: plain and JSON, after the HTTP/1.1 one, distinct.
        s, v, _, b = curl(d.port, "/segment/demo?count=5")
        eq((s, v), (200, "2"), "segment over h2")
        ids = [int(x) for x in b.split()]
        eq(len(ids), 5, "five IDs: %r" % b)
        check(ids[0] > first and ids == sorted(set(ids)), "after %d, increasing: %r" % (first, ids))
        s, v, t, b = curl(d.port, "/segment/demo?count=3", headers=("Accept: application/json",))
        eq(s, 200, "JSON segment")
        check(t.startswith("application/json"), "JSON type: %s" % t)
        js = [int(x) for x in re.findall(rb'"(\d+)"', b)]
        eq(len(js), 3, "three JSON IDs: %r" % b)
        check(js[0] > ids[-1], "JSON IDs after the plain ones")
        s, _, _, b = curl(d.port, "/snowflake?count=2")
        eq(s, 200, "snowflake over h2: %r" % b)
        eq(len(b.split()), 2, "two snowflake IDs")
        s, _, _, b = curl(d.port, "/health")
        eq(s, 200, "health over h2: %r" % b)
        # HTTP/1.1 still works on the same port, and /metrics counts h2.
        check(h2_streams(d) >= 10, "h2 streams counted")
        eq(d.stop(), 0, "clean stop")


def test_tokens_over_h2(ctx):
    need("curl")
    with Workdir("h2-tok") as wd:
        tokens = os.path.join(wd.path, "tokens")
        with open(tokens, "w") as f:
            f.write("tok-demo-0001 demo\n")
        d = wd.leafd(flags=["--auth.tokens_file=" + tokens]).start()
        for hdrs in [(), ("Authorization: Bearer nope-nope-nope",)]:
            s1, _, _, b1 = curl(d.port, "/segment/demo", h2=False, headers=hdrs)
            s2, _, _, b2 = curl(d.port, "/segment/demo", headers=hdrs)
            eq((s2, b2), (s1, b1), "refusal %r same as HTTP/1.1" % (hdrs,))
            check(s1 in (401, 403), "refused: %d" % s1)
        s, _, _, b = curl(d.port, "/segment/demo", headers=("Authorization: Bearer tok-demo-0001",))
        eq(s, 200, "with the token: %r" % b)
        int(b)
        s, _, _, _ = curl(d.port, "/segment/demo?token=tok-demo-0001")
        eq(s, 200, "?token= over h2")
        eq(d.stop(), 0, "clean stop")


def h2load(port, n, c, m, path="/segment/demo"):
    p = subprocess.run(["h2load", "-n", str(n), "-c", str(c), "-m", str(m),
                        "http://127.0.0.1:%d%s" % (port, path)],
                       capture_output=True, timeout=300)
    out = p.stdout.decode()
    eq(p.returncode, 0, "h2load: %s %s" % (out, p.stderr.decode()))
    return out


def test_h2load_and_distinct_ids(ctx):
    need("h2load")
    need("nghttp")
    with Workdir("h2-load") as wd:
        d = wd.leafd().start()
        out = h2load(d.port, 20000, 8, 100)
        check(re.search(r"requests: 20000 total, 20000 started, 20000 done, 20000 succeeded, 0 failed", out),
              "every request answered: %s" % out)
        check("status codes: 20000 2xx" in out, "all 2xx: %s" % out)

        # nghttp: 1,000 concurrent streams of /segment/demo?count=2 on each
        # of four connections, while h2load keeps the server busy; every
        # ID printed is distinct.
        outs = [None] * 4
        load = threading.Thread(target=lambda: h2load(d.port, 20000, 4, 100))
        load.start()

        def run(i):
            p = subprocess.run(["nghttp", "-m", "1000",
                                "http://127.0.0.1:%d/segment/demo?count=2" % d.port],
                               capture_output=True, timeout=300)
            eq(p.returncode, 0, "nghttp: %s" % p.stderr.decode()[-500:])
            outs[i] = p.stdout
        ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        load.join()
        ids = [int(x) for o in outs for x in o.split()]
        eq(len(ids), 8000, "IDs printed")
        eq(len(set(ids)), 8000, "all distinct")
        check(h2_streams(d) >= 44000, "streams counted")
        eq(d.stop(), 0, "clean stop")


def test_h2_off(ctx):
    need("curl")
    with Workdir("h2-off") as wd:
        d = wd.leafd(flags=["--http.h2=false"]).start()
        p = subprocess.run(["curl", "-sS", "--max-time", "10", "--http2-prior-knowledge",
                            "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                            "http://127.0.0.1:%d/segment/demo" % d.port],
                           capture_output=True, timeout=60)
        check(p.returncode != 0 or not p.stdout.decode().startswith("200"),
              "h2c refused with http.h2=false: %r" % p.stdout)
        eq(d.get("/segment/demo").status, 200, "HTTP/1.1 still served")
        eq(d.stop(), 0, "clean stop")
