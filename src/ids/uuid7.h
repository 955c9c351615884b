/* uuid7.h: UUID version 7 (RFC 9562 §5.7): generation, text form, decoding.
 *
 * Layout (128 bits, big-endian), leafd's choice within §5.7 and §6.2:
 *   unix_ts_ms 48 | ver 4 (0111) | counter 42 (12 in rand_a, 30 in rand_b) |
 *   var 2 (10, inside the counter's octet) | random 32
 * The counter is §6.2 method 1 (fixed-length dedicated counter bits); the 32
 * low bits are fresh CSPRNG bytes for every UUID. See the DESIGN comment in
 * uuid7.c for what is guaranteed.
 *
 * Ownership: uuid7_gen_new returns a generator freed with uuid7_gen_free
 * (NULL is a no-op). *cause strings are malloc'd; the caller frees them.
 * Thread-safety: uuid7_next may be called from any number of threads at once
 * (a short mutex per call, not per UUID); the other functions are pure.
 */
#ifndef LEAFD_UUID7_H
#define LEAFD_UUID7_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define UUID7_TEXT_LEN     36          /* 8-4-4-4-12 */
#define UUID7_COUNTER_BITS 42
#define UUID7_MAX_MS       ((INT64_C(1) << 48) - 1)

struct uuid7 {
    uint8_t b[16];
};

struct uuid7_gen;

typedef int64_t (*uuid7_clock_fn)(void *arg);     /* Unix ms */

/* clock NULL: CLOCK_REALTIME. */
struct uuid7_gen *uuid7_gen_new(uuid7_clock_fn clock, void *clock_arg);
void uuid7_gen_free(struct uuid7_gen *g);

/* n UUIDs into out, strictly increasing (as bytes, and so as text) after
 * every UUID this generator issued before. 0, or -1 when the kernel gives no
 * random bytes or the clock is outside 48 bits (then nothing was issued). */
int  uuid7_next(struct uuid7_gen *g, size_t n, struct uuid7 *out);

/* Lowercase canonical text, 36 characters, no NUL. */
void uuid7_format(const struct uuid7 *u, char *out);

/* Any RFC 9562 UUID in its 8-4-4-4-12 hex form (either case). Returns 0, or
 * -1 with *cause saying what is wrong (length, a hyphen, a non-hex digit). */
int  uuid7_parse(const char *s, size_t len, struct uuid7 *u, char **cause);

struct uuid7_decoded {
    int      version;               /* bits 48..51 */
    const char *variant;            /* "rfc9562", "ncs", "microsoft", "future" */
    int      is_v7;                 /* version 7 with the RFC variant */
    int64_t  timestamp_ms;          /* v7 only */
    char     time[32];              /* ISO-8601 UTC with ms; v7 only */
    uint64_t counter;               /* v7: leafd's 42-bit counter field */
    uint32_t random;                /* v7: the 32 low bits */
};
void uuid7_decode(const struct uuid7 *u, struct uuid7_decoded *d);
/* {"uuid":"...","version":7,"variant":"rfc9562","timestamp":ms,"time":"..",
 *  "counter":n,"random":n} (timestamp..random only for v7). */
void uuid7_decoded_json(const struct uuid7 *u, const struct uuid7_decoded *d,
                        struct sbuf *b);

/* --- for tests only: nothing in src/ calls these --------------------- */

/* Set the generator's state as if it had just issued (ms, counter). */
void uuid7_gen_force(struct uuid7_gen *g, int64_t last_ms, uint64_t counter);

#endif
