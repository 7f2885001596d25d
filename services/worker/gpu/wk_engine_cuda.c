/* wk_engine_cuda: engine "cuda" (declared in wk_engine.h): model_load() on the host,
 * gpu_model_create() uploads it and plans every device buffer once (slots and KV blocks from
 * the KV plan under --kv-cache-memory-bytes, K/V in --kv-cache-dtype), then the host copy is
 * freed. Slots are the gpu_model's slots; the scheduler's block table goes straight to the
 * paged KV cache. Logs the backend per layer class and the resident bytes per group at startup
 * (gpu_model_log). */
#include "wk_engine_cuda.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/kv_plan.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "gpu_model.h"
#include "model/model_load.h"
#include "wk_cfg.h"
#include "wk_engine.h"
#include "wk_spec_cpu.h"

struct cuda_eng {
    struct gpu_model *g;
    struct gpu_item *items;      // (n_slots)
    struct gpu_sample_req *sreq; // (n_slots) items sampled on the device
    int32_t *tok;                // (max_step_tokens)
};

static int cuda_seq_open(struct wk_engine *e, uint32_t slot, uint32_t state_block)
{
    struct cuda_eng *c = e->impl;
    if (slot >= e->info.n_slots)
        return ERR_RANGE;
    if (state_block != WK_ENGINE_NO_STATE && e->info.state_blocks)
        return gpu_model_seq_open_state(c->g, (int)slot, state_block);
    return gpu_model_seq_open(c->g, (int)slot);
}

static void cuda_seq_close(struct wk_engine *e, uint32_t slot)
{
    struct cuda_eng *c = e->impl;
    gpu_model_seq_close(c->g, (int)slot);
}

static int cuda_step(struct wk_engine *e, struct wk_engine_item *items, uint32_t n_items)
{
    struct cuda_eng *c = e->impl;
    if (n_items > e->info.n_slots)
        return ERR_INVAL;
    uint32_t used = 0;
    for (uint32_t i = 0; i < n_items; i++) {
        struct wk_engine_item *it = &items[i];
        struct gpu_item *gi = &c->items[i];
        memset(gi, 0, sizeof *gi);
        gi->slot = (int)it->slot;
        gi->pos = (int)it->pos;
        gi->blocks = it->blocks;
        gi->n_blocks = (int)it->n_blocks;
        gi->logits = it->logits;
        if (!it->logits && it->sp) { /* the token drawn on the device (wk_engine.h) */
            c->sreq[i] = (struct gpu_sample_req){ it->sp, it->hist, (int)it->n_hist, it->rng };
            gi->sample = &c->sreq[i];
            gi->token = &it->token;
        }
        if (it->n == 0 || used + it->n > e->info.max_step_tokens) {
            gi->slot = -1; // refused by gpu_model_step with ERR_INVAL
            gi->tokens = c->tok;
            gi->n = 0;
            continue;
        }
        for (uint32_t t = 0; t < it->n; t++)
            c->tok[used + t] = (int32_t)it->tokens[t];
        gi->tokens = c->tok + used;
        gi->n = (int)it->n;
        used += it->n;
    }
    int rc = gpu_model_step(c->g, c->items, (int)n_items);
    for (uint32_t i = 0; i < n_items; i++)
        items[i].rc = c->items[i].rc == ERR_INVAL && c->items[i].n == 0 ? ERR_STATE
                                                                          : c->items[i].rc;
    return rc;
}

static int cuda_spec_window(struct wk_engine *e, uint32_t slot, uint32_t pos, uint32_t x, int k,
                            const uint32_t *blocks, uint32_t n_blocks, int32_t *drafts,
                            float *logits)
{
    struct cuda_eng *c = e->impl;
    if (slot >= e->info.n_slots || x >= e->info.vocab_size)
        return ERR_STATE;
    return gpu_model_spec_window(c->g, (int)slot, (int)pos, (int32_t)x, k, blocks, (int)n_blocks,
                                 drafts, logits);
}

static int cuda_spec_commit(struct wk_engine *e, uint32_t slot, int a)
{
    struct cuda_eng *c = e->impl;
    if (slot >= e->info.n_slots)
        return ERR_STATE;
    return gpu_model_spec_commit(c->g, (int)slot, a);
}

static void cuda_destroy(struct wk_engine *e)
{
    struct cuda_eng *c = e->impl;
    if (c) {
        gpu_model_destroy(c->g);
        free(c->items);
        free(c->sreq);
        free(c->tok);
        free(c);
    }
    free(e);
}

static const struct wk_engine_ops CUDA_OPS = {
    .seq_open = cuda_seq_open,
    .seq_close = cuda_seq_close,
    .step = cuda_step,
    .destroy = cuda_destroy,
    .spec_window = cuda_spec_window, /* used only when info.spec_k > 0 */
    .spec_commit = cuda_spec_commit,
};

int wk_engine_cuda_opts(const struct wk_cfg *cfg, const struct model *m, int spec_k,
                        struct wk_engine_info *in, struct gpu_model_opts *go)
{
    const struct model_config *mc = &m->cfg;
    memset(go, 0, sizeof *go);
    const char *base = strrchr(cfg->model, '/');
    const char *name = base && base[1] ? base + 1 : cfg->model;
    snprintf(in->model_id, sizeof in->model_id, "%.*s", (int)sizeof in->model_id - 1, name);
    in->vocab_size = (uint32_t)mc->vocab_size;
    int64_t len = cfg->max_model_len ? cfg->max_model_len : mc->max_position_embeddings;
    if (!cfg->max_model_len && len > WK_CUDA_DEFAULT_MAX_MODEL_LEN)
        len = WK_CUDA_DEFAULT_MAX_MODEL_LEN;
    in->max_model_len = (uint32_t)len;
    in->n_slots = (uint32_t)cfg->max_seqs;
    in->block_tokens = (uint32_t)cfg->block_tokens;
    in->kv_blocks = (uint32_t)cfg->kv_blocks; // 0: the runner's n_slots x blocks per sequence
    const int step_tokens = wk_cfg_step_tokens(cfg, WK_STEP_TOKENS_CUDA);
    in->max_step_tokens = (uint32_t)step_tokens;
    in->n_eos = 0;
    for (int i = 0; i < mc->n_eos && in->n_eos < WK_ENGINE_MAX_EOS; i++)
        if (mc->eos_ids[i] >= 0)
            in->eos_ids[in->n_eos++] = (uint32_t)mc->eos_ids[i];
    const int kv_dtype = kv_dtype_parse(cfg->kv_cache_dtype);
    if (kv_dtype < 0)
        return ERR_INVAL; // wk_cfg_validate refuses it first
    if (step_tokens > WK_CUDA_MAX_STEP_TOKENS) {
        LOG_ERR("engine_init_failed", "engine=cuda msg=\"max-step-tokens %d: at most %d (one step "
                "is one pass; its rows ride a grid axis)\"", step_tokens,
                WK_CUDA_MAX_STEP_TOKENS);
        fprintf(stderr, "tern-worker: engine cuda takes --max-step-tokens up to %d (got %d)\n",
                WK_CUDA_MAX_STEP_TOKENS, step_tokens);
        return ERR_INVAL;
    }
    if (cfg->kv_cache_memory_bytes > 0) {
        /* slots and blocks from the KV plan (the budget, the dtype, max_model_len) */
        int rc =
            wk_engine_size_from_plan(cfg, mc, "cuda", spec_k, wk_engine_state_in_pool(cfg), in);
        if (rc < 0)
            return rc;
        if (in->n_slots < 1 || in->n_slots > 65535 || in->kv_blocks > INT_MAX)
            return ERR_INVAL;
    }
    *go = (struct gpu_model_opts){
        .n_slots = (int)in->n_slots,
        .max_model_len = (int)len,
        .block_tokens = cfg->block_tokens,
        .kv_blocks = (int)in->kv_blocks,
        .device = cfg->device,
        .graphs = 1,
        .force_moe = wk_cfg_backend(cfg->moe_backend),
        .force_linear = wk_cfg_backend(cfg->linear_backend),
        .max_rows = step_tokens, // every step is one pass over at most this many rows
        .spec_k = spec_k,
        .kv_dtype = kv_dtype,
        .state_in_pool = wk_engine_state_in_pool(cfg),
        /* neither --kv-blocks nor --kv-cache-memory-bytes: the pool from the device's memory */
        .mem_util = cfg->kv_blocks == 0 && cfg->kv_cache_memory_bytes == 0
                        ? cfg->gpu_memory_utilization
                        : 0.0,
    };
    return 0;
}

bool wk_engine_cuda_is_built(void)
{
    return true;
}

int wk_engine_cuda_create(const struct wk_cfg *cfg, wk_engine_progress_cb progress, void *ctx,
                          struct wk_engine **out)
{
    struct wk_engine *e = xcalloc(1, sizeof *e);
    struct cuda_eng *c = xcalloc(1, sizeof *c);
    struct wk_engine_info *in = &e->info;
    struct model *m = NULL;
    char err[512] = "";
    e->ops = &CUDA_OPS;
    e->name = "cuda";
    e->impl = c;
    /* dummy weights are written on the device (the model is destroyed after the upload: no
     * CPU pass needs their host copies); the MTP head, when present, is loaded too: uploaded
     * only when speculation is on */
    const bool dummy = strcmp(cfg->load_format, "dummy") == 0;
    struct model_load_opts lo = {.dummy = dummy, .dummy_device = dummy};
    int rc = model_load(&m, cfg->model, &lo, err, sizeof err);
    if (rc < 0) {
        LOG_ERR("model_load_failed", "dir=%s err=%s msg=\"%s\"", cfg->model, err_str(rc), err);
        goto fail;
    }
    if (progress)
        progress(ctx, 0.5f, "weights");
    /* speculation (MODEL.md 6): K from the checkpoint and --speculative-tokens, one startup line
     * (K and the head's bytes, or why it is off); an explicit request that cannot be served
     * stops the worker */
    int spec_k = 0;
    rc = wk_spec_cpu_configure(m, cfg->speculative_tokens, &spec_k);
    if (rc < 0)
        goto fail;
    struct gpu_model_opts go;
    rc = wk_engine_cuda_opts(cfg, m, spec_k, in, &go);
    if (rc < 0) {
        LOG_ERR("engine_init_failed", "engine=cuda err=%s msg=\"worker flags\"", err_str(rc));
        goto fail;
    }
    rc = gpu_model_create(&c->g, m, &go, err, sizeof err);
    model_destroy(m);
    m = NULL;
    if (rc < 0) {
        LOG_ERR("engine_init_failed", "engine=cuda err=%s msg=\"%s\"", err_str(rc), err);
        if (rc == ERR_FULL) // the memory plan's refusal: the operator's one line
            fprintf(stderr, "tern-worker: %s\n", err);
        goto fail;
    }
    gpu_model_log(c->g);
    in->kv_blocks = (uint32_t)gpu_model_kv_blocks(c->g);
    in->state_blocks = (uint32_t)gpu_model_state_blocks(c->g);
    in->n_slots = (uint32_t)gpu_model_n_slots(c->g); // the memory plan may reserve fewer
    in->spec_k = (uint32_t)gpu_model_spec_k(c->g);
    in->kv_bytes = (uint64_t)gpu_model_memory(c->g)->kv_pool;
    in->device_sampling = gpu_model_can_sample(c->g) != 0;
    in->device_sampling_max_hist = GPU_SAMPLE_PEN_PER_ROW; // the runner's sampler's default room
    in->device_sampling_procs = in->device_sampling; // kernels/logit_proc.h before the draw
    in->device_sampling_max_bias = GPU_SAMPLE_BIAS_PER_ROW;
    in->device_sampling_max_ban = GPU_SAMPLE_BAN_PER_ROW;
    c->items = xcalloc(in->n_slots, sizeof *c->items);
    c->sreq = xcalloc(in->n_slots, sizeof *c->sreq);
    c->tok = xmalloc(sizeof(int32_t) * (in->max_step_tokens ? in->max_step_tokens : 1));
    if (progress)
        progress(ctx, 1.0f, "ready");
    LOG_INFO("engine_ready", "engine=cuda model=%s vocab=%u max_model_len=%u slots=%u "
             "kv_blocks=%u kv_dtype=%s eos=%u sampling=\"%s\"", in->model_id, in->vocab_size,
             in->max_model_len, in->n_slots, in->kv_blocks,
             kv_dtype_name((enum kv_dtype)gpu_model_kv_dtype(c->g)), in->n_eos,
             in->device_sampling ? "device (host for logprobs)" : "host");
    *out = e;
    return 0;
fail:
    model_destroy(m);
    cuda_destroy(e);
    return rc;
}
