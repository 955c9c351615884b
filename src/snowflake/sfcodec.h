/* sfcodec.h: the snowflake ID layout: check a layout, pack fields into an
 * ID, decode an ID strictly, render it as JSON (leafd's and Leaf's).
 *
 * An ID is, from the high bit down: 0 | timestamp | datacenter | worker |
 * sequence, with the timestamp in ms since the layout's epoch. Defaults are
 * Leaf's: 41 bits of ms since 1288834974657, 10 worker bits, 12 sequence
 * bits, no datacenter bits. (Other ID kinds get their own codec module
 * beside this one.)
 *
 * Ownership: no allocation except the malloc'd *cause strings and
 * sfcodec_layout_describe's result; the caller frees them.
 * sfcodec_layout_set and sfcodec_decode_id never allocate (libleafd-client
 * decodes with them alone: it may not abort on out-of-memory).
 * Failure values: 0 or -1 with *cause.
 * Thread-safety: every function may be called from any thread at once (a
 * layout is read-only once set up).
 */
#ifndef LEAFD_SFCODEC_H
#define LEAFD_SFCODEC_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define SFCODEC_LEAF_EPOCH_MS 1288834974657LL
/* The widths of a layout sum to 63, or to this: IDs below 2^53, which
 * JavaScript's Number holds exactly (snowflake.layout = js53). */
#define SFCODEC_JS53_BITS 53

struct sfcodec_layout {
    int64_t  epoch_ms;
    int      id_bits;             /* the widths' sum: 63, or 53 */
    uint64_t max_id;              /* 2^id_bits - 1 */
    int      timestamp_bits;
    int      datacenter_bits;     /* 0: no datacenter field */
    int      worker_bits;         /* the worker field without the datacenter */
    int      sequence_bits;
    int      worker_shift;        /* = sequence_bits */
    int      datacenter_shift;    /* = sequence_bits + worker_bits */
    int      timestamp_shift;     /* = the three below it */
    uint64_t max_timestamp;       /* highest ms offset from the epoch */
    uint64_t max_datacenter;
    uint64_t max_worker;
    uint64_t max_sequence;
};

/* Set up and check a layout: bits each >= 0 (timestamp, sequence >= 1),
 * summing to 63 or SFCODEC_JS53_BITS; epoch not in the future; the timestamp must not run out
 * within margin_days of now_ms. now_ms < 0 skips the time checks (decoding
 * only). Returns 0 or -1 with *cause. */
int  sfcodec_layout_init(struct sfcodec_layout *l, int64_t epoch_ms,
                         int timestamp_bits, int datacenter_bits,
                         int worker_bits, int sequence_bits, int64_t now_ms,
                         int64_t margin_days, char **cause);
/* What sfcodec_layout_set found. */
enum sfcodec_layout_check {
    SFCODEC_LAYOUT_OK,
    SFCODEC_LAYOUT_BITS_RANGE,      /* a width below its minimum or over 62 */
    SFCODEC_LAYOUT_BITS_SUM,        /* the widths sum to neither 63 nor 53 */
    SFCODEC_LAYOUT_EPOCH_NEGATIVE,
    SFCODEC_LAYOUT_EPOCH_FUTURE,
    SFCODEC_LAYOUT_RAN_OUT,         /* the timestamp ran out before now_ms */
    SFCODEC_LAYOUT_IN_MARGIN,       /* it runs out within margin_days */
};
/* sfcodec_layout_init's checks without the message: sets up *l and
 * returns SFCODEC_LAYOUT_OK, or the first check that failed. */
enum sfcodec_layout_check sfcodec_layout_set(struct sfcodec_layout *l,
                                             int64_t epoch_ms,
                                             int timestamp_bits,
                                             int datacenter_bits,
                                             int worker_bits,
                                             int sequence_bits, int64_t now_ms,
                                             int64_t margin_days);
/* The last ms (since the Unix epoch) the timestamp field can hold. */
int64_t sfcodec_layout_end_ms(const struct sfcodec_layout *l);
/* One line for the start log: bits, epoch, highest worker ID, IDs per ms and
 * the UTC date the timestamp runs out. malloc'd. */
char *sfcodec_layout_describe(const struct sfcodec_layout *l);

struct sfcodec_decoded {
    uint64_t id;
    int64_t  timestamp_ms;        /* since the Unix epoch */
    char     time[32];            /* ISO-8601 UTC with ms */
    uint64_t datacenter_id;       /* 0 when the layout has no datacenter */
    uint64_t worker_id;           /* without the datacenter bits */
    uint64_t sequence;
    int      has_datacenter;
};

/* Parse a decimal ID strictly: digits only, no sign, no space, no leading
 * zero, no overflow, at most the layout's max_id. Returns 0 or -1 with
 * *cause. */
int  sfcodec_decode(const struct sfcodec_layout *l, const char *s, size_t len,
               struct sfcodec_decoded *d, char **cause);
/* The fields of the ID id. Returns 0, or -1 when it is over the layout's
 * max_id (bit 63 set, or a bit at or above 53 in a 53-bit layout). */
int  sfcodec_decode_id(const struct sfcodec_layout *l, uint64_t id,
                       struct sfcodec_decoded *d);
/* {"id":"...","timestamp":ms,"time":"...","worker_id":n,"sequence":n
 *  [,"datacenter_id":n]} appended to b. */
void sfcodec_decoded_json(const struct sfcodec_decoded *d, struct sbuf *b);
/* Leaf's /decodeSnowflakeId answer, every value a string like Leaf's:
 * {"timestamp":"1567733700834(2019-09-06 09:35:00.834)","sequenceId":"3448",
 *  "workerId":"39"}. Like Leaf (SimpleDateFormat) the date is in the local
 * time zone; workerId is the whole worker field (datacenter included), and
 * "datacenterId" is added when the layout splits it. On a bad ID Leaf
 * answers 200 {"errorMsg":"..."}; the caller decides (sfcodec_decode
 * failed). */
void sfcodec_decoded_leaf_json(const struct sfcodec_layout *l,
                               const struct sfcodec_decoded *d,
                               struct sbuf *b);
/* sfcodec_decode, then one of the two renderings (leaf_format: Leaf's)
 * appended to out. 0, or -1 with *cause for a bad ID. */
int  sfcodec_decode_to_json(const struct sfcodec_layout *l, const char *s,
                            size_t len, int leaf_format, struct sbuf *out,
                            char **cause);

/* --- for tests only: nothing in src/ calls these --------------------- */

/* Put the fields together; ts_ms is ms since the Unix epoch. No checks. */
uint64_t sfcodec_pack(const struct sfcodec_layout *l, int64_t ts_ms,
                      uint64_t datacenter, uint64_t worker, uint64_t sequence);

#endif
