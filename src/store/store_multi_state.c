/* store_multi_state.c: what several databases show of themselves: the
 * "databases" member of /health and /db, and the leafd_segment_db_*
 * metrics, from a snapshot of store_multi.c's state (store_multi_status).
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
