/* kv_plan: exact memory plan for this hybrid model's per-sequence cache: paged attention KV
 * (grows with every token) plus Gated DeltaNet state (fixed per sequence), in bf16 or fp8.
 * Pure arithmetic from the model geometry and the operator's flags; shared by the scheduler
 * (admission), the worker (allocation), `tern-scheduler --check` and `tern compare`.
 *
 * Layout (docs/KV.md): attention KV lives in blocks of `block_tokens` tokens that hold every
 * attention layer's K and V for those tokens (the MTP layer too when speculation is on); GDN state
 * lives either in the same pool (state_in_pool: a sequence takes state_blocks = ceil(state bytes /
 * block bytes) consecutive blocks, aligned to state_blocks, at admission; every byte of the budget
 * is a block) or in per-sequence slots (conv window + recurrent S for every GDN layer) reserved
 * up front for up to max_num_seqs sequences, from at most half of the bytes left after one
 * max-length sequence (KV + slot), all remaining bytes becoming KV blocks. Waste per sequence is
 * < one block of tokens (plus < one block of state padding in the pool). */
#ifndef COMMON_KV_PLAN_H
#define COMMON_KV_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kv_dtype { KV_DTYPE_AUTO = 0, KV_DTYPE_BF16, KV_DTYPE_FP8 };

/* Model geometry, filled from config.json by the caller (kv_geom_from_config in model/). */
struct kv_geom {
    int n_attn_layers;         // full-attention layers in the main model
    int n_kv_heads;            // Hkv
    int head_dim;              // D (K and V both D wide)
    int n_gdn_layers;          // Gated DeltaNet layers
    int64_t gdn_conv_dim;      // 2*Hk*Dk + Hv*Dv
    int gdn_conv_kernel;       // Kc; the state keeps Kc-1 columns
    int gdn_v_heads;           // Hv
    int gdn_k_dim;             // Dk
    int gdn_v_dim;             // Dv
    bool ssm_state_f32;        // recurrent state dtype: fp32 (mamba_ssm_dtype) or bf16
    bool conv_state_f32;       // conv window dtype: fp32 (the CUDA runner) or bf16 (the model's)
    int mtp_layers;            // MTP attention layers available (0 when the head is missing)
    int64_t max_position_embeddings; // default max_model_len
};

struct kv_opts {
    enum kv_dtype dtype;                // AUTO = bf16
    int64_t max_model_len;              // 0 = geom.max_position_embeddings
    int max_num_seqs;                   // 0 = 256
    int64_t kv_cache_memory_bytes;      // > 0: the budget, ignores the GPU figures below
    double gpu_memory_utilization;      // fraction of total device memory tern may use (0 = 0.9)
    int64_t device_total_bytes;         // total device memory
    int64_t weights_bytes;              // resident weights
    int64_t reserve_bytes;              // activations, workspaces, graphs
    int spec_tokens;                    // speculative tokens K (MTP layer KV counted when > 0)
    int block_tokens;                   // 0 = 16
    bool state_in_pool;                 // GDN state as blocks of the KV pool (else: slots)
    int64_t request_len;                // > 0: also count concurrent requests of this length
};

struct kv_plan {
    enum kv_dtype dtype;                // resolved (never AUTO)
    int64_t max_model_len;
    int block_tokens;
    int64_t kv_bytes_per_token_layer;   // K+V of one token in one attention layer
    int n_kv_layers;                    // attention layers that hold KV (+ MTP when speculating)
    int64_t kv_bytes_per_token;         // over all those layers
    int64_t block_bytes;                // block_tokens * kv_bytes_per_token
    int64_t gdn_bytes_per_layer;        // conv window + recurrent state of one GDN layer
    int64_t state_bytes_per_seq;        // all GDN layers
    int64_t seq_bytes_max_len;          // one sequence of max_model_len: KV blocks + state slot
    int64_t budget_bytes;               // bytes the pool may use
    bool state_in_pool;                 // as the option
    int64_t state_blocks;               // state_in_pool: blocks one sequence's state takes (0 when
                                        //  the model has no GDN state)
    int64_t n_state_slots;              // slots: GDN state slots reserved; in the pool: sequences
                                        //  at once (max_num_seqs, a batch limit only)
    int64_t n_blocks;                   // KV blocks (in the pool: KV and state)
    int64_t pool_tokens;                // KV tokens: n_blocks * block_tokens, less one state
                                        //  (state_blocks) in the pool
    double max_concurrency;             // sequences of max_model_len that fit at once
    double tokens_per_gib;              // max_model_len / GiB(seq_bytes_max_len)
    int64_t max_len_fit;                // largest max_model_len that fits in the budget
    int64_t request_len;                // as the option (0: not asked)
    int64_t requests_by_memory;         // requests of request_len whose KV and state fit at once
    int64_t concurrent_requests;        // the same, at most n_state_slots
};

/* Compute the plan. Returns 0, or ERR_FULL when one sequence of max_model_len does not fit
 * (plan still filled: seq_bytes_max_len, budget_bytes, max_len_fit), or ERR_INVAL for bad
 * input. On error writes one line to err (the refusal names needed and available GiB, the
 * largest max_model_len that fits and the flag to change). */
int kv_plan_compute(const struct kv_geom *g, const struct kv_opts *o, struct kv_plan *p,
                    char *err, size_t errlen);
/* Blocks one sequence's GDN state takes in the pool for this geometry, dtype, block size and
 * speculation (o's budget and lengths are not needed), or a negative status on bad input. */
int64_t kv_plan_state_blocks(const struct kv_geom *g, const struct kv_opts *o);
/* Blocks needed to hold n_tokens of KV. */
int64_t kv_plan_blocks_for(const struct kv_plan *p, int64_t n_tokens);
const char *kv_dtype_name(enum kv_dtype d);
/* "auto" | "bf16" | "fp8" (also "fp8_e4m3"); returns -1 if unknown. */
int kv_dtype_parse(const char *s);

#endif
