/* nvfp4_tile.cuh: the pipelined NVFP4 W4A16 tile GEMM on tensor cores, shared by moe_grouped.cu
 * (the experts' gate_up and down over expert-sorted row tiles) and linear.cu (a dense weight,
 * LINEAR_PATH_TILES). A block computes BM (16 or 64) rows x NVT_BN (64) output columns over K:
 * NST stages of cp.async copies of the raw nvfp4 codes, block scales and activations in shared
 * memory, each thread decoding its mma B fragments from the raw codes. */
#pragma once

#include "cp_async.cuh"
#include "kcuda.cuh"
#include "kw_dequant.cuh"
#include "kweight.h"

#define NVT_BN 64
#define NVT_THREADS 128

enum nvt_mode {
    NVT_GATE_UP, /* A = x rows perm[slot] / top_k (fp32); columns interleaved gate/up in groups of
                    8; writes h_out = silu(gate) * up (bf16, n_out = inter columns) */
    NVT_DOWN,    /* A = h rows (bf16); writes y (fp32) */
    NVT_DENSE    /* A = x rows r0.. (fp32) of a plain weight (expert r.expert); writes y (fp32) */
};

/* where a tile's rows come from and go to */
struct nvt_rows {
    const int *tile_e, *tile_r0, *offsets, *perm; /* expert-sorted tiles (moe_grouped's plan) */
    int top_k;
    int expert, n_rows; /* NVT_DENSE: the weight's expert, rows of x and y */
    const float *x;     /* fp32 A (GATE_UP, DENSE) */
    const uint16_t *h;  /* bf16 A (DOWN) */
    uint16_t *h_out;    /* GATE_UP's output (slots, n_out) */
    float *y;           /* DOWN's or DENSE's output (rows, n_out) */
};

static __device__ __forceinline__ void nvt_mma(float *c, const uint32_t *a, const uint32_t *b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* the warp grid of a BM-row tile over the NVT_BN output columns (4 warps): WM warp rows x
 * 4 / WM warp columns. 16-row tiles: 1 x 4. 64-row tiles: 2 x 2 (the default: each warp 32 rows x
 * 32 columns, both warp rows decoding the same weight columns) or 1 x 4 (each warp 64 rows x 16
 * columns: every weight element decoded once per block, every A fragment loaded by all 4) */
#define NVT_WM_DEFAULT(BM) ((BM) == 16 ? 1 : 2)

/* The tile's outputs from the mma accumulators (also the epilogue of moe_grouped's plain tile
 * kernel): accumulator c of tile (mi, ni) is row wm*(BM/WM) + mi*16 + g + 8*(c/2), column
 * 2q + c%2 of the warp's n8 tile ni. GATE_UP: n8 tiles 2p (gate) and 2p+1 (up) give h_out =
 * silu(gate) * up in bf16 (n_out intermediates); else y in fp32 (n_out columns). Rows r0 .. of
 * the outputs, the first nrows of the tile. */
template <bool GATE_UP, int BM, int MI, int NI, int WM, int WN>
static __device__ __forceinline__ void nvt_store(const float (&acc)[MI][NI][4], uint16_t *h_out,
                                                 float *y, int r0, int nrows, int n0, int n_out,
                                                 int wm, int wn, int g, int q)
{
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int row = wm * (BM / WM) + mi * 16 + g + 8 * (c >> 1);
            if (row >= nrows)
                continue;
            if (GATE_UP) {
#pragma unroll
                for (int p = 0; p < NI / 2; p++) {
                    const int it = n0 + (wn * (NI / 2) + p) * 8 + 2 * q + (c & 1);
                    if (it < n_out)
                        h_out[(int64_t)(r0 + row) * n_out + it] =
                            f32_to_bf16_bits(silu_f32(acc[mi][2 * p][c]) * acc[mi][2 * p + 1][c]);
                }
            } else {
#pragma unroll
                for (int ni = 0; ni < NI; ni++) {
                    const int n = n0 + wn * (NVT_BN / WN) + ni * 8 + 2 * q + (c & 1);
                    if (n < n_out)
                        y[(int64_t)(r0 + row) * n_out + n] = acc[mi][ni][c];
                }
            }
        }
}

/* Same tiles, columns, fused SiLU*up epilogue and decode arithmetic (e4m3 x 2^14 x global scale,
 * then the e2m1 pair, rounded to bf16) as moe_grouped_gemm_kernel<., BM, .>, so the expert
 * results are the same bit for bit (at either warp grid: each output's mma chain over K is the
 * same). 16-row tiles: warps 1 x 4 (each weight element decoded once per block), K steps of 128,
 * 3 (fp32 A) or 4 (bf16 A) stages. 64-row tiles: warps WM x 4/WM (above), K steps of 64, 2 or 3
 * stages. Preconditions (nvt_ok):
 * cols % 64 == 0, 32-element-aligned rows and experts, 4-byte-aligned scale rows; A 16-byte
 * aligned with K-element rows. Stage layout: codes NVT_BN x CPITCH bytes, scales NVT_BN x BK/16
 * bytes, then A: BM rows of fp32 or bf16, padded pitch. */
template <int MODE, int BM> struct nvt_shape {
    static constexpr int BK = BM == 16 ? 128 : 64; /* K per stage */
    static constexpr bool AF32 = MODE != NVT_DOWN; /* A fp32 (x), else bf16 (h) */
    static constexpr int NST = BM == 16 ? (AF32 ? 3 : 4) : (AF32 ? 2 : 3); /* stages */
    static constexpr int CPITCH = BK / 2 + 16; /* code bytes per row: 20 / 12 words, the 8 rows g
                                                  of a fragment on distinct banks */
    static constexpr int SPITCH = BK / 16;     /* scale bytes per row */
    static constexpr int APITCH = AF32 ? (BK + 8) * 4 : (BK + 8) * 2; /* bytes per A row */
    static constexpr int CODES = NVT_BN * CPITCH, SCALES = NVT_BN * SPITCH;
    static constexpr int STAGE = CODES + SCALES + BM * APITCH;
    static constexpr int CCH =
        NVT_BN * (BK / 32) / NVT_THREADS;              /* 16-byte code chunks per thread */
    static constexpr int SCH = NVT_BN * (BK / 64);     /* 4-byte scale chunks (threads) */
    static constexpr int PPR = AF32 ? BK / 4 : BK / 8; /* 16-byte A pieces per row */
    static constexpr int APT = BM * PPR / NVT_THREADS; /* A pieces per thread */
    static_assert(CCH >= 1 && SCH <= NVT_THREADS && APT >= 1 && NST * STAGE <= 48 * 1024,
                  "pipelined tile shape");
};

static inline bool nvt_ok(const kweight *w)
{
    return w->fmt == KW_FMT_NVFP4 && w->cols % 64 == 0 && w->row_stride % 32 == 0 &&
           w->expert_stride % 32 == 0 && ((uintptr_t)w->data) % 16 == 0 &&
           w->bscale_stride % 4 == 0 && w->bscale_expert_stride % 4 == 0 &&
           ((uintptr_t)w->bscale) % 4 == 0;
}

/* the weight row of virtual column row (0..NVT_BN-1) of column tile n0, -1 past n_out */
template <int MODE> static __device__ __forceinline__ int nvt_wrow(int row, int n0, int n_out)
{
    if (MODE == NVT_GATE_UP) {
        const int it = n0 + (row >> 4) * 8 + (row & 7);
        return it < n_out ? (((row >> 3) & 1) ? n_out + it : it) : -1;
    }
    return n0 + row < n_out ? n0 + row : -1;
}

template <int MODE, int BM, int WM = NVT_WM_DEFAULT(BM)>
__global__ void __launch_bounds__(NVT_THREADS)
    nvfp4_tile_kernel(const kweight w, const nvt_rows r, int n_out)
{
    constexpr bool GATE_UP = MODE == NVT_GATE_UP;
    using S = nvt_shape<MODE, BM>;
    constexpr int NST = S::NST, BK = S::BK;
    constexpr int WN = 4 / WM;
    static_assert((WM == 1 || WM == 2) && BM % (16 * WM) == 0, "warp grid");
    constexpr int MI = BM / WM / 16, NI = NVT_BN / WN / 8;
    __shared__ __align__(16) uint8_t sm[NST * S::STAGE];
    int e, r0, nrows;
    if (MODE == NVT_DENSE) {
        e = r.expert;
        r0 = blockIdx.y * BM;
        nrows = min(BM, r.n_rows - r0);
    } else {
        e = r.tile_e[blockIdx.y];
        if (e < 0)
            return; /* uniform over the block */
        r0 = r.offsets[e] + r.tile_r0[blockIdx.y];
        nrows = min(BM, r.offsets[e + 1] - r0);
    }
    const int K = w.cols, nk = (K + BK - 1) / BK;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, q = lane & 3;
    const int wm = warp / WN, wn = warp % WN;
    const int n0 = blockIdx.x * (GATE_UP ? NVT_BN / 2 : NVT_BN);
    const uint8_t *codes = static_cast<const uint8_t *>(w.data);

    /* this thread's copies per stage: code chunks tid + 128 i (row c / (BK/32), 16-byte part),
     * scale chunk tid when tid < SCH (row tid / (BK/64), 4 bytes), A pieces tid + 128 i */
    int64_t wsrc[S::CCH]; /* element offset of the weight row, -1 past n_out */
#pragma unroll
    for (int i = 0; i < S::CCH; i++) {
        const int wr = nvt_wrow<MODE>((tid + NVT_THREADS * i) / (BK / 32), n0, n_out);
        wsrc[i] = wr < 0 ? -1 : (int64_t)e * w.expert_stride + (int64_t)wr * w.row_stride;
    }
    int64_t ssrc = -1; /* scale byte offset of this thread's scale row */
    if (tid < S::SCH) {
        const int wr = nvt_wrow<MODE>(tid / (BK / 64), n0, n_out);
        ssrc = wr < 0 ? -1 : (int64_t)e * w.bscale_expert_stride + (int64_t)wr * w.bscale_stride;
    }
    const void *asrc[S::APT];
#pragma unroll
    for (int i = 0; i < S::APT; i++) {
        const int row = (tid + NVT_THREADS * i) / S::PPR;
        asrc[i] = nullptr;
        if (row < nrows)
            asrc[i] =
                MODE == NVT_GATE_UP
                    ? static_cast<const void *>(r.x + (int64_t)(r.perm[r0 + row] / r.top_k) * K)
                : MODE == NVT_DENSE ? static_cast<const void *>(r.x + (int64_t)(r0 + row) * K)
                                    : static_cast<const void *>(r.h + (int64_t)(r0 + row) * K);
    }
    auto issue = [&](int kt) {
        uint8_t *st = sm + (kt % NST) * S::STAGE;
        const int k0 = kt * BK;
#pragma unroll
        for (int i = 0; i < S::CCH; i++) {
            const int c = tid + NVT_THREADS * i, row = c / (BK / 32), part = c % (BK / 32);
            const int k = k0 + part * 32; /* K % 64 == 0: a piece is wholly in or out */
            const bool in = wsrc[i] >= 0 && k < K;
            cpa_16(st + row * S::CPITCH + part * 16, in ? codes + (wsrc[i] + k) / 2 : codes,
                   in ? 16 : 0);
        }
        if (tid < S::SCH) {
            const int row = tid / (BK / 64), part = tid % (BK / 64);
            const int sb = k0 / 16 + part * 4; /* 4 block scales */
            const bool in = ssrc >= 0 && sb * 16 < K;
            cpa_4(st + S::CODES + row * S::SPITCH + part * 4, in ? w.bscale + ssrc + sb : w.bscale,
                  in ? 4 : 0);
        }
#pragma unroll
        for (int i = 0; i < S::APT; i++) {
            const int c = tid + NVT_THREADS * i, row = c / S::PPR, piece = c % S::PPR;
            const int k = k0 + piece * (S::AF32 ? 4 : 8);
            const bool in = asrc[i] && k < K;
            uint8_t *d = st + S::CODES + S::SCALES + row * S::APITCH + piece * 16;
            if (S::AF32)
                cpa_16(d, in ? static_cast<const float *>(asrc[i]) + k : r.x, in ? 16 : 0);
            else
                cpa_16(d, in ? static_cast<const uint16_t *>(asrc[i]) + k : r.h, in ? 16 : 0);
        }
    };

    const float gs = w.gscale_e ? __ldg(w.gscale_e + e) : w.gscale;
    float acc[MI][NI][4] = {};
#pragma unroll
    for (int i = 0; i < NST - 1; i++) {
        if (i < nk)
            issue(i);
        cpa_commit();
    }
    for (int kt = 0; kt < nk; kt++) {
        cpa_wait<NST - 2>(); /* this thread's copies of stage kt are in */
        __syncthreads();     /* everyone's are, and everyone is done with stage kt - 1 */
        if (kt + NST - 1 < nk)
            issue(kt + NST - 1); /* into the slot of stage kt - 1 */
        cpa_commit();
        const uint8_t *st = sm + (kt % NST) * S::STAGE;
        const uint8_t *sc = st + S::CODES;
        const uint8_t *sa = st + S::CODES + S::SCALES;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t af[MI][4], bf[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                const int ra = wm * (BM / WM) + mi * 16 + g;
                if (S::AF32) {
                    const float *p0 =
                        reinterpret_cast<const float *>(sa + ra * S::APITCH) + kk + 2 * q;
                    const float *p1 =
                        reinterpret_cast<const float *>(sa + (ra + 8) * S::APITCH) + kk + 2 * q;
                    const float2 v0 = *reinterpret_cast<const float2 *>(p0);
                    const float2 v1 = *reinterpret_cast<const float2 *>(p1);
                    const float2 v2 = *reinterpret_cast<const float2 *>(p0 + 8);
                    const float2 v3 = *reinterpret_cast<const float2 *>(p1 + 8);
                    af[mi][0] = kwd_pack_bf16(v0.x, v0.y);
                    af[mi][1] = kwd_pack_bf16(v1.x, v1.y);
                    af[mi][2] = kwd_pack_bf16(v2.x, v2.y);
                    af[mi][3] = kwd_pack_bf16(v3.x, v3.y);
                } else {
                    const uint16_t *p0 =
                        reinterpret_cast<const uint16_t *>(sa + ra * S::APITCH) + kk + 2 * q;
                    const uint16_t *p1 =
                        reinterpret_cast<const uint16_t *>(sa + (ra + 8) * S::APITCH) + kk + 2 * q;
                    af[mi][0] = *reinterpret_cast<const uint32_t *>(p0);
                    af[mi][1] = *reinterpret_cast<const uint32_t *>(p1);
                    af[mi][2] = *reinterpret_cast<const uint32_t *>(p0 + 8);
                    af[mi][3] = *reinterpret_cast<const uint32_t *>(p1 + 8);
                }
            }
#pragma unroll
            for (int ni = 0; ni < NI; ni++) {
                const int n = wn * (NVT_BN / WN) + ni * 8 + g;
                const uint8_t *cr = st + n * S::CPITCH + kk / 2;
                /* bytes q (elements 2q, 2q+1) and q + 4 (2q+8, 2q+9) of this 16-element block */
                const uint32_t wv = (uint32_t)cr[q] | ((uint32_t)cr[q + 4] << 16);
                const float sf = e4m3_to_f32(sc[n * S::SPITCH + kk / 16]) * 16384.0f * gs;
                const float2 lo = e2m1x2_hi_to_f32_scaled(wv << 12); /* elements 2q, 2q+8 */
                const float2 hi = e2m1x2_hi_to_f32_scaled(wv << 8);  /* 2q+1, 2q+9 */
                bf[ni][0] = kwd_pack_bf16(lo.x * sf, hi.x * sf);
                bf[ni][1] = kwd_pack_bf16(lo.y * sf, hi.y * sf);
            }
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int ni = 0; ni < NI; ni++)
                    nvt_mma(acc[mi][ni], af[mi], bf[ni]);
        }
    }
    cpa_wait<0>(); /* no copy outlives the block (the last groups are empty) */

    nvt_store<GATE_UP, BM, MI, NI, WM, WN>(acc, r.h_out, r.y, r0, nrows, n0, n_out, wm, wn, g, q);
}
