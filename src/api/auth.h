/* auth.h: bearer tokens for leafd's endpoints (off by default).
 *
 * - The admin token guards /db, /cache, /metrics and /snowflake/state.
 * - A tokens file (auth.tokens_file) gives ID endpoints per-biz_tag tokens,
 *   as Tinyid does. Each line: `<token> <scope>[,<scope>...]`, where a scope
 *   is a biz_tag, `@snowflake` for snowflake mode, `@serial:<code>` for
 *   /serial/<code>, or `*` for everything;
 *   `#` starts a comment.
 * - A line whose token is `cert:CN=<name>` gives its scopes to a client
 *   certificate instead: a request on a TLS connection whose handshake
 *   verified a client certificate with subject CN <name> (tls.client_auth,
 *   docs/tls.md), that carries no token, gets them. A bearer token that
 *   starts with `cert:` never matches anything, so no client can claim a
 *   certificate's scopes by sending its name.
 * A request carries its token as `Authorization: Bearer <token>` or
 * `?token=<token>`. Comparisons take constant time; tokens are never logged.
 *
 * An auth is immutable after auth_load and may be read from any thread.
 */
#ifndef LEAFD_AUTH_H
#define LEAFD_AUTH_H

#include <stddef.h>

struct auth;
struct http_msg;

#define AUTH_TOKEN_MIN 8
#define AUTH_TOKEN_MAX 256
#define AUTH_CERT_PREFIX "cert:CN="

/* NULL with *cause (file:line: reason) on error. */
struct auth *auth_load(const char *path, char **cause);
struct auth *auth_parse(const char *name, const char *text, char **cause);
void auth_free(struct auth *a);            /* NULL: no-op */
size_t auth_count(const struct auth *a);

/* The token a request carries (header first, then ?token=, percent-decoded
 * into buf of cap bytes): *tok is NULL when there is none. A ?token= that is
 * malformed or too long reads as a token of cap + 1 bytes (auth_check: 403).
 * Returns 0, or -1 when ?token= comes more than once (answer 400). */
int auth_request_token(const struct http_msg *m, char *buf, size_t cap,
                       const char **tok, size_t *len);

/* 0 if token may use scope, 401 if there is no token, 403 if it is wrong or
 * not allowed for scope. */
int auth_check(const struct auth *a, const char *scope, const char *token,
               size_t len);

/* auth_check for the verified client certificate whose subject CN is name
 * (the line `cert:CN=<name>`): 0 or 403. */
int auth_check_cert(const struct auth *a, const char *scope, const char *name);

/* 1 if some line of the tokens file has this token (any scope), else 0. */
int auth_known(const struct auth *a, const char *token, size_t len);

/* Constant-time equality of two byte strings. */
int auth_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif
