/* Integration: failures. Scheduler + two fake workers (worker link on tcp:// on a free loopback
 * port, gateway link on ipc://) and a proto-level test gateway.
 *   kill -9 a worker (scheduler run with --fail-on-worker-loss; the default, resuming them
 *     elsewhere, is test_multi_workers'): exactly its requests end with WORKER_LOST, the other
 *     worker's keep streaming, new requests are served; the restarted worker registers again
 *     and serves.
 *   kill -9 a worker before its request's first token: the request is served elsewhere.
 *   kill -9 the scheduler: workers stay up; a new scheduler on the same endpoints gets both
 *     workers back and the gateway sees the new instance; requests are served again.
 *   SIGTERM the scheduler: new requests get DRAINING, the running one finishes, exit 0. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "svc_harness.h"
#include "test.h"

#define VOCAB "1000"
#define HB "100"
#define DEAD "500"

static char dir[64], gw_ep[128], wk_ep[128];
static struct svc_proc sched_p, wk[2];

static uint32_t running_on(const struct svc_client *c, const char *id);
static bool formula_ok(const struct svc_req *r, uint32_t last_prompt);

static int start_sched(void)
{
    const char *sa[] = {"--gateway-endpoint",
                        gw_ep,
                        "--worker-endpoint",
                        wk_ep,
                        "--heartbeat-ms",
                        HB,
                        "--dead-after-ms",
                        DEAD,
                        "--check-pool",
                        "--fail-on-worker-loss",
                        "--drain-timeout-ms",
                        "5000",
                        NULL};
    return svc_spawn(&sched_p, dir, "scheduler", "tern-scheduler", sa);
}

static int start_worker(int i)
{
    const char *id = i == 0 ? "w1" : "w2";
    const char *a[] = {"--engine",
                       "fake",
                       "--scheduler-endpoint",
                       wk_ep,
                       "--worker-id",
                       id,
                       "--heartbeat-ms",
                       HB,
                       "--dead-after-ms",
                       DEAD,
                       "--fake-vocab",
                       VOCAB,
                       "--max-model-len",
                       "4096",
                       "--max-seqs",
                       "8",
                       "--fake-step-us",
                       "3000",
                       NULL};
    return svc_spawn(&wk[i], dir, id, "tern-worker", a);
}

/* A request placed on a worker that dies before its first token goes back to the queue and is
 * served elsewhere without an error. w3 is slow (2 s per step) and has the most free blocks, so
 * placement picks it. */
static void test_requeue(struct svc_client *c)
{
    struct svc_proc w3;
    const char *a[] = {"--engine",
                       "fake",
                       "--scheduler-endpoint",
                       wk_ep,
                       "--worker-id",
                       "w3",
                       "--heartbeat-ms",
                       HB,
                       "--dead-after-ms",
                       DEAD,
                       "--fake-vocab",
                       VOCAB,
                       "--max-model-len",
                       "4096",
                       "--max-seqs",
                       "8",
                       "--kv-blocks",
                       "100000",
                       "--fake-step-us",
                       "2000000",
                       NULL};
    CHECK_EQ_INT(svc_spawn(&w3, dir, "w3", "tern-worker", a), 0);
    CHECK(svc_client_wait_workers(c, 3, 5000));
    uint32_t prompt[2] = {8, 123};
    struct svc_submit s = {.prompt = prompt, .n_prompt = 2, .max_tokens = 5, .temperature = 0};
    uint64_t id = 50;
    CHECK_EQ_INT(svc_client_submit(c, id, &s), 0);
    /* 1.2 s into a 2 s step (dead-after 500 ms): heartbeats still flow from its link thread */
    svc_client_pump(c, 1200);
    CHECK_EQ_INT(svc_client_status(c, 1000), 0);
    CHECK_EQ_INT(running_on(c, "w3"), 1);
    CHECK(c->status && c->status->workers_ready == 3);
    svc_stop(&w3, SIGKILL, 2000);
    CHECK(svc_client_wait_done(c, &id, 1, 5000));
    struct svc_req *r = svc_client_req(c, id);
    CHECK(r && r->error_code == 0 && r->n_tokens == 5 && formula_ok(r, 123));
    if (r)
        r->used = false;
    CHECK(svc_client_wait_workers(c, 2, 3000));
}

static uint32_t running_on(const struct svc_client *c, const char *id)
{
    for (size_t i = 0; c->status && i < c->status->n_workers; i++)
        if (strcmp(c->status->workers[i]->worker_id, id) == 0)
            return c->status->workers[i]->running;
    return UINT32_MAX;
}

static uint64_t worker_tokens(const struct svc_client *c, const char *id)
{
    for (size_t i = 0; c->status && i < c->status->n_workers; i++)
        if (strcmp(c->status->workers[i]->worker_id, id) == 0)
            return c->status->workers[i]->tokens_generated;
    return 0;
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

/* n short greedy requests from id0; all must finish LENGTH with the fake model's tokens. */
static void serve_short(struct svc_client *c, uint64_t id0, int n)
{
    uint64_t ids[16];
    uint32_t prompt[2] = {3, 0};
    for (int i = 0; i < n; i++) {
        prompt[1] = 100 + (uint32_t)i;
        ids[i] = id0 + (uint64_t)i;
        struct svc_submit s = {.prompt = prompt, .n_prompt = 2, .max_tokens = 12, .temperature = 0};
        CHECK_EQ_INT(svc_client_submit(c, ids[i], &s), 0);
    }
    CHECK(svc_client_wait_done(c, ids, n, 8000));
    for (int i = 0; i < n; i++) {
        struct svc_req *r = svc_client_req(c, ids[i]);
        CHECK(r && r->done && r->error_code == 0);
        CHECK(r && r->finish_reason == TERN__FINISH_REASON__FINISH_REASON_LENGTH);
        CHECK(r && r->n_tokens == 12 && formula_ok(r, 100 + (uint32_t)i));
        if (r)
            r->used = false; /* recycle the slot */
    }
}

static void test_worker_kill(struct svc_client *c)
{
    uint64_t ids[4] = {10, 11, 12, 13};
    uint32_t prompt[2] = {1, 50};
    for (int i = 0; i < 4; i++) {
        struct svc_submit s = {
            .prompt = prompt, .n_prompt = 2, .max_tokens = 3000, .temperature = 0};
        CHECK_EQ_INT(svc_client_submit(c, ids[i], &s), 0);
    }
    for (int i = 0; i < 4; i++)
        CHECK(svc_client_wait_tokens(c, ids[i], 2, 5000));
    CHECK_EQ_INT(svc_client_status(c, 1000), 0);
    uint32_t on_w1 = running_on(c, "w1"), on_w2 = running_on(c, "w2");
    fprintf(stderr, "before kill: w1 running=%u w2 running=%u\n", on_w1, on_w2);
    CHECK(on_w1 >= 1 && on_w2 >= 1 && on_w1 + on_w2 == 4);
    svc_stop(&wk[0], SIGKILL, 2000);
    svc_client_pump(c, 1000); /* > dead-after */
    uint32_t lost = 0, streaming = 0;
    for (int i = 0; i < 4; i++) {
        struct svc_req *r = svc_client_req(c, ids[i]);
        if (r->done && r->error_code == TERN__ERROR_CODE__ERROR_CODE_WORKER_LOST)
            lost++;
        else if (!r->done)
            streaming++;
        CHECK(formula_ok(r, 50));
    }
    fprintf(stderr, "after kill: lost=%u streaming=%u\n", lost, streaming);
    CHECK_EQ_INT(lost, on_w1);
    CHECK_EQ_INT(streaming, on_w2);
    CHECK_EQ_INT(svc_client_status(c, 1000), 0);
    CHECK(c->status && c->status->workers_ready == 1 && c->status->workers_total == 1);
    serve_short(c, 20, 3); /* the survivor serves */
    for (int i = 0; i < 4; i++) {
        struct svc_req *r = svc_client_req(c, ids[i]);
        if (!r->done)
            CHECK_EQ_INT(svc_client_abort(c, ids[i]), 0);
    }
    CHECK(svc_client_wait_done(c, ids, 4, 3000));
    for (int i = 0; i < 4; i++)
        svc_client_req(c, ids[i])->used = false;
    /* the restarted worker registers again and gets work */
    CHECK_EQ_INT(start_worker(0), 0);
    CHECK(svc_client_wait_workers(c, 2, 5000));
    serve_short(c, 30, 6);
    CHECK_EQ_INT(svc_client_status(c, 1000), 0);
    CHECK(worker_tokens(c, "w1") > 0);
    CHECK(c->status && c->status->kv_blocks_used == 0 && c->status->state_slots_used == 0);
}

static void test_scheduler_kill(struct svc_client *c)
{
    uint64_t before = c->sched_instance;
    uint32_t changes = c->n_instance_changes;
    svc_stop(&sched_p, SIGKILL, 2000);
    svc_client_pump(c, 300);
    CHECK(svc_alive(&wk[0]));
    CHECK(svc_alive(&wk[1]));
    CHECK_EQ_INT(start_sched(), 0);
    /* the test gateway's heartbeats register it with the new scheduler, whose heartbeats carry
     * a new instance */
    uint64_t end = clock_now_ms() + 5000;
    while (c->n_instance_changes == changes && clock_now_ms() < end)
        svc_client_pump(c, 50);
    CHECK(c->n_instance_changes > changes && c->sched_instance != before);
    CHECK(svc_client_wait_workers(c, 2, 5000));
    CHECK(svc_alive(&wk[0]));
    CHECK(svc_alive(&wk[1]));
    serve_short(c, 40, 4);
    CHECK_EQ_INT(svc_client_status(c, 1000), 0);
    CHECK(c->status && c->status->kv_blocks_used == 0);
}

static void test_drain(struct svc_client *c)
{
    uint32_t prompt[1] = {77};
    struct svc_submit s = {.prompt = prompt, .n_prompt = 1, .max_tokens = 60, .temperature = 0};
    uint64_t id = 60, late = 61;
    CHECK_EQ_INT(svc_client_submit(c, id, &s), 0);
    CHECK(svc_client_wait_tokens(c, id, 1, 3000));
    kill(sched_p.pid, SIGTERM);
    svc_client_pump(c, 50);
    CHECK_EQ_INT(svc_client_submit(c, late, &s), 0);
    CHECK(svc_client_wait_done(c, &id, 1, 5000));
    CHECK(svc_client_wait_done(c, &late, 1, 2000));
    struct svc_req *r = svc_client_req(c, id), *rl = svc_client_req(c, late);
    CHECK(r && r->finish_reason == TERN__FINISH_REASON__FINISH_REASON_LENGTH && r->n_tokens == 60);
    CHECK(rl && rl->error_code == TERN__ERROR_CODE__ERROR_CODE_DRAINING);
    CHECK_EQ_INT(svc_stop(&sched_p, 0, 3000), 0); /* signal 0: just wait for the exit */
}

int main(void)
{
    if (svc_tmpdir(dir, sizeof dir) < 0)
        TEST_SKIP("no temp dir");
    int port = svc_free_port();
    if (port <= 0)
        TEST_SKIP("no loopback port");
    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/gw.sock", dir);
    snprintf(wk_ep, sizeof wk_ep, "tcp://127.0.0.1:%d", port);
    CHECK_EQ_INT(start_sched(), 0);
    CHECK_EQ_INT(start_worker(0), 0);
    CHECK_EQ_INT(start_worker(1), 0);
    struct svc_client c;
    CHECK_EQ_INT(svc_client_open(&c, gw_ep), 0);
    CHECK_EQ_INT(svc_client_hello(&c, 3000), 0);
    bool up = svc_client_wait_workers(&c, 2, 5000);
    CHECK(up);
    if (up) {
        test_worker_kill(&c);
        test_requeue(&c);
        test_scheduler_kill(&c);
        test_drain(&c);
    }
    svc_client_close(&c);
    CHECK_EQ_INT(svc_stop(&wk[0], SIGTERM, 3000), 0);
    CHECK_EQ_INT(svc_stop(&wk[1], SIGTERM, 3000), 0);
    if (sched_p.pid)
        svc_stop(&sched_p, SIGKILL, 1000);
    if (test_result() != 0) {
        svc_dump_log(&sched_p);
        svc_dump_log(&wk[0]);
        svc_dump_log(&wk[1]);
    }
    return test_result();
}
