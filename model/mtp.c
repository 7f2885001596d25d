/* mtp: the MTP draft head (MODEL.md §6.1): [RMSNorm1p(embed(tok)) | RMSNorm1p(hidden)] -> fc ->
 * one full-attention decoder layer over the MTP K/V of the seq_state -> mtp.norm -> lm_head. */
#include "model/mtp.h"

#include "common/err.h"
#include "forward_internal.h"
#include "model/sample.h"
#include "model/state.h"

#include <string.h>

int mtp_run(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
            const int32_t *tokens, const float *hidden_in, int pos0, int n, float *logits_out,
            float *hidden_out, int flags)
{
    const struct model_config *c = &m->cfg;
    const int H = c->hidden_size;
    if (!m->has_mtp || !st->mtp_k || !fc->mtp_cat)
        return ERR_UNSUPPORTED;
    if (n < 1 || n > fc->n_tok_max || pos0 < 0)
        return ERR_INVAL;
    if (pos0 + n > st->tokens_max || pos0 + n > fc->ctx_max)
        return ERR_FULL;
    // embedding rows go to h first (fwd_embed validates ids), then into the left half of cat
    int rc = fwd_embed(m, tokens, n, fc->h);
    if (rc < 0)
        return rc;
    fc->act_quant = !(flags & FORWARD_W4A4_WEIGHT_ONLY);
    for (int t = 0; t < n; t++) {
        float *cat = fc->mtp_cat + (int64_t)t * 2 * H;
        fwd_rmsnorm1p(cat, fc->h + (int64_t)t * H, m->mtp.pre_fc_norm_embedding, 1, H,
                      c->rms_eps);
        fwd_rmsnorm1p(cat + H, hidden_in + (int64_t)t * H, m->mtp.pre_fc_norm_hidden, 1, H,
                      c->rms_eps);
    }
    fwd_matmul(fc, &m->mtp.fc, fc->mtp_cat, n, fc->h);
    struct layer_cache lc = { st->mtp_k, st->mtp_v, NULL, NULL };
    struct layer_w lw = m->mtp.layer;
    lw.type = LAYER_FULL_ATTN;  // the MTP layer is always full attention
    fwd_layer(fc, m, &lw, &lc, n, pos0, flags);
    fwd_rmsnorm1p(fc->x, fc->h, m->mtp.norm, n, H, c->rms_eps);
    if (hidden_out)
        memcpy(hidden_out, fc->x, sizeof(float) * (size_t)n * (size_t)H);
    if (logits_out) {
        if (flags & FORWARD_LOGITS_ALL)
            fwd_lm_head(fc, m, fc->x, n, logits_out);
        else
            fwd_lm_head(fc, m, fc->x + (int64_t)(n - 1) * H, 1, logits_out);
    }
    return 0;
}

int mtp_draft_greedy(struct forward_ctx *fc, const struct model *m, struct seq_state *st,
                     const int32_t *tokens, const float *hidden, int pos0, int n, int k,
                     float *logits, float *hbuf, int32_t *drafts)
{
    const int H = m->cfg.hidden_size, V = m->cfg.vocab_size;
    if (k < 1)
        return ERR_INVAL;
    int rc = mtp_run(fc, m, st, tokens, hidden, pos0, n, logits, hbuf, 0);
    if (rc < 0)
        return rc;
    float *y = hbuf + (int64_t)(n - 1) * H;  // y_1, then overwritten by each step's output
    drafts[0] = sample_argmax(logits, V);
    for (int j = 1; j < k; j++) {
        rc = mtp_run(fc, m, st, &drafts[j - 1], y, pos0 + n - 1 + j, 1, logits, y, 0);
        if (rc < 0)
            return rc;
        drafts[j] = sample_argmax(logits, V);
    }
    return 0;
}
