/* tzone.h: IANA time zones read from the system's TZif files, without TZ or
 * localtime(3).
 *
 * Serial numbers print local time in a zone of their own and reset at local
 * period boundaries (day, month, year). localtime_r serves one zone per
 * process (the TZ variable), so this module reads /usr/share/zoneinfo/<name>
 * (RFC 8536 TZif, version 2 or later, with the POSIX TZ footer for instants
 * after the last transition) and answers for any number of zones at once.
 *
 * Ownership: tzone_load / tzone_parse return a zone freed with tzone_free
 * (NULL is a no-op). *cause strings are malloc'd; the caller frees them.
 * Thread-safety: a loaded zone is read-only; every query may run on any
 * thread at once.
 */
#ifndef LEAFD_TZONE_H
#define LEAFD_TZONE_H

#include <stddef.h>
#include <stdint.h>

#define TZONE_NAME_MAX 64
#define TZONE_FILE_MAX (256 * 1024)

struct tzone;

/* Local calendar fields. */
struct tzone_tm {
    int year;             /* e.g. 2026 */
    int month;            /* 1..12 */
    int day;              /* 1..31 */
    int hour, min, sec;
    int ms;
    int utoff;            /* seconds east of UTC in force */
};

/* "UTC" (also "Etc/UTC", "Z") needs no file. Other names: 1..TZONE_NAME_MAX
 * bytes of [A-Za-z0-9_+-/], no "." component, read from $TZDIR or
 * /usr/share/zoneinfo. NULL with *cause (unknown zone, unreadable or bad
 * file, a zone with leap seconds). */
struct tzone *tzone_load(const char *name, char **cause);
/* Parse a TZif image (for tests and the fuzzer). */
struct tzone *tzone_parse(const unsigned char *data, size_t len,
                          const char *name, char **cause);
void tzone_free(struct tzone *z);
const char *tzone_name(const struct tzone *z);

/* Seconds east of UTC at unix second t. */
int  tzone_utoff(const struct tzone *z, int64_t t);
/* Local fields of unix ms. */
void tzone_local(const struct tzone *z, int64_t unix_ms, struct tzone_tm *tm);

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
int64_t tzone_days_from_civil(int64_t y, int m, int d);
void    tzone_civil_from_days(int64_t days, int64_t *y, int *m, int *d);

#endif
