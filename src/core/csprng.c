/* csprng.c: per-thread buffered getrandom(2), thrown away after fork. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include "csprng.h"

#define CSPRNG_BUF 512                   /* bytes read per getrandom call */

static atomic_uint fork_gen;             /* bumped in every child */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static __thread struct {
    unsigned char buf[CSPRNG_BUF];
    size_t        left;                  /* unread bytes at the buffer's end */
    unsigned      gen;                   /* fork_gen the bytes were read in */
} tl;

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

/* Read exactly n bytes from the kernel. */
static int
csprng_read(unsigned char *p, size_t n)
{
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

int
csprng_fill(void *buf, size_t n)
{
    unsigned char *out = buf;
    unsigned gen;

    pthread_once(&atfork_once, csprng_register);
    gen = atomic_load_explicit(&fork_gen, memory_order_relaxed);
    if (tl.gen != gen) {
        /* Bytes read before a fork are the parent's too: never use them. */
        explicit_bzero(tl.buf, sizeof tl.buf);
        tl.left = 0;
        tl.gen = gen;
    }
    if (n > CSPRNG_BUF / 2)
        return csprng_read(out, n);
    while (n > 0) {
        size_t take;

        if (tl.left == 0) {
            if (csprng_read(tl.buf, sizeof tl.buf) < 0)
                return -1;
            tl.left = sizeof tl.buf;
        }
        take = n < tl.left ? n : tl.left;
        memcpy(out, tl.buf + sizeof tl.buf - tl.left, take);
        /* A byte handed out is wiped, so no later caller can see it again. */
        memset(tl.buf + sizeof tl.buf - tl.left, 0, take);
        tl.left -= take;
        out += take;
        n -= take;
    }
    assert(tl.left <= sizeof tl.buf);
    return 0;
}
