/* moe_route: MoE router post-processing: fp32 softmax over the E expert logits, top-k (values
 * descending, ties -> lower expert id), weights renormalised to sum 1. */
#ifndef KERNELS_MOE_ROUTE_H
#define KERNELS_MOE_ROUTE_H

#include <stdint.h>

#include "kstream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_ROUTE_MAX_EXPERTS 1024
#define MOE_ROUTE_MAX_TOPK 32

/* logits: (n_tok, n_experts) fp32 (the router GEMV output); ids: (n_tok, top_k) int32;
 * weights: (n_tok, top_k) fp32. Device pointers. Returns 0, ERR_INVAL (n_experts >
 * MOE_ROUTE_MAX_EXPERTS, top_k > min(n_experts, MOE_ROUTE_MAX_TOPK)), ERR_CUDA. */
int moe_route_cuda(int32_t *ids, float *weights, const float *logits, int n_tok, int n_experts,
                   int top_k, cudaStream_t stream);
int moe_route_ref(int32_t *ids, float *weights, const float *logits, int n_tok, int n_experts,
                  int top_k);
/* The same with a shared expert folded into the routed stack as expert n_experts: ids and
 * weights are (n_tok, top_k + 1), slot top_k of token t = (n_experts, sigmoid(sh[t * sh_pitch]))
 * (the shared expert's gate), the others as moe_route_cuda. */
int moe_route_shared_cuda(int32_t *ids, float *weights, const float *logits, const float *sh,
                          int sh_pitch, int n_tok, int n_experts, int top_k, cudaStream_t stream);
int moe_route_shared_ref(int32_t *ids, float *weights, const float *logits, const float *sh,
                         int sh_pitch, int n_tok, int n_experts, int top_k);

#ifdef __cplusplus
}
#endif

#endif
