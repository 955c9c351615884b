/* api_route.c: the HTTP route table (its rows are api_routes.h's) and the
 * dispatch that matches a request against it: method, query, console,
 * admin pages and their token, ID routes and their token scope, then the
 * row's handler. RESP commands go to api_resp.c's own table.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "api_handlers.h"
#include "config.h"
#include "console.h"
#include "http.h"
#include "snowflake.h"
#include "util.h"

/* ---- the handlers of the rows that are not in api.c ---- */

static void
route_lease(struct api *a, struct http_conn *c, struct http_request *req,
            enum route r, const char *raw, size_t rawlen)
{
    api_lease_handle(a, c, req, raw, rawlen);
}

static void
route_serial(struct api *a, struct http_conn *c, struct http_request *req,
             enum route r, const char *raw, size_t rawlen)
{
    api_serial(a, c, req, raw, rawlen);
}

static void
route_serial_decode(struct api *a, struct http_conn *c, struct http_request *req,
                    enum route r, const char *raw, size_t rawlen)
{
    api_serial_decode(a, c, raw, rawlen);
}

static void
route_segment_reveal(struct api *a, struct http_conn *c, struct http_request *req,
                     enum route r, const char *raw, size_t rawlen)
{
    api_segment_reveal(a, c, raw, rawlen);
}

static void
route_tinyid(struct api *a, struct http_conn *c, struct http_request *req,
             enum route r, const char *op, size_t oplen)
{
    api_tinyid_handle(a, c, req, op, oplen);
}

static void
route_health(struct api *a, struct http_conn *c, struct http_request *req,
             enum route r, const char *rest, size_t rlen)
{
    struct sbuf b = { 0 };
    int status = api_health(a, &b);

    api_reply_sbuf(c, r, status, "application/json", &b);
}

static void
route_metrics(struct api *a, struct http_conn *c, struct http_request *req,
              enum route r, const char *rest, size_t rlen)
{
    api_page_metrics(a, c);
}

static void
route_cache(struct api *a, struct http_conn *c, struct http_request *req,
            enum route r, const char *rest, size_t rlen)
{
    api_page_cache(a, c);
}

static void
route_db(struct api *a, struct http_conn *c, struct http_request *req,
         enum route r, const char *rest, size_t rlen)
{
    api_page_db(a, c, req);
}

static void
route_sf_state(struct api *a, struct http_conn *c, struct http_request *req,
               enum route r, const char *rest, size_t rlen)
{
    api_page_sf_state(a, c);
}

/* ---- the table ---- */

#define API_ROUTE_ROW(id, name, path, flags, scope, fn) \
    [id] = { name, path, flags, scope, fn },
const struct api_route api_routes[R_COUNT] = { API_ROUTES(API_ROUTE_ROW) };
#undef API_ROUTE_ROW

/* Does the path match row rt's pattern? On a match, rest and rlen get what
 * the pattern's '*' stands for (empty for an exact pattern). */
static int
route_match(const struct api_route *rt, const char *path, size_t len,
            const char **rest, size_t *rlen)
{
    const char *star = strchr(rt->path, '*');
    size_t pre, suf;

    if (star == NULL) {
        *rest = path + len;
        *rlen = 0;
        return len == strlen(rt->path) && memcmp(path, rt->path, len) == 0;
    }
    pre = (size_t)(star - rt->path);
    suf = strlen(star + 1);
    if ((rt->flags & RT_BARE) && pre > 0 && len == pre - 1 &&
        memcmp(path, rt->path, len) == 0) {
        *rest = path + len;                 /* "/x" for "/x/<star>" */
        *rlen = 0;
        return 1;
    }
    if (len < pre + suf || memcmp(path, rt->path, pre) != 0 ||
        memcmp(path + len - suf, star + 1, suf) != 0)
        return 0;
    if (suf > 0 && len == pre + suf)
        return 0;                           /* "/x/<star>/y" needs a rest */
    *rest = path + pre;
    *rlen = len - pre - suf;
    return 1;
}

enum route
api_route_find(const char *path, size_t len, const char **rest, size_t *rlen)
{
    for (int r = 0; r < R_COUNT; r++)
        if (api_routes[r].path != NULL &&
            route_match(&api_routes[r], path, len, rest, rlen))
            return (enum route)r;
    *rest = NULL;
    *rlen = 0;
    return R_OTHER;
}

/* ---- dispatch ---- */

static const struct api_writer *
writer_of(const struct http_request *req)
{
    if (req->mc != NULL)
        return &api_writer_mc;
    if (req->proto == HTTP_REQ_GRPC)
        return &api_writer_grpc;
    if (req->proto == HTTP_REQ_RESP)
        return &api_writer_resp;
    return &api_writer_text;
}

static void
dispatch(struct api *a, struct http_conn *c, struct http_request *req, int admin)
{
    const struct http_msg *m = &req->msg;
    const struct api_route *rt;
    const char *rest;
    size_t rlen;
    enum route r;

    /* The writer of the request's protocol, as its front end set it:
     * every refusal of this call is written with it (api_reply_error). */
    assert(api_self != NULL);
    api_self->writer = writer_of(req);
    if (req->proto == HTTP_REQ_GRPC) {
        assert(!admin);
        api_grpc_request(a, c, req);
        return;
    }
    if (req->cmd != NULL) {
        assert(!admin);
        api_resp_command(a, c, req);
        return;
    }
    if (req->mc != NULL) {
        assert(!admin);
        api_mc_command(a, c, req);
        return;
    }
    r = api_route_find(m->path, m->path_len, &rest, &rlen);
    rt = &api_routes[r];
    /* Tinyid's client POSTs (its parameters are in the query). */
    if (!admin && (rt->flags & RT_RAW)) {
        rt->handler(a, c, req, r, rest, rlen);
        return;
    }
    if (m->method != HTTP_GET && m->method != HTTP_HEAD) {
        api_reply_error(c, R_OTHER, 405, "method_not_allowed", "Allow: GET, HEAD\r\n",
                        "only GET and HEAD are served");
        return;
    }
    if (m->query != NULL && !util_query_valid(m->query, m->query_len)) {
        api_reply_error(c, R_OTHER, 400, "bad_query", NULL,
                        "the query string has a malformed %%-escape or a %%00");
        return;
    }
    if ((admin || !a->admin_apart) && console_handle(c, m, a->cfg))
        return;
    if (rt->flags & RT_ADMIN) {
        if (a->admin_apart && !admin) {
            api_reply_error(c, r, 404, "not_found",
                            NULL, "admin pages are served on the admin listener");
            return;
        }
        if (!req->retry && !req->timed_out && api_admin_denied(a, c, m, r))
            return;
        rt->handler(a, c, req, r, rest, rlen);
        return;
    }
    if (admin && !(rt->flags & RT_BOTH)) {
        api_reply_error(c, R_OTHER, 404, "not_found", NULL,
                        "the admin listener serves /health /metrics /cache /db /snowflake/state "
                        "/serial/decode /segment/reveal");
        return;
    }
    if (rt->handler == NULL) {
        api_reply_error(c, R_OTHER, 404, "not_found", NULL,
                        "no such path; try /segment/<biz_tag>, /snowflake, /uuid, /ulid, "
                        "/serial/<code>, /health "
                        "or /metrics");
        return;
    }
    if (api_scope_denied(a, c, req, r, rest, rlen))
        return;
    rt->handler(a, c, req, r, rest, rlen);
}

void
api_handle(struct http_conn *c, struct http_request *req, void *arg)
{
    dispatch(arg, c, req, 0);
}

void
api_handle_admin(struct http_conn *c, struct http_request *req, void *arg)
{
    dispatch(arg, c, req, 1);
}
