/* tiny: a deterministic random qwen3_5_moe checkpoint generator for tests and the built-in demo
 * model. Writes the real on-disk layout (MODEL.md §1-2, CHECKPOINTS.md §1-2): config.json with a
 * nested text_config, generation_config.json, model.safetensors (or shards + index) with
 * `model.language_model.` names, `lm_head.weight` and 19 `mtp.*` tensors, and for quantized
 * formats per-expert 2-D expert modules plus compressed-tensors / ModelOpt / Qwen-FP8 scale
 * tensors and configs. Each tensor's fp32 values depend only on (seed, tensor name, shape), so
 * every format of one seed is a quantization of the same underlying model. */
#ifndef MODEL_TINY_H
#define MODEL_TINY_H

#include "model/config.h"
#include "model/pack.h"

#include <stdbool.h>
#include <stdint.h>

enum tiny_format {
    TINY_FMT_BF16 = 0,       // everything BF16 (A_log F32), fused experts
    TINY_FMT_F32,            // everything F32, fused experts
    TINY_FMT_NVFP4A16,       // compressed-tensors NVFP4 weight-only
    TINY_FMT_NVFP4,          // compressed-tensors NVFP4 W4A4 (+ input_global_scale)
    TINY_FMT_MODELOPT_NVFP4, // ModelOpt NVFP4 (W4A4):
                             // weight/weight_scale/weight_scale_2/input_scale
    TINY_FMT_FP8,            // compressed-tensors FP8 weights, per-channel (or per-tensor) scale
    TINY_FMT_FP8_BLOCK,      // Qwen official FP8: weight_scale_inv per block x block
};

struct tiny_opts {
    uint64_t seed;
    enum tiny_format format;
    int vocab;             // vocab_size (rounded up to 64); ignored when tokenizer is set
    const char *tokenizer; // tokenizer.json to size the vocab and copy (with its
                           // tokenizer_config.json sibling), or NULL
    bool mtp;              // write the 19 mtp.* tensors (the config declares 1 MTP layer always)
    char layers[MODEL_MAX_LAYERS + 1]; // layer pattern: 'L' linear_attention, 'F' full_attention
    int hidden;                        // H
    int n_heads;                       // Hq
    int n_kv_heads;                    // Hkv
    int head_dim;                      // D
    int lin_k_heads;                   // Hk
    int lin_v_heads;                   // Hv
    int lin_k_dim;                     // Dk
    int lin_v_dim;                     // Dv
    int conv_kernel;                   // Kc
    int experts;                       // E
    int top_k;
    int moe_inter;    // I
    int shared_inter; // Is
    float rope_theta;
    float partial_rotary;
    float rms_eps;
    float std;     // std of linear weights
    int fp8_block; // block edge for TINY_FMT_FP8_BLOCK (128 like the official files)
    enum pack_fp8_scale fp8_scale; // TINY_FMT_FP8: PACK_FP8_CHANNEL (default) or PACK_FP8_TENSOR
    float act_amax;                // W4A4 calibration activation amax -> input global scale
    int64_t shard_bytes;           // > 0: shard the safetensors at this many data bytes
};

/* Defaults: seed 1, bf16, vocab 512, MTP, "LLLF", H 64, 4/2 heads of 32, GDN 2/4 heads of 16,
 * Kc 4, 8 experts top-2, I = Is = 32, theta 1e7, partial 0.25, eps 1e-6, std 0.05, fp8 block 128,
 * per-channel fp8, act amax 8, no sharding. */
void tiny_opts_default(struct tiny_opts *o);
/* "bf16", "f32", "nvfp4a16", "nvfp4", "modelopt-nvfp4", "fp8", "fp8-block" -> 0, else ERR_INVAL. */
int tiny_format_parse(const char *s, enum tiny_format *f);
const char *tiny_format_name(enum tiny_format f);
/* Check the options (sizes positive, divisibility for the quantized format, pattern letters).
 * Returns 0 or ERR_INVAL. */
int tiny_opts_check(const struct tiny_opts *o);
/* Generate and write the checkpoint into outdir (created if missing). Returns 0, ERR_INVAL,
 * ERR_IO, ERR_FORMAT (unreadable tokenizer.json) or a negative errno. */
int tiny_write(const struct tiny_opts *o, const char *outdir);

/* The deterministic fp32 values tiny_write uses for the tensor with canonical key `key`
 * (e.g. "layers.3.mlp.experts.5.gate_proj", "embed_tokens", "mtp.fc"), n values drawn from
 * N(mean, std). Exposed so tests can rebuild the unquantized weights. out[n]. */
void tiny_rand_normal(uint64_t seed, const char *key, int64_t n, float mean, float std, float *out);

#endif
