/* csprng.c: getrandom(2) on every call, and a count of forks. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/random.h>

#include "csprng.h"

static atomic_uint fork_gen;             /* bumped in every child */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void
csprng_child(void)
{
    atomic_fetch_add(&fork_gen, 1);
}

static void
csprng_register(void)
{
    pthread_atfork(NULL, NULL, csprng_child);
}

unsigned
csprng_forks(void)
{
    pthread_once(&atfork_once, csprng_register);
    return atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

int
csprng_fill(void *buf, size_t n)
{
    unsigned char *p = buf;

    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);

        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}
