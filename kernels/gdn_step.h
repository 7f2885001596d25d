/* gdn_step: Gated DeltaNet recurrent step for one token per sequence (MODEL.md §3.5 steps 4-7,
 * §4.1), fused with the gated RMSNorm of the output:
 *   per v-head j (key head kh = j / (n_v_heads/n_k_heads)):
 *     qn = l2norm(q_kh)/sqrt(128), kn = l2norm(k_kh)        l2norm(x) = x*rsqrt(sum x^2 + 1e-6)
 *     g = -exp(a_log[j]) * softplus(a[j] + dt_bias[j]),  beta = sigmoid(b[j])
 *     S = exp(g) S;  d = beta (v_j - S^T kn);  S += kn d^T;  o = S^T qn
 *     out_j = norm_w * (o * rsqrt(mean(o^2) + eps)) * silu(z_j)       (plain w)
 * Head dims are fixed at GDN_STEP_HEAD_DIM = 128; state fp32. */
#ifndef KERNELS_GDN_STEP_H
#define KERNELS_GDN_STEP_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GDN_STEP_HEAD_DIM 128

/* qkv: (n_seq, (2*n_k_heads + n_v_heads)*128) post-conv [q | k | v], head-major;
 * z: (n_seq, n_v_heads*128); a, b: (n_seq, n_v_heads) raw projections; a_log, dt_bias:
 * (n_v_heads,); norm_w: (128,); state: (n_slots, n_v_heads, 128 [k], 128 [v]) updated in place;
 * slots: (n_seq,) or NULL (= sequence index); out: (n_seq, n_v_heads*128). Device pointers.
 * Returns 0, ERR_INVAL (n_v_heads not a multiple of n_k_heads), ERR_CUDA. */
int gdn_step_cuda(float *out, float *state, const float *qkv, const float *z, const float *a,
                  const float *b, const float *a_log, const float *dt_bias, const float *norm_w,
                  const int32_t *slots, int n_seq, int n_k_heads, int n_v_heads, float eps,
                  cudaStream_t stream);
/* Same contract on host pointers: the recurrence of MODEL.md §4.1 then the gated norm. */
int gdn_step_ref(float *out, float *state, const float *qkv, const float *z, const float *a,
                 const float *b, const float *a_log, const float *dt_bias, const float *norm_w,
                 const int32_t *slots, int n_seq, int n_k_heads, int n_v_heads, float eps);

#ifdef __cplusplus
}
#endif

#endif
