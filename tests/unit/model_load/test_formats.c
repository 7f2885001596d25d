/* Cross-check of two independent implementations: checkpoints written by the tiny generator
 * (model/tiny.c, another engineer's writer and packers) in every format, loaded by model_load.
 * Every format of one seed quantizes the same fp32 model, so each dequantized linear weight must
 * be close to the f32 checkpoint's (relative Frobenius error per matrix under a per-format
 * bound); the scheme read back must match the format; a sharded copy loads identically and
 * still opens header-only with a shard missing. */
#include "model/model_load.h"
#include "model/safetensors.h"
#include "model/tiny.h"
#include "st_fixture.h"
#include "test.h"

#include <string.h>
#include <unistd.h>

static char root[256];

struct cmp_ctx {
    double worst;
    char worst_name[96];
    int n_mats;
};

static void cmp_w(struct cmp_ctx *c, const char *name, const struct qweight *a,
                  const struct qweight *ref)
{
    if (a->rows != ref->rows || a->cols != ref->cols) {
        fprintf(stderr, "%s: shape differs\n", name);
        CHECK(0);
        return;
    }
    float *ra = malloc((size_t)a->cols * 4), *rb = malloc((size_t)a->cols * 4);
    double num = 0, den = 0;
    for (int64_t r = 0; r < a->rows; r++) {
        qweight_dequant_row(a, r, ra);
        qweight_dequant_row(ref, r, rb);
        for (int64_t k = 0; k < a->cols; k++) {
            num += (double)(ra[k] - rb[k]) * (ra[k] - rb[k]);
            den += (double)rb[k] * rb[k];
        }
    }
    free(ra);
    free(rb);
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    if (rel > c->worst) {
        c->worst = rel;
        snprintf(c->worst_name, sizeof(c->worst_name), "%s", name);
    }
    c->n_mats++;
}

static void cmp_layer(struct cmp_ctx *c, const struct layer_w *a, const struct layer_w *b, int E)
{
    if (a->type == LAYER_FULL_ATTN) {
        cmp_w(c, "attn.q", &a->attn.q, &b->attn.q);
        cmp_w(c, "attn.k", &a->attn.k, &b->attn.k);
        cmp_w(c, "attn.v", &a->attn.v, &b->attn.v);
        cmp_w(c, "attn.o", &a->attn.o, &b->attn.o);
    } else {
        cmp_w(c, "gdn.qkv", &a->gdn.qkv, &b->gdn.qkv);
        cmp_w(c, "gdn.z", &a->gdn.z, &b->gdn.z);
        cmp_w(c, "gdn.out", &a->gdn.out, &b->gdn.out);
    }
    cmp_w(c, "router", &a->moe.router, &b->moe.router);
    for (int e = 0; e < E; e++) {
        cmp_w(c, "expert.gate", &a->moe.gate[e], &b->moe.gate[e]);
        cmp_w(c, "expert.up", &a->moe.up[e], &b->moe.up[e]);
        cmp_w(c, "expert.down", &a->moe.down[e], &b->moe.down[e]);
    }
    cmp_w(c, "shared.gate", &a->moe.sh_gate, &b->moe.sh_gate);
    cmp_w(c, "shared.down", &a->moe.sh_down, &b->moe.sh_down);
}

static struct model *load(const char *dir, bool header_only)
{
    struct model *m = NULL;
    char err[512] = "";
    struct model_load_opts o = {.header_only = header_only};
    if (model_load(&m, dir, &o, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s: %s\n", dir, err);
        CHECK(0);
    }
    return m;
}

static int gen(const char *name, enum tiny_format f, int64_t shard_bytes, char *dir, size_t len)
{
    struct tiny_opts o;
    tiny_opts_default(&o);
    if (strcmp(name, "fp8tensor") == 0)
        o.fp8_scale = PACK_FP8_TENSOR;
    o.format = f;
    o.shard_bytes = shard_bytes;
    o.experts = 4;
    snprintf(dir, len, "%s/%s", root, name);
    int rc = tiny_write(&o, dir);
    if (rc < 0)
        fprintf(stderr, "tiny_write %s: %d\n", name, rc);
    return rc;
}

int main(void)
{
    if (stf_mkdtemp(root, sizeof(root)) < 0)
        TEST_SKIP("no temp dir");
    char dref[512], d[512];
    CHECK(gen("f32", TINY_FMT_F32, 0, dref, sizeof(dref)) == 0);
    struct model *ref = load(dref, false);
    if (!ref)
        return test_result();
    struct {
        const char *name;
        enum tiny_format f;
        double bound; // relative Frobenius error per matrix
        enum qw_format expert_fmt;
        bool act;
    } cases[] = {
        {"bf16", TINY_FMT_BF16, 0.005, QW_BF16, false},
        {"nvfp4a16", TINY_FMT_NVFP4A16, 0.15, QW_NVFP4, false},
        {"nvfp4", TINY_FMT_NVFP4, 0.15, QW_NVFP4, true},
        {"modelopt", TINY_FMT_MODELOPT_NVFP4, 0.15, QW_NVFP4, true},
        {"fp8", TINY_FMT_FP8, 0.04, QW_FP8, false},
        {"fp8tensor", TINY_FMT_FP8, 0.04, QW_FP8, false},
        {"fp8block", TINY_FMT_FP8_BLOCK, 0.04, QW_FP8, false},
    };
    float g_in_seen = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (gen(cases[i].name, cases[i].f, 0, d, sizeof(d)) < 0) {
            CHECK(0);
            continue;
        }
        struct model *m = load(d, false);
        if (!m)
            continue;
        const struct qweight *ex = &m->layers[0].moe.gate[1];
        CHECK_EQ_INT(ex->fmt, cases[i].expert_fmt);
        CHECK_EQ_INT(ex->act_fp4, cases[i].act);
        if (ex->fmt == QW_FP8)
            CHECK_EQ_INT(ex->scale_kind, strcmp(cases[i].name, "fp8tensor") == 0 ? QW_SCALE_TENSOR
                                         : strcmp(cases[i].name, "fp8block") == 0
                                             ? QW_SCALE_BLOCK
                                             : QW_SCALE_CHANNEL);
        CHECK(m->has_mtp == ref->has_mtp);
        /* W4A4: compressed-tensors input_global_scale and ModelOpt 1/input_scale are the same g_in
         */
        if (cases[i].act) {
            if (g_in_seen > 0)
                CHECK_NEAR(ex->act_gscale / g_in_seen, 1.0, 1e-5);
            g_in_seen = ex->act_gscale;
            CHECK(ex->act_gscale > 1.0f);
        }
        struct cmp_ctx c = {0};
        for (int l = 0; l < m->cfg.n_layers; l++)
            cmp_layer(&c, &m->layers[l], &ref->layers[l], m->cfg.n_experts);
        cmp_w(&c, "lm_head", &m->lm_head, &ref->lm_head);
        if (m->has_mtp)
            cmp_layer(&c, &m->mtp.layer, &ref->mtp.layer, m->cfg.n_experts);
        printf("%-9s %d matrices, worst relative error %.4f (%s)\n", cases[i].name, c.n_mats,
               c.worst, c.worst_name);
        CHECK(c.worst < cases[i].bound);
        CHECK(c.worst > 0 || cases[i].f == TINY_FMT_BF16);
        model_destroy(m);
        stf_rmdir(d);
    }

    /* sharded copy: same values; header-only still opens with one shard missing */
    CHECK(gen("sharded", TINY_FMT_BF16, 100000, d, sizeof(d)) == 0);
    char d1[512];
    CHECK(gen("single", TINY_FMT_BF16, 0, d1, sizeof(d1)) == 0);
    struct model *a = load(d, false), *b = load(d1, false);
    if (a && b) {
        CHECK(st_n_files(model_load_tensors(a)) > 1);
        struct cmp_ctx c = {0};
        for (int l = 0; l < a->cfg.n_layers; l++)
            cmp_layer(&c, &a->layers[l], &b->layers[l], a->cfg.n_experts);
        CHECK(c.worst == 0.0);
        CHECK_EQ_INT(model_load_stats(a)->total_bytes, model_load_stats(b)->total_bytes);
    }
    model_destroy(b);
    if (a) {
        char p[700];
        snprintf(p, sizeof(p), "%s/%s", d, st_at(model_load_tensors(a), 0)->file);
        model_destroy(a);
        CHECK(unlink(p) == 0);
        a = load(d, true);
        CHECK(a && !model_load_stats(a)->shapes_known);
        model_destroy(a);
    }
    stf_rmdir(d);
    stf_rmdir(d1);
    model_destroy(ref);
    stf_rmdir(dref);
    rmdir(root);
    return test_result();
}
