/* api_writer.h: how the API writes its answers, one writer per protocol
 * and format: HTTP text (api_writer_text; api_writer_leaf for Leaf's paths,
 * where one ID is a bare number), HTTP JSON (api_writer_json), RESP (an
 * array of bulk strings, or an integer for INCR), memcached (one VALUE) and
 * gRPC (a reply message). A handler is handed its writer and gives it IDs,
 * texts, a lease or a refusal; it never asks which protocol it serves.
 *
 * Writers run on the request's I/O thread, write into that thread's buffers
 * (api_self), answer with http_reply* and count the answer on route r
 * (api_count). They take no lock. The ids and texts writers allocate
 * nothing, but for gRPC's per-thread buffers, which grow to the largest
 * answer a thread has given and stay; a lease answer over HTTP builds its
 * body in an sbuf.
 */
#ifndef LEAFD_API_WRITER_H
#define LEAFD_API_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "api_internal.h"

struct http_conn;
struct http_request;
struct sbuf;
struct segment_range;

struct api_writer {
    /* n IDs (bit 63 clear; n >= 1). tag: the biz_tag they are of (JSON
     * names it), or NULL. The RESP integer and memcached take one ID. */
    void (*ids)(struct http_conn *c, enum route r, const char *tag,
                const uint64_t *ids, size_t n);
    /* n texts (UUIDs, ULIDs, serials), each ended by '\n', in
     * text[0..len), which the writer may overwrite (never api_self->out).
     * cas: memcached's CAS for the one text it takes. NULL: none. */
    void (*texts)(struct http_conn *c, enum route r, char *text, size_t len,
                  size_t n, uint64_t cas);
    /* A lease of tag: nranges ranges, sorted and disjoint. NULL: none. */
    void (*lease)(struct http_conn *c, const char *tag,
                  const struct segment_range *ranges, int nranges);
    /* A refusal: leafd's HTTP status and error code, and a message;
     * extra: header lines for an HTTP answer, or NULL. */
    void (*error)(struct http_conn *c, enum route r, int status,
                  const char *code, const char *extra, const char *msg);
    /* n segment or snowflake IDs as strings (idstr.h), each ended by '\n'
     * in text[0..len), which the writer may overwrite; tag as for ids;
     * cas: the first ID. NULL: texts writes them (JSON names the tag here,
     * gRPC answers an IdsReply's strings). */
    void (*id_strings)(struct http_conn *c, enum route r, const char *tag,
                       char *text, size_t len, size_t n, uint64_t cas);
};

/* api_writer_http.c, api_writer_resp.c, api_writer_mc.c (memcached's text
 * and binary protocols: api_writer_mcbin.c writes the binary frames),
 * api_writer_grpc.c */
extern const struct api_writer api_writer_text, api_writer_leaf, api_writer_json,
                               api_writer_resp, api_writer_resp_int, api_writer_mc,
                               api_writer_grpc;

/* HTTP (api_writer_http.c): answer and count; an ID route's answer gets
 * Cache-Control: no-store. api_reply_sbuf frees b. */
void api_reply(struct http_conn *c, enum route r, int status, const char *ctype,
               const char *extra, const char *body, size_t len);
void api_reply_sbuf(struct http_conn *c, enum route r, int status,
                    const char *ctype, struct sbuf *b);

/* RESP (api_writer_resp.c): data counted as 200 on route r, or an error
 * "-<CODE> <msg>" counted as status. "$<len>\r\n" and "*<n>\r\n" at p;
 * they return the end. */
void api_reply_resp(struct http_conn *c, enum route r, const char *data,
                    size_t len, int close_after);
void api_reply_resp_error(struct http_conn *c, enum route r, int status,
                          const char *code, const char *msg);
char *api_resp_bulk_head(char *p, size_t len);
char *api_resp_array_head(char *p, size_t n);
/* A RESP answer of c's request while a transaction holds it
 * (api_resp_multi.c): EXEC running a queued command, or MULTI checking one.
 * Returns 1 after appending data to the transaction's buffer (not sent),
 * 0 if the caller sends it. api_reply_resp* call it. */
int  api_resp_capture(struct http_conn *c, const char *data, size_t len);

/* memcached (api_writer_mc.c): "<CLIENT|SERVER>_ERROR <code> <msg>" for
 * c's request (a get's: for the key it names, req->mc_key), counted as
 * status on route r. */
void api_mc_reply_error(struct http_conn *c, enum route r, int status,
                        const char *code, const char *msg);
/* A get's VALUE that is not an ID (cas 0), for the key c's request names,
 * counted as 200 on route r: @decode/<id>'s JSON. At most MC_VALUE_MAX
 * bytes (asserted). */
#define MC_VALUE_MAX 1024
void api_mc_reply_text(struct http_conn *c, enum route r, const char *val,
                       size_t len);
/* memcached's other answers, in the protocol of c's request (text, or
 * binary: req->mc->binary), counted as 200 on R_MEMCACHE (unknown: 400):
 * version's (the version string), stats' (text: "STAT <name> <value>\r\n"
 * lines; END or the binary end frame is added), quit's (closes; a QUITQ
 * or text quit: no answer), noop's (binary only: asserted) and an unknown
 * command's (text: ERROR). */
void api_mc_reply_version(struct http_conn *c, const char *version);
void api_mc_reply_stats(struct http_conn *c, const char *text, size_t len);
void api_mc_reply_quit(struct http_conn *c);
void api_mc_reply_noop(struct http_conn *c);
void api_mc_reply_unknown(struct http_conn *c);
/* The binary protocol (api_writer_mcbin.c): the status of a refusal (the
 * mapping docs/memcache.md gives), the error frame of c's request (a
 * quiet get's "key not found": no answer), a get's value (counted as
 * api_mc_reply_error and the text VALUE are), a frame with val as its
 * value, stats' frames, unknown command's. */
uint16_t api_mcbin_status(int status, const char *code);
void api_mcbin_reply_error(struct http_conn *c, enum route r, int status,
                           const char *code, const char *msg);
void api_mcbin_reply_value(struct http_conn *c, enum route r, const char *val,
                           size_t len, uint64_t cas);
void api_mcbin_reply(struct http_conn *c, const char *val, size_t len, int flags);
void api_mcbin_reply_stats(struct http_conn *c, const char *text, size_t len);
void api_mcbin_reply_unknown(struct http_conn *c);

/* gRPC (api_writer_grpc.c): a packed reply message (OK). */
void api_grpc_reply_msg(struct http_conn *c, enum route r, const uint8_t *msg,
                        size_t len);
/* An I/O thread's gRPC buffers (api_thread.grpc). */
void api_grpc_thread_free(void *bufs);

#endif
