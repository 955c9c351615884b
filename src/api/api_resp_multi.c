/* api_resp_multi.c: Redis transactions over the Redis protocol: MULTI,
 * EXEC, DISCARD, and WATCH/UNWATCH.
 *
 * DESIGN
 *
 * After MULTI, each command is checked as it arrives and answered +QUEUED,
 * or with its error (unknown command, arity, and for the ID commands their
 * arguments, mode and token: everything that does not need the database),
 * which marks the transaction aborted: EXEC then answers -EXECABORT and runs
 * nothing, so no ID is taken. A queued command is copied into the
 * connection's queue (its row of the command table and its arguments),
 * since the input buffer it came in is reused.
 *
 * EXEC runs the queue in order, each command with leafd's own handler, and
 * answers one array of their answers; an error of one command at run time
 * (IDS_EXHAUSTED, UNKNOWN_BIZ_TAG ...) is its element, as in Redis. While a
 * queued command runs (or is checked after MULTI), the transaction's into
 * is set, and the RESP writers append its answer there instead of sending
 * it (api_resp_capture); it is cleared when the command returns. A command
 * that must wait for a segment parks the EXEC itself (http_park): the
 * handler returns with the queue's position kept in the session, and the
 * retry continues that same command with its own scratch (what it took
 * before parking), then the ones after it. Each command starts with a
 * zeroed scratch and its retry flags cleared only when the one before it
 * has answered, so no command runs twice and none is skipped: an answered
 * command's IDs are in the array, a parked one has taken nothing yet or
 * keeps what it took in its scratch. The commands share the EXEC's start
 * time (req->start_us), so their waits for segments end segment.wait_ms
 * after the EXEC began, as one command's would (past it, api.c parks a
 * command that finds nothing for 1 ms before it refuses). The connection
 * answers in order, so the commands pipelined behind EXEC wait for it.
 *
 * WATCH. A biz_tag has no value a client can read (GET does not exist) and
 * its one change, taking IDs, is atomic on every node, so nothing WATCH
 * protects in Redis can be lost in leafd: WATCH answers OK, remembers
 * nothing, and EXEC never answers the null reply of a failed watch. An
 * optimistic loop (WATCH, MULTI, INCR, EXEC) succeeds on its first try.
 *
 * Limits: API_RESP_MULTI_MAX_COMMANDS queued commands,
 * API_RESP_MULTI_MAX_BYTES of their arguments, API_RESP_MULTI_MAX_IDS IDs
 * asked for, and API_RESP_MULTI_MAX_ANSWER bytes that EXEC's answer may take
 * by the rows' bounds (answer_bound); the command past a limit is an error
 * that aborts the transaction. A transaction that will abort stores no more
 * commands.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_resp_internal.h"
#include "idstr.h"
#include "util.h"

#define API_RESP_MULTI_MAX_COMMANDS 10000
#define API_RESP_MULTI_MAX_BYTES    (1024 * 1024)
#define API_RESP_MULTI_MAX_IDS      100000
#define API_RESP_MULTI_MAX_ANSWER   (16 * 1024 * 1024)
#define API_RESP_ERROR_MAX          640     /* api_reply_resp_error's, the longest */
/* one ID in RESP: the longest bulk string, a prefixed ID string's */
#define API_RESP_ID_MAX             (8 + IDSTR_TEXT_MAX)

struct api_resp_multi {
    size_t      n;                  /* commands queued */
    size_t      bytes;              /* their size in q */
    int64_t     ids;                /* IDs they ask for */
    size_t      answer_max;         /* the most their answers take */
    int         aborted;            /* a command was refused: EXEC aborts */
    int         running;            /* EXEC has begun */
    size_t      next, pos;          /* EXEC: the next command, its offset in q */
    struct sbuf q;                  /* per command: row, argc, (len, bytes)... */
    struct sbuf answer;             /* EXEC: "*n" and the answers so far */
    struct sbuf *into;              /* a command runs: its answer goes here */
    int         answered;           /* ... and it has answered */
};

/* The queue's encoding: the row pointer, then uint32 counts and lengths. */
static void
put_u32(struct sbuf *b, uint32_t v)
{
    sbuf_append(b, (const char *)&v, sizeof v);
}

static uint32_t
get_u32(const char *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof v);
    return v;
}

static size_t
encoded_size(const struct resp_cmd *cmd)
{
    size_t n = sizeof(const struct api_resp_row *) + 4;

    for (size_t i = 0; i < cmd->argc; i++)
        n += 4 + cmd->argl[i];
    return n;
}

static void
encode(struct sbuf *q, const struct api_resp_row *rc, const struct resp_cmd *cmd)
{
    sbuf_append(q, (const char *)&rc, sizeof rc);
    put_u32(q, (uint32_t)cmd->argc);
    for (size_t i = 0; i < cmd->argc; i++) {
        put_u32(q, (uint32_t)cmd->argl[i]);
        sbuf_append(q, cmd->argv[i], cmd->argl[i]);
    }
}

/* The command at q->p + pos into *cmd (pointing into q); returns the
 * offset after it. */
static size_t
decode(const struct sbuf *q, size_t pos, const struct api_resp_row **rc,
       struct resp_cmd *cmd)
{
    const char *p = q->p + pos;

    assert(pos + sizeof *rc + 4 <= q->len);
    memcpy(rc, p, sizeof *rc);
    p += sizeof *rc;
    cmd->argc = get_u32(p);
    cmd->is_inline = 0;
    p += 4;
    assert(cmd->argc >= 1 && cmd->argc <= RESP_ARGS_MAX);
    for (size_t i = 0; i < cmd->argc; i++) {
        cmd->argl[i] = get_u32(p);
        cmd->argv[i] = p + 4;
        p += 4 + cmd->argl[i];
    }
    assert((size_t)(p - q->p) <= q->len);
    return (size_t)(p - q->p);
}

/* The most bytes a queued command's answer takes: an error, or what its
 * row says beyond its arguments (ECHO answers its argument), or its IDs. */
static size_t
answer_bound(const struct api_resp_row *rc, const struct resp_cmd *cmd,
             int64_t ids)
{
    size_t n = API_RESP_ERROR_MAX + (size_t)rc->answer_max +
               (size_t)ids * API_RESP_ID_MAX;

    for (size_t i = 0; i < cmd->argc; i++)
        n += cmd->argl[i];
    return n;
}

static void
multi_free(struct api_resp_multi *m)
{
    if (m == NULL)
        return;
    sbuf_free(&m->q);
    sbuf_free(&m->answer);
    free(m);
}

void
api_resp_session_free(void *session)
{
    struct api_resp_session *sess = session;

    multi_free(sess->multi);
    sess->multi = NULL;
}

int
api_resp_capture(struct http_conn *c, const char *data, size_t len)
{
    struct api_resp_session *sess = http_conn_session(c);
    struct api_resp_multi *m;

    assert(sess != NULL);                   /* a RESP connection's answer */
    m = sess->multi;
    if (m == NULL || m->into == NULL)
        return 0;
    sbuf_append(m->into, data, len);
    m->answered = 1;
    return 1;
}

/* Run rc's fn with its answer captured into *into; 1 if it answered. */
static int
run_captured(struct api_resp_multi *m, const struct api_resp_row *rc,
             struct api_resp_ctx *x, struct sbuf *into)
{
    assert(m->into == NULL);
    m->into = into;
    m->answered = 0;
    rc->fn(x);
    m->into = NULL;
    return m->answered;
}

void
api_resp_multi_refuse(struct api_resp_ctx *x)
{
    if (x->sess->multi != NULL)
        x->sess->multi->aborted = 1;
}

void
api_resp_cmd_multi(struct api_resp_ctx *x)
{
    if (x->sess->multi != NULL) {
        api_resp_reply_error(x, R_RESP, 400, NULL, "ERR MULTI calls can not be nested");
        return;
    }
    x->sess->multi = xcalloc(1, sizeof *x->sess->multi);
    api_resp_reply_str(x, "+OK\r\n");
}

void
api_resp_cmd_discard(struct api_resp_ctx *x)
{
    if (x->sess->multi == NULL) {
        api_resp_reply_error(x, R_RESP, 400, NULL, "ERR DISCARD without MULTI");
        return;
    }
    api_resp_session_free(x->sess);
    api_resp_reply_str(x, "+OK\r\n");
}

void
api_resp_cmd_watch(struct api_resp_ctx *x)
{
    if (x->sess->multi != NULL) {
        api_resp_reply_error(x, R_RESP, 400, NULL,
                             "ERR WATCH inside MULTI is not allowed");
        return;
    }
    api_resp_reply_str(x, "+OK\r\n");
}

void
api_resp_cmd_unwatch(struct api_resp_ctx *x)
{
    api_resp_reply_str(x, "+OK\r\n");
}

void
api_resp_multi_queue(struct api_resp_ctx *x, const struct api_resp_row *rc)
{
    struct api_resp_multi *m = x->sess->multi;
    size_t size = encoded_size(x->cmd), answer;

    assert(m != NULL && !m->running && rc->multi != API_RESP_MNOW);
    if (rc->multi == API_RESP_MREFUSE) {
        m->aborted = 1;
        api_resp_reply_error(x, R_RESP, 400, NULL,
                         "ERR Command not allowed inside a transaction");
        return;
    }
    x->ids = 0;
    if (rc->multi == API_RESP_MCHECK) {
        struct sbuf err = { 0 };
        int refused;

        x->check = 1;
        refused = run_captured(m, rc, x, &err);
        x->check = 0;
        if (refused) {
            /* Counted when it was written: send it as it is. */
            m->aborted = 1;
            http_reply_resp(x->c, err.p, err.len, 0);
            sbuf_free(&err);
            return;
        }
    }
    answer = answer_bound(rc, x->cmd, x->ids);
    if (m->n >= API_RESP_MULTI_MAX_COMMANDS ||
        m->bytes + size > API_RESP_MULTI_MAX_BYTES ||
        m->ids + x->ids > API_RESP_MULTI_MAX_IDS ||
        m->answer_max + answer > API_RESP_MULTI_MAX_ANSWER) {
        m->aborted = 1;
        api_resp_reply_error(x, R_RESP, 400, NULL, "ERR transaction too large: at "
                         "most %d commands, %d bytes of arguments, %d IDs and "
                         "%d bytes of answers (for many IDs use LEAF.SEGMENT "
                         "<biz_tag> <count>, or a pipeline without MULTI)",
                         API_RESP_MULTI_MAX_COMMANDS, API_RESP_MULTI_MAX_BYTES,
                         API_RESP_MULTI_MAX_IDS, API_RESP_MULTI_MAX_ANSWER);
        return;
    }
    if (!m->aborted)
        encode(&m->q, rc, x->cmd);
    m->n++;
    m->bytes += size;
    m->ids += x->ids;
    m->answer_max += answer;
    api_resp_reply_str(x, "+QUEUED\r\n");
}

/* The next command starts afresh (see DESIGN). */
static void
next_command(struct api_resp_multi *m, struct http_request *req, size_t pos)
{
    m->next++;
    m->pos = pos;
    req->retry = 0;
    req->timed_out = 0;
    memset(req->scratch, 0, sizeof req->scratch);
}

void
api_resp_cmd_exec(struct api_resp_ctx *x)
{
    struct api_resp_multi *m = x->sess->multi;
    struct sbuf answer;

    if (m == NULL) {
        api_resp_reply_error(x, R_RESP, 400, NULL, "ERR EXEC without MULTI");
        return;
    }
    if (m->aborted) {
        api_resp_session_free(x->sess);
        api_resp_reply_str(x, "-EXECABORT Transaction discarded because of "
                       "previous errors.\r\n");
        return;
    }
    if (!m->running) {
        m->running = 1;
        sbuf_printf(&m->answer, "*%zu\r\n", m->n);
    }
    while (m->next < m->n) {
        const struct api_resp_row *rc;
        struct resp_cmd cmd;
        size_t end = decode(&m->q, m->pos, &rc, &cmd);
        struct api_resp_ctx y = *x;

        y.cmd = &cmd;
        if (!run_captured(m, rc, &y, &m->answer))
            return;             /* parked: the retry goes on from here */
        next_command(m, x->req, end);
    }
    answer = m->answer;
    m->answer = (struct sbuf){ 0 };
    api_resp_session_free(x->sess);
    api_resp_reply_sbuf(x, &answer);
}
