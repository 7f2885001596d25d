/* kv_write: one block per token; fp8 through the hardware cvt (RNE, satfinite). */
#include "kv_write.h"

#include <math.h>

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

__global__ void kv_write_fp8_kernel(uint8_t *k_cache, uint8_t *v_cache, const float *k,
                                    const float *v, const int32_t *slot_mapping, int w,
                                    float k_inv, float v_inv)
{
    const int64_t s = slot_mapping[blockIdx.x];
    if (s < 0)
        return;
    for (int i = threadIdx.x; i < w; i += blockDim.x) {
        k_cache[s * w + i] = f32_to_e4m3_sat(__fmul_rn(k[(int64_t)blockIdx.x * w + i], k_inv));
        v_cache[s * w + i] = f32_to_e4m3_sat(__fmul_rn(v[(int64_t)blockIdx.x * w + i], v_inv));
    }
}

int kv_write_dtype_cuda(void *k_cache, void *v_cache, const float *k, const float *v,
                        const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim,
                        int kv_dtype, float k_scale, float v_scale, cudaStream_t stream)
{
    if (!k_cache || !v_cache || !k || !v || !slot_mapping || n_tok < 0 || n_kv_heads <= 0 ||
        head_dim <= 0 || !kv_dtype_bytes(kv_dtype) ||
        !(k_scale > 0.0f) || !(v_scale > 0.0f) || isinf(k_scale) || isinf(v_scale))
        return ERR_INVAL;
    if (n_tok == 0)
        return 0;
    const int w = n_kv_heads * head_dim;
    if (kv_dtype == KV_DTYPE_BF16)
        kv_write_kernel<<<n_tok, 256, 0, stream>>>((uint16_t *)k_cache, (uint16_t *)v_cache, k, v,
                                                   slot_mapping, w);
    else
        kv_write_fp8_kernel<<<n_tok, 256, 0, stream>>>((uint8_t *)k_cache, (uint8_t *)v_cache, k,
                                                       v, slot_mapping, w, 1.0f / k_scale,
                                                       1.0f / v_scale);
    return kcuda_launch_status("kv_write");
}

int kv_write_cuda(uint16_t *k_cache, uint16_t *v_cache, const float *k, const float *v,
                  const int32_t *slot_mapping, int n_tok, int n_kv_heads, int head_dim,
                  cudaStream_t stream)
{
    return kv_write_dtype_cuda(k_cache, v_cache, k, v, slot_mapping, n_tok, n_kv_heads, head_dim,
                               KV_DTYPE_BF16, 1.0f, 1.0f, stream);
}
