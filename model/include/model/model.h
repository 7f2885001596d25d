/* model: a loaded qwen3_5_moe checkpoint: config plus every weight as a qweight or an fp32
 * vector. Created by model_load() (model_load.c), destroyed by model_destroy(). Large tensors
 * point into mmapped safetensors files (or into buffers the model owns, e.g. dummy weights);
 * small vectors (norms, A_log, dt_bias, conv weights) are converted to fp32 and owned here.
 * This is the one model description shared by the CPU forward pass and the CUDA backend. */
#ifndef MODEL_MODEL_H
#define MODEL_MODEL_H

#include "model/config.h"
#include "model/qweight.h"

#include <stdbool.h>
#include <stdint.h>

struct attn_w {
    struct qweight q;          // (Hq*D*2, H): per head [query 256 | gate 256] rows
    struct qweight k;          // (Hkv*D, H)
    struct qweight v;          // (Hkv*D, H)
    struct qweight o;          // (H, Hq*D)
    float *q_norm;             // (D) raw w; applied as (1+w)
    float *k_norm;             // (D) raw w; applied as (1+w)
};

struct gdn_w {
    struct qweight qkv;        // (2*Hk*Dk + Hv*Dv, H)
    struct qweight z;          // (Hv*Dv, H)
    struct qweight b;          // (Hv, H)
    struct qweight a;          // (Hv, H)
    struct qweight out;        // (H, Hv*Dv)
    float *conv;               // (conv_dim, Kc): tap Kc-1 multiplies the current token
    float *dt_bias;            // (Hv)
    float *A_log;              // (Hv)
    float *norm;               // (Dv) plain w
};

struct moe_w {
    struct qweight router;     // (E, H)
    struct qweight *gate;      // [E] each (I, H)
    struct qweight *up;        // [E] each (I, H)
    struct qweight *down;      // [E] each (H, I)
    struct qweight sh_gate;    // (Is, H)
    struct qweight sh_up;      // (Is, H)
    struct qweight sh_down;    // (H, Is)
    struct qweight sh_expert_gate; // (1, H)
};

struct layer_w {
    enum layer_type type;
    float *in_norm;            // (H) raw w, (1+w)
    float *post_norm;          // (H) raw w, (1+w)
    struct attn_w attn;        // when type == LAYER_FULL_ATTN
    struct gdn_w gdn;          // when type == LAYER_LINEAR_ATTN
    struct moe_w moe;
};

struct mtp_w {
    struct qweight fc;         // (H, 2H): input [normed embedding | normed hidden]
    float *pre_fc_norm_embedding; // (H)
    float *pre_fc_norm_hidden;    // (H)
    float *norm;               // (H) final norm of the head
    struct layer_w layer;      // one full-attention decoder layer
};

struct model {
    struct model_config cfg;
    struct qweight embed;      // (V, H)
    struct qweight lm_head;    // (V, H) (== embed when tied)
    float *final_norm;         // (H)
    struct layer_w *layers;    // [n_layers]
    bool has_mtp;              // mtp.* tensors present and loaded
    struct mtp_w mtp;
    void *priv;                // loader-private: mappings, owned buffers
    bool device_only;          // dummy weights left to the device (model_load_opts.dummy_device):
                               // no CPU forward pass (forward_ctx_create refuses)
};

#endif
