/* wk_engine_cuda: the worker's engine "cuda" (wk_engine_cuda_create, declared in wk_engine.h).
 * This header exposes the host-only part of its setup for tests: how the worker's flags become
 * the runner's options. */
#ifndef WK_ENGINE_CUDA_H
#define WK_ENGINE_CUDA_H

#include "gpu_model.h"
#include "wk_cfg.h"
#include "wk_engine.h"

#define WK_CUDA_DEFAULT_MAX_MODEL_LEN 32768
#define WK_CUDA_MAX_STEP_TOKENS 65535 // gpu_model_opts.max_rows' limit

/* Fill in (model_id, vocab_size, max_model_len, n_slots, block_tokens, kv_blocks, max_step_tokens,
 * eos ids; spec_k and kv_bytes are left for after the runner exists) and go from cfg and the
 * loaded model m: max_model_len = --max-model-len, else the checkpoint's capped at 32768;
 * --kv-cache-memory-bytes > 0 sizes slots and blocks from the KV plan
 * (wk_engine_size_from_plan, which logs the pool or refuses in one line); go.kv_dtype =
 * kv_dtype_parse(--kv-cache-dtype); go.spec_k = spec_k. No device call. Returns 0, ERR_INVAL
 * (a bad kv-cache-dtype, --max-step-tokens above WK_CUDA_MAX_STEP_TOKENS, or a plan beyond the
 * runner's int sizes; logged and printed) or the plan's refusal (ERR_FULL: one max_model_len
 * sequence does not fit). */
int wk_engine_cuda_opts(const struct wk_cfg *cfg, const struct model *m, int spec_k,
                        struct wk_engine_info *in, struct gpu_model_opts *go);

#endif
