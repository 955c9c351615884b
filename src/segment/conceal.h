/* conceal.h: concealed segment tags (segment.conceal): IDs whose
 * differences say nothing about how many were issued.
 *
 * A concealed tag's counter (its leaf_alloc row, as for any tag) is cut
 * into blocks of 2^bits counters (segment.conceal_bits, 20..30). A load
 * takes one whole block, aligned, for this node alone (conceal_block), and
 * the counter c of block B = c >> bits is issued as the ID
 *
 *     B << bits | FF1(K, "tag:<tag>:<B>", c mod 2^bits)
 *
 * (radix 2, bits digits; docs/id-kinds.md, "Concealed segment tags"). So
 * the IDs of block B are exactly the counters of block B, permuted: a node
 * that owns the block is the only one to issue any of them, whatever key,
 * bits or plain service other nodes run. Key records (conceal_check) keep
 * the key of the tag's blocks and refuse a node whose key differs. A
 * record is a row "<tag>:k<16 hex>" with max_id = the first counter (ID)
 * of that key's blocks and step = its bits. A node writes its key's
 * intent row before it reads the row's max_id for the record, and every
 * node reads the records again after it takes a block (loader.c,
 * run_load_conceal), so a block a node serves is never recorded under
 * another key.
 *
 * Ownership: conceal_new's object is freed by conceal_free (NULL: no-op),
 * after every thread stopped using it. Thread-safety: conceal_find,
 * conceal_ids, conceal_id and conceal_reveal may be called from any number
 * of threads at once (each thread enciphers with its own copy of the key);
 * the per-tag state (refusal, key history) is under the tag's lock.
 */
#ifndef LEAFD_CONCEAL_H
#define LEAFD_CONCEAL_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "util.h"

struct config;
struct conceal;
struct conceal_tag;

#define CONCEAL_BITS_MIN 20          /* 2^20 >= FF1's domain of 10^6 */
#define CONCEAL_BITS_MAX 30          /* two blocks fit one store_alloc step */
#define CONCEAL_TAGS_MAX 64
/* A key record's row: "<tag>:k<16 hex>", this description; the intent
 * written before it: "<tag>:k<16 hex>:p". */
#define CONCEAL_RECORD_SUFFIX 20
#define CONCEAL_TAG_MAX (TAG_MAX - CONCEAL_RECORD_SUFFIX)
#define CONCEAL_DESCRIPTION "leafd concealed tag key"
#define CONCEAL_INTENT_DESCRIPTION "leafd concealed tag key intent"
#define CONCEAL_HIST_MAX 16          /* key records kept per tag */

/* The concealed tags of cfg (segment.conceal, segment.conceal_key_file,
 * segment.conceal_bits). NULL with *cause NULL when no tag is concealed;
 * NULL with *cause on a configuration error (a bad tag, a key file
 * keyfile_read refuses). */
struct conceal *conceal_new(const struct config *cfg, char **cause);
void conceal_free(struct conceal *c);

unsigned conceal_bits(const struct conceal *c);
size_t   conceal_count(const struct conceal *c);
/* "k" and the first 8 bytes of the current key's check value in hex. */
const char *conceal_key_name(const struct conceal *c);

/* The concealed tag of that name, or NULL (also when c is NULL). */
struct conceal_tag *conceal_find(struct conceal *c, const char *tag, size_t len);
const char *conceal_tag_name(const struct conceal_tag *t);
/* The i-th concealed tag (i < conceal_count). */
struct conceal_tag *conceal_tag_at(struct conceal *c, size_t i);

/* Counters of t to IDs, in place (every counter must be a block this node
 * owns). conceal_id: one (tests and the fuzzer; src/ batches). */
void     conceal_ids(struct conceal *c, struct conceal_tag *t, uint64_t *v, size_t n);
uint64_t conceal_id(struct conceal *c, struct conceal_tag *t, uint64_t counter);

/* What an ID of t hides. */
struct conceal_reveal {
    int      concealed;   /* 0: before the tag's first key record (issued
                             in plain: counter == id) */
    unsigned bits;        /* the block size of the key that made it */
    uint64_t block, offset, counter;
    char     key[20];     /* the key's name ("k" + 16 hex), "" when plain */
};
/* 0, or -1 with *why (static text) when the block's key is not in this
 * node's key file (its name in out->key). */
int conceal_reveal(struct conceal *c, struct conceal_tag *t, uint64_t id,
                   struct conceal_reveal *out, const char **why);

/* ---- the loader's side ---- */

/* The row names of this node's key record for t and of its intent
 * (TAG_MAX + 1 bytes each). */
void conceal_record_name(const struct conceal *c, const struct conceal_tag *t,
                         char *out);
void conceal_intent_name(const struct conceal *c, const struct conceal_tag *t,
                         char *out);
/* 1 when row is a key record or an intent (its description): never a
 * segment tag. */
int conceal_row_is_record(const struct store_row *row);

enum conceal_verdict {
    CONCEAL_OK,          /* the tag's blocks are under this node's key */
    CONCEAL_RECORD,      /* OK once this node's record is written
                            (a new tag, a rotation from a key the key file
                            lists as retired, or this key's intent without
                            its record) */
    CONCEAL_PENDING,     /* another key's intent without its record: a node
                            is recording it; ask again shortly (*why) */
    CONCEAL_REFUSED,     /* another key or bits: *why says which, what to do */
};
/* Decide from the table's rows (all of them, or the tag's records) whether
 * this node may take a block of t; keeps the tag's key history (for
 * conceal_reveal). why: cap bytes. now_ms: a monotonic clock: another
 * key's intent still without its record CONCEAL_ORPHAN_MS after this node
 * first saw it is taken for one whose node died (or was refused) between
 * the two rows, and no longer holds this node up. */
#define CONCEAL_ORPHAN_MS 60000
enum conceal_verdict conceal_check(struct conceal *c, struct conceal_tag *t,
                                   const struct store_row *rows, size_t n,
                                   int64_t now_ms, char *why, size_t cap);
/* Every row of a refresh: the key histories of all tags. */
void conceal_refresh(struct conceal *c, const struct store_row *rows, size_t n);
/* This node's record was written: its blocks start at counter first. */
void conceal_recorded(struct conceal *c, struct conceal_tag *t, int64_t first);

/* The aligned whole block inside the range [max_id - step, max_id) the
 * store gave: 0 with *block, or -1 when the range holds none (then ask
 * again with conceal_step(c, max_id)). */
int     conceal_block(const struct conceal *c, int64_t max_id, int64_t step,
                      int64_t *block);
/* The step that takes the next whole block after a row at max_id. */
int64_t conceal_step(const struct conceal *c, int64_t max_id);

/* A refusal kept for requests (why NULL: cleared), and read. */
void conceal_set_refused(struct conceal_tag *t, const char *why);
int  conceal_refused(struct conceal_tag *t, char *why, size_t cap);

/* For tests: the FF1 tweak of block b of t ("tag:<tag>:<b>"). Returns its
 * length; out holds TAG_MAX + 32 bytes. */
size_t conceal_tweak(const struct conceal_tag *t, uint64_t block, char *out);

#endif
