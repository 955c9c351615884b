"""Black-box tests of snowflake worker IDs from Redis with Sentinel
(snowflake.redis.sentinels, snowflake.redis.master_name) against the real
binary: the configuration refusals (--check-config and a start: a bad
sentinels list names the bad entry, one key without the other, a bad master
name); a Sentinel (redis-server --sentinel on a free port) that knows no
master of the configured name refuses the start; a master that
only one of three listed Sentinels names (the others down) gets no claim
(503, /snowflake/state says why: not a majority), one of one does; a
replica named by snowflake.redis.url gets no claim (role:slave). The failovers under load are
tests/blackbox/sentinel.py's (network namespaces). Without redis-server these
tests skip (under CI=1 they fail)."""
import os
import signal
import subprocess

from bbutil import LEAFD, Workdir, check, eq, free_port, wait_for

TESTS = [
    "test_sentinel_config_refused",
    "test_sentinel_master_checks",
]

BASE = ["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
        "--snowflake.worker_source=redis"]


def check_config(flags):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEAFD_")}
    r = subprocess.run([LEAFD, "--check-config"] + BASE + flags, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30, env=env)
    return r.returncode, r.stderr.decode()


def test_sentinel_config_refused(ctx):
    m = "--snowflake.redis.master_name=m1"
    cases = [
        (["--snowflake.redis.sentinels=127.0.0.1:26379,s2", m], 'entry 2 "s2"'),
        (["--snowflake.redis.sentinels=127.0.0.1:26379,", m], 'entry 2 ""'),
        (["--snowflake.redis.sentinels=a:70000", m], 'entry 1 "a:70000"'),
        (["--snowflake.redis.sentinels=::1:26379", m], 'entry 1 "::1:26379"'),
        (["--snowflake.redis.sentinels=h x:1", m], 'entry 1 "h x:1"'),
        (["--snowflake.redis.sentinels=" + ",".join("h%d:1" % i for i in range(17)), m],
         "more than 16 sentinels"),
        (["--snowflake.redis.sentinels=" + "h" * 1030 + ":1", m], "snowflake.redis.sentinels"),
        (["--snowflake.redis.sentinels=s1:26379,s2:26379,s1:26379", m],
         'entry 3 "s1:26379" repeats entry 1'),
        (["--snowflake.redis.sentinels=s1:26379,S1:26379", m],
         'entry 2 "S1:26379" repeats entry 1'),
        (["--snowflake.redis.sentinels=127.0.0.1:26379"], "go together"),
        ([m], "go together"),
        (["--snowflake.redis.sentinels=127.0.0.1:26379",
          "--snowflake.redis.master_name=my master"], "snowflake.redis.master_name"),
    ]
    for flags, want in cases:
        rc, err = check_config(flags)
        eq(rc, 2, "--check-config exit status for %s" % flags)
        check(want in err, "%s: the message names the bad part (%r): %r" % (flags, want, err))
    rc, err = check_config(["--snowflake.redis.sentinels=127.0.0.1:26379, [::1]:26380,s3:1",
                            m])
    eq(rc, 0, "a good list: %s" % err)
    with Workdir("sentinel-conf") as wd:
        d = wd.leafd(flags=BASE + ["--snowflake.redis.sentinels=127.0.0.1:0", m])
        eq(d.start(expect_fail=True), 2, "a start with a bad list")
        check("entry 1" in d.log(), "the start's message names the entry: %s" % d.log()[-300:])


class Sentinel:
    def __init__(self, wd, master_port):
        self.port = free_port()
        self.conf = os.path.join(wd.path, "sentinel.conf")
        with open(self.conf, "w") as f:
            f.write("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\n"
                    "sentinel monitor m1 127.0.0.1 %d 1\n"
                    "sentinel down-after-milliseconds m1 5000\n" % (self.port, wd.path,
                                                                     master_port))
        self.logf = open(os.path.join(wd.path, "sentinel.log"), "ab")
        self.proc = subprocess.Popen(["redis-server", self.conf, "--sentinel"],
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        wd.cleanup.append(self.stop)

        def up():
            r = subprocess.run(["redis-cli", "-p", str(self.port), "SENTINEL",
                                "get-master-addr-by-name", "m1"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, timeout=5)
            return str(master_port) in r.stdout.decode()
        wait_for(up, 15, what="the sentinel naming its master")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        self.logf.close()


def test_sentinel_master_checks(ctx):
    with Workdir("sentinel-master") as wd:
        r = wd.redis(epoch0=[(0, "leafd:snowflake:")])
        s = Sentinel(wd, r.port)
        flags = BASE + ["--snowflake.redis.sentinels=127.0.0.1:%d" % s.port,
                        "--snowflake.ip=10.9.0.1", "--snowflake.cache_file=n.json",
                        "--snowflake.takeover_age_ms=4000", "--snowflake.fence_step_ms=500",
                        "--snowflake.heartbeat_ms=200"]
        # a name no Sentinel knows: the start is refused, naming it
        d = wd.leafd(flags=flags + ["--snowflake.redis.master_name=nope"], name="unknown")
        eq(d.start(expect_fail=True), 1, "a start with an unknown master name")
        check('knows no master named "nope"' in d.log(), "the log says why: %s"
              % d.log()[-400:])
        # one Sentinel of three answering: no majority behind the master,
        # no claim (503, and why)
        d = wd.leafd(flags=flags + ["--snowflake.redis.master_name=m1",
                                    "--snowflake.redis.sentinels=127.0.0.1:%d,127.0.0.1:1,"
                                    "127.0.0.1:2" % s.port], name="n0").start()

        def why():
            return d.get("/snowflake/state").json().get("last_error") or ""
        wait_for(lambda: "confirmed by 1 of 3 sentinels" in why(), 15,
                 what="/snowflake/state: 1 of 3 sentinels, not a majority")
        eq(d.get("/snowflake").status, 503, "no ID without a majority of sentinels")
        d.stop()
        # the one Sentinel of one: IDs
        d = wd.leafd(flags=flags + ["--snowflake.redis.master_name=m1"], name="n1").start()
        wait_for(lambda: d.get("/snowflake").status == 200, 30, what="IDs")
        eq(d.get("/snowflake/state").json().get("worker_id"), 0, "worker ID")
        r2 = wd.redis(name="replica")
        r2.cli("REPLICAOF", "127.0.0.1", r.port)
        # without Sentinel too, a replica is no store: no claim, and why
        d2 = wd.leafd(flags=BASE + ["--snowflake.redis.url=redis://127.0.0.1:%d" % r2.port,
                                    "--snowflake.ip=10.9.0.2", "--snowflake.cache_file=n2.json",
                                    "--snowflake.takeover_age_ms=4000",
                                    "--snowflake.fence_step_ms=500",
                                    "--snowflake.heartbeat_ms=200"], name="n2").start()
        wait_for(lambda: "is not a master (role:slave)" in
                 (d2.get("/snowflake/state").json().get("last_error") or ""), 15,
                 what="/snowflake/state: the replica is not a master")
        eq(d2.get("/snowflake").status, 503, "no ID from a replica")
