/* rope: partial neox-style rotary embedding, in place, on fp32 heads (MODEL.md §3.4):
 *   inv_freq[i] = 1/theta^(2i/rot_dim) (rounded to fp32), ang = float(pos) * inv_freq[i] (one fp32
 *   multiply), for i < rot_dim/2: (x[i], x[i+rot_dim/2]) rotated by ang; dims >= rot_dim untouched.
 * cos/sin are evaluated in double from the fp32 angle, so large positions stay exact. */
#ifndef KERNELS_ROPE_H
#define KERNELS_ROPE_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x: head h of token t starts at x[t*tok_stride + h*head_stride] (head_dim floats); pos: (n_tok,).
 * Device pointers. rot_dim even, <= head_dim. Returns 0, ERR_INVAL, ERR_CUDA. */
int rope_cuda(float *x, const int32_t *pos, int n_tok, int n_heads, int head_dim, int rot_dim,
              int64_t tok_stride, int64_t head_stride, float theta, cudaStream_t stream);
int rope_ref(float *x, const int32_t *pos, int n_tok, int n_heads, int head_dim, int rot_dim,
             int64_t tok_stride, int64_t head_stride, float theta);

#ifdef __cplusplus
}
#endif

#endif
