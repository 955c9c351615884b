/* fuzz_config.c: libFuzzer target for the config parser (config.h).
 *
 * The input is a config text (NUL-terminated copy; an embedded NUL simply
 * ends the text early, as C strings do). It is loaded over the defaults as a
 * config file would be (config_load_string, then config_validate), and the
 * result is checked: a failure comes with a cause, a success without one,
 * and a configuration that validates satisfies the cross-key rules that
 * config_validate promises (63 layout bits, or 53 (js53), the worker and
 * datacenter IDs fit
 * their fields, at least one mode on, the store and worker source resolved,
 * a k8s fence store only with the k8s source, valid prefixes of valid tags,
 * one per tag and kind).
 * config_free must release everything (LeakSanitizer checks).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "config.h"
#include "idstr.h"
#include "util.h"

static void
check_valid(const struct config *c)
{
    int64_t bits = c->timestamp_bits + c->datacenter_bits + c->worker_bits +
                   c->sequence_bits;

    FUZZ_ASSERT(bits == 63 || bits == 53);
    if (c->sf_layout == SF_LAYOUT_JS53)
        FUZZ_ASSERT(c->timestamp_bits == 41 && c->datacenter_bits == 0 &&
                    c->worker_bits == 5 && c->sequence_bits == 7);
    FUZZ_ASSERT(c->sf_prefix[0] == '\0' ||
                idstr_prefix_valid(c->sf_prefix, strlen(c->sf_prefix)));
    for (size_t i = 0; i < c->nprefixes; i++) {
        FUZZ_ASSERT(idstr_prefix_valid(c->prefixes[i].prefix,
                                       strlen(c->prefixes[i].prefix)));
        FUZZ_ASSERT(util_tag_valid(c->prefixes[i].tag, strlen(c->prefixes[i].tag)));
        FUZZ_ASSERT(strcmp(c->prefixes[i].prefix, c->sf_prefix) != 0);
        for (size_t j = 0; j < i; j++)
            FUZZ_ASSERT(strcmp(c->prefixes[i].prefix, c->prefixes[j].prefix) != 0 &&
                        strcmp(c->prefixes[i].tag, c->prefixes[j].tag) != 0);
    }
    FUZZ_ASSERT(c->worker_id >= 0 && c->worker_id < (1LL << c->worker_bits));
    FUZZ_ASSERT(c->datacenter_id >= 0 &&
                c->datacenter_id < (1LL << c->datacenter_bits));
    FUZZ_ASSERT(c->segment_enable || c->snowflake_enable);
    FUZZ_ASSERT(c->store == STORE_SQLITE || c->store == STORE_MYSQL);
    FUZZ_ASSERT(c->worker_source == WORKER_STATIC ||
                c->worker_source == WORKER_ZOOKEEPER ||
                c->worker_source == WORKER_REDIS ||
                c->worker_source == WORKER_MYSQL ||
                c->worker_source == WORKER_K8S);
    if (c->segment_enable && c->store == STORE_MYSQL)
        FUZZ_ASSERT(c->jdbc_url[0] != '\0' || c->mysql_url[0] != '\0' ||
                    c->mysql_urls[0] != '\0');
    FUZZ_ASSERT(!(c->mysql_urls[0] != '\0' &&
                  (c->mysql_url[0] != '\0' || c->jdbc_url[0] != '\0')));
    FUZZ_ASSERT(c->k8s_fence_store == K8S_FENCE_NONE ||
                c->k8s_fence_store == K8S_FENCE_REDIS ||
                c->k8s_fence_store == K8S_FENCE_MYSQL);
    if (c->k8s_fence_store != K8S_FENCE_NONE)
        FUZZ_ASSERT(c->worker_source == WORKER_K8S);
    if (c->snowflake_enable && c->worker_source == WORKER_ZOOKEEPER)
        FUZZ_ASSERT(c->zk_address[0] != '\0');
    FUZZ_ASSERT(c->snowflake_port > 0 || c->listen_port == 0);
    FUZZ_ASSERT(c->leaf_name != NULL && c->listen_address != NULL &&
                c->log_file != NULL && c->sqlite_path != NULL &&
                c->cache_file != NULL && c->sf_ip != NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config cfg;
    char *text, *cause = NULL;
    int rc;

    text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    config_defaults(&cfg);
    cfg.from_file = 1;          /* as config_load does for -c FILE */
    rc = config_load_string(&cfg, "fuzz.conf", text, &cause);
    if (rc == 0) {
        FUZZ_ASSERT(cause == NULL);
        rc = config_validate(&cfg, &cause);
        if (rc == 0) {
            FUZZ_ASSERT(cause == NULL);
            check_valid(&cfg);
        }
    }
    FUZZ_ASSERT(rc == 0 || rc == -1);
    if (rc == -1) {
        FUZZ_ASSERT(cause != NULL && cause[0] != '\0');
        free(cause);
    }
    config_free(&cfg);
    free(text);
    return 0;
}
