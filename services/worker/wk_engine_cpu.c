/* wk_engine_cpu: the reference CPU backend behind wk_engine: model_load() + forward_run() per
 * item, one fp32 seq_state per slot (created on first use, reset on reopen). It ignores the
 * block table (the state is per slot and contiguous) but honours positions: a chunk at the
 * wrong position is refused. Meant for the tiny model and correctness, not speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/kv_plan.h"
#include "common/log.h"
#include "common/tpool.h"
#include "common/xalloc.h"
#include "model/backend.h"
#include "model/forward.h"
#include "model/kv_geom.h"
#include "model/model_load.h"
#include "model/state.h"
#include "wk_cfg.h"
#include "wk_engine.h"
#include "wk_spec_cpu.h"

#define CPU_MAX_MODEL_LEN_CAP 4096

struct cpu {
    struct model *m;
    struct tpool *tp;
    struct forward_ctx *fc;
    struct seq_state **st; // (n_slots), NULL until first use
    bool *open;            // (n_slots)
    int32_t *tok;          // (max_step_tokens) token ids as int32
    struct wk_spec_cpu *spec; // MTP speculative decoding (wk_spec_cpu.h); NULL when off
};

static int cpu_seq_open(struct wk_engine *e, uint32_t slot, uint32_t state_block)
{
    (void)state_block; /* each slot's state is host memory of its own */
    struct cpu *c = e->impl;
    if (slot >= e->info.n_slots)
        return ERR_RANGE;
    if (!c->st[slot]) {
        c->st[slot] = seq_state_create(c->m, (int)e->info.max_model_len);
        if (!c->st[slot])
            return ERR_NOMEM;
    } else {
        seq_state_reset(c->st[slot]);
    }
    if (c->spec)
        wk_spec_cpu_reset(c->spec, slot);
    c->open[slot] = true;
    return 0;
}

static void cpu_seq_close(struct wk_engine *e, uint32_t slot)
{
    struct cpu *c = e->impl;
    if (slot < e->info.n_slots)
        c->open[slot] = false; /* the state buffer is kept for the next sequence */
}

static int cpu_step(struct wk_engine *e, struct wk_engine_item *items, uint32_t n_items)
{
    struct cpu *c = e->impl;
    for (uint32_t i = 0; i < n_items; i++) {
        struct wk_engine_item *it = &items[i];
        it->rc = 0;
        if (it->slot >= e->info.n_slots || !c->open[it->slot] || it->n == 0 ||
            it->n > e->info.max_step_tokens) {
            it->rc = ERR_STATE;
            continue;
        }
        struct seq_state *st = c->st[it->slot];
        if ((uint32_t)st->pos != it->pos) {
            it->rc = ERR_STATE;
            continue;
        }
        for (uint32_t t = 0; t < it->n; t++)
            c->tok[t] = (int32_t)it->tokens[t];
        int rc = c->spec ? wk_spec_cpu_forward(c->spec, it->slot, st, c->tok, (int)it->n,
                                               it->logits)
                         : forward_run(c->fc, c->m, st, c->tok, (int)it->n, it->logits, NULL, 0);
        if (rc < 0)
            it->rc = rc;
    }
    return 0;
}

static void cpu_destroy(struct wk_engine *e)
{
    struct cpu *c = e->impl;
    if (c) {
        for (uint32_t i = 0; c->st && i < e->info.n_slots; i++)
            seq_state_destroy(c->st[i]);
        free(c->st);
        free(c->open);
        free(c->tok);
        wk_spec_cpu_destroy(c->spec);
        forward_ctx_destroy(c->fc);
        tpool_destroy(c->tp);
        model_destroy(c->m);
        free(c);
    }
    free(e);
}

static int cpu_spec_window(struct wk_engine *e, uint32_t slot, uint32_t pos, uint32_t x, int k,
                           const uint32_t *blocks, uint32_t n_blocks, int32_t *drafts,
                           float *logits)
{
    struct cpu *c = e->impl;
    (void)blocks; /* the CPU engine keeps its own per-slot KV */
    (void)n_blocks;
    if (!c->spec)
        return ERR_UNSUPPORTED;
    if (slot >= e->info.n_slots || !c->open[slot] || (uint32_t)c->st[slot]->pos != pos ||
        x >= e->info.vocab_size)
        return ERR_STATE;
    return wk_spec_cpu_window(c->spec, slot, c->st[slot], (int32_t)x, k, drafts, logits);
}

static int cpu_spec_commit(struct wk_engine *e, uint32_t slot, int a)
{
    struct cpu *c = e->impl;
    if (!c->spec || slot >= e->info.n_slots || !c->open[slot])
        return ERR_STATE;
    return wk_spec_cpu_commit(c->spec, slot, c->st[slot], a);
}

static const struct wk_engine_ops CPU_OPS = {
    .seq_open = cpu_seq_open,
    .seq_close = cpu_seq_close,
    .step = cpu_step,
    .destroy = cpu_destroy,
    .spec_window = cpu_spec_window,
    .spec_commit = cpu_spec_commit,
};

/* W4A4 checkpoints: which semantics the CPU pass runs (the cpu_ref plan: forward_run without
 * FORWARD_W4A4_WEIGHT_ONLY quantizes activations), one line at startup. */
static void log_w4a4(const struct model *m)
{
    struct backend_scheme sch[BACKEND_CLASS_COUNT];
    struct backend_plan p;
    char err[256];
    backend_schemes_from_model(m, sch);
    if (backend_plan_compute(sch, 0, NULL, BACKEND_AUTO, BACKEND_AUTO, &p, err, sizeof err) < 0)
        return;
    for (int c = 0; c < BACKEND_CLASS_COUNT; c++)
        if (p.cls[c].w4a4) {
            LOG_INFO("w4a4_semantics", "engine=cpu w4a4=%s reason=\"the CPU reference quantizes "
                     "activations per 16 with the checkpoint's input scales (CHECKPOINTS.md "
                     "1.5)\"", p.cls[c].act_quant ? "act_quant" : "weight_only");
            return;
        }
}

int wk_engine_cpu_create(const struct wk_cfg *cfg, wk_engine_progress_cb progress, void *ctx,
                         struct wk_engine **out)
{
    struct wk_engine *e = xcalloc(1, sizeof *e);
    struct cpu *c = xcalloc(1, sizeof *c);
    struct wk_engine_info *in = &e->info;
    char err[512] = "";
    e->ops = &CPU_OPS;
    e->name = "cpu";
    e->impl = c;
    struct model_load_opts lo = {.dummy = strcmp(cfg->load_format, "dummy") == 0};
    int rc = model_load(&c->m, cfg->model, &lo, err, sizeof err);
    if (rc < 0) {
        LOG_ERR("model_load_failed", "dir=%s err=%s msg=\"%s\"", cfg->model, err_str(rc), err);
        goto fail;
    }
    if (progress)
        progress(ctx, 0.9f, "weights");
    const struct model_config *mc = &c->m->cfg;
    const char *base = strrchr(cfg->model, '/');
    const char *name = base && base[1] ? base + 1 : cfg->model;
    size_t nl = strlen(name) < sizeof in->model_id - 1 ? strlen(name) : sizeof in->model_id - 1;
    memcpy(in->model_id, name, nl);
    in->model_id[nl] = '\0';
    in->vocab_size = (uint32_t)mc->vocab_size;
    int64_t len = cfg->max_model_len ? cfg->max_model_len : mc->max_position_embeddings;
    if (len > CPU_MAX_MODEL_LEN_CAP)
        len = CPU_MAX_MODEL_LEN_CAP;
    in->max_model_len = (uint32_t)len;
    in->n_slots = (uint32_t)cfg->max_seqs;
    in->block_tokens = (uint32_t)cfg->block_tokens;
    in->kv_blocks = (uint32_t)cfg->kv_blocks;
    int spec_k = 0; /* first: with speculation on, the plan holds the MTP layer's KV too */
    rc = wk_spec_cpu_configure(c->m, cfg->speculative_tokens, &spec_k);
    if (rc < 0)
        goto fail;
    /* GDN states are blocks of the pool (the scheduler's accounting: this engine keeps each
     * slot's K/V and state in host memory of its own) */
    const bool pool = wk_engine_state_in_pool(cfg);
    if (cfg->kv_cache_memory_bytes > 0)
        rc = wk_engine_size_from_plan(cfg, mc, "cpu", spec_k, pool, in);
    else if (pool)
        rc = wk_engine_size_pool_default(cfg, mc, "cpu", spec_k, in);
    else if (!cfg->kv_blocks)
        in->kv_blocks =
            wk_engine_default_blocks(in->n_slots, in->max_model_len, in->block_tokens, 0);
    if (rc < 0)
        goto fail;
    in->max_step_tokens = (uint32_t)wk_cfg_step_tokens(cfg, WK_STEP_TOKENS_CPU);
    for (int i = 0; i < mc->n_eos && in->n_eos < WK_ENGINE_MAX_EOS; i++)
        if (mc->eos_ids[i] >= 0)
            in->eos_ids[in->n_eos++] = (uint32_t)mc->eos_ids[i];
    c->tp = tpool_create(cfg->threads);
    c->fc = forward_ctx_create(c->m, (int)in->max_step_tokens, (int)in->max_model_len, c->tp);
    if (!c->tp || !c->fc) {
        rc = ERR_NOMEM;
        LOG_ERR("engine_init_failed", "engine=cpu err=%s", err_str(rc));
        goto fail;
    }
    if (spec_k > 0) {
        c->spec = wk_spec_cpu_create(c->m, c->fc, in->n_slots, spec_k, (int)in->max_step_tokens);
        if (!c->spec) {
            rc = ERR_INVAL;
            LOG_ERR("engine_init_failed", "engine=cpu err=%s msg=\"speculative decoding needs "
                    "max-step-tokens > speculative tokens\"", err_str(rc));
            goto fail;
        }
        in->spec_k = (uint32_t)spec_k;
    }
    c->st = xcalloc(in->n_slots, sizeof *c->st);
    c->open = xcalloc(in->n_slots, sizeof *c->open);
    c->tok = xmalloc(sizeof(int32_t) * in->max_step_tokens);
    log_w4a4(c->m);
    LOG_INFO("engine_ready", "engine=cpu model=%s vocab=%u max_model_len=%u slots=%u eos=%u",
             in->model_id, in->vocab_size, in->max_model_len, in->n_slots, in->n_eos);
    *out = e;
    return 0;
fail:
    cpu_destroy(e);
    return rc;
}
