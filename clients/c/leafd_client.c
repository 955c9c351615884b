/* leafd_client.c: libleafd-client (see leafd_client.h).
 *
 * DESIGN: a tag's current range is a struct range published through an
 * atomic pointer. Taking IDs is one fetch_add on the range's `next`: a
 * result below `end` is the caller's alone (fetch_add gives each caller a
 * disjoint interval), a result at or past `end` means the range is used up
 * and the caller takes the slow path. Ranges are never reused or freed
 * while the client lives (a stalled thread may still add to an old one:
 * past its end, harmlessly), so no ID is ever handed out twice and no
 * thread reads freed memory. leafd_next takes small blocks of the range
 * per thread (see struct tblock), so one thread's IDs cost a plain
 * increment and threads do not fight over one cache line per ID.
 *
 * Locking: one mutex (c->lock) guards every tag's pending ranges, the
 * lease requests, the servers' state and the retired list; `work` wakes
 * the background thread, `done` wakes callers waiting for a lease. The hot
 * path takes no lock. HTTP runs only on the background thread, lock
 * released. clients_lock guards the list of live clients and is taken
 * before any c->lock.
 *
 * Fork: a child must never hand out what its parent holds. pthread_atfork
 * handlers take clients_lock and every c->lock before fork() (so the child
 * sees each client in a consistent state) and release them after it; in
 * the child they drop every tag's current and pending ranges and the
 * forking thread's blocks (the only thread the child has), and start the
 * background thread again (with its own libcurl handle: the parent's
 * connections stay the parent's) when the child first needs a lease. The
 * parent keeps its ranges. fork() only: a raw clone(2) runs no handler.
 *
 * Out of memory: the library never aborts. A failed allocation (or thread,
 * or libcurl handle) is LEAFD_ENOMEM to the caller; in the background
 * thread it is a failed lease (the IDs leafd leased are a gap), asked for
 * again by the next caller that needs one. Snowflake decoding allocates
 * nothing (sfcodec_layout_set, sfcodec_decode_id).
 */
#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lease_parse.h"
#include "leafd_client.h"
#include "sfcodec.h"

#define MAX_SERVERS 16
#define PENDING_MAX 32
#define TAG_LEN_MAX 128
#define RESP_MAX 4096
#define SEGMENT_RANGES_MAX 16          /* ranges in one lease answer (leafd: 9) */

struct range {
    int64_t          start, end;
    _Atomic int64_t  next;
    _Atomic int      prefetch_asked;
    struct range    *retired;          /* c->retired list */
};

struct tag {
    char                 name[TAG_LEN_MAX + 1];
    _Atomic(struct range *) cur;
    struct tag          *next_tag;      /* c->tags list, never unlinked */
    /* c->lock: */
    struct range        *pending[PENDING_MAX];
    int                  npending;
    int                  want;          /* the background thread should lease */
    int                  fetching;
    uint64_t             fail_gen;      /* failed leases so far */
    int                  fail_code;
    char                 fail_msg[320];
    int64_t              size;          /* next lease size (adaptive) */
    int64_t              cur_since_ms;  /* when cur went in */
};

struct server {
    char    *url;
    int64_t  dead_until_ms;
};

struct leafd_client {
    uint64_t                    id;       /* names c in thread caches */
    struct leafd_client        *next_client;  /* clients list (clients_lock) */
    struct leafd_client_options opt;
    pthread_mutex_t             lock;
    pthread_cond_t              work, done;
    _Atomic(struct tag *)       tags;
    struct range               *retired;
    struct server               servers[MAX_SERVERS];
    int                         nservers, preferred;
    int                         stopping;
    int                         running;  /* thread started (not since a fork) */
    pthread_t                   thread;
    CURL                       *curl;     /* background thread only, once started */
    _Atomic uint64_t            leases, http_requests, failovers;
    _Atomic int64_t             last_size;
};

static _Atomic uint64_t last_client_id;
static _Thread_local char tl_error[600];
static _Thread_local struct { uint64_t id; struct tag *t; } tl_cache;
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static int lib_ready;                   /* lib_lock: lib_init succeeded */
static pthread_mutex_t clients_lock = PTHREAD_MUTEX_INITIALIZER;
static struct leafd_client *clients;    /* live clients, for the fork handlers */

static void
set_error(const char *fmt, const char *a, const char *b)
{
    snprintf(tl_error, sizeof tl_error, fmt, a, b);
}

const char *
leafd_last_error(void)
{
    return tl_error[0] ? tl_error : "no error";
}

const char *
leafd_strerror(int code)
{
    switch (code) {
    case LEAFD_OK: return "ok";
    case LEAFD_EINVAL: return "invalid argument";
    case LEAFD_EUNAVAILABLE: return "no ID left and no server gave a lease";
    case LEAFD_EUNKNOWN_TAG: return "unknown biz_tag";
    case LEAFD_EREFUSED: return "the server refused the lease";
    case LEAFD_ENOMEM: return "out of memory";
    }
    return "unknown error";
}

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
tag_valid(const char *s)
{
    size_t n = 0;

    for (; s[n]; n++) {
        char ch = s[n];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == ':' ||
              ch == '-'))
            return 0;
        if (n >= TAG_LEN_MAX)
            return 0;
    }
    return n > 0;
}

static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);

/* libcurl's global state and the fork handlers, once per process; a
 * failure is tried again by the next leafd_client_new. Returns 0 or -1. */
static int
lib_init(void)
{
    int rc = 0;

    pthread_mutex_lock(&lib_lock);
    if (!lib_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
            pthread_atfork(fork_prepare, fork_parent, fork_child) != 0)
            rc = -1;
        else
            lib_ready = 1;
    }
    pthread_mutex_unlock(&lib_lock);
    return rc;
}

/* ---- HTTP (background thread) ---- */

struct resp {
    char   buf[RESP_MAX];
    size_t len;
};

static size_t
on_body(char *p, size_t size, size_t nmemb, void *arg)
{
    struct resp *r = arg;
    size_t n = size * nmemb;

    if (r->len + n >= sizeof r->buf)
        return 0;                   /* too long: not a lease answer */
    memcpy(r->buf + r->len, p, n);
    r->len += n;
    r->buf[r->len] = '\0';
    return n;
}

/* The ranges of a text lease answer, as struct ranges. Returns how many,
 * -1 for a text that is not a lease answer, or -2 when out of memory
 * (nothing in out then). */
static int
parse_ranges(const char *s, size_t len, struct range **out, int max, int64_t want)
{
    struct lease_range lr[SEGMENT_RANGES_MAX];
    int n = lease_parse(s, len, want, lr, max < SEGMENT_RANGES_MAX ? max : SEGMENT_RANGES_MAX);

    for (int i = 0; i < n; i++) {
        if ((out[i] = calloc(1, sizeof *out[i])) == NULL) {
            while (i-- > 0)
                free(out[i]);
            return -2;
        }
        out[i]->start = lr[i].start;
        out[i]->end = lr[i].end;
        atomic_store(&out[i]->next, lr[i].start);
    }
    return n;
}

/* Lease size IDs of tag from one server. Returns LEAFD_OK with *nr ranges,
 * 1 when the server failed (try the next), or a LEAFD_E* code that no
 * other server would answer differently (LEAFD_ENOMEM: this process is out
 * of memory; the server is not to blame). */
static int
lease_from(struct leafd_client *c, struct server *sv, const char *tag, int64_t size,
           struct range **out, int *nr, char *why, size_t whylen)
{
    char url[1200], auth[300];
    struct curl_slist *hdr, *more;
    struct resp r = { .len = 0 };
    long status = 0;
    CURLcode cc;

    snprintf(url, sizeof url, "%s/segment/%s/lease?size=%lld", sv->url, tag,
             (long long)size);
    if ((hdr = curl_slist_append(NULL, "Accept: text/plain")) == NULL)
        goto oom;
    if (c->opt.token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->opt.token);
        if ((more = curl_slist_append(hdr, auth)) == NULL) {
            curl_slist_free_all(hdr);
            goto oom;
        }
        hdr = more;
    }
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)c->opt.timeout_ms);
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)c->opt.timeout_ms);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    r.buf[0] = '\0';
    atomic_fetch_add(&c->http_requests, 1);
    cc = curl_easy_perform(c->curl);
    curl_slist_free_all(hdr);
    if (cc == CURLE_OUT_OF_MEMORY)
        goto oom;
    if (cc != CURLE_OK) {
        snprintf(why, whylen, "%s: %s", sv->url, curl_easy_strerror(cc));
        return 1;
    }
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status == 200) {
        *nr = parse_ranges(r.buf, r.len, out, SEGMENT_RANGES_MAX, size);
        if (*nr > 0)
            return LEAFD_OK;
        if (*nr == -2) {
            snprintf(why, whylen, "out of memory (the %lld IDs %s leased are lost)",
                     (long long)size, sv->url);
            return LEAFD_ENOMEM;
        }
        snprintf(why, whylen, "%s: not a lease answer", sv->url);
        return 1;
    }
    snprintf(why, whylen, "%s: HTTP %ld: %.200s", sv->url, status, r.buf);
    if (status == 404 && strstr(r.buf, "unknown_biz_tag") != NULL)
        return LEAFD_EUNKNOWN_TAG;
    if (status >= 400 && status < 500)
        return LEAFD_EREFUSED;
    return 1;                           /* 5xx: this server cannot now */

oom:
    snprintf(why, whylen, "out of memory (before asking %s)", sv->url);
    return LEAFD_ENOMEM;
}

/* One lease over the servers, each tried at most once, skipping those that
 * failed in the last dead_ms. c->lock held on entry and exit (released
 * around HTTP). */
static int
do_lease(struct leafd_client *c, const char *tag, int64_t size, struct range **out,
         int *nr, char *why, size_t whylen)
{
    int first = c->preferred, tried = 0, rc = LEAFD_EUNAVAILABLE;

    snprintf(why, whylen, "every server failed within the last %d ms", c->opt.dead_ms);
    for (int k = 0; k < c->nservers; k++) {
        int i = (first + k) % c->nservers;
        struct server *sv = &c->servers[i];

        if (sv->dead_until_ms > now_ms())
            continue;
        tried++;
        pthread_mutex_unlock(&c->lock);
        rc = lease_from(c, sv, tag, size, out, nr, why, whylen);
        pthread_mutex_lock(&c->lock);
        if (rc == 1) {
            sv->dead_until_ms = now_ms() + c->opt.dead_ms;
            atomic_fetch_add(&c->failovers, 1);
            rc = LEAFD_EUNAVAILABLE;
            continue;
        }
        if (rc == LEAFD_OK)
            c->preferred = i;
        return rc;
    }
    (void)tried;
    return rc;
}

static void *
background(void *arg)
{
    struct leafd_client *c = arg;

    pthread_mutex_lock(&c->lock);
    while (!c->stopping) {
        struct tag *t;
        struct range *got[SEGMENT_RANGES_MAX];
        char why[300];
        int nr = 0, rc;
        int64_t size;

        for (t = atomic_load(&c->tags); t != NULL; t = t->next_tag)
            if (t->want && !t->fetching)
                break;
        if (t == NULL) {
            pthread_cond_wait(&c->work, &c->lock);
            continue;
        }
        t->want = 0;
        if (t->npending > 0)
            continue;                   /* a lease is waiting already */
        t->fetching = 1;
        size = t->size;
        atomic_store(&c->last_size, size);
        rc = do_lease(c, t->name, size, got, &nr, why, sizeof why);
        t->fetching = 0;
        if (rc == LEAFD_OK) {
            for (int i = 0; i < nr; i++) {
                assert(t->npending < PENDING_MAX);
                t->pending[t->npending++] = got[i];
            }
            atomic_fetch_add(&c->leases, 1);
        } else {
            t->fail_gen++;
            t->fail_code = rc;
            snprintf(t->fail_msg, sizeof t->fail_msg, "%.300s", why);
        }
        pthread_cond_broadcast(&c->done);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* ---- tags and the hot path ---- */

/* The tag name of c into *out, made on first use. Returns LEAFD_OK,
 * LEAFD_EINVAL for a bad name or LEAFD_ENOMEM (with tl_error). */
static int
tag_get(struct leafd_client *c, const char *name, struct tag **out)
{
    struct tag *t;

    if (tl_cache.id == c->id && strcmp(tl_cache.t->name, name) == 0) {
        *out = tl_cache.t;
        return LEAFD_OK;
    }
    for (t = atomic_load(&c->tags); t != NULL; t = t->next_tag)
        if (strcmp(t->name, name) == 0)
            break;
    if (t == NULL) {
        if (!tag_valid(name)) {
            set_error("biz_tag must be 1 to 128 characters of [A-Za-z0-9._:-]%s%s", "", "");
            return LEAFD_EINVAL;
        }
        pthread_mutex_lock(&c->lock);
        for (t = atomic_load(&c->tags); t != NULL; t = t->next_tag)
            if (strcmp(t->name, name) == 0)
                break;
        if (t == NULL) {
            if ((t = calloc(1, sizeof *t)) == NULL) {
                pthread_mutex_unlock(&c->lock);
                set_error("out of memory for biz_tag %.128s%s", name, "");
                return LEAFD_ENOMEM;
            }
            snprintf(t->name, sizeof t->name, "%s", name);
            t->size = c->opt.lease_min;
            t->next_tag = atomic_load(&c->tags);
            atomic_store(&c->tags, t);
        }
        pthread_mutex_unlock(&c->lock);
    }
    tl_cache.id = c->id;
    tl_cache.t = t;
    *out = t;
    return LEAFD_OK;
}

/* Ask the background thread for the next range (once per range). */
static void
ask_prefetch(struct leafd_client *c, struct tag *t, struct range *r)
{
    int expect = 0;

    if (!atomic_compare_exchange_strong(&r->prefetch_asked, &expect, 1))
        return;
    pthread_mutex_lock(&c->lock);
    if (t->npending == 0) {
        t->want = 1;
        pthread_cond_signal(&c->work);
    }
    pthread_mutex_unlock(&c->lock);
}

/* Start the background thread and its libcurl handle if they are not
 * running (a new client, or the first lease a forked child needs). c->lock
 * held, or c not yet shared. Returns NULL, or why either cannot be made
 * (out of memory or threads). */
static const char *
start_thread(struct leafd_client *c)
{
    if (c->running)
        return NULL;
    if (c->curl == NULL && (c->curl = curl_easy_init()) == NULL)
        return "out of memory: libcurl could not make a handle";
    if (pthread_create(&c->thread, NULL, background, c) != 0)
        return "out of memory: the client's thread could not start";
    c->running = 1;
    return NULL;
}

/* The current range seen was used up: switch to a pending one, or wait for
 * a lease. Returns 0 to try again, or an error. Never waits past about
 * timeout_ms per server. */
static int
slow_path(struct leafd_client *c, struct tag *t, struct range *seen)
{
    int64_t wait_ms = (int64_t)c->opt.timeout_ms * (c->nservers + 1) + 100;
    struct timespec deadline;
    const char *why;
    uint64_t gen0;
    int rc = 0;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (wait_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&c->lock);
    gen0 = t->fail_gen;
    for (;;) {
        struct range *cur = atomic_load(&t->cur);

        if (cur != seen || (cur != NULL && atomic_load(&cur->next) < cur->end))
            break;                      /* another thread switched */
        if (t->npending > 0) {
            struct range *r = t->pending[0];
            int64_t now = now_ms();

            memmove(t->pending, t->pending + 1, sizeof *t->pending * (size_t)--t->npending);
            if (cur != NULL) {
                /* Adapt: a range that went in under target_ms / 2 doubles
                 * the next lease, one that took over 2 * target_ms halves it. */
                int64_t d = now - t->cur_since_ms;

                if (d < c->opt.target_ms / 2 && t->size * 2 <= c->opt.lease_max)
                    t->size *= 2;
                else if (d > c->opt.target_ms * 2 && t->size / 2 >= c->opt.lease_min)
                    t->size /= 2;
                cur->retired = c->retired;
                c->retired = cur;
            }
            t->cur_since_ms = now;
            atomic_store(&t->cur, r);
            if (t->npending == 0 && (r->end - r->start) * c->opt.prefetch_percent < 100) {
                t->want = 1;        /* too small to reach the prefetch point */
                pthread_cond_signal(&c->work);
            }
            break;
        }
        if (t->fail_gen != gen0) {
            rc = t->fail_code;
            snprintf(tl_error, sizeof tl_error, "no lease for %.128s: %.320s", t->name, t->fail_msg);
            break;
        }
        if ((why = start_thread(c)) != NULL) {
            rc = LEAFD_ENOMEM;
            snprintf(tl_error, sizeof tl_error, "no lease for %.128s after fork(): %s",
                     t->name, why);
            break;
        }
        t->want = 1;
        pthread_cond_signal(&c->work);
        if (pthread_cond_timedwait(&c->done, &c->lock, &deadline) == ETIMEDOUT &&
            t->npending == 0 && t->fail_gen == gen0) {
            rc = LEAFD_EUNAVAILABLE;
            snprintf(tl_error, sizeof tl_error, "no lease for %s within %lld ms",
                     t->name, (long long)wait_ms);
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int
leafd_next_n(struct leafd_client *c, const char *tag, int64_t n, int64_t *ids,
             int64_t *got)
{
    struct tag *t;
    int64_t have = 0;
    int rc;

    if (got != NULL)
        *got = 0;
    if (c == NULL || tag == NULL || ids == NULL || n < 1) {
        set_error("invalid argument%s%s", "", "");
        return LEAFD_EINVAL;
    }
    if ((rc = tag_get(c, tag, &t)) != LEAFD_OK)
        return rc;
    while (have < n) {
        struct range *r = atomic_load_explicit(&t->cur, memory_order_acquire);

        if (r != NULL) {
            int64_t want = n - have;
            int64_t x = atomic_fetch_add_explicit(&r->next, want, memory_order_relaxed);

            if (x < r->end) {
                int64_t k = r->end - x < want ? r->end - x : want;

                for (int64_t i = 0; i < k; i++)
                    ids[have + i] = x + i;
                have += k;
                if (got != NULL)
                    *got = have;
                if ((x + k - r->start) * 100 >= (r->end - r->start) * c->opt.prefetch_percent &&
                    !atomic_load_explicit(&r->prefetch_asked, memory_order_relaxed))
                    ask_prefetch(c, t, r);
                continue;
            }
        }
        if ((rc = slow_path(c, t, r)) != 0)
            return rc;
    }
    return LEAFD_OK;
}

/* A thread's block of one tag's IDs: taken from the current range with one
 * fetch_add of up to BLOCK_MAX, handed out by later leafd_next calls of the
 * same thread with a plain increment. Only its thread reads it, so its IDs
 * are that thread's alone; what a thread holds when it stops is lost (a
 * gap of under BLOCK_MAX, never a repeat). cid is compared before t is
 * read: a block of a freed client is never dereferenced. */
#define TL_WAYS 8
#define BLOCK_MAX 256

struct tblock {
    uint64_t    cid;
    struct tag *t;
    int64_t     next, end;
};
static _Thread_local struct tblock tl_blocks[TL_WAYS];
static _Thread_local int tl_last, tl_victim;

static int
next_refill(struct leafd_client *c, const char *tag, int64_t *id)
{
    struct tblock *b = NULL;
    struct tag *t;
    int rc;

    if (c == NULL || tag == NULL || id == NULL) {
        set_error("invalid argument%s%s", "", "");
        return LEAFD_EINVAL;
    }
    if ((rc = tag_get(c, tag, &t)) != LEAFD_OK)
        return rc;
    for (int i = 0; i < TL_WAYS; i++)
        if (tl_blocks[i].cid == c->id && tl_blocks[i].t == t) {
            b = &tl_blocks[i];
            break;
        }
    if (b == NULL) {
        b = &tl_blocks[tl_victim];
        tl_victim = (tl_victim + 1) % TL_WAYS;
        b->cid = c->id;
        b->t = t;
        b->next = b->end = 0;
    }
    tl_last = (int)(b - tl_blocks);
    if (b->next < b->end) {
        *id = b->next++;
        return LEAFD_OK;
    }
    for (;;) {
        struct range *r = atomic_load_explicit(&t->cur, memory_order_acquire);

        if (r != NULL) {
            int64_t len = r->end - r->start;
            int64_t want = len / 64 < 1 ? 1 : len / 64 > BLOCK_MAX ? BLOCK_MAX : len / 64;
            int64_t x = atomic_fetch_add_explicit(&r->next, want, memory_order_relaxed);

            if (x < r->end) {
                int64_t got = r->end - x < want ? r->end - x : want;

                if (!atomic_load_explicit(&r->prefetch_asked, memory_order_relaxed) &&
                    (x + got - r->start) * 100 >= len * c->opt.prefetch_percent)
                    ask_prefetch(c, t, r);
                b->next = x + 1;
                b->end = x + got;
                *id = x;
                return LEAFD_OK;
            }
        }
        if ((rc = slow_path(c, t, r)) != 0)
            return rc;
    }
}

int
leafd_next(struct leafd_client *c, const char *tag, int64_t *id)
{
    struct tblock *b = &tl_blocks[tl_last];

    /* The common case: this thread's block of the tag it asked for last. */
    if (c != NULL && b->cid == c->id && b->next < b->end && tag != NULL &&
        id != NULL && strcmp(b->t->name, tag) == 0) {
        *id = b->next++;
        return LEAFD_OK;
    }
    return next_refill(c, tag, id);
}

/* ---- lifecycle ---- */

struct leafd_client *
leafd_client_new(const char *urls, const struct leafd_client_options *opt,
                 const char **err)
{
    struct leafd_client *c;
    const char *p, *why = NULL;

    if (urls == NULL || *urls == '\0') {
        if (err)
            *err = "no server URL";
        return NULL;
    }
    if (lib_init() != 0) {
        if (err)
            *err = "out of memory: libcurl or the fork handlers could not be set up";
        return NULL;
    }
    if ((c = calloc(1, sizeof *c)) == NULL) {
        if (err)
            *err = "out of memory";
        return NULL;
    }
    c->id = atomic_fetch_add(&last_client_id, 1) + 1;
    if (opt != NULL)
        c->opt = *opt;
    if (c->opt.lease_min <= 0)
        c->opt.lease_min = 1000;
    if (c->opt.lease_max <= 0)
        c->opt.lease_max = 1000000;
    if (c->opt.lease_max < c->opt.lease_min)
        c->opt.lease_max = c->opt.lease_min;
    if (c->opt.prefetch_percent <= 0 || c->opt.prefetch_percent > 99)
        c->opt.prefetch_percent = 20;
    if (c->opt.target_ms <= 0)
        c->opt.target_ms = 1000;
    if (c->opt.timeout_ms <= 0)
        c->opt.timeout_ms = 2000;
    if (c->opt.dead_ms <= 0)
        c->opt.dead_ms = 1000;
    for (p = urls; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);

        while (n > 0 && p[n - 1] == '/')
            n--;
        if (n == 0 || n > 1000 || c->nservers == MAX_SERVERS ||
            (strncmp(p, "http://", 7) != 0 && strncmp(p, "https://", 8) != 0)) {
            why = "URLs must be 1 to 16 comma-separated http:// or https:// base URLs";
            goto fail;
        }
        if ((c->servers[c->nservers].url = calloc(1, n + 1)) == NULL) {
            why = "out of memory";
            goto fail;
        }
        memcpy(c->servers[c->nservers].url, p, n);
        c->nservers++;
        if (e == NULL)
            break;
        p = e + 1;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->work, NULL);
    pthread_cond_init(&c->done, NULL);
    if ((why = start_thread(c)) != NULL) {
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->work);
        pthread_cond_destroy(&c->done);
        goto fail;
    }
    pthread_mutex_lock(&clients_lock);
    c->next_client = clients;
    clients = c;
    pthread_mutex_unlock(&clients_lock);
    return c;

fail:
    if (err)
        *err = why;
    for (int i = 0; i < c->nservers; i++)
        free(c->servers[i].url);
    if (c->curl != NULL)
        curl_easy_cleanup(c->curl);
    free(c);
    return NULL;
}

void
leafd_client_free(struct leafd_client *c)
{
    struct tag *t, *tn;
    struct range *r, *rn;

    if (c == NULL)
        return;
    pthread_mutex_lock(&clients_lock);
    for (struct leafd_client **pp = &clients; *pp != NULL; pp = &(*pp)->next_client)
        if (*pp == c) {
            *pp = c->next_client;
            break;
        }
    pthread_mutex_unlock(&clients_lock);
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->lock);
    if (c->running)
        pthread_join(c->thread, NULL);
    for (t = atomic_load(&c->tags); t != NULL; t = tn) {
        tn = t->next_tag;
        for (int i = 0; i < t->npending; i++)
            free(t->pending[i]);
        free(atomic_load(&t->cur));
        free(t);
    }
    for (r = c->retired; r != NULL; r = rn) {
        rn = r->retired;
        free(r);
    }
    for (int i = 0; i < c->nservers; i++)
        free(c->servers[i].url);
    if (c->curl != NULL)
        curl_easy_cleanup(c->curl);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->work);
    pthread_cond_destroy(&c->done);
    if (tl_cache.id == c->id)
        tl_cache.id = 0;
    free(c);
}

/* ---- fork (see DESIGN) ---- */

static void
fork_prepare(void)
{
    pthread_mutex_lock(&clients_lock);
    for (struct leafd_client *c = clients; c != NULL; c = c->next_client)
        pthread_mutex_lock(&c->lock);
}

static void
fork_parent(void)
{
    for (struct leafd_client *c = clients; c != NULL; c = c->next_client)
        pthread_mutex_unlock(&c->lock);
    pthread_mutex_unlock(&clients_lock);
}

/* The parent's ranges are retired (never handed out here); the locks, taken
 * by fork_prepare, are made anew, as the background thread is: it does not
 * exist in the child. Its libcurl handle is left alone (its connections,
 * maybe mid-request, are the parent's): a leak of one handle per client and
 * fork. */
static void
client_after_fork(struct leafd_client *c)
{
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->work, NULL);
    pthread_cond_init(&c->done, NULL);
    c->running = 0;
    c->curl = NULL;
    for (struct tag *t = atomic_load(&c->tags); t != NULL; t = t->next_tag) {
        struct range *r = atomic_load(&t->cur);

        if (r != NULL) {
            r->retired = c->retired;
            c->retired = r;
            atomic_store(&t->cur, NULL);
        }
        for (int i = 0; i < t->npending; i++) {
            t->pending[i]->retired = c->retired;
            c->retired = t->pending[i];
        }
        t->npending = 0;
        t->want = t->fetching = 0;
    }
}

static void
fork_child(void)
{
    pthread_mutex_init(&clients_lock, NULL);
    /* A handler runs only once lib_init registered it, after libcurl's
     * setup: the child's library is ready, whatever lib_lock's state was. */
    pthread_mutex_init(&lib_lock, NULL);
    lib_ready = 1;
    for (struct leafd_client *c = clients; c != NULL; c = c->next_client)
        client_after_fork(c);
    /* The forking thread's blocks are its parent's IDs too. */
    memset(tl_blocks, 0, sizeof tl_blocks);
    tl_last = tl_victim = 0;
}

void
leafd_client_stats(struct leafd_client *c, struct leafd_client_stats *st)
{
    st->leases = atomic_load_explicit(&c->leases, memory_order_relaxed);
    st->http_requests = atomic_load_explicit(&c->http_requests, memory_order_relaxed);
    st->failovers = atomic_load_explicit(&c->failovers, memory_order_relaxed);
    st->lease_size = atomic_load_explicit(&c->last_size, memory_order_relaxed);
}

/* ---- snowflake IDs: leafd's own decoder (src/snowflake/sfcodec.c), the
 * parts of it that allocate nothing ---- */

static const char *
layout_why(enum sfcodec_layout_check r)
{
    switch (r) {
    case SFCODEC_LAYOUT_OK: return "ok";
    case SFCODEC_LAYOUT_BITS_RANGE:
        return "snowflake layout: bits out of range (timestamp and sequence 1 to 62, "
               "worker 0 to 62)";
    case SFCODEC_LAYOUT_BITS_SUM:
        return "snowflake layout: the bits must sum to 63 (or 53: IDs below 2^53)";
    case SFCODEC_LAYOUT_EPOCH_NEGATIVE: return "snowflake layout: the epoch is negative";
    case SFCODEC_LAYOUT_EPOCH_FUTURE: return "snowflake layout: the epoch is in the future";
    case SFCODEC_LAYOUT_RAN_OUT: return "snowflake layout: its timestamp ran out";
    case SFCODEC_LAYOUT_IN_MARGIN: break;       /* no margin asked */
    }
    return "snowflake layout: bad layout";
}

int
leafd_snowflake_decode_layout(uint64_t id, int64_t epoch_ms, int timestamp_bits,
                              int worker_bits, int sequence_bits,
                              struct leafd_snowflake *out)
{
    struct sfcodec_layout l;
    struct sfcodec_decoded d;
    struct timespec ts;
    enum sfcodec_layout_check r;
    int64_t now;

    clock_gettime(CLOCK_REALTIME, &ts);
    now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    r = sfcodec_layout_set(&l, epoch_ms, timestamp_bits, 0, worker_bits, sequence_bits,
                           now, 0);
    if (r != SFCODEC_LAYOUT_OK) {
        set_error("%s%s", layout_why(r), "");
        return -1;
    }
    if (sfcodec_decode_id(&l, id, &d) == -1) {
        set_error("not an ID of this layout: bit 63 set, or over its bits%s%s", "", "");
        return -1;
    }
    out->timestamp_ms = d.timestamp_ms;
    snprintf(out->time, sizeof out->time, "%s", d.time);
    out->worker_id = d.worker_id;
    out->sequence = d.sequence;
    return 0;
}

int
leafd_snowflake_decode(uint64_t id, struct leafd_snowflake *out)
{
    return leafd_snowflake_decode_layout(id, SFCODEC_LEAF_EPOCH_MS, 41, 10, 12, out);
}
