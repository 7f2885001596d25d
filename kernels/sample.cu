/* sample: one 1024-thread block per row (see sample.h for the semantics).
 *   penalties in place -> argmax by order key -> [greedy: done]
 *   -> top-k: radix select (4 passes of 8 bits over the fp32 order key) of the k-th key by count,
 *      Zk from the exact bucket weights; top-p: the same select by cumulative weight
 *   -> ties at the cut key resolved by index (a chunked count + block scan)
 *   -> draw: chunked weight sums in index order, block scan, one thread walks its chunk.
 * Every fp32 operation that feeds a decision is an explicit non-FTZ round-to-nearest PTX op
 * (the library builds with --use_fast_math) mirroring sample_ref.c; comparisons that could see a
 * subnormal are done on bit patterns. Weight sums are uint64, so their order does not matter. */
#include "sample.h"

#include "internal/kcuda.cuh"

#define NT 1024
#define NWARP (NT / 32)

struct sample_smem {
    unsigned long long mass[256];
    unsigned int cnt[256];
    unsigned long long wscan[NWARP];
    unsigned int wkey[NWARP];
    int widx[NWARP];
    unsigned int prefix;    // select: the key bits chosen so far
    unsigned int above_cnt; // select: elements with a larger key
    unsigned long long above_mass;
    unsigned int tie_cnt; // select: elements with key == the final prefix
    int cut_id;
    int tok; // the drawn token (-1 = none)
    float logprob;
};

// ---- exact fp32 operations (no FTZ, no contraction) ----

static __device__ __forceinline__ float x_mul(float a, float b)
{
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

static __device__ __forceinline__ float x_add(float a, float b)
{
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

static __device__ __forceinline__ float x_sub(float a, float b)
{
    float r;
    asm("sub.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

static __device__ __forceinline__ float x_div(float a, float b)
{
    float r;
    asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

/* sample_kexp (sample_ref.c), operation by operation. */
static __device__ float d_kexp(float x)
{
    if (!(x >= -31.0f))
        return 0.0f;
    if (x >= 0.0f)
        return 1.0f;
    const float n = floorf(x_add(x_mul(x, 1.44269502f), 0.5f));
    float r = x_sub(x, x_mul(n, 0.693145751953125f));
    r = x_sub(r, x_mul(n, 1.428606765330187e-06f));
    float p = 0.000198412701f;
    p = x_add(x_mul(p, r), 0.00138888892f);
    p = x_add(x_mul(p, r), 0.00833333377f);
    p = x_add(x_mul(p, r), 0.0416666679f);
    p = x_add(x_mul(p, r), 0.166666672f);
    p = x_add(x_mul(p, r), 0.5f);
    p = x_add(x_mul(p, r), 1.0f);
    p = x_add(x_mul(p, r), 1.0f);
    const float scale = __uint_as_float((unsigned int)((int)n + 127) << 23);
    return x_mul(p, scale);
}

/* NaN -> -inf, -0 -> +0 (bit tests: FTZ-proof). */
static __device__ __forceinline__ float canon(float l)
{
    const unsigned int a = __float_as_uint(l) & 0x7fffffffu;
    if (a > 0x7f800000u)
        return -INFINITY;
    return a == 0 ? 0.0f : l;
}

/* x != 0 including subnormals (the FTZ comparison would say 0). */
static __device__ __forceinline__ bool nonzero(float x)
{
    return (__float_as_uint(x) & 0x7fffffffu) != 0;
}

static __device__ __forceinline__ unsigned int okey(float l)
{
    const unsigned int u = __float_as_uint(l);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static __device__ __forceinline__ float key_to_float(unsigned int k)
{
    return __uint_as_float((k & 0x80000000u) ? (k ^ 0x80000000u) : ~k);
}

static __device__ __forceinline__ unsigned long long weight(float l, float mx, float inv_t)
{
    const float d = x_sub(l, mx);
    const float x = (__float_as_uint(d) & 0x7fffffffu) == 0 ? 0.0f : x_mul(d, inv_t);
    return (unsigned long long)x_mul(d_kexp(x), (float)SAMPLE_Q_ONE);
}

// ---- block helpers (all threads call them) ----

/* Exclusive prefix sum of v over the block in thread order; *total gets the sum. */
static __device__ unsigned long long block_scan_u64(unsigned long long v, unsigned long long *total,
                                                    struct sample_smem *s)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned long long x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o)
            x += y;
    }
    __syncthreads();
    if (lane == 31)
        s->wscan[warp] = x;
    __syncthreads();
    if (warp == 0) {
        unsigned long long w = s->wscan[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned long long y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o)
                w += y;
        }
        s->wscan[lane] = w;
    }
    __syncthreads();
    *total = s->wscan[NWARP - 1];
    return (warp ? s->wscan[warp - 1] : 0ull) + x - v;
}

/* Largest order key of the row, the lowest index on ties. */
static __device__ void block_argmax(const float *l, int V, unsigned int *key, int *idx,
                                    struct sample_smem *s)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned int bk = 0;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < V; i += NT) {
        const unsigned int k = okey(canon(l[i]));
        if (k > bk) { // i grows within a thread: > keeps the lowest index
            bk = k;
            bi = i;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned int ok = __shfl_xor_sync(0xffffffffu, bk, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ok > bk || (ok == bk && oi < bi)) {
            bk = ok;
            bi = oi;
        }
    }
    __syncthreads();
    if (lane == 0) {
        s->wkey[warp] = bk;
        s->widx[warp] = bi;
    }
    __syncthreads();
    bk = s->wkey[lane];
    bi = s->widx[lane];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned int ok = __shfl_xor_sync(0xffffffffu, bk, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ok > bk || (ok == bk && oi < bi)) {
            bk = ok;
            bi = oi;
        }
    }
    *key = bk;
    *idx = bi;
}

/* Radix select over the order keys, from the largest: by_mass == 0 finds the key of the k-th
 * element (count), by_mass == 1 the key where the cumulative weight first reaches thr. Leaves
 * in s: prefix (the key), above_cnt/above_mass (larger keys), tie_cnt (elements at the key).
 * Weights (and so above_mass) are only computed when by_mass or need_mass. */
static __device__ void block_select(const float *l, int V, float mx, float inv_t, int by_mass,
                                    int need_mass, unsigned int k, double thr,
                                    struct sample_smem *s)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) {
        s->prefix = 0;
        s->above_cnt = 0;
        s->above_mass = 0;
        s->tie_cnt = 0;
    }
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += NT) {
            s->cnt[b] = 0;
            s->mass[b] = 0;
        }
        __syncthreads();
        const unsigned int prefix = s->prefix;
        const unsigned int hi_mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
        for (int base = warp * 32; base < V; base += NT) {
            const int i = base + lane;
            float li = 0.0f;
            bool in = false;
            unsigned int key = 0;
            if (i < V) {
                li = canon(l[i]);
                key = okey(li);
                in = (key & hi_mask) == (prefix & hi_mask);
            }
            const int b = in ? (int)((key >> shift) & 255u) : 256 + lane;
            const unsigned long long q =
                in && (by_mass || need_mass) ? weight(li, mx, inv_t) : 0ull;
            const unsigned int group = __match_any_sync(0xffffffffu, b);
            unsigned long long gsum = 0;
            if (__any_sync(0xffffffffu, q != 0)) {
                for (int j = 0; j < 32; j++) {
                    const unsigned long long v = __shfl_sync(0xffffffffu, q, j);
                    if ((group >> j) & 1u)
                        gsum += v;
                }
            }
            if (in && lane == __ffs(group) - 1) {
                atomicAdd(&s->cnt[b], (unsigned int)__popc(group));
                if (gsum)
                    atomicAdd(&s->mass[b], gsum);
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int sel = -1, last = -1;
            for (int b = 255; b >= 0; b--) {
                if (s->cnt[b] == 0)
                    continue;
                last = b;
                const bool hit = by_mass ? (double)(s->above_mass + s->mass[b]) >= thr
                                         : s->above_cnt + s->cnt[b] >= k;
                if (hit) {
                    sel = b;
                    break;
                }
                s->above_cnt += s->cnt[b];
                s->above_mass += s->mass[b];
            }
            if (sel < 0) { // unreachable for valid targets; stay in range regardless
                sel = last < 0 ? 0 : last;
                if (last >= 0) {
                    s->above_cnt -= s->cnt[sel];
                    s->above_mass -= s->mass[sel];
                }
            }
            s->prefix = prefix | ((unsigned int)sel << shift);
            s->tie_cnt = s->cnt[sel];
        }
        __syncthreads();
    }
}

/* Index of the m-th (1-based) element in index order whose key is cut; s->cut_id. */
static __device__ void block_tie_index(const float *l, int V, unsigned int cut, unsigned int m,
                                       struct sample_smem *s)
{
    const int chunk = (V + NT - 1) / NT;
    const int lo = threadIdx.x * chunk, hi = min(V, lo + chunk);
    unsigned long long c = 0, total;
    for (int i = lo; i < hi; i++)
        c += okey(canon(l[i])) == cut;
    const unsigned long long e = block_scan_u64(c, &total, s);
    if (e < m && m <= e + c) {
        unsigned long long n = e;
        for (int i = lo; i < hi; i++)
            if (okey(canon(l[i])) == cut && ++n == m) {
                s->cut_id = i;
                break;
            }
    }
    __syncthreads();
}

__global__ void __launch_bounds__(NT)
    sample_kernel(int32_t *tokens, float *logprobs, float *logits, const struct sample_row *rows,
                  const int32_t *pen_tok, const int32_t *pen_cnt, int V)
{
    __shared__ struct sample_smem s;
    const struct sample_row r = rows[blockIdx.x];
    float *l = logits + (int64_t)blockIdx.x * V;

    // 1. penalties (tokens unique within the row: no two threads write one logit)
    if (r.repetition_penalty != 1.0f || nonzero(r.presence_penalty) || nonzero(r.frequency_penalty))
        for (int j = threadIdx.x; j < r.pen_n; j += NT) {
            const int32_t t = pen_tok[r.pen_off + j], c = pen_cnt[r.pen_off + j];
            if (t < 0 || t >= V || c <= 0)
                continue;
            float x = l[t];
            if ((__float_as_uint(x) & 0x7fffffffu) > 0x7f800000u)
                continue; // NaN: left as it is (an op would give 0x7fffffff, see sample.h)
            if (r.repetition_penalty != 1.0f) {
                const int xb = __float_as_int(x);
                const bool pos = xb > 0 && xb <= 0x7f800000; // x > 0, subnormals included
                x = pos ? x_div(x, r.repetition_penalty) : x_mul(x, r.repetition_penalty);
            }
            x = x_sub(x, r.presence_penalty);
            x = x_sub(x, x_mul(r.frequency_penalty, (float)c));
            l[t] = x;
        }
    if (threadIdx.x == 0) {
        s.cut_id = 0x7fffffff;
        s.tok = -1;
        s.logprob = 0.0f;
        s.tie_cnt = 0;
    }
    __syncthreads();

    // 2. argmax; greedy rows stop here
    unsigned int mkey;
    int amax;
    block_argmax(l, V, &mkey, &amax, &s);
    const float mx = key_to_float(mkey);
    if (__float_as_int(r.temperature) <= 0 || r.top_k == 1 || !isfinite(mx)) { // T <= 0
        if (threadIdx.x == 0) {
            tokens[blockIdx.x] = amax;
            if (logprobs)
                logprobs[blockIdx.x] = 0.0f;
        }
        return;
    }
    const float inv_t = x_div(1.0f, r.temperature);

    // 3-4. truncation: the kept prefix of the order is key > cut, or key == cut and id <= cut_id
    unsigned int cut = 0;
    const bool use_k = r.top_k > 0 && r.top_k < V, use_p = r.top_p < 1.0f;
    if (use_k || use_p) {
        unsigned long long zk;
        unsigned int m = 0;
        if (use_k) {
            block_select(l, V, mx, inv_t, 0, use_p, (unsigned int)r.top_k, 0.0, &s);
            cut = s.prefix;
            m = (unsigned int)r.top_k - s.above_cnt;
            zk = s.above_mass + (unsigned long long)m * weight(key_to_float(cut), mx, inv_t);
            // (zk is only used by top-p, the only case where the select summed weights)
        } else {
            unsigned long long part = 0;
            for (int i = threadIdx.x; i < V; i += NT)
                part += weight(canon(l[i]), mx, inv_t);
            block_scan_u64(part, &zk, &s);
        }
        unsigned int n_tie = s.tie_cnt;
        if (use_p) {
            const double thr = (double)r.top_p * (double)zk;
            __syncthreads();
            block_select(l, V, mx, inv_t, 1, 1, 0u, thr, &s);
            cut = s.prefix;
            n_tie = s.tie_cnt;
            const unsigned long long a = s.above_mass, q = weight(key_to_float(cut), mx, inv_t);
            unsigned int lo = 1, hi = n_tie > 0 ? n_tie : 1;
            while (lo < hi) { // the fewest ties that reach thr (the same on every thread)
                const unsigned int mid = lo + (hi - lo) / 2;
                if ((double)(a + (unsigned long long)mid * q) >= thr)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            m = lo;
        }
        if (m < n_tie)
            block_tie_index(l, V, cut, m, &s);
    }
    const int cut_id = s.cut_id;
    const bool use_min = __float_as_int(r.min_p) > 0; // min_p > 0 (not NaN: checked)
    const double min_thr = (double)r.min_p * SAMPLE_Q_ONE;

    // 5. draw in index order over the kept set
    const int chunk = (V + NT - 1) / NT;
    const int lo = threadIdx.x * chunk, hi = min(V, lo + chunk);
    unsigned long long part = 0, total;
    for (int i = lo; i < hi; i++) {
        const float li = canon(l[i]);
        const unsigned int k = okey(li);
        if (k < cut || (k == cut && i > cut_id))
            continue;
        const unsigned long long q = weight(li, mx, inv_t);
        if (!use_min || (double)q >= min_thr)
            part += q;
    }
    const unsigned long long e = block_scan_u64(part, &total, &s);
    unsigned long long u = (unsigned long long)(r.u * (double)total);
    if (u > total - 1)
        u = total - 1;
    if (e <= u && u < e + part) {
        unsigned long long c = e;
        for (int i = lo; i < hi; i++) {
            const float li = canon(l[i]);
            const unsigned int k = okey(li);
            if (k < cut || (k == cut && i > cut_id))
                continue;
            const unsigned long long q = weight(li, mx, inv_t);
            if (use_min && (double)q < min_thr)
                continue;
            c += q;
            if (c > u) {
                s.tok = i;
                s.logprob = (float)log((double)q / (double)total);
                break;
            }
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        tokens[blockIdx.x] = s.tok >= 0 ? s.tok : amax;
        if (logprobs)
            logprobs[blockIdx.x] = s.logprob;
    }
}

int sample_cuda(int32_t *tokens, float *logprobs, float *logits, const struct sample_row *rows,
                const int32_t *pen_tok, const int32_t *pen_cnt, int B, int V, cudaStream_t stream)
{
    if (!tokens || !logits || !rows || B < 0 || V < 1 || V > SAMPLE_MAX_VOCAB)
        return ERR_INVAL;
    if (B == 0)
        return 0;
    sample_kernel<<<B, NT, 0, stream>>>(tokens, logprobs, logits, rows, pen_tok, pen_cnt, V);
    return kcuda_launch_status("sample");
}
