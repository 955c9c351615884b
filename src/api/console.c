/* console.c: serves the web console compiled into leafd (see console.h).
 *
 * Headers: every answer carries a Content-Security-Policy that allows only
 * this origin's scripts, styles and fetches (no inline script or style, no
 * other origin), X-Content-Type-Options: nosniff and no Referer. The page
 * itself is "no-cache" (always revalidated, so a new build shows at once);
 * the assets it links have a content hash in their names and are cached for
 * a year as immutable.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "config.h"
#include "console.h"
#include "util.h"

#define CONSOLE_CSP                                                          \
    "Content-Security-Policy: default-src 'none'; script-src 'self'; "       \
    "style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; " \
    "form-action 'none'; frame-ancestors 'none'\r\n"                         \
    "X-Content-Type-Options: nosniff\r\n"                                    \
    "Referrer-Policy: no-referrer\r\n"

static const char hdr_page[] = CONSOLE_CSP "Cache-Control: no-cache\r\n";
static const char hdr_asset[] =
    CONSOLE_CSP "Cache-Control: public, max-age=31536000, immutable\r\n";
static const char hdr_private[] = CONSOLE_CSP "Cache-Control: no-store\r\n";

static void
reply_json_error(struct http_conn *c, int status, const char *code,
                 const char *extra, const char *message)
{
    char body[512];
    int n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":\"%s\"}\n",
                     code, message);

    /* code and message are literals of this file: no escaping needed. */
    if (n < 0 || (size_t)n >= sizeof body)
        n = 0;
    http_reply(c, status, "application/json", extra, body, (size_t)n);
}

/* The admin token check of the other admin pages. Returns 1 if answered. */
static int
console_denied(struct http_conn *c, const struct http_msg *m,
               const struct config *cfg)
{
    const char *tok;
    size_t len;

    if (cfg->admin_token == NULL || cfg->admin_token[0] == '\0')
        return 0;
    tok = (m->authorization != NULL && m->authorization_len > 7 &&
           strncasecmp(m->authorization, "Bearer ", 7) == 0)
              ? m->authorization + 7 : NULL;
    len = tok != NULL ? m->authorization_len - 7 : 0;
    if (tok == NULL) {
        reply_json_error(c, 401, "unauthorized",
                         CONSOLE_CSP "WWW-Authenticate: Bearer\r\n",
                         "this page needs Authorization: Bearer <admin.token>");
        return 1;
    }
    if (!auth_equal(tok, len, cfg->admin_token, strlen(cfg->admin_token))) {
        reply_json_error(c, 403, "forbidden", CONSOLE_CSP, "wrong admin token");
        return 1;
    }
    return 0;
}

/* {"version":"0.1.0","config":"/etc/leafd.conf"|null} */
static void
reply_about(struct http_conn *c, const struct config *cfg)
{
    struct sbuf b = { 0 };

    sbuf_puts(&b, "{\"version\":");
    sbuf_json_str(&b, console_version);
    sbuf_puts(&b, ",\"config\":");
    if (cfg->path != NULL)
        sbuf_json_str(&b, cfg->path);
    else
        sbuf_puts(&b, "null");
    sbuf_printf(&b, ",\"admin_token\":%s}\n",
                cfg->admin_token != NULL && cfg->admin_token[0] != '\0' ? "true"
                                                                        : "false");
    http_reply(c, 200, "application/json", hdr_private, b.p, b.len);
    sbuf_free(&b);
}

static const struct console_asset *
find_asset(const char *name, size_t len)
{
    for (size_t i = 0; i < console_nassets; i++) {
        const struct console_asset *a = &console_assets[i];
        if (strlen(a->name) == len && memcmp(a->name, name, len) == 0)
            return a;
    }
    return NULL;
}

int
console_handle(struct http_conn *c, const struct http_msg *m,
               const struct config *cfg)
{
    static const char prefix[] = "/console/";
    const size_t plen = sizeof prefix - 1;
    const struct console_asset *a;
    const char *name;
    size_t nlen;

    if (m->path_len == 1 && m->path[0] == '/') {
        http_reply(c, 302, "text/plain",
                   CONSOLE_CSP "Location: /console\r\nCache-Control: no-cache\r\n",
                   "see /console\n", 13);
        return 1;
    }
    if (m->path_len == plen - 1 && memcmp(m->path, prefix, plen - 1) == 0) {
        name = "";
        nlen = 0;
    } else if (m->path_len >= plen && memcmp(m->path, prefix, plen) == 0) {
        name = m->path + plen;
        nlen = m->path_len - plen;
    } else {
        return 0;
    }
    if (nlen == 10 && memcmp(name, "about.json", 10) == 0) {
        if (!console_denied(c, m, cfg))
            reply_about(c, cfg);
        return 1;
    }
    a = find_asset(name, nlen);
    if (a == NULL) {
        reply_json_error(c, 404, "not_found", CONSOLE_CSP,
                         "no such console file; open /console");
        return 1;
    }
    http_reply(c, 200, a->content_type, a->name[0] == '\0' ? hdr_page : hdr_asset,
               (const char *)a->data, a->len);
    return 1;
}
