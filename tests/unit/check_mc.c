/* check_mc.c: the memcached listener's transport, in process, with a test
 * handler on loopback (two I/O threads): a call per key of a get, answered
 * in order behind a parked key; an error line that ends a get; storage
 * blocks skipped whole, also when they come a byte at a time; a line that
 * must stay put in the buffer while the output is over its high-water mark
 * (a client that sends many gets before it reads). The commands over
 * leafd's real API are in tests/blackbox/bb_memcache.py. */
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "http.h"
#include "mc_parse.h"

#define PARK_KEY 42
#define BIG_LEN 4000               /* the value of a key B<nn> */
#define BIG_KEYS 50
#define BIG_LINES 100

static struct http_server *srv;
static atomic_int ready;            /* the key "park" answers once set */

/* ---- the test handler: each key answers its own name; "park" waits for
 * ready; "err" ends the get; storage commands answer NOT_STORED ---- */

static void
handler(struct http_conn *c, struct http_request *req, void *arg)
{
    const struct mc_cmd *cmd = req->mc;
    char buf[600];
    const char *key;
    size_t klen;
    int n;

    (void)arg;
    ck_assert_ptr_nonnull(cmd);
    if (cmd->kind == MC_STORE) {
        http_reply_mc(c, "NOT_STORED\r\n", 12, 0);
        return;
    }
    if (cmd->kind != MC_GET) {
        http_reply_mc(c, "ERROR\r\n", 7, 0);
        return;
    }
    ck_assert(req->mc_key >= 1 && req->mc_key <= cmd->nkeys);
    key = req->mc_line + cmd->off[req->mc_key];
    klen = cmd->len[req->mc_key];
    if (klen == 4 && memcmp(key, "park", 4) == 0 && !atomic_load(&ready)) {
        ck_assert_msg(!req->timed_out, "the wake was lost");
        http_park(c, 5000, PARK_KEY);
        return;
    }
    if (klen == 3 && memcmp(key, "err", 3) == 0) {
        http_reply_mc(c, "SERVER_ERROR x\r\n", 16, HTTP_MC_END);
        return;
    }
    if (klen == 3 && key[0] == 'B') {
        char big[BIG_LEN + 64];

        n = snprintf(big, sizeof big, "VALUE %.3s 0 %d\r\n%.3s", key, BIG_LEN, key);
        memset(big + n, '.', BIG_LEN - 3);
        n += BIG_LEN - 3;
        n += snprintf(big + n, sizeof big - (size_t)n, "\r\n%s",
                      req->mc_key == cmd->nkeys ? "END\r\n" : "");
        http_reply_mc(c, big, (size_t)n, 0);
        return;
    }
    n = snprintf(buf, sizeof buf, "VALUE %.*s 0 %zu\r\n%.*s\r\n%s", (int)klen, key,
                 klen, (int)klen, key, req->mc_key == cmd->nkeys ? "END\r\n" : "");
    http_reply_mc(c, buf, (size_t)n, 0);
}

static void
setup(void)
{
    struct http_config hc = { 0 };
    char *cause = NULL;

    atomic_store(&ready, 0);
    hc.address = "127.0.0.1";
    hc.threads = 2;
    hc.mc_enable = 1;
    hc.mc_address = "127.0.0.1";
    srv = http_server_new(&hc, handler, NULL, NULL, &cause);
    ck_assert_msg(srv != NULL, "http_server_new: %s", cause ? cause : "");
    ck_assert_int_gt(http_server_mc_port(srv), 0);
    ck_assert_int_eq(http_server_resp_port(srv), -1);
    ck_assert_int_eq(http_server_start(srv, &cause), 0);
}

static void
teardown(void)
{
    http_server_stop(srv, 1000);
    http_server_free(srv);
}

/* ---- a raw client ---- */

/* rcvbuf > 0: a small receive buffer, so that answers back up into
 * leafd's output buffer instead of the kernel's. */
static int
mc_connect_buf(int rcvbuf)
{
    struct sockaddr_in sa = { 0 };
    struct timeval tv = { 10, 0 };
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);

    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)http_server_mc_port(srv));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static int
mc_connect(void)
{
    return mc_connect_buf(0);
}

static void
mc_send(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);

        ck_assert_int_gt(w, 0);
        s += w;
        n -= (size_t)w;
    }
}

/* Read exactly strlen(want) bytes and compare them with want. */
static void
mc_expect(int fd, const char *want)
{
    size_t n = strlen(want), len = 0;
    char *buf = malloc(n + 1);

    while (len < n) {
        ssize_t r = recv(fd, buf + len, n - len, 0);

        ck_assert_msg(r > 0, "EOF or timeout after %zu of %zu bytes", len, n);
        len += (size_t)r;
    }
    buf[n] = '\0';
    ck_assert_str_eq(buf, want);
    free(buf);
}

START_TEST(test_keys_in_order_behind_park)
{
    int fd = mc_connect();
    const char *s = "get a park b\r\nget c\r\n";

    mc_send(fd, s, strlen(s));
    /* The key before the parked one is answered at once. */
    mc_expect(fd, "VALUE a 0 1\r\na\r\n");
    atomic_store(&ready, 1);
    http_wake(srv, PARK_KEY);
    mc_expect(fd, "VALUE park 0 4\r\npark\r\nVALUE b 0 1\r\nb\r\nEND\r\n"
                  "VALUE c 0 1\r\nc\r\nEND\r\n");
    close(fd);
}
END_TEST

static void *
stop_main(void *arg)
{
    (void)arg;
    http_server_stop(srv, 30000);
    return NULL;
}

/* A stop while a key of a get is parked: the get is answered to its END,
 * then the connection closes (it used to close right after the parked
 * key's VALUE, a reply cut short that a client cannot read). */
START_TEST(test_stop_finishes_get)
{
    int fd = mc_connect();
    const char *s = "get a park b\r\n";
    pthread_t th;
    char c;

    mc_send(fd, s, strlen(s));
    mc_expect(fd, "VALUE a 0 1\r\na\r\n");
    ck_assert_int_eq(pthread_create(&th, NULL, stop_main, NULL), 0);
    /* Let the stop reach the I/O threads first (on a busy machine it may
     * not have yet; then this checks only the ordinary path). */
    usleep(300 * 1000);
    atomic_store(&ready, 1);
    http_wake(srv, PARK_KEY);
    mc_expect(fd, "VALUE park 0 4\r\npark\r\nVALUE b 0 1\r\nb\r\nEND\r\n");
    ck_assert_int_eq(recv(fd, &c, 1, 0), 0);   /* then closed */
    close(fd);
    pthread_join(th, NULL);
}
END_TEST

START_TEST(test_error_ends_get)
{
    int fd = mc_connect();
    const char *s = "get a err b\r\ngets c\r\nbogus\r\n";

    mc_send(fd, s, strlen(s));
    mc_expect(fd, "VALUE a 0 1\r\na\r\nSERVER_ERROR x\r\nVALUE c 0 1\r\nc\r\nEND\r\n"
                  "ERROR\r\n");
    close(fd);
}
END_TEST

START_TEST(test_storage_block_skipped)
{
    int fd = mc_connect();
    const char *s = "set k 0 0 12\r\nget a b\r\nxyz\r\nget c\r\n";

    /* One byte at a time: the line, then the block, arrive in pieces. */
    for (size_t i = 0; s[i] != '\0'; i++)
        mc_send(fd, s + i, 1);
    mc_expect(fd, "NOT_STORED\r\nVALUE c 0 1\r\nc\r\nEND\r\n");
    /* A block over the limit closes, after a CLIENT_ERROR. */
    s = "set k 0 0 99999999\r\n";
    mc_send(fd, s, strlen(s));
    mc_expect(fd, "CLIENT_ERROR object too large for cache\r\n");
    {
        char b;
        ck_assert_int_eq(recv(fd, &b, 1, 0), 0);
    }
    close(fd);
}
END_TEST

/* The answer to a line of BIG_KEYS keys B00 B01 ...: about 200 KB. */
static char *
big_answer(size_t *len)
{
    char *out = malloc(BIG_KEYS * (BIG_LEN + 32) + 8);
    size_t n = 0;

    for (int k = 0; k < BIG_KEYS; k++) {
        n += (size_t)sprintf(out + n, "VALUE B%02d 0 %d\r\nB%02d", k, BIG_LEN, k);
        memset(out + n, '.', BIG_LEN - 3);
        n += BIG_LEN - 3;
        memcpy(out + n, "\r\n", 2);
        n += 2;
    }
    memcpy(out + n, "END\r\n", 6);
    *len = n + 5;
    return out;
}

START_TEST(test_backpressure_keeps_lines)
{
    int fd = mc_connect_buf(4096);
    char line[512], *want;
    size_t len = 0, wlen;

    /* BIG_LINES gets of BIG_KEYS big values: 20 MB of answers to 30 KB of
     * gets. leafd stops answering between two keys of a line once its
     * output is over the high-water mark, and the line moves in its input
     * buffer when reading goes on: the answers must still come whole and in
     * order. (Reading starts a moment later, so that the answers back up;
     * nothing checked depends on how long.) */
    len += (size_t)snprintf(line, sizeof line, "get");
    for (int k = 0; k < BIG_KEYS; k++)
        len += (size_t)snprintf(line + len, sizeof line - len, " B%02d", k);
    len += (size_t)snprintf(line + len, sizeof line - len, "\r\n");
    for (int i = 0; i < BIG_LINES; i++)
        mc_send(fd, line, len);
    usleep(100 * 1000);
    want = big_answer(&wlen);
    for (int i = 0; i < BIG_LINES; i++)
        mc_expect(fd, want);
    free(want);
    close(fd);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("mc");
    TCase *tc = tcase_create("mc");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_keys_in_order_behind_park);
    tcase_add_test(tc, test_stop_finishes_get);
    tcase_add_test(tc, test_error_ends_get);
    tcase_add_test(tc, test_storage_block_skipped);
    tcase_add_test(tc, test_backpressure_keeps_lines);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
