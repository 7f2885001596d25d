/* wk_link: the worker's link thread: DEALER to the scheduler, PAIR to the exec thread.
 * States: LOADING -> REGISTERING -> READY; a Reset, a heartbeat with a new scheduler instance,
 * or scheduler silence sends it through RESETTING (exec drops every sequence) back to
 * REGISTERING. Register is repeated every heartbeat interval until acknowledged. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <zmq.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "proto/tern.pb-c.h"
#include "wk.h"

#define WK_POLL_MAX_MS 50

static void env_init(Tern__Envelope *env, uint64_t req_id)
{
    tern__envelope__init(env);
    env->protocol_version = MSG_PROTOCOL_VERSION;
    env->req_id = req_id;
}

static int link_send(struct wk *w, Tern__Envelope *env)
{
    int rc = msg_send(&w->link, NULL, &env->base);
    if (rc < 0 && rc != ERR_FULL) /* ERR_FULL: not connected (ZMQ_IMMEDIATE); retried */
        LOG_WARN("send_failed", "link=scheduler body=%d err=%s", (int)env->body_case, err_str(rc));
    return rc;
}

static void send_register(struct wk *w, uint64_t now_ms)
{
    const struct wk_engine_info *in = &w->info;
    Tern__Envelope env;
    Tern__Register r = TERN__REGISTER__INIT;
    env_init(&env, 0);
    r.worker_id = (char *)w->cfg->worker_id;
    r.model_id = (char *)in->model_id;
    r.engine = w->engine_name;
    r.has_instance = true;
    r.instance = w->instance;
    r.has_max_model_len = r.has_max_seqs = r.has_block_tokens = r.has_kv_blocks = true;
    r.has_kv_bytes = r.has_state_slots = r.has_vocab_size = r.has_max_step_tokens = true;
    r.max_model_len = in->max_model_len;
    r.max_seqs = in->n_slots;
    r.block_tokens = in->block_tokens;
    r.kv_blocks = in->kv_blocks;
    r.kv_bytes = in->kv_bytes;
    r.state_slots = in->n_slots;
    r.has_state_blocks = in->state_blocks > 0;
    r.state_blocks = in->state_blocks;
    r.vocab_size = in->vocab_size;
    r.max_step_tokens = in->max_step_tokens;
    r.has_spec_tokens = true;
    r.spec_tokens = in->spec_k;
    r.n_eos_ids = in->n_eos;
    r.eos_ids = (uint32_t *)in->eos_ids;
    env.body_case = TERN__ENVELOPE__BODY_REGISTER_WORKER;
    env.register_worker = &r;
    /* not connected yet (ZMQ_IMMEDIATE): retry at the next loop turn instead of a heartbeat later
     */
    w->register_failed = link_send(w, &env) < 0;
    w->register_at_ms = now_ms;
    if (w->state != WK_LINK_STATE_REGISTERING || !w->registering_since_ms) {
        w->registering_since_ms = now_ms;
        w->register_warned_ms = now_ms;
    }
    w->state = WK_LINK_STATE_REGISTERING;
}

static void start_reset(struct wk *w, const char *why)
{
    if (w->state == WK_LINK_STATE_LOADING || w->state == WK_LINK_STATE_RESETTING)
        return;
    LOG_INFO("reset", "why=%s", why);
    Tern__Envelope env;
    Tern__Reset rs = TERN__RESET__INIT;
    env_init(&env, 0);
    rs.reason = (char *)why;
    env.body_case = TERN__ENVELOPE__BODY_RESET;
    env.reset = &rs;
    if (msg_send(&w->pipe, NULL, &env.base) < 0)
        LOG_ERR("pipe_send_failed", "op=reset");
    w->state = WK_LINK_STATE_RESETTING;
}

static void send_heartbeat(struct wk *w, uint64_t now_ms)
{
    Tern__Envelope env;
    Tern__Heartbeat hb = TERN__HEARTBEAT__INIT;
    env_init(&env, 0);
    hb.has_role = hb.has_instance = hb.has_sent_ns = true;
    hb.role = TERN__ROLE__ROLE_WORKER;
    hb.instance = w->instance;
    hb.sent_ns = clock_now_ns();
    env.body_case = TERN__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    (void)link_send(w, &env); /* logged there; death is by silence */
    msg_hb_sent(&w->hb, now_ms);
}

/* Not registered for a while: one line every WK_REGISTER_WARN_MS that says why, if known. */
static void warn_registering(struct wk *w, uint64_t now_ms)
{
    char status[400];
    w->register_warned_ms = now_ms;
    if (w->register_refusal[0])
        snprintf(status, sizeof status, "not registered: the scheduler refuses: %s",
                 w->register_refusal);
    else
        snprintf(status, sizeof status,
                 "not registered: no answer from the scheduler at %s (not running there, a "
                 "wrong endpoint, or this worker's CURVE key is not on its allow-list)",
                 w->cfg->scheduler_endpoint);
    LOG_WARN("register_waiting", "worker=%s waited_ms=%" PRIu64 " connected=%s msg=\"%s\"",
             w->cfg->worker_id, now_ms - w->registering_since_ms,
             w->register_failed ? "no" : "yes", status);
    (void)sdnotify_status(status);
}

// ---- frames from the scheduler ----

static void on_link(struct wk *w, Tern__Envelope *env, uint64_t now_ms)
{
    msg_hb_seen(&w->hb, now_ms);
    switch (env->body_case) {
    case TERN__ENVELOPE__BODY_REGISTER_ACK: {
        const Tern__RegisterAck *a = env->register_ack;
        if (w->state != WK_LINK_STATE_REGISTERING)
            break;
        w->sched_instance = a->scheduler_instance;
        if (a->has_heartbeat_ms && a->heartbeat_ms && a->has_dead_after_ms &&
            a->dead_after_ms >= 2 * a->heartbeat_ms) {
            w->hb.interval_ms = a->heartbeat_ms;
            w->hb.dead_after_ms = a->dead_after_ms;
        }
        w->state = WK_LINK_STATE_READY;
        w->registering_since_ms = 0;
        w->register_refusal[0] = '\0';
        LOG_INFO("registered", "scheduler_instance=%016" PRIx64 " heartbeat_ms=%u",
                 w->sched_instance, w->hb.interval_ms);
        if (!w->ready_sent) { /* systemd: active only once the scheduler took us */
            (void)sdnotify_ready(); /* no-op outside systemd */
            w->ready_sent = true;
        }
        (void)sdnotify_status("registered with the scheduler");
        break;
    }
    case TERN__ENVELOPE__BODY_HEARTBEAT:
        if (w->state == WK_LINK_STATE_READY && env->heartbeat->has_instance &&
            env->heartbeat->instance != w->sched_instance)
            start_reset(w, "scheduler_restarted");
        break;
    case TERN__ENVELOPE__BODY_RESET:
        start_reset(w, env->reset->reason ? env->reset->reason : "scheduler_reset");
        break;
    case TERN__ENVELOPE__BODY_STEP_PLAN:
        if (w->state != WK_LINK_STATE_READY)
            break; /* a plan from before a reset: the scheduler forgets it too */
        if (msg_send(&w->pipe, NULL, &env->base) < 0)
            LOG_ERR("pipe_send_failed", "op=plan");
        w->n_plans++;
        break;
    case TERN__ENVELOPE__BODY_ERROR:
        if (w->state == WK_LINK_STATE_REGISTERING && env->req_id == 0) {
            /* Register refused (a duplicate id, a bad capacity): say why, retry slowly */
            snprintf(w->register_refusal, sizeof w->register_refusal, "%s",
                     env->error->message ? env->error->message : "refused");
            LOG_ERR("register_refused", "worker=%s code=%d msg=\"%s\"", w->cfg->worker_id,
                    (int)env->error->code, w->register_refusal);
            (void)sdnotify_status(w->register_refusal);
            w->register_at_ms = now_ms + WK_REGISTER_RETRY_REFUSED_MS;
            break;
        }
        LOG_WARN("scheduler_error", "req=%016" PRIx64 " code=%d msg=\"%s\"", env->req_id,
                 (int)env->error->code, env->error->message ? env->error->message : "");
        break;
    default:
        LOG_WARN("unexpected_msg", "link=scheduler body=%d", (int)env->body_case);
        break;
    }
}

/* Frames from the exec thread. Returns < 0 on a fatal one (engine load failed). */
static int on_pipe(struct wk *w, Tern__Envelope *env, uint64_t now_ms)
{
    switch (env->body_case) {
    case TERN__ENVELOPE__BODY_LOAD_PROGRESS:
        if (w->state == WK_LINK_STATE_LOADING)
            (void)link_send(w, env); /* logged there; progress is informational */
        break;
    case TERN__ENVELOPE__BODY_REGISTER_WORKER: {
        const Tern__Register *r = env->register_worker;
        struct wk_engine_info *in = &w->info;
        memset(in, 0, sizeof *in);
        snprintf(in->model_id, sizeof in->model_id, "%s", r->model_id ? r->model_id : "");
        snprintf(w->engine_name, sizeof w->engine_name, "%s", r->engine ? r->engine : "");
        in->vocab_size = r->vocab_size;
        in->max_model_len = r->max_model_len;
        in->n_slots = r->max_seqs;
        in->block_tokens = r->block_tokens;
        in->kv_blocks = r->kv_blocks;
        in->state_blocks = r->has_state_blocks ? r->state_blocks : 0;
        in->kv_bytes = r->kv_bytes;
        in->max_step_tokens = r->max_step_tokens;
        in->spec_k = r->has_spec_tokens ? r->spec_tokens : 0;
        for (size_t i = 0; i < r->n_eos_ids && i < WK_ENGINE_MAX_EOS; i++)
            in->eos_ids[in->n_eos++] = r->eos_ids[i];
        LOG_INFO("engine_loaded",
                 "engine=%s model=%s vocab=%u max_model_len=%u slots=%u "
                 "kv_blocks=%u state_blocks=%u",
                 w->engine_name, in->model_id, in->vocab_size, in->max_model_len, in->n_slots,
                 in->kv_blocks, in->state_blocks);
        (void)sdnotify_status("loaded; registering with the scheduler");
        send_register(w, now_ms); /* READY=1 comes with the RegisterAck */
        break;
    }
    case TERN__ENVELOPE__BODY_STEP_RESULT:
        if (w->state == WK_LINK_STATE_READY)
            (void)link_send(w, env); /* logged there; a lost result = the scheduler times out */
        w->n_results++;
        break;
    case TERN__ENVELOPE__BODY_RESET:
        if (w->state == WK_LINK_STATE_RESETTING)
            send_register(w, now_ms);
        break;
    case TERN__ENVELOPE__BODY_ERROR:
        LOG_ERR("engine_failed", "msg=\"%s\"", env->error->message ? env->error->message : "");
        return ERR_STATE;
    default:
        break;
    }
    return 0;
}

// ---- lifecycle ----

int wk_init(struct wk *w, const struct wk_cfg *cfg)
{
    memset(w, 0, sizeof *w);
    atomic_init(&w->exec_stop, false);
    w->cfg = cfg;
    if (getrandom(&w->instance, sizeof w->instance, 0) != (ssize_t)sizeof w->instance)
        w->instance = clock_now_ns() ^ (uint64_t)getpid();
    w->zctx = msg_context_create();
    if (!w->zctx)
        return -errno;
    const char *eps[] = {cfg->scheduler_endpoint};
    int rc = curve_link_init(&w->curve, &cfg->curve, w->zctx, false, eps, 1);
    if (rc < 0)
        goto out_ctx; /* logged there: ev=curve_refused */
    struct msg_sock_opts o = {.max_bytes = (size_t)cfg->max_msg_bytes, .immediate = true,
                              .curve = &w->curve};
    rc = msg_sock_connect(&w->link, w->zctx, MSG_KIND_DEALER, cfg->scheduler_endpoint,
                              &tern__envelope__descriptor, &o);
    if (rc < 0) {
        LOG_ERR("connect_failed", "endpoint=%s err=%s", cfg->scheduler_endpoint, err_str(rc));
        goto out_curve;
    }
    snprintf(w->pipe_endpoint, sizeof w->pipe_endpoint, "inproc://wk-exec-%016" PRIx64,
             w->instance);
    struct msg_sock_opts po = {.max_bytes = (size_t)cfg->max_msg_bytes};
    rc = msg_sock_bind(&w->pipe, w->zctx, MSG_KIND_PAIR, w->pipe_endpoint,
                       &tern__envelope__descriptor, &po);
    if (rc < 0)
        goto out_link;
    w->exec = wk_exec_create(cfg, w->zctx, w->pipe_endpoint, &w->exec_stop);
    if (!w->exec) {
        rc = ERR_NOMEM;
        goto out_pipe;
    }
    rc = -pthread_create(&w->exec_thread, NULL, wk_exec_main, w->exec);
    if (rc < 0)
        goto out_exec;
    w->exec_started = true;
    msg_hb_init(&w->hb, (uint32_t)cfg->heartbeat_ms, (uint32_t)cfg->dead_after_ms, clock_now_ms());
    w->state = WK_LINK_STATE_LOADING;
    LOG_INFO("connecting", "endpoint=%s worker=%s engine=%s instance=%016" PRIx64,
             cfg->scheduler_endpoint, cfg->worker_id, cfg->engine, w->instance);
    return 0;
out_exec:
    wk_exec_destroy(w->exec);
    w->exec = NULL;
out_pipe:
    msg_sock_close(&w->pipe);
out_link:
    msg_sock_close(&w->link);
out_curve:
    curve_link_deinit(&w->curve);
out_ctx:
    msg_context_destroy(w->zctx);
    w->zctx = NULL;
    return rc;
}

void wk_deinit(struct wk *w)
{
    if (w->exec_started) {
        atomic_store(&w->exec_stop, true);
        pthread_join(w->exec_thread, NULL);
        w->exec_started = false;
    }
    wk_exec_destroy(w->exec);
    w->exec = NULL;
    msg_sock_close(&w->pipe);
    msg_sock_close(&w->link);
    curve_link_deinit(&w->curve);
    msg_context_destroy(w->zctx);
    w->zctx = NULL;
}

int wk_run(struct wk *w, volatile sig_atomic_t *stop)
{
    zmq_pollitem_t items[2] = {
        {.socket = w->link.zsock, .events = ZMQ_POLLIN},
        {.socket = w->pipe.zsock, .events = ZMQ_POLLIN},
    };
    uint64_t wd_ms = sdnotify_watchdog_ms() / 2, wd_at = 0;
    while (!*stop) {
        uint64_t now = clock_now_ms();
        if (wd_ms && now - wd_at >= wd_ms) {
            (void)sdnotify_watchdog(); /* no-op outside systemd */
            wd_at = now;
        }
        int rc = zmq_poll(items, 2, WK_POLL_MAX_MS);
        if (rc < 0 && errno != EINTR) {
            rc = -errno;
            LOG_ERR("poll_failed", "err=%s", err_str(rc));
            return rc;
        }
        ProtobufCMessage *m;
        while ((rc = msg_recv(&w->pipe, NULL, &m)) != ERR_AGAIN) {
            if (rc < 0)
                break;
            rc = on_pipe(w, (Tern__Envelope *)m, clock_now_ms());
            msg_free(m);
            if (rc < 0)
                return rc;
        }
        while ((rc = msg_recv(&w->link, NULL, &m)) != ERR_AGAIN) {
            if (rc < 0) {
                LOG_WARN("bad_frame", "link=scheduler err=%s", err_str(rc));
                if (rc != ERR_PROTO && rc != ERR_VERSION)
                    break;
                continue;
            }
            on_link(w, (Tern__Envelope *)m, clock_now_ms());
            msg_free(m);
        }
        now = clock_now_ms();
        switch (w->state) {
        case WK_LINK_STATE_READY:
            if (msg_hb_is_dead(&w->hb, now)) {
                LOG_WARN("scheduler_lost", "silent_ms=%" PRIu64, now - w->hb.last_seen_ms);
                start_reset(w, "scheduler_lost");
            } else if (msg_hb_is_due(&w->hb, now)) {
                send_heartbeat(w, now);
            }
            break;
        case WK_LINK_STATE_REGISTERING:
            if (now >= w->register_at_ms &&
                now - w->register_at_ms >= (w->register_failed ? 20u : w->hb.interval_ms))
                send_register(w, now);
            if (now - w->register_warned_ms >= WK_REGISTER_WARN_MS)
                warn_registering(w, now);
            break;
        default:
            break;
        }
    }
    LOG_INFO("stopping", "plans=%" PRIu64 " results=%" PRIu64, w->n_plans, w->n_results);
    return 0;
}
