/* cache/ headers: each one compiles on its own (it includes what it uses),
 * and stats.h brings neither liburing nor the rest of the cache: the
 * server includes it in every file. Runs the C compiler (CC, else cc) on
 * one-line files; skipped when there is none. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "he_test.h"

static char root[4096];
static const char *cc;

/* Compiles src (C text) with the build's warnings as errors: 0 if clean. */
static int compile(const char *src)
{
    char path[] = "/tmp/he_test_headers_XXXXXX";
    char cmd[8192];
    int fd = mkstemp(path), rc;
    FILE *f;
    if (fd < 0) return -1;
    f = fdopen(fd, "w");
    fputs(src, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd),
             "%s -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wshadow "
             "-Wstrict-prototypes -Werror -fsyntax-only -I'%s' -x c '%s'",
             cc, root, path);
    rc = system(cmd);
    unlink(path);
    return rc;
}

int main(void)
{
    char src[4200];
    glob_t g;
    const char *tail = strstr(__FILE__, "tests/unit/cache/");
    if (!tail || __FILE__[0] != '/') {
        fprintf(stderr, "source root unknown (relative __FILE__): skipped\n");
        return 77;
    }
    snprintf(root, sizeof(root), "%.*s", (int)(tail - __FILE__), __FILE__);
    cc = getenv("CC") ? getenv("CC") : "cc";
    snprintf(src, sizeof(src), "%s --version >/dev/null 2>&1", cc);
    if (system(src) != 0) {
        fprintf(stderr, "no C compiler (%s): skipped\n", cc);
        return 77;
    }
    snprintf(src, sizeof(src), "%scache/*.h", root);
    HE_CHECK(glob(src, 0, NULL, &g) == 0 && g.gl_pathc >= 10);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *h = g.gl_pathv[i] + strlen(root);
        int rc;
        snprintf(src, sizeof(src), "#include \"%s\"\n", h);
        if ((rc = compile(src)) != 0) fprintf(stderr, "%s does not compile alone\n", h);
        HE_CHECK(rc == 0);
    }
    globfree(&g);
    /* liburing.h guards itself with LIB_URING_H, conf.h with HE_CONF_H */
    HE_CHECK(compile("#include \"cache/stats.h\"\n"
                     "#if defined(LIB_URING_H) || defined(HE_CONF_H) || defined(HE_CACHE_KEY_H)\n"
                     "#error stats.h brings more than the counters\n"
                     "#endif\n") == 0);
    HE_TEST_MAIN_END();
}
