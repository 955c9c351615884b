/* keyfile.h: reading the AES keys that conceal values (concealed serials,
 * concealed segment tags) from a file only the service user may read.
 *
 * A key file holds one key, or for a ring several, one per line, each as
 * 32, 48 or 64 hex digits (AES-128, -192 or -256); blank lines and lines
 * starting with '#' are skipped, white space around a key is ignored. A
 * file of exactly 16, 24 or 32 bytes that is not such a text is one raw
 * key. The file must be a regular file that group and others can neither
 * read nor write (mode & 077 == 0); it is opened without following a
 * symbolic link.
 *
 * Failure: -1 with *cause, a malloc'd message that names the file, says
 * what is wrong and what to do. The key bytes are wiped from every buffer
 * this module uses before it returns. Thread-safe (no shared state).
 */
#ifndef LEAFD_KEYFILE_H
#define LEAFD_KEYFILE_H

#include <stddef.h>
#include <stdint.h>

#define KEYFILE_KEYS_MAX 8          /* keys of one ring */
#define KEYFILE_BYTES_MAX 4096      /* the largest file read */

struct keyfile_key {
    uint8_t bytes[32];
    size_t  len;                    /* 16, 24 or 32 */
};

/* Read up to max keys (1 <= max <= KEYFILE_KEYS_MAX) from path, in the
 * file's order, into keys; *n is how many. A file with no key, or with
 * more than max, is refused (max == 1: "holds one key"). 0, or -1 with
 * *cause. */
int keyfile_read(const char *path, struct keyfile_key *keys, int max, int *n,
                 char **cause);

/* The keys of a key file's text (buf, len bytes), as keyfile_read reads
 * them (without its raw-key case): 0, or -1 with *why (malloc'd: a line
 * that is not a key, more keys than max, none). For the fuzzer. */
int keyfile_parse(const uint8_t *buf, size_t len, struct keyfile_key *keys,
                  int max, int *n, char **why);

/* Wipe n keys (after they were turned into cipher keys). */
void keyfile_wipe(struct keyfile_key *keys, int n);

#endif
