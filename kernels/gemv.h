/* gemv: y = x W^T for a skinny activation batch (decode, 1..64 tokens) and a weight in any
 * struct kweight format (bf16, fp8 e4m3 with tensor/channel/block scales, nvfp4 weight-only).
 * Weights are streamed once with 128-bit loads and dequantized in registers; fp32 accumulation
 * (nvfp4 on tensor cores: fp16 products of the exact dequantized weight and the fp16-rounded
 * activation, fp32 accumulation; activations must stay below 65504 in magnitude).
 * For bigger batches use gemm_bf16 (cuBLASLt). */
#ifndef KERNELS_GEMV_H
#define KERNELS_GEMV_H

#include <stdint.h>

#include "kstream.h"
#include "kweight.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[t][r] = sum_c W[expert][r][c] * x[t][c].  y: (n_tok, w->rows); x: (n_tok, w->cols), 16-byte
 * aligned. Device pointers (w's too). n_tok >= 1. Returns 0, ERR_INVAL (shape/alignment: cols,
 * row_stride and expert_stride multiples of 8/16/16 for bf16/fp8/nvfp4) or ERR_CUDA. Does not
 * synchronize. */
int gemv_cuda(float *y, const struct kweight *w, int expert, const float *x, int n_tok,
              cudaStream_t stream);
/* gemv_cuda with an explicit path, for tests and benchmarks: GEMV_PATH_AUTO (what gemv_cuda does:
 * for nvfp4 the stream kernel at 1..8 tokens when it fits, else tensor cores when the shape
 * allows it, else CUDA cores), GEMV_PATH_CORES (fp32 CUDA-core dot products, any format),
 * GEMV_PATH_TENSOR (nvfp4 only, cols and row strides % 128/32 == 0, 8-byte aligned scale rows:
 * weights decoded to fp16 in registers, activations rounded to fp16, mma.m16n8k16 with fp32
 * accumulation; else ERR_UNSUPPORTED), GEMV_PATH_STREAM (nvfp4, or fp8 with tensor/channel
 * scales or block scales with block_rows % 16 == 0 and block_cols % 128 == 0; 1..8 tokens,
 * cols % 16 == 0, cols <= ~20000/n_tok: bandwidth-oriented decode kernel, activations staged in
 * shared memory as fp16, same numerics as TENSOR; else ERR_UNSUPPORTED), GEMV_PATH_ROWS (bf16
 * or fp8, one token, 16-byte aligned rows, fp8 block scales of whole 16-column chunks: the row
 * kernel, a warp a row with 128 bytes a lane in flight, fp32 products as CORES; else
 * ERR_UNSUPPORTED). AUTO takes ROWS at one token above GEMV_WIDE_MAX_ROWS rows (bf16, fp8). */
/* AUTO's row kernel at one token, by format (measured on the H200, docs/PERF.md, seventeenth
 * session): bf16 on (batch-1 BF16 decode 287.9 -> 367.4 tok/s against gemv_kernel<1, 4>); fp8
 * off (FP8 decode 346.2 -> 336.2 tok/s against the stream kernel: the e4m3 widening on the CUDA
 * cores costs more than the tensor-core form's). -D...=0/1 builds the other (an A/B build). */
#ifndef GEMV_BF16_ROWS_AUTO
#define GEMV_BF16_ROWS_AUTO 1
#endif
#ifndef GEMV_FP8_ROWS_AUTO
#define GEMV_FP8_ROWS_AUTO 0
#endif
enum gemv_path {
    GEMV_PATH_AUTO = 0,
    GEMV_PATH_CORES,
    GEMV_PATH_TENSOR,
    GEMV_PATH_STREAM,
    GEMV_PATH_ROWS
};
int gemv_cuda_path(float *y, const struct kweight *w, int expert, const float *x, int n_tok,
                   int path, cudaStream_t stream);
/* Weights of at most GEMV_WIDE_MAX_ROWS rows at 1..GEMV_WIDE_MAX_TOK tokens take a kernel with
 * one block per output row (through gemv_cuda's CUDA-core path, and gemv_multi_cuda). */
#define GEMV_WIDE_MAX_ROWS 512
#define GEMV_WIDE_MAX_TOK 8
/* gemv_multi_cuda: y_i = x W_i^T for up to GEMV_MULTI_MAX weights of the same cols on the same
 * activations, one launch (projections that read the same normed rows). Each output as gemv_cuda's
 * (pitch w->rows): 2..3 nvfp4 weights (or 2..3 fp8 ones) that gemv_cuda would each run on the
 * stream kernel run on it in one launch (the same numerics, bit for bit), also when 1..2 bf16
 * weights of at most
 * GEMV_WIDE_MAX_ROWS rows follow them (GEMV_MULTI_STREAM_WIDE: those a warp per row in the same
 * launch, fp32 on the cores: gemv_cuda's numerics up to the order of the sums; the GDN layer's
 * qkv, z, b and a) -- except at one token, where bf16 and fp8 weights of which one has more
 * than GEMV_WIDE_MAX_ROWS rows take the row kernel (GEMV_MULTI_ROWS: what gemv_cuda runs for such
 * a weight, every output with gemv_cuda's CUDA-core numerics up to the order of the sums; the
 * BF16 and FP8 models' GDN qkv, z, b and a, attention q, k and v); otherwise weights of at most
 * GEMV_WIDE_MAX_ROWS rows at up to GEMV_WIDE_MAX_TOK tokens take the wide kernel (gemv_cuda's
 * CUDA-core numerics). ERR_INVAL for bad arguments (cols differ, x not 16-byte aligned),
 * ERR_UNSUPPORTED for anything else (the caller runs them one by one). */
#define GEMV_MULTI_MAX 4
struct gemv_out {
    const struct kweight *w;
    int expert;
    float *y;
};
int gemv_multi_cuda(const struct gemv_out *outs, int n, const float *x, int n_tok,
                    cudaStream_t stream);
/* The kernel gemv_multi_cuda launches for these weights at n_tok rows, from their descriptors
 * alone (no device access; the dispatch log names it): GEMV_MULTI_STREAM,
 * GEMV_MULTI_STREAM_WIDE, GEMV_MULTI_WIDE, GEMV_MULTI_ROWS, or GEMV_MULTI_NONE where
 * gemv_multi_cuda returns ERR_UNSUPPORTED (or ERR_INVAL). */
enum gemv_multi_kind {
    GEMV_MULTI_NONE = 0,
    GEMV_MULTI_STREAM,
    GEMV_MULTI_WIDE,
    GEMV_MULTI_STREAM_WIDE,
    GEMV_MULTI_ROWS
};
int gemv_multi_kind(const struct gemv_out *outs, int n, int n_tok);
int gemv_multi_ref(const struct gemv_out *outs, int n, const float *x, int n_tok);
/* Same contract on host pointers. */
int gemv_ref(float *y, const struct kweight *w, int expert, const float *x, int n_tok);

#ifdef __cplusplus
}
#endif

#endif
