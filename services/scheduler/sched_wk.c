/* sched_wk: the worker link. A worker is known by its ROUTER routing id once it has sent
 * Register; a frame from an unknown id (for example after a scheduler restart) is answered with
 * Reset, and the worker drops its sequences and registers again. A worker silent for
 * dead_after_ms, or one that registers again, is lost: requests with no token sent yet go back
 * to the queue; the others go back too and continue from the tokens already sent (prefilled
 * again on another worker), unless no other worker is ready (a stream would stall until a
 * restart) or --fail-on-worker-loss: then they end with WORKER_LOST. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sched_internal.h"

#define SCHED_MAX_EOS 64
#define SCHED_STATS_MS 10000
#define SCHED_RESET_GAP_MS 1000

int sched_wk_index(const struct sched *s, const struct sched_worker *w)
{
    return (int)(w - s->workers);
}

static struct sched_worker *wk_find(struct sched *s, const struct msg_peer *p)
{
    for (int i = 0; i < SCHED_MAX_WORKERS; i++)
        if (s->workers[i].state != SCHED_WORKER_STATE_FREE &&
            msg_peer_equal(&s->workers[i].peer, p))
            return &s->workers[i];
    return NULL;
}

static struct sched_worker *wk_add(struct sched *s, const struct msg_peer *p, uint64_t now_ms)
{
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        struct sched_worker *w = &s->workers[i];
        if (w->state != SCHED_WORKER_STATE_FREE)
            continue;
        free(w->eos_ids);
        free(w->frees);
        memset(w, 0, sizeof *w);
        w->state = SCHED_WORKER_STATE_LOADING;
        w->peer = *p;
        msg_hb_init(&w->hb, (uint32_t)s->cfg->heartbeat_ms, (uint32_t)s->cfg->dead_after_ms,
                    now_ms);
        char hex[2 * MSG_PEER_ID_MAX + 1];
        snprintf(w->id, sizeof w->id, "peer-%s", msg_peer_str(p, hex, sizeof hex));
        return w;
    }
    return NULL;
}

/* Reset to an unknown peer, at most once per SCHED_RESET_GAP_MS per peer. */
static void send_reset(struct sched *s, const struct msg_peer *p, const char *why, uint64_t now_ms)
{
    size_t oldest = 0;
    for (size_t i = 0; i < ARRAY_LEN(s->reset_peers); i++) {
        if (s->reset_peers[i].len && msg_peer_equal(&s->reset_peers[i], p)) {
            if (now_ms - s->reset_at_ms[i] < SCHED_RESET_GAP_MS)
                return;
            oldest = i;
            break;
        }
        if (s->reset_at_ms[i] < s->reset_at_ms[oldest])
            oldest = i;
    }
    s->reset_peers[oldest] = *p;
    s->reset_at_ms[oldest] = now_ms;
    Tern__Envelope env;
    Tern__Reset rs = TERN__RESET__INIT;
    sched_env_init(&env, 0);
    rs.reason = (char *)why;
    env.body_case = TERN__ENVELOPE__BODY_RESET;
    env.reset = &rs;
    char hex[2 * MSG_PEER_ID_MAX + 1];
    LOG_INFO("worker_reset", "peer=%s reason=%s", msg_peer_str(p, hex, sizeof hex), why);
    int rc = sched_send_raw(s, true, p, &env);
    if (rc < 0)
        LOG_WARN("send_failed", "link=worker op=reset err=%s", err_str(rc));
}

void sched_wk_lost(struct sched *s, struct sched_worker *w, const char *why)
{
    int idx = sched_wk_index(s, w);
    w->state = SCHED_WORKER_STATE_FREE; /* first: no frees are queued for a gone worker */
    uint32_t requeued = 0, resumed = 0, failed = 0, others_ready = 0;
    for (int i = 0; i < SCHED_MAX_WORKERS; i++)
        others_ready += s->workers[i].state == SCHED_WORKER_STATE_READY;
    for (uint32_t i = sched_reqs_count(s->reqs); i-- > 0;) {
        struct sched_req *r = sched_reqs_at(s->reqs, i);
        if (r->worker != idx)
            continue;
        if (r->n_generated == 0) {
            LOG_INFO("req_requeue", "req=%016" PRIx64 " worker=%s", r->id, w->id);
            sched_req_requeue(s, r);
            requeued++;
        } else if (!s->cfg->fail_on_worker_loss && others_ready > 0) {
            sched_req_resume(s, r);
            resumed++;
        } else {
            sched_req_fail(s, r, TERN__ERROR_CODE__ERROR_CODE_WORKER_LOST, "worker lost");
            failed++;
        }
        /* the array changed under i: positions > i were visited, the moved one is among them */
    }
    for (uint32_t i = 0; i < sched_reqs_count(s->reqs); i++) {
        struct sched_req *r = sched_reqs_at(s->reqs, i);
        if (r->fence_worker == idx)
            r->fence_worker = -1; /* nothing more will come from it */
    }
    LOG_WARN("worker_lost", "worker=%s why=%s requeued=%u resumed=%u failed=%u", w->id, why,
             requeued, resumed, failed);
    sched_pool_destroy(w->pool);
    w->pool = NULL;
    free(w->eos_ids);
    w->eos_ids = NULL;
    w->n_eos = 0;
    free(w->frees);
    w->frees = NULL;
    w->n_frees = w->cap_frees = 0;
    w->n_inflight = 0;
    w->n_running = 0;
}

static const char *check_register(const Tern__Register *r)
{
    if (!r->worker_id || !r->worker_id[0])
        return "worker_id missing";
    if (r->max_seqs == 0 || r->block_tokens == 0 || r->kv_blocks == 0)
        return "max_seqs, block_tokens and kv_blocks must be > 0";
    if (r->kv_blocks > MSG_MAX_KV_BLOCKS || r->max_seqs > MSG_MAX_SEQS ||
        r->state_slots > MSG_MAX_SEQS || r->block_tokens > MSG_MAX_BLOCK_TOKENS)
        return "kv_blocks <= 16777216, max_seqs and state_slots <= 4096, block_tokens <= 4096 "
               "required";
    if (r->max_model_len < 2 || r->vocab_size == 0)
        return "max_model_len >= 2 and vocab_size > 0 required";
    if (r->n_eos_ids > SCHED_MAX_EOS)
        return "too many eos ids";
    if (r->has_state_blocks && r->state_blocks > r->kv_blocks)
        return "state_blocks must be <= kv_blocks";
    return NULL;
}

/* Another connection's worker with this id that is alive: heard within two heartbeats and a
 * different process (instance). A restarted worker finds its old entry silent (or its own
 * instance) and replaces it; a second live process with the id (two hosts with the same
 * --worker-id) is refused instead, so the two never knock each other off. */
static struct sched_worker *id_held_live(struct sched *s, const struct sched_worker *w,
                                         const Tern__Register *reg, uint64_t now_ms)
{
    const uint64_t live_ms = 2 * (uint64_t)s->cfg->heartbeat_ms;
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        struct sched_worker *o = &s->workers[i];
        if (o == w || o->state == SCHED_WORKER_STATE_FREE || strcmp(o->id, reg->worker_id) != 0)
            continue;
        if (o->instance != reg->instance && now_ms - o->hb.last_seen_ms < live_ms)
            return o;
    }
    return NULL;
}

static void refuse_duplicate(struct sched *s, const struct msg_peer *from,
                             const Tern__Register *reg, const struct sched_worker *held,
                             uint64_t now_ms)
{
    char msg[320];
    snprintf(msg, sizeof msg,
             "worker id \"%s\" is held by another live worker (instance %016" PRIx64
             "); give each worker its own --worker-id (TERN_WORKER_ID; default: host name + pid)",
             reg->worker_id, held->instance);
    LOG_WARN("register_refused", "worker=%s instance=%016" PRIx64 " held_by=%016" PRIx64
             " held_silent_ms=%" PRIu64 " msg=\"duplicate worker id: a second live worker\"",
             reg->worker_id, reg->instance, held->instance, now_ms - held->hb.last_seen_ms);
    sched_reply_error(s, &s->wk_sock, from, 0, TERN__ERROR_CODE__ERROR_CODE_DUPLICATE, msg);
}

/* A refused registration: the connection's load-progress entry (if any) holds nothing and is
 * dropped quietly. Kept, it would go silent while its worker waits to retry and be logged
 * "worker_lost worker=<its id>", which names a live worker when the id is a duplicate. */
static void forget_loading(struct sched_worker *w)
{
    if (!w || w->state != SCHED_WORKER_STATE_LOADING)
        return;
    LOG_DEBUG("worker_forgotten", "worker=%s why=register_refused", w->id);
    w->state = SCHED_WORKER_STATE_FREE;
}

static void on_register(struct sched *s, struct sched_worker *w, const struct msg_peer *from,
                        const Tern__Register *reg, uint64_t now_ms)
{
    const char *bad = check_register(reg);
    if (bad) {
        LOG_WARN("register_refused", "worker=%s msg=\"%s\"", reg->worker_id ? reg->worker_id : "-",
                 bad);
        sched_reply_error(s, &s->wk_sock, from, 0, TERN__ERROR_CODE__ERROR_CODE_INVALID, bad);
        forget_loading(w);
        return;
    }
    struct sched_worker *held = id_held_live(s, w, reg, now_ms);
    if (held) {
        refuse_duplicate(s, from, reg, held, now_ms);
        forget_loading(w);
        return;
    }
    if (w && w->state == SCHED_WORKER_STATE_READY)
        sched_wk_lost(s, w, "registered_again");
    /* the same worker_id on another connection, silent or the same process: a restart */
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        struct sched_worker *o = &s->workers[i];
        if (o != w && o->state != SCHED_WORKER_STATE_FREE && strcmp(o->id, reg->worker_id) == 0)
            sched_wk_lost(s, o, "replaced");
    }
    if (!w || w->state == SCHED_WORKER_STATE_FREE)
        w = wk_add(s, from, now_ms);
    if (!w) {
        sched_reply_error(s, &s->wk_sock, from, 0, TERN__ERROR_CODE__ERROR_CODE_INTERNAL,
                          "too many workers");
        return;
    }
    uint32_t slots = reg->state_slots ? reg->state_slots : reg->max_seqs;
    if (slots > reg->max_seqs)
        slots = reg->max_seqs;
    uint32_t state_blocks = reg->has_state_blocks ? reg->state_blocks : 0;
    w->pool = sched_pool_create(reg->kv_blocks, reg->block_tokens, slots, state_blocks);
    if (!w->pool) {
        w->state = SCHED_WORKER_STATE_FREE;
        return;
    }
    snprintf(w->id, sizeof w->id, "%s", reg->worker_id);
    snprintf(w->model_id, sizeof w->model_id, "%s", reg->model_id ? reg->model_id : "");
    w->instance = reg->instance;
    w->max_model_len = reg->max_model_len;
    w->max_seqs = reg->max_seqs;
    w->block_tokens = reg->block_tokens;
    w->kv_blocks = reg->kv_blocks;
    w->state_slots = slots;
    w->vocab_size = reg->vocab_size;
    w->max_step_tokens = reg->max_step_tokens ? reg->max_step_tokens : UINT32_MAX;
    w->spec_tokens = reg->has_spec_tokens ? reg->spec_tokens : 0;
    w->n_eos = (uint32_t)reg->n_eos_ids;
    w->eos_ids = w->n_eos ? xmalloc(sizeof(uint32_t) * w->n_eos) : NULL;
    if (w->n_eos)
        memcpy(w->eos_ids, reg->eos_ids, sizeof(uint32_t) * w->n_eos);
    w->state = SCHED_WORKER_STATE_READY;
    w->n_inflight = 0;
    w->step_done = w->step_id;
    w->load_fraction = 1.0f;

    Tern__Envelope env;
    Tern__RegisterAck ack = TERN__REGISTER_ACK__INIT;
    sched_env_init(&env, 0);
    ack.has_scheduler_instance = ack.has_heartbeat_ms = ack.has_dead_after_ms = true;
    ack.scheduler_instance = s->instance;
    ack.heartbeat_ms = (uint32_t)s->cfg->heartbeat_ms;
    ack.dead_after_ms = (uint32_t)s->cfg->dead_after_ms;
    env.body_case = TERN__ENVELOPE__BODY_REGISTER_ACK;
    env.register_ack = &ack;
    (void)sched_send_wk(s, w, &env); /* failure logged there; the worker registers again */
    /* the worker's pool in the terms of docs/KV.md */
    double per_seq = (double)CEIL_DIV((uint64_t)w->max_model_len, w->block_tokens) + state_blocks;
    double conc = (double)w->kv_blocks / per_seq;
    if (conc > slots)
        conc = slots;
    LOG_INFO("worker_ready",
             "worker=%s model=%s engine=%s max_model_len=%u max_seqs=%u "
             "block_tokens=%u kv_blocks=%u slots=%u state=%s state_blocks=%u vocab=%u eos=%u "
             "kv_pool_tokens=%" PRIu64 " max_concurrency=%.2fx",
             w->id, w->model_id, reg->engine ? reg->engine : "-", w->max_model_len, w->max_seqs,
             w->block_tokens, w->kv_blocks, slots, state_blocks ? "pool" : "slots", state_blocks,
             w->vocab_size, w->n_eos, sched_pool_seq_tokens_max(w->pool), conc);
}

static bool is_stop(const struct sched_req *r, uint32_t tok)
{
    for (uint32_t i = 0; i < r->n_stop; i++)
        if (r->stop_ids[i] == tok)
            return true;
    return false;
}

static void on_seq_result(struct sched *s, struct sched_worker *w, const Tern__SeqResult *sr,
                          uint64_t now_ms)
{
    struct sched_req *r = sched_reqs_find(s->reqs, sr->req_id);
    if (!r || r->worker != sched_wk_index(s, w))
        return; /* ended (aborted) while the plan ran: its tokens are dropped */
    if (sr->has_error && sr->error != TERN__ERROR_CODE__ERROR_CODE_UNSPECIFIED) {
        sched_req_fail(s, r, TERN__ERROR_CODE__ERROR_CODE_INTERNAL,
                       sr->error_message ? sr->error_message : "worker error");
        return;
    }
    uint32_t first_index = r->n_generated;
    size_t count = 0;
    int stop_tok = -1;
    Tern__FinishReason reason = TERN__FINISH_REASON__FINISH_REASON_UNSPECIFIED;
    for (size_t i = 0; i < sr->n_token_ids; i++) {
        uint32_t tok = sr->token_ids[i];
        if (r->state == SCHED_REQ_STATE_PREFILL) {
            r->state = SCHED_REQ_STATE_DECODE; /* sampled after the last prefill chunk */
            if (!r->t_first_ms)
                r->t_first_ms = now_ms;
        } else if (r->n_granted) {
            r->n_granted--; /* every later token comes from a decode grant */
        }
        if (r->n_generated == r->cap_gen) {
            r->cap_gen = r->cap_gen ? 2 * r->cap_gen : 64;
            r->gen = xrealloc(r->gen, sizeof(uint32_t) * r->cap_gen);
        }
        r->gen[r->n_generated++] = tok;
        count++;
        if (is_stop(r, tok)) {
            reason = TERN__FINISH_REASON__FINISH_REASON_STOP;
            stop_tok = (int)tok;
            break;
        }
        if (r->n_generated >= r->max_new) {
            reason = TERN__FINISH_REASON__FINISH_REASON_LENGTH;
            break;
        }
    }
    size_t n_lp = sr->n_logprobs < count ? sr->n_logprobs : count;
    sched_gw_send_tokens(s, r, sr->token_ids, count, sr->logprobs, n_lp, first_index);
    s->generation_tokens_total += count;
    w->tokens_generated += count;
    if (reason != TERN__FINISH_REASON__FINISH_REASON_UNSPECIFIED)
        sched_req_finish(s, r, reason, stop_tok);
    else if (sr->has_stopped && sr->stopped)
        sched_req_fail(s, r, TERN__ERROR_CODE__ERROR_CODE_INTERNAL,
                       "worker stopped the sequence early");
}

static void on_step_result(struct sched *s, struct sched_worker *w, const Tern__StepResult *res,
                           uint64_t now_ms)
{
    /* results come in plan order: only the oldest plan in flight may report */
    if (w->n_inflight == 0 || res->step_id != w->step_done + 1) {
        LOG_WARN("stale_result", "worker=%s step=%" PRIu64 " expected=%" PRIu64, w->id,
                 res->step_id, w->step_done + 1);
        return;
    }
    uint32_t k = (uint32_t)(res->step_id % SCHED_PLANS_INFLIGHT);
    if (!w->plan_first_seen[k]) {
        w->plan_first_seen[k] = true;
        w->stat_rtt_us += (clock_now_ns() - w->plan_sent_ns[k]) / 1000;
        w->stat_plans++;
    }
    if (res->has_idle_us)
        w->stat_idle_us += res->idle_us;
    s->spec_drafts += res->has_spec_drafts ? res->spec_drafts : 0;
    s->spec_draft_tokens += res->has_spec_draft_tokens ? res->spec_draft_tokens : 0;
    s->spec_accepted_tokens += res->has_spec_accepted_tokens ? res->spec_accepted_tokens : 0;
    for (size_t i = 0; i < res->n_spec_accepted_per_pos && i < SCHED_SPEC_POS_MAX; i++) {
        s->spec_accepted_per_pos[i] += res->spec_accepted_per_pos[i];
        if (s->n_spec_pos < i + 1)
            s->n_spec_pos = (uint32_t)i + 1;
    }
    for (size_t i = 0; i < res->n_seqs; i++)
        on_seq_result(s, w, res->seqs[i], now_ms);
    if (res->has_done && res->done) {
        w->step_done = res->step_id;
        w->n_inflight--;
    }
}

void sched_wk_handle(struct sched *s, const struct msg_peer *from, Tern__Envelope *env,
                     uint64_t now_ms)
{
    struct sched_worker *w = wk_find(s, from);
    if (w)
        msg_hb_seen(&w->hb, now_ms);
    switch (env->body_case) {
    case TERN__ENVELOPE__BODY_REGISTER_WORKER:
        on_register(s, w, from, env->register_worker, now_ms);
        return;
    case TERN__ENVELOPE__BODY_LOAD_PROGRESS:
        if (!w)
            w = wk_add(s, from, now_ms);
        if (w && w->state == SCHED_WORKER_STATE_LOADING) {
            const Tern__LoadProgress *lp = env->load_progress;
            if (lp->worker_id && lp->worker_id[0])
                snprintf(w->id, sizeof w->id, "%s", lp->worker_id);
            w->load_fraction = lp->fraction;
            LOG_DEBUG("worker_loading", "worker=%s fraction=%.3f stage=%s", w->id,
                      (double)lp->fraction, lp->stage ? lp->stage : "-");
        }
        return;
    default:
        break;
    }
    if (!w || w->state != SCHED_WORKER_STATE_READY) {
        if (!w)
            send_reset(s, from, "unknown_worker", now_ms);
        return;
    }
    switch (env->body_case) {
    case TERN__ENVELOPE__BODY_HEARTBEAT:
        break;
    case TERN__ENVELOPE__BODY_STEP_RESULT:
        on_step_result(s, w, env->step_result, now_ms);
        break;
    default:
        LOG_WARN("unexpected_msg", "link=worker worker=%s req=%016" PRIx64 " body=%d", w->id,
                 env->req_id, (int)env->body_case);
        break;
    }
}

void sched_wk_tick(struct sched *s, uint64_t now_ms)
{
    bool stats = now_ms - s->t_stats_ms >= SCHED_STATS_MS;
    if (stats)
        s->t_stats_ms = now_ms;
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        struct sched_worker *w = &s->workers[i];
        if (w->state == SCHED_WORKER_STATE_FREE)
            continue;
        if (msg_hb_is_dead(&w->hb, now_ms)) {
            sched_wk_lost(s, w, w->disconnected ? "disconnected" : "heartbeat_lost");
            continue;
        }
        if (stats && w->stat_plans) {
            LOG_INFO("step_stats",
                     "worker=%s plans=%" PRIu64 " rtt_us_avg=%" PRIu64 " idle_us_avg=%" PRIu64
                     " running=%u",
                     w->id, w->stat_plans, w->stat_rtt_us / w->stat_plans,
                     w->stat_idle_us / w->stat_plans, w->n_running);
            w->stat_plans = w->stat_rtt_us = w->stat_idle_us = 0;
        }
        if (!msg_hb_is_due(&w->hb, now_ms))
            continue;
        Tern__Envelope env;
        Tern__Heartbeat hb = TERN__HEARTBEAT__INIT;
        sched_env_init(&env, 0);
        hb.has_role = hb.has_instance = hb.has_sent_ns = hb.has_draining = true;
        hb.role = TERN__ROLE__ROLE_SCHEDULER;
        hb.instance = s->instance;
        hb.sent_ns = clock_now_ns();
        hb.draining = s->draining;
        env.body_case = TERN__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &hb;
        (void)sched_send_wk(s, w, &env); /* failure logged there; death is by silence */
        msg_hb_sent(&w->hb, now_ms);
    }
}
