/* cache/store.c + cache/swrite.c: objects written through the state
 * machine (run on syscalls) are found, survive a restart (index rebuilt
 * from headers), and temp, truncated and corrupt files are removed and
 * never served. Eviction keeps each directory under its limit (SIEVE);
 * disk errors (injected ENOSPC, a real 1 MiB tmpfs when we may mount one)
 * turn into misses, are counted, and are logged once per cause. A purge
 * while an object's write is running (at any step) leaves no entry and no
 * file behind, however the write goes on. A purge's unlink is made durable
 * (its directory fsync'd) before it is answered. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cache/internal.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/stats.h"
#include "cache/store.h"
#include "he_test.h"

#define NOW 1700000000000ll

static char dir[PATH_MAX];
static he_cache_ram_t *ram;
static int logs;

static void log_fn(void *ctx, int level, const char *msg)
{
    logs++;
    fprintf(stderr, "  log: %s\n", msg);
}

/* A purge's durability is the order of its system calls (a power loss is
 * not to be had here): these take the place of libc's for the store's
 * calls and note what they were given while recording. */
static char calls[2 * PATH_MAX];
static bool recording;

static void note(const char *what, const char *arg)
{
    size_t l = strlen(calls);
    if (recording) snprintf(calls + l, sizeof(calls) - l, "%s:%s;", what, arg);
}

int unlinkat(int dirfd, const char *path, int flags)
{
    note("unlink", path);
    return (int)syscall(SYS_unlinkat, dirfd, path, flags);
}

int fsync(int fd)
{
    char link[64], target[PATH_MAX];
    ssize_t n;
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, target, sizeof(target) - 1);
    target[n > 0 ? n : 0] = '\0';
    note("fsync", target);
    return (int)syscall(SYS_fsync, fd);
}

static he_cache_obj_t *mkobj(const char *name, size_t len)
{
    he_cache_key_t k;
    he_cache_obj_t *o;
    he_cache_meta_t m;
    char *buf = malloc(len + 1);
    he_cache_key_set(&k, name, strlen(name));
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)(k.hash >> (i % 8 * 8)) + (char)i;
    o = he_cache_obj_new(ram, 0, &k, len);
    he_cache_obj_append(o, buf, len, NULL);
    memset(&m, 0, sizeof(m));
    m.status = 200;
    m.kind = HE_SEG_KIND_SEGMENT;
    m.fresh.stored_ms = NOW;
    m.fresh.expires_ms = NOW + 60000;
    m.fresh.swr_ms = 5;
    strcpy(m.content_type, "video/mp2t");
    strcpy(m.etag, "\"abc\"");
    strcpy(m.last_modified, "Tue, 14 Nov 2023 22:13:20 GMT");
    he_cache_obj_set_meta(o, &m);
    he_cache_obj_finish(o);
    free(buf);
    return o;
}

static int store_obj(he_cache_store_t *s, const char *name, size_t len, he_cache_stats_t *st,
                     he_cache_swrite_inject_fn inject, void *ctx)
{
    he_cache_obj_t *o = mkobj(name, len);
    he_cache_swrite_t *w = he_cache_swrite_new(s, o, st);
    int rc = -ENOSPC;
    if (w) {
        rc = he_cache_swrite_run_sync(w, st, inject, ctx);
        he_cache_swrite_free(w);
    }
    he_cache_obj_unref(o);
    he_cache_store_unlink_sync(s);
    return rc;
}

/* Reads the body through the hit and compares it with mkobj's bytes. */
static bool body_ok(const he_cache_store_hit_t *h, const char *name, size_t len)
{
    he_cache_key_t k;
    char *buf = malloc(len + 1);
    int fd = openat(h->dirfd, h->path, O_RDONLY);
    bool ok = fd >= 0 && h->body_len == len &&
              pread(fd, buf, len + 1, (off_t)h->body_off) == (ssize_t)len;
    he_cache_key_set(&k, name, strlen(name));
    for (size_t i = 0; ok && i < len; i++)
        ok = buf[i] == (char)((char)(k.hash >> (i % 8 * 8)) + (char)i);
    if (fd >= 0) close(fd);
    free(buf);
    return ok;
}

static bool found(he_cache_store_t *s, const char *name, he_cache_store_hit_t *h)
{
    he_cache_key_t k;
    he_cache_store_hit_t tmp;
    he_cache_key_set(&k, name, strlen(name));
    return he_cache_store_lookup(s, &k, h ? h : &tmp, NULL) == 0;
}

static int count_files(const char *sub)
{
    char cmd[PATH_MAX + 64];
    FILE *f;
    int n = 0;
    snprintf(cmd, sizeof(cmd), "find %s/%s -type f | wc -l", dir, sub);
    f = popen(cmd, "r");
    if (fscanf(f, "%d", &n) != 1) n = -1;
    pclose(f);
    return n;
}

static void test_write_rebuild(void)
{
    he_cache_store_opts_t o = {.ndirs = 1, .log = log_fn, .verify_bodies = true};
    he_cache_store_t *s;
    he_cache_stats_t st = {0};
    he_cache_store_hit_t h;
    char p[PATH_MAX + 128], q[PATH_MAX + 128];
    int fd;

    o.dirs[0] = dir;
    o.bytes[0] = 10 << 20;
    HE_CHECK_INT(he_cache_store_open(&s, &o, NOW, &st), 0);
    HE_CHECK_INT(store_obj(s, "a/one.ts", 100000, &st, NULL, NULL), 0);
    HE_CHECK_INT(store_obj(s, "a/two.ts", 1, &st, NULL, NULL), 0);
    HE_CHECK_INT(store_obj(s, "a/three.ts?lang=en", 20000, &st, NULL, NULL), 0);
    HE_CHECK_INT(store_obj(s, "a/empty.ts", 0, &st, NULL, NULL), 0);
    HE_CHECK_INT(st.store_writes, 4);
    HE_CHECK_INT(he_cache_store_count(s), 4);
    HE_CHECK(found(s, "a/one.ts", &h) && body_ok(&h, "a/one.ts", 100000));
    HE_CHECK_STR(h.meta.content_type, "video/mp2t");
    HE_CHECK_STR(h.meta.etag, "\"abc\"");
    HE_CHECK_INT(h.meta.fresh.expires_ms, NOW + 60000);
    HE_CHECK(!found(s, "a/four.ts", NULL));
    /* a newer version replaces the old file */
    HE_CHECK_INT(store_obj(s, "a/two.ts", 2, &st, NULL, NULL), 0);
    HE_CHECK_INT(he_cache_store_count(s), 4);
    HE_CHECK_INT(count_files("[0-9a-f][0-9a-f]"), 4);
    HE_CHECK_INT(count_files("tmp"), 0);
    he_cache_store_close(s);

    /* restart: the same index from the headers */
    memset(&st, 0, sizeof(st));
    HE_CHECK_INT(he_cache_store_open(&s, &o, NOW + 1, &st), 0);
    HE_CHECK_INT(he_cache_store_count(s), 4);
    HE_CHECK(found(s, "a/one.ts", &h) && body_ok(&h, "a/one.ts", 100000));
    HE_CHECK_STR(h.meta.last_modified, "Tue, 14 Nov 2023 22:13:20 GMT");
    HE_CHECK_INT(h.meta.fresh.swr_ms, 5);
    HE_CHECK(found(s, "a/two.ts", &h) && body_ok(&h, "a/two.ts", 2));
    HE_CHECK(found(s, "a/three.ts?lang=en", &h) && body_ok(&h, "a/three.ts?lang=en", 20000));
    HE_CHECK(found(s, "a/empty.ts", &h) && h.body_len == 0);
    HE_CHECK_INT(st.disk_errors[HE_CACHE_DERR_CORRUPT], 0);

    /* damage: a temp file (crash mid-write), a truncated object, a flipped
     * body byte, a flipped header byte, a stray file */
    snprintf(p, sizeof(p), "%s/tmp/0123456789abcdef-0000000000000001.tmp", dir);
    fd = open(p, O_CREAT | O_WRONLY, 0644);
    HE_CHECK(write(fd, "partial", 7) == 7);
    close(fd);
    HE_CHECK(found(s, "a/one.ts", &h));
    snprintf(p, sizeof(p), "%s/%s", dir, h.path);
    HE_CHECK(truncate(p, (off_t)(h.body_off + 500)) == 0);
    HE_CHECK(found(s, "a/three.ts?lang=en", &h));
    snprintf(p, sizeof(p), "%s/%s", dir, h.path);
    fd = open(p, O_WRONLY);
    HE_CHECK(pwrite(fd, "X", 1, (off_t)h.body_off + 777) == 1);
    close(fd);
    HE_CHECK(found(s, "a/two.ts", &h));
    snprintf(p, sizeof(p), "%s/%s", dir, h.path);
    fd = open(p, O_WRONLY);
    HE_CHECK(pwrite(fd, "\x7f", 1, 70) == 1); /* inside the key */
    close(fd);
    snprintf(q, sizeof(q), "%s/00/junk.obj", dir);
    fd = open(q, O_CREAT | O_WRONLY, 0644);
    close(fd);
    he_cache_store_close(s);

    memset(&st, 0, sizeof(st));
    logs = 0;
    HE_CHECK_INT(he_cache_store_open(&s, &o, NOW + 2, &st), 0);
    HE_CHECK_INT(he_cache_store_count(s), 1);
    HE_CHECK(found(s, "a/empty.ts", NULL));
    HE_CHECK(!found(s, "a/one.ts", NULL));
    HE_CHECK(!found(s, "a/two.ts", NULL));
    HE_CHECK(!found(s, "a/three.ts?lang=en", NULL));
    HE_CHECK_INT(st.disk_errors[HE_CACHE_DERR_CORRUPT], 4);
    HE_CHECK_INT(logs, 1); /* once per cause */
    HE_CHECK_INT(count_files("tmp"), 0);
    HE_CHECK_INT(count_files("[0-9a-f][0-9a-f]"), 1);
    he_cache_store_close(s);

    /* without body verification a flipped body byte is not seen at start-up
     * (the reader verifies lazily), but the header checks still apply */
    o.verify_bodies = false;
    HE_CHECK_INT(he_cache_store_open(&s, &o, NOW + 3, &st), 0);
    HE_CHECK_INT(he_cache_store_count(s), 1);
    /* purge */
    {
        he_cache_key_t k;
        char want[2 * PATH_MAX], name[48];
        he_cache_key_set(&k, "a/empty.ts", 10);
        calls[0] = '\0';
        recording = true;
        HE_CHECK_INT(he_cache_store_remove(s, &k), 0);
        recording = false;
        /* gone before the purge is answered, not queued for the ring: a
         * crash now must not bring it back at the next start-up; and the
         * removal is on disk: its directory fsync'd after the unlink */
        HE_CHECK_INT(count_files("[0-9a-f][0-9a-f]"), 0);
        HE_CHECK(sscanf(calls, "unlink:%47[^;]", name) == 1);
        snprintf(want, sizeof(want), "unlink:%s;fsync:%s/%.2s;", name, dir, name);
        HE_CHECK_STR(calls, want);
        HE_CHECK_INT(he_cache_store_remove(s, &k), -ENOENT);
        he_cache_store_unlink_sync(s);
        HE_CHECK_INT(count_files("[0-9a-f][0-9a-f]"), 0);
    }
    he_cache_store_close(s);
}

static void test_eviction(void)
{
    he_cache_store_opts_t o = {.ndirs = 1};
    he_cache_store_t *s;
    he_cache_stats_t st = {0};
    char sub[PATH_MAX + 16];
    snprintf(sub, sizeof(sub), "%s/ev", dir);
    o.dirs[0] = sub;
    o.bytes[0] = 5 * 4096; /* five objects of one block each */
    HE_CHECK_INT(he_cache_store_open(&s, &o, NOW, &st), 0);
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "e%d", i);
        HE_CHECK_INT(store_obj(s, name, 1000, &st, NULL, NULL), 0);
    }
    HE_CHECK_INT(he_cache_store_used(s, 0), 5 * 4096);
    HE_CHECK(found(s, "e0", NULL)); /* visited: survives the hand */
    HE_CHECK_INT(store_obj(s, "e5", 1000, &st, NULL, NULL), 0);
    HE_CHECK(found(s, "e0", NULL));
    HE_CHECK(!found(s, "e1", NULL));
    HE_CHECK_INT(st.evictions[HE_CACHE_TIER_SSD], 1);
    HE_CHECK_INT(store_obj(s, "e6", 1000, &st, NULL, NULL), 0);
    HE_CHECK(!found(s, "e2", NULL));
    HE_CHECK_INT(he_cache_store_used(s, 0), 5 * 4096);
    /* larger than the directory: not written at all */
    HE_CHECK_INT(store_obj(s, "huge", 6 * 4096, &st, NULL, NULL), -ENOSPC);
    he_cache_store_close(s);
    snprintf(sub, sizeof(sub), "ev/[0-9a-f][0-9a-f]");
    HE_CHECK_INT(count_files(sub), 5);
}

static int inject_nospc(void *ctx, int op, int res)
{
    int *which = ctx;
    return op == *which ? -ENOSPC : res;
}

static void test_errors(void)
{
    he_cache_store_opts_t o = {.ndirs = 1, .log = log_fn};
    he_cache_store_t *s;
    he_cache_stats_t st = {0};
    char sub[PATH_MAX + 16];
    int op;
    snprintf(sub, sizeof(sub), "%s/err", dir);
    o.dirs[0] = sub;
    o.bytes[0] = 1 << 20;
    HE_CHECK_INT(he_cache_store_open(&s, &o, NOW, &st), 0);
    logs = 0;
    op = IORING_OP_WRITE;
    HE_CHECK_INT(store_obj(s, "x", 5000, &st, inject_nospc, &op), -ENOSPC);
    op = IORING_OP_RENAMEAT;
    HE_CHECK_INT(store_obj(s, "y", 5000, &st, inject_nospc, &op), -ENOSPC);
    op = IORING_OP_OPENAT;
    HE_CHECK_INT(store_obj(s, "z", 5000, &st, inject_nospc, &op), -ENOSPC);
    HE_CHECK_INT(st.disk_errors[HE_CACHE_DERR_NOSPC], 3);
    HE_CHECK_INT(logs, 1);
    HE_CHECK(!found(s, "x", NULL) && !found(s, "y", NULL) && !found(s, "z", NULL));
    snprintf(sub, sizeof(sub), "err/tmp");
    HE_CHECK_INT(count_files(sub), 0);
    HE_CHECK_INT(he_cache_store_used(s, 0), 0); /* reservations released */
    /* an error the server saw while sending: counted, entry dropped */
    HE_CHECK_INT(store_obj(s, "w", 10, &st, NULL, NULL), 0);
    {
        he_cache_key_t k;
        he_cache_key_set(&k, "w", 1);
        he_cache_store_error(s, &k, -EIO, &st);
        HE_CHECK_INT(st.disk_errors[HE_CACHE_DERR_IO], 1);
        HE_CHECK(!found(s, "w", NULL));
    }
    /* by file: a hit's file replaced by a newer version (and unlinked)
     * before it was opened leaves the newer entry alone, counts nothing */
    {
        he_cache_key_t k;
        he_cache_store_hit_t h1, h2, h;
        uint64_t other = st.disk_errors[HE_CACHE_DERR_OTHER];
        int fd;
        he_cache_key_set(&k, "v", 1);
        HE_CHECK_INT(store_obj(s, "v", 10, &st, NULL, NULL), 0);
        HE_CHECK(found(s, "v", &h1));
        HE_CHECK_INT(store_obj(s, "v", 20, &st, NULL, NULL), 0);
        HE_CHECK(found(s, "v", &h2) && strcmp(h1.path, h2.path) != 0);
        fd = openat(h1.dirfd, h1.path, O_RDONLY);
        HE_CHECK(fd < 0 && errno == ENOENT);
        if (fd >= 0) close(fd);
        he_cache_store_error_file(s, &k, h1.path, -ENOENT, &st);
        HE_CHECK(found(s, "v", &h) && strcmp(h.path, h2.path) == 0 && body_ok(&h, "v", 20));
        HE_CHECK_INT(st.disk_errors[HE_CACHE_DERR_OTHER], other);
        /* an I/O error on the old file: counted, the newer entry stays */
        he_cache_store_error_file(s, &k, h1.path, -EIO, &st);
        HE_CHECK_INT(st.disk_errors[HE_CACHE_DERR_IO], 2);
        HE_CHECK(found(s, "v", NULL));
        /* the entry's own file: dropped and counted */
        he_cache_store_error_file(s, &k, h2.path, -ENOENT, &st);
        HE_CHECK(!found(s, "v", NULL));
        HE_CHECK_INT(st.disk_errors[HE_CACHE_DERR_OTHER], other + 1);
    }
    he_cache_store_close(s);
}

/* Purges a key when the write reaches an operation: after it ran, or
 * (before) once it is prepared and not yet run. left: the object files
 * there are as the purge answers, what a crash at that moment leaves. */
typedef struct purge_at {
    he_cache_store_t *s;
    int op;
    bool before;
    const char *name;
    const char *files;
    int rc, left;
} purge_at_t;

static int inject_purge(void *ctx, int op, int res)
{
    purge_at_t *p = ctx;
    he_cache_key_t k;
    if (op == p->op && (res == HE_CACHE_SWRITE_BEFORE) == p->before) {
        he_cache_key_set(&k, p->name, strlen(p->name));
        p->rc = he_cache_store_remove(p->s, &k);
        p->left = p->files ? count_files(p->files) : 0;
    }
    return res;
}

static void test_purge_while_writing(void)
{
    he_cache_store_opts_t o = {.ndirs = 1, .log = log_fn};
    he_cache_store_t *s;
    he_cache_stats_t st = {0};
    char sub[PATH_MAX + 16], files[PATH_MAX + 16];
    static const int ops[] = {IORING_OP_OPENAT, IORING_OP_WRITE, IORING_OP_CLOSE,
                              IORING_OP_RENAMEAT};
    purge_at_t p;
    snprintf(sub, sizeof(sub), "%s/purge", dir);
    snprintf(files, sizeof(files), "purge/[0-9a-f][0-9a-f]");
    o.dirs[0] = sub;
    o.bytes[0] = 8 << 20;
    HE_CHECK_INT(he_cache_store_open(&s, &o, NOW, &st), 0);
    logs = 0;
    for (size_t i = 0; i < 2 * sizeof(ops) / sizeof(ops[0]); i++) {
        uint64_t purges = he_cache_store_purges(s);
        p = (purge_at_t){.s = s,
                         .op = ops[i / 2],
                         .before = i % 2,
                         .name = "pw.ts",
                         .files = files,
                         .rc = 1,
                         .left = -1};
        /* the purge finds the write (it answers "purged") and the write
         * leaves nothing: no entry, no file, no reservation */
        HE_CHECK_INT(store_obj(s, "pw.ts", 100000, &st, inject_purge, &p), -ESTALE);
        HE_CHECK_INT(p.rc, 0);
        /* nothing a restart would index, already when the purge answers:
         * a rename that ran (or was submitted) before the purge marked the
         * write included */
        HE_CHECK_INT(p.left, 0);
        HE_CHECK_INT(he_cache_store_purges(s), purges + 1);
        HE_CHECK(!found(s, "pw.ts", NULL));
        HE_CHECK_INT(count_files(files), 0);
        snprintf(sub, sizeof(sub), "purge/tmp");
        HE_CHECK_INT(count_files(sub), 0);
        HE_CHECK_INT(he_cache_store_used(s, 0), 0);
    }
    HE_CHECK_INT(st.store_writes, 0);
    HE_CHECK_INT(logs, 0); /* not a disk error */
    for (int c = 0; c < HE_CACHE_DERR_COUNT; c++)
        HE_CHECK_INT(st.disk_errors[c], 0);
    /* a purge of another key changes nothing for this write */
    p = (purge_at_t){.s = s, .op = IORING_OP_RENAMEAT, .name = "other.ts", .rc = 1};
    HE_CHECK_INT(store_obj(s, "pw.ts", 100000, &st, inject_purge, &p), 0);
    HE_CHECK_INT(p.rc, -ENOENT);
    HE_CHECK(found(s, "pw.ts", NULL));
    /* an entry and a write of the same key: both go */
    p = (purge_at_t){.s = s, .op = IORING_OP_WRITE, .name = "pw.ts", .rc = 1};
    HE_CHECK_INT(store_obj(s, "pw.ts", 5000, &st, inject_purge, &p), -ESTALE);
    HE_CHECK_INT(p.rc, 0);
    HE_CHECK(!found(s, "pw.ts", NULL));
    HE_CHECK_INT(count_files(files), 0);
    /* written after the purge: stored */
    HE_CHECK_INT(store_obj(s, "pw.ts", 5000, &st, NULL, NULL), 0);
    HE_CHECK(found(s, "pw.ts", NULL));
    HE_CHECK_INT(st.store_writes, 2);
    he_cache_store_close(s);
}

/* A real full filesystem: a 1 MiB tmpfs under a store limit of 100 MiB. */
static void test_tmpfs(void)
{
    he_cache_store_opts_t o = {.ndirs = 1, .log = log_fn};
    he_cache_store_t *s;
    he_cache_stats_t st = {0};
    char sub[PATH_MAX + 16];
    int rc1, rc2;
    snprintf(sub, sizeof(sub), "%s/tmpfs", dir);
    mkdir(sub, 0755);
    if (geteuid() != 0 || mount("tmpfs", sub, "tmpfs", 0, "size=1m") != 0) {
        fprintf(stderr, "  tmpfs test skipped (cannot mount)\n");
        return;
    }
    o.dirs[0] = sub;
    o.bytes[0] = 100 << 20;
    HE_CHECK_INT(he_cache_store_open(&s, &o, NOW, &st), 0);
    rc1 = store_obj(s, "big1", 600000, &st, NULL, NULL);
    rc2 = store_obj(s, "big2", 600000, &st, NULL, NULL);
    HE_CHECK_INT(rc1, 0);
    HE_CHECK_INT(rc2, -ENOSPC);
    HE_CHECK_INT(st.disk_errors[HE_CACHE_DERR_NOSPC], 1);
    HE_CHECK(found(s, "big1", NULL) && !found(s, "big2", NULL));
    snprintf(sub, sizeof(sub), "tmpfs/tmp");
    HE_CHECK_INT(count_files(sub), 0);
    he_cache_store_close(s);
    snprintf(sub, sizeof(sub), "%s/tmpfs", dir);
    umount(sub);
}

/* Promotion as the worker does it (server/origin_io.c, there on the
 * ring): only a hit on an entry hit before says "revisit"; the body is
 * read with readv straight into a RAM object's chunks (he_cache_obj_space_iov,
 * several chunks per read), then published and found in the RAM tier. */
static void test_promote_read(void)
{
    he_cache_store_opts_t o = {.ndirs = 1};
    he_cache_store_t *s;
    he_cache_stats_t st = {0};
    he_cache_store_hit_t h;
    he_cache_key_t k;
    he_cache_obj_t *ob, *hitobj;
    struct iovec iov[4];
    char sub[PATH_MAX + 16];
    size_t len = 100000; /* 6.1 chunks of 16 KiB */
    uint64_t left = len, off, got = 0;
    unsigned n;
    int fd, reads = 0;
    snprintf(sub, sizeof(sub), "%s/promote", dir);
    o.dirs[0] = sub;
    o.bytes[0] = 8 << 20;
    HE_CHECK_INT(he_cache_store_open(&s, &o, NOW, &st), 0);
    HE_CHECK_INT(store_obj(s, "p", len, &st, NULL, NULL), 0);
    HE_CHECK(found(s, "p", &h));
    HE_CHECK(!h.revisit); /* first hit: a one-hit wonder so far */
    HE_CHECK(found(s, "p", &h));
    HE_CHECK(h.revisit);
    HE_CHECK(he_cache_ram_object_max(ram) >= len);

    he_cache_key_set(&k, "p", 1);
    ob = he_cache_obj_new(ram, 0, &k, h.body_len);
    fd = openat(h.dirfd, h.path, O_RDONLY);
    HE_CHECK(fd >= 0);
    off = h.body_off;
    while (left) {
        ssize_t r;
        /* several chunks per read (adjacent arena chunks make one iovec) */
        n = he_cache_obj_space_iov(ob, iov, 4, left, &st);
        HE_CHECK(n >= 1 && n <= 4);
        r = preadv(fd, iov, (int)n, (off_t)off);
        HE_CHECK(r > 0);
        if (r <= 0) break;
        he_cache_obj_commit(ob, (size_t)r);
        off += (uint64_t)r;
        left -= (uint64_t)r;
        reads++;
    }
    close(fd);
    HE_CHECK(reads >= 1);
    HE_CHECK_INT(he_cache_obj_len(ob), len);
    he_cache_obj_set_meta(ob, &h.meta);
    he_cache_obj_finish(ob);
    HE_CHECK_INT(he_cache_ram_insert(ram, ob, &st), 0);
    he_cache_obj_unref(ob);
    hitobj = he_cache_ram_lookup(ram, 0, &k, &st);
    HE_CHECK(hitobj != NULL);
    if (hitobj) {
        /* the same bytes as mkobj wrote */
        bool same = he_cache_obj_len(hitobj) == len;
        for (uint64_t i = 0; same && i < len;) {
            const void *p;
            size_t m = he_cache_obj_peek(hitobj, i, &p, NULL);
            for (size_t j = 0; same && j < m; j++)
                same = ((const char *)p)[j] ==
                       (char)((char)(k.hash >> ((i + j) % 8 * 8)) + (char)(i + j));
            got += m;
            i += m;
            if (!m) break;
        }
        HE_CHECK(same);
        HE_CHECK_INT(got, len);
        HE_CHECK_STR(he_cache_obj_meta(hitobj)->etag, "\"abc\"");
        he_cache_obj_unref(hitobj);
    }
    he_cache_ram_remove(ram, &k);
    he_cache_store_close(s);
}

int main(void)
{
    he_cache_ram_opts_t ro = {.bytes = 64 << 20, .chunk_size = 16384};
    char cmd[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "/tmp/he_test_store.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    ram = he_cache_ram_new(&ro);
    test_write_rebuild();
    test_eviction();
    test_errors();
    test_purge_while_writing();
    test_tmpfs();
    test_promote_read();
    he_cache_ram_free(ram);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    HE_TEST_MAIN_END();
}
