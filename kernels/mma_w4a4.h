/* mma_w4a4: NVFP4 x NVFP4 GEMM tile kernel for sm_120a/sm_121a (RTX 50xx, DGX Spark GB10) using
 * mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3
 * (CHECKPOINTS.md §5.1):  c[m][n] = alpha * sum_k A[m][k] * B[n][k],  where
 *   A[m][k] = e2m1(a nibble) * e4m3(a_sf[m][k/16]), B likewise (weights: B = W, n = out feature).
 * Compiled only for those archs; on any other device the launcher returns ERR_UNSUPPORTED.
 * NOT RUN on hardware: the only GPU here is an H200 (sm_90). Its register layout is an unverified
 * assumption (kernels/internal/mxf4_frag.h), checked only by a CPU emulation in CI. */
#ifndef KERNELS_MMA_W4A4_H
#define KERNELS_MMA_W4A4_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* c: (m, n) fp32; a: (m, k/2) packed e2m1 (element 2j in the low nibble); a_sf: (m, k/16) e4m3;
 * b: (n, k/2); b_sf: (n, k/16). Row-major, unswizzled scales. m % 16 == 0, n % 8 == 0,
 * k % 64 == 0. alpha: product of the two global multipliers. Device pointers.
 * Returns 0, ERR_INVAL, ERR_UNSUPPORTED (not an sm_120/121 device), ERR_CUDA. */
int mma_w4a4_cuda(float *c, const uint8_t *a, const uint8_t *a_sf, const uint8_t *b,
                  const uint8_t *b_sf, float alpha, int m, int n, int k, cudaStream_t stream);
/* Same contract on host pointers: dequantize and multiply in double. */
int mma_w4a4_ref(float *c, const uint8_t *a, const uint8_t *a_sf, const uint8_t *b,
                 const uint8_t *b_sf, float alpha, int m, int n, int k);
/* W4A4 activation quantization of CHECKPOINTS.md §1.5 (host): per row, per 16 elements,
 * s = e4m3(g_in*amax/6), q = e2m1(x*g_in/s); x_q: (rows, cols/2), x_sf: (rows, cols/16).
 * The dequantized value is e2m1(q)*e4m3(s)/g_in. cols % 16 == 0. */
int mma_w4a4_quant_ref(uint8_t *x_q, uint8_t *x_sf, const float *x, int rows, int cols, float g_in);

#ifdef __cplusplus
}
#endif

#endif
