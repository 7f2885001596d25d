/* fuzz_reasoning: the <think> splitter on arbitrary text cut at fuzzed points. Checks the
 * header's promise: the reasoning and content streams are the same whether the text arrives in
 * one delta or in many, and nothing is lost or invented (their sum is a subsequence of the input
 * minus the swallowed tags, so we check only split invariance and lengths).
 * Input: flags byte, n_seed byte, n_seed split bytes, text. */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "fuzz_split.h"
#include "text/reasoning.h"

static void run(bool thinking, const char *text, size_t n, const size_t *cuts, size_t n_cuts,
                struct fz_buf *r, struct fz_buf *c, bool *in_r)
{
    struct reasoning *rs = reasoning_create(thinking);
    struct reasoning_out out;
    size_t off = 0;
    for (size_t i = 0; i < n_cuts; i++) {
        reasoning_feed(rs, text + off, cuts[i], &out);
        off += cuts[i];
        fz_buf_put(r, out.reasoning, out.reasoning_len);
        fz_buf_put(c, out.content, out.content_len);
    }
    if (off != n)
        __builtin_trap();
    *in_r = reasoning_in_reasoning(rs);
    reasoning_flush(rs, &out);
    fz_buf_put(r, out.reasoning, out.reasoning_len);
    fz_buf_put(c, out.content, out.content_len);
    reasoning_destroy(rs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    bool thinking = fz_u8(&f) & 1;
    size_t n_seed;
    const uint8_t *seed = fz_take(&f, FZ_SPLIT_MAX, &n_seed);
    const char *text = (const char *)f.p;
    size_t n = f.n;
    size_t cuts[4096 + 2], n_cuts;
    fz_split(seed, n_seed, n, cuts, &n_cuts, sizeof(cuts) / sizeof(cuts[0]));
    size_t whole = n;
    struct fz_buf r1 = {0}, c1 = {0}, r2 = {0}, c2 = {0};
    bool in1, in2;
    run(thinking, text, n, &whole, 1, &r1, &c1, &in1);
    run(thinking, text, n, cuts, n_cuts, &r2, &c2, &in2);
    if (!fz_buf_eq(&r1, &r2) || !fz_buf_eq(&c1, &c2)) {
        fprintf(stderr, "reasoning: split changed the result: r %zu vs %zu, c %zu vs %zu\n", r1.n,
                r2.n, c1.n, c2.n);
        __builtin_trap();
    }
    if (r1.n + c1.n > n)
        __builtin_trap(); /* output longer than the input */
    fz_buf_free(&r1);
    fz_buf_free(&c1);
    fz_buf_free(&r2);
    fz_buf_free(&c2);
    return 0;
}
