"""mariadb_ns.py: throwaway MariaDB servers inside netns.py namespaces, and
primary -> replica replication between them (GTID, async or semi-sync).

    db1 = NsMariaDB(net.add("db1"), wd, server_id=1).start()
    db2 = NsMariaDB(net.add("db2"), wd, server_id=2).start()
    db2.replicate_from(db1)          # CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos
    db2.lag()                        # STOP SLAVE SQL_THREAD: events wait in the relay log
    db1.kill9(); db2.promote(apply_relay=False)   # what an async replica loses

Each server is tests/lib/mariadb.sh inside its namespace, with
MARIADB_BIND=0.0.0.0 on port 3306 (the namespace is private, so a VIP on
its eth0 reaches it too), log_bin, log_slave_updates, binlog_format=ROW and
its own server_id. semi_sync=True turns on MariaDB 10.11's built-in
semi-sync, both sides on both servers (so either can be the primary):
rpl_semi_sync_master_enabled, wait point AFTER_SYNC, the given
rpl_semi_sync_master_timeout, rpl_semi_sync_slave_enabled. SQL goes through
the server's unix socket (a path socket works from any network namespace).
"""
import os
import signal
import subprocess
import threading
import time

from bbutil import ROOT, TestFailure, wait_for

PORT = 3306


class NsMariaDB:
    def __init__(self, node, workdir, server_id, semi_sync=False, semi_timeout_ms=10000):
        self.node, self.server_id = node, server_id
        self.dir = os.path.join(workdir, "my-%s" % node.name)
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, "port"), "w") as f:
            f.write("%d\n" % PORT)
        args = ["--server-id=%d" % server_id, "--log-bin=%s/binlog" % self.dir,
                "--log-slave-updates=1", "--binlog-format=ROW", "--skip-slave-start",
                "--relay-log=%s/relay" % self.dir]
        if semi_sync:
            args += ["--rpl-semi-sync-master-enabled=1",
                     "--rpl-semi-sync-master-wait-point=AFTER_SYNC",
                     "--rpl-semi-sync-master-timeout=%d" % semi_timeout_ms,
                     "--rpl-semi-sync-slave-enabled=1"]
        with open(os.path.join(self.dir, "args"), "w") as f:
            f.write(" ".join(args) + "\n")
        self.pid = None

    def url(self, host=None):
        return "mysql://root@%s:%d/leaf" % (host or self.node.addr, PORT)

    def start(self):
        env = dict(os.environ, MARIADB_BIND="0.0.0.0")
        p = self.node.popen(["sh", os.path.join(ROOT, "tests/lib/mariadb.sh"), "start",
                             self.dir], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
        out, err = p.communicate(timeout=180)
        if p.returncode != 0:
            raise TestFailure("mariadb.sh start in %s: %s" % (self.node.ns, err.decode()))
        with open(os.path.join(self.dir, "pid")) as f:
            self.pid = int(f.read().strip())
        self.node.net.track(self.pid)
        return self

    def sql(self, stmt, db="leaf", timeout=30):
        r = subprocess.run(["mariadb", "--no-defaults", "--socket=%s/sock" % self.dir,
                            "-uroot", "-N", "-B", db, "-e", stmt],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        if r.returncode != 0:
            raise TestFailure("%s: SQL failed: %s: %s" % (self.node.name, stmt,
                                                          r.stderr.decode().strip()))
        return r.stdout.decode().strip()

    def var(self, name):
        return self.sql("SELECT @@%s" % name)

    def status(self, name):
        out = self.sql("SHOW GLOBAL STATUS LIKE '%s'" % name)
        return out.split("\t")[1] if out else None

    def slave_status(self):
        out = subprocess.run(["mariadb", "--no-defaults", "--socket=%s/sock" % self.dir,
                              "-uroot", "-e", "SHOW SLAVE STATUS\\G"],
                             stdout=subprocess.PIPE, timeout=30).stdout.decode()
        st = {}
        for line in out.splitlines():
            k, _, v = line.strip().partition(": ")
            st[k] = v
        return st

    def kill9(self):
        os.kill(self.pid, signal.SIGKILL)
        wait_for(lambda: not os.path.exists("/proc/%d" % self.pid) or
                 open("/proc/%d/stat" % self.pid).read().split(") ")[1][0] == "Z",
                 10, what="mariadbd %d gone" % self.pid)

    # -- replication ----------------------------------------------------------

    def replicate_from(self, primary):
        """Start replicating primary from its current GTID position (both
        servers were installed alike, so what came before is already here)."""
        pos = primary.var("gtid_binlog_pos")
        self.sql("SET GLOBAL read_only=1; STOP SLAVE; RESET SLAVE ALL; "
                 "SET GLOBAL gtid_slave_pos='%s'; "
                 "CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='root', "
                 "MASTER_CONNECT_RETRY=1, MASTER_USE_GTID=slave_pos; START SLAVE"
                 % (pos, primary.node.addr, PORT))
        self.wait_caught_up(primary)

    def repoint(self, primary):
        """Replicate from another server (after a failover), from where
        this one's applied GTID position is."""
        self.sql("STOP SLAVE; CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, "
                 "MASTER_USER='root', MASTER_USE_GTID=slave_pos; START SLAVE"
                 % (primary.node.addr, PORT))

    def wait_caught_up(self, primary, timeout=60):
        pos = primary.var("gtid_binlog_pos")
        got = self.sql("SELECT MASTER_GTID_WAIT('%s', %d)" % (pos, timeout), timeout=timeout + 10)
        if got != "0":
            raise TestFailure("%s did not reach %s within %d s: %s"
                              % (self.node.name, pos, timeout, self.slave_status()))

    def lag(self):
        """The replica falls behind: its IO thread goes on receiving the
        primary's events (and acking them, under semi-sync), its SQL
        thread applies none."""
        self.sql("STOP SLAVE SQL_THREAD")

    def stop_io(self):
        self.sql("STOP SLAVE IO_THREAD")

    def start_io(self):
        self.sql("START SLAVE IO_THREAD")

    def promote(self, apply_relay):
        """Make this replica the primary. apply_relay=False: what it has not
        applied is lost (an async failover that does not wait); True: what
        it received is applied first (what a semi-sync failover does)."""
        if apply_relay:
            # The SQL thread first, with the IO thread still up (retrying
            # the dead primary): with MASTER_USE_GTID, once both threads
            # are stopped the next start discards the relay log and fetches
            # from gtid_slave_pos again, and nobody is there to fetch from.
            io_pos = self.slave_status().get("Gtid_IO_Pos", "")
            self.sql("START SLAVE SQL_THREAD")
            got = self.sql("SELECT MASTER_GTID_WAIT('%s', 60)" % io_pos, timeout=70)
            if got != "0":
                raise TestFailure("relay log not applied within 60 s")
        self.sql("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only=0")


def wait_semi_sync(primary, on=True, timeout=30):
    """Until Rpl_semi_sync_master_status is ON (or OFF). The primary turns
    it back on when a replica acks a commit, so this commits a row now and
    then (table harness_ping)."""
    want = "ON" if on else "OFF"
    primary.sql("CREATE TABLE IF NOT EXISTS harness_ping (k INT PRIMARY KEY, n BIGINT)")

    def done():
        primary.sql("REPLACE INTO harness_ping VALUES (1, %d)" % time.monotonic_ns())
        return primary.status("Rpl_semi_sync_master_status") == want
    wait_for(done, timeout, step=0.2,
             what="Rpl_semi_sync_master_status=%s on %s" % (want, primary.node.name))


def dump(db, path, tables=("leaf_alloc",)):
    """A data-only dump of leaf's tables to path, as REPLACE statements: the
    restore of scenario 3.1 puts the rows back as they were, and the table
    never goes missing meanwhile."""
    with open(path, "wb") as f:
        r = subprocess.run(["mariadb-dump", "--no-defaults", "--socket=%s/sock" % db.dir,
                            "-uroot", "--no-create-info", "--replace", "--skip-add-locks",
                            "leaf"] + list(tables), stdout=f,
                           stderr=subprocess.PIPE, timeout=60)
    if r.returncode != 0:
        raise TestFailure("mariadb-dump: %s" % r.stderr.decode())


def restore(db, path):
    with open(path, "rb") as f:
        r = subprocess.run(["mariadb", "--no-defaults", "--socket=%s/sock" % db.dir,
                            "-uroot", "leaf"], stdin=f, stderr=subprocess.PIPE, timeout=60)
    if r.returncode != 0:
        raise TestFailure("restore: %s" % r.stderr.decode())


def start_all(dbs):
    """Start the servers dbs (NsMariaDB) at once; raise the first failure."""
    errs = []

    def go(d):
        try:
            d.start()
        except Exception as e:
            errs.append(e)
    ts = [threading.Thread(target=go, args=(d,)) for d in dbs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise errs[0]
    return dbs
