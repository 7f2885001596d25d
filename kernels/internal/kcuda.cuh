/* kcuda.cuh: device helpers shared by the kernels/ .cu files (C++ only, never included from C).
 * Warp/block reductions, bf16/e4m3/nvfp4 decoding and the launch status check. */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "common/err.h"
#include "common/log.h"
}

#define KCUDA_WARP 32

/* An attribute of the current device, or fallback when it cannot be read (the error cleared so a
 * later kcuda_launch_status does not report it). Host side. */
static inline int kcuda_device_attr(enum cudaDeviceAttr attr, int fallback)
{
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return fallback;
    }
    return v;
}

/* The launcher's last step (STYLE.md §7): 0, or ERR_CUDA after logging the launch error. */
static inline int kcuda_launch_status(const char *op)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return 0;
    LOG_ERR("kernel_launch_failed", "op=%s err=\"%s\"", op, cudaGetErrorString(e));
    return ERR_CUDA;
}

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the whole block; every thread gets the result. scratch: >= 32 floats of shared memory.
 * Must be called by all threads of the block. */
static __device__ __forceinline__ float block_sum(float v, float *scratch)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

static __device__ __forceinline__ float block_max(float v, float *scratch)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : -INFINITY;
    return warp_max(v);
}

static __device__ __forceinline__ float bf16_bits_to_f32(uint16_t b)
{
    return __uint_as_float((uint32_t)b << 16);
}

/* Round-to-nearest-even fp32 -> bf16 bits (NaN kept quiet). */
static __device__ __forceinline__ uint16_t f32_to_bf16_bits(float f)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

static __device__ __forceinline__ float e4m3_to_f32(uint8_t b)
{
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3);
    return __half2float(__half(h));
}

/* fp32 -> e4m3 bits, round to nearest even, saturating to +-448 (the K/V cache stores) */
static __device__ __forceinline__ uint8_t f32_to_e4m3_sat(float x)
{
    return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

/* The slot of grid row y of an expert launch over n_slots = n_tok * top_k slots. sh_first: the
 * last slot of every token is the folded shared expert, whose blocks come first (rows y < n_tok:
 * token y's slot top_k - 1; they run before the PDL wait, and blocks are placed in grid order),
 * then the routed slots in order; else y itself. top_k >= 2 with sh_first. */
static __device__ __forceinline__ int moe_block_slot(int y, int n_slots, int top_k, bool sh_first)
{
    if (!sh_first)
        return y;
    const int n_tok = n_slots / top_k;
    if (y < n_tok)
        return y * top_k + top_k - 1;
    y -= n_tok;
    return y / (top_k - 1) * top_k + y % (top_k - 1);
}

static __device__ __forceinline__ float silu_f32(float x)
{
    return x / (1.0f + __expf(-x));
}

static __device__ __forceinline__ float sigmoid_f32(float x)
{
    return 1.0f / (1.0f + __expf(-x));
}

/* Two E2M1 codes -> two fp32 values times 2^-14 (exact): the magnitude bits of each code go to
 * bits 9..11 of an fp16 (exponent low bits + mantissa msb), the sign to bit 15. h holds the codes
 * in bits 12..15 (low half) and 28..31 (high half), as produced by shifting a packed word left. */
static __device__ __forceinline__ float2 e2m1x2_hi_to_f32_scaled(uint32_t h)
{
    uint32_t v = (h & 0x80008000u) | ((h >> 3) & 0x0e000e00u);
    __half2 hv = *reinterpret_cast<__half2 *>(&v);
    return __half22float2(hv);
}
