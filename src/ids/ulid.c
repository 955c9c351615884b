/* ulid.c: ULID generator, Crockford base32 text form and decoder.
 *
 * DESIGN: what a ULID from this generator guarantees, and why.
 *
 *  - Monotonic on one generator (the spec's monotonic mode): one mutex
 *    guards (last_ms, random). A clock ahead of last_ms starts a new ms with
 *    80 fresh CSPRNG bits; a clock at or behind last_ms (many ULIDs in one
 *    ms, or a step back) keeps last_ms and adds 1 to the 80-bit random part,
 *    with carry. When that overflows, last_ms moves one ms ahead of the
 *    clock with fresh random bits: no error where a later ms would do, no
 *    spin, no repeat. So every ULID is greater (as 128 bits and as text)
 *    than every earlier one of the same generator.
 *  - Across processes and nodes uniqueness rests on the 80 random bits each
 *    millisecond starts from, read from the kernel when the ms starts
 *    (csprng.c buffers nothing).
 *  - A forked child does not go on with its parent's (last_ms, random): its
 *    first ULID starts a new ms (at least last_ms + 1) with fresh bits, as
 *    on overflow. A copy no fork handler sees (a VM clone) shares them
 *    until its clock passes last_ms; docs/id-kinds.md.
 *  - The mutex is taken once per call, not per ULID; getrandom(2) runs
 *    inside it only when a ms starts.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "csprng.h"
#include "ulid.h"
#include "util.h"

struct ulid_gen {
    pthread_mutex_t lock;            /* guards last_ms and rnd */
    int64_t         last_ms;
    uint8_t         rnd[10];         /* the random part of the last ULID */
    unsigned        forks;           /* csprng_forks() it was last used in */
    ulid_clock_fn   clock;
    void           *clock_arg;
};

static const char crockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

struct ulid_gen *
ulid_gen_new(ulid_clock_fn clock, void *clock_arg)
{
    struct ulid_gen *g = xcalloc(1, sizeof *g);

    pthread_mutex_init(&g->lock, NULL);
    g->last_ms = -1;
    g->forks = csprng_forks();
    g->clock = clock;
    g->clock_arg = clock_arg;
    return g;
}

void
ulid_gen_free(struct ulid_gen *g)
{
    if (g == NULL)
        return;
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void
ulid_gen_force(struct ulid_gen *g, int64_t last_ms, const uint8_t *rnd)
{
    pthread_mutex_lock(&g->lock);
    g->last_ms = last_ms;
    memcpy(g->rnd, rnd, sizeof g->rnd);
    pthread_mutex_unlock(&g->lock);
}

/* Add 1 to the 80-bit big-endian number; returns 1 on overflow. */
static int
ulid_increment(uint8_t *r)
{
    for (int i = 9; i >= 0; i--)
        if (++r[i] != 0)
            return 0;
    return 1;
}

int
ulid_next(struct ulid_gen *g, size_t n, struct ulid *out)
{
    unsigned forks = csprng_forks();
    int64_t now;
    size_t i;
    int rc = 0;

    now = g->clock != NULL ? g->clock(g->clock_arg) : util_wall_ms();
    if (now < 0 || now > ULID_MAX_MS)
        return -1;
    pthread_mutex_lock(&g->lock);
    if (g->forks != forks && now <= g->last_ms) {
        /* A forked child: its parent goes on from (last_ms, rnd), so
         * start a ms of its own (g->forks is updated when it starts). */
        if (g->last_ms >= ULID_MAX_MS)
            rc = -1;
        now = g->last_ms + 1;
    }
    for (i = 0; i < n && rc == 0; i++) {
        uint64_t t;

        if (now > g->last_ms) {
            if (csprng_fill(g->rnd, sizeof g->rnd) < 0) {
                rc = -1;
                break;
            }
            g->last_ms = now;
            g->forks = forks;
        } else if (ulid_increment(g->rnd)) {
            /* 2^80 used up in this ms: the next one, ahead of the clock. */
            if (g->last_ms >= ULID_MAX_MS ||
                csprng_fill(g->rnd, sizeof g->rnd) < 0) {
                rc = -1;
                break;
            }
            g->last_ms++;
        }
        t = (uint64_t)g->last_ms;
        for (int k = 0; k < 6; k++)
            out[i].b[k] = (uint8_t)(t >> (40 - 8 * k));
        memcpy(out[i].b + 6, g->rnd, sizeof g->rnd);
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

void
ulid_format(const struct ulid *u, char *out)
{
    uint64_t hi = 0, lo = 0;

    for (int i = 0; i < 8; i++) {
        hi = hi << 8 | u->b[i];
        lo = lo << 8 | u->b[8 + i];
    }
    /* 26 groups of 5 bits over 130 bits: the top 2 bits are always 0. */
    for (int i = 25; i >= 0; i--) {
        out[i] = crockford[lo & 31];
        lo = lo >> 5 | hi << 59;
        hi >>= 5;
    }
}

/* The value of a base32 character, or -1. */
static int
crockford_value(unsigned char c)
{
    if (c >= 'a' && c <= 'z')
        c = (unsigned char)(c - 'a' + 'A');
    switch (c) {
    case 'O':
        return 0;
    case 'I':
    case 'L':
        return 1;
    case 'U':
        return -1;
    }
    for (int v = 0; v < 32; v++)
        if (crockford[v] == c)
            return v;
    return -1;
}

int
ulid_parse(const char *s, size_t len, struct ulid *u, char **cause)
{
    uint64_t hi = 0, lo = 0;

    if (len != ULID_TEXT_LEN) {
        if (cause != NULL)
            *cause = xasprintf("a ULID is 26 characters of Crockford base32, "
                               "not %zu", len);
        return -1;
    }
    for (size_t i = 0; i < ULID_TEXT_LEN; i++) {
        int v = crockford_value((unsigned char)s[i]);

        if (v < 0) {
            if (cause != NULL)
                *cause = xasprintf("character %zu is not in Crockford's "
                                   "base32 alphabet (0-9, A-Z without U)",
                                   i + 1);
            return -1;
        }
        if (i == 0 && v > 7) {
            if (cause != NULL)
                *cause = xstrdup("above the largest ULID, "
                                 "7ZZZZZZZZZZZZZZZZZZZZZZZZZ");
            return -1;
        }
        hi = hi << 5 | lo >> 59;
        lo = lo << 5 | (uint64_t)v;
    }
    for (int i = 7; i >= 0; i--) {
        u->b[i] = (uint8_t)hi;
        u->b[8 + i] = (uint8_t)lo;
        hi >>= 8;
        lo >>= 8;
    }
    return 0;
}

int64_t
ulid_timestamp_ms(const struct ulid *u)
{
    int64_t t = 0;

    for (int i = 0; i < 6; i++)
        t = t << 8 | u->b[i];
    return t;
}

void
ulid_decoded_json(const struct ulid *u, struct sbuf *b)
{
    char text[ULID_TEXT_LEN + 1], time[32];
    int64_t ms = ulid_timestamp_ms(u);

    ulid_format(u, text);
    text[ULID_TEXT_LEN] = '\0';
    util_format_utc_ms(ms, time, sizeof time);
    sbuf_printf(b, "{\"ulid\":\"%s\",\"timestamp\":%lld,\"time\":\"%s\","
                "\"randomness\":\"", text, (long long)ms, time);
    for (int i = 6; i < 16; i++)
        sbuf_printf(b, "%02x", u->b[i]);
    sbuf_puts(b, "\"}");
}
