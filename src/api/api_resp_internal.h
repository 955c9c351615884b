/* api_resp_internal.h: what the Redis-protocol files share: the command
 * table and its dispatch (api_resp.c), transactions (api_resp_multi.c) and
 * INFO (api_resp_info.c). Not for other modules: api_handlers.h declares
 * api_resp_command, their one entry point; their answers go through the
 * RESP writer (api_writer_resp.c).
 *
 * Everything here runs on the connection's I/O thread only.
 */
#ifndef LEAFD_API_RESP_INTERNAL_H
#define LEAFD_API_RESP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "api_handlers.h"
#include "auth.h"
#include "http.h"
#include "resp_parse.h"

#define API_RESP_NAME_MAX 128           /* CLIENT SETNAME */

/* The Redis version whose connection-level protocol leafd speaks (INFO's
 * redis_version, HELLO's version): RESP3 and HELLO (6.0), CLIENT INFO (6.2),
 * COMMAND DOCS (7.0), CLIENT SETINFO (7.2), MULTI/EXEC. */
#define API_RESP_REDIS_VERSION "7.2.0"

struct api_resp_multi;

/* Per connection (http_conn_session), zeroed at accept; multi is freed by
 * api_resp_session_free when the connection closes. */
struct api_resp_session {
    unsigned char proto;            /* 0 or 2: RESP2; 3: RESP3 */
    unsigned char admin;            /* AUTH gave the admin token */
    unsigned short token_len;       /* 0: no AUTH yet */
    unsigned short name_len;
    char token[AUTH_TOKEN_MAX];
    char name[API_RESP_NAME_MAX];
    struct api_resp_multi *multi;       /* after MULTI, until EXEC/DISCARD */
};
_Static_assert(sizeof(struct api_resp_session) <= HTTP_SESSION_BYTES,
               "session too large");

/* One command being handled. check: queued after MULTI; the command only
 * checks its arguments (answering their error, if any), takes nothing, and
 * sets ids to the IDs it would ask for. */
struct api_resp_ctx {
    struct api           *a;
    struct http_conn     *c;
    struct http_request  *req;
    const struct resp_cmd *cmd;
    struct api_resp_session  *sess;
    int                   check;
    int64_t               ids;
};

typedef void (*api_resp_cmd_fn)(struct api_resp_ctx *x);

/* What a command does after MULTI. */
enum api_resp_multi_kind {
    API_RESP_MQUEUE,                    /* queued, answered +QUEUED */
    API_RESP_MCHECK,                    /* as QUEUE, after its fn checks (x->check) */
    API_RESP_MNOW,                      /* runs at once (MULTI, EXEC, DISCARD, ...) */
    API_RESP_MREFUSE                    /* not allowed in a transaction */
};

/* One row of the command table: everything about a command. */
struct api_resp_row {
    const char  *name;
    int          arity;             /* Redis's: n exact, -n at least n */
    int          max_args;          /* 0: no upper bound */
    const char  *flags;             /* COMMAND's flags, space-separated */
    int          first_key;
    const char  *group;
    const char  *summary;
    const char  *args;              /* COMMAND DOCS' argument names */
    enum api_resp_multi_kind multi;
    int          answer_max;        /* bytes an answer may take beyond an
                                       error and its arguments (ID commands:
                                       counted by their IDs) */
    api_resp_cmd_fn  fn;
};

/* Answers (api_resp.c). code NULL: a Redis-style error whose message starts
 * with its own word ("ERR ...", "WRONGPASS ..."). */
void api_resp_reply_raw(struct api_resp_ctx *x, const char *s, size_t len);
void api_resp_reply_str(struct api_resp_ctx *x, const char *s);
void api_resp_reply_error(struct api_resp_ctx *x, enum route r, int status,
                      const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void api_resp_reply_sbuf(struct api_resp_ctx *x, struct sbuf *b);   /* frees b */
void api_resp_put_bulk(struct sbuf *b, const char *s, size_t len);
void api_resp_put_str(struct sbuf *b, const char *s);
/* A map of n pairs (RESP3's '%', or an array of 2n); text for humans
 * (RESP3's verbatim string, or a bulk string). */
void api_resp_put_map(struct api_resp_ctx *x, struct sbuf *b, size_t n);
void api_resp_put_text(struct api_resp_ctx *x, struct sbuf *b, const char *s, size_t len);
/* Is argument i s (any case)? Argument i for an error message (printable
 * ASCII, at most 64 bytes). */
int  api_resp_arg_is(const struct resp_cmd *cmd, size_t i, const char *s);
void api_resp_arg_show(const struct resp_cmd *cmd, size_t i, char *out, size_t cap);

/* Transactions (api_resp_multi.c). api_resp_multi_queue answers a command
 * that arrives after MULTI (+QUEUED, or its error, which aborts the
 * transaction); api_resp_multi_refuse marks the transaction aborted after its
 * caller answered an error (unknown command, arity). */
void api_resp_cmd_multi(struct api_resp_ctx *x);
void api_resp_cmd_exec(struct api_resp_ctx *x);
void api_resp_cmd_discard(struct api_resp_ctx *x);
void api_resp_cmd_watch(struct api_resp_ctx *x);
void api_resp_cmd_unwatch(struct api_resp_ctx *x);
void api_resp_multi_queue(struct api_resp_ctx *x, const struct api_resp_row *rc);
void api_resp_multi_refuse(struct api_resp_ctx *x);

/* INFO (api_resp_info.c). */
void api_resp_cmd_info(struct api_resp_ctx *x);

#endif
