#!/usr/bin/env python3
"""chaos.py: leafd under failures, behind nginx, with clients loading it.

    python3 tests/blackbox/chaos.py [--short]       the CI run (under 5 minutes)
    DURATION=600 python3 tests/blackbox/chaos.py    the long run (make chaos): every
                                           phase scaled to about DURATION s
    python3 tests/blackbox/chaos.py --keep          keep the work directory (logs)

Topology, all on 127.0.0.1 on free ports (never 8080), in one temp dir:
  - a throwaway MariaDB (tests/lib/mariadb.sh) with a tag `chaos`;
  - a throwaway ZooKeeper (tests/lib/zookeeper.sh) handing out worker IDs;
  - three leafd nodes n0 n1 n2, each serving segment mode (on MariaDB) and
    snowflake mode (ZooKeeper worker IDs, own cache file, leaf.name=chaos);
    n2 runs under libfaketime with a timestamp file this script writes;
  - nginx in front (the config is generated below: see NGINX_CONF);
  - client threads loading nginx continuously with /segment/chaos,
    /segment/chaos?count=10, /snowflake and /snowflake?count=10, recording
    every ID, status, JSON error code, start time and latency;
  - volume clients, one per mode, taking batches of 1,000 at --volume-rate
    (25/s: about 14M IDs per mode in `make chaos DURATION=600`; the short
    run in make test checks about 1.5M per mode)
    (/segment/chaosvol?count=1000, a tag of its own with a large step so
    it never drains the latency clients' buffers, and /snowflake?count=1000),
    so that the long run checks millions of IDs for repeats through every
    fault phase. Their answers are not latency figures: they are counted
    apart and only their IDs (and that each is a 200 or a JSON 503) are
    checked.

While they run, in sequence, with a settle time after each:
  1 kill9      kill -9 n0, leave it down a moment, restart it
  2 rolling    SIGTERM and restart every node, one at a time, each healthy
               before the next
  3 db-short   MariaDB down for less than the buffers last
  4 db-long    MariaDB down until every node has run dry (segment requests
               get 503 ids_exhausted), a while longer, then back
  5 zk         ZooKeeper down, then back
  6 clock      n2's clock 10 ms back, later 10 s back, then +0
  7 multi-db   a second MariaDB: leafd multi-db init, every node restarted
               onto both (segment.mysql.urls), then the first killed -9 for
               twice the short outage and restarted: segment requests go on
  8 redis      a throwaway redis-server (append-only file, fsync before every
               reply); every node's ZooKeeper worker ID and fence seeded into
               it, then each node restarted onto snowflake.worker_source =
               redis (lease 8 s, fence step 2 s, heartbeat 0.5 s), keeping its
               worker ID; then Redis paused shorter than half the fence step
               (no snowflake request fails), paused past half the lease (503
               worker_lease_expired, back after SIGCONT), killed -9 and
               restarted from its file (same worker IDs, back), a node killed
               -9 and restarted (same worker ID), and Redis restarted without
               its data (every node 503 worker_id_lost until restarted; then
               each claims again, at once, and waits past the new epoch)

Then it prints a table and exits 1 if a "must" failed:
  - no duplicate ID (segment and snowflake IDs checked separately, the
    volume clients' IDs included);
  - no failed request during 2 rolling, 3 db-short and 7 multi-db, and
    none during the switch to Redis and the short Redis pause in 8;
  - every non-200 answer is a 503 with a JSON body carrying "error" (an
    nginx 502/504 page, a connection error or a timeout fails this; the
    one exception is nginx's own 502 while every node refuses snowflake
    after the Redis wipe in 8 and the last node it tried was restarting);
  - phase 8 did what it meant to: each node kept its worker ID across the
    switch, gated past its last ZooKeeper fence; the long pause made every
    node refuse (worker_lease_expired) within half the lease plus two store
    call timeouts; Redis killed -9 and a node killed -9 changed no worker
    ID; the wipe made every node refuse (worker_id_lost), and restarted
    each claimed an ID of its own, gated past the store's new epoch +
    fence_step + max_borrow + max_clock_offset;
  - every 200 carries the IDs asked for, in increasing order;
  - the run did what it meant to (phase 4 saw ids_exhausted, every node
    came back healthy), and every segment ID is below leaf_alloc.max_id.
"""
import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from bbutil import (FAKETIME, LEAFD, Client, MariaDB, TestFailure, Workdir,  # noqa: E402
                    faketime_preload, free_port, in_ci, missing_mariadb,
                    missing_zookeeper, wait_for)

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

# The request mix, cycled by every client thread (each from its own offset).
KINDS = [("seg", "/segment/chaos", 1),
         ("seg", "/segment/chaos?count=10", 10),
         ("sf", "/snowflake", 1),
         ("sf", "/snowflake?count=10", 10)]

T0 = time.time()


def say(msg):
    print("[%6.1fs] %s" % (time.time() - T0, msg), flush=True)


# ---- nginx -------------------------------------------------------------------
#
# Why these settings:
# - Every leafd ID route is a GET with no effect but the IDs it returns, and
#   an ID nobody received is only a gap (IDs are unique, not gapless), so a
#   request that failed to connect, timed out or got a 503 (ids_exhausted,
#   clock_behind, fence_not_passed, ...) is safe to send to another node:
#   proxy_next_upstream error timeout http_503, up to 3 tries (every node).
#   non_idempotent is not needed: it only lets POST/LOCK/PATCH be retried,
#   and leafd answers those 405.
# - max_fails=0: with nginx's default (max_fails=1, fail_timeout=10s) one 503
#   or one refused connect takes a node out for 10 s, and once every node is
#   out (all three answer 503 ids_exhausted while the database is down) nginx
#   answers 502 "no live upstreams" itself without asking anyone: an HTML 5xx
#   instead of leafd's JSON 503. On loopback a refused connect costs nothing,
#   so always asking every node is cheap.
# - proxy_read_timeout far above segment.wait_ms (500 ms): leafd answers
#   within wait_ms, so only a hung node should time out, and no phase hangs
#   one. The margin is for the machine: make test runs chaos beside the
#   sanitizer lanes on two cores, and with 1 s a busy run saw nginx's own
#   504 when a node was not scheduled for a few seconds.
# - When every try fails, nginx passes the last node's answer through as it
#   is (status, Retry-After, JSON body): no error_page and no
#   proxy_intercept_errors, so any 502/504 page nginx makes up itself shows
#   in the results as the failure it is.
# - Keep-alive to the nodes, closed by nginx (30 s) before leafd would close
#   an idle one (http.idle_timeout_ms, 60 s). A request on a kept-alive
#   connection that a restarted node closed is retried by nginx without
#   using up a try.
NGINX_CONF = """\
worker_processes 1;
daemon off;
master_process on;
pid {wd}/nginx.pid;
error_log {wd}/nginx-error.log warn;
{user}
events {{ worker_connections 4096; }}
http {{
    client_body_temp_path {wd}/nginx-tmp/body;
    proxy_temp_path {wd}/nginx-tmp/proxy;
    fastcgi_temp_path {wd}/nginx-tmp/fastcgi;
    uwsgi_temp_path {wd}/nginx-tmp/uwsgi;
    scgi_temp_path {wd}/nginx-tmp/scgi;
    log_format chaos '$msec $status $request_time "$request" '
                     'up=[$upstream_addr] st=[$upstream_status] '
                     'rt=[$upstream_response_time]';
    access_log {wd}/nginx-access.log chaos buffer=64k flush=1s;

    upstream leafd {{
{servers}
        keepalive 32;
        keepalive_timeout 30s;
        keepalive_requests 100000;
    }}

    server {{
        listen 127.0.0.1:{port};
        keepalive_timeout 60s;
        keepalive_requests 100000;

        location / {{
            proxy_pass http://leafd;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_connect_timeout 250ms;
            proxy_send_timeout 1s;
            proxy_read_timeout {read_timeout}ms;
            proxy_next_upstream error timeout http_503;
            proxy_next_upstream_tries 3;
            proxy_next_upstream_timeout 5s;
            proxy_buffering off;
            add_header X-Upstream $upstream_addr always;
            add_header X-Upstream-Status $upstream_status always;
            add_header Cache-Control "no-store" always;
        }}
    }}
}}
"""


class Nginx:
    def __init__(self, wd, node_ports, read_timeout_ms):
        self.wd = wd
        self.port = free_port()
        self.proc = None
        os.makedirs(os.path.join(wd, "nginx-tmp"), exist_ok=True)
        servers = "\n".join("        server 127.0.0.1:%d max_fails=0;" % p
                            for p in node_ports)
        self.conf = os.path.join(wd, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(NGINX_CONF.format(
                wd=wd, port=self.port, servers=servers, read_timeout=read_timeout_ms,
                user="user root;" if os.geteuid() == 0 else ""))

    def start(self):
        self.logf = open(os.path.join(self.wd, "nginx.out"), "ab")
        self.proc = subprocess.Popen(
            [NGINX, "-p", self.wd, "-e", os.path.join(self.wd, "nginx-error.log"),
             "-c", self.conf], stdout=self.logf, stderr=subprocess.STDOUT)

        def up():
            if self.proc.poll() is not None:
                raise TestFailure("nginx exited with %s: %s" % (
                    self.proc.returncode, tail(os.path.join(self.wd, "nginx-error.log"))))
            import socket
            socket.create_connection(("127.0.0.1", self.port), 0.2).close()
            return True
        wait_for(up, timeout=30, what="nginx listening")
        return self

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGQUIT)       # graceful
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.logf.close()


def tail(path, n=20):
    try:
        with open(path, "rb") as f:
            return b"".join(f.readlines()[-n:]).decode("utf-8", "replace")
    except OSError:
        return ""


class ChaosWorkdir(Workdir):
    """Workdir that can also be kept after a successful run (--keep)."""

    keep = False

    def __exit__(self, *exc):
        if self.keep and exc[0] is None:
            for fn in reversed(self.cleanup):
                try:
                    fn()
                except Exception as e:
                    print("  cleanup: %s" % e)
            print("  (kept %s)" % self.path)
            return False
        return Workdir.__exit__(self, *exc)


# ---- the clients -------------------------------------------------------------

class Load:
    """Client threads through nginx. Each record is a tuple
    (start wall time, latency s, path, status, error code, upstream status,
     upstream addrs, IDs received)."""

    DRAIN = ("seg", "/segment/chaos?count=1000", 1000)
    VOLUME = (("seg", "/segment/chaosvol?count=1000", 1000),
              ("sf", "/snowflake?count=1000", 1000))

    def __init__(self, port, threads, rate, volume_rate=0.0):
        self.port = port
        self.nthreads = threads
        self.period = 1.0 / rate
        self.stop_ev = threading.Event()
        self.drain_ev = threading.Event()
        n = threads + 1                     # the last one is the drainer
        self.recs = [[] for _ in range(n)]
        self.ids = {"seg": [[] for _ in range(n)], "sf": [[] for _ in range(n)]}
        self.bad200 = [[] for _ in range(n)]
        self.threads = []
        self.volume_period = 1.0 / volume_rate if volume_rate > 0 else 0.0
        # Volume clients: IDs in compact arrays, one record per request
        # (start time, status, error code, IDs received, upstream statuses).
        import array
        self.vol_ids = {"seg": array.array("q"), "sf": array.array("q")}
        self.vol_recs = {"seg": [], "sf": []}
        self.vol_bad200 = []

    def start(self):
        for i in range(self.nthreads):
            t = threading.Thread(target=self.run, args=(i,), daemon=True)
            t.start()
            self.threads.append(t)
        t = threading.Thread(target=self.drainer, daemon=True)
        t.start()
        self.threads.append(t)
        if True:
            for kind in self.VOLUME:
                t = threading.Thread(target=self.volume_client, args=(kind,), daemon=True)
                t.start()
                self.threads.append(t)

    def volume_client(self, kind):
        """As many batches as the nodes give; a failed request waits 50 ms."""
        space, path, want = kind
        c = Client(self.port, timeout=15)
        ids, recs = self.vol_ids[space], self.vol_recs[space]
        while not self.stop_ev.is_set():
            t = time.time()
            code, n, up_st = None, 0, ""
            try:
                r = c.get(path)
                status = r.status
                up_st = r.header("X-Upstream-Status") or ""
            except Exception as e:
                status, r = 0, None
                code = "client:%s" % type(e).__name__
                c.close()
            if r is not None and status == 200:
                try:
                    got = [int(x) for x in r.text.split()]
                except ValueError:
                    got = None
                if got is None or len(got) != want or \
                        any(a >= b for a, b in zip(got, got[1:])):
                    self.vol_bad200.append((t, path, r.body[:200]))
                else:
                    ids.extend(got)
                    n = len(got)
            elif r is not None:
                code = error_code(r)
            recs.append((t, status, code, n, up_st, time.time()))
            if status != 200:
                time.sleep(0.05)
            elif self.volume_period:
                time.sleep(max(0.0, self.volume_period - (time.time() - t)))
        c.close()

    def stop(self):
        self.stop_ev.set()
        self.drain_ev.set()
        for t in self.threads:
            t.join(timeout=30)

    def one(self, c, i, kind):
        space, path, want = kind
        t = time.time()
        m = time.monotonic()
        code = None
        up_st = up_addr = ""
        got = []
        try:
            r = c.get(path)
            status = r.status
            up_st = r.header("X-Upstream-Status") or ""
            up_addr = r.header("X-Upstream") or ""
        except Exception as e:              # timeout, refused, reset...
            status, r = 0, None
            code = "client:%s" % type(e).__name__
            c.close()
        lat = time.monotonic() - m
        if r is not None and status == 200:
            try:
                got = [int(x) for x in r.text.split()]
            except ValueError:
                got = None
            if got is None or len(got) != want or \
                    any(a >= b for a, b in zip(got, got[1:])):
                self.bad200[i].append((t, path, r.body[:200]))
                got = []
            else:
                node = up_addr.rsplit(",", 1)[-1].strip()
                out = self.ids[space][i]
                for x in got:
                    out.append((x, t, node))
        elif r is not None:
            code = error_code(r)
        self.recs[i].append((t, lat, path, status, code, up_st, up_addr, len(got)))

    def run(self, i):
        c = Client(self.port, timeout=15)
        k = i
        nxt = time.monotonic()
        while not self.stop_ev.is_set():
            self.one(c, i, KINDS[k % len(KINDS)])
            k += 1
            nxt += self.period
            now = time.monotonic()
            if nxt > now:
                time.sleep(nxt - now)
            elif now - nxt > 1.0:
                nxt = now                   # fell behind (slow answers): no burst
        c.close()

    def drainer(self):
        """A batch client: while drain_ev is set, count=1000 ten times a
        second (phase 4: the buffers run dry in seconds, not minutes)."""
        i = self.nthreads
        c = Client(self.port, timeout=15)
        while not self.stop_ev.is_set():
            if not self.drain_ev.wait(0.2):
                continue
            if self.stop_ev.is_set():
                break
            t = time.monotonic()
            self.one(c, i, self.DRAIN)
            time.sleep(max(0, 0.1 - (time.monotonic() - t)))
        c.close()

    def records(self):
        return sorted((r for rs in self.recs for r in rs), key=lambda r: r[0])

    def all_ids(self, space):
        return [x for part in self.ids[space] for x in part]

    def count_since(self, t, pred):
        n = 0
        for rs in self.recs:
            for r in reversed(rs):
                if r[0] < t:
                    break
                if pred(r):
                    n += 1
        return n

    def sf_failures(self, t0, t1):
        """Non-200 snowflake answers (latency and volume clients) to requests
        sent in [t0, t1), by "status code"."""
        c = collections.Counter()
        for rs in self.recs:
            for r in rs:
                if t0 <= r[0] < t1 and r[2].startswith("/snowflake") and r[3] != 200:
                    c["%s %s" % (r[3], r[4])] += 1
        for r in list(self.vol_recs["sf"]):
            if t0 <= r[0] < t1 and r[1] != 200:
                c["%s %s" % (r[1], r[2])] += 1
        return c

    def sum_since(self, t, pred):
        n = 0
        for rs in self.recs:
            for r in reversed(rs):
                if r[0] < t:
                    break
                if pred(r):
                    n += r[7]
        return n


def error_code(r):
    """The JSON "error" of a non-200 answer, or a tag saying what it was."""
    ctype = (r.header("Content-Type") or "").lower()
    try:
        j = json.loads(r.body)
        if isinstance(j, dict) and isinstance(j.get("error"), str) and j["error"]:
            return j["error"]
        return "json-without-error"
    except ValueError:
        if "html" in ctype or b"<html" in r.body[:200].lower():
            return "html"
        return "no-json-body" if r.body else "empty-body"


# ---- the run -----------------------------------------------------------------

class Chaos:
    def __init__(self, args):
        self.args = args
        self.f = args.scale
        self.step = int(args.step * self.f)
        self.phases = []            # (name, start, action end, window end)
        self.notes = []             # what each phase measured
        self.musts = []             # (ok, text)
        self.sigterm_rcs = []
        self.db2 = None
        self.redis = None
        # (start, end): every node refuses snowflake and one at a time is
        # restarted (8, after the wipe); see nginx_own_502
        self.restart_windows = []

    def s(self, secs):
        """A phase duration, scaled."""
        return secs * self.f

    # -- topology --
    def setup(self, wd):
        a = self.args
        self.wd = wd
        say("work directory %s" % wd.path)
        self.db = wd.mariadb()
        self.db.sql("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
                    "VALUES ('chaos', 1, %d, 'chaos run')" % self.step)
        self.db.sql("INSERT INTO leaf_alloc(biz_tag, max_id, step, description) "
                    "VALUES ('chaosvol', 1, 1000000, 'chaos run: volume clients')")
        say("MariaDB on %d (tag chaos, step %d)" % (self.db.port, self.step))
        self.zk = wd.zookeeper()
        say("ZooKeeper on %s" % self.zk.address)
        self.clock_file = os.path.join(wd.path, "faketime.rc")
        self.set_clock("+0")
        self.nodes = []
        for i in range(3):
            name = "n%d" % i
            conf = {
                "leaf.name": "chaos",
                "threads": "2",
                "leaf.segment.enable": "true",
                "segment.mysql.url": self.db.url,
                "segment.wait_ms": str(a.wait_ms),
                "segment.db_timeout_ms": "1000",
                "segment.db_backoff_max_ms": "1000",
                "segment.refresh_ms": "1000",
                # The table's step, fixed: the adaptive step would otherwise
                # double on every load and the buffers would never run dry.
                "segment.max_step": str(self.step),
                "leaf.snowflake.enable": "true",
                "leaf.snowflake.zk.address": self.zk.address,
                "snowflake.ip": "127.0.0.1",
                "snowflake.cache_file": os.path.join(wd.path, "%s-cache.json" % name),
                "snowflake.zk_session_timeout_ms": "4000",
                "snowflake.heartbeat_ms": "1000",
            }
            env = {}
            if i == 2:
                env = {"LD_PRELOAD": faketime_preload(wd.path),
                       "FAKETIME_TIMESTAMP_FILE": self.clock_file,
                       "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
            self.nodes.append(wd.leafd(conf=conf, env=env, name=name))
        for n in self.nodes:
            n.start()
        for n in self.nodes:
            self.wait_healthy(n)
        self.port_name = {"127.0.0.1:%d" % n.port: n.name for n in self.nodes}
        self.worker = {}
        for n in self.nodes:
            st = n.get("/snowflake/state").json()
            self.worker[st["worker_id"]] = n.name
        say("leafd n0 n1 n2 on %s (n2 under libfaketime); worker IDs %s" % (
            ", ".join(str(n.port) for n in self.nodes),
            ", ".join("%s=%s" % (v, k) for k, v in sorted(self.worker.items(), key=lambda x: x[1]))))
        self.nginx = Nginx(wd.path, [n.port for n in self.nodes], a.wait_ms + 9500)
        wd.cleanup.append(self.nginx.stop)
        self.nginx.start()
        say("nginx on %d" % self.nginx.port)

    def set_clock(self, offset):
        with open(self.clock_file + ".tmp", "w") as f:
            f.write(offset + "\n")
        os.rename(self.clock_file + ".tmp", self.clock_file)

    def health(self, n):
        r = n.get("/health")
        return r.status, r.json()

    def wait_healthy(self, n, timeout=30):
        try:
            return wait_for(lambda: n.get("/health").status == 200, timeout=timeout,
                            step=0.1, what="%s healthy" % n.name)
        except TestFailure as e:
            raise TestFailure("%s (last /health: %s)" % (e, self.safe_health(n)))

    def safe_health(self, n):
        try:
            return n.get("/health").text.strip()
        except Exception as e:
            return repr(e)

    def cache(self, n):
        for t in n.get("/cache").json()["tags"]:
            if t["key"] == "chaos":
                return t
        return None

    # -- phases --
    def phase(self, name, fn):
        start = time.time()
        say("== phase %s" % name)
        try:
            fn()
        except TestFailure as e:
            self.musts.append((False, "phase %s: %s" % (name, e)))
            say("   FAILED: %s" % e)
        end = time.time()
        say("   %s done in %.1fs; settling %.0fs" % (name, end - start, self.s(self.args.settle)))
        time.sleep(self.s(self.args.settle))
        self.phases.append((name, start, end, time.time()))

    def p_kill9(self):
        n = self.nodes[0]
        n.kill9()
        say("   kill -9 %s" % n.name)
        time.sleep(self.s(2))
        n.start()
        t = time.time()
        self.wait_healthy(n)
        self.notes.append("1 kill9: %s healthy %.1fs after the restart" % (n.name, time.time() - t))

    def p_rolling(self):
        for n in self.nodes:
            t = time.time()
            rc = n.stop(signal.SIGTERM)
            self.sigterm_rcs.append((n.name, rc))
            n.start()
            self.wait_healthy(n)
            say("   %s: SIGTERM exit %s, healthy again in %.1fs" % (n.name, rc, time.time() - t))
            time.sleep(self.s(1))

    def p_db_short(self):
        # Both buffers full on every node first, so they last longer than
        # the outage whatever their state was.
        # (The prefetch starts once 10% of a segment is used: allow 3 times
        # as long as that takes at the current rate.)
        wait_for(lambda: all((self.cache(n) or {}).get("next_ready") for n in self.nodes),
                 timeout=30 + 0.3 * self.step / max(self.seg_rate(), 10), step=0.1,
                 what="next buffer ready on every node")
        avail = [self.cache(n)["available"] for n in self.nodes]
        t = time.time()
        self.db.stop()
        # Every node notices (segment.refresh_ms reads the table every
        # second) and keeps serving from its buffers, healthy but degraded.
        wait_for(lambda: all(self.health(n)[1].get("segment", {}).get("db") == "down"
                             for n in self.nodes),
                 timeout=30, step=0.1, what="every node to see the database down")
        seen = time.time() - t
        time.sleep(self.s(self.args.short_outage))
        during = [self.health(n) for n in self.nodes]
        self.db.start()
        down = time.time() - t
        self.wait_db_up()
        rate = self.seg_rate()
        degraded = all(st == 200 and h.get("status") == "degraded" for st, h in during)
        self.musts.append((degraded, "3 db-short: every node answered /health 200 degraded "
                           "with the database down (%s)" % ", ".join(
                               "%d %s" % (st, h.get("status")) for st, h in during)))
        self.notes.append("3 db-short: MariaDB down %.1fs (every node saw it after %.1fs); "
                          "buffers held %s IDs at the stop (~%.0f s at %.0f segment IDs/s "
                          "per node)" % (down, seen, "/".join(map(str, avail)),
                                         min(avail) / max(rate, 1), rate))

    def p_db_long(self):
        t = time.time()
        self.db.stop()
        # A batch client drains the buffers, so they run dry in seconds
        # rather than minutes (the load alone would take step / rate).
        self.load.drain_ev.set()
        # Down until every node is dry (health 503) and the clients have seen
        # ids_exhausted through nginx (all three nodes answered 503).
        limit = 60 + 8.0 * self.step / max(self.seg_rate(), 10)
        try:
            wait_for(lambda: all(n.get("/health").status == 503 for n in self.nodes) and
                     self.load.count_since(t, lambda r: r[4] == "ids_exhausted") > 0,
                     timeout=limit, step=0.25, what="every node dry with the database down")
        finally:
            self.load.drain_ev.clear()
        dry = time.time() - t
        say("   every node dry %.1fs after the stop" % dry)
        time.sleep(self.s(self.args.dry_hold))
        t2 = time.time()
        self.db.start()
        self.wait_db_up()
        for n in self.nodes:
            self.wait_healthy(n, timeout=30)
        rec = time.time() - t2
        self.notes.append("4 db-long: MariaDB down %.1fs, all nodes dry after %.1fs, "
                          "healthy %.1fs after it was back" % (t2 - t, dry, rec))

    def p_zk(self):
        t = time.time()
        self.zk.stop()
        time.sleep(self.s(self.args.zk_outage))
        self.zk.start()
        down = time.time() - t

        def reconnected():
            for n in self.nodes:
                st = n.get("/snowflake/state").json()
                if st.get("zk_state") != "connected" or st.get("status") != "ok":
                    return False
            return True
        t2 = time.time()
        wait_for(reconnected, timeout=60, step=0.25, what="every node reconnected to ZooKeeper "
                 "(%s)" % [self.safe_state(n) for n in self.nodes])
        self.notes.append("5 zk: ZooKeeper down %.1fs, every node connected again %.1fs later" % (
            down, time.time() - t2))

    def safe_state(self, n):
        try:
            st = n.get("/snowflake/state").json()
            return "%s:%s/%s" % (n.name, st.get("zk_state"), st.get("status"))
        except Exception as e:
            return "%s:%r" % (n.name, e)

    def p_clock(self):
        n = self.nodes[2]
        self.set_clock("-0.010")
        say("   %s clock -10 ms" % n.name)
        time.sleep(self.s(3))
        st, h = self.health(n)
        small_ok = st == 200
        self.set_clock("-10")
        say("   %s clock -10 s" % n.name)
        # clock_behind at once; clock_offset once a ZooKeeper write has
        # measured the 10 s against the node's mtime (max_clock_offset_ms)
        seen = wait_for(lambda: any(c in n.get("/health").text
                                    for c in ("clock_behind", "clock_offset")),
                        timeout=30, step=0.05,
                        what="%s reporting clock_behind or clock_offset" % n.name)
        time.sleep(min(self.s(4), 8))      # stays below 10 s: it would catch up
        self.set_clock("+0")
        say("   %s clock +0" % n.name)
        t = time.time()
        self.wait_healthy(n)
        self.notes.append("6 clock: %s %s at -10 ms, %s at -10 s, healthy %.1fs after +0" % (
            n.name, "healthy" if small_ok else "UNHEALTHY (%s)" % h,
            "clock_behind/clock_offset" if seen else "?", time.time() - t))

    def p_multidb(self):
        a = self.args
        self.db2 = MariaDB(os.path.join(self.wd.path, "db2"))
        self.wd.cleanup.append(self.db2.stop)
        self.db2.start()
        block = 10000000            # over every step (chaosvol's is 1,000,000)
        r = subprocess.run([LEAFD, "multi-db", "init", self.db.url, self.db2.url,
                            "--block-size=%d" % block, "--segment.max_step=%d" % self.step],
                           capture_output=True, timeout=120)
        if r.returncode != 0:
            raise TestFailure("multi-db init: %s" % (r.stdout + r.stderr).decode()[-400:])
        say("   multi-db init: MariaDB %d and %d, blocks of %d" % (
            self.db.port, self.db2.port, block))
        for n in self.nodes:
            n.conf.pop("segment.mysql.url", None)
            n.conf["segment.mysql.urls"] = "%s,%s" % (self.db.url, self.db2.url)
            n.stop(signal.SIGTERM)
            n.start()
            self.wait_healthy(n)
            time.sleep(self.s(1))
        say("   every node on both databases")
        t = time.time()
        with open(os.path.join(self.db.dir, "pid")) as f:
            os.kill(int(f.read().strip()), signal.SIGKILL)
        say("   kill -9 the first MariaDB; draining the chaos tag so loads must happen")
        self.load.drain_ev.set()
        try:
            time.sleep(self.s(2 * a.short_outage))
        finally:
            self.load.drain_ev.clear()
        during = [self.health(n) for n in self.nodes]
        served = self.load.count_since(t, lambda r: r[2].startswith("/segment") and r[3] == 200)
        self.db.restart()
        down = time.time() - t
        self.wait_db_up()
        ok = all(st == 200 for st, _ in during)
        self.musts.append((ok and served > 0, "7 multi-db: every node healthy and %d segment "
                           "requests served with the first database killed" % served))
        self.notes.append("7 multi-db: the first of two databases down %.1fs (kill -9); %d "
                          "segment requests answered meanwhile" % (down, served))

    # -- phase 8: worker IDs from Redis --
    #
    # The lease settings of the Redis phase: short, so the faults show in
    # seconds. The lease must be at least 4 x the fence step and over 2 x
    # the heartbeat (sfconfig.c, workerid_lease.c).
    RLEASE_MS, RSTEP_MS, RHB_MS = 8000, 2000, 500
    RPREFIX = "chaos:sf:"

    def sf_state(self, n):
        return n.get("/snowflake/state").json()

    def read_cache(self, n):
        with open(n.conf["snowflake.cache_file"]) as f:
            return json.load(f)

    def redis_ms(self):
        sec, usec = self.redis.cli("TIME").split()
        return int(sec) * 1000 + int(usec) // 1000

    def statuses(self):
        out = {}
        for n in self.nodes:
            try:
                out[n.name] = self.sf_state(n).get("status")
            except Exception as e:
                out[n.name] = "?%s" % type(e).__name__
        return out

    def workers(self):
        return {n.name: self.sf_state(n)["worker_id"] for n in self.nodes}

    def wait_status(self, want, timeout, what):
        """Until every node's /snowflake/state status is want; on timeout
        the failure names the statuses seen last."""
        try:
            return wait_for(lambda: all(v == want for v in self.statuses().values()),
                            timeout=timeout, step=0.05, what=what)
        except TestFailure as e:
            raise TestFailure("%s (snowflake status %s)" % (e, self.statuses()))

    def wait_sf_ok(self, timeout, what):
        return self.wait_status("ok", timeout, what)

    def p_redis(self):
        self.redis = r = self.wd.redis(durable=True)
        say("   redis-server on %d (appendonly, appendfsync always)" % r.port)
        self.redis_switch()
        self.redis_pause_short()
        self.redis_pause_long()
        self.redis_kill9()
        self.redis_node_kill9()
        self.redis_wipe()

    def redis_switch(self):
        """Every node's ZooKeeper worker ID reserved in Redis for the node's
        identity (ip:port) and its instance nonce, with its fence, then each
        node restarted onto Redis: it finds its own reservation and keeps
        its worker ID, gated on the fence in its cache file, so no two nodes
        ever share a worker ID across the two sources and none issues below
        what it issued before."""
        r, p = self.redis, self.RPREFIX
        before = self.workers()
        # live until the switch is surely done: nobody else can take it
        reserve = self.redis_ms() + 120000
        for n in self.nodes:
            c = self.read_cache(n)
            ident = "%s:%d" % (c["ip"], c["port"])      # as the lease names it
            if c.get("worker_id") != before[n.name] or not c.get("nonce"):
                raise TestFailure("%s's cache file does not match its state: %r" % (n.name, c))
            r.cli("HSET", "%sw:%d" % (p, c["worker_id"]), "identity", ident,
                  "instance", c["nonce"], "fence", c["fence"], "hb", reserve, "released", "0")
            r.cli("SET", "%sid:%s" % (p, ident), c["worker_id"])
        say("   seeded %s" % ", ".join("%s=%d" % kv for kv in sorted(before.items())))
        t = time.time()
        gates = []
        for n in self.nodes:
            rc = n.stop(signal.SIGTERM)
            last = self.read_cache(n)
            for k in ("leaf.snowflake.zk.address", "snowflake.zk_session_timeout_ms"):
                n.conf.pop(k, None)
            n.conf.update({
                "snowflake.worker_source": "redis",
                "snowflake.redis.url": "redis://127.0.0.1:%d" % r.port,
                "snowflake.redis.prefix": p,
                "snowflake.takeover_age_ms": str(self.RLEASE_MS),
                "snowflake.fence_step_ms": str(self.RSTEP_MS),
                "snowflake.heartbeat_ms": str(self.RHB_MS),
            })
            n.start()
            self.wait_healthy(n)
            st = self.sf_state(n)
            gates.append((n.name, rc, st.get("source"), st.get("worker_id"), last["worker_id"],
                          st.get("start_fence"), last["fence"]))
            say("   %s: SIGTERM exit %s, on %s: worker %s (was %s), start fence %s "
                "(last ZooKeeper fence %s)" % gates[-1])
        t_end = time.time()
        ok = all(rc == 0 and src == "redis" and w == w0 and g >= f0
                 for _, rc, src, w, w0, g, f0 in gates)
        self.musts.append((ok, "8 redis: every node restarted onto Redis (SIGTERM exit 0) with "
                           "the worker ID it held in ZooKeeper, gated at or past its last "
                           "ZooKeeper fence (%s)" % "; ".join(
                               "%s rc %s %s w%s<-w%s gate-fence %+d ms" % (
                                   x[0], x[1], x[2], x[3], x[4], x[5] - x[6]) for x in gates)))
        fails = self.load.sf_failures(t, t_end)
        self.musts.append((not fails, "8 redis: no failed snowflake request during the switch "
                           "(%s)" % (dict(fails) or 0)))
        self.notes.append("8 redis: switch ZooKeeper -> Redis in %.1fs, worker IDs %s kept" % (
            t_end - t, ", ".join("%s=%d" % kv for kv in sorted(before.items()))))

    def redis_pause_short(self):
        self.wait_sf_ok(30, "every node serving snowflake from Redis")
        pause = 0.35 * self.RSTEP_MS / 1000.0
        t = time.time()
        self.redis.pause()
        time.sleep(pause)
        self.redis.resume()
        time.sleep(0.5)
        fails = self.load.sf_failures(t, time.time())
        served = self.load.count_since(t, lambda r: r[2].startswith("/snowflake") and
                                       r[3] == 200)
        self.musts.append((not fails and served > 0,
                           "8 redis: Redis paused %.1fs (under half the %.0fs fence step): "
                           "%d snowflake requests served, none failed (%s)" % (
                               pause, self.RSTEP_MS / 1000.0, served, dict(fails) or 0)))

    def redis_pause_long(self):
        self.wait_sf_ok(30, "every node serving snowflake again")
        half = self.RLEASE_MS / 2000.0
        # The keeper checks the lease between store calls, each of which
        # may wait out its timeout (min(heartbeat, 1 s)) on a stopped
        # Redis: the heartbeat and a fence write, two per round.
        limit = half + 2 * min(self.RHB_MS, 1000) / 1000.0 + 0.5
        # What must hold is that every node refuses before a taker could
        # claim its worker ID (the full lease): fence_unconfirmed (past the
        # last fence Redis confirmed) refuses as worker_lease_expired does.
        # Then every node must also say its lease expired, with Redis still
        # stopped, however late a busy machine lets its keeper see it (a
        # run with a busy loop saw n0 at fence_unconfirmed 8 s in). The
        # design's bound above is reported.
        full = self.RLEASE_MS / 1000.0
        t = time.time()
        self.redis.pause()
        try:
            try:
                wait_for(lambda: all(v in ("worker_lease_expired", "fence_unconfirmed")
                                     for v in self.statuses().values()),
                         timeout=full, step=0.05, what="every node refusing")
            except TestFailure as e:
                raise TestFailure("%s (snowflake status %s)" % (e, self.statuses()))
            refusing = time.time() - t
            self.wait_status("worker_lease_expired", 30,
                             "every node refusing with worker_lease_expired")
            seen = time.time() - t
            time.sleep(max(0.0, min(limit + 1, full) - (time.time() - t)))
        finally:
            self.redis.resume()
        down = time.time() - t
        t2 = time.time()
        self.wait_sf_ok(30, "every node serving after SIGCONT")
        back = time.time() - t2
        codes = self.load.sf_failures(t, time.time())
        expired = sum(k for c, k in codes.items() if c == "503 worker_lease_expired")
        self.musts.append((refusing < full and expired > 0,
                           "8 redis: Redis paused %.1fs: every node refused %.1fs in, "
                           "before the full lease %.1fs, and said worker_lease_expired "
                           "%.1fs in (design: half the lease %.1fs + two store call "
                           "timeouts: %.1fs), the clients saw it (%d)"
                           % (down, refusing, full, seen, half, limit, expired)))
        self.notes.append("8 redis: paused %.1fs: all nodes worker_lease_expired after %.1fs, "
                          "serving %.1fs after SIGCONT; snowflake non-200: %s" % (
                              down, seen, back, dict(codes)))

    def redis_kill9(self):
        before = self.workers()
        t = time.time()
        self.redis.kill9()
        time.sleep(1.0)
        self.redis.start()
        down = time.time() - t
        t2 = time.time()
        self.wait_sf_ok(30, "every node serving after Redis came back from its file")
        back = time.time() - t2
        after = self.workers()
        codes = self.load.sf_failures(t, time.time())
        self.musts.append((after == before, "8 redis: Redis killed -9 and restarted from its "
                           "append-only file: every node kept its worker ID (%s -> %s)" % (
                               before, after)))
        self.notes.append("8 redis: kill -9, down %.1fs, back from its file: serving %.1fs "
                          "later; snowflake non-200: %s" % (down, back, dict(codes)))

    def redis_node_kill9(self):
        n = self.nodes[1]
        w = self.sf_state(n)["worker_id"]
        n.kill9()
        time.sleep(1.0)
        n.start()
        t = time.time()
        self.wait_healthy(n)
        w2 = self.sf_state(n)["worker_id"]
        self.musts.append((w2 == w, "8 redis: %s killed -9 and restarted kept worker ID %s "
                           "(got %s)" % (n.name, w, w2)))
        self.notes.append("8 redis: %s kill -9: healthy %.1fs after the restart, worker %s" % (
            n.name, time.time() - t, w2))

    def redis_wipe(self):
        """Redis back without its data. A holder's next write finds no
        hash: the ID is lost for good (503 worker_id_lost) until the node
        restarts and claims again. The nodes are restarted at once: the
        first claim sets the store's epoch, and an ID with no hash gates on
        epoch + fence_step + max_borrow + max_clock_offset, past anything a
        lost node issued (a node may come back with another's old ID); the
        run's duplicate check covers it."""
        t = time.time()
        self.redis.kill9()
        self.redis.wipe()
        self.redis.start()
        try:
            self.wait_status("worker_id_lost", 30, "every node worker_id_lost")
            seen, why = time.time() - t, ""
        except TestFailure as e:
            seen, why = None, ": %s" % e
        self.musts.append((seen is not None, "8 redis: Redis restarted without its data: every "
                           "node refused with worker_id_lost%s" % (
                               " %.1fs later" % seen if seen is not None else why)))
        t2 = time.time()
        try:
            for n in self.nodes:
                n.stop(signal.SIGTERM)
                n.start()
                self.wait_healthy(n)
        finally:
            self.restart_windows.append((t2, time.time()))
        after = self.workers()
        for name, w in after.items():       # the report counts IDs per worker
            if name not in self.worker.get(w, "").split("/"):
                self.worker[w] = "%s/%s" % (self.worker.get(w, "?"), name)
        self.musts.append((len(set(after.values())) == 3, "8 redis: after the wipe each node, "
                           "restarted, claimed a worker ID of its own (%s)" % after))
        # max_borrow_ms and max_clock_offset_ms are the defaults (1 s, 5 s)
        epoch = int(self.redis.cli("GET", self.RPREFIX + "epoch"))
        gate = epoch + self.RSTEP_MS + 1000 + 5000
        gates = {n.name: self.sf_state(n).get("start_fence") for n in self.nodes}
        self.musts.append((all(g is not None and g >= gate for g in gates.values()),
                           "8 redis: after the wipe every node gated at or past the new "
                           "epoch %d + %d ms (%s)" % (epoch, gate - epoch, gates)))
        self.notes.append("8 redis: Redis wiped: every node worker_id_lost after %s s; "
                          "restarted at once, gated to epoch + %.1fs, healthy %.1fs after the "
                          "first restart: %s; snowflake non-200 since the wipe: %s" % (
                              "%.1f" % seen if seen is not None else "?",
                              (gate - epoch) / 1000.0, time.time() - t2, after,
                              dict(self.load.sf_failures(t, time.time()))))

    def nginx_own_502(self, t, t_end, status, code, up_st):
        """nginx's own 502 page, excused only where it cannot be helped: in
        a restart window, when of the three nodes the two running ones
        answered a JSON 503 and the third was the node restarting
        (connection refused, 502), in any order. nginx then makes up the
        answer itself. A fourth "try", 502, is nginx's note that no
        upstream was left (the group's name in $upstream_addr: the
        refusing node had been marked failed). A request counts as in the
        window when it was in flight during it ([t, t_end] overlaps): one
        sent just before a node's SIGTERM can reach that node after its
        listener closed."""
        tries = [x.strip() for x in up_st.split(",")]
        if len(tries) == 4 and tries[3] == "502":
            tries = tries[:3]
        return status == 502 and code == "html" and \
            sorted(tries) == ["502", "503", "503"] and \
            any(t < b and a <= t_end for a, b in self.restart_windows)

    def wait_db_up(self):
        wait_for(lambda: all(n.get("/health").json().get("segment", {}).get("db") == "up"
                             for n in self.nodes),
                 timeout=30, step=0.1, what="every node sees the database up")

    def seg_rate(self):
        """Segment IDs per second per node over the last 5 s."""
        t = time.time() - 5
        return self.load.sum_since(t, lambda r: r[2].startswith("/segment")) / 5.0 / 3

    # -- the whole run --
    def run(self, wd):
        a = self.args
        self.setup(wd)
        self.load = Load(self.nginx.port, a.threads, a.rate, a.volume_rate)
        self.load.start()
        say("load: %d client threads at %.0f requests/s each through nginx" % (
            a.threads, a.rate))
        time.sleep(self.s(a.settle))
        self.phases.append(("0 baseline", T0, time.time(), time.time()))
        self.phase("1 kill9", self.p_kill9)
        self.phase("2 rolling", self.p_rolling)
        self.phase("3 db-short", self.p_db_short)
        self.phase("4 db-long", self.p_db_long)
        self.phase("5 zk", self.p_zk)
        self.phase("6 clock", self.p_clock)
        self.phase("7 multi-db", self.p_multidb)
        self.phase("8 redis", self.p_redis)
        for n in self.nodes:
            try:
                self.wait_healthy(n, timeout=20)
            except TestFailure as e:
                self.musts.append((False, "end: %s" % e))
        self.load.stop()
        say("load stopped")
        self.max_id = max(int(d.sql("SELECT max_id FROM leaf_alloc WHERE biz_tag='chaos'"))
                          for d in (self.db, self.db2) if d is not None)
        return self.report()

    # -- results --
    def phase_of(self, t):
        name = self.phases[0][0]
        for p in self.phases:
            if t >= p[1]:
                name = p[0]
        return name

    def dump(self, recs):
        """Every request and every ID, for a look after the run (--keep, or
        kept because it failed)."""
        with open(os.path.join(self.wd.path, "requests.tsv"), "w") as f:
            f.write("start\tphase\tlatency_ms\tpath\tstatus\tcode\tupstream_status"
                    "\tupstreams\tids\n")
            for r in recs:
                f.write("%.6f\t%s\t%.1f\t%s\t%d\t%s\t%s\t%s\t%d\n" % (
                    r[0], self.phase_of(r[0]), r[1] * 1000, r[2], r[3], r[4] or "",
                    r[5], r[6], r[7]))
        for space in ("seg", "sf"):
            with open(os.path.join(self.wd.path, "ids-%s.tsv" % space), "w") as f:
                for x in self.load.all_ids(space):
                    f.write("%d\t%.6f\t%s\n" % x)

    def report(self):
        recs = self.load.records()
        self.dump(recs)
        by_phase = collections.OrderedDict((p[0], []) for p in self.phases)
        for r in recs:
            by_phase[self.phase_of(r[0])].append(r)
        out = []
        w = out.append
        w("")
        w("chaos results (%s run, scale %.2f, segment step %d)" % (
            "short" if self.f == 1 else "long", self.f, self.step))
        vol = {sp: self.load.vol_recs[sp] for sp in ("seg", "sf")}
        vol_by_phase = collections.defaultdict(lambda: [0, 0, 0])  # requests, non-200, IDs
        for sp in ("seg", "sf"):
            for r in vol[sp]:
                v = vol_by_phase[self.phase_of(r[0])]
                v[0] += 1
                v[1] += r[1] != 200
                v[2] += r[3]
        w("%-12s %6s %8s %7s %6s %8s %9s %10s %9s  %s" % (
            "phase", "secs", "requests", "failed", "retried", "p99 ms", "max ms",
            "IDs", "vol 503", "non-200 by code"))
        for p in self.phases:
            rs = by_phase[p[0]]
            fails = [r for r in rs if r[3] != 200]
            retried = sum(1 for r in rs if "," in r[5])
            lats = sorted(r[1] for r in rs)
            p99 = lats[int(len(lats) * 0.99) - 1] * 1000 if lats else 0
            mx = lats[-1] * 1000 if lats else 0
            codes = collections.Counter("%s %s" % (r[3], r[4]) for r in fails)
            vp = vol_by_phase[p[0]]
            w("%-12s %6.1f %8d %7d %6d %8.0f %9.0f %10d %9d  %s" % (
                p[0], p[3] - p[1], len(rs), len(fails), retried, p99, mx,
                sum(r[7] for r in rs) + vp[2], vp[1],
                ", ".join("%s x%d" % kv for kv in sorted(codes.items())) or "-"))
        w("")
        # IDs and duplicates
        seg, sf = self.load.all_ids("seg"), self.load.all_ids("sf")
        dups = {}
        for space, ids in (("segment", seg), ("snowflake", sf)):
            c = collections.Counter(x[0] for x in ids)
            d = {k: v for k, v in c.items() if v > 1}
            dups[space] = d
            w("%-9s IDs collected %8d   distinct %8d   duplicates %d" % (
                space, len(ids), len(c), len(d)))
            if d:
                shown = 0
                for x in sorted(ids, key=lambda x: (x[0], x[1])):
                    if x[0] in d and shown < 12:
                        w("    duplicate %d at %s (+%.2fs, %s) from %s" % (
                            x[0], time.strftime("%H:%M:%S", time.localtime(x[1])),
                            x[1] - T0, self.phase_of(x[1]), self.port_name.get(x[2], x[2])))
                        shown += 1
        # The volume clients: segment IDs of their own tag; snowflake IDs
        # checked together with the latency clients'.
        vol_dups = {}
        for space, extra in (("seg", []), ("sf", [x[0] for x in sf])):
            allv = sorted(list(self.load.vol_ids[space]) + extra)
            d = sum(1 for a, b in zip(allv, allv[1:]) if a == b)
            vol_dups[space] = d
            w("volume %-9s IDs %9d in %6d requests (%d not 200)%s   duplicates %d" % (
                "segment" if space == "seg" else "snowflake", len(self.load.vol_ids[space]),
                len(vol[space]), sum(1 for r in vol[space] if r[1] != 200),
                "" if space == "seg" else " + the latency clients'", d))
        per_node = collections.Counter(self.port_name.get(x[2], x[2]) for x in seg)
        per_worker = collections.Counter(self.worker.get((x[0] >> 12) & 1023, "?")
                                         for x in sf)
        w("segment IDs per node %s; snowflake IDs per worker %s" % (
            dict(sorted(per_node.items())), dict(sorted(per_worker.items()))))
        above = [x[0] for x in seg if x[0] >= self.max_id]
        w("leaf_alloc.max_id %d; segment IDs at or above it: %d" % (self.max_id, len(above)))
        # non-200 answers
        fails = [r for r in recs if r[3] != 200]
        codes = collections.Counter((r[3], r[4]) for r in fails)
        w("non-200 answers: %d of %d requests%s" % (len(fails), len(recs), ":" if codes else ""))
        for (st, code), k in sorted(codes.items()):
            w("    %3d %-28s x%d" % (st, code, k))
        longest = max(recs, key=lambda r: r[1]) if recs else None
        if longest:
            w("longest client wait %.0f ms (%s, %s, status %d, upstream %s)" % (
                longest[1] * 1000, longest[2], self.phase_of(longest[0]), longest[3],
                longest[5] or "-"))
        bad = [b for part in self.load.bad200 for b in part]
        for note in self.notes:
            w("  " + note)
        w("SIGTERM exit codes: %s" % ", ".join("%s=%s" % x for x in self.sigterm_rcs))
        # the musts
        m = self.musts
        m.append((not dups["segment"], "no duplicate segment ID (%d)" % len(dups["segment"])))
        m.append((not dups["snowflake"], "no duplicate snowflake ID (%d)" % len(dups["snowflake"])))
        m.append((not vol_dups["seg"] and not vol_dups["sf"],
                  "no duplicate among the volume clients' IDs (segment %d, snowflake %d)" % (
                      vol_dups["seg"], vol_dups["sf"])))
        excused = [r for sp in ("seg", "sf") for r in vol[sp]
                   if self.nginx_own_502(r[0], r[5], r[1], r[2], r[4])]
        excused += [r for r in fails if self.nginx_own_502(r[0], r[0] + r[1], r[3], r[4], r[5])]
        vbad = [r for sp in ("seg", "sf") for r in vol[sp]
                if r[1] != 200 and (r[1] != 503 or r[2] is None or
                                    r[2] in ("html", "no-json-body", "empty-body",
                                             "json-without-error")) and
                not self.nginx_own_502(r[0], r[5], r[1], r[2], r[4])]
        m.append((not vbad and not self.load.vol_bad200,
                  "volume clients: every answer a full 200 or a JSON 503 (%d are not%s)" % (
                      len(vbad) + len(self.load.vol_bad200),
                      ": %r" % ((vbad or self.load.vol_bad200)[0],) if vbad or self.load.vol_bad200
                      else "")))
        for ph in ("2 rolling", "3 db-short", "7 multi-db"):
            f = [r for r in by_phase.get(ph, []) if r[3] != 200]
            m.append((not f, "no failed request during %s (%d%s)" % (
                ph, len(f), ": %s" % collections.Counter(
                    "%s %s" % (r[3], r[4]) for r in f).most_common(4) if f else "")))
        badfail = [r for r in fails if (r[3] != 503 or r[4] is None or
                   r[4] in ("html", "no-json-body", "empty-body", "json-without-error")) and
                   not self.nginx_own_502(r[0], r[0] + r[1], r[3], r[4], r[5])]
        m.append((not badfail, "every non-200 is a 503 with a JSON error (%d are not%s; "
                  "%d nginx 502s excused: while every node refused snowflake after the "
                  "Redis wipe, the last node nginx tried was the one restarting)" % (
                      len(badfail), ": %s" % collections.Counter(
                          "%s %s" % (r[3], r[4]) for r in badfail).most_common(5)
                      if badfail else "", len(excused))))
        m.append((not bad, "every 200 has the IDs asked for, increasing (%d do not%s)" % (
            len(bad), ": %r" % (bad[0],) if bad else "")))
        m.append((not above, "every segment ID is below leaf_alloc.max_id (%d are not)" % len(above)))
        m.append((codes.get((503, "ids_exhausted"), 0) > 0,
                  "phase 4 drained the buffers (clients saw 503 ids_exhausted)"))
        m.append((len(seg) > 1000 and len(sf) > 1000, "enough IDs collected"))
        m.append((all(rc == 0 for _, rc in self.sigterm_rcs) and len(self.sigterm_rcs) == 3,
                  "every node exited 0 on SIGTERM"))
        w("")
        ok = True
        for good, text in m:
            w("%s  %s" % ("ok  " if good else "FAIL", text))
            ok = ok and good
        w("runtime %.0fs" % (time.time() - T0))
        print("\n".join(out), flush=True)
        self.log_summary()
        return ok

    def log_summary(self):
        """The warnings and errors each node logged, folded."""
        print("\nnode logs: warn/error lines, numbers folded")
        for n in self.nodes:
            c = collections.Counter()
            try:
                with open(n.log_path, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        parts = line.split(None, 2)
                        if len(parts) == 3 and parts[1] in ("warn", "error"):
                            c[parts[1] + " " + re.sub(r"\d+", "N", parts[2].strip())[:150]] += 1
            except OSError:
                pass
            print("  %s: %d lines" % (n.name, sum(c.values())))
            for msg, k in c.most_common(8):
                print("    %4dx %s" % (k, msg))
        c = collections.Counter()
        try:
            with open(os.path.join(self.wd.path, "nginx-error.log"), encoding="utf-8",
                      errors="replace") as f:
                for line in f:
                    m = re.search(r"\[(\w+)\] \d+#\d+: (?:\*\d+ )?(.*?)(?:, client:|$)", line)
                    if m:
                        c[m.group(1) + " " + re.sub(r"\d+", "N", m.group(2))[:120]] += 1
        except OSError:
            pass
        print("  nginx: %d lines" % sum(c.values()))
        for msg, k in c.most_common(6):
            print("    %4dx %s" % (k, msg))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--short", action="store_true", help="the CI run (the default)")
    ap.add_argument("--duration", type=float, default=float(os.environ.get("DURATION") or 0),
                    help="long run: scale the phases to about this many seconds "
                         "(also DURATION=...)")
    ap.add_argument("--threads", type=int, default=4, help="client threads")
    ap.add_argument("--rate", type=float, default=40, help="requests/s per client thread")
    ap.add_argument("--step", type=int, default=5000,
                    help="leaf_alloc step of the chaos tag (scaled with the phases)")
    ap.add_argument("--wait-ms", type=int, default=500, help="leafd segment.wait_ms")
    ap.add_argument("--settle", type=float, default=4, help="settle time after a phase, s")
    ap.add_argument("--short-outage", type=float, default=2, help="phase 3 MariaDB down, s")
    ap.add_argument("--dry-hold", type=float, default=3,
                    help="phase 4: keep MariaDB down this long after every node ran dry, s")
    ap.add_argument("--zk-outage", type=float, default=6, help="phase 5 ZooKeeper down, s")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--volume-rate", type=float, default=25,
                    help="requests/s of each volume client (count=1000; 0: as fast as "
                         "the nodes answer). 25 checks about 14M IDs per mode in a "
                         "600 s run, and keeps the ID sets to a few hundred MB")
    args = ap.parse_args()
    # The short run spends about 55 s in scalable waits (settle times,
    # outages, holds) and about 47 s in fixed ones (start-up, restarts,
    # draining, and phase 8's Redis faults, timed by its lease settings). A
    # long run stretches the scalable ones, and the step, so the buffers
    # still outlast the short outage.
    args.scale = 1.0 if args.short or not args.duration else \
        max(1.0, (args.duration - 47.0) / 55.0)
    # Never a silent pass: whatever is missing (MariaDB and ZooKeeper
    # included), the run fails (exit 2), with or without CI.
    missing = ["%s (%s)" % (what, path) for path, what in (
        (LEAFD, "./leafd: run make"), (NGINX, "nginx"), (FAKETIME, "libfaketime"))
        if not os.path.exists(path)]
    missing += ["MariaDB: %s" % m for m in missing_mariadb()]
    missing += ["ZooKeeper: %s" % m for m in missing_zookeeper()]
    missing += [b for b in ("redis-server", "redis-cli") if shutil.which(b) is None]
    if missing:
        print("chaos: FAILED, cannot run%s: missing %s (sh .ci/deps.sh test)" % (
            " under CI=%s" % os.environ.get("CI") if in_ci() else "", "; ".join(missing)))
        return 2

    def on_term(sig, frame):
        raise SystemExit(128 + sig)
    signal.signal(signal.SIGTERM, on_term)
    ChaosWorkdir.keep = args.keep
    with ChaosWorkdir("chaos") as wd:
        c = Chaos(args)
        ok = c.run(wd)
        if not ok:
            print("\nchaos: FAILED (see the FAIL lines above)")
            raise SystemExit(1)
    print("\nchaos: passed in %.0fs" % (time.time() - T0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
