/* tern roofline DIR|CONFIG.json [--load-format auto|dummy] [--ctx N] [--batch B]
 *               [--kv-cache-dtype bf16|fp8] [--bw GB/s] [--json]
 * The bytes one decode step must move for a checkpoint (model/roofline.h), by part, and the
 * decode rate that the given memory bandwidth allows. Header-only: reads formats and shapes, no
 * weights (a config.json alone works with --load-format dummy). Errors: one line, exit 1. */
#include "common/file.h"
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

static const char USAGE[] =
    "usage: tern roofline DIR|CONFIG.json [--load-format auto|dummy] [--ctx N] [--batch B]\n"
    "                     [--kv-cache-dtype bf16|fp8] [--bw GB/s (default 4161, H200 copy)] "
    "[--json]";

static int fail(const char *msg, const char *arg)
{
    fprintf(stderr, "tern roofline: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    return 1;
}

static bool parse_i64(const char *s, int64_t lo, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo)
        return false;
    *out = v;
    return true;
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

static void print_text(const struct roofline_step *r, const struct roofline_opts *o, double bw)
{
    const double G = 1e9;
    printf("batch=%d ctx=%lld kv_elem_bytes=%d\n", o->batch, (long long)o->ctx, o->kv_elem);
    printf("dense_gb=%.4f experts_gb=%.4f (touched=%.2f per layer, %.2f MB each) lm_head_gb=%.4f\n",
           r->dense / G, r->experts / G, r->experts_touched, r->expert_bytes / 1e6, r->lm_head / G);
    printf("gdn_state_gb=%.4f kv_gb=%.4f total_gb=%.4f\n", r->gdn_state / G, r->kv / G,
           r->total / G);
    printf("bw_gbs=%.0f step_us_min=%.1f limit_tok_s=%.1f (per stream %.1f)\n", bw,
           r->total / (bw * G) * 1e6, o->batch * bw * G / r->total, bw * G / r->total);
}

static void print_json(const struct roofline_step *r, const struct roofline_opts *o, double bw)
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
    double bw = 4161.0;
    int64_t v;
    struct roofline_opts ro = {.batch = 1, .ctx = 0, .kv_elem = 2};
    struct model_load_opts lo = {.header_only = true, .skip_mtp = true};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has = i + 1 < argc;
        if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--load-format") == 0 && has) {
            const char *f = argv[++i];
            if (strcmp(f, "dummy") == 0)
                lo.dummy = true;
            else if (strcmp(f, "auto") != 0)
                return fail("unknown --load-format (auto|dummy):", f);
        } else if (strcmp(a, "--ctx") == 0 && has) {
            if (!parse_i64(argv[++i], 0, &v))
                return fail("--ctx needs an integer >= 0, got", argv[i]);
            ro.ctx = v;
        } else if (strcmp(a, "--batch") == 0 && has) {
            if (!parse_i64(argv[++i], 1, &v) || v > 1 << 20)
                return fail("--batch needs an integer in 1..1048576, got", argv[i]);
            ro.batch = (int)v;
        } else if (strcmp(a, "--kv-cache-dtype") == 0 && has) {
            const char *d = argv[++i];
            if (strcmp(d, "bf16") == 0 || strcmp(d, "auto") == 0)
                ro.kv_elem = 2;
            else if (strcmp(d, "fp8") == 0)
                ro.kv_elem = 1;
            else
                return fail("unknown --kv-cache-dtype (auto|bf16|fp8):", d);
        } else if (strcmp(a, "--bw") == 0 && has) {
            char *end;
            bw = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(bw > 0) || bw > 1e6)
                return fail("--bw needs GB/s > 0, got", argv[i]);
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            printf("%s\n", USAGE);
            return 0;
        } else if (a[0] == '-' || path) {
            fprintf(stderr, "tern roofline: unexpected argument '%s'\n%s\n", a, USAGE);
            return 1;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "tern roofline: missing DIR or CONFIG.json\n%s\n", USAGE);
        return 1;
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
        print_json(&r, &ro, bw);
    else
        print_text(&r, &ro, bw);
    return 0;
}
