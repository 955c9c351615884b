/* conceal.c: concealed segment tags (conceal.h).
 *
 * DESIGN: a block belongs to one load.
 *  - A load of a concealed tag takes a whole aligned block of 2^bits
 *    counters from the tag's row (conceal_block; a range the store gives
 *    that holds no whole block is dropped, a gap, and the load asks again
 *    with conceal_step). The counters of a block are handed out by that
 *    node alone, so the block's IDs, which are the same 2^bits numbers
 *    permuted by FF1 under the block's own tweak, are issued by that node
 *    alone: no other node, concealed under any key or bits, or plain, or
 *    Java Leaf on the same row, can issue one of them. Uniqueness does not
 *    depend on keys agreeing.
 *  - A node's key is fixed for its life (read at start), so a block is
 *    never enciphered under two keys; a new key takes effect with the
 *    node's next block.
 *  - Key records ("<tag>:k<check value>" rows) say which key the tag's
 *    blocks use from which ID on. They are for people (every node of a
 *    tag must have one key, so that support staff can decode any ID) and
 *    for conceal_reveal: conceal_check refuses a node whose key is not the
 *    tag's, unless its key file names the tag's key as retired (a
 *    rotation).
 *  - A record's first ID is exact for every block served: a node first
 *    inserts its key's intent row ("...:p"), then reads the tag's row and
 *    records the first block boundary at or above its max_id, and every
 *    node reads the records again after each block it takes and drops the
 *    block (a gap) when another key's intent or record appeared. A block
 *    taken before the intent lies below the recorded first ID (the row's
 *    max_id only grows); one taken after it is dropped by the node's
 *    second read. So no block is served under a key the records do not
 *    give it. Any node of the intent's key may write the record (one left
 *    by a node that died between the two rows is completed by the next).
 *    Another key's intent that stays without its record for
 *    CONCEAL_ORPHAN_MS is an orphan (its node died or was refused; it
 *    never served a block) and is passed over: then only a node that
 *    stalls that long between reading the row and writing its record
 *    could have a block of another node recorded under its key, which
 *    costs decoding, never uniqueness.
 */
#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conceal.h"
#include "config.h"
#include "ff1.h"
#include "keyfile.h"
#include "log.h"

struct conceal_hist {
    char    key[20];              /* "k" + 16 hex */
    int64_t first;                /* the first counter (ID) of its blocks */
    int64_t bits;                 /* its block size, 2^bits */
};

struct conceal_tag {
    char             name[TAG_MAX + 1];
    size_t           len;
    int              idx;          /* in each thread's domain cache */
    _Atomic int      refused;
    pthread_mutex_t  lock;         /* why, hist, nhist */
    char             why[768];
    struct conceal_hist hist[CONCEAL_HIST_MAX];   /* by first */
    int              nhist;
    char             pend_key[20];  /* another key's intent seen without */
    int64_t          pend_since_ms; /* its record, and since when */
};

/* One thread's copies of the keys and its last domain per tag. */
struct conceal_cache {
    int               ok;
    uint64_t          block;
    unsigned          bits;
    int               key;
    struct ff1_domain dom;
};
struct conceal_thread {
    uint64_t               owner;  /* conceal.id */
    struct conceal_thread *next;   /* conceal.threads */
    struct ff1_key        *key[KEYFILE_KEYS_MAX];
    struct conceal_cache   cache[];
};

struct conceal {
    uint64_t            id;        /* unique per conceal_new */
    unsigned            bits;
    uint64_t            mask;
    int                 nkeys;     /* [0] the key, then retired ones */
    struct ff1_key     *keys[KEYFILE_KEYS_MAX];
    char                key_name[KEYFILE_KEYS_MAX][20];
    size_t              ntags;
    struct conceal_tag *tags;
    pthread_mutex_t     threads_lock;   /* threads */
    struct conceal_thread *threads;
};

static _Atomic uint64_t conceal_ids_next = 1;
static __thread struct conceal_thread *tl_conceal;

static void
key_name(struct ff1_key *k, char out[20])
{
    uint8_t kcv[16];

    ff1_key_check_value(k, kcv);
    out[0] = 'k';
    for (int i = 0; i < 8; i++)
        snprintf(out + 1 + 2 * i, 3, "%02x", kcv[i]);
}

struct conceal *
conceal_new(const struct config *cfg, char **cause)
{
    struct keyfile_key keys[KEYFILE_KEYS_MAX];
    struct conceal *c;
    const char *p = cfg->conceal_tags;
    int n = 0;

    *cause = NULL;
    if (p == NULL || p[strspn(p, " \t,")] == '\0') {
        if (cfg->conceal_key_file != NULL && cfg->conceal_key_file[0] != '\0')
            *cause = xasprintf("segment.conceal_key_file is set but "
                               "segment.conceal names no biz_tag");
        return NULL;
    }
    if (cfg->conceal_key_file == NULL || cfg->conceal_key_file[0] == '\0') {
        *cause = xasprintf("segment.conceal needs segment.conceal_key_file (the "
                           "AES key, mode 600; e.g. head -c 32 /dev/urandom | "
                           "xxd -p -c 64 > FILE; chmod 600 FILE)");
        return NULL;
    }
    c = xcalloc(1, sizeof *c);
    c->id = atomic_fetch_add(&conceal_ids_next, 1);
    c->bits = (unsigned)cfg->conceal_bits;
    assert(c->bits >= CONCEAL_BITS_MIN && c->bits <= CONCEAL_BITS_MAX);
    c->mask = ((uint64_t)1 << c->bits) - 1;
    pthread_mutex_init(&c->threads_lock, NULL);
    c->tags = xcalloc(CONCEAL_TAGS_MAX, sizeof *c->tags);
    while (*p != '\0') {
        size_t len;
        struct conceal_tag *t;

        p += strspn(p, " \t,");
        len = strcspn(p, " \t,");
        if (len == 0)
            break;
        if (!util_tag_valid(p, len) || len > CONCEAL_TAG_MAX) {
            *cause = xasprintf("segment.conceal: \"%.*s\" is not a biz_tag that "
                               "can be concealed (1 to %d of [A-Za-z0-9._:-]: its "
                               "key record's name adds %d)", (int)(len > 140 ? 140 : len),
                               p, CONCEAL_TAG_MAX, CONCEAL_RECORD_SUFFIX);
            goto fail;
        }
        if (conceal_find(c, p, len) != NULL) {
            *cause = xasprintf("segment.conceal: %.*s is listed twice", (int)len, p);
            goto fail;
        }
        if (c->ntags == CONCEAL_TAGS_MAX) {
            *cause = xasprintf("segment.conceal: more than %d biz_tags",
                               CONCEAL_TAGS_MAX);
            goto fail;
        }
        t = &c->tags[c->ntags];
        memcpy(t->name, p, len);
        t->len = len;
        t->idx = (int)c->ntags++;
        pthread_mutex_init(&t->lock, NULL);
        p += len;
    }
    if (keyfile_read(cfg->conceal_key_file, keys, KEYFILE_KEYS_MAX, &n, cause) == -1) {
        char *why = *cause;

        *cause = xasprintf("segment.conceal_key_file: %s", why);
        free(why);
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        char *why = NULL;

        c->keys[i] = ff1_key_new(keys[i].bytes, keys[i].len, &why);
        if (c->keys[i] == NULL) {
            *cause = xasprintf("segment.conceal_key_file: %s", why);
            free(why);
            keyfile_wipe(keys, n);
            goto fail;
        }
        c->nkeys = i + 1;
        key_name(c->keys[i], c->key_name[i]);
        for (int j = 0; j < i; j++)
            if (strcmp(c->key_name[j], c->key_name[i]) == 0) {
                *cause = xasprintf("segment.conceal_key_file: %s: the key on "
                                   "line %d is also on an earlier line",
                                   cfg->conceal_key_file, i + 1);
                keyfile_wipe(keys, n);
                goto fail;
            }
    }
    keyfile_wipe(keys, n);
    return c;

fail:
    conceal_free(c);
    return NULL;
}

void
conceal_free(struct conceal *c)
{
    struct conceal_thread *th, *next;

    if (c == NULL)
        return;
    for (th = c->threads; th != NULL; th = next) {
        next = th->next;
        for (int i = 0; i < c->nkeys; i++)
            ff1_key_free(th->key[i]);
        free(th);
    }
    for (int i = 0; i < c->nkeys; i++)
        ff1_key_free(c->keys[i]);
    for (size_t i = 0; i < c->ntags; i++)
        pthread_mutex_destroy(&c->tags[i].lock);
    free(c->tags);
    pthread_mutex_destroy(&c->threads_lock);
    free(c);
}

unsigned
conceal_bits(const struct conceal *c)
{
    return c->bits;
}

size_t
conceal_count(const struct conceal *c)
{
    return c == NULL ? 0 : c->ntags;
}

const char *
conceal_key_name(const struct conceal *c)
{
    return c->key_name[0];
}

struct conceal_tag *
conceal_find(struct conceal *c, const char *tag, size_t len)
{
    if (c == NULL)
        return NULL;
    for (size_t i = 0; i < c->ntags; i++)
        if (c->tags[i].len == len && memcmp(c->tags[i].name, tag, len) == 0)
            return &c->tags[i];
    return NULL;
}

const char *
conceal_tag_name(const struct conceal_tag *t)
{
    return t->name;
}

struct conceal_tag *
conceal_tag_at(struct conceal *c, size_t i)
{
    assert(i < c->ntags);
    return &c->tags[i];
}

size_t
conceal_tweak(const struct conceal_tag *t, uint64_t block, char *out)
{
    int n = snprintf(out, TAG_MAX + 32, "tag:%s:%" PRIu64, t->name, block);

    assert(n > 0 && n < TAG_MAX + 32);
    return (size_t)n;
}

/* This thread's keys and domains for c: made on first use, freed with c
 * (the list keeps them reachable). Taking threads_lock once per thread. */
static struct conceal_thread *
thread_state(struct conceal *c)
{
    struct conceal_thread *th = tl_conceal;

    if (th != NULL && th->owner == c->id)
        return th;
    th = xcalloc(1, sizeof *th + c->ntags * sizeof th->cache[0]);
    th->owner = c->id;
    for (int i = 0; i < c->nkeys; i++)
        th->key[i] = ff1_key_dup(c->keys[i]);
    pthread_mutex_lock(&c->threads_lock);
    th->next = c->threads;
    c->threads = th;
    pthread_mutex_unlock(&c->threads_lock);
    tl_conceal = th;
    return th;
}

/* The domain of block b of 2^bits under key ki, from this thread's
 * cache. */
static const struct ff1_domain *
domain(struct conceal_thread *th, struct conceal_tag *t, uint64_t b,
       unsigned bits, int ki)
{
    struct conceal_cache *e = &th->cache[t->idx];

    if (!e->ok || e->block != b || e->key != ki || e->bits != bits) {
        char tweak[TAG_MAX + 32];
        size_t tl = conceal_tweak(t, b, tweak);
        int rc = ff1_domain_init(&e->dom, th->key[ki], 2, bits, tweak, tl, NULL);

        assert(rc == 0);            /* 2^bits >= 10^6, a short tweak */
        (void)rc;
        e->ok = 1;
        e->block = b;
        e->key = ki;
        e->bits = bits;
    }
    return &e->dom;
}

/* Counters to IDs a run of one block at a time: its offsets enciphered
 * together (ff1_encrypt_u64_many), CONCEAL_RUN at most. */
#define CONCEAL_RUN 256

void
conceal_ids(struct conceal *c, struct conceal_tag *t, uint64_t *v, size_t n)
{
    struct conceal_thread *th = thread_state(c);
    uint64_t x[CONCEAL_RUN];

    for (size_t i = 0, k; i < n; i += k) {
        uint64_t b = v[i] >> c->bits;
        const struct ff1_domain *d = domain(th, t, b, c->bits, 0);
        int rc;

        for (k = 0; k < CONCEAL_RUN && i + k < n && v[i + k] >> c->bits == b; k++)
            x[k] = v[i + k] & c->mask;
        rc = ff1_encrypt_u64_many(th->key[0], d, x, x, k);
        assert(rc == 0 && k >= 1);
        (void)rc;
        for (size_t j = 0; j < k; j++) {
            assert(x[j] <= c->mask);
            v[i + j] = b << c->bits | x[j];
        }
    }
}

uint64_t
conceal_id(struct conceal *c, struct conceal_tag *t, uint64_t counter)
{
    conceal_ids(c, t, &counter, 1);
    return counter;
}

/* The record of the tag's history that covers ID id (its blocks start at
 * or after the record's first counter), or NULL. */
static const struct conceal_hist *
hist_at(const struct conceal_tag *t, uint64_t id)
{
    const struct conceal_hist *h = NULL;

    for (int i = 0; i < t->nhist; i++)
        if ((uint64_t)t->hist[i].first <= id)
            h = &t->hist[i];
    return h;
}

int
conceal_reveal(struct conceal *c, struct conceal_tag *t, uint64_t id,
               struct conceal_reveal *out, const char **why)
{
    struct conceal_thread *th = thread_state(c);
    const struct conceal_hist *h;
    unsigned bits = c->bits;
    uint64_t mask, b, x = 0;
    int ki = -1, plain = 0, rc;

    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&t->lock);
    h = hist_at(t, id);
    if (h == NULL && t->nhist == 0) {
        /* No record read yet (no refresh or load since start): this
         * node's own key and bits, as for every block it issues. */
        snprintf(out->key, sizeof out->key, "%s", c->key_name[0]);
        ki = 0;
    } else if (h == NULL) {
        plain = 1;                  /* before the tag's first record */
    } else {
        snprintf(out->key, sizeof out->key, "%s", h->key);
        bits = (unsigned)h->bits;
        for (int i = 0; i < c->nkeys; i++)
            if (strcmp(c->key_name[i], h->key) == 0)
                ki = i;
    }
    pthread_mutex_unlock(&t->lock);
    mask = ((uint64_t)1 << bits) - 1;
    b = id >> bits;
    out->bits = bits;
    out->block = b;
    out->offset = id & mask;
    out->counter = id;
    if (plain)
        return 0;
    if (ki == -1) {
        *why = "the ID's block was issued under a key this node's key file "
               "does not hold (add it on a later line of the key file)";
        return -1;
    }
    out->concealed = 1;
    rc = ff1_decrypt_u64(th->key[ki], domain(th, t, b, bits, ki), id & mask, &x);
    assert(rc == 0);
    (void)rc;
    out->offset = x;
    out->counter = b << bits | x;
    return 0;
}

void
conceal_record_name(const struct conceal *c, const struct conceal_tag *t, char *out)
{
    int n = snprintf(out, TAG_MAX + 1, "%s:%s", t->name, c->key_name[0]);

    assert(n > 0 && n <= TAG_MAX);
    (void)n;
}

void
conceal_intent_name(const struct conceal *c, const struct conceal_tag *t, char *out)
{
    int n = snprintf(out, TAG_MAX + 1, "%s:%s:p", t->name, c->key_name[0]);

    assert(n > 0 && n <= TAG_MAX);
    (void)n;
}

int
conceal_row_is_record(const struct store_row *row)
{
    return strcmp(row->description, CONCEAL_DESCRIPTION) == 0 ||
           strcmp(row->description, CONCEAL_INTENT_DESCRIPTION) == 0;
}

/* The key name ("k" + 16 hex) of t's record row ("<tag>:k<16 hex>", intent
 * 0) or intent row ("<tag>:k<16 hex>:p", intent 1), copied to out; else
 * NULL. */
static const char *
row_key(const struct conceal_tag *t, const struct store_row *row, int intent,
        char out[20])
{
    const char *k;

    if (strcmp(row->description, intent ? CONCEAL_INTENT_DESCRIPTION :
               CONCEAL_DESCRIPTION) != 0 ||
        strncmp(row->biz_tag, t->name, t->len) != 0 || row->biz_tag[t->len] != ':')
        return NULL;
    k = row->biz_tag + t->len + 1;
    if (strlen(k) != (intent ? 19u : 17u) || k[0] != 'k' ||
        strspn(k + 1, "0123456789abcdef") != 16 || (intent && strcmp(k + 17, ":p") != 0))
        return NULL;
    memcpy(out, k, 17);
    out[17] = '\0';
    return out;
}

static const char *
record_key(const struct conceal_tag *t, const struct store_row *row, char out[20])
{
    return row_key(t, row, 0, out);
}

/* Keep t's records among rows as its history, sorted by first counter
 * (ties, which only a hand edit makes, by name); of more than
 * CONCEAL_HIST_MAX, the latest. Takes t->lock. */
static void
hist_load(struct conceal_tag *t, const struct store_row *rows, size_t n)
{
    struct conceal_hist h[CONCEAL_HIST_MAX] = { { .first = 0 } }, x;
    int nh = 0, j;

    for (size_t i = 0; i < n; i++) {
        char kb[20];
        const char *k = record_key(t, &rows[i], kb);

        if (k == NULL || rows[i].step < CONCEAL_BITS_MIN ||
            rows[i].step > CONCEAL_BITS_MAX)
            continue;               /* not a record leafd wrote */
        snprintf(x.key, sizeof x.key, "%s", k);
        x.first = rows[i].max_id;
        x.bits = rows[i].step;
        if (nh == CONCEAL_HIST_MAX) {
            if (h[0].first > x.first ||
                (h[0].first == x.first && strcmp(h[0].key, x.key) > 0))
                continue;           /* older than all kept */
            memmove(h, h + 1, sizeof h[0] * (CONCEAL_HIST_MAX - 1));
            nh--;
        }
        for (j = nh; j > 0 && (h[j - 1].first > x.first ||
                               (h[j - 1].first == x.first &&
                                strcmp(h[j - 1].key, x.key) > 0)); j--)
            h[j] = h[j - 1];
        h[j] = x;
        nh++;
    }
    pthread_mutex_lock(&t->lock);
    memcpy(t->hist, h, sizeof h[0] * (size_t)nh);
    t->nhist = nh;
    pthread_mutex_unlock(&t->lock);
}

void
conceal_refresh(struct conceal *c, const struct store_row *rows, size_t n)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->ntags; i++)
        hist_load(&c->tags[i], rows, n);
}

static int
ring_index(const struct conceal *c, const char *key)
{
    for (int i = 0; i < c->nkeys; i++)
        if (strcmp(c->key_name[i], key) == 0)
            return i;
    return -1;
}

enum conceal_verdict
conceal_check(struct conceal *c, struct conceal_tag *t,
              const struct store_row *rows, size_t n, int64_t now_ms,
              char *why, size_t cap)
{
    const struct conceal_hist *cur, *mine = NULL;
    enum conceal_verdict v;
    int ri;

    hist_load(t, rows, n);
    /* An intent without its record: being recorded now (or its node died
     * in between): this node's key, complete it; another: wait for it.
     * Rows are sorted by name, so a record is just before its intent
     * ("<tag>:k..." < "<tag>:k...:p"); keep to that, whatever the order. */
    for (size_t i = 0; i < n; i++) {
        char ik[20], rk[20];
        int done = 0;

        if (row_key(t, &rows[i], 1, ik) == NULL)
            continue;
        if (i > 0 && record_key(t, &rows[i - 1], rk) != NULL && strcmp(rk, ik) == 0)
            continue;
        for (size_t j = 0; j < n && !done; j++)
            done = record_key(t, &rows[j], rk) != NULL && strcmp(rk, ik) == 0;
        if (done)
            continue;
        if (strcmp(ik, c->key_name[0]) == 0)
            return CONCEAL_RECORD;
        pthread_mutex_lock(&t->lock);
        if (strcmp(t->pend_key, ik) != 0) {
            snprintf(t->pend_key, sizeof t->pend_key, "%s", ik);
            t->pend_since_ms = now_ms;
        }
        done = now_ms - t->pend_since_ms >= CONCEAL_ORPHAN_MS;
        pthread_mutex_unlock(&t->lock);
        if (done)
            continue;               /* an orphan: its key serves no block */
        snprintf(why, cap, "biz_tag '%s': another node is recording key %s for "
                 "it (its intent row %s:%s:p has no record %s:%s yet)", t->name,
                 ik, t->name, ik, t->name, ik);
        return CONCEAL_PENDING;
    }
    pthread_mutex_lock(&t->lock);
    if (t->nhist == 0) {
        v = CONCEAL_RECORD;
        goto out;
    }
    cur = &t->hist[t->nhist - 1];
    for (int i = 0; i < t->nhist; i++)
        if (strcmp(t->hist[i].key, c->key_name[0]) == 0)
            mine = &t->hist[i];
    if (cur == mine && cur->bits == (int64_t)c->bits) {
        v = CONCEAL_OK;
        goto out;
    }
    ri = ring_index(c, cur->key);
    if (ri > 0 && mine == NULL) {
        v = CONCEAL_RECORD;         /* a rotation: the tag's key is retired here */
        goto out;
    }
    if (cur == mine)
        snprintf(why, cap, "biz_tag '%s' is concealed in blocks of 2^%lld IDs "
                 "under this node's key %s (its key record %s:%s), but this "
                 "node's segment.conceal_bits is %u: every node serving the "
                 "tag needs the same bits; to change them, rotate to a new key "
                 "(first line of segment.conceal_key_file, the old one after "
                 "it) with the new bits", t->name, (long long)cur->bits,
                 cur->key, t->name, cur->key, c->bits);
    else if (ri > 0)
        snprintf(why, cap, "biz_tag '%s' went from this node's key %s (from "
                 "ID %lld) to %s (from ID %lld): going back to a key the tag "
                 "used before is refused; make a new key (first line of "
                 "segment.conceal_key_file, the old ones after it)", t->name,
                 mine->key, (long long)mine->first, cur->key,
                 (long long)cur->first);
    else if (mine != NULL)
        snprintf(why, cap, "biz_tag '%s' moved from this node's key %s to key "
                 "%s from ID %lld (another node has a newer key): put that key "
                 "on the first line of this node's segment.conceal_key_file "
                 "(keep %s on a later line to decode older IDs) and restart; "
                 "the new key takes effect at this node's next block", t->name,
                 mine->key, cur->key, (long long)cur->first, mine->key);
    else
        snprintf(why, cap, "biz_tag '%s' is concealed under key %s (from ID "
                 "%lld), this node's key is %s: every node serving the tag "
                 "needs the same segment.conceal_key_file. To rotate to this "
                 "node's key instead, put %s on a later line of its key file",
                 t->name, cur->key, (long long)cur->first, c->key_name[0],
                 cur->key);
    v = CONCEAL_REFUSED;
out:
    pthread_mutex_unlock(&t->lock);
    return v;
}

void
conceal_recorded(struct conceal *c, struct conceal_tag *t, int64_t first)
{
    pthread_mutex_lock(&t->lock);
    if (t->nhist == CONCEAL_HIST_MAX) {
        memmove(t->hist, t->hist + 1, sizeof t->hist[0] * (CONCEAL_HIST_MAX - 1));
        t->nhist--;
    }
    /* A record made now starts at the latest block: it sorts last. */
    snprintf(t->hist[t->nhist].key, sizeof t->hist[0].key, "%s", c->key_name[0]);
    t->hist[t->nhist].first = first;
    t->hist[t->nhist].bits = c->bits;
    t->nhist++;
    pthread_mutex_unlock(&t->lock);
}

int
conceal_block(const struct conceal *c, int64_t max_id, int64_t step, int64_t *block)
{
    uint64_t lo = (uint64_t)(max_id - step), first;

    assert(step >= 1 && max_id >= step);
    first = (lo + c->mask) >> c->bits;          /* ceil(lo / 2^bits) */
    if ((first + 1) << c->bits > (uint64_t)max_id)
        return -1;
    *block = (int64_t)first;
    return 0;
}

int64_t
conceal_step(const struct conceal *c, int64_t max_id)
{
    uint64_t mis = (uint64_t)max_id & c->mask;

    return (int64_t)((c->mask + 1) + (mis ? (c->mask + 1) - mis : 0));
}

void
conceal_set_refused(struct conceal_tag *t, const char *why)
{
    pthread_mutex_lock(&t->lock);
    snprintf(t->why, sizeof t->why, "%s", why ? why : "");
    atomic_store(&t->refused, why != NULL);
    pthread_mutex_unlock(&t->lock);
}

int
conceal_refused(struct conceal_tag *t, char *why, size_t cap)
{
    if (!atomic_load(&t->refused))
        return 0;
    pthread_mutex_lock(&t->lock);
    snprintf(why, cap, "%s", t->why);
    pthread_mutex_unlock(&t->lock);
    return 1;
}
