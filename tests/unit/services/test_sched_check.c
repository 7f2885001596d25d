/* Unit: the scheduler's KV-pool check (sched_check) for the real Qwen3.6-35B-A3B config file
 * (tests/configs/qwen3.6-35b-a3b.json, parsed by model/config_load) against hand-computed values,
 * bf16 and fp8, with and without the MTP layer; the startup refusal line; and the CLI
 * `tern-scheduler --check ... --json` (exit codes, JSON fields).
 *
 * Hand computation (MODEL.md: 10 full-attention layers of 2 KV heads x 256, 30 GDN layers with
 * conv dim 2*16*128 + 32*128 = 8192, kernel 4, 32 V heads of 128 x 128, fp32 state):
 *   KV per token: 2 x 2 x 256 x 2 B = 2,048 B/layer x 10 = 20,480 B (bf16); 10,240 B (fp8)
 *   GDN per sequence: (8192 x 3 x 2 + 32 x 128 x 128 x 4) x 30 = 2,146,304 x 30 = 64,389,120 B
 *   block of 16 tokens: 327,680 B (bf16), 163,840 B (fp8); 262,144 tokens = 16,384 blocks
 *   80 GiB = 85,899,345,920 B; 256 slots = 16,483,614,720 B; the rest 69,415,731,200 B
 *     bf16: / 327,680 = 211,840 blocks = 3,389,440 tokens, 12.93x (211,840 / 16,384)
 *     fp8:  / 163,840 = 423,680 blocks = 6,778,880 tokens, 25.86x
 *     bf16 + MTP (11 layers, 22,528 B/token, 360,448 B/block): 192,581 blocks, 11.75x
 *   4 GiB bf16: needs 5,433,098,240 B = 5.06 GiB; fits (4 GiB - 64,389,120) / 327,680 = 12,910
 *     blocks = 206,560 tokens
 *   24 GiB bf16 at max_model_len 32,768: 2,048 blocks (671,088,640 B) + 256 slots; the rest
 *     9,285,992,448 B / 327,680 = 28,339 blocks = 453,424 tokens, 13.84x
 * The figures above are --gdn-state slots (states reserved up front).
 * --gdn-state pool (the default; issue 19), 6 GiB = 6,442,450,944 B at 262,144 tokens:
 *   bf16: 19,660 blocks (6,442,188,800 B); a state = ceil(64,389,120 / 327,680) = 197 blocks;
 *     KV tokens beside one state (19,660 - 197) x 16 = 311,408 (reference engine: 308,955);
 *     concurrency 19,660 / (16,384 + 197) = 1.18569x (reference: 1.18x); one max-length sequence
 *     16,581 blocks = 5,433,262,080 B; 512-token requests: 19,660 / (32 + 197) = 85 at once
 *   fp8: 39,321 blocks of 163,840 B; a state = 64,389,120 / 163,840 = 393 blocks exactly;
 *     (39,321 - 393) x 16 = 622,848 tokens (reference: 609,637); 39,321 / 16,777 = 2.34374x
 *   4 GiB bf16: 13,107 blocks; largest length (13,107 - 197) x 16 = 206,560, as with slots */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "sched_check.h"
#include "test.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static const char *CONFIG = "tests/configs/qwen3.6-35b-a3b.json";

static int plan_for(const char *const *flags, int n_flags, struct kv_plan *p, char *err,
                    size_t errlen)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"tern-scheduler";
    argv[argc++] = (char *)"--model-config";
    argv[argc++] = (char *)CONFIG;
    for (int i = 0; i < n_flags && argc < 31; i++)
        argv[argc++] = (char *)flags[i];
    argv[argc] = NULL;
    struct sched_cfg cfg;
    int rc = sched_cfg_parse(&cfg, argc, argv);
    CHECK_EQ_INT(rc, 0);
    if (rc != 0)
        return rc;
    return sched_check_plan(&cfg, NULL, p, err, errlen);
}

static void test_bf16(void)
{
    const char *f[] = {"--kv-cache-memory-bytes", "85899345920", "--gdn-state", "slots"};
    struct kv_plan p;
    char err[1024] = "";
    CHECK_EQ_INT(plan_for(f, 4, &p, err, sizeof err), 0);
    CHECK_EQ_INT(p.dtype, KV_DTYPE_BF16);
    CHECK_EQ_INT(p.max_model_len, 262144);
    CHECK_EQ_INT(p.kv_bytes_per_token_layer, 2048);
    CHECK_EQ_INT(p.n_kv_layers, 10);
    CHECK_EQ_INT(p.kv_bytes_per_token, 20480);
    CHECK_EQ_INT(p.block_bytes, 327680);
    CHECK_EQ_INT(p.gdn_bytes_per_layer, 2146304);
    CHECK_EQ_INT(p.state_bytes_per_seq, 64389120);
    CHECK_EQ_INT(p.seq_bytes_max_len, 5433098240LL);
    CHECK_EQ_INT(p.n_state_slots, 256);
    CHECK_EQ_INT(p.n_blocks, 211840);
    CHECK_EQ_INT(p.pool_tokens, 3389440);
    CHECK_NEAR(p.max_concurrency, 12.9296875, 1e-9);
    CHECK(p.tokens_per_gib > 51492.0); /* more than the reference engine */
}

static void test_fp8(void)
{
    const char *f[] = {"--kv-cache-memory-bytes",
                       "85899345920",
                       "--kv-cache-dtype",
                       "fp8",
                       "--gdn-state",
                       "slots"};
    struct kv_plan p;
    char err[1024] = "";
    CHECK_EQ_INT(plan_for(f, 6, &p, err, sizeof err), 0);
    CHECK_EQ_INT(p.dtype, KV_DTYPE_FP8);
    CHECK_EQ_INT(p.kv_bytes_per_token, 10240);
    CHECK_EQ_INT(p.block_bytes, 163840);
    CHECK_EQ_INT(p.seq_bytes_max_len, 2748743680LL);
    CHECK_EQ_INT(p.n_state_slots, 256);
    CHECK_EQ_INT(p.n_blocks, 423680);
    CHECK_EQ_INT(p.pool_tokens, 6778880);
    CHECK_NEAR(p.max_concurrency, 25.859375, 1e-9);
    CHECK(p.tokens_per_gib > 101606.0);
}

static void test_mtp_and_len(void)
{
    const char *f[] = {"--kv-cache-memory-bytes",
                       "85899345920",
                       "--speculative-tokens",
                       "3",
                       "--gdn-state",
                       "slots"};
    struct kv_plan p;
    char err[1024] = "";
    CHECK_EQ_INT(plan_for(f, 6, &p, err, sizeof err), 0);
    CHECK_EQ_INT(p.n_kv_layers, 11);
    CHECK_EQ_INT(p.kv_bytes_per_token, 22528);
    CHECK_EQ_INT(p.n_blocks, 192581);
    const char *g[] = {"--kv-cache-memory-bytes",
                       "25769803776",
                       "--max-model-len",
                       "32768",
                       "--gdn-state",
                       "slots"};
    CHECK_EQ_INT(plan_for(g, 6, &p, err, sizeof err), 0);
    CHECK_EQ_INT(p.max_model_len, 32768);
    /* kv(32768) = 2048 blocks * 327,680 = 671,088,640 B; spare = 24 GiB - that - 64,389,120 =
     * 25,034,326,016; slots = 1 + floor(spare / 2 / 64,389,120) = 1 + 194 = 195;
     * blocks = (25,769,803,776 - 195 * 64,389,120) / 327,680 = 13,213,925,376 / 327,680 = 40,325 */
    CHECK_EQ_INT(p.n_state_slots, 195);
    CHECK_EQ_INT(p.n_blocks, 40325);
    CHECK_EQ_INT(p.pool_tokens, 645200);
    /* device figures instead of a byte budget: 100 GiB x 0.5 - 10 GiB weights - 0 = 40 GiB */
    const char *h[] = {"--device-memory-bytes", "107374182400", "--gpu-memory-utilization", "0.5",
                       "--weights-bytes",       "10737418240"};
    CHECK_EQ_INT(plan_for(h, 6, &p, err, sizeof err), 0);
    CHECK_EQ_INT(p.budget_bytes, 42949672960LL);
    /* no budget at all is an input error, not a refusal */
    CHECK_EQ_INT(plan_for(NULL, 0, &p, err, sizeof err), ERR_INVAL);
    CHECK(strstr(err, "--kv-cache-memory-bytes") != NULL);
}

static void test_pool(void)
{
    const char *f[] = {"--kv-cache-memory-bytes", "6442450944", "--check-request-len", "512"};
    struct kv_plan p;
    char err[1024] = "";
    CHECK_EQ_INT(plan_for(f, 4, &p, err, sizeof err), 0);
    CHECK(p.state_in_pool);
    CHECK_EQ_INT(p.block_bytes, 327680);
    CHECK_EQ_INT(p.state_blocks, 197);
    CHECK_EQ_INT(p.n_blocks, 19660);
    CHECK_EQ_INT(p.pool_tokens, 311408);
    CHECK_EQ_INT(p.seq_bytes_max_len, 5433262080LL);
    CHECK_NEAR(p.max_concurrency, 19660.0 / 16581.0, 1e-12);
    CHECK_EQ_INT(p.n_state_slots, 256); /* --max-num-seqs: a batch limit only */
    CHECK_EQ_INT(p.request_len, 512);
    CHECK_EQ_INT(p.requests_by_memory, 85);
    CHECK_EQ_INT(p.concurrent_requests, 85);
    /* the floors */
    CHECK(p.pool_tokens >= 310000 && p.max_concurrency >= 1.18 && p.concurrent_requests >= 70);
    /* --max-num-seqs caps the requests, not the memory */
    const char *c[] = {"--kv-cache-memory-bytes", "6442450944", "--check-request-len", "512",
                       "--max-num-seqs",          "40"};
    CHECK_EQ_INT(plan_for(c, 6, &p, err, sizeof err), 0);
    CHECK_EQ_INT(p.requests_by_memory, 85);
    CHECK_EQ_INT(p.concurrent_requests, 40);
    /* the same budget with slots: 8 slots, 8 requests of 512 tokens */
    const char *s8[] = {"--kv-cache-memory-bytes",
                        "6442450944",
                        "--check-request-len",
                        "512",
                        "--gdn-state",
                        "slots"};
    CHECK_EQ_INT(plan_for(s8, 6, &p, err, sizeof err), 0);
    CHECK(!p.state_in_pool);
    CHECK_EQ_INT(p.n_state_slots, 8);
    CHECK_EQ_INT(p.concurrent_requests, 8);
    CHECK(p.pool_tokens < 311408);
    const char *g[] = {"--kv-cache-memory-bytes", "6442450944", "--kv-cache-dtype", "fp8"};
    CHECK_EQ_INT(plan_for(g, 4, &p, err, sizeof err), 0);
    CHECK_EQ_INT(p.block_bytes, 163840);
    CHECK_EQ_INT(p.state_blocks, 393);
    CHECK_EQ_INT(p.n_blocks, 39321);
    CHECK_EQ_INT(p.pool_tokens, 622848);
    CHECK_NEAR(p.max_concurrency, 39321.0 / 16777.0, 1e-12);
    CHECK(p.pool_tokens >= 610000);
    /* a bad value is an input error */
    const char *b[] = {"--kv-cache-memory-bytes", "6442450944", "--gdn-state", "heap"};
    char *argv[] = {(char *)"tern-scheduler",
                    (char *)"--model-config",
                    (char *)CONFIG,
                    (char *)b[0],
                    (char *)b[1],
                    (char *)b[2],
                    (char *)b[3],
                    NULL};
    struct sched_cfg cfg;
    CHECK_EQ_INT(sched_cfg_parse(&cfg, 7, argv), ERR_INVAL);
}

static void test_refusal(void)
{
    const char *f[] = {"--kv-cache-memory-bytes", "4294967296"};
    struct kv_plan p;
    char err[1024] = "";
    const char *want = "one sequence of max_model_len=262144 needs 5.06 GiB of KV cache and GDN "
                       "state (bf16 KV), but only 4.00 GiB is available for the cache. The largest "
                       "max_model_len that fits is 206560: decrease --max-model-len, or increase "
                       "--kv-cache-memory-bytes / --gpu-memory-utilization, or use "
                       "--kv-cache-dtype fp8.";
    CHECK_EQ_INT(plan_for(f, 2, &p, err, sizeof err), ERR_FULL);
    CHECK_EQ_INT(p.max_len_fit, 206560);
    CHECK_STREQ(err, want);
    CHECK(strchr(err, '\n') == NULL); /* one line */
    /* the same numbers with states in slots */
    const char *s[] = {"--kv-cache-memory-bytes", "4294967296", "--gdn-state", "slots"};
    CHECK_EQ_INT(plan_for(s, 4, &p, err, sizeof err), ERR_FULL);
    CHECK_EQ_INT(p.max_len_fit, 206560);
    CHECK_STREQ(err, want);
    /* fp8 halves the KV: the same budget fits */
    const char *g[] = {"--kv-cache-memory-bytes", "4294967296", "--kv-cache-dtype", "fp8"};
    CHECK_EQ_INT(plan_for(g, 4, &p, err, sizeof err), 0);
}

/* Run the CLI, return its exit code and stdout (caller frees). */
static int run_cli(const char *args, char **out)
{
    const char *bd = getenv("TERN_BUILD_DIR");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/bin/tern-scheduler --check %s 2>/dev/null", bd ? bd : "build",
             args);
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL);
    if (!f)
        return -1;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while ((k = fread(buf + n, 1, cap - 1 - n, f)) > 0)
        n += k;
    buf[n] = '\0';
    int st = pclose(f);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void)
{
    char *out = NULL;
    char args[512];
    snprintf(args, sizeof args,
             "--config %s --kv-cache-memory-bytes 85899345920 --gdn-state slots --json", CONFIG);
    CHECK_EQ_INT(run_cli(args, &out), 0);
    cJSON *j = cJSON_Parse(out);
    CHECK(j != NULL);
    if (j) {
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")));
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "pool_tokens")), 3389440, 0);
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "state_bytes_per_seq")), 64389120,
                   0);
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "kv_bytes_per_token")), 20480, 0);
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "max_concurrency")), 12.9296875,
                   1e-9);
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "available_gib")), 80.0, 1e-9);
        cJSON_Delete(j);
    }
    free(out);
    snprintf(args, sizeof args, "--config=%s --kv-cache-memory-bytes 4294967296 --json", CONFIG);
    CHECK_EQ_INT(run_cli(args, &out), 1); /* refused */
    j = cJSON_Parse(out);
    CHECK(j != NULL);
    if (j) {
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(j, "ok")));
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "max_len_fit")), 206560, 0);
        const char *e = cJSON_GetStringValue(cJSON_GetObjectItem(j, "error"));
        CHECK(e && strstr(e, "largest max_model_len that fits is 206560") != NULL);
        cJSON_Delete(j);
    }
    free(out);
    snprintf(args, sizeof args, "--config %s --kv-cache-memory-bytes 85899345920 --gdn-state slots",
             CONFIG);
    CHECK_EQ_INT(run_cli(args, &out), 0);
    CHECK(strstr(out, "kv_pool tokens=3389440 blocks=211840 gdn_state=slots state_slots=256 "
                      "max_concurrency=12.93x at max_model_len=262144") != NULL);
    free(out);
    /* the pool (default), text and JSON, with a request length */
    snprintf(args, sizeof args,
             "--config %s --kv-cache-memory-bytes 6442450944 "
             "--check-request-len 512",
             CONFIG);
    CHECK_EQ_INT(run_cli(args, &out), 0);
    CHECK(strstr(out, "kv_pool tokens=311408 blocks=19660 gdn_state=pool state_blocks=197 "
                      "max_concurrency=1.19x at max_model_len=262144") != NULL);
    CHECK(strstr(out, "requests of 512 tokens at once: 85 (memory: 85, --max-num-seqs: 256)") !=
          NULL);
    free(out);
    snprintf(args, sizeof args,
             "--config %s --kv-cache-memory-bytes 6442450944 --kv-cache-dtype "
             "fp8 --check-request-len 512 --json",
             CONFIG);
    CHECK_EQ_INT(run_cli(args, &out), 0);
    j = cJSON_Parse(out);
    CHECK(j != NULL);
    if (j) {
        CHECK_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(j, "gdn_state")), "pool");
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "state_blocks")), 393, 0);
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "pool_tokens")), 622848, 0);
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "max_num_seqs")), 256, 0);
        /* 39,321 / (32 + 393) = 92 */
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "concurrent_requests")), 92, 0);
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "request_len")), 512, 0);
        cJSON_Delete(j);
    }
    free(out);
    CHECK_EQ_INT(run_cli("--kv-cache-memory-bytes 1", &out), 2); /* no model */
    free(out);
    CHECK_EQ_INT(run_cli("--config /nonexistent.json --kv-cache-memory-bytes 1", &out), 2);
    free(out);
}

int main(void)
{
    test_bf16();
    test_fp8();
    test_mtp_and_len();
    test_pool();
    test_refusal();
    test_cli();
    return test_result();
}
