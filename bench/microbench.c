/* microbench.c: in-process throughput of the ID generators, without HTTP.
 *
 *   build/microbench [-d SECONDS] [-r RUNS] [-s STEP]
 *
 * Segment mode: a `struct segments` with fake hooks (as tests/unit/check_segment.c)
 * holds tags whose segments a helper thread installs the moment one is asked
 * for, STEP IDs at a time (default 2^24, so the "database" is never what
 * limits). Worker threads take one ID at a time (a zeroed struct
 * segment_take, the tag looked up by name) and check that each thread's IDs
 * increase. Measured:
 *   segment_take        1 thread, 2 threads on one tag, 2 threads a tag each,
 *                       1 thread with 1000 IDs per call: every ID from the
 *                       shared counter, as the server takes them
 * Snowflake mode: snowflake_next for one ID at a time, Leaf's layout (12
 * sequence bits: at most 4,096,000 IDs/s per worker), and a 21-bit sequence
 * layout that the clock never limits (the generator's own cost).
 * UUIDv7 and ULID: uuid7_next and ulid_next on one generator, one ID per
 * call (as GET /uuid) from 1 and 2 threads, and 100 per call; the random
 * bits included (getrandom(2)), as the server pays them.
 *
 * FF1 (src/core/ff1.c): ff1_encrypt_u64 over a 20-bit domain (radix 2,
 * 20 digits) and a 6-digit decimal one, AES-256, an 11-byte tweak, one
 * value per call, from 1 and 2 threads (a key copy each); "IDs/s" are
 * encipherments/s, and each is checked by deciphering a sample.
 *
 * Concealed segment tags (src/segment/conceal.c): conceal_ids, the call
 * that turns a request's counters into a concealed tag's IDs (2^20-ID
 * blocks, AES-256, the tag "bench-hidden"), one counter per call (as GET
 * /segment/<tag>) from 1 and 2 threads, 1000 per call (?count=1000), and
 * one counter per call from a new block each time (the thread's domain
 * for the tag made again every call: its cost, paid once per block by the
 * server). "IDs/s" are counters concealed per second; each ID is checked
 * to stay in its counter's block.
 *
 * Each figure is the median of RUNS runs of SECONDS (default 5 x 0.5 s).
 * Output, one line per figure, for bench/bench.py:
 *   RESULT <name> threads=<n> per_thread=<IDs/s> total=<IDs/s> limit=<IDs/s|0>
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conceal.h"
#include "config.h"
#include "ff1.h"
#include "segment.h"
#include "snowflake.h"
#include "ulid.h"
#include "uuid7.h"

#define MAX_THREADS 8

static double run_seconds = 0.5;
static int    runs = 5;
static int64_t big_step = 1 << 24;

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
    /* false positive: report() fills v[0..n), n = runs, which main()
     * holds to 1..64; cppcheck assumes the fill loop may not run */
    // cppcheck-suppress uninitvar
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the fake loader: installs a segment as soon as one is asked for ---- */

static struct segments *segs;
/* segment_take through a pointer: cppcheck's whole-program check cannot
 * see that segment_take writes a fresh take's other fields before it reads
 * them (a false positive), and a memset per call would cost the figure
 * ~6 ns that the server does not pay. */
static enum segment_result (*take_fn)(struct segments *, const char *, size_t,
                                      int64_t, struct segment_take *) = segment_take;
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t load_cv = PTHREAD_COND_INITIALIZER;
static struct segment_tag *load_queue[64];
static int load_n;
static int loader_stop;
static int64_t db_max = 1;                 /* the fake leaf_alloc's max_id */
static _Atomic int64_t loads_served;

static void
fake_load(void *arg, struct segment_tag *t)
{
    (void)arg;
    pthread_mutex_lock(&load_mu);
    load_queue[load_n++] = t;              /* one per tag at most: fits */
    pthread_cond_signal(&load_cv);
    pthread_mutex_unlock(&load_mu);
}

static void
fake_lookup(void *arg, const char *name)
{
    (void)arg;
    segment_tag_missing(segs, name);
}

static void *
loader_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&load_mu);
    for (;;) {
        while (load_n == 0 && !loader_stop)
            pthread_cond_wait(&load_cv, &load_mu);
        if (loader_stop)
            break;
        struct segment_tag *t = load_queue[--load_n];
        pthread_mutex_unlock(&load_mu);
        /* UPDATE max_id = max_id + step; SELECT max_id: one "transaction". */
        int64_t step = segment_next_step(segs, t);
        db_max += step;                    /* only this thread writes it */
        segment_install(segs, t, db_max, step, big_step);
        atomic_fetch_add(&loads_served, 1);
        pthread_mutex_lock(&load_mu);
    }
    pthread_mutex_unlock(&load_mu);
    return NULL;
}

/* ---- a timed run of N threads ---- */

struct worker {
    pthread_t   th;
    int         id;
    const char *tag;
    size_t      tag_len;
    int64_t     batch;                     /* IDs per segment_take */
    struct snowflake *sf;
    int         warm_up;                   /* snowflake: spend the borrowing */
    struct uuid7_gen *ug;                  /* uuid: one of these two */
    struct ulid_gen  *lg;
    struct ff1_key   *fk;                  /* ff1: this thread's key copy */
    const struct ff1_domain *fd;
    struct conceal     *cc;                /* conceal: the tag's set-up */
    struct conceal_tag *ct;
    int         new_block;                 /* conceal: a block per call */
    uint64_t    ids;
    uint64_t    waits;
    uint64_t    errors;                    /* IDs not increasing: a bug */
    double      seconds;
};

static _Atomic int go, stop;

/* A worker's figures, as it stops (its thread's return value). */
static void *
worker_done(struct worker *w, double t0, uint64_t ids, uint64_t waits,
            uint64_t errors)
{
    w->seconds = now_s() - t0;
    w->ids = ids;
    w->waits = waits;
    w->errors = errors;
    return NULL;
}

static void *
segment_worker(void *arg)
{
    struct worker *w = arg;
    int64_t prev = -1;
    uint64_t n = 0, waits = 0, errors = 0;
    double t0;

    while (!atomic_load(&go))
        ;
    t0 = now_s();
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < 4096; i++) {
            /* A fresh take, as each request starts one. Only these fields
             * are read before segment_take writes them; a memset of the
             * whole struct (144 bytes, ranges included) compiles to
             * `rep stos` here and would add ~6 ns to every call. */
            struct segment_take st;
            st.tag = NULL;
            st.want = 0;
            st.nranges = 0;
            /* cppcheck: segment_take writes st.limit before reading it, and
             * nranges >= 1 on SEGMENT_OK (false positives) */
            if (take_fn(segs, w->tag, w->tag_len, w->batch, &st) != SEGMENT_OK) { // cppcheck-suppress uninitvar
                waits++;                   /* both buffers empty: retry */
                continue;
            }
            errors += st.ranges[0].start <= prev;
            // cppcheck-suppress negativeIndex
            prev = st.ranges[st.nranges - 1].start + st.ranges[st.nranges - 1].count - 1;
            n += (uint64_t)w->batch;
        }
    }
    return worker_done(w, t0, n, waits, errors);
}

static void *
snowflake_worker(void *arg)
{
    struct worker *w = arg;
    uint64_t prev = 0, n = 0, waits = 0, errors = 0, id;
    struct snowflake_refusal why;
    double t0;

    while (!atomic_load(&go))
        ;
    /* Spend the borrowing allowance first: a run starts max_borrow_ms ahead
     * of the clock, as a busy node is, so what follows is the steady rate
     * (not a burst of up to max_borrow_ms of sequence). */
    while (w->warm_up && !atomic_load(&stop)) {
        int rc = snowflake_next(w->sf, 1, &id, &why);
        if (rc == SNOWFLAKE_OK)
            prev = id;
        else if (rc != SNOWFLAKE_WAIT || strcmp(why.code, "borrow_limit") == 0)
            break;
    }
    t0 = now_s();
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < 1024; i++) {
            if (snowflake_next(w->sf, 1, &id, &why) != SNOWFLAKE_OK) {
                waits++;                   /* sequence used up: next ms */
                continue;
            }
            errors += id <= prev;
            prev = id;
            n++;
        }
    }
    return worker_done(w, t0, n, waits, errors);
}

/* Runs nthreads workers once; returns per-thread IDs/s (mean over threads)
 * and adds the total to *total. */
static double
timed_run(void *(*fn)(void *), struct worker *ws, int nthreads, double *total,
          uint64_t *errors)
{
    double sum = 0;

    atomic_store(&go, 0);
    atomic_store(&stop, 0);
    for (int i = 0; i < nthreads; i++)
        pthread_create(&ws[i].th, NULL, fn, &ws[i]);
    atomic_store(&go, 1);
    usleep((useconds_t)(run_seconds * 1e6));
    atomic_store(&stop, 1);
    for (int i = 0; i < nthreads; i++) {
        pthread_join(ws[i].th, NULL);
        sum += ws[i].ids / ws[i].seconds;
        *errors += ws[i].errors;
    }
    *total = sum;
    return sum / nthreads;
}

static int failures;

static void
report(const char *name, void *(*fn)(void *), struct worker *ws, int nthreads,
       double limit)
{
    double per[64], tot[64];
    uint64_t errors = 0;

    for (int r = 0; r < runs; r++)
        per[r] = timed_run(fn, ws, nthreads, &tot[r], &errors);
    if (errors) {
        fprintf(stderr, "microbench: %s: %" PRIu64 " IDs out of order\n", name, errors);
        failures++;
    }
    printf("RESULT %s threads=%d per_thread=%.0f total=%.0f limit=%.0f\n", name,
           nthreads, median(per, runs), median(tot, runs), limit);
    fflush(stdout);
}

/* ---- segment mode ---- */

/* segment_take, every ID from the shared counter, as the server takes
 * them. */
static void
bench_segment(void)
{
    struct segment_options o = { .prefetch_percent = 10, .max_step = big_step,
                                 .duration_ms = 900000, .negative_ttl_ms = 10000 };
    struct segment_hooks h = { .load = fake_load, .lookup = fake_lookup };
    static const char *names[] = { "bench-a", "bench-b" };
    struct store_row rows[2];
    struct worker ws[MAX_THREADS];
    pthread_t loader;

    segs = segments_new(&o, &h);
    loader_stop = 0;
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < 2; i++) {
        snprintf(rows[i].biz_tag, sizeof rows[i].biz_tag, "%s", names[i]);
        rows[i].max_id = 1;
        rows[i].step = big_step;
    }
    segment_refresh(segs, rows, 2, segments_generation(segs));
    pthread_create(&loader, NULL, loader_main, NULL);
    /* First take of each tag waits for its first segment. */
    for (int i = 0; i < 2; i++) {
        struct segment_take st;
        do
            memset(&st, 0, sizeof st);
        while (segment_take(segs, names[i], strlen(names[i]), 1, &st) != SEGMENT_OK);
    }

    memset(ws, 0, sizeof ws);
    for (int i = 0; i < MAX_THREADS; i++) {
        ws[i].id = i;
        ws[i].tag = names[0];
        ws[i].tag_len = strlen(names[0]);
        ws[i].batch = 1;
    }
    report("segment_take", segment_worker, ws, 1, 0);
    report("segment_take_shared_tag", segment_worker, ws, 2, 0);
    ws[1].tag = names[1];
    ws[1].tag_len = strlen(names[1]);
    report("segment_take_tag_each", segment_worker, ws, 2, 0);
    ws[0].batch = 1000;
    report("segment_take_count1000", segment_worker, ws, 1, 0);

    pthread_mutex_lock(&load_mu);
    loader_stop = 1;
    pthread_cond_signal(&load_cv);
    pthread_mutex_unlock(&load_mu);
    pthread_join(loader, NULL);
    fprintf(stderr, "microbench: segment: %" PRId64 " segments of %" PRId64
            " installed by the helper thread\n", atomic_load(&loads_served),
            big_step);
    segments_free(segs);
}

/* ---- snowflake mode ----
 * SNOWFLAKE MICROBENCHMARK HOOK: snowflake_next() from src/snowflake/snowflake.h, one
 * ID per call, a fake fence store (persist always succeeds at once), the
 * keeper thread running, leafd's defaults otherwise (max_borrow_ms 1000,
 * fence_step_ms 3000). Each thread first spends the borrowing allowance
 * (see snowflake_worker), so the Leaf layout shows its steady-state rate. */

static int
fake_persist(void *arg, int64_t fence_ms, char **cause)
{
    (void)arg;
    (void)fence_ms;
    (void)cause;
    return 0;
}

static struct snowflake *
mk_snowflake(int worker_bits, int sequence_bits)
{
    struct snowflake_options o;
    struct timespec ts;
    char *cause = NULL;
    struct snowflake *sf;

    clock_gettime(CLOCK_REALTIME, &ts);
    memset(&o, 0, sizeof o);
    if (sfcodec_layout_init(&o.layout, SFCODEC_LEAF_EPOCH_MS, 41, 0, worker_bits,
                       sequence_bits, (int64_t)ts.tv_sec * 1000, 365, &cause) != 0) {
        fprintf(stderr, "microbench: layout: %s\n", cause);
        free(cause);
        return NULL;
    }
    o.worker_id = 1;
    o.start_fence_ms = 0;
    o.max_backward_ms = 1000;
    o.max_borrow_ms = 1000;
    o.fence_step_ms = 3000;
    o.start_wait_ms = 5000;
    o.count_max = 4096;
    o.backend.persist = fake_persist;
    sf = snowflake_create(&o, &cause);
    if (sf == NULL) {
        fprintf(stderr, "microbench: snowflake_create: %s\n", cause);
        free(cause);
    }
    return sf;
}

static void
bench_snowflake(void)
{
    struct worker ws[MAX_THREADS];
    struct snowflake *leaf = mk_snowflake(10, 12), *wide = mk_snowflake(1, 21);

    if (leaf == NULL || wide == NULL) {
        failures++;
        snowflake_stop(leaf);
        snowflake_stop(wide);
        return;
    }
    memset(ws, 0, sizeof ws);
    for (int i = 0; i < MAX_THREADS; i++) {
        ws[i].sf = leaf;
        ws[i].warm_up = 1;
    }
    report("snowflake_next", snowflake_worker, ws, 1, 4096000);
    report("snowflake_next", snowflake_worker, ws, 2, 4096000);
    /* 2^21 IDs per ms: the clock never limits, nothing to spend. */
    for (int i = 0; i < MAX_THREADS; i++) {
        ws[i].sf = wide;
        ws[i].warm_up = 0;
    }
    report("snowflake_next_seq21", snowflake_worker, ws, 1, 0);
    report("snowflake_next_seq21", snowflake_worker, ws, 2, 0);
    snowflake_stop(leaf);
    snowflake_stop(wide);
}

/* ---- UUIDv7 and ULID ---- */

#define UUID_BATCH_MAX 100

static void *
uuid_worker(void *arg)
{
    struct worker *w = arg;
    uint8_t out[UUID_BATCH_MAX][16], prev[16];
    uint64_t n = 0, errors = 0;
    size_t k = (size_t)w->batch;
    double t0;

    memset(prev, 0, sizeof prev);
    while (!atomic_load(&go))
        ;
    t0 = now_s();
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < 256; i++) {
            if ((w->ug != NULL ? uuid7_next(w->ug, k, (struct uuid7 *)out)
                               : ulid_next(w->lg, k, (struct ulid *)out)) != 0) {
                errors++;                  /* no random bytes: a failure */
                continue;
            }
            errors += memcmp(prev, out[0], 16) >= 0;
            memcpy(prev, out[k - 1], 16);
            n += k;
        }
    }
    return worker_done(w, t0, n, 0, errors);
}

static void
bench_uuid(void)
{
    struct worker ws[MAX_THREADS];
    struct uuid7_gen *ug = uuid7_gen_new(NULL, NULL);
    struct ulid_gen *lg = ulid_gen_new(NULL, NULL);
    static const struct { const char *name; int ulid, threads, batch; } figs[] = {
        { "uuid7_next", 0, 1, 1 }, { "uuid7_next", 0, 2, 1 },
        { "uuid7_next_batch100", 0, 1, 100 },
        { "ulid_next", 1, 1, 1 }, { "ulid_next", 1, 2, 1 },
        { "ulid_next_batch100", 1, 1, 100 },
    };

    for (size_t f = 0; f < sizeof figs / sizeof figs[0]; f++) {
        memset(ws, 0, sizeof ws);
        for (int i = 0; i < MAX_THREADS; i++) {
            ws[i].ug = figs[f].ulid ? NULL : ug;
            ws[i].lg = figs[f].ulid ? lg : NULL;
            ws[i].batch = figs[f].batch;
        }
        report(figs[f].name, uuid_worker, ws, figs[f].threads, 0);
    }
    uuid7_gen_free(ug);
    ulid_gen_free(lg);
}

/* ---- FF1 ---- */

static void *
ff1_worker(void *arg)
{
    struct worker *w = arg;
    uint64_t n = 0, errors = 0, x = (uint64_t)w->id * 7919, y, back;
    uint64_t size = w->fd->radix == 2 ? 1u << 20 : 1000000;
    double t0;

    while (!atomic_load(&go))
        ;
    t0 = now_s();
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < 1024; i++) {
            x = x + 1 < size ? x + 1 : 0;
            if (ff1_encrypt_u64(w->fk, w->fd, x, &y) != 0 || y >= size)
                errors++;
            n++;
        }
        if (ff1_decrypt_u64(w->fk, w->fd, y, &back) != 0 || back != x)
            errors++;
    }
    return worker_done(w, t0, n, 0, errors);
}

static void
bench_ff1(void)
{
    static const uint8_t key[32] = "leafd microbench FF1 key 256 bit";
    struct ff1_key *k = ff1_key_new(key, sizeof key, NULL);
    struct ff1_domain dom[2];
    struct worker ws[MAX_THREADS];
    static const char *names[2] = {"ff1_encrypt_bin20", "ff1_encrypt_dec6"};

    if (k == NULL || ff1_domain_init(&dom[0], k, 2, 20, "PAY20261128", 11, NULL) != 0 ||
        ff1_domain_init(&dom[1], k, 10, 6, "PAY20261128", 11, NULL) != 0) {
        fprintf(stderr, "microbench: ff1 set-up failed\n");
        failures++;
        ff1_key_free(k);
        return;
    }
    for (int d = 0; d < 2; d++) {
        for (int threads = 1; threads <= 2; threads++) {
            memset(ws, 0, sizeof ws);
            for (int i = 0; i < threads; i++) {
                ws[i].id = i;
                ws[i].fk = ff1_key_dup(k);
                ws[i].fd = &dom[d];
            }
            report(names[d], ff1_worker, ws, threads, 0);
            for (int i = 0; i < threads; i++)
                ff1_key_free(ws[i].fk);
        }
    }
    ff1_key_free(k);
}

/* ---- concealed segment tags ---- */

#define CONCEAL_BATCH_MAX 1000

static void *
conceal_worker(void *arg)
{
    struct worker *w = arg;
    unsigned bits = conceal_bits(w->cc);
    uint64_t v[CONCEAL_BATCH_MAX], n = 0, errors = 0;
    /* Thread i takes blocks i + 1, i + 3, ... (its own, as a node's). */
    uint64_t block = 1 + (uint64_t)w->id, off = 0, mask = ((uint64_t)1 << bits) - 1;
    size_t k = (size_t)w->batch;
    double t0;

    while (!atomic_load(&go))
        ;
    t0 = now_s();
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < 64; i++) {
            for (size_t j = 0; j < k; j++) {
                if (off > mask) {
                    off = 0;
                    block += 2;
                }
                v[j] = block << bits | off++;
            }
            uint64_t first = v[0] >> bits, last = v[k - 1] >> bits;

            conceal_ids(w->cc, w->ct, v, k);
            errors += (v[0] >> bits) != first || (v[k - 1] >> bits) != last;
            n += k;
            if (w->new_block) {
                off = 0;
                block += 2;
            }
        }
    }
    return worker_done(w, t0, n, 0, errors);
}

static void
bench_conceal(void)
{
    static const char *hex =
        "6c6561666420636f6e6365616c2062656e6368206b65792c2032353620626974";
    char path[] = "/tmp/leafd-microbench-key-XXXXXX", *cause = NULL;
    struct worker ws[MAX_THREADS];
    struct config cfg;
    struct conceal *cc = NULL;
    int fd = mkstemp(path);                /* mode 600, as keyfile.h wants */
    static const struct { const char *name; int threads, batch, new_block; } figs[] = {
        { "conceal_ids", 1, 1, 0 }, { "conceal_ids", 2, 1, 0 },
        { "conceal_ids_count1000", 1, 1000, 0 },
        { "conceal_ids_new_block", 1, 1, 1 },
    };

    config_defaults(&cfg);
    if (fd == -1 || write(fd, hex, strlen(hex)) != (ssize_t)strlen(hex)) {
        fprintf(stderr, "microbench: conceal: cannot write a key file in /tmp\n");
        failures++;
        goto out;
    }
    free(cfg.conceal_tags);
    free(cfg.conceal_key_file);
    cfg.conceal_tags = xstrdup("bench-hidden");
    cfg.conceal_key_file = xstrdup(path);
    cfg.conceal_bits = 20;
    cc = conceal_new(&cfg, &cause);
    unlink(path);                          /* read: not needed any more */
    if (cc == NULL) {
        fprintf(stderr, "microbench: conceal_new: %s\n", cause ? cause : "no tag");
        free(cause);
        failures++;
        goto out;
    }
    for (size_t f = 0; f < sizeof figs / sizeof figs[0]; f++) {
        memset(ws, 0, sizeof ws);
        for (int i = 0; i < MAX_THREADS; i++) {
            ws[i].id = i;
            ws[i].cc = cc;
            ws[i].ct = conceal_find(cc, "bench-hidden", 12);
            ws[i].batch = figs[f].batch;
            ws[i].new_block = figs[f].new_block;
        }
        report(figs[f].name, conceal_worker, ws, figs[f].threads, 0);
    }
out:
    conceal_free(cc);
    config_free(&cfg);
    if (fd != -1) {
        close(fd);
        unlink(path);                      /* when conceal_new was not reached */
    }
}

int
main(int argc, char **argv)
{
    int c;
    const char *only = NULL;

    while ((c = getopt(argc, argv, "d:r:s:o:")) != -1) {
        switch (c) {
        case 'd': run_seconds = atof(optarg); break;
        case 'r': runs = atoi(optarg); break;
        case 's': big_step = atoll(optarg); break;
        case 'o': only = optarg; break;
        default:
            fprintf(stderr, "usage: %s [-d SECONDS] [-r RUNS] [-s STEP] "
                    "[-o segment|snowflake|uuid|ff1|conceal]\n", argv[0]);
            return 2;
        }
    }
    if (runs < 1 || runs > 64 || run_seconds <= 0 || big_step < 1) {
        fprintf(stderr, "microbench: bad -d, -r or -s\n");
        return 2;
    }
    if (only == NULL || strcmp(only, "segment") == 0) {
        bench_segment();
    }
    if (only == NULL || strcmp(only, "snowflake") == 0)
        bench_snowflake();
    if (only == NULL || strcmp(only, "uuid") == 0)
        bench_uuid();
    if (only == NULL || strcmp(only, "ff1") == 0)
        bench_ff1();
    if (only == NULL || strcmp(only, "conceal") == 0)
        bench_conceal();
    return failures ? 1 : 0;
}
