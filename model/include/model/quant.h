/* quant: the checkpoint's quantization description and the scheme of each linear module.
 * Sources: compressed-tensors `quantization_config` in config.json (config_groups with
 * targets: exact names, `re:` regexes (PCRE2, anchored at the start like Python re.match) and
 * class names ("Linear"), ignore list), ModelOpt (hf_quant_config.json or quant_method
 * "modelopt": NVFP4 / W4A16_NVFP4 / FP8 / MIXED_PRECISION with quantized_layers and wildcard
 * exclude_modules) and the Qwen/DeepSeek FP8 style (quant_method "fp8", weight_block_size,
 * modules_to_not_convert). See CHECKPOINTS.md §1. */
#ifndef MODEL_QUANT_H
#define MODEL_QUANT_H

#include <stdbool.h>
#include <stddef.h>

enum quant_method {
    QUANT_METHOD_NONE = 0, // no quantization config: every module unquantized
    QUANT_METHOD_CT,       // compressed-tensors: weight_packed / weight_global_scale (divisor)
    QUANT_METHOD_MODELOPT, // ModelOpt: weight / weight_scale_2 (multiplier) / input_scale
    QUANT_METHOD_FP8,      // quant_method "fp8": weight + weight_scale_inv, block scales
};

enum quant_kind {
    QUANT_KIND_NONE = 0,    // stored unquantized (bf16 / f16 / f32)
    QUANT_KIND_NVFP4,       // e2m1 + e4m3 per-16 scales + per-tensor global scale
    QUANT_KIND_FP8,         // e4m3 weight with fp32 scales
    QUANT_KIND_UNSUPPORTED, // recognized but not implemented (int4, w4a8, ...): see detail
};

enum quant_fp8_scale {
    QUANT_FP8_ANY = 0, // decided by the scale tensor's shape
    QUANT_FP8_TENSOR,
    QUANT_FP8_CHANNEL,
    QUANT_FP8_BLOCK,
};

struct quant_scheme {
    enum quant_kind kind;
    bool act_fp4; // NVFP4 W4A4: input activations quantized (static global scale)
    enum quant_fp8_scale fp8_scale;
    int block_rows;     // FP8 block: rows per scale block (e.g. 128)
    int block_cols;     // FP8 block: cols per scale block
    bool optional;      // the module may also be stored unquantized (fp8 style without
                        // modules_to_not_convert listing every bf16 module)
    const char *detail; // UNSUPPORTED: what the config asked for (static or owned by quant)
};

struct quant;

/* Build from the text of config.json (may be NULL) and of hf_quant_config.json (may be NULL;
 * it takes precedence for ModelOpt). NULL on error with a one-line err naming the field. */
struct quant *quant_create(const char *config_json, const char *hf_quant_json, char *err,
                           size_t errlen);
/* quant_create from dir/config.json and dir/hf_quant_config.json (if present). */
struct quant *quant_create_dir(const char *dir, char *err, size_t errlen);
void quant_destroy(struct quant *q);

enum quant_method quant_get_method(const struct quant *q);
/* Scheme of a linear module, named as in the checkpoint without the tensor suffix
 * (e.g. "model.language_model.layers.3.mlp.experts.7.gate_proj"). q may be NULL (= none).
 * Name prefixes "model.language_model." / "model." / "language_model.model." are equivalent for
 * exact names, ModelOpt wildcards and quantized_layers. Not thread-safe (one PCRE2 match block
 * per quant): call it from one thread at a time. */
struct quant_scheme quant_lookup(const struct quant *q, const char *module);
/* "none", "compressed-tensors", "modelopt", "fp8". */
const char *quant_method_name(enum quant_method m);
/* Human description, e.g. "NVFP4 weight-only (no activation quant)", "FP8 block 128x128". */
const char *quant_scheme_str(const struct quant_scheme *s, char *buf, size_t len);

#endif
