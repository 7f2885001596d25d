/* config: the real 35B-A3B config (tests/configs) parses to MODEL.md §1's numbers; nested vs
 * flat; derived layer_types; rope fallbacks; eos from generation_config (int or list);
 * validation errors name the field. */
#include "common/file.h"
#include "common/xalloc.h"
#include "model/config_load.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static void test_real(void)
{
    char *text = test_read_source("tests/configs/qwen3.6-35b-a3b.json");
    CHECK(text != NULL);
    if (!text)
        return;
    struct model_config c;
    char err[256] = "";
    CHECK_EQ_INT(config_parse(&c, text, err, sizeof(err)), 0);
    CHECK_EQ_INT(config_validate(&c, err, sizeof(err)), 0);
    free(text);
    CHECK_STREQ(c.model_type, "qwen3_5_moe");
    CHECK_STREQ(c.architecture, "Qwen3_5MoeForConditionalGeneration");
    CHECK_EQ_INT(c.vocab_size, 248320);
    CHECK_EQ_INT(c.hidden_size, 2048);
    CHECK_EQ_INT(c.n_layers, 40);
    int n_full = 0;
    for (int i = 0; i < 40; i++) {
        n_full += c.layer_types[i] == LAYER_FULL_ATTN;
        CHECK_EQ_INT(c.layer_types[i], (i % 4 == 3) ? LAYER_FULL_ATTN : LAYER_LINEAR_ATTN);
    }
    CHECK_EQ_INT(n_full, 10);
    CHECK_EQ_INT(c.n_heads, 16);
    CHECK_EQ_INT(c.n_kv_heads, 2);
    CHECK_EQ_INT(c.head_dim, 256);
    CHECK(c.attn_output_gate);
    CHECK_NEAR(c.rope_theta, 1e7, 0);
    CHECK_NEAR(c.partial_rotary_factor, 0.25, 0);
    CHECK_EQ_INT(c.rotary_dim, 64);
    CHECK_EQ_INT(c.lin_n_k_heads, 16);
    CHECK_EQ_INT(c.lin_n_v_heads, 32);
    CHECK_EQ_INT(c.lin_k_head_dim, 128);
    CHECK_EQ_INT(c.lin_v_head_dim, 128);
    CHECK_EQ_INT(c.lin_conv_kernel, 4);
    CHECK_EQ_INT(c.n_experts, 256);
    CHECK_EQ_INT(c.n_experts_per_tok, 8);
    CHECK_EQ_INT(c.moe_inter, 512);
    CHECK_EQ_INT(c.shared_inter, 512);
    CHECK_NEAR(c.rms_eps, 1e-6, 1e-12);
    CHECK_EQ_INT(c.max_position_embeddings, 262144);
    CHECK(!c.tie_word_embeddings);
    CHECK_EQ_INT(c.mtp_n_layers, 1);
    CHECK(c.ssm_state_f32);
    CHECK_STREQ(c.dtype, "bfloat16");
    CHECK_EQ_INT(c.n_eos, 1);
    CHECK_EQ_INT(c.eos_ids[0], 248044);
    /* generation_config adds its stop list after config.json's id, without duplicates */
    CHECK_EQ_INT(
        config_parse_generation(&c, "{\"eos_token_id\":[248046,248044]}", err, sizeof(err)), 0);
    CHECK_EQ_INT(c.n_eos, 2);
    CHECK_EQ_INT(c.eos_ids[0], 248044);
    CHECK_EQ_INT(c.eos_ids[1], 248046);
}

static const char FLAT[] =
    "{\"model_type\":\"qwen3_5_moe_text\",\"architectures\":[\"Qwen3_5MoeForCausalLM\"],"
    "\"vocab_size\":512,\"hidden_size\":64,\"num_hidden_layers\":8,\"full_attention_interval\":3,"
    "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":32,"
    "\"linear_num_key_heads\":2,\"linear_num_value_heads\":4,\"linear_key_head_dim\":16,"
    "\"linear_value_head_dim\":16,\"num_experts\":8,\"num_experts_per_tok\":2,"
    "\"moe_intermediate_size\":32,\"shared_expert_intermediate_size\":32,"
    "\"rope_theta\":500000.0,\"partial_rotary_factor\":0.5,\"torch_dtype\":\"float32\","
    "\"eos_token_id\":[1,2],\"tie_word_embeddings\":true}";

static void test_flat(void)
{
    struct model_config c;
    char err[256] = "";
    CHECK_EQ_INT(config_parse(&c, FLAT, err, sizeof(err)), 0);
    CHECK_EQ_INT(config_validate(&c, err, sizeof(err)), 0);
    CHECK_STREQ(c.architecture, "Qwen3_5MoeForCausalLM");
    CHECK_EQ_INT(c.n_layers, 8);
    /* derived: layer i is full attention iff (i+1) % 3 == 0 -> 2, 5 */
    for (int i = 0; i < 8; i++)
        CHECK_EQ_INT(c.layer_types[i], (i == 2 || i == 5) ? LAYER_FULL_ATTN : LAYER_LINEAR_ATTN);
    CHECK_NEAR(c.rope_theta, 500000.0, 0); /* flat fallback */
    CHECK_EQ_INT(c.rotary_dim, 16);        /* 32 * 0.5 */
    CHECK_EQ_INT(c.lin_conv_kernel, 4);    /* class default */
    CHECK_EQ_INT(c.mtp_n_layers, 0);
    CHECK_STREQ(c.dtype, "float32"); /* torch_dtype fallback */
    CHECK(c.tie_word_embeddings);
    CHECK_EQ_INT(c.n_eos, 2);
    CHECK_EQ_INT(c.eos_ids[1], 2);
    CHECK_EQ_INT(config_parse_generation(&c, "{\"eos_token_id\":7}", err, sizeof(err)), 0);
    CHECK_EQ_INT(c.n_eos, 3);
    CHECK_EQ_INT(c.eos_ids[2], 7);

    /* default interval 4 when neither layer_types nor the interval is given */
    CHECK_EQ_INT(config_parse(&c, "{\"num_hidden_layers\":8}", err, sizeof(err)), 0);
    CHECK_EQ_INT(c.layer_types[3], LAYER_FULL_ATTN);
    CHECK_EQ_INT(c.layer_types[7], LAYER_FULL_ATTN);
    CHECK_EQ_INT(c.layer_types[4], LAYER_LINEAR_ATTN);
    CHECK_NEAR(c.rope_theta, 10000.0, 0); /* library default */
}

/* Expect config_parse + validate of json to fail with a message containing sub. */
static void expect_bad(const char *json, const char *sub)
{
    struct model_config c;
    char err[256] = "";
    int rc = config_parse(&c, json, err, sizeof(err));
    if (rc == 0)
        rc = config_validate(&c, err, sizeof(err));
    CHECK(rc < 0);
    if (!strstr(err, sub)) {
        fprintf(stderr, "config error '%s' lacks '%s'\n", err, sub);
        CHECK(0);
    }
}

static void test_errors(void)
{
    expect_bad("{\"num_hidden_layers\":", "not a valid JSON");
    expect_bad("{\"hidden_size\":0}", "hidden_size = 0 must be positive");
    expect_bad("{\"hidden_size\":\"big\"}", "hidden_size must be an integer");
    expect_bad("{\"num_attention_heads\":16,\"num_key_value_heads\":3}",
               "num_key_value_heads = 3 does not divide");
    expect_bad("{\"linear_num_key_heads\":3}", "linear_num_key_heads = 3 does not divide");
    expect_bad("{\"num_experts\":4,\"num_experts_per_tok\":8}",
               "num_experts_per_tok = 8 exceeds num_experts = 4");
    expect_bad("{\"num_hidden_layers\":300}", "num_hidden_layers = 300");
    expect_bad("{\"num_hidden_layers\":2,\"layer_types\":[\"linear_attention\"]}",
               "layer_types must be a list of num_hidden_layers (2)");
    expect_bad("{\"num_hidden_layers\":1,\"layer_types\":[\"sliding_attention\"]}",
               "layer_types[0] = 'sliding_attention'");
    expect_bad("{\"rope_parameters\":{\"rope_type\":\"yarn\"}}", "rope_type = 'yarn'");
    expect_bad("{\"rope_parameters\":{\"partial_rotary_factor\":2.0}}", "partial_rotary_factor");
    expect_bad("{\"eos_token_id\":\"x\"}", "eos_token_id must be an integer or a list");
    expect_bad("{\"vocab_size\":10,\"eos_token_id\":10}", "eos_token_id 10 outside");
    expect_bad("{\"text_config\":{\"head_dim\":-1}}", "head_dim = -1");
}

int main(void)
{
    test_real();
    test_flat();
    test_errors();
    return test_result();
}
