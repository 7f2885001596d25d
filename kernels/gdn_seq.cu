/* gdn_seq: conv = one thread per (item, channel, time chunk) with the kc-1 window in registers; step = one
 * head's S (128x128) in the registers of 512 threads (4 lanes per value column), split over
 * 1, 2 or 4 blocks per (item, value head) by column tiles so that a few items still fill the GPU,
 * the rows of an item run in order inside each block; the gated RMSNorm couples the columns, so
 * with more than one tile it runs as a second kernel over the raw o left in out. */
#include "gdn_seq.h"

#include "common/xalloc.h"
#include "gdn_conv.h"
#include "internal/kcuda.cuh"

#define D GDN_SEQ_HEAD_DIM
#define MAXW (GDN_CONV_MAX_KC - 1)

/* conv: one thread per (item, channel, time chunk): chunk z covers the item's rows z*chunk ..
 * (chunk = ceil(n / gridDim.z), at least kc-1), its window of the kc-1 inputs before its first
 * row read from x, or from the slot's state for rows before the item. Every row's sum is the
 * same operations in the same order as with one chunk. Only the chunk-0 thread reads the state
 * (the others start at least kc-1 rows in) and it alone writes it back at the end: the window
 * after the item's last row, from x or (a short item) the old state, read before overwritten. */
__global__ void gdn_seq_conv_kernel(float *out, float *state, float *snap, int n_snap,
                                    const float *x, const float *w, const int32_t *items,
                                    int channels, int kc)
{
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
    float *st = state + ((int64_t)it[2] * channels + c) * kw;
    const float *wc = w + (int64_t)c * kc;
    float win[MAXW], wt[MAXW];
#pragma unroll
    for (int j = 0; j < MAXW; j++) {
        const int p = t0 - kw + j; /* input position of window entry j (state: p < 0) */
        win[j] = j < kw ? (p >= 0 ? x[(r0 + p) * channels + c] : st[p + kw]) : 0.0f;
        wt[j] = j < kw ? wc[j] : 0.0f;
    }
    const float wl = wc[kw];
    for (int t = t0; t < t1; t++) {
        const int64_t r = r0 + t;
        const float xv = x[r * channels + c];
        float u = wl * xv;
#pragma unroll
        for (int j = 0; j < MAXW; j++)
            if (j < kw)
                u += wt[j] * win[j];
        out[r * channels + c] = silu_f32(u);
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
static __device__ __forceinline__ void gated_norm_warp(float *y, const float *o, const float *zr,
                                                       const float *nw, float eps)
{
    const int l = threadIdx.x & 31;
    float v[D / 32], ss = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 32; i++) {
        v[i] = o[l + 32 * i];
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
            float sq = 0.0f, sk = 0.0f;
#pragma unroll
            for (int i = 0; i < D / 32; i++) {
                sq += qv[u][i] * qv[u][i];
                sk += kv[u][i] * kv[u][i];
            }
            const float iq = rsqrtf(warp_sum(sq) + 1e-6f), ik = rsqrtf(warp_sum(sk) + 1e-6f);
#pragma unroll
            for (int i = 0; i < D / 32; i++) {
                sm.qn[t][lane + 32 * i] = qv[u][i] * iq * rsqrtf((float)D);
                sm.kn[t][lane + 32 * i] = kv[u][i] * ik;
            }
            if (lane == 0) {
                const float xa = av[u] + dtb;
                const float sp = xa > 20.0f ? xa : log1pf(__expf(xa));
                sm.ga[t] = __expf(-a_exp * sp);
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

/* Block = (tile, value head j) x item: the item's rows in chunks of CH, each chunk staged in
 * shared memory and then run row by row with no block barrier. T == 1: o of the chunk kept in
 * shared memory and gated-normalised here; T > 1: o written raw to out, gdn_seq_norm_kernel
 * finishes it. */
template <int T>
__global__ void __launch_bounds__(HEAD_THREADS / T, T)
    gdn_seq_step_kernel(float *out, float *state, float *snap, int n_snap, const float *qkv,
                        const float *z, const float *a, const float *b, const float *a_log,
                        const float *dt_bias, const float *norm_w, const int32_t *items,
                        int n_k_heads, int n_v_heads, float eps)
{
    constexpr int COLS = D / T, NW = COLS * LANES / 32, CH = step_smem<T>::CH;
    __shared__ __align__(16) step_smem<T> sm;
    static_assert(sizeof(step_smem<T>) <= 48 * 1024, "static shared memory");
    const int j = blockIdx.x / T, tile = blockIdx.x % T;
    const int32_t *it = items + (int64_t)blockIdx.y * GDN_SEQ_ITEM_INTS;
    const int64_t r0 = it[0];
    const int n = it[1], sn = it[3];
    if (n <= 0) // uniform over the block: no thread reaches a barrier
        return;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, p = lane >> 3;
    const int c = w * 8 + (lane & 7), col = tile * COLS + c;
    const int64_t vw = (int64_t)n_v_heads * D, hs = (int64_t)D * D;
    const float a_exp = __expf(a_log[j]), dtb = dt_bias[j];
    float *S = state + ((int64_t)it[2] * n_v_heads + j) * hs + col;
    float s[ROWS];
#pragma unroll
    for (int m = 0; m < ROWS / 4; m++)
#pragma unroll
        for (int r = 0; r < 4; r++)
            s[4 * m + r] = S[(int64_t)(16 * m + 4 * p + r) * D];
    for (int t0 = 0; t0 < n; t0 += CH) {
        const int nc = min(CH, n - t0);
        __syncthreads(); // the previous chunk's shared data is consumed
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
}

/* The gated RMSNorm of the raw o that gdn_seq_step_kernel<T > 1> left in out, in place: one warp
 * per (row, value head) of the item, warps striding over the item's rows. */
__global__ void __launch_bounds__(256)
    gdn_seq_norm_kernel(float *out, const float *z, const float *norm_w, const int32_t *items,
                        int n_v_heads, float eps)
{
    const int32_t *it = items + (int64_t)blockIdx.y * GDN_SEQ_ITEM_INTS;
    const int64_t r0 = it[0], pairs = (int64_t)it[1] * n_v_heads, vw = (int64_t)n_v_heads * D;
    const int nw = blockDim.x >> 5;
    for (int64_t i = (int64_t)blockIdx.x * nw + (threadIdx.x >> 5); i < pairs;
         i += (int64_t)gridDim.x * nw) {
        const int64_t o0 = (r0 + i / n_v_heads) * vw + i % n_v_heads * D;
        gated_norm_warp(out + o0, out + o0, z + o0, norm_w, eps);
    }
}

/* time chunks of the conv: enough blocks to fill the GPU (~GDN_CONV_BLOCKS), chunks of at least
 * GDN_CONV_MIN_CHUNK rows of the longest item */
#define GDN_CONV_BLOCKS 2048
#define GDN_CONV_MIN_CHUNK 16

int gdn_seq_conv_cuda(float *out, float *state, float *snap, int n_snap, const float *x,
                      const float *w, const int32_t *items, int n_items, int max_rows,
                      int channels, int kc, cudaStream_t stream)
{
    if (!out || !state || !x || !w || !items || n_items < 0 || n_items > 65535 || channels <= 0 ||
        kc < 2 || kc > GDN_CONV_MAX_KC || n_snap < 0)
        return ERR_INVAL;
    if (n_items == 0)
        return 0;
    const int64_t xy = (int64_t)CEIL_DIV(channels, 256) * n_items;
    int64_t z = CEIL_DIV((int64_t)(max_rows > 0 ? max_rows : 1), GDN_CONV_MIN_CHUNK);
    if (z > CEIL_DIV((int64_t)GDN_CONV_BLOCKS, xy))
        z = CEIL_DIV((int64_t)GDN_CONV_BLOCKS, xy);
    if (z > 65535)
        z = 65535;
    dim3 grid(CEIL_DIV(channels, 256), n_items, (unsigned)z);
    gdn_seq_conv_kernel<<<grid, 256, 0, stream>>>(out, state, snap, n_snap, x, w, items, channels,
                                                  kc);
    return kcuda_launch_status("gdn_seq_conv");
}

/* Tiles per head: one block per (item, value head) leaves most SMs idle at a few items; from
 * ~2 blocks per SM a whole head per block (the norm fused, q/k staged once) is the better deal. */
#define GDN_SEQ_SMS 132 // H200; only picks the tile count
#define NORM_BLOCKS 256 // gdn_seq_norm_kernel: blocks over all items (8 warps each)

static int auto_tiles(int n_items, int n_v_heads)
{
    const int64_t heads = (int64_t)n_items * n_v_heads;
    return heads >= 2 * GDN_SEQ_SMS ? 1 : heads >= GDN_SEQ_SMS ? 2 : 4;
}

template <int T>
static void launch_step(float *out, float *state, float *snap, int n_snap, const float *qkv,
                        const float *z, const float *a, const float *b, const float *a_log,
                        const float *dt_bias, const float *norm_w, const int32_t *items,
                        int n_items, int n_k_heads, int n_v_heads, float eps, cudaStream_t stream)
{
    dim3 grid(n_v_heads * T, n_items);
    gdn_seq_step_kernel<T><<<grid, HEAD_THREADS / T, 0, stream>>>(out, state, snap, n_snap, qkv, z,
                                                                  a, b, a_log, dt_bias, norm_w,
                                                                  items, n_k_heads, n_v_heads, eps);
}

int gdn_seq_step_cuda_tiles(float *out, float *state, float *snap, int n_snap, const float *qkv,
                            const float *z, const float *a, const float *b, const float *a_log,
                            const float *dt_bias, const float *norm_w, const int32_t *items,
                            int n_items, int n_k_heads, int n_v_heads, float eps, int tiles,
                            cudaStream_t stream)
{
    if (!out || !state || !qkv || !z || !a || !b || !a_log || !dt_bias || !norm_w || !items ||
        n_items < 0 || n_items > 65535 || n_k_heads <= 0 || n_v_heads <= 0 ||
        n_v_heads % n_k_heads || n_v_heads > 65535 || n_snap < 0 ||
        (tiles != 0 && tiles != 1 && tiles != 2 && tiles != 4))
        return ERR_INVAL;
    if (n_items == 0)
        return 0;
    if (tiles == 0)
        tiles = auto_tiles(n_items, n_v_heads);
    if (tiles == 1)
        launch_step<1>(out, state, snap, n_snap, qkv, z, a, b, a_log, dt_bias, norm_w, items,
                       n_items, n_k_heads, n_v_heads, eps, stream);
    else if (tiles == 2)
        launch_step<2>(out, state, snap, n_snap, qkv, z, a, b, a_log, dt_bias, norm_w, items,
                       n_items, n_k_heads, n_v_heads, eps, stream);
    else
        launch_step<4>(out, state, snap, n_snap, qkv, z, a, b, a_log, dt_bias, norm_w, items,
                       n_items, n_k_heads, n_v_heads, eps, stream);
    int rc = kcuda_launch_status("gdn_seq_step");
    if (rc < 0 || tiles == 1)
        return rc;
    dim3 grid(CEIL_DIV(NORM_BLOCKS, n_items), n_items);
    gdn_seq_norm_kernel<<<grid, 256, 0, stream>>>(out, z, norm_w, items, n_v_heads, eps);
    return kcuda_launch_status("gdn_seq_norm");
}

int gdn_seq_step_cuda(float *out, float *state, float *snap, int n_snap, const float *qkv,
                      const float *z, const float *a, const float *b, const float *a_log,
                      const float *dt_bias, const float *norm_w, const int32_t *items,
                      int n_items, int n_k_heads, int n_v_heads, float eps, cudaStream_t stream)
{
    return gdn_seq_step_cuda_tiles(out, state, snap, n_snap, qkv, z, a, b, a_log, dt_bias,
                                   norm_w, items, n_items, n_k_heads, n_v_heads, eps, 0, stream);
}
