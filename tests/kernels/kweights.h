/* kweights: random struct kweight instances (host + device copies) for the kernel tests and
 * benchmarks: bf16, fp8 (tensor/channel/block scales) and nvfp4, optionally stacked experts. */
#ifndef TESTS_KWEIGHTS_H
#define TESTS_KWEIGHTS_H

#include "kweight.h"

struct kw_pair {
    struct kweight host; // host pointers (for the reference)
    struct kweight dev;  // same weight, device pointers
};

/* fmt: KW_FMT_*, scale_kind for fp8. Values are random and of moderate size. */
void kw_pair_make(struct kw_pair *p, int fmt, int scale_kind, int n_experts, int rows, int cols);
void kw_pair_free(struct kw_pair *p);
/* Routes like a router's: for each of n_tok tokens, top_k distinct experts of n_experts
 * (top_k <= n_experts) into ids (n_tok, top_k). */
void kw_routes(int32_t *ids, int n_tok, int top_k, int n_experts);
/* Weight bytes of one expert (data + scales), for bandwidth numbers. */
double kw_pair_bytes(const struct kw_pair *p);

#endif
