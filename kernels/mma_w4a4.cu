/* mma_w4a4: one warp per 16x8 output tile, operands loaded straight from global memory into the
 * fragment registers (layout: internal/mxf4_frag.h). The mma exists only in the sm_120a/121a
 * passes; other passes compile an empty body and the launcher refuses their devices. */
#include "mma_w4a4.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/mxf4_frag.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200 &&                                             \
    (defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL))
#define MMA_W4A4_HAVE_MMA 1
#else
#define MMA_W4A4_HAVE_MMA 0
#endif

__global__ void mma_w4a4_kernel(float *c, const uint8_t *a, const uint8_t *a_sf, const uint8_t *b,
                                const uint8_t *b_sf, float alpha, int m, int n, int k)
{
#if MMA_W4A4_HAVE_MMA
    const int lane = threadIdx.x & 31;
    const int tile = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int tiles_n = n / 8;
    if (tile >= (m / 16) * tiles_n)
        return; /* whole warp */
    const int m0 = (tile / tiles_n) * 16, n0 = (tile % tiles_n) * 8;
    const int64_t lda = k / 2, ldsf = k / 16;
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int sfa_row = mxf4_sfa_row(lane), sfb_col = mxf4_sfb_col(lane);
    const uint16_t sel = 0; /* byte-id 0, thread-id 0 (see mxf4_frag.h) */
    for (int kk = 0; kk < k; kk += 64) {
        uint32_t ar[4], br[2], sfa = 0, sfb = 0;
#pragma unroll
        for (int r = 0; r < 4; r++)
            ar[r] = *reinterpret_cast<const uint32_t *>(
                a + (int64_t)(m0 + mxf4_a_row(lane, r)) * lda + (kk + mxf4_a_k0(lane, r)) / 2);
#pragma unroll
        for (int r = 0; r < 2; r++)
            br[r] = *reinterpret_cast<const uint32_t *>(
                b + (int64_t)(n0 + mxf4_b_col(lane, r)) * lda + (kk + mxf4_b_k0(lane, r)) / 2);
        if (sfa_row >= 0)
            sfa = *reinterpret_cast<const uint32_t *>(a_sf + (int64_t)(m0 + sfa_row) * ldsf +
                                                      kk / 16);
        if (sfb_col >= 0)
            sfb = *reinterpret_cast<const uint32_t *>(b_sf + (int64_t)(n0 + sfb_col) * ldsf +
                                                      kk / 16);
        asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X"
                     ".f32.e2m1.e2m1.f32.ue4m3 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {%12,%13}, %11, "
                     "{%12,%13};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "r"(br[0]), "r"(br[1]),
                       "r"(sfa), "r"(sfb), "h"(sel), "h"(sel));
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
        c[(int64_t)(m0 + mxf4_c_row(lane, i)) * n + n0 + mxf4_c_col(lane, i)] = alpha * d[i];
#else
    (void)c, (void)a, (void)a_sf, (void)b, (void)b_sf, (void)alpha, (void)m, (void)n, (void)k;
#endif
}

int mma_w4a4_cuda(float *c, const uint8_t *a, const uint8_t *a_sf, const uint8_t *b,
                  const uint8_t *b_sf, float alpha, int m, int n, int k, cudaStream_t stream)
{
    int dev = 0, major = 0, minor = 0;
    if (!c || !a || !a_sf || !b || !b_sf || m <= 0 || n <= 0 || k <= 0 || m % 16 || n % 8 || k % 64)
        return ERR_INVAL;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return ERR_CUDA;
    if (major != 12 || minor > 1)
        return ERR_UNSUPPORTED;
    const int tiles = (m / 16) * (n / 8);
    mma_w4a4_kernel<<<CEIL_DIV(tiles, 4), 128, 0, stream>>>(c, a, a_sf, b, b_sf, alpha, m, n, k);
    return kcuda_launch_status("mma_w4a4");
}
