/* tern make-tiny-model: write a deterministic random qwen3_5_moe checkpoint (model/tiny.h). */
#include "common/args.h"
#include "common/err.h"
#include "common/xalloc.h"
#include "model/tiny.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tern_cmd_make_tiny_model(int argc, char **argv);
const char tern_cmd_make_tiny_model_help[] =
    "write a random tiny qwen3_5_moe checkpoint (any format) to a directory";

static int format_arg(void *dst, const char *v, char *err, size_t errlen)
{
    if (tiny_format_parse(v, dst) < 0) {
        snprintf(err, errlen, "\"%s\" is not bf16|f32|nvfp4a16|nvfp4|modelopt-nvfp4|fp8|fp8-block",
                 v);
        return ERR_INVAL;
    }
    return 0;
}

static int fp8_scale_arg(void *dst, const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "channel") != 0 && strcmp(v, "tensor") != 0) {
        snprintf(err, errlen, "\"%s\" is not channel|tensor", v);
        return ERR_INVAL;
    }
    *(int *)dst = strcmp(v, "channel") == 0 ? PACK_FP8_CHANNEL : PACK_FP8_TENSOR;
    return 0;
}

/* a size, or the path of a tokenizer.json */
static int vocab_arg(void *dst, const char *v, char *err, size_t errlen)
{
    struct tiny_opts *o = dst;
    int64_t n;
    if (v[0] < '0' || v[0] > '9') {
        o->tokenizer = v;
        return 0;
    }
    int rc = args_parse_i64("size", v, 1, 1 << 24, &n, err, errlen);
    if (rc == 0)
        o->vocab = (int)n;
    return rc;
}

int tern_cmd_make_tiny_model(int argc, char **argv)
{
    struct tiny_opts o;
    tiny_opts_default(&o);
    const char *outdir = NULL, *layers = NULL;
    int shard_mb = 0;
    bool no_mtp = false;
    int fp8_scale = o.fp8_scale;
    const int big = 1 << 20;
    const struct args_opt opts[] = {
        ARGS_STR("OUTDIR", NULL, &outdir, "directory to write (created if missing)"),
        ARGS_U64("--seed", "N", &o.seed, "random seed (1)"),
        ARGS_FN("--format", "F", &o.format, format_arg,
                "bf16|f32|nvfp4a16|nvfp4|modelopt-nvfp4|fp8|fp8-block (bf16)"),
        ARGS_FN("--vocab", "FILE|N", &o, vocab_arg,
                "tokenizer.json to size the vocab and copy, or a size (512)"),
        ARGS_BOOL("--no-mtp", &no_mtp, "leave out the mtp.* tensors (config still declares 1)"),
        ARGS_STR("--layers", "PATTERN", &layers, "L = linear_attention, F = full_attention (LLLF)"),
        ARGS_INT("--hidden", "N", &o.hidden, 1, big, "hidden size (64)"),
        ARGS_INT("--experts", "E", &o.experts, 1, 4096, "routed experts (8)"),
        ARGS_INT("--top-k", "K", &o.top_k, 1, 4096, "experts per token (2)"),
        ARGS_INT("--heads", "N", &o.n_heads, 1, 4096, "attention heads (4)"),
        ARGS_INT("--kv-heads", "N", &o.n_kv_heads, 1, 4096, "KV heads (2)"),
        ARGS_INT("--head-dim", "N", &o.head_dim, 1, 4096, "attention head dim (32)"),
        ARGS_INT("--lin-k-heads", "N", &o.lin_k_heads, 1, 4096, "GDN key heads (2)"),
        ARGS_INT("--lin-v-heads", "N", &o.lin_v_heads, 1, 4096, "GDN value heads (4)"),
        ARGS_INT("--lin-k-dim", "N", &o.lin_k_dim, 1, 4096, "GDN key head dim (16)"),
        ARGS_INT("--lin-v-dim", "N", &o.lin_v_dim, 1, 4096, "GDN value head dim (16)"),
        ARGS_INT("--conv-kernel", "N", &o.conv_kernel, 1, 64, "GDN conv kernel (4)"),
        ARGS_INT("--moe-inter", "N", &o.moe_inter, 1, big, "expert width (32)"),
        ARGS_INT("--shared-inter", "N", &o.shared_inter, 1, big, "shared expert width (32)"),
        ARGS_FLOAT("--rope-theta", "X", &o.rope_theta, 1, 1e12, "RoPE theta (1e7)"),
        ARGS_FLOAT("--partial-rotary", "X", &o.partial_rotary, 0, 1,
                   "rotary fraction of the head dim (0.25)"),
        ARGS_FLOAT("--std", "X", &o.std, 0, 100, "std of linear weights (0.05)"),
        ARGS_INT("--fp8-block", "N", &o.fp8_block, 1, 4096, "block edge for fp8-block (128)"),
        ARGS_FN("--fp8-scale", "S", &fp8_scale, fp8_scale_arg, "channel|tensor for fp8 (channel)"),
        ARGS_FLOAT("--act-amax", "X", &o.act_amax, 1e-6, 1e6,
                   "W4A4 calibration activation amax (8)"),
        ARGS_INT("--shard-mb", "N", &shard_mb, 0, 1 << 20,
                 "shard the safetensors at N MiB (0 = one file)"),
    };
    const struct args_spec spec = {"tern make-tiny-model", "OUTDIR [options]", opts,
                                   ARRAY_LEN(opts), NULL};
    int ar = args_parse(&spec, argc, argv);
    if (ar != 0)
        return args_exit(ar);
    if (!outdir)
        return args_fail(&spec, "missing OUTDIR");
    if (layers && strlen(layers) >= sizeof(o.layers))
        return args_fail(&spec, "--layers: longer than %zu letters", sizeof(o.layers) - 1);
    if (layers)
        snprintf(o.layers, sizeof(o.layers), "%s", layers);
    o.mtp = o.mtp && !no_mtp;
    o.fp8_scale = fp8_scale;
    o.shard_bytes = (int64_t)shard_mb << 20;
    if (tiny_opts_check(&o) < 0)
        return args_fail(&spec, "inconsistent sizes (NVFP4 needs in-features %% 16 == 0, heads "
                                "divisible by kv heads, pattern of L/F)");
    int rc = tiny_write(&o, outdir);
    if (rc < 0) {
        fprintf(stderr, "tern make-tiny-model: writing %s failed: %s\n", outdir, err_str(rc));
        return 1;
    }
    printf("wrote %s format=%s layers=%s hidden=%d experts=%d top_k=%d mtp=%d seed=%llu\n", outdir,
           tiny_format_name(o.format), o.layers, o.hidden, o.experts, o.top_k, o.mtp ? 1 : 0,
           (unsigned long long)o.seed);
    return 0;
}
