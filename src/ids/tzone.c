/* tzone.c: TZif (RFC 8536) reader and POSIX TZ rule evaluator. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tzone.h"
#include "util.h"

#define TZ_MAX_TIMES 4096
#define TZ_MAX_TYPES 256

/* One end of daylight time in a POSIX TZ rule. */
struct tz_rule {
    char kind;            /* 'J' (1..365, no Feb 29), 'D' (0..365), 'M' */
    int  day;             /* J/D: the day; M: weekday 0..6 (Sunday 0) */
    int  week;            /* M: 1..5 (5 = last) */
    int  month;           /* M: 1..12 */
    int  secs;            /* local time of the change, -167h..167h */
};

struct tzone {
    char     name[TZONE_NAME_MAX + 1];
    size_t   ntimes;
    int64_t *times;       /* transition instants, increasing */
    uint8_t *idx;         /* type after each transition */
    size_t   ntypes;
    int32_t  utoff[TZ_MAX_TYPES];
    /* The footer: used after the last transition (and with no table). */
    int      has_footer;
    int32_t  std_off;     /* seconds east of UTC */
    int32_t  dst_off;
    int      has_dst;
    struct tz_rule start, end;
};

/* --- calendar ---------------------------------------------------------- */

/* Howard Hinnant's days_from_civil / civil_from_days algorithms. */
int64_t
tzone_days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void
tzone_civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    int64_t era, doe, yoe, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int
is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int64_t
floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* --- the POSIX TZ footer ----------------------------------------------- */

/* Unix second at which rule r takes effect in year y, given the offset in
 * force just before it. */
static int64_t
rule_instant(const struct tz_rule *r, int64_t y, int32_t off_before)
{
    int64_t days;

    if (r->kind == 'J') {
        days = tzone_days_from_civil(y, 1, 1) + r->day - 1;
        if (is_leap(y) && r->day >= 60)
            days++;
    } else if (r->kind == 'D') {
        days = tzone_days_from_civil(y, 1, 1) + r->day;
    } else {
        static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        int64_t first = tzone_days_from_civil(y, r->month, 1);
        int wd = (int)((first % 7 + 7 + 4) % 7);      /* 1970-01-01: Thursday */
        int dom = 1 + (r->day - wd + 7) % 7 + 7 * (r->week - 1);
        int len = mdays[r->month - 1] + (r->month == 2 && is_leap(y));

        while (dom > len)
            dom -= 7;
        days = first + dom - 1;
    }
    return days * 86400 + r->secs - off_before;
}

static int32_t
footer_utoff(const struct tzone *z, int64_t t)
{
    int64_t y, s, e;
    int m, d;

    if (!z->has_dst)
        return z->std_off;
    tzone_civil_from_days(floor_div(t + z->std_off, 86400), &y, &m, &d);
    s = rule_instant(&z->start, y, z->std_off);
    e = rule_instant(&z->end, y, z->dst_off);
    if (s < e)
        return t >= s && t < e ? z->dst_off : z->std_off;
    /* Southern hemisphere: daylight time spans the new year. */
    return t >= e && t < s ? z->std_off : z->dst_off;
}

/* [+-]hh[:mm[:ss]] into seconds; hours up to max_h. Returns the end. */
static const char *
parse_hms(const char *p, int max_h, int *out)
{
    int sign = 1, h = 0, m = 0, s = 0, n;

    if (*p == '+' || *p == '-')
        sign = *p++ == '-' ? -1 : 1;
    for (n = 0; *p >= '0' && *p <= '9' && n < 3; n++)
        h = h * 10 + (*p++ - '0');
    if (n == 0 || h > max_h)
        return NULL;
    if (*p == ':') {
        p++;
        if (!(p[0] >= '0' && p[0] <= '5' && p[1] >= '0' && p[1] <= '9'))
            return NULL;
        m = (p[0] - '0') * 10 + (p[1] - '0');
        p += 2;
        if (*p == ':') {
            p++;
            if (!(p[0] >= '0' && p[0] <= '5' && p[1] >= '0' && p[1] <= '9'))
                return NULL;
            s = (p[0] - '0') * 10 + (p[1] - '0');
            p += 2;
        }
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return p;
}

/* A zone abbreviation: 3+ letters, or <...> of [A-Za-z0-9+-]. */
static const char *
parse_abbr(const char *p)
{
    const char *q = p;

    if (*p == '<') {
        for (q = p + 1; (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
                        (*q >= '0' && *q <= '9') || *q == '+' || *q == '-'; q++)
            ;
        return *q == '>' && q - p >= 4 ? q + 1 : NULL;
    }
    while ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z'))
        q++;
    return q - p >= 3 ? q : NULL;
}

static const char *
parse_rule(const char *p, struct tz_rule *r)
{
    int n = 0, k;

    memset(r, 0, sizeof *r);
    r->secs = 7200;
    if (*p == 'J' || (*p >= '0' && *p <= '9')) {
        r->kind = *p == 'J' ? 'J' : 'D';
        if (*p == 'J')
            p++;
        for (k = 0; *p >= '0' && *p <= '9' && k < 3; k++)
            n = n * 10 + (*p++ - '0');
        if (k == 0 || (r->kind == 'J' && (n < 1 || n > 365)) || n > 365)
            return NULL;
        r->day = n;
    } else if (*p == 'M') {
        int v[3] = { 0, 0, 0 };

        p++;
        for (int i = 0; i < 3; i++) {
            if (i > 0 && *p++ != '.')
                return NULL;
            for (k = 0; *p >= '0' && *p <= '9' && k < 2; k++)
                v[i] = v[i] * 10 + (*p++ - '0');
            if (k == 0)
                return NULL;
        }
        if (v[0] < 1 || v[0] > 12 || v[1] < 1 || v[1] > 5 || v[2] > 6)
            return NULL;
        r->kind = 'M';
        r->month = v[0];
        r->week = v[1];
        r->day = v[2];
    } else {
        return NULL;
    }
    if (*p == '/')
        p = parse_hms(p + 1, 167, &r->secs);
    return p;
}

static int
parse_footer(struct tzone *z, const char *s)
{
    const char *p = parse_abbr(s);
    int off;

    if (p == NULL || (p = parse_hms(p, 24, &off)) == NULL)
        return -1;
    z->std_off = -off;
    z->has_footer = 1;
    if (*p == '\0')
        return 0;
    if ((p = parse_abbr(p)) == NULL)
        return -1;
    z->has_dst = 1;
    z->dst_off = z->std_off + 3600;
    if (*p != ',' && *p != '\0') {
        if ((p = parse_hms(p, 24, &off)) == NULL)
            return -1;
        z->dst_off = -off;
    }
    if (*p != ',')
        return -1;                   /* no rule: refuse rather than guess */
    if ((p = parse_rule(p + 1, &z->start)) == NULL || *p != ',')
        return -1;
    if ((p = parse_rule(p + 1, &z->end)) == NULL || *p != '\0')
        return -1;
    return 0;
}

/* --- TZif -------------------------------------------------------------- */

static uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t
be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

struct tzif_counts {
    uint32_t isut, isstd, leap, time, type, chars;
};

static int
tzif_header(const unsigned char *p, size_t len, struct tzif_counts *c)
{
    if (len < 44 || memcmp(p, "TZif", 4) != 0)
        return -1;
    c->isut = be32(p + 20);
    c->isstd = be32(p + 24);
    c->leap = be32(p + 28);
    c->time = be32(p + 32);
    c->type = be32(p + 36);
    c->chars = be32(p + 40);
    if (c->time > TZ_MAX_TIMES || c->type == 0 || c->type > TZ_MAX_TYPES ||
        c->chars > 1024 || c->leap > 1024 || c->isut > c->type ||
        c->isstd > c->type)
        return -1;
    return 0;
}

static size_t
tzif_block_len(const struct tzif_counts *c, int tsize)
{
    return (size_t)c->time * (size_t)(tsize + 1) + (size_t)c->type * 6 +
           c->chars + (size_t)c->leap * (size_t)(tsize + 4) + c->isstd + c->isut;
}

struct tzone *
tzone_parse(const unsigned char *data, size_t len, const char *name,
            char **cause)
{
    struct tzif_counts c;
    struct tzone *z;
    const unsigned char *p;
    size_t v1, need, i;
    const char *why = "not a TZif file";

    if (tzif_header(data, len, &c) < 0)
        goto err;
    why = "a TZif file of version 1 (leafd needs version 2 or later)";
    if (data[4] < '2')
        goto err;
    v1 = 44 + tzif_block_len(&c, 4);
    why = "a truncated or inconsistent TZif file";
    if (v1 > len || tzif_header(data + v1, len - v1, &c) < 0)
        goto err;
    p = data + v1 + 44;
    need = tzif_block_len(&c, 8);
    if (need > len - v1 - 44)
        goto err;
    why = "a zone with leap seconds (a right/ zone): use the zone without them";
    if (c.leap != 0)
        goto err;

    z = xcalloc(1, sizeof *z);
    snprintf(z->name, sizeof z->name, "%s", name != NULL ? name : "");
    z->ntimes = c.time;
    z->ntypes = c.type;
    z->times = xcalloc(c.time + 1, sizeof *z->times);
    z->idx = xcalloc(c.time + 1, 1);
    for (i = 0; i < c.time; i++) {
        z->times[i] = be64(p + 8 * i);
        if (i > 0 && z->times[i] <= z->times[i - 1]) {
            why = "TZif transitions out of order";
            goto err_z;
        }
    }
    p += 8 * (size_t)c.time;
    for (i = 0; i < c.time; i++) {
        z->idx[i] = p[i];
        if (p[i] >= c.type) {
            why = "a TZif transition names a type that does not exist";
            goto err_z;
        }
    }
    p += c.time;
    for (i = 0; i < c.type; i++) {
        int32_t off = (int32_t)be32(p + 6 * i);

        if (off < -25 * 3600 || off > 26 * 3600) {
            why = "a TZif offset out of range";
            goto err_z;
        }
        z->utoff[i] = off;
    }
    p += 6 * (size_t)c.type + c.chars + c.isstd + c.isut;
    /* The footer: "\n<POSIX TZ>\n". */
    {
        const unsigned char *end = data + len;
        char tz[128];
        size_t n = 0;

        if (p < end && *p == '\n') {
            for (p++; p < end && *p != '\n' && n < sizeof tz - 1; p++)
                tz[n++] = (char)*p;
            tz[n] = '\0';
            if (p >= end || *p != '\n') {
                why = "a TZif footer without its closing newline";
                goto err_z;
            }
            if (n > 0 && parse_footer(z, tz) < 0) {
                why = "a TZif footer that is not a POSIX TZ string leafd reads";
                goto err_z;
            }
        }
    }
    return z;

err_z:
    tzone_free(z);
err:
    if (cause != NULL)
        *cause = xasprintf("time zone %s: %s", name != NULL ? name : "?", why);
    return NULL;
}

static int
name_valid(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > TZONE_NAME_MAX || name[0] == '/')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];

        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
              (ch >= '0' && ch <= '9') || ch == '_' || ch == '+' ||
              ch == '-' || ch == '/'))
            return 0;
    }
    return strstr(name, "//") == NULL && name[n - 1] != '/';
}

struct tzone *
tzone_load(const char *name, char **cause)
{
    const char *dir = getenv("TZDIR");
    unsigned char *buf = NULL;
    struct tzone *z = NULL;
    struct stat st;
    char *path;
    ssize_t got = 0;
    int fd;

    if (strcmp(name, "UTC") == 0 || strcmp(name, "Etc/UTC") == 0 ||
        strcmp(name, "Z") == 0) {
        z = xcalloc(1, sizeof *z);
        snprintf(z->name, sizeof z->name, "UTC");
        z->ntypes = 1;
        return z;
    }
    if (!name_valid(name)) {
        if (cause != NULL)
            *cause = xasprintf("time zone '%.80s': not an IANA zone name "
                               "(like Asia/Shanghai or UTC)", name);
        return NULL;
    }
    path = xasprintf("%s/%s", dir != NULL && dir[0] != '\0' ? dir :
                     "/usr/share/zoneinfo", name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        st.st_size > TZONE_FILE_MAX) {
        if (cause != NULL)
            *cause = xasprintf("time zone '%s': cannot read %s: %s (is the "
                               "tzdata package installed?)", name, path,
                               fd < 0 ? strerror(errno) : "not a zone file");
        goto out;
    }
    buf = xmalloc((size_t)st.st_size + 1);
    while (got < st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)(st.st_size - got));

        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            if (cause != NULL)
                *cause = xasprintf("time zone '%s': cannot read %s", name, path);
            goto out;
        }
        got += r;
    }
    z = tzone_parse(buf, (size_t)got, name, cause);
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    free(path);
    return z;
}

void
tzone_free(struct tzone *z)
{
    if (z == NULL)
        return;
    free(z->times);
    free(z->idx);
    free(z);
}

const char *
tzone_name(const struct tzone *z)
{
    return z->name;
}

int
tzone_utoff(const struct tzone *z, int64_t t)
{
    size_t lo = 0, hi = z->ntimes;

    if (z->ntimes == 0 || t >= z->times[z->ntimes - 1]) {
        if (z->has_footer)
            return footer_utoff(z, t);
        return z->ntimes == 0 ? z->utoff[0] : z->utoff[z->idx[z->ntimes - 1]];
    }
    if (t < z->times[0])
        return z->utoff[0];
    /* The last transition at or before t. */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;

        if (z->times[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    assert(lo < z->ntimes && z->times[lo] <= t);
    return z->utoff[z->idx[lo]];
}

void
tzone_local(const struct tzone *z, int64_t unix_ms, struct tzone_tm *tm)
{
    int64_t s = floor_div(unix_ms, 1000), local, days, y, rem;

    tm->ms = (int)(unix_ms - s * 1000);
    tm->utoff = tzone_utoff(z, s);
    local = s + tm->utoff;
    days = floor_div(local, 86400);
    rem = local - days * 86400;
    tzone_civil_from_days(days, &y, &tm->month, &tm->day);
    tm->year = (int)y;
    tm->hour = (int)(rem / 3600);
    tm->min = (int)(rem / 60 % 60);
    tm->sec = (int)(rem % 60);
}
