/* sim: the in-process transport and input helpers (see sim.h). */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

#include "common/msg.h"
#include "common/xalloc.h"

int sim_outbox_send(void *ctx, bool to_worker, const struct msg_peer *to,
                    const ProtobufCMessage *msg)
{
    struct sim_outbox *o = ctx;
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = xmalloc(len ? len : 1);
    protobuf_c_message_pack(msg, buf);
    Tern__Envelope *env = tern__envelope__unpack(NULL, len, buf);
    free(buf);
    if (!env)
        return -1;
    if (o->n == o->cap) {
        if (o->head > 0) { /* compact first */
            memmove(o->f, o->f + o->head, sizeof *o->f * (o->n - o->head));
            o->n -= o->head;
            o->head = 0;
        }
        if (o->n == o->cap) {
            o->cap = o->cap ? 2 * o->cap : 256;
            o->f = xrealloc(o->f, sizeof *o->f * o->cap);
        }
    }
    o->f[o->n++] = (struct sim_frame){.to_worker = to_worker, .to = *to, .env = env};
    o->n_bytes += len;
    return 0;
}

bool sim_outbox_pop(struct sim_outbox *o, struct sim_frame *out)
{
    if (o->head == o->n) {
        o->head = o->n = 0;
        return false;
    }
    *out = o->f[o->head++];
    return true;
}

void sim_outbox_destroy(struct sim_outbox *o)
{
    struct sim_frame f;
    while (sim_outbox_pop(o, &f))
        tern__envelope__free_unpacked(f.env, NULL);
    free(o->f);
    memset(o, 0, sizeof *o);
}

struct msg_peer sim_peer(const char *name)
{
    struct msg_peer p;
    memset(&p, 0, sizeof p);
    size_t n = strlen(name);
    if (n > MSG_PEER_ID_MAX)
        n = MSG_PEER_ID_MAX;
    memcpy(p.id, name, n);
    p.len = (uint8_t)n;
    return p;
}

static void env_init(Tern__Envelope *env, uint64_t req_id)
{
    tern__envelope__init(env);
    env->protocol_version = MSG_PROTOCOL_VERSION;
    env->req_id = req_id;
}

void sim_register(struct sched *s, const struct msg_peer *peer, const char *worker_id,
                  uint32_t kv_blocks, uint32_t block_tokens, uint32_t slots, uint32_t max_seqs,
                  uint32_t max_model_len, uint32_t vocab, uint32_t eos, uint32_t max_step_tokens,
                  uint64_t now_ms)
{
    sim_register_instance(s, peer, worker_id, 0, kv_blocks, 0, block_tokens, slots, max_seqs,
                          max_model_len, vocab, eos, max_step_tokens, now_ms);
}

void sim_register_instance(struct sched *s, const struct msg_peer *peer, const char *worker_id,
                           uint64_t instance, uint32_t kv_blocks, uint32_t state_blocks,
                           uint32_t block_tokens, uint32_t slots, uint32_t max_seqs,
                           uint32_t max_model_len, uint32_t vocab, uint32_t eos,
                           uint32_t max_step_tokens, uint64_t now_ms)
{
    Tern__Envelope env;
    Tern__Register r = TERN__REGISTER__INIT;
    env_init(&env, 0);
    r.worker_id = (char *)worker_id;
    r.has_instance = instance != 0;
    r.instance = instance;
    r.has_state_blocks = state_blocks != 0;
    r.state_blocks = state_blocks;
    r.model_id = (char *)"sim";
    r.engine = (char *)"sim";
    r.has_max_model_len = r.has_max_seqs = r.has_block_tokens = r.has_kv_blocks = true;
    r.has_state_slots = r.has_vocab_size = r.has_max_step_tokens = true;
    r.max_model_len = max_model_len;
    r.max_seqs = max_seqs;
    r.block_tokens = block_tokens;
    r.kv_blocks = kv_blocks;
    r.state_slots = slots;
    r.vocab_size = vocab;
    r.max_step_tokens = max_step_tokens;
    r.n_eos_ids = 1;
    r.eos_ids = &eos;
    env.body_case = TERN__ENVELOPE__BODY_REGISTER_WORKER;
    env.register_worker = &r;
    sched_wk_handle(s, peer, &env, now_ms);
}

void sim_submit(struct sched *s, const struct msg_peer *gw, uint64_t req_id, const uint32_t *prompt,
                uint32_t n_prompt, uint32_t max_tokens, bool ignore_eos, uint64_t now_ms)
{
    Tern__Envelope env;
    Tern__Submit sub = TERN__SUBMIT__INIT;
    Tern__SamplingParams sp = TERN__SAMPLING_PARAMS__INIT;
    env_init(&env, req_id);
    sp.temperature = 1.0f;
    sp.top_p = 1.0f;
    sp.repetition_penalty = 1.0f;
    sub.sampling = &sp;
    sub.n_prompt_ids = n_prompt;
    sub.prompt_ids = (uint32_t *)prompt;
    if (max_tokens) {
        sub.has_max_tokens = true;
        sub.max_tokens = max_tokens;
    }
    sub.has_ignore_eos = true;
    sub.ignore_eos = ignore_eos;
    env.body_case = TERN__ENVELOPE__BODY_SUBMIT;
    env.submit = &sub;
    sched_gw_handle(s, gw, &env, now_ms);
}

void sim_abort(struct sched *s, const struct msg_peer *gw, uint64_t req_id, uint64_t now_ms)
{
    Tern__Envelope env;
    Tern__Abort a = TERN__ABORT__INIT;
    env_init(&env, req_id);
    a.reason = (char *)"sim";
    env.body_case = TERN__ENVELOPE__BODY_ABORT;
    env.abort = &a;
    sched_gw_handle(s, gw, &env, now_ms);
}

void sim_heartbeat(struct sched *s, const struct msg_peer *peer, bool worker, uint64_t now_ms)
{
    Tern__Envelope env;
    Tern__Heartbeat hb = TERN__HEARTBEAT__INIT;
    env_init(&env, 0);
    hb.has_role = true;
    hb.role = worker ? TERN__ROLE__ROLE_WORKER : TERN__ROLE__ROLE_GATEWAY;
    env.body_case = TERN__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    if (worker)
        sched_wk_handle(s, peer, &env, now_ms);
    else
        sched_gw_handle(s, peer, &env, now_ms);
}

void sim_load_progress(struct sched *s, const struct msg_peer *peer, const char *worker_id,
                       float fraction, uint64_t now_ms)
{
    Tern__Envelope env;
    Tern__LoadProgress lp = TERN__LOAD_PROGRESS__INIT;
    env_init(&env, 0);
    lp.worker_id = (char *)worker_id;
    lp.has_fraction = true;
    lp.fraction = fraction;
    lp.stage = (char *)"sim";
    env.body_case = TERN__ENVELOPE__BODY_LOAD_PROGRESS;
    env.load_progress = &lp;
    sched_wk_handle(s, peer, &env, now_ms);
}
