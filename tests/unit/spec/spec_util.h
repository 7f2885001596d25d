/* spec_util: shared pieces of the speculative-decoding tests: temp dirs, tiny checkpoints,
 * plain (non-speculative) generation as the reference, speculative generation through
 * spec_dec, and chi-square statistics. */
#ifndef SPEC_UTIL_H
#define SPEC_UTIL_H

#include "model/model.h"
#include "model/sample.h"
#include "model/spec.h"

#include <stdint.h>

struct tpool;

/* A fresh temp dir under $TERN_BUILD_DIR (or /tmp) into buf; 0 or -1. */
int su_tmpdir(char *buf, size_t len);
/* rm -rf dir (best effort). */
void su_rmdir(const char *dir);
/* Write a tiny checkpoint (seed, mtp, layer pattern, vocab) into dir and load it; NULL on
 * failure (message on stderr). */
struct model *su_tiny(const char *dir, uint64_t seed, int mtp, const char *layers, int vocab);
struct model *su_load(const char *dir);

/* Plain generation: prompt (np) prefilled in chunks of chunk, then one token per forward_run;
 * writes n_gen tokens into gen. 0 or a negative status. */
int su_plain(const struct model *m, struct tpool *tp, const int32_t *prompt, int np, int chunk,
             const struct sample_params *sp, uint64_t seed, int n_gen, int32_t *gen);

/* Speculative generation of n_gen tokens through spec_dec with opts o (prefill chunk as given
 * there); stats copied into *stats when not NULL. 0 or a negative status. */
int su_spec(const struct model *m, struct tpool *tp, const int32_t *prompt, int np,
            const struct spec_dec_opts *o, uint64_t seed, int n_gen, int32_t *gen,
            struct spec_stats *stats);

/* Pearson goodness of fit of counts (n) against probabilities p (n): cells with expected count
 * < 5 are pooled into one; *df gets the degrees of freedom. */
double su_chi2_gof(const int64_t *counts, const double *p, int n, int *df);
/* Two-sample chi-square (homogeneity) of counts a and b (n cells): cells with a+b < 10 pooled. */
double su_chi2_two(const int64_t *a, const int64_t *b, int n, int *df);
/* Upper critical value of chi-square with df degrees of freedom at upper-tail z (normal
 * quantile; 3.09 ~ p = 0.001), by the Wilson-Hilferty approximation. */
double su_chi2_crit(int df, double z);

#endif
