/* config: the model description read from config.json (nested text_config or flat), the
 * quantization description (compressed-tensors quantization_config or ModelOpt
 * hf_quant_config.json) and generation_config.json stop tokens. Sizes per MODEL.md §1. */
#ifndef MODEL_CONFIG_H
#define MODEL_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#define MODEL_MAX_LAYERS 256
#define MODEL_MAX_EOS 8

enum layer_type { LAYER_LINEAR_ATTN = 0, LAYER_FULL_ATTN = 1 };

struct model_config {
    char model_type[64];        // "qwen3_5_moe" (top level) or "qwen3_5_moe_text"
    char architecture[96];      // architectures[0]
    int vocab_size;
    int hidden_size;            // H
    int n_layers;
    enum layer_type layer_types[MODEL_MAX_LAYERS];
    /* gated full attention */
    int n_heads;                // Hq
    int n_kv_heads;             // Hkv
    int head_dim;               // D
    bool attn_output_gate;      // true for qwen3_5_moe
    float rope_theta;
    float partial_rotary_factor;
    int rotary_dim;             // int(D * partial_rotary_factor)
    /* gated deltanet */
    int lin_n_k_heads;          // Hk
    int lin_n_v_heads;          // Hv
    int lin_k_head_dim;         // Dk
    int lin_v_head_dim;         // Dv
    int lin_conv_kernel;        // Kc
    /* moe */
    int n_experts;              // E
    int n_experts_per_tok;      // top-k
    int moe_inter;              // I
    int shared_inter;           // Is
    float rms_eps;
    int64_t max_position_embeddings;
    bool tie_word_embeddings;
    /* mtp */
    int mtp_n_layers;           // mtp_num_hidden_layers (declared; tensors may be missing)
    /* state dtypes */
    bool ssm_state_f32;         // mamba_ssm_dtype == float32 (default true)
    char dtype[16];             // "bfloat16", "float32", ...
    /* generation */
    int eos_ids[MODEL_MAX_EOS];
    int n_eos;
};

#endif
