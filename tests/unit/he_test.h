/* Minimal unit-test harness: each test file is one executable run by ctest.
 * HE_CHECK records a failure and continues; the process exits non-zero if any
 * check failed, 77 if the test called he_test_skip(). */
#ifndef HE_TEST_H
#define HE_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int he_test_failures;
static int he_test_checks;

#define HE_CHECK(cond)                                                                             \
    do {                                                                                           \
        he_test_checks++;                                                                          \
        if (!(cond)) {                                                                             \
            he_test_failures++;                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define HE_CHECK_INT(a, b)                                                                         \
    do {                                                                                           \
        long long he__a = (long long)(a), he__b = (long long)(b);                                  \
        he_test_checks++;                                                                          \
        if (he__a != he__b) {                                                                      \
            he_test_failures++;                                                                    \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a,    \
                    he__a, #b, he__b);                                                             \
        }                                                                                          \
    } while (0)

#define HE_CHECK_STR(a, b)                                                                         \
    do {                                                                                           \
        const char *he__a = (a), *he__b = (b);                                                     \
        he_test_checks++;                                                                          \
        if (he__a == NULL || he__b == NULL || strcmp(he__a, he__b) != 0) {                        \
            he_test_failures++;                                                                    \
            fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a,      \
                    he__a ? he__a : "(null)", he__b ? he__b : "(null)");                           \
        }                                                                                          \
    } while (0)

#define HE_TEST_MAIN_END()                                                                         \
    do {                                                                                           \
        fprintf(stderr, "%s: %d checks, %d failed\n", __FILE__, he_test_checks, he_test_failures); \
        return he_test_failures ? 1 : (he_test_checks ? 0 : 1);                                    \
    } while (0)

#endif
