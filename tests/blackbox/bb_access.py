"""Black-box tests of access control: the admin token, the admin listener,
per-biz_tag tokens on the ID endpoints."""
import os

from bbutil import Client, Workdir, check, eq, free_port, wait_for

TESTS = [
    "test_default_binds_loopback_and_is_open",
    "test_admin_token",
    "test_admin_listener",
    "test_per_tag_tokens",
]

ADMIN = "s3cret-admin-token-42"


def err(r, status, code):
    eq(r.status, status, "status %r" % r)
    eq(r.json()["error"], code, "code")


def test_default_binds_loopback_and_is_open(ctx):
    with Workdir("acc0") as wd:
        d = wd.leafd().start()
        wait_for(lambda: "listening on http://127.0.0.1:" in d.log(), what="binds 127.0.0.1")
        for p in ["/metrics", "/cache", "/db", "/snowflake/state", "/segment/demo"]:
            eq(d.get(p).status, 200, p)


def test_admin_token(ctx):
    with Workdir("acc1") as wd:
        d = wd.leafd(flags=["--admin.token=" + ADMIN]).start()
        for p in ["/metrics", "/cache", "/db", "/snowflake/state"]:
            r = d.get(p)
            err(r, 401, "unauthorized")
            eq(r.header("WWW-Authenticate"), "Bearer", "challenge")
            err(d.get(p, {"Authorization": "Bearer wrong-token-xyz"}), 403, "forbidden")
            eq(d.get(p, {"Authorization": "Bearer " + ADMIN}).status, 200, p)
        # ID endpoints and /health stay open.
        eq(d.get("/segment/demo").status, 200, "segment open")
        eq(d.get("/snowflake").status, 200, "snowflake open")
        eq(d.get("/health").status, 200, "health open")
        d.stop()
        check(ADMIN not in d.log(), "the token never appears in the log")


def test_admin_listener(ctx):
    with Workdir("acc2") as wd:
        ap = free_port()
        d = wd.leafd(flags=["--admin.listen.port=%d" % ap]).start()
        for p in ["/metrics", "/cache", "/db", "/snowflake/state"]:
            err(d.get(p), 404, "not_found")
            eq(Client(ap).get(p).status, 200, "admin %s" % p)
        err(Client(ap).get("/segment/demo"), 404, "not_found")
        eq(d.get("/segment/demo").status, 200, "IDs on the main port")
        eq(Client(ap).get("/health").status, 200, "health on the admin port")
        m = Client(ap).get("/metrics").text
        check('route="segment",status="200"' in m, "admin metrics see main traffic")


def test_per_tag_tokens(ctx):
    with Workdir("acc3") as wd:
        tokens = os.path.join(wd.path, "tokens")
        with open(tokens, "w") as f:
            f.write("# token scopes\n"
                    "tok-demo-0001 demo\n"
                    "tok-snow-0002 @snowflake\n"
                    "tok-all-00003 *\n")
        d = wd.leafd(flags=["--auth.tokens_file=" + tokens]).start()
        err(d.get("/segment/demo"), 401, "token_required")
        err(d.get("/segment/demo", {"Authorization": "Bearer nope-nope-nope"}), 403, "token_forbidden")
        err(d.get("/segment/demo", {"Authorization": "Bearer tok-snow-0002"}), 403, "token_forbidden")
        eq(d.get("/segment/demo", {"Authorization": "Bearer tok-demo-0001"}).status, 200, "header")
        eq(d.get("/segment/demo?token=tok-demo-0001").status, 200, "?token=")
        eq(d.get("/api/segment/get/demo?token=tok-all-00003").status, 200, "star")
        err(d.get("/snowflake"), 401, "token_required")
        err(d.get("/snowflake?token=tok-demo-0001"), 403, "token_forbidden")
        eq(d.get("/snowflake?token=tok-snow-0002").status, 200, "snowflake token")
        d.stop()
        for t in ["tok-demo-0001", "tok-snow-0002", "nope-nope-nope"]:
            check(t not in d.log(), "token %s not logged" % t)
        with open(tokens, "w") as f:
            f.write("short demo\n")
        d2 = wd.leafd(flags=["--auth.tokens_file=" + tokens], name="bad")
        rc = d2.start(expect_fail=True)
        check(rc != 0, "a bad tokens file stops the start")
        check("tokens:1" in d2.log() or (tokens + ":1") in d2.log(), "names the line: %s" % d2.log())
