// dummy_fill (the device side of `--load-format dummy`): bytes and 16-bit tables through the
// real launchers vs the CPU references, bit for bit, on odd lengths and unaligned starts (the
// scalar tails) and lengths of whole aligned units (the vector stores).
#include "emu_kw.h"
#include "dummy_fill_emu.inc"

static int run_fill(int64_t n, int off)
{
    uint8_t *b = (uint8_t *)emu_alloc((size_t)n + 16), *bref = (uint8_t *)malloc((size_t)n + 1);
    uint16_t *h = (uint16_t *)emu_alloc(2 * ((size_t)n + 16)), *href = (uint16_t *)malloc(2 * (size_t)n + 2);
    uint16_t tab[256];
    for (int i = 0; i < 256; i++) tab[i] = (uint16_t)(i * 2654435761u >> 16);
    const uint64_t seed = 0x1234567890abcdefull ^ (uint64_t)n;
    g_emu_launched.clear();
    int rc = dummy_fill_bytes_cuda(b + off, n, seed, 0x0f, 0x30, 0);
    rc |= dummy_fill_bytes_ref(bref, n, seed, 0x0f, 0x30);
    rc |= dummy_fill_u16_cuda(h + off, n, seed ^ 1, tab, 0);
    rc |= dummy_fill_u16_ref(href, n, seed ^ 1, tab);
    const int bad = memcmp(b + off, bref, (size_t)n) != 0 || memcmp(h + off, href, 2 * (size_t)n) != 0;
    printf("dummy_fill emu n=%lld off=%d ran=%s: rc=%d %s\n", (long long)n, off, g_emu_launched.c_str(), rc,
           rc || bad ? "FAIL" : "ok");
    return rc || bad;
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    int fail = 0;
    fail |= run_fill(1, 0);
    fail |= run_fill(7, 3);
    fail |= run_fill(64, 0);
    fail |= run_fill(1000, 1);
    fail |= run_fill(8 * 2048 * 3 + 5, 0); /* more units than one block's threads */
    printf("%s\n", fail ? "FAILED" : "all ok");
    return fail;
}
