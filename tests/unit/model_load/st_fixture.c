/* st_fixture: see st_fixture.h. */
#include "st_fixture.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct stf_t {
    char name[256];
    char dtype[16];
    int ndim;
    int64_t shape[8];
    size_t off, n;
};

struct stf {
    struct stf_t *t;
    int n, cap;
    unsigned char *data;
    size_t len, dcap;
};

struct stf *stf_create(void)
{
    return calloc(1, sizeof(struct stf));
}

void stf_free(struct stf *f)
{
    if (!f)
        return;
    free(f->t);
    free(f->data);
    free(f);
}

void stf_add(struct stf *f, const char *name, const char *dtype, int ndim, const int64_t *shape,
             const void *data, size_t nbytes)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 64;
        f->t = realloc(f->t, (size_t)f->cap * sizeof(*f->t));
    }
    struct stf_t *t = &f->t[f->n++];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    snprintf(t->dtype, sizeof(t->dtype), "%s", dtype);
    t->ndim = ndim;
    if (ndim > 0)
        memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
    while (f->len + nbytes > f->dcap) {
        f->dcap = f->dcap ? f->dcap * 2 : 4096;
        f->data = realloc(f->data, f->dcap);
    }
    if (data)
        memcpy(f->data + f->len, data, nbytes);
    else
        memset(f->data + f->len, 0, nbytes);
    t->off = f->len;
    t->n = nbytes;
    f->len += nbytes;
}

int stf_write_raw(const char *path, uint64_t hlen, const char *header, const void *data,
                  size_t nbytes)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    unsigned char lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (unsigned char)(hlen >> (8 * i));
    fwrite(lb, 1, 8, fp);
    fwrite(header, 1, strlen(header), fp);
    if (nbytes)
        fwrite(data, 1, nbytes, fp);
    return fclose(fp) == 0 ? 0 : -1;
}

int stf_write(const struct stf *f, const char *path)
{
    cJSON *h = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(h, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    for (int i = 0; i < f->n; i++) {
        const struct stf_t *t = &f->t[i];
        cJSON *e = cJSON_AddObjectToObject(h, t->name);
        cJSON_AddStringToObject(e, "dtype", t->dtype);
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
        cJSON *off = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)t->off));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(t->off + t->n)));
    }
    char *s = cJSON_PrintUnformatted(h);
    size_t hl = strlen(s);
    size_t pad = (8 - hl % 8) % 8;
    char *hp = malloc(hl + pad + 1);
    memcpy(hp, s, hl);
    memset(hp + hl, ' ', pad);
    hp[hl + pad] = 0;
    int rc = stf_write_raw(path, hl + pad, hp, f->data, f->len);
    free(hp);
    cJSON_free(s);
    cJSON_Delete(h);
    return rc;
}

int stf_write_text(const char *dir, const char *name, const char *text)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *fp = fopen(p, "wb");
    if (!fp)
        return -1;
    fputs(text, fp);
    return fclose(fp) == 0 ? 0 : -1;
}

int stf_mkdtemp(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/tern_ml_XXXXXX");
    return mkdtemp(buf) ? 0 : -1;
}

void stf_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    char p[1024];
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

// ---- tiny checkpoint ----

enum {
    T_H = 32,
    T_V = 64,
    T_HQ = 2,
    T_HKV = 1,
    T_D = 16,
    T_HK = 2,
    T_HV = 4,
    T_DK = 8,
    T_DV = 8,
    T_KC = 4,
    T_E = 4,
    T_I = 16,
    T_IS = 16
};

static uint32_t rng_next(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* BF16 bits of small multiples of 1/64 (exact in bf16, so truncation is exact). */
static void add_bf16(struct stf *f, const char *name, int ndim, const int64_t *shape,
                     uint32_t *seed)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    uint16_t *v = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) {
        float x = (float)((int)(rng_next(seed) % 17) - 8) / 64.0f;
        uint32_t u;
        memcpy(&u, &x, 4);
        v[i] = (uint16_t)(u >> 16);
    }
    stf_add(f, name, "BF16", ndim, shape, v, (size_t)n * 2);
    free(v);
}

static void add_vec(struct stf *f, const char *name, int64_t n, uint32_t *seed)
{
    add_bf16(f, name, 1, &n, seed);
}

static void add_f32_vec(struct stf *f, const char *name, int64_t n, float base)
{
    float *v = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        v[i] = base + (float)i;
    stf_add(f, name, "F32", 1, &n, v, (size_t)n * 4);
    free(v);
}

/* Is this linear module quantized in the FIX_CT_NVFP4A16 checkpoint? (attention projections,
 * routed and shared experts; not router, shared_expert_gate, linear_attn, lm_head, mtp) */
static bool ct_quantized(const char *module)
{
    if (strncmp(module, "mtp.", 4) == 0 || strstr(module, "linear_attn"))
        return false;
    return strstr(module, "self_attn.") || strstr(module, ".experts.") ||
           strstr(module, "shared_expert.");
}

static void add_linear(struct stf *f, const struct fixture_ckpt *o, const char *module,
                       int64_t rows, int64_t cols, uint32_t *seed)
{
    char n[512];
    int64_t sh[2] = {rows, cols};
    bool quant = (o->kind == FIX_CT_NVFP4A16) && ct_quantized(module);
    if (!quant) {
        snprintf(n, sizeof(n), "%s.weight", module);
        add_bf16(f, n, 2, sh, seed);
        return;
    }
    /* packed e2m1: byte j of row r = deterministic pattern */
    size_t np = (size_t)(rows * cols / 2), ns = (size_t)(rows * cols / 16);
    unsigned char *p = malloc(np), *s = malloc(ns);
    for (size_t i = 0; i < np; i++)
        p[i] = (unsigned char)(rng_next(seed) & 0xff);
    for (size_t i = 0; i < ns; i++)
        s[i] = (unsigned char)(0x30 + rng_next(seed) % 16); /* e4m3 0.5 .. 1.875 */
    int64_t ps[2] = {rows, cols / 2}, ss[2] = {rows, cols / 16}, one = 1;
    snprintf(n, sizeof(n), "%s.weight_packed", module);
    stf_add(f, n, "U8", 2, ps, p, np);
    snprintf(n, sizeof(n), "%s.weight_scale", module);
    stf_add(f, n, "F8_E4M3", 2, ss, s, ns);
    float g = 2688.0f;
    snprintf(n, sizeof(n), "%s.weight_global_scale", module);
    stf_add(f, n, "F32", 1, &one, &g, 4);
    free(p);
    free(s);
}

static void add_moe(struct stf *f, const struct fixture_ckpt *o, const char *pfx, bool fused,
                    bool bad_router, uint32_t *seed)
{
    char n[512];
    int64_t rs[2] = {bad_router ? T_E - 1 : T_E, T_H};
    snprintf(n, sizeof(n), "%smlp.gate.weight", pfx);
    add_bf16(f, n, 2, rs, seed);
    if (fused) {
        int64_t gu[3] = {T_E, 2 * T_I, T_H}, dn[3] = {T_E, T_H, T_I};
        snprintf(n, sizeof(n), "%smlp.experts.gate_up_proj", pfx);
        add_bf16(f, n, 3, gu, seed);
        snprintf(n, sizeof(n), "%smlp.experts.down_proj", pfx);
        add_bf16(f, n, 3, dn, seed);
    } else {
        for (int e = 0; e < T_E; e++) {
            snprintf(n, sizeof(n), "%smlp.experts.%d.gate_proj", pfx, e);
            add_linear(f, o, n, T_I, T_H, seed);
            snprintf(n, sizeof(n), "%smlp.experts.%d.up_proj", pfx, e);
            add_linear(f, o, n, T_I, T_H, seed);
            snprintf(n, sizeof(n), "%smlp.experts.%d.down_proj", pfx, e);
            add_linear(f, o, n, T_H, T_I, seed);
        }
    }
    snprintf(n, sizeof(n), "%smlp.shared_expert.gate_proj", pfx);
    add_linear(f, o, n, T_IS, T_H, seed);
    snprintf(n, sizeof(n), "%smlp.shared_expert.up_proj", pfx);
    add_linear(f, o, n, T_IS, T_H, seed);
    snprintf(n, sizeof(n), "%smlp.shared_expert.down_proj", pfx);
    add_linear(f, o, n, T_H, T_IS, seed);
    snprintf(n, sizeof(n), "%smlp.shared_expert_gate", pfx);
    add_linear(f, o, n, 1, T_H, seed);
}

static void add_full_attn(struct stf *f, const struct fixture_ckpt *o, const char *pfx,
                          uint32_t *seed)
{
    char n[512];
    snprintf(n, sizeof(n), "%sself_attn.q_proj", pfx);
    add_linear(f, o, n, T_HQ * T_D * 2, T_H, seed);
    snprintf(n, sizeof(n), "%sself_attn.k_proj", pfx);
    add_linear(f, o, n, T_HKV * T_D, T_H, seed);
    snprintf(n, sizeof(n), "%sself_attn.v_proj", pfx);
    add_linear(f, o, n, T_HKV * T_D, T_H, seed);
    snprintf(n, sizeof(n), "%sself_attn.o_proj", pfx);
    add_linear(f, o, n, T_H, T_HQ * T_D, seed);
    snprintf(n, sizeof(n), "%sself_attn.q_norm.weight", pfx);
    add_vec(f, n, T_D, seed);
    snprintf(n, sizeof(n), "%sself_attn.k_norm.weight", pfx);
    add_vec(f, n, T_D, seed);
}

static void add_gdn(struct stf *f, const struct fixture_ckpt *o, const char *pfx, uint32_t *seed)
{
    char n[512];
    int64_t kd = T_HK * T_DK, vd = T_HV * T_DV, conv[3] = {2 * kd + vd, 1, T_KC};
    snprintf(n, sizeof(n), "%slinear_attn.in_proj_qkv", pfx);
    add_linear(f, o, n, 2 * kd + vd, T_H, seed);
    snprintf(n, sizeof(n), "%slinear_attn.in_proj_z", pfx);
    add_linear(f, o, n, vd, T_H, seed);
    snprintf(n, sizeof(n), "%slinear_attn.in_proj_b", pfx);
    add_linear(f, o, n, T_HV, T_H, seed);
    snprintf(n, sizeof(n), "%slinear_attn.in_proj_a", pfx);
    add_linear(f, o, n, T_HV, T_H, seed);
    snprintf(n, sizeof(n), "%slinear_attn.out_proj", pfx);
    add_linear(f, o, n, T_H, vd, seed);
    snprintf(n, sizeof(n), "%slinear_attn.conv1d.weight", pfx);
    add_bf16(f, n, 3, conv, seed);
    snprintf(n, sizeof(n), "%slinear_attn.dt_bias", pfx);
    add_vec(f, n, T_HV, seed);
    snprintf(n, sizeof(n), "%slinear_attn.A_log", pfx);
    add_f32_vec(f, n, T_HV, 0.25f);
    snprintf(n, sizeof(n), "%slinear_attn.norm.weight", pfx);
    add_vec(f, n, T_DV, seed);
}

static const char FIX_TEXT_CONFIG[] =
    "\"model_type\":\"qwen3_5_moe_text\",\"vocab_size\":64,\"hidden_size\":32,"
    "\"num_hidden_layers\":2,\"layer_types\":[\"linear_attention\",\"full_attention\"],"
    "\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":16,"
    "\"linear_num_key_heads\":2,\"linear_num_value_heads\":4,\"linear_key_head_dim\":8,"
    "\"linear_value_head_dim\":8,\"linear_conv_kernel_dim\":4,\"num_experts\":4,"
    "\"num_experts_per_tok\":2,\"moe_intermediate_size\":16,"
    "\"shared_expert_intermediate_size\":16,\"rms_norm_eps\":1e-6,"
    "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000000,"
    "\"partial_rotary_factor\":0.25},\"mtp_num_hidden_layers\":1,\"eos_token_id\":63,"
    "\"tie_word_embeddings\":false,\"dtype\":\"bfloat16\"";

static const char FIX_CT_QUANT[] =
    ",\"quantization_config\":{\"quant_method\":\"compressed-tensors\","
    "\"format\":\"nvfp4-pack-quantized\",\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],"
    "\"weights\":{\"num_bits\":4,\"type\":\"float\",\"strategy\":\"tensor_group\","
    "\"group_size\":16,\"symmetric\":true,\"dynamic\":false,\"scale_dtype\":\"float8_e4m3fn\"},"
    "\"input_activations\":null,\"format\":\"nvfp4-pack-quantized\"}},"
    "\"ignore\":[\"lm_head\",\"re:.*mlp.gate$\",\"re:.*linear_attn.*\",\"re:.*shared_expert_gate$"
    "\","
    "\"re:mtp.*\"]}";

int fixture_write(const char *dir, const struct fixture_ckpt *o)
{
    char cfg[8192];
    bool quant_cfg = o->kind == FIX_CT_NVFP4A16 || o->kind == FIX_CT_NVFP4A16_BF16_STORED;
    char quant[2048];
    snprintf(quant, sizeof(quant), "%s", quant_cfg ? FIX_CT_QUANT : "");
    const char *mtp_ign = ",\"re:mtp.*\"";
    char *mi = strstr(quant, mtp_ign);
    if (o->ct_mtp_targeted && mi)
        memmove(mi, mi + strlen(mtp_ign), strlen(mi + strlen(mtp_ign)) + 1);
    snprintf(cfg, sizeof(cfg),
             "{\"architectures\":[\"Qwen3_5MoeForConditionalGeneration\"],"
             "\"model_type\":\"qwen3_5_moe\",\"text_config\":{%s}%s}",
             FIX_TEXT_CONFIG, quant);
    if (stf_write_text(dir, "config.json", cfg) < 0)
        return -1;
    if (stf_write_text(dir, "generation_config.json", "{\"eos_token_id\":[63,62]}") < 0)
        return -1;
    const char *P = o->kind == FIX_BF16_PER_EXPERT ? "model." : "model.language_model.";
    bool fused = o->kind == FIX_BF16_FUSED;
    struct stf *f = stf_create();
    uint32_t seed = 12345;
    char n[512], pfx[256];
    int64_t emb[2] = {T_V, T_H};
    snprintf(n, sizeof(n), "%sembed_tokens.weight", P);
    add_bf16(f, n, 2, emb, &seed);
    snprintf(n, sizeof(n), "%snorm.weight", P);
    add_vec(f, n, T_H, &seed);
    add_linear(f, o, "lm_head", T_V, T_H, &seed);
    for (int l = 0; l < 2; l++) {
        snprintf(pfx, sizeof(pfx), "%slayers.%d.", P, l);
        snprintf(n, sizeof(n), "%sinput_layernorm.weight", pfx);
        add_vec(f, n, T_H, &seed);
        if (!(o->drop_tensor && l == 0)) {
            snprintf(n, sizeof(n), "%spost_attention_layernorm.weight", pfx);
            add_vec(f, n, T_H, &seed);
        }
        if (l == 0)
            add_gdn(f, o, pfx, &seed);
        else
            add_full_attn(f, o, pfx, &seed);
        add_moe(f, o, pfx, fused, o->bad_shape && l == 1, &seed);
    }
    if (o->mtp || o->mtp_partial) {
        int64_t fc[2] = {T_H, 2 * T_H};
        if (!o->mtp_partial)
            add_bf16(f, "mtp.fc.weight", 2, fc, &seed);
        add_vec(f, "mtp.pre_fc_norm_embedding.weight", T_H, &seed);
        add_vec(f, "mtp.pre_fc_norm_hidden.weight", T_H, &seed);
        add_vec(f, "mtp.norm.weight", T_H, &seed);
        add_vec(f, "mtp.layers.0.input_layernorm.weight", T_H, &seed);
        add_vec(f, "mtp.layers.0.post_attention_layernorm.weight", T_H, &seed);
        add_full_attn(f, o, "mtp.layers.0.", &seed);
        add_moe(f, o, "mtp.layers.0.", fused, false, &seed);
    }
    if (o->visual) {
        int64_t vs[2] = {8, 8};
        add_bf16(f, "model.visual.patch_embed.proj.weight", 2, vs, &seed);
        add_bf16(f, "model.visual.blocks.0.attn.qkv.weight", 2, vs, &seed);
    }
    snprintf(n, sizeof(n), "%s/model.safetensors", dir);
    int rc = stf_write(f, n);
    stf_free(f);
    return rc;
}
