/* roofline: bytes per decode step (model/roofline.h). */
#include "model/roofline.h"

#include <math.h>

#include "common/err.h"
#include "model/model.h"

static double vec_bytes(const float *v, int64_t n, int64_t elem)
{
    (void)v; // header-only loads leave vectors NULL: count by shape
    return (double)(n * elem);
}

/* bytes of a weight present in the checkpoint (rows > 0), whatever its data pointer */
static double w_bytes(const struct qweight *w)
{
    return w->rows > 0 ? (double)qweight_bytes(w) : 0.0;
}

static double attn_bytes(const struct attn_w *a, int64_t D)
{
    return w_bytes(&a->q) + w_bytes(&a->k) + w_bytes(&a->v) + w_bytes(&a->o) +
           vec_bytes(a->q_norm, D, 4) + vec_bytes(a->k_norm, D, 4);
}

static double gdn_bytes(const struct gdn_w *g, const struct model_config *c)
{
    const int64_t cd = 2LL * c->lin_n_k_heads * c->lin_k_head_dim +
                       (int64_t)c->lin_n_v_heads * c->lin_v_head_dim;
    return w_bytes(&g->qkv) + w_bytes(&g->z) + w_bytes(&g->b) + w_bytes(&g->a) +
           w_bytes(&g->out) + vec_bytes(g->conv, cd * c->lin_conv_kernel, 4) +
           vec_bytes(g->dt_bias, c->lin_n_v_heads, 4) + vec_bytes(g->A_log, c->lin_n_v_heads, 4) +
           vec_bytes(g->norm, c->lin_v_head_dim, 4);
}

static double shared_bytes(const struct moe_w *w)
{
    return w_bytes(&w->router) + w_bytes(&w->sh_gate) + w_bytes(&w->sh_up) +
           w_bytes(&w->sh_down) + w_bytes(&w->sh_expert_gate);
}

static double expert_mean_bytes(const struct moe_w *w, int E)
{
    double s = 0;
    if (!w->gate || !w->up || !w->down || E <= 0)
        return 0;
    for (int e = 0; e < E; e++)
        s += w_bytes(&w->gate[e]) + w_bytes(&w->up[e]) + w_bytes(&w->down[e]);
    return s / E;
}

static int64_t dtype_bytes(const char *dtype)
{
    return dtype[0] == 'f' && dtype[5] == '3' ? 4 : 2; // "float32" -> 4, bf16/f16 -> 2
}

int roofline_decode(const struct model *m, const struct roofline_opts *o, struct roofline_step *out)
{
    if (!m || !o || !out || o->batch < 1 || o->ctx < 0 || (o->kv_elem != 1 && o->kv_elem != 2))
        return ERR_INVAL;
    const struct model_config *c = &m->cfg;
    const double B = o->batch;
    const int E = c->n_experts, k = c->n_experts_per_tok;
    struct roofline_step r = {0};
    const int64_t H = c->hidden_size;
    /* embedding: one row per token, in the embedding's format */
    const double emb_row = m->embed.rows > 0 ? w_bytes(&m->embed) / (double)m->embed.rows : 0;
    r.dense = B * emb_row + vec_bytes(m->final_norm, H, 4);
    r.lm_head = w_bytes(&m->lm_head);
    r.experts_touched = E > 0 ? E * (1.0 - pow(1.0 - (double)k / E, B)) : 0;
    double exp_sum = 0;
    int n_moe = 0;
    const int64_t state_elem = c->ssm_state_f32 ? 4 : 2;
    const int64_t conv_elem = dtype_bytes(c->dtype);
    for (int l = 0; l < c->n_layers; l++) {
        const struct layer_w *L = &m->layers[l];
        r.dense += vec_bytes(L->in_norm, H, 4) + vec_bytes(L->post_norm, H, 4);
        if (L->type == LAYER_FULL_ATTN) {
            r.dense += attn_bytes(&L->attn, c->head_dim);
            const double per_pos = 2.0 * c->n_kv_heads * c->head_dim * o->kv_elem;
            r.kv += B * per_pos * (double)(o->ctx + 1);
        } else {
            r.dense += gdn_bytes(&L->gdn, c);
            const int64_t cd = 2LL * c->lin_n_k_heads * c->lin_k_head_dim +
                               (int64_t)c->lin_n_v_heads * c->lin_v_head_dim;
            const double conv = (double)(cd * (c->lin_conv_kernel - 1) * conv_elem);
            const double S = (double)((int64_t)c->lin_n_v_heads * c->lin_k_head_dim *
                                      c->lin_v_head_dim * state_elem);
            r.gdn_state += B * 2.0 * (conv + S);
        }
        r.dense += shared_bytes(&L->moe);
        const double eb = expert_mean_bytes(&L->moe, E);
        if (eb > 0) {
            exp_sum += eb;
            n_moe++;
            r.experts += r.experts_touched * eb;
        }
    }
    r.expert_bytes = n_moe ? exp_sum / n_moe : 0;
    r.total = r.dense + r.experts + r.lm_head + r.gdn_state + r.kv;
    *out = r;
    return 0;
}
