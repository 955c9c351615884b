/* store.h: where segment mode keeps its leaf_alloc table.
 *
 * One interface, three backends: store_sqlite.c (the embedded default),
 * store_mysql.c (MySQL/MariaDB, through db_mysql.c's client setup) and
 * store_multi.c (several MySQL databases in disjoint blocks). The table is
 * Leaf's: biz_tag, max_id, step, description, update_time.
 *
 * A struct store is one connection and is used by one thread at a time (each
 * loader thread opens its own). Calls block; they never run on an I/O thread.
 * Every statement is prepared. Functions return an enum store_result: one
 * value per outcome, so that "this row is broken" can never be read as "the
 * database is down". On anything but STORE_OK, *cause is set to a malloc'd
 * message naming the peer's own error text (caller frees; cause may be
 * NULL). After an error the next call reconnects
 * by itself (mysql; no backoff, that is the caller's). A store does not log
 * the errors it returns; the multi store logs a member's changes of state
 * (down, back, kept out of loads) once each.
 *
 * Tags are exact bytes: 1..TAG_MAX (checked before any SQL), compared
 * byte-for-byte even where MySQL's collation would match "Demo" to "demo".
 */
#ifndef LEAFD_STORE_H
#define LEAFD_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

struct config;
struct store;

enum store_result {
    STORE_DB_ERROR = -1,   /* the database failed (down, timeout, SQL error):
                              retry later; nothing of a range may be used */
    STORE_OK = 0,
    STORE_NOT_FOUND = 1,   /* no such row (nothing changed) */
    STORE_BAD_ROW = 2,     /* this row cannot give a range (bad step, a
                              max_id that is not an integer, a range that
                              would start below 1 or pass INT64_MAX); the
                              database itself is fine (nothing changed) */
    STORE_EXISTS = 3,      /* store_insert: the tag is there already */
    STORE_BAD_ARG = 4,     /* a tag, step, max_id or description leafd
                              refuses before any SQL runs */
    STORE_REFUSED = 5,     /* loads are refused until an operator fences
                              the database (store_marks.h: it went back
                              in time, or its server changed under
                              asynchronous replication); nothing of a
                              range may be used */
    STORE_DEGRADED = 6,    /* semi-sync: no replica acknowledged the
                              commit; nothing of the range may be used,
                              retry later */
};

/* Nothing of a range may be used, and a later try may work. */
static inline int
store_load_failed(enum store_result rc)
{
    return rc == STORE_DB_ERROR || rc == STORE_REFUSED || rc == STORE_DEGRADED;
}

struct store_row {
    char    biz_tag[TAG_MAX + 1];
    int64_t max_id;
    int64_t step;
    char    description[257];
    char    update_time[32];      /* "YYYY-MM-DD HH:MM:SS" as the store gives it */
};

/* Open a store as the config says (segment.store, paths, URLs). Does not fail
 * when the database is merely down: the connection is made lazily and
 * store_open only fails on a configuration error (bad URL, unusable path).
 * For sqlite it creates the file and the table if missing, and the "demo" tag
 * when create_demo is set (an existing demo row is left alone).
 * MySQL: segment.mysql.url wins over leaf.jdbc.url. With a JDBC URL the
 * credentials are leaf.jdbc.username/password (else the URL's user=/password=
 * parameters); a mysql:// URL's own user wins and those are the fallback.
 * db_timeout_ms (<= 0: 5000) is sqlite's busy timeout, and MySQL's connect,
 * read and write timeouts rounded up to whole seconds. */
struct store *store_open(const struct config *cfg, char **cause);
void store_close(struct store *s);           /* NULL is a no-op */

/* "sqlite" or "mysql". */
const char *store_kind_name(const struct store *s);

/* Take a range for tag in one transaction:
 *   UPDATE leaf_alloc SET max_id = max_id + ?, update_time = now
 *     WHERE biz_tag = ? AND max_id <= INT64_MAX - step
 *   SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?
 * Committed (durably, for sqlite) before returning. The range handed out is
 * [*max_id - step, *max_id). *db_step is the row's step column.
 * STORE_NOT_FOUND: the tag does not exist. STORE_BAD_ROW: step outside
 * [1, STORE_STEP_MAX], max_id or step not an integer, max_id + step past
 * INT64_MAX, or a range that would start below 1; nothing changed, and for
 * the overflow case *max_id and *db_step hold the row's values (so the
 * caller can ask again with a step that fits). STORE_DB_ERROR: nothing of
 * the range may be used (a failed COMMIT may still have committed: that
 * range is simply skipped). */
#define STORE_STEP_MAX 2147483647     /* Leaf's step column is an int(11) */
enum store_result store_alloc(struct store *s, const char *tag, int64_t step,
                              int64_t *max_id, int64_t *db_step, char **cause);

/* store_alloc and store_serial_alloc check every range against this
 * process's marks (store_marks.h) and refuse loads while the process is
 * refused, unless the database was fenced at or above its marks since
 * (STORE_REFUSED, *cause saying why and what to do).
 *
 * leafd db-fence: raise every segment row's max_id to at least floor and
 * every serial row's to at least serial_floor (0: leave serial rows), and
 * record floor in the table leafd_fence (made when missing), in one
 * transaction. A node refused for a failover or a database behind its
 * marks resumes once it reads a fence at or above its highest mark. The
 * operator gives a floor above every ID any node issued (the largest
 * "marks_max" of the nodes' /health). 0, or -1 with *cause. */
int store_fence(const struct config *cfg, int64_t floor, int64_t serial_floor,
                FILE *out, char **cause);

/* Serial numbers (serial.c): in one transaction, read the database's own
 * clock (MySQL UTC_TIMESTAMP(6), SQLite 'now'; plus offset_ms, which is 0
 * except in tests), turn it into a row name and its floor with
 * key(arg, db_ms, tag, cap, floor) (returns 0, or -1 to refuse:
 * STORE_BAD_ARG), create the row with max_id 1 if it is missing (a
 * duplicate from another node is ignored, never an error), read the
 * largest max_id of the rows the floor names (MySQL: SELECT ... FOR
 * UPDATE; SQLite: inside its write transaction), raise the row's max_id to
 * that value if it is below, raise the floor's rows marked raise to at
 * least the end of the range about to be taken, then take `step` as
 * store_alloc does, and commit. So the range starts at or above every
 * max_id the floor names, and a node of the version before, which still
 * advances a raised row alone, takes its next range above this one. A
 * MySQL deadlock between two such loads is run again (up to 8 times, after
 * a random pause of a few ms, on the same connection).
 * *db_ms is the clock read, tag the row used. Results as store_alloc;
 * STORE_NOT_FOUND cannot happen (a MySQL row whose tag differs only in
 * case is STORE_BAD_ROW). */
#define STORE_SERIAL_FLOOR_MAX 8
struct store_serial_floor {
    int  n;                                /* 0..STORE_SERIAL_FLOOR_MAX */
    struct {
        char tag[TAG_MAX + 1];
        int  prefix;    /* 1: every row whose tag starts with tag (compared
                           without regard to ASCII case, as LIKE does);
                           0: the row tag */
        int  raise;     /* 1: raised to the range's end as well */
    } row[STORE_SERIAL_FLOOR_MAX];
    /* The least the range may start at: the highest max_id this process
     * got for the row (serial_row_name), or one of its copies in a set
     * (store_multi.c); 0: none. Checked against the floor's maximum, which
     * counts the row itself (serial_row_name's first entry; with n == 0 it
     * is not checked). A load whose range would start below it
     * is refused in its transaction (nothing changes), STORE_REFUSED with
     * STORE_SERIAL_BEHIND's cause (and, for a store that can be fenced,
     * the process refused as for any range below its marks): the database went back in time and
     * would hand out again serials already handed out. mark_src says
     * whose mark it is. */
    int64_t mark;
    char    mark_src[96];
};
/* The cause of that refusal: where (the database), the row, the range's
 * start, the mark and mark_src. */
#define STORE_SERIAL_BEHIND "%s: the serial row %s would give a range from " \
    "%lld, below %lld (%s): the database went back in time (a restored " \
    "dump, a promoted replica without the last commits?) and would hand " \
    "out serials again; loads of this row are refused. Raise the row's " \
    "max_id above the highest mark any node logs for it (UPDATE leaf_alloc " \
    "SET max_id = N WHERE biz_tag = '...'), then loads resume"
typedef int (*store_serial_key_fn)(void *arg, int64_t db_ms, char *tag,
                                   size_t cap, struct store_serial_floor *floor);
/* tag as a LIKE pattern with '!' as the escape ("ESCAPE '!'"), '%' after it
 * when prefix. out holds 2 * TAG_MAX + 2 bytes. */
#define STORE_LIKE_MAX (2 * TAG_MAX + 2)
void store_like_pattern(const char *tag, int prefix, char *out);
/* The description store_serial_alloc writes into every row it creates.
 * It is what marks a serial period's row, whatever its name (segment mode
 * over several databases keeps those rows in the first database alone);
 * store_insert refuses it for any other row. */
#define STORE_SERIAL_DESCRIPTION "serial period"
/* 1 when row is a serial period's row (its description), else 0. Such a
 * row is never a segment tag: the loader leaves it out. */
int store_row_is_serial(const struct store_row *row);
/* The serial rows (store_row_is_serial) of the database that holds them
 * (a set's first), as store_list gives them. */
enum store_result store_serial_rows(struct store *s, struct store_row **rows,
                                    size_t *n, char **cause);
enum store_result store_serial_alloc(struct store *s, int64_t offset_ms,
                                     store_serial_key_fn key, void *arg,
                                     int64_t step, int64_t *db_ms, char *tag,
                                     size_t cap, int64_t *max_id, char **cause);

/* One row: STORE_OK, STORE_NOT_FOUND or STORE_DB_ERROR. */
enum store_result store_get(struct store *s, const char *tag,
                            struct store_row *row, char **cause);

/* Every row, sorted by biz_tag in byte order (strcmp), whatever the
 * database's collation. *rows is malloc'd (caller frees; NULL when *n is 0).
 * Rows whose tag is over TAG_MAX bytes are skipped with a warning. */
enum store_result store_list(struct store *s, struct store_row **rows,
                             size_t *n, char **cause);

/* Add a row (for setup and tests): max_id >= 0, step 1..INT32_MAX (Leaf's
 * int(11)), description NULL or at most 256 bytes and not
 * STORE_SERIAL_DESCRIPTION. STORE_OK; STORE_EXISTS
 * (in MySQL: also a tag differing only in case); STORE_BAD_ARG;
 * STORE_DB_ERROR. */
enum store_result store_insert(struct store *s, const char *tag, int64_t max_id,
                               int64_t step, const char *description,
                               char **cause);

/* Several databases (segment.mysql.urls; store_multi.c). store_open
 * opens a multi store when the list has two or more URLs. */
#define STORE_MULTI_MAX 8
struct sbuf;
int  store_multi_count(void);              /* 0: not in multi mode */
void store_multi_status_json(struct sbuf *b);   /* [{"index":0,...},...] */
void store_multi_metrics(struct sbuf *b);
/* leafd multi-db init URL...: prepare or change a set (see DESIGN);
 * progress to out. floor > 0: no ID below it is handed out again (the
 * operator's word for a member missing from urls, which is refused
 * otherwise). serial_restart_ok: the set's first database may be missing
 * or behind with no copy of its serial rows in the list (refused
 * otherwise). 0, or -1 with *cause. */
int  store_multi_init(const struct config *cfg, char **urls, int n,
                      int64_t block_size, int64_t floor, int serial_restart_ok,
                      FILE *out, char **cause);
/* --check-config's look at a PostgreSQL store's connection strings
 * (segment.postgresql.url or each of segment.postgresql.urls), as at
 * start, connecting to none: 0, or -1 with *cause. */
int  store_check_urls(const struct config *cfg, char **cause);
/* A single MySQL or PostgreSQL store must not be one database of a set: -1 with
 * *cause if it is (0 when it is not, or cannot tell now). */
int  store_single_check(struct store *s, char **cause);

/* The failover rule's state (store_marks.h, store_mysql_repl.c): the
 * marks, any refusal, the server and, for a single MySQL store, what it
 * last said of its replication. JSON members (no braces) into b; Prometheus
 * lines; store_repl_health: 0 fine, 1 durability degraded, 2 loads
 * refused, with why (cap bytes). */
void store_repl_status_json(struct sbuf *b);
/* Read the server's replication state now (a single MySQL store: its
 * identity, read_only, semi-sync or Galera state) for /health and
 * /metrics, without a load; a failure is left to the next call. The
 * loader calls it at each refresh, so the state shows from the start and
 * while no tag loads. */
void store_probe(struct store *s);
void store_repl_metrics(struct sbuf *b);
int  store_repl_health(char *why, size_t cap);

/* Threads. Every thread that calls store functions (the main thread too,
 * and whichever thread calls store_open) calls store_thread_init() before
 * its first store call and store_thread_end() before it exits; the MySQL C
 * API needs them (mysql_thread_init/_end). The first call also runs
 * mysql_library_init, once per process. Cheap, and harmless with sqlite.
 * store_thread_init returns 0, or -1 if the MySQL library cannot start.
 * store_library_end() (mysql_library_end) is for the very end of main, after
 * every store is closed and every other thread has ended. */
int  store_thread_init(void);
void store_thread_end(void);
void store_library_end(void);

#endif
