/* tern-worker --bench (services/worker/wk_bench.c), run as a process:
 *  - fake engine with a 2 ms step: the decode step times are no faster than the step, the rates
 *    agree with the step times, the counts match the flags, one prefill step per chunk;
 *  - cpu engine on a tiny model made here, prompt prefilled in chunks of 7: the greedy tokens it
 *    reports equal `tern generate --ids <the same prompt>` (the CPU reference, an independent
 *    driver), and the roofline bytes equal `tern roofline` at the same batch and context;
 *  - bad sizes exit 1 with one line naming the limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/file.h"
#include "test.h"

static char g_dir[64];
static char g_worker[1024], g_tern[1024];

static cJSON *read_json(const char *path)
{
    size_t n;
    char *s = file_read(path, &n);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    return j;
}

static double num(const cJSON *j, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static int run(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_fake(void)
{
    char cmd[4096], json[256];
    snprintf(json, sizeof json, "%s/fake.json", g_dir);
    snprintf(cmd, sizeof cmd,
             "%s --bench --engine fake --fake-vocab 5000 --fake-step-us 2000 --max-seqs 4 "
             "--bench-batch 3 --bench-prompt-len 50 --bench-gen 12 --bench-chunk 20 "
             "--bench-json %s > %s/fake.log 2>&1",
             g_worker, json, g_dir);
    CHECK_EQ_INT(run(cmd), 0);
    cJSON *j = read_json(json);
    CHECK(j != NULL);
    if (!j)
        return;
    CHECK_EQ_INT((int)num(j, "batch"), 3);
    CHECK_EQ_INT((int)num(j, "prompt_len"), 50);
    CHECK_EQ_INT((int)num(j, "gen_len"), 12);
    CHECK_EQ_INT((int)num(j, "prefill_steps"), 3); /* 50 tokens in chunks of 20 */
    CHECK(num(j, "step_ms_p50") >= 2.0 * 0.95);
    CHECK(num(j, "step_ms_p50") <= num(j, "step_ms_p90"));
    CHECK(num(j, "step_ms_p90") <= num(j, "step_ms_p99"));
    /* 3 sequences x 12 steps over the decode time; every step takes >= 2 ms */
    CHECK(num(j, "decode_tok_s") <= 3 * 1000.0 / 2.0 * 1.05);
    CHECK_NEAR(num(j, "decode_tok_s"), 36 / num(j, "decode_s"), 1e-6 * num(j, "decode_tok_s"));
    CHECK_NEAR(num(j, "per_stream_tok_s") * 3, num(j, "decode_tok_s"), 1e-6 * num(j, "decode_tok_s"));
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "step_ms")) == 12);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "tokens_seq0")) == 12);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "prompt_seq0")) == 50);
    CHECK(cJSON_GetObjectItemCaseSensitive(j, "roofline") == NULL); /* fake: no checkpoint */
    cJSON_Delete(j);
}

static void test_cpu(void)
{
    char cmd[8192], json[256], model[256];
    snprintf(model, sizeof model, "%s/tiny", g_dir);
    snprintf(json, sizeof json, "%s/cpu.json", g_dir);
    snprintf(cmd, sizeof cmd, "%s make-tiny-model %s --seed 7 --vocab 300 > /dev/null", g_tern,
             model);
    CHECK_EQ_INT(run(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "%s --bench --engine cpu --model %s --threads 2 --max-seqs 2 --max-model-len 64 "
             "--bench-batch 2 --bench-prompt-len 20 --bench-gen 10 --bench-chunk 7 "
             "--bench-seed 5 --bench-bw-gbs 100 --bench-json %s > %s/cpu.log 2>&1",
             g_worker, model, json, g_dir);
    CHECK_EQ_INT(run(cmd), 0);
    cJSON *j = read_json(json);
    CHECK(j != NULL);
    if (!j)
        return;
    CHECK_EQ_INT((int)num(j, "prefill_steps"), 3);
    /* replay sequence 0 with the CPU reference driver */
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "prompt_seq0");
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(j, "tokens_seq0");
    CHECK(cJSON_GetArraySize(pr) == 20 && cJSON_GetArraySize(gen) == 10);
    char ids[1024] = "", want[1024] = "";
    size_t n = 0, w = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, pr) n += (size_t)snprintf(ids + n, sizeof ids - n, "%s%d", n ? "," : "",
                                                     e->valueint);
    cJSON_ArrayForEach(e, gen) w += (size_t)snprintf(want + w, sizeof want - w, "%s%d",
                                                      w ? " " : "", e->valueint);
    char out[256];
    snprintf(out, sizeof out, "%s/gen.txt", g_dir);
    snprintf(cmd, sizeof cmd,
             "%s generate --model %s --ids %s --max-tokens 10 --ignore-eos --threads 2 "
             "--speculative-tokens 0 > %s 2>/dev/null",
             g_tern, model, ids, out);
    CHECK_EQ_INT(run(cmd), 0);
    size_t len;
    char *got = file_read(out, &len);
    CHECK(got != NULL);
    if (got) {
        while (len && (got[len - 1] == '\n' || got[len - 1] == ' '))
            got[--len] = '\0';
        CHECK_STREQ(got, want);
        free(got);
    }
    /* roofline: the same bytes `tern roofline` computes for batch 2 at the mean context */
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "roofline");
    CHECK(r != NULL);
    char rj[256];
    snprintf(rj, sizeof rj, "%s/roof.json", g_dir);
    snprintf(cmd, sizeof cmd, "%s roofline %s --batch 2 --ctx %d --bw 100 --json > %s", g_tern,
             model, 20 + 10 / 2, rj);
    CHECK_EQ_INT(run(cmd), 0);
    cJSON *rr = read_json(rj);
    CHECK(rr != NULL);
    if (r && rr) {
        CHECK(num(r, "total_bytes") > 0);
        CHECK_NEAR(num(r, "total_bytes"), num(rr, "total_bytes"), 1e-6);
        CHECK_NEAR(num(r, "limit_tok_s"), num(rr, "limit_tok_s"), 1e-6 * num(rr, "limit_tok_s"));
        CHECK_NEAR(num(r, "fraction"), num(j, "decode_tok_s") / num(r, "limit_tok_s"), 1e-9);
    }
    cJSON_Delete(rr);
    cJSON_Delete(j);
    /* tern roofline on bad flags: exit 2 with one line naming the flag (a missing checkpoint,
     * below, is a runtime error: exit 1) */
    const char *bad[][2] = {{"--batch 0", "--batch: 0 out of range"},
                            {"--kv-cache-dtype fp4", "--kv-cache-dtype: \"fp4\" is not"},
                            {"--bw -3", "--bw: -3 out of range"}};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "%s roofline %s %s > %s/roof.err 2>&1", g_tern, model,
                 bad[i][0], g_dir);
        CHECK_EQ_INT(run(cmd), 2);
        snprintf(rj, sizeof rj, "%s/roof.err", g_dir);
        size_t en;
        char *s = file_read(rj, &en);
        CHECK(s && strstr(s, bad[i][1]) && strchr(s, '\n') == s + en - 1);
        free(s);
    }
    snprintf(cmd, sizeof cmd, "%s roofline %s/no-such-dir > /dev/null 2>&1", g_tern, g_dir);
    CHECK_EQ_INT(run(cmd), 1);
}

static void expect_refusal(const char *flags, const char *needle)
{
    char cmd[4096], log[256];
    snprintf(log, sizeof log, "%s/refuse.log", g_dir);
    snprintf(cmd, sizeof cmd, "%s --bench --engine fake %s > %s 2>&1", g_worker, flags, log);
    CHECK_EQ_INT(run(cmd), 1);
    size_t n;
    char *s = file_read(log, &n);
    CHECK(s && strstr(s, needle) != NULL);
    if (s && !strstr(s, needle))
        fprintf(stderr, "expected \"%s\" in:\n%s\n", needle, s);
    free(s);
}

int main(void)
{
    const char *bd = getenv("TERN_BUILD_DIR");
    if (!bd)
        TEST_SKIP("TERN_BUILD_DIR not set");
    snprintf(g_worker, sizeof g_worker, "%s/bin/tern-worker", bd);
    snprintf(g_tern, sizeof g_tern, "%s/bin/tern", bd);
    snprintf(g_dir, sizeof g_dir, "/tmp/tern-wkbench-XXXXXX");
    if (!mkdtemp(g_dir))
        TEST_SKIP("mkdtemp failed");
    test_fake();
    test_cpu();
    expect_refusal("--max-seqs 2 --bench-batch 3", "exceeds --max-seqs 2");
    expect_refusal("--max-model-len 64 --bench-prompt-len 60 --bench-gen 10",
                   "exceeds max_model_len 64");
    expect_refusal("--max-step-tokens 16 --bench-chunk 20", "exceeds --max-step-tokens 16");
    int rc = test_result();
    if (rc == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
        (void)!system(cmd);
    } else {
        fprintf(stderr, "logs in %s\n", g_dir);
    }
    return rc;
}
