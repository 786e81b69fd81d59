/* server/fcache.c: hits cost no syscalls, entries revalidate after
 * valid_ms, replaced files are noticed, absence is cached, eviction keeps
 * the table bounded, nothing outside root is ever opened, with or without
 * openat2, a FIFO neither blocks nor is served, and a file rewritten in
 * place within a second gets a new entry and ETag. A live playlist is
 * revalidated after live_fraction of its target duration. The hash is keyed per
 * cache (another key in each instance and each process), and a flood of
 * 404 paths chosen to share one bucket cannot make a lookup compare more
 * than HE_FCACHE_CHAIN_MAX entries; what a lookup costs is printed. Time
 * is injected (now_ms). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "he_test.h"
#include "server/handler/fcache.c"

static char dir[PATH_MAX];

static void put_file(const char *rel, const char *content)
{
    char p[PATH_MAX + 64];
    FILE *f;
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    f = fopen(p, "w");
    fputs(content, f);
    fclose(f);
}

static void set_mtime(const char *rel, time_t sec, long nsec)
{
    char p[PATH_MAX + 64];
    struct timespec ts[2] = {{sec, nsec}, {sec, nsec}};
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    utimensat(AT_FDCWD, p, ts, 0);
}

static void run(bool beneath)
{
    char p[PATH_MAX + 64], q[PATH_MAX + 64];
    int root_fd = open(dir, O_PATH | O_DIRECTORY);
    he_fcache_t *fc = he_fcache_new(root_fd, 4, 1000, 50, beneath);
    he_file_t *f, *g;
    int err = 0;
    bool hit = false;

    /* first open: a miss, stat results and validators filled */
    f = he_fcache_get(fc, "a.m3u8", 6, 0, &err, &hit);
    HE_CHECK(f != NULL);
    HE_CHECK(!hit);
    HE_CHECK_INT(f->size, 8);
    HE_CHECK_INT(f->type, HE_SEG_TYPE_M3U8);
    HE_CHECK_INT(f->kind, HE_SEG_KIND_MEDIA);
    HE_CHECK(f->body && memcmp(f->body, "#EXTM3U\n", 8) == 0);
    HE_CHECK(f->etag_len > 4 && f->etag[0] == '"');
    he_fcache_put(fc, f);

    /* within valid_ms: a hit on the same entry */
    g = he_fcache_get(fc, "a.m3u8", 6, 999, &err, &hit);
    HE_CHECK(g == f);
    HE_CHECK(hit);
    he_fcache_put(fc, g);

    /* replaced by rename: noticed at the next revalidation, not before */
    put_file("a.tmp", "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nx.m3u8\n");
    snprintf(p, sizeof(p), "%s/a.tmp", dir);
    snprintf(q, sizeof(q), "%s/a.m3u8", dir);
    rename(p, q);
    g = he_fcache_get(fc, "a.m3u8", 6, 500, &err, &hit);
    HE_CHECK(g == f && hit);
    he_fcache_put(fc, g);
    g = he_fcache_get(fc, "a.m3u8", 6, 1500, &err, &hit);
    HE_CHECK(g != NULL && !hit);
    HE_CHECK_INT(g->kind, HE_SEG_KIND_MASTER);
    HE_CHECK_INT(g->size, 45);
    he_fcache_put(fc, g);

    /* segments are not held in memory: they go out by sendfile */
    f = he_fcache_get(fc, "s.ts", 4, 1500, &err, &hit);
    HE_CHECK(f && f->body == NULL && f->type == HE_SEG_TYPE_TS && f->kind == HE_SEG_KIND_SEGMENT);

    /* a held entry survives eviction and stays usable until put */
    he_fcache_get(fc, "n1", 2, 1500, &err, &hit);
    he_fcache_get(fc, "n2", 2, 1500, &err, &hit);
    he_fcache_get(fc, "n3", 2, 1500, &err, &hit);
    he_fcache_get(fc, "n4", 2, 1500, &err, &hit);
    HE_CHECK(fc->count <= 4);
    HE_CHECK(f->fd >= 0);
    HE_CHECK_INT(f->size, 3);
    he_fcache_put(fc, f);

    /* absence is cached, then retried after valid_ms */
    f = he_fcache_get(fc, "later.ts", 8, 2000, &err, &hit);
    HE_CHECK(f == NULL && err == -ENOENT && !hit);
    put_file("later.ts", "x");
    f = he_fcache_get(fc, "later.ts", 8, 2500, &err, &hit);
    HE_CHECK(f == NULL && err == -ENOENT && hit);
    f = he_fcache_get(fc, "later.ts", 8, 3100, &err, &hit);
    HE_CHECK(f != NULL);
    if (f) he_fcache_put(fc, f);
    snprintf(q, sizeof(q), "%s/later.ts", dir);
    unlink(q);

    /* directories, the root itself, and escapes */
    f = he_fcache_get(fc, "sub", 3, 4000, &err, &hit);
    HE_CHECK(f == NULL && err == -EISDIR);
    f = he_fcache_get(fc, "", 0, 4000, &err, &hit);
    HE_CHECK(f == NULL && err == -EISDIR);
    f = he_fcache_get(fc, "escape.ts", 9, 4000, &err, &hit);
    HE_CHECK(f == NULL && err == -EXDEV);
    f = he_fcache_get(fc, "etc/passwd", 10, 4000, &err, &hit);
    HE_CHECK(f == NULL && err == -EXDEV);
    f = he_fcache_get(fc, "../outside.ts", 13, 4000, &err, &hit);
    HE_CHECK(f == NULL && (err == -EXDEV || err == -ENOENT));
    f = he_fcache_get(fc, "inside.ts", 9, 4000, &err, &hit);
    HE_CHECK(f != NULL && f->size == 3);
    if (f) he_fcache_put(fc, f);

    /* a FIFO: opening it must not wait for a writer (main's alarm ends a
     * test that does), and it is not served */
    f = he_fcache_get(fc, "pipe.ts", 7, 4000, &err, &hit);
    HE_CHECK(f == NULL && err == -ENOENT);

    /* rewritten in place within one second at the same size (a live
     * playlist without a temporary file): the nanoseconds tell, and the
     * ETag carries them; whole-second times keep nginx's ETag */
    put_file("live.m3u8", "#EXTM3U\n#A\n");
    set_mtime("live.m3u8", 1700000000, 0);
    f = he_fcache_get(fc, "live.m3u8", 9, 5000, &err, &hit);
    HE_CHECK(f != NULL);
    if (f) {
        HE_CHECK_STR(f->etag, "\"6553f100-b\"");
        HE_CHECK_INT(f->etag_len, 12);
        he_fcache_put(fc, f);
    }
    put_file("live.m3u8", "#EXTM3U\n#B\n");
    set_mtime("live.m3u8", 1700000000, 5000);
    f = he_fcache_get(fc, "live.m3u8", 9, 6100, &err, &hit);
    HE_CHECK(f != NULL && !hit);
    if (f) {
        HE_CHECK(f->body && memcmp(f->body, "#EXTM3U\n#B\n", 11) == 0);
        HE_CHECK_STR(f->etag, "\"6553f100-b-1388\"");
        HE_CHECK_INT(f->etag_len, 17);
        he_fcache_put(fc, f);
    }

    he_fcache_free(fc);
    close(root_fd);
}

/* the bucket of a path, as the cache computes it (a test knows the key;
 * a client does not) */
#define BUCKET(fc, s, len) (he_fcache_hash((fc), (s), (len)) & ((fc)->nbuckets - 1))

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Two caches, and a cache in another process, draw other keys: the same
 * path lands elsewhere, so no list of colliding paths works twice. */
static void test_seed_differs(int root_fd)
{
    he_fcache_t *a = he_fcache_new(root_fd, 1024, 1000, 50, true);
    he_fcache_t *b = he_fcache_new(root_fd, 1024, 1000, 50, true);
    unsigned same = 0;
    uint32_t mine, theirs = 0;
    int pfd[2];
    pid_t pid;

    HE_CHECK(a && b);
    HE_CHECK(memcmp(a->key, b->key, sizeof(a->key)) != 0);
    for (int i = 0; i < 64; i++) {
        char p[32];
        int n = snprintf(p, sizeof(p), "/x/%d.ts", i);
        same += he_fcache_hash(a, p, (size_t)n) == he_fcache_hash(b, p, (size_t)n);
    }
    HE_CHECK(same < 4); /* 32-bit values: equal by chance about never */

    HE_CHECK_INT(pipe(pfd), 0);
    pid = fork();
    if (pid == 0) {
        he_fcache_t *c = he_fcache_new(root_fd, 1024, 1000, 50, true);
        uint32_t h = c ? he_fcache_hash(c, "/seg.ts", 7) : 0;
        ssize_t n = write(pfd[1], &h, sizeof(h));
        _exit(n == sizeof(h) ? 0 : 1);
    }
    HE_CHECK_INT(read(pfd[0], &theirs, sizeof(theirs)), sizeof(theirs));
    waitpid(pid, NULL, 0);
    close(pfd[0]);
    close(pfd[1]);
    mine = he_fcache_hash(a, "/seg.ts", 7);
    HE_CHECK(mine != theirs);
    HE_CHECK(mine == he_fcache_hash(a, "/seg.ts", 7)); /* stable within a cache */
    he_fcache_free(a);
    he_fcache_free(b);
}

/* ns per lookup of path, a hit, averaged over n */
static double lookup_ns(he_fcache_t *fc, const char *path, int n)
{
    int err;
    bool hit;
    double t0 = now_ns();
    for (int i = 0; i < n; i++) {
        he_file_t *f = he_fcache_get(fc, path, strlen(path), 0, &err, &hit);
        if (f) he_fcache_put(fc, f);
    }
    return (now_ns() - t0) / n;
}

/* 2,000 absent paths that all land in one bucket (found with the key, as
 * an attacker who had it would): each is a cached 404, and a lookup still
 * compares at most HE_FCACHE_CHAIN_MAX entries. */
static void test_collision_flood(int root_fd)
{
    he_fcache_t *fc = he_fcache_new(root_fd, 1024, 1000000, 50, true);
    static char paths[2000][24];
    unsigned n = 0, target, chain = 0;
    int err;
    bool hit;
    double normal, worst;
    he_file_t *f;

    HE_CHECK(fc != NULL);
    if (!fc) return;
    /* the flooded bucket is any but the real file's: the key is random,
     * and now and then "nope-0" shares its bucket with "s.ts" */
    for (unsigned i = 0;; i++) {
        char first[24];
        int len = snprintf(first, sizeof(first), "nope-%u", i);
        target = BUCKET(fc, first, (size_t)len);
        if (target != BUCKET(fc, "s.ts", 4)) break;
    }
    for (unsigned i = 0; n < 2000 && i < 20000000; i++) {
        int len = snprintf(paths[n], sizeof(paths[n]), "nope-%u", i);
        if (BUCKET(fc, paths[n], (size_t)len) == target) n++;
    }
    HE_CHECK_INT(n, 2000);
    f = he_fcache_get(fc, "s.ts", 4, 0, &err, &hit); /* a real file, elsewhere */
    HE_CHECK(f != NULL);
    if (f) he_fcache_put(fc, f);
    for (unsigned i = 0; i < n; i++) {
        f = he_fcache_get(fc, paths[i], strlen(paths[i]), 0, &err, &hit);
        HE_CHECK(f == NULL && err == -ENOENT);
        err = 0;
        f = he_fcache_get(fc, paths[i], strlen(paths[i]), 0, &err, &hit); /* cached 404 */
        HE_CHECK(f == NULL && err == -ENOENT && hit);
    }
    for (he_file_t *e = fc->buckets[target]; e; e = e->hnext)
        chain++;
    HE_CHECK_INT(chain, HE_FCACHE_CHAIN_MAX);
    HE_CHECK(fc->walk_max <= HE_FCACHE_CHAIN_MAX);
    HE_CHECK_INT(fc->chain_evictions, n - HE_FCACHE_CHAIN_MAX);
    f = he_fcache_get(fc, "s.ts", 4, 0, &err, &hit);
    HE_CHECK(f != NULL && hit); /* the flood did not push it out */
    if (f) he_fcache_put(fc, f);

    /* printed, not asserted: a hit on a path of its own bucket, and on the
     * oldest path of the flooded one (the longest walk there is) */
    normal = lookup_ns(fc, "s.ts", 200000);
    worst = lookup_ns(fc, paths[n - HE_FCACHE_CHAIN_MAX], 200000);
    fprintf(stderr, "fcache lookup: %.0f ns a hit, %.0f ns at the end of a flooded bucket "
                    "(%u entries compared at most)\n",
            normal, worst, fc->walk_max);
    he_fcache_free(fc);
}

/* Replaces rel by rename, as a packager publishes (ffmpeg's temp_file). */
static void publish(const char *rel, const char *content)
{
    char a[PATH_MAX + 64], b[PATH_MAX + 64];
    put_file("publish.tmp", content);
    snprintf(a, sizeof(a), "%s/publish.tmp", dir);
    snprintf(b, sizeof(b), "%s/%s", dir, rel);
    rename(a, b);
}

/* Whether get at now_ms answers a new entry (the file was stat'ed and
 * found replaced) rather than the one it had. */
static bool sees_new(he_fcache_t *fc, const char *rel, uint64_t now_ms)
{
    int err = 0;
    bool hit = false;
    he_file_t *f = he_fcache_get(fc, rel, strlen(rel), now_ms, &err, &hit);
    if (f) he_fcache_put(fc, f);
    return f && !hit;
}

#define LIVE_TD2 "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:%d\n#EXTINF:2,\ns%d.ts\n"

/* A live media playlist is stat'ed again after live_pct of its target
 * duration (so from root the edge follows the packager within a segment);
 * VOD (ENDLIST) and master playlists keep valid_ms; one that does not
 * parse (caught while rewritten in place) is stat'ed on every request. */
static void test_live_playlists(int root_fd)
{
    he_fcache_t *fc = he_fcache_new(root_fd, 64, 5000, 50, true);
    char body[256];
    int err = 0;
    bool hit = false;
    he_file_t *f;

    HE_CHECK(fc != NULL);
    if (!fc) return;

    /* live, TD 2 s, 50 %: 1 s */
    snprintf(body, sizeof(body), LIVE_TD2, 1, 1);
    publish("l.m3u8", body);
    f = he_fcache_get(fc, "l.m3u8", 6, 10000, &err, &hit);
    HE_CHECK(f && !hit);
    if (f) {
        HE_CHECK_INT(f->valid_ms, 1000);
        HE_CHECK_INT(f->kind, HE_SEG_KIND_MEDIA);
        he_fcache_put(fc, f);
    }
    snprintf(body, sizeof(body), LIVE_TD2, 2, 2);
    publish("l.m3u8", body);
    HE_CHECK(!sees_new(fc, "l.m3u8", 10999));
    HE_CHECK(sees_new(fc, "l.m3u8", 11000));
    /* unchanged: stat'ed, trusted again for 1 s from then */
    HE_CHECK(!sees_new(fc, "l.m3u8", 12000));
    snprintf(body, sizeof(body), LIVE_TD2, 3, 3);
    publish("l.m3u8", body);
    HE_CHECK(!sees_new(fc, "l.m3u8", 12999));
    HE_CHECK(sees_new(fc, "l.m3u8", 13000));

    /* the same playlist ended (EXT-X-ENDLIST): fd_cache.valid again */
    publish("l.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns3.ts\n#EXT-X-ENDLIST\n");
    HE_CHECK(sees_new(fc, "l.m3u8", 14000));
    f = he_fcache_get(fc, "l.m3u8", 6, 14000, &err, &hit);
    HE_CHECK(f && hit && f->valid_ms == 5000);
    if (f) he_fcache_put(fc, f);
    publish("l.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns4.ts\n#EXT-X-ENDLIST\n");
    HE_CHECK(!sees_new(fc, "l.m3u8", 18999));
    HE_CHECK(sees_new(fc, "l.m3u8", 19000));

    /* a master playlist keeps valid_ms */
    publish("m.m3u8", "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nl.m3u8\n");
    f = he_fcache_get(fc, "m.m3u8", 6, 20000, &err, &hit);
    HE_CHECK(f && f->kind == HE_SEG_KIND_MASTER && f->valid_ms == 5000);
    if (f) he_fcache_put(fc, f);

    /* a long target duration: never trusted longer than valid_ms */
    publish("t.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:30\n#EXTINF:30,\na.ts\n");
    f = he_fcache_get(fc, "t.m3u8", 6, 20000, &err, &hit);
    HE_CHECK(f && f->valid_ms == 5000);
    if (f) he_fcache_put(fc, f);

    /* half written (an EXTINF without its URI, or empty): looked at again
     * on the next request, so the finished file is seen at once */
    publish("h.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\n");
    f = he_fcache_get(fc, "h.m3u8", 6, 20000, &err, &hit);
    HE_CHECK(f && f->valid_ms == 0);
    if (f) he_fcache_put(fc, f);
    snprintf(body, sizeof(body), LIVE_TD2, 9, 9);
    publish("h.m3u8", body);
    HE_CHECK(sees_new(fc, "h.m3u8", 20000));
    f = he_fcache_get(fc, "h.m3u8", 6, 20000, &err, &hit);
    HE_CHECK(f && hit && f->valid_ms == 1000);
    if (f) he_fcache_put(fc, f);

    /* segments and keys keep valid_ms */
    f = he_fcache_get(fc, "s.ts", 4, 20000, &err, &hit);
    HE_CHECK(f && f->valid_ms == 5000);
    if (f) he_fcache_put(fc, f);

    /* a live EVENT playlist larger than the bodies kept in memory is
     * still parsed whole, once per version */
    {
        size_t cap = HE_FCACHE_BODY_MAX + 4096, n;
        char *big = malloc(cap);
        HE_CHECK(big != NULL);
        if (big) {
            n = (size_t)snprintf(big, cap,
                                 "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:EVENT\n");
            for (int i = 0; n + 32 < cap; i++)
                n += (size_t)snprintf(big + n, cap - n, "#EXTINF:4,\nseg%06d.ts\n", i);
            publish("e.m3u8", big);
            f = he_fcache_get(fc, "e.m3u8", 6, 20000, &err, &hit);
            HE_CHECK(f && f->body == NULL && f->size > HE_FCACHE_BODY_MAX);
            if (f) {
                HE_CHECK_INT(f->valid_ms, 2000);
                he_fcache_put(fc, f);
            }
            free(big);
        }
    }
    he_fcache_free(fc);

    /* another live_fraction */
    fc = he_fcache_new(root_fd, 64, 5000, 25, true);
    HE_CHECK(fc != NULL);
    if (!fc) return;
    f = he_fcache_get(fc, "h.m3u8", 6, 0, &err, &hit);
    HE_CHECK(f && f->valid_ms == 500);
    if (f) he_fcache_put(fc, f);
    he_fcache_free(fc);
}

int main(void)
{
    char tmpl[] = "/tmp/he-fcache-XXXXXX";
    char p[PATH_MAX + 32], outside[PATH_MAX];
    char *base = mkdtemp(tmpl);

    snprintf(dir, sizeof(dir), "%s/root", base);
    mkdir(dir, 0755);
    snprintf(p, sizeof(p), "%s/sub", dir);
    mkdir(p, 0755);
    put_file("a.m3u8", "#EXTM3U\n");
    put_file("s.ts", "abc");
    snprintf(outside, sizeof(outside), "%s/outside.ts", base);
    FILE *o = fopen(outside, "w");
    fputs("secret", o);
    fclose(o);
    snprintf(p, sizeof(p), "%s/escape.ts", dir);
    symlink(outside, p);
    snprintf(p, sizeof(p), "%s/etc", dir);
    symlink("/etc", p);
    snprintf(p, sizeof(p), "%s/inside.ts", dir);
    symlink("s.ts", p);
    snprintf(p, sizeof(p), "%s/pipe.ts", dir);
    mkfifo(p, 0644);
    alarm(30);

    run(true);
    put_file("a.m3u8", "#EXTM3U\n");
    run(false);
    {
        int root_fd = open(dir, O_PATH | O_DIRECTORY);
        test_seed_differs(root_fd);
        test_collision_flood(root_fd);
        test_live_playlists(root_fd);
        close(root_fd);
    }

    snprintf(p, sizeof(p), "rm -rf '%s'", base);
    if (system(p) != 0) fprintf(stderr, "cleanup failed\n");
    HE_TEST_MAIN_END();
}
