/* attn_decode: gated full-attention decode (one query token per sequence) over the paged KV
 * cache (bf16 or fp8 e4m3 with per-tensor scales) written by kv_write (MODEL.md §3.4):
 *   s_j = scale * q_h . k_{h/g}[j] for j < seq_len;  a = softmax_j(s) (fp32);
 *   out_h = (sum_j a_j v_{h/g}[j]) * sigmoid(gate_h),  g = n_q_heads / n_kv_heads (GQA).
 * q must already carry its q-norm and RoPE. The context is split into chunks of
 * ATTN_DECODE_SPLIT keys (CUDA cores) or a range of 16-key tiles (tensor cores, one block for a
 * kv head's query heads) processed in parallel and merged (log-sum-exp) by a second launch. */
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
/* GQA form: blocks aimed at over all (kv head, sequence) pairs, about one an SM of an H200 */
#define ATTN_DECODE_GQA_WAVE 132
#define ATTN_DECODE_GQA_SAME_SEQS 4 /* up to this many sequences get one sequence's grid */
#define ATTN_DECODE_GQA_MIN_TILES 8 /* tiles a part at least (2 a warp) */

/* Two forms run attn_decode (ATTN_DECODE_PATH_*). CORES: grid (parts, q heads, sequences) of
 * 256 threads on CUDA cores, one per chunk of ATTN_DECODE_SPLIT keys of max_seq_len but no more
 * than ATTN_DECODE_WAVE_BLOCKS blocks over all heads (at least one per head; those blocks then
 * walk several chunks each): attn_decode_parts. GQA: tensor cores, grid (parts, kv heads,
 * sequences), each block serving all query heads of its kv head (at most 8) over a contiguous
 * range of 16-key tiles: about one block an SM over all (kv head, sequence) pairs, the grid of
 * one sequence for up to ATTN_DECODE_GQA_SAME_SEQS (attn_decode_gqa_parts); a sequence of n
 * tiles is cut into ranges of max(ATTN_DECODE_GQA_MIN_TILES, ceil(n / parts)) tiles, so a
 * row's partition depends on its length and the grid only (a verify window's rows, up to that
 * many, sum as the plain steps' rows do). AUTO takes GQA where
 * attn_decode_gqa_ok (n_q_heads / n_kv_heads <= 8, head_dim 32, 64, 128 or 256, and the device's
 * shared memory holds a block of at least 2 warps), else CORES. */
enum attn_decode_path {
    ATTN_DECODE_PATH_AUTO = 0,
    ATTN_DECODE_PATH_CORES = 1,
    ATTN_DECODE_PATH_GQA = 2,
};
#define ATTN_DECODE_WAVE_BLOCKS (4 * 132) /* 4 blocks per SM of an H200 */
int attn_decode_parts(int n_seq, int n_q_heads, int max_seq_len);
int attn_decode_gqa_parts(int n_seq, int n_kv_heads);
/* Whether the GQA form runs these shapes of kv_dtype on the current device (1) or not (0). */
int attn_decode_gqa_ok(int n_q_heads, int n_kv_heads, int head_dim, int kv_dtype);
/* The path AUTO takes for these shapes on the current device (CORES or GQA). */
int attn_decode_path_auto(int n_q_heads, int n_kv_heads, int head_dim, int kv_dtype);
/* Floats of workspace attn_decode_cuda needs for these sizes, either form: one partial
 * (head_dim + 2 floats) per (sequence, query head, part). Not monotonic in n_seq below the wave
 * (fewer sequences get more parts each). */
size_t attn_decode_ws_floats(int n_seq, int n_q_heads, int n_kv_heads, int head_dim,
                             int max_seq_len);

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
/* attn_decode_dtype_cuda on a given path (enum attn_decode_path): GQA where attn_decode_gqa_ok
 * does not hold is ERR_UNSUPPORTED. The GQA form rounds q and the softmax weights to bf16 (bf16
 * K/V) or fp16 (e4m3 K/V) for the tensor cores; CORES computes in fp32. new_keys (>= 1): how
 * many keys at the end of each sequence the kernels right before may have written (this pass's
 * own rows: at most its row count); the GQA form reads the older keys before its PDL wait
 * (GQA_PRE_WAIT; max_seq_len: none). */
int attn_decode_path_cuda(int path, float *out, float *ws, int new_keys, const float *q,
                          const float *gate, const void *k_cache, const void *v_cache, int kv_dtype,
                          float k_scale, float v_scale, const int32_t *block_table,
                          const int32_t *seq_lens, int n_seq, int n_q_heads, int n_kv_heads,
                          int head_dim, int block_size, int max_blocks_per_seq, int max_seq_len,
                          float scale, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
