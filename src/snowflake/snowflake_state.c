/* snowflake_state.c: what snowflake mode shows of itself: the state page
 * (GET /snowflake/state), health (/health's snowflake member) and the
 * Prometheus metrics; relaxed reads of the generator's state
 * (snowflake_internal.h), no lock on the request path. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snowflake.h"
#include "snowflake_internal.h"
#include "util.h"

static const char *
sf_status_code(struct snowflake *sf, int64_t now)
{
    switch (atomic_load(&sf->status)) {
    case SF_ST_UNKNOWN:
        return "worker_id_unknown";
    case SF_ST_LOST:
        return "worker_id_lost";
    case SF_ST_LEASE:
        return "worker_lease_expired";
    case SF_ST_CLOCK:
        return "clock_offset";
    default:
        break;
    }
    if (now <= atomic_load(&sf->gate))
        return "fence_not_passed";
    if (atomic_load(&sf->hw) - now > sf->max_backward_ms)
        return "clock_behind";
    switch (atomic_load(&sf->persist_failing)) {
    case 0:
        return NULL;
    case SNOWFLAKE_PERSIST_UNCONFIRMED:
        return "fence_unconfirmed";
    default:
        return "fence_pending";
    }
}

void
snowflake_identity_json(struct snowflake *sf, struct sbuf *out)
{
    int64_t worker = atomic_load(&sf->worker_id);

    sbuf_puts(out, "\"worker_id\":");
    if (worker >= 0)
        sbuf_printf(out, "%" PRId64, worker);
    else
        sbuf_puts(out, "null");
    if (sf->layout.datacenter_bits > 0)
        sbuf_printf(out, ",\"datacenter_id\":%" PRId64, sf->datacenter_id);
    sbuf_printf(out, ",\"worker_id_min\":%" PRId64 ",\"worker_id_max\":%"
                PRId64, sf->worker_min, sf->worker_max);
}

void
snowflake_state_json(struct snowflake *sf, struct sbuf *out)
{
    const struct sfcodec_layout *l = &sf->layout;
    int64_t now = sf_now(sf);
    int64_t last = sf_last_ms(sf), fence = atomic_load(&sf->fence);
    const char *code = sf_status_code(sf, now);
    char t1[40], t2[40], t3[40];

    util_format_utc_ms(last, t1, sizeof t1);
    util_format_utc_ms(fence, t2, sizeof t2);
    util_format_utc_ms(sfcodec_layout_end_ms(l), t3, sizeof t3);
    sbuf_puts(out, "{");
    snowflake_identity_json(sf, out);
    sbuf_puts(out, ",\"source\":");
    sbuf_json_str(out, sf->backend.source != NULL ?
                       sf->backend.source(sf->backend.arg) : "static");
    sbuf_puts(out, ",\"status\":");
    sbuf_json_str(out, code != NULL ? code : "ok");
    sbuf_printf(out, ",\"layout\":{\"epoch_ms\":%" PRId64
                ",\"timestamp_bits\":%d,\"datacenter_bits\":%d,"
                "\"worker_bits\":%d,\"sequence_bits\":%d,"
                "\"max_worker_id\":%" PRIu64 ",\"max_datacenter_id\":%" PRIu64
                ",\"ids_per_ms\":%" PRIu64 ",\"runs_out\":\"%s\"}",
                l->epoch_ms, l->timestamp_bits, l->datacenter_bits,
                l->worker_bits, l->sequence_bits, l->max_worker,
                l->max_datacenter, l->max_sequence + 1, t3);
    sbuf_printf(out, ",\"clock_ms\":%" PRId64 ",\"last_timestamp\":%" PRId64
                ",\"last_time\":\"%s\",\"fence\":%" PRId64
                ",\"fence_time\":\"%s\",\"start_fence\":%" PRId64
                ",\"max_backward_ms\":%" PRId64 ",\"max_borrow_ms\":%" PRId64
                ",\"fence_step_ms\":%" PRId64 ",\"sequence_random\":%s",
                now, last, t1, fence, t2, atomic_load(&sf->gate),
                sf->max_backward_ms, sf->max_borrow_ms, sf->fence_step_ms,
                sf->seq_random ? "true" : "false");
    if (sf->backend.state_json != NULL)
        sf->backend.state_json(sf->backend.arg, out);
    sbuf_puts(out, "}");
}

int
snowflake_health(struct snowflake *sf, char **reason)
{
    int64_t now = sf_now(sf);
    const char *code = sf_status_code(sf, now);

    if (code == NULL)
        return 0;
    if (strcmp(code, "fence_not_passed") == 0)
        *reason = xasprintf("snowflake: %s (the clock is %" PRId64 " ms "
                            "behind the persisted fence)", code,
                            atomic_load(&sf->gate) - now + 1);
    else if (strcmp(code, "clock_behind") == 0)
        *reason = xasprintf("snowflake: %s (%" PRId64 " ms, limit %" PRId64
                            ")", code, atomic_load(&sf->hw) - now,
                            sf->max_backward_ms);
    else
        *reason = xasprintf("snowflake: %s", code);
    return -1;
}

void
snowflake_metrics(struct snowflake *sf, struct sbuf *out)
{
    int64_t now = sf_now(sf), last = sf_last_ms(sf);
    int64_t fence = atomic_load(&sf->fence);
    const char *code = sf_status_code(sf, now);
    uint64_t cum = 0;

    sbuf_metric_u64(out, "leafd_snowflake_ids_total", "counter",
                    "Snowflake IDs issued.", atomic_load(&sf->ids_total));
    sbuf_metric_u64(out, "leafd_snowflake_requests_total", "counter",
                    "Snowflake requests answered with IDs.",
                    atomic_load(&sf->requests_total));
    sbuf_metric_head(out, "leafd_snowflake_not_served_total", "counter",
                     "Requests that got a wait or a refusal, by code.");
    for (int c = 0; c < SF_NCODES; c++) {
        for (int k = 0; k < 2; k++) {
            uint64_t v = atomic_load(&sf->answers[c][k]);
            if (v > 0)
                sbuf_printf(out, "leafd_snowflake_not_served_total{code=\"%s\","
                            "answer=\"%s\"} %" PRIu64 "\n", sf_code_names[c],
                            k ? "refuse" : "wait", v);
        }
    }
    sbuf_metric_head(out, "leafd_snowflake_clock_backward_ms", "histogram",
                     "Steps back of the wall clock seen by the generator, in "
                     "ms.");
    for (size_t i = 0; i < SF_NBW; i++) {
        cum += atomic_load(&sf->bw_buckets[i]);
        sbuf_printf(out, "leafd_snowflake_clock_backward_ms_bucket{le=\"%"
                    PRId64 "\"} %" PRIu64 "\n", sf_bw_bounds[i], cum);
    }
    sbuf_printf(out, "leafd_snowflake_clock_backward_ms_bucket{le=\"+Inf\"} %"
                PRIu64 "\n", atomic_load(&sf->bw_events));
    sbuf_printf(out, "leafd_snowflake_clock_backward_ms_sum %" PRIu64 "\n",
                atomic_load(&sf->bw_sum_ms));
    sbuf_printf(out, "leafd_snowflake_clock_backward_ms_count %" PRIu64 "\n",
                atomic_load(&sf->bw_events));
    sbuf_metric_u64(out, "leafd_snowflake_borrowed_ms_total", "counter",
                    "Ms the logical clock moved ahead of the wall clock "
                    "(sequence overflow).", atomic_load(&sf->borrowed_ms));
    sbuf_metric_i64(out, "leafd_snowflake_ahead_ms", "gauge",
                    "How far the last timestamp issued is ahead of the wall "
                    "clock.", last > now ? last - now : 0);
    sbuf_metric_i64(out, "leafd_snowflake_fence_ms", "gauge",
                    "The persisted fence (ms since 1970): no ID has a later "
                    "timestamp.", fence);
    sbuf_metric_i64(out, "leafd_snowflake_fence_ahead_ms", "gauge",
                    "Persisted fence minus the wall clock.", fence - now);
    sbuf_metric_u64(out, "leafd_snowflake_fence_writes_total", "counter",
                    "Fences persisted.", atomic_load(&sf->fence_writes));
    sbuf_metric_u64(out, "leafd_snowflake_fence_failures_total", "counter",
                    "Failed attempts to persist a fence.",
                    atomic_load(&sf->persist_failures));
    sbuf_metric_i64(out, "leafd_snowflake_worker_id", "gauge",
                    "The worker ID (-1 unknown).",
                    atomic_load(&sf->worker_id));
    sbuf_metric_i64(out, "leafd_snowflake_up", "gauge",
                    "1 when IDs can be issued now.", code == NULL);
    if (sf->backend.metrics != NULL)
        sf->backend.metrics(sf->backend.arg, out);
}
