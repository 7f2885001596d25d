/* backend: which kernel path runs each layer class of a checkpoint on a GPU, and why. This is
 * the decision the CUDA worker makes at startup (and `tern compare` predicts): from each class's
 * weight scheme (unquantized / FP8 / NVFP4 weight-only / NVFP4 W4A4) and the device's compute
 * capability, pick one of tern's backends with a one-line reason; or honour a forced
 * --moe-backend / --linear-backend and refuse, naming what the kernel needs against what the
 * checkpoint and GPU have. Pure logic: no CUDA, no allocation. */
#ifndef MODEL_BACKEND_H
#define MODEL_BACKEND_H

#include "model/quant.h"

#include <stdbool.h>
#include <stddef.h>

struct model;

enum backend_id {
    BACKEND_AUTO = 0,          // (as a forced choice: none, decide automatically)
    BACKEND_BF16,              // cuBLAS GEMM / our GEMV on unquantized (bf16) weights, sm_80+
    BACKEND_FP8,               // cuBLASLt / our GEMV on FP8 e4m3 weights; fp8 tensor cores sm_89+
    BACKEND_NVFP4_W4A16,       // our NVFP4 dequant-in-registers GEMV/GEMM, bf16 activations, sm_80+
    BACKEND_NVFP4_W4A4_MMA,    // mma.sync kind::mxf4nvf4 on FP4 activations, sm_120 / sm_121
    BACKEND_CPU_REF,           // the CPU reference (any scheme, no GPU)
    BACKEND_NONE,              // nothing can run this scheme (unsupported quantization)
    BACKEND_COUNT,
};

enum backend_class {
    BACKEND_CLASS_MOE = 0,     // routed experts
    BACKEND_CLASS_SHARED,      // shared expert (dense linear)
    BACKEND_CLASS_LINEAR_ATTN, // Gated DeltaNet projections (dense linear)
    BACKEND_CLASS_ATTN,        // full-attention q/k/v/o projections (dense linear)
    BACKEND_CLASS_LM_HEAD,     // lm_head (dense linear)
    BACKEND_CLASS_MTP,         // every linear of the MTP head (dense linear)
    BACKEND_CLASS_COUNT,
};

/* The weight scheme of one layer class. */
struct backend_scheme {
    bool present;              // the class has weights (e.g. MTP tensors exist)
    enum quant_kind kind;      // NONE = unquantized; the quantized kind when mixed with NONE
    bool act_fp4;              // NVFP4 with quantized activations (W4A4)
    int n_modules;             // linear modules in the class
    int n_unquantized;         // of which stored unquantized (router-like modules of MTP, ...)
};

struct backend_choice {
    enum backend_id id;
    bool forced;               // id came from --moe-backend / --linear-backend
    bool w4a4;                 // the class's weights are W4A4 (NVFP4 with input scales)
    bool act_quant;            // W4A4 semantics that run: activations quantized per 16 at run
                               // time (nvfp4_w4a4_mma, cpu_ref); false with w4a4: weight-only
                               // (weights dequantized, activations unquantized)
    char reason[240];          // one line, no newline
};

struct backend_plan {
    int sm;                                        // compute capability x10 (0 = no GPU)
    struct backend_choice cls[BACKEND_CLASS_COUNT]; // id BACKEND_AUTO when !present
};

/* "auto", "bf16", "fp8", "nvfp4_w4a16", "nvfp4_w4a4_mma", "cpu_ref", "none". */
const char *backend_name(enum backend_id id);
/* Parse a backend name ('-' accepted for '_'); -1 when unknown. "auto" gives BACKEND_AUTO. */
int backend_parse(const char *s);
/* "moe", "shared_expert", "linear_attn", "attention", "lm_head", "mtp". */
const char *backend_class_name(enum backend_class c);
/* Is the class an expert class (--moe-backend) or a dense linear one (--linear-backend)? */
bool backend_class_is_moe(enum backend_class c);

/* The scheme of every class of a loaded model (header-only loads are fine). */
void backend_schemes_from_model(const struct model *m,
                                struct backend_scheme sch[BACKEND_CLASS_COUNT]);

/* Decide the backend of every present class. sm: compute capability x10 (90, 100, 120, 121;
 * 0 = no GPU). gpu_name names the device in messages (may be NULL). force_moe / force_linear:
 * BACKEND_AUTO or a backend to use for the MoE experts / every dense linear class (unquantized
 * dense classes stay bf16 under a forced quantized backend). Returns 0, or ERR_UNSUPPORTED
 * with one line in err (what the kernel needs; what the checkpoint and GPU have) when a forced
 * backend cannot run a class, or when some class has no backend at all. */
int backend_plan_compute(const struct backend_scheme sch[BACKEND_CLASS_COUNT], int sm,
                         const char *gpu_name, enum backend_id force_moe,
                         enum backend_id force_linear, struct backend_plan *plan, char *err,
                         size_t errlen);
/* Restrict a plan to a runner that has no W4A4 dispatch (the cuda runner today: kernels/mma_w4a4.cu
 * is not called by services/worker/gpu). Every class planned on nvfp4_w4a4_mma runs
 * nvfp4_w4a16 instead, with act_quant false and a reason that says so; a forced nvfp4_w4a4_mma
 * gives ERR_UNSUPPORTED with one line in err. Returns 0 or ERR_UNSUPPORTED. */
int backend_plan_without_w4a4_mma(struct backend_plan *plan, char *err, size_t errlen);
/* Do the W4A4 classes of the plan run weight-only (some W4A4 class, none with act_quant)?
 * The CPU pass computes the same with FORWARD_W4A4_WEIGHT_ONLY. */
bool backend_plan_w4a4_weight_only(const struct backend_plan *plan);
/* The startup log form of one class's choice, e.g.
 * `moe_backend=nvfp4_w4a16 reason="checkpoint has no activation quantization; ..."`; a W4A4
 * class adds the semantics that run: `w4a4=weight_only` or `w4a4=act_quant`.
 * Writes into buf and returns it. */
const char *backend_choice_str(enum backend_class c, const struct backend_choice *ch, char *buf,
                               size_t len);
/* "NVFP4 W4A16", "NVFP4 W4A4", "FP8", "BF16", "absent" ... of one scheme. Static storage. */
const char *backend_scheme_str(const struct backend_scheme *s);

#endif
