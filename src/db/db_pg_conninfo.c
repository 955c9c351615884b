/* db_pg_conninfo.c: the checks of a PostgreSQL connection string
 * (db_pg_conninfo_check, db_pg.h): libpq's parse, then what libpq would
 * only find at connect time. Pure but for access(2) on the files named;
 * fuzzed (fuzz/fuzz_pg_conninfo.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db_pg.h"
#include "util.h"

static const char *const sslmodes[] = {
    "disable", "allow", "prefer", "require", "verify-ca", "verify-full", NULL
};
static const char *const session_attrs[] = {
    "any", "read-write", "read-only", "primary", "standby", "prefer-standby",
    NULL
};
/* Files libpq reads: each must be readable now. */
static const char *const file_keys[] = {
    "sslrootcert", "sslcert", "sslkey", "passfile", "sslcrl", NULL
};

static int
one_of(const char *v, const char *const *set)
{
    for (int i = 0; set[i] != NULL; i++)
        if (strcmp(v, set[i]) == 0)
            return 1;
    return 0;
}

/* Comma-separated items of v (an empty v is one empty item). */
static int
count_items(const char *v)
{
    int n = 1;

    for (; *v; v++)
        n += *v == ',';
    return n;
}

/* Each comma-separated port: empty (the default) or 1..65535. */
static int
ports_ok(const char *v)
{
    const char *p = v;

    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
        int64_t port;

        if (len > 0 && (util_parse_i64(p, len, 0, &port) == -1 ||
                        port < 1 || port > 65535))
            return 0;
        if (e == NULL)
            return 1;
        p = e + 1;
    }
}

static int
fail(char **cause, const char *key, const char *fmt, const char *a,
     const char *b)
{
    char *why = xasprintf(fmt, a, b);

    util_set_cause(cause, "%s: %s", key, why);
    free(why);
    return -1;
}

int
db_pg_conninfo_check(const char *conninfo, const char *key, char **cause)
{
    PQconninfoOption *opts, *o;
    char *err = NULL;
    const char *host = NULL, *hostaddr = NULL, *port = NULL;
    int rc = 0;

    if (conninfo == NULL || *conninfo == '\0')
        return fail(cause, key, "empty connection string%s%s", "", "");
    if (strnlen(conninfo, DB_PG_CONNINFO_MAX + 1) > DB_PG_CONNINFO_MAX)
        return fail(cause, key, "longer than %s bytes%s", "1024", "");
    opts = PQconninfoParse(conninfo, &err);
    if (opts == NULL) {
        char *nl;

        if (err == NULL)
            return fail(cause, key, "out of memory%s%s", "", "");
        if ((nl = strchr(err, '\n')) != NULL)
            *nl = '\0';
        /* libpq's text names the part ("invalid URI query parameter:
         * \"x\"", "missing \"=\" after \"x\""), never a password. */
        rc = fail(cause, key, "%s (libpq)%s", err, "");
        PQfreemem(err);
        return rc;
    }
    for (o = opts; o->keyword != NULL && rc == 0; o++) {
        const char *v = o->val;

        if (v == NULL)
            continue;
        if (strcmp(o->keyword, "host") == 0)
            host = v;
        else if (strcmp(o->keyword, "hostaddr") == 0)
            hostaddr = v;
        else if (strcmp(o->keyword, "port") == 0)
            port = v;
        else if (strcmp(o->keyword, "sslmode") == 0 && !one_of(v, sslmodes))
            rc = fail(cause, key, "sslmode \"%.40s\" is not one of disable, "
                      "allow, prefer, require, verify-ca, verify-full%s", v, "");
        else if (strcmp(o->keyword, "target_session_attrs") == 0 &&
                 !one_of(v, session_attrs))
            rc = fail(cause, key, "target_session_attrs \"%.40s\" is not one "
                      "of any, read-write, read-only, primary, standby, "
                      "prefer-standby%s", v, "");
        else if (strcmp(o->keyword, "connect_timeout") == 0) {
            int64_t t;

            if (util_parse_i64(v, strlen(v), 0, &t) == -1 || t > 86400)
                rc = fail(cause, key, "connect_timeout \"%.40s\" is not a "
                          "number of seconds (0..86400)%s", v, "");
        } else if (strcmp(o->keyword, "replication") == 0)
            rc = fail(cause, key, "replication=%.20s: leafd needs a normal "
                      "session, not a replication one%s", v, "");
        else if (one_of(o->keyword, file_keys) && *v != '\0' &&
                 access(v, R_OK) == -1)
            rc = fail(cause, key, "%s: cannot read %s", o->keyword, v);
    }
    if (rc == 0 && port != NULL && !ports_ok(port))
        rc = fail(cause, key, "port \"%.60s\" is not a port (1..65535) or a "
                  "comma-separated list of them%s", port, "");
    if (rc == 0 && port != NULL && count_items(port) > 1) {
        int hosts = count_items(host != NULL ? host :
                                hostaddr != NULL ? hostaddr : "");

        if (count_items(port) != hosts)
            rc = fail(cause, key, "%s ports for %s hosts: give one port, or "
                      "one per host", port, host != NULL ? host : "?");
    }
    if (rc == 0 && (host == NULL || *host == '\0') &&
        (hostaddr == NULL || *hostaddr == '\0'))
        rc = fail(cause, key, "no host: name the server (host=... or "
                  "postgresql://HOST/db); a unix socket is a host that starts "
                  "with /%s%s", "", "");
    PQconninfoFree(opts);
    return rc;
}
