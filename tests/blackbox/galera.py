#!/usr/bin/env python3
"""galera.py: leafd's segment mode on a 3-node MariaDB Galera cluster, two
leafd nodes writing through different Galera nodes, under faults.

    python3 tests/blackbox/galera.py --short [--leafd ./leafd]   about a minute
    python3 tests/blackbox/galera.py [--rounds N] [--scale S]   the long run
    ... --keep                                      keep the work directory
    ... --writers one         both leafd nodes through db0 (the comparison)

Topology (tests/lib/netns.py, on a private bridge in 10.232.0.0/16, root
only): namespaces db0 db1 db2 run one mariadbd each (tests/lib/galera.sh,
wsrep + rsync SST); namespaces l0 and l1 run one leafd each, l0 writing
through db0 and l1 through db1 (segment.mysql.url), tag `g` with a small
fixed step, so both nodes load the same row many times a second and their
UPDATEs meet in Galera's certification (error 1213 at COMMIT, which leafd
runs again: db_mysql_conn_tx_retry). Client threads in this process load
both leafd nodes as fast as they answer with /segment/g?count=5 and keep
every ID.

Phases, each followed by a settle time:
  calm         nothing
  kill9        mariadbd of db1 (l1's) killed -9, down a while, restarted
               (it rejoins by IST)
  partition    db0 (l0's) cut from db1 and db2 by nftables (it turns
               non-Primary and refuses statements), healed
  quorum       every Galera node cut from the others: no Primary component
               anywhere, every load refused; healed, the cluster forms its
               Primary component again by itself
  calm         nothing

Musts (exit 1 otherwise): no ID handed out twice (every ID of every answer
checked); every answer a 200 or a 503 with a JSON "error"; both leafd nodes
serve again at the end. Printed per phase: IDs issued, failed requests by
status and code, the longest time without any answer with IDs (per leafd
node and overall), p50/p99 latency, and how many loads leafd ran again
after ER_LOCK_DEADLOCK (its log lines).
"""
import argparse
import collections
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from netns import Net  # noqa: E402

GALERA_SH = os.path.join(ROOT, "tests", "lib", "galera.sh")
LEAFD_PORT = 22100
TAG = "g"


def say(msg):
    print("galera: [%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


class Galera:
    """The cluster of galera.sh, each node in a namespace of net."""

    def __init__(self, path, net, nodes):
        self.path, self.net, self.nodes = path, net, nodes
        self.env = dict(os.environ, LEAFD_ROOT=ROOT,
                        GALERA_NETNS=" ".join(n.ns for n in nodes),
                        GALERA_ADDRS=" ".join(n.addr for n in nodes))

    def sh(self, *args, check=True, timeout=300):
        r = subprocess.run(["sh", GALERA_SH] + [str(a) for a in args],
                           env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        out = r.stdout.decode("utf-8", "replace")
        if check and r.returncode != 0:
            raise RuntimeError("galera.sh %s: exit %d\n%s" % (
                " ".join(map(str, args)), r.returncode, out))
        return out

    def track(self):
        for i in range(len(self.nodes)):
            try:
                with open(os.path.join(self.path, "n%d" % i, "pid")) as f:
                    self.net.track(int(f.read().strip()))
            except (OSError, ValueError):
                pass

    def start(self):
        self.sh("start", self.path)
        self.track()

    def stop(self):
        self.sh("stop", self.path, check=False)

    def kill9(self, i):
        self.sh("node-kill", self.path, i)

    def restart(self, i):
        self.sh("node-start", self.path, i)
        self.track()

    def status(self, i):
        return self.sh("status", self.path, i, check=False).strip()

    def sql(self, i, stmt):
        return self.sh("sql", self.path, i, stmt).strip()

    def wait_primary(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st = [self.status(i) for i in range(len(self.nodes))]
            if all(s == "Primary\t4" for s in st):
                return True
            time.sleep(0.2)
        say("cluster not Primary/Synced after %d s: %s" % (timeout, st))
        return False


class Load:
    """Client threads on each leafd node, as fast as answers come."""

    def __init__(self, addrs, threads):
        self.addrs = addrs
        self.stop_ev = threading.Event()
        self.recs = []          # per thread: (t_end, latency, node, status, code, n)
        self.ids = []           # per thread: IDs
        self.bad = []
        self.threads = []
        for node, addr in enumerate(addrs):
            for _ in range(threads):
                i = len(self.recs)
                self.recs.append([])
                self.ids.append([])
                self.threads.append(threading.Thread(
                    target=self.run, args=(i, node, addr), daemon=True))

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(30)

    def run(self, i, node, addr):
        conn = None
        while not self.stop_ev.is_set():
            t0 = time.monotonic()
            code, n = None, 0
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(addr, LEAFD_PORT, timeout=15)
                conn.request("GET", "/segment/%s?count=5" % TAG)
                r = conn.getresponse()
                body = r.read()
                status = r.status
                if r.will_close:
                    conn.close()
                    conn = None
            except Exception as e:          # refused, reset, timeout
                status, body = 0, b""
                code = "client:%s" % type(e).__name__
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
            t1 = time.monotonic()
            if status == 200:
                try:
                    got = [int(x) for x in body.split()]
                except ValueError:
                    got = []
                if len(got) != 5:
                    self.bad.append((node, body[:200]))
                self.ids[i].extend(got)
                n = len(got)
            elif status != 0:
                try:
                    j = json.loads(body)
                    code = j.get("error") if isinstance(j, dict) else None
                except ValueError:
                    code = None
                if status != 503 or not isinstance(code, str):
                    self.bad.append((node, status, body[:200]))
                    code = code or "no-json"
                time.sleep(0.01)    # a 503 comes back at once: no spin
            self.recs[i].append((t1, t1 - t0, node, status, code, n))

    def records(self, t0, t1):
        return [r for rs in self.recs for r in rs if t0 <= r[0] < t1]


def pct(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


def longest_gap(recs, t0, t1, node=None):
    """Longest stretch of [t0, t1) without an answer with IDs."""
    ts = sorted(r[0] for r in recs if r[3] == 200 and (node is None or r[2] == node))
    edges = [t0] + [t for t in ts if t0 <= t < t1] + [t1]
    return max(b - a for a, b in zip(edges, edges[1:]))


class Scenario:
    def __init__(self, args):
        self.args = args
        self.phases = []        # (name, t0, t1)
        s = args.scale
        self.calm_s = 4 * s
        self.down_s = 5 * s
        self.settle_s = 3 * s

    def leafd(self, wd, node, db, name):
        conf = os.path.join(wd, "%s.conf" % name)
        with open(conf, "w") as f:
            for k, v in {
                "listen.address": node.addr,
                "listen.port": LEAFD_PORT,
                "threads": 2,
                "leaf.segment.enable": "true",
                "segment.mysql.url": "mysql://root@%s:3306/leaf" % db.addr,
                "segment.mysql.replication": "galera",
                "segment.marks_file": os.path.join(wd, "%s.marks" % name),
                "segment.wait_ms": 2000,
                "segment.db_timeout_ms": 2000,
                "segment.db_backoff_max_ms": 500,
                "segment.max_step": self.args.step,
            }.items():
                f.write("%s = %s\n" % (k, v))
        log = open(os.path.join(wd, "%s.log" % name), "ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEAFD_")}
        p = node.popen([self.args.leafd, "-c", conf], stdout=log,
                       stderr=subprocess.STDOUT, env=env, cwd=wd)
        log.close()
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if p.poll() is not None:
                raise RuntimeError("%s exited %s; see %s.log" % (name, p.returncode, name))
            try:
                c = http.client.HTTPConnection(node.addr, LEAFD_PORT, timeout=2)
                c.request("GET", "/segment/%s" % TAG)
                if c.getresponse().status == 200:
                    c.close()
                    return p
                c.close()
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("%s does not serve /segment/%s" % (name, TAG))

    def phase(self, name, fn):
        t0 = time.monotonic()
        say("phase %s" % name)
        fn()
        self.phases.append((name, t0, time.monotonic()))

    def p_calm(self):
        time.sleep(self.calm_s)

    def p_kill9(self):
        self.g.kill9(1)
        time.sleep(self.down_s)
        t = time.monotonic()
        self.g.restart(1)
        say("db1 back in %.1f s" % (time.monotonic() - t))
        time.sleep(self.settle_s)

    def p_partition(self):
        db = self.dbs
        self.net.partition([db[0]], [db[1], db[2]])
        time.sleep(self.down_s)
        say("db0 while cut off: %r" % self.g.status(0))
        self.net.heal()
        t = time.monotonic()
        self.must(self.g.wait_primary(120), "the cluster whole again after the partition")
        say("cluster Primary again %.1f s after the heal" % (time.monotonic() - t))
        time.sleep(self.settle_s)

    def p_quorum(self):
        db = self.dbs
        self.net.partition([db[0]], [db[1], db[2]])
        self.net.partition([db[1]], [db[2]])
        time.sleep(self.down_s)
        say("while split three ways: %s" % [self.g.status(i) for i in range(3)])
        self.net.heal()
        t = time.monotonic()
        self.must(self.g.wait_primary(120), "the cluster forms a Primary again after quorum loss")
        say("cluster Primary again %.1f s after the heal" % (time.monotonic() - t))
        time.sleep(self.settle_s)

    def must(self, cond, what):
        if not cond:
            self.failures.append(what)
            say("FAILED: %s" % what)

    def run(self):
        a = self.args
        self.failures = []
        wd = tempfile.mkdtemp(prefix="lfg-", dir="/tmp")
        os.chmod(wd, 0o755)
        say("work directory %s" % wd)
        procs = []
        g = None
        try:
            with Net(prefix="lfg", first_octet=232) as net:
                self.net = net
                self.dbs = [net.add("db%d" % i) for i in range(3)]
                ls = [net.add("l%d" % i) for i in range(2)]
                g = self.g = Galera(os.path.join(wd, "g"), net, self.dbs)
                t = time.monotonic()
                g.start()
                say("Galera up in %.1f s: %s" % (time.monotonic() - t,
                                                 ", ".join(d.addr for d in self.dbs)))
                g.sql(0, "INSERT INTO leaf.leaf_alloc (biz_tag, max_id, step, "
                      "description) VALUES ('%s', 1, %d, 'galera.py')" % (TAG, a.step))
                for i, l in enumerate(ls):
                    db = self.dbs[i if a.writers == "two" else 0]
                    procs.append(self.leafd(wd, l, db, "l%d" % i))
                say("leafd l0 -> db0, l1 -> %s (tag %s, step %d)" % (
                    "db1" if a.writers == "two" else "db0", TAG, a.step))
                self.load = Load([l.addr for l in ls], a.threads)
                self.load.start()
                t_start = time.monotonic()
                for r in range(a.rounds):
                    self.phase("calm", self.p_calm)
                    self.phase("kill9", self.p_kill9)
                    self.phase("partition", self.p_partition)
                    self.phase("quorum", self.p_quorum)
                self.phase("calm", self.p_calm)
                self.load.stop()
                t_end = time.monotonic()
                final = g.sql(1, "SELECT max_id FROM leaf.leaf_alloc WHERE "
                              "biz_tag = '%s'" % TAG)
                for i, p in enumerate(procs):
                    p.terminate()
                    try:
                        p.wait(15)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
                        self.must(False, "l%d exits on SIGTERM" % i)
                self.report(wd, t_start, t_end, int(final))
                g.stop()
        except Exception as e:
            self.failures.append("%s: %s" % (type(e).__name__, e))
            say("ERROR %s" % e)
            for p in procs:
                if p.poll() is None:
                    p.kill()
            if g is not None:
                g.stop()
        if self.failures:
            say("FAILED: %s (work directory kept: %s)" % ("; ".join(self.failures), wd))
            return 1
        if not a.keep:
            shutil.rmtree(wd, ignore_errors=True)
        say("PASS")
        return 0

    def report(self, wd, t_start, t_end, final_max):
        ids = [x for part in self.load.ids for x in part]
        cnt = collections.Counter(ids)
        dups = sum(c - 1 for c in cnt.values() if c > 1)
        reruns = deadlocks = 0
        for i in range(2):
            with open(os.path.join(wd, "l%d.log" % i), "rb") as f:
                text = f.read().decode("utf-8", "replace")
            reruns += text.count("running it again")
            deadlocks += text.count("(1213)")
        print("\n%-10s %6s %9s %8s %8s %8s %7s %7s  %s" % (
            "phase", "secs", "IDs", "gap s", "gap l0", "gap l1", "p50 ms",
            "p99 ms", "failed requests (status code: count)"))
        recs = [r for rs in self.load.recs for r in rs]
        for name, t0, t1 in self.phases:
            rs = [r for r in recs if t0 <= r[0] < t1]
            lat = [r[1] * 1000 for r in rs if r[3] == 200]
            fails = collections.Counter("%s %s" % (r[3], r[4]) for r in rs if r[3] != 200)
            print("%-10s %6.1f %9d %8.2f %8.2f %8.2f %7.1f %7.1f  %s" % (
                name, t1 - t0, sum(r[5] for r in rs),
                longest_gap(recs, t0, t1), longest_gap(recs, t0, t1, 0),
                longest_gap(recs, t0, t1, 1), pct(lat, 0.5), pct(lat, 0.99),
                ", ".join("%s: %d" % kv for kv in sorted(fails.items())) or "-"))
        print()
        say("%d IDs issued in %.0f s, %d distinct, %d handed out twice or more; "
            "the row's max_id at the end %d, the largest ID issued %d" % (
                len(ids), t_end - t_start, len(cnt), dups, final_max,
                max(ids) if ids else 0))
        say("leafd logged %d loads run again after ER_LOCK_DEADLOCK and %d "
            "lines with (1213)" % (reruns, deadlocks))
        self.must(len(ids) > 0, "IDs were issued")
        self.must(dups == 0, "no ID handed out twice (%d were)" % dups)
        self.must(not ids or max(ids) < final_max,
                  "every ID issued is below the row's final max_id")
        self.must(not self.load.bad, "every answer a 200 with 5 IDs or a JSON "
                  "503 (%d others, first %r)" % (
                      len(self.load.bad), self.load.bad[:1]))
        # One Galera node at a time is leafd's writer (the lease in
        # leafd_galera_writer): with two writers configured, the other
        # leafd serves its buffers, then 503, until the writer stops.
        last = self.phases[-1]
        serving = [node for node in range(2)
                   if any(r[2] == node and r[3] == 200 and r[0] >= last[1]
                          for r in recs)]
        say("serving in the last calm phase: %s" % ["l%d" % n for n in serving])
        self.must(len(serving) > 0, "a leafd node serves in the last calm phase")
        takeovers = sum(open(os.path.join(wd, "l%d.log" % i)).read()
                        .count("is back after") for i in range(2))
        say("leafd logged %d returns of its database (writer handovers among "
            "them)" % takeovers)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--short", action="store_true", help="one round, short phases")
    ap.add_argument("--leafd", default=os.path.join(ROOT, "leafd"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=4.0,
                    help="phase length multiplier (1: --short's)")
    ap.add_argument("--step", type=int, default=20)
    ap.add_argument("--threads", type=int, default=4, help="client threads per leafd")
    ap.add_argument("--writers", choices=("two", "one"), default="two",
                    help="one: both leafd nodes write through db0 (a single "
                    "writer: no certification conflicts)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if a.short:
        a.rounds, a.scale = 1, 1.0
    a.leafd = os.path.abspath(a.leafd)
    if os.geteuid() != 0:
        print("galera.py: needs root (network namespaces)", file=sys.stderr)
        return 1
    for tool in ("mariadbd", "nft", "rsync"):
        if not shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
            print("galera.py: %s missing" % tool, file=sys.stderr)
            return 1
    if not os.path.exists("/usr/lib/galera/libgalera_smm.so"):
        print("galera.py: galera-4 missing (/usr/lib/galera/libgalera_smm.so)",
              file=sys.stderr)
        return 1
    return Scenario(a).run()


if __name__ == "__main__":
    sys.exit(main())
