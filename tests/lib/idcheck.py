"""idcheck.py: clients that take segment IDs (or snowflake IDs: the tag
SNOWFLAKE, "@snowflake") from leafd nodes over every front end, record
every ID and every answer, and a checker in the Jepsen style: any ID given
twice fails; availability is reported per phase.

    load = Load(nodes, "tag")        # nodes: [(name, addr, ports dict)]
    load.start(); load.phase("calm"); ...; load.phase("failover"); ...
    load.stop()
    rep = load.report()              # per phase: answers/s, errors by code,
    print(rep.text)                  # longest wait, p50/p99 latency
    rep.duplicates                   # IDs given more than once

Clients (one thread per node per front end, each on its own connection):
  http   GET /segment/TAG?count=K               IDs, one per line
  sf     GET /snowflake?count=K                 snowflake IDs (only when
         kinds names it)
  lease  GET /segment/TAG/lease?size=K          "start end" ranges, expanded
  resp   LEAF.SEGMENT TAG K (RESP, resp.listen.port)
  mc     get TAG (memcached text protocol, memcache.listen.port)
  grpc   leafd.v1.IdService/NextSegment (python3-grpcio, stubs protoc makes
         from proto/ as tests/blackbox/bb_grpc.py does; only when ports has
         "grpc")
  With the tag SNOWFLAKE: GET /snowflake?count=K, LEAF.SNOWFLAKE K,
  get @snowflake, NextSnowflake; no lease or C client (idstream.c takes
  segment IDs only).
  c      libleafd-client over every node at once (its leases, its failover
         between servers): tests/lib/idstream.c, one process, node "all"
         (Load(cclient=path), path from build_idstream())
Every answer is recorded as (start, latency, node, front end, error code or
None, IDs received); an error code is leafd's ("ids_exhausted",
"db_failover", ...), or "client:<exception>" for a timeout, a refused or a
reset connection. A 200 that does not carry K increasing IDs is an error
"bad_answer" (the checker fails on any).
"""
import array
import collections
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bbutil import Client  # noqa: E402

K = 5                 # IDs per request (mc: 1)
SNOWFLAKE = "@snowflake"  # the tag that means snowflake IDs
TIMEOUT = 5.0         # per request


class BadAnswer(Exception):
    pass


def _http_code(r):
    """leafd's JSON error code; else "http_<status>", an answer that is
    not leafd's (the checker fails on it: BadAnswer)."""
    try:
        code = r.json().get("error")
    except (ValueError, AttributeError):
        code = None
    if not code:
        raise BadAnswer("%d %r" % (r.status, r.body[:200]))
    return code


class HttpIds:
    def __init__(self, addr, port, tag, lease=False):
        self.c = Client(port, host=addr, timeout=TIMEOUT)
        self.path = ("/snowflake?count=%d" % K if tag == SNOWFLAKE else
                     ("/segment/%s/lease?size=%d" if lease else "/segment/%s?count=%d") % (tag, K))
        self.lease = lease

    def get(self):
        r = self.c.get(self.path)
        if r.status != 200:
            return _http_code(r), []
        if not self.lease:
            return None, r.ids()
        ids = []
        for line in r.text.split("\n"):
            if line.strip():
                a, b = (int(x) for x in line.split())
                ids.extend(range(a, b))
        return None, ids

    def close(self):
        self.c.close()


class LineConn:
    def __init__(self, addr, port):
        self.addr, self.port, self.s, self.buf = addr, port, None, b""

    def send(self, data):
        if self.s is None:
            self.s = socket.create_connection((self.addr, self.port), TIMEOUT)
            self.buf = b""
        self.s.sendall(data)

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln.decode()

    def close(self):
        if self.s is not None:
            self.s.close()
            self.s = None


class RespIds(LineConn):
    def __init__(self, addr, port, tag):
        LineConn.__init__(self, addr, port)
        a = [b"LEAF.SNOWFLAKE", str(K).encode()] if tag == SNOWFLAKE else \
            [b"LEAF.SEGMENT", tag.encode(), str(K).encode()]
        self.req = b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a)

    def get(self):
        self.send(self.req)
        head = self.line()
        if head.startswith("-"):
            return head[1:].split(" ", 1)[0].lower(), []
        if not head.startswith("*"):
            raise BadAnswer(head)
        ids = []
        for _ in range(int(head[1:])):
            self.line()                    # $len
            ids.append(int(self.line()))
        return None, ids


class McIds(LineConn):
    def __init__(self, addr, port, tag):
        LineConn.__init__(self, addr, port)
        self.req = b"get %s\r\n" % tag.encode()

    def get(self):
        self.send(self.req)
        head = self.line()
        if head.startswith(("SERVER_ERROR", "CLIENT_ERROR")):
            return head.split(" ")[1], []
        if not head.startswith("VALUE "):
            raise BadAnswer(head)
        v = int(self.line())
        if self.line() != "END":
            raise BadAnswer("no END")
        return None, [v]


class GrpcIds:
    def __init__(self, addr, port, tag):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))), "blackbox"))
        from bb_grpc import mods
        m = mods()
        self.grpc, pb = m["grpc"], m["pb"]
        self.ch = self.grpc.insecure_channel("%s:%d" % (addr, port))
        if tag == SNOWFLAKE:
            method, req = "NextSnowflake", pb.CountRequest(count=K)
        else:
            method, req = "NextSegment", pb.SegmentRequest(biz_tag=tag, count=K)
        self.call = self.ch.unary_unary("/leafd.v1.IdService/" + method,
                                        request_serializer=type(req).SerializeToString,
                                        response_deserializer=pb.IdsReply.FromString)
        self.req = req

    def get(self):
        try:
            return None, list(self.call(self.req, timeout=TIMEOUT).ids)
        except self.grpc.RpcError as e:
            m = re.match(r"^([a-z_]+): ", e.details() or "")
            if m:                       # leafd's code first in the details
                return m.group(1), []
            raise ConnectionError("grpc %s: %s" % (e.code().name, e.details()))

    def close(self):
        self.ch.close()


def make_client(kind, addr, ports, tag):
    if kind == "http":
        return HttpIds(addr, ports["http"], tag)
    if kind == "sf":            # snowflake IDs: GET /snowflake?count=K (tag unused)
        c = HttpIds(addr, ports["http"], tag)
        c.path = "/snowflake?count=%d" % K
        return c
    if kind == "lease":
        return HttpIds(addr, ports["http"], tag, lease=True)
    if kind == "resp":
        return RespIds(addr, ports["resp"], tag)
    if kind == "mc":
        return McIds(addr, ports["mc"], tag)
    return GrpcIds(addr, ports["grpc"], tag)


def build_idstream(workdir):
    """tests/lib/idstream.c linked with build/libleafd-client.a (made if
    missing); its path."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    lib = os.path.join(root, "build", "libleafd-client.a")
    if not os.path.exists(lib):
        subprocess.run(["make", "--no-print-directory", "-C", root, "build/libleafd-client.a"],
                       check=True, stdout=subprocess.DEVNULL)
    out = os.path.join(workdir, "idstream")
    curl = subprocess.run(["pkg-config", "--libs", "libcurl"], stdout=subprocess.PIPE,
                          check=True).stdout.decode().split()
    subprocess.run([os.environ.get("CC", "cc"), "-std=gnu11", "-O2", "-Wall", "-Werror",
                    "-I" + os.path.join(root, "clients", "c"), "-o", out,
                    os.path.join(root, "tests", "lib", "idstream.c"), lib] + curl + ["-pthread"],
                   check=True)
    return out


class Load:
    def __init__(self, nodes, tag, kinds=("http", "lease", "resp", "mc", "grpc"), pause=0.005,
                 cclient=None):
        self.nodes, self.tag, self.pause, self.cclient = nodes, tag, pause, cclient
        self.cproc = None
        self.kinds = kinds
        self.stop_ev = threading.Event()
        self.threads, self.recs, self.ids, self.bad = [], [], [], []
        self.streams = []              # (node, front end) of each ids array
        self.phases = []               # (name, start)
        self.t_end = None

    def start(self):
        for node in self.nodes:
            self._clients(*node)
        if self.cclient:
            urls = ",".join("http://%s:%d" % (addr, ports["http"]) for _, addr, ports in self.nodes)
            self.cproc = subprocess.Popen([self.cclient, urls, self.tag, str(K),
                                           str(int(self.pause * 1e6))], stdout=subprocess.PIPE)
            recs, ids = [], array.array("q")
            self.recs.append(recs)
            self.ids.append(ids)
            self.streams.append(("all", "c"))
            t = threading.Thread(target=self.read_c, args=(recs, ids), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def add(self, node):
        """Clients of one more node (name, addr, ports) from now on."""
        self.nodes.append(node)
        self._clients(*node)

    def _clients(self, name, addr, ports):
        for kind in self.kinds:
            if (kind in ports or kind == "lease" and "http" in ports and self.tag != SNOWFLAKE
                    or kind == "sf" and "http" in ports):
                recs, ids = [], array.array("q")
                self.recs.append(recs)
                self.ids.append(ids)
                self.streams.append((name, kind))
                t = threading.Thread(target=self.run, args=(name, addr, ports, kind, recs, ids),
                                     daemon=True)
                t.start()
                self.threads.append(t)

    def read_c(self, recs, ids):
        """idstream's lines: "<us> ok <id>..." or "<us> c_<error> <why>"."""
        for line in self.cproc.stdout:
            end = time.time()
            f = line.decode(errors="replace").split()
            if len(f) < 2 or self.stop_ev.is_set():
                continue
            lat = int(f[0]) / 1e6
            if f[1] == "ok":
                got = [int(x) for x in f[2:]]
                if any(a >= b for a, b in zip(got, got[1:])):
                    self.bad.append(("all", "c", got[:10]))
                ids.extend(got)
                recs.append((end - lat, lat, "all", "c", None, len(got)))
            else:
                recs.append((end - lat, lat, "all", "c", f[1], 0))

    def phase(self, name):
        self.phases.append((name, time.time()))

    def run(self, node, addr, ports, kind, recs, ids):
        c = None
        want = 1 if kind == "mc" else K
        while not self.stop_ev.is_set():
            t, m = time.time(), time.monotonic()
            try:
                if c is None:
                    c = make_client(kind, addr, ports, self.tag)
                code, got = c.get()
                if code is None and (len(got) != want or
                                     any(a >= b for a, b in zip(got, got[1:]))):
                    self.bad.append((node, kind, got[:10]))
                    code, got = "bad_answer", []
            except BadAnswer as e:
                code, got = "bad_answer", []
                self.bad.append((node, kind, str(e)[:100]))
            except Exception as e:        # timeout, refused, reset
                code, got = "client:%s" % type(e).__name__, []
                if c is not None:
                    c.close()
                c = None
            ids.extend(got)
            recs.append((t, time.monotonic() - m, node, kind, code, len(got)))
            if code is not None:
                time.sleep(0.05)
            elif self.pause:
                time.sleep(self.pause)
        if c is not None:
            c.close()

    def stop(self):
        if self.t_end is not None:
            return
        self.stop_ev.set()
        if self.cproc is not None:
            self.cproc.terminate()
            self.cproc.wait(10)
        for t in self.threads:
            t.join(timeout=TIMEOUT * 3)
        self.t_end = time.time()

    def report(self):
        return Report(self)


def pct(xs, p):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


class Report:
    """The checker's findings: duplicates over every ID of every client, and
    per phase: requests, answers/s, errors by code, longest wait (the longest
    time in the phase one client, a node's front end, had no successful
    answer), p50/p99 latency."""

    def __init__(self, load):
        allids = array.array("q")
        for a in load.ids:
            allids.extend(a)
        self.issued = len(allids)
        srt = sorted(allids)
        dups = [a for a, b in zip(srt, srt[1:]) if a == b]
        self.duplicates = len(dups)
        self.dup_examples = sorted(set(dups))[:5]
        self.bad = load.bad
        recs = sorted(r for rs in load.recs for r in rs)
        self.phases = collections.OrderedDict()
        self.latencies = {}
        bounds = load.phases + [("end", load.t_end)]
        for (name, t0), (_, t1) in zip(bounds, bounds[1:]):
            rs = [r for r in recs if t0 <= r[0] < t1]
            ok_ends = sorted(r[0] + r[1] for r in rs if r[4] is None)
            # The longest wait: the longest time one client (a node and a
            # front end) went without a successful answer in the phase.
            streams = collections.defaultdict(list)
            for r in rs:
                if r[4] is None:
                    streams[(r[2], r[3])].append(r[0] + r[1])
            wait = 0.0
            for key in set((r[2], r[3]) for r in recs):
                edges = [t0] + sorted(streams.get(key, [])) + [t1]
                wait = max(wait, max(b - a for a, b in zip(edges, edges[1:])))
            errors = collections.Counter(r[4] for r in rs if r[4] is not None)
            self.latencies[name] = [r[1] for r in rs]
            self.phases[name] = {
                "secs": t1 - t0, "requests": len(rs),
                "answers_per_s": len(ok_ends) / max(t1 - t0, 1e-9),
                "ids": sum(r[5] for r in rs),
                "errors": dict(errors), "failed": sum(errors.values()),
                "longest_wait_s": wait,
                "p50_ms": pct([r[1] for r in rs], 0.50) * 1000,
                "p99_ms": pct([r[1] for r in rs], 0.99) * 1000,
                "by_kind": dict(collections.Counter(r[3] for r in rs if r[4] is None)),
            }

    def failed(self, phases=None):
        return sum(p["failed"] for n, p in self.phases.items() if phases is None or n in phases)

    def errors(self, phases=None):
        c = collections.Counter()
        for n, p in self.phases.items():
            if phases is None or n in phases:
                c.update(p["errors"])
        return dict(c)

    def summary(self, window):
        """One line of the issue's figures: IDs, duplicates, failed requests
        by code, seconds without service (the longest wait of any client in
        any phase),
        p99 in the window's phases against the calm phase's."""
        lat = [x for n in window for x in self.latencies.get(n, [])]
        return ("IDs %d, duplicates %d, failed %s, without service %.2f s, "
                "p99 %.1f ms in %s against %.1f ms calm"
                % (self.issued, self.duplicates, json.dumps(self.errors(), sort_keys=True),
                   max(p["longest_wait_s"] for p in self.phases.values()),
                   pct(lat, 0.99) * 1000, "+".join(window),
                   pct(self.latencies.get("calm", []), 0.99) * 1000))

    @property
    def text(self):
        out = ["IDs issued %d, duplicates %d%s, bad answers %d"
               % (self.issued, self.duplicates,
                  " (e.g. %s)" % self.dup_examples if self.duplicates else "", len(self.bad))
               + (" (e.g. %s)" % self.bad[:3] if self.bad else "")]
        kinds = collections.Counter()
        for p in self.phases.values():
            kinds.update(p["by_kind"])
        out.append("answers by front end: %s" % json.dumps(dict(sorted(kinds.items()))))
        out.append("%-10s %6s %7s %9s %8s %8s %8s  %s" % (
            "phase", "secs", "reqs", "answers/s", "wait_s", "p50_ms", "p99_ms",
            "failed by code"))
        for n, p in self.phases.items():
            out.append("%-10s %6.1f %7d %9.0f %8.2f %8.1f %8.1f  %s" % (
                n, p["secs"], p["requests"], p["answers_per_s"], p["longest_wait_s"],
                p["p50_ms"], p["p99_ms"], json.dumps(p["errors"], sort_keys=True)))
        return "\n".join(out)
