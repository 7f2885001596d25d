/* attn_prefill: causal gated full attention for chunks of query rows (prefill / chunked prefill)
 * over the paged KV cache (bf16 or fp8 e4m3, see kv_write.h), MODEL.md §3.4. For query row t of a
 * sequence chunk starting at position pos0 (t = 0..n_rows-1), query head h, kv head h/g
 * (g = n_q_heads / n_kv_heads):
 *   s_j = scale * q_{t,h} . k_{h/g}[j] for j <= pos0 + t;  a = softmax_j(s) (fp32);
 *   out_{t,h} = (sum_j a_j v_{h/g}[j]) * sigmoid(gate_{t,h})   (no sigmoid factor if gate NULL).
 * The chunk's own K/V must already be in the cache (kv_write), so keys 0..pos0+n_rows-1 exist.
 * q must carry q-norm and RoPE. Layouts as attn_decode: q (rows, n_q_heads, head_dim) fp32,
 * gate/out (rows, n_q_heads*head_dim) fp32 (gate pre-sigmoid).
 * GPU: flash-style, one block per (query (row, head) pairs of one kv head group, kv head,
 * sequence); keys in tiles of 32 through shared memory with an online softmax. Two paths:
 * CORES: fp32 CUDA-core math (exact inputs, fp32 accumulation), 32 rows per block;
 * MMA: mma.sync m16n8k16 bf16 tensor cores, 64 rows per block: q and the softmax probabilities
 * are rounded to bf16 before their products (K/V are bf16 or e4m3 already, exact in bf16),
 * fp32 accumulation; needs head_dim % 16 == 0 and 8-byte aligned q and out.
 * FLASH: the MMA path's arithmetic (the same roundings, the softmax in the log2 domain) with
 * 128 rows per block, keys in tiles of 64 copied by cp.async into a double buffer while the tile
 * before is multiplied, fragments by ldmatrix: head_dim 64 / 128 / 256, 16-byte aligned q,
 * 8-byte aligned out (attn_prefill_flash_ok). e4m3 caches: each tile's bytes staged by cp.async
 * and widened to fp16 (exact) in shared memory, q and P rounded to fp16, one K/V buffer.
 * WGMMA: the FLASH kernel with its products on Hopper's warpgroup MMA (wgmma, sm_90a): each
 * warpgroup of 4 warps owns 64 of the 128 rows, S = Q K^T and O += P V read Q, K and V straight
 * from shared memory (128-byte swizzled atoms) once per 64 rows instead of once per warp's 16;
 * the same roundings and softmax as FLASH (attn_prefill_wgmma_ok).
 * PATH_AUTO (the plain entry points) picks AUTO_PATH in attn_prefill.cu (CORES until MMA has
 * passed its GPU tests). */
#ifndef KERNELS_ATTN_PREFILL_H
#define KERNELS_ATTN_PREFILL_H

#include <stddef.h>
#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_PREFILL_MAX_HEAD_DIM 256

enum attn_prefill_path {
    ATTN_PREFILL_PATH_AUTO = 0,
    ATTN_PREFILL_PATH_CORES = 1,
    ATTN_PREFILL_PATH_MMA = 2,
    ATTN_PREFILL_PATH_FLASH = 3,
    ATTN_PREFILL_PATH_WGMMA = 4
};

/* Whether the FLASH path runs here for this head dim and cache dtype (bf16 or e4m3 caches, head
 * dim 64, 128 or 256, its shared memory within the current device's per-block limit: 192 KiB
 * (bf16) or 160 KiB (e4m3) at 256, so not on sm_120's 99 KiB). Host function; 0 or 1. */
int attn_prefill_flash_ok(int head_dim, int kv_dtype);

/* Whether the WGMMA path runs here: FLASH's conditions plus 1 KiB of shared memory, a build with
 * sm_90a device code (TERN_SM90A, cmake/TernCuda.cmake) and a device of compute capability 9.0.
 * Host function; 0 or 1. */
int attn_prefill_wgmma_ok(int head_dim, int kv_dtype);

/* One sequence's chunk in a batched prefill step. */
struct attn_prefill_seq {
    int32_t seq;       /* row of block_table */
    int32_t row_start; /* first row of q / gate / out */
    int32_t n_rows;    /* query rows (tokens) of the chunk, >= 0 */
    int32_t pos0;      /* position of the chunk's first row, >= 0 */
};

/* One sequence. block_table: this sequence's block ids (device, >= ceil((pos0+n_rows)/block_size)
 * entries); q/gate/out start at the chunk's first row. kv_dtype: enum kv_dtype; k_scale, v_scale:
 * the fp8 per-tensor scales (ignored for bf16). head_dim % 8 == 0, <= 256; caches 16-byte
 * aligned. Device pointers. Returns 0, ERR_INVAL, ERR_CUDA. */
int attn_prefill_cuda(float *out, const float *q, const float *gate, const void *k_cache,
                      const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                      const int32_t *block_table, int n_rows, int pos0, int n_q_heads,
                      int n_kv_heads, int head_dim, int block_size, float scale,
                      cudaStream_t stream);
int attn_prefill_ref(float *out, const float *q, const float *gate, const void *k_cache,
                     const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                     const int32_t *block_table, int n_rows, int pos0, int n_q_heads,
                     int n_kv_heads, int head_dim, int block_size, float scale);

/* Several sequences in one launch. block_table: (n_seq_total, max_blocks_per_seq); seqs: n_seqs
 * descriptors (device memory for the _cuda form, host for _ref); max_rows >= every n_rows (sizes
 * the grid; rows of q/gate/out are row_start + t). The descriptors' row ranges must not overlap.
 * n_seqs <= 65535. */
int attn_prefill_batch_cuda(float *out, const float *q, const float *gate, const void *k_cache,
                            const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                            const int32_t *block_table, int max_blocks_per_seq,
                            const struct attn_prefill_seq *seqs, int n_seqs, int max_rows,
                            int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                            float scale, cudaStream_t stream);
/* The same with an explicit enum attn_prefill_path (tests, benchmarks). */
int attn_prefill_path_cuda(float *out, const float *q, const float *gate, const void *k_cache,
                           const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                           const int32_t *block_table, int n_rows, int pos0, int n_q_heads,
                           int n_kv_heads, int head_dim, int block_size, float scale, int path,
                           cudaStream_t stream);
int attn_prefill_batch_path_cuda(float *out, const float *q, const float *gate,
                                 const void *k_cache, const void *v_cache, int kv_dtype,
                                 float k_scale, float v_scale, const int32_t *block_table,
                                 int max_blocks_per_seq, const struct attn_prefill_seq *seqs,
                                 int n_seqs, int max_rows, int n_q_heads, int n_kv_heads,
                                 int head_dim, int block_size, float scale, int path,
                                 cudaStream_t stream);
int attn_prefill_batch_ref(float *out, const float *q, const float *gate, const void *k_cache,
                           const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                           const int32_t *block_table, int max_blocks_per_seq,
                           const struct attn_prefill_seq *seqs, int n_seqs, int max_rows,
                           int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                           float scale);

/* Split over the keys, for items of few rows (decode, speculative verify windows): the FLASH
 * arithmetic with one warp per (16 flattened rows, kv head, part of the keys), so a GQA group's
 * K/V tile is read once, and enough parts for about two blocks an SM; a second launch merges
 * the parts (and applies the gate). bf16 caches, head_dim 64 / 128 / 256 (72 KiB of shared
 * memory at 256: sm_90 and sm_120). seqs, max_rows as attn_prefill_batch_cuda; n_parts from
 * attn_prefill_split_parts (1 .. 128; n_sms: the device's SM count, <= 0 = ask the current
 * device, a host call a caller on the step path does once); ws: attn_prefill_split_ws_floats(rows,
 * ...) floats where rows exceeds every descriptor's row_start + n_rows (device). The results do not
 * depend on n_parts beyond fp32 rounding. Returns 0, ERR_INVAL, ERR_CUDA. */
int attn_prefill_split_ok(int head_dim, int kv_dtype);
int attn_prefill_split_parts(int n_seqs, int max_rows, int n_q_heads, int n_kv_heads, int max_len,
                             int n_sms);
size_t attn_prefill_split_ws_floats(int rows, int n_q_heads, int head_dim, int n_parts);
int attn_prefill_split_cuda(float *out, float *ws, int n_parts, const float *q, const float *gate,
                            const void *k_cache, const void *v_cache, int kv_dtype,
                            const int32_t *block_table, int max_blocks_per_seq,
                            const struct attn_prefill_seq *seqs, int n_seqs, int max_rows,
                            int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                            float scale, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
