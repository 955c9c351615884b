#!/usr/bin/env python3
"""tls.py: leafd's HTTPS listener against nginx over HTTPS, in one run.

Both servers get the same certificate (a P-256 key from a throwaway CA made
here with openssl), TLS 1.2 and 1.3 with OpenSSL's defaults, the same number
of workers / I/O threads (TLS_THREADS, default 1), and the same client: wrk
-t1 -cCONNS on an https:// URL. nginx answers `return 200` with a 17-byte
body; leafd answers /segment/demo (an ID from the segment buffer).

Two figures, each in ROUNDS interleaved rounds (nginx, leafd, nginx, ...):
  keep-alive   requests per second on kept-alive connections (the handshake
               is paid once per connection);
  new conns    wrk with "Connection: close": every request a new TCP
               connection and a full TLS handshake (wrk resumes no session),
               so req/s = handshakes/s.
Prints markdown rows with the medians, leafd/nginx (target >= 1.0x) and
each server's CPU time (user+sys) per request.

bench/bench.py runs it in the "tls" section; alone: python3 bench/tls.py.
"""
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from bbutil import free_port  # noqa: E402
sys.path.insert(0, HERE)
from bench import Nginx, cpu_ticks, stop_proc, wait_port  # noqa: E402
LEAFD = os.path.join(ROOT, "leafd")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = int(os.environ.get("DURATION", "5"))
CONNS = int(os.environ.get("CONNS", "64"))
THREADS = int(os.environ.get("TLS_THREADS", "1"))


def sh(args, cwd):
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_cert(d):
    """ca.pem, and srv.pem/srv.key for 127.0.0.1 signed by it."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    sh(["openssl", "req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                                           "-subj", "/CN=leafd bench CA"], d)
    sh(["openssl", "req"] + ec + ["-keyout", "srv.key", "-out", "srv.csr",
                                  "-subj", "/CN=127.0.0.1"], d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    sh(["openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "san.ext"], d)
    return os.path.join(d, "srv.pem"), os.path.join(d, "srv.key")


def start_nginx(d, cert, key):
    ng = Nginx(d, THREADS, tls=(cert, key))
    return ng.proc, "https://127.0.0.1:%d/" % ng.port, ng.pids


def start_leafd(d, cert, key):
    port = free_port()
    proc = subprocess.Popen([LEAFD, "--listen.port=0", "--listen.tls_port=%d" % port,
                             "--tls.cert_file=" + cert, "--tls.key_file=" + key,
                             "--threads=%d" % THREADS, "--log.level=warn",
                             "--http.max_connections=100000"],
                            cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    url = "https://127.0.0.1:%d/segment/demo" % port
    subprocess.run(["curl", "-sk", "-o", "/dev/null", url + "?count=1000"])
    return proc, url, [proc.pid]


def wrk(url, pids, new_conns):
    """(req/s, server CPU us per request)."""
    args = ["wrk", "-t1", "-c%d" % CONNS, "-d%ds" % DURATION]
    if new_conns:
        args += ["-H", "Connection: close"]
    before = cpu_ticks(pids)
    out = subprocess.run(args + [url], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT).stdout.decode()
    ticks = cpu_ticks(pids) - before
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if m is None:
        raise RuntimeError("wrk: %s" % out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if bad:
        print("  warning: %s: %s" % (url, bad.group(0)), file=sys.stderr)
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    return float(m.group(1)), ticks / os.sysconf("SC_CLK_TCK") * 1e6 / max(reqs, 1)


def run(log=print):
    """Returns the markdown rows."""
    work = tempfile.mkdtemp(prefix="leafd-bench-tls-")
    procs = []
    res = {}
    try:
        cert, key = make_cert(work)
        for name in ("nginx", "leafd"):
            os.makedirs(os.path.join(work, name))
        ng, ng_url, ng_pids = start_nginx(os.path.join(work, "nginx"), cert, key)
        procs.append((ng, signal.SIGQUIT))
        lf, lf_url, lf_pids = start_leafd(os.path.join(work, "leafd"), cert, key)
        procs.append((lf, signal.SIGTERM))
        for r in range(ROUNDS):
            log("tls: round %d/%d" % (r + 1, ROUNDS))
            for fig in ("keepalive", "newconn"):
                for name, url, pids in (("nginx", ng_url, ng_pids),
                                        ("leafd", lf_url, lf_pids)):
                    res.setdefault((fig, name), []).append(wrk(url, pids,
                                                               fig == "newconn"))
    finally:
        for p, sig in procs:
            stop_proc(p, sig)
        shutil.rmtree(work, ignore_errors=True)
    rows = ["", "TLS (wrk -t1 -c%d -d%ds on https://, %d worker/thread each, same P-256 "
            "certificate; medians of %d interleaved rounds)" % (CONNS, DURATION, THREADS, ROUNDS),
            "",
            "| figure | nginx req/s | leafd req/s | leafd/nginx | target | met "
            "| nginx cpu/req | leafd cpu/req |",
            "|---|---:|---:|---:|---|---|---:|---:|"]
    for fig, label in (("keepalive", "HTTPS keep-alive: nginx return 200 vs leafd /segment/demo"),
                       ("newconn", "HTTPS new connection per request (full handshakes/s)")):
        n = statistics.median(r[0] for r in res[(fig, "nginx")])
        lv = statistics.median(r[0] for r in res[(fig, "leafd")])
        ncpu = statistics.median(r[1] for r in res[(fig, "nginx")])
        lcpu = statistics.median(r[1] for r in res[(fig, "leafd")])
        ratio = lv / n if n else 0.0
        rows.append("| %s | %s | %s | %.2fx | >= 1.0x | %s | %.1fus | %.1fus |"
                    % (label, "{:,.0f}".format(n), "{:,.0f}".format(lv), ratio,
                       "yes" if ratio >= 1.0 else "NO", ncpu, lcpu))
    return rows


if __name__ == "__main__":
    print("\n".join(run(lambda m: print(m, file=sys.stderr, flush=True))))
