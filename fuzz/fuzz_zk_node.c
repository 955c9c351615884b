/* fuzz_zk_node.c: libFuzzer target for a Leaf worker-ID node's data in
 * ZooKeeper (wzk_node_parse, wzk_node_format; links workerid_zk_node.o and
 * util.o alone): any bytes are parsed or refused, never a crash; what is
 * parsed has an ip, a nonce that is absent or non-empty, and written back
 * with wzk_node_format_zones it parses to the same fields (the
 * serial_zones record too), for a port in 0..65535
 * (leafd writes only its own; a string port is a non-negative decimal, a
 * number may be any integer, as before the split, so -60 does not come
 * back).
 *
 * Input: the node's data bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "workerid_zk_node.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wzk_node n, m;
    char *text;
    int len = 0;

    if (wzk_node_parse((const char *)data, size, &n) == -1) {
        FUZZ_ASSERT(n.ip == NULL && n.nonce == NULL);
        return 0;
    }
    FUZZ_ASSERT(size <= WZK_NODE_MAX);
    FUZZ_ASSERT(n.ip != NULL);
    FUZZ_ASSERT(n.nonce == NULL || *n.nonce != '\0');
    FUZZ_ASSERT(n.released == 0 || n.released == 1);
    if (n.port < 0 || n.port > 65535) {
        wzk_node_free(&n);
        return 0;
    }
    text = wzk_node_format_zones(n.ip, n.port, n.ts, n.nonce, n.released,
                                 n.zones, &len);
    FUZZ_ASSERT(len > 0 && (size_t)len == strlen(text));
    FUZZ_ASSERT(wzk_node_parse(text, (size_t)len, &m) == 0);
    FUZZ_ASSERT(strcmp(m.ip, n.ip) == 0);
    FUZZ_ASSERT(m.port == n.port && m.ts == n.ts);
    FUZZ_ASSERT(m.released == n.released);
    FUZZ_ASSERT((m.nonce == NULL) == (n.nonce == NULL));
    FUZZ_ASSERT(m.nonce == NULL || strcmp(m.nonce, n.nonce) == 0);
    FUZZ_ASSERT((m.zones == NULL) == (n.zones == NULL));
    FUZZ_ASSERT(m.zones == NULL || strcmp(m.zones, n.zones) == 0);
    wzk_node_free(&m);
    wzk_node_free(&n);
    free(text);
    return 0;
}
