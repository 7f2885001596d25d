/* sched_gw: the gateway link. Gateways are known by their ROUTER routing id; any frame from a
 * new id registers it (so a gateway that reconnects after a scheduler restart is picked up by
 * its next heartbeat). A gateway silent for dead_after_ms is gone: its requests are aborted, and
 * it is sent a Reset in case it was only slow, so that it resubmits them instead of waiting. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "sched_internal.h"

#define SCHED_MAX_STOP_IDS 1024

static int gw_find(struct sched *s, const struct msg_peer *p)
{
    for (int i = 0; i < SCHED_MAX_GATEWAYS; i++)
        if (s->gws[i].used && msg_peer_equal(&s->gws[i].peer, p))
            return i;
    return -1;
}

static int gw_add(struct sched *s, const struct msg_peer *p, uint64_t now_ms)
{
    for (int i = 0; i < SCHED_MAX_GATEWAYS; i++) {
        struct sched_gw *g = &s->gws[i];
        if (g->used)
            continue;
        memset(g, 0, sizeof *g);
        g->used = true;
        g->peer = *p;
        msg_hb_init(&g->hb, (uint32_t)s->cfg->heartbeat_ms, (uint32_t)s->cfg->dead_after_ms,
                    now_ms);
        char hex[2 * MSG_PEER_ID_MAX + 1];
        snprintf(g->name, sizeof g->name, "peer-%s", msg_peer_str(p, hex, sizeof hex));
        LOG_INFO("gateway_joined", "gw=%s", g->name);
        return i;
    }
    return -1;
}

/* Model facts of the ready workers: smallest max_model_len, smallest vocab, a model id. */
static void ready_limits(const struct sched *s, uint32_t *max_len, uint32_t *vocab,
                         const char **model, uint32_t *n_known)
{
    *max_len = 0;
    *vocab = 0;
    *model = "";
    *n_known = 0;
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        const struct sched_worker *w = &s->workers[i];
        if (w->state == SCHED_WORKER_STATE_FREE)
            continue;
        (*n_known)++;
        if (w->state != SCHED_WORKER_STATE_READY)
            continue;
        if (*max_len == 0 || w->max_model_len < *max_len)
            *max_len = w->max_model_len;
        if (*vocab == 0 || w->vocab_size < *vocab)
            *vocab = w->vocab_size;
        *model = w->model_id;
    }
}

static void send_hello_ack(struct sched *s, int gw)
{
    Tern__Envelope env;
    Tern__HelloAck a = TERN__HELLO_ACK__INIT;
    uint32_t max_len, vocab, n_known;
    const char *model;
    ready_limits(s, &max_len, &vocab, &model, &n_known);
    sched_env_init(&env, 0);
    a.has_scheduler_instance = a.has_heartbeat_ms = a.has_dead_after_ms = true;
    a.has_max_model_len = true;
    a.scheduler_instance = s->instance;
    a.heartbeat_ms = (uint32_t)s->cfg->heartbeat_ms;
    a.dead_after_ms = (uint32_t)s->cfg->dead_after_ms;
    a.max_model_len = max_len;
    a.model_id = (char *)model;
    env.body_case = TERN__ENVELOPE__BODY_HELLO_ACK;
    env.hello_ack = &a;
    (void)sched_send_gw(s, gw, &env); /* failure logged there; the gateway says hello again */
}

static void send_status(struct sched *s, int gw, const Tern__StatusRequest *q, uint64_t now_ms)
{
    Tern__Envelope env;
    Tern__StatusSnapshot st = TERN__STATUS_SNAPSHOT__INIT;
    Tern__WorkerStatus ws[SCHED_MAX_WORKERS];
    Tern__WorkerStatus *wp[SCHED_MAX_WORKERS];
    uint32_t max_len, vocab, n_known;
    const char *model;
    ready_limits(s, &max_len, &vocab, &model, &n_known);
    sched_env_init(&env, 0);
    if (q && q->has_cookie) {
        st.has_cookie = true;
        st.cookie = q->cookie;
    }
    st.has_scheduler_instance = st.has_uptime_ms = st.has_draining = true;
    st.scheduler_instance = s->instance;
    st.uptime_ms = now_ms - s->t_start_ms;
    st.draining = s->draining;
    uint32_t n_ws = 0, ready = 0, running = 0, blocks_total = 0, blocks_used = 0, slots_used = 0;
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        struct sched_worker *w = &s->workers[i];
        if (w->state == SCHED_WORKER_STATE_FREE)
            continue;
        Tern__WorkerStatus *x = &ws[n_ws];
        tern__worker_status__init(x);
        x->worker_id = w->id;
        x->model_id = w->model_id;
        x->has_state = x->has_running = x->has_load_fraction = x->has_tokens_generated = true;
        x->state = w->state == SCHED_WORKER_STATE_READY ? TERN__WORKER_STATE__WORKER_STATE_READY
                                                        : TERN__WORKER_STATE__WORKER_STATE_LOADING;
        x->running = w->n_running;
        x->load_fraction = w->state == SCHED_WORKER_STATE_READY ? 1.0f : w->load_fraction;
        x->tokens_generated = w->tokens_generated;
        if (w->pool) {
            x->has_kv_blocks_total = x->has_kv_blocks_used = true;
            x->has_state_slots_total = x->has_state_slots_used = true;
            x->kv_blocks_total = sched_pool_blocks_total(w->pool);
            x->kv_blocks_used = sched_pool_blocks_used(w->pool);
            x->state_slots_total = sched_pool_slots_total(w->pool);
            x->state_slots_used = sched_pool_slots_used(w->pool);
            blocks_total += x->kv_blocks_total;
            blocks_used += x->kv_blocks_used;
            slots_used += x->state_slots_used;
            ready++;
        }
        running += w->n_running;
        wp[n_ws] = x;
        n_ws++;
    }
    uint32_t n_gw = 0;
    for (int i = 0; i < SCHED_MAX_GATEWAYS; i++)
        n_gw += s->gws[i].used ? 1 : 0;
    st.has_workers_ready = st.has_workers_total = st.has_running = st.has_waiting = true;
    st.workers_ready = ready;
    st.workers_total = n_ws;
    st.running = running;
    st.waiting = s->n_queued;
    st.has_kv_blocks_total = st.has_kv_blocks_used = st.has_kv_usage = true;
    st.has_state_slots_used = true;
    st.kv_blocks_total = blocks_total;
    st.kv_blocks_used = blocks_used;
    st.kv_usage = blocks_total ? (float)blocks_used / (float)blocks_total : 0.0f;
    st.state_slots_used = slots_used;
    st.has_requests_submitted = st.has_requests_finished = st.has_requests_aborted = true;
    st.has_requests_failed = st.has_requests_rejected = true;
    st.requests_submitted = s->n_submitted;
    st.requests_finished = s->n_finished;
    st.requests_aborted = s->n_aborted;
    st.requests_failed = s->n_failed;
    st.requests_rejected = s->n_rejected;
    st.has_prompt_tokens_total = st.has_generation_tokens_total = true;
    st.prompt_tokens_total = s->prompt_tokens_total;
    st.generation_tokens_total = s->generation_tokens_total;
    st.has_max_model_len = true;
    st.max_model_len = max_len;
    st.model_id = (char *)model;
    st.n_workers = n_ws;
    st.workers = wp;
    st.has_gateways = st.has_requests_preempted = true;
    st.gateways = n_gw;
    st.requests_preempted = s->n_preempted;
    st.has_spec_drafts = st.has_spec_draft_tokens = st.has_spec_accepted_tokens = true;
    st.spec_drafts = s->spec_drafts;
    st.spec_draft_tokens = s->spec_draft_tokens;
    st.spec_accepted_tokens = s->spec_accepted_tokens;
    st.n_spec_accepted_per_pos = s->n_spec_pos;
    st.spec_accepted_per_pos = s->spec_accepted_per_pos;
    env.body_case = TERN__ENVELOPE__BODY_STATUS;
    env.status = &st;
    (void)sched_send_gw(s, gw, &env); /* failure logged there; the gateway asks again */
}

// ---- submit / abort ----

static const char *check_sampling(const Tern__SamplingParams *p)
{
    if (!p)
        return NULL;
    if (!isfinite(p->temperature) || p->temperature < 0.0f)
        return "temperature must be >= 0";
    if (!isfinite(p->top_p) || p->top_p <= 0.0f || p->top_p > 1.0f)
        return "top_p must be in (0, 1]";
    if (!isfinite(p->min_p) || p->min_p < 0.0f || p->min_p > 1.0f)
        return "min_p must be in [0, 1]";
    if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0.0f)
        return "repetition_penalty must be > 0";
    if (!isfinite(p->presence_penalty) || fabsf(p->presence_penalty) > 2.0f)
        return "presence_penalty must be in [-2, 2]";
    if (!isfinite(p->frequency_penalty) || fabsf(p->frequency_penalty) > 2.0f)
        return "frequency_penalty must be in [-2, 2]";
    if (p->top_logprobs > MSG_MAX_TOP_LOGPROBS)
        return "top_logprobs too large";
    if (p->n_bias_ids != p->n_bias_values || p->n_bias_ids > MSG_MAX_LOGIT_BIAS)
        return "bad logit bias";
    for (size_t i = 0; i < p->n_bias_values; i++)
        if (!isfinite(p->bias_values[i]))
            return "logit bias must be finite";
    return NULL;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void reject(struct sched *s, int gw, uint64_t req_id, Tern__ErrorCode code, const char *msg)
{
    s->n_rejected++;
    LOG_INFO("req_rejected", "req=%016" PRIx64 " code=%d msg=\"%s\"", req_id, (int)code, msg);
    sched_reply_error(s, &s->gw_sock, &s->gws[gw].peer, req_id, code, msg);
}

static void on_submit(struct sched *s, int gw, uint64_t req_id, const Tern__Submit *sub,
                      uint64_t now_ms)
{
    if (req_id == 0) {
        reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_INVALID, "req_id 0");
        return;
    }
    if (sched_reqs_find(s->reqs, req_id)) {
        reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_DUPLICATE, "req_id in use");
        return;
    }
    if (sub->n_prompt_ids == 0) {
        reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_INVALID, "empty prompt");
        return;
    }
    if (sub->n_stop_ids > SCHED_MAX_STOP_IDS) {
        reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_INVALID, "too many stop ids");
        return;
    }
    const char *bad = check_sampling(sub->sampling);
    if (!bad && sub->sampling && sub->sampling->json_replay >= sub->n_prompt_ids &&
        sub->sampling->json_replay > 0)
        bad = "json_replay must be less than the prompt";
    if (bad) {
        reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_INVALID, bad);
        return;
    }
    if (s->draining) {
        reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_DRAINING, "scheduler shutting down");
        return;
    }
    uint32_t max_len, vocab, n_known;
    const char *model;
    ready_limits(s, &max_len, &vocab, &model, &n_known);
    if (n_known == 0) {
        reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_NO_WORKER, "no worker connected");
        return;
    }
    if (max_len && sub->n_prompt_ids >= max_len) {
        reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_TOO_LONG,
               "prompt does not fit max_model_len");
        return;
    }
    for (size_t i = 0; vocab && i < sub->n_prompt_ids; i++)
        if (sub->prompt_ids[i] >= vocab) {
            reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_INVALID,
                   "token id out of vocabulary");
            return;
        }
    for (size_t i = 0; vocab && sub->sampling && i < sub->sampling->n_bias_ids; i++)
        if (sub->sampling->bias_ids[i] >= vocab) {
            reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_INVALID,
                   "logit bias token id out of vocabulary");
            return;
        }
    if (s->n_queued >= (uint32_t)s->cfg->queue_cap) {
        reject(s, gw, req_id, TERN__ERROR_CODE__ERROR_CODE_QUEUE_FULL, "queue full");
        return;
    }

    struct sched_req *r = xcalloc(1, sizeof *r);
    r->id = req_id;
    r->gw = gw;
    r->worker = -1;
    r->fence_worker = -1;
    sched_pool_seq_init(&r->seq);
    r->n_prompt = (uint32_t)sub->n_prompt_ids;
    r->prompt = xmalloc(sizeof(uint32_t) * r->n_prompt);
    memcpy(r->prompt, sub->prompt_ids, sizeof(uint32_t) * r->n_prompt);
    r->n_stop = r->n_stop_user = (uint32_t)sub->n_stop_ids;
    if (r->n_stop) {
        r->stop_ids = xmalloc(sizeof(uint32_t) * r->n_stop);
        memcpy(r->stop_ids, sub->stop_ids, sizeof(uint32_t) * r->n_stop);
    }
    r->ignore_eos = sub->has_ignore_eos && sub->ignore_eos;
    r->max_tokens = sub->has_max_tokens ? sub->max_tokens : 0;
    Tern__SamplingParams defaults = TERN__SAMPLING_PARAMS__INIT;
    const Tern__SamplingParams *p = sub->sampling ? sub->sampling : &defaults;
    r->samp.temperature = p->temperature;
    r->samp.top_p = p->top_p;
    r->samp.top_k = p->top_k;
    r->samp.min_p = p->min_p;
    r->samp.presence_penalty = p->presence_penalty;
    r->samp.frequency_penalty = p->frequency_penalty;
    r->samp.repetition_penalty = p->repetition_penalty;
    r->samp.seed = p->has_seed ? p->seed : splitmix64(req_id);
    r->samp.logprobs = p->has_logprobs && p->logprobs;
    r->samp.top_logprobs = p->top_logprobs;
    r->samp.min_tokens = p->has_min_tokens ? p->min_tokens : 0;
    r->samp.n_bias = (uint32_t)p->n_bias_ids;
    if (r->samp.n_bias) {
        r->samp.bias_ids = xmalloc(sizeof(uint32_t) * r->samp.n_bias);
        r->samp.bias_vals = xmalloc(sizeof(float) * r->samp.n_bias);
        memcpy(r->samp.bias_ids, p->bias_ids, sizeof(uint32_t) * r->samp.n_bias);
        memcpy(r->samp.bias_vals, p->bias_values, sizeof(float) * r->samp.n_bias);
    }
    if (p->json_schema && p->json_schema[0]) {
        r->samp.json_schema = xstrdup(p->json_schema);
        r->samp.json_replay = p->json_replay;
    }
    r->t_submit_ms = now_ms;
    r->t_queued_ms = now_ms;
    if (sched_reqs_add(s->reqs, r) < 0) { /* checked above; cannot happen */
        sched_req_destroy(r);
        return;
    }
    s->gws[gw].n_reqs++;
    s->n_submitted++;
    sched_queue_push_back(s, r);
    LOG_INFO("req_queued", "req=%016" PRIx64 " prompt=%u max_tokens=%u queued=%u", req_id,
             r->n_prompt, r->max_tokens, s->n_queued);
    /* place now, so that a burst of submits is limited by capacity, not by the loop turn */
    sched_batch_place(s, now_ms);
}

static void on_abort(struct sched *s, int gw, uint64_t req_id, const Tern__Abort *a)
{
    struct sched_req *r = sched_reqs_find(s->reqs, req_id);
    if (!r || r->gw != gw) {
        LOG_DEBUG("abort_unknown", "req=%016" PRIx64, req_id); /* raced with its end: normal */
        return;
    }
    LOG_INFO("req_abort", "req=%016" PRIx64 " reason=%s", req_id, a && a->reason ? a->reason : "-");
    sched_req_finish(s, r, TERN__FINISH_REASON__FINISH_REASON_ABORT, -1);
}

void sched_gw_handle(struct sched *s, const struct msg_peer *from, Tern__Envelope *env,
                     uint64_t now_ms)
{
    int gw = gw_find(s, from);
    if (gw < 0) {
        gw = gw_add(s, from, now_ms);
        if (gw < 0) {
            sched_reply_error(s, &s->gw_sock, from, env->req_id,
                              TERN__ERROR_CODE__ERROR_CODE_INTERNAL, "too many gateways");
            return;
        }
    }
    struct sched_gw *g = &s->gws[gw];
    msg_hb_seen(&g->hb, now_ms);
    switch (env->body_case) {
    case TERN__ENVELOPE__BODY_GATEWAY_HELLO:
        if (env->gateway_hello->name && env->gateway_hello->name[0])
            snprintf(g->name, sizeof g->name, "%s", env->gateway_hello->name);
        g->instance = env->gateway_hello->instance;
        LOG_INFO("gateway_hello", "gw=%s instance=%016" PRIx64, g->name, g->instance);
        send_hello_ack(s, gw);
        break;
    case TERN__ENVELOPE__BODY_HEARTBEAT:
        break;
    case TERN__ENVELOPE__BODY_SUBMIT:
        on_submit(s, gw, env->req_id, env->submit, now_ms);
        break;
    case TERN__ENVELOPE__BODY_ABORT:
        on_abort(s, gw, env->req_id, env->abort);
        break;
    case TERN__ENVELOPE__BODY_STATUS_REQUEST:
        send_status(s, gw, env->status_request, now_ms);
        break;
    default:
        LOG_WARN("unexpected_msg", "link=gateway gw=%s req=%016" PRIx64 " body=%d", g->name,
                 env->req_id, (int)env->body_case);
        sched_reply_error(s, &s->gw_sock, from, env->req_id, TERN__ERROR_CODE__ERROR_CODE_PROTO,
                          "unexpected message on the gateway link");
        break;
    }
}

// ---- timers ----

/* Reset to a gateway given up for silence: it may be alive after all (a stall on either side
 * outlasted dead_after_ms), and then its open requests, dropped here, would wait forever. On
 * Reset it parks them and resubmits them after a new hello, as after a scheduler restart. Best
 * effort: a gateway that is really gone cannot get it. */
static void send_gw_reset(struct sched *s, int gw)
{
    Tern__Envelope env;
    Tern__Reset rs = TERN__RESET__INIT;
    sched_env_init(&env, 0);
    rs.reason = (char *)"gateway_lost";
    env.body_case = TERN__ENVELOPE__BODY_RESET;
    env.reset = &rs;
    /* no send_failed warning: gone is the expected case */
    (void)sched_send_raw(s, false, &s->gws[gw].peer, &env);
}

static void gw_lost(struct sched *s, int gw)
{
    struct sched_gw *g = &s->gws[gw];
    uint32_t n = 0;
    if (!g->disconnected)
        send_gw_reset(s, gw);
    for (uint32_t i = sched_reqs_count(s->reqs); i-- > 0;) {
        struct sched_req *r = sched_reqs_at(s->reqs, i);
        if (r->gw != gw)
            continue;
        LOG_INFO("req_abort", "req=%016" PRIx64 " reason=gateway_lost", r->id);
        r->gw = -1; /* nobody to tell */
        s->n_finished++;
        s->n_aborted++;
        sched_req_drop(s, r);
        n++;
    }
    LOG_WARN("gateway_lost", "gw=%s why=%s aborted=%u", g->name,
             g->disconnected ? "disconnected" : "heartbeat_lost", n);
    memset(g, 0, sizeof *g);
}

void sched_gw_tick(struct sched *s, uint64_t now_ms)
{
    for (int i = 0; i < SCHED_MAX_GATEWAYS; i++) {
        struct sched_gw *g = &s->gws[i];
        if (!g->used)
            continue;
        if (msg_hb_is_dead(&g->hb, now_ms)) {
            gw_lost(s, i);
            continue;
        }
        if (!msg_hb_is_due(&g->hb, now_ms))
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
        (void)sched_send_gw(s, i, &env); /* failure logged there; the peer may be gone */
        msg_hb_sent(&g->hb, now_ms);
    }
}

void sched_gw_expire_queue(struct sched *s, uint64_t now_ms)
{
    struct sched_req *r = s->q_head;
    while (r) {
        struct sched_req *next = r->q_next;
        if (r->t_queued_ms == 0) /* back in the queue since the last check */
            r->t_queued_ms = now_ms;
        if (now_ms - r->t_queued_ms >= (uint64_t)s->cfg->queue_timeout_ms)
            sched_req_fail(s, r, TERN__ERROR_CODE__ERROR_CODE_NO_WORKER,
                           "no worker available in time");
        r = next;
    }
}

void sched_gw_send_tokens(struct sched *s, struct sched_req *r, const uint32_t *ids, size_t n,
                          Tern__TokenLogprob **logprobs, size_t n_logprobs, uint32_t index)
{
    if (r->gw < 0 || n == 0)
        return;
    Tern__Envelope env;
    Tern__TokenEvent ev = TERN__TOKEN_EVENT__INIT;
    sched_env_init(&env, r->id);
    ev.n_token_ids = n;
    ev.token_ids = (uint32_t *)ids;
    ev.n_logprobs = n_logprobs;
    ev.logprobs = logprobs;
    ev.has_index = true;
    ev.index = index;
    if (index == 0) {
        ev.has_prompt_tokens = true;
        ev.prompt_tokens = r->n_prompt;
    }
    env.body_case = TERN__ENVELOPE__BODY_TOKEN_EVENT;
    env.token_event = &ev;
    (void)sched_send_gw(s, r->gw, &env); /* failure logged there; the gateway may be gone */
}
