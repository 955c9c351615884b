/* ulid.h: ULIDs (github.com/ulid/spec): generation, text form, decoding.
 *
 * 128 bits: a 48-bit Unix ms timestamp and 80 random bits, written as 26
 * characters of Crockford's base32 (the first holds only 3 bits, so the
 * largest ULID is 7ZZZZZZZZZZZZZZZZZZZZZZZZZ). Generation is monotonic: see
 * the DESIGN comment in ulid.c.
 *
 * Ownership: ulid_gen_new returns a generator freed with ulid_gen_free (NULL
 * is a no-op). *cause strings are malloc'd; the caller frees them.
 * Thread-safety: ulid_next may be called from any number of threads at once
 * (a short mutex per call, not per ULID); the other functions are pure.
 */
#ifndef LEAFD_ULID_H
#define LEAFD_ULID_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define ULID_TEXT_LEN 26
#define ULID_MAX_MS   ((INT64_C(1) << 48) - 1)

struct ulid {
    uint8_t b[16];                   /* big-endian: ms (6 bytes), random (10) */
};

struct ulid_gen;

typedef int64_t (*ulid_clock_fn)(void *arg);      /* Unix ms */

/* clock NULL: CLOCK_REALTIME. */
struct ulid_gen *ulid_gen_new(ulid_clock_fn clock, void *clock_arg);
void ulid_gen_free(struct ulid_gen *g);

/* n ULIDs into out, each greater than every ULID this generator issued
 * before. 0, or -1 when the kernel gives no random bytes or the clock is
 * outside 48 bits (nothing issued then). */
int  ulid_next(struct ulid_gen *g, size_t n, struct ulid *out);

/* 26 characters of upper-case Crockford base32, no NUL. */
void ulid_format(const struct ulid *u, char *out);

/* Decode 26 characters. Lower case is accepted, and so are the aliases
 * I, i, L, l (for 1) and O, o (for 0), as Crockford's base32 defines them.
 * Returns 0, or -1 with *cause: wrong length, a character outside the
 * alphabet (and where), or a value above 7ZZZZZZZZZZZZZZZZZZZZZZZZZ. */
int  ulid_parse(const char *s, size_t len, struct ulid *u, char **cause);

/* {"ulid":"...","timestamp":ms,"time":"...","randomness":"<20 hex digits>"} */
void ulid_decoded_json(const struct ulid *u, struct sbuf *b);
int64_t ulid_timestamp_ms(const struct ulid *u);

/* --- for tests only: nothing in src/ calls these --------------------- */

/* Set the state as if the last ULID had been (last_ms, rnd[10]). */
void ulid_gen_force(struct ulid_gen *g, int64_t last_ms, const uint8_t *rnd);

#endif
