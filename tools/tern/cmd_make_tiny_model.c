/* tern make-tiny-model: write a deterministic random qwen3_5_moe checkpoint (model/tiny.h). */
#include "common/err.h"
#include "model/tiny.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tern_cmd_make_tiny_model(int argc, char **argv);
const char tern_cmd_make_tiny_model_help[] =
    "write a random tiny qwen3_5_moe checkpoint (any format) to a directory";

static void usage(FILE *f)
{
    fprintf(f, "usage: tern make-tiny-model OUTDIR [options]\n"
               "  --seed N            random seed (1)\n"
               "  --format F          bf16|f32|nvfp4a16|nvfp4|modelopt-nvfp4|fp8|fp8-block (bf16)\n"
               "  --vocab FILE|N      tokenizer.json to size the vocab and copy, or a size (512)\n"
               "  --no-mtp            leave out the mtp.* tensors (config still declares 1 layer)\n"
               "  --layers PATTERN    L = linear_attention, F = full_attention (LLLF)\n"
               "  --hidden N          hidden size (64)\n"
               "  --experts E         routed experts (8)\n"
               "  --top-k K           experts per token (2)\n"
               "  --heads N --kv-heads N --head-dim N          attention (4, 2, 32)\n"
               "  --lin-k-heads N --lin-v-heads N              GDN heads (2, 4)\n"
               "  --lin-k-dim N --lin-v-dim N --conv-kernel N  GDN dims (16, 16, 4)\n"
               "  --moe-inter N --shared-inter N               expert widths (32, 32)\n"
               "  --rope-theta X --partial-rotary X            RoPE (1e7, 0.25)\n"
               "  --std X             std of linear weights (0.05)\n"
               "  --fp8-block N       block edge for fp8-block (128)\n"
               "  --fp8-scale S       channel|tensor for fp8 (channel)\n"
               "  --act-amax X        W4A4 calibration activation amax (8)\n"
               "  --shard-mb N        shard the safetensors at N MiB\n");
}

static int parse_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0 || v > 1 << 30)
        return ERR_INVAL;
    *out = (int)v;
    return 0;
}

static int parse_float(const char *s, float *out)
{
    char *end;
    float v = strtof(s, &end);
    if (*s == '\0' || *end != '\0')
        return ERR_INVAL;
    *out = v;
    return 0;
}

struct int_opt {
    const char *name;
    int *dst;
};

int tern_cmd_make_tiny_model(int argc, char **argv)
{
    struct tiny_opts o;
    tiny_opts_default(&o);
    const char *outdir = NULL;
    int shard_mb = 0;
    const struct int_opt ints[] = {
        {"--hidden", &o.hidden},
        {"--experts", &o.experts},
        {"--top-k", &o.top_k},
        {"--heads", &o.n_heads},
        {"--kv-heads", &o.n_kv_heads},
        {"--head-dim", &o.head_dim},
        {"--lin-k-heads", &o.lin_k_heads},
        {"--lin-v-heads", &o.lin_v_heads},
        {"--lin-k-dim", &o.lin_k_dim},
        {"--lin-v-dim", &o.lin_v_dim},
        {"--conv-kernel", &o.conv_kernel},
        {"--moe-inter", &o.moe_inter},
        {"--shared-inter", &o.shared_inter},
        {"--fp8-block", &o.fp8_block},
        {"--shard-mb", &shard_mb},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0, used = 1;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--no-mtp") == 0) {
            o.mtp = false;
            used = 0;
        } else if (a[0] != '-') {
            if (outdir) {
                fprintf(stderr, "make-tiny-model: extra argument %s\n", a);
                return 2;
            }
            outdir = a;
            used = 0;
        } else if (!v) {
            fprintf(stderr, "make-tiny-model: %s needs a value\n", a);
            return 2;
        } else if (strcmp(a, "--seed") == 0) {
            char *end;
            o.seed = strtoull(v, &end, 10);
            rc = *end ? ERR_INVAL : 0;
        } else if (strcmp(a, "--format") == 0) {
            rc = tiny_format_parse(v, &o.format);
        } else if (strcmp(a, "--vocab") == 0) {
            if (parse_int(v, &o.vocab) < 0)
                o.tokenizer = v;
        } else if (strcmp(a, "--layers") == 0) {
            rc = strlen(v) < sizeof(o.layers) ? 0 : ERR_INVAL;
            if (rc == 0)
                snprintf(o.layers, sizeof(o.layers), "%s", v);
        } else if (strcmp(a, "--rope-theta") == 0) {
            rc = parse_float(v, &o.rope_theta);
        } else if (strcmp(a, "--partial-rotary") == 0) {
            rc = parse_float(v, &o.partial_rotary);
        } else if (strcmp(a, "--std") == 0) {
            rc = parse_float(v, &o.std);
        } else if (strcmp(a, "--act-amax") == 0) {
            rc = parse_float(v, &o.act_amax);
        } else if (strcmp(a, "--fp8-scale") == 0) {
            if (strcmp(v, "channel") == 0)
                o.fp8_scale = PACK_FP8_CHANNEL;
            else if (strcmp(v, "tensor") == 0)
                o.fp8_scale = PACK_FP8_TENSOR;
            else
                rc = ERR_INVAL;
        } else {
            size_t k;
            for (k = 0; k < sizeof(ints) / sizeof(ints[0]); k++)
                if (strcmp(a, ints[k].name) == 0)
                    break;
            if (k == sizeof(ints) / sizeof(ints[0])) {
                fprintf(stderr, "make-tiny-model: unknown option %s\n", a);
                usage(stderr);
                return 2;
            }
            rc = parse_int(v, ints[k].dst);
        }
        if (rc < 0) {
            fprintf(stderr, "make-tiny-model: bad value for %s: %s\n", a, v);
            return 2;
        }
        i += used;
    }
    if (!outdir) {
        usage(stderr);
        return 2;
    }
    o.shard_bytes = (int64_t)shard_mb << 20;
    if (tiny_opts_check(&o) < 0) {
        fprintf(stderr, "make-tiny-model: inconsistent sizes (NVFP4 needs in-features %% 16 == 0, "
                        "heads divisible by kv heads, pattern of L/F)\n");
        return 2;
    }
    int rc = tiny_write(&o, outdir);
    if (rc < 0) {
        fprintf(stderr, "make-tiny-model: writing %s failed: %s\n", outdir, err_str(rc));
        return 1;
    }
    printf("wrote %s format=%s layers=%s hidden=%d experts=%d top_k=%d mtp=%d seed=%llu\n", outdir,
           tiny_format_name(o.format), o.layers, o.hidden, o.experts, o.top_k, o.mtp ? 1 : 0,
           (unsigned long long)o.seed);
    return 0;
}
