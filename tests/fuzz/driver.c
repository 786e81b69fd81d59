/* Replays a fuzz target's seed corpus, then bounded random mutations of it,
 * so every parser's fuzz target runs under ctest (and ASan/UBSan in CI) even
 * where libFuzzer is not built. With -DHE_FUZZ=ON and clang the same target
 * links against libFuzzer instead of this file. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/he_xorshift.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HE_FUZZ_MAX_SEEDS 256
#define HE_FUZZ_MAX_LEN 65536

static uint64_t he_fuzz_rng = 0x9e3779b97f4a7c15ull;

static size_t he_fuzz_mutate(uint8_t *buf, size_t len, size_t cap)
{
    int n = 1 + (int)(he_xorshift64(&he_fuzz_rng) % 8);
    for (int i = 0; i < n; i++) {
        switch (he_xorshift64(&he_fuzz_rng) % 5) {
        case 0: /* flip a byte */
            if (len) buf[he_xorshift64(&he_fuzz_rng) % len] = (uint8_t)he_xorshift64(&he_fuzz_rng);
            break;
        case 1: /* insert an interesting byte */
            if (len < cap) {
                static const uint8_t interesting[] = {'\r', '\n', '%', '.', '/', '\\', 0,
                                                      '#',  ':',  ',', '"', '-', '='};
                size_t at = len ? he_xorshift64(&he_fuzz_rng) % (len + 1) : 0;
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = interesting[he_xorshift64(&he_fuzz_rng) % sizeof(interesting)];
                len++;
            }
            break;
        case 2: /* delete a run */
            if (len) {
                size_t at = he_xorshift64(&he_fuzz_rng) % len,
                       n2 = 1 + he_xorshift64(&he_fuzz_rng) % 16;
                if (at + n2 > len) n2 = len - at;
                memmove(buf + at, buf + at + n2, len - at - n2);
                len -= n2;
            }
            break;
        case 3: /* duplicate a run */
            if (len && len < cap) {
                size_t at = he_xorshift64(&he_fuzz_rng) % len,
                       n2 = 1 + he_xorshift64(&he_fuzz_rng) % 64;
                if (at + n2 > len) n2 = len - at;
                if (len + n2 > cap) n2 = cap - len;
                memmove(buf + at + n2, buf + at, len - at);
                len += n2;
            }
            break;
        case 4: /* truncate */
            if (len) len = he_xorshift64(&he_fuzz_rng) % len;
            break;
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    static uint8_t seeds[HE_FUZZ_MAX_SEEDS][HE_FUZZ_MAX_LEN];
    static size_t seed_len[HE_FUZZ_MAX_SEEDS];
    static uint8_t work[HE_FUZZ_MAX_LEN * 2];
    int nseeds = 0;
    long iterations = getenv("HE_FUZZ_ITERATIONS") ? atol(getenv("HE_FUZZ_ITERATIONS")) : 20000;

    if (argc > 1) {
        DIR *d = opendir(argv[1]);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL && nseeds < HE_FUZZ_MAX_SEEDS) {
            char path[4096];
            if (e->d_name[0] == '.') continue;
            snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
            FILE *f = fopen(path, "rb");
            if (!f) continue;
            seed_len[nseeds] = fread(seeds[nseeds], 1, HE_FUZZ_MAX_LEN, f);
            fclose(f);
            nseeds++;
        }
        if (d) closedir(d);
    }
    if (nseeds == 0) {
        fprintf(stderr, "fuzz driver: no seeds in %s\n", argc > 1 ? argv[1] : "(none)");
        return 1;
    }
    for (int i = 0; i < nseeds; i++)
        LLVMFuzzerTestOneInput(seeds[i], seed_len[i]);
    for (long it = 0; it < iterations; it++) {
        int s = (int)(he_xorshift64(&he_fuzz_rng) % (uint64_t)nseeds);
        memcpy(work, seeds[s], seed_len[s]);
        size_t len = he_fuzz_mutate(work, seed_len[s], sizeof(work));
        LLVMFuzzerTestOneInput(work, len);
    }
    printf("fuzz driver: %d seeds, %ld mutated inputs, no crash\n", nseeds, iterations);
    return 0;
}
