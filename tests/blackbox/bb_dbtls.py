"""Black-box tests of TLS from leafd to MariaDB (the MySQL URL's ssl_mode,
ssl_ca, ssl_cert, ssl_key; docs/operations.md "TLS to the stores").

Each test makes a throwaway CA with openssl and starts a MariaDB with
--ssl-ca/--ssl-cert/--ssl-key (tests/lib/mariadb.sh reads them from
DIR/args). Its users 'tls' (REQUIRE SSL) and 'x509' (REQUIRE X509) make the
server itself the proof that a session is encrypted: a clear-text URL is
refused by the server, the TLS URL serves IDs, and the server's Ssl_accepts
counter grows. The shapes covered: segment IDs on verify_identity (mysql://
and Leaf's JDBC URL), a wrong CA, a host name not in the certificate, a
server without TLS, a missing CA file, a password-asking auth plugin kept
from a required session, a client certificate, the MySQL worker-ID source,
and multi-db."""
import os
import subprocess

from bbutil import LEAFD, MariaDB, Workdir, check, eq

TESTS = [
    "test_verify_identity_serves_over_tls",
    "test_refusals_name_the_cause",
    "test_client_certificate",
    "test_worker_ids_over_tls",
    "test_multidb_over_tls",
]

# Run by the plain black-box lane only, not against leafd-asan (blackbox.py
# --asan): the stores' TLS under full scenarios; the TLS options and refusals
# stay in the ASan lane.
PLAIN_ONLY = {
    "test_multidb_over_tls",
    "test_worker_ids_over_tls",
}

TLS_PW = "tls-Pw-5511"
X509_PW = "x509-Pw-7722"
SEGMENT = ["--leaf.segment.enable=true", "--leaf.snowflake.enable=false",
           "--segment.wait_ms=3000"]


def openssl(*args):
    r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    eq(r.returncode, 0, "openssl %s: %s" % (args[0], r.stderr.decode()))


class Pki:
    """A throwaway CA, a second CA nobody trusts, a server certificate for
    IP 127.0.0.1 (and no host name) and a client certificate, as PEM files
    (EC P-256 keys: quick to make)."""

    def __init__(self, wd):
        self.dir = os.path.join(wd.path, "pki")
        os.makedirs(self.dir)
        self.ca = self._ca("ca", "leafd test CA")
        self.wrong_ca = self._ca("wrong-ca", "some other CA")
        self.server, self.server_key = self._leaf("server", "leafd-test-db",
                                                  "subjectAltName=IP:127.0.0.1")
        self.client, self.client_key = self._leaf("client", "leafd-client",
                                                  "extendedKeyUsage=clientAuth")

    def path(self, name):
        return os.path.join(self.dir, name)

    def _ca(self, name, cn):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-days", "2", "-subj", "/CN=%s" % cn,
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                "-keyout", self.path(name + ".key"), "-out", self.path(name + ".pem"))
        return self.path(name + ".pem")

    def _leaf(self, name, cn, ext):
        with open(self.path(name + ".ext"), "w") as f:
            f.write("basicConstraints=CA:FALSE\n%s\n" % ext)
        openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-subj", "/CN=%s" % cn,
                "-keyout", self.path(name + ".key"), "-out", self.path(name + ".csr"))
        openssl("x509", "-req", "-in", self.path(name + ".csr"), "-CA", self.ca,
                "-CAkey", self.path("ca.key"), "-CAcreateserial", "-days", "2",
                "-extfile", self.path(name + ".ext"), "-out", self.path(name + ".pem"))
        return self.path(name + ".pem"), self.path(name + ".key")

    def key_line(self):
        """A line of the client key's base64: never in a log."""
        with open(self.client_key) as f:
            return [ln for ln in f.read().splitlines() if not ln.startswith("-----")][0]


def tls_mariadb(wd, pki, name="mariadb"):
    """A MariaDB with TLS, users tls (REQUIRE SSL) and x509 (REQUIRE X509)
    on TCP and on its socket."""
    m = MariaDB(os.path.join(wd.path, name))
    with open(os.path.join(m.dir, "args"), "w") as f:
        f.write("--ssl-ca=%s --ssl-cert=%s --ssl-key=%s\n" % (pki.ca, pki.server, pki.server_key))
    wd.cleanup.append(m.stop)
    m.start()
    eq(m.sql("SELECT @@have_ssl").strip(), "YES", "the server has TLS")
    for host in ("127.0.0.1", "localhost"):
        m.sql("CREATE USER 'tls'@'%s' IDENTIFIED BY '%s' REQUIRE SSL;"
              "GRANT ALL ON leaf.* TO 'tls'@'%s';"
              "CREATE USER 'x509'@'%s' IDENTIFIED BY '%s' REQUIRE X509;"
              "GRANT ALL ON leaf.* TO 'x509'@'%s';"
              % (host, TLS_PW, host, host, X509_PW, host))
    return m


def url(db, user="tls", pw=TLS_PW, **tls):
    q = "&".join("%s=%s" % kv for kv in tls.items())
    return "mysql://%s:%s@127.0.0.1:%d/leaf%s" % (user, pw, db.port, "?" + q if q else "")


def ssl_accepts(db):
    return int(db.sql("SHOW GLOBAL STATUS LIKE 'Ssl_accepts'").split()[1])


def add_tag(db, tag):
    db.sql("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('%s', 1, 100)" % tag)


def segment_node(wd, u, name):
    """A started leafd in segment mode on MySQL URL u."""
    return wd.leafd(flags=SEGMENT + ["--segment.mysql.url=" + u], name=name).start()


def refused(d, path, why):
    """leafd is up, but path gets no ID (503) and its log says why."""
    r = d.get(path)
    eq(r.status, 503, "%s without the database: %r" % (path, r))
    log = d.log()
    check(why in log, "the log names the cause (%r):\n%s" % (why, log))
    return log


def no_secrets(d, pki):
    log = d.log()
    for secret in (TLS_PW, X509_PW, pki.key_line()):
        check(secret not in log, "a secret in the log:\n%s" % log)


def test_verify_identity_serves_over_tls(ctx):
    with Workdir("dbtls-identity") as wd:
        pki = Pki(wd)
        db = tls_mariadb(wd, pki)
        add_tag(db, "tls")
        # the server refuses user tls in clear text
        clear = segment_node(wd, url(db), "clear")
        refused(clear, "/segment/tls", "Access denied for user 'tls'")
        clear.stop()
        before = ssl_accepts(db)
        d = segment_node(wd, url(
            db, ssl_mode="verify_identity", ssl_ca=pki.ca), "tls")
        r = d.get("/segment/tls?count=10")
        eq(r.status, 200, "IDs over TLS: %r\n%s" % (r, d.log()))
        eq(len(set(r.ids())), 10, "ten IDs")
        eq(d.get("/health").json()["segment"]["store"], "mysql", "store kind")
        check(ssl_accepts(db) > before, "the server counted TLS handshakes")
        check("TLS TLS_" in d.log(), "the log says the session is TLS: %s" % d.log())
        no_secrets(d, pki)
        # Leaf's JDBC URL, with Connector/J's sslMode and MySQL's ssl-ca
        j = wd.leafd(conf={"leaf.segment.enable": "true", "leaf.snowflake.enable": "false",
                           "leaf.jdbc.url": "jdbc:mysql://127.0.0.1:%d/leaf?useUnicode=true"
                                            "&characterEncoding=utf8&sslMode=VERIFY_IDENTITY"
                                            "&ssl-ca=%s" % (db.port, pki.ca),
                           "leaf.jdbc.username": "tls", "leaf.jdbc.password": TLS_PW},
                     name="jdbc").start()
        r = j.get("/segment/tls?count=10")
        eq(r.status, 200, "IDs over TLS from a JDBC URL: %r\n%s" % (r, j.log()))
        check(not set(r.ids()) & set(d.get("/segment/tls?count=10").ids()),
              "two nodes, distinct IDs")
        no_secrets(j, pki)


def test_refusals_name_the_cause(ctx):
    with Workdir("dbtls-refusals") as wd:
        pki = Pki(wd)
        db = tls_mariadb(wd, pki)
        add_tag(db, "ref")
        # a CA that did not sign the server's certificate
        d = segment_node(wd, url(
            db, ssl_mode="verify_ca", ssl_ca=pki.wrong_ca), "wrongca")
        log = refused(d, "/segment/ref", "ssl_ca=" + pki.wrong_ca)
        check("TLS/SSL error: self-signed certificate in certificate chain" in log,
              "the certificate error: %s" % log)
        no_secrets(d, pki)
        d.stop()
        # the host name: the certificate names 127.0.0.1, not localhost (the
        # socket's host); verify_ca does not look at names
        sock = os.path.join(db.dir, "sock")
        base = "mysql://tls:%s@localhost/leaf?socket=%s&ssl_ca=%s" % (TLS_PW, sock, pki.ca)
        d = segment_node(wd, base + "&ssl_mode=verify_identity", "name")
        refused(d, "/segment/ref", "Validation of SSL server certificate failed")
        d.stop()
        d = segment_node(wd, base + "&ssl_mode=verify_ca", "socket")
        eq(d.get("/segment/ref").status, 200, "verify_ca over the socket: %s" % d.log())
        d.stop()
        # a user whose server asks for the password itself (PAM, through the
        # dialog plugin): with required, not sent (a server that stripped TLS
        # could be asking); with verify_identity, sent over TLS (PAM then
        # refuses it: no such PAM service)
        db.sql("INSTALL SONAME 'auth_pam';"
               "CREATE USER 'pamu'@'127.0.0.1' IDENTIFIED VIA pam USING 'leafd-none';"
               "GRANT ALL ON leaf.* TO 'pamu'@'127.0.0.1'")
        d = segment_node(wd, url(db, "pamu", TLS_PW, ssl_mode="required"), "pam-required")
        refused(d, "/segment/ref", "restricted_auth plugin list")
        check("only mysql_native_password,client_ed25519 may log in" in d.log(), d.log())
        d.stop()
        d = segment_node(wd, url(db, "pamu", TLS_PW, ssl_ca=pki.ca), "pam-identity")
        refused(d, "/segment/ref", "Access denied for user 'pamu'")
        d.stop()
        # a server without TLS: never clear text
        plain = ctx.shared_mariadb()
        eq(plain.sql("SELECT @@have_ssl").strip(), "DISABLED", "the shared MariaDB has no TLS")
        for mode, extra, why in (
                ("required", "", "the server did not start TLS"),   # checked after login
                ("verify_identity", "&ssl_ca=" + pki.ca,            # refused before it
                 "SSL is required, but the server does not support it")):
            u = "mysql://root@127.0.0.1:%d/leaf?ssl_mode=%s%s" % (plain.port, mode, extra)
            d = segment_node(wd, u, "plain-" + mode)
            log = refused(d, "/segment/ref", "ssl_mode=" + mode)
            check(why in log, "says the server has no TLS: %s" % log)
            d.stop()
        # a CA file that is not there: refused at start
        d = wd.leafd(flags=SEGMENT + ["--segment.mysql.url=" + url(
            db, ssl_ca=pki.path("missing.pem"))], name="missing")
        check(d.start(expect_fail=True) != 0, "a missing CA file stops the start")
        check("ssl_ca %s: No such file or directory" % pki.path("missing.pem") in d.log(),
              d.log())


def test_client_certificate(ctx):
    with Workdir("dbtls-x509") as wd:
        pki = Pki(wd)
        db = tls_mariadb(wd, pki)
        add_tag(db, "x509")
        # REQUIRE X509: TLS alone is not enough
        d = segment_node(wd, url(
            db, "x509", X509_PW, ssl_ca=pki.ca), "nocert")
        refused(d, "/segment/x509", "Access denied for user 'x509'")
        d.stop()
        d = segment_node(wd, url(
            db, "x509", X509_PW, ssl_mode="verify_identity", ssl_ca=pki.ca,
            ssl_cert=pki.client, ssl_key=pki.client_key), "cert")
        r = d.get("/segment/x509?count=5")
        eq(r.status, 200, "IDs with a client certificate: %r\n%s" % (r, d.log()))
        eq(len(r.ids()), 5, "five IDs")
        no_secrets(d, pki)
        # a key that is not the certificate's
        d = segment_node(wd, url(
            db, "x509", X509_PW, ssl_ca=pki.ca, ssl_cert=pki.client,
            ssl_key=pki.server_key), "wrongkey")
        refused(d, "/segment/x509", "key values mismatch")
        no_secrets(d, pki)


def worker_node(wd, u, name):
    return wd.leafd(flags=["--leaf.segment.enable=false", "--leaf.snowflake.enable=true",
                           "--snowflake.worker_source=mysql", "--snowflake.mysql.url=" + u,
                           "--snowflake.ip=10.9.0.1", "--leaf.snowflake.port=7000",
                           "--snowflake.cache_file=%s.json" % name,
                           "--snowflake.heartbeat_ms=200", "--snowflake.fence_step_ms=500"],
                    name=name)


def test_worker_ids_over_tls(ctx):
    with Workdir("dbtls-workerid") as wd:
        pki = Pki(wd)
        db = tls_mariadb(wd, pki).worker_epoch0()
        # no worker ID from a clear-text store: no snowflake ID
        clear = worker_node(wd, url(db), "clear").start()
        refused(clear, "/snowflake", "Access denied for user 'tls'")
        clear.stop()
        before = ssl_accepts(db)
        d = worker_node(wd, url(db, ssl_ca=pki.ca, ssl_cert=pki.client,
                                ssl_key=pki.client_key), "tls").start()
        r = d.get("/snowflake?count=10")
        eq(r.status, 200, "snowflake IDs: %r\n%s" % (r, d.log()))
        eq(len(set(r.ids())), 10, "ten IDs")
        st = d.get("/snowflake/state").json()
        eq((st["source"], st["store"]), ("mysql", "mysql"), "worker IDs from MySQL")
        eq(db.sql("SELECT identity FROM leaf_worker WHERE worker_id = %d" % st["worker_id"])
           .strip(), "10.9.0.1:7000", "the claim is in leaf_worker")
        check(ssl_accepts(db) > before, "the server counted TLS handshakes")
        no_secrets(d, pki)


def test_multidb_over_tls(ctx):
    with Workdir("dbtls-multidb") as wd:
        pki = Pki(wd)
        a = tls_mariadb(wd, pki, "db0")
        b = tls_mariadb(wd, pki, "db1")
        add_tag(a, "mt")
        urls = [url(m, ssl_mode="verify_identity", ssl_ca=pki.ca) for m in (a, b)]
        r = subprocess.run([LEAFD, "multi-db", "init"] + urls + ["--block-size=100000", "--segment.max_step=2000"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        out = r.stdout.decode()
        eq(r.returncode, 0, "multi-db init over TLS: %s" % out)
        check(TLS_PW not in out, "no password in init's output: %s" % out)
        eq(b.sql("SELECT biz_tag FROM leaf_alloc").split(), ["mt"], "the tag copied over TLS")
        before = [ssl_accepts(m) for m in (a, b)]
        d = wd.leafd(flags=SEGMENT + ["--segment.mysql.urls=" + ",".join(urls),
                                      "--segment.max_step=2000", "--segment.lease_max=50000"],
                     name="n").start()
        r = d.get("/segment/mt?count=20")
        eq(r.status, 200, "IDs from a set over TLS: %r\n%s" % (r, d.log()))
        eq(len(set(r.ids())), 20, "twenty IDs")
        eq(len(d.get("/health").json()["segment"]["databases"]), 2, "both databases")
        check(all(ssl_accepts(m) > n for m, n in zip((a, b), before)),
              "both servers counted TLS handshakes")
        no_secrets(d, pki)
