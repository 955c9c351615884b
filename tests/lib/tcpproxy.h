/* tcpproxy.h: a TCP proxy on a free loopback port to a server on another,
 * which a test can cut to make a partition (tests/unit/check_workerid*.c).
 *
 * One thread polls the listener and every pair of connections. While cut is
 * set nothing passes: with hang set the open connections stay open and
 * silent (a partition: the client's calls time out), else they are closed
 * (the client sees the server go away); new connections are closed either
 * way. Clearing cut lets new connections through again. */
#ifndef LEAFD_TCPPROXY_H
#define LEAFD_TCPPROXY_H

#include <pthread.h>
#include <stdatomic.h>

#define TCPPROXY_MAX 32

struct tcpproxy {
    int             lfd, port, to_port, hang;
    _Atomic int     cut, stop;
    pthread_t       th;
    int             a[TCPPROXY_MAX], b[TCPPROXY_MAX], n;
};

/* NULL when the listener or the thread cannot be set up. */
struct tcpproxy *tcpproxy_start(int to_port, int hang);
void tcpproxy_stop(struct tcpproxy *px);

#endif
