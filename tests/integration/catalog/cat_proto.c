/* cat_proto: malformed frames sent straight to the scheduler's gateway and worker sockets:
 * random bytes, truncated envelopes, wrong protocol_version, unknown req_id, messages of the
 * wrong direction, oversized repeated fields and an over-cap frame. After each case the
 * scheduler must still be running and answer a StatusRequest on a separate link; where the
 * protocol says an Error comes back (version, req_id 0, duplicate, empty prompt, bad ids, wrong
 * direction), it must come back with that code. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "cat.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/msg.h"
#include "proto/tern.pb-c.h"

static void sleep_ms(int ms)
{
    usleep((useconds_t)ms * 1000);
}

struct link {
    void *zctx;
    struct msg_sock s;
};

static int link_open(struct link *l, const char *ep)
{
    memset(l, 0, sizeof(*l));
    l->zctx = msg_context_create();
    if (!l->zctx)
        return ERR_INVAL;
    struct msg_sock_opts o = {.max_bytes = 64u << 20, .linger_ms = 0};
    return msg_sock_connect(&l->s, l->zctx, MSG_KIND_DEALER, ep, &tern__envelope__descriptor, &o);
}

static void link_close(struct link *l)
{
    msg_sock_close(&l->s);
    if (l->zctx)
        msg_context_destroy(l->zctx);
    memset(l, 0, sizeof(*l));
}

static void send_raw(struct link *l, const void *p, size_t n)
{
    (void)zmq_send(l->s.zsock, p, n, ZMQ_DONTWAIT);
}

static void env_init(Tern__Envelope *e, uint64_t req_id)
{
    tern__envelope__init(e);
    e->protocol_version = MSG_PROTOCOL_VERSION;
    e->req_id = req_id;
}

/* pack e into a malloc'd buffer */
static uint8_t *pack(const Tern__Envelope *e, size_t *n)
{
    *n = tern__envelope__get_packed_size(e);
    uint8_t *b = malloc(*n ? *n : 1);
    tern__envelope__pack(e, b);
    return b;
}

static void send_env(struct link *l, const Tern__Envelope *e)
{
    size_t n;
    uint8_t *b = pack(e, &n);
    send_raw(l, b, n);
    free(b);
}

/* Wait for an Error about req_id (req_id 0 = link error). Returns its code, 0 on timeout.
 * Other messages (HelloAck, heartbeats, token events) are skipped. */
static int wait_error(struct link *l, uint64_t req_id, int ms)
{
    uint64_t end = clock_now_ms() + (uint64_t)ms;
    while (clock_now_ms() < end) {
        if (msg_sock_wait(&l->s, 20) <= 0)
            continue;
        ProtobufCMessage *m;
        int rc;
        while ((rc = msg_recv(&l->s, NULL, &m)) != ERR_AGAIN) {
            if (rc < 0)
                continue;
            Tern__Envelope *e = (Tern__Envelope *)m;
            int code = 0;
            if (e->body_case == TERN__ENVELOPE__BODY_ERROR && e->req_id == req_id)
                code = e->error->has_code ? (int)e->error->code : -1;
            msg_free(m);
            if (code)
                return code;
        }
    }
    return 0;
}

static void hello(struct link *l)
{
    Tern__Envelope e;
    Tern__GatewayHello h = TERN__GATEWAY_HELLO__INIT;
    env_init(&e, 0);
    h.name = "catalog-attacker";
    e.body_case = TERN__ENVELOPE__BODY_GATEWAY_HELLO;
    e.gateway_hello = &h;
    send_env(l, &e);
    sleep_ms(50);
}

/* the scheduler is alive and answers a StatusRequest on the control link */
static bool sched_ok(struct link *ctl, int pid)
{
    int st;
    if (waitpid((pid_t)pid, &st, WNOHANG) != 0)
        return false;
    static uint64_t cookie = 1;
    Tern__Envelope e;
    Tern__StatusRequest q = TERN__STATUS_REQUEST__INIT;
    env_init(&e, 0);
    q.has_cookie = true;
    q.cookie = ++cookie;
    e.body_case = TERN__ENVELOPE__BODY_STATUS_REQUEST;
    e.status_request = &q;
    send_env(ctl, &e);
    uint64_t end = clock_now_ms() + 3000;
    while (clock_now_ms() < end) {
        if (msg_sock_wait(&ctl->s, 20) <= 0)
            continue;
        ProtobufCMessage *m;
        int rc;
        while ((rc = msg_recv(&ctl->s, NULL, &m)) != ERR_AGAIN) {
            if (rc < 0)
                continue;
            Tern__Envelope *r = (Tern__Envelope *)m;
            bool hit = r->body_case == TERN__ENVELOPE__BODY_STATUS && r->status->cookie == cookie;
            msg_free(m);
            if (hit)
                return true;
        }
    }
    return false;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint8_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint8_t)(g_rng >> 32);
}

static void send_random(struct link *l, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        b[i] = rnd();
    send_raw(l, b, n);
    free(b);
}

static void submit(struct link *l, uint64_t req_id, const uint32_t *ids, size_t n_ids,
                   uint32_t max_tokens, size_t n_stop, uint32_t top_logprobs)
{
    Tern__Envelope e;
    Tern__Submit s = TERN__SUBMIT__INIT;
    Tern__SamplingParams sp = TERN__SAMPLING_PARAMS__INIT;
    env_init(&e, req_id);
    s.prompt_ids = (uint32_t *)ids;
    s.n_prompt_ids = n_ids;
    s.has_max_tokens = true;
    s.max_tokens = max_tokens;
    uint32_t *stops = NULL;
    if (n_stop) {
        stops = calloc(n_stop, sizeof(uint32_t));
        for (size_t i = 0; i < n_stop; i++)
            stops[i] = (uint32_t)(i + 1);
        s.stop_ids = stops;
        s.n_stop_ids = n_stop;
    }
    if (top_logprobs) {
        sp.has_logprobs = sp.logprobs = true;
        sp.has_top_logprobs = true;
        sp.top_logprobs = top_logprobs;
        s.sampling = &sp;
    }
    e.body_case = TERN__ENVELOPE__BODY_SUBMIT;
    e.submit = &s;
    send_env(l, &e);
    free(stops);
}

static void abort_req(struct link *l, uint64_t req_id)
{
    Tern__Envelope e;
    Tern__Abort a = TERN__ABORT__INIT;
    env_init(&e, req_id);
    e.body_case = TERN__ENVELOPE__BODY_ABORT;
    e.abort = &a;
    send_env(l, &e);
}

struct run {
    struct link ctl;
    int pid;
    int n, failed;
};

static void verdict(struct run *r, const char *name, bool ok, const char *why)
{
    r->n++;
    bool up = sched_ok(&r->ctl, r->pid);
    if (!up || !ok) {
        r->failed++;
        fprintf(stderr, "FAIL proto_%s: %s\n", name, !up ? "scheduler down or silent" : why);
    }
}

/* expect an Error with code want about req_id (on link l) */
static void want_error(struct run *r, struct link *l, const char *name, uint64_t req_id, int want)
{
    int code = wait_error(l, req_id, 2000);
    char why[96];
    snprintf(why, sizeof(why), "Error code %d, want %d", code, want);
    verdict(r, name, code == want, why);
}

static void gw_cases(struct run *r, const char *ep)
{
    static const size_t rlen[] = {1, 2, 16, 100, 1000, 65536};
    struct link l;
    char name[64];
    for (size_t i = 0; i < sizeof(rlen) / sizeof(rlen[0]); i++) {
        link_open(&l, ep);
        send_random(&l, rlen[i]);
        snprintf(name, sizeof(name), "gw_random_%zu", rlen[i]);
        verdict(r, name, true, "");
        link_close(&l);
    }
    link_open(&l, ep);
    send_raw(&l, "", 0);
    verdict(r, "gw_empty_frame", true, "");
    link_close(&l);

    /* a valid Submit envelope, cut short */
    uint32_t ids[3] = {11, 22, 33};
    Tern__Envelope e;
    Tern__Submit s = TERN__SUBMIT__INIT;
    env_init(&e, 0xabcdef01);
    s.prompt_ids = ids;
    s.n_prompt_ids = 3;
    e.body_case = TERN__ENVELOPE__BODY_SUBMIT;
    e.submit = &s;
    size_t n;
    uint8_t *full = pack(&e, &n);
    size_t cuts[] = {1, 3, n / 2, n - 1};
    for (size_t i = 0; i < 4; i++) {
        link_open(&l, ep);
        hello(&l);
        send_raw(&l, full, cuts[i]);
        snprintf(name, sizeof(name), "gw_truncated_%zu_of_%zu", cuts[i], n);
        verdict(r, name, true, "");
        link_close(&l);
    }
    {
        uint8_t *junk = malloc(n + 5);
        memcpy(junk, full, n);
        memcpy(junk + n, "\xff\xff\xff\xff\x0f", 5);
        link_open(&l, ep);
        hello(&l);
        send_raw(&l, junk, n + 5);
        verdict(r, "gw_trailing_garbage", true, "");
        link_close(&l);
        free(junk);
    }
    free(full);

    /* wrong protocol_version: an Error VERSION about req_id 0 */
    static const uint32_t versions[] = {0, 2, 0xffffffffu};
    for (size_t i = 0; i < 3; i++) {
        link_open(&l, ep);
        Tern__Heartbeat hb = TERN__HEARTBEAT__INIT;
        env_init(&e, 0);
        e.protocol_version = versions[i];
        e.body_case = TERN__ENVELOPE__BODY_HEARTBEAT;
        e.heartbeat = &hb;
        send_env(&l, &e);
        snprintf(name, sizeof(name), "gw_version_%u", versions[i]);
        want_error(r, &l, name, 0, TERN__ERROR_CODE__ERROR_CODE_VERSION);
        link_close(&l);
    }

    link_open(&l, ep);
    hello(&l);
    abort_req(&l, 0xdeadbeefull);
    verdict(r, "gw_abort_unknown_req", true, "");
    submit(&l, 0, ids, 3, 4, 0, 0);
    want_error(r, &l, "gw_submit_req_id_0", 0, TERN__ERROR_CODE__ERROR_CODE_INVALID);
    submit(&l, 0x5001, ids, 0, 4, 0, 0);
    want_error(r, &l, "gw_submit_empty_prompt", 0x5001, TERN__ERROR_CODE__ERROR_CODE_INVALID);
    uint32_t big_ids[2] = {4000000000u, 7};
    submit(&l, 0x5002, big_ids, 2, 4, 0, 0);
    want_error(r, &l, "gw_submit_id_over_vocab", 0x5002, TERN__ERROR_CODE__ERROR_CODE_INVALID);
    submit(&l, 0x5003, ids, 3, 200, 0, 0);
    submit(&l, 0x5003, ids, 3, 200, 0, 0);
    want_error(r, &l, "gw_submit_duplicate", 0x5003, TERN__ERROR_CODE__ERROR_CODE_DUPLICATE);
    abort_req(&l, 0x5003);
    {
        size_t nb = 1500000;
        uint32_t *many = malloc(nb * sizeof(uint32_t));
        for (size_t i = 0; i < nb; i++)
            many[i] = (uint32_t)(i % 100);
        submit(&l, 0x5004, many, nb, 4, 0, 0);
        want_error(r, &l, "gw_submit_1500000_prompt_ids", 0x5004,
                   TERN__ERROR_CODE__ERROR_CODE_TOO_LONG);
        free(many);
    }
    submit(&l, 0x5005, ids, 3, 4, 100000, 0);
    want_error(r, &l, "gw_submit_100000_stop_ids", 0x5005, TERN__ERROR_CODE__ERROR_CODE_INVALID);
    submit(&l, 0x5006, ids, 3, 4, 0, 1000);
    want_error(r, &l, "gw_submit_top_logprobs_1000", 0x5006,
               TERN__ERROR_CODE__ERROR_CODE_INVALID);
    {
        Tern__TokenEvent te = TERN__TOKEN_EVENT__INIT;
        env_init(&e, 0x5007);
        e.body_case = TERN__ENVELOPE__BODY_TOKEN_EVENT;
        e.token_event = &te;
        send_env(&l, &e);
        want_error(r, &l, "gw_wrong_direction_token_event", 0x5007,
                   TERN__ERROR_CODE__ERROR_CODE_PROTO);
        Tern__Register reg = TERN__REGISTER__INIT;
        env_init(&e, 0x5008);
        e.body_case = TERN__ENVELOPE__BODY_REGISTER_WORKER;
        e.register_worker = &reg;
        send_env(&l, &e);
        want_error(r, &l, "gw_worker_msg_on_gw_link", 0x5008, TERN__ERROR_CODE__ERROR_CODE_PROTO);
        env_init(&e, 0x5009); /* no body at all */
        send_env(&l, &e);
        verdict(r, "gw_envelope_without_body", true, "");
    }
    {
        /* two-part message, then a frame over the 8 MiB cap (the peer is dropped) */
        zmq_send(l.s.zsock, "ab", 2, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(l.s.zsock, "cd", 2, ZMQ_DONTWAIT);
        verdict(r, "gw_multipart", true, "");
        send_random(&l, 9u << 20);
        sleep_ms(200);
        verdict(r, "gw_frame_9MiB", true, "");
    }
    link_close(&l);
}

static void wk_cases(struct run *r, const char *ep)
{
    struct link l;
    char name[64];
    static const size_t rlen[] = {1, 64, 4096};
    for (size_t i = 0; i < 3; i++) {
        link_open(&l, ep);
        send_random(&l, rlen[i]);
        snprintf(name, sizeof(name), "wk_random_%zu", rlen[i]);
        verdict(r, name, true, "");
        link_close(&l);
    }
    Tern__Envelope e;
    link_open(&l, ep);
    Tern__Heartbeat hb = TERN__HEARTBEAT__INIT;
    env_init(&e, 0);
    e.protocol_version = 3;
    e.body_case = TERN__ENVELOPE__BODY_HEARTBEAT;
    e.heartbeat = &hb;
    send_env(&l, &e);
    want_error(r, &l, "wk_version_3", 0, TERN__ERROR_CODE__ERROR_CODE_VERSION);
    link_close(&l);

    /* a Register announcing more than the scheduler can account: refused (INVALID), not an
     * allocation of 20 GB; then one announcing 2^32-1 sequences */
    {
        static const struct { const char *name; uint32_t blocks, seqs; } big[] = {
            {"wk_register_4e9_kv_blocks", 4000000000u, 8},
            {"wk_register_4e9_max_seqs", 64, 4000000000u},
        };
        for (size_t i = 0; i < 2; i++) {
            link_open(&l, ep);
            Tern__Register reg = TERN__REGISTER__INIT;
            reg.worker_id = (char *)"catalog-big";
            reg.has_max_model_len = reg.has_max_seqs = reg.has_block_tokens = true;
            reg.has_kv_blocks = reg.has_vocab_size = true;
            reg.max_model_len = 4096;
            reg.max_seqs = big[i].seqs;
            reg.block_tokens = 16;
            reg.kv_blocks = big[i].blocks;
            reg.vocab_size = 1000;
            env_init(&e, 0);
            e.body_case = TERN__ENVELOPE__BODY_REGISTER_WORKER;
            e.register_worker = &reg;
            send_env(&l, &e);
            want_error(r, &l, big[i].name, 0, TERN__ERROR_CODE__ERROR_CODE_INVALID);
            link_close(&l);
        }
    }

    /* a StepResult for a step and request nobody knows, with a million tokens */
    link_open(&l, ep);
    Tern__StepResult sr = TERN__STEP_RESULT__INIT;
    Tern__SeqResult q = TERN__SEQ_RESULT__INIT;
    Tern__SeqResult *qs[1] = {&q};
    size_t nt = 1000000;
    uint32_t *toks = calloc(nt, sizeof(uint32_t));
    q.has_req_id = true;
    q.req_id = 0x7777;
    q.token_ids = toks;
    q.n_token_ids = nt;
    sr.has_step_id = true;
    sr.step_id = 999999;
    sr.seqs = qs;
    sr.n_seqs = 1;
    sr.has_done = sr.done = true;
    env_init(&e, 0);
    e.body_case = TERN__ENVELOPE__BODY_STEP_RESULT;
    e.step_result = &sr;
    send_env(&l, &e);
    verdict(r, "wk_unknown_step_result_1M_tokens", true, "");
    size_t n;
    uint8_t *full = pack(&e, &n);
    send_raw(&l, full, n / 3);
    verdict(r, "wk_truncated_step_result", true, "");
    free(full);
    free(toks);
    /* a gateway message on the worker link */
    uint32_t ids[2] = {1, 2};
    submit(&l, 0x6001, ids, 2, 4, 0, 0);
    verdict(r, "wk_submit_on_worker_link", true, "");
    send_random(&l, 9u << 20);
    sleep_ms(200);
    verdict(r, "wk_frame_9MiB", true, "");
    link_close(&l);
}

int cat_proto_run(const char *gw_endpoint, const char *wk_endpoint, int sched_pid, int *failed)
{
    struct run r = {.pid = sched_pid};
    if (link_open(&r.ctl, gw_endpoint) < 0) {
        *failed = 1;
        return 0;
    }
    hello(&r.ctl);
    gw_cases(&r, gw_endpoint);
    wk_cases(&r, wk_endpoint);
    link_close(&r.ctl);
    *failed = r.failed;
    return r.n;
}
