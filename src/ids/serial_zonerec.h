/* serial_zonerec.h: the serial zones record that a worker-ID store keeps
 * with each worker ID (serial_zones.h says what it is for): per shape of
 * source = snowflake serials, how far ahead of the record's fence the
 * local times printed under that worker ID may reach. As text:
 * "<shape>:<ahead ms>" entries joined by ',' ("" none), e.g.
 * "serial.ord.y4modhmisms.4.4:32400000" (Asia/Tokyo's UTC+9). Pure (no
 * I/O, no zones), so it is fuzzed alone (fuzz/fuzz_serial_zonerec.c).
 *
 * Ownership: szrec_format returns a malloc'd string.
 * Failure values: szrec_parse -1 with *why (a static string).
 * Thread-safety: no shared state.
 */
#ifndef LEAFD_SERIAL_ZONEREC_H
#define LEAFD_SERIAL_ZONEREC_H

#include <stddef.h>
#include <stdint.h>

#include "serial.h"

#define SZREC_MAX        256        /* entries (the .serial-zones file's) */
/* |ahead| bound: UTC offsets are -12..+14 h, and an entry's ahead never
 * grows past the largest offset it was written with */
#define SZREC_AHEAD_MAX  INT64_C(86400000)
/* below this an entry can no longer gate anyone: every zone's local time
 * of a later ms is past it (UTC-12 is the smallest offset) */
#define SZREC_AHEAD_DEAD INT64_C(-43200000)
/* "<shape>:-86400000," per entry */
#define SZREC_TEXT_MAX   (SZREC_MAX * (SERIAL_ROW_SHAPE_MAX + 10))

struct szrec_entry {
    char    shape[SERIAL_ROW_SHAPE_MAX];   /* [a-z0-9._-], non-empty */
    int64_t ahead_ms;                      /* |ahead_ms| <= SZREC_AHEAD_MAX */
};

/* Parse len bytes of text (at most SZREC_TEXT_MAX; no NUL inside) into e,
 * which holds SZREC_MAX entries: the count (0 for ""), or -1 with *why.
 * A shape given twice is refused. */
int   szrec_parse(const char *text, size_t len, struct szrec_entry *e,
                  const char **why);
/* e's n entries (0..SZREC_MAX, each valid) as text. */
char *szrec_format(const struct szrec_entry *e, int n);

#endif
