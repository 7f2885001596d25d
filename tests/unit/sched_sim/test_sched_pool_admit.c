/* Admission into one pool of KV blocks and GDN states (issue 19), end to end through the real
 * scheduler core: the plan of `tern-scheduler --check` for the real Qwen3.6-35B-A3B config
 * (tests/configs/qwen3.6-35b-a3b.json) at a 6 GiB bf16 budget, --check-request-len 512, is
 * registered as a worker's pool (states in the pool), and requests are submitted until the pool
 * is full (--reserve-full: each placement takes its prompt + max_tokens up front, so the count
 * is exact):
 *   - 512-token requests: exactly the plan's concurrent_requests are placed (85), the rest wait
 *     in the queue; none fails, the pool passes its invariant check;
 *   - a mix, one request of max_model_len and 512-token ones: 1 + floor((blocks - (16,384 +
 *     state)) / (32 + state)) are placed, from the same arithmetic;
 *   - with the same budget and states in slots (--gdn-state slots, the slot plan registered with
 *     no state blocks), the slots cap it at the plan's slot count (8).
 * The worker side of the plan is not run: nothing is stepped (no plans are executed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "sched_check.h"
#include "sim.h"
#include "test.h"

static const char *CONFIG = "tests/configs/qwen3.6-35b-a3b.json";

static int plan_for(const char *gdn_state, struct kv_plan *p)
{
    char *argv[] = {(char *)"tern-scheduler",
                    (char *)"--model-config",
                    (char *)CONFIG,
                    (char *)"--kv-cache-memory-bytes",
                    (char *)"6442450944",
                    (char *)"--check-request-len",
                    (char *)"512",
                    (char *)"--gdn-state",
                    (char *)gdn_state,
                    NULL};
    struct sched_cfg cfg;
    int rc = sched_cfg_parse(&cfg, 9, argv);
    CHECK_EQ_INT(rc, 0);
    if (rc)
        return rc;
    char err[1024];
    rc = sched_check_plan(&cfg, NULL, p, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "plan: %s\n", err);
    return rc;
}

static uint32_t count_placed(const struct sched *s)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < sched_reqs_count(s->reqs); i++)
        n += sched_reqs_at(s->reqs, i)->worker >= 0;
    return n;
}

/* Errors sent to the gateway (a request that failed instead of waiting). */
static uint32_t drain_errors(struct sim_outbox *box)
{
    uint32_t n = 0;
    struct sim_frame f;
    while (sim_outbox_pop(box, &f)) {
        n += !f.to_worker && f.env->body_case == TERN__ENVELOPE__BODY_ERROR;
        tern__envelope__free_unpacked(f.env, NULL);
    }
    return n;
}

/* Register the plan as worker w0, submit the requests (prompt lengths, max_tokens each), place.
 * Returns how many are placed. */
static uint32_t admit(const struct kv_plan *p, const uint32_t *prompt_len, uint32_t max_tokens,
                      uint32_t n_req)
{
    struct sched_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.heartbeat_ms = 1000;
    cfg.dead_after_ms = 100000;
    cfg.queue_cap = 1000;
    cfg.queue_timeout_ms = 1000000;
    cfg.max_step_tokens = 2048;
    cfg.decode_steps = 1;
    cfg.retry_after_ms = 100;
    cfg.check_pool = true;
    cfg.reserve_full = true;
    struct sim_outbox box;
    memset(&box, 0, sizeof box);
    struct sched_transport t = {.send = sim_outbox_send, .ctx = &box};
    struct sched s;
    CHECK_EQ_INT(sched_init_local(&s, &cfg, &t), 0);
    const struct msg_peer wp = sim_peer("w0"), gp = sim_peer("gw0");
    sim_register_instance(&s, &wp, "w0", 1, (uint32_t)p->n_blocks,
                          p->state_in_pool ? (uint32_t)p->state_blocks : 0,
                          (uint32_t)p->block_tokens, (uint32_t)p->n_state_slots,
                          (uint32_t)p->n_state_slots, (uint32_t)p->max_model_len, 1000, 0, 2048, 1);
    uint32_t max_len = 0;
    for (uint32_t i = 0; i < n_req; i++)
        max_len = prompt_len[i] > max_len ? prompt_len[i] : max_len;
    uint32_t *ids = xcalloc(max_len, sizeof *ids);
    for (uint32_t i = 0; i < max_len; i++)
        ids[i] = 1 + i % 900;
    for (uint32_t i = 0; i < n_req; i++) {
        sim_submit(&s, &gp, i + 1, ids, prompt_len[i], max_tokens, true, 2);
        sched_batch_place(&s, 2);
    }
    uint32_t placed = count_placed(&s);
    CHECK_EQ_INT(drain_errors(&box), 0); /* the others wait; nothing failed */
    CHECK_EQ_INT(s.n_queued, n_req - placed);
    for (int i = 0; i < SCHED_MAX_WORKERS; i++)
        if (s.workers[i].pool)
            CHECK_EQ_INT(sched_pool_check(s.workers[i].pool), 0);
    sched_deinit(&s);
    sim_outbox_destroy(&box);
    free(ids);
    return placed;
}

int main(void)
{
    log_init("admit", LOG_LEVEL_OFF);
    struct kv_plan pool, slots;
    CHECK_EQ_INT(plan_for("pool", &pool), 0);
    CHECK_EQ_INT(plan_for("slots", &slots), 0);
    CHECK(pool.state_in_pool && pool.state_blocks > 0);
    enum { N = 120 };
    uint32_t len[N];
    /* 512-token requests: 511 prompt tokens + 1 completion token */
    for (int i = 0; i < N; i++)
        len[i] = 511;
    uint32_t placed = admit(&pool, len, 1, N);
    CHECK_EQ_INT(placed, pool.concurrent_requests);
    CHECK(placed >= 70); /* the floor */
    /* a mix: one max_model_len request first, then short ones */
    len[0] = (uint32_t)pool.max_model_len - 1;
    int64_t blocks_long = kv_plan_blocks_for(&pool, pool.max_model_len) + pool.state_blocks;
    int64_t blocks_short = kv_plan_blocks_for(&pool, 512) + pool.state_blocks;
    int64_t want = 1 + (pool.n_blocks - blocks_long) / blocks_short;
    placed = admit(&pool, len, 1, N);
    CHECK_EQ_INT(placed, want);
    /* states in slots: the slot count caps it */
    for (int i = 0; i < N; i++)
        len[i] = 511;
    placed = admit(&slots, len, 1, N);
    CHECK_EQ_INT(placed, slots.concurrent_requests);
    CHECK_EQ_INT(placed, slots.n_state_slots);
    printf("pool_admit: pool=%u (plan %lld) mix=%lld slots=%u state_blocks=%lld blocks=%lld\n",
           (unsigned)pool.concurrent_requests, (long long)pool.concurrent_requests, (long long)want,
           placed, (long long)pool.state_blocks, (long long)pool.n_blocks);
    return test_result();
}
