/* gpu_internal: what gpu_model.c (upload, memory plan) and gpu_forward.c (the step) share. */
#ifndef GPU_INTERNAL_H
#define GPU_INTERNAL_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#include "gdn_seq.h"
#include "gpu_model.h"
#include "kweight.h"
#include "linear.h"

#define GPU_GDN_D 128 // gdn_step's fixed head dim

struct gpu_layer {
    enum layer_type type;
    float *in_norm;            // (H)
    float *post_norm;          // (H)
    /* gated deltanet */
    struct kweight qkv, z, b, a, out;
    float *conv_w;             // (cd, kc)
    float *dt_bias, *a_log;    // (Hv)
    float *gnorm;              // (128) plain w, padded with zeros and scaled when Dv != 128
    float *conv_state;         // (n_slots, cd, kc-1); in the pool: chunk c's at c x state_stride
    float *ssm;                // (n_slots, Hv, 128, 128); in the pool: the same stride
    float *conv_snap;          // (n_snap, cd, kc-1) state after each row of the open window; or NULL
    float *ssm_snap;           // (n_snap, Hv, 128, 128); or NULL
    /* gated attention */
    struct kweight q, k, v, o;
    float *q_norm, *k_norm;    // (D)
    void *k_cache, *v_cache;   // (kv_blocks*block_tokens, Hkv, D) of kv_dtype (bf16 or e4m3)
    /* moe */
    struct kweight router;     // (E, H)
    float *router_f32;         // (E, H) fp32 copy for the many-row router GEMM; or NULL
    struct kweight gate_up;    // E (+ 1 when sh_folded) x (2I, H), gate rows first
    struct kweight down;       // E (+ 1 when sh_folded) x (H, I)
    bool has_shared;
    struct kweight sh_gate;    // (2, H): shared_expert_gate, then a zero row (softmax = sigmoid)
    struct kweight sh_gate_up; // 1 x (2Is, H)
    struct kweight sh_down;    // 1 x (H, Is)
    bool sh_folded;            // the shared expert is also expert E of gate_up / down (E + 1
                               //  experts there; sh_gate_up / sh_down are views of it)
};

/* The kernel path of a step's layers by rows and weight format (gpu_dispatch.c): computed once
 * at create, printed at startup (gpu_dispatch lines) and read by every call below, so the log
 * says what runs. Index: enum kw_fmt (1..3). INT_MAX = never. */
struct gpu_dispatch {
    int gemm_rows[4];          // dense weights: LINEAR_PATH_GEMM from this many rows, else GEMV
    int lm_rows[4];            // the lm_head: the same, its own thresholds
    int router_rows;           // the router: fp32 cuBLASLt GEMM (router_f32) from this many rows
    int grouped_rows[4];       // expert stacks: moe_grouped from this many rows, else moe_expert
    int grouped_small_per_expert; // moe_grouped with 16-row tiles while slots (rows x top_k) <=
                               //  this x max(the stack's experts, grouped_small_min_experts),
                               //  else 64-row tiles; 0 = never
    int grouped_small_min_experts; // (a shared expert is a stack of 1)
    int grouped_t64;           // tile_rows of moe_grouped's 64-row tiles: MOE_GROUPED_TILE_ROWS
                               //  | MOE_GROUPED_PIPE64 (NVFP4 pipelined) | .._PIPE64_COLS
    int dense_tiles_min;       // NVFP4 dense weights: LINEAR_PATH_TILES from this many rows up to
    int dense_tiles_max;       //  this many (0 = never), outside: gemm_rows as for the others
    int gdn_chunk_rows;        // GDN items of at least this many rows (no snapshots) run the
                               //  chunked recurrence (0 = never), the others token-serial
    bool gdn_conv_fused;       // passes of one-row items run the conv inside the recurrence's
                               //  launch where it is one block a head (gdn_seq_conv_step_cuda)
    int attn_prefill_rows;     // items of at least this many rows attend through attn_prefill
                               //  (all items of the pass, one launch); else attn_decode per row
    int attn_prefill_path;     // enum attn_prefill_path of that launch (MMA when head_dim % 16 == 0)
    int attn_decode_path;      // enum attn_decode_path of the row-by-row passes (CORES or GQA)
    int attn_split_rows;       // passes of at least attn_split_items items, each of at most this
    int attn_split_items;      //  many rows (batched decode) attend through attn_prefill_split
                               //  (the keys split, a GQA group's K/V read once); 0 = never
    int multi_rows;            // steps of at most this many rows run few-row weights that read
                               //  the same rows as one gemv_multi launch (0 = never)
    bool attn_prep;            // attention inputs (split, q/k norms, rope, cache stores) in one
                               //  attn_prep launch; else the kernels one by one
    int fold_rows[4];          // steps of at most this many rows run a folded shared expert
                               //  (gpu_layer.sh_folded) in the routed experts' launches (the
                               //  moe_expert rows: below grouped_rows; 0 = never)
    bool fold_early;           // ... and its gate/up before the launch's PDL wait, during the
                               //  router (moe_expert_sh_cuda)
    bool mtp_upkeep_kv_only;   // the MTP pass after a plain step stores its K/V and stops
                               //  (gpu_spec_after_step; the gpu_spec log line's upkeep=)
    char why[160];             // where the thresholds came from (measured table, options)
};

/* The MTP head on the device. */
struct gpu_mtp_w {
    struct kweight fc;         // (H, 2H)
    float *norm_emb, *norm_hid, *norm; // (H) each, 1+w norms
    struct gpu_layer layer;    // full attention (own K/V) + MoE
};

struct gpu_model {
    struct model_config cfg;
    struct gpu_model_opts o;
    int bps;                   // max blocks per sequence = ceil(max_model_len / block_tokens)
    int R;                     // max rows per step (opts.max_rows, resolved)
    int lrows;                 // logits rows per lm_head batch
    int n_snap;                // GDN snapshot rows (0: none) = spec_k + 1: one window is open at
                               //  a time (win_slot), its row t's state at snapshot t
    int spec_k;                // 0: speculation off
    int win_slot;              // slot with an open speculative window, -1 = none
    struct gpu_spec *spec;     // MTP head and speculation state (gpu_spec.c); NULL when off
    int kv_dtype;              // enum kv_dtype, resolved (KV_DTYPE_BF16 or KV_DTYPE_FP8)
    int sm;
    int n_sms; // the device's multiprocessors (attn_prefill_split_parts)
    char dev_name[256];
    struct backend_plan plan;
    struct gpu_dispatch disp;
    struct linear_ctx *lin;    // GEMM path scratch and cuBLASLt (NULL: no dense GEMM path)
    struct gpu_model_mem mem;
    bool mem_sized;              // opts.mem_util sized the pool: mem_plan holds how
    struct gpu_mem_plan mem_plan;
    cudaStream_t stream;
    cudaGraphExec_t *graphs;   // [n_slots + 1]: the layer stack for n rows; NULL when eager
    int *graph_kernels;        // [n_slots + 1]: kernel nodes in graphs[n]
    int *graph_pdl_edges;      // [n_slots + 1]: programmatic edges in graphs[n] (opts.pdl)
    cudaGraphExec_t *wgraphs;  // [n_snap + 1]: the stack for one item of n = 2..n_snap rows (a
                               //  verify window); NULL when speculation is off or eager
    int *wgraph_kernels;       // [n_snap + 1]: kernel nodes in wgraphs[n]
    bool use_graphs;
    void **allocs;             // every device allocation, freed at destroy
    int n_allocs, cap_allocs;
    /* derived sizes */
    int H, V, cd, kc, hk, hv, dk, dv, hq, hkv, hd, E, K, I, Is;
    bool gdn_pad;              // dk or dv != 128: run gdn_step on zero-padded heads
    float gdn_eps;             // eps handed to gdn_step (adjusted when padded)
    uint16_t *embed;           // (V, H) bf16
    struct kweight lm_head;    // (V, H)
    float *final_norm;         // (H)
    struct gpu_layer *layers;  // [n_layers]
    /* per-slot host state */
    int *pos;                  // (n_slots) committed position, -1 = closed
    /* GDN states in the K/V pool (opts.state_in_pool; docs/KV.md) */
    void *arena;               // kv_blocks x block_bytes; NULL with states in slots
    int64_t block_bytes;       // every attention layer's K and V of block_tokens tokens
    int kv_sub;                // sub-blocks per block (K and V of each attention layer, the
                               //  MTP layer's last when speculating): the kernels' block ids
                               //  are block x kv_sub
    int n_attn;                // attention layers of the main model
    int state_blocks;          // blocks of one state (a chunk)
    int64_t state_stride;      // floats between chunks (the gdn_seq kernels' state_stride)
    int64_t gdn_layer_bytes;   // conv window (16-byte rounded) + S of one GDN layer
    int *chunk;                // (n_slots) the open sequence's state chunk
    bool *h_seen;              // (n_slots) step scratch
    int *h_rows;               // (R) step scratch: rows that need logits
    int *h_item;               // (R) step scratch: item of each such row
    int *h_start;              // (n_slots) step scratch: first row of each item
    /* step activations (B = R rows) */
    float *h, *x, *y;          // (B, H)
    float *mix_raw, *mix;      // (B, cd)
    float *gz, *ga, *gb, *go;  // (B, Hv*Dv), (B, Hv), (B, Hv), (B, Hv*Dv)
    float *qkv_p, *z_p, *o_p;  // padded (B, (2Hk+Hv)*128), (B, Hv*128), (B, Hv*128); NULL unpadded
    float *qg, *q, *gate, *k, *v, *ao; // attention
    float *attn_ws;
    float *moe_logits, *moe_w, *sh_logits, *sh_w, *moe_ws;
    int32_t *moe_ids, *sh_ids;
    unsigned *router_counter;  // moe_router_cuda's last-block counter (0 between launches)
    unsigned *gdn_norm_cnt;    // (n_slots, hv) the GDN step's fused-norm counters (0 between)
    float *xl, *logits;        // (lrows, H), (lrows, V) rows that need logits
    int32_t *argmax_ids;       // (lrows)
    unsigned long long *argmax_ws; // argmax_cuda's keys and counters (lrows rows)
    int64_t attn_ws_floats;    // attn_ws size: the most any pass of up to n_slots rows at
                               //  max_model_len takes (attn_decode_ws_floats)
    /* per step inputs: one device block and its pinned host mirror */
    int32_t *d_in, *h_in;      // tokens | pos | slots | slot_mapping | seq_lens | gdn items |
                               //  block table (one row per step row, stride ts <= bps)
    float *h_logits;           // pinned (lrows, V)
    struct gpu_sample *sampler; // device sampling of lm_head rows (lrows); NULL: unavailable
    struct gpu_sample_req *h_sreq; // (lrows) step scratch: the sampled rows' requests
    int32_t *h_stok;           // (lrows) their tokens
    int32_t *h_argmax;         // pinned (lrows)
};

/* The shape of one pass: rows (all items' tokens), items, the block-table stride of the pass
 * (ts blocks per row) and the longest causal length of any row (<= ts * block_tokens). */
struct gpu_pass {
    int rows, items, ts, max_len;
    /* device inputs: (rows) tokens, positions, KV cache slots, causal lengths; the block table
     * (rows x ts); the gdn_seq item table (items x GDN_SEQ_ITEM_INTS; unused by the MTP) */
    const int32_t *tokens, *pos, *map, *lens, *table, *gitems;
    /* the attn_prefill descriptors of the items (items x 4 ints: struct attn_prefill_seq, seq =
     * the item's first row of table) and the most rows of one item; NULL / 0: attention runs
     * one query row at a time (attn_decode) */
    const int32_t *aseqs;
    int max_n;
};

/* The attention mixer and the MoE block of one layer over pass p's rows (x -> y); shared by
 * the MTP layer. */
int gpu_attn_mixer(struct gpu_model *g, struct gpu_layer *L, const struct gpu_pass *p);
/* The attention mixer's inputs from g->x: the q (and gate), k, v projections, the q/k norms and
 * rope, and every row's K/V stored at p->map (g->q, g->gate ready for the attention). */
int gpu_attn_inputs(struct gpu_model *g, struct gpu_layer *L, const struct gpu_pass *p);
/* The MTP head's layer (its K/V caches: ktest_gpu_spec reads them), NULL without speculation. */
struct gpu_layer *gpu_spec_layer(struct gpu_model *g);
int gpu_moe_block(struct gpu_model *g, struct gpu_layer *L, int n);
/* cudaError_t -> 0 or ERR_CUDA (logged). */
int gpu_cu(cudaError_t e);
/* After a failure that may have left slot's device state half updated: wait for the stream,
 * log one line and close the slot (gpu_model_seq_close). */
void gpu_fail_slot(struct gpu_model *g, int slot, int rc, const char *where);
/* A pass over the step inputs in d_in (gpu_forward.c). */
void gpu_pass_main(const struct gpu_model *g, struct gpu_pass *p, int rows, int items, int ts,
                   int max_len);

/* Offsets (in int32) into the d_in / h_in block: per-row sections of R, the gdn_seq item table
 * (n_slots x GDN_SEQ_ITEM_INTS), the attn_prefill descriptors (n_slots x 4), then the block table
 * (R x bps at most). */
static inline int64_t gpu_in_tokens(const struct gpu_model *g) { (void)g; return 0; }
static inline int64_t gpu_in_pos(const struct gpu_model *g) { return g->R; }
static inline int64_t gpu_in_slots(const struct gpu_model *g) { return 2 * (int64_t)g->R; }
static inline int64_t gpu_in_map(const struct gpu_model *g) { return 3 * (int64_t)g->R; }
static inline int64_t gpu_in_lens(const struct gpu_model *g) { return 4 * (int64_t)g->R; }
static inline int64_t gpu_in_items(const struct gpu_model *g) { return 5 * (int64_t)g->R; }
static inline int64_t gpu_in_aseqs(const struct gpu_model *g)
{
    return 5 * (int64_t)g->R + (int64_t)g->o.n_slots * GDN_SEQ_ITEM_INTS;
}
static inline int64_t gpu_in_table(const struct gpu_model *g)
{
    return gpu_in_aseqs(g) + 4 * (int64_t)g->o.n_slots;
}
static inline int64_t gpu_in_count(const struct gpu_model *g)
{
    return gpu_in_table(g) + (int64_t)g->R * g->bps;
}

/* ---- dispatch (gpu_dispatch.c) ---- */
/* Fill g->disp from the weight formats and opts (gemm_min_rows, grouped_min_rows,
 * prefill_attn), create g->lin when a GEMM path can run; 0 or a status (err set). */
int gpu_dispatch_init(struct gpu_model *g, char *err, size_t errlen);
void gpu_dispatch_destroy(struct gpu_model *g);
/* The startup lines: one per layer class present, its format and path at 1 row and at many. */
void gpu_dispatch_log(const struct gpu_model *g);
/* y = x W^T over n rows on the path g->disp names for w's format and n (gpu_lm_head: the
 * lm_head's thresholds; gpu_router: L's router logits of g->x into g->moe_logits;
 * gpu_linear_multi: weights on the same rows, one launch when g->disp.multi_rows allows and
 * gpu_linear_multi_kind names a kernel for them: enum gemv_multi_kind, GEMV_MULTI_NONE when n
 * rows or the set take no single launch). */
int gpu_linear(struct gpu_model *g, float *y, const struct kweight *w, const float *x, int n);
int gpu_linear_multi(struct gpu_model *g, int n_w, float *const *ys,
                     const struct kweight *const *ws, const float *x, int n);
int gpu_linear_multi_kind(const struct gpu_model *g, int n_w, const struct kweight *const *ws,
                          int n);
int gpu_lm_head(struct gpu_model *g, float *y, const float *x, int n);
int gpu_router(struct gpu_model *g, struct gpu_layer *L, int n);
/* out (+)= the SwiGLU experts ids/weights of n rows (moe_expert or moe_grouped by g->disp).
 * sh_expert >= 0: slot top_k - 1 of every row is that expert (a folded shared expert; see
 * moe_expert_sh_cuda for what it asks of the launch before), else -1. */
int gpu_experts(struct gpu_model *g, float *out, const float *x, const int32_t *ids,
                const float *weights, int n, int top_k, int n_experts,
                const struct kweight *gate_up, const struct kweight *down, int accumulate,
                int sh_expert);
/* Scratch floats gpu_experts needs for n rows (both paths). */
size_t gpu_experts_ws_floats(int n, int top_k, int n_experts, int inter, int hidden);

/* The layer stack (embed .. final norm into x) for the pass p over the inputs in d_in: eager
 * launches. */
int gpu_run_layers(struct gpu_model *g, const struct gpu_pass *p);
/* Validate items, run the main pass over their rows and hand out their logits; positions
 * are not moved and the stream is not synchronized unless logits were copied. Row starts of
 * the items are left in h_start. */
int gpu_step_run(struct gpu_model *g, struct gpu_item *items, int n_items);

/* ---- MTP speculation (gpu_spec.c) ---- */
/* gpu_model.c: upload m's MTP head into w (bytes in MODEL_GROUP_MTP); device allocations
 * freed at destroy, counted in *acct when given. */
int gpu_upload_mtp(struct gpu_model *g, const struct model *m, struct gpu_mtp_w *w, char *err,
                   size_t errlen);
void *gpu_dev_alloc(struct gpu_model *g, size_t bytes, int64_t *acct);
/* Upload the MTP head of m and allocate the speculation buffers (spec_k = opts.spec_k). */
int gpu_spec_create(struct gpu_model *g, const struct model *m, char *err, size_t errlen);
/* The MTP layer's K/V (same blocks and dtype as the main layers): after gpu_spec_create, once
 * o.kv_blocks is final. */
int gpu_spec_alloc_kv(struct gpu_model *g, char *err, size_t errlen);
void gpu_spec_destroy(struct gpu_model *g);
/* After gpu_step_run of a plain step: the MTP over every position whose next token is now
 * known (its K/V), and the slot's last hidden kept for the next round. */
int gpu_spec_after_step(struct gpu_model *g, const struct gpu_item *items, int n_items);
/* A new sequence in slot: forget its MTP entries. */
void gpu_spec_reset(struct gpu_model *g, int slot);

/* Capture gpu_run_layers for n = 1..n_slots one-token items (ts = bps, max_len =
 * max_model_len) into g->graphs, and with speculation on for one item of n = 2..n_snap rows (a
 * verify window; its snapshot index is an input like the rest) into g->wgraphs. 0, or a status
 * (graphs are then left off). */
int gpu_capture_graphs(struct gpu_model *g);
void gpu_destroy_graphs(struct gpu_model *g);

/* Block b of slot's default table: [slot x bps, (slot + 1) x bps), after the n_slots default
 * state chunks when the states are in the pool. */
static inline int64_t gpu_default_block(const struct gpu_model *g, int slot, int b)
{
    const int64_t first = g->o.state_in_pool ? (int64_t)g->o.n_slots * g->state_blocks : 0;
    return first + (int64_t)slot * g->bps + b;
}

/* Entry b of the kernels' block table for a sequence: its block (the table's, or the slot's
 * default), times the sub-blocks per block when the states are in the pool. */
static inline int32_t gpu_table_entry(const struct gpu_model *g, int slot, const uint32_t *blocks,
                                      int n_blocks, int b)
{
    const int64_t sub = g->o.state_in_pool ? g->kv_sub : 1;
    const int64_t blk =
        blocks ? (b < n_blocks ? (int64_t)blocks[b] : 0) : gpu_default_block(g, slot, b);
    return (int32_t)(sub * blk);
}

/* Byte offset of slot's GDN state in a layer's conv_state / ssm (row bytes: the packed size of
 * one state of that array): the slot's own, or its chunk's in the pool. */
static inline size_t gpu_state_offset(const struct gpu_model *g, int slot, size_t row_bytes)
{
    return g->o.state_in_pool ? sizeof(float) * (size_t)g->state_stride * (size_t)g->chunk[slot]
                              : row_bytes * (size_t)slot;
}

#endif
