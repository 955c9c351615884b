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
 *    shape can print in a period not yet over, or whose period's text
 *    (over) the code's pattern reads as a date not yet over, as when the
 *    date fields are reordered (serial_rows_check; the loader asks it at
 *    start and before a range of a row it has not checked is used). Such
 *    rows cannot share a floor: the same text is another sequence number
 *    in each shape.
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
 *  - A concealed code (conceal, key_file) prints FF1(key, the period's
 *    tweak, counter) instead of the counter: a permutation of the period's
 *    10^digits values, so the (period, counter) pair stays unique and so
 *    does the text. The domain is prepared when a range of a new period is
 *    installed, and the key (one thread at a time) is used under the
 *    code's lock only. The same counter under another key could be a
 *    serial already printed: the code's rows carry its key's check value,
 *    and the loader refuses a period another key, plain serials or another
 *    reset began (serial_rows_check, SERIAL_KEY_CHANGED).
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "keyfile.h"
#include "serial.h"
#include "serial_internal.h"
#include "store.h"
#include "util.h"

/* ---- definitions ---- */

int
serial_name_ok(const char *s, size_t len, size_t max)
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
        if (*v != '\0' && !serial_name_ok(v, strlen(v), SERIAL_PREFIX_MAX)) {
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
    case F_CONCEAL:
        if (parse_bool_word(v, &d->conceal) == -1) {
            *cause = def_error(c, f, "expected true or false, got \"%s\"", v);
            return -1;
        }
        return 0;
    case F_KEY_FILE:
        if (*v == '\0' || strlen(v) > 4096) {
            *cause = def_error(c, f, "expected the path of a key file%s", "");
            return -1;
        }
        free(c->key_path);
        c->key_path = xstrdup(v);
        return 0;
    case F_COUNT:
        break;
    }
    return -1;
}

/* The key of a concealed code from its key file (keyfile.h: one key, mode
 * 600). 0, or -1 with *cause. */
static int
key_load(struct serial_code *c, char **cause)
{
    struct keyfile_key key;
    int n;
    char *why;

    if (keyfile_read(c->key_path, &key, 1, &n, &why) == -1)
        goto fail;
    c->key = ff1_key_new(key.bytes, key.len, &why);
    keyfile_wipe(&key, 1);
    if (c->key == NULL)
        goto fail;
    ff1_key_check_value(c->key, c->def.key_check);
    return 0;

fail:
    *cause = def_error(c, F_KEY_FILE, "%s", why);
    free(why);
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
    if (c->key_path != NULL && !d->conceal) {
        *cause = def_error(c, F_KEY_FILE, "set, but serial.%s.conceal is not "
                           "true", d->code);
        return -1;
    }
    if (d->conceal) {
        if (d->source == SERIAL_SRC_SNOWFLAKE) {
            *cause = def_error(c, F_CONCEAL, "source = snowflake cannot be "
                               "concealed (its sequence is per millisecond, "
                               "not a period's counter): use source = "
                               "segment%s", "");
            return -1;
        }
        if (d->digits < 6) {
            *cause = def_error(c, F_CONCEAL, "needs serial.%s.digits >= 6 (FF1 "
                               "permutes domains of at least 10^6 numbers)",
                               d->code);
            return -1;
        }
        if (c->key_path == NULL) {
            *cause = def_error(c, F_CONCEAL, "needs serial.%s.key_file (the "
                               "AES key's file, mode 600)", d->code);
            return -1;
        }
        if (key_load(c, cause) == -1)
            return -1;
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

        if (dot == NULL || !serial_name_ok(code, (size_t)(dot - code), SERIAL_CODE_MAX)) {
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
                               "zone, reset, digits, worker_id, source, step, "
                               "conceal, key_file)",
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
            if (serial_shapes_meet(&s->codes[j].def, &s->codes[i].def, 0)) {
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
    for (size_t i = 0; i < s->n; i++) {
        tzone_free(s->codes[i].def.zone);
        free(s->codes[i].key_path);
        ff1_key_free(s->codes[i].key);
    }
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
        free(s->codes[i].key_path);
        ff1_key_free(s->codes[i].key);
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
    serial_key_at(d->zone, d->reset, db_ms, key);
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
        if (d->conceal) {
            char tweak[SERIAL_TWEAK_MAX], *why = NULL;
            int rc;

            serial_conceal_tweak(d, db_ms, tweak);
            rc = ff1_domain_init(&c->dom, c->key, 10, (unsigned)d->digits,
                                 tweak, strlen(tweak), &why);
            assert(rc == 0);    /* digits 6..18 checked by def_check */
            (void)rc;
            free(why);
        }
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
                /* Ranges end at 10^digits (serial_install's limit), so
                 * the counter is in FF1's domain and never wraps. */
                assert(seq[k] <= serial_digits_max(c->def.digits));
            }
            /* all n at once: their AES blocks go through AES together */
            if (c->def.conceal &&
                ff1_encrypt_u64_many(c->key, &c->dom, seq, seq, (size_t)n) == -1)
                abort();
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

int
serial_reveal(struct serials *s, size_t i, const char *text, size_t len,
              char *period, uint64_t *n, const char **why)
{
    struct serial_code *c = &s->codes[i];
    const struct serial_def *d = &c->def;
    size_t plen = strlen(d->prefix), at;
    size_t want = plen + (size_t)(d->pattern.width + d->worker_digits + d->digits);
    struct tzone_tm tm = { .year = 2000, .month = 1, .day = 1 };
    struct ff1_domain dom;
    char tweak[SERIAL_TWEAK_MAX];
    uint64_t seq = 0;
    int rc = 0;

    assert(i < s->n);
    if (d->source != SERIAL_SRC_SEGMENT) {
        *why = "the code's serials come from snowflake IDs: decode the ID";
        return -1;
    }
    if (len != want || memcmp(text, d->prefix, plen) != 0) {
        *why = "not the code's prefix and length";
        return -1;
    }
    for (at = plen; at < len; at++)
        if (text[at] < '0' || text[at] > '9') {
            *why = "a character after the prefix is not a digit";
            return -1;
        }
    at = plen;
    for (int t = 0; t < d->pattern.ntokens; t++) {
        enum serial_token tok = d->pattern.tokens[t];
        int w = tok == SERIAL_T_YEAR4 ? 4 : tok == SERIAL_T_MILLI ? 3 : 2, v = 0;

        for (int k = 0; k < w; k++)
            v = v * 10 + (text[at + (size_t)k] - '0');
        at += (size_t)w;
        if (tok == SERIAL_T_YEAR4 || tok == SERIAL_T_YEAR2)
            tm.year = tok == SERIAL_T_YEAR2 ? 2000 + v : v;
        else if (tok == SERIAL_T_MONTH)
            tm.month = v;
        else if (tok == SERIAL_T_DAY)
            tm.day = v;
    }
    if (tm.month < 1 || tm.month > 12 || tm.day < 1 || tm.day > 31) {
        *why = "its date is not a date";
        return -1;
    }
    at += (size_t)d->worker_digits;
    for (; at < len; at++)
        seq = seq * 10 + (uint64_t)(text[at] - '0');
    serial_period_text(&d->pattern, d->reset, &tm, period);
    if (!d->conceal) {
        *n = seq;
        return 0;
    }
    serial_tweak_of(d, period, tweak);
    pthread_mutex_lock(&c->lock);
    if (ff1_domain_init(&dom, c->key, 10, (unsigned)d->digits, tweak,
                        strlen(tweak), NULL) == -1 ||
        ff1_decrypt_u64(c->key, &dom, seq, n) == -1)
        rc = -1;
    pthread_mutex_unlock(&c->lock);
    assert(rc == 0);        /* digits 6..18 and seq < 10^digits */
    return rc;
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
        sbuf_metric_head(b, m[k].name, "counter", m[k].help);
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
