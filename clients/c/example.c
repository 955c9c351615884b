/* example.c: libleafd-client in a few lines. Prints n IDs of a biz_tag
 * taken from leased ranges, and decodes a snowflake ID.
 *
 *   build/leafd-client-example http://127.0.0.1:8080 demo 5
 */
#include <stdio.h>
#include <stdlib.h>

#include "leafd_client.h"

int
main(int argc, char **argv)
{
    const char *urls = argc > 1 ? argv[1] : "http://127.0.0.1:8080";
    const char *tag = argc > 2 ? argv[2] : "demo";
    int n = argc > 3 ? atoi(argv[3]) : 5;
    const char *err = NULL;
    struct leafd_client *c = leafd_client_new(urls, NULL, &err);
    struct leafd_snowflake sf;

    if (c == NULL) {
        fprintf(stderr, "leafd_client_new: %s\n", err);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        int64_t id;
        int rc = leafd_next(c, tag, &id);

        if (rc != LEAFD_OK) {
            fprintf(stderr, "leafd_next: %s: %s\n", leafd_strerror(rc), leafd_last_error());
            leafd_client_free(c);
            return 1;
        }
        printf("%lld\n", (long long)id);
    }
    if (leafd_snowflake_decode(UINT64_C(1594999546445271040), &sf) == 0)
        printf("snowflake 1594999546445271040: %s worker %llu sequence %llu\n", sf.time,
               (unsigned long long)sf.worker_id, (unsigned long long)sf.sequence);
    leafd_client_free(c);
    return 0;
}
