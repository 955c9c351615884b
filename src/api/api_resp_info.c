/* api_resp_info.c: INFO [section ...] over the Redis protocol, with the
 * fields Redis clients and tools read (redis_version, used_memory,
 * connected_clients, db0:keys, role, loading ...), each from a real source:
 * the allocator, /proc/self/statm, getrusage, the HTTP server's counters.
 * What Redis has and leafd lacks (persistence, replicas) is said as Redis
 * says "none": loading:0, role:master, connected_slaves:0.
 *
 * Sections: server clients memory persistence stats replication cpu, then
 * leafd's segment and snowflake (these two need the admin token when one
 * is set, as /cache and /snowflake/state do), then keyspace. No argument,
 * "default", "all" and "everything" give every section allowed; an unknown
 * section gives nothing, as in Redis.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LEAFD_SANITIZER_ALLOC 1
/* The sanitizer runtime's own count (sanitizer/allocator_interface.h,
 * which not every compiler's package ships): ASan and TSan replace malloc,
 * so glibc's mallinfo2 would say 0. */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#include "api_resp_internal.h"
#include "config.h"
#include "loader.h"
#include "segment.h"
#include "snowflake.h"
#include "util.h"
#include "version.h"

static int
want_section(const struct resp_cmd *cmd, const char *name)
{
    if (cmd->argc == 1)
        return 1;
    for (size_t i = 1; i < cmd->argc; i++)
        if (api_resp_arg_is(cmd, i, name) || api_resp_arg_is(cmd, i, "all") ||
            api_resp_arg_is(cmd, i, "everything") || api_resp_arg_is(cmd, i, "default"))
            return 1;
    return 0;
}

/* "# Name\r\n", after a blank line unless it is the first section. */
static void
section(struct sbuf *t, const char *name)
{
    sbuf_printf(t, "%s# %s\r\n", t->len ? "\r\n" : "", name);
}

/* Redis's bytesToHuman: 1023B, 1.50K, 2.00M, ... */
static void
human(struct sbuf *t, const char *field, unsigned long long n)
{
    static const char units[] = "KMGTP";
    double d = (double)n;
    int u = -1;

    if (n < 1024) {
        sbuf_printf(t, "%s:%lluB\r\n", field, n);
        return;
    }
    while (d >= 1024 && u < (int)sizeof units - 2) {
        d /= 1024;
        u++;
    }
    sbuf_printf(t, "%s:%.2f%c\r\n", field, d, units[u]);
}

/* Bytes the allocator has handed out and not taken back. */
static unsigned long long
allocated_bytes(const char **allocator)
{
#if defined(LEAFD_SANITIZER_ALLOC)
    *allocator = "sanitizer";
    return (unsigned long long)__sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();

    *allocator = "libc";
    return (unsigned long long)(mi.uordblks + mi.hblkhd);
#endif
}

/* Resident bytes (/proc/self/statm's second field), 0 if unreadable. */
static unsigned long long
rss_bytes(void)
{
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * (unsigned long long)sysconf(_SC_PAGESIZE);
}

static void
info_server(struct api_resp_ctx *x, struct sbuf *t)
{
    struct api *a = x->a;
    struct utsname un;
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    int64_t up_s = (util_wall_ms() - a->started_ms) / 1000;

    exe[n > 0 ? n : 0] = '\0';
    if (uname(&un) != 0)
        memset(&un, 0, sizeof un);
    section(t, "Server");
    sbuf_printf(t, "redis_version:%s\r\nleafd_version:%s\r\n"
                "redis_mode:standalone\r\nos:%s %s %s\r\narch_bits:%d\r\n"
                "process_id:%ld\r\ntcp_port:%d\r\nserver_time_usec:%lld\r\n"
                "uptime_in_seconds:%lld\r\nuptime_in_days:%lld\r\n"
                "executable:%s\r\nio_threads:%d\r\n",
                API_RESP_REDIS_VERSION, LEAFD_VERSION, un.sysname, un.release,
                un.machine, (int)(sizeof(void *) * 8), (long)getpid(),
                a->server != NULL ? http_server_resp_port(a->server) : 0,
                (long long)util_wall_ms() * 1000, (long long)up_s,
                (long long)(up_s / 86400), exe, a->nthreads);
}

static void
info_memory(struct sbuf *t)
{
    const char *allocator;
    unsigned long long used = allocated_bytes(&allocator), rss = rss_bytes();
    unsigned long long total = (unsigned long long)sysconf(_SC_PHYS_PAGES) *
                               (unsigned long long)sysconf(_SC_PAGESIZE);

    section(t, "Memory");
    sbuf_printf(t, "used_memory:%llu\r\n", used);
    human(t, "used_memory_human", used);
    sbuf_printf(t, "used_memory_rss:%llu\r\n", rss);
    human(t, "used_memory_rss_human", rss);
    sbuf_printf(t, "total_system_memory:%llu\r\n", total);
    human(t, "total_system_memory_human", total);
    sbuf_printf(t, "maxmemory:0\r\nmaxmemory_human:0B\r\n"
                "maxmemory_policy:noeviction\r\n"
                "mem_fragmentation_ratio:%.2f\r\nmem_allocator:%s\r\n",
                used > 0 ? (double)rss / (double)used : 0.0, allocator);
}

static void
info_cpu(struct sbuf *t)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0)
        memset(&ru, 0, sizeof ru);
    section(t, "CPU");
    sbuf_printf(t, "used_cpu_sys:%ld.%06ld\r\nused_cpu_user:%ld.%06ld\r\n",
                (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec,
                (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec);
}

static void
info_segment(struct api *a, struct sbuf *t)
{
    section(t, "Segment");
    sbuf_printf(t, "segment_enabled:%d\r\n", a->segs != NULL);
    if (a->segs != NULL) {
        struct loader_status ls;

        loader_status(a->loader, &ls);
        sbuf_printf(t, "segment_store:%s\r\nsegment_db:%s\r\nsegment_tags:%zu\r\n",
                    ls.store, ls.db_up ? "up" : "down", segments_count(a->segs));
    }
}

static void
info_snowflake(struct api *a, struct sbuf *t)
{
    char *reason = NULL;
    int ok;

    section(t, "Snowflake");
    sbuf_printf(t, "snowflake_enabled:%d\r\n", a->sf != NULL);
    if (a->sf == NULL)
        return;
    ok = snowflake_health(a->sf, &reason) == 0;
    sbuf_printf(t, "snowflake_serving:%d\r\n", ok);
    if (!ok && reason != NULL) {
        for (char *p = reason; *p != '\0'; p++)
            if (*p == '\r' || *p == '\n')
                *p = ' ';
        sbuf_printf(t, "snowflake_refusal:%s\r\n", reason);
    }
    free(reason);
}

void
api_resp_cmd_info(struct api_resp_ctx *x)
{
    const struct resp_cmd *cmd = x->cmd;
    struct api *a = x->a;
    struct sbuf t = { 0 }, b = { 0 };
    struct http_stats hs = { 0 };
    int op = a->cfg->admin_token[0] == '\0' || x->sess->admin;
    size_t tags = a->segs != NULL ? segments_count(a->segs) : 0;

    if (a->server != NULL)
        http_server_stats(a->server, &hs);
    if (want_section(cmd, "server"))
        info_server(x, &t);
    if (want_section(cmd, "clients")) {
        section(&t, "Clients");
        sbuf_printf(&t, "connected_clients:%llu\r\nresp_clients:%llu\r\n"
                    "maxclients:%lld\r\nblocked_clients:%llu\r\n",
                    (unsigned long long)hs.connections_open,
                    (unsigned long long)hs.resp_open,
                    (long long)a->cfg->max_connections,
                    (unsigned long long)hs.requests_parked);
    }
    if (want_section(cmd, "memory"))
        info_memory(&t);
    if (want_section(cmd, "persistence")) {
        section(&t, "Persistence");
        sbuf_puts(&t, "loading:0\r\nrdb_bgsave_in_progress:0\r\n"
                  "aof_enabled:0\r\naof_rewrite_in_progress:0\r\n");
    }
    if (want_section(cmd, "stats")) {
        section(&t, "Stats");
        sbuf_printf(&t, "total_connections_received:%llu\r\n"
                    "total_commands_processed:%llu\r\nrejected_connections:%llu\r\n",
                    (unsigned long long)hs.connections_total,
                    (unsigned long long)hs.resp_commands,
                    (unsigned long long)hs.connections_rejected);
    }
    if (want_section(cmd, "replication")) {
        section(&t, "Replication");
        sbuf_puts(&t, "role:master\r\nconnected_slaves:0\r\n");
    }
    if (want_section(cmd, "cpu"))
        info_cpu(&t);
    if (want_section(cmd, "segment") && op)
        info_segment(a, &t);
    if (want_section(cmd, "snowflake") && op)
        info_snowflake(a, &t);
    if (want_section(cmd, "keyspace")) {
        section(&t, "Keyspace");
        if (tags > 0)
            sbuf_printf(&t, "db0:keys=%zu,expires=0,avg_ttl=0\r\n", tags);
    }
    api_resp_put_text(x, &b, t.p != NULL ? t.p : "", t.len);
    sbuf_free(&t);
    api_resp_reply_sbuf(x, &b);
}
