/* backend: kernel-path selection per layer class (model/backend.h). The rules follow
 * CHECKPOINTS.md §3.3 restated for tern's own kernels: FP4 tensor cores need both operands in
 * FP4, so only a W4A4 checkpoint on sm_120/sm_121 (mma.sync kind::mxf4nvf4) takes the native
 * path; sm_100's tcgen05 path is not written, so there and on Hopper NVFP4 weights run the
 * weight-only dequant-in-registers kernels and W4A4 activation scales go unused. The cuda runner
 * does not dispatch the sm_120 path yet either: backend_plan_without_w4a4_mma says so. */
#include "model/backend.h"

#include "common/err.h"
#include "model/model.h"

#include <stdio.h>
#include <string.h>

static const char *const NAMES[BACKEND_COUNT] = {
    "auto", "bf16", "fp8", "nvfp4_w4a16", "nvfp4_w4a4_mma", "cpu_ref", "none",
};

static const char *const CLASS_NAMES[BACKEND_CLASS_COUNT] = {
    "moe", "shared_expert", "linear_attn", "attention", "lm_head", "mtp",
};

/* what each class is called inside a sentence */
static const char *const CLASS_PHRASE[BACKEND_CLASS_COUNT] = {
    "routed experts", "shared expert", "linear-attention (GDN) projections",
    "attention projections", "lm_head", "MTP head",
};

const char *backend_name(enum backend_id id)
{
    return id >= 0 && id < BACKEND_COUNT ? NAMES[id] : "?";
}

int backend_parse(const char *s)
{
    char n[32];
    size_t i = 0;
    if (!s)
        return -1;
    for (; s[i] && i + 1 < sizeof(n); i++)
        n[i] = s[i] == '-' ? '_' : s[i];
    n[i] = '\0';
    for (int b = 0; b < BACKEND_NONE; b++)
        if (strcmp(n, NAMES[b]) == 0)
            return b;
    return -1;
}

const char *backend_class_name(enum backend_class c)
{
    return c >= 0 && c < BACKEND_CLASS_COUNT ? CLASS_NAMES[c] : "?";
}

bool backend_class_is_moe(enum backend_class c)
{
    return c == BACKEND_CLASS_MOE;
}

const char *backend_scheme_str(const struct backend_scheme *s)
{
    if (!s->present)
        return "absent";
    switch (s->kind) {
    case QUANT_KIND_NONE:
        return "BF16";
    case QUANT_KIND_FP8:
        return "FP8";
    case QUANT_KIND_NVFP4:
        return s->act_fp4 ? "NVFP4 W4A4" : "NVFP4 W4A16";
    case QUANT_KIND_UNSUPPORTED:
        return "unsupported quantization";
    }
    return "?";
}

const char *backend_choice_str(enum backend_class c, const struct backend_choice *ch, char *buf,
                               size_t len)
{
    snprintf(buf, len, "%s_backend=%s%s reason=\"%s\"", backend_class_name(c),
             backend_name(ch->id),
             !ch->w4a4 ? "" : ch->act_quant ? " w4a4=act_quant" : " w4a4=weight_only", ch->reason);
    return buf;
}

// ---- schemes of a loaded model ----

static void add(struct backend_scheme *s, const struct qweight *w)
{
    if (w->rows == 0)
        return; /* not loaded */
    s->present = true;
    s->n_modules++;
    if (w->fmt == QW_NVFP4) {
        if (s->kind == QUANT_KIND_NONE) {
            s->kind = QUANT_KIND_NVFP4;
            s->act_fp4 = w->act_fp4;
        }
    } else if (w->fmt == QW_FP8) {
        if (s->kind == QUANT_KIND_NONE)
            s->kind = QUANT_KIND_FP8;
    } else {
        s->n_unquantized++;
    }
}

static void add_moe(struct backend_scheme *experts, struct backend_scheme *shared,
                    const struct moe_w *e, int n_experts)
{
    for (int x = 0; e->gate && x < n_experts; x++) {
        add(experts, &e->gate[x]);
        add(experts, &e->up[x]);
        add(experts, &e->down[x]);
    }
    add(shared, &e->sh_gate);
    add(shared, &e->sh_up);
    add(shared, &e->sh_down);
}

static void add_mixer(struct backend_scheme *lin, struct backend_scheme *attn,
                      const struct layer_w *l)
{
    if (l->type == LAYER_FULL_ATTN) {
        add(attn, &l->attn.q);
        add(attn, &l->attn.k);
        add(attn, &l->attn.v);
        add(attn, &l->attn.o);
    } else {
        add(lin, &l->gdn.qkv);
        add(lin, &l->gdn.z);
        add(lin, &l->gdn.b);
        add(lin, &l->gdn.a);
        add(lin, &l->gdn.out);
    }
}

void backend_schemes_from_model(const struct model *m,
                                struct backend_scheme sch[BACKEND_CLASS_COUNT])
{
    memset(sch, 0, sizeof(*sch) * BACKEND_CLASS_COUNT);
    const struct model_config *c = &m->cfg;
    for (int i = 0; m->layers && i < c->n_layers; i++) {
        add_mixer(&sch[BACKEND_CLASS_LINEAR_ATTN], &sch[BACKEND_CLASS_ATTN], &m->layers[i]);
        add_moe(&sch[BACKEND_CLASS_MOE], &sch[BACKEND_CLASS_SHARED], &m->layers[i].moe,
                c->n_experts);
    }
    add(&sch[BACKEND_CLASS_LM_HEAD], &m->lm_head);
    if (m->has_mtp) {
        struct backend_scheme *t = &sch[BACKEND_CLASS_MTP];
        add(t, &m->mtp.fc);
        add_mixer(t, t, &m->mtp.layer);
        add_moe(t, t, &m->mtp.layer.moe, c->n_experts);
    }
}

// ---- requirements ----

static bool sm_is_fp4_mma_sync(int sm)
{
    return sm == 120 || sm == 121;
}

/* Can backend b run scheme s on sm? */
static bool can_run(enum backend_id b, const struct backend_scheme *s, int sm)
{
    switch (b) {
    case BACKEND_BF16:
        return s->kind == QUANT_KIND_NONE && sm >= 80;
    case BACKEND_FP8:
        return s->kind == QUANT_KIND_FP8 && sm >= 89;
    case BACKEND_NVFP4_W4A16:
        return s->kind == QUANT_KIND_NVFP4 && sm >= 80;
    case BACKEND_NVFP4_W4A4_MMA:
        return s->kind == QUANT_KIND_NVFP4 && s->act_fp4 && sm_is_fp4_mma_sync(sm);
    case BACKEND_CPU_REF:
        return s->kind != QUANT_KIND_UNSUPPORTED;
    default:
        return false;
    }
}

static const char *needs(enum backend_id b)
{
    switch (b) {
    case BACKEND_BF16:
        return "unquantized (BF16) weights on sm_80+ (tern does not dequantize whole layers at "
               "load)";
    case BACKEND_FP8:
        return "FP8 e4m3 weights and fp8 tensor cores (sm_89+)";
    case BACKEND_NVFP4_W4A16:
        return "NVFP4 weights on sm_80+";
    case BACKEND_NVFP4_W4A4_MMA:
        return "NVFP4 weights with quantized activations (W4A4) and sm_120/sm_121 "
               "(mma.sync kind::mxf4nvf4; the sm_100 tcgen05 path is not written)";
    case BACKEND_CPU_REF:
        return "a supported weight format";
    default:
        return "nothing that exists";
    }
}

static void gpu_desc(char *buf, size_t len, const char *gpu_name, int sm)
{
    if (sm == 0)
        snprintf(buf, len, "there is no GPU");
    else
        snprintf(buf, len, "the GPU (%s) is sm_%d", gpu_name ? gpu_name : "?", sm);
}

// ---- automatic choice ----

static void choose_auto(const struct backend_scheme *s, int sm, struct backend_choice *ch)
{
    const size_t L = sizeof(ch->reason);
    if (sm == 0) {
        ch->id = s->kind == QUANT_KIND_UNSUPPORTED ? BACKEND_NONE : BACKEND_CPU_REF;
        snprintf(ch->reason, L, "no GPU: the CPU reference runs every scheme");
        return;
    }
    switch (s->kind) {
    case QUANT_KIND_NONE:
        if (sm >= 80) {
            ch->id = BACKEND_BF16;
            snprintf(ch->reason, L, "weights are unquantized: cuBLAS GEMM / bf16 GEMV");
        } else {
            ch->id = BACKEND_NONE;
            snprintf(ch->reason, L, "bf16 tensor cores need sm_80+ (this GPU is sm_%d)", sm);
        }
        return;
    case QUANT_KIND_FP8:
        if (sm >= 89) {
            ch->id = BACKEND_FP8;
            snprintf(ch->reason, L, "weights are FP8 and sm_%d has fp8 tensor cores (sm_89+)", sm);
        } else {
            ch->id = BACKEND_NONE;
            snprintf(ch->reason, L, "FP8 weights need fp8 tensor cores (sm_89+); this GPU is "
                     "sm_%d", sm);
        }
        return;
    case QUANT_KIND_NVFP4:
        if (sm < 80) {
            ch->id = BACKEND_NONE;
            snprintf(ch->reason, L, "NVFP4 kernels need sm_80+ (this GPU is sm_%d)", sm);
        } else if (s->act_fp4 && sm_is_fp4_mma_sync(sm)) {
            ch->id = BACKEND_NVFP4_W4A4_MMA;
            snprintf(ch->reason, L, "W4A4 checkpoint on sm_%d: block-scaled fp4 mma.sync "
                     "(kind::mxf4nvf4), activations quantized per 16 at run time", sm);
        } else if (s->act_fp4 && sm >= 100) {
            ch->id = BACKEND_NVFP4_W4A16;
            snprintf(ch->reason, L, "W4A4 checkpoint, but sm_%d needs the tcgen05 fp4 path, which "
                     "tern has not written: weights dequantized, activations unquantized "
                     "(activation scales unused)", sm);
        } else if (s->act_fp4) {
            ch->id = BACKEND_NVFP4_W4A16;
            snprintf(ch->reason, L, "fp4 tensor cores need sm_100+ (this GPU is sm_%d): weights "
                     "dequantized in registers, activations unquantized (activation scales "
                     "unused)", sm);
        } else if (sm >= 100) {
            ch->id = BACKEND_NVFP4_W4A16;
            snprintf(ch->reason, L, "checkpoint has no activation quantization; fp4 tensor cores "
                     "need W4A4: dequant in registers, bf16 math");
        } else {
            ch->id = BACKEND_NVFP4_W4A16;
            snprintf(ch->reason, L, "checkpoint has no activation quantization; fp4 tensor cores "
                     "need W4A4 and sm_100+");
        }
        return;
    case QUANT_KIND_UNSUPPORTED:
        ch->id = BACKEND_NONE;
        snprintf(ch->reason, L, "tern has no kernel for this quantization scheme");
        return;
    }
}

// ---- forced choice ----

static int forced_error(enum backend_class c, enum backend_id b, const struct backend_scheme *s,
                        int sm, const char *gpu_name, char *err, size_t errlen)
{
    char g[96];
    gpu_desc(g, sizeof(g), gpu_name, sm);
    const char *act = "";
    if (s->kind == QUANT_KIND_NVFP4)
        act = s->act_fp4 ? " (activations quantized)" : " (no activation quantization)";
    snprintf(err, errlen, "--%s-backend %s cannot run the %s: it needs %s; this checkpoint's %s: "
             "%s%s; %s", backend_class_is_moe(c) ? "moe" : "linear", backend_name(b),
             CLASS_PHRASE[c], needs(b), CLASS_PHRASE[c], backend_scheme_str(s), act, g);
    return ERR_UNSUPPORTED;
}

int backend_plan_compute(const struct backend_scheme sch[BACKEND_CLASS_COUNT], int sm,
                         const char *gpu_name, enum backend_id force_moe,
                         enum backend_id force_linear, struct backend_plan *plan, char *err,
                         size_t errlen)
{
    memset(plan, 0, sizeof(*plan));
    plan->sm = sm;
    if (errlen > 0)
        err[0] = '\0';
    bool linear_used = false;
    enum backend_class first_dense = BACKEND_CLASS_COUNT;
    for (int i = 0; i < BACKEND_CLASS_COUNT; i++) {
        enum backend_class c = (enum backend_class)i;
        const struct backend_scheme *s = &sch[i];
        struct backend_choice *ch = &plan->cls[i];
        if (!s->present) {
            ch->id = BACKEND_AUTO;
            snprintf(ch->reason, sizeof(ch->reason), "absent");
            continue;
        }
        enum backend_id f = backend_class_is_moe(c) ? force_moe : force_linear;
        if (!backend_class_is_moe(c) && first_dense == BACKEND_CLASS_COUNT)
            first_dense = c;
        if (f == BACKEND_AUTO) {
            choose_auto(s, sm, ch);
            continue;
        }
        bool quantized_backend = f == BACKEND_FP8 || f == BACKEND_NVFP4_W4A16 ||
                                 f == BACKEND_NVFP4_W4A4_MMA;
        if (!backend_class_is_moe(c) && quantized_backend && s->kind == QUANT_KIND_NONE) {
            choose_auto(s, sm, ch);
            snprintf(ch->reason, sizeof(ch->reason), "weights are unquantized, so they run bf16 "
                     "(--linear-backend %s applies to quantized layers)", backend_name(f));
            continue;
        }
        if (!can_run(f, s, sm))
            return forced_error(c, f, s, sm, gpu_name, err, errlen);
        ch->id = f;
        ch->forced = true;
        snprintf(ch->reason, sizeof(ch->reason), "forced by --%s-backend",
                 backend_class_is_moe(c) ? "moe" : "linear");
        if (!backend_class_is_moe(c))
            linear_used = true;
    }
    if (force_linear != BACKEND_AUTO && !linear_used && first_dense != BACKEND_CLASS_COUNT)
        return forced_error(first_dense, force_linear, &sch[first_dense], sm, gpu_name, err,
                            errlen);
    for (int i = 0; i < BACKEND_CLASS_COUNT; i++) {
        struct backend_choice *ch = &plan->cls[i];
        ch->w4a4 = sch[i].present && sch[i].kind == QUANT_KIND_NVFP4 && sch[i].act_fp4;
        ch->act_quant =
            ch->w4a4 && (ch->id == BACKEND_NVFP4_W4A4_MMA || ch->id == BACKEND_CPU_REF);
        if (ch->id == BACKEND_NONE) {
            snprintf(err, errlen, "no backend can run the %s (%s) on %s%s: %s", CLASS_PHRASE[i],
                     backend_scheme_str(&sch[i]), gpu_name ? gpu_name : "this device",
                     sm ? "" : " (no GPU)", plan->cls[i].reason);
            return ERR_UNSUPPORTED;
        }
    }
    return 0;
}

// ---- what a runner dispatches ----

int backend_plan_without_w4a4_mma(struct backend_plan *plan, char *err, size_t errlen)
{
    if (errlen > 0)
        err[0] = '\0';
    for (int i = 0; i < BACKEND_CLASS_COUNT; i++) {
        struct backend_choice *ch = &plan->cls[i];
        if (ch->id != BACKEND_NVFP4_W4A4_MMA)
            continue;
        if (ch->forced) {
            const bool moe = backend_class_is_moe((enum backend_class)i);
            snprintf(err, errlen, "--%s-backend nvfp4_w4a4_mma: the cuda runner does not dispatch "
                     "the fp4 mma.sync kernel (kernels/mma_w4a4.cu) yet; nvfp4_w4a16 runs the "
                     "%s weight-only", moe ? "moe" : "linear", CLASS_PHRASE[i]);
            return ERR_UNSUPPORTED;
        }
        ch->id = BACKEND_NVFP4_W4A16;
        ch->act_quant = false;
        snprintf(ch->reason, sizeof(ch->reason), "W4A4 checkpoint on sm_%d, whose fp4 mma.sync the "
                 "cuda runner does not dispatch yet (kernels/mma_w4a4.cu unwired): weights "
                 "dequantized in registers, activations unquantized (activation scales unused)",
                 plan->sm);
    }
    return 0;
}

bool backend_plan_w4a4_weight_only(const struct backend_plan *plan)
{
    bool any = false;
    for (int i = 0; i < BACKEND_CLASS_COUNT; i++) {
        if (plan->cls[i].w4a4 && plan->cls[i].act_quant)
            return false;
        any = any || plan->cls[i].w4a4;
    }
    return any;
}
