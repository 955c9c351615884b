/* csprng.h: random bytes for IDs whose uniqueness rests on randomness
 * (UUIDv7, ULID).
 *
 * Every call reads the kernel's CSPRNG (getrandom(2)); nothing is buffered
 * in the process, so a copy of the process (a fork, or a VM clone) holds no
 * random byte that it could hand out again. After a VM clone the bytes
 * differ only if the kernel reseeded on the clone (Linux 5.18 and later do
 * when the hypervisor exposes a VM generation ID); see docs/id-kinds.md.
 *
 * csprng_forks counts the forks (pthread_atfork) this process is a child
 * of, so that a generator can tell that its state was copied.
 *
 * Thread-safety: any thread may call either at any time.
 */
#ifndef LEAFD_CSPRNG_H
#define LEAFD_CSPRNG_H

#include <stddef.h>

/* Fill buf with n random bytes. Returns 0, or -1 with errno when the kernel
 * gives no random bytes (then buf holds nothing usable). */
int csprng_fill(void *buf, size_t n);

/* How many fork()s made this process from the one that first called it (0
 * in that one). The first call registers the fork handler: call it before
 * any fork that should count. */
unsigned csprng_forks(void);

#endif
