/* Integration: KV pressure. One fake worker with a pool of 12 blocks of 4 tokens (48 tokens) and
 * four requests of 4 prompt + 30 completion tokens (136 tokens in all): the scheduler must grow
 * blocks per decode grant and preempt the youngest sequences when the pool runs out, resuming
 * them later by prefilling prompt + tokens already sent. Every request must still end LENGTH with
 * exactly the fake model's 30 greedy tokens, in order and without gaps, and the pool must be empty
 * at the end (with a stop id masked by min_tokens, which must hold across a resume). With
 * --reserve-full the same load runs without preemption, fewer at a time. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "svc_harness.h"
#include "test.h"

#define N_REQ 4
#define MAX_TOKENS 30

/* Each request also has a stop id, the fake model's token STOP_AT, masked by min_tokens
 * MIN_TOKENS: the model then takes the lowest id there and goes on from it. A preempted request
 * resumes with min_tokens counted from its new start, so the mask must hold across it. */
#define STOP_AT 19
#define MIN_TOKENS 25

/* the fake model's greedy token at position t after prev */
static uint32_t unmasked_token(uint32_t prev, int t)
{
    for (int i = 0; i <= t; i++)
        prev = svc_fake_next(prev, 1000);
    return prev;
}

/* the expected tokens with stop masked before MIN_TOKENS; returns their count */
static uint32_t masked_tokens(uint32_t prev, uint32_t stop, uint32_t *out)
{
    for (uint32_t t = 0; t < MAX_TOKENS; t++) {
        uint32_t next = svc_fake_next(prev, 1000);
        if (next == stop && t < MIN_TOKENS)
            next = stop == 0 ? 1 : 0; /* the spike masked: all logits 0, the lowest id wins */
        out[t] = next;
        prev = next;
        if (next == stop)
            return t + 1;
    }
    return MAX_TOKENS;
}

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
    uint32_t prompts[N_REQ][4], stops[N_REQ];
    uint64_t ids[N_REQ];
    for (int i = 0; up && i < N_REQ; i++) {
        for (int k = 0; k < 4; k++)
            prompts[i][k] = (uint32_t)(10 * i + k + 1);
        ids[i] = 1 + (uint64_t)i;
        stops[i] = unmasked_token(prompts[i][3], STOP_AT);
        struct svc_submit s = {.prompt = prompts[i],
                               .n_prompt = 4,
                               .max_tokens = MAX_TOKENS,
                               .temperature = 0,
                               .stop_ids = &stops[i],
                               .n_stop = 1,
                               .min_tokens = MIN_TOKENS};
        CHECK_EQ_INT(svc_client_submit(&c, ids[i], &s), 0);
    }
    if (up) {
        CHECK(svc_client_wait_done(&c, ids, N_REQ, 20000));
        for (int i = 0; i < N_REQ; i++) {
            struct svc_req *r = svc_client_req(&c, ids[i]);
            CHECK(r && r->done && r->error_code == 0);
            uint32_t want[MAX_TOKENS];
            uint32_t n_want = masked_tokens(prompts[i][3], stops[i], want);
            CHECK(r && r->finish_reason == (n_want < MAX_TOKENS
                                                ? TERN__FINISH_REASON__FINISH_REASON_STOP
                                                : TERN__FINISH_REASON__FINISH_REASON_LENGTH));
            CHECK(r && r->n_tokens == n_want && r->usage_completion == n_want);
            CHECK(r && !r->gap && r->prompt_tokens == 4);
            for (uint32_t t = 0; r && t < r->n_tokens && t < n_want; t++) {
                uint32_t prev = want[t];
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
