/* ftfix.c: preloaded before libfaketime in the clock tests.
 *
 * libfaketime 0.9.10 (Debian 12) with FAKETIME_DONT_FAKE_MONOTONIC=1 breaks
 * pthread_cond_timedwait on a CLOCK_MONOTONIC condition variable: it returns
 * ETIMEDOUT at once (fixed upstream by wolfcw/libfaketime#503). leafd waits on
 * such condition variables for ZooKeeper answers (zk.c: "no answer in 2000
 * ms" at once, so the node never gets a worker ID) and in the snowflake
 * keeper (snowflake.c: the thread spins at 100% CPU). This shim, preloaded
 * before libfaketime, sends waits on monotonic condition variables straight
 * to glibc's pthread_cond_clockwait (which libfaketime leaves alone) and every
 * other wait on to libfaketime.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#define MAXC 1024
static pthread_cond_t *mono[MAXC];
static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;

static int find(pthread_cond_t *c)
{
    for (int i = 0; i < MAXC; i++)
        if (mono[i] == c)
            return i;
    return -1;
}

int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a)
{
    static int (*next)(pthread_cond_t *, const pthread_condattr_t *);
    clockid_t clk = CLOCK_REALTIME;
    int i;

    if (next == NULL)
        next = dlvsym(RTLD_NEXT, "pthread_cond_init", "GLIBC_2.3.2");
    if (a != NULL)
        pthread_condattr_getclock(a, &clk);
    pthread_mutex_lock(&lk);
    i = find(c);
    if (clk == CLOCK_MONOTONIC && i < 0 && (i = find(NULL)) >= 0)
        mono[i] = c;
    else if (clk != CLOCK_MONOTONIC && i >= 0)
        mono[i] = NULL;
    pthread_mutex_unlock(&lk);
    return next(c, a);
}

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                           const struct timespec *ts)
{
    static int (*next)(pthread_cond_t *, pthread_mutex_t *,
                       const struct timespec *);
    int i;

    pthread_mutex_lock(&lk);
    i = find(c);
    pthread_mutex_unlock(&lk);
    if (i >= 0)
        return pthread_cond_clockwait(c, m, CLOCK_MONOTONIC, ts);
    if (next == NULL)
        next = dlvsym(RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2");
    return next(c, m, ts);
}
