/* serial.c: serial number definitions and the per-code allocator of
 * sequence ranges (see serial.h).
 *
 * DESIGN: one clock decides the period, and the row is what is printed.
 *  - A range is taken in a transaction that first reads the database's
 *    clock; the period is that time's, in the code's zone. Every node asks
 *    the same clock, so there is one "today" for the cluster, and a row's
 *    numbers are unique because the row's max_id only grows.
 *  - The row is named after what its serials print, not after the code:
 *    the shape (prefix, pattern, worker and sequence widths) and the period
 *    as the pattern prints it ("serial.pay.y4mod.0.6:20261123"). A code
 *    renamed, or moved to another zone, prints the same text from the same
 *    row. A new reset prints the same dates from rows of other periods, so
 *    every load starts at or above the rows of the same shape whose period
 *    contains its own or lies in it, and above the rows of the key format
 *    before this one ("PAY:20261123", "PAY:all") for the same dates
 *    (serial_row_name's floor; the store takes the maximum in the load's
 *    transaction); the rows of the format before are raised to the end of
 *    the range taken, so that a node of the version before continues
 *    above it. Two codes whose serials could be the same text are refused
 *    at start (shapes_meet), and so is a code whose text a row of another
 *    shape can print in a period not yet over (serial_rows_check; the
 *    loader asks it at start and before a range of a row it has not
 *    checked is used). Such rows cannot share a floor: the same text is
 *    another sequence number in each shape.
 *  - A node keeps ranges of one period only, and drops them when its
 *    estimate of the database's time passes the period's end. The estimate
 *    is the database time of the last load plus the monotonic time since
 *    that load was SENT, so it runs ahead of the database by the load's
 *    round trip, never behind it (up to monotonic drift): a node switches
 *    a little early, never late. A load that comes back with a later period
 *    replaces the older period's ranges at once.
 *  - The printed time is the estimate kept inside the period (and never
 *    behind what this code printed before), and its period fields are
 *    checked against the row's period, so the date and the sequence always
 *    match. A serial never repeats because its (period, sequence) pair is
 *    unique: a repeated local hour (DST fall-back) prints the same time
 *    with a new sequence number, and a period that comes back (a zone whose
 *    fall-back crosses midnight, a database clock stepped back) continues
 *    its own row.
 *  - The sequence never wraps and never widens: a range is cut at
 *    10^digits - 1 and a period with fewer numbers left than asked for is
 *    refused (SERIAL_EXHAUSTED).
 */
#include <assert.h>
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "serial.h"
#include "store.h"
#include "util.h"

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
    F_STEP, F_COUNT
};
static const char *const field_names[F_COUNT] = {
    "prefix", "pattern", "zone", "reset", "digits", "worker_id", "source", "step"
};

struct serial_code {
    struct serial_def def;
    const char       *file;            /* where it was defined, for errors */
    int               line[F_COUNT];
    int               first_line;

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

    _Atomic uint64_t  issued, refused, loads, periods;
};

struct serials {
    struct serial_hooks hooks;
    size_t              n;
    int64_t             count_max;
    struct serial_code  codes[SERIAL_CODES_MAX];
};

/* ---- definitions ---- */

static int
name_ok(const char *s, size_t len, size_t max)
{
    if (len == 0 || len > max)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

static void
def_defaults(struct serial_code *c, const char *code)
{
    memset(&c->def, 0, sizeof c->def);
    snprintf(c->def.code, sizeof c->def.code, "%s", code);
    snprintf(c->def.pattern_text, sizeof c->def.pattern_text, "yyyyMMdd");
    c->def.reset = SERIAL_RESET_DAY;
    c->def.digits = 6;
    c->def.source = SERIAL_SRC_SEGMENT;
    c->def.step = 1000;
}

/* "file:line: serial.<code>.<field>: " then the reason. */
static char *
def_error(const struct serial_code *c, enum serial_field f, const char *fmt,
          const char *detail)
{
    int line = f < F_COUNT && c->line[f] ? c->line[f] : c->first_line;
    char *why = xasprintf(fmt, detail ? detail : "");
    char *out;

    if (c->file != NULL)
        out = xasprintf("%s:%d: serial.%s.%s: %s", c->file, line, c->def.code,
                        field_names[f], why);
    else
        out = xasprintf("serial.%s.%s: %s", c->def.code, field_names[f], why);
    free(why);
    return out;
}

static int
parse_bool_word(const char *v, int *out)
{
    if (strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
        strcmp(v, "1") == 0)
        *out = 1;
    else if (strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 ||
             strcmp(v, "0") == 0)
        *out = 0;
    else
        return -1;
    return 0;
}

/* Set one field from its text (the pattern and zone are checked later). */
static int
field_set(struct serial_code *c, enum serial_field f, const char *v,
          char **cause)
{
    struct serial_def *d = &c->def;
    int64_t n;

    switch (f) {
    case F_PREFIX:
        if (*v != '\0' && !name_ok(v, strlen(v), SERIAL_PREFIX_MAX)) {
            *cause = def_error(c, f, "\"%s\" is not 0 to 16 characters of "
                               "[A-Za-z0-9_-]", v);
            return -1;
        }
        snprintf(d->prefix, sizeof d->prefix, "%s", v);
        return 0;
    case F_PATTERN:
        if (strlen(v) > SERIAL_PATTERN_MAX) {
            *cause = def_error(c, f, "longer than 32 characters%s", "");
            return -1;
        }
        snprintf(d->pattern_text, sizeof d->pattern_text, "%s", v);
        return 0;
    case F_ZONE:
        return 0;                       /* loaded by def_check */
    case F_RESET:
        if (serial_reset_parse(v, &d->reset) == -1) {
            *cause = def_error(c, f, "\"%s\" is not day, month, year or never", v);
            return -1;
        }
        return 0;
    case F_DIGITS:
        if (util_parse_i64(v, strlen(v), 0, &n) == -1 || n < 1 ||
            n > SERIAL_DIGITS_MAX) {
            *cause = def_error(c, f, "\"%s\" is not an integer from 1 to 18", v);
            return -1;
        }
        d->digits = (int)n;
        return 0;
    case F_WORKER_ID:
        if (parse_bool_word(v, &d->worker_id) == -1) {
            *cause = def_error(c, f, "expected true or false, got \"%s\"", v);
            return -1;
        }
        return 0;
    case F_SOURCE:
        if (strcmp(v, "segment") == 0)
            d->source = SERIAL_SRC_SEGMENT;
        else if (strcmp(v, "snowflake") == 0)
            d->source = SERIAL_SRC_SNOWFLAKE;
        else {
            *cause = def_error(c, f, "\"%s\" is not segment or snowflake", v);
            return -1;
        }
        return 0;
    case F_STEP:
        if (util_parse_i64(v, strlen(v), 0, &n) == -1 || n < 1 ||
            n > 2147483647) {
            *cause = def_error(c, f, "\"%s\" is not an integer from 1 to "
                               "2147483647", v);
            return -1;
        }
        d->step = n;
        return 0;
    case F_COUNT:
        break;
    }
    return -1;
}

/* Does the zone's offset ever fall back between from and to (ms)? Sampled
 * daily: every fall-back in tzdata lasts months. */
static int
zone_falls_back(const struct tzone *z, int64_t from, int64_t to)
{
    int prev = tzone_utoff(z, from / 1000);

    for (int64_t t = from; t < to; t += 24 * HOUR_MS) {
        int off = tzone_utoff(z, t / 1000);

        if (off < prev)
            return 1;
        prev = off;
    }
    return 0;
}

static int
def_check(const struct config *cfg, struct serial_code *c, const char *zone,
          char **cause)
{
    struct serial_def *d = &c->def;
    char *why = NULL;

    d->zone = tzone_load(zone, &why);
    if (d->zone == NULL) {
        *cause = def_error(c, F_ZONE, "%s", why);
        free(why);
        return -1;
    }
    if (serial_pattern_parse(d->pattern_text, strlen(d->pattern_text),
                             &d->pattern, &why) == -1) {
        *cause = def_error(c, F_PATTERN, "%s", why);
        free(why);
        return -1;
    }
    if (d->worker_id && !cfg->snowflake_enable) {
        *cause = def_error(c, F_WORKER_ID, "the node's worker ID needs "
                           "snowflake mode (leaf.snowflake.enable = true)%s", "");
        return -1;
    }
    /* Wide enough for every worker ID the layout has (4 at least). */
    if (d->worker_id) {
        d->worker_digits = serial_digits_of((UINT64_C(1) << cfg->worker_bits) - 1);
        if (d->worker_digits < 4)
            d->worker_digits = 4;
    }
    if (d->source == SERIAL_SRC_SNOWFLAKE) {
        int64_t now = util_wall_ms(), end;

        if (!cfg->snowflake_enable) {
            *cause = def_error(c, F_SOURCE, "source = snowflake needs snowflake "
                               "mode (leaf.snowflake.enable = true)%s", "");
            return -1;
        }
        if (c->line[F_WORKER_ID] && !d->worker_id) {
            *cause = def_error(c, F_WORKER_ID, "source = snowflake always prints "
                               "the worker ID (it is part of what makes it "
                               "unique)%s", "");
            return -1;
        }
        d->worker_id = 1;
        if (!serial_pattern_has_ms(&d->pattern)) {
            *cause = def_error(c, F_PATTERN, "source = snowflake needs every "
                               "field down to the millisecond (e.g. "
                               "yyyyMMddHHmmssSSS), got \"%s\"", d->pattern_text);
            return -1;
        }
        if (c->line[F_RESET] || c->line[F_DIGITS] || c->line[F_STEP]) {
            enum serial_field f = c->line[F_RESET] ? F_RESET :
                                  c->line[F_DIGITS] ? F_DIGITS : F_STEP;
            *cause = def_error(c, f, "not used with source = snowflake (its "
                               "sequence is the snowflake ID's, per ms)%s", "");
            return -1;
        }
        d->reset = SERIAL_RESET_NEVER;
        /* As api_serial.c prints them: datacenter and worker, sequence. */
        d->worker_digits = serial_digits_of((UINT64_C(1) << (cfg->datacenter_bits +
                                                             cfg->worker_bits)) - 1);
        d->digits = serial_digits_of((UINT64_C(1) << cfg->sequence_bits) - 1);
        if (strlen(d->prefix) + (size_t)(d->pattern.width + d->worker_digits +
                                         d->digits) > SERIAL_TEXT_MAX) {
            why = xasprintf("%d", SERIAL_TEXT_MAX);
            *cause = def_error(c, F_SOURCE, "the snowflake layout's worker and "
                               "sequence fields make serials longer than %s "
                               "characters", why);
            free(why);
            return -1;
        }
        /* The time printed must never repeat while the layout lasts. */
        end = cfg->epoch_ms + (int64_t)((1ULL << cfg->timestamp_bits) - 1);
        if (serial_pattern_has_yy(&d->pattern) &&
            end - cfg->epoch_ms >= YY_REPEATS_MS) {
            why = xasprintf("yy repeats every 100 years, and the snowflake "
                            "layout (snowflake.timestamp_bits = %lld) lasts "
                            "%lld years, so a printed time would repeat: use "
                            "yyyy, or at most %d timestamp bits",
                            (long long)cfg->timestamp_bits,
                            (long long)((end - cfg->epoch_ms) /
                                        (36525LL * 24 * HOUR_MS / 100)),
                            YY_BITS_MAX);
            *cause = def_error(c, F_PATTERN, "%s", why);
            free(why);
            return -1;
        }
        if (end > now + 200 * 365 * 24 * HOUR_MS)
            end = now + 200 * 365 * 24 * HOUR_MS;
        if (zone_falls_back(d->zone, now, end)) {
            *cause = def_error(c, F_ZONE, "source = snowflake prints local time, "
                               "and %s turns its clocks back (daylight saving), "
                               "so a printed time would repeat: use UTC or a "
                               "zone without DST", tzone_name(d->zone));
            return -1;
        }
        return 0;
    }
    if (!serial_pattern_covers(&d->pattern, d->reset)) {
        *cause = def_error(c, c->line[F_PATTERN] >= c->line[F_RESET] ? F_PATTERN
                           : F_RESET, "the time pattern \"%s\" does not print "
                           "every field of the reset period, so a sequence that "
                           "restarts would repeat a serial", d->pattern_text);
        return -1;
    }
    if (d->step < cfg->serial_count_max) {
        why = xasprintf("%lld", (long long)cfg->serial_count_max);
        *cause = def_error(c, F_STEP, "must be at least serial.count_max (%s)",
                           why);
        free(why);
        return -1;
    }
    return 0;
}

/* What each character of d's serials can be: lit[k], or when lit[k] is 0,
 * one of the digits whose bits dig[k] has. Returns the length. */
static int
text_shape(const struct serial_def *d, char *lit, uint16_t *dig)
{
    int n = (int)strlen(d->prefix), w;

    assert(n + d->pattern.width + d->worker_digits + d->digits <=
           SERIAL_TEXT_MAX);
    for (int k = 0; k < n; k++) {
        lit[k] = d->prefix[k];
        dig[k] = 0;
    }
    w = serial_pattern_digits(&d->pattern, dig + n);
    memset(lit + n, 0, (size_t)(w + d->worker_digits + d->digits));
    n += w;
    for (int k = 0; k < d->worker_digits + d->digits; k++)
        dig[n++] = 0x3ff;
    return n;
}

/* Can a serial of a and one of b be the same text? (1 unless some
 * character always differs: a sound test, never a false no.) fold: the
 * prefixes' letters are compared without regard to case (b's prefix is a
 * row key's, in lower case). */
static int
shapes_meet(const struct serial_def *a, const struct serial_def *b, int fold)
{
    char la[SERIAL_TEXT_MAX], lb[SERIAL_TEXT_MAX];
    uint16_t da[SERIAL_TEXT_MAX], db[SERIAL_TEXT_MAX];
    int n = text_shape(a, la, da);

    if (text_shape(b, lb, db) != n)
        return 0;
    for (int k = 0; k < n; k++) {
        int meet;

        if (la[k] != 0 && lb[k] != 0)
            meet = la[k] == lb[k] ||
                   (fold && tolower((unsigned char)la[k]) ==
                            tolower((unsigned char)lb[k]));
        else if (la[k] != 0 || lb[k] != 0) {
            char ch = la[k] != 0 ? la[k] : lb[k];
            uint16_t m = la[k] != 0 ? db[k] : da[k];

            meet = ch >= '0' && ch <= '9' && (m & (1u << (ch - '0')));
        } else
            meet = (da[k] & db[k]) != 0;
        if (!meet)
            return 0;
    }
    return 1;
}

static struct serial_code *
code_get(struct serials *s, const char *code, size_t len, const char *file,
         int line, char **cause)
{
    char name[SERIAL_CODE_MAX + 1];

    for (size_t i = 0; i < s->n; i++) {
        struct serial_code *c = &s->codes[i];

        if (strlen(c->def.code) == len && memcmp(c->def.code, code, len) == 0)
            return c;
        if (strlen(c->def.code) == len && strncasecmp(c->def.code, code, len) == 0) {
            *cause = xasprintf("%s:%d: serial code \"%.*s\" differs from \"%s\" "
                               "only in case (their leaf_alloc rows would be "
                               "one row in MySQL)", file, line, (int)len, code,
                               c->def.code);
            return NULL;
        }
    }
    if (s->n == SERIAL_CODES_MAX) {
        *cause = xasprintf("%s:%d: more than %d serial codes", file, line,
                           SERIAL_CODES_MAX);
        return NULL;
    }
    memcpy(name, code, len);
    name[len] = '\0';
    def_defaults(&s->codes[s->n], name);
    s->codes[s->n].file = file;
    s->codes[s->n].first_line = line;
    return &s->codes[s->n++];
}

struct serials *
serials_new(const struct config *cfg, const struct serial_hooks *hooks,
            char **cause)
{
    struct serials *s = xcalloc(1, sizeof *s);
    char zones[SERIAL_CODES_MAX][TZONE_NAME_MAX + 1];

    if (hooks != NULL)
        s->hooks = *hooks;
    s->count_max = cfg->serial_count_max;
    memset(zones, 0, sizeof zones);
    for (size_t k = 0; k < cfg->nserial_lines; k++) {
        const struct config_serial_line *l = &cfg->serial_lines[k];
        const char *code = l->key + 7, *dot = strrchr(code, '.');
        struct serial_code *c;
        int f;

        if (dot == NULL || !name_ok(code, (size_t)(dot - code), SERIAL_CODE_MAX)) {
            *cause = xasprintf("%s:%d: %s: expected serial.<code>.<field> with a "
                               "code of 1 to %d characters of [A-Za-z0-9_-]",
                               l->file, l->line, l->key, SERIAL_CODE_MAX);
            goto error;
        }
        for (f = 0; f < F_COUNT; f++)
            if (strcmp(dot + 1, field_names[f]) == 0)
                break;
        if (f == F_COUNT) {
            *cause = xasprintf("%s:%d: %s: unknown field \"%s\" (prefix, pattern, "
                               "zone, reset, digits, worker_id, source, step)",
                               l->file, l->line, l->key, dot + 1);
            goto error;
        }
        c = code_get(s, code, (size_t)(dot - code), l->file, l->line, cause);
        if (c == NULL)
            goto error;
        if (c->line[f]) {
            *cause = xasprintf("%s:%d: %s is set twice (also on line %d)",
                               l->file, l->line, l->key, c->line[f]);
            goto error;
        }
        c->line[f] = l->line;
        if (f == F_ZONE) {
            if (strlen(l->value) > TZONE_NAME_MAX || l->value[0] == '\0') {
                *cause = def_error(c, F_ZONE, "\"%s\" is not a zone name", l->value);
                goto error;
            }
            snprintf(zones[c - s->codes], sizeof zones[0], "%s", l->value);
        }
        if (field_set(c, (enum serial_field)f, l->value, cause) == -1)
            goto error;
    }
    /* The embedded default (no config file) serves /serial/demo. */
    if (!cfg->from_file && s->n == 0) {
        def_defaults(&s->codes[0], "demo");
        snprintf(s->codes[0].def.prefix, sizeof s->codes[0].def.prefix, "DEMO");
        s->codes[0].def.digits = 10;        /* room for make bench's rate */
        s->codes[0].def.step = 10000;
        s->n = 1;
    }
    for (size_t i = 0; i < s->n; i++) {
        struct serial_code *c = &s->codes[i];

        if (def_check(cfg, c, zones[i][0] ? zones[i] : "UTC", cause) == -1)
            goto error;
    }
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = 0; j < i; j++)
            if (shapes_meet(&s->codes[j].def, &s->codes[i].def, 0)) {
                struct serial_code *c = &s->codes[i];
                char *why = xasprintf("serial.%s (line %d) and serial.%s can "
                                      "print the same text (the same length, "
                                      "and no character where they always "
                                      "differ), so a serial could be handed "
                                      "out twice: give one of them a different "
                                      "prefix", s->codes[j].def.code,
                                      s->codes[j].first_line, c->def.code);

                *cause = def_error(c, F_PREFIX, "%s", why);
                free(why);
                goto error;
            }
    for (size_t i = 0; i < s->n; i++)
        pthread_mutex_init(&s->codes[i].lock, NULL);
    return s;

error:
    for (size_t i = 0; i < s->n; i++)
        tzone_free(s->codes[i].def.zone);
    free(s);
    return NULL;
}

void
serials_free(struct serials *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++) {
        tzone_free(s->codes[i].def.zone);
        pthread_mutex_destroy(&s->codes[i].lock);
    }
    free(s);
}

void
serials_set_hooks(struct serials *s, const struct serial_hooks *hooks)
{
    s->hooks = *hooks;
}

size_t
serials_count(const struct serials *s)
{
    return s != NULL ? s->n : 0;
}

int
serials_need_store(const struct serials *s)
{
    for (size_t i = 0; s != NULL && i < s->n; i++)
        if (s->codes[i].def.source == SERIAL_SRC_SEGMENT)
            return 1;
    return 0;
}

const struct serial_def *
serials_def(const struct serials *s, size_t i)
{
    assert(i < s->n);
    return &s->codes[i].def;
}

long
serials_find(const struct serials *s, const char *code, size_t len)
{
    for (size_t i = 0; s != NULL && i < s->n; i++)
        if (strlen(s->codes[i].def.code) == len &&
            memcmp(s->codes[i].def.code, code, len) == 0)
            return (long)i;
    return -1;
}

/* ---- periods ---- */

static void
key_at(const struct tzone *z, enum serial_reset r, int64_t t, char *key)
{
    struct tzone_tm tm;

    tzone_local(z, t, &tm);
    serial_period_key(r, &tm, key);
}

int64_t
serial_period_end(const struct tzone *z, enum serial_reset r, int64_t t)
{
    struct tzone_tm tm;
    char k[16], kk[16];
    int64_t days, guess, lo = t, hi;

    if (r == SERIAL_RESET_NEVER)
        return INT64_MAX;
    tzone_local(z, t, &tm);
    serial_period_key(r, &tm, k);
    /* The next period's first local midnight at today's offset. */
    if (r == SERIAL_RESET_DAY)
        days = tzone_days_from_civil(tm.year, tm.month, tm.day) + 1;
    else if (r == SERIAL_RESET_MONTH)
        days = tzone_days_from_civil(tm.month == 12 ? tm.year + 1 : tm.year,
                                     tm.month == 12 ? 1 : tm.month + 1, 1);
    else
        days = tzone_days_from_civil(tm.year + 1, 1, 1);
    guess = (days * 86400 - tm.utoff) * 1000;
    /* Bracket the change: offsets move by hours, at most about a day. */
    if (guess - 26 * HOUR_MS > lo) {
        key_at(z, r, guess - 26 * HOUR_MS, kk);
        if (strcmp(kk, k) == 0)
            lo = guess - 26 * HOUR_MS;
    }
    hi = guess + 26 * HOUR_MS;
    for (int i = 0;; i++) {
        key_at(z, r, hi, kk);
        if (strcmp(kk, k) != 0)
            break;
        if (i == 100)
            return hi;          /* ends no later than this: safe, early */
        hi += 26 * HOUR_MS;
    }
    /* key(lo) == k, key(hi) != k: the first change between. */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;

        key_at(z, r, mid, kk);
        if (strcmp(kk, k) == 0)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

void
serial_row_shape(const struct serial_def *d, char *out)
{
    char pat[SERIAL_PATTERN_NAME_MAX + 1];
    int n;

    serial_pattern_name(&d->pattern, pat);
    n = snprintf(out, SERIAL_ROW_SHAPE_MAX, "serial.%s.%s.%d.%d", d->prefix,
                 pat, d->worker_digits, d->digits);
    assert(n > 0 && n < SERIAL_ROW_SHAPE_MAX);
    for (int k = 7; k < 7 + (int)strlen(d->prefix); k++)
        out[k] = (char)tolower((unsigned char)out[k]);
}

/* raise: a row of the key format before ("<code>:<period>"), which a node
 * of the version before still advances: the load raises it too. */
static void
floor_add(struct store_serial_floor *f, int prefix, int raise, const char *a,
          const char *b)
{
    int n;

    assert(f->n < STORE_SERIAL_FLOOR_MAX);
    n = snprintf(f->row[f->n].tag, sizeof f->row[f->n].tag, "%s:%s", a, b);
    assert(n > 0 && (size_t)n < sizeof f->row[f->n].tag);
    f->row[f->n].prefix = prefix;
    f->row[f->n++].raise = raise;
}

/* Periods from the longest: a row of reset r shares dates with the rows of
 * the resets before it in this list (coarser) and after it (finer). */
static const enum serial_reset coarse_to_fine[] = {
    SERIAL_RESET_NEVER, SERIAL_RESET_YEAR, SERIAL_RESET_MONTH, SERIAL_RESET_DAY
};

int
serial_row_name(void *arg, int64_t db_ms, char *tag, size_t cap,
                struct store_serial_floor *floor)
{
    struct serial_key_arg *ka = arg;
    const struct serial_def *d = &ka->s->codes[ka->i].def;
    char shape[SERIAL_ROW_SHAPE_MAX], period[16], old[16];
    struct tzone_tm tm;
    int n;

    assert(d->source == SERIAL_SRC_SEGMENT);
    tzone_local(d->zone, db_ms, &tm);
    serial_row_shape(d, shape);
    serial_period_text(&d->pattern, d->reset, &tm, period);
    n = snprintf(tag, cap, "%s:%s", shape, period);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    /* This period's rows and those in it: the period as a prefix. */
    serial_period_key(d->reset, &tm, old);
    floor->n = 0;
    floor_add(floor, 1, 0, shape, d->reset == SERIAL_RESET_NEVER ? "" : period);
    floor_add(floor, 1, 1, d->code, old);
    /* The rows of the periods that contain it. */
    for (size_t k = 0; coarse_to_fine[k] != d->reset; k++) {
        serial_period_text(&d->pattern, coarse_to_fine[k], &tm, period);
        serial_period_key(coarse_to_fine[k], &tm, old);
        floor_add(floor, 0, 0, shape, period);
        floor_add(floor, 0, 1, d->code, coarse_to_fine[k] == SERIAL_RESET_NEVER ?
                  "all" : old);
    }
    return 0;
}

/* ---- rows of other shapes ---- */

/* A small decimal at *p up to the byte stop; -1 if none or over max. */
static int
key_int(const char **p, char stop, int max)
{
    int v = 0, n = 0;

    for (; **p >= '0' && **p <= '9' && n < 3; (*p)++, n++)
        v = v * 10 + (**p - '0');
    if (n == 0 || **p != stop || v > max)
        return -1;
    (*p)++;
    return v;
}

/* The shape of a row key "serial.<prefix>.<pattern>.<worker>.<digits>:"
 * into d (prefix, pattern, widths); *period points after the ':'. 0, or
 * -1 when tag is not such a key. */
static int
row_shape_parse(const char *tag, struct serial_def *d, const char **period)
{
    const char *p = tag + 7, *dot;

    memset(d, 0, sizeof *d);
    if (strncmp(tag, "serial.", 7) != 0 || (dot = strchr(p, '.')) == NULL ||
        dot - p > SERIAL_PREFIX_MAX || (dot > p && !name_ok(p, (size_t)(dot - p),
                                                           SERIAL_PREFIX_MAX)))
        return -1;
    memcpy(d->prefix, p, (size_t)(dot - p));
    p = dot + 1;
    if ((dot = strchr(p, '.')) == NULL ||
        serial_pattern_from_name(p, (size_t)(dot - p), &d->pattern) == -1)
        return -1;
    p = dot + 1;
    d->worker_digits = key_int(&p, '.', 7);
    d->digits = key_int(&p, ':', 19);
    if (d->worker_digits < 0 || d->digits < 1 ||
        strlen(d->prefix) + (size_t)(d->pattern.width + d->worker_digits +
                                     d->digits) > SERIAL_TEXT_MAX)
        return -1;
    *period = p;
    return 0;
}

/* The first ms at which no zone's local date is in the period of a row
 * (as serial_period_text wrote it: "all", yyyy or yy, then month and day
 * as far as the reset goes): its last day's end at UTC-12, plus an hour
 * for the hosts' clocks. yy is read as 20yy. INT64_MAX for "all" or a
 * period that does not parse (kept: never a false "over"). */
static int64_t
row_period_over(const struct serial_def *d, const char *period)
{
    int yd = serial_pattern_has_yy(&d->pattern) ? 2 : 4;
    size_t len = strlen(period);
    int64_t v[3] = { 0, 0, 0 }, day;

    if (len != (size_t)yd && len != (size_t)yd + 2 && len != (size_t)yd + 4)
        return INT64_MAX;
    for (size_t k = 0; k < len; k++) {
        size_t f = k < (size_t)yd ? 0 : 1 + (k - (size_t)yd) / 2;

        if (period[k] < '0' || period[k] > '9')
            return INT64_MAX;
        v[f] = v[f] * 10 + (period[k] - '0');
    }
    if ((len > (size_t)yd && (v[1] < 1 || v[1] > 12)) ||
        (len > (size_t)yd + 2 && (v[2] < 1 || v[2] > 31)))
        return INT64_MAX;
    if (yd == 2)
        v[0] += 2000;
    if (len == (size_t)yd)                          /* a year */
        day = tzone_days_from_civil(v[0] + 1, 1, 1);
    else if (len == (size_t)yd + 2)                 /* a month */
        day = tzone_days_from_civil(v[1] == 12 ? v[0] + 1 : v[0],
                                    v[1] == 12 ? 1 : (int)v[1] + 1, 1);
    else                                            /* a day */
        day = tzone_days_from_civil(v[0], (int)v[1], (int)v[2]) + 1;
    return day * 24 * HOUR_MS + 13 * HOUR_MS;
}

int
serial_rows_check(const struct serials *s, size_t i,
                  const struct store_row *rows, size_t n, int64_t now_ms,
                  char **cause)
{
    const struct serial_def *d = &s->codes[i].def;
    char shape[SERIAL_ROW_SHAPE_MAX];

    if (d->source != SERIAL_SRC_SEGMENT)
        return 0;
    serial_row_shape(d, shape);
    for (size_t k = 0; k < n; k++) {
        struct serial_def other;
        const char *period;
        size_t len = strlen(shape);

        if (!store_row_is_serial(&rows[k]) ||
            row_shape_parse(rows[k].biz_tag, &other, &period) == -1 ||
            (strncasecmp(rows[k].biz_tag, shape, len) == 0 &&
             rows[k].biz_tag[len] == ':') ||
            !shapes_meet(d, &other, 1) ||
            row_period_over(&other, period) <= now_ms)
            continue;
        *cause = xasprintf("serial.%s: the database's row %s was made by a "
                           "definition of another shape whose serials can be "
                           "the same text as serial.%s's (the same length, and "
                           "no character where they always differ), and its "
                           "period (%s) is not over, so a serial could be "
                           "handed out twice: keep the old definition until "
                           "that period is over everywhere (a day's row: the "
                           "next day, 13:00 UTC), or give serial.%s a prefix "
                           "that cannot print that row's text",
                           d->code, rows[k].biz_tag, d->code, period, d->code);
        return -1;
    }
    return 0;
}

/* ---- the allocator ---- */

static int64_t
now_us(const struct serials *s)
{
    return s->hooks.now_us != NULL ? s->hooks.now_us() : util_mono_us();
}

static int64_t
range_len(const struct serial_range *r)
{
    return r->end - r->next;
}

void
serial_install(struct serials *s, size_t i, int64_t db_ms, int64_t sent_us,
               int64_t max_id, int64_t step)
{
    struct serial_code *c = &s->codes[i];
    const struct serial_def *d = &c->def;
    int64_t limit = (int64_t)serial_digits_max(d->digits);
    struct serial_range r = { max_id - step, max_id };
    int clipped = 0;
    char key[16];
    int64_t end;

    assert(step >= 1 && max_id - step >= 1);
    key_at(d->zone, d->reset, db_ms, key);
    end = serial_period_end(d->zone, d->reset, db_ms);
    assert(end > db_ms);
    if (r.end > limit + 1) {
        r.end = limit + 1;
        clipped = 1;
    }
    if (r.next > r.end)
        r.next = r.end;
    atomic_fetch_add_explicit(&c->loads, 1, memory_order_relaxed);

    pthread_mutex_lock(&c->lock);
    c->loading = 0;
    if (!c->have || strcmp(c->period, key) != 0) {
        /* A new period (or the first): the old one's ranges are gone. */
        c->have = 1;
        memcpy(c->period, key, sizeof key);
        c->end_ms = end;
        c->cur = r;
        c->next.next = c->next.end = 0;
        c->exhausted = clipped;
        c->last_ms = db_ms;
        atomic_fetch_add_explicit(&c->periods, 1, memory_order_relaxed);
    } else {
        if (range_len(&c->cur) == 0)
            c->cur = r;
        else {
            /* One load at a time, and only while next is empty. */
            assert(range_len(&c->next) == 0);
            c->next = r;
        }
        c->exhausted |= clipped;
    }
    c->db_ms = db_ms;
    c->sent_us = sent_us;
    pthread_mutex_unlock(&c->lock);
}

/* do_: c->lock is held. The time to print: the estimate of the database's
 * time, inside the period and never behind the last one printed. */
static void
do_print_time(struct serial_code *c, int64_t est, struct tzone_tm *tm)
{
    char key[16];
    int64_t t = est;

    if (t < c->last_ms)
        t = c->last_ms;
    if (t > c->end_ms - 1)
        t = c->end_ms - 1;
    tzone_local(c->def.zone, t, tm);
    serial_period_key(c->def.reset, tm, key);
    if (strcmp(key, c->period) != 0) {
        /* A zone whose periods are not in time order: print the time the
         * row's period was read at, which is in it by construction. */
        t = c->db_ms;
        tzone_local(c->def.zone, t, tm);
    }
    c->last_ms = t;
}

enum serial_result
serial_take(struct serials *s, size_t i, int64_t n, uint64_t *seq,
            struct tzone_tm *tm)
{
    struct serial_code *c = &s->codes[i];
    int load = 0;
    enum serial_result res = SERIAL_WAIT;

    assert(i < s->n && n >= 1 && n <= c->def.step);
    pthread_mutex_lock(&c->lock);
    if (c->have) {
        int64_t est = c->db_ms + (now_us(s) - c->sent_us) / 1000;

        if (est >= c->end_ms) {
            /* The period is over (by the database's clock as estimated):
             * its ranges are never used for the next one. */
            c->have = 0;
            c->cur.next = c->cur.end = c->next.next = c->next.end = 0;
            c->exhausted = 0;
        } else if (range_len(&c->cur) + range_len(&c->next) >= n) {
            for (int64_t k = 0; k < n; k++) {
                if (range_len(&c->cur) == 0) {
                    c->cur = c->next;
                    c->next.next = c->next.end = 0;
                }
                assert(range_len(&c->cur) > 0);
                seq[k] = (uint64_t)c->cur.next++;
            }
            do_print_time(c, est, tm);
            res = SERIAL_OK;
        } else if (c->exhausted) {
            res = SERIAL_EXHAUSTED;
        }
    }
    /* Load the next range early: when half of the current one is used. */
    if (res != SERIAL_EXHAUSTED && !c->loading && !(c->have && c->exhausted) &&
        range_len(&c->next) == 0 && range_len(&c->cur) < c->def.step / 2 + 1) {
        c->loading = load = 1;
    }
    pthread_mutex_unlock(&c->lock);
    if (load && s->hooks.load != NULL)
        s->hooks.load(s->hooks.arg, i);
    return res;
}

char *
serial_format(const struct serial_def *d, const struct tzone_tm *tm,
              int64_t worker, int worker_digits, uint64_t seq, int seq_digits,
              char *out)
{
    size_t n = strlen(d->prefix);

    memcpy(out, d->prefix, n);
    out = serial_pattern_format(&d->pattern, tm, out + n);
    if (worker >= 0)
        out = serial_pad(out, (uint64_t)worker, worker_digits);
    return serial_pad(out, seq, seq_digits);
}

size_t
serials_dry(struct serials *s, const char **first)
{
    size_t n = 0;

    *first = NULL;
    for (size_t i = 0; s != NULL && i < s->n; i++) {
        struct serial_code *c = &s->codes[i];
        int dry;

        if (c->def.source != SERIAL_SRC_SEGMENT)
            continue;
        pthread_mutex_lock(&c->lock);
        dry = !c->have || range_len(&c->cur) + range_len(&c->next) == 0;
        pthread_mutex_unlock(&c->lock);
        if (dry && n++ == 0)
            *first = c->def.code;
    }
    return n;
}

/* ---- counters ---- */

void
serial_count_issued(struct serials *s, size_t i, int64_t n)
{
    atomic_fetch_add_explicit(&s->codes[i].issued, (uint64_t)n,
                              memory_order_relaxed);
}

void
serial_count_refused(struct serials *s, size_t i)
{
    atomic_fetch_add_explicit(&s->codes[i].refused, 1, memory_order_relaxed);
}

void
serials_metrics(struct serials *s, struct sbuf *b)
{
    static const struct {
        const char *name, *help;
        size_t      off;
    } m[] = {
        { "leafd_serial_issued_total", "Serial numbers handed out, by code.",
          offsetof(struct serial_code, issued) },
        { "leafd_serial_refused_total", "Serial requests answered 503, by code.",
          offsetof(struct serial_code, refused) },
        { "leafd_serial_loads_total", "Sequence ranges loaded, by code.",
          offsetof(struct serial_code, loads) },
        { "leafd_serial_periods_total", "Periods this node started, by code.",
          offsetof(struct serial_code, periods) },
    };

    if (s == NULL || s->n == 0)
        return;
    for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
        sbuf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", m[k].name,
                    m[k].help, m[k].name);
        for (size_t i = 0; i < s->n; i++) {
            _Atomic uint64_t *v = (_Atomic uint64_t *)((char *)&s->codes[i] +
                                                       m[k].off);
            sbuf_printf(b, "%s{code=\"%s\"} %llu\n", m[k].name,
                        s->codes[i].def.code,
                        (unsigned long long)atomic_load_explicit(
                            v, memory_order_relaxed));
        }
    }
}
