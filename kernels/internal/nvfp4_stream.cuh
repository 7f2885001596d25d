/* nvfp4_stream.cuh: the NVFP4 (and FP8) weight-only decode kernel (W4A16 / W8A16, 1..8
 * activation rows), built for memory bandwidth; shared by gemv.cu and moe_expert.cu.
 *
 * Block = 8 warps (16 in the wide form, NVS_WIDE_WARPS, below). A warp owns a 16-row tile; the
 * block's warps form WR row tiles x WK K-splits (WR * WK = 8, WK picked on the host from the work
 * per tile). The K dimension of a tile is a list of items (segment s, 128-column chunk ch); a
 * warp takes NVS_U consecutive items per round (NVS_WIDE_U in the wide form) and
 * issues all their weight loads (per lane: 16 bytes of row g and of row g + 8 per item, plus the
 * scale bytes) before decoding any of them, so 8 x 16 B per lane are in flight.
 * Activations are staged once per block in shared memory as fp16, already permuted into the
 * mma.m16n8k16 B-fragment order: one 16-byte ld.shared per lane per (item, word).
 * Decode and mma as in nvfp4_mma.cuh (e2m1 * 2^-14 * e4m3 block scale, exact in fp16; fp32
 * accumulation). Each item's 16x8 partial is folded into the accumulator times the segment's
 * multiplier (gscale * 2^14, times the routing weight in COMBINE mode).
 * K only needs to be a multiple of 16: the last chunk of a row is partial (lanes past K load
 * nothing, staged activations past K are zero); rows whose byte stride is not 16-byte aligned
 * (or whose scale rows are odd) use two 8-byte loads per 32 codes and byte scale loads
 * (VEC16 = false).
 * Modes:
 *   NVS_PLAIN:   y[tok][r] = W[expert] x[tok], tok < n_tok (<= 8); one segment.
 *   NVS_SLOT:    blockIdx.y = slot, e = ids[slot] (block exits if out of range); activation row
 *                x + (slot / top_k) * ldx; output row y + slot * ldy. One segment. With
 *                expert >= 0 (the folded shared expert, slot top_k - 1 of every token) those
 *                slots' blocks come first and run before the PDL wait (moe_block_slot).
 *   NVS_COMBINE: blockIdx.y = token t; segment s < top_k is slot t*top_k + s with its expert, the
 *                activation silu(x[slot][c]) * x[slot][c + cols] (x rows hold [gate | up]) and
 *                the multiplier weights[slot]; y[t][r] (+)= sum over segments.
 * FP8 = true: e4m3 weights, 2 items per round (32 bytes per row per lane per item), pairs of
 * adjacent columns decoded exactly to fp16 (activations staged in natural order inside each
 * 16-byte unit); tensor scale in the multiplier, block scale per item (a block must hold whole
 * 16 x 128 items), channel scale applied to the finished row (PLAIN and SLOT: one expert a
 * block; COMBINE takes tensor or block scales only). */
#pragma once

#include <limits.h>
#include <string.h>

#include "kcuda.cuh"
#include "kweight.h"
#include "nvfp4_mma.cuh"
#include "pdl.cuh"
#include "wdot.cuh"

#ifndef NVS_WARPS
#define NVS_WARPS 8
#endif
#ifndef NVS_U
#define NVS_U 4 /* items (128-column chunks) in flight per warp */
#endif
/* The wide form: 16 warps a block, 2 items a warp round (the same 32 KB in flight a block), for
 * the nvfp4 PLAIN and COMBINE launches whose 8-warp grid leaves at most one block an SM (the
 * out projections, the down projection of the routed experts at batch 1: 128 blocks of 16 rows).
 * There the issue of one block's decode was the limit (2 warps a scheduler); twice the warps,
 * each with half the items, measured 445 -> 329 us (COMBINE) and 199 -> 160 us (PLAIN) a
 * batch-1 step on the H200, where the grids of several blocks an SM got slower (docs/PERF.md). */
#define NVS_WIDE_WARPS 16
#define NVS_WIDE_U (NVS_U * NVS_WARPS / NVS_WIDE_WARPS)
#define NVS_MAX_TOK 8                /* one mma n-tile */
#define NVS_SB 2                     /* activation float4 groups staged per thread a round */
/* Staged activations up to 8 rows of 4,096 columns (the out projections and the MTP fc at 5-8
 * tokens: 66,064 bytes; 40 KB before, which sent those to nvfp4_mma_kernel at 12.7 us a launch
 * at batch 8 against 4-6 us here): past NVS_DYN_SMEM_DEFAULT a launch opts in with
 * cudaFuncSetAttribute (nvs_optin). Three blocks an SM still fit (3 x 68 KB + the static buffers).
 */
#ifndef NVS_MAX_DYN_SMEM /* -DNVS_MAX_DYN_SMEM=40960: the limit before (measure.sh sess25ab) */
#define NVS_MAX_DYN_SMEM (68 * 1024)
#endif
#define NVS_DYN_SMEM_DEFAULT (40 * 1024) /* with the static buffers (<= 8 KB) under 48 KB */

enum nvs_mode { NVS_PLAIN = 0, NVS_SLOT = 1, NVS_COMBINE = 2 };

struct nvs_args {
    float *y;             // output rows
    int64_t ldy;          // floats between output rows
    const float *x;       // activation rows
    int64_t ldx;          // floats between activation rows
    const int32_t *ids;   // SLOT/COMBINE: (n_slots,) expert ids
    const float *weights; // COMBINE: (n_slots,) routing weights
    int n_tok;            // PLAIN: activation rows (1..8)
    int top_k;            // SLOT: slots per activation row; COMBINE: segments per token
    int n_experts;        // SLOT/COMBINE: valid id range
    int expert;           // PLAIN: expert index; SLOT: the folded shared expert, or -1 (above)
    int wk;               // warps splitting K per row tile (1, 2, 4, 8); set by nvs_launch
    int accumulate;       // COMBINE: add into y
};

/* PLAIN with MULTI: up to NVS_MULTI weights of the same cols on the same activations in one
 * launch (the GDN qkv + z, attention q + k + v): blocks from b[i] on belong to weight i + 1
 * (weight 0 is the kernel's w, output a.y), each output's ldy its weight's rows. */
#define NVS_MULTI 3
/* After the stream blocks, up to NVS_MULTI_WIDE small bf16 weights of the same cols on the same
 * activations, a warp per row (blocks from wb on, NVS_WARPS rows a block; fp32 on the cores as
 * gemv's CUDA-core path, its sums in another order): the GDN b and a beside qkv and z, so the
 * four input projections of a GDN layer are one launch. */
#define NVS_MULTI_WIDE 2
struct nvs_more {
    kweight w[NVS_MULTI - 1];
    float *y[NVS_MULTI - 1];
    int b[NVS_MULTI - 1]; // first block of weight i + 1; INT_MAX past the last weight
    kweight ww[NVS_MULTI_WIDE];
    float *wy[NVS_MULTI_WIDE];
    int we[NVS_MULTI_WIDE]; // their expert indices
    int wb;                 // first block of the warp-per-row weights; INT_MAX: none
    int wn;                 // how many (0..NVS_MULTI_WIDE)
};

/* no further weights (every launch but nvs_launch_multi's) */
static inline nvs_more nvs_more_none(void)
{
    nvs_more m;
    memset(&m, 0, sizeof m);
    m.b[0] = m.b[1] = INT_MAX;
    m.wb = INT_MAX;
    return m;
}

/* A block from more.wb on: its NVS_WARPS rows of the bf16 weights, a warp per row (wdot over
 * the lanes, a warp sum per token; no block barrier). */
static __device__ __forceinline__ void nvs_wide_rows(const nvs_more &m, const nvs_args &a)
{
    kcuda_pdl_enter();
    const int lane = threadIdx.x & 31;
    int r = ((int)blockIdx.x - m.wb) * NVS_WARPS + (int)(threadIdx.x >> 5);
    const bool second = r >= m.ww[0].rows;
    if (second)
        r -= m.ww[0].rows;
    if (second && (m.wn < 2 || r >= m.ww[1].rows))
        return; /* past the last row */
    const kweight &w = second ? m.ww[1] : m.ww[0];
    const int e = second ? m.we[1] : m.we[0];
    float *const y = second ? m.wy[1] : m.wy[0];
    float acc[NVS_MAX_TOK];
#pragma unroll
    for (int t = 0; t < NVS_MAX_TOK; t++)
        acc[t] = 0.0f;
    wdot<NVS_MAX_TOK, 1, KF_BF16>(w, e, r, 1, 1, a.x, a.ldx, a.n_tok, lane, 32, acc);
    const float sc = kw_row_scale(w, e, r);
#pragma unroll
    for (int t = 0; t < NVS_MAX_TOK; t++) {
        const float v = warp_sum(acc[t]);
        if (lane == 0 && t < a.n_tok)
            y[(int64_t)t * w.rows + r] = v * sc;
    }
}

/* Shapes the kernel accepts (the launchers have run kweight_check_dev already). */
static inline bool nvs_ok(const kweight *w)
{
    return w->fmt == KW_FMT_NVFP4 && w->cols % 16 == 0 && w->row_stride % 16 == 0 &&
           w->expert_stride % 16 == 0 && ((uintptr_t)w->data) % 16 == 0 && w->bscale;
}

/* FP8 (e4m3) weights on the same kernel (PLAIN mode only): tensor and channel scales, or 128x128
 * style block scales whose blocks hold whole 16-row tiles and 128-column chunks. */
static inline bool nvs_ok_fp8(const kweight *w)
{
    if (w->fmt != KW_FMT_FP8 || w->cols % 16 || w->row_stride % 16 || w->expert_stride % 16 ||
        ((uintptr_t)w->data) % 16 || !w->scale)
        return false;
    if (w->scale_kind == KW_SCALE_TENSOR || w->scale_kind == KW_SCALE_CHANNEL)
        return true;
    return w->scale_kind == KW_SCALE_BLOCK && w->block_rows > 0 && w->block_rows % 16 == 0 &&
           w->block_cols > 0 && w->block_cols % 128 == 0;
}

/* 16-byte weight loads possible (every row start and every 32-code slab 16-byte aligned) and
 * 2-byte scale pairs aligned. */
static inline bool nvs_vec16(const kweight *w)
{
    return w->cols % 32 == 0 && w->row_stride % 32 == 0 && w->expert_stride % 32 == 0 &&
           w->bscale_stride % 2 == 0 && w->bscale_expert_stride % 2 == 0 &&
           ((uintptr_t)w->bscale) % 2 == 0;
}

/* Staged activation row in halves: whole chunks plus 32 halves so consecutive rows start 64
 * bytes apart modulo 128 (the two rows read by one quarter-warp hit different banks). */
static __host__ __device__ __forceinline__ int nvs_row_halves(int cols)
{
    return (cols + 127) / 128 * 128 + 32;
}

static inline size_t nvs_smem_bytes(int cols, int n_xrows, int n_seg)
{
    return ((size_t)8 * n_seg + 15) / 16 * 16 + (size_t)n_xrows * nvs_row_halves(cols) * 2;
}

static inline bool nvs_fits(int cols, int n_xrows, int n_seg)
{
    return nvs_smem_bytes(cols, n_xrows, n_seg) <= NVS_MAX_DYN_SMEM;
}

/* Expert of segment s of this block (-1: empty slot), read from global memory so the first
 * weight loads can be issued before the activations are staged. */
template <int MODE> static __device__ __forceinline__ int nvs_seg_expert(const nvs_args &a, int s)
{
    if (MODE == NVS_PLAIN)
        return a.expert;
    /* (SLOT's branch is not taken: nvs_kernel reads its block's slot; kept, as this form keeps
     * the 8-warp COMBINE kernel at 12 bytes of spills, the other 16) */
    const int e =
        __ldg(a.ids + (MODE == NVS_SLOT ? (int)blockIdx.y : (int)blockIdx.y * a.top_k + s));
    return e >= 0 && e < a.n_experts ? e : -1;
}

/* Segment of item it (nch chunks a segment): only COMBINE has more than one, so the others skip
 * the division. */
template <int MODE> static __device__ __forceinline__ int nvs_item_seg(int it, int nch)
{
    return MODE == NVS_COMBINE ? it / nch : 0;
}

/* A lane's row pointers, computed once a warp: the weight bytes of row ra at the lane's
 * 32-column slab of chunk 0, and (nvfp4) its block-scale bytes, of expert e (PLAIN and SLOT: the
 * block's; COMBINE: 0, each item adding its segment's expert). Row rb = ra + 8 is 8 row strides
 * further (the stride a kernel parameter, not a register); a row past the weight points at row
 * 0 (never read: va / vb guard every load, and vb implies va). Per item a round then adds the
 * chunk's offset only: the per-item expert lookup and 64-bit row arithmetic (about 60
 * instructions an item, a quarter of the item's issue, in the SLOT kernel's SASS) leave the
 * item loop. */
struct nvs_rowp {
    const uint8_t *wa, *sa;
};

template <bool FP8>
static __device__ __forceinline__ nvs_rowp nvs_rows(const kweight &w, int e, int t, int ra, bool va)
{
    nvs_rowp p;
    const int64_t rowb = FP8 ? w.row_stride : w.row_stride / 2; /* bytes per weight row */
    p.wa = (const uint8_t *)w.data + (int64_t)e * (FP8 ? w.expert_stride : w.expert_stride / 2) +
           (FP8 ? 32 : 16) * t + (int64_t)(va ? ra : 0) * rowb;
    p.sa = FP8 ? NULL
               : w.bscale + (int64_t)e * w.bscale_expert_stride + 2 * t +
                     (int64_t)(va ? ra : 0) * w.bscale_stride;
    return p;
}

/* Issue the loads of NU items g0.. for lane (g, t): 16 bytes (two 8-byte halves unless VEC16)
 * of rows ra and rb per item (rp: nvs_rows) and their two scale bytes each: row ra's in bits
 * 0-15 of sa[u], row rb's in bits 16-31 of it, or (SPLIT) in bits 0-15 of sb[u]. SPLIT and
 * 16-byte loads consume no loaded value here, so the warp goes on to stage its activations
 * while the loads fly (the OR of the two rows' scales waits for the memory: in Nsight Compute's
 * source view of the 8-warp PLAIN launch a fifth of the stall samples before the staging); the
 * 16-warp form takes SPLIT (4 more registers, which the 8-warp form at 80 spills: it measured
 * slower there, docs/PERF.md). Zeros where the item, the row or the 16 columns of a half lie
 * outside the weight. */
template <int MODE, bool VEC16, int NU, bool SPLIT>
static __device__ __forceinline__ void
nvs_load_round(const kweight &w, const nvs_args &a, const nvs_rowp &rp, int g0, int n_items,
               int nch, int t, bool va, bool vb, uint4 *qa, uint4 *qb, uint32_t *sa, uint32_t *sb)
{
    const int K = w.cols;
    const int64_t rb8 = 8 * (w.row_stride / 2), sb8 = 8 * w.bscale_stride; /* row rb = ra + 8 */
#pragma unroll
    for (int u = 0; u < NU; u++) {
        qa[u] = make_uint4(0, 0, 0, 0);
        qb[u] = make_uint4(0, 0, 0, 0);
        sa[u] = sb[u] = 0;
        const int it = g0 + u;
        if (it >= n_items)
            continue;
        const int s = nvs_item_seg<MODE>(it, nch), ch = it - s * nch;
        int64_t off = (int64_t)ch * 64, soff = ch * 8;
        if (MODE == NVS_COMBINE) {
            const int e = nvs_seg_expert<MODE>(a, s);
            if (e < 0)
                continue;
            off += (int64_t)e * (w.expert_stride / 2);
            soff += (int64_t)e * w.bscale_expert_stride;
        }
        const int c0 = ch * 128 + 32 * t;
        const bool h0 = c0 + 16 <= K, h1 = c0 + 32 <= K;
        if (VEC16) { /* K % 32 == 0 here, so h0 == h1 */
            if (va && h1)
                qa[u] = __ldg(reinterpret_cast<const uint4 *>(rp.wa + off));
            if (vb && h1)
                qb[u] = __ldg(reinterpret_cast<const uint4 *>(rp.wa + rb8 + off));
        } else {
            uint2 l = make_uint2(0, 0), h = make_uint2(0, 0);
            if (va && h0)
                l = __ldg(reinterpret_cast<const uint2 *>(rp.wa + off));
            if (va && h1)
                h = __ldg(reinterpret_cast<const uint2 *>(rp.wa + off + 8));
            qa[u] = make_uint4(l.x, l.y, h.x, h.y);
            l = make_uint2(0, 0);
            h = make_uint2(0, 0);
            if (vb && h0)
                l = __ldg(reinterpret_cast<const uint2 *>(rp.wa + rb8 + off));
            if (vb && h1)
                h = __ldg(reinterpret_cast<const uint2 *>(rp.wa + rb8 + off + 8));
            qb[u] = make_uint4(l.x, l.y, h.x, h.y);
        }
        if (VEC16) { /* the two scale bytes of the slab as one aligned 2-byte load per row */
            if (va && h1)
                sa[u] = __ldg(reinterpret_cast<const uint16_t *>(rp.sa + soff));
            if (vb && h1)
                sb[u] = __ldg(reinterpret_cast<const uint16_t *>(rp.sa + sb8 + soff));
            if (!SPLIT)
                sa[u] |= sb[u] << 16;
            continue;
        }
        uint32_t s2 = 0;
        if (va && h0)
            s2 = __ldg(rp.sa + soff);
        if (va && h1)
            s2 |= (uint32_t)__ldg(rp.sa + soff + 1) << 8;
        sa[u] = s2;
        s2 = 0;
        if (vb && h0)
            s2 = __ldg(rp.sa + sb8 + soff);
        if (vb && h1)
            s2 |= (uint32_t)__ldg(rp.sa + sb8 + soff + 1) << 8;
        sb[u] = s2;
        if (!SPLIT)
            sa[u] |= s2 << 16;
    }
}

/* FP8: NU items g0.. per round (NVS_U / 2; 1 in the wide form); item u's 32 codes of row ra / rb
 * (rp: nvs_rows<true>) in qa/qb[2u] (columns c0..c0+15) and [2u+1] (c0+16..c0+31), zeros past K,
 * past the last row or for an empty slot. The item's expert: its segment's (COMBINE), else the
 * block's. */
template <int MODE, int NU>
static __device__ __forceinline__ void
nvs_load_round_fp8(const kweight &w, const nvs_args &a, const nvs_rowp &rp, int g0, int n_items,
                   int nch, int t, bool va, bool vb, uint4 *qa, uint4 *qb)
{
    const int K = w.cols;
    const int64_t rb8 = 8 * w.row_stride; /* row rb = ra + 8 */
#pragma unroll
    for (int u = 0; u < NU; u++) {
        qa[2 * u] = qa[2 * u + 1] = qb[2 * u] = qb[2 * u + 1] = make_uint4(0, 0, 0, 0);
        const int it = g0 + u;
        if (it >= n_items)
            continue;
        const int sg = nvs_item_seg<MODE>(it, nch), ch = it - sg * nch;
        int64_t off = (int64_t)ch * 128;
        if (MODE == NVS_COMBINE) {
            const int e = nvs_seg_expert<MODE>(a, sg);
            if (e < 0)
                continue;
            off += (int64_t)e * w.expert_stride;
        }
        const int c0 = ch * 128 + 32 * t;
        const bool h0 = c0 + 16 <= K, h1 = c0 + 32 <= K;
        if (va && h0)
            qa[2 * u] = __ldg(reinterpret_cast<const uint4 *>(rp.wa + off));
        if (va && h1)
            qa[2 * u + 1] = __ldg(reinterpret_cast<const uint4 *>(rp.wa + off + 16));
        if (vb && h0)
            qb[2 * u] = __ldg(reinterpret_cast<const uint4 *>(rp.wa + rb8 + off));
        if (vb && h1)
            qb[2 * u + 1] = __ldg(reinterpret_cast<const uint4 *>(rp.wa + rb8 + off + 16));
    }
}

/* Two e4m3 codes (low byte = lower column) -> fp16 pair, exact. */
static __device__ __forceinline__ uint32_t nvs_e4m3x2_h2(uint32_t v16)
{
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(v16 & 0xffff), __NV_E4M3);
    return (uint32_t)h.x | ((uint32_t)h.y << 16);
}

/* The B fragments of token g (zeros past the T staged tokens) for item (segment s, chunk ch):
 * [word*4 + j] = (x[8w+j], x[8w+j+4]) as staged. */
static __device__ __forceinline__ void nvs_b_frag(const __half *xs, int s, int T, int g, int rs,
                                                  int ch, int t, uint32_t *B)
{
    if (g < T) {
        const uint4 *xp =
            reinterpret_cast<const uint4 *>(xs + (int64_t)(s * T + g) * rs + ch * 128 + t * 8);
#pragma unroll
        for (int wd = 0; wd < 4; wd++) {
            const uint4 b = xp[wd * 4]; /* unit (wd*4 + t): 16 bytes apart per t */
            B[wd * 4 + 0] = b.x;
            B[wd * 4 + 1] = b.y;
            B[wd * 4 + 2] = b.z;
            B[wd * 4 + 3] = b.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 16; i++)
            B[i] = 0;
    }
}

/* d = the 16x8 product of one 16 x 128 item (eight m16n8k16 steps). */
static __device__ __forceinline__ void nvs_mma_item(const uint32_t A[2][16], const uint32_t *B,
                                                    float *d)
{
#pragma unroll
    for (int st = 0; st < 8; st++) {
        const int wd = st >> 1, j0 = 2 * (st & 1);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(A[0][wd * 4 + j0]), "r"(A[1][wd * 4 + j0]),
                       "r"(A[0][wd * 4 + j0 + 1]), "r"(A[1][wd * 4 + j0 + 1]),
                       "r"(B[wd * 4 + j0]), "r"(B[wd * 4 + j0 + 1]));
    }
}

/* d += the 16x8 product of one NVFP4 16 x 128 item, a word of the lane's 32 codes at a time (sa:
 * row g's scale bytes of half 0, half 1 in bits 0-15, row g+8's in bits 16-31, or with SPLIT in
 * bits 0-15 of sb; e2m1 * 2^-14 * e4m3 exact in fp16): that word's A fragments (rows g and g + 8:
 * 4 pairs each, as nvfp4_a_frag decodes them), its B fragments (one 16-byte ld.shared; token 0's
 * for the lanes past the T staged tokens) and its two
 * m16n8k16 steps, so that 12 fragment registers are live instead of 48; the same products in
 * the same order as nvfp4_a_frag (nvfp4_mma.cuh) + nvs_b_frag + nvs_mma_item, which the FP8
 * path still takes. */
template <bool SPLIT>
static __device__ __forceinline__ void nvs_item_nvfp4(uint4 qa, uint4 qb, uint32_t sa,
                                                      uint32_t sb, const __half *xs, int s, int T,
                                                      int g, int rs, int ch, int t, float *d)
{
    if (!SPLIT)
        sb = sa >> 16;
    const __half2 sca[2] = {nvfp4_e4m3_h2((uint8_t)(sa & 0xff)),
                            nvfp4_e4m3_h2((uint8_t)((sa >> 8) & 0xff))};
    const __half2 scb[2] = {nvfp4_e4m3_h2((uint8_t)(sb & 0xff)),
                            nvfp4_e4m3_h2((uint8_t)((sb >> 8) & 0xff))};
    /* lanes of tokens past T read token 0's fragments: their mma columns are never stored, and
     * an unpredicated ld.shared spares the zeroing of the fragment registers */
    const uint4 *xp = reinterpret_cast<const uint4 *>(xs + (int64_t)(s * T + (g < T ? g : 0)) * rs +
                                                      ch * 128 + t * 8);
#pragma unroll
    for (int wd = 0; wd < 4; wd++) {
        const uint32_t ua = wd == 0 ? qa.x : wd == 1 ? qa.y : wd == 2 ? qa.z : qa.w;
        const uint32_t ub = wd == 0 ? qb.x : wd == 1 ? qb.y : wd == 2 ? qb.z : qb.w;
        uint32_t a0[4], a1[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            a0[j] = nvfp4_h2u(__hmul2(nvfp4_u2h(nvfp4_h2_from_hi(ua << (12 - 4 * j))), sca[wd >> 1]));
            a1[j] = nvfp4_h2u(__hmul2(nvfp4_u2h(nvfp4_h2_from_hi(ub << (12 - 4 * j))), scb[wd >> 1]));
        }
        const uint4 b = xp[wd * 4];
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0[0]), "r"(a1[0]), "r"(a0[1]), "r"(a1[1]), "r"(b.x), "r"(b.y));
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0[2]), "r"(a1[2]), "r"(a0[3]), "r"(a1[3]), "r"(b.z), "r"(b.w));
    }
}

/* Blocks per SM the aligned (VEC16) kernels are built for: 3 (24 warps) needs at most 80
 * registers a thread, which the per-word item (nvs_item_nvfp4) allows without spills on the
 * PLAIN, SLOT and COMBINE paths (8 bytes on MULTI); the unaligned ones stay at 2.
 * -DNVS_MIN_BLOCKS=2 builds the previous occupancy (tests/gpu/measure.sh nvsminb times both). */
#ifndef NVS_MIN_BLOCKS
#define NVS_MIN_BLOCKS 3
#endif

/* W: warps a block (NVS_WARPS, or NVS_WIDE_WARPS for PLAIN / COMBINE without MULTI; fp8 PLAIN) */
template <int MODE, bool VEC16, bool FP8 = false, bool MULTI = false, int W = NVS_WARPS>
static __global__ void __launch_bounds__(W * 32, W != NVS_WARPS ? 1
                                                 : VEC16        ? NVS_MIN_BLOCKS
                                                                : 2)
    nvs_kernel(const kweight w_in, const nvs_args a, const nvs_more more)
{
    static_assert(W == NVS_WARPS || (W == NVS_WIDE_WARPS && !MULTI && (MODE == NVS_PLAIN || !FP8)),
                  "the wide form is PLAIN / COMBINE (fp8: PLAIN)");
    constexpr int UW = NVS_U * NVS_WARPS / W;  /* nvfp4 items a warp round */
    constexpr bool WIDE = W == NVS_WIDE_WARPS; /* the registers for SPLIT scales, early seg loads */
    if (MULTI && (int)blockIdx.x >= more.wb) { /* block-uniform, before any barrier */
        nvs_wide_rows(more, a);
        return;
    }
    /* MULTI: this block's weight, output and block index within that weight (block-uniform) */
    const int wi = !MULTI ? 0 : (int)blockIdx.x < more.b[0] ? 0 : (int)blockIdx.x < more.b[1] ? 1 : 2;
    const kweight w = !MULTI ? w_in : wi == 0 ? w_in : wi == 1 ? more.w[0] : more.w[1];
    const int bx = !MULTI ? (int)blockIdx.x : (int)blockIdx.x - (wi == 0 ? 0 : more.b[wi - 1]);
    float *const y_out = !MULTI || wi == 0 ? a.y : more.y[wi - 1];
    const int64_t ldy = !MULTI ? a.ldy : wi == 0 ? a.ldy : (int64_t)w.rows;
    extern __shared__ __align__(16) unsigned char nvs_smem[];
    __shared__ float red[W][4][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int K = w.cols, nch = (K + 127) / 128, rs = nvs_row_halves(K);
    const int S = MODE == NVS_COMBINE ? a.top_k : 1;
    const int T = MODE == NVS_PLAIN ? a.n_tok : 1;
    float *mult = reinterpret_cast<float *>(nvs_smem);
    int *eseg = reinterpret_cast<int *>(nvs_smem + 4 * S);
    __half *xs = reinterpret_cast<__half *>(nvs_smem + (8 * S + 15) / 16 * 16);

    /* SLOT's expert ids come from the kernel before (the router): it waits for it first, but
     * for the folded shared expert's blocks (a.expert >= 0: slot top_k - 1 of every token is that
     * expert; those blocks first, moe_block_slot), which run before the wait (their activations
     * are the router's input) and wait only to store.
     * COMBINE's come from the kernel two launches back (the router, before the SLOT launch of
     * the same experts), complete once the kernel before has passed its own enter (pdl.cuh), so
     * its first round of weight loads is issued before the wait, as PLAIN's: only the staged
     * activations (the SLOT launch's output) and the routing weights wait. */
    const bool early =
        MODE == NVS_SLOT && a.expert >= 0 && (int)blockIdx.y < (int)gridDim.y / a.top_k;
    const int slot =
        MODE == NVS_SLOT ? moe_block_slot(blockIdx.y, gridDim.y, a.top_k, a.expert >= 0) : 0;
    if (MODE == NVS_SLOT && !early)
        kcuda_pdl_enter();
    int e_blk = MODE == NVS_PLAIN ? a.expert : 0; /* COMBINE: per item, from its segment */
    if (MODE == NVS_SLOT) {
        e_blk = early ? a.expert : a.ids[slot];
        if (e_blk < 0 || e_blk >= a.n_experts)
            return; /* whole block, before any barrier */
    }
    const int wk = a.wk, wr = warp / wk, kw = warp - wr * wk;
    const int m0 = (bx * (W / wk) + wr) * 16;
    const int ra = m0 + g, rb = m0 + g + 8;
    const bool va = ra < w.rows, vb = rb < w.rows;
    const nvs_rowp rp = nvs_rows<FP8>(w, e_blk, t, ra, va);
    const int n_items = S * nch;
    constexpr int NU = FP8 ? UW / 2 : UW; /* items per round */
    uint4 qa[UW], qb[UW];
    uint32_t sa[UW], sb[UW]; /* nvfp4 scale bytes of half 0, half 1: row g's, row g+8's */
    /* the first round's weights in flight while the activations are staged; before this point
     * PLAIN reads nothing another kernel writes, COMBINE only the ids (two launches back) */
    if (FP8)
        nvs_load_round_fp8<MODE, NU>(w, a, rp, kw * NU, n_items, nch, t, va, vb, qa, qb);
    else
        nvs_load_round<MODE, VEC16, NU, WIDE>(w, a, rp, kw * NU, n_items, nch, t, va, vb, qa, qb, sa,
                                              sb);
    if (MODE != NVS_SLOT)
        kcuda_pdl_enter();

    /* thread s < S: segment s's expert and multiplier (the routing weight in COMBINE, the tensor
     * scale), loaded now and (the 16-warp form) stored after the staging below, so that their
     * latency (COMBINE: the id, then the scale of its expert) runs under the staging's rather
     * than before it; the 8-warp form stores them first (its registers are at the 80 of 3 blocks
     * an SM: the values held across the staging spilled and measured slower) */
    const bool has_seg = (int)threadIdx.x < S; /* S <= blockDim.x (nvs_launch) */
    int seg_e = -1;
    float seg_w = 1.0f, seg_g = 1.0f;
    if (has_seg) {
        seg_e = MODE == NVS_SLOT ? e_blk : nvs_seg_expert<MODE>(a, threadIdx.x);
        if (seg_e >= 0 && MODE == NVS_COMBINE)
            seg_w = a.weights[blockIdx.y * S + threadIdx.x];
        if (seg_e >= 0)
            seg_g = FP8 ? (w.scale_kind == KW_SCALE_TENSOR
                               ? w.scale[(int64_t)seg_e * w.scale_expert_stride]
                               : 1.0f)
                        : (w.gscale_e ? w.gscale_e[seg_e] : w.gscale) * 16384.0f;
        if (!WIDE) {
            mult[threadIdx.x] = seg_e >= 0 ? seg_w * seg_g : 0.0f;
            eseg[threadIdx.x] = seg_e;
        }
    }
    /* stage activations: float4 of columns c..c+3 (same lane slab t, word wd, half hi) goes to
     * halves (wd*4 + t)*8 + 2j + hi, j = 0..3, of its chunk: the pair (x[8wd+j], x[8wd+j+4]).
     * The S*T rows' float4 groups are spread over the whole block, NVS_SB per thread a round
     * with every load of the round issued before any store, so the L2 latency is paid once a
     * round rather than once a row (COMBINE stages 9 rows of 512 columns from the SLOT
     * launch's gate|up rows: a row at a time it cost more than its weights, dev/cuda/NOTES.md).
     * COMBINE stages an empty slot's row too (whatever the workspace holds there: the items of
     * a segment without an expert are skipped, so it is never multiplied), so that no load of
     * the staging waits for the slot's expert id. */
    {
        const int n4 = nch * 32; /* float4 groups per staged row */
        const int total = S * T * n4;
        for (int u0 = threadIdx.x; u0 < total; u0 += NVS_SB * (int)blockDim.x) {
            float4 v[NVS_SB];
#pragma unroll
            for (int j = 0; j < NVS_SB; j++) {
                v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                const int u = u0 + j * (int)blockDim.x;
                const int i = u / n4, c = (u - i * n4) * 4;
                if (u >= total || c >= K)
                    continue;
                if (MODE == NVS_PLAIN) {
                    v[j] = __ldg(reinterpret_cast<const float4 *>(a.x + (int64_t)i * a.ldx + c));
                } else if (MODE == NVS_SLOT) {
                    const float *xr = a.x + (int64_t)(slot / a.top_k) * a.ldx;
                    v[j] = __ldg(reinterpret_cast<const float4 *>(xr + c));
                } else {
                    const float *xr = a.x + ((int64_t)blockIdx.y * S + i) * a.ldx;
                    const float4 gt = __ldg(reinterpret_cast<const float4 *>(xr + c));
                    const float4 up = __ldg(reinterpret_cast<const float4 *>(xr + K + c));
                    v[j].x = silu_f32(gt.x) * up.x;
                    v[j].y = silu_f32(gt.y) * up.y;
                    v[j].z = silu_f32(gt.z) * up.z;
                    v[j].w = silu_f32(gt.w) * up.w;
                }
            }
#pragma unroll
            for (int j = 0; j < NVS_SB; j++) {
                const int u = u0 + j * (int)blockDim.x;
                if (u >= total)
                    break;
                const int i = u / n4, c = (u - i * n4) * 4;
                const int ch = c >> 7, cc = c & 127;
                const int tt = cc >> 5, wd = (cc >> 3) & 3, hi = (cc >> 2) & 1;
                /* fp8: natural order inside the unit (pairs of adjacent columns) */
                const int st = FP8 ? 1 : 2, off = FP8 ? 4 * hi : hi;
                __half *p = xs + (int64_t)i * rs + ch * 128 + (wd * 4 + tt) * 8 + off;
                p[0] = __float2half_rn(v[j].x);
                p[st] = __float2half_rn(v[j].y);
                p[2 * st] = __float2half_rn(v[j].z);
                p[3 * st] = __float2half_rn(v[j].w);
            }
        }
    }
    if (WIDE && has_seg) {
        mult[threadIdx.x] = seg_e >= 0 ? seg_w * seg_g : 0.0f;
        eseg[threadIdx.x] = seg_e;
    }
    __syncthreads();

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};

    for (int g0 = kw * NU; g0 < n_items; g0 += wk * NU) {
        if (g0 != kw * NU) {
            if (FP8)
                nvs_load_round_fp8<MODE, NU>(w, a, rp, g0, n_items, nch, t, va, vb, qa, qb);
            else
                nvs_load_round<MODE, VEC16, NU, WIDE>(w, a, rp, g0, n_items, nch, t, va, vb, qa,
                                                      qb, sa, sb);
        }
#pragma unroll
        for (int u = 0; u < NU; u++) {
            const int it = g0 + u; /* warp-uniform */
            if (it >= n_items)
                break;
            const int s = nvs_item_seg<MODE>(it, nch), ch = it - s * nch;
            if (eseg[s] < 0)
                continue;
            float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (!FP8) {
                nvs_item_nvfp4<WIDE>(qa[u], qb[u], sa[u], sb[u], xs, s, T, g, rs, ch, t, d);
            } else {
            uint32_t A[2][16]; /* [row g / g+8][pair index], pair order shared with B */
            {
                /* pair p = columns (2p, 2p+1) of the lane's 32: word p/2 of the two loads */
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const uint4 l = r == 0 ? qa[2 * u] : qb[2 * u];
                    const uint4 h = r == 0 ? qa[2 * u + 1] : qb[2 * u + 1];
                    const uint32_t wv[8] = {l.x, l.y, l.z, l.w, h.x, h.y, h.z, h.w};
#pragma unroll
                    for (int q = 0; q < 8; q++) {
                        A[r][2 * q] = nvs_e4m3x2_h2(wv[q]);
                        A[r][2 * q + 1] = nvs_e4m3x2_h2(wv[q] >> 16);
                    }
                }
            }
            uint32_t B[16];
            nvs_b_frag(xs, s, T, g, rs, ch, t, B);
            nvs_mma_item(A, B, d);
            }
            float m = mult[s];
            if (FP8 && w.scale_kind == KW_SCALE_BLOCK) /* one block holds the 16 x 128 item */
                m *= m0 < w.rows /* an idle tile must not read past the scales */
                         ? __ldg(w.scale + (int64_t)eseg[s] * w.scale_expert_stride +
                                 (int64_t)(m0 / w.block_rows) *
                                     ((K + w.block_cols - 1) / w.block_cols) +
                                 (ch * 128) / w.block_cols)
                         : 0.0f;
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[c] += d[c] * m;
        }
    }
#pragma unroll
    for (int c = 0; c < 4; c++)
        red[warp][c][lane] = acc[c];
    __syncthreads();
    if (early)
        kcuda_pdl_enter(); /* block-uniform: the stores wait for the kernel before */
    if (kw == 0) {
#pragma unroll
        for (int c = 0; c < 4; c++) {
            float v = 0.0f;
            for (int k = 0; k < wk; k++)
                v += red[wr * wk + k][c][lane];
            const int row = (c & 2) ? rb : ra;
            const int tok = 2 * t + (c & 1);
            if (row >= w.rows || tok >= T)
                continue;
            if (FP8 && MODE != NVS_COMBINE && w.scale_kind == KW_SCALE_CHANNEL)
                v *= __ldg(w.scale + (int64_t)eseg[0] * w.scale_expert_stride + row);
            if (MODE == NVS_PLAIN) {
                y_out[(int64_t)tok * ldy + row] = v;
            } else if (MODE == NVS_SLOT) {
                a.y[(int64_t)slot * a.ldy + row] = v;
            } else {
                float *o = a.y + (int64_t)blockIdx.y * a.ldy + row;
                *o = a.accumulate ? *o + v : v;
            }
        }
    }
}

/* WK: split K over as many warps (power of two <= nw) as there are rounds of nu items. */
static inline int nvs_pick_wk(int n_items, int nu, int nw = NVS_WARPS)
{
    const int rounds = (n_items + nu - 1) / nu;
    int wk = 1;
    while (wk < nw && wk * 2 <= rounds)
        wk *= 2;
    return wk;
}

/* SMs of the current device (0 when the runtime cannot tell: the wide form is then not taken) */
static inline int nvs_sm_count(void)
{
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 0;
    return n;
}

/* FP8 launches split K over fewer warps where that puts the grid in one wave of blocks
 * (nvs_one_wave_wk). The one-token FP8 GDN input launch (12,288 + 64 rows at 2,048 columns) is
 * 768 + 8 blocks at wk 8, two waves at 3 blocks an SM; at wk 4, 392 blocks in one, each warp 2
 * rounds. Measured on the H200 (docs/PERF.md, twenty-second session): that launch 12.9 -> 9.7 us
 * back to back, FP8 batch-1 decode 414.3-414.8 -> 434.3-435.1 tok/s, batch 8 105.1 -> 107.8.
 * -DNVS_FP8_WAVE=0 builds the two-wave form (tests/gpu/measure.sh fp8wave). */
#ifndef NVS_FP8_WAVE
#define NVS_FP8_WAVE 1
#endif

/* FP8 PLAIN launches whose 8-warp grid leaves at most one block an SM (the one-token out
 * projections: 2,048 rows at 4,096 columns, 128 blocks) take the 16-warp form as nvfp4's do, one
 * item a warp round (the same bytes in flight a block, twice the warps to decode them); FP8
 * COMBINE (2-8 tokens' experts: 128 row blocks a token) stays in the 8-warp form.
 * -DNVS_FP8_WIDE=0 builds the 8-warp form (tests/gpu/measure.sh fp8wide). */
#ifndef NVS_FP8_WIDE
#define NVS_FP8_WIDE 1
#endif

/* The experts' launches of 2-8 tokens (COMBINE in both formats, fp8 SLOT) in one wave of blocks
 * where a split allows it, else at split 1 (the fewest blocks). A block is one row block of one
 * token (COMBINE) or one (token, slot) (SLOT): at 8 tokens fp8's gate/up was 64 x 72 = 4,608
 * blocks of one round a warp, twelve waves of latency-bound blocks; at split 1 it is 576. H200
 * (docs/PERF.md, twenty-fifth session): FP8 batch 8 862.9 -> 1,297.9 tok/s; NVFP4 COMBINE at 4
 * tokens 22.0 -> 17.5 us a layer. The nvfp4 SLOT launch at 4 tokens got slower at split 1
 * (25.7 -> 27.8 us a layer on the critical path: 288 blocks, four rounds a warp, against 1,152
 * of one round) and keeps nvs_pick_wk's split unless -DNVS_SLOT_WAVE_NVFP4=1.
 * One-token launches are one wave already and keep their splits. -DNVS_EXPERT_WAVE=0 builds the
 * splits of nvs_pick_wk (fp8: nvs_one_wave_wk) for all of them (tests/gpu/measure.sh sess25ab). */
#ifndef NVS_EXPERT_WAVE
#define NVS_EXPERT_WAVE 1
#endif
#ifndef NVS_SLOT_WAVE_NVFP4
#define NVS_SLOT_WAVE_NVFP4 0
#endif

/* The largest split k <= wk (halving) whose grid (rows[i] rows of each of n weights, grid_y a row
 * block, plus `extra` blocks) fits `per_sm` blocks an SM, or `none` when none does (or the SM
 * count is unknown: wk). */
static inline int nvs_wave_wk(int wk, const int *rows, int n, int grid_y, int extra, int per_sm,
                              int none)
{
    const int sms = nvs_sm_count();
    if (sms <= 0)
        return wk;
    for (int k = wk; k >= 1; k /= 2) {
        const int rpb = 16 * (NVS_WARPS / k);
        int64_t blocks = extra;
        for (int i = 0; i < n; i++)
            blocks += (int64_t)(rows[i] + rpb - 1) / rpb * grid_y;
        if (blocks <= (int64_t)per_sm * sms)
            return k;
    }
    return none;
}

/* The largest split k <= wk (halving) whose grid fits NVS_MIN_BLOCKS blocks an SM, or wk when
 * none does (or the SM count is unknown, or NVS_FP8_WAVE is 0). */
static inline int nvs_one_wave_wk(int wk, const int *rows, int n, int grid_y, int extra)
{
    return NVS_FP8_WAVE ? nvs_wave_wk(wk, rows, n, grid_y, extra, NVS_MIN_BLOCKS, wk) : wk;
}

/* Opt the instance `kern` about to be launched in to `smem` bytes of dynamic shared memory where
 * that passes the 48 KB default (a failure stays for the launch's kcuda_launch_status). */
static inline void nvs_optin(const void *kern, size_t smem)
{
    if (smem > NVS_DYN_SMEM_DEFAULT)
        (void)cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

/* Launch over grid (row blocks, grid_y) with n_seg segments and n_xrows staged activation rows,
 * nvfp4 (nvs_ok) or fp8 (nvs_ok_fp8; COMBINE takes tensor or block scales: a channel scale
 * would have to be applied per segment) weights. The nvfp4 PLAIN and COMBINE launches whose
 * 8-warp grid leaves at most one block an SM take the wide form (its 16 x 4 KB reduction buffer
 * in the static 48 KB with the staged activations).
 * 0, ERR_UNSUPPORTED (format, shape or shared memory), ERR_INVAL (grid) or ERR_CUDA. */
template <int MODE>
static inline int nvs_launch(const kweight *w, nvs_args a, int grid_y, int n_seg, int n_xrows,
                             cudaStream_t stream)
{
    const bool fp8 = w->fmt == KW_FMT_FP8;
    if (!(fp8 ? nvs_ok_fp8(w) && !(MODE == NVS_COMBINE && w->scale_kind == KW_SCALE_CHANNEL)
              : nvs_ok(w)) ||
        n_seg <= 0 || n_xrows <= 0 || !nvs_fits(w->cols, n_xrows, n_seg))
        return ERR_UNSUPPORTED;
    if (MODE == NVS_PLAIN && (a.n_tok < 1 || a.n_tok > NVS_MAX_TOK))
        return ERR_UNSUPPORTED;
    if (n_seg > NVS_WARPS * 32) /* a thread per segment (its multiplier) */
        return ERR_UNSUPPORTED;
    if (grid_y <= 0 || grid_y > 65535)
        return ERR_INVAL;
    const int nch = (w->cols + 127) / 128;
    const size_t smem = nvs_smem_bytes(w->cols, n_xrows, n_seg);
    a.wk = nvs_pick_wk(n_seg * nch, fp8 ? NVS_U / 2 : NVS_U);
    const bool experts = MODE != NVS_PLAIN && grid_y > (MODE == NVS_SLOT ? a.top_k : 1) &&
                         (MODE == NVS_COMBINE || fp8 || NVS_SLOT_WAVE_NVFP4);
    if (NVS_EXPERT_WAVE && experts) /* 2-8 tokens' experts */
        a.wk =
            nvs_wave_wk(a.wk, &w->rows, 1, grid_y, 0, fp8 || nvs_vec16(w) ? NVS_MIN_BLOCKS : 2, 1);
    else if (fp8)
        a.wk = nvs_one_wave_wk(a.wk, &w->rows, 1, grid_y, 0);
    const int64_t row_blocks = (w->rows + 16 * (NVS_WARPS / a.wk) - 1) / (16 * (NVS_WARPS / a.wk));
    const bool wide = MODE != NVS_SLOT &&
                      (fp8 ? NVS_FP8_WIDE && MODE == NVS_PLAIN : nvs_vec16(w)) &&
                      row_blocks * grid_y <= nvs_sm_count();
    const int nw = wide ? NVS_WIDE_WARPS : NVS_WARPS;
    constexpr int WIDE_W = MODE == NVS_SLOT ? NVS_WARPS : NVS_WIDE_WARPS; /* SLOT: never wide */
    constexpr int WIDE_W8 = MODE == NVS_PLAIN ? NVS_WIDE_WARPS : NVS_WARPS; /* fp8: PLAIN only */
    if (wide)
        a.wk = nvs_pick_wk(n_seg * nch, fp8 ? NVS_WIDE_U / 2 : NVS_WIDE_U, NVS_WIDE_WARPS);
    const int rows_per_block = 16 * (nw / a.wk);
    const dim3 grid((unsigned)((w->rows + rows_per_block - 1) / rows_per_block), (unsigned)grid_y);
    const dim3 blk(nw * 32);
    const nvs_more none = nvs_more_none();
    if (fp8 && wide) {
        nvs_optin(reinterpret_cast<const void *>(nvs_kernel<MODE, true, true, false, WIDE_W8>),
                  smem);
        kcuda_launch_pdl(nvs_kernel<MODE, true, true, false, WIDE_W8>, grid, blk, smem, stream, *w,
                         a, none);
    } else if (fp8) {
        nvs_optin(reinterpret_cast<const void *>(nvs_kernel<MODE, true, true>), smem);
        kcuda_launch_pdl(nvs_kernel<MODE, true, true>, grid, blk, smem, stream, *w, a, none);
    } else if (!nvs_vec16(w)) {
        nvs_optin(reinterpret_cast<const void *>(nvs_kernel<MODE, false>), smem);
        kcuda_launch_pdl(nvs_kernel<MODE, false>, grid, blk, smem, stream, *w, a, none);
    } else if (wide) {
        nvs_optin(reinterpret_cast<const void *>(nvs_kernel<MODE, true, false, false, WIDE_W>),
                  smem);
        kcuda_launch_pdl(nvs_kernel<MODE, true, false, false, WIDE_W>, grid, blk, smem, stream, *w,
                         a, none);
    } else {
        nvs_optin(reinterpret_cast<const void *>(nvs_kernel<MODE, true>), smem);
        kcuda_launch_pdl(nvs_kernel<MODE, true>, grid, blk, smem, stream, *w, a, none);
    }
    return kcuda_launch_status(fp8 ? "fp8_stream" : "nvfp4_stream");
}

/* PLAIN over n (2..NVS_MULTI) nvfp4 weights of the same cols and load form (nvs_vec16), or n fp8
 * weights (fp8: nvs_ok_fp8, one expert index a.expert), on the same activations, one launch:
 * output i is ys[i] (ldy = ws[i]->rows); then nw (0..NVS_MULTI_WIDE) bf16 weights wws (experts
 * wes, outputs wys, pitch their rows) of the same cols, a warp per row (nvs_wide_rows).
 * ERR_UNSUPPORTED as nvs_launch's, or when the weights differ in cols, format or load form, or a
 * wide one is not bf16. */
static inline int nvs_launch_multi(const kweight *const *ws, float *const *ys, int n,
                                   const kweight *const *wws, float *const *wys, const int *wes,
                                   int nw, nvs_args a, bool fp8, cudaStream_t stream)
{
    if (n < 2 || n > NVS_MULTI || nw < 0 || nw > NVS_MULTI_WIDE)
        return ERR_UNSUPPORTED;
    const bool v16 = fp8 || nvs_vec16(ws[0]);
    for (int i = 0; i < n; i++)
        if (!(fp8 ? nvs_ok_fp8(ws[i]) : nvs_ok(ws[i]) && nvs_vec16(ws[i]) == v16) ||
            ws[i]->cols != ws[0]->cols)
            return ERR_UNSUPPORTED;
    for (int i = 0; i < nw; i++)
        if (wws[i]->fmt != KW_FMT_BF16 || wws[i]->cols != ws[0]->cols || wes[i] < 0)
            return ERR_UNSUPPORTED;
    if (a.n_tok < 1 || a.n_tok > NVS_MAX_TOK || !nvs_fits(ws[0]->cols, a.n_tok, 1))
        return ERR_UNSUPPORTED;
    const int nch = (ws[0]->cols + 127) / 128;
    a.wk = nvs_pick_wk(nch, fp8 ? NVS_U / 2 : NVS_U);
    if (fp8) {
        int rows[NVS_MULTI], wrows = 0;
        for (int i = 0; i < n; i++)
            rows[i] = ws[i]->rows;
        for (int i = 0; i < nw; i++)
            wrows += wws[i]->rows;
        a.wk = nvs_one_wave_wk(a.wk, rows, n, 1, (wrows + NVS_WARPS - 1) / NVS_WARPS);
    }
    const int rows_per_block = 16 * (NVS_WARPS / a.wk);
    nvs_more more = nvs_more_none();
    a.y = ys[0];
    a.ldy = ws[0]->rows;
    int blocks = (ws[0]->rows + rows_per_block - 1) / rows_per_block;
    for (int i = 1; i < n; i++) {
        more.w[i - 1] = *ws[i];
        more.y[i - 1] = ys[i];
        more.b[i - 1] = blocks;
        blocks += (ws[i]->rows + rows_per_block - 1) / rows_per_block;
    }
    if (nw > 0) {
        int wrows = 0;
        for (int i = 0; i < nw; i++) {
            more.ww[i] = *wws[i];
            more.wy[i] = wys[i];
            more.we[i] = wes[i];
            wrows += wws[i]->rows;
        }
        more.wn = nw;
        more.wb = blocks;
        blocks += (wrows + NVS_WARPS - 1) / NVS_WARPS;
    }
    const dim3 grid((unsigned)blocks, 1), blk(NVS_WARPS * 32);
    const size_t smem = nvs_smem_bytes(ws[0]->cols, a.n_tok, 1);
    if (fp8) {
        nvs_optin(reinterpret_cast<const void *>(nvs_kernel<NVS_PLAIN, true, true, true>), smem);
        kcuda_launch_pdl(nvs_kernel<NVS_PLAIN, true, true, true>, grid, blk, smem, stream, *ws[0],
                         a, more);
    } else if (v16) {
        nvs_optin(reinterpret_cast<const void *>(nvs_kernel<NVS_PLAIN, true, false, true>), smem);
        kcuda_launch_pdl(nvs_kernel<NVS_PLAIN, true, false, true>, grid, blk, smem, stream, *ws[0],
                         a, more);
    } else {
        nvs_optin(reinterpret_cast<const void *>(nvs_kernel<NVS_PLAIN, false, false, true>), smem);
        kcuda_launch_pdl(nvs_kernel<NVS_PLAIN, false, false, true>, grid, blk, smem, stream, *ws[0],
                         a, more);
    }
    return kcuda_launch_status("nvfp4_stream_multi");
}
