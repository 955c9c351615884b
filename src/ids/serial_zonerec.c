/* serial_zonerec.c: the serial zones record's text, parsed and written
 * (see serial_zonerec.h). */
#include <assert.h>
#include <inttypes.h>
#include <string.h>

#include "serial_zonerec.h"
#include "util.h"

static int
shape_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

int
szrec_parse(const char *text, size_t len, struct szrec_entry *e,
            const char **why)
{
    size_t pos = 0;
    int n = 0;

    if (len > SZREC_TEXT_MAX) {
        *why = "longer than its limit";
        return -1;
    }
    if (len == 0)
        return 0;
    for (;;) {
        size_t s = pos, colon, end;
        int64_t v;

        while (pos < len && shape_char(text[pos]))
            pos++;
        colon = pos;
        if (colon == s || colon - s >= SERIAL_ROW_SHAPE_MAX ||
            colon == len || text[colon] != ':') {
            *why = "an entry is not \"<shape>:<ms>\" (shape of [a-z0-9._-])";
            return -1;
        }
        end = colon + 1;
        while (end < len && text[end] != ',')
            end++;
        if (util_parse_i64(text + colon + 1, end - colon - 1, 1, &v) == -1 ||
            v > SZREC_AHEAD_MAX || v < -SZREC_AHEAD_MAX) {
            *why = "an entry's ms is not an integer within a day";
            return -1;
        }
        if (n == SZREC_MAX) {
            *why = "more entries than its limit (256)";
            return -1;
        }
        memcpy(e[n].shape, text + s, colon - s);
        e[n].shape[colon - s] = '\0';
        e[n].ahead_ms = v;
        for (int k = 0; k < n; k++)
            if (strcmp(e[k].shape, e[n].shape) == 0) {
                *why = "a shape is given twice";
                return -1;
            }
        n++;
        if (end == len)
            return n;
        pos = end + 1;          /* past the ',' */
        if (pos == len) {
            *why = "it ends with ','";
            return -1;
        }
    }
}

char *
szrec_format(const struct szrec_entry *e, int n)
{
    struct sbuf b = {0};

    assert(n >= 0 && n <= SZREC_MAX);
    sbuf_puts(&b, "");
    for (int k = 0; k < n; k++) {
        assert(e[k].shape[0] != '\0');
        assert(e[k].ahead_ms <= SZREC_AHEAD_MAX &&
               e[k].ahead_ms >= -SZREC_AHEAD_MAX);
        sbuf_printf(&b, "%s%s:%" PRId64, k ? "," : "", e[k].shape,
                    e[k].ahead_ms);
    }
    assert(b.len <= SZREC_TEXT_MAX);
    return b.p;
}
