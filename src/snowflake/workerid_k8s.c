/* workerid_k8s.c: a snowflake worker ID from a Kubernetes StatefulSet pod's
 * ordinal (see workerid.h). Pure, so it can be tested and fuzzed alone. */
#include <inttypes.h>
#include <string.h>

#include "util.h"
#include "workerid.h"

#define WK_NAME_MAX 253         /* a DNS name, as a pod's hostname is */

int
workerid_k8s_ordinal(const char *name, int64_t offset, uint64_t max_worker,
                     int64_t *worker, char **cause)
{
    size_t len = name != NULL ? strnlen(name, WK_NAME_MAX + 1) : 0;
    const char *dash;
    int64_t ord;

    if (len == 0 || len > WK_NAME_MAX) {
        *cause = xstrdup("snowflake.worker_source is k8s but the pod name "
                         "is empty or over 253 bytes");
        return -1;
    }
    dash = strrchr(name, '-');
    dash = dash != NULL ? dash + 1 : name;
    if (util_parse_i64(dash, strlen(dash), 0, &ord) == -1 || ord < 0) {
        *cause = xasprintf("snowflake.worker_source is k8s but \"%s\" does "
                           "not end in a StatefulSet ordinal (-<n>)", name);
        return -1;
    }
    if (offset < 0 || ord > INT64_MAX - offset ||
        (uint64_t)(ord + offset) > max_worker) {
        *cause = xasprintf("pod ordinal %" PRId64 " + "
                           "snowflake.k8s.ordinal_offset %" PRId64 " is past "
                           "the highest worker ID %" PRIu64, ord, offset,
                           max_worker);
        return -1;
    }
    *worker = ord + offset;
    return 0;
}
