/* attn_decode: split-K decode attention. Launch 1, grid (parts, q heads, seqs), 256 threads:
 * block sp walks the chunks sp, sp + parts, ... of SPLIT keys of its sequence; the keys are
 * spread over the warps, a lane owning 8 dims of a key (one 16-byte bf16 / 8-byte fp8 load of K
 * and of V, KU keys in flight), each warp with its own running max / sum (online softmax); the
 * warps merge through shared memory into the block's one partial (o, max, sum) in the workspace.
 * Launch 2 merges the parts and applies the sigmoid gate. */
#include "attn_decode.h"

#include <math.h>

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/pdl.cuh"
#include "kv_write.h"

#define SPLIT ATTN_DECODE_SPLIT
#define MAXD ATTN_DECODE_MAX_HEAD_DIM
#define THREADS 256
#define WARPS (THREADS / KCUDA_WARP)
#define KU 8 /* keys a lane takes per round: their 2 * KU K and V loads are in flight together */

static __device__ __forceinline__ int64_t kv_slot(const int32_t *bt, int j, int block_size)
{
    return (int64_t)bt[j / block_size] * block_size + j % block_size;
}

/* 8 consecutive cache elements (16 bytes of bf16 or 8 bytes of fp8) as fp32 */
static __device__ __forceinline__ void load8(float *r, const uint16_t *p)
{
    const uint4 kk = __ldg(reinterpret_cast<const uint4 *>(p));
    const uint32_t uu[4] = {kk.x, kk.y, kk.z, kk.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        r[2 * i] = __uint_as_float(uu[i] << 16);
        r[2 * i + 1] = __uint_as_float(uu[i] & 0xffff0000u);
    }
}

static __device__ __forceinline__ void load8(float *r, const uint8_t *p)
{
    const uint2 kk = __ldg(reinterpret_cast<const uint2 *>(p));
    const uint32_t uu[2] = {kk.x, kk.y};
#pragma unroll
    for (int i = 0; i < 8; i++)
        r[i] = e4m3_to_f32((uint8_t)(uu[i / 4] >> (8 * (i % 4))));
}

/* T: uint16_t (bf16) or uint8_t (e4m3) cache elements. scale includes k_scale; the partial
 * output is multiplied by v_scale. n_parts = gridDim.x (the workspace's partials per head). */
template <typename T>
__global__ void __launch_bounds__(THREADS)
    attn_split_kernel(float *ws, const float *q, const T *k_cache, const T *v_cache,
                      const int32_t *block_table, const int32_t *seq_lens, int n_q_heads,
                      int n_kv_heads, int head_dim, int block_size, int max_blocks_per_seq,
                      int n_parts, float scale, float v_scale)
{
    kcuda_pdl_enter();
    __shared__ int64_t slot[SPLIT]; /* cache offset of each key of the chunk */
    __shared__ float red[WARPS][MAXD];
    __shared__ float wm[WARPS], wl[WARPS]; /* each warp's max and sum */
    const int sp = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int len = max(seq_lens[b], 0), n_chunks = CEIL_DIV(len, SPLIT);
    if (sp >= n_chunks)
        return; /* the merge reads only min(n_parts, n_chunks) partials */
    const int kvh = h / (n_q_heads / n_kv_heads);
    const int32_t *bt = block_table + (int64_t)b * max_blocks_per_seq;
    /* lpk lanes (a power of two) cover the head_dim / 8 8-dim groups of a key; a warp takes kpw
     * keys at once (several for a small head_dim) */
    int lpk = 1;
    while (lpk * 8 < head_dim)
        lpk *= 2;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kpw = KCUDA_WARP / lpk, kg = lane / lpk, d0 = (lane % lpk) * 8;
    const int step = WARPS * KU * kpw; /* keys the block takes per round */
    const bool has = d0 < head_dim;
    const int dl = has ? d0 : 0; /* a lane past head_dim loads dims 0..7 and adds 0 * k */
    const float *qh = q + ((int64_t)b * n_q_heads + h) * head_dim;
    float qr[8], acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        qr[i] = has ? qh[d0 + i] * scale : 0.0f;
        acc[i] = 0.0f;
    }
    /* each warp runs its own online softmax over its keys: no block barrier per round */
    float m = -INFINITY, l = 0.0f; /* the warp's max, this key group's sum */
    for (int c = sp; c < n_chunks; c += n_parts) {
        const int j0 = c * SPLIT, n = min(len - j0, SPLIT);
        __syncthreads(); /* every warp is done with the previous chunk's slot[] */
        for (int j = threadIdx.x; j < n; j += THREADS)
            slot[j] = (kv_slot(bt, j0 + j, block_size) * n_kv_heads + kvh) * head_dim;
        __syncthreads();
        for (int jb = warp * KU * kpw; jb < n; jb += step) {
            /* K and V of KU keys in flight, no branch around the loads: past the chunk a lane
             * loads key n - 1 and gives it weight 0 */
            float d[KU], vf[KU][8], mx = -INFINITY;
#pragma unroll
            for (int u = 0; u < KU; u++) {
                const int64_t at = slot[min(jb + u * kpw + kg, n - 1)] + dl;
                float kf[8];
                load8(kf, k_cache + at);
                load8(vf[u], v_cache + at);
                d[u] = 0.0f;
#pragma unroll
                for (int i = 0; i < 8; i += 2)
                    d[u] += kf[i] * qr[i] + kf[i + 1] * qr[i + 1];
            }
#pragma unroll
            for (int u = 0; u < KU; u++) {
#pragma unroll
                for (int o = KCUDA_WARP >> 1; o > 0; o >>= 1) {
                    const float t = __shfl_xor_sync(0xffffffffu, d[u], o);
                    d[u] += o < lpk ? t : 0.0f;
                }
                if (jb + u * kpw + kg >= n)
                    d[u] = -INFINITY;
                mx = fmaxf(mx, d[u]);
            }
            for (int o = KCUDA_WARP >> 1; o >= lpk; o >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float m_new = fmaxf(m, mx), alpha = __expf(m - m_new);
            m = m_new;
            l *= alpha;
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[i] *= alpha;
#pragma unroll
            for (int u = 0; u < KU; u++) {
                const float e = __expf(d[u] - m);
                l += e;
#pragma unroll
                for (int i = 0; i < 8; i++)
                    acc[i] += e * vf[u][i];
            }
        }
    }
    /* sum the key groups of each warp, then merge the warps */
    for (int o = KCUDA_WARP >> 1; o >= lpk; o >>= 1) {
        l += __shfl_xor_sync(0xffffffffu, l, o);
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
    }
    if (kg == 0 && has) {
#pragma unroll
        for (int i = 0; i < 8; i++)
            red[warp][d0 + i] = acc[i];
    }
    if (lane == 0) {
        wm[warp] = m; /* -inf, with l and acc 0, for a warp that got no key */
        wl[warp] = l;
    }
    __syncthreads();
    float M = -INFINITY, L = 0.0f;
#pragma unroll
    for (int k = 0; k < WARPS; k++)
        M = fmaxf(M, wm[k]);
    float *w = ws + (((int64_t)b * n_q_heads + h) * n_parts + sp) * (head_dim + 2);
    for (int i = threadIdx.x; i < head_dim; i += THREADS) {
        float o = 0.0f;
#pragma unroll
        for (int k = 0; k < WARPS; k++)
            o += red[k][i] * __expf(wm[k] - M);
        w[i] = o * v_scale;
    }
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < WARPS; k++)
            L += wl[k] * __expf(wm[k] - M);
        w[head_dim] = M;
        w[head_dim + 1] = L;
    }
}

/* Merges the min(n_parts, ceil(len / SPLIT)) partials of sequence b (the blocks past its chunks
 * returned at once and wrote nothing). THREADS threads. Warp 0 turns each partial's max into its
 * factor exp(m_s - M) / L in shared memory; then warp w sums the partials w, w + WARPS, .. (a
 * lane 8 dims, as 8-byte loads: a partial's row is head_dim + 2 floats), all of a warp's loads
 * issued together, and the warps' sums meet in shared memory: a 2,048-token context's 32
 * partials a head cost one round of loads, not one per partial. */
#define MERGE_MAX_PARTS ATTN_DECODE_WAVE_BLOCKS
__global__ void __launch_bounds__(THREADS)
    attn_merge_kernel(float *out, const float *ws, const float *gate, const int32_t *seq_lens,
                      int n_q_heads, int head_dim, int n_parts)
{
    kcuda_pdl_enter();
    __shared__ float fac[MERGE_MAX_PARTS];
    __shared__ float part[WARPS][MAXD];
    const int h = blockIdx.x, b = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int ld = head_dim + 2;
    const float *w = ws + ((int64_t)b * n_q_heads + h) * n_parts * ld;
    const int n = min(n_parts, CEIL_DIV(max(seq_lens[b], 0), SPLIT));
    if (warp == 0) {
        float M = -INFINITY;
        for (int s = lane; s < n; s += KCUDA_WARP)
            M = fmaxf(M, w[s * ld + head_dim]);
        M = warp_max(M);
        float L = 0.0f;
        for (int s = lane; s < n; s += KCUDA_WARP) {
            const float e = __expf(w[s * ld + head_dim] - M);
            fac[s] = e;
            L += w[s * ld + head_dim + 1] * e;
        }
        L = warp_sum(L);
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
        for (int s = lane; s < n; s += KCUDA_WARP)
            fac[s] *= inv;
    }
    __syncthreads();
    for (int d0 = lane * 8; d0 < head_dim; d0 += KCUDA_WARP * 8) {
        float o[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            o[i] = 0.0f;
#pragma unroll 4
        for (int s = warp; s < n; s += WARPS) {
            const float2 *p = reinterpret_cast<const float2 *>(w + s * ld + d0);
            const float f = fac[s];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float2 v = p[i];
                o[2 * i] += v.x * f;
                o[2 * i + 1] += v.y * f;
            }
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
            part[warp][d0 + i] = o[i];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < head_dim; i += THREADS) {
        float o = 0.0f;
#pragma unroll
        for (int k = 0; k < WARPS; k++)
            o += part[k][i];
        const int64_t idx = ((int64_t)b * n_q_heads + h) * head_dim + i;
        if (gate)
            o *= sigmoid_f32(gate[idx]);
        out[idx] = o;
    }
}

int attn_decode_dtype_cuda(float *out, float *ws, const float *q, const float *gate,
                           const void *k_cache, const void *v_cache, int kv_dtype, float k_scale,
                           float v_scale, const int32_t *block_table, const int32_t *seq_lens,
                           int n_seq, int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                           int max_blocks_per_seq, int max_seq_len, float scale,
                           cudaStream_t stream)
{
    if (kv_dtype == KV_DTYPE_BF16)
        k_scale = v_scale = 1.0f;
    if (!kv_dtype_bytes(kv_dtype) || !(k_scale > 0.0f) || !(v_scale > 0.0f) || isinf(k_scale) ||
        isinf(v_scale))
        return ERR_INVAL;
    if (!out || !ws || !q || !k_cache || !v_cache || !block_table || !seq_lens || n_seq < 0 ||
        n_kv_heads <= 0 || n_q_heads <= 0 || n_q_heads % n_kv_heads || head_dim <= 0 ||
        head_dim % 8 || head_dim > MAXD || block_size <= 0 || max_seq_len <= 0 ||
        max_blocks_per_seq * block_size < max_seq_len || n_seq > 65535 || n_q_heads > 65535 ||
        ((uintptr_t)k_cache) % 16 || ((uintptr_t)v_cache) % 16)
        return ERR_INVAL;
    if (n_seq == 0)
        return 0;
    /* the grid grows with max_seq_len (a captured graph's is max_model_len) up to the wave,
     * then its blocks walk more chunks each */
    const int n_parts = attn_decode_parts(n_seq, n_q_heads, max_seq_len);
    dim3 g1(n_parts, n_q_heads, n_seq);
    if (kv_dtype == KV_DTYPE_BF16)
        kcuda_launch_pdl(attn_split_kernel<uint16_t>, g1, THREADS, 0, stream, ws, q,
                         (const uint16_t *)k_cache, (const uint16_t *)v_cache, block_table,
                         seq_lens, n_q_heads, n_kv_heads, head_dim, block_size,
                         max_blocks_per_seq, n_parts, scale, 1.0f);
    else
        kcuda_launch_pdl(attn_split_kernel<uint8_t>, g1, THREADS, 0, stream, ws, q,
                         (const uint8_t *)k_cache, (const uint8_t *)v_cache, block_table,
                         seq_lens, n_q_heads, n_kv_heads, head_dim, block_size,
                         max_blocks_per_seq, n_parts, scale * k_scale, v_scale);
    dim3 g2(n_q_heads, n_seq);
    kcuda_launch_pdl(attn_merge_kernel, g2, THREADS, 0, stream, out, ws, gate, seq_lens, n_q_heads,
                     head_dim, n_parts);
    return kcuda_launch_status("attn_decode");
}

int attn_decode_cuda(float *out, float *ws, const float *q, const float *gate,
                     const uint16_t *k_cache, const uint16_t *v_cache, const int32_t *block_table,
                     const int32_t *seq_lens, int n_seq, int n_q_heads, int n_kv_heads,
                     int head_dim, int block_size, int max_blocks_per_seq, int max_seq_len,
                     float scale, cudaStream_t stream)
{
    return attn_decode_dtype_cuda(out, ws, q, gate, k_cache, v_cache, KV_DTYPE_BF16, 1.0f, 1.0f,
                                  block_table, seq_lens, n_seq, n_q_heads, n_kv_heads, head_dim,
                                  block_size, max_blocks_per_seq, max_seq_len, scale, stream);
}
