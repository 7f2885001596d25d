/* moe_expert: nvfp4 at 1..8 tokens (fp8 at 2..8): two launches of the stream kernel
 * (internal/nvfp4_stream.cuh), gate/up of all slots, then down of all slots with the weighted
 * combine. Otherwise two launches.
 * Stage 1: grid (row groups of inter, n_tok*top_k slots), each row group computes the gate and up
 * dots of one intermediate row. Stage 2: up to MOE_SLOTS_MAX_TOK tokens, a block per (rows of
 * hidden, token) with a warp per slot, the weighted rows summed over the slots in shared memory;
 * beyond, grid (row groups of hidden, n_tok), each row group sums the weighted down-projection
 * dots of the token's top_k experts (deterministic, no atomics).
 * Weight dots are the gemv ones (internal/wdot.cuh). nvfp4 weights take the tensor-core path
 * instead (internal/nvfp4_mma.cuh): gate/up GEMV per slot, down GEMV on silu(gate)*up per slot
 * (computed while loading), then a weighted combine over the slots. */
#include "moe_expert.h"

#include "common/xalloc.h"
#include "gemv.h"
#include "internal/kcuda.cuh"
#include "internal/nvfp4_mma.cuh"
#include "internal/nvfp4_stream.cuh"
#include "internal/pdl.cuh"
#include "internal/wdot.cuh"
#include "internal/wrows.cuh"

#define MOE_TENSOR_MAX_TOK 2 /* GEMV_PATH_AUTO takes the tensor path up to this many tokens */
#define MOE_STREAM_MAX_TOK 8 /* ... and the stream path (before the tensor one) up to this many */
/* FP8 experts on the stream kernel's SLOT / COMBINE modes under GEMV_PATH_AUTO: measured on the
 * H200 against the CUDA-core kernels (docs/PERF.md, fourteenth session): one token's experts
 * 29.9 -> 25.4 us in bench_kernels, FP8 batch-1 decode 320.8 -> 338.3 tok/s, batch 8 the same
 * (100.8 / 100.6 tok/s a stream). -DMOE_STREAM_FP8_AUTO=0 builds the cores form
 * (tests/gpu/measure.sh fp8moe's A/B). */
#ifndef MOE_STREAM_FP8_AUTO
#define MOE_STREAM_FP8_AUTO 1
#endif
/* ... from this many tokens: one token's FP8 experts on the CUDA-core kernels with the slots form
 * of the down stage, measured faster (seventeenth session, docs/PERF.md: bench_kernels rows 21.8
 * us against the stream kernel's 25.2; FP8 batch-1 decode 345.5 -> 361.2 tok/s with the slots
 * form). -DMOE_STREAM_FP8_MIN_TOK=1: the stream kernel at one token too (the A/B build) */
#ifndef MOE_STREAM_FP8_MIN_TOK
#define MOE_STREAM_FP8_MIN_TOK 2
#endif
#define MOE_DOWN_ROWS 4      /* down rows per lane group: each expert activation chunk used 4x */
/* The CUDA-core down stage with a token's slots in parallel (a warp a slot, the slots' weighted
 * rows summed in shared memory) up to this many tokens and slots; beyond, one lane group loops
 * over the slots (enough blocks come from the tokens). The looping form gave one token's bf16
 * down 2048 / 32 = 64 blocks, each reading its 9 experts' rows one after another: 17 us a layer,
 * 26% of the copy bandwidth (docs/PERF.md, BF16 profile). */
#ifndef MOE_SLOTS_MAX_TOK /* -DMOE_SLOTS_MAX_TOK=0: the looping form only (an A/B build) */
#define MOE_SLOTS_MAX_TOK 8
#endif
/* slots a block at most: 288 threads, the bf16 instance bound to 4 blocks an SM (56 registers) */
#define MOE_SLOTS_MAX_K 9
#define MOE_DOWN_PF 2 /* chunks a lane of the slots form loads before its PDL wait (bf16, fp8) */
/* Lanes a row of the fp8 slots form at most (0: kw_lanes_per_row's 32 at the model's 512
 * columns). 16: a lane's two chunks of each of its 4 rows (128 bytes) load before the PDL wait
 * (MOE_DOWN_PF), 8 rows a block, so one token's 2,048 rows are 256 blocks, one wave at the
 * form's 2 blocks an SM (92 registers); 32 lanes gave 512 blocks in two waves with 64 bytes a
 * lane. H200, FP8 batch-1 decode at 2,048: 398.0 / 398.9 -> 419.1 / 418.2 tok/s (docs/PERF.md,
 * twenty-first session). -DMOE_DOWN_FP8_LPR=0 builds the form before (A/B). */
#ifndef MOE_DOWN_FP8_LPR
#define MOE_DOWN_FP8_LPR 16
#endif

/* sh_e >= 0: slot top_k - 1 of every token is expert sh_e (the folded shared expert; the caller
 * guarantees ids say so): its blocks come first (moe_block_slot) and compute before the PDL wait,
 * from x, which the kernel right before (the router) does not write; they wait only to store. */
template <int KF>
__global__ void __launch_bounds__(256)
    moe_gate_up_kernel(float *hbuf, kweight gu, const float *x, const int32_t *ids, int top_k,
                       int n_experts, int inter, int lpr, int sh_e)
{
    const bool early = sh_e >= 0 && (int)blockIdx.y < (int)gridDim.y / top_k; /* block-uniform */
    if (!early)
        kcuda_pdl_enter();
    const int slot = moe_block_slot(blockIdx.y, gridDim.y, top_k, sh_e >= 0);
    const int t = slot / top_k;
    const int e = early ? sh_e : ids[slot];
    const int r = blockIdx.x * (blockDim.x / lpr) + threadIdx.x / lpr;
    const int sub = threadIdx.x % lpr;
    if (e < 0 || e >= n_experts)
        return; /* uniform over the block; never an early one (the launcher checks sh_e) */
    const bool valid = r < inter;
    float acc[2] = {0.0f, 0.0f}; /* gate row r and up row r + inter share the activations */
    if (valid)
        wdot<1, 2, KF>(gu, e, r, inter, 2, x + (int64_t)t * gu.cols, 0, 1, sub, lpr, acc);
    float g = group_sum(acc[0], lpr), u = group_sum(acc[1], lpr);
    if (early)
        kcuda_pdl_enter(); /* the router and the down launch before it done: hbuf is free */
    if (valid && sub == 0) {
        g *= kw_row_scale(gu, e, r);
        u *= kw_row_scale(gu, e, r + inter);
        hbuf[(int64_t)slot * inter + r] = silu_f32(g) * u;
    }
}

template <int KF>
__global__ void __launch_bounds__(256, 2)
    moe_down_kernel(float *out, kweight dn, const float *hbuf, const int32_t *ids,
                    const float *weights, int top_k, int n_experts, int accumulate, int lpr)
{
    kcuda_pdl_enter();
    const int t = blockIdx.y;
    const int r0 = (blockIdx.x * (blockDim.x / lpr) + threadIdx.x / lpr) * MOE_DOWN_ROWS;
    const int sub = threadIdx.x % lpr;
    const int nr = min(MOE_DOWN_ROWS, dn.rows - r0);
    float acc[MOE_DOWN_ROWS] = {};
    for (int j = 0; j < top_k; j++) {
        const int slot = t * top_k + j;
        const int e = ids[slot];
        if (e < 0 || e >= n_experts || nr <= 0)
            continue;
        float p[MOE_DOWN_ROWS] = {};
        wdot<1, MOE_DOWN_ROWS, KF>(dn, e, r0, 1, nr, hbuf + (int64_t)slot * dn.cols, 0, 1, sub, lpr,
                                   p);
        const float wt = weights[slot];
#pragma unroll
        for (int i = 0; i < MOE_DOWN_ROWS; i++)
            if (i < nr)
                acc[i] += p[i] * (wt * kw_row_scale(dn, e, r0 + i));
    }
#pragma unroll
    for (int i = 0; i < MOE_DOWN_ROWS; i++) {
        const float v = group_sum(acc[i], lpr);
        if (sub == 0 && i < nr) {
            float *o = out + (int64_t)t * dn.rows + r0 + i;
            *o = accumulate ? *o + v : v;
        }
    }
}

/* grid (row blocks of hidden, n_tok), 32 * top_k threads: warp j computes slot j's rows
 * [blockIdx.x * rb, + rb) of the down projection on its expert (lane groups of lpr lanes,
 * MOE_DOWN_ROWS rows each, rb = 32 / lpr * MOE_DOWN_ROWS), times the routing weight and the row
 * scale, into shared memory; then the block sums each row over the slots in slot order (no
 * atomics: the same result whatever the schedule). An empty slot (id outside the stacks)
 * contributes 0 and reads no weights. */
template <int KF>
__global__ void __launch_bounds__(MOE_SLOTS_MAX_K * 32, KF == KF_BF16 ? 4 : 1)
    moe_down_slots_kernel(float *out, kweight dn, const float *hbuf, const int32_t *ids,
                          const float *weights, int top_k, int n_experts, int accumulate, int lpr)
{
    /* bf16 / fp8: a lane's first MOE_DOWN_PF chunks of its rows (all of them at the model's
     * 512 columns) loaded before the PDL wait */
    constexpr bool PRE = KF == KF_BF16 || KF == KF_FP8;
    constexpr int CE = KF == KF_BF16 ? 8 : 16; /* elements a 16-byte chunk */
    constexpr int KC = PRE ? KF : KF_BF16;     /* the chunk arithmetic's format (PRE only) */
    extern __shared__ float part[];            /* [top_k][rb] */
    const int t = blockIdx.y, j = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const int rb = 32 / lpr * MOE_DOWN_ROWS;
    const int lr = lane / lpr * MOE_DOWN_ROWS, sub = lane % lpr;
    const int r0 = blockIdx.x * rb + lr;
    const int nr = min(MOE_DOWN_ROWS, dn.rows - r0);
    const int slot = t * top_k + j;
    /* the slot's expert was written by the router two launches back, before the gate/up launch
     * whose every block passes its PDL enter first: readable before this kernel's enter
     * (internal/pdl.cuh), like the weights; only the gate/up rows and the routing weights wait */
    const int e = ids[slot];
    const bool on = e >= 0 && e < n_experts; /* warp-uniform */
    const int nch = dn.cols / CE;
    uint4 pq[MOE_DOWN_PF][MOE_DOWN_ROWS];
    float ps[MOE_DOWN_PF][MOE_DOWN_ROWS];
    if (PRE && on && nr > 0) {
        const uint8_t *base = (const uint8_t *)dn.data + (int64_t)e * dn.expert_stride * (16 / CE);
        const bool blk = KF == KF_FP8 && dn.scale_kind == KW_SCALE_BLOCK;
        const int nbc = blk ? (dn.cols + dn.block_cols - 1) / dn.block_cols : 0;
        const float *bsc = blk ? dn.scale + (int64_t)e * dn.scale_expert_stride : nullptr;
#pragma unroll
        for (int k = 0; k < MOE_DOWN_PF; k++) {
            const int c = sub + k * lpr;
#pragma unroll
            for (int i = 0; i < MOE_DOWN_ROWS; i++) {
                const int r = r0 + i;
                const bool ld = i < nr && c < nch;
                pq[k][i] = ld ? __ldg(reinterpret_cast<const uint4 *>(
                                          base + (int64_t)r * dn.row_stride * (16 / CE)) +
                                      c)
                              : make_uint4(0u, 0u, 0u, 0u);
                ps[k][i] =
                    ld && blk
                        ? __ldg(bsc + (int64_t)(r / dn.block_rows) * nbc + (c * 16) / dn.block_cols)
                        : 1.0f;
            }
        }
    }
    kcuda_pdl_enter();
    const float *xs = hbuf + (int64_t)slot * dn.cols;
    float p[MOE_DOWN_ROWS] = {};
    if (PRE && on && nr > 0) {
        /* the prefetched chunks, in wdot's order and arithmetic; wdot takes the rest */
#pragma unroll
        for (int k = 0; k < MOE_DOWN_PF; k++) {
            const int c = sub + k * lpr;
            if (c < nch) {
#pragma unroll
                for (int i = 0; i < MOE_DOWN_ROWS; i++)
                    if (i < nr) {
                        const float q =
                            wr_chunk<KC>(pq[k][i], reinterpret_cast<const float4 *>(xs + c * CE));
                        p[i] += KF == KF_FP8 ? q * ps[k][i] : q;
                    }
            }
        }
    }
    if (on && nr > 0)
        wdot<1, MOE_DOWN_ROWS, KF>(dn, e, r0, 1, nr, xs, 0, 1, PRE ? sub + MOE_DOWN_PF * lpr : sub,
                                   lpr, p);
    const float wt = on ? weights[slot] : 0.0f;
#pragma unroll
    for (int i = 0; i < MOE_DOWN_ROWS; i++) {
        const float v = group_sum(p[i], lpr);
        if (sub == 0)
            part[j * rb + lr + i] = on && i < nr ? v * (wt * kw_row_scale(dn, e, r0 + i)) : 0.0f;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < rb; i += blockDim.x) {
        const int r = blockIdx.x * rb + i;
        if (r >= dn.rows)
            continue;
        float acc = 0.0f;
        for (int s = 0; s < top_k; s++)
            acc += part[s * rb + i];
        float *o = out + (int64_t)t * dn.rows + r;
        *o = accumulate ? *o + acc : acc;
    }
}

__global__ void moe_combine_kernel(float *out, const float *ys, const int32_t *ids,
                                   const float *weights, int top_k, int n_experts, int hidden,
                                   int accumulate)
{
    kcuda_pdl_enter();
    const int t = blockIdx.y, h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= hidden)
        return;
    float *o = out + (int64_t)t * hidden + h;
    float acc = accumulate ? *o : 0.0f;
    for (int j = 0; j < top_k; j++) {
        const int slot = t * top_k + j;
        const int e = ids[slot];
        if (e >= 0 && e < n_experts)
            acc += weights[slot] * ys[(int64_t)slot * hidden + h];
    }
    *o = acc;
}

int moe_expert_sh_cuda(float *out, float *ws, const float *x, const int32_t *ids,
                       const float *weights, int n_tok, int top_k, int n_experts,
                       const struct kweight *gate_up, const struct kweight *down, int accumulate,
                       int sh_expert, int path, cudaStream_t stream)
{
    float *hbuf = ws;
    int rc = kweight_check_dev(gate_up);
    if (rc == 0)
        rc = kweight_check_dev(down);
    if (rc < 0)
        return rc;
    const int inter = down->cols, hidden = down->rows;
    if (!out || !hbuf || !x || !ids || !weights || n_tok < 0 || top_k <= 0 || n_experts <= 0 ||
        gate_up->rows != 2 * inter || gate_up->cols != hidden || ((uintptr_t)x) % 16 ||
        ((uintptr_t)hbuf) % 16 || sh_expert < -1 || sh_expert >= n_experts ||
        (sh_expert >= 0 && top_k < 2))
        return ERR_INVAL;
    const bool mma_ok = nvfp4_mma_ok(gate_up) && nvfp4_mma_ok(down);
    if (path == GEMV_PATH_TENSOR && !mma_ok)
        return ERR_UNSUPPORTED;
    if (path < GEMV_PATH_AUTO || path > GEMV_PATH_STREAM)
        return ERR_INVAL;
    /* nvfp4, or fp8 (COMBINE: tensor or block scales on down) */
    const bool fp8 = gate_up->fmt == KW_FMT_FP8 && down->fmt == KW_FMT_FP8;
    const bool stream_ok =
        (fp8 ? nvs_ok_fp8(gate_up) && nvs_ok_fp8(down) && down->scale_kind != KW_SCALE_CHANNEL
             : nvs_ok(gate_up) && nvs_ok(down)) &&
        nvs_fits(hidden, 1, 1) && nvs_fits(inter, top_k, top_k);
    if (path == GEMV_PATH_STREAM && !stream_ok)
        return ERR_UNSUPPORTED;
    if (n_tok == 0)
        return 0;
    if (path == GEMV_PATH_STREAM ||
        (path == GEMV_PATH_AUTO && stream_ok &&
         (!fp8 || (MOE_STREAM_FP8_AUTO && n_tok >= MOE_STREAM_FP8_MIN_TOK)) &&
         n_tok <= MOE_STREAM_MAX_TOK)) {
        /* launch 1: gate|up rows of every slot's expert into ws (n_slots, 2*inter); launch 2: the
         * down rows of all top_k slots of a token in one block, SwiGLU while staging, weighted sum.
         * Launch 2 reads ids and issues its first weight loads before its PDL wait: ids were
         * written before launch 1, which every block of it waits for (internal/pdl.cuh). */
        if ((int64_t)n_tok * top_k > 65535)
            return ERR_INVAL;
        /* SLOT's expert field: the folded shared expert computed before the wait, or -1 */
        const struct nvs_args a1 = {ws,    2 * (int64_t)inter, x,         hidden, ids, weights, 1,
                                    top_k, n_experts,          sh_expert, 1,      0};
        rc = nvs_launch<NVS_SLOT>(gate_up, a1, n_tok * top_k, 1, 1, stream);
        if (rc < 0)
            return rc;
        const struct nvs_args a2 = {out,       hidden,  ws, 2 * (int64_t)inter,
                                    ids,       weights, 1,  top_k,
                                    n_experts, 0,       1,  accumulate};
        return nvs_launch<NVS_COMBINE>(down, a2, n_tok, top_k, top_k, stream);
    }
    /* measured on H200 (dev/cuda/NOTES.md): tensor path faster at 1 token (30 vs 41 us), the
     * CUDA-core path at 8 tokens (119 vs 156 us) */
    if (path == GEMV_PATH_TENSOR ||
        (path == GEMV_PATH_AUTO && mma_ok && n_tok <= MOE_TENSOR_MAX_TOK)) {
        const int n_slots = n_tok * top_k;
        if (n_slots > 65535)
            return ERR_INVAL;
        float *gu = ws;                               /* (n_slots, 2*inter) */
        float *ys = ws + (size_t)n_slots * 2 * inter; /* (n_slots, hidden) */
        const struct nvfp4_mma_args a1 = {gu, 2 * inter, x, hidden, ids, top_k, 1, n_experts, 0};
        nvfp4_mma_kernel<1, false>
            <<<dim3(CEIL_DIV(2 * inter, 16), n_slots), NVFP4_MMA_WARPS * 32, 0, stream>>>(*gate_up,
                                                                                          a1);
        const struct nvfp4_mma_args a2 = {ys, hidden, gu, 2 * inter, ids, 1, 1, n_experts, 0};
        nvfp4_mma_kernel<1, true>
            <<<dim3(CEIL_DIV(hidden, 16), n_slots), NVFP4_MMA_WARPS * 32, 0, stream>>>(*down, a2);
        kcuda_launch_pdl(moe_combine_kernel, dim3(CEIL_DIV(hidden, 256), n_tok), 256, 0, stream,
                         out, ys, ids, weights, top_k, n_experts, hidden, accumulate);
        return kcuda_launch_status("moe_expert_mma");
    }
    const int threads = 256;
    const int lpr1 = kw_lanes_per_row(gate_up), lpr2 = kw_lanes_per_row(down);
    if (n_tok * (int64_t)top_k > 65535 || n_tok > 65535)
        return ERR_INVAL;
    dim3 g1(CEIL_DIV(inter, threads / lpr1), n_tok * top_k);
    switch (kw_kf_of(gate_up)) {
    case KF_BF16:
        kcuda_launch_pdl(moe_gate_up_kernel<KF_BF16>, g1, threads, 0, stream, hbuf, *gate_up, x,
                         ids, top_k, n_experts, inter, lpr1, sh_expert);
        break;
    case KF_FP8:
        kcuda_launch_pdl(moe_gate_up_kernel<KF_FP8>, g1, threads, 0, stream, hbuf, *gate_up, x, ids,
                         top_k, n_experts, inter, lpr1, sh_expert);
        break;
    case KF_NVFP4:
        kcuda_launch_pdl(moe_gate_up_kernel<KF_NVFP4>, g1, threads, 0, stream, hbuf, *gate_up, x,
                         ids, top_k, n_experts, inter, lpr1, sh_expert);
        break;
    default:
        kcuda_launch_pdl(moe_gate_up_kernel<KF_NVFP4_NARROW>, g1, threads, 0, stream, hbuf,
                         *gate_up, x, ids, top_k, n_experts, inter, lpr1, sh_expert);
        break;
    }
    rc = kcuda_launch_status("moe_gate_up");
    if (rc < 0)
        return rc;
    if (n_tok <= MOE_SLOTS_MAX_TOK && top_k <= MOE_SLOTS_MAX_K) {
        /* fp8: at most MOE_DOWN_FP8_LPR lanes a row (0: kw_lanes_per_row's) */
        const int lps = MOE_DOWN_FP8_LPR > 0 && kw_kf_of(down) == KF_FP8 && lpr2 > MOE_DOWN_FP8_LPR
                            ? MOE_DOWN_FP8_LPR
                            : lpr2;
        const int rb = 32 / lps * MOE_DOWN_ROWS;
        const dim3 gs(CEIL_DIV(hidden, rb), n_tok);
        const size_t smem = sizeof(float) * (size_t)top_k * rb;
        switch (kw_kf_of(down)) {
        case KF_BF16:
            kcuda_launch_pdl(moe_down_slots_kernel<KF_BF16>, gs, 32 * top_k, smem, stream, out,
                             *down, hbuf, ids, weights, top_k, n_experts, accumulate, lpr2);
            break;
        case KF_FP8:
            kcuda_launch_pdl(moe_down_slots_kernel<KF_FP8>, gs, 32 * top_k, smem, stream, out,
                             *down, hbuf, ids, weights, top_k, n_experts, accumulate, lps);
            break;
        case KF_NVFP4:
            kcuda_launch_pdl(moe_down_slots_kernel<KF_NVFP4>, gs, 32 * top_k, smem, stream, out,
                             *down, hbuf, ids, weights, top_k, n_experts, accumulate, lpr2);
            break;
        default:
            kcuda_launch_pdl(moe_down_slots_kernel<KF_NVFP4_NARROW>, gs, 32 * top_k, smem, stream,
                             out, *down, hbuf, ids, weights, top_k, n_experts, accumulate, lpr2);
            break;
        }
        return kcuda_launch_status("moe_expert_slots");
    }
    dim3 g2(CEIL_DIV(hidden, threads / lpr2 * MOE_DOWN_ROWS), n_tok);
    switch (kw_kf_of(down)) {
    case KF_BF16:
        kcuda_launch_pdl(moe_down_kernel<KF_BF16>, g2, threads, 0, stream, out, *down, hbuf, ids,
                         weights, top_k, n_experts, accumulate, lpr2);
        break;
    case KF_FP8:
        kcuda_launch_pdl(moe_down_kernel<KF_FP8>, g2, threads, 0, stream, out, *down, hbuf, ids,
                         weights, top_k, n_experts, accumulate, lpr2);
        break;
    case KF_NVFP4:
        kcuda_launch_pdl(moe_down_kernel<KF_NVFP4>, g2, threads, 0, stream, out, *down, hbuf, ids,
                         weights, top_k, n_experts, accumulate, lpr2);
        break;
    default:
        kcuda_launch_pdl(moe_down_kernel<KF_NVFP4_NARROW>, g2, threads, 0, stream, out, *down,
                         hbuf, ids, weights, top_k, n_experts, accumulate, lpr2);
        break;
    }
    return kcuda_launch_status("moe_expert");
}

int moe_expert_cuda_path(float *out, float *ws, const float *x, const int32_t *ids,
                         const float *weights, int n_tok, int top_k, int n_experts,
                         const struct kweight *gate_up, const struct kweight *down, int accumulate,
                         int path, cudaStream_t stream)
{
    return moe_expert_sh_cuda(out, ws, x, ids, weights, n_tok, top_k, n_experts, gate_up, down,
                              accumulate, -1, path, stream);
}

int moe_expert_cuda(float *out, float *ws, const float *x, const int32_t *ids, const float *weights,
                    int n_tok, int top_k, int n_experts, const struct kweight *gate_up,
                    const struct kweight *down, int accumulate, cudaStream_t stream)
{
    return moe_expert_cuda_path(out, ws, x, ids, weights, n_tok, top_k, n_experts, gate_up, down,
                                accumulate, GEMV_PATH_AUTO, stream);
}
