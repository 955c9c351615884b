/* api_conceal.c: what the API says of concealed segment tags (conceal.h):
 * the admin route that reveals an ID's counter, and /health's block.
 *
 * GET /segment/reveal/<biz_tag>/<id> (RT_ADMIN): the block, the offset in
 * the block and the counter an ID of a concealed tag was made from, and
 * the key it was made under. <id> is the decimal ID, or its string form
 * (IDs as strings: the tag's prefix and base62 or base32).
 */
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_handlers.h"
#include "conceal.h"
#include "config.h"
#include "decode.h"
#include "idstr.h"
#include "util.h"

#define REVEAL_ID_MAX IDSTR_TEXT_MAX  /* longest <id>: an ID string */

void
api_segment_reveal(struct api *a, struct http_conn *c, const char *raw,
                   size_t rawlen)
{
    char tag[TAG_MAX + 1], id[REVEAL_ID_MAX + 1], why[256];
    const char *slash = memchr(raw, '/', rawlen), *err = NULL, *code = NULL;
    struct conceal_reveal rv;
    struct conceal_tag *ct;
    struct sbuf b = { 0 };
    long tlen, ilen;
    int64_t n = -1;

    if (api_admin_unset(a, c, R_SEGMENT_REVEAL, "revealing counters"))
        return;
    tlen = slash != NULL ? util_pct_decode(raw, (size_t)(slash - raw), tag,
                                           TAG_MAX) : -1;
    ilen = slash != NULL ? util_pct_decode(slash + 1, rawlen - (size_t)(slash - raw) - 1,
                                           id, REVEAL_ID_MAX) : -1;
    if (tlen <= 0 || ilen <= 0 || !util_tag_valid(tag, (size_t)tlen)) {
        api_reply_error(c, R_SEGMENT_REVEAL, 400, "invalid_id", NULL,
                        "expected /segment/reveal/<biz_tag>/<id> (a biz_tag of "
                        "1 to %d of [A-Za-z0-9._:-], an ID of 1 to %d "
                        "characters)", TAG_MAX, REVEAL_ID_MAX);
        return;
    }
    tag[tlen] = '\0';
    id[ilen] = '\0';
    ct = conceal_find(a->conceal, tag, (size_t)tlen);
    if (util_parse_i64(id, (size_t)ilen, 0, &n) != 0 || n < 0) {
        struct decode_idstr d;

        if (decode_id_string(a->cfg, DECODE_SEGMENT, id, (size_t)ilen, IDSTR_DEC,
                             &d, &code, why, sizeof why) != 0) {
            api_reply_error(c, R_SEGMENT_REVEAL, 400, "invalid_id", NULL,
                            "not an ID: %s", why);
            return;
        }
        if (d.tag != NULL && strcmp(d.tag, tag) != 0) {
            api_reply_error(c, R_SEGMENT_REVEAL, 400, "invalid_id", NULL,
                            "the ID's prefix is biz_tag '%s''s, not '%s''s",
                            d.tag, tag);
            return;
        }
        n = (int64_t)d.p.id;
    }
    if (ct == NULL) {
        sbuf_printf(&b, "{\"biz_tag\":\"%s\",\"id\":\"%lld\",\"concealed\":false,"
                    "\"counter\":%lld}\n", tag, (long long)n, (long long)n);
        api_reply_sbuf(c, R_SEGMENT_REVEAL, 200, "application/json", &b);
        return;
    }
    if (conceal_reveal(a->conceal, ct, (uint64_t)n, &rv, &err) == -1) {
        api_reply_error(c, R_SEGMENT_REVEAL, 409, "unknown_key", NULL,
                        "ID %lld of biz_tag '%s' is in block %llu, made under "
                        "key %s: %s", (long long)n, tag,
                        (unsigned long long)rv.block, rv.key, err);
        return;
    }
    /* tag is [A-Za-z0-9._:-], key [k0-9a-f]: no JSON escapes. */
    sbuf_printf(&b, "{\"biz_tag\":\"%s\",\"id\":\"%lld\",\"concealed\":%s,"
                "\"block\":%llu,\"offset\":%llu,\"counter\":%llu,\"bits\":%u,"
                "\"key\":\"%s\"}\n", tag, (long long)n,
                rv.concealed ? "true" : "false", (unsigned long long)rv.block,
                (unsigned long long)rv.offset, (unsigned long long)rv.counter,
                rv.bits, rv.key);
    api_reply_sbuf(c, R_SEGMENT_REVEAL, 200, "application/json", &b);
}

int
api_conceal_health(struct api *a, struct sbuf *b, struct sbuf *reasons)
{
    char why[768];
    int refused = 0;

    if (a->conceal == NULL)
        return 0;
    sbuf_printf(b, ",\"concealed\":{\"tags\":%zu,\"bits\":%u,\"key\":\"%s\","
                "\"refused\":[", conceal_count(a->conceal),
                conceal_bits(a->conceal), conceal_key_name(a->conceal));
    for (size_t i = 0; i < conceal_count(a->conceal); i++) {
        struct conceal_tag *t = conceal_tag_at(a->conceal, i);

        if (!conceal_refused(t, why, sizeof why))
            continue;
        sbuf_printf(b, "%s{\"biz_tag\":\"%s\",\"reason\":", refused ? "," : "",
                    conceal_tag_name(t));
        sbuf_json_str(b, why);
        sbuf_puts(b, "}");
        if (refused++ == 0)
            sbuf_printf(reasons, "segment: concealed biz_tag '%s' refused: %s; ",
                        conceal_tag_name(t), why);
    }
    sbuf_puts(b, "]}");
    return refused > 0;
}

void
api_conceal_metrics(struct api *a, struct sbuf *b)
{
    char why[8];

    if (a->conceal == NULL)
        return;
    sbuf_metric_head(b, "leafd_segment_conceal_refused", "gauge",
                     "1 while a concealed tag is refused (conceal_key_changed).");
    for (size_t i = 0; i < conceal_count(a->conceal); i++) {
        struct conceal_tag *t = conceal_tag_at(a->conceal, i);

        sbuf_printf(b, "leafd_segment_conceal_refused{biz_tag=\"%s\"} %d\n",
                    conceal_tag_name(t), conceal_refused(t, why, sizeof why));
    }
}
