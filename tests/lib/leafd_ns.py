"""leafd_ns.py: a leafd in a network namespace of its own (tests/lib/netns.py),
every front end on 0.0.0.0, for the failover scenarios (failover.py,
failover_multidb.py).

    n = NsLeafd(net.add("n0"), wd, {"segment.mysql.url": url}, "./leafd").start()
    n.health(); n.client(); n.stop()

conf: the scenario's keys on top of segment mode on MySQL, snowflake off and
short database timeouts. Ports come from port_fn (bbutil.free_port unless
given): only distinct ports within one namespace matter. start() waits until
the HTTP port answers (fails with the log's tail if the process exits or
does not listen within timeout s); stop() sends SIGTERM to the process group
and waits, SIGKILL after 20 s.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from bbutil import TestFailure, free_port, in_ci


def preflight(script, grpc=True):
    """What a fault scenario script checks first: root (network namespaces)
    and, with grpc, the gRPC client (tests/blackbox/bb_grpc.py). Returns
    (code, grpc): code None to go on, else the exit code after saying why:
    1 (FAIL) under CI, 0 (SKIP) without root outside it; outside CI a
    missing gRPC client is left out (grpc False)."""
    if os.geteuid() != 0:
        msg = "%s needs root (network namespaces)" % script
        print(("FAIL " if in_ci() else "SKIP ") + msg)
        return (1 if in_ci() else 0), False
    if not grpc:
        return None, False
    try:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))), "blackbox"))
        from bb_grpc import mods
        mods()
        return None, True
    except Exception as e:               # under CI, bb_grpc's skip() raises this
        if in_ci():
            print("FAIL gRPC client: %s" % e)
            return 1, False
        print("gRPC client left out: %s" % e)
        return None, False


def clean_env():
    """The environment without LEAFD_* (leafd refuses keys it does not know)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("LEAFD_")}


class NsLeafd:
    def __init__(self, node, wd, conf, binary, grpc=True, port_fn=free_port):
        self.node, self.binary, self.proc = node, binary, None
        self.ports = {"http": port_fn(), "resp": port_fn(), "mc": port_fn()}
        c = {"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
             "segment.store": "mysql",
             "listen.address": "0.0.0.0", "listen.port": self.ports["http"],
             "resp.listen.address": "0.0.0.0", "resp.listen.port": self.ports["resp"],
             "memcache.listen.address": "0.0.0.0", "memcache.listen.port": self.ports["mc"],
             "segment.db_timeout_ms": 1000, "segment.db_backoff_max_ms": 300}
        if grpc:
            self.ports["grpc"] = port_fn()
            c.update({"grpc.listen.address": "0.0.0.0",
                      "grpc.listen.port": self.ports["grpc"]})
        c.update(conf)
        self.conf = os.path.join(wd, "%s.conf" % node.name)
        with open(self.conf, "w") as f:
            f.write("".join("%s = %s\n" % kv for kv in c.items()))
        self.log = os.path.join(wd, "%s.log" % node.name)

    def start(self, timeout=30):
        with open(self.log, "ab") as lf:
            self.proc = self.node.popen([self.binary, "-c", self.conf], stdout=lf,
                                        stderr=subprocess.STDOUT, env=clean_env())
        end = time.time() + timeout
        while True:
            if self.proc.poll() is not None:
                raise TestFailure("%s exited: %s" % (self.node.name, self.tail()))
            try:
                socket.create_connection((self.node.addr, self.ports["http"]), 0.5).close()
                return self
            except OSError:
                if time.time() >= end:
                    raise TestFailure("%s not listening after %d s: %s"
                                      % (self.node.name, timeout, self.tail()))
                time.sleep(0.05)

    def stop(self):
        """SIGTERM to the process group popen made, wait for it."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def tail(self, n=15):
        with open(self.log, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def health(self):
        try:
            with urllib.request.urlopen("http://%s:%d/health" % (self.node.addr,
                                                                 self.ports["http"]),
                                        timeout=5) as r:
                body = r.read()
        except urllib.error.HTTPError as e:
            body = e.read()
        return json.loads(body)

    def client(self):
        return (self.node.name, self.node.addr, self.ports)
