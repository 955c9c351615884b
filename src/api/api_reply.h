/* api_reply.h: what every handler does to read a request and refuse it
 * (api_reply.c): its ?count= and ?format=, which choose the HTTP writer;
 * its biz_tag; its deadline; and the refusal, written by the writer of the
 * request's protocol. All on the request's I/O thread.
 */
#ifndef LEAFD_API_REPLY_H
#define LEAFD_API_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "api_internal.h"
#include "api_writer.h"
#include "idstr.h"

struct http_msg;

/* Refuse c's request: status, leafd's error code and a message (printf),
 * written by the request's writer (JSON over HTTP, "-CODE msg" over RESP,
 * CLIENT_ERROR/SERVER_ERROR over memcached, a status over gRPC); extra:
 * header lines for an HTTP answer, or NULL. A 503 is also counted by its
 * code (codes_503). */
void api_reply_error(struct http_conn *c, enum route r, int status,
                     const char *code, const char *extra, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* The HTTP writer ?format= or Accept asks for (?format=text wins over
 * Accept): JSON, or text (Leaf's text on an RT_LEAF row). NULL after
 * answering 400. */
const struct api_writer *api_http_writer(struct http_conn *c, enum route r,
                                         const struct http_msg *m);

/* ?enc=dec|base62|base32 of a segment or snowflake request (or a decode
 * route) into *enc (IDSTR_DEC when absent). 0, or -1 after answering 400
 * (invalid_encoding, repeated_parameter). */
int api_enc_param(struct http_conn *c, enum route r, const struct http_msg *m,
                  enum idstr_enc *enc);

/* An HTTP ID request's start: 405 for HEAD, its ?count= (in [1, max]) in
 * *n, and its writer (api_http_writer). NULL after answering 4xx. */
const struct api_writer *api_id_request_start(struct http_conn *c,
                                              struct http_request *req,
                                              enum route r, int64_t max,
                                              int64_t *n);

/* The biz_tag in s (len bytes) of a request, as form says it came: a path
 * part (percent-encoded), a RESP argument or a memcached key (as is).
 * Copies it, decoded and NUL-terminated, to out and returns its length,
 * or -1 when it is not a valid biz_tag (util_tag_valid), after answering
 * 400 invalid_biz_tag on route r; c NULL: without answering. */
enum api_tag_form { API_TAG_PATH, API_TAG_ARG, API_TAG_KEY };
long api_tag_arg(struct http_conn *c, enum route r, const char *s, size_t len,
                 enum api_tag_form form, char out[TAG_MAX + 1]);

/* When a request's wait (segment.wait_ms) ends: from its start, shortened
 * by a gRPC request's grpc-timeout, never lengthened. */
int64_t api_wait_deadline(const struct api *a, const struct http_request *req);

#endif
