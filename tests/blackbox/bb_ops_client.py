"""Black-box tests of the client-facing bounds the issue-20 review found
missing: Tinyid's batchSize is bounded by segment.lease_max, as every other
lease is (GET /segment/<tag>/lease?size=N answers 400 invalid_size above it)."""
from bbutil import Workdir, check, eq

TESTS = [
    "test_tinyid_batch_size_bounded_by_lease_max",
]


def err(r, status, code, *words):
    eq(r.status, status, "status of %r" % r)
    j = r.json()
    eq(j["error"], code, "error code of %r" % r)
    for w in words:
        check(w in j["message"], "%r names %r" % (j["message"], w))


def test_tinyid_batch_size_bounded_by_lease_max(ctx):
    with Workdir("opsclient1") as wd:
        d = wd.leafd(flags=["--segment.lease_max=1000"]).start()
        r = d.get("/tinyid/id/nextId?bizType=demo&batchSize=1000")
        eq(r.status, 200, "nextId at the limit: %r" % r)
        ids = r.json()["data"]
        eq(len(ids), 1000, "batchSize = segment.lease_max: all of them")
        eq(len(set(ids)), 1000, "distinct")
        for path in ["nextId", "nextIdSimple"]:
            for n in [1001, 99999, 200000]:      # 200000: Tinyid's cut to 100000 first
                r = d.get("/tinyid/id/%s?bizType=demo&batchSize=%d" % (path, n))
                err(r, 400, "invalid_batch_size", "segment.lease_max", "1000")
        # The lease route says the same about the same bound.
        err(d.get("/segment/demo/lease?size=1001"), 400, "invalid_size", "segment.lease_max")
        # Below the bound nothing changed: Tinyid's answers, one range's IDs.
        r = d.get("/tinyid/id/nextIdSimple?bizType=demo&batchSize=3")
        eq(r.status, 200, "nextIdSimple: %r" % r)
        eq(len(r.body.split(b",")), 3, "three IDs: %r" % r.body)
        check(not set(int(x) for x in r.body.split(b",")) & set(ids), "no ID twice")
