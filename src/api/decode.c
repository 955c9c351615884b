/* decode.c: an ID's kind by its form, and the prefixes of IDs as strings
 * (see decode.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "decode.h"
#include "sfconfig.h"
#include "snowflake.h"
#include "ulid.h"
#include "util.h"
#include "uuid7.h"

#define DECODE_MAX IDSTR_TEXT_MAX   /* longer than any ID of any kind */

const char *
decode_prefix_of(const struct config *cfg, const char *tag)
{
    if (tag == NULL)
        return cfg->sf_prefix;
    for (size_t i = 0; i < cfg->nprefixes; i++)
        if (strcmp(cfg->prefixes[i].tag, tag) == 0)
            return cfg->prefixes[i].prefix;
    return "";
}

/* The biz_tag whose prefix is p (plen bytes), or NULL. */
static const char *
tag_of_prefix(const struct config *cfg, const char *p, size_t plen)
{
    for (size_t i = 0; i < cfg->nprefixes; i++)
        if (strlen(cfg->prefixes[i].prefix) == plen &&
            memcmp(cfg->prefixes[i].prefix, p, plen) == 0)
            return cfg->prefixes[i].tag;
    return NULL;
}

int
decode_id_string(const struct config *cfg, int kinds, const char *s,
                 size_t len, enum idstr_enc want, struct decode_idstr *out,
                 const char **code, char *why, size_t whylen)
{
    enum idstr_result r = idstr_decode(s, len, want, &out->p);
    const struct idstr_parsed *p = &out->p;

    out->tag = NULL;
    out->kind = kinds == DECODE_SEGMENT ? DECODE_SEGMENT : DECODE_SNOWFLAKE;
    if (r != IDSTR_OK) {
        *code = "invalid_id";
        if (r == IDSTR_BAD_LENGTH && want != IDSTR_DEC)
            snprintf(why, whylen, "not an ID string: %s takes %d characters "
                     "after the prefix", idstr_enc_name(want),
                     want == IDSTR_BASE62 ? IDSTR_B62_LEN : IDSTR_B32_LEN);
        else
            snprintf(why, whylen, "not an ID string: %s", idstr_result_text(r));
        return 400;
    }
    if (p->prefix == NULL)
        return 0;
    if ((kinds & DECODE_SEGMENT) &&
        (out->tag = tag_of_prefix(cfg, p->prefix, p->prefix_len)) != NULL) {
        out->kind = DECODE_SEGMENT;
        return 0;
    }
    if ((kinds & DECODE_SNOWFLAKE) && strlen(cfg->sf_prefix) == p->prefix_len &&
        memcmp(cfg->sf_prefix, p->prefix, p->prefix_len) == 0) {
        out->kind = DECODE_SNOWFLAKE;
        return 0;
    }
    *code = "unknown_prefix";
    snprintf(why, whylen, "prefix '%.*s' is %s", (int)p->prefix_len, p->prefix,
             kinds == DECODE_SNOWFLAKE ? "not snowflake.prefix" :
             kinds == DECODE_SEGMENT ? "no segment.prefix.* of this node" :
             "neither a segment.prefix.* nor the snowflake.prefix of this node");
    return 400;
}

void
decode_segment_json(const struct decode_idstr *d, struct sbuf *out)
{
    sbuf_printf(out, "{\"id\":\"%" PRIu64 "\",\"encoding\":\"%s\"", d->p.id,
                idstr_enc_name(d->p.enc));
    if (d->tag != NULL)
        sbuf_printf(out, ",\"biz_tag\":\"%s\"", d->tag);   /* [A-Za-z0-9._:-] */
    sbuf_puts(out, "}");
}

int
decode_looks_idstr(const char *s, size_t len)
{
    return strspn(s, "0123456789") < len &&
           (memchr(s, '_', len) != NULL || len == IDSTR_B62_LEN ||
            len == IDSTR_B32_LEN);
}

int
decode_any(const struct config *cfg, const struct snowflake *sf,
           const char *x, size_t len, struct sbuf *out, char **cause)
{
    char id[DECODE_MAX + 1];
    size_t digits;

    if (len > DECODE_MAX || memchr(x, '\0', len) != NULL) {
        *cause = xasprintf("not an ID: a snowflake ID is at most 19 digits, a "
                           "UUID 36 characters, a ULID 26, an ID string %d",
                           IDSTR_TEXT_MAX);
        return -1;
    }
    memcpy(id, x, len);
    id[len] = '\0';
    digits = strspn(id, "0123456789");
    if (len == UUID7_TEXT_LEN && strchr(id, '-') != NULL) {
        struct uuid7 u;
        struct uuid7_decoded d;

        if (uuid7_parse(id, len, &u, cause) == -1)
            return -1;
        uuid7_decode(&u, &d);
        uuid7_decoded_json(&u, &d, out);
        return 0;
    }
    /* A ULID has no '_': a 26-character ID string (a prefix of 14 letters
     * and base62) is one of ours, below. */
    if (len == ULID_TEXT_LEN && digits != len && memchr(id, '_', len) == NULL) {
        struct ulid u;

        if (ulid_parse(id, len, &u, cause) == -1)
            return -1;
        ulid_decoded_json(&u, out);
        return 0;
    }
    if (decode_looks_idstr(id, len)) {
        struct decode_idstr d;
        const char *code;
        char why[256];

        if (decode_id_string(cfg, DECODE_SEGMENT | DECODE_SNOWFLAKE, id, len,
                             IDSTR_DEC, &d, &code, why, sizeof why) != 0) {
            *cause = xasprintf("%s", why);
            return -1;
        }
        if (d.kind == DECODE_SEGMENT) {
            decode_segment_json(&d, out);
            return 0;
        }
        len = (size_t)snprintf(id, sizeof id, "%" PRIu64, d.p.id);
    }
    if (sf != NULL)
        return snowflake_decode_json(sf, id, len, 0, out, cause);
    return sfconfig_decode_cli(cfg, id, 0, out, cause);
}
