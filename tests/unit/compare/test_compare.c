/* tern compare on tiny checkpoints written by the built `tern make-tiny-model`:
 *   A  NVFP4 weight-only (compressed-tensors), --no-mtp (the config still declares MTP)
 *   B  NVFP4 W4A4 (compressed-tensors) with its bf16 MTP head
 *   C  BF16, sharded into several files
 * Checks: the per-group bytes compare reports from headers equal the bytes a full load maps
 * (and the shard files' data sizes); schemes and MTP lines; kernel paths per GPU; forced
 * impossible backends fail with one line; --json is stable and parses; a directory holding
 * only the JSON files and each shard's 8+N header bytes gives the same answer; KV, context and
 * roofline figures against arithmetic done here from config.json; config.json alone (a directory,
 * a config.json path, the full-size tests/configs) gives the header path's bytes per group (tiny)
 * and `tern roofline`'s byte count (full size), marked as an estimate in text and JSON. */
#include "common/file.h"
#include "common/xalloc.h"
#include "model/compare.h"
#include "model/gpu_table.h"
#include "model/model.h"
#include "model/model_load.h"
#include "model/qweight.h"
#include "model/roofline.h"
#include "model/safetensors.h"
#include "test.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tern[1200];

/* Run cmd; stdout+stderr into a malloc'd string; exit status into *rc. */
static char *run(const char *cmd, int *rc)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 16, n = 0, r;
    char *buf = xmalloc(cap);
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (n + 1 >= cap) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
    }
    buf[n] = '\0';
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

static int make_tiny(const char *dir, const char *args)
{
    char cmd[4096];
    int rc;
    snprintf(cmd, sizeof(cmd), "'%s' make-tiny-model '%s' %s 2>&1", tern, dir, args);
    char *out = run(cmd, &rc);
    if (rc != 0)
        fprintf(stderr, "make-tiny-model failed: %s\n", out ? out : "");
    free(out);
    return rc;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Data bytes of every shard: file size - 8 - header length. */
static int64_t shard_data_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    int64_t total = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!ends_with(e->d_name, ".safetensors"))
            continue;
        char p[2048];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "rb");
        unsigned char h[8] = {0};
        struct stat st;
        if (!f || fread(h, 1, 8, f) != 8 || stat(p, &st) != 0) {
            total = -1;
            if (f)
                fclose(f);
            break;
        }
        fclose(f);
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--)
            n = n << 8 | h[i];
        total += (int64_t)st.st_size - 8 - (int64_t)n;
    }
    if (d)
        closedir(d);
    return total;
}

/* Copy dir's JSON files and the first 8+N bytes of each shard into out. */
static int copy_header_only(const char *dir, const char *out)
{
    if (mkdir(out, 0755) != 0)
        return -1;
    DIR *d = opendir(dir);
    struct dirent *e;
    int rc = 0;
    while (d && rc == 0 && (e = readdir(d))) {
        bool st = ends_with(e->d_name, ".safetensors");
        if (!st && !ends_with(e->d_name, ".json"))
            continue;
        char src[2048], dst[2048];
        snprintf(src, sizeof(src), "%s/%s", dir, e->d_name);
        snprintf(dst, sizeof(dst), "%s/%s", out, e->d_name);
        FILE *f = fopen(src, "rb"), *g = fopen(dst, "wb");
        if (!f || !g) {
            rc = -1;
        } else {
            size_t cap = 8 << 20;
            char *buf = xmalloc(cap);
            size_t n = fread(buf, 1, cap, f);
            size_t keep = n;
            if (st && n >= 8) {
                uint64_t h = 0;
                for (int i = 7; i >= 0; i--)
                    h = h << 8 | (unsigned char)buf[i];
                keep = (size_t)(8 + h);
            }
            if (keep > n || fwrite(buf, 1, keep, g) != keep)
                rc = -1;
            free(buf);
        }
        if (f)
            fclose(f);
        if (g)
            fclose(g);
    }
    if (d)
        closedir(d);
    return rc;
}

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1.0;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static cJSON *build(const char *const *dirs, int n, const char *const *gpus, int ng,
                    enum backend_id fm, char *err, size_t errlen)
{
    struct compare_opts o;
    compare_opts_default(&o);
    for (int i = 0; i < ng; i++)
        o.gpus[o.n_gpus++] = gpu_table_find(gpus[i]);
    o.force_moe = fm;
    return compare_build(dirs, n, &o, err, errlen);
}

/* Group bytes of a full (data-mapped) load must equal what compare read from the headers. */
static void check_bytes(const char *dir, const cJSON *ck)
{
    struct model *m = NULL;
    char err[1024];
    struct model_load_opts lo = {.header_only = false};
    CHECK_EQ_INT(model_load(&m, dir, &lo, err, sizeof(err)), 0);
    if (!m)
        return;
    const struct st_set *set = model_load_tensors(m);
    CHECK(st_has_data(set));
    int64_t mapped[MODEL_GROUP_COUNT] = {0}, all = 0;
    for (int64_t i = 0; i < st_count(set); i++) {
        const struct st_tensor *t = st_at(set, i);
        CHECK(t->data != NULL);
        mapped[model_group_of(t->name)] += t->nbytes;
        all += t->nbytes;
    }
    const cJSON *rg = get(get(ck, "resident"), "groups");
    for (int g = 0; g < MODEL_GROUP_COUNT; g++)
        CHECK_EQ_INT((int64_t)num(rg, model_group_name((enum model_group)g)), mapped[g]);
    CHECK_EQ_INT(all, shard_data_bytes(dir));
    /* independent of names: the experts' qweights as the loader built them */
    int64_t ex = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int e = 0; e < m->cfg.n_experts; e++)
            ex += qweight_bytes(&m->layers[l].moe.gate[e]) +
                  qweight_bytes(&m->layers[l].moe.up[e]) +
                  qweight_bytes(&m->layers[l].moe.down[e]);
    CHECK_EQ_INT(ex, (int64_t)num(rg, "experts"));
    CHECK_EQ_INT(qweight_bytes(&m->lm_head), (int64_t)num(rg, "lm_head"));
    int64_t resident = all - mapped[MODEL_GROUP_MTP] - mapped[MODEL_GROUP_VISUAL] -
                       mapped[MODEL_GROUP_OTHER];
    CHECK_EQ_INT((int64_t)num(get(ck, "resident"), "total_bytes"), resident);
    CHECK_EQ_INT((int64_t)num(get(ck, "mtp"), "bytes"), mapped[MODEL_GROUP_MTP]);
    /* weights read per decoded token (docs/COMPARE.md): top-k of E routed experts, everything
     * else of the main model once, lm_head, one embedding row */
    const struct model_config *cfg = &m->cfg;
    int64_t active = mapped[MODEL_GROUP_EXPERTS] * cfg->n_experts_per_tok / cfg->n_experts +
                     mapped[MODEL_GROUP_SHARED] + mapped[MODEL_GROUP_ROUTER] +
                     mapped[MODEL_GROUP_LINEAR_ATTN] + mapped[MODEL_GROUP_FULL_ATTN] +
                     mapped[MODEL_GROUP_NORMS] + mapped[MODEL_GROUP_LM_HEAD] +
                     mapped[MODEL_GROUP_EMBED] / cfg->vocab_size;
    CHECK_EQ_INT((int64_t)num(get(ck, "decode"), "active_weight_bytes"), active);
    CHECK_EQ_INT((int64_t)num(get(ck, "decode"), "linear_attn_bytes"),
                 mapped[MODEL_GROUP_LINEAR_ATTN]);
    CHECK_EQ_INT((int64_t)num(get(ck, "decode"), "routed_expert_bytes"),
                 mapped[MODEL_GROUP_EXPERTS] * cfg->n_experts_per_tok / cfg->n_experts);
    model_destroy(m);
}

/* KV, context and roofline numbers redone from config.json. */
static void check_arith(const char *dir, const cJSON *ck, const cJSON *gpu_ev,
                        const struct gpu_info *g)
{
    char p[2048];
    snprintf(p, sizeof(p), "%s/config.json", dir);
    FILE *f = fopen(p, "rb");
    char *text = xcalloc(1, 1 << 16);
    if (f) {
        size_t n = fread(text, 1, (1 << 16) - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *tc = get(root, "text_config");
    CHECK(tc != NULL);
    int n_full = 0, n_lin = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, get(tc, "layer_types"))
    {
        if (strcmp(e->valuestring, "full_attention") == 0)
            n_full++;
        else
            n_lin++;
    }
    double kvh = num(tc, "num_key_value_heads"), hd = num(tc, "head_dim");
    int64_t kv_tok = (int64_t)(2 * kvh * hd * 2) * n_full;
    int64_t conv = (int64_t)(2 * num(tc, "linear_num_key_heads") * num(tc, "linear_key_head_dim") +
                             num(tc, "linear_num_value_heads") * num(tc, "linear_value_head_dim"));
    int64_t state = n_lin * (conv * ((int64_t)num(tc, "linear_conv_kernel_dim") - 1) * 2 +
                             (int64_t)(num(tc, "linear_num_value_heads") *
                                       num(tc, "linear_key_head_dim") *
                                       num(tc, "linear_value_head_dim")) * 4);
    cJSON_Delete(root);
    const cJSON *kv = get(get(ck, "kv"), "bf16");
    CHECK_EQ_INT((int64_t)num(kv, "bytes_per_token"), kv_tok);
    CHECK_EQ_INT((int64_t)num(get(get(ck, "kv"), "fp8"), "bytes_per_token"), kv_tok / 2);
    CHECK_EQ_INT((int64_t)num(kv, "state_bytes_per_seq"), state);
    /* longest single sequence: 16-token blocks in 0.9 x memory - weights - 2 GiB - one state */
    int64_t resident = (int64_t)num(get(ck, "resident"), "total_bytes");
    int64_t budget = (int64_t)((double)g->mem_bytes * 0.9) - resident - (2LL << 30);
    int64_t want = (budget - state) / (kv_tok * 16) * 16;
    CHECK_EQ_INT((int64_t)num(gpu_ev, "max_context_bf16"), want);
    /* with the MTP head resident and its attention layer's KV (one more layer) */
    int64_t mtp_bytes = (int64_t)num(get(ck, "mtp"), "bytes");
    int64_t want_mtp = 0;
    if (mtp_bytes > 0)
        want_mtp = (budget - mtp_bytes - state) / ((kv_tok + (int64_t)(2 * kvh * hd * 2)) * 16) *
                   16;
    CHECK_EQ_INT((int64_t)num(gpu_ev, "max_context_bf16_mtp"), want_mtp);
    /* roofline: bandwidth / (active weights + KV at 8192 + state read and written) */
    int64_t bytes = (int64_t)num(get(ck, "decode"), "active_weight_bytes") + kv_tok * 8192 +
                    2 * state;
    CHECK_EQ_INT((int64_t)num(gpu_ev, "decode_bytes_per_token"), bytes);
    CHECK_NEAR(num(gpu_ev, "roofline_tokens_per_s"),
               gpu_table_roofline_gbps(g, NULL) * 1e9 / (double)bytes, 0.06);
}

static const char *backend_of(const cJSON *cmp, int gpu, int ck, const char *cls);

// ---- config.json alone ----

static int64_t group(const cJSON *ck, const char *g)
{
    return (int64_t)num(get(get(ck, "resident"), "groups"), g);
}

/* The same checkpoint read from its headers (h) and from its config.json alone (c): every matrix
 * group to the byte; vectors count as fp32 (as tern keeps them) where the checkpoint stores bf16
 * (norms, GDN conv1d and dt_bias; A_log is f32 on disk too). */
static void check_config_only_tiny(const cJSON *h, const cJSON *c, const char *dir)
{
    CHECK_STREQ(str(h, "source"), "headers");
    CHECK_STREQ(str(c, "source"), "config_only");
    static const char *const exact[] = {"embedding", "lm_head", "full_attn", "experts",
                                        "shared_experts", "router"};
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
        CHECK_EQ_INT(group(c, exact[i]), group(h, exact[i]));
    CHECK_EQ_INT(group(c, "norms"), 2 * group(h, "norms"));
    struct model *m = NULL;
    char err[1024];
    struct model_load_opts lo = {.header_only = true};
    CHECK_EQ_INT(model_load(&m, dir, &lo, err, sizeof(err)), 0);
    if (m) {
        const struct model_config *k = &m->cfg;
        int64_t cd = 2LL * k->lin_n_k_heads * k->lin_k_head_dim +
                     (int64_t)k->lin_n_v_heads * k->lin_v_head_dim;
        int n_gdn = 0;
        for (int l = 0; l < k->n_layers; l++)
            n_gdn += k->layer_types[l] != LAYER_FULL_ATTN;
        CHECK_EQ_INT(group(c, "linear_attn") - group(h, "linear_attn"),
                     2 * n_gdn * (cd * k->lin_conv_kernel + k->lin_n_v_heads));
        model_destroy(m);
    }
    CHECK_EQ_INT((int64_t)num(get(c, "mtp"), "expert_bytes"),
                 (int64_t)num(get(h, "mtp"), "expert_bytes"));
    CHECK(num(get(c, "mtp"), "bytes") >= num(get(h, "mtp"), "bytes"));
    CHECK(cJSON_IsTrue(get(get(c, "mtp"), "usable")));
    CHECK_STREQ(str(get(c, "schemes"), "experts"), str(get(h, "schemes"), "experts"));
    CHECK_STREQ(str(get(c, "schemes"), "linear_attention"),
                str(get(h, "schemes"), "linear_attention"));
}

/* A full-size config (tests/configs) alone: compare's groups are the dummy loader's and agree with
 * `tern roofline`'s byte count (model/roofline.c: the qweights the loader built, an independent
 * sum); BF16 experts also by hand. */
static void check_config_only_full(const char *name, const cJSON *ck)
{
    const char *src = getenv("TERN_SOURCE_DIR");
    char path[1024], dir[256], err[1024];
    snprintf(path, sizeof(path), "%s/tests/configs/%s", src ? src : ".", name);
    CHECK_STREQ(str(ck, "source"), "config_only");
    CHECK_STREQ(str(ck, "path"), path);
    CHECK_EQ_INT(file_tmpdir_copy(path, "tern-compare-test", "config.json", dir, sizeof(dir)), 0);
    struct model *m = NULL;
    struct model_load_opts lo = {.header_only = true, .dummy = true};
    CHECK_EQ_INT(model_load(&m, dir, &lo, err, sizeof(err)), 0);
    file_tmpdir_remove(dir, "config.json");
    if (!m)
        return;
    const struct model_load_stats *s = model_load_stats(m);
    for (int g = 0; g < MODEL_GROUP_COUNT; g++)
        CHECK_EQ_INT(group(ck, model_group_name((enum model_group)g)), s->group_bytes[g]);
    const struct model_config *c = &m->cfg;
    struct roofline_step r;
    struct roofline_opts ro = {.batch = 1, .ctx = 0, .kv_elem = 2};
    CHECK_EQ_INT(roofline_decode(m, &ro, &r), 0);
    const cJSON *d = get(ck, "decode");
    CHECK_NEAR(num(d, "lm_head_bytes"), r.lm_head, 0.5);
    CHECK_NEAR((double)group(ck, "experts"), r.expert_bytes * c->n_experts * c->n_layers,
               1e-9 * r.experts * c->n_experts);
    /* weights read per token: roofline's dense + experts + lm_head at batch 1 */
    CHECK_NEAR(num(d, "active_weight_bytes"), r.dense + r.experts + r.lm_head, 16);
    if (strcmp(name, "qwen3.6-35b-a3b.json") == 0) {
        CHECK_EQ_INT(group(ck, "experts"),
                     (int64_t)c->n_layers * c->n_experts * 3 * c->moe_inter * c->hidden_size * 2);
        CHECK_STREQ(str(get(ck, "schemes"), "experts"), "BF16");
    }
    CHECK_EQ_INT((int)num(get(ck, "mtp"), "declared_layers"), 1);
    CHECK(cJSON_IsTrue(get(get(ck, "mtp"), "usable")));
    model_destroy(m);
}

static void test_config_only(const char *tmp, const char *bf16_dir, const char *w4a4_dir)
{
    char F[256], E[256], cmd[8192], err[1024];
    /* tiny: a directory holding only config.json, and a config.json path, beside the headers */
    snprintf(F, sizeof(F), "%s/fp8", tmp);
    CHECK_EQ_INT(make_tiny(F, "--format fp8-block --seed 3"), 0);
    const char *full[3] = {bf16_dir, w4a4_dir, F};
    const char *gpus[1] = {"h200"};
    for (int i = 0; i < 3; i++) {
        snprintf(E, sizeof(E), "%s/config_only_%d", tmp, i);
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && cp '%s/config.json' '%s/'", E, full[i], E);
        CHECK_EQ_INT(system(cmd), 0);
        char cfg_path[300];
        snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", full[i]);
        const char *dirs[3] = {full[i], E, cfg_path};
        cJSON *cmp = build(dirs, 3, gpus, 1, BACKEND_AUTO, err, sizeof(err));
        CHECK(cmp != NULL);
        if (!cmp) {
            fprintf(stderr, "compare_build: %s\n", err);
            continue;
        }
        const cJSON *cks = get(cmp, "checkpoints");
        check_config_only_tiny(cJSON_GetArrayItem(cks, 0), cJSON_GetArrayItem(cks, 1), full[i]);
        check_config_only_tiny(cJSON_GetArrayItem(cks, 0), cJSON_GetArrayItem(cks, 2), full[i]);
        cJSON_Delete(cmp);
    }

    /* full size, BF16 / FP8 / NVFP4 configs given as .json paths */
    const char *src = getenv("TERN_SOURCE_DIR");
    static const char *const names[3] = {"qwen3.6-35b-a3b.json", "qwen3.6-35b-a3b-fp8.json",
                                         "qwen3.6-35b-a3b-nvfp4.json"};
    char paths[3][1024];
    const char *dirs[3];
    for (int i = 0; i < 3; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/tests/configs/%s", src ? src : ".", names[i]);
        dirs[i] = paths[i];
    }
    cJSON *cmp = build(dirs, 3, gpus, 1, BACKEND_AUTO, err, sizeof(err));
    CHECK(cmp != NULL);
    if (cmp) {
        for (int i = 0; i < 3; i++)
            check_config_only_full(names[i], cJSON_GetArrayItem(get(cmp, "checkpoints"), i));
        /* the experts on the H200: bf16, fp8, nvfp4_w4a16 */
        CHECK_STREQ(backend_of(cmp, 0, 0, "moe"), "bf16");
        CHECK_STREQ(backend_of(cmp, 0, 1, "moe"), "fp8");
        CHECK_STREQ(backend_of(cmp, 0, 2, "moe"), "nvfp4_w4a16");
    }
    cJSON_Delete(cmp);

    /* the CLI marks it, in text and in JSON */
    int rc;
    snprintf(cmd, sizeof(cmd), "'%s' compare '%s' '%s' --gpu h200", tern, paths[2], w4a4_dir);
    char *out = run(cmd, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(out && strstr(out, "note: A: estimated from config.json (no tensor headers)"));
    CHECK(out && !strstr(out, "note: B: estimated"));
    CHECK(out && strstr(out, "config.json (estimated)") && strstr(out, "tensor headers"));
    free(out);
    snprintf(cmd, sizeof(cmd), "'%s' compare '%s' --gpu h200 --json", tern, paths[0]);
    out = run(cmd, &rc);
    CHECK_EQ_INT(rc, 0);
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    CHECK_STREQ(str(cJSON_GetArrayItem(get(j, "checkpoints"), 0), "source"), "config_only");
    cJSON_Delete(j);
    free(out);
    /* no config.json either: one line naming it */
    snprintf(E, sizeof(E), "%s/empty", tmp);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && '%s' compare '%s' --gpu h200 2>&1", E, tern, E);
    out = run(cmd, &rc);
    CHECK_EQ_INT(rc, 1);
    CHECK(out && strncmp(out, "tern compare: ", 14) == 0 && strstr(out, "config.json") &&
          strchr(out, '\n') == out + strlen(out) - 1);
    free(out);
}

static const cJSON *eval_of(const cJSON *cmp, int gpu, int ck)
{
    return cJSON_GetArrayItem(get(cJSON_GetArrayItem(get(cmp, "gpus"), gpu), "checkpoints"), ck);
}

static const char *backend_of(const cJSON *cmp, int gpu, int ck, const char *cls)
{
    return str(get(get(eval_of(cmp, gpu, ck), "backends"), cls), "backend");
}

static void strip_paths(cJSON *cmp)
{
    cJSON *c;
    cJSON_ArrayForEach(c, get(cmp, "checkpoints"))
        cJSON_DeleteItemFromObjectCaseSensitive(c, "path");
}

int main(void)
{
    const char *bd = getenv("TERN_BUILD_DIR");
    snprintf(tern, sizeof(tern), "%s/bin/tern", bd ? bd : "build");
    if (access(tern, X_OK) != 0)
        TEST_SKIP("tern binary not built");
    char tmp[] = "/tmp/tern_compare_XXXXXX";
    if (!mkdtemp(tmp))
        TEST_SKIP("no temp dir");
    char A[256], B[256], C[256], BH[256], CH[256], cmd[8192];
    snprintf(A, sizeof(A), "%s/w4a16", tmp);
    snprintf(B, sizeof(B), "%s/w4a4", tmp);
    snprintf(C, sizeof(C), "%s/bf16", tmp);
    snprintf(BH, sizeof(BH), "%s/w4a4_headers", tmp);
    snprintf(CH, sizeof(CH), "%s/bf16_headers", tmp);
    CHECK_EQ_INT(make_tiny(A, "--format nvfp4a16 --no-mtp"), 0);
    CHECK_EQ_INT(make_tiny(B, "--format nvfp4 --seed 2"), 0);
    CHECK_EQ_INT(make_tiny(C, "--format bf16 --hidden 256 --shard-mb 1"), 0);
    CHECK_EQ_INT(copy_header_only(B, BH), 0);
    CHECK_EQ_INT(copy_header_only(C, CH), 0);
    char err[1024];
    const char *dirs[3] = {A, B, C};
    const char *gpus[4] = {"h200", "gb10", "b200", "rtx-pro-6000"};
    cJSON *cmp = build(dirs, 3, gpus, 4, BACKEND_AUTO, err, sizeof(err));
    CHECK(cmp != NULL);
    if (!cmp) {
        fprintf(stderr, "compare_build: %s\n", err);
        return test_result();
    }
    const cJSON *cks = get(cmp, "checkpoints");
    CHECK_EQ_INT(cJSON_GetArraySize(cks), 3);
    CHECK_EQ_INT(cJSON_GetArraySize(get(cmp, "gpus")), 4);

    /* bytes: headers vs what the loader maps */
    for (int i = 0; i < 3; i++)
        check_bytes(dirs[i], cJSON_GetArrayItem(cks, i));

    /* schemes and MTP */
    const cJSON *a = cJSON_GetArrayItem(cks, 0), *b = cJSON_GetArrayItem(cks, 1),
                *c = cJSON_GetArrayItem(cks, 2);
    CHECK(cJSON_IsTrue(get(a, "served")));
    CHECK(strstr(str(get(a, "schemes"), "experts"), "weight-only"));
    CHECK(cJSON_IsFalse(get(get(a, "schemes"), "activations_quantized")));
    CHECK(strstr(str(get(b, "schemes"), "experts"), "W4A4"));
    CHECK(cJSON_IsTrue(get(get(b, "schemes"), "activations_quantized")));
    CHECK_STREQ(str(get(c, "schemes"), "experts"), "BF16");
    CHECK_STREQ(str(get(a, "schemes"), "linear_attention"), "BF16");
    CHECK_STREQ(str(get(b, "schemes"), "mtp"), "BF16");
    CHECK_STREQ(str(get(a, "schemes"), "mtp"), "absent");
    CHECK_EQ_INT((int)num(get(a, "mtp"), "declared_layers"), 1);
    CHECK_EQ_INT((int)num(get(a, "mtp"), "tensors"), 0);
    CHECK(cJSON_IsFalse(get(get(a, "mtp"), "usable")));
    CHECK(strstr(str(get(a, "mtp"), "note"), "no mtp.* tensors"));
    CHECK_EQ_INT((int)num(get(b, "mtp"), "tensors"), 19);
    CHECK(cJSON_IsTrue(get(get(b, "mtp"), "usable")));
    CHECK_STREQ(str(get(b, "mtp"), "note"), "");
    CHECK(cJSON_IsFalse(get(get(b, "vision"), "present")));

    /* kernel paths: gpus = h200, gb10, b200, rtx-pro-6000 */
    CHECK_STREQ(backend_of(cmp, 0, 0, "moe"), "nvfp4_w4a16");
    CHECK_STREQ(backend_of(cmp, 0, 1, "moe"), "nvfp4_w4a16");
    CHECK(strstr(str(get(get(eval_of(cmp, 0, 1), "backends"), "moe"), "reason"), "sm_100+"));
    CHECK_STREQ(backend_of(cmp, 1, 0, "moe"), "nvfp4_w4a16");
    CHECK_STREQ(backend_of(cmp, 1, 1, "moe"), "nvfp4_w4a4_mma");
    CHECK_STREQ(backend_of(cmp, 1, 1, "attention"), "nvfp4_w4a4_mma");
    CHECK_STREQ(backend_of(cmp, 1, 1, "linear_attn"), "bf16");
    CHECK_STREQ(backend_of(cmp, 1, 1, "mtp"), "bf16");
    CHECK_STREQ(backend_of(cmp, 2, 1, "moe"), "nvfp4_w4a16");
    CHECK_STREQ(backend_of(cmp, 3, 1, "moe"), "nvfp4_w4a4_mma");
    for (int g = 0; g < 4; g++)
        CHECK_STREQ(backend_of(cmp, g, 2, "moe"), "bf16");
    CHECK(get(get(eval_of(cmp, 0, 0), "backends"), "mtp") == NULL);
    /* MTP figures only where MTP tensors exist */
    CHECK_EQ_INT(cJSON_GetArraySize(get(eval_of(cmp, 0, 0), "mtp")), 0);
    CHECK_EQ_INT(cJSON_GetArraySize(get(eval_of(cmp, 0, 1), "mtp")), 2);
    for (int g = 0; g < 4; g++) {
        const cJSON *rec = get(cJSON_GetArrayItem(get(cmp, "gpus"), g), "recommendation");
        CHECK(strlen(str(rec, "line")) > 10 && !strchr(str(rec, "line"), '\n'));
    }
    for (int i = 0; i < 3; i++)
        for (int g = 0; g < 2; g++)
            check_arith(dirs[i], cJSON_GetArrayItem(cks, i), eval_of(cmp, g, i),
                        gpu_table_find(gpus[g]));

    /* header-only copies give the same answer */
    const char *hd[2] = {BH, CH}, *fd[2] = {B, C};
    cJSON *h = build(hd, 2, gpus, 4, BACKEND_AUTO, err, sizeof(err));
    cJSON *full = build(fd, 2, gpus, 4, BACKEND_AUTO, err, sizeof(err));
    CHECK(h && full);
    if (h && full) {
        strip_paths(h);
        strip_paths(full);
        char *s1 = cJSON_PrintUnformatted(h), *s2 = cJSON_PrintUnformatted(full);
        CHECK_STREQ(s1, s2);
        cJSON_free(s1);
        cJSON_free(s2);
    }
    cJSON_Delete(h);
    cJSON_Delete(full);

    /* ModelOpt NVFP4 (W4A4, weight_scale_2 / input_scale names) takes the same paths */
    char D[256], X[256];
    snprintf(D, sizeof(D), "%s/modelopt", tmp);
    CHECK_EQ_INT(make_tiny(D, "--format modelopt-nvfp4"), 0);
    const char *dd[1] = {D};
    cJSON *mo = build(dd, 1, gpus, 2, BACKEND_AUTO, err, sizeof(err));
    CHECK(mo != NULL);
    if (mo) {
        CHECK_STREQ(str(get(cJSON_GetArrayItem(get(mo, "checkpoints"), 0), "schemes"), "method"),
                    "modelopt");
        CHECK_STREQ(backend_of(mo, 0, 0, "moe"), "nvfp4_w4a16");
        CHECK_STREQ(backend_of(mo, 1, 0, "moe"), "nvfp4_w4a4_mma");
        check_bytes(D, cJSON_GetArrayItem(get(mo, "checkpoints"), 0));
    }
    cJSON_Delete(mo);

    /* an architecture tern does not serve: reported, never recommended */
    snprintf(X, sizeof(X), "%s/other_arch", tmp);
    CHECK_EQ_INT(copy_header_only(A, X), 0);
    snprintf(cmd, sizeof(cmd), "sed -i 's/Qwen3_5MoeForConditionalGeneration/LlamaForCausalLM/' "
             "'%s/config.json'", X);
    CHECK_EQ_INT(system(cmd), 0);
    const char *xd[2] = {X, A};
    cJSON *ox = build(xd, 2, gpus, 1, BACKEND_AUTO, err, sizeof(err));
    CHECK(ox != NULL);
    if (ox) {
        const cJSON *x0 = cJSON_GetArrayItem(get(ox, "checkpoints"), 0);
        CHECK(cJSON_IsFalse(get(x0, "served")));
        CHECK(strstr(str(x0, "served_reason"), "LlamaForCausalLM"));
        CHECK(cJSON_IsFalse(get(eval_of(ox, 0, 0), "fits")));
        const cJSON *rec = get(cJSON_GetArrayItem(get(ox, "gpus"), 0), "recommendation");
        CHECK_STREQ(str(rec, "choice"), "B");
        CHECK(strstr(str(rec, "line"), "A not a model tern serves"));
    }
    cJSON_Delete(ox);

    /* forced impossible backend: library and CLI refuse with one line */
    CHECK(build(dirs, 1, gpus, 1, BACKEND_NVFP4_W4A4_MMA, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "nvfp4_w4a4_mma") && strstr(err, "sm_90") && strstr(err, "W4A16"));
    int rc;
    snprintf(cmd, sizeof(cmd), "'%s' compare '%s' --gpu h200 --moe-backend nvfp4_w4a4_mma 2>&1",
             tern, A);
    char *out = run(cmd, &rc);
    CHECK_EQ_INT(rc, 1);
    CHECK(out && strncmp(out, "tern compare: ", 14) == 0 && strchr(out, '\n') ==
          out + strlen(out) - 1 && strstr(out, "needs NVFP4 weights with quantized activations"));
    free(out);
    snprintf(cmd, sizeof(cmd), "'%s' compare '%s' --gpu gb10 --moe-backend nvfp4_w4a4_mma 2>&1",
             tern, B);
    out = run(cmd, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(out && strstr(out, "moe_backend=nvfp4_w4a4_mma reason=\"forced"));
    free(out);
    snprintf(cmd, sizeof(cmd), "'%s' compare '%s' --gpu nosuchgpu 2>&1", tern, A);
    out = run(cmd, &rc);
    CHECK_EQ_INT(rc, 2); /* a usage error */
    free(out);

    /* --json: stable across runs, equal to the library object, parses */
    snprintf(cmd, sizeof(cmd), "'%s' compare '%s' '%s' '%s' --gpu h200 --gpu gb10 --gpu b200 "
             "--gpu rtx-pro-6000 --json", tern, A, B, C);
    char *j1 = run(cmd, &rc);
    CHECK_EQ_INT(rc, 0);
    char *j2 = run(cmd, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(j1 && j2 && strcmp(j1, j2) == 0);
    char *lib = cJSON_PrintUnformatted(cmp);
    CHECK(j1 && strncmp(j1, lib, strlen(lib)) == 0 && strcmp(j1 + strlen(lib), "\n") == 0);
    cJSON *parsed = j1 ? cJSON_Parse(j1) : NULL;
    CHECK(parsed != NULL);
    CHECK_STREQ(str(parsed, "tool"), "tern compare");
    CHECK_STREQ(backend_of(parsed, 1, 1, "moe"), "nvfp4_w4a4_mma");
    CHECK_EQ_INT((int)num(get(cJSON_GetArrayItem(get(parsed, "checkpoints"), 1), "mtp"),
                          "tensors"), 19);
    cJSON_Delete(parsed);
    cJSON_free(lib);
    free(j1);
    free(j2);

    test_config_only(tmp, C, B);

    /* text form mentions every section */
    snprintf(cmd, sizeof(cmd), "'%s' compare '%s' '%s' --gpu gb10", tern, A, B);
    out = run(cmd, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(out && strstr(out, "recommendation: gb10:") && strstr(out, "MTP declared / present") &&
          strstr(out, "kernel moe") && strstr(out, "max context bf16 KV"));
    free(out);
    cJSON_Delete(cmp);

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", tmp);
    return test_result();
}
