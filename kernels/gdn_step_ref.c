/* gdn_step reference: straight transcription of MODEL.md §4.1 and §3.1 (gated norm), in double. */
#include "gdn_step.h"

#include <math.h>

#include "common/err.h"

#define D GDN_STEP_HEAD_DIM

int gdn_step_ref(float *out, float *state, const float *qkv, const float *z, const float *a,
                 const float *b, const float *a_log, const float *dt_bias, const float *norm_w,
                 const int32_t *slots, int n_seq, int n_k_heads, int n_v_heads, float eps)
{
    if (n_seq < 0 || n_k_heads <= 0 || n_v_heads <= 0 || n_v_heads % n_k_heads)
        return ERR_INVAL;
    const int ratio = n_v_heads / n_k_heads;
    const long width = (2L * n_k_heads + n_v_heads) * D;
    for (int s = 0; s < n_seq; s++) {
        long slot = slots ? slots[s] : s;
        for (int j = 0; j < n_v_heads; j++) {
            const int kh = j / ratio;
            const float *q = qkv + s * width + (long)kh * D;
            const float *k = qkv + s * width + (long)n_k_heads * D + (long)kh * D;
            const float *v = qkv + s * width + 2L * n_k_heads * D + (long)j * D;
            float *S = state + (slot * n_v_heads + j) * D * D;
            double qn[D], kn[D], o[D], sq = 0, sk = 0, ss = 0;
            for (int i = 0; i < D; i++) {
                sq += (double)q[i] * q[i];
                sk += (double)k[i] * k[i];
            }
            for (int i = 0; i < D; i++) {
                qn[i] = q[i] / sqrt(sq + 1e-6) / sqrt((double)D);
                kn[i] = k[i] / sqrt(sk + 1e-6);
            }
            double x = (double)a[(long)s * n_v_heads + j] + dt_bias[j];
            double sp = x > 20.0 ? x : log1p(exp(x));
            double g = -exp((double)a_log[j]) * sp;
            double beta = 1.0 / (1.0 + exp(-(double)b[(long)s * n_v_heads + j]));
            double alpha = exp(g);
            for (long i = 0; i < (long)D * D; i++)
                S[i] = (float)(S[i] * alpha);
            for (int vv = 0; vv < D; vv++) {
                double kv = 0;
                for (int kk = 0; kk < D; kk++)
                    kv += (double)S[kk * D + vv] * kn[kk];
                double d = beta * (v[vv] - kv);
                for (int kk = 0; kk < D; kk++)
                    S[kk * D + vv] = (float)(S[kk * D + vv] + kn[kk] * d);
            }
            for (int vv = 0; vv < D; vv++) {
                o[vv] = 0;
                for (int kk = 0; kk < D; kk++)
                    o[vv] += (double)S[kk * D + vv] * qn[kk];
                ss += o[vv] * o[vv];
            }
            const float *zz = z + (long)s * n_v_heads * D + (long)j * D;
            float *y = out + (long)s * n_v_heads * D + (long)j * D;
            double inv = 1.0 / sqrt(ss / D + eps);
            for (int vv = 0; vv < D; vv++) {
                double zv = zz[vv];
                y[vv] = (float)(norm_w[vv] * (o[vv] * inv) * (zv / (1.0 + exp(-zv))));
            }
        }
    }
    return 0;
}
