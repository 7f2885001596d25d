/* gdn_seq: conv = one thread per (item, channel, time chunk) with the kc-1 window in registers; step = one
 * head's S (128x128) in the registers of 512 threads (4 lanes per value column), split over
 * 1, 2 or 4 blocks per (item, value head) by column tiles so that a few items still fill the GPU,
 * the rows of an item run in order inside each block; the gated RMSNorm couples the columns, so
 * with more than one tile it runs as a second kernel over the raw o left in out. */
#include "gdn_seq.h"

#include "common/xalloc.h"
#include "gdn_conv.h"
#include "internal/kcuda.cuh"
#include "internal/pdl.cuh"

#define D GDN_SEQ_HEAD_DIM
/* 1: the conv and the recurrence read their states before the PDL wait (gdn_seq.h); 0: after it,
 * as before (an A/B build, tests/gpu/measure.sh gdnab) */
#ifndef GDN_PRE_WAIT
#define GDN_PRE_WAIT 1
#endif
#define MAXW (GDN_CONV_MAX_KC - 1)

/* One channel's conv output for input xv with the window win (the kw = kc - 1 inputs before it,
 * oldest first) and weights wt (wl: the newest input's): the conv kernel's and the fused step's
 * arithmetic (the same bits). */
static __device__ __forceinline__ float conv_out(float xv, const float (&win)[MAXW],
                                                 const float (&wt)[MAXW], float wl, int kw)
{
    float u = wl * xv;
#pragma unroll
    for (int j = 0; j < MAXW; j++)
        if (j < kw)
            u += wt[j] * win[j];
    return silu_f32(u);
}

/* conv: one thread per (item, channel, time chunk): chunk z covers the item's rows z*chunk ..
 * (chunk = ceil(n / gridDim.z), at least kc-1), its window of the kc-1 inputs before its first
 * row read from x, or from the slot's state for rows before the item. Every row's sum is the
 * same operations in the same order as with one chunk. Only the chunk-0 thread reads the state
 * (the others start at least kc-1 rows in) and it alone writes it back at the end: the window
 * after the item's last row, from x or (a short item) the old state, read before overwritten. */
__global__ void gdn_seq_conv_kernel(float *out, float *state, int64_t sstride, float *snap, int n_snap,
                                    const float *x, const float *w, const int32_t *items,
                                    int channels, int kc)
{
    if (!GDN_PRE_WAIT)
        kcuda_pdl_enter();
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels)
        return;
    const int32_t *it = items + (int64_t)blockIdx.y * GDN_SEQ_ITEM_INTS;
    const int64_t r0 = it[0];
    const int n = it[1], sn = it[3];
    if (n <= 0)
        return;
    const int kw = kc - 1;
    int chunk = (n + (int)gridDim.z - 1) / (int)gridDim.z;
    if (chunk < kw)
        chunk = kw;
    const int t0 = (int)blockIdx.z * chunk;
    if (t0 >= n)
        return;
    const int t1 = min(n, t0 + chunk);
    float *st = state + (int64_t)it[2] * sstride + (int64_t)c * kw;
    const float *wc = w + (int64_t)c * kc;
    /* the weights and the window's state entries before the PDL wait: the slot's state is this
     * kernel's alone (the kernel before it, the inputs' GEMV, writes x); x after it */
    float win[MAXW], wt[MAXW];
#pragma unroll
    for (int j = 0; j < MAXW; j++) {
        const int p = t0 - kw + j; /* input position of window entry j (state: p < 0) */
        win[j] = j < kw && p < 0 ? st[p + kw] : 0.0f;
        wt[j] = j < kw ? wc[j] : 0.0f;
    }
    const float wl = wc[kw];
    if (GDN_PRE_WAIT)
        kcuda_pdl_enter();
#pragma unroll
    for (int j = 0; j < MAXW; j++) {
        const int p = t0 - kw + j;
        if (j < kw && p >= 0)
            win[j] = x[(r0 + p) * channels + c];
    }
    for (int t = t0; t < t1; t++) {
        const int64_t r = r0 + t;
        const float xv = x[r * channels + c];
        out[r * channels + c] = conv_out(xv, win, wt, wl, kw);
#pragma unroll
        for (int j = 0; j < MAXW - 1; j++)
            if (j < kw - 1)
                win[j] = win[j + 1];
#pragma unroll
        for (int j = 0; j < MAXW; j++)
            if (j == kw - 1)
                win[j] = xv;
        if (snap && sn >= 0 && sn + t < n_snap) {
            float *sp = snap + ((int64_t)(sn + t) * channels + c) * kw;
#pragma unroll
            for (int j = 0; j < MAXW; j++)
                if (j < kw)
                    sp[j] = win[j];
        }
    }
    if (blockIdx.z != 0)
        return;
    /* ascending j reads st[n + j] (n >= 1) before any write reaches it */
#pragma unroll
    for (int j = 0; j < MAXW; j++)
        if (j < kw) {
            const int p = n - kw + j;
            st[j] = p >= 0 ? x[(r0 + p) * channels + c] : st[p + kw];
        }
}

// ---- gated delta rule recurrence ----
/* Which items the chunked form (below) runs: at least min_rows rows (min_rows > 0), no
 * snapshots, rows inside its workspace. The token-serial kernel and the norm skip them. */
struct chunk_take {
    int min_rows; // <= 0: none
    int max_rows; // the chunks its grid has room for, times their rows
    int ws_rows;  // rows of the chunked form's workspace
};
static __device__ __forceinline__ bool chunk_taken(const int32_t *it, chunk_take t)
{
    return t.min_rows > 0 && it[1] >= t.min_rows && it[1] <= t.max_rows && it[3] < 0 &&
           (int64_t)it[0] + it[1] <= t.ws_rows;
}

/* S of one head is spread over HEAD_THREADS threads: value column j over LANES lanes of a warp,
 * lane quarter p holding the rows 16m + 4p + r (m < 8, r < 4) in s[4m + r], so the k-sums are
 * 32-term partial sums (two accumulators) joined by two shuffles (the same order at every tile
 * count). A warp holds 8 columns; a block holds COLS = D / T columns of one (item, head). */
#define LANES 4
#define ROWS (D / LANES)
#define HEAD_THREADS (D * LANES)
#define FULL 0xffffffffu

/* One warp: y[i] = nw[i] * (o[i] * rsqrt(mean(o^2) + eps)) * silu(z[i]) over the D values of a
 * head, lane l owning i = l, l+32, l+64, l+96; y may alias o. */
template <bool CG = false>
static __device__ __forceinline__ void gated_norm_warp(float *y, const float *o, const float *zr,
                                                       const float *nw, float eps)
{
    const int l = threadIdx.x & 31;
    float v[D / 32], ss = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 32; i++) {
        v[i] = CG ? __ldcg(o + l + 32 * i) : o[l + 32 * i]; /* CG: written by other blocks */
        ss += v[i] * v[i];
    }
    const float inv = rsqrtf(warp_sum(ss) / D + eps);
#pragma unroll
    for (int i = 0; i < D / 32; i++)
        y[l + 32 * i] = nw[l + 32 * i] * (v[i] * inv) * silu_f32(zr[l + 32 * i]);
}

/* Sum over the LANES lanes of a column (lane bits 3..4): every lane gets the same bits. */
static __device__ __forceinline__ float col_sum(float v)
{
    v += __shfl_xor_sync(FULL, v, 8);
    return v + __shfl_xor_sync(FULL, v, 16);
}

/* The log decay g of a row (alpha = exp(g)): -exp(a_log) softplus(a + dt_bias), a_exp =
 * exp(a_log); the token-serial and chunked forms compute it alike. */
static __device__ __forceinline__ float gdn_log_decay(float a, float dt_bias, float a_exp)
{
    const float xa = a + dt_bias;
    return -a_exp * (xa > 20.0f ? xa : log1pf(__expf(xa)));
}

/* One warp, one row: the l2-normalised q (times 1/sqrt(D)) and k into qd / kd, lane l holding
 * elements l, l+32, .. in qv / kv (the token-serial and chunked forms normalise alike). */
static __device__ __forceinline__ void norm_qk_warp(float *qd, float *kd, const float (&qv)[D / 32],
                                                    const float (&kv)[D / 32])
{
    const int lane = threadIdx.x & 31;
    float sq = 0.0f, sk = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 32; i++) {
        sq += qv[i] * qv[i];
        sk += kv[i] * kv[i];
    }
    const float iq = rsqrtf(warp_sum(sq) + 1e-6f), ik = rsqrtf(warp_sum(sk) + 1e-6f);
#pragma unroll
    for (int i = 0; i < D / 32; i++) {
        qd[lane + 32 * i] = qv[i] * iq * rsqrtf((float)D);
        kd[lane + 32 * i] = kv[i] * ik;
    }
}

/* Shared memory of one block of gdn_seq_step_kernel<T>: a chunk of CH rows of the item. */
template <int T> struct step_smem {
    static constexpr int COLS = D / T;          // value columns of the block
    static constexpr int CH = T == 1 ? 16 : 32; // rows per chunk (all fits 48 KB)
    static constexpr int NZ = T == 1 ? CH : 1;  // rows of zs/os: only the fused norm (T == 1)
    float qn[CH][D];                            // l2-normalised q times 1/sqrt(D)
    float kn[CH][D];                            // l2-normalised k
    float vs[CH][COLS];                         // v of the block's columns
    float ga[CH];                               // decay exp(g)
    float gb[CH];                               // beta
    float zs[NZ][D];                            // gate z (T == 1)
    float os[NZ][D];                            // raw o (T == 1)
};

/* Rows r0 .. r0+nc-1 into sm: the block loads its v (and z); warp w normalises q, k of rows
 * w, w+NW, .. (the loads of up to 4 rows issued before their reductions), computes their gates. */
template <int T>
static __device__ __forceinline__ void
stage_rows(step_smem<T> &sm, const float *qkv, const float *z, const float *a, const float *b,
           int64_t r0, int nc, int j, int tile, int n_k_heads, int n_v_heads, float a_exp,
           float dtb)
{
    constexpr int COLS = D / T, NT = COLS * LANES, NW = NT / 32, CH = step_smem<T>::CH;
    constexpr int TPW = CH / NW; // rows per warp
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int kh = j / (n_v_heads / n_k_heads);
    const int64_t width = (int64_t)(2 * n_k_heads + n_v_heads) * D, vw = (int64_t)n_v_heads * D;
    /* v (and z) of the chunk first: their loads fly with the first q/k rows' */
    const float *vr = qkv + r0 * width + (int64_t)(2 * n_k_heads + j) * D + tile * COLS;
    float vv[CH / LANES], zv[CH / LANES];
#pragma unroll
    for (int u = 0; u < CH / LANES; u++) {
        const int i = tid + u * NT;
        if (i / COLS < nc)
            vv[u] = vr[(i / COLS) * width + i % COLS];
        if (T == 1 && i / D < nc)
            zv[u] = z[(r0 + i / D) * vw + (int64_t)j * D + i % D];
    }
    constexpr int G = TPW < 4 ? TPW : 4; // rows in flight per warp (registers: 8 floats a row)
#pragma unroll 1
    for (int u0 = 0; u0 < TPW; u0 += G) {
        float qv[G][D / 32], kv[G][D / 32], av[G], bv[G];
#pragma unroll
        for (int u = 0; u < G; u++) {
            const int64_t r = r0 + w + (u0 + u) * NW;
            if (w + (u0 + u) * NW < nc) {
                const float *qr = qkv + r * width + (int64_t)kh * D;
#pragma unroll
                for (int i = 0; i < D / 32; i++) {
                    qv[u][i] = qr[lane + 32 * i];
                    kv[u][i] = qr[(int64_t)n_k_heads * D + lane + 32 * i];
                }
                av[u] = a[r * n_v_heads + j];
                bv[u] = b[r * n_v_heads + j];
            }
        }
#pragma unroll
        for (int u = 0; u < G; u++) {
            const int t = w + (u0 + u) * NW;
            if (t >= nc) // uniform over the warp
                break;
            norm_qk_warp(sm.qn[t], sm.kn[t], qv[u], kv[u]);
            if (lane == 0) {
                sm.ga[t] = __expf(gdn_log_decay(av[u], dtb, a_exp));
                sm.gb[t] = sigmoid_f32(bv[u]);
            }
        }
    }
#pragma unroll
    for (int u = 0; u < CH / LANES; u++) {
        const int i = tid + u * NT;
        if (i / COLS < nc)
            sm.vs[i / COLS][i % COLS] = vv[u];
        if (T == 1 && i / D < nc)
            sm.zs[i / D][i % D] = zv[u];
    }
}

/* The conv fused into the step kernel (gdn_seq_conv_step_cuda, CONV instances): the conv's state
 * (slots at sstride), snapshots (the step's n_snap) or NULL, raw inputs, weights and shape. */
struct conv_fuse {
    float *state;
    int64_t sstride;
    float *snap;
    const float *x; // (rows, channels) before the conv
    const float *w; // (channels, kc)
    int channels, kc;
    unsigned *cnt; // (items, n_k_heads) counters, 0 between launches
};

/* CONV: row r0 (an item of one row) into sm from cv, the head's conv outputs [q | k | v] (3 D
 * floats in shared memory), as stage_rows<1> stages it from the conv's output rows: the same
 * values, the same normalisation. */
static __device__ __forceinline__ void stage_row_conv(step_smem<1> &sm, const float *cv,
                                                      const float *z, const float *a,
                                                      const float *b, int64_t r0, int j,
                                                      int n_v_heads, float a_exp, float dtb)
{
    const int tid = threadIdx.x, lane = tid & 31;
    const int64_t vw = (int64_t)n_v_heads * D;
    if (tid < D) {
        sm.vs[0][tid] = cv[2 * D + tid];
        sm.zs[0][tid] = z[r0 * vw + (int64_t)j * D + tid];
    }
    if (tid < 32) {
        float qv[D / 32], kv[D / 32];
#pragma unroll
        for (int i = 0; i < D / 32; i++) {
            qv[i] = cv[lane + 32 * i];
            kv[i] = cv[D + lane + 32 * i];
        }
        const float av = a[r0 * n_v_heads + j], bv = b[r0 * n_v_heads + j];
        norm_qk_warp(sm.qn[0], sm.kn[0], qv, kv);
        if (lane == 0) {
            sm.ga[0] = __expf(gdn_log_decay(av, dtb, a_exp));
            sm.gb[0] = sigmoid_f32(bv);
        }
    }
}

/* Block = (tile, value head j) x item: the item's rows in chunks of CH, each chunk staged in
 * shared memory and then run row by row with no block barrier. T == 1: o of the chunk kept in
 * shared memory and gated-normalised here; T > 1: o written raw to out, then either the last of
 * the item's T tile blocks to finish normalises the head's rows (cnt given and the item has at
 * most GDN_SEQ_FUSE_ROWS rows: a counter per (item, head), back to 0 after) or
 * gdn_seq_norm_kernel does. */
template <int T, bool CONV = false>
__global__ void __launch_bounds__(HEAD_THREADS / T, T)
    gdn_seq_step_kernel(float *out, float *state, int64_t sstride, float *snap, int n_snap,
                        const float *qkv, const float *z, const float *a, const float *b,
                        const float *a_log, const float *dt_bias, const float *norm_w,
                        const int32_t *items, int n_k_heads, int n_v_heads, float eps,
                        struct chunk_take take, unsigned *cnt, conv_fuse cf)
{
    static_assert(!CONV || T == 1, "the fused conv: one block a head");
    if (!GDN_PRE_WAIT)
        kcuda_pdl_enter();
    constexpr int COLS = D / T, NW = COLS * LANES / 32, CH = step_smem<T>::CH;
    __shared__ __align__(16) step_smem<T> sm;
    __shared__ float cvs[CONV ? 3 * D : 1]; /* CONV: the head's conv outputs [q | k | v] */
    static_assert(sizeof(step_smem<T>) <= 48 * 1024, "static shared memory");
    const int j = blockIdx.x / T, tile = blockIdx.x % T;
    const int32_t *it = items + (int64_t)blockIdx.y * GDN_SEQ_ITEM_INTS;
    const int64_t r0 = it[0];
    const int n = it[1], sn = it[3];
    if (n <= 0 || chunk_taken(it, take)) // uniform over the block: no thread reaches a barrier
        return;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, p = lane >> 3;
    const int c = w * 8 + (lane & 7), col = tile * COLS + c;
    const int64_t vw = (int64_t)n_v_heads * D, hs = (int64_t)D * D;
    const float a_exp = __expf(a_log[j]), dtb = dt_bias[j];
    float *S = state + (int64_t)it[2] * sstride + (int64_t)j * hs + col;
    float s[ROWS];
    /* the item's state before the PDL wait (items, weights and the state: no kernel writes them
     * while the kernel before this one runs, the conv writing qkv), the rows after it */
#pragma unroll
    for (int m = 0; m < ROWS / 4; m++)
#pragma unroll
        for (int r = 0; r < 4; r++)
            s[4 * m + r] = S[(int64_t)(16 * m + 4 * p + r) * D];
    /* CONV (items of one row): thread i < 3 D runs conv channel i of the head: q (i < D) and k
     * of its key head, then its v; its window and weights before the wait as the state. The
     * key head's q / k windows are shared by its value heads' blocks: the last of them to have
     * read them (a counter per item and key head) writes them back. */
    float cwin[MAXW], cwt[MAXW], cwl = 0.0f;
    int64_t cch = 0;
    const int ckw = CONV ? cf.kc - 1 : 0;
    const bool cthr = CONV && (int)threadIdx.x < 3 * D;
    if (cthr) {
        const int i = threadIdx.x, kh = j / (n_v_heads / n_k_heads);
        cch = i < D       ? (int64_t)kh * D + i
              : i < 2 * D ? (int64_t)(n_k_heads + kh) * D + i - D
                          : (int64_t)(2 * n_k_heads + j) * D + i - 2 * D;
        const float *cs = cf.state + (int64_t)it[2] * cf.sstride + cch * ckw;
        const float *wc = cf.w + cch * cf.kc;
#pragma unroll
        for (int u = 0; u < MAXW; u++) {
            cwin[u] = u < ckw ? cs[u] : 0.0f;
            cwt[u] = u < ckw ? wc[u] : 0.0f;
        }
        cwl = wc[ckw];
    }
    if (GDN_PRE_WAIT)
        kcuda_pdl_enter();
    float cxv = 0.0f;
    if (cthr) {
        cxv = cf.x[r0 * cf.channels + cch];
        cvs[threadIdx.x] = conv_out(cxv, cwin, cwt, cwl, ckw);
    }
    if (CONV) {
        __shared__ bool clast;
        const int ratio = n_v_heads / n_k_heads;
        __syncthreads(); /* every window read of this block consumed */
        if (threadIdx.x == 0) {
            unsigned *c = cf.cnt + (int64_t)blockIdx.y * n_k_heads + j / ratio;
            clast = atomicAdd(c, 1u) == (unsigned)(ratio - 1);
            if (clast)
                *c = 0u; /* for the next launch (stream order) */
        }
        __syncthreads();
        if (cthr && ((int)threadIdx.x >= 2 * D || clast)) {
            /* the window after the row (gdn_seq_conv_kernel's state and snapshot) */
            float *cs = cf.state + (int64_t)it[2] * cf.sstride + cch * ckw;
            float *sp = cf.snap && sn >= 0 && sn < n_snap
                            ? cf.snap + ((int64_t)sn * cf.channels + cch) * ckw
                            : nullptr;
#pragma unroll
            for (int u = 0; u < MAXW; u++)
                if (u < ckw) {
                    const float v = u < ckw - 1 && u + 1 < MAXW ? cwin[u + 1] : cxv;
                    cs[u] = v;
                    if (sp)
                        sp[u] = v;
                }
        }
    }
    for (int t0 = 0; t0 < n; t0 += CH) {
        const int nc = min(CH, n - t0);
        __syncthreads(); // the previous chunk's shared data is consumed (CONV: cvs is written)
        if (CONV)
            stage_row_conv(reinterpret_cast<step_smem<1> &>(sm), cvs, z, a, b, r0, j, n_v_heads,
                           a_exp, dtb);
        else
            stage_rows<T>(sm, qkv, z, a, b, r0 + t0, nc, j, tile, n_k_heads, n_v_heads, a_exp, dtb);
        __syncthreads();
        for (int t = 0; t < nc; t++) {
            const float alpha = sm.ga[t];
            float acc[2] = {0.0f, 0.0f};
#pragma unroll
            for (int m = 0; m < ROWS / 4; m++) {
                const float4 k4 = *reinterpret_cast<const float4 *>(&sm.kn[t][16 * m + 4 * p]);
                const float kk[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    s[4 * m + r] *= alpha;
                    acc[m & 1] += s[4 * m + r] * kk[r];
                }
            }
            const float d = sm.gb[t] * (sm.vs[t][c] - col_sum(acc[0] + acc[1]));
            acc[0] = acc[1] = 0.0f;
#pragma unroll
            for (int m = 0; m < ROWS / 4; m++) {
                const float4 k4 = *reinterpret_cast<const float4 *>(&sm.kn[t][16 * m + 4 * p]);
                const float4 q4 = *reinterpret_cast<const float4 *>(&sm.qn[t][16 * m + 4 * p]);
                const float kk[4] = {k4.x, k4.y, k4.z, k4.w}, qq[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    s[4 * m + r] += kk[r] * d;
                    acc[m & 1] += s[4 * m + r] * qq[r];
                }
            }
            const float o = col_sum(acc[0] + acc[1]);
            if (p == 0) {
                if (T == 1)
                    sm.os[t][c] = o;
                else
                    out[(r0 + t0 + t) * vw + (int64_t)j * D + col] = o;
            }
            if (snap && sn >= 0 && sn + t0 + t < n_snap) {
                float *sp = snap + ((int64_t)(sn + t0 + t) * n_v_heads + j) * hs + col;
#pragma unroll
                for (int m = 0; m < ROWS / 4; m++)
#pragma unroll
                    for (int r = 0; r < 4; r++)
                        sp[(int64_t)(16 * m + 4 * p + r) * D] = s[4 * m + r];
            }
        }
        if (T == 1) {
            __syncthreads();
            for (int t = w; t < nc; t += NW)
                gated_norm_warp(out + (r0 + t0 + t) * vw + (int64_t)j * D, sm.os[t], sm.zs[t],
                                norm_w, eps);
        }
    }
#pragma unroll
    for (int m = 0; m < ROWS / 4; m++)
#pragma unroll
        for (int r = 0; r < 4; r++)
            S[(int64_t)(16 * m + 4 * p + r) * D] = s[4 * m + r];
    if (T == 1 || !cnt || n > GDN_SEQ_FUSE_ROWS)
        return;
    /* the head's other tiles: the last block of the T to get here normalises the item's rows */
    __shared__ bool last;
    __threadfence(); /* this block's raw o, before the counter says it is there */
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned *c = cnt + (int64_t)blockIdx.y * n_v_heads + j;
        last = atomicAdd(c, 1u) == T - 1;
        if (last)
            *c = 0u; /* for the next launch (stream order) */
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    for (int t = w; t < n; t += NW) {
        float *o = out + (r0 + t) * vw + (int64_t)j * D;
        gated_norm_warp<true>(o, o, z + (r0 + t) * vw + (int64_t)j * D, norm_w, eps);
    }
}

/* The gated RMSNorm of the raw o that gdn_seq_step_kernel<T > 1> left in out, in place: one warp
 * per (row, value head) of the item, warps striding over the item's rows. taken: the items of
 * the chunked form (1) or of the token-serial kernel (0); fused (taken 0 only): skip the items
 * the step kernel normalised (at most GDN_SEQ_FUSE_ROWS rows). */
__global__ void __launch_bounds__(256)
    gdn_seq_norm_kernel(float *out, const float *z, const float *norm_w, const int32_t *items,
                        int n_v_heads, float eps, chunk_take take, int taken, int fused)
{
    kcuda_pdl_enter();
    const int32_t *it = items + (int64_t)blockIdx.y * GDN_SEQ_ITEM_INTS;
    if ((int)chunk_taken(it, take) != taken) // the items of the other form
        return;
    if (fused && it[1] <= GDN_SEQ_FUSE_ROWS)
        return;
    const int64_t r0 = it[0], pairs = (int64_t)it[1] * n_v_heads, vw = (int64_t)n_v_heads * D;
    const int nw = blockDim.x >> 5;
    for (int64_t i = (int64_t)blockIdx.x * nw + (threadIdx.x >> 5); i < pairs;
         i += (int64_t)gridDim.x * nw) {
        const int64_t o0 = (r0 + i / n_v_heads) * vw + i % n_v_heads * D;
        gated_norm_warp(out + o0, out + o0, z + o0, norm_w, eps);
    }
}

// ---- the chunked form (items of many rows: prefill) ----
/* Per (item, value head) and chunk of CR rows, with S0 the state before the chunk, g_t the log
 * decay of row t, G_t = g_0 + .. + g_t (so alpha-products are exp(G_t - G_i) <= 1 for t >= i),
 * beta_t, the normalised q_t (times 1/sqrt(D)) and k_t, the delta rule's per-row update
 * d_t = beta_t (v_t - S_pre_t^T k_t) solves the unit lower-triangular system
 *   d_t + sum_{i<t} A_ti d_i = beta_t v_t - beta_t exp(G_t) S0^T k_t,
 *   A_ti = beta_t exp(G_t - G_i) k_t.k_i,
 * so d = U - W S0 with U = (I + A)^-1 (beta V) and W = (I + A)^-1 (beta exp(G) K), both free of
 * S0. Then o_t = exp(G_t) S0^T q_t + sum_{i<=t} P_ti d_i with P_ti = exp(G_t - G_i) q_t.k_i,
 * and the state after the chunk is exp(G_last) S0 + sum_t exp(G_last - G_t) k_t d_t^T.
 * gdn_chunk_prep_kernel computes U, W, P and G for every chunk of every taken item at once
 * (one block per (value head, item, chunk)); gdn_chunk_state_kernel walks each item's chunks in
 * order per (value head, CT-column tile), S's tile in shared memory. fp32 throughout. */
#define CR 64           // rows per chunk
#define CT 16           // value columns per block of the state kernel
#define QP (D + 4)      // shared row pitch of q / k (float4 rows on distinct banks)
#define SPT (CT + 4)    // pitch of the state tile and of d
#define CHUNK_THREADS 256

/* workspace (floats, per row of the pass and value head): U (D), W (D), P (CR), G (1), each an
 * array (ws_rows, n_v_heads, ..) */
#define WS_PER_ROW_HEAD (2 * D + CR + 1)

/* Rows r0 .. r0+nc-1 of key head kh into qn / kn (pitch QP), normalised as stage_rows does;
 * rows nc .. CR-1 zero. Warp w takes rows w, w+8, ..: all its loads issued before the first
 * reduction (the staging is latency-bound otherwise: a chunk per block at a time). */
#define ROWS_PER_WARP (CR / (CHUNK_THREADS / 32))
static __device__ __forceinline__ void chunk_stage_qk(float *qn, float *kn, const float *qkv,
                                                      int64_t r0, int nc, int kh, int n_k_heads,
                                                      int64_t width)
{
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float qv[ROWS_PER_WARP][D / 32], kv[ROWS_PER_WARP][D / 32];
#pragma unroll
    for (int u = 0; u < ROWS_PER_WARP; u++) {
        const int t = w + u * (CHUNK_THREADS / 32);
        const float *qr = qkv + (r0 + t) * width + (int64_t)kh * D;
#pragma unroll
        for (int i = 0; i < D / 32; i++) {
            qv[u][i] = t < nc ? qr[lane + 32 * i] : 0.0f;
            kv[u][i] = t < nc ? qr[(int64_t)n_k_heads * D + lane + 32 * i] : 0.0f;
        }
    }
#pragma unroll
    for (int u = 0; u < ROWS_PER_WARP; u++) {
        const int t = w + u * (CHUNK_THREADS / 32);
        norm_qk_warp(qn + t * QP, kn + t * QP, qv[u], kv[u]); // rows past nc: zeros
    }
}

static __device__ __forceinline__ float dot4(float4 a, float4 b)
{
    return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

struct chunk_args {
    float *out, *state;
    int64_t sstride;      // floats between slots of state
    float *u, *w, *p, *g; // the workspace's arrays

    const float *qkv, *a, *b, *a_log, *dt_bias;
    const int32_t *items;
    chunk_take take;
    int n_k_heads, n_v_heads;
};

/* smem: qn, kn (CR x QP), A (CR x CR), G, beta (CR) */
#define PREP_SMEM ((size_t)sizeof(float) * (2 * CR * QP + CR * CR + 2 * CR))

/* Block (value head j, item, chunk z): U, W, P, G of the chunk's rows into the workspace. */
__global__ void __launch_bounds__(CHUNK_THREADS) gdn_chunk_prep_kernel(chunk_args p)
{
    extern __shared__ __align__(16) float csm[];
    float *qn = csm, *kn = qn + CR * QP, *Am = kn + CR * QP, *Gs = Am + CR * CR, *Bs = Gs + CR;
    const int j = blockIdx.x, hv = p.n_v_heads, hk = p.n_k_heads, tid = threadIdx.x;
    const int32_t *it = p.items + (int64_t)blockIdx.y * GDN_SEQ_ITEM_INTS;
    const int c0 = (int)blockIdx.z * CR;
    if (!chunk_taken(it, p.take) || c0 >= it[1]) // uniform: no barrier reached
        return;
    const int nc = min(CR, it[1] - c0), kh = j / (hv / hk);
    const int64_t r0 = (int64_t)it[0] + c0, width = (int64_t)(2 * hk + hv) * D;
    chunk_stage_qk(qn, kn, p.qkv, r0, nc, kh, hk, width);
    if (tid < CR) { // log decay and beta, as stage_rows computes alpha = exp(g) and beta
        float g = 0.0f, be = 0.0f;
        if (tid < nc) {
            g = gdn_log_decay(p.a[(r0 + tid) * hv + j], p.dt_bias[j], __expf(p.a_log[j]));
            be = sigmoid_f32(p.b[(r0 + tid) * hv + j]);
        }
        Gs[tid] = g;
        Bs[tid] = be;
    }
    __syncthreads();
    if (tid == 0) { // cumulative log decay (rows past nc add 0)
        float acc = 0.0f;
        for (int t = 0; t < CR; t++) {
            acc += Gs[t];
            Gs[t] = acc;
        }
    }
    __syncthreads();
    if (tid < nc)
        p.g[(r0 + tid) * hv + j] = Gs[tid];
    { // A (shared) and P (workspace): thread -> row t, columns i0 + 4m
        const int t = tid >> 2, i0 = tid & 3;
        float ak[CR / 4], aq[CR / 4];
#pragma unroll
        for (int m = 0; m < CR / 4; m++)
            ak[m] = aq[m] = 0.0f;
#pragma unroll 2
        for (int d = 0; d < D; d += 4) {
            const float4 kt = *reinterpret_cast<const float4 *>(&kn[t * QP + d]);
            const float4 qt = *reinterpret_cast<const float4 *>(&qn[t * QP + d]);
#pragma unroll
            for (int m = 0; m < CR / 4; m++) {
                const float4 ki = *reinterpret_cast<const float4 *>(&kn[(i0 + 4 * m) * QP + d]);
                ak[m] += dot4(kt, ki);
                aq[m] += dot4(qt, ki);
            }
        }
        const float gt = Gs[t], bt = Bs[t];
        float *prow = p.p + ((r0 + t) * hv + j) * CR;
#pragma unroll
        for (int m = 0; m < CR / 4; m++) {
            const int i = i0 + 4 * m;
            const float e = i <= t ? expf(gt - Gs[i]) : 0.0f;
            Am[t * CR + i] = i < t ? bt * e * ak[m] : 0.0f;
            if (t < nc)
                prow[i] = e * aq[m];
        }
    }
    __syncthreads();
    /* forward substitution, one right-hand column per thread: beta V (columns 0..D-1), then
     * beta exp(G) K (D..2D-1); x in registers (the loops unroll fully), 4 partial sums */
    const int c = tid & (D - 1);
    const bool isv = tid < D;
    float x[CR];
    const float *vcol = p.qkv + r0 * width + (int64_t)(2 * hk + j) * D + c;
#pragma unroll
    for (int t = 0; t < CR; t++)
        x[t] = t < nc ? Bs[t] * (isv ? vcol[t * width] : expf(Gs[t]) * kn[t * QP + c]) : 0.0f;
#pragma unroll
    for (int t = 1; t < CR; t++) {
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma unroll
        for (int i = 0; i + 3 < t; i += 4) {
            const float4 a4 = *reinterpret_cast<const float4 *>(&Am[t * CR + i]);
            s0 += a4.x * x[i];
            s1 += a4.y * x[i + 1];
            s2 += a4.z * x[i + 2];
            s3 += a4.w * x[i + 3];
        }
#pragma unroll
        for (int i = t & ~3; i < t; i++)
            s0 += Am[t * CR + i] * x[i];
        x[t] -= (s0 + s1) + (s2 + s3);
    }
    float *dst = (isv ? p.u : p.w) + (r0 * hv + j) * D + c;
#pragma unroll
    for (int t = 0; t < CR; t++)
        if (t < nc)
            dst[(int64_t)t * hv * D] = x[t];
}

/* smem: qn, kn (CR x QP), the state tile (D x SPT), d (CR x SPT), G, exp(G), exp(G_last - G) */
#define STATE_SMEM ((size_t)sizeof(float) * (2 * CR * QP + D * SPT + CR * SPT + 3 * CR))

/* Block (value head j x column tile, item): the item's chunks in order; raw o to out. */
__global__ void __launch_bounds__(CHUNK_THREADS, 2) gdn_chunk_state_kernel(chunk_args p)
{
    extern __shared__ __align__(16) float csm[];
    float *qn = csm, *kn = qn + CR * QP, *Ss = kn + CR * QP, *Dm = Ss + D * SPT;
    float *Gs = Dm + CR * SPT, *Eg = Gs + CR, *El = Eg + CR;
    constexpr int NT = D / CT;
    const int j = blockIdx.x / NT, col0 = (blockIdx.x % NT) * CT;
    const int hv = p.n_v_heads, hk = p.n_k_heads, tid = threadIdx.x;
    const int32_t *it = p.items + (int64_t)blockIdx.y * GDN_SEQ_ITEM_INTS;
    if (!chunk_taken(it, p.take)) // uniform
        return;
    const int n = it[1], kh = j / (hv / hk);
    const int64_t width = (int64_t)(2 * hk + hv) * D, vw = (int64_t)hv * D;
    float *Sg = p.state + (int64_t)it[2] * p.sstride + (int64_t)j * D * D + col0;
    for (int e = tid; e < D * CT; e += CHUNK_THREADS)
        Ss[(e / CT) * SPT + e % CT] = Sg[(int64_t)(e / CT) * D + e % CT];
    const int t = tid >> 2, c4 = (tid & 3) * 4;    // phases 1-2: row t, columns c4 .. c4+3
    const int k = tid >> 1, c8 = (tid & 1) * 8;    // phase 3: state row k, columns c8 .. c8+7
    for (int c0 = 0; c0 < n; c0 += CR) {
        const int nc = min(CR, n - c0);
        const int64_t r0 = (int64_t)it[0] + c0;
        __syncthreads(); // the previous chunk's shared data consumed, the state tile loaded
        chunk_stage_qk(qn, kn, p.qkv, r0, nc, kh, hk, width);
        if (tid < CR)
            Gs[tid] = tid < nc ? p.g[(r0 + tid) * hv + j] : 0.0f;
        __syncthreads();
        if (tid < CR) {
            const float gl = Gs[nc - 1];
            Eg[tid] = tid < nc ? expf(Gs[tid]) : 0.0f;
            El[tid] = tid < nc ? expf(gl - Gs[tid]) : 0.0f;
        }
        /* phase 1: d = U - W S and q.S (one pass over the state tile) */
        float dv[4] = {0.0f, 0.0f, 0.0f, 0.0f}, o1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (t < nc) {
            const float4 u4 = *reinterpret_cast<const float4 *>(
                &p.u[((r0 + t) * hv + j) * D + col0 + c4]);
            dv[0] = u4.x, dv[1] = u4.y, dv[2] = u4.z, dv[3] = u4.w;
        }
        const float *wrow = p.w + ((r0 + (t < nc ? t : 0)) * hv + j) * D;
#pragma unroll 8
        for (int kk = 0; kk < D; kk += 4) {
            const float4 w4 = *reinterpret_cast<const float4 *>(&wrow[kk]);
            const float4 q4 = *reinterpret_cast<const float4 *>(&qn[t * QP + kk]);
            const float wv[4] = {w4.x, w4.y, w4.z, w4.w}, qv[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float4 s4 = *reinterpret_cast<const float4 *>(&Ss[(kk + u) * SPT + c4]);
                dv[0] -= wv[u] * s4.x;
                dv[1] -= wv[u] * s4.y;
                dv[2] -= wv[u] * s4.z;
                dv[3] -= wv[u] * s4.w;
                o1[0] += qv[u] * s4.x;
                o1[1] += qv[u] * s4.y;
                o1[2] += qv[u] * s4.z;
                o1[3] += qv[u] * s4.w;
            }
        }
        if (t >= nc)
            dv[0] = dv[1] = dv[2] = dv[3] = 0.0f;
        *reinterpret_cast<float4 *>(&Dm[t * SPT + c4]) = make_float4(dv[0], dv[1], dv[2], dv[3]);
        __syncthreads(); // d complete; every read of the state tile done
        /* phase 2: o = exp(G_t) q.S + sum_{i<=t} P_ti d_i (P is 0 above the diagonal) */
        if (t < nc) {
            const float eg = Eg[t];
            float o[4] = {eg * o1[0], eg * o1[1], eg * o1[2], eg * o1[3]};
            const float *prow = p.p + ((r0 + t) * hv + j) * CR;
#pragma unroll
            for (int i = 0; i < CR; i += 4) { // P is 0 above the diagonal: no bound on t
                const float4 p4 = *reinterpret_cast<const float4 *>(&prow[i]);
                const float pv[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const float4 d4 = *reinterpret_cast<const float4 *>(&Dm[(i + u) * SPT + c4]);
                    o[0] += pv[u] * d4.x;
                    o[1] += pv[u] * d4.y;
                    o[2] += pv[u] * d4.z;
                    o[3] += pv[u] * d4.w;
                }
            }
            *reinterpret_cast<float4 *>(&p.out[(r0 + t) * vw + (int64_t)j * D + col0 + c4]) =
                make_float4(o[0], o[1], o[2], o[3]);
        }
        /* phase 3: S = exp(G_last) S + sum_t exp(G_last - G_t) k_t d_t^T (own entries only) */
        {
            const float gl = expf(Gs[nc - 1]);
            float sa[8];
#pragma unroll
            for (int u = 0; u < 8; u++)
                sa[u] = gl * Ss[k * SPT + c8 + u];
            for (int tt = 0; tt < nc; tt++) {
                const float e = El[tt] * kn[tt * QP + k];
                const float4 da = *reinterpret_cast<const float4 *>(&Dm[tt * SPT + c8]);
                const float4 db = *reinterpret_cast<const float4 *>(&Dm[tt * SPT + c8 + 4]);
                sa[0] += e * da.x;
                sa[1] += e * da.y;
                sa[2] += e * da.z;
                sa[3] += e * da.w;
                sa[4] += e * db.x;
                sa[5] += e * db.y;
                sa[6] += e * db.z;
                sa[7] += e * db.w;
            }
#pragma unroll
            for (int u = 0; u < 8; u++)
                Ss[k * SPT + c8 + u] = sa[u];
        }
    }
    __syncthreads();
    for (int e = tid; e < D * CT; e += CHUNK_THREADS)
        Sg[(int64_t)(e / CT) * D + e % CT] = Ss[(e / CT) * SPT + e % CT];
}

/* time chunks of the conv: enough blocks to fill the GPU (~GDN_CONV_BLOCKS), chunks of at least
 * GDN_CONV_MIN_CHUNK rows of the longest item */
#define GDN_CONV_BLOCKS 2048
#define GDN_CONV_MIN_CHUNK 16

int gdn_seq_conv_cuda(float *out, float *state, int64_t state_stride, float *snap, int n_snap,
                      const float *x, const float *w, const int32_t *items, int n_items,
                      int max_rows, int channels, int kc, cudaStream_t stream)
{
    if (!out || !state || !x || !w || !items || n_items < 0 || n_items > 65535 || channels <= 0 ||
        kc < 2 || kc > GDN_CONV_MAX_KC || n_snap < 0 || state_stride < 0 ||
        (state_stride && state_stride < (int64_t)channels * (kc - 1)))
        return ERR_INVAL;
    if (!state_stride)
        state_stride = (int64_t)channels * (kc - 1);
    if (n_items == 0)
        return 0;
    const int64_t xy = (int64_t)CEIL_DIV(channels, 256) * n_items;
    int64_t z = CEIL_DIV((int64_t)(max_rows > 0 ? max_rows : 1), GDN_CONV_MIN_CHUNK);
    if (z > CEIL_DIV((int64_t)GDN_CONV_BLOCKS, xy))
        z = CEIL_DIV((int64_t)GDN_CONV_BLOCKS, xy);
    if (z > 65535)
        z = 65535;
    dim3 grid(CEIL_DIV(channels, 256), n_items, (unsigned)z);
    kcuda_launch_pdl(gdn_seq_conv_kernel, grid, 256, 0, stream, out, state, state_stride, snap,
                     n_snap, x, w, items, channels, kc);
    return kcuda_launch_status("gdn_seq_conv");
}

/* Tiles per head: one block per (item, value head) leaves most SMs idle at a few items; from
 * ~2 blocks per SM a whole head per block (the norm fused, q/k staged once) is the better deal. */
#define GDN_SEQ_SMS 132 // H200; only picks the tile count
#define NORM_BLOCKS 256 // gdn_seq_norm_kernel: blocks over all items (8 warps each)

/* Tiles a head by the items' heads (blocks for the SMs), and where the pass's items have one row
 * each (max_rows 1; 0: unknown) and fewer heads than the SMs, GDN_ONE_ROW_TILES: one block a head
 * holds the state and normalises in place, where four tiles a head end in a counter and the last
 * tile's norm (two more dependent round trips). Measured on the H200 at batch 1 (docs/PERF.md,
 * eighteenth session, with the states read before the PDL wait): 1 tile against 4 BF16 379.8 ->
 * 384.1 tok/s, FP8 368.8 -> 375.3, NVFP4 450.3 -> 457.7; 2 tiles as 4. -DGDN_ONE_ROW_TILES=4
 * builds the rule before (tests/gpu/measure.sh sessab). */
#ifndef GDN_ONE_ROW_TILES
#define GDN_ONE_ROW_TILES 1
#endif
int gdn_seq_step_tiles(int n_items, int n_v_heads, int max_rows)
{
    const int64_t heads = (int64_t)n_items * n_v_heads;
    if (max_rows == 1 && heads < GDN_SEQ_SMS)
        return GDN_ONE_ROW_TILES;
    return heads >= 2 * GDN_SEQ_SMS ? 1 : heads >= GDN_SEQ_SMS ? 2 : 4;
}

template <int T>
static void launch_step(float *out, float *state, int64_t sstride, float *snap, int n_snap,
                        const float *qkv, const float *z, const float *a, const float *b,
                        const float *a_log, const float *dt_bias, const float *norm_w,
                        const int32_t *items, int n_items, int n_k_heads, int n_v_heads, float eps,
                        chunk_take take, unsigned *cnt, cudaStream_t stream)
{
    dim3 grid(n_v_heads * T, n_items);
    const conv_fuse none = {nullptr, 0, nullptr, nullptr, nullptr, 0, 0, nullptr};
    kcuda_launch_pdl(gdn_seq_step_kernel<T>, grid, HEAD_THREADS / T, 0, stream, out, state, sstride,
                     snap, n_snap, qkv, z, a, b, a_log, dt_bias, norm_w, items, n_k_heads,
                     n_v_heads, eps, take, cnt, none);
}

static bool step_args_ok(float *out, float *state, int64_t state_stride, int n_snap,
                         const float *qkv, const float *z, const float *a, const float *b,
                         const float *a_log, const float *dt_bias, const float *norm_w,
                         const int32_t *items, int n_items, int n_k_heads, int n_v_heads)
{
    return out && state && qkv && z && a && b && a_log && dt_bias && norm_w && items &&
           n_items >= 0 && n_items <= 65535 && n_k_heads > 0 && n_v_heads > 0 &&
           n_v_heads % n_k_heads == 0 && n_v_heads <= 65535 && n_snap >= 0 &&
           (state_stride == 0 || state_stride >= (int64_t)n_v_heads * D * D) &&
           state_stride % 4 == 0;
}

/* the packed stride for 0 */
static int64_t step_stride(int64_t state_stride, int n_v_heads)
{
    return state_stride ? state_stride : (int64_t)n_v_heads * D * D;
}

/* The token-serial kernel (and its norm) over the items the chunked form does not take. cnt:
 * the fused norm's counters or NULL; short: every item has at most GDN_SEQ_FUSE_ROWS rows (no
 * norm launch with cnt). */
static int run_serial(float *out, float *state, int64_t sstride, float *snap, int n_snap,
                      const float *qkv, const float *z, const float *a, const float *b,
                      const float *a_log, const float *dt_bias, const float *norm_w,
                      const int32_t *items, int n_items, int n_k_heads, int n_v_heads, float eps,
                      int tiles, int max_rows, chunk_take take, unsigned *cnt, bool short_items,
                      cudaStream_t stream)
{
    if (tiles == 0)
        tiles = gdn_seq_step_tiles(n_items, n_v_heads, max_rows);
    if (tiles == 1)
        launch_step<1>(out, state, sstride, snap, n_snap, qkv, z, a, b, a_log, dt_bias, norm_w,
                       items, n_items, n_k_heads, n_v_heads, eps, take, NULL, stream);
    else if (tiles == 2)
        launch_step<2>(out, state, sstride, snap, n_snap, qkv, z, a, b, a_log, dt_bias, norm_w,
                       items, n_items, n_k_heads, n_v_heads, eps, take, cnt, stream);
    else
        launch_step<4>(out, state, sstride, snap, n_snap, qkv, z, a, b, a_log, dt_bias, norm_w,
                       items, n_items, n_k_heads, n_v_heads, eps, take, cnt, stream);
    int rc = kcuda_launch_status("gdn_seq_step");
    if (rc < 0 || tiles == 1 || (cnt && short_items))
        return rc;
    dim3 grid(CEIL_DIV(NORM_BLOCKS, n_items), n_items);
    kcuda_launch_pdl(gdn_seq_norm_kernel, grid, 256, 0, stream, out, z, norm_w, items, n_v_heads,
                     eps, take, 0, cnt ? 1 : 0);
    return kcuda_launch_status("gdn_seq_norm");
}

int gdn_seq_step_cuda_tiles(float *out, float *state, int64_t state_stride, float *snap, int n_snap,
                            const float *qkv, const float *z, const float *a, const float *b,
                            const float *a_log, const float *dt_bias, const float *norm_w,
                            const int32_t *items, int n_items, int n_k_heads, int n_v_heads,
                            float eps, int tiles, unsigned *norm_cnt, cudaStream_t stream)
{
    if (!step_args_ok(out, state, state_stride, n_snap, qkv, z, a, b, a_log, dt_bias, norm_w,
                      items, n_items, n_k_heads, n_v_heads) ||
        (tiles != 0 && tiles != 1 && tiles != 2 && tiles != 4))
        return ERR_INVAL;
    if (n_items == 0)
        return 0;
    const chunk_take none = {0, 0, 0};
    return run_serial(out, state, step_stride(state_stride, n_v_heads), snap, n_snap, qkv, z, a, b,
                      a_log, dt_bias, norm_w, items, n_items, n_k_heads, n_v_heads, eps, tiles, 0,
                      none, norm_cnt, false, stream);
}

int gdn_seq_step_cuda(float *out, float *state, int64_t state_stride, float *snap, int n_snap,
                      const float *qkv, const float *z, const float *a, const float *b,
                      const float *a_log, const float *dt_bias, const float *norm_w,
                      const int32_t *items, int n_items, int n_k_heads, int n_v_heads, float eps,
                      cudaStream_t stream)
{
    return gdn_seq_step_cuda_tiles(out, state, state_stride, snap, n_snap, qkv, z, a, b, a_log,
                                   dt_bias, norm_w, items, n_items, n_k_heads, n_v_heads, eps, 0,
                                   NULL, stream);
}

int gdn_seq_conv_step_cuda(float *out, float *state, int64_t state_stride, float *snap,
                           float *conv_state, int64_t conv_stride, float *conv_snap, int n_snap,
                           const float *x, const float *conv_w, int channels, int kc,
                           const float *z, const float *a, const float *b, const float *a_log,
                           const float *dt_bias, const float *norm_w, const int32_t *items,
                           int n_items, int n_k_heads, int n_v_heads, float eps, unsigned *cnt,
                           cudaStream_t stream)
{
    if (!step_args_ok(out, state, state_stride, n_snap, x, z, a, b, a_log, dt_bias, norm_w, items,
                      n_items, n_k_heads, n_v_heads) ||
        !conv_state || !conv_w || !cnt || kc < 2 || kc > GDN_CONV_MAX_KC ||
        channels != (2 * n_k_heads + n_v_heads) * D || conv_stride < 0 ||
        (conv_stride && conv_stride < (int64_t)channels * (kc - 1)))
        return ERR_INVAL;
    if (gdn_seq_step_tiles(n_items, n_v_heads, 1) != 1)
        return ERR_UNSUPPORTED;
    if (n_items == 0)
        return 0;
    conv_fuse cf;
    cf.state = conv_state;
    cf.sstride = conv_stride ? conv_stride : (int64_t)channels * (kc - 1);
    cf.snap = conv_snap;
    cf.x = x;
    cf.w = conv_w;
    cf.channels = channels;
    cf.kc = kc;
    cf.cnt = cnt;
    const chunk_take none = {0, 0, 0};
    dim3 grid(n_v_heads, n_items);
    kcuda_launch_pdl(gdn_seq_step_kernel<1, true>, grid, HEAD_THREADS, 0, stream, out, state,
                     step_stride(state_stride, n_v_heads), snap, n_snap, x, z, a, b, a_log, dt_bias,
                     norm_w, items, n_k_heads, n_v_heads, eps, none, (unsigned *)nullptr, cf);
    return kcuda_launch_status("gdn_seq_conv_step");
}

size_t gdn_seq_chunk_ws_floats(int rows, int n_v_heads)
{
    return rows > 0 && n_v_heads > 0 ? (size_t)rows * (size_t)n_v_heads * WS_PER_ROW_HEAD : 0;
}

int gdn_seq_step_chunked_cuda(float *out, float *state, int64_t state_stride, float *snap,
                              int n_snap, const float *qkv, const float *z, const float *a,
                              const float *b, const float *a_log, const float *dt_bias,
                              const float *norm_w, const int32_t *items, int n_items, int n_k_heads,
                              int n_v_heads, float eps, int chunk_min_rows, int max_rows, float *ws,
                              int ws_rows, unsigned *norm_cnt, cudaStream_t stream)
{
    if (!step_args_ok(out, state, state_stride, n_snap, qkv, z, a, b, a_log, dt_bias, norm_w,
                      items, n_items, n_k_heads, n_v_heads) ||
        (chunk_min_rows > 0 && (!ws || ws_rows <= 0 || ((uintptr_t)ws) % 16 ||
                                ((uintptr_t)out) % 16)))
        return ERR_INVAL;
    if (n_items == 0)
        return 0;
    const int nz = max_rows > 0 ? CEIL_DIV(max_rows, CR) : 0;
    if (nz > 65535)
        return ERR_INVAL;
    chunk_take take = {chunk_min_rows, nz * CR, ws_rows};
    if (chunk_min_rows <= 0 || max_rows < chunk_min_rows)
        take.min_rows = 0; // no item long enough: the token-serial kernel alone
    const int64_t sstride = step_stride(state_stride, n_v_heads);
    int rc = run_serial(out, state, sstride, snap, n_snap, qkv, z, a, b, a_log, dt_bias, norm_w,
                        items, n_items, n_k_heads, n_v_heads, eps, 0, max_rows, take, norm_cnt,
                        max_rows > 0 && max_rows <= GDN_SEQ_FUSE_ROWS, stream);
    if (rc < 0 || take.min_rows == 0)
        return rc;
    chunk_args ca;
    ca.out = out;
    ca.state = state;
    ca.sstride = sstride;
    const int64_t hd = (int64_t)ws_rows * n_v_heads * D; // floats of U and of W
    ca.u = ws;
    ca.w = ws + hd;
    ca.p = ws + 2 * hd;
    ca.g = ws + 2 * hd + (int64_t)ws_rows * n_v_heads * CR;
    ca.qkv = qkv;
    ca.a = a;
    ca.b = b;
    ca.a_log = a_log;
    ca.dt_bias = dt_bias;
    ca.items = items;
    ca.take = take;
    ca.n_k_heads = n_k_heads;
    ca.n_v_heads = n_v_heads;
    cudaError_t e =
        cudaFuncSetAttribute(reinterpret_cast<const void *>(&gdn_chunk_prep_kernel),
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)PREP_SMEM);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(reinterpret_cast<const void *>(&gdn_chunk_state_kernel),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)STATE_SMEM);
    if (e != cudaSuccess) {
        LOG_ERR("kernel_launch_failed", "op=gdn_chunk err=\"%s\"", cudaGetErrorString(e));
        return ERR_CUDA;
    }
    dim3 gp(n_v_heads, n_items, nz);
    gdn_chunk_prep_kernel<<<gp, CHUNK_THREADS, PREP_SMEM, stream>>>(ca);
    if ((rc = kcuda_launch_status("gdn_chunk_prep")) < 0)
        return rc;
    dim3 gs(n_v_heads * (D / CT), n_items);
    gdn_chunk_state_kernel<<<gs, CHUNK_THREADS, STATE_SMEM, stream>>>(ca);
    if ((rc = kcuda_launch_status("gdn_chunk_state")) < 0)
        return rc;
    dim3 gn(CEIL_DIV(NORM_BLOCKS, n_items), n_items);
    kcuda_launch_pdl(gdn_seq_norm_kernel, gn, 256, 0, stream, out, z, norm_w, items, n_v_heads, eps,
                     take, 1, 0);
    return kcuda_launch_status("gdn_seq_norm");
}
