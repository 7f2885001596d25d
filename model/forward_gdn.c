/* forward_gdn: the Gated DeltaNet mixer of a decoder layer (MODEL.md §3.5): projections, causal
 * depthwise conv with the cached window, SiLU, l2norm, gating, the core (model/gdn.h), gated
 * RMSNorm (plain w) and out_proj. fp32 throughout. */
#include "forward_internal.h"

#include "model/gdn.h"

#include <math.h>
#include <string.h>

static float softplus(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));  // PyTorch threshold
}

static void l2norm(float *x, int n, float scale)
{
    float ss = 0.0f;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    const float r = scale / sqrtf(ss + 1e-6f);
    for (int i = 0; i < n; i++)
        x[i] *= r;
}

void fwd_gdn_layer(struct forward_ctx *fc, const struct model_config *c, const struct gdn_w *w,
                   const struct layer_cache *lc, const float *x, int n, float *out, int flags)
{
    const int hk = c->lin_n_k_heads, hv = c->lin_n_v_heads;
    const int dk = c->lin_k_head_dim, dv = c->lin_v_head_dim;
    const int kc = c->lin_conv_kernel;
    const int64_t key_dim = (int64_t)hk * dk, value_dim = (int64_t)hv * dv;
    const int64_t cd = 2 * key_dim + value_dim;
    float *ext = fc->gdn_ext;
    float *mix = fc->gdn_mix;

    // projections; the conv input goes after the cached window
    memcpy(ext, lc->conv, sizeof(float) * (size_t)((kc - 1) * cd));
    fwd_matmul(fc, &w->qkv, x, n, ext + (kc - 1) * cd);
    fwd_matmul(fc, &w->z, x, n, fc->gdn_z);
    fwd_matmul(fc, &w->b, x, n, fc->gdn_b);
    fwd_matmul(fc, &w->a, x, n, fc->gdn_a);

    // causal depthwise conv (tap kc-1 = current token) + SiLU
    for (int t = 0; t < n; t++) {
        float *m = mix + t * cd;
        for (int64_t ch = 0; ch < cd; ch++) {
            const float *wc = w->conv + ch * kc;
            float u = 0.0f;
            for (int j = 0; j < kc; j++)
                u += wc[j] * ext[(t + j) * cd + ch];
            m[ch] = fwd_silu(u);
        }
    }
    memcpy(lc->conv, ext + (int64_t)n * cd, sizeof(float) * (size_t)((kc - 1) * cd));

    // l2norm q (scaled by 1/sqrt(Dk)) and k per head
    const float qscale = 1.0f / sqrtf((float)dk);
    for (int t = 0; t < n; t++)
        for (int h = 0; h < hk; h++) {
            l2norm(mix + t * cd + (int64_t)h * dk, dk, qscale);
            l2norm(mix + t * cd + key_dim + (int64_t)h * dk, dk, 1.0f);
        }

    // beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias)
    for (int t = 0; t < n; t++)
        for (int j = 0; j < hv; j++) {
            const int64_t i = (int64_t)t * hv + j;
            fc->gdn_b[i] = fwd_sigmoid(fc->gdn_b[i]);
            fc->gdn_a[i] = -expf(w->A_log[j]) * softplus(fc->gdn_a[i] + w->dt_bias[j]);
        }

    struct gdn_seq s = {
        .n_tok = n, .n_k_heads = hk, .n_v_heads = hv, .dk = dk, .dv = dv, .ld = cd,
        .q = mix, .k = mix + key_dim, .v = mix + 2 * key_dim,
        .g = fc->gdn_a, .beta = fc->gdn_b, .state = lc->ssm, .out = fc->gdn_o,
    };
    bool recurrent = n == 1;
    if (flags & FORWARD_GDN_RECURRENT)
        recurrent = true;
    else if (flags & FORWARD_GDN_CHUNKED)
        recurrent = false;
    if (recurrent)
        gdn_core_recurrent(&s, fc->tp);
    else
        gdn_core_chunked(&s, fc->gdn_scratch, fc->tp);

    // gated RMSNorm per v-head: w * (o / rms(o)) * silu(z), plain w
    for (int64_t r = 0; r < (int64_t)n * hv; r++) {
        float *o = fc->gdn_o + r * dv;
        const float *z = fc->gdn_z + r * dv;
        float ss = 0.0f;
        for (int i = 0; i < dv; i++)
            ss += o[i] * o[i];
        const float inv = 1.0f / sqrtf(ss / (float)dv + c->rms_eps);
        for (int i = 0; i < dv; i++)
            o[i] = w->norm[i] * (o[i] * inv) * fwd_silu(z[i]);
    }
    fwd_matmul(fc, &w->out, fc->gdn_o, n, out);
}
