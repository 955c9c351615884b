/* http_conn_info.c: what a connection tells its handler about itself: the
 * request being handled, the RESP session, CLIENT INFO's fields and the TLS
 * client certificate's name (see http.h). I/O thread only, like the
 * connection.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "http.h"
#include "http_internal.h"

struct http_request *
http_conn_request(struct http_conn *c)
{
    assert(c->in_handler);
    return &c->req;
}

const char *
http_conn_peer_name(const struct http_conn *c)
{
    /* an HTTP/2 stream's certificate is its connection's */
    return (c->owner != NULL ? c->owner : c)->peer_name;
}

void *
http_conn_session(struct http_conn *c)
{
    return c->resp != NULL ? c->resp->session : NULL;
}

static void
sock_name(int fd, int peer, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[48];
    int port = 0;

    out[0] = '\0';
    if ((peer ? getpeername(fd, (struct sockaddr *)&ss, &len)
              : getsockname(fd, (struct sockaddr *)&ss, &len)) < 0)
        return;
    if (ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host,
                  sizeof host);
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    } else if (ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host,
                  sizeof host);
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else {
        return;
    }
    snprintf(out, cap, "%s:%d", host, port);
}

void
http_conn_info(struct http_conn *c, struct http_conn_info *out)
{
    memset(out, 0, sizeof *out);
    if (c->owner != NULL)           /* an HTTP/2 stream: its connection's */
        c = c->owner;
    out->fd = c->fd;
    if (c->resp != NULL) {
        out->id = c->resp->id;
        out->age_s = (http_now_ms() - c->resp->born_ms) / 1000;
    }
    sock_name(c->fd, 1, out->addr, sizeof out->addr);
    sock_name(c->fd, 0, out->laddr, sizeof out->laddr);
}
