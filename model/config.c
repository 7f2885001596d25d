/* config: parse config.json (nested text_config of the multimodal checkpoint, or a flat
 * text-only config) and generation_config.json into struct model_config, and validate it.
 * Defaults are the transformers class defaults of MODEL.md §1. */
#include "model/config_load.h"

#include "common/err.h"
#include "common/errbuf.h"
#include "common/file.h"
#include "common/xalloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A field of the text config, falling back to the top level of a nested config. */
static const cJSON *field(const cJSON *tc, const cJSON *root, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(tc, name);
    if (!v && root != tc)
        v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (cJSON_IsNull(v))
        return NULL;
    return v;
}

static int get_i64(const cJSON *tc, const cJSON *root, const char *name, int64_t def, int64_t *out,
                   char *err, size_t errlen)
{
    const cJSON *v = field(tc, root, name);
    if (!v) {
        *out = def;
        return 0;
    }
    /* range first: casting a double outside int64 (1e300, inf, nan) is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= -9223372036854775808.0 &&
                                v->valuedouble < 9223372036854775808.0) ||
        v->valuedouble != (double)(int64_t)v->valuedouble) {
        errbuf_set(err, errlen, "config.json: %s must be an integer", name);
        return ERR_FORMAT;
    }
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int get_int(const cJSON *tc, const cJSON *root, const char *name, int def, int *out,
                   char *err, size_t errlen)
{
    int64_t v;
    int rc = get_i64(tc, root, name, def, &v, err, errlen);
    if (rc < 0)
        return rc;
    if (v < -2147483647 || v > 2147483647) {
        errbuf_set(err, errlen, "config.json: %s = %lld out of range", name, (long long)v);
        return ERR_FORMAT;
    }
    *out = (int)v;
    return 0;
}

static int get_float(const cJSON *obj, const char *name, float def, float *out, const char *where,
                     char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return 0;
    }
    /* finite and within float range: 1e999 parses as inf, and inf * head_dim cast to int is
     * undefined further on */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= -FLT_MAX && v->valuedouble <= FLT_MAX)) {
        errbuf_set(err, errlen, "config.json: %s%s must be a finite number", where, name);
        return ERR_FORMAT;
    }
    *out = (float)v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *tc, const cJSON *root, const char *name, bool def, bool *out,
                    char *err, size_t errlen)
{
    const cJSON *v = field(tc, root, name);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v)) {
        errbuf_set(err, errlen, "config.json: %s must be true or false", name);
        return ERR_FORMAT;
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

static void get_str(const cJSON *tc, const cJSON *root, const char *name, const char *def,
                    char *out, size_t len)
{
    const cJSON *v = field(tc, root, name);
    snprintf(out, len, "%s", cJSON_IsString(v) ? v->valuestring : def);
}

static void add_eos(struct model_config *c, int id)
{
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == id)
            return;
    if (c->n_eos < MODEL_MAX_EOS)
        c->eos_ids[c->n_eos++] = id;
}

static int parse_eos(struct model_config *c, const cJSON *v, const char *file, char *err,
                     size_t errlen)
{
    if (!v || cJSON_IsNull(v))
        return 0;
    if (cJSON_IsNumber(v)) {
        add_eos(c, v->valueint);
        return 0;
    }
    if (cJSON_IsArray(v)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, v)
        {
            if (!cJSON_IsNumber(e)) {
                errbuf_set(err, errlen, "%s: eos_token_id list holds a non-integer", file);
                return ERR_FORMAT;
            }
            add_eos(c, e->valueint);
        }
        return 0;
    }
    errbuf_set(err, errlen, "%s: eos_token_id must be an integer or a list", file);
    return ERR_FORMAT;
}

static int parse_layer_types(struct model_config *c, const cJSON *tc, const cJSON *root, char *err,
                             size_t errlen)
{
    const cJSON *lt = field(tc, root, "layer_types");
    if (!lt) {
        int interval;
        int rc = get_int(tc, root, "full_attention_interval", 4, &interval, err, errlen);
        if (rc < 0)
            return rc;
        if (interval <= 0) {
            errbuf_set(err, errlen, "config.json: full_attention_interval = %d must be positive",
                       interval);
            return ERR_FORMAT;
        }
        for (int i = 0; i < c->n_layers && i < MODEL_MAX_LAYERS; i++)
            c->layer_types[i] = ((i + 1) % interval == 0) ? LAYER_FULL_ATTN : LAYER_LINEAR_ATTN;
        return 0;
    }
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers) {
        errbuf_set(err, errlen,
                   "config.json: layer_types must be a list of num_hidden_layers (%d) names",
                   c->n_layers);
        return ERR_FORMAT;
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, lt)
    {
        const char *s = cJSON_IsString(e) ? e->valuestring : "";
        if (i >= MODEL_MAX_LAYERS)
            break;
        if (strcmp(s, "linear_attention") == 0) {
            c->layer_types[i] = LAYER_LINEAR_ATTN;
        } else if (strcmp(s, "full_attention") == 0) {
            c->layer_types[i] = LAYER_FULL_ATTN;
        } else {
            errbuf_set(err, errlen,
                       "config.json: layer_types[%d] = '%s' (want linear_attention or "
                       "full_attention)",
                       i, s);
            return ERR_FORMAT;
        }
        i++;
    }
    return 0;
}

static int parse_rope(struct model_config *c, const cJSON *tc, const cJSON *root, char *err,
                      size_t errlen)
{
    float theta_flat, prf_flat;
    int rc = get_float(tc, "rope_theta", 10000.0f, &theta_flat, "", err, errlen);
    if (rc == 0)
        rc = get_float(tc, "partial_rotary_factor", 0.25f, &prf_flat, "", err, errlen);
    if (rc < 0)
        return rc;
    const cJSON *rp = field(tc, root, "rope_parameters");
    if (!rp)
        rp = field(tc, root, "rope_scaling");
    if (rp && cJSON_IsObject(rp)) {
        rc = get_float(rp, "rope_theta", theta_flat, &c->rope_theta, "rope_parameters.", err,
                       errlen);
        if (rc == 0)
            rc = get_float(rp, "partial_rotary_factor", prf_flat, &c->partial_rotary_factor,
                           "rope_parameters.", err, errlen);
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(rp, "rope_type");
        if (rc == 0 && cJSON_IsString(rt) && strcmp(rt->valuestring, "default") != 0) {
            errbuf_set(err, errlen,
                       "config.json: rope_parameters.rope_type = '%s' is not supported "
                       "(only default)",
                       rt->valuestring);
            return ERR_UNSUPPORTED;
        }
        return rc;
    }
    c->rope_theta = theta_flat;
    c->partial_rotary_factor = prf_flat;
    return 0;
}

int config_parse(struct model_config *c, const char *json, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    cJSON *root = cJSON_Parse(json);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        errbuf_set(err, errlen, "config.json: not a valid JSON object");
        return ERR_FORMAT;
    }
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!cJSON_IsObject(tc))
        tc = root;
    int rc = 0;
    get_str(root, root, "model_type", "", c->model_type, sizeof(c->model_type));
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *a0 = cJSON_IsArray(arch) ? cJSON_GetArrayItem(arch, 0) : NULL;
    snprintf(c->architecture, sizeof(c->architecture), "%s",
             cJSON_IsString(a0) ? a0->valuestring : "");
    struct {
        const char *name;
        int def;
        int *out;
    } ints[] = {
        {"vocab_size", 248320, &c->vocab_size},
        {"hidden_size", 2048, &c->hidden_size},
        {"num_hidden_layers", 40, &c->n_layers},
        {"num_attention_heads", 16, &c->n_heads},
        {"num_key_value_heads", 2, &c->n_kv_heads},
        {"head_dim", 256, &c->head_dim},
        {"linear_num_key_heads", 16, &c->lin_n_k_heads},
        {"linear_num_value_heads", 32, &c->lin_n_v_heads},
        {"linear_key_head_dim", 128, &c->lin_k_head_dim},
        {"linear_value_head_dim", 128, &c->lin_v_head_dim},
        {"linear_conv_kernel_dim", 4, &c->lin_conv_kernel},
        {"num_experts", 256, &c->n_experts},
        {"num_experts_per_tok", 8, &c->n_experts_per_tok},
        {"moe_intermediate_size", 512, &c->moe_inter},
        {"shared_expert_intermediate_size", 512, &c->shared_inter},
        {"mtp_num_hidden_layers", 0, &c->mtp_n_layers},
    };
    for (size_t i = 0; i < ARRAY_LEN(ints) && rc == 0; i++)
        rc = get_int(tc, root, ints[i].name, ints[i].def, ints[i].out, err, errlen);
    if (rc == 0)
        rc = get_i64(tc, root, "max_position_embeddings", 32768, &c->max_position_embeddings, err,
                     errlen);
    if (rc == 0)
        rc = get_bool(tc, root, "tie_word_embeddings", false, &c->tie_word_embeddings, err, errlen);
    if (rc == 0)
        rc = get_bool(tc, root, "attn_output_gate", true, &c->attn_output_gate, err, errlen);
    if (rc == 0)
        rc = get_float(tc, "rms_norm_eps", 1e-6f, &c->rms_eps, "", err, errlen);
    if (rc == 0 && (c->n_layers < 0 || c->n_layers > MODEL_MAX_LAYERS)) {
        errbuf_set(err, errlen, "config.json: num_hidden_layers = %d out of range [1, %d]",
                   c->n_layers, MODEL_MAX_LAYERS);
        rc = ERR_RANGE;
    }
    if (rc == 0)
        rc = parse_layer_types(c, tc, root, err, errlen);
    if (rc == 0)
        rc = parse_rope(c, tc, root, err, errlen);
    if (rc == 0) {
        /* a product outside int (huge head_dim * factor) becomes -1, which validate rejects */
        float rd = (float)c->head_dim * c->partial_rotary_factor;
        c->rotary_dim = rd > -2147483648.0f && rd < 2147483648.0f ? (int)rd : -1;
        char ssm[32];
        get_str(tc, root, "mamba_ssm_dtype", "float32", ssm, sizeof(ssm));
        c->ssm_state_f32 = strcmp(ssm, "float32") == 0;
        const cJSON *dt = field(tc, root, "dtype");
        if (!cJSON_IsString(dt))
            dt = field(tc, root, "torch_dtype");
        snprintf(c->dtype, sizeof(c->dtype), "%s",
                 cJSON_IsString(dt) ? dt->valuestring : "bfloat16");
        rc = parse_eos(c, field(tc, root, "eos_token_id"), "config.json", err, errlen);
    }
    cJSON_Delete(root);
    return rc;
}

int config_parse_generation(struct model_config *c, const char *json, char *err, size_t errlen)
{
    cJSON *root = cJSON_Parse(json);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        errbuf_set(err, errlen, "generation_config.json: not a valid JSON object");
        return ERR_FORMAT;
    }
    int rc = parse_eos(c, cJSON_GetObjectItemCaseSensitive(root, "eos_token_id"),
                       "generation_config.json", err, errlen);
    cJSON_Delete(root);
    return rc;
}

int config_validate(const struct model_config *c, char *err, size_t errlen)
{
    struct {
        const char *name;
        int v;
    } pos[] = {
        {"vocab_size", c->vocab_size},
        {"hidden_size", c->hidden_size},
        {"num_hidden_layers", c->n_layers},
        {"num_attention_heads", c->n_heads},
        {"num_key_value_heads", c->n_kv_heads},
        {"head_dim", c->head_dim},
        {"linear_num_key_heads", c->lin_n_k_heads},
        {"linear_num_value_heads", c->lin_n_v_heads},
        {"linear_key_head_dim", c->lin_k_head_dim},
        {"linear_value_head_dim", c->lin_v_head_dim},
        {"linear_conv_kernel_dim", c->lin_conv_kernel},
        {"num_experts", c->n_experts},
        {"num_experts_per_tok", c->n_experts_per_tok},
        {"moe_intermediate_size", c->moe_inter},
        {"shared_expert_intermediate_size", c->shared_inter},
    };
    for (size_t i = 0; i < ARRAY_LEN(pos); i++) {
        if (pos[i].v <= 0) {
            errbuf_set(err, errlen, "config.json: %s = %d must be positive", pos[i].name, pos[i].v);
            return ERR_RANGE;
        }
    }
    if (c->n_layers > MODEL_MAX_LAYERS) {
        errbuf_set(err, errlen, "config.json: num_hidden_layers = %d exceeds %d", c->n_layers,
                   MODEL_MAX_LAYERS);
        return ERR_RANGE;
    }
    if (c->n_heads % c->n_kv_heads) {
        errbuf_set(err, errlen,
                   "config.json: num_key_value_heads = %d does not divide "
                   "num_attention_heads = %d",
                   c->n_kv_heads, c->n_heads);
        return ERR_RANGE;
    }
    if (c->lin_n_v_heads % c->lin_n_k_heads) {
        errbuf_set(err, errlen,
                   "config.json: linear_num_key_heads = %d does not divide "
                   "linear_num_value_heads = %d",
                   c->lin_n_k_heads, c->lin_n_v_heads);
        return ERR_RANGE;
    }
    if (c->n_experts_per_tok > c->n_experts) {
        errbuf_set(err, errlen, "config.json: num_experts_per_tok = %d exceeds num_experts = %d",
                   c->n_experts_per_tok, c->n_experts);
        return ERR_RANGE;
    }
    if (!(c->partial_rotary_factor > 0.0f && c->partial_rotary_factor <= 1.0f) ||
        c->rotary_dim <= 0 || c->rotary_dim % 2 || c->rotary_dim > c->head_dim) {
        errbuf_set(err, errlen,
                   "config.json: partial_rotary_factor = %g gives rotary dim %d (must be "
                   "even, in [2, head_dim = %d])",
                   (double)c->partial_rotary_factor, c->rotary_dim, c->head_dim);
        return ERR_RANGE;
    }
    if (!(c->rope_theta > 0.0f)) {
        errbuf_set(err, errlen, "config.json: rope_theta = %g must be positive",
                   (double)c->rope_theta);
        return ERR_RANGE;
    }
    if (!(c->rms_eps > 0.0f) || c->rms_eps > 1.0f) {
        errbuf_set(err, errlen, "config.json: rms_norm_eps = %g out of range (0, 1]",
                   (double)c->rms_eps);
        return ERR_RANGE;
    }
    if (c->mtp_n_layers < 0 || c->mtp_n_layers > 16) {
        errbuf_set(err, errlen, "config.json: mtp_num_hidden_layers = %d out of range [0, 16]",
                   c->mtp_n_layers);
        return ERR_RANGE;
    }
    if (c->max_position_embeddings <= 0) {
        errbuf_set(err, errlen, "config.json: max_position_embeddings = %lld must be positive",
                   (long long)c->max_position_embeddings);
        return ERR_RANGE;
    }
    for (int i = 0; i < c->n_eos; i++) {
        if (c->eos_ids[i] < 0 || c->eos_ids[i] >= c->vocab_size) {
            errbuf_set(err, errlen, "config.json: eos_token_id %d outside the vocabulary (%d)",
                       c->eos_ids[i], c->vocab_size);
            return ERR_RANGE;
        }
    }
    return 0;
}

int config_load(struct model_config *c, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    char *text = file_read(path, NULL);
    if (!text) {
        int rc = -errno;
        errbuf_set(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return rc ? rc : ERR_IO;
    }
    int rc = config_parse(c, text, err, errlen);
    free(text);
    if (rc < 0)
        return rc;
    snprintf(path, sizeof(path), "%s/generation_config.json", dir);
    text = file_read(path, NULL);
    if (text) {
        rc = config_parse_generation(c, text, err, errlen);
        free(text);
        if (rc < 0)
            return rc;
    }
    return config_validate(c, err, errlen);
}
