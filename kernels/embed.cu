/* embed: one block per token, plain coalesced copy with bf16 -> fp32 widening; embed_rmsnorm the
 * same with the first layer's input norm. */
#include "embed.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/pdl.cuh"
#include "rmsnorm.h"

__global__ void embed_kernel(float *out, const uint16_t *table, const int32_t *ids, int dim,
                             int vocab)
{
    kcuda_pdl_enter();
    const int id = ids[blockIdx.x];
    float *o = out + (int64_t)blockIdx.x * dim;
    const bool ok = id >= 0 && id < vocab;
    const uint16_t *row = table + (int64_t)(ok ? id : 0) * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        o[i] = ok ? bf16_bits_to_f32(row[i]) : 0.0f;
}

int embed_cuda(float *out, const uint16_t *table, const int32_t *ids, int n_tok, int dim, int vocab,
               cudaStream_t stream)
{
    if (!out || !table || !ids || n_tok < 0 || dim <= 0 || vocab <= 0)
        return ERR_INVAL;
    if (n_tok == 0)
        return 0;
    kcuda_launch_pdl(embed_kernel, dim3(n_tok), dim3(256), 0, stream, out, table, ids, dim, vocab);
    return kcuda_launch_status("embed");
}

/* embed_rmsnorm: one block a row, rmsnorm_kernel's threads and operations on the gathered row
 * (each thread's elements in turn, block_sum, the same scaling), the row read twice from the
 * table (the second time from L1). -DEMBED_RMSNORM_FUSED=0 runs the two launches instead (an A/B
 * build, tests/gpu/measure.sh sessab). */
#ifndef EMBED_RMSNORM_FUSED
#define EMBED_RMSNORM_FUSED 1
#endif
__global__ void embed_rmsnorm_kernel(float *h, float *x, const uint16_t *table, const int32_t *ids,
                                     int dim, int vocab, const float *w, float eps, float w_offset)
{
    kcuda_pdl_enter();
    __shared__ float scratch[32];
    const int id = ids[blockIdx.x];
    const bool ok = id >= 0 && id < vocab;
    const uint16_t *row = table + (int64_t)(ok ? id : 0) * dim;
    float *hr = h + (int64_t)blockIdx.x * dim, *xr = x + (int64_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = ok ? bf16_bits_to_f32(row[i]) : 0.0f;
        hr[i] = v;
        ss += v * v;
    }
    ss = block_sum(ss, scratch);
    const float inv = rsqrtf(ss / dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = ok ? bf16_bits_to_f32(row[i]) : 0.0f;
        xr[i] = v * inv * (w_offset + w[i]);
    }
}

int embed_rmsnorm_cuda(float *h, float *x, const uint16_t *table, const int32_t *ids, int n_tok,
                       int dim, int vocab, const float *w, float eps, float w_offset,
                       cudaStream_t stream)
{
    if (!h || !x || !table || !ids || !w || h == x || n_tok < 0 || dim <= 0 || vocab <= 0)
        return ERR_INVAL;
    if (n_tok == 0)
        return 0;
    if (!EMBED_RMSNORM_FUSED) {
        const int rc = embed_cuda(h, table, ids, n_tok, dim, vocab, stream);
        return rc < 0 ? rc : rmsnorm_cuda(x, h, w, n_tok, dim, eps, w_offset, stream);
    }
    kcuda_launch_pdl(embed_rmsnorm_kernel, dim3(n_tok), dim3(rmsnorm_threads(dim)), 0, stream, h, x,
                     table, ids, dim, vocab, w, eps, w_offset);
    return kcuda_launch_status("embed_rmsnorm");
}
