/* server/handler/fcopy.c: a copy holds its file's bytes on a 2 MiB
 * boundary and takes at most 1 MiB more than the file; files under 1 MiB
 * are not copied; entries of the same version of a file on the same NUMA
 * node share one copy, another node and a changed file get another; an
 * idle copy is kept for the next entry, goes when the file changed, and is
 * the first to go for room; with no room and nothing idle the copy is
 * refused; a lower budget frees idle copies; the bytes of a freed copy are
 * not reused under a holder of its pages. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "he_test.h"
#include "server/handler/fcopy.c"

#define MIB (1u << 20)

static char dir[] = "/tmp/he-fcopy-XXXXXX";

/* f describes path as the open-file cache would. */
static void open_file(he_file_t *f, const char *name, size_t size, unsigned char fill)
{
    char p[256];
    struct stat st;
    unsigned char *buf = malloc(size);
    int fd;
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    memset(buf, fill, size);
    for (size_t i = 0; i < size; i += 4096)
        buf[i] = (unsigned char)(i >> 12); /* every page its own bytes */
    fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
    HE_CHECK(fd >= 0 && write(fd, buf, size) == (ssize_t)size);
    free(buf);
    memset(f, 0, sizeof(*f));
    fstat(fd, &st);
    f->fd = fd;
    he_fcache_take_version(f, &st);
}

static bool same_bytes(const he_file_t *f, const he_fcopy_t *c)
{
    char *want = malloc(f->size);
    bool same = pread(f->fd, want, f->size, 0) == (ssize_t)f->size &&
                memcmp(want, he_fcopy_bytes(c), f->size) == 0;
    free(want);
    return same;
}

static he_fcopy_stats_t now(void)
{
    he_fcopy_stats_t st;
    he_fcopy_stats(&st);
    return st;
}

static void test_sizes(void)
{
    HE_CHECK(!he_fcopy_worth(MIB - 1));
    HE_CHECK(he_fcopy_worth(MIB));
    HE_CHECK(he_fcopy_worth(16 * MIB));
    HE_CHECK(!he_fcopy_worth(16 * MIB + 1));                 /* its read would hold the worker */
    HE_CHECK_INT(he_fcopy_len(MIB), 2 * MIB);                /* one huge page */
    HE_CHECK_INT(he_fcopy_len(2 * MIB), 2 * MIB);            /* exactly */
    HE_CHECK_INT(he_fcopy_len(2 * MIB + 1), 2 * MIB + 4096); /* the rest in base pages */
    HE_CHECK_INT(he_fcopy_len(3 * MIB + 12345), 4 * MIB);
    for (uint64_t s = MIB; s < 9 * MIB; s += 333333)
        HE_CHECK(he_fcopy_len(s) >= s && he_fcopy_len(s) - s <= MIB && he_fcopy_len(s) % 4096 == 0);
}

static void test_share_and_versions(void)
{
    he_file_t a, a2, b;
    he_fcopy_t *ca, *ca2, *cb;

    he_fcopy_configure(64 * MIB);
    open_file(&a, "a.ts", 3 * MIB + 12345, 'a');
    ca = he_fcopy_get(&a, 0, NULL);
    HE_CHECK(ca != NULL);
    HE_CHECK(((uintptr_t)he_fcopy_bytes(ca) & (2 * MIB - 1)) == 0);
    HE_CHECK(same_bytes(&a, ca));
    HE_CHECK_INT(now().copies, 1);
    HE_CHECK_INT(now().bytes, 4 * MIB);
    /* another worker's entry of the same version shares it */
    a2 = a;
    ca2 = he_fcopy_get(&a2, 0, NULL);
    HE_CHECK(ca2 == ca);
    HE_CHECK_INT(now().made, 1);
    /* a worker on another NUMA node reads one of its own */
    {
        he_fcopy_t *other = he_fcopy_get(&a2, 1, NULL);
        HE_CHECK(other != NULL && other != ca && same_bytes(&a, other));
        HE_CHECK_INT(now().made, 2);
        HE_CHECK_INT(now().copies, 2);
        he_fcopy_put(other, true);
        HE_CHECK_INT(now().copies, 1);
    }
    /* too small */
    open_file(&b, "small.ts", MIB - 1, 'b');
    HE_CHECK(he_fcopy_get(&b, 0, NULL) == NULL);
    close(b.fd);
    /* both let go: kept, idle, for the next entry */
    he_fcopy_put(ca, false);
    he_fcopy_put(ca2, false);
    HE_CHECK_INT(now().copies, 1);
    ca = he_fcopy_get(&a, 0, NULL);
    HE_CHECK(ca == ca2);
    HE_CHECK_INT(now().made, 2); /* not read again */
    /* the file rewritten: a new version, a new copy */
    open_file(&b, "a.ts", 3 * MIB + 12345, 'z');
    cb = he_fcopy_get(&b, 0, NULL);
    HE_CHECK(cb != NULL && cb != ca);
    HE_CHECK(same_bytes(&b, cb));
    HE_CHECK_INT(now().made, 3);
    /* the old version's last entry goes as stale: so does its copy */
    he_fcopy_put(ca, true);
    HE_CHECK_INT(now().copies, 1);
    he_fcopy_put(cb, true);
    HE_CHECK_INT(now().copies, 0);
    HE_CHECK_INT(now().bytes, 0);
    close(a.fd);
    close(b.fd);
}

static void test_budget(void)
{
    he_file_t f[3];
    he_fcopy_t *c[3];
    he_fcopy_stats_t st0 = now(), st;
    char name[16];
    bool changed = false;

    he_fcopy_configure(6 * MIB);
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof(name), "b%d.ts", i);
        open_file(&f[i], name, 3 * MIB, (unsigned char)('0' + i)); /* 4 MiB each */
    }
    c[0] = he_fcopy_get(&f[0], 0, NULL);
    HE_CHECK(c[0] != NULL);
    /* no room, and the one copy is in use */
    c[1] = he_fcopy_get(&f[1], 0, &changed);
    HE_CHECK(c[1] == NULL && !changed);
    HE_CHECK_INT(now().refused, st0.refused + 1);
    /* idle now: it goes for the next */
    he_fcopy_put(c[0], false);
    c[1] = he_fcopy_get(&f[1], 0, NULL);
    HE_CHECK(c[1] != NULL && same_bytes(&f[1], c[1]));
    st = now();
    HE_CHECK_INT(st.copies, 1);
    HE_CHECK_INT(st.evicted, st0.evicted + 1);
    HE_CHECK(st.bytes <= 6 * MIB);
    /* a lower budget: idle copies go at once, held ones when let go */
    c[2] = he_fcopy_get(&f[2], 0, NULL);
    HE_CHECK(c[2] == NULL);
    he_fcopy_configure(0);
    HE_CHECK_INT(now().copies, 1);
    he_fcopy_put(c[1], false);
    HE_CHECK_INT(now().copies, 0);
    HE_CHECK(he_fcopy_get(&f[2], 0, NULL) == NULL); /* off */
    for (int i = 0; i < 3; i++)
        close(f[i].fd);
}

/* The file changed since its entry's stat (or shrank under the read): no
 * copy, rather than one that mixes versions or is short. */
static void test_changed_file(void)
{
    he_file_t f;
    bool changed = false;
    he_fcopy_configure(64 * MIB);
    open_file(&f, "c.ts", 2 * MIB, 'c');
    HE_CHECK(ftruncate(f.fd, MIB) == 0);
    HE_CHECK(he_fcopy_get(&f, 0, &changed) == NULL && changed);
    HE_CHECK_INT(now().copies, 0);
    close(f.fd);
    open_file(&f, "d.ts", 2 * MIB, 'd');
    f.mtime_ns ^= 1; /* as if written to after its stat */
    changed = false;
    HE_CHECK(he_fcopy_get(&f, 0, &changed) == NULL && changed);
    HE_CHECK_INT(now().bytes, 0);
    close(f.fd);
}

/* A pipe holds a freed copy's pages: what it gives back are the copy's
 * bytes, whatever the next copy is made of (fcopy.c frees by munmap). */
static void test_pages_outlive_the_copy(void)
{
    he_file_t f, g;
    he_fcopy_t *c, *d;
    int p[2];
    char *got = malloc(64 * 1024), *want = malloc(64 * 1024);
    struct iovec v;

    he_fcopy_configure(4 * MIB);
    open_file(&f, "e.ts", 2 * MIB, 'e');
    c = he_fcopy_get(&f, 0, NULL);
    HE_CHECK(c != NULL);
    memcpy(want, he_fcopy_bytes(c), 64 * 1024);
    HE_CHECK(pipe(p) == 0);
    v.iov_base = (void *)he_fcopy_bytes(c);
    v.iov_len = 64 * 1024;
    HE_CHECK(vmsplice(p[1], &v, 1, 0) == 64 * 1024);
    he_fcopy_put(c, true);
    open_file(&g, "e.ts", 2 * MIB, 'g'); /* its copy takes the freed room */
    d = he_fcopy_get(&g, 0, NULL);
    HE_CHECK(d != NULL);
    HE_CHECK(read(p[0], got, 64 * 1024) == 64 * 1024);
    HE_CHECK(memcmp(got, want, 64 * 1024) == 0);
    he_fcopy_put(d, true);
    close(p[0]);
    close(p[1]);
    close(f.fd);
    close(g.fd);
    free(got);
    free(want);
}

int main(void)
{
    char cmd[64];
    HE_CHECK(mkdtemp(dir) != NULL);
    test_sizes();
    test_share_and_versions();
    test_budget();
    test_changed_file();
    test_pages_outlive_the_copy();
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    HE_CHECK(system(cmd) == 0);
    HE_TEST_MAIN_END();
}
