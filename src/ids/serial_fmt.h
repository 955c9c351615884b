/* serial_fmt.h: the text of business serial numbers: time patterns, reset
 * periods and the fixed-width number, with no I/O and no state.
 *
 * A serial is <prefix><time><worker><sequence>, e.g. PAY20261123143005000123
 * (prefix PAY, time yyyyMMddHHmmss, no worker, 6 sequence digits). The time
 * pattern is made of the tokens yyyy, yy, MM, dd, HH, mm, ss and SSS
 * (Java SimpleDateFormat's letters), each at most once, nothing else.
 *
 * Thread-safety: every function is pure.
 */
#ifndef LEAFD_SERIAL_FMT_H
#define LEAFD_SERIAL_FMT_H

#include <stddef.h>
#include <stdint.h>

#include "tzone.h"

#define SERIAL_PATTERN_MAX 32      /* bytes of a pattern */
#define SERIAL_TOKENS_MAX  8

enum serial_token {
    SERIAL_T_YEAR4, SERIAL_T_YEAR2, SERIAL_T_MONTH, SERIAL_T_DAY,
    SERIAL_T_HOUR, SERIAL_T_MINUTE, SERIAL_T_SECOND, SERIAL_T_MILLI
};

struct serial_pattern {
    int               ntokens;
    enum serial_token tokens[SERIAL_TOKENS_MAX];
    int               width;       /* characters it prints */
};

enum serial_reset {
    SERIAL_RESET_NEVER, SERIAL_RESET_DAY, SERIAL_RESET_MONTH, SERIAL_RESET_YEAR
};

/* Parse a pattern (may be empty: no time part). 0, or -1 with *cause
 * naming the offending character or the repeated token. */
int  serial_pattern_parse(const char *s, size_t len, struct serial_pattern *p,
                          char **cause);
/* Does the pattern print every field that names a period of this reset (a
 * day: year, month and day)? A serial whose sequence restarts each day but
 * whose text has no day would repeat. 1 or 0. */
int  serial_pattern_covers(const struct serial_pattern *p,
                           enum serial_reset reset);
/* Does it print every field down to the millisecond (yyyy or yy, MM, dd,
 * HH, mm, ss, SSS)? */
int  serial_pattern_has_ms(const struct serial_pattern *p);
/* Does it print the year as yy (which repeats every 100 years)? */
int  serial_pattern_has_yy(const struct serial_pattern *p);
/* Write the time at out (p->width bytes, no NUL); returns the end. */
char *serial_pattern_format(const struct serial_pattern *p,
                            const struct tzone_tm *tm, char *out);

/* The digits each character of the printed time can be: out[k] has bit d
 * set when character k may be the digit d (p->width entries). Returns
 * p->width. */
int  serial_pattern_digits(const struct serial_pattern *p, uint16_t *out);
/* The pattern in a row key: its tokens in order, each as a lower-case name
 * of which none is the start of another ("yyyyMMdd": "y4mod"), so that two
 * names are equal, with or without regard to case, exactly when the
 * patterns are. out: SERIAL_TOKENS_MAX * 2 + 1 bytes. */
#define SERIAL_PATTERN_NAME_MAX (SERIAL_TOKENS_MAX * 2)
void serial_pattern_name(const struct serial_pattern *p, char *out);
/* The pattern of a name serial_pattern_name made (len bytes, lower case).
 * 0, or -1 when it is not one. */
int  serial_pattern_from_name(const char *name, size_t len,
                              struct serial_pattern *p);
/* The period as the pattern prints it, in a row key: year (as yyyy or yy
 * print it), month, day as far as the reset goes ("20261123", "2611",
 * "2026"), "all" for never. out: >= 9 bytes. */
void serial_period_text(const struct serial_pattern *p, enum serial_reset r,
                        const struct tzone_tm *tm, char *out);

/* "day", "month", "year", "never". 0 or -1. */
int  serial_reset_parse(const char *s, enum serial_reset *r);
const char *serial_reset_name(enum serial_reset r);
/* The period's key: "20261123" (day), "202611" (month), "2026" (year), ""
 * (never), NUL-terminated in out (>= 9 bytes). */
void serial_period_key(enum serial_reset r, const struct tzone_tm *tm,
                       char *out);

/* v zero-padded to exactly digits (1..19) characters at out (no NUL);
 * returns the end. v must be below 10^digits. */
char *serial_pad(char *out, uint64_t v, int digits);
/* 10^digits - 1: the largest number that many digits hold. */
uint64_t serial_digits_max(int digits);
/* The digits max has (1 for 0): the width that holds 0..max. */
int      serial_digits_of(uint64_t max);

#endif
