/* fuzz_pg_conninfo.c: libFuzzer target for PostgreSQL connection strings
 * (db_pg_conninfo_check: segment.postgresql.url), libpq's URI and keyword
 * forms: any bytes give 0 or -1 with a reason naming the key, never a
 * crash; an accepted string parses with libpq (PQconninfoParse), names a
 * host, and every sslmode, target_session_attrs and port in it is one
 * leafd allows; db_pg_conninfo_redacted of any bytes ends, and what
 * libpq reads of it has no password but the mask.
 *
 * Input: the string (NUL-terminated copy of the bytes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_pg.h"
#include "fuzz.h"

static int
one_of(const char *v, const char *set)
{
    char buf[64];

    if (strlen(v) > 40)
        return 0;
    snprintf(buf, sizeof buf, " %s ", v);
    return strstr(set, buf) != NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1), *cause = NULL;
    PQconninfoOption *opts;
    int rc, host = 0;

    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    {
        /* The redacted form (multi-db init's line): any bytes; a string
         * libpq reads back has no password but the mask. */
        char *r = db_pg_conninfo_redacted(s);

        FUZZ_ASSERT(strlen(r) <= 4 * size + 8);
        PQconninfoOption *orig = PQconninfoParse(s, NULL);

        opts = PQconninfoParse(r, NULL);
        if (opts != NULL && orig != NULL) {
            for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
                if (strcmp(o->keyword, "password") == 0 && o->val != NULL)
                    FUZZ_ASSERT(strcmp(o->val, "***") == 0 || o->val[0] == '\0');
        }
        PQconninfoFree(orig);
        PQconninfoFree(opts);
        free(r);
    }
    rc = db_pg_conninfo_check(s, "k", &cause);
    if (rc == -1) {
        FUZZ_ASSERT(cause != NULL && strncmp(cause, "k: ", 3) == 0);
        free(cause);
        free(s);
        return 0;
    }
    FUZZ_ASSERT(rc == 0 && cause == NULL);
    FUZZ_ASSERT(strlen(s) <= DB_PG_CONNINFO_MAX);
    opts = PQconninfoParse(s, NULL);
    FUZZ_ASSERT(opts != NULL);
    for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
        if (o->val == NULL)
            continue;
        if (strcmp(o->keyword, "host") == 0 || strcmp(o->keyword, "hostaddr") == 0)
            host |= o->val[0] != '\0';
        if (strcmp(o->keyword, "sslmode") == 0)
            FUZZ_ASSERT(one_of(o->val, " disable allow prefer require verify-ca verify-full "));
        if (strcmp(o->keyword, "target_session_attrs") == 0)
            FUZZ_ASSERT(one_of(o->val, " any read-write read-only primary standby prefer-standby "));
        if (strcmp(o->keyword, "replication") == 0)
            FUZZ_ASSERT(0);
        if (strcmp(o->keyword, "port") == 0)
            for (const char *p = o->val; *p; p++)
                FUZZ_ASSERT((*p >= '0' && *p <= '9') || *p == ',');
    }
    FUZZ_ASSERT(host);
    PQconninfoFree(opts);
    free(s);
    return 0;
}
