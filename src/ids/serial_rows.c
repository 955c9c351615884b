/* serial_rows.c: what a serial's leaf_alloc row is: its period (in the
 * code's zone, by the database's clock), its name (the printed shape and
 * period, serial_row_name, with the floor of rows that print the same
 * dates), and which rows of other shapes can print a code's text
 * (serial_rows_check). The rules: serial.c's DESIGN comment. */
#include <assert.h>
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "serial.h"
#include "serial_internal.h"
#include "store.h"
#include "store_marks.h"
#include "util.h"

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

/* Can character strings of the two shapes (lit/dig as text_shape makes
 * them, n long) be the same text? fold: letters without regard to case. */
static int
chars_meet(const char *la, const uint16_t *da, const char *lb,
           const uint16_t *db, int n, int fold)
{
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

/* Can a serial of a and one of b be the same text? (1 unless some
 * character always differs: a sound test, never a false no.) fold: the
 * prefixes' letters are compared without regard to case (b's prefix is a
 * row key's, in lower case). */
int
serial_shapes_meet(const struct serial_def *a, const struct serial_def *b, int fold)
{
    char la[SERIAL_TEXT_MAX], lb[SERIAL_TEXT_MAX];
    uint16_t da[SERIAL_TEXT_MAX], db[SERIAL_TEXT_MAX];
    int n = text_shape(a, la, da);

    if (text_shape(b, lb, db) != n)
        return 0;
    return chars_meet(la, da, lb, db, n, fold);
}

/* ---- periods ---- */

void
serial_key_at(const struct tzone *z, enum serial_reset r, int64_t t, char *key)
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
        serial_key_at(z, r, guess - 26 * HOUR_MS, kk);
        if (strcmp(kk, k) == 0)
            lo = guess - 26 * HOUR_MS;
    }
    hi = guess + 26 * HOUR_MS;
    for (int i = 0;; i++) {
        serial_key_at(z, r, hi, kk);
        if (strcmp(kk, k) != 0)
            break;
        if (i == 100)
            return hi;          /* ends no later than this: safe, early */
        hi += 26 * HOUR_MS;
    }
    /* key(lo) == k, key(hi) != k: the first change between. */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;

        serial_key_at(z, r, mid, kk);
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

/* The shape in a row name: serial_row_shape's, and for a concealed code
 * ".k" and the first 8 bytes of its key's check value in hex, so that each
 * key counts its own rows ("serial.pay.y4mod.0.6.k0123456789abcdef"). */
#define ROW_KEY_HEX 16
#define ROW_SHAPE_KEYED_MAX (SERIAL_ROW_SHAPE_MAX + 2 + ROW_KEY_HEX)
static void
row_shape_keyed(const struct serial_def *d, char *out)
{
    size_t n;

    serial_row_shape(d, out);
    if (!d->conceal)
        return;
    n = strlen(out);
    out[n++] = '.';
    out[n++] = 'k';
    for (int k = 0; k < ROW_KEY_HEX / 2; k++)
        n += (size_t)snprintf(out + n, 3, "%02x", d->key_check[k]);
    assert(n < ROW_SHAPE_KEYED_MAX);
}

void
serial_conceal_tweak(const struct serial_def *d, int64_t db_ms, char *out)
{
    char period[16];
    struct tzone_tm tm;

    tzone_local(d->zone, db_ms, &tm);
    serial_period_text(&d->pattern, d->reset, &tm, period);
    serial_tweak_of(d, period, out);
}

void
serial_tweak_of(const struct serial_def *d, const char *period, char *out)
{
    char shape[SERIAL_ROW_SHAPE_MAX];
    int n;

    serial_row_shape(d, shape);
    n = snprintf(out, SERIAL_TWEAK_MAX, "%s:%s", shape, period);
    assert(n > 0 && n < SERIAL_TWEAK_MAX);
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
    char shape[ROW_SHAPE_KEYED_MAX], period[16], old[16];
    struct tzone_tm tm;
    int n;

    assert(d->source == SERIAL_SRC_SEGMENT);
    tzone_local(d->zone, db_ms, &tm);
    row_shape_keyed(d, shape);
    serial_period_text(&d->pattern, d->reset, &tm, period);
    n = snprintf(tag, cap, "%s:%s", shape, period);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    floor->mark = store_marks_get(tag);
    snprintf(floor->mark_src, sizeof floor->mark_src, "this process's mark: "
             "the serials it got of that row");
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

/* Do two period texts of one pattern overlap ("all" holds every date; a
 * year holds its months and days: one is the start of the other)? */
static int
periods_overlap(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);

    if (strcmp(a, "all") == 0 || strcmp(b, "all") == 0)
        return 1;
    return strncmp(a, b, la < lb ? la : lb) == 0;
}

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
        dot - p > SERIAL_PREFIX_MAX || (dot > p && !serial_name_ok(p, (size_t)(dot - p),
                                                           SERIAL_PREFIX_MAX)))
        return -1;
    memcpy(d->prefix, p, (size_t)(dot - p));
    p = dot + 1;
    if ((dot = strchr(p, '.')) == NULL ||
        serial_pattern_from_name(p, (size_t)(dot - p), &d->pattern) == -1)
        return -1;
    p = dot + 1;
    d->worker_digits = key_int(&p, '.', 7);
    dot = strpbrk(p, ".:");
    if (dot != NULL && *dot == '.') {
        /* A concealed code's row: ".k" and its key's check value. */
        const char *h = dot + 1;

        if (h[0] != 'k' || strspn(h + 1, "0123456789abcdef") != ROW_KEY_HEX ||
            h[1 + ROW_KEY_HEX] != ':')
            return -1;
        d->conceal = 1;
        for (int k = 0; k < ROW_KEY_HEX / 2; k++) {
            unsigned v;

            sscanf(h + 1 + 2 * k, "%2x", &v);
            d->key_check[k] = (uint8_t)v;
        }
        d->digits = key_int(&p, '.', 19);
        p = h + 2 + ROW_KEY_HEX;
    } else
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

/* The text a row of shape d printed in its period (as row_period_over
 * reads it): text_shape's, with the fields the period fixes (the year,
 * then the month and the day as far as the period goes) as their digits.
 * 0, or -1 when the period does not parse (nothing fixed then). */
static int
row_text_shape(const struct serial_def *d, const char *period, char *lit,
               uint16_t *dig)
{
    int yd = serial_pattern_has_yy(&d->pattern) ? 2 : 4;
    size_t len = strlen(period);
    int at = (int)strlen(d->prefix);
    int nf = len == (size_t)yd ? 1 : len == (size_t)yd + 2 ? 2 :
             len == (size_t)yd + 4 ? 3 : 0;

    text_shape(d, lit, dig);
    if (nf == 0 || row_period_over(d, period) == INT64_MAX)
        return -1;
    for (int t = 0; t < d->pattern.ntokens; t++) {
        enum serial_token tok = d->pattern.tokens[t];
        int w = tok == SERIAL_T_YEAR4 ? 4 : tok == SERIAL_T_MILLI ? 3 : 2;
        const char *from = NULL;

        if (tok == SERIAL_T_YEAR4 || tok == SERIAL_T_YEAR2)
            from = period;                  /* the period prints it so */
        else if (tok == SERIAL_T_MONTH && nf >= 2)
            from = period + yd;
        else if (tok == SERIAL_T_DAY && nf == 3)
            from = period + yd + 2;
        if (from != NULL)
            for (int j = 0; j < w; j++)
                lit[at + j] = from[j];
        at += w;
    }
    return 0;
}

/* Is every text a code of shape d could print from now_ms on unlike every
 * text of the characters lit (a row's, row_text_shape)? d's date fields
 * read from lit where all their characters are fixed: a month or a day
 * no calendar has is never printed, and a date over everywhere (as
 * row_period_over counts) is never printed again. Sound: a field not
 * fixed, or a pattern without a year, is a date that may come. */
static int
date_read_over(const struct serial_def *d, const char *lit, int64_t now_ms)
{
    int64_t v[3] = { -1, -1, -1 }, day;
    int at = (int)strlen(d->prefix);

    for (int t = 0; t < d->pattern.ntokens; t++) {
        enum serial_token tok = d->pattern.tokens[t];
        int w = tok == SERIAL_T_YEAR4 ? 4 : tok == SERIAL_T_MILLI ? 3 : 2;
        int f = tok == SERIAL_T_YEAR4 || tok == SERIAL_T_YEAR2 ? 0 :
                tok == SERIAL_T_MONTH ? 1 : tok == SERIAL_T_DAY ? 2 : -1;
        int64_t x = 0;

        for (int j = 0; f >= 0 && j < w; j++) {
            if (lit[at + j] < '0' || lit[at + j] > '9') {
                x = -1;
                break;
            }
            x = x * 10 + (lit[at + j] - '0');
        }
        if (f >= 0)
            v[f] = x >= 0 && tok == SERIAL_T_YEAR2 ? x + 2000 : x;
        at += w;
    }
    if ((v[1] >= 0 && (v[1] < 1 || v[1] > 12)) ||
        (v[2] >= 0 && (v[2] < 1 || v[2] > 31)))
        return 1;                           /* never printed */
    if (v[0] < 0)
        return 0;
    if (v[1] < 0)
        day = tzone_days_from_civil(v[0] + 1, 1, 1);
    else if (v[2] < 0)
        day = tzone_days_from_civil(v[1] == 12 ? v[0] + 1 : v[0],
                                    v[1] == 12 ? 1 : (int)v[1] + 1, 1);
    else
        day = tzone_days_from_civil(v[0], (int)v[1], (int)v[2]) + 1;
    return day * 24 * HOUR_MS + 13 * HOUR_MS <= now_ms;
}

/* A row of another shape whose period is over printed the texts of its
 * period only; code d prints them again when its pattern reads them as a
 * date still to come (ddMMyy's 281126 of 2026-11-28 is yyMMdd's
 * 2028-11-26). 1 when it can, with the text's time part in *text. */
static int
row_text_again(const struct serial_def *d, const struct serial_def *other,
               const char *period, int64_t now_ms, char *text)
{
    char la[SERIAL_TEXT_MAX], lb[SERIAL_TEXT_MAX];
    uint16_t da[SERIAL_TEXT_MAX], db[SERIAL_TEXT_MAX];
    int n = text_shape(d, la, da), at = (int)strlen(other->prefix);

    if (row_text_shape(other, period, lb, db) == -1)
        return 1;                           /* not read: never a false no */
    if (!chars_meet(la, da, lb, db, n, 1) || date_read_over(d, lb, now_ms))
        return 0;
    for (int k = 0; k < other->pattern.width; k++)
        text[k] = lb[at + k] != 0 ? lb[at + k] : '?';
    text[other->pattern.width] = '\0';
    return 1;
}

int
serial_rows_check(const struct serials *s, size_t i,
                  const struct store_row *rows, size_t n, int64_t now_ms,
                  char **cause)
{
    const struct serial_def *d = &s->codes[i].def;
    char shape[ROW_SHAPE_KEYED_MAX], base[SERIAL_ROW_SHAPE_MAX];
    char text[SERIAL_TEXT_MAX + 1], cur[16];
    size_t len, blen;
    struct tzone_tm tm;

    if (d->source != SERIAL_SRC_SEGMENT)
        return 0;
    row_shape_keyed(d, shape);
    serial_row_shape(d, base);
    len = strlen(shape);
    blen = strlen(base);
    tzone_local(d->zone, now_ms, &tm);
    serial_period_text(&d->pattern, d->reset, &tm, cur);
    for (size_t k = 0; k < n; k++) {
        struct serial_def other;
        const char *period;
        int own;

        if (!store_row_is_serial(&rows[k]) ||
            row_shape_parse(rows[k].biz_tag, &other, &period) == -1)
            continue;
        own = strncasecmp(rows[k].biz_tag, shape, len) == 0 &&
              rows[k].biz_tag[len] == ':';
        if (own && !d->conceal)
            continue;
        if (strncasecmp(rows[k].biz_tag, base, blen) == 0 &&
            (rows[k].biz_tag[blen] == ':' || rows[k].biz_tag[blen] == '.')) {
            /* The same text under another key, or plain (concealed, or a
             * concealed code's own rows of another reset): the counters
             * of one period under two permutations could print the same
             * serial. Refused while the two periods overlap. */
            if ((own && strcmp(period, cur) == 0) || !periods_overlap(period, cur))
                continue;
            *cause = xasprintf(SERIAL_KEY_CHANGED "serial.%s: the database's "
                               "row %s counted this period's (%s) serials %s, "
                               "and this node's serial.%s %s (its rows: %s), so "
                               "a serial could be handed out twice: a new key "
                               "(or conceal turned on or off, or a new reset) "
                               "takes effect at the next period; until then "
                               "use the key the period began with everywhere",
                               d->code, rows[k].biz_tag, cur,
                               other.conceal ? "concealed (under the key of "
                               "that check value, or with another reset)" :
                               "in plain", d->code, d->conceal ?
                               "conceals them" : "prints them in plain", shape);
            return -1;
        }
        if (own || !serial_shapes_meet(d, &other, 1))
            continue;
        if (row_period_over(&other, period) > now_ms) {
            *cause = xasprintf("serial.%s: the database's row %s was made by "
                               "a definition of another shape whose serials "
                               "can be the same text as serial.%s's (the same "
                               "length, and no character where they always "
                               "differ), and its period (%s) is not over, so "
                               "a serial could be handed out twice: keep the "
                               "old definition until that period is over "
                               "everywhere (a day's row: the next day, 13:00 "
                               "UTC), or give serial.%s a prefix that cannot "
                               "print that row's text", d->code,
                               rows[k].biz_tag, d->code, period, d->code);
            return -1;
        }
        if (!row_text_again(d, &other, period, now_ms, text))
            continue;
        *cause = xasprintf("serial.%s: the database's row %s was made by a "
                           "definition of another shape whose serials printed "
                           "the time as %s in its period (%s), and serial.%s's "
                           "pattern prints that text again on a date not yet "
                           "over (a reordered date, such as ddMMyy to "
                           "yyMMdd), so a serial could be handed out twice: "
                           "waiting for the old period to end does not help; "
                           "give serial.%s a prefix that cannot print that "
                           "row's text, or keep the old pattern",
                           d->code, rows[k].biz_tag, text, period, d->code,
                           d->code);
        return -1;
    }
    return 0;
}
