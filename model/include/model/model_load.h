/* model_load: build a struct model from a checkpoint directory (config.json,
 * generation_config.json, hf_quant_config.json, safetensors). Name resolution, shape checks
 * against the config, quantization scheme vs tensors present, MTP detection; big weights point
 * into the mmapped files (zero-copy), small vectors and FP8 scales are converted to fp32 and
 * owned by the model. Every error is one line naming the tensor (expected vs found). */
#ifndef MODEL_MODEL_LOAD_H
#define MODEL_MODEL_LOAD_H

#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct st_set;
struct quant;

struct model_load_opts {
    bool header_only;    // no tensor data needed: qweight data / vectors stay NULL, shard
                         // files may be absent (names from the index) or truncated
    bool skip_mtp;       // do not load mtp.* (has_mtp stays false; bytes still counted)
    bool dummy;          // --load-format dummy: no safetensors; random weights of the real
                         // shapes and formats (quant config) from config.json alone,
                         // owned by the model; MTP when the config declares it
    uint64_t dummy_seed; // dummy: values depend only on (seed, tensor name)
    bool dummy_device;   // dummy: the large BF16 / FP8 / NVFP4 weights are not filled here
                         // (qweight.dummy: the GPU runner writes the same values on the device,
                         // model_dummy_streams); the model is device_only
};

/* Byte accounting groups, computed from every tensor of the checkpoint by name. */
enum model_group {
    MODEL_GROUP_EMBED = 0,
    MODEL_GROUP_LM_HEAD,
    MODEL_GROUP_LINEAR_ATTN, // GDN projections, conv1d, A_log, dt_bias
    MODEL_GROUP_FULL_ATTN,   // q/k/v/o projections
    MODEL_GROUP_EXPERTS,     // routed experts
    MODEL_GROUP_SHARED,      // shared expert + shared_expert_gate
    MODEL_GROUP_ROUTER,      // mlp.gate
    MODEL_GROUP_NORMS,       // every *norm.weight of the main model
    MODEL_GROUP_MTP,         // every mtp.* tensor
    MODEL_GROUP_VISUAL,      // model.visual.* (skipped)
    MODEL_GROUP_OTHER,       // anything else (skipped)
    MODEL_GROUP_COUNT,
};

struct model_load_stats {
    int64_t n_tensors;                      // all tensors in the checkpoint
    int64_t group_bytes[MODEL_GROUP_COUNT]; // bytes on disk per group (0 when unknown)
    int64_t group_tensors[MODEL_GROUP_COUNT];
    int64_t total_bytes;
    int64_t n_skipped;     // visual + other tensors not used by the model
    int64_t n_mtp_tensors; // mtp.* tensors present
    int64_t mtp_bytes;
    int64_t mtp_expert_bytes; // of them, the MTP layer's routed experts (mtp.*.mlp.experts.*)
    bool shapes_known;        // false when some shard was absent (index only)
    char prefix[32];          // "model.language_model." or "model."
    bool fused_experts;       // main layers' experts stored as 3-D gate_up_proj
    int64_t n_quant_fallback; // modules the quant config targets but stored as plain float
                              // .weight (mtp.*, fp8 style): loaded unquantized
};

/* Load dir into *out. opts may be NULL (defaults: full load, with MTP). Returns 0, or a negative
 * status with one line in err: -errno (config.json unreadable), ERR_RANGE (config value out of
 * range), ERR_UNSUPPORTED (e.g. a rope_type other than default), ERR_NOTFOUND (missing tensor),
 * ERR_NOMEM (dummy allocation), ERR_FORMAT (anything malformed, mismatched or unsupported).
 * The model owns the mappings; free it with model_destroy() (NULL is a no-op). */
int model_load(struct model **out, const char *dir, const struct model_load_opts *opts, char *err,
               size_t errlen);
void model_destroy(struct model *m);
/* What the device writes for a dummy weight w (w->dummy): data as bytes ((r & mask) + add) or
 * 16-bit table values over data.n elements, and for NVFP4 the block scales as bytes too
 * (bscale.n 0 otherwise); the values are those the host fill writes for the same tensor.
 * 0 or ERR_INVAL (not a dummy weight). */
struct model_dummy_stream {
    int64_t n;         // elements (bytes, or 16-bit values when u16)
    uint64_t seed;     // common/dummy_gen.h
    bool u16;          // 16-bit values from table; else bytes
    uint8_t mask, add; // bytes
    uint16_t table[256];
};
int model_dummy_streams(const struct qweight *w, struct model_dummy_stream *data,
                        struct model_dummy_stream *bscale);
/* cb(w, ctx) for every linear weight of the main model: lm_head, then per layer the attention
 * (q, k, v, o) or GDN (qkv, z, b, a, out) projections, router, shared expert (gate, up, down,
 * expert gate) and routed experts (gate, up, down per expert). Not the embedding, not the MTP
 * head. Weights of the other mixer type are visited too (absent: data NULL). */
void model_for_each_linear(struct model *m, void (*cb)(struct qweight *w, void *ctx), void *ctx);

/* Accounting of a loaded model (never NULL for a model from model_load). */
const struct model_load_stats *model_load_stats(const struct model *m);
/* The tensor set and quantization description the model was loaded from (owned by it). */
const struct st_set *model_load_tensors(const struct model *m);
const struct quant *model_load_quant(const struct model *m);
/* One key=value log line (ev=model_loaded) with the tensor count, bytes per group, quant
 * method, MTP state; plus a warning line when the config declares MTP but no mtp.* exists. */
void model_load_log(const struct model *m, const char *dir);
/* Group of a tensor name (the prefix may be "model.language_model.", "model." or none). */
enum model_group model_group_of(const char *name);
/* Is name a routed expert of the MTP layer (mtp.*.mlp.experts.*, fused or per expert)? */
bool model_is_mtp_expert(const char *name);
/* "embedding", "lm_head", "linear_attn", "full_attn", "experts", "shared_experts", "router",
 * "norms", "mtp", "visual", "other". */
const char *model_group_name(enum model_group g);

#endif
