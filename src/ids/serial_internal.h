/* serial_internal.h: what serial.c (definitions and the allocator) and
 * serial_rows.c (row names, periods, shapes) share. Not for other modules:
 * they use serial.h. */
#ifndef LEAFD_SERIAL_INTERNAL_H
#define LEAFD_SERIAL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ff1.h"
#include "serial.h"

#define SERIAL_CODES_MAX 64
#define HOUR_MS (3600LL * 1000)
/* Two instants that yy prints alike are 100 years apart: 36524 days at
 * least, less two days for the zone's offsets. 2^41 ms are 69 years. */
#define YY_REPEATS_MS ((36524LL - 2) * 24 * HOUR_MS)
#define YY_BITS_MAX 41
_Static_assert((1LL << YY_BITS_MAX) < YY_REPEATS_MS, "41 bits last < 100 years");

struct serial_range {
    int64_t next, end;                 /* [next, end) */
};

/* Which line set each field (0: the default). */
enum serial_field {
    F_PREFIX, F_PATTERN, F_ZONE, F_RESET, F_DIGITS, F_WORKER_ID, F_SOURCE,
    F_STEP, F_CONCEAL, F_KEY_FILE, F_COUNT
};
static const char *const field_names[F_COUNT] = {
    "prefix", "pattern", "zone", "reset", "digits", "worker_id", "source", "step",
    "conceal", "key_file"
};

struct serial_code {
    struct serial_def def;
    const char       *file;            /* where it was defined, for errors */
    int               line[F_COUNT];
    int               first_line;
    char             *key_path;        /* serial.<code>.key_file (malloc'd) */
    struct ff1_key   *key;             /* conceal: used under lock only */

    pthread_mutex_t   lock;            /* guards everything below */
    int               have;            /* a period is held */
    char              period[16];      /* its key, "20261123" */
    int64_t           end_ms;          /* database time it ends */
    int64_t           db_ms;           /* the last load's database time */
    int64_t           sent_us;         /* and when it was sent (monotonic) */
    int64_t           last_ms;         /* the latest time printed */
    struct serial_range cur, next;
    int               exhausted;       /* the period's row reached the limit */
    int               loading;
    struct ff1_domain dom;             /* conceal: the held period's */

    _Atomic uint64_t  issued, refused, loads, periods;
};

struct serials {
    struct serial_hooks hooks;
    size_t              n;
    int64_t             count_max;
    struct serial_code  codes[SERIAL_CODES_MAX];
};

/* Is s[0, len) 1 to max characters of [A-Za-z0-9_-]? (codes, prefixes) */
int  serial_name_ok(const char *s, size_t len, size_t max);
/* Can a serial of a and one of b be the same text? (1 unless some
 * character always differs: sound, never a false no.) fold: prefixes are
 * compared without regard to case (a row key's prefix is lower case). */
int  serial_shapes_meet(const struct serial_def *a, const struct serial_def *b,
                        int fold);
/* The period key of time t (unix ms) in zone z under reset r
 * (serial_period_key: "20261123", "202611", "2026", "" for never) into key
 * (>= 9 bytes). */
void serial_key_at(const struct tzone *z, enum serial_reset r, int64_t t,
                   char *key);

#endif
