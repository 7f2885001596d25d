/* tern compare DIR... [--gpu NAME|auto]... [--json] [--moe-backend B] [--linear-backend B]
 * [--context N] [--reserve-gib X] [--gpu-memory-utilization X]: which checkpoint to download
 * and why it is fast or slow on a GPU (model/compare.h). Header-only: config.json, the index
 * and each shard's header are enough. Errors: one line on stderr, exit 1. */
#include "model/compare.h"
#include "model/gpu_table.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tern_cmd_compare(int argc, char **argv);
const char tern_cmd_compare_help[] =
    "compare checkpoints side by side: schemes, memory, kernel paths, speed per GPU";

static const char USAGE[] =
    "usage: tern compare DIR... [--gpu NAME|auto]... [--json] [--moe-backend B] "
    "[--linear-backend B] [--context N] [--reserve-gib X] [--gpu-memory-utilization X]";
static const char DETAILS[] =
    "  --gpu NAME|auto   evaluate on this GPU (repeatable; default every GPU in the table)\n"
    "  --json            one JSON object instead of text\n"
    "  --moe-backend B, --linear-backend B   force a kernel path: bf16, fp8, nvfp4_w4a16,\n"
    "                    nvfp4_w4a4_mma, cpu_ref (default auto)\n"
    "  --context N       context tokens for the KV bytes read per decoded token (8192)\n"
    "  --reserve-gib X   memory kept for activations and workspaces (2)\n"
    "  --gpu-memory-utilization X   fraction of device memory tern may use (0.9)";

static int add_gpu(struct compare_opts *o, const char *name)
{
    char err[512];
    const struct gpu_info *g = NULL;
    if (strcmp(name, "auto") == 0) {
        if (gpu_table_detect(&g, err, sizeof(err)) < 0) {
            fprintf(stderr, "tern compare: %s\n", err);
            return -1;
        }
    } else if (!(g = gpu_table_find(name))) {
        char names[256];
        fprintf(stderr, "tern compare: unknown --gpu '%s' (one of: auto, %s)\n", name,
                gpu_table_names(names, sizeof(names)));
        return -1;
    }
    if (o->n_gpus >= COMPARE_MAX_GPUS) {
        fprintf(stderr, "tern compare: at most %d --gpu options\n", COMPARE_MAX_GPUS);
        return -1;
    }
    o->gpus[o->n_gpus++] = g;
    return 0;
}

static int parse_backend(const char *flag, const char *v, enum backend_id *out)
{
    int b = backend_parse(v);
    if (b < 0) {
        fprintf(stderr, "tern compare: unknown %s '%s' (auto, bf16, fp8, nvfp4_w4a16, "
                "nvfp4_w4a4_mma, cpu_ref)\n", flag, v);
        return -1;
    }
    *out = (enum backend_id)b;
    return 0;
}

static int parse_num(const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || d < lo || d > hi) {
        fprintf(stderr, "tern compare: bad %s '%s' (%g..%g)\n", flag, v, lo, hi);
        return -1;
    }
    *out = d;
    return 0;
}

int tern_cmd_compare(int argc, char **argv)
{
    struct compare_opts o;
    compare_opts_default(&o);
    const char *dirs[COMPARE_MAX_DIRS];
    int n = 0;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            char names[256];
            printf("%s\n%s\n  GPUs: %s\n", USAGE, DETAILS, gpu_table_names(names, sizeof(names)));
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
            continue;
        } else if (a[0] != '-') {
            if (n >= COMPARE_MAX_DIRS) {
                fprintf(stderr, "tern compare: at most %d directories\n", COMPARE_MAX_DIRS);
                return 1;
            }
            dirs[n++] = a;
            continue;
        }
        if (!v) {
            fprintf(stderr, "tern compare: %s needs a value (%s)\n", a, USAGE);
            return 1;
        }
        i++;
        if (strcmp(a, "--gpu") == 0) {
            if (add_gpu(&o, v) < 0)
                return 1;
        } else if (strcmp(a, "--moe-backend") == 0) {
            if (parse_backend(a, v, &o.force_moe) < 0)
                return 1;
        } else if (strcmp(a, "--linear-backend") == 0) {
            if (parse_backend(a, v, &o.force_linear) < 0)
                return 1;
        } else if (strcmp(a, "--context") == 0) {
            if (parse_num(a, v, 0, 1e9, &d) < 0)
                return 1;
            o.context_tokens = (int64_t)d;
        } else if (strcmp(a, "--reserve-gib") == 0) {
            if (parse_num(a, v, 0, 1e4, &d) < 0)
                return 1;
            o.reserve_bytes = (int64_t)(d * 1024.0 * 1024.0 * 1024.0);
        } else if (strcmp(a, "--gpu-memory-utilization") == 0) {
            if (parse_num(a, v, 0.01, 1.0, &d) < 0)
                return 1;
            o.gpu_memory_utilization = d;
        } else {
            fprintf(stderr, "tern compare: unknown option %s (%s)\n", a, USAGE);
            return 1;
        }
    }
    if (n == 0) {
        fprintf(stderr, "tern compare: missing DIR (%s)\n", USAGE);
        return 1;
    }
    char err[1024];
    if (compare_run(dirs, n, &o, json, stdout, err, sizeof(err)) < 0) {
        fprintf(stderr, "tern compare: %s\n", err);
        return 1;
    }
    return 0;
}
