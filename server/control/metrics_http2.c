/* HTTP/2's figures in /metrics (hlsedge_http2_*, and the connections and
 * requests by protocol) and /stats ("http2":{...}), from the per-worker
 * counters of he_stats_t that http/http2.c keeps. HTTP/1.x is what is
 * not HTTP/2: its connections are the accepted ones that did not switch,
 * its requests those not carried by a stream. */
#include <stddef.h>

#include "server/control/metrics.h"

#define HE_MH(f) offsetof(he_stats_t, f)

static const char *const he_mh_goaway[HE_STATS_H2_GOAWAY_COUNT] = {
    [HE_STATS_H2_GOAWAY_NO_ERROR] = "no_error",
    [HE_STATS_H2_GOAWAY_PROTOCOL] = "protocol_error",
    [HE_STATS_H2_GOAWAY_FLOW_CONTROL] = "flow_control",
    [HE_STATS_H2_GOAWAY_COMPRESSION] = "compression",
    [HE_STATS_H2_GOAWAY_RAPID_RESET] = "rapid_reset",
    [HE_STATS_H2_GOAWAY_FLOOD] = "flood",
    [HE_STATS_H2_GOAWAY_HEADERS] = "header_list",
    [HE_STATS_H2_GOAWAY_STALL] = "stalled",
    [HE_STATS_H2_GOAWAY_OTHER] = "other",
};

static uint64_t he_mh_requests(const he_stats_t *st)
{
    uint64_t n = 0;
    for (int m = 0; m < HE_STATS_METHOD_COUNT; m++)
        n += st->requests[m];
    return n;
}

static const struct {
    const char *name, *help;
    size_t off;
} he_mh_counters[] = {
    {"streams_refused", "HTTP/2 streams refused past http2.max_concurrent_streams.",
     HE_MH(h2_refused)},
    {"flow_control_stalls",
     "HTTP/2 DATA frames after which the stream had more to send and no window.",
     HE_MH(h2_flow_stalls)},
    {"stall_timeouts",
     "HTTP/2 connections closed: no frame moved for stall_timeout after the stall GOAWAY.",
     HE_MH(h2_stall_timeouts)},
    {"stream_stall_resets",
     "HTTP/2 streams reset: window at zero and nothing sent for stall_timeout.",
     HE_MH(h2_stream_stalls)},
};

void he__metrics_h2_prom(const he_metrics_snap_t *s, he_buf_t *b)
{
    he_buf_printf(b, "# HELP hlsedge_protocol_connections_total Connections by the protocol they "
                     "spoke.\n# TYPE hlsedge_protocol_connections_total counter\n");
    for (unsigned i = 0; i < s->nworkers; i++) {
        const he_stats_t *st = &s->workers[i].st;
        he_buf_printf(b,
                      "hlsedge_protocol_connections_total{worker=\"%u\",protocol=\"http/1.1\"} "
                      "%llu\n",
                      s->workers[i].id,
                      (unsigned long long)he__metrics_sub(st->conn_accepted, st->h2_conns));
        he_buf_printf(b, "hlsedge_protocol_connections_total{worker=\"%u\",protocol=\"h2\"} %llu\n",
                      s->workers[i].id,
                      (unsigned long long)he__metrics_sub(st->h2_conns, st->h2_conns_h2c));
        he_buf_printf(b, "hlsedge_protocol_connections_total{worker=\"%u\",protocol=\"h2c\"} %llu\n",
                      s->workers[i].id, (unsigned long long)st->h2_conns_h2c);
    }
    he_buf_printf(b, "# HELP hlsedge_protocol_requests_total Requests by protocol.\n"
                     "# TYPE hlsedge_protocol_requests_total counter\n");
    for (unsigned i = 0; i < s->nworkers; i++) {
        const he_stats_t *st = &s->workers[i].st;
        he_buf_printf(b, "hlsedge_protocol_requests_total{worker=\"%u\",protocol=\"http/1.1\"} %llu\n",
                      s->workers[i].id,
                      (unsigned long long)he__metrics_sub(he_mh_requests(st), st->h2_requests));
        he_buf_printf(b, "hlsedge_protocol_requests_total{worker=\"%u\",protocol=\"h2\"} %llu\n",
                      s->workers[i].id, (unsigned long long)st->h2_requests);
    }
    he_buf_printf(b, "# HELP hlsedge_http2_streams_open HTTP/2 streams open.\n"
                     "# TYPE hlsedge_http2_streams_open gauge\n");
    for (unsigned i = 0; i < s->nworkers; i++) {
        const he_stats_t *st = &s->workers[i].st;
        he_buf_printf(
            b, "hlsedge_http2_streams_open{worker=\"%u\"} %llu\n", s->workers[i].id,
            (unsigned long long)he__metrics_sub(st->h2_streams_opened, st->h2_streams_closed));
    }
    he__prom_per_worker_by(b, s, "http2_goaways_total", "HTTP/2 GOAWAY frames sent, by cause.",
                           "cause", he_mh_goaway, HE_MH(h2_goaway), HE_STATS_H2_GOAWAY_COUNT);
    for (size_t k = 0; k < sizeof(he_mh_counters) / sizeof(he_mh_counters[0]); k++) {
        he_buf_printf(b, "# HELP hlsedge_http2_%s_total %s\n# TYPE hlsedge_http2_%s_total counter\n",
                      he_mh_counters[k].name, he_mh_counters[k].help, he_mh_counters[k].name);
        for (unsigned i = 0; i < s->nworkers; i++)
            he_buf_printf(b, "hlsedge_http2_%s_total{worker=\"%u\"} %llu\n", he_mh_counters[k].name,
                          s->workers[i].id,
                          (unsigned long long)*(const uint64_t *)((const char *)&s->workers[i].st +
                                                                  he_mh_counters[k].off));
    }
}

void he__metrics_h2_json(const he_metrics_snap_t *s, he_buf_t *b)
{
    const he_stats_t *t = &s->total;
    he_buf_printf(b,
                  "\"http2\":{\"connections\":{\"http/1.1\":%llu,\"h2\":%llu,\"h2c\":%llu},"
                  "\"requests\":{\"http/1.1\":%llu,\"h2\":%llu},\"streams_open\":%llu,"
                  "\"goaways\":{",
                  (unsigned long long)he__metrics_sub(t->conn_accepted, t->h2_conns),
                  (unsigned long long)he__metrics_sub(t->h2_conns, t->h2_conns_h2c),
                  (unsigned long long)t->h2_conns_h2c,
                  (unsigned long long)he__metrics_sub(he_mh_requests(t), t->h2_requests),
                  (unsigned long long)t->h2_requests,
                  (unsigned long long)he__metrics_sub(t->h2_streams_opened, t->h2_streams_closed));
    for (int g = 0; g < HE_STATS_H2_GOAWAY_COUNT; g++)
        he_buf_printf(b, "%s\"%s\":%llu", g ? "," : "", he_mh_goaway[g],
                      (unsigned long long)t->h2_goaway[g]);
    he_buf_printf(b, "}");
    for (size_t k = 0; k < sizeof(he_mh_counters) / sizeof(he_mh_counters[0]); k++)
        he_buf_printf(b, ",\"%s\":%llu", he_mh_counters[k].name,
                      (unsigned long long)*(const uint64_t *)((const char *)t +
                                                              he_mh_counters[k].off));
    he_buf_printf(b, "},");
}
