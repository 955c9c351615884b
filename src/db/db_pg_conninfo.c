/* db_pg_conninfo.c: the checks of a PostgreSQL connection string
 * (db_pg_conninfo_check, db_pg.h): libpq's parse, then what libpq would
 * only find at connect time. Pure but for access(2) on the files named;
 * fuzzed (fuzz/fuzz_pg_conninfo.c). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* Does tok occur in a password of conninfo: a keyword form's password=
 * value (to a space, or its closing quote) or a URI's userinfo after its
 * ':' (to the '@')? */
static int
in_password(const char *conninfo, const char *tok, size_t len)
{
    const char *p = conninfo, *end;

    if (len == 0)
        return 0;
    while ((p = strstr(p, "password")) != NULL) {
        p += 8;
        while (*p == ' ' || *p == '=')
            p++;
        end = *p == '\'' ? strchr(p + 1, '\'') : p + strcspn(p, " \t\n&");
        if (end == NULL)
            end = p + strlen(p);
        if (memmem(p, (size_t)(end - p), tok, len) != NULL)
            return 1;
    }
    if ((p = strstr(conninfo, "://")) != NULL) {
        const char *at, *colon;

        p += 3;
        at = strchr(p, '@');
        colon = strchr(p, ':');
        if (at != NULL && colon != NULL && colon < at &&
            memmem(colon, (size_t)(at - colon), tok, len) != NULL)
            return 1;
    }
    return 0;
}

/* libpq's reason with every quoted token that may be a password (one in
 * a password, a bad %-escape, anything but a keyword's letters) hidden. */
static void
redact(char *msg, const char *conninfo)
{
    char *q = msg;

    while ((q = strchr(q, '"')) != NULL) {
        char *e = strchr(q + 1, '"');
        size_t len;
        int word = 1;

        if (e == NULL)
            return;
        len = (size_t)(e - q - 1);
        for (size_t i = 0; i < len; i++)
            if (!((q[1 + i] >= 'a' && q[1 + i] <= 'z') || q[1 + i] == '_'))
                word = 0;
        if (len == 1 && q[1] == '=')
            word = 1;                   /* missing "=" after ... */
        if (!word || len > 40 || in_password(conninfo, q + 1, len)) {
            /* "..." in place of the token: never longer than it. */
            if (len >= 3) {
                memcpy(q + 1, "...", 3);
                memmove(q + 4, e, strlen(e) + 1);
                e = q + 4;
            }
            else
                memset(q + 1, '.', len);
        }
        q = e + 1;
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
         * \"x\"", "missing \"=\" after \"x\""): shown, but for a token
         * that may be a password. */
        redact(err, conninfo);
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

static const char mask[] = "***";
static const char qmask[] = "'***'";

/* Copy [s, e) to *o, advancing it. */
static void
put(char **o, const char *s, const char *e)
{
    memcpy(*o, s, (size_t)(e - s));
    *o += e - s;
}

/* A URI's password in its authority and in password= pairs of its query
 * masked. */
static void
redact_uri(const char *s, char *o)
{
    const char *p = strstr(s, "://") + 3, *at = p + strcspn(p, "@/");
    const char *colon, *q;

    /* As libpq reads it: the user part ends at the first '@' before any
     * '/', the password after its first ':'. */
    if (*at != '@')
        at = NULL;
    colon = at != NULL ? memchr(p, ':', (size_t)(at - p)) : NULL;
    if (colon != NULL) {
        put(&o, s, colon + 1);
        put(&o, mask, mask + 3);
        p = at;
    } else {
        put(&o, s, p);
    }
    q = strchr(at != NULL ? at : p, '?');     /* the query: after the host */
    if (q == NULL)
        q = p + strlen(p);
    put(&o, p, q);
    while (*q != '\0') {                /* '?' or '&', then key=value */
        size_t n = 1 + strcspn(q + 1, "&"), k = strcspn(q + 1, "&=");

        if (k == 8 && strncasecmp(q + 1, "password", 8) == 0 && q[9] == '=') {
            put(&o, q, q + 10);
            put(&o, mask, mask + 3);
        } else {
            put(&o, q, q + n);
        }
        q += n;
    }
    *o = '\0';
}

/* A keyword form's password= values masked (quoted or not). */
static void
redact_keywords(const char *s, char *o)
{
    while (*s != '\0') {
        const char *k = s, *v;
        size_t klen;

        if (isspace((unsigned char)*s)) {
            *o++ = *s++;
            continue;
        }
        while (*s != '\0' && *s != '=' && !isspace((unsigned char)*s))
            s++;
        klen = (size_t)(s - k);
        while (isspace((unsigned char)*s))
            s++;
        if (*s == '=') {
            s++;
            while (isspace((unsigned char)*s))
                s++;
        }
        v = s;
        if (*s == '\'') {
            for (s++; *s != '\0' && *s != '\''; s++)
                if (*s == '\\' && s[1] != '\0')
                    s++;
            if (*s == '\'')
                s++;
        } else {
            for (; *s != '\0' && !isspace((unsigned char)*s); s++)
                if (*s == '\\' && s[1] != '\0')
                    s++;
        }
        put(&o, k, v);
        if (klen == 8 && strncmp(k, "password", 8) == 0 && *v == '\'')
            put(&o, qmask, qmask + 5);  /* quoted: a keyword may follow the
                                           closing quote at once */
        else if (klen == 8 && strncmp(k, "password", 8) == 0)
            put(&o, mask, mask + 3);
        else
            put(&o, v, s);
    }
    *o = '\0';
}

char *
db_pg_conninfo_redacted(const char *conninfo)
{
    size_t len = strlen(conninfo);
    /* every password may be empty: at most one mask per byte, and two */
    char *out = xmalloc(len + 3 * (len + 2) + 1);

    if (strncasecmp(conninfo, "postgresql://", 13) == 0 ||
        strncasecmp(conninfo, "postgres://", 11) == 0)
        redact_uri(conninfo, out);
    else
        redact_keywords(conninfo, out);
    return out;
}
