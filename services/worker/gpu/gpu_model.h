/* gpu_model: the whole qwen3_5_moe text model on one CUDA device, driven from a loaded
 * struct model (model/model.h). gpu_model_create() uploads every weight into device struct
 * kweights and allocates, once and from one plan, the per-slot state (GDN conv windows and
 * recurrent S, a paged bf16 or fp8 attention KV pool) and the activations of a step of up to
 * opts.max_rows tokens; nothing is allocated on the token path. gpu_model_step() (gpu_forward.c)
 * runs one forward step over several sequences, each in its own slot with its own chunk of tokens.
 *
 * A step is one pass over all its rows (the tokens of every item, item by item, in order):
 * projections and MoE over all rows, GDN per item in row order (kernels/gdn_seq), attention
 * with one query row per token and its own causal length. Steps where every item has one token
 * replay a captured CUDA graph; others launch eagerly.
 * GDN head dims other than 128 (the tiny test models) run through a zero-padded copy to 128
 * with an adjusted eps and norm weight, which is exact up to rounding (see gpu_forward.c). */
#ifndef GPU_MODEL_H
#define GPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/kv_plan.h"
#include "gpu_sample.h"
#include "model/backend.h"
#include "model/model.h"
#include "model/model_load.h"

struct gpu_model_opts {
    int n_slots;          // sequences held at once (= most items per step)
    int max_model_len;    // positions per sequence
    int block_tokens;     // attention KV block size, tokens (default 16)
    int kv_blocks;        // KV blocks in the pool; 0 = n_slots * ceil(max_model_len/block_tokens)
    int device;           // CUDA device ordinal
    int graphs;           // 1 = capture the layer stack of a (sub-)step of n rows, n = 1..n_slots,
                          //  as CUDA graphs at create and replay them (engine "cuda" does);
                          //  0 = eager launches. A failed capture falls back to eager (logged).
    int force_moe;        // enum backend_id forced for the expert classes (0 = BACKEND_AUTO)
    int force_linear;     // enum backend_id forced for the dense classes (0 = BACKEND_AUTO)
    int max_rows;         // most tokens in one step, all items together (<= 65535); 0 = 256;
                          //  raised to n_slots and spec_k + 1. Every step buffer is sized for it.
    int spec_k;           // MTP drafts per speculative round (1..GPU_SPEC_MAX); 0 = no speculation.
                          //  Needs a model with an MTP head (else ERR_UNSUPPORTED).
    int kv_dtype;         // enum kv_dtype (common/kv_plan.h) of the paged K/V (main layers and the
                          //  MTP layer): 0 = AUTO = bf16; KV_DTYPE_FP8 = e4m3, scales 1.0 (vLLM's
                          //  --kv-cache-dtype fp8 default). Anything else is ERR_INVAL.
    int gemm_min_rows;    // dense layers of at least this many rows run as tensor-core GEMMs
                          //  (kernels/linear.h), fewer as GEMVs: 0 = the measured default per
                          //  weight format (gpu_dispatch.c), -1 = never
    int grouped_min_rows; // expert blocks of at least this many rows run as grouped GEMMs
                          //  (kernels/moe_grouped.h): 0 = default, -1 = never
    int grouped_small;    // those grouped GEMMs use 16-row tiles while the slots (rows x top_k)
                          //  are at most this many per expert of the stack (counting at least
                          //  32 experts: a shared expert too up to 512 rows), 64-row tiles
                          //  otherwise: 0 = the default (16, gpu_dispatch.c), -1 = never (64-row
                          //  tiles always, and the grouped_min_rows defaults measured for them)
    int grouped_pipe64;   // the 64-row tiles of NVFP4 experts run the pipelined kernel
                          //  (MOE_GROUPED_PIPE64; same results): 0 = the default (on, its 4
                          //  warps side by side: MOE_GROUPED_PIPE64_COLS), 1 = on with 2 x 2
                          //  warps, 2 = on with 1 x 4 warps, -1 = off (the plain kernel)
    int dense_tiles;      // NVFP4 dense weights (not the lm_head) with linear_tiles_ok take
                          //  LINEAR_PATH_TILES (the pipelined W4A16 tiles, no decoded copy) from 9
                          //  rows (gemm_min_rows when that is > 0) up to this many: 0 = the
                          //  default (32; none when gemm_min_rows is set), -1 = never
    int gdn_chunk;        // items of at least this many rows without snapshots (prefill) run
                          //  the GDN recurrence in its chunked form (gdn_seq_step_chunked_cuda),
                          //  fewer token by token: 0 = the default (gpu_dispatch.c), -1 = never
    int fuse;             // fewer launches per step: at few rows (decode) weights read by the
                          //  same rows in one launch (GDN qkv + z and b + a, attention q + k + v:
                          //  gemv_multi_cuda), the router, shared gate and top-k in one
                          //  (moe_router_cuda), a shared expert folded into the routed experts'
                          //  launches; at every row count the attention inputs in one
                          //  (attn_prep_cuda): 0 = the default (on), -1 = off (one launch each)
    int pdl;              // the decode graphs keep the programmatic edges that the kernels'
                          //  PDL launches (kernels/internal/pdl.cuh) give their capture: a
                          //  kernel's blocks start while the one before it finishes: 0 = the
                          //  default (on), 1 = on, -1 = off (each such edge made a full one
                          //  before instantiation). Eager launches keep the attribute either way.
    int prefill_attn;     // items of more than 16 rows (prefill chunks) attend through
                          //  attn_prefill: 0 = yes, -1 = no (attn_decode one query row at a
                          //  time, split too)
    int wgmma_attn;       // prefill attention on wgmma (attn_prefill's WGMMA path) where
                          //  attn_prefill_wgmma_ok: 0 = yes (the default), -1 = no (FLASH)
    int split_attn;       // passes of few-row items (verify windows; decode rows too where
                          //  attn_decode is not the GQA form) through attn_prefill_split where
                          //  it runs: 0 = yes, -1 = no (items of at most 16 rows row by row
                          //  through attn_decode)
    int decode_attn;      // attn_decode's form (kernels/attn_decode.h): 0 = the default (the GQA
                          //  tensor-core form where it runs, else the CUDA-core one), -1 = the
                          //  CUDA-core form always
    double mem_util;      // > 0 (at most 1): size the pool from the device's memory, as vLLM's
                          //  --gpu-memory-utilization: kv_blocks and n_slots (at most the one
                          //  given) from kv_plan_compute over total x mem_util minus what the
                          //  device holds once the weights and step buffers are in, minus
                          //  mem_reserve; kv_blocks must be 0. ERR_FULL with the plan's one-line
                          //  refusal when one max_model_len sequence does not fit.
    int64_t mem_reserve;  // with mem_util: bytes left free for what comes after the pool (CUDA
                          //  graphs, cuBLASLt's lazy workspaces); 0 = GPU_MEM_RESERVE_DEFAULT
    int state_in_pool;    // 1: the GDN states are blocks of the K/V pool (docs/KV.md): one
                          //  arena of kv_blocks blocks, each holding every attention layer's K
                          //  and V of block_tokens tokens, a sequence's state in the
                          //  gpu_model_state_blocks() blocks from the block seq_open names;
                          //  n_slots is then a batch limit only and kv_blocks defaults to
                          //  n_slots x (blocks per sequence + state blocks); with spec_k the
                          //  MTP layer's K/V are sub-blocks of the same blocks (the verify
                          //  snapshots stay an allocation of their own, spec_k + 1 states,
                          //  made before the pool is sized). 0: states in slots of their own
};

#define GPU_MEM_RESERVE_DEFAULT ((int64_t)512 << 20)

/* With opts.mem_util: how the pool was sized (gpu_model_mem_plan). */
struct gpu_mem_plan {
    int64_t device_total;  // cudaMemGetInfo total
    int64_t device_used;   // total - free just before the pool: weights, step buffers, the CUDA
                           //  context, other processes
    int64_t reserve;       // opts.mem_reserve resolved
    struct kv_plan kv;     // the plan (budget, blocks, slots, tokens, concurrency)
};

#define GPU_SPEC_MAX 16

/* One item of a step: n tokens of the sequence in slot at positions pos .. pos+n-1. */
struct gpu_item {
    int slot;
    const int32_t *tokens;   // (n)
    int n;
    int pos;                 // must equal the slot's committed position
    const uint32_t *blocks;  // (n_blocks) KV block ids of the sequence, or NULL for the slot's
    int n_blocks;            //  default blocks [slot*bps, (slot+1)*bps) when the pool allows
    float *logits;           // (vocab) out: last position's logits (host); NULL = not needed;
                             //  (n, vocab): every position's, when all_logits is set
    int all_logits;          // 1 = logits of all n positions (speculative verify windows)
    int snap;                // internal (gpu_model_spec_window): must be 0 in gpu_model_step
    int32_t *argmax;         // out: greedy id of the last position (computed on the device); or NULL
    const struct gpu_sample_req *sample; // with logits NULL: draw the last position's token on
    int32_t *token;          //  the device (gpu_sample.h) into *token; or NULL
    int rc;                  // out: 0 or ERR_* for this item alone
};

/* Resident device bytes, by the loader's accounting groups, plus state. */
struct gpu_model_mem {
    int64_t group[MODEL_GROUP_COUNT]; // weights per group
    int64_t weights;                  // sum of group[]
    int64_t gdn_state;                // conv windows + S, all slots
    int64_t kv_pool;                  // K + V of every attention layer
    int64_t activations;              // step scratch
    int64_t dispatch;                 // many-row paths: GEMM scratch, cuBLASLt workspace, fp32
                                      //  router copies (gpu_dispatch.c)
    int64_t total;
};

struct gpu_model;

/* Upload m (which must stay alive only during the call: nothing of it is kept) and plan the
 * memory. Returns 0, ERR_INVAL (bad opts, e.g. kv_blocks * block_tokens > INT32_MAX: cache
 * slots are int32), ERR_UNSUPPORTED (a weight or shape the kernels cannot run; err says which),
 * ERR_NOMEM (device memory), ERR_CUDA. err gets one line. */
int gpu_model_create(struct gpu_model **out, const struct model *m,
                     const struct gpu_model_opts *opts, char *err, size_t errlen);
void gpu_model_destroy(struct gpu_model *g);

/* The startup log lines: device, one backend line per layer class (model/backend.h) and the
 * resident bytes per group, KV pool and state. */
void gpu_model_log(const struct gpu_model *g);
const struct gpu_model_mem *gpu_model_memory(const struct gpu_model *g);
/* The memory sizing of opts.mem_util, NULL when the pool was sized by kv_blocks. */
const struct gpu_mem_plan *gpu_model_mem_plan(const struct gpu_model *g);
const struct backend_plan *gpu_model_plan(const struct gpu_model *g);
int gpu_model_vocab(const struct gpu_model *g);
int gpu_model_n_slots(const struct gpu_model *g);
int gpu_model_max_len(const struct gpu_model *g);
int gpu_model_block_tokens(const struct gpu_model *g);
int gpu_model_kv_blocks(const struct gpu_model *g);
int gpu_model_max_rows(const struct gpu_model *g);
/* The K/V cache dtype in use (enum kv_dtype, resolved: KV_DTYPE_BF16 or KV_DTYPE_FP8). */
int gpu_model_kv_dtype(const struct gpu_model *g);
/* Whether items may ask for a token sampled on the device (gpu_item.sample). */
int gpu_model_can_sample(const struct gpu_model *g);
/* Device name (static for the model's lifetime). */
const char *gpu_model_device_name(const struct gpu_model *g);

/* Switch CUDA-graph replay off/on (on only when the graphs were captured at create);
 * returns whether graphs are now in use. For A/B timing. */
int gpu_model_set_graphs(struct gpu_model *g, int on);
/* Kernels in the captured layer-stack graph of a decode step of n rows (what one step launches
 * inside the graph; the lm_head, sampling and copies run after it), -1 without graphs. */
int gpu_model_graph_kernels(const struct gpu_model *g, int n);
/* Programmatic (PDL) edges in that graph as it runs: 0 with opts.pdl off, -1 without graphs. */
int gpu_model_graph_pdl_edges(const struct gpu_model *g, int n);

/* Start a new sequence in slot: position 0, GDN state zeroed. With opts.state_in_pool the state
 * takes blocks slot x state_blocks .. (the default layout: the first n_slots chunks hold states,
 * the default block tables follow them). 0 or ERR_RANGE. */
int gpu_model_seq_open(struct gpu_model *g, int slot);
/* The same with the state in the state_blocks blocks from state_block (a multiple of
 * gpu_model_state_blocks(), inside the pool; the scheduler's SeqWork.state_block). ERR_RANGE
 * otherwise, or without opts.state_in_pool. */
int gpu_model_seq_open_state(struct gpu_model *g, int slot, uint32_t state_block);
/* Blocks a sequence's GDN state takes in the pool (opts.state_in_pool), else 0. */
int gpu_model_state_blocks(const struct gpu_model *g);
/* Committed position of slot (-1 when not open). */
int gpu_model_seq_pos(const struct gpu_model *g, int slot);
void gpu_model_seq_close(struct gpu_model *g, int slot);

/* Run the items (each slot at most once). Per-item failures go to item.rc (ERR_STATE: slot
 * not open or wrong pos; ERR_INVAL: bad token id or count; ERR_FULL: past max_model_len or
 * the block table, or the item's tokens would take the step past max_rows). Returns 0, or
 * ERR_CUDA for a failure of the whole step. Synchronous. */
int gpu_model_step(struct gpu_model *g, struct gpu_item *items, int n_items);

/* ---- MTP speculative decoding (MODEL.md §6; the acceptance rule is the caller's) ----
 * With opts.spec_k > 0 the MTP head is resident with its own paged K/V (same block ids as the
 * sequence's), every plain step also runs the MTP over the positions whose next token became
 * known, and a round is spec_window then spec_commit. */
int gpu_model_spec_k(const struct gpu_model *g);
/* The sequence in slot has run positions < pos (its committed position) and x is its next
 * token: draft k (1..spec_k) tokens greedily with the MTP head (argmax on the device), run the
 * window [x, drafts] at pos .. pos+k through the main model as one item and write logits
 * (k+1, vocab) (row i = the target distribution after window token i). blocks/n_blocks: the
 * sequence's block table (NULL = the slot's default blocks), covering pos+k. The slot takes no
 * step until gpu_model_spec_commit. 0, ERR_INVAL (k, x, slot), ERR_STATE (slot not open, no
 * step run yet, pos wrong, a window open), ERR_FULL (window past max_model_len or the table),
 * ERR_CUDA. */
int gpu_model_spec_window(struct gpu_model *g, int slot, int pos, int32_t x, int k,
                          const uint32_t *blocks, int n_blocks, int32_t *drafts, float *logits);
/* Keep x and the first a drafts: the GDN state becomes the window's after row a, the position
 * pos+a+1. 0, ERR_STATE (no window of this slot open, a out of 0..k), ERR_CUDA. */
int gpu_model_spec_commit(struct gpu_model *g, int slot, int a);

#endif
