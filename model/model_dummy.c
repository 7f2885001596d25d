/* model_dummy: `--load-format dummy` weights. Every tensor the loader asks for is allocated in
 * its real shape and format (the quantization scheme of the config) and filled with values that
 * depend only on (seed, tensor name), so the full-size model can be instantiated from
 * config.json alone, e.g. for kernel benchmarks. Buffers are owned by the model. With
 * header_only, nothing is allocated: shapes, formats and byte counts only (data stays NULL).
 * With dummy_device, the large BF16 / FP8 / NVFP4 weights are described, not filled
 * (qweight.dummy): model_dummy_streams tells the GPU runner what to write, the same stream
 * (common/dummy_gen.h) the host fill below writes. */
#include "common/dummy_gen.h"
#include "common/err.h"
#include "common/tpool.h"
#include "common/xalloc.h"
#include "model/dtype.h"
#include "model_load_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t name_seed(const struct model_loader *L, const char *name)
{
    uint64_t h = 1469598103934665603ull ^ L->seed;
    for (const char *c = name; *c; c++)
        h = (h ^ (uint8_t)*c) * 1099511628211ull;
    return dummy_gen_mix64(h);
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

/* The values are dummy_gen's stream: unit j of a tensor is dummy_gen_unit(seed, j), so any range
 * of units is computed alone and the fill splits over the loader's thread pool (the full-size
 * BF16 model is 66 GiB: one thread took 65 s). */
#define DUMMY_MIN_BLOCKS ((int64_t)1 << 16) // 512 KiB of bytes a chunk at least

struct dummy_fill {
    void *p;
    int64_t n; // elements
    uint64_t seed;
    uint8_t mask, add;       // bytes: ((random & mask) + add)
    const uint16_t *t16;     // 16-bit values: the 256 levels (f16 / bf16)
    const uint32_t *t32;     // 32-bit values: the 256 levels (f32 bits)
};

static void dummy_range(void *ctx, int64_t j0, int64_t j1)
{
    const struct dummy_fill *f = ctx;
    if (f->t32)
        dummy_gen_u32(f->p, f->n, f->seed, f->t32, j0, j1);
    else if (f->t16)
        dummy_gen_u16(f->p, f->n, f->seed, f->t16, j0, j1);
    else
        dummy_gen_bytes(f->p, f->n, f->seed, f->mask, f->add, j0, j1);
}

static void dummy_fill_run(struct model_loader *L, const struct dummy_fill *f)
{
    tpool_for(L->tp, dummy_gen_units(f->n), DUMMY_MIN_BLOCKS, dummy_range, (void *)f);
}

/* Random bytes; mask clears bits of each byte (e.g. e4m3 codes without NaN). */
static void dummy_bytes(struct model_loader *L, uint8_t *p, int64_t n, uint64_t seed,
                        uint8_t mask, uint8_t add)
{
    const struct dummy_fill f = {.p = p, .n = n, .seed = seed, .mask = mask, .add = add};
    dummy_fill_run(L, &f);
}

/* Values uniform over 256 levels in [-amp, amp), written as f32 / f16 / bf16: one table of the
 * 256 encoded values (t32: f32 bits; t16: f16 / bf16), indexed by random bytes. */
static void dummy_levels(enum qw_format fmt, float amp, uint32_t *t32, uint16_t *t16)
{
    for (int i = 0; i < 256; i++) {
        const float v = ((float)i / 128.0f - 1.0f) * amp;
        memcpy(&t32[i], &v, sizeof v);
        t16[i] = fmt == QW_F16 ? dtype_f32_to_f16(v) : dtype_f32_to_bf16(v);
    }
}

static void dummy_floats(struct model_loader *L, void *p, enum qw_format fmt, int64_t n,
                         uint64_t seed, float amp)
{
    uint32_t t32[256];
    uint16_t t16[256];
    dummy_levels(fmt, amp, t32, t16);
    const struct dummy_fill f = {.p = p, .n = n, .seed = seed,
                                 .t16 = fmt == QW_F32 ? NULL : t16,
                                 .t32 = fmt == QW_F32 ? t32 : NULL};
    dummy_fill_run(L, &f);
}

static enum qw_format dummy_dense_fmt(const struct model_config *c)
{
    if (strcmp(c->dtype, "float32") == 0)
        return QW_F32;
    if (strcmp(c->dtype, "float16") == 0)
        return QW_F16;
    return QW_BF16;
}

#define DUMMY_DENSE_AMP 0.05f
#define DUMMY_NVFP4_MASK 0xff /* every e2m1 pair */
#define DUMMY_SCALE_MASK 0x0f /* e4m3 block scales 0.5 .. 1.875: */
#define DUMMY_SCALE_ADD 0x30
#define DUMMY_FP8_MASK 0xbf /* bit 6 clear: no NaN, |v| < 2 */

/* Is this weight left to the device (dummy_device)? The BF16, FP8 and NVFP4 matrices, but not
 * a router (the GPU runner reads it on the host for its fp32 copy). */
static bool dummy_deferred(const struct model_loader *L, const char *name, enum qw_format fmt)
{
    if (!L->dummy_device)
        return false;
    if (fmt != QW_BF16 && fmt != QW_FP8 && fmt != QW_NVFP4)
        return false;
    const size_t n = strlen(name), k = strlen(".mlp.gate.weight");
    return !(n >= k && strcmp(name + n - k, ".mlp.gate.weight") == 0);
}

int model_dummy_streams(const struct qweight *w, struct model_dummy_stream *data,
                        struct model_dummy_stream *bscale)
{
    if (!w || !w->dummy || !data || !bscale)
        return ERR_INVAL;
    memset(data, 0, sizeof *data);
    memset(bscale, 0, sizeof *bscale);
    data->seed = w->dummy_seed;
    if (w->fmt == QW_BF16) {
        uint32_t t32[256];
        data->n = w->rows * w->cols;
        data->u16 = true;
        dummy_levels(QW_BF16, w->dummy_amp, t32, data->table);
    } else if (w->fmt == QW_FP8) {
        data->n = w->rows * w->cols;
        data->mask = DUMMY_FP8_MASK;
    } else if (w->fmt == QW_NVFP4) {
        data->n = w->rows * w->cols / 2;
        data->mask = DUMMY_NVFP4_MASK;
        bscale->n = w->rows * w->cols / 16;
        bscale->seed = w->dummy_seed ^ 1;
        bscale->mask = DUMMY_SCALE_MASK;
        bscale->add = DUMMY_SCALE_ADD;
    } else {
        return ERR_INVAL;
    }
    return 0;
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
    if (dummy_deferred(L, name, w->fmt)) {
        dummy_count(L, name, rows * cols * es);
        w->dummy = true;
        w->dummy_seed = name_seed(L, name);
        w->dummy_amp = DUMMY_DENSE_AMP;
        return 0;
    }
    void *p = dummy_alloc(L, name, rows * cols * es);
    if (L->header_only)
        return 0;
    if (!p)
        return ERR_NOMEM;
    dummy_floats(L, p, w->fmt, rows * cols, name_seed(L, name), DUMMY_DENSE_AMP);
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
        uint8_t *d = NULL, *b = NULL;
        if (dummy_deferred(L, name, QW_NVFP4)) {
            dummy_count(L, name, rows * cols / 2);
            dummy_count(L, name, rows * cols / 16);
            w->dummy = true;
            w->dummy_seed = seed;
        } else {
            d = dummy_alloc(L, name, rows * cols / 2);
            b = d || L->header_only ? dummy_alloc(L, name, rows * cols / 16) : NULL;
            if (!b && !L->header_only)
                return ERR_NOMEM;
            if (!L->header_only) {
                dummy_bytes(L, d, rows * cols / 2, seed, DUMMY_NVFP4_MASK, 0);
                dummy_bytes(L, b, rows * cols / 16, seed ^ 1, DUMMY_SCALE_MASK, DUMMY_SCALE_ADD);
            }
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
        uint8_t *d = NULL;
        if (dummy_deferred(L, name, QW_FP8)) {
            dummy_count(L, name, rows * cols);
            w->dummy = true;
            w->dummy_seed = seed;
        } else {
            d = dummy_alloc(L, name, rows * cols);
            if (!d && !L->header_only)
                return ERR_NOMEM;
        }
        if (d)
            dummy_bytes(L, d, rows * cols, seed, DUMMY_FP8_MASK, 0);
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
