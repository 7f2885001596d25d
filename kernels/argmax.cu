/* argmax: a row over several 512-thread blocks (16-byte loads, four in flight per thread), each
 * folding its best (value, index) into an order-preserving 64-bit key (ties -> lower index) with
 * atomicMax, the row's last block writing the id. */
#include "argmax.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/pdl.cuh"

/* (value, index) -> a key whose unsigned order is value ascending, then index descending (ties
 * -> the lower index wins a max); -0 counts as +0 (equal values); never 0 for a non-NaN value
 * (-inf gives 0x007fffff...), so 0 means "nothing yet". */
static __device__ __forceinline__ unsigned long long argmax_key(float v, int i)
{
    const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
    const uint32_t ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)ord << 32) | (0xffffffffu - (uint32_t)i);
}

/* best = max(best, key of (v, i)); NaN is never chosen */
static __device__ __forceinline__ void argmax_fold(unsigned long long &best, float v, int i)
{
    if (!isnan(v)) {
        const unsigned long long k = argmax_key(v, i);
        best = k > best ? k : best;
    }
}

static __device__ __forceinline__ unsigned long long warp_max_u64(unsigned long long k)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long ok = __shfl_xor_sync(0xffffffffu, k, o);
        k = ok > k ? ok : k;
    }
    return k;
}

#define SPLIT_THREADS 512
#define AU_SPLIT 4
/* grid (parts, rows): block b of row r takes the b-th of parts equal runs of 16-byte units (n4 >
 * 0: aligned rows) or of floats (n4 == 0); the floats past the last whole unit go to the last
 * block. ws[r]: the row's key; ws[n_rows + r]: its block counter. */
__global__ void __launch_bounds__(SPLIT_THREADS)
    argmax_kernel(int32_t *ids, const float *logits, int vocab, int n4,
                        unsigned long long *ws)
{
    kcuda_pdl_enter();
    __shared__ unsigned long long sk[SPLIT_THREADS / 32];
    __shared__ bool last;
    const int row = blockIdx.y, parts = gridDim.x, b = blockIdx.x;
    const float *l = logits + (int64_t)row * vocab;
    unsigned long long best = 0;
    constexpr int AU = AU_SPLIT; /* 16-byte loads in flight per thread */
    if (n4 > 0) {
        const int per = (n4 + parts - 1) / parts, lo = b * per, hi = min(n4, lo + per);
        const float4 *l4 = reinterpret_cast<const float4 *>(l);
        for (int i0 = lo + (int)threadIdx.x; i0 < hi; i0 += AU * SPLIT_THREADS) {
            float4 q[AU];
#pragma unroll
            for (int u = 0; u < AU; u++) {
                const int i = i0 + u * SPLIT_THREADS;
                q[u] = i < hi ? __ldg(l4 + i) : make_float4(NAN, NAN, NAN, NAN);
            }
#pragma unroll
            for (int u = 0; u < AU; u++) {
                const int i = 4 * (i0 + u * SPLIT_THREADS);
                const float v[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
                for (int j = 0; j < 4; j++)
                    argmax_fold(best, v[j], i + j);
            }
        }
        if (b == parts - 1)
            for (int i = 4 * n4 + (int)threadIdx.x; i < vocab; i += SPLIT_THREADS)
                argmax_fold(best, l[i], i);
    } else {
        const int per = (vocab + parts - 1) / parts, lo = b * per, hi = min(vocab, lo + per);
        for (int i = lo + (int)threadIdx.x; i < hi; i += SPLIT_THREADS)
            argmax_fold(best, l[i], i);
    }
    best = warp_max_u64(best);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        sk[warp] = best;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < SPLIT_THREADS / 32; w++)
            best = sk[w] > best ? sk[w] : best;
        if (best)
            atomicMax(ws + row, best);
        __threadfence(); /* the key before the count: the last block sees every part's */
        last = atomicAdd(ws + gridDim.y + row, 1ull) == (unsigned long long)parts - 1;
        if (last) {
            __threadfence();
            const unsigned long long k = atomicExch(ws + row, 0ull);
            ids[row] = k ? (int32_t)(0xffffffffu - (uint32_t)(k & 0xffffffffu)) : 0;
            ws[gridDim.y + row] = 0ull; /* the next launch (stream order) starts from zero */
        }
    }
}

size_t argmax_ws_words(int n_rows)
{
    return n_rows > 0 ? 2 * (size_t)n_rows : 0;
}

int argmax_cuda(int32_t *ids, const float *logits, int n_rows, int vocab, unsigned long long *ws,
                cudaStream_t stream)
{
    if (!ids || !logits || !ws || n_rows < 0 || n_rows > 65535 || vocab <= 0)
        return ERR_INVAL;
    if (n_rows == 0)
        return 0;
    const int n4 = vocab % 4 == 0 && ((uintptr_t)logits) % 16 == 0 ? vocab / 4 : 0;
    /* about 8,192 floats a block (four 16-byte loads a thread), at most ARGMAX_MAX_PARTS */
    int parts = (int)CEIL_DIV(vocab, 4 * AU_SPLIT * SPLIT_THREADS);
    parts = parts < 1 ? 1 : parts > ARGMAX_MAX_PARTS ? ARGMAX_MAX_PARTS : parts;
    kcuda_launch_pdl(argmax_kernel, dim3((unsigned)parts, (unsigned)n_rows), SPLIT_THREADS, 0,
                     stream, ids, logits, vocab, n4, ws);
    return kcuda_launch_status("argmax");
}
