/* sched: init / run loop / deinit, sending helpers and the ways a request ends.
 * The loop: zmq_poll on both ROUTERs (timeout bounded so timers run), handle every waiting
 * frame, then timers (heartbeats, deaths, queue expiry), placement and step plans. */
#include "sched_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <zmq.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "common/xalloc.h"

#define SCHED_POLL_MAX_MS 20 /* timers run at least this often */
#define SCHED_RECV_BATCH 512 /* frames per socket per loop turn */

static uint64_t random_u64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        v = clock_now_ns() ^ ((uint64_t)getpid() << 32);
    return v ? v : 1;
}

void sched_env_init(Tern__Envelope *env, uint64_t req_id)
{
    tern__envelope__init(env);
    env->protocol_version = MSG_PROTOCOL_VERSION;
    env->req_id = req_id;
}

/* One warning per second, with the count of those skipped. */
static bool warn_ok(struct sched *s)
{
    return log_limit_ok(&s->warn, clock_now_ms(), 1000, &s->warn_suppressed);
}

int sched_send_raw(struct sched *s, bool to_worker, const struct msg_peer *to,
                   const Tern__Envelope *env)
{
    if (s->transport.send)
        return s->transport.send(s->transport.ctx, to_worker, to, &env->base);
    return msg_send(to_worker ? &s->wk_sock : &s->gw_sock, to, &env->base);
}

int sched_send_gw(struct sched *s, int gw, const Tern__Envelope *env)
{
    if (gw < 0 || gw >= SCHED_MAX_GATEWAYS || !s->gws[gw].used)
        return ERR_CLOSED;
    int rc = sched_send_raw(s, false, &s->gws[gw].peer, env);
    if (rc == ERR_CLOSED) {
        s->gws[gw].hb.last_seen_ms = 0; /* its connection is gone for good: lost next tick */
        s->gws[gw].disconnected = true;
    }
    if (rc < 0 && warn_ok(s))
        LOG_WARN("send_failed", "link=gateway gw=%s req=%016" PRIx64 " err=%s suppressed=%u",
                 s->gws[gw].name, env->req_id, err_str(rc), s->warn_suppressed);
    return rc;
}

int sched_send_wk(struct sched *s, struct sched_worker *w, const Tern__Envelope *env)
{
    int rc = sched_send_raw(s, true, &w->peer, env);
    if (rc == ERR_CLOSED) {
        w->hb.last_seen_ms = 0; /* a reconnect comes with a new routing id: lost next tick */
        w->disconnected = true;
    }
    if (rc < 0 && warn_ok(s))
        LOG_WARN("send_failed", "link=worker worker=%s req=%016" PRIx64 " err=%s suppressed=%u",
                 w->id, env->req_id, err_str(rc), s->warn_suppressed);
    return rc;
}

void sched_reply_error(struct sched *s, struct msg_sock *sock, const struct msg_peer *to,
                       uint64_t req_id, Tern__ErrorCode code, const char *msg)
{
    Tern__Envelope env;
    Tern__Error e = TERN__ERROR__INIT;
    sched_env_init(&env, req_id);
    e.has_code = true;
    e.code = code;
    e.message = (char *)msg;
    if (code == TERN__ERROR_CODE__ERROR_CODE_QUEUE_FULL ||
        code == TERN__ERROR_CODE__ERROR_CODE_NO_WORKER ||
        code == TERN__ERROR_CODE__ERROR_CODE_DRAINING) {
        e.has_retry_after_ms = true;
        e.retry_after_ms = (uint32_t)s->cfg->retry_after_ms;
    }
    env.body_case = TERN__ENVELOPE__BODY_ERROR;
    env.error = &e;
    int rc = sched_send_raw(s, sock == &s->wk_sock, to, &env);
    if (rc < 0 && warn_ok(s))
        LOG_WARN("send_failed", "req=%016" PRIx64 " err=%s suppressed=%u", req_id, err_str(rc),
                 s->warn_suppressed);
}

void sched_check_pools(struct sched *s)
{
    if (!s->cfg->check_pool)
        return;
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        struct sched_worker *w = &s->workers[i];
        if (w->pool && sched_pool_check(w->pool) < 0) {
            LOG_ERR("pool_invariant", "worker=%s err=%s", w->id, err_str(ERR_STATE));
            abort();
        }
    }
}

// ---- request endings ----

static void release_placement(struct sched *s, struct sched_req *r)
{
    if (r->worker < 0)
        return;
    struct sched_worker *w = &s->workers[r->worker];
    if (w->pool)
        sched_pool_seq_free(w->pool, &r->seq);
    else
        sched_pool_seq_init(&r->seq); /* the pool died with the worker */
    if (w->state == SCHED_WORKER_STATE_READY && r->n_prefilled > 0) {
        if (w->n_frees == w->cap_frees) {
            w->cap_frees = w->cap_frees ? 2 * w->cap_frees : 16;
            w->frees = xrealloc(w->frees, sizeof *w->frees * w->cap_frees);
        }
        w->frees[w->n_frees++] = r->id;
    }
    if (w->n_running)
        w->n_running--;
    r->worker = -1;
    sched_check_pools(s);
}

void sched_req_drop(struct sched *s, struct sched_req *r)
{
    sched_queue_remove(s, r);
    release_placement(s, r);
    if (r->gw >= 0 && s->gws[r->gw].n_reqs)
        s->gws[r->gw].n_reqs--;
    sched_reqs_remove(s->reqs, r);
    sched_req_destroy(r);
}

void sched_req_requeue(struct sched *s, struct sched_req *r)
{
    release_placement(s, r);
    r->t_queued_ms = 0; /* stamped by the next queue-timeout check, on its clock */
    r->n_prefilled = 0;
    r->n_blocks_sent = 0;
    r->n_generated = 0;
    r->n_granted = 0;
    r->n_resume = 0;
    r->n_stop = r->n_stop_user;
    sched_queue_push_front(s, r);
}

/* Back to the head of the queue, to be prefilled again with the prompt and every token already
 * sent, then continued (preemption, and resumption after a worker loss). */
static void req_park(struct sched *s, struct sched_req *r)
{
    release_placement(s, r);
    r->t_queued_ms = 0; /* stamped by the next queue-timeout check, on its clock */
    r->n_resume = r->n_generated;
    free(r->resume_ids);
    r->resume_ids = NULL;
    if (r->n_resume) {
        r->resume_ids = xmalloc(sizeof(uint32_t) * (r->n_prompt + r->n_resume));
        memcpy(r->resume_ids, r->prompt, sizeof(uint32_t) * r->n_prompt);
        memcpy(r->resume_ids + r->n_prompt, r->gen, sizeof(uint32_t) * r->n_resume);
    }
    r->n_prefilled = 0;
    r->n_blocks_sent = 0;
    r->n_granted = 0;
    r->n_stop = r->n_stop_user;
    sched_queue_push_front(s, r);
}

void sched_req_preempt(struct sched *s, struct sched_req *r)
{
    struct sched_worker *w = &s->workers[r->worker];
    LOG_INFO("req_preempt", "req=%016" PRIx64 " worker=%s generated=%u blocks=%u", r->id, w->id,
             r->n_generated, r->seq.n_blocks);
    r->fence_worker = r->worker;
    r->fence_step = w->step_id; /* its plans so far may still report: not back there before */
    s->n_preempted++;
    req_park(s, r);
}

void sched_req_resume(struct sched *s, struct sched_req *r)
{
    LOG_INFO("req_resume", "req=%016" PRIx64 " worker=%s generated=%u", r->id,
             s->workers[r->worker].id, r->n_generated);
    s->n_resumed++;
    req_park(s, r);
}

static void fill_usage(const struct sched_req *r, Tern__Usage *u)
{
    u->has_prompt_tokens = u->has_completion_tokens = u->has_cached_tokens = true;
    u->prompt_tokens = r->n_prompt;
    u->completion_tokens = r->n_generated;
    u->cached_tokens = 0;
}

static const char *reason_name(Tern__FinishReason reason)
{
    switch (reason) {
    case TERN__FINISH_REASON__FINISH_REASON_STOP:
        return "stop";
    case TERN__FINISH_REASON__FINISH_REASON_LENGTH:
        return "length";
    case TERN__FINISH_REASON__FINISH_REASON_ABORT:
        return "abort";
    default:
        return "unspecified";
    }
}

void sched_req_finish(struct sched *s, struct sched_req *r, Tern__FinishReason reason,
                      int stop_token)
{
    uint64_t now = clock_now_ms();
    Tern__Envelope env;
    Tern__Finish f = TERN__FINISH__INIT;
    Tern__Usage u = TERN__USAGE__INIT;
    sched_env_init(&env, r->id);
    fill_usage(r, &u);
    f.has_reason = true;
    f.reason = reason;
    f.usage = &u;
    if (stop_token >= 0) {
        f.has_stop_token_id = true;
        f.stop_token_id = (uint32_t)stop_token;
    }
    if (r->t_placed_ms) {
        f.has_queue_ms = true;
        f.queue_ms = (uint32_t)(r->t_placed_ms - r->t_submit_ms);
    }
    if (r->t_first_ms) {
        f.has_ttft_ms = true;
        f.ttft_ms = (uint32_t)(r->t_first_ms - r->t_submit_ms);
    }
    f.has_total_ms = true;
    f.total_ms = (uint32_t)(now - r->t_submit_ms);
    env.body_case = TERN__ENVELOPE__BODY_FINISH;
    env.finish = &f;
    if (r->gw >= 0)
        (void)sched_send_gw(s, r->gw, &env); /* failure logged there; the request ends anyway */
    s->n_finished++;
    if (reason == TERN__FINISH_REASON__FINISH_REASON_ABORT)
        s->n_aborted++;
    LOG_INFO("req_finish", "req=%016" PRIx64 " reason=%s prompt=%u completion=%u worker=%s ms=%u",
             r->id, reason_name(reason), r->n_prompt, r->n_generated,
             r->worker >= 0 ? s->workers[r->worker].id : "-", f.total_ms);
    sched_req_drop(s, r);
}

void sched_req_fail(struct sched *s, struct sched_req *r, Tern__ErrorCode code, const char *msg)
{
    Tern__Envelope env;
    Tern__Error e = TERN__ERROR__INIT;
    Tern__Usage u = TERN__USAGE__INIT;
    sched_env_init(&env, r->id);
    fill_usage(r, &u);
    e.has_code = true;
    e.code = code;
    e.message = (char *)msg;
    e.usage = &u;
    if (code == TERN__ERROR_CODE__ERROR_CODE_NO_WORKER ||
        code == TERN__ERROR_CODE__ERROR_CODE_DRAINING ||
        code == TERN__ERROR_CODE__ERROR_CODE_QUEUE_FULL) {
        e.has_retry_after_ms = true;
        e.retry_after_ms = (uint32_t)s->cfg->retry_after_ms;
    }
    env.body_case = TERN__ENVELOPE__BODY_ERROR;
    env.error = &e;
    if (r->gw >= 0)
        (void)sched_send_gw(s, r->gw, &env); /* failure logged there; the request ends anyway */
    s->n_failed++;
    LOG_WARN("req_error", "req=%016" PRIx64 " code=%d completion=%u msg=\"%s\"", r->id, (int)code,
             r->n_generated, msg);
    sched_req_drop(s, r);
}

// ---- lifecycle ----

int sched_init(struct sched *s, const struct sched_cfg *cfg)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->instance = random_u64();
    s->t_start_ms = clock_now_ms();
    struct msg_sock_opts o = {.max_bytes = (size_t)cfg->max_msg_bytes};
    s->zctx = msg_context_create();
    if (!s->zctx)
        return -errno;
    const char *eps[] = {cfg->gateway_endpoint, cfg->worker_endpoint};
    int rc = curve_link_init(&s->curve, &cfg->curve, s->zctx, true, eps, 2); /* ZAP first */
    if (rc < 0)
        goto out_ctx; /* logged there: ev=curve_refused */
    o.curve = &s->curve;
    rc = msg_sock_bind(&s->gw_sock, s->zctx, MSG_KIND_ROUTER, cfg->gateway_endpoint,
                           &tern__envelope__descriptor, &o);
    if (rc < 0) {
        LOG_ERR("bind_failed", "endpoint=%s err=%s", cfg->gateway_endpoint, err_str(rc));
        goto out_curve;
    }
    rc = msg_sock_bind(&s->wk_sock, s->zctx, MSG_KIND_ROUTER, cfg->worker_endpoint,
                       &tern__envelope__descriptor, &o);
    if (rc < 0) {
        LOG_ERR("bind_failed", "endpoint=%s err=%s", cfg->worker_endpoint, err_str(rc));
        goto out_gw;
    }
    s->reqs = sched_reqs_create();
    LOG_INFO("listening", "gateway=%s worker=%s instance=%016" PRIx64, cfg->gateway_endpoint,
             cfg->worker_endpoint, s->instance);
    return 0;
out_gw:
    msg_sock_close(&s->gw_sock);
out_curve:
    curve_link_deinit(&s->curve);
out_ctx:
    msg_context_destroy(s->zctx);
    s->zctx = NULL;
    return rc;
}

int sched_init_local(struct sched *s, const struct sched_cfg *cfg, const struct sched_transport *t)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->transport = *t;
    s->instance = random_u64();
    s->t_start_ms = clock_now_ms();
    s->reqs = sched_reqs_create();
    return 0;
}

void sched_turn(struct sched *s, uint64_t now_ms)
{
    sched_gw_tick(s, now_ms);
    sched_wk_tick(s, now_ms);
    sched_gw_expire_queue(s, now_ms);
    sched_batch_place(s, now_ms);
    sched_batch_plan_all(s);
}

void sched_deinit(struct sched *s)
{
    while (sched_reqs_count(s->reqs))
        sched_req_drop(s, sched_reqs_at(s->reqs, 0));
    sched_reqs_destroy(s->reqs);
    s->reqs = NULL;
    for (int i = 0; i < SCHED_MAX_WORKERS; i++) {
        sched_pool_destroy(s->workers[i].pool);
        s->workers[i].pool = NULL;
        free(s->workers[i].eos_ids);
        s->workers[i].eos_ids = NULL;
        free(s->workers[i].frees);
        s->workers[i].frees = NULL;
    }
    msg_sock_close(&s->wk_sock);
    msg_sock_close(&s->gw_sock);
    curve_link_deinit(&s->curve);
    msg_context_destroy(s->zctx);
    s->zctx = NULL;
}

/* Receive and dispatch up to SCHED_RECV_BATCH frames from one socket. */
static void pump(struct sched *s, struct msg_sock *sock, bool is_gw)
{
    for (int i = 0; i < SCHED_RECV_BATCH; i++) {
        struct msg_peer from;
        ProtobufCMessage *m;
        int rc = msg_recv(sock, &from, &m);
        if (rc == ERR_AGAIN)
            return;
        if (rc == ERR_VERSION) {
            if (warn_ok(s))
                LOG_WARN("bad_version", "link=%s suppressed=%u", is_gw ? "gateway" : "worker",
                         s->warn_suppressed);
            sched_reply_error(s, sock, &from, 0, TERN__ERROR_CODE__ERROR_CODE_VERSION,
                              "protocol_version mismatch");
            continue;
        }
        if (rc < 0) {
            if (warn_ok(s))
                LOG_WARN("bad_frame", "link=%s err=%s dropped=%" PRIu64 " suppressed=%u",
                         is_gw ? "gateway" : "worker", err_str(rc), sock->n_dropped,
                         s->warn_suppressed);
            if (rc != ERR_PROTO)
                return;
            continue;
        }
        uint64_t now = clock_now_ms();
        if (is_gw)
            sched_gw_handle(s, &from, (Tern__Envelope *)m, now);
        else
            sched_wk_handle(s, &from, (Tern__Envelope *)m, now);
        msg_free(m);
    }
}

static void drain_start(struct sched *s, uint64_t now)
{
    s->draining = true;
    s->drain_deadline_ms = now + (uint64_t)s->cfg->drain_timeout_ms;
    (void)sdnotify_stopping(); /* no-op outside systemd */
    LOG_INFO("drain_start", "requests=%u queued=%u deadline_ms=%d", sched_reqs_count(s->reqs),
             s->n_queued, s->cfg->drain_timeout_ms);
}

int sched_run(struct sched *s, volatile sig_atomic_t *stop)
{
    zmq_pollitem_t items[2] = {
        {.socket = s->gw_sock.zsock, .events = ZMQ_POLLIN},
        {.socket = s->wk_sock.zsock, .events = ZMQ_POLLIN},
    };
    uint64_t wd_ms = sdnotify_watchdog_ms() / 2, wd_at = 0;
    for (;;) {
        uint64_t now = clock_now_ms();
        if (*stop && !s->draining)
            drain_start(s, now);
        if (s->draining) {
            if (sched_reqs_count(s->reqs) == 0) {
                LOG_INFO("drain_done", "result=clean");
                return 0;
            }
            if (now >= s->drain_deadline_ms) {
                uint32_t n = sched_reqs_count(s->reqs);
                while (sched_reqs_count(s->reqs))
                    sched_req_fail(s, sched_reqs_at(s->reqs, 0),
                                   TERN__ERROR_CODE__ERROR_CODE_DRAINING,
                                   "scheduler shutting down");
                LOG_WARN("drain_done", "result=deadline failed=%u", n);
                return 0;
            }
        }
        if (wd_ms && now - wd_at >= wd_ms) {
            (void)sdnotify_watchdog(); /* no-op outside systemd */
            wd_at = now;
        }
        int rc = zmq_poll(items, 2, SCHED_POLL_MAX_MS);
        if (rc < 0 && errno != EINTR) {
            rc = -errno;
            LOG_ERR("poll_failed", "err=%s", err_str(rc));
            return rc;
        }
        if (rc > 0) {
            if (items[0].revents & ZMQ_POLLIN)
                pump(s, &s->gw_sock, true);
            if (items[1].revents & ZMQ_POLLIN)
                pump(s, &s->wk_sock, false);
        }
        sched_turn(s, clock_now_ms());
    }
}
