/* store_pg_internal.h: the PostgreSQL segment store's connection, shared by
 * store_pg.c (leaf_alloc: loads, rows, serial rows, the fence) and
 * store_pg_multi.c (the multi-db tables), which call each other:
 * store_pg.c's loads check the set's row (store_pg_meta_check), the set's
 * loads run through store_pg_call and its prepared statements. Not for
 * other modules: they use store.h and store_impl.h. */
#ifndef LEAFD_STORE_PG_INTERNAL_H
#define LEAFD_STORE_PG_INTERNAL_H

#include <stdint.h>

#include "db_pg.h"
#include "multi_block.h"
#include "store.h"
#include "store_impl.h"
#include "store_marks.h"

/* store_pg.c's prepared statements (pg_sql). */
enum pg_stmt {
    PG_ALLOC, PG_ALLOC_SYNC, PG_WHY, PG_GET, PG_LIST, PG_INSERT, PG_NOW_MS, PG_INSERT_SERIAL,
    PG_FLOOR, PG_RAISE, PG_RAISE_OLD, PG_BLOCK_LOCK, PG_BLOCK_SET, PG_NSTMT
};

struct store_pg {
    struct store      base;
    struct db_pg_conn c;
    char              id[MARKS_SERVER_MAX];   /* the server's, at connect:
                                                 "pg:<system id>/<timeline>" */
    int               sync;     /* segment.postgresql.replication = sync */
    int               sync_ok;  /* the last load's settings wait for a
                                   standby's flush */
    int               has_multi; /* the last UPDATE saw leafd_multi_db */
    int               single_refused; /* the last load's set check refused */
    int               cut;      /* a wait for a standby was cut short (the
                                   server's WARNING) since the statement */
    char              sync_why[160];
};

/* The body of a call on p's open connection. */
typedef enum store_result (*pg_body_fn)(struct store_pg *p, void *arg,
                                        char **cause);

/* One call: connect if needed (reading the server's identity into p->id;
 * a standby is refused), run body, and when check (a single store's
 * loads), check the server that answered against the marks (the failover
 * rule); once more on a kept connection found dead at once. */
enum store_result store_pg_call(struct store_pg *p, pg_body_fn body,
                                void *arg, int check, char **cause);

/* store_pg_call, run again after a deadlock or a serialization failure
 * (loads, whose rerun is safe). */
enum store_result store_pg_call_retry(struct store_pg *p, pg_body_fn body,
                                      void *arg, int check, char **cause);

/* ROLLBACK the caller's transaction and return rc (the cause kept);
 * STORE_DB_ERROR when the ROLLBACK fails. */
enum store_result store_pg_rollback(struct store_pg *p, enum store_result rc);

/* Inside a set member's transaction (store_pg_multi.c): its
 * leafd_multi_db row, read FOR SHARE (init's freeze waits for the
 * transaction), must be want and not frozen. Else STORE_DB_ERROR, the
 * transaction rolled back (a missing table too). */
enum store_result store_pg_meta_check(struct store_pg *p,
                                      const struct multi_meta *want,
                                      struct multi_meta *got, char **cause);

/* A serial load (store_pg.c); want: the set's first database, checked
 * in its transaction (NULL: a single store, guarded by its
 * leafd_multi_db row instead). */
enum store_result store_pg_serial_load(struct store_pg *p,
                                       const struct multi_meta *want,
                                       int64_t offset_ms,
                                       store_serial_key_fn key, void *arg,
                                       int64_t step, int64_t *db_ms, char *tag,
                                       size_t cap, int64_t *max_id,
                                       char **cause);

#endif
