/* compare: the numbers behind `tern compare` (model/compare.h). Every byte figure comes from
 * the safetensors headers (model_load_stats groups, MTP experts included), so a directory holding
 * only config.json, the index and each shard's 8+N header bytes gives the same answer as the full
 * download. With config.json alone the same groups come from the dummy loader's accounting
 * (source "config_only"). Text printing lives in compare_print.c. */
#include "model/compare.h"

#include "common/err.h"
#include "common/file.h"
#include "common/kv_plan.h"
#include "common/xalloc.h"
#include "model/gpu_table.h"
#include "model/inspect.h"
#include "model/kv_geom.h"
#include "model/model_load.h"
#include "model/safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)
#define HUGE_LEN (1LL << 40)

static const double ACCEPT[2] = {0.6, 0.8};

void compare_opts_default(struct compare_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->force_moe = BACKEND_AUTO;
    o->force_linear = BACKEND_AUTO;
    o->context_tokens = 8192;
    o->reserve_bytes = 2LL << 30;
    o->gpu_memory_utilization = 0.9;
    o->fit_tokens = 32768;
}

double compare_expected_experts(int n_experts, int top_k, int n_tokens)
{
    if (n_experts <= 0)
        return 0.0;
    return n_experts * (1.0 - pow(1.0 - (double)top_k / n_experts, n_tokens));
}

double compare_expected_tokens(double accept, int k_drafts)
{
    double t = 0.0, p = 1.0;
    for (int i = 0; i <= k_drafts; i++, p *= accept)
        t += p;
    return t;
}

// ---- per-checkpoint facts ----

struct ckpt {
    const char *dir;           // the path as given (a directory or a config .json)
    char label[4];
    bool config_only;          // estimated from config.json (no tensor headers)
    struct model *m;
    const struct model_load_stats *st;
    struct backend_scheme sch[BACKEND_CLASS_COUNT];
    bool served;
    char served_why[400];
    bool mtp_usable;           // MTP tensors present and loaded
    int64_t mtp_expert_bytes;  // mtp.layers.*.mlp.experts.*
    int64_t resident;          // bytes tern keeps on the GPU without the MTP head
    int64_t lm_head_bytes;     // lm_head (or the tied embedding)
    int64_t embed_row_bytes;   // one embedding row
    int64_t active_weights;    // weight bytes read per decoded token (no MTP)
    int64_t expert_bytes_one;  // one routed expert of one layer
    struct kv_geom geom;
    struct kv_plan kv[2];      // [0] bf16, [1] fp8 at max_position_embeddings
};

static void ckpt_deinit(struct ckpt *c)
{
    model_destroy(c->m);
    c->m = NULL;
}

static bool served(const struct model_config *cfg, char *why, size_t len)
{
    static const char *const archs[] = {"Qwen3_5MoeForConditionalGeneration",
                                        "Qwen3_5MoeForCausalLM"};
    bool type_ok = strcmp(cfg->model_type, "qwen3_5_moe") == 0 ||
                   strcmp(cfg->model_type, "qwen3_5_moe_text") == 0;
    bool arch_ok = false;
    for (size_t i = 0; i < ARRAY_LEN(archs); i++)
        arch_ok |= strcmp(cfg->architecture, archs[i]) == 0;
    if (type_ok && arch_ok)
        snprintf(why, len, "model_type %s, %s: the text decoder (and MTP head) is served; a vision "
                 "tower is skipped", cfg->model_type, cfg->architecture);
    else
        snprintf(why, len, "tern serves qwen3_5_moe (Qwen3_5MoeForConditionalGeneration / "
                 "Qwen3_5MoeForCausalLM), not model_type '%s' / '%s'", cfg->model_type,
                 cfg->architecture);
    return type_ok && arch_ok;
}

/* Where one checkpoint's figures come from. A directory with safetensors: their headers. A path
 * ending in .json, or a directory without tensors: config.json alone (and the quantization config
 * beside it), counted as the header-only dummy load builds the model. A .json not named
 * config.json is copied into a temp dir (*tmp) as config.json. 0 or -errno. */
static int ckpt_source(const char *path, char *dir, size_t dlen, bool *config_only, bool *tmp)
{
    size_t n = strlen(path);
    *tmp = false;
    *config_only = n >= 5 && strcmp(path + n - 5, ".json") == 0;
    if (!*config_only) {
        snprintf(dir, dlen, "%s", path);
        *config_only = !st_dir_has_tensors(dir);
        return 0;
    }
    const char *slash = strrchr(path, '/');
    if (strcmp(slash ? slash + 1 : path, "config.json") != 0) {
        *tmp = true;
        return file_tmpdir_copy(path, "tern-compare", "config.json", dir, dlen);
    }
    if (!slash)
        snprintf(dir, dlen, ".");
    else
        snprintf(dir, dlen, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    return 0;
}

static int ckpt_init(struct ckpt *c, const char *path, int idx, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->dir = path;
    snprintf(c->label, sizeof(c->label), "%c", 'A' + idx);
    char dir[1024], e[768];
    bool tmp;
    int rc = ckpt_source(path, dir, sizeof(dir), &c->config_only, &tmp);
    if (rc < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-rc));
        return rc;
    }
    struct model_load_opts lo = {.header_only = true, .dummy = c->config_only};
    rc = model_load(&c->m, dir, &lo, e, sizeof(e));
    if (tmp)
        file_tmpdir_remove(dir, "config.json");
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s", path, e);
        return rc;
    }
    c->st = model_load_stats(c->m);
    if (!c->st->shapes_known) {
        snprintf(err, errlen, "%s: some shard files are absent, so tensor sizes are unknown: keep "
                 "the first 8+N bytes of every shard, or only config.json (docs/COMPARE.md)",
                 path);
        return ERR_NOTFOUND;
    }
    const struct model_config *cfg = &c->m->cfg;
    backend_schemes_from_model(c->m, c->sch);
    c->served = served(cfg, c->served_why, sizeof(c->served_why));
    c->mtp_usable = c->m->has_mtp;
    c->mtp_expert_bytes = c->st->mtp_expert_bytes;
    const int64_t *g = c->st->group_bytes;
    for (int i = 0; i < MODEL_GROUP_COUNT; i++)
        if (i != MODEL_GROUP_MTP && i != MODEL_GROUP_VISUAL && i != MODEL_GROUP_OTHER)
            c->resident += g[i];
    c->lm_head_bytes = g[MODEL_GROUP_LM_HEAD] ? g[MODEL_GROUP_LM_HEAD] : g[MODEL_GROUP_EMBED];
    c->embed_row_bytes = cfg->vocab_size > 0 ? g[MODEL_GROUP_EMBED] / cfg->vocab_size : 0;
    int E = cfg->n_experts, k = cfg->n_experts_per_tok;
    c->expert_bytes_one = E > 0 && cfg->n_layers > 0
                              ? g[MODEL_GROUP_EXPERTS] / ((int64_t)E * cfg->n_layers) : 0;
    c->active_weights = (E > 0 ? g[MODEL_GROUP_EXPERTS] * k / E : 0) + g[MODEL_GROUP_SHARED] +
                        g[MODEL_GROUP_ROUTER] + g[MODEL_GROUP_LINEAR_ATTN] +
                        g[MODEL_GROUP_FULL_ATTN] + g[MODEL_GROUP_NORMS] + c->lm_head_bytes +
                        c->embed_row_bytes;
    model_kv_geom(cfg, c->mtp_usable, &c->geom);
    for (int d = 0; d < 2; d++) {
        struct kv_opts ko = {.dtype = d ? KV_DTYPE_FP8 : KV_DTYPE_BF16,
                             .kv_cache_memory_bytes = 1LL << 60};
        if (c->geom.max_position_embeddings <= 0)
            ko.max_model_len = 262144;
        rc = kv_plan_compute(&c->geom, &ko, &c->kv[d], e, sizeof(e));
        if (rc < 0) {
            snprintf(err, errlen, "%s: %s", dir, e);
            return rc;
        }
    }
    return 0;
}

// ---- per-GPU figures ----

struct gpu_eval {
    struct backend_plan plan;
    int64_t max_ctx[2];        // longest single sequence, bf16 / fp8 KV
    int64_t max_ctx_mtp;       // bf16 KV with the MTP head resident and its KV layer (0: no MTP)
    bool fits;
    bool runs;                 // every class has a backend on this GPU
    int64_t fit_need;          // tokens one sequence must reach to count as fitting
    char backend_err[512];     // why some class has no backend (runs == false)
    int64_t decode_bytes;      // per token at context_tokens, bf16 KV, no MTP
    double tps;                // bandwidth roofline, batch 1
    int best_k[2];             // per ACCEPT; 0 when MTP is unavailable
    double speedup[2];
};

/* Bytes of one speculative round with K drafts (see docs/COMPARE.md, "MTP model"). */
static double round_bytes(const struct ckpt *c, int K, int64_t ctx)
{
    const struct model_config *cfg = &c->m->cfg;
    int E = cfg->n_experts, k = cfg->n_experts_per_tok;
    double kv_main = (double)c->kv[0].kv_bytes_per_token_layer * c->geom.n_attn_layers * ctx;
    double state_rw = 2.0 * (double)c->kv[0].state_bytes_per_seq;
    double routed_active = E > 0 ? (double)c->st->group_bytes[MODEL_GROUP_EXPERTS] * k / E : 0;
    double verify = (double)c->active_weights - routed_active +
                    (double)c->expert_bytes_one * cfg->n_layers *
                        compare_expected_experts(E, k, K + 1) +
                    kv_main + state_rw;
    double mtp_x = E > 0 ? (double)c->mtp_expert_bytes / E : 0;
    double mtp_other = (double)(c->st->mtp_bytes - c->mtp_expert_bytes);
    double kv_mtp = (double)c->kv[0].kv_bytes_per_token_layer * ctx;
    double drafts = 0;
    for (int j = 1; j <= K; j++) {
        int n = j == 1 ? K + 1 : 1; /* the first pass re-reads the verified window */
        drafts += mtp_other + mtp_x * compare_expected_experts(E, k, n) +
                  (double)c->lm_head_bytes + (double)c->embed_row_bytes * n + kv_mtp;
    }
    return verify + drafts;
}

static int gpu_eval(const struct ckpt *c, const struct gpu_info *gpu, const struct compare_opts *o,
                    struct gpu_eval *ev, char *err, size_t errlen)
{
    memset(ev, 0, sizeof(*ev));
    char e[512];
    int rc = backend_plan_compute(c->sch, gpu->sm, gpu->name, o->force_moe, o->force_linear,
                                  &ev->plan, e, sizeof(e));
    if (rc < 0 && (o->force_moe != BACKEND_AUTO || o->force_linear != BACKEND_AUTO)) {
        snprintf(err, errlen, "%s on %s: %s", c->dir, gpu->name, e);
        return rc;
    }
    ev->runs = rc == 0;
    if (!ev->runs)
        snprintf(ev->backend_err, sizeof(ev->backend_err), "%s", e);
    int64_t fit_need = o->fit_tokens;
    if (c->geom.max_position_embeddings > 0 && fit_need > c->geom.max_position_embeddings)
        fit_need = c->geom.max_position_embeddings;
    ev->fit_need = fit_need;
    for (int d = 0; d < 2; d++) {
        struct kv_opts ko = {.dtype = d ? KV_DTYPE_FP8 : KV_DTYPE_BF16,
                             .max_model_len = HUGE_LEN,
                             .max_num_seqs = 1,
                             .gpu_memory_utilization = o->gpu_memory_utilization,
                             .device_total_bytes = gpu->mem_bytes,
                             .weights_bytes = c->resident,
                             .reserve_bytes = o->reserve_bytes};
        struct kv_plan p;
        rc = kv_plan_compute(&c->geom, &ko, &p, e, sizeof(e));
        if (rc < 0 && rc != ERR_FULL) {
            snprintf(err, errlen, "%s on %s: %s", c->dir, gpu->name, e);
            return rc;
        }
        ev->max_ctx[d] = p.max_len_fit;
        if (p.max_len_fit >= fit_need)
            ev->fits = true;
    }
    if (c->mtp_usable) {
        struct kv_opts ko = {.dtype = KV_DTYPE_BF16,
                             .max_model_len = HUGE_LEN,
                             .max_num_seqs = 1,
                             .gpu_memory_utilization = o->gpu_memory_utilization,
                             .device_total_bytes = gpu->mem_bytes,
                             .weights_bytes = c->resident + c->st->mtp_bytes,
                             .reserve_bytes = o->reserve_bytes,
                             .spec_tokens = 1};
        struct kv_plan p;
        rc = kv_plan_compute(&c->geom, &ko, &p, e, sizeof(e));
        if (rc < 0 && rc != ERR_FULL) {
            snprintf(err, errlen, "%s on %s: %s", c->dir, gpu->name, e);
            return rc;
        }
        ev->max_ctx_mtp = p.max_len_fit;
    }
    ev->fits = ev->fits && ev->runs && c->served;
    int64_t ctx = o->context_tokens;
    ev->decode_bytes = c->active_weights +
                       c->kv[0].kv_bytes_per_token_layer * c->geom.n_attn_layers * ctx +
                       2 * c->kv[0].state_bytes_per_seq;
    double bw = gpu_table_roofline_gbps(gpu, NULL);
    ev->tps = ev->decode_bytes > 0 ? bw * 1e9 / (double)ev->decode_bytes : 0;
    if (!c->mtp_usable)
        return 0;
    for (int a = 0; a < 2; a++) {
        for (int K = 1; K <= COMPARE_MAX_DRAFTS; K++) {
            double s = compare_expected_tokens(ACCEPT[a], K) * (double)ev->decode_bytes /
                       round_bytes(c, K, ctx);
            if (s > ev->speedup[a]) {
                ev->speedup[a] = s;
                ev->best_k[a] = K;
            }
        }
    }
    return 0;
}

// ---- JSON ----

static void add_i64(cJSON *o, const char *k, int64_t v)
{
    cJSON_AddNumberToObject(o, k, (double)v);
}

static double round_to(double v, double q)
{
    return floor(v / q + 0.5) * q;
}

static cJSON *ckpt_json(const struct ckpt *c)
{
    const struct model_config *cfg = &c->m->cfg;
    const struct model_load_stats *s = c->st;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "label", c->label);
    cJSON_AddStringToObject(o, "path", c->dir);
    cJSON_AddStringToObject(o, "source", c->config_only ? "config_only" : "headers");
    cJSON_AddStringToObject(o, "architecture", cfg->architecture);
    cJSON_AddStringToObject(o, "model_type", cfg->model_type);
    add_i64(o, "max_position_embeddings", cfg->max_position_embeddings);
    cJSON_AddBoolToObject(o, "served", c->served);
    cJSON_AddStringToObject(o, "served_reason", c->served_why);

    cJSON *sum = inspect_summary(c->m);
    cJSON *q = cJSON_DetachItemFromObjectCaseSensitive(sum, "quantization");
    cJSON_Delete(sum);
    cJSON *sch = cJSON_AddObjectToObject(o, "schemes");
    enum quant_method qm = quant_get_method(model_load_quant(c->m));
    cJSON_AddStringToObject(sch, "method", quant_method_name(qm));
    static const char *const keys[][2] = {
        {"experts", "experts"}, {"shared_experts", "shared_expert"},
        {"attention", "attention"}, {"linear_attention", "linear_attn"},
        {"router", "router"}, {"shared_expert_gate", "shared_expert_gate"},
        {"lm_head", "lm_head"}, {"embeddings", "embedding"}, {"mtp", "mtp"},
    };
    const cJSON *classes = cJSON_GetObjectItemCaseSensitive(q, "classes");
    for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(classes, keys[i][1]);
        cJSON_AddStringToObject(sch, keys[i][0], cJSON_IsString(v) ? v->valuestring : "absent");
    }
    cJSON_Delete(q);
    const struct backend_scheme *ex = &c->sch[BACKEND_CLASS_MOE];
    cJSON_AddStringToObject(sch, "experts_short", backend_scheme_str(ex));
    bool act = false;
    for (int i = 0; i < BACKEND_CLASS_COUNT; i++)
        act |= c->sch[i].present && c->sch[i].kind == QUANT_KIND_NVFP4 && c->sch[i].act_fp4;
    cJSON_AddBoolToObject(sch, "activations_quantized", act);

    cJSON *t = cJSON_AddObjectToObject(o, "tensors");
    add_i64(t, "total", s->n_tensors);
    add_i64(t, "skipped", s->n_skipped);
    cJSON *tg = cJSON_AddObjectToObject(t, "groups");
    for (int i = 0; i < MODEL_GROUP_COUNT; i++)
        add_i64(tg, model_group_name((enum model_group)i), s->group_tensors[i]);

    cJSON *mt = cJSON_AddObjectToObject(o, "mtp");
    cJSON_AddNumberToObject(mt, "declared_layers", cfg->mtp_n_layers);
    add_i64(mt, "tensors", s->n_mtp_tensors);
    add_i64(mt, "bytes", s->mtp_bytes);
    add_i64(mt, "expert_bytes", c->mtp_expert_bytes);
    cJSON_AddBoolToObject(mt, "usable", c->mtp_usable);
    char wb[400];
    const char *w = inspect_mtp_warning(c->m, wb, sizeof(wb));
    cJSON_AddStringToObject(mt, "note", w ? w : "");

    cJSON *vis = cJSON_AddObjectToObject(o, "vision");
    cJSON_AddBoolToObject(vis, "present", s->group_tensors[MODEL_GROUP_VISUAL] > 0);
    add_i64(vis, "tensors", s->group_tensors[MODEL_GROUP_VISUAL]);
    add_i64(vis, "bytes", s->group_bytes[MODEL_GROUP_VISUAL]);

    cJSON *r = cJSON_AddObjectToObject(o, "resident");
    cJSON *rg = cJSON_AddObjectToObject(r, "groups");
    for (int i = 0; i < MODEL_GROUP_COUNT; i++)
        add_i64(rg, model_group_name((enum model_group)i), s->group_bytes[i]);
    add_i64(r, "total_bytes", c->resident);
    add_i64(r, "total_with_mtp_bytes", c->resident + (c->mtp_usable ? s->mtp_bytes : 0));
    cJSON_AddNumberToObject(r, "total_gib", round_to((double)c->resident / GIB, 1e-4));

    cJSON *kv = cJSON_AddObjectToObject(o, "kv");
    for (int d = 0; d < 2; d++) {
        const struct kv_plan *p = &c->kv[d];
        cJSON *k = cJSON_AddObjectToObject(kv, d ? "fp8" : "bf16");
        add_i64(k, "bytes_per_token", p->kv_bytes_per_token);
        add_i64(k, "bytes_per_token_with_mtp",
                p->kv_bytes_per_token + (c->mtp_usable ? p->kv_bytes_per_token_layer : 0));
        add_i64(k, "state_bytes_per_seq", p->state_bytes_per_seq);
        cJSON_AddNumberToObject(k, "tokens_per_gib", round_to(p->tokens_per_gib, 1.0));
        add_i64(k, "at_context", p->max_model_len);
    }

    cJSON *a = cJSON_AddObjectToObject(o, "decode");
    int E = cfg->n_experts, k = cfg->n_experts_per_tok;
    add_i64(a, "active_weight_bytes", c->active_weights);
    add_i64(a, "routed_expert_bytes", E > 0 ? s->group_bytes[MODEL_GROUP_EXPERTS] * k / E : 0);
    add_i64(a, "linear_attn_bytes", s->group_bytes[MODEL_GROUP_LINEAR_ATTN]);
    add_i64(a, "attention_bytes", s->group_bytes[MODEL_GROUP_FULL_ATTN]);
    add_i64(a, "shared_expert_bytes", s->group_bytes[MODEL_GROUP_SHARED]);
    add_i64(a, "lm_head_bytes", c->lm_head_bytes);
    add_i64(a, "experts_per_token", k);
    add_i64(a, "experts", E);
    return o;
}

static cJSON *eval_json(const struct ckpt *c, const struct gpu_eval *ev, int64_t ctx)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "label", c->label);
    cJSON *b = cJSON_AddObjectToObject(o, "backends");
    for (int i = 0; i < BACKEND_CLASS_COUNT; i++) {
        if (!c->sch[i].present)
            continue;
        cJSON *e = cJSON_AddObjectToObject(b, backend_class_name((enum backend_class)i));
        cJSON_AddStringToObject(e, "scheme", backend_scheme_str(&c->sch[i]));
        cJSON_AddStringToObject(e, "backend", backend_name(ev->plan.cls[i].id));
        cJSON_AddStringToObject(e, "reason", ev->plan.cls[i].reason);
    }
    add_i64(o, "max_position_embeddings", c->m->cfg.max_position_embeddings);
    add_i64(o, "max_context_bf16", ev->max_ctx[0]);
    add_i64(o, "max_context_fp8", ev->max_ctx[1]);
    add_i64(o, "max_context_bf16_mtp", ev->max_ctx_mtp);
    cJSON_AddBoolToObject(o, "runs", ev->runs);
    cJSON_AddStringToObject(o, "backend_error", ev->backend_err);
    cJSON_AddBoolToObject(o, "fits", ev->fits);
    add_i64(o, "fit_tokens", ev->fit_need);
    add_i64(o, "context_tokens", ctx);
    add_i64(o, "decode_bytes_per_token", ev->decode_bytes);
    cJSON_AddNumberToObject(o, "roofline_tokens_per_s", round_to(ev->tps, 0.1));
    cJSON *m = cJSON_AddArrayToObject(o, "mtp");
    for (int a = 0; a < 2 && c->mtp_usable; a++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "acceptance", ACCEPT[a]);
        cJSON_AddNumberToObject(e, "best_k", ev->best_k[a]);
        cJSON_AddNumberToObject(e, "speedup", round_to(ev->speedup[a], 0.001));
        cJSON_AddNumberToObject(e, "tokens_per_s", round_to(ev->tps * ev->speedup[a], 0.1));
        cJSON_AddItemToArray(m, e);
    }
    return o;
}

/* One line: which checkpoint to use on this GPU and why. */
/* snprintf at *o into buf, clamped: a long line is cut, never overrun. */
static void append(char *buf, size_t len, size_t *o, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *o, const char *fmt, ...)
{
    if (*o + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *o, len - *o, fmt, ap);
    va_end(ap);
    if (n > 0)
        *o = *o + (size_t)n < len ? *o + (size_t)n : len - 1;
}

static void recommend(const struct ckpt *cs, const struct gpu_eval *ev, int n,
                      const struct gpu_info *gpu, cJSON *out)
{
    int best = -1;
    double best_tps = 0;
    for (int i = 0; i < n; i++) {
        if (!ev[i].fits)
            continue;
        double tps = ev[i].tps * (ev[i].speedup[0] > 1.0 ? ev[i].speedup[0] : 1.0);
        bool better = best < 0 || tps > best_tps * 1.02;
        /* within 2%: prefer the checkpoint that does not quantize activations */
        if (!better && best >= 0 && tps > best_tps * 0.98) {
            bool act_i = cs[i].sch[BACKEND_CLASS_MOE].act_fp4;
            bool act_b = cs[best].sch[BACKEND_CLASS_MOE].act_fp4;
            better = !act_i && act_b;
        }
        if (better) {
            best = i;
            best_tps = tps;
        }
    }
    int close = -1; /* another usable checkpoint within 2% of the choice */
    for (int i = 0; best >= 0 && i < n; i++) {
        double tps = ev[i].tps * (ev[i].speedup[0] > 1.0 ? ev[i].speedup[0] : 1.0);
        if (i != best && ev[i].fits && tps > best_tps * 0.98)
            close = i;
    }
    char line[1400] = "";
    size_t o = 0;
    if (best < 0) {
        append(line, sizeof(line), &o, "%s: none of the checkpoints is usable:",
                              gpu->name);
    } else {
        const struct ckpt *c = &cs[best];
        const struct gpu_eval *e = &ev[best];
        append(line, sizeof(line), &o, "%s: use %s (%s, experts on %s): %.0f tok/s "
                              "batch-1 roofline", gpu->name, c->label,
                              backend_scheme_str(&c->sch[BACKEND_CLASS_MOE]),
                              backend_name(e->plan.cls[BACKEND_CLASS_MOE].id), e->tps);
        if (c->mtp_usable && e->speedup[0] > 1.0)
            append(line, sizeof(line), &o, ", x%.2f with MTP K=%d at "
                                  "acceptance 0.6", e->speedup[0], e->best_k[0]);
        else if (!c->mtp_usable)
            append(line, sizeof(line), &o, ", no MTP");
        else
            append(line, sizeof(line), &o, ", MTP does not pay here");
        bool with_mtp = c->mtp_usable && e->speedup[0] > 1.0;
        append(line, sizeof(line), &o, "; one sequence fits %lld tokens "
                              "(bf16 KV%s)", (long long)(with_mtp ? e->max_ctx_mtp : e->max_ctx[0]),
                              with_mtp ? ", MTP resident" : "");
        if (close >= 0)
            append(line, sizeof(line), &o, "; %s is within 2%%: %s",
                                  cs[close].label, c->sch[BACKEND_CLASS_MOE].act_fp4
                                      ? "equal speed" : "weight-only quantization preferred");
    }
    bool first = true;
    for (int i = 0; i < n; i++) {
        if (i == best)
            continue;
        const struct ckpt *c = &cs[i];
        const struct gpu_eval *e = &ev[i];
        char why[200];
        if (!c->served)
            snprintf(why, sizeof(why), "not a model tern serves");
        else if (!e->runs)
            snprintf(why, sizeof(why), "no kernel path on sm_%d", gpu->sm);
        else if (!e->fits)
            snprintf(why, sizeof(why), "weights + one %lld-token sequence do not fit",
                     (long long)e->fit_need);
        else
            snprintf(why, sizeof(why), "%.0f tok/s%s", e->tps *
                     (e->speedup[0] > 1.0 ? e->speedup[0] : 1.0),
                     !c->mtp_usable ? ", no MTP tensors"
                     : e->speedup[0] > 1.0 ? " with MTP" : " (MTP does not pay here)");
        append(line, sizeof(line), &o, "%s %s %s",
                              first ? (best >= 0 ? "; others:" : "") : ",", c->label, why);
        first = false;
    }
    cJSON_AddStringToObject(out, "choice", best >= 0 ? cs[best].label : "");
    cJSON_AddStringToObject(out, "line", line);
}

struct cJSON *compare_build(const char *const *dirs, int n, const struct compare_opts *o,
                            char *err, size_t errlen)
{
    if (n < 1 || n > COMPARE_MAX_DIRS) {
        snprintf(err, errlen, "compare takes 1 to %d checkpoint directories (got %d)",
                 COMPARE_MAX_DIRS, n);
        return NULL;
    }
    struct ckpt cs[COMPARE_MAX_DIRS];
    struct gpu_eval ev[COMPARE_MAX_DIRS];
    memset(cs, 0, sizeof(cs));
    cJSON *root = NULL;
    int nc = 0;
    for (; nc < n; nc++)
        if (ckpt_init(&cs[nc], dirs[nc], nc, err, errlen) < 0)
            goto out;
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "tool", "tern compare");
    cJSON_AddNumberToObject(root, "format_version", 1);
    cJSON *as = cJSON_AddObjectToObject(root, "assumptions");
    add_i64(as, "context_tokens", o->context_tokens);
    add_i64(as, "reserve_bytes", o->reserve_bytes);
    cJSON_AddNumberToObject(as, "gpu_memory_utilization", o->gpu_memory_utilization);
    add_i64(as, "fit_tokens", o->fit_tokens);
    cJSON_AddStringToObject(as, "force_moe", backend_name(o->force_moe));
    cJSON_AddStringToObject(as, "force_linear", backend_name(o->force_linear));
    cJSON *ca = cJSON_AddArrayToObject(root, "checkpoints");
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(ca, ckpt_json(&cs[i]));
    cJSON *ga = cJSON_AddArrayToObject(root, "gpus");
    int ng = o->n_gpus > 0 ? o->n_gpus : gpu_table_count();
    for (int gi = 0; gi < ng; gi++) {
        const struct gpu_info *gpu = o->n_gpus > 0 ? o->gpus[gi] : gpu_table_at(gi);
        cJSON *g = cJSON_CreateObject();
        cJSON_AddItemToArray(ga, g);
        cJSON_AddStringToObject(g, "name", gpu->name);
        cJSON_AddStringToObject(g, "display", gpu->display);
        add_i64(g, "mem_bytes", gpu->mem_bytes);
        const char *bw_src;
        double bw = gpu_table_roofline_gbps(gpu, &bw_src);
        cJSON_AddNumberToObject(g, "mem_gbps_spec", gpu->mem_gbps_spec);
        cJSON_AddNumberToObject(g, "mem_gbps_measured", gpu->mem_gbps_measured);
        cJSON_AddNumberToObject(g, "roofline_gbps", bw);
        cJSON_AddStringToObject(g, "roofline_gbps_source", bw_src);
        cJSON_AddNumberToObject(g, "sm", gpu->sm);
        cJSON_AddBoolToObject(g, "fp8_mma", gpu->fp8_mma);
        cJSON_AddBoolToObject(g, "fp4_mma_sync", gpu->fp4_mma_sync);
        cJSON_AddBoolToObject(g, "fp4_tcgen05", gpu->fp4_tcgen05);
        cJSON_AddBoolToObject(g, "unified_memory", gpu->unified_memory);
        cJSON *ge = cJSON_AddArrayToObject(g, "checkpoints");
        for (int i = 0; i < n; i++) {
            if (gpu_eval(&cs[i], gpu, o, &ev[i], err, errlen) < 0) {
                cJSON_Delete(root);
                root = NULL;
                goto out;
            }
            cJSON_AddItemToArray(ge, eval_json(&cs[i], &ev[i], o->context_tokens));
        }
        recommend(cs, ev, n, gpu, cJSON_AddObjectToObject(g, "recommendation"));
    }
out:
    for (int i = 0; i < n; i++)
        ckpt_deinit(&cs[i]);
    return root;
}

int compare_run(const char *const *dirs, int n, const struct compare_opts *o, bool json, FILE *f,
                char *err, size_t errlen)
{
    cJSON *c = compare_build(dirs, n, o, err, errlen);
    if (!c)
        return ERR_INVAL;
    if (json) {
        char *s = cJSON_PrintUnformatted(c);
        fprintf(f, "%s\n", s);
        cJSON_free(s);
    } else {
        compare_print_text(f, c);
    }
    cJSON_Delete(c);
    return 0;
}
