/* forward: forward_ctx (all scratch, allocated once) and forward_run, the main-model pass:
 * embedding -> decoder layers by layer_types -> final RMSNorm1p -> lm_head (MODEL.md §3.2). */
#include "forward_internal.h"

#include "common/err.h"
#include "common/xalloc.h"
#include "model/gdn.h"
#include "model/state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *fbuf(int64_t n)
{
    return malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

struct forward_ctx *forward_ctx_create(const struct model *m, int n_tok_max, int ctx_max,
                                       struct tpool *tp)
{
    const struct model_config *c = &m->cfg;
    if (n_tok_max <= 0 || ctx_max <= 0 || c->hidden_size <= 0 || m->device_only)
        return NULL;
    const int64_t T = n_tok_max, H = c->hidden_size;
    const int64_t key_dim = (int64_t)c->lin_n_k_heads * c->lin_k_head_dim;
    const int64_t value_dim = (int64_t)c->lin_n_v_heads * c->lin_v_head_dim;
    const int64_t cd = 2 * key_dim + value_dim;
    const int64_t inter = max64(c->moe_inter, c->shared_inter);
    struct forward_ctx *fc = xcalloc(1, sizeof(*fc));
    fc->tp = tp;
    fc->route_gap = INFINITY;
    fc->n_tok_max = n_tok_max;
    fc->ctx_max = ctx_max;
    fc->act_quant = true;
    fc->h = fbuf(T * H);
    fc->x = fbuf(T * H);
    fc->y = fbuf(T * H);
    fc->gdn_ext = fbuf((c->lin_conv_kernel - 1 + T) * cd);
    fc->gdn_mix = fbuf(T * cd);
    fc->gdn_z = fbuf(T * value_dim);
    fc->gdn_b = fbuf(T * c->lin_n_v_heads);
    fc->gdn_a = fbuf(T * c->lin_n_v_heads);
    fc->gdn_o = fbuf(T * value_dim);
    fc->gdn_scratch =
        fbuf(gdn_chunked_scratch_floats(c->lin_n_v_heads, c->lin_k_head_dim, c->lin_v_head_dim));
    fc->att_qg = fbuf(T * c->n_heads * 2 * c->head_dim);
    fc->att_q = fbuf(T * c->n_heads * c->head_dim);
    fc->att_k = fbuf(T * c->n_kv_heads * c->head_dim);
    fc->att_v = fbuf(T * c->n_kv_heads * c->head_dim);
    fc->att_o = fbuf(T * c->n_heads * c->head_dim);
    fc->att_s = fbuf((int64_t)c->n_heads * ctx_max);
    fc->moe_logits = fbuf(T * c->n_experts);
    fc->moe_idx = malloc(sizeof(int) * (size_t)(T * c->n_experts_per_tok + 1));
    fc->moe_w = fbuf(T * c->n_experts_per_tok);
    fc->moe_tok = malloc(sizeof(int) * (size_t)T);
    fc->moe_tw = fbuf(T);
    fc->moe_xg = fbuf(T * H);
    fc->moe_g = fbuf(T * inter);
    fc->moe_u = fbuf(T * inter);
    fc->moe_d = fbuf(T * H);
    fc->moe_sg = fbuf(T);
    if (m->has_mtp)
        fc->mtp_cat = fbuf(T * 2 * H);
    if (!fc->h || !fc->x || !fc->y || !fc->gdn_ext || !fc->gdn_mix || !fc->gdn_z || !fc->gdn_b ||
        !fc->gdn_a || !fc->gdn_o || !fc->gdn_scratch || !fc->att_qg || !fc->att_q ||
        !fc->att_k || !fc->att_v || !fc->att_o || !fc->att_s || !fc->moe_logits ||
        !fc->moe_idx || !fc->moe_w || !fc->moe_tok || !fc->moe_tw || !fc->moe_xg ||
        !fc->moe_g || !fc->moe_u || !fc->moe_d || !fc->moe_sg || (m->has_mtp && !fc->mtp_cat)) {
        forward_ctx_destroy(fc);
        return NULL;
    }
    return fc;
}

void forward_ctx_destroy(struct forward_ctx *fc)
{
    if (!fc)
        return;
    float *fl[] = { fc->h, fc->x, fc->y, fc->gdn_ext, fc->gdn_mix, fc->gdn_z, fc->gdn_b,
                    fc->gdn_a, fc->gdn_o, fc->gdn_scratch, fc->att_qg, fc->att_q, fc->att_k,
                    fc->att_v, fc->att_o, fc->att_s, fc->moe_logits, fc->moe_w, fc->moe_tw,
                    fc->moe_xg, fc->moe_g, fc->moe_u, fc->moe_d, fc->moe_sg, fc->mtp_cat };
    for (size_t i = 0; i < ARRAY_LEN(fl); i++)
        free(fl[i]);
    free(fc->moe_idx);
    free(fc->moe_tok);
    free(fc);
}

int forward_run(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                const int32_t *tokens, int n_tok, float *logits_out, float *hidden_out,
                int flags)
{
    const struct model_config *c = &m->cfg;
    const int H = c->hidden_size;
    if (n_tok < 1 || n_tok > fc->n_tok_max || st->n_layers != c->n_layers)
        return ERR_INVAL;
    if (st->pos + n_tok > st->tokens_max || st->pos + n_tok > fc->ctx_max)
        return ERR_FULL;
    int rc = fwd_embed(m, tokens, n_tok, fc->h);
    if (rc < 0)
        return rc;
    fc->act_quant = !(flags & FORWARD_W4A4_WEIGHT_ONLY);
    for (int l = 0; l < c->n_layers; l++) {
        struct layer_cache lc = { st->k[l], st->v[l], st->conv[l], st->ssm[l] };
        fwd_layer(fc, m, &m->layers[l], &lc, n_tok, st->pos, flags);
    }
    fwd_rmsnorm1p(fc->x, fc->h, m->final_norm, n_tok, H, c->rms_eps);
    if (hidden_out)
        memcpy(hidden_out, fc->x, sizeof(float) * (size_t)n_tok * (size_t)H);
    if (logits_out) {
        if (flags & FORWARD_LOGITS_ALL)
            fwd_lm_head(fc, m, fc->x, n_tok, logits_out);
        else
            fwd_lm_head(fc, m, fc->x + (int64_t)(n_tok - 1) * H, 1, logits_out);
    }
    st->pos += n_tok;
    return 0;
}
