/* decode.h: tell an ID's kind by its form and decode it, for
 * `leafd decode <id>`, RESP's LEAF.DECODE and the decode routes; and the
 * prefixes of IDs as strings (idstr.h: segment.prefix.*, snowflake.prefix).
 *
 * A UUID has a '-' in 36 characters, a ULID is 26 characters that are not
 * all digits; an ID string (a prefix and '_', then 11 characters of base62
 * or 13 of base32) is a segment ID when its prefix is a segment.prefix.*,
 * else a snowflake ID; anything else is read as a decimal snowflake ID:
 * with the running generator's layout when sf is given, else with cfg's
 * snowflake.* keys. Pure apart from reading sf's immutable layout and the
 * read-only config; any thread.
 */
#ifndef LEAFD_DECODE_H
#define LEAFD_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "idstr.h"

struct config;
struct sbuf;
struct snowflake;

/* Whether s (len bytes, NUL-terminated) reads as an ID string rather than
 * a decimal ID: not all digits, and a prefix ('_') or a width of its own
 * (11 base62 or 13 base32 characters; a decimal of 11 or 13 digits stays
 * decimal). */
int decode_looks_idstr(const char *s, size_t len);

/* Appends the same JSON as the HTTP decode routes to out. Returns 0, or -1
 * with *cause (free it) saying what is wrong. */
int decode_any(const struct config *cfg, const struct snowflake *sf,
               const char *x, size_t len, struct sbuf *out, char **cause);

/* The prefix of tag's IDs as strings (segment.prefix.<p> = tag), or of
 * snowflake IDs when tag is NULL (snowflake.prefix); "" for none. */
const char *decode_prefix_of(const struct config *cfg, const char *tag);

enum decode_kind { DECODE_SEGMENT = 1, DECODE_SNOWFLAKE = 2 };

/* An ID string read back. */
struct decode_idstr {
    struct idstr_parsed p;         /* the ID, its encoding and prefix */
    enum decode_kind    kind;
    const char         *tag;       /* segment: the biz_tag its prefix names,
                                      or NULL (no prefix) */
};

/* Read s (len bytes) as an ID string of one of kinds (a mask of enum
 * decode_kind): a segment.prefix.* prefix makes it a segment ID, the
 * snowflake.prefix a snowflake ID; one without a prefix is a snowflake ID
 * unless kinds is DECODE_SEGMENT alone. want: the encoding (IDSTR_DEC: by
 * its width). Returns 0 with *out, or 400 with *code (static:
 * "invalid_id", or "unknown_prefix" for a prefix of no kind asked) and the
 * reason in why. */
int decode_id_string(const struct config *cfg, int kinds, const char *s,
                     size_t len, enum idstr_enc want, struct decode_idstr *out,
                     const char **code, char *why, size_t whylen);

/* {"id":"<n>","encoding":"base62"[,"biz_tag":"<tag>"]} for a segment ID
 * string, appended to out. */
void decode_segment_json(const struct decode_idstr *d, struct sbuf *out);

#endif
