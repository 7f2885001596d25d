/* gpu_internal: what gpu_model.c (upload, memory plan) and gpu_forward.c (the step) share. */
#ifndef GPU_INTERNAL_H
#define GPU_INTERNAL_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpu_model.h"
#include "kweight.h"

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
    float *conv_state;         // (n_slots, cd, kc-1)
    float *ssm;                // (n_slots, Hv, 128, 128)
    /* gated attention */
    struct kweight q, k, v, o;
    float *q_norm, *k_norm;    // (D)
    uint16_t *k_cache, *v_cache; // (kv_blocks*block_tokens, Hkv, D) bf16
    /* moe */
    struct kweight router;     // (E, H)
    struct kweight gate_up;    // E x (2I, H), gate rows first
    struct kweight down;       // E x (H, I)
    bool has_shared;
    struct kweight sh_gate;    // (2, H): shared_expert_gate, then a zero row (softmax = sigmoid)
    struct kweight sh_gate_up; // 1 x (2Is, H)
    struct kweight sh_down;    // 1 x (H, Is)
};

struct gpu_model {
    struct model_config cfg;
    struct gpu_model_opts o;
    int bps;                   // max blocks per sequence = ceil(max_model_len / block_tokens)
    int sm;
    char dev_name[256];
    struct backend_plan plan;
    struct gpu_model_mem mem;
    cudaStream_t stream;
    cudaGraphExec_t *graphs;   // [n_slots + 1]: the layer stack for n rows; NULL when eager
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
    bool *h_seen;              // (n_slots) step scratch
    int *h_act, *h_rows;       // (n_slots) step scratch
    /* step activations (B = n_slots rows) */
    float *h, *x, *y;          // (B, H)
    float *mix_raw, *mix;      // (B, cd)
    float *gz, *ga, *gb, *go;  // (B, Hv*Dv), (B, Hv), (B, Hv), (B, Hv*Dv)
    float *qkv_p, *z_p, *o_p;  // padded (B, (2Hk+Hv)*128), (B, Hv*128), (B, Hv*128); NULL unpadded
    float *qg, *q, *gate, *k, *v, *ao; // attention
    float *attn_ws;
    float *moe_logits, *moe_w, *sh_logits, *sh_w, *moe_ws;
    int32_t *moe_ids, *sh_ids;
    float *xl, *logits;        // (B, H), (B, V) rows that need logits
    int32_t *argmax_ids;       // (B)
    /* per sub-step inputs: one device block and its pinned host mirror */
    int32_t *d_in, *h_in;      // tokens | pos | slots | slot_mapping | seq_lens | block_table
    float *h_logits;           // pinned (B, V)
    int32_t *h_argmax;         // pinned (B)
};

/* Offsets (in int32) into the d_in / h_in block for B rows. */
static inline int64_t gpu_in_tokens(const struct gpu_model *g) { (void)g; return 0; }
static inline int64_t gpu_in_pos(const struct gpu_model *g) { return g->o.n_slots; }
static inline int64_t gpu_in_slots(const struct gpu_model *g) { return 2 * (int64_t)g->o.n_slots; }
static inline int64_t gpu_in_map(const struct gpu_model *g) { return 3 * (int64_t)g->o.n_slots; }
static inline int64_t gpu_in_lens(const struct gpu_model *g) { return 4 * (int64_t)g->o.n_slots; }
static inline int64_t gpu_in_table(const struct gpu_model *g) { return 5 * (int64_t)g->o.n_slots; }
static inline int64_t gpu_in_count(const struct gpu_model *g)
{
    return 5 * (int64_t)g->o.n_slots + (int64_t)g->o.n_slots * g->bps;
}

/* The layer stack (embed .. final norm into x) for the n rows in d_in: eager launches. */
int gpu_run_layers(struct gpu_model *g, int n);
/* Capture gpu_run_layers(g, n) for n = 1..n_slots into g->graphs. 0, or a status (graphs are
 * then left off). */
int gpu_capture_graphs(struct gpu_model *g);
void gpu_destroy_graphs(struct gpu_model *g);

#endif
