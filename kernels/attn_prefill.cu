/* attn_prefill: flash-style causal attention, three paths: CUDA cores (first kernel), tensor
 * cores (attn_prefill_mma_kernel) and tensor cores fed by a cp.async pipeline and ldmatrix
 * (attn_prefill_flash_kernel, bf16 caches), each described at its definition.
 * CUDA cores: a block of 128 threads owns BM = 32
 * "query rows" of one kv head: the flattened (token, head-of-the-group) pairs r = t*g + hi of one
 * sequence chunk, so a GQA group shares every K/V tile. Per key tile (BK = 32 keys, converted to
 * bf16 pairs in shared memory; e4m3 is exact in bf16, its scales are applied in fp32 to the
 * scores and to the output): 4 threads per row compute 8 scores each, the row's online softmax
 * (max, sum) is reduced over those 4 lanes, the probabilities go through shared memory and each
 * thread accumulates P.V for head_dim/4 of the row's output dimensions in registers. */
#include "attn_prefill.h"

#include <limits.h>
#include <math.h>

#include "common/xalloc.h"
#include "internal/cp_async.cuh"
#include "internal/kcuda.cuh"
#include "internal/ldsm.cuh"
#include "internal/mma16.cuh"
#include "internal/wgmma.cuh"
#include "kv_write.h"

#define BM 32  /* query rows per block */
#define BK 32  /* keys per tile */
#define NT 128 /* threads: 4 per query row */
#define MAXD ATTN_PREFILL_MAX_HEAD_DIM

/* Dynamic shared memory for head dim hd: Q (BM x (hd+1)) fp32, K and V (BK x (hd/2+1)) bf16
 * pairs, P (BM x (BK+1)) fp32. The +1 paddings make the strided accesses conflict-free. */
static size_t smem_bytes(int hd)
{
    return sizeof(float) * ((size_t)BM * (hd + 1) + 2 * (size_t)BK * (hd / 2 + 1) +
                            (size_t)BM * (BK + 1));
}

/* 8 consecutive cache elements -> 4 words of bf16 pairs (low half = even element). */
static __device__ __forceinline__ uint4 load8_bf16x2(const uint16_t *p)
{
    return __ldg(reinterpret_cast<const uint4 *>(p));
}

static __device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t two)
{
    const uint32_t lo = __float_as_uint(e4m3_to_f32((uint8_t)(two & 0xffu))) >> 16;
    const uint32_t hi = __float_as_uint(e4m3_to_f32((uint8_t)(two >> 8))) >> 16;
    return lo | (hi << 16);
}

static __device__ __forceinline__ uint4 load8_bf16x2(const uint8_t *p)
{
    const uint2 b = __ldg(reinterpret_cast<const uint2 *>(p));
    return make_uint4(e4m3x2_to_bf16x2(b.x & 0xffffu), e4m3x2_to_bf16x2(b.x >> 16),
                      e4m3x2_to_bf16x2(b.y & 0xffffu), e4m3x2_to_bf16x2(b.y >> 16));
}

/* Flattened row r of a kv head's block (query row r / g of the item, head r % g of the group)
 * as the (row, q head) index into q / gate / out (times head_dim) and the split partials. */
static __device__ __forceinline__ int64_t row_head(const struct attn_prefill_seq &d, int r, int g,
                                                   int kvh, int hq)
{
    const int t = r / g;
    return (int64_t)(d.row_start + t) * hq + kvh * g + (r - t * g);
}

static __device__ __forceinline__ float bf_lo(uint32_t w)
{
    return __uint_as_float(w << 16);
}

static __device__ __forceinline__ float bf_hi(uint32_t w)
{
    return __uint_as_float(w & 0xffff0000u);
}

/* T: uint16_t (bf16 cache) or uint8_t (e4m3). grid (tiles of max_rows*g, n_kv_heads, n_seqs);
 * seqs NULL = the single descriptor `one`. qk_scale = scale * k_scale. */
template <typename T>
__global__ void __launch_bounds__(NT)
    attn_prefill_kernel(float *out, const float *q, const float *gate, const T *k_cache,
                        const T *v_cache, const int32_t *block_table, int max_blocks_per_seq,
                        const struct attn_prefill_seq *seqs, struct attn_prefill_seq one, int hq,
                        int hkv, int hd, int block_size, float qk_scale, float v_scale)
{
    extern __shared__ float smem[];
    const int qstride = hd + 1, kw = hd / 2, kstride = kw + 1;
    float *Qs = smem;
    uint32_t *Ks = reinterpret_cast<uint32_t *>(Qs + BM * qstride);
    uint32_t *Vs = Ks + BK * kstride;
    float *Ps = reinterpret_cast<float *>(Vs + BK * kstride);

    const struct attn_prefill_seq d = seqs ? seqs[blockIdx.z] : one;
    const int g = hq / hkv, kvh = blockIdx.y;
    const int n_flat = d.n_rows * g;
    const int ntiles = (n_flat + BM - 1) / BM;
    if ((int)blockIdx.x >= ntiles)
        return; /* whole block: no barrier reached */
    const int r0 = (ntiles - 1 - (int)blockIdx.x) * BM; /* longest contexts launch first */
    const int32_t *bt = block_table + (int64_t)d.seq * max_blocks_per_seq;
    const int kv_end = d.pos0 + (min(r0 + BM, n_flat) - 1) / g + 1; /* keys [0, kv_end) */

    for (int e = threadIdx.x; e < BM * hd; e += NT) {
        const int rr = e / hd, i = e - rr * hd, r = r0 + rr;
        float x = 0.0f;
        if (r < n_flat) {
            const int64_t rh = row_head(d, r, g, kvh, hq);
            x = q[rh * hd + i] * qk_scale;
        }
        Qs[rr * qstride + i] = x;
    }

    const int rr = threadIdx.x >> 2, sub = threadIdx.x & 3;
    const int my_r = min(r0 + rr, n_flat - 1);
    const int my_pos = d.pos0 + my_r / g; /* keys j <= my_pos are visible */
    const int nw4 = kw / 4;               /* words of output per thread */
    float m = -INFINITY, l = 0.0f;
    float acc[MAXD / 8][2];
#pragma unroll
    for (int c = 0; c < MAXD / 8; c++)
        acc[c][0] = acc[c][1] = 0.0f;

    for (int j0 = 0; j0 < kv_end; j0 += BK) {
        __syncthreads(); /* previous tile's K/V/P fully consumed */
        for (int e = threadIdx.x; e < BK * (hd / 8); e += NT) {
            const int kk = e / (hd / 8), c8 = e - kk * (hd / 8), j = j0 + kk;
            uint4 kv4 = make_uint4(0u, 0u, 0u, 0u), vv4 = kv4;
            if (j < kv_end) {
                const int64_t slot = (int64_t)bt[j / block_size] * block_size + j % block_size;
                const int64_t off = (slot * hkv + kvh) * hd + c8 * 8;
                kv4 = load8_bf16x2(k_cache + off);
                vv4 = load8_bf16x2(v_cache + off);
            }
            uint32_t *kd = Ks + kk * kstride + c8 * 4, *vd = Vs + kk * kstride + c8 * 4;
            kd[0] = kv4.x, kd[1] = kv4.y, kd[2] = kv4.z, kd[3] = kv4.w;
            vd[0] = vv4.x, vd[1] = vv4.y, vd[2] = vv4.z, vd[3] = vv4.w;
        }
        __syncthreads(); /* K/V (and Q on the first tile) visible */

        float s[BK / 4];
#pragma unroll
        for (int i = 0; i < BK / 4; i++)
            s[i] = 0.0f;
        const float *qrow = Qs + rr * qstride;
        for (int w = 0; w < kw; w++) {
            const float q0 = qrow[2 * w], q1 = qrow[2 * w + 1];
#pragma unroll
            for (int i = 0; i < BK / 4; i++) {
                const uint32_t kk2 = Ks[(sub + 4 * i) * kstride + w];
                s[i] = fmaf(q0, bf_lo(kk2), fmaf(q1, bf_hi(kk2), s[i]));
            }
        }
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < BK / 4; i++) {
            if (j0 + sub + 4 * i > my_pos)
                s[i] = -INFINITY;
            mx = fmaxf(mx, s[i]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        /* key 0 is visible to every row and is in the first tile, so m_new is finite */
        const float m_new = fmaxf(m, mx);
        const float alpha = __expf(m - m_new); /* 0 on the first tile (m = -inf) */
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < BK / 4; i++) {
            const float p = __expf(s[i] - m_new); /* 0 for masked keys */
            Ps[rr * (BK + 1) + sub + 4 * i] = p;
            sum += p;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        l = l * alpha + sum;
        m = m_new;
        __syncwarp(); /* row rr's P was written by the 4 lanes of this warp that read it */

#pragma unroll
        for (int c = 0; c < MAXD / 8; c++) {
            acc[c][0] *= alpha;
            acc[c][1] *= alpha;
        }
        const float *prow = Ps + rr * (BK + 1);
        for (int kk = 0; kk < BK; kk++) {
            const float p = prow[kk];
            const uint32_t *vrow = Vs + kk * kstride + sub;
#pragma unroll
            for (int c = 0; c < MAXD / 8; c++) {
                if (c < nw4) {
                    const uint32_t v2 = vrow[4 * c];
                    acc[c][0] = fmaf(p, bf_lo(v2), acc[c][0]);
                    acc[c][1] = fmaf(p, bf_hi(v2), acc[c][1]);
                }
            }
        }
    }

    const int r = r0 + rr;
    if (r >= n_flat)
        return;
    const int64_t rh = row_head(d, r, g, kvh, hq);
    const int64_t base = rh * hd;
    const float inv = v_scale / l; /* l >= exp(0) = 1 after the row's maximum key */
#pragma unroll
    for (int c = 0; c < MAXD / 8; c++) {
        if (c < nw4) {
            const int dim = 2 * (sub + 4 * c);
            float o0 = acc[c][0] * inv, o1 = acc[c][1] * inv;
            if (gate) {
                o0 *= sigmoid_f32(gate[base + dim]);
                o1 *= sigmoid_f32(gate[base + dim + 1]);
            }
            out[base + dim] = o0;
            out[base + dim + 1] = o1;
        }
    }
}

/* ---- tensor-core path: mma.sync m16n8k16 bf16 x bf16 -> fp32 ----
 * 4 warps, each owns 16 of the block's MBM = 64 query rows; keys in tiles of MBK = 32. Q is
 * rounded to bf16 once (shared memory), K row-major and V transposed (dims x keys) as bf16 in
 * shared memory; S = Q K^T in fp32 accumulators, scaled and masked in fp32, online softmax on the
 * accumulator fragments (a row's 4 owners are lanes 4g..4g+3), P rounded to bf16 straight from
 * the S fragments into the A operand of O += P V. Fragment layouts (PTX ISA, m16n8k16 .bf16):
 * g = lane/4, c = lane%4; A a0:(g, 2c..2c+1) a1:(g+8, 2c..) a2:(g, 2c+8..) a3:(g+8, 2c+8..);
 * B b0:(k 2c..2c+1, n g) b1:(k 2c+8.., n g); C c0,c1:(g, 2c..2c+1) c2,c3:(g+8, 2c..). */
#define MBM 64
#define MBK 32
#define MNT 128

static size_t mma_smem_bytes(int hd)
{
    return sizeof(uint32_t) * ((size_t)MBM * (hd / 2 + 4) + (size_t)MBK * (hd / 2 + 4) +
                               (size_t)hd * (MBK / 2 + 4));
}

/* One key tile's online-softmax step on m16n8k16 accumulator fragments: s holds NS n-tiles of 8
 * keys' scores (keys j0 + 8 nt + 2 c4 + u) of this thread's rows a (c0, c1) and b (c2, c3); keys
 * past a row's position (where mask) become -inf, the others are scaled; the rows' maxima and
 * sums are reduced over the row's 4 lanes; s becomes P (exp2 of the scores in the log2 domain
 * with LOG2, else __expf), l and m move on and o (NO n-tiles) is rescaled. SAFE: a row may have
 * seen no key yet (a split part), its base is then 0 so every P and alpha is 0; without it the
 * caller guarantees a visible key in the first tile. */
template <int NS, int NO, bool LOG2, bool SAFE>
static __device__ __forceinline__ void frag_softmax(float (*s)[4], float (*o)[4], int j0, int c4,
                                                    int pos_a, int pos_b, bool mask, float scale,
                                                    float &m_a, float &m_b, float &l_a,
                                                    float &l_b)
{
    float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < NS; nt++) {
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int j = j0 + nt * 8 + 2 * c4 + u;
            s[nt][u] = mask && j > pos_a ? -INFINITY : s[nt][u] * scale;
            s[nt][2 + u] = mask && j > pos_b ? -INFINITY : s[nt][2 + u] * scale;
            mx_a = fmaxf(mx_a, s[nt][u]);
            mx_b = fmaxf(mx_b, s[nt][2 + u]);
        }
    }
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
    const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
    const float bs_a = SAFE && mn_a == -INFINITY ? 0.0f : mn_a;
    const float bs_b = SAFE && mn_b == -INFINITY ? 0.0f : mn_b;
    const float al_a = LOG2 ? exp2f(m_a - bs_a) : __expf(m_a - bs_a);
    const float al_b = LOG2 ? exp2f(m_b - bs_b) : __expf(m_b - bs_b);
    float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
    for (int nt = 0; nt < NS; nt++) {
#pragma unroll
        for (int u = 0; u < 2; u++) {
            s[nt][u] = LOG2 ? exp2f(s[nt][u] - bs_a) : __expf(s[nt][u] - bs_a);
            s[nt][2 + u] = LOG2 ? exp2f(s[nt][2 + u] - bs_b) : __expf(s[nt][2 + u] - bs_b);
            sum_a += s[nt][u];
            sum_b += s[nt][2 + u];
        }
    }
    sum_a += __shfl_xor_sync(0xffffffffu, sum_a, 1);
    sum_a += __shfl_xor_sync(0xffffffffu, sum_a, 2);
    sum_b += __shfl_xor_sync(0xffffffffu, sum_b, 1);
    sum_b += __shfl_xor_sync(0xffffffffu, sum_b, 2);
    l_a = l_a * al_a + sum_a;
    l_b = l_b * al_b + sum_b;
    m_a = mn_a;
    m_b = mn_b;
#pragma unroll
    for (int n = 0; n < NO; n++) {
        o[n][0] *= al_a;
        o[n][1] *= al_a;
        o[n][2] *= al_b;
        o[n][3] *= al_b;
    }
}

/* P as the A operand of O += P V for keys 16 kb .. 16 kb + 15: the S fragments of n-tiles 2 kb
 * and 2 kb + 1 (after frag_softmax) rounded to bf16 (fp16 with F16). */
template <bool F16 = false>
static __device__ __forceinline__ void frag_p_a(uint32_t *a, const float (*s)[4], int kb)
{
    a[0] = pack_t<F16>(s[2 * kb][0], s[2 * kb][1]);
    a[1] = pack_t<F16>(s[2 * kb][2], s[2 * kb][3]);
    a[2] = pack_t<F16>(s[2 * kb + 1][0], s[2 * kb + 1][1]);
    a[3] = pack_t<F16>(s[2 * kb + 1][2], s[2 * kb + 1][3]);
}

/* This thread's part of one output row from the O fragments (row a: half 0, row b: half 1; NO
 * n-tiles, those below nd dims) times inv, times sigmoid(gate) when there is one, at out[base]. */
template <int NO>
static __device__ __forceinline__ void frag_store_row(float *out, const float *gate, int64_t base,
                                                      const float (*o)[4], int half, int c4, int nd,
                                                      float inv)
{
#pragma unroll
    for (int n = 0; n < NO; n++) {
        if (n * 8 < nd) {
            const int dim = n * 8 + 2 * c4;
            float o0 = o[n][2 * half] * inv, o1 = o[n][2 * half + 1] * inv;
            if (gate) {
                o0 *= sigmoid_f32(gate[base + dim]);
                o1 *= sigmoid_f32(gate[base + dim + 1]);
            }
            *reinterpret_cast<float2 *>(out + base + dim) = make_float2(o0, o1);
        }
    }
}

/* MAXHD: compile-time bound of the head dim (64 or 256); hd % 16 == 0, hd <= MAXHD. */
template <typename T, int MAXHD>
__global__ void __launch_bounds__(MNT)
    attn_prefill_mma_kernel(float *out, const float *q, const float *gate, const T *k_cache,
                            const T *v_cache, const int32_t *block_table, int max_blocks_per_seq,
                            const struct attn_prefill_seq *seqs, struct attn_prefill_seq one,
                            int hq, int hkv, int hd, int block_size, float qk_scale, float v_scale)
{
    extern __shared__ uint32_t msmem[];
    const int qs_stride = hd / 2 + 4;  /* words; == 4 mod 8 words: conflict-free fragments */
    const int vt_stride = MBK / 2 + 4; /* words per dim row of V^T */
    uint32_t *Qs = msmem;
    uint32_t *Ks = Qs + MBM * qs_stride;
    uint32_t *Vt = Ks + MBK * qs_stride;
    uint16_t *Vt16 = reinterpret_cast<uint16_t *>(Vt);

    const struct attn_prefill_seq d = seqs ? seqs[blockIdx.z] : one;
    const int g = hq / hkv, kvh = blockIdx.y;
    const int n_flat = d.n_rows * g;
    const int ntiles = (n_flat + MBM - 1) / MBM;
    if ((int)blockIdx.x >= ntiles)
        return;
    const int r0 = (ntiles - 1 - (int)blockIdx.x) * MBM;
    const int32_t *bt = block_table + (int64_t)d.seq * max_blocks_per_seq;
    const int kv_end = d.pos0 + (min(r0 + MBM, n_flat) - 1) / g + 1;
    const int kw = hd / 2;

    for (int e = threadIdx.x; e < MBM * kw; e += MNT) {
        const int rr = e / kw, i = e - rr * kw, r = r0 + rr;
        uint32_t x = 0u;
        if (r < n_flat) {
            const int64_t rh = row_head(d, r, g, kvh, hq);
            const float2 v2 = *reinterpret_cast<const float2 *>(q + rh * hd + 2 * i);
            x = pack_bf16x2(v2.x, v2.y);
        }
        Qs[rr * qs_stride + i] = x;
    }

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, c4 = lane & 3;
    const int ra = r0 + warp * 16 + gq, rb = ra + 8; /* this thread's two rows */
    const int pos_a = d.pos0 + min(ra, n_flat - 1) / g, pos_b = d.pos0 + min(rb, n_flat - 1) / g;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
    float o[MAXHD / 8][4];
#pragma unroll
    for (int n = 0; n < MAXHD / 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    const uint32_t *qa = Qs + (warp * 16 + gq) * qs_stride + c4;

    for (int j0 = 0; j0 < kv_end; j0 += MBK) {
        __syncthreads();
        for (int e = threadIdx.x; e < MBK * (hd / 8); e += MNT) {
            const int kk = e / (hd / 8), c8 = e - kk * (hd / 8), j = j0 + kk;
            uint4 kv4 = make_uint4(0u, 0u, 0u, 0u), vv4 = kv4;
            if (j < kv_end) {
                const int64_t slot = (int64_t)bt[j / block_size] * block_size + j % block_size;
                const int64_t off = (slot * hkv + kvh) * hd + c8 * 8;
                kv4 = load8_bf16x2(k_cache + off);
                vv4 = load8_bf16x2(v_cache + off);
            }
            uint32_t *kd = Ks + kk * qs_stride + c8 * 4;
            kd[0] = kv4.x, kd[1] = kv4.y, kd[2] = kv4.z, kd[3] = kv4.w;
            const uint32_t vw[4] = {vv4.x, vv4.y, vv4.z, vv4.w};
#pragma unroll
            for (int u = 0; u < 4; u++) {
                Vt16[(c8 * 8 + 2 * u) * (2 * vt_stride) + kk] = (uint16_t)(vw[u] & 0xffffu);
                Vt16[(c8 * 8 + 2 * u + 1) * (2 * vt_stride) + kk] = (uint16_t)(vw[u] >> 16);
            }
        }
        __syncthreads();

        /* S (16 rows x 32 keys per warp) = Q K^T */
        float s[MBK / 8][4];
#pragma unroll
        for (int nt = 0; nt < MBK / 8; nt++)
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll 4
        for (int kk = 0; kk < hd / 16; kk++) {
            uint32_t a[4];
            a[0] = qa[kk * 8];
            a[1] = qa[8 * qs_stride + kk * 8];
            a[2] = qa[kk * 8 + 4];
            a[3] = qa[8 * qs_stride + kk * 8 + 4];
#pragma unroll
            for (int nt = 0; nt < MBK / 8; nt++) {
                const uint32_t *kb = Ks + (nt * 8 + gq) * qs_stride + kk * 8 + c4;
                mma_bf16(s[nt], a, kb[0], kb[4]);
            }
        }
        /* scale, mask, online softmax; rows a (c0,c1) and b (c2,c3); finite: key 0 */
        frag_softmax<MBK / 8, MAXHD / 8, false, false>(s, o, j0, c4, pos_a, pos_b, true, qk_scale,
                                                      m_a, m_b, l_a, l_b);
        /* O += P V: k = 16 keys per step, P from the S fragments */
#pragma unroll
        for (int kb = 0; kb < MBK / 16; kb++) {
            uint32_t a[4];
            frag_p_a(a, s, kb);
#pragma unroll
            for (int n = 0; n < MAXHD / 8; n++) {
                if (n * 8 < hd) {
                    const uint32_t *vb = Vt + (n * 8 + gq) * vt_stride + kb * 8 + c4;
                    mma_bf16(o[n], a, vb[0], vb[4]);
                }
            }
        }
    }

#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int r = half ? rb : ra;
        if (r >= n_flat)
            continue;
        const int64_t rh = row_head(d, r, g, kvh, hq);
        const int64_t base = rh * hd;
        frag_store_row<MAXHD / 8>(out, gate, base, o, half, c4, hd, v_scale / (half ? l_b : l_a));
    }
}

/* ---- flash path: bf16 K/V through a cp.async double buffer, ldmatrix fragments ----
 * NW warps, each owns 16 of the block's RPB = 16 NW flattened query rows; keys in tiles of BN.
 * Shared memory (bf16, rows of HD elements): Q (RPB rows, rounded once), K and V (2 x BN rows
 * each): the next tile's K and V are copied (cp.async, 16 bytes a thread) while this one is
 * multiplied. Row r's 16-byte chunk c sits at chunk c ^ (r % 8), so the 8 rows an ldmatrix
 * reads fall on distinct banks. S = Q K^T from plain ldmatrix of Q (A) and K (B: keys are the
 * rows of K, the "col" operand); O += P V from ldmatrix.trans of V (B: keys x dims). The online
 * softmax runs in the log2 domain (the scores times scale log2(e), exp2). Same rounding points
 * as the MMA path (q and P to bf16, fp32 accumulation). Needs HD in {64, 128, 256}, 16-byte
 * aligned q and 8-byte aligned out; a sequence's key j at block table entry
 * j / block_size, the usual paging.
 * Prefill (SPLIT false): NW = FNW, BN = FBN; a block walks every key its rows see.
 * Split (SPLIT true, items of few rows: decode, verify windows): one warp, 32-key tiles, and
 * grid.x = row tiles x n_parts: part p of a block's tiles is [p n / P, (p + 1) n / P) of its n
 * tiles, its unnormalised o with its max and sum (log2 domain) to the workspace, merged by
 * attn_flash_merge_kernel (an empty part leaves max -inf, sum 0). A (key tile, kv head) is read
 * once for the whole GQA group.
 * WG (prefill, sm_90a): the same kernel with its products on wgmma (internal/wgmma.cuh): Q, K
 * and V in 128-byte-swizzled atoms of 64 elements, each warpgroup's 64 rows multiplied from
 * shared memory (S = Q K^T, then O += P V with P in registers), so a K / V tile is read once per
 * 64 rows instead of once per warp's 16. bf16 (FWG_LATE): the next tile's copies are issued
 * after this tile's S (their address math beside the MMA), and a step has one barrier, at its
 * start (FWG_NOEND).
 * e4m3 caches (T = uint8_t, prefill only): the tile's bytes go by cp.async to a staging area
 * (BN x HD bytes each of K and V) while the tile before is multiplied, then the block widens them
 * to fp16 (exact) into one K and one V buffer of the same swizzled layout, and the products run
 * on fp16 operands (q and P rounded to fp16); k_scale is in qk_log2, v_scale in the epilogue. */
#ifndef FNW
#define FNW 8 /* prefill: warps a block (bench A/B builds may set it: 4 or 8) */
#endif
#ifndef FBN
#define FBN 64 /* prefill: keys a tile (32 or 64) */
#endif
#define FBM (16 * FNW)
#define FNT (32 * FNW)
#define WG_ALIGN 1024 /* wgmma: slack to align the swizzle atoms */
#ifndef FWG_NOEND
#define FWG_NOEND 1 /* wgmma, bf16 with FWG_LATE: no barrier at a step's end (0: one) */
#endif
#ifndef FWG_LATE
#define FWG_LATE 1 /* wgmma, bf16: next tile's copies after S's MMAs (0: before the barrier) */
#endif
#define SNW 1  /* split: warps a block */
#define SBN 32 /* split: keys a tile */
#define SPLIT_MAX_PARTS 128

/* Q, then 2 buffers of K and of V (bf16), or one each plus the e4m3 staging (f8) */
static size_t flash_smem_bytes_nb(int hd, int nw, int bn, bool f8 = false)
{
    return f8 ? sizeof(uint16_t) * (size_t)hd * (size_t)(16 * nw + 2 * bn) + 2 * (size_t)bn * hd
              : sizeof(uint16_t) * (size_t)hd * (size_t)(16 * nw + 4 * bn);
}

static size_t flash_smem_bytes(int hd, bool f8 = false)
{
    return flash_smem_bytes_nb(hd, FNW, FBN, f8);
}

/* the swizzled offset (elements) of row r's 16-byte chunk c, rows of HD elements */
template <int HD> static __device__ __forceinline__ int fl_off(int r, int c)
{
    return r * HD + ((c ^ (r & 7)) << 3);
}

/* keys j0 .. j0+BN-1 of the K and V caches (zeros at and past kv_end): bf16 into the swizzled
 * buffers Kd / Vd, e4m3 as bytes into the staging rows of HD bytes */
template <int HD, int BN, int TPB, typename T, bool WG = false>
static __device__ __forceinline__ void fl_load(void *Kd, void *Vd, const T *k_cache,
                                               const T *v_cache, const int32_t *bt, int j0,
                                               int kv_end, int hkv, int kvh, int block_size)
{
    constexpr int EPC = 16 / (int)sizeof(T), CH = HD / EPC; /* elements a chunk, chunks a row */
    const bool pow2 = (block_size & (block_size - 1)) == 0; /* the usual 16: no division */
    const int bsh = __ffs(block_size) - 1;
    for (int e = threadIdx.x; e < BN * CH; e += TPB) {
        const int kk = e / CH, c = e - kk * CH, j = j0 + kk;
        int64_t off = 0;
        int bytes = 0;
        if (j < kv_end) {
            const int blk = pow2 ? j >> bsh : j / block_size;
            const int64_t slot = (int64_t)bt[blk] * block_size + (j - blk * block_size);
            off = (slot * hkv + kvh) * HD + c * EPC;
            bytes = 16;
        }
        const int d = sizeof(T) == 1 ? kk * HD + c * 16 /* bytes */
                                     : 2 * (WG ? wg_sw128_off<BN>(kk, c) : fl_off<HD>(kk, c));
        cpa_16(static_cast<uint8_t *>(Kd) + d, k_cache + off, bytes);
        cpa_16(static_cast<uint8_t *>(Vd) + d, v_cache + off, bytes);
    }
}

/* the staged e4m3 rows widened to fp16 into the swizzled K / V buffers */
template <int HD, int BN, int TPB, bool WG = false>
static __device__ __forceinline__ void fl_widen_f8(uint16_t *Kd, uint16_t *Vd, const uint8_t *Fk,
                                                   const uint8_t *Fv)
{
    constexpr int CB = HD / 16;
    for (int e = threadIdx.x; e < 2 * BN * CB; e += TPB) {
        const bool v = e >= BN * CB;
        const int ee = v ? e - BN * CB : e, kk = ee / CB, c = ee - kk * CB;
        const uint4 b = *reinterpret_cast<const uint4 *>((v ? Fv : Fk) + kk * HD + c * 16);
        uint16_t *d = v ? Vd : Kd;
        *reinterpret_cast<uint4 *>(d + (WG ? wg_sw128_off<BN>(kk, 2 * c) : fl_off<HD>(kk, 2 * c))) =
            make_uint4(e4m3x2_h2(b.x), e4m3x2_h2(b.x >> 16), e4m3x2_h2(b.y), e4m3x2_h2(b.y >> 16));
        *reinterpret_cast<uint4 *>(
            d + (WG ? wg_sw128_off<BN>(kk, 2 * c + 1) : fl_off<HD>(kk, 2 * c + 1))) =
            make_uint4(e4m3x2_h2(b.z), e4m3x2_h2(b.z >> 16), e4m3x2_h2(b.w), e4m3x2_h2(b.w >> 16));
    }
}

/* grid (row tiles of max_rows*g [x n_parts when SPLIT], n_kv_heads, n_seqs); qk_log2 = scale *
 * k_scale * log2(e); v_scale: the e4m3 V scale (1 for bf16); ws / n_parts: SPLIT's partials
 * ((row, q head, part) x (HD + 2) floats: o, max, sum). T: uint16_t (bf16) or uint8_t (e4m3,
 * not SPLIT). */
template <int HD, int NW, int BN, bool SPLIT, typename T = uint16_t, bool WG = false>
__global__ void __launch_bounds__(32 * NW, 1)
    attn_prefill_flash_kernel(float *out, float *ws, int n_parts, const float *q, const float *gate,
                              const T *k_cache, const T *v_cache, const int32_t *block_table,
                              int max_blocks_per_seq, const struct attn_prefill_seq *seqs,
                              struct attn_prefill_seq one, int hq, int hkv, int block_size,
                              float qk_log2, float v_scale)
{
    constexpr bool F8 = sizeof(T) == 1;
    static_assert(!(F8 && SPLIT), "the split form reads bf16 caches");
    static_assert(!WG || (!SPLIT && NW % 4 == 0 && BN == 64), "wgmma: warpgroups, 64-key tiles");
    constexpr int CH = HD / 8, RPB = 16 * NW, TPB = 32 * NW;
    extern __shared__ __align__(16) uint16_t fsm[];
    uint16_t *Qs = fsm; /* wgmma: the swizzle atoms 1024-byte aligned in the shared window */
    if constexpr (WG)
        Qs = fsm + ((1024u - (wg_smem(fsm) & 1023u)) & 1023u) / 2;
    uint16_t *Ks = Qs + RPB * HD; /* 2 x BN x HD (e4m3: 1 x) */
    uint16_t *Vs = Ks + (F8 ? 1 : 2) * BN * HD;
    uint8_t *Fk = reinterpret_cast<uint8_t *>(Vs + BN * HD), *Fv = Fk + BN * HD; /* e4m3 */

    const struct attn_prefill_seq d = seqs ? seqs[blockIdx.z] : one;
    const int g = hq / hkv, kvh = blockIdx.y;
    const int n_flat = d.n_rows * g;
    const int ntiles = (n_flat + RPB - 1) / RPB;
    const int bx = SPLIT ? (int)blockIdx.x / n_parts : (int)blockIdx.x;
    const int part = SPLIT ? (int)blockIdx.x - bx * n_parts : 0;
    if (bx >= ntiles)
        return;
    const int r0 = (ntiles - 1 - bx) * RPB; /* longest contexts launch first */
    const int32_t *bt = block_table + (int64_t)d.seq * max_blocks_per_seq;
    const int kv_end = d.pos0 + (min(r0 + RPB, n_flat) - 1) / g + 1;
    const int n_all = (kv_end + BN - 1) / BN;
    const int t0 = SPLIT ? (int)((int64_t)part * n_all / n_parts) : 0;
    const int t1 = SPLIT ? (int)((int64_t)(part + 1) * n_all / n_parts) : n_all;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, c4 = lane & 3;
    const int ra = r0 + warp * 16 + gq, rb = ra + 8; /* this thread's two rows */
    if (SPLIT && t0 == t1) {                         /* no keys: an empty partial */
        if (c4 == 0) {
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int r = half ? rb : ra;
                if (r >= n_flat)
                    continue;
                const int64_t rh = row_head(d, r, g, kvh, hq);
                float *w = ws + (rh * n_parts + part) * (HD + 2);
                w[HD] = -INFINITY;
                w[HD + 1] = 0.0f;
            }
        }
        return;
    }

    fl_load<HD, BN, TPB, T, WG>(F8 ? (void *)Fk : (void *)Ks, F8 ? (void *)Fv : (void *)Vs, k_cache,
                                v_cache, bt, t0 * BN, kv_end, hkv, kvh, block_size);
    cpa_commit();
    /* wgmma on bf16: the next tile's copies issued after this tile's S = Q K^T (their address
     * math beside the MMA), else before the barrier */
    constexpr bool LATE = FWG_LATE && WG && !F8;
    for (int e = threadIdx.x; e < RPB * CH; e += TPB) {
        const int rr = e / CH, c = e - rr * CH, r = r0 + rr;
        uint4 x = make_uint4(0u, 0u, 0u, 0u);
        if (r < n_flat) {
            const int64_t rh = row_head(d, r, g, kvh, hq);
            const float4 *src = reinterpret_cast<const float4 *>(q + rh * HD + c * 8);
            const float4 a = src[0], b = src[1];
            x = make_uint4(pack_t<F8>(a.x, a.y), pack_t<F8>(a.z, a.w), pack_t<F8>(b.x, b.y),
                           pack_t<F8>(b.z, b.w));
        }
        *reinterpret_cast<uint4 *>(Qs + (WG ? wg_sw128_off<RPB>(rr, c) : fl_off<HD>(rr, c))) = x;
    }

    const int pos_a = d.pos0 + min(ra, n_flat - 1) / g, pos_b = d.pos0 + min(rb, n_flat - 1) / g;
    const int pos_min = d.pos0 + r0 / g; /* tiles past it need the causal mask */
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
    float o[HD / 8][4];
#pragma unroll
    for (int n = 0; n < HD / 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    /* ldmatrix row addresses: Q (A, rows of this warp), K (B, keys), V (B trans, keys) */
    const int qrow = warp * 16 + (lane & 7) + 8 * ((lane >> 3) & 1), qch = lane >> 4;
    const int krow = (lane & 7) + 8 * (lane >> 4), kch = (lane >> 3) & 1;
    const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vch = lane >> 4;

    for (int it = t0; it < t1; it++) {
        const int buf = F8 ? 0 : (it - t0) & 1, j0 = it * BN;
        if constexpr (F8) {
            /* tile it staged; every warp done with the previous tile's K / V; widen; then the
             * staging takes tile it + 1 while this one is multiplied */
            cpa_wait<0>();
            __syncthreads();
            fl_widen_f8<HD, BN, TPB, WG>(Ks, Vs, Fk, Fv);
            if constexpr (WG)
                wg_fence_smem();
            __syncthreads();
            if (it + 1 < t1) {
                fl_load<HD, BN, TPB, T, WG>(Fk, Fv, k_cache, v_cache, bt, j0 + BN, kv_end, hkv, kvh,
                                            block_size);
                cpa_commit();
            }
        } else {
            if (!LATE && it + 1 < t1) {
                fl_load<HD, BN, TPB, T, WG>(Ks + (buf ^ 1) * BN * HD, Vs + (buf ^ 1) * BN * HD,
                                            k_cache, v_cache, bt, j0 + BN, kv_end, hkv, kvh,
                                            block_size);
                cpa_commit();
                cpa_wait<1>();
            } else {
                cpa_wait<0>();
            }
            if constexpr (WG)
                wg_fence_smem(); /* this thread's copies (and Q) visible to the async proxy */
            __syncthreads();     /* tile it (and Q) visible to every warp */
        }
        const uint16_t *Kb = Ks + buf * BN * HD, *Vb = Vs + buf * BN * HD;

        float s[BN / 8][4];
        if constexpr (WG) {
            /* the warpgroup's 64 rows: S = Q K^T in HD / 16 k16 steps, softmax, O += P V in
             * BN / 16 steps of 16 keys (wgmma.cuh has the layouts) */
            const uint32_t qa = wg_smem(Qs) + (uint32_t)(warp >> 2) * 64u * 128u;
            const uint32_t ka = wg_smem(Kb), va = wg_smem(Vb);
#pragma unroll
            for (int nt = 0; nt < BN / 8; nt++)
                s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                const uint32_t step = (uint32_t)(kk >> 2) * 128u, sub = (uint32_t)(kk & 3) * 32u;
                wg_ss_m64n64k16<F8>(&s[0][0], wg_desc(qa + step * RPB + sub, 16u, 1024u),
                                    wg_desc(ka + step * BN + sub, 16u, 1024u), 1);
            }
            wg_commit();
            if (LATE && it + 1 < t1) { /* buffer buf ^ 1: every warp left the last step */
                fl_load<HD, BN, TPB, T, WG>(Ks + (buf ^ 1) * BN * HD, Vs + (buf ^ 1) * BN * HD,
                                            k_cache, v_cache, bt, j0 + BN, kv_end, hkv, kvh,
                                            block_size);
                cpa_commit();
            }
            wg_wait<0>();
            wg_hold<BN / 8>(s);
            frag_softmax<BN / 8, HD / 8, true, SPLIT>(
                s, o, j0, c4, pos_a, pos_b, j0 + BN - 1 > pos_min, qk_log2, m_a, m_b, l_a, l_b);
            uint32_t pa[BN / 16][4]; /* P's A fragments, all before the fence */
#pragma unroll
            for (int kb = 0; kb < BN / 16; kb++)
                frag_p_a<F8>(pa[kb], s, kb);
            wg_fence();
#pragma unroll
            for (int kb = 0; kb < BN / 16; kb++)
                wg_rs_k16_tb<HD, F8>(&o[0][0], pa[kb],
                                     wg_desc(va + (uint32_t)kb * 2048u, BN * 128u, 1024u));
            wg_commit();
            wg_wait<0>();
            wg_hold<HD / 8>(o);
        } else {
#pragma unroll
            for (int nt = 0; nt < BN / 8; nt++)
                s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                uint32_t a[4];
                ldsm_x4(a, Qs + fl_off<HD>(qrow, 2 * kk + qch));
#pragma unroll
                for (int np = 0; np < BN / 16; np++) {
                    uint32_t b[4];
                    ldsm_x4(b, Kb + fl_off<HD>(np * 16 + krow, 2 * kk + kch));
                    mma_t<F8>(s[2 * np], a, b[0], b[1]);
                    mma_t<F8>(s[2 * np + 1], a, b[2], b[3]);
                }
            }
            /* prefill: finite (key 0 is in the first tile and visible to every row); a split part
             * may see none of a row's keys yet */
            frag_softmax<BN / 8, HD / 8, true, SPLIT>(
                s, o, j0, c4, pos_a, pos_b, j0 + BN - 1 > pos_min, qk_log2, m_a, m_b, l_a, l_b);
#pragma unroll
            for (int kb = 0; kb < BN / 16; kb++) {
                uint32_t a[4];
                frag_p_a<F8>(a, s, kb);
#pragma unroll
                for (int np = 0; np < HD / 16; np++) {
                    uint32_t b[4];
                    ldsm_x4_t(b, Vb + fl_off<HD>(kb * 16 + vrow, 2 * np + vch));
                    mma_t<F8>(o[2 * np], a, b[0], b[1]);
                    mma_t<F8>(o[2 * np + 1], a, b[2], b[3]);
                }
            }
        }
        /* every warp done with buffer buf before it is refilled; with LATE the next step's top
         * barrier orders that (its copies start after it) */
        if (!(LATE && FWG_NOEND))
            __syncthreads();
    }

#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int r = half ? rb : ra;
        if (r >= n_flat)
            continue;
        const int64_t rh = row_head(d, r, g, kvh, hq);
        if (SPLIT) {
            float *w = ws + (rh * n_parts + part) * (HD + 2);
#pragma unroll
            for (int n = 0; n < HD / 8; n++)
                *reinterpret_cast<float2 *>(w + n * 8 + 2 * c4) =
                    make_float2(o[n][2 * half], o[n][2 * half + 1]);
            if (c4 == 0) {
                w[HD] = half ? m_b : m_a;
                w[HD + 1] = half ? l_b : l_a;
            }
            continue;
        }
        const int64_t base = rh * HD;
        frag_store_row<HD / 8>(out, gate, base, o, half, c4, HD, v_scale / (half ? l_b : l_a));
    }
}

/* The split partials of every (row, q head) of the items: grid (q heads, max_rows, n_seqs),
 * hd threads (a dim each); the parts' maxima and sums in the log2 domain, an empty part's sum
 * 0. out = sum_p 2^(m_p - M) o_p / sum_p 2^(m_p - M) l_p, times sigmoid(gate). */
__global__ void __launch_bounds__(256)
    attn_flash_merge_kernel(float *out, const float *ws, const float *gate,
                            const struct attn_prefill_seq *seqs, int hq, int hd, int n_parts)
{
    const struct attn_prefill_seq d = seqs[blockIdx.z];
    if ((int)blockIdx.y >= d.n_rows)
        return;
    const int h = blockIdx.x, i = threadIdx.x;
    const int64_t row = d.row_start + (int)blockIdx.y;
    const float *w = ws + (row * hq + h) * n_parts * (int64_t)(hd + 2);
    float mx = -INFINITY;
    for (int p = 0; p < n_parts; p++)
        if (w[(int64_t)p * (hd + 2) + hd + 1] > 0.0f)
            mx = fmaxf(mx, w[(int64_t)p * (hd + 2) + hd]);
    float num = 0.0f, den = 0.0f;
    for (int p = 0; p < n_parts; p++) {
        const float *wp = w + (int64_t)p * (hd + 2);
        const float l = wp[hd + 1];
        if (!(l > 0.0f))
            continue;
        const float f = exp2f(wp[hd] - mx);
        den += f * l;
        if (i < hd)
            num += f * wp[i];
    }
    if (i >= hd)
        return;
    const int64_t at = (row * hq + h) * hd + i;
    float o = num / den; /* den >= 1: the part of the row's largest score */
    if (gate)
        o *= sigmoid_f32(gate[at]);
    out[at] = o;
}

template <typename T>
static cudaError_t launch_mma(dim3 grid, cudaStream_t stream, float *out, const float *q,
                              const float *gate, const T *kc, const T *vc, const int32_t *bt,
                              int mbps, const struct attn_prefill_seq *seqs,
                              struct attn_prefill_seq one, int hq, int hkv, int hd, int bs,
                              float qk_scale, float v_scale)
{
    const size_t smem = mma_smem_bytes(hd);
    cudaError_t e;
    if (hd <= 64) {
        e = cudaFuncSetAttribute(attn_prefill_mma_kernel<T, 64>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e == cudaSuccess)
            attn_prefill_mma_kernel<T, 64><<<grid, MNT, smem, stream>>>(
                out, q, gate, kc, vc, bt, mbps, seqs, one, hq, hkv, hd, bs, qk_scale, v_scale);
    } else {
        e = cudaFuncSetAttribute(attn_prefill_mma_kernel<T, 256>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e == cudaSuccess)
            attn_prefill_mma_kernel<T, 256><<<grid, MNT, smem, stream>>>(
                out, q, gate, kc, vc, bt, mbps, seqs, one, hq, hkv, hd, bs, qk_scale, v_scale);
    }
    return e;
}

template <int HD, int NW, int BN, bool SPLIT, typename T, bool WG>
static cudaError_t launch_flash_hd(dim3 grid, cudaStream_t stream, float *out, float *ws,
                                   int n_parts, const float *q, const float *gate, const T *kc,
                                   const T *vc, const int32_t *bt, int mbps,
                                   const struct attn_prefill_seq *seqs, struct attn_prefill_seq one,
                                   int hq, int hkv, int bs, float qk_log2, float v_scale)
{
    const size_t smem = flash_smem_bytes_nb(HD, NW, BN, sizeof(T) == 1) + (WG ? WG_ALIGN : 0);
    cudaError_t e = cudaFuncSetAttribute(attn_prefill_flash_kernel<HD, NW, BN, SPLIT, T, WG>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e == cudaSuccess)
        attn_prefill_flash_kernel<HD, NW, BN, SPLIT, T, WG><<<grid, 32 * NW, smem, stream>>>(
            out, ws, n_parts, q, gate, kc, vc, bt, mbps, seqs, one, hq, hkv, bs, qk_log2, v_scale);
    return e;
}

template <int NW, int BN, bool SPLIT, typename T, bool WG>
static cudaError_t
launch_flash_t(int hd, dim3 grid, cudaStream_t stream, float *out, float *ws, int n_parts,
               const float *q, const float *gate, const void *k_cache, const void *v_cache,
               const int32_t *bt, int mbps, const struct attn_prefill_seq *seqs,
               struct attn_prefill_seq one, int hq, int hkv, int bs, float qk_log2, float v_scale)
{
    const T *kc = (const T *)k_cache, *vc = (const T *)v_cache;
    if (hd == 64)
        return launch_flash_hd<64, NW, BN, SPLIT, T, WG>(grid, stream, out, ws, n_parts, q, gate,
                                                         kc, vc, bt, mbps, seqs, one, hq, hkv, bs,
                                                         qk_log2, v_scale);
    if (hd == 128)
        return launch_flash_hd<128, NW, BN, SPLIT, T, WG>(grid, stream, out, ws, n_parts, q, gate,
                                                          kc, vc, bt, mbps, seqs, one, hq, hkv, bs,
                                                          qk_log2, v_scale);
    return launch_flash_hd<256, NW, BN, SPLIT, T, WG>(grid, stream, out, ws, n_parts, q, gate, kc,
                                                      vc, bt, mbps, seqs, one, hq, hkv, bs, qk_log2,
                                                      v_scale);
}

/* kv_dtype: bf16, or e4m3 (not SPLIT) with its scales */
template <int NW, int BN, bool SPLIT, bool WG = false>
static cudaError_t launch_flash(int hd, dim3 grid, cudaStream_t stream, float *out, float *ws,
                                int n_parts, const float *q, const float *gate, const void *k_cache,
                                const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                                const int32_t *bt, int mbps, const struct attn_prefill_seq *seqs,
                                struct attn_prefill_seq one, int hq, int hkv, int bs, float scale)
{
    const float qk_log2 = scale * k_scale * 1.4426950408889634f;
    if constexpr (!SPLIT)
        if (kv_dtype == KV_DTYPE_FP8)
            return launch_flash_t<NW, BN, SPLIT, uint8_t, WG>(
                hd, grid, stream, out, ws, n_parts, q, gate, k_cache, v_cache, bt, mbps, seqs, one,
                hq, hkv, bs, qk_log2, v_scale);
    return launch_flash_t<NW, BN, SPLIT, uint16_t, WG>(hd, grid, stream, out, ws, n_parts, q, gate,
                                                       k_cache, v_cache, bt, mbps, seqs, one, hq,
                                                       hkv, bs, qk_log2, 1.0f);
}

/* The flash kernels' conditions: head dim 64 / 128 / 256, smem within the device's per-block
 * limit. */
static int flash_fits(int hd, size_t smem)
{
    if (hd != 64 && hd != 128 && hd != 256)
        return 0;
    return smem <= (size_t)kcuda_device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
}

int attn_prefill_flash_ok(int head_dim, int kv_dtype)
{
    if (kv_dtype != KV_DTYPE_BF16 && kv_dtype != KV_DTYPE_FP8)
        return 0;
    return flash_fits(head_dim, flash_smem_bytes(head_dim, kv_dtype == KV_DTYPE_FP8));
}

int attn_prefill_wgmma_ok(int head_dim, int kv_dtype)
{
#ifdef TERN_SM90A
    if (kv_dtype != KV_DTYPE_BF16 && kv_dtype != KV_DTYPE_FP8)
        return 0;
    if (kcuda_device_attr(cudaDevAttrComputeCapabilityMajor, 0) != 9 ||
        kcuda_device_attr(cudaDevAttrComputeCapabilityMinor, -1) != 0)
        return 0;
    return flash_fits(head_dim, flash_smem_bytes(head_dim, kv_dtype == KV_DTYPE_FP8) + WG_ALIGN);
#else
    (void)head_dim;
    (void)kv_dtype;
    return 0;
#endif
}

int attn_prefill_split_ok(int head_dim, int kv_dtype)
{
    return kv_dtype == KV_DTYPE_BF16 &&
           flash_fits(head_dim, flash_smem_bytes_nb(head_dim, SNW, SBN));
}

int attn_prefill_split_parts(int n_seqs, int max_rows, int n_q_heads, int n_kv_heads, int max_len,
                             int n_sms)
{
    if (n_seqs < 1 || max_rows < 1 || n_kv_heads < 1 || n_q_heads < n_kv_heads || max_len < 1)
        return 1;
    const int sms = n_sms > 0 ? n_sms : kcuda_device_attr(cudaDevAttrMultiProcessorCount, 132);
    const int64_t tiles = CEIL_DIV((int64_t)max_rows * (n_q_heads / n_kv_heads), 16 * SNW);
    const int64_t blocks = tiles * n_kv_heads * n_seqs;   /* a part each */
    int64_t parts = CEIL_DIV(2 * (int64_t)sms, blocks);   /* about two blocks an SM */
    const int64_t most = CEIL_DIV((int64_t)max_len, SBN); /* no part without a key tile */
    if (parts > most)
        parts = most;
    if (parts > SPLIT_MAX_PARTS)
        parts = SPLIT_MAX_PARTS;
    return parts < 1 ? 1 : (int)parts;
}

size_t attn_prefill_split_ws_floats(int rows, int n_q_heads, int head_dim, int n_parts)
{
    if (rows < 1 || n_q_heads < 1 || head_dim < 1 || n_parts < 1)
        return 0;
    return (size_t)rows * (size_t)n_q_heads * (size_t)n_parts * (size_t)(head_dim + 2);
}

int attn_prefill_split_cuda(float *out, float *ws, int n_parts, const float *q, const float *gate,
                            const void *k_cache, const void *v_cache, int kv_dtype,
                            const int32_t *block_table, int max_blocks_per_seq,
                            const struct attn_prefill_seq *seqs, int n_seqs, int max_rows,
                            int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                            float scale, cudaStream_t stream)
{
    const int hq = n_q_heads, hkv = n_kv_heads, hd = head_dim;
    if (!out || !ws || !q || !k_cache || !v_cache || !block_table || !seqs ||
        kv_dtype != KV_DTYPE_BF16 || (hd != 64 && hd != 128 && hd != 256) || n_parts < 1 ||
        n_parts > SPLIT_MAX_PARTS || n_seqs < 0 || n_seqs > 65535 || max_rows < 0 ||
        max_rows > 65535 || hq <= 0 || hkv <= 0 || hkv > 65535 || hq % hkv || hq > 65535 ||
        block_size <= 0 || max_blocks_per_seq < 0 ||
        (int64_t)max_rows * (hq / hkv) > INT_MAX / SPLIT_MAX_PARTS || ((uintptr_t)k_cache) % 16 ||
        ((uintptr_t)v_cache) % 16 || ((uintptr_t)q) % 16 || ((uintptr_t)out) % 8 ||
        ((uintptr_t)ws) % 8)
        return ERR_INVAL;
    const int tiles = CEIL_DIV(max_rows * (hq / hkv), 16 * SNW);
    if (n_seqs == 0 || tiles == 0)
        return 0;
    const struct attn_prefill_seq none = {0, 0, 0, 0};
    cudaError_t e = launch_flash<SNW, SBN, true>(
        hd, dim3(tiles * n_parts, hkv, n_seqs), stream, out, ws, n_parts, q, gate, k_cache, v_cache,
        KV_DTYPE_BF16, 1.0f, 1.0f, block_table, max_blocks_per_seq, seqs, none, hq, hkv, block_size,
        scale);
    if (e != cudaSuccess) {
        LOG_ERR("kernel_attr_failed", "op=attn_prefill_split smem=%zu err=\"%s\"",
                flash_smem_bytes_nb(hd, SNW, SBN), cudaGetErrorString(e));
        return ERR_CUDA;
    }
    int rc = kcuda_launch_status("attn_prefill_split");
    if (rc < 0)
        return rc;
    attn_flash_merge_kernel<<<dim3(hq, max_rows, n_seqs), CEIL_DIV(hd, 32) * 32, 0, stream>>>(
        out, ws, gate, seqs, hq, hd, n_parts);
    return kcuda_launch_status("attn_flash_merge");
}

/* Path AUTO resolves to: */
#define AUTO_PATH ATTN_PREFILL_PATH_CORES

static int launch(float *out, const float *q, const float *gate, const void *k_cache,
                  const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                  const int32_t *block_table, int max_blocks_per_seq,
                  const struct attn_prefill_seq *seqs, struct attn_prefill_seq one, int n_seqs,
                  int max_rows, int hq, int hkv, int hd, int block_size, float scale, int path,
                  cudaStream_t stream)
{
    if (kv_dtype == KV_DTYPE_BF16)
        k_scale = v_scale = 1.0f;
    if (path == ATTN_PREFILL_PATH_AUTO)
        path = AUTO_PATH == ATTN_PREFILL_PATH_MMA && hd % 16 == 0 ? ATTN_PREFILL_PATH_MMA
                                                                   : ATTN_PREFILL_PATH_CORES;
    if (!out || !q || !k_cache || !v_cache || !block_table || !kv_dtype_bytes(kv_dtype) ||
        !(k_scale > 0.0f) || !(v_scale > 0.0f) || isinf(k_scale) || isinf(v_scale) || n_seqs < 0 ||
        n_seqs > 65535 || max_rows < 0 || hq <= 0 || hkv <= 0 || hkv > 65535 || hq % hkv ||
        hd <= 0 || hd % 8 || hd > MAXD || block_size <= 0 || max_blocks_per_seq < 0 ||
        (int64_t)max_rows * (hq / hkv) > INT_MAX - MBM || ((uintptr_t)k_cache) % 16 ||
        ((uintptr_t)v_cache) % 16 ||
        (path != ATTN_PREFILL_PATH_CORES && path != ATTN_PREFILL_PATH_MMA &&
         path != ATTN_PREFILL_PATH_FLASH && path != ATTN_PREFILL_PATH_WGMMA))
        return ERR_INVAL;
    if (path == ATTN_PREFILL_PATH_WGMMA && !attn_prefill_wgmma_ok(hd, kv_dtype))
        return ERR_INVAL; /* not this build or device: the caller asks attn_prefill_wgmma_ok */
    const bool wg = path == ATTN_PREFILL_PATH_WGMMA;
    if (wg)
        path = ATTN_PREFILL_PATH_FLASH; /* the same kernel, its products on wgmma */
    if (path == ATTN_PREFILL_PATH_MMA && (hd % 16 || ((uintptr_t)q) % 8 || ((uintptr_t)out) % 8))
        return ERR_INVAL;
    if (path == ATTN_PREFILL_PATH_FLASH &&
        ((hd != 64 && hd != 128 && hd != 256) || ((uintptr_t)q) % 16 || ((uintptr_t)out) % 8))
        return ERR_INVAL;
    const int bm = path == ATTN_PREFILL_PATH_MMA ? MBM : path == ATTN_PREFILL_PATH_FLASH ? FBM : BM;
    const int ntiles = CEIL_DIV(max_rows * (hq / hkv), bm);
    if (n_seqs == 0 || ntiles == 0)
        return 0;
    const dim3 grid(ntiles, hkv, n_seqs);
    const float qk_scale = scale * k_scale;
    const size_t smem = path == ATTN_PREFILL_PATH_MMA ? mma_smem_bytes(hd)
                        : path == ATTN_PREFILL_PATH_FLASH
                            ? flash_smem_bytes(hd, kv_dtype == KV_DTYPE_FP8) + (wg ? WG_ALIGN : 0)
                            : smem_bytes(hd);
    cudaError_t e;
    if (wg) {
        e = launch_flash<FNW, FBN, false, true>(
            hd, grid, stream, out, NULL, 1, q, gate, k_cache, v_cache, kv_dtype, k_scale, v_scale,
            block_table, max_blocks_per_seq, seqs, one, hq, hkv, block_size, scale);
    } else if (path == ATTN_PREFILL_PATH_FLASH) {
        e = launch_flash<FNW, FBN, false>(
            hd, grid, stream, out, NULL, 1, q, gate, k_cache, v_cache, kv_dtype, k_scale, v_scale,
            block_table, max_blocks_per_seq, seqs, one, hq, hkv, block_size, scale);
    } else if (path == ATTN_PREFILL_PATH_MMA) {
        if (kv_dtype == KV_DTYPE_BF16)
            e = launch_mma<uint16_t>(grid, stream, out, q, gate, (const uint16_t *)k_cache,
                                     (const uint16_t *)v_cache, block_table, max_blocks_per_seq,
                                     seqs, one, hq, hkv, hd, block_size, qk_scale, v_scale);
        else
            e = launch_mma<uint8_t>(grid, stream, out, q, gate, (const uint8_t *)k_cache,
                                    (const uint8_t *)v_cache, block_table, max_blocks_per_seq,
                                    seqs, one, hq, hkv, hd, block_size, qk_scale, v_scale);
    } else if (kv_dtype == KV_DTYPE_BF16) {
        e = cudaFuncSetAttribute(attn_prefill_kernel<uint16_t>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e == cudaSuccess)
            attn_prefill_kernel<uint16_t><<<grid, NT, smem, stream>>>(
                out, q, gate, (const uint16_t *)k_cache, (const uint16_t *)v_cache, block_table,
                max_blocks_per_seq, seqs, one, hq, hkv, hd, block_size, qk_scale, v_scale);
    } else {
        e = cudaFuncSetAttribute(attn_prefill_kernel<uint8_t>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e == cudaSuccess)
            attn_prefill_kernel<uint8_t><<<grid, NT, smem, stream>>>(
                out, q, gate, (const uint8_t *)k_cache, (const uint8_t *)v_cache, block_table,
                max_blocks_per_seq, seqs, one, hq, hkv, hd, block_size, qk_scale, v_scale);
    }
    if (e != cudaSuccess) {
        LOG_ERR("kernel_attr_failed", "op=attn_prefill path=%d smem=%zu err=\"%s\"",
                wg ? (int)ATTN_PREFILL_PATH_WGMMA : path, smem, cudaGetErrorString(e));
        return ERR_CUDA;
    }
    return kcuda_launch_status("attn_prefill");
}

int attn_prefill_batch_path_cuda(float *out, const float *q, const float *gate,
                                 const void *k_cache, const void *v_cache, int kv_dtype,
                                 float k_scale, float v_scale, const int32_t *block_table,
                                 int max_blocks_per_seq, const struct attn_prefill_seq *seqs,
                                 int n_seqs, int max_rows, int n_q_heads, int n_kv_heads,
                                 int head_dim, int block_size, float scale, int path,
                                 cudaStream_t stream)
{
    const struct attn_prefill_seq none = {0, 0, 0, 0};
    if (!seqs)
        return ERR_INVAL;
    return launch(out, q, gate, k_cache, v_cache, kv_dtype, k_scale, v_scale, block_table,
                  max_blocks_per_seq, seqs, none, n_seqs, max_rows, n_q_heads, n_kv_heads,
                  head_dim, block_size, scale, path, stream);
}

int attn_prefill_batch_cuda(float *out, const float *q, const float *gate, const void *k_cache,
                            const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                            const int32_t *block_table, int max_blocks_per_seq,
                            const struct attn_prefill_seq *seqs, int n_seqs, int max_rows,
                            int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                            float scale, cudaStream_t stream)
{
    return attn_prefill_batch_path_cuda(out, q, gate, k_cache, v_cache, kv_dtype, k_scale,
                                        v_scale, block_table, max_blocks_per_seq, seqs, n_seqs,
                                        max_rows, n_q_heads, n_kv_heads, head_dim, block_size,
                                        scale, ATTN_PREFILL_PATH_AUTO, stream);
}

int attn_prefill_path_cuda(float *out, const float *q, const float *gate, const void *k_cache,
                           const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                           const int32_t *block_table, int n_rows, int pos0, int n_q_heads,
                           int n_kv_heads, int head_dim, int block_size, float scale, int path,
                           cudaStream_t stream)
{
    const struct attn_prefill_seq one = {0, 0, n_rows, pos0};
    if (n_rows < 0 || pos0 < 0)
        return ERR_INVAL;
    return launch(out, q, gate, k_cache, v_cache, kv_dtype, k_scale, v_scale, block_table, 0,
                  NULL, one, 1, n_rows, n_q_heads, n_kv_heads, head_dim, block_size, scale, path,
                  stream);
}

int attn_prefill_cuda(float *out, const float *q, const float *gate, const void *k_cache,
                      const void *v_cache, int kv_dtype, float k_scale, float v_scale,
                      const int32_t *block_table, int n_rows, int pos0, int n_q_heads,
                      int n_kv_heads, int head_dim, int block_size, float scale,
                      cudaStream_t stream)
{
    return attn_prefill_path_cuda(out, q, gate, k_cache, v_cache, kv_dtype, k_scale, v_scale,
                                  block_table, n_rows, pos0, n_q_heads, n_kv_heads, head_dim,
                                  block_size, scale, ATTN_PREFILL_PATH_AUTO, stream);
}
