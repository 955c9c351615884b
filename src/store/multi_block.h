/* multi_block.h: the pure parts of segment mode over several databases
 * (store_multi.c): which IDs a database may hand out, and the URL list.
 * No I/O, no globals; any thread. Fuzzed (fuzz/fuzz_multi_block.c).
 */
#ifndef LEAFD_MULTI_BLOCK_H
#define LEAFD_MULTI_BLOCK_H

#include <stdint.h>

#include "config.h"   /* CONFIG_MULTI_MIXED_REFUSAL */

/* A database's place in a set (its leafd_multi_db row): block k of
 * block_size IDs belongs to database k mod db_count, for k >= since_block. */
struct multi_meta {
    int64_t db_index, db_count, block_size, since_block;
    int     frozen;
};

/* A member of a set as one database records it (leafd_multi_member): its
 * identity (random, made by the first multi-db init that saw it), its place
 * in the set (-1: not a member now), where it was, and the highest max_id
 * it is known to have handed out (raised after every load on it, in every
 * database up then). self: the row is this database's own identity. */
struct multi_member {
    int64_t db_id, top;
    int     self, pos;
    char    where[160];
};

/* The first member of the set recorded in rows[0, n) (pos >= 0) whose
 * db_id is none of ids[0, nids): a member the new list lacks. NULL when
 * every member is there. */
const struct multi_member *store_multi_missing(const struct multi_member *rows,
                                               size_t n, const int64_t *ids,
                                               int nids);

/* The first ID of a range of step IDs that database mm->db_index may hand
 * out at or above from: >= max(from, 1, since_block * block_size), inside
 * one block it owns, the whole range inside that block. -1 when none fits
 * below INT64_MAX or step > block_size. */
int64_t store_block_start(const struct multi_meta *mm, int64_t from,
                          int64_t step);

/* 1 when database mm->db_index may hand out [start, start + step): start
 * >= 1, the whole range inside one block k >= since_block with k mod
 * db_count = db_index. Every range store_block_start gives passes; the
 * multi store asserts it of every range a database hands back. */
int store_block_owns(const struct multi_meta *mm, int64_t start,
                     int64_t step);

/* Split segment.mysql.urls at commas (blanks around each URL dropped) into
 * urls[] (malloc'd). Returns the count, or -1 with *cause (empty URL,
 * trailing comma, more than max, a PostgreSQL URL). */
int store_multi_split(const char *list, char **urls, int max, char **cause);

/* store_multi_split of segment.mysql.urls (pg 0) or
 * segment.postgresql.urls (pg 1): there each URL is a postgresql:// or
 * postgres:// URI, and a comma ends one only when the next begins (a
 * URI's host list, h1,h2, has commas of its own). */
int store_multi_split_kind(const char *list, int pg, char **urls, int max,
                           char **cause);

/* 1 when url is a PostgreSQL connection string (a postgresql:// or
 * postgres:// URI, or libpq's keyword form: key=value without "://"). A
 * set's members are all of one kind (CONFIG_MULTI_MIXED_REFUSAL). */
int store_multi_is_pg(const char *url);

#endif
