/* Integration: the real CPU engine behind the services. A tiny checkpoint is generated with
 * `tern make-tiny-model`; the expected tokens come from `tern generate` (one straight CPU run
 * per prompt). Through scheduler + worker the same prompts are served concurrently with a small
 * step budget (chunked prefill: 16 tokens per step) and 3 decode steps per plan, so positions,
 * chunking, per-slot state and seeded sampling must all line up to give the same tokens. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "svc_harness.h"
#include "test.h"

#define N_PROMPTS 3
#define MAX_TOKENS 12

static char dir[64];
static struct svc_proc sched_p, wk;

struct case_ {
    uint32_t prompt[64];
    uint32_t n_prompt;
    float temperature;
    uint64_t seed;
    uint32_t want[MAX_TOKENS];
    uint32_t n_want;
};

/* Run `tern generate` and read the ids it prints. */
static int expected(const char *bin, const char *model, struct case_ *k)
{
    char cmd[2048], ids[1024] = "";
    size_t o = 0;
    for (uint32_t i = 0; i < k->n_prompt; i++)
        o += (size_t)snprintf(ids + o, sizeof ids - o, "%s%u", i ? "," : "", k->prompt[i]);
    snprintf(cmd, sizeof cmd,
             "%s generate --model %s --ids %s --max-tokens %d --temperature %g --seed %llu "
             "--threads 1 --ignore-eos 2>/dev/null",
             bin, model, ids, MAX_TOKENS, (double)k->temperature, (unsigned long long)k->seed);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    unsigned v;
    k->n_want = 0;
    while (k->n_want < MAX_TOKENS && fscanf(p, "%u", &v) == 1)
        k->want[k->n_want++] = v;
    int st = pclose(p);
    return st == 0 && k->n_want == MAX_TOKENS ? 0 : -1;
}

int main(void)
{
    const char *bdir = getenv("TERN_BUILD_DIR");
    char tern[512], model[256], gw_ep[128], wk_ep[128], cmd[1024];
    snprintf(tern, sizeof tern, "%s/bin/tern", bdir ? bdir : "build");
    if (access(tern, X_OK) != 0)
        TEST_SKIP("tern CLI not built");
    if (svc_tmpdir(dir, sizeof dir) < 0)
        TEST_SKIP("no temp dir");
    snprintf(model, sizeof model, "%s/tiny", dir);
    snprintf(cmd, sizeof cmd, "%s make-tiny-model %s >/dev/null 2>&1", tern, model);
    if (system(cmd) != 0)
        TEST_SKIP("tern make-tiny-model failed");

    struct case_ cases[N_PROMPTS];
    memset(cases, 0, sizeof cases);
    for (uint32_t i = 0; i < 10; i++)
        cases[0].prompt[i] = i + 1;
    cases[0].n_prompt = 10;
    for (uint32_t i = 0; i < 40; i++)
        cases[1].prompt[i] = (i * 37 + 5) % 500;
    cases[1].n_prompt = 40; /* 3 prefill chunks of <= 16 */
    for (uint32_t i = 0; i < 23; i++)
        cases[2].prompt[i] = (i * 11 + 3) % 500;
    cases[2].n_prompt = 23;
    cases[2].temperature = 0.8f;
    cases[2].seed = 5;
    for (int i = 0; i < N_PROMPTS; i++)
        if (expected(tern, model, &cases[i]) < 0)
            TEST_SKIP("tern generate failed");

    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/gw.sock", dir);
    snprintf(wk_ep, sizeof wk_ep, "ipc://%s/wk.sock", dir);
    const char *sa[] = {"--gateway-endpoint", gw_ep, "--worker-endpoint", wk_ep,
                        "--max-step-tokens",  "16",  "--decode-steps",    "3",
                        "--check-pool",       NULL};
    const char *wa[] = {"--engine",
                        "cpu",
                        "--model",
                        model,
                        "--scheduler-endpoint",
                        wk_ep,
                        "--worker-id",
                        "cpu0",
                        "--max-seqs",
                        "4",
                        "--threads",
                        "1",
                        "--max-model-len",
                        "512",
                        NULL};
    struct svc_client c;
    bool up = svc_start_one(&sched_p, &wk, dir, sa, wa, &c, gw_ep, 10000);
    CHECK(up);
    if (up) {
        uint64_t ids[N_PROMPTS];
        for (int i = 0; i < N_PROMPTS; i++) {
            ids[i] = 1 + (uint64_t)i;
            struct svc_submit s = {.prompt = cases[i].prompt,
                                   .n_prompt = cases[i].n_prompt,
                                   .max_tokens = MAX_TOKENS,
                                   .temperature = cases[i].temperature,
                                   .has_seed = true,
                                   .seed = cases[i].seed,
                                   .ignore_eos = true};
            CHECK_EQ_INT(svc_client_submit(&c, ids[i], &s), 0);
        }
        CHECK(svc_client_wait_done(&c, ids, N_PROMPTS, 20000));
        for (int i = 0; i < N_PROMPTS; i++) {
            struct svc_req *r = svc_client_req(&c, ids[i]);
            CHECK(r && r->done && r->error_code == 0);
            CHECK(r && r->n_tokens == MAX_TOKENS);
            for (uint32_t t = 0; r && t < r->n_tokens && t < MAX_TOKENS; t++) {
                if (r->tokens[t] != cases[i].want[t]) {
                    fprintf(stderr, "case %d token %u: served %u, tern generate %u\n", i, t,
                            r->tokens[t], cases[i].want[t]);
                    CHECK(r->tokens[t] == cases[i].want[t]);
                    break;
                }
            }
        }
        CHECK_EQ_INT(svc_client_status(&c, 1000), 0);
        CHECK(c.status && c.status->kv_blocks_used == 0 && c.status->state_slots_used == 0);
    }
    svc_client_close(&c);
    CHECK_EQ_INT(svc_stop(&wk, SIGTERM, 3000), 0);
    CHECK_EQ_INT(svc_stop(&sched_p, SIGTERM, 3000), 0);
    if (test_result() != 0) {
        svc_dump_log(&sched_p);
        svc_dump_log(&wk);
    }
    return test_result();
}
