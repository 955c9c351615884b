/* log.c: leveled, timestamped, one-write-per-line logging. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char *level_names[] = { "debug", "info", "warn", "error" };

/* Written by SIGHUP's reload, read by every thread: relaxed is enough, a
 * line logged at the old level just before the change is harmless. */
static _Atomic int log_min = LOGL_INFO;
static int log_fd = 2;
static char log_path[1024];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER; /* guards log_fd swap */

int
log_init(enum log_level level, const char *path)
{
    atomic_store_explicit(&log_min, (int)level, memory_order_relaxed);
    if (path == NULL || *path == '\0' || strcmp(path, "-") == 0) {
        log_path[0] = '\0';
        return 0;
    }
    snprintf(log_path, sizeof log_path, "%s", path);
    return log_reopen();
}

int
log_reopen(void)
{
    int fd, old;

    if (log_path[0] == '\0')
        return 0;
    fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd == -1) {
        log_error("cannot open log file %s: %s", log_path, strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&log_lock);
    old = log_fd;
    log_fd = fd;
    pthread_mutex_unlock(&log_lock);
    if (old != 2)
        close(old);
    return 0;
}

void
log_set_level(enum log_level level)
{
    atomic_store_explicit(&log_min, (int)level, memory_order_relaxed);
}

int
log_enabled(enum log_level level)
{
    return (int)level >= atomic_load_explicit(&log_min, memory_order_relaxed);
}

const char *
log_level_name(enum log_level level)
{
    return level_names[level];
}

void
log_msg(enum log_level level, const char *func, const char *fmt, ...)
{
    char buf[2048];
    struct timeval tv;
    struct tm tm;
    va_list ap;
    size_t n;
    int r;

    if (!log_enabled(level))
        return;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    r = snprintf(buf + n, sizeof buf - n, ".%03dZ %-5s %s: ",
                 (int)(tv.tv_usec / 1000), level_names[level], func);
    if (r > 0)
        n += (size_t)r;
    va_start(ap, fmt);
    r = vsnprintf(buf + n, sizeof buf - n, fmt, ap);
    va_end(ap);
    if (r > 0)
        n += (size_t)r;
    if (n > sizeof buf - 2)
        n = sizeof buf - 2;
    /* Never let a peer's text split the line. */
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\n' || buf[i] == '\r')
            buf[i] = ' ';
    buf[n++] = '\n';
    pthread_mutex_lock(&log_lock);
    r = (int)write(log_fd, buf, n);
    pthread_mutex_unlock(&log_lock);
    (void)r;
}
