/* forward_ops: the small shared pieces of the CPU forward pass: RMSNorm1p, SiLU, sigmoid,
 * embedding lookup, lm_head and the decoder layer (MODEL.md §3.3) used by both the main model
 * and the MTP head. */
#include "forward_internal.h"

#include "common/err.h"

#include <math.h>

void fwd_rmsnorm1p(float *y, const float *x, const float *w, int64_t n_rows, int dim, float eps)
{
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        float ss = 0.0f;
        for (int i = 0; i < dim; i++)
            ss += xr[i] * xr[i];
        const float inv = 1.0f / sqrtf(ss / (float)dim + eps);
        for (int i = 0; i < dim; i++)
            yr[i] = xr[i] * inv * (1.0f + w[i]);
    }
}

float fwd_silu(float x)
{
    return x / (1.0f + expf(-x));
}

float fwd_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

int fwd_embed(const struct model *m, const int32_t *tokens, int n, float *out)
{
    const int H = m->cfg.hidden_size;
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= m->cfg.vocab_size || tokens[t] >= m->embed.rows)
            return ERR_INVAL;
    for (int t = 0; t < n; t++)
        qweight_dequant_row(&m->embed, tokens[t], out + (int64_t)t * H);
    return 0;
}

void fwd_matmul(struct forward_ctx *fc, const struct qweight *w, const float *x, int64_t n,
                float *y)
{
    qweight_matmul_act(w, x, n, y, fc->tp, fc->act_quant);
}

void fwd_lm_head(struct forward_ctx *fc, const struct model *m, const float *x, int n,
                 float *logits)
{
    fwd_matmul(fc, &m->lm_head, x, n, logits);
}

static void add_rows(float *h, const float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        h[i] += y[i];
}

void fwd_layer(struct forward_ctx *fc, const struct model *m, const struct layer_w *lw,
               const struct layer_cache *lc, int n, int pos0, int flags)
{
    const struct model_config *c = &m->cfg;
    const int64_t nh = (int64_t)n * c->hidden_size;
    fwd_rmsnorm1p(fc->x, fc->h, lw->in_norm, n, c->hidden_size, c->rms_eps);
    if (lw->type == LAYER_FULL_ATTN)
        attn_layer_forward(fc, c, &lw->attn, lc, fc->x, n, pos0, fc->y);
    else
        fwd_gdn_layer(fc, c, &lw->gdn, lc, fc->x, n, fc->y, flags);
    add_rows(fc->h, fc->y, nh);
    fwd_rmsnorm1p(fc->x, fc->h, lw->post_norm, n, c->hidden_size, c->rms_eps);
    moe_forward(fc, c, &lw->moe, fc->x, n, fc->y);
    add_rows(fc->h, fc->y, nh);
}
