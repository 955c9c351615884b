/* mc_parse.c: memcached text protocol request parser (see mc_parse.h). */
#include <assert.h>
#include <string.h>
#include <strings.h>

#include "mc_parse.h"

struct mc_name {
    const char  *name;
    enum mc_kind kind;
    unsigned char cas;
    unsigned char min_tok, max_tok;  /* MC_STORE: token counts; else 0 */
    unsigned char len_tok;           /* MC_STORE: the token of the length */
};

/* Every command memcached's text protocol has (the meta commands included:
 * "ms" carries a data block too, so it must be skipped, not guessed at). */
static const struct mc_name names[] = {
    { "get",       MC_GET,       0, 0, 0, 0 },
    { "gets",      MC_GET,       1, 0, 0, 0 },
    { "set",       MC_STORE,     0, 5, 6, 4 },
    { "add",       MC_STORE,     0, 5, 6, 4 },
    { "replace",   MC_STORE,     0, 5, 6, 4 },
    { "append",    MC_STORE,     0, 5, 6, 4 },
    { "prepend",   MC_STORE,     0, 5, 6, 4 },
    { "cas",       MC_STORE,     0, 6, 7, 4 },
    { "ms",        MC_STORE,     0, 3, MC_TOKENS_MAX, 2 },
    { "incr",      MC_REFUSED,   0, 0, 0, 0 },
    { "decr",      MC_REFUSED,   0, 0, 0, 0 },
    { "touch",     MC_REFUSED,   0, 0, 0, 0 },
    { "delete",    MC_REFUSED,   0, 0, 0, 0 },
    { "gat",       MC_REFUSED,   0, 0, 0, 0 },
    { "gats",      MC_REFUSED,   0, 0, 0, 0 },
    { "mg",        MC_REFUSED,   0, 0, 0, 0 },
    { "md",        MC_REFUSED,   0, 0, 0, 0 },
    { "ma",        MC_REFUSED,   0, 0, 0, 0 },
    { "mn",        MC_REFUSED,   0, 0, 0, 0 },
    { "me",        MC_REFUSED,   0, 0, 0, 0 },
    { "version",   MC_VERSION,   0, 0, 0, 0 },
    { "stats",     MC_STATS,     0, 0, 0, 0 },
    { "quit",      MC_QUIT,      0, 0, 0, 0 },
    { "verbosity", MC_VERBOSITY, 0, 0, 0, 0 },
    { "flush_all", MC_FLUSH_ALL, 0, 0, 0, 0 },
};

static int
tok_is(const char *line, const struct mc_cmd *cmd, size_t i, const char *s)
{
    size_t n = strlen(s);

    return cmd->len[i] == n && memcmp(line + cmd->off[i], s, n) == 0;
}

/* Split line[0..n) on spaces; more than MC_TOKENS_MAX tokens: -1. */
static int
tokenize(const char *line, size_t n, struct mc_cmd *cmd)
{
    size_t i = 0;

    cmd->ntok = 0;
    for (;;) {
        size_t start;

        while (i < n && line[i] == ' ')
            i++;
        if (i >= n)
            return 0;
        if (cmd->ntok == MC_TOKENS_MAX)
            return -1;
        start = i;
        while (i < n && line[i] != ' ')
            i++;
        cmd->off[cmd->ntok] = (uint16_t)start;
        cmd->len[cmd->ntok] = (uint16_t)(i - start);
        cmd->ntok++;
    }
}

/* A key memcached would take: 1 to MC_KEY_MAX bytes, no control bytes. */
static int
key_ok(const char *k, size_t n)
{
    if (n == 0 || n > MC_KEY_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] < 0x21 || (unsigned char)k[i] == 0x7f)
            return 0;
    return 1;
}

static enum mc_parse_result
bad(struct mc_cmd *cmd, const char *why)
{
    cmd->kind = MC_BAD;
    cmd->err = why;
    return MC_PARSE_OK;
}

/* A storage command: its data block's length, or an error that closes
 * (without the length, the block would be read as commands). */
static enum mc_parse_result
parse_store(const char *line, const struct mc_name *nm,
            const struct mc_limits *lim, struct mc_cmd *cmd, const char **err)
{
    const char *p;
    uint64_t v = 0;
    size_t n;

    if (cmd->ntok < nm->min_tok || cmd->ntok > nm->max_tok) {
        *err = "bad command line format";
        return MC_PARSE_ERROR;
    }
    p = line + cmd->off[nm->len_tok];
    n = cmd->len[nm->len_tok];
    if (n == 0 || n > 19) {
        *err = "bad data chunk";
        return MC_PARSE_ERROR;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            *err = "bad data chunk";
            return MC_PARSE_ERROR;
        }
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v > lim->max_data) {
        *err = "object too large for cache";
        return MC_PARSE_ERROR;
    }
    cmd->data_len = v + 2;
    return MC_PARSE_OK;
}

enum mc_parse_result
mc_parse(const char *buf, size_t len, const struct mc_limits *lim,
         struct mc_cmd *cmd, size_t *used, const char **err)
{
    const char *nl;
    const struct mc_name *nm = NULL;
    size_t line, scan = len < lim->max_line ? len : lim->max_line;
    int over;

    assert(lim->max_line > 0 && lim->max_line < 65536);
    assert(lim->max_keys >= 1 && lim->max_keys < MC_TOKENS_MAX);
    *err = NULL;
    nl = memchr(buf, '\n', scan);
    if (nl == NULL) {
        if (len >= lim->max_line) {
            *err = "line too long";
            return MC_PARSE_ERROR;
        }
        return MC_PARSE_MORE;
    }
    *used = (size_t)(nl - buf) + 1;
    line = (size_t)(nl - buf);
    if (line > 0 && buf[line - 1] == '\r')
        line--;
    memset(cmd, 0, offsetof(struct mc_cmd, off));
    cmd->nkeys = 0;
    cmd->data_len = 0;
    cmd->err = NULL;
    over = tokenize(buf, line, cmd) < 0;
    if (cmd->ntok == 0) {
        cmd->kind = MC_UNKNOWN;
        return MC_PARSE_OK;
    }
    /* Any case, as katsubushi takes "GET" (memcached itself takes lower
     * case only, so no memcached client sends another). */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (cmd->len[0] == strlen(names[i].name) &&
            strncasecmp(buf + cmd->off[0], names[i].name, cmd->len[0]) == 0) {
            nm = &names[i];
            break;
        }
    if (nm == NULL) {
        cmd->kind = MC_UNKNOWN;
        return MC_PARSE_OK;
    }
    cmd->kind = nm->kind;
    cmd->name = nm->name;
    cmd->cas = nm->cas;
    if (nm->kind == MC_STORE) {
        if (over) {
            *err = "bad command line format";
            return MC_PARSE_ERROR;
        }
        cmd->noreply = tok_is(buf, cmd, cmd->ntok - 1, "noreply");
        return parse_store(buf, nm, lim, cmd, err);
    }
    if (cmd->ntok > 1)
        cmd->noreply = tok_is(buf, cmd, cmd->ntok - 1, "noreply");
    if (nm->kind != MC_GET)
        return over ? bad(cmd, "bad command line format") : MC_PARSE_OK;
    if (cmd->ntok < 2)
        return bad(cmd, "bad command line format: get needs a key");
    if (over || cmd->ntok - 1 > lim->max_keys)
        return bad(cmd, "too many keys in one get");
    for (size_t i = 1; i < cmd->ntok; i++)
        if (!key_ok(buf + cmd->off[i], cmd->len[i]))
            return bad(cmd, cmd->len[i] > MC_KEY_MAX ?
                       "key longer than 250 bytes" :
                       "a key has a control character");
    cmd->noreply = 0;               /* a key may be called "noreply" */
    cmd->nkeys = cmd->ntok - 1;
    return MC_PARSE_OK;
}
