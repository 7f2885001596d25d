/* kv_write: one block per token. */
#include "kv_write.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"

__global__ void kv_write_kernel(uint16_t *k_cache, uint16_t *v_cache, const float *k,
                                const float *v, const int32_t *slot_mapping, int w)
{
    const int64_t s = slot_mapping[blockIdx.x];
    if (s < 0)
        return;
    for (int i = threadIdx.x; i < w; i += blockDim.x) {
        k_cache[s * w + i] = f32_to_bf16_bits(k[(int64_t)blockIdx.x * w + i]);
        v_cache[s * w + i] = f32_to_bf16_bits(v[(int64_t)blockIdx.x * w + i]);
    }
}

int kv_write_cuda(uint16_t *k_cache, uint16_t *v_cache, const float *k, const float *v,
                  const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim,
                  cudaStream_t stream)
{
    if (!k_cache || !v_cache || !k || !v || !slot_mapping || n_tok < 0 || n_kv_heads <= 0 ||
        head_dim <= 0)
        return ERR_INVAL;
    if (n_tok == 0)
        return 0;
    kv_write_kernel<<<n_tok, 256, 0, stream>>>(k_cache, v_cache, k, v, slot_mapping,
                                               n_kv_heads * head_dim);
    return kcuda_launch_status("kv_write");
}
