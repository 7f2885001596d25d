/* moe_grouped: the routed-expert SwiGLU of a MoE block for prefill (many tokens), as grouped GEMMs
 * on tensor cores. Same math and contract as moe_expert (moe_expert.h):
 *   h[t,j,:] = silu(x[t] Wg[e]^T) * (x[t] Wu[e]^T),   e = ids[t,j]
 *   out[t,:] (+)= sum_j weights[t,j] * (h[t,j,:] Wd[e]^T)
 * Steps (five launches): plan (count slots per expert, prefix sum, scatter slot ids into an
 * expert-sorted order, list of 64-row tiles), gate_up GEMM with SiLU*up fused (h stored in bf16),
 * down GEMM (fp32 per slot), and a combine that gathers each token's top_k slot rows in slot order
 * (deterministic, no float atomics). The GEMMs use mma.sync m16n8k16 bf16 x bf16 -> fp32: the
 * activations (x, h) are rounded to bf16 and the weights (bf16, fp8 any scale kind, nvfp4) are
 * dequantized (scales applied) and rounded to bf16 in shared memory, tile by tile. */
#ifndef KERNELS_MOE_GROUPED_H
#define KERNELS_MOE_GROUPED_H

#include <stddef.h>
#include <stdint.h>

#include "kstream.h"
#include "kweight.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows (expert slots) per GEMM tile: 64 (2 x 2 warps of 32 x 32, K steps of 32) or 16 (1 x 4
 * warps of 16 x 16, K steps of 128: a quarter of the padded rows and four times the weight bytes
 * in flight per block, for few rows per expert, e.g. a 64-sequence decode step: ~2.3 rows for
 * each of ~222 experts). The scratch is sized for the smaller tile. */
#define MOE_GROUPED_TILE_ROWS 64
#define MOE_GROUPED_TILE_ROWS_SMALL 16

/* Floats of scratch (ws) moe_grouped_cuda needs (int tables, bf16 h and fp32 per-slot outputs).
 * At most moe_expert_ws_floats() of the same shape plus 4*n_experts + 16 (inter >= 8). */
size_t moe_grouped_ws_floats(int n_tok, int top_k, int n_experts, int inter, int hidden);

/* Same arguments as moe_expert_cuda; ws: moe_grouped_ws_floats() floats, 16-byte aligned.
 * Extra preconditions (else ERR_INVAL): both weights pass the moe_expert checks
 * (kweight_check_dev: cols and strides multiples of 8/16/16 for bf16/fp8/nvfp4, 16-byte aligned
 * data), hidden % 8 == 0, inter % 8 == 0, strides % 8 == 0, n_experts <= 2048,
 * n_tok * top_k <= 2^21. Slots with an id outside [0, n_experts) contribute
 * nothing. Device pointers. Returns 0, ERR_INVAL, ERR_CUDA. Does not synchronize. */
int moe_grouped_cuda(float *out, float *ws, const float *x, const int32_t *ids,
                     const float *weights, int n_tok, int top_k, int n_experts,
                     const struct kweight *gate_up, const struct kweight *down, int accumulate,
                     cudaStream_t stream);
/* With MOE_GROUPED_TILE_ROWS as tile_rows (MOE_GROUPED_TILE_ROWS | MOE_GROUPED_PIPE64): the
 * 64-row tiles of a weight run the pipelined NVFP4 kernel where moe_grouped_small_pipelined(w)
 * (K steps of 64; same results bit for bit); not the default until measured faster. */
#define MOE_GROUPED_PIPE64 0x100
/* With MOE_GROUPED_TILE_ROWS | MOE_GROUPED_PIPE64: the pipelined 64-row tiles with their 4 warps
 * side by side (each 64 rows x 16 columns: every weight element decoded once per block, where the
 * default 2 x 2 grid decodes each twice); the same results. Not measured yet. */
#define MOE_GROUPED_PIPE64_COLS 0x200

/* moe_grouped_cuda with the tile rows chosen: MOE_GROUPED_TILE_ROWS (| MOE_GROUPED_PIPE64) or
 * MOE_GROUPED_TILE_ROWS_SMALL (else ERR_INVAL; also when the small tiles of n_tok * top_k slots
 * would exceed 65535 grid rows). moe_grouped_cuda uses MOE_GROUPED_TILE_ROWS. */
int moe_grouped_cuda_tiles(float *out, float *ws, const float *x, const int32_t *ids,
                           const float *weights, int n_tok, int top_k, int n_experts,
                           const struct kweight *gate_up, const struct kweight *down,
                           int accumulate, int tile_rows, cudaStream_t stream);
/* 1 when the 16-row tiles of weight w (and its 64-row tiles with MOE_GROUPED_PIPE64) run the
 * pipelined NVFP4 kernel (cp.async stages of raw codes and scales, B fragments decoded from
 * shared memory; same results bit for bit): NVFP4 with cols % 64 == 0, row and expert strides %
 * 32 == 0 and scale strides % 4 == 0 (the model's shapes); else 0. Host only. */
int moe_grouped_small_pipelined(const struct kweight *w);
/* Host reference: moe_expert_ref (the definition), with its own scratch. Returns 0, ERR_INVAL,
 * ERR_NOMEM. */
int moe_grouped_ref(float *out, const float *x, const int32_t *ids, const float *weights, int n_tok,
                    int top_k, int n_experts, const struct kweight *gate_up,
                    const struct kweight *down, int accumulate);

#ifdef __cplusplus
}
#endif

#endif
