/* quant: parse the quantization description of a checkpoint and answer "which scheme does
 * module X use". Three sources (CHECKPOINTS.md §1.2, §1.6, Qwen FP8): compressed-tensors
 * config_groups + ignore, ModelOpt quant_algo / quantized_layers / exclude_modules, and the fp8
 * block style. Regex targets are compiled once with PCRE2. */
#include "model/quant.h"

#include "common/errbuf.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "model/config_load.h"
#include "model/tensor_name.h"

#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

struct matcher {
    char *text;     // exact name, class name, or wildcard (ModelOpt) / substring (fp8)
    pcre2_code *re; // compiled `re:` pattern, else NULL
};

struct group {
    struct matcher *targets;
    int n_targets;
    struct quant_scheme scheme;
};

struct layer_algo { // ModelOpt MIXED_PRECISION: quantized_layers entry
    char *prefix;
    struct quant_scheme scheme;
};

struct quant {
    enum quant_method method;
    struct group *groups; // compressed-tensors config_groups
    int n_groups;
    struct matcher *ignore; // CT ignore, ModelOpt exclude_modules, fp8 modules_to_not_convert
    int n_ignore;
    struct quant_scheme all; // ModelOpt single algo / fp8: scheme of every non-ignored Linear
    bool mixed;              // ModelOpt MIXED_PRECISION: look up layers
    struct layer_algo *layers;
    int n_layers;
    char detail[160]; // storage for an UNSUPPORTED description
    pcre2_match_data *md;
};

const char *quant_method_name(enum quant_method m)
{
    switch (m) {
    case QUANT_METHOD_NONE:
        return "none";
    case QUANT_METHOD_CT:
        return "compressed-tensors";
    case QUANT_METHOD_MODELOPT:
        return "modelopt";
    case QUANT_METHOD_FP8:
        return "fp8";
    }
    return "?";
}

const char *quant_scheme_str(const struct quant_scheme *s, char *buf, size_t len)
{
    switch (s->kind) {
    case QUANT_KIND_NONE:
        snprintf(buf, len, "unquantized");
        break;
    case QUANT_KIND_NVFP4:
        snprintf(buf, len, "%s",
                 s->act_fp4 ? "NVFP4 W4A4 (activations quantized per 16)"
                            : "NVFP4 weight-only (no activation quant)");
        break;
    case QUANT_KIND_FP8:
        if (s->fp8_scale == QUANT_FP8_BLOCK)
            snprintf(buf, len, "FP8 block %dx%d", s->block_rows, s->block_cols);
        else if (s->fp8_scale == QUANT_FP8_CHANNEL)
            snprintf(buf, len, "FP8 per-channel");
        else if (s->fp8_scale == QUANT_FP8_TENSOR)
            snprintf(buf, len, "FP8 per-tensor");
        else
            snprintf(buf, len, "FP8");
        break;
    case QUANT_KIND_UNSUPPORTED:
        snprintf(buf, len, "unsupported (%s)", s->detail ? s->detail : "?");
        break;
    }
    return buf;
}

// ---- matching ----

static int matcher_init(struct matcher *m, const char *text, bool allow_re, char *err,
                        size_t errlen)
{
    memset(m, 0, sizeof(*m));
    if (allow_re && strncmp(text, "re:", 3) == 0) {
        int ec;
        PCRE2_SIZE eo;
        m->re = pcre2_compile((PCRE2_SPTR)(text + 3), PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED, &ec,
                              &eo, NULL);
        if (!m->re) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(ec, msg, sizeof(msg));
            errbuf_set(err, errlen, "quantization_config: bad regex '%s' at %zu: %s", text,
                       (size_t)eo, (const char *)msg);
            return -1;
        }
    }
    m->text = xstrdup(text);
    return 0;
}

static void matcher_deinit(struct matcher *m)
{
    pcre2_code_free(m->re);
    free(m->text);
}

static bool re_match(const struct quant *q, pcre2_code *re, const char *s)
{
    return pcre2_match(re, (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0, 0, q->md, NULL) >= 0;
}

/* Tier of a match: 3 exact name, 2 regex, 1 class name "Linear", 0 none. */
static int ct_match(const struct quant *q, const struct matcher *m, const char *name)
{
    if (m->re)
        return re_match(q, m->re, name) ? 2 : 0;
    if (strcmp(m->text, name) == 0 ||
        strcmp(tensor_name_canon(m->text), tensor_name_canon(name)) == 0)
        return 3;
    if (strcmp(m->text, "Linear") == 0)
        return 1;
    return 0;
}

static bool wild_match(const struct matcher *m, const char *name)
{
    char alt[512];
    if (fnmatch(m->text, name, 0) == 0)
        return true;
    const char *c = tensor_name_canon(name);
    const char *const forms[] = {"", "model.", "model.language_model.", "language_model.model."};
    for (size_t i = 0; i < ARRAY_LEN(forms); i++) {
        snprintf(alt, sizeof(alt), "%s%s", forms[i], c);
        if (fnmatch(m->text, alt, 0) == 0)
            return true;
    }
    return false;
}

static struct quant_scheme ct_lookup_groups(const struct quant *q, const char *module)
{
    struct quant_scheme none = {0};
    int best = 0, bi = -1;
    for (int g = 0; g < q->n_groups; g++)
        for (int t = 0; t < q->groups[g].n_targets; t++) {
            int tier = ct_match(q, &q->groups[g].targets[t], module);
            if (tier > best) {
                best = tier;
                bi = g;
            }
        }
    return bi >= 0 ? q->groups[bi].scheme : none;
}

struct quant_scheme quant_lookup(const struct quant *q, const char *module)
{
    struct quant_scheme none = {0};
    if (!q || q->method == QUANT_METHOD_NONE)
        return none;
    if (q->method == QUANT_METHOD_CT) {
        for (int i = 0; i < q->n_ignore; i++)
            if (ct_match(q, &q->ignore[i], module) >= 2)
                return none;
        return ct_lookup_groups(q, module);
    }
    if (q->method == QUANT_METHOD_FP8) {
        for (int i = 0; i < q->n_ignore; i++)
            if (strstr(module, q->ignore[i].text))
                return none;
        return q->all;
    }
    /* ModelOpt */
    for (int i = 0; i < q->n_ignore; i++)
        if (wild_match(&q->ignore[i], module))
            return none;
    if (!q->mixed && q->n_groups > 0)
        return ct_lookup_groups(q, module);
    if (!q->mixed)
        return q->all;
    const char *c = tensor_name_canon(module);
    for (int i = 0; i < q->n_layers; i++) {
        const char *p = tensor_name_canon(q->layers[i].prefix);
        size_t l = strlen(p);
        if (strncmp(c, p, l) == 0 && (c[l] == 0 || c[l] == '.'))
            return q->layers[i].scheme;
    }
    return none;
}

enum quant_method quant_get_method(const struct quant *q)
{
    return q ? q->method : QUANT_METHOD_NONE;
}

// ---- compressed-tensors ----

static int arg_int(const cJSON *o, const char *k, int def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valueint : def;
}

static const char *arg_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static struct quant_scheme unsupported(struct quant *q, const char *what, const char *a)
{
    snprintf(q->detail, sizeof(q->detail), "%s%s", what, a);
    return (struct quant_scheme){.kind = QUANT_KIND_UNSUPPORTED, .detail = q->detail};
}

static struct quant_scheme ct_scheme(struct quant *q, const cJSON *w, const cJSON *in)
{
    struct quant_scheme s = {0};
    if (!cJSON_IsObject(w))
        return s;
    int bits = arg_int(w, "num_bits", 0);
    const char *type = arg_str(w, "type");
    const char *strat = arg_str(w, "strategy");
    bool in_on = cJSON_IsObject(in);
    if (bits == 4 && strcmp(type, "float") == 0 && arg_int(w, "group_size", 0) == 16) {
        s.kind = QUANT_KIND_NVFP4;
        if (in_on) {
            if (arg_int(in, "num_bits", 0) == 4 && strcmp(arg_str(in, "type"), "float") == 0)
                s.act_fp4 = true;
            else
                return unsupported(q, "nvfp4 weights with activations of bits ",
                                   arg_int(in, "num_bits", 0) == 8 ? "8" : "other than 4");
        }
        return s;
    }
    if (bits == 8 && strcmp(type, "float") == 0) {
        s.kind = QUANT_KIND_FP8;
        if (strcmp(strat, "tensor") == 0) {
            s.fp8_scale = QUANT_FP8_TENSOR;
        } else if (strcmp(strat, "channel") == 0) {
            s.fp8_scale = QUANT_FP8_CHANNEL;
        } else if (strcmp(strat, "block") == 0) {
            const cJSON *bs = cJSON_GetObjectItemCaseSensitive(w, "block_structure");
            s.fp8_scale = QUANT_FP8_BLOCK;
            s.block_rows = s.block_cols = 128;
            if (cJSON_IsArray(bs) && cJSON_GetArraySize(bs) == 2) {
                s.block_rows = cJSON_GetArrayItem(bs, 0)->valueint;
                s.block_cols = cJSON_GetArrayItem(bs, 1)->valueint;
            }
            if (s.block_rows <= 0 || s.block_cols <= 0)
                return unsupported(q, "fp8 block_structure ", "not positive");
        } else {
            return unsupported(q, "fp8 weight strategy ", strat);
        }
        return s;
    }
    char what[64];
    snprintf(what, sizeof(what), "%d-bit %s", bits, type);
    return unsupported(q, "weights of ", what);
}

static int parse_ct(struct quant *q, const cJSON *qc, char *err, size_t errlen)
{
    q->method = QUANT_METHOD_CT;
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(qc, "config_groups");
    if (!cJSON_IsObject(groups)) {
        errbuf_set(err, errlen, "quantization_config: config_groups missing");
        return -1;
    }
    int ng = cJSON_GetArraySize(groups);
    q->groups = xcalloc((size_t)ng + 1, sizeof(*q->groups));
    const cJSON *g;
    cJSON_ArrayForEach(g, groups)
    {
        struct group *gr = &q->groups[q->n_groups++];
        const cJSON *targets = cJSON_GetObjectItemCaseSensitive(g, "targets");
        if (!cJSON_IsArray(targets)) {
            errbuf_set(err, errlen, "quantization_config: config_groups.%s.targets missing",
                       g->string);
            return -1;
        }
        gr->targets = xcalloc((size_t)cJSON_GetArraySize(targets) + 1, sizeof(*gr->targets));
        const cJSON *t;
        cJSON_ArrayForEach(t, targets)
        {
            if (!cJSON_IsString(t)) {
                errbuf_set(err, errlen,
                           "quantization_config: config_groups.%s.targets holds a "
                           "non-string",
                           g->string);
                return -1;
            }
            if (matcher_init(&gr->targets[gr->n_targets], t->valuestring, true, err, errlen) < 0)
                return -1;
            gr->n_targets++;
        }
        gr->scheme = ct_scheme(q, cJSON_GetObjectItemCaseSensitive(g, "weights"),
                               cJSON_GetObjectItemCaseSensitive(g, "input_activations"));
    }
    return 0;
}

// ---- ModelOpt ----

static struct quant_scheme algo_scheme(struct quant *q, const char *algo)
{
    struct quant_scheme s = {0};
    if (strcmp(algo, "NVFP4") == 0) {
        s.kind = QUANT_KIND_NVFP4;
        s.act_fp4 = true;
    } else if (strcmp(algo, "W4A16_NVFP4") == 0) {
        s.kind = QUANT_KIND_NVFP4;
    } else if (strcmp(algo, "FP8") == 0) {
        s.kind = QUANT_KIND_FP8;
        s.fp8_scale = QUANT_FP8_TENSOR;
    } else if (algo[0] && strcmp(algo, "NONE") != 0) {
        return unsupported(q, "modelopt quant_algo ", algo);
    }
    return s;
}

static int parse_list(struct matcher **out, int *n, const cJSON *list, bool allow_re,
                      const char *what, char *err, size_t errlen)
{
    if (!list || cJSON_IsNull(list))
        return 0;
    if (!cJSON_IsArray(list)) {
        errbuf_set(err, errlen, "quantization_config: %s must be a list", what);
        return -1;
    }
    *out = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(**out));
    const cJSON *e;
    cJSON_ArrayForEach(e, list)
    {
        if (!cJSON_IsString(e)) {
            errbuf_set(err, errlen, "quantization_config: %s holds a non-string", what);
            return -1;
        }
        if (matcher_init(&(*out)[*n], e->valuestring, allow_re, err, errlen) < 0)
            return -1;
        (*n)++;
    }
    return 0;
}

/* o: the "quantization" object of hf_quant_config.json or config.json's quantization_config. */
static int parse_modelopt(struct quant *q, const cJSON *o, char *err, size_t errlen)
{
    q->method = QUANT_METHOD_MODELOPT;
    const char *algo = arg_str(o, "quant_algo");
    const cJSON *excl = cJSON_GetObjectItemCaseSensitive(o, "exclude_modules");
    if (!excl)
        excl = cJSON_GetObjectItemCaseSensitive(o, "ignore");
    if (parse_list(&q->ignore, &q->n_ignore, excl, false, "exclude_modules", err, errlen) < 0)
        return -1;
    const cJSON *ql = cJSON_GetObjectItemCaseSensitive(o, "quantized_layers");
    if (strcmp(algo, "MIXED_PRECISION") == 0 || cJSON_IsObject(ql)) {
        if (!cJSON_IsObject(ql)) {
            errbuf_set(err, errlen,
                       "quantization_config: MIXED_PRECISION without quantized_layers");
            return -1;
        }
        q->mixed = true;
        q->layers = xcalloc((size_t)cJSON_GetArraySize(ql) + 1, sizeof(*q->layers));
        const cJSON *e;
        cJSON_ArrayForEach(e, ql)
        {
            struct layer_algo *la = &q->layers[q->n_layers++];
            la->prefix = xstrdup(e->string);
            la->scheme = algo_scheme(q, arg_str(e, "quant_algo"));
        }
        return 0;
    }
    if (!algo[0] && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "config_groups"))) {
        /* config.json copy converted to compressed-tensors look-alike groups */
        if (parse_ct(q, o, err, errlen) < 0)
            return -1;
        q->method = QUANT_METHOD_MODELOPT;
        return 0;
    }
    if (!algo[0]) {
        errbuf_set(err, errlen, "quantization_config: modelopt without quant_algo");
        return -1;
    }
    q->all = algo_scheme(q, algo);
    return 0;
}

// ---- fp8 block style ----

static int parse_fp8(struct quant *q, const cJSON *qc, char *err, size_t errlen)
{
    q->method = QUANT_METHOD_FP8;
    const char *fmt = arg_str(qc, "fmt");
    if (fmt[0] && strcmp(fmt, "e4m3") != 0) {
        errbuf_set(err, errlen, "quantization_config: fp8 fmt '%s' unsupported (only e4m3)", fmt);
        return -1;
    }
    q->all.kind = QUANT_KIND_FP8;
    q->all.optional = true;
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(qc, "weight_block_size");
    if (cJSON_IsArray(bs)) {
        if (cJSON_GetArraySize(bs) != 2 || cJSON_GetArrayItem(bs, 0)->valueint <= 0 ||
            cJSON_GetArrayItem(bs, 1)->valueint <= 0) {
            errbuf_set(err, errlen,
                       "quantization_config: weight_block_size must be [rows, cols] > 0");
            return -1;
        }
        q->all.fp8_scale = QUANT_FP8_BLOCK;
        q->all.block_rows = cJSON_GetArrayItem(bs, 0)->valueint;
        q->all.block_cols = cJSON_GetArrayItem(bs, 1)->valueint;
    }
    return parse_list(&q->ignore, &q->n_ignore,
                      cJSON_GetObjectItemCaseSensitive(qc, "modules_to_not_convert"), false,
                      "modules_to_not_convert", err, errlen);
}

// ---- create / destroy ----

static int parse_sources(struct quant *q, const cJSON *cfg, const cJSON *hf, char *err,
                         size_t errlen)
{
    if (hf) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(hf, "quantization");
        return parse_modelopt(q, cJSON_IsObject(o) ? o : hf, err, errlen);
    }
    const cJSON *qc = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config") : NULL;
    if (!qc && cfg) {
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
        qc = tc ? cJSON_GetObjectItemCaseSensitive(tc, "quantization_config") : NULL;
    }
    if (!qc || cJSON_IsNull(qc))
        return 0;
    if (!cJSON_IsObject(qc)) {
        errbuf_set(err, errlen, "quantization_config must be an object");
        return -1;
    }
    const char *m = arg_str(qc, "quant_method");
    if (strcmp(m, "compressed-tensors") == 0) {
        if (parse_ct(q, qc, err, errlen) < 0)
            return -1;
        return parse_list(&q->ignore, &q->n_ignore, cJSON_GetObjectItemCaseSensitive(qc, "ignore"),
                          true, "ignore", err, errlen);
    }
    if (strcmp(m, "modelopt") == 0) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(qc, "quantization");
        return parse_modelopt(q, cJSON_IsObject(o) ? o : qc, err, errlen);
    }
    if (strcmp(m, "fp8") == 0)
        return parse_fp8(q, qc, err, errlen);
    errbuf_set(err, errlen, "quantization_config: quant_method '%s' is not supported", m);
    return -1;
}

struct quant *quant_create(const char *config_json, const char *hf_quant_json, char *err,
                           size_t errlen)
{
    struct quant *q = xcalloc(1, sizeof(*q));
    q->md = pcre2_match_data_create(4, NULL);
    cJSON *cfg = config_json ? cJSON_Parse(config_json) : NULL;
    cJSON *hf = hf_quant_json ? cJSON_Parse(hf_quant_json) : NULL;
    int rc = 0;
    if (config_json && !cJSON_IsObject(cfg)) {
        errbuf_set(err, errlen, "config.json: not a valid JSON object");
        rc = -1;
    } else if (hf_quant_json && !cJSON_IsObject(hf)) {
        errbuf_set(err, errlen, "hf_quant_config.json: not a valid JSON object");
        rc = -1;
    } else {
        rc = parse_sources(q, cfg, hf, err, errlen);
    }
    cJSON_Delete(cfg);
    cJSON_Delete(hf);
    if (rc < 0) {
        quant_destroy(q);
        return NULL;
    }
    return q;
}

struct quant *quant_create_dir(const char *dir, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    char *cfg = file_read(path, NULL);
    snprintf(path, sizeof(path), "%s/hf_quant_config.json", dir);
    char *hf = file_read(path, NULL);
    struct quant *q = quant_create(cfg, hf, err, errlen);
    free(cfg);
    free(hf);
    return q;
}

void quant_destroy(struct quant *q)
{
    if (!q)
        return;
    for (int g = 0; g < q->n_groups; g++) {
        for (int t = 0; t < q->groups[g].n_targets; t++)
            matcher_deinit(&q->groups[g].targets[t]);
        free(q->groups[g].targets);
    }
    free(q->groups);
    for (int i = 0; i < q->n_ignore; i++)
        matcher_deinit(&q->ignore[i]);
    free(q->ignore);
    for (int i = 0; i < q->n_layers; i++)
        free(q->layers[i].prefix);
    free(q->layers);
    pcre2_match_data_free(q->md);
    free(q);
}
