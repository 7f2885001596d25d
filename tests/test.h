/* Minimal assertions for tern tests (STYLE.md §8). A failed CHECK prints the expression and
 * file:line and marks the test failed; the test's main returns test_result(). Exit 77 = skipped. */
#ifndef TERN_TEST_H
#define TERN_TEST_H

#include "common/file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int test_failures_;

#define CHECK(expr)                                                              \
    do {                                                                         \
        if (!(expr)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr); \
            test_failures_++;                                                    \
        }                                                                        \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                       \
    do {                                                                         \
        long long a_ = (long long)(a), b_ = (long long)(b);                      \
        if (a_ != b_) {                                                          \
            fprintf(stderr, "%s:%d: CHECK_EQ_INT failed: %s == %s (%lld vs %lld)\n", \
                    __FILE__, __LINE__, #a, #b, a_, b_);                         \
            test_failures_++;                                                    \
        }                                                                        \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                    \
    do {                                                                         \
        double a_ = (double)(a), b_ = (double)(b);                               \
        if (!(fabs(a_ - b_) <= (tol))) {                                         \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s ~ %s (%.9g vs %.9g, tol %g)\n", \
                    __FILE__, __LINE__, #a, #b, a_, b_, (double)(tol));          \
            test_failures_++;                                                    \
        }                                                                        \
    } while (0)

#define CHECK_STREQ(a, b)                                                        \
    do {                                                                         \
        const char *a_ = (a), *b_ = (b);                                         \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                 \
            fprintf(stderr, "%s:%d: CHECK_STREQ failed: %s == %s (\"%s\" vs \"%s\")\n", \
                    __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
            test_failures_++;                                                    \
        }                                                                        \
    } while (0)

#define TEST_SKIP(why)                                                           \
    do {                                                                         \
        fprintf(stderr, "SKIPPED: %s\n", why);                                   \
        exit(77);                                                                \
    } while (0)

/* The file rel of the source tree ($TERN_SOURCE_DIR, else the working directory), read whole with
 * a NUL after it; NULL when unreadable. The caller frees it. */
static inline char *test_read_source(const char *rel)
{
    const char *src = getenv("TERN_SOURCE_DIR");
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", src ? src : ".", rel);
    return file_read(p, NULL);
}

static inline int test_result(void)
{
    if (test_failures_)
        fprintf(stderr, "FAILED: %d check(s)\n", test_failures_);
    return test_failures_ ? 1 : 0;
}

#endif
