/* linear: y = x W^T for any number of activation rows and any struct kweight format, on the path
 * the caller names (the runner's dispatch table decides, by rows and format):
 *   LINEAR_PATH_GEMV  gemv_cuda: the weight streamed once per call, for few rows (decode).
 *   LINEAR_PATH_GEMM  tensor cores: x rounded to bf16 (nearest even); a bf16 weight goes straight
 *                     to cuBLASLt (bf16 x bf16 -> fp32); an fp8 or nvfp4 weight is first decoded
 *                     (scales applied) and rounded to bf16 into the context's scratch, in row
 *                     chunks that fit it, each chunk one cuBLASLt GEMM into its output columns.
 *   LINEAR_PATH_GEMM_SPLIT  the same with x split into two bf16 parts, hi = bf16(x) and
 *                     lo = bf16(x - hi), and y = W hi + W lo (two GEMMs, the second
 *                     accumulating): x carries ~16 bits instead of 8, for the lm_head, whose
 *                     logits the bf16 rounding of x would move by ~1e-2 of their range; the
 *                     weight is read twice, which costs nothing against a GEMV from 4 rows.
 *   LINEAR_PATH_TILES  nvfp4 weights only (linear_tiles_ok): the pipelined W4A16 tile GEMM of
 *                     internal/nvfp4_tile.cuh straight from the nvfp4 bytes (no decoded copy, no
 *                     cuBLASLt): 16-row tiles up to LINEAR_TILES_SMALL_ROWS rows, 64-row tiles
 *                     above; the GEMM path's math (x and the decoded weight rounded to bf16) with
 *                     fp32 accumulation. Needs no context (c may be NULL).
 * The context owns the cuBLASLt handle, its workspace and the bf16 scratch; linear_cuda
 * allocates nothing. One context per stream at a time. */
#ifndef KERNELS_LINEAR_H
#define KERNELS_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "kstream.h"
#include "kweight.h"

#ifdef __cplusplus
extern "C" {
#endif

enum linear_path {
    LINEAR_PATH_GEMV = 1,
    LINEAR_PATH_GEMM = 2,
    LINEAR_PATH_GEMM_SPLIT = 3,
    LINEAR_PATH_TILES = 4
};
#define LINEAR_TILES_SMALL_ROWS 64

/* "gemv", "gemm", "gemm_split", "tiles" (static storage). */
const char *linear_path_name(int path);

struct linear_ctx;

/* Scratch for up to max_rows x max_k activations (twice: the split path's two parts) and w_elems
 * decoded weight elements (at least
 * 16 rows of the widest weight), and a cuBLASLt workspace of ws_bytes. Returns 0, ERR_INVAL,
 * ERR_NOMEM (device memory), ERR_CUDA. */
int linear_ctx_create(struct linear_ctx **out, int max_rows, int max_k, int64_t w_elems,
                      size_t ws_bytes);
void linear_ctx_destroy(struct linear_ctx *c);
/* Device bytes the context holds. */
int64_t linear_ctx_bytes(const struct linear_ctx *c);

/* y: (n, w->rows) fp32; x: (n, w->cols) fp32, 16-byte aligned; expert e of w (0 for a plain
 * weight); device pointers. GEMM path: n <= max_rows, w->cols <= max_k, cols % 8 == 0 and the
 * kweight_check_dev rules (else ERR_INVAL). Returns 0, ERR_INVAL, ERR_UNSUPPORTED (no cuBLASLt
 * algorithm), ERR_CUDA. Does not synchronize. */
int linear_cuda(struct linear_ctx *c, float *y, const struct kweight *w, int expert, const float *x,
                int n, int path, cudaStream_t stream);

/* 1 when LINEAR_PATH_TILES takes w: nvfp4, cols % 64 == 0, rows and experts 32-element
 * aligned, scale rows 4-byte aligned, 16-byte aligned data. Host only. */
int linear_tiles_ok(const struct kweight *w);

/* y (n, rows) = x (n, cols) w^T for an fp32 weight w (rows, cols) through cuBLASLt fp32 (no
 * bf16 rounding of x: the MoE router, whose near-tie expert choices bf16 activations could flip).
 * n <= max_rows. Returns 0, ERR_INVAL, ERR_UNSUPPORTED, ERR_CUDA. */
int linear_f32_cuda(struct linear_ctx *c, float *y, const float *w, int rows, int cols,
                    const float *x, int n, cudaStream_t stream);

/* Rows r0 .. r0+nr-1 of expert e of w as bf16 (scales applied, nearest even) into out
 * (nr x cols, dense). Device pointers; cols % 8 == 0. Returns 0, ERR_INVAL, ERR_CUDA. */
int linear_dequant_bf16_cuda(uint16_t *out, const struct kweight *w, int expert, int r0, int nr,
                             cudaStream_t stream);

/* Host references (host pointers): the GEMM path's math (x and the decoded weight rounded to
 * bf16, double accumulation), and the decoded rows. Return 0, ERR_INVAL, ERR_NOMEM. */
int linear_gemm_ref(float *y, const struct kweight *w, int expert, const float *x, int n);
int linear_dequant_bf16_ref(uint16_t *out, const struct kweight *w, int expert, int r0, int nr);

#ifdef __cplusplus
}
#endif

#endif
