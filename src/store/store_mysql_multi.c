/* store_mysql_multi.c: the MySQL side of several databases (store_multi.c,
 * store_multi_init.c): the leafd_multi_db and leafd_multi_member tables,
 * block loads checked against them, the freeze and switch of
 * `leafd multi-db init`, the members' tops and the serial rows' copies.
 * Each call is one transaction on the store's connection
 * (store_mysql_internal.h), through db_mysql_conn.h's steps. */
#include <mysql.h>
#include <mysqld_error.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_mysql_conn.h"
#include "db_mysql_url.h"
#include "log.h"
#include "multi_block.h"
#include "store.h"
#include "store_impl.h"
#include "store_mysql_internal.h"
#include "util.h"

static const char sql_meta_ddl[] =
    "CREATE TABLE IF NOT EXISTS leafd_multi_db ("
    " id tinyint NOT NULL DEFAULT 1,"
    " db_index int NOT NULL, db_count int NOT NULL,"
    " block_size bigint NOT NULL, since_block bigint NOT NULL,"
    " frozen tinyint NOT NULL DEFAULT 0,"
    " update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP"
    " ON UPDATE CURRENT_TIMESTAMP,"
    " PRIMARY KEY (id)) ENGINE=InnoDB";
static const char sql_member_ddl[] =
    "CREATE TABLE IF NOT EXISTS leafd_multi_member ("
    " db_id bigint NOT NULL, self tinyint NOT NULL DEFAULT 0,"
    " pos int NOT NULL DEFAULT -1, location varchar(255) NOT NULL DEFAULT '',"
    " top bigint NOT NULL DEFAULT 0,"
    " update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP"
    " ON UPDATE CURRENT_TIMESTAMP,"
    " PRIMARY KEY (db_id)) ENGINE=InnoDB";
static const char sql_alloc_ddl[] =
    "CREATE TABLE IF NOT EXISTS leaf_alloc ("
    " biz_tag varchar(128) NOT NULL DEFAULT '',"
    " max_id bigint(20) NOT NULL DEFAULT '1',"
    " step int(11) NOT NULL,"
    " description varchar(256) DEFAULT NULL,"
    " update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP"
    " ON UPDATE CURRENT_TIMESTAMP,"
    " PRIMARY KEY (biz_tag)) ENGINE=InnoDB";

const char *
store_mysql_where(const struct store *s)
{
    return ((const struct store_mysql *)s)->c.where;
}

static const char sql_meta_get[] =
    "SELECT db_index, db_count, block_size, since_block, frozen "
    "FROM leafd_multi_db WHERE id = 1";
static const char sql_meta_get_shared[] =
    "SELECT db_index, db_count, block_size, since_block, frozen "
    "FROM leafd_multi_db WHERE id = 1 LOCK IN SHARE MODE";

/* The leafd_multi_db row: 1 found, 0 no table or no row, -1 error. */
static int
my_meta_read(struct store_mysql *m, struct multi_meta *mm, int lock,
             char **cause)
{
    MYSQL_STMT *st;
    MYSQL_BIND r[5];
    long long v[5] = { 0 };
    int rc;

    for (int i = 0; i < 5; i++)
        db_mysql_bind_i64(&r[i], &v[i]);
    rc = db_mysql_conn_adhoc(&m->c, lock ? sql_meta_get_shared : sql_meta_get,
                             NULL, r, &st, "SELECT leafd_multi_db",
                             ER_NO_SUCH_TABLE, cause);
    if (rc != 0)
        return rc == 1 ? 0 : -1;
    rc = db_mysql_conn_fetch(&m->c, st, "SELECT leafd_multi_db", cause);
    mysql_stmt_close(st);
    if (rc == 1) {
        mm->db_index = v[0];
        mm->db_count = v[1];
        mm->block_size = v[2];
        mm->since_block = v[3];
        mm->frozen = (int)v[4];
    }
    return rc;
}

/* Inside a single-URL node's load (store_mysql.c): is its database free
 * of any set? A node started on segment.mysql.url alone passes
 * store_single_check at start; `leafd multi-db init` run while it serves
 * makes the database a member, whose IDs outside its own blocks belong to
 * the others. The load reads the leafd_multi_db row in share mode (init's
 * freeze waits for it, or the load sees the freeze) after locking its
 * leaf_alloc row (tag; NULL: the caller's statement locked it), so that
 * init's wait for the rows after the freeze (store_mysql_freeze) waits for
 * a load that read no table yet. A frozen row or a set of two or more:
 * refused, the transaction rolled back, STORE_DB_ERROR with the cause. */
enum store_result
store_my_single_check(struct store_mysql *m, const char *tag, char **cause)
{
    struct multi_meta mm;
    int rc;

    if (tag != NULL) {
        unsigned long tag_len = strlen(tag);
        long long v = 0;
        MYSQL_BIND p[1], r[1];
        MYSQL_STMT *st;

        store_my_bind_str(&p[0], tag, &tag_len);
        db_mysql_bind_i64(&r[0], &v);
        if (db_mysql_conn_adhoc(&m->c, "SELECT max_id FROM leaf_alloc WHERE "
                                "biz_tag = ? FOR UPDATE", p, r, &st,
                                "SELECT leaf_alloc (lock)", 0, cause) != 0)
            return STORE_DB_ERROR;
        rc = db_mysql_conn_fetch(&m->c, st, "SELECT leaf_alloc (lock)", cause);
        mysql_stmt_close(st);
        if (rc == -1)
            return STORE_DB_ERROR;
    }
    rc = my_meta_read(m, &mm, 1, cause);
    if (rc == -1)
        return STORE_DB_ERROR;
    if (rc == 0 || (!mm.frozen && mm.db_count < 2))
        return STORE_OK;
    if (db_mysql_conn_rollback(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    if (mm.frozen)
        store_set_cause(cause, "mysql %s is frozen by leafd multi-db init: "
                        "it is being made a member of a set, whose IDs "
                        "outside its own blocks belong to the others; this "
                        "node (segment.mysql.url alone) stops loading: once "
                        "init is done, restart it with every database in "
                        "segment.mysql.urls", m->c.where);
    else
        store_set_cause(cause, "mysql %s is database %lld of a set of %lld "
                        "(leafd multi-db init), whose IDs outside its own "
                        "blocks belong to the others; this node "
                        "(segment.mysql.url alone) stops loading: restart it "
                        "with every database in segment.mysql.urls",
                        m->c.where, (long long)mm.db_index,
                        (long long)mm.db_count);
    return STORE_DB_ERROR;
}

static enum store_result
my_meta_get_once(struct store_mysql *m, void *arg, char **cause)
{
    int rc = my_meta_read(m, arg, 0, cause);

    if (rc == -1 || db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    return rc == 1 ? STORE_OK : STORE_NOT_FOUND;
}

enum store_result
store_mysql_meta_get(struct store *s, struct multi_meta *mm, char **cause)
{
    return store_my_tx((struct store_mysql *)s, my_meta_get_once, mm, cause);
}

/* Inside the caller's transaction: the meta row, read in share mode (init's
 * freeze waits for the transaction), must be want and not frozen. Else
 * STORE_DB_ERROR, the transaction rolled back. */
enum store_result
store_my_meta_check(struct store_mysql *m, const struct multi_meta *want,
              struct multi_meta *mm_out, char **cause)
{
    struct multi_meta mm;
    int rc;

    rc = my_meta_read(m, &mm, 1, cause);
    if (rc == -1)
        return STORE_DB_ERROR;
    if (rc == 0 || mm.frozen || mm.db_index != want->db_index ||
        mm.db_count != want->db_count || mm.block_size != want->block_size ||
        mm.since_block != want->since_block) {
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        store_meta_refusal(cause, "mysql", m->c.where, rc == 1 ? &mm : NULL,
                           want, store_mysql_member_ops.key);
        return STORE_DB_ERROR;
    }
    *mm_out = mm;
    return STORE_OK;
}

struct my_block_arg {
    const struct multi_meta *want;
    const char              *tag;
    int64_t                  step, floor;
    long long                expect;    /* the server's @@server_id; 0 */
    long long               *server_id; /* what this attempt read */
    int64_t                 *max_id, *db_step;
};

static enum store_result
my_alloc_block_once(struct store_mysql *m, void *arg, char **cause)
{
    const struct my_block_arg *a = arg;
    const struct multi_meta *want = a->want;
    const char *tag = a->tag;
    int64_t step = a->step, floor = a->floor;
    struct multi_meta mm;
    MYSQL_STMT *st;
    MYSQL_BIND p[2], r[5];
    long long v_max = 0, v_step = 0, v_new, v_server = 0, v_ro = 0;
    unsigned long tag_len = strlen(tag), r_tag_len = 0;
    char r_tag[MY_TAG_BUF];
    int64_t start;
    int rc;

    if (store_my_meta_check(m, want, &mm, cause) != STORE_OK)
        return STORE_DB_ERROR;

    memset(r, 0, sizeof r);
    r[0].buffer_type = MYSQL_TYPE_STRING;
    r[0].buffer = r_tag;
    r[0].buffer_length = sizeof r_tag;
    r[0].length = &r_tag_len;
    db_mysql_bind_i64(&r[1], &v_max);
    db_mysql_bind_i64(&r[2], &v_step);
    db_mysql_bind_i64(&r[3], &v_server);
    db_mysql_bind_i64(&r[4], &v_ro);
    store_my_bind_str(&p[0], tag, &tag_len);
    if (db_mysql_conn_adhoc(&m->c,
            "SELECT biz_tag, max_id, step, @@GLOBAL.server_id, "
            "@@GLOBAL.read_only FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE",
            p, r, &st, "SELECT leaf_alloc", 0, cause) == -1)
        return STORE_DB_ERROR;
    rc = db_mysql_conn_fetch(&m->c, st, "SELECT leaf_alloc", cause);
    mysql_stmt_close(st);
    if (rc == -1)
        return STORE_DB_ERROR;
    /* The server of this database's last load, or refused: the caller
     * checks a changed one against the records (store_multi.c). */
    if (rc == 1 && v_ro) {
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        store_set_cause(cause, "mysql %s (server_id %lld) is read-only: a "
                        "replica, or a primary being demoted", m->c.where,
                        v_server);
        return STORE_DB_ERROR;
    }
    if (rc == 1)
        *a->server_id = v_server;
    if (rc == 1 && a->expect != 0 && v_server != a->expect) {
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        store_set_cause(cause, "mysql %s: server_id %lld, not %lld",
                        m->c.where, v_server, a->expect);
        return STORE_REFUSED;
    }
    if (rc == 0 || r_tag_len != tag_len || memcmp(r_tag, tag, tag_len) != 0) {
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        return STORE_NOT_FOUND;
    }
    start = store_block_start(&mm, v_max > floor ? v_max : floor, step);
    if (start < 0) {
        if (db_mysql_conn_rollback(&m->c, cause) == -1)
            return STORE_DB_ERROR;
        store_set_cause(cause, "%s: no block of %lld IDs fits (step %lld, "
                        "max_id %lld, database %lld of %lld)", tag,
                        (long long)mm.block_size, (long long)step, v_max,
                        (long long)mm.db_index, (long long)mm.db_count);
        return STORE_BAD_ROW;
    }
    v_new = start + step;
    db_mysql_bind_i64(&p[0], &v_new);
    store_my_bind_str(&p[1], tag, &tag_len);
    if (db_mysql_conn_run(&m->c,
            "UPDATE leaf_alloc SET max_id = ?, update_time = "
            "CURRENT_TIMESTAMP WHERE biz_tag = ?", p, "UPDATE leaf_alloc",
            cause) == -1 ||
        db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    *a->max_id = v_new;
    *a->db_step = v_step;
    return STORE_OK;
}

enum store_result
store_mysql_alloc_block(struct store *s, const struct multi_meta *want,
                        const char *tag, int64_t step, int64_t floor,
                        long long *server_id, int64_t *max_id,
                        int64_t *db_step, char **cause)
{
    long long got = 0;
    struct my_block_arg a = { want, tag, step, floor, *server_id, &got,
                              max_id, db_step };
    enum store_result r;

    /* Each attempt compares with the same server; only the one that
     * ends the call says which it met. */
    r = store_my_tx_retry((struct store_mysql *)s, my_alloc_block_once, &a,
                          cause);
    if (r == STORE_OK || r == STORE_REFUSED)
        *server_id = got;
    return r;
}

/* ---- leafd multi-db init (store_multi.c), one transaction per call ---- */

static enum store_result
my_prepare_tables_once(struct store_mysql *m, void *arg, char **cause)
{
    if (db_mysql_conn_run(&m->c, sql_alloc_ddl, NULL, "CREATE TABLE leaf_alloc",
                          cause) == -1 ||
        db_mysql_conn_run(&m->c, sql_meta_ddl, NULL,
                          "CREATE TABLE leafd_multi_db", cause) == -1 ||
        db_mysql_conn_run(&m->c, sql_member_ddl, NULL,
                          "CREATE TABLE leafd_multi_member", cause) == -1 ||
        db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

/* On a connection of its own without the statements, which need
 * leaf_alloc: an empty schema is enough. */
enum store_result
store_mysql_prepare_tables(struct store *s, char **cause)
{
    struct store_mysql *m = (struct store_mysql *)s;
    enum store_result rc;

    db_mysql_conn_close(&m->c);
    if (db_mysql_conn_open(&m->c, 0, cause) == -1)
        return STORE_DB_ERROR;
    rc = my_prepare_tables_once(m, NULL, cause);
    db_mysql_conn_close(&m->c);       /* the next call connects with them */
    return rc;
}

static enum store_result
my_freeze_once(struct store_mysql *m, void *arg, char **cause)
{
    long long v = *(const int *)arg;
    MYSQL_BIND p[1];

    db_mysql_bind_i64(&p[0], &v);
    if (db_mysql_conn_run(&m->c,
            "INSERT INTO leafd_multi_db (id, db_index, db_count, block_size, "
            "since_block, frozen) VALUES (1, -1, 0, 0, 0, ?) "
            "ON DUPLICATE KEY UPDATE frozen = VALUES(frozen)", p,
            "freeze leafd_multi_db", cause) == -1 ||
        db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

/* Every leaf_alloc row in share mode, then commit: waits for the loads
 * that hold a row (a single-URL node's that read no leafd_multi_db table
 * before the freeze made it; store_my_single_check). */
static enum store_result
my_rows_wait_once(struct store_mysql *m, void *arg, char **cause)
{
    long long v = 0;
    MYSQL_BIND r[1];
    MYSQL_STMT *st;
    int rc;

    (void)arg;
    db_mysql_bind_i64(&r[0], &v);
    if (db_mysql_conn_adhoc(&m->c, "SELECT COUNT(*) FROM leaf_alloc LOCK IN "
                            "SHARE MODE", NULL, r, &st,
                            "SELECT leaf_alloc (wait)", 0, cause) != 0)
        return STORE_DB_ERROR;
    rc = db_mysql_conn_fetch(&m->c, st, "SELECT leaf_alloc (wait)", cause);
    mysql_stmt_close(st);
    if (rc == -1 || db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

/* Set frozen (1: loads refused) on the meta row, creating it if missing.
 * Waits for loads in flight (they hold the row in share mode); a freeze
 * also waits for every load holding a leaf_alloc row, so that what init
 * reads next includes them (store_my_single_check). */
enum store_result
store_mysql_freeze(struct store *s, int frozen, char **cause)
{
    enum store_result r;

    r = store_my_tx((struct store_mysql *)s, my_freeze_once, &frozen, cause);
    if (r != STORE_OK || !frozen)
        return r;
    return store_my_tx((struct store_mysql *)s, my_rows_wait_once, NULL, cause);
}

static enum store_result
my_switch_once(struct store_mysql *m, void *arg, char **cause)
{
    const struct store_switch_arg *a = arg;
    MYSQL_BIND p[5];
    long long v[5];
    unsigned long tag_len, desc_len;

    for (size_t i = 0; i < a->n; i++) {
        const struct store_row *row = &a->rows[i];

        /* A serial row keeps its own counter: no block floor. */
        v[0] = store_row_is_serial(row) || row->max_id > a->floor ?
               row->max_id : a->floor;
        v[1] = row->step;
        tag_len = strlen(row->biz_tag);
        desc_len = strlen(row->description);
        store_my_bind_str(&p[0], row->biz_tag, &tag_len);
        db_mysql_bind_i64(&p[1], &v[0]);
        db_mysql_bind_i64(&p[2], &v[1]);
        store_my_bind_str(&p[3], row->description, &desc_len);
        if (db_mysql_conn_run(&m->c,
                "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
                "VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE "
                "max_id = GREATEST(max_id, VALUES(max_id))", p,
                "INSERT leaf_alloc", cause) == -1)
            return STORE_DB_ERROR;
    }
    if (db_mysql_conn_run(&m->c, "UPDATE leafd_multi_member SET pos = -1",
                          NULL, "UPDATE leafd_multi_member", cause) == -1)
        return STORE_DB_ERROR;
    for (int i = 0; i < a->nset; i++) {
        const struct multi_member *mb = &a->set[i];
        unsigned long loc_len = strlen(mb->where);

        v[0] = mb->db_id;
        v[1] = mb->pos;
        v[2] = mb->top;
        db_mysql_bind_i64(&p[0], &v[0]);
        db_mysql_bind_i64(&p[1], &v[1]);
        store_my_bind_str(&p[2], mb->where, &loc_len);
        db_mysql_bind_i64(&p[3], &v[2]);
        if (db_mysql_conn_run(&m->c,
                "INSERT INTO leafd_multi_member (db_id, pos, location, top) "
                "VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE "
                "pos = VALUES(pos), location = VALUES(location), "
                "top = GREATEST(top, VALUES(top))",
                p, "INSERT leafd_multi_member", cause) == -1)
            return STORE_DB_ERROR;
    }
    v[0] = a->mm->db_index;
    v[1] = a->mm->db_count;
    v[2] = a->mm->block_size;
    v[3] = a->mm->since_block;
    for (int i = 0; i < 4; i++)
        db_mysql_bind_i64(&p[i], &v[i]);
    if (db_mysql_conn_run(&m->c,
            "UPDATE leafd_multi_db SET db_index = ?, db_count = ?, "
            "block_size = ?, since_block = ?, frozen = 0 WHERE id = 1",
            p, "UPDATE leafd_multi_db", cause) == -1 ||
        db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

/* In one transaction: every row of rows present with max_id at least
 * floor (a serial row: at least its own; inserted with its step and
 * description when missing, raised otherwise), the members set[] (every
 * other member row's pos -1, tops only raised), and the meta row set to
 * mm (unfrozen). */
enum store_result
store_mysql_switch(struct store *s, const struct store_row *rows, size_t n,
                   int64_t floor, const struct multi_meta *mm,
                   const struct multi_member *set, int nset, char **cause)
{
    struct store_switch_arg a = { rows, n, floor, mm, set, nset };

    return store_my_tx((struct store_mysql *)s, my_switch_once, &a, cause);
}

struct my_members_arg {
    int64_t                new_id;
    struct multi_member  **rows;
    size_t                *n;
};

static enum store_result
my_members_once(struct store_mysql *m, void *arg, char **cause)
{
    const struct my_members_arg *a = arg;
    MYSQL_STMT *st;
    MYSQL_BIND p[1], r[5];
    long long v[4] = { 0 }, id = a->new_id;
    char loc[256];
    unsigned long loc_len = 0;
    size_t cap = 0;
    int rc;

    *a->rows = NULL;
    *a->n = 0;
    if (id != 0) {
        db_mysql_bind_i64(&p[0], &id);
        if (db_mysql_conn_run(&m->c,
                "INSERT INTO leafd_multi_member (db_id, self) SELECT ?, 1 "
                "FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM leafd_multi_member "
                "WHERE self = 1)", p, "INSERT leafd_multi_member", cause) == -1)
            return STORE_DB_ERROR;
    }
    for (int i = 0; i < 4; i++)
        db_mysql_bind_i64(&r[i], &v[i]);
    memset(&r[4], 0, sizeof r[4]);
    r[4].buffer_type = MYSQL_TYPE_STRING;
    r[4].buffer = loc;
    r[4].buffer_length = sizeof loc;
    r[4].length = &loc_len;
    rc = db_mysql_conn_adhoc(&m->c,
                             "SELECT db_id, self, pos, top, location FROM "
                             "leafd_multi_member ORDER BY pos, db_id", NULL, r,
                             &st, "SELECT leafd_multi_member", ER_NO_SUCH_TABLE,
                             cause);
    if (rc == -1)
        return STORE_DB_ERROR;
    while (rc == 0) {
        struct multi_member *mb;
        int f = db_mysql_conn_fetch(&m->c, st, "SELECT leafd_multi_member",
                                    cause);

        if (f == -1) {
            mysql_stmt_close(st);
            free(*a->rows);
            *a->rows = NULL;
            *a->n = 0;
            return STORE_DB_ERROR;
        }
        if (f == 0)
            break;
        if (*a->n == cap) {
            cap = cap ? cap * 2 : 8;
            *a->rows = xrealloc(*a->rows, cap * sizeof **a->rows);
        }
        mb = &(*a->rows)[(*a->n)++];
        mb->db_id = v[0];
        mb->self = (int)v[1];
        mb->pos = (int)v[2];
        mb->top = v[3];
        store_copy_text(mb->where, sizeof mb->where, loc,
                        loc_len < sizeof loc ? loc_len : sizeof loc - 1);
    }
    if (rc == 0)
        mysql_stmt_close(st);
    if (db_mysql_conn_commit(&m->c, cause) == -1) {
        free(*a->rows);
        *a->rows = NULL;
        *a->n = 0;
        return STORE_DB_ERROR;
    }
    return STORE_OK;
}

/* The leafd_multi_member rows (none when the table is missing), after
 * giving this database the identity new_id when it has none (new_id 0:
 * read only). *rows malloc'd. */
enum store_result
store_mysql_members(struct store *s, int64_t new_id, struct multi_member **rows,
                    size_t *n, char **cause)
{
    struct my_members_arg a = { new_id, rows, n };

    return store_my_tx((struct store_mysql *)s, my_members_once, &a, cause);
}

struct my_top_arg {
    int64_t db_id, top;
};

static enum store_result
my_top_once(struct store_mysql *m, void *arg, char **cause)
{
    const struct my_top_arg *a = arg;
    MYSQL_BIND p[2];
    long long v[2] = { a->db_id, a->top };

    db_mysql_bind_i64(&p[0], &v[0]);
    db_mysql_bind_i64(&p[1], &v[1]);
    /* An upsert: a member row missing here (a database that lost it)
     * gets one (pos -1: a record, not a place in the set). */
    if (db_mysql_conn_run(&m->c,
            "INSERT INTO leafd_multi_member (db_id, top) VALUES (?, ?) "
            "ON DUPLICATE KEY UPDATE top = GREATEST(top, VALUES(top))",
            p, "INSERT leafd_multi_member (top)", cause) == -1 ||
        db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

/* Raise the recorded top of member db_id to at least top (the row made
 * when missing). */
enum store_result
store_mysql_top_push(struct store *s, int64_t db_id, int64_t top, char **cause)
{
    struct my_top_arg a = { db_id, top };

    return store_my_tx((struct store_mysql *)s, my_top_once, &a, cause);
}

struct my_serial_copy_arg {
    const char *tag;
    int64_t     max_id, step;
};

static enum store_result
my_serial_copy_once(struct store_mysql *m, void *arg, char **cause)
{
    const struct my_serial_copy_arg *a = arg;
    MYSQL_BIND p[3];
    long long v_max = a->max_id, v_step = a->step;
    unsigned long tag_len = strlen(a->tag);

    store_my_bind_str(&p[0], a->tag, &tag_len);
    db_mysql_bind_i64(&p[1], &v_max);
    db_mysql_bind_i64(&p[2], &v_step);
    /* Only a serial row is raised: a segment tag of the same name (a
     * DBA's row) is left as it is. */
    if (db_mysql_conn_run(&m->c,
            "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) "
            "VALUES (?, ?, ?, '" STORE_SERIAL_DESCRIPTION "') ON DUPLICATE "
            "KEY UPDATE max_id = IF(description = '" STORE_SERIAL_DESCRIPTION
            "', GREATEST(max_id, VALUES(max_id)), max_id)", p,
            "INSERT leaf_alloc (serial copy)", cause) == -1 ||
        db_mysql_conn_commit(&m->c, cause) == -1)
        return STORE_DB_ERROR;
    return STORE_OK;
}

/* The copy of a serial row: tag's max_id raised to at least max_id (the
 * row made, with step and the serial description, when missing). */
enum store_result
store_mysql_serial_copy(struct store *s, const char *tag, int64_t max_id,
                        int64_t step, char **cause)
{
    struct my_serial_copy_arg a = { tag, max_id, step };

    assert(tag != NULL && strlen(tag) <= TAG_MAX && max_id >= 1 && step >= 1);
    return store_my_tx((struct store_mysql *)s, my_serial_copy_once, &a, cause);
}

/* A cheap probe: connect if needed, and ping. */
enum store_result
store_mysql_ping(struct store *s, char **cause)
{
    struct store_mysql *m = (struct store_mysql *)s;
    int reused;
    int64_t t0;

    if (db_mysql_conn_begin(&m->c, &reused, &t0, cause) == -1)
        return STORE_DB_ERROR;
    if (mysql_ping(m->c.db) != 0)
        return db_mysql_conn_fail(&m->c, NULL, "ping", cause), STORE_DB_ERROR;
    return STORE_OK;
}


/* alloc_block of the member table: the server's identity is its
 * @@server_id, "server_id N" (as the refusals say it). */
static enum store_result
my_member_alloc_block(struct store *s, const struct multi_meta *want,
                      const char *tag, int64_t step, int64_t floor,
                      char *server, size_t cap, int64_t *max_id,
                      int64_t *db_step, char **cause)
{
    long long id = 0;
    enum store_result r;

    if (server[0] != '\0' && sscanf(server, "server_id %lld", &id) != 1)
        id = 0;
    r = store_mysql_alloc_block(s, want, tag, step, floor, &id, max_id,
                                db_step, cause);
    if (r == STORE_OK || r == STORE_REFUSED)
        snprintf(server, cap, "server_id %lld", id);
    return r;
}

const struct store_member_ops store_mysql_member_ops = {
    .kind = "mysql",
    .key = "segment.mysql.urls",
    .open_url = store_mysql_open_url,
    .redacted = db_mysql_url_redacted,
    .meta_get = store_mysql_meta_get,
    .alloc_block = my_member_alloc_block,
    .prepare_tables = store_mysql_prepare_tables,
    .freeze = store_mysql_freeze,
    .switch_set = store_mysql_switch,
    .members = store_mysql_members,
    .top_push = store_mysql_top_push,
    .serial_copy = store_mysql_serial_copy,
    .serial_alloc_in_set = store_mysql_serial_alloc_in_set,
    .ping = store_mysql_ping,
};
