#!/usr/bin/env python3
"""grpc.py: leafd's gRPC NextSegment against nginx over HTTP/2, in one run.

Both servers on loopback, started here on free ports and stopped by PID:
  - nginx, `return 200` over h2c (listen ... http2, prior knowledge), the
    same number of workers as leafd has I/O threads (the baseline);
  - leafd with grpc.listen.port, unary /leafd.v1.IdService/NextSegment of
    the embedded 'demo' tag (one ID per call).
The client is h2load with the same flags for both: the request body
pre-encoded (the 5-byte gRPC prefix and SegmentRequest{biz_tag: "demo"}),
-m 100 streams per connection, content-type: application/grpc and
te: trailers. Rounds interleave (nginx, leafd, nginx, leafd, ...); the
table gives medians and leafd/nginx. h2load counts a 200 as done, and a
gRPC refusal is a 200 too, so leafd's own counters (/metrics: route
segment, any status but 200) say how many calls were refused.

    python3 bench/grpc.py                   # ROUNDS (3) x DURATION (5 s)
    ONLY=grpc python3 bench/bench.py        # the same, as a bench.py section

Environment: ROUNDS, DURATION, THREADS (1,2), GRPC_CONNS (8), GRPC_STREAMS (100).
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from bbutil import free_port  # noqa: E402  (one copy, shared with the tests)
from bench import Nginx, parse_latency, stop_proc, wait_port  # noqa: E402  (bench.py's servers)

CONNS = int(os.environ.get("GRPC_CONNS", "8"))
STREAMS = int(os.environ.get("GRPC_STREAMS", "100"))
PATH = "/leafd.v1.IdService/NextSegment"
# SegmentRequest{biz_tag: "demo"} (field 1, length 4), framed: flag 0, length 6.
BODY = b"\x00\x00\x00\x00\x06" + b"\x0a\x04demo"


class Leafd:
    def __init__(self, leafd, work, threads):
        self.dir = os.path.join(work, "leafd-grpc-%d" % threads)
        os.makedirs(self.dir, exist_ok=True)
        self.port, self.port_grpc = free_port(), free_port()
        self.proc = subprocess.Popen([leafd, "--listen.port=%d" % self.port,
                                      "--grpc.listen.port=%d" % self.port_grpc,
                                      "--threads=%d" % threads,
                                      "--http.h2_max_concurrent_streams=%d" % STREAMS,
                                      "--log.level=warn"], cwd=self.dir,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        wait_port(self.port_grpc)
        # Warm up: load the tag and grow its step.
        urllib.request.urlopen("http://127.0.0.1:%d/segment/demo?count=1000" % self.port).read()

    def refused(self):
        """Calls on route segment answered without IDs so far (any status
        but 200: a gRPC status other than OK)."""
        m = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port).read().decode()
        return sum(int(n) for st, n in re.findall(
            r'leafd_http_requests_total\{route="segment",status="(\w+)"\} (\d+)', m)
            if st != "200")

    def stop(self):
        stop_proc(self.proc)


def h2load(port, body, duration, threads):
    """One h2load run: req/s, mean latency (ms), requests done."""
    out = subprocess.run(
        ["h2load", "-D", str(duration), "-c", str(CONNS), "-m", str(STREAMS),
         "-t", str(threads), "-d", body, "-H", "content-type: application/grpc",
         "-H", "te: trailers", "http://127.0.0.1:%d%s" % (port, PATH)],
        capture_output=True, text=True, timeout=duration + 60).stdout
    rps = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    lat = re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", out)
    if rps is None or done is None:
        raise RuntimeError("h2load: no result:\n" + out[-2000:])

    return {"rps": float(rps.group(1)), "mean_ms": parse_latency(lat.group(1)) if lat else 0.0,
            "done": int(done.group(1)), "succeeded": int(done.group(2))}


def run(leafd, work, log, rounds=3, duration=5, threads=(1, 2)):
    """Interleaved rounds; returns the markdown lines of the table."""
    body = os.path.join(work, "grpc-next-segment.bin")
    with open(body, "wb") as f:
        f.write(BODY)
    lines = ["gRPC unary NextSegment (h2load -c%d -m%d, pre-encoded body, content-type "
             "application/grpc, te: trailers; medians of %d interleaved rounds of %d s)"
             % (CONNS, STREAMS, rounds, duration), "",
             "| target | thr | req/s | mean ms | refused | leafd/nginx | goal | met |",
             "|---|---|---|---|---|---|---|---|"]
    for n in threads:
        ng, lf = Nginx(work, n, h2=True), Leafd(leafd, work, n)
        res = {"nginx": [], "leafd": []}
        refused = 0
        try:
            for r in range(rounds):
                log("grpc: %d thread(s), round %d/%d" % (n, r + 1, rounds))
                res["nginx"].append(h2load(ng.port, body, duration, n))
                before = lf.refused()
                res["leafd"].append(h2load(lf.port_grpc, body, duration, n))
                refused += lf.refused() - before
        finally:
            ng.stop()
            lf.stop()
        med = {k: statistics.median(x["rps"] for x in v) for k, v in res.items()}
        lat = {k: statistics.median(x["mean_ms"] for x in v) for k, v in res.items()}
        done = sum(x["done"] for x in res["leafd"])
        ok = sum(x["succeeded"] for x in res["leafd"])
        ratio = med["leafd"] / med["nginx"] if med["nginx"] else 0.0
        lines.append("| nginx return 200 (h2c) | %d | %.0f | %.2f | (HTTP 2xx: %d of %d) | | | |"
                     % (n, med["nginx"], lat["nginx"],
                        sum(x["succeeded"] for x in res["nginx"]),
                        sum(x["done"] for x in res["nginx"])))
        lines.append("| leafd NextSegment | %d | %.0f | %.2f | %d of %d (HTTP 2xx: %d) | %.2fx "
                     "| >= 1.0x | %s |" % (n, med["leafd"], lat["leafd"], refused, done, ok,
                                          ratio, "yes" if ratio >= 1.0 else "NO"))
    return lines


def main():
    leafd = os.path.join(ROOT, "leafd")
    for tool in ("h2load", "nginx"):
        if shutil.which(tool) is None and not os.path.exists("/usr/sbin/" + tool):
            print("grpc bench: %s is missing (sh .ci/deps.sh bench)" % tool)
            return 1
    os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    work = tempfile.mkdtemp(prefix="leafd-grpc-bench-")
    try:
        threads = [int(t) for t in os.environ.get("THREADS", "1,2").split(",")]
        lines = run(leafd, work, lambda m: print(m, file=sys.stderr),
                    int(os.environ.get("ROUNDS", "3")), int(os.environ.get("DURATION", "5")),
                    threads)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
