/* The real layout at full size without the data: tests/configs/qwen3.6-35b-a3b.json plus a
 * safetensors file that holds only the header of the official BF16 checkpoint (MODEL.md §2:
 * 693 text tensors + 19 mtp.*), loaded header-only. Checks the shape checks accept the real
 * shapes and the byte accounting against numbers derived by hand from MODEL.md. */
#include "common/file.h"
#include "common/xalloc.h"
#include "model/config_load.h"
#include "model/inspect.h"
#include "model/model_load.h"
#include "st_fixture.h"
#include "test.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int64_t off;

static void add(cJSON *h, const char *name, const char *dt, int nd, int64_t a, int64_t b, int64_t c)
{
    int64_t sh[3] = {a, b, c}, n = strcmp(dt, "F32") == 0 ? 4 : 2;
    cJSON *e = cJSON_AddObjectToObject(h, name);
    cJSON_AddStringToObject(e, "dtype", dt);
    cJSON *s = cJSON_AddArrayToObject(e, "shape");
    for (int i = 0; i < nd; i++) {
        cJSON_AddItemToArray(s, cJSON_CreateNumber((double)sh[i]));
        n *= sh[i];
    }
    cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + n)));
    off += n;
}

static void layer(cJSON *h, const char *p, bool full)
{
    char n[256];
#define T(sfx, nd, a, b, c)                                                                        \
    do {                                                                                           \
        snprintf(n, sizeof(n), "%s%s", p, sfx);                                                    \
        add(h, n, "BF16", nd, a, b, c);                                                            \
    } while (0)
    T("input_layernorm.weight", 1, 2048, 0, 0);
    T("post_attention_layernorm.weight", 1, 2048, 0, 0);
    if (full) {
        T("self_attn.q_proj.weight", 2, 8192, 2048, 0);
        T("self_attn.k_proj.weight", 2, 512, 2048, 0);
        T("self_attn.v_proj.weight", 2, 512, 2048, 0);
        T("self_attn.o_proj.weight", 2, 2048, 4096, 0);
        T("self_attn.q_norm.weight", 1, 256, 0, 0);
        T("self_attn.k_norm.weight", 1, 256, 0, 0);
    } else {
        T("linear_attn.in_proj_qkv.weight", 2, 8192, 2048, 0);
        T("linear_attn.in_proj_z.weight", 2, 4096, 2048, 0);
        T("linear_attn.in_proj_b.weight", 2, 32, 2048, 0);
        T("linear_attn.in_proj_a.weight", 2, 32, 2048, 0);
        T("linear_attn.conv1d.weight", 3, 8192, 1, 4);
        T("linear_attn.dt_bias", 1, 32, 0, 0);
        snprintf(n, sizeof(n), "%slinear_attn.A_log", p);
        add(h, n, "F32", 1, 32, 0, 0);
        T("linear_attn.norm.weight", 1, 128, 0, 0);
        T("linear_attn.out_proj.weight", 2, 2048, 4096, 0);
    }
    T("mlp.gate.weight", 2, 256, 2048, 0);
    T("mlp.experts.gate_up_proj", 3, 256, 1024, 2048);
    T("mlp.experts.down_proj", 3, 256, 2048, 512);
    T("mlp.shared_expert.gate_proj.weight", 2, 512, 2048, 0);
    T("mlp.shared_expert.up_proj.weight", 2, 512, 2048, 0);
    T("mlp.shared_expert.down_proj.weight", 2, 2048, 512, 0);
    T("mlp.shared_expert_gate.weight", 2, 1, 2048, 0);
#undef T
}

int main(void)
{
    char dir[256];
    if (stf_mkdtemp(dir, sizeof(dir)) < 0)
        TEST_SKIP("no temp dir");
    char *cfg = test_read_source("tests/configs/qwen3.6-35b-a3b.json");
    CHECK(cfg != NULL);
    if (!cfg)
        return test_result();
    stf_write_text(dir, "config.json", cfg);
    free(cfg);

    cJSON *h = cJSON_CreateObject();
    const char *P = "model.language_model.";
    char n[256];
    snprintf(n, sizeof(n), "%sembed_tokens.weight", P);
    add(h, n, "BF16", 2, 248320, 2048, 0);
    snprintf(n, sizeof(n), "%snorm.weight", P);
    add(h, n, "BF16", 1, 2048, 0, 0);
    add(h, "lm_head.weight", "BF16", 2, 248320, 2048, 0);
    for (int i = 0; i < 40; i++) {
        snprintf(n, sizeof(n), "%slayers.%d.", P, i);
        layer(h, n, i % 4 == 3);
    }
    add(h, "mtp.fc.weight", "BF16", 2, 2048, 4096, 0);
    add(h, "mtp.pre_fc_norm_embedding.weight", "BF16", 1, 2048, 0, 0);
    add(h, "mtp.pre_fc_norm_hidden.weight", "BF16", 1, 2048, 0, 0);
    add(h, "mtp.norm.weight", "BF16", 1, 2048, 0, 0);
    layer(h, "mtp.layers.0.", true);
    char *hs = cJSON_PrintUnformatted(h), p[1024];
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    CHECK(stf_write_raw(p, strlen(hs), hs, NULL, 0) == 0); /* header only: no data */
    cJSON_free(hs);
    cJSON_Delete(h);

    struct model *m = NULL;
    char err[512] = "";
    struct model_load_opts o = {.header_only = true};
    int rc = model_load(&m, dir, &o, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    if (rc == 0) {
        const struct model_load_stats *s = model_load_stats(m);
        CHECK_EQ_INT(s->n_tensors, 693 + 19); /* MODEL.md §2.2, §2.3 */
        CHECK_EQ_INT(s->n_mtp_tensors, 19);
        CHECK(m->has_mtp);
        CHECK_EQ_INT(s->group_bytes[MODEL_GROUP_EMBED], 248320ll * 2048 * 2);
        CHECK_EQ_INT(s->group_bytes[MODEL_GROUP_EXPERTS], 60ll << 30); /* 40 x 1.5 GiB */
        CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_FULL_ATTN], 40);
        CHECK_EQ_INT(s->group_tensors[MODEL_GROUP_LINEAR_ATTN], 30 * 8);
        CHECK_EQ_INT(m->layers[3].type, LAYER_FULL_ATTN);
        CHECK_EQ_INT(m->layers[3].attn.q.rows, 8192);
        CHECK_EQ_INT(m->layers[0].gdn.qkv.rows, 8192);
        CHECK_EQ_INT(m->layers[0].moe.up[255].rows, 512);
        CHECK(!qweight_present(&m->layers[0].moe.up[255]));
        char wb[256];
        CHECK(inspect_mtp_warning(m, wb, sizeof(wb)) == NULL);
    } else {
        fprintf(stderr, "%s\n", err);
    }
    model_destroy(m);
    /* a full load must refuse the data-less file */
    rc = model_load(&m, dir, NULL, err, sizeof(err));
    CHECK(rc < 0 && strstr(err, "outside the file"));
    stf_rmdir(dir);
    return test_result();
}
