"""zookeeper_ns.py: a ZooKeeper ensemble in network namespaces
(tests/lib/netns.py), for the worker-ID scenarios (tests/blackbox/zk_ensemble.py).

    ens = Ensemble(net, wd, 3).start()     # zk1..zk3, one namespace each
    ens.connect_string()                   # "10.x.y.11:P,10.x.y.12:P,..."
    ens.leader(); ens.wait_quorum(30)
    m.kill9(); m.start(); m.stop()         # one member (m = ens.members[i])
    ens.copy_data(dir); ens.stop(); ens.restore_data(dir); ens.start()

Each member: Debian's `zookeeper` (QuorumPeerMain, as tests/lib/zookeeper.sh
starts the single server) in its own namespace, listening on its namespace's
address only; zoo.cfg with a server.N line per member on those addresses, a
myid file, its own data directory under the test's work directory,
admin.enableServer=false (no Jetty port) and the four-letter words srvr,
stat, ruok, mntr allowed (4lw.commands.whitelist): the test process asks
`srvr` over the bridge for each member's Mode (leader, follower, or no
answer without quorum: "This ZooKeeper instance is not currently serving
requests"). tickTime 500 ms, syncLimit 4 ticks (a follower cut from the
leader drops out after 2 s), minSessionTimeout 2 s, election connections
time out after 1 s (zookeeper.cnxTimeout): elections and the scenarios'
phases fit in seconds. forceSync=no as zookeeper.sh (no fsync: survives a
kill -9 of the server, not of the machine). Ports come from port_fn
(bbutil.free_port: LEAFD_TEST_PORTS).
"""
import os
import shutil
import signal
import socket
import subprocess
import time

from bbutil import TestFailure, free_port

CP = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def four(addr, port, word, timeout=2.0):
    """A four-letter word's answer ("" when the member does not answer)."""
    try:
        s = socket.create_connection((addr, port), timeout)
    except OSError:
        return ""
    try:
        s.settimeout(timeout)
        s.sendall(word.encode())
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        return out.decode(errors="replace")
    except OSError:
        return ""
    finally:
        s.close()


class Member:
    def __init__(self, ens, node, myid):
        self.ens, self.node, self.myid = ens, node, myid
        self.dir = os.path.join(ens.wd, "zk%d" % myid)
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "zk.log")
        self.port = ens.port_fn()
        self.quorum_port, self.election_port = ens.port_fn(), ens.port_fn()
        self.proc = None

    @property
    def addr(self):
        return self.node.addr

    def write_config(self, servers):
        os.makedirs(self.data, exist_ok=True)
        with open(os.path.join(self.data, "myid"), "w") as f:
            f.write("%d\n" % self.myid)
        with open(os.path.join(self.dir, "zoo.cfg"), "w") as f:
            f.write("tickTime=500\ninitLimit=20\nsyncLimit=4\n"
                    "minSessionTimeout=2000\nmaxSessionTimeout=60000\n"
                    "dataDir=%s\nclientPort=%d\nclientPortAddress=%s\n"
                    "admin.enableServer=false\n"
                    "4lw.commands.whitelist=srvr,stat,ruok,mntr\n"
                    "maxClientCnxns=0\nforceSync=no\n"
                    "autopurge.purgeInterval=0\n%s\n"
                    % (self.data, self.port, self.addr, servers))

    def start(self):
        assert self.proc is None or self.proc.poll() is not None, "already running"
        with open(self.log, "ab") as lf:
            self.proc = self.node.popen(
                ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Dzookeeper.jmx.log4j.disable=true", "-Dzookeeper.cnxTimeout=1000",
                 "-cp", CP, MAIN, os.path.join(self.dir, "zoo.cfg")],
                stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        """SIGKILL the JVM (its process group: `ip netns exec` and java)."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait(timeout=20)
            self.proc = None

    def stop(self):
        """SIGTERM, then SIGKILL after 20 s."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except OSError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=20)
        self.proc = None

    def mode(self):
        """"leader", "follower", or None (down, or not serving: no quorum)."""
        for line in four(self.addr, self.port, "srvr").split("\n"):
            if line.startswith("Mode: "):
                return line[6:].strip()
        return None

    def zxid(self):
        for line in four(self.addr, self.port, "srvr").split("\n"):
            if line.startswith("Zxid: "):
                return int(line[6:].strip(), 16)
        return None

    def tail(self, n=15):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def __repr__(self):
        return "zk%d" % self.myid


class Ensemble:
    def __init__(self, net, wd, n=3, port_fn=free_port):
        for exe in CP.split(":"):
            if not os.path.exists(exe):
                raise TestFailure("missing %s (apt-get install zookeeper libslf4j-java)" % exe)
        self.net, self.wd, self.port_fn = net, wd, port_fn
        self.members = [Member(self, net.add("zk%d" % (i + 1)), i + 1) for i in range(n)]
        servers = "\n".join("server.%d=%s:%d:%d" % (m.myid, m.addr, m.quorum_port,
                                                    m.election_port) for m in self.members)
        for m in self.members:
            m.write_config(servers)

    def nodes(self):
        return [m.node for m in self.members]

    def connect_string(self):
        return ",".join("%s:%d" % (m.addr, m.port) for m in self.members)

    def start(self, timeout=60):
        for m in self.members:
            if not m.running():
                m.start()
        self.wait_quorum(timeout, self.members)
        return self

    def modes(self):
        return {m.myid: m.mode() for m in self.members}

    def leader(self):
        for m in self.members:
            if m.mode() == "leader":
                return m
        return None

    def wait_quorum(self, timeout, want=None):
        """Until a leader and at least a majority serve (want: these
        members serving); the modes."""
        want = want or []
        end = time.time() + timeout
        while True:
            modes = self.modes()
            serving = [m for m in self.members if modes[m.myid] in ("leader", "follower")]
            if "leader" in modes.values() and len(serving) * 2 > len(self.members) and \
                    all(m in serving for m in want):
                return modes
            for m in self.members:
                if m.proc is not None and m.proc.poll() is not None:
                    raise TestFailure("%r exited: %s" % (m, m.tail()))
            if time.time() >= end:
                raise TestFailure("no quorum after %d s: %s; %s" % (
                    timeout, modes, " | ".join("%r: %s" % (m, m.tail(3)) for m in self.members)))
            time.sleep(0.2)

    def stop(self):
        for m in self.members:
            m.stop()

    def kill9_all(self):
        for m in self.members:
            m.kill9()

    def copy_data(self, dest):
        """Copy each member's data directory (snapshots, transaction logs,
        myid, epochs) as it is now, the members running: what a backup of
        a live ensemble holds."""
        for m in self.members:
            d = os.path.join(dest, "zk%d" % m.myid)
            shutil.copytree(m.data, d)

    def restore_data(self, src):
        """Put copy_data's copies back (members stopped)."""
        for m in self.members:
            assert not m.running(), "restore while %r runs" % m
            shutil.rmtree(m.data)
            shutil.copytree(os.path.join(src, "zk%d" % m.myid), m.data)
