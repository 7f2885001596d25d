/* Integration: a started request outlives its worker. Scheduler (default: resume on worker loss,
 * --queue-timeout-ms 1500) + two fake workers + a proto-level test gateway, on ipc://.
 *   1. A greedy request streams for longer than the queue timeout, then its worker is killed
 *      (-9): it goes back to the queue with its tokens so far, is placed on the other worker and
 *      completes with exactly the fake model's tokens, no error. (The queue timeout counts from
 *      its return to the queue, not from its submission: with the old rule it ended NO_WORKER.)
 *   2. The survivor is now the only worker; it is killed too: a started request has nowhere to
 *      resume and ends WORKER_LOST at once (no stall). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "svc_harness.h"
#include "test.h"

#define VOCAB "1000"

static char dir[64], gw_ep[128], wk_ep[128];
static struct svc_proc sched_p, wk[2];
static const char *const IDS[2] = {"r1", "r2"};

static int start_worker(int i)
{
    const char *a[] = {"--engine",       "fake",  "--scheduler-endpoint", wk_ep,
                       "--worker-id",    IDS[i],  "--heartbeat-ms",       "100",
                       "--dead-after-ms", "500",  "--fake-vocab",         VOCAB,
                       "--max-model-len", "4096", "--max-seqs",           "8",
                       "--fake-step-us", "10000", NULL};
    return svc_spawn(&wk[i], dir, IDS[i], "tern-worker", a);
}

static int running_on(const struct svc_client *c, const char *id)
{
    for (size_t i = 0; c->status && i < c->status->n_workers; i++)
        if (strcmp(c->status->workers[i]->worker_id, id) == 0)
            return (int)c->status->workers[i]->running;
    return -1;
}

static bool formula_ok(const struct svc_req *r, uint32_t last_prompt)
{
    uint32_t prev = last_prompt;
    for (uint32_t i = 0; i < r->n_tokens; i++) {
        prev = svc_fake_next(prev, 1000);
        if (r->tokens[i] != prev)
            return false;
    }
    return true;
}

int main(void)
{
    if (svc_tmpdir(dir, sizeof dir) < 0)
        TEST_SKIP("no temp dir");
    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/gw.sock", dir);
    snprintf(wk_ep, sizeof wk_ep, "ipc://%s/wk.sock", dir);
    const char *sa[] = {"--gateway-endpoint", gw_ep,    "--worker-endpoint", wk_ep,
                        "--heartbeat-ms",     "100",    "--dead-after-ms",   "500",
                        "--queue-timeout-ms", "1500",   "--check-pool",      NULL};
    CHECK_EQ_INT(svc_spawn(&sched_p, dir, "scheduler", "tern-scheduler", sa), 0);
    CHECK_EQ_INT(start_worker(0), 0);
    CHECK_EQ_INT(start_worker(1), 0);
    struct svc_client c;
    CHECK_EQ_INT(svc_client_open(&c, gw_ep), 0);
    CHECK_EQ_INT(svc_client_hello(&c, 3000), 0);
    bool up = svc_client_wait_workers(&c, 2, 5000);
    CHECK(up);
    if (up) {
        /* 1: 400 tokens at >= 10 ms a step: still running after 2 s (> the queue timeout) */
        uint32_t prompt[2] = {1, 42};
        struct svc_submit s = {.prompt = prompt, .n_prompt = 2, .max_tokens = 400,
                               .temperature = 0};
        uint64_t id = 7;
        CHECK_EQ_INT(svc_client_submit(&c, id, &s), 0);
        CHECK(svc_client_wait_tokens(&c, id, 2, 5000));
        svc_client_pump(&c, 2000);
        CHECK_EQ_INT(svc_client_status(&c, 1000), 0);
        int victim = running_on(&c, IDS[0]) == 1 ? 0 : 1;
        CHECK_EQ_INT(running_on(&c, IDS[victim]), 1);
        struct svc_req *r = svc_client_req(&c, id);
        uint32_t before = r ? r->n_tokens : 0;
        CHECK(before > 0 && before < 400);
        fprintf(stderr, "kill %s after %u tokens\n", IDS[victim], before);
        svc_stop(&wk[victim], SIGKILL, 2000);
        CHECK(svc_client_wait_done(&c, &id, 1, 15000));
        r = svc_client_req(&c, id);
        CHECK(r && r->done && r->error_code == 0);
        CHECK(r && r->finish_reason == TERN__FINISH_REASON__FINISH_REASON_LENGTH);
        CHECK(r && r->n_tokens == 400 && !r->gap && formula_ok(r, 42));
        if (r)
            r->used = false;
        /* 2: only the survivor is left; kill it under a started request */
        const int other = 1 - victim;
        uint64_t id2 = 8;
        CHECK_EQ_INT(svc_client_submit(&c, id2, &s), 0);
        CHECK(svc_client_wait_tokens(&c, id2, 2, 5000));
        uint64_t t0 = clock_now_ms();
        svc_stop(&wk[other], SIGKILL, 2000);
        CHECK(svc_client_wait_done(&c, &id2, 1, 5000));
        struct svc_req *r2 = svc_client_req(&c, id2);
        CHECK(r2 && r2->error_code == TERN__ERROR_CODE__ERROR_CODE_WORKER_LOST);
        fprintf(stderr, "last worker killed: WORKER_LOST after %llu ms\n",
                (unsigned long long)(clock_now_ms() - t0));
    }
    svc_client_close(&c);
    svc_stop(&sched_p, SIGTERM, 3000);
    for (int i = 0; i < 2; i++)
        if (wk[i].pid)
            svc_stop(&wk[i], SIGKILL, 1000);
    if (test_result() != 0) {
        svc_dump_log(&sched_p);
        svc_dump_log(&wk[0]);
        svc_dump_log(&wk[1]);
    }
    return test_result();
}
