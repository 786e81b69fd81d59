/* loadgen: the LL-HLS part of a viewer (--llhls), after the player model of
 * draft-pantos-hls-rfc8216bis 6.2.5 and 6.3: once a media playlist with
 * parts is in, the viewer starts PART-HOLD-BACK from the live edge (at an
 * independent part at or before that point), fetches every part in order,
 * and when none is left it fetches the preload hint (6.2.6: the server
 * holds it until the part exists) or makes a blocking playlist reload for
 * the next part after the last one it has (_HLS_msn and _HLS_part, plus
 * _HLS_skip=YES once it holds a full playlist that advertises
 * CAN-SKIP-UNTIL, 6.2.5.1). Playlists are read with the one parser's LL
 * view (he_seg_ll_parse), which points into a copy of the body kept here.
 *
 * Counted: blocking reloads, their hold times, delta updates, 400 and 503
 * answers, reloads a server answered without holding, parts and hinted
 * parts, part misses, and the live latency: how far the play head is
 * behind the end of the newest playlist, sampled at each playlist. A
 * server that answers a reload without holding is reloaded again after
 * half a part target, as hls.js does, never in a tight loop. */
#include "loadgen/engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define HE_LG_LL_RETRY_NS 1000000000ull /* after a failed reload */

struct he_lg_llhls {
    char *body; /* the playlist the view points into */
    he_seg_ll_t view;
    bool have_view, full; /* full: a playlist that is not a delta seen */
    bool positioned;      /* next_* is the next part to fetch */
    uint64_t next_msn;
    unsigned next_idx;
    bool have_last; /* the last part fetched, for the latency */
    uint64_t last_msn;
    unsigned last_idx;
    bool hint_failed;  /* the hint for next_* failed: reload instead */
    bool plain_next;   /* reload without directives (after a 400) */
    uint64_t want_msn; /* of the reload in flight */
    unsigned want_idx;
    bool in_hint;
    double part_dur; /* of the part in flight */
};

bool he_lg_llhls_active(const he_lg_viewer_t *v)
{
    return v->ll && v->ll->have_view;
}

static void he_lg_llhls_drop_view(he_lg_llhls_t *l)
{
    if (l->have_view) he_seg_ll_free(&l->view);
    free(l->body);
    l->body = NULL;
    l->have_view = false;
}

void he_lg_llhls_reset(he_lg_viewer_t *v)
{
    if (!v->ll) return;
    he_lg_llhls_drop_view(v->ll);
    free(v->ll);
    v->ll = NULL;
}

/* ---------------------------------------------------------------- position */

static double he_lg_llhls_hold_back(const he_seg_ll_t *w)
{
    if (w->part_hold_back > 0) return w->part_hold_back;
    return 3 * (w->part_target > 0 ? w->part_target : 1);
}

/* The first part to fetch: PART-HOLD-BACK from the end, moved back to an
 * independent part so it can be decoded from there. */
static void he_lg_llhls_position(he_lg_llhls_t *l)
{
    const he_seg_ll_t *w = &l->view;
    double back = he_lg_llhls_hold_back(w), acc = 0;
    size_t j = w->nparts;
    while (j > 0 && acc < back)
        acc += w->parts[--j].duration;
    while (j > 0 && !w->parts[j].independent)
        j--;
    l->next_msn = w->parts[j].msn;
    l->next_idx = w->parts[j].index;
    l->positioned = true;
    l->hint_failed = false;
}

/* Index of part next_* in the view, or -1. A part index past the last
 * part of a complete segment is part 0 of the next (6.2.5.2). */
static long he_lg_llhls_find(he_lg_llhls_t *l)
{
    const he_seg_ll_t *w = &l->view;
    if (w->has_segments && l->next_msn <= w->last_msn) {
        unsigned np = 0;
        for (size_t j = 0; j < w->nparts; j++)
            np += w->parts[j].msn == l->next_msn;
        if (np && l->next_idx >= np) {
            l->next_msn++;
            l->next_idx = 0;
        }
    }
    for (size_t j = 0; j < w->nparts; j++)
        if (w->parts[j].msn == l->next_msn && w->parts[j].index == l->next_idx) return (long)j;
    return -1;
}

static bool he_lg_llhls_behind(const he_lg_llhls_t *l)
{
    const he_seg_ll_t *w = &l->view;
    if (!w->nparts) return true;
    const he_seg_ll_part_t *p = &w->parts[0];
    return l->next_msn < p->msn || (l->next_msn == p->msn && l->next_idx < p->index);
}

/* The live latency: media from the play head to the playlist's end. */
static void he_lg_llhls_sample_latency(he_lg_viewer_t *v)
{
    he_lg_thread_t *th = v->conn->th;
    he_lg_llhls_t *l = v->ll;
    const he_seg_ll_t *w = &l->view;
    if (!l->have_last || !v->playing) return;
    he__lg_player_advance(v, th->now);
    double after = 0;
    bool found = false;
    for (size_t j = 0; j < w->nparts; j++) {
        if (found) after += w->parts[j].duration;
        if (w->parts[j].msn == l->last_msn && w->parts[j].index == l->last_idx) found = true;
    }
    if (!found) return; /* fell out of the parts the playlist lists */
    he_lg_hist_record(&th->stats.ll.latency_ms, (uint64_t)((after + v->buffered_s) * 1000));
}

/* ---------------------------------------------------------------- requests */

static void he_lg_llhls_later(he_lg_viewer_t *v, uint64_t ns)
{
    he_lg_thread_t *th = v->conn->th;
    v->stage = HE_LG_V_IDLE;
    he_lg_timer_arm(v, th->now + ns);
}

static void he_lg_llhls_reload(he_lg_viewer_t *v)
{
    he_lg_llhls_t *l = v->ll;
    char url[HE_LG_URL_MAX];
    const char *sep = strchr(v->media_url, '?') ? "&" : "?";
    int n;
    l->want_msn = l->next_msn;
    l->want_idx = l->next_idx;
    if (l->plain_next)
        n = snprintf(url, sizeof(url), "%s", v->media_url);
    else
        n = snprintf(url, sizeof(url), "%s%s_HLS_msn=%" PRIu64 "&_HLS_part=%u%s", v->media_url, sep,
                     l->next_msn, l->next_idx,
                     l->full && l->view.can_skip_until > 0 ? "&_HLS_skip=YES" : "");
    if (n < 0 || (size_t)n >= sizeof(url)) {
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST);
        return;
    }
    he__lg_viewer_fetch(v, url, 0, -1, l->plain_next ? HE_LG_V_MEDIA : HE_LG_V_LL_RELOAD);
}

static void he_lg_llhls_fetch_uri(he_lg_viewer_t *v, const char *uri, size_t len, int64_t roff,
                                  int64_t rlen, double dur, bool hint)
{
    char ref[HE_LG_URL_MAX], url[HE_LG_URL_MAX];
    if (len >= sizeof(ref)) {
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST);
        return;
    }
    memcpy(ref, uri, len); /* the view's URIs are not NUL-terminated */
    ref[len] = 0;
    if (he_seg_uri_resolve(v->media_url, ref, url, sizeof(url)) < 0) {
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST);
        return;
    }
    v->ll->in_hint = hint;
    v->ll->part_dur = dur;
    he__lg_viewer_fetch(v, url, roff, rlen, HE_LG_V_LL_PART);
}

void he_lg_llhls_schedule(he_lg_viewer_t *v)
{
    he_lg_llhls_t *l = v->ll;
    const he_seg_ll_t *w = &l->view;
    if (!l->positioned || he_lg_llhls_behind(l)) {
        if (l->positioned) v->conn->th->stats.ll.part_misses++; /* fell behind the window */
        he_lg_llhls_position(l);
    }
    long j = he_lg_llhls_find(l);
    if (j >= 0) {
        const he_seg_ll_part_t *p = &w->parts[j];
        he_lg_llhls_fetch_uri(v, p->uri, p->uri_len,
                              p->byterange_length >= 0 ? p->byterange_offset : 0,
                              p->byterange_length, p->duration, false);
        return;
    }
    /* the next part is not listed: its preload hint, or a blocking reload;
     * an open-ended hint (RFC 8673) is fetched only when it starts at 0 */
    bool hint_ok = w->has_hint && !w->hint_is_map && !l->hint_failed &&
                   (w->hint_length >= 0 || w->hint_start == 0);
    if (hint_ok && w->has_parts) {
        uint64_t hm = w->last_part_msn;
        unsigned hi = w->last_part_index + 1;
        if (w->has_segments && w->last_part_msn <= w->last_msn) { /* after a complete one */
            hm++;
            hi = 0;
        }
        if (hm == l->next_msn && hi == l->next_idx) {
            he_lg_llhls_fetch_uri(v, w->hint_uri, w->hint_uri_len, w->hint_start, w->hint_length,
                                  w->part_target, true);
            return;
        }
    }
    he_lg_llhls_reload(v);
}

/* ---------------------------------------------------------------- results */

/* A playlist (the first, plain, or a blocking reload's): keep it as the view. */
bool he_lg_llhls_on_playlist(he_lg_viewer_t *v, const he_lg_result_t *r)
{
    char err[128];
    if (!v->ll && !(v->ll = calloc(1, sizeof(*v->ll)))) {
        he__lg_viewer_error(v, HE_LG_ERR_OTHER);
        return false;
    }
    he_lg_llhls_t *l = v->ll;
    char *body = malloc(r->body_len + 1);
    he_seg_ll_t view;
    if (!body) {
        he__lg_viewer_error(v, HE_LG_ERR_OTHER);
        return false;
    }
    if (r->body_len) memcpy(body, r->body, r->body_len);
    body[r->body_len] = 0;
    int rc = he_seg_ll_parse(body, r->body_len, &view, err, sizeof(err));
    if (rc < 0 || view.nparts == 0) {
        if (rc >= 0) he_seg_ll_free(&view);
        free(body);
        he__lg_viewer_error(v, HE_LG_ERR_PLAYLIST); /* not a playlist with parts */
        return false;
    }
    he_lg_llhls_drop_view(l);
    l->body = body;
    l->view = view;
    l->have_view = true;
    if (!view.is_delta) l->full = true;
    l->plain_next = false;
    he_lg_llhls_sample_latency(v);
    return true;
}

static void he_lg_llhls_on_reload(he_lg_viewer_t *v, const he_lg_result_t *r)
{
    he_lg_thread_t *th = v->conn->th;
    he_lg_ll_stats_t *s = &th->stats.ll;
    he_lg_llhls_t *l = v->ll;
    th->stats.playlists++;
    if (r->status) he_lg_hist_record(&s->hold_us, r->total_ns / 1000); /* 503s too */
    if (r->status == 400 || r->status == 503) {
        /* 400: asked too far ahead: reload without directives; 503: the
         * playlist did not get there in time: ask again */
        if (r->status == 400) {
            s->st400++;
            l->plain_next = true;
            he__lg_viewer_schedule(v);
        } else {
            s->st503++;
            he_lg_llhls_later(v, (uint64_t)(l->view.part_target * 1e9));
        }
        return;
    }
    if (r->err >= 0) {
        he_lg_llhls_later(v, HE_LG_LL_RETRY_NS);
        return;
    }
    s->reloads++;
    if (!he_lg_llhls_on_playlist(v, r)) return;
    if (l->view.is_delta) s->deltas++;
    if (!he_seg_ll_holds(&l->view, l->want_msn, l->want_idx)) {
        /* answered without holding: reload again after half a part */
        s->not_held++;
        he_lg_llhls_later(v, (uint64_t)(l->view.part_target * 0.5e9));
        return;
    }
    he_lg_llhls_schedule(v);
}

static void he_lg_llhls_on_part(he_lg_viewer_t *v, const he_lg_result_t *r)
{
    he_lg_thread_t *th = v->conn->th;
    he_lg_ll_stats_t *s = &th->stats.ll;
    he_lg_llhls_t *l = v->ll;
    if (l->in_hint) he_lg_hist_record(&s->hint_us, r->total_ns / 1000);
    if (r->err >= 0) {
        if (l->in_hint) {
            l->hint_failed = true; /* not there (yet): a blocking reload next */
            he__lg_viewer_schedule(v);
            return;
        }
        s->part_misses++;
    } else {
        s->parts++;
        s->part_bytes += r->body_bytes;
        if (l->in_hint) s->hints++;
        th->stats.segments++;
        he_lg_hist_record(&th->stats.download_us, r->total_ns / 1000);
        if (v->rend >= 0 && v->rend < HE_LG_MAX_RENDITIONS) {
            he_lg_rend_stats_t *rs = &th->stats.rend[v->rend];
            rs->segments++;
            rs->bytes += r->body_bytes;
            rs->download_ns += r->total_ns;
            rs->media_s += l->part_dur;
        }
        he__lg_player_segment(v, th->now, l->part_dur);
        l->have_last = true;
        l->last_msn = l->next_msn;
        l->last_idx = l->next_idx;
    }
    /* on to the next part; past the segment's last part find() moves on */
    l->next_idx++;
    l->hint_failed = false;
    he__lg_viewer_schedule(v);
}

void he_lg_llhls_on_result(he_lg_viewer_t *v, int stage, const he_lg_result_t *r)
{
    if (stage == HE_LG_V_LL_RELOAD)
        he_lg_llhls_on_reload(v, r);
    else
        he_lg_llhls_on_part(v, r);
}
