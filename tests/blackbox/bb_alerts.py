"""The Prometheus alerting rules (conf/prometheus/leafd-rules.yml) and the
Grafana dashboard (conf/grafana/leafd-dashboard.json) against leafd:
  - promtool check rules, and promtool test rules with
    tests/prometheus/leafd-rules.test.yml, which has a test per alert (each
    alert of the rules file is named there);
  - every alert's runbook names a heading of docs/operations.md;
  - every metric name in every rule and dashboard query is one that a
    running leafd exports: leafd on two MariaDBs (multi-db: the per-member
    series), worker IDs from Redis (lease, heartbeat, clock offset) and TLS
    (the certificate's expiry); leafd on one MariaDB (the replication
    series); and the embedded default (serials);
  - leafd_tls_cert_not_after_seconds is the certificate's notAfter, and the
    new certificate's after a SIGHUP reload.
Without promtool (Debian's prometheus package), MariaDB or redis-server
these tests skip (under CI=1 they fail)."""
import calendar
import json
import os
import re
import shutil
import signal
import subprocess
import time

from bbutil import MariaDB, Workdir, check, eq, free_port, skip, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEAFD = os.environ.get("LEAFD_TEST_BIN", os.path.join(ROOT, "leafd"))
RULES = os.path.join(ROOT, "conf/prometheus/leafd-rules.yml")
RULE_TESTS = os.path.join(ROOT, "tests/prometheus/leafd-rules.test.yml")
DASHBOARD = os.path.join(ROOT, "conf/grafana/leafd-dashboard.json")

TESTS = [
    "test_promtool_check_and_unit_tests",
    "test_runbooks_point_into_operations",
    "test_queried_metrics_are_exported",
    "test_tls_not_after_follows_reload",
]


def promtool():
    p = shutil.which("promtool")
    if p is None:
        skip("promtool is not installed (Debian's prometheus package: sh .ci/deps.sh test)")
    return p


def alerts():
    """The alerts of the rules file: name -> runbook (a plain-text read of
    the YAML that the rules file's layout allows; promtool checks it)."""
    out, name = {}, None
    with open(RULES) as f:
        for line in f:
            m = re.match(r"\s*- alert: (\S+)\s*$", line)
            if m:
                name = m.group(1)
                out[name] = None
            m = re.match(r'\s*runbook: "([^"]*)"\s*$', line)
            if m and name is not None:
                out[name] = m.group(1)
    return out


def rule_exprs():
    """The rules' expressions, as text (an expr line and its block)."""
    exprs, cur = [], None
    with open(RULES) as f:
        for line in f:
            m = re.match(r"(\s*)expr: (.*)$", line)
            if m:
                cur = None
                if m.group(2).strip() == "|":
                    cur = len(m.group(1))
                    exprs.append("")
                else:
                    exprs.append(m.group(2))
                continue
            if cur is not None:
                if line.strip() and len(line) - len(line.lstrip()) <= cur:
                    cur = None
                else:
                    exprs[-1] += line
    return exprs


def dashboard_exprs():
    with open(DASHBOARD) as f:
        d = json.load(f)
    out = []
    for p in d["panels"]:
        for t in p.get("targets", []):
            out.append(t["expr"])
    for v in d["templating"]["list"]:
        q = v.get("query")
        if isinstance(q, dict):
            out.append(q["query"])
    return out


def metric_names(exprs):
    names = set()
    for e in exprs:
        names.update(re.findall(r"\bleafd_[a-z0-9_]+", e))
    return names


def test_promtool_check_and_unit_tests(ctx):
    """promtool accepts the rules, and their unit tests pass; every alert has
    a test (its name appears as an alertname in the test file)."""
    pt = promtool()
    r = subprocess.run([pt, "check", "rules", RULES], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr)
    r = subprocess.run([pt, "test", "rules", RULE_TESTS], capture_output=True, text=True,
                       timeout=120, cwd=os.path.dirname(RULE_TESTS))
    check(r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr)
    with open(RULE_TESTS) as f:
        tested = set(re.findall(r"alertname: (\S+)", f.read()))
    names = set(alerts())
    check(len(names) >= 10, "alerts found: %s" % sorted(names))
    eq(sorted(names - tested), [], "alerts without a unit test")
    # The test file's firing cases must each expect an alert: a test that
    # only says exp_alerts: [] would pass against a rule that never fires.
    with open(RULE_TESTS) as f:
        body = f.read()
    for n in names:
        check(re.search(r"alertname: %s\n\s*exp_alerts:\n\s*- exp_labels" % n, body),
              "no firing case for %s" % n)


def anchor(heading):
    """GitHub's anchor of a Markdown heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def test_runbooks_point_into_operations(ctx):
    """Each alert's runbook is docs/operations.md#<anchor> of a heading
    there that names the alert."""
    with open(os.path.join(ROOT, "docs/operations.md")) as f:
        heads = [l.lstrip("#").strip() for l in f if l.startswith("#")]
    anchors = {anchor(h): h for h in heads}
    for name, rb in alerts().items():
        check(rb is not None, "%s has no runbook annotation" % name)
        path, _, frag = rb.partition("#")
        eq(path, "docs/operations.md", "%s's runbook" % name)
        check(frag in anchors, "%s: no heading for #%s in docs/operations.md" % (name, frag))
        check(name in anchors[frag], "%s: heading %r does not name it" % (name, anchors[frag]))


def make_cert(d, name, days):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", name + ".key",
                    "-out", name + ".pem", "-days", str(days), "-subj", "/CN=localhost"],
                   cwd=d, check=True, capture_output=True)
    r = subprocess.run(["openssl", "x509", "-noout", "-enddate", "-in", name + ".pem"],
                       cwd=d, check=True, capture_output=True, text=True)
    # notAfter=Nov 28 09:00:00 2027 GMT
    end = time.strptime(r.stdout.strip().split("=", 1)[1], "%b %d %H:%M:%S %Y %Z")
    return os.path.join(d, name + ".pem"), os.path.join(d, name + ".key"), calendar.timegm(end)


def scrape(node):
    r = node.get("/metrics")
    eq(r.status, 200, "/metrics")
    return r.body.decode() if isinstance(r.body, bytes) else r.body


def exported(text):
    """Names with a TYPE line or a sample in a /metrics page."""
    names = set(re.findall(r"^# TYPE (leafd_[a-z0-9_]+) ", text, re.M))
    names.update(re.findall(r"^(leafd_[a-z0-9_]+)[{ ]", text, re.M))
    return names


def test_queried_metrics_are_exported(ctx):
    """Every series a rule or a dashboard panel asks for, leafd exports."""
    if shutil.which("openssl") is None:
        skip("openssl is not installed")
    with Workdir("alerts-metrics") as wd:
        cert, key, _ = make_cert(wd.path, "srv", 30)
        d0 = MariaDB(os.path.join(wd.path, "db0"))
        wd.cleanup.append(d0.stop)
        d1 = MariaDB(os.path.join(wd.path, "db1"))
        wd.cleanup.append(d1.stop)
        d0.start()
        d1.start()
        urls = [d0.url, d1.url]
        r = subprocess.run([LEAFD, "multi-db", "init"] + urls + ["--block-size=100000",
                                                        "--segment.max_step=2000"],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, r.stdout + r.stderr)
        rd = wd.redis(epoch0=[(2, "leafd:snowflake:")])
        tls_port = free_port()
        multi = wd.leafd(conf={"leaf.segment.enable": "true", "leaf.snowflake.enable": "true"},
                         flags=["--segment.mysql.urls=" + ",".join(urls),
                                "--segment.max_step=2000", "--segment.lease_max=50000",
                                "--snowflake.worker_source=redis",
                                "--snowflake.redis.url=redis://127.0.0.1:%d/2" % rd.port,
                                "--snowflake.takeover_age_ms=20000",
                                "--snowflake.max_clock_offset_ms=500",
                                "--snowflake.cache_file=%s/wid.json" % wd.path,
                                "--listen.tls_port=%d" % tls_port,
                                "--tls.cert_file=" + cert, "--tls.key_file=" + key],
                         name="multi").start()
        single = wd.leafd(conf={"leaf.segment.enable": "true", "leaf.snowflake.enable": "true"},
                          flags=["--segment.mysql.url=" + make_single_db(d0)],
                          name="single").start()
        # The embedded default: serials (/serial/demo) on SQLite.
        default = wd.leafd(flags=["--segment.sqlite.path=%s/d.db" % wd.path,
                                  "--snowflake.cache_file=%s/d.json" % wd.path],
                           name="default").start()
        eq(default.get("/serial/demo").status, 200, "/serial/demo")
        for n in (multi, single):
            n.get("/segment/leafd_alerts_probe")
            n.get("/snowflake")
        wait_for(lambda: "leafd_snowflake_clock_offset_ms{" in scrape(multi), 20,
                 what="a heartbeat's clock offset in /metrics")
        have = exported(scrape(multi)) | exported(scrape(single)) | exported(scrape(default))
        want = metric_names(rule_exprs()) | metric_names(dashboard_exprs())
        check(len(want) >= 20, "metric names found in the queries: %s" % sorted(want))
        eq(sorted(want - have), [], "metrics queried but not exported")


def make_single_db(m):
    """A second database on m for a single-store node, with Leaf's table and
    the probe tag; its URL."""
    m.sql("CREATE DATABASE IF NOT EXISTS leaf_single")
    with open(os.path.join(ROOT, "sql/mysql.sql")) as f:
        ddl = f.read()
    subprocess.run(["mariadb", "--no-defaults", "-uroot", "-h127.0.0.1", "-P%d" % m.port,
                    "leaf_single"], input=ddl, text=True, check=True, capture_output=True)
    m.sql("INSERT INTO leaf_single.leaf_alloc (biz_tag, max_id, step) "
          "VALUES ('leafd_alerts_probe', 1, 100)")
    return m.url.rsplit("/", 1)[0] + "/leaf_single"


def test_tls_not_after_follows_reload(ctx):
    """The metric is the certificate's notAfter; after the file is replaced
    by one that expires in 5 days and a SIGHUP, the new one's."""
    if shutil.which("openssl") is None:
        skip("openssl is not installed")
    with Workdir("alerts-tls") as wd:
        cert, key, end30 = make_cert(wd.path, "a", 30)
        n = wd.leafd(flags=["--listen.tls_port=%d" % free_port(),
                            "--tls.cert_file=" + cert, "--tls.key_file=" + key,
                            "--segment.sqlite.path=%s/l.db" % wd.path], name="tls").start()

        def value():
            m = re.search(r"^leafd_tls_cert_not_after_seconds (\S+)$", scrape(n), re.M)
            return int(float(m.group(1))) if m else None

        eq(value(), end30, "notAfter of the 30-day certificate")
        _, _, end5 = make_cert(wd.path, "b", 5)
        shutil.copy(os.path.join(wd.path, "b.pem"), cert)
        shutil.copy(os.path.join(wd.path, "b.key"), key)
        os.kill(n.proc.pid, signal.SIGHUP)
        wait_for(lambda: value() == end5, 20, what="the 5-day certificate's notAfter")
        check(end30 - end5 > 20 * 86400, "the two certificates' notAfter: %d %d" % (end30, end5))
