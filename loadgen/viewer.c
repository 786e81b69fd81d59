/* loadgen: one simulated HLS viewer. A session: pick a master URL by
 * popularity, fetch it, pick a rendition (fixed, weighted mix or ABR), fetch
 * that media playlist, then its segments in order on one keep-alive
 * connection. VOD loops; live re-polls the media playlist every target
 * duration and follows new segments from three segments behind the edge.
 *
 * At real-time pace a simple player model runs: media is buffered up to
 * --buffer seconds ahead of a play head that advances with the clock; when
 * the buffer runs dry the viewer stalls until the next segment arrives.
 * With --llhls, once a media playlist lists parts the viewer's steps are
 * llhls.c's (parts, preload hints, blocking reloads). */
#include "loadgen/engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HE_LG_BACKOFF_NS 1000000000ull
#define HE_LG_LIVE_EDGE_SEGMENTS 3

static void he_lg_viewer_session(he_lg_viewer_t *v);

static he_lg_thread_t *he_lg_viewer_th(he_lg_viewer_t *v)
{
    return v->conn->th;
}

static void he_lg_viewer_free(he_lg_viewer_t *v)
{
    if (v->have_master) he_seg_playlist_free(&v->master);
    if (v->have_media) he_seg_playlist_free(&v->media);
    v->have_master = v->have_media = false;
    he_lg_llhls_reset(v);
}

/* ---------------------------------------------------------------- player */

void he__lg_player_advance(he_lg_viewer_t *v, uint64_t now)
{
    he_lg_stats_t *s = &he_lg_viewer_th(v)->stats;
    if (!v->playing) return;
    double el = (double)(now - v->last_ns) / 1e9;
    if (el <= v->buffered_s) {
        v->buffered_s -= el;
        s->play_ns += now - v->last_ns;
    } else {
        /* ran dry part-way: the stall began when the buffer emptied */
        uint64_t played = (uint64_t)(v->buffered_s * 1e9);
        s->play_ns += played;
        v->stall_start_ns = v->last_ns + played;
        v->buffered_s = 0;
        v->playing = false;
        v->stalled = true;
        HE_LG_STAT_ADD(s->stalls, 1);
    }
    v->last_ns = now;
}

void he__lg_player_segment(he_lg_viewer_t *v, uint64_t now, double dur)
{
    he_lg_stats_t *s = &he_lg_viewer_th(v)->stats;
    he__lg_player_advance(v, now);
    v->buffered_s += dur;
    if (!v->playing) {
        if (v->stalled)
            s->stall_ns += now - v->stall_start_ns;
        else {
            s->startups++;
            s->startup_ns += now - v->session_ns;
        }
        v->stalled = false;
        v->playing = true;
        v->last_ns = now;
    }
}

/* The player stops: what it played and stalled is counted. */
static void he_lg_viewer_settle(he_lg_viewer_t *v)
{
    he_lg_thread_t *th = he_lg_viewer_th(v);
    if (th->cfg->pace == HE_LG_PACE_REALTIME) {
        he__lg_player_advance(v, th->now);
        if (v->stalled) th->stats.stall_ns += th->now - v->stall_start_ns;
        v->stalled = false;
        v->playing = false;
    }
}

static void he_lg_viewer_finish(he_lg_viewer_t *v)
{
    he_lg_thread_t *th = he_lg_viewer_th(v);
    if (v->stage == HE_LG_V_DONE) return;
    he_lg_viewer_settle(v);
    v->stage = HE_LG_V_DONE;
    HE_LG_STAT_ADD(th->stats.active, (uint64_t)-1);
}

/* --churn: the viewer leaves; audience.c closes its connection. */
static void he_lg_viewer_leave(he_lg_viewer_t *v)
{
    he_lg_viewer_settle(v);
    he_lg_viewer_free(v);
}

/* ---------------------------------------------------------------- requests */

static void he_lg_viewer_backoff(he_lg_viewer_t *v)
{
    he_lg_thread_t *th = he_lg_viewer_th(v);
    if (th->stopping) {
        he_lg_viewer_finish(v);
        return;
    }
    v->stage = HE_LG_V_BACKOFF;
    he_lg_timer_arm(v, th->now + HE_LG_BACKOFF_NS);
}

void he__lg_viewer_error(he_lg_viewer_t *v, he_lg_err_t kind)
{
    he_lg_stats_t *s = &he_lg_viewer_th(v)->stats;
    s->err[kind]++;
    HE_LG_STAT_ADD(s->errors, 1);
    he_lg_viewer_backoff(v);
}

static int he_lg_viewer_endpoint(he_lg_viewer_t *v, const he_lg_url_t *u)
{
    int ep = v->conn->ep;
    if (ep >= 0) {
        const he_lg_endpoint_t *e = he_lg_endpoint_at(ep);
        if (e->port == u->port && e->tls == u->tls && strcasecmp(e->host, u->host) == 0) return ep;
    }
    return he_lg_endpoint_get(u->host, u->port, u->tls);
}

bool he__lg_viewer_fetch(he_lg_viewer_t *v, const char *url, int64_t roff, int64_t rlen, int stage)
{
    he_lg_thread_t *th = he_lg_viewer_th(v);
    he_lg_url_t u;
    if (!he_lg_take_request(th)) {
        he_lg_viewer_finish(v);
        return false;
    }
    int ep;
    if (he_lg_url_parse(url, &u) < 0 || (ep = he_lg_viewer_endpoint(v, &u)) < 0) {
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST);
        return false;
    }
    uint64_t key = 0;
    if (th->cfg->verify) {
        key = he_lg_fnv(HE_LG_FNV_INIT, url, strlen(url));
        key = he_lg_fnv(key, &roff, sizeof(roff));
        key = he_lg_fnv(key, &rlen, sizeof(rlen));
    }
    v->stage = stage;
    bool keep = stage != HE_LG_V_SEGMENT && stage != HE_LG_V_LL_PART; /* playlists */
    if (he_lg_conn_request(v->conn, ep, u.target, roff, rlen, keep, key) < 0) {
        he__lg_viewer_error(v, HE_LG_ERR_OTHER);
        return false;
    }
    return true;
}

static void he_lg_viewer_session(he_lg_viewer_t *v)
{
    he_lg_thread_t *th = he_lg_viewer_th(v);
    he_lg_viewer_free(v);
    v->url = (int)he_lg_pick_sample(&th->run->pop, &th->rng);
    snprintf(v->master_url, sizeof(v->master_url), "%s", th->cfg->urls[v->url]);
    v->rend = v->next_rend = -1;
    v->nbw = 0;
    v->started = false;
    v->playing = v->stalled = false;
    v->buffered_s = 0;
    v->session_ns = th->now;
    he_lg_abr_init(&v->abr);
    he__lg_viewer_fetch(v, v->master_url, 0, -1, HE_LG_V_MASTER);
}

static void he_lg_viewer_start(he_lg_viewer_t *v)
{
    he_lg_viewer_session(v);
}

static void he_lg_viewer_on_timer(he_lg_viewer_t *v)
{
    if (v->stage == HE_LG_V_DONE) return;
    bool media = v->have_media || he_lg_llhls_active(v);
    if (v->stage == HE_LG_V_BACKOFF && !media) {
        he_lg_viewer_session(v);
        return;
    }
    if (v->stage == HE_LG_V_IDLE && !v->have_master && !media) {
        he_lg_viewer_session(v); /* a staggered start */
        return;
    }
    he__lg_viewer_schedule(v);
}

static int he_lg_viewer_pick_mix(he_lg_viewer_t *v, size_t n)
{
    he_lg_thread_t *th = he_lg_viewer_th(v);
    const he_lg_config_t *cfg = th->cfg;
    double total = 0;
    size_t k = cfg->nrend_weights < n ? cfg->nrend_weights : n;
    for (size_t i = 0; i < k; i++)
        total += cfg->rend_weights[i];
    if (!(total > 0)) return -1;
    double u = he_lg_rng_double(&th->rng) * total;
    for (size_t i = 0; i < k; i++) {
        if (u < cfg->rend_weights[i]) return (int)i;
        u -= cfg->rend_weights[i];
    }
    return (int)k - 1;
}

static bool he_lg_viewer_media_url(he_lg_viewer_t *v, int rend)
{
    if (he_seg_uri_resolve(v->master_url, v->master.variants[rend].uri, v->media_url,
                           sizeof(v->media_url)) < 0) {
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST);
        return false;
    }
    return true;
}

static void he_lg_viewer_on_master(he_lg_viewer_t *v, const he_lg_result_t *r);
static void he_lg_viewer_on_media(he_lg_viewer_t *v, const he_lg_result_t *r);

static void he_lg_viewer_on_master(he_lg_viewer_t *v, const he_lg_result_t *r)
{
    he_lg_thread_t *th = he_lg_viewer_th(v);
    char err[128];
    he_seg_playlist_t pl;
    if (he_seg_playlist_parse(r->body ? r->body : "", r->body_len, &pl, err, sizeof(err)) < 0) {
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST);
        return;
    }
    if (!pl.is_master) {
        /* a media playlist given directly: one rendition */
        he_seg_playlist_free(&pl);
        snprintf(v->media_url, sizeof(v->media_url), "%s", v->master_url);
        v->nbw = 1;
        v->bw[0] = 0;
        v->rend = 0;
        he_lg_viewer_on_media(v, r);
        return;
    }
    if (pl.nvariants == 0) {
        he_seg_playlist_free(&pl);
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST);
        return;
    }
    v->master = pl;
    v->have_master = true;
    v->nbw = pl.nvariants < HE_LG_MAX_RENDITIONS ? pl.nvariants : HE_LG_MAX_RENDITIONS;
    for (size_t i = 0; i < v->nbw; i++) {
        v->bw[i] = pl.variants[i].bandwidth;
        if (!th->stats.rend[i].bandwidth) th->stats.rend[i].bandwidth = v->bw[i];
    }
    int rend = 0;
    switch (th->cfg->rend) {
    case HE_LG_REND_FIXED:
        rend = (int)th->cfg->rend_fixed;
        break;
    case HE_LG_REND_MIX:
        rend = he_lg_viewer_pick_mix(v, v->nbw);
        break;
    case HE_LG_REND_ABR:
        /* start low and climb, as players without a prior estimate do */
        for (size_t i = 1; i < v->nbw; i++)
            if (v->bw[i] < v->bw[rend]) rend = (int)i;
        break;
    }
    if (rend < 0 || (size_t)rend >= v->nbw) {
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST); /* no such rendition */
        return;
    }
    v->rend = v->next_rend = rend;
    if (he_lg_viewer_media_url(v, rend)) he__lg_viewer_fetch(v, v->media_url, 0, -1, HE_LG_V_MEDIA);
}

static void he_lg_viewer_on_media(he_lg_viewer_t *v, const he_lg_result_t *r)
{
    he_lg_thread_t *th = he_lg_viewer_th(v);
    char err[128];
    he_seg_playlist_t pl;
    if (th->cfg->llhls) {
        if (he_lg_llhls_on_playlist(v, r)) he__lg_viewer_schedule(v);
        return;
    }
    if (he_seg_playlist_parse(r->body ? r->body : "", r->body_len, &pl, err, sizeof(err)) < 0) {
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST);
        return;
    }
    if (pl.is_master || pl.nsegments == 0) {
        he_seg_playlist_free(&pl);
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST);
        return;
    }
    if (v->have_media) he_seg_playlist_free(&v->media);
    v->media = pl;
    v->have_media = true;
    v->live = th->cfg->live >= 0 ? th->cfg->live == 1 : he_seg_playlist_is_live(&pl);
    uint64_t first = pl.segments[0].sequence, last = pl.segments[pl.nsegments - 1].sequence;
    if (!v->started) {
        size_t at = 0;
        if (v->live && pl.nsegments > HE_LG_LIVE_EDGE_SEGMENTS)
            at = pl.nsegments - HE_LG_LIVE_EDGE_SEGMENTS;
        v->next_seq = pl.segments[at].sequence;
        v->started = true;
    } else if (v->next_seq < first || (!v->live && v->next_seq > last + 1)) {
        v->next_seq = first; /* fell out of the live window, or another rendition is shorter */
    }
    if (v->live) {
        double td = pl.target_duration > 0 ? pl.target_duration : pl.segments[0].duration;
        if (!(td > 0)) td = 1;
        v->next_poll_ns = th->now + (uint64_t)(td * 1e9);
    }
    he__lg_viewer_schedule(v);
}

static void he_lg_viewer_on_segment(he_lg_viewer_t *v, const he_lg_result_t *r)
{
    he_lg_thread_t *th = he_lg_viewer_th(v);
    he_lg_stats_t *s = &th->stats;
    s->segments++;
    he_lg_hist_record(&s->download_us, r->total_ns / 1000);
    if (v->seg_rend >= 0 && v->seg_rend < HE_LG_MAX_RENDITIONS) {
        he_lg_rend_stats_t *rs = &s->rend[v->seg_rend];
        rs->segments++;
        rs->bytes += r->body_bytes;
        rs->download_ns += r->total_ns;
        rs->media_s += v->seg_dur;
    }
    bool realtime = th->cfg->pace == HE_LG_PACE_REALTIME;
    if (realtime) he__lg_player_segment(v, th->now, v->seg_dur);
    he_lg_abr_sample(&v->abr, r->body_bytes, r->total_ns, v->seg_dur);
    if (th->cfg->rend == HE_LG_REND_ABR && v->nbw > 1 && v->have_master) {
        int nr = he_lg_abr_choose(&v->abr, v->bw, v->nbw, v->rend, realtime ? v->buffered_s : -1,
                                  th->cfg->buffer_s);
        if (nr >= 0 && nr != v->rend) {
            if (v->bw[nr] > v->bw[v->rend])
                s->switches_up++;
            else
                s->switches_down++;
            v->next_rend = nr;
        }
    }
}

static void he_lg_viewer_on_result(he_lg_viewer_t *v, const he_lg_result_t *r)
{
    int stage = v->stage;
    v->stage = HE_LG_V_IDLE;
    if (stage == HE_LG_V_DONE) return;
    if (stage == HE_LG_V_LL_RELOAD || stage == HE_LG_V_LL_PART) {
        he_lg_llhls_on_result(v, stage, r);
        return;
    }
    if (stage == HE_LG_V_SEGMENT) v->next_seq++; /* a failed segment is skipped, as players do */
    if (stage != HE_LG_V_SEGMENT) he_lg_viewer_th(v)->stats.playlists++;
    if (r->err >= 0) {
        /* the connection counted the error; without a media playlist the
         * backoff ends in a new session, else playback goes on */
        he_lg_viewer_backoff(v);
        return;
    }
    switch (stage) {
    case HE_LG_V_MASTER:
        he_lg_viewer_on_master(v, r);
        break;
    case HE_LG_V_MEDIA:
        he_lg_viewer_on_media(v, r);
        break;
    case HE_LG_V_SEGMENT:
        he_lg_viewer_on_segment(v, r);
        he__lg_viewer_schedule(v);
        break;
    default:
        break;
    }
}

/* Decides the next request, or sleeps until it is due. */
void he__lg_viewer_schedule(he_lg_viewer_t *v)
{
    he_lg_thread_t *th = he_lg_viewer_th(v);
    const he_lg_config_t *cfg = th->cfg;
    if (th->stopping) {
        he_lg_viewer_finish(v);
        return;
    }
    if (he_lg_audience_leave_due(v)) return;
    if (cfg->llhls && he_lg_llhls_active(v)) {
        he_lg_llhls_schedule(v);
        return;
    }
    if (!v->have_media) {
        he_lg_viewer_session(v);
        return;
    }
    if (v->next_rend >= 0 && v->next_rend != v->rend && v->have_master) {
        v->rend = v->next_rend;
        if (he_lg_viewer_media_url(v, v->rend))
            he__lg_viewer_fetch(v, v->media_url, 0, -1, HE_LG_V_MEDIA);
        return;
    }
    if (v->live && th->now >= v->next_poll_ns) {
        he__lg_viewer_fetch(v, v->media_url, 0, -1, HE_LG_V_MEDIA);
        return;
    }
    const he_seg_playlist_t *pl = &v->media;
    uint64_t first = pl->segments[0].sequence;
    if (v->next_seq < first) v->next_seq = first;
    uint64_t idx = v->next_seq - first;
    if (idx >= pl->nsegments) {
        if (v->live) {
            he_lg_timer_arm(v, v->next_poll_ns);
            return;
        }
        /* VOD: loop; with several masters a new session picks again */
        if (cfg->nurls > 1) {
            he_lg_viewer_session(v);
            return;
        }
        v->next_seq = first;
        idx = 0;
    }
    const he_seg_media_segment_t *seg = &pl->segments[idx];
    if (cfg->pace == HE_LG_PACE_REALTIME && v->playing) {
        he__lg_player_advance(v, th->now);
        double over = v->buffered_s + seg->duration - cfg->buffer_s;
        if (v->playing && over > 0) {
            uint64_t at = th->now + (uint64_t)(over * 1e9);
            if (v->live && v->next_poll_ns < at) at = v->next_poll_ns;
            he_lg_timer_arm(v, at);
            return;
        }
    }
    char url[HE_LG_URL_MAX];
    if (he_seg_uri_resolve(v->media_url, seg->uri, url, sizeof(url)) < 0) {
        v->next_seq++;
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST);
        return;
    }
    v->seg_dur = seg->duration;
    v->seg_rend = v->rend;
    int64_t rlen = seg->byterange_length;
    he__lg_viewer_fetch(v, url, rlen >= 0 ? seg->byterange_offset : 0, rlen, HE_LG_V_SEGMENT);
}

const he_lg_client_ops_t he_lg_viewer_ops = {
    .noun = "viewers",
    .stagger = true,
    .start = he_lg_viewer_start,
    .on_result = he_lg_viewer_on_result,
    .on_timer = he_lg_viewer_on_timer,
    .finish = he_lg_viewer_finish,
    .free = he_lg_viewer_free,
    .leave = he_lg_viewer_leave,
};
