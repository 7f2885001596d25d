/* Integration: tern-scheduler + two fake tern-workers + a proto-level test gateway, on ipc://
 * in a temp dir. Submit -> tokens -> finish (tokens checked against the fake model's formula),
 * stop ids, length, logprobs, both workers used, abort frees the pool, admission errors, and a
 * gateway that disappears has its requests aborted and its pool returned to zero. The workers
 * run --fake-device-sampling: requests without logprobs, logit_bias or min_tokens take the
 * worker's path for an engine that draws tokens itself (the cuda engine's), the others the host
 * sampler. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "common/clock.h"
#include "svc_harness.h"
#include "test.h"

#define VOCAB 1000
#define HB "100"
#define DEAD "500"

static struct svc_proc sched_p, wk1, wk2;

static void expect_formula(const struct svc_req *r, const uint32_t *prompt, uint32_t n_prompt)
{
    uint32_t prev = prompt[n_prompt - 1];
    for (uint32_t i = 0; i < r->n_tokens; i++) {
        uint32_t want = svc_fake_next(prev, VOCAB);
        if (r->tokens[i] != want) {
            fprintf(stderr, "req %llu token %u: got %u want %u\n", (unsigned long long)r->id, i,
                    r->tokens[i], want);
            CHECK(r->tokens[i] == want);
            return;
        }
        prev = want;
    }
}

static void check_pool_empty(struct svc_client *c, const char *when)
{
    /* frees reach the accounting at once; give the loop a moment to answer */
    CHECK_EQ_INT(svc_client_status(c, 1000), 0);
    if (!c->status)
        return;
    if (c->status->kv_blocks_used || c->status->state_slots_used || c->status->running)
        fprintf(stderr, "%s: blocks_used=%u slots_used=%u running=%u\n", when,
                c->status->kv_blocks_used, c->status->state_slots_used, c->status->running);
    CHECK_EQ_INT(c->status->kv_blocks_used, 0);
    CHECK_EQ_INT(c->status->state_slots_used, 0);
    CHECK_EQ_INT(c->status->running, 0);
    CHECK_EQ_INT(c->status->waiting, 0);
}

static void test_generate(struct svc_client *c)
{
    uint32_t prompts[6][3];
    uint64_t ids[6];
    for (int i = 0; i < 6; i++) {
        prompts[i][0] = 11 + (uint32_t)i;
        prompts[i][1] = 200 + (uint32_t)i;
        prompts[i][2] = 300 + 7 * (uint32_t)i;
        ids[i] = 100 + (uint64_t)i;
        struct svc_submit s = {.prompt = prompts[i],
                               .n_prompt = 3,
                               .max_tokens = 10,
                               .temperature = i % 2 ? 0.0f : 1.0f,
                               .has_seed = true,
                               .seed = (uint64_t)i,
                               .logprobs = i == 0,
                               .top_logprobs = i == 0 ? 3 : 0};
        CHECK_EQ_INT(svc_client_submit(c, ids[i], &s), 0);
    }
    CHECK(svc_client_wait_done(c, ids, 6, 10000));
    for (int i = 0; i < 6; i++) {
        struct svc_req *r = svc_client_req(c, ids[i]);
        CHECK(r && r->done);
        if (!r)
            continue;
        CHECK_EQ_INT(r->error_code, 0);
        CHECK_EQ_INT(r->finish_reason, TERN__FINISH_REASON__FINISH_REASON_LENGTH);
        CHECK_EQ_INT(r->n_tokens, 10);
        CHECK_EQ_INT(r->usage_completion, 10);
        CHECK_EQ_INT(r->prompt_tokens, 3);
        CHECK(!r->gap);
        expect_formula(r, prompts[i], 3);
    }
    struct svc_req *r0 = svc_client_req(c, ids[0]);
    CHECK(r0 && r0->n_logprobs == 10);
    /* the fake logits are a spike of 30 over zeros: log p = 30 - log(e^30 + 999) ~ -1e-10 */
    CHECK(r0 && r0->first_logprob <= 0.0f && r0->first_logprob > -1e-6f);
    /* alternatives: the spike, then the two lowest other ids (ties keep the lower id) at
     * log p = 0 - 30 - log(1 + 999 e^-30) ~ -30 */
    CHECK(r0 && r0->n_first_top == 3);
    if (r0 && r0->n_first_top == 3) {
        uint32_t next = svc_fake_next(prompts[0][2], VOCAB);
        uint32_t a = next == 0 ? 1 : 0, b = a + 1 == next ? a + 2 : a + 1;
        CHECK_EQ_INT(r0->first_top_ids[0], next);
        CHECK_EQ_INT(r0->first_top_ids[1], a);
        CHECK_EQ_INT(r0->first_top_ids[2], b);
        CHECK_NEAR(r0->first_top_lps[0], 0.0, 1e-5);
        CHECK_NEAR(r0->first_top_lps[1], -30.0, 1e-3);
        CHECK_NEAR(r0->first_top_lps[2], -30.0, 1e-3);
    }
    /* both workers took requests */
    CHECK_EQ_INT(svc_client_status(c, 1000), 0);
    CHECK(c->status && c->status->n_workers == 2);
    for (size_t i = 0; c->status && i < c->status->n_workers; i++) {
        fprintf(stderr, "worker %s tokens_generated=%llu\n", c->status->workers[i]->worker_id,
                (unsigned long long)c->status->workers[i]->tokens_generated);
        CHECK(c->status->workers[i]->tokens_generated > 0);
    }
    check_pool_empty(c, "after generate");
}

static void test_stop(struct svc_client *c)
{
    uint32_t prompt[2] = {5, 42};
    uint32_t t1 = svc_fake_next(42, VOCAB), t2 = svc_fake_next(t1, VOCAB);
    uint32_t t3 = svc_fake_next(t2, VOCAB);
    uint32_t stop[2] = {999999, t3}; /* the first never occurs */
    struct svc_submit s = {.prompt = prompt,
                           .n_prompt = 2,
                           .max_tokens = 50,
                           .temperature = 0,
                           .stop_ids = stop,
                           .n_stop = 2};
    uint64_t id = 200;
    CHECK_EQ_INT(svc_client_submit(c, id, &s), 0);
    CHECK(svc_client_wait_done(c, &id, 1, 5000));
    struct svc_req *r = svc_client_req(c, id);
    CHECK(r && r->finish_reason == TERN__FINISH_REASON__FINISH_REASON_STOP);
    CHECK(r && r->n_tokens == 3 && r->tokens[2] == t3);
    CHECK(r && r->stop_token == (int)t3);
}

/* logit_bias and min_tokens reach the worker's sampler: the fake model's spike (30 over zeros)
 * biased by -100 loses to the lowest id; a stop id is never sampled before min_tokens */
static void test_bias_min_tokens(struct svc_client *c)
{
    uint32_t prompt[2] = {5, 42};
    uint32_t t1 = svc_fake_next(42, VOCAB), low = t1 == 0 ? 1 : 0;
    uint32_t bias_ids[1] = {t1};
    float bias_vals[1] = {-100.0f};
    struct svc_submit s = {.prompt = prompt,
                           .n_prompt = 2,
                           .max_tokens = 3,
                           .temperature = 0,
                           .bias_ids = bias_ids,
                           .bias_vals = bias_vals,
                           .n_bias = 1};
    uint64_t id = 210;
    CHECK_EQ_INT(svc_client_submit(c, id, &s), 0);
    /* min_tokens 3 with the first fake token as a stop id: masked for tokens 1..3, so the
     * stop token is replaced by the lowest id and the request runs to its length */
    uint32_t stop[1] = {t1};
    struct svc_submit m = {.prompt = prompt,
                           .n_prompt = 2,
                           .max_tokens = 3,
                           .temperature = 0,
                           .stop_ids = stop,
                           .n_stop = 1,
                           .min_tokens = 3};
    uint64_t ids[3] = {id, 211, 212};
    CHECK_EQ_INT(svc_client_submit(c, ids[1], &m), 0);
    m.min_tokens = 0; /* without it: stops at once */
    CHECK_EQ_INT(svc_client_submit(c, ids[2], &m), 0);
    CHECK(svc_client_wait_done(c, ids, 3, 5000));
    struct svc_req *r = svc_client_req(c, ids[0]);
    CHECK(r && r->n_tokens == 3 && r->tokens[0] == low);
    r = svc_client_req(c, ids[1]);
    CHECK(r && r->n_tokens == 3 && r->tokens[0] == low &&
          r->finish_reason == TERN__FINISH_REASON__FINISH_REASON_LENGTH);
    r = svc_client_req(c, ids[2]);
    CHECK(r && r->n_tokens == 1 && r->tokens[0] == t1 &&
          r->finish_reason == TERN__FINISH_REASON__FINISH_REASON_STOP && r->stop_token == (int)t1);
    /* a bias id outside the vocabulary is refused at admission */
    bias_ids[0] = VOCAB + 1;
    id = 213;
    CHECK_EQ_INT(svc_client_submit(c, id, &s), 0);
    CHECK(svc_client_wait_done(c, &id, 1, 5000));
    r = svc_client_req(c, id);
    CHECK(r && r->error_code == TERN__ERROR_CODE__ERROR_CODE_INVALID);
}

static void test_abort(struct svc_client *c)
{
    uint32_t prompt[4] = {1, 2, 3, 4};
    struct svc_submit s = {.prompt = prompt, .n_prompt = 4, .max_tokens = 3000, .temperature = 0};
    uint64_t id = 300;
    CHECK_EQ_INT(svc_client_submit(c, id, &s), 0);
    CHECK(svc_client_wait_tokens(c, id, 3, 5000));
    CHECK_EQ_INT(svc_client_status(c, 1000), 0);
    CHECK(c->status && c->status->kv_blocks_used > 0 && c->status->running == 1);
    CHECK_EQ_INT(svc_client_abort(c, id), 0);
    CHECK(svc_client_wait_done(c, &id, 1, 3000));
    struct svc_req *r = svc_client_req(c, id);
    CHECK(r && r->finish_reason == TERN__FINISH_REASON__FINISH_REASON_ABORT);
    CHECK(r && r->n_tokens < 3000);
    if (r)
        expect_formula(r, prompt, 4);
    svc_client_pump(c, 100);
    check_pool_empty(c, "after abort");
}

static void test_rejects(struct svc_client *c)
{
    uint32_t bad_tok[2] = {1, VOCAB + 5};
    uint32_t ok[1] = {7};
    static uint32_t too_long[1100];
    for (int i = 0; i < 1100; i++)
        too_long[i] = (uint32_t)i;
    struct svc_submit s_empty = {.prompt = ok, .n_prompt = 0, .temperature = -1};
    struct svc_submit s_bad = {.prompt = bad_tok, .n_prompt = 2, .temperature = -1};
    struct svc_submit s_long = {.prompt = too_long, .n_prompt = 1100, .temperature = -1};
    struct svc_submit s_temp = {.prompt = ok, .n_prompt = 1, .max_tokens = 5, .temperature = -1};
    uint64_t ids[4] = {400, 401, 402, 403};
    CHECK_EQ_INT(svc_client_submit(c, ids[0], &s_empty), 0);
    CHECK_EQ_INT(svc_client_submit(c, ids[1], &s_bad), 0);
    CHECK_EQ_INT(svc_client_submit(c, ids[2], &s_long), 0); /* workers: max-model-len 1024 */
    CHECK_EQ_INT(svc_client_submit(c, ids[3], &s_temp), 0);
    CHECK_EQ_INT(svc_client_submit(c, ids[3], &s_temp), 0); /* duplicate id while live */
    CHECK(svc_client_wait_done(c, ids, 4, 5000));
    CHECK_EQ_INT(svc_client_req(c, ids[0])->error_code, TERN__ERROR_CODE__ERROR_CODE_INVALID);
    CHECK_EQ_INT(svc_client_req(c, ids[1])->error_code, TERN__ERROR_CODE__ERROR_CODE_INVALID);
    CHECK_EQ_INT(svc_client_req(c, ids[2])->error_code, TERN__ERROR_CODE__ERROR_CODE_TOO_LONG);
    /* 403: either the duplicate Error arrived first (ends our record) or the request finished;
     * both are terminal and the scheduler must still be consistent */
    svc_client_pump(c, 200);
    check_pool_empty(c, "after rejects");
}

static void test_gateway_gone(struct svc_client *c, const char *gw_ep)
{
    struct svc_client c2;
    CHECK_EQ_INT(svc_client_open(&c2, gw_ep), 0);
    CHECK_EQ_INT(svc_client_hello(&c2, 2000), 0);
    uint32_t prompt[3] = {9, 8, 7};
    struct svc_submit s = {.prompt = prompt, .n_prompt = 3, .max_tokens = 3000, .temperature = 0};
    uint64_t ids[2] = {500, 501};
    CHECK_EQ_INT(svc_client_submit(&c2, ids[0], &s), 0);
    CHECK_EQ_INT(svc_client_submit(&c2, ids[1], &s), 0);
    CHECK(svc_client_wait_tokens(&c2, ids[0], 2, 5000));
    CHECK(svc_client_wait_tokens(&c2, ids[1], 2, 5000));
    CHECK_EQ_INT(svc_client_status(c, 1000), 0);
    uint64_t aborted0 = c->status ? c->status->requests_aborted : 0;
    CHECK(c->status && c->status->running == 2 && c->status->gateways == 2);
    svc_client_close(&c2); /* no more heartbeats: dead after 500 ms */
    svc_client_pump(c, 900);
    check_pool_empty(c, "after gateway gone");
    CHECK(c->status && c->status->requests_aborted == aborted0 + 2);
    CHECK(c->status && c->status->gateways == 1);
}

/* 2 workers x 8 slots busy: two more wait in the queue (cap 2), the next is QUEUE_FULL */
static void test_queue_full(struct svc_client *c)
{
    uint32_t prompt[2] = {4, 4};
    struct svc_submit s = {.prompt = prompt, .n_prompt = 2, .max_tokens = 3000, .temperature = 0};
    uint64_t ids[19];
    for (int i = 0; i < 19; i++) {
        ids[i] = 600 + (uint64_t)i;
        CHECK_EQ_INT(svc_client_submit(c, ids[i], &s), 0);
    }
    svc_client_pump(c, 200);
    CHECK_EQ_INT(svc_client_status(c, 1000), 0);
    CHECK(c->status && c->status->running == 16 && c->status->waiting == 2);
    struct svc_req *last = svc_client_req(c, ids[18]);
    CHECK(last && last->done && last->error_code == TERN__ERROR_CODE__ERROR_CODE_QUEUE_FULL);
    for (int i = 0; i < 18; i++) {
        struct svc_req *r = svc_client_req(c, ids[i]);
        CHECK(r && !r->done);
        CHECK_EQ_INT(svc_client_abort(c, ids[i]), 0);
    }
    CHECK(svc_client_wait_done(c, ids, 19, 3000));
    for (int i = 0; i < 19; i++)
        svc_client_req(c, ids[i])->used = false;
    svc_client_pump(c, 100);
    check_pool_empty(c, "after queue full");
}

/* Junk on the gateway link is dropped (a wrong version is answered) and the scheduler serves on. */
static void test_junk(struct svc_client *c)
{
    unsigned seed = 12345;
    uint8_t buf[300];
    for (int i = 0; i < 200; i++) {
        size_t n = (size_t)(rand_r(&seed) % sizeof buf);
        for (size_t k = 0; k < n; k++)
            buf[k] = (uint8_t)rand_r(&seed);
        CHECK(zmq_send(c->sock.zsock, buf, n, 0) >= 0);
    }
    CHECK(zmq_send(c->sock.zsock, "x", 1, ZMQ_SNDMORE) >= 0);
    CHECK(zmq_send(c->sock.zsock, "y", 1, 0) >= 0);
    Tern__Envelope env;
    tern__envelope__init(&env);
    env.protocol_version = MSG_PROTOCOL_VERSION + 7;
    env.req_id = 0;
    CHECK_EQ_INT(msg_send(&c->sock, NULL, &env.base), 0);
    /* a worker-link message on the gateway link */
    Tern__Reset rs = TERN__RESET__INIT;
    env.protocol_version = MSG_PROTOCOL_VERSION;
    env.body_case = TERN__ENVELOPE__BODY_RESET;
    env.reset = &rs;
    CHECK_EQ_INT(msg_send(&c->sock, NULL, &env.base), 0);
    svc_client_pump(c, 300);
    CHECK(c->n_link_errors >= 2);
    svc_client_req(c, 200)->used = false; /* forget the first run of test_stop */
    test_stop(c);                         /* still serving */
    check_pool_empty(c, "after junk");
}

/* --check-config: 0 for a good config, 2 with a reason for a bad one */
static void test_check_config(const char *dir)
{
    struct svc_proc p;
    const char *good[] = {"--engine", "fake", "--check-config", NULL};
    const char *bad[] = {"--engine", "bogus", "--check-config", NULL};
    const char *bad_s[] = {"--heartbeat-ms", "1000",           "--dead-after-ms",
                           "1000",           "--check-config", NULL};
    CHECK_EQ_INT(svc_spawn(&p, dir, "cc1", "tern-worker", good), 0);
    CHECK_EQ_INT(svc_stop(&p, 0, 3000), 0);
    CHECK_EQ_INT(svc_spawn(&p, dir, "cc2", "tern-worker", bad), 0);
    CHECK_EQ_INT(svc_stop(&p, 0, 3000), 2);
    CHECK_EQ_INT(svc_spawn(&p, dir, "cc3", "tern-scheduler", bad_s), 0);
    CHECK_EQ_INT(svc_stop(&p, 0, 3000), 2);
}

int main(void)
{
    char dir[64], gw_ep[128], wk_ep[128];
    if (svc_tmpdir(dir, sizeof dir) < 0)
        TEST_SKIP("no temp dir");
    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/gw.sock", dir);
    snprintf(wk_ep, sizeof wk_ep, "ipc://%s/wk.sock", dir);
    const char *sa[] = {"--gateway-endpoint",
                        gw_ep,
                        "--worker-endpoint",
                        wk_ep,
                        "--heartbeat-ms",
                        HB,
                        "--dead-after-ms",
                        DEAD,
                        "--check-pool",
                        "--decode-steps",
                        "4",
                        "--queue-cap",
                        "2",
                        NULL};
    const char *w1a[] = {"--engine",
                         "fake",
                         "--scheduler-endpoint",
                         wk_ep,
                         "--worker-id",
                         "w1",
                         "--heartbeat-ms",
                         HB,
                         "--dead-after-ms",
                         DEAD,
                         "--fake-vocab",
                         "1000",
                         "--max-model-len",
                         "1024",
                         "--max-seqs",
                         "8",
                         "--fake-step-us",
                         "3000",
                         "--fake-device-sampling",
                         NULL};
    const char *w2a[] = {"--engine",
                         "fake",
                         "--scheduler-endpoint",
                         wk_ep,
                         "--worker-id",
                         "w2",
                         "--heartbeat-ms",
                         HB,
                         "--dead-after-ms",
                         DEAD,
                         "--fake-vocab",
                         "1000",
                         "--max-model-len",
                         "1024",
                         "--max-seqs",
                         "8",
                         "--fake-step-us",
                         "3000",
                         "--fake-device-sampling",
                         NULL};
    CHECK_EQ_INT(svc_spawn(&sched_p, dir, "scheduler", "tern-scheduler", sa), 0);
    CHECK_EQ_INT(svc_spawn(&wk1, dir, "w1", "tern-worker", w1a), 0);
    CHECK_EQ_INT(svc_spawn(&wk2, dir, "w2", "tern-worker", w2a), 0);
    struct svc_client c;
    CHECK_EQ_INT(svc_client_open(&c, gw_ep), 0);
    CHECK_EQ_INT(svc_client_hello(&c, 3000), 0);
    bool up = svc_client_wait_workers(&c, 2, 5000);
    CHECK(up);
    if (up) {
        test_generate(&c);
        test_stop(&c);
        test_bias_min_tokens(&c);
        test_abort(&c);
        test_rejects(&c);
        test_gateway_gone(&c, gw_ep);
        test_queue_full(&c);
        test_junk(&c);
    }
    test_check_config(dir);
    svc_client_close(&c);
    CHECK_EQ_INT(svc_stop(&wk1, SIGTERM, 3000), 0);
    CHECK_EQ_INT(svc_stop(&wk2, SIGTERM, 3000), 0);
    CHECK_EQ_INT(svc_stop(&sched_p, SIGTERM, 3000), 0); /* idle drain: exits 0 at once */
    if (test_result() != 0) {
        svc_dump_log(&sched_p);
        svc_dump_log(&wk1);
        svc_dump_log(&wk2);
    }
    return test_result();
}
