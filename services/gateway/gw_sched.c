/* gw_sched: DEALER link to the scheduler (proto/tern.proto, common/msg.h) inside the libuv loop.
 * Reads: a uv_poll on ZMQ_FD plus a uv_prepare that drains before every loop wait, so an edge
 * consumed by a send is never missed. A 100 ms tick sends hello (until acked), heartbeats and
 * status requests, and declares the link dead after dead_ms of silence. A Reset from the
 * scheduler (it gave this gateway up) counts as a lost link too: open requests are parked. */
#include "gw_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/curve.h"
#include "common/err.h"
#include "common/log.h"
#include "common/msg.h"
#include "common/xalloc.h"
#include "proto/tern.pb-c.h"

#define CALL_BUCKETS 1024
#define TICK_MS 100
#define HELLO_EVERY_MS 300
#define STATUS_EVERY_MS 200

struct call {
    uint64_t req_id;    // the id at the scheduler (a resubmission takes a fresh one)
    uint64_t client_id; // the id the gateway submitted it with (gw_sched_abort's)
    gw_sched_ev_cb cb;
    void *ctx;
    struct call *next;
    /* what a resubmission needs (owned copies) */
    struct gw_sched_submit sub;
    int32_t *prompt;    // (n_prompt) the original prompt, then the tokens received
    size_t n_prompt0;   // original prompt length
    size_t n_prompt;    // n_prompt0 + tokens received
    size_t cap_prompt;
    uint32_t *stop_ids;
    uint32_t *bias_ids;
    float *bias_vals;
    char *model;
    char *json_schema;
    uint32_t gen_base;  // tokens received before the current submission
    bool parked;        // waiting for a scheduler (link lost)
    uint64_t parked_ms;
};

struct gw_sched {
    uv_loop_t *loop;
    void *zctx;
    struct curve_link curve; /* CURVE keys of the scheduler link */
    struct msg_sock sock;
    bool sock_open;
    uv_poll_t *poll; /* heap: freed in its close callback (fd changes on reopen) */
    uv_prepare_t prepare;
    uv_timer_t tick;
    char endpoint[MSG_ENDPOINT_MAX];
    int dead_ms;
    uint64_t instance;       /* our nonce */
    uint64_t sched_instance; /* scheduler's nonce, 0 = unknown */
    bool acked;              /* HelloAck received from the current instance */
    uint32_t hb_ms;
    uint64_t last_seen_ms, last_hb_ms, last_hello_ms, last_status_ms;
    uint64_t id_prefix, id_next;
    struct gw_sched_status st;
    struct call *calls[CALL_BUCKETS];
    int n_calls;
    int n_parked;
    int resume_ms;
    bool stopped;
};

static void drain(struct gw_sched *s);
static void resume_parked(struct gw_sched *s, uint64_t now);

// ---- call table ----

static struct call **call_slot(struct gw_sched *s, uint64_t id)
{
    struct call **pp = &s->calls[(id * 0x9E3779B97F4A7C15ull) >> 54];
    while (*pp && (*pp)->req_id != id)
        pp = &(*pp)->next;
    return pp;
}

static struct call *call_take(struct gw_sched *s, uint64_t id)
{
    struct call **pp = call_slot(s, id);
    struct call *c = *pp;
    if (c) {
        *pp = c->next;
        s->n_calls--;
        if (c->parked)
            s->n_parked--;
    }
    return c;
}

static void call_free(struct call *c)
{
    if (!c)
        return;
    free(c->prompt);
    free(c->stop_ids);
    free(c->bias_ids);
    free(c->bias_vals);
    free(c->model);
    free(c->json_schema);
    free(c);
}

/* Tokens received: appended to the prompt of a resubmission. */
static void call_add_tokens(struct call *c, const uint32_t *ids, size_t n)
{
    if (c->n_prompt + n > c->cap_prompt) {
        c->cap_prompt = (c->n_prompt + n) * 2;
        c->prompt = xrealloc(c->prompt, sizeof(int32_t) * c->cap_prompt);
    }
    for (size_t i = 0; i < n; i++)
        c->prompt[c->n_prompt++] = (int32_t)ids[i];
}

/* The terminal link_lost error for c (then freed). */
static void call_fail_lost(struct call *c, const char *message)
{
    struct gw_sched_ev ev = {0};
    ev.kind = GW_SCHED_EV_ERROR;
    ev.link_lost = true;
    ev.message = message;
    ev.retry_after_ms = 1000;
    c->cb(c->ctx, &ev);
    call_free(c);
}

// ---- sending ----

static int send_env(struct gw_sched *s, Tern__Envelope *env)
{
    if (!s->sock_open)
        return ERR_CLOSED;
    env->protocol_version = MSG_PROTOCOL_VERSION;
    return msg_send(&s->sock, NULL, &env->base);
}

static void send_hello(struct gw_sched *s)
{
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__GatewayHello h = TERN__GATEWAY_HELLO__INIT;
    char name[64];
    snprintf(name, sizeof(name), "gw-%d", (int)getpid());
    h.name = name;
    h.has_instance = 1;
    h.instance = s->instance;
    env.body_case = TERN__ENVELOPE__BODY_GATEWAY_HELLO;
    env.gateway_hello = &h;
    (void)send_env(s, &env); /* ERR_FULL/closed: retried on the next tick */
}

static void send_heartbeat(struct gw_sched *s, uint64_t now_ms)
{
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__Heartbeat hb = TERN__HEARTBEAT__INIT;
    hb.has_role = 1;
    hb.role = TERN__ROLE__ROLE_GATEWAY;
    hb.has_instance = 1;
    hb.instance = s->instance;
    hb.has_sent_ns = 1;
    hb.sent_ns = now_ms * 1000000ull;
    env.body_case = TERN__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    (void)send_env(s, &env); /* a lost heartbeat is covered by the next one */
}

static void send_status_request(struct gw_sched *s)
{
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__StatusRequest sr = TERN__STATUS_REQUEST__INIT;
    env.body_case = TERN__ENVELOPE__BODY_STATUS_REQUEST;
    env.status_request = &sr;
    (void)send_env(s, &env); /* periodic: the next tick asks again */
}

static void send_abort(struct gw_sched *s, uint64_t req_id, const char *reason)
{
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__Abort ab = TERN__ABORT__INIT;
    ab.reason = (char *)reason;
    env.req_id = req_id;
    env.body_case = TERN__ENVELOPE__BODY_ABORT;
    env.abort = &ab;
    int rc = send_env(s, &env);
    if (rc < 0)
        LOG_WARN("abort_send_failed", "req=%llx err=%s", (unsigned long long)req_id, err_str(rc));
}

// ---- socket lifecycle ----

static void on_poll_closed(uv_handle_t *h)
{
    free(h);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    drain(p->data);
}

static void sock_close(struct gw_sched *s)
{
    if (s->poll) {
        uv_poll_stop(s->poll);
        uv_close((uv_handle_t *)s->poll, on_poll_closed);
        s->poll = NULL;
    }
    if (s->sock_open) {
        msg_sock_close(&s->sock);
        s->sock_open = false;
    }
}

static int sock_open(struct gw_sched *s)
{
    struct msg_sock_opts o = {.max_bytes = 0, .hwm = 10000, .linger_ms = 0, .curve = &s->curve};
    int rc = msg_sock_connect(&s->sock, s->zctx, MSG_KIND_DEALER, s->endpoint,
                              &tern__envelope__descriptor, &o);
    if (rc < 0)
        return rc;
    s->sock_open = true;
    int fd = -1;
    rc = msg_sock_fd(&s->sock, &fd);
    if (rc < 0)
        goto out_close;
    s->poll = xcalloc(1, sizeof(*s->poll));
    rc = uv_poll_init(s->loop, s->poll, fd);
    if (rc < 0) {
        free(s->poll);
        s->poll = NULL;
        goto out_close;
    }
    s->poll->data = s;
    uv_poll_start(s->poll, UV_READABLE, on_poll);
    return 0;
out_close:
    msg_sock_close(&s->sock);
    s->sock_open = false;
    return rc;
}

/* Open requests are parked for a new scheduler (or fail, with resume_ms 0); the socket is
 * replaced so nothing queued reaches a new scheduler. */
static void link_lost(struct gw_sched *s, const char *why)
{
    if (s->acked || s->n_calls)
        LOG_WARN("sched_link_lost", "why=%s open_requests=%d resume_ms=%d", why, s->n_calls,
                 s->resume_ms);
    s->acked = false;
    s->sched_instance = 0;
    memset(&s->st, 0, sizeof(s->st));
    const uint64_t now = clock_now_ms();
    for (int b = 0; b < CALL_BUCKETS; b++) {
        struct call **pp = &s->calls[b];
        while (*pp) {
            struct call *c = *pp;
            if (s->resume_ms > 0) {
                if (!c->parked) {
                    c->parked = true;
                    c->parked_ms = now;
                    s->n_parked++;
                }
                pp = &c->next;
                continue;
            }
            *pp = c->next;
            s->n_calls--;
            call_fail_lost(c, "the scheduler went away");
        }
    }
    sock_close(s);
    int rc = sock_open(s);
    if (rc < 0)
        LOG_ERR("sched_connect_failed", "endpoint=%s err=%s", s->endpoint, err_str(rc));
    s->last_hello_ms = 0;
}

// ---- receiving ----

static void on_instance(struct gw_sched *s, uint64_t inst)
{
    if (inst == 0 || inst == s->sched_instance)
        return;
    if (s->sched_instance != 0) {
        link_lost(s, "scheduler_restarted");
        return;
    }
    s->sched_instance = inst;
}

static void handle(struct gw_sched *s, Tern__Envelope *env, uint64_t now)
{
    s->last_seen_ms = now;
    switch (env->body_case) {
    case TERN__ENVELOPE__BODY_HELLO_ACK: {
        Tern__HelloAck *a = env->hello_ack;
        if (a->has_scheduler_instance && s->sched_instance &&
            a->scheduler_instance != s->sched_instance) {
            link_lost(s, "scheduler_restarted");
            return;
        }
        if (a->has_scheduler_instance)
            s->sched_instance = a->scheduler_instance;
        s->hb_ms = a->has_heartbeat_ms && a->heartbeat_ms ? a->heartbeat_ms : 500;
        if (a->has_max_model_len && a->max_model_len)
            s->st.max_model_len = a->max_model_len;
        if (a->model_id && a->model_id[0])
            snprintf(s->st.model_id, sizeof(s->st.model_id), "%s", a->model_id);
        if (!s->acked)
            LOG_INFO("sched_link_up", "endpoint=%s instance=%llx", s->endpoint,
                     (unsigned long long)s->sched_instance);
        s->acked = true;
        s->st.up = true;
        send_status_request(s);
        break;
    }
    case TERN__ENVELOPE__BODY_HEARTBEAT:
        if (env->heartbeat->has_instance)
            on_instance(s, env->heartbeat->instance);
        break;
    case TERN__ENVELOPE__BODY_RESET:
        /* the scheduler gave this gateway up (silent past its dead_after_ms: a stall on either
         * side) and dropped its requests: park and resubmit them on a new socket, as after a
         * scheduler restart, or they would wait forever */
        link_lost(s, "scheduler_reset");
        return;
    case TERN__ENVELOPE__BODY_STATUS: {
        Tern__StatusSnapshot *st = env->status;
        if (st->has_scheduler_instance)
            on_instance(s, st->scheduler_instance);
        if (!s->acked)
            break;
        s->st.draining = st->draining;
        s->st.workers_ready = st->workers_ready;
        s->st.running = st->running;
        s->st.waiting = st->waiting;
        s->st.kv_usage = st->kv_usage;
        s->st.preemptions = st->has_requests_preempted ? st->requests_preempted : 0;
        s->st.spec_drafts = st->has_spec_drafts ? st->spec_drafts : 0;
        s->st.spec_draft_tokens = st->has_spec_draft_tokens ? st->spec_draft_tokens : 0;
        s->st.spec_accepted_tokens = st->has_spec_accepted_tokens ? st->spec_accepted_tokens : 0;
        s->st.n_spec_pos = 0;
        for (size_t i = 0; i < st->n_spec_accepted_per_pos && i < GW_SCHED_SPEC_POS_MAX; i++)
            s->st.spec_accepted_per_pos[s->st.n_spec_pos++] = st->spec_accepted_per_pos[i];
        if (st->has_max_model_len && st->max_model_len)
            s->st.max_model_len = st->max_model_len;
        if (st->model_id && st->model_id[0])
            snprintf(s->st.model_id, sizeof(s->st.model_id), "%s", st->model_id);
        s->st.snapshot_ms = now;
        break;
    }
    case TERN__ENVELOPE__BODY_TOKEN_EVENT: {
        Tern__TokenEvent *te = env->token_event;
        struct call **pp = call_slot(s, env->req_id);
        if (!*pp) {
            if (env->req_id)
                send_abort(s, env->req_id, "unknown_request");
            break;
        }
        struct call *c = *pp;
        if (c->parked) /* from a scheduler already given up on: not ours any more */
            break;
        call_add_tokens(c, te->token_ids, te->n_token_ids);
        struct gw_sched_ev ev = {0};
        ev.kind = GW_SCHED_EV_TOKENS;
        ev.ids = te->token_ids;
        ev.n_ids = te->n_token_ids;
        ev.logprobs = te->logprobs;
        ev.n_logprobs = te->n_logprobs;
        ev.prompt_tokens = te->has_prompt_tokens ? te->prompt_tokens : 0;
        if (c->gen_base && ev.prompt_tokens) /* a resumed submission: the client's prompt */
            ev.prompt_tokens = (uint32_t)c->n_prompt0;
        c->cb(c->ctx, &ev);
        break;
    }
    case TERN__ENVELOPE__BODY_FINISH: {
        struct call **fp = call_slot(s, env->req_id);
        if (!*fp || (*fp)->parked)
            break;
        struct call *c = call_take(s, env->req_id);
        Tern__Finish *f = env->finish;
        struct gw_sched_ev ev = {0};
        ev.kind = GW_SCHED_EV_FINISH;
        ev.finish_reason = f->has_reason ? (int)f->reason : 0;
        if (f->usage) {
            ev.prompt_tokens = f->usage->prompt_tokens;
            ev.completion_tokens = f->usage->completion_tokens;
            if (c->gen_base) { /* resumed: the client's prompt, all completion tokens */
                ev.prompt_tokens = (uint32_t)c->n_prompt0;
                ev.completion_tokens += c->gen_base;
            }
        }
        ev.queue_ms = f->queue_ms;
        ev.ttft_ms = f->ttft_ms;
        ev.stop_token_id = f->has_stop_token_id ? (int64_t)f->stop_token_id : -1;
        c->cb(c->ctx, &ev);
        call_free(c);
        break;
    }
    case TERN__ENVELOPE__BODY_ERROR: {
        Tern__Error *e = env->error;
        if (env->req_id == 0) {
            LOG_WARN("sched_link_error", "code=%d msg=\"%s\"", (int)e->code,
                     e->message ? e->message : "");
            break;
        }
        struct call **ep = call_slot(s, env->req_id);
        if (!*ep || (*ep)->parked)
            break;
        struct call *c = call_take(s, env->req_id);
        struct gw_sched_ev ev = {0};
        ev.kind = GW_SCHED_EV_ERROR;
        ev.error_code = e->has_code ? (int)e->code : 0;
        ev.message = e->message ? e->message : "scheduler error";
        ev.retry_after_ms = e->retry_after_ms;
        c->cb(c->ctx, &ev);
        call_free(c);
        break;
    }
    default:
        LOG_DEBUG("sched_msg_ignored", "body=%d", (int)env->body_case);
        break;
    }
}

static void drain(struct gw_sched *s)
{
    for (int i = 0; i < 4096 && s->sock_open; i++) {
        ProtobufCMessage *m = NULL;
        int rc = msg_recv(&s->sock, NULL, &m);
        if (rc == ERR_AGAIN)
            return;
        if (rc < 0) {
            LOG_WARN("sched_msg_dropped", "err=%s", err_str(rc));
            continue;
        }
        handle(s, (Tern__Envelope *)m, clock_now_ms());
        msg_free(m);
    }
}

static void on_prepare(uv_prepare_t *p)
{
    drain(p->data);
}

static void on_tick(uv_timer_t *t)
{
    struct gw_sched *s = t->data;
    drain(s);
    /* read the clock after the drain: handle() stamps last_seen_ms with a later clock, and an
     * earlier `now` made now - last_seen_ms wrap (a busy loop declared a live link dead) */
    uint64_t now = clock_now_ms();
    if (!s->sock_open) {
        int rc = sock_open(s);
        if (rc < 0)
            return;
    }
    if (s->n_parked > 0)
        resume_parked(s, now);
    if (!s->acked) {
        if (now - s->last_hello_ms >= HELLO_EVERY_MS) {
            send_hello(s);
            s->last_hello_ms = now;
        }
        return;
    }
    if (now > s->last_seen_ms && now - s->last_seen_ms > (uint64_t)s->dead_ms) {
        link_lost(s, "heartbeat_timeout");
        return;
    }
    if (now - s->last_hb_ms >= s->hb_ms) {
        send_heartbeat(s, now);
        s->last_hb_ms = now;
    }
    if (now - s->last_status_ms >= STATUS_EVERY_MS) {
        send_status_request(s);
        s->last_status_ms = now;
    }
}

// ---- public ----

struct gw_sched *gw_sched_create(uv_loop_t *loop, const char *endpoint, int dead_ms, int resume_ms,
                                 const struct curve_link_cfg *curve)
{
    struct gw_sched *s = xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->dead_ms = dead_ms > 0 ? dead_ms : 3000;
    s->resume_ms = resume_ms > 0 ? resume_ms : 0;
    s->hb_ms = 500;
    snprintf(s->endpoint, sizeof(s->endpoint), "%s", endpoint);
    uint64_t seed = clock_now_ns() ^ ((uint64_t)getpid() << 32);
    seed ^= seed >> 29;
    seed *= 0xBF58476D1CE4E5B9ull;
    seed ^= seed >> 32;
    s->instance = seed | 1;
    s->id_prefix = (seed & 0xffffffull) << 40;
    s->zctx = msg_context_create();
    if (!s->zctx) {
        free(s);
        return NULL;
    }
    static const struct curve_link_cfg no_curve;
    const char *eps[] = {endpoint};
    if (curve_link_init(&s->curve, curve ? curve : &no_curve, s->zctx, false, eps, 1) < 0) {
        msg_context_destroy(s->zctx); /* logged there: ev=curve_refused */
        free(s);
        return NULL;
    }
    int rc = sock_open(s);
    if (rc < 0) {
        LOG_ERR("sched_connect_failed", "endpoint=%s err=%s", endpoint, err_str(rc));
        curve_link_deinit(&s->curve);
        msg_context_destroy(s->zctx);
        free(s);
        return NULL;
    }
    uv_prepare_init(loop, &s->prepare);
    s->prepare.data = s;
    uv_prepare_start(&s->prepare, on_prepare);
    uv_timer_init(loop, &s->tick);
    s->tick.data = s;
    uv_timer_start(&s->tick, on_tick, 0, TICK_MS);
    return s;
}

void gw_sched_stop(struct gw_sched *s)
{
    if (!s || s->stopped)
        return;
    s->stopped = true;
    uv_prepare_stop(&s->prepare);
    uv_timer_stop(&s->tick);
    uv_close((uv_handle_t *)&s->prepare, NULL);
    uv_close((uv_handle_t *)&s->tick, NULL);
    if (s->poll) {
        uv_poll_stop(s->poll);
        uv_close((uv_handle_t *)s->poll, on_poll_closed);
        s->poll = NULL;
    }
}

void gw_sched_destroy(struct gw_sched *s)
{
    if (!s)
        return;
    gw_sched_stop(s);
    uv_run(s->loop, UV_RUN_NOWAIT); /* close callbacks */
    for (int b = 0; b < CALL_BUCKETS; b++)
        while (s->calls[b]) {
            struct call *c = s->calls[b];
            s->calls[b] = c->next;
            call_free(c);
        }
    if (s->sock_open)
        msg_sock_close(&s->sock);
    curve_link_deinit(&s->curve);
    msg_context_destroy(s->zctx);
    free(s);
}

uint64_t gw_sched_next_id(struct gw_sched *s)
{
    return s->id_prefix | (++s->id_next & 0xffffffffffull);
}

/* Pack and send the Submit of sub. */
static int send_submit(struct gw_sched *s, const struct gw_sched_submit *sub)
{
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__Submit m = TERN__SUBMIT__INIT;
    Tern__SamplingParams sp = TERN__SAMPLING_PARAMS__INIT;
    m.n_prompt_ids = sub->n_prompt_ids;
    m.prompt_ids = (uint32_t *)sub->prompt_ids;
    m.has_max_tokens = 1;
    m.max_tokens = sub->max_tokens;
    m.n_stop_ids = sub->n_stop_ids;
    m.stop_ids = (uint32_t *)sub->stop_ids;
    m.has_ignore_eos = sub->ignore_eos;
    m.ignore_eos = sub->ignore_eos;
    m.model = (char *)(sub->model ? sub->model : "");
    sp.has_temperature = 1;
    sp.temperature = sub->temperature;
    sp.has_top_p = 1;
    sp.top_p = sub->top_p;
    sp.has_top_k = 1;
    sp.top_k = sub->top_k;
    sp.has_min_p = 1;
    sp.min_p = sub->min_p;
    sp.has_presence_penalty = 1;
    sp.presence_penalty = sub->presence_penalty;
    sp.has_frequency_penalty = 1;
    sp.frequency_penalty = sub->frequency_penalty;
    sp.has_repetition_penalty = 1;
    sp.repetition_penalty = sub->repetition_penalty;
    sp.has_seed = sub->has_seed;
    sp.seed = sub->seed;
    sp.has_logprobs = sub->logprobs;
    sp.logprobs = sub->logprobs;
    sp.has_top_logprobs = sub->logprobs;
    sp.top_logprobs = sub->top_logprobs;
    sp.has_min_tokens = sub->min_tokens > 0;
    sp.min_tokens = sub->min_tokens;
    sp.n_bias_ids = sp.n_bias_values = sub->n_bias;
    sp.bias_ids = (uint32_t *)sub->bias_ids;
    sp.bias_values = (float *)sub->bias_vals;
    sp.json_schema = (char *)sub->json_schema;
    sp.has_json_replay = sub->json_schema && sub->json_replay;
    sp.json_replay = sub->json_replay;
    m.sampling = &sp;
    env.req_id = sub->req_id;
    env.body_case = TERN__ENVELOPE__BODY_SUBMIT;
    env.submit = &m;
    return send_env(s, &env);
}

int gw_sched_submit(struct gw_sched *s, const struct gw_sched_submit *sub, gw_sched_ev_cb cb,
                    void *ctx)
{
    if (!s->acked || !s->sock_open)
        return ERR_CLOSED;
    int rc = send_submit(s, sub);
    if (rc < 0)
        return rc;
    struct call *c = xcalloc(1, sizeof(*c));
    c->req_id = c->client_id = sub->req_id;
    c->cb = cb;
    c->ctx = ctx;
    c->sub = *sub;
    c->n_prompt0 = c->n_prompt = sub->n_prompt_ids;
    c->cap_prompt = sub->n_prompt_ids + 64;
    c->prompt = xmalloc(sizeof(int32_t) * c->cap_prompt);
    if (sub->n_prompt_ids)
        memcpy(c->prompt, sub->prompt_ids, sizeof(int32_t) * sub->n_prompt_ids);
    if (sub->n_stop_ids) {
        c->stop_ids = xmalloc(sizeof(uint32_t) * sub->n_stop_ids);
        memcpy(c->stop_ids, sub->stop_ids, sizeof(uint32_t) * sub->n_stop_ids);
    }
    if (sub->n_bias) {
        c->bias_ids = xmalloc(sizeof(uint32_t) * sub->n_bias);
        c->bias_vals = xmalloc(sizeof(float) * sub->n_bias);
        memcpy(c->bias_ids, sub->bias_ids, sizeof(uint32_t) * sub->n_bias);
        memcpy(c->bias_vals, sub->bias_vals, sizeof(float) * sub->n_bias);
    }
    c->sub.bias_ids = c->bias_ids;
    c->sub.bias_vals = c->bias_vals;
    c->model = sub->model ? xstrdup(sub->model) : NULL;
    c->sub.stop_ids = c->stop_ids;
    c->sub.model = c->model;
    c->json_schema = sub->json_schema ? xstrdup(sub->json_schema) : NULL;
    c->sub.json_schema = c->json_schema;
    c->sub.prompt_ids = NULL; /* c->prompt, which may move */
    struct call **pp = call_slot(s, sub->req_id);
    c->next = *pp;
    *pp = c;
    s->n_calls++;
    return 0;
}

/* Resubmit the parked requests to the scheduler that is now up with a ready worker (prompt +
 * tokens so far, max_tokens less those), and fail those parked longer than resume_ms. */
static void resume_parked(struct gw_sched *s, uint64_t now)
{
    const bool ready = s->acked && s->sock_open && s->st.workers_ready > 0;
    for (int b = 0; b < CALL_BUCKETS && s->n_parked > 0; b++) {
        struct call **pp = &s->calls[b];
        while (*pp) {
            struct call *c = *pp;
            if (!c->parked) {
                pp = &c->next;
                continue;
            }
            const uint32_t got = (uint32_t)(c->n_prompt - c->n_prompt0);
            const bool done = c->sub.max_tokens > 0 && got >= c->sub.max_tokens;
            if (ready && !done) {
                /* a fresh id: the old scheduler, if it is alive after all, may still hold the
                 * old one until it notices this gateway's old socket is gone */
                struct gw_sched_submit sub = c->sub;
                sub.req_id = gw_sched_next_id(s);
                sub.prompt_ids = c->prompt;
                sub.n_prompt_ids = c->n_prompt;
                if (sub.max_tokens > 0)
                    sub.max_tokens -= got;
                sub.min_tokens = sub.min_tokens > got ? sub.min_tokens - got : 0;
                sub.json_replay += got; /* the grammar replays what the client has */
                if (send_submit(s, &sub) != 0) {
                    pp = &c->next; /* back-pressure: again at the next tick */
                    continue;
                }
                LOG_INFO("req_resubmitted", "id=%llx new_id=%llx prompt_tokens=%zu received=%u",
                         (unsigned long long)c->client_id, (unsigned long long)sub.req_id,
                         c->n_prompt0, got);
                *pp = c->next; /* re-key under the new id */
                c->req_id = sub.req_id;
                c->parked = false;
                c->gen_base = got;
                s->n_parked--;
                struct call **np = call_slot(s, c->req_id);
                c->next = *np;
                *np = c;
                continue;
            }
            if (!done && now - c->parked_ms < (uint64_t)s->resume_ms) {
                pp = &c->next;
                continue;
            }
            *pp = c->next;
            s->n_calls--;
            s->n_parked--;
            if (done) { /* every token arrived, the Finish did not: finish it here */
                struct gw_sched_ev ev = {0};
                ev.kind = GW_SCHED_EV_FINISH;
                ev.finish_reason = TERN__FINISH_REASON__FINISH_REASON_LENGTH;
                ev.prompt_tokens = (uint32_t)c->n_prompt0;
                ev.completion_tokens = got;
                ev.stop_token_id = -1;
                c->cb(c->ctx, &ev);
                call_free(c);
            } else {
                call_fail_lost(c, "the scheduler went away and did not come back in time");
            }
        }
    }
}

void gw_sched_abort(struct gw_sched *s, uint64_t req_id, const char *reason)
{
    struct call *c = call_take(s, req_id);
    for (int b = 0; !c && b < CALL_BUCKETS; b++) /* a resubmitted one has another id now */
        for (struct call *x = s->calls[b]; x && !c; x = x->next)
            if (x->client_id == req_id)
                c = call_take(s, x->req_id);
    if (!c)
        return;
    req_id = c->req_id;
    bool parked = c->parked;
    call_free(c);
    if (!parked) /* a parked one is at no scheduler */
        send_abort(s, req_id, reason);
}

void gw_sched_status_get(const struct gw_sched *s, struct gw_sched_status *out)
{
    *out = s->st;
    out->up = s->acked;
}
