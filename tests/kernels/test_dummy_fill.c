/* dummy_fill: the device's `--load-format dummy` values against the CPU reference (the
 * loader's host fill), bit for bit: bytes (NVFP4 codes and block scales, FP8) and 16-bit table
 * values (BF16), odd lengths, unaligned starts, a length past one grid of blocks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "dummy_fill.h"
#include "ktest.h"
#include "test.h"

static void test_fill(int64_t n, int off)
{
    uint8_t *b = malloc((size_t)n + 1), *bref = malloc((size_t)n + 1);
    uint16_t *h = malloc(2 * (size_t)n + 2), *href = malloc(2 * (size_t)n + 2);
    uint16_t tab[256];
    for (int i = 0; i < 256; i++)
        tab[i] = (uint16_t)(ktest_u32() & 0xffff);
    const uint64_t seed = ((uint64_t)ktest_u32() << 32) | ktest_u32();
    uint8_t *db = ktest_dev_alloc((size_t)n + 16);
    uint16_t *dh = ktest_dev_alloc(2 * (size_t)n + 32);
    CHECK_EQ_INT(dummy_fill_bytes_cuda(db + off, n, seed, 0xbf, 0, 0), 0);
    CHECK_EQ_INT(dummy_fill_u16_cuda(dh + off, n, seed ^ 1, tab, 0), 0);
    CHECK_EQ_INT(dummy_fill_bytes_ref(bref, n, seed, 0xbf, 0), 0);
    CHECK_EQ_INT(dummy_fill_u16_ref(href, n, seed ^ 1, tab), 0);
    ktest_to_host(b, db + off, (size_t)n);
    ktest_to_host(h, dh + off, 2 * (size_t)n);
    const int same = memcmp(b, bref, (size_t)n) == 0 && memcmp(h, href, 2 * (size_t)n) == 0;
    printf("dummy_fill n=%lld off=%d %s\n", (long long)n, off, same ? "ok" : "FAIL");
    CHECK(same);
    ktest_free(db), ktest_free(dh);
    free(b), free(bref), free(h), free(href);
}

int main(void)
{
    ktest_require_gpu();
    ktest_seed(5);
    test_fill(1, 0);
    test_fill(13, 3);
    test_fill(4096, 0);
    test_fill(4096 + 5, 1);
    test_fill((int64_t)8 * 256 * 8192 + 24, 0); /* more units than the grid's threads */
    CHECK_EQ_INT(dummy_fill_bytes_cuda(NULL, 8, 1, 0xff, 0, 0), ERR_INVAL);
    CHECK_EQ_INT(dummy_fill_u16_cuda(NULL, 8, 1, NULL, 0), ERR_INVAL);
    CHECK_EQ_INT(dummy_fill_bytes_cuda(NULL, 0, 1, 0xff, 0, 0), 0);
    ktest_sync();
    return test_result();
}
