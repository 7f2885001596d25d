/* attn_prefill reference: each query row is a decode over its causal prefix (attn_decode's
 * reference: full softmax in double). */
#include "attn_prefill.h"

#include "attn_decode.h"
#include "common/err.h"
#include "kv_write.h"

int attn_prefill_batch_ref(float *out, const float *q, const float *gate, const void *k_cache,
                           const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                           const int32_t *block_table, int max_blocks_per_seq,
                           const struct attn_prefill_seq *seqs, int n_seqs, int max_rows,
                           int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                           float scale)
{
    if (n_seqs < 0 || n_q_heads <= 0 || n_kv_heads <= 0 || n_q_heads % n_kv_heads ||
        head_dim <= 0 || block_size <= 0 || !kv_dtype_bytes(kv_dtype) || max_blocks_per_seq < 0)
        return ERR_INVAL;
    const long w = (long)n_q_heads * head_dim;
    for (int s = 0; s < n_seqs; s++) {
        const struct attn_prefill_seq d = seqs[s];
        if (d.n_rows < 0 || d.n_rows > max_rows || d.pos0 < 0 || d.row_start < 0 || d.seq < 0)
            return ERR_INVAL;
        const int32_t *bt = block_table + (long)d.seq * max_blocks_per_seq;
        for (int t = 0; t < d.n_rows; t++) {
            const long row = (long)d.row_start + t;
            const int32_t len = d.pos0 + t + 1;
            int rc = attn_decode_dtype_ref(out + row * w, NULL, q + row * w,
                                           gate ? gate + row * w : NULL, k_cache, v_cache,
                                           kv_dtype, k_scale, v_scale, bt, &len, 1, n_q_heads,
                                           n_kv_heads, head_dim, block_size, 0, len, scale);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int attn_prefill_ref(float *out, const float *q, const float *gate, const void *k_cache,
                     const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                     const int32_t *block_table, int n_rows, int pos0, int n_q_heads,
                     int n_kv_heads, int head_dim, int block_size, float scale)
{
    const struct attn_prefill_seq d = {0, 0, n_rows, pos0};
    return attn_prefill_batch_ref(out, q, gate, k_cache, v_cache, kv_dtype, k_scale, v_scale,
                                  block_table, 0, &d, 1, n_rows, n_q_heads, n_kv_heads, head_dim,
                                  block_size, scale);
}
