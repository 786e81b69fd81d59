/* server/net/conn.c: timers (set, unlink, expiry in deadline order, a
 * reload that shortens a timeout), half-close (EOF with requests buffered
 * answers them first, EOF when idle closes), pipelining (buffered requests
 * answered in order after each response, synchronous ones without
 * recursion) and the input pause at HE_CONN_IN_MAX.
 *
 * A fake protocol frames a request as one line ending in '\n' and records
 * every call; it answers "R:<line>\n" through the real send path, or holds
 * a request until the test answers it. The worker has a real io_uring and
 * connections are socketpairs (ring_fixture.h). */
#include "he_test.h"
#include "ring_fixture.h"
#include "server/net/conn.c"

/* ---------------------------------------------------------------- fake protocol */

typedef struct fake_conn {
    char line[64]; /* the request data() completed, for request() */
    unsigned line_len;
} fake_conn_t;

static struct {
    unsigned open, data, request, eof, idle, sent;
    unsigned hold;    /* the next this many requests wait for fake_answer */
    bool sync;        /* answers end on request()'s stack (no bytes to send) */
    he_conn_t *held;  /* the last request held */
    char log[131072]; /* request lines answered or held, in order, ' '-separated */
    size_t log_len;
    unsigned max_depth, depth; /* request() nesting */
} fk;

static void fake_reset(void)
{
    memset(&fk, 0, sizeof(fk));
}

static size_t fake_conn_size(const he_conf_t *conf)
{
    (void)conf;
    return sizeof(fake_conn_t);
}

static void fake_open(he_worker_t *w, he_conn_t *c)
{
    memset(c->proto, 0, sizeof(fake_conn_t));
    fk.open++;
}

static size_t fake_data(he_worker_t *w, he_conn_t *c, const char *p, size_t n, bool *ready)
{
    fake_conn_t *fc = c->proto;
    const char *nl = memchr(p, '\n', n);
    fk.data++;
    *ready = false;
    if (!nl) return 0; /* incomplete: the connection keeps it */
    fc->line_len =
        (unsigned)(nl - p) < sizeof(fc->line) ? (unsigned)(nl - p) : sizeof(fc->line) - 1;
    memcpy(fc->line, p, fc->line_len);
    *ready = true;
    return (size_t)(nl - p) + 1;
}

/* The answer to c's request: its line back, through he__send_start. */
static void fake_answer(he_worker_t *w, he_conn_t *c)
{
    fake_conn_t *fc = c->proto;
    memset(&c->body, 0, sizeof(c->body));
    if (fk.sync) {
        c->hdr_len = 0; /* nothing to send: the response ends at once */
    } else {
        c->hdr_len =
            (uint32_t)snprintf(c->hdr, HE_CONN_HDR_CAP, "R:%.*s\n", (int)fc->line_len, fc->line);
    }
    c->hdr_sent = 0;
    he__send_start(w, c);
}

static void fake_request(he_worker_t *w, he_conn_t *c)
{
    fake_conn_t *fc = c->proto;
    HE_CHECK(c->busy);
    fk.request++;
    if (fk.log_len + fc->line_len + 1 < sizeof(fk.log)) {
        memcpy(fk.log + fk.log_len, fc->line, fc->line_len);
        fk.log_len += fc->line_len;
        fk.log[fk.log_len++] = ' ';
        fk.log[fk.log_len] = 0;
    }
    if (fk.hold) {
        fk.hold--;
        fk.held = c;
        return;
    }
    fk.depth++;
    if (fk.depth > fk.max_depth) fk.max_depth = fk.depth;
    fake_answer(w, c);
    fk.depth--;
}

static void fake_eof(he_worker_t *w, he_conn_t *c)
{
    fk.eof++;
    he__conn_close_if_done(w, c);
}

static void fake_idle(he_worker_t *w, he_conn_t *c, bool hard)
{
    fk.idle++;
}

static void fake_sent(he_worker_t *w, he_conn_t *c)
{
    fk.sent++;
    he__conn_request_done(w, c);
}

static const he_proto_t fake_proto = {
    .name = "fake",
    .conn_size = fake_conn_size,
    .open = fake_open,
    .data = fake_data,
    .request = fake_request,
    .eof = fake_eof,
    .idle = fake_idle,
    .sent = fake_sent,
};

/* conn_dispose: the order connections are freed in */
static uint32_t freed[16];
static unsigned nfreed;
static void rec_dispose(he_worker_t *w, he_conn_t *c)
{
    if (nfreed < 16) freed[nfreed++] = c->slot;
}
static const he_worker_hooks_t rec_hooks = {.name = "rec", .conn_dispose = rec_dispose};

static void setup(void)
{
    fake_reset();
    nfreed = 0;
    fx_setup(&fake_proto, 8);
    fx_server.hooks[fx_server.nhooks++] = &rec_hooks;
}

static void put(int fd, const char *s)
{
    size_t len = strlen(s);
    HE_CHECK_INT(write(fd, s, len), len);
}

/* ---------------------------------------------------------------- timers */

/* The list's connections head to tail; their count. */
static unsigned timer_list(enum he_timer_list l, he_conn_t **out, unsigned max)
{
    unsigned n = 0;
    he_conn_t *prev = NULL;
    for (he_conn_t *c = fx_w.timers[l][0]; c; c = c->tnext) {
        HE_CHECK(c->tprev == prev);
        HE_CHECK_INT(c->timer, l);
        if (prev) HE_CHECK(prev->deadline_ms <= c->deadline_ms); /* sorted */
        if (n < max) out[n] = c;
        n++;
        prev = c;
    }
    HE_CHECK(fx_w.timers[l][1] == prev);
    return n;
}

static void test_timer_set_unlink(void)
{
    he_worker_t *w = &fx_w;
    he_conn_t *l[8], *a, *b, *c;
    int pa, pb, pc;

    setup();
    fx_conf.header_timeout_ms = 1000;
    fx_conf.keepalive_timeout_ms = 5000;
    uint64_t t0 = w->now_ms;
    a = fx_conn(&pa); /* a new connection waits for its request's header */
    w->now_ms += 10;
    b = fx_conn(&pb);
    w->now_ms += 10;
    c = fx_conn(&pc);
    HE_CHECK_INT(a->timer, HE_TIMER_HEADER);
    HE_CHECK_INT(a->deadline_ms, t0 + 1000);
    HE_CHECK_INT(c->deadline_ms, t0 + 1020);
    HE_CHECK_INT(timer_list(HE_TIMER_HEADER, l, 8), 3);
    HE_CHECK(l[0] == a && l[1] == b && l[2] == c);

    /* the middle one moves to another list: the ends join, it goes last there */
    he__conn_timer_set(w, b, HE_TIMER_KEEPALIVE);
    HE_CHECK_INT(timer_list(HE_TIMER_HEADER, l, 8), 2);
    HE_CHECK(l[0] == a && l[1] == c);
    HE_CHECK_INT(timer_list(HE_TIMER_KEEPALIVE, l, 8), 1);
    HE_CHECK_INT(b->deadline_ms, w->now_ms + 5000);

    /* set again on the same list: a new deadline, now at the tail */
    w->now_ms += 10;
    he__conn_timer_set(w, a, HE_TIMER_HEADER);
    HE_CHECK_INT(timer_list(HE_TIMER_HEADER, l, 8), 2);
    HE_CHECK(l[0] == c && l[1] == a);
    HE_CHECK_INT(a->deadline_ms, w->now_ms + 1000);

    /* unlink the head, then the last one: the list is empty */
    he_conn_timer_unlink(w, c);
    HE_CHECK_INT(c->timer, HE_TIMER_NONE);
    HE_CHECK(c->tprev == NULL && c->tnext == NULL);
    HE_CHECK_INT(timer_list(HE_TIMER_HEADER, l, 8), 1);
    he__conn_timer_set(w, a, HE_TIMER_NONE);
    HE_CHECK_INT(timer_list(HE_TIMER_HEADER, l, 8), 0);
    HE_CHECK(w->timers[HE_TIMER_HEADER][0] == NULL && w->timers[HE_TIMER_HEADER][1] == NULL);
    he_conn_timer_unlink(w, a); /* on no list: nothing */
    HE_CHECK_INT(timer_list(HE_TIMER_KEEPALIVE, l, 8), 1);

    /* a connection closed leaves its list */
    he__conn_close(w, b);
    HE_CHECK_INT(timer_list(HE_TIMER_KEEPALIVE, l, 8), 0);
    fx_teardown();
    close(pa);
    close(pb);
    close(pc);
}

static void test_timer_expire(void)
{
    he_worker_t *w = &fx_w;
    he_conn_t *l[8], *c[4];
    int peer[4];
    char buf[16];
    size_t len = 0;

    setup();
    fx_conf.header_timeout_ms = 1000;
    fx_conf.keepalive_timeout_ms = 3000;
    fx_conf.send_timeout_ms = 2000;
    uint64_t t0 = w->now_ms;
    for (int i = 0; i < 3; i++) {
        c[i] = fx_conn(&peer[i]);
        w->now_ms += 100;
    }
    c[3] = fx_conn(&peer[3]);
    he__conn_timer_set(w, c[3], HE_TIMER_SEND); /* at t0 + 300: deadline t0 + 2300 */

    /* nothing is due a millisecond early */
    w->now_ms = t0 + 999;
    he__conn_timers_expire(w);
    for (int i = 0; i < 4; i++)
        HE_CHECK(!c[i]->closing);

    /* due at its deadline: the first two header timers, from the head */
    w->now_ms = t0 + 1100;
    he__conn_timers_expire(w);
    HE_CHECK(c[0]->closing && c[1]->closing);
    HE_CHECK(!c[2]->closing && !c[3]->closing);
    HE_CHECK_INT(w->stats.errors[HE_STATS_ERR_TIMEOUT_HEADER], 2);
    HE_CHECK_INT(timer_list(HE_TIMER_HEADER, l, 8), 1);
    HE_CHECK(l[0] == c[2]);
    /* their recvs are cancelled; the slots go once those complete */
    HE_CHECK(FX_UNTIL(nfreed == 2));
    HE_CHECK(!c[0]->in_use && !c[1]->in_use);
    HE_CHECK_INT(fx_read(peer[0], buf, sizeof(buf), &len), 1); /* the client sees EOF */
    HE_CHECK_INT(len, 0);

    /* every list is looked at: header and send expire in one pass */
    w->now_ms = t0 + 5000;
    he__conn_timers_expire(w);
    HE_CHECK(c[2]->closing && c[3]->closing);
    HE_CHECK_INT(w->stats.errors[HE_STATS_ERR_TIMEOUT_HEADER], 3);
    HE_CHECK_INT(w->stats.errors[HE_STATS_ERR_TIMEOUT_SEND], 1);
    HE_CHECK_INT(w->stats.errors[HE_STATS_ERR_TIMEOUT_KEEPALIVE], 0);
    HE_CHECK(FX_UNTIL(nfreed == 4));
    HE_CHECK_INT(w->nconns, 0);
    HE_CHECK_INT(w->nfree, 8);
    HE_CHECK_INT(w->stats.conn_closed, 4);
    fx_teardown();
    for (int i = 0; i < 4; i++)
        close(peer[i]);
}

/* A reload shortens a timeout: deadlines past now + the new timeout come
 * down to it, the list stays sorted, and later ones still go at the tail. */
static void test_timer_reconf(void)
{
    he_worker_t *w = &fx_w;
    he_conn_t *l[8], *c[5];
    int peer[5];

    setup();
    uint64_t t0 = w->now_ms;
    fx_conf.keepalive_timeout_ms = 300;
    c[0] = fx_conn(&peer[0]);
    he__conn_timer_set(w, c[0], HE_TIMER_KEEPALIVE); /* t0 + 300 */
    fx_conf.keepalive_timeout_ms = 10000;
    w->now_ms = t0 + 100;
    c[1] = fx_conn(&peer[1]);
    he__conn_timer_set(w, c[1], HE_TIMER_KEEPALIVE); /* t0 + 10100 */
    w->now_ms = t0 + 200;
    c[2] = fx_conn(&peer[2]);
    he__conn_timer_set(w, c[2], HE_TIMER_KEEPALIVE); /* t0 + 10200 */
    /* a header timer under its own timeout, which does not change */
    fx_conf.header_timeout_ms = 800;
    c[3] = fx_conn(&peer[3]); /* t0 + 1000 */

    fx_conf.keepalive_timeout_ms = 500;
    w->now_ms = t0 + 250;
    he__conn_timers_reconf(w);
    HE_CHECK_INT(c[0]->deadline_ms, t0 + 300); /* already sooner: kept */
    HE_CHECK_INT(c[1]->deadline_ms, t0 + 750);
    HE_CHECK_INT(c[2]->deadline_ms, t0 + 750);
    HE_CHECK_INT(c[3]->deadline_ms, t0 + 1000);

    w->now_ms = t0 + 260;
    c[4] = fx_conn(&peer[4]);
    he__conn_timer_set(w, c[4], HE_TIMER_KEEPALIVE);       /* t0 + 760 */
    HE_CHECK_INT(timer_list(HE_TIMER_KEEPALIVE, l, 8), 4); /* and sorted */
    HE_CHECK(l[0] == c[0] && l[1] == c[1] && l[2] == c[2] && l[3] == c[4]);

    /* the clamped ones expire by the new timeout */
    w->now_ms = t0 + 750;
    he__conn_timers_expire(w);
    HE_CHECK(c[0]->closing && c[1]->closing && c[2]->closing);
    HE_CHECK(!c[3]->closing && !c[4]->closing);
    HE_CHECK_INT(w->stats.errors[HE_STATS_ERR_TIMEOUT_KEEPALIVE], 3);
    HE_CHECK_INT(timer_list(HE_TIMER_KEEPALIVE, l, 8), 1);

    /* a longer timeout leaves deadlines alone */
    fx_conf.keepalive_timeout_ms = 60000;
    he__conn_timers_reconf(w);
    HE_CHECK_INT(c[4]->deadline_ms, t0 + 760);
    fx_teardown();
    for (int i = 0; i < 5; i++)
        close(peer[i]);
}

/* ---------------------------------------------------------------- half-close */

/* Client writes requests then shuts its side: what was received is
 * answered in order, then the connection closes. */
static void test_eof_answers_buffered(void)
{
    he_worker_t *w = &fx_w;
    char buf[256];
    size_t len = 0;
    int peer, eof = 0;
    he_conn_t *c;

    setup();
    fk.hold = 1; /* the first request waits, so EOF arrives while it is answered */
    c = fx_conn(&peer);
    put(peer, "one\ntwo\nthr");
    shutdown(peer, SHUT_WR);
    HE_CHECK(FX_UNTIL(fk.eof == 1));
    HE_CHECK(c->in_use && !c->closing); /* busy with "one": stays */
    HE_CHECK(c->peer_eof && c->busy);
    HE_CHECK(!c->recv_armed); /* nothing more to read after EOF */
    HE_CHECK_STR(fk.log, "one ");
    HE_CHECK_INT(fk.sent, 0);

    fake_answer(w, fk.held);
    HE_CHECK(FX_UNTIL(!c->in_use));
    HE_CHECK_STR(fk.log, "one two "); /* the partial "thr" is dropped */
    HE_CHECK_INT(fk.sent, 2);
    HE_CHECK_INT(fk.eof, 1);
    for (int i = 0; i < 100 && !eof; i++)
        eof = fx_read(peer, buf, sizeof(buf), &len);
    HE_CHECK(eof);
    HE_CHECK_INT(len, strlen("R:one\nR:two\n"));
    HE_CHECK(len == strlen("R:one\nR:two\n") && memcmp(buf, "R:one\nR:two\n", len) == 0);
    fx_teardown();
    close(peer);
}

/* EOF with nothing under way closes at once. */
static void test_eof_idle(void)
{
    char buf[16];
    size_t len = 0;
    int peer;
    he_conn_t *c;

    setup();
    c = fx_conn(&peer);
    shutdown(peer, SHUT_WR);
    HE_CHECK(FX_UNTIL(!c->in_use));
    HE_CHECK_INT(fk.eof, 1);
    HE_CHECK_INT(fk.request, 0);
    HE_CHECK_INT(fx_w.nconns, 0);
    HE_CHECK_INT(fx_read(peer, buf, sizeof(buf), &len), 1);
    close(peer);

    /* after a keep-alive response, EOF on the idle connection closes it too */
    c = fx_conn(&peer);
    put(peer, "a\n");
    HE_CHECK(FX_UNTIL(fk.sent == 1));
    HE_CHECK(c->in_use && !c->busy);
    HE_CHECK_INT(c->timer, HE_TIMER_KEEPALIVE);
    shutdown(peer, SHUT_WR);
    HE_CHECK(FX_UNTIL(!c->in_use));
    HE_CHECK_INT(fk.eof, 2);
    len = 0;
    for (int i = 0; i < 100 && !fx_read(peer, buf, sizeof(buf), &len); i++)
        ;
    HE_CHECK(len == 4 && memcmp(buf, "R:a\n", 4) == 0);
    fx_teardown();
    close(peer);
}

/* ---------------------------------------------------------------- pipelining */

/* Requests that arrive together are answered one at a time, in order,
 * each after the previous response ended. */
static void test_pipeline_in_order(void)
{
    char buf[256];
    size_t len = 0;
    int peer;
    he_conn_t *c;

    setup();
    c = fx_conn(&peer);
    put(peer, "p1\np2\np3\np4");
    HE_CHECK(FX_UNTIL(fk.sent == 3));
    HE_CHECK_STR(fk.log, "p1 p2 p3 ");
    HE_CHECK(!c->busy);
    HE_CHECK_INT(c->in_len - c->in_off, 2);  /* "p4" waits for its end */
    HE_CHECK_INT(c->timer, HE_TIMER_HEADER); /* a request has begun */
    put(peer, "\n");
    HE_CHECK(FX_UNTIL(fk.sent == 4));
    HE_CHECK_STR(fk.log, "p1 p2 p3 p4 ");
    HE_CHECK_INT(c->in_len, 0);
    HE_CHECK_INT(c->timer, HE_TIMER_KEEPALIVE);
    fx_read(peer, buf, sizeof(buf), &len);
    HE_CHECK(len == 20 && memcmp(buf, "R:p1\nR:p2\nR:p3\nR:p4\n", 20) == 0);
    fx_teardown();
    close(peer);
}

/* Responses that end on request()'s own stack: a deep pipeline is a loop,
 * not a recursion. */
static void test_pipeline_sync(void)
{
    static char req[5000 * 6 + 1];
    size_t n = 0;
    int peer;
    he_conn_t *c;

    setup();
    fk.sync = true;
    c = fx_conn(&peer);
    for (int i = 0; i < 5000; i++)
        n += (size_t)snprintf(req + n, sizeof(req) - n, "%04d\n", i);
    /* all of it buffered at once: the first request waits, then the rest */
    fk.hold = 1;
    put(peer, "h\n");
    HE_CHECK(FX_UNTIL(fk.request == 1));
    for (size_t off = 0, idle = 0; off < n && idle < 100;) {
        ssize_t k = write(peer, req + off, n - off);
        if (k > 0) off += (size_t)k;
        idle = fx_reap(10) || k > 0 ? 0 : idle + 1;
    }
    HE_CHECK(FX_UNTIL(c->in_len - c->in_off == n));
    HE_CHECK_INT(fk.request, 1);
    fake_answer(&fx_w, fk.held); /* synchronous: every buffered one follows */
    HE_CHECK_INT(fk.request, 5001);
    HE_CHECK_INT(fk.sent, 5001);
    HE_CHECK_INT(fk.max_depth, 1);
    HE_CHECK(!c->in_process && !c->busy);
    HE_CHECK_INT(c->in_len, 0);
    {
        char want[16];
        bool ordered = true;
        const char *p = fk.log + 2; /* after "h " */
        for (int i = 0; i < 5000 && ordered; i++, p += 5) {
            snprintf(want, sizeof(want), "%04d ", i);
            ordered = memcmp(p, want, 5) == 0;
        }
        HE_CHECK(ordered);
    }
    fx_teardown();
    close(peer);
}

/* ---------------------------------------------------------------- input pause */

static void test_in_full_boundary(void)
{
    he_conn_t c;
    memset(&c, 0, sizeof(c));
    c.in_len = HE_CONN_IN_MAX - 1;
    HE_CHECK(!he__conn_in_full(&c));
    c.in_len = HE_CONN_IN_MAX;
    HE_CHECK(he__conn_in_full(&c));
    c.in_off = 1; /* parsed bytes do not count */
    HE_CHECK(!he__conn_in_full(&c));
    c.in_len = 3 * HE_CONN_IN_MAX;
    c.in_off = 2 * HE_CONN_IN_MAX;
    HE_CHECK(he__conn_in_full(&c));
}

/* While a response is under way, received requests are buffered; at
 * HE_CONN_IN_MAX reading pauses; once the response ends, the buffered
 * requests are answered in order and reading resumes. */
static void test_in_pause(void)
{
    enum { N = 12000 }; /* 7 bytes each: 84000, more than HE_CONN_IN_MAX */
    static char req[N * 7 + 1];
    static char out[N * 9 + 16];
    size_t n = 0, off = 0, got = 0;
    int peer;
    he_conn_t *c;

    setup();
    c = fx_conn(&peer);
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(req + n, sizeof(req) - n, "q%05d\n", i);
    fk.hold = 1;
    /* the client writes as the socket takes it; the server reads while it may */
    for (int idle = 0;
         idle < 200 && off < n && !(fk.request && he__conn_in_full(c) && !c->recv_armed);) {
        ssize_t k = write(peer, req + off, n - off);
        if (k > 0) off += (size_t)k;
        idle = fx_reap(k > 0 ? 0 : 5) || k > 0 ? 0 : idle + 1;
    }
    fx_settle(20);
    HE_CHECK_INT(fk.request, 1); /* q00000, held */
    HE_CHECK(c->busy);
    HE_CHECK(he__conn_in_full(c));
    HE_CHECK(!c->recv_armed); /* paused */
    HE_CHECK(c->in_len - c->in_off < HE_CONN_IN_MAX + HE_CONN_RBUF);
    HE_CHECK(off > c->in_len - c->in_off); /* some are still in the socket */
    HE_CHECK(c->in_use && !c->closing);

    /* the rest of the input waits in the socket for as long as it is full */
    while (off < n) {
        ssize_t k = write(peer, req + off, n - off);
        if (k <= 0) break;
        off += (size_t)k;
    }
    fx_settle(20);
    HE_CHECK(!c->recv_armed);
    HE_CHECK_INT(fk.request, 1);

    fake_answer(&fx_w, fk.held);
    /* until all are answered, or nothing happened for a second */
    for (int idle = 0; idle < 200 && fk.sent < N;) {
        size_t before = got;
        fx_read(peer, out, sizeof(out) - 1, &got);
        if (off < n) {
            ssize_t k = write(peer, req + off, n - off);
            if (k > 0) off += (size_t)k;
        }
        idle = fx_reap(5) || got != before ? 0 : idle + 1;
    }
    fx_read(peer, out, sizeof(out) - 1, &got);
    HE_CHECK_INT(off, n);
    HE_CHECK_INT(fk.request, N);
    HE_CHECK_INT(fk.sent, N);
    HE_CHECK_INT(got, (size_t)N * 9);
    {
        bool ordered = got == (size_t)N * 9;
        char want[16];
        for (int i = 0; i < N && ordered; i++) {
            snprintf(want, sizeof(want), "R:q%05d\n", i);
            ordered = memcmp(out + (size_t)i * 9, want, 9) == 0;
        }
        HE_CHECK(ordered);
    }
    HE_CHECK(c->in_use && !c->busy);
    HE_CHECK(c->recv_armed); /* reading resumed */
    fx_teardown();
    close(peer);
}

int main(void)
{
    test_timer_set_unlink();
    test_timer_expire();
    test_timer_reconf();
    test_eof_answers_buffered();
    test_eof_idle();
    test_pipeline_in_order();
    test_pipeline_sync();
    test_in_full_boundary();
    test_in_pause();
    HE_TEST_MAIN_END();
}
