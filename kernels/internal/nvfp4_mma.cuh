/* nvfp4_mma.cuh: the NVFP4 weight-only tensor-core GEMV/skinny-GEMM kernel, shared by gemv.cu and
 * moe_expert.cu.
 * One block = 16 weight rows; its 8 warps split K in 128-column chunks (next chunk prefetched) and
 * reduce in shared memory. Per chunk, lane (g, t) loads 16 bytes of rows g and g+8 (columns
 * 32t..32t+31 of the chunk), decodes them to fp16 pairs (e2m1 * 2^-14, exact) times the e4m3
 * block scale (exact), and feeds mma.m16n8k16 (fp32 accumulation) 8 times; activations are
 * rounded to fp16. Inside a chunk the k order is permuted (lane t, step s = 2w + h uses columns
 * 32t + 8w + {j, j+4}, j = 2h, 2h+1) identically for weights and activations, so dot products
 * are unchanged. NTILE tiles of 8 tokens share the decoded weights.
 * Slot mode (ids != NULL, MoE): blockIdx.y is a slot, the expert is ids[slot], the single
 * activation row is x + (slot / x_div) * ldx and the output row y + slot * ldy. SWIGLU: the
 * activation is silu(x[c]) * x[c + cols] (x rows hold [gate | up]). */
#pragma once

#include "kcuda.cuh"
#include "kweight.h"

#define NVFP4_MMA_WARPS 8

struct nvfp4_mma_args {
    float *y;           // output rows
    int64_t ldy;        // floats between output rows (tokens or slots)
    const float *x;     // activation rows
    int64_t ldx;        // floats between activation rows
    const int32_t *ids; // slot mode: (n_slots,) expert ids; NULL = plain mode
    int x_div;          // slot mode: activation row = slot / x_div
    int n_tok;          // plain mode: tokens
    int n_experts;      // slot mode: valid id range
    int expert;         // plain mode: expert index
};

static inline bool nvfp4_mma_ok(const kweight *w)
{
    return w->fmt == KW_FMT_NVFP4 && w->cols % 128 == 0 && w->row_stride % 32 == 0 &&
           w->expert_stride % 32 == 0 && w->bscale_stride % 8 == 0 &&
           w->bscale_expert_stride % 8 == 0 && ((uintptr_t)w->bscale) % 8 == 0;
}

static __device__ __forceinline__ uint32_t nvfp4_h2_from_hi(uint32_t h)
{
    /* e2m1 codes in bits 12..15 and 28..31 -> fp16 pair of value * 2^-14 */
    return (h & 0x80008000u) | ((h >> 3) & 0x0e000e00u);
}

static __device__ __forceinline__ __half2 nvfp4_e4m3_h2(uint8_t b)
{
    __half_raw r = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3);
    return __half2half2(__half(r));
}

static __device__ __forceinline__ uint32_t nvfp4_h2u(__half2 v)
{
    return *reinterpret_cast<uint32_t *>(&v);
}

static __device__ __forceinline__ __half2 nvfp4_u2h(uint32_t v)
{
    return *reinterpret_cast<__half2 *>(&v);
}

template <bool SWIGLU>
static __device__ __forceinline__ float4 nvfp4_mma_x4(const float *xr, int c, int cols)
{
    float4 v = __ldg(reinterpret_cast<const float4 *>(xr + c));
    if (SWIGLU) {
        const float4 u = __ldg(reinterpret_cast<const float4 *>(xr + cols + c));
        v.x = silu_f32(v.x) * u.x;
        v.y = silu_f32(v.y) * u.y;
        v.z = silu_f32(v.z) * u.z;
        v.w = silu_f32(v.w) * u.w;
    }
    return v;
}

/* The A fragments of one 16 x 128 item: 32 codes of row g (qa) and of row g + 8 (qb), each word's
 * nibble pairs (8w+j, 8w+j+4) decoded and times the half's e4m3 scale (sca / scb: columns 0-15,
 * 16-31 of the lane's 32), exact in fp16. A[row g / g+8][word*4 + j]. */
static __device__ __forceinline__ void nvfp4_a_frag(uint4 qa, uint4 qb, const __half2 *sca,
                                                    const __half2 *scb, uint32_t A[2][16])
{
#pragma unroll
    for (int wd = 0; wd < 4; wd++) {
        const uint32_t ua = wd == 0 ? qa.x : wd == 1 ? qa.y : wd == 2 ? qa.z : qa.w;
        const uint32_t ub = wd == 0 ? qb.x : wd == 1 ? qb.y : wd == 2 ? qb.z : qb.w;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            A[0][wd * 4 + j] =
                nvfp4_h2u(__hmul2(nvfp4_u2h(nvfp4_h2_from_hi(ua << (12 - 4 * j))), sca[wd >> 1]));
            A[1][wd * 4 + j] =
                nvfp4_h2u(__hmul2(nvfp4_u2h(nvfp4_h2_from_hi(ub << (12 - 4 * j))), scb[wd >> 1]));
        }
    }
}

template <int NTILE, bool SWIGLU>
static __global__ void __launch_bounds__(NVFP4_MMA_WARPS * 32)
    nvfp4_mma_kernel(const kweight w, const nvfp4_mma_args a)
{
    __shared__ float red[NVFP4_MMA_WARPS - 1][NTILE * 4][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.x * 16;
    int e = a.expert, tok0 = blockIdx.y * NTILE * 8, n_tok = a.n_tok;
    const float *xbase = a.x;
    float *ybase = a.y;
    if (a.ids) {
        e = a.ids[blockIdx.y];
        if (e < 0 || e >= a.n_experts)
            return; /* whole block */
        xbase = a.x + (int64_t)(blockIdx.y / a.x_div) * a.ldx;
        ybase = a.y + (int64_t)blockIdx.y * a.ldy;
        tok0 = 0;
        n_tok = 1;
    }
    const int ra = m0 + g, rb = m0 + g + 8;
    const bool va = ra < w.rows, vb = rb < w.rows;
    const uint8_t *base = (const uint8_t *)w.data + (int64_t)e * w.expert_stride / 2;
    const uint8_t *sbase = w.bscale + (int64_t)e * w.bscale_expert_stride;
    const uint4 *pa =
        reinterpret_cast<const uint4 *>(base + (int64_t)(va ? ra : 0) * (w.row_stride / 2));
    const uint4 *pb =
        reinterpret_cast<const uint4 *>(base + (int64_t)(vb ? rb : 0) * (w.row_stride / 2));
    const uint16_t *sa =
        reinterpret_cast<const uint16_t *>(sbase + (int64_t)(va ? ra : 0) * w.bscale_stride);
    const uint16_t *sb =
        reinterpret_cast<const uint16_t *>(sbase + (int64_t)(vb ? rb : 0) * w.bscale_stride);
    const int nchunk = w.cols / 128;
    float acc[NTILE][4];
#pragma unroll
    for (int i = 0; i < NTILE; i++)
        acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;

    const uint4 zero = make_uint4(0, 0, 0, 0);
    int ch = warp;
    uint4 nqa = zero, nqb = zero;
    uint16_t ns2a = 0, ns2b = 0;
    if (ch < nchunk) {
        nqa = va ? __ldg(pa + ch * 4 + t) : zero;
        nqb = vb ? __ldg(pb + ch * 4 + t) : zero;
        ns2a = va ? __ldg(sa + ch * 4 + t) : 0;
        ns2b = vb ? __ldg(sb + ch * 4 + t) : 0;
    }
    for (; ch < nchunk; ch += NVFP4_MMA_WARPS) {
        const uint4 qa = nqa, qb = nqb;
        const uint16_t s2a = ns2a, s2b = ns2b;
        const int nx = ch + NVFP4_MMA_WARPS;
        if (nx < nchunk) { /* prefetch the next chunk while this one is computed */
            nqa = va ? __ldg(pa + nx * 4 + t) : zero;
            nqb = vb ? __ldg(pb + nx * 4 + t) : zero;
            ns2a = va ? __ldg(sa + nx * 4 + t) : 0;
            ns2b = vb ? __ldg(sb + nx * 4 + t) : 0;
        }
        const __half2 sca[2] = {nvfp4_e4m3_h2((uint8_t)(s2a & 0xff)),
                                nvfp4_e4m3_h2((uint8_t)(s2a >> 8))};
        const __half2 scb[2] = {nvfp4_e4m3_h2((uint8_t)(s2b & 0xff)),
                                nvfp4_e4m3_h2((uint8_t)(s2b >> 8))};
        uint32_t A[2][16]; /* [row g / g+8][word*4 + j]: pair (8w+j, 8w+j+4), scaled */
        nvfp4_a_frag(qa, qb, sca, scb, A);
#pragma unroll
        for (int tile = 0; tile < NTILE; tile++) {
            const int tok = tok0 + tile * 8 + g;
            uint32_t B[16]; /* [word*4 + j]: (x[8w+j], x[8w+j+4]) */
            if (tok < n_tok) {
                const float *xr = xbase + (int64_t)tok * a.ldx;
                const int c0 = ch * 128 + 32 * t;
#pragma unroll
                for (int wd = 0; wd < 4; wd++) {
                    const float4 lo = nvfp4_mma_x4<SWIGLU>(xr, c0 + 8 * wd, w.cols);
                    const float4 hi = nvfp4_mma_x4<SWIGLU>(xr, c0 + 8 * wd + 4, w.cols);
                    B[wd * 4 + 0] = nvfp4_h2u(__floats2half2_rn(lo.x, hi.x));
                    B[wd * 4 + 1] = nvfp4_h2u(__floats2half2_rn(lo.y, hi.y));
                    B[wd * 4 + 2] = nvfp4_h2u(__floats2half2_rn(lo.z, hi.z));
                    B[wd * 4 + 3] = nvfp4_h2u(__floats2half2_rn(lo.w, hi.w));
                }
            } else {
#pragma unroll
                for (int i = 0; i < 16; i++)
                    B[i] = 0;
            }
#pragma unroll
            for (int st = 0; st < 8; st++) {
                const int wd = st >> 1, j0 = 2 * (st & 1);
                asm volatile(
                    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                    : "+f"(acc[tile][0]), "+f"(acc[tile][1]), "+f"(acc[tile][2]), "+f"(acc[tile][3])
                    : "r"(A[0][wd * 4 + j0]), "r"(A[1][wd * 4 + j0]), "r"(A[0][wd * 4 + j0 + 1]),
                      "r"(A[1][wd * 4 + j0 + 1]), "r"(B[wd * 4 + j0]), "r"(B[wd * 4 + j0 + 1]));
            }
        }
    }
    if (warp > 0) {
#pragma unroll
        for (int i = 0; i < NTILE; i++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                red[warp - 1][i * 4 + c][lane] = acc[i][c];
    }
    __syncthreads();
    if (warp == 0) {
        const float gs = (w.gscale_e ? w.gscale_e[e] : w.gscale) * 16384.0f;
#pragma unroll
        for (int i = 0; i < NTILE; i++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float v = acc[i][c];
                for (int k = 0; k < NVFP4_MMA_WARPS - 1; k++)
                    v += red[k][i * 4 + c][lane];
                const int row = (c & 2) ? rb : ra;
                const int tok = tok0 + i * 8 + 2 * t + (c & 1);
                if (row < w.rows && tok < n_tok)
                    ybase[(int64_t)tok * a.ldy + row] = v * gs;
            }
    }
}
