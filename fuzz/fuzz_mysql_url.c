/* fuzz_mysql_url.c: libFuzzer target for MySQL URLs (db_mysql_url_parse:
 * segment.mysql.url(s), leaf.jdbc.url, snowflake.mysql.url): any bytes give
 * a target or a reason, never a crash, and a target it gives is usable: a
 * host within its limit, a port in 1..65535, fields within their limits, a
 * socket path that is absolute, and TLS settings db_mysql_connect can apply:
 * a known ssl_mode, absolute ssl_ca/ssl_cert/ssl_key paths of at most 512
 * bytes, no file with disabled, no ssl_ca with required, an ssl_ca with
 * verify_ca, ssl_cert and ssl_key together. db_mysql_url_redacted never
 * crashes, and the copy it makes of a URL that parses parses the same with
 * the password "***".
 *
 * Input: the URL text (NUL-terminated copy of the bytes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_mysql_url.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct db_mysql_target t;
    char *s = malloc(size + 1), *cause = NULL;

    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    if (db_mysql_url_parse(s, &t, &cause) == -1) {
        FUZZ_ASSERT(cause != NULL && *cause != '\0');
        free(cause);
        cause = NULL;
        free(db_mysql_url_redacted(s));
    } else {
        FUZZ_ASSERT(t.host != NULL && *t.host != '\0' && strlen(t.host) <= 255);
        FUZZ_ASSERT(t.port >= 1 && t.port <= 65535);
        FUZZ_ASSERT(t.user == NULL || strlen(t.user) <= 128);
        FUZZ_ASSERT(t.password == NULL || strlen(t.password) <= 256);
        FUZZ_ASSERT(t.database == NULL || strlen(t.database) <= 64);
        FUZZ_ASSERT(t.socket == NULL || (t.socket[0] == '/' && strlen(t.socket) <= 107));
        FUZZ_ASSERT(t.ssl_mode >= DB_MYSQL_SSL_DISABLED &&
                    t.ssl_mode <= DB_MYSQL_SSL_VERIFY_IDENTITY);
        FUZZ_ASSERT(db_mysql_ssl_mode_name(t.ssl_mode) != NULL);
        FUZZ_ASSERT(t.ssl_ca == NULL || (t.ssl_ca[0] == '/' && strlen(t.ssl_ca) <= 512));
        FUZZ_ASSERT(t.ssl_cert == NULL || (t.ssl_cert[0] == '/' && strlen(t.ssl_cert) <= 512));
        FUZZ_ASSERT(t.ssl_key == NULL || (t.ssl_key[0] == '/' && strlen(t.ssl_key) <= 512));
        FUZZ_ASSERT(t.ssl_mode != DB_MYSQL_SSL_DISABLED ||
                    (t.ssl_ca == NULL && t.ssl_cert == NULL && t.ssl_key == NULL));
        FUZZ_ASSERT(t.ssl_mode != DB_MYSQL_SSL_REQUIRED || t.ssl_ca == NULL);
        FUZZ_ASSERT(t.ssl_mode != DB_MYSQL_SSL_VERIFY_CA || t.ssl_ca != NULL);
        FUZZ_ASSERT((t.ssl_cert == NULL) == (t.ssl_key == NULL));
        {
            struct db_mysql_target r;
            char *shown = db_mysql_url_redacted(s);
            /* the mask may push a URL over its length limit */
            if (db_mysql_url_parse(shown, &r, &cause) == 0) {
                FUZZ_ASSERT((t.password == NULL) == (r.password == NULL));
                FUZZ_ASSERT(r.password == NULL || strcmp(r.password, "***") == 0);
                FUZZ_ASSERT(strcmp(r.host, t.host) == 0 && r.port == t.port);
                FUZZ_ASSERT(r.ssl_mode == t.ssl_mode);
                db_mysql_target_free(&r);
            } else {
                FUZZ_ASSERT(strlen(shown) > 1024);
                free(cause);
            }
            free(shown);
        }
        db_mysql_target_free(&t);
        FUZZ_ASSERT(t.host == NULL && t.port == 3306 && t.ssl_ca == NULL &&
                    t.ssl_mode == DB_MYSQL_SSL_DISABLED);
    }
    free(s);
    return 0;
}
