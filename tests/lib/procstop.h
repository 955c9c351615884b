/* procstop.h: stop a server process the way a hung one looks (SIGSTOP),
 * for the tests of what leafd does meanwhile (tests/unit/check_store.c,
 * check_workerid_store.c). Failures fail the running check test. */
#ifndef LEAFD_PROCSTOP_H
#define LEAFD_PROCSTOP_H

#include <sys/types.h>

/* SIGSTOP pid and return once every thread of it has stopped. */
void proc_stop(pid_t pid);

#endif
