"""postgresql_ns.py: throwaway PostgreSQL 15 servers inside netns.py
namespaces, and primary -> streaming standby replication between them
(async, or sync by synchronous_standby_names), for failover_pg.py.

    db1 = NsPostgres(net.add("db1"), wd).start()            # initdb, database leaf
    db2 = NsPostgres(net.add("db2"), wd).standby_of(db1)    # pg_basebackup -R, started
    db1.set_sync("db2")        # synchronous_commit = on, synchronous_standby_names = db2
    db1.kill9(); db2.promote()

Each server is tests/lib/postgresql.sh inside its namespace (so postgres runs
as the user postgres, through setpriv), with PG_BIND=0.0.0.0 on port 5432
(the namespace is private, so a VIP on its eth0 reaches it too). DIR/hba
trusts replication connections of the user postgres from the test network
(the standbys stream without a password). A standby's primary_conninfo
names it (application_name = its node's name), which is what
synchronous_standby_names matches. SQL goes through the server's unix
socket, as postgres (a path socket works from any network namespace).
"""
import os
import signal
import subprocess

from bbutil import ROOT, TestFailure, wait_for

PORT = 5432
PG_BIN = "/usr/lib/postgresql/15/bin"


class NsPostgres:
    def __init__(self, node, workdir):
        self.node = node
        self.dir = os.path.join(workdir, "pg-%s" % node.name)
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, "port"), "w") as f:
            f.write("%d\n" % PORT)
        with open(os.path.join(self.dir, "hba"), "w") as f:
            f.write("host replication postgres %s.0/24 trust\n" % node.net.prefix)
        self.pid = None

    def url(self, host=None):
        return "postgresql://leaf:leafpw@%s:%d/leaf" % (host or self.node.addr, PORT)

    def start(self):
        env = dict(os.environ, PG_BIND="0.0.0.0")
        p = self.node.popen(["sh", os.path.join(ROOT, "tests/lib/postgresql.sh"), "start",
                             self.dir], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
        out, err = p.communicate(timeout=180)
        if p.returncode != 0:
            raise TestFailure("postgresql.sh start in %s: %s" % (self.node.ns, err.decode()))
        with open(os.path.join(self.dir, "pid")) as f:
            self.pid = int(f.read().strip())
        self.node.net.track(self.pid)
        return self

    def sql(self, stmt, db="leaf", timeout=30):
        r = subprocess.run(["runuser", "-u", "postgres", "--", PG_BIN + "/psql", "-X", "-q",
                            "-v", "ON_ERROR_STOP=1", "-tA", "-h", os.path.join(self.dir, "run"),
                            "-p", str(PORT), "-U", "postgres", "-d", db, "-c", stmt],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        if r.returncode != 0:
            raise TestFailure("%s: SQL failed: %s: %s" % (self.node.name, stmt,
                                                          r.stderr.decode().strip()))
        return r.stdout.decode().strip()

    def kill9(self):
        os.kill(self.pid, signal.SIGKILL)
        wait_for(lambda: not os.path.exists("/proc/%d" % self.pid) or
                 open("/proc/%d/stat" % self.pid).read().split(") ")[1][0] == "Z",
                 10, what="postgres %d gone" % self.pid)

    # -- replication ----------------------------------------------------------

    def standby_of(self, primary):
        """A streaming standby of primary: pg_basebackup -R over the
        network (from this node's namespace), primary_conninfo with
        application_name = this node's name, then started."""
        data = os.path.join(self.dir, "data")
        os.makedirs(data)
        subprocess.run(["chown", "postgres", self.dir, data], check=True)
        os.chmod(data, 0o700)
        p = self.node.popen(["runuser", "-u", "postgres", "--", PG_BIN + "/pg_basebackup",
                             "-h", primary.node.addr, "-p", str(PORT), "-U", "postgres",
                             "-D", data, "-R", "-X", "stream", "-c", "fast"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, err = p.communicate(timeout=120)
        if p.returncode != 0:
            raise TestFailure("pg_basebackup from %s: %s" % (primary.node.name, err.decode()))
        with open(os.path.join(data, "postgresql.auto.conf"), "a") as f:
            f.write("primary_conninfo = 'host=%s port=%d user=postgres application_name=%s'\n"
                    % (primary.node.addr, PORT, self.node.name))
        subprocess.run(["cp", os.path.join(data, "postgresql.conf"),
                        os.path.join(data, "postgresql.conf.orig")], check=True)
        self.start()
        wait_for(lambda: primary.sql("SELECT count(*) FROM pg_stat_replication WHERE "
                                     "application_name = '%s' AND state = 'streaming'"
                                     % self.node.name, db="postgres") == "1",
                 60, step=0.2, what="%s streaming from %s" % (self.node.name, primary.node.name))
        return self

    def set_sync(self, names):
        """synchronous_commit = on, synchronous_standby_names = names, reloaded."""
        self.sql("ALTER SYSTEM SET synchronous_commit = on", db="postgres")
        self.sql("ALTER SYSTEM SET synchronous_standby_names = '%s'" % names, db="postgres")
        self.sql("SELECT pg_reload_conf()", db="postgres")
        wait_for(lambda: self.sql("SHOW synchronous_standby_names", db="postgres") == names,
                 10, step=0.1, what="synchronous_standby_names reloaded")
        if names:
            wait_for(lambda: self.sql("SELECT count(*) FROM pg_stat_replication WHERE "
                                      "sync_state = 'sync'", db="postgres") == "1",
                     30, step=0.2, what="a synchronous standby on %s" % self.node.name)

    def promote(self):
        got = self.sql("SELECT pg_promote(true, 60)", db="postgres", timeout=70)
        if got != "t":
            raise TestFailure("%s: pg_promote: %s" % (self.node.name, got))
