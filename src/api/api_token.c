/* api_token.c: the tokens a request needs: admin.token for the operator
 * pages, and with auth.tokens_file a token for the biz_tag, @snowflake or
 * serial code an ID request asks for (auth.c holds the file). Each check
 * answers 400/401/403 itself and returns 1 when it did.
 */
#include <string.h>
#include <strings.h>

#include "api_handlers.h"
#include "auth.h"
#include "config.h"
#include "http.h"
#include "util.h"

/* Admin pages need the admin token when one is set. Returns 1 if answered. */
int
api_admin_denied(struct api *a, struct http_conn *c, const struct http_msg *m, enum route r)
{
    const char *tok;
    size_t len;

    if (a->cfg->admin_token[0] == '\0')
        return 0;
    tok = (m->authorization != NULL && m->authorization_len > 7 &&
           strncasecmp(m->authorization, "Bearer ", 7) == 0)
              ? m->authorization + 7 : NULL;
    len = tok ? m->authorization_len - 7 : 0;
    if (tok == NULL) {
        api_reply_error(c, r, 401, "unauthorized", "WWW-Authenticate: Bearer\r\n",
                        "this page needs Authorization: Bearer <admin.token>");
        return 1;
    }
    if (!auth_equal(tok, len, a->cfg->admin_token, strlen(a->cfg->admin_token))) {
        api_reply_error(c, r, 403, "forbidden", NULL, "wrong admin token");
        return 1;
    }
    return 0;
}

/* ID endpoints need a token for scope when a tokens file is set. Returns 1
 * if answered. */
static int
id_denied(struct api *a, struct http_conn *c, const struct http_msg *m,
          enum route r, const char *scope)
{
    char buf[AUTH_TOKEN_MAX];
    const char *tok;
    size_t len = 0;
    int rc;

    if (a->auth == NULL)
        return 0;
    if (auth_request_token(m, buf, sizeof buf, &tok, &len) == -1) {
        api_reply_error(c, r, 400, "repeated_parameter", NULL,
                        "token is given more than once");
        return 1;
    }
    if (tok == NULL && http_conn_peer_name(c) != NULL)
        rc = auth_check_cert(a->auth, scope, http_conn_peer_name(c));
    else
        rc = auth_check(a->auth, scope, tok, len);
    if (rc == 401)
        api_reply_error(c, r, 401, "token_required", "WWW-Authenticate: Bearer\r\n",
                        "this endpoint needs a token: Authorization: Bearer <token> or ?token=");
    else if (rc == 403)
        api_reply_error(c, r, 403, "token_forbidden", NULL,
                        "the token is not valid for %s", scope);
    return rc != 0;
}

int
api_id_denied(struct api *a, struct http_conn *c, const struct http_request *req,
              enum route r, const char *scope)
{
    if (req->retry || req->timed_out)
        return 0;
    return id_denied(a, c, &req->msg, r, scope);
}


/* Does the request lack the token its row's scope needs? Returns 1 after
 * answering (checked on a request's first call only). */
int
api_scope_denied(struct api *a, struct http_conn *c, const struct http_request *req,
             enum route r, const char *rest, size_t rlen)
{
    char scope[TAG_MAX + 1];

    if (req->retry || req->timed_out)
        return 0;
    switch (api_routes[r].scope) {
    case SC_TAG:
        /* A tag that does not decode is the handler's 400, not a 401. */
        return a->auth != NULL &&
               api_tag_arg(NULL, r, rest, rlen, API_TAG_PATH, scope) >= 0 &&
               id_denied(a, c, &req->msg, r, scope);
    case SC_SNOWFLAKE:
        return id_denied(a, c, &req->msg, r, "@snowflake");
    case SC_NONE:
        break;
    }
    return 0;
}
