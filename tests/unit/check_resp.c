/* check_resp.c: the Redis-protocol listener end-to-end, in process, driven
 * by hiredis (a client nobody here wrote) and by raw sockets where hiredis
 * would hide what is tested.
 *
 * Two servers on loopback ports, two I/O threads each: one with a test
 * handler (transport: pipelining behind a parked command, limits, timeouts,
 * half-close, backpressure), one with leafd's real API with segment and
 * snowflake mode off (the command set, RESP3, errors). The ID commands over
 * the real modes are in tests/blackbox/bb_resp.py. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <hiredis/hiredis.h>

#include "api.h"
#include "config.h"
#include "http.h"
#include "resp_parse.h"
#include "util.h"

#define IDLE_MS 600

static struct http_server *srv, *apisrv;
static struct api *api;
static struct config cfg;
static atomic_int ready;            /* PARK answers once this is set */
static atomic_long handled;

/* ---- the test handler: PARK, ECHO, BIG <n>, QUIT ---- */

static int
is(const struct resp_cmd *cmd, size_t i, const char *s)
{
    return i < cmd->argc && cmd->argl[i] == strlen(s) &&
           memcmp(cmd->argv[i], s, cmd->argl[i]) == 0;
}

static void
handler(struct http_conn *c, struct http_request *req, void *arg)
{
    const struct resp_cmd *cmd = req->cmd;
    char buf[256];
    int n;

    (void)arg;
    if (cmd == NULL) {
        http_reply(c, 200, "text/plain", NULL, "http\n", 5);
        return;
    }
    atomic_fetch_add(&handled, 1);
    if (is(cmd, 0, "PARK")) {
        if (atomic_load(&ready) || req->timed_out) {
            http_reply_resp(c, req->timed_out ? "+TIMEOUT\r\n" : "+WOKE\r\n",
                            req->timed_out ? 10 : 7, 0);
            return;
        }
        http_park(c, 60000, 42);   /* far past wake_later's 100 ms */
        return;
    }
    if (is(cmd, 0, "ECHO") && cmd->argc == 2 && cmd->argl[1] < 200) {
        n = snprintf(buf, sizeof buf, "$%zu\r\n", cmd->argl[1]);
        memcpy(buf + n, cmd->argv[1], cmd->argl[1]);   /* binary-safe */
        memcpy(buf + n + cmd->argl[1], "\r\n", 2);
        http_reply_resp(c, buf, (size_t)n + cmd->argl[1] + 2, 0);
        return;
    }
    if (is(cmd, 0, "BIG") && cmd->argc == 2) {
        int64_t len = 0;
        char *p;

        util_parse_i64(cmd->argv[1], cmd->argl[1], 0, &len);
        p = xmalloc((size_t)len + 32);
        n = snprintf(p, 32, "$%lld\r\n", (long long)len);
        memset(p + n, 'x', (size_t)len);
        memcpy(p + n + len, "\r\n", 2);
        http_reply_resp(c, p, (size_t)(n + len + 2), 0);
        free(p);
        return;
    }
    if (is(cmd, 0, "QUIT")) {
        http_reply_resp(c, "+OK\r\n", 5, 1);
        return;
    }
    http_reply_resp(c, "-ERR unknown\r\n", 14, 0);
}

static struct http_server *
start(http_handler_cb h, http_thread_cb tcb, void *arg)
{
    struct http_config hc = { 0 };
    struct http_server *s;
    char *cause = NULL;

    hc.address = "127.0.0.1";
    hc.threads = 2;
    hc.idle_timeout_ms = IDLE_MS;
    hc.resp_enable = 1;
    hc.resp_address = "127.0.0.1";
    hc.resp_session_free = api_resp_session_free;
    s = http_server_new(&hc, h, tcb, arg, &cause);
    ck_assert_msg(s != NULL, "http_server_new: %s", cause ? cause : "");
    ck_assert_int_gt(http_server_resp_port(s), 0);
    ck_assert_int_ne(http_server_resp_port(s), http_server_port(s));
    ck_assert_int_eq(http_server_start(s, &cause), 0);
    return s;
}

static void
setup(void)
{
    atomic_store(&ready, 0);
    srv = start(handler, NULL, NULL);
    config_defaults(&cfg);
    api = api_new(&cfg, NULL, NULL, NULL, 2);
    apisrv = start(api_handle, api_thread, api);
    api_set_server(api, apisrv);
}

static void
teardown(void)
{
    http_server_stop(srv, 1000);
    http_server_free(srv);
    http_server_stop(apisrv, 1000);
    http_server_free(apisrv);
    api_free(api);
    config_free(&cfg);
}

/* ---- clients ---- */

static redisContext *
hconnect(struct http_server *s)
{
    struct timeval tv = { 20, 0 };
    redisContext *rc = redisConnectWithTimeout("127.0.0.1",
                                               http_server_resp_port(s), tv);

    ck_assert_msg(rc != NULL && rc->err == 0, "connect: %s",
                  rc ? rc->errstr : "?");
    redisSetTimeout(rc, tv);
    return rc;
}

static int
rawconnect(struct http_server *s)
{
    struct sockaddr_in sa = { 0 };
    struct timeval tv = { 20, 0 };
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)http_server_resp_port(s));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void
rawsend(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);

        ck_assert_int_gt(w, 0);
        s += w;
        n -= (size_t)w;
    }
}

/* Everything until EOF (or the 20 s receive timeout), NUL-terminated. */
static size_t
rawread_all(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t n;

    while (len + 1 < cap && (n = recv(fd, buf + len, cap - 1 - len, 0)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    return len;
}

/* Read until buf holds want bytes. */
static void
rawread_n(int fd, char *buf, size_t want)
{
    size_t len = 0;
    ssize_t n;

    while (len < want && (n = recv(fd, buf + len, want - len, 0)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    ck_assert_uint_eq(len, want);
}

static void
expect_status(redisReply *r, const char *s)
{
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->type == REDIS_REPLY_STATUS && strcmp(r->str, s) == 0,
                  "type %d '%s', want +%s", r->type, r->str ? r->str : "", s);
    freeReplyObject(r);
}

static void
expect_error(redisReply *r, const char *prefix)
{
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->type == REDIS_REPLY_ERROR &&
                  strncmp(r->str, prefix, strlen(prefix)) == 0,
                  "type %d '%s', want -%s...", r->type, r->str ? r->str : "",
                  prefix);
    freeReplyObject(r);
}

static void *
wake_later(void *arg)
{
    (void)arg;
    usleep(100 * 1000);
    atomic_store(&ready, 1);
    http_wake(srv, 42);
    return NULL;
}

/* ---- transport ---- */

START_TEST(test_roundtrip_and_http_beside)
{
    redisContext *rc = hconnect(srv);
    redisReply *r = redisCommand(rc, "ECHO %s", "hello world");

    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    ck_assert_str_eq(r->str, "hello world");
    freeReplyObject(r);
    /* Binary-safe: NUL and CRLF inside a bulk string. */
    r = redisCommand(rc, "ECHO %b", "a\0b\r\nc", (size_t)6);
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    ck_assert_uint_eq(r->len, 6);
    ck_assert_mem_eq(r->str, "a\0b\r\nc", 6);
    freeReplyObject(r);
    redisFree(rc);
}
END_TEST

/* Commands pipelined behind a parked one wait, and come back in order. */
START_TEST(test_pipeline_behind_park)
{
    redisContext *rc = hconnect(srv);
    redisReply *r;
    pthread_t th;

    redisAppendCommand(rc, "ECHO first");
    redisAppendCommand(rc, "PARK");
    for (int i = 0; i < 100; i++)
        redisAppendCommand(rc, "ECHO %d", i);
    pthread_create(&th, NULL, wake_later, NULL);
    ck_assert_int_eq(redisGetReply(rc, (void **)&r), REDIS_OK);
    ck_assert_str_eq(r->str, "first");
    freeReplyObject(r);
    ck_assert_int_eq(redisGetReply(rc, (void **)&r), REDIS_OK);
    expect_status(r, "WOKE");
    for (int i = 0; i < 100; i++) {
        char want[16];

        snprintf(want, sizeof want, "%d", i);
        ck_assert_int_eq(redisGetReply(rc, (void **)&r), REDIS_OK);
        ck_assert_str_eq(r->str, want);
        freeReplyObject(r);
    }
    pthread_join(th, NULL);
    redisFree(rc);
}
END_TEST

/* redis-cli's inline form, with quotes; blank lines are skipped. */
START_TEST(test_inline)
{
    int fd = rawconnect(srv);
    char buf[256];

    const char *in = "\r\nECHO \"a b\\x41\"\r\n\nECHO 'c'\n";
    const char *want = "$4\r\na bA\r\n$1\r\nc\r\n";

    rawsend(fd, in, strlen(in));
    rawread_n(fd, buf, strlen(want));
    ck_assert_str_eq(buf, want);
    close(fd);
}
END_TEST

/* Half-close after a pipeline whose first command parks: every command
 * is answered, then the connection closes. */
START_TEST(test_half_close_answers_everything)
{
    int fd = rawconnect(srv);
    pthread_t th;
    char buf[256];
    const char *want = "+WOKE\r\n$1\r\na\r\n$1\r\nb\r\n";

    rawsend(fd, "PARK\r\nECHO a\r\n*2\r\n$4\r\nECHO\r\n$1\r\nb\r\n", 36);
    shutdown(fd, SHUT_WR);
    pthread_create(&th, NULL, wake_later, NULL);
    rawread_all(fd, buf, sizeof buf);
    ck_assert_str_eq(buf, want);
    pthread_join(th, NULL);
    close(fd);
}
END_TEST

/* Each limit: an error in Redis's words, then the connection closes. */
START_TEST(test_limits_close)
{
    static const char *const cases[] = {
        "*1\r\n$5000\r\n",                              /* bulk > 4096 */
        "*33\r\n",                                      /* > 32 arguments */
        "*1\r\n$-5\r\n",                                /* negative bulk */
        "*x\r\n",                                       /* bad multibulk */
        "*1\r\n+PING\r\n",                              /* not '$' */
        "ECHO \"unbalanced\r\n",                        /* quotes */
    };
    char buf[512];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = rawconnect(srv);

        rawsend(fd, cases[i], strlen(cases[i]));
        rawread_all(fd, buf, sizeof buf);
        ck_assert_msg(strncmp(buf, "-ERR Protocol error", 19) == 0,
                      "case %zu: got '%s'", i, buf);
        ck_assert_ptr_nonnull(strstr(buf, "\r\n"));
        close(fd);
    }
}
END_TEST

/* An inline line longer than 8 KB, and a multibulk command of 32 bulk
 * strings of 4 KB (each within its own limit, together past the input
 * buffer): refused and closed, never buffered without bound. */
START_TEST(test_oversized_commands)
{
    char *big = xmalloc(40000), buf[512];
    size_t n = 0;
    int fd = rawconnect(srv);

    memset(big, 'a', 9000);
    rawsend(fd, big, 9000);
    rawread_all(fd, buf, sizeof buf);
    ck_assert_msg(strstr(buf, "-ERR Protocol error: too big inline request") == buf,
                  "got '%s'", buf);
    close(fd);

    fd = rawconnect(srv);
    n = (size_t)sprintf(big, "*32\r\n");
    for (int i = 0; i < 8; i++) {
        n += (size_t)sprintf(big + n, "$4096\r\n");
        memset(big + n, 'b', 4096);
        n += 4096;
        memcpy(big + n, "\r\n", 2);
        n += 2;
    }
    rawsend(fd, big, n);
    rawread_all(fd, buf, sizeof buf);
    ck_assert_msg(strstr(buf, "-ERR Protocol error: a command must fit in") == buf,
                  "got '%s'", buf);
    close(fd);
    free(big);
}
END_TEST

/* A half-written command is timed out as a slow HTTP request is. */
START_TEST(test_slow_command_times_out)
{
    int fd = rawconnect(srv);
    char buf[256];
    int64_t t0 = util_mono_ms(), dt;

    rawsend(fd, "*2\r\n$4\r\nECHO\r\n$3\r\nab", 21);
    rawread_all(fd, buf, sizeof buf);
    dt = util_mono_ms() - t0;
    ck_assert_msg(strstr(buf, "-ERR") == buf, "got '%s'", buf);
    ck_assert_int_ge(dt, IDLE_MS - 50);     /* no upper bound: a busy machine */
    close(fd);
}
END_TEST

/* A client that writes commands and never reads: the server stops
 * parsing at its output high-water mark and stops reading, so the client's
 * writes block; nothing grows without bound, and the other connections
 * are served meanwhile. */
START_TEST(test_never_reads)
{
    int fd = rawconnect(srv);
    static char cmds[64 * 1024];
    size_t one = 0, total = 0;
    long before = atomic_load(&handled), after;
    redisContext *rc;
    redisReply *r;

    while (one + 16 < sizeof cmds) {
        memcpy(cmds + one, "BIG 60000\r\n", 11);
        one += 11;
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    /* Until the writes block for 50 tries, 5 ms apart, or the server closes
     * the connection: a reader that makes no progress for IDLE_MS is timed
     * out, and on a busy machine the tries can take that long. */
    for (int spins = 0; spins < 50; ) {
        ssize_t w = send(fd, cmds, one, MSG_NOSIGNAL);

        if (w > 0) {
            total += (size_t)w;
            continue;
        }
        if (errno == EPIPE || errno == ECONNRESET)
            break;
        ck_assert_msg(errno == EAGAIN || errno == EWOULDBLOCK, "send: %s",
                      strerror(errno));
        spins++;
        usleep(5000);
    }
    after = atomic_load(&handled) - before;
    /* 60 KB answers: a few past the 256 KB mark, plus what the socket
     * buffers took; far fewer than the commands sent. */
    ck_assert_int_lt(after, 400);
    ck_assert_uint_gt(total / 11, (size_t)after * 10);
    rc = hconnect(srv);
    r = redisCommand(rc, "ECHO alive");
    ck_assert_str_eq(r->str, "alive");
    freeReplyObject(r);
    redisFree(rc);
    close(fd);
}
END_TEST

START_TEST(test_quit_closes)
{
    int fd = rawconnect(srv);
    char buf[64];

    rawsend(fd, "ECHO a\r\nQUIT\r\nECHO never\r\n", 26);
    rawread_all(fd, buf, sizeof buf);
    ck_assert_str_eq(buf, "$1\r\na\r\n+OK\r\n");
    close(fd);
}
END_TEST

/* ---- leafd's commands (modes off) ---- */

START_TEST(test_api_connection_commands)
{
    redisContext *rc = hconnect(apisrv);
    redisReply *r;

    expect_status(redisCommand(rc, "PING"), "PONG");
    r = redisCommand(rc, "PING %s", "x y");
    ck_assert_str_eq(r->str, "x y");
    freeReplyObject(r);
    r = redisCommand(rc, "echo %s", "e");
    ck_assert_str_eq(r->str, "e");
    freeReplyObject(r);
    expect_status(redisCommand(rc, "SELECT 0"), "OK");
    expect_error(redisCommand(rc, "SELECT 1"), "ERR DB index is out of range");
    expect_status(redisCommand(rc, "CLIENT SETNAME %s", "svc-a"), "OK");
    r = redisCommand(rc, "CLIENT GETNAME");
    ck_assert_str_eq(r->str, "svc-a");
    freeReplyObject(r);
    r = redisCommand(rc, "CLIENT INFO");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    ck_assert_ptr_nonnull(strstr(r->str, "name=svc-a "));
    ck_assert_ptr_nonnull(strstr(r->str, "laddr=127.0.0.1:"));
    freeReplyObject(r);
    expect_error(redisCommand(rc, "CLIENT SETNAME %s", "a b"), "ERR Client names");
    r = redisCommand(rc, "DBSIZE");
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    r = redisCommand(rc, "INFO");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    ck_assert_ptr_nonnull(strstr(r->str, "# Server\r\nredis_version:"));
    ck_assert_ptr_nonnull(strstr(r->str, "\r\nleafd_version:"));
    ck_assert_ptr_nonnull(strstr(r->str, "segment_enabled:0"));
    freeReplyObject(r);
    r = redisCommand(rc, "INFO clients");
    ck_assert_ptr_null(strstr(r->str, "# Server"));
    ck_assert_ptr_nonnull(strstr(r->str, "resp_clients:"));
    freeReplyObject(r);
    r = redisCommand(rc, "COMMAND COUNT");
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    ck_assert_int_ge(r->integer, 15);
    freeReplyObject(r);
    r = redisCommand(rc, "COMMAND");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(r->element[0]->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(r->element[0]->elements, 10);
    ck_assert_str_eq(r->element[0]->element[0]->str, "incr");
    ck_assert_int_eq(r->element[0]->element[1]->integer, 2);
    freeReplyObject(r);
    r = redisCommand(rc, "COMMAND DOCS incr");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(r->elements, 2);
    ck_assert_str_eq(r->element[0]->str, "incr");
    freeReplyObject(r);
    r = redisCommand(rc, "CONFIG GET save");
    ck_assert_uint_eq(r->elements, 2);
    freeReplyObject(r);
    expect_error(redisCommand(rc, "AUTH sometoken"), "ERR AUTH <token> called");
    expect_error(redisCommand(rc, "GET k"), "ERR unknown command 'GET', with args "
                 "beginning with: 'k'");
    expect_error(redisCommand(rc, "INCR"), "ERR wrong number of arguments for 'incr'");
    expect_error(redisCommand(rc, "LEAF.SEGMENT a 1 base62 2"), "ERR wrong number of arguments");
    redisFree(rc);
}
END_TEST

START_TEST(test_api_ids_and_errors)
{
    redisContext *rc = hconnect(apisrv);
    redisReply *r;

    r = redisCommand(rc, "LEAF.UUID 3");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(r->elements, 3);
    for (size_t i = 0; i < 3; i++) {
        ck_assert_uint_eq(r->element[i]->len, 36);
        ck_assert_int_eq(r->element[i]->str[14], '7');
        if (i > 0)
            ck_assert_int_lt(strcmp(r->element[i - 1]->str, r->element[i]->str), 0);
    }
    freeReplyObject(r);
    r = redisCommand(rc, "LEAF.ULID");
    ck_assert_uint_eq(r->elements, 1);
    ck_assert_uint_eq(r->element[0]->len, 26);
    freeReplyObject(r);
    r = redisCommand(rc, "LEAF.DECODE 01ARZ3NDEKTSV4RRFFQ69G5FAV");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    ck_assert_ptr_nonnull(strstr(r->str, "\"timestamp\":1469922850259"));
    freeReplyObject(r);
    expect_error(redisCommand(rc, "LEAF.DECODE 8ZZZZZZZZZZZZZZZZZZZZZZZZZ"), "INVALID_ID ");
    expect_error(redisCommand(rc, "LEAF.UUID 0"), "INVALID_COUNT count must be");
    expect_error(redisCommand(rc, "LEAF.UUID x"), "INVALID_COUNT ");
    expect_error(redisCommand(rc, "INCR demo"), "MODE_DISABLED segment mode is off");
    expect_error(redisCommand(rc, "LEAF.SNOWFLAKE 2"), "MODE_DISABLED snowflake");
    /* Still usable after errors. */
    expect_status(redisCommand(rc, "PING"), "PONG");
    redisFree(rc);
}
END_TEST

/* RESP3 after HELLO 3: maps and verbatim strings (hiredis 0.14 reads only
 * RESP2, so a raw socket). */
START_TEST(test_api_resp3)
{
    int fd = rawconnect(apisrv);
    char buf[2048];
    ssize_t n;

    rawsend(fd, "HELLO 3\r\n", 9);
    n = recv(fd, buf, sizeof buf - 1, 0);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_msg(strncmp(buf, "%7\r\n$6\r\nserver\r\n$5\r\nleafd\r\n", 26) == 0,
                  "got '%s'", buf);
    ck_assert_ptr_nonnull(strstr(buf, "$5\r\nproto\r\n:3\r\n"));
    rawsend(fd, "CLIENT GETNAME\r\n", 16);
    rawread_n(fd, buf, 3);
    ck_assert_str_eq(buf, "_\r\n");
    rawsend(fd, "INFO server\r\n", 13);
    n = recv(fd, buf, sizeof buf - 1, 0);
    buf[n] = '\0';
    ck_assert_msg(buf[0] == '=' && strstr(buf, "\r\ntxt:# Server") != NULL,
                  "got '%s'", buf);
    rawsend(fd, "HELLO 4\r\n", 9);
    n = recv(fd, buf, sizeof buf - 1, 0);
    buf[n] = '\0';
    ck_assert_str_eq(buf, "-NOPROTO unsupported protocol version\r\n");
    rawsend(fd, "HELLO 2\r\n", 9);
    n = recv(fd, buf, sizeof buf - 1, 0);
    buf[n] = '\0';
    ck_assert_msg(strncmp(buf, "*14\r\n", 5) == 0, "got '%s'", buf);
    close(fd);
}
END_TEST


/* MULTI/EXEC/DISCARD (modes off; the ID commands over the real modes, and
 * EXEC parked, are in bb_resp_multi.py): answers in an array, an error at
 * queue time aborts, Redis's errors for misuse, and a connection closed
 * in the middle of a transaction frees its queue (LeakSanitizer). */
START_TEST(test_api_multi)
{
    redisContext *rc = hconnect(apisrv);
    redisReply *r;

    expect_error(redisCommand(rc, "EXEC"), "ERR EXEC without MULTI");
    expect_error(redisCommand(rc, "DISCARD"), "ERR DISCARD without MULTI");
    expect_status(redisCommand(rc, "MULTI"), "OK");
    expect_status(redisCommand(rc, "PING"), "QUEUED");
    expect_status(redisCommand(rc, "ECHO %s", "e"), "QUEUED");
    expect_status(redisCommand(rc, "LEAF.UUID 2"), "QUEUED");
    expect_status(redisCommand(rc, "LEAF.DECODE x"), "QUEUED");
    expect_error(redisCommand(rc, "MULTI"), "ERR MULTI calls can not be nested");
    r = redisCommand(rc, "EXEC");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(r->elements, 4);
    ck_assert_str_eq(r->element[0]->str, "PONG");
    ck_assert_str_eq(r->element[1]->str, "e");
    ck_assert_uint_eq(r->element[2]->elements, 2);
    ck_assert_uint_eq(r->element[2]->element[0]->len, 36);
    ck_assert_int_eq(r->element[3]->type, REDIS_REPLY_ERROR);
    ck_assert_ptr_nonnull(strstr(r->element[3]->str, "INVALID_ID"));
    freeReplyObject(r);
    /* Refused at queue time: the mode is off, the count is bad. */
    expect_status(redisCommand(rc, "MULTI"), "OK");
    expect_error(redisCommand(rc, "INCR demo"), "MODE_DISABLED ");
    expect_error(redisCommand(rc, "LEAF.UUID 0"), "INVALID_COUNT ");
    expect_status(redisCommand(rc, "PING"), "QUEUED");
    expect_error(redisCommand(rc, "EXEC"), "EXECABORT Transaction discarded");
    expect_status(redisCommand(rc, "MULTI"), "OK");
    expect_status(redisCommand(rc, "PING"), "QUEUED");
    expect_status(redisCommand(rc, "DISCARD"), "OK");
    expect_status(redisCommand(rc, "PING"), "PONG");
    expect_status(redisCommand(rc, "WATCH a b"), "OK");
    expect_status(redisCommand(rc, "UNWATCH"), "OK");
    /* Left in MULTI with a queue: freed when the connection closes. */
    expect_status(redisCommand(rc, "MULTI"), "OK");
    expect_status(redisCommand(rc, "ECHO %s", "left behind"), "QUEUED");
    redisFree(rc);
}
END_TEST

/* INFO: the Redis level, real memory numbers, the fields redis-cli reads. */
START_TEST(test_api_info)
{
    redisContext *rc = hconnect(apisrv);
    redisReply *r;
    long long used = 0, rss = 0;
    const char *p;

    r = redisCommand(rc, "INFO server");
    ck_assert_ptr_nonnull(strstr(r->str, "redis_version:7."));
    ck_assert_ptr_nonnull(strstr(r->str, "\r\nleafd_version:"));
    ck_assert_ptr_nonnull(strstr(r->str, "\r\nprocess_id:"));
    ck_assert_ptr_null(strstr(r->str, "# Memory"));
    freeReplyObject(r);
    r = redisCommand(rc, "INFO memory");
    ck_assert_ptr_null(strstr(r->str, "# Server"));
    p = strstr(r->str, "used_memory:");
    ck_assert_ptr_nonnull(p);
    used = atoll(p + 12);
    p = strstr(r->str, "used_memory_rss:");
    ck_assert_ptr_nonnull(p);
    rss = atoll(p + 16);
    ck_assert_int_gt(used, 0);
    ck_assert_int_gt(rss, 0);
    freeReplyObject(r);
    r = redisCommand(rc, "INFO");
    ck_assert_ptr_nonnull(strstr(r->str, "total_commands_processed:"));
    ck_assert_ptr_nonnull(strstr(r->str, "role:master"));
    ck_assert_ptr_nonnull(strstr(r->str, "loading:0"));
    freeReplyObject(r);
    redisFree(rc);
}
END_TEST

static Suite *
resp_suite(void)
{
    Suite *s = suite_create("resp");
    TCase *tc = tcase_create("resp");

    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_roundtrip_and_http_beside);
    tcase_add_test(tc, test_pipeline_behind_park);
    tcase_add_test(tc, test_inline);
    tcase_add_test(tc, test_half_close_answers_everything);
    tcase_add_test(tc, test_limits_close);
    tcase_add_test(tc, test_oversized_commands);
    tcase_add_test(tc, test_slow_command_times_out);
    tcase_add_test(tc, test_never_reads);
    tcase_add_test(tc, test_quit_closes);
    tcase_add_test(tc, test_api_connection_commands);
    tcase_add_test(tc, test_api_ids_and_errors);
    tcase_add_test(tc, test_api_resp3);
    tcase_add_test(tc, test_api_multi);
    tcase_add_test(tc, test_api_info);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(resp_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
