/* What the access log costs per record, through the real server/base/alog_ring.h and server/control/accesslog.c:
 *
 *   stats        the worker's latency histograms: two he_hist_record
 *   push         the worker's side: he__http_alog_push (reserve, fill, commit)
 *   format       he_alog_format alone, line after line into a buffer
 *   drain        he_alog_drain: the ring walk and the formatting into the
 *                batch buffer (and any write when that fills up)
 *   flush        he_alog_flush after it: the write(2) to a file in DIR
 *   write(2)     with -w: raw writes of log text to a file in DIR, by
 *                write size (what chose the batch buffer's size)
 *
 *   bench_alog_cost [-w] [dir] [records]     defaults /tmp 1000000
 *
 * Records are realistic: an IPv4 client (127.0.0.1), playlists and
 * segments of three renditions, status 200, 400 B to 2 MB, times a few
 * microseconds apart (so a run crosses seconds). Each figure is the best
 * of 5 repetitions of `records` records, CLOCK_MONOTONIC; next to it the
 * thread's CPU time, which leaves out time other processes had the CPU (a
 * busy machine shows as wall well above cpu). Rings are filled as in the
 * server: a drain every HE_ALOG_NOTIFY_BYTES of records, one flush after
 * it. Single-threaded: the ring is warm in this CPU's cache, where in the
 * server the worker wrote it on another CPU, and the wake-up of the
 * control thread is not counted. Not a ctest. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/base/alog_ring.h"
#include "server/control/accesslog.h"
#include "server/http/http.h"
#include "tests/he_xorshift.h"

#define REPS 5
#define NCONN 16

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

typedef struct cost {
    double wall, cpu; /* ns per record (per byte for writes) */
} cost_t;

typedef struct stamp {
    uint64_t wall, cpu;
} stamp_t;

static stamp_t stamp(void)
{
    stamp_t s;
    s.wall = mono_ns();
    s.cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    return s;
}

/* c += the time from a to b */
static void spent(cost_t *c, stamp_t a, stamp_t b)
{
    c->wall += (double)(b.wall - a.wall);
    c->cpu += (double)(b.cpu - a.cpu);
}

static cost_t cost_per(cost_t c, uint64_t n)
{
    return (cost_t){c.wall / (double)n, c.cpu / (double)n};
}

static void best(cost_t *b, cost_t c)
{
    if (c.wall < b->wall) b->wall = c.wall;
    if (c.cpu < b->cpu) b->cpu = c.cpu;
}

/* ---------------------------------------------------------------- requests */

static he_worker_t *bench_w;
static he_conn_t *bench_c[NCONN];
static he_req_t *bench_r[NCONN];
static uint64_t bench_t0; /* monotonic time of the first record */

/* Sixteen connections of one client: per rendition a playlist and three
 * segments. */
static void bench_setup(void)
{
    static const char *const rend[] = {"360p", "720p", "1080p", "720p"};
    bench_w = calloc(1, sizeof(*bench_w));
    bench_w->alog = he_alog_ring_new(HE_ALOG_RING_BYTES);
    if (!bench_w->alog) {
        fprintf(stderr, "ring: out of memory\n");
        exit(1);
    }
    atomic_store(&bench_w->alog->enabled, 1);
    for (unsigned i = 0; i < NCONN; i++) {
        he_conn_t *c = calloc(1, sizeof(*c));
        struct sockaddr_in *sa = (struct sockaddr_in *)&c->peer;
        char *url = malloc(64);
        int n;
        if (i % 4 == 0)
            n = snprintf(url, 64, "/%s/index.m3u8", rend[i / 4]);
        else
            n = snprintf(url, 64, "/%s/seg_%05u.ts", rend[i / 4], 10 + i * 7);
        he_req_t *r = calloc(1, sizeof(*r));
        r->conn = c;
        r->url = url;
        r->url_len = (uint32_t)n;
        r->method = HTTP_GET;
        r->http_major = 1;
        r->http_minor = 1;
        r->status = 200;
        r->head_len = 230;
        c->bytes_sent = r->head_len + (i % 4 == 0 ? 400 + i * 13 : 250000 + i * 110000);
        r->cache_st = i % 3 == 0 ? HE_ALOG_CACHE_HIT_RAM : HE_ALOG_CACHE_NONE;
        bench_r[i] = r;
        sa->sin_family = AF_INET;
        sa->sin_port = htons((uint16_t)(40000 + i));
        inet_pton(AF_INET, "127.0.0.1", &sa->sin_addr);
        bench_c[i] = c;
    }
    bench_t0 = mono_ns();
}

/* Record k: 3 us after record k-1, so 1M records span 3 s. */
static void bench_push(uint64_t k)
{
    he_conn_t *c = bench_c[k % NCONN];
    uint64_t us = 40 + (k * 7919) % 3000;
    he__http_alog_push(bench_w, c, bench_r[k % NCONN], bench_t0 + k * 3000, us / 2, k % 97 == 0 ? us * 400 : us);
}

/* Pushes records [k, k + n) into an emptied ring. */
static void bench_fill(uint64_t k, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        bench_push(k + i);
}

/* The record at *pos, past a skip marker at the ring's end. */
static const he_alog_rec_t *bench_at(unsigned *pos)
{
    he_alog_ring_t *r = bench_w->alog;
    const he_alog_rec_t *rec = (const he_alog_rec_t *)(r->data + (*pos & r->mask));
    if (rec->size == 0) {
        *pos += r->size - (*pos & r->mask);
        rec = (const he_alog_rec_t *)(r->data + (*pos & r->mask));
    }
    return rec;
}

static unsigned bench_per_notify(void)
{
    /* records in HE_ALOG_NOTIFY_BYTES: what one drain finds in the server */
    he_alog_ring_t *r = bench_w->alog;
    unsigned before = atomic_load(&r->head), n = 0;
    while (atomic_load(&r->head) - before < HE_ALOG_NOTIFY_BYTES)
        bench_push(n++);
    atomic_store(&r->tail, atomic_load(&r->head));
    return n;
}

/* ---------------------------------------------------------------- measures */

static cost_t bench_push_ns(uint64_t records)
{
    he_alog_ring_t *r = bench_w->alog;
    cost_t c = {0, 0};
    stamp_t t0 = stamp();
    for (uint64_t k = 0; k < records; k++) {
        /* the consumer frees the ring now and then (one store) */
        if ((k & 1023) == 0)
            atomic_store_explicit(&r->tail, atomic_load(&r->head), memory_order_release);
        bench_push(k);
    }
    spent(&c, t0, stamp());
    atomic_store(&r->tail, atomic_load(&r->head));
    if (bench_w->stats.log_dropped) {
        fprintf(stderr, "push: %llu dropped\n", (unsigned long long)bench_w->stats.log_dropped);
        exit(1);
    }
    return cost_per(c, records);
}

/* The statistics' part of a response on the worker, beside the counters
 * (a few increments): both latency histograms, with latencies spread over
 * 20 us..20 ms as a loaded server sees them. */
static cost_t bench_hist_ns(uint64_t records)
{
    he_stats_t *st = &bench_w->stats;
    uint64_t x = 88172645463325252ull, sum = 0;
    cost_t c = {0, 0};
    stamp_t t0 = stamp();
    for (uint64_t k = 0; k < records; k++) {
        uint64_t total, ttfb;
        he_xorshift64(&x); /* no pattern the branch predictor learns */
        total = 20 + (x & 0x3fff) * ((x >> 20) & 1 ? 1 : 0) + ((x >> 32) & 0x3ff);
        ttfb = total >> ((x >> 40) & 3);
        he_hist_record(&st->ttfb, ttfb);
        he_hist_record(&st->total, total);
    }
    spent(&c, t0, stamp());
    sum = st->ttfb.count + st->total.count;
    if (sum < 2 * records) exit(1);
    return cost_per(c, records);
}

/* he_alog_format of the records one ring holds, over and over. */
static cost_t bench_format_ns(he_access_log_format_t fmt, uint64_t records, unsigned per)
{
    he_alog_ring_t *r = bench_w->alog;
    static char out[256 * 1024];
    const he_alog_rec_t **recs = malloc(sizeof(*recs) * per);
    unsigned head;
    size_t off = 0, sum = 0;
    uint64_t done = 0, k = 0;
    cost_t c = {0, 0};
    he_alog_t a;

    he_alog_init(&a);
    a.format = fmt;
    a.real_minus_mono_ns = 1764500000000000000ll - (int64_t)bench_t0;
    while (done < records) {
        atomic_store(&r->tail, atomic_load(&r->head));
        head = atomic_load(&r->head);
        bench_fill(k, per);
        k += per;
        /* the records in order, past a skip at the ring's end */
        for (unsigned i = 0; i < per; i++) {
            recs[i] = bench_at(&head);
            head += recs[i]->size;
        }
        stamp_t t0 = stamp();
        for (unsigned i = 0; i < per; i++) {
            if (sizeof(out) - off < HE_ALOG_LINE_MAX) off = 0;
            size_t n = he_alog_format(&a, recs[i], out + off, sizeof(out) - off);
            off += n;
            sum += n;
        }
        spent(&c, t0, stamp());
        done += per;
    }
    atomic_store(&r->tail, atomic_load(&r->head));
    free(recs);
    if (!sum) exit(1);
    return cost_per(c, done);
}

/* Fills the ring with one notify's worth of records, drains it and
 * flushes (as he__control_drain_logs does), over and over; only the drain
 * and the flush are timed, each on its own and together. */
static void bench_drain(const char *path, he_access_log_format_t fmt, uint64_t records,
                        unsigned per, cost_t *drain, cost_t *flush, cost_t *both)
{
    he_alog_ring_t *r = bench_w->alog;
    uint64_t done = 0, k = 0;
    cost_t d = {0, 0}, f = {0, 0}, df = {0, 0};
    he_alog_t a;
    int rc;

    /* a new file each time: truncating one to 0 makes ext4 write it out
     * on close (auto_da_alloc), a cost the server does not have */
    unlink(path);
    he_alog_init(&a);
    if ((rc = he_alog_open(&a, path, fmt)) < 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(-rc));
        exit(1);
    }
    while (done < records) {
        stamp_t t0, t1, t2;
        size_t n;
        bench_fill(k, per);
        k += per;
        t0 = stamp();
        n = he_alog_drain(&a, r);
        t1 = stamp();
        he_alog_flush(&a);
        t2 = stamp();
        spent(&d, t0, t1);
        spent(&f, t1, t2);
        spent(&df, t0, t2);
        if (n != per) {
            fprintf(stderr, "drain: %zu records, expected %u\n", n, per);
            exit(1);
        }
        done += per;
    }
    if (a.write_errors) {
        fprintf(stderr, "%s: write errors\n", path);
        exit(1);
    }
    he_alog_close(&a);
    best(drain, cost_per(d, done));
    best(flush, cost_per(f, done));
    best(both, cost_per(df, done));
}

/* write(2) of `total` bytes of log text in writes of `chunk` bytes. */
static cost_t bench_write_ns_per_byte(const char *path, size_t chunk, size_t total)
{
    static char *text;
    static size_t text_len;
    int fd;
    size_t done = 0;
    cost_t c = {0, 0};
    stamp_t t0;

    unlink(path); /* as in bench_drain */
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        exit(1);
    }
    if (text_len < chunk) {
        /* log lines, not zeros */
        static const char line[] =
            "127.0.0.1 - - [30/Nov/2026:13:09:09 +0000] \"GET /720p/seg_00012.ts HTTP/1.1\" 200 "
            "1234567 \"-\" \"-\" rt=0.000179 ttfb=0.000179 worker=0 cache=- tls=-\n";
        free(text);
        text = malloc(chunk);
        for (size_t i = 0; i < chunk; i++)
            text[i] = line[i % (sizeof(line) - 1)];
        text_len = chunk;
    }
    t0 = stamp();
    while (done < total) {
        ssize_t n = write(fd, text, chunk);
        if (n <= 0) {
            fprintf(stderr, "%s: write: %s\n", path, strerror(errno));
            exit(1);
        }
        done += (size_t)n;
    }
    spent(&c, t0, stamp());
    close(fd);
    return cost_per(c, done);
}

#define INF ((cost_t){1e30, 1e30})

/* the best of REPS runs, wall and CPU time each */
#define BEST(var, expr)                                                                            \
    do {                                                                                           \
        var = INF;                                                                                 \
        for (int rep = 0; rep < REPS; rep++)                                                       \
            best(&var, (expr));                                                                    \
    } while (0)

static void row(const char *name, cost_t c, cost_t j)
{
    printf("%-32s %8.1f %8.1f   %8.1f %8.1f\n", name, c.wall, j.wall, c.cpu, j.cpu);
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    uint64_t records = 1000000;
    bool sizes = false;
    char path[4096];
    cost_t push, hist, fmt_c, fmt_j, tot_c, tot_j;
    cost_t dr_c = INF, dr_j = INF, fl_c = INF, fl_j = INF, df_c = INF, df_j = INF;
    double line_c, line_j;
    unsigned nper;
    size_t len_c = 0, len_j = 0;
    static const size_t chunks[] = {16384, 32768, 65536, 131072, 262144, 524288, 1048576};

    for (int i = 1, pos = 0; i < argc; i++) {
        if (strcmp(argv[i], "-w") == 0)
            sizes = true;
        else if (pos++ == 0)
            dir = argv[i];
        else
            records = strtoull(argv[i], NULL, 10);
    }
    if (records < 10000) records = 10000;
    snprintf(path, sizeof(path), "%s/bench_alog_cost.%d.log", dir, (int)getpid());
    bench_setup();
    nper = bench_per_notify();

    /* line lengths, for the per-byte figures */
    {
        he_alog_t a;
        char line[HE_ALOG_LINE_MAX];
        for (int f = 0; f < 2; f++) {
            he_alog_init(&a);
            a.real_minus_mono_ns = 1764500000000000000ll - (int64_t)bench_t0;
            a.format = f ? HE_ACCESS_LOG_JSON : HE_ACCESS_LOG_COMBINED;
            for (unsigned i = 0; i < NCONN; i++) {
                unsigned pos = atomic_load(&bench_w->alog->head);
                bench_push(i);
                const he_alog_rec_t *rec = bench_at(&pos);
                size_t n = he_alog_format(&a, rec, line, sizeof(line));
                if (f)
                    len_j += n;
                else
                    len_c += n;
                atomic_store(&bench_w->alog->tail, atomic_load(&bench_w->alog->head));
                if (i == 1) fputs(line, stdout);
            }
        }
    }
    line_c = (double)len_c / NCONN;
    line_j = (double)len_j / NCONN;

    BEST(push, bench_push_ns(records));
    BEST(hist, bench_hist_ns(records));
    BEST(fmt_c, bench_format_ns(HE_ACCESS_LOG_COMBINED, records, nper));
    BEST(fmt_j, bench_format_ns(HE_ACCESS_LOG_JSON, records, nper));
    for (int rep = 0; rep < REPS; rep++) {
        bench_drain(path, HE_ACCESS_LOG_COMBINED, records, nper, &dr_c, &fl_c, &df_c);
        bench_drain(path, HE_ACCESS_LOG_JSON, records, nper, &dr_j, &fl_j, &df_j);
    }

    printf("records %llu per measurement, best of %d; %u records per drain; "
           "line %.0f B combined, %.0f B json; file %s\n",
           (unsigned long long)records, REPS, nper, line_c, line_j, path);
    tot_c = (cost_t){push.wall + df_c.wall, push.cpu + df_c.cpu};
    tot_j = (cost_t){push.wall + df_j.wall, push.cpu + df_j.cpu};
    printf("%-32s %8s %8s   %8s %8s\n", "ns per record", "combined", "json", "cpu:comb",
           "cpu:json");
    row("stats: 2 histograms (worker)", hist, hist);
    row("push (worker)", push, push);
    row("format", fmt_c, fmt_j);
    row("drain (format into batch)", dr_c, dr_j);
    row("flush (write to file)", fl_c, fl_j);
    row("control thread: drain + flush", df_c, df_j);
    row("total: push + drain + flush", tot_c, tot_j);
    if (!sizes) {
        unlink(path);
        return 0;
    }
    printf("write(2) of log text to file, by write size:\n");
    for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
        cost_t w;
        BEST(w, bench_write_ns_per_byte(path, chunks[i], (size_t)((double)records * line_c)));
        printf("  %7zu KiB: %.3f ns/B = %5.1f ns per combined line (cpu %.3f ns/B)\n",
               chunks[i] / 1024, w.wall, w.wall * line_c, w.cpu);
    }
    unlink(path);
    return 0;
}
