/* testmodel: a small random qwen3_5_moe model built in memory for the forward-pass tests:
 * fp32 qweights, non-trivial norm weights, A_log, dt_bias and conv taps. */
#ifndef TESTMODEL_H
#define TESTMODEL_H

#include "model/model.h"

#include <stdint.h>

/* Tiny config: V 64, H 32, layers by pattern ('L' GDN, 'F' full attention), Hq 4 / Hkv 2 / D 16
 * (rotary 8), GDN Hk 2 / Hv 4 / Dk 8 / Dv 8 / Kc 4, 8 experts top-2, I = Is = 16, with MTP. */
struct model *testmodel_create(const char *pattern, uint64_t seed);
void testmodel_destroy(struct model *m);

/* Deterministic test randomness. */
struct trng {
    uint64_t s;
};
double trng_uniform(struct trng *r);           // [0, 1)
float trng_normal(struct trng *r, float std);  // N(0, std^2)

/* max|a-b| / max(max|b|, tiny) */
double rel_err(const float *a, const float *b, int64_t n);

#endif
