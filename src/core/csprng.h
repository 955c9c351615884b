/* csprng.h: random bytes for IDs whose uniqueness rests on randomness
 * (UUIDv7, ULID).
 *
 * The bytes come from the kernel's CSPRNG (getrandom(2)), read in blocks into
 * a per-thread buffer so that a request does not pay a system call per ID.
 * A child process never reuses its parent's buffered bytes: a fork bumps a
 * generation (pthread_atfork) and every thread's buffer from before it is
 * thrown away on its next use.
 *
 * Thread-safety: any thread may call csprng_fill at any time; each thread
 * reads only its own buffer.
 */
#ifndef LEAFD_CSPRNG_H
#define LEAFD_CSPRNG_H

#include <stddef.h>

/* Fill buf with n random bytes. Returns 0, or -1 with errno when the kernel
 * gives no random bytes (then buf holds nothing usable). */
int csprng_fill(void *buf, size_t n);

#endif
