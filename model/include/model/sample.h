/* sample: choosing the next token from a logit vector: greedy, temperature, top-k, top-p, min-p,
 * logit bias and banned ids, repetition / presence / frequency penalties, with an explicit seeded
 * PRNG (xoshiro256**, seeded through splitmix64): the same seed and inputs give the same tokens. A
 * sample_ctx holds the per-vocabulary scratch so nothing is allocated per token. */
#ifndef MODEL_SAMPLE_H
#define MODEL_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

struct sample_rng {
    uint64_t s[4];
};

void sample_rng_seed(struct sample_rng *r, uint64_t seed);
uint64_t sample_rng_next(struct sample_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double sample_rng_uniform(struct sample_rng *r);

struct sample_params {
    float temperature;         // <= 0: greedy (argmax after penalties); default 1
    int top_k;                 // keep the k most likely; <= 0: off
    float top_p;               // nucleus mass in (0, 1]; >= 1: off
    float min_p;               // drop p < min_p * p_max; <= 0: off
    float repetition_penalty;  // tokens in hist: logit/rp if > 0 else logit*rp; 1: off
    float presence_penalty;    // logit -= presence if the token is in hist; 0: off
    float frequency_penalty;   // logit -= frequency * count in hist; 0: off
    const int32_t *bias_ids;   // (n_bias) logit += bias_vals[i] before the penalties (logit_bias);
    const float *bias_vals;    //   ids outside the vocabulary are ignored; borrowed
    int n_bias;                // 0: off
    const uint32_t *ban_ids;   // (n_ban) logit = -inf before the penalties (min_tokens masks the
    int n_ban;                 //   stop ids with it); borrowed; 0: off
    const uint32_t *allow;     // ((n_vocab + 31) / 32) bit set of the allowed ids (bit id & 31 of
                               //   word id >> 5); the others get -inf before the penalties
                               //   (constrained decoding); borrowed; NULL: off
};

/* temperature 1, everything else off (no bias, no banned ids). */
void sample_params_default(struct sample_params *p);
/* Whether a repetition, presence or frequency penalty is on (the history matters). */
bool sample_params_penalised(const struct sample_params *p);

struct sample_ctx;
struct sample_ctx *sample_ctx_create(int n_vocab);
void sample_ctx_destroy(struct sample_ctx *sc);

/* Index of the largest value, the lowest index on ties. */
int32_t sample_argmax(const float *logits, int n);
/* One token from logits (n_vocab, not modified). hist: the tokens the penalties look at (may be
 * NULL when n_hist == 0; ids outside the vocabulary are ignored). ERR_INVAL on bad params. */
int32_t sample_token(struct sample_ctx *sc, const struct sample_params *p, const float *logits,
                     const int32_t *hist, int n_hist, struct sample_rng *rng);
/* The final distribution sample_token draws from (after penalties, temperature and the
 * truncations), written to probs (n_vocab). Greedy params give a one-hot vector. 0 or ERR_INVAL. */
int sample_probs(struct sample_ctx *sc, const struct sample_params *p, const float *logits,
                 const int32_t *hist, int n_hist, float *probs);

#endif
