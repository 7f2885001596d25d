/* roofline_decode against the loader's own byte accounting (model_load_stats groups, counted by
 * tensor name during the load: an independent path) for the full-size configs in tests/configs,
 * header-only with dummy weights (nothing allocated), and its scaling in batch and context. */
#include "common/file.h"
#include "model/model_load.h"
#include "model/roofline.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct model *load_config(const char *name)
{
    const char *src = getenv("TERN_SOURCE_DIR");
    char path[1024], dir[256];
    snprintf(path, sizeof path, "%s/tests/configs/%s.json", src ? src : ".", name);
    if (file_tmpdir_copy(path, "tern-roofline-test", "config.json", dir, sizeof dir) < 0)
        return NULL;
    struct model_load_opts o = {.header_only = true, .dummy = true};
    struct model *m = NULL;
    char err[512];
    if (model_load(&m, dir, &o, err, sizeof err) < 0)
        fprintf(stderr, "load %s: %s\n", name, err);
    file_tmpdir_remove(dir, "config.json");
    return m;
}

static void check_config(const char *name)
{
    struct model *m = load_config(name);
    CHECK(m != NULL);
    if (!m)
        return;
    const struct model_config *c = &m->cfg;
    const struct model_load_stats *s = model_load_stats(m);
    /* header-only dummy: shapes and formats, no data */
    CHECK(m->lm_head.rows == c->vocab_size && m->lm_head.data == NULL);
    double want_dense = (double)s->group_bytes[MODEL_GROUP_EMBED] / c->vocab_size +
                        (double)s->group_bytes[MODEL_GROUP_LINEAR_ATTN] +
                        (double)s->group_bytes[MODEL_GROUP_FULL_ATTN] +
                        (double)s->group_bytes[MODEL_GROUP_SHARED] +
                        (double)s->group_bytes[MODEL_GROUP_ROUTER] +
                        (double)s->group_bytes[MODEL_GROUP_NORMS];
    double want_exp = (double)s->group_bytes[MODEL_GROUP_EXPERTS] * c->n_experts_per_tok /
                      c->n_experts;
    struct roofline_step r;
    struct roofline_opts o = {.batch = 1, .ctx = 0, .kv_elem = 2};
    CHECK_EQ_INT(roofline_decode(m, &o, &r), 0);
    /* the loader groups count the q/k norms of attention and the GDN gated-norm weight under
     * NORMS, as roofline does under dense: the sums agree to rounding */
    CHECK_NEAR(r.dense, want_dense, 1e-9 * want_dense + 1);
    CHECK_NEAR(r.experts, want_exp, 1e-9 * want_exp + 1);
    CHECK_NEAR(r.lm_head, (double)s->group_bytes[MODEL_GROUP_LM_HEAD], 1);
    CHECK_NEAR(r.experts_touched, c->n_experts_per_tok, 1e-12);
    /* GDN state: conv window + S, read and written, from the config */
    int n_gdn = 0, n_attn = 0;
    for (int l = 0; l < c->n_layers; l++) {
        if (c->layer_types[l] == LAYER_FULL_ATTN)
            n_attn++;
        else
            n_gdn++;
    }
    const double cd = 2.0 * c->lin_n_k_heads * c->lin_k_head_dim +
                      (double)c->lin_n_v_heads * c->lin_v_head_dim;
    const double S = (double)c->lin_n_v_heads * c->lin_k_head_dim * c->lin_v_head_dim * 4;
    CHECK_NEAR(r.gdn_state, n_gdn * 2.0 * (cd * (c->lin_conv_kernel - 1) * 2 + S), 1);
    CHECK_NEAR(r.total, r.dense + r.experts + r.lm_head + r.gdn_state + r.kv, 1);
    fprintf(stderr, "%s: total %.4f GB per token at ctx 0 (dense %.4f experts %.4f lm_head %.4f)\n",
            name, r.total / 1e9, r.dense / 1e9, r.experts / 1e9, r.lm_head / 1e9);

    /* KV grows linearly in ctx: 2 (K,V) x Hkv x D x elem per position and attention layer */
    struct roofline_step r2;
    struct roofline_opts o2 = {.batch = 1, .ctx = 4096, .kv_elem = 1};
    CHECK_EQ_INT(roofline_decode(m, &o2, &r2), 0);
    CHECK_NEAR(r2.kv, n_attn * 2.0 * c->n_kv_heads * c->head_dim * 1 * 4097, 1e-6);
    /* batch: weights once, experts touched tend to E, state and KV per sequence */
    struct roofline_opts o3 = {.batch = 64, .ctx = 0, .kv_elem = 2};
    CHECK_EQ_INT(roofline_decode(m, &o3, &r2), 0);
    CHECK(r2.experts_touched > c->n_experts_per_tok && r2.experts_touched < c->n_experts);
    CHECK_NEAR(r2.gdn_state, 64 * r.gdn_state, 1e-6 * r2.gdn_state);
    CHECK_NEAR(r2.lm_head, r.lm_head, 1e-9);
    struct roofline_opts o4 = {.batch = 100000, .ctx = 0, .kv_elem = 2};
    CHECK_EQ_INT(roofline_decode(m, &o4, &r2), 0);
    CHECK_NEAR(r2.experts_touched, c->n_experts, 1e-6);
    /* bad options */
    struct roofline_opts bad = {.batch = 0, .ctx = 0, .kv_elem = 2};
    CHECK(roofline_decode(m, &bad, &r2) < 0);
    bad = (struct roofline_opts){.batch = 1, .ctx = 0, .kv_elem = 3};
    CHECK(roofline_decode(m, &bad, &r2) < 0);
    model_destroy(m);
}

int main(void)
{
    check_config("qwen3.6-35b-a3b");
    check_config("qwen3.6-35b-a3b-nvfp4");
    return test_result();
}
