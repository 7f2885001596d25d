/* wk_engine: picks the backend named by the config. */
#include "wk_engine.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/kv_plan.h"
#include "common/log.h"
#include "common/msg.h"
#include "common/xalloc.h"
#include "model/kv_geom.h"
#include "wk_cfg.h"

uint32_t wk_engine_default_blocks(uint32_t n_slots, uint32_t max_model_len, uint32_t block_tokens,
                                  uint32_t state_blocks)
{
    uint64_t n =
        (uint64_t)n_slots *
        (CEIL_DIV((uint64_t)max_model_len, block_tokens ? block_tokens : 1) + state_blocks);
    return n > MSG_MAX_KV_BLOCKS ? MSG_MAX_KV_BLOCKS : (uint32_t)n;
}

bool wk_engine_state_in_pool(const struct wk_cfg *cfg)
{
    /* auto is pool for every engine (the cuda runner's since its pool layout passed the H200's
     * tests and matched slots' tokens, 2026-12-02) */
    return strcmp(cfg->gdn_state, "slots") != 0;
}

int wk_engine_create(const struct wk_cfg *cfg, wk_engine_progress_cb progress, void *ctx,
                     struct wk_engine **out)
{
    *out = NULL;
    int rc = ERR_INVAL;
    if (strcmp(cfg->engine, "fake") == 0)
        rc = wk_engine_fake_create(cfg, out);
    else if (strcmp(cfg->engine, "cpu") == 0)
        rc = wk_engine_cpu_create(cfg, progress, ctx, out);
    else if (strcmp(cfg->engine, "cuda") == 0)
        rc = wk_engine_cuda_create(cfg, progress, ctx, out);
    if (rc < 0)
        return rc;
    /* the Register bounds (common/msg.h): announce at most what the scheduler accepts; the
     * blocks past the bound stay unused */
    struct wk_engine_info *in = &(*out)->info;
    if (in->kv_blocks > MSG_MAX_KV_BLOCKS) {
        LOG_WARN("kv_pool_clamped", "engine=%s blocks=%u announced=%u msg=\"a worker announces "
                 "at most %u KV blocks\"", cfg->engine, in->kv_blocks, MSG_MAX_KV_BLOCKS,
                 MSG_MAX_KV_BLOCKS);
        in->kv_blocks = MSG_MAX_KV_BLOCKS;
    }
    return rc;
}

void wk_engine_destroy(struct wk_engine *e)
{
    if (e)
        e->ops->destroy(e);
}

static void plan_opts(const struct wk_cfg *cfg, const struct model_config *mc, int spec_k,
                      bool state_in_pool, const struct wk_engine_info *in, struct kv_geom *g,
                      struct kv_opts *o)
{
    model_kv_geom(mc, spec_k > 0, g);
    memset(o, 0, sizeof *o);
    o->dtype = (enum kv_dtype)kv_dtype_parse(cfg->kv_cache_dtype);
    o->max_model_len = in->max_model_len;
    o->max_num_seqs = cfg->max_seqs;
    o->kv_cache_memory_bytes = cfg->kv_cache_memory_bytes;
    o->block_tokens = cfg->block_tokens;
    o->spec_tokens = spec_k > 0 ? spec_k : 0;
    o->state_in_pool = state_in_pool;
}

int wk_engine_size_pool_default(const struct wk_cfg *cfg, const struct model_config *mc,
                                const char *engine, int spec_k, struct wk_engine_info *in)
{
    struct kv_geom g;
    struct kv_opts o;
    plan_opts(cfg, mc, spec_k, true, in, &g, &o);
    int64_t sb = kv_plan_state_blocks(&g, &o);
    if (sb < 0 || sb > MSG_MAX_KV_BLOCKS) {
        LOG_ERR("kv_plan_refused", "engine=%s msg=\"the model's geometry gives no state size\"",
                engine);
        return ERR_INVAL;
    }
    in->state_blocks = (uint32_t)sb;
    if (!cfg->kv_blocks)
        in->kv_blocks = wk_engine_default_blocks(in->n_slots, in->max_model_len, in->block_tokens,
                                                 in->state_blocks);
    if ((uint64_t)in->state_blocks + 1 > in->kv_blocks) {
        char err[256];
        snprintf(err, sizeof err,
                 "--kv-blocks %u cannot hold one sequence: its GDN state takes %u blocks of %u "
                 "tokens' KV each; pass at least --kv-blocks %u",
                 in->kv_blocks, in->state_blocks, in->block_tokens, in->state_blocks + 1);
        LOG_ERR("kv_plan_refused", "engine=%s msg=\"%s\"", engine, err);
        fprintf(stderr, "tern-worker: %s\n", err);
        return ERR_INVAL;
    }
    return 0;
}

int wk_engine_size_from_plan(const struct wk_cfg *cfg, const struct model_config *mc,
                             const char *engine, int spec_k, bool state_in_pool,
                             struct wk_engine_info *in)
{
    struct kv_geom g;
    struct kv_opts o;
    struct kv_plan p;
    char err[1024];
    plan_opts(cfg, mc, spec_k, state_in_pool, in, &g, &o);
    int rc = kv_plan_compute(&g, &o, &p, err, sizeof err);
    if (rc < 0) {
        LOG_ERR("kv_plan_refused", "engine=%s msg=\"%s\"", engine, err);
        fprintf(stderr, "tern-worker: %s\n", err);
        return rc;
    }
    if (p.n_blocks > MSG_MAX_KV_BLOCKS)
        p.n_blocks = MSG_MAX_KV_BLOCKS;
    in->n_slots = (uint32_t)p.n_state_slots;
    in->kv_blocks = (uint32_t)p.n_blocks;
    in->state_blocks = (uint32_t)p.state_blocks;
    in->kv_bytes = (uint64_t)p.budget_bytes;
    LOG_INFO("kv_pool",
             "engine=%s tokens=%lld blocks=%lld gdn_state=%s state_blocks=%lld state_slots=%lld "
             "kv_dtype=%s max_concurrency=%.2fx at max_model_len=%lld",
             engine, (long long)p.pool_tokens, (long long)p.n_blocks,
             p.state_in_pool ? "pool" : "slots", (long long)p.state_blocks,
             (long long)p.n_state_slots, kv_dtype_name(p.dtype), p.max_concurrency,
             (long long)p.max_model_len);
    return 0;
}
