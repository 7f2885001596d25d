/* moe_expert: the routed-expert SwiGLU of a MoE block for a decode batch, fused per stage:
 *   stage 1, per (token t, slot j), e = ids[t,j]:  h[t,j,:] = silu(x[t] Wg[e]^T) * (x[t] Wu[e]^T)
 *            where gate_up[e] = [Wg (inter rows) ; Wu (inter rows)] (Qwen3.5 layout, gate first)
 *   stage 2: out[t,:] (+)= sum_j weights[t,j] * (h[t,j,:] Wd[e]^T)
 * Weights in bf16, fp8 or nvfp4 (struct kweight expert stacks), fp32 activations/accumulation.
 * The shared expert is the same call with top_k = 1, ids = 0 and weights = its sigmoid gate. */
#ifndef KERNELS_MOE_EXPERT_H
#define KERNELS_MOE_EXPERT_H

#include <stddef.h>
#include <stdint.h>

#include "kstream.h"
#include "kweight.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Floats of scratch (ws) moe_expert_cuda needs: n_tok*top_k*(2*inter + hidden). */
size_t moe_expert_ws_floats(int n_tok, int top_k, int inter, int hidden);

/* out: (n_tok, hidden); ws: scratch of moe_expert_ws_floats() floats, 16-byte aligned (the
 * reference uses its first n_tok*top_k*inter floats for h); x: (n_tok, hidden), 16-byte aligned;
 * ids, weights: (n_tok, top_k). gate_up: rows = 2*inter, cols = hidden; down: rows = hidden,
 * cols = inter; both stacks of n_experts. A slot whose id is outside [0, n_experts) contributes
 * nothing. accumulate != 0 adds into out instead of overwriting it. Device pointers.
 * Returns 0, ERR_INVAL, ERR_CUDA. */
int moe_expert_cuda(float *out, float *ws, const float *x, const int32_t *ids, const float *weights,
                    int n_tok, int top_k, int n_experts, const struct kweight *gate_up,
                    const struct kweight *down, int accumulate, cudaStream_t stream);
/* moe_expert_cuda with an explicit path (tests, benchmarks): GEMV_PATH_AUTO (the stream kernel
 * when both weights are nvfp4 and n_tok <= 8, else tensor cores when both are nvfp4 with
 * cols % 128 == 0 and n_tok <= 2, CUDA cores otherwise), GEMV_PATH_STREAM (nvfp4, or fp8 with
 * tensor / channel / 128-multiple block scales on gate_up and tensor / block ones on down;
 * cols % 16 == 0, top_k*inter <= ~19000: launch 1 = gate/up of every slot into ws, launch 2 =
 * down of the top_k slots of each token with SwiGLU applied while staging and the weighted sum,
 * activations rounded to fp16; else ERR_UNSUPPORTED; AUTO takes it for fp8 where
 * moe_expert.cu's MOE_STREAM_FP8_AUTO says so: 1, measured faster on the H200),
 * GEMV_PATH_CORES (fp32 CUDA-core dots, two launches), GEMV_PATH_TENSOR (nvfp4 mma path of gemv,
 * activations rounded to fp16, three launches: gate/up per slot, down on silu(gate)*up per slot,
 * weighted combine; else ERR_UNSUPPORTED). */
int moe_expert_cuda_path(float *out, float *ws, const float *x, const int32_t *ids,
                         const float *weights, int n_tok, int top_k, int n_experts,
                         const struct kweight *gate_up, const struct kweight *down, int accumulate,
                         int path, cudaStream_t stream);
/* moe_expert_cuda_path with the shared expert folded in as the last slot of every token:
 * sh_expert >= 0 promises ids[t * top_k + top_k - 1] == sh_expert for every token t (the router's
 * moe_route_shared_cuda / moe_router_cuda with a shared gate write it so; top_k >= 2). The stream
 * and CUDA-core gate/up launches then compute that slot before their programmatic-launch wait,
 * from x without reading its id (x must not be written by the kernel launched right before this
 * call: it is the router's input), and wait only to store it; the routed slots as before. The
 * same results as moe_expert_cuda_path. sh_expert = -1: that function. ERR_INVAL for sh_expert
 * outside [-1, n_experts) or top_k < 2 with it. */
int moe_expert_sh_cuda(float *out, float *ws, const float *x, const int32_t *ids,
                       const float *weights, int n_tok, int top_k, int n_experts,
                       const struct kweight *gate_up, const struct kweight *down, int accumulate,
                       int sh_expert, int path, cudaStream_t stream);
/* Same contract on host pointers: gemv_ref per selected expert, composed. */
int moe_expert_ref(float *out, float *ws, const float *x, const int32_t *ids, const float *weights,
                   int n_tok, int top_k, int n_experts, const struct kweight *gate_up,
                   const struct kweight *down, int accumulate);

#ifdef __cplusplus
}
#endif

#endif
