/* console.h: leafd's web console (web/, compiled in): /console, its assets,
 * and the / redirect.
 *
 * The files under web/ become C data at build time (tools/embed.c writes
 * build/console_assets.c). The page reads the JSON pages the API already has
 * (/health /metrics /cache /db /snowflake/state /snowflake/decode) and
 * /console/about.json (version, configuration source) from here.
 *
 * console_handle runs on an I/O thread, never blocks and allocates nothing
 * but the about.json answer; thread-safe (the assets are immutable).
 */
#ifndef LEAFD_CONSOLE_H
#define LEAFD_CONSOLE_H

#include <stddef.h>

#include "http.h"

struct config;

/* One embedded file. name is what follows "/console/" in its URL; the
 * page's assets carry a content hash in the name ("app.1a2b3c4d.js"), so
 * they may be cached for good. The page itself is the asset named "". */
struct console_asset {
    const char          *name;
    const char          *content_type;
    const unsigned char *data;
    size_t               len;
};

/* Written by tools/embed.c. */
extern const struct console_asset console_assets[];
extern const size_t               console_nassets;
extern const char                 console_version[];   /* LEAFD_VERSION */

/* Answers GET/HEAD of "/", "/console", "/console/" and "/console/<asset>"
 * and returns 1; returns 0 for any other path (the caller routes it).
 * /console/about.json needs the admin token when admin.token is set, as the
 * other admin pages do. */
int console_handle(struct http_conn *c, const struct http_msg *m,
                   const struct config *cfg);

#endif
