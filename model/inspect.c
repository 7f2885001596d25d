/* inspect: build the checkpoint summary (cJSON) from a loaded model and print it as text.
 * Per-class schemes are read back from the qweights the loader produced, so they describe
 * what will actually run, not only what the config says. */
#include "model/inspect.h"

#include "common/xalloc.h"
#include "model/model_load.h"
#include "model/quant.h"
#include "model/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

// ---- per-class formats ----

struct fmt_set {
    char names[8][64];
    int64_t counts[8];
    int n;
};

static void describe(const struct qweight *w, char *buf, size_t len)
{
    switch (w->fmt) {
    case QW_F32:
        snprintf(buf, len, "F32");
        return;
    case QW_BF16:
        snprintf(buf, len, "BF16");
        return;
    case QW_F16:
        snprintf(buf, len, "F16");
        return;
    case QW_FP8:
        if (w->scale_kind == QW_SCALE_BLOCK)
            snprintf(buf, len, "FP8 block %dx%d", w->block_rows, w->block_cols);
        else if (w->scale_kind == QW_SCALE_CHANNEL)
            snprintf(buf, len, "FP8 per-channel");
        else
            snprintf(buf, len, "FP8 per-tensor");
        return;
    case QW_NVFP4:
        snprintf(buf, len, "%s",
                 w->act_fp4 ? "NVFP4 W4A4 (activations quantized per 16)"
                            : "NVFP4 weight-only (no activation quant)");
        return;
    }
    snprintf(buf, len, "?");
}

static void fmt_add(struct fmt_set *s, const struct qweight *w)
{
    char d[64];
    if (w->rows == 0)
        return; /* never loaded */
    describe(w, d, sizeof(d));
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->names[i], d) == 0) {
            s->counts[i]++;
            return;
        }
    }
    if (s->n < 8) {
        snprintf(s->names[s->n], sizeof(s->names[0]), "%s", d);
        s->counts[s->n++] = 1;
    }
}

static void fmt_str(const struct fmt_set *s, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    if (s->n == 0)
        snprintf(buf, len, "absent");
    for (int i = 0; i < s->n && o < len; i++) {
        if (s->n == 1)
            o += (size_t)snprintf(buf + o, len - o, "%s", s->names[i]);
        else
            o += (size_t)snprintf(buf + o, len - o, "%s%s (%lld modules)", i ? ", " : "",
                                  s->names[i], (long long)s->counts[i]);
    }
}

enum cls {
    C_EMBED,
    C_LM_HEAD,
    C_LIN,
    C_ATTN,
    C_EXPERTS,
    C_SHARED,
    C_SH_GATE,
    C_ROUTER,
    C_MTP,
    C_COUNT
};

static const char *const CLS_NAMES[C_COUNT] = {
    "embedding",          "lm_head", "linear_attn", "attention", "experts", "shared_expert",
    "shared_expert_gate", "router",  "mtp",
};

static void add_layer(struct fmt_set *cls, const struct layer_w *l, int n_experts, bool mtp)
{
    struct fmt_set *attn = mtp ? &cls[C_MTP] : &cls[C_ATTN];
    struct fmt_set *lin = &cls[C_LIN];
    if (l->type == LAYER_FULL_ATTN) {
        fmt_add(attn, &l->attn.q);
        fmt_add(attn, &l->attn.k);
        fmt_add(attn, &l->attn.v);
        fmt_add(attn, &l->attn.o);
    } else {
        fmt_add(lin, &l->gdn.qkv);
        fmt_add(lin, &l->gdn.z);
        fmt_add(lin, &l->gdn.b);
        fmt_add(lin, &l->gdn.a);
        fmt_add(lin, &l->gdn.out);
    }
    const struct moe_w *e = &l->moe;
    fmt_add(mtp ? &cls[C_MTP] : &cls[C_ROUTER], &e->router);
    for (int x = 0; e->gate && x < n_experts; x++) {
        fmt_add(mtp ? &cls[C_MTP] : &cls[C_EXPERTS], &e->gate[x]);
        fmt_add(mtp ? &cls[C_MTP] : &cls[C_EXPERTS], &e->up[x]);
        fmt_add(mtp ? &cls[C_MTP] : &cls[C_EXPERTS], &e->down[x]);
    }
    fmt_add(mtp ? &cls[C_MTP] : &cls[C_SHARED], &e->sh_gate);
    fmt_add(mtp ? &cls[C_MTP] : &cls[C_SHARED], &e->sh_up);
    fmt_add(mtp ? &cls[C_MTP] : &cls[C_SHARED], &e->sh_down);
    fmt_add(mtp ? &cls[C_MTP] : &cls[C_SH_GATE], &e->sh_expert_gate);
}

const char *inspect_mtp_warning(const struct model *m, char *buf, size_t len)
{
    const struct model_load_stats *s = model_load_stats(m);
    if (m->cfg.mtp_n_layers > 0 && s->n_mtp_tensors == 0) {
        snprintf(buf, len,
                 "config declares %d MTP layer%s but the checkpoint has no mtp.* "
                 "tensors: speculative decoding is unavailable",
                 m->cfg.mtp_n_layers, m->cfg.mtp_n_layers == 1 ? "" : "s");
        return buf;
    }
    if (m->cfg.mtp_n_layers == 0 && s->n_mtp_tensors > 0) {
        snprintf(buf, len,
                 "checkpoint has %lld mtp.* tensors but the config declares no MTP "
                 "layer (mtp_num_hidden_layers absent or 0)",
                 (long long)s->n_mtp_tensors);
        return buf;
    }
    return NULL;
}

// ---- summary ----

static cJSON *config_obj(const struct model_config *c)
{
    cJSON *o = cJSON_CreateObject();
    int n_full = 0;
    for (int i = 0; i < c->n_layers; i++)
        n_full += c->layer_types[i] == LAYER_FULL_ATTN;
    cJSON_AddStringToObject(o, "model_type", c->model_type);
    cJSON_AddStringToObject(o, "architecture", c->architecture);
    cJSON_AddStringToObject(o, "dtype", c->dtype);
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(o, "hidden_size", c->hidden_size);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->n_layers);
    cJSON_AddNumberToObject(o, "linear_attention_layers", c->n_layers - n_full);
    cJSON_AddNumberToObject(o, "full_attention_layers", n_full);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->n_kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(o, "rotary_dim", c->rotary_dim);
    cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
    cJSON_AddNumberToObject(o, "linear_num_key_heads", c->lin_n_k_heads);
    cJSON_AddNumberToObject(o, "linear_num_value_heads", c->lin_n_v_heads);
    cJSON_AddNumberToObject(o, "linear_key_head_dim", c->lin_k_head_dim);
    cJSON_AddNumberToObject(o, "linear_value_head_dim", c->lin_v_head_dim);
    cJSON_AddNumberToObject(o, "linear_conv_kernel_dim", c->lin_conv_kernel);
    cJSON_AddNumberToObject(o, "num_experts", c->n_experts);
    cJSON_AddNumberToObject(o, "num_experts_per_tok", c->n_experts_per_tok);
    cJSON_AddNumberToObject(o, "moe_intermediate_size", c->moe_inter);
    cJSON_AddNumberToObject(o, "shared_expert_intermediate_size", c->shared_inter);
    cJSON_AddNumberToObject(o, "max_position_embeddings", (double)c->max_position_embeddings);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings);
    cJSON_AddNumberToObject(o, "mtp_num_hidden_layers", c->mtp_n_layers);
    cJSON_AddStringToObject(o, "mamba_ssm_dtype", c->ssm_state_f32 ? "float32" : "other");
    cJSON *eos = cJSON_AddArrayToObject(o, "eos_token_ids");
    for (int i = 0; i < c->n_eos; i++)
        cJSON_AddItemToArray(eos, cJSON_CreateNumber(c->eos_ids[i]));
    return o;
}

cJSON *inspect_summary(const struct model *m)
{
    const struct model_config *c = &m->cfg;
    const struct model_load_stats *s = model_load_stats(m);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "config", config_obj(c));

    struct fmt_set cls[C_COUNT];
    memset(cls, 0, sizeof(cls));
    fmt_add(&cls[C_EMBED], &m->embed);
    fmt_add(&cls[C_LM_HEAD], &m->lm_head);
    for (int i = 0; m->layers && i < c->n_layers; i++)
        add_layer(cls, &m->layers[i], c->n_experts, false);
    if (m->has_mtp) {
        fmt_add(&cls[C_MTP], &m->mtp.fc);
        add_layer(cls, &m->mtp.layer, c->n_experts, true);
    }
    cJSON *q = cJSON_AddObjectToObject(root, "quantization");
    cJSON_AddStringToObject(q, "method", quant_method_name(quant_get_method(model_load_quant(m))));
    cJSON *qc = cJSON_AddObjectToObject(q, "classes");
    char buf[600];
    for (int i = 0; i < C_COUNT; i++) {
        if (i == C_MTP && !m->has_mtp)
            continue;
        fmt_str(&cls[i], buf, sizeof(buf));
        cJSON_AddStringToObject(qc, CLS_NAMES[i], buf);
    }

    cJSON *t = cJSON_AddObjectToObject(root, "tensors");
    cJSON_AddNumberToObject(t, "total", (double)s->n_tensors);
    cJSON_AddNumberToObject(t, "skipped", (double)s->n_skipped);
    cJSON_AddStringToObject(t, "prefix", s->prefix);
    cJSON_AddStringToObject(t, "experts_layout", s->fused_experts ? "fused" : "per-expert");
    cJSON_AddBoolToObject(t, "shapes_known", s->shapes_known);
    cJSON_AddNumberToObject(t, "files", st_n_files(model_load_tensors(m)));
    cJSON *g = cJSON_AddObjectToObject(t, "groups");
    for (int i = 0; i < MODEL_GROUP_COUNT; i++) {
        cJSON *e = cJSON_AddObjectToObject(g, model_group_name((enum model_group)i));
        cJSON_AddNumberToObject(e, "tensors", (double)s->group_tensors[i]);
        cJSON_AddNumberToObject(e, "bytes", (double)s->group_bytes[i]);
    }
    cJSON *b = cJSON_AddObjectToObject(root, "bytes");
    cJSON_AddNumberToObject(b, "total", (double)s->total_bytes);
    cJSON_AddNumberToObject(b, "total_gib", (double)s->total_bytes / GIB);

    cJSON *mt = cJSON_AddObjectToObject(root, "mtp");
    cJSON_AddNumberToObject(mt, "declared_layers", c->mtp_n_layers);
    cJSON_AddNumberToObject(mt, "tensors", (double)s->n_mtp_tensors);
    cJSON_AddNumberToObject(mt, "bytes", (double)s->mtp_bytes);
    cJSON_AddBoolToObject(mt, "loaded", m->has_mtp);

    cJSON *w = cJSON_AddArrayToObject(root, "warnings");
    const char *mw = inspect_mtp_warning(m, buf, sizeof(buf));
    if (mw)
        cJSON_AddItemToArray(w, cJSON_CreateString(mw));
    if (s->n_quant_fallback > 0) {
        snprintf(buf, sizeof(buf),
                 "%lld modules targeted by the quantization config are stored unquantized "
                 "(plain .weight) and are loaded as such",
                 (long long)s->n_quant_fallback);
        cJSON_AddItemToArray(w, cJSON_CreateString(buf));
    }
    if (!s->shapes_known)
        cJSON_AddItemToArray(w, cJSON_CreateString("some shard files are absent: their tensors' "
                                                   "shapes and sizes are unknown"));
    return root;
}

// ---- text ----

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

void inspect_print_text(FILE *f, const cJSON *sum)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(sum, "config");
    fprintf(f, "model: %s (%s), dtype %s\n", str(c, "model_type"), str(c, "architecture"),
            str(c, "dtype"));
    fprintf(f,
            "layers: %.0f (%.0f linear_attention, %.0f full_attention), hidden %.0f, vocab %.0f\n",
            num(c, "num_hidden_layers"), num(c, "linear_attention_layers"),
            num(c, "full_attention_layers"), num(c, "hidden_size"), num(c, "vocab_size"));
    fprintf(f, "attention: %.0f q heads, %.0f kv heads, head dim %.0f, rotary dim %.0f, theta %g\n",
            num(c, "num_attention_heads"), num(c, "num_key_value_heads"), num(c, "head_dim"),
            num(c, "rotary_dim"), num(c, "rope_theta"));
    fprintf(f, "linear_attn: %.0f k heads, %.0f v heads, dims %.0f/%.0f, conv %.0f\n",
            num(c, "linear_num_key_heads"), num(c, "linear_num_value_heads"),
            num(c, "linear_key_head_dim"), num(c, "linear_value_head_dim"),
            num(c, "linear_conv_kernel_dim"));
    fprintf(f, "moe: %.0f experts, top-%.0f, expert width %.0f, shared width %.0f\n",
            num(c, "num_experts"), num(c, "num_experts_per_tok"), num(c, "moe_intermediate_size"),
            num(c, "shared_expert_intermediate_size"));
    fprintf(f, "eos:");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c, "eos_token_ids"))
        fprintf(f, " %d", e->valueint);
    fprintf(f, "\n");

    const cJSON *q = cJSON_GetObjectItemCaseSensitive(sum, "quantization");
    fprintf(f, "quantization: %s\n", str(q, "method"));
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(q, "classes"))
        fprintf(f, "  %s: %s\n", e->string, e->valuestring);

    const cJSON *t = cJSON_GetObjectItemCaseSensitive(sum, "tensors");
    fprintf(f, "tensors: %.0f in %.0f file(s), prefix %s, experts %s, %.0f skipped\n",
            num(t, "total"), num(t, "files"), str(t, "prefix"), str(t, "experts_layout"),
            num(t, "skipped"));
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(t, "groups"))
    {
        double n = num(e, "tensors");
        if (n == 0)
            continue;
        fprintf(f, "  %-15s %7.0f tensors %16.0f bytes %9.3f GiB\n", e->string, n, num(e, "bytes"),
                num(e, "bytes") / GIB);
    }
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(sum, "bytes");
    fprintf(f, "total: %.0f bytes (%.3f GiB)\n", num(b, "total"), num(b, "total_gib"));
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(sum, "mtp");
    fprintf(
        f, "mtp: config declares %.0f layer(s); checkpoint has %.0f mtp.* tensors (%.0f bytes)%s\n",
        num(mt, "declared_layers"), num(mt, "tensors"), num(mt, "bytes"),
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(mt, "loaded")) ? ", loaded" : "");
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(sum, "warnings"))
        fprintf(f, "warning: %s\n", e->valuestring);
}

int inspect_dir(const char *dir, const struct model_load_opts *opts, bool json, FILE *f, char *err,
                size_t errlen)
{
    struct model *m = NULL;
    struct model_load_opts o = {.header_only = true};
    int rc = model_load(&m, dir, opts ? opts : &o, err, errlen);
    if (rc < 0)
        return rc;
    cJSON *sum = inspect_summary(m);
    if (json) {
        char *s = cJSON_PrintUnformatted(sum);
        fprintf(f, "%s\n", s);
        cJSON_free(s);
    } else {
        inspect_print_text(f, sum);
    }
    cJSON_Delete(sum);
    model_destroy(m);
    return 0;
}
