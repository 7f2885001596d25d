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

/* moe_router_cuda: the router GEMV and the routing in one launch, for decode steps: logits =
 * x router^T (n_tok, E) and, with sh_gate (a (2, H) weight: the shared expert's gate, then a
 * zero row), sh_logits[t * 2] = x_t . sh_gate[0]; then ids / weights as moe_route_cuda (stride
 * top_k) or moe_route_shared_cuda (stride top_k + 1, with sh_gate). counter: one device
 * unsigned, 0 before the first launch; every launch leaves it 0 (launches on one stream, in
 * order). ERR_UNSUPPORTED beyond MOE_ROUTER_MAX_TOK tokens or MOE_ROUTER_MAX_EXPERTS experts (the
 * caller runs the GEMV and moe_route), ERR_INVAL for bad arguments. Logits are computed as gemv's
 * CUDA-core path does (fp32). */
#define MOE_ROUTER_MAX_TOK 8
#define MOE_ROUTER_MAX_EXPERTS 512
struct kweight;
int moe_router_cuda(int32_t *ids, float *weights, float *logits, float *sh_logits,
                    unsigned *counter, const float *x, const struct kweight *router,
                    const struct kweight *sh_gate, int n_tok, int top_k, cudaStream_t stream);
/* The same on host pointers (gemv_ref, then moe_route_ref / moe_route_shared_ref). */
int moe_router_ref(int32_t *ids, float *weights, float *logits, float *sh_logits,
                   const float *x, const struct kweight *router, const struct kweight *sh_gate,
                   int n_tok, int top_k);

#ifdef __cplusplus
}
#endif

#endif
