/* procstop.c: see procstop.h. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "procstop.h"

/* kill() returns before the stop has taken effect: the group stop begins
 * only when one of the target's threads runs and takes the signal, and on
 * a busy machine its other threads can go on answering meanwhile (a test
 * once saw an allocation answered "while stopped"). So wait until /proc
 * shows every thread in state T. */
void
proc_stop(pid_t pid)
{
    char path[64];

    ck_assert_int_eq(kill(pid, SIGSTOP), 0);
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    for (int tries = 0;; tries++) {
        DIR *d = opendir(path);
        struct dirent *e;
        int running = 0;

        if (d == NULL) {
            kill(pid, SIGCONT);         /* not left stopped for the rest */
            ck_abort_msg("%s: %s", path, strerror(errno));
        }
        while ((e = readdir(d)) != NULL) {
            char stat[384], buf[512], *p;
            FILE *f;
            size_t n;

            if (e->d_name[0] == '.')
                continue;
            snprintf(stat, sizeof stat, "%s/%s/stat", path, e->d_name);
            if ((f = fopen(stat, "r")) == NULL)
                continue;               /* the thread exited */
            n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = '\0';
            /* "tid (comm) S ...": the state follows the last ')'. */
            if ((p = strrchr(buf, ')')) != NULL && p[1] == ' ' &&
                p[2] != 'T' && p[2] != 't')
                running++;
        }
        closedir(d);
        if (running == 0)
            return;
        if (tries >= 6000) {
            kill(pid, SIGCONT);
            ck_abort_msg("pid %d: %d threads still running 60 s after "
                         "SIGSTOP", (int)pid, running);
        }
        usleep(10000);
    }
}
