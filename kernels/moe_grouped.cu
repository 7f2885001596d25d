/* moe_grouped: plan (one block), gate_up GEMM + SiLU*up, down GEMM, combine. The GEMM kernel
 * computes a 64 x 64 output tile per 128-thread block (4 warps as 2 x 2, 32 x 32 each, mma.sync
 * m16n8k16 bf16 with fp32 accumulation) over K in steps of 32: every thread loads two 8-element
 * chunks of A (activations, converted to bf16) and two of B (weights, dequantized to bf16) into
 * padded shared memory, then the warps run the mma steps. The 16-row variant: 16 x 64 per block
 * (4 warps as 1 x 4, 16 x 16 each) over K steps of 128 (two chunks of A and eight of B per
 * thread). A block's rows are one tile of the
 * expert-sorted slot list (all one expert); for gate_up its 64 columns are 32 intermediate
 * indices, interleaved in groups of 8 as gate, up, gate, up so that every thread holds the gate
 * and up value of the same (row, intermediate) in registers for the fused SiLU. */
#include "moe_grouped.h"

#include "common/xalloc.h"
#include "internal/nvfp4_tile.cuh"
#include "internal/kcuda.cuh"
#include "internal/kw_dequant.cuh"
#include "internal/wdot.cuh"

static_assert(MOE_GROUPED_TILE_ROWS == 64 && MOE_GROUPED_TILE_ROWS_SMALL == 16,
              "the warp layouts (NVT_WM_DEFAULT) are for 64- and 16-row tiles");

#define MG_BM_MIN MOE_GROUPED_TILE_ROWS_SMALL /* the scratch's tile list is sized for it */
#define MG_BN 64 /* output columns per tile (gate_up: 32 gate + 32 up) */
#define MG_THREADS 128
static_assert(MG_BN == NVT_BN && MG_THREADS == NVT_THREADS,
              "the pipelined NVFP4 kernel shares the grids of the plain tiles");
#define MG_PLAN_THREADS 1024
#define MG_MAX_EXPERTS 2048
#define MG_MAX_SLOTS (1 << 21) /* keeps the 64-row tiles <= 65535 (grid.y) */
#define MG_MAX_GRID_Y 65535

struct mg_ws {
    int *offsets; /* (E+1) first sorted position of each expert */
    int *perm;    /* (slots) sorted position -> slot t*top_k+j */
    int *pos;     /* (slots) slot -> sorted position, -1 for an empty slot */
    int *tile_e;  /* (max_tiles) expert of a tile, -1 past the last */
    int *tile_r0; /* (max_tiles) first row of a tile, relative to offsets[tile_e] */
    uint16_t *h;  /* (slots, inter) bf16 silu(gate)*up */
    float *ys;    /* (slots, hidden) fp32 down projection per sorted position */
    int max_tiles;
};

/* Same arithmetic as moe_grouped_ws_floats (moe_grouped_ref.c). */
static mg_ws mg_ws_split(float *ws, size_t slots, int n_experts, int inter)
{
    mg_ws s;
    const size_t tiles = (slots + MG_BM_MIN - 1) / MG_BM_MIN + (size_t)n_experts;
    const size_t ints = (size_t)n_experts + 1 + 2 * slots + 2 * tiles;
    const size_t h = (slots * (size_t)inter + 1) / 2;
    int *ip = reinterpret_cast<int *>(ws);
    s.offsets = ip;
    s.perm = s.offsets + n_experts + 1;
    s.pos = s.perm + slots;
    s.tile_e = s.pos + slots;
    s.tile_r0 = s.tile_e + tiles;
    s.h = reinterpret_cast<uint16_t *>(ws + ((ints + 3) & ~(size_t)3));
    s.ys = ws + ((ints + 3) & ~(size_t)3) + ((h + 3) & ~(size_t)3);
    s.max_tiles = (int)tiles;
    return s;
}

/* Inclusive prefix sums of a and b over the lanes of a warp. */
static __device__ __forceinline__ void warp_scan2(int &a, int &b)
{
    const int lane = threadIdx.x & 31;
    for (int o = 1; o < 32; o <<= 1) {
        const int x = __shfl_up_sync(0xffffffffu, a, o), y = __shfl_up_sync(0xffffffffu, b, o);
        if (lane >= o) {
            a += x;
            b += y;
        }
    }
}

/* One block: count slots per expert (shared int atomics), prefix sums (a block scan), scatter,
 * list of bm-row tiles. The order of rows inside one expert depends on atomic order, but no
 * result does: every output row of the GEMMs is computed by the same operations wherever it sits
 * in its tile. */
__global__ void __launch_bounds__(MG_PLAN_THREADS)
    moe_grouped_plan_kernel(mg_ws s, const int32_t *ids, int n_slots, int n_experts, int bm)
{
    extern __shared__ int mg_sm[];
    int *cnt = mg_sm, *cur = mg_sm + n_experts, *toff = mg_sm + 2 * n_experts; /* toff: E+1 */
    for (int e = threadIdx.x; e < n_experts; e += blockDim.x)
        cnt[e] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n_slots; i += blockDim.x) {
        const int e = ids[i];
        if (e >= 0 && e < n_experts)
            atomicAdd(&cnt[e], 1);
    }
    __syncthreads();
    /* exclusive prefix sums of the slot and tile counts over the experts: each thread sums a run
     * of consecutive experts, a warp scan and a scan of the warp totals give its run's bases
     * (the same integers as a serial loop) */
    __shared__ int wc[MG_PLAN_THREADS / 32], wt[MG_PLAN_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int per = (n_experts + blockDim.x - 1) / blockDim.x;
    const int e0 = threadIdx.x * per, e1 = min(e0 + per, n_experts);
    int sc = 0, st = 0;
    for (int e = e0; e < e1; e++) {
        sc += cnt[e];
        st += (cnt[e] + bm - 1) / bm;
    }
    int ic = sc, it = st; /* inclusive over the warp */
    warp_scan2(ic, it);
    if (lane == 31) {
        wc[warp] = ic;
        wt[warp] = it;
    }
    __syncthreads();
    if (warp == 0) {
        const int nw = blockDim.x >> 5;
        const int c0 = lane < nw ? wc[lane] : 0, t0 = lane < nw ? wt[lane] : 0;
        int c = c0, t = t0;
        warp_scan2(c, t);
        if (lane < nw) {
            wc[lane] = c - c0; /* exclusive: the warps before */
            wt[lane] = t - t0;
        }
    }
    __syncthreads();
    int o = wc[warp] + ic - sc, t = wt[warp] + it - st;
    for (int e = e0; e < e1; e++) {
        s.offsets[e] = o;
        cur[e] = o;
        toff[e] = t;
        o += cnt[e];
        t += (cnt[e] + bm - 1) / bm;
    }
    if (e0 < n_experts && e1 == n_experts) {
        s.offsets[n_experts] = o;
        toff[n_experts] = t;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n_slots; i += blockDim.x) {
        const int e = ids[i];
        int p = -1;
        if (e >= 0 && e < n_experts) {
            p = atomicAdd(&cur[e], 1);
            s.perm[p] = i;
        }
        s.pos[i] = p;
    }
    for (int e = threadIdx.x; e < n_experts; e += blockDim.x)
        for (int i = toff[e]; i < toff[e + 1]; i++) {
            s.tile_e[i] = e;
            s.tile_r0[i] = (i - toff[e]) * bm; /* relative to offsets[e] */
        }
    for (int i = toff[n_experts] + threadIdx.x; i < s.max_tiles; i += blockDim.x)
        s.tile_e[i] = -1;
}


/* mma and warp layouts: nvt_mma, NVT_WM_DEFAULT (internal/nvfp4_tile.cuh) */

/* GATE_UP: A = x rows of the tile's slots (fp32 -> bf16), W = gate_up (K = hidden), n_out =
 * inter, writes h (slots, inter) bf16. Else: A = h rows (bf16), W = down (K = inter), n_out =
 * hidden, writes ys (slots, hidden) fp32. BM rows (slots) x MG_BN columns per block, K steps of
 * BK; every thread fetches 8-element chunks: BK/8 threads per tile row, so AP chunks of A and BP
 * of W per K step. grid (column tiles, row tiles): the blocks of one row tile run together and
 * share its activations in L2. The global loads of K step i+1 are issued before the mma steps of
 * K step i (registers), decoded and stored after them. */
template <bool GATE_UP, int BM, int BK>
__global__ void __launch_bounds__(MG_THREADS)
    moe_grouped_gemm_kernel(const kweight w, mg_ws s, const float *x, int top_k, int n_out)
{
    constexpr int WM = NVT_WM_DEFAULT(BM), WN = MG_THREADS / 32 / WM;
    constexpr int MI = BM / WM / 16, NI = MG_BN / WN / 8; /* m16 / n8 tiles per warp */
    constexpr int PITCH = BK + 8; /* bf16 per shared row: conflict-free fragment loads */
    constexpr int TPR = BK / 8, RPP = MG_THREADS / TPR; /* threads per row, rows per pass */
    constexpr int AP = BM / RPP, BP = MG_BN / RPP;
    static_assert(WM * WN == MG_THREADS / 32 && MI >= 1 && NI >= 2 && NI % 2 == 0 && AP >= 1 &&
                      BP >= 1 && AP * RPP == BM && BP * RPP == MG_BN && BK % 16 == 0,
                  "tile shape");
    __shared__ __align__(16) uint16_t As[BM * PITCH];
    __shared__ __align__(16) uint16_t Bs[MG_BN * PITCH];
    const int e = s.tile_e[blockIdx.y];
    if (e < 0)
        return; /* uniform over the block */
    const int r0 = s.offsets[e] + s.tile_r0[blockIdx.y];
    const int nrows = min(BM, s.offsets[e + 1] - r0);
    const int K = w.cols;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, q = lane & 3;
    const int wm = warp / WN, wn = warp % WN;
    const int n0 = blockIdx.x * (GATE_UP ? MG_BN / 2 : MG_BN);
    /* this thread's chunks: tile rows lr + RPP*i, columns lc .. lc+7 of each K step */
    const int lr = tid / TPR, lc = (tid % TPR) * 8;
    const float *xa[AP];
    const uint16_t *ha[AP];
    int wr[BP];
#pragma unroll
    for (int i = 0; i < AP; i++) {
        const int row = lr + RPP * i;
        xa[i] = nullptr;
        ha[i] = nullptr;
        if (row < nrows) {
            if (GATE_UP)
                xa[i] = x + (int64_t)(s.perm[r0 + row] / top_k) * K;
            else
                ha[i] = s.h + (int64_t)(r0 + row) * K;
        }
    }
#pragma unroll
    for (int i = 0; i < BP; i++)
        wr[i] = nvt_wrow<GATE_UP ? NVT_GATE_UP : NVT_DOWN>(lr + RPP * i, n0, n_out);
    float acc[MI][NI][4] = {};

    /* registers of the next K step: A raw (fp32 x: 8 floats as bits; h: 8 bf16 in a0), W raw */
    uint4 a0[AP], a1[AP];
    kwd_wraw b[BP];
    auto fetch = [&](int k0) {
        const int k = k0 + lc;
#pragma unroll
        for (int i = 0; i < AP; i++) {
            a0[i] = a1[i] = make_uint4(0u, 0u, 0u, 0u);
            if (k < K) { /* K % 8 == 0: a chunk is wholly inside or outside */
                if (GATE_UP) {
                    if (xa[i]) {
                        a0[i] = __ldg(reinterpret_cast<const uint4 *>(xa[i] + k));
                        a1[i] = __ldg(reinterpret_cast<const uint4 *>(xa[i] + k + 4));
                    }
                } else if (ha[i]) {
                    a0[i] = *reinterpret_cast<const uint4 *>(ha[i] + k);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < BP; i++) {
            b[i].q = make_uint4(0u, 0u, 0u, 0u);
            b[i].s = 1.0f;
            if (k < K && wr[i] >= 0)
                b[i] = kwd_fetch_w8(w, e, wr[i], k);
        }
    };
    fetch(0);
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = 0; i < AP; i++) {
            uint4 a = a0[i];
            if (GATE_UP)
                a = make_uint4(kwd_pack_bf16(__uint_as_float(a0[i].x), __uint_as_float(a0[i].y)),
                               kwd_pack_bf16(__uint_as_float(a0[i].z), __uint_as_float(a0[i].w)),
                               kwd_pack_bf16(__uint_as_float(a1[i].x), __uint_as_float(a1[i].y)),
                               kwd_pack_bf16(__uint_as_float(a1[i].z), __uint_as_float(a1[i].w)));
            *reinterpret_cast<uint4 *>(&As[(lr + RPP * i) * PITCH + lc]) = a;
        }
#pragma unroll
        for (int i = 0; i < BP; i++)
            *reinterpret_cast<uint4 *>(&Bs[(lr + RPP * i) * PITCH + lc]) =
                kwd_decode_w8(w.fmt, b[i]);
        __syncthreads();
        if (k0 + BK < K)
            fetch(k0 + BK);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t af[MI][4], bf[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                const uint16_t *p = &As[(wm * (BM / WM) + mi * 16 + g) * PITCH + kk + 2 * q];
                af[mi][0] = *reinterpret_cast<const uint32_t *>(p);
                af[mi][1] = *reinterpret_cast<const uint32_t *>(p + 8 * PITCH);
                af[mi][2] = *reinterpret_cast<const uint32_t *>(p + 8);
                af[mi][3] = *reinterpret_cast<const uint32_t *>(p + 8 * PITCH + 8);
            }
#pragma unroll
            for (int ni = 0; ni < NI; ni++) {
                const uint16_t *p = &Bs[(wn * (MG_BN / WN) + ni * 8 + g) * PITCH + kk + 2 * q];
                bf[ni][0] = *reinterpret_cast<const uint32_t *>(p);
                bf[ni][1] = *reinterpret_cast<const uint32_t *>(p + 8);
            }
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int ni = 0; ni < NI; ni++)
                    nvt_mma(acc[mi][ni], af[mi], bf[ni]);
        }
        __syncthreads();
    }

    nvt_store<GATE_UP, BM, MI, NI, WM, WN>(acc, s.h, s.ys, r0, nrows, n0, n_out, wm, wn, g, q);
}

/* K steps per tile shape */
#define MG_BK 32        /* 64-row tiles */
#define MG_BK_SMALL 128 /* 16-row tiles */

/* out[t][h] (+)= sum_j weights[t,j] * ys[pos[t,j]][h], j in order. grid (n_tok, hidden/256). */
__global__ void moe_grouped_combine_kernel(float *out, mg_ws s, const float *weights, int top_k,
                                           int hidden, int accumulate)
{
    const int t = blockIdx.x, h = blockIdx.y * blockDim.x + threadIdx.x;
    if (h >= hidden)
        return;
    float *o = out + (int64_t)t * hidden + h;
    float acc = accumulate ? *o : 0.0f;
    for (int j = 0; j < top_k; j++) {
        const int p = s.pos[t * top_k + j];
        if (p >= 0)
            acc += weights[t * top_k + j] * s.ys[(int64_t)p * hidden + h];
    }
    *o = acc;
}

/* ---- launchers ---- */
/* One GEMM of the pair over the plan's tiles: the pipelined NVFP4 kernel (WM warp rows) where
 * piped and the weight suits it (nvt_ok), else the plain tile kernel. */
template <bool GATE_UP, int BM, int WM>
static void launch_gemm(dim3 grid, const kweight &w, bool piped, const nvt_rows &rg,
                        const mg_ws &s, const float *x, int top_k, int n_out, cudaStream_t stream)
{
    constexpr int MODE = GATE_UP ? NVT_GATE_UP : NVT_DOWN, BK = BM == 16 ? MG_BK_SMALL : MG_BK;
    if (piped && nvt_ok(&w))
        nvfp4_tile_kernel<MODE, BM, WM><<<grid, NVT_THREADS, 0, stream>>>(w, rg, n_out);
    else
        moe_grouped_gemm_kernel<GATE_UP, BM, BK>
            <<<grid, MG_THREADS, 0, stream>>>(w, s, GATE_UP ? x : nullptr, top_k, n_out);
}

int moe_grouped_cuda_tiles(float *out, float *ws, const float *x, const int32_t *ids,
                           const float *weights, int n_tok, int top_k, int n_experts,
                           const struct kweight *gate_up, const struct kweight *down,
                           int accumulate, int tile_rows, cudaStream_t stream)
{
    const bool cols64 =
        tile_rows == (MOE_GROUPED_TILE_ROWS | MOE_GROUPED_PIPE64 | MOE_GROUPED_PIPE64_COLS);
    const bool pipe64 = cols64 || tile_rows == (MOE_GROUPED_TILE_ROWS | MOE_GROUPED_PIPE64);
    if (pipe64)
        tile_rows = MOE_GROUPED_TILE_ROWS;
    int rc = kweight_check_dev(gate_up);
    if (rc == 0)
        rc = kweight_check_dev(down);
    if (rc < 0)
        return rc;
    const int inter = down->cols, hidden = down->rows;
    if (!out || !ws || !x || !ids || !weights || n_tok < 0 || top_k <= 0 || n_experts <= 0 ||
        n_experts > MG_MAX_EXPERTS || gate_up->rows != 2 * inter || gate_up->cols != hidden ||
        hidden % 8 || inter % 8 || gate_up->row_stride % 8 || gate_up->expert_stride % 8 ||
        down->row_stride % 8 || down->expert_stride % 8 || ((uintptr_t)x) % 16 ||
        ((uintptr_t)ws) % 16 || (int64_t)n_tok * top_k > MG_MAX_SLOTS ||
        (tile_rows != MOE_GROUPED_TILE_ROWS && tile_rows != MOE_GROUPED_TILE_ROWS_SMALL))
        return ERR_INVAL;
    if (n_tok == 0)
        return 0;
    const int n_slots = n_tok * top_k;
    const mg_ws s = mg_ws_split(ws, (size_t)n_slots, n_experts, inter);
    /* the row tiles of this shape: at most one partial tile per expert */
    const int64_t tiles = CEIL_DIV((int64_t)n_slots, tile_rows) + n_experts;
    if (tiles > MG_MAX_GRID_Y)
        return ERR_INVAL;
    const size_t plan_smem = sizeof(int) * (3 * (size_t)n_experts + 1);
    moe_grouped_plan_kernel<<<1, MG_PLAN_THREADS, plan_smem, stream>>>(s, ids, n_slots, n_experts,
                                                                       tile_rows);
    const dim3 gu(CEIL_DIV(inter, MG_BN / 2), (unsigned)tiles), dn(CEIL_DIV(hidden, MG_BN), (unsigned)tiles);
    nvt_rows rg; /* the pipelined NVFP4 kernel's view of the plan */
    rg.tile_e = s.tile_e;
    rg.tile_r0 = s.tile_r0;
    rg.offsets = s.offsets;
    rg.perm = s.perm;
    rg.top_k = top_k;
    rg.expert = 0;
    rg.n_rows = 0;
    rg.x = x;
    rg.h = s.h;
    rg.h_out = s.h;
    rg.y = s.ys;
    if (tile_rows == MOE_GROUPED_TILE_ROWS_SMALL) {
        launch_gemm<true, 16, 1>(gu, *gate_up, true, rg, s, x, top_k, inter, stream);
        launch_gemm<false, 16, 1>(dn, *down, true, rg, s, x, top_k, hidden, stream);
    } else if (cols64) {
        launch_gemm<true, 64, 1>(gu, *gate_up, true, rg, s, x, top_k, inter, stream);
        launch_gemm<false, 64, 1>(dn, *down, true, rg, s, x, top_k, hidden, stream);
    } else {
        launch_gemm<true, 64, 2>(gu, *gate_up, pipe64, rg, s, x, top_k, inter, stream);
        launch_gemm<false, 64, 2>(dn, *down, pipe64, rg, s, x, top_k, hidden, stream);
    }
    moe_grouped_combine_kernel<<<dim3(n_tok, CEIL_DIV(hidden, 256)), 256, 0, stream>>>(
        out, s, weights, top_k, hidden, accumulate);
    return kcuda_launch_status("moe_grouped");
}

int moe_grouped_small_pipelined(const struct kweight *w) { return w && nvt_ok(w); }

int moe_grouped_cuda(float *out, float *ws, const float *x, const int32_t *ids,
                     const float *weights, int n_tok, int top_k, int n_experts,
                     const struct kweight *gate_up, const struct kweight *down, int accumulate,
                     cudaStream_t stream)
{
    return moe_grouped_cuda_tiles(out, ws, x, ids, weights, n_tok, top_k, n_experts, gate_up, down,
                                  accumulate, MOE_GROUPED_TILE_ROWS, stream);
}
