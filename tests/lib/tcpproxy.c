/* tcpproxy.c: see tcpproxy.h. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcpproxy.h"

static void
px_close_pair(struct tcpproxy *px, int i)
{
    close(px->a[i]);
    close(px->b[i]);
    px->a[i] = px->a[px->n - 1];
    px->b[i] = px->b[px->n - 1];
    px->n--;
}

static int
px_pump(int from, int to)
{
    char buf[65536];
    ssize_t r = read(from, buf, sizeof buf), off = 0;

    if (r <= 0)
        return -1;
    while (off < r) {
        ssize_t w = write(to, buf + off, (size_t)(r - off));
        if (w <= 0)
            return -1;
        off += w;
    }
    return 0;
}

static void
px_accept(struct tcpproxy *px)
{
    struct sockaddr_in sa;
    int c = accept(px->lfd, NULL, NULL), t;

    if (c < 0)
        return;
    if (atomic_load(&px->cut) || px->n == TCPPROXY_MAX) {
        close(c);
        return;
    }
    t = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)px->to_port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (t < 0 || connect(t, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(c);
        if (t >= 0)
            close(t);
        return;
    }
    px->a[px->n] = c;
    px->b[px->n++] = t;
}

static void *
px_main(void *arg)
{
    struct tcpproxy *px = arg;
    struct pollfd pf[1 + 2 * TCPPROXY_MAX];

    while (!atomic_load(&px->stop)) {
        int cut = atomic_load(&px->cut), n = 0;
        /* cut and hanging: the pairs are not polled (their data waits) */
        int np = cut && px->hang ? 0 : px->n;

        pf[n].fd = px->lfd;
        pf[n++].events = POLLIN;
        for (int i = 0; i < np; i++) {
            pf[n].fd = px->a[i];
            pf[n++].events = POLLIN;
            pf[n].fd = px->b[i];
            pf[n++].events = POLLIN;
        }
        if (poll(pf, (nfds_t)n, 20) < 0)
            continue;
        /* again: nothing may pass once cut is set, even mid-poll */
        cut = atomic_load(&px->cut);
        if (cut) {
            while (!px->hang && px->n > 0)
                px_close_pair(px, 0);
        } else {
            for (int i = np - 1; i >= 0; i--) {
                int bad = 0;
                if (pf[1 + 2 * i].revents)
                    bad |= px_pump(px->a[i], px->b[i]);
                if (!bad && pf[2 + 2 * i].revents)
                    bad |= px_pump(px->b[i], px->a[i]);
                if (bad)
                    px_close_pair(px, i);
            }
        }
        if (pf[0].revents & POLLIN)
            px_accept(px);
    }
    while (px->n > 0)
        px_close_pair(px, 0);
    return NULL;
}

struct tcpproxy *
tcpproxy_start(int to_port, int hang)
{
    struct tcpproxy *px = calloc(1, sizeof *px);
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;

    if (px == NULL)
        return NULL;
    px->to_port = to_port;
    px->hang = hang;
    px->lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (px->lfd < 0 || bind(px->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(px->lfd, 16) != 0 ||
        getsockname(px->lfd, (struct sockaddr *)&sa, &sl) != 0)
        goto fail;
    px->port = ntohs(sa.sin_port);
    if (pthread_create(&px->th, NULL, px_main, px) != 0)
        goto fail;
    return px;

fail:
    if (px->lfd >= 0)
        close(px->lfd);
    free(px);
    return NULL;
}

void
tcpproxy_stop(struct tcpproxy *px)
{
    atomic_store(&px->stop, 1);
    pthread_join(px->th, NULL);
    close(px->lfd);
    free(px);
}
