/* model_load + inspect on hand-built tiny checkpoints (st_fixture.c): fused BF16, per-expert
 * BF16 with the "model." prefix, compressed-tensors NVFP4 W4A16; MTP present / absent /
 * partial; header-only; and the one-line errors for missing tensors, wrong shapes and a
 * quantization config that disagrees with the stored tensors. */
#include "common/dummy_gen.h"
#include "common/err.h"
#include "model/dtype.h"
#include "model/forward.h"
#include "model/inspect.h"
#include "model/model_load.h"
#include "model/safetensors.h"
#include "st_fixture.h"
#include "test.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

static void mkcase(char *dir, size_t len, const char *name, const struct fixture_ckpt *o)
{
    snprintf(dir, len, "%s/%s", root, name);
    CHECK(mkdir(dir, 0700) == 0);
    CHECK(fixture_write(dir, o) == 0);
}

static void expect_fail(const char *dir, const struct model_load_opts *o, const char *s1,
                        const char *s2)
{
    struct model *m = NULL;
    char err[512] = "";
    int rc = model_load(&m, dir, o, err, sizeof(err));
    CHECK(rc < 0 && m == NULL);
    model_destroy(m);
    if (!strstr(err, s1) || (s2 && !strstr(err, s2))) {
        fprintf(stderr, "error '%s' lacks '%s' / '%s'\n", err, s1, s2 ? s2 : "");
        CHECK(0);
    }
    CHECK(strchr(err, '\n') == NULL);
}

static float bf16_at(const struct st_tensor *t, int64_t i)
{
    uint16_t v;
    memcpy(&v, (const uint8_t *)t->data + i * 2, 2);
    return dtype_bf16_to_f32(v);
}

static const char *class_of(cJSON *sum, const char *cls)
{
    cJSON *q = cJSON_GetObjectItem(sum, "quantization");
    cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(q, "classes"), cls);
    return cJSON_IsString(c) ? c->valuestring : "";
}

static void test_bf16_fused(void)
{
    char dir[512];
    struct fixture_ckpt o = {.kind = FIX_BF16_FUSED, .mtp = true, .visual = true};
    mkcase(dir, sizeof(dir), "fused", &o);
    struct model *m = NULL;
    char err[512] = "";
    int rc = model_load(&m, dir, NULL, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK_EQ_INT(m->cfg.n_layers, 2);
    CHECK_EQ_INT(m->cfg.n_eos, 2); /* 63 from config.json, 62 from generation_config.json */
    CHECK_EQ_INT(m->layers[0].type, LAYER_LINEAR_ATTN);
    CHECK_EQ_INT(m->layers[1].type, LAYER_FULL_ATTN);
    CHECK(m->has_mtp);
    CHECK(qweight_present(&m->embed) && m->embed.fmt == QW_BF16 && m->embed.rows == 64);
    CHECK(m->lm_head.data != m->embed.data);
    CHECK(m->layers[1].attn.q.rows == 64 && m->layers[1].attn.q.cols == 32);
    CHECK(m->layers[0].gdn.qkv.rows == 64 && m->layers[0].gdn.out.cols == 32);
    CHECK(m->mtp.fc.rows == 32 && m->mtp.fc.cols == 64);

    /* fused experts: gate[e] = rows [0, I) and up[e] = rows [I, 2I) of gate_up_proj[e] */
    const struct st_set *st = model_load_tensors(m);
    const struct st_tensor *gu =
        st_find(st, "model.language_model.layers.1.mlp.experts.gate_up_proj");
    const struct st_tensor *dn = st_find(st, "model.language_model.layers.1.mlp.experts.down_proj");
    CHECK(gu && dn);
    float row[32];
    int e = 2, r = 5;
    qweight_dequant_row(&m->layers[1].moe.up[e], r, row);
    for (int c = 0; c < 32; c++)
        CHECK_NEAR(row[c], bf16_at(gu, ((int64_t)e * 32 + 16 + r) * 32 + c), 0);
    qweight_dequant_row(&m->layers[1].moe.gate[3], 15, row);
    for (int c = 0; c < 32; c++)
        CHECK_NEAR(row[c], bf16_at(gu, ((int64_t)3 * 32 + 15) * 32 + c), 0);
    qweight_dequant_row(&m->layers[1].moe.down[1], 31, row);
    for (int c = 0; c < 16; c++)
        CHECK_NEAR(row[c], bf16_at(dn, ((int64_t)1 * 32 + 31) * 16 + c), 0);
    CHECK(m->layers[1].moe.down[1].rows == 32 && m->layers[1].moe.down[1].cols == 16);

    /* small vectors are fp32 copies; A_log was written as F32 0.25 + i; conv is (C, K) */
    CHECK_NEAR(m->layers[0].gdn.A_log[3], 3.25, 0);
    const struct st_tensor *cv =
        st_find(st, "model.language_model.layers.0.linear_attn.conv1d.weight");
    CHECK_NEAR(m->layers[0].gdn.conv[10 * 4 + 3], bf16_at(cv, 10 * 4 + 3), 0);
    const struct st_tensor *nw = st_find(st, "model.language_model.norm.weight");
    CHECK_NEAR(m->final_norm[7], bf16_at(nw, 7), 0);

    /* accounting: 18 tensors per GDN layer, 15 per attention layer, 3 globals, 19 mtp, 2 visual */
    const struct model_load_stats *s = model_load_stats(m);
    CHECK_EQ_INT(s->n_tensors, 18 + 15 + 3 + 19 + 2);
    CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_NORMS], 8);
    CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_LINEAR_ATTN], 8);
    CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_FULL_ATTN], 4);
    CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_EXPERTS], 4);
    CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_SHARED], 8);
    CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_ROUTER], 2);
    CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_MTP], 19);
    CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_VISUAL], 2);
    CHECK_EQ_INT(s->n_skipped, 2);
    CHECK_EQ_INT(s->group_bytes[MODEL_GROUP_EMBED], 64 * 32 * 2);
    CHECK_EQ_INT(s->group_bytes[MODEL_GROUP_EXPERTS], 2 * (4 * 32 * 32 + 4 * 32 * 16) * 2);
    int64_t sum = 0;
    for (int g = 0; g < MODEL_GROUP_COUNT; g++)
        sum += s->group_bytes[g];
    CHECK_EQ_INT(sum, s->total_bytes);
    CHECK(s->fused_experts);
    CHECK_STREQ(s->prefix, "model.language_model.");

    cJSON *js = inspect_summary(m);
    CHECK_STREQ(class_of(js, "experts"), "BF16");
    CHECK_STREQ(class_of(js, "linear_attn"), "BF16");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(js, "warnings")), 0);
    cJSON_Delete(js);
    char wb[256];
    CHECK(inspect_mtp_warning(m, wb, sizeof(wb)) == NULL);
    model_destroy(m);

    /* skip_mtp */
    struct model_load_opts opt = {.skip_mtp = true};
    CHECK_EQ_INT(model_load(&m, dir, &opt, err, sizeof(err)), 0);
    CHECK(m && !m->has_mtp);
    model_destroy(m);

    /* header-only on a file truncated after its header; a full load must refuse it */
    char p[600];
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    FILE *fp = fopen(p, "rb");
    unsigned char lb[8];
    CHECK(fp && fread(lb, 1, 8, fp) == 8);
    fclose(fp);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | lb[i];
    CHECK(truncate(p, (off_t)(8 + hl)) == 0);
    opt = (struct model_load_opts){.header_only = true};
    rc = model_load(&m, dir, &opt, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    if (rc == 0) {
        CHECK(!qweight_present(&m->embed) && m->embed.rows == 64);
        CHECK(m->layers[0].gdn.A_log == NULL);
        CHECK(model_load_stats(m)->total_bytes > 0);
    }
    model_destroy(m);
    expect_fail(dir, NULL, "model.safetensors: tensor '", "outside the file");
}

static void test_per_expert_no_mtp(void)
{
    char dir[512];
    struct fixture_ckpt o = {.kind = FIX_BF16_PER_EXPERT};
    mkcase(dir, sizeof(dir), "perexp", &o);
    struct model *m = NULL;
    char err[512] = "";
    int rc = model_load(&m, dir, NULL, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK(!m->has_mtp);
    const struct model_load_stats *s = model_load_stats(m);
    CHECK_STREQ(s->prefix, "model.");
    CHECK(!s->fused_experts);
    CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_EXPERTS], 2 * 4 * 3);
    const struct st_tensor *t =
        st_find(model_load_tensors(m), "model.layers.0.mlp.experts.3.down_proj.weight");
    float row[16];
    qweight_dequant_row(&m->layers[0].moe.down[3], 30, row);
    for (int c = 0; c < 16; c++)
        CHECK_NEAR(row[c], bf16_at(t, 30 * 16 + c), 0);
    char wb[256];
    const char *w = inspect_mtp_warning(m, wb, sizeof(wb));
    CHECK(w && strcmp(w, "config declares 1 MTP layer but the checkpoint has no mtp.* tensors: "
                         "speculative decoding is unavailable") == 0);
    cJSON *js = inspect_summary(m);
    cJSON *warn = cJSON_GetArrayItem(cJSON_GetObjectItem(js, "warnings"), 0);
    CHECK(cJSON_IsString(warn) && strstr(warn->valuestring, "speculative decoding is unavailable"));
    cJSON_Delete(js);
    model_destroy(m);

    /* inspect text / json output through inspect_dir */
    char p[600];
    snprintf(p, sizeof(p), "%s/inspect.txt", root);
    FILE *f = fopen(p, "w+");
    CHECK_EQ_INT(inspect_dir(dir, NULL, true, f, err, sizeof(err)), 0);
    rewind(f);
    char buf[8192] = "";
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(p);
    /* text form: the class lines and the plain MTP warning line */
    char tbuf[8192] = "";
    FILE *tf = tmpfile();
    CHECK_EQ_INT(inspect_dir(dir, NULL, false, tf, err, sizeof(err)), 0);
    rewind(tf);
    size_t tn = fread(tbuf, 1, sizeof(tbuf) - 1, tf);
    tbuf[tn] = 0;
    fclose(tf);
    CHECK(strstr(tbuf, "  experts: BF16\n") != NULL);
    CHECK(strstr(tbuf, "layers: 2 (1 linear_attention, 1 full_attention)") != NULL);
    CHECK(strstr(tbuf, "warning: config declares 1 MTP layer but the checkpoint has no mtp.* "
                       "tensors: speculative decoding is unavailable\n") != NULL);
    cJSON *j = cJSON_Parse(buf);
    CHECK(j != NULL);
    cJSON *mt = cJSON_GetObjectItem(j, "mtp");
    CHECK(cJSON_GetObjectItem(mt, "declared_layers")->valueint == 1);
    CHECK(cJSON_GetObjectItem(mt, "tensors")->valueint == 0);
    cJSON_Delete(j);
}

static void test_ct_nvfp4(void)
{
    char dir[512];
    struct fixture_ckpt o = {.kind = FIX_CT_NVFP4A16, .mtp = true};
    mkcase(dir, sizeof(dir), "ct", &o);
    struct model *m = NULL;
    char err[512] = "";
    int rc = model_load(&m, dir, NULL, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    if (rc < 0) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    const struct qweight *w = &m->layers[0].moe.gate[2];
    CHECK(w->fmt == QW_NVFP4 && !w->act_fp4 && w->rows == 16 && w->cols == 32);
    CHECK_NEAR(w->gscale, 1.0 / 2688.0, 1e-10);
    CHECK(m->layers[1].attn.o.fmt == QW_NVFP4);
    CHECK(m->layers[0].gdn.qkv.fmt == QW_BF16);    /* ignored by re:.*linear_attn.* */
    CHECK(m->layers[0].moe.router.fmt == QW_BF16); /* ignored by re:.*mlp.gate$ */
    CHECK(m->mtp.layer.attn.q.fmt == QW_BF16);     /* ignored by re:mtp.* */
    CHECK(m->lm_head.fmt == QW_BF16);
    /* dequant of row 3 by hand from the raw tensors: e2m1(nibble) * e4m3(scale) / global */
    static const float e2m1[16] = {0, 0.5f,  1,  1.5f,  2,  3,  4,  6,
                                   0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    const struct st_set *st = model_load_tensors(m);
    const char *mod = "model.language_model.layers.0.mlp.experts.2.gate_proj";
    char n[256];
    snprintf(n, sizeof(n), "%s.weight_packed", mod);
    const uint8_t *pk = st_find(st, n)->data;
    snprintf(n, sizeof(n), "%s.weight_scale", mod);
    const uint8_t *sc = st_find(st, n)->data;
    float row[32];
    qweight_dequant_row(w, 3, row);
    int bad = 0;
    for (int c = 0; c < 32; c++) {
        uint8_t b = pk[3 * 16 + c / 2];
        float v = e2m1[c % 2 ? b >> 4 : b & 15];
        uint8_t s = sc[3 * 2 + c / 16]; /* 0x30..0x3f: exp 6, value (8+m)/8 * 2^-1 */
        float sv = (float)(8 + (s & 7)) / 8.0f * ldexpf(1.0f, ((s >> 3) & 15) - 7);
        float want = v * sv / 2688.0f;
        if (fabsf(row[c] - want) > 1e-9f)
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
    cJSON *js = inspect_summary(m);
    CHECK_STREQ(class_of(js, "experts"), "NVFP4 weight-only (no activation quant)");
    CHECK_STREQ(class_of(js, "attention"), "NVFP4 weight-only (no activation quant)");
    CHECK_STREQ(class_of(js, "linear_attn"), "BF16");
    CHECK_STREQ(class_of(js, "router"), "BF16");
    CHECK_STREQ(class_of(js, "mtp"), "BF16");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(js, "warnings")), 0);
    cJSON_Delete(js);
    CHECK_EQ_INT(model_load_stats(m)->n_quant_fallback, 0);
    model_destroy(m);

    /* the config targets the MTP head too (no re:mtp.* ignore) but it is stored BF16 */
    o.ct_mtp_targeted = true;
    mkcase(dir, sizeof(dir), "ctmtp", &o);
    rc = model_load(&m, dir, NULL, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    if (rc == 0) {
        CHECK(m->has_mtp && m->mtp.layer.attn.q.fmt == QW_BF16 && m->mtp.fc.fmt == QW_BF16);
        CHECK(m->layers[1].attn.q.fmt == QW_NVFP4);
        /* fc, q/k/v/o, 4 experts x 3, shared gate/up/down = 20 (router and shared_expert_gate
         * are ignored by the config anyway) */
        CHECK_EQ_INT(model_load_stats(m)->n_quant_fallback, 20);
        js = inspect_summary(m);
        cJSON *w0 = cJSON_GetArrayItem(cJSON_GetObjectItem(js, "warnings"), 0);
        CHECK(cJSON_IsString(w0) && strstr(w0->valuestring, "20 modules targeted"));
        cJSON_Delete(js);
    } else {
        fprintf(stderr, "%s\n", err);
    }
    model_destroy(m);
}

static void test_errors(void)
{
    char dir[512];
    struct fixture_ckpt o = {.kind = FIX_BF16_FUSED, .drop_tensor = true};
    mkcase(dir, sizeof(dir), "drop", &o);
    expect_fail(dir, NULL,
                "tensor 'model.language_model.layers.0.post_attention_layernorm.weight' missing",
                NULL);

    o = (struct fixture_ckpt){.kind = FIX_BF16_FUSED, .bad_shape = true};
    mkcase(dir, sizeof(dir), "shape", &o);
    expect_fail(dir, NULL, "tensor 'model.language_model.layers.1.mlp.gate.weight': shape [3, 32]",
                "expects [4, 32]");

    o = (struct fixture_ckpt){.kind = FIX_CT_NVFP4A16_BF16_STORED};
    mkcase(dir, sizeof(dir), "wrongq", &o);
    expect_fail(dir, NULL, "declares NVFP4 weight-only", "as BF16 (no ");

    o = (struct fixture_ckpt){.kind = FIX_BF16_FUSED, .mtp_partial = true};
    mkcase(dir, sizeof(dir), "mtppart", &o);
    expect_fail(dir, NULL, "partial MTP head: tensor 'mtp.fc.weight' missing", "18 mtp.*");
    struct model_load_opts skip = {.skip_mtp = true};
    struct model *m = NULL;
    char err[512];
    CHECK_EQ_INT(model_load(&m, dir, &skip, err, sizeof(err)), 0);
    model_destroy(m);

    /* config problems surface with the file name */
    stf_write_text(dir, "config.json",
                   "{\"text_config\":{\"num_experts\":2,\"num_experts_per_tok\":4}}");
    expect_fail(dir, NULL, "num_experts_per_tok = 4 exceeds num_experts = 2", NULL);
    char p[600];
    snprintf(p, sizeof(p), "%s/config.json", dir);
    unlink(p);
    expect_fail(dir, NULL, "config.json", "cannot read");
}

/* dummy weights: formats follow the quant config, values depend only on (seed, name) */
static void test_dummy(void)
{
    char dir[512];
    struct fixture_ckpt o = {.kind = FIX_CT_NVFP4A16, .mtp = true};
    mkcase(dir, sizeof(dir), "dummy", &o);
    char p[600];
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    CHECK(unlink(p) == 0); /* config.json alone */
    struct model_load_opts opt = {.dummy = true, .dummy_seed = 5};
    struct model *a = NULL, *b = NULL, *c = NULL;
    char err[512] = "";
    CHECK_EQ_INT(model_load(&a, dir, &opt, err, sizeof(err)), 0);
    CHECK_EQ_INT(model_load(&b, dir, &opt, err, sizeof(err)), 0);
    opt.dummy_seed = 6;
    CHECK_EQ_INT(model_load(&c, dir, &opt, err, sizeof(err)), 0);
    if (!a || !b || !c) {
        fprintf(stderr, "%s\n", err);
        model_destroy(a);
        model_destroy(b);
        model_destroy(c);
        return;
    }
    const struct qweight *wa = &a->layers[1].moe.down[3], *wb = &b->layers[1].moe.down[3];
    CHECK(wa->fmt == QW_NVFP4 && !wa->act_fp4 && wa->rows == 32 && wa->cols == 16);
    CHECK(a->layers[0].gdn.qkv.fmt == QW_BF16 && a->layers[1].attn.q.fmt == QW_NVFP4);
    CHECK(a->has_mtp && a->mtp.fc.rows == 32);
    float ra[16], rb[16], rc[16];
    qweight_dequant_row(wa, 7, ra);
    qweight_dequant_row(wb, 7, rb);
    qweight_dequant_row(&c->layers[1].moe.down[3], 7, rc);
    CHECK(memcmp(ra, rb, sizeof(ra)) == 0);
    CHECK(memcmp(ra, rc, sizeof(ra)) != 0);
    float x[32], y[64];
    for (int i = 0; i < 32; i++)
        x[i] = 0.1f * (float)(i % 5);
    qweight_matmul(&a->layers[1].attn.q, x, 1, y, NULL);
    bool finite = true;
    for (int i = 0; i < 64; i++)
        finite = finite && isfinite(y[i]);
    CHECK(finite);
    CHECK(isfinite(a->layers[0].gdn.A_log[0]) && a->final_norm != NULL);
    CHECK(model_load_stats(a)->total_bytes > 0);
    model_destroy(a);
    model_destroy(b);
    model_destroy(c);
}

/* The bytes a dummy stream describes (common/dummy_gen.h: what the device's dummy_fill writes) */
static void stream_bytes(const struct model_dummy_stream *st, void *out)
{
    if (st->u16)
        dummy_gen_u16(out, st->n, st->seed, st->table, 0, dummy_gen_units(st->n));
    else
        dummy_gen_bytes(out, st->n, st->seed, st->mask, st->add, 0, dummy_gen_units(st->n));
}

/* A weight left to the device (dummy_device) against the same weight filled on the host: its
 * streams describe the host's bytes exactly. */
static void check_deferred(const struct qweight *h, const struct qweight *d, const char *what)
{
    CHECK(d->dummy && d->data == NULL && d->bscale == NULL && qweight_present(d));
    CHECK(!h->dummy && h->data != NULL);
    CHECK(d->fmt == h->fmt && d->rows == h->rows && d->cols == h->cols);
    struct model_dummy_stream sd, sb;
    CHECK_EQ_INT(model_dummy_streams(d, &sd, &sb), 0);
    CHECK_EQ_INT(model_dummy_streams(h, &sd, &sb), ERR_INVAL);
    CHECK_EQ_INT(model_dummy_streams(d, &sd, &sb), 0);
    const size_t es = sd.u16 ? 2 : 1;
    void *buf = malloc((size_t)sd.n * es + 1);
    stream_bytes(&sd, buf);
    const bool data_ok = memcmp(buf, h->data, (size_t)sd.n * es) == 0;
    bool scale_ok = h->fmt != QW_NVFP4 || sb.n == h->rows * h->cols / 16;
    if (scale_ok && sb.n > 0) {
        void *bb = malloc((size_t)sb.n);
        stream_bytes(&sb, bb);
        scale_ok = memcmp(bb, h->bscale, (size_t)sb.n) == 0;
        free(bb);
    }
    if (!data_ok || !scale_ok)
        fprintf(stderr, "dummy_device: %s data %d scales %d\n", what, data_ok, scale_ok);
    CHECK(data_ok && scale_ok);
    free(buf);
}

/* dummy_device: the large matrices are described, not filled (the GPU runner writes them);
 * the same byte counts; the model refuses a CPU pass */
static void test_dummy_device(void)
{
    char dir[512];
    struct fixture_ckpt o = {.kind = FIX_CT_NVFP4A16, .mtp = true};
    mkcase(dir, sizeof(dir), "dummy_dev", &o);
    char p[600];
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    CHECK(unlink(p) == 0);
    struct model_load_opts oh = {.dummy = true, .dummy_seed = 5}, od = oh;
    od.dummy_device = true;
    struct model *h = NULL, *d = NULL;
    char err[512] = "";
    CHECK_EQ_INT(model_load(&h, dir, &oh, err, sizeof(err)), 0);
    CHECK_EQ_INT(model_load(&d, dir, &od, err, sizeof(err)), 0);
    if (!h || !d) {
        fprintf(stderr, "%s\n", err);
        model_destroy(h);
        model_destroy(d);
        return;
    }
    CHECK(d->device_only && !h->device_only);
    CHECK(forward_ctx_create(d, 1, 8, NULL) == NULL);
    CHECK(model_load_stats(d)->total_bytes == model_load_stats(h)->total_bytes);
    check_deferred(&h->layers[1].moe.down[3], &d->layers[1].moe.down[3], "nvfp4 expert");
    check_deferred(&h->layers[1].attn.q, &d->layers[1].attn.q, "nvfp4 attention");
    check_deferred(&h->layers[0].gdn.qkv, &d->layers[0].gdn.qkv, "bf16 gdn");
    check_deferred(&h->embed, &d->embed, "bf16 embedding");
    check_deferred(&h->mtp.fc, &d->mtp.fc, "mtp fc");
    /* the router stays on the host (the GPU runner's fp32 copy reads it) */
    CHECK(!d->layers[0].moe.router.dummy && d->layers[0].moe.router.data != NULL);
    CHECK(memcmp(d->layers[0].moe.router.data, h->layers[0].moe.router.data,
                 (size_t)(h->layers[0].moe.router.rows * h->layers[0].moe.router.cols * 2)) == 0);
    model_destroy(h);
    model_destroy(d);
}

int main(void)
{
    if (stf_mkdtemp(root, sizeof(root)) < 0)
        TEST_SKIP("no temp dir");
    test_bf16_fused();
    test_per_expert_no_mtp();
    test_ct_nvfp4();
    test_errors();
    test_dummy();
    test_dummy_device();
    /* cleanup: each case dir holds only plain files */
    const char *cases[] = {"fused",  "perexp",  "ct",    "drop", "shape",
                           "wrongq", "mtppart", "dummy", "ctmtp"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char d[512];
        snprintf(d, sizeof(d), "%s/%s", root, cases[i]);
        stf_rmdir(d);
    }
    rmdir(root);
    return test_result();
}
