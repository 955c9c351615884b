"""netns.py: a private network for fault tests (root only, stdlib only).

    with Net() as net:
        db = net.add("db")               # a namespace with its own address
        n0 = net.add("n0")
        p = n0.popen(["./leafd", ...])   # runs inside n0's namespace
        net.partition([n0], [db])        # n0 and db cannot talk
        net.heal()
        net.add_vip(db, net.vip(1))      # a second address that can move

Layout (prefix "lfh", Net(prefix=...) for another): one bridge `lfhXXXX` in the root namespace (XXXX random) holding
10.231.S.1/24, S picked at random among the subnets no address of this
machine uses, so two runs side by side never collide; one namespace
`lfh-XXXX-<name>` per node with loopback up and `eth0`, a veth whose other
end `lfhXXXXvN` is a port of the bridge, at 10.231.S.(10+N)/24. The test
process in the root namespace reaches every node through the bridge's
address (its only route is the one the kernel adds for that address, gone
with the bridge); nothing here touches the root namespace's routes or nft
rules, and no address goes outside 10.231.0.0/16.

Nemeses:
- partition(a, b): nftables rules inside each node's namespace (table
  `inet lfh`, hook input) drop the other side's addresses, all of them,
  VIPs included; heal() deletes the tables. net.client stands for the
  test process (the bridge's address) on either side: its rules go only
  into the other side's namespaces, never into the root namespace, which
  for TCP cuts both ways anyway (see one-way below). One-way (oneway=True) drops
  only a's packets arriving at b. The kernel lets a one-way cut through,
  but TCP needs both directions for its handshake and acks, so for TCP a
  one-way cut looks like a full one after the retransmission timeouts,
  with the difference that b's segments still reach a (a sees b's SYNs,
  RSTs and data; b never sees a's answers). UDP/ICMP go one way.
- kill9(pid), pause(pid)/resume(pid) (SIGSTOP until every thread stopped).
- add_vip/move_vip: a secondary address on a node's eth0, then a
  gratuitous ARP from it (arping -U, iputils-arping) and `ip neigh flush`
  of that address in every other namespace and on the bridge, so clients
  follow it at once, as keepalived's VRRP failover does.
- clock steps: faketime_env(stamp_file) gives a process libfaketime through
  LD_PRELOAD (bbutil.faketime_preload: tests/lib/ftfix.c then
  libfaketimeMT) reading FAKETIME_TIMESTAMP_FILE, re-read every
  FAKETIME_CACHE_DURATION=1 s; step_clock(stamp_file, "-10s") writes a new
  offset ("+0" back to real time). The probe checks a step of
  CLOCK_REALTIME; libfaketime moves the monotonic clock too unless
  FAKETIME_DONT_FAKE_MONOTONIC=1 is in the environment.

What this kernel has (6.18, Debian 12 user space; measured by
`python3 tests/lib/netns.py --probe`, which each claim below came from;
--check, in make test's failover lane, fails if any of it changes):
- netem: no (`tc qdisc add ... netem` -> "Specified qdisc kind is unknown"):
  no delay, loss or reorder;
- nftables inside a namespace: yes, input drop cuts TCP both ways and
  one way (the probe checks a connect times out, and heals); one way,
  UDP from b reaches a while a's does not reach b;
- blackhole routes inside a namespace: yes (`ip route add blackhole A/32`:
  a connect fails at once with EINVAL, no packet leaves);
- link down (`ip link set eth0 down` inside the namespace): yes, cuts the
  node from everyone (connect: "Network is unreachable"), and up heals it;
- gratuitous ARP: arping -U works on the veth.
partition() uses nftables: it can cut any set from any other, one way too,
without taking addresses or routes away.

Cleanup: close() (the context manager's exit, atexit, and SIGTERM/SIGINT)
kills every process started through popen() (its whole process group) and
every pid given to track(), deletes the namespaces (which deletes their
veths) and the bridge. sweep() removes what a run killed by SIGKILL left:
namespaces and bridges whose owner process (recorded in /run/lfh/) is gone.
"""
import atexit
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bbutil import faketime_preload, stop_and_wait  # noqa: E402

OWNERS = "/run/%s"                     # % prefix: one file per live run
PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def sh(*argv, check=True, ns=None, timeout=30):
    """Run a command (inside namespace ns if given); its stdout."""
    argv = [str(a) for a in argv]
    if ns:
        argv = ["ip", "netns", "exec", ns] + argv
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=dict(os.environ, PATH=PATH))
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv), r.returncode,
                                                r.stderr.decode().strip()))
    return r.stdout.decode()


def _pid_alive(pid):
    """pid runs (a zombie, killed and not yet reaped, does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def sweep(prefix="lfh"):
    """Remove the namespaces and bridges of runs whose owner is dead."""
    owners = OWNERS % prefix
    os.makedirs(owners, exist_ok=True)
    for tag in os.listdir(owners):
        try:
            with open(os.path.join(owners, tag)) as f:
                pid = int(f.read().strip() or 0)
        except (OSError, ValueError):
            pid = 0
        if pid and _pid_alive(pid):
            continue
        for ns in sh("ip", "netns", "list", check=False).split("\n"):
            ns = ns.split(" ")[0]
            if ns.startswith("%s-%s-" % (prefix, tag)):
                for p in sh("ip", "netns", "pids", ns, check=False).split():
                    try:
                        os.kill(int(p), signal.SIGKILL)
                    except OSError:
                        pass
                sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", prefix + tag, check=False)
        os.unlink(os.path.join(owners, tag))


class Node:
    def __init__(self, net, name, index):
        self.net, self.name = net, name
        self.ns = "%s-%s-%s" % (net.name, net.tag, name)
        self.veth = "%s%sv%d" % (net.name, net.tag, index)
        self.addr = "%s.%d" % (net.prefix, 10 + index)
        self.addrs = [self.addr]        # VIPs join while held

    def run(self, cmd, check=True, timeout=60):
        """Run cmd (argv list) in this namespace; its stdout."""
        return sh(*cmd, check=check, ns=self.ns, timeout=timeout)

    def popen(self, cmd, **kw):
        """Start cmd in this namespace, in a session of its own; the Net
        kills its process group at close()."""
        kw.setdefault("start_new_session", True)
        env = dict(kw.pop("env", None) or os.environ)
        env["PATH"] = PATH
        p = subprocess.Popen(["ip", "netns", "exec", self.ns] + [str(c) for c in cmd],
                             env=env, **kw)
        self.net.groups.append(p.pid)
        return p

    def __repr__(self):
        return "<%s %s>" % (self.name, " ".join(self.addrs))


class Host:
    """The test process's side of a partition (the bridge's address)."""

    def __init__(self, addr):
        self.name, self.addr, self.addrs = "client", addr, [addr]


class Net:
    def __init__(self, prefix="lfh", first_octet=231):
        """prefix: 3 letters naming the bridge, veths and namespaces;
        first_octet: the 10.X.0.0/16 the subnets come from (see the brief's
        allocation per helper: 231 harness, 232 galera)."""
        assert re.match(r"^[a-z]{3}$", prefix), prefix
        self.name, self.owners = prefix, OWNERS % prefix
        sweep(prefix)
        used = set(int(m) for m in re.findall(r"inet 10\.%d\.(\d+)\." % first_octet,
                                              sh("ip", "-o", "addr")))
        self.tag = "%04x" % random.randrange(0x10000)
        while os.path.exists(os.path.join(self.owners, self.tag)) or \
                sh("ip", "link", "show", prefix + self.tag, check=False):
            self.tag = "%04x" % random.randrange(0x10000)
        self.prefix = "10.%d.%d" % (first_octet,
                                    random.choice([s for s in range(1, 255) if s not in used]))
        self.bridge = prefix + self.tag
        self.nodes, self.groups, self.pids, self.vips, self.cuts = [], [], [], {}, []
        self.closed = False
        with open(os.path.join(self.owners, self.tag), "w") as f:
            f.write(str(os.getpid()))
        atexit.register(self.close)
        for s in (signal.SIGTERM, signal.SIGINT):
            prev = signal.getsignal(s)
            signal.signal(s, lambda sig, fr, prev=prev: self._on_signal(sig, fr, prev))
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", self.prefix + ".1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        self.host = self.prefix + ".1"          # the test process's address
        self.client = Host(self.host)

    def _on_signal(self, sig, frame, prev):
        self.close()
        if callable(prev):
            prev(sig, frame)
        sys.exit(128 + sig)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def add(self, name):
        assert re.match(r"^[a-z0-9]{1,8}$", name), name
        n = Node(self, name, len(self.nodes))
        sh("ip", "netns", "add", n.ns)
        self.nodes.append(n)
        sh("ip", "link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.ns)
        sh("ip", "link", "set", n.veth, "master", self.bridge, "up")
        n.run(["ip", "addr", "add", n.addr + "/24", "dev", "eth0"])
        n.run(["ip", "link", "set", "eth0", "up"])
        n.run(["ip", "link", "set", "lo", "up"])
        return n

    def track(self, pid):
        """Kill pid at close() too (a daemon a script started, e.g. mariadbd)."""
        self.pids.append(pid)

    # -- nemeses ------------------------------------------------------------

    def _render(self):
        """Every namespace's rules from self.cuts, with each node's
        addresses as they are now (a VIP that moved is cut where it went)."""
        for n in self.nodes:
            n.run(["nft", "delete", "table", "inet", "lfh"], check=False)
            addrs = sorted(set(a for at, senders in self.cuts if at is n
                               for s in senders for a in s.addrs))
            if addrs:
                n.run(["nft", "add table inet lfh; add chain inet lfh in "
                       "{ type filter hook input priority -10; policy accept; }; "
                       "add rule inet lfh in ip saddr { %s } drop" % ", ".join(addrs)])

    def partition(self, a_nodes, b_nodes, oneway=False):
        """Cut a_nodes from b_nodes (both ways, or only a -> b). Never a
        rule in the root namespace: net.client's side gets none."""
        for b in b_nodes:
            self.cuts.append((b, list(a_nodes)))
        if not oneway:
            for a in a_nodes:
                self.cuts.append((a, list(b_nodes)))
        self._render()

    def heal(self):
        self.cuts = []
        self._render()

    @staticmethod
    def kill9(pid):
        os.kill(pid, signal.SIGKILL)

    @staticmethod
    def pause(pid):
        stop_and_wait(pid)

    @staticmethod
    def resume(pid):
        os.kill(pid, signal.SIGCONT)

    def vip(self, i):
        return "%s.%d" % (self.prefix, 200 + i)

    def _announce(self, node, vip):
        if shutil.which("arping", path=PATH):
            node.run(["arping", "-U", "-c", "1", "-I", "eth0", vip], check=False)
        for n in self.nodes:
            if n is not node:
                n.run(["ip", "neigh", "flush", "to", vip], check=False)
        sh("ip", "neigh", "flush", "to", vip, "dev", self.bridge, check=False)

    def add_vip(self, node, vip):
        node.run(["ip", "addr", "add", vip + "/24", "dev", "eth0"])
        node.addrs.append(vip)
        self.vips[vip] = node
        self._announce(node, vip)

    def move_vip(self, vip, from_node, to_node):
        from_node.run(["ip", "addr", "del", vip + "/24", "dev", "eth0"], check=False)
        if vip in from_node.addrs:
            from_node.addrs.remove(vip)
        self.add_vip(to_node, vip)
        self._render()

    # -- clocks ---------------------------------------------------------------

    @staticmethod
    def faketime_env(workdir, stamp_file):
        """Environment for a process whose clock step_clock() steps."""
        step_clock(stamp_file, "+0")
        return {"LD_PRELOAD": faketime_preload(workdir),
                "FAKETIME_TIMESTAMP_FILE": stamp_file,
                "FAKETIME_CACHE_DURATION": "1", "FAKETIME_NO_CACHE": "0"}

    # -- cleanup ------------------------------------------------------------

    def close(self):
        if self.closed:
            return
        self.closed = True
        for g in self.groups:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.killpg(g, sig)
                except OSError:
                    pass
        for pid in self.pids:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        for n in self.nodes:
            # Anything else still in the namespace (a daemon that left its
            # group) dies with it.
            for p in sh("ip", "netns", "pids", n.ns, check=False).split():
                try:
                    os.kill(int(p), signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.1)
        for n in self.nodes:
            sh("ip", "netns", "del", n.ns, check=False)
        sh("ip", "link", "del", self.bridge, check=False)
        try:
            os.unlink(os.path.join(self.owners, self.tag))
        except OSError:
            pass


def step_clock(stamp_file, offset):
    """Step the faked clock: offset like "-10s", "+2m", "+0"."""
    tmp = stamp_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(offset + "\n")
    os.rename(tmp, stamp_file)


# -- the probe: what partition mechanisms this kernel has -------------------------

LISTENER = ("import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,"
            "socket.SO_REUSEADDR,1)\ns.bind(('0.0.0.0',%d));s.listen(64)\n"
            "while True:\n c,_=s.accept();c.close()\n")


def can_connect(node, addr, port, timeout=1.0):
    """From node's namespace: "ok" or the error of a TCP connect."""
    code = ("import socket\ntry:\n socket.create_connection(('%s',%d),%s).close();"
            "print('ok')\nexcept Exception as e:\n print(type(e).__name__, e)"
            % (addr, port, timeout))
    return node.run(["python3", "-c", code], check=False).strip()


def probe():
    """Try each mechanism between two namespaces; print what works."""
    out = {}
    with Net() as net:
        a, b = net.add("a"), net.add("b")
        for n in (a, b):
            n.popen(["python3", "-c", LISTENER % 7000])
        time.sleep(0.5)
        out["baseline a->b"] = can_connect(a, b.addr, 7000)
        out["baseline host->b"] = can_connect_host(b.addr, 7000)
        net.partition([a], [b])
        out["nft both ways a->b"] = can_connect(a, b.addr, 7000)
        out["nft both ways b->a"] = can_connect(b, a.addr, 7000)
        net.heal()
        out["healed a->b"] = can_connect(a, b.addr, 7000)
        net.partition([net.client], [b])
        out["client cut from b: host->b"] = can_connect_host(b.addr, 7000)
        out["client cut from b: a->b"] = can_connect(a, b.addr, 7000)
        net.heal()
        net.partition([a], [b], oneway=True)
        out["nft one-way a->b"] = can_connect(a, b.addr, 7000)
        out["nft one-way b->a (TCP needs a's answers)"] = can_connect(b, a.addr, 7000)
        out["nft one-way, UDP b->a"] = udp_reaches(b, a)
        out["nft one-way, UDP a->b"] = udp_reaches(a, b)
        net.heal()
        a.run(["ip", "route", "add", "blackhole", b.addr + "/32"])
        out["blackhole route in a, a->b"] = can_connect(a, b.addr, 7000)
        a.run(["ip", "route", "del", "blackhole", b.addr + "/32"])
        a.run(["ip", "link", "set", "eth0", "down"])
        out["link down in a, a->b"] = can_connect(a, b.addr, 7000)
        a.run(["ip", "link", "set", "eth0", "up"])
        time.sleep(0.5)
        out["link up again a->b"] = can_connect(a, b.addr, 7000, 3)
        r = subprocess.run(["ip", "netns", "exec", a.ns, "tc", "qdisc", "add", "dev", "eth0",
                            "root", "netem", "delay", "10ms"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=dict(os.environ, PATH=PATH))
        out["netem"] = "ok" if r.returncode == 0 else r.stdout.decode().strip()
        out["faketime step -100s in a"] = faketime_probe(net, a)
        net.add_vip(b, net.vip(1))
        out["vip on b"] = can_connect(a, net.vip(1), 7000)
        net.move_vip(net.vip(1), b, a)
        out["vip moved to a, from b"] = can_connect(b, net.vip(1), 7000)
    left = [x for x in sh("ip", "netns", "list").split("\n") if x.startswith("lfh-%s-" % net.tag)]
    out["cleanup: namespaces left"] = str(len(left))
    return out


def faketime_probe(net, node):
    """"ok" if a process of node's, started at +0, sees its clock 100 s
    back after step_clock(.., "-100s")."""
    import tempfile
    wd = tempfile.mkdtemp(prefix="lfh-ft-")
    try:
        stamp = os.path.join(wd, "stamp")
        env = dict(os.environ, **net.faketime_env(wd, stamp))
        p = node.popen(["python3", "-c", "import time\nt0=time.time()\ntime.sleep(2.5)\n"
                        "print(time.time()-t0)"], env=env, stdout=subprocess.PIPE)
        time.sleep(0.5)
        step_clock(stamp, "-100s")
        d = float(p.communicate(timeout=20)[0].decode().strip() or "nan")
        return "ok" if -100 < d < -95 else "stepped %.1f s, not -100 + 2.5" % d
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def udp_reaches(src, dst):
    """"ok" if a datagram from src reaches dst within 2 s."""
    recv = dst.popen(["python3", "-c", "import socket\ns=socket.socket(socket.AF_INET,"
                      "socket.SOCK_DGRAM);s.bind(('0.0.0.0',7001));s.settimeout(2)\n"
                      "try:\n s.recv(10);print('ok')\nexcept Exception as e:\n"
                      " print(type(e).__name__)"], stdout=subprocess.PIPE)
    time.sleep(0.3)
    src.run(["python3", "-c", "import socket\nsocket.socket(socket.AF_INET,socket.SOCK_DGRAM)"
             ".sendto(b'x',('%s',7001))" % dst.addr])
    return recv.communicate(timeout=10)[0].decode().strip()


def can_connect_host(addr, port, timeout=1.0):
    import socket
    try:
        socket.create_connection((addr, port), timeout).close()
        return "ok"
    except Exception as e:
        return "%s %s" % (type(e).__name__, e)


# What the harness relies on: a key of probe()'s answer -> connects ("ok")
# or not. (netem is only reported: nothing here needs it.)
RELIES_ON = {
    "baseline a->b": True, "baseline host->b": True,
    "nft both ways a->b": False, "nft both ways b->a": False, "healed a->b": True,
    "client cut from b: host->b": False, "client cut from b: a->b": True,
    "nft one-way a->b": False, "nft one-way, UDP b->a": True, "nft one-way, UDP a->b": False,
    "blackhole route in a, a->b": False, "link down in a, a->b": False,
    "link up again a->b": True, "faketime step -100s in a": True, "vip on b": True, "vip moved to a, from b": True,
}


if __name__ == "__main__":
    if sys.argv[1:] in (["--probe"], ["--check"]):
        found = probe()
        bad = []
        for k, v in found.items():
            print("%-45s %s" % (k, v))
            if k in RELIES_ON and (v == "ok") != RELIES_ON[k]:
                bad.append(k)
        if found["cleanup: namespaces left"] != "0":
            bad.append("cleanup")
        if sys.argv[1] == "--check":
            print("FAIL netns: %s" % ", ".join(bad) if bad else "netns: as expected")
            sys.exit(1 if bad else 0)
    elif sys.argv[1:] == ["--sweep"]:
        sweep()
    else:
        print("usage: netns.py --probe | --check | --sweep")
        sys.exit(2)
