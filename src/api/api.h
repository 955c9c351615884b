/* api.h: leafd's API: the one handler the front end (http.h) calls for
 * every request of every listener. It serves the ID kinds (segment,
 * snowflake, UUIDv7, ULID, serials, leases, Tinyid's routes) over HTTP/1.1,
 * HTTP/2, RESP, memcached and gRPC, and the operator pages (health,
 * metrics, cache, db, snowflake state) and the web console over HTTP.
 *
 * Inside, calls go one way: api_route.c's dispatch takes the request's
 * protocol and route (the table in api_routes.h; RESP commands in
 * api_resp.c, memcached's in api_memcache.c, gRPC methods in api_grpc.c),
 * the handlers (api.c, api_lease.c, api_serial.c, api_tinyid.c,
 * api_pages.c) read the request (api_reply.c) and take the IDs, and the
 * writer of the request's protocol writes the answer (api_writer_*.c). The
 * headers say the same: api_internal.h, api_writer.h, api_reply.h,
 * api_handlers.h, each including the one before.
 *
 * api_handle is the http_handler_cb; it runs on I/O threads and never blocks:
 * a request that must wait for a segment is parked (http_park) and answered
 * when the loader wakes it or its wait runs out.
 *
 * The HTTP ID routes (/segment/<tag>, /api/segment/get/<tag>, /snowflake,
 * /api/snowflake/get/<key>, /uuid, /ulid, /serial/<code>, the lease) answer
 * HEAD with 405 and take nothing, and every answer on them carries
 * Cache-Control: no-store. A query parameter given twice, or a malformed
 * %-escape anywhere in the query, is a 400.
 */
#ifndef LEAFD_API_H
#define LEAFD_API_H

#include <stddef.h>
#include <stdint.h>

#include "http.h"

struct config;
struct loader;
struct sbuf;
struct segments;
struct snowflake;

struct api;

/* segs/loader are NULL when segment mode is off; sf when snowflake is off.
 * nthreads is the number of I/O threads (per-thread counters). */
struct api *api_new(const struct config *cfg, struct segments *segs,
                    struct loader *loader, struct snowflake *sf, int nthreads);
void api_free(struct api *a);

struct auth;

/* The public listener's handler and thread hook, and the admin listener's. */
void api_handle(struct http_conn *c, struct http_request *req, void *arg);
void api_thread(int index, int starting, void *arg);
void api_handle_admin(struct http_conn *c, struct http_request *req, void *arg);
void api_thread_admin(int index, int starting, void *arg);

/* What a RESP connection's session holds beyond its bytes (a transaction's
 * queue), freed at close: the http_config's resp_session_free. */
void api_resp_session_free(void *session);

/* Snowflake mode starts after the HTTP port is bound: set it before the
 * server starts. */
void api_set_snowflake(struct api *a, struct snowflake *sf);
/* Per-tag tokens (owned by the api from now on; NULL: open) and whether the
 * admin pages have their own listener. */
void api_set_auth(struct api *a, struct auth *auth, int admin_apart);

/* Serial numbers (serial.h; set before the server starts; NULL: none). */
struct serials;
struct serial_loader;
void api_set_serials(struct api *a, struct serials *s, struct serial_loader *l);
/* The serial zone gate of snowflake serials (serial_zones.h), or NULL. */
struct serial_zgate;
void api_set_serial_zgate(struct api *a, struct serial_zgate *g);

/* Concealed segment tags (conceal.h; set before the server starts; NULL:
 * none). */
struct conceal;
void api_set_conceal(struct api *a, struct conceal *c);

/* The server, for its stats on /metrics (set once after http_server_new). */
void api_set_server(struct api *a, struct http_server *s);

/* Wake keys (http_park/http_wake): a segment request parks under the key of
 * its biz_tag, a snowflake request under API_SNOWFLAKE_KEY, a /db request
 * under API_DB_KEY (woken by http_wake_all). */
uint64_t api_segment_key(const char *tag, size_t len);
/* A /serial/<code> request waiting for a range parks under this key. */
uint64_t api_serial_key(const char *code, size_t len);
#define API_SNOWFLAKE_KEY UINT64_C(0x5f5f736e6f77666c)
#define API_DB_KEY        UINT64_C(0x5f5f64625f5f5f5f)

/* Build the /health answer; returns the HTTP status (200 or 503). */
int  api_health(struct api *a, struct sbuf *b);

#endif
