/* Integration: KV pressure. One fake worker with a pool of 12 blocks of 4 tokens (48 tokens) and
 * four requests of 4 prompt + 30 completion tokens (136 tokens in all): the scheduler must grow
 * blocks per decode grant and preempt the youngest sequences when the pool runs out, resuming
 * them later by prefilling prompt + tokens already sent. Every request must still end LENGTH with
 * exactly the fake model's 30 greedy tokens, in order and without gaps, and the pool must be empty
 * at the end. With --reserve-full the same load runs without preemption, fewer at a time. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "svc_harness.h"
#include "test.h"

#define N_REQ 4
#define MAX_TOKENS 30

static void run_case(const char *dir, const char *tag, bool reserve_full)
{
    char gw_ep[160], wk_ep[160], sname[32], wname[32];
    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/%s-gw.sock", dir, tag);
    snprintf(wk_ep, sizeof wk_ep, "ipc://%s/%s-wk.sock", dir, tag);
    snprintf(sname, sizeof sname, "%s-scheduler", tag);
    snprintf(wname, sizeof wname, "%s-worker", tag);
    const char *sa[] = {"--gateway-endpoint",
                        gw_ep,
                        "--worker-endpoint",
                        wk_ep,
                        "--check-pool",
                        "--decode-steps",
                        "3",
                        reserve_full ? "--reserve-full" : "--log-level",
                        reserve_full ? "true" : "info",
                        NULL};
    const char *wa[] = {"--engine",
                        "fake",
                        "--scheduler-endpoint",
                        wk_ep,
                        "--worker-id",
                        "small",
                        "--fake-vocab",
                        "1000",
                        "--block-tokens",
                        "4",
                        "--kv-blocks",
                        "12",
                        "--max-seqs",
                        "4",
                        "--max-model-len",
                        "64",
                        "--fake-step-us",
                        "500",
                        NULL};
    struct svc_proc sp, wp;
    CHECK_EQ_INT(svc_spawn(&sp, dir, sname, "tern-scheduler", sa), 0);
    CHECK_EQ_INT(svc_spawn(&wp, dir, wname, "tern-worker", wa), 0);
    struct svc_client c;
    CHECK_EQ_INT(svc_client_open(&c, gw_ep), 0);
    CHECK_EQ_INT(svc_client_hello(&c, 3000), 0);
    bool up = svc_client_wait_workers(&c, 1, 5000);
    CHECK(up);
    uint32_t prompts[N_REQ][4];
    uint64_t ids[N_REQ];
    for (int i = 0; up && i < N_REQ; i++) {
        for (int k = 0; k < 4; k++)
            prompts[i][k] = (uint32_t)(10 * i + k + 1);
        ids[i] = 1 + (uint64_t)i;
        struct svc_submit s = {
            .prompt = prompts[i], .n_prompt = 4, .max_tokens = MAX_TOKENS, .temperature = 0};
        CHECK_EQ_INT(svc_client_submit(&c, ids[i], &s), 0);
    }
    if (up) {
        CHECK(svc_client_wait_done(&c, ids, N_REQ, 20000));
        for (int i = 0; i < N_REQ; i++) {
            struct svc_req *r = svc_client_req(&c, ids[i]);
            CHECK(r && r->done && r->error_code == 0);
            CHECK(r && r->finish_reason == TERN__FINISH_REASON__FINISH_REASON_LENGTH);
            CHECK(r && r->n_tokens == MAX_TOKENS && r->usage_completion == MAX_TOKENS);
            CHECK(r && !r->gap && r->prompt_tokens == 4);
            uint32_t prev = prompts[i][3];
            for (uint32_t t = 0; r && t < r->n_tokens; t++) {
                prev = svc_fake_next(prev, 1000);
                if (r->tokens[t] != prev) {
                    fprintf(stderr, "%s req %d token %u: got %u want %u\n", tag, i, t, r->tokens[t],
                            prev);
                    CHECK(r->tokens[t] == prev);
                    break;
                }
            }
        }
        CHECK_EQ_INT(svc_client_status(&c, 1000), 0);
        if (c.status) {
            fprintf(stderr, "%s: preempted=%llu\n", tag,
                    (unsigned long long)c.status->requests_preempted);
            CHECK(reserve_full ? c.status->requests_preempted == 0
                               : c.status->requests_preempted > 0);
            CHECK_EQ_INT(c.status->kv_blocks_used, 0);
            CHECK_EQ_INT(c.status->state_slots_used, 0);
        }
    }
    svc_client_close(&c);
    CHECK_EQ_INT(svc_stop(&wp, SIGTERM, 3000), 0);
    CHECK_EQ_INT(svc_stop(&sp, SIGTERM, 3000), 0);
    if (test_result() != 0) {
        svc_dump_log(&sp);
        svc_dump_log(&wp);
    }
}

int main(void)
{
    char dir[64];
    if (svc_tmpdir(dir, sizeof dir) < 0)
        TEST_SKIP("no temp dir");
    run_case(dir, "lazy", false);
    run_case(dir, "full", true);
    return test_result();
}
