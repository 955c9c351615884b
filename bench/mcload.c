/* mcload.c: a memcached load client for bench/memcache.py: many
 * connections on one epoll thread, each keeping `depth` pipelined gets of
 * one key in flight, for a fixed time; it drives leafd's memcached listener
 * and a real memcached the same way, in the text protocol ("get <key>") or
 * the binary one (a GET frame).
 *
 *   mcload <port> <conns> <depth> <seconds> <key> [binary]
 *
 * Prints one line: "ops <n> errors <n> seconds <s> ops_per_s <r>". An op is
 * a get answered with END (one VALUE and END), or in binary a response
 * frame of status 0; an answer with an ERROR line, or a frame of another
 * status, counts as an error. The load stops by itself after <seconds>.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXCONN 1024

struct conn {
    int  fd;
    int  inflight;
    char tail[8];                   /* the last bytes read, for split ENDs */
    int  ntail;
    unsigned char hdr[24];          /* binary: the response header so far */
    int  nhdr;
    unsigned long skip;             /* binary: body bytes still to skip */
};

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Count "END\r\n" and "ERROR" in the stream, across reads. */
static void
count(struct conn *c, const char *buf, size_t n, long *ends, long *errs)
{
    char scan[8 + 65536];
    size_t len = (size_t)c->ntail + n;

    memcpy(scan, c->tail, (size_t)c->ntail);
    memcpy(scan + c->ntail, buf, n);
    for (const char *p = scan; (p = memmem(p, len - (size_t)(p - scan), "\r\n", 2)) != NULL;
         p += 2) {
        /* a line ends at p: look at its start */
        const char *s = p;

        while (s > scan && s[-1] != '\n')
            s--;
        if (p - s == 3 && memcmp(s, "END", 3) == 0)
            (*ends)++;
        else if (memmem(s, (size_t)(p - s), "ERROR", 5) != NULL)
            (*errs)++;
    }
    /* Keep the unfinished line's first bytes (at most 7). */
    {
        const char *last = scan + len;
        const char *s = last;

        while (s > scan && s[-1] != '\n')
            s--;
        c->ntail = (int)(last - s < 7 ? last - s : 7);
        memcpy(c->tail, s, (size_t)c->ntail);
    }
}

/* Binary: count the response frames in the stream, across reads. */
static void
count_bin(struct conn *c, const unsigned char *buf, size_t n, long *ok, long *errs)
{
    size_t i = 0;

    while (i < n) {
        if (c->skip > 0) {
            size_t take = n - i < c->skip ? n - i : c->skip;

            i += take;
            c->skip -= take;
            continue;
        }
        c->hdr[c->nhdr++] = buf[i++];
        if (c->nhdr < 24)
            continue;
        c->nhdr = 0;
        c->skip = (unsigned long)c->hdr[8] << 24 | (unsigned long)c->hdr[9] << 16 |
                  (unsigned long)c->hdr[10] << 8 | c->hdr[11];
        if (c->hdr[0] == 0x81 && c->hdr[6] == 0 && c->hdr[7] == 0)
            (*ok)++;
        else
            (*errs)++;
    }
}

static int
send_gets(struct conn *c, const char *req, size_t reqlen, int k)
{
    static char out[65536];
    size_t n = 0;

    for (int i = 0; i < k && n + reqlen <= sizeof out; i++) {
        memcpy(out + n, req, reqlen);
        n += reqlen;
    }
    if (send(c->fd, out, n, MSG_NOSIGNAL) != (ssize_t)n)
        return -1;
    c->inflight += (int)(n / reqlen);
    return 0;
}

int
main(int argc, char **argv)
{
    static struct conn conns[MAXCONN];
    struct sockaddr_in sa;
    struct epoll_event ev, evs[256];
    char req[300], buf[65536];
    size_t reqlen, klen;
    int port, nconn, depth, ep, one = 1, binary;
    double secs, t0, t1;
    long ops = 0, errs = 0;

    if (argc != 6 && !(argc == 7 && strcmp(argv[6], "binary") == 0)) {
        fprintf(stderr, "usage: mcload <port> <conns> <depth> <seconds> <key> "
                "[binary]\n");
        return 2;
    }
    binary = argc == 7;
    port = atoi(argv[1]);
    nconn = atoi(argv[2]);
    depth = atoi(argv[3]);
    secs = atof(argv[4]);
    if (nconn < 1 || nconn > MAXCONN || depth < 1 || depth > 256 || secs <= 0 ||
        strlen(argv[5]) > 250) {
        fprintf(stderr, "mcload: bad arguments\n");
        return 2;
    }
    klen = strlen(argv[5]);
    if (binary) {
        /* GET: magic, opcode 0, key length, no extras, body = key */
        memset(req, 0, 24);
        req[0] = (char)0x80;
        req[2] = (char)(klen >> 8);
        req[3] = (char)klen;
        req[11] = (char)klen;
        memcpy(req + 24, argv[5], klen);
        reqlen = 24 + klen;
    } else {
        reqlen = (size_t)snprintf(req, sizeof req, "get %s\r\n", argv[5]);
    }
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ep = epoll_create1(0);
    for (int i = 0; i < nconn; i++) {
        struct conn *c = &conns[i];

        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            perror("mcload: connect");
            return 1;
        }
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ev.events = EPOLLIN;
        ev.data.ptr = c;
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    t0 = now_s();
    for (int i = 0; i < nconn; i++)
        if (send_gets(&conns[i], req, reqlen, depth) < 0) {
            perror("mcload: send");
            return 1;
        }
    for (;;) {
        int n = epoll_wait(ep, evs, 256, 100);

        t1 = now_s();
        if (t1 - t0 >= secs)
            break;
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            ssize_t r = recv(c->fd, buf, sizeof buf, 0);
            long e = 0, x = 0;

            if (r <= 0) {
                if (r < 0 && errno == EINTR)
                    continue;
                fprintf(stderr, "mcload: the server closed a connection\n");
                return 1;
            }
            if (binary)
                count_bin(c, (const unsigned char *)buf, (size_t)r, &e, &x);
            else
                count(c, buf, (size_t)r, &e, &x);
            ops += e;
            errs += x;
            c->inflight -= (int)(e + x);
            if (depth - c->inflight > 0 &&
                send_gets(c, req, reqlen, depth - c->inflight) < 0) {
                perror("mcload: send");
                return 1;
            }
        }
    }
    printf("ops %ld errors %ld seconds %.3f ops_per_s %.0f\n", ops, errs, t1 - t0,
           ops / (t1 - t0));
    return 0;
}
