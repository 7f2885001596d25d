/* attn_decode: split-K decode attention. Launch 1, grid (splits, q heads, seqs), 128 threads:
 * each warp scores keys with one 16-byte K load per lane, the block does the chunk softmax and
 * accumulates P.V; the partial (o, max, sum) goes to the workspace. Launch 2 merges the splits
 * and applies the sigmoid gate. */
#include "attn_decode.h"

#include <math.h>

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "kv_write.h"

#define SPLIT ATTN_DECODE_SPLIT
#define MAXD ATTN_DECODE_MAX_HEAD_DIM
#define THREADS 256

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

static __device__ __forceinline__ float load1(const uint16_t *p)
{
    return bf16_bits_to_f32(__ldg(p));
}

static __device__ __forceinline__ float load1(const uint8_t *p)
{
    return e4m3_to_f32(__ldg(p));
}

/* T: uint16_t (bf16) or uint8_t (e4m3) cache elements. scale includes k_scale; the partial
 * output is multiplied by v_scale. */
template <typename T>
__global__ void __launch_bounds__(THREADS)
    attn_split_kernel(float *ws, const float *q, const T *k_cache, const T *v_cache,
                      const int32_t *block_table, const int32_t *seq_lens, int n_q_heads,
                      int n_kv_heads, int head_dim, int block_size, int max_blocks_per_seq,
                      int n_splits, float scale, float v_scale)
{
    __shared__ float qs[MAXD];
    __shared__ float p[SPLIT];
    __shared__ int64_t slot[SPLIT]; /* cache slot of each key of the split */
    __shared__ float scratch[32];
    const int sp = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int len = seq_lens[b];
    const int j0 = sp * SPLIT, j1 = min(len, j0 + SPLIT);
    const int kvh = h / (n_q_heads / n_kv_heads);
    const int32_t *bt = block_table + (int64_t)b * max_blocks_per_seq;
    float *w = ws + (((int64_t)b * n_q_heads + h) * n_splits + sp) * (head_dim + 2);
    if (j0 >= j1)
        return; /* past this sequence's keys: the merge reads only its ceil(len / SPLIT) splits */
    const float *qh = q + ((int64_t)b * n_q_heads + h) * head_dim;
    for (int i = threadIdx.x; i < head_dim; i += THREADS)
        qs[i] = qh[i] * scale;
    for (int j = j0 + threadIdx.x; j < j1; j += THREADS)
        slot[j - j0] = (kv_slot(bt, j, block_size) * n_kv_heads + kvh) * head_dim;
    __syncthreads();

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool has = lane * 8 < head_dim;
    float qr[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        qr[i] = has ? qs[lane * 8 + i] : 0.0f;
    /* each warp scores KU keys per iteration: KU independent 16-byte loads in flight per lane */
    constexpr int KU = 4;
    for (int jb = j0 + warp * KU; jb < j1; jb += (THREADS / 32) * KU) {
        float d[KU];
#pragma unroll
        for (int u = 0; u < KU; u++) {
            d[u] = 0.0f;
            const int j = jb + u;
            if (has && j < j1) {
                float kf[8];
                load8(kf, k_cache + slot[j - j0] + lane * 8);
#pragma unroll
                for (int i = 0; i < 8; i += 2)
                    d[u] += kf[i] * qr[i] + kf[i + 1] * qr[i + 1];
            }
        }
#pragma unroll
        for (int u = 0; u < KU; u++) {
            const float v = warp_sum(d[u]);
            if (lane == 0 && jb + u < j1)
                p[jb + u - j0] = v;
        }
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < j1 - j0; j += THREADS)
        mx = fmaxf(mx, p[j]);
    mx = block_max(mx, scratch);
    float l = 0.0f;
    for (int j = threadIdx.x; j < j1 - j0; j += THREADS) {
        float e = __expf(p[j] - mx);
        p[j] = e;
        l += e;
    }
    l = block_sum(l, scratch); /* its barriers also publish p[] */
    /* P.V: thread i owns dimension i (head_dim <= THREADS) */
    for (int i = threadIdx.x; i < head_dim; i += THREADS) {
        float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        const int n = j1 - j0;
        int j = 0;
        for (; j + 8 <= n; j += 8) {
#pragma unroll
            for (int u = 0; u < 8; u++)
                acc[u] += p[j + u] * load1(v_cache + slot[j + u] + i);
        }
        for (; j < n; j++)
            acc[0] += p[j] * load1(v_cache + slot[j] + i);
        w[i] = (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) *
               v_scale;
    }
    if (threadIdx.x == 0) {
        w[head_dim] = mx;
        w[head_dim + 1] = l;
    }
}

/* Merges the splits that hold keys of sequence b (a captured graph sizes the grid for the longest
 * context; the rest of the splits returned at once and wrote nothing). */
__global__ void attn_merge_kernel(float *out, const float *ws, const float *gate,
                                  const int32_t *seq_lens, int n_q_heads, int head_dim,
                                  int n_splits_grid)
{
    const int h = blockIdx.x, b = blockIdx.y;
    const float *w = ws + ((int64_t)b * n_q_heads + h) * n_splits_grid * (head_dim + 2);
    const int n_splits = min(n_splits_grid, (max(seq_lens[b], 0) + SPLIT - 1) / SPLIT);
    float M = -INFINITY;
    for (int s = 0; s < n_splits; s++)
        M = fmaxf(M, w[s * (head_dim + 2) + head_dim]);
    float L = 0.0f;
    for (int s = 0; s < n_splits; s++) {
        const float *ws_ = w + s * (head_dim + 2);
        if (ws_[head_dim + 1] > 0.0f)
            L += ws_[head_dim + 1] * __expf(ws_[head_dim] - M);
    }
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < n_splits; s++) {
            const float *ws_ = w + s * (head_dim + 2);
            if (ws_[head_dim + 1] > 0.0f)
                o += ws_[i] * __expf(ws_[head_dim] - M);
        }
        o = L > 0.0f ? o / L : 0.0f;
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
        ((uintptr_t)k_cache) % 16)
        return ERR_INVAL;
    if (n_seq == 0)
        return 0;
    const int n_splits = CEIL_DIV(max_seq_len, SPLIT);
    dim3 g1(n_splits, n_q_heads, n_seq);
    if (kv_dtype == KV_DTYPE_BF16)
        attn_split_kernel<uint16_t><<<g1, THREADS, 0, stream>>>(
            ws, q, (const uint16_t *)k_cache, (const uint16_t *)v_cache, block_table, seq_lens,
            n_q_heads, n_kv_heads, head_dim, block_size, max_blocks_per_seq, n_splits, scale, 1.0f);
    else
        attn_split_kernel<uint8_t><<<g1, THREADS, 0, stream>>>(
            ws, q, (const uint8_t *)k_cache, (const uint8_t *)v_cache, block_table, seq_lens,
            n_q_heads, n_kv_heads, head_dim, block_size, max_blocks_per_seq, n_splits,
            scale * k_scale, v_scale);
    dim3 g2(n_q_heads, n_seq);
    attn_merge_kernel<<<g2, 128, 0, stream>>>(out, ws, gate, seq_lens, n_q_heads, head_dim,
                                              n_splits);
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
