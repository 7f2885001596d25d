/* forward_internal: what the files of the CPU forward pass share (forward.c, forward_ops.c,
 * forward_gdn.c, attn.c, moe.c, mtp.c): the scratch of a forward_ctx and the layer entry points.
 * Tests include it to reach RoPE and the router. */
#ifndef MODEL_FORWARD_INTERNAL_H
#define MODEL_FORWARD_INTERNAL_H

#include "model/forward.h"
#include "model/model.h"

#include <stdint.h>

struct tpool;

struct forward_ctx {
    struct tpool *tp;          // borrowed
    int n_tok_max;             // T: tokens per call
    int ctx_max;               // positions per sequence (attention scores length)
    /* residual stream and temporaries, each (T, H) */
    float *h;
    float *x;
    float *y;
    /* gated deltanet */
    float *gdn_ext;            // (Kc-1+T, conv_dim): cached pre-conv inputs then the new ones
    float *gdn_mix;            // (T, conv_dim) after conv + SiLU (q, k normalised in place)
    float *gdn_z;              // (T, Hv*Dv)
    float *gdn_b;              // (T, Hv) -> beta
    float *gdn_a;              // (T, Hv) -> g
    float *gdn_o;              // (T, Hv*Dv) core output, then gated-normed
    float *gdn_scratch;        // gdn_chunked_scratch_floats()
    /* gated attention */
    float *att_qg;             // (T, Hq*2D)
    float *att_q;              // (T, Hq*D) normed + roped queries
    float *att_k;              // (T, Hkv*D)
    float *att_v;              // (T, Hkv*D)
    float *att_o;              // (T, Hq*D)
    float *att_s;              // (Hq, ctx_max) scores per head
    /* moe */
    float *moe_logits;         // (T, E)
    int *moe_idx;              // (T, k) selected experts
    float *moe_w;              // (T, k) renormalised weights
    int *moe_tok;              // (T) tokens routed to the current expert
    float *moe_tw;             // (T) their weights
    float *moe_xg;             // (T, H) gathered inputs
    float *moe_g;              // (T, max(I, Is)) gate
    float *moe_u;              // (T, max(I, Is)) up
    float *moe_d;              // (T, H) down output
    float *moe_sg;             // (T) shared expert gate logits
    /* forward_route_gap_take: the smallest top-k margin of the routes since the last take */
    bool route_track;          // measure it (off: no cost)
    float route_gap;           // logit k-th minus logit (k+1)-th, over tokens and layers
    /* mtp */
    float *mtp_cat;            // (T, 2H) or NULL without MTP
    /* per call (forward_run / mtp_run flags) */
    bool act_quant;            // W4A4 weights quantize activations (no FORWARD_W4A4_WEIGHT_ONLY)
};

/* The cache of one decoder layer for one sequence. */
struct layer_cache {
    float *k;                  // (tokens_max, Hkv*D) attention
    float *v;
    float *conv;               // (Kc-1, conv_dim) GDN
    float *ssm;                // (Hv, Dk, Dv) GDN
};

// ---- small ops (forward_ops.c) ----
/* y = x / rms(x) * (1 + w) over rows of dim (x and y may alias). */
void fwd_rmsnorm1p(float *y, const float *x, const float *w, int64_t n_rows, int dim, float eps);
float fwd_silu(float x);
float fwd_sigmoid(float x);
/* Rows tokens[t] of the embedding into out (n, H). ERR_INVAL on an id outside [0, V). */
int fwd_embed(const struct model *m, const int32_t *tokens, int n, float *out);
/* y = W x' (qweight_matmul_act) with the activation semantics of the current call (fc->act_quant)
 * and fc's thread pool. */
void fwd_matmul(struct forward_ctx *fc, const struct qweight *w, const float *x, int64_t n,
                float *y);
/* lm_head over n rows of x (n, H) into logits (n, V). */
void fwd_lm_head(struct forward_ctx *fc, const struct model *m, const float *x, int n,
                 float *logits);
/* One decoder layer (MODEL.md §3.3) on fc->h (n, H) in place, at positions pos0.. */
void fwd_layer(struct forward_ctx *fc, const struct model *m, const struct layer_w *lw,
               const struct layer_cache *lc, int n, int pos0, int flags);

// ---- mixers and MoE ----
/* Gated DeltaNet mixer: x (n, H) -> out (n, H); updates lc->conv and lc->ssm. */
void fwd_gdn_layer(struct forward_ctx *fc, const struct model_config *c,
                   const struct gdn_w *w, const struct layer_cache *lc, const float *x,
                   int n, float *out, int flags);
/* Gated attention: x (n, H) -> out (n, H); writes K/V at pos0..pos0+n-1 of lc. */
void attn_layer_forward(struct forward_ctx *fc, const struct model_config *c,
                        const struct attn_w *w, const struct layer_cache *lc, const float *x,
                        int n, int pos0, float *out);
/* In-place partial neox RoPE of one head vector x (head_dim) at position pos: dims
 * [0, rot_dim) rotate as pairs (i, i + rot_dim/2), the rest are untouched. */
void attn_rope(float *x, int rot_dim, float theta, int pos);
/* Sparse MoE block: x (n, H) -> out (n, H). */
void moe_forward(struct forward_ctx *fc, const struct model_config *c, const struct moe_w *w,
                 const float *x, int n, float *out);
/* Router for one token: fp32 softmax over logits (E; replaced by the probabilities), top-k
 * (ties: lower id first; idx in descending probability), renormalised weights w (k); gap (NULL:
 * not computed): the k-th minus the (k+1)-th logit (INFINITY when k == E), the route's margin. */
void moe_route(float *logits, int n_experts, int k, int *idx, float *w, float *gap);

#endif
