/* sfcodec.c: the snowflake ID layout: checking it, packing, decoding and
 * rendering IDs (see sfcodec.h). Pure: no clock of its own, no I/O, no
 * threads; the decode fuzzer links it alone.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sfcodec.h"
#include "util.h"

/* --- layout ------------------------------------------------------------ */

enum sfcodec_layout_check
sfcodec_layout_set(struct sfcodec_layout *l, int64_t epoch_ms,
                   int timestamp_bits, int datacenter_bits, int worker_bits,
                   int sequence_bits, int64_t now_ms, int64_t margin_days)
{
    int64_t end;

    memset(l, 0, sizeof *l);
    l->id_bits = 63;
    if (timestamp_bits < 1 || sequence_bits < 1 || worker_bits < 0 ||
        datacenter_bits < 0 || timestamp_bits > 62 || sequence_bits > 62 ||
        worker_bits > 62 || datacenter_bits > 62)
        return SFCODEC_LAYOUT_BITS_RANGE;
    l->id_bits = timestamp_bits + datacenter_bits + worker_bits + sequence_bits;
    if (l->id_bits != 63 && l->id_bits != SFCODEC_JS53_BITS)
        return SFCODEC_LAYOUT_BITS_SUM;
    if (epoch_ms < 0)
        return SFCODEC_LAYOUT_EPOCH_NEGATIVE;
    l->epoch_ms = epoch_ms;
    l->max_id = (UINT64_C(1) << l->id_bits) - 1;
    l->timestamp_bits = timestamp_bits;
    l->datacenter_bits = datacenter_bits;
    l->worker_bits = worker_bits;
    l->sequence_bits = sequence_bits;
    l->worker_shift = sequence_bits;
    l->datacenter_shift = sequence_bits + worker_bits;
    l->timestamp_shift = sequence_bits + worker_bits + datacenter_bits;
    l->max_timestamp = (UINT64_C(1) << timestamp_bits) - 1;
    l->max_datacenter = (UINT64_C(1) << datacenter_bits) - 1;
    l->max_worker = (UINT64_C(1) << worker_bits) - 1;
    l->max_sequence = (UINT64_C(1) << sequence_bits) - 1;

    if (now_ms < 0)
        return SFCODEC_LAYOUT_OK;
    end = sfcodec_layout_end_ms(l);
    if (epoch_ms > now_ms)
        return SFCODEC_LAYOUT_EPOCH_FUTURE;
    if (end <= now_ms)
        return SFCODEC_LAYOUT_RAN_OUT;
    if (margin_days > 0 && (end - now_ms) / 86400000 < margin_days)
        return SFCODEC_LAYOUT_IN_MARGIN;
    return SFCODEC_LAYOUT_OK;
}

int
sfcodec_layout_init(struct sfcodec_layout *l, int64_t epoch_ms,
                    int timestamp_bits, int datacenter_bits, int worker_bits,
                    int sequence_bits, int64_t now_ms, int64_t margin_days,
                    char **cause)
{
    char date[40];

    switch (sfcodec_layout_set(l, epoch_ms, timestamp_bits, datacenter_bits,
                               worker_bits, sequence_bits, now_ms,
                               margin_days)) {
    case SFCODEC_LAYOUT_OK:
        return 0;
    case SFCODEC_LAYOUT_BITS_RANGE:
        *cause = xasprintf("snowflake layout: bits out of range (timestamp "
                           "%d, datacenter %d, worker %d, sequence %d; "
                           "timestamp and sequence need at least 1)",
                           timestamp_bits, datacenter_bits, worker_bits,
                           sequence_bits);
        return -1;
    case SFCODEC_LAYOUT_BITS_SUM:
        *cause = xasprintf("snowflake layout: timestamp %d + datacenter %d + "
                           "worker %d + sequence %d bits = %d, must be 63 "
                           "(or 53: IDs below 2^53)",
                           timestamp_bits, datacenter_bits, worker_bits,
                           sequence_bits, timestamp_bits + datacenter_bits +
                           worker_bits + sequence_bits);
        return -1;
    case SFCODEC_LAYOUT_EPOCH_NEGATIVE:
        *cause = xasprintf("snowflake layout: epoch %" PRId64 " is negative",
                           epoch_ms);
        return -1;
    case SFCODEC_LAYOUT_EPOCH_FUTURE:
        *cause = xasprintf("snowflake layout: epoch %" PRId64 " is in the "
                           "future (now %" PRId64 ")", epoch_ms, now_ms);
        return -1;
    case SFCODEC_LAYOUT_RAN_OUT:
        util_format_utc_ms(sfcodec_layout_end_ms(l), date, sizeof date);
        *cause = xasprintf("snowflake layout: the %d-bit timestamp from epoch "
                           "%" PRId64 " ran out on %s", timestamp_bits,
                           epoch_ms, date);
        return -1;
    case SFCODEC_LAYOUT_IN_MARGIN:
        util_format_utc_ms(sfcodec_layout_end_ms(l), date, sizeof date);
        *cause = xasprintf("snowflake layout: the %d-bit timestamp from epoch "
                           "%" PRId64 " runs out on %s, within the %" PRId64
                           "-day margin (snowflake.expiry_margin_days); use "
                           "more timestamp bits or a later epoch",
                           timestamp_bits, epoch_ms, date, margin_days);
        return -1;
    }
    assert(!"sfcodec_layout_set: unknown result");
    return -1;
}

int64_t
sfcodec_layout_end_ms(const struct sfcodec_layout *l)
{
    return l->epoch_ms + (int64_t)l->max_timestamp;
}

char *
sfcodec_layout_describe(const struct sfcodec_layout *l)
{
    char epoch[40], end[40];

    util_format_utc_ms(l->epoch_ms, epoch, sizeof epoch);
    util_format_utc_ms(sfcodec_layout_end_ms(l), end, sizeof end);
    if (l->datacenter_bits > 0)
        return xasprintf("snowflake layout: %d timestamp + %d datacenter + %d "
                         "worker + %d sequence bits, epoch %" PRId64 " (%s); "
                         "datacenter IDs 0..%" PRIu64 ", worker IDs 0..%"
                         PRIu64 ", %" PRIu64 " IDs per ms per worker; the "
                         "timestamp runs out %s",
                         l->timestamp_bits, l->datacenter_bits,
                         l->worker_bits, l->sequence_bits, l->epoch_ms, epoch,
                         l->max_datacenter, l->max_worker,
                         l->max_sequence + 1, end);
    return xasprintf("snowflake layout: %d timestamp + %d worker + %d "
                     "sequence bits, epoch %" PRId64 " (%s); worker IDs 0..%"
                     PRIu64 ", %" PRIu64 " IDs per ms per worker; the "
                     "timestamp runs out %s",
                     l->timestamp_bits, l->worker_bits, l->sequence_bits,
                     l->epoch_ms, epoch, l->max_worker, l->max_sequence + 1,
                     end);
}

uint64_t
sfcodec_pack(const struct sfcodec_layout *l, int64_t ts_ms, uint64_t datacenter,
        uint64_t worker, uint64_t sequence)
{
    return ((uint64_t)(ts_ms - l->epoch_ms) << l->timestamp_shift) |
           (datacenter << l->datacenter_shift) |
           (worker << l->worker_shift) | sequence;
}

/* --- decoding ---------------------------------------------------------- */

int
sfcodec_decode(const struct sfcodec_layout *l, const char *s, size_t len,
          struct sfcodec_decoded *d, char **cause)
{
    uint64_t v;

    memset(d, 0, sizeof *d);
    if (len == 0) {
        *cause = xstrdup("empty ID");
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            *cause = xstrdup("an ID is a non-negative decimal number");
            return -1;
        }
    }
    if (len > 1 && s[0] == '0') {
        *cause = xstrdup("an ID has no leading zeros");
        return -1;
    }
    if (util_parse_u64(s, len, &v) == -1) {
        *cause = xstrdup("ID out of range (over 2^64)");
        return -1;
    }
    if (sfcodec_decode_id(l, v, d) == -1) {
        *cause = l->id_bits == 63 ? xstrdup("not an ID: bit 63 is set") :
                 xasprintf("not an ID of this layout: its IDs are below 2^%d",
                           l->id_bits);
        return -1;
    }
    return 0;
}

int
sfcodec_decode_id(const struct sfcodec_layout *l, uint64_t v,
                  struct sfcodec_decoded *d)
{
    memset(d, 0, sizeof *d);
    if (v > (uint64_t)INT64_MAX || v > l->max_id)
        return -1;
    d->id = v;
    d->timestamp_ms = (int64_t)(v >> l->timestamp_shift) + l->epoch_ms;
    d->datacenter_id = (v >> l->datacenter_shift) & l->max_datacenter;
    d->worker_id = (v >> l->worker_shift) & l->max_worker;
    d->sequence = v & l->max_sequence;
    d->has_datacenter = l->datacenter_bits > 0;
    util_format_utc_ms(d->timestamp_ms, d->time, sizeof d->time);
    return 0;
}

void
sfcodec_decoded_json(const struct sfcodec_decoded *d, struct sbuf *b)
{
    sbuf_printf(b, "{\"id\":\"%" PRIu64 "\",\"timestamp\":%" PRId64
                ",\"time\":\"%s\",\"worker_id\":%" PRIu64 ",\"sequence\":%"
                PRIu64, d->id, d->timestamp_ms, d->time, d->worker_id,
                d->sequence);
    if (d->has_datacenter)
        sbuf_printf(b, ",\"datacenter_id\":%" PRIu64, d->datacenter_id);
    sbuf_puts(b, "}");
}

void
sfcodec_decoded_leaf_json(const struct sfcodec_layout *l,
                          const struct sfcodec_decoded *d, struct sbuf *b)
{
    char local[40];
    uint64_t field = (d->datacenter_id << l->worker_bits) | d->worker_id;

    util_format_local_ms(d->timestamp_ms, local, sizeof local);
    sbuf_printf(b, "{\"timestamp\":\"%" PRId64 "(%s)\",\"sequenceId\":\"%"
                PRIu64 "\",\"workerId\":\"%" PRIu64 "\"", d->timestamp_ms,
                local, d->sequence, field);
    if (d->has_datacenter)
        sbuf_printf(b, ",\"datacenterId\":\"%" PRIu64 "\"", d->datacenter_id);
    sbuf_puts(b, "}");
}

int
sfcodec_decode_to_json(const struct sfcodec_layout *l, const char *s,
                       size_t len, int leaf_format, struct sbuf *out,
                       char **cause)
{
    struct sfcodec_decoded d;

    if (sfcodec_decode(l, s, len, &d, cause) == -1)
        return -1;
    if (leaf_format)
        sfcodec_decoded_leaf_json(l, &d, out);
    else
        sfcodec_decoded_json(&d, out);
    return 0;
}
