/* embed: one block per token, plain coalesced copy with bf16 -> fp32 widening. */
#include "embed.h"

#include "common/xalloc.h"
#include "internal/kcuda.cuh"
#include "internal/pdl.cuh"

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
