/* keyfile.c: AES keys from a key file (keyfile.h). */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keyfile.h"
#include "util.h"

static int
hex_val(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = tolower(ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* One line [a, b) as a hex key into *k: 1, or 0 when it is not one. */
static int
hex_key(const uint8_t *buf, size_t a, size_t b, struct keyfile_key *k)
{
    size_t i;

    if (b - a != 32 && b - a != 48 && b - a != 64)
        return 0;
    for (i = a; i < b; i++)
        if (hex_val(buf[i]) < 0)
            return 0;
    k->len = 0;
    for (i = a; i < b; i += 2)
        k->bytes[k->len++] = (uint8_t)(hex_val(buf[i]) << 4 | hex_val(buf[i + 1]));
    return 1;
}

int
keyfile_parse(const uint8_t *buf, size_t len, struct keyfile_key *keys, int max,
            int *n, char **why)
{
    size_t p = 0, a, b, e;
    int line = 0;

    *n = 0;
    while (p < len) {
        line++;
        for (e = p; e < len && buf[e] != '\n'; e++)
            ;
        a = p;
        b = e;
        p = e + 1;
        while (a < b && isspace(buf[a]))
            a++;
        while (b > a && isspace(buf[b - 1]))
            b--;
        if (a == b || buf[a] == '#')
            continue;
        if (*n == max) {
            *why = max == 1 ? xasprintf("holds more than one key (line %d); "
                                        "this file holds one key", line)
                            : xasprintf("holds more than %d keys (line %d)",
                                        max, line);
            return -1;
        }
        if (!hex_key(buf, a, b, &keys[*n])) {
            *why = xasprintf("line %d is not a key: expected 32, 48 or 64 hex "
                             "digits (an AES-128, -192 or -256 key), got %zu "
                             "characters", line, b - a);
            return -1;
        }
        (*n)++;
    }
    if (*n == 0) {
        *why = xasprintf("holds no key");
        return -1;
    }
    return 0;
}

int
keyfile_read(const char *path, struct keyfile_key *keys, int max, int *n,
             char **cause)
{
    uint8_t buf[KEYFILE_BYTES_MAX + 1];
    size_t len = 0;
    struct stat st;
    ssize_t r;
    char *why = NULL;
    int fd, rc = -1;

    assert(max >= 1 && max <= KEYFILE_KEYS_MAX);
    *n = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd == -1) {
        *cause = xasprintf("%s: cannot open (%s): create it with 32 random bytes "
                           "(e.g. head -c 32 /dev/urandom | xxd -p -c 64 > FILE; "
                           "chmod 600 FILE)", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
        close(fd);
        *cause = xasprintf("%s: not a regular file", path);
        return -1;
    }
    if (st.st_mode & 077) {
        close(fd);
        *cause = xasprintf("%s: mode %03o lets group or others read or change "
                           "the key that conceals the values: chmod 600 %s",
                           path, (unsigned)(st.st_mode & 0777), path);
        return -1;
    }
    while (len < sizeof buf && (r = read(fd, buf + len, sizeof buf - len)) > 0)
        len += (size_t)r;
    close(fd);
    if (len > KEYFILE_BYTES_MAX) {
        why = xasprintf("is larger than %d bytes", KEYFILE_BYTES_MAX);
    } else if (keyfile_parse(buf, len, keys, max, n, &why) == -1 &&
               (len == 16 || len == 24 || len == 32)) {
        /* Not a text of keys, but the size of a raw key: that is what it is. */
        free(why);
        why = NULL;
        memcpy(keys[0].bytes, buf, len);
        keys[0].len = len;
        *n = 1;
    }
    if (why == NULL && *n >= 1)
        rc = 0;
    else {
        keyfile_wipe(keys, max);
        *n = 0;
        *cause = xasprintf("%s: %s", path, why);
    }
    free(why);
    memset(buf, 0, sizeof buf);
    return rc;
}

void
keyfile_wipe(struct keyfile_key *keys, int n)
{
    for (int i = 0; i < n; i++) {
        memset(keys[i].bytes, 0, sizeof keys[i].bytes);
        keys[i].len = 0;
    }
    /* Keep the compiler from dropping the stores as dead. */
    __asm__ __volatile__("" : : "r"(keys) : "memory");
}
