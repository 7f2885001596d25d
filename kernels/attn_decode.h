/* attn_decode: gated full-attention decode (one query token per sequence) over the paged KV
 * cache (bf16 or fp8 e4m3 with per-tensor scales) written by kv_write (MODEL.md §3.4):
 *   s_j = scale * q_h . k_{h/g}[j] for j < seq_len;  a = softmax_j(s) (fp32);
 *   out_h = (sum_j a_j v_{h/g}[j]) * sigmoid(gate_h),  g = n_q_heads / n_kv_heads (GQA).
 * q must already carry its q-norm and RoPE. The context is split into chunks of
 * ATTN_DECODE_SPLIT keys processed in parallel and merged (log-sum-exp) by a second launch. */
#ifndef KERNELS_ATTN_DECODE_H
#define KERNELS_ATTN_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_DECODE_SPLIT 64
#define ATTN_DECODE_MAX_HEAD_DIM 256

/* The split kernel's blocks per (sequence, head): one per chunk of ATTN_DECODE_SPLIT keys of
 * max_seq_len, but no more than ATTN_DECODE_WAVE_BLOCKS blocks over all heads (at least one per
 * head; those blocks then walk several chunks each). */
#define ATTN_DECODE_WAVE_BLOCKS (4 * 132) /* 4 blocks per SM of an H200 */
int attn_decode_parts(int n_seq, int n_q_heads, int max_seq_len);
/* Floats of workspace attn_decode_cuda needs for these sizes: one partial (head_dim + 2 floats)
 * per (sequence, head, part). Not monotonic in n_seq below the wave (fewer sequences get more
 * parts each); at most ATTN_DECODE_WAVE_BLOCKS + n_seq * n_q_heads partials. */
size_t attn_decode_ws_floats(int n_seq, int n_q_heads, int head_dim, int max_seq_len);

/* out: (n_seq, n_q_heads*head_dim); q: (n_seq, n_q_heads, head_dim); gate: (n_seq,
 * n_q_heads*head_dim) (pre-sigmoid), or NULL for no gate; k_cache, v_cache: (n_slots,
 * n_kv_heads, head_dim) bf16 with slot = block_table[s][j / block_size]*block_size +
 * j % block_size; block_table: (n_seq, max_blocks_per_seq); seq_lens: (n_seq,) keys to attend
 * (incl. the current token, already written), each <= max_seq_len; ws: attn_decode_ws_floats()
 * floats. Device pointers. head_dim % 8 == 0 and <= 256. Returns 0, ERR_INVAL, ERR_CUDA. */
int attn_decode_cuda(float *out, float *ws, const float *q, const float *gate,
                     const uint16_t *k_cache, const uint16_t *v_cache, const int32_t *block_table,
                     const int32_t *seq_lens, int n_seq, int n_q_heads, int n_kv_heads,
                     int head_dim, int block_size, int max_blocks_per_seq, int max_seq_len,
                     float scale, cudaStream_t stream);
/* Same contract on host pointers (ws unused, may be NULL). */
int attn_decode_ref(float *out, float *ws, const float *q, const float *gate,
                    const uint16_t *k_cache, const uint16_t *v_cache, const int32_t *block_table,
                    const int32_t *seq_lens, int n_seq, int n_q_heads, int n_kv_heads, int head_dim,
                    int block_size, int max_blocks_per_seq, int max_seq_len, float scale);

/* Same contract for a cache of kv_dtype (enum kv_dtype, common/kv_plan.h): element j of a cached key
 * is read as k_scale * e4m3(byte) for KV_DTYPE_FP8 (k_scale, v_scale ignored for bf16, pass
 * 1.0f). k_cache and v_cache must be 16-byte aligned. */
int attn_decode_dtype_cuda(float *out, float *ws, const float *q, const float *gate,
                           const void *k_cache, const void *v_cache, int kv_dtype, float k_scale,
                           float v_scale, const int32_t *block_table, const int32_t *seq_lens,
                           int n_seq, int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                           int max_blocks_per_seq, int max_seq_len, float scale,
                           cudaStream_t stream);
int attn_decode_dtype_ref(float *out, float *ws, const float *q, const float *gate,
                          const void *k_cache, const void *v_cache, int kv_dtype, float k_scale,
                          float v_scale, const int32_t *block_table, const int32_t *seq_lens,
                          int n_seq, int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                          int max_blocks_per_seq, int max_seq_len, float scale);

#ifdef __cplusplus
}
#endif

#endif
