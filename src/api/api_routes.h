/* api_routes.h: leafd's HTTP routes, one row each. api_internal.h makes
 * enum route from the first column, api_route.c the table it matches
 * requests against, in this order (the first row that matches wins).
 *
 * X(id, metrics name, path, flags, token scope, handler)
 *   path   "/x" matches exactly; "/x/<star>" any path under /x/, the rest
 *          going to the handler; "/x/<star>/y" a rest that ends in /y
 *          (the handler gets the rest without it); NULL: never matched
 *          (a row that only counts: RESP commands, unmatched requests).
 *   flags  RT_IDS     hands out IDs: answered with Cache-Control: no-store
 *          RT_BARE    "/x/<star>" also matches "/x" itself, with an empty rest
 *          RT_RAW     any method, the query unchecked: the handler reads
 *                     the request itself (Tinyid's client POSTs)
 *          RT_ADMIN   an operator page: admin.token, and only on the
 *                     admin listener when there is one
 *          RT_BOTH    served on the admin listener as well
 *          RT_LEAF    Leaf's path: one ID in text is the bare number
 *   scope  SC_TAG: a token for the biz_tag in the rest; SC_SNOWFLAKE:
 *          a token for @snowflake; SC_NONE: none, or the handler checks
 *          its own (serials, Tinyid)
 *
 * Adding an ID kind is adding a row here and writing its handler. */
#ifndef LEAFD_API_ROUTES_H
#define LEAFD_API_ROUTES_H

#define API_ROUTES(X)                                                          \
    X(R_LEASE,          "lease",           "/segment/*/lease",    RT_IDS, SC_TAG, route_lease) \
    X(R_SEGMENT_DECODE, "segment_decode",  "/segment/decode/*",   0, SC_NONE, route_segment_decode) \
    X(R_SEGMENT_REVEAL, "segment_reveal",  "/segment/reveal/*",   RT_ADMIN, SC_NONE, route_segment_reveal) \
    X(R_SEGMENT,        "segment",         "/segment/*",          RT_IDS | RT_BARE, SC_TAG, route_segment) \
    X(R_SEGMENT_LEAF,   "leaf_segment",    "/api/segment/get/*",  RT_IDS | RT_LEAF, SC_TAG, route_segment) \
    X(R_SNOWFLAKE,      "snowflake",       "/snowflake",          RT_IDS, SC_SNOWFLAKE, route_snowflake) \
    X(R_SNOWFLAKE_LEAF, "leaf_snowflake",  "/api/snowflake/get/*", RT_IDS | RT_LEAF, SC_SNOWFLAKE, route_snowflake) \
    X(R_DECODE,         "decode",          "/snowflake/decode/*", 0, SC_NONE, route_decode) \
    X(R_DECODE_LEAF,    "leaf_decode",     "/decodeSnowflakeId",  0, SC_NONE, route_decode_leaf) \
    X(R_UUID,           "uuid",            "/uuid",               RT_IDS, SC_NONE, route_id128) \
    X(R_ULID,           "ulid",            "/ulid",               RT_IDS, SC_NONE, route_id128) \
    X(R_UUID_DECODE,    "uuid_decode",     "/uuid/decode/*",      0, SC_NONE, route_id128_decode) \
    X(R_ULID_DECODE,    "ulid_decode",     "/ulid/decode/*",      0, SC_NONE, route_id128_decode) \
    X(R_SERIAL_DECODE,  "serial_decode",   "/serial/decode/*",    RT_ADMIN, SC_NONE, route_serial_decode) \
    X(R_SERIAL,         "serial",          "/serial/*",           RT_IDS, SC_NONE, route_serial) \
    X(R_TINYID,         "tinyid",          "/tinyid/id/*",        RT_IDS | RT_RAW, SC_NONE, route_tinyid) \
    X(R_HEALTH,         "health",          "/health",             RT_BOTH, SC_NONE, route_health) \
    X(R_METRICS,        "metrics",         "/metrics",            RT_ADMIN, SC_NONE, route_metrics) \
    X(R_CACHE,          "cache",           "/cache",              RT_ADMIN, SC_NONE, route_cache) \
    X(R_DB,             "db",              "/db",                 RT_ADMIN, SC_NONE, route_db) \
    X(R_SF_STATE,       "snowflake_state", "/snowflake/state",    RT_ADMIN, SC_NONE, route_sf_state) \
    X(R_RESP,           "resp",            NULL,                  0, SC_NONE, NULL) \
    X(R_MEMCACHE,       "memcache",        NULL,                  0, SC_NONE, NULL) \
    X(R_OTHER,          "other",           NULL,                  0, SC_NONE, NULL)

#endif
