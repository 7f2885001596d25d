/* sample reference: the semantics of sample.h computed the plain way (a full sort of the row by
 * (logit desc, id asc), sequential prefix sums). Every fp32 operation that the device rounds on
 * its own goes through a volatile store here, so no compiler contracts it into an FMA. */
#include "sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

static float f_mul(float a, float b)
{
    volatile float r = a * b;
    return r;
}

static float f_add(float a, float b)
{
    volatile float r = a + b;
    return r;
}

static float f_sub(float a, float b)
{
    volatile float r = a - b;
    return r;
}

static float f_div(float a, float b)
{
    volatile float r = a / b;
    return r;
}

float sample_kexp(float x)
{
    if (!(x >= -31.0f))
        return 0.0f; // NaN, or below 2^-44: weight 0 anyway
    if (x >= 0.0f)
        return 1.0f;
    const float n = floorf(f_add(f_mul(x, 1.44269502f), 0.5f));
    float r = f_sub(x, f_mul(n, 0.693145751953125f));
    r = f_sub(r, f_mul(n, 1.428606765330187e-06f));
    float p = 0.000198412701f;
    p = f_add(f_mul(p, r), 0.00138888892f);
    p = f_add(f_mul(p, r), 0.00833333377f);
    p = f_add(f_mul(p, r), 0.0416666679f);
    p = f_add(f_mul(p, r), 0.166666672f);
    p = f_add(f_mul(p, r), 0.5f);
    p = f_add(f_mul(p, r), 1.0f);
    p = f_add(f_mul(p, r), 1.0f);
    const uint32_t bits = (uint32_t)((int)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    return f_mul(p, scale);
}

int sample_row_check(const struct sample_row *r)
{
    if (!r)
        return ERR_INVAL;
    const int ok = !isnan(r->temperature) && r->top_p > 0.0f && r->min_p <= 1.0f &&
                   r->repetition_penalty > 0.0f && isfinite(r->presence_penalty) &&
                   isfinite(r->frequency_penalty) && r->pen_n >= 0 && r->pen_off >= 0;
    return ok ? 0 : ERR_INVAL;
}

int sample_pen_pairs(const int32_t *hist, int n_hist, int V, int *count_scratch, int32_t *tok,
                     int32_t *cnt)
{
    int n = 0;
    for (int i = 0; i < n_hist; i++)
        if (hist[i] >= 0 && hist[i] < V)
            count_scratch[hist[i]]++;
    for (int i = 0; i < n_hist; i++) {
        const int32_t t = hist[i];
        if (t < 0 || t >= V || count_scratch[t] == 0)
            continue;
        tok[n] = t;
        cnt[n] = count_scratch[t];
        n++;
        count_scratch[t] = 0;
    }
    return n;
}

// ---- one row ----

static uint32_t order_key(float l)
{
    uint32_t u;
    memcpy(&u, &l, sizeof(u));
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static void row_penalise(float *l, const struct sample_row *r, const int32_t *pen_tok,
                         const int32_t *pen_cnt, int V)
{
    const int on = r->repetition_penalty != 1.0f || r->presence_penalty != 0.0f ||
                   r->frequency_penalty != 0.0f;
    for (int j = 0; on && j < r->pen_n; j++) {
        const int32_t t = pen_tok[r->pen_off + j], c = pen_cnt[r->pen_off + j];
        if (t < 0 || t >= V || c <= 0 || isnan(l[t]))
            continue; // a NaN logit is left as it is (bit for bit: see sample.h)
        float x = l[t];
        if (r->repetition_penalty != 1.0f)
            x = x > 0.0f ? f_div(x, r->repetition_penalty) : f_mul(x, r->repetition_penalty);
        x = f_sub(x, r->presence_penalty);
        x = f_sub(x, f_mul(r->frequency_penalty, (float)c));
        l[t] = x;
    }
}

/* w = l with NaN -> -inf and -0 -> +0 (the values the device orders and weighs). */
static void row_canon(float *w, const float *l, int V)
{
    for (int i = 0; i < V; i++)
        w[i] = isnan(l[i]) ? -INFINITY : l[i] == 0.0f ? 0.0f : l[i];
}

static int cmp_order(const void *a, const void *b, void *ctx)
{
    const float *l = ctx;
    const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    const uint32_t ki = order_key(l[i]), kj = order_key(l[j]);
    if (ki != kj)
        return ki > kj ? -1 : 1;
    return i < j ? -1 : (i > j);
}

static double dmin(double a, double b)
{
    return a < b ? a : b;
}

/* The final weights of one row in q (V) (0 = dropped), or the greedy token (return >= 0 with
 * q untouched); -1 for a sampled row, ERR_NOMEM. margin gets the truncation margins.
 * logits: penalised in place; l: (V) scratch for the canonical values. */
static int row_weights(uint64_t *q, float *l, float *logits, const struct sample_row *r,
                       const int32_t *pen_tok, const int32_t *pen_cnt, int V, double *margin)
{
    row_penalise(logits, r, pen_tok, pen_cnt, V);
    row_canon(l, logits, V);
    int amax = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[amax])
            amax = i;
    const float mx = l[amax];
    if (r->temperature <= 0.0f || r->top_k == 1 || !isfinite(mx))
        return amax;
    const float inv_t = f_div(1.0f, r->temperature);
    for (int i = 0; i < V; i++) {
        const float d = f_sub(l[i], mx);
        const float x = d == 0.0f ? 0.0f : f_mul(d, inv_t);
        q[i] = (uint64_t)f_mul(sample_kexp(x), (float)SAMPLE_Q_ONE);
    }
    const int use_k = r->top_k > 0 && r->top_k < V;
    if (use_k || r->top_p < 1.0f) {
        int32_t *order = malloc(sizeof(int32_t) * (size_t)V);
        if (!order)
            return ERR_NOMEM;
        for (int i = 0; i < V; i++)
            order[i] = i;
        qsort_r(order, (size_t)V, sizeof(int32_t), cmp_order, l);
        int n = use_k ? r->top_k : V;
        uint64_t zk = 0;
        for (int j = 0; j < n; j++)
            zk += q[order[j]];
        if (r->top_p < 1.0f) {
            const double thr = (double)r->top_p * (double)zk;
            uint64_t cum = 0;
            for (int j = 0; j < n; j++) {
                const uint64_t prev = cum;
                cum += q[order[j]];
                if ((double)cum >= thr) {
                    *margin = dmin(*margin, ((double)cum - thr) / (double)zk);
                    *margin = dmin(*margin, (thr - (double)prev) / (double)zk);
                    n = j + 1;
                    break;
                }
            }
        }
        for (int j = n; j < V; j++)
            q[order[j]] = 0;
        free(order);
    }
    if (r->min_p > 0.0f) {
        const double thr = (double)r->min_p * SAMPLE_Q_ONE;
        for (int i = 0; i < V; i++) {
            if (q[i] == 0)
                continue;
            *margin = dmin(*margin, fabs((double)q[i] - thr) / SAMPLE_Q_ONE);
            if ((double)q[i] < thr)
                q[i] = 0;
        }
    }
    return -1;
}

/* Draw one row from its final weights q (V); margin gets the draw margin. */
static int32_t row_draw(const uint64_t *q, double u, int V, float *logprob, double *margin)
{
    uint64_t total = 0;
    for (int i = 0; i < V; i++)
        total += q[i];
    uint64_t target = (uint64_t)(u * (double)total);
    if (target > total - 1)
        target = total - 1;
    uint64_t cum = 0;
    for (int i = 0; i < V; i++) {
        const uint64_t prev = cum;
        cum += q[i];
        if (cum > target) {
            *margin = dmin(*margin, u - (double)prev / (double)total);
            *margin = dmin(*margin, (double)cum / (double)total - u);
            *logprob = (float)log((double)q[i] / (double)total);
            return i;
        }
    }
    return -1; // total == 0: impossible, the max token always keeps 2^44
}

int sample_ref(int32_t *tokens, float *logprobs, float *logits, const struct sample_row *rows,
               const int32_t *pen_tok, const int32_t *pen_cnt, int B, int V, double *margin)
{
    if (!tokens || !logits || !rows || B < 0 || V < 1 || V > SAMPLE_MAX_VOCAB)
        return ERR_INVAL;
    for (int b = 0; b < B; b++)
        if (rows[b].pen_n > 0 && (!pen_tok || !pen_cnt))
            return ERR_INVAL;
    int rc = 0;
    uint64_t *q = malloc(sizeof(uint64_t) * (size_t)V);
    float *w = malloc(sizeof(float) * (size_t)V);
    if (!q || !w) {
        rc = ERR_NOMEM;
        goto cleanup;
    }
    for (int b = 0; b < B; b++) {
        float lp = 0.0f;
        double m = 1.0;
        const int g =
            row_weights(q, w, logits + (size_t)b * (size_t)V, &rows[b], pen_tok, pen_cnt, V, &m);
        if (g == ERR_NOMEM) {
            rc = g;
            goto cleanup;
        }
        if (g >= 0)
            m = 1.0;
        tokens[b] = g >= 0 ? g : row_draw(q, rows[b].u, V, &lp, &m);
        if (logprobs)
            logprobs[b] = lp;
        if (margin)
            margin[b] = m;
    }
cleanup:
    free(q);
    free(w);
    return rc;
}

int sample_ref_probs(double *probs, float *logits, const struct sample_row *row,
                     const int32_t *pen_tok, const int32_t *pen_cnt, int V)
{
    if (!probs || !logits || !row || V < 1 || V > SAMPLE_MAX_VOCAB ||
        (row->pen_n > 0 && (!pen_tok || !pen_cnt)))
        return ERR_INVAL;
    int rc = 0;
    uint64_t *q = malloc(sizeof(uint64_t) * (size_t)V);
    float *w = malloc(sizeof(float) * (size_t)V);
    if (!q || !w) {
        rc = ERR_NOMEM;
        goto cleanup;
    }
    double m = 1.0;
    const int g = row_weights(q, w, logits, row, pen_tok, pen_cnt, V, &m);
    if (g == ERR_NOMEM) {
        rc = g;
        goto cleanup;
    }
    uint64_t total = 0;
    for (int i = 0; g < 0 && i < V; i++)
        total += q[i];
    for (int i = 0; i < V; i++)
        probs[i] = g >= 0 ? (double)(i == g) : (double)q[i] / (double)total;
cleanup:
    free(q);
    free(w);
    return rc;
}
