/* kv_plan against hand-computed values for the Qwen3.6-35B-A3B geometry (MODEL.md §1, §5, §7.2):
 *   KV per token per attention layer: 2 (K,V) * 2 heads * 256 * 2 B = 2048 B (bf16), 1024 B (fp8)
 *   10 attention layers: 20,480 B/token (bf16), 10,240 (fp8); +1 layer (MTP) when speculating
 *   GDN per layer: conv 8192 ch * 3 cols * 2 B = 49,152 + S 32*128*128*4 B = 2,097,152 -> 2,146,304
 *   30 GDN layers: 64,389,120 B per sequence
 *   262,144 tokens bf16: 16,384 blocks of 16 * 327,680 B = 5,368,709,120 + 64,389,120 = 5,433,098,240 B */
#include "test.h"

#include "common/err.h"
#include "common/kv_plan.h"

#include <string.h>

static struct kv_geom qwen36(void)
{
    struct kv_geom g = {
        .n_attn_layers = 10, .n_kv_heads = 2, .head_dim = 256, .n_gdn_layers = 30,
        .gdn_conv_dim = 8192, .gdn_conv_kernel = 4, .gdn_v_heads = 32, .gdn_k_dim = 128,
        .gdn_v_dim = 128, .ssm_state_f32 = true, .mtp_layers = 1, .max_position_embeddings = 262144,
    };
    return g;
}

int main(void)
{
    struct kv_geom g = qwen36();
    struct kv_plan p;
    char err[512];
    const double gib = 1024.0 * 1024.0 * 1024.0;

    /* bf16, 80 GiB budget */
    struct kv_opts o = { .dtype = KV_DTYPE_AUTO, .kv_cache_memory_bytes = (int64_t)80 << 30 };
    CHECK_EQ_INT(kv_plan_compute(&g, &o, &p, err, sizeof(err)), 0);
    CHECK_EQ_INT(p.dtype, KV_DTYPE_BF16);
    CHECK_EQ_INT(p.kv_bytes_per_token_layer, 2048);
    CHECK_EQ_INT(p.kv_bytes_per_token, 20480);
    CHECK_EQ_INT(p.gdn_bytes_per_layer, 2146304);
    CHECK_EQ_INT(p.state_bytes_per_seq, 64389120);
    CHECK_EQ_INT(p.seq_bytes_max_len, 5433098240LL);
    CHECK_NEAR(p.seq_bytes_max_len / gib, 5.0600, 0.0001);
    CHECK_NEAR(p.tokens_per_gib, 262144.0 / (5433098240.0 / gib), 0.01);
    CHECK(p.tokens_per_gib > 51492.0); /* the reference engine's figure */
    /* slots: (80 GiB - 5 GiB of KV) / 64,389,120 = 1250.6 -> capped at 256 */
    CHECK_EQ_INT(p.n_state_slots, 256);
    /* blocks: (85,899,345,920 - 256 * 64,389,120 = 69,415,731,200) / 327,680 = 211,840.2 -> 211,840 */
    CHECK_EQ_INT(p.n_blocks, 211840);
    CHECK_EQ_INT(p.pool_tokens, 211840LL * 16);
    CHECK_NEAR(p.max_concurrency, 211840.0 / 16384.0, 1e-9);

    /* fp8 */
    o.dtype = KV_DTYPE_FP8;
    CHECK_EQ_INT(kv_plan_compute(&g, &o, &p, err, sizeof(err)), 0);
    CHECK_EQ_INT(p.kv_bytes_per_token, 10240);
    CHECK_EQ_INT(p.seq_bytes_max_len, 2684354560LL + 64389120LL);
    CHECK(p.tokens_per_gib > 101606.0);

    /* small budget, fp8, 12 GiB: slots come from at most half of what one max-length sequence
     * leaves. kv(262144) = 16,384 blocks * 163,840 B = 2,684,354,560; spare = 12,884,901,888 -
     * 2,684,354,560 - 64,389,120 = 10,136,158,208; slots = 1 + floor(spare/2/64,389,120) = 79;
     * blocks = (12,884,901,888 - 79 * 64,389,120) / 163,840 = 7,798,161,408 / 163,840 = 47,596 */
    o.kv_cache_memory_bytes = (int64_t)12 << 30;
    CHECK_EQ_INT(kv_plan_compute(&g, &o, &p, err, sizeof(err)), 0);
    CHECK_EQ_INT(p.n_state_slots, 79);
    CHECK_EQ_INT(p.n_blocks, 47596);
    CHECK_NEAR(p.max_concurrency, 47596.0 / 16384.0, 1e-9);
    o.kv_cache_memory_bytes = (int64_t)80 << 30;

    /* speculation adds the MTP layer's KV: 11 layers */
    o.dtype = KV_DTYPE_BF16;
    o.spec_tokens = 3;
    CHECK_EQ_INT(kv_plan_compute(&g, &o, &p, err, sizeof(err)), 0);
    CHECK_EQ_INT(p.kv_bytes_per_token, 22528);
    o.spec_tokens = 0;

    /* refusal: 4 GiB cannot hold one 262,144-token sequence (5.06 GiB).
     * largest fit: (4,294,967,296 - 64,389,120) / 327,680 = 12,910.7 blocks -> 206,560 tokens */
    o.kv_cache_memory_bytes = (int64_t)4 << 30;
    CHECK_EQ_INT(kv_plan_compute(&g, &o, &p, err, sizeof(err)), ERR_FULL);
    CHECK_EQ_INT(p.max_len_fit, 206560);
    CHECK(strstr(err, "max_model_len=262144 needs 5.06 GiB") != NULL);
    CHECK(strstr(err, "only 4.00 GiB") != NULL);
    CHECK(strstr(err, "largest max_model_len that fits is 206560") != NULL);
    CHECK(strstr(err, "--max-model-len") != NULL);
    CHECK(strchr(err, '\n') == NULL);

    /* the suggested length must itself fit */
    o.max_model_len = p.max_len_fit;
    CHECK_EQ_INT(kv_plan_compute(&g, &o, &p, err, sizeof(err)), 0);
    CHECK_EQ_INT(p.n_state_slots, 1);
    CHECK(p.max_concurrency >= 1.0);
    o.max_model_len = p.max_model_len + 16;
    CHECK_EQ_INT(kv_plan_compute(&g, &o, &p, err, sizeof(err)), ERR_FULL);

    /* budget from device figures: 141 GiB * 0.9 - 20 GiB weights - 2 GiB reserve */
    struct kv_opts d = { .device_total_bytes = (int64_t)141 << 30, .gpu_memory_utilization = 0.9,
                         .weights_bytes = (int64_t)20 << 30, .reserve_bytes = (int64_t)2 << 30 };
    CHECK_EQ_INT(kv_plan_compute(&g, &d, &p, err, sizeof(err)), 0);
    CHECK_EQ_INT(p.budget_bytes, (int64_t)((double)((int64_t)141 << 30) * 0.9) - ((int64_t)22 << 30));

    /* bad input */
    struct kv_opts bad = { .gpu_memory_utilization = 1.5 };
    CHECK_EQ_INT(kv_plan_compute(&g, &bad, &p, err, sizeof(err)), ERR_INVAL);
    CHECK_EQ_INT(kv_dtype_parse("fp8"), KV_DTYPE_FP8);
    CHECK_EQ_INT(kv_dtype_parse("int4"), -1);
    return test_result();
}
