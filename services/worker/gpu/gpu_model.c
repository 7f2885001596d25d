/* gpu_model: upload a struct model into device kweights and plan every device buffer once
 * (weights, per-slot GDN state, the paged KV pool, step activations). */
#include "gpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argmax.h"
#include "attn_decode.h"
#include "attn_prefill.h"
#include "common/err.h"
#include "common/kv_plan.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "dummy_fill.h"
#include "gdn_seq.h"
#include "kv_write.h"
#include "model/dtype.h"
#include "model/kv_geom.h"

/* ---- device allocation with accounting ---- */

static void *dev_alloc(struct gpu_model *g, size_t bytes, int64_t *acct)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    if (g->n_allocs == g->cap_allocs) {
        g->cap_allocs = g->cap_allocs ? 2 * g->cap_allocs : 256;
        g->allocs = realloc(g->allocs, sizeof(void *) * (size_t)g->cap_allocs);
        if (!g->allocs)
            abort();
    }
    g->allocs[g->n_allocs++] = p;
    if (acct)
        *acct += (int64_t)bytes;
    return p;
}

static int put(void *dst, const void *src, size_t bytes)
{
    return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : ERR_CUDA;
}

/* A dummy weight's values written on the device (model_dummy_streams): its data at d and, for
 * NVFP4, its block scales at b (the same bits the loader's host fill writes). Asynchronous:
 * upload_stack waits for its fills. */
static int fill_dummy(const struct qweight *w, void *d, uint8_t *b)
{
    struct model_dummy_stream sd, sb;
    int rc = model_dummy_streams(w, &sd, &sb);
    if (rc == 0)
        rc = sd.u16 ? dummy_fill_u16_cuda(d, sd.n, sd.seed, sd.table, 0)
                    : dummy_fill_bytes_cuda(d, sd.n, sd.seed, sd.mask, sd.add, 0);
    if (rc == 0 && sb.n > 0)
        rc = dummy_fill_bytes_cuda(b, sb.n, sb.seed, sb.mask, sb.add, 0);
    return rc;
}

/* A device copy of n host floats (n_pad >= n: the rest zero), counted in acct. */
static float *dev_floats(struct gpu_model *g, const float *src, int64_t n, int64_t n_pad,
                         float mul, int64_t *acct)
{
    float *tmp = xcalloc((size_t)n_pad, sizeof(float));
    for (int64_t i = 0; src && i < n; i++)
        tmp[i] = src[i] * mul;
    float *d = dev_alloc(g, sizeof(float) * (size_t)n_pad, acct);
    if (d && put(d, tmp, sizeof(float) * (size_t)n_pad) < 0)
        d = NULL;
    free(tmp);
    return d;
}

/* ---- weights: n_experts stacked experts, each the rows of np parts then zero_rows zero rows ---- */

struct stack_src {
    const struct qweight *const *parts; // [n_experts * np]
    int np;
    int n_experts;
    int zero_rows;
};

static int fail(char *err, size_t errlen, int rc, const char *what, const char *why)
{
    snprintf(err, errlen, "%s: %s", what, why);
    return rc;
}

static int upload_stack(struct gpu_model *g, const struct stack_src *s, int64_t *acct,
                        struct kweight *kw, const char *what, char *err, size_t errlen)
{
    const struct qweight *w0 = s->parts[0];
    const int64_t cols = w0->cols;
    int64_t rows = s->zero_rows;
    for (int p = 0; p < s->np; p++)
        rows += s->parts[p]->rows;
    bool filled = false; /* parts written by fill_dummy: waited for at the end */
    for (int i = 0; i < s->n_experts * s->np; i++) {
        const struct qweight *w = s->parts[i];
        filled = filled || w->dummy;
        if (!qweight_present(w) || w->cols != cols || w->fmt != w0->fmt ||
            w->rows != s->parts[i % s->np]->rows)
            return fail(err, errlen, ERR_UNSUPPORTED, what, "parts differ in format or shape");
        if (w->fmt == QW_FP8 && w->scale_kind != w0->scale_kind)
            return fail(err, errlen, ERR_UNSUPPORTED, what, "fp8 parts differ in scale kind");
    }
    /* the kernels' column multiple: 8 bf16 / 16 fp8 / 16 nvfp4 (one scale group) */
    const int64_t chunk = w0->fmt == QW_FP8 ? 16 : w0->fmt == QW_NVFP4 ? 16 : 8;
    if (cols % chunk) {
        char why[96];
        snprintf(why, sizeof why, "%s with %lld columns (the kernels need a multiple of %lld)",
                 qweight_format_name(w0), (long long)cols, (long long)chunk);
        return fail(err, errlen, ERR_UNSUPPORTED, what, why);
    }
    const int E = s->n_experts;
    memset(kw, 0, sizeof *kw);
    kw->rows = (int)rows;
    kw->cols = (int)cols;
    kw->row_stride = cols;
    kw->expert_stride = E > 1 ? rows * cols : 0;
    const int64_t n_el = (int64_t)E * rows * cols;
    int rc = 0;
    if (w0->fmt == QW_BF16 || w0->fmt == QW_F32 || w0->fmt == QW_F16) {
        kw->fmt = KW_FMT_BF16;
        uint16_t *d = dev_alloc(g, sizeof(uint16_t) * (size_t)n_el, acct);
        if (!d)
            return fail(err, errlen, ERR_NOMEM, what, "cudaMalloc failed");
        uint16_t *row = xmalloc(sizeof(uint16_t) * (size_t)cols);
        float *f = xmalloc(sizeof(float) * (size_t)cols);
        int64_t r_out = 0;
        for (int e = 0; e < E && rc == 0; e++) {
            for (int p = 0; p < s->np && rc == 0; p++) {
                const struct qweight *w = s->parts[e * s->np + p];
                if (w->fmt != QW_BF16 && e == 0 && p == 0)
                    LOG_WARN("gpu_weight_as_bf16", "weight=%s from=%s note=\"the GPU GEMVs read "
                             "bf16: rounded at upload\"", what, qweight_format_name(w));
                if (w->fmt == QW_BF16 && w->dummy) {
                    rc = fill_dummy(w, d + r_out * cols, NULL);
                    r_out += w->rows;
                    continue;
                }
                if (w->fmt == QW_BF16 && w->row_stride == cols) {
                    rc = put(d + r_out * cols, w->data, sizeof(uint16_t) * (size_t)(w->rows * cols));
                    r_out += w->rows;
                    continue;
                }
                for (int64_t r = 0; r < w->rows && rc == 0; r++, r_out++) {
                    qweight_dequant_row(w, r, f);
                    for (int64_t c = 0; c < cols; c++)
                        row[c] = dtype_f32_to_bf16(f[c]);
                    rc = put(d + r_out * cols, row, sizeof(uint16_t) * (size_t)cols);
                }
            }
            memset(row, 0, sizeof(uint16_t) * (size_t)cols);
            for (int z = 0; z < s->zero_rows && rc == 0; z++, r_out++)
                rc = put(d + r_out * cols, row, sizeof(uint16_t) * (size_t)cols);
        }
        free(row);
        free(f);
        kw->data = d;
    } else if (w0->fmt == QW_FP8) {
        kw->fmt = KW_FMT_FP8;
        uint8_t *d = dev_alloc(g, (size_t)n_el, acct);
        if (!d)
            return fail(err, errlen, ERR_NOMEM, what, "cudaMalloc failed");
        /* scales: TENSOR / CHANNEL -> one per row (exact for stacked parts); BLOCK -> the
         * checkpoint's blocks where every part (and the zero rows) is whole blocks of the same
         * height, as the stream kernel reads them (a 16 x 128 item inside one block), else one
         * block row per weight row (block_rows = 1), so parts of any height stack exactly */
        const bool block = w0->scale_kind == QW_SCALE_BLOCK;
        const int64_t ncb = block ? CEIL_DIV(cols, (int64_t)w0->block_cols) : 1;
        int64_t br =
            block && w0->block_rows > 0 && s->zero_rows % w0->block_rows == 0 ? w0->block_rows : 1;
        for (int i = 0; i < E * s->np && br > 1; i++)
            if (s->parts[i]->block_rows != br || s->parts[i]->rows % br)
                br = 1;
        const int64_t nrb = rows / br; /* block rows per expert */
        float *sc = xcalloc((size_t)(E * nrb * ncb), sizeof(float));
        uint8_t *zero = xcalloc((size_t)cols, 1);
        int64_t r_out = 0;
        for (int e = 0; e < E && rc == 0; e++) {
            for (int p = 0; p < s->np && rc == 0; p++) {
                const struct qweight *w = s->parts[e * s->np + p];
                if (block && w->block_cols != w0->block_cols) {
                    rc = fail(err, errlen, ERR_UNSUPPORTED, what, "fp8 block sizes differ");
                    break;
                }
                for (int64_t r = 0; r < w->rows && rc == 0; r++, r_out++) {
                    const uint8_t *src =
                        w->dummy ? NULL : (const uint8_t *)w->data + r * w->row_stride;
                    for (int64_t cb = 0; cb < ncb && r % br == 0; cb++) {
                        float v;
                        if (block)
                            v = w->scale[(r / w->block_rows) * ncb + cb];
                        else if (w->scale_kind == QW_SCALE_CHANNEL)
                            v = w->scale[r];
                        else if (w->scale_kind == QW_SCALE_TENSOR)
                            v = w->scale[0];
                        else
                            v = 1.0f;
                        sc[(r_out / br) * ncb + cb] = v;
                    }
                    if (w->row_stride != cols && !w->dummy)
                        rc = put(d + r_out * cols, src, (size_t)cols);
                }
                if (w->dummy && rc == 0)
                    rc = fill_dummy(w, d + (r_out - w->rows) * cols, NULL);
                else if (w->row_stride == cols && rc == 0)
                    rc = put(d + (r_out - w->rows) * cols, w->data, (size_t)(w->rows * cols));
            }
            for (int z = 0; z < s->zero_rows && rc == 0; z++, r_out++) {
                for (int64_t cb = 0; cb < ncb && z % br == 0; cb++)
                    sc[(r_out / br) * ncb + cb] = 1.0f;
                rc = put(d + r_out * cols, zero, (size_t)cols);
            }
        }
        float *dsc = rc == 0 ? dev_alloc(g, sizeof(float) * (size_t)(E * nrb * ncb), acct) : NULL;
        if (rc == 0 && (!dsc || put(dsc, sc, sizeof(float) * (size_t)(E * nrb * ncb)) < 0))
            rc = fail(err, errlen, ERR_NOMEM, what, "scale upload failed");
        free(sc);
        free(zero);
        kw->data = d;
        kw->scale = dsc;
        kw->scale_kind = block ? KW_SCALE_BLOCK : KW_SCALE_CHANNEL;
        kw->block_rows = (int)br;
        kw->block_cols = block ? w0->block_cols : 0;
        kw->scale_expert_stride = nrb * ncb;
    } else if (w0->fmt == QW_NVFP4) {
        kw->fmt = KW_FMT_NVFP4;
        if (cols % 16)
            return fail(err, errlen, ERR_UNSUPPORTED, what, "nvfp4 cols not a multiple of 16");
        uint8_t *d = dev_alloc(g, (size_t)(n_el / 2), acct);
        uint8_t *db = dev_alloc(g, (size_t)(n_el / 16), acct);
        if (!d || !db)
            return fail(err, errlen, ERR_NOMEM, what, "cudaMalloc failed");
        float *ge = xcalloc((size_t)E, sizeof(float));
        uint8_t *bs = xcalloc((size_t)(rows * cols / 16), 1);
        int n_rescaled = 0;
        bool dummy_bs = false; /* the last expert's parts wrote their own scales */
        for (int e = 0; e < E && rc == 0; e++) {
            float gmax = 0.0f;
            for (int p = 0; p < s->np; p++)
                gmax = fmaxf(gmax, s->parts[e * s->np + p]->gscale);
            ge[e] = gmax;
            int64_t r_out = 0;
            dummy_bs = false;
            uint8_t *de = d + (int64_t)e * rows * cols / 2;
            for (int p = 0; p < s->np && rc == 0; p++) {
                const struct qweight *w = s->parts[e * s->np + p];
                const float ratio = gmax > 0.0f ? w->gscale / gmax : 1.0f;
                if (w->dummy) { /* its values and scales on the device, the scales as they are */
                    if (ratio != 1.0f) {
                        rc = fail(err, errlen, ERR_UNSUPPORTED, what,
                                  "dummy parts with different global scales");
                        break;
                    }
                    rc = fill_dummy(w, de + r_out * cols / 2,
                                    db + (int64_t)e * rows * cols / 16 + r_out * cols / 16);
                    dummy_bs = true;
                    r_out += w->rows;
                    continue;
                }
                if (ratio != 1.0f)
                    n_rescaled++;
                for (int64_t r = 0; r < w->rows; r++)
                    for (int64_t j = 0; j < cols / 16; j++) {
                        uint8_t b = w->bscale[r * w->bscale_stride + j];
                        if (ratio != 1.0f)
                            b = dtype_f32_to_e4m3(dtype_e4m3_to_f32(b) * ratio);
                        bs[(r_out + r) * (cols / 16) + j] = b;
                    }
                if (w->row_stride == cols) {
                    rc = put(de + r_out * cols / 2, w->data, (size_t)(w->rows * cols / 2));
                } else {
                    for (int64_t r = 0; r < w->rows && rc == 0; r++)
                        rc = put(de + (r_out + r) * cols / 2,
                                 (const uint8_t *)w->data + r * w->row_stride / 2, (size_t)cols / 2);
                }
                r_out += w->rows;
            }
            if (s->zero_rows && rc == 0) {
                uint8_t *zero = xcalloc((size_t)(s->zero_rows * cols / 2), 1);
                rc = put(de + r_out * cols / 2, zero, (size_t)(s->zero_rows * cols / 2));
                free(zero);
            }
            /* the host-built scales (zero rows: zero), or only the zero rows' after dummy parts */
            if (rc == 0 && !dummy_bs)
                rc = put(db + (int64_t)e * rows * cols / 16, bs, (size_t)(rows * cols / 16));
            else if (rc == 0 && s->zero_rows) {
                uint8_t *zero = xcalloc((size_t)(s->zero_rows * cols / 16), 1);
                rc = put(db + (int64_t)e * rows * cols / 16 + r_out * cols / 16, zero,
                         (size_t)(s->zero_rows * cols / 16));
                free(zero);
            }
        }
        if (n_rescaled)
            LOG_WARN("gpu_nvfp4_gscale_merged", "weight=%s parts=%d note=\"stacked parts had "
                     "different global scales; block scales re-rounded to the largest\"",
                     what, n_rescaled);
        kw->data = d;
        kw->bscale = db;
        kw->bscale_stride = cols / 16;
        kw->bscale_expert_stride = rows * cols / 16;
        kw->gscale = ge[0];
        if (E > 1) {
            float *dg = dev_floats(g, ge, E, E, 1.0f, acct);
            if (!dg)
                rc = fail(err, errlen, ERR_NOMEM, what, "cudaMalloc failed");
            kw->gscale_e = dg;
        }
        free(ge);
        free(bs);
        /* the kernels behind this kweight dequantize the weights and take the activations as
         * they are: only a plan with W4A4 weight-only semantics may run them (gpu_backend lines) */
        if (w0->act_fp4 && !backend_plan_w4a4_weight_only(&g->plan))
            return fail(err, errlen, ERR_UNSUPPORTED, what,
                        "the plan quantizes W4A4 activations, which this runner cannot");
    } else {
        return fail(err, errlen, ERR_UNSUPPORTED, what, "weight format");
    }
    /* the fills done before any kernel of the runner's (non-blocking) stream reads them */
    if (rc == 0 && filled && cudaDeviceSynchronize() != cudaSuccess)
        rc = ERR_CUDA;
    if (rc < 0 && err[0] == '\0')
        snprintf(err, errlen, "%s: upload failed (%s)", what, err_str(rc));
    return rc;
}

static int upload_one(struct gpu_model *g, const struct qweight *w, int64_t *acct,
                      struct kweight *kw, const char *what, char *err, size_t errlen)
{
    const struct qweight *parts[1] = { w };
    struct stack_src s = { parts, 1, 1, 0 };
    return upload_stack(g, &s, acct, kw, what, err, errlen);
}

/* ---- layers ---- */

static int upload_gdn(struct gpu_model *g, const struct gdn_w *w, struct gpu_layer *L, int l,
                      char *err, size_t errlen)
{
    int64_t *acct = &g->mem.group[MODEL_GROUP_LINEAR_ATTN];
    char what[64];
    int rc;
    snprintf(what, sizeof what, "layers.%d.linear_attn.in_proj_qkv", l);
    if ((rc = upload_one(g, &w->qkv, acct, &L->qkv, what, err, errlen)) < 0)
        return rc;
    snprintf(what, sizeof what, "layers.%d.linear_attn.in_proj_z", l);
    if ((rc = upload_one(g, &w->z, acct, &L->z, what, err, errlen)) < 0)
        return rc;
    snprintf(what, sizeof what, "layers.%d.linear_attn.in_proj_b", l);
    if ((rc = upload_one(g, &w->b, acct, &L->b, what, err, errlen)) < 0)
        return rc;
    snprintf(what, sizeof what, "layers.%d.linear_attn.in_proj_a", l);
    if ((rc = upload_one(g, &w->a, acct, &L->a, what, err, errlen)) < 0)
        return rc;
    snprintf(what, sizeof what, "layers.%d.linear_attn.out_proj", l);
    if ((rc = upload_one(g, &w->out, acct, &L->out, what, err, errlen)) < 0)
        return rc;
    L->conv_w = dev_floats(g, w->conv, (int64_t)g->cd * g->kc, (int64_t)g->cd * g->kc, 1.0f, acct);
    L->dt_bias = dev_floats(g, w->dt_bias, g->hv, g->hv, 1.0f, acct);
    L->a_log = dev_floats(g, w->A_log, g->hv, g->hv, 1.0f, acct);
    /* padded heads: out_pad = sqrt(128/Dv) * out, undone by the weight (gpu_forward.c) */
    const float nmul = g->gdn_pad ? sqrtf((float)g->dv / (float)GPU_GDN_D) : 1.0f;
    L->gnorm = dev_floats(g, w->norm, g->dv, GPU_GDN_D, nmul, &g->mem.group[MODEL_GROUP_NORMS]);
    if (!L->conv_w || !L->dt_bias || !L->a_log || !L->gnorm)
        return fail(err, errlen, ERR_NOMEM, "gdn vectors", "cudaMalloc failed");
    return 0;
}

static int upload_attn(struct gpu_model *g, const struct attn_w *w, struct gpu_layer *L, int l,
                       char *err, size_t errlen)
{
    int64_t *acct = &g->mem.group[MODEL_GROUP_FULL_ATTN];
    const struct qweight *ws[4] = { &w->q, &w->k, &w->v, &w->o };
    struct kweight *kw[4] = { &L->q, &L->k, &L->v, &L->o };
    static const char *const names[4] = { "q_proj", "k_proj", "v_proj", "o_proj" };
    for (int i = 0; i < 4; i++) {
        char what[64];
        snprintf(what, sizeof what, "layers.%d.self_attn.%s", l, names[i]);
        int rc = upload_one(g, ws[i], acct, kw[i], what, err, errlen);
        if (rc < 0)
            return rc;
    }
    L->q_norm = dev_floats(g, w->q_norm, g->hd, g->hd, 1.0f, &g->mem.group[MODEL_GROUP_NORMS]);
    L->k_norm = dev_floats(g, w->k_norm, g->hd, g->hd, 1.0f, &g->mem.group[MODEL_GROUP_NORMS]);
    if (!L->q_norm || !L->k_norm)
        return fail(err, errlen, ERR_NOMEM, "attn norms", "cudaMalloc failed");
    return 0;
}

/* The router's fp32 copy (E, H) for the many-row router GEMM (gpu_dispatch.c), counted in
 * mem.dispatch. */
static int upload_router_f32(struct gpu_model *g, const struct qweight *w, struct gpu_layer *L,
                             char *err, size_t errlen)
{
    const int64_t E = w->rows, H = w->cols;
    float *h = xmalloc(sizeof(float) * (size_t)(E * H));
    for (int64_t r = 0; r < E; r++)
        qweight_dequant_row(w, r, h + r * H);
    L->router_f32 = dev_floats(g, h, E * H, E * H, 1.0f, &g->mem.dispatch);
    free(h);
    return L->router_f32 ? 0 : fail(err, errlen, ERR_NOMEM, "router fp32 copy", "cudaMalloc failed");
}

/* The shared expert stacks with the routed ones: the same formats (and fp8 scale kinds, nvfp4
 * global scale per part kept exact by the per-expert gscale) and shapes, part by part. */
static bool shared_foldable(const struct moe_w *w, int E)
{
    const struct qweight *sh[3] = { &w->sh_gate, &w->sh_up, &w->sh_down };
    const struct qweight *r[3] = { &w->gate[0], &w->up[0], &w->down[0] };
    if (E < 1)
        return false;
    for (int i = 0; i < 3; i++)
        if (!qweight_present(sh[i]) || sh[i]->fmt != r[i]->fmt || sh[i]->rows != r[i]->rows ||
            sh[i]->cols != r[i]->cols ||
            (sh[i]->fmt == QW_FP8 && sh[i]->scale_kind != r[i]->scale_kind))
            return false;
    return true;
}

/* expert e of a stack as a plain weight (device pointers moved to it) */
static struct kweight expert_view(const struct kweight *w, int e)
{
    struct kweight v = *w;
    const int64_t el = (int64_t)e * w->expert_stride;
    if (w->fmt == KW_FMT_NVFP4) {
        v.data = (const uint8_t *)w->data + el / 2;
        v.bscale = w->bscale + (int64_t)e * w->bscale_expert_stride;
        v.gscale_e = w->gscale_e ? w->gscale_e + e : NULL;
    } else if (w->fmt == KW_FMT_FP8) {
        v.data = (const uint8_t *)w->data + el;
        v.scale = w->scale + (int64_t)e * w->scale_expert_stride;
    } else {
        v.data = (const uint16_t *)w->data + el;
    }
    v.expert_stride = 0;
    return v;
}

static int upload_moe(struct gpu_model *g, const struct moe_w *w, struct gpu_layer *L, int l,
                      char *err, size_t errlen)
{
    char what[64];
    int rc;
    snprintf(what, sizeof what, "layers.%d.mlp.gate", l);
    if ((rc = upload_one(g, &w->router, &g->mem.group[MODEL_GROUP_ROUTER], &L->router, what, err,
                         errlen)) < 0)
        return rc;
    if (g->o.gemm_min_rows >= 0 && (rc = upload_router_f32(g, &w->router, L, err, errlen)) < 0)
        return rc;
    L->has_shared = qweight_present(&w->sh_gate);
    /* the shared expert as expert E of the routed stacks when it has their format and shape:
     * few-row steps then run it in the routed experts' two launches (gpu_moe_block) */
    L->sh_folded = L->has_shared && shared_foldable(w, g->E);
    const int ne = g->E + (L->sh_folded ? 1 : 0);
    const struct qweight **gu = xmalloc(sizeof(*gu) * (size_t)(2 * ne));
    const struct qweight **dn = xmalloc(sizeof(*dn) * (size_t)ne);
    for (int e = 0; e < g->E; e++) {
        gu[2 * e] = &w->gate[e];
        gu[2 * e + 1] = &w->up[e];
        dn[e] = &w->down[e];
    }
    if (L->sh_folded) {
        gu[2 * g->E] = &w->sh_gate;
        gu[2 * g->E + 1] = &w->sh_up;
        dn[g->E] = &w->sh_down;
    }
    struct stack_src s_gu = { gu, 2, ne, 0 }, s_dn = { dn, 1, ne, 0 };
    int64_t *acct = &g->mem.group[MODEL_GROUP_EXPERTS];
    const int64_t before = *acct;
    snprintf(what, sizeof what, "layers.%d.mlp.experts.gate_up", l);
    rc = upload_stack(g, &s_gu, acct, &L->gate_up, what, err, errlen);
    snprintf(what, sizeof what, "layers.%d.mlp.experts.down", l);
    if (rc == 0)
        rc = upload_stack(g, &s_dn, acct, &L->down, what, err, errlen);
    free(gu);
    free(dn);
    if (rc < 0 || !L->has_shared)
        return rc;
    if (L->sh_folded) {
        /* the views of expert E are what the many-row path runs as a stack of 1; its bytes
         * count as the shared expert's (the stacks' allocations are per-expert uniform) */
        L->sh_gate_up = expert_view(&L->gate_up, g->E);
        L->sh_down = expert_view(&L->down, g->E);
        const int64_t one = (*acct - before) / ne;
        *acct -= one;
        g->mem.group[MODEL_GROUP_SHARED] += one;
    }
    acct = &g->mem.group[MODEL_GROUP_SHARED];
    const struct qweight *sgu[2] = { &w->sh_gate, &w->sh_up };
    const struct qweight *sdn[1] = { &w->sh_down };
    const struct qweight *sg[1] = { &w->sh_expert_gate };
    struct stack_src a = { sgu, 2, 1, 0 }, b = { sdn, 1, 1, 0 }, c = { sg, 1, 1, 1 };
    snprintf(what, sizeof what, "layers.%d.mlp.shared_expert.gate_up", l);
    if (!L->sh_folded && (rc = upload_stack(g, &a, acct, &L->sh_gate_up, what, err, errlen)) < 0)
        return rc;
    snprintf(what, sizeof what, "layers.%d.mlp.shared_expert.down", l);
    if (!L->sh_folded && (rc = upload_stack(g, &b, acct, &L->sh_down, what, err, errlen)) < 0)
        return rc;
    snprintf(what, sizeof what, "layers.%d.mlp.shared_expert_gate", l);
    return upload_stack(g, &c, acct, &L->sh_gate, what, err, errlen);
}

/* The MTP head (one full-attention layer with MoE, fc, three norms): uploaded like a main
 * layer, then every byte it added is moved into MODEL_GROUP_MTP. */
int gpu_upload_mtp(struct gpu_model *g, const struct model *m, struct gpu_mtp_w *w, char *err,
                   size_t errlen)
{
    int64_t before[MODEL_GROUP_COUNT];
    memcpy(before, g->mem.group, sizeof before);
    const struct mtp_w *mw = &m->mtp;
    const int l = g->cfg.n_layers; // named as the layer after the stack in errors
    int rc = upload_one(g, &mw->fc, &g->mem.group[MODEL_GROUP_MTP], &w->fc, "mtp.fc", err, errlen);
    if (rc == 0)
        rc = upload_attn(g, &mw->layer.attn, &w->layer, l, err, errlen);
    if (rc == 0)
        rc = upload_moe(g, &mw->layer.moe, &w->layer, l, err, errlen);
    if (rc < 0)
        return rc;
    int64_t *acct = &g->mem.group[MODEL_GROUP_MTP];
    w->layer.type = LAYER_FULL_ATTN;
    w->layer.in_norm = dev_floats(g, mw->layer.in_norm, g->H, g->H, 1.0f, acct);
    w->layer.post_norm = dev_floats(g, mw->layer.post_norm, g->H, g->H, 1.0f, acct);
    w->norm_emb = dev_floats(g, mw->pre_fc_norm_embedding, g->H, g->H, 1.0f, acct);
    w->norm_hid = dev_floats(g, mw->pre_fc_norm_hidden, g->H, g->H, 1.0f, acct);
    w->norm = dev_floats(g, mw->norm, g->H, g->H, 1.0f, acct);
    if (!w->layer.in_norm || !w->layer.post_norm || !w->norm_emb || !w->norm_hid || !w->norm)
        return fail(err, errlen, ERR_NOMEM, "mtp norms", "cudaMalloc failed");
    for (int i = 0; i < MODEL_GROUP_COUNT; i++) {
        if (i == MODEL_GROUP_MTP)
            continue;
        g->mem.group[MODEL_GROUP_MTP] += g->mem.group[i] - before[i];
        g->mem.group[i] = before[i];
    }
    return 0;
}

void *gpu_dev_alloc(struct gpu_model *g, size_t bytes, int64_t *acct)
{
    return dev_alloc(g, bytes, acct);
}

/* ---- plan ---- */

static int check_shapes(const struct model_config *c, char *err, size_t errlen)
{
    if (c->lin_n_v_heads % c->lin_n_k_heads || c->lin_k_head_dim > GPU_GDN_D ||
        c->lin_v_head_dim > GPU_GDN_D)
        return fail(err, errlen, ERR_UNSUPPORTED, "gdn", "head dims above 128 or Hv % Hk != 0");
    if (c->head_dim % 8 || c->head_dim > ATTN_DECODE_MAX_HEAD_DIM)
        return fail(err, errlen, ERR_UNSUPPORTED, "attention", "head_dim not a multiple of 8 <= 256");
    if (c->hidden_size % 8)
        return fail(err, errlen, ERR_UNSUPPORTED, "hidden", "hidden_size not a multiple of 8");
    return 0;
}

static float *act(struct gpu_model *g, int64_t n)
{
    return dev_alloc(g, sizeof(float) * (size_t)(n > 0 ? n : 1), &g->mem.activations);
}

/* States in the pool (opts.state_in_pool): the sizes of a block and of a state in blocks, from
 * the model's dims (set before any allocation: the default kv_blocks needs them). */
static void pool_geometry(struct gpu_model *g)
{
    int n_attn = 0, n_gdn = 0;
    for (int l = 0; l < g->cfg.n_layers; l++) {
        n_attn += g->cfg.layer_types[l] == LAYER_FULL_ATTN;
        n_gdn += g->cfg.layer_types[l] == LAYER_LINEAR_ATTN;
    }
    g->n_attn = n_attn;
    g->kv_sub = 2 * (n_attn + (g->o.spec_k > 0 ? 1 : 0)); // the MTP layer's K/V last
    g->block_bytes =
        (int64_t)g->kv_sub * g->o.block_tokens * g->hkv * g->hd * kv_dtype_bytes(g->kv_dtype);
    const int64_t conv = (int64_t)sizeof(float) * g->cd * (g->kc - 1);
    g->gdn_layer_bytes =
        (conv + 15) / 16 * 16 + (int64_t)sizeof(float) * g->hv * GPU_GDN_D * GPU_GDN_D;
    const int64_t state = g->gdn_layer_bytes * n_gdn;
    g->state_blocks = g->block_bytes > 0 ? (int)CEIL_DIV(state, g->block_bytes) : 0;
    if (g->state_blocks < 1)
        g->state_blocks = 1;
    g->state_stride = (int64_t)g->state_blocks * g->block_bytes / (int64_t)sizeof(float);
}

/* The arena of opts.state_in_pool: block b holds sub-block 2a (K) and 2a + 1 (V) of attention
 * layer a, block_tokens rows each, so a layer's base is arena + its first sub-block and the
 * kernels' block ids are b x kv_sub; GDN layer i's conv window and S start gdn_layer_bytes x i
 * into a chunk, chunk c at c x state_blocks blocks. */
static int alloc_arena(struct gpu_model *g, char *err, size_t errlen)
{
    const int64_t row = (int64_t)g->hkv * g->hd * kv_dtype_bytes(g->kv_dtype);
    const int64_t conv = (int64_t)sizeof(float) * g->cd * (g->kc - 1);
    g->arena = dev_alloc(g, (size_t)g->o.kv_blocks * (size_t)g->block_bytes, &g->mem.kv_pool);
    if (!g->arena)
        return fail(err, errlen, ERR_NOMEM, "kv pool", "cudaMalloc failed");
    int a = 0, i = 0;
    for (int l = 0; l < g->cfg.n_layers; l++) {
        struct gpu_layer *Ly = &g->layers[l];
        char *base = (char *)g->arena;
        if (Ly->type == LAYER_LINEAR_ATTN) {
            Ly->conv_state = (float *)(base + g->gdn_layer_bytes * i);
            Ly->ssm = (float *)(base + g->gdn_layer_bytes * i + (conv + 15) / 16 * 16);
            i++;
        } else {
            Ly->k_cache = base + (int64_t)(2 * a) * g->o.block_tokens * row;
            Ly->v_cache = base + (int64_t)(2 * a + 1) * g->o.block_tokens * row;
            a++;
        }
    }
    return 0;
}

/* The per-sequence caches: GDN state for o.n_slots slots, K/V for o.kv_blocks blocks. */
static int alloc_caches(struct gpu_model *g, char *err, size_t errlen)
{
    if (g->o.state_in_pool)
        return alloc_arena(g, err, errlen);
    const int64_t S = g->o.n_slots;
    const size_t kv_bytes = (size_t)kv_dtype_bytes(g->kv_dtype) * (size_t)g->o.kv_blocks *
                            (size_t)g->o.block_tokens * (size_t)g->hkv * (size_t)g->hd;
    for (int l = 0; l < g->cfg.n_layers; l++) {
        struct gpu_layer *Ly = &g->layers[l];
        if (Ly->type == LAYER_LINEAR_ATTN) {
            Ly->conv_state = dev_alloc(g, sizeof(float) * (size_t)(S * g->cd * (g->kc - 1)),
                                       &g->mem.gdn_state);
            Ly->ssm = dev_alloc(g, sizeof(float) * (size_t)(S * g->hv * GPU_GDN_D * GPU_GDN_D),
                                &g->mem.gdn_state);
            if (!Ly->conv_state || !Ly->ssm)
                return fail(err, errlen, ERR_NOMEM, "gdn state", "cudaMalloc failed");
        } else {
            Ly->k_cache = dev_alloc(g, kv_bytes, &g->mem.kv_pool);
            Ly->v_cache = dev_alloc(g, kv_bytes, &g->mem.kv_pool);
            if (!Ly->k_cache || !Ly->v_cache)
                return fail(err, errlen, ERR_NOMEM, "kv pool", "cudaMalloc failed");
        }
    }
    return 0;
}

/* The step buffers (sized by max_rows and o.n_slots) and the pinned host buffers. */
static int alloc_acts(struct gpu_model *g, char *err, size_t errlen)
{
    const int64_t B = g->R, H = g->H, L = g->lrows;
    const int64_t vd = (int64_t)g->hv * g->dv, qd = (int64_t)g->hq * g->hd;
    g->h = act(g, B * H);
    g->x = act(g, B * H);
    g->y = act(g, B * H);
    g->mix_raw = act(g, B * g->cd);
    g->mix = act(g, B * g->cd);
    g->gz = act(g, B * vd);
    g->ga = act(g, B * g->hv);
    g->gb = act(g, B * g->hv);
    g->go = act(g, B * vd);
    if (g->gdn_pad) {
        g->qkv_p = act(g, B * (2 * g->hk + g->hv) * GPU_GDN_D);
        g->z_p = act(g, B * g->hv * GPU_GDN_D);
        g->o_p = act(g, B * g->hv * GPU_GDN_D);
    }
    g->qg = act(g, B * 2 * qd);
    g->q = act(g, B * qd);
    g->gate = act(g, B * qd);
    g->k = act(g, B * g->hkv * g->hd);
    g->v = act(g, B * g->hkv * g->hd);
    g->ao = act(g, B * qd);
    /* attention partials for any pass of up to n_slots rows at full length (not monotonic in
     * the rows: fewer rows get more parts each); longer passes attend in row groups */
    g->attn_ws_floats = 0;
    for (int n = 1; n <= g->o.n_slots; n++) {
        const int64_t f =
            (int64_t)attn_decode_ws_floats(n, g->hq, g->hkv, g->hd, g->o.max_model_len);
        g->attn_ws_floats = f > g->attn_ws_floats ? f : g->attn_ws_floats;
    }
    /* the same buffer holds attn_prefill_split's partials: the most any pass of items of up
     * to attn_split_rows rows takes (its parts from the items, their rows and the full length) */
    for (int ni = g->disp.attn_split_items; g->disp.attn_split_rows > 0 && ni <= g->o.n_slots; ni++)
        for (int mr = 1; mr <= g->disp.attn_split_rows; mr++) {
            const int64_t rows = (int64_t)ni * mr < g->R ? (int64_t)ni * mr : g->R;
            const int parts =
                attn_prefill_split_parts(ni, mr, g->hq, g->hkv, g->o.max_model_len, g->n_sms);
            const int64_t f = (int64_t)attn_prefill_split_ws_floats((int)rows, g->hq, g->hd, parts);
            g->attn_ws_floats = f > g->attn_ws_floats ? f : g->attn_ws_floats;
        }
    g->attn_ws = act(g, g->attn_ws_floats);
    g->moe_logits = act(g, B * g->E);
    g->moe_w = act(g, B * (g->K + 1)); // + 1: a folded shared expert's slot
    g->moe_ids = (int32_t *)act(g, B * (g->K + 1));
    g->sh_logits = act(g, B * 2);
    g->sh_w = act(g, B * 2);
    g->sh_ids = (int32_t *)act(g, B * 2);
    g->router_counter = (unsigned *)act(g, 1);
    g->gdn_norm_cnt = (unsigned *)act(g, (int64_t)g->o.n_slots * g->hv);
    /* the expert kernels' scratch, also the chunked GDN recurrence's (gdn_mixer: used before
     * the layer's MoE block on the same stream) */
    size_t ws = gpu_experts_ws_floats((int)B, g->K + 1, g->E + 1, g->I, g->H);
    const size_t ws2 = gpu_experts_ws_floats((int)B, 2, 1, g->Is > 0 ? g->Is : 8, g->H);
    const size_t ws3 = gdn_seq_chunk_ws_floats((int)B, g->hv);
    ws = ws > ws2 ? ws : ws2;
    g->moe_ws = act(g, (int64_t)(ws > ws3 ? ws : ws3));
    g->xl = act(g, L * H);
    g->logits = act(g, L * g->V);
    g->argmax_ids = (int32_t *)act(g, L);
    g->argmax_ws = (unsigned long long *)act(g, 2 * (int64_t)argmax_ws_words((int)L));
    g->d_in = (int32_t *)act(g, gpu_in_count(g));
    if (!g->h || !g->x || !g->y || !g->mix_raw || !g->mix || !g->gz || !g->ga || !g->gb || !g->go ||
        (g->gdn_pad && (!g->qkv_p || !g->z_p || !g->o_p)) || !g->qg || !g->q || !g->gate || !g->k ||
        !g->v || !g->ao || !g->attn_ws || !g->moe_logits || !g->moe_w || !g->moe_ids ||
        !g->sh_logits || !g->sh_w || !g->sh_ids || !g->router_counter || !g->gdn_norm_cnt ||
        !g->moe_ws || !g->xl || !g->logits || !g->argmax_ids || !g->argmax_ws || !g->d_in)
        return fail(err, errlen, ERR_NOMEM, "activations", "cudaMalloc failed");
    /* moe_router_cuda's counter and argmax_cuda's words start at 0 and every launch
     * leaves them there */
    if (cudaMemset(g->router_counter, 0, sizeof(unsigned)) ||
        cudaMemset(g->argmax_ws, 0, sizeof(unsigned long long) * argmax_ws_words((int)L)) ||
        cudaMemset(g->gdn_norm_cnt, 0, sizeof(unsigned) * (size_t)g->o.n_slots * (size_t)g->hv))
        return fail(err, errlen, ERR_CUDA, "activations", "cudaMemset failed");
    /* the padded GDN buffers keep zeros in the pad lanes forever */
    if (g->gdn_pad &&
        (cudaMemset(g->qkv_p, 0, sizeof(float) * (size_t)(B * (2 * g->hk + g->hv) * GPU_GDN_D)) ||
         cudaMemset(g->z_p, 0, sizeof(float) * (size_t)(B * g->hv * GPU_GDN_D))))
        return fail(err, errlen, ERR_CUDA, "activations", "cudaMemset failed");
    if (cudaMallocHost((void **)&g->h_in, sizeof(int32_t) * (size_t)gpu_in_count(g)) ||
        cudaMallocHost((void **)&g->h_logits, sizeof(float) * (size_t)(L * g->V)) ||
        cudaMallocHost((void **)&g->h_argmax, sizeof(int32_t) * (size_t)L))
        return fail(err, errlen, ERR_NOMEM, "pinned host buffers", "cudaMallocHost failed");
    return 0;
}

/* opts.mem_util: the pool from what the device has left (struct gpu_mem_plan). Runs after
 * every allocation that does not depend on the pool; lowers o.n_slots when the plan reserves
 * fewer state slots (the buffers sized for more stay). */
static int size_from_memory(struct gpu_model *g, const struct model *m, char *err, size_t errlen)
{
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        return fail(err, errlen, ERR_CUDA, "device memory", "cudaMemGetInfo failed");
    }
    struct gpu_mem_plan *mp = &g->mem_plan;
    mp->device_total = (int64_t)total_b;
    mp->device_used = (int64_t)(total_b - free_b);
    mp->reserve = g->o.mem_reserve > 0 ? g->o.mem_reserve : GPU_MEM_RESERVE_DEFAULT;
    /* the geometry of this runner's caches: fp32 conv windows, S padded to GPU_GDN_D */
    struct kv_geom geom;
    model_kv_geom(&g->cfg, m->has_mtp, &geom);
    geom.conv_state_f32 = true;
    geom.ssm_state_f32 = true;
    geom.gdn_k_dim = GPU_GDN_D;
    geom.gdn_v_dim = GPU_GDN_D;
    struct kv_opts ko = {
        .dtype = (enum kv_dtype)g->kv_dtype,
        .max_model_len = g->o.max_model_len,
        .max_num_seqs = g->o.n_slots,
        .gpu_memory_utilization = g->o.mem_util,
        .device_total_bytes = mp->device_total,
        .weights_bytes = mp->device_used,
        .reserve_bytes = mp->reserve,
        .spec_tokens = g->o.spec_k,
        .block_tokens = g->o.block_tokens,
        .state_in_pool = g->o.state_in_pool != 0,
    };
    char msg[400];
    int rc = kv_plan_compute(&geom, &ko, &mp->kv, msg, sizeof msg);
    if (rc < 0)
        return fail(err, errlen, rc, "--gpu-memory-utilization", msg);
    if (g->o.state_in_pool) {
        /* the plan's blocks are this runner's (the same K/V bytes per token); its state, not the
         * plan's, sets state_blocks (they agree when the conv window rows are 16-byte whole) */
        mp->kv.n_blocks = (mp->kv.budget_bytes > 0 ? mp->kv.budget_bytes : 0) / g->block_bytes;
        const int64_t rows = (int64_t)g->kv_sub * g->o.block_tokens; // int32 cache rows
        if (mp->kv.n_blocks * rows > INT32_MAX)
            mp->kv.n_blocks = INT32_MAX / rows;
        if (mp->kv.n_blocks < g->state_blocks + CEIL_DIV(g->o.max_model_len, g->o.block_tokens))
            return fail(err, errlen, ERR_FULL, "--gpu-memory-utilization",
                        "one max_model_len sequence and its GDN state do not fit the pool");
        /* the plan's figures with this runner's state (the gpu_kv_plan line prints them) */
        const int64_t per_seq = CEIL_DIV(g->o.max_model_len, g->o.block_tokens) + g->state_blocks;
        mp->kv.state_blocks = g->state_blocks;
        mp->kv.pool_tokens = (mp->kv.n_blocks - g->state_blocks) * g->o.block_tokens;
        mp->kv.max_concurrency = (double)mp->kv.n_blocks / (double)per_seq;
        if (mp->kv.max_concurrency > g->o.n_slots)
            mp->kv.max_concurrency = g->o.n_slots;
        g->o.kv_blocks = (int)mp->kv.n_blocks;
    } else {
        if (mp->kv.n_blocks * g->o.block_tokens > INT32_MAX)
            mp->kv.n_blocks = INT32_MAX / g->o.block_tokens; // cache slots are int32
        g->o.kv_blocks = (int)mp->kv.n_blocks;
        g->o.n_slots = (int)mp->kv.n_state_slots;
    }
    g->mem_sized = true;
    return 0;
}

int gpu_model_create(struct gpu_model **out, const struct model *m,
                     const struct gpu_model_opts *opts, char *err, size_t errlen)
{
    *out = NULL;
    err[0] = '\0';
    const struct model_config *c = &m->cfg;
    if (!opts || opts->n_slots <= 0 || opts->max_model_len <= 0 || opts->block_tokens < 0 ||
        opts->kv_blocks < 0 || opts->max_rows < 0 || opts->max_rows > 65535 ||
        opts->n_slots > 65535 || opts->spec_k < 0 || opts->spec_k > GPU_SPEC_MAX ||
        !(opts->mem_util >= 0 && opts->mem_util <= 1) || (opts->mem_util > 0 && opts->kv_blocks))
        return fail(err, errlen, ERR_INVAL, "gpu_model_opts", "bad sizes");
    if (opts->kv_dtype != KV_DTYPE_AUTO && opts->kv_dtype != KV_DTYPE_BF16 &&
        opts->kv_dtype != KV_DTYPE_FP8)
        return fail(err, errlen, ERR_INVAL, "gpu_model_opts", "kv_dtype not auto|bf16|fp8");
    /* cache slots (block * block_tokens + offset) are int32 on the device */
    const int64_t bt = opts->block_tokens ? opts->block_tokens : 16;
    const int64_t n_blocks =
        opts->kv_blocks ? opts->kv_blocks : opts->n_slots * CEIL_DIV(opts->max_model_len, bt);
    if (n_blocks * bt > INT32_MAX)
        return fail(err, errlen, ERR_INVAL, "gpu_model_opts",
                    "kv_blocks x block_tokens above 2^31 cache slots");
    int rc = check_shapes(c, err, errlen);
    if (rc < 0)
        return rc;
    struct gpu_model *g = xcalloc(1, sizeof *g);
    g->cfg = *c;
    g->o = *opts;
    if (g->o.block_tokens == 0)
        g->o.block_tokens = 16;
    g->bps = (int)CEIL_DIV(g->o.max_model_len, g->o.block_tokens);
    if (g->o.kv_blocks == 0)
        g->o.kv_blocks = g->o.n_slots * g->bps;
    g->H = c->hidden_size;
    g->V = c->vocab_size;
    g->hk = c->lin_n_k_heads;
    g->hv = c->lin_n_v_heads;
    g->dk = c->lin_k_head_dim;
    g->dv = c->lin_v_head_dim;
    g->cd = 2 * g->hk * g->dk + g->hv * g->dv;
    g->kc = c->lin_conv_kernel;
    g->hq = c->n_heads;
    g->hkv = c->n_kv_heads;
    g->hd = c->head_dim;
    g->E = c->n_experts;
    g->K = c->n_experts_per_tok;
    g->I = c->moe_inter;
    g->Is = c->shared_inter;
    g->gdn_pad = g->dk != GPU_GDN_D || g->dv != GPU_GDN_D;
    g->gdn_eps = g->gdn_pad ? c->rms_eps * (float)g->dk * (float)g->dv /
                                  (float)(GPU_GDN_D * GPU_GDN_D)
                            : c->rms_eps;
    g->win_slot = -1;
    g->kv_dtype = opts->kv_dtype == KV_DTYPE_FP8 ? KV_DTYPE_FP8 : KV_DTYPE_BF16;
    g->pos = xmalloc(sizeof(int) * (size_t)g->o.n_slots);
    g->chunk = xmalloc(sizeof(int) * (size_t)g->o.n_slots);
    for (int s = 0; s < g->o.n_slots; s++)
        g->pos[s] = g->chunk[s] = -1;
    if (g->o.state_in_pool) {
        pool_geometry(g);
        if (!opts->kv_blocks) /* room for n_slots full sequences and their states */
            g->o.kv_blocks = g->o.n_slots * (g->bps + g->state_blocks);
        if ((int64_t)g->o.kv_blocks * g->kv_sub * g->o.block_tokens > INT32_MAX ||
            g->o.kv_blocks < g->state_blocks + 1) {
            rc = fail(err, errlen, ERR_INVAL, "gpu_model_opts",
                      "kv_blocks: below one state and a block, or past 2^31 cache rows");
            goto fail;
        }
    }
    g->h_seen = xcalloc((size_t)g->o.n_slots, sizeof(bool));
    g->R = g->o.max_rows > 0 ? g->o.max_rows : 256;
    if (g->R < g->o.n_slots)
        g->R = g->o.n_slots;
    if (g->R < g->o.spec_k + 1)
        g->R = g->o.spec_k + 1; // a verify window is one item of spec_k + 1 rows
    g->lrows = g->o.n_slots > 32 ? g->o.n_slots : 32; // >= GPU_SPEC_MAX + 1 (draft ids)
    g->o.max_rows = g->R;
    g->h_rows = xcalloc((size_t)g->R, sizeof(int));
    g->h_item = xcalloc((size_t)g->R, sizeof(int));
    g->h_start = xcalloc((size_t)g->o.n_slots, sizeof(int));

    struct cudaDeviceProp prop;
    if (cudaSetDevice(opts->device) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, opts->device) != cudaSuccess) {
        (void)cudaGetLastError();
        rc = fail(err, errlen, ERR_CUDA, "device", "no usable CUDA device");
        goto fail;
    }
    g->sm = prop.major * 10 + prop.minor;
    g->n_sms = prop.multiProcessorCount;
    snprintf(g->dev_name, sizeof g->dev_name, "%s", prop.name);
    struct backend_scheme sch[BACKEND_CLASS_COUNT];
    backend_schemes_from_model(m, sch);
    rc = backend_plan_compute(sch, g->sm, g->dev_name, (enum backend_id)opts->force_moe,
                              (enum backend_id)opts->force_linear, &g->plan, err, errlen);
    /* the forward pass dispatches NVFP4 to the dequant-in-registers GEMV / MoE kernels only:
     * W4A4 runs weight-only everywhere, and the plan (the startup log) says so */
    if (rc == 0)
        rc = backend_plan_without_w4a4_mma(&g->plan, err, errlen);
    if (rc < 0)
        goto fail;
    if (cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking) != cudaSuccess) {
        rc = fail(err, errlen, ERR_CUDA, "stream", "cudaStreamCreate failed");
        goto fail;
    }

    /* embedding: a bf16 table for the gather kernel */
    {
        struct kweight ke;
        if ((rc = upload_one(g, &m->embed, &g->mem.group[MODEL_GROUP_EMBED], &ke,
                             "embed_tokens", err, errlen)) < 0)
            goto fail;
        if (ke.fmt != KW_FMT_BF16) {
            rc = fail(err, errlen, ERR_UNSUPPORTED, "embed_tokens", "quantized embedding");
            goto fail;
        }
        g->embed = (uint16_t *)ke.data;
    }
    if ((rc = upload_one(g, &m->lm_head, &g->mem.group[MODEL_GROUP_LM_HEAD], &g->lm_head,
                         "lm_head", err, errlen)) < 0)
        goto fail;
    g->final_norm = dev_floats(g, m->final_norm, g->H, g->H, 1.0f, &g->mem.group[MODEL_GROUP_NORMS]);
    g->layers = xcalloc((size_t)c->n_layers, sizeof *g->layers);
    for (int l = 0; l < c->n_layers; l++) {
        const struct layer_w *lw = &m->layers[l];
        struct gpu_layer *L = &g->layers[l];
        L->type = lw->type;
        L->in_norm = dev_floats(g, lw->in_norm, g->H, g->H, 1.0f, &g->mem.group[MODEL_GROUP_NORMS]);
        L->post_norm =
            dev_floats(g, lw->post_norm, g->H, g->H, 1.0f, &g->mem.group[MODEL_GROUP_NORMS]);
        if (!L->in_norm || !L->post_norm) {
            rc = fail(err, errlen, ERR_NOMEM, "norms", "cudaMalloc failed");
            goto fail;
        }
        rc = lw->type == LAYER_FULL_ATTN ? upload_attn(g, &lw->attn, L, l, err, errlen)
                                         : upload_gdn(g, &lw->gdn, L, l, err, errlen);
        if (rc == 0)
            rc = upload_moe(g, &lw->moe, L, l, err, errlen);
        if (rc < 0)
            goto fail;
    }
    for (int i = 0; i < MODEL_GROUP_COUNT; i++)
        g->mem.weights += g->mem.group[i];
    if ((rc = gpu_dispatch_init(g, err, errlen)) < 0)
        goto fail;
    /* everything whose size does not depend on the pool first, so that mem_util can size the
     * pool from what is left */
    if ((rc = alloc_acts(g, err, errlen)) < 0)
        goto fail;
    if (opts->spec_k > 0 && (rc = gpu_spec_create(g, m, err, errlen)) < 0)
        goto fail;
    /* device sampling of up to lrows rows a batch; without it items take the logits path */
    g->sampler = gpu_sample_create(g->lrows, g->V, 0);
    g->h_sreq = xcalloc((size_t)g->lrows, sizeof *g->h_sreq);
    g->h_stok = xcalloc((size_t)g->lrows, sizeof *g->h_stok);
    if (opts->mem_util > 0 && (rc = size_from_memory(g, m, err, errlen)) < 0)
        goto fail;
    if ((rc = alloc_caches(g, err, errlen)) < 0)
        goto fail;
    if (opts->spec_k > 0 && (rc = gpu_spec_alloc_kv(g, err, errlen)) < 0)
        goto fail;
    g->mem.weights = 0;
    for (int i = 0; i < MODEL_GROUP_COUNT; i++)
        g->mem.weights += g->mem.group[i];
    g->mem.total = g->mem.weights + g->mem.gdn_state + g->mem.kv_pool + g->mem.activations +
                   g->mem.dispatch;
    if (g->o.graphs)
        (void)gpu_capture_graphs(g); // failure leaves eager launches (logged)
    *out = g;
    return 0;
fail:
    if (err[0] == '\0')
        snprintf(err, errlen, "gpu model: %s", err_str(rc));
    gpu_model_destroy(g);
    return rc;
}

void gpu_model_destroy(struct gpu_model *g)
{
    if (!g)
        return;
    if (g->stream)
        cudaStreamSynchronize(g->stream);
    gpu_destroy_graphs(g);
    gpu_spec_destroy(g);
    gpu_dispatch_destroy(g);
    gpu_sample_destroy(g->sampler);
    free(g->h_sreq);
    free(g->h_stok);
    for (int i = 0; i < g->n_allocs; i++)
        cudaFree(g->allocs[i]);
    free(g->allocs);
    if (g->h_in)
        cudaFreeHost(g->h_in);
    if (g->h_logits)
        cudaFreeHost(g->h_logits);
    if (g->h_argmax)
        cudaFreeHost(g->h_argmax);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    free(g->layers);
    free(g->pos);
    free(g->chunk);
    free(g->h_seen);
    free(g->h_rows);
    free(g->h_item);
    free(g->h_start);
    free(g);
}

void gpu_model_log(const struct gpu_model *g)
{
    LOG_INFO("gpu_device",
             "device=\"%s\" sm=%d slots=%d max_model_len=%d block_tokens=%d "
             "kv_blocks=%d gdn_state=%s state_blocks=%d max_rows=%d prefill=one_pass "
             "gdn_padded=%d cuda_graphs=%d",
             g->dev_name, g->sm, g->o.n_slots, g->o.max_model_len, g->o.block_tokens,
             g->o.kv_blocks, g->o.state_in_pool ? "pool" : "slots", gpu_model_state_blocks(g), g->R,
             g->gdn_pad ? 1 : 0, g->use_graphs ? 1 : 0);
    if (g->spec_k > 0)
        LOG_INFO("gpu_spec", "k=%d mtp_bytes=%lld snap_rows=%d upkeep=%s", g->spec_k,
                 (long long)g->mem.group[MODEL_GROUP_MTP], g->n_snap,
                 g->disp.mtp_upkeep_kv_only ? "kv_only" : "full_pass");
    LOG_INFO("gpu_step_buffers", "max_rows=%d logit_rows=%d activations=%lld inputs=%lld",
             g->R, g->lrows, (long long)g->mem.activations,
             (long long)(sizeof(int32_t) * (size_t)gpu_in_count(g)));
    for (int c = 0; c < BACKEND_CLASS_COUNT; c++) {
        if (g->plan.cls[c].id == BACKEND_AUTO)
            continue;
        char buf[400];
        LOG_INFO("gpu_backend", "%s",
                 backend_choice_str((enum backend_class)c, &g->plan.cls[c], buf, sizeof buf));
    }
    gpu_dispatch_log(g);
    if (g->use_graphs)
        LOG_INFO("gpu_graphs", "rows=1..%d kernels_1_row=%d kernels_%d_rows=%d pdl=%s "
                 "pdl_edges_1_row=%d pdl_edges_%d_rows=%d note=\"layer stack of a decode step; "
                 "lm_head, sampling and copies run after it\"", g->o.n_slots, g->graph_kernels[1],
                 g->o.n_slots, g->graph_kernels[g->o.n_slots], g->o.pdl < 0 ? "off" : "on",
                 g->graph_pdl_edges[1], g->o.n_slots, g->graph_pdl_edges[g->o.n_slots]);
    if (g->use_graphs && g->wgraphs && g->wgraphs[g->n_snap])
        LOG_INFO("gpu_graphs_verify",
                 "rows=2..%d kernels_%d_rows=%d note=\"one item of k+1 rows: "
                 "a speculative window's verify pass (drafting runs eager)\"",
                 g->n_snap, g->n_snap, g->wgraph_kernels[g->n_snap]);
    for (int i = 0; i < MODEL_GROUP_COUNT; i++)
        if (g->mem.group[i])
            LOG_INFO("gpu_resident", "group=%s bytes=%lld", model_group_name((enum model_group)i),
                     (long long)g->mem.group[i]);
    if (g->mem_sized) {
        const struct gpu_mem_plan *mp = &g->mem_plan;
        LOG_INFO("gpu_kv_plan",
                 "util=%.3f device_total=%lld used_before_pool=%lld reserve=%lld budget=%lld "
                 "blocks=%lld tokens=%lld gdn_state=%s state_blocks=%lld state_slots=%lld "
                 "kv_dtype=%s max_concurrency=%.2fx "
                 "max_model_len=%lld msg=\"budget = device_total x util - used_before_pool - "
                 "reserve; blocks and slots by kv_plan, as tern-scheduler --check\"",
                 g->o.mem_util, (long long)mp->device_total, (long long)mp->device_used,
                 (long long)mp->reserve, (long long)mp->kv.budget_bytes, (long long)mp->kv.n_blocks,
                 (long long)mp->kv.pool_tokens, g->o.state_in_pool ? "pool" : "slots",
                 (long long)mp->kv.state_blocks, (long long)mp->kv.n_state_slots,
                 kv_dtype_name(mp->kv.dtype), mp->kv.max_concurrency,
                 (long long)mp->kv.max_model_len);
    }
    LOG_INFO("gpu_memory", "weights=%lld gdn_state=%lld kv_pool=%lld kv_dtype=%s activations=%lld "
             "dispatch=%lld total=%lld", (long long)g->mem.weights, (long long)g->mem.gdn_state,
             (long long)g->mem.kv_pool, kv_dtype_name((enum kv_dtype)g->kv_dtype),
             (long long)g->mem.activations, (long long)g->mem.dispatch, (long long)g->mem.total);
}

const struct gpu_model_mem *gpu_model_memory(const struct gpu_model *g) { return &g->mem; }
const struct gpu_mem_plan *gpu_model_mem_plan(const struct gpu_model *g)
{
    return g->mem_sized ? &g->mem_plan : NULL;
}
const struct backend_plan *gpu_model_plan(const struct gpu_model *g) { return &g->plan; }
int gpu_model_vocab(const struct gpu_model *g) { return g->V; }
int gpu_model_n_slots(const struct gpu_model *g) { return g->o.n_slots; }
int gpu_model_max_len(const struct gpu_model *g) { return g->o.max_model_len; }
int gpu_model_block_tokens(const struct gpu_model *g) { return g->o.block_tokens; }
int gpu_model_kv_blocks(const struct gpu_model *g) { return g->o.kv_blocks; }
int gpu_model_max_rows(const struct gpu_model *g) { return g->R; }
int gpu_model_kv_dtype(const struct gpu_model *g) { return g->kv_dtype; }
const char *gpu_model_device_name(const struct gpu_model *g) { return g->dev_name; }
int gpu_model_can_sample(const struct gpu_model *g) { return g->sampler != NULL; }

int gpu_model_state_blocks(const struct gpu_model *g)
{
    return g->o.state_in_pool ? g->state_blocks : 0;
}

/* Zero slot's GDN state where it lives (its own, or its chunk's: gpu_state_offset) and start
 * the sequence at position 0. */
static int seq_start(struct gpu_model *g, int slot)
{
    const size_t cs = sizeof(float) * (size_t)g->cd * (size_t)(g->kc - 1);
    const size_t ss = sizeof(float) * (size_t)g->hv * GPU_GDN_D * GPU_GDN_D;
    for (int l = 0; l < g->cfg.n_layers; l++) {
        struct gpu_layer *L = &g->layers[l];
        if (L->type != LAYER_LINEAR_ATTN)
            continue;
        if (cudaMemsetAsync((char *)L->conv_state + gpu_state_offset(g, slot, cs), 0, cs,
                            g->stream) ||
            cudaMemsetAsync((char *)L->ssm + gpu_state_offset(g, slot, ss), 0, ss, g->stream))
            return ERR_CUDA;
    }
    g->pos[slot] = 0;
    if (g->spec)
        gpu_spec_reset(g, slot);
    return 0;
}

int gpu_model_seq_open_state(struct gpu_model *g, int slot, uint32_t state_block)
{
    if (!g->o.state_in_pool || slot < 0 || slot >= g->o.n_slots ||
        state_block % (uint32_t)g->state_blocks ||
        (int64_t)state_block + g->state_blocks > g->o.kv_blocks)
        return ERR_RANGE;
    g->chunk[slot] = (int)(state_block / (uint32_t)g->state_blocks);
    const int rc = seq_start(g, slot);
    if (rc < 0)
        g->chunk[slot] = -1;
    return rc;
}

int gpu_model_seq_open(struct gpu_model *g, int slot)
{
    if (slot < 0 || slot >= g->o.n_slots)
        return ERR_RANGE;
    if (g->o.state_in_pool) /* the default layout: chunk = slot */
        return gpu_model_seq_open_state(g, slot, (uint32_t)slot * (uint32_t)g->state_blocks);
    return seq_start(g, slot);
}

int gpu_model_seq_pos(const struct gpu_model *g, int slot)
{
    return slot >= 0 && slot < g->o.n_slots ? g->pos[slot] : -1;
}

void gpu_model_seq_close(struct gpu_model *g, int slot)
{
    if (slot >= 0 && slot < g->o.n_slots)
        g->pos[slot] = g->chunk[slot] = -1;
    if (g->spec && slot >= 0 && slot < g->o.n_slots)
        gpu_spec_reset(g, slot);
}
