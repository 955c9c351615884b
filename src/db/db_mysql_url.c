/* db_mysql_url.c: MySQL URLs, Leaf's JDBC form and leafd's mysql:// form
 * (see db_mysql_url.h). Pure: no I/O, no MySQL library; fuzzed alone
 * (fuzz/fuzz_mysql_url.c). */
#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_mysql_url.h"
#include "util.h"

#define URL_MAX      1024   /* whole URL */
#define HOST_MAX     255
#define USER_MAX     128
#define PASSWORD_MAX 256
#define DATABASE_MAX 64     /* MySQL's limit on a schema name */
#define SOCKET_MAX   107    /* sun_path less its NUL */
#define SSL_PATH_MAX 512    /* ssl_ca, ssl_cert, ssl_key */
#define WORD_MAX     32     /* ssl_mode's and Connector/J's flags' values */

/* ssl_mode's values, indexed by enum db_mysql_ssl_mode. */
static const char *const ssl_mode_names[] = {
    "disabled", "required", "verify_ca", "verify_identity",
};

/* The PEM paths: (MySQL option name, field). */
static const struct {
    const char *key;
    size_t      off;
} url_tls_paths[] = {
    { "ssl_ca",   offsetof(struct db_mysql_target, ssl_ca) },
    { "ssl_cert", offsetof(struct db_mysql_target, ssl_cert) },
    { "ssl_key",  offsetof(struct db_mysql_target, ssl_key) },
};

/* What the query said about TLS, resolved after the last pair. */
struct url_tls {
    int mode;       /* ssl_mode= or sslMode=, or -1 */
    int implied;    /* Connector/J's useSSL/requireSSL/verifyServerCertificate */
};

void
db_mysql_target_free(struct db_mysql_target *t)
{
    if (t == NULL)
        return;
    free(t->host);
    free(t->user);
    free(t->password);
    free(t->database);
    free(t->socket);
    free(t->ssl_ca);
    free(t->ssl_cert);
    free(t->ssl_key);
    memset(t, 0, sizeof *t);
    t->port = 3306;
}

/* Percent-decode [s, s+len) into a malloc'd string of at most max bytes. */
static char *
url_decode(const char *s, size_t len, size_t max, const char *what,
           char **cause)
{
    char buf[1024];
    long n;

    if (max > sizeof buf)
        max = sizeof buf;
    n = util_pct_decode(s, len, buf, max);
    if (n < 0) {
        util_set_cause(cause, "bad %s in MySQL URL (bad %%-escape, NUL, or "
                        "longer than %zu bytes)", what, max);
        return NULL;
    }
    return xstrndup(buf, (size_t)n);
}

static int
url_host_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

/* host[:port] or [v6]:port from [p, end). */
static int
url_host_port(const char *p, const char *end, struct db_mysql_target *t,
              char **cause)
{
    const char *h = p, *he, *colon = NULL;
    uint64_t port;

    if (memchr(p, ',', (size_t)(end - p)) != NULL) {
        util_set_cause(cause, "MySQL URL lists several hosts; leafd takes one");
        return -1;
    }
    if (p < end && *p == '[') {
        h = p + 1;
        he = memchr(h, ']', (size_t)(end - h));
        if (he == NULL || he == h) {
            util_set_cause(cause, "bad [IPv6] host in MySQL URL");
            return -1;
        }
        for (const char *q = h; q < he; q++)
            if (!(url_host_char((unsigned char)*q) || *q == ':')) {
                util_set_cause(cause, "bad [IPv6] host in MySQL URL");
                return -1;
            }
        if (he + 1 < end) {
            if (he[1] != ':') {
                util_set_cause(cause, "junk after ] in MySQL URL host");
                return -1;
            }
            colon = he + 1;
        }
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        he = colon != NULL ? colon : end;
        for (const char *q = h; q < he; q++)
            if (!url_host_char((unsigned char)*q)) {
                unsigned char c = (unsigned char)*q;
                if (c < 0x80)
                    util_set_cause(cause, "bad character '%c' in MySQL URL "
                                    "host (want a name or IPv4 address)", c);
                else
                    util_set_cause(cause, "bad byte 0x%02x in MySQL URL "
                                    "host (want a name or IPv4 address)", c);
                return -1;
            }
    }
    if (he - h > HOST_MAX) {
        util_set_cause(cause, "MySQL URL host longer than %d bytes", HOST_MAX);
        return -1;
    }
    if (colon != NULL) {
        if (util_parse_u64(colon + 1, (size_t)(end - colon - 1), &port) == -1 ||
            port < 1 || port > 65535) {
            util_set_cause(cause, "bad port \"%.*s\" in MySQL URL (want "
                            "1..65535)", (int)(end - colon - 1), colon + 1);
            return -1;
        }
        t->port = (int)port;
    }
    if (he > h)
        t->host = xstrndup(h, (size_t)(he - h));
    return 0;
}

char *
db_mysql_url_redacted(const char *url)
{
    static const char mask[] = "***";
    size_t len = strlen(url);
    /* each password (one in the authority, one per '&' pair) grows by at
     * most '=' and the mask */
    char *out = xmalloc(len + (len + 2) * sizeof mask + 1), *o = out;
    const char *p = strstr(url, "://"), *auth_end, *at = NULL, *q;

    if (p == NULL) {
        memcpy(out, url, len + 1);
        return out;
    }
    p += 3;
    auth_end = p + strcspn(p, "/?");
    for (const char *c = p; c < auth_end; c++)
        if (*c == '@')
            at = c;
    if (at != NULL && memchr(p, ':', (size_t)(at - p)) != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        memcpy(o, url, (size_t)(colon + 1 - url));
        o += colon + 1 - url;
        memcpy(o, mask, sizeof mask - 1);
        o += sizeof mask - 1;
        p = at;
    } else {
        memcpy(o, url, (size_t)(p - url));
        o += p - url;
    }
    q = strchr(auth_end, '?');
    if (q == NULL)
        q = url + len;
    memcpy(o, p, (size_t)(q - p));
    o += q - p;
    /* the query: key=value pairs split by '&' */
    for (p = q; *p != '\0';) {
        size_t n = 1 + strcspn(p + 1, "&");      /* '?' or '&' and the pair */
        size_t klen = strcspn(p + 1, "&=");
        if (klen == 8 && memcmp(p + 1, "password", 8) == 0) {
            memcpy(o, p, 9);
            o += 9;
            *o++ = '=';
            memcpy(o, mask, sizeof mask - 1);
            o += sizeof mask - 1;
        } else {
            memcpy(o, p, n);
            o += n;
        }
        p += n;
    }
    *o = '\0';
    return out;
}

const char *
db_mysql_ssl_mode_name(enum db_mysql_ssl_mode m)
{
    assert((size_t)m < sizeof ssl_mode_names / sizeof ssl_mode_names[0]);
    return ssl_mode_names[m];
}

/* Is key [k, k+klen) the option name opt? '-' and '_' are the same, as in
 * MySQL's option names; icase: letters in any case (Connector/J's names). */
static int
url_key_is(const char *k, size_t klen, const char *opt, int icase)
{
    if (strlen(opt) != klen)
        return 0;
    for (size_t i = 0; i < klen; i++) {
        char a = k[i] == '-' ? '_' : k[i];
        char b = opt[i];
        if (icase && a >= 'A' && a <= 'Z')
            a = (char)(a - 'A' + 'a');
        if (icase && b >= 'A' && b <= 'Z')
            b = (char)(b - 'A' + 'a');
        if (a != b)
            return 0;
    }
    return 1;
}

/* The value [v, v+vlen) decoded into word (WORD_MAX + 1 bytes), lower case,
 * '-' as '_'. 0, or -1 with *cause. */
static int
url_word(const char *key, const char *v, size_t vlen, char *word,
         char **cause)
{
    long n = util_pct_decode(v, vlen, word, WORD_MAX);

    if (n <= 0) {
        util_set_cause(cause, "bad %s value in MySQL URL (empty, bad "
                        "%%-escape, or longer than %d bytes)", key, WORD_MAX);
        return -1;
    }
    word[n] = '\0';
    for (char *c = word; *c != '\0'; c++) {
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
        else if (*c == '-')
            *c = '_';
    }
    return 0;
}

/* ssl_mode=: MySQL's names, and MariaDB Connector/J's (trust, verify-full). */
static int
url_ssl_mode(const char *key, const char *v, size_t vlen, struct url_tls *tls,
             char **cause)
{
    static const struct {
        const char *name;
        enum db_mysql_ssl_mode mode;
    } names[] = {
        { "disabled", DB_MYSQL_SSL_DISABLED },
        { "disable", DB_MYSQL_SSL_DISABLED },
        { "required", DB_MYSQL_SSL_REQUIRED },
        { "trust", DB_MYSQL_SSL_REQUIRED },
        { "verify_ca", DB_MYSQL_SSL_VERIFY_CA },
        { "verify_identity", DB_MYSQL_SSL_VERIFY_IDENTITY },
        { "verify_full", DB_MYSQL_SSL_VERIFY_IDENTITY },
    };
    char word[WORD_MAX + 1];

    if (url_word(key, v, vlen, word, cause) == -1)
        return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(word, names[i].name) == 0) {
            tls->mode = (int)names[i].mode;
            return 0;
        }
    if (strcmp(word, "preferred") == 0)
        util_set_cause(cause, "%s=preferred in MySQL URL: it falls back to "
                        "clear text when the server has no TLS; leafd takes "
                        "disabled, required, verify_ca or verify_identity", key);
    else
        util_set_cause(cause, "bad %s \"%s\" in MySQL URL (want disabled, "
                        "required, verify_ca or verify_identity)", key, word);
    return -1;
}

/* Connector/J's boolean TLS flags: true raises the implied mode to mode. */
static int
url_jdbc_flag(const char *key, const char *v, size_t vlen,
              enum db_mysql_ssl_mode mode, struct url_tls *tls, char **cause)
{
    char word[WORD_MAX + 1];

    if (url_word(key, v, vlen, word, cause) == -1)
        return -1;
    if (strcmp(word, "true") == 0 || strcmp(word, "yes") == 0) {
        if ((int)mode > tls->implied)
            tls->implied = (int)mode;
        return 0;
    }
    if (strcmp(word, "false") == 0 || strcmp(word, "no") == 0)
        return 0;
    util_set_cause(cause, "bad %s \"%s\" in MySQL URL (want true or false)",
                    key, word);
    return -1;
}

/* A pair of the TLS parameters: 1 if [k, k+klen) is one (0 if not, -1 with
 * *cause if its value is bad). */
static int
url_tls_param(const char *k, size_t klen, const char *v, size_t vlen,
              int jdbc, struct db_mysql_target *t, struct url_tls *tls,
              char **cause)
{
    static const struct {
        const char *key;
        enum db_mysql_ssl_mode mode;
    } jflags[] = {
        { "useSSL", DB_MYSQL_SSL_REQUIRED },
        { "requireSSL", DB_MYSQL_SSL_REQUIRED },
        { "verifyServerCertificate", DB_MYSQL_SSL_VERIFY_CA },
    };
    static const char *const jstores[] = {
        "trustCertificateKeyStoreUrl", "clientCertificateKeyStoreUrl",
    };

    for (size_t i = 0; i < sizeof url_tls_paths / sizeof url_tls_paths[0];
         i++) {
        char **f;

        if (!url_key_is(k, klen, url_tls_paths[i].key, 0))
            continue;
        f = (char **)((char *)t + url_tls_paths[i].off);
        free(*f);
        if ((*f = url_decode(v, vlen, SSL_PATH_MAX, url_tls_paths[i].key,
                             cause)) == NULL)
            return -1;
        if ((*f)[0] != '/') {
            util_set_cause(cause, "MySQL URL %s must be an absolute path",
                            url_tls_paths[i].key);
            return -1;
        }
        return 1;
    }
    if (url_key_is(k, klen, "ssl_mode", 0) ||
        (jdbc && url_key_is(k, klen, "sslMode", 1)))
        return url_ssl_mode("ssl_mode", v, vlen, tls, cause) == -1 ? -1 : 1;
    if (!jdbc)
        return 0;
    for (size_t i = 0; i < sizeof jflags / sizeof jflags[0]; i++)
        if (url_key_is(k, klen, jflags[i].key, 1))
            return url_jdbc_flag(jflags[i].key, v, vlen, jflags[i].mode, tls,
                                 cause) == -1 ? -1 : 1;
    for (size_t i = 0; i < sizeof jstores / sizeof jstores[0]; i++)
        if (url_key_is(k, klen, jstores[i], 1)) {
            util_set_cause(cause, "MySQL URL: %s is a Java key store, which "
                            "leafd cannot read; give PEM files as ssl_ca=, "
                            "ssl_cert= and ssl_key=", jstores[i]);
            return -1;
        }
    return 0;
}

/* The mode the query asked for, and the checks that need every pair. */
static int
url_tls_resolve(struct db_mysql_target *t, const struct url_tls *tls,
                char **cause)
{
    int files = t->ssl_ca != NULL || t->ssl_cert != NULL || t->ssl_key != NULL;

    if (tls->mode >= 0)
        t->ssl_mode = (enum db_mysql_ssl_mode)tls->mode;
    else if (files)
        t->ssl_mode = DB_MYSQL_SSL_VERIFY_IDENTITY;
    else
        t->ssl_mode = (enum db_mysql_ssl_mode)tls->implied;
    if (t->ssl_mode == DB_MYSQL_SSL_DISABLED && files) {
        util_set_cause(cause, "MySQL URL has ssl_mode=disabled and ssl_ca, "
                        "ssl_cert or ssl_key");
        return -1;
    }
    if (t->ssl_mode == DB_MYSQL_SSL_REQUIRED && t->ssl_ca != NULL) {
        util_set_cause(cause, "MySQL URL has ssl_mode=required, which checks "
                        "no certificate, and ssl_ca: say verify_ca or "
                        "verify_identity");
        return -1;
    }
    if (t->ssl_mode == DB_MYSQL_SSL_VERIFY_CA && t->ssl_ca == NULL) {
        util_set_cause(cause, "MySQL URL has ssl_mode=verify_ca without "
                        "ssl_ca= (the CA to check the server against)");
        return -1;
    }
    if ((t->ssl_cert == NULL) != (t->ssl_key == NULL)) {
        util_set_cause(cause, "MySQL URL has one of ssl_cert and ssl_key: "
                        "a client certificate needs both");
        return -1;
    }
    return 0;
}

/* The query string [p, end): key=value pairs split by '&'. */
static int
url_query(const char *p, const char *end, int jdbc, struct db_mysql_target *t,
          char **cause)
{
    struct url_tls tls = { .mode = -1, .implied = DB_MYSQL_SSL_DISABLED };

    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp != NULL ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        const char *v = eq != NULL ? eq + 1 : e;
        size_t klen = (size_t)((eq != NULL ? eq : e) - p);
        size_t vlen = (size_t)(e - v);
        int r;

        if (url_key_is(p, klen, "socket", 0)) {
            free(t->socket);
            if ((t->socket = url_decode(v, vlen, SOCKET_MAX, "socket",
                                        cause)) == NULL)
                return -1;
            if (t->socket[0] != '/') {
                util_set_cause(cause, "MySQL URL socket must be an absolute "
                                "path");
                return -1;
            }
        } else if ((r = url_tls_param(p, klen, v, vlen, jdbc, t, &tls,
                                      cause)) != 0) {
            if (r == -1)
                return -1;
        } else if (jdbc && klen == 4 && memcmp(p, "user", 4) == 0) {
            if (t->user == NULL &&
                (t->user = url_decode(v, vlen, USER_MAX, "user", cause)) ==
                    NULL)
                return -1;
        } else if (jdbc && klen == 8 && memcmp(p, "password", 8) == 0) {
            if (t->password == NULL &&
                (t->password = url_decode(v, vlen, PASSWORD_MAX, "password",
                                          cause)) == NULL)
                return -1;
        } else if (!jdbc && klen > 0) {
            /* JDBC URLs carry many driver options, ignored; ours has few. */
            util_set_cause(cause, "unknown parameter \"%.*s\" in MySQL URL "
                            "(only socket=, ssl_mode=, ssl_ca=, ssl_cert=, "
                            "ssl_key=)", (int)klen, p);
            return -1;
        }
        p = e + 1;
    }
    return url_tls_resolve(t, &tls, cause);
}

int
db_mysql_url_parse(const char *url, struct db_mysql_target *t, char **cause)
{
    static const struct {
        const char *prefix;
        int jdbc;
    } schemes[] = {
        { "jdbc:mysql://", 1 },
        { "jdbc:mariadb://", 1 },
        { "mysql://", 0 },
        { "mariadb://", 0 },
    };
    const char *p = NULL, *end, *auth_end, *at, *path, *q, *db_end;
    int jdbc = 0;
    size_t len;

    memset(t, 0, sizeof *t);
    t->port = 3306;
    if (url == NULL || *url == '\0') {
        util_set_cause(cause, "empty MySQL URL");
        return -1;
    }
    len = strnlen(url, URL_MAX + 1);
    if (len > URL_MAX) {
        util_set_cause(cause, "MySQL URL longer than %d bytes", URL_MAX);
        return -1;
    }
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i].prefix);
        if (strncmp(url, schemes[i].prefix, n) == 0) {
            p = url + n;
            jdbc = schemes[i].jdbc;
            break;
        }
    }
    if (p == NULL) {
        util_set_cause(cause, "not a MySQL URL: want "
                        "jdbc:mysql://host:port/db or "
                        "mysql://user:pass@host:port/db");
        return -1;
    }
    end = url + len;
    for (const char *c = url; c < end; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f || *c == '#') {
            util_set_cause(cause, "MySQL URL contains a space, control "
                            "character or '#'");
            return -1;
        }

    /* authority = [userinfo@]host[:port], up to the first '/' or '?' */
    auth_end = p + strcspn(p, "/?");
    path = *auth_end == '/' ? auth_end + 1 : NULL;
    at = NULL;
    for (const char *c = p; c < auth_end; c++)
        if (*c == '@')
            at = c;
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *ue = colon != NULL ? colon : at;
        if (ue == p) {
            util_set_cause(cause, "empty user name in MySQL URL");
            goto error;
        }
        if ((t->user = url_decode(p, (size_t)(ue - p), USER_MAX, "user",
                                  cause)) == NULL)
            goto error;
        if (colon != NULL &&
            (t->password = url_decode(colon + 1, (size_t)(at - colon - 1),
                                      PASSWORD_MAX, "password", cause)) ==
                NULL)
            goto error;
        p = at + 1;
    }
    if (url_host_port(p, auth_end, t, cause) == -1)
        goto error;

    /* /database[?query] */
    if (path == NULL) {
        util_set_cause(cause, "MySQL URL names no database (want .../db)");
        goto error;
    }
    q = strchr(path, '?');
    db_end = q != NULL ? q : end;
    if (db_end == path) {
        util_set_cause(cause, "MySQL URL names no database (want .../db)");
        goto error;
    }
    if (memchr(path, '/', (size_t)(db_end - path)) != NULL) {
        util_set_cause(cause, "junk after the database name in MySQL URL");
        goto error;
    }
    if ((t->database = url_decode(path, (size_t)(db_end - path), DATABASE_MAX,
                                  "database", cause)) == NULL)
        goto error;
    if (q != NULL && url_query(q + 1, end, jdbc, t, cause) == -1)
        goto error;

    if (t->host == NULL) {
        if (t->socket == NULL) {
            util_set_cause(cause, "MySQL URL names no host");
            goto error;
        }
        t->host = xstrdup("localhost");
    }
    return 0;

error:
    db_mysql_target_free(t);
    return -1;
}
