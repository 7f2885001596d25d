/* attn_decode: split-K decode attention. Launch 1, grid (parts, q heads, seqs), 256 threads:
 * block sp walks the chunks sp, sp + parts, ... of SPLIT keys of its sequence; the keys are
 * spread over the warps, a lane owning 8 dims of a key (one 16-byte bf16 / 8-byte fp8 load of K
 * and of V, KU keys in flight), each warp with its own running max / sum (online softmax); the
 * warps merge through shared memory into the block's one partial (o, max, sum) in the workspace.
 * Launch 2 merges the parts and applies the sigmoid gate. */
#include "attn_decode.h"

#include <math.h>

#include "common/xalloc.h"
#include "internal/cp_async.cuh"
#include "internal/kcuda.cuh"
#include "internal/mma16.cuh"
#include "internal/movm.cuh"
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

#define GQA_KEYS 16 /* keys a tile of the GQA form (below) */
/* Part p of n_parts takes the key tiles [p c, min((p + 1) c, n)) of the n = ceil(len / 16)
 * tiles, c = max(ATTN_DECODE_GQA_MIN_TILES, ceil(n / n_parts)); the parts from ceil(n / c) on
 * have none and write nothing. */
static __device__ __forceinline__ int gqa_part_tiles(int n, int n_parts)
{
    return max(ATTN_DECODE_GQA_MIN_TILES, CEIL_DIV(n, n_parts));
}

static __device__ __forceinline__ int gqa_parts_used(int len, int n_parts)
{
    const int n = CEIL_DIV(len, GQA_KEYS);
    return CEIL_DIV(n, gqa_part_tiles(n, n_parts));
}

/* Merges the min(n_parts, ceil(len / SPLIT)) partials of sequence b (the blocks past its chunks
 * returned at once and wrote nothing), or with gqa the gqa_parts_used(len, n_parts) partials
 * of the GQA form. THREADS threads. Warp 0 turns each partial's max into its
 * factor exp(m_s - M) / L in shared memory; then warp w sums the partials w, w + WARPS, .. (a
 * lane 8 dims, as 8-byte loads: a partial's row is head_dim + 2 floats), all of a warp's loads
 * issued together, and the warps' sums meet in shared memory: a 2,048-token context's 32
 * partials a head cost one round of loads, not one per partial. */
#define MERGE_MAX_PARTS ATTN_DECODE_WAVE_BLOCKS
/* partial rows a warp loads before the factors are known (-DMERGE_PF=0: after, as before; an A/B
 * build, tests/gpu/measure.sh sessab) */
#ifndef MERGE_PF
#define MERGE_PF 2
#endif
__global__ void __launch_bounds__(THREADS)
    attn_merge_kernel(float *out, const float *ws, const float *gate, const int32_t *seq_lens,
                      int n_q_heads, int head_dim, int n_parts, int gqa)
{
    kcuda_pdl_enter();
    __shared__ float fac[MERGE_MAX_PARTS];
    __shared__ float part[WARPS][MAXD];
    const int h = blockIdx.x, b = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int ld = head_dim + 2;
    const float *w = ws + ((int64_t)b * n_q_heads + h) * n_parts * ld;
    const int len = max(seq_lens[b], 0);
    const int n = gqa ? gqa_parts_used(len, n_parts) : min(n_parts, CEIL_DIV(len, SPLIT));
    /* the first MERGE_PF partial rows of a warp's first dims issued before warp 0's factor pass
     * (one round trip, not two: a 2,048-token context's 16 GQA partials are 2 a warp) */
    float2 pv[MERGE_PF > 0 ? MERGE_PF : 1][4];
#pragma unroll
    for (int k = 0; k < MERGE_PF; k++) {
        const int s = warp + k * WARPS;
        if (s < n && lane * 8 < head_dim) {
            const float2 *p = reinterpret_cast<const float2 *>(w + s * ld + lane * 8);
#pragma unroll
            for (int i = 0; i < 4; i++)
                pv[k][i] = p[i];
        }
    }
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
        int s = warp;
        if (d0 == lane * 8) { /* the rows already loaded */
#pragma unroll
            for (int k = 0; k < MERGE_PF; k++, s += WARPS) {
                if (s >= n)
                    break;
                const float f = fac[s];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    o[2 * i] += pv[k][i].x * f;
                    o[2 * i + 1] += pv[k][i].y * f;
                }
            }
        }
#pragma unroll 4
        for (; s < n; s += WARPS) {
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

/* ---- the GQA form: tensor cores, one block per (part, kv head, sequence) ----
 * The query heads of a kv head (GQA_COLS at most, zeros past the group) are the 8 columns n of
 * mma.sync m16n8k16, 16 keys its rows m: S^T = K Q^T (16 keys x 8 heads, k = 16 dims a step),
 * then O^T += V^T P^T (16 dims x 8 heads, k = the 16 keys). Each key tile is read from HBM once
 * for the whole group (the split kernel above reads it once per query head). A warp runs its own
 * tiles (tiles w, w + NW, .. of the block's part) through a cp.async pipeline of ST stages of K
 * and V (16 keys each, rows of HD elements, 16-byte chunks swizzled by the row) and its own
 * online softmax; the block's warps merge in shared memory into one partial per query head, the
 * format attn_merge_kernel reads (its max in the natural-log domain).
 * Dims are permuted consistently, so every fragment is a plain load: in S^T's k-step s = 2j + h,
 * fragment columns 2t + e and 2t + 8 + e (t = lane % 4, e = 0, 1) are dims 32j + 8t + 4h + e
 * and 32j + 8t + 4h + 2 + e, so a lane's K and Q words for steps 2j, 2j + 1 are the 8
 * consecutive dims 32j + 8t..; in O^T's m-tile mt, rows g and g + 8 (g = lane / 4) are dims
 * g HD / 8 + 2 mt and g HD / 8 + 2 mt + 1, so a lane's V words are the HD / 8 consecutive dims
 * from g HD / 8 of the keys 2t, 2t + 1, 2t + 8, 2t + 9 (its k columns), paired by byte permutes.
 * P^T reaches the B layout by movmatrix. bf16 K/V multiply as bf16 (Q and P rounded to bf16),
 * e4m3 K/V as fp16 (exact; Q and P rounded to fp16). */
#define GQA_COLS 8
#define GQA_LOG2E 1.4426950408889634f
#define GQA_LN2 0.6931471805599453f

/* warps a GQA block on e4m3 K/V where the shared memory holds them (8: two a scheduler, one
 * warp's conversions beside another's; bf16 stays at 4); -DGQA_E4M3_WARPS=4 builds 4 */
#ifndef GQA_E4M3_WARPS
#define GQA_E4M3_WARPS 8
#endif
/* The GQA form's first stages of K/V tiles older than the pass's own keys issued before its PDL
 * wait (attn_prep before it is short: about 3 us a layer on the H200, in which the tiles' DRAM
 * latency can pass), q loaded after it: batch 1 at 2,048 +0.9-1.5% in each format, batch 8 +1.7%
 * (H200, twenty-seventh session, docs/PERF.md). -DGQA_PRE_WAIT=0 builds the wait first. */
#ifndef GQA_PRE_WAIT
#define GQA_PRE_WAIT 1
#endif

template <typename T> struct gqa_elem;
template <> struct gqa_elem<uint16_t> {
    static constexpr bool F16 = false; /* bf16 operands */
    /* stages of K and V a warp */
    template <int NW> __host__ __device__ static constexpr int st()
    {
        return 3;
    }
};
template <> struct gqa_elem<uint8_t> {
    static constexpr bool F16 = true; /* e4m3 widened to fp16 */
    template <int NW> __host__ __device__ static constexpr int st()
    {
        return NW >= 8 ? 3 : 4;
    }
};

/* byte offset of byte b of row r in a tile of rows of RB bytes: 16-byte chunk c at c ^ sw(r),
 * sw(r) = ((r / 2) % 4) + 4 (r % 2) (below the row's chunk count), so the 8 lanes of a 16-byte
 * shared load phase land on distinct banks in the K reads (rows g, g + 1: 4 chunks each) and
 * the V reads (rows 2t + {0, 2, 4, 6}: 2 chunks each) */
template <int RB> static __device__ __forceinline__ int gqa_off(int r, int b)
{
    constexpr int NC = RB / 16;
    const int sw = (((r >> 1) & 3) | ((r & 1) << 2)) & (NC - 1);
    return r * RB + ((((b >> 4) ^ sw)) << 4) + (b & 15);
}

/* 8 consecutive elements from shared memory as 4 words of 16-bit pairs (low = even element):
 * 16 bytes of bf16, or 8 bytes of e4m3 decoded to fp16 */
template <int RB>
static __device__ __forceinline__ void gqa_lds8(uint32_t *w, const uint8_t *t, int r, int e0,
                                                uint16_t)
{
    const uint4 v = *reinterpret_cast<const uint4 *>(t + gqa_off<RB>(r, 2 * e0));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
}
template <int RB>
static __device__ __forceinline__ void gqa_lds8(uint32_t *w, const uint8_t *t, int r, int e0,
                                                uint8_t)
{
    const uint2 v = *reinterpret_cast<const uint2 *>(t + gqa_off<RB>(r, e0));
    w[0] = e4m3x2_h2(v.x & 0xffffu), w[1] = e4m3x2_h2(v.x >> 16);
    w[2] = e4m3x2_h2(v.y & 0xffffu), w[3] = e4m3x2_h2(v.y >> 16);
}
/* 4 consecutive elements (e0 % 4 == 0) as 2 words */
template <int RB>
static __device__ __forceinline__ void gqa_lds4(uint32_t *w, const uint8_t *t, int r, int e0,
                                                uint16_t)
{
    const uint2 v = *reinterpret_cast<const uint2 *>(t + gqa_off<RB>(r, 2 * e0));
    w[0] = v.x, w[1] = v.y;
}
template <int RB>
static __device__ __forceinline__ void gqa_lds4(uint32_t *w, const uint8_t *t, int r, int e0,
                                                uint8_t)
{
    const uint32_t v = *reinterpret_cast<const uint32_t *>(t + gqa_off<RB>(r, e0));
    w[0] = e4m3x2_h2(v & 0xffffu), w[1] = e4m3x2_h2(v >> 16);
}

/* O^T += V^T P^T's A fragments of NWD m-tiles from the keys kr[0..3] (a lane's k columns) at
 * dims d0.. (NWD == 4: 8 dims, 2: 4): a[u] = the pairs (key kr[0], kr[1]) and (kr[2], kr[3]) of
 * dims d0 + 2u and d0 + 2u + 1, from each key's words (e4m3: widened) paired by byte permutes */
template <int RB, int NWD, typename T>
static __device__ __forceinline__ void gqa_v_frags_keys(uint32_t (*a)[4], const uint8_t *vs,
                                                        const int *kr, int d0)
{
    uint32_t vw[4][NWD];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        if constexpr (NWD == 4)
            gqa_lds8<RB>(vw[r], vs, kr[r], d0, T());
        else
            gqa_lds4<RB>(vw[r], vs, kr[r], d0, T());
    }
#pragma unroll
    for (int u = 0; u < NWD; u++) {
        a[u][0] = __byte_perm(vw[0][u], vw[1][u], 0x5410);
        a[u][1] = __byte_perm(vw[0][u], vw[1][u], 0x7632);
        a[u][2] = __byte_perm(vw[2][u], vw[3][u], 0x5410);
        a[u][3] = __byte_perm(vw[2][u], vw[3][u], 0x7632);
    }
}
template <int RB, int NWD>
static __device__ __forceinline__ void gqa_v_frags(uint32_t (*a)[4], const uint8_t *vs,
                                                   const int *kr, int d0, uint16_t)
{
    gqa_v_frags_keys<RB, NWD, uint16_t>(a, vs, kr, d0);
}
/* e4m3: two keys' codes of a dim paired by one byte permute, then widened by one conversion a
 * pair (the same fp16 values as widening each key's pairs first, 8 permutes fewer an NWD 4
 * call); -DGQA_V_PAIR=0 builds the widen-then-permute form */
#ifndef GQA_V_PAIR
#define GQA_V_PAIR 1
#endif
template <int RB, int NWD>
static __device__ __forceinline__ void gqa_v_frags(uint32_t (*a)[4], const uint8_t *vs,
                                                   const int *kr, int d0, uint8_t)
{
#if GQA_V_PAIR
    uint32_t raw[4][2];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        if constexpr (NWD == 4) {
            const uint2 v = *reinterpret_cast<const uint2 *>(vs + gqa_off<RB>(kr[r], d0));
            raw[r][0] = v.x, raw[r][1] = v.y;
        } else {
            raw[r][0] = *reinterpret_cast<const uint32_t *>(vs + gqa_off<RB>(kr[r], d0));
        }
    }
#pragma unroll
    for (int u = 0; u < NWD; u++) {
        /* bytes (dim 2u of the first key, of the second, dim 2u + 1 of the first, the second) */
        const uint32_t sel = (u & 1) ? 0x7362u : 0x5140u;
        const uint32_t lo = __byte_perm(raw[0][u >> 1], raw[1][u >> 1], sel);
        const uint32_t hi = __byte_perm(raw[2][u >> 1], raw[3][u >> 1], sel);
        a[u][0] = e4m3x2_h2(lo & 0xffffu), a[u][1] = e4m3x2_h2(lo >> 16);
        a[u][2] = e4m3x2_h2(hi & 0xffffu), a[u][3] = e4m3x2_h2(hi >> 16);
    }
#else
    gqa_v_frags_keys<RB, NWD, uint8_t>(a, vs, kr, d0);
#endif
}

/* Dynamic shared memory of the GQA kernel: the warps' stages, or the block merge's scratch. */
template <typename T, int HD, int NW> static constexpr size_t gqa_smem()
{
    constexpr size_t st =
        (size_t)NW * gqa_elem<T>::template st<NW>() * 2 * GQA_KEYS * HD * sizeof(T);
    constexpr size_t mg = (size_t)NW * (HD * GQA_COLS + 2 * GQA_COLS) * sizeof(float);
    return st > mg ? st : mg;
}

template <typename T, int HD, int NW>
__global__ void __launch_bounds__(NW * 32, 1)
    attn_gqa_kernel(float *ws, const float *q, const T *k_cache, const T *v_cache,
                    const int32_t *block_table, const int32_t *seq_lens, int n_q_heads,
                    int n_kv_heads, int block_size, int max_blocks_per_seq, int n_parts,
                    float scale2, float v_scale, int new_keys)
{
    using E = gqa_elem<T>;
    constexpr int ST = E::template st<NW>(), RB = HD * (int)sizeof(T), NC = RB / 16,
                  TB = GQA_KEYS * RB;
    constexpr int NJ = HD / 32, NM = HD / 16, VW = HD / 8; /* V: dims a lane owns per key */
    extern __shared__ __align__(16) uint8_t gsm[];
    /* GQA_PRE_WAIT: the lengths and block tables are the pass's inputs and the keys below len -
     * new_keys are older than this pass (the kernel before, attn_prep, stores only this pass's
     * rows' keys), so the first stages of such keys are issued before the PDL wait; q after it */
    if (!GQA_PRE_WAIT)
        kcuda_pdl_enter();
    const int p = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int grp = n_q_heads / n_kv_heads;
    const int len = max(seq_lens[b], 0), n_tiles = CEIL_DIV(len, GQA_KEYS);
    const int c = gqa_part_tiles(n_tiles, n_parts), first = p * c, last = min(first + c, n_tiles);
    if (first >= last)
        return;
    const int32_t *bt = block_table + (int64_t)b * max_blocks_per_seq;
    /* Q^T's B fragments: head g's dims 32j + 8t.. (scaled into the log2 domain), zero past the
     * group */
    uint32_t qf[NJ][4];
    auto load_q = [&]() {
        const float *qh = q + ((int64_t)b * n_q_heads + (int64_t)kvh * grp + g) * HD;
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int u = 0; u < 4; u++)
                qf[j][u] = g < grp ? pack_t<E::F16>(qh[32 * j + 8 * t + 2 * u] * scale2,
                                                    qh[32 * j + 8 * t + 2 * u + 1] * scale2)
                                   : 0u;
    };
    if (!GQA_PRE_WAIT)
        load_q();
    float o[NM][4];
#pragma unroll
    for (int mt = 0; mt < NM; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; /* heads 2t, 2t + 1 */
    uint8_t *const wsm = gsm + (size_t)warp * ST * 2 * TB;
    const int x0 = first + warp, n_mine = x0 < last ? CEIL_DIV(last - x0, NW) : 0;
    /* the block-table entry of key (lane % 16) of the next tile to issue, loaded one issue ahead */
    const int k_first = x0 * GQA_KEYS + (lane & 15);
    int btv = x0 < last && k_first < len ? bt[k_first / block_size] : 0;
    auto issue = [&](int i) {
        const int x = x0 + i * NW, key = x * GQA_KEYS + (lane & 15);
        const int64_t off =
            key < len ? (((int64_t)btv * block_size + key % block_size) * n_kv_heads + kvh) * HD
                      : -1;
        uint8_t *ks = wsm + (i % ST) * 2 * TB, *vs = ks + TB;
#pragma unroll
        for (int cc = lane; cc < GQA_KEYS * NC; cc += 32) {
            const int r = cc / NC, ch = cc % NC;
            const int64_t o_r = __shfl_sync(0xffffffffu, off, r);
            const int d = gqa_off<RB>(r, ch * 16);
            const bool ok = o_r >= 0;
            cpa_16(ks + d,
                   ok ? (const uint8_t *)(k_cache + o_r) + ch * 16 : (const uint8_t *)k_cache,
                   ok ? 16 : 0);
            cpa_16(vs + d,
                   ok ? (const uint8_t *)(v_cache + o_r) + ch * 16 : (const uint8_t *)v_cache,
                   ok ? 16 : 0);
        }
        const int kn = key + NW * GQA_KEYS;
        btv = x + NW < last && kn < len ? bt[kn / block_size] : 0;
    };
    int i0 = 0; /* stages issued before the PDL wait */
    if (GQA_PRE_WAIT) {
        const int old = len - new_keys; /* keys below: not written by the kernel before */
        for (; i0 < ST - 1 && i0 < n_mine; i0++) {
            if ((x0 + i0 * NW + 1) * GQA_KEYS > old) /* warp-uniform */
                break;
            issue(i0);
            cpa_commit();
        }
        kcuda_pdl_enter();
        load_q();
    }
#pragma unroll
    for (int i = 0; i < ST - 1; i++) {
        if (i < i0)
            continue;
        if (i < n_mine)
            issue(i);
        cpa_commit();
    }
    for (int i = 0; i < n_mine; i++) {
        cpa_wait<ST - 2>();
        __syncwarp();
        const uint8_t *ks = wsm + (i % ST) * 2 * TB, *vs = ks + TB;
        const int key0 = (x0 + i * NW) * GQA_KEYS;
        /* S^T: rows keys g, g + 8; columns heads 2t, 2t + 1; two chains of k-steps */
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f}, s2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            uint32_t ka[4], kc[4];
            gqa_lds8<RB>(ka, ks, g, 32 * j + 8 * t, T());
            gqa_lds8<RB>(kc, ks, g + 8, 32 * j + 8 * t, T());
            const uint32_t a0[4] = {ka[0], kc[0], ka[1], kc[1]};
            const uint32_t a1[4] = {ka[2], kc[2], ka[3], kc[3]};
            mma_t<E::F16>(s, a0, qf[j][0], qf[j][1]);
            mma_t<E::F16>(s2, a1, qf[j][2], qf[j][3]);
        }
#pragma unroll
        for (int u = 0; u < 4; u++)
            s[u] += s2[u];
        if (key0 + g >= len)
            s[0] = s[1] = -INFINITY;
        if (key0 + g + 8 >= len)
            s[2] = s[3] = -INFINITY;
        /* online softmax of heads 2t, 2t + 1 over the tile's keys (the tile's first key is
         * within the length: the maxima are finite) */
        float mx0 = fmaxf(s[0], s[2]), mx1 = fmaxf(s[1], s[3]);
#pragma unroll
        for (int x = 4; x < 32; x <<= 1) {
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
        }
        const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
        const float al0 = exp2f(m0 - n0), al1 = exp2f(m1 - n1);
        m0 = n0, m1 = n1;
        const float p0 = exp2f(s[0] - n0), p1 = exp2f(s[1] - n1), p2 = exp2f(s[2] - n0),
                    p3 = exp2f(s[3] - n1);
        l0 = l0 * al0 + p0 + p2;
        l1 = l1 * al1 + p1 + p3;
#pragma unroll
        for (int mt = 0; mt < NM; mt++) {
            o[mt][0] *= al0, o[mt][2] *= al0;
            o[mt][1] *= al1, o[mt][3] *= al1;
        }
        /* P^T as B: keys 2t, 2t + 1 (b0) and 2t + 8, 2t + 9 (b1) of head g */
        const uint32_t b0 = movm_t(pack_t<E::F16>(p0, p1)), b1 = movm_t(pack_t<E::F16>(p2, p3));
        /* O^T += V^T P^T: a lane's V words of the keys 2t, 2t + 1, 2t + 8, 2t + 9 */
        const int kr[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};
#pragma unroll
        for (int e0 = 0; e0 < VW; e0 += (VW >= 8 ? 8 : 4)) {
            constexpr int NWD = VW >= 8 ? 4 : 2; /* words a load: m-tiles e0 / 2 .. */
            uint32_t a[NWD][4];
            gqa_v_frags<RB, NWD>(a, vs, kr, g * VW + e0, T());
#pragma unroll
            for (int u = 0; u < NWD; u++)
                mma_t<E::F16>(o[e0 / 2 + u], a[u], b0, b1);
        }
        __syncwarp(); /* every lane is done with this stage before it is refilled */
        if (i + ST - 1 < n_mine)
            issue(i + ST - 1);
        cpa_commit();
    }
    cpa_wait<0>();
    /* the heads' sums over the keys of all lanes */
#pragma unroll
    for (int x = 4; x < 32; x <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, x);
        l1 += __shfl_xor_sync(0xffffffffu, l1, x);
    }
    __syncthreads(); /* every warp is done with its stages: the merge reuses them */
    float *mo = reinterpret_cast<float *>(gsm) + (size_t)warp * (HD * GQA_COLS + 2 * GQA_COLS);
    float *mm = mo + HD * GQA_COLS, *ml = mm + GQA_COLS;
    if (g == 0) {
        mm[2 * t] = m0, mm[2 * t + 1] = m1;
        ml[2 * t] = l0, ml[2 * t + 1] = l1;
    }
#pragma unroll
    for (int mt = 0; mt < NM; mt++) {
        const int d = g * VW + 2 * mt;
        mo[d * GQA_COLS + 2 * t] = o[mt][0];
        mo[d * GQA_COLS + 2 * t + 1] = o[mt][1];
        mo[(d + 1) * GQA_COLS + 2 * t] = o[mt][2];
        mo[(d + 1) * GQA_COLS + 2 * t + 1] = o[mt][3];
    }
    __syncthreads();
    const float *base = reinterpret_cast<const float *>(gsm);
    constexpr int WST = HD * GQA_COLS + 2 * GQA_COLS;
    for (int i = threadIdx.x; i < grp * (HD + 2); i += NW * 32) {
        const int h = i / (HD + 2), d = i % (HD + 2);
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; w++)
            M = fmaxf(M, base[w * WST + HD * GQA_COLS + h]);
        float v = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; w++) {
            const float mw = base[w * WST + HD * GQA_COLS + h];
            const float f = mw == -INFINITY ? 0.0f : exp2f(mw - M);
            v += f * (d < HD ? base[w * WST + d * GQA_COLS + h]
                             : base[w * WST + HD * GQA_COLS + GQA_COLS + h]);
        }
        float *wp =
            ws + (((int64_t)b * n_q_heads + (int64_t)kvh * grp + h) * n_parts + p) * (HD + 2);
        wp[d] = d < HD ? v * v_scale : d == HD ? M * GQA_LN2 : v;
    }
}

/* the GQA form's dynamic shared memory for these shapes with nw warps (0: not instantiated) */
static size_t gqa_smem_for(int head_dim, int kv_dtype, int nw)
{
#define GQA_SM(T, HD)                                                                              \
    if (head_dim == HD)                                                                            \
        return nw == 4 ? gqa_smem<T, HD, 4>() : nw == 2 ? gqa_smem<T, HD, 2>() : 0;
#define GQA_SM8(HD)                                                                                \
    if (head_dim == HD)                                                                            \
        return nw == 8   ? gqa_smem<uint8_t, HD, 8>()                                              \
               : nw == 4 ? gqa_smem<uint8_t, HD, 4>()                                              \
               : nw == 2 ? gqa_smem<uint8_t, HD, 2>()                                              \
                         : 0;
    if (kv_dtype == KV_DTYPE_BF16) {
        GQA_SM(uint16_t, 32) GQA_SM(uint16_t, 64) GQA_SM(uint16_t, 128) GQA_SM(uint16_t, 256)
    } else {
        GQA_SM8(32) GQA_SM8(64) GQA_SM8(128) GQA_SM8(256)
    }
#undef GQA_SM8
#undef GQA_SM
    return 0;
}

/* warps a GQA block gets on this device: 8 on e4m3 K/V (GQA_E4M3_WARPS), else 4, each where it
 * fits the shared memory, then 2; 0 where the form does not run these shapes */
static int gqa_warps(int n_q_heads, int n_kv_heads, int head_dim, int kv_dtype)
{
    if (n_kv_heads <= 0 || n_q_heads % n_kv_heads || n_q_heads / n_kv_heads > GQA_COLS ||
        !gqa_smem_for(head_dim, kv_dtype, 4))
        return 0;
    const size_t most = (size_t)kcuda_device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
    const int top = kv_dtype == KV_DTYPE_BF16 ? 4 : GQA_E4M3_WARPS;
    for (int nw = top; nw >= 2; nw /= 2)
        if (gqa_smem_for(head_dim, kv_dtype, nw) && gqa_smem_for(head_dim, kv_dtype, nw) <= most)
            return nw;
    return 0;
}

int attn_decode_gqa_ok(int n_q_heads, int n_kv_heads, int head_dim, int kv_dtype)
{
    return gqa_warps(n_q_heads, n_kv_heads, head_dim, kv_dtype) > 0;
}

int attn_decode_path_auto(int n_q_heads, int n_kv_heads, int head_dim, int kv_dtype)
{
    return attn_decode_gqa_ok(n_q_heads, n_kv_heads, head_dim, kv_dtype) ? ATTN_DECODE_PATH_GQA
                                                                         : ATTN_DECODE_PATH_CORES;
}

template <typename T, int HD, int NW>
static cudaError_t gqa_launch(dim3 grid, cudaStream_t stream, float *ws, const float *q,
                              const void *k_cache, const void *v_cache, const int32_t *bt,
                              const int32_t *seq_lens, int n_q_heads, int n_kv_heads,
                              int block_size, int max_blocks_per_seq, int n_parts, float scale2,
                              float v_scale, int new_keys)
{
    constexpr size_t smem = gqa_smem<T, HD, NW>();
    const cudaError_t e = cudaFuncSetAttribute(
        attn_gqa_kernel<T, HD, NW>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return e;
    kcuda_launch_pdl(attn_gqa_kernel<T, HD, NW>, grid, NW * 32, smem, stream, ws, q,
                     (const T *)k_cache, (const T *)v_cache, bt, seq_lens, n_q_heads, n_kv_heads,
                     block_size, max_blocks_per_seq, n_parts, scale2, v_scale, new_keys);
    return cudaSuccess;
}

template <typename T>
static cudaError_t gqa_launch_t(int nw, int head_dim, dim3 grid, cudaStream_t stream, float *ws,
                                const float *q, const void *k_cache, const void *v_cache,
                                const int32_t *bt, const int32_t *seq_lens, int n_q_heads,
                                int n_kv_heads, int block_size, int max_blocks_per_seq, int n_parts,
                                float scale2, float v_scale, int new_keys)
{
#define GQA_GO(HD, NW)                                                                             \
    if (head_dim == HD && nw == NW)                                                                \
        return gqa_launch<T, HD, NW>(grid, stream, ws, q, k_cache, v_cache, bt, seq_lens,          \
                                     n_q_heads, n_kv_heads, block_size, max_blocks_per_seq,        \
                                     n_parts, scale2, v_scale, new_keys);
    if constexpr (sizeof(T) == 1) {
        GQA_GO(32, 8) GQA_GO(64, 8) GQA_GO(128, 8) GQA_GO(256, 8)
    }
    GQA_GO(32, 4)
    GQA_GO(64, 4)
    GQA_GO(128, 4) GQA_GO(256, 4) GQA_GO(32, 2) GQA_GO(64, 2) GQA_GO(128, 2) GQA_GO(256, 2)
#undef GQA_GO
        return cudaErrorInvalidValue;
}

int attn_decode_path_cuda(int path, float *out, float *ws, int new_keys, const float *q,
                          const float *gate, const void *k_cache, const void *v_cache, int kv_dtype,
                          float k_scale, float v_scale, const int32_t *block_table,
                          const int32_t *seq_lens, int n_seq, int n_q_heads, int n_kv_heads,
                          int head_dim, int block_size, int max_blocks_per_seq, int max_seq_len,
                          float scale, cudaStream_t stream)
{
    if (kv_dtype == KV_DTYPE_BF16)
        k_scale = v_scale = 1.0f;
    if (!kv_dtype_bytes(kv_dtype) || !(k_scale > 0.0f) || !(v_scale > 0.0f) || isinf(k_scale) ||
        isinf(v_scale) || path < ATTN_DECODE_PATH_AUTO || path > ATTN_DECODE_PATH_GQA ||
        new_keys < 1)
        return ERR_INVAL;
    if (!out || !ws || !q || !k_cache || !v_cache || !block_table || !seq_lens || n_seq < 0 ||
        n_kv_heads <= 0 || n_q_heads <= 0 || n_q_heads % n_kv_heads || head_dim <= 0 ||
        head_dim % 8 || head_dim > MAXD || block_size <= 0 || max_seq_len <= 0 ||
        max_blocks_per_seq * block_size < max_seq_len || n_seq > 65535 || n_q_heads > 65535 ||
        ((uintptr_t)k_cache) % 16 || ((uintptr_t)v_cache) % 16)
        return ERR_INVAL;
    const int nw =
        path == ATTN_DECODE_PATH_CORES ? 0 : gqa_warps(n_q_heads, n_kv_heads, head_dim, kv_dtype);
    if (path == ATTN_DECODE_PATH_GQA && !nw)
        return ERR_UNSUPPORTED;
    if (n_seq == 0)
        return 0;
    if (nw) {
        /* a range of tiles a block, the grid from the sequences and kv heads; the kernel splits
         * the real lengths over it */
        const int n_parts = attn_decode_gqa_parts(n_seq, n_kv_heads);
        const dim3 g1(n_parts, n_kv_heads, n_seq);
        const float s2 = scale * k_scale * GQA_LOG2E;
        const cudaError_t e =
            kv_dtype == KV_DTYPE_BF16
                ? gqa_launch_t<uint16_t>(nw, head_dim, g1, stream, ws, q, k_cache, v_cache,
                                         block_table, seq_lens, n_q_heads, n_kv_heads, block_size,
                                         max_blocks_per_seq, n_parts, s2, 1.0f, new_keys)
                : gqa_launch_t<uint8_t>(nw, head_dim, g1, stream, ws, q, k_cache, v_cache,
                                        block_table, seq_lens, n_q_heads, n_kv_heads, block_size,
                                        max_blocks_per_seq, n_parts, s2, v_scale, new_keys);
        if (e != cudaSuccess)
            return kcuda_launch_status("attn_decode gqa");
        kcuda_launch_pdl(attn_merge_kernel, dim3(n_q_heads, n_seq), THREADS, 0, stream, out, ws,
                         gate, seq_lens, n_q_heads, head_dim, n_parts, 1);
        return kcuda_launch_status("attn_decode gqa");
    }
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
                     head_dim, n_parts, 0);
    return kcuda_launch_status("attn_decode");
}

int attn_decode_dtype_cuda(float *out, float *ws, const float *q, const float *gate,
                           const void *k_cache, const void *v_cache, int kv_dtype, float k_scale,
                           float v_scale, const int32_t *block_table, const int32_t *seq_lens,
                           int n_seq, int n_q_heads, int n_kv_heads, int head_dim, int block_size,
                           int max_blocks_per_seq, int max_seq_len, float scale,
                           cudaStream_t stream)
{
    return attn_decode_path_cuda(ATTN_DECODE_PATH_AUTO, out, ws, max_seq_len, q, gate, k_cache,
                                 v_cache, kv_dtype, k_scale, v_scale, block_table, seq_lens, n_seq,
                                 n_q_heads, n_kv_heads, head_dim, block_size, max_blocks_per_seq,
                                 max_seq_len, scale, stream);
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
