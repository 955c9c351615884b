/* auth.c: bearer tokens (see auth.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "http_parse.h"
#include "util.h"

struct auth_entry {
    char   *token;
    size_t  len;
    char  **scopes;
    size_t  nscopes;
    int     all;                    /* scope "*" */
};

struct auth {
    struct auth_entry *e;
    size_t             n;
};

void
auth_free(struct auth *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < a->n; i++) {
        for (size_t j = 0; j < a->e[i].nscopes; j++)
            free(a->e[i].scopes[j]);
        free(a->e[i].scopes);
        free(a->e[i].token);
    }
    free(a->e);
    free(a);
}

size_t
auth_count(const struct auth *a)
{
    return a ? a->n : 0;
}

static int
token_char_ok(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != ',' && c != '&';
}

struct auth *
auth_parse(const char *name, const char *text, char **cause)
{
    struct auth *a = xcalloc(1, sizeof *a);
    const char *p = text;
    int lineno = 0;

    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = xstrndup(p, len), *s = line, *tok, *scopes, *save = NULL;
        struct auth_entry *e;

        lineno++;
        p = nl ? nl + 1 : p + len;
        if (strchr(s, '#'))
            *strchr(s, '#') = '\0';
        tok = strtok_r(s, " \t\r", &save);
        if (tok == NULL) {
            free(line);
            continue;
        }
        scopes = strtok_r(NULL, " \t\r", &save);
        if (scopes == NULL || strtok_r(NULL, " \t\r", &save) != NULL) {
            *cause = xasprintf("%s:%d: expected \"<token> <scope>[,<scope>...]\"",
                               name, lineno);
            goto fail;
        }
        if (strlen(tok) < AUTH_TOKEN_MIN || strlen(tok) > AUTH_TOKEN_MAX) {
            *cause = xasprintf("%s:%d: a token must be %d to %d characters", name,
                               lineno, AUTH_TOKEN_MIN, AUTH_TOKEN_MAX);
            goto fail;
        }
        for (const char *c = tok; *c; c++)
            if (!token_char_ok((unsigned char)*c)) {
                *cause = xasprintf("%s:%d: a token is printable ASCII without "
                                   "spaces, ',' or '&'", name, lineno);
                goto fail;
            }
        a->e = xrealloc(a->e, (a->n + 1) * sizeof *a->e);
        e = &a->e[a->n++];
        memset(e, 0, sizeof *e);
        e->token = xstrdup(tok);
        e->len = strlen(tok);
        for (char *sc = strtok_r(scopes, ",", &save); sc != NULL;
             sc = strtok_r(NULL, ",", &save)) {
            if (strcmp(sc, "*") == 0) {
                e->all = 1;
                continue;
            }
            if (strcmp(sc, "@snowflake") != 0 && !util_tag_valid(sc, strlen(sc)) &&
                !(strncmp(sc, "@serial:", 8) == 0 && util_tag_valid(sc + 8, strlen(sc + 8)))) {
                *cause = xasprintf("%s:%d: \"%.140s\" is not a biz_tag, @snowflake, "
                                   "@serial:<code> or *", name, lineno, sc);
                goto fail;
            }
            e->scopes = xrealloc(e->scopes, (e->nscopes + 1) * sizeof *e->scopes);
            e->scopes[e->nscopes++] = xstrdup(sc);
        }
        free(line);
        continue;
fail:
        free(line);
        auth_free(a);
        return NULL;
    }
    return a;
}

struct auth *
auth_load(const char *path, char **cause)
{
    FILE *f = fopen(path, "r");
    struct sbuf b = { 0 };
    char buf[4096];
    size_t n;
    struct auth *a;

    if (f == NULL) {
        *cause = xasprintf("%s: cannot open tokens file: %s", path, strerror(errno));
        return NULL;
    }
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        sbuf_append(&b, buf, n);
        if (b.len > 4 * 1024 * 1024) {
            fclose(f);
            sbuf_free(&b);
            *cause = xasprintf("%s: tokens file over 4 MiB", path);
            return NULL;
        }
    }
    fclose(f);
    a = auth_parse(path, b.p ? b.p : "", cause);
    sbuf_free(&b);
    return a;
}

int
auth_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    unsigned char d = alen != blen;

    /* Compare over b's length whatever a is, so timing says nothing of a. */
    for (size_t i = 0; i < blen; i++)
        d |= (unsigned char)(a[i < alen ? i : 0] ^ b[i]);
    return d == 0;
}

int
auth_request_token(const struct http_msg *m, char *buf, size_t cap,
                   const char **tok, size_t *len)
{
    const char *v;
    size_t vlen;

    *tok = NULL;
    *len = 0;
    if (m->authorization != NULL && m->authorization_len > 7 &&
        strncasecmp(m->authorization, "Bearer ", 7) == 0) {
        v = m->authorization + 7;
        vlen = m->authorization_len - 7;
        while (vlen > 0 && *v == ' ')
            v++, vlen--;
        *tok = v;
        *len = vlen;
        return 0;
    }
    if (m->query == NULL)
        return 0;
    switch (util_query_param(m->query, m->query_len, "token", buf, cap, &vlen)) {
    case UTIL_QUERY_ABSENT:
        return 0;
    case UTIL_QUERY_FOUND:
        if (vlen > 0) {
            *tok = buf;
            *len = vlen;
        }
        return 0;
    case UTIL_QUERY_REPEATED:
        return -1;
    case UTIL_QUERY_BAD:
        /* Over cap: a token no entry can match. */
        *tok = buf;
        *len = cap + 1;
        return 0;
    }
    return -1;
}

/* A token that names a certificate (auth.h): never a bearer token. */
static int
token_is_cert(const char *token, size_t len)
{
    return len >= sizeof AUTH_CERT_PREFIX - 1 &&
           memcmp(token, AUTH_CERT_PREFIX, sizeof AUTH_CERT_PREFIX - 1) == 0;
}

/* Does some entry with this token allow scope? 0 or 403. */
static int
check_entries(const struct auth *a, const char *scope, const char *token,
              size_t len)
{
    int ok = 0;

    for (size_t i = 0; i < a->n; i++) {
        const struct auth_entry *e = &a->e[i];
        if (!auth_equal(token, len, e->token, e->len))
            continue;
        if (e->all)
            ok = 1;
        for (size_t j = 0; j < e->nscopes; j++)
            if (strcmp(e->scopes[j], scope) == 0)
                ok = 1;
    }
    return ok ? 0 : 403;
}

int
auth_check(const struct auth *a, const char *scope, const char *token, size_t len)
{
    if (token == NULL || len == 0)
        return 401;
    if (len > AUTH_TOKEN_MAX || token_is_cert(token, len))
        return 403;
    return check_entries(a, scope, token, len);
}

int
auth_check_cert(const struct auth *a, const char *scope, const char *name)
{
    char tok[AUTH_TOKEN_MAX + 1];
    int n = snprintf(tok, sizeof tok, "%s%s", AUTH_CERT_PREFIX, name);

    if (n < 0 || (size_t)n >= sizeof tok)
        return 403;
    return check_entries(a, scope, tok, (size_t)n);
}

int
auth_known(const struct auth *a, const char *token, size_t len)
{
    int ok = 0;

    if (len == 0 || len > AUTH_TOKEN_MAX || token_is_cert(token, len))
        return 0;
    for (size_t i = 0; i < a->n; i++)     /* every entry: constant time */
        ok |= auth_equal(token, len, a->e[i].token, a->e[i].len);
    return ok;
}
