/* fuzz_sched: the scheduler's message handlers (sched_gw_handle, sched_wk_handle) plus its
 * ticks, placement and step plans, driven by a fuzzed sequence of frames from up to 4 gateways
 * and 4 workers. Frames are either raw bytes (unpacked the way msg_recv does: size cap, bounded
 * allocator, version check) or built from the input as well-formed messages that refer to the
 * scheduler's live state (registered workers, their step ids, placed requests), so the fuzzer
 * reaches deep states: Register -> Submit -> plans -> StepResults with tokens, stops, errors,
 * aborts, worker loss, re-registration, heartbeat timeouts. Pool invariants are checked after
 * every change (cfg.check_pool); replies are packed and dropped (sched_init_local, fz_send).
 * Input: a sequence of ops (op byte, then its fields). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "fuzz.h"
#include "sched_internal.h"

#define N_PEERS 4
#define MAX_IDS 48
#define MAX_OPS 64
#define RAW_MAX 512

static struct sched_cfg g_cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *args[] = {(char *)"fuzz_sched", NULL};
    if (sched_cfg_parse(&g_cfg, 1, args) != 0)
        abort();
    g_cfg.check_pool = true;
    g_cfg.queue_cap = 6;
    g_cfg.max_step_tokens = 48;
    g_cfg.decode_steps = 2;
    g_cfg.heartbeat_ms = 500;
    g_cfg.dead_after_ms = 3000;
    g_cfg.queue_timeout_ms = 5000;
    log_init("fuzz_sched", LOG_LEVEL_OFF);
    return 0;
}

static void peer(struct msg_peer *p, char kind, uint8_t i)
{
    p->len = 2;
    p->id[0] = (uint8_t)kind;
    p->id[1] = (uint8_t)('0' + i % N_PEERS);
}

static uint32_t fill_ids(struct fz *f, uint32_t *ids, size_t max, uint32_t vocab_hint)
{
    size_t n = fz_u8(f) % (max + 1);
    for (size_t i = 0; i < n; i++) {
        uint8_t b = fz_u8(f);
        /* mostly small valid-looking ids, sometimes huge ones */
        ids[i] = b == 0xFF ? fz_u32(f) : (uint32_t)b % (vocab_hint ? vocab_hint : 1000);
    }
    return (uint32_t)n;
}

static struct sched_worker *worker_of(struct sched *s, uint8_t i)
{
    struct msg_peer p;
    peer(&p, 'w', i);
    for (int k = 0; k < SCHED_MAX_WORKERS; k++)
        if (s->workers[k].state != SCHED_WORKER_STATE_FREE &&
            msg_peer_equal(&s->workers[k].peer, &p))
            return &s->workers[k];
    return NULL;
}

/* One frame of raw bytes, through the same checks as msg_recv. */
static void op_raw(struct sched *s, struct fz *f, bool gw_link, uint64_t now)
{
    size_t n;
    const uint8_t *p = fz_take(f, RAW_MAX, &n);
    struct msg_peer from;
    peer(&from, gw_link ? 'g' : 'w', fz_u8(f));
    ProtobufCMessage *m =
        protobuf_c_message_unpack(&tern__envelope__descriptor, NULL, n, p);
    if (!m)
        return;
    Tern__Envelope *env = (Tern__Envelope *)m;
    if (env->protocol_version == MSG_PROTOCOL_VERSION) {
        if (gw_link)
            sched_gw_handle(s, &from, env, now);
        else
            sched_wk_handle(s, &from, env, now);
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

static void op_submit(struct sched *s, struct fz *f, uint64_t now)
{
    uint8_t pi = fz_u8(f), fl = fz_u8(f);
    uint32_t prompt[MAX_IDS], stops[8];
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__Submit sub = TERN__SUBMIT__INIT;
    Tern__SamplingParams sp = TERN__SAMPLING_PARAMS__INIT;
    env.protocol_version = MSG_PROTOCOL_VERSION;
    env.req_id = fz_u8(f) % 12; /* small id space: duplicates, aborts and results meet */
    env.body_case = TERN__ENVELOPE__BODY_SUBMIT;
    env.submit = &sub;
    sub.n_prompt_ids = fill_ids(f, prompt, MAX_IDS, 1000);
    sub.prompt_ids = prompt;
    sub.n_stop_ids = fill_ids(f, stops, 8, 1000);
    sub.stop_ids = stops;
    if (fl & 1) {
        sub.has_max_tokens = 1;
        sub.max_tokens = fz_u8(f);
    }
    sub.has_ignore_eos = (fl >> 1) & 1;
    sub.ignore_eos = (fl >> 2) & 1;
    if (fl & 8) {
        sub.sampling = &sp;
        sp.has_temperature = 1;
        sp.temperature = (float)fz_u8(f) / 64.0f;
        sp.has_top_k = 1;
        sp.top_k = fz_u8(f);
        sp.has_seed = (fl >> 4) & 1;
        sp.seed = fz_u32(f);
        sp.has_logprobs = 1;
        sp.logprobs = (fl >> 5) & 1;
        sp.has_top_logprobs = 1;
        sp.top_logprobs = fz_u8(f) % 32;
    }
    if (fl & 64)
        sub.model = (char *)((fl & 128) ? "other-model" : "");
    struct msg_peer from;
    peer(&from, 'g', pi);
    sched_gw_handle(s, &from, &env, now);
}

static void op_gw_simple(struct sched *s, struct fz *f, uint64_t now, int what)
{
    uint8_t pi = fz_u8(f);
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__GatewayHello hello = TERN__GATEWAY_HELLO__INIT;
    Tern__Abort ab = TERN__ABORT__INIT;
    Tern__Heartbeat hb = TERN__HEARTBEAT__INIT;
    Tern__StatusRequest st = TERN__STATUS_REQUEST__INIT;
    env.protocol_version = MSG_PROTOCOL_VERSION;
    env.req_id = fz_u8(f) % 12;
    switch (what) {
    case 0:
        env.body_case = TERN__ENVELOPE__BODY_GATEWAY_HELLO;
        env.gateway_hello = &hello;
        hello.name = (char *)"gw";
        hello.has_instance = 1;
        hello.instance = fz_u8(f) % 3;
        break;
    case 1:
        env.body_case = TERN__ENVELOPE__BODY_ABORT;
        env.abort = &ab;
        ab.reason = (char *)"client_gone";
        break;
    case 2:
        env.body_case = TERN__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &hb;
        hb.has_instance = 1;
        hb.instance = fz_u8(f) % 3;
        hb.has_draining = 1;
        hb.draining = fz_u8(f) & 1;
        break;
    default:
        env.body_case = TERN__ENVELOPE__BODY_STATUS_REQUEST;
        env.status_request = &st;
        break;
    }
    struct msg_peer from;
    peer(&from, 'g', pi);
    sched_gw_handle(s, &from, &env, now);
}

static void op_register(struct sched *s, struct fz *f, uint64_t now)
{
    uint8_t pi = fz_u8(f), fl = fz_u8(f);
    uint32_t eos[4];
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__Register reg = TERN__REGISTER__INIT;
    Tern__LoadProgress lp = TERN__LOAD_PROGRESS__INIT;
    Tern__Heartbeat hb = TERN__HEARTBEAT__INIT;
    env.protocol_version = MSG_PROTOCOL_VERSION;
    if (fl % 4 == 1) {
        env.body_case = TERN__ENVELOPE__BODY_LOAD_PROGRESS;
        env.load_progress = &lp;
        lp.worker_id = (char *)"w";
        lp.has_fraction = 1;
        lp.fraction = (float)fz_u8(f) / 200.0f;
        lp.stage = (char *)"weights";
    } else if (fl % 4 == 2) {
        env.body_case = TERN__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &hb;
        hb.has_role = 1;
        hb.role = TERN__ROLE__ROLE_WORKER;
        hb.has_instance = 1;
        hb.instance = fz_u8(f) % 3;
    } else {
        env.body_case = TERN__ENVELOPE__BODY_REGISTER_WORKER;
        env.register_worker = &reg;
        reg.worker_id = (char *)"w";
        reg.model_id = (char *)((fl & 4) ? "other-model" : "qwen3.6");
        reg.has_instance = 1;
        reg.instance = fz_u8(f) % 3;
        /* small capacities (zeros included) so that pools fill up */
        reg.has_max_model_len = 1;
        reg.max_model_len = fz_u8(f);
        reg.has_max_seqs = 1;
        reg.max_seqs = fz_u8(f) % 9;
        reg.has_block_tokens = 1;
        reg.block_tokens = fz_u8(f) % 33;
        reg.has_kv_blocks = 1;
        reg.kv_blocks = fz_u8(f) % 65;
        reg.has_state_slots = 1;
        reg.state_slots = fz_u8(f) % 9;
        reg.has_vocab_size = 1;
        reg.vocab_size = (fl & 8) ? 1000 : fz_u32(f);
        reg.n_eos_ids = fill_ids(f, eos, 4, 1000);
        reg.eos_ids = eos;
        reg.has_max_step_tokens = (fl >> 4) & 1;
        reg.max_step_tokens = fz_u8(f);
        reg.engine = (char *)"fake";
    }
    struct msg_peer from;
    peer(&from, 'w', pi);
    sched_wk_handle(s, &from, &env, now);
}

/* A StepResult for a worker's current (or a nearby) step, about its placed requests. */
static void op_result(struct sched *s, struct fz *f, uint64_t now)
{
    uint8_t pi = fz_u8(f), fl = fz_u8(f);
    struct sched_worker *w = worker_of(s, pi);
    int wi = w ? sched_wk_index(s, w) : -1;
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__StepResult res = TERN__STEP_RESULT__INIT;
    Tern__SeqResult seqs[8], *seqp[8];
    uint32_t toks[8][4];
    Tern__TokenLogprob lps[8][4], *lpp[8][4];
    uint32_t top_ids[4] = {1, 2, 3, 4};
    float top_lp[4] = {-0.1f, -1.0f, -2.0f, -3.0f};
    env.protocol_version = MSG_PROTOCOL_VERSION;
    env.body_case = TERN__ENVELOPE__BODY_STEP_RESULT;
    env.step_result = &res;
    res.has_step_id = 1;
    uint64_t cur = w ? w->step_id : 0;
    switch ((fl >> 4) & 3) {
    case 0:
        res.step_id = cur;
        break;
    case 1:
        res.step_id = cur - 1; /* the plan before (pipelining), or a wrap at 0 */
        break;
    case 2:
        res.step_id = cur + 1; /* a plan never sent */
        break;
    default:
        res.step_id = fz_u32(f);
        break;
    }
    res.has_done = 1;
    res.done = fl & 1;
    size_t ns = 0;
    uint32_t nreq = sched_reqs_count(s->reqs);
    for (uint32_t i = 0; i < nreq && ns < 8; i++) {
        struct sched_req *r = sched_reqs_at(s->reqs, i);
        uint8_t b = fz_u8(f);
        if (!(b & 1) || (r->worker != wi && !(b & 2)))
            continue;
        Tern__SeqResult *q = &seqs[ns];
        *q = (Tern__SeqResult)TERN__SEQ_RESULT__INIT;
        q->has_req_id = 1;
        q->req_id = r->id;
        q->n_token_ids = (b >> 2) % 5;
        for (size_t t = 0; t < q->n_token_ids; t++)
            toks[ns][t] = fz_u8(f) % 1000;
        q->token_ids = toks[ns];
        if (b & 0x20) {
            q->n_logprobs = q->n_token_ids - ((b & 0x80) && q->n_token_ids ? 1 : 0);
            for (size_t t = 0; t < q->n_logprobs; t++) {
                lps[ns][t] = (Tern__TokenLogprob)TERN__TOKEN_LOGPROB__INIT;
                lps[ns][t].has_logprob = 1;
                lps[ns][t].logprob = -0.5f;
                lps[ns][t].n_top_ids = fz_u8(f) % 5;
                lps[ns][t].top_ids = top_ids;
                lps[ns][t].n_top_logprobs = lps[ns][t].n_top_ids;
                lps[ns][t].top_logprobs = top_lp;
                lpp[ns][t] = &lps[ns][t];
            }
            q->logprobs = lpp[ns];
        }
        q->has_stopped = 1;
        q->stopped = (b & 0x40) != 0;
        if ((b & 0xC0) == 0xC0) {
            q->has_error = 1;
            q->error = TERN__ERROR_CODE__ERROR_CODE_INTERNAL;
            q->error_message = (char *)"fuzz";
        }
        q->has_n_computed = 1;
        q->n_computed = r->n_prefilled + r->n_generated + (uint32_t)q->n_token_ids;
        if (fz_u8(f) == 0xFF)
            q->n_computed = fz_u32(f);
        seqp[ns] = q;
        ns++;
    }
    res.n_seqs = ns;
    res.seqs = seqp;
    struct msg_peer from;
    peer(&from, 'w', pi);
    sched_wk_handle(s, &from, &env, now);
}

/* The scheduler's sends, packed as the sockets would pack them, then dropped: the harness runs
 * the scheduler on sched_init_local, not on a ZeroMQ context per input (a context that failed to
 * come up once in ~60,000 inputs aborted the run without any input being at fault). */
static int fz_send(void *ctx, bool to_worker, const struct msg_peer *to,
                   const ProtobufCMessage *msg)
{
    (void)ctx;
    (void)to_worker;
    (void)to;
    const size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return ERR_NOMEM;
    protobuf_c_message_pack(msg, buf);
    free(buf);
    return 0;
}

static void tick(struct sched *s, uint64_t now)
{
    sched_gw_tick(s, now);
    sched_wk_tick(s, now);
    sched_gw_expire_queue(s, now);
    sched_batch_place(s, now);
    sched_batch_plan_all(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    struct sched s;
    const struct sched_transport t = {.send = fz_send, .ctx = NULL};
    if (sched_init_local(&s, &g_cfg, &t) != 0)
        abort();
    uint64_t now = clock_now_ms();
    for (int k = 0; k < MAX_OPS && f.n > 0; k++) {
        uint8_t op = fz_u8(&f);
        switch (op % 12) {
        case 0:
            op_raw(&s, &f, true, now);
            break;
        case 1:
            op_raw(&s, &f, false, now);
            break;
        case 2:
        case 3:
            op_submit(&s, &f, now);
            break;
        case 4:
            op_gw_simple(&s, &f, now, 0);
            break;
        case 5:
            op_gw_simple(&s, &f, now, 1 + (op >> 4) % 3);
            break;
        case 6:
        case 7:
            op_register(&s, &f, now);
            break;
        case 8:
        case 9:
            op_result(&s, &f, now);
            break;
        case 10:
            now += (uint64_t)fz_u8(&f) * 50; /* up to 12.75 s: heartbeats, deaths, expiry */
            tick(&s, now);
            break;
        default:
            if (op & 0x80)
                s.draining = true;
            tick(&s, now);
            break;
        }
        sched_check_pools(&s);
    }
    sched_deinit(&s);
    return 0;
}
