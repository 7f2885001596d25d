/* logit_proc: one 256-thread block per row. Thread 0 adds the bias pairs in order (a repeated id
 * adds twice, as on the host), then the block bans ids, then masks the row against its allow
 * bits, with a barrier between the phases. */
#include "logit_proc.h"

#include "internal/kcuda.cuh"

#define LP_THREADS 256

/* fp32 add rounded to nearest, denormals kept (the build's fast math would flush them) */
static __device__ __forceinline__ float lp_add(float a, float b)
{
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

__global__ void __launch_bounds__(LP_THREADS)
    logit_proc_kernel(float *logits, int V, const logit_proc_row *rows, const int32_t *bias_ids,
                      const float *bias_vals, const uint32_t *ban_ids, const uint32_t *allow)
{
    const logit_proc_row r = rows[blockIdx.x];
    float *l = logits + (int64_t)blockIdx.x * V;
    if (threadIdx.x == 0)
        for (int i = 0; i < r.n_bias; i++) {
            const int32_t id = bias_ids[r.bias_off + i];
            if (id >= 0 && id < V && !isnan(l[id])) /* a NaN keeps its bits, as on the host */
                l[id] = lp_add(l[id], bias_vals[r.bias_off + i]);
        }
    __syncthreads();
    for (int i = threadIdx.x; i < r.n_ban; i += LP_THREADS) {
        const uint32_t id = ban_ids[r.ban_off + i];
        if (id < (uint32_t)V)
            l[id] = -INFINITY;
    }
    __syncthreads();
    if (r.allow_off < 0)
        return; /* uniform over the block */
    const uint32_t *m = allow + r.allow_off;
    for (int i = threadIdx.x; i < V; i += LP_THREADS)
        if (!(__ldg(m + (i >> 5)) >> (i & 31) & 1))
            l[i] = -INFINITY;
}

int logit_proc_cuda(float *logits, int B, int V, const struct logit_proc_row *rows,
                    const int32_t *bias_ids, const float *bias_vals, const uint32_t *ban_ids,
                    const uint32_t *allow, cudaStream_t stream)
{
    if (!logits || B < 0 || V < 1 || (B > 0 && !rows) || B > 65535)
        return ERR_INVAL;
    if (B == 0)
        return 0;
    logit_proc_kernel<<<B, LP_THREADS, 0, stream>>>(logits, V, rows, bias_ids, bias_vals, ban_ids,
                                                    allow);
    return kcuda_launch_status("logit_proc");
}
