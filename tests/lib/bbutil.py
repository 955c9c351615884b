"""bbutil.py: helpers for leafd's black-box tests (stdlib only).

Starts the real ./leafd binary on free loopback ports (never 8080), throwaway
MariaDB and ZooKeeper servers through tests/lib/mariadb.sh and tests/lib/zookeeper.sh,
a throwaway redis-server (Redis),
and talks HTTP to leafd with keep-alive connections.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# LEAFD_TEST_BIN: another binary (leafd reads no LEAFD_* variable but
# LEAFD_CONFIG and LEAFD_TEST_*; it refuses any other).
LEAFD = os.environ.get("LEAFD_TEST_BIN", os.path.join(ROOT, "leafd"))


class TestFailure(AssertionError):
    pass


class Skipped(Exception):
    """Raised by skip(): the test cannot run on this machine. Never under CI."""


def in_ci():
    """CI=1 or CI=true, as CI services set it: then a test that cannot run
    (a missing MariaDB or ZooKeeper) is a failure, never a skip. The C
    suites read CI the same way (tests/unit/check_workerid.c)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true")


def skip(reason):
    """Give up on this test because the machine lacks something: a visible
    skip (blackbox.py counts and lists it), or under CI a failure."""
    if in_ci():
        raise TestFailure("CI=%s, so a failure, not a skip: %s"
                          % (os.environ.get("CI"), reason))
    raise Skipped(reason)


def _sbin_path():
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def missing_mariadb():
    """What tests/lib/mariadb.sh needs and this machine lacks ([] if nothing)."""
    return [b for b in ("mariadbd", "mariadb-install-db", "mariadb-admin", "mariadb")
            if shutil.which(b, path=_sbin_path()) is None]


def missing_postgresql():
    """What tests/lib/postgresql.sh needs and this machine lacks ([] if
    nothing): postgresql-15's server and client."""
    return [b for b in (PG_BIN + "/postgres", PG_BIN + "/initdb", PG_BIN + "/psql")
            if not os.path.exists(b)]


PG_BIN = "/usr/lib/postgresql/15/bin"


def missing_zookeeper():
    """What tests/lib/zookeeper.sh needs and this machine lacks ([] if nothing):
    java and the jars on its classpath."""
    miss = [j for j in ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
            if not os.path.exists(j)]
    if shutil.which("java") is None:
        miss.append("java")
    return miss


FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def faketime_preload(workdir):
    """LD_PRELOAD for a leafd whose clock a test steps: libfaketime, after
    tests/lib/ftfix.c (a shim around libfaketime 0.9.10's broken monotonic
    condition-variable waits; see that file)."""
    so = os.path.join(workdir, "ftfix.so")
    if not os.path.exists(so):
        r = subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O2", "-o", so,
                            os.path.join(ROOT, "tests", "lib", "ftfix.c"), "-ldl"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise TestFailure("cannot build tests/lib/ftfix.c: %s" % r.stdout.decode())
    return "%s %s" % (so, FAKETIME)


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)



def stop_and_wait(pid, limit_s=60):
    """SIGSTOP pid and wait until every thread of it has stopped. kill()
    returns before that: the group stop starts only when one of its threads
    runs and takes the signal, and on a busy machine the others can go on
    answering meanwhile."""
    os.kill(pid, signal.SIGSTOP)
    end = time.monotonic() + limit_s
    while True:
        running = 0
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            return                      # it is gone: nothing runs
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                    st = f.read()
            except OSError:
                continue
            if st[st.rindex(")") + 2] not in "Tt":
                running += 1
        if running == 0:
            return
        check(time.monotonic() < end, "pid %d: %d threads still running %d s "
              "after SIGSTOP" % (pid, running, limit_s))
        time.sleep(0.01)

def eq(a, b, what=""):
    if a != b:
        raise TestFailure("%s: expected %r, got %r" % (what, b, a))


def _port_range():
    """LEAFD_TEST_PORTS=LO-HI: the ports this process may hand out (see
    free_port), else None."""
    spec = os.environ.get("LEAFD_TEST_PORTS", "")
    if not spec:
        return None
    lo, hi = (int(x) for x in spec.split("-"))
    check(1024 <= lo <= hi <= 65535 and not lo <= 8080 <= hi,
          "LEAFD_TEST_PORTS=%s: want LO-HI within 1024-65535, without 8080" % spec)
    return lo, hi


_next_port = [None]
_port_lock = threading.Lock()


def free_port():
    """A loopback port nothing listens on, never 8080. Without
    LEAFD_TEST_PORTS, the kernel's pick from the ephemeral range. With
    LEAFD_TEST_PORTS=LO-HI (blackbox.py -j gives each worker its own slice,
    below the ephemeral range), the next port of that slice that binds, in
    turn: parallel workers never pick the same port, an outgoing
    connection's ephemeral port never takes one, and a port just given up
    (TIME_WAIT) is not handed out again soon."""
    rng = _port_range()
    if rng is None:
        while True:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
            s.close()
            if p != 8080:
                return p
    lo, hi = rng
    with _port_lock:
        for _ in range(hi - lo + 1):
            p = _next_port[0] if _next_port[0] is not None and lo <= _next_port[0] <= hi else lo
            _next_port[0] = p + 1 if p < hi else lo
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", p))
                return p
            except OSError:
                continue
            finally:
                s.close()
    raise TestFailure("LEAFD_TEST_PORTS=%d-%d: no free port left" % rng)


def wait_for(pred, timeout=30.0, step=0.02, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        try:
            v = pred()
            if v:
                return v
        except Exception:
            pass
        time.sleep(step)
    raise TestFailure("timed out after %.1fs waiting for %s" % (timeout, what))


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)

    def ids(self):
        return [int(x) for x in self.text.split()]

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def __repr__(self):
        return "<%d %r>" % (self.status, self.body[:200])


class Client:
    """A keep-alive HTTP/1.1 client."""

    def __init__(self, port, host="127.0.0.1", timeout=10):
        self.host, self.port, self.timeout = host, port, timeout
        self.conn = None

    def request(self, method, path, headers=None):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port,
                                                       timeout=self.timeout)
            try:
                self.conn.request(method, path, headers=headers or {})
                r = self.conn.getresponse()
                body = r.read()
                if r.will_close:
                    self.close()
                return Response(r.status, r.getheaders(), body)
            except (ConnectionError, http.client.RemoteDisconnected,
                    http.client.BadStatusLine, BrokenPipeError):
                self.close()
                if attempt == 1:
                    raise
        raise TestFailure("unreachable")

    def get(self, path, headers=None):
        return self.request("GET", path, headers)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def raw_request(port, data, timeout=5, read_until_close=True):
    """Send raw bytes, return everything the server sends until it closes
    (or the timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            out += chunk
            if not read_until_close:
                break
        return out
    finally:
        s.close()


class Leafd:
    """A leafd process. conf: dict of key -> value written to a config file
    (None: no file, the embedded default). flags: extra --key=value."""

    def __init__(self, workdir, conf=None, flags=None, env=None, port=None,
                 name="leafd", preload=None):
        self.workdir = workdir
        self.port = port or free_port()
        self.conf = conf
        self.flags = list(flags or [])
        self.env = env or {}
        self.name = name
        self.preload = preload
        self.proc = None
        self.log_path = os.path.join(workdir, "%s.log" % name)
        self.client = None

    def start(self, wait=True, expect_fail=False):
        args = [LEAFD]
        if self.conf is not None:
            path = os.path.join(self.workdir, "%s.conf" % self.name)
            with open(path, "w") as f:
                for k, v in self.conf.items():
                    f.write("%s = %s\n" % (k, v))
            args += ["-c", path]
        args += ["--listen.port=%d" % self.port] + self.flags
        env = dict(os.environ)
        env.pop("LEAFD_CONFIG", None)
        env.update(self.env)
        if self.preload:
            env["LD_PRELOAD"] = self.preload
        self.logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, cwd=self.workdir, stdout=self.logf,
                                     stderr=subprocess.STDOUT, env=env)
        self.client = Client(self.port)
        if expect_fail:
            try:
                rc = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                raise TestFailure("leafd kept running, expected it to refuse to start")
            return rc
        if wait:
            def up():
                if self.proc.poll() is not None:
                    raise TestFailure("leafd exited with %s:\n%s" % (
                        self.proc.returncode, self.log()))
                try:
                    socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                    return True
                except OSError:
                    return False
            end = time.time() + 15
            while time.time() < end:
                if up():
                    return self
                time.sleep(0.02)
            raise TestFailure("leafd did not listen on %d:\n%s" % (self.port, self.log()))
        return self

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-4000:]
        except OSError:
            return ""

    def get(self, path, headers=None):
        return self.client.get(path, headers)

    def send(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc is None:
            return None
        if self.client:
            self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise TestFailure("leafd did not exit within %ds of %s" % (timeout, sig))
        self.logf.close()
        rc = self.proc.returncode
        self.proc = None
        return rc

    def kill9(self):
        return self.stop(signal.SIGKILL)


class MariaDB:
    """A throwaway MariaDB (tests/lib/mariadb.sh)."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "mariadb")
        os.makedirs(self.dir, exist_ok=True)
        self.port = None
        self.url = None

    def _sh(self, cmd):
        r = subprocess.run(["sh", os.path.join(ROOT, "tests/lib/mariadb.sh"), cmd, self.dir],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        if r.returncode != 0:
            raise TestFailure("mariadb.sh %s failed: %s" % (cmd, r.stderr.decode()))
        return r.stdout.decode()

    def start(self):
        miss = missing_mariadb()
        if miss:
            skip("MariaDB cannot run here: missing %s (sh .ci/deps.sh test)" % ", ".join(miss))
        out = self._sh("start")
        for line in out.splitlines():
            if line.startswith("MYSQL_PORT="):
                self.port = int(line.split("=", 1)[1])
            if line.startswith("MYSQL_URL="):
                self.url = line.split("=", 1)[1]
        check(self.port, "mariadb.sh printed no port")
        return self

    def stop(self):
        self._sh("stop")

    def restart(self):
        self._sh("restart")

    def worker_epoch0(self):
        """Create leaf_worker (the shipped sql/leaf_worker.sql) with its epoch
        row at 0: a new table's first worker-ID claims otherwise wait
        fence_step + max_borrow + max_clock_offset (workerid_mysql.c), which
        only the tests about that want; 0 is the operator's setting for a
        new table nothing was ever issued from (docs/operations.md)."""
        with open(os.path.join(ROOT, "sql/leaf_worker.sql")) as f:
            self.sql(f.read())
        self.sql("INSERT INTO leaf_worker (worker_id, identity, instance, fence_ms,"
                 " heartbeat_ms, released) VALUES (-1, '~epoch', '~epoch', 0, 0, 1)")
        return self

    def sql(self, stmt):
        r = subprocess.run(["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1",
                            "-P%d" % self.port, "-N", "-B", "leaf", "-e", stmt],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        if r.returncode != 0:
            raise TestFailure("SQL failed: %s: %s" % (stmt, r.stderr.decode()))
        return r.stdout.decode()


class PostgreSQL:
    """A throwaway PostgreSQL 15 cluster (tests/lib/postgresql.sh): role
    leaf (password leafpw) owns database leaf with sql/postgresql.sql.
    conf: lines for postgresql.conf, hba: lines put first in pg_hba.conf
    (both written before start, read at every start)."""

    def __init__(self, workdir, name="postgresql", conf=None, hba=None):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = None
        self.url = None
        if conf:
            with open(os.path.join(self.dir, "conf"), "w") as f:
                f.write("\n".join(conf) + "\n")
        if hba:
            with open(os.path.join(self.dir, "hba"), "w") as f:
                f.write("\n".join(hba) + "\n")

    def _sh(self, cmd, env=None):
        e = dict(os.environ)
        e.update(env or {})
        r = subprocess.run(["sh", os.path.join(ROOT, "tests/lib/postgresql.sh"), cmd, self.dir],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                           env=e)
        if r.returncode != 0:
            raise TestFailure("postgresql.sh %s failed: %s" % (cmd, r.stderr.decode()))
        return r.stdout.decode()

    def start(self, env=None):
        miss = missing_postgresql()
        if miss:
            skip("PostgreSQL cannot run here: missing %s (sh .ci/deps.sh test)" % ", ".join(miss))
        for line in self._sh("start", env).splitlines():
            if line.startswith("PG_PORT="):
                self.port = int(line.split("=", 1)[1])
            if line.startswith("PG_URL="):
                self.url = line.split("=", 1)[1]
        check(self.port, "postgresql.sh printed no port")
        return self

    def stop(self):
        self._sh("stop")

    def restart(self):
        self._sh("restart")

    def pids(self):
        """The postmaster and its children (for SIGSTOP/SIGCONT)."""
        with open(os.path.join(self.dir, "pid")) as f:
            pm = int(f.read().split()[0])
        out = subprocess.run(["pgrep", "-P", str(pm)], stdout=subprocess.PIPE).stdout
        return [pm] + [int(x) for x in out.split()]

    def psql(self, stmt, db="leaf", user="postgres"):
        cmd = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
        r = subprocess.run(cmd + [PG_BIN + "/psql", "-X", "-q", "-A", "-t",
                                  "-v", "ON_ERROR_STOP=1", "-h", os.path.join(self.dir, "run"),
                                  "-p", str(self.port), "-U", user, "-d", db, "-c", stmt],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        if r.returncode != 0:
            raise TestFailure("SQL failed: %s: %s" % (stmt, r.stderr.decode()))
        return r.stdout.decode()

    def sql(self, stmt):
        return self.psql(stmt, user="leaf")

    def worker_epoch0(self):
        """Create leaf_worker (sql/leaf_worker_postgresql.sql) with its epoch
        row at 0, as MariaDB.worker_epoch0 (workerid_pg.c)."""
        with open(os.path.join(ROOT, "sql/leaf_worker_postgresql.sql")) as f:
            self.sql(f.read())
        self.sql("INSERT INTO leaf_worker (worker_id, identity, instance, fence_ms,"
                 " heartbeat_ms, released) VALUES (-1, '~epoch', '~epoch', 0, 0, 1)")
        return self


class ZooKeeper:
    """A throwaway ZooKeeper (tests/lib/zookeeper.sh) and a small CLI for it."""

    CP = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar:" \
         "/usr/share/java/slf4j-api.jar:/usr/share/java/jline.jar:/usr/share/java/netty-all.jar"

    def __init__(self, workdir, name="zk"):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = None
        self.address = None

    def _sh(self, cmd):
        r = subprocess.run(["bash", os.path.join(ROOT, "tests/lib/zookeeper.sh"), cmd, self.dir],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        if r.returncode != 0:
            raise TestFailure("zookeeper.sh %s failed: %s" % (cmd, r.stderr.decode()))
        return r.stdout.decode()

    def start(self):
        miss = missing_zookeeper()
        if miss:
            skip("ZooKeeper cannot run here: missing %s (sh .ci/deps.sh test)" % ", ".join(miss))
        out = self._sh("start")
        for line in out.splitlines():
            if line.startswith("ZK_PORT="):
                self.port = int(line.split("=", 1)[1])
        check(self.port, "zookeeper.sh printed no port")
        self.address = "127.0.0.1:%d" % self.port
        return self

    def stop(self):
        self._sh("stop")

    def restart(self):
        self._sh("restart")

    def cli(self, *args):
        """Run one zkCli command (slow: starts a JVM)."""
        r = subprocess.run(["java", "-cp", self.CP, "org.apache.zookeeper.ZooKeeperMain",
                            "-server", self.address] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        return r.stdout.decode() + r.stderr.decode()


class Redis:
    """A throwaway redis-server on 127.0.0.1 on a free port, its data in
    <workdir>/<name>. durable=False: no persistence (a restart comes back
    empty). durable=True: an append-only file fsynced before every reply
    (appendfsync always), so a kill -9 loses no write a client saw answered;
    wipe() deletes it while stopped (a Redis that lost its data).
    epoch0: (db, prefix) pairs whose snowflake epoch key is set to 0 at every
    start, unless there: a new store's first worker-ID claims otherwise wait
    fence_step + max_borrow + max_clock_offset (workerid_redis.c), which only
    the tests about that want; 0 is the operator's setting for a new store
    nothing was ever issued from (docs/operations.md)."""

    def __init__(self, workdir, durable=False, name="redis", epoch0=()):
        if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
            skip("redis-server/redis-cli are not installed (sh .ci/deps.sh test)")
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.durable = durable
        self.port = free_port()
        self.proc = None
        self.logf = None
        self.epoch0 = list(epoch0)

    def start(self):
        persist = ["--appendonly", "yes", "--appendfsync", "always"] if self.durable \
            else ["--appendonly", "no"]
        self.logf = open(os.path.join(self.dir, "redis.log"), "ab")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", self.dir, "--save", ""] + persist,
            stdout=self.logf, stderr=subprocess.STDOUT)

        def up():
            if self.proc.poll() is not None:
                raise TestFailure("redis-server exited with %s" % self.proc.returncode)
            try:
                return self.cli("PING") == "PONG"
            except TestFailure:
                return False
        wait_for(up, 10, step=0.05, what="redis-server answering PING")
        for db, prefix in self.epoch0:
            self.cli("-n", db, "SET", prefix + "epoch", 0, "NX")
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc is not None and self.proc.poll() is None:
            if sig == signal.SIGTERM:
                os.kill(self.proc.pid, signal.SIGCONT)      # in case it is paused
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self.proc = None
        if self.logf is not None:
            self.logf.close()
            self.logf = None

    def kill9(self):
        self.stop(signal.SIGKILL)

    def pause(self):
        stop_and_wait(self.proc.pid)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def wipe(self):
        """Delete the data directory's contents (only while stopped)."""
        check(self.proc is None, "wipe() with redis-server running")
        for f in os.listdir(self.dir):
            path = os.path.join(self.dir, f)
            if f == "redis.log":
                continue
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)

    def cli(self, *args):
        """One command through redis-cli; its reply as text."""
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.port)] +
                           [str(a) for a in args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
        out = r.stdout.decode().strip()
        if r.returncode != 0 or out.startswith("ERR") or out.startswith("Could not connect"):
            raise TestFailure("redis-cli %s: %s %s" % (args[0], out, r.stderr.decode()))
        return out


class Workdir:
    def __init__(self, name):
        self.path = tempfile.mkdtemp(prefix="leafd-%s-" % name)
        self.cleanup = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for fn in reversed(self.cleanup):
            try:
                fn()
            except Exception as e:  # keep cleaning up
                print("  cleanup: %s" % e)
        if exc[0] is None or issubclass(exc[0], Skipped):
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            print("  (kept %s for inspection)" % self.path)
        return False

    def leafd(self, **kw):
        d = Leafd(self.path, **kw)
        self.cleanup.append(lambda: d.proc and d.stop(signal.SIGKILL))
        return d

    def mariadb(self):
        m = MariaDB(self.path)
        self.cleanup.append(m.stop)
        return m.start()

    def postgresql(self, **kw):
        p = PostgreSQL(self.path, **kw)
        self.cleanup.append(p.stop)
        return p.start()

    def zookeeper(self, name="zk"):
        z = ZooKeeper(self.path, name)
        self.cleanup.append(z.stop)
        return z.start()

    def redis(self, durable=False, name="redis", epoch0=()):
        r = Redis(self.path, durable=durable, name=name, epoch0=epoch0)
        self.cleanup.append(r.stop)
        return r.start()


def parallel(n, fn):
    """Run fn(i) in n threads; return the list of results, re-raising the
    first exception."""
    results = [None] * n
    errors = []

    def run(i):
        try:
            results[i] = fn(i)
        except BaseException as e:
            errors.append(e)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return results
