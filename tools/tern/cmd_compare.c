/* tern compare DIR... [--gpu NAME|auto]... [--json] [--moe-backend B] [--linear-backend B]
 * [--context N] [--reserve-gib X] [--gpu-memory-utilization X]: which checkpoint to download
 * and why it is fast or slow on a GPU (model/compare.h). Header-only: config.json, the index
 * and each shard's header are enough; config.json alone gives an estimate (marked so). Errors:
 * one line on stderr, exit 1 (2 for usage). */
#include "common/args.h"
#include "common/xalloc.h"
#include "model/compare.h"
#include "model/gpu_table.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tern_cmd_compare(int argc, char **argv);
const char tern_cmd_compare_help[] =
    "compare checkpoints side by side: schemes, memory, kernel paths, speed per GPU";

static const char NOTES[] =
    "  DIR... are checkpoint directories (config.json, the index and each shard's header), or\n"
    "  config.json alone (a directory without safetensors, or a .json path): estimated from the\n"
    "  config and its quantization config as --load-format dummy builds the model.\n"
    "  Backends B: bf16, fp8, nvfp4_w4a16, nvfp4_w4a4_mma, cpu_ref (default auto).\n";

/* repeatable values: the directories and the --gpu names, resolved after parsing */
struct str_list {
    const char *v[COMPARE_MAX_DIRS > COMPARE_MAX_GPUS ? COMPARE_MAX_DIRS : COMPARE_MAX_GPUS];
    int n, cap;
};

static int push(void *dst, const char *v, char *err, size_t errlen)
{
    struct str_list *l = dst;
    if (l->n >= l->cap) {
        snprintf(err, errlen, "at most %d", l->cap);
        return -1;
    }
    l->v[l->n++] = v;
    return 0;
}

static int backend_arg(void *dst, const char *v, char *err, size_t errlen)
{
    int b = backend_parse(v);
    if (b < 0) {
        snprintf(err, errlen, "\"%s\" is not auto, bf16, fp8, nvfp4_w4a16, nvfp4_w4a4_mma or "
                 "cpu_ref", v);
        return -1;
    }
    *(enum backend_id *)dst = (enum backend_id)b;
    return 0;
}

/* a name known to the table, or auto (detection may fail: a runtime error) */
static int add_gpu(struct compare_opts *o, const char *name)
{
    char err[512];
    const struct gpu_info *g = gpu_table_find(name);
    if (!g && gpu_table_detect(&g, err, sizeof(err)) < 0) {
        fprintf(stderr, "tern compare: %s\n", err);
        return -1;
    }
    o->gpus[o->n_gpus++] = g;
    return 0;
}

int tern_cmd_compare(int argc, char **argv)
{
    struct compare_opts o;
    compare_opts_default(&o);
    struct str_list dirs = {.cap = COMPARE_MAX_DIRS}, gpus = {.cap = COMPARE_MAX_GPUS};
    bool json = false;
    double reserve_gib = (double)o.reserve_bytes / (1024.0 * 1024.0 * 1024.0);
    char gpu_help[320], names[256];
    snprintf(gpu_help, sizeof gpu_help, "evaluate on this GPU, repeatable (default every GPU in "
             "the table: %s)", gpu_table_names(names, sizeof(names)));
    const struct args_opt opts[] = {
        ARGS_FN("DIR...", NULL, &dirs, push, "checkpoint directories or config .json files"),
        ARGS_FN("--gpu", "NAME|auto", &gpus, push, gpu_help),
        ARGS_BOOL("--json", &json, "one JSON object instead of text"),
        ARGS_FN("--moe-backend", "B", &o.force_moe, backend_arg, "force the MoE kernel path"),
        ARGS_FN("--linear-backend", "B", &o.force_linear, backend_arg,
                "force the dense linear kernel path"),
        ARGS_I64("--context", "N", &o.context_tokens, 0, 1000000000,
                 "context tokens for the KV bytes read per decoded token (8192)"),
        ARGS_DOUBLE("--reserve-gib", "X", &reserve_gib, 0, 1e4,
                    "memory kept for activations and workspaces, GiB (2)"),
        ARGS_DOUBLE("--gpu-memory-utilization", "X", &o.gpu_memory_utilization, 0.01, 1.0,
                    "fraction of device memory tern may use (0.9)"),
    };
    const struct args_spec spec = {"tern compare", "DIR... [options]", opts, ARRAY_LEN(opts),
                                   NOTES};
    int ar = args_parse(&spec, argc, argv);
    if (ar != 0)
        return args_exit(ar);
    if (dirs.n == 0)
        return args_fail(&spec, "missing DIR");
    o.reserve_bytes = (int64_t)(reserve_gib * 1024.0 * 1024.0 * 1024.0);
    for (int i = 0; i < gpus.n; i++) {
        if (strcmp(gpus.v[i], "auto") != 0 && !gpu_table_find(gpus.v[i]))
            return args_fail(&spec, "--gpu: unknown GPU \"%s\" (one of: auto, %s)", gpus.v[i],
                             names);
        if (add_gpu(&o, gpus.v[i]) < 0)
            return 1;
    }
    char err[1024];
    if (compare_run(dirs.v, dirs.n, &o, json, stdout, err, sizeof(err)) < 0) {
        fprintf(stderr, "tern compare: %s\n", err);
        return 1;
    }
    return 0;
}
