/* model_load: resolve the tensors of a qwen3_5_moe checkpoint into struct model.
 * Prefix "model.language_model." or "model."; experts fused 3-D or per expert (bf16 or
 * quantized: compressed-tensors, ModelOpt, FP8); optional mtp.* head; model.visual.* and unknown
 * tensors are skipped and counted. The model owns the tensor set (mappings), the quant
 * description and every converted buffer (listed in priv->owned). */
#include "model/model_load.h"

#include "common/err.h"
#include "common/log.h"
#include "common/tpool.h"
#include "common/xalloc.h"
#include "model/config_load.h"
#include "model/dtype.h"
#include "model/quant.h"
#include "model/safetensors.h"
#include "model/tensor_name.h"
#include "model_load_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int model_load_fail(struct model_loader *L, const char *fmt, ...)
{
    if (L->err && L->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(L->err, L->errlen, fmt, ap);
        va_end(ap);
    }
    return ERR_FORMAT;
}

void *model_load_own(struct model_loader *L, void *ptr)
{
    struct model_load_priv *p = L->p;
    if (p->n_owned == p->cap_owned) {
        p->cap_owned = p->cap_owned ? p->cap_owned * 2 : 64;
        p->owned = xrealloc(p->owned, (size_t)p->cap_owned * sizeof(void *));
    }
    p->owned[p->n_owned++] = ptr;
    return ptr;
}

// ---- groups ----

static bool starts(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static bool ends(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

bool model_is_mtp_expert(const char *name)
{
    return starts(name, "mtp.") && strstr(name, ".mlp.experts.") != NULL;
}

enum model_group model_group_of(const char *name)
{
    if (starts(name, "mtp."))
        return MODEL_GROUP_MTP;
    if (starts(name, "model.visual.") || starts(name, "visual.") || strstr(name, ".visual."))
        return MODEL_GROUP_VISUAL;
    if (starts(name, "lm_head."))
        return MODEL_GROUP_LM_HEAD;
    const char *c = tensor_name_canon(name);
    if (starts(c, "embed_tokens."))
        return MODEL_GROUP_EMBED;
    if (strcmp(c, "norm.weight") == 0)
        return MODEL_GROUP_NORMS;
    if (!starts(c, "layers."))
        return MODEL_GROUP_OTHER;
    const char *r = strchr(c + 7, '.');
    if (!r)
        return MODEL_GROUP_OTHER;
    r++;
    if (ends(r, "norm.weight"))
        return MODEL_GROUP_NORMS;
    if (starts(r, "linear_attn."))
        return MODEL_GROUP_LINEAR_ATTN;
    if (starts(r, "self_attn."))
        return MODEL_GROUP_FULL_ATTN;
    if (starts(r, "mlp.gate."))
        return MODEL_GROUP_ROUTER;
    if (starts(r, "mlp.experts."))
        return MODEL_GROUP_EXPERTS;
    if (starts(r, "mlp.shared_expert.") || starts(r, "mlp.shared_expert_gate."))
        return MODEL_GROUP_SHARED;
    return MODEL_GROUP_OTHER;
}

const char *model_group_name(enum model_group g)
{
    static const char *const names[MODEL_GROUP_COUNT] = {
        "embedding", "lm_head", "linear_attn", "full_attn", "experts", "shared_experts",
        "router",    "norms",   "mtp",         "visual",    "other",
    };
    return (g >= 0 && g < MODEL_GROUP_COUNT) ? names[g] : "?";
}

static void count_groups(struct model_loader *L)
{
    struct model_load_stats *s = &L->p->stats;
    s->n_tensors = st_count(L->st);
    s->shapes_known = true;
    for (int64_t i = 0; i < s->n_tensors; i++) {
        const struct st_tensor *t = st_at(L->st, i);
        enum model_group g = model_group_of(t->name);
        if (t->ndim < 0)
            s->shapes_known = false;
        s->group_bytes[g] += t->nbytes;
        s->group_tensors[g]++;
        s->total_bytes += t->nbytes;
        if (model_is_mtp_expert(t->name))
            s->mtp_expert_bytes += t->nbytes;
        if (g == MODEL_GROUP_VISUAL || g == MODEL_GROUP_OTHER)
            s->n_skipped++;
    }
    s->n_mtp_tensors = s->group_tensors[MODEL_GROUP_MTP];
    s->mtp_bytes = s->group_bytes[MODEL_GROUP_MTP];
}

// ---- tensors ----

static const struct st_tensor *need(struct model_loader *L, const char *name)
{
    const struct st_tensor *t = st_find(L->st, name);
    if (t)
        return t;
    if (starts(name, "mtp."))
        model_load_fail(
            L,
            "checkpoint has a partial MTP head: tensor '%s' missing (%lld mtp.* tensors "
            "present)",
            name, (long long)L->p->stats.n_mtp_tensors);
    else
        model_load_fail(L, "tensor '%s' missing", name);
    return NULL;
}

static int check_shape(struct model_loader *L, const struct st_tensor *t, int ndim,
                       const int64_t *dims)
{
    if (t->ndim < 0)
        return 0; /* index-only: shape unknown */
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == dims[i];
    if (ok)
        return 0;
    char got[160], want[160];
    struct st_tensor w = {.ndim = ndim};
    memcpy(w.shape, dims, (size_t)ndim * sizeof(int64_t));
    return model_load_fail(L, "tensor '%s': shape %s but the config expects %s", t->name,
                           st_shape_str(t, got, sizeof(got)), st_shape_str(&w, want, sizeof(want)));
}

static int check_2d(struct model_loader *L, const struct st_tensor *t, int64_t a, int64_t b)
{
    int64_t d[2] = {a, b};
    return check_shape(L, t, 2, d);
}

static bool is_float_dt(enum st_dtype d)
{
    return d == ST_BF16 || d == ST_F16 || d == ST_F32;
}

static int check_float(struct model_loader *L, const struct st_tensor *t)
{
    if (t->dtype == ST_UNKNOWN || is_float_dt(t->dtype))
        return 0;
    return model_load_fail(L, "tensor '%s': dtype %s where BF16, F16 or F32 is expected", t->name,
                           st_dtype_name(t->dtype));
}

static float elem_f32(const struct st_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case ST_F32: {
        float v;
        memcpy(&v, (const uint8_t *)t->data + i * 4, 4);
        return v;
    }
    case ST_BF16:
    case ST_F16: {
        uint16_t v;
        memcpy(&v, (const uint8_t *)t->data + i * 2, 2);
        return t->dtype == ST_BF16 ? dtype_bf16_to_f32(v) : dtype_f16_to_f32(v);
    }
    default:
        return 0.0f;
    }
}

/* Converted fp32 copy owned by the model; NULL without data. */
static float *to_f32(struct model_loader *L, const struct st_tensor *t)
{
    if (!t->data)
        return NULL;
    float *v = model_load_own(L, xmalloc((size_t)(t->nelem > 0 ? t->nelem : 1) * sizeof(float)));
    for (int64_t i = 0; i < t->nelem; i++)
        v[i] = elem_f32(t, i);
    return v;
}

static int load_vec(struct model_loader *L, const char *name, int64_t n, float **out)
{
    if (L->dummy)
        return model_dummy_vec(L, name, n, out);
    const struct st_tensor *t = need(L, name);
    if (!t)
        return ERR_NOTFOUND;
    int rc = check_shape(L, t, 1, &n);
    if (rc == 0)
        rc = check_float(L, t);
    if (rc == 0)
        *out = to_f32(L, t);
    return rc;
}

static int read_scalar(struct model_loader *L, const char *name, float *out)
{
    const struct st_tensor *t = need(L, name);
    if (!t)
        return ERR_NOTFOUND;
    if (t->ndim >= 0 && t->nelem != 1)
        return model_load_fail(L,
                               "tensor '%s': expected a scalar (one element), found %lld elements",
                               name, (long long)t->nelem);
    int rc = check_float(L, t);
    if (rc < 0)
        return rc;
    *out = t->data ? elem_f32(t, 0) : 1.0f;
    return 0;
}

static void set_dense(struct qweight *w, const struct st_tensor *t, int64_t rows, int64_t cols,
                      const struct model_config *c)
{
    memset(w, 0, sizeof(*w));
    enum st_dtype d = t->dtype;
    if (d == ST_UNKNOWN)
        d = strcmp(c->dtype, "float32") == 0 ? ST_F32 : ST_BF16;
    w->fmt = d == ST_F32 ? QW_F32 : d == ST_F16 ? QW_F16 : QW_BF16;
    w->rows = rows;
    w->cols = cols;
    w->row_stride = cols;
    w->data = t->data;
}

static int load_dense(struct model_loader *L, const char *name, int64_t rows, int64_t cols,
                      struct qweight *w)
{
    if (L->dummy)
        return model_dummy_dense(L, name, rows, cols, w);
    const struct st_tensor *t = need(L, name);
    if (!t)
        return ERR_NOTFOUND;
    int rc = check_2d(L, t, rows, cols);
    if (rc == 0)
        rc = check_float(L, t);
    if (rc == 0)
        set_dense(w, t, rows, cols, L->c);
    return rc;
}

static const struct st_tensor *find_sfx(struct model_loader *L, const char *module, const char *sfx)
{
    char name[512];
    snprintf(name, sizeof(name), "%s%s", module, sfx);
    return st_find(L->st, name);
}

static const struct st_tensor *need_sfx(struct model_loader *L, const char *module, const char *sfx)
{
    char name[512];
    snprintf(name, sizeof(name), "%s%s", module, sfx);
    return need(L, name);
}

static int mismatch(struct model_loader *L, const char *module, const struct quant_scheme *s,
                    const struct st_tensor *w, const char *wanted)
{
    char sd[96];
    quant_scheme_str(s, sd, sizeof(sd));
    return model_load_fail(
        L,
        "module '%s': the quantization config declares %s but the checkpoint stores "
        "'%s' as %s (no %s%s)",
        module, sd, w->name, st_dtype_name(w->dtype), module, wanted);
}

static int load_nvfp4(struct model_loader *L, const char *module, const struct quant_scheme *s,
                      int64_t rows, int64_t cols, struct qweight *w)
{
    bool ct = quant_get_method(L->q) == QUANT_METHOD_CT;
    const char *wsfx = ct ? ".weight_packed" : ".weight";
    const struct st_tensor *pk = find_sfx(L, module, wsfx);
    const struct st_tensor *plain = find_sfx(L, module, ".weight");
    if (!pk || (pk->dtype != ST_U8 && pk->dtype != ST_UNKNOWN)) {
        if (plain && plain->dtype != ST_U8)
            return mismatch(L, module, s, plain, ct ? ".weight_packed" : ".weight in U8");
        if (!pk)
            return need_sfx(L, module, wsfx) ? 0 : ERR_NOTFOUND;
        return model_load_fail(L, "tensor '%s': dtype %s where U8 (packed e2m1) is expected",
                               pk->name, st_dtype_name(pk->dtype));
    }
    if (cols % 16)
        return model_load_fail(L, "module '%s': NVFP4 needs in_features %% 16 == 0, got %lld",
                               module, (long long)cols);
    int rc = check_2d(L, pk, rows, cols / 2);
    if (rc < 0)
        return rc;
    const struct st_tensor *bs = need_sfx(L, module, ".weight_scale");
    if (!bs)
        return ERR_NOTFOUND;
    if (bs->dtype != ST_F8_E4M3 && bs->dtype != ST_UNKNOWN)
        return model_load_fail(L, "tensor '%s': dtype %s where F8_E4M3 block scales are expected",
                               bs->name, st_dtype_name(bs->dtype));
    if ((rc = check_2d(L, bs, rows, cols / 16)) < 0)
        return rc;
    char name[512];
    float g = 1.0f, gin = 1.0f;
    snprintf(name, sizeof(name), "%s%s", module, ct ? ".weight_global_scale" : ".weight_scale_2");
    if ((rc = read_scalar(L, name, &g)) < 0)
        return rc;
    if (s->act_fp4) {
        snprintf(name, sizeof(name), "%s%s", module, ct ? ".input_global_scale" : ".input_scale");
        if ((rc = read_scalar(L, name, &gin)) < 0)
            return rc;
    }
    if (!(g > 0.0f) || !(gin > 0.0f))
        return model_load_fail(L,
                               "module '%s': global scale must be positive (weight %g, input %g)",
                               module, (double)g, (double)gin);
    memset(w, 0, sizeof(*w));
    w->fmt = QW_NVFP4;
    w->rows = rows;
    w->cols = cols;
    w->row_stride = cols;
    w->data = pk->data;
    w->bscale = bs->data;
    w->bscale_stride = cols / 16;
    /* compressed-tensors global scales are divisors, ModelOpt's are multipliers */
    w->gscale = ct ? 1.0f / g : g;
    w->act_fp4 = s->act_fp4;
    w->act_gscale = s->act_fp4 ? (ct ? gin : 1.0f / gin) : 0.0f;
    return 0;
}

static int load_fp8(struct model_loader *L, const char *module, const struct quant_scheme *s,
                    int64_t rows, int64_t cols, struct qweight *w)
{
    const struct st_tensor *t = need_sfx(L, module, ".weight");
    if (!t)
        return ERR_NOTFOUND;
    const struct st_tensor *sc = find_sfx(L, module, ".weight_scale_inv");
    if (!sc)
        sc = find_sfx(L, module, ".weight_scale");
    int rc = check_2d(L, t, rows, cols);
    if (rc < 0)
        return rc;
    if (t->dtype != ST_F8_E4M3 && t->dtype != ST_UNKNOWN) {
        if (s->optional && !sc && is_float_dt(t->dtype)) {
            set_dense(w, t, rows, cols, L->c); /* fp8 style: module left in bf16 */
            return 0;
        }
        return mismatch(L, module, s, t, ".weight in F8_E4M3 with a .weight_scale");
    }
    if (!sc)
        return need_sfx(L, module, ".weight_scale") ? 0 : ERR_NOTFOUND;
    if ((rc = check_float(L, sc)) < 0)
        return rc;
    memset(w, 0, sizeof(*w));
    w->fmt = QW_FP8;
    w->rows = rows;
    w->cols = cols;
    w->row_stride = cols;
    w->data = t->data;
    int br = s->block_rows > 0 ? s->block_rows : 128;
    int bc = s->block_cols > 0 ? s->block_cols : 128;
    int64_t nbr = CEIL_DIV(rows, (int64_t)br), nbc = CEIL_DIV(cols, (int64_t)bc);
    enum quant_fp8_scale want = s->fp8_scale;
    if (sc->ndim < 0) {
        w->scale_kind = want == QUANT_FP8_BLOCK     ? QW_SCALE_BLOCK
                        : want == QUANT_FP8_CHANNEL ? QW_SCALE_CHANNEL
                                                    : QW_SCALE_TENSOR;
    } else if (sc->nelem == 1 && (want == QUANT_FP8_ANY || want == QUANT_FP8_TENSOR)) {
        w->scale_kind = QW_SCALE_TENSOR;
    } else if (((sc->ndim == 1 && sc->shape[0] == rows) ||
                (sc->ndim == 2 && sc->shape[0] == rows && sc->shape[1] == 1)) &&
               (want == QUANT_FP8_ANY || want == QUANT_FP8_CHANNEL)) {
        w->scale_kind = QW_SCALE_CHANNEL;
    } else if (sc->ndim == 2 && sc->shape[0] == nbr && sc->shape[1] == nbc &&
               (want == QUANT_FP8_ANY || want == QUANT_FP8_BLOCK)) {
        w->scale_kind = QW_SCALE_BLOCK;
        w->block_rows = br;
        w->block_cols = bc;
    } else {
        char got[160], sd[96];
        quant_scheme_str(s, sd, sizeof(sd));
        return model_load_fail(L, "tensor '%s': shape %s does not fit %s for a [%lld, %lld] weight",
                               sc->name, st_shape_str(sc, got, sizeof(got)), sd, (long long)rows,
                               (long long)cols);
    }
    w->scale = to_f32(L, sc);
    return 0;
}

/* module.weight is a float tensor and no scale / packed tensor exists for it */
static bool stored_unquantized(struct model_loader *L, const char *module)
{
    const struct st_tensor *t = find_sfx(L, module, ".weight");
    return t && is_float_dt(t->dtype) && !find_sfx(L, module, ".weight_packed") &&
           !find_sfx(L, module, ".weight_scale") && !find_sfx(L, module, ".weight_scale_inv");
}

/* One linear module (name without the tensor suffix) of shape (rows, cols), any format. */
static int load_linear(struct model_loader *L, const char *module, int64_t rows, int64_t cols,
                       struct qweight *w)
{
    struct quant_scheme s = quant_lookup(L->q, module);
    if (L->dummy)
        return model_dummy_linear(L, module, &s, rows, cols, w);
    if (s.kind != QUANT_KIND_NONE && (s.optional || starts(module, "mtp.")) &&
        stored_unquantized(L, module)) {
        /* fp8 style without a full modules_to_not_convert list, or an MTP head the quantizer
         * never saw (it is not part of the HF model class): take the stored BF16 weight */
        L->p->stats.n_quant_fallback++;
        s.kind = QUANT_KIND_NONE;
    }
    char name[512];
    switch (s.kind) {
    case QUANT_KIND_NONE: {
        snprintf(name, sizeof(name), "%s.weight", module);
        const struct st_tensor *t = st_find(L->st, name);
        if (!t && (find_sfx(L, module, ".weight_packed")))
            return model_load_fail(
                L,
                "module '%s': stored quantized (.weight_packed) but the quantization "
                "config does not quantize it",
                module);
        if (t && !is_float_dt(t->dtype) && t->dtype != ST_UNKNOWN)
            return model_load_fail(
                L,
                "module '%s': '%s' is %s but the quantization config (%s) leaves the "
                "module unquantized",
                module, name, st_dtype_name(t->dtype), quant_method_name(quant_get_method(L->q)));
        return load_dense(L, name, rows, cols, w);
    }
    case QUANT_KIND_NVFP4:
        return load_nvfp4(L, module, &s, rows, cols, w);
    case QUANT_KIND_FP8:
        return load_fp8(L, module, &s, rows, cols, w);
    case QUANT_KIND_UNSUPPORTED:
        break;
    }
    char sd[160];
    return model_load_fail(L, "module '%s': quantization scheme %s is not supported", module,
                           quant_scheme_str(&s, sd, sizeof(sd)));
}

// ---- layers ----

static int load_attn(struct model_loader *L, const char *pfx, struct attn_w *a)
{
    const struct model_config *c = L->c;
    int64_t H = c->hidden_size, D = c->head_dim;
    int64_t qrows = (int64_t)c->n_heads * D * (c->attn_output_gate ? 2 : 1);
    int64_t kv = (int64_t)c->n_kv_heads * D;
    char n[512];
    int rc;
    snprintf(n, sizeof(n), "%sself_attn.q_proj", pfx);
    if ((rc = load_linear(L, n, qrows, H, &a->q)) < 0)
        return rc;
    snprintf(n, sizeof(n), "%sself_attn.k_proj", pfx);
    if ((rc = load_linear(L, n, kv, H, &a->k)) < 0)
        return rc;
    snprintf(n, sizeof(n), "%sself_attn.v_proj", pfx);
    if ((rc = load_linear(L, n, kv, H, &a->v)) < 0)
        return rc;
    snprintf(n, sizeof(n), "%sself_attn.o_proj", pfx);
    if ((rc = load_linear(L, n, H, (int64_t)c->n_heads * D, &a->o)) < 0)
        return rc;
    snprintf(n, sizeof(n), "%sself_attn.q_norm.weight", pfx);
    if ((rc = load_vec(L, n, D, &a->q_norm)) < 0)
        return rc;
    snprintf(n, sizeof(n), "%sself_attn.k_norm.weight", pfx);
    return load_vec(L, n, D, &a->k_norm);
}

static int load_conv(struct model_loader *L, const char *name, int64_t C, int64_t K, float **out)
{
    if (L->dummy)
        return model_dummy_vec(L, name, C * K, out);
    const struct st_tensor *t = need(L, name);
    if (!t)
        return ERR_NOTFOUND;
    int64_t d3[3] = {C, 1, K};
    int rc = (t->ndim == 2) ? check_2d(L, t, C, K) : check_shape(L, t, 3, d3);
    if (rc == 0)
        rc = check_float(L, t);
    if (rc == 0)
        *out = to_f32(L, t); /* [C,1,K] and [C,K] have the same element order */
    return rc;
}

static int load_gdn(struct model_loader *L, const char *pfx, struct gdn_w *g)
{
    const struct model_config *c = L->c;
    int64_t H = c->hidden_size, Hv = c->lin_n_v_heads;
    int64_t kd = (int64_t)c->lin_n_k_heads * c->lin_k_head_dim;
    int64_t vd = Hv * c->lin_v_head_dim;
    char n[512];
    int rc;
    struct {
        const char *sfx;
        int64_t rows, cols;
        struct qweight *w;
    } lin[] = {
        {"in_proj_qkv", 2 * kd + vd, H, &g->qkv},
        {"in_proj_z", vd, H, &g->z},
        {"in_proj_b", Hv, H, &g->b},
        {"in_proj_a", Hv, H, &g->a},
        {"out_proj", H, vd, &g->out},
    };
    for (size_t i = 0; i < ARRAY_LEN(lin); i++) {
        snprintf(n, sizeof(n), "%slinear_attn.%s", pfx, lin[i].sfx);
        if ((rc = load_linear(L, n, lin[i].rows, lin[i].cols, lin[i].w)) < 0)
            return rc;
    }
    snprintf(n, sizeof(n), "%slinear_attn.conv1d.weight", pfx);
    if ((rc = load_conv(L, n, 2 * kd + vd, c->lin_conv_kernel, &g->conv)) < 0)
        return rc;
    snprintf(n, sizeof(n), "%slinear_attn.dt_bias", pfx);
    if ((rc = load_vec(L, n, Hv, &g->dt_bias)) < 0)
        return rc;
    snprintf(n, sizeof(n), "%slinear_attn.A_log", pfx);
    if ((rc = load_vec(L, n, Hv, &g->A_log)) < 0)
        return rc;
    snprintf(n, sizeof(n), "%slinear_attn.norm.weight", pfx);
    return load_vec(L, n, c->lin_v_head_dim, &g->norm);
}

static int load_fused_experts(struct model_loader *L, const char *pfx, struct moe_w *e)
{
    const struct model_config *c = L->c;
    int64_t E = c->n_experts, I = c->moe_inter, H = c->hidden_size;
    char n[512];
    snprintf(n, sizeof(n), "%smlp.experts.0.gate_proj", pfx);
    struct quant_scheme s = quant_lookup(L->q, n);
    if (s.kind != QUANT_KIND_NONE && !s.optional && !starts(pfx, "mtp.")) {
        char sd[96];
        return model_load_fail(
            L,
            "module '%smlp.experts': the quantization config declares %s but the "
            "checkpoint stores fused unquantized experts (gate_up_proj)",
            pfx, quant_scheme_str(&s, sd, sizeof(sd)));
    }
    snprintf(n, sizeof(n), "%smlp.experts.gate_up_proj", pfx);
    const struct st_tensor *gu = need(L, n);
    snprintf(n, sizeof(n), "%smlp.experts.down_proj", pfx);
    const struct st_tensor *dn = gu ? need(L, n) : NULL;
    if (!gu || !dn)
        return ERR_NOTFOUND;
    int64_t dgu[3] = {E, 2 * I, H}, ddn[3] = {E, H, I};
    int rc = check_shape(L, gu, 3, dgu);
    if (rc == 0)
        rc = check_shape(L, dn, 3, ddn);
    if (rc == 0)
        rc = check_float(L, gu);
    if (rc == 0)
        rc = check_float(L, dn);
    if (rc < 0)
        return rc;
    for (int64_t x = 0; x < E; x++) {
        set_dense(&e->gate[x], gu, I, H, c);
        set_dense(&e->up[x], gu, I, H, c);
        set_dense(&e->down[x], dn, H, I, c);
        int64_t es = e->gate[x].fmt == QW_F32 ? 4 : 2;
        if (gu->data) {
            e->gate[x].data = (const uint8_t *)gu->data + (x * 2 * I) * H * es;
            e->up[x].data = (const uint8_t *)gu->data + (x * 2 * I + I) * H * es;
        }
        if (dn->data)
            e->down[x].data = (const uint8_t *)dn->data + x * H * I * es;
    }
    return 0;
}

static int load_moe(struct model_loader *L, const char *pfx, struct moe_w *e)
{
    const struct model_config *c = L->c;
    int64_t E = c->n_experts, I = c->moe_inter, H = c->hidden_size, Is = c->shared_inter;
    char n[512];
    int rc;
    snprintf(n, sizeof(n), "%smlp.gate", pfx);
    if ((rc = load_linear(L, n, E, H, &e->router)) < 0)
        return rc;
    e->gate = model_load_own(L, xcalloc((size_t)E, sizeof(struct qweight)));
    e->up = model_load_own(L, xcalloc((size_t)E, sizeof(struct qweight)));
    e->down = model_load_own(L, xcalloc((size_t)E, sizeof(struct qweight)));
    snprintf(n, sizeof(n), "%smlp.experts.gate_up_proj", pfx);
    if (!L->dummy && st_find(L->st, n)) {
        if (!starts(pfx, "mtp."))
            L->p->stats.fused_experts = true;
        rc = load_fused_experts(L, pfx, e);
    } else {
        for (int64_t x = 0; x < E && rc == 0; x++) {
            snprintf(n, sizeof(n), "%smlp.experts.%lld.gate_proj", pfx, (long long)x);
            rc = load_linear(L, n, I, H, &e->gate[x]);
            snprintf(n, sizeof(n), "%smlp.experts.%lld.up_proj", pfx, (long long)x);
            if (rc == 0)
                rc = load_linear(L, n, I, H, &e->up[x]);
            snprintf(n, sizeof(n), "%smlp.experts.%lld.down_proj", pfx, (long long)x);
            if (rc == 0)
                rc = load_linear(L, n, H, I, &e->down[x]);
        }
    }
    if (rc < 0)
        return rc;
    struct {
        const char *sfx;
        int64_t rows, cols;
        struct qweight *w;
    } sh[] = {
        {"mlp.shared_expert.gate_proj", Is, H, &e->sh_gate},
        {"mlp.shared_expert.up_proj", Is, H, &e->sh_up},
        {"mlp.shared_expert.down_proj", H, Is, &e->sh_down},
        {"mlp.shared_expert_gate", 1, H, &e->sh_expert_gate},
    };
    for (size_t i = 0; i < ARRAY_LEN(sh); i++) {
        snprintf(n, sizeof(n), "%s%s", pfx, sh[i].sfx);
        if ((rc = load_linear(L, n, sh[i].rows, sh[i].cols, sh[i].w)) < 0)
            return rc;
    }
    return 0;
}

static int load_layer(struct model_loader *L, const char *pfx, enum layer_type type,
                      struct layer_w *lw)
{
    int64_t H = L->c->hidden_size;
    char n[512];
    int rc;
    lw->type = type;
    snprintf(n, sizeof(n), "%sinput_layernorm.weight", pfx);
    if ((rc = load_vec(L, n, H, &lw->in_norm)) < 0)
        return rc;
    snprintf(n, sizeof(n), "%spost_attention_layernorm.weight", pfx);
    if ((rc = load_vec(L, n, H, &lw->post_norm)) < 0)
        return rc;
    rc = type == LAYER_FULL_ATTN ? load_attn(L, pfx, &lw->attn) : load_gdn(L, pfx, &lw->gdn);
    if (rc < 0)
        return rc;
    return load_moe(L, pfx, &lw->moe);
}

static int load_mtp(struct model_loader *L)
{
    struct model *m = L->m;
    const struct model_config *c = L->c;
    int64_t H = c->hidden_size;
    int rc;
    if (c->mtp_n_layers > 1)
        return model_load_fail(
            L, "config.json: mtp_num_hidden_layers = %d; only 1 MTP layer is supported",
            c->mtp_n_layers);
    if ((rc = load_linear(L, "mtp.fc", H, 2 * H, &m->mtp.fc)) < 0)
        return rc;
    if ((rc = load_vec(L, "mtp.pre_fc_norm_embedding.weight", H, &m->mtp.pre_fc_norm_embedding)) <
        0)
        return rc;
    if ((rc = load_vec(L, "mtp.pre_fc_norm_hidden.weight", H, &m->mtp.pre_fc_norm_hidden)) < 0)
        return rc;
    if ((rc = load_vec(L, "mtp.norm.weight", H, &m->mtp.norm)) < 0)
        return rc;
    if ((rc = load_layer(L, "mtp.layers.0.", LAYER_FULL_ATTN, &m->mtp.layer)) < 0)
        return rc;
    m->has_mtp = true;
    return 0;
}

static int detect_prefix(struct model_loader *L, char *prefix, size_t len)
{
    static const char *const cands[] = {"model.language_model.", "model.", "language_model.model."};
    char n[128];
    if (L->dummy) {
        snprintf(prefix, len, "%s", cands[0]);
        return 0;
    }
    for (size_t i = 0; i < ARRAY_LEN(cands); i++) {
        snprintf(n, sizeof(n), "%sembed_tokens.weight", cands[i]);
        if (st_find(L->st, n)) {
            snprintf(prefix, len, "%s", cands[i]);
            return 0;
        }
    }
    return model_load_fail(L,
                           "tensor 'model.language_model.embed_tokens.weight' missing (also tried "
                           "'model.embed_tokens.weight'): not a qwen3_5_moe checkpoint?");
}

static int load_all(struct model_loader *L, const struct model_load_opts *o)
{
    struct model *m = L->m;
    const struct model_config *c = L->c;
    int64_t V = c->vocab_size, H = c->hidden_size;
    char pfx[32], n[512];
    int rc = detect_prefix(L, pfx, sizeof(pfx));
    if (rc < 0)
        return rc;
    snprintf(L->p->stats.prefix, sizeof(L->p->stats.prefix), "%s", pfx);
    snprintf(n, sizeof(n), "%sembed_tokens.weight", pfx);
    if ((rc = load_dense(L, n, V, H, &m->embed)) < 0)
        return rc;
    if (L->dummy ? !c->tie_word_embeddings
                 : (st_find(L->st, "lm_head.weight") || !c->tie_word_embeddings)) {
        if (!L->dummy && !st_find(L->st, "lm_head.weight"))
            return model_load_fail(
                L, "tensor 'lm_head.weight' missing (tie_word_embeddings is false)");
        if ((rc = load_linear(L, "lm_head", V, H, &m->lm_head)) < 0)
            return rc;
    } else {
        m->lm_head = m->embed;
    }
    snprintf(n, sizeof(n), "%snorm.weight", pfx);
    if ((rc = load_vec(L, n, H, &m->final_norm)) < 0)
        return rc;
    m->layers = model_load_own(L, xcalloc((size_t)c->n_layers, sizeof(struct layer_w)));
    for (int i = 0; i < c->n_layers; i++) {
        snprintf(n, sizeof(n), "%slayers.%d.", pfx, i);
        if ((rc = load_layer(L, n, c->layer_types[i], &m->layers[i])) < 0)
            return rc;
    }
    bool mtp = L->dummy ? c->mtp_n_layers > 0 : L->p->stats.n_mtp_tensors > 0;
    if (!o->skip_mtp && mtp)
        return load_mtp(L);
    return 0;
}

// ---- public ----

int model_load(struct model **out, const char *dir, const struct model_load_opts *opts, char *err,
               size_t errlen)
{
    struct model_load_opts o = opts ? *opts : (struct model_load_opts){0};
    struct model *m = xcalloc(1, sizeof(*m));
    struct model_load_priv *p = xcalloc(1, sizeof(*p));
    m->priv = p;
    struct model_loader L = {.m = m,
                             .p = p,
                             .c = &m->cfg,
                             .dummy = o.dummy,
                             .header_only = o.header_only,
                             .seed = o.dummy_seed,
                             .dummy_device = o.dummy && o.dummy_device && !o.header_only,
                             .err = err,
                             .errlen = errlen};
    *out = NULL;
    int rc = config_load(&m->cfg, dir, err, errlen);
    if (rc < 0)
        goto fail_model;
    p->q = quant_create_dir(dir, err, errlen);
    if (!p->q) {
        rc = ERR_FORMAT;
        goto fail_model;
    }
    L.q = p->q;
    if (!o.dummy) {
        p->st = st_open(dir, o.header_only ? ST_OPEN_HEADER_ONLY : 0, err, errlen);
        if (!p->st) {
            rc = ERR_FORMAT;
            goto fail_model;
        }
        L.st = p->st;
        count_groups(&L);
    } else {
        p->stats.shapes_known = true;
    }
    if (o.dummy && !o.header_only)
        L.tp = tpool_create(0); // NULL: the fill runs on this thread
    m->device_only = L.dummy_device;
    rc = load_all(&L, &o);
    tpool_destroy(L.tp);
    if (rc < 0)
        goto fail_model;
    *out = m;
    return 0;
fail_model:
    model_destroy(m);
    return rc;
}

void model_destroy(struct model *m)
{
    if (!m)
        return;
    struct model_load_priv *p = m->priv;
    if (p) {
        for (int64_t i = 0; i < p->n_owned; i++)
            free(p->owned[i]);
        free(p->owned);
        st_close(p->st);
        quant_destroy(p->q);
        free(p);
    }
    free(m);
}

const struct model_load_stats *model_load_stats(const struct model *m)
{
    return &((const struct model_load_priv *)m->priv)->stats;
}

const struct st_set *model_load_tensors(const struct model *m)
{
    return ((const struct model_load_priv *)m->priv)->st;
}

const struct quant *model_load_quant(const struct model *m)
{
    return ((const struct model_load_priv *)m->priv)->q;
}

void model_load_log(const struct model *m, const char *dir)
{
    const struct model_load_stats *s = model_load_stats(m);
    char groups[640];
    size_t o = 0;
    groups[0] = 0;
    for (int g = 0; g < MODEL_GROUP_COUNT && o < sizeof(groups); g++)
        o += (size_t)snprintf(groups + o, sizeof(groups) - o, "%sbytes_%s=%lld", g ? " " : "",
                              model_group_name((enum model_group)g), (long long)s->group_bytes[g]);
    LOG_INFO("model_loaded",
             "dir=%s tensors=%lld skipped=%lld bytes=%lld gib=%.3f quant=%s "
             "experts=%s mtp_declared=%d mtp_tensors=%lld mtp_loaded=%d %s",
             dir, (long long)s->n_tensors, (long long)s->n_skipped, (long long)s->total_bytes,
             (double)s->total_bytes / (1024.0 * 1024.0 * 1024.0),
             quant_method_name(quant_get_method(model_load_quant(m))),
             s->fused_experts ? "fused" : "per-expert", m->cfg.mtp_n_layers,
             (long long)s->n_mtp_tensors, m->has_mtp ? 1 : 0, groups);
    if (m->cfg.mtp_n_layers > 0 && s->n_mtp_tensors == 0)
        LOG_WARN("mtp_missing",
                 "declared=%d msg=\"config declares %d MTP layer(s) but the "
                 "checkpoint has no mtp.* tensors: speculative decoding is unavailable\"",
                 m->cfg.mtp_n_layers, m->cfg.mtp_n_layers);
}

void model_for_each_linear(struct model *m, void (*cb)(struct qweight *w, void *ctx), void *ctx)
{
    cb(&m->lm_head, ctx);
    for (int l = 0; m->layers && l < m->cfg.n_layers; l++) {
        struct layer_w *L = &m->layers[l];
        struct qweight *ws[] = { &L->attn.q, &L->attn.k, &L->attn.v, &L->attn.o, &L->gdn.qkv,
                                 &L->gdn.z, &L->gdn.b, &L->gdn.a, &L->gdn.out, &L->moe.router,
                                 &L->moe.sh_gate, &L->moe.sh_up, &L->moe.sh_down,
                                 &L->moe.sh_expert_gate };
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            cb(ws[i], ctx);
        for (int e = 0; L->moe.gate && e < m->cfg.n_experts; e++) {
            cb(&L->moe.gate[e], ctx);
            cb(&L->moe.up[e], ctx);
            cb(&L->moe.down[e], ctx);
        }
    }
}
