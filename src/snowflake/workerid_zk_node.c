/* workerid_zk_node.c: a Leaf worker-ID node's data, parsed and written (see
 * workerid_zk_node.h). */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "workerid_zk_node.h"

void
wzk_node_free(struct wzk_node *n)
{
    if (n == NULL)
        return;
    free(n->ip);
    free(n->nonce);
    free(n->zones);
    memset(n, 0, sizeof *n);
}

int
wzk_node_parse(const char *data, size_t len, struct wzk_node *n)
{
    json_error_t err;
    json_t *root = NULL, *v;
    int rc = -1;

    memset(n, 0, sizeof *n);
    if (len > WZK_NODE_MAX)
        goto out;
    root = json_loadb(data, len, 0, &err);
    if (root == NULL || !json_is_object(root))
        goto out;
    v = json_object_get(root, "ip");
    if (!json_is_string(v))
        goto out;
    n->ip = xstrdup(json_string_value(v));
    v = json_object_get(root, "port");
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (util_parse_i64(s, strlen(s), 0, &n->port) == -1)
            goto out;
    } else if (json_is_integer(v)) {
        n->port = json_integer_value(v);
    } else {
        goto out;
    }
    v = json_object_get(root, "timestamp");
    if (!json_is_integer(v))
        goto out;
    n->ts = json_integer_value(v);
    v = json_object_get(root, "leafd");
    if (json_is_string(v) && *json_string_value(v) != '\0')
        n->nonce = xstrdup(json_string_value(v));
    n->released = json_is_true(json_object_get(root, "released"));
    v = json_object_get(root, "serial_zones");
    if (v != NULL)
        n->zones = xstrdup(json_is_string(v) ? json_string_value(v) : "?");
    rc = 0;
out:
    if (rc == -1)
        wzk_node_free(n);
    json_decref(root);
    return rc;
}

char *
wzk_node_format(const char *ip, int64_t port, int64_t ts, const char *nonce,
                int released, int *len)
{
    return wzk_node_format_zones(ip, port, ts, nonce, released, NULL, len);
}

char *
wzk_node_format_zones(const char *ip, int64_t port, int64_t ts,
                      const char *nonce, int released, const char *zones,
                      int *len)
{
    struct sbuf b = {0};
    char pt[24];

    snprintf(pt, sizeof pt, "%" PRId64, port);
    sbuf_puts(&b, "{\"ip\":");
    sbuf_json_str(&b, ip);
    sbuf_puts(&b, ",\"port\":");
    sbuf_json_str(&b, pt);
    sbuf_printf(&b, ",\"timestamp\":%" PRId64, ts);
    if (nonce != NULL && *nonce != '\0') {
        sbuf_puts(&b, ",\"leafd\":");
        sbuf_json_str(&b, nonce);
    }
    if (released)
        sbuf_puts(&b, ",\"released\":true");
    if (zones != NULL) {
        sbuf_puts(&b, ",\"serial_zones\":");
        sbuf_json_str(&b, zones);
    }
    sbuf_puts(&b, "}");
    *len = (int)b.len;
    return b.p;
}
