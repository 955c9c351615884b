/* idstr.h: a 63-bit ID (segment or snowflake) as a short string, for URLs,
 * JavaScript and people: fixed-width base62 or Crockford base32, with an
 * optional TypeID-style prefix ("ord_0cHn3yQ8aZ1"). docs/id-kinds.md, "IDs
 * as strings", is the reference.
 *
 *   base62  11 characters of 0-9A-Za-z, case-sensitive
 *   base32  13 characters of Crockford's 0-9A-HJKMNP-TV-Z; read in any
 *           case, I and L read as 1, O as 0; no hyphens
 *   prefix  1 to IDSTR_PREFIX_MAX of [a-z_], starting and ending with a
 *           letter, then '_': the string splits at its last '_'
 *
 * Both alphabets are in ASCII order and every string has the same width, so
 * strings of one encoding and prefix sort bytewise (strcmp, memcmp, a
 * database's binary collation) exactly as their IDs sort numerically. The
 * largest ID is 2^63-1 ("AzL8n0Y58m7", "7ZZZZZZZZZZZZ"): a larger value is
 * refused, as no leafd ID has bit 63 set.
 *
 * Pure: no allocation, no global state, any thread; fuzz/fuzz_idstr.c takes
 * it alone.
 */
#ifndef LEAFD_IDSTR_H
#define LEAFD_IDSTR_H

#include <stddef.h>
#include <stdint.h>

#define IDSTR_PREFIX_MAX 63
#define IDSTR_B62_LEN    11
#define IDSTR_B32_LEN    13
/* The longest string: a prefix, '_' and a base32 ID. */
#define IDSTR_TEXT_MAX   (IDSTR_PREFIX_MAX + 1 + IDSTR_B32_LEN)

/* How a request wants its IDs: decimal numbers (the default) or strings. */
enum idstr_enc { IDSTR_DEC, IDSTR_BASE62, IDSTR_BASE32 };

/* "dec", "base62" or "base32" (exactly, lower case): 0 with *out, or -1. */
int idstr_enc_parse(const char *s, size_t len, enum idstr_enc *out);
const char *idstr_enc_name(enum idstr_enc e);

/* Is p (len bytes) a prefix: 1 to IDSTR_PREFIX_MAX of [a-z_], its first and
 * last a letter? 1 or 0. */
int idstr_prefix_valid(const char *p, size_t len);

/* Write id (<= INT64_MAX) in e (not IDSTR_DEC) to out, after "<prefix>_"
 * when plen > 0 (prefix valid): out needs plen + 1 + 13 bytes (no NUL is
 * written). Returns the length written. */
size_t idstr_encode(enum idstr_enc e, const char *prefix, size_t plen,
                    uint64_t id, char *out);

/* What idstr_decode found. */
enum idstr_result {
    IDSTR_OK,
    IDSTR_BAD_LENGTH,       /* neither 11 (base62) nor 13 (base32) after the prefix,
                               or not the width the encoding asked for has */
    IDSTR_BAD_CHAR,         /* a character outside the encoding's alphabet */
    IDSTR_OVERFLOW,         /* over 2^63-1 */
    IDSTR_BAD_PREFIX,       /* a prefix that breaks the prefix rules */
};

struct idstr_parsed {
    enum idstr_enc enc;     /* the encoding read */
    uint64_t       id;
    const char    *prefix;  /* into the input; NULL when there is none */
    size_t         prefix_len;
};

/* Read s (len bytes): "[<prefix>_]<id>". want IDSTR_DEC: the encoding by
 * the width (11: base62, 13: base32); else that encoding's width only.
 * IDSTR_OK with *out filled, or what is wrong. */
enum idstr_result idstr_decode(const char *s, size_t len, enum idstr_enc want,
                               struct idstr_parsed *out);

/* A sentence saying what r means (static). */
const char *idstr_result_text(enum idstr_result r);

#endif
