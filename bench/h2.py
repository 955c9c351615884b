#!/usr/bin/env python3
"""h2.py: HTTP/2 cleartext (h2c, prior knowledge): leafd's /segment/demo
against nginx `return 200` over h2c (at most 128 streams per connection,
nginx's default), both driven by h2load with the same
flags (-t1 -c H2_CONNS -m H2_STREAMS for DURATION seconds), in interleaved
rounds (ROUNDS), one row per I/O thread count (THREADS: nginx workers /
leafd I/O threads): median req/s, mean request time, the server's CPU time
per request, and leafd/nginx.

bench/bench.py runs it as its h2 section (ONLY=h2); run alone:
    python3 bench/h2.py
Environment: ROUNDS (3), DURATION (5), THREADS (1,2), H2_CONNS (16),
H2_STREAMS (100).
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (servers and helpers, one copy)

H2_CONNS = int(os.environ.get("H2_CONNS", "16"))
H2_STREAMS = int(os.environ.get("H2_STREAMS", "100"))


def h2load(url, pids):
    before = bench.cpu_ticks(pids)
    out = subprocess.run(["h2load", "-t1", "-c%d" % H2_CONNS, "-m%d" % H2_STREAMS,
                          "-D%d" % bench.DURATION, "--warm-up-time=1", url],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode()
    after = bench.cpu_ticks(pids)
    m = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
    mean = re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", out)
    if m is None or done is None:
        raise RuntimeError("h2load %s: %s" % (url, out[-800:]))
    if int(done.group(3)):
        bench.log("  warning: %s: %s failed" % (url, done.group(3)))
    n = max(int(done.group(1)), 1)
    return {"rps": float(m.group(1)), "mean": bench.parse_latency(mean.group(1)),
            "cpu_us": (after - before) / bench.CLK_TCK * 1e6 / n,
            "failed": int(done.group(3))}


def run(workdir):
    """The table rows (markdown), or a line saying why there are none."""
    missing = [t for t in ("h2load", "nginx") if shutil.which(t) is None
               and not os.path.exists("/usr/sbin/" + t)]
    if missing:
        return ["HTTP/2: not run (%s missing: sh .ci/deps.sh bench)" % " ".join(missing)]
    rows = ["HTTP/2 h2c, h2load -t1 -c%d -m%d, %d rounds of %d s interleaved (medians)"
            % (H2_CONNS, H2_STREAMS, bench.ROUNDS, bench.DURATION),
            "| target | threads | req/s | mean ms | cpu us/req | leafd/nginx |",
            "|---|---|---|---|---|---|"]
    for n in [int(t) for t in bench.THREADS.split(",")]:
        ng = bench.Nginx(workdir, n, h2=True)
        lf = bench.Leafd(workdir, n, name="leafd-h2-%d" % n)
        res = {"nginx": [], "leafd": []}
        try:
            for r in range(bench.ROUNDS):
                bench.log("h2 round %d/%d, %d thread(s)" % (r + 1, bench.ROUNDS, n))
                res["nginx"].append(h2load("http://127.0.0.1:%d/" % ng.port, ng.pids))
                res["leafd"].append(h2load("http://127.0.0.1:%d/segment/demo" % lf.port,
                                           lf.pids))
        finally:
            ng.stop()
            lf.stop()
        med = {k: {f: statistics.median(x[f] for x in v) for f in ("rps", "mean", "cpu_us")}
               for k, v in res.items()}
        ratio = med["leafd"]["rps"] / med["nginx"]["rps"] if med["nginx"]["rps"] else 0
        for k, label in (("nginx", "nginx return 200 (baseline)"),
                         ("leafd", "leafd /segment/demo")):
            rows.append("| %s | %d | %s | %.3f | %.1f | %s |" % (
                label, n, "{:,.0f}".format(med[k]["rps"]), med[k]["mean"],
                med[k]["cpu_us"], "%.2fx" % ratio if k == "leafd" else ""))
    return rows


if __name__ == "__main__":
    if not os.access(bench.LEAFD, os.X_OK):
        sys.exit("h2.py: build leafd first (make leafd)")
    os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    work = tempfile.mkdtemp(prefix="leafd-bench-h2-")
    try:
        print("\n".join(run(work)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
