/* attn_decode reference: full softmax in double per head. */
#include "attn_decode.h"

#include <math.h>
#include <stdlib.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "kdtype.h"
#include "kv_write.h"

int attn_decode_parts(int n_seq, int n_q_heads, int max_seq_len)
{
    const int64_t heads = (int64_t)n_seq * n_q_heads;
    const int64_t cap =
        heads >= ATTN_DECODE_WAVE_BLOCKS ? 1 : CEIL_DIV(ATTN_DECODE_WAVE_BLOCKS, heads);
    const int64_t splits =
        CEIL_DIV((int64_t)(max_seq_len > 0 ? max_seq_len : 1), ATTN_DECODE_SPLIT);
    return (int)(splits < cap ? splits : cap);
}

int attn_decode_gqa_parts(int n_seq, int n_kv_heads)
{
    const int64_t seqs = n_seq > ATTN_DECODE_GQA_SAME_SEQS ? n_seq : 1;
    const int64_t pairs = seqs * (n_kv_heads > 0 ? n_kv_heads : 1);
    return (int)CEIL_DIV(ATTN_DECODE_GQA_WAVE, pairs);
}

size_t attn_decode_ws_floats(int n_seq, int n_q_heads, int n_kv_heads, int head_dim,
                             int max_seq_len)
{
    const size_t a = (size_t)attn_decode_parts(n_seq, n_q_heads, max_seq_len);
    const size_t b = (size_t)attn_decode_gqa_parts(n_seq, n_kv_heads);
    return (size_t)n_seq * n_q_heads * (a > b ? a : b) * ((size_t)head_dim + 2);
}

/* Cached element idx as fp32: bf16, or e4m3 times the per-tensor scale. */
static double kv_elem(const void *cache, int kv_dtype, long idx, float scale)
{
    if (kv_dtype == KV_DTYPE_BF16)
        return kdtype_bf16_to_f32(((const uint16_t *)cache)[idx]);
    return (double)kdtype_e4m3_to_f32(((const uint8_t *)cache)[idx]) * scale;
}

int attn_decode_dtype_ref(float *out, float *ws, const float *q, const float *gate,
                          const void *k_cache, const void *v_cache, int kv_dtype, float k_scale,
                          float v_scale, const int32_t *block_table, const int32_t *seq_lens,
                          int n_seq, int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                          int max_blocks_per_seq, int max_seq_len, float scale)
{
    double *s, *o;
    (void)ws;
    if (n_seq < 0 || n_kv_heads <= 0 || n_q_heads % n_kv_heads || head_dim <= 0 ||
        block_size <= 0 || !kv_dtype_bytes(kv_dtype))
        return ERR_INVAL;
    s = xmalloc(sizeof(double) * (size_t)(max_seq_len > 0 ? max_seq_len : 1));
    o = xmalloc(sizeof(double) * (size_t)head_dim);
    const int grp = n_q_heads / n_kv_heads;
    for (int b = 0; b < n_seq; b++) {
        const int len = seq_lens[b];
        for (int h = 0; h < n_q_heads; h++) {
            const float *qh = q + ((long)b * n_q_heads + h) * head_dim;
            const int kvh = h / grp;
            double mx = -INFINITY, l = 0;
            for (int j = 0; j < len; j++) {
                long slot =
                    (long)block_table[(long)b * max_blocks_per_seq + j / block_size] * block_size +
                    j % block_size;
                const long k = (slot * n_kv_heads + kvh) * head_dim;
                double d = 0;
                for (int i = 0; i < head_dim; i++)
                    d += (double)qh[i] * kv_elem(k_cache, kv_dtype, k + i, k_scale);
                s[j] = d * scale;
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int i = 0; i < head_dim; i++)
                o[i] = 0;
            for (int j = 0; j < len; j++) {
                long slot =
                    (long)block_table[(long)b * max_blocks_per_seq + j / block_size] * block_size +
                    j % block_size;
                const long v = (slot * n_kv_heads + kvh) * head_dim;
                double p = exp(s[j] - mx);
                l += p;
                for (int i = 0; i < head_dim; i++)
                    o[i] += p * kv_elem(v_cache, kv_dtype, v + i, v_scale);
            }
            for (int i = 0; i < head_dim; i++) {
                long idx = ((long)b * n_q_heads + h) * head_dim + i;
                double r = len > 0 ? o[i] / l : 0.0;
                if (gate)
                    r *= 1.0 / (1.0 + exp(-(double)gate[idx]));
                out[idx] = (float)r;
            }
        }
    }
    free(s);
    free(o);
    return 0;
}

int attn_decode_ref(float *out, float *ws, const float *q, const float *gate,
                    const uint16_t *k_cache, const uint16_t *v_cache, const int32_t *block_table,
                    const int32_t *seq_lens, int n_seq, int n_q_heads, int n_kv_heads, int head_dim,
                    int block_size, int max_blocks_per_seq, int max_seq_len, float scale)
{
    return attn_decode_dtype_ref(out, ws, q, gate, k_cache, v_cache, KV_DTYPE_BF16, 1.0f, 1.0f,
                                 block_table, seq_lens, n_seq, n_q_heads, n_kv_heads, head_dim,
                                 block_size, max_blocks_per_seq, max_seq_len, scale);
}
