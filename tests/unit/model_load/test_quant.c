/* quant: compressed-tensors groups (class / regex / exact targets, ignore), ModelOpt single and
 * MIXED_PRECISION (prefix lookup across name prefixes, wildcard excludes), fp8 block style. */
#include "model/quant.h"
#include "test.h"

#include <string.h>

#define P "model.language_model.layers."

static const char CT[] =
    "{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"mixed-"
    "precision\","
    "\"config_groups\":{"
    "\"group_0\":{\"targets\":[\"Linear\"],\"weights\":{\"num_bits\":4,\"type\":\"float\","
    "\"strategy\":\"tensor_group\",\"group_size\":16,\"symmetric\":true},\"input_activations\":"
    "null},"
    "\"group_1\":{\"targets\":[\"re:.*self_attn\\\\.(q|k)_proj$\"],\"weights\":{\"num_bits\":8,"
    "\"type\":\"float\",\"strategy\":\"block\",\"block_structure\":[128,64]}},"
    "\"group_2\":{\"targets\":[\"" P "0.mlp.shared_expert.down_proj\"],\"weights\":{\"num_bits\":4,"
    "\"type\":\"float\",\"strategy\":\"tensor_group\",\"group_size\":16},\"input_activations\":"
    "{\"num_bits\":4,\"type\":\"float\",\"strategy\":\"tensor_group\",\"group_size\":16,"
    "\"dynamic\":\"local\"}},"
    "\"group_3\":{\"targets\":[\"re:.*mlp.experts.7.*\"],\"weights\":{\"num_bits\":4,"
    "\"type\":\"int\",\"strategy\":\"group\",\"group_size\":128}},"
    "\"group_4\":{\"targets\":[\"re:mtp.fc\"],\"weights\":{\"num_bits\":8,"
    "\"type\":\"float\",\"strategy\":\"channel\"}}"
    "},\"ignore\":[\"lm_head\",\"re:.*mlp.gate$\",\"re:.*linear_attn.*\",\"re:layers\"]}}";

static struct quant_scheme look(const struct quant *q, const char *m)
{
    return quant_lookup(q, m);
}

static void test_ct(void)
{
    char err[256] = "";
    struct quant *q = quant_create(CT, NULL, err, sizeof(err));
    CHECK(q != NULL);
    if (!q) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK_EQ_INT(quant_get_method(q), QUANT_METHOD_CT);
    struct quant_scheme s = look(q, P "3.mlp.experts.5.gate_proj");
    CHECK_EQ_INT(s.kind, QUANT_KIND_NVFP4);
    CHECK(!s.act_fp4);
    char buf[128];
    CHECK_STREQ(quant_scheme_str(&s, buf, sizeof(buf)), "NVFP4 weight-only (no activation quant)");
    s = look(q, P "3.self_attn.q_proj"); /* regex beats class name */
    CHECK_EQ_INT(s.kind, QUANT_KIND_FP8);
    CHECK_EQ_INT(s.fp8_scale, QUANT_FP8_BLOCK);
    CHECK_EQ_INT(s.block_rows, 128);
    CHECK_EQ_INT(s.block_cols, 64);
    CHECK_STREQ(quant_scheme_str(&s, buf, sizeof(buf)), "FP8 block 128x64");
    s = look(q, P "3.self_attn.v_proj"); /* regex does not match v: class name */
    CHECK_EQ_INT(s.kind, QUANT_KIND_NVFP4);
    s = look(q, P "0.mlp.shared_expert.down_proj"); /* exact name beats all */
    CHECK_EQ_INT(s.kind, QUANT_KIND_NVFP4);
    CHECK(s.act_fp4);
    s = look(q, "model.layers.0.mlp.shared_expert.down_proj"); /* other prefix, same module */
    CHECK(s.act_fp4);
    s = look(q, P "1.mlp.shared_expert.down_proj");
    CHECK(s.kind == QUANT_KIND_NVFP4 && !s.act_fp4);
    CHECK_EQ_INT(look(q, P "1.mlp.gate").kind, QUANT_KIND_NONE);
    CHECK_EQ_INT(look(q, P "1.mlp.shared_expert_gate").kind, QUANT_KIND_NVFP4);
    CHECK_EQ_INT(look(q, P "0.linear_attn.in_proj_qkv").kind, QUANT_KIND_NONE);
    CHECK_EQ_INT(look(q, "lm_head").kind, QUANT_KIND_NONE);
    s = look(q, P "2.mlp.experts.7.up_proj");
    CHECK_EQ_INT(s.kind, QUANT_KIND_UNSUPPORTED);
    CHECK(s.detail && strstr(s.detail, "4-bit int"));
    s = look(q, "mtp.fc"); /* "re:layers" is anchored: it ignores nothing here */
    CHECK(s.kind == QUANT_KIND_FP8 && s.fp8_scale == QUANT_FP8_CHANNEL);
    quant_destroy(q);
}

static const char MO_MIXED[] =
    "{\"producer\":{\"name\":\"modelopt\",\"version\":\"0.44.0\"},\"quantization\":{"
    "\"quant_algo\":\"MIXED_PRECISION\",\"kv_cache_quant_algo\":null,"
    "\"exclude_modules\":[\"lm_head\",\"*linear_attn*\",\"model.language_model.layers.*.mlp.gate\"]"
    ","
    "\"quantized_layers\":{"
    "\"model.language_model.layers.0.mlp.experts\":{\"quant_algo\":\"W4A16_NVFP4\",\"group_size\":"
    "16},"
    "\"model.language_model.layers.0.self_attn.q_proj\":{\"quant_algo\":\"FP8\"},"
    "\"model.language_model.layers.1.mlp.shared_expert.up_proj\":{\"quant_algo\":\"NVFP4\"},"
    "\"model.language_model.layers.2.mlp.experts\":{\"quant_algo\":\"W4A8_NVFP4_FP8\"}}}}";

static void test_modelopt(void)
{
    char err[256] = "";
    struct quant *q = quant_create("{\"model_type\":\"qwen3_5_moe\"}", MO_MIXED, err, sizeof(err));
    CHECK(q != NULL);
    if (!q) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK_EQ_INT(quant_get_method(q), QUANT_METHOD_MODELOPT);
    struct quant_scheme s = look(q, P "0.mlp.experts.5.down_proj");
    CHECK(s.kind == QUANT_KIND_NVFP4 && !s.act_fp4);
    s = look(q, "model.layers.0.mlp.experts.5.down_proj"); /* prefix variant */
    CHECK(s.kind == QUANT_KIND_NVFP4 && !s.act_fp4);
    CHECK_EQ_INT(look(q, P "1.mlp.experts.5.down_proj").kind, QUANT_KIND_NONE);
    s = look(q, P "0.self_attn.q_proj");
    CHECK(s.kind == QUANT_KIND_FP8 && s.fp8_scale == QUANT_FP8_TENSOR);
    CHECK_EQ_INT(look(q, P "0.self_attn.q_proj_extra").kind, QUANT_KIND_NONE);
    s = look(q, P "1.mlp.shared_expert.up_proj");
    CHECK(s.kind == QUANT_KIND_NVFP4 && s.act_fp4);
    CHECK_EQ_INT(look(q, P "2.mlp.experts.0.up_proj").kind, QUANT_KIND_UNSUPPORTED);
    quant_destroy(q);

    /* single algo in config.json, wildcard excludes */
    const char *cfg = "{\"quantization_config\":{\"quant_method\":\"modelopt\","
                      "\"quant_algo\":\"NVFP4\",\"ignore\":[\"lm_head\",\"*linear_attn*\","
                      "\"*mlp.gate\",\"*shared_expert_gate\",\"mtp*\"]}}";
    q = quant_create(cfg, NULL, err, sizeof(err));
    CHECK(q != NULL);
    if (!q)
        return;
    s = look(q, P "4.mlp.experts.0.gate_proj");
    CHECK(s.kind == QUANT_KIND_NVFP4 && s.act_fp4);
    CHECK_EQ_INT(look(q, P "4.mlp.gate").kind, QUANT_KIND_NONE);
    CHECK_EQ_INT(look(q, P "4.mlp.shared_expert_gate").kind, QUANT_KIND_NONE);
    CHECK_EQ_INT(look(q, P "4.linear_attn.out_proj").kind, QUANT_KIND_NONE);
    CHECK_EQ_INT(look(q, "mtp.layers.0.self_attn.q_proj").kind, QUANT_KIND_NONE);
    CHECK_EQ_INT(look(q, "lm_head").kind, QUANT_KIND_NONE);
    quant_destroy(q);
}

static void test_fp8_and_errors(void)
{
    char err[256] = "";
    const char *cfg =
        "{\"quantization_config\":{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\","
        "\"activation_scheme\":\"dynamic\",\"weight_block_size\":[128,128],"
        "\"modules_to_not_convert\":[\"lm_head\",\"mlp.gate\",\"linear_attn.in_proj_b\"]}}";
    struct quant *q = quant_create(cfg, NULL, err, sizeof(err));
    CHECK(q != NULL);
    if (q) {
        struct quant_scheme s = look(q, P "3.self_attn.o_proj");
        CHECK(s.kind == QUANT_KIND_FP8 && s.fp8_scale == QUANT_FP8_BLOCK && s.block_rows == 128);
        CHECK(s.optional);
        CHECK_EQ_INT(look(q, P "3.mlp.gate").kind, QUANT_KIND_NONE);
        CHECK_EQ_INT(look(q, P "0.linear_attn.in_proj_b").kind, QUANT_KIND_NONE);
        CHECK_EQ_INT(look(q, P "0.linear_attn.in_proj_a").kind, QUANT_KIND_FP8);
        quant_destroy(q);
    }
    q = quant_create("{\"model_type\":\"x\"}", NULL, err, sizeof(err));
    CHECK(q && quant_get_method(q) == QUANT_METHOD_NONE);
    CHECK(q && look(q, "lm_head").kind == QUANT_KIND_NONE);
    quant_destroy(q);
    CHECK(look(NULL, "lm_head").kind == QUANT_KIND_NONE);

    q = quant_create("{\"quantization_config\":{\"quant_method\":\"gptq\"}}", NULL, err,
                     sizeof(err));
    CHECK(q == NULL && strstr(err, "quant_method 'gptq' is not supported"));
    q = quant_create("{\"quantization_config\":{\"quant_method\":\"compressed-tensors\","
                     "\"config_groups\":{\"g\":{\"targets\":[\"re:(\"]}}}}",
                     NULL, err, sizeof(err));
    CHECK(q == NULL && strstr(err, "bad regex 're:('"));
    q = quant_create(
        "{\"quantization_config\":{\"quant_method\":\"fp8\",\"weight_block_size\":[0]}}", NULL, err,
        sizeof(err));
    CHECK(q == NULL && strstr(err, "weight_block_size"));
    q = quant_create("{\"a\":", NULL, err, sizeof(err));
    CHECK(q == NULL && strstr(err, "config.json"));
}

int main(void)
{
    test_ct();
    test_modelopt();
    test_fp8_and_errors();
    return test_result();
}
