/* lease_parse.c: the text lease answer's parser (see lease_parse.h). */
#include "lease_parse.h"

/* A decimal in s[*i..len) up to the byte stop; advances *i past it. */
static int
number(const char *s, size_t len, size_t *i, char stop, int64_t *out)
{
    size_t k = *i, digits = 0;
    uint64_t v = 0;

    for (; k < len && s[k] != stop; k++, digits++) {
        if (s[k] < '0' || s[k] > '9' || digits == 19)
            return -1;
        v = v * 10 + (uint64_t)(s[k] - '0');
    }
    if (digits == 0 || (digits > 1 && s[*i] == '0') || v > (uint64_t)INT64_MAX)
        return -1;
    *out = (int64_t)v;
    *i = k;
    return 0;
}

int
lease_parse(const char *s, size_t len, int64_t want, struct lease_range *out, int max)
{
    size_t i = 0;
    int n = 0;
    int64_t total = 0;

    while (i < len) {
        int64_t a, b;

        if (n == max || number(s, len, &i, ' ', &a) == -1 || i == len)
            return -1;
        i++;                                        /* the space */
        if (number(s, len, &i, '\n', &b) == -1 || b <= a ||
            (n > 0 && a < out[n - 1].end) || b - a > want - total)
            return -1;
        if (i < len)
            i++;                                    /* the newline */
        out[n].start = a;
        out[n].end = b;
        total += b - a;
        n++;
    }
    return n > 0 && total == want ? n : -1;
}
