/* cache/obj.c: filling an object (append, space/commit, space_iov with
 * adjacent chunks merged) and reading it back (peek by chunk with arena
 * offsets, flat with and without a copy), its meta, freshness, serial and
 * key, the runs of chunks a size hint takes, and a huge-page arena's runs
 * and drops. Eviction and lifetime are test_ram.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/fresh.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/stats.h"
#include "he_test.h"

#define CS 64 /* chunk size in these tests */

static he_cache_ram_t *new_ram(void)
{
    he_cache_ram_opts_t opts = {.bytes = 32 * CS, .chunk_size = CS, .object_max = 1 << 20};
    return he_cache_ram_new(&opts);
}

static he_cache_obj_t *new_obj(he_cache_ram_t *ram, const char *name)
{
    he_cache_key_t k;
    he_cache_key_set(&k, name, strlen(name));
    return he_cache_obj_new(ram, 0, &k, 0);
}

/* Bytes 0..n-1 of every object here are (i * 7) & 0xff. */
static void pattern(char *p, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (char)(((off + i) * 7) & 0xff);
}

static bool matches(const he_cache_obj_t *o, uint64_t len)
{
    uint64_t off = 0;
    char want[CS];
    while (off < len) {
        const void *p;
        size_t n = he_cache_obj_peek(o, off, &p, NULL);
        if (n == 0 || n > CS) return false;
        pattern(want, (size_t)off, n);
        if (memcmp(p, want, n) != 0) return false;
        off += n;
    }
    return off == len && he_cache_obj_len(o) == len;
}

static void test_append_peek(void)
{
    he_cache_ram_t *ram = new_ram();
    he_cache_stats_t st = {0};
    he_cache_obj_t *o = new_obj(ram, "a");
    char buf[3 * CS + 10];
    const void *p;
    void *base;
    size_t alen;
    int64_t fo;

    pattern(buf, 0, sizeof(buf));
    HE_CHECK(!he_cache_obj_complete(o));
    HE_CHECK_INT(he_cache_obj_append(o, buf, 5, &st), 0);
    HE_CHECK_INT(he_cache_obj_append(o, buf + 5, sizeof(buf) - 5, &st), 0);
    HE_CHECK_INT(he_cache_obj_len(o), sizeof(buf));
    HE_CHECK(matches(o, sizeof(buf)));
    /* spans end at chunk ends and at the end of the bytes */
    HE_CHECK_INT(he_cache_obj_peek(o, 10, &p, &fo), CS - 10);
    he_cache_ram_arena(ram, 0, &base, &alen);
    HE_CHECK(fo >= 0 && (size_t)fo < alen && (const char *)base + fo == p);
    HE_CHECK_INT(he_cache_obj_peek(o, 3 * CS, &p, NULL), 10);
    HE_CHECK_INT(he_cache_obj_peek(o, sizeof(buf), &p, NULL), 0);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 4 * CS);
    HE_CHECK_INT(st.ram_overflow, 0);
    he_cache_obj_finish(o);
    HE_CHECK(he_cache_obj_complete(o));
    he_cache_obj_unref(o);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 0);
    he_cache_ram_free(ram);
}

static void test_space_commit(void)
{
    he_cache_ram_t *ram = new_ram();
    he_cache_obj_t *o = new_obj(ram, "s");
    void *p;
    size_t n;

    n = he_cache_obj_space(o, &p, NULL);
    HE_CHECK_INT(n, CS);
    pattern(p, 0, 20);
    he_cache_obj_commit(o, 20);
    /* the rest of the same chunk */
    n = he_cache_obj_space(o, &p, NULL);
    HE_CHECK_INT(n, CS - 20);
    pattern(p, 20, n);
    he_cache_obj_commit(o, n);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), CS);
    /* a full chunk: the next space is a new one */
    n = he_cache_obj_space(o, &p, NULL);
    HE_CHECK_INT(n, CS);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 2 * CS);
    pattern(p, CS, 1);
    he_cache_obj_commit(o, 1);
    HE_CHECK(matches(o, CS + 1));
    he_cache_obj_unref(o);
    he_cache_ram_free(ram);
}

static void test_space_iov(void)
{
    he_cache_ram_t *ram = new_ram();
    he_cache_obj_t *o = new_obj(ram, "v");
    struct iovec iov[4];
    uint64_t total = 0;
    unsigned n;

    he_cache_obj_append(o, "\0\7\16", 3, NULL); /* pattern bytes 0..2 */
    n = he_cache_obj_space_iov(o, iov, 4, 3 * CS, NULL);
    HE_CHECK(n >= 1 && n <= 4);
    for (unsigned i = 0; i < n; i++) {
        pattern(iov[i].iov_base, (size_t)(3 + total), iov[i].iov_len);
        total += iov[i].iov_len;
    }
    HE_CHECK_INT(total, 3 * CS);
    /* a fresh arena hands out chunks in order: one span */
    HE_CHECK_INT(n, 1);
    he_cache_obj_commit(o, (size_t)total);
    HE_CHECK(matches(o, 3 + 3 * CS));
    /* chunks it allocated ahead are used by the next space */
    n = he_cache_obj_space_iov(o, iov, 4, 10, NULL);
    HE_CHECK_INT(n, 1);
    HE_CHECK_INT(iov[0].iov_len, 10);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 4 * CS);
    he_cache_obj_unref(o);
    he_cache_ram_free(ram);
}

static void test_flat(void)
{
    he_cache_ram_t *ram = new_ram();
    he_cache_obj_t *a = new_obj(ram, "one"), *b = new_obj(ram, "two"), *e = new_obj(ram, "e");
    char buf[2 * CS + 5], *copy;
    const void *p, *first;

    pattern(buf, 0, sizeof(buf));
    he_cache_obj_append(a, buf, CS, NULL);
    he_cache_obj_append(b, buf, sizeof(buf), NULL);
    /* within its first chunk: no copy */
    HE_CHECK_INT(he_cache_obj_flat(a, &p, &copy), CS);
    he_cache_obj_peek(a, 0, &first, NULL);
    HE_CHECK(copy == NULL && p == first);
    /* across chunks: a copy of all of it */
    HE_CHECK_INT(he_cache_obj_flat(b, &p, &copy), sizeof(buf));
    HE_CHECK(copy != NULL && p == copy && memcmp(p, buf, sizeof(buf)) == 0);
    free(copy);
    /* empty */
    HE_CHECK_INT(he_cache_obj_flat(e, &p, &copy), 0);
    HE_CHECK(p != NULL && copy == NULL);
    he_cache_obj_unref(a);
    he_cache_obj_unref(b);
    he_cache_obj_unref(e);
    he_cache_ram_free(ram);
}

static void test_meta_fresh_serial(void)
{
    he_cache_ram_t *ram = new_ram();
    he_cache_obj_t *a = new_obj(ram, "m"), *b = new_obj(ram, "m");
    he_cache_meta_t m = {.status = 404, .kind = 2, .prefetched = true};
    he_cache_fresh_t f;

    snprintf(m.etag, sizeof(m.etag), "\"v1\"");
    m.fresh = (he_cache_fresh_t){.stored_ms = 1000, .expires_ms = 5000, .swr_ms = 7, .sie_ms = 9};
    he_cache_obj_set_meta(a, &m);
    HE_CHECK_INT(he_cache_obj_meta(a)->status, 404);
    HE_CHECK_STR(he_cache_obj_meta(a)->etag, "\"v1\"");
    he_cache_obj_fresh(a, &f);
    HE_CHECK(f.stored_ms == 1000 && f.expires_ms == 5000 && f.swr_ms == 7 && f.sie_ms == 9);
    /* a 304: new stored/expires, the windows stay */
    he_cache_obj_refresh(a, &(he_cache_fresh_t){.stored_ms = 6000, .expires_ms = 9000});
    he_cache_obj_fresh(a, &f);
    HE_CHECK(f.stored_ms == 6000 && f.expires_ms == 9000 && f.swr_ms == 7 && f.sie_ms == 9);

    HE_CHECK_STR(he_cache_obj_key(a)->s, "m");
    HE_CHECK_INT(he_cache_obj_node(a), 0);
    /* the same key twice: two objects, two serials */
    HE_CHECK(he_cache_obj_serial(a) != 0 && he_cache_obj_serial(b) != 0);
    HE_CHECK(he_cache_obj_serial(a) != he_cache_obj_serial(b));
    he_cache_obj_unref(a);
    /* a recycled header gets a new serial */
    {
        uint64_t old = he_cache_obj_serial(b);
        he_cache_obj_unref(b);
        b = new_obj(ram, "m");
        HE_CHECK(he_cache_obj_serial(b) > old);
        he_cache_obj_unref(b);
    }
    he_cache_ram_free(ram);
}

/* Where byte off of o lies in the arena. */
static int64_t arena_at(const he_cache_obj_t *o, uint64_t off)
{
    const void *p;
    int64_t fo = -1;
    return he_cache_obj_peek(o, off, &p, &fo) ? fo : -1;
}

/* Each chunk follows the one before in the arena: the object is one range. */
static bool contiguous(const he_cache_obj_t *o, uint64_t len)
{
    int64_t first = arena_at(o, 0);
    for (uint64_t off = CS; off < len; off += CS)
        if (first < 0 || arena_at(o, off) != first + (int64_t)off) return false;
    return first >= 0;
}

static he_cache_obj_t *new_obj_hint(he_cache_ram_t *ram, const char *name, uint64_t hint)
{
    he_cache_key_t k;
    he_cache_key_set(&k, name, strlen(name));
    return he_cache_obj_new(ram, 0, &k, hint);
}

/* Fills under way at once take their chunks a run at a time, by their size
 * hints: interleaved appends still leave each object one arena range (one
 * sendfile for a hit), a freed object's run comes back whole, and chunks
 * taken for a hint the body fell short of go back at finish. */
static void test_size_hint_runs(void)
{
    he_cache_ram_t *ram = new_ram();
    he_cache_stats_t st = {0};
    he_cache_obj_t *a = new_obj_hint(ram, "a", 6 * CS), *b = new_obj_hint(ram, "b", 6 * CS), *c;
    char buf[6 * CS];

    pattern(buf, 0, sizeof(buf));
    for (size_t off = 0; off < sizeof(buf); off += CS / 2) { /* turn by turn */
        HE_CHECK_INT(he_cache_obj_append(a, buf + off, CS / 2, &st), 0);
        HE_CHECK_INT(he_cache_obj_append(b, buf + off, CS / 2, &st), 0);
    }
    HE_CHECK(matches(a, sizeof(buf)) && matches(b, sizeof(buf)));
    HE_CHECK(contiguous(a, sizeof(buf)));
    HE_CHECK(contiguous(b, sizeof(buf)));
    he_cache_obj_finish(a);
    he_cache_obj_finish(b);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 12 * CS);

    /* a's run, freed, is the next object's, in order */
    int64_t a_at = arena_at(a, 0);
    he_cache_obj_unref(a);
    c = new_obj_hint(ram, "c", 6 * CS);
    HE_CHECK_INT(he_cache_obj_append(c, buf, sizeof(buf), &st), 0);
    HE_CHECK(contiguous(c, sizeof(buf)));
    HE_CHECK_INT(arena_at(c, 0), a_at);
    he_cache_obj_finish(c);
    he_cache_obj_unref(c);

    /* promised 8 chunks, sent 3: the other 5 are free again */
    c = new_obj_hint(ram, "short", 8 * CS);
    HE_CHECK_INT(he_cache_obj_append(c, buf, 3 * CS - 5, &st), 0);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 14 * CS);
    he_cache_obj_finish(c);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 9 * CS);
    HE_CHECK(matches(c, 3 * CS - 5));
    he_cache_obj_unref(c);
    he_cache_obj_unref(b);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 0);
    HE_CHECK_INT(st.ram_overflow, 0);
    he_cache_ram_free(ram);
}

static bool all_bytes(const char *p, size_t n, char c)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != c) return false;
    return true;
}

/* An arena that drops freed chunks (opts.huge or opts.memfd) drops only
 * those of an object lent to the kernel (peek_file): one read by copy
 * (peek) gives its chunks back as they are, to be written again without a
 * fault-in, while a lent one's read as zeros before they are handed out
 * again. */
static void check_lent_drops(he_cache_ram_t *ram)
{
    enum { HCS = 16384 };
    he_cache_stats_t st = {0};
    he_cache_key_t k;
    he_cache_obj_t *o;
    static char buf[4 * HCS];
    const char *mem = NULL;
    const void *p = NULL;
    uint64_t file_off;
    int fd;

    he_cache_key_set(&k, "copied", 6);
    o = he_cache_obj_new(ram, 0, &k, sizeof(buf));
    memset(buf, 0x5a, sizeof(buf));
    HE_CHECK_INT(he_cache_obj_append(o, buf, sizeof(buf), &st), 0);
    he_cache_obj_finish(o);
    HE_CHECK_INT(he_cache_obj_peek(o, 0, &p, NULL), HCS);
    mem = p;
    he_cache_obj_unref(o); /* never lent: kept */
    HE_CHECK(all_bytes(mem, sizeof(buf), 0x5a));

    /* the same run again (the free list is a stack), untouched so far */
    he_cache_key_set(&k, "lent", 4);
    o = he_cache_obj_new(ram, 0, &k, sizeof(buf));
    HE_CHECK_INT(he_cache_obj_space(o, (void **)&p, &st), HCS);
    HE_CHECK(p == mem);
    HE_CHECK(all_bytes(mem, sizeof(buf), 0x5a));
    memset(buf, 0xa5, sizeof(buf));
    HE_CHECK_INT(he_cache_obj_append(o, buf, sizeof(buf), &st), 0);
    he_cache_obj_finish(o);
    HE_CHECK_INT(he_cache_obj_peek_file(o, 0, &fd, &file_off, &mem), sizeof(buf));
    HE_CHECK(mem == p && all_bytes(mem, sizeof(buf), (char)0xa5));
    he_cache_obj_unref(o); /* lent: the run is dropped */
    HE_CHECK(all_bytes(mem, sizeof(buf), 0));
}

/* opts.huge: the arena starts on a huge-page boundary, a run of chunks
 * peeks as memory with no file, and a freed object's run is dropped
 * (reads as zeros) before its chunks are handed out again, if it was lent.
 * opts.memfd likewise, with the run as a range of the memfd. */
static void test_dropping_arenas(void)
{
    he_cache_ram_opts_t opts = {
        .bytes = 4u << 20, .chunk_size = 16384, .object_max = 1 << 20, .huge = true};
    he_cache_ram_t *ram = he_cache_ram_new(&opts);
    he_cache_key_t k;
    he_cache_obj_t *o;
    static char buf[100];
    const char *mem = NULL;
    uint64_t file_off = 1;
    void *base;
    size_t len;
    int fd = 0;

    HE_CHECK(ram != NULL);
    HE_CHECK(he_cache_ram_arena_huge(ram, 0));
    HE_CHECK_INT(he_cache_ram_arena_fd(ram, 0), -1);
    he_cache_ram_arena(ram, 0, &base, &len);
    HE_CHECK_INT((uintptr_t)base % (2u << 20), 0);
    HE_CHECK_INT(len, 4u << 20);
    he_cache_key_set(&k, "h", 1);
    o = he_cache_obj_new(ram, 0, &k, sizeof(buf));
    HE_CHECK_INT(he_cache_obj_append(o, buf, sizeof(buf), NULL), 0);
    HE_CHECK_INT(he_cache_obj_peek_file(o, 0, &fd, &file_off, &mem), sizeof(buf));
    HE_CHECK_INT(fd, -1);
    HE_CHECK(mem == (const char *)base + file_off);
    he_cache_obj_unref(o);
    check_lent_drops(ram);
    he_cache_ram_free(ram);

    opts.huge = false;
    opts.memfd = true;
    ram = he_cache_ram_new(&opts);
    HE_CHECK(ram != NULL);
    if (he_cache_ram_arena_fd(ram, 0) < 0) {
        /* shmem huge pages forced on this machine: no memfd arena */
        fprintf(stderr, "test_obj: no memfd arena here, its drops untested\n");
    } else {
        check_lent_drops(ram);
    }
    he_cache_ram_free(ram);
}

int main(void)
{
    test_append_peek();
    test_space_commit();
    test_space_iov();
    test_flat();
    test_meta_fresh_serial();
    test_size_hint_runs();
    test_dropping_arenas();
    HE_TEST_MAIN_END();
}
