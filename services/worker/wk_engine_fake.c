/* wk_engine_fake: a model-free engine for tests of the services. The "model" predicts
 * next = (prev * 31 + 7) % vocab with a logit spike of 30 over zeros, so greedy and seeded
 * sampling both return it (p > 1 - 1e-9 for vocab < 10^4; but at the Qwen3 size 151936 a
 * temperature-1 draw misses with (V-1) e^-30 ~ 1.4e-8 a token, so a test that checks tens of
 * thousands of tokens asks for greedy). It keeps a position per slot and refuses work at the
 * wrong position, so scheduler/worker disagreements show up as errors.
 * With --fake-device-sampling it draws the tokens of the items that ask (sample_token on its
 * own logits), as the cuda engine does on the GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/kv_plan.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "model/config.h"
#include "model/config_load.h"
#include "model/kv_geom.h"
#include "model/sample.h"
#include "wk_cfg.h"
#include "wk_engine.h"

#define FAKE_MAX_MODEL_LEN 4096
#define FAKE_SPIKE 30.0f

struct fake_slot {
    bool open;
    uint32_t pos;  // tokens consumed
    uint32_t last; // last token consumed
};

struct fake {
    struct fake_slot *slots; // (n_slots)
    int step_us;             // simulated compute per step
    struct sample_ctx *sc;   // device sampling: the sampler and a logits row; else NULL
    float *row;
};

static int fake_seq_open(struct wk_engine *e, uint32_t slot, uint32_t state_block)
{
    (void)state_block; /* no memory behind the pool */
    struct fake *f = e->impl;
    if (slot >= e->info.n_slots)
        return ERR_RANGE;
    f->slots[slot] = (struct fake_slot){.open = true};
    return 0;
}

static void fake_seq_close(struct wk_engine *e, uint32_t slot)
{
    struct fake *f = e->impl;
    if (slot < e->info.n_slots)
        f->slots[slot].open = false;
}

static int fake_step(struct wk_engine *e, struct wk_engine_item *items, uint32_t n_items)
{
    struct fake *f = e->impl;
    uint32_t V = e->info.vocab_size;
    for (uint32_t i = 0; i < n_items; i++) {
        struct wk_engine_item *it = &items[i];
        it->rc = 0;
        if (it->slot >= e->info.n_slots || !f->slots[it->slot].open || it->n == 0) {
            it->rc = ERR_STATE;
            continue;
        }
        struct fake_slot *sl = &f->slots[it->slot];
        if (it->pos != sl->pos || it->pos + it->n > e->info.max_model_len) {
            it->rc = ERR_STATE;
            continue;
        }
        bool ok = true;
        for (uint32_t t = 0; t < it->n; t++)
            ok &= it->tokens[t] < V;
        if (!ok) {
            it->rc = ERR_RANGE;
            continue;
        }
        sl->pos += it->n;
        sl->last = it->tokens[it->n - 1];
        float *lg = it->logits ? it->logits : it->sp && f->sc ? f->row : NULL;
        if (lg) {
            memset(lg, 0, sizeof(float) * V);
            lg[((uint64_t)sl->last * 31 + 7) % V] = FAKE_SPIKE;
        }
        if (!it->logits && lg) /* the token drawn here (wk_engine.h) */
            it->token = sample_token(f->sc, it->sp, lg, it->hist, (int)it->n_hist, it->rng);
    }
    if (f->step_us > 0) {
        struct timespec ts = {.tv_sec = f->step_us / 1000000,
                              .tv_nsec = (long)(f->step_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void fake_destroy(struct wk_engine *e)
{
    struct fake *f = e->impl;
    sample_ctx_destroy(f->sc);
    free(f->row);
    free(f->slots);
    free(f);
    free(e);
}

static const struct wk_engine_ops FAKE_OPS = {
    .seq_open = fake_seq_open,
    .seq_close = fake_seq_close,
    .step = fake_step,
    .destroy = fake_destroy,
};

int wk_engine_fake_create(const struct wk_cfg *cfg, struct wk_engine **out)
{
    struct wk_engine *e = xcalloc(1, sizeof *e);
    struct fake *f = xcalloc(1, sizeof *f);
    struct wk_engine_info *in = &e->info;
    e->ops = &FAKE_OPS;
    e->name = "fake";
    e->impl = f;
    snprintf(in->model_id, sizeof in->model_id, "fake");
    in->vocab_size = (uint32_t)cfg->fake_vocab;
    in->max_model_len = cfg->max_model_len ? (uint32_t)cfg->max_model_len : FAKE_MAX_MODEL_LEN;
    in->n_slots = (uint32_t)cfg->max_seqs;
    in->block_tokens = (uint32_t)cfg->block_tokens;
    in->kv_blocks = cfg->kv_blocks ? (uint32_t)cfg->kv_blocks
                                   : wk_engine_default_blocks(in->n_slots, in->max_model_len,
                                                              in->block_tokens, 0);
    in->kv_bytes = 0;
    if (cfg->kv_cache_memory_bytes > 0) { /* geometry from the config.json under --model */
        struct model_config *mc = xcalloc(1, sizeof *mc);
        char err[512];
        int rc = config_load(mc, cfg->model, err, sizeof err);
        if (rc < 0)
            LOG_ERR("config_load_failed", "engine=fake dir=%s err=%s msg=\"%s\"", cfg->model,
                    err_str(rc), rc == ERR_FORMAT || rc == ERR_RANGE ? err : "-");
        else
            rc = wk_engine_size_from_plan(cfg, mc, "fake", 0, wk_engine_state_in_pool(cfg), in);
        free(mc);
        if (rc < 0) {
            free(f);
            free(e);
            return rc;
        }
    }
    in->max_step_tokens = (uint32_t)wk_cfg_step_tokens(cfg, WK_STEP_TOKENS_CPU);
    if (cfg->fake_eos >= 0) {
        in->eos_ids[0] = (uint32_t)cfg->fake_eos;
        in->n_eos = 1;
    }
    f->slots = xcalloc(in->n_slots, sizeof *f->slots);
    f->step_us = cfg->fake_step_us;
    if (cfg->fake_device_sampling) {
        f->sc = sample_ctx_create((int)in->vocab_size);
        f->row = xmalloc(sizeof(float) * in->vocab_size);
        in->device_sampling = f->sc != NULL;
        in->device_sampling_max_hist = UINT32_MAX;
        in->device_sampling_procs = in->device_sampling; /* sample_token applies them */
        in->device_sampling_max_bias = UINT32_MAX;
        in->device_sampling_max_ban = UINT32_MAX;
    }
    *out = e;
    return 0;
}
