/* store_marks.h: what this process has received from its database, so
 * that a database that went back in time (a restored dump, a promoted
 * replica that lacks the last commits) is refused, never served again.
 *
 * A mark is the highest max_id this process got for a tag. A load whose
 * range [max_id - step, max_id) starts below the tag's mark came from a
 * database that forgot a range this process handed out: store_alloc
 * refuses it (STORE_REFUSED) and the process stays refused, every tag,
 * until an operator fences the database (leafd db-fence: every row raised
 * to a floor at or above every node's marks; store_marks_fenced). The
 * refusal is sticky because later loads would pass the check by themselves
 * (each one moves the counter up) while other nodes' ranges above this
 * node's marks are still repeated.
 *
 * The marks, the refusal and the identity of the server of the last load
 * live in memory and, when segment.marks_file is set, in that file (lines
 * appended with write(2), synced by store_marks_sync and at close,
 * rewritten whole at open and once the appends outgrow the state), so a
 * restarted node keeps them.
 *
 * Threads: every function takes the module's one mutex; any thread.
 * Before store_marks_open (and after close) the marks are in memory only. */
#ifndef LEAFD_STORE_MARKS_H
#define LEAFD_STORE_MARKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MARKS_SERVER_MAX 96        /* a server identity, as text */
#define MARKS_WHY_MAX    512

/* Load path ("" or NULL: memory only), then rewrite it whole and keep it
 * open for appends. 0, or -1 with *cause (a file that is not a marks file,
 * a line that does not parse, an unwritable directory). */
int store_marks_open(const char *path, char **cause);
/* The lines of a marks file from f, added to what is there (for the fuzz
 * target; store_marks_open reads the file with it). 0, or -1 with *cause. */
int store_marks_parse(FILE *f, const char *name, char **cause);
void store_marks_sync(void);               /* fsync the file, if any */
void store_marks_close(void);              /* sync, close; marks stay */
void store_marks_reset(void);              /* forget everything (tests) */

int64_t store_marks_get(const char *tag);  /* 0: none */
int64_t store_marks_max(void);             /* over segment tags; 0: none */
int64_t store_marks_serial_max(void);      /* over serial rows; 0: none */
size_t  store_marks_count(void);
int64_t store_marks_refused_fence(void);   /* refused: the fence id to beat
                                              (-1: not read yet) */

/* A range of tag (a serial row when serial) the store committed: 0 and the mark raised to max_id, or
 * -1 when it starts below the mark (the process is refused then, code
 * "store_behind", and *cause says why and what to do). Two loads of one tag
 * in this process would commit in one order and record their marks in the
 * other: a caller that may load a tag from several threads holds it
 * (store_marks_hold) from before its transaction until after this. */
int store_marks_take(const char *tag, int serial, int64_t max_id,
                     int64_t step, const char *where, char **cause);

struct mark;
struct mark *store_marks_hold(const char *tag);    /* blocks; never NULL */
void store_marks_release(struct mark *held);

/* Refuse every load from now on (sticky, kept in the file) with code, a
 * short error code for clients ("store_behind", "db_failover"), and why. */
void store_marks_refuse(const char *code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* 1 while refused (code and why copied out when not NULL), else 0. */
int store_marks_refused(char *code, size_t code_cap, char *why, size_t why_cap);

/* The last row of a database's leafd_fence (id 0: none). */
struct marks_fence {
    int64_t id, floor, serial_floor;
    char    server[MARKS_SERVER_MAX];   /* the server that was fenced */
};

/* While refused: does the database's last fence lift it? The first call
 * after a refusal records the last fence's id (an older fence never lifts
 * it); then a fence with a greater id, of the server that answers now
 * (cur), whose floor is at or above the segment marks and serial_floor at
 * or above the serial marks, clears the refusal and records cur as the
 * server: 1. Else 0 (a fence seen but too low is logged once). Not
 * refused: 1. */
int store_marks_fenced(const struct marks_fence *last, const char *cur);

/* Two identities name the same server: equal up to their ';' (what
 * follows says how the loads were made). */
int store_marks_same_server(const char *a, const char *b);

/* The identity of the server of the last load ("" before any). */
void store_marks_server(char *out, size_t cap);
void store_marks_set_server(const char *server);

#endif
