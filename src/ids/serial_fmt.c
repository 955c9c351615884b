/* serial_fmt.c: serial number time patterns, periods and padding. */
#include <assert.h>
#include <string.h>

#include "serial_fmt.h"
#include "util.h"

#define D_ALL 0x3ffu              /* any digit */
#define D_UPTO(n) ((1u << ((n) + 1)) - 1)

/* In enum serial_token's order. name: the token in a row key (lower case
 * and prefix-free, so that a key means one pattern even under a
 * case-blind collation). first: the digits its first character can be. */
static const struct {
    const char       *text;
    enum serial_token tok;
    int               width;
    const char       *name;
    unsigned          first;
} token_table[] = {
    { "yyyy", SERIAL_T_YEAR4, 4, "y4", D_ALL },
    { "yy", SERIAL_T_YEAR2, 2, "y2", D_ALL },
    { "MM", SERIAL_T_MONTH, 2, "mo", D_UPTO(1) },
    { "dd", SERIAL_T_DAY, 2, "d", D_UPTO(3) },
    { "HH", SERIAL_T_HOUR, 2, "h", D_UPTO(2) },
    { "mm", SERIAL_T_MINUTE, 2, "mi", D_UPTO(5) },
    { "ss", SERIAL_T_SECOND, 2, "s", D_UPTO(6) },     /* a leap second: 60 */
    { "SSS", SERIAL_T_MILLI, 3, "ms", D_ALL },
};

int
serial_pattern_parse(const char *s, size_t len, struct serial_pattern *p,
                     char **cause)
{
    unsigned seen = 0;
    size_t i = 0;

    memset(p, 0, sizeof *p);
    if (len > SERIAL_PATTERN_MAX) {
        if (cause != NULL)
            *cause = xasprintf("time pattern longer than %d characters",
                               SERIAL_PATTERN_MAX);
        return -1;
    }
    while (i < len) {
        size_t k, n = 0;

        /* The longest token that starts here ("yyyy" before "yy"). */
        for (k = 0; k < sizeof token_table / sizeof token_table[0]; k++) {
            n = strlen(token_table[k].text);
            if (n <= len - i && memcmp(s + i, token_table[k].text, n) == 0)
                break;
        }
        if (k == sizeof token_table / sizeof token_table[0]) {
            if (cause != NULL)
                *cause = xasprintf("time pattern: unexpected '%c' at position "
                                   "%zu (use yyyy, yy, MM, dd, HH, mm, ss, SSS)",
                                   s[i] >= 0x21 && s[i] < 0x7f ? s[i] : '?', i + 1);
            return -1;
        }
        /* yyyy and yy name the same field. */
        {
            unsigned bit = 1u << (token_table[k].tok == SERIAL_T_YEAR2 ?
                                  SERIAL_T_YEAR4 : token_table[k].tok);

            if (seen & bit) {
                if (cause != NULL)
                    *cause = xasprintf("time pattern: %s at position %zu "
                                       "repeats a field", token_table[k].text,
                                       i + 1);
                return -1;
            }
            seen |= bit;
        }
        assert(p->ntokens < SERIAL_TOKENS_MAX);
        p->tokens[p->ntokens++] = token_table[k].tok;
        p->width += token_table[k].width;
        i += n;
    }
    return 0;
}

static int
has(const struct serial_pattern *p, enum serial_token t)
{
    for (int i = 0; i < p->ntokens; i++)
        if (p->tokens[i] == t ||
            (t == SERIAL_T_YEAR4 && p->tokens[i] == SERIAL_T_YEAR2))
            return 1;
    return 0;
}

static int
has_exactly(const struct serial_pattern *p, enum serial_token t)
{
    for (int i = 0; i < p->ntokens; i++)
        if (p->tokens[i] == t)
            return 1;
    return 0;
}

int
serial_pattern_covers(const struct serial_pattern *p, enum serial_reset reset)
{
    switch (reset) {
    case SERIAL_RESET_NEVER:
        return 1;
    case SERIAL_RESET_YEAR:
        return has(p, SERIAL_T_YEAR4);
    case SERIAL_RESET_MONTH:
        return has(p, SERIAL_T_YEAR4) && has(p, SERIAL_T_MONTH);
    case SERIAL_RESET_DAY:
        return has(p, SERIAL_T_YEAR4) && has(p, SERIAL_T_MONTH) &&
               has(p, SERIAL_T_DAY);
    }
    return 0;
}

int
serial_pattern_has_ms(const struct serial_pattern *p)
{
    return has(p, SERIAL_T_YEAR4) && has(p, SERIAL_T_MONTH) &&
           has(p, SERIAL_T_DAY) && has(p, SERIAL_T_HOUR) &&
           has(p, SERIAL_T_MINUTE) && has(p, SERIAL_T_SECOND) &&
           has(p, SERIAL_T_MILLI);
}

int
serial_pattern_has_yy(const struct serial_pattern *p)
{
    return has_exactly(p, SERIAL_T_YEAR2);
}

char *
serial_pad(char *out, uint64_t v, int digits)
{
    assert(digits >= 1 && digits <= 19);
    assert(v <= serial_digits_max(digits));
    for (int i = digits - 1; i >= 0; i--) {
        out[i] = (char)('0' + v % 10);
        v /= 10;
    }
    return out + digits;
}

uint64_t
serial_digits_max(int digits)
{
    uint64_t m = 1;

    for (int i = 0; i < digits; i++)
        m *= 10;
    return m - 1;
}

int
serial_digits_of(uint64_t max)
{
    int d = 1;

    while (max >= 10) {
        max /= 10;
        d++;
    }
    return d;
}

char *
serial_pattern_format(const struct serial_pattern *p, const struct tzone_tm *tm,
                      char *out)
{
    for (int i = 0; i < p->ntokens; i++) {
        switch (p->tokens[i]) {
        case SERIAL_T_YEAR4:
            out = serial_pad(out, (uint64_t)(tm->year % 10000), 4);
            break;
        case SERIAL_T_YEAR2:
            out = serial_pad(out, (uint64_t)(tm->year % 100), 2);
            break;
        case SERIAL_T_MONTH:
            out = serial_pad(out, (uint64_t)tm->month, 2);
            break;
        case SERIAL_T_DAY:
            out = serial_pad(out, (uint64_t)tm->day, 2);
            break;
        case SERIAL_T_HOUR:
            out = serial_pad(out, (uint64_t)tm->hour, 2);
            break;
        case SERIAL_T_MINUTE:
            out = serial_pad(out, (uint64_t)tm->min, 2);
            break;
        case SERIAL_T_SECOND:
            out = serial_pad(out, (uint64_t)tm->sec, 2);
            break;
        case SERIAL_T_MILLI:
            out = serial_pad(out, (uint64_t)tm->ms, 3);
            break;
        }
    }
    return out;
}

static const char *const reset_names[] = { "never", "day", "month", "year" };

int
serial_reset_parse(const char *s, enum serial_reset *r)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, reset_names[i]) == 0) {
            *r = (enum serial_reset)i;
            return 0;
        }
    return -1;
}

const char *
serial_reset_name(enum serial_reset r)
{
    return reset_names[r];
}

void
serial_period_key(enum serial_reset r, const struct tzone_tm *tm, char *out)
{
    char *p = out;

    if (r != SERIAL_RESET_NEVER)
        p = serial_pad(p, (uint64_t)(tm->year % 10000), 4);
    if (r == SERIAL_RESET_MONTH || r == SERIAL_RESET_DAY)
        p = serial_pad(p, (uint64_t)tm->month, 2);
    if (r == SERIAL_RESET_DAY)
        p = serial_pad(p, (uint64_t)tm->day, 2);
    *p = '\0';
}

int
serial_pattern_digits(const struct serial_pattern *p, uint16_t *out)
{
    int n = 0;

    for (int i = 0; i < p->ntokens; i++) {
        int k = (int)p->tokens[i];

        assert(token_table[k].tok == p->tokens[i]);
        for (int j = 0; j < token_table[k].width; j++)
            out[n++] = (uint16_t)(j == 0 ? token_table[k].first : D_ALL);
    }
    assert(n == p->width);
    return n;
}

void
serial_pattern_name(const struct serial_pattern *p, char *out)
{
    *out = '\0';
    for (int i = 0; i < p->ntokens; i++)
        strcat(out, token_table[p->tokens[i]].name);
}

int
serial_pattern_from_name(const char *name, size_t len, struct serial_pattern *p)
{
    size_t i = 0;

    memset(p, 0, sizeof *p);
    while (i < len) {
        size_t k, n = 0;

        /* The names are prefix-free: at most one starts here. */
        for (k = 0; k < sizeof token_table / sizeof token_table[0]; k++) {
            n = strlen(token_table[k].name);
            if (n <= len - i && memcmp(name + i, token_table[k].name, n) == 0)
                break;
        }
        if (k == sizeof token_table / sizeof token_table[0] ||
            p->ntokens == SERIAL_TOKENS_MAX)
            return -1;
        p->tokens[p->ntokens++] = token_table[k].tok;
        p->width += token_table[k].width;
        i += n;
    }
    return 0;
}

void
serial_period_text(const struct serial_pattern *p, enum serial_reset r,
                   const struct tzone_tm *tm, char *out)
{
    char *q = out;

    if (r == SERIAL_RESET_NEVER) {
        strcpy(out, "all");
        return;
    }
    if (has_exactly(p, SERIAL_T_YEAR2))
        q = serial_pad(q, (uint64_t)(tm->year % 100), 2);
    else
        q = serial_pad(q, (uint64_t)(tm->year % 10000), 4);
    if (r == SERIAL_RESET_MONTH || r == SERIAL_RESET_DAY)
        q = serial_pad(q, (uint64_t)tm->month, 2);
    if (r == SERIAL_RESET_DAY)
        q = serial_pad(q, (uint64_t)tm->day, 2);
    *q = '\0';
}
