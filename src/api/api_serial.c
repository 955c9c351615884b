/* api_serial.c: GET /serial/<code>[?count=N] and the serial part of
 * /health (see serial.h for the two sources and their guarantees).
 *
 * With a tokens file, a request needs a token for scope @serial:<code>.
 * Answers as the other ID routes: {"ids":["PAY20261123000001",...]} in JSON,
 * one per line in text. Errors: 400 invalid_serial_code, 404
 * unknown_serial_code, 503 serial_exhausted (the period's sequence digits
 * are used up), 503 serial_unavailable (no range arrived in time, the
 * database is down, or the worker ID is unknown), and snowflake's own 503s
 * for source = snowflake, and 503 serial_zone_gate (a serial of this
 * worker ID's earlier holders would be printed again: serial_zones.h).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_handlers.h"
#include "config.h"
#include "loader.h"
#include "serial.h"
#include "serial_loader.h"
#include "serial_zones.h"
#include "sfcodec.h"
#include "snowflake.h"
#include "util.h"

#define SERIAL_COUNT_LIMIT 1000            /* serial.count_max's ceiling */

/* The serials of one request, one per line, and snowflake IDs: per I/O
 * thread. */
static _Thread_local char text_buf[SERIAL_COUNT_LIMIT * (SERIAL_TEXT_MAX + 1)];
static _Thread_local uint64_t seq_buf[SERIAL_COUNT_LIMIT];

uint64_t
api_serial_key(const char *code, size_t len)
{
    return api_segment_key(code, len) ^ UINT64_C(0x73657269616c2f2f);
}

static void
reply_unavailable(struct api *a, struct http_conn *c, const char *code)
{
    char err[512], rcode[32];

    if (a->serial_loader != NULL &&
        serial_loader_refusal(a->serial_loader, code, err, sizeof err)) {
        size_t kc = strlen(SERIAL_KEY_CHANGED);

        if (strncmp(err, SERIAL_KEY_CHANGED, kc) == 0)
            api_reply_error(c, R_SERIAL, 503, "serial_key_changed",
                            "Retry-After: 60\r\n", "no serial for code '%s': "
                            "%s", code, err + kc);
        else
            api_reply_error(c, R_SERIAL, 503, "serial_refused",
                            "Retry-After: 60\r\n", "no serial for code '%s': "
                            "%s", code, err);
        return;
    }
    if (a->serial_loader != NULL &&
        serial_loader_store_refusal(a->serial_loader, rcode, sizeof rcode, err,
                                    sizeof err)) {
        api_reply_error(c, R_SERIAL, 503, rcode, "Retry-After: 5\r\n",
                        "no serial for code '%s': loads from the database are "
                        "refused: %s", code, err);
        return;
    }
    if (a->serial_loader != NULL && !serial_loader_db_up(a->serial_loader)) {
        serial_loader_last_error(a->serial_loader, err, sizeof err);
        api_reply_error(c, R_SERIAL, 503, "serial_unavailable", "Retry-After: 1\r\n",
                        "no serial for code '%s': the database is unreachable "
                        "(%s); retry later", code, err);
        return;
    }
    api_reply_error(c, R_SERIAL, 503, "serial_unavailable", "Retry-After: 1\r\n",
                    "no serial for code '%s': its next sequence range did not "
                    "arrive in time; retry later", code);
}

static void
serial_snowflake(struct api *a, struct http_conn *c, struct http_request *req,
                 size_t i, const struct serial_def *d, int64_t n,
                 const struct api_writer *w)
{
    struct api_state *st = (struct api_state *)req->scratch;
    const struct sfcodec_layout *l;
    struct snowflake_refusal why;
    uint64_t wmask;
    int rc, wd, sd;
    char *p = text_buf, *start = text_buf;

    if (a->sf == NULL) {
        api_reply_error(c, R_SERIAL, 503, "serial_unavailable", NULL,
                        "serial code '%s' uses snowflake mode, which is not "
                        "running on this node", d->code);
        return;
    }
    if (n > a->cfg->sf_count_max) {
        api_reply_error(c, R_SERIAL, 400, "invalid_count", NULL,
                        "count must be at most snowflake.count_max (%lld) for "
                        "serial code '%s'", (long long)a->cfg->sf_count_max, d->code);
        return;
    }
    rc = snowflake_next(a->sf, (uint32_t)n, seq_buf, &why);
    if (rc != SNOWFLAKE_OK) {
        char extra[64];

        if (rc == SNOWFLAKE_WAIT &&
            util_mono_us() + why.wait_ms * 1000 <= st->wait.deadline_us) {
            st->wait.to_deadline = 0;
            http_park(c, (int)why.wait_ms, API_SNOWFLAKE_KEY);
            return;
        }
        serial_count_refused(a->serials, i);
        snprintf(extra, sizeof extra, "Retry-After: %d\r\n",
                 why.retry_after_s > 0 ? why.retry_after_s : 1);
        api_reply_error(c, R_SERIAL, 503, why.code, extra, "%s", why.message);
        return;
    }
    l = snowflake_layout(a->sf);
    /* the IDs' timestamps never go back (the sequence may wrap within a
     * millisecond under snowflake.sequence_random), and local time with
     * them (the code's zone never turns its clocks back): the first one
     * decides for all */
    assert(n == 1 || seq_buf[n - 1] >> l->timestamp_shift >=
                     seq_buf[0] >> l->timestamp_shift);
    if (a->serial_zgate != NULL) {
        int64_t ms = (int64_t)(seq_buf[0] >> l->timestamp_shift) + l->epoch_ms;
        char msg[768], extra[64];
        int retry = 1;

        if (!serial_zgate_allows(a->serial_zgate, i, ms, msg, sizeof msg,
                                 &retry)) {
            serial_count_refused(a->serials, i);
            snprintf(extra, sizeof extra, "Retry-After: %d\r\n", retry);
            api_reply_error(c, R_SERIAL, 503, "serial_zone_gate", extra,
                            "%s", msg);
            return;
        }
    }
    wmask = (l->max_datacenter << l->worker_bits) | l->max_worker;
    wd = serial_digits_of(wmask);
    sd = serial_digits_of(l->max_sequence);
    for (int64_t k = 0; k < n; k++) {
        uint64_t id = seq_buf[k];
        int64_t ms = (int64_t)(id >> l->timestamp_shift) + l->epoch_ms;
        struct tzone_tm tm;

        tzone_local(d->zone, ms, &tm);
        p = serial_format(d, &tm, (int64_t)((id >> l->worker_shift) & wmask), wd,
                          id & l->max_sequence, sd, p);
        *p++ = '\n';
    }
    serial_count_issued(a->serials, i, n);
    w->texts(c, R_SERIAL, start, (size_t)(p - start), (size_t)n, 0);
}

void
api_serial(struct api *a, struct http_conn *c, struct http_request *req,
           const char *raw, size_t rawlen)
{
    char code[SERIAL_CODE_MAX + 1];
    int64_t n;
    long len, i;
    const struct api_writer *w;

    len = util_pct_decode(raw, rawlen, code, SERIAL_CODE_MAX);
    if (len >= 0)
        code[len] = '\0';
    if (len <= 0 || strspn(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                           "0123456789_-") < (size_t)len) {
        api_reply_error(c, R_SERIAL, 400, "invalid_serial_code", NULL,
                        "a serial code is 1 to %d characters of [A-Za-z0-9_-]",
                        SERIAL_CODE_MAX);
        return;
    }
    i = serials_find(a->serials, code, (size_t)len);
    if (i < 0) {
        api_reply_error(c, R_SERIAL, 404, "unknown_serial_code", NULL,
                        "no serial definition for code '%s' (serial.%s.* in the "
                        "config file)", code, code);
        return;
    }
    if (a->auth != NULL) {
        char scope[8 + SERIAL_CODE_MAX + 1];

        snprintf(scope, sizeof scope, "@serial:%s", code);
        if (api_id_denied(a, c, req, R_SERIAL, scope))
            return;
    }
    w = api_id_request_start(c, req, R_SERIAL, a->cfg->serial_count_max, &n);
    if (w != NULL)
        api_serve_serial(a, c, req, (size_t)i, n, w);
}

/* n serials of definition i (found, token checked) for a request of any
 * protocol: answer, or park while a range is on its way. */
void
api_serve_serial(struct api *a, struct http_conn *c, struct http_request *req,
                 size_t i, int64_t n, const struct api_writer *w)
{
    struct api_state *st = (struct api_state *)req->scratch;
    const struct serial_def *d = serials_def(a->serials, i);
    const char *code = d->code;
    size_t len = strlen(code);
    struct tzone_tm tm;
    enum serial_result res;
    int64_t worker = -1;
    char *p = text_buf, *start = text_buf;

    assert(n >= 1 && n <= SERIAL_COUNT_LIMIT && w->texts != NULL);
    /* Set here, not left to the helper: the wait of a serial request. */
    if (!req->retry && !req->timed_out)
        st->wait.deadline_us = api_wait_deadline(a, req);
    if (d->source == SERIAL_SRC_SNOWFLAKE) {
        serial_snowflake(a, c, req, i, d, n, w);
        return;
    }
    if (d->worker_id) {
        worker = a->sf != NULL ? snowflake_worker_id(a->sf) : -1;
        if (worker < 0) {
            serial_count_refused(a->serials, i);
            api_reply_error(c, R_SERIAL, 503, "serial_unavailable", "Retry-After: 1\r\n",
                            "serial code '%s' prints the worker ID, and this "
                            "node has none right now", d->code);
            return;
        }
        if ((uint64_t)worker > serial_digits_max(d->worker_digits)) {
            /* Not with the widths serials_new sets; never an abort. */
            serial_count_refused(a->serials, i);
            api_reply_error(c, R_SERIAL, 503, "serial_unavailable", NULL,
                            "serial code '%s' prints the worker ID in %d "
                            "digits, and this node's worker ID %lld has more",
                            d->code, d->worker_digits, (long long)worker);
            return;
        }
    }
    if (req->timed_out) {
        serial_count_refused(a->serials, i);
        reply_unavailable(a, c, d->code);
        return;
    }
    res = serial_take(a->serials, (size_t)i, n, seq_buf, &tm);
    if (res == SERIAL_EXHAUSTED) {
        serial_count_refused(a->serials, i);
        api_reply_error(c, R_SERIAL, 503, "serial_exhausted", "Retry-After: 1\r\n",
                        "serial code '%s' has fewer than %lld of its %d-digit "
                        "sequence numbers left in this %s (at most %llu per %s; "
                        "it never wraps or widens)", d->code, (long long)n,
                        d->digits, serial_reset_name(d->reset),
                        (unsigned long long)serial_digits_max(d->digits),
                        d->reset == SERIAL_RESET_NEVER ? "code" :
                        serial_reset_name(d->reset));
        return;
    }
    if (res == SERIAL_WAIT) {
        int64_t left = st->wait.deadline_us - util_mono_us();

        if (a->serial_loader == NULL || !serial_loader_db_up(a->serial_loader) ||
            left <= 0) {
            serial_count_refused(a->serials, i);
            reply_unavailable(a, c, d->code);
            return;
        }
        st->wait.to_deadline = 1;
        http_park(c, (int)((left + 999) / 1000), api_serial_key(code, len));
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        p = serial_format(d, &tm, worker, d->worker_digits, seq_buf[k],
                          d->digits, p);
        *p++ = '\n';
    }
    serial_count_issued(a->serials, i, n);
    w->texts(c, R_SERIAL, start, (size_t)(p - start), (size_t)n, 0);
}

void
api_serial_decode(struct api *a, struct http_conn *c, const char *raw,
                  size_t rawlen)
{
    char code[SERIAL_CODE_MAX + 1], text[SERIAL_TEXT_MAX + 1], period[16];
    const char *slash = memchr(raw, '/', rawlen), *why = NULL;
    struct sbuf b = { 0 };
    uint64_t n = 0;
    long clen, tlen, i;

    if (api_admin_unset(a, c, R_SERIAL_DECODE, "decoding serials"))
        return;
    clen = slash != NULL ? util_pct_decode(raw, (size_t)(slash - raw), code,
                                           SERIAL_CODE_MAX) : -1;
    tlen = slash != NULL ? util_pct_decode(slash + 1, rawlen - (size_t)(slash - raw) - 1,
                                           text, SERIAL_TEXT_MAX) : -1;
    if (clen <= 0 || tlen <= 0) {
        api_reply_error(c, R_SERIAL_DECODE, 400, "invalid_serial", NULL,
                        "expected /serial/decode/<code>/<serial> (a code of 1 "
                        "to %d characters, a serial of 1 to %d)",
                        SERIAL_CODE_MAX, SERIAL_TEXT_MAX);
        return;
    }
    code[clen] = '\0';
    text[tlen] = '\0';
    i = serials_find(a->serials, code, (size_t)clen);
    if (i < 0) {
        api_reply_error(c, R_SERIAL_DECODE, 404, "unknown_serial_code", NULL,
                        "no serial definition for code '%.*s'", (int)clen,
                        strspn(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                               "qrstuvwxyz0123456789_-") == (size_t)clen ?
                        code : "?");
        return;
    }
    if (serial_reveal(a->serials, (size_t)i, text, (size_t)tlen, period, &n,
                      &why) == -1) {
        api_reply_error(c, R_SERIAL_DECODE, 400, "invalid_serial", NULL,
                        "not a serial of code '%s': %s", code, why);
        return;
    }
    /* text is the prefix ([A-Za-z0-9_-]) and digits: no JSON escapes. */
    sbuf_printf(&b, "{\"code\":\"%s\",\"serial\":\"%s\",\"period\":\"%s\","
                "\"counter\":%llu,\"concealed\":%s}\n", code, text, period,
                (unsigned long long)n,
                serials_def(a->serials, (size_t)i)->conceal ? "true" : "false");
    api_reply_sbuf(c, R_SERIAL_DECODE, 200, "application/json", &b);
}

int
api_serial_health(struct api *a, struct sbuf *b, struct sbuf *reasons)
{
    char err[256];
    const char *first;
    size_t dry;
    int gated;

    if (a->serials == NULL || serials_count(a->serials) == 0) {
        sbuf_puts(b, "\"serial\":{\"codes\":0},");
        return 0;
    }
    sbuf_printf(b, "\"serial\":{\"codes\":%zu", serials_count(a->serials));
    gated = a->serial_zgate != NULL ?
            serial_zgate_json(a->serial_zgate, util_wall_ms(), b) : 0;
    if (gated > 0)
        sbuf_printf(reasons, "serial: %d snowflake code(s) refused until the "
                             "zone gate passes (zone_gates); ", gated);
    if (a->serial_loader == NULL) {
        sbuf_puts(b, "},");
        return gated > 0;
    }
    sbuf_printf(b, ",\"store\":\"%s\",\"db\":\"%s\"",
                serial_loader_store(a->serial_loader),
                serial_loader_db_up(a->serial_loader) ? "up" : "down");
    if (serial_loader_db_up(a->serial_loader)) {
        sbuf_puts(b, "},");
        return gated > 0;
    }
    dry = serials_dry(a->serials, &first);
    serial_loader_last_error(a->serial_loader, err, sizeof err);
    sbuf_printf(b, ",\"codes_without_numbers\":%zu,\"db_error\":", dry);
    sbuf_json_str(b, err);
    sbuf_puts(b, "},");
    if (dry > 0) {
        sbuf_printf(reasons, "serial: database unreachable and %zu code(s) (e.g. "
                             "%s) hold no numbers; ", dry, first);
        return 2;
    }
    sbuf_printf(reasons, "serial: database unreachable, serving held numbers; ");
    return 1;
}
