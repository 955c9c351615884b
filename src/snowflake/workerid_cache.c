/* workerid_cache.c: the snowflake cache file: worker ID, fence and instance
 * nonce, written atomically (see workerid_cache.h).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sfcodec.h"
#include "util.h"
#include "workerid_cache.h"

void
workerid_cache_free(struct workerid_cache *c)
{
    if (c == NULL)
        return;
    free(c->leaf_name);
    free(c->source);
    free(c->ip);
    free(c->zk_node);
    free(c->nonce);
    free(c->layout);
    memset(c, 0, sizeof *c);
    c->worker_id = -1;
}

static char *
opt_str(json_t *root, const char *key)
{
    json_t *v = json_object_get(root, key);
    return xstrdup(json_is_string(v) ? json_string_value(v) : "");
}

int
workerid_cache_read(const char *path, struct workerid_cache *c, char **cause)
{
    char buf[65536];
    json_error_t err;
    json_t *root = NULL, *v;
    ssize_t n;
    size_t len = 0;
    int fd, rc = -1;
    const char *why = NULL;
    char *whybuf = NULL;

    memset(c, 0, sizeof *c);
    c->worker_id = -1;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1) {
        if (errno == ENOENT)
            return 1;
        *cause = xasprintf("snowflake cache file %s: %s", path,
                           strerror(errno));
        return -1;
    }
    while (len < sizeof buf - 1 &&
           (n = read(fd, buf + len, sizeof buf - 1 - len)) != 0) {
        if (n == -1) {
            if (errno == EINTR)
                continue;
            *cause = xasprintf("snowflake cache file %s: read: %s", path,
                               strerror(errno));
            close(fd);
            return -1;
        }
        len += (size_t)n;
    }
    close(fd);
    if (len == sizeof buf - 1) {
        why = "too large";
        goto corrupt;
    }
    root = json_loadb(buf, len, 0, &err);
    if (root == NULL) {
        whybuf = xasprintf("line %d: %s", err.line, err.text);
        why = whybuf;
        goto corrupt;
    }
    if (!json_is_object(root)) {
        why = "not a JSON object";
        goto corrupt;
    }
    v = json_object_get(root, "format");
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        why = "no \"format\":1";
        goto corrupt;
    }
    v = json_object_get(root, "worker_id");
    if (!json_is_integer(v) || json_integer_value(v) < -1) {
        why = "no valid \"worker_id\"";
        goto corrupt;
    }
    c->worker_id = json_integer_value(v);
    v = json_object_get(root, "fence");
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        why = "no valid \"fence\"";
        goto corrupt;
    }
    c->fence_ms = json_integer_value(v);
    v = json_object_get(root, "port");
    c->port = json_is_integer(v) ? json_integer_value(v) : 0;
    v = json_object_get(root, "datacenter_id");
    c->datacenter_id = json_is_integer(v) ? json_integer_value(v) : 0;
    c->leaf_name = opt_str(root, "leaf_name");
    c->source = opt_str(root, "source");
    c->ip = opt_str(root, "ip");
    c->zk_node = opt_str(root, "zk_node");
    c->nonce = opt_str(root, "nonce");
    c->layout = opt_str(root, "layout");
    rc = 0;
    goto out;

corrupt:
    *cause = xasprintf("snowflake cache file %s is corrupt (%s); it holds the "
                       "worker ID and the fence: fix it, or remove it only "
                       "once the clock is surely past the last IDs issued",
                       path, why);
    workerid_cache_free(c);
out:
    free(whybuf);
    json_decref(root);
    return rc;
}

static int
write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n == -1) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int
workerid_cache_write(const char *path, const struct workerid_cache *c,
                     char **cause)
{
    struct sbuf b = {0};
    char *tmp, *dir, *slash;
    int fd = -1, dfd, rc = -1;

    sbuf_printf(&b, "{\"format\":1,\"leaf_name\":");
    sbuf_json_str(&b, c->leaf_name != NULL ? c->leaf_name : "");
    sbuf_puts(&b, ",\"source\":");
    sbuf_json_str(&b, c->source != NULL ? c->source : "");
    sbuf_puts(&b, ",\"ip\":");
    sbuf_json_str(&b, c->ip != NULL ? c->ip : "");
    sbuf_printf(&b, ",\"port\":%" PRId64 ",\"worker_id\":%" PRId64
                ",\"datacenter_id\":%" PRId64 ",\"fence\":%" PRId64
                ",\"zk_node\":", c->port, c->worker_id, c->datacenter_id,
                c->fence_ms);
    sbuf_json_str(&b, c->zk_node != NULL ? c->zk_node : "");
    sbuf_puts(&b, ",\"nonce\":");
    sbuf_json_str(&b, c->nonce != NULL ? c->nonce : "");
    if (c->layout != NULL && *c->layout != '\0') {
        sbuf_puts(&b, ",\"layout\":");
        sbuf_json_str(&b, c->layout);
    }
    sbuf_puts(&b, "}\n");

    tmp = xasprintf("%s.tmp", path);
    dir = xstrdup(path);
    slash = strrchr(dir, '/');
    if (slash == NULL) {
        free(dir);
        dir = xstrdup(".");
    } else if (slash == dir) {
        dir[1] = '\0';
    } else {
        *slash = '\0';
    }

    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd == -1) {
        *cause = xasprintf("snowflake cache file %s: %s", tmp,
                           strerror(errno));
        goto out;
    }
    if (write_all(fd, b.p, b.len) == -1 || fsync(fd) == -1) {
        *cause = xasprintf("snowflake cache file %s: write: %s", tmp,
                           strerror(errno));
        goto out;
    }
    if (close(fd) == -1) {
        fd = -1;
        *cause = xasprintf("snowflake cache file %s: close: %s", tmp,
                           strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) == -1) {
        *cause = xasprintf("snowflake cache file: rename %s to %s: %s", tmp,
                           path, strerror(errno));
        goto out;
    }
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd == -1 || fsync(dfd) == -1) {
        *cause = xasprintf("snowflake cache file: fsync of directory %s: %s",
                           dir, strerror(errno));
        if (dfd != -1)
            close(dfd);
        goto out;
    }
    close(dfd);
    rc = 0;
out:
    if (fd != -1) {
        close(fd);
        unlink(tmp);
    }
    free(tmp);
    free(dir);
    sbuf_free(&b);
    return rc;
}

void
workerid_cache_layout(int64_t epoch_ms, int timestamp_bits,
                      int datacenter_bits, int worker_bits,
                      int sequence_bits, char *buf, size_t size)
{
    snprintf(buf, size, "%" PRId64 ":%d/%d/%d/%d", epoch_ms, timestamp_bits,
             datacenter_bits, worker_bits, sequence_bits);
}

/* "<epoch>:<t>/<d>/<w>/<s>": 0 with the epoch and the timestamp's shift
 * (d + w + s), or -1. */
static int
cache_layout_parse(const char *s, int64_t *epoch, int *shift)
{
    long long e;
    int t, d, w, q, end = 0;

    if (sscanf(s, "%lld:%d/%d/%d/%d%n", &e, &t, &d, &w, &q, &end) != 5 ||
        s[end] != '\0' || t < 1 || d < 0 || w < 0 || q < 1 ||
        (t + d + w + q != 63 && t + d + w + q != SFCODEC_JS53_BITS))
        return -1;
    *epoch = e;
    *shift = d + w + q;
    return 0;
}

int
workerid_cache_layout_check(const char *path, const struct workerid_cache *c,
                            const char *layout, char **cause)
{
    int64_t e0, e1;
    int s0, s1;

    if (c->layout == NULL || *c->layout == '\0' ||
        strcmp(c->layout, layout) == 0)
        return 0;
    if (cache_layout_parse(layout, &e1, &s1) == -1) {
        assert(!"workerid_cache_layout gave an unparsable layout");
        s1 = 0;
    }
    if (cache_layout_parse(c->layout, &e0, &s0) == 0 && e0 == e1 &&
        s1 > s0)
        return 0;
    *cause = xasprintf("snowflake layout changed since the last run: the "
                       "cache file %s was written under %s (epoch_ms:"
                       "timestamp/datacenter/worker/sequence bits), the "
                       "config gives %s. IDs of the new layout can equal "
                       "IDs already issued: only bits moved out of "
                       "timestamp_bits, with the same epoch_ms, keep every "
                       "new ID above the old ones. Bits moved into "
                       "timestamp_bits, or a later epoch_ms, are never "
                       "safe. Otherwise (worker_bits traded with "
                       "sequence_bits, an earlier epoch_ms): stop every "
                       "node of the old layout, wait until the clock is past "
                       "the highest fence in their cache files, remove "
                       "those files, then start the nodes on the new layout "
                       "(docs/operations.md)", path, c->layout, layout);
    return -1;
}
