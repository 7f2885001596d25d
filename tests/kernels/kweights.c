/* kweights: random test weights (see kweights.h). */
#include "kweights.h"

#include <stdlib.h>
#include <string.h>

#include "kdtype.h"
#include "ktest.h"

static uint8_t rand_e4m3(int lo, int hi)
{
    return (uint8_t)(lo + (int)(ktest_u32() % (uint32_t)(hi - lo + 1)));
}

void kw_pair_make(struct kw_pair *p, int fmt, int scale_kind, int n_experts, int rows, int cols)
{
    struct kweight *h = &p->host;
    size_t n = (size_t)n_experts * rows * cols;
    memset(p, 0, sizeof(*p));
    h->fmt = fmt;
    h->rows = rows;
    h->cols = cols;
    h->row_stride = cols;
    h->expert_stride = n_experts > 1 ? (int64_t)rows * cols : 0;
    if (fmt == KW_FMT_BF16) {
        uint16_t *d = malloc(n * 2);
        for (size_t i = 0; i < n; i++)
            d[i] = kdtype_f32_to_bf16(ktest_uniform(-1.0f, 1.0f));
        h->data = d;
        p->dev = *h;
        p->dev.data = ktest_dev_from(d, n * 2);
    } else if (fmt == KW_FMT_FP8) {
        uint8_t *d = malloc(n);
        size_t ns;
        float *s;
        for (size_t i = 0; i < n; i++) {
            uint8_t c = (uint8_t)ktest_u32();
            if ((c & 0x7f) == 0x7f)
                c = 0x3f;
            d[i] = c;
        }
        h->data = d;
        h->scale_kind = scale_kind;
        h->block_rows = 128;
        h->block_cols = 128;
        ns = scale_kind == KW_SCALE_TENSOR    ? 1
             : scale_kind == KW_SCALE_CHANNEL ? (size_t)rows
                                              : (size_t)((rows + 127) / 128) * ((cols + 127) / 128);
        h->scale_expert_stride = (int64_t)ns;
        s = malloc(sizeof(float) * ns * n_experts);
        ktest_fill(s, ns * n_experts, 0.001f, 0.01f);
        h->scale = s;
        p->dev = *h;
        p->dev.data = ktest_dev_from(d, n);
        p->dev.scale = ktest_dev_from(s, sizeof(float) * ns * n_experts);
    } else {
        uint8_t *d = malloc(n / 2);
        size_t nb = (size_t)n_experts * rows * (cols / 16);
        uint8_t *bs = malloc(nb);
        float *g = malloc(sizeof(float) * n_experts);
        for (size_t i = 0; i < n / 2; i++)
            d[i] = (uint8_t)ktest_u32();
        for (size_t i = 0; i < nb; i++)
            bs[i] = rand_e4m3(0x08, 0x7e); /* 2^-6 .. 448 */
        for (int e = 0; e < n_experts; e++)
            g[e] = ktest_uniform(1e-4f, 1e-3f);
        h->data = d;
        h->bscale = bs;
        h->bscale_stride = cols / 16;
        h->bscale_expert_stride = n_experts > 1 ? (int64_t)rows * (cols / 16) : 0;
        h->gscale = g[0];
        h->gscale_e = n_experts > 1 ? g : NULL;
        p->dev = *h;
        p->dev.data = ktest_dev_from(d, n / 2);
        p->dev.bscale = ktest_dev_from(bs, nb);
        p->dev.gscale_e = n_experts > 1 ? ktest_dev_from(g, sizeof(float) * n_experts) : NULL;
        if (n_experts <= 1)
            free(g);
    }
}

void kw_pair_free(struct kw_pair *p)
{
    free((void *)p->host.data);
    free((void *)p->host.scale);
    free((void *)p->host.bscale);
    free((void *)p->host.gscale_e);
    ktest_free((void *)p->dev.data);
    ktest_free((void *)p->dev.scale);
    ktest_free((void *)p->dev.bscale);
    ktest_free((void *)p->dev.gscale_e);
}

double kw_pair_bytes(const struct kw_pair *p)
{
    const struct kweight *h = &p->host;
    double n = (double)h->rows * h->cols;
    if (h->fmt == KW_FMT_BF16)
        return 2 * n;
    if (h->fmt == KW_FMT_FP8)
        return n;
    return n / 2 + n / 16;
}

void kw_routes(int32_t *ids, int n_tok, int top_k, int n_experts)
{
    for (int t = 0; t < n_tok; t++)
        for (int j = 0; j < top_k; j++) {
            int e, dup;
            do {
                e = (int)(ktest_u32() % (uint32_t)n_experts);
                dup = 0;
                for (int i = 0; i < j; i++)
                    dup |= ids[t * top_k + i] == e;
            } while (dup);
            ids[t * top_k + j] = e;
        }
}
