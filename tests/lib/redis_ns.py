"""redis_ns.py: throwaway redis-servers and Redis Sentinels inside netns.py
namespaces (one process per namespace), for the Sentinel scenarios
(tests/blackbox/sentinel.py).

    m = NsRedis(net.add("r1"), wd).start()
    r2 = NsRedis(net.add("r2"), wd, master=m, priority=10).start()
    ss = [NsSentinel(net.add("s%d" % i), wd, m, "m1").start() for i in (1, 2, 3)]
    wait_master(ss, m); m.kill9(); wait_master(ss, r2)

Each server listens on 0.0.0.0:6379 in its namespace, without persistence
(--save '', no AOF: a restart comes back empty, as a server whose disk was
lost); min_replicas=N adds min-replicas-to-write N and min-replicas-max-lag
1 (s). A replica starts with --replicaof; priority is its replica-priority
(lower: promoted first).
Each Sentinel listens on 0.0.0.0:26379 with its own config file (Sentinel
rewrites it), monitors the master as NAME with quorum 2,
down-after-milliseconds 1000 and failover-timeout 6000. Commands go through
redis-cli from the test's namespace (the bridge reaches every node).
"""
import os
import signal
import subprocess
import time

from bbutil import TestFailure, wait_for

PORT = 6379
SPORT = 26379


def cli(addr, port, *args, timeout=5):
    """redis-cli's answer (stripped), or raise TestFailure."""
    r = subprocess.run(["redis-cli", "-h", addr, "-p", str(port), "--raw"] +
                       [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    if r.returncode != 0:
        raise TestFailure("redis-cli %s:%d %s: %s" % (addr, port, args,
                                                     r.stderr.decode().strip()))
    return r.stdout.decode().strip()


class NsRedis:
    def __init__(self, node, workdir, master=None, priority=100, min_replicas=0):
        self.node, self.master, self.proc = node, master, None
        self.dir = os.path.join(workdir, "redis-%s" % node.name)
        os.makedirs(self.dir, exist_ok=True)
        self.args = ["redis-server", "--port", PORT, "--bind", "0.0.0.0",
                     "--protected-mode", "no", "--dir", self.dir, "--save", "",
                     "--appendonly", "no", "--replica-priority", priority]
        if min_replicas:
            self.args += ["--min-replicas-to-write", min_replicas,
                          "--min-replicas-max-lag", 1]
        if master is not None:
            self.args += ["--replicaof", master.node.addr, PORT]
        self.log = os.path.join(self.dir, "redis.log")

    @property
    def addr(self):
        return self.node.addr

    def start(self):
        with open(self.log, "ab") as lf:
            self.proc = self.node.popen(self.args, stdout=lf, stderr=subprocess.STDOUT)
        wait_for(lambda: self.cmd("PING") == "PONG", 15, step=0.05,
                 what="redis-server in %s answering PING" % self.node.name)
        return self

    def cmd(self, *args):
        return cli(self.node.addr, PORT, *args)

    def info(self, section="replication"):
        out = {}
        for line in self.cmd("INFO", section).splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                out[k] = v.strip()
        return out

    def role(self):
        return self.info().get("role")

    def kill9(self):
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None


class NsSentinel:
    def __init__(self, node, workdir, master, name, quorum=2):
        self.node, self.name, self.proc = node, name, None
        self.dir = os.path.join(workdir, "sentinel-%s" % node.name)
        os.makedirs(self.dir, exist_ok=True)
        self.conf = os.path.join(self.dir, "sentinel.conf")
        with open(self.conf, "w") as f:
            f.write("port %d\nbind 0.0.0.0\nprotected-mode no\ndaemonize no\n"
                    "dir %s\nsentinel resolve-hostnames no\n"
                    "sentinel monitor %s %s %d %d\n"
                    "sentinel down-after-milliseconds %s 1000\n"
                    "sentinel failover-timeout %s 6000\n"
                    "sentinel parallel-syncs %s 1\n"
                    % (SPORT, self.dir, name, master.node.addr, PORT, quorum,
                       name, name, name))
        self.log = os.path.join(self.dir, "sentinel.log")

    @property
    def hostport(self):
        return "%s:%d" % (self.node.addr, SPORT)

    def start(self):
        with open(self.log, "ab") as lf:
            self.proc = self.node.popen(["redis-server", self.conf, "--sentinel"],
                                        stdout=lf, stderr=subprocess.STDOUT)
        wait_for(lambda: self.cmd("PING") == "PONG", 15, step=0.05,
                 what="sentinel in %s answering PING" % self.node.name)
        return self

    def cmd(self, *args):
        return cli(self.node.addr, SPORT, *args)

    def master(self):
        """(addr, port) this Sentinel names, or None."""
        out = self.cmd("SENTINEL", "get-master-addr-by-name", self.name).split()
        return (out[0], int(out[1])) if len(out) == 2 else None


def wait_master(sentinels, server, timeout=60, what=None):
    """Until every Sentinel names server as the master and server says
    role:master."""
    def done():
        return all(s.master() == (server.addr, PORT) for s in sentinels) and \
            server.role() == "master"
    wait_for(done, timeout, step=0.2,
             what=what or "every sentinel naming %s the master" % server.node.name)


def wait_replicas(master, n, timeout=60):
    """Until master has n connected replicas in sync (state online)."""
    def done():
        i = master.info()
        return int(i.get("connected_slaves", 0)) >= n and \
            sum("state=online" in v for k, v in i.items() if k.startswith("slave")) >= n
    wait_for(done, timeout, step=0.2,
             what="%d replicas online at %s" % (n, master.node.name))


def wait_sentinels_see(sentinels, timeout=60):
    """Until every Sentinel knows the other ones (a failover needs them)."""
    n = len(sentinels) - 1

    def done():
        for s in sentinels:
            out = s.cmd("SENTINEL", "master", s.name).splitlines()
            d = dict(zip(out[::2], out[1::2]))
            if int(d.get("num-other-sentinels", 0)) < n:
                return False
        return True
    wait_for(done, timeout, step=0.2, what="sentinels knowing each other")
    time.sleep(0.1)
