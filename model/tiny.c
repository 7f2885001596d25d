/* tiny: random qwen3_5_moe checkpoint generator (see tiny.h). Tensors go through st_write; the
 * quantized formats go through pack. The JSON side (config.json, generation_config.json,
 * quantization configs, tokenizer sizing) is in tiny_json.c. */
#include "model/tiny.h"

#include "common/err.h"
#include "common/xalloc.h"
#include "model/pack.h"
#include "model/st_write.h"
#include "tiny_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void tiny_opts_default(struct tiny_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->seed = 1;
    o->format = TINY_FMT_BF16;
    o->vocab = 512;
    o->mtp = true;
    snprintf(o->layers, sizeof(o->layers), "LLLF");
    o->hidden = 64;
    o->n_heads = 4;
    o->n_kv_heads = 2;
    o->head_dim = 32;
    o->lin_k_heads = 2;
    o->lin_v_heads = 4;
    o->lin_k_dim = 16;
    o->lin_v_dim = 16;
    o->conv_kernel = 4;
    o->experts = 8;
    o->top_k = 2;
    o->moe_inter = 32;
    o->shared_inter = 32;
    o->rope_theta = 1e7f;
    o->partial_rotary = 0.25f;
    o->rms_eps = 1e-6f;
    o->std = 0.05f;
    o->fp8_block = 128;
    o->fp8_scale = PACK_FP8_CHANNEL;
    o->act_amax = 8.0f;
}

static const char *const fmt_names[] = {
    [TINY_FMT_BF16] = "bf16",
    [TINY_FMT_F32] = "f32",
    [TINY_FMT_NVFP4A16] = "nvfp4a16",
    [TINY_FMT_NVFP4] = "nvfp4",
    [TINY_FMT_MODELOPT_NVFP4] = "modelopt-nvfp4",
    [TINY_FMT_FP8] = "fp8",
    [TINY_FMT_FP8_BLOCK] = "fp8-block",
};

int tiny_format_parse(const char *s, enum tiny_format *f)
{
    for (size_t i = 0; i < ARRAY_LEN(fmt_names); i++)
        if (strcmp(s, fmt_names[i]) == 0) {
            *f = (enum tiny_format)i;
            return 0;
        }
    return ERR_INVAL;
}

const char *tiny_format_name(enum tiny_format f)
{
    return (unsigned)f < ARRAY_LEN(fmt_names) ? fmt_names[f] : "?";
}

bool tiny_is_nvfp4(enum tiny_format f)
{
    return f == TINY_FMT_NVFP4A16 || f == TINY_FMT_NVFP4 || f == TINY_FMT_MODELOPT_NVFP4;
}

bool tiny_is_quantized(enum tiny_format f)
{
    return f != TINY_FMT_BF16 && f != TINY_FMT_F32;
}

int tiny_opts_check(const struct tiny_opts *o)
{
    int n = (int)strlen(o->layers);
    if (n < 1 || n > MODEL_MAX_LAYERS)
        return ERR_INVAL;
    for (int i = 0; i < n; i++)
        if (o->layers[i] != 'L' && o->layers[i] != 'F')
            return ERR_INVAL;
    if (o->hidden < 1 || o->n_heads < 1 || o->n_kv_heads < 1 || o->head_dim < 2 ||
        o->n_heads % o->n_kv_heads != 0 || o->lin_k_heads < 1 || o->lin_v_heads < 1 ||
        o->lin_v_heads % o->lin_k_heads != 0 || o->lin_k_dim < 1 || o->lin_v_dim < 1 ||
        o->conv_kernel < 1 || o->experts < 1 || o->top_k < 1 || o->top_k > o->experts ||
        o->moe_inter < 1 || o->shared_inter < 1 || !(o->rope_theta > 0) ||
        !(o->partial_rotary > 0 && o->partial_rotary <= 1) || !(o->std > 0) || !(o->act_amax > 0) ||
        o->fp8_block < 1)
        return ERR_INVAL;
    int rot = (int)((float)o->head_dim * o->partial_rotary);
    if (rot < 2 || rot % 2 != 0)
        return ERR_INVAL;
    if (!o->tokenizer && o->vocab < 2)
        return ERR_INVAL;
    if (tiny_is_nvfp4(o->format)) {
        /* quantized in-features: H (q/k/v, gate/up), Hq*D (o_proj), I and Is (down) */
        int g = PACK_NVFP4_GROUP;
        if (o->hidden % g || (o->n_heads * o->head_dim) % g || o->moe_inter % g ||
            o->shared_inter % g)
            return ERR_INVAL;
    }
    return 0;
}

// ---- random numbers: splitmix64 keyed by (seed, tensor key) ----

#define TWO_PI 6.283185307179586

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t key_state(uint64_t seed, const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    uint64_t s = seed ^ h;
    (void)splitmix64(&s);
    return s;
}

static double unit_open(uint64_t *s)
{
    return ((double)(splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

void tiny_rand_normal(uint64_t seed, const char *key, int64_t n, float mean, float std, float *out)
{
    uint64_t s = key_state(seed, key);
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = unit_open(&s), u2 = unit_open(&s);
        double r = sqrt(-2.0 * log(u1));
        out[i] = (float)(mean + std * r * cos(TWO_PI * u2));
        if (i + 1 < n)
            out[i + 1] = (float)(mean + std * r * sin(TWO_PI * u2));
    }
}

static void rand_uniform(uint64_t seed, const char *key, int64_t n, float lo, float hi, float *out)
{
    uint64_t s = key_state(seed, key);
    for (int64_t i = 0; i < n; i++)
        out[i] = (float)(lo + (hi - lo) * unit_open(&s));
}

// ---- emitting tensors ----

struct gen {
    const struct tiny_opts *o;
    struct st_write *st;
    const char *plain; // dtype of unquantized tensors: "F32" or "BF16"
    int rc;            // first error
};

static void put(struct gen *g, const char *name, const char *dtype, int ndim, const int64_t *shape,
                const void *data, size_t nbytes)
{
    int rc = st_write_add(g->st, name, dtype, ndim, shape, data, nbytes);
    if (rc < 0 && g->rc == 0)
        g->rc = rc;
}

static void put_f32(struct gen *g, const char *name, const char *dtype, int ndim,
                    const int64_t *shape, const float *x)
{
    int rc = st_write_add_f32(g->st, name, dtype, ndim, shape, x);
    if (rc < 0 && g->rc == 0)
        g->rc = rc;
}

/* A plain vector/tensor drawn from N(mean, std) (key = name without ".weight"). */
static void put_vec(struct gen *g, const char *key, const char *name, const char *dtype, int ndim,
                    const int64_t *shape, float mean, float std)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *x = xmalloc((size_t)n * sizeof(float));
    tiny_rand_normal(g->o->seed, key, n, mean, std, x);
    put_f32(g, name, dtype, ndim, shape, x);
    free(x);
}

/* Canonical key: strip the "model.language_model." prefix so keys are layout independent. */
static const char *key_of(const char *module)
{
    const char *p = "model.language_model.";
    return strncmp(module, p, strlen(p)) == 0 ? module + strlen(p) : module;
}

static float *gen_linear(struct gen *g, const char *module, int64_t rows, int64_t cols)
{
    float *w = xmalloc((size_t)(rows * cols) * sizeof(float));
    tiny_rand_normal(g->o->seed, key_of(module), rows * cols, 0.0f, g->o->std, w);
    return w;
}

/* Write one quantized Linear `module` (rows, cols). nvfp4_gs: the (possibly fused-group shared)
 * compressed-tensors global scale. */
static void put_quant(struct gen *g, const char *module, int64_t rows, int64_t cols, const float *w,
                      float nvfp4_gs)
{
    const struct tiny_opts *o = g->o;
    char name[640];
    if (tiny_is_nvfp4(o->format)) {
        uint8_t *packed = xmalloc((size_t)(rows * cols / 2));
        uint8_t *bs = xmalloc((size_t)(rows * cols / PACK_NVFP4_GROUP));
        int rc = pack_nvfp4(w, rows, cols, nvfp4_gs, packed, bs);
        if (rc < 0 && g->rc == 0)
            g->rc = rc;
        bool mo = o->format == TINY_FMT_MODELOPT_NVFP4;
        int64_t sp[2] = {rows, cols / 2}, ss[2] = {rows, cols / PACK_NVFP4_GROUP}, one = 1;
        snprintf(name, sizeof(name), "%s.%s", module, mo ? "weight" : "weight_packed");
        put(g, name, "U8", 2, sp, packed, (size_t)(rows * cols / 2));
        snprintf(name, sizeof(name), "%s.weight_scale", module);
        put(g, name, "F8_E4M3", 2, ss, bs, (size_t)(rows * cols / PACK_NVFP4_GROUP));
        float g_in = pack_nvfp4_global(o->act_amax);
        if (mo) {
            float ws2 = 1.0f / nvfp4_gs, is = 1.0f / g_in;
            snprintf(name, sizeof(name), "%s.weight_scale_2", module);
            put(g, name, "F32", 0, NULL, &ws2, 4);
            snprintf(name, sizeof(name), "%s.input_scale", module);
            put(g, name, "F32", 0, NULL, &is, 4);
        } else {
            snprintf(name, sizeof(name), "%s.weight_global_scale", module);
            put(g, name, "F32", 1, &one, &nvfp4_gs, 4);
            if (o->format == TINY_FMT_NVFP4) {
                snprintf(name, sizeof(name), "%s.input_global_scale", module);
                put(g, name, "F32", 1, &one, &g_in, 4);
            }
        }
        free(packed);
        free(bs);
        return;
    }
    /* FP8 */
    bool block = o->format == TINY_FMT_FP8_BLOCK;
    enum pack_fp8_scale kind = block ? PACK_FP8_BLOCK : o->fp8_scale;
    int64_t ns = pack_fp8_n_scales(kind, rows, cols, o->fp8_block);
    uint8_t *q = xmalloc((size_t)(rows * cols));
    float *sc = xmalloc((size_t)ns * sizeof(float));
    int rc = pack_fp8(w, rows, cols, kind, o->fp8_block, q, sc);
    if (rc < 0 && g->rc == 0)
        g->rc = rc;
    int64_t sw[2] = {rows, cols};
    snprintf(name, sizeof(name), "%s.weight", module);
    put(g, name, "F8_E4M3", 2, sw, q, (size_t)(rows * cols));
    if (block) {
        int64_t sb[2] = {CEIL_DIV(rows, o->fp8_block), CEIL_DIV(cols, o->fp8_block)};
        snprintf(name, sizeof(name), "%s.weight_scale_inv", module);
        put(g, name, "F32", 2, sb, sc, (size_t)ns * 4);
    } else if (kind == PACK_FP8_CHANNEL) {
        int64_t sc2[2] = {rows, 1};
        snprintf(name, sizeof(name), "%s.weight_scale", module);
        put(g, name, "F32", 2, sc2, sc, (size_t)ns * 4);
    } else {
        int64_t one = 1;
        snprintf(name, sizeof(name), "%s.weight_scale", module);
        put(g, name, "F32", 1, &one, sc, 4);
    }
    free(q);
    free(sc);
}

/* A group of Linears sharing the input (q/k/v, gate/up) that a server may fuse: NVFP4 global
 * scales are shared across the group (as llm-compressor and ModelOpt export them). */
static void put_linear_group(struct gen *g, const char *prefix, const char *const *subs,
                             const int64_t *rows, int n, int64_t cols, bool quant)
{
    float *w[4];
    float amax = 0.0f;
    char module[512];
    for (int i = 0; i < n; i++) {
        snprintf(module, sizeof(module), "%s%s", prefix, subs[i]);
        w[i] = gen_linear(g, module, rows[i], cols);
        amax = fmaxf(amax, pack_amax(w[i], rows[i] * cols));
    }
    float gs = pack_nvfp4_global(amax);
    for (int i = 0; i < n; i++) {
        snprintf(module, sizeof(module), "%s%s", prefix, subs[i]);
        if (quant) {
            put_quant(g, module, rows[i], cols, w[i], gs);
        } else {
            char name[520];
            int64_t sh[2] = {rows[i], cols};
            snprintf(name, sizeof(name), "%s.weight", module);
            put_f32(g, name, g->plain, 2, sh, w[i]);
        }
        free(w[i]);
    }
}

static void put_linear(struct gen *g, const char *module, int64_t rows, int64_t cols, bool quant)
{
    const char *sub = "";
    put_linear_group(g, module, &sub, &rows, 1, cols, quant);
}

// ---- model parts ----

static void put_moe(struct gen *g, const char *P, bool quant)
{
    const struct tiny_opts *o = g->o;
    int64_t H = o->hidden, I = o->moe_inter, Is = o->shared_inter, E = o->experts;
    char pre[512], name[600];
    snprintf(pre, sizeof(pre), "%smlp.gate", P);
    put_linear(g, pre, E, H, false);
    if (quant) {
        /* per-expert 2-D modules, as llm-compressor / ModelOpt export them */
        static const char *const gu[2] = {"gate_proj", "up_proj"};
        int64_t rows[2] = {I, I};
        for (int64_t e = 0; e < E; e++) {
            snprintf(pre, sizeof(pre), "%smlp.experts.%lld.", P, (long long)e);
            put_linear_group(g, pre, gu, rows, 2, H, true);
            snprintf(name, sizeof(name), "%sdown_proj", pre);
            put_linear(g, name, H, I, true);
        }
    } else {
        /* fused 3-D: gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I] */
        float *gup = xmalloc((size_t)(E * 2 * I * H) * sizeof(float));
        float *dn = xmalloc((size_t)(E * H * I) * sizeof(float));
        for (int64_t e = 0; e < E; e++) {
            snprintf(pre, sizeof(pre), "%smlp.experts.%lld.gate_proj", P, (long long)e);
            float *w = gen_linear(g, pre, I, H);
            memcpy(gup + e * 2 * I * H, w, (size_t)(I * H) * sizeof(float));
            free(w);
            snprintf(pre, sizeof(pre), "%smlp.experts.%lld.up_proj", P, (long long)e);
            w = gen_linear(g, pre, I, H);
            memcpy(gup + e * 2 * I * H + I * H, w, (size_t)(I * H) * sizeof(float));
            free(w);
            snprintf(pre, sizeof(pre), "%smlp.experts.%lld.down_proj", P, (long long)e);
            w = gen_linear(g, pre, H, I);
            memcpy(dn + e * H * I, w, (size_t)(H * I) * sizeof(float));
            free(w);
        }
        int64_t s1[3] = {E, 2 * I, H}, s2[3] = {E, H, I};
        snprintf(name, sizeof(name), "%smlp.experts.gate_up_proj", P);
        put_f32(g, name, g->plain, 3, s1, gup);
        snprintf(name, sizeof(name), "%smlp.experts.down_proj", P);
        put_f32(g, name, g->plain, 3, s2, dn);
        free(gup);
        free(dn);
    }
    static const char *const sgu[2] = {"gate_proj", "up_proj"};
    int64_t srows[2] = {Is, Is};
    snprintf(pre, sizeof(pre), "%smlp.shared_expert.", P);
    put_linear_group(g, pre, sgu, srows, 2, H, quant);
    snprintf(name, sizeof(name), "%sdown_proj", pre);
    put_linear(g, name, H, Is, quant);
    snprintf(pre, sizeof(pre), "%smlp.shared_expert_gate", P);
    put_linear(g, pre, 1, H, false);
}

static void put_norm(struct gen *g, const char *module, int64_t n, float mean, float std)
{
    char name[600];
    int len = snprintf(name, sizeof(name), "%s.weight", module);
    if (len < 0 || (size_t)len >= sizeof(name)) {
        if (g->rc == 0)
            g->rc = ERR_INVAL;
        return;
    }
    put_vec(g, key_of(module), name, g->plain, 1, &n, mean, std);
}

static void put_attn(struct gen *g, const char *P, bool quant)
{
    const struct tiny_opts *o = g->o;
    int64_t H = o->hidden, D = o->head_dim;
    static const char *const qkv[3] = {"q_proj", "k_proj", "v_proj"};
    int64_t rows[3] = {o->n_heads * D * 2, o->n_kv_heads * D, o->n_kv_heads * D};
    char pre[512];
    snprintf(pre, sizeof(pre), "%sself_attn.", P);
    put_linear_group(g, pre, qkv, rows, 3, H, quant);
    char m[600];
    snprintf(m, sizeof(m), "%so_proj", pre);
    put_linear(g, m, H, o->n_heads * D, quant);
    snprintf(m, sizeof(m), "%sq_norm", pre);
    put_norm(g, m, D, 0.0f, 0.1f);
    snprintf(m, sizeof(m), "%sk_norm", pre);
    put_norm(g, m, D, 0.0f, 0.1f);
}

static void put_gdn(struct gen *g, const char *P)
{
    const struct tiny_opts *o = g->o;
    int64_t H = o->hidden, Hv = o->lin_v_heads, kd = (int64_t)o->lin_k_heads * o->lin_k_dim;
    int64_t vd = Hv * o->lin_v_dim, conv_dim = 2 * kd + vd;
    char m[600], name[700];
    snprintf(m, sizeof(m), "%slinear_attn.in_proj_qkv", P);
    put_linear(g, m, conv_dim, H, false);
    snprintf(m, sizeof(m), "%slinear_attn.in_proj_z", P);
    put_linear(g, m, vd, H, false);
    snprintf(m, sizeof(m), "%slinear_attn.in_proj_b", P);
    put_linear(g, m, Hv, H, false);
    snprintf(m, sizeof(m), "%slinear_attn.in_proj_a", P);
    put_linear(g, m, Hv, H, false);
    snprintf(m, sizeof(m), "%slinear_attn.out_proj", P);
    put_linear(g, m, H, vd, false);
    int64_t cs[3] = {conv_dim, 1, o->conv_kernel};
    snprintf(m, sizeof(m), "%slinear_attn.conv1d", P);
    snprintf(name, sizeof(name), "%s.weight", m);
    put_vec(g, key_of(m), name, g->plain, 3, cs, 0.0f, 0.3f);
    snprintf(name, sizeof(name), "%slinear_attn.dt_bias", P);
    put_vec(g, key_of(name), name, g->plain, 1, &Hv, 0.5f, 0.5f);
    /* A_log = log(U(1, 16)), F32 on disk like the official checkpoints */
    float *a = xmalloc((size_t)Hv * sizeof(float));
    snprintf(name, sizeof(name), "%slinear_attn.A_log", P);
    rand_uniform(o->seed, key_of(name), Hv, 1.0f, 16.0f, a);
    for (int64_t i = 0; i < Hv; i++)
        a[i] = logf(a[i]);
    put_f32(g, name, "F32", 1, &Hv, a);
    free(a);
    snprintf(m, sizeof(m), "%slinear_attn.norm", P);
    put_norm(g, m, o->lin_v_dim, 1.0f, 0.1f); /* plain-w convention: around 1 */
}

static void put_layer(struct gen *g, const char *P, char type, bool quant)
{
    char m[600];
    snprintf(m, sizeof(m), "%sinput_layernorm", P);
    put_norm(g, m, g->o->hidden, 0.0f, 0.1f);
    snprintf(m, sizeof(m), "%spost_attention_layernorm", P);
    put_norm(g, m, g->o->hidden, 0.0f, 0.1f);
    if (type == 'F')
        put_attn(g, P, quant);
    else
        put_gdn(g, P);
    put_moe(g, P, quant);
}

static void put_model(struct gen *g, int vocab)
{
    const struct tiny_opts *o = g->o;
    bool quant = tiny_is_quantized(o->format);
    int64_t H = o->hidden, V = vocab;
    int64_t se[2] = {V, H};
    put_vec(g, "embed_tokens", "model.language_model.embed_tokens.weight", g->plain, 2, se, 0.0f,
            0.5f);
    put_norm(g, "model.language_model.norm", H, 0.0f, 0.1f);
    put_vec(g, "lm_head", "lm_head.weight", g->plain, 2, se, 0.0f, 0.1f);
    char P[128];
    int n = (int)strlen(o->layers);
    for (int i = 0; i < n && g->rc == 0; i++) {
        snprintf(P, sizeof(P), "model.language_model.layers.%d.", i);
        put_layer(g, P, o->layers[i], quant);
    }
    if (!o->mtp)
        return;
    /* the MTP head stays unquantized with fused experts in every format */
    put_linear(g, "mtp.fc", H, 2 * H, false);
    put_norm(g, "mtp.pre_fc_norm_embedding", H, 0.0f, 0.1f);
    put_norm(g, "mtp.pre_fc_norm_hidden", H, 0.0f, 0.1f);
    put_norm(g, "mtp.norm", H, 0.0f, 0.1f);
    put_layer(g, "mtp.layers.0.", 'F', false);
}

static int mkdir_p(const char *dir)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int tiny_write(const struct tiny_opts *o, const char *outdir)
{
    int rc = tiny_opts_check(o);
    if (rc < 0)
        return rc;
    struct tiny_vocab tv;
    rc = tiny_vocab_read(o, &tv);
    if (rc < 0)
        return rc;
    rc = mkdir_p(outdir);
    if (rc < 0)
        return rc;
    struct gen g = {
        .o = o,
        .st = st_write_create(),
        .plain = o->format == TINY_FMT_F32 ? "F32" : "BF16",
        .rc = 0,
    };
    put_model(&g, tv.vocab_size);
    rc = g.rc;
    if (rc == 0)
        rc = st_write_save(g.st, outdir, o->shard_bytes);
    st_write_destroy(g.st);
    if (rc == 0)
        rc = tiny_json_write(o, &tv, outdir);
    if (rc == 0 && o->tokenizer)
        rc = tiny_copy_tokenizer(o->tokenizer, outdir);
    return rc;
}
