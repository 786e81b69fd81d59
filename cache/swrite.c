/* Writing one object to the SSD tier as a state machine of io_uring
 * operations, one in flight at a time:
 *
 *   OPENAT tmp/<hash>-<gen>.tmp (O_CREAT|O_EXCL)
 *   WRITE  header, then the body chunk by chunk (short writes continue)
 *   FSYNC  (HE_CACHE_FSYNC_DATA only: the CRCs make a torn file harmless,
 *          it is dropped at the next start-up, so by default we do not pay
 *          for a flush per object)
 *   CLOSE
 *   RENAMEAT tmp -> <ab>/<hash>-<gen>.obj, then index it
 *
 * On any error: CLOSE (if open), UNLINKAT the temp file, count and log the
 * cause, release the reservation. A purge of the key while the write runs
 * (the directory knows the write from its start) ends it the same way,
 * uncounted, or drops the renamed file instead of indexing it. The same
 * machine runs on plain syscalls in he_cache_swrite_run_sync by executing
 * the very SQEs it prepared. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cache/internal.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/result.h"
#include "cache/stats.h"
#include "cache/store.h"

enum he_cache_sw_state {
    HE_SW_OPEN = 0,
    HE_SW_WRITE,
    HE_SW_FSYNC,
    HE_SW_CLOSE,
    HE_SW_RENAME,
    HE_SW_UNLINK,
    HE_SW_DONE
};

struct he_cache_swrite {
    he_cache_store_t *store;
    he__cache_sdir_t *dir;
    he_cache_obj_t *obj;
    int state;
    int fd;
    int err; /* first error, 0 if none */
    uint64_t gen;
    uint64_t reserved; /* bytes */
    uint64_t body_len;
    uint64_t off; /* file offset written so far */
    uint32_t hdr_len;
    he__cache_pending_t pend;
    char tmp[64], final[48];
    char hdr[HE__CACHE_HDR_MAX];
    /* One body write gathers up to HE_SW_WRITE_MAX bytes of chunks: fewer
     * ring operations, and the page cache builds large folios from large
     * writes, which the SSD hits' sendfile then walks a few at a time
     * (16 KiB writes left 4 KiB pages: 2.3x the page-cache lookups). */
    struct iovec iov[64];
};

#define HE_SW_WRITE_MAX (1u << 20)

he_cache_swrite_t *he_cache_swrite_new(he_cache_store_t *s, he_cache_obj_t *obj,
                                       he_cache_stats_t *st)
{
    he_cache_swrite_t *w;
    const he_cache_key_t *key = he_cache_obj_key(obj);
    uint32_t crc = 0;
    uint64_t off = 0;
    int n;
    if (!s || !he_cache_obj_complete(obj)) return NULL;
    w = calloc(1, sizeof(*w));
    if (!w) return NULL;
    w->store = s;
    w->dir = he__cache_store_dir_for(s, key->hash);
    w->fd = -1;
    w->body_len = he_cache_obj_len(obj);
    while (off < w->body_len) {
        const void *p;
        size_t c = he_cache_obj_peek(obj, off, &p, NULL);
        crc = he__cache_crc32c(crc, p, c);
        off += c;
    }
    n = he__cache_hdr_build(w->hdr, key, he_cache_obj_meta(obj), w->body_len, crc);
    if (n < 0 || he__cache_store_reserve(w->dir, (uint64_t)n + w->body_len, st) < 0) {
        free(w);
        return NULL; /* too large for the directory, or all of it is being written */
    }
    w->hdr_len = (uint32_t)n;
    w->reserved = (uint64_t)n + w->body_len;
    w->gen = atomic_fetch_add(&s->gen, 1);
    he__cache_store_tmp_name(w->tmp, sizeof(w->tmp), key->hash, w->gen);
    he__cache_store_name(w->final, sizeof(w->final), key->hash, w->gen);
    he_cache_obj_ref(obj);
    w->obj = obj;
    w->pend.key = key;
    he__cache_store_pending_add(w->dir, &w->pend, w->gen);
    return w;
}

void he_cache_swrite_free(he_cache_swrite_t *w)
{
    if (!w) return;
    if (w->pend.linked) he__cache_store_pending_del(w->dir, &w->pend);
    if (w->reserved) he__cache_store_unreserve(w->dir, w->reserved);
    if (w->fd >= 0) close(w->fd); /* only if abandoned midway */
    he_cache_obj_unref(w->obj);
    free(w);
}

int he_cache_swrite_step(he_cache_swrite_t *w, struct io_uring_sqe *sqe)
{
    int dfd = w->dir->dirfd;
    if (w->state < HE_SW_CLOSE && !w->err && atomic_load(&w->pend.purged)) {
        /* purged meanwhile: no point writing the rest (not a disk error) */
        w->err = -ESTALE;
        w->state = w->fd >= 0 ? HE_SW_CLOSE : HE_SW_DONE;
    } else if (w->state == HE_SW_RENAME && !w->err && atomic_load(&w->pend.purged)) {
        /* nor give it a name the next start-up would index */
        w->err = -ESTALE;
        w->state = HE_SW_UNLINK;
    }
    switch (w->state) {
    case HE_SW_OPEN:
        io_uring_prep_openat(sqe, dfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        return HE_CACHE_AGAIN;
    case HE_SW_WRITE:
        if (w->off < w->hdr_len) {
            io_uring_prep_write(sqe, w->fd, w->hdr + w->off, (unsigned)(w->hdr_len - w->off),
                                w->off);
        } else {
            uint64_t at = w->off - w->hdr_len, got = 0;
            unsigned n = 0;
            while (n < sizeof(w->iov) / sizeof(w->iov[0]) && got < HE_SW_WRITE_MAX) {
                const void *p;
                size_t k = he_cache_obj_peek(w->obj, at + got, &p, NULL);
                if (!k) break;
                if (k > HE_SW_WRITE_MAX - got) k = HE_SW_WRITE_MAX - got;
                w->iov[n].iov_base = (void *)p;
                w->iov[n++].iov_len = k;
                got += k;
            }
            io_uring_prep_writev(sqe, w->fd, w->iov, n, w->off);
        }
        return HE_CACHE_AGAIN;
    case HE_SW_FSYNC:
        io_uring_prep_fsync(sqe, w->fd, IORING_FSYNC_DATASYNC);
        return HE_CACHE_AGAIN;
    case HE_SW_CLOSE:
        io_uring_prep_close(sqe, w->fd);
        return HE_CACHE_AGAIN;
    case HE_SW_RENAME:
        io_uring_prep_renameat(sqe, dfd, w->tmp, dfd, w->final, 0);
        return HE_CACHE_AGAIN;
    case HE_SW_UNLINK:
        io_uring_prep_unlinkat(sqe, dfd, w->tmp, 0);
        return HE_CACHE_AGAIN;
    default:
        return w->err;
    }
}

static void he_cache_swrite_fail(he_cache_swrite_t *w, int err, const char *what,
                                 he_cache_stats_t *st)
{
    char msg[PATH_MAX + 96];
    if (w->err) return;
    w->err = err;
    snprintf(msg, sizeof(msg), "%s %s/%s", what, w->dir->path, w->tmp);
    he__cache_store_fail(w->store, err, msg, st);
}

void he_cache_swrite_complete(he_cache_swrite_t *w, int res, he_cache_stats_t *st)
{
    switch (w->state) {
    case HE_SW_OPEN:
        if (res < 0) {
            he_cache_swrite_fail(w, res, "open", st);
            w->state = HE_SW_DONE;
        } else {
            w->fd = res;
            w->state = HE_SW_WRITE;
        }
        break;
    case HE_SW_WRITE:
        if (res <= 0) {
            he_cache_swrite_fail(w, res < 0 ? res : -EIO, "write", st);
            w->state = HE_SW_CLOSE;
            break;
        }
        w->off += (uint64_t)res;
        if (w->off >= w->hdr_len + w->body_len)
            w->state = w->store->opts.fsync == HE_CACHE_FSYNC_DATA ? HE_SW_FSYNC : HE_SW_CLOSE;
        break;
    case HE_SW_FSYNC:
        if (res < 0) he_cache_swrite_fail(w, res, "fsync", st);
        w->state = HE_SW_CLOSE;
        break;
    case HE_SW_CLOSE:
        /* close reports delayed write errors on some filesystems (NFS) */
        if (res < 0) he_cache_swrite_fail(w, res, "close", st);
        w->fd = -1;
        w->state = w->err ? HE_SW_UNLINK : HE_SW_RENAME;
        break;
    case HE_SW_RENAME:
        if (res == -ENOENT && atomic_load(&w->pend.purged)) {
            w->err = -ESTALE; /* the purge took the temp file (not a disk error) */
            w->state = HE_SW_DONE;
            break;
        }
        if (res < 0) {
            he_cache_swrite_fail(w, res, "rename", st);
            w->state = HE_SW_UNLINK;
            break;
        }
        w->state = HE_SW_DONE;
        res = he__cache_store_add(w->dir, &w->pend, w->gen, w->hdr_len, w->body_len,
                                  he_cache_obj_meta(w->obj), w->reserved, st);
        w->reserved = 0;
        if (res == -ESTALE) {
            w->err = res; /* purged meanwhile: the file is unlinked already */
            break;
        }
        if (st) {
            st->store_writes++;
            st->store_write_bytes += w->hdr_len + w->body_len;
        }
        break;
    case HE_SW_UNLINK:
        w->state = HE_SW_DONE;
        break;
    default:
        break;
    }
}

/* Executes a prepared SQE with the equivalent syscall. */
static int he_cache_sqe_run(const struct io_uring_sqe *sqe)
{
    long rc;
    switch (sqe->opcode) {
    case IORING_OP_OPENAT:
        rc = openat(sqe->fd, (const char *)(uintptr_t)sqe->addr, (int)sqe->open_flags,
                    (mode_t)sqe->len);
        break;
    case IORING_OP_WRITE:
        rc = pwrite(sqe->fd, (const void *)(uintptr_t)sqe->addr, sqe->len, (off_t)sqe->off);
        break;
    case IORING_OP_WRITEV:
        rc = pwritev(sqe->fd, (const struct iovec *)(uintptr_t)sqe->addr, (int)sqe->len, (off_t)sqe->off);
        break;
    case IORING_OP_FSYNC:
        rc = sqe->fsync_flags & IORING_FSYNC_DATASYNC ? fdatasync(sqe->fd) : fsync(sqe->fd);
        break;
    case IORING_OP_CLOSE:
        rc = close(sqe->fd);
        break;
    case IORING_OP_RENAMEAT:
        rc = renameat(sqe->fd, (const char *)(uintptr_t)sqe->addr, (int)sqe->len,
                      (const char *)(uintptr_t)sqe->addr2);
        break;
    case IORING_OP_UNLINKAT:
        rc = unlinkat(sqe->fd, (const char *)(uintptr_t)sqe->addr, (int)sqe->unlink_flags);
        break;
    default:
        return -EOPNOTSUPP;
    }
    return rc < 0 ? -errno : (int)rc;
}

int he_cache_swrite_run_sync(he_cache_swrite_t *w, he_cache_stats_t *st,
                             he_cache_swrite_inject_fn inject, void *ctx)
{
    struct io_uring_sqe sqe;
    int rc;
    for (;;) {
        memset(&sqe, 0, sizeof(sqe));
        rc = he_cache_swrite_step(w, &sqe);
        if (rc != HE_CACHE_AGAIN) return rc;
        if (inject) (void)inject(ctx, sqe.opcode, HE_CACHE_SWRITE_BEFORE);
        int res = he_cache_sqe_run(&sqe);
        if (inject) {
            int r2 = inject(ctx, sqe.opcode, res);
            if (r2 != res && sqe.opcode == IORING_OP_OPENAT && res >= 0) {
                /* a failed open creates nothing */
                close(res);
                unlinkat(sqe.fd, (const char *)(uintptr_t)sqe.addr, 0);
            }
            res = r2;
        }
        he_cache_swrite_complete(w, res, st);
    }
}
