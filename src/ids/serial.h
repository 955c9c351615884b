/* serial.h: business serial numbers (GET /serial/<code>): the definitions
 * read from the config file, and the per-code allocator of sequence ranges
 * whose periods (day, month, year) are decided by the database's clock.
 *
 * A serial is <prefix><time><worker><sequence>, e.g. PAY20261123000123.
 * Two sources:
 *  - segment: the sequence comes from one leaf_alloc row per printed shape
 *    and period ("serial.pay.y4mod.0.6:20261123"), created on first use
 *    (store_serial_alloc). Which period a range belongs to is decided by
 *    the database's clock read in the transaction that took it; the
 *    printed time is in that period.
 *  - snowflake: time, worker ID and per-ms sequence of a snowflake ID; no
 *    database (api_serial.c).
 *
 * This module does no I/O after serials_new (which reads the zone files).
 * It asks for loads through the hook (serial_loader.c answers on its own
 * thread) and is told each range through serial_install (the loader retries
 * a failed load itself: this module is not told of failures).
 *
 * Thread-safety: every function may be called from any thread. Each code
 * has a mutex (held for a few comparisons per take; serial numbers are not
 * the hot path segment mode is). The definitions are read-only after
 * serials_new.
 */
#ifndef LEAFD_SERIAL_H
#define LEAFD_SERIAL_H

#include <stddef.h>
#include <stdint.h>

#include "serial_fmt.h"
#include "tzone.h"

struct config;
struct sbuf;
struct serials;
struct serial_code;

#define SERIAL_CODE_MAX   32        /* [A-Za-z0-9_-] */
#define SERIAL_PREFIX_MAX 16        /* [A-Za-z0-9_-] */
#define SERIAL_DIGITS_MAX 18
/* prefix + time (yyyyMMddHHmmssSSS) + worker (<= 7 digits) + sequence */
#define SERIAL_TEXT_MAX   (SERIAL_PREFIX_MAX + 17 + 7 + 19)

enum serial_source { SERIAL_SRC_SEGMENT, SERIAL_SRC_SNOWFLAKE };

struct serial_def {
    char               code[SERIAL_CODE_MAX + 1];
    char               prefix[SERIAL_PREFIX_MAX + 1];
    char               pattern_text[SERIAL_PATTERN_MAX + 1];
    struct serial_pattern pattern;
    struct tzone      *zone;
    enum serial_reset  reset;       /* segment source */
    int                digits;      /* segment source: sequence digits */
    int                worker_id;   /* print the node's worker ID */
    int                worker_digits; /* its width (0: none) */
    enum serial_source source;
    int64_t            step;        /* segment source: IDs per load */
    int                conceal;     /* sequence digits FF1-enciphered */
    uint8_t            key_check[16]; /* conceal: ff1_key_check_value */
};

/* The shape of d's serials, the part of its row keys before the ':':
 * "serial.<prefix in lower case>.<pattern name>.<worker digits>.<digits>"
 * (e.g. "serial.pay.y4mod.0.6"; out holds SERIAL_ROW_SHAPE_MAX bytes). It
 * is what the serials look like, not the code's name, zone or reset, so
 * that two definitions that print the same text share rows. */
#define SERIAL_ROW_SHAPE_MAX (7 + SERIAL_PREFIX_MAX + 1 + SERIAL_PATTERN_NAME_MAX + 6)
void serial_row_shape(const struct serial_def *d, char *out);

/* Concealed codes (serial.<code>.conceal): the FF1 tweak of the period of
 * database time db_ms, NUL-terminated at out (SERIAL_TWEAK_MAX bytes): the
 * ASCII text of the period's row name, "<shape>:<period as printed>" (e.g.
 * "serial.pay.y4mod.0.6:20261128"). The sequence number n of that period
 * is printed as FF1(key, tweak, radix 10, digits) of n's digits-wide
 * decimal string (docs/id-kinds.md, "Hiding volume"). */
#define SERIAL_TWEAK_MAX (SERIAL_ROW_SHAPE_MAX + 16)
void serial_conceal_tweak(const struct serial_def *d, int64_t db_ms, char *out);
/* The same from the period's text (serial_period_text's). */
void serial_tweak_of(const struct serial_def *d, const char *period, char *out);

/* Decoding for support staff: a serial of code i as text (len bytes). Its
 * period's text as the row names it (*period, >= 9 bytes: "20261128") and
 * the sequence counter behind its digits (*n: deciphered when the code is
 * concealed, the digits themselves when not). 0, or -1 with *why (static
 * text) when the text is not a serial of that code (prefix, length, a
 * non-digit, a month or day out of range). */
int  serial_reveal(struct serials *s, size_t i, const char *text, size_t len,
                   char *period, uint64_t *n, const char **why);

struct serial_hooks {
    /* Load a range for code index i (serial_install follows). Called at
     * most once until then. */
    void    (*load)(void *arg, size_t i);
    void     *arg;
    int64_t (*now_us)(void);        /* monotonic; NULL: util_mono_us */
};

/* The definitions of cfg (its serial.<code>.<field> lines; with no config
 * file at all, the built-in 'demo'). Checks every definition: NULL with
 * *cause "file:line: serial.<code>.<field>: reason" (malloc'd). A
 * configuration with no definition gives an empty set, not an error.
 * hooks may be NULL for --check-config. */
struct serials *serials_new(const struct config *cfg,
                            const struct serial_hooks *hooks, char **cause);
void serials_free(struct serials *s);                  /* NULL: no-op */
/* Set the hooks after serials_new (before the first serial_take). */
void serials_set_hooks(struct serials *s, const struct serial_hooks *hooks);

size_t serials_count(const struct serials *s);
/* Does any code use the segment source (needs the loader)? */
int    serials_need_store(const struct serials *s);
const struct serial_def *serials_def(const struct serials *s, size_t i);

/* The code's index, or -1. */
long   serials_find(const struct serials *s, const char *code, size_t len);

enum serial_result {
    SERIAL_OK,
    SERIAL_WAIT,             /* nothing usable yet: a load is asked for */
    SERIAL_EXHAUSTED,        /* the period has fewer than n numbers left */
};

/* Take n (1..step) sequence numbers of code i, all of one period, into
 * seq[], and the time to print with them in *tm (the database's time as
 * this node estimates it, kept inside the period). Segment source only. */
enum serial_result serial_take(struct serials *s, size_t i, int64_t n,
                               uint64_t *seq, struct tzone_tm *tm);

/* The text of one serial at out (no NUL); returns the end. worker < 0:
 * none. worker_digits: the width of the worker field. */
char *serial_format(const struct serial_def *d, const struct tzone_tm *tm,
                    int64_t worker, int worker_digits, uint64_t seq,
                    int seq_digits, char *out);

/* Loader side. The row of code i at database time db_ms, "<shape>:<period
 * as printed>" (e.g. "serial.pay.y4mod.0.6:20261123"), and its floor: the
 * rows whose numbers printed text this row's can repeat, so its next range
 * must start above them (the store_serial_alloc key callback; arg is a
 * struct serial_key_arg). The floor names the rows of the same shape whose
 * period contains this one or lies in it (another reset printed the same
 * dates), and the rows of the key format before this one,
 * "<code>:<yyyyMMdd...>" or "<code>:all", for the same periods. */
struct serial_key_arg {
    struct serials *s;
    size_t          i;
};
struct store_serial_floor;
int  serial_row_name(void *arg, int64_t db_ms, char *tag, size_t cap,
                     struct store_serial_floor *floor);
/* serial_row_name puts the row's mark (store_marks_get: the highest
 * max_id this process got from a load of that row, in segment.marks_file
 * across restarts) in the floor, so that a load below it (the database
 * went back in time) is refused in its transaction; store_serial_alloc
 * raises the mark after each load. */
/* Does a row of the database stand in the way of code i? rows are the
 * serial rows (store_serial_rows). A row of another shape whose serials
 * can be the same text as code i's (serial.h's row key parsed back; the
 * prefix compared without regard to case) and whose period some zone may
 * still print at now_ms (its last day's end at UTC-12 plus an hour; "all"
 * always; yy read as 20yy) is one; so is such a row of a period over
 * whose text code i's pattern reads as a date (or a date it cannot read)
 * not over at now_ms (ddMMyy's 281126 of 2026-11-28 is yyMMdd's
 * 2028-11-26): -1 with *cause (malloc'd) naming the row, the code and
 * what to do. Else 0. */
/* A concealed code's key (or conceal itself, or its reset) differs from
 * the one its period's serials were counted under: the cause starts with
 * this word (the API's 503 error code), and the code is refused until its
 * next period. */
#define SERIAL_KEY_CHANGED "serial_key_changed: "
struct store_row;
int  serial_rows_check(const struct serials *s, size_t i,
                       const struct store_row *rows, size_t n, int64_t now_ms,
                       char **cause);
/* A load that was sent at monotonic sent_us read db_ms in the database and
 * took [max_id - step, max_id) of the row of db_ms's period. */
void serial_install(struct serials *s, size_t i, int64_t db_ms,
                    int64_t sent_us, int64_t max_id, int64_t step);

/* The first ms after t at which the period of t ends (INT64_MAX for
 * never). Exposed for tests. */
int64_t serial_period_end(const struct tzone *z, enum serial_reset r,
                          int64_t t);

/* Segment-source codes holding no number right now (for /health); *first
 * is set to the first such code's name. */
size_t serials_dry(struct serials *s, const char **first);

/* Counters (any thread). */
void serial_count_issued(struct serials *s, size_t i, int64_t n);
void serial_count_refused(struct serials *s, size_t i);

/* Prometheus text (leafd_serial_*) into b. */
void serials_metrics(struct serials *s, struct sbuf *b);

#endif
