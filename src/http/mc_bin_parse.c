/* mc_bin_parse.c: memcached binary protocol request parser (see
 * mc_bin_parse.h). */
#include <assert.h>
#include <string.h>

#include "mc_bin_parse.h"

struct mc_bin_name {
    const char   *name;             /* NULL: not an opcode leafd knows */
    enum mc_kind  kind;
    unsigned char quiet, with_key;
};

/* Every opcode of memcached 1.6's binary protocol but SASL's and the range
 * operations (which memcached answers as unknown too). The storage opcodes
 * and their quiet forms are refused (MC_REFUSED). */
static const struct mc_bin_name ops[256] = {
    [0x00] = { "get",        MC_GET,     0, 0 },
    [0x01] = { "set",        MC_REFUSED, 0, 0 },
    [0x02] = { "add",        MC_REFUSED, 0, 0 },
    [0x03] = { "replace",    MC_REFUSED, 0, 0 },
    [0x04] = { "delete",     MC_REFUSED, 0, 0 },
    [0x05] = { "increment",  MC_REFUSED, 0, 0 },
    [0x06] = { "decrement",  MC_REFUSED, 0, 0 },
    [0x07] = { "quit",       MC_QUIT,    0, 0 },
    [0x08] = { "flush",      MC_REFUSED, 0, 0 },
    [0x09] = { "getq",       MC_GET,     1, 0 },
    [0x0a] = { "noop",       MC_NOOP,    0, 0 },
    [0x0b] = { "version",    MC_VERSION, 0, 0 },
    [0x0c] = { "getk",       MC_GET,     0, 1 },
    [0x0d] = { "getkq",      MC_GET,     1, 1 },
    [0x0e] = { "append",     MC_REFUSED, 0, 0 },
    [0x0f] = { "prepend",    MC_REFUSED, 0, 0 },
    [0x10] = { "stat",       MC_STATS,   0, 0 },
    [0x11] = { "setq",       MC_REFUSED, 1, 0 },
    [0x12] = { "addq",       MC_REFUSED, 1, 0 },
    [0x13] = { "replaceq",   MC_REFUSED, 1, 0 },
    [0x14] = { "deleteq",    MC_REFUSED, 1, 0 },
    [0x15] = { "incrementq", MC_REFUSED, 1, 0 },
    [0x16] = { "decrementq", MC_REFUSED, 1, 0 },
    [0x17] = { "quitq",      MC_QUIT,    1, 0 },
    [0x18] = { "flushq",     MC_REFUSED, 1, 0 },
    [0x19] = { "appendq",    MC_REFUSED, 1, 0 },
    [0x1a] = { "prependq",   MC_REFUSED, 1, 0 },
    [0x1b] = { "verbosity",  MC_REFUSED, 0, 0 },
    [0x1c] = { "touch",      MC_REFUSED, 0, 0 },
    [0x1d] = { "gat",        MC_REFUSED, 0, 0 },
    [0x1e] = { "gatq",       MC_REFUSED, 1, 0 },
    [0x23] = { "gatk",       MC_REFUSED, 0, 0 },
    [0x24] = { "gatkq",      MC_REFUSED, 1, 0 },
};

static uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static enum mc_parse_result
fail(uint16_t *status, const char **err, uint16_t st, const char *why)
{
    *status = st;
    *err = why;
    return MC_PARSE_ERROR;
}

enum mc_parse_result
mc_bin_parse(const char *buf, size_t len, const struct mc_limits *lim,
             struct mc_cmd *cmd, size_t *used, uint16_t *status,
             const char **err)
{
    const unsigned char *h = (const unsigned char *)buf;
    const struct mc_bin_name *op;
    uint32_t keylen, extlen, bodylen;

    *err = NULL;
    *status = 0;
    if (len == 0)
        return MC_PARSE_MORE;
    if (h[0] != MC_BIN_REQ_MAGIC)
        return fail(status, err, 0, "bad magic byte");
    if (len < MC_BIN_HEADER)
        return MC_PARSE_MORE;
    memset(cmd, 0, offsetof(struct mc_cmd, off));
    cmd->nkeys = 0;
    cmd->data_len = 0;
    cmd->err = NULL;
    cmd->binary = 1;
    cmd->opcode = h[1];
    cmd->opaque = be32(h + 12);
    keylen = (uint32_t)h[2] << 8 | h[3];
    extlen = h[4];
    bodylen = be32(h + 8);
    op = &ops[h[1]];
    cmd->name = op->name;
    cmd->kind = op->name != NULL ? op->kind : MC_UNKNOWN;
    cmd->quiet = op->quiet;
    cmd->with_key = op->with_key;
    if (keylen > MC_KEY_MAX)
        return fail(status, err, MC_BIN_EINVAL, "key longer than 250 bytes");
    if (extlen + keylen > bodylen)
        return fail(status, err, MC_BIN_EINVAL,
                    "extras and key longer than the body");
    if (bodylen - extlen - keylen > lim->max_data)
        return fail(status, err, MC_BIN_E2BIG, "value too large");
    switch (cmd->kind) {
    case MC_GET:
        if (extlen != 0 || keylen == 0 || bodylen != keylen)
            return fail(status, err, MC_BIN_EINVAL,
                        "a get carries a key and nothing else");
        break;
    case MC_STATS:
        if (extlen != 0 || bodylen != keylen)
            return fail(status, err, MC_BIN_EINVAL,
                        "a stat carries a key or nothing");
        break;
    case MC_NOOP:
    case MC_VERSION:
    case MC_QUIT:
        if (bodylen != 0)
            return fail(status, err, MC_BIN_EINVAL, "this opcode has no body");
        break;
    default:
        /* refused or unknown: answered, its body skipped */
        assert(cmd->kind == MC_REFUSED || cmd->kind == MC_UNKNOWN);
        *used = MC_BIN_HEADER;
        cmd->data_len = bodylen;
        return MC_PARSE_OK;
    }
    assert(bodylen <= MC_KEY_MAX);
    if (len < MC_BIN_HEADER + (size_t)bodylen)
        return MC_PARSE_MORE;
    cmd->ntok = keylen > 0 ? 2 : 1;
    cmd->off[0] = 0;
    cmd->len[0] = 0;
    if (keylen > 0) {
        cmd->off[1] = MC_BIN_HEADER;
        cmd->len[1] = (uint16_t)keylen;
    }
    if (cmd->kind == MC_GET)
        cmd->nkeys = 1;
    *used = MC_BIN_HEADER + (size_t)bodylen;
    return MC_PARSE_OK;
}

void
mc_bin_header(unsigned char out[MC_BIN_HEADER], uint8_t opcode, uint32_t opaque,
              uint16_t status, uint8_t extlen, uint16_t keylen, uint32_t bodylen,
              uint64_t cas)
{
    out[0] = MC_BIN_RES_MAGIC;
    out[1] = opcode;
    out[2] = (unsigned char)(keylen >> 8);
    out[3] = (unsigned char)keylen;
    out[4] = extlen;
    out[5] = 0;                         /* datatype: raw bytes */
    out[6] = (unsigned char)(status >> 8);
    out[7] = (unsigned char)status;
    for (int i = 0; i < 4; i++) {
        out[8 + i] = (unsigned char)(bodylen >> (24 - 8 * i));
        out[12 + i] = (unsigned char)(opaque >> (24 - 8 * i));
    }
    for (int i = 0; i < 8; i++)
        out[16 + i] = (unsigned char)(cas >> (56 - 8 * i));
}
