/* attn: the gated full-attention mixer (MODEL.md §3.4): q/gate per-head interleaved projection,
 * per-head q/k RMSNorm1p, partial neox RoPE, causal GQA attention over the sequence's K/V cache
 * with an fp32 softmax, sigmoid output gate, o_proj. Heads run in parallel on the thread pool. */
#include "forward_internal.h"

#include "common/tpool.h"

#include <math.h>
#include <string.h>

void attn_rope(float *x, int rot_dim, float theta, int pos)
{
    const int half = rot_dim / 2;
    for (int i = 0; i < half; i++) {
        const float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)rot_dim);
        const float ang = (float)pos * inv_freq;
        const float cs = cosf(ang), sn = sinf(ang);
        const float x1 = x[i], x2 = x[i + half];
        x[i] = x1 * cs - x2 * sn;
        x[i + half] = x2 * cs + x1 * sn;
    }
}

struct attn_job {
    struct forward_ctx *fc;
    const struct model_config *c;
    const struct layer_cache *lc;
    int n;
    int pos0;
};

static void attn_heads(void *ctx, int64_t b, int64_t e)
{
    const struct attn_job *aj = ctx;
    const struct model_config *c = aj->c;
    const int D = c->head_dim, hq = c->n_heads, hkv = c->n_kv_heads;
    const int64_t kvw = (int64_t)hkv * D;
    const float scale = 1.0f / sqrtf((float)D);
    for (int64_t h = b; h < e; h++) {
        const int g = (int)h / (hq / hkv);
        float *s = aj->fc->att_s + h * aj->fc->ctx_max;
        for (int t = 0; t < aj->n; t++) {
            const int p = aj->pos0 + t;
            const float *q = aj->fc->att_q + ((int64_t)t * hq + h) * D;
            float mx = -INFINITY;
            for (int j = 0; j <= p; j++) {
                const float *k = aj->lc->k + j * kvw + (int64_t)g * D;
                float d = 0.0f;
                for (int i = 0; i < D; i++)
                    d += q[i] * k[i];
                s[j] = d * scale;
                if (s[j] > mx)
                    mx = s[j];
            }
            float sum = 0.0f;
            for (int j = 0; j <= p; j++) {
                s[j] = expf(s[j] - mx);
                sum += s[j];
            }
            float *o = aj->fc->att_o + ((int64_t)t * hq + h) * D;
            for (int i = 0; i < D; i++)
                o[i] = 0.0f;
            for (int j = 0; j <= p; j++) {
                const float a = s[j] / sum;
                const float *v = aj->lc->v + j * kvw + (int64_t)g * D;
                for (int i = 0; i < D; i++)
                    o[i] += a * v[i];
            }
            const float *gate = aj->fc->att_qg + ((int64_t)t * hq + h) * 2 * D + D;
            for (int i = 0; i < D; i++)
                o[i] *= fwd_sigmoid(gate[i]);
        }
    }
}

void attn_layer_forward(struct forward_ctx *fc, const struct model_config *c,
                        const struct attn_w *w, const struct layer_cache *lc, const float *x,
                        int n, int pos0, float *out)
{
    const int D = c->head_dim, hq = c->n_heads, hkv = c->n_kv_heads;
    const int64_t kvw = (int64_t)hkv * D;
    fwd_matmul(fc, &w->q, x, n, fc->att_qg);
    fwd_matmul(fc, &w->k, x, n, fc->att_k);
    fwd_matmul(fc, &w->v, x, n, fc->att_v);
    for (int t = 0; t < n; t++) {
        const int p = pos0 + t;
        for (int h = 0; h < hq; h++) {
            float *q = fc->att_q + ((int64_t)t * hq + h) * D;
            memcpy(q, fc->att_qg + ((int64_t)t * hq + h) * 2 * D, sizeof(float) * (size_t)D);
            fwd_rmsnorm1p(q, q, w->q_norm, 1, D, c->rms_eps);
            attn_rope(q, c->rotary_dim, c->rope_theta, p);
        }
        for (int h = 0; h < hkv; h++) {
            float *k = fc->att_k + ((int64_t)t * hkv + h) * D;
            fwd_rmsnorm1p(k, k, w->k_norm, 1, D, c->rms_eps);
            attn_rope(k, c->rotary_dim, c->rope_theta, p);
        }
        memcpy(lc->k + p * kvw, fc->att_k + t * kvw, sizeof(float) * (size_t)kvw);
        memcpy(lc->v + p * kvw, fc->att_v + t * kvw, sizeof(float) * (size_t)kvw);
    }
    struct attn_job aj = { fc, c, lc, n, pos0 };
    tpool_for(fc->tp, hq, 1, attn_heads, &aj);
    fwd_matmul(fc, &w->o, fc->att_o, n, out);
}
