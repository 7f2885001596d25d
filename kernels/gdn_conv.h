/* gdn_conv: Gated DeltaNet causal depthwise conv1d, one decode step per sequence, with its
 * rolling state of the last kc-1 raw inputs (MODEL.md §3.5 step 2 and §4.4):
 *   out[s,c] = silu(sum_{j<kc-1} w[c,j]*state[c,j] + w[c,kc-1]*x[s,c]);  state <- [state[1:], x]
 * The state is kept in fp32 (the reference keeps bf16; see the report). */
#ifndef KERNELS_GDN_CONV_H
#define KERNELS_GDN_CONV_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GDN_CONV_MAX_KC 8

/* out, x: (n_seq, channels); w: (channels, kc) (conv1d.weight [C,1,kc]; tap kc-1 = current token);
 * state: (n_slots, channels, kc-1), oldest input first, updated in place; slots: (n_seq,) state
 * slot of each sequence, or NULL for slot = sequence index. Device pointers. Returns 0, ERR_INVAL
 * (kc < 2 or > GDN_CONV_MAX_KC), ERR_CUDA. */
int gdn_conv_cuda(float *out, float *state, const float *x, const float *w, const int32_t *slots,
                  int n_seq, int channels, int kc, cudaStream_t stream);
int gdn_conv_ref(float *out, float *state, const float *x, const float *w, const int32_t *slots,
                 int n_seq, int channels, int kc);

#ifdef __cplusplus
}
#endif

#endif
