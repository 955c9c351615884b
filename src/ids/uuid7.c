/* uuid7.c: UUIDv7 generator, text form and decoder.
 *
 * DESIGN: what a UUID from this generator guarantees, and why.
 *
 *  - RFC 9562 §6.2 method 1: 42 counter bits follow the 48-bit Unix ms
 *    timestamp (12 in rand_a, 30 in rand_b, around the version and variant
 *    bits). On each new millisecond the counter is seeded with 41 random bits
 *    and a 0 above them, the rollover guard: at least 2^41 UUIDs fit in a
 *    millisecond before the counter can overflow.
 *  - Monotonic on one generator, whatever the clock does: one mutex guards
 *    (last_ms, counter). A clock ahead of last_ms starts a new ms with a
 *    fresh seed; a clock at or behind last_ms (a step back, or many UUIDs in
 *    one ms) keeps last_ms and adds 1 to the counter. On overflow last_ms
 *    moves one ms ahead of the clock with a fresh seed: no spin, no error,
 *    no repeat. So every UUID is greater, as 128 bits (and as text), than
 *    every earlier one of the same generator: they never repeat within one
 *    process.
 *  - Across processes and nodes there is no coordination: uniqueness rests
 *    on the random bits. Each UUID's 32 low bits are fresh bytes from the
 *    kernel's CSPRNG, read for this call (csprng.c buffers nothing), and
 *    each millisecond's counter starts at a random point. docs/id-kinds.md
 *    gives the collision probability.
 *  - A forked child does not go on with its parent's (last_ms, counter):
 *    its first UUID starts a new ms (at least last_ms + 1) with a fresh
 *    seed, as on overflow. A copy no fork handler sees (a VM clone) is
 *    only as good as the kernel's bytes after it; docs/id-kinds.md.
 *  - One getrandom(2) per call of up to UUID7_CHUNK UUIDs: the seed and
 *    the low bits are read before the mutex is taken (a seed read inside it
 *    only on counter overflow). The mutex is taken once per call and held
 *    for O(1) work: it reserves the call's n counters (c0 .. c0 + n - 1 of
 *    one ms) and the UUIDs are packed after it is released. Only a call
 *    that would cross the counter's end (2^41 or more UUIDs into one ms)
 *    walks its UUIDs one by one under the mutex, as on overflow.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "csprng.h"
#include "util.h"
#include "uuid7.h"

#define COUNTER_MAX ((UINT64_C(1) << UUID7_COUNTER_BITS) - 1)
#define UUID7_CHUNK 256                  /* UUIDs per getrandom(2) */
#define SEED_BYTES 6

struct uuid7_gen {
    pthread_mutex_t lock;            /* guards last_ms and counter */
    int64_t         last_ms;         /* timestamp of the last UUID issued */
    uint64_t        counter;         /* its counter */
    unsigned        forks;           /* csprng_forks() it was last used in */
    uuid7_clock_fn  clock;
    void           *clock_arg;
};

struct uuid7_gen *
uuid7_gen_new(uuid7_clock_fn clock, void *clock_arg)
{
    struct uuid7_gen *g = xcalloc(1, sizeof *g);

    pthread_mutex_init(&g->lock, NULL);
    g->last_ms = -1;
    g->forks = csprng_forks();
    g->clock = clock;
    g->clock_arg = clock_arg;
    return g;
}

void
uuid7_gen_free(struct uuid7_gen *g)
{
    if (g == NULL)
        return;
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void
uuid7_gen_force(struct uuid7_gen *g, int64_t last_ms, uint64_t counter)
{
    pthread_mutex_lock(&g->lock);
    g->last_ms = last_ms;
    g->counter = counter;
    pthread_mutex_unlock(&g->lock);
}

/* A fresh counter for a new ms from SEED_BYTES random bytes: 41 random
 * bits below a 0 guard bit. */
static uint64_t
uuid7_seed(const uint8_t *r)
{
    uint64_t v = 0;

    for (int i = 0; i < SEED_BYTES; i++)
        v = v << 8 | r[i];
    return v & (COUNTER_MAX >> 1);
}

static void
uuid7_pack(struct uuid7 *u, int64_t ms, uint64_t c, const uint8_t *rnd)
{
    uint64_t t = (uint64_t)ms;

    assert(ms >= 0 && ms <= UUID7_MAX_MS);
    assert(c <= COUNTER_MAX);
    for (int i = 0; i < 6; i++)
        u->b[i] = (uint8_t)(t >> (40 - 8 * i));
    u->b[6] = (uint8_t)(0x70 | ((c >> 38) & 0x0f));
    u->b[7] = (uint8_t)(c >> 30);
    u->b[8] = (uint8_t)(0x80 | ((c >> 24) & 0x3f));
    u->b[9] = (uint8_t)(c >> 16);
    u->b[10] = (uint8_t)(c >> 8);
    u->b[11] = (uint8_t)c;
    memcpy(u->b + 12, rnd, 4);
}

int
uuid7_next(struct uuid7_gen *g, size_t n, struct uuid7 *out)
{
    /* The seed of a new ms, then 4 bytes per UUID of the first chunk. */
    uint8_t rnd[SEED_BYTES + 4 * UUID7_CHUNK], seed[SEED_BYTES];
    size_t first = n < UUID7_CHUNK ? n : UUID7_CHUNK;
    unsigned forks = csprng_forks();
    int64_t now;
    size_t i;
    int rc = 0;

    now = g->clock != NULL ? g->clock(g->clock_arg) : util_wall_ms();
    if (now < 0 || now > UUID7_MAX_MS)
        return -1;
    if (csprng_fill(rnd, SEED_BYTES + 4 * first) < 0)
        return -1;
    pthread_mutex_lock(&g->lock);
    if (g->forks != forks && now <= g->last_ms) {
        /* A forked child: its parent goes on from (last_ms, counter), so
         * start a ms of its own (g->forks is updated when it starts). */
        if (g->last_ms >= UUID7_MAX_MS)
            rc = -1;
        now = g->last_ms + 1;
    }
    if (rc == 0 && n > 0) {
        /* The common case: reserve n counters of one ms, pack unlocked. */
        int64_t ms = now > g->last_ms ? now : g->last_ms;
        uint64_t c0 = now > g->last_ms ? uuid7_seed(rnd) : g->counter + 1;

        if (c0 <= COUNTER_MAX && COUNTER_MAX - c0 >= n - 1) {
            g->last_ms = ms;
            g->counter = c0 + (n - 1);
            g->forks = forks;
            pthread_mutex_unlock(&g->lock);
            for (i = 0; i < n; i++)
                uuid7_pack(&out[i], ms, c0 + i, i < first ?
                           rnd + SEED_BYTES + 4 * i : (const uint8_t *)"\0\0\0\0");
            goto rest;
        }
    }
    for (i = 0; i < n && rc == 0; i++) {
        if (now > g->last_ms) {
            g->counter = uuid7_seed(rnd);   /* at most once: now is fixed */
            g->last_ms = now;
            g->forks = forks;
        } else if (g->counter < COUNTER_MAX) {
            g->counter++;
        } else {
            /* Overflow: the next ms, ahead of the clock. */
            if (g->last_ms >= UUID7_MAX_MS || csprng_fill(seed, sizeof seed) < 0) {
                rc = -1;
                break;
            }
            g->counter = uuid7_seed(seed);
            g->last_ms++;
        }
        /* The low bits of UUIDs past the first chunk: below, unlocked. */
        uuid7_pack(&out[i], g->last_ms, g->counter,
                   i < first ? rnd + SEED_BYTES + 4 * i : (const uint8_t *)"\0\0\0\0");
    }
    pthread_mutex_unlock(&g->lock);
    if (rc < 0)
        return -1;
rest:
    /* The first chunk has its low bits already; the rest, chunk by chunk. */
    for (i = first; i < n; i += UUID7_CHUNK) {
        size_t k = n - i < UUID7_CHUNK ? n - i : UUID7_CHUNK;

        if (csprng_fill(rnd, 4 * k) < 0)
            return -1;
        for (size_t j = 0; j < k; j++)
            memcpy(out[i + j].b + 12, rnd + 4 * j, 4);
    }
    return 0;
}

/* Byte b's two hex digits are hexpairs[2b] and hexpairs[2b + 1]. */
static const char hexpairs[513] =
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
    "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
    "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
    "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
    "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
    "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
    "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
    "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

/* Where byte i's two digits go in the 8-4-4-4-12 text. */
static const unsigned char text_pos[16] = {
    0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34
};

void
uuid7_format(const struct uuid7 *u, char *out)
{
    _Static_assert(34 + 2 == UUID7_TEXT_LEN, "text_pos");
    for (int i = 0; i < 16; i++)
        memcpy(out + text_pos[i], hexpairs + 2 * u->b[i], 2);
    out[8] = out[13] = out[18] = out[23] = '-';
}

int
uuid7_parse(const char *s, size_t len, struct uuid7 *u, char **cause)
{
    size_t pos = 0;

    if (len != UUID7_TEXT_LEN) {
        if (cause != NULL)
            *cause = xasprintf("a UUID is 36 characters (8-4-4-4-12 hex "
                               "digits), not %zu", len);
        return -1;
    }
    for (int i = 0; i < 16; i++) {
        int hi, lo;

        if (i == 4 || i == 6 || i == 8 || i == 10) {
            if (s[pos] != '-') {
                if (cause != NULL)
                    *cause = xasprintf("expected '-' at position %zu", pos + 1);
                return -1;
            }
            pos++;
        }
        hi = util_hex_digit(s[pos]);
        lo = util_hex_digit(s[pos + 1]);
        if (hi < 0 || lo < 0) {
            if (cause != NULL)
                *cause = xasprintf("not a hex digit at position %zu",
                                   pos + (hi < 0 ? 1 : 2));
            return -1;
        }
        u->b[i] = (uint8_t)(hi << 4 | lo);
        pos += 2;
    }
    return 0;
}

void
uuid7_decode(const struct uuid7 *u, struct uuid7_decoded *d)
{
    uint8_t var = u->b[8];

    memset(d, 0, sizeof *d);
    d->version = u->b[6] >> 4;
    if ((var & 0x80) == 0)
        d->variant = "ncs";
    else if ((var & 0xc0) == 0x80)
        d->variant = "rfc9562";
    else if ((var & 0xe0) == 0xc0)
        d->variant = "microsoft";
    else
        d->variant = "future";
    d->is_v7 = d->version == 7 && (var & 0xc0) == 0x80;
    if (!d->is_v7)
        return;
    for (int i = 0; i < 6; i++)
        d->timestamp_ms = d->timestamp_ms << 8 | u->b[i];
    util_format_utc_ms(d->timestamp_ms, d->time, sizeof d->time);
    d->counter = (uint64_t)(u->b[6] & 0x0f) << 38 | (uint64_t)u->b[7] << 30 |
                 (uint64_t)(u->b[8] & 0x3f) << 24 | (uint64_t)u->b[9] << 16 |
                 (uint64_t)u->b[10] << 8 | u->b[11];
    d->random = (uint32_t)u->b[12] << 24 | (uint32_t)u->b[13] << 16 |
                (uint32_t)u->b[14] << 8 | u->b[15];
}

void
uuid7_decoded_json(const struct uuid7 *u, const struct uuid7_decoded *d,
                   struct sbuf *b)
{
    char text[UUID7_TEXT_LEN + 1];

    uuid7_format(u, text);
    text[UUID7_TEXT_LEN] = '\0';
    sbuf_printf(b, "{\"uuid\":\"%s\",\"version\":%d,\"variant\":\"%s\"",
                text, d->version, d->variant);
    if (d->is_v7)
        sbuf_printf(b, ",\"timestamp\":%lld,\"time\":\"%s\",\"counter\":%llu,"
                    "\"random\":%u", (long long)d->timestamp_ms, d->time,
                    (unsigned long long)d->counter, (unsigned)d->random);
    sbuf_puts(b, "}");
}
