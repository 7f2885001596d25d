/* sample: batched token sampling on the device (greedy, temperature, top-k, top-p, min-p,
 * repetition / presence / frequency penalties), B rows of V fp32 logits, one token per row,
 * with the semantics of model/sample.c (sample_token), made exactly reproducible:
 *
 *   1. penalties, in place on the logits, for each (token, count) pair of the row (tokens unique
 *      within a row; ids outside [0, V) or count <= 0 ignored), skipped when all are neutral:
 *        l = rp != 1 ? (l > 0 ? l / rp : l * rp) : l;  l -= presence;  l -= frequency * count
 *      (fp32, each operation rounded, as in sample.c). A NaN logit is left as it is, bit for bit
 *      (any fp32 op on it would return the device's canonical NaN 0x7fffffff but the operand's
 *      payload on x86, e.g. 0x7fc00000: the penalised rows would differ in their bits).
 *      NaN logits then count as -inf, -0 as +0.
 *   2. greedy when temperature <= 0 or top_k == 1, or when the max logit is not finite:
 *      argmax, the lowest index on ties (a row of -inf gives 0).
 *   3. weights q_i = floor(2^44 * e_i), e_i = sample_kexp((l_i - max) * (1/T)) (fp32, a fixed
 *      sequence of rounded operations, identical on host and device); the max token has
 *      q = 2^44 exactly. Weights below 2^-44 of the max are 0 (never drawn). Sums are exact
 *      uint64 (V <= SAMPLE_MAX_VOCAB), so the order of summation does not matter.
 *   4. order: logit descending, id ascending (the order sample.c sorts candidates in).
 *      top-k (0 < k < V): the first k of the order; Zk = their weight (all tokens if off).
 *      top-p (< 1): the shortest prefix (>= 1 token) with (double)cum >= (double)top_p * Zk.
 *      min-p (> 0): drop kept tokens with (double)q_i < (double)min_p * 2^44 (the max keeps).
 *   5. draw, in index order over the kept set K with total Q: U = min(floor(u * (double)Q), Q-1),
 *      the first i in K whose inclusive prefix weight exceeds U (so q = 0 is never chosen).
 * The difference to sample.c is rounding only (fp32 exp to a few ulp, weights truncated at
 * 2^-44): tokens differ only where u or a truncation threshold lies within ~1e-6 of a boundary.
 * logprob (optional): log of the chosen token's probability in the final distribution (q/Q);
 * 0 for greedy rows. */
#ifndef KERNELS_SAMPLE_H
#define KERNELS_SAMPLE_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SAMPLE_MAX_VOCAB (1 << 19)    // 2^19 * 2^44 = 2^63: weight sums fit uint64
#define SAMPLE_Q_ONE 17592186044416.0 // 2^44, the weight of the max token

/* Per-row parameters (same meaning as struct sample_params in model/sample.h) + the row's
 * penalty pairs (pen_tok/pen_cnt[pen_off .. pen_off+pen_n)) + the uniform u in [0, 1) that
 * sample_token would draw from the row's sample_rng (unused by greedy rows). */
struct sample_row {
    float temperature;
    float top_p;
    float min_p;
    float repetition_penalty;
    float presence_penalty;
    float frequency_penalty;
    int32_t top_k;
    int32_t pen_off;
    int32_t pen_n;
    int32_t pad_;
    double u;
};

/* The sample_token parameter check (0 or ERR_INVAL): temperature not NaN, top_p > 0,
 * min_p <= 1, repetition_penalty > 0, presence/frequency finite. */
int sample_row_check(const struct sample_row *r);

/* The deterministic exp of step 3, for x <= 0 (NaN or x < -31 give 0): e^x as fp32 with
 * separately rounded operations (no FMA), so host and device agree to the bit. */
float sample_kexp(float x);

/* Penalty pairs from a token history: unique tokens of hist in first-occurrence order with
 * their counts, written to tok/cnt (capacity n_hist); ids outside [0, V) skipped. count_scratch:
 * (V) ints, all 0 on entry and on return. Returns the number of pairs. */
int sample_pen_pairs(const int32_t *hist, int n_hist, int V, int *count_scratch, int32_t *tok,
                     int32_t *cnt);

/* tokens[b] (and logprobs[b] when not NULL) for each row b. logits: (B, V) fp32, modified in
 * place by the penalties. rows: (B). pen_tok/pen_cnt: the pairs rows point into (may be NULL
 * when every pen_n is 0). All device pointers. 1 <= V <= SAMPLE_MAX_VOCAB.
 * Params are not checked on the device (run sample_row_check on the host).
 * Returns 0, ERR_INVAL, ERR_CUDA. */
int sample_cuda(int32_t *tokens, float *logprobs, float *logits, const struct sample_row *rows,
                const int32_t *pen_tok, const int32_t *pen_cnt, int B, int V, cudaStream_t stream);

/* Reference (host pointers, same contract; logits modified in place the same way). margin
 * (optional, (B)): for each row the smallest relative distance of a decision from its
 * threshold (u from the chosen token's interval edges, the top-p cut from top_p, kept weights
 * from the min-p cut); 1 for greedy rows. Returns 0 or ERR_INVAL. */
int sample_ref(int32_t *tokens, float *logprobs, float *logits, const struct sample_row *rows,
               const int32_t *pen_tok, const int32_t *pen_cnt, int B, int V, double *margin);

/* The final distribution of one row as probabilities (V) (one-hot for greedy rows); logits as in
 * sample_ref (modified in place). 0 or ERR_INVAL. */
int sample_ref_probs(double *probs, float *logits, const struct sample_row *row,
                     const int32_t *pen_tok, const int32_t *pen_cnt, int V);

#ifdef __cplusplus
}
#endif

#endif
