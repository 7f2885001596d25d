/* wk_engine: what the worker needs from a model backend. Sequences live in numbered slots
 * (the scheduler's GDN state slots); the engine keeps whatever per-slot state it needs (KV,
 * recurrent state, position). One call runs one forward step over several slots, each with
 * its own token chunk, and returns the last position's logits of each item that asks.
 * Engines: "fake" (deterministic, no model: tests), "cpu" (model/forward.h reference),
 * "cuda" (services/worker/gpu, when built with CUDA). */
#ifndef WK_ENGINE_H
#define WK_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#define WK_ENGINE_MAX_EOS 16
#define WK_ENGINE_NO_STATE UINT32_MAX

struct wk_engine_info {
    char model_id[128];       // served model name
    uint32_t vocab_size;      // logits per row
    uint32_t max_model_len;   // positions per sequence
    uint32_t n_slots;         // sequences the engine holds at once
    uint32_t block_tokens;    // attention KV block size, tokens
    uint32_t kv_blocks;       // attention KV blocks
    uint32_t state_blocks;    // > 0: a sequence's GDN state takes this many blocks of the pool
                              //  (the plan's SeqWork.state_block); 0: states in the slots
    uint64_t kv_bytes;        // bytes behind them (info)
    uint32_t max_step_tokens; // most tokens one step may carry
    uint32_t eos_ids[WK_ENGINE_MAX_EOS];
    uint32_t n_eos;
    uint32_t spec_k; // MTP drafts per speculative round; 0 = no speculation (ops below NULL)
    bool device_sampling; // items may ask for the token instead of the logits (below)
    uint32_t device_sampling_max_hist; // ... when a penalty is on, only with at most this many
                                       //  history tokens
    bool device_sampling_procs; // ... also with a logit bias, banned ids or an allow mask
                                //  (sample_params bias_ids, ban_ids, allow), applied first as
                                //  sample_token does; false: such items take the logits path
    uint32_t device_sampling_max_bias; // ... with at most this many bias pairs
    uint32_t device_sampling_max_ban;  // ... and this many banned ids
};

struct sample_params;
struct sample_rng;

/* One item of a step: n tokens of the sequence in slot, at positions pos .. pos+n-1. */
struct wk_engine_item {
    uint32_t slot;
    const uint32_t *tokens; // (n)
    uint32_t n;
    uint32_t pos;
    const uint32_t *blocks; // (n_blocks) block table, validated by the caller
    uint32_t n_blocks;
    float *logits; // (vocab_size) out: last position's logits; NULL = not needed
    /* With logits NULL and sp set (engines with info.device_sampling only): the engine draws
     * the last position's token itself, as model/sample.h's sample_token would from those
     * logits (same params and hist, rng advanced the same way), into token. Never with a logit
     * bias or banned ids. Spares the copy of a vocabulary row per item. */
    const struct sample_params *sp;
    const int32_t *hist; // (n_hist) the tokens the penalties look at (with a penalty on, at most
                         //  info.device_sampling_max_hist)
    uint32_t n_hist;
    struct sample_rng *rng;
    int32_t token; // out
    int rc;        // out: 0 or ERR_* for this item alone
};

struct wk_engine;

typedef void (*wk_engine_progress_cb)(void *ctx, float fraction, const char *stage);

struct wk_engine_ops {
    /* Start a new sequence in slot (forget what was there); its GDN state in the pool's blocks
     * from state_block (info.state_blocks > 0: the plan's SeqWork.state_block), or
     * WK_ENGINE_NO_STATE (the engine's default place). 0 or ERR_RANGE. */
    int (*seq_open)(struct wk_engine *e, uint32_t slot, uint32_t state_block);
    /* Drop the sequence in slot. */
    void (*seq_close)(struct wk_engine *e, uint32_t slot);
    /* Run the items. Per-item failures go to item.rc; the return is for whole-step failures. */
    int (*step)(struct wk_engine *e, struct wk_engine_item *items, uint32_t n_items);
    void (*destroy)(struct wk_engine *e);
    /* Speculative decoding (services/worker/wk_spec.h), NULL when the engine has none.
     * spec_window: the sequence in slot has run positions < pos and x is its next token (not
     * yet run); propose k (1..info.spec_k) drafts after x, run the window [x, drafts] at pos ..
     * pos+k and write logits (k+1, vocab): row i = the target distribution after window token
     * i. blocks/n_blocks: the sequence's block table as last sent, covering pos+k (engines
     * with their own KV, like cpu, ignore it). spec_commit must follow: keep x and the first a
     * drafts (the position becomes pos+a+1; the token after them is fed by the next item or
     * window). 0 or ERR_*. */
    int (*spec_window)(struct wk_engine *e, uint32_t slot, uint32_t pos, uint32_t x, int k,
                       const uint32_t *blocks, uint32_t n_blocks, int32_t *drafts,
                       float *logits);
    int (*spec_commit)(struct wk_engine *e, uint32_t slot, int a);
};

struct wk_engine {
    const struct wk_engine_ops *ops;
    const char *name; // "fake", "cpu"
    struct wk_engine_info info;
    void *impl; // the backend's own state
};

struct wk_cfg;

/* Create the engine chosen by cfg->engine; progress (may be NULL) is called while loading.
 * Returns 0 and *out, or a negative status (unknown engine, load failure). */
int wk_engine_create(const struct wk_cfg *cfg, wk_engine_progress_cb progress, void *ctx,
                     struct wk_engine **out);
void wk_engine_destroy(struct wk_engine *e);

struct model_config;

/* --kv-cache-memory-bytes: set in->n_slots, kv_blocks, state_blocks and kv_bytes from the
 * model's KV plan (common/kv_plan.h, docs/KV.md) for in->max_model_len and log the pool, or
 * refuse in one line (logged and printed) when one max_model_len sequence does not fit.
 * spec_k > 0: speculation is on, so the MTP layer's own KV is in the plan too. state_in_pool:
 * the GDN states are blocks of the pool (in->n_slots = --max-seqs, a batch limit), else slots
 * reserved up front. 0 or the plan's status. */
int wk_engine_size_from_plan(const struct wk_cfg *cfg, const struct model_config *mc,
                             const char *engine, int spec_k, bool state_in_pool,
                             struct wk_engine_info *in);

/* Whether cfg keeps the GDN states in the pool (--gdn-state; auto: pool, every engine). */
bool wk_engine_state_in_pool(const struct wk_cfg *cfg);

/* Without a byte budget, states in the pool: in->state_blocks from the model's geometry, and
 * (no --kv-blocks) in->kv_blocks = room for in->n_slots sequences of max_model_len with their
 * states. Refuses in one line when --kv-blocks cannot hold one state and one block. 0 or
 * ERR_INVAL. */
int wk_engine_size_pool_default(const struct wk_cfg *cfg, const struct model_config *mc,
                                const char *engine, int spec_k, struct wk_engine_info *in);

/* Blocks for n_slots sequences of max_model_len positions and state_blocks each, at most
 * MSG_MAX_KV_BLOCKS (the bound a Register may announce). */
uint32_t wk_engine_default_blocks(uint32_t n_slots, uint32_t max_model_len, uint32_t block_tokens,
                                  uint32_t state_blocks);

/* The backends. */
int wk_engine_fake_create(const struct wk_cfg *cfg, struct wk_engine **out);
int wk_engine_cpu_create(const struct wk_cfg *cfg, wk_engine_progress_cb progress, void *ctx,
                         struct wk_engine **out);
/* Defined by wk_engine_cuda.c when the build has CUDA (tern_kernels) and that file exists;
 * otherwise by wk_engine_cuda_stub.c, which returns ERR_UNSUPPORTED. */
int wk_engine_cuda_create(const struct wk_cfg *cfg, wk_engine_progress_cb progress, void *ctx,
                          struct wk_engine **out);
/* Whether this build has the cuda engine (false from the stub). */
bool wk_engine_cuda_is_built(void);

#endif
