/* testmodel: see testmodel.h. Every buffer is recorded in a list hung on m->priv. */
#include "testmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tm_priv {
    void **p;
    int n, cap;
};

double trng_uniform(struct trng *r)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(r->s >> 11) * (1.0 / 9007199254740992.0);
}

float trng_normal(struct trng *r, float std)
{
    double u1 = trng_uniform(r), u2 = trng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)) * std;
}

double rel_err(const float *a, const float *b, int64_t n)
{
    double md = 0.0, mb = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > md || isnan(d))
            md = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > mb)
            mb = fabs((double)b[i]);
    }
    return md / mb;
}

static void *track(struct tm_priv *pv, void *p)
{
    if (pv->n == pv->cap) {
        pv->cap = pv->cap ? 2 * pv->cap : 64;
        pv->p = realloc(pv->p, sizeof(void *) * (size_t)pv->cap);
    }
    pv->p[pv->n++] = p;
    return p;
}

static float *rnd(struct tm_priv *pv, struct trng *r, int64_t n, float mean, float std)
{
    float *x = track(pv, malloc(sizeof(float) * (size_t)n));
    for (int64_t i = 0; i < n; i++)
        x[i] = mean + trng_normal(r, std);
    return x;
}

static struct qweight qw(struct tm_priv *pv, struct trng *r, int64_t rows, int64_t cols,
                         float std)
{
    struct qweight w;
    memset(&w, 0, sizeof(w));
    w.fmt = QW_F32;
    w.rows = rows;
    w.cols = cols;
    w.row_stride = cols;
    w.data = rnd(pv, r, rows * cols, 0.0f, std);
    return w;
}

static void fill_attn(struct tm_priv *pv, struct trng *r, const struct model_config *c,
                      struct attn_w *a)
{
    const int H = c->hidden_size, D = c->head_dim;
    a->q = qw(pv, r, (int64_t)c->n_heads * D * 2, H, 0.25f);
    a->k = qw(pv, r, (int64_t)c->n_kv_heads * D, H, 0.25f);
    a->v = qw(pv, r, (int64_t)c->n_kv_heads * D, H, 0.25f);
    a->o = qw(pv, r, H, (int64_t)c->n_heads * D, 0.2f);
    a->q_norm = rnd(pv, r, D, 0.0f, 0.3f);
    a->k_norm = rnd(pv, r, D, 0.0f, 0.3f);
}

static void fill_moe(struct tm_priv *pv, struct trng *r, const struct model_config *c,
                     struct moe_w *w)
{
    const int H = c->hidden_size, E = c->n_experts;
    w->router = qw(pv, r, E, H, 0.3f);
    w->gate = track(pv, calloc((size_t)E, sizeof(struct qweight)));
    w->up = track(pv, calloc((size_t)E, sizeof(struct qweight)));
    w->down = track(pv, calloc((size_t)E, sizeof(struct qweight)));
    for (int e = 0; e < E; e++) {
        w->gate[e] = qw(pv, r, c->moe_inter, H, 0.25f);
        w->up[e] = qw(pv, r, c->moe_inter, H, 0.25f);
        w->down[e] = qw(pv, r, H, c->moe_inter, 0.25f);
    }
    w->sh_gate = qw(pv, r, c->shared_inter, H, 0.25f);
    w->sh_up = qw(pv, r, c->shared_inter, H, 0.25f);
    w->sh_down = qw(pv, r, H, c->shared_inter, 0.25f);
    w->sh_expert_gate = qw(pv, r, 1, H, 0.3f);
}

static void fill_layer(struct tm_priv *pv, struct trng *r, const struct model_config *c,
                       struct layer_w *lw, enum layer_type type)
{
    const int H = c->hidden_size;
    lw->type = type;
    lw->in_norm = rnd(pv, r, H, 0.0f, 0.3f);
    lw->post_norm = rnd(pv, r, H, 0.0f, 0.3f);
    if (type == LAYER_FULL_ATTN) {
        fill_attn(pv, r, c, &lw->attn);
    } else {
        struct gdn_w *g = &lw->gdn;
        const int64_t kd = (int64_t)c->lin_n_k_heads * c->lin_k_head_dim;
        const int64_t vd = (int64_t)c->lin_n_v_heads * c->lin_v_head_dim;
        g->qkv = qw(pv, r, 2 * kd + vd, H, 0.3f);
        g->z = qw(pv, r, vd, H, 0.3f);
        g->b = qw(pv, r, c->lin_n_v_heads, H, 0.3f);
        g->a = qw(pv, r, c->lin_n_v_heads, H, 0.3f);
        g->out = qw(pv, r, H, vd, 0.25f);
        g->conv = rnd(pv, r, (2 * kd + vd) * c->lin_conv_kernel, 0.0f, 0.5f);
        g->dt_bias = rnd(pv, r, c->lin_n_v_heads, 0.0f, 0.5f);
        g->A_log = track(pv, malloc(sizeof(float) * (size_t)c->lin_n_v_heads));
        for (int j = 0; j < c->lin_n_v_heads; j++)
            g->A_log[j] = (float)log(0.5 + 3.5 * trng_uniform(r));
        g->norm = rnd(pv, r, c->lin_v_head_dim, 1.0f, 0.3f);
    }
    fill_moe(pv, r, c, &lw->moe);
}

struct model *testmodel_create(const char *pattern, uint64_t seed)
{
    struct model *m = calloc(1, sizeof(*m));
    struct tm_priv *pv = calloc(1, sizeof(*pv));
    struct trng r = { seed * 2654435761u + 1 };
    m->priv = pv;
    struct model_config *c = &m->cfg;
    strcpy(c->model_type, "qwen3_5_moe_text");
    c->vocab_size = 64;
    c->hidden_size = 32;
    c->n_layers = (int)strlen(pattern);
    for (int l = 0; l < c->n_layers; l++)
        c->layer_types[l] = pattern[l] == 'F' ? LAYER_FULL_ATTN : LAYER_LINEAR_ATTN;
    c->n_heads = 4;
    c->n_kv_heads = 2;
    c->head_dim = 16;
    c->attn_output_gate = true;
    c->rope_theta = 10000.0f;
    c->partial_rotary_factor = 0.5f;
    c->rotary_dim = 8;
    c->lin_n_k_heads = 2;
    c->lin_n_v_heads = 4;
    c->lin_k_head_dim = 8;
    c->lin_v_head_dim = 8;
    c->lin_conv_kernel = 4;
    c->n_experts = 8;
    c->n_experts_per_tok = 2;
    c->moe_inter = 16;
    c->shared_inter = 16;
    c->rms_eps = 1e-6f;
    c->max_position_embeddings = 4096;
    c->mtp_n_layers = 1;
    c->ssm_state_f32 = true;
    strcpy(c->dtype, "float32");
    const int H = c->hidden_size;
    m->embed = qw(pv, &r, c->vocab_size, H, 1.0f);
    m->lm_head = qw(pv, &r, c->vocab_size, H, 0.3f);
    m->final_norm = rnd(pv, &r, H, 0.0f, 0.3f);
    m->layers = track(pv, calloc((size_t)c->n_layers, sizeof(struct layer_w)));
    for (int l = 0; l < c->n_layers; l++)
        fill_layer(pv, &r, c, &m->layers[l], c->layer_types[l]);
    m->has_mtp = true;
    m->mtp.fc = qw(pv, &r, H, 2 * H, 0.2f);
    m->mtp.pre_fc_norm_embedding = rnd(pv, &r, H, 0.0f, 0.3f);
    m->mtp.pre_fc_norm_hidden = rnd(pv, &r, H, 0.0f, 0.3f);
    m->mtp.norm = rnd(pv, &r, H, 0.0f, 0.3f);
    fill_layer(pv, &r, c, &m->mtp.layer, LAYER_FULL_ATTN);
    return m;
}

void testmodel_destroy(struct model *m)
{
    if (!m)
        return;
    struct tm_priv *pv = m->priv;
    for (int i = 0; i < pv->n; i++)
        free(pv->p[i]);
    free(pv->p);
    free(pv);
    free(m);
}
