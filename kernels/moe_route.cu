/* moe_route: one warp per token (one block for moe_router's single-token launch); probabilities in
 * shared memory, top-k by k rounds of a warp argmax (by ranks across the block). */
#include "moe_route.h"

#include <string.h>

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/pdl.cuh"
#include "internal/wdot.cuh"

/* One token's routing by one warp (lane = its lane): softmax over the E logits l (read through
 * L2: another block may have written them), k rounds of a warp argmax into ids / weights (stride
 * for this token); p (E floats) and selw (top_k) are this warp's shared scratch. sh (or NULL):
 * the shared expert's gate logit, then slot top_k = (expert n_experts, sigmoid(*sh)). */
static __device__ __forceinline__ void route_token(int32_t *ids, float *weights, const float *l,
                                                   int n_experts, int top_k, const float *sh,
                                                   float *p, float *selw, int lane)
{
    float mx = -INFINITY;
    for (int e = lane; e < n_experts; e += 32)
        mx = fmaxf(mx, __ldcg(l + e));
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int e = lane; e < n_experts; e += 32) {
        float v = __expf(__ldcg(l + e) - mx);
        p[e] = v;
        sum += v;
    }
    sum = warp_sum(sum);
    const float inv = 1.0f / sum;
    __syncwarp();
    float tot = 0.0f;
    for (int j = 0; j < top_k; j++) {
        float bv = -1.0f;
        int bi = n_experts;
        for (int e = lane; e < n_experts; e += 32)
            if (p[e] > bv) { /* increasing e: first max wins ties */
                bv = p[e];
                bi = e;
            }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0) {
            ids[j] = bi;
            selw[j] = bv * inv;
            if (bi < n_experts)
                p[bi] = -2.0f;
        }
        tot += bv * inv;
        __syncwarp();
    }
    for (int j = lane; j < top_k; j += 32)
        weights[j] = selw[j] / tot;
    if (sh && lane == 0) {
        ids[top_k] = n_experts;
        weights[top_k] = sigmoid_f32(__ldcg(sh));
    }
}

/* route_token with a lane's probabilities in registers (NV a lane: experts lane + 32 i) and each
 * round's warp argmax as two redux.sync (the largest value as its bits, then the lowest expert
 * holding it) instead of five rounds of shuffle pairs, the lane's own best by a tree over its
 * values: the same softmax in the same order, the same selection (value descending, expert
 * ascending; NaN never, "nothing left" as (n_experts, -1 * inv)), so the same ids and weights to
 * the bit. Round j's id and value stay in lane j's registers (top_k <= 32). */
template <int NV>
static __device__ __forceinline__ void route_token_rx(int32_t *ids, float *weights, const float *l,
                                                      int n_experts, int top_k, const float *sh,
                                                      int lane)
{
    float v[NV];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int e = lane + 32 * i;
        v[i] = e < n_experts ? __ldcg(l + e) : 0.0f;
        if (e < n_experts)
            mx = fmaxf(mx, v[i]);
    }
    mx = warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        if (lane + 32 * i < n_experts) {
            v[i] = __expf(v[i] - mx);
            sum += v[i];
        } else {
            v[i] = NAN; /* past E: never selected */
        }
    }
    sum = warp_sum(sum);
    const float inv = 1.0f / sum;
    unsigned taken = 0u; /* bit i: v[i] selected */
    float tot = 0.0f, my_w = 0.0f;
    int my_id = n_experts;
    for (int j = 0; j < top_k; j++) {
        /* this lane's best untaken value, the first (lowest expert) of equals: a tree whose
         * left operand holds the lower experts; NaN and taken as -1 (never above bv = -1) */
        float bv[NV];
        int bi[NV];
#pragma unroll
        for (int i = 0; i < NV; i++) {
            const bool ok = !((taken >> i) & 1u) && v[i] > -1.0f; /* false for NaN */
            bv[i] = ok ? v[i] : -1.0f;
            bi[i] = ok ? lane + 32 * i : n_experts;
        }
#pragma unroll
        for (int s = 1; s < NV; s <<= 1)
#pragma unroll
            for (int i = 0; i + s < NV; i += 2 * s)
                if (bv[i + s] > bv[i]) {
                    bv[i] = bv[i + s];
                    bi[i] = bi[i + s];
                }
        /* p >= 0: its bits order as the values; + 1 keeps 0.0 above "nothing" (0) */
        const unsigned key = bv[0] >= 0.0f ? __float_as_uint(bv[0]) + 1u : 0u;
        const unsigned m = __reduce_max_sync(0xffffffffu, key);
        int id = n_experts;
        float val = -1.0f;
        if (m != 0u) {
            id = (int)__reduce_min_sync(0xffffffffu, key == m ? (unsigned)bi[0] : 0xffffffffu);
            val = __uint_as_float(m - 1u);
            if ((id & 31) == lane)
                taken |= 1u << (id >> 5);
        }
        if (lane == j) {
            my_id = id;
            my_w = val * inv;
        }
        tot += val * inv;
    }
    if (lane < top_k) {
        ids[lane] = my_id;
        weights[lane] = my_w / tot;
    }
    if (sh && lane == 0) {
        ids[top_k] = n_experts;
        weights[top_k] = sigmoid_f32(__ldcg(sh));
    }
}

/* One token's routing by the whole block (blockDim.x = ROUTER_THREADS, every thread calls it):
 * the same selection and the same float operations as route_token, so the same ids and weights
 * to the bit, with route_token's k rounds of a warp argmax (the tail of a batch-1 router launch,
 * serial on one warp) replaced by ranks: each warp ranks the values of its 32-expert chunks by
 * shuffles and keeps each chunk's top min(k, 32) as candidates (a member of the top k is in its
 * chunk's top k); each candidate's rank among the candidates, by (value desc, expert asc) as
 * route_token's first-max-wins rounds order them, is its slot. Values that route_token never
 * selects (NaN probabilities, experts past E) rank last and give its "nothing left" slot
 * (n_experts, -1 * inv). p: E floats; ck: ceil(E / 32) * min(k, 32) candidate keys rounded up
 * to 16;
 * red: blockDim.x / 32 + 1 floats; selw, seli: top_k each (all shared). */
static __device__ __forceinline__ void route_token_block(int32_t *ids, float *weights,
                                                         const float *l, int n_experts, int top_k,
                                                         const float *sh, float *p,
                                                         unsigned long long *ck, float *red,
                                                         float *selw, int *seli)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    /* the shared gate's logit read now, beside the experts' (thread 0 stores its weight last:
     * the read's latency under the selection, not after it) */
    const float shl = sh && tid == 0 ? __ldcg(sh) : 0.0f;
    float mx = -INFINITY;
    for (int e = tid; e < n_experts; e += blockDim.x) {
        const float v = __ldcg(l + e);
        p[e] = v;
        mx = fmaxf(mx, v);
    }
    mx = warp_max(mx);
    if (lane == 0)
        red[warp] = mx;
    __syncthreads();
    mx = red[0];
    for (int i = 1; i < nw; i++)
        mx = fmaxf(mx, red[i]);
    for (int e = tid; e < n_experts; e += blockDim.x)
        p[e] = __expf(p[e] - mx); /* each thread its own experts: no barrier between */
    __syncthreads();
    /* warp 0: the sum in route_token's order (lane's experts in turn, then the butterfly) */
    if (warp == 0) {
        float sum = 0.0f;
        for (int e = lane; e < n_experts; e += 32)
            sum += p[e];
        sum = warp_sum(sum);
        if (lane == 0)
            red[nw] = 1.0f / sum;
    }
    /* every warp: its chunks' top kk by rank within the chunk. An expert's key orders (value
     * desc, expert asc) as route_token's rounds do, unique per expert: the value's bits with the
     * top bit set (p >= 0) above the inverted expert index; NaN and past-E keys have the top bit
     * clear (below every value, never selected). */
    const int kk = top_k < 32 ? top_k : 32, n_chunks = (n_experts + 31) / 32;
    for (int c = warp; c < n_chunks; c += nw) {
        const int e = c * 32 + lane;
        const float pv = e < n_experts ? p[e] : NAN;
        const unsigned long long key =
            ((unsigned long long)(isnan(pv) ? 0u : (__float_as_uint(pv) | 0x80000000u)) << 32) |
            (0xffffffffu - (uint32_t)e);
        int r = 0;
#pragma unroll 8
        for (int j = 0; j < 32; j++)
            r += __shfl_sync(0xffffffffu, key, j) > key;
        if (r < kk)
            ck[c * kk + r] = key;
    }
    /* the candidates padded with zero keys (below every key) to whole rounds of the rank loop */
    const int n_cand = n_chunks * kk, n_pad = (n_cand + 15) / 16 * 16;
    for (int c = n_cand + tid; c < n_pad; c += blockDim.x)
        ck[c] = 0ull;
    __syncthreads();
    const float inv = red[nw];
    for (int c = tid; c < n_cand; c += blockDim.x) {
        const unsigned long long key = ck[c];
        int r = 0;
        for (int j0 = 0; j0 < n_pad; j0 += 16) {
#pragma unroll
            for (int j = 0; j < 16; j++)
                r += ck[j0 + j] > key;
        }
        if (r < top_k) {
            const bool valid = key >> 63;
            seli[r] = valid ? (int)(0xffffffffu - (uint32_t)key) : n_experts;
            selw[r] = (valid ? __uint_as_float((uint32_t)(key >> 32) & 0x7fffffffu) : -1.0f) * inv;
        }
    }
    __syncthreads();
    if (tid == 0) {
        float tot = 0.0f;
        for (int j = 0; j < top_k; j++)
            tot += selw[j];
        for (int j = 0; j < top_k; j++) {
            ids[j] = seli[j];
            weights[j] = selw[j] / tot;
        }
        if (sh) {
            ids[top_k] = n_experts;
            weights[top_k] = sigmoid_f32(shl);
        }
    }
}

/* sh (or NULL): the shared expert's gate logit of token t at sh[t * sh_pitch]; then each token
 * has top_k + 1 slots, the last one (expert n_experts, weight sigmoid(logit)) */
__global__ void moe_route_kernel(int32_t *ids, float *weights, const float *logits, int n_experts,
                                 int top_k, const float *sh, int sh_pitch)
{
    kcuda_pdl_enter();
    __shared__ float p[MOE_ROUTE_MAX_EXPERTS];
    __shared__ float selw[MOE_ROUTE_MAX_TOPK];
    const int stride = top_k + (sh ? 1 : 0);
    const int64_t t = blockIdx.x;
    route_token(ids + t * stride, weights + t * stride, logits + t * n_experts, n_experts, top_k,
                sh ? sh + t * sh_pitch : NULL, p, selw, threadIdx.x);
}

/* moe_router: block r < E computes router row r for every token (one block per row, the row's
 * chunks over all threads, as gemv's wide kernel), block E the shared gate's row 0; the last
 * block to finish (a counter, reset by it for the next launch) routes every token, one warp
 * each. */
#define ROUTER_THREADS 256
struct moe_router_args {
    kweight w, sh;
    const float *x;
    float *logits, *sh_logits; /* (n_tok, E) and (n_tok, 2): the shared gate at pitch 2 */
    int32_t *ids;
    float *weights;
    unsigned *counter;
    int n_tok, n_experts, top_k, has_sh;
};

/* The one-token bf16 instance (the batch-1 decode step) loads each thread's first ROUTER1_PF
 * chunks of its row before the PDL wait (no kernel of the step writes weights: the model's whole
 * 1 MB router is in flight while the kernel before it finishes), then sums them as wdot does (each
 * thread's chunks in turn: the same bits). Measured on the H200 (docs/PERF.md, eighteenth
 * session): batch-1 decode BF16 371.2 -> 377.5 tok/s, FP8 364.3 -> 367.4, NVFP4 448.3 -> 449.5.
 * The post-mixer add + RMSNorm folded into this launch as well (every block computing the normed
 * row, the last one writing it) measured slower than its own launch and was dropped.
 * -DMOE_ROUTER1=0 loads after the wait (an A/B build, tests/gpu/measure.sh routerab). */
#ifndef MOE_ROUTER1
#define MOE_ROUTER1 1
#endif
#define ROUTER1_PF 2 /* chunks a thread before the wait: 4,096 columns at 256 threads */

/* Router rows a block in the 2-8-token instance (RB): every block reads every token's x through
 * L2 (32 KB a block at 4 tokens: 8 MB a launch over 257 blocks of one row), and 257 blocks meet
 * at the counter. RB rows a block read x once for RB rows (wdot's R rows: each row's sum in the
 * same order, the same bits), and the last block routes each token with route_token_rx (weights
 * loaded before the PDL wait measured as no gain at 2-8 tokens in the twenty-fifth session).
 * RB = 4 (65 blocks) on the H200 (twenty-seventh session, docs/PERF.md): the router's share of a
 * 4-row step 364 -> 334 us, NVFP4 batch 2 / 4 +1.5%, batch 8 +0.3%, FP8 and BF16 batch 4 +0.3-1.7%,
 * the same tokens. -DMOE_ROUTER_RB=1 builds one row a block (tests/gpu/measure.sh routerrb). */
#ifndef MOE_ROUTER_RB
#define MOE_ROUTER_RB 4
#endif

/* NT: the token count the GEMV part is built for (1: the batch-1 step, no idle token lanes);
 * RB: router rows a block (block r < ceil(E / RB): rows r * RB.., the block after them the shared
 * gate's row 0) */
template <int KF, int NT, int RB>
__global__ void __launch_bounds__(ROUTER_THREADS) moe_router_kernel(moe_router_args a)
{
    constexpr bool EARLY = MOE_ROUTER1 && KF == KF_BF16 && NT == 1 && RB == 1;
    __shared__ float red[RB * MOE_ROUTER_MAX_TOK][ROUTER_THREADS / 32];
    __shared__ __align__(16) float p[MOE_ROUTER_MAX_TOK][MOE_ROUTER_MAX_EXPERTS];
    __shared__ float selw[MOE_ROUTER_MAX_TOK][MOE_ROUTE_MAX_TOPK];
    __shared__ bool last;
    const int r = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nrb = (a.n_experts + RB - 1) / RB; /* the router's blocks */
    const bool shr = r >= nrb;                   /* the shared gate's block */
    const kweight w = shr ? a.sh : a.w;
    const int row = shr ? 0 : r * RB, tid = threadIdx.x;
    const int nr = shr ? 1 : min(RB, a.n_experts - row); /* rows of this block */
    const uint4 *wr =
        reinterpret_cast<const uint4 *>((const uint16_t *)w.data + (int64_t)row * w.row_stride);
    uint4 q[ROUTER1_PF];
#pragma unroll
    for (int j = 0; j < ROUTER1_PF; j++) {
        const int c = tid + j * ROUTER_THREADS;
        if (EARLY)
            q[j] = c < w.cols / 8 ? __ldg(wr + c) : make_uint4(0u, 0u, 0u, 0u);
    }
    kcuda_pdl_enter();
    float acc[RB * NT];
#pragma unroll
    for (int t = 0; t < RB * NT; t++)
        acc[t] = 0.0f;
    if (EARLY) {
        const int nch = w.cols / 8;
#pragma unroll
        for (int j = 0; j < ROUTER1_PF; j++) {
            const int c = tid + j * ROUTER_THREADS;
            if (c < nch) {
                const float4 *xp = reinterpret_cast<const float4 *>(a.x + c * 8);
                acc[0] += kw_dot_bf16x8(q[j], __ldg(xp), __ldg(xp + 1));
            }
        }
        for (int c = tid + ROUTER1_PF * ROUTER_THREADS; c < nch; c += ROUTER_THREADS) {
            const float4 *xp = reinterpret_cast<const float4 *>(a.x + c * 8);
            acc[0] += kw_dot_bf16x8(__ldg(wr + c), __ldg(xp), __ldg(xp + 1));
        }
    } else {
        wdot<NT, RB, KF>(w, 0, row, 1, nr, a.x, w.cols, a.n_tok, tid, ROUTER_THREADS, acc);
    }
#pragma unroll
    for (int i = 0; i < RB; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (RB > 1 && (i >= nr || t >= a.n_tok)) /* block-uniform */
                continue;
            const float v = warp_sum(acc[i * NT + t]);
            if (lane == 0)
                red[i * NT + t][warp] = v;
        }
    __syncthreads();
    if (threadIdx.x < nr * a.n_tok) {
        const int i = threadIdx.x / a.n_tok, t = threadIdx.x - i * a.n_tok;
        float v = 0.0f;
#pragma unroll
        for (int k = 0; k < ROUTER_THREADS / 32; k++)
            v += red[i * NT + t][k];
        v *= kw_row_scale(w, 0, row + i);
        if (shr)
            a.sh_logits[(int64_t)t * 2] = v;
        else
            a.logits[(int64_t)t * a.n_experts + row + i] = v;
        __threadfence(); /* visible to the last block before the counter says so */
    }
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(a.counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    if (a.n_tok == 1) { /* batch-1 decode: the whole block routes the one token */
        route_token_block(a.ids, a.weights, a.logits, a.n_experts, a.top_k,
                          a.has_sh ? a.sh_logits : NULL, p[0],
                          reinterpret_cast<unsigned long long *>(p[2]), &red[0][0], selw[0],
                          reinterpret_cast<int *>(selw[1]));
    } else if (warp < a.n_tok) {
        const int stride = a.top_k + (a.has_sh ? 1 : 0);
        int32_t *ids = a.ids + (int64_t)warp * stride;
        float *wts = a.weights + (int64_t)warp * stride;
        const float *lg = a.logits + (int64_t)warp * a.n_experts;
        const float *sh = a.has_sh ? a.sh_logits + (int64_t)warp * 2 : NULL;
        if (RB == 1)
            route_token(ids, wts, lg, a.n_experts, a.top_k, sh, p[warp], selw[warp], lane);
        else if (a.n_experts <= 256)
            route_token_rx<8>(ids, wts, lg, a.n_experts, a.top_k, sh, lane);
        else
            route_token_rx<MOE_ROUTER_MAX_EXPERTS / 32>(ids, wts, lg, a.n_experts, a.top_k, sh,
                                                        lane);
    }
    if (threadIdx.x == 0)
        *a.counter = 0u; /* the next launch (stream order) starts from zero */
}

/* moe_route_cuda / moe_route_shared_cuda: sh NULL or the shared gate logits at sh_pitch */
static int route_launch(int32_t *ids, float *weights, const float *logits, const float *sh,
                        int sh_pitch, int n_tok, int n_experts, int top_k, cudaStream_t stream)
{
    if (!ids || !weights || !logits || (sh && sh_pitch < 1) || n_tok < 0 || n_experts <= 0 ||
        n_experts > MOE_ROUTE_MAX_EXPERTS || top_k <= 0 || top_k > n_experts ||
        top_k > MOE_ROUTE_MAX_TOPK)
        return ERR_INVAL;
    if (n_tok == 0)
        return 0;
    kcuda_launch_pdl(moe_route_kernel, n_tok, 32, 0, stream, ids, weights, logits, n_experts,
                     top_k, sh, sh_pitch);
    return kcuda_launch_status("moe_route");
}

int moe_route_cuda(int32_t *ids, float *weights, const float *logits, int n_tok, int n_experts,
                   int top_k, cudaStream_t stream)
{
    return route_launch(ids, weights, logits, NULL, 0, n_tok, n_experts, top_k, stream);
}

int moe_route_shared_cuda(int32_t *ids, float *weights, const float *logits, const float *sh,
                          int sh_pitch, int n_tok, int n_experts, int top_k, cudaStream_t stream)
{
    return sh ? route_launch(ids, weights, logits, sh, sh_pitch, n_tok, n_experts, top_k, stream)
              : ERR_INVAL;
}

int moe_router_cuda(int32_t *ids, float *weights, float *logits, float *sh_logits,
                    unsigned *counter, const float *x, const struct kweight *router,
                    const struct kweight *sh_gate, int n_tok, int top_k, cudaStream_t stream)
{
    int rc = kweight_check_dev(router);
    if (rc == 0 && sh_gate)
        rc = kweight_check_dev(sh_gate);
    if (rc < 0)
        return rc;
    const int E = router->rows;
    if (!ids || !weights || !logits || !counter || !x || ((uintptr_t)x) % 16 || n_tok < 1 ||
        top_k <= 0 || top_k > E || top_k > MOE_ROUTE_MAX_TOPK ||
        (sh_gate && (!sh_logits || sh_gate->cols != router->cols)))
        return ERR_INVAL;
    if (n_tok > MOE_ROUTER_MAX_TOK || E > MOE_ROUTER_MAX_EXPERTS)
        return ERR_UNSUPPORTED;
    moe_router_args a;
    memset(&a, 0, sizeof a);
    a.w = *router;
    if (sh_gate)
        a.sh = *sh_gate;
    a.x = x;
    a.logits = logits;
    a.sh_logits = sh_logits;
    a.ids = ids;
    a.weights = weights;
    a.counter = counter;
    a.n_tok = n_tok;
    a.n_experts = E;
    a.top_k = top_k;
    a.has_sh = sh_gate != NULL;
    const int kf = kw_kf_of(router);
    const bool bf16 = kf == KF_BF16 && (!sh_gate || kw_kf_of(sh_gate) == kf);
    /* the 2-8-token instances: MOE_ROUTER_RB rows a block */
    constexpr int RB = MOE_ROUTER_RB;
    const int blocks = (n_tok == 1 && bf16 ? E : (E + RB - 1) / RB) + (sh_gate ? 1 : 0);
    if (bf16 && n_tok == 1)
        kcuda_launch_pdl(moe_router_kernel<KF_BF16, 1, 1>, blocks, ROUTER_THREADS, 0, stream, a);
    else if (bf16)
        kcuda_launch_pdl(moe_router_kernel<KF_BF16, MOE_ROUTER_MAX_TOK, RB>, blocks, ROUTER_THREADS,
                         0, stream, a);
    else
        kcuda_launch_pdl(moe_router_kernel<KF_ANY, MOE_ROUTER_MAX_TOK, RB>, blocks, ROUTER_THREADS,
                         0, stream, a);
    return kcuda_launch_status("moe_router");
}
