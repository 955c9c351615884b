/* resp_parse.c: RESP2 request parser (multibulk and inline). */
#include <assert.h>
#include <string.h>

#include "resp_parse.h"
#include "util.h"

#define LINE_MAX_DIGITS 24           /* "*<n>\r\n" / "$<n>\r\n" headers */

/* A "<c><decimal>\r\n" header at p (p[0] already checked). Returns 1 with
 * *v and *hdr (bytes used), 0 when more input is needed, -1 when malformed. */
static int
parse_header(const char *p, size_t len, long long *v, size_t *hdr)
{
    size_t i = 1;
    int neg = 0, digits = 0;
    long long n = 0;

    if (i < len && p[i] == '-') {
        neg = 1;
        i++;
    }
    for (; i < len && p[i] >= '0' && p[i] <= '9'; i++) {
        if (++digits > 18)
            return -1;
        n = n * 10 + (p[i] - '0');
    }
    if (i >= len)
        return len > LINE_MAX_DIGITS ? -1 : 0;
    if (digits == 0 || p[i] != '\r')
        return -1;
    if (i + 1 >= len)
        return 0;
    if (p[i + 1] != '\n')
        return -1;
    *v = neg ? -n : n;
    *hdr = i + 2;
    return 1;
}

static enum resp_parse_result
parse_multibulk(const char *buf, size_t len, const struct resp_limits *lim,
                struct resp_cmd *cmd, size_t *used, const char **err)
{
    long long n, blen;
    size_t pos, hdr;
    int rc;

    rc = parse_header(buf, len, &n, &hdr);
    if (rc == 0)
        return RESP_PARSE_MORE;
    if (rc < 0 || n > (long long)lim->max_args) {
        *err = rc < 0 ? "Protocol error: invalid multibulk length"
                      : "Protocol error: too many arguments";
        return RESP_PARSE_ERROR;
    }
    pos = hdr;
    if (n <= 0) {                    /* "*0" and "*-1": nothing to run */
        *used = pos;
        return RESP_PARSE_EMPTY;
    }
    for (long long i = 0; i < n; i++) {
        if (pos >= len)
            return RESP_PARSE_MORE;
        if (buf[pos] != '$') {
            *err = "Protocol error: expected '$' before each argument";
            return RESP_PARSE_ERROR;
        }
        rc = parse_header(buf + pos, len - pos, &blen, &hdr);
        if (rc == 0)
            return RESP_PARSE_MORE;
        if (rc < 0 || blen < 0 || (unsigned long long)blen > lim->max_bulk) {
            *err = "Protocol error: invalid bulk length";
            return RESP_PARSE_ERROR;
        }
        pos += hdr;
        if (len - pos < (size_t)blen + 2)
            return RESP_PARSE_MORE;
        if (buf[pos + (size_t)blen] != '\r' || buf[pos + (size_t)blen + 1] != '\n') {
            *err = "Protocol error: a bulk string does not end in CRLF";
            return RESP_PARSE_ERROR;
        }
        cmd->argv[i] = buf + pos;
        cmd->argl[i] = (size_t)blen;
        pos += (size_t)blen + 2;
    }
    cmd->argc = (size_t)n;
    cmd->is_inline = 0;
    *used = pos;
    return RESP_PARSE_OK;
}

static int
is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Split one inline line into arguments as redis-cli's own splitter does:
 * blanks separate, "..." takes C-like escapes, '...' takes \' only. */
static enum resp_parse_result
split_inline(const char *p, size_t n, const struct resp_limits *lim,
             char *out, size_t cap, struct resp_cmd *cmd, const char **err)
{
    size_t i = 0, o = 0;

    cmd->argc = 0;
    cmd->is_inline = 1;
    for (;;) {
        char quote = 0;
        size_t start;

        while (i < n && is_space(p[i]))
            i++;
        if (i >= n)
            break;
        if (cmd->argc >= lim->max_args) {
            *err = "Protocol error: too many arguments";
            return RESP_PARSE_ERROR;
        }
        start = o;
        if (p[i] == '"' || p[i] == '\'')
            quote = p[i++];
        for (;;) {
            char c;

            if (i >= n) {
                if (quote) {
                    *err = "Protocol error: unbalanced quotes in request";
                    return RESP_PARSE_ERROR;
                }
                break;
            }
            c = p[i];
            if (!quote && is_space(c))
                break;
            if (quote && c == quote) {
                i++;
                if (i < n && !is_space(p[i])) {
                    *err = "Protocol error: unbalanced quotes in request";
                    return RESP_PARSE_ERROR;
                }
                break;
            }
            if (quote == '"' && c == '\\' && i + 1 < n) {
                char e = p[i + 1];

                if (e == 'x' && i + 3 < n && util_hex_digit(p[i + 2]) >= 0 &&
                    util_hex_digit(p[i + 3]) >= 0) {
                    c = (char)(util_hex_digit(p[i + 2]) << 4 |
                               util_hex_digit(p[i + 3]));
                    i += 4;
                } else {
                    c = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' :
                        e == 'b' ? '\b' : e == 'a' ? '\a' : e;
                    i += 2;
                }
            } else if (quote == '\'' && c == '\\' && i + 1 < n && p[i + 1] == '\'') {
                c = '\'';
                i += 2;
            } else {
                i++;
            }
            if (o >= cap) {
                *err = "Protocol error: too big inline request";
                return RESP_PARSE_ERROR;
            }
            out[o++] = c;
        }
        cmd->argv[cmd->argc] = out + start;
        cmd->argl[cmd->argc] = o - start;
        cmd->argc++;
    }
    return cmd->argc == 0 ? RESP_PARSE_EMPTY : RESP_PARSE_OK;
}

enum resp_parse_result
resp_parse(const char *buf, size_t len, const struct resp_limits *lim,
           char *scratch, size_t scratch_cap, struct resp_cmd *cmd,
           size_t *used, const char **err)
{
    const char *nl;
    size_t line;
    enum resp_parse_result r;

    assert(lim->max_args <= RESP_ARGS_MAX);
    *err = NULL;
    if (len == 0)
        return RESP_PARSE_MORE;
    if (buf[0] == '*')
        return parse_multibulk(buf, len, lim, cmd, used, err);
    nl = memchr(buf, '\n', len < lim->max_inline + 1 ? len : lim->max_inline + 1);
    if (nl == NULL) {
        if (len > lim->max_inline) {
            *err = "Protocol error: too big inline request";
            return RESP_PARSE_ERROR;
        }
        return RESP_PARSE_MORE;
    }
    line = (size_t)(nl - buf);
    r = split_inline(buf, line, lim, scratch, scratch_cap, cmd, err);
    if (r != RESP_PARSE_ERROR)
        *used = line + 1;
    return r;
}
