/* store_multi_state.c: what several databases show of themselves: the
 * "databases" member of /health and /db, and the leafd_segment_db_*
 * metrics, from a snapshot of store_multi.c's state (store_multi_status);
 * and the words a member's load refuses with (store_meta_refusal), one text
 * for every kind.
 */
#include <inttypes.h>
#include <stdio.h>

#include "store.h"
#include "store_impl.h"
#include "util.h"

void
store_multi_status_json(struct sbuf *b)
{
    struct multi_db_status st[STORE_MULTI_MAX];
    int n = store_multi_status(st, STORE_MULTI_MAX);

    sbuf_puts(b, "[");
    for (int i = 0; i < n; i++) {
        const struct multi_db_status *d = &st[i];

        sbuf_printf(b, "%s{\"index\":%d,\"where\":", i ? "," : "", i);
        sbuf_json_str(b, d->where);
        sbuf_printf(b, ",\"up\":%s,\"preferred\":%s,\"loads\":%" PRIu64
                    ",\"failures\":%" PRIu64 ",\"failovers_to\":%" PRIu64,
                    d->up ? "true" : "false", d->preferred ? "true" : "false",
                    d->loads, d->failures, d->failovers_to);
        if (!d->up) {
            sbuf_printf(b, ",\"down_for_ms\":%" PRId64 ",\"error\":",
                        util_wall_ms() - d->down_since_ms);
            sbuf_json_str(b, d->error);
        }
        sbuf_puts(b, "}");
    }
    sbuf_puts(b, "]");
}

void
store_multi_metrics(struct sbuf *b)
{
    struct multi_db_status st[STORE_MULTI_MAX];
    int n = store_multi_status(st, STORE_MULTI_MAX);

    if (n == 0)
        return;
    sbuf_metric_head(b, "leafd_segment_db_up", "gauge",
                     "1 while the database is usable for loads.");
    for (int i = 0; i < n; i++)
        sbuf_printf(b, "leafd_segment_db_up{db=\"%d\"} %d\n", i, st[i].up);
    sbuf_metric_head(b, "leafd_segment_db_loads_total", "counter", NULL);
    for (int i = 0; i < n; i++)
        sbuf_printf(b, "leafd_segment_db_loads_total{db=\"%d\"} %" PRIu64 "\n",
                    i, st[i].loads);
    sbuf_metric_head(b, "leafd_segment_db_failures_total", "counter", NULL);
    for (int i = 0; i < n; i++)
        sbuf_printf(b, "leafd_segment_db_failures_total{db=\"%d\"} %" PRIu64 "\n",
                    i, st[i].failures);
    sbuf_metric_head(b, "leafd_segment_db_failovers_total", "counter",
                     "Loads that succeeded on this database after another "
                     "failed.");
    for (int i = 0; i < n; i++)
        sbuf_printf(b, "leafd_segment_db_failovers_total{db=\"%d\"} %" PRIu64 "\n",
                    i, st[i].failovers_to);
}

void
store_meta_refusal(char **cause, const char *kind, const char *where,
                   const struct multi_meta *got, const struct multi_meta *want,
                   const char *key)
{
    if (got == NULL)
        store_set_cause(cause, "%s %s: no leafd_multi_db row: not prepared by "
                        "leafd multi-db init", kind, where);
    else if (got->frozen)
        store_set_cause(cause, "%s %s: frozen by leafd multi-db init (the set "
                        "is being changed); loads resume after", kind, where);
    else
        store_set_cause(cause, "%s %s is database %lld of %lld (block %lld "
                        "from block %lld), this node expects %lld of %lld "
                        "(block %lld from %lld): the set was changed; restart "
                        "this node with the new %s", kind, where,
                        (long long)got->db_index, (long long)got->db_count,
                        (long long)got->block_size,
                        (long long)got->since_block, (long long)want->db_index,
                        (long long)want->db_count, (long long)want->block_size,
                        (long long)want->since_block, key);
}
