/* tiny_json: the JSON files of a tiny checkpoint: config.json (nested text_config, explicit
 * layer_types and rope_parameters, quantization_config), generation_config.json,
 * hf_quant_config.json for ModelOpt, and tokenizer sizing/copying. */
#include "common/err.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "tiny_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- files ----

static int write_text(const char *dir, const char *file, const char *txt)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    size_t n = strlen(txt);
    int rc = fwrite(txt, 1, n, f) == n ? 0 : ERR_IO;
    if (fclose(f) != 0 && rc == 0)
        rc = ERR_IO;
    return rc;
}

static int write_json(const char *dir, const char *file, cJSON *root)
{
    char *txt = cJSON_Print(root);
    if (!txt)
        return ERR_NOMEM;
    size_t n = strlen(txt);
    char *t2 = xmalloc(n + 2);
    memcpy(t2, txt, n);
    t2[n] = '\n';
    t2[n + 1] = '\0';
    int rc = write_text(dir, file, t2);
    free(t2);
    free(txt);
    return rc;
}

static int copy_file(const char *src, const char *dir, const char *file)
{
    size_t n;
    char *buf = file_read(src, &n);
    if (!buf)
        return -errno;
    int rc;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    if (!f) {
        rc = -errno;
    } else {
        rc = fwrite(buf, 1, n, f) == n ? 0 : ERR_IO;
        if (fclose(f) != 0 && rc == 0)
            rc = ERR_IO;
    }
    free(buf);
    return rc;
}

int tiny_copy_tokenizer(const char *tokenizer_json, const char *outdir)
{
    int rc = copy_file(tokenizer_json, outdir, "tokenizer.json");
    if (rc < 0)
        return rc;
    char cfg[4096];
    snprintf(cfg, sizeof(cfg), "%s", tokenizer_json);
    char *slash = strrchr(cfg, '/');
    size_t base = slash ? (size_t)(slash - cfg + 1) : 0;
    snprintf(cfg + base, sizeof(cfg) - base, "tokenizer_config.json");
    FILE *f = fopen(cfg, "rb");
    if (!f)
        return 0; /* optional */
    fclose(f);
    return copy_file(cfg, outdir, "tokenizer_config.json");
}

// ---- vocab ----

static int round64(int n)
{
    return (n + 63) / 64 * 64;
}

int tiny_vocab_read(const struct tiny_opts *o, struct tiny_vocab *tv)
{
    memset(tv, 0, sizeof(*tv));
    tv->bos = -1;
    if (!o->tokenizer) {
        tv->vocab_size = round64(o->vocab);
        tv->eos[0] = tv->vocab_size - 1;
        tv->n_eos = 1;
        return 0;
    }
    size_t n;
    char *buf = file_read(o->tokenizer, &n);
    if (!buf)
        return -errno;
    cJSON *root = cJSON_ParseWithLength(buf, n);
    free(buf);
    if (!root)
        return ERR_FORMAT;
    int max_id = -1, im_end = -1, eot = -1;
    cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    cJSON *vocab = model ? cJSON_GetObjectItemCaseSensitive(model, "vocab") : NULL;
    cJSON *it;
    if (cJSON_IsObject(vocab))
        cJSON_ArrayForEach(it, vocab) if (cJSON_IsNumber(it) && it->valueint > max_id) max_id =
            it->valueint;
    cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (cJSON_IsArray(added))
        cJSON_ArrayForEach(it, added)
        {
            cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
            cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
            if (!cJSON_IsNumber(id))
                continue;
            if (id->valueint > max_id)
                max_id = id->valueint;
            if (cJSON_IsString(content) && strcmp(content->valuestring, "<|im_end|>") == 0)
                im_end = id->valueint;
            if (cJSON_IsString(content) && strcmp(content->valuestring, "<|endoftext|>") == 0)
                eot = id->valueint;
        }
    cJSON_Delete(root);
    if (max_id < 1)
        return ERR_FORMAT;
    tv->vocab_size = round64(max_id + 1);
    if (im_end >= 0)
        tv->eos[tv->n_eos++] = im_end;
    if (eot >= 0)
        tv->eos[tv->n_eos++] = eot;
    if (tv->n_eos == 0)
        tv->eos[tv->n_eos++] = max_id;
    return 0;
}

// ---- quantization configs ----

static cJSON *str_array(const char *const *s, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(s[i]));
    return a;
}

static const char *const ct_ignore[] = {
    "lm_head",
    "re:.*embed_tokens$",
    "re:.*mlp.gate$",
    "re:.*shared_expert_gate$",
    "re:.*linear_attn.*",
    "re:^mtp.*",
    "re:visual.*",
};

static const char *const mo_exclude[] = {
    "lm_head", "*embed_tokens", "*mlp.gate", "*shared_expert_gate", "*linear_attn*", "mtp*",
};

static cJSON *ct_nvfp4_args(bool act)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "num_bits", 4);
    cJSON_AddStringToObject(a, "type", "float");
    cJSON_AddStringToObject(a, "strategy", "tensor_group");
    cJSON_AddBoolToObject(a, "symmetric", 1);
    if (act)
        cJSON_AddStringToObject(a, "dynamic", "local");
    else
        cJSON_AddBoolToObject(a, "dynamic", 0);
    cJSON_AddNumberToObject(a, "group_size", 16);
    cJSON_AddStringToObject(a, "observer", act ? "static_minmax" : "minmax");
    cJSON_AddStringToObject(a, "scale_dtype", "torch.float8_e4m3fn");
    cJSON_AddNullToObject(a, "block_structure");
    cJSON_AddNullToObject(a, "actorder");
    return a;
}

static cJSON *ct_config(const struct tiny_opts *o)
{
    bool fp8 = o->format == TINY_FMT_FP8;
    const char *fmt = fp8 ? "float-quantized" : "nvfp4-pack-quantized";
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "quant_method", "compressed-tensors");
    cJSON_AddStringToObject(q, "format", fmt);
    cJSON_AddStringToObject(q, "quantization_status", "compressed");
    cJSON *groups = cJSON_AddObjectToObject(q, "config_groups");
    cJSON *g0 = cJSON_AddObjectToObject(groups, "group_0");
    cJSON_AddItemToObject(g0, "targets", str_array((const char *const[]){"Linear"}, 1));
    if (fp8) {
        cJSON *w = cJSON_AddObjectToObject(g0, "weights");
        cJSON_AddNumberToObject(w, "num_bits", 8);
        cJSON_AddStringToObject(w, "type", "float");
        cJSON_AddStringToObject(w, "strategy",
                                o->fp8_scale == PACK_FP8_TENSOR ? "tensor" : "channel");
        cJSON_AddBoolToObject(w, "symmetric", 1);
        cJSON_AddBoolToObject(w, "dynamic", 0);
        cJSON_AddStringToObject(w, "observer", "minmax");
        cJSON_AddNullToObject(w, "group_size");
        /* weight-only: activations are not quantized (nothing to emulate in the reference) */
        cJSON_AddNullToObject(g0, "input_activations");
    } else {
        cJSON_AddItemToObject(g0, "weights", ct_nvfp4_args(false));
        if (o->format == TINY_FMT_NVFP4)
            cJSON_AddItemToObject(g0, "input_activations", ct_nvfp4_args(true));
        else
            cJSON_AddNullToObject(g0, "input_activations");
    }
    cJSON_AddNullToObject(g0, "output_activations");
    cJSON_AddStringToObject(g0, "format", fmt);
    cJSON_AddItemToObject(q, "ignore", str_array(ct_ignore, (int)ARRAY_LEN(ct_ignore)));
    cJSON_AddNullToObject(q, "kv_cache_scheme");
    cJSON_AddNullToObject(q, "sparsity_config");
    cJSON_AddNullToObject(q, "transform_config");
    cJSON_AddStringToObject(q, "version", "0.12.2");
    return q;
}

static cJSON *mo_args(void)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddBoolToObject(a, "dynamic", 0);
    cJSON_AddNumberToObject(a, "num_bits", 4);
    cJSON_AddStringToObject(a, "type", "float");
    cJSON_AddNumberToObject(a, "group_size", 16);
    return a;
}

static cJSON *mo_config(void)
{
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "quant_method", "modelopt");
    cJSON_AddStringToObject(q, "quant_algo", "NVFP4");
    cJSON_AddNullToObject(q, "kv_cache_scheme");
    cJSON *groups = cJSON_AddObjectToObject(q, "config_groups");
    cJSON *g0 = cJSON_AddObjectToObject(groups, "group_0");
    cJSON_AddItemToObject(g0, "input_activations", mo_args());
    cJSON_AddItemToObject(g0, "weights", mo_args());
    cJSON_AddItemToObject(g0, "targets", str_array((const char *const[]){"Linear"}, 1));
    cJSON_AddItemToObject(q, "ignore", str_array(mo_exclude, (int)ARRAY_LEN(mo_exclude)));
    cJSON_AddStringToObject(q, "producer", "modelopt");
    return q;
}

static cJSON *mo_hf_quant_config(void)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *p = cJSON_AddObjectToObject(root, "producer");
    cJSON_AddStringToObject(p, "name", "modelopt");
    cJSON_AddStringToObject(p, "version", "0.44.0");
    cJSON *q = cJSON_AddObjectToObject(root, "quantization");
    cJSON_AddStringToObject(q, "quant_algo", "NVFP4");
    cJSON_AddNullToObject(q, "kv_cache_quant_algo");
    cJSON_AddNumberToObject(q, "group_size", 16);
    cJSON_AddItemToObject(q, "exclude_modules", str_array(mo_exclude, (int)ARRAY_LEN(mo_exclude)));
    return root;
}

/* Qwen/DeepSeek-style FP8 block config: explicit names of every Linear left in BF16. */
static cJSON *fp8_block_config(const struct tiny_opts *o)
{
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "quant_method", "fp8");
    cJSON_AddStringToObject(q, "fmt", "e4m3");
    cJSON_AddStringToObject(q, "activation_scheme", "dynamic");
    cJSON *bs = cJSON_AddArrayToObject(q, "weight_block_size");
    cJSON_AddItemToArray(bs, cJSON_CreateNumber(o->fp8_block));
    cJSON_AddItemToArray(bs, cJSON_CreateNumber(o->fp8_block));
    cJSON *skip = cJSON_AddArrayToObject(q, "modules_to_not_convert");
    cJSON_AddItemToArray(skip, cJSON_CreateString("lm_head"));
    cJSON_AddItemToArray(skip, cJSON_CreateString("model.language_model.embed_tokens"));
    static const char *const gdn[] = {"in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a",
                                      "out_proj"};
    char name[256];
    int n = (int)strlen(o->layers);
    for (int i = 0; i < n; i++) {
        if (o->layers[i] == 'L')
            for (size_t j = 0; j < ARRAY_LEN(gdn); j++) {
                snprintf(name, sizeof(name), "model.language_model.layers.%d.linear_attn.%s", i,
                         gdn[j]);
                cJSON_AddItemToArray(skip, cJSON_CreateString(name));
            }
        snprintf(name, sizeof(name), "model.language_model.layers.%d.mlp.gate", i);
        cJSON_AddItemToArray(skip, cJSON_CreateString(name));
        snprintf(name, sizeof(name), "model.language_model.layers.%d.mlp.shared_expert_gate", i);
        cJSON_AddItemToArray(skip, cJSON_CreateString(name));
    }
    cJSON_AddItemToArray(skip, cJSON_CreateString("mtp"));
    return q;
}

// ---- config.json ----

/* A float as the shortest decimal that reads back to it (1e-6, not 9.99999997e-07). */
static double short_num(float f)
{
    char buf[32];
    for (int p = 6; p < 10; p++) {
        snprintf(buf, sizeof(buf), "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f)
            break;
    }
    return strtod(buf, NULL);
}

static cJSON *text_config(const struct tiny_opts *o, const struct tiny_vocab *tv)
{
    cJSON *t = cJSON_CreateObject();
    int n = (int)strlen(o->layers);
    cJSON_AddStringToObject(t, "model_type", "qwen3_5_moe_text");
    cJSON_AddNumberToObject(t, "vocab_size", tv->vocab_size);
    cJSON_AddNumberToObject(t, "hidden_size", o->hidden);
    cJSON_AddNumberToObject(t, "num_hidden_layers", n);
    cJSON *lt = cJSON_AddArrayToObject(t, "layer_types");
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(
            lt, cJSON_CreateString(o->layers[i] == 'F' ? "full_attention" : "linear_attention"));
    cJSON_AddNumberToObject(t, "full_attention_interval", 4);
    cJSON_AddNumberToObject(t, "num_attention_heads", o->n_heads);
    cJSON_AddNumberToObject(t, "num_key_value_heads", o->n_kv_heads);
    cJSON_AddNumberToObject(t, "head_dim", o->head_dim);
    cJSON_AddBoolToObject(t, "attention_bias", 0);
    cJSON_AddBoolToObject(t, "attn_output_gate", 1);
    cJSON_AddNumberToObject(t, "attention_dropout", 0.0);
    cJSON_AddNumberToObject(t, "linear_num_key_heads", o->lin_k_heads);
    cJSON_AddNumberToObject(t, "linear_num_value_heads", o->lin_v_heads);
    cJSON_AddNumberToObject(t, "linear_key_head_dim", o->lin_k_dim);
    cJSON_AddNumberToObject(t, "linear_value_head_dim", o->lin_v_dim);
    cJSON_AddNumberToObject(t, "linear_conv_kernel_dim", o->conv_kernel);
    cJSON_AddNumberToObject(t, "num_experts", o->experts);
    cJSON_AddNumberToObject(t, "num_experts_per_tok", o->top_k);
    cJSON_AddNumberToObject(t, "moe_intermediate_size", o->moe_inter);
    cJSON_AddNumberToObject(t, "shared_expert_intermediate_size", o->shared_inter);
    cJSON_AddStringToObject(t, "hidden_act", "silu");
    cJSON_AddNumberToObject(t, "rms_norm_eps", short_num(o->rms_eps));
    cJSON_AddNumberToObject(t, "max_position_embeddings", 262144);
    cJSON_AddBoolToObject(t, "tie_word_embeddings", 0);
    cJSON_AddNumberToObject(t, "initializer_range", 0.02);
    cJSON_AddNumberToObject(t, "router_aux_loss_coef", 0.001);
    cJSON_AddBoolToObject(t, "output_router_logits", 0);
    cJSON_AddBoolToObject(t, "use_cache", 1);
    cJSON *rp = cJSON_AddObjectToObject(t, "rope_parameters");
    int half = (int)((float)o->head_dim * o->partial_rotary) / 2;
    int h = (half + 1) / 3, w = half / 3;
    cJSON *ms = cJSON_AddArrayToObject(rp, "mrope_section");
    cJSON_AddItemToArray(ms, cJSON_CreateNumber(half - h - w));
    cJSON_AddItemToArray(ms, cJSON_CreateNumber(h));
    cJSON_AddItemToArray(ms, cJSON_CreateNumber(w));
    cJSON_AddBoolToObject(rp, "mrope_interleaved", 1);
    cJSON_AddStringToObject(rp, "rope_type", "default");
    cJSON_AddNumberToObject(rp, "rope_theta", short_num(o->rope_theta));
    cJSON_AddNumberToObject(rp, "partial_rotary_factor", short_num(o->partial_rotary));
    cJSON_AddNumberToObject(t, "mtp_num_hidden_layers", 1);
    cJSON_AddBoolToObject(t, "mtp_use_dedicated_embeddings", 0);
    cJSON_AddStringToObject(t, "mamba_ssm_dtype", "float32");
    cJSON_AddStringToObject(t, "dtype", o->format == TINY_FMT_F32 ? "float32" : "bfloat16");
    cJSON_AddNumberToObject(t, "eos_token_id", tv->eos[0]);
    if (tv->bos >= 0)
        cJSON_AddNumberToObject(t, "bos_token_id", tv->bos);
    return t;
}

int tiny_json_write(const struct tiny_opts *o, const struct tiny_vocab *tv, const char *outdir)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(root, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("Qwen3_5MoeForConditionalGeneration"));
    cJSON_AddStringToObject(root, "model_type", "qwen3_5_moe");
    cJSON_AddItemToObject(root, "text_config", text_config(o, tv));
    cJSON_AddBoolToObject(root, "tie_word_embeddings", 0);
    cJSON_AddStringToObject(root, "transformers_version", "5.17.0");
    switch (o->format) {
    case TINY_FMT_NVFP4A16:
    case TINY_FMT_NVFP4:
    case TINY_FMT_FP8:
        cJSON_AddItemToObject(root, "quantization_config", ct_config(o));
        break;
    case TINY_FMT_MODELOPT_NVFP4:
        cJSON_AddItemToObject(root, "quantization_config", mo_config());
        break;
    case TINY_FMT_FP8_BLOCK:
        cJSON_AddItemToObject(root, "quantization_config", fp8_block_config(o));
        break;
    default:
        break;
    }
    int rc = write_json(outdir, "config.json", root);
    cJSON_Delete(root);
    if (rc < 0)
        return rc;

    cJSON *gen = cJSON_CreateObject();
    if (tv->bos >= 0)
        cJSON_AddNumberToObject(gen, "bos_token_id", tv->bos);
    cJSON *eos = cJSON_AddArrayToObject(gen, "eos_token_id");
    for (int i = 0; i < tv->n_eos; i++)
        cJSON_AddItemToArray(eos, cJSON_CreateNumber(tv->eos[i]));
    cJSON_AddBoolToObject(gen, "do_sample", 1);
    cJSON_AddNumberToObject(gen, "temperature", 0.7);
    cJSON_AddNumberToObject(gen, "top_p", 0.8);
    cJSON_AddNumberToObject(gen, "top_k", 20);
    cJSON_AddStringToObject(gen, "transformers_version", "5.17.0");
    rc = write_json(outdir, "generation_config.json", gen);
    cJSON_Delete(gen);
    if (rc < 0 || o->format != TINY_FMT_MODELOPT_NVFP4)
        return rc;
    cJSON *hq = mo_hf_quant_config();
    rc = write_json(outdir, "hf_quant_config.json", hq);
    cJSON_Delete(hq);
    return rc;
}
