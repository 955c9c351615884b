/* workerid_k8s.c: a snowflake worker ID from a Kubernetes StatefulSet pod's
 * ordinal (see workerid.h). Pure, so it can be tested and fuzzed alone. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "util.h"
#include "workerid.h"

#define WK_NAME_MAX 253         /* a DNS name, as a pod's hostname is */
#define WK_NS_MAX   63          /* a DNS label, as a namespace is */

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

int
workerid_k8s_identity(const char *name, const char *ns, char *buf,
                      size_t size, char **cause)
{
    size_t len = ns != NULL ? strnlen(ns, WK_NS_MAX + 1) : 0;
    int n, label = len <= WK_NS_MAX;

    for (size_t i = 0; label && i < len; i++) {
        char ch = ns[i];
        label = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                (ch == '-' && i > 0 && i < len - 1);
    }
    if (!label) {
        *cause = xasprintf("the pod's namespace \"%.63s\" is not a DNS "
                           "label (1..63 of a-z, 0-9, '-')", ns);
        return -1;
    }
    n = len > 0 ? snprintf(buf, size, "%s/%s", ns, name)
                : snprintf(buf, size, "%s", name);
    if (n < 0 || (size_t)n >= size) {
        *cause = xasprintf("the pod's identity %s/%s is over %zu bytes",
                           len > 0 ? ns : "", name, size - 1);
        return -1;
    }
    return 0;
}
