/* model_dummy: `--load-format dummy` weights. Every tensor the loader asks for is allocated in
 * its real shape and format (the quantization scheme of the config) and filled with values that
 * depend only on (seed, tensor name), so the full-size model can be instantiated from
 * config.json alone, e.g. for kernel benchmarks. Buffers are owned by the model. With
 * header_only, nothing is allocated: shapes, formats and byte counts only (data stays NULL). */
#include "common/err.h"
#include "common/tpool.h"
#include "common/xalloc.h"
#include "model/dtype.h"
#include "model_load_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t name_seed(const struct model_loader *L, const char *name)
{
    uint64_t h = 1469598103934665603ull ^ L->seed;
    for (const char *c = name; *c; c++)
        h = (h ^ (uint8_t)*c) * 1099511628211ull;
    return mix64(h);
}

/* Count n bytes of tensor name in its group. */
static void dummy_count(struct model_loader *L, const char *name, int64_t n)
{
    enum model_group g = model_group_of(name);
    struct model_load_stats *s = &L->p->stats;
    s->group_bytes[g] += n;
    s->group_tensors[g]++;
    s->total_bytes += n;
    s->n_tensors++;
    if (g == MODEL_GROUP_MTP) {
        s->n_mtp_tensors++;
        s->mtp_bytes += n;
    }
    if (model_is_mtp_expert(name))
        s->mtp_expert_bytes += n;
}

/* A large buffer of n bytes counted in the group of name; NULL + ERR_NOMEM message on failure.
 * Header-only loads count the bytes and return NULL with no error: callers check
 * L->header_only first. */
static void *dummy_alloc(struct model_loader *L, const char *name, int64_t n)
{
    if (L->header_only) {
        dummy_count(L, name, n);
        return NULL;
    }
    void *p = malloc((size_t)(n > 0 ? n : 1));
    if (!p) {
        model_load_fail(L, "dummy weights: cannot allocate %lld bytes for '%s'", (long long)n,
                        name);
        return NULL;
    }
    model_load_own(L, p);
    dummy_count(L, name, n);
    return p;
}

/* The values are splitmix64's stream: 8-byte block j of a tensor comes from
 * mix64(seed + (j + 1) * golden), so any range of blocks is computed alone and the fill splits
 * over the loader's thread pool (the full-size BF16 model is 66 GiB: one thread took 65 s). */
#define DUMMY_GOLDEN 0x9e3779b97f4a7c15ull
#define DUMMY_MIN_BLOCKS ((int64_t)1 << 16) // 512 KiB of bytes a chunk at least

struct dummy_fill {
    void *p;
    int64_t n; // elements
    uint64_t seed;
    uint8_t mask, add;      // bytes: ((random & mask) + add)
    enum qw_format fmt;     // floats: QW_F32 / QW_F16 / QW_BF16
    const float *lf;        // floats: the 256 levels as f32
    const uint16_t *lh;     // floats: the 256 levels as f16 / bf16
};

static void dummy_bytes_range(void *ctx, int64_t b0, int64_t b1)
{
    const struct dummy_fill *f = ctx;
    uint8_t *p = f->p;
    for (int64_t j = b0; j < b1; j++) {
        uint64_t x = mix64(f->seed + (uint64_t)(j + 1) * DUMMY_GOLDEN);
        for (int64_t k = 0, i = 8 * j; k < 8 && i + k < f->n; k++)
            p[i + k] = (uint8_t)(((x >> (8 * k)) & f->mask) + f->add);
    }
}

/* Random bytes; mask clears bits of each byte (e.g. e4m3 codes without NaN). */
static void dummy_bytes(struct model_loader *L, uint8_t *p, int64_t n, uint64_t seed,
                        uint8_t mask, uint8_t add)
{
    struct dummy_fill f = {.p = p, .n = n, .seed = seed, .mask = mask, .add = add};
    tpool_for(L->tp, CEIL_DIV(n, 8), DUMMY_MIN_BLOCKS, dummy_bytes_range, &f);
}

static void dummy_floats_range(void *ctx, int64_t b0, int64_t b1)
{
    const struct dummy_fill *f = ctx;
    float *pf = f->p;
    uint16_t *ph = f->p;
    for (int64_t j = b0; j < b1; j++) {
        uint64_t x = mix64(f->seed + (uint64_t)(j + 1) * DUMMY_GOLDEN);
        for (int64_t k = 0, i = 8 * j; k < 8 && i + k < f->n; k++) {
            unsigned v = (unsigned)(x >> (8 * k)) & 0xff;
            if (f->fmt == QW_F32)
                pf[i + k] = f->lf[v];
            else
                ph[i + k] = f->lh[v];
        }
    }
}

/* Values uniform over 256 levels in [-amp, amp), written as f32 / f16 / bf16: one table of the
 * 256 encoded values, indexed by random bytes. */
static void dummy_floats(struct model_loader *L, void *p, enum qw_format fmt, int64_t n,
                         uint64_t seed, float amp)
{
    float lf[256];
    uint16_t lh[256];
    for (int i = 0; i < 256; i++) {
        lf[i] = ((float)i / 128.0f - 1.0f) * amp;
        lh[i] = fmt == QW_F16 ? dtype_f32_to_f16(lf[i]) : dtype_f32_to_bf16(lf[i]);
    }
    struct dummy_fill f = {.p = p, .n = n, .seed = seed, .fmt = fmt, .lf = lf, .lh = lh};
    tpool_for(L->tp, CEIL_DIV(n, 8), DUMMY_MIN_BLOCKS, dummy_floats_range, &f);
}

static enum qw_format dummy_dense_fmt(const struct model_config *c)
{
    if (strcmp(c->dtype, "float32") == 0)
        return QW_F32;
    if (strcmp(c->dtype, "float16") == 0)
        return QW_F16;
    return QW_BF16;
}

int model_dummy_vec(struct model_loader *L, const char *name, int64_t n, float **out)
{
    float *v = dummy_alloc(L, name, n * 4);
    *out = v;
    if (L->header_only)
        return 0;
    if (!v)
        return ERR_NOMEM;
    dummy_floats(L, v, QW_F32, n, name_seed(L, name), 0.1f);
    *out = v;
    return 0;
}

int model_dummy_dense(struct model_loader *L, const char *name, int64_t rows, int64_t cols,
                      struct qweight *w)
{
    memset(w, 0, sizeof(*w));
    w->fmt = dummy_dense_fmt(L->c);
    w->rows = rows;
    w->cols = cols;
    w->row_stride = cols;
    int64_t es = w->fmt == QW_F32 ? 4 : 2;
    void *p = dummy_alloc(L, name, rows * cols * es);
    if (L->header_only)
        return 0;
    if (!p)
        return ERR_NOMEM;
    dummy_floats(L, p, w->fmt, rows * cols, name_seed(L, name), 0.05f);
    w->data = p;
    return 0;
}

int model_dummy_linear(struct model_loader *L, const char *module, const struct quant_scheme *s,
                       int64_t rows, int64_t cols, struct qweight *w)
{
    char name[512];
    snprintf(name, sizeof(name), "%s.weight", module);
    if (s->kind == QUANT_KIND_NONE)
        return model_dummy_dense(L, name, rows, cols, w);
    memset(w, 0, sizeof(*w));
    w->rows = rows;
    w->cols = cols;
    w->row_stride = cols;
    uint64_t seed = name_seed(L, name);
    if (s->kind == QUANT_KIND_NVFP4) {
        if (cols % 16)
            return model_load_fail(L, "module '%s': NVFP4 needs in_features %% 16 == 0, got %lld",
                                   module, (long long)cols);
        uint8_t *d = dummy_alloc(L, name, rows * cols / 2);
        uint8_t *b = d || L->header_only ? dummy_alloc(L, name, rows * cols / 16) : NULL;
        if (!b && !L->header_only)
            return ERR_NOMEM;
        if (!L->header_only) {
            dummy_bytes(L, d, rows * cols / 2, seed, 0xff, 0);
            dummy_bytes(L, b, rows * cols / 16, seed ^ 1, 0x0f, 0x30); /* e4m3 0.5 .. 1.875 */
        }
        /* the global scale(s): scalar tensors in a real checkpoint, counted the same way */
        dummy_count(L, name, 4 + (s->act_fp4 ? 4 : 0));
        w->fmt = QW_NVFP4;
        w->data = d;
        w->bscale = b;
        w->bscale_stride = cols / 16;
        w->gscale = 0.01f;
        w->act_fp4 = s->act_fp4;
        w->act_gscale = s->act_fp4 ? 448.0f * 6.0f / 8.0f : 0.0f;
        return 0;
    }
    if (s->kind == QUANT_KIND_FP8) {
        uint8_t *d = dummy_alloc(L, name, rows * cols);
        if (!d && !L->header_only)
            return ERR_NOMEM;
        if (d)
            dummy_bytes(L, d, rows * cols, seed, 0xbf, 0); /* clears bit 6: no NaN, |v| < 2 */
        w->fmt = QW_FP8;
        w->data = d;
        int64_t ns = 1;
        if (s->fp8_scale == QUANT_FP8_BLOCK) {
            w->scale_kind = QW_SCALE_BLOCK;
            w->block_rows = s->block_rows;
            w->block_cols = s->block_cols;
            ns = CEIL_DIV(rows, (int64_t)s->block_rows) * CEIL_DIV(cols, (int64_t)s->block_cols);
        } else if (s->fp8_scale == QUANT_FP8_CHANNEL) {
            w->scale_kind = QW_SCALE_CHANNEL;
            ns = rows;
        } else {
            w->scale_kind = QW_SCALE_TENSOR;
        }
        float *sc = dummy_alloc(L, name, ns * 4);
        if (!sc && !L->header_only)
            return ERR_NOMEM;
        for (int64_t i = 0; sc && i < ns; i++)
            sc[i] = 0.02f;
        w->scale = sc;
        return 0;
    }
    char sd[160];
    return model_load_fail(L, "module '%s': quantization scheme %s is not supported", module,
                           quant_scheme_str(s, sd, sizeof(sd)));
}
