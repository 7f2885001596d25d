/* tern roofline DIR|CONFIG.json [--load-format auto|dummy] [--ctx N] [--batch B]
 *               [--kv-cache-dtype bf16|fp8] [--gpu NAME] [--bw GB/s] [--json]
 * The bytes one decode step must move for a checkpoint (model/roofline.h), by part, and the
 * decode rate that the memory bandwidth allows: --gpu's from the GPU table (model/gpu_table.h,
 * measured copy bandwidth where there is one, else the spec sheet's), or --bw. Header-only:
 * reads formats and shapes, no weights (a config.json alone works with --load-format dummy).
 * Errors: one line, exit 1 (2 for usage). */
#include "cli.h"
#include "common/args.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "model/gpu_table.h"
#include "model/model_load.h"
#include "model/roofline.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tern_cmd_roofline(int argc, char **argv);
const char tern_cmd_roofline_help[] =
    "bytes per decode step and the bandwidth limit: roofline DIR|CONFIG.json [--ctx N] [--batch B]";

static int fail(const char *msg, const char *arg)
{
    fprintf(stderr, "tern roofline: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    return 1;
}

/* A path ending in .json is a config file: copy it into a fresh temp dir as config.json. */
static int config_dir(const char *path, char *dir, size_t dlen, bool *tmp)
{
    size_t n = strlen(path);
    *tmp = n >= 5 && strcmp(path + n - 5, ".json") == 0;
    if (!*tmp) {
        snprintf(dir, dlen, "%s", path);
        return 0;
    }
    return file_tmpdir_copy(path, "tern-roofline", "config.json", dir, dlen);
}

static void print_text(const struct roofline_step *r, const struct roofline_opts *o, double bw,
                       const char *bw_source)
{
    const double G = 1e9;
    printf("batch=%d ctx=%lld kv_elem_bytes=%d\n", o->batch, (long long)o->ctx, o->kv_elem);
    printf("dense_gb=%.4f experts_gb=%.4f (touched=%.2f per layer, %.2f MB each) lm_head_gb=%.4f\n",
           r->dense / G, r->experts / G, r->experts_touched, r->expert_bytes / 1e6, r->lm_head / G);
    printf("gdn_state_gb=%.4f kv_gb=%.4f total_gb=%.4f\n", r->gdn_state / G, r->kv / G,
           r->total / G);
    printf("bw_gbs=%.0f bw_source=\"%s\" step_us_min=%.1f limit_tok_s=%.1f (per stream %.1f)\n",
           bw, bw_source, r->total / (bw * G) * 1e6, o->batch * bw * G / r->total,
           bw * G / r->total);
}

static void print_json(const struct roofline_step *r, const struct roofline_opts *o, double bw,
                       const char *bw_source)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "batch", o->batch);
    cJSON_AddNumberToObject(j, "ctx", (double)o->ctx);
    cJSON_AddNumberToObject(j, "kv_elem_bytes", o->kv_elem);
    cJSON_AddNumberToObject(j, "dense_bytes", r->dense);
    cJSON_AddNumberToObject(j, "experts_bytes", r->experts);
    cJSON_AddNumberToObject(j, "experts_touched_per_layer", r->experts_touched);
    cJSON_AddNumberToObject(j, "expert_bytes", r->expert_bytes);
    cJSON_AddNumberToObject(j, "lm_head_bytes", r->lm_head);
    cJSON_AddNumberToObject(j, "gdn_state_bytes", r->gdn_state);
    cJSON_AddNumberToObject(j, "kv_bytes", r->kv);
    cJSON_AddNumberToObject(j, "total_bytes", r->total);
    cJSON_AddNumberToObject(j, "bw_gbs", bw);
    cJSON_AddStringToObject(j, "bw_source", bw_source);
    cJSON_AddNumberToObject(j, "limit_tok_s", o->batch * bw * 1e9 / r->total);
    char *s = cJSON_PrintUnformatted(j);
    printf("%s\n", s ? s : "{}");
    free(s);
    cJSON_Delete(j);
}

int tern_cmd_roofline(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    double bw = 0;
    const char *gpu_name = "h200";
    struct roofline_opts ro = {.batch = 1, .ctx = 0, .kv_elem = 2};
    struct model_load_opts lo = {.header_only = true, .skip_mtp = true};
    const struct args_opt opts[] = {
        ARGS_STR("DIR|CONFIG.json", NULL, &path, "checkpoint directory or its config.json"),
        ARGS_FN("--load-format", "auto|dummy", &lo.dummy, cli_load_format_parse,
                "dummy: shapes and formats from config.json alone (auto)"),
        ARGS_I64("--ctx", "N", &ro.ctx, 0, 1 << 30, "context tokens of each sequence (0)"),
        ARGS_INT("--batch", "B", &ro.batch, 1, 1 << 20, "sequences decoded together (1)"),
        ARGS_FN("--kv-cache-dtype", "auto|bf16|fp8", &ro.kv_elem, cli_kv_elem_parse,
                "KV element type (auto = bf16)"),
        ARGS_STR("--gpu", "NAME", &gpu_name,
                 "bandwidth of this GPU from the table: measured copy, else spec sheet (h200)"),
        ARGS_DOUBLE("--bw", "GB/s", &bw, 1e-3, 1e6, "memory bandwidth, overrides --gpu"),
        ARGS_BOOL("--json", &json, "one JSON object instead of text"),
    };
    const struct args_spec spec = {"tern roofline", "DIR|CONFIG.json [options]", opts,
                                   ARRAY_LEN(opts), NULL};
    int ar = args_parse(&spec, argc, argv);
    if (ar != 0)
        return args_exit(ar);
    if (!path)
        return args_fail(&spec, "missing DIR or CONFIG.json");
    const struct gpu_info *gpu = gpu_table_find(gpu_name);
    char names[256], bw_source[128] = "--bw";
    if (!gpu)
        return args_fail(&spec, "--gpu: unknown GPU \"%s\" (one of: %s)", gpu_name,
                         gpu_table_names(names, sizeof(names)));
    if (bw <= 0) {
        const char *src;
        bw = gpu_table_roofline_gbps(gpu, &src);
        snprintf(bw_source, sizeof(bw_source), "%s %s", gpu->name, src);
    }
    char dir[512], err[1024] = "";
    bool tmp;
    if (config_dir(path, dir, sizeof dir, &tmp) < 0)
        return fail("cannot read", path);
    struct model *m = NULL;
    int rc = model_load(&m, dir, &lo, err, sizeof err);
    if (tmp)
        file_tmpdir_remove(dir, "config.json");
    if (rc < 0)
        return fail(err, NULL);
    struct roofline_step r;
    rc = roofline_decode(m, &ro, &r);
    model_destroy(m);
    if (rc < 0)
        return fail("bad options", NULL);
    if (json)
        print_json(&r, &ro, bw, bw_source);
    else
        print_text(&r, &ro, bw, bw_source);
    return 0;
}
