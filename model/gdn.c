/* gdn: the Gated DeltaNet core (MODEL.md §4.1 recurrent, §4.2 chunked), one v-head per task on
 * the thread pool. State layout S[k][v] per head (transformers' [Hv, Dk, Dv]). The chunked form
 * runs the ragged last chunk at its true length, which equals zero-padding it (padded g = beta =
 * k = 0 changes neither the outputs nor the final state). */
#include "model/gdn.h"

#include "common/tpool.h"

#include <math.h>
#include <string.h>

static float dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

// ---- recurrent (§4.1) ----

static void recurrent_head(const struct gdn_seq *s, int j)
{
    const int dk = s->dk, dv = s->dv, hv = s->n_v_heads;
    const int hk = j / (hv / s->n_k_heads);
    float *S = s->state + (int64_t)j * dk * dv;
    for (int t = 0; t < s->n_tok; t++) {
        const float *q = s->q + t * s->ld + (int64_t)hk * dk;
        const float *k = s->k + t * s->ld + (int64_t)hk * dk;
        const float *v = s->v + t * s->ld + (int64_t)j * dv;
        float *o = s->out + ((int64_t)t * hv + j) * dv;
        const float decay = expf(s->g[(int64_t)t * hv + j]);
        const float beta = s->beta[(int64_t)t * hv + j];
        for (int64_t i = 0; i < (int64_t)dk * dv; i++)
            S[i] *= decay;
        for (int c = 0; c < dv; c++)
            o[c] = 0.0f;
        for (int r = 0; r < dk; r++) {          // o = S^T k  (kv)
            const float kr = k[r];
            const float *row = S + (int64_t)r * dv;
            for (int c = 0; c < dv; c++)
                o[c] += row[c] * kr;
        }
        for (int c = 0; c < dv; c++)            // o = d = beta (v - kv)
            o[c] = beta * (v[c] - o[c]);
        for (int r = 0; r < dk; r++) {          // S += k d^T
            const float kr = k[r];
            float *row = S + (int64_t)r * dv;
            for (int c = 0; c < dv; c++)
                row[c] += kr * o[c];
        }
        for (int c = 0; c < dv; c++)
            o[c] = 0.0f;
        for (int r = 0; r < dk; r++) {          // o = S^T q
            const float qr = q[r];
            const float *row = S + (int64_t)r * dv;
            for (int c = 0; c < dv; c++)
                o[c] += row[c] * qr;
        }
    }
}

static void recurrent_range(void *ctx, int64_t b, int64_t e)
{
    for (int64_t j = b; j < e; j++)
        recurrent_head(ctx, (int)j);
}

void gdn_core_recurrent(const struct gdn_seq *s, struct tpool *tp)
{
    tpool_for(tp, s->n_v_heads, 1, recurrent_range, (void *)s);
}

// ---- chunked (§4.2) ----

static int64_t head_scratch_floats(int dk, int dv)
{
    const int64_t C = GDN_CHUNK;
    return C + C * C + C * dv + C * dk;  // G, L, U (becomes Vn), W
}

int64_t gdn_chunked_scratch_floats(int n_v_heads, int dk, int dv)
{
    return (int64_t)n_v_heads * head_scratch_floats(dk, dv);
}

struct chunk_job {
    const struct gdn_seq *s;
    float *scratch;
};

static void chunked_head(const struct gdn_seq *s, int j, float *scr)
{
    const int C = GDN_CHUNK, dk = s->dk, dv = s->dv, hv = s->n_v_heads;
    const int hk = j / (hv / s->n_k_heads);
    float *S = s->state + (int64_t)j * dk * dv;
    float *G = scr;
    float *L = G + C;
    float *U = L + (int64_t)C * C;
    float *W = U + (int64_t)C * dv;
#define QROW(t) (s->q + (int64_t)(t) * s->ld + (int64_t)hk * dk)
#define KROW(t) (s->k + (int64_t)(t) * s->ld + (int64_t)hk * dk)
#define VROW(t) (s->v + (int64_t)(t) * s->ld + (int64_t)j * dv)
    for (int c0 = 0; c0 < s->n_tok; c0 += C) {
        const int n = s->n_tok - c0 < C ? s->n_tok - c0 : C;
        float acc = 0.0f;
        for (int i = 0; i < n; i++) {
            acc += s->g[(int64_t)(c0 + i) * hv + j];
            G[i] = acc;
        }
        // L_ij = beta_i (k_i . k_j) exp(G_i - G_j), j < i
        for (int i = 0; i < n; i++) {
            const float bi = s->beta[(int64_t)(c0 + i) * hv + j];
            for (int jj = 0; jj < i; jj++)
                L[i * C + jj] = bi * dot(KROW(c0 + i), KROW(c0 + jj), dk) * expf(G[i] - G[jj]);
        }
        // (I + L) U = diag(beta) V ;  (I + L) W = diag(beta exp(G)) K  (forward substitution)
        for (int i = 0; i < n; i++) {
            const float bi = s->beta[(int64_t)(c0 + i) * hv + j];
            const float bge = bi * expf(G[i]);
            float *u = U + (int64_t)i * dv;
            float *w = W + (int64_t)i * dk;
            const float *v = VROW(c0 + i);
            const float *k = KROW(c0 + i);
            for (int c = 0; c < dv; c++)
                u[c] = bi * v[c];
            for (int c = 0; c < dk; c++)
                w[c] = bge * k[c];
            for (int jj = 0; jj < i; jj++) {
                const float l = L[i * C + jj];
                const float *uj = U + (int64_t)jj * dv;
                const float *wj = W + (int64_t)jj * dk;
                for (int c = 0; c < dv; c++)
                    u[c] -= l * uj[c];
                for (int c = 0; c < dk; c++)
                    w[c] -= l * wj[c];
            }
        }
        // Vn = U - W S (in place in U)
        for (int i = 0; i < n; i++) {
            float *u = U + (int64_t)i * dv;
            const float *w = W + (int64_t)i * dk;
            for (int r = 0; r < dk; r++) {
                const float wr = w[r];
                const float *row = S + (int64_t)r * dv;
                for (int c = 0; c < dv; c++)
                    u[c] -= wr * row[c];
            }
        }
        // O_i = exp(G_i) S^T q_i + sum_{j<=i} (q_i . k_j) exp(G_i - G_j) Vn_j
        for (int i = 0; i < n; i++) {
            float *o = s->out + ((int64_t)(c0 + i) * hv + j) * dv;
            const float *q = QROW(c0 + i);
            for (int c = 0; c < dv; c++)
                o[c] = 0.0f;
            for (int r = 0; r < dk; r++) {
                const float qr = q[r];
                const float *row = S + (int64_t)r * dv;
                for (int c = 0; c < dv; c++)
                    o[c] += qr * row[c];
            }
            const float eg = expf(G[i]);
            for (int c = 0; c < dv; c++)
                o[c] *= eg;
            for (int jj = 0; jj <= i; jj++) {
                const float a = dot(q, KROW(c0 + jj), dk) * expf(G[i] - G[jj]);
                const float *vn = U + (int64_t)jj * dv;
                for (int c = 0; c < dv; c++)
                    o[c] += a * vn[c];
            }
        }
        // S = exp(G_last) S + sum_i exp(G_last - G_i) k_i Vn_i^T
        const float gl = G[n - 1];
        const float el = expf(gl);
        for (int64_t x = 0; x < (int64_t)dk * dv; x++)
            S[x] *= el;
        for (int i = 0; i < n; i++) {
            const float e = expf(gl - G[i]);
            const float *k = KROW(c0 + i);
            const float *vn = U + (int64_t)i * dv;
            for (int r = 0; r < dk; r++) {
                const float kr = e * k[r];
                float *row = S + (int64_t)r * dv;
                for (int c = 0; c < dv; c++)
                    row[c] += kr * vn[c];
            }
        }
    }
#undef QROW
#undef KROW
#undef VROW
}

static void chunked_range(void *ctx, int64_t b, int64_t e)
{
    const struct chunk_job *cj = ctx;
    const int64_t per = head_scratch_floats(cj->s->dk, cj->s->dv);
    for (int64_t j = b; j < e; j++)
        chunked_head(cj->s, (int)j, cj->scratch + j * per);
}

void gdn_core_chunked(const struct gdn_seq *s, float *scratch, struct tpool *tp)
{
    struct chunk_job cj = { s, scratch };
    tpool_for(tp, s->n_v_heads, 1, chunked_range, &cj);
}
