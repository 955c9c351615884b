/* fuzz_conceal.c: libFuzzer target for concealed segment tags' parsers:
 * the key file's text (src/core/keyfile.c), the segment.conceal list and
 * the key records read from leaf_alloc (src/segment/conceal.c).
 *
 * Input: byte 0 picks the part.
 *  0: the rest is a key file's text. Checked: accepted exactly when every
 *     line that is not blank or '#' is 32, 48 or 64 hex digits (around
 *     white space) and there are 1..8 of them; each key's length is the
 *     line's digits / 2; a refusal has a reason.
 *  1: the rest is segment.conceal's value (with a fixed key file).
 *     Checked: a refusal has a reason; an accepted list has 1..64 tags,
 *     each found by its name.
 *  2: the rest is up to 8 rows: per row a name length byte, the name, a
 *     byte that picks the description (mod 3: none, a key record's, an
 *     intent's), 8 bytes of
 *     max_id and 1 of step, then 8 bytes of an ID. Checked: the verdict is
 *     one of the four and a refusal or a wait says why; conceal_reveal of the ID
 *     either fails with a reason and the key's name, or gives a counter
 *     in the ID's block (of the record's bits, 20..30); a counter revealed
 *     under this node's key and bits enciphers back to the ID.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conceal.h"
#include "config.h"
#include "fuzz.h"
#include "keyfile.h"

static char keypath[64];

static void
remove_key(void)
{
    unlink(keypath);
}

static int
is_key_line(const uint8_t *p, size_t a, size_t b)
{
    while (a < b && (p[a] == ' ' || (p[a] >= '\t' && p[a] <= '\r')))
        a++;
    while (b > a && (p[b - 1] == ' ' || (p[b - 1] >= '\t' && p[b - 1] <= '\r')))
        b--;
    if (a == b || p[a] == '#')
        return 0;                       /* skipped */
    if (b - a != 32 && b - a != 48 && b - a != 64)
        return -1;
    for (size_t i = a; i < b; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || ((p[i] | 32) >= 'a' && (p[i] | 32) <= 'f')))
            return -1;
    return (int)(b - a);
}

static void
keyfile_part(const uint8_t *d, size_t n)
{
    struct keyfile_key keys[KEYFILE_KEYS_MAX];
    int nk = 0, want = 0, bad = 0, lens[64];
    char *why = NULL;
    size_t p = 0;

    while (p < n) {
        size_t e = p;
        int k;

        while (e < n && d[e] != '\n')
            e++;
        k = is_key_line(d, p, e);
        if (k < 0)
            bad = 1;
        else if (k > 0 && want < 64)
            lens[want++] = k;
        else if (k > 0)
            want++;
        p = e + 1;
    }
    if (keyfile_parse(d, n, keys, KEYFILE_KEYS_MAX, &nk, &why) == 0) {
        FUZZ_ASSERT(!bad && want >= 1 && want <= KEYFILE_KEYS_MAX && nk == want);
        for (int i = 0; i < nk; i++)
            FUZZ_ASSERT(keys[i].len == (size_t)lens[i] / 2);
    } else {
        FUZZ_ASSERT(why != NULL && why[0] != '\0');
        FUZZ_ASSERT(bad || want == 0 || want > KEYFILE_KEYS_MAX);
    }
    free(why);
}

static struct conceal *
conceal_of(const char *list, char **cause)
{
    struct config cfg;
    struct conceal *c;

    config_defaults(&cfg);
    free(cfg.conceal_tags);
    free(cfg.conceal_key_file);
    cfg.conceal_tags = strdup(list);
    cfg.conceal_key_file = strdup(keypath);
    c = conceal_new(&cfg, cause);
    config_free(&cfg);
    return c;
}

static void
list_part(const uint8_t *d, size_t n)
{
    char *list = malloc(n + 1), *cause = NULL;
    struct conceal *c;

    memcpy(list, d, n);
    list[n] = '\0';
    c = conceal_of(list, &cause);
    if (c == NULL) {
        /* An empty list (nothing but separators, or a NUL first) is no
         * conceal at all, without a reason. */
        FUZZ_ASSERT(cause != NULL || list[strspn(list, " \t,")] == '\0');
    } else {
        FUZZ_ASSERT(conceal_count(c) >= 1 && conceal_count(c) <= CONCEAL_TAGS_MAX);
        for (size_t i = 0, k = 0; list[i] != '\0'; i += k) {
            i += strspn(list + i, " \t,");
            k = strcspn(list + i, " \t,");
            if (k > 0)
                FUZZ_ASSERT(conceal_find(c, list + i, k) != NULL);
        }
    }
    free(cause);
    free(list);
    conceal_free(c);
}

static uint64_t
take64(const uint8_t **d, size_t *n)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++) {
        v = v << 8 | (*n > 0 ? **d : 0);
        if (*n > 0) {
            (*d)++;
            (*n)--;
        }
    }
    return v;
}

static void
records_part(const uint8_t *d, size_t n)
{
    static struct conceal *c;
    struct conceal_tag *t;
    struct store_row rows[8];
    struct conceal_reveal rv;
    const char *why = NULL;
    char text[768];
    size_t nr = 0;
    enum conceal_verdict v;
    uint64_t id;

    if (c == NULL) {
        char *cause = NULL;

        c = conceal_of("order", &cause);
        FUZZ_ASSERT(c != NULL);
    }
    t = conceal_find(c, "order", 5);
    memset(rows, 0, sizeof rows);
    while (nr < 8 && n > 8) {
        size_t len = d[0] % (TAG_MAX + 1);

        d++;
        n--;
        if (len > n)
            len = n;
        memcpy(rows[nr].biz_tag, d, len);
        rows[nr].biz_tag[len] = '\0';
        d += len;
        n -= len;
        if (n > 0) {
            if (d[0] % 3 == 1)
                strcpy(rows[nr].description, CONCEAL_DESCRIPTION);
            else if (d[0] % 3 == 2)
                strcpy(rows[nr].description, CONCEAL_INTENT_DESCRIPTION);
            d++;
            n--;
        }
        rows[nr].max_id = (int64_t)(take64(&d, &n) >> 1);
        rows[nr].step = n > 0 ? 16 + d[0] % 20 : 20;     /* 16..35 */
        if (n > 0) {
            d++;
            n--;
        }
        nr++;
    }
    id = take64(&d, &n) >> 1;
    text[0] = '\0';
    v = conceal_check(c, t, rows, nr, 0, text, sizeof text);
    FUZZ_ASSERT(v == CONCEAL_OK || v == CONCEAL_RECORD || v == CONCEAL_PENDING ||
                v == CONCEAL_REFUSED);
    if (v == CONCEAL_REFUSED || v == CONCEAL_PENDING)
        FUZZ_ASSERT(text[0] != '\0');
    if (conceal_reveal(c, t, id, &rv, &why) == -1) {
        FUZZ_ASSERT(why != NULL && rv.key[0] == 'k');
    } else {
        FUZZ_ASSERT(rv.bits >= CONCEAL_BITS_MIN && rv.bits <= CONCEAL_BITS_MAX);
        FUZZ_ASSERT(rv.counter >> rv.bits == id >> rv.bits);
        if (rv.concealed && strcmp(rv.key, conceal_key_name(c)) == 0 &&
            rv.bits == conceal_bits(c))
            FUZZ_ASSERT(conceal_id(c, t, rv.counter) == id);
        if (!rv.concealed)
            FUZZ_ASSERT(rv.counter == id);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (keypath[0] == '\0') {
        FILE *f;

        snprintf(keypath, sizeof keypath, "/tmp/fuzz_conceal.%d.key", (int)getpid());
        f = fopen(keypath, "w");
        FUZZ_ASSERT(f != NULL);
        fputs("2b7e151628aed2a6abf7158809cf4f3c\n", f);
        fclose(f);
        FUZZ_ASSERT(chmod(keypath, 0600) == 0);
        atexit(remove_key);
    }
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0:
        keyfile_part(data + 1, size - 1 > 4096 ? 4096 : size - 1);
        break;
    case 1:
        list_part(data + 1, size - 1 > 4000 ? 4000 : size - 1);
        break;
    default:
        records_part(data + 1, size - 1);
        break;
    }
    return 0;
}
