/* fuzz_idkinds.c: libFuzzer target for the UUID and ULID decoders
 * (uuid7_parse, ulid_parse), which read untrusted text from
 * /uuid/decode/<x>, /ulid/decode/<x> and `leafd decode`.
 *
 * Each decoder is checked against a reference written from its header's
 * contract: what it accepts, it formats back to the canonical spelling of
 * the input (lower-case hex; upper-case base32 with the aliases resolved),
 * and what it refuses comes with a reason.
 *
 * Input: the first byte picks the decoder (even: UUID, odd: ULID), the rest
 * is the text (exactly that many bytes on the heap).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ulid.h"
#include "uuid7.h"

static int
lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* The canonical form of a valid UUID text, or 0 when it is not valid. */
static int
ref_uuid(const char *s, size_t len, char *canon)
{
    if (len != 36)
        return 0;
    for (size_t i = 0; i < 36; i++) {
        int c = lower((unsigned char)s[i]);

        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return 0;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return 0;
        }
        canon[i] = (char)c;
    }
    return 1;
}

static int
ref_ulid(const char *s, size_t len, char *canon)
{
    static const char alpha[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

    if (len != 26)
        return 0;
    for (size_t i = 0; i < 26; i++) {
        int c = (unsigned char)s[i];

        if (c >= 'a' && c <= 'z')
            c = c - 'a' + 'A';
        if (c == 'O')
            c = '0';
        else if (c == 'I' || c == 'L')
            c = '1';
        if (c == 0 || strchr(alpha, c) == NULL)
            return 0;
        if (i == 0 && c > '7')
            return 0;
        canon[i] = (char)c;
    }
    return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char canon[40], out[40];
    char *text, *cause = NULL;
    size_t len;
    int ok, want;

    if (size < 1)
        return 0;
    len = size - 1;
    text = malloc(len + 1);
    memcpy(text, data + 1, len);
    if (data[0] % 2 == 0) {
        struct uuid7 u;
        struct uuid7_decoded d;

        ok = uuid7_parse(text, len, &u, &cause) == 0;
        want = ref_uuid(text, len, canon);
        FUZZ_ASSERT(ok == want);
        if (ok) {
            uuid7_format(&u, out);
            FUZZ_ASSERT(memcmp(out, canon, 36) == 0);
            uuid7_decode(&u, &d);
            FUZZ_ASSERT(d.version >= 0 && d.version <= 15);
        }
    } else {
        struct ulid u;

        ok = ulid_parse(text, len, &u, &cause) == 0;
        want = ref_ulid(text, len, canon);
        FUZZ_ASSERT(ok == want);
        if (ok) {
            ulid_format(&u, out);
            FUZZ_ASSERT(memcmp(out, canon, 26) == 0);
        }
    }
    FUZZ_ASSERT(ok ? cause == NULL : cause != NULL && cause[0] != '\0');
    free(cause);
    free(text);
    return 0;
}
