/* Worker identity in the scheduler core, with a clock the test drives (the timing-free half of
 * tests/integration/services/test_svc_identity.c):
 *   - a second live process with a held worker id is refused (an Error with code DUPLICATE), and
 *     the load-progress entry its connection made is dropped at once, so that its silence while it
 *     waits to retry is never taken for the holder's death;
 *   - a registration refused as invalid drops its load-progress entry the same way;
 *   - the holder stays registered, untouched, while it keeps its heartbeats;
 *   - once the holder is silent past dead_after_ms it is lost, and the second process's next
 *     attempt takes the id. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "sim.h"
#include "test.h"

#define HB_MS 100
#define DEAD_MS 1000
#define ID "gpu-host-0"

struct seen {
    int errors_dup, errors_invalid, acks, resets;
};

/* Drain what the scheduler sent; count what went to peer p. */
static void drain(struct sim_outbox *box, const struct msg_peer *p, struct seen *n)
{
    struct sim_frame f;
    while (sim_outbox_pop(box, &f)) {
        if (f.to_worker && msg_peer_equal(&f.to, p)) {
            switch (f.env->body_case) {
            case TERN__ENVELOPE__BODY_ERROR:
                if (f.env->error->code == TERN__ERROR_CODE__ERROR_CODE_DUPLICATE)
                    n->errors_dup++;
                else if (f.env->error->code == TERN__ERROR_CODE__ERROR_CODE_INVALID)
                    n->errors_invalid++;
                break;
            case TERN__ENVELOPE__BODY_REGISTER_ACK:
                n->acks++;
                break;
            case TERN__ENVELOPE__BODY_RESET:
                n->resets++;
                break;
            default:
                break;
            }
        }
        tern__envelope__free_unpacked(f.env, NULL);
    }
}

static const struct sched_worker *find(const struct sched *s, const struct msg_peer *p)
{
    for (int i = 0; i < SCHED_MAX_WORKERS; i++)
        if (s->workers[i].state != SCHED_WORKER_STATE_FREE &&
            msg_peer_equal(&s->workers[i].peer, p))
            return &s->workers[i];
    return NULL;
}

static int n_used(const struct sched *s)
{
    int n = 0;
    for (int i = 0; i < SCHED_MAX_WORKERS; i++)
        n += s->workers[i].state != SCHED_WORKER_STATE_FREE;
    return n;
}

static void reg(struct sched *s, const struct msg_peer *p, uint64_t instance, uint32_t kv_blocks,
                uint64_t now)
{
    sim_register_instance(s, p, ID, instance, kv_blocks, 0, 16, 4, 4, 256, 100, 0, 512, now);
}

int main(void)
{
    log_init("sim", LOG_LEVEL_OFF);
    struct sched_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.heartbeat_ms = HB_MS;
    cfg.dead_after_ms = DEAD_MS;
    cfg.queue_cap = 8;
    cfg.queue_timeout_ms = 60000;
    cfg.max_step_tokens = 256;
    cfg.decode_steps = 1;
    cfg.retry_after_ms = 100;
    struct sim_outbox box;
    memset(&box, 0, sizeof box);
    struct sched_transport t = {.send = sim_outbox_send, .ctx = &box};
    struct sched s;
    CHECK_EQ_INT(sched_init_local(&s, &cfg, &t), 0);

    const struct msg_peer pa = sim_peer("a"), pb = sim_peer("b"), pc = sim_peer("c");
    struct seen na = {0}, nb = {0}, nc = {0};
    uint64_t now = 1000;

    /* a holds the id */
    sim_load_progress(&s, &pa, ID, 0.5f, now);
    reg(&s, &pa, 0xa, 64, now);
    drain(&box, &pa, &na);
    CHECK_EQ_INT(na.acks, 1);
    const struct sched_worker *wa = find(&s, &pa);
    CHECK(wa && wa->state == SCHED_WORKER_STATE_READY && strcmp(wa->id, ID) == 0);

    /* b loads (an entry named like a's appears), registers with a's id: refused, entry gone */
    sim_load_progress(&s, &pb, ID, 0.5f, now + 20);
    const struct sched_worker *wb = find(&s, &pb);
    CHECK(wb && wb->state == SCHED_WORKER_STATE_LOADING);
    reg(&s, &pb, 0xb, 64, now + 30);
    drain(&box, &pb, &nb);
    CHECK_EQ_INT(nb.errors_dup, 1);
    CHECK_EQ_INT(nb.acks, 0);
    CHECK(find(&s, &pb) == NULL);
    CHECK_EQ_INT(n_used(&s), 1);

    /* c loads and sends an invalid registration (no kv blocks): refused, entry gone */
    sim_load_progress(&s, &pc, "other", 0.9f, now + 40);
    CHECK(find(&s, &pc) != NULL);
    reg(&s, &pc, 0xc, 0, now + 50);
    drain(&box, &pc, &nc);
    CHECK_EQ_INT(nc.errors_invalid, 1);
    CHECK(find(&s, &pc) == NULL);

    /* three dead_after periods: a heartbeats, b retries every 2 s; a is never lost or reset */
    for (uint64_t dt = 100; dt <= 3 * DEAD_MS; dt += 10) {
        uint64_t tn = now + dt;
        if (dt % HB_MS == 0)
            sim_heartbeat(&s, &pa, true, tn);
        if (dt % 2000 == 0)
            reg(&s, &pb, 0xb, 64, tn);
        sched_wk_tick(&s, tn);
        drain(&box, &pb, &nb);
        CHECK(find(&s, &pa) == wa && wa->state == SCHED_WORKER_STATE_READY);
        CHECK(find(&s, &pb) == NULL);
    }
    CHECK_EQ_INT(nb.errors_dup, 2);
    CHECK_EQ_INT(nb.acks, 0);
    CHECK(wa->instance == 0xa);

    /* a goes silent: lost after dead_after_ms; b's next attempt takes the id */
    now += 3 * DEAD_MS;
    for (uint64_t dt = 10; dt <= DEAD_MS + 50; dt += 10)
        sched_wk_tick(&s, now + dt);
    drain(&box, &pa, &na);
    CHECK(find(&s, &pa) == NULL);
    reg(&s, &pb, 0xb, 64, now + DEAD_MS + 60);
    drain(&box, &pb, &nb);
    CHECK_EQ_INT(nb.acks, 1);
    wb = find(&s, &pb);
    CHECK(wb && wb->state == SCHED_WORKER_STATE_READY && wb->instance == 0xb &&
          strcmp(wb->id, ID) == 0);
    CHECK_EQ_INT(n_used(&s), 1);

    sched_deinit(&s);
    sim_outbox_destroy(&box);
    if (!test_failures_)
        printf("sched_identity: ok\n");
    return test_result();
}
