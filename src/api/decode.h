/* decode.h: tell an ID's kind by its form and decode it, for
 * `leafd decode <id>` and RESP's LEAF.DECODE.
 *
 * A UUID has a '-' in 36 characters, a ULID is 26 characters that are not
 * all digits; anything else is read as a snowflake ID: with the running
 * generator's layout when sf is given, else with cfg's snowflake.* keys.
 * Pure apart from reading sf's immutable layout; any thread.
 */
#ifndef LEAFD_DECODE_H
#define LEAFD_DECODE_H

#include <stddef.h>

struct config;
struct sbuf;
struct snowflake;

/* Appends the same JSON as the HTTP decode routes to out. Returns 0, or -1
 * with *cause (free it) saying what is wrong. */
int decode_any(const struct config *cfg, const struct snowflake *sf,
               const char *x, size_t len, struct sbuf *out, char **cause);

#endif
