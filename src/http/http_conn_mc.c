/* http_conn_mc.c: the memcached side of a connection: parse each line of
 * memcached's text protocol (mc_parse.h), or each frame of its binary
 * protocol (mc_bin_parse.h), and hand it to the handler, once per key of a
 * get; skip a storage command's data block (a refused frame's body).
 *
 * The first byte a connection sends picks its protocol for good: 0x80 (the
 * binary request magic) binary, anything else text. A binary frame is a
 * command of the one kind the text parser makes (struct mc_cmd), with one
 * key at most, so everything below serves both; a binary frame that cannot
 * be put in step gets an error frame (or, after a bad magic byte, nothing)
 * and a close.
 *
 * A get's line stays in the input buffer, at in_off, until its last key is
 * handed over (http.h: each key is a call of its own, answered or parked in
 * order); the buffer moves only while no call is active, and the line with
 * it, so its tokens, offsets into the line, stay right. A storage command is
 * answered before its block has arrived; the block is then skipped as it
 * comes (body_left, as an HTTP body), never parsed.
 */
#include <assert.h>
#include <stddef.h>

#include "http.h"
#include "http_internal.h"
#include "log.h"

void
http_conn_process_mc(struct http_conn *c)
{
    struct http_thread *t = c->t;
    struct http_server *s = t->s;
    struct http_mc *mc = c->mc;
    enum mc_parse_result r;
    const char *err;
    size_t avail, used = 0;

    while (!c->req_active && !c->closing) {
        assert(!mc->pending || c->body_left == 0);
        if (http_conn_skip(c) || !http_conn_may_parse(c))
            break;
        avail = c->in_len - c->in_off;
        if (!mc->pending) {
            if (mc->mode == 0)
                mc->mode = (unsigned char)c->in[c->in_off] == MC_BIN_REQ_MAGIC
                           ? HTTP_MC_BINARY : HTTP_MC_TEXT;
            if (mc->mode == HTTP_MC_BINARY) {
                uint16_t st;

                r = mc_bin_parse(c->in + c->in_off, avail, &s->mc_lim,
                                 &mc->cmd, &used, &st, &err);
                if (r == MC_PARSE_ERROR) {
                    http_out_mc_bin_error(c, st, "bad_request", err);
                    break;
                }
            } else {
                r = mc_parse(c->in + c->in_off, avail, &s->mc_lim, &mc->cmd,
                             &used, &err);
                if (r == MC_PARSE_ERROR) {
                    http_out_error(c, 400, "bad_request", err);
                    break;
                }
            }
            if (r == MC_PARSE_MORE)
                break;
            ctr_add(&t->mc_commands, 1);
            c->req.mc = &mc->cmd;
            c->req.mc_line = c->in + c->in_off;
            c->req.mc_key = 0;
            if (mc->cmd.kind != MC_GET) {
                c->in_off += used;
                c->body_left = mc->cmd.data_len;
                http_conn_start_request(c);
                continue;
            }
            mc->pending = 1;
            mc->key = 0;
            mc->used = used;
        }
        assert(mc->cmd.kind == MC_GET && mc->key < mc->cmd.nkeys);
        c->req.mc = &mc->cmd;
        c->req.mc_line = c->in + c->in_off;
        c->req.mc_key = ++mc->key;
        if (mc->key == mc->cmd.nkeys) {
            c->in_off += mc->used;      /* the last key: the line is done */
            mc->pending = 0;
        }
        http_conn_start_request(c);
    }
}

void
http_reply_mc(struct http_conn *c, const char *data, size_t len, int flags)
{
    struct http_mc *mc = c->mc;

    if (!c->req_active || !c->in_handler || mc == NULL) {
        log_error("http_reply_mc outside the handler of a live memcached call");
        return;
    }
    http_out_append(c, data, len);
    if ((flags & HTTP_MC_END) && mc->pending) {
        c->in_off += mc->used;          /* the line is done with */
        mc->pending = 0;
    }
    /* stopping: close once the command's answer is whole (a get's END) */
    if ((flags & HTTP_MC_CLOSE) || (c->t->stopping && !mc->pending))
        c->closing = 1;
    http_conn_end_request(c);
}
