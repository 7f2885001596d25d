/* gpu_sample: the host side of batched sampling on the device (kernels/sample.h). For each row
 * it takes what sample_token (model/sample.h) takes: params, the token history the penalties
 * look at, and the row's sample_rng, which it advances exactly as sample_token would (one
 * uniform for a sampled row, nothing for a greedy one), so a seeded request draws the same
 * tokens on either path up to floating-point near-ties (kernels/sample.h). A row's logit bias,
 * banned ids and allow mask (sample_params bias_ids, ban_ids, allow) run first, on the device
 * (kernels/logit_proc.h), as sample_token applies them. The workspace (device rows, penalty
 * pairs, processor tables, outputs; host staging) is allocated once at create. */
#ifndef GPU_SAMPLE_H
#define GPU_SAMPLE_H

#include <stdint.h>

#include <cuda_runtime.h>

#include "model/sample.h"

struct gpu_sample;

/* One row of a gpu_sample_run call. */
struct gpu_sample_req {
    const struct sample_params *params;
    const int32_t *hist; // the tokens the penalties look at (host), or NULL with n_hist 0
    int n_hist;
    struct sample_rng *rng; // advanced as sample_token does
};

/* Distinct penalised tokens per row that the default penalty room (max_pen 0) holds for every
 * row of a full call: a row with a longer history may not fit (ERR_TOOBIG). */
#define GPU_SAMPLE_PEN_PER_ROW 4096
/* Banned ids per row the processor tables hold (min_tokens bans the stop ids: a few). */
#define GPU_SAMPLE_BAN_PER_ROW 64
/* Logit bias pairs per row (the request limit, MSG_MAX_LOGIT_BIAS). */
#define GPU_SAMPLE_BIAS_PER_ROW 1024

/* max_rows: most rows per call; vocab: V (<= SAMPLE_MAX_VOCAB); max_pen: most distinct
 * (row, token) penalty pairs per call, all rows together (0 = max_rows *
 * GPU_SAMPLE_PEN_PER_ROW).
 * NULL on bad arguments or allocation failure (logged). */
struct gpu_sample *gpu_sample_create(int max_rows, int vocab, int max_pen);
void gpu_sample_destroy(struct gpu_sample *gs);

/* tokens[r] (host) for n_rows rows of d_logits (device, (n_rows, vocab) fp32; the penalties are
 * applied to it in place), and logprobs[r] (host, optional: log of the chosen token's
 * probability in the final distribution, 0 for greedy rows). Runs on stream and waits for it.
 * ERR_INVAL (bad params in any row: no rng is advanced), ERR_TOOBIG (n_rows > max_rows, more
 * penalty pairs than max_pen, a row with more than GPU_SAMPLE_BIAS_PER_ROW bias pairs or
 * GPU_SAMPLE_BAN_PER_ROW banned ids), ERR_CUDA. */
int gpu_sample_run(struct gpu_sample *gs, float *d_logits, int n_rows,
                   const struct gpu_sample_req *req, int32_t *tokens, float *logprobs,
                   cudaStream_t stream);

#endif
