/* bench_sched_plan: planning cost of the scheduler per model step. One in-process worker
 * (transport = protobuf pack into a buffer, as msg_send does before zmq), N sequences
 * (default 256) decoding, one plan in flight, decode_steps 1 (a plan every step: the worst
 * case). Per step it times sched_turn (timers, placement, the StepPlan built and packed) and
 * the handling of the StepResult (tokens appended, TokenEvents packed for the gateway).
 * Usage: bench_sched_plan [n_seqs=256] [steps=4000] [decode_steps=1] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "proto/tern.pb-c.h"
#include "sched_internal.h"

struct sink {
    uint8_t *buf;
    size_t cap;
    uint64_t frames, bytes;
};

static int sink_send(void *ctx, bool to_worker, const struct msg_peer *to,
                     const ProtobufCMessage *msg)
{
    (void)to_worker;
    (void)to;
    struct sink *k = ctx;
    size_t len = protobuf_c_message_get_packed_size(msg);
    if (len > k->cap) {
        k->cap = 2 * len;
        k->buf = xrealloc(k->buf, k->cap);
    }
    protobuf_c_message_pack(msg, k->buf);
    k->frames++;
    k->bytes += len;
    return 0;
}

static struct msg_peer peer(const char *name)
{
    struct msg_peer p;
    memset(&p, 0, sizeof p);
    p.len = (uint8_t)strlen(name);
    memcpy(p.id, name, p.len);
    return p;
}

static void env_init(Tern__Envelope *e, uint64_t req_id)
{
    tern__envelope__init(e);
    e->protocol_version = MSG_PROTOCOL_VERSION;
    e->req_id = req_id;
}

/* CPU time of this thread, ns: the planning cost without the time the thread was descheduled
 * (the build machine is shared). */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Report the step the worker just ran: one token for every granted decode or sampling prefill. */
static void answer(struct sched *s, const struct msg_peer *wp, uint64_t step, uint64_t now,
                   Tern__SeqResult *res, Tern__SeqResult **rp, uint32_t *toks)
{
    uint32_t n = 0, count = sched_reqs_count(s->reqs);
    for (uint32_t i = 0; i < count; i++) {
        struct sched_req *r = sched_reqs_at(s->reqs, i);
        bool prefill_done = r->state == SCHED_REQ_STATE_PREFILL && r->worker == 0 &&
                            r->n_prefilled == r->n_prompt + r->n_resume;
        if (r->worker != 0 || (!prefill_done && !r->n_granted))
            continue;
        tern__seq_result__init(&res[n]);
        res[n].has_req_id = true;
        res[n].req_id = r->id;
        toks[n] = 1 + (uint32_t)((r->id * 7 + step) % 1000);
        res[n].n_token_ids = 1;
        res[n].token_ids = &toks[n];
        rp[n] = &res[n];
        n++;
    }
    Tern__Envelope e;
    Tern__StepResult sr = TERN__STEP_RESULT__INIT;
    env_init(&e, 0);
    sr.has_step_id = sr.has_done = true;
    sr.step_id = step;
    sr.done = true;
    sr.n_seqs = n;
    sr.seqs = rp;
    e.body_case = TERN__ENVELOPE__BODY_STEP_RESULT;
    e.step_result = &sr;
    sched_wk_handle(s, wp, &e, now);
}

int main(int argc, char **argv)
{
    uint32_t n_seqs = argc > 1 ? (uint32_t)atoi(argv[1]) : 256;
    uint32_t steps = argc > 2 ? (uint32_t)atoi(argv[2]) : 4000;
    int decode_steps = argc > 3 ? atoi(argv[3]) : 1;
    log_init("bench", LOG_LEVEL_OFF);
    struct sched_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.heartbeat_ms = 1000000;
    cfg.dead_after_ms = 1000000 * 3;
    cfg.queue_cap = 100000;
    cfg.queue_timeout_ms = 86400000;
    cfg.max_step_tokens = 8192;
    cfg.decode_steps = decode_steps;
    struct sink sink = {0};
    struct sched_transport t = {.send = sink_send, .ctx = &sink};
    struct sched s;
    sched_init_local(&s, &cfg, &t);

    struct msg_peer wp = peer("w0"), gp = peer("gw0");
    uint32_t max_len = 32768, prompt_len = 512;
    Tern__Envelope e;
    Tern__Register reg = TERN__REGISTER__INIT;
    env_init(&e, 0);
    uint32_t eos = 0;
    reg.worker_id = (char *)"w0";
    reg.has_max_model_len = reg.has_max_seqs = reg.has_block_tokens = reg.has_kv_blocks = true;
    reg.has_state_slots = reg.has_vocab_size = true;
    reg.max_model_len = max_len;
    reg.max_seqs = n_seqs;
    reg.block_tokens = 16;
    reg.kv_blocks = n_seqs * (max_len / 16);
    reg.state_slots = n_seqs;
    reg.vocab_size = 248320;
    reg.n_eos_ids = 1;
    reg.eos_ids = &eos;
    e.body_case = TERN__ENVELOPE__BODY_REGISTER_WORKER;
    e.register_worker = &reg;
    uint64_t now = 1;
    sched_wk_handle(&s, &wp, &e, now);

    uint32_t *prompt = xmalloc(sizeof(uint32_t) * prompt_len);
    for (uint32_t i = 0; i < prompt_len; i++)
        prompt[i] = 1 + i % 1000;
    for (uint32_t k = 0; k < n_seqs; k++) {
        Tern__Submit sub = TERN__SUBMIT__INIT;
        env_init(&e, k + 1);
        sub.n_prompt_ids = prompt_len;
        sub.prompt_ids = prompt;
        sub.has_ignore_eos = true;
        sub.ignore_eos = true;
        e.body_case = TERN__ENVELOPE__BODY_SUBMIT;
        e.submit = &sub;
        sched_gw_handle(&s, &gp, &e, now);
    }
    Tern__SeqResult *res = xcalloc(n_seqs, sizeof *res);
    Tern__SeqResult **rp = xcalloc(n_seqs, sizeof *rp);
    uint32_t *toks = xcalloc(n_seqs, sizeof *toks);
    uint64_t *t_plan = xcalloc(steps, sizeof *t_plan), *t_res = xcalloc(steps, sizeof *t_res);
    /* warm up: prefill everything (budget 8192 tokens per step) until all decode */
    for (int k = 0; k < 200; k++) {
        sched_turn(&s, now);
        if (s.workers[0].n_inflight)
            answer(&s, &wp, s.workers[0].step_id, now, res, rp, toks);
        now++;
    }
    uint32_t decoding = 0;
    for (uint32_t i = 0; i < sched_reqs_count(s.reqs); i++)
        decoding += sched_reqs_at(s.reqs, i)->state == SCHED_REQ_STATE_DECODE;
    uint64_t frames0 = sink.frames, bytes0 = sink.bytes;
    uint64_t cpu_plan = 0, cpu_res = 0;
    for (uint32_t k = 0; k < steps; k++) {
        uint64_t c0 = cpu_ns();
        uint64_t t0 = clock_now_ns();
        sched_turn(&s, now);
        uint64_t t1 = clock_now_ns();
        cpu_plan += cpu_ns() - c0;
        for (int d = 0; d < decode_steps && s.workers[0].n_inflight; d++) {
            uint64_t c2 = cpu_ns();
            uint64_t t2 = clock_now_ns();
            answer(&s, &wp, s.workers[0].step_done + 1, now, res, rp, toks);
            t_res[k] += clock_now_ns() - t2;
            cpu_res += cpu_ns() - c2;
        }
        t_plan[k] = t1 - t0;
        now++;
    }
    double sum_p = 0, sum_r = 0;
    for (uint32_t k = 0; k < steps; k++) {
        sum_p += (double)t_plan[k];
        sum_r += (double)t_res[k];
    }
    qsort(t_plan, steps, sizeof *t_plan, cmp_u64);
    qsort(t_res, steps, sizeof *t_res, cmp_u64);
    printf("bench_sched_plan seqs=%u decoding=%u steps=%u decode_steps=%d\n", n_seqs, decoding,
           steps, decode_steps);
    printf("plan   (sched_turn: place + StepPlan built and packed): mean %.1f us  p50 %.1f us  "
           "p99 %.1f us\n",
           sum_p / steps / 1e3, (double)t_plan[steps / 2] / 1e3,
           (double)t_plan[steps * 99 / 100] / 1e3);
    printf("result (StepResult handled, TokenEvents packed): mean %.1f us  p50 %.1f us  p99 %.1f "
           "us\n",
           sum_r / steps / 1e3, (double)t_res[steps / 2] / 1e3,
           (double)t_res[steps * 99 / 100] / 1e3);
    printf("cpu time (this thread): plan %.1f us/step, result %.1f us/step\n",
           (double)cpu_plan / steps / 1e3, (double)cpu_res / steps / 1e3);
    printf("per model step (plan / decode_steps + result): %.1f us; frames=%" PRIu64
           " bytes=%" PRIu64 " running_at_end=%u\n",
           (sum_p / decode_steps + sum_r) / steps / 1e3, sink.frames - frames0, sink.bytes - bytes0,
           s.workers[0].n_running);
    sched_deinit(&s);
    free(sink.buf);
    free(prompt);
    free(res);
    free(rp);
    free(toks);
    free(t_plan);
    free(t_res);
    return decoding == n_seqs ? 0 : 1;
}
