/* api_pages.c: the operator pages: /health, /metrics, /cache, /db and
 * /snowflake/state (the routing and the admin-token check are in
 * api_route.c). None is on a hot path:
 * they build their answer in an sbuf, and may take the loader's lock.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_handlers.h"
#include "config.h"
#include "http.h"
#include "loader.h"
#include "segment.h"
#include "serial.h"
#include "snowflake.h"
#include "store.h"
#include "util.h"

static void
cache_tag(const struct segment_tag_info *in, void *arg)
{
    struct sbuf *b = arg;

    sbuf_puts(b, b->p[b->len - 1] == '[' ? "{\"key\":" : ",{\"key\":");
    sbuf_json_str(b, in->name);
    sbuf_printf(b, ",\"init_ok\":%s,\"gone\":%s,\"pos\":%d,\"next_ready\":%s,"
                   "\"loading\":%s,\"step\":%lld,\"min_step\":%lld,\"loads\":%lld,"
                   "\"issued\":%lld,\"available\":%lld,\"leases\":{\"count\":%lld,"
                   "\"ids_from_buffers\":%lld,\"ids_from_db\":%lld},\"segments\":[",
                in->init_ok ? "true" : "false", in->gone ? "true" : "false",
                in->cur, in->next_ready ? "true" : "false",
                in->loading ? "true" : "false", (long long)in->step,
                (long long)in->min_step, (long long)in->loads,
                (long long)in->issued, (long long)in->available,
                (long long)in->leases, (long long)in->leased_buf,
                (long long)in->leased_db);
    for (int i = 0; i < 2; i++)
        sbuf_printf(b, "%s{\"value\":\"%lld\",\"max\":\"%lld\",\"step\":%lld,"
                       "\"idle\":%lld}",
                    i ? "," : "", (long long)in->slot[i].value,
                    (long long)in->slot[i].max, (long long)in->slot[i].step,
                    (long long)(in->slot[i].max - in->slot[i].value));
    sbuf_puts(b, "]}");
}

void
api_page_cache(struct api *a, struct http_conn *c)
{
    struct sbuf b = { 0 };

    if (a->segs == NULL) {
        api_reply_error(c, R_CACHE, 404, "mode_disabled", NULL, "segment mode is off on this node");
        return;
    }
    sbuf_puts(&b, "{\"tags\":[");
    segments_foreach(a->segs, cache_tag, &b);
    sbuf_puts(&b, "]}\n");
    api_reply_sbuf(c, R_CACHE, 200, "application/json", &b);
}

void
api_page_db(struct api *a, struct http_conn *c, struct http_request *req)
{
    struct api_state *st = (struct api_state *)req->scratch;
    struct loader_status ls;
    struct sbuf b = { 0 };

    if (a->segs == NULL) {
        api_reply_error(c, R_DB, 404, "mode_disabled", NULL, "segment mode is off on this node");
        return;
    }
    /* Read the table afresh on the loader's thread, then answer. */
    if (!req->retry && !req->timed_out) {
        st->refresh_gen = loader_refresh_now(a->loader, 1);
        http_park(c, (int)a->cfg->wait_ms, API_DB_KEY);
        return;
    }
    loader_status(a->loader, &ls);
    if (ls.refresh_gen < st->refresh_gen && !req->timed_out) {
        http_park(c, (int)((req->start_us + a->cfg->wait_ms * 1000 - util_mono_us()) / 1000 + 1),
                  API_DB_KEY);
        return;
    }
    sbuf_printf(&b, "{\"store\":\"%s\",\"fresh\":%s,\"read_at_ms\":%lld,\"rows\":",
                ls.store, ls.refresh_gen >= st->refresh_gen ? "true" : "false",
                (long long)ls.refreshed_ms);
    loader_rows_json(a->loader, &b);
    if (store_multi_count() > 0) {
        sbuf_puts(&b, ",\"databases\":");
        store_multi_status_json(&b);
    }
    sbuf_puts(&b, "}\n");
    api_reply_sbuf(c, R_DB, 200, "application/json", &b);
}

struct health_scan {
    int64_t dry;        /* tags in use with no ID left */
    char    first[TAG_MAX + 1];
};

static void
health_tag(const struct segment_tag_info *in, void *arg)
{
    struct health_scan *h = arg;

    if (in->init_ok && !in->gone && in->available == 0) {
        if (h->dry++ == 0)
            snprintf(h->first, sizeof h->first, "%s", in->name);
    }
}

int
api_health(struct api *a, struct sbuf *b)
{
    int ok = 1, degraded = 0;
    struct sbuf reasons = { 0 };

    sbuf_puts(b, "{");
    if (a->segs != NULL) {
        struct loader_status ls;
        struct health_scan h = { 0 };
        char why[1024];

        loader_status(a->loader, &ls);
        segments_foreach(a->segs, health_tag, &h);
        sbuf_printf(b, "\"segment\":{\"enabled\":true,\"store\":\"%s\",\"db\":\"%s\","
                       "\"tags\":%zu,\"tags_without_ids\":%lld",
                    ls.store, ls.refusal[0] ? "refused" : ls.db_up ? "up" : "down",
                    segments_count(a->segs),
                    (long long)h.dry);
        if (!ls.db_up && ls.refusal[0] == '\0') {
            sbuf_printf(b, ",\"db_down_for_ms\":%lld,\"db_error\":",
                        (long long)(util_wall_ms() - ls.down_since_ms));
            sbuf_json_str(b, ls.last_error);
            if (h.dry > 0) {
                ok = 0;
                sbuf_printf(&reasons, "segment: database unreachable and %lld tag(s) "
                                      "(e.g. %s) have no buffered IDs; ",
                            (long long)h.dry, h.first);
            } else {
                degraded = 1;
                sbuf_printf(&reasons, "segment: database unreachable, serving from "
                                      "buffers; ");
            }
        }
        if (store_multi_count() > 0) {
            sbuf_puts(b, ",\"databases\":");
            store_multi_status_json(b);
        }
        if (api_conceal_health(a, b, &reasons))
            degraded = 1;
        sbuf_puts(b, ",");
        store_repl_status_json(b);
        switch (store_repl_health(why, sizeof why)) {
        case 2:
            if (h.dry > 0)
                ok = 0;
            else
                degraded = 1;
            sbuf_printf(&reasons, "segment: %s; ", why);
            break;
        case 1:
            degraded = 1;
            sbuf_printf(&reasons, "segment: %s; ", why);
            break;
        default:
            break;
        }
        sbuf_puts(b, "},");
    } else {
        sbuf_puts(b, "\"segment\":{\"enabled\":false},");
    }
    if (a->sf != NULL) {
        char *why = NULL;
        sbuf_puts(b, "\"snowflake\":{\"enabled\":true,");
        snowflake_identity_json(a->sf, b);
        if (snowflake_health(a->sf, &why) == 0) {
            sbuf_puts(b, ",\"status\":\"ok\"},");
        } else {
            ok = 0;
            sbuf_puts(b, ",\"status\":\"unavailable\",\"reason\":");
            sbuf_json_str(b, why ? why : "?");
            sbuf_puts(b, "},");
            sbuf_printf(&reasons, "snowflake: %s; ", why ? why : "?");
            free(why);
        }
    } else {
        sbuf_puts(b, "\"snowflake\":{\"enabled\":false},");
    }
    switch (api_serial_health(a, b, &reasons)) {
    case 2: ok = 0; break;
    case 1: degraded = 1; break;
    default: break;
    }
    sbuf_printf(b, "\"uptime_ms\":%lld,\"status\":\"%s\"",
                (long long)(util_wall_ms() - a->started_ms),
                !ok ? "unavailable" : degraded ? "degraded" : "ok");
    if (reasons.len > 0) {
        reasons.len -= 2;          /* drop the last "; " */
        reasons.p[reasons.len] = '\0';
        sbuf_puts(b, ",\"reason\":");
        sbuf_json_str(b, reasons.p);
    }
    sbuf_puts(b, "}\n");
    sbuf_free(&reasons);
    return ok ? 200 : 503;
}

static void
metrics_tag(const struct segment_tag_info *in, void *arg)
{
    struct sbuf *b = arg;

    sbuf_printf(b, "leafd_segment_ids_issued_total{biz_tag=\"%s\"} %lld\n"
                   "leafd_segment_step{biz_tag=\"%s\"} %lld\n"
                   "leafd_segment_ids_available{biz_tag=\"%s\"} %lld\n"
                   "leafd_segment_next_ready{biz_tag=\"%s\"} %d\n"
                   "leafd_segment_loading{biz_tag=\"%s\"} %d\n"
                   "leafd_segment_ids_leased_total{biz_tag=\"%s\",source=\"buffer\"} %lld\n"
                   "leafd_segment_ids_leased_total{biz_tag=\"%s\",source=\"db\"} %lld\n"
                   "leafd_segment_leases_total{biz_tag=\"%s\"} %lld\n",
                in->name, (long long)in->issued, in->name, (long long)in->step,
                in->name, (long long)in->available, in->name, in->next_ready,
                in->name, in->loading, in->name, (long long)in->leased_buf,
                in->name, (long long)in->leased_db, in->name, (long long)in->leases);
}

/* Sum the per-thread key tables by name (first seen first). */
static void
leaf_keys_metrics(struct api *a, struct sbuf *b)
{
    uint64_t other = 0;

    for (int t = 0; t <= a->nthreads; t++) {
        const struct api_thread *at = &a->threads[t];
        uint32_t nk = atomic_load_explicit(&at->nkeys, memory_order_acquire);

        other += atomic_load_explicit(&at->other_keys, memory_order_relaxed);
        for (uint32_t i = 0; i < nk; i++) {
            const struct leaf_key *k = &at->leaf_keys[i];
            uint64_t sum = 0;
            int seen = 0;

            /* Printed already under an earlier thread? */
            for (int u = 0; u < t && !seen; u++) {
                uint32_t un = atomic_load_explicit(&a->threads[u].nkeys,
                                                   memory_order_acquire);
                for (uint32_t j = 0; j < un && !seen; j++)
                    seen = a->threads[u].leaf_keys[j].hash == k->hash &&
                           strcmp(a->threads[u].leaf_keys[j].name, k->name) == 0;
            }
            if (seen)
                continue;
            for (int u = t; u <= a->nthreads; u++) {
                uint32_t un = atomic_load_explicit(&a->threads[u].nkeys,
                                                   memory_order_acquire);
                for (uint32_t j = 0; j < un; j++)
                    if (a->threads[u].leaf_keys[j].hash == k->hash &&
                        strcmp(a->threads[u].leaf_keys[j].name, k->name) == 0)
                        sum += atomic_load_explicit(&a->threads[u].leaf_keys[j].count,
                                                    memory_order_relaxed);
            }
            sbuf_printf(b, "leafd_leaf_snowflake_requests_total{key=\"%s\"} %llu\n",
                        k->name, (unsigned long long)sum);
        }
    }
    if (other > 0)
        sbuf_printf(b, "leafd_leaf_snowflake_requests_total{key=\"other\"} %llu\n",
                    (unsigned long long)other);
}

void
api_page_metrics(struct api *a, struct http_conn *c)
{
    struct sbuf b = { 0 };
    struct http_stats hs;

    sbuf_metric_head(&b, "leafd_http_requests_total", "counter",
                     "Requests by route and status.");
    for (int r = 0; r < R_COUNT; r++) {
        for (size_t s = 0; s <= NSTATUS; s++) {
            uint64_t sum = 0;
            for (int t = 0; t <= a->nthreads; t++)
                sum += atomic_load_explicit(&a->threads[t].requests[r][s],
                                            memory_order_relaxed);
            if (sum == 0)
                continue;
            if (s < NSTATUS)
                sbuf_printf(&b, "leafd_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                            api_routes[r].name, status_codes[s], (unsigned long long)sum);
            else
                sbuf_printf(&b, "leafd_http_requests_total{route=\"%s\",status=\"other\"} %llu\n",
                            api_routes[r].name, (unsigned long long)sum);
        }
    }
    if (a->server != NULL) {
        http_server_stats(a->server, &hs);
        sbuf_metric_u64(&b, "leafd_http_connections", "gauge",
                        NULL, hs.connections_open);
        sbuf_metric_u64(&b, "leafd_http_connections_total", "counter",
                        NULL, hs.connections_total);
        sbuf_metric_u64(&b, "leafd_http_connections_rejected_total", "counter",
                        NULL, hs.connections_rejected);
        sbuf_metric_u64(&b, "leafd_http_requests_waiting", "gauge",
                        NULL, hs.requests_parked);
        if (http_server_resp_port(a->server) >= 0) {
            sbuf_metric_u64(&b, "leafd_resp_connections", "gauge",
                            "RESP connections open (also counted in "
                            "leafd_http_connections).", hs.resp_open);
            sbuf_metric_u64(&b, "leafd_resp_commands_total", "counter",
                            NULL, hs.resp_commands);
        }
        sbuf_metric_u64(&b, "leafd_h2_connections", "gauge",
                        "HTTP/2 connections open, h2c and gRPC (also counted "
                        "in leafd_http_connections).", hs.h2_open);
        sbuf_metric_u64(&b, "leafd_h2_streams_total", "counter",
                        NULL, hs.h2_streams);
        if (http_server_tls_port(a->server, HTTP_TLS_HTTP) >= 0 ||
            http_server_tls_port(a->server, HTTP_TLS_RESP) >= 0 ||
            http_server_tls_port(a->server, HTTP_TLS_MC) >= 0 ||
            http_server_tls_port(a->server, HTTP_TLS_GRPC) >= 0) {
            sbuf_metric_head(&b, "leafd_tls_handshakes_total", "counter",
                             "TLS handshakes done, and failed (refused, "
                             "broken or not done within "
                             "tls.handshake_timeout_ms).");
            sbuf_printf(&b, "leafd_tls_handshakes_total{result=\"ok\"} %llu\n"
                            "leafd_tls_handshakes_total{result=\"failed\"} %llu\n",
                        (unsigned long long)hs.tls_handshakes,
                        (unsigned long long)hs.tls_failures);
            sbuf_metric_i64(&b, "leafd_tls_cert_not_after_seconds", "gauge",
                            "The notAfter of tls.cert_file's certificate "
                            "(Unix seconds; after a reload, the new one's).",
                            hs.tls_not_after);
        }
    }
    if (a->segs != NULL) {
        sbuf_metric_u64(&b, "leafd_segment_tags", "gauge",
                        NULL, segments_count(a->segs));
        sbuf_metric_u64(&b, "leafd_segment_unknown_tags_cached", "gauge",
                        NULL, segments_negative_count(a->segs));
        /* The heads of the per-tag lines metrics_tag writes. */
        sbuf_metric_head(&b, "leafd_segment_ids_issued_total", "counter",
                         "IDs served by tag (leases apart).");
        sbuf_metric_head(&b, "leafd_segment_step", "gauge", NULL);
        sbuf_metric_head(&b, "leafd_segment_ids_available", "gauge", NULL);
        sbuf_metric_head(&b, "leafd_segment_next_ready", "gauge", NULL);
        sbuf_metric_head(&b, "leafd_segment_loading", "gauge", NULL);
        sbuf_metric_head(&b, "leafd_segment_ids_leased_total", "counter",
                         "IDs leased, from the buffers or straight from the "
                         "table.");
        sbuf_metric_head(&b, "leafd_segment_leases_total", "counter", NULL);
        segments_foreach(a->segs, metrics_tag, &b);
        loader_metrics(a->loader, &b);
        store_multi_metrics(&b);
        store_repl_metrics(&b);
        api_conceal_metrics(a, &b);
    }
    sbuf_metric_head(&b, "leafd_http_503_total", "counter",
                     "503 answers by route and error code (snowflake refusals "
                     "also in leafd_snowflake_not_served_total).");
    for (int r = 0; r < R_COUNT; r++)
        for (size_t k = 0; k < NCODES_503; k++) {
            uint64_t sum = 0;

            for (int t = 0; t <= a->nthreads; t++)
                sum += atomic_load_explicit(&a->threads[t].unavailable[r][k],
                                            memory_order_relaxed);
            if (sum > 0)
                sbuf_printf(&b, "leafd_http_503_total{route=\"%s\",code=\"%s\"} %llu\n",
                            api_routes[r].name, codes_503[k], (unsigned long long)sum);
        }
    {
        uint64_t uu = 0, ul = 0;

        for (int t = 0; t <= a->nthreads; t++) {
            uu += atomic_load_explicit(&a->threads[t].uuids, memory_order_relaxed);
            ul += atomic_load_explicit(&a->threads[t].ulids, memory_order_relaxed);
        }
        sbuf_metric_u64(&b, "leafd_uuid_issued_total", "counter",
                        "UUIDv7s handed out.", uu);
        sbuf_metric_u64(&b, "leafd_ulid_issued_total", "counter",
                        "ULIDs handed out.", ul);
    }
    serials_metrics(a->serials, &b);
    if (a->sf != NULL) {
        snowflake_metrics(a->sf, &b);
        sbuf_metric_head(&b, "leafd_leaf_snowflake_requests_total", "counter",
                         "Requests on Leaf's /api/snowflake/get/<key>, by key.");
        leaf_keys_metrics(a, &b);
    }
    api_reply_sbuf(c, R_METRICS, 200, "text/plain; version=0.0.4", &b);
}

void
api_page_sf_state(struct api *a, struct http_conn *c)
{
    struct sbuf b = { 0 };

    if (api_sf_disabled(a, c, R_SF_STATE))
        return;
    snowflake_state_json(a->sf, &b);
    sbuf_puts(&b, "\n");
    api_reply_sbuf(c, R_SF_STATE, 200, "application/json", &b);
}
